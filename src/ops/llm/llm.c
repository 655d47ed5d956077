/* The operators exported LLMs use beyond core ONNX: ONNX Runtime contrib ops
 * (domain com.microsoft, plus the contrib ops ORT registers in the default
 * domain) and their opset-23 ONNX counterparts. Semantics follow ONNX
 * Runtime's CPU kernels. This file holds the family's table and the small
 * ops (GELU variants, normalizations, rotary embedding, and TensorScatter,
 * the KV-cache update of opset 24); MatMulNBits, GatherBlockQuantized and
 * the attention ops live in matmulnbits.c, gather_bq.c and attention.c.
 *
 * float32 is computed directly; float16, bfloat16 and double are staged
 * through float (chunks on the stack, or rows in the workspace). */
#include <math.h>
#include <string.h>

#include "ops/gemm.h"
#include "ops/llm/kernels.h"
#include "ops/llm/llm.h"

#define CHUNK 256

/* ======================================================================
 * GELU family: Gelu, FastGelu, QuickGelu, BiasGelu (com.microsoft)
 * ====================================================================== */

typedef enum gelu_kind { GELU_ERF, GELU_FAST, GELU_QUICK } gelu_kind;

static gelu_kind gelu_kind_of(const sn_node *n) {
    const char *t = n->p->op_type;
    return !strcmp(t, "FastGelu") ? GELU_FAST : !strcmp(t, "QuickGelu") ? GELU_QUICK : GELU_ERF;
}

static int gelu_infer(sn_infer_ctx *c) {
    SN_TRY(sn_need_inputs(c, 1));
    const sn_tensor *x = c->in[0];
    if (!sn_dtype_is_real(x->dtype))
        return KFAIL(SNUG_ERR_TYPE, "unsupported input type %s", sn_dtype_name(x->dtype));
    if (sn_has_in(c->in, c->n_in, 1)) {
        const sn_tensor *b = c->in[1];
        if (b->dtype != x->dtype)
            return KFAIL(SNUG_ERR_TYPE, "bias type %s differs from input type %s",
                         sn_dtype_name(b->dtype), sn_dtype_name(x->dtype));
        if (b->rank != SN_RANK_UNKNOWN && b->rank != 1)
            return KFAIL(SNUG_ERR_SHAPE, "bias must be 1-D, got rank %d", b->rank);
        if (x->rank == 0)
            return KFAIL(SNUG_ERR_SHAPE, "input with a bias must have rank >= 1");
        if (b->rank == 1 && x->rank > 0 && b->dims[0] >= 0 && x->dims[x->rank - 1] >= 0 &&
            b->dims[0] != x->dims[x->rank - 1])
            return KFAIL(SNUG_ERR_SHAPE, "bias length %lld differs from the last input dim %lld",
                         (long long)b->dims[0], (long long)x->dims[x->rank - 1]);
    }
    sn_set_out(c->out[0], x->dtype, x->rank, x->dims);
    return SNUG_OK;
}

static void gelu_apply(gelu_kind k, float alpha, float *v, int64_t n) {
    switch (k) {
    case GELU_ERF:
        for (int64_t i = 0; i < n; i++)
            v[i] = 0.5f * v[i] * (1.0f + erff(v[i] * (float)M_SQRT1_2));
        break;
    case GELU_FAST:
        for (int64_t i = 0; i < n; i++) {
            float x = v[i];
            v[i] = x * (0.5f + 0.5f * tanhf(x * (0.7978845608028654f + 0.035677408136300125f * x * x)));
        }
        break;
    case GELU_QUICK: /* x * logistic(alpha * x), MLAS's logistic like ORT */
        for (int64_t i = 0; i < n; i++)
            v[i] = v[i] * llm_logistic_mlas(alpha * v[i]);
        break;
    }
}

static int gelu_run(sn_kctx *c) {
    const sn_tensor *x = c->in[0];
    const sn_tensor *b = sn_has_in(c->in, c->n_in, 1) ? c->in[1] : NULL;
    sn_tensor *y = c->out[0];
    gelu_kind k = gelu_kind_of(c->node);
    float alpha = sn_attr_float(c->node, "alpha", 1.702f);
    int64_t n = sn_tensor_numel(x);
    if (n <= 0)
        return SNUG_OK;
    int64_t L = b ? sn_tensor_numel(b) : n;
    if (L <= 0 || n % L)
        return KFAIL(SNUG_ERR_SHAPE, "bias length %lld does not divide the input", (long long)L);
    size_t es = sn_dtype_size(x->dtype);
    float buf[CHUNK], bb[CHUNK];
    for (int64_t r = 0; r < n / L; r++)
        for (int64_t c0 = 0; c0 < L; c0 += CHUNK) {
            int64_t cnt = sn_imin(CHUNK, L - c0);
            int64_t off = r * L + c0;
            llm_to_f32(x->dtype, (const char *)x->data + off * es, buf, cnt);
            if (b) {
                llm_to_f32(b->dtype, (const char *)b->data + c0 * es, bb, cnt);
                for (int64_t i = 0; i < cnt; i++)
                    buf[i] += bb[i];
            }
            gelu_apply(k, alpha, buf, cnt);
            llm_from_f32(y->dtype, buf, (char *)y->data + off * es, cnt);
        }
    return SNUG_OK;
}

