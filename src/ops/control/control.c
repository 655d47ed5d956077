/* Control flow: If, Loop, Scan. Bodies run through child executors
 * (sn_kctx_run_subgraph); results are deep-copied out because a body's
 * values are reused by its next run. */
#include <string.h>

#include "ops/sequence/value_util.h"

/* Output infos from a subgraph's inferred outputs (kind, dtype; shape
 * unknown: these ops decide shapes while running). A body output whose type
 * inference could not find takes the type of the node input that feeds the
 * same state (from[j], NULL for none): a loop-carried value keeps its type. */
static void infer_from_body(sn_infer_ctx *c, const sn_graph *body, int first_body_out, int first_out, int count,
                            bool stacked, const sn_tensor *const *from) {
    for (int j = 0; j < count; j++) {
        sn_tensor *o = c->out[first_out + j];
        int bo = first_body_out + j;
        if (!o || bo >= body->n_outputs)
            continue;
        const sn_tensor *bi = &body->values[body->outputs[bo]].info;
        const sn_tensor *f = from ? from[j] : NULL;
        o->kind = bi->kind;
        o->dtype = bi->dtype;
        o->optional = bi->optional;
        o->rank = bi->rank >= 0 && stacked ? bi->rank + 1 : bi->rank;
        if (f && bi->kind == SN_KIND_TENSOR && bi->dtype == SN_UNDEFINED) {
            o->kind = f->kind;
            o->dtype = f->dtype;
            if (o->rank < 0 && f->kind == SN_KIND_TENSOR)
                o->rank = f->rank;
        }
        for (int d = 0; d < o->rank; d++)
            o->dims[d] = SN_DIM_UNKNOWN;
    }
}

/* ---- If ----------------------------------------------------------------- */

/* The outputs are what both branches agree on (ONNX's union of the branch
 * types): a type either branch knows, a rank only when both have it, since
 * the branch taken is known only at run time. */
static int if_infer(sn_infer_ctx *c) {
    const sn_node *n = c->node;
    int kt = -1, ke = -1;
    for (int i = 0; i < n->n_sub; i++) {
        if (!strcmp(n->sub_attr[i], "then_branch"))
            kt = i;
        else if (!strcmp(n->sub_attr[i], "else_branch"))
            ke = i;
    }
    if (kt < 0 || ke < 0)
        return sn_kfail(c->err, n, SNUG_ERR_GRAPH, "needs then_branch and else_branch");
    const sn_graph *gt = n->sub[kt], *ge = n->sub[ke];
    if (gt->n_outputs != c->n_out || ge->n_outputs != c->n_out)
        return sn_kfail(c->err, n, SNUG_ERR_GRAPH, "then_branch has %d outputs, else_branch %d, the node %d",
                        gt->n_outputs, ge->n_outputs, c->n_out);
    for (int j = 0; j < c->n_out; j++) {
        sn_tensor *o = c->out[j];
        if (!o)
            continue;
        const sn_tensor *a = &gt->values[gt->outputs[j]].info, *b = &ge->values[ge->outputs[j]].info;
        bool a_none = a->kind == SN_KIND_TENSOR && a->dtype == SN_UNDEFINED && a->rank < 0;
        bool b_none = b->kind == SN_KIND_TENSOR && b->dtype == SN_UNDEFINED && b->rank < 0;
        if (a_none && !b_none) {
            const sn_tensor *t = a;
            a = b;
            b = t;
        }
        if (a->kind == SN_KIND_TENSOR && b->kind == SN_KIND_TENSOR && a->dtype != SN_UNDEFINED &&
            b->dtype != SN_UNDEFINED && a->dtype != b->dtype)
            return sn_kfail(c->err, n, SNUG_ERR_TYPE, "output %d is %s in then_branch, %s in else_branch", j,
                            sn_dtype_name(gt->values[gt->outputs[j]].info.dtype),
                            sn_dtype_name(ge->values[ge->outputs[j]].info.dtype));
        o->kind = a->kind;
        o->dtype = a->dtype != SN_UNDEFINED ? a->dtype : b->kind == a->kind ? b->dtype : SN_UNDEFINED;
        o->optional = a->optional || b->optional;
        o->rank = a->kind == b->kind && a->rank == b->rank ? a->rank : SN_RANK_UNKNOWN;
        for (int d = 0; d < o->rank; d++)
            o->dims[d] = SN_DIM_UNKNOWN;
    }
    return SNUG_OK;
}

