/* Linear quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear.
 *
 * Scale and zero point are per tensor (scalars or 1-element), per axis (a
 * vector along `axis`), or blocked (opset 21: the input's shape with
 * dims[axis] divided into blocks of block_size). Quantizing rounds half to
 * even and saturates to the output type, as the spec says. */
#include <math.h>
#include <string.h>

#include "ops/linalg/gemm_ops.h"

/* How the parameters map onto x = [outer, A, inner] around the axis. */
typedef struct qmap {
    int64_t outer, A, inner;
    int64_t block;  /* 0: per tensor or per axis */
    bool per_axis;  /* parameter index = a (or blocked) */
    int64_t nblk;   /* blocks along the axis */
} qmap;

static int qmap_make(const sn_node *node, sn_err *err, const sn_tensor *x, const sn_tensor *scale,
                     const sn_tensor *zp, qmap *m) {
    memset(m, 0, sizeof *m);
    int64_t ns = sn_in_numel(scale);
    /* one scale and one zero point: per tensor, whatever their ranks ([] or [1]) */
    if (zp && ns == 1 && sn_in_numel(zp) == 1 && scale->rank <= 1 && zp->rank <= 1)
        zp = NULL;
    if (zp && zp->rank != scale->rank)
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "scale and zero point shapes differ");
    if (zp)
        for (int i = 0; i < zp->rank; i++)
            if (zp->dims[i] != scale->dims[i])
                return sn_kfail(err, node, SNUG_ERR_SHAPE, "scale and zero point shapes differ");
    m->outer = 1;
    m->A = 1;
    m->inner = sn_in_numel(x);
    if (scale->rank == 0 || (ns == 1 && scale->rank <= 1))
        return SNUG_OK; /* per tensor */
    int axis;
    if (!sn_axis_norm(sn_attr_int(node, "axis", 1), x->rank, &axis))
        return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "axis out of range for rank %d", x->rank);
    m->outer = 1;
    for (int i = 0; i < axis; i++)
        m->outer *= x->dims[i];
    m->A = x->dims[axis];
    m->inner = 1;
    for (int i = axis + 1; i < x->rank; i++)
        m->inner *= x->dims[i];
    int64_t bs = sn_attr_int(node, "block_size", 0);
    if (bs <= 0) {
        if (scale->rank != 1 || ns != m->A)
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "per-axis scale must have %lld values, has %lld",
                            (long long)m->A, (long long)ns);
        m->per_axis = true;
        return SNUG_OK;
    }
    m->block = bs;
    m->nblk = (m->A + bs - 1) / bs;
    if (scale->rank != x->rank)
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "blocked scale must have x's rank");
    for (int i = 0; i < x->rank; i++)
        if (scale->dims[i] != (i == axis ? m->nblk : x->dims[i]))
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "blocked scale dim %d is %lld", i, (long long)scale->dims[i]);
    return SNUG_OK;
}

static inline int64_t qmap_idx(const qmap *m, int64_t o, int64_t a, int64_t in) {
    if (m->block)
        return (o * m->nblk + a / m->block) * m->inner + in;
    return m->per_axis ? a : 0;
}

static bool q_int_type(sn_dtype t) {
    return t == SN_U8 || t == SN_I8 || t == SN_U16 || t == SN_I16 || t == SN_I32 || t == SN_U32 ||
           t == SN_U4 || t == SN_I4 || t == SN_U2 || t == SN_I2;
}
/* Float quantized types: float8 variants and float4 e2m1 (zero point is
 * added in float, the conversion rounds to nearest even). */
static bool q_f8_type(sn_dtype t) {
    return t == SN_F8E4M3FN || t == SN_F8E4M3FNUZ || t == SN_F8E5M2 || t == SN_F8E5M2FNUZ ||
           t == SN_F4E2M1;
}
static bool q_packed(sn_dtype t) {
    return t == SN_U4 || t == SN_I4 || t == SN_U2 || t == SN_I2 || t == SN_F4E2M1;
}
static void q_range(sn_dtype t, double *lo, double *hi) {
    switch (t) {
    case SN_U8: *lo = 0, *hi = 255; break;
    case SN_I8: *lo = -128, *hi = 127; break;
    case SN_U16: *lo = 0, *hi = 65535; break;
    case SN_I16: *lo = -32768, *hi = 32767; break;
    case SN_U32: *lo = 0, *hi = 4294967295.0; break;
    case SN_U4: *lo = 0, *hi = 15; break;
    case SN_I4: *lo = -8, *hi = 7; break;
    case SN_U2: *lo = 0, *hi = 3; break;
    case SN_I2: *lo = -2, *hi = 1; break;
    default: *lo = -2147483648.0, *hi = 2147483647.0; break;
    }
}