/* ======================================================================
 * Normalizations over the trailing axes:
 *   LayerNormalization (ORT's default-domain contrib version 1, before
 *   ONNX's opset 17), SimplifiedLayerNormalization (RMS, ORT default domain),
 *   RMSNormalization (ONNX opset 23).
 * ====================================================================== */

typedef enum norm_kind { NORM_LN, NORM_RMS } norm_kind;

static norm_kind norm_kind_of(const sn_node *n) {
    return !strcmp(n->p->op_type, "LayerNormalization") ? NORM_LN : NORM_RMS;
}

static sn_dtype stash_dtype(const sn_node *n, sn_dtype x) {
    int64_t st = sn_attr_int(n, "stash_type", -1);
    if (st == SN_F64)
        return SN_F64;
    if (st == SN_F32)
        return SN_F32;
    return x == SN_F64 ? SN_F64 : SN_F32;
}

static int norm_axis(sn_infer_ctx *c, const sn_tensor *x, int *axis) {
    int64_t a = sn_attr_int(c->node, "axis", -1);
    if (!sn_axis_norm(a, x->rank, axis))
        return KFAIL(SNUG_ERR_INVALID_ARG, "axis %lld out of range for rank %d", (long long)a,
                     x->rank);
    return SNUG_OK;
}

static int norm_infer(sn_infer_ctx *c) {
    SN_TRY(sn_need_inputs(c, 2));
    const sn_tensor *x = c->in[0], *g = c->in[1];
    if (!sn_dtype_is_real(x->dtype) || !sn_dtype_is_real(g->dtype))
        return KFAIL(SNUG_ERR_TYPE, "unsupported types %s, %s", sn_dtype_name(x->dtype),
                     sn_dtype_name(g->dtype));
    sn_dtype ydt = g->dtype; /* Y has the scale's type (V) */
    if (x->rank == SN_RANK_UNKNOWN) {
        sn_set_out(c->out[0], ydt, SN_RANK_UNKNOWN, NULL);
        for (int i = 1; i < c->n_out; i++)
            sn_set_out(c->out[i], stash_dtype(c->node, x->dtype), SN_RANK_UNKNOWN, NULL);
        return SNUG_OK;
    }
    if (x->rank == 0)
        return KFAIL(SNUG_ERR_SHAPE, "input must have rank >= 1");
    int axis = 0;
    SN_TRY(norm_axis(c, x, &axis));
    int64_t n = sn_dims_prod(x->dims, axis, x->rank), gn = sn_tensor_numel(g);
    if (n >= 0 && gn >= 0 && gn != n && gn != 1)
        return KFAIL(SNUG_ERR_SHAPE, "scale has %lld elements, the normalized shape %lld",
                     (long long)gn, (long long)n);
    if (sn_has_in(c->in, c->n_in, 2)) {
        int64_t bn = sn_tensor_numel(c->in[2]);
        if (n >= 0 && bn >= 0 && bn != n && bn != 1)
            return KFAIL(SNUG_ERR_SHAPE, "bias has %lld elements, the normalized shape %lld",
                         (long long)bn, (long long)n);
    }
    sn_set_out(c->out[0], ydt, x->rank, x->dims);
    int64_t sd[SN_MAX_RANK];
    for (int i = 0; i < x->rank; i++)
        sd[i] = i < axis ? x->dims[i] : 1;
    for (int i = 1; i < c->n_out; i++)
        sn_set_out(c->out[i], stash_dtype(c->node, x->dtype), x->rank, sd);
    return SNUG_OK;
}

static int norm_ws(const sn_node *node, int n_in, const sn_tensor *const *in, int n_out,
                   const sn_tensor *const *out, int n_threads, size_t *ws, sn_err *err) {
    (void)n_in, (void)n_out, (void)out, (void)n_threads;
    const sn_tensor *x = in[0];
    int64_t a = sn_attr_int(node, "axis", -1);
    int axis;
    if (!sn_axis_norm(a, x->rank, &axis))
        return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "axis out of range");
    int64_t n = sn_dims_prod(x->dims, axis, x->rank);
    /* staged x row, y row, gamma, beta (all n floats) */
    *ws = 4 * sn_align64((size_t)(n > 0 ? n : 1) * sizeof(float));
    return SNUG_OK;
}

static int norm_prepare(sn_prep_ctx *c) {
    return norm_ws(c->node, c->n_in, c->in, c->n_out, c->out, c->n_threads, &c->workspace, c->err);
}

static size_t norm_estimate(const sn_infer_ctx *c) { return llm_estimate_with(c, norm_ws); }

/* Loads a vector of n values (or one broadcast value) as floats into dst;
 * returns dst, or the tensor's own data when it is float32 of full length. */
static const float *stage_vec(const sn_tensor *t, int64_t n, float *dst) {
    if (!t)
        return NULL;
    int64_t tn = sn_tensor_numel(t);
    if (t->dtype == SN_F32 && tn == n)
        return t->data;
    if (tn == n) {
        llm_to_f32(t->dtype, t->data, dst, n);
    } else {
        float v;
        llm_to_f32(t->dtype, t->data, &v, 1);
        for (int64_t i = 0; i < n; i++)
            dst[i] = v;
    }
    return dst;
}

