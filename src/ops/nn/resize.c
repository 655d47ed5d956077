/* Resize (opsets 10, 11, 13, 18, 19) and Upsample. Every resized axis gets a
 * table of taps (source index, weight) per output coordinate, built in the
 * workspace; an output element is the sum over the product of its axes' taps.
 * This is the separable interpolation of the ONNX reference written as one
 * pass. Coordinates follow the reference: the "output width" in the
 * coordinate formulas is scale * input width (a real number). */
#include <math.h>
#include <string.h>

#include "ops/nn/nn.h"
#include "ops/shape/shape_util.h"

enum { RZ_NEAREST, RZ_LINEAR, RZ_CUBIC };
enum { CT_HALF_PIXEL, CT_HALF_PIXEL_SYM, CT_PYTORCH_HALF_PIXEL, CT_ALIGN_CORNERS, CT_ASYMMETRIC,
       CT_TF_CROP, CT_TF_HALF_NN };
enum { NM_ROUND_FLOOR, NM_ROUND_CEIL, NM_FLOOR, NM_CEIL };

typedef struct rz_params {
    int mode, ctm, nearest;
    bool exclude_outside, antialias;
    double cubic_a, extrap;
    int rank;
    double scale[SN_MAX_RANK];
    int64_t out[SN_MAX_RANK];
    double roi_s[SN_MAX_RANK], roi_e[SN_MAX_RANK];
    bool has_roi;
} rz_params;

static int str_pick(const char *s, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i]))
            return i;
    return -1;
}

/* Attributes: modes and constants. */
static int rz_attrs(const sn_node *node, sn_err *err, rz_params *p) {
    bool upsample = !strcmp(node->p->op_type, "Upsample");
    const char *m = sn_attr_str(node, "mode", "nearest");
    static const char *const modes[] = {"nearest", "linear", "cubic"};
    p->mode = str_pick(m, modes, 3);
    if (p->mode < 0 && (!strcmp(m, "bilinear") || !strcmp(m, "trilinear")) && upsample)
        p->mode = RZ_LINEAR;
    if (p->mode < 0 || (upsample && p->mode == RZ_CUBIC))
        return sn_kfail(err, node, SNUG_ERR_UNSUPPORTED, "unsupported mode '%s'", m);
    if (upsample || node->opset < 11) {
        p->ctm = CT_ASYMMETRIC;
        p->nearest = NM_FLOOR;
    } else {
        static const char *const cts[] = {"half_pixel", "half_pixel_symmetric",
                                          "pytorch_half_pixel", "align_corners", "asymmetric",
                                          "tf_crop_and_resize", "tf_half_pixel_for_nn"};
        const char *ct = sn_attr_str(node, "coordinate_transformation_mode", "half_pixel");
        p->ctm = str_pick(ct, cts, 7);
        if (p->ctm < 0)
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG,
                            "unknown coordinate_transformation_mode '%s'", ct);
        static const char *const nms[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                          "ceil"};
        const char *nm = sn_attr_str(node, "nearest_mode", "round_prefer_floor");
        p->nearest = str_pick(nm, nms, 4);
        if (p->nearest < 0)
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "unknown nearest_mode '%s'", nm);
    }
    p->exclude_outside = sn_attr_int(node, "exclude_outside", 0) != 0;
    p->antialias = sn_attr_int(node, "antialias", 0) != 0 && p->mode != RZ_NEAREST;
    p->cubic_a = sn_attr_float(node, "cubic_coeff_a", -0.75f);
    p->extrap = sn_attr_float(node, "extrapolation_value", 0.0f);
    return SNUG_OK;
}

static bool tensor_empty(const sn_tensor *t) {
    return !t || (t->rank >= 0 && sn_tensor_numel(t) == 0);
}

/* Output sizes and per-axis scales. Returns 1 when known, 0 when the scales
 * or sizes are not known yet, -1 on error. */
