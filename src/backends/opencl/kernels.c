/* The OpenCL backend's kernels, host side: for each op it runs, a prepare
 * that checks what the device kernel handles (fp32; the dtypes and ranks
 * sn_node alone does not show) and a run that finds its tensors' buffers
 * (opencl.h, "Pointers") and enqueues the kernel of kernels.cl on the
 * context's queue. Nothing here waits: a read of the results (tensor_get)
 * or synchronize does, on the same in-order queue. */
#include <string.h>

#include "backends/opencl/kit.h"

int64_t sn_cl_numel(const sn_tensor *t) {
    int64_t n = 1;
    for (int d = 0; d < t->rank; d++)
        n *= t->dims[d];
    return n;
}

void sn_cl_arg_val(sn_cl_call *k, const void *p, size_t size) { k->arg[k->n].size = size, k->arg[k->n++].p = p; }

/* Two arguments: t's buffer and its byte offset in it. An absent or empty
 * tensor may stand in with `like`'s buffer (a kernel told not to read it). */
void sn_cl_arg_buf(sn_cl_call *k, const sn_tensor *t, const sn_tensor *like) {
    if (!t || sn_cl_numel(t) == 0)
        t = like;
    size_t bytes = sn_tensor_nbytes(t), off;
    sn_cl_ctx *owner;
    int m = k->n_mem++;
    if (!sn_cl_lookup(t->data, bytes, &owner, &k->mem[m], &off)) {
        if (!k->rc)
            k->rc = sn_kfail(k->c->err, k->c->node, SNUG_ERR_INVALID_ARG,
                             "opencl: a tensor of %zu bytes at %p is in no device buffer", bytes, t->data);
        k->mem[m] = NULL;
    } else if (k->ctx && owner != k->ctx && !k->rc)
        k->rc = sn_kfail(k->c->err, k->c->node, SNUG_ERR_INVALID_ARG, "opencl: tensors on two devices (%s, %s)",
                         k->ctx->name, owner->name);
    k->ctx = k->ctx ? k->ctx : owner;
    k->off[m] = off;
    sn_cl_arg_val(k, &k->mem[m], sizeof(cl_mem));
    sn_cl_arg_val(k, &k->off[m], sizeof(cl_ulong));
}

/* Enqueues kernel `which` over global (rounded up to whole groups of local;
 * local NULL: the device's choice). */
void sn_cl_arg_status(sn_cl_call *k) {
    if (!k->ctx && !k->rc)
        k->rc = sn_kfail(k->c->err, k->c->node, SNUG_ERR_INTERNAL, "opencl: a status argument before any buffer");
    sn_cl_arg_val(k, k->ctx ? &k->ctx->status : NULL, sizeof(cl_mem));
}

int sn_cl_enqueue(sn_cl_call *k, int which, cl_uint dims, const size_t *global, const size_t *local) {
    if (k->rc)
        return k->rc;
    sn_cl_ctx *ctx = k->ctx;
    size_t g[3];
    for (cl_uint d = 0; d < dims; d++) {
        if (global[d] == 0)
            return SNUG_OK;
        g[d] = local ? (global[d] + local[d] - 1) / local[d] * local[d] : global[d];
    }
    cl_kernel kern = ctx->kernels[which];
    cl_int rc = CL_SUCCESS;
    pthread_mutex_lock(&ctx->lock);
    for (int i = 0; i < k->n && rc == CL_SUCCESS; i++)
        rc = clSetKernelArg(kern, (cl_uint)i, k->arg[i].size, k->arg[i].p);
    if (rc == CL_SUCCESS)
        rc = clEnqueueNDRangeKernel(ctx->queue, kern, dims, NULL, g, local, 0, NULL, NULL);
    pthread_mutex_unlock(&ctx->lock);
    if (rc != CL_SUCCESS)
        return sn_kfail(k->c->err, k->c->node, SNUG_ERR_INTERNAL, "%s: cannot run its kernel (%s)", ctx->name,
                        sn_cl_errstr(rc));
    return SNUG_OK;
}