static int if_run(sn_kctx *c) {
    const sn_tensor *cond = c->in[0];
    if (!cond || sn_tensor_numel(cond) < 1)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "cond must hold one element");
    bool v = sn_load_f64(cond->dtype, cond->data, 0) != 0;
    int k = sn_kctx_subgraph_index(c, v ? "then_branch" : "else_branch");
    if (k < 0)
        return sn_kfail(c->err, c->node, SNUG_ERR_GRAPH, "missing %s", v ? "then_branch" : "else_branch");
    const sn_tensor *outs[256];
    int n_out = 0;
    if (sn_kctx_subgraph(c, k)->n_outputs > 256)
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "more than 256 outputs");
    SN_TRY(sn_kctx_run_subgraph(c, k, 0, NULL, outs, &n_out));
    if (n_out != c->n_out)
        return sn_kfail(c->err, c->node, SNUG_ERR_GRAPH, "branch gave %d outputs, expected %d", n_out, c->n_out);
    for (int j = 0; j < n_out; j++)
        SN_TRY(sn_value_emit(c, j, outs[j]));
    return SNUG_OK;
}

/* ---- Loop --------------------------------------------------------------- */

static int loop_infer(sn_infer_ctx *c) {
    const sn_node *n = c->node;
    if (n->n_sub < 1)
        return sn_kfail(c->err, n, SNUG_ERR_GRAPH, "needs a body");
    const sn_graph *body = n->sub[0];
    int n_carried = c->n_in - 2;
    if (n_carried < 0 || body->n_inputs != n_carried + 2 || body->n_outputs < n_carried + 1)
        return sn_kfail(c->err, n, SNUG_ERR_GRAPH, "body signature does not match the node (%d inputs, %d outputs)",
                        body->n_inputs, body->n_outputs);
    infer_from_body(c, body, 1, 0, n_carried, false, c->in + 2);
    infer_from_body(c, body, 1 + n_carried, n_carried, c->n_out - n_carried, true, NULL);
    return SNUG_OK;
}

typedef struct stack {
    sn_tensor *items; /* heap copies, one per iteration */
    int64_t n, cap;
} stack;

static int stack_push(stack *s, const sn_tensor *t) {
    if (s->n == s->cap) {
        int64_t nc = s->cap ? s->cap * 2 : 16;
        sn_tensor *it = sn_realloc(s->items, sizeof *it * (size_t)nc);
        if (!it)
            return SNUG_ERR_OOM;
        s->items = it;
        s->cap = nc;
    }
    SN_TRY(sn_value_heap_copy(t, &s->items[s->n]));
    s->n++;
    return SNUG_OK;
}

/* Replaces state[0..n) with heap copies of outs (which may alias the old
 * state: all copies are made before anything is freed). */
static int replace_state(sn_tensor *state, const sn_tensor *const *outs, int n) {
    sn_tensor tmp[64];
    for (int base = 0; base < n; base += 64) {
        int k = n - base < 64 ? n - base : 64;
        for (int j = 0; j < k; j++) {
            int rc = sn_value_heap_copy(outs[base + j], &tmp[j]);
            if (rc != SNUG_OK) {
                while (j-- > 0)
                    sn_value_heap_free(&tmp[j]);
                return rc;
            }
        }
        for (int j = 0; j < k; j++) {
            sn_value_heap_free(&state[base + j]);
            state[base + j] = tmp[j];
        }
    }
    return SNUG_OK;
}

static void stack_free(stack *s) {
    for (int64_t i = 0; i < s->n; i++)
        sn_value_heap_free(&s->items[i]);
    sn_free(s->items);
}

