/* Signal processing: DFT (17, 20), STFT (17), Hann/Hamming/BlackmanWindow
 * and MelWeightMatrix (17).
 *
 * Transforms run per line in double precision: a radix-2 FFT when the length
 * is a power of two, otherwise a direct DFT over a precomputed twiddle
 * table. Complex tensors are real tensors with a trailing dim of 2
 * (re, im); a trailing dim of 1 means a real signal. */
#include <math.h>
#include <string.h>

#include "ops/kit.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* Reads a scalar (or 1-element) integer input. false when absent/unknown. */
static bool scalar_i64(const sn_tensor *t, int64_t *v) {
    if (!t || !t->data || t->kind != SN_KIND_TENSOR || sn_tensor_numel(t) != 1 || !sn_dtype_is_int(t->dtype))
        return false;
    *v = sn_load_i64(t->dtype, t->data, 0);
    return true;
}

/* ---- transform core -------------------------------------------------------- */

/* Workspace doubles for transforms of length up to n: twiddles, input line,
 * output line. */
static size_t dft_ws_doubles(int64_t n) { return (size_t)(6 * (n > 0 ? n : 0)); }

typedef struct dft_plan {
    int64_t n;
    bool pow2;
    double *tw;       /* cos/sin(2*pi*j/n), j < n: tw[2j], tw[2j+1] */
    double *a, *b;    /* lines of n complex values */
} dft_plan;

static void dft_plan_init(dft_plan *p, int64_t n, double *ws) {
    p->n = n;
    p->pow2 = n > 0 && (n & (n - 1)) == 0;
    p->tw = ws;
    p->a = ws + 2 * n;
    p->b = ws + 4 * n;
    for (int64_t j = 0; j < n; j++) {
        double ang = 2.0 * M_PI * (double)j / (double)n;
        p->tw[2 * j] = cos(ang);
        p->tw[2 * j + 1] = sin(ang);
    }
}

/* Transforms p->a (n complex) into p->b: b[k] = sum_j a[j] e^{-+2 pi i jk/n}
 * (sign + when inverse, no scaling). Only the first nk outputs are needed. */
static void dft_exec(dft_plan *p, bool inverse, int64_t nk) {
    const int64_t n = p->n;
    const double sg = inverse ? 1.0 : -1.0;
    const double *a = p->a, *tw = p->tw;
    double *b = p->b;
    if (p->pow2 && n > 1) {
        /* iterative radix-2: bit-reversed copy then butterflies */
        int lg = 0;
        while (((int64_t)1 << lg) < n)
            lg++;
        for (int64_t i = 0; i < n; i++) {
            int64_t r = 0;
            for (int k = 0; k < lg; k++)
                r |= ((i >> k) & 1) << (lg - 1 - k);
            b[2 * r] = a[2 * i];
            b[2 * r + 1] = a[2 * i + 1];
        }
        for (int64_t len = 2; len <= n; len <<= 1) {
            const int64_t half = len >> 1, step = n / len;
            for (int64_t s = 0; s < n; s += len)
                for (int64_t j = 0; j < half; j++) {
                    const double wr = tw[2 * j * step], wi = sg * tw[2 * j * step + 1];
                    double *u = b + 2 * (s + j), *v = b + 2 * (s + j + half);
                    const double tr = v[0] * wr - v[1] * wi, ti = v[0] * wi + v[1] * wr;
                    v[0] = u[0] - tr;
                    v[1] = u[1] - ti;
                    u[0] += tr;
                    u[1] += ti;
                }
        }
        return;
    }
    for (int64_t k = 0; k < nk; k++) {
        double re = 0, im = 0;
        int64_t idx = 0;
        for (int64_t j = 0; j < n; j++) {
            const double wr = tw[2 * idx], wi = sg * tw[2 * idx + 1];
            re += a[2 * j] * wr - a[2 * j + 1] * wi;
            im += a[2 * j] * wi + a[2 * j + 1] * wr;
            idx += k;
            if (idx >= n)
                idx -= n;
        }
        b[2 * k] = re;
        b[2 * k + 1] = im;
    }
}