/* ---- checks at prepare --------------------------------------------------------- */

/* Every present input in mask f32_in and every present output is fp32, and
 * ranks fit the device's sn_shape. */
int sn_cl_check_f32(sn_prep_ctx *c, unsigned f32_in) {
    for (int i = 0; i < c->n_in; i++)
        if (c->in[i] && (c->in[i]->rank > SN_CL_RANK || ((f32_in >> i & 1) && c->in[i]->dtype != SN_F32)))
            return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "opencl: input %d must be float32 of rank <= %d", i,
                            SN_CL_RANK);
    for (int i = 0; i < c->n_out; i++)
        if (c->out[i] && (c->out[i]->rank > SN_CL_RANK || c->out[i]->dtype != SN_F32))
            return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "opencl: output %d must be float32 of rank <= %d",
                            i, SN_CL_RANK);
    return SNUG_OK;
}

int sn_cl_prep_f32(sn_prep_ctx *c) { return sn_cl_check_f32(c, ~0u); }

/* Strides of t (elements) as seen from y's dims, right-aligned, 0 along
 * broadcast dims. */
void sn_cl_bcast_strides(const sn_tensor *t, const sn_tensor *y, cl_long *s) {
    int64_t st = 1;
    for (int d = y->rank - 1, e = t->rank - 1; d >= 0; d--, e--) {
        int64_t n = e >= 0 ? t->dims[e] : 1;
        s[d] = n == 1 ? 0 : st;
        st *= n;
    }
}

sn_cl_shape sn_cl_shape_of(const sn_tensor *y) {
    sn_cl_shape s;
    memset(&s, 0, sizeof s);
    s.rank = y->rank, s.n = sn_cl_numel(y);
    for (int d = 0; d < y->rank; d++)
        s.dims[d] = y->dims[d];
    return s;
}

/* ---- element-wise ---------------------------------------------------------------- */

int sn_cl_run_binary(sn_kctx *c, int which) {
    const sn_tensor *a = c->in[0], *b = c->in[1];
    sn_tensor *y = c->out[0];
    sn_cl_shape s = sn_cl_shape_of(y);
    if (!s.n)
        return SNUG_OK;
    sn_cl_bcast_strides(a, y, s.s[0]);
    sn_cl_bcast_strides(b, y, s.s[1]);
    sn_cl_call k = {.c = c};
    sn_cl_arg_buf(&k, a, y);
    sn_cl_arg_buf(&k, b, y);
    sn_cl_arg_buf(&k, y, y);
    sn_cl_arg_val(&k, &s, sizeof s);
    size_t g = (size_t)s.n, l = 64;
    return sn_cl_enqueue(&k, which, 1, &g, &l);
}

int sn_cl_run_unary(sn_kctx *c, int which) {
    sn_tensor *y = c->out[0];
    cl_long n = sn_cl_numel(y);
    sn_cl_call k = {.c = c};
    if (!n)
        return SNUG_OK;
    sn_cl_arg_buf(&k, c->in[0], y);
    sn_cl_arg_buf(&k, y, y);
    sn_cl_arg_val(&k, &n, sizeof n);
    size_t g = (size_t)n, l = 64;
    return sn_cl_enqueue(&k, which, 1, &g, &l);
}

#define SN_CL_RUN(op, kind)                                                              \
    static int run_##op(sn_kctx *c) { return sn_cl_run_##kind(c, SN_CLK_##op); }
SN_CL_RUN(add, binary)
SN_CL_RUN(sub, binary)
SN_CL_RUN(mul, binary)
SN_CL_RUN(div, binary)
SN_CL_RUN(neg, unary)
SN_CL_RUN(sqrt_, unary)
SN_CL_RUN(recip, unary)
SN_CL_RUN(exp_, unary)
SN_CL_RUN(sigmoid, unary)
SN_CL_RUN(tanh_, unary)
SN_CL_RUN(erf_, unary)

static int prep_where(sn_prep_ctx *c) {
    if (c->in[0]->dtype != SN_BOOL)
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "opencl: the condition must be bool");
    return sn_cl_check_f32(c, 6u);
}

