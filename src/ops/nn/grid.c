/* Sampling grids: GridSample (an image read at the positions a grid holds)
 * and AffineGrid (the grid an affine transform makes). */
#include <math.h>
#include <string.h>

#include "ops/nn/nn.h"

/* ---- GridSample (16, 20; 2-D and 3-D) ---------------------------------------------------- */

enum { GS_LINEAR, GS_NEAREST, GS_CUBIC };
enum { GS_ZEROS, GS_BORDER, GS_REFLECTION };

static int gs_modes(const sn_node *n, int *mode, int *pad, sn_err *err) {
    const char *m = sn_attr_str(n, "mode", n->opset >= 20 ? "linear" : "bilinear");
    const char *p = sn_attr_str(n, "padding_mode", "zeros");
    if (!strcmp(m, "bilinear") || !strcmp(m, "linear"))
        *mode = GS_LINEAR;
    else if (!strcmp(m, "nearest"))
        *mode = GS_NEAREST;
    else if (!strcmp(m, "bicubic") || !strcmp(m, "cubic"))
        *mode = GS_CUBIC;
    else
        return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "mode '%s' is not supported", m);
    if (!strcmp(p, "zeros"))
        *pad = GS_ZEROS;
    else if (!strcmp(p, "border"))
        *pad = GS_BORDER;
    else if (!strcmp(p, "reflection"))
        *pad = GS_REFLECTION;
    else
        return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "padding_mode '%s' is not supported", p);
    return SNUG_OK;
}

int nn_gridsample_infer(sn_infer_ctx *c) {
    int mode, pad;
    SN_TRY(gs_modes(c->node, &mode, &pad, c->err));
    if (c->n_in < 2 || !c->in[1])
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "X and grid are required");
    const sn_tensor *x = c->in[0], *g = c->in[1];
    if (!sn_dtype_is_real(x->dtype) || !sn_dtype_is_real(g->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "X and grid must be float tensors");
    /* 2-D: X [N,C,H,W], grid [N,oH,oW,2]; 3-D: X [N,C,D,H,W], grid [N,oD,oH,oW,3] */
    int r = x->rank >= 0 ? x->rank : g->rank;
    if ((r >= 0 && r != 4 && r != 5) || (x->rank >= 0 && g->rank >= 0 && x->rank != g->rank))
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED,
                        "only 2-D (X [N,C,H,W], grid [N,H,W,2]) and 3-D (X [N,C,D,H,W], grid [N,D,H,W,3]) sampling are supported");
    sn_tensor *o = c->out[0];
    o->kind = SN_KIND_TENSOR;
    o->dtype = x->dtype;
    if (r < 0) {
        o->rank = SN_RANK_UNKNOWN;
        return SNUG_OK;
    }
    int nd = r - 2;
    if (nd == 3 && mode == GS_CUBIC)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "cubic mode is only defined for 2-D sampling");
    if (g->rank == r && sn_dim_known(g->dims[r - 1]) && g->dims[r - 1] != nd)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "grid's last dim must be %d", nd);
    if (x->rank == r && g->rank == r && sn_dim_known(x->dims[0]) && sn_dim_known(g->dims[0]) && x->dims[0] != g->dims[0])
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "grid batch %lld differs from X batch %lld",
                        (long long)g->dims[0], (long long)x->dims[0]);
    int64_t d[5];
    d[0] = x->rank == r ? x->dims[0] : SN_DIM_UNKNOWN;
    d[1] = x->rank == r ? x->dims[1] : SN_DIM_UNKNOWN;
    for (int i = 0; i < nd; i++)
        d[2 + i] = g->rank == r ? g->dims[1 + i] : SN_DIM_UNKNOWN;
    if (!sn_dim_known(d[0]) && g->rank == r)
        d[0] = g->dims[0];
    sn_tensor_set_shape(o, r, d);
    return SNUG_OK;
}