static void store_stat(sn_tensor *t, int64_t i, float v) {
    if (t)
        llm_from_f32(t->dtype, &v, (char *)t->data + i * sn_dtype_size(t->dtype), 1);
}

static int norm_run(sn_kctx *c) {
    const sn_tensor *x = c->in[0];
    norm_kind k = norm_kind_of(c->node);
    int64_t a = sn_attr_int(c->node, "axis", -1);
    float eps = sn_attr_float(c->node, "epsilon", 1e-5f);
    int axis;
    if (!sn_axis_norm(a, x->rank, &axis))
        return KFAIL(SNUG_ERR_INVALID_ARG, "axis out of range");
    int64_t rows = sn_dims_prod(x->dims, 0, axis), n = sn_dims_prod(x->dims, axis, x->rank);
    if (rows <= 0 || n <= 0)
        return SNUG_OK;
    size_t vb = sn_align64((size_t)n * sizeof(float));
    float *xs = c->ws, *ys = (float *)((char *)c->ws + vb);
    float *gs = (float *)((char *)c->ws + 2 * vb), *bs = (float *)((char *)c->ws + 3 * vb);
    const float *g = stage_vec(c->in[1], n, gs);
    const float *be = k == NORM_LN ? stage_vec(sn_has_in(c->in, c->n_in, 2) ? c->in[2] : NULL, n, bs)
                                   : NULL;
    sn_tensor *y = c->out[0];
    sn_tensor *mean_out = k == NORM_LN && c->n_out > 1 ? c->out[1] : NULL;
    sn_tensor *inv_out = k == NORM_LN ? (c->n_out > 2 ? c->out[2] : NULL)
                                      : (c->n_out > 1 ? c->out[1] : NULL);
    size_t xes = sn_dtype_size(x->dtype), yes = sn_dtype_size(y->dtype);
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x->dtype == SN_F32 ? (const float *)x->data + r * n : xs;
        if (x->dtype != SN_F32)
            llm_to_f32(x->dtype, (const char *)x->data + r * n * xes, xs, n);
        float *yr = y->dtype == SN_F32 ? (float *)y->data + r * n : ys;
        float inv, mean = 0;
        if (k == NORM_LN)
            mean = llm_ln_row(xr, g, be, eps, n, yr, &inv);
        else
            inv = llm_rms_row_ort(xr, g, eps, n, yr);
        if (y->dtype != SN_F32)
            llm_from_f32(y->dtype, ys, (char *)y->data + r * n * yes, n);
        store_stat(mean_out, r, mean);
        store_stat(inv_out, r, inv);
    }
    return SNUG_OK;
}

/* ======================================================================
 * SkipLayerNormalization / SkipSimplifiedLayerNormalization (com.microsoft)
 *   inputs:  input [..., H], skip [..., H] (or broadcast over leading rows),
 *            gamma [H], beta [H] (SkipLN only), bias [H]
 *   outputs: output, mean, inv_std_var, input_skip_bias_sum
 * ====================================================================== */

static bool skip_is_simplified(const sn_node *n) {
    return !strcmp(n->p->op_type, "SkipSimplifiedLayerNormalization");
}

static int skip_bias_index(const sn_node *n) {
    return skip_is_simplified(n) ? 3 : 4;
}

static int skip_infer(sn_infer_ctx *c) {
    SN_TRY(sn_need_inputs(c, 3));
    const sn_tensor *x = c->in[0], *s = c->in[1], *g = c->in[2];
    if (!sn_dtype_is_real(x->dtype) || s->dtype != x->dtype || g->dtype != x->dtype)
        return KFAIL(SNUG_ERR_TYPE, "input, skip and gamma must share one float type");
    if (x->rank != SN_RANK_UNKNOWN) {
        if (x->rank < 2 || x->rank > 3)
            return KFAIL(SNUG_ERR_SHAPE, "input must be 2-D or 3-D, got rank %d", x->rank);
        int64_t H = x->dims[x->rank - 1];
        if (s->rank != SN_RANK_UNKNOWN && (s->rank < 1 || s->rank > x->rank ||
                                           (H >= 0 && s->dims[s->rank - 1] >= 0 &&
                                            s->dims[s->rank - 1] != H)))
            return KFAIL(SNUG_ERR_SHAPE, "skip shape does not match the input");
        int64_t gn = sn_tensor_numel(g);
        if (H >= 0 && gn >= 0 && gn != H)
            return KFAIL(SNUG_ERR_SHAPE, "gamma has %lld elements, hidden size is %lld",
                         (long long)gn, (long long)H);
    }
    sn_set_out(c->out[0], x->dtype, x->rank, x->dims);
    if (c->n_out > 3)
        sn_set_out(c->out[3], x->dtype, x->rank, x->dims);
    int64_t sd[SN_MAX_RANK];
    for (int i = 0; i < x->rank; i++)
        sd[i] = i == x->rank - 1 ? 1 : x->dims[i];
    for (int i = 1; i < 3 && i < c->n_out; i++)
        sn_set_out(c->out[i], SN_F32, x->rank, sd);
    return SNUG_OK;
}