/* ---- DFT --------------------------------------------------------------------- */

typedef struct dft_args {
    int axis;          /* normalized, never the last dim */
    bool inverse, onesided;
    bool n_known;
    int64_t n;         /* transform length (when n_known) */
} dft_args;

static int dft_args_get(const sn_node *node, int n_in, const sn_tensor *const *in, dft_args *a, sn_err *err) {
    const sn_tensor *x = in[0];
    a->inverse = sn_attr_int(node, "inverse", 0) != 0;
    a->onesided = sn_attr_int(node, "onesided", 0) != 0;
    int64_t axis;
    if (node->opset >= 20) {
        axis = -2;
        const sn_tensor *at = sn_in_tensor(in, n_in, 2);
        if (at && !scalar_i64(at, &axis)) {
            if (at->data || !sn_dtype_is_int(at->dtype))
                return sn_kfail(err, node, SNUG_ERR_TYPE, "axis must be an integer scalar");
            a->axis = -1; /* known at run time */
            a->n_known = false;
            return SNUG_OK;
        }
    } else {
        axis = sn_attr_int(node, "axis", 1);
    }
    if (!sn_axis_norm(axis, x->rank, &a->axis) || a->axis == x->rank - 1)
        return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "axis %lld is out of range for rank %d (the last dim holds re/im)",
                        (long long)axis, x->rank);
    const sn_tensor *lt = sn_in_tensor(in, n_in, 1);
    a->n_known = true;
    if (lt) {
        if (!scalar_i64(lt, &a->n)) {
            a->n_known = false;
            if (lt->data)
                return sn_kfail(err, node, SNUG_ERR_TYPE, "dft_length must be an integer scalar");
        } else if (a->n <= 0) {
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "dft_length %lld must be positive", (long long)a->n);
        }
    } else {
        int64_t len = x->dims[a->axis];
        if (!sn_dim_known(len))
            a->n_known = false;
        else
            a->n = a->inverse && a->onesided ? 2 * (len - 1) : len;
        if (a->n_known && a->n <= 0 && len != 0)
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "transform length %lld is not positive", (long long)a->n);
    }
    return SNUG_OK;
}

static int dft_infer(sn_infer_ctx *c) {
    const sn_tensor *x = c->in[0];
    if (!sn_dtype_is_real(x->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "input type %s is not a float type", sn_dtype_name(x->dtype));
    sn_tensor *o = c->out[0];
    o->kind = SN_KIND_TENSOR;
    o->dtype = x->dtype;
    if (x->rank < 0) {
        o->rank = SN_RANK_UNKNOWN;
        return SNUG_OK;
    }
    if (x->rank < 2)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "input rank %d < 2", x->rank);
    int64_t last = x->dims[x->rank - 1];
    if (sn_dim_known(last) && last != 1 && last != 2)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "last dim must be 1 (real) or 2 (complex), got %lld",
                        (long long)last);
    dft_args a;
    SN_TRY(dft_args_get(c->node, c->n_in, c->in, &a, c->err));
    sn_tensor_set_shape(o, x->rank, x->dims);
    if (a.axis < 0) {
        for (int i = 0; i < x->rank - 1; i++)
            o->dims[i] = SN_DIM_UNKNOWN;
        o->dims[x->rank - 1] = a.inverse && a.onesided ? 1 : 2;
        return SNUG_OK;
    }
    int64_t len = SN_DIM_UNKNOWN;
    if (a.n_known)
        len = a.inverse ? a.n : a.onesided ? a.n / 2 + 1 : a.n;
    o->dims[a.axis] = len;
    o->dims[x->rank - 1] = a.inverse && a.onesided ? 1 : 2;
    return SNUG_OK;
}

