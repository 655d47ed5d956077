/* More of the OpenCL backend's kernels, host side (kit.h; device side:
 * kernels_more.cl): element-wise ops past kernels.c's (Pow, Max, Min, the
 * comparisons and logic, Cast, more unary functions), the reductions,
 * Slice and Expand, LayerNormalization and SkipLayerNormalization, Gemm.
 * Small int64 parameters (Slice's starts to steps, Expand's shape, the
 * reductions' axes) are host_in: the plan leaves them on the host and the
 * kernel reads them there, at prepare (where they may not be known yet:
 * then the node stays on the CPU) and at run. */
#include <string.h>

#include "backends/opencl/kit.h"

#define WG 64 /* kernels.cl's row work group */

static int refuse(sn_err *err, const sn_node *n, const char *what) {
    return sn_kfail(err, n, SNUG_ERR_UNSUPPORTED, "opencl: %s", what);
}

/* Elements the strided copy (kernels.cl's transpose) moves: 1, 2, 4 or 8
 * bytes, not strings. */
static bool elem_ok(const sn_tensor *t) {
    size_t es = sn_dtype_size(t->dtype);
    return t->rank <= SN_CL_RANK && (es == 1 || es == 2 || es == 4 || es == 8) && t->dtype != SN_STRING;
}

/* Up to SN_CL_RANK int32/int64 values of a host_in input into v (*n of
 * them); false when it has more, another dtype, or its data is not known. */
static bool host_ints(const sn_tensor *t, int64_t *v, int *n) {
    if (!t || t->rank > 1 || (t->dtype != SN_I64 && t->dtype != SN_I32) || sn_cl_numel(t) > SN_CL_RANK)
        return false;
    *n = (int)sn_cl_numel(t);
    return *n == 0 || sn_input_ints(t, v, SN_CL_RANK) == *n;
}

/* Y = x's elements from element `first` on, stepping st[d] (elements,
 * negative for a negative step) along y's dim d: Slice and Expand, through
 * the transpose kernel, which is this strided copy. */
static int run_strided(sn_kctx *c, int64_t first, const cl_long *st) {
    const sn_tensor *x = c->in[0];
    sn_tensor *y = c->out[0];
    sn_cl_shape s = sn_cl_shape_of(y);
    if (!s.n)
        return SNUG_OK;
    memcpy(s.s[0], st, sizeof s.s[0]);
    cl_int esz = (cl_int)sn_dtype_size(x->dtype);
    sn_cl_call k = {.c = c};
    sn_cl_arg_buf(&k, x, y);
    k.off[0] += (cl_ulong)(first * esz);
    sn_cl_arg_buf(&k, y, y);
    sn_cl_arg_val(&k, &s, sizeof s);
    sn_cl_arg_val(&k, &esz, sizeof esz);
    size_t g = (size_t)s.n, l = 64;
    return sn_cl_enqueue(&k, SN_CLK_transpose, 1, &g, &l);
}

/* ---- element-wise: Pow, Max, Min, comparisons, logic, unary ------------------------ */

/* Before opset 7 the binary ops broadcast by attributes (broadcast, axis). */
static bool ok_bcast(const sn_node *n) { return n->opset >= 7; }

static int run_pow(sn_kctx *c) { return sn_cl_run_binary(c, SN_CLK_pow_); }

/* Max, Min: inputs 0 and 1, then the output with each next one in place,
 * the CPU's order (so NaNs come out the same); one input is op(x, x) = x. */
static int run_var(sn_kctx *c, int which) {
    sn_tensor *y = c->out[0];
    sn_cl_shape s = sn_cl_shape_of(y);
    if (!s.n)
        return SNUG_OK;
    for (int i = c->n_in > 1 ? 1 : 0; i < c->n_in; i++) {
        const sn_tensor *a = i > 1 ? y : c->in[0], *b = c->in[i];
        sn_cl_bcast_strides(a, y, s.s[0]);
        sn_cl_bcast_strides(b, y, s.s[1]);
        sn_cl_call k = {.c = c};
        sn_cl_arg_buf(&k, a, y);
        sn_cl_arg_buf(&k, b, y);
        sn_cl_arg_buf(&k, y, y);
        sn_cl_arg_val(&k, &s, sizeof s);
        size_t g = (size_t)s.n, l = 64;
        SN_TRY(sn_cl_enqueue(&k, which, 1, &g, &l));
    }
    return SNUG_OK;
}
static int run_max(sn_kctx *c) { return run_var(c, SN_CLK_max_); }
static int run_min(sn_kctx *c) { return run_var(c, SN_CLK_min_); }