static int rz_make(const sn_node *node, sn_err *err, const sn_tensor *const *in, int n_in,
                   rz_params *p) {
    if (rz_attrs(node, err, p))
        return -1;
    const sn_tensor *x = in[0];
    int r = p->rank = x->rank;
    bool upsample = !strcmp(node->p->op_type, "Upsample");
    const sn_tensor *roi = NULL, *sc = NULL, *sz = NULL;
    if (upsample || node->opset < 11) {
        sc = sn_in(in, n_in, 1);
    } else {
        roi = sn_in(in, n_in, 1);
        sc = sn_in(in, n_in, 2);
        sz = sn_in(in, n_in, 3);
        if (tensor_empty(sc))
            sc = NULL;
        if (tensor_empty(sz))
            sz = NULL;
        if (tensor_empty(roi))
            roi = NULL;
    }
    /* axes (opset 18) */
    int ax[SN_MAX_RANK], nax = r;
    const int64_t *av;
    int na = sn_attr_ints(node, "axes", &av);
    if (na >= 0) {
        if (na > r)
            goto bad_axes;
        unsigned seen = 0;
        for (int i = 0; i < na; i++) {
            if (!sn_axis_norm(av[i], r, &ax[i]) || (seen >> ax[i] & 1u))
                goto bad_axes;
            seen |= 1u << ax[i];
        }
        nax = na;
    } else {
        for (int i = 0; i < r; i++)
            ax[i] = i;
    }
    double vals[SN_MAX_RANK * 2];
    for (int i = 0; i < r; i++) {
        p->scale[i] = 1.0;
        p->out[i] = x->dims[i];
        p->roi_s[i] = 0.0;
        p->roi_e[i] = 1.0;
    }
    p->has_roi = false;
    if (p->ctm == CT_TF_CROP && roi) {
        if (!roi->data)
            goto unknown;
        if (sn_tensor_numel(roi) != 2 * nax) {
            sn_kfail(err, node, SNUG_ERR_SHAPE, "roi has %lld values for %d axes",
                     (long long)sn_tensor_numel(roi), nax);
            return -1;
        }
        for (int i = 0; i < nax; i++) {
            p->roi_s[ax[i]] = sn_load_f64(roi->dtype, roi->data, (size_t)i);
            p->roi_e[ax[i]] = sn_load_f64(roi->dtype, roi->data, (size_t)(i + nax));
        }
        p->has_roi = true;
    }
    if (sc && sz) {
        sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "only one of scales and sizes may be given");
        return -1;
    }
    if (!sc && !sz) {
        const float *fs;
        int nf = sn_attr_floats(node, "scales", &fs);
        if (!upsample || nf < 0) {
            sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "one of scales and sizes is required");
            return -1;
        }
        if (nf != r) {
            sn_kfail(err, node, SNUG_ERR_SHAPE, "scales has %d values for rank %d", nf, r);
            return -1;
        }
        for (int i = 0; i < r; i++)
            vals[i] = fs[i];
    } else {
        const sn_tensor *t = sc ? sc : sz;
        if (!t->data)
            goto unknown;
        if (sc && !sn_dtype_is_float(sc->dtype)) {
            sn_kfail(err, node, SNUG_ERR_TYPE, "scales must be float");
            return -1;
        }
        if (sz && sz->dtype != SN_I64) {
            sn_kfail(err, node, SNUG_ERR_TYPE, "sizes must be int64");
            return -1;
        }
        if (sn_tensor_numel(t) != nax) {
            sn_kfail(err, node, SNUG_ERR_SHAPE, "%s has %lld values for %d axes",
                     sc ? "scales" : "sizes", (long long)sn_tensor_numel(t), nax);
            return -1;
        }
        for (int i = 0; i < nax; i++)
            vals[i] = sc ? sn_load_f64(t->dtype, t->data, (size_t)i)
                         : (double)((const int64_t *)t->data)[i];
    }
    for (int i = 0; i < nax; i++)
        if (x->dims[ax[i]] < 0)
            goto unknown;
    if (!sz) {
        for (int i = 0; i < nax; i++) {
            int a = ax[i];
            if (!(vals[i] > 0) || vals[i] * (double)x->dims[a] > 1e12) {
                sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "invalid scale %g", vals[i]);
                return -1;
            }
            p->scale[a] = vals[i];
            p->out[a] = (int64_t)floor(vals[i] * (double)x->dims[a]);
        }
        return 1;
    }
    for (int i = 0; i < nax; i++) {
        if (vals[i] < 0 || (vals[i] > 0 && x->dims[ax[i]] == 0)) {
            sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "invalid size %g", vals[i]);
            return -1;
        }
        p->out[ax[i]] = (int64_t)vals[i];
        p->scale[ax[i]] = x->dims[ax[i]] ? vals[i] / (double)x->dims[ax[i]] : 1.0;
    }
    const char *kp = sn_attr_str(node, "keep_aspect_ratio_policy", "stretch");
    if (strcmp(kp, "stretch")) {
        bool larger = !strcmp(kp, "not_smaller");
        if (!larger && strcmp(kp, "not_larger")) {
            sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "unknown keep_aspect_ratio_policy '%s'", kp);
            return -1;
        }
        double s = p->scale[ax[0]];
        for (int i = 1; i < nax; i++)
            s = larger ? fmax(s, p->scale[ax[i]]) : fmin(s, p->scale[ax[i]]);
        for (int i = 0; i < nax; i++) {
            p->scale[ax[i]] = s;
            p->out[ax[i]] = (int64_t)(s * (double)x->dims[ax[i]] + 0.5);
        }
    }
    return 1;