/* ---- QuantizeLinear ------------------------------------------------------------------- */

static sn_dtype quant_out_type(const sn_node *node, const sn_tensor *zp) {
    if (zp)
        return zp->dtype;
    int64_t od = sn_attr_int(node, "output_dtype", 0);
    return od ? (sn_dtype)od : SN_U8;
}

static int quant_infer(sn_infer_ctx *c) {
    const sn_tensor *x = sn_in(c->in, c->n_in, 0), *sc = sn_in(c->in, c->n_in, 1);
    const sn_tensor *zp = sn_in(c->in, c->n_in, 2);
    if (!x || !sc)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "needs inputs x and y_scale");
    if (!sn_dtype_is_real(x->dtype) && x->dtype != SN_I32)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "x of type %s not supported", sn_dtype_name(x->dtype));
    if (!sn_dtype_is_real(sc->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "y_scale must be a float type");
    sn_dtype yt = quant_out_type(c->node, zp);
    if (!q_int_type(yt) && !q_f8_type(yt))
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "output type %s not supported", sn_dtype_name(yt));
    sn_set_out(c->out[0], yt, x->rank, x->rank == SN_RANK_UNKNOWN ? NULL : x->dims);
    return SNUG_OK;
}

static int quant_run(sn_kctx *c) {
    const sn_tensor *x = c->in[0], *sc = c->in[1], *zp = sn_in(c->in, c->n_in, 2);
    sn_tensor *y = c->out[0];
    qmap m;
    SN_TRY(qmap_make(c->node, c->err, x, sc, zp, &m));
    sn_dtype yt = y->dtype;
    bool saturate = sn_attr_int(c->node, "saturate", 1) != 0;
    double lo = 0, hi = 0;
    q_range(yt, &lo, &hi);
    if (q_packed(yt)) /* elements are or-ed into bytes: start from zero padding */
        memset(y->data, 0, sn_tensor_nbytes(y));
    for (int64_t o = 0; o < m.outer; o++)
        for (int64_t a = 0; a < m.A; a++)
            for (int64_t in = 0; in < m.inner; in++) {
                size_t i = (size_t)((o * m.A + a) * m.inner + in);
                size_t pi = (size_t)qmap_idx(&m, o, a, in);
                float s = (float)sn_load_f64(sc->dtype, sc->data, pi);
                float xv = (float)sn_load_f64(x->dtype, x->data, i);
                if (q_f8_type(yt)) {
                    float v = xv / s + (zp ? (float)sn_load_f64(zp->dtype, zp->data, pi) : 0.0f);
                    if (yt == SN_F4E2M1)
                        sn_store_f64(yt, y->data, i, v); /* always saturates */
                    else
                        ((uint8_t *)y->data)[i] = sn_f32_to_f8(yt, v, saturate);
                    continue;
                }
                double v = nearbyint((double)(xv / s));
                if (zp)
                    v += (double)sn_load_i64(zp->dtype, zp->data, pi);
                v = v < lo ? lo : v > hi ? hi : v;
                if (isnan(v))
                    v = 0;
                sn_store_f64(yt, y->data, i, v);
            }
    return SNUG_OK;
}

/* ---- DequantizeLinear ------------------------------------------------------------------ */

static int dequant_infer(sn_infer_ctx *c) {
    const sn_tensor *x = sn_in(c->in, c->n_in, 0), *sc = sn_in(c->in, c->n_in, 1);
    const sn_tensor *zp = sn_in(c->in, c->n_in, 2);
    if (!x || !sc)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "needs inputs x and x_scale");
    if (!q_int_type(x->dtype) && !q_f8_type(x->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "x of type %s not supported", sn_dtype_name(x->dtype));
    if (zp && zp->dtype != x->dtype)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "x_zero_point must have x's type");
    if (!sn_dtype_is_real(sc->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "x_scale must be a float type");
    sn_set_out(c->out[0], sc->dtype, x->rank, x->rank == SN_RANK_UNKNOWN ? NULL : x->dims);
    return SNUG_OK;
}

static int dequant_run(sn_kctx *c) {
    const sn_tensor *x = c->in[0], *sc = c->in[1], *zp = sn_in(c->in, c->n_in, 2);
    sn_tensor *y = c->out[0];
    qmap m;
    SN_TRY(qmap_make(c->node, c->err, x, sc, zp, &m));
    bool f8 = q_f8_type(x->dtype);
    for (int64_t o = 0; o < m.outer; o++)
        for (int64_t a = 0; a < m.A; a++)
            for (int64_t in = 0; in < m.inner; in++) {
                size_t i = (size_t)((o * m.A + a) * m.inner + in);
                size_t pi = (size_t)qmap_idx(&m, o, a, in);
                float s = (float)sn_load_f64(sc->dtype, sc->data, pi);
                float v;
                if (f8) {
                    v = (float)sn_load_f64(x->dtype, x->data, i);
                    if (zp)
                        v -= (float)sn_load_f64(zp->dtype, zp->data, pi);
                    v *= s;
                } else {
                    int64_t q = sn_load_i64(x->dtype, x->data, i);
                    if (zp)
                        q -= sn_load_i64(zp->dtype, zp->data, pi);
                    v = (float)q * s;
                }
                sn_store_f64(y->dtype, y->data, i, v);
            }
    return SNUG_OK;
}

