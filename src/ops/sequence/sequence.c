/* Sequence and optional ops. Sequences are values of kind SN_KIND_SEQUENCE
 * whose data is an array of item tensors; their shapes are only known while
 * running, so these ops allocate their outputs. */
#include <string.h>

#include "ops/sequence/value_util.h"

static int seq_out_infer(sn_infer_ctx *c, sn_dtype elem) {
    if (c->out[0]) {
        c->out[0]->kind = SN_KIND_SEQUENCE;
        c->out[0]->dtype = elem;
        c->out[0]->rank = SN_RANK_UNKNOWN;
    }
    return SNUG_OK;
}

static int need_seq(sn_kctx *c, int i) {
    if (i >= c->n_in || !c->in[i] || c->in[i]->kind != SN_KIND_SEQUENCE)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "input %d must be a sequence", i);
    return SNUG_OK;
}

/* Reads an optional position input; default def; negative counts from n. */
static int seq_pos(sn_kctx *c, int i, int64_t n, int64_t def, bool insert, int64_t *pos) {
    int64_t p = def;
    if (i < c->n_in && c->in[i] && sn_tensor_numel(c->in[i]) > 0)
        p = sn_load_i64(c->in[i]->dtype, c->in[i]->data, 0);
    if (p < 0)
        p += n;
    if (p < 0 || p > n || (!insert && p == n))
        return sn_kfail(c->err, c->node, SNUG_ERR_RANGE, "position %lld out of range for a sequence of %lld",
                        (long long)p, (long long)n);
    *pos = p;
    return SNUG_OK;
}

static int empty_infer(sn_infer_ctx *c) {
    return seq_out_infer(c, (sn_dtype)sn_attr_int(c->node, "dtype", SN_F32));
}
static int empty_run(sn_kctx *c) {
    return sn_kctx_alloc_sequence(c, 0, (sn_dtype)sn_attr_int(c->node, "dtype", SN_F32), 0) ? SNUG_OK
                                                                                              : c->err->code;
}

static int construct_infer(sn_infer_ctx *c) {
    return seq_out_infer(c, c->n_in > 0 && c->in[0] ? c->in[0]->dtype : SN_UNDEFINED);
}
static int construct_run(sn_kctx *c) {
    for (int i = 1; i < c->n_in; i++)
        if (c->in[i]->dtype != c->in[0]->dtype)
            return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "inputs differ in type");
    sn_tensor *items = sn_kctx_alloc_sequence(c, 0, c->n_in ? c->in[0]->dtype : SN_F32, c->n_in);
    if (!items)
        return c->err->code;
    for (int i = 0; i < c->n_in; i++)
        SN_TRY(sn_value_copy_extra(c, 0, c->in[i], &items[i]));
    return SNUG_OK;
}

static int insert_infer(sn_infer_ctx *c) { return seq_out_infer(c, c->in[0] ? c->in[0]->dtype : SN_UNDEFINED); }
static int insert_run(sn_kctx *c) {
    SN_TRY(need_seq(c, 0));
    const sn_tensor *s = c->in[0], *t = c->in[1];
    if (s->n_items && t->dtype != s->dtype)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "tensor type %s differs from the sequence's %s",
                        sn_dtype_name(t->dtype), sn_dtype_name(s->dtype));
    int64_t pos = 0;
    SN_TRY(seq_pos(c, 2, s->n_items, s->n_items, true, &pos));
    sn_tensor *items = sn_kctx_alloc_sequence(c, 0, t->dtype, s->n_items + 1);
    if (!items)
        return c->err->code;
    const sn_tensor *src = s->data;
    for (int64_t i = 0, k = 0; i <= s->n_items; i++) {
        if (i == pos)
            SN_TRY(sn_value_copy_extra(c, 0, t, &items[i]));
        else
            SN_TRY(sn_value_copy_extra(c, 0, &src[k++], &items[i]));
    }
    return SNUG_OK;
}