/* bool_binary's op codes, by op name */
static const char *const k_bool_ops[] = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
                                          "And",   "Or",   "Xor"};

static int bool_op(const sn_node *n) {
    int op = 0;
    while (strcmp(k_bool_ops[op], n->p->op_type))
        op++;
    return op;
}

/* Comparisons: float32 or int64 operands; And, Or, Xor: bool. */
static int prep_bool_binary(sn_prep_ctx *c) {
    sn_dtype t = c->in[0]->dtype;
    bool logic = bool_op(c->node) >= 5;
    if (c->in[1]->dtype != t || (logic ? t != SN_BOOL : t != SN_F32 && t != SN_I64) ||
        c->out[0]->dtype != SN_BOOL || c->in[0]->rank > SN_CL_RANK || c->in[1]->rank > SN_CL_RANK ||
        c->out[0]->rank > SN_CL_RANK)
        return refuse(c->err, c->node, logic ? "bool operands" : "float32 or int64 operands of one dtype");
    return SNUG_OK;
}

static int run_bool_binary(sn_kctx *c) {
    const sn_tensor *a = c->in[0], *b = c->in[1];
    sn_tensor *y = c->out[0];
    sn_cl_shape s = sn_cl_shape_of(y);
    if (!s.n)
        return SNUG_OK;
    sn_cl_bcast_strides(a, y, s.s[0]);
    sn_cl_bcast_strides(b, y, s.s[1]);
    cl_int op = bool_op(c->node), t = a->dtype == SN_BOOL ? 2 : a->dtype == SN_I64;
    sn_cl_call k = {.c = c};
    sn_cl_arg_buf(&k, a, y);
    sn_cl_arg_buf(&k, b, y);
    sn_cl_arg_buf(&k, y, y);
    sn_cl_arg_val(&k, &s, sizeof s);
    sn_cl_arg_val(&k, &op, sizeof op);
    sn_cl_arg_val(&k, &t, sizeof t);
    size_t g = (size_t)s.n, l = 64;
    return sn_cl_enqueue(&k, SN_CLK_bool_binary, 1, &g, &l);
}

static int prep_not(sn_prep_ctx *c) {
    return c->in[0]->dtype == SN_BOOL ? SNUG_OK : refuse(c->err, c->node, "Not of bool only");
}

#define SN_CL_RUN_UNARY(op)                                                              \
    static int run_##op(sn_kctx *c) { return sn_cl_run_unary(c, SN_CLK_##op); }
SN_CL_RUN_UNARY(not_)
SN_CL_RUN_UNARY(abs_)
SN_CL_RUN_UNARY(relu)
SN_CL_RUN_UNARY(cos_)
SN_CL_RUN_UNARY(sin_)
SN_CL_RUN_UNARY(log_)
SN_CL_RUN_UNARY(floor_)
SN_CL_RUN_UNARY(ceil_)

/* ---- Cast ---------------------------------------------------------------------------- */

/* cast_'s dtype codes (kernels_more.cl); -1: not handled. */
static int cast_code(sn_dtype t) {
    switch (t) {
    case SN_F32: return 0;
    case SN_F16: return 1;
    case SN_I64: return 2;
    case SN_I32: return 3;
    case SN_BOOL: return 4;
    default: return -1;
    }
}

static int prep_cast(sn_prep_ctx *c) {
    if (cast_code(c->in[0]->dtype) < 0 || cast_code(c->out[0]->dtype) < 0 ||
        sn_cl_numel(c->in[0]) != sn_cl_numel(c->out[0]))
        return refuse(c->err, c->node, "Cast between float32, float16, int64, int32 and bool");
    return SNUG_OK;
}