/* Reflects v into [lo, hi] (PyTorch's rule, repeated reflections). */
static double gs_reflect(double v, double lo, double hi) {
    const double rng = hi - lo;
    if (rng <= 0)
        return lo;
    if (v < lo) {
        double dx = lo - v;
        double n = floor(dx / rng), r = dx - n * rng;
        return fmod(n, 2.0) == 0 ? lo + r : hi - r;
    }
    if (v > hi) {
        double dx = v - hi;
        double n = floor(dx / rng), r = dx - n * rng;
        return fmod(n, 2.0) == 0 ? hi - r : lo + r;
    }
    return v;
}

typedef struct gs_plane {
    sn_dtype dt;
    const void *data;
    int64_t base, H, W;
    int pad;
    double lo_x, hi_x, lo_y, hi_y; /* reflection borders */
} gs_plane;

/* Pixel (iy, ix) under the padding rule. */
static double gs_pixel(const gs_plane *p, int64_t iy, int64_t ix) {
    if (p->pad == GS_ZEROS) {
        if (iy < 0 || iy >= p->H || ix < 0 || ix >= p->W)
            return 0.0;
    } else if (p->pad == GS_BORDER) {
        iy = sn_imin(sn_imax(iy, 0), p->H - 1);
        ix = sn_imin(sn_imax(ix, 0), p->W - 1);
    } else {
        iy = (int64_t)gs_reflect((double)iy, p->lo_y, p->hi_y);
        ix = (int64_t)gs_reflect((double)ix, p->lo_x, p->hi_x);
        iy = sn_imin(sn_imax(iy, 0), p->H - 1);
        ix = sn_imin(sn_imax(ix, 0), p->W - 1);
    }
    return sn_ld_f64(p->dt, p->data, p->base + iy * p->W + ix);
}

static void gs_cubic_coeffs(double t, double c[4]) {
    const double A = -0.75;
    double x = t + 1;
    c[0] = ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
    x = t;
    c[1] = ((A + 2) * x - (A + 3)) * x * x + 1;
    x = 1 - t;
    c[2] = ((A + 2) * x - (A + 3)) * x * x + 1;
    x = 2 - t;
    c[3] = ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
}

/* Unnormalizes a grid coordinate into [0, n) pixel space and applies the
 * padding rule to out-of-range points (linear and nearest modes). */
static double gs_coord(double v, int64_t n, bool ac, int mode, int pad) {
    double f = ac ? (v + 1) / 2.0 * (double)(n - 1) : ((v + 1) * (double)n - 1) / 2.0;
    if (mode == GS_NEAREST)
        f = nearbyint(f);
    double lo = ac ? 0 : -0.5, hi = ac ? (double)n - 1 : (double)n - 0.5;
    if (!(f >= lo && f <= hi)) {
        if (pad == GS_BORDER)
            f = fmin(fmax(f, 0.0), (double)(n - 1));
        else if (pad == GS_REFLECTION)
            f = gs_reflect(f, lo, hi);
    }
    return f;
}

/* Voxel (iz, iy, ix) of the volume at base, zero outside (the padding
 * rule moved the point inside already for border/reflection; the clamp
 * covers the neighbours of points on the last voxel). */
static double gs_voxel(sn_dtype dt, const void *data, int64_t base, const int64_t *dhw, int64_t iz, int64_t iy,
                       int64_t ix, int pad) {
    if (iz < 0 || iz >= dhw[0] || iy < 0 || iy >= dhw[1] || ix < 0 || ix >= dhw[2]) {
        if (pad == GS_ZEROS)
            return 0.0;
        iz = sn_imin(sn_imax(iz, 0), dhw[0] - 1);
        iy = sn_imin(sn_imax(iy, 0), dhw[1] - 1);
        ix = sn_imin(sn_imax(ix, 0), dhw[2] - 1);
    }
    return sn_ld_f64(dt, data, base + (iz * dhw[1] + iy) * dhw[2] + ix);
}