unknown:
    for (int k = 0; k < nax; k++) {
        p->out[ax[k]] = SN_DIM_UNKNOWN;
        p->scale[ax[k]] = 0.0;
    }
    return 0;
bad_axes:
    sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "invalid axes attribute");
    return -1;
}

int nn_resize_infer(sn_infer_ctx *c) {
    const sn_tensor *x = sn_in(c->in, c->n_in, 0);
    if (!x || x->kind != SN_KIND_TENSOR)
        return KFAIL(SNUG_ERR_INVALID_ARG, "input X must be a tensor");
    if (x->rank == SN_RANK_UNKNOWN) {
        sn_set_out(c->out[0], x->dtype, SN_RANK_UNKNOWN, NULL);
        return SNUG_OK;
    }
    rz_params p;
    int rc = rz_make(c->node, c->err, c->in, c->n_in, &p);
    if (rc < 0)
        return c->err->code;
    if (rc == 0) {
        /* axes that are not resized keep their dims */
        sn_set_out(c->out[0], x->dtype, x->rank, p.out);
        for (int i = 0; i < x->rank; i++)
            if (p.out[i] == x->dims[i] && p.scale[i] == 1.0)
                c->out[0]->dims[i] = x->dims[i];
        return SNUG_OK;
    }
    if (p.mode != RZ_NEAREST && !sn_dtype_is_float(x->dtype) && !sn_dtype_is_int(x->dtype))
        return KFAIL(SNUG_ERR_TYPE, "mode needs numeric data, got %s", sn_dtype_name(x->dtype));
    sn_set_out(c->out[0], x->dtype, x->rank, p.out);
    return SNUG_OK;
}

/* ---- taps ---------------------------------------------------------------- */

static double cubic_w(double x, double A) {
    x = fabs(x);
    if (x <= 1)
        return ((A + 2) * x - (A + 3)) * x * x + 1;
    if (x < 2)
        return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
    return 0.0;
}

/* Taps per output coordinate for an axis: an upper bound used to size the
 * workspace (from the dims alone), and the exact count given the scale. */
static int64_t taps_bound(const rz_params *p, int64_t in, int64_t out) {
    if (p->mode == RZ_NEAREST)
        return 1;
    if (!p->antialias)
        return p->mode == RZ_LINEAR ? 2 : 4;
    double inv = (double)in / fmax((double)out - 0.5, 0.5);
    return 4 * (int64_t)ceil(fmax(inv, 1.0)) + 8;
}

static int64_t taps_exact(const rz_params *p, double scale) {
    if (p->mode == RZ_NEAREST)
        return 1;
    if (!p->antialias)
        return p->mode == RZ_LINEAR ? 2 : 4;
    double s = fmin(scale, 1.0);
    if (p->mode == RZ_LINEAR)
        return 2 - 2 * ((int64_t)floor(-1.0 / s) + 1);
    return 2 - 2 * ((int64_t)floor(-2.0 / s) + 1);
}

typedef struct rz_axis {
    int64_t n;       /* taps per output coordinate */
    int64_t *idx;    /* [out][n] source index (clamped) */
    double *w;       /* [out][n] weight */
    uint8_t *extrap; /* [out] 1: outside the roi, take extrapolation_value */
} rz_axis;