static int erase_run(sn_kctx *c) {
    SN_TRY(need_seq(c, 0));
    const sn_tensor *s = c->in[0];
    int64_t pos = 0;
    SN_TRY(seq_pos(c, 1, s->n_items, s->n_items - 1, false, &pos));
    sn_tensor *items = sn_kctx_alloc_sequence(c, 0, s->dtype, s->n_items - 1);
    if (!items)
        return c->err->code;
    const sn_tensor *src = s->data;
    for (int64_t i = 0, k = 0; i < s->n_items; i++)
        if (i != pos)
            SN_TRY(sn_value_copy_extra(c, 0, &src[i], &items[k++]));
    return SNUG_OK;
}

static int at_infer(sn_infer_ctx *c) {
    c->out[0]->kind = SN_KIND_TENSOR;
    c->out[0]->dtype = c->in[0] ? c->in[0]->dtype : SN_UNDEFINED;
    c->out[0]->rank = SN_RANK_UNKNOWN;
    return SNUG_OK;
}
static int at_run(sn_kctx *c) {
    SN_TRY(need_seq(c, 0));
    int64_t pos = 0;
    SN_TRY(seq_pos(c, 1, c->in[0]->n_items, 0, false, &pos));
    return sn_value_emit(c, 0, &((const sn_tensor *)c->in[0]->data)[pos]);
}

static int length_infer(sn_infer_ctx *c) {
    c->out[0]->kind = SN_KIND_TENSOR;
    c->out[0]->dtype = SN_I64;
    c->out[0]->rank = 0;
    return SNUG_OK;
}
static int length_run(sn_kctx *c) {
    SN_TRY(need_seq(c, 0));
    *(int64_t *)c->out[0]->data = c->in[0]->n_items;
    return SNUG_OK;
}

static int split_infer(sn_infer_ctx *c) { return seq_out_infer(c, c->in[0] ? c->in[0]->dtype : SN_UNDEFINED); }
static int split_run(sn_kctx *c) {
    const sn_tensor *x = c->in[0];
    int axis;
    if (!sn_axis_norm(sn_attr_int(c->node, "axis", 0), x->rank, &axis))
        return sn_kfail(c->err, c->node, SNUG_ERR_RANGE, "axis out of range");
    int keepdims = (int)sn_attr_int(c->node, "keepdims", 1);
    int64_t dim = x->dims[axis], sizes_buf[1024], *sizes = sizes_buf, n = 0;
    const sn_tensor *sp = c->n_in > 1 ? c->in[1] : NULL;
    if (sp && sn_tensor_numel(sp) > 0 && sp->rank == 0) {
        int64_t chunk = sn_load_i64(sp->dtype, sp->data, 0);
        if (chunk <= 0)
            return sn_kfail(c->err, c->node, SNUG_ERR_RANGE, "split must be positive");
        for (int64_t o = 0; o < dim && n < 1024; o += chunk)
            sizes[n++] = o + chunk > dim ? dim - o : chunk;
        keepdims = 1;
    } else if (sp) {
        n = sn_tensor_numel(sp);
        if (n > 1024)
            return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "more than 1024 splits");
        int64_t tot = 0;
        for (int64_t i = 0; i < n; i++) {
            sizes[i] = sn_load_i64(sp->dtype, sp->data, (size_t)i);
            if (sizes[i] < 0)
                return sn_kfail(c->err, c->node, SNUG_ERR_RANGE, "negative split");
            tot += sizes[i];
        }
        if (tot != dim)
            return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "splits sum to %lld, axis has %lld", (long long)tot,
                            (long long)dim);
        keepdims = 1;
    } else {
        if (dim > 1024)
            return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "more than 1024 splits");
        for (int64_t i = 0; i < dim; i++)
            sizes[n++] = 1;
    }
    sn_tensor *items = sn_kctx_alloc_sequence(c, 0, x->dtype, n);
    if (!items)
        return c->err->code;
    size_t es = sn_dtype_size(x->dtype);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++)
        outer *= x->dims[d];
    for (int d = axis + 1; d < x->rank; d++)
        inner *= x->dims[d];
    int64_t off = 0;
    for (int64_t i = 0; i < n; i++) {
        sn_tensor *it = &items[i];
        it->kind = SN_KIND_TENSOR;
        it->dtype = x->dtype;
        it->rank = 0;
        for (int d = 0; d < x->rank; d++) {
            if (d == axis && !keepdims)
                continue;
            it->dims[it->rank++] = d == axis ? sizes[i] : x->dims[d];
        }
        size_t nb = sn_tensor_nbytes(it);
        uint8_t *o = sn_kctx_alloc_extra(c, 0, nb);
        if (!o)
            return c->err->code;
        it->data = o;
        const uint8_t *src = x->data;
        for (int64_t a = 0; a < outer && sizes[i] * inner > 0; a++)
            memcpy(o + (size_t)(a * sizes[i] * inner) * es, src + (size_t)((a * dim + off) * inner) * es,
                   (size_t)(sizes[i] * inner) * es);
        off += sizes[i];
    }
    return SNUG_OK;
}