static int run_cast(sn_kctx *c) {
    sn_tensor *y = c->out[0];
    cl_long n = sn_cl_numel(y);
    cl_int from = cast_code(c->in[0]->dtype), to = cast_code(y->dtype);
    if (!n)
        return SNUG_OK;
    sn_cl_call k = {.c = c};
    sn_cl_arg_buf(&k, c->in[0], y);
    sn_cl_arg_val(&k, &from, sizeof from);
    sn_cl_arg_buf(&k, y, y);
    sn_cl_arg_val(&k, &to, sizeof to);
    sn_cl_arg_val(&k, &n, sizeof n);
    size_t g = (size_t)n, l = 64;
    return sn_cl_enqueue(&k, SN_CLK_cast_, 1, &g, &l);
}

/* ---- ReduceSum, ReduceMean, ReduceMax ---------------------------------------------- */

/* kernels_more.cl's sn_red: same fields, same order. */
typedef struct sn_cl_red {
    cl_long n, nred, kr, rr;
    cl_long kd[SN_CL_RANK], ks[SN_CL_RANK], rd[SN_CL_RANK], rs[SN_CL_RANK];
} sn_cl_red;

static cl_int red_op(const sn_node *n) {
    return !strcmp(n->p->op_type, "ReduceSum") ? 0 : !strcmp(n->p->op_type, "ReduceMean") ? 1 : 2;
}

/* The reduction as kept and reduced dims with x's strides, after the CPU's
 * merge (dims of 1 dropped, neighbours of one kind joined). Axes as the CPU
 * takes them: the attribute, or from opset 13 (ReduceSum) or 18 (the
 * others) input 1, with noop_with_empty_axes; none: all. */
static int red_geom(const sn_node *node, int n_in, const sn_tensor *const *in, const sn_tensor *y, sn_err *err,
                    sn_cl_red *r) {
    const sn_tensor *x = in[0];
    bool from_input = node->opset >= (red_op(node) == 0 ? 13 : 18);
    int64_t ax[SN_CL_RANK];
    int na = 0;
    if (x->rank > SN_CL_RANK || x->dtype != SN_F32 || y->dtype != SN_F32)
        return refuse(err, node, "float32 reductions of rank <= 8");
    if (from_input && n_in > 1 && in[1] && !host_ints(in[1], ax, &na))
        return refuse(err, node, "axes must be known when planned");
    if (!from_input) {
        const int64_t *v;
        na = sn_attr_ints(node, "axes", &v);
        if (na > SN_CL_RANK)
            return refuse(err, node, "more axes than dims");
        for (int i = 0; i < na; i++)
            ax[i] = v[i];
    }
    bool mask[SN_CL_RANK];
    bool all = na <= 0 && !(from_input && sn_attr_int(node, "noop_with_empty_axes", 0));
    for (int d = 0; d < x->rank; d++)
        mask[d] = all;
    for (int i = 0; i < na; i++) {
        int a;
        if (!sn_axis_norm(ax[i], x->rank, &a))
            return refuse(err, node, "an axis out of range");
        mask[a] = true;
    }
    int64_t xs[SN_CL_RANK], m = 1;
    for (int d = x->rank - 1; d >= 0; m *= x->dims[d], d--)
        xs[d] = m;
    memset(r, 0, sizeof *r);
    r->n = r->nred = 1;
    int prev = -1; /* the kind of the merged dim before: 0 kept, 1 reduced */
    for (int d = 0; d < x->rank; d++) {
        if (x->dims[d] == 1)
            continue;
        int red = mask[d];
        cl_long *nd = red ? &r->rr : &r->kr, *dims = red ? r->rd : r->kd, *st = red ? r->rs : r->ks;
        if (prev == red) /* joins the dim before it, whose stride is now this one's */
            dims[*nd - 1] *= x->dims[d], st[*nd - 1] = xs[d];
        else
            dims[*nd] = x->dims[d], st[(*nd)++] = xs[d];
        if (red)
            r->nred *= x->dims[d];
        else
            r->n *= x->dims[d];
        prev = red;
    }
    if (r->n != sn_cl_numel(y))
        return refuse(err, node, "the output's size is not the reduction's");
    return SNUG_OK;
}