/* Rows go to the threads in equal runs; each run works in a slot of the
 * workspace: SKIP_GROUP rows of sums (when the sums are not an output) and,
 * for other float types than float32, the staged input, skip and output row. */
#define SKIP_GROUP 8

static size_t skip_slot_bytes(int64_t H) {
    return (SKIP_GROUP + 3) * sn_align64((size_t)(H > 0 ? H : 1) * sizeof(float));
}

static int skip_ws(const sn_node *node, int n_in, const sn_tensor *const *in, int n_out,
                   const sn_tensor *const *out, int n_threads, size_t *ws, sn_err *err) {
    (void)node, (void)n_in, (void)n_out, (void)out, (void)err;
    const sn_tensor *x = in[0];
    int64_t H = x->rank > 0 ? x->dims[x->rank - 1] : 1;
    /* gamma, beta, bias staged; then one slot per thread */
    *ws = 3 * sn_align64((size_t)(H > 0 ? H : 1) * sizeof(float)) +
          (size_t)(n_threads > 1 ? n_threads : 1) * skip_slot_bytes(H);
    return SNUG_OK;
}

static int skip_prepare(sn_prep_ctx *c) {
    return skip_ws(c->node, c->n_in, c->in, c->n_out, c->out, c->n_threads, &c->workspace, c->err);
}

static size_t skip_estimate(const sn_infer_ctx *c) { return llm_estimate_with(c, skip_ws); }

typedef struct skip_job {
    const sn_tensor *x, *s;
    sn_tensor *y, *mean_out, *inv_out, *sum_out;
    const float *g, *be, *bias;
    float eps;
    bool simp, f32;
    int64_t H, rows, srows, per; /* per: rows per task */
    char *slots;
} skip_job;

/* sum = x + skip (+ bias) of row r into sum (from staged rows when not float32). */
static void skip_sum_row(const skip_job *j, int64_t r, float *sum, float *xs, float *ss) {
    int64_t H = j->H;
    const float *xr, *sr;
    if (j->f32) {
        xr = (const float *)j->x->data + r * H;
        sr = (const float *)j->s->data + (r % j->srows) * H;
    } else {
        size_t es = sn_dtype_size(j->x->dtype);
        llm_to_f32(j->x->dtype, (const char *)j->x->data + r * H * es, xs, H);
        llm_to_f32(j->s->dtype, (const char *)j->s->data + (r % j->srows) * H * es, ss, H);
        xr = xs;
        sr = ss;
    }
    if (j->bias)
        for (int64_t i = 0; i < H; i++)
            sum[i] = xr[i] + sr[i] + j->bias[i];
    else
        for (int64_t i = 0; i < H; i++)
            sum[i] = xr[i] + sr[i];
}

static void skip_task(void *arg, int64_t t0, int64_t t1) {
    const skip_job *j = arg;
    int64_t H = j->H;
    size_t vb = sn_align64((size_t)H * sizeof(float));
    for (int64_t t = t0; t < t1; t++) {
        char *slot = j->slots + (size_t)t * skip_slot_bytes(H);
        float *xs = (float *)(slot + SKIP_GROUP * vb), *ss = (float *)(slot + (SKIP_GROUP + 1) * vb);
        float *ys = (float *)(slot + (SKIP_GROUP + 2) * vb);
        int64_t r1 = sn_imin(j->rows, (t + 1) * j->per);
        /* float32: SKIP_GROUP rows at once; otherwise one (staged) */
        int64_t step = j->f32 ? SKIP_GROUP : 1;
        for (int64_t r0 = t * j->per; r0 < r1; r0 += step) {
            int nr = (int)sn_imin(step, r1 - r0);
            const float *xr[SKIP_GROUP];
            float *yr[SKIP_GROUP], inv[SKIP_GROUP], mean[SKIP_GROUP] = {0};
            for (int q = 0; q < nr; q++) {
                int64_t r = r0 + q;
                float *sum = j->f32 && j->sum_out ? (float *)j->sum_out->data + r * H
                                                  : (float *)(slot + (size_t)q * vb);
                skip_sum_row(j, r, sum, xs, ss);
                xr[q] = sum;
                yr[q] = j->f32 ? (float *)j->y->data + r * H : ys;
            }
            if (j->simp)
                llm_skip_rms_rows_ort(xr, j->g, j->eps, H, yr, inv, nr);
            else
                for (int q = 0; q < nr; q++)
                    mean[q] = llm_ln_row(xr[q], j->g, j->be, j->eps, H, yr[q], &inv[q]);
            for (int q = 0; q < nr; q++) {
                int64_t r = r0 + q;
                if (!j->f32) {
                    size_t es = sn_dtype_size(j->x->dtype);
                    llm_from_f32(j->y->dtype, ys, (char *)j->y->data + r * H * es, H);
                    if (j->sum_out)
                        llm_from_f32(j->x->dtype, xr[q], (char *)j->sum_out->data + r * H * es, H);
                }
                store_stat(j->mean_out, r, mean[q]);
                store_stat(j->inv_out, r, inv[q]);
            }
        }
    }
}