static int concat_infer(sn_infer_ctx *c) {
    c->out[0]->kind = SN_KIND_TENSOR;
    c->out[0]->dtype = c->in[0] ? c->in[0]->dtype : SN_UNDEFINED;
    c->out[0]->rank = SN_RANK_UNKNOWN;
    return SNUG_OK;
}
static int concat_run(sn_kctx *c) {
    SN_TRY(need_seq(c, 0));
    const sn_tensor *s = c->in[0], *items = s->data;
    int new_axis = (int)sn_attr_int(c->node, "new_axis", 0);
    if (s->n_items < 1)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "empty sequence");
    const sn_tensor *f = &items[0];
    int r = f->rank + (new_axis ? 1 : 0), axis;
    if (!sn_axis_norm(sn_attr_int(c->node, "axis", 0), r, &axis))
        return sn_kfail(c->err, c->node, SNUG_ERR_RANGE, "axis out of range");
    int64_t dims[SN_MAX_RANK], total = 0;
    for (int64_t i = 0; i < s->n_items; i++) {
        const sn_tensor *t = &items[i];
        if (t->rank != f->rank)
            return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "items differ in rank");
        for (int d = 0; d < f->rank; d++)
            if ((new_axis || d != axis) && t->dims[d] != f->dims[d])
                return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "items differ in dim %d", d);
        total += new_axis ? 1 : t->dims[axis];
    }
    for (int d = 0; d < r && !new_axis; d++)
        dims[d] = d == axis ? total : f->dims[d];
    if (new_axis) {
        for (int d = 0, k = 0; d < r; d++)
            dims[d] = d == axis ? total : f->dims[k++];
    }
    uint8_t *out = sn_kctx_alloc_output(c, 0, f->dtype, r, dims);
    if (!out)
        return c->err->code;
    size_t es = sn_dtype_size(f->dtype);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++)
        outer *= dims[d];
    for (int d = axis + 1; d < r; d++)
        inner *= dims[d];
    int64_t off = 0;
    for (int64_t i = 0; i < s->n_items; i++) {
        int64_t len = new_axis ? 1 : items[i].dims[axis];
        const uint8_t *src = items[i].data;
        for (int64_t a = 0; a < outer && len * inner > 0; a++)
            memcpy(out + (size_t)((a * total + off) * inner) * es, src + (size_t)(a * len * inner) * es,
                   (size_t)(len * inner) * es);
        off += len;
    }
    return SNUG_OK;
}

static int map_infer(sn_infer_ctx *c) {
    for (int j = 0; j < c->n_out; j++)
        if (c->out[j]) {
            c->out[j]->kind = SN_KIND_SEQUENCE;
            const sn_graph *b = c->node->n_sub ? c->node->sub[0] : NULL;
            c->out[j]->dtype = b && j < b->n_outputs ? b->values[b->outputs[j]].info.dtype : SN_UNDEFINED;
        }
    return SNUG_OK;
}
static int map_run(sn_kctx *c) {
    SN_TRY(need_seq(c, 0));
    int64_t n = c->in[0]->n_items;
    const sn_graph *body = c->node->sub[0];
    if (c->n_in > 64 || body->n_outputs > 64 || body->n_inputs != c->n_in)
        return sn_kfail(c->err, c->node, SNUG_ERR_GRAPH, "body signature does not match");
    sn_tensor *res[64];
    for (int j = 0; j < c->n_out; j++) {
        sn_tensor *items = sn_kctx_alloc_sequence(c, j, SN_UNDEFINED, n);
        if (!items)
            return c->err->code;
        res[j] = items;
    }
    for (int64_t i = 0; i < n; i++) {
        sn_tensor in[64];
        for (int k = 0; k < c->n_in; k++) {
            const sn_tensor *x = c->in[k];
            if (x->kind == SN_KIND_SEQUENCE) {
                if (x->n_items != n)
                    return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "sequences differ in length");
                in[k] = ((const sn_tensor *)x->data)[i];
            } else {
                in[k] = *x;
            }
        }
        const sn_tensor *outs[64];
        int n_out;
        SN_TRY(sn_kctx_run_subgraph(c, 0, c->n_in, in, outs, &n_out));
        for (int j = 0; j < c->n_out; j++) {
            SN_TRY(sn_value_copy_extra(c, j, outs[j], &res[j][i]));
            c->out[j]->dtype = outs[j]->dtype;
        }
    }
    return SNUG_OK;
}