static int gridsample3d_run(sn_kctx *c, int mode, int pad) {
    const sn_tensor *x = c->in[0], *g = c->in[1];
    sn_tensor *y = c->out[0];
    const bool ac = sn_attr_int(c->node, "align_corners", 0) != 0;
    const int64_t N = x->dims[0], C = x->dims[1], dhw[3] = {x->dims[2], x->dims[3], x->dims[4]};
    const int64_t OD = g->dims[1], OH = g->dims[2], OW = g->dims[3], OP = OD * OH * OW;
    if (g->dims[0] != N)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "grid batch %lld differs from X batch %lld",
                        (long long)g->dims[0], (long long)N);
    if (sn_tensor_numel(y) == 0)
        return SNUG_OK;
    const int64_t vol = dhw[0] * dhw[1] * dhw[2];
    if (vol == 0 && pad != GS_ZEROS)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "empty input volume with padding_mode other than zeros");
    for (int64_t n = 0; n < N; n++)
        for (int64_t p = 0; p < OP; p++) {
            const int64_t gi = (n * OP + p) * 3;
            double fx = gs_coord(sn_ld_f64(g->dtype, g->data, gi), dhw[2], ac, mode, pad);
            double fy = gs_coord(sn_ld_f64(g->dtype, g->data, gi + 1), dhw[1], ac, mode, pad);
            double fz = gs_coord(sn_ld_f64(g->dtype, g->data, gi + 2), dhw[0], ac, mode, pad);
            bool bad = vol == 0 || !isfinite(fx) || !isfinite(fy) || !isfinite(fz) || fabs(fx) > 1e15 ||
                       fabs(fy) > 1e15 || fabs(fz) > 1e15;
            for (int64_t ch = 0; ch < C; ch++) {
                const int64_t base = (n * C + ch) * vol;
                double v = 0;
                if (bad) {
                    v = pad == GS_ZEROS ? 0.0 : NAN;
                } else if (mode == GS_NEAREST) {
                    v = gs_voxel(x->dtype, x->data, base, dhw, (int64_t)fz, (int64_t)fy, (int64_t)fx, GS_ZEROS);
                } else {
                    const double x0 = floor(fx), y0 = floor(fy), z0 = floor(fz);
                    const double tx = fx - x0, ty = fy - y0, tz = fz - z0;
                    const int64_t ix = (int64_t)x0, iy = (int64_t)y0, iz = (int64_t)z0;
                    for (int a = 0; a < 2; a++)
                        for (int b = 0; b < 2; b++)
                            for (int e = 0; e < 2; e++) {
                                double w = (a ? tz : 1 - tz) * (b ? ty : 1 - ty) * (e ? tx : 1 - tx);
                                if (w != 0)
                                    v += w * gs_voxel(x->dtype, x->data, base, dhw, iz + a, iy + b, ix + e, pad);
                            }
                }
                sn_st_f64(y->dtype, y->data, (n * C + ch) * OP + p, v);
            }
        }
    return SNUG_OK;
}