static int run_where(sn_kctx *c) {
    sn_tensor *y = c->out[0];
    sn_cl_shape s = sn_cl_shape_of(y);
    if (!s.n)
        return SNUG_OK;
    sn_cl_bcast_strides(c->in[1], y, s.s[0]);
    sn_cl_bcast_strides(c->in[2], y, s.s[1]);
    sn_cl_bcast_strides(c->in[0], y, s.s[2]);
    sn_cl_call k = {.c = c};
    for (int i = 0; i < 3; i++)
        sn_cl_arg_buf(&k, c->in[i], y);
    sn_cl_arg_buf(&k, y, y);
    sn_cl_arg_val(&k, &s, sizeof s);
    size_t g = (size_t)s.n, l = 64;
    return sn_cl_enqueue(&k, SN_CLK_where_, 1, &g, &l);
}

/* ---- rows: Softmax, RMS normalization ------------------------------------------------ */

static int run_softmax(sn_kctx *c) {
    sn_tensor *y = c->out[0];
    cl_long L = y->rank ? y->dims[y->rank - 1] : 1, n = sn_cl_numel(y);
    if (!n)
        return SNUG_OK;
    sn_cl_call k = {.c = c};
    sn_cl_arg_buf(&k, c->in[0], y);
    sn_cl_arg_buf(&k, y, y);
    sn_cl_arg_val(&k, &L, sizeof L);
    size_t g = (size_t)(n / L) * 64, l = 64;
    return sn_cl_enqueue(&k, SN_CLK_softmax, 1, &g, &l);
}

/* SimplifiedLayerNormalization (X, scale) and SkipSimplifiedLayerNormalization
 * (input, skip, gamma, bias?) -> (output, -, -, input_skip_bias_sum?). */
static int prep_rms(sn_prep_ctx *c) {
    SN_TRY(sn_cl_check_f32(c, ~0u));
    const sn_tensor *x = c->in[0];
    bool skip = c->n_in > 2;
    int64_t L = x->rank ? x->dims[x->rank - 1] : 1;
    int64_t a = sn_attr_int(c->node, "axis", -1);
    if (!skip && a != -1 && a != x->rank - 1)
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "opencl: normalizes the last axis only");
    const sn_tensor *g = c->in[skip ? 2 : 1], *b = skip && c->n_in > 3 ? c->in[3] : NULL;
    if ((sn_cl_numel(g) != L && sn_cl_numel(g) != 1) || (b && sn_cl_numel(b) != L && sn_cl_numel(b) != 1))
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "opencl: gamma and bias must have %lld values or one",
                        (long long)L);
    if (skip && (L == 0 || sn_cl_numel(c->in[1]) % L || (sn_cl_numel(c->in[1]) && (sn_cl_numel(x) / L) % (sn_cl_numel(c->in[1]) / L))))
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "opencl: skip rows must divide the input's");
    return SNUG_OK;
}

