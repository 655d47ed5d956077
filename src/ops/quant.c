/* Linear quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear.
 *
 * Scale and zero point are per tensor (scalars or 1-element), per axis (a
 * vector along `axis`), or blocked (opset 21: the input's shape with
 * dims[axis] divided into blocks of block_size). Quantizing rounds half to
 * even and saturates to the output type, as the spec says. */
#include <math.h>
#include <string.h>

#include "ops/gemm_ops.h"

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
    int64_t ns = gk_numel(scale);
    if (zp && zp->rank != scale->rank)
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "scale and zero point shapes differ");
    if (zp)
        for (int i = 0; i < zp->rank; i++)
            if (zp->dims[i] != scale->dims[i])
                return sn_kfail(err, node, SNUG_ERR_SHAPE, "scale and zero point shapes differ");
    m->outer = 1;
    m->A = 1;
    m->inner = gk_numel(x);
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
    return t == SN_U8 || t == SN_I8 || t == SN_U16 || t == SN_I16 || t == SN_I32 || t == SN_U32;
}
static bool q_f8_type(sn_dtype t) {
    return t == SN_F8E4M3FN || t == SN_F8E4M3FNUZ || t == SN_F8E5M2 || t == SN_F8E5M2FNUZ;
}
static bool q_scale_type(sn_dtype t) { return t == SN_F32 || t == SN_F16 || t == SN_BF16 || t == SN_F64; }

static void q_range(sn_dtype t, double *lo, double *hi) {
    switch (t) {
    case SN_U8: *lo = 0, *hi = 255; break;
    case SN_I8: *lo = -128, *hi = 127; break;
    case SN_U16: *lo = 0, *hi = 65535; break;
    case SN_I16: *lo = -32768, *hi = 32767; break;
    case SN_U32: *lo = 0, *hi = 4294967295.0; break;
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
    const sn_tensor *x = gk_in(c->in, c->n_in, 0), *sc = gk_in(c->in, c->n_in, 1);
    const sn_tensor *zp = gk_in(c->in, c->n_in, 2);
    if (!x || !sc)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "needs inputs x and y_scale");
    if (!q_scale_type(x->dtype) && x->dtype != SN_I32)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "x of type %s not supported", sn_dtype_name(x->dtype));
    if (!q_scale_type(sc->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "y_scale must be a float type");
    sn_dtype yt = quant_out_type(c->node, zp);
    if (!q_int_type(yt) && !q_f8_type(yt))
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "output type %s not supported", sn_dtype_name(yt));
    gk_set_out(c->out[0], yt, x->rank, x->rank == SN_RANK_UNKNOWN ? NULL : x->dims);
    return SNUG_OK;
}

static int quant_run(sn_kctx *c) {
    const sn_tensor *x = c->in[0], *sc = c->in[1], *zp = gk_in(c->in, c->n_in, 2);
    sn_tensor *y = c->out[0];
    qmap m;
    SN_TRY(qmap_make(c->node, c->err, x, sc, zp, &m));
    sn_dtype yt = y->dtype;
    bool saturate = sn_attr_int(c->node, "saturate", 1) != 0;
    double lo = 0, hi = 0;
    q_range(yt, &lo, &hi);
    for (int64_t o = 0; o < m.outer; o++)
        for (int64_t a = 0; a < m.A; a++)
            for (int64_t in = 0; in < m.inner; in++) {
                size_t i = (size_t)((o * m.A + a) * m.inner + in);
                size_t pi = (size_t)qmap_idx(&m, o, a, in);
                float s = (float)sn_load_f64(sc->dtype, sc->data, pi);
                float xv = (float)sn_load_f64(x->dtype, x->data, i);
                if (q_f8_type(yt)) {
                    float v = xv / s + (zp ? (float)sn_load_f64(zp->dtype, zp->data, pi) : 0.0f);
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
    const sn_tensor *x = gk_in(c->in, c->n_in, 0), *sc = gk_in(c->in, c->n_in, 1);
    const sn_tensor *zp = gk_in(c->in, c->n_in, 2);
    if (!x || !sc)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "needs inputs x and x_scale");
    if (!q_int_type(x->dtype) && !q_f8_type(x->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "x of type %s not supported", sn_dtype_name(x->dtype));
    if (zp && zp->dtype != x->dtype)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "x_zero_point must have x's type");
    if (!q_scale_type(sc->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "x_scale must be a float type");
    gk_set_out(c->out[0], sc->dtype, x->rank, x->rank == SN_RANK_UNKNOWN ? NULL : x->dims);
    return SNUG_OK;
}

static int dequant_run(sn_kctx *c) {
    const sn_tensor *x = c->in[0], *sc = c->in[1], *zp = gk_in(c->in, c->n_in, 2);
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
                    v = sn_load_f64(x->dtype, x->data, i) * s;
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
    const sn_tensor *x = gk_in(c->in, c->n_in, 0);
    if (!x)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "needs input x");
    if (x->dtype != SN_F32)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "x must be float32");
    gk_set_out(c->out[0], SN_U8, x->rank, x->rank == SN_RANK_UNKNOWN ? NULL : x->dims);
    if (c->n_out > 1)
        gk_set_out(c->out[1], SN_F32, 0, NULL);
    if (c->n_out > 2)
        gk_set_out(c->out[2], SN_U8, 0, NULL);
    return SNUG_OK;
}

static int dynq_run(sn_kctx *c) {
    const sn_tensor *x = c->in[0];
    const float *X = x->data;
    int64_t n = gk_numel(x);
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

const sn_op_def sn_ops_quant[] = {
    {"", "QuantizeLinear", 10, quant_infer, NULL, quant_run, NULL, 0},
    {"", "DequantizeLinear", 10, dequant_infer, NULL, dequant_run, NULL, 0},
    {"", "DynamicQuantizeLinear", 11, dynq_infer, NULL, dynq_run, NULL, 0},
    {0},
};