static int skip_run(sn_kctx *c) {
    const sn_tensor *x = c->in[0], *s = c->in[1];
    skip_job j = {.x = x, .s = s, .simp = skip_is_simplified(c->node)};
    j.eps = sn_attr_float(c->node, "epsilon", 1e-12f);
    j.H = x->dims[x->rank - 1];
    j.rows = j.H > 0 ? sn_tensor_numel(x) / j.H : 0;
    if (j.rows <= 0 || j.H <= 0)
        return SNUG_OK;
    j.srows = sn_tensor_numel(s) / j.H;
    if (j.srows <= 0 || j.rows % j.srows)
        return KFAIL(SNUG_ERR_SHAPE, "skip has %lld rows, input %lld", (long long)j.srows,
                     (long long)j.rows);
    size_t vb = sn_align64((size_t)j.H * sizeof(float));
    char *w = c->ws;
    j.g = stage_vec(c->in[2], j.H, (float *)w);
    j.be = j.simp ? NULL
                  : stage_vec(sn_has_in(c->in, c->n_in, 3) ? c->in[3] : NULL, j.H, (float *)(w + vb));
    int bi = skip_bias_index(c->node);
    j.bias = stage_vec(sn_has_in(c->in, c->n_in, bi) ? c->in[bi] : NULL, j.H, (float *)(w + 2 * vb));
    j.slots = w + 3 * vb;
    j.y = c->out[0];
    j.mean_out = c->n_out > 1 ? c->out[1] : NULL;
    j.inv_out = c->n_out > 2 ? c->out[2] : NULL;
    j.sum_out = c->n_out > 3 ? c->out[3] : NULL;
    j.f32 = x->dtype == SN_F32;
    /* one run per thread, in whole groups of SKIP_GROUP rows; a decode step's
     * row runs here. 16 rows go to two threads: each row was written half by
     * each thread (the MatMul before splits columns), and one thread alone
     * took 4x as long as both. */
    int64_t tasks = sn_imin(sn_pool_size(c->pool), (j.rows + SKIP_GROUP - 1) / SKIP_GROUP);
    tasks = sn_imax(tasks, 1);
    j.per = (j.rows + tasks - 1) / tasks;
    if (j.f32)
        j.per = (j.per + SKIP_GROUP - 1) / SKIP_GROUP * SKIP_GROUP;
    tasks = (j.rows + j.per - 1) / j.per;
    sn_pool_for(tasks > 1 ? c->pool : NULL, tasks, 1, skip_task, &j);
    return SNUG_OK;
}

/* ======================================================================
 * RotaryEmbedding: com.microsoft (input, position_ids, cos, sin) and ONNX
 * opset 23 (X, cos, sin, position_ids?). Input (B, S, N*H) or (B, N, S, H).
 * ====================================================================== */

int llm_rope_geom_of(const sn_node *node, int n_in, const sn_tensor *const *in, llm_rope_geom *g, sn_err *err) {
    bool onnx = strcmp(node->p->domain, "com.microsoft") != 0;
    for (int i = 0; i < (onnx ? 3 : 4); i++) /* onnx: X, cos, sin; com.microsoft: X, position_ids, cos, sin */
        SN_TRY(sn_check_in(node, err, n_in, in, i, "input", SN_IN_REQUIRED, SN_DT_ANY, SN_RANK_ANY));
    SN_TRY(sn_check_in(node, err, n_in, in, onnx ? 3 : 1, "position_ids", SN_IN_OPTIONAL, SN_DT(SN_I64),
                       SN_RANK_ANY));
    const sn_tensor *x = in[0];
    const sn_tensor *cs = onnx ? in[1] : in[2];
    const sn_tensor *pid = onnx ? (sn_has_in(in, n_in, 3) ? in[3] : NULL) : in[1];
    memset(g, 0, sizeof *g);
    g->onnx = onnx;
    int64_t nh = sn_attr_int(node, "num_heads", 0);
    int64_t rd = sn_attr_int(node, "rotary_embedding_dim", 0);
    if (!onnx && sn_attr_int(node, "is_packed_batching", 0))
        return sn_kfail(err, node, SNUG_ERR_UNSUPPORTED, "is_packed_batching=1 is not supported");
    if (x->rank != 3 && x->rank != 4)
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "input must be 3-D or 4-D, got rank %d",
                        x->rank);
    if (cs->rank != 2 && !(onnx && cs->rank == 3))
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "cos_cache must be 2-D, got rank %d",
                        cs->rank);
    int64_t half = cs->dims[cs->rank - 1];
    g->B = x->dims[0];
    g->four_d = x->rank == 4;
    if (g->four_d) {
        g->N = x->dims[1];
        g->S = x->dims[2];
        g->H = x->dims[3];
    } else {
        g->S = x->dims[1];
        int64_t hidden = x->dims[2];
        if (nh > 0) {
            g->N = nh;
        } else {
            if (onnx)
                return sn_kfail(err, node, SNUG_ERR_INVALID_ARG,
                                "num_heads is required for a 3-D input");
            g->N = half > 0 ? hidden / (2 * half) : 0;
        }
        if (g->N <= 0 || hidden % g->N)
            return sn_kfail(err, node, SNUG_ERR_SHAPE,
                            "hidden size %lld is not a multiple of num_heads %lld",
                            (long long)hidden, (long long)g->N);
        g->H = hidden / g->N;
    }
    g->rot = rd > 0 ? rd : g->H;
    if (g->rot > g->H || g->rot % 2)
        return sn_kfail(err, node, SNUG_ERR_INVALID_ARG,
                        "rotary_embedding_dim %lld invalid for head size %lld", (long long)g->rot,
                        (long long)g->H);
    if (half != g->rot / 2)
        return sn_kfail(err, node, SNUG_ERR_SHAPE,
                        "cos_cache last dim %lld, expected rotary_dim/2 = %lld", (long long)half,
                        (long long)(g->rot / 2));
    if (!pid) {
        if (!onnx)
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "position_ids is required");
        if (cs->rank != 3 || cs->dims[0] != g->B || cs->dims[1] != g->S)
            return sn_kfail(err, node, SNUG_ERR_SHAPE,
                            "without position_ids cos_cache must be (batch, seq, rot/2)");
        g->pos_none = true;
    } else {
        if (pid->dtype != SN_I64)
            return sn_kfail(err, node, SNUG_ERR_TYPE, "position_ids must be int64");
        if (cs->rank != 2)
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "with position_ids cos_cache must be 2-D");
        int64_t pn = sn_tensor_numel(pid);
        if (!onnx && pid->rank == 1 && pn == 1)
            g->pos_scalar = true;
        else if (pid->rank != 2 || pid->dims[0] != g->B || pid->dims[1] != g->S)
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "position_ids must be (batch, seq)");
    }
    return SNUG_OK;
}