int nn_gridsample_run(sn_kctx *c) {
    const sn_tensor *x = c->in[0], *g = c->in[1];
    sn_tensor *y = c->out[0];
    int mode, pad;
    SN_TRY(gs_modes(c->node, &mode, &pad, c->err));
    if (x->rank == 5)
        return gridsample3d_run(c, mode, pad);
    const bool ac = sn_attr_int(c->node, "align_corners", 0) != 0;
    const int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    const int64_t OH = g->dims[1], OW = g->dims[2];
    if (g->dims[0] != N)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "grid batch %lld differs from X batch %lld",
                        (long long)g->dims[0], (long long)N);
    if (sn_tensor_numel(y) == 0)
        return SNUG_OK;
    if (H == 0 || W == 0) {
        if (pad != GS_ZEROS)
            return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "empty input image with padding_mode other than zeros");
        for (int64_t i = 0; i < sn_tensor_numel(y); i++)
            sn_st_f64(y->dtype, y->data, i, 0.0);
        return SNUG_OK;
    }
    gs_plane p = {x->dtype, x->data, 0, H, W, pad, -0.5, (double)W - 0.5, -0.5, (double)H - 0.5};
    if (ac)
        p.lo_x = 0, p.hi_x = (double)W - 1, p.lo_y = 0, p.hi_y = (double)H - 1;
    for (int64_t n = 0; n < N; n++)
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++) {
                const int64_t gi = ((n * OH + oy) * OW + ox) * 2;
                const double nx = sn_ld_f64(g->dtype, g->data, gi), ny = sn_ld_f64(g->dtype, g->data, gi + 1);
                double fx = ac ? (nx + 1) / 2.0 * (double)(W - 1) : ((nx + 1) * (double)W - 1) / 2.0;
                double fy = ac ? (ny + 1) / 2.0 * (double)(H - 1) : ((ny + 1) * (double)H - 1) / 2.0;
                if (mode == GS_NEAREST) {
                    fx = nearbyint(fx);
                    fy = nearbyint(fy);
                }
                /* Bicubic applies the padding rule per tap only (as PyTorch
                 * and onnxruntime do); the others move the point first. */
                if (mode != GS_CUBIC && !(fx >= p.lo_x && fx <= p.hi_x)) {
                    if (pad == GS_BORDER)
                        fx = fmin(fmax(fx, 0.0), (double)(W - 1));
                    else if (pad == GS_REFLECTION)
                        fx = gs_reflect(fx, p.lo_x, p.hi_x);
                }
                if (mode != GS_CUBIC && !(fy >= p.lo_y && fy <= p.hi_y)) {
                    if (pad == GS_BORDER)
                        fy = fmin(fmax(fy, 0.0), (double)(H - 1));
                    else if (pad == GS_REFLECTION)
                        fy = gs_reflect(fy, p.lo_y, p.hi_y);
                }
                if (!isfinite(fx) || !isfinite(fy) || fabs(fx) > 1e15 || fabs(fy) > 1e15) {
                    for (int64_t ch = 0; ch < C; ch++)
                        sn_st_f64(y->dtype, y->data, ((n * C + ch) * OH + oy) * OW + ox, pad == GS_ZEROS ? 0.0 : NAN);
                    continue;
                }
                for (int64_t ch = 0; ch < C; ch++) {
                    p.base = (n * C + ch) * H * W;
                    double v;
                    if (mode == GS_NEAREST) {
                        v = gs_pixel(&p, (int64_t)fy, (int64_t)fx);
                    } else if (mode == GS_LINEAR) {
                        const double x0 = floor(fx), y0 = floor(fy), tx = fx - x0, ty = fy - y0;
                        const int64_t ix = (int64_t)x0, iy = (int64_t)y0;
                        double r0 = (1 - tx) * gs_pixel(&p, iy, ix) + tx * gs_pixel(&p, iy, ix + 1);
                        double r1 = (1 - tx) * gs_pixel(&p, iy + 1, ix) + tx * gs_pixel(&p, iy + 1, ix + 1);
                        v = (1 - ty) * r0 + ty * r1;
                    } else {
                        const double x0 = floor(fx), y0 = floor(fy);
                        const int64_t ix = (int64_t)x0, iy = (int64_t)y0;
                        double cx[4], cy[4];
                        gs_cubic_coeffs(fx - x0, cx);
                        gs_cubic_coeffs(fy - y0, cy);
                        v = 0;
                        for (int a = 0; a < 4; a++) {
                            double row = 0;
                            for (int b = 0; b < 4; b++)
                                row += cx[b] * gs_pixel(&p, iy - 1 + a, ix - 1 + b);
                            v += cy[a] * row;
                        }
                    }
                    sn_st_f64(y->dtype, y->data, ((n * C + ch) * OH + oy) * OW + ox, v);
                }
            }
    return SNUG_OK;
}

/* ---- the family table ------------------------------------------------------------- */

