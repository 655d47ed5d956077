/* Convolutions: Conv, ConvTranspose, ConvInteger, QLinearConv.
 *
 * float32 Conv lowers to the blocked sgemm: per image and group,
 *   Y[Mg, out] = W[Mg, Cg*k] * col[Cg*k, out]
 * where col (im2col) is built in column chunks so the workspace stays
 * bounded; 1x1 stride-1 unpadded convs use X directly, and 2-D convs with
 * one input channel per group (depthwise) run a direct loop.
 * float32 ConvTranspose is the adjoint: col[Mg*k, in] = W^T * X, then col2im
 * scatters col into Y.
 * Other types (float16, double) and the integer ops use a direct loop with
 * a double accumulator (exact for 8-bit products). */
#include <math.h>
#include <string.h>

#include "ops/gemm.h"
#include "ops/nn/nn.h"

#define COL_BYTES_MAX ((size_t)8 << 20) /* im2col chunk budget */

/* Floor division for possibly negative numerators (positive d). */
static inline int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/* ---- shared shape logic ------------------------------------------------------ */

typedef struct conv_shape {
    nn_geo g;
    int64_t N, C, M, group, Cg, Mg; /* images, in/out channels, groups */
    int64_t ksz, insz, outsz;       /* products of kernel / input / output spatial dims */
    int64_t op[SN_MAX_RANK];        /* ConvTranspose output_padding */
} conv_shape;

/* x: [N, C, in...]; w: Conv [M, C/group, k...], ConvTranspose [C, M/group, k...].
 * Fills s and y's dims (rank x->rank). With unknown input dims the
 * corresponding output dims are unknown. */
static int conv_shape_make(const sn_node *node, sn_err *err, const sn_tensor *x, const sn_tensor *w,
                           bool transpose, conv_shape *s, int64_t *ydims) {
    memset(s, 0, sizeof *s);
    if (x->rank < 3)
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "X must have rank >= 3, got %d", x->rank);
    if (w->rank != SN_RANK_UNKNOWN && w->rank != x->rank)
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "W has rank %d, X has rank %d", w->rank, x->rank);
    int nd = x->rank - 2;
    int64_t kshape[SN_MAX_RANK];
    for (int i = 0; i < nd; i++)
        kshape[i] = w->rank == SN_RANK_UNKNOWN ? SN_DIM_UNKNOWN : w->dims[2 + i];
    SN_TRY(nn_geo_attrs(node, err, nd, kshape, &s->g));
    for (int i = 0; i < nd; i++)
        if (!sn_dim_known(s->g.k[i]))
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "kernel size unknown (give kernel_shape)");
    s->group = sn_attr_int(node, "group", 1);
    if (s->group < 1 || s->group > NN_ATTR_MAX)
        return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "group must be in [1, 2^31]");
    s->N = x->dims[0];
    s->C = x->dims[1];
    int64_t w0 = w->rank == SN_RANK_UNKNOWN ? SN_DIM_UNKNOWN : w->dims[0];
    int64_t w1 = w->rank == SN_RANK_UNKNOWN ? SN_DIM_UNKNOWN : w->dims[1];
    if (!transpose) {
        s->M = w0;
        if (sn_dim_known(s->C) && sn_dim_known(w1) && s->C != w1 * s->group)
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "X has %lld channels, W expects %lld x group %lld",
                            (long long)s->C, (long long)w1, (long long)s->group);
        if (sn_dim_known(s->M) && s->M % s->group)
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "%lld output channels not divisible by group %lld",
                            (long long)s->M, (long long)s->group);
    } else {
        s->M = sn_dim_known(w1) ? w1 * s->group : SN_DIM_UNKNOWN;
        if (sn_dim_known(s->C) && sn_dim_known(w0) && s->C != w0)
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "X has %lld channels, W has %lld", (long long)s->C,
                            (long long)w0);
        if (sn_dim_known(s->C) && s->C % s->group)
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "%lld input channels not divisible by group %lld",
                            (long long)s->C, (long long)s->group);
    }
    s->Cg = sn_dim_known(s->C) ? s->C / s->group : SN_DIM_UNKNOWN;
    s->Mg = sn_dim_known(s->M) ? s->M / s->group : SN_DIM_UNKNOWN;
    for (int i = 0; i < nd; i++)
        s->g.in[i] = x->dims[2 + i];

    if (!transpose) {
        SN_TRY(nn_geo_output(node, err, &s->g, false));
    } else {
        nn_geo *g = &s->g;
        const int64_t *v;
        int n = sn_attr_ints(node, "output_padding", &v);
        if (n >= 0 && n != nd)
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "output_padding has %d values for %d dims", n, nd);
        for (int i = 0; i < nd; i++)
            s->op[i] = n >= 0 ? v[i] : 0;
        const int64_t *os;
        int nos = sn_attr_ints(node, "output_shape", &os);
        if (nos >= 0 && nos != nd && nos != nd + 2)
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "output_shape has %d values for %d dims", nos, nd);
        if (nos == nd + 2)
            os += 2;
        for (int i = 0; i < nd; i++) {
            int64_t in = g->in[i], dk = (g->k[i] - 1) * g->d[i] + 1;
            if (!sn_dim_known(in)) {
                g->out[i] = nos >= 0 ? os[i] : SN_DIM_UNKNOWN;
                continue;
            }
            int64_t full = g->s[i] * (in - 1) + s->op[i] + dk; /* output before padding */
            if (g->auto_pad == NN_PAD_SAME_UPPER || g->auto_pad == NN_PAD_SAME_LOWER) {
                int64_t out = nos >= 0 ? os[i] : in * g->s[i];
                int64_t total = full - out;
                int64_t half = floor_div(total, 2);
                g->pb[i] = g->auto_pad == NN_PAD_SAME_UPPER ? half : total - half;
                g->pe[i] = total - g->pb[i];
                g->out[i] = out;
            } else {
                if (g->auto_pad == NN_PAD_VALID)
                    g->pb[i] = g->pe[i] = 0;
                /* explicit output_shape: values past the computed size are zero */
                g->out[i] = nos >= 0 ? os[i] : full - g->pb[i] - g->pe[i];
            }
            if (g->out[i] < 0)
                return sn_kfail(err, node, SNUG_ERR_SHAPE, "negative output size in spatial dim %d", i);
        }
    }
    s->ksz = sn_dims_prod(s->g.k, 0, nd);
    s->insz = sn_dims_prod(s->g.in, 0, nd);
    s->outsz = sn_dims_prod(s->g.out, 0, nd);
    ydims[0] = s->N;
    ydims[1] = s->M;
    for (int i = 0; i < nd; i++)
        ydims[2 + i] = s->g.out[i];
    return SNUG_OK;
}