/* ---- DynamicQuantizeLinear --------------------------------------------------------------- */

static int dynq_infer(sn_infer_ctx *c) {
    const sn_tensor *x = sn_in(c->in, c->n_in, 0);
    if (!x)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "needs input x");
    if (x->dtype != SN_F32)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "x must be float32");
    sn_set_out(c->out[0], SN_U8, x->rank, x->rank == SN_RANK_UNKNOWN ? NULL : x->dims);
    if (c->n_out > 1)
        sn_set_out(c->out[1], SN_F32, 0, NULL);
    if (c->n_out > 2)
        sn_set_out(c->out[2], SN_U8, 0, NULL);
    return SNUG_OK;
}

static int dynq_run(sn_kctx *c) {
    const sn_tensor *x = c->in[0];
    const float *X = x->data;
    int64_t n = sn_in_numel(x);
    float mx = 0.0f, mn = 0.0f; /* the range always includes 0 */
    for (int64_t i = 0; i < n; i++) {
        mx = X[i] > mx ? X[i] : mx;
        mn = X[i] < mn ? X[i] : mn;
    }
    /* all zeros: scale 1 (onnxruntime; the Python reference gives 1/255) */
    float scale = mx == mn ? 1.0f : (mx - mn) / 255.0f;
    float zpf = 0.0f - mn / scale;
    zpf = zpf < 0.0f ? 0.0f : zpf > 255.0f ? 255.0f : zpf;
    float zp = nearbyintf(zpf);
    uint8_t *Y = c->out[0]->data;
    for (int64_t i = 0; i < n; i++) {
        float v = nearbyintf(X[i] / scale) + zp;
        Y[i] = (uint8_t)(v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v);
    }
    if (c->n_out > 1 && c->out[1])
        *(float *)c->out[1]->data = scale;
    if (c->n_out > 2 && c->out[2])
        *(uint8_t *)c->out[2]->data = (uint8_t)zp;
    return SNUG_OK;
}

/* ---- QLinearMatMul (opset 21: float16/bfloat16 scales) --------------------------------- *
 * Inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale,
 * y_zero_point. Scales and zero points are per tensor, per row of a
 * ([M]) or per column of b ([N]). The requantization scale is computed in
 * the scales' type (as the reference does), the product in double. Opset
 * 10 is served by the matmul family. */

static bool qlmm_q8(sn_dtype t) { return t == SN_U8 || t == SN_I8; }

/* Element index of a scale/zero point for row-or-column i of matrix mat:
 * per tensor (1 element), per row/col ([per]) or per matrix and row/col. */
static int qlmm_param(const sn_kctx *c, const sn_tensor *t, int64_t per, int64_t n_mats,
                      const char *what, int64_t *mode) {
    int64_t n = sn_in_numel(t);
    if (n == 1 || n == per || n == per * n_mats) {
        *mode = n;
        return SNUG_OK;
    }
    return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "%s has %lld elements; expected 1 or %lld",
                    what, (long long)n, (long long)per);
}

static inline size_t qlmm_idx(int64_t mode, int64_t per, int64_t mat, int64_t i) {
    return (size_t)(mode == 1 ? 0 : mode == per ? i : mat * per + i);
}

/* Rounds v to the precision of float type t. */
static inline float q_round_to(sn_dtype t, float v) {
    if (t == SN_F16)
        return sn_f16_to_f32(sn_f32_to_f16(v));
    if (t == SN_BF16)
        return sn_bf16_to_f32(sn_f32_to_bf16(v));
    return v;
}