int sn_cl_run_norm(sn_kctx *c, const sn_cl_norm *a) {
    const sn_tensor *x = a->x, *s = a->skip, *g = a->gamma, *be = a->beta, *b = a->bias;
    sn_tensor *y = a->y, *sum = a->sum;
    cl_long L = a->L, n = sn_cl_numel(x);
    if (!n || !L)
        return SNUG_OK;
    cl_long srows = s ? sn_cl_numel(s) / L : 1, gs = sn_cl_numel(g) > 1, bts = be && sn_cl_numel(be) > 1,
            bs = b && sn_cl_numel(b) > 1;
    cl_int has_skip = s != NULL, has_beta = be != NULL, has_bias = b != NULL, has_sum = sum != NULL;
    cl_int center = a->center;
    cl_float eps = a->eps;
    sn_cl_call k = {.c = c};
    sn_cl_arg_buf(&k, x, y);
    sn_cl_arg_buf(&k, s, y);
    sn_cl_arg_val(&k, &srows, sizeof srows);
    sn_cl_arg_buf(&k, g, y);
    sn_cl_arg_val(&k, &gs, sizeof gs);
    sn_cl_arg_buf(&k, be, y);
    sn_cl_arg_val(&k, &bts, sizeof bts);
    sn_cl_arg_buf(&k, b, y);
    sn_cl_arg_val(&k, &bs, sizeof bs);
    sn_cl_arg_buf(&k, y, y);
    sn_cl_arg_buf(&k, sum, y);
    sn_cl_arg_val(&k, &has_skip, sizeof has_skip);
    sn_cl_arg_val(&k, &has_beta, sizeof has_beta);
    sn_cl_arg_val(&k, &has_bias, sizeof has_bias);
    sn_cl_arg_val(&k, &has_sum, sizeof has_sum);
    sn_cl_arg_val(&k, &center, sizeof center);
    sn_cl_arg_val(&k, &L, sizeof L);
    sn_cl_arg_val(&k, &eps, sizeof eps);
    size_t gl = (size_t)(n / L) * 64, l = 64;
    return sn_cl_enqueue(&k, SN_CLK_norm, 1, &gl, &l);
}

static int run_rms(sn_kctx *c) {
    const sn_tensor *x = c->in[0];
    bool skip = c->n_in > 2;
    sn_cl_norm a = {.x = x, .skip = skip ? c->in[1] : NULL, .gamma = c->in[skip ? 2 : 1],
                    .bias = skip && c->n_in > 3 ? c->in[3] : NULL, .y = c->out[0],
                    .sum = skip && c->n_out > 3 ? c->out[3] : NULL, .L = x->rank ? x->dims[x->rank - 1] : 1,
                    .eps = sn_attr_float(c->node, "epsilon", skip ? 1e-12f : 1e-5f)};
    return sn_cl_run_norm(c, &a);
}

/* ---- MatMul ------------------------------------------------------------------------ */

static int run_matmul(sn_kctx *c) {
    const sn_tensor *a = c->in[0], *b = c->in[1];
    sn_tensor *y = c->out[0];
    if (!sn_cl_numel(y))
        return SNUG_OK;
    /* 1-D operands: a [K] is [1, K], b [K] is [K, 1] */
    cl_long K = a->dims[a->rank - 1], M = a->rank > 1 ? a->dims[a->rank - 2] : 1;
    cl_long N = b->rank > 1 ? b->dims[b->rank - 1] : 1;
    sn_tensor ab = *a, bb = *b, yb = *y; /* batch dims only */
    ab.rank = a->rank > 2 ? a->rank - 2 : 0;
    bb.rank = b->rank > 2 ? b->rank - 2 : 0;
    yb.rank = ab.rank > bb.rank ? ab.rank : bb.rank;
    for (int d = 0; d < yb.rank; d++) {
        int ea = d - (yb.rank - ab.rank), eb = d - (yb.rank - bb.rank);
        int64_t da = ea >= 0 ? a->dims[ea] : 1, db = eb >= 0 ? b->dims[eb] : 1;
        yb.dims[d] = da > db ? da : db;
    }
    sn_cl_shape s = sn_cl_shape_of(&yb);
    sn_cl_bcast_strides(&ab, &yb, s.s[0]);
    sn_cl_bcast_strides(&bb, &yb, s.s[1]);
    for (int d = 0; d < yb.rank; d++)
        s.s[0][d] *= M * K, s.s[1][d] *= K * N;
    sn_cl_call k = {.c = c};
    sn_cl_arg_buf(&k, a, y);
    sn_cl_arg_buf(&k, b, y);
    sn_cl_arg_buf(&k, y, y);
    sn_cl_arg_val(&k, &M, sizeof M);
    sn_cl_arg_val(&k, &N, sizeof N);
    sn_cl_arg_val(&k, &K, sizeof K);
    sn_cl_arg_val(&k, &s, sizeof s);
    if (M < 8) { /* decode rows: one item per output */
        size_t g[3] = {(size_t)N, (size_t)M, (size_t)s.n}, l[3] = {64, 1, 1};
        return sn_cl_enqueue(&k, SN_CLK_matmul_rows, 3, g, l);
    }
    size_t g[3] = {(size_t)N, (size_t)M, (size_t)s.n}, l[3] = {16, 16, 1};
    return sn_cl_enqueue(&k, SN_CLK_matmul, 3, g, l);
}