/* Stacks the items along a new axis `axis` into output j (items share a shape). */
static int emit_stacked(sn_kctx *c, int j, const stack *s, int axis, bool reverse) {
    if (!c->out[j])
        return SNUG_OK;
    if (s->n == 0) {
        int64_t d0 = 0;
        return sn_kctx_alloc_output(c, j, c->out[j]->dtype != SN_UNDEFINED ? c->out[j]->dtype : SN_F32, 1, &d0)
                   ? SNUG_OK
                   : c->err->code;
    }
    const sn_tensor *f = &s->items[0];
    if (f->kind != SN_KIND_TENSOR)
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "scan output %d is not a tensor", j);
    if (f->rank + 1 > SN_MAX_RANK)
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "scan output rank too large");
    for (int64_t i = 1; i < s->n; i++)
        if (!sn_shape_equal(&s->items[i], f) || s->items[i].dtype != f->dtype)
            return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "scan output %d changes shape between iterations", j);
    if (axis < 0 || axis > f->rank)
        return sn_kfail(c->err, c->node, SNUG_ERR_RANGE, "scan output axis %d out of range", axis);
    int64_t dims[SN_MAX_RANK];
    for (int d = 0, k = 0; d <= f->rank; d++)
        dims[d] = d == axis ? s->n : f->dims[k++];
    uint8_t *out = sn_kctx_alloc_output(c, j, f->dtype, f->rank + 1, dims);
    if (!out)
        return c->err->code;
    size_t es = sn_dtype_size(f->dtype);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++)
        outer *= f->dims[d];
    for (int d = axis; d < f->rank; d++)
        inner *= f->dims[d];
    for (int64_t it = 0; it < s->n; it++) {
        const uint8_t *src = s->items[reverse ? s->n - 1 - it : it].data;
        for (int64_t o = 0; o < outer && inner > 0; o++)
            memcpy(out + ((o * s->n + it) * inner) * es, src + o * inner * es, (size_t)inner * es);
    }
    if (f->dtype == SN_STRING) {
        /* string payloads live in the heap copies: copy them to the output's memory */
        sn_tensor tmp = *c->out[j];
        sn_tensor cp;
        SN_TRY(sn_value_copy_extra(c, j, &tmp, &cp));
        c->out[j]->data = cp.data;
    }
    return SNUG_OK;
}