static int prep_reduce(sn_prep_ctx *c) {
    sn_cl_red r;
    return red_geom(c->node, c->n_in, c->in, c->out[0], c->err, &r);
}

static int run_reduce(sn_kctx *c) {
    sn_cl_red r;
    sn_tensor *y = c->out[0];
    SN_TRY(red_geom(c->node, c->n_in, (const sn_tensor *const *)c->in, y, c->err, &r));
    if (!r.n)
        return SNUG_OK;
    cl_int op = red_op(c->node);
    /* the innermost merged dim kept: an item per output walks its column */
    bool cols = r.kr && r.ks[r.kr - 1] == 1;
    sn_cl_call k = {.c = c};
    sn_cl_arg_buf(&k, c->in[0], y);
    sn_cl_arg_buf(&k, y, y);
    sn_cl_arg_val(&k, &r, sizeof r);
    sn_cl_arg_val(&k, &op, sizeof op);
    size_t g = (size_t)r.n * (cols ? 1 : WG), l = cols ? 64 : WG;
    return sn_cl_enqueue(&k, cols ? SN_CLK_reduce_cols : SN_CLK_reduce_rows, 1, &g, &l);
}

/* ---- Slice, Expand ------------------------------------------------------------------- */

/* One axis of dim elements: ONNX's clamping of start s and end e for step,
 * the first index and the count (the CPU's slice_axis). */
static void slice_axis(int64_t dim, int64_t s, int64_t e, int64_t step, int64_t *start, int64_t *len) {
    if (s < 0)
        s = s < -dim ? -dim - 1 : s + dim;
    if (e < 0)
        e = e < -dim ? -dim - 1 : e + dim;
    if (step > 0) {
        s = s < 0 ? 0 : s > dim ? dim : s;
        e = e < 0 ? 0 : e > dim ? dim : e;
        *start = s;
        *len = e > s ? (e - s - 1) / step + 1 : 0;
    } else {
        s = s < 0 ? -1 : s > dim - 1 ? dim - 1 : s;
        e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
        *start = s;
        *len = s > e ? (int64_t)((uint64_t)(s - e - 1) / ((uint64_t)(-(step + 1)) + 1u)) + 1 : 0;
    }
    if (*len == 0)
        *start = 0;
}

/* x's first element and each dim's stride (elements) of the slice; starts,
 * ends, axes, steps from inputs 1-4 (host_in) or, before opset 10, the
 * attributes. The output must have the shape they give. */
static int slice_geom(const sn_node *node, int n_in, const sn_tensor *const *in, const sn_tensor *y, sn_err *err,
                      int64_t *first, cl_long *st) {
    const sn_tensor *x = in[0];
    int64_t v[4][SN_CL_RANK];
    int n[4] = {-1, -1, -1, -1};
    if (!elem_ok(x) || y->rank != x->rank)
        return refuse(err, node, "elements of 1, 2, 4 or 8 bytes, rank <= 8");
    for (int i = 0; i < 4; i++) {
        const char *names[4] = {"starts", "ends", "axes", "steps"};
        if (node->opset >= 10) {
            const sn_tensor *t = n_in > i + 1 ? in[i + 1] : NULL;
            if (t && !host_ints(t, v[i], &n[i]))
                return refuse(err, node, "starts, ends, axes and steps must be known when planned");
        } else if (i < 3) {
            const int64_t *a;
            n[i] = sn_attr_ints(node, names[i], &a);
            if (n[i] > SN_CL_RANK)
                return refuse(err, node, "more starts than dims");
            for (int j = 0; j < n[i]; j++)
                v[i][j] = a[j];
        }
    }
    if (n[0] < 0 || n[1] != n[0] || (n[2] >= 0 && n[2] != n[0]) || (n[3] >= 0 && n[3] != n[0]))
        return refuse(err, node, "starts and ends missing, or starts, ends, axes and steps of different lengths");
    int64_t start[SN_CL_RANK], step[SN_CL_RANK], len[SN_CL_RANK], xs = 1;
    bool touched[SN_CL_RANK] = {false};
    for (int d = 0; d < x->rank; d++)
        start[d] = 0, step[d] = 1, len[d] = x->dims[d];
    for (int i = 0; i < n[0]; i++) {
        int a = i;
        if ((n[2] >= 0 && !sn_axis_norm(v[2][i], x->rank, &a)) || a >= x->rank || touched[a] ||
            (n[3] >= 0 && v[3][i] == 0))
            return refuse(err, node, "an axis out of range or repeated, or a step of 0");
        touched[a] = true;
        step[a] = n[3] >= 0 ? v[3][i] : 1;
        slice_axis(x->dims[a], v[0][i], v[1][i], step[a], &start[a], &len[a]);
        if (len[a] <= 1)
            step[a] = 1;
    }
    *first = 0;
    for (int d = x->rank - 1; d >= 0; xs *= x->dims[d], d--) {
        if (y->dims[d] != len[d])
            return refuse(err, node, "the output's shape is not the slice's");
        *first += start[d] * xs;
        st[d] = step[d] * xs;
    }
    return SNUG_OK;
}