static int optional_infer(sn_infer_ctx *c) {
    sn_tensor *o = c->out[0];
    if (c->n_in > 0 && c->in[0]) {
        o->kind = c->in[0]->kind;
        o->dtype = c->in[0]->dtype;
    } else {
        o->kind = SN_KIND_NONE;
    }
    o->optional = 1;
    o->rank = SN_RANK_UNKNOWN;
    return SNUG_OK;
}
static int optional_run(sn_kctx *c) {
    if (c->n_in < 1 || !c->in[0])
        return sn_kctx_set_none(c, 0);
    SN_TRY(sn_value_emit(c, 0, c->in[0]));
    c->out[0]->optional = 1;
    return SNUG_OK;
}

static int has_infer(sn_infer_ctx *c) {
    c->out[0]->kind = SN_KIND_TENSOR;
    c->out[0]->dtype = SN_BOOL;
    c->out[0]->rank = 0;
    return SNUG_OK;
}
static int has_run(sn_kctx *c) {
    bool has = c->n_in > 0 && c->in[0] && c->in[0]->kind != SN_KIND_NONE;
    *(uint8_t *)c->out[0]->data = has;
    return SNUG_OK;
}

static int get_infer(sn_infer_ctx *c) {
    if (c->in[0]) {
        c->out[0]->kind = c->in[0]->kind == SN_KIND_NONE ? SN_KIND_TENSOR : c->in[0]->kind;
        c->out[0]->dtype = c->in[0]->dtype;
    }
    c->out[0]->rank = SN_RANK_UNKNOWN;
    return SNUG_OK;
}
static int get_run(sn_kctx *c) {
    if (!c->in[0] || c->in[0]->kind == SN_KIND_NONE)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "the optional input has no value");
    SN_TRY(sn_value_emit(c, 0, c->in[0]));
    c->out[0]->optional = 0;
    return SNUG_OK;
}

#define SEQ_OP(op, since, req, inf, fn)                                                                   \
    {.domain = "", .name = op, .since_version = since, .required = req, .infer = inf, \
     .flags = SN_OP_ALLOCS_OUTPUTS, .cpu = {.run = fn}}
const sn_op_def sn_ops_sequence[] = {
    SEQ_OP("SequenceEmpty", 11, SN_IN_NONE, empty_infer, empty_run),
    SEQ_OP("SequenceConstruct", 11, 0, construct_infer, construct_run),
    SEQ_OP("SequenceInsert", 11, 0x3, insert_infer, insert_run),
    SEQ_OP("SequenceErase", 11, 0, insert_infer, erase_run),
    SEQ_OP("SequenceAt", 11, 0x3, at_infer, at_run),
    {.domain = "", .name = "SequenceLength", .since_version = 11, .infer = length_infer, .cpu = {.run = length_run}},
    SEQ_OP("SplitToSequence", 11, 0, split_infer, split_run),
    SEQ_OP("ConcatFromSequence", 11, 0, concat_infer, concat_run),
    SEQ_OP("SequenceMap", 17, 0, map_infer, map_run),
    SEQ_OP("Optional", 15, SN_IN_NONE, optional_infer, optional_run),
    {.domain = "", .name = "OptionalHasElement", .since_version = 15, .required = SN_IN_NONE, .infer = has_infer, .cpu = {.run = has_run}},
    SEQ_OP("OptionalGetElement", 15, 0, get_infer, get_run),
    {0},
};