static int loop_run(sn_kctx *c) {
    const sn_node *n = c->node;
    const sn_graph *body = n->sub[0];
    int n_carried = c->n_in - 2, n_scan = body->n_outputs - 1 - n_carried;
    int64_t max_trip = -1;
    if (c->in[0] && sn_tensor_numel(c->in[0]) > 0)
        max_trip = sn_load_i64(c->in[0]->dtype, c->in[0]->data, 0);
    if (c->in[0] && sn_tensor_numel(c->in[0]) > 0 && max_trip < 0)
        return sn_kfail(c->err, n, SNUG_ERR_INVALID_ARG, "trip count M is %lld, negative", (long long)max_trip);
    int64_t max_iter = sn_kctx_limits(c)->max_iterations;
    bool cond = true;
    if (c->n_in > 1 && c->in[1] && sn_tensor_numel(c->in[1]) > 0)
        cond = sn_load_f64(c->in[1]->dtype, c->in[1]->data, 0) != 0;
    int rc = SNUG_OK;
    sn_tensor *bin = sn_calloc((size_t)n_carried + 2, sizeof *bin);
    sn_tensor *carried = sn_calloc((size_t)n_carried + 1, sizeof *carried);
    stack *scans = sn_calloc((size_t)(n_scan > 0 ? n_scan : 1), sizeof *scans);
    const sn_tensor **outs = sn_calloc((size_t)body->n_outputs + 1, sizeof *outs);
    int64_t iter = 0;
    uint8_t cond_b = 1;
    if (!bin || !carried || !scans || !outs) {
        rc = sn_kfail(c->err, n, SNUG_ERR_OOM, "out of memory");
        goto done;
    }
    for (int j = 0; j < n_carried; j++) {
        if (!c->in[2 + j]) {
            rc = sn_kfail(c->err, n, SNUG_ERR_GRAPH, "loop-carried input %d is absent", j);
            goto done;
        }
        if ((rc = sn_value_heap_copy(c->in[2 + j], &carried[j])) != SNUG_OK) {
            rc = sn_kfail(c->err, n, rc, "out of memory");
            goto done;
        }
    }
    bin[0] = (sn_tensor){.kind = SN_KIND_TENSOR, .dtype = SN_I64, .rank = 0, .data = &iter};
    bin[1] = (sn_tensor){.kind = SN_KIND_TENSOR, .dtype = SN_BOOL, .rank = 0, .data = &cond_b};
    for (; (max_trip < 0 || iter < max_trip) && cond; iter++) {
        if (iter >= max_iter) { /* with or without M and a condition */
            rc = sn_kfail(c->err, n, SNUG_ERR_RANGE, "more than %lld iterations (snug.max_loop_iterations)",
                          (long long)max_iter);
            goto done;
        }
        cond_b = 1;
        for (int j = 0; j < n_carried; j++)
            bin[2 + j] = carried[j];
        int n_out;
        if ((rc = sn_kctx_run_subgraph(c, 0, n_carried + 2, bin, outs, &n_out)) != SNUG_OK)
            goto done;
        if (!outs[0] || sn_tensor_numel(outs[0]) < 1) {
            rc = sn_kfail(c->err, n, SNUG_ERR_SHAPE, "body condition output is empty");
            goto done;
        }
        cond = sn_load_f64(outs[0]->dtype, outs[0]->data, 0) != 0;
        /* Scan outputs first: they may alias the carried values being replaced. */
        for (int j = 0; j < n_scan; j++)
            if ((rc = stack_push(&scans[j], outs[1 + n_carried + j])) != SNUG_OK) {
                rc = sn_kfail(c->err, n, rc, "out of memory");
                goto done;
            }
        if ((rc = replace_state(carried, outs + 1, n_carried)) != SNUG_OK) {
            rc = sn_kfail(c->err, n, rc, "out of memory");
            goto done;
        }
    }
    for (int j = 0; j < n_carried && rc == SNUG_OK; j++)
        rc = sn_value_emit(c, j, &carried[j]);
    for (int j = 0; j < n_scan && rc == SNUG_OK; j++) {
        if (scans[j].n && scans[j].items[0].kind == SN_KIND_SEQUENCE) {
            rc = sn_kfail(c->err, n, SNUG_ERR_UNSUPPORTED, "scan outputs of sequences");
            break;
        }
        rc = emit_stacked(c, n_carried + j, &scans[j], 0, false);
    }
done:
    if (carried)
        for (int j = 0; j < n_carried; j++)
            sn_value_heap_free(&carried[j]);
    if (scans)
        for (int j = 0; j < n_scan; j++)
            stack_free(&scans[j]);
    sn_free(bin);
    sn_free(carried);
    sn_free(scans);
    sn_free(outs);
    return rc;
}

/* ---- Scan (opset 9+; opset 8 with its batch axis) ---------------------- */

static int scan_infer(sn_infer_ctx *c) {
    const sn_node *n = c->node;
    if (n->n_sub < 1)
        return sn_kfail(c->err, n, SNUG_ERR_GRAPH, "needs a body");
    const sn_graph *body = n->sub[0];
    int64_t m = sn_attr_int(n, "num_scan_inputs", -1);
    int first = n->opset < 9 ? 1 : 0;
    int n_state = c->n_in - first - (int)m;
    if (m < 1 || n_state < 0 || body->n_inputs != n_state + m || body->n_outputs < n_state)
        return sn_kfail(c->err, n, SNUG_ERR_GRAPH, "body signature does not match num_scan_inputs");
    /* opset 8 stacks the final states of each batch entry */
    infer_from_body(c, body, 0, 0, n_state, first == 1, first ? NULL : c->in + first);
    infer_from_body(c, body, n_state, n_state, c->n_out - n_state, true, NULL);
    return SNUG_OK;
}