static double src_coord(const rz_params *p, int a, int64_t x, int64_t in, int64_t out) {
    double s = p->scale[a], ow = s * (double)in, xd = (double)x;
    switch (p->ctm) {
    case CT_ALIGN_CORNERS:
        return ow == 1 ? 0.0 : xd * (double)(in - 1) / (ow - 1);
    case CT_ASYMMETRIC:
        return xd / s;
    case CT_TF_CROP: {
        double rs = p->roi_s[a], re = p->roi_e[a], v;
        if (ow == 1)
            v = (re - rs) * (double)(in - 1) / 2;
        else
            v = xd * (re - rs) * (double)(in - 1) / (ow - 1);
        return v + rs * (double)(in - 1);
    }
    case CT_TF_HALF_NN: /* opsets 11-12 */
        return (xd + 0.5) / s;
    case CT_PYTORCH_HALF_PIXEL:
        return ow == 1 ? -0.5 : (xd + 0.5) / s - 0.5;
    case CT_HALF_PIXEL_SYM: {
        double adj = (double)out / ow, center = (double)in / 2;
        return center * (1 - adj) + (xd + 0.5) / s - 0.5;
    }
    default:
        return (xd + 0.5) / s - 0.5;
    }
}

static void build_axis(const rz_params *p, int a, int64_t in, int64_t out, rz_axis *t) {
    int64_t n = t->n;
    bool ident = p->scale[a] == 1.0 && in == out &&
                 (p->ctm != CT_TF_CROP || (p->roi_s[a] == 0.0 && p->roi_e[a] == 1.0));
    for (int64_t x = 0; x < out; x++) {
        int64_t *ix = t->idx + x * n;
        double *w = t->w + x * n;
        t->extrap[x] = 0;
        if (ident) {
            for (int64_t k = 0; k < n; k++) {
                ix[k] = x;
                w[k] = k == 0 ? 1.0 : 0.0;
            }
            continue;
        }
        double xo = src_coord(p, a, x, in, out);
        if (p->ctm == CT_TF_CROP && (xo < 0 || xo > (double)(in - 1)))
            t->extrap[x] = 1;
        double fl = floor(xo);
        if (!(fl > -1e15 && fl < 1e15)) {
            t->extrap[x] = 1;
            fl = 0;
        }
        int64_t xi = (int64_t)fl;
        double ratio = xo == fl ? 1.0 : xo - fl;
        if (p->mode == RZ_NEAREST) {
            int64_t s;
            if (xo == fl)
                s = xi;
            else {
                bool up;
                switch (p->nearest) {
                case NM_ROUND_FLOOR: up = ratio > 0.5; break;
                case NM_ROUND_CEIL: up = ratio >= 0.5; break;
                case NM_FLOOR: up = false; break;
                default: up = true; break;
                }
                s = up ? xi + 1 : xi;
            }
            ix[0] = s < 0 ? 0 : (s >= in ? in - 1 : s);
            w[0] = 1.0;
            continue;
        }
        /* coefficients */
        double sum = 0;
        if (p->antialias) {
            double s = fmin(p->scale[a], 1.0);
            int64_t st = p->mode == RZ_LINEAR ? (int64_t)floor(-1.0 / s) + 1
                                              : (int64_t)floor(-2.0 / s) + 1;
            for (int64_t k = 0; k < n; k++) {
                double arg = ((double)(st + k) - ratio) * s;
                w[k] = p->mode == RZ_LINEAR ? fmin(fmax(1 - fabs(arg), 0.0), 1.0)
                                            : cubic_w(arg, p->cubic_a);
                sum += w[k];
            }
            for (int64_t k = 0; k < n; k++)
                w[k] = sum != 0 ? w[k] / sum : 0.0;
        } else if (p->mode == RZ_LINEAR) {
            w[0] = 1 - ratio;
            w[1] = ratio;
        } else {
            double A = p->cubic_a;
            w[0] = cubic_w(ratio + 1, A);
            w[1] = cubic_w(ratio, A);
            w[2] = cubic_w(1 - ratio, A);
            w[3] = cubic_w(2 - ratio, A);
        }
        /* the n source positions nearest to xo, ties to the smaller */
        int64_t start;
        if (n % 2 == 0)
            start = xo == fl ? xi - n / 2 : xi - n / 2 + 1;
        else
            start = xi - (n - 1) / 2 + (xo - fl <= 0.5 ? 0 : 1);
        if (p->exclude_outside) {
            sum = 0;
            for (int64_t k = 0; k < n; k++) {
                if (start + k < 0 || start + k >= in)
                    w[k] = 0;
                sum += w[k];
            }
            if (sum != 0)
                for (int64_t k = 0; k < n; k++)
                    w[k] /= sum;
        }
        for (int64_t k = 0; k < n; k++) {
            int64_t s = start + k;
            ix[k] = s < 0 ? 0 : (s >= in ? in - 1 : s);
        }
    }
}