static int conv_check_bias(const sn_node *node, sn_err *err, const sn_tensor *b, int64_t M) {
    if (!b)
        return SNUG_OK;
    if (b->rank != SN_RANK_UNKNOWN &&
        (b->rank != 1 || (sn_dim_known(b->dims[0]) && sn_dim_known(M) && b->dims[0] != M)))
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "B must be a vector of %lld values", (long long)M);
    return SNUG_OK;
}

static int conv_infer_common(sn_infer_ctx *c, bool transpose) {
    const sn_tensor *x = sn_in(c->in, c->n_in, 0), *w = sn_in(c->in, c->n_in, 1);
    const sn_tensor *b = sn_in(c->in, c->n_in, 2);
    if (!x || !w)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "needs inputs X and W");
    if (x->dtype != w->dtype || (b && b->dtype != x->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "X, W and B must have the same type");
    if (!sn_dtype_is_real(x->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "type %s not supported", sn_dtype_name(x->dtype));
    if (x->rank == SN_RANK_UNKNOWN) {
        sn_set_out(c->out[0], x->dtype, w->rank, NULL);
        return SNUG_OK;
    }
    const int64_t *ks;
    bool kernel_known = w->rank != SN_RANK_UNKNOWN || sn_attr_ints(c->node, "kernel_shape", &ks) >= 0;
    for (int i = 2; kernel_known && i < w->rank; i++)
        kernel_known = sn_dim_known(w->dims[i]);
    if (!kernel_known) { /* weights' shape not known yet: only batch and rank */
        int64_t yd[SN_MAX_RANK];
        for (int i = 0; i < x->rank; i++)
            yd[i] = i == 0 ? x->dims[0] : SN_DIM_UNKNOWN;
        sn_set_out(c->out[0], x->dtype, x->rank, yd);
        return SNUG_OK;
    }
    conv_shape s;
    int64_t yd[SN_MAX_RANK];
    SN_TRY(conv_shape_make(c->node, c->err, x, w, transpose, &s, yd));
    SN_TRY(conv_check_bias(c->node, c->err, b, s.M));
    sn_set_out(c->out[0], x->dtype, x->rank, yd);
    return SNUG_OK;
}

/* ---- float32 Conv --------------------------------------------------------------- */

static bool conv_is_pointwise(const conv_shape *s) {
    for (int i = 0; i < s->g.nd; i++)
        if (s->g.k[i] != 1 || s->g.s[i] != 1 || s->g.pb[i] || s->g.pe[i])
            return false;
    return true;
}

static bool conv_is_depthwise2d(const conv_shape *s) { return s->g.nd == 2 && s->Cg == 1; }

/* Columns per im2col chunk. */
static int64_t conv_chunk(const conv_shape *s) {
    int64_t rows = s->Cg * s->ksz;
    int64_t cols = s->outsz;
    if (rows <= 0 || cols <= 0)
        return 1;
    int64_t fit = (int64_t)(COL_BYTES_MAX / sizeof(float)) / rows;
    if (fit >= cols)
        return cols;
    return sn_imax(64, fit / 64 * 64);
}

typedef struct conv_ws {
    size_t col_bytes, gemm_bytes;
} conv_ws;

static void conv_ws_sizes(const conv_shape *s, int threads, conv_ws *w) {
    w->col_bytes = w->gemm_bytes = 0;
    if (conv_is_pointwise(s)) {
        w->gemm_bytes = sn_sgemm_workspace(s->Mg, s->outsz, s->Cg, threads);
        return;
    }
    if (conv_is_depthwise2d(s))
        return;
    int64_t chunk = conv_chunk(s);
    w->col_bytes = sn_align64((size_t)(s->Cg * s->ksz * chunk) * sizeof(float));
    w->gemm_bytes = sn_sgemm_workspace(s->Mg, chunk, s->Cg * s->ksz, threads);
}

int nn_conv_prepare(sn_prep_ctx *c) {
    if (c->in[0]->dtype != SN_F32)
        return SNUG_OK;
    conv_shape s;
    int64_t yd[SN_MAX_RANK];
    SN_TRY(conv_shape_make(c->node, c->err, c->in[0], c->in[1], false, &s, yd));
    conv_ws w;
    conv_ws_sizes(&s, c->n_threads, &w);
    c->workspace = w.col_bytes + w.gemm_bytes;
    return SNUG_OK;
}

typedef struct im2col_job {
    const conv_shape *s;
    const float *x; /* one image, one group: [Cg, in...] */
    float *col;     /* [Cg*ksz, n] */
    int64_t o0, n;  /* output columns [o0, o0+n) */
} im2col_job;

/* Rows [r0, r1) of col; row r = (channel, kernel offset). */
static void im2col_rows(void *arg, int64_t r0, int64_t r1) {
    const im2col_job *j = arg;
    const conv_shape *s = j->s;
    const nn_geo *g = &s->g;
    int nd = g->nd;
    for (int64_t r = r0; r < r1; r++) {
        int64_t ch = r / s->ksz, kr = r % s->ksz;
        int64_t kk[SN_MAX_RANK];
        for (int d = nd - 1; d >= 0; d--) {
            kk[d] = kr % g->k[d];
            kr /= g->k[d];
        }
        const float *xc = j->x + ch * s->insz;
        float *dst = j->col + r * j->n;
        /* walk output positions o0.. in runs along the last dim */
        int64_t o = j->o0, end = j->o0 + j->n;
        while (o < end) {
            int64_t oi[SN_MAX_RANK] = {0}, t = o;
            for (int d = nd - 1; d >= 0; d--) {
                oi[d] = t % g->out[d];
                t /= g->out[d];
            }
            int64_t last = nd - 1;
            int64_t run = sn_imin(g->out[last] - oi[last], end - o);
            bool inside = true;
            int64_t base = 0;
            for (int d = 0; d < last; d++) {
                int64_t ip = oi[d] * g->s[d] - g->pb[d] + kk[d] * g->d[d];
                if (ip < 0 || ip >= g->in[d])
                    inside = false;
                base = base * g->in[d] + ip;
            }
            float *out = dst + (o - j->o0);
            if (!inside) {
                memset(out, 0, (size_t)run * sizeof(float));
            } else {
                const float *xr = xc + base * g->in[last];
                int64_t st = g->s[last], off = kk[last] * g->d[last] - g->pb[last], W = g->in[last];
                int64_t ox0 = oi[last];
                if (st == 1) {
                    for (int64_t q = 0; q < run; q++) {
                        int64_t ip = ox0 + q + off;
                        out[q] = (ip >= 0 && ip < W) ? xr[ip] : 0.0f;
                    }
                } else {
                    for (int64_t q = 0; q < run; q++) {
                        int64_t ip = (ox0 + q) * st + off;
                        out[q] = (ip >= 0 && ip < W) ? xr[ip] : 0.0f;
                    }
                }
            }
            o += run;
        }
    }
}

typedef struct dw_job {
    const conv_shape *s;
    const float *x, *w, *b;
    float *y;
} dw_job;

/* Depthwise 2-D: one task per (image, output channel). */
static void depthwise2d(void *arg, int64_t t0, int64_t t1) {
    const dw_job *j = arg;
    const conv_shape *s = j->s;
    const nn_geo *g = &s->g;
    int64_t H = g->in[0], W = g->in[1], OH = g->out[0], OW = g->out[1];
    int64_t KH = g->k[0], KW = g->k[1], SH = g->s[0], SW = g->s[1], DH = g->d[0], DW = g->d[1];
    for (int64_t t = t0; t < t1; t++) {
        int64_t n = t / s->M, m = t % s->M, grp = m / s->Mg;
        const float *xc = j->x + (n * s->C + grp) * H * W;
        const float *wk = j->w + m * KH * KW;
        float *yc = j->y + (n * s->M + m) * OH * OW;
        float bias = j->b ? j->b[m] : 0.0f;
        for (int64_t oy = 0; oy < OH; oy++) {
            float *yr = yc + oy * OW;
            for (int64_t ox = 0; ox < OW; ox++)
                yr[ox] = bias;
            for (int64_t ky = 0; ky < KH; ky++) {
                int64_t iy = oy * SH - g->pb[0] + ky * DH;
                if (iy < 0 || iy >= H)
                    continue;
                const float *xr = xc + iy * W;
                for (int64_t kx = 0; kx < KW; kx++) {
                    float wv = wk[ky * KW + kx];
                    int64_t off = kx * DW - g->pb[1];
                    /* ox with 0 <= ox*SW + off < W */
                    int64_t lo = off >= 0 ? 0 : (-off + SW - 1) / SW;
                    int64_t hi = W - 1 - off < 0 ? -1 : (W - 1 - off) / SW;
                    hi = sn_imin(hi, OW - 1);
                    if (SW == 1) {
                        const float *xs = xr + off;
                        for (int64_t ox = lo; ox <= hi; ox++)
                            yr[ox] += wv * xs[ox];
                    } else {
                        for (int64_t ox = lo; ox <= hi; ox++)
                            yr[ox] += wv * xr[ox * SW + off];
                    }
                }
            }
        }
    }
}

static void add_bias_f32(float *y, const float *b, int64_t N, int64_t M, int64_t sz) {
    if (!b)
        return;
    for (int64_t n = 0; n < N; n++)
        for (int64_t m = 0; m < M; m++) {
            float *p = y + (n * M + m) * sz;
            float bv = b[m];
            for (int64_t i = 0; i < sz; i++)
                p[i] += bv;
        }
}

static void conv_run_f32(sn_kctx *c, const conv_shape *s) {
    const float *X = c->in[0]->data, *Wt = c->in[1]->data;
    const sn_tensor *bt = sn_in(c->in, c->n_in, 2);
    const float *B = bt ? bt->data : NULL;
    float *Y = c->out[0]->data;
    if (conv_is_depthwise2d(s)) {
        dw_job j = {s, X, Wt, B, Y};
        sn_pool_for(c->pool, s->N * s->M, 1, depthwise2d, &j);
        return;
    }
    conv_ws w;
    conv_ws_sizes(s, sn_pool_size(c->pool), &w);
    float *col = c->ws;
    void *gws = (char *)c->ws + w.col_bytes;
    int64_t kdim = s->Cg * s->ksz;
    bool pw = conv_is_pointwise(s);
    int64_t chunk = pw ? s->outsz : conv_chunk(s);
    for (int64_t n = 0; n < s->N; n++)
        for (int64_t grp = 0; grp < s->group; grp++) {
            const float *xg = X + (n * s->C + grp * s->Cg) * s->insz;
            const float *wg = Wt + grp * s->Mg * kdim;
            float *yg = Y + (n * s->M + grp * s->Mg) * s->outsz;
            if (pw) {
                sn_sgemm_ws(0, 0, s->Mg, s->outsz, s->Cg, 1.0f, wg, kdim, xg, s->insz, 0.0f, yg, s->outsz,
                            c->pool, gws, w.gemm_bytes);
                continue;
            }
            for (int64_t o0 = 0; o0 < s->outsz; o0 += chunk) {
                int64_t nc = sn_imin(chunk, s->outsz - o0);
                im2col_job j = {s, xg, col, o0, nc};
                sn_pool_for(c->pool, kdim, sn_imax(1, 16384 / nc), im2col_rows, &j);
                sn_sgemm_ws(0, 0, s->Mg, nc, kdim, 1.0f, wg, kdim, col, nc, 0.0f, yg + o0, s->outsz, c->pool,
                            gws, w.gemm_bytes);
            }
        }
    add_bias_f32(Y, B, s->N, s->M, s->outsz);
}

/* ---- generic direct loops (float16/double Conv, integer convs) --------------------- */

/* Zero point / scale of output channel m (scalar or per channel). */
static inline double chan_val(const sn_tensor *t, int64_t m) {
    if (!t)
        return 0.0;
    return sn_load_f64(t->dtype, t->data, sn_in_numel(t) == 1 ? 0 : (size_t)m);
}

/* y[n, m, o] = sum_{c, k} (x - xz) * (w - wz[m]) for every output element;
 * store(acc, m, index) writes it. */
typedef void (*conv_store_fn)(void *ctx, double acc, int64_t m, size_t yi);

static void conv_direct(const conv_shape *s, const sn_tensor *x, const sn_tensor *w, double xz,
                        const sn_tensor *wz, conv_store_fn store, void *ctx) {
    const nn_geo *g = &s->g;
    int nd = g->nd;
    int64_t kdim = s->Cg * s->ksz;
    for (int64_t n = 0; n < s->N; n++)
        for (int64_t m = 0; m < s->M; m++) {
            int64_t grp = m / s->Mg;
            double wzm = chan_val(wz, m);
            for (int64_t o = 0; o < s->outsz; o++) {
                int64_t oi[SN_MAX_RANK], t = o;
                for (int d = nd - 1; d >= 0; d--) {
                    oi[d] = t % g->out[d];
                    t /= g->out[d];
                }
                double acc = 0;
                for (int64_t kr = 0; kr < s->ksz; kr++) {
                    int64_t r = kr, ioff = 0;
                    bool inside = true;
                    int64_t kk[SN_MAX_RANK];
                    for (int d = nd - 1; d >= 0; d--) {
                        kk[d] = r % g->k[d];
                        r /= g->k[d];
                    }
                    for (int d = 0; d < nd; d++) {
                        int64_t ip = oi[d] * g->s[d] - g->pb[d] + kk[d] * g->d[d];
                        if (ip < 0 || ip >= g->in[d]) {
                            inside = false;
                            break;
                        }
                        ioff = ioff * g->in[d] + ip;
                    }
                    if (!inside)
                        continue; /* padding contributes x == xz, i.e. zero */
                    for (int64_t ch = 0; ch < s->Cg; ch++) {
                        size_t xi = (size_t)((n * s->C + grp * s->Cg + ch) * s->insz + ioff);
                        size_t wi = (size_t)(m * kdim + ch * s->ksz + kr);
                        acc += (sn_load_f64(x->dtype, x->data, xi) - xz) * (sn_load_f64(w->dtype, w->data, wi) - wzm);
                    }
                }
                store(ctx, acc, m, (size_t)((n * s->M + m) * s->outsz + o));
            }
        }
}

typedef struct fstore {
    sn_dtype t;
    void *y;
    const sn_tensor *b;
} fstore;

static void store_float(void *ctx, double acc, int64_t m, size_t yi) {
    fstore *f = ctx;
    sn_store_f64(f->t, f->y, yi, acc + chan_val(f->b, m));
}

int nn_conv_run(sn_kctx *c) {
    conv_shape s;
    int64_t yd[SN_MAX_RANK];
    SN_TRY(conv_shape_make(c->node, c->err, c->in[0], c->in[1], false, &s, yd));
    if (sn_in_numel(c->out[0]) == 0)
        return SNUG_OK;
    if (c->in[0]->dtype == SN_F32) {
        conv_run_f32(c, &s);
        return SNUG_OK;
    }
    fstore f = {c->out[0]->dtype, c->out[0]->data, sn_in(c->in, c->n_in, 2)};
    conv_direct(&s, c->in[0], c->in[1], 0.0, NULL, store_float, &f);
    return SNUG_OK;
}

int nn_conv_infer(sn_infer_ctx *c) { return conv_infer_common(c, false); }

/* Level 1: the figure prepare will declare, from the inferred shapes. */
size_t nn_conv_estimate(const sn_infer_ctx *c) {
    if (c->n_in < 2 || !c->in[0] || !c->in[1] || c->in[0]->dtype != SN_F32 ||
        !sn_tensor_shape_known(c->in[0]) || !sn_tensor_shape_known(c->in[1]))
        return 0;
    conv_shape s;
    int64_t yd[SN_MAX_RANK];
    if (conv_shape_make(c->node, NULL, c->in[0], c->in[1], false, &s, yd) != SNUG_OK)
        return 0;
    conv_ws w;
    conv_ws_sizes(&s, sn_gemm_threads(c->n_threads), &w);
    return w.col_bytes + w.gemm_bytes;
}

/* ---- ConvTranspose -------------------------------------------------------------------- */

static int64_t convt_chunk(const conv_shape *s) {
    int64_t rows = s->Mg * s->ksz;
    if (rows <= 0 || s->insz <= 0)
        return 1;
    int64_t fit = (int64_t)(COL_BYTES_MAX / sizeof(float)) / rows;
    if (fit >= s->insz)
        return s->insz;
    return sn_imax(64, fit / 64 * 64);
}

static void convt_ws_sizes(const conv_shape *s, int threads, conv_ws *w) {
    int64_t chunk = convt_chunk(s);
    w->col_bytes = sn_align64((size_t)(s->Mg * s->ksz * chunk) * sizeof(float));
    w->gemm_bytes = sn_sgemm_workspace(s->Mg * s->ksz, chunk, s->Cg, threads);
}

int nn_convt_prepare(sn_prep_ctx *c) {
    if (c->in[0]->dtype != SN_F32)
        return SNUG_OK;
    conv_shape s;
    int64_t yd[SN_MAX_RANK];
    SN_TRY(conv_shape_make(c->node, c->err, c->in[0], c->in[1], true, &s, yd));
    conv_ws w;
    convt_ws_sizes(&s, c->n_threads, &w);
    c->workspace = w.col_bytes + w.gemm_bytes;
    return SNUG_OK;
}

size_t nn_convt_estimate(const sn_infer_ctx *c) {
    if (c->n_in < 2 || !c->in[0] || !c->in[1] || c->in[0]->dtype != SN_F32 ||
        !sn_tensor_shape_known(c->in[0]) || !sn_tensor_shape_known(c->in[1]))
        return 0;
    conv_shape s;
    int64_t yd[SN_MAX_RANK];
    if (conv_shape_make(c->node, NULL, c->in[0], c->in[1], true, &s, yd) != SNUG_OK)
        return 0;
    conv_ws w;
    convt_ws_sizes(&s, sn_gemm_threads(c->n_threads), &w);
    return w.col_bytes + w.gemm_bytes;
}

typedef struct col2im_job {
    const conv_shape *s;
    const float *col; /* [Mg*ksz, n] */
    float *y;         /* one image, one group: [Mg, out...] */
    int64_t i0, n;    /* input columns [i0, i0+n) */
} col2im_job;

/* Output channels [m0, m1) of the group (their rows never overlap). */
static void col2im_chans(void *arg, int64_t m0, int64_t m1) {
    const col2im_job *j = arg;
    const conv_shape *s = j->s;
    const nn_geo *g = &s->g;
    int nd = g->nd;
    for (int64_t m = m0; m < m1; m++)
        for (int64_t kr = 0; kr < s->ksz; kr++) {
            int64_t kk[SN_MAX_RANK], r = kr;
            for (int d = nd - 1; d >= 0; d--) {
                kk[d] = r % g->k[d];
                r /= g->k[d];
            }
            const float *src = j->col + (m * s->ksz + kr) * j->n;
            float *yc = j->y + m * s->outsz;
            for (int64_t q = 0; q < j->n; q++) {
                int64_t ii = j->i0 + q, t = ii, yo = 0;
                int64_t ip[SN_MAX_RANK];
                for (int d = nd - 1; d >= 0; d--) {
                    ip[d] = t % g->in[d];
                    t /= g->in[d];
                }
                bool inside = true;
                for (int d = 0; d < nd; d++) {
                    int64_t op = ip[d] * g->s[d] - g->pb[d] + kk[d] * g->d[d];
                    if (op < 0 || op >= g->out[d]) {
                        inside = false;
                        break;
                    }
                    yo = yo * g->out[d] + op;
                }
                if (inside)
                    yc[yo] += src[q];
            }
        }
}

static void convt_run_f32(sn_kctx *c, const conv_shape *s) {
    const float *X = c->in[0]->data, *Wt = c->in[1]->data;
    const sn_tensor *bt = sn_in(c->in, c->n_in, 2);
    float *Y = c->out[0]->data;
    conv_ws w;
    convt_ws_sizes(s, sn_pool_size(c->pool), &w);
    float *col = c->ws;
    void *gws = (char *)c->ws + w.col_bytes;
    int64_t rows = s->Mg * s->ksz, chunk = convt_chunk(s);
    memset(Y, 0, (size_t)(s->N * s->M * s->outsz) * sizeof(float));
    for (int64_t n = 0; n < s->N; n++)
        for (int64_t grp = 0; grp < s->group; grp++) {
            const float *xg = X + (n * s->C + grp * s->Cg) * s->insz;
            const float *wg = Wt + grp * s->Cg * rows; /* [Cg, Mg*ksz] */
            float *yg = Y + (n * s->M + grp * s->Mg) * s->outsz;
            for (int64_t i0 = 0; i0 < s->insz; i0 += chunk) {
                int64_t nc = sn_imin(chunk, s->insz - i0);
                sn_sgemm_ws(1, 0, rows, nc, s->Cg, 1.0f, wg, rows, xg + i0, s->insz, 0.0f, col, nc, c->pool, gws,
                            w.gemm_bytes);
                col2im_job j = {s, col, yg, i0, nc};
                sn_pool_for(c->pool, s->Mg, 1, col2im_chans, &j);
            }
        }
    add_bias_f32(Y, bt ? bt->data : NULL, s->N, s->M, s->outsz);
}

int nn_convt_run(sn_kctx *c) {
    conv_shape s;
    int64_t yd[SN_MAX_RANK];
    SN_TRY(conv_shape_make(c->node, c->err, c->in[0], c->in[1], true, &s, yd));
    if (sn_in_numel(c->out[0]) == 0)
        return SNUG_OK;
    if (c->in[0]->dtype == SN_F32) {
        convt_run_f32(c, &s);
        return SNUG_OK;
    }
    /* direct gather: y[n, m, o] = sum over (c, k) with o = i*s - pb + k*d */
    const sn_tensor *x = c->in[0], *w = c->in[1], *b = sn_in(c->in, c->n_in, 2);
    sn_tensor *y = c->out[0];
    const nn_geo *g = &s.g;
    int nd = g->nd;
    for (int64_t n = 0; n < s.N; n++)
        for (int64_t m = 0; m < s.M; m++) {
            int64_t grp = m / s.Mg, mg = m % s.Mg;
            for (int64_t o = 0; o < s.outsz; o++) {
                int64_t oi[SN_MAX_RANK], t = o;
                for (int d = nd - 1; d >= 0; d--) {
                    oi[d] = t % g->out[d];
                    t /= g->out[d];
                }
                double acc = chan_val(b, m);
                for (int64_t kr = 0; kr < s.ksz; kr++) {
                    int64_t kk[SN_MAX_RANK], r = kr, ioff = 0;
                    for (int d = nd - 1; d >= 0; d--) {
                        kk[d] = r % g->k[d];
                        r /= g->k[d];
                    }
                    bool inside = true;
                    for (int d = 0; d < nd && inside; d++) {
                        int64_t num = oi[d] + g->pb[d] - kk[d] * g->d[d];
                        if (num < 0 || num % g->s[d]) {
                            inside = false;
                            break;
                        }
                        int64_t ip = num / g->s[d];
                        if (ip >= g->in[d])
                            inside = false;
                        ioff = ioff * g->in[d] + ip;
                    }
                    if (!inside)
                        continue;
                    for (int64_t ch = 0; ch < s.Cg; ch++) {
                        int64_t cin = grp * s.Cg + ch;
                        acc += sn_load_f64(x->dtype, x->data, (size_t)((n * s.C + cin) * s.insz + ioff)) *
                               sn_load_f64(w->dtype, w->data, (size_t)((cin * s.Mg + mg) * s.ksz + kr));
                    }
                }
                sn_store_f64(y->dtype, y->data, (size_t)((n * s.M + m) * s.outsz + o), acc);
            }
        }
    return SNUG_OK;
}

int nn_convt_infer(sn_infer_ctx *c) { return conv_infer_common(c, true); }

/* ---- ConvInteger, QLinearConv ------------------------------------------------------------ */

static bool is_q8(sn_dtype t) { return t == SN_U8 || t == SN_I8; }

/* Checks a scalar-or-per-channel parameter. */
static int chan_param_check(const sn_node *node, sn_err *err, const sn_tensor *t, int64_t M, const char *what) {
    if (!t || t->rank == SN_RANK_UNKNOWN)
        return SNUG_OK;
    int64_t n = sn_tensor_numel(t);
    if (n < 0 || n == 1 || !sn_dim_known(M) || n == M)
        return SNUG_OK;
    return sn_kfail(err, node, SNUG_ERR_SHAPE, "%s has %lld values; expected 1 or %lld", what, (long long)n,
                    (long long)M);
}

int nn_convint_infer(sn_infer_ctx *c) {
    const sn_tensor *x = sn_in(c->in, c->n_in, 0), *w = sn_in(c->in, c->n_in, 1);
    if (!x || !w)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "needs inputs x and w");
    if (!is_q8(x->dtype) || !is_q8(w->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "x and w must be int8 or uint8");
    if (x->rank == SN_RANK_UNKNOWN) {
        sn_set_out(c->out[0], SN_I32, w->rank, NULL);
        return SNUG_OK;
    }
    conv_shape s;
    int64_t yd[SN_MAX_RANK];
    SN_TRY(conv_shape_make(c->node, c->err, x, w, false, &s, yd));
    SN_TRY(chan_param_check(c->node, c->err, sn_in(c->in, c->n_in, 3), s.M, "w_zero_point"));
    sn_set_out(c->out[0], SN_I32, x->rank, yd);
    return SNUG_OK;
}

static void store_i32(void *ctx, double acc, int64_t m, size_t yi) {
    (void)m;
    ((int32_t *)ctx)[yi] = (int32_t)acc;
}

int nn_convint_run(sn_kctx *c) {
    conv_shape s;
    int64_t yd[SN_MAX_RANK];
    SN_TRY(conv_shape_make(c->node, c->err, c->in[0], c->in[1], false, &s, yd));
    const sn_tensor *xz = sn_in(c->in, c->n_in, 2), *wz = sn_in(c->in, c->n_in, 3);
    if ((xz && sn_in_numel(xz) != 1) || (wz && sn_in_numel(wz) != 1 && sn_in_numel(wz) != s.M))
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "bad zero point size");
    conv_direct(&s, c->in[0], c->in[1], chan_val(xz, 0), wz, store_i32, c->out[0]->data);
    return SNUG_OK;
}

/* inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B */
int nn_qlconv_infer(sn_infer_ctx *c) {
    if (c->n_in < 8)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "needs at least 8 inputs");
    for (int i = 0; i < 8; i++)
        if (!c->in[i])
            return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "input %d is required", i);
    const sn_tensor *x = c->in[0], *w = c->in[3], *b = sn_in(c->in, c->n_in, 8);
    if (!is_q8(x->dtype) || !is_q8(w->dtype) || !is_q8(c->in[7]->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "x, w and y_zero_point must be int8 or uint8");
    if (b && b->dtype != SN_I32)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "B must be int32");
    sn_dtype yt = c->in[7]->dtype;
    if (x->rank == SN_RANK_UNKNOWN) {
        sn_set_out(c->out[0], yt, w->rank, NULL);
        return SNUG_OK;
    }
    conv_shape s;
    int64_t yd[SN_MAX_RANK];
    SN_TRY(conv_shape_make(c->node, c->err, x, w, false, &s, yd));
    SN_TRY(chan_param_check(c->node, c->err, c->in[4], s.M, "w_scale"));
    SN_TRY(chan_param_check(c->node, c->err, c->in[5], s.M, "w_zero_point"));
    SN_TRY(conv_check_bias(c->node, c->err, b, s.M));
    sn_set_out(c->out[0], yt, x->rank, yd);
    return SNUG_OK;
}