/* Copies slice idx along axis of t into dst (contiguous, rank-1). */
static void take_slice(const sn_tensor *t, int axis, int64_t idx, sn_tensor *dst) {
    size_t es = sn_dtype_size(t->dtype);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++)
        outer *= t->dims[d];
    for (int d = axis + 1; d < t->rank; d++)
        inner *= t->dims[d];
    const uint8_t *src = t->data;
    uint8_t *o = dst->data;
    for (int64_t a = 0; a < outer && inner > 0; a++)
        memcpy(o + a * inner * es, src + ((a * t->dims[axis] + idx) * inner) * es, (size_t)inner * es);
}

static int scan_core(sn_kctx *c, int first, int64_t batch, int64_t b, stack *outs_acc, sn_tensor *state,
                     int64_t *seq_len_out);

static int scan_run(sn_kctx *c) {
    const sn_node *n = c->node;
    const sn_graph *body = n->sub[0];
    int m = (int)sn_attr_int(n, "num_scan_inputs", 0);
    int first = n->opset < 9 ? 1 : 0;
    int n_state = c->n_in - first - m, n_scan_out = body->n_outputs - n_state;
    int rc = SNUG_OK;
    const int64_t *out_axes = NULL, *out_dirs = NULL;
    int n_oax = sn_attr_ints(n, "scan_output_axes", &out_axes);
    int n_odir = sn_attr_ints(n, "scan_output_directions", &out_dirs);
    sn_tensor *state = sn_calloc((size_t)n_state + 1, sizeof *state);
    stack *acc = sn_calloc((size_t)n_scan_out + 1, sizeof *acc);
    if (!state || !acc) {
        sn_free(state);
        sn_free(acc);
        return sn_kfail(c->err, n, SNUG_ERR_OOM, "out of memory");
    }
    if (first == 0) {
        for (int j = 0; j < n_state && rc == SNUG_OK; j++)
            rc = sn_value_heap_copy(c->in[j], &state[j]);
        if (rc == SNUG_OK)
            rc = scan_core(c, 0, 1, 0, acc, state, NULL);
        for (int j = 0; j < n_state && rc == SNUG_OK; j++)
            rc = sn_value_emit(c, j, &state[j]);
        for (int j = 0; j < n_scan_out && rc == SNUG_OK; j++) {
            int ax = j < n_oax ? (int)out_axes[j] : 0;
            int rank1 = acc[j].n ? acc[j].items[0].rank + 1 : 1;
            if (ax < 0)
                ax += rank1;
            rc = emit_stacked(c, n_state + j, &acc[j], ax, j < n_odir && out_dirs[j]);
        }
    } else {
        /* Opset 8: axis 0 of every input is a batch; run each batch entry. */
        int64_t batch = c->in[1] && c->in[1]->rank > 0 ? c->in[1]->dims[0] : 1;
        stack *st_acc = sn_calloc((size_t)n_state + 1, sizeof *st_acc);
        stack *bacc = sn_calloc((size_t)n_scan_out + 1, sizeof *bacc);
        if (!st_acc || !bacc)
            rc = sn_kfail(c->err, n, SNUG_ERR_OOM, "out of memory");
        for (int64_t b = 0; b < batch && rc == SNUG_OK; b++) {
            for (int j = 0; j < n_state && rc == SNUG_OK; j++) {
                const sn_tensor *src = c->in[first + j];
                sn_tensor sl = *src;
                sl.rank = src->rank - 1;
                memmove(sl.dims, src->dims + 1, sizeof(int64_t) * (size_t)sl.rank);
                sl.data = (uint8_t *)src->data + (size_t)b * sn_tensor_nbytes(&sl);
                rc = sn_value_heap_copy(&sl, &state[j]);
            }
            for (int j = 0; j < n_scan_out; j++)
                bacc[j].n = 0;
            if (rc == SNUG_OK)
                rc = scan_core(c, first, batch, b, bacc, state, NULL);
            for (int j = 0; j < n_state && rc == SNUG_OK; j++) {
                rc = stack_push(&st_acc[j], &state[j]);
                sn_value_heap_free(&state[j]);
            }
            for (int j = 0; j < n_scan_out && rc == SNUG_OK; j++) {
                /* stack this batch entry's scan outputs along axis 0 into one item */
                stack one = bacc[j];
                if (!one.n)
                    continue;
                sn_tensor item = one.items[0];
                item.rank++;
                memmove(item.dims + 1, one.items[0].dims, sizeof(int64_t) * (size_t)one.items[0].rank);
                item.dims[0] = one.n;
                size_t isz = sn_tensor_nbytes(&one.items[0]);
                uint8_t *buf = sn_malloc(isz * (size_t)one.n + 1);
                if (!buf) {
                    rc = SNUG_ERR_OOM;
                    break;
                }
                for (int64_t k = 0; k < one.n; k++)
                    memcpy(buf + isz * (size_t)k, one.items[k].data, isz);
                item.data = buf;
                rc = stack_push(&acc[j], &item);
                sn_free(buf);
                for (int64_t k = 0; k < one.n; k++)
                    sn_value_heap_free(&one.items[k]);
                bacc[j].n = 0;
            }
        }
        for (int j = 0; j < n_state && rc == SNUG_OK; j++)
            rc = emit_stacked(c, j, &st_acc[j], 0, false);
        for (int j = 0; j < n_scan_out && rc == SNUG_OK; j++)
            rc = emit_stacked(c, n_state + j, &acc[j], 0, false);
        if (st_acc)
            for (int j = 0; j < n_state; j++)
                stack_free(&st_acc[j]);
        if (bacc)
            for (int j = 0; j < n_scan_out; j++)
                stack_free(&bacc[j]);
        sn_free(st_acc);
        sn_free(bacc);
    }
    for (int j = 0; j < n_state; j++)
        sn_value_heap_free(&state[j]);
    for (int j = 0; j < n_scan_out; j++)
        stack_free(&acc[j]);
    sn_free(state);
    sn_free(acc);
    if (rc == SNUG_ERR_OOM && c->err->code != SNUG_ERR_OOM)
        return sn_kfail(c->err, n, SNUG_ERR_OOM, "out of memory");
    return rc;
}