static int prep_slice(sn_prep_ctx *c) {
    int64_t first;
    cl_long st[SN_CL_RANK];
    return slice_geom(c->node, c->n_in, c->in, c->out[0], c->err, &first, st);
}

static int run_slice(sn_kctx *c) {
    int64_t first;
    cl_long st[SN_CL_RANK] = {0};
    SN_TRY(slice_geom(c->node, c->n_in, (const sn_tensor *const *)c->in, c->out[0], c->err, &first, st));
    return run_strided(c, first, st);
}

/* Expand: the output's shape (infer read it from input 1, which stays on
 * the host) must be x broadcast. */
static int prep_expand(sn_prep_ctx *c) {
    const sn_tensor *x = c->in[0], *y = c->out[0];
    bool ok = elem_ok(x) && y->rank <= SN_CL_RANK && x->rank <= y->rank && y->dtype == x->dtype;
    for (int d = 0; ok && d < x->rank; d++) {
        int64_t xd = x->dims[x->rank - 1 - d];
        ok = xd == 1 || xd == y->dims[y->rank - 1 - d];
    }
    return ok ? SNUG_OK : refuse(c->err, c->node, "elements of 1, 2, 4 or 8 bytes broadcast to rank <= 8");
}

static int run_expand(sn_kctx *c) {
    cl_long st[SN_CL_RANK] = {0};
    sn_cl_bcast_strides(c->in[0], c->out[0], st);
    return run_strided(c, 0, st);
}

/* ---- LayerNormalization, SkipLayerNormalization ---------------------------------------- */

/* LayerNormalization (X, Scale, B?) over x[axis:] and SkipLayerNormalization
 * (input, skip, gamma, beta?, bias?) over the last axis -> (output, -, -,
 * input_skip_bias_sum?): float32, the parameters of the normalized size or
 * one value, skip rows dividing the input's. */
static int prep_ln(sn_prep_ctx *c) {
    SN_TRY(sn_cl_check_f32(c, ~0u));
    const sn_tensor *x = c->in[0];
    bool skip = !strcmp(c->node->p->op_type, "SkipLayerNormalization");
    int axis;
    if (!sn_axis_norm(skip ? -1 : sn_attr_int(c->node, "axis", -1), x->rank, &axis))
        return refuse(c->err, c->node, "an axis out of range");
    int64_t L = 1;
    for (int d = axis; d < x->rank; d++)
        L *= x->dims[d];
    for (int i = skip ? 2 : 1; i < c->n_in; i++)
        if (c->in[i] && sn_cl_numel(c->in[i]) != L && sn_cl_numel(c->in[i]) != 1)
            return refuse(c->err, c->node, "scale, beta and bias of the normalized size or one value");
    int64_t sn = skip ? sn_cl_numel(c->in[1]) : 0;
    if (skip && (L == 0 || sn % L || (sn && (sn_cl_numel(x) / L) % (sn / L))))
        return refuse(c->err, c->node, "skip rows must divide the input's");
    return SNUG_OK;
}