static int qlmm21_infer(sn_infer_ctx *c) {
    if (c->n_in < 8)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "needs 8 inputs");
    for (int i = 0; i < 8; i++)
        if (!c->in[i])
            return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "input %d is required", i);
    const sn_tensor *a = c->in[0], *b = c->in[3];
    if (!qlmm_q8(a->dtype) || !qlmm_q8(b->dtype) || !qlmm_q8(c->in[7]->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED,
                        "a, b and y_zero_point must be int8 or uint8 (a %s, b %s)",
                        sn_dtype_name(a->dtype), sn_dtype_name(b->dtype));
    if (c->in[2]->dtype != a->dtype || c->in[5]->dtype != b->dtype)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "zero points must have their input's type");
    sn_dtype st = c->in[1]->dtype;
    if (!(st == SN_F32 || st == SN_F16 || st == SN_BF16) || c->in[4]->dtype != st || c->in[6]->dtype != st)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE,
                        "scales must share one type of float32, float16 or bfloat16");
    sn_dtype yt = c->in[7]->dtype;
    if (a->rank == SN_RANK_UNKNOWN || b->rank == SN_RANK_UNKNOWN) {
        sn_set_out(c->out[0], yt, SN_RANK_UNKNOWN, NULL);
        return SNUG_OK;
    }
    gk_mm p;
    SN_TRY(gk_mm_plan(c->node, c->err, a, b, &p));
    sn_set_out(c->out[0], yt, p.out_rank, p.out_dims);
    return SNUG_OK;
}

static int qlmm21_run(sn_kctx *c) {
    const sn_tensor *a = c->in[0], *as = c->in[1], *az = c->in[2];
    const sn_tensor *b = c->in[3], *bs = c->in[4], *bz = c->in[5];
    const sn_tensor *ys = c->in[6], *yz = c->in[7];
    sn_tensor *y = c->out[0];
    gk_mm p;
    SN_TRY(gk_mm_plan(c->node, c->err, a, b, &p));
    int64_t mas = 0, maz = 0, mbs = 0, mbz = 0;
    SN_TRY(qlmm_param(c, as, p.M, p.na, "a_scale", &mas));
    SN_TRY(qlmm_param(c, az, p.M, p.na, "a_zero_point", &maz));
    SN_TRY(qlmm_param(c, bs, p.N, p.nbm, "b_scale", &mbs));
    SN_TRY(qlmm_param(c, bz, p.N, p.nbm, "b_zero_point", &mbz));
    if (sn_in_numel(ys) != 1 || sn_in_numel(yz) != 1)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "y_scale and y_zero_point must have one element");
    sn_dtype st = as->dtype;
    float ysv = (float)sn_load_f64(st, ys->data, 0);
    double yzv = (double)sn_load_i64(yz->dtype, yz->data, 0);
    double lo = y->dtype == SN_U8 ? 0 : -128, hi = y->dtype == SN_U8 ? 255 : 127;
    int64_t M = p.M, N = p.N, K = p.K;
    for (int64_t bi = 0; bi < p.n_batch; bi++) {
        int64_t oa, ob;
        gk_mm_offsets(&p, bi, &oa, &ob);
        for (int64_t i = 0; i < M; i++) {
            float asv = (float)sn_load_f64(st, as->data, qlmm_idx(mas, M, oa, i));
            int32_t za = (int32_t)sn_load_i64(az->dtype, az->data, qlmm_idx(maz, M, oa, i));
            size_t arow = (size_t)(oa * M * K + i * K);
            for (int64_t j = 0; j < N; j++) {
                float bsv = (float)sn_load_f64(st, bs->data, qlmm_idx(mbs, N, ob, j));
                int32_t zb = (int32_t)sn_load_i64(bz->dtype, bz->data, qlmm_idx(mbz, N, ob, j));
                size_t bcol = (size_t)(ob * K * N + j);
                uint32_t acc = 0; /* wraps like an int32 accumulator, without UB */
                for (int64_t k = 0; k < K; k++) {
                    int32_t av = (int32_t)sn_load_i64(a->dtype, a->data, arow + (size_t)k) - za;
                    int32_t bv = (int32_t)sn_load_i64(b->dtype, b->data, bcol + (size_t)(k * N)) - zb;
                    acc += (uint32_t)(av * bv);
                }
                float scale = q_round_to(st, q_round_to(st, asv * bsv) / ysv);
                double v = nearbyint((double)(int32_t)acc * (double)scale + yzv);
                v = v < lo ? lo : v > hi ? hi : v;
                sn_store_f64(y->dtype, y->data, (size_t)((bi * M + i) * N + j), v);
            }
        }
    }
    return SNUG_OK;
}

const sn_op_def sn_ops_quant[] = {
    {.domain = "", .name = "QLinearMatMul", .since_version = 21, .required = 0xff, .infer = qlmm21_infer, .cpu = {.run = qlmm21_run}},
    {.domain = "", .name = "QuantizeLinear", .since_version = 10, .required = 0x3, .infer = quant_infer, .flags = SN_OP_PACKED_OK,
     .cpu = {.run = quant_run}},
    {.domain = "", .name = "DequantizeLinear", .since_version = 10, .required = 0x3, .infer = dequant_infer, .flags = SN_OP_PACKED_OK,
     .cpu = {.run = dequant_run}},
    {.domain = "", .name = "DynamicQuantizeLinear", .since_version = 11, .infer = dynq_infer,
     .cpu = {.run = dynq_run}},
    {0},
};