/* ---- data movement: Transpose, Concat, Gather ----------------------------------------- */

static int prep_move(sn_prep_ctx *c) {
    size_t es = sn_dtype_size(c->in[0]->dtype);
    if (c->in[0]->rank > SN_CL_RANK || (es != 1 && es != 2 && es != 4 && es != 8) ||
        c->in[0]->dtype == SN_STRING)
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "opencl: elements of 1, 2, 4 or 8 bytes, rank <= %d",
                        SN_CL_RANK);
    return SNUG_OK;
}

static int run_transpose(sn_kctx *c) {
    const sn_tensor *x = c->in[0];
    sn_tensor *y = c->out[0];
    sn_cl_shape s = sn_cl_shape_of(y);
    if (!s.n)
        return SNUG_OK;
    int64_t st[SN_CL_RANK];
    for (int d = x->rank - 1, m = 1; d >= 0; m *= (int)x->dims[d], d--)
        st[d] = m;
    const int64_t *perm;
    int np = sn_attr_ints(c->node, "perm", &perm);
    for (int d = 0; d < y->rank; d++)
        s.s[0][d] = st[np == y->rank ? perm[d] : y->rank - 1 - d];
    cl_int esz = (cl_int)sn_dtype_size(x->dtype);
    sn_cl_call k = {.c = c};
    sn_cl_arg_buf(&k, x, y);
    sn_cl_arg_buf(&k, y, y);
    sn_cl_arg_val(&k, &s, sizeof s);
    sn_cl_arg_val(&k, &esz, sizeof esz);
    size_t g = (size_t)s.n, l = 64;
    return sn_cl_enqueue(&k, SN_CLK_transpose, 1, &g, &l);
}

static int prep_concat(sn_prep_ctx *c) {
    for (int i = 0; i < c->n_in; i++)
        if (c->in[i] && c->in[i]->dtype != c->in[0]->dtype)
            return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "opencl: inputs of one dtype");
    return prep_move(c);
}

static int run_concat(sn_kctx *c) {
    sn_tensor *y = c->out[0];
    if (!sn_cl_numel(y))
        return SNUG_OK;
    int axis = (int)sn_attr_int(c->node, "axis", 0);
    axis = axis < 0 ? axis + y->rank : axis;
    size_t es = sn_dtype_size(y->dtype);
    cl_long rows = 1, yw = (cl_long)es, at = 0;
    for (int d = 0; d < axis; d++)
        rows *= y->dims[d];
    for (int d = axis; d < y->rank; d++)
        yw *= y->dims[d];
    for (int i = 0; i < c->n_in; i++) {
        const sn_tensor *x = c->in[i];
        cl_long xw = x && rows ? sn_cl_numel(x) / rows * (cl_long)es : 0;
        if (!xw)
            continue;
        sn_cl_call k = {.c = c};
        sn_cl_arg_buf(&k, x, y);
        sn_cl_arg_val(&k, &xw, sizeof xw);
        sn_cl_arg_buf(&k, y, y);
        k.off[1] += (cl_ulong)at; /* this piece's first column */
        sn_cl_arg_val(&k, &yw, sizeof yw);
        sn_cl_arg_val(&k, &rows, sizeof rows);
        sn_cl_arg_val(&k, &xw, sizeof xw);
        size_t g[2] = {(size_t)xw, (size_t)rows}, l[2] = {64, 1};
        SN_TRY(sn_cl_enqueue(&k, SN_CLK_copy2d, 2, g, l));
        at += xw;
    }
    return SNUG_OK;
}

static int prep_gather(sn_prep_ctx *c) {
    if (c->in[1]->dtype != SN_I64 && c->in[1]->dtype != SN_I32)
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "opencl: int64 or int32 indices");
    return prep_move(c);
}