/* Tap tables for every axis; false when a dim is not known. */
static bool resize_ws_bytes(const rz_params *p, const sn_tensor *x, const sn_tensor *y, size_t *total) {
    *total = 16;
    for (int a = 0; a < x->rank; a++) {
        int64_t in = x->dims[a], out = y->dims[a];
        if (in < 0 || out < 0)
            return false;
        int64_t n = taps_bound(p, in, out);
        *total += sn_align16((size_t)(out * n) * sizeof(int64_t)) +
                  sn_align16((size_t)(out * n) * sizeof(double)) + sn_align16((size_t)out);
    }
    return true;
}

int nn_resize_prepare(sn_prep_ctx *c) {
    rz_params p;
    if (rz_attrs(c->node, c->err, &p))
        return c->err->code;
    size_t total;
    if (!resize_ws_bytes(&p, c->in[0], c->out[0], &total))
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "shapes must be known in prepare");
    return sk_ws_declare(c, total);
}

/* Level 1: the figure prepare will declare, from the inferred shapes. */
size_t nn_resize_estimate(const sn_infer_ctx *c) {
    rz_params p;
    size_t total;
    if (c->n_in < 1 || c->n_out < 1 || !c->in[0] || !c->out[0] || c->in[0]->rank != c->out[0]->rank ||
        rz_attrs(c->node, NULL, &p) || !resize_ws_bytes(&p, c->in[0], c->out[0], &total))
        return 0;
    return total;
}

static void store_el(sn_dtype t, void *d, int64_t i, double v) {
    if (t == SN_F32) {
        ((float *)d)[i] = (float)v;
        return;
    }
    if (sn_dtype_is_int(t)) {
        double lo = 0, hi = 0;
        switch (t) {
        case SN_I8: lo = -128; hi = 127; break;
        case SN_U8: lo = 0; hi = 255; break;
        case SN_I16: lo = -32768; hi = 32767; break;
        case SN_U16: lo = 0; hi = 65535; break;
        case SN_I32: lo = -2147483648.0; hi = 2147483647.0; break;
        case SN_U32: lo = 0; hi = 4294967295.0; break;
        case SN_I64: lo = -9.2233720368547748e18; hi = 9.2233720368547748e18 - 1024; break;
        default: lo = 0; hi = 1.8446744073709552e19 - 2048; break;
        }
        v = nearbyint(v);
        v = v < lo ? lo : (v > hi ? hi : v);
        if (v != v)
            v = 0;
    }
    sn_store_f64(t, d, (size_t)i, v);
}