/* Loads element (real part or imag) generic over float types. */
static int64_t ws_bound_of(const sn_tensor *o) {
    int64_t bound = 0;
    for (int i = 0; i < o->rank - 1; i++)
        bound = sn_imax(bound, o->dims[i]);
    return 2 * bound + 2;
}

static int dft_run(sn_kctx *c) {
    const sn_tensor *x = c->in[0];
    sn_tensor *y = c->out[0];
    dft_args a;
    SN_TRY(dft_args_get(c->node, c->n_in, c->in, &a, c->err));
    if (a.axis < 0 || !a.n_known)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "axis or dft_length unknown at run time");
    if (sn_tensor_numel(y) == 0)
        return SNUG_OK;
    const int64_t n = a.n;
    if (n > ws_bound_of(y) || !c->ws)
        return sn_kfail(c->err, c->node, SNUG_ERR_INTERNAL, "workspace too small for length %lld", (long long)n);
    const int ax = a.axis, r = x->rank;
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < ax; i++)
        outer *= x->dims[i];
    for (int i = ax + 1; i < r - 1; i++)
        inner *= x->dims[i];
    const int64_t L = x->dims[ax], C = x->dims[r - 1], K = y->dims[ax], CO = y->dims[r - 1];
    dft_plan p;
    dft_plan_init(&p, n, c->ws);
    const bool irfft = a.inverse && a.onesided;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            for (int64_t j = 0; j < n; j++) {
                double re = 0, im = 0;
                int64_t src = j;
                bool conj = false;
                if (irfft && j > n / 2) {
                    src = n - j; /* Hermitian symmetry */
                    conj = true;
                }
                if (src < L) {
                    int64_t at = ((o * L + src) * inner + i) * C;
                    re = sn_ld_f64(x->dtype, x->data, at);
                    im = C == 2 ? sn_ld_f64(x->dtype, x->data, at + 1) : 0.0;
                }
                if (irfft && (j == 0 || (n % 2 == 0 && j == n / 2)))
                    im = 0;
                p.a[2 * j] = re;
                p.a[2 * j + 1] = conj ? -im : im;
            }
            dft_exec(&p, a.inverse, K);
            const double scale = a.inverse ? 1.0 / (double)n : 1.0;
            for (int64_t k = 0; k < K; k++) {
                int64_t at = ((o * K + k) * inner + i) * CO;
                sn_st_f64(y->dtype, y->data, at, p.b[2 * k] * scale);
                if (CO == 2)
                    sn_st_f64(y->dtype, y->data, at + 1, p.b[2 * k + 1] * scale);
            }
        }
    return SNUG_OK;
}

/* ---- STFT -------------------------------------------------------------------- */

typedef struct stft_args {
    int64_t step, flen; /* -1 when unknown */
} stft_args;

static int stft_args_get(const sn_node *node, int n_in, const sn_tensor *const *in, stft_args *a, sn_err *err) {
    const sn_tensor *x = in[0], *win = sn_in_tensor(in, n_in, 2), *fl = sn_in_tensor(in, n_in, 3);
    a->step = a->flen = -1;
    const sn_tensor *st_ = sn_in_tensor(in, n_in, 1);
    if (!st_)
        return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "frame_step is required");
    if (scalar_i64(st_, &a->step) && a->step <= 0)
        return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "frame_step %lld must be positive", (long long)a->step);
    int64_t wl = -1;
    if (win) {
        if (win->rank >= 0 && win->rank != 1)
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "window must have rank 1");
        if (win->rank == 1 && sn_dim_known(win->dims[0]))
            wl = win->dims[0];
    }
    if (fl) {
        if (scalar_i64(fl, &a->flen) && a->flen <= 0)
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "frame_length %lld must be positive", (long long)a->flen);
        if (a->flen >= 0 && wl >= 0 && wl != a->flen)
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "window length %lld differs from frame_length %lld",
                            (long long)wl, (long long)a->flen);
    } else if (win) {
        a->flen = wl;
    } else if (x->rank == 3) {
        a->flen = sn_dim_known(x->dims[1]) ? x->dims[1] : -1;
    }
    if (a->flen >= 0 && x->rank == 3 && sn_dim_known(x->dims[1]) && a->flen > x->dims[1])
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "frame length %lld exceeds the signal length %lld",
                        (long long)a->flen, (long long)x->dims[1]);
    return SNUG_OK;
}