static int run_ln(sn_kctx *c) {
    const sn_tensor *x = c->in[0];
    bool skip = !strcmp(c->node->p->op_type, "SkipLayerNormalization");
    int axis = x->rank - 1;
    if (!skip)
        sn_axis_norm(sn_attr_int(c->node, "axis", -1), x->rank, &axis);
    int64_t L = 1;
    for (int d = axis; d < x->rank; d++)
        L *= x->dims[d];
    sn_cl_norm a = {.x = x, .skip = skip ? c->in[1] : NULL, .gamma = c->in[skip ? 2 : 1],
                    .beta = c->n_in > (skip ? 3 : 2) ? c->in[skip ? 3 : 2] : NULL,
                    .bias = skip && c->n_in > 4 ? c->in[4] : NULL, .y = c->out[0],
                    .sum = skip && c->n_out > 3 ? c->out[3] : NULL, .L = L, .center = true,
                    .eps = sn_attr_float(c->node, "epsilon", skip ? 1e-12f : 1e-5f)};
    return sn_cl_run_norm(c, &a);
}

static bool ok_ln(const sn_node *n) {
    /* the statistics (outputs 1, 2) are not computed; Skip's sum (3) is */
    for (int i = 1; i < n->n_out && i < 3; i++)
        if (n->out[i] >= 0)
            return false;
    return true;
}

/* ---- Gemm ---------------------------------------------------------------------------------- */

/* A and B 2-D float32 with one inner size; C (rank <= 2, not empty)
 * broadcast to [M, N]. */
static int gemm_geom(const sn_node *node, int n_in, const sn_tensor *const *in, sn_err *err, cl_long g[5]) {
    const sn_tensor *a = in[0], *b = in[1], *cc = n_in > 2 ? in[2] : NULL;
    int ta = sn_attr_int(node, "transA", 0) != 0, tb = sn_attr_int(node, "transB", 0) != 0;
    if (a->rank != 2 || b->rank != 2 || a->dims[ta ? 0 : 1] != b->dims[tb ? 1 : 0])
        return refuse(err, node, "Gemm of 2-D A and B with one inner size");
    cl_long M = a->dims[ta ? 1 : 0], N = b->dims[tb ? 0 : 1];
    g[0] = M, g[1] = N, g[2] = a->dims[ta ? 0 : 1], g[3] = g[4] = 0;
    if (cc) {
        int64_t cm = cc->rank == 2 ? cc->dims[0] : 1, cn = cc->rank >= 1 ? cc->dims[cc->rank - 1] : 1;
        if (cc->rank > 2 || !sn_cl_numel(cc) || (cm != 1 && cm != M) || (cn != 1 && cn != N))
            return refuse(err, node, "Gemm's C must broadcast to [M, N]");
        g[3] = cm == 1 ? 0 : cn, g[4] = cn == 1 ? 0 : 1;
    }
    return SNUG_OK;
}

static int prep_gemm(sn_prep_ctx *c) {
    cl_long g[5];
    SN_TRY(sn_cl_prep_f32(c));
    return gemm_geom(c->node, c->n_in, c->in, c->err, g);
}

static int run_gemm(sn_kctx *c) {
    cl_long g[5];
    SN_TRY(gemm_geom(c->node, c->n_in, (const sn_tensor *const *)c->in, c->err, g));
    sn_tensor *y = c->out[0];
    const sn_tensor *cc = c->n_in > 2 ? c->in[2] : NULL;
    cl_int ta = sn_attr_int(c->node, "transA", 0) != 0, tb = sn_attr_int(c->node, "transB", 0) != 0;
    cl_float alpha = sn_attr_float(c->node, "alpha", 1.0f), beta = sn_attr_float(c->node, "beta", 1.0f);
    cl_int has_c = cc && beta != 0.0f; /* beta 0: C not read (its NaNs neither), as on the CPU */
    if (!sn_cl_numel(y))
        return SNUG_OK;
    sn_cl_call k = {.c = c};
    sn_cl_arg_buf(&k, c->in[0], y);
    sn_cl_arg_buf(&k, c->in[1], y);
    sn_cl_arg_buf(&k, cc, y);
    sn_cl_arg_buf(&k, y, y);
    for (int i = 0; i < 3; i++)
        sn_cl_arg_val(&k, &g[i], sizeof g[i]);
    sn_cl_arg_val(&k, &ta, sizeof ta);
    sn_cl_arg_val(&k, &tb, sizeof tb);
    sn_cl_arg_val(&k, &alpha, sizeof alpha);
    sn_cl_arg_val(&k, &beta, sizeof beta);
    sn_cl_arg_val(&k, &has_c, sizeof has_c);
    sn_cl_arg_val(&k, &g[3], sizeof g[3]);
    sn_cl_arg_val(&k, &g[4], sizeof g[4]);
    size_t gl[2] = {(size_t)g[1], (size_t)g[0]}, l[2] = {16, 16};
    return sn_cl_enqueue(&k, SN_CLK_gemm, 2, gl, l);
}