int nn_resize_run(sn_kctx *c) {
    const sn_tensor *x = sn_in(c->in, c->n_in, 0);
    sn_tensor *y = c->out[0];
    rz_params p;
    int rc = rz_make(c->node, c->err, c->in, c->n_in, &p);
    if (rc <= 0)
        return rc < 0 ? c->err->code : KFAIL(SNUG_ERR_INTERNAL, "scales/sizes unknown at run");
    int r = x->rank;
    int64_t ny = sn_tensor_numel(y);
    if (ny == 0)
        return SNUG_OK;
    if (sn_tensor_numel(x) == 0)
        return KFAIL(SNUG_ERR_SHAPE, "cannot resize an empty input to a non-empty output");
    size_t es = sn_dtype_size(x->dtype);
    if (r == 0) {
        memcpy(y->data, x->data, es);
        return SNUG_OK;
    }
    /* tap tables in the workspace */
    rz_axis ax[SN_MAX_RANK];
    size_t need = 16;
    for (int a = 0; a < r; a++) {
        int64_t out = y->dims[a], nb = taps_bound(&p, x->dims[a], out);
        need += sn_align16((size_t)(out * nb) * sizeof(int64_t)) +
                sn_align16((size_t)(out * nb) * sizeof(double)) + sn_align16((size_t)out);
    }
    if (!sk_ws_fits(c, need))
        return KFAIL(SNUG_ERR_INTERNAL, "workspace from prepare is too small for these shapes");
    char *ws = c->ws;
    for (int a = 0; a < r; a++) {
        int64_t in = x->dims[a], out = y->dims[a];
        int64_t n = taps_exact(&p, p.scale[a]);
        if (n > taps_bound(&p, in, out) || n < 1)
            return KFAIL(SNUG_ERR_INTERNAL, "tap count %lld exceeds workspace", (long long)n);
        ax[a].n = n;
        ax[a].idx = (int64_t *)ws;
        ws += sn_align16((size_t)(out * taps_bound(&p, in, out)) * sizeof(int64_t));
        ax[a].w = (double *)ws;
        ws += sn_align16((size_t)(out * taps_bound(&p, in, out)) * sizeof(double));
        ax[a].extrap = (uint8_t *)ws;
        ws += sn_align16((size_t)out);
        build_axis(&p, a, in, out, &ax[a]);
    }
    int64_t xs[SN_MAX_RANK], o[SN_MAX_RANK] = {0};
    sn_strides(r, x->dims, xs);
    sn_dtype t = x->dtype;
    if (p.mode == RZ_NEAREST) {
        /* gather: rows along the last axis */
        int64_t rows = ny / y->dims[r - 1], W = y->dims[r - 1];
        const int64_t *lix = ax[r - 1].idx;
        const uint8_t *lex = ax[r - 1].extrap;
        unsigned char ev[16] = {0};
        if (t != SN_STRING)
            sn_store_f64(t, ev, 0, p.extrap);
        char *dst = y->data;
        for (int64_t row = 0; row < rows; row++) {
            int64_t off = 0;
            bool ext = false;
            for (int d = 0; d < r - 1; d++) {
                off += ax[d].idx[o[d]] * xs[d];
                ext |= ax[d].extrap[o[d]] != 0;
            }
            const char *src = (const char *)x->data + (size_t)off * es;
            if (es == 4 && !ext && !p.has_roi) {
                for (int64_t k = 0; k < W; k++)
                    memcpy(dst + 4 * k, src + 4 * lix[k], 4);
            } else {
                for (int64_t k = 0; k < W; k++)
                    memcpy(dst + (size_t)k * es, (ext || lex[k]) ? (const char *)ev : src + (size_t)lix[k] * es,
                           es);
            }
            dst += (size_t)W * es;
            for (int d = r - 2; d >= 0; d--) {
                if (++o[d] < y->dims[d])
                    break;
                o[d] = 0;
            }
        }
        return SNUG_OK;
    }
    /* interpolation: sum over the product of taps of the resized axes */
    int act[SN_MAX_RANK], na = 0;
    for (int a = 0; a < r; a++)
        if (ax[a].n > 1)
            act[na++] = a;
    for (int64_t i = 0; i < ny; i++) {
        bool ext = false;
        int64_t base = 0;
        for (int d = 0; d < r; d++) {
            ext |= ax[d].extrap[o[d]] != 0;
            if (ax[d].n == 1)
                base += ax[d].idx[o[d]] * xs[d];
        }
        double acc;
        if (ext) {
            acc = p.extrap;
        } else {
            int64_t tp[SN_MAX_RANK] = {0};
            acc = 0;
            for (;;) {
                double w = 1;
                int64_t off = base;
                for (int k = 0; k < na; k++) {
                    int a = act[k];
                    int64_t j = o[a] * ax[a].n + tp[k];
                    w *= ax[a].w[j];
                    off += ax[a].idx[j] * xs[a];
                }
                acc += w * sn_ld_f64(t, x->data, off);
                int k = na - 1;
                for (; k >= 0; k--) {
                    if (++tp[k] < ax[act[k]].n)
                        break;
                    tp[k] = 0;
                }
                if (k < 0)
                    break;
            }
        }
        store_el(t, y->data, i, acc);
        for (int d = r - 1; d >= 0; d--) {
            if (++o[d] < y->dims[d])
                break;
            o[d] = 0;
        }
    }
    return SNUG_OK;
}