static int run_gather(sn_kctx *c) {
    const sn_tensor *x = c->in[0], *ix = c->in[1];
    sn_tensor *y = c->out[0];
    if (!sn_cl_numel(y))
        return SNUG_OK;
    int axis = (int)sn_attr_int(c->node, "axis", 0);
    axis = axis < 0 ? axis + x->rank : axis;
    cl_long outer = 1, inner = (cl_long)sn_dtype_size(x->dtype), axis_n = x->dims[axis], nq = sn_cl_numel(ix);
    for (int d = 0; d < axis; d++)
        outer *= x->dims[d];
    for (int d = axis + 1; d < x->rank; d++)
        inner *= x->dims[d];
    cl_int i64 = ix->dtype == SN_I64;
    sn_cl_call k = {.c = c};
    sn_cl_arg_buf(&k, x, y);
    sn_cl_arg_buf(&k, ix, y);
    sn_cl_arg_val(&k, &i64, sizeof i64);
    sn_cl_arg_buf(&k, y, y);
    sn_cl_arg_val(&k, &outer, sizeof outer);
    sn_cl_arg_val(&k, &axis_n, sizeof axis_n);
    sn_cl_arg_val(&k, &nq, sizeof nq);
    sn_cl_arg_val(&k, &inner, sizeof inner);
    sn_cl_arg_status(&k);
    size_t g[3] = {(size_t)inner, (size_t)nq, (size_t)outer};
    return sn_cl_enqueue(&k, SN_CLK_gather, 3, g, NULL);
}

/* ---- the table --------------------------------------------------------------------- */

/* Attributes a node must have for its kernel (the node shows no dtypes or
 * shapes; prepare checks those). */
bool sn_cl_ok_any(const sn_node *n) {
    (void)n;
    return true;
}

static bool ok_softmax(const sn_node *n) {
    /* the last axis: opset 13's default, or said so (before 13 the default is 1) */
    const sn_attr *a = sn_attr_get(n, "axis");
    return a ? a->i == -1 : n->opset >= 13;
}
/* ---- MatMulNBits ------------------------------------------------------------------- */

/* K, N, bits and block_size of a MatMulNBits node, checked against its
 * inputs: A [..., K] fp32, B [N, kb, blob] uint8, scales [N * kb] fp32,
 * zero points packed uint8 (float ones stay on the CPU), bias [N] fp32. */
static int mnb_geom(const sn_node *node, int n_in, const sn_tensor *const *in, sn_err *err, int64_t g[5]) {
    int64_t K = sn_attr_int(node, "K", 0), N = sn_attr_int(node, "N", 0), bits = sn_attr_int(node, "bits", 4),
            bs = sn_attr_int(node, "block_size", 0);
    const sn_tensor *A = in[0], *B = in[1], *S = in[2], *Z = n_in > 3 ? in[3] : NULL, *bias = n_in > 5 ? in[5] : NULL;
    if ((bits != 4 && bits != 8) || bs < 16 || (bs & (bs - 1)) || K < 1 || N < 1)
        return sn_kfail(err, node, SNUG_ERR_UNSUPPORTED, "opencl: MatMulNBits with bits %lld, block_size %lld",
                        (long long)bits, (long long)bs);
    int64_t kb = (K + bs - 1) / bs, blob = bs * bits / 8;
    if (!A || A->dtype != SN_F32 || A->rank < 1 || A->dims[A->rank - 1] != K || !B || B->dtype != SN_U8 ||
        sn_tensor_numel(B) != N * kb * blob || !S || S->dtype != SN_F32 || sn_tensor_numel(S) != N * kb)
        return sn_kfail(err, node, SNUG_ERR_UNSUPPORTED,
                        "opencl: MatMulNBits wants A float32 [..., %lld], B uint8 [%lld, %lld, %lld], scales float32 "
                        "[%lld]", (long long)K, (long long)N, (long long)kb, (long long)blob, (long long)(N * kb));
    int64_t zst = (kb * bits + 7) / 8;
    if (Z && (Z->dtype != SN_U8 || sn_tensor_numel(Z) != N * zst))
        return sn_kfail(err, node, SNUG_ERR_UNSUPPORTED,
                        "opencl: MatMulNBits' zero points must be packed uint8 [%lld] (float ones run on the CPU)",
                        (long long)(N * zst));
    if (n_in > 4 && in[4])
        return sn_kfail(err, node, SNUG_ERR_UNSUPPORTED, "opencl: MatMulNBits with g_idx");
    if (bias && (bias->dtype != SN_F32 || sn_tensor_numel(bias) != N))
        return sn_kfail(err, node, SNUG_ERR_UNSUPPORTED, "opencl: MatMulNBits' bias must be float32 [%lld]",
                        (long long)N);
    g[0] = K, g[1] = N, g[2] = bits, g[3] = bs, g[4] = zst;
    return SNUG_OK;
}