/* ---- AffineGrid (20) ---------------------------------------------------------------------------
 * theta [N,2,3] (2-D) or [N,3,4] (3-D), size [N,C,H,W] or [N,C,D,H,W] ->
 * grid [N,H,W,2] or [N,D,H,W,3]: theta applied to the normalized base
 * coordinates (x, y[, z], 1) of each output pixel. */

int nn_affg_infer(sn_infer_ctx *c) {
    const sn_tensor *th = sn_in(c->in, c->n_in, 0), *sz = sn_in(c->in, c->n_in, 1);
    if (!th || !sz)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "needs inputs theta and size");
    if (!sn_dtype_is_real(th->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "theta must be a float tensor");
    if (sz->dtype != SN_I64 || sz->rank != 1)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "size must be a 1-D int64 tensor");
    if (!sn_dim_known(sz->dims[0])) {
        sn_set_out(c->out[0], th->dtype, SN_RANK_UNKNOWN, NULL);
        return SNUG_OK;
    }
    int64_t r = sz->dims[0];
    if (r != 4 && r != 5)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "size must have 4 (2-D) or 5 (3-D) values");
    int nd = (int)r - 2;
    if (th->rank >= 0 && (th->rank != 3 || (sn_dim_known(th->dims[1]) && th->dims[1] != nd) ||
                          (sn_dim_known(th->dims[2]) && th->dims[2] != nd + 1)))
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "theta must be [N, %d, %d]", nd, nd + 1);
    int64_t s[5], d[5];
    bool known = sn_input_shape(sz, s) == r;
    d[0] = known ? s[0] : th->rank == 3 ? th->dims[0] : SN_DIM_UNKNOWN;
    for (int i = 0; i < nd; i++)
        d[1 + i] = known ? s[2 + i] : SN_DIM_UNKNOWN;
    d[1 + nd] = nd;
    if (known) {
        for (int i = 0; i < (int)r; i++)
            if (s[i] < 0)
                return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "negative size");
        if (th->rank == 3 && sn_dim_known(th->dims[0]) && th->dims[0] != s[0])
            return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "theta batch %lld differs from size N %lld",
                            (long long)th->dims[0], (long long)s[0]);
    }
    sn_set_out(c->out[0], th->dtype, nd + 2, d);
    return SNUG_OK;
}

/* Normalized coordinate of pixel i of n. */
static inline double affg_base(int64_t i, int64_t n, bool ac) {
    if (ac)
        return n > 1 ? -1.0 + 2.0 * (double)i / (double)(n - 1) : -1.0;
    return -1.0 + (2.0 * (double)i + 1.0) / (double)n;
}

int nn_affg_run(sn_kctx *c) {
    const sn_tensor *th = c->in[0];
    sn_tensor *y = c->out[0];
    bool ac = sn_attr_int(c->node, "align_corners", 0) != 0;
    int nd = y->rank - 2;
    int64_t N = y->dims[0], D = nd == 3 ? y->dims[1] : 1, H = y->dims[nd == 3 ? 2 : 1], W = y->dims[nd];
    int64_t o = 0;
    for (int64_t n = 0; n < N; n++) {
        double t[12];
        for (int i = 0; i < nd * (nd + 1); i++)
            t[i] = sn_ld_f64(th->dtype, th->data, n * nd * (nd + 1) + i);
        for (int64_t dz = 0; dz < D; dz++)
            for (int64_t hy = 0; hy < H; hy++)
                for (int64_t wx = 0; wx < W; wx++) {
                    double b[4] = {affg_base(wx, W, ac), affg_base(hy, H, ac), 0, 1};
                    if (nd == 3)
                        b[2] = affg_base(dz, D, ac);
                    else
                        b[2] = 1;
                    for (int r = 0; r < nd; r++) {
                        double s = 0;
                        for (int k = 0; k <= nd; k++)
                            s += t[r * (nd + 1) + k] * b[k];
                        sn_st_f64(y->dtype, y->data, o++, s);
                    }
                }
    }
    return SNUG_OK;
}