/* Bound the length by the output: forward onesided has n/2+1 bins, so
 * n <= 2 * bins; other modes have n outputs. */
static int dft_prepare(sn_prep_ctx *c) {
    c->workspace = dft_ws_doubles(ws_bound_of(c->out[0])) * sizeof(double);
    return SNUG_OK;
}

static int stft_infer(sn_infer_ctx *c) {
    const sn_tensor *x = c->in[0];
    if (!sn_dtype_is_real(x->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "signal type %s is not a float type", sn_dtype_name(x->dtype));
    if (x->rank >= 0 && x->rank != 3)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "signal must be [batch, length, 1 or 2], rank %d given", x->rank);
    if (x->rank == 3 && sn_dim_known(x->dims[2]) && x->dims[2] != 1 && x->dims[2] != 2)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "signal's last dim must be 1 or 2");
    stft_args a;
    SN_TRY(stft_args_get(c->node, c->n_in, c->in, &a, c->err));
    const bool onesided = sn_attr_int(c->node, "onesided", 1) != 0;
    sn_tensor *o = c->out[0];
    o->kind = SN_KIND_TENSOR;
    o->dtype = x->dtype;
    int64_t d[4] = {x->rank == 3 ? x->dims[0] : SN_DIM_UNKNOWN, SN_DIM_UNKNOWN, SN_DIM_UNKNOWN, 2};
    if (a.flen >= 0) {
        d[2] = onesided ? a.flen / 2 + 1 : a.flen;
        if (a.step > 0 && x->rank == 3 && sn_dim_known(x->dims[1]))
            d[1] = 1 + (x->dims[1] - a.flen) / a.step;
    }
    sn_tensor_set_shape(o, 4, d);
    return SNUG_OK;
}

static int stft_prepare(sn_prep_ctx *c) {
    c->workspace = dft_ws_doubles(ws_bound_of(c->out[0])) * sizeof(double);
    return SNUG_OK;
}

static int stft_run(sn_kctx *c) {
    const sn_tensor *x = c->in[0], *win = sn_in_tensor(c->in, c->n_in, 2);
    sn_tensor *y = c->out[0];
    stft_args a;
    SN_TRY(stft_args_get(c->node, c->n_in, c->in, &a, c->err));
    if (sn_tensor_numel(y) == 0)
        return SNUG_OK;
    const int64_t n = a.flen, B = x->dims[0], L = x->dims[1], C = x->dims[2];
    const int64_t F = y->dims[1], K = y->dims[2];
    if (n > ws_bound_of(y) || !c->ws)
        return sn_kfail(c->err, c->node, SNUG_ERR_INTERNAL, "workspace too small for frame length %lld", (long long)n);
    dft_plan p;
    dft_plan_init(&p, n, c->ws);
    for (int64_t b = 0; b < B; b++)
        for (int64_t f = 0; f < F; f++) {
            for (int64_t j = 0; j < n; j++) {
                int64_t t = f * a.step + j;
                double w = win ? sn_ld_f64(win->dtype, win->data, j) : 1.0;
                double re = 0, im = 0;
                if (t < L) {
                    re = sn_ld_f64(x->dtype, x->data, (b * L + t) * C);
                    im = C == 2 ? sn_ld_f64(x->dtype, x->data, (b * L + t) * C + 1) : 0.0;
                }
                p.a[2 * j] = re * w;
                p.a[2 * j + 1] = im * w;
            }
            dft_exec(&p, false, K);
            for (int64_t k = 0; k < K; k++) {
                int64_t at = ((b * F + f) * K + k) * 2;
                sn_st_f64(y->dtype, y->data, at, p.b[2 * k]);
                sn_st_f64(y->dtype, y->data, at + 1, p.b[2 * k + 1]);
            }
        }
    return SNUG_OK;
}