static int prep_mnb(sn_prep_ctx *c) {
    int64_t g[5] = {0};
    SN_TRY(mnb_geom(c->node, c->n_in, c->in, c->err, g));
    return c->out[0] && c->out[0]->dtype != SN_F32
               ? sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "opencl: MatMulNBits' output must be float32")
               : SNUG_OK;
}

static int run_mnb(sn_kctx *c) {
    int64_t g[5] = {0};
    SN_TRY(mnb_geom(c->node, c->n_in, (const sn_tensor *const *)c->in, c->err, g));
    sn_tensor *y = c->out[0];
    cl_long K = g[0], N = g[1], zst = g[4], M = sn_cl_numel(c->in[0]) / K;
    cl_int bits = (cl_int)g[2], bs = (cl_int)g[3];
    const sn_tensor *Z = c->n_in > 3 ? c->in[3] : NULL, *bias = c->n_in > 5 ? c->in[5] : NULL;
    cl_int has_zp = Z != NULL, has_bias = bias != NULL;
    if (!M)
        return SNUG_OK;
    sn_cl_call k = {.c = c};
    sn_cl_arg_buf(&k, c->in[0], y);
    sn_cl_arg_buf(&k, c->in[1], y);
    sn_cl_arg_buf(&k, c->in[2], y);
    sn_cl_arg_buf(&k, Z, y);
    sn_cl_arg_buf(&k, bias, y);
    sn_cl_arg_buf(&k, y, y);
    sn_cl_arg_val(&k, &N, sizeof N);
    sn_cl_arg_val(&k, &K, sizeof K);
    sn_cl_arg_val(&k, &bits, sizeof bits);
    sn_cl_arg_val(&k, &bs, sizeof bs);
    sn_cl_arg_val(&k, &has_zp, sizeof has_zp);
    sn_cl_arg_val(&k, &has_bias, sizeof has_bias);
    sn_cl_arg_val(&k, &zst, sizeof zst);
    /* a work group per output where there are few outputs (under 1024, too
     * few items to fill a device) and columns with the blocks to fill a
     * group (64 and more); else an item per output, faster on PoCL even at
     * 64 blocks (TinyLlama's K = 2048: 3.5 tok/s against 2.8) */
    if (M * N >= 1024 || (K + bs - 1) / bs < 64) {
        size_t gl[2] = {(size_t)N, (size_t)M}, l[2] = {64, 1};
        return sn_cl_enqueue(&k, SN_CLK_matmulnbits_rows, 2, gl, l);
    }
    size_t gl[2] = {(size_t)N * 64, (size_t)M}, l[2] = {64, 1};
    return sn_cl_enqueue(&k, SN_CLK_matmulnbits, 2, gl, l);
}

static bool ok_mnb(const sn_node *n) {
    int64_t bits = sn_attr_int(n, "bits", 4);
    return (bits == 4 || bits == 8) && !(n->n_in > 4 && n->in[4] >= 0) && n->n_out == 1;
}