static int rope_infer(sn_infer_ctx *c) {
    const sn_tensor *x = c->in[0];
    if (!sn_dtype_is_real(x->dtype))
        return KFAIL(SNUG_ERR_TYPE, "unsupported input type %s", sn_dtype_name(x->dtype));
    sn_set_out(c->out[0], x->dtype, x->rank, x->dims);
    return SNUG_OK;
}

static int rope_ws(const sn_node *node, int n_in, const sn_tensor *const *in, int n_out,
                   const sn_tensor *const *out, int n_threads, size_t *ws, sn_err *err) {
    (void)n_out, (void)out, (void)n_threads;
    llm_rope_geom g;
    SN_TRY(llm_rope_geom_of(node, n_in, in, &g, err));
    *ws = sn_align64((size_t)(2 * g.H + g.rot + 2) * sizeof(float));
    return SNUG_OK;
}

static int rope_prepare(sn_prep_ctx *c) {
    return rope_ws(c->node, c->n_in, c->in, c->n_out, c->out, c->n_threads, &c->workspace, c->err);
}

static size_t rope_estimate(const sn_infer_ctx *c) { return llm_estimate_with(c, rope_ws); }

static int rope_run(sn_kctx *c) {
    llm_rope_geom g;
    SN_TRY(llm_rope_geom_of(c->node, c->n_in, c->in, &g, c->err));
    const sn_tensor *x = c->in[0];
    const sn_tensor *cs = g.onnx ? c->in[1] : c->in[2], *sn = g.onnx ? c->in[2] : c->in[3];
    const sn_tensor *pid = g.onnx ? (sn_has_in(c->in, c->n_in, 3) ? c->in[3] : NULL) : c->in[1];
    sn_tensor *y = c->out[0];
    int64_t half = g.rot / 2, max_pos = cs->rank == 2 ? cs->dims[0] : 0;
    if (sn_tensor_numel(sn) != sn_tensor_numel(cs))
        return KFAIL(SNUG_ERR_SHAPE, "sin_cache and cos_cache shapes differ");
    size_t es = sn_dtype_size(x->dtype), ces = sn_dtype_size(cs->dtype);
    float *xb = c->ws, *cb = xb + g.H, *sb = cb + half;
    bool f32 = x->dtype == SN_F32 && cs->dtype == SN_F32;
    int il = (int)sn_attr_int(c->node, "interleaved", 0);
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t s = 0; s < g.S; s++) {
            int64_t row; /* row of the cos/sin caches */
            if (g.pos_none) {
                row = b * g.S + s;
            } else {
                const int64_t *p = pid->data;
                row = g.pos_scalar ? p[0] + s : p[b * g.S + s];
                if (row < 0 || row >= max_pos)
                    return KFAIL(SNUG_ERR_INVALID_ARG,
                                 "position id %lld out of range [0, %lld)", (long long)row,
                                 (long long)max_pos);
            }
            const float *cr, *sr;
            if (f32) {
                cr = (const float *)cs->data + row * half;
                sr = (const float *)sn->data + row * half;
            } else {
                llm_to_f32(cs->dtype, (const char *)cs->data + row * half * ces, cb, half);
                llm_to_f32(sn->dtype, (const char *)sn->data + row * half * ces, sb, half);
                cr = cb;
                sr = sb;
            }
            for (int64_t h = 0; h < g.N; h++) {
                int64_t off = g.four_d ? ((b * g.N + h) * g.S + s) * g.H
                                       : ((b * g.S + s) * g.N + h) * g.H;
                if (f32) {
                    llm_rope((const float *)x->data + off, (float *)y->data + off, cr, sr, g.rot,
                             g.H, il);
                } else {
                    llm_to_f32(x->dtype, (const char *)x->data + off * es, xb, g.H);
                    llm_rope(xb, xb, cr, sr, g.rot, g.H, il);
                    llm_from_f32(y->dtype, xb, (char *)y->data + off * es, g.H);
                }
            }
        }
    return SNUG_OK;
}