/* ---- windows ------------------------------------------------------------------ */

static int out_dtype_attr(const sn_node *n, sn_dtype *dt, sn_err *err) {
    int64_t v = sn_attr_int(n, "output_datatype", SN_F32);
    if (!sn_dtype_valid((int)v) || v == SN_STRING || v == SN_C64 || v == SN_C128 || v == SN_BOOL)
        return sn_kfail(err, n, SNUG_ERR_TYPE, "output_datatype %lld is not a numeric type", (long long)v);
    *dt = (sn_dtype)v;
    return SNUG_OK;
}

static int window_infer(sn_infer_ctx *c) {
    sn_dtype dt = SN_F32;
    SN_TRY(out_dtype_attr(c->node, &dt, c->err));
    const sn_tensor *s = c->in[0];
    if (!sn_dtype_is_int(s->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "size must be an integer scalar");
    int64_t n = SN_DIM_UNKNOWN;
    if (scalar_i64(s, &n) && n < 0)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "size %lld is negative", (long long)n);
    sn_tensor *o = c->out[0];
    sn_set_out(o, dt, 1, &n);
    return SNUG_OK;
}

enum { WIN_HANN, WIN_HAMMING, WIN_BLACKMAN };

static int window_run(sn_kctx *c, int kind) {
    sn_tensor *o = c->out[0];
    const int64_t n = o->dims[0];
    const bool periodic = sn_attr_int(c->node, "periodic", 1) != 0;
    const double N = (double)(periodic ? n : n - 1);
    for (int64_t i = 0; i < n; i++) {
        const double ph = N > 0 ? 2.0 * M_PI * (double)i / N : 0.0;
        double v;
        switch (kind) {
        case WIN_HANN: v = 0.5 - 0.5 * cos(ph); break;
        case WIN_HAMMING: v = 25.0 / 46.0 - (21.0 / 46.0) * cos(ph); break;
        default: v = 0.42 - 0.5 * cos(ph) + 0.08 * cos(2.0 * ph); break;
        }
        sn_store_f64(o->dtype, o->data, (size_t)i, v);
    }
    return SNUG_OK;
}

static int hann_run(sn_kctx *c) { return window_run(c, WIN_HANN); }
static int hamming_run(sn_kctx *c) { return window_run(c, WIN_HAMMING); }
static int blackman_run(sn_kctx *c) { return window_run(c, WIN_BLACKMAN); }

/* ---- MelWeightMatrix ------------------------------------------------------------ */

static int mel_infer(sn_infer_ctx *c) {
    sn_dtype dt = SN_F32;
    SN_TRY(out_dtype_attr(c->node, &dt, c->err));
    if (c->n_in < 5 || !c->in[0] || !c->in[1] || !c->in[2] || !c->in[3] || !c->in[4])
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "all five inputs are required");
    int64_t bins = SN_DIM_UNKNOWN, dl = SN_DIM_UNKNOWN, rows = SN_DIM_UNKNOWN;
    if (scalar_i64(c->in[0], &bins) && bins < 0)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "num_mel_bins %lld is negative", (long long)bins);
    if (scalar_i64(c->in[1], &dl)) {
        if (dl <= 0)
            return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "dft_length %lld must be positive", (long long)dl);
        rows = dl / 2 + 1;
    }
    sn_tensor *o = c->out[0];
    o->kind = SN_KIND_TENSOR;
    o->dtype = dt;
    int64_t d[2] = {rows, bins};
    sn_tensor_set_shape(o, 2, d);
    return SNUG_OK;
}