static bool ok_rms(const sn_node *n) {
    /* outputs past the first are the statistics (not computed), except Skip's sum */
    bool skip = !strcmp(n->p->op_type, "SkipSimplifiedLayerNormalization");
    for (int i = 1; i < n->n_out; i++)
        if (n->out[i] >= 0 && !(skip && i == 3))
            return false;
    return sn_attr_int(n, "stash_type", 1) == 1;
}

static bool ok_one_output(const sn_node *n) { return n->n_out == 1; }

#define MS "com.microsoft"
static const sn_cl_op k_ops[] = {
    {"", "Add", {.prepare = sn_cl_prep_f32, .run = run_add, .host_in = 0}, sn_cl_ok_any},
    {"", "Sub", {.prepare = sn_cl_prep_f32, .run = run_sub, .host_in = 0}, sn_cl_ok_any},
    {"", "Mul", {.prepare = sn_cl_prep_f32, .run = run_mul, .host_in = 0}, sn_cl_ok_any},
    {"", "Div", {.prepare = sn_cl_prep_f32, .run = run_div, .host_in = 0}, sn_cl_ok_any},
    {"", "Neg", {.prepare = sn_cl_prep_f32, .run = run_neg, .host_in = 0}, sn_cl_ok_any},
    {"", "Sqrt", {.prepare = sn_cl_prep_f32, .run = run_sqrt_, .host_in = 0}, sn_cl_ok_any},
    {"", "Reciprocal", {.prepare = sn_cl_prep_f32, .run = run_recip, .host_in = 0}, sn_cl_ok_any},
    {"", "Exp", {.prepare = sn_cl_prep_f32, .run = run_exp_, .host_in = 0}, sn_cl_ok_any},
    {"", "Sigmoid", {.prepare = sn_cl_prep_f32, .run = run_sigmoid, .host_in = 0}, sn_cl_ok_any},
    {"", "Tanh", {.prepare = sn_cl_prep_f32, .run = run_tanh_, .host_in = 0}, sn_cl_ok_any},
    {"", "Erf", {.prepare = sn_cl_prep_f32, .run = run_erf_, .host_in = 0}, sn_cl_ok_any},
    {"", "Where", {.prepare = prep_where, .run = run_where, .host_in = 0}, sn_cl_ok_any},
    {"", "Softmax", {.prepare = sn_cl_prep_f32, .run = run_softmax, .host_in = 0}, ok_softmax},
    {"", "SimplifiedLayerNormalization", {.prepare = prep_rms, .run = run_rms, .host_in = 0}, ok_rms},
    {MS, "SkipSimplifiedLayerNormalization", {.prepare = prep_rms, .run = run_rms, .host_in = 0}, ok_rms},
    {"", "MatMul", {.prepare = sn_cl_prep_f32, .run = run_matmul, .host_in = 0}, sn_cl_ok_any},
    {MS, "MatMulNBits", {.prepare = prep_mnb, .run = run_mnb, .host_in = 0}, ok_mnb},
    {"", "Transpose", {.prepare = prep_move, .run = run_transpose, .host_in = 0}, sn_cl_ok_any},
    {"", "Concat", {.prepare = prep_concat, .run = run_concat, .host_in = 0}, ok_one_output},
    {"", "Gather", {.prepare = prep_gather, .run = run_gather, .host_in = 0}, sn_cl_ok_any},
};

static const sn_cl_op *find(const sn_cl_op *t, int n, const sn_op_def *op) {
    for (int i = 0; i < n; i++)
        if (!strcmp(t[i].domain, op->domain) && !strcmp(t[i].name, op->name))
            return &t[i];
    return NULL;
}

const sn_kernel *sn_cl_kernel(const sn_op_def *op, const sn_node *n) {
    const sn_cl_op *r = find(k_ops, (int)(sizeof k_ops / sizeof k_ops[0]), op);
    if (!r)
        r = find(sn_cl_ops_more, sn_cl_n_ops_more, op);
    if (!r)
        r = find(sn_cl_ops_attn, sn_cl_n_ops_attn, op);
    return r && r->ok(n) ? &r->k : NULL;
}