/* ---- the table ----------------------------------------------------------------------------- */

#define BOOL_BIN {.prepare = prep_bool_binary, .run = run_bool_binary, .host_in = 0}
#define UNARY_F32(fn) {.prepare = sn_cl_prep_f32, .run = fn, .host_in = 0}
#define REDUCE {.prepare = prep_reduce, .run = run_reduce, .host_in = 1u << 1}
const sn_cl_op sn_cl_ops_more[] = {
    {"", "Pow", {.prepare = sn_cl_prep_f32, .run = run_pow, .host_in = 0}, ok_bcast},
    {"", "Max", {.prepare = sn_cl_prep_f32, .run = run_max, .host_in = 0}, sn_cl_ok_any},
    {"", "Min", {.prepare = sn_cl_prep_f32, .run = run_min, .host_in = 0}, sn_cl_ok_any},
    {"", "Equal", BOOL_BIN, ok_bcast},
    {"", "Less", BOOL_BIN, ok_bcast},
    {"", "Greater", BOOL_BIN, ok_bcast},
    {"", "LessOrEqual", BOOL_BIN, ok_bcast},
    {"", "GreaterOrEqual", BOOL_BIN, ok_bcast},
    {"", "And", BOOL_BIN, ok_bcast},
    {"", "Or", BOOL_BIN, ok_bcast},
    {"", "Xor", BOOL_BIN, ok_bcast},
    {"", "Not", {.prepare = prep_not, .run = run_not_, .host_in = 0}, sn_cl_ok_any},
    {"", "Abs", UNARY_F32(run_abs_), sn_cl_ok_any},
    {"", "Relu", UNARY_F32(run_relu), sn_cl_ok_any},
    {"", "Cos", UNARY_F32(run_cos_), sn_cl_ok_any},
    {"", "Sin", UNARY_F32(run_sin_), sn_cl_ok_any},
    {"", "Log", UNARY_F32(run_log_), sn_cl_ok_any},
    {"", "Floor", UNARY_F32(run_floor_), sn_cl_ok_any},
    {"", "Ceil", UNARY_F32(run_ceil_), sn_cl_ok_any},
    {"", "Cast", {.prepare = prep_cast, .run = run_cast, .host_in = 0}, sn_cl_ok_any},
    {"", "ReduceSum", REDUCE, sn_cl_ok_any},
    {"", "ReduceMean", REDUCE, sn_cl_ok_any},
    {"", "ReduceMax", REDUCE, sn_cl_ok_any},
    {"", "Slice", {.prepare = prep_slice, .run = run_slice, .host_in = 0x1eu}, sn_cl_ok_any},
    {"", "Expand", {.prepare = prep_expand, .run = run_expand, .host_in = 1u << 1}, sn_cl_ok_any},
    {"", "LayerNormalization", {.prepare = prep_ln, .run = run_ln, .host_in = 0}, ok_ln},
    {"com.microsoft", "SkipLayerNormalization", {.prepare = prep_ln, .run = run_ln, .host_in = 0}, ok_ln},
    {"", "Gemm", {.prepare = prep_gemm, .run = run_gemm, .host_in = 0}, sn_cl_ok_any},
};
const int sn_cl_n_ops_more = (int)(sizeof sn_cl_ops_more / sizeof sn_cl_ops_more[0]);