static int mel_run(sn_kctx *c) {
    sn_tensor *o = c->out[0];
    int64_t bins = 0, dl = 0, rate = 0;
    scalar_i64(c->in[0], &bins);
    scalar_i64(c->in[1], &dl);
    if (!scalar_i64(c->in[2], &rate) || rate <= 0)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "sample_rate must be a positive integer");
    if (sn_tensor_numel(c->in[3]) != 1 || sn_tensor_numel(c->in[4]) != 1)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "edge frequencies must be scalars");
    const double lo = sn_load_f64(c->in[3]->dtype, c->in[3]->data, 0);
    const double hi = sn_load_f64(c->in[4]->dtype, c->in[4]->data, 0);
    const int64_t rows = dl / 2 + 1;
    const size_t total = (size_t)(rows * bins);
    for (size_t i = 0; i < total; i++)
        sn_store_f64(o->dtype, o->data, i, 0.0);
    /* Triangular filters between bin edges equally spaced on the mel
     * scale; edges are mapped to FFT bins by flooring. */
    const double lo_mel = 2595.0 * log10(1.0 + lo / 700.0), hi_mel = 2595.0 * log10(1.0 + hi / 700.0);
    const double step = (hi_mel - lo_mel) / (double)(bins + 2);
    int64_t prev2 = 0, prev1 = 0;
    for (int64_t e = 0; e < bins + 2; e++) {
        double hz = 700.0 * (pow(10.0, ((double)e * step + lo_mel) / 2595.0) - 1.0);
        int64_t edge = (int64_t)floor((double)(dl + 1) * hz / (double)rate);
        if (e >= 2) {
            const int64_t left = prev2, center = prev1, right = edge, m = e - 2;
            if (left < 0 || center >= rows || right > rows || center < left || right < center)
                return sn_kfail(c->err, c->node, SNUG_ERR_RANGE,
                                "mel filter %lld spans bins [%lld, %lld], outside [0, %lld)", (long long)m,
                                (long long)left, (long long)right, (long long)rows);
            if (center == left)
                sn_store_f64(o->dtype, o->data, (size_t)(center * bins + m), 1.0);
            else
                for (int64_t j = left; j <= center; j++)
                    sn_store_f64(o->dtype, o->data, (size_t)(j * bins + m),
                                 (double)(j - left) / (double)(center - left));
            for (int64_t j = center; j < right; j++)
                sn_store_f64(o->dtype, o->data, (size_t)(j * bins + m), (double)(right - j) / (double)(right - center));
        }
        prev2 = prev1;
        prev1 = edge;
    }
    return SNUG_OK;
}

const sn_op_def sn_ops_signal[] = {
    {.domain = "", .name = "DFT", .since_version = 17, .infer = dft_infer,
     .cpu = {.prepare = dft_prepare, .run = dft_run}},
    {.domain = "", .name = "DFT", .since_version = 20, .infer = dft_infer,
     .cpu = {.prepare = dft_prepare, .run = dft_run}},
    {.domain = "", .name = "STFT", .since_version = 17, .required = 0x3, .infer = stft_infer,
     .cpu = {.prepare = stft_prepare, .run = stft_run}},
    {.domain = "", .name = "HannWindow", .since_version = 17, .infer = window_infer, .cpu = {.run = hann_run}},
    {.domain = "", .name = "HammingWindow", .since_version = 17, .infer = window_infer, .cpu = {.run = hamming_run}},
    {.domain = "", .name = "BlackmanWindow", .since_version = 17, .infer = window_infer,
     .cpu = {.run = blackman_run}},
    {.domain = "", .name = "MelWeightMatrix", .since_version = 17, .required = 0x1f, .infer = mel_infer, .cpu = {.run = mel_run}},
    {0},
};