/* ======================================================================
 * TensorScatter (24)
 *
 * present = past with update written along axis at write_indices[batch]
 * (linear: must fit; circular: wraps modulo the axis length). Runs in
 * place when the planner lets output 0 share past_cache's buffer.
 * ====================================================================== */

static int tsc_axis(const sn_node *node, sn_err *err, int rank, int *axis) {
    if (!sn_axis_norm(sn_attr_int(node, "axis", -2), rank, axis) || *axis == 0)
        return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "axis must be in [1, %d) (dim 0 is the batch)", rank);
    return SNUG_OK;
}

static int tsc_mode(const sn_node *node, sn_err *err, bool *circular) {
    const char *m = sn_attr_str(node, "mode", "linear");
    *circular = !strcmp(m, "circular");
    if (!*circular && strcmp(m, "linear"))
        return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "mode '%s' is not linear or circular", m);
    return SNUG_OK;
}

static int tsc_infer(sn_infer_ctx *c) {
    const sn_tensor *past = sn_in(c->in, c->n_in, 0), *up = sn_in(c->in, c->n_in, 1);
    const sn_tensor *wi = sn_in(c->in, c->n_in, 2);
    if (!past || !up)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "needs past_cache and update");
    if (up->dtype != past->dtype)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "update (%s) must have past_cache's type (%s)",
                        sn_dtype_name(up->dtype), sn_dtype_name(past->dtype));
    if (sn_dtype_nbytes(past->dtype, 2) != 2 * sn_dtype_size(past->dtype) || past->dtype == SN_STRING)
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "type %s not supported", sn_dtype_name(past->dtype));
    if (wi && wi->dtype != SN_I64)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "write_indices must be int64");
    bool circ;
    SN_TRY(tsc_mode(c->node, c->err, &circ));
    if (past->rank >= 0) {
        int axis;
        SN_TRY(tsc_axis(c->node, c->err, past->rank, &axis));
        if (up->rank >= 0) {
            if (up->rank != past->rank)
                return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "update must have past_cache's rank");
            for (int i = 0; i < past->rank; i++) {
                int64_t a = past->dims[i], b = up->dims[i];
                if (sn_dim_known(a) && sn_dim_known(b) && (i == axis ? b > a : a != b))
                    return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "update dim %d (%lld) does not fit past_cache's (%lld)",
                                    i, (long long)b, (long long)a);
            }
        }
    }
    sn_set_out(c->out[0], past->dtype, past->rank, past->dims);
    return SNUG_OK;
}

static int tsc_run(sn_kctx *c) {
    const sn_tensor *past = c->in[0], *up = c->in[1], *wi = sn_in(c->in, c->n_in, 2);
    sn_tensor *y = c->out[0];
    int axis;
    bool circ;
    SN_TRY(tsc_axis(c->node, c->err, past->rank, &axis));
    SN_TRY(tsc_mode(c->node, c->err, &circ));
    size_t nb = sn_tensor_nbytes(past);
    if (y->data != past->data && nb)
        memcpy(y->data, past->data, nb);
    int64_t B = past->dims[0], S = past->dims[axis], U = up->dims[axis];
    if (wi && sn_tensor_numel(wi) != B)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "write_indices has %lld values for batch %lld",
                        (long long)sn_tensor_numel(wi), (long long)B);
    int64_t inner = 1, mid = 1;
    for (int i = axis + 1; i < past->rank; i++)
        inner *= past->dims[i];
    for (int i = 1; i < axis; i++)
        mid *= past->dims[i];
    size_t row = (size_t)inner * sn_dtype_size(past->dtype);
    for (int64_t b = 0; b < B; b++) {
        int64_t w = wi ? ((const int64_t *)wi->data)[b] : 0;
        if (w < 0 || (!circ && w + U > S) || (circ && U > 0 && w >= S))
            return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG,
                            "write index %lld for batch %lld does not fit %lld positions (update of %lld)",
                            (long long)w, (long long)b, (long long)S, (long long)U);
        for (int64_t m = 0; m < mid; m++) {
            int64_t p = b * mid + m;
            for (int64_t s = 0; s < U; s++) {
                int64_t d = circ ? (w + s) % S : w + s;
                memcpy((char *)y->data + (size_t)(p * S + d) * row,
                       (const char *)up->data + (size_t)(p * U + s) * row, row);
            }
        }
    }
    return SNUG_OK;
}