typedef struct qstore {
    sn_dtype t;
    void *y;
    float xs, ys;
    double yz;
    const sn_tensor *ws, *b;
} qstore;

static void store_q(void *ctx, double acc, int64_t m, size_t yi) {
    qstore *q = ctx;
    acc += chan_val(q->b, m);
    float scale = q->xs * (float)chan_val(q->ws, m) / q->ys;
    double v = nearbyint((double)((float)acc * scale)) + q->yz;
    if (q->t == SN_U8)
        ((uint8_t *)q->y)[yi] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
    else
        ((int8_t *)q->y)[yi] = (int8_t)(v < -128 ? -128 : v > 127 ? 127 : v);
}

int nn_qlconv_run(sn_kctx *c) {
    conv_shape s;
    int64_t yd[SN_MAX_RANK];
    SN_TRY(conv_shape_make(c->node, c->err, c->in[0], c->in[3], false, &s, yd));
    const sn_tensor *ws = c->in[4], *wz = c->in[5];
    if (sn_in_numel(c->in[1]) != 1 || sn_in_numel(c->in[2]) != 1 || sn_in_numel(c->in[6]) != 1 || sn_in_numel(c->in[7]) != 1)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "x and y scales and zero points must be scalars");
    if ((sn_in_numel(ws) != 1 && sn_in_numel(ws) != s.M) || (sn_in_numel(wz) != 1 && sn_in_numel(wz) != s.M))
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "w_scale and w_zero_point must have 1 or %lld values",
                        (long long)s.M);
    qstore q = {c->out[0]->dtype, c->out[0]->data, ((const float *)c->in[1]->data)[0],
                ((const float *)c->in[6]->data)[0], chan_val(c->in[7], 0), ws, sn_in(c->in, c->n_in, 8)};
    conv_direct(&s, c->in[0], c->in[3], chan_val(c->in[2], 0), wz, store_q, &q);
    return SNUG_OK;
}