/* One scan over the sequence axis. For opset 8, b selects the batch entry. */
static int scan_core(sn_kctx *c, int first, int64_t batch, int64_t b, stack *acc, sn_tensor *state,
                     int64_t *seq_len_out) {
    (void)seq_len_out;
    (void)batch;
    const sn_node *n = c->node;
    const sn_graph *body = n->sub[0];
    int m = (int)sn_attr_int(n, "num_scan_inputs", 0);
    int n_state = c->n_in - first - m, n_scan_out = body->n_outputs - n_state;
    const int64_t *in_axes = NULL, *in_dirs = NULL;
    int n_iax = sn_attr_ints(n, first ? "__none__" : "scan_input_axes", &in_axes);
    int n_idir = sn_attr_ints(n, first ? "directions" : "scan_input_directions", &in_dirs);
    int rc = SNUG_OK;
    sn_tensor *bin = sn_calloc((size_t)(n_state + m) + 1, sizeof *bin);
    sn_tensor *views = sn_calloc((size_t)m + 1, sizeof *views); /* opset 8: the batch entry */
    uint8_t **slices = sn_calloc((size_t)m + 1, sizeof *slices);
    const sn_tensor **outs = sn_calloc((size_t)body->n_outputs + 1, sizeof *outs);
    int *axes = sn_calloc((size_t)m + 1, sizeof *axes);
    if (!bin || !views || !slices || !outs || !axes) {
        rc = sn_kfail(c->err, n, SNUG_ERR_OOM, "out of memory");
        goto done;
    }
    int64_t len = -1;
    for (int k = 0; k < m; k++) {
        const sn_tensor *src = c->in[first + n_state + k];
        if (!src) {
            rc = sn_kfail(c->err, n, SNUG_ERR_GRAPH, "scan input %d absent", k);
            goto done;
        }
        views[k] = *src;
        if (first) {
            views[k].rank = src->rank - 1;
            memmove(views[k].dims, src->dims + 1, sizeof(int64_t) * (size_t)views[k].rank);
            views[k].data = (uint8_t *)src->data + (size_t)b * sn_tensor_nbytes(&views[k]);
        }
        int64_t ax = k < n_iax ? in_axes[k] : 0;
        int a;
        if (!sn_axis_norm(ax, views[k].rank, &a)) {
            rc = sn_kfail(c->err, n, SNUG_ERR_RANGE, "scan_input_axes[%d] out of range", k);
            goto done;
        }
        axes[k] = a;
        if (len >= 0 && views[k].dims[a] != len) {
            rc = sn_kfail(c->err, n, SNUG_ERR_SHAPE, "scan inputs disagree on the sequence length");
            goto done;
        }
        len = views[k].dims[a];
        if (len > sn_kctx_limits(c)->max_iterations) {
            rc = sn_kfail(c->err, n, SNUG_ERR_RANGE, "%lld iterations, more than %lld (snug.max_loop_iterations)",
                          (long long)len, (long long)sn_kctx_limits(c)->max_iterations);
            goto done;
        }
        sn_tensor *s = &bin[n_state + k];
        *s = views[k];
        s->rank = views[k].rank - 1;
        for (int d = 0, o = 0; d < views[k].rank; d++)
            if (d != a)
                s->dims[o++] = views[k].dims[d];
        if (!(slices[k] = sn_malloc(sn_tensor_nbytes(s) + 1))) {
            rc = sn_kfail(c->err, n, SNUG_ERR_OOM, "out of memory");
            goto done;
        }
        s->data = slices[k];
    }
    if (first && c->in[0]) {
        int64_t sl = sn_load_i64(c->in[0]->dtype, c->in[0]->data, (size_t)b);
        if (sl >= 0 && sl < len)
            len = sl;
    }
    for (int64_t it = 0; it < len; it++) {
        for (int k = 0; k < m; k++) {
            bool rev = k < n_idir && in_dirs[k];
            take_slice(&views[k], axes[k], rev ? len - 1 - it : it, &bin[n_state + k]);
        }
        for (int j = 0; j < n_state; j++)
            bin[j] = state[j];
        int n_out;
        if ((rc = sn_kctx_run_subgraph(c, 0, n_state + m, bin, outs, &n_out)) != SNUG_OK)
            goto done;
        for (int j = 0; j < n_scan_out; j++)
            if ((rc = stack_push(&acc[j], outs[n_state + j])) != SNUG_OK) {
                rc = sn_kfail(c->err, n, rc, "out of memory");
                goto done;
            }
        if ((rc = replace_state(state, outs, n_state)) != SNUG_OK) {
            rc = sn_kfail(c->err, n, rc, "out of memory");
            goto done;
        }
    }
done:
    if (slices)
        for (int k = 0; k < m; k++)
            sn_free(slices[k]);
    sn_free(slices);
    sn_free(bin);
    sn_free(views);
    sn_free(outs);
    sn_free(axes);
    return rc;
}

const sn_op_def sn_ops_control[] = {
    {.domain = "", .name = "If", .since_version = 1, .infer = if_infer, .flags = SN_OP_ALLOCS_OUTPUTS,
     .cpu = {.run = if_run}},
    {.domain = "", .name = "Loop", .since_version = 1, .required = SN_IN_NONE, .infer = loop_infer, .flags = SN_OP_ALLOCS_OUTPUTS,
     .cpu = {.run = loop_run}},
    {.domain = "", .name = "Scan", .since_version = 8, .required = SN_IN_NONE, .infer = scan_infer, .flags = SN_OP_ALLOCS_OUTPUTS,
     .cpu = {.run = scan_run}},
    {0},
};