/* Level 1 through an op's sizing rule (llm.h), on the inferred infos. */
size_t llm_estimate_with(const sn_infer_ctx *c, llm_ws_fn ws) {
    for (int i = 0; i < c->n_in; i++)
        if (c->in[i] && !sn_tensor_shape_known(c->in[i]))
            return 0;
    for (int i = 0; i < c->n_out; i++)
        if (c->out[i] && !sn_tensor_shape_known(c->out[i]))
            return 0;
    sn_err err = {0};
    size_t bytes = 0;
    return ws(c->node, c->n_in, c->in, c->n_out, (const sn_tensor *const *)c->out, sn_gemm_threads(c->n_threads),
              &bytes, &err) == SNUG_OK
               ? bytes
               : 0;
}

/* ====================================================================== */

#define MS "com.microsoft"

const sn_op_def sn_ops_llm[] = {
    {.domain = MS, .name = "Gelu", .since_version = 1, .infer = gelu_infer, .flags = SN_OP_INPLACE0,
     .cpu = {.run = gelu_run}},
    {.domain = MS, .name = "FastGelu", .since_version = 1, .infer = gelu_infer, .flags = SN_OP_INPLACE0,
     .cpu = {.run = gelu_run}},
    {.domain = MS, .name = "QuickGelu", .since_version = 1, .infer = gelu_infer, .flags = SN_OP_INPLACE0,
     .cpu = {.run = gelu_run}},
    {.domain = MS, .name = "BiasGelu", .since_version = 1, .required = 0x3, .infer = gelu_infer, .flags = SN_OP_INPLACE0,
     .cpu = {.run = gelu_run}},
    /* ORT registers these two in the default domain; ONNX's own
     * LayerNormalization (nn/norm.c) takes over from opset 17. */
    {.domain = "", .name = "LayerNormalization", .since_version = 1, .required = 0x3, .infer = norm_infer, .estimate = norm_estimate,
     .cpu = {.prepare = norm_prepare, .run = norm_run}},
    {.domain = "", .name = "SimplifiedLayerNormalization", .since_version = 1, .required = 0x3, .infer = norm_infer,
     .estimate = norm_estimate, .cpu = {.prepare = norm_prepare, .run = norm_run}},
    {.domain = "", .name = "RMSNormalization", .since_version = 23, .required = 0x3, .infer = norm_infer, .estimate = norm_estimate,
     .cpu = {.prepare = norm_prepare, .run = norm_run}},
    {.domain = MS, .name = "SkipLayerNormalization", .since_version = 1, .required = 0x7, .infer = skip_infer, .estimate = skip_estimate,
     .cpu = {.prepare = skip_prepare, .run = skip_run}},
    {.domain = MS, .name = "SkipSimplifiedLayerNormalization", .since_version = 1, .required = 0x7, .infer = skip_infer,
     .estimate = skip_estimate, .cpu = {.prepare = skip_prepare, .run = skip_run}},
    {.domain = MS, .name = "RotaryEmbedding", .since_version = 1, .required = 0xf, .infer = rope_infer, .flags = SN_OP_INPLACE0, .estimate = rope_estimate,
     .cpu = {.prepare = rope_prepare, .run = rope_run}},
    {.domain = "", .name = "RotaryEmbedding", .since_version = 23, .required = 0x7, .infer = rope_infer, .flags = SN_OP_INPLACE0, .estimate = rope_estimate,
     .cpu = {.prepare = rope_prepare, .run = rope_run}},
    {.domain = MS, .name = "MatMulNBits", .since_version = 1, .required = 0x7, .infer = llm_mnb_infer, .estimate = llm_mnb_estimate, .group_ok = llm_mnb_group_ok,
     .cpu = {.prepare = llm_mnb_prepare, .run = llm_mnb_run, .free_state = llm_mnb_free, .run_group = llm_mnb_run_group,
             .group_tail = llm_mnb_group_tail}},
    {.domain = MS, .name = "GatherBlockQuantized", .since_version = 1, .required = 0x7, .infer = llm_gbq_infer,
     .flags = SN_OP_PACKED_OK, .estimate = llm_gbq_estimate, .cpu = {.prepare = llm_gbq_prepare, .run = llm_gbq_run}},
    {.domain = MS, .name = "GroupQueryAttention", .since_version = 1, .required = 0x61, .infer = llm_gqa_infer,
     .flags = SN_OP_KV_SHARE, .estimate = llm_gqa_estimate, .cpu = {.prepare = llm_gqa_prepare, .run = llm_gqa_run}},
    {.domain = MS, .name = "MultiHeadAttention", .since_version = 1, .infer = llm_mha_infer, .estimate = llm_mha_estimate,
     .cpu = {.prepare = llm_mha_prepare, .run = llm_mha_run}},
    {.domain = "", .name = "Attention", .since_version = 23, .required = 0x7, .infer = llm_sdpa_infer, .estimate = llm_sdpa_estimate,
     .cpu = {.prepare = llm_sdpa_prepare, .run = llm_sdpa_run}},
    {.domain = "", .name = "TensorScatter", .since_version = 24, .required = 0x3, .infer = tsc_infer, .flags = SN_OP_INPLACE0,
     .cpu = {.run = tsc_run}},
    {0},
};
