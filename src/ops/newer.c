/* Newer-opset family: LpNormalization, Swish, CenterCropPad, Col2Im,
 * AffineGrid, TensorScatter, DeformConv here; the text ops (StringConcat,
 * StringSplit, RegexFullMatch) in newer_text.c and the ai.onnx.ml ops
 * (Binarizer, ArrayFeatureExtractor, LabelEncoder, TreeEnsemble) in
 * newer_ml.c. The family's table is at the end of this file. */
#include <math.h>
#include <string.h>

#include "ops/elementwise/elementwise.h"
#include "ops/newer.h"

/* Shape-like input as int64 values (at most SN_MAX_RANK); -1 when the data
 * is not known yet. */
static int shape_input(const sn_tensor *t, int64_t *v) {
    if (!t || !t->data || (t->dtype != SN_I64 && t->dtype != SN_I32) || t->rank != 1 ||
        t->dims[0] > SN_MAX_RANK)
        return -1;
    return sn_input_ints(t, v, SN_MAX_RANK);
}

/* ---- LpNormalization (1, 22) ------------------------------------------------------------
 * y = x / ||x||_p along axis (p 1 or 2). A zero norm gives NaN, as 0/0 does
 * in the reference. */

static int lpnorm_infer(sn_infer_ctx *c) {
    const sn_tensor *x = sn_in(c->in, c->n_in, 0);
    if (!x)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "input is missing");
    if (!sn_dtype_is_real(x->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "input must be a float tensor, is %s",
                        sn_dtype_name(x->dtype));
    int64_t p = sn_attr_int(c->node, "p", 2);
    if (p != 1 && p != 2)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "p must be 1 or 2, is %lld", (long long)p);
    int axis;
    if (x->rank >= 0 && !sn_axis_norm(sn_attr_int(c->node, "axis", -1), x->rank, &axis))
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "axis out of range for rank %d", x->rank);
    sn_set_out(c->out[0], x->dtype, x->rank, x->dims);
    return SNUG_OK;
}

static int lpnorm_run(sn_kctx *c) {
    const sn_tensor *x = c->in[0];
    sn_tensor *y = c->out[0];
    int axis = 0;
    sn_axis_norm(sn_attr_int(c->node, "axis", -1), x->rank, &axis);
    bool l1 = sn_attr_int(c->node, "p", 2) == 1;
    int64_t outer = 1, A = x->dims[axis], inner = 1;
    for (int i = 0; i < axis; i++)
        outer *= x->dims[i];
    for (int i = axis + 1; i < x->rank; i++)
        inner *= x->dims[i];
    sn_dtype t = x->dtype;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            int64_t base = o * A * inner + in;
            double s = 0;
            for (int64_t a = 0; a < A; a++) {
                double v = sn_ld_f64(t, x->data, base + a * inner);
                s += l1 ? fabs(v) : v * v;
            }
            double norm = l1 ? s : sqrt(s);
            for (int64_t a = 0; a < A; a++)
                sn_st_f64(t, y->data, base + a * inner, sn_ld_f64(t, x->data, base + a * inner) / norm);
        }
    return SNUG_OK;
}

/* ---- Swish (24) ----------------------------------------------------------------------------
 * y = x * sigmoid(alpha * x). */

static int swish_infer(sn_infer_ctx *c) {
    const sn_tensor *x = sn_in(c->in, c->n_in, 0);
    if (!x)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "input is missing");
    if (!sn_dtype_is_real(x->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "input must be a float tensor, is %s",
                        sn_dtype_name(x->dtype));
    sn_set_out(c->out[0], x->dtype, x->rank, x->dims);
    return SNUG_OK;
}

static int swish_run(sn_kctx *c) {
    const sn_tensor *x = c->in[0];
    sn_tensor *y = c->out[0];
    float alpha = sn_attr_float(c->node, "alpha", 1.0f);
    int64_t n = sn_tensor_numel(x);
    if (x->dtype == SN_F32) {
        const float *X = x->data;
        float *Y = y->data;
        for (int64_t i = 0; i < n; i++)
            Y[i] = X[i] / (1.0f + expf(-alpha * X[i]));
        return SNUG_OK;
    }
    for (int64_t i = 0; i < n; i++) {
        double v = sn_ld_f64(x->dtype, x->data, i);
        sn_st_f64(y->dtype, y->data, i, v / (1.0 + exp(-(double)alpha * v)));
    }
    return SNUG_OK;
}

/* ---- CenterCropPad (18) ----------------------------------------------------------------------
 * Each listed axis is cropped (centered, the extra element at the end) or
 * zero-padded (likewise) to the size in `shape`. */

typedef struct ccp_geo {
    int64_t out[SN_MAX_RANK];
    int64_t shift[SN_MAX_RANK]; /* source index = output index + shift */
} ccp_geo;

/* Fills g from x's shape and the target sizes; returns a status. known:
 * whether the shape input's data is available. */
static int ccp_geometry(const sn_node *node, sn_err *err, const sn_tensor *x, const sn_tensor *shape,
                        ccp_geo *g, bool *known) {
    int64_t sizes[SN_MAX_RANK];
    int ns = shape_input(shape, sizes);
    const int64_t *axes_attr;
    int na = sn_attr_ints(node, "axes", &axes_attr);
    int axes[SN_MAX_RANK];
    if (na < 0) {
        na = x->rank;
        for (int i = 0; i < na; i++)
            axes[i] = i;
    } else {
        if (na > x->rank)
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "%d axes for rank %d", na, x->rank);
        for (int i = 0; i < na; i++) {
            if (!sn_axis_norm(axes_attr[i], x->rank, &axes[i]))
                return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "axis %lld out of range for rank %d",
                                (long long)axes_attr[i], x->rank);
            for (int j = 0; j < i; j++)
                if (axes[j] == axes[i])
                    return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "axis %d repeated", axes[i]);
        }
    }
    if (shape->rank != 1 || (sn_dim_known(shape->dims[0]) && shape->dims[0] != na))
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "shape must be 1-D with one value per axis (%d)", na);
    for (int i = 0; i < x->rank; i++) {
        g->out[i] = x->dims[i];
        g->shift[i] = 0;
    }
    *known = ns == na;
    for (int k = 0; k < na; k++) {
        int a = axes[k];
        if (!*known) {
            g->out[a] = SN_DIM_UNKNOWN;
            continue;
        }
        if (sizes[k] < 0)
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "negative target size %lld", (long long)sizes[k]);
        g->out[a] = sizes[k];
        /* crop: start at (dim - size) / 2; pad: (size - dim) / 2 zeros
         * before, i.e. a negative shift; the odd element goes at the end */
        if (sn_dim_known(x->dims[a]))
            g->shift[a] = x->dims[a] >= sizes[k] ? (x->dims[a] - sizes[k]) / 2 : -((sizes[k] - x->dims[a]) / 2);
    }
    return SNUG_OK;
}

static int ccp_infer(sn_infer_ctx *c) {
    const sn_tensor *x = sn_in(c->in, c->n_in, 0), *shape = sn_in(c->in, c->n_in, 1);
    if (!x || !shape)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "needs inputs input_data and shape");
    if (shape->dtype != SN_I64 && shape->dtype != SN_I32)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "shape must be int32 or int64");
    if (sn_dtype_nbytes(x->dtype, 2) != 2 * sn_dtype_size(x->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "type %s not supported", sn_dtype_name(x->dtype));
    if (x->rank < 0) {
        sn_set_out(c->out[0], x->dtype, SN_RANK_UNKNOWN, NULL);
        return SNUG_OK;
    }
    ccp_geo g;
    bool known;
    SN_TRY(ccp_geometry(c->node, c->err, x, shape, &g, &known));
    sn_set_out(c->out[0], x->dtype, x->rank, g.out);
    return SNUG_OK;
}

static int ccp_run(sn_kctx *c) {
    const sn_tensor *x = c->in[0];
    sn_tensor *y = c->out[0];
    ccp_geo g;
    bool known;
    SN_TRY(ccp_geometry(c->node, c->err, x, c->in[1], &g, &known));
    size_t es = sn_dtype_size(x->dtype);
    int64_t ny = sn_tensor_numel(y);
    if (ny == 0)
        return SNUG_OK;
    memset(y->data, 0, (size_t)ny * es);
    int r = x->rank;
    if (r == 0) {
        memcpy(y->data, x->data, es);
    } else {
        /* row by row along the last axis: copy the overlapping segment */
        int last = r - 1;
        int64_t OW = y->dims[last], W = x->dims[last], sh = g.shift[last];
        int64_t lo = sn_imax(0, -sh), hi = sn_imin(OW, W - sh);
        int64_t xs[SN_MAX_RANK];
        sn_strides(r, x->dims, xs);
        int64_t rows = ny / OW, idx[SN_MAX_RANK] = {0};
        for (int64_t row = 0; row < rows; row++) {
            bool inside = hi > lo;
            int64_t src = 0;
            for (int d = 0; d < last && inside; d++) {
                int64_t s = idx[d] + g.shift[d];
                inside = s >= 0 && s < x->dims[d];
                src += s * xs[d];
            }
            if (inside)
                memcpy((char *)y->data + (size_t)(row * OW + lo) * es,
                       (const char *)x->data + (size_t)(src + lo + sh) * es, (size_t)(hi - lo) * es);
            for (int d = last - 1; d >= 0; d--) {
                if (++idx[d] < y->dims[d])
                    break;
                idx[d] = 0;
            }
        }
    }
    return x->dtype == SN_STRING ? ew_strings_own(c, 0) : SNUG_OK;
}

/* ---- Col2Im (18) -------------------------------------------------------------------------------
 * input [N, C * prod(block), L] -> [N, C, image...], summing the blocks
 * where they overlap (the inverse of im2col). */

typedef struct c2i_geo {
    int nd;
    int64_t img[SN_MAX_RANK], blk[SN_MAX_RANK], cols[SN_MAX_RANK];
    int64_t dil[SN_MAX_RANK], pb[SN_MAX_RANK], pe[SN_MAX_RANK], str[SN_MAX_RANK];
    int64_t C, bl, L;
} c2i_geo;

static int c2i_attrs(const sn_node *node, sn_err *err, int nd, c2i_geo *g) {
    const int64_t *v;
    int n;
    g->nd = nd;
    for (int i = 0; i < nd; i++)
        g->dil[i] = 1, g->str[i] = 1, g->pb[i] = 0, g->pe[i] = 0;
    if ((n = sn_attr_ints(node, "dilations", &v)) >= 0) {
        if (n != nd)
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "dilations needs %d values", nd);
        memcpy(g->dil, v, (size_t)nd * sizeof *v);
    }
    if ((n = sn_attr_ints(node, "strides", &v)) >= 0) {
        if (n != nd)
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "strides needs %d values", nd);
        memcpy(g->str, v, (size_t)nd * sizeof *v);
    }
    if ((n = sn_attr_ints(node, "pads", &v)) >= 0) {
        if (n != 2 * nd)
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "pads needs %d values", 2 * nd);
        memcpy(g->pb, v, (size_t)nd * sizeof *v);
        memcpy(g->pe, v + nd, (size_t)nd * sizeof *v);
    }
    for (int i = 0; i < nd; i++)
        if (g->dil[i] < 1 || g->str[i] < 1 || g->pb[i] < 0 || g->pe[i] < 0)
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "bad dilations, strides or pads");
    return SNUG_OK;
}

/* Checks the data-dependent geometry: x [N, C*bl, L]. */
static int c2i_check(const sn_node *node, sn_err *err, const sn_tensor *x, c2i_geo *g) {
    g->bl = 1;
    g->L = 1;
    for (int i = 0; i < g->nd; i++) {
        if (g->img[i] < 0 || g->blk[i] < 1)
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "bad image_shape or block_shape");
        int64_t span = g->dil[i] * (g->blk[i] - 1) + 1;
        int64_t room = g->img[i] + g->pb[i] + g->pe[i] - span;
        if (room < 0)
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "block %d does not fit the padded image", i);
        g->cols[i] = room / g->str[i] + 1;
        g->bl *= g->blk[i];
        g->L *= g->cols[i];
    }
    if (sn_dim_known(x->dims[1]) && x->dims[1] % g->bl)
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "input dim 1 (%lld) is not a multiple of the block size %lld",
                        (long long)x->dims[1], (long long)g->bl);
    g->C = sn_dim_known(x->dims[1]) ? x->dims[1] / g->bl : SN_DIM_UNKNOWN;
    if (sn_dim_known(x->dims[2]) && x->dims[2] != g->L)
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "input has %lld blocks, the geometry gives %lld",
                        (long long)x->dims[2], (long long)g->L);
    return SNUG_OK;
}

static int c2i_infer(sn_infer_ctx *c) {
    const sn_tensor *x = sn_in(c->in, c->n_in, 0), *is = sn_in(c->in, c->n_in, 1), *bs = sn_in(c->in, c->n_in, 2);
    if (!x || !is || !bs)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "needs input, image_shape and block_shape");
    if (!sn_dtype_is_real(x->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "input must be a float tensor");
    if (x->rank >= 0 && x->rank != 3)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "input must be [N, C*prod(block_shape), L]");
    if (is->rank != 1 || !sn_dim_known(is->dims[0])) {
        sn_set_out(c->out[0], x->dtype, SN_RANK_UNKNOWN, NULL);
        return SNUG_OK;
    }
    int nd = (int)is->dims[0];
    if (nd < 1 || nd + 2 > SN_MAX_RANK)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "image_shape has %d values", nd);
    if (bs->rank != 1 || (sn_dim_known(bs->dims[0]) && bs->dims[0] != nd))
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "block_shape must have %d values", nd);
    c2i_geo g;
    SN_TRY(c2i_attrs(c->node, c->err, nd, &g));
    int64_t d[SN_MAX_RANK];
    d[0] = x->rank == 3 ? x->dims[0] : SN_DIM_UNKNOWN;
    d[1] = SN_DIM_UNKNOWN;
    for (int i = 0; i < nd; i++)
        d[2 + i] = SN_DIM_UNKNOWN;
    if (shape_input(is, g.img) == nd) {
        for (int i = 0; i < nd; i++)
            d[2 + i] = g.img[i];
        if (shape_input(bs, g.blk) == nd && x->rank == 3) {
            SN_TRY(c2i_check(c->node, c->err, x, &g));
            d[1] = g.C;
        }
    }
    sn_set_out(c->out[0], x->dtype, nd + 2, d);
    return SNUG_OK;
}

static int c2i_run(sn_kctx *c) {
    const sn_tensor *x = c->in[0];
    sn_tensor *y = c->out[0];
    int nd = (int)c->in[1]->dims[0];
    c2i_geo g;
    SN_TRY(c2i_attrs(c->node, c->err, nd, &g));
    shape_input(c->in[1], g.img);
    shape_input(c->in[2], g.blk);
    SN_TRY(c2i_check(c->node, c->err, x, &g));
    int64_t ny = sn_tensor_numel(y), img_n = 1;
    for (int i = 0; i < nd; i++)
        img_n *= g.img[i];
    for (int64_t i = 0; i < ny; i++)
        sn_st_f64(y->dtype, y->data, i, 0.0);
    int64_t planes = x->dims[0] * g.C;
    for (int64_t pl = 0; pl < planes; pl++)
        for (int64_t k = 0; k < g.bl; k++) {
            int64_t koff[SN_MAX_RANK], r = k;
            for (int i = nd - 1; i >= 0; i--) {
                koff[i] = r % g.blk[i];
                r /= g.blk[i];
            }
            const int64_t xrow = (pl * g.bl + k) * g.L;
            for (int64_t col = 0; col < g.L; col++) {
                int64_t r2 = col, yi = 0, mul = 1;
                bool inside = true;
                for (int i = nd - 1; i >= 0; i--) {
                    int64_t ci = r2 % g.cols[i];
                    r2 /= g.cols[i];
                    int64_t p = ci * g.str[i] - g.pb[i] + koff[i] * g.dil[i];
                    if (p < 0 || p >= g.img[i]) {
                        inside = false;
                        break;
                    }
                    yi += p * mul;
                    mul *= g.img[i];
                }
                if (!inside)
                    continue;
                int64_t o = pl * img_n + yi;
                sn_st_f64(y->dtype, y->data, o, sn_ld_f64(y->dtype, y->data, o) + sn_ld_f64(x->dtype, x->data, xrow + col));
            }
        }
    return SNUG_OK;
}

/* ---- AffineGrid (20) ---------------------------------------------------------------------------
 * theta [N,2,3] (2-D) or [N,3,4] (3-D), size [N,C,H,W] or [N,C,D,H,W] ->
 * grid [N,H,W,2] or [N,D,H,W,3]: theta applied to the normalized base
 * coordinates (x, y[, z], 1) of each output pixel. */

static int affg_infer(sn_infer_ctx *c) {
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
    bool known = shape_input(sz, s) == r;
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

static int affg_run(sn_kctx *c) {
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

/* ---- TensorScatter (24) ---------------------------------------------------------------------------
 * present = past with update written along axis at write_indices[batch]
 * (linear: must fit; circular: wraps modulo the axis length). Runs in
 * place when the planner lets output 0 share past_cache's buffer. */

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

/* ---- DeformConv (19, 22; 2-D) ----------------------------------------------------------------------
 * Convolution whose taps sample X bilinearly (zeros outside) at positions
 * moved by `offset` [N, offset_group*kh*kw*2, oh, ow] (dy, dx per tap) and
 * scaled by `mask` [N, offset_group*kh*kw, oh, ow]. */

typedef struct dfc_geo {
    int64_t N, C, H, W, OC, kh, kw, oh, ow;
    int64_t sh, sw, dh, dw, ph, pw, pe_h, pe_w;
    int64_t group, og;
} dfc_geo;

static int dfc_geometry(const sn_node *node, sn_err *err, const sn_tensor *x, const sn_tensor *w, dfc_geo *g) {
    const int64_t *v;
    int n;
    g->N = x->dims[0], g->C = x->dims[1], g->H = x->dims[2], g->W = x->dims[3];
    g->OC = w->dims[0];
    g->kh = w->dims[2], g->kw = w->dims[3];
    if ((n = sn_attr_ints(node, "kernel_shape", &v)) >= 0) {
        if (n != 2)
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "kernel_shape needs 2 values");
        if (sn_dim_known(g->kh) && (v[0] != g->kh || v[1] != g->kw))
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "kernel_shape differs from W's spatial dims");
        g->kh = v[0], g->kw = v[1];
    }
    g->sh = g->sw = g->dh = g->dw = 1;
    g->ph = g->pw = g->pe_h = g->pe_w = 0;
    if ((n = sn_attr_ints(node, "strides", &v)) >= 0) {
        if (n != 2)
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "strides needs 2 values");
        g->sh = v[0], g->sw = v[1];
    }
    if ((n = sn_attr_ints(node, "dilations", &v)) >= 0) {
        if (n != 2)
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "dilations needs 2 values");
        g->dh = v[0], g->dw = v[1];
    }
    if ((n = sn_attr_ints(node, "pads", &v)) >= 0) {
        if (n != 4)
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "pads needs 4 values");
        g->ph = v[0], g->pw = v[1], g->pe_h = v[2], g->pe_w = v[3];
    }
    g->group = sn_attr_int(node, "group", 1);
    g->og = sn_attr_int(node, "offset_group", 1);
    if (g->sh < 1 || g->sw < 1 || g->dh < 1 || g->dw < 1 || g->ph < 0 || g->pw < 0 || g->pe_h < 0 ||
        g->pe_w < 0 || g->group < 1 || g->og < 1)
        return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "bad strides, dilations, pads, group or offset_group");
    g->oh = g->ow = SN_DIM_UNKNOWN;
    if (sn_dim_known(g->H) && sn_dim_known(g->kh)) {
        int64_t room = g->H + g->ph + g->pe_h - ((g->kh - 1) * g->dh + 1);
        if (room < 0)
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "kernel does not fit the padded input height");
        g->oh = room / g->sh + 1;
    }
    if (sn_dim_known(g->W) && sn_dim_known(g->kw)) {
        int64_t room = g->W + g->pw + g->pe_w - ((g->kw - 1) * g->dw + 1);
        if (room < 0)
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "kernel does not fit the padded input width");
        g->ow = room / g->sw + 1;
    }
    if (sn_dim_known(g->C) && sn_dim_known(w->dims[1]) && (w->dims[1] * g->group != g->C || g->C % g->og))
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "X has %lld channels; W's dim 1 (%lld) x group (%lld) must match "
                        "and offset_group must divide it", (long long)g->C, (long long)w->dims[1], (long long)g->group);
    if (sn_dim_known(g->OC) && g->OC % g->group)
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "output channels not divisible by group");
    return SNUG_OK;
}

static int dfc_infer(sn_infer_ctx *c) {
    const sn_tensor *x = sn_in(c->in, c->n_in, 0), *w = sn_in(c->in, c->n_in, 1), *off = sn_in(c->in, c->n_in, 2);
    if (!x || !w || !off)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "needs X, W and offset");
    if (!sn_dtype_is_real(x->dtype) || w->dtype != x->dtype || off->dtype != x->dtype)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "X, W and offset must share one float type");
    for (int i = 3; i < 5; i++) {
        const sn_tensor *t = sn_in(c->in, c->n_in, i);
        if (t && t->dtype != x->dtype)
            return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "B and mask must have X's type");
    }
    if ((x->rank >= 0 && x->rank != 4) || (w->rank >= 0 && w->rank != 4))
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "only 2-D DeformConv (X [N,C,H,W]) is supported");
    if (x->rank < 0 || w->rank < 0) {
        sn_set_out(c->out[0], x->dtype, 4, NULL);
        return SNUG_OK;
    }
    dfc_geo g;
    SN_TRY(dfc_geometry(c->node, c->err, x, w, &g));
    int64_t d[4] = {g.N, g.OC, g.oh, g.ow};
    sn_set_out(c->out[0], x->dtype, 4, d);
    return SNUG_OK;
}

/* Bilinear sample of plane p (H x W) at (y, x), zero outside. */
static double dfc_sample(sn_dtype t, const void *d, int64_t base, int64_t H, int64_t W, double y, double x) {
    if (!(y > -1.0 && y < (double)H && x > -1.0 && x < (double)W))
        return 0.0;
    double y0 = floor(y), x0 = floor(x), ty = y - y0, tx = x - x0;
    int64_t iy = (int64_t)y0, ix = (int64_t)x0;
    double v = 0;
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++) {
            int64_t yy = iy + a, xx = ix + b;
            if (yy < 0 || yy >= H || xx < 0 || xx >= W)
                continue;
            v += (a ? ty : 1 - ty) * (b ? tx : 1 - tx) * sn_ld_f64(t, d, base + yy * W + xx);
        }
    return v;
}

static int dfc_run(sn_kctx *c) {
    const sn_tensor *x = c->in[0], *w = c->in[1], *off = c->in[2];
    const sn_tensor *bias = sn_in(c->in, c->n_in, 3), *mask = sn_in(c->in, c->n_in, 4);
    sn_tensor *y = c->out[0];
    dfc_geo g;
    SN_TRY(dfc_geometry(c->node, c->err, x, w, &g));
    const int64_t K = g.kh * g.kw, P = g.oh * g.ow;
    const int64_t want_off[4] = {g.N, g.og * K * 2, g.oh, g.ow};
    for (int i = 0; i < 4; i++)
        if (off->rank != 4 || off->dims[i] != want_off[i])
            return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "offset must be [%lld, %lld, %lld, %lld]",
                            (long long)want_off[0], (long long)want_off[1], (long long)want_off[2], (long long)want_off[3]);
    if (mask) {
        const int64_t want_m[4] = {g.N, g.og * K, g.oh, g.ow};
        for (int i = 0; i < 4; i++)
            if (mask->rank != 4 || mask->dims[i] != want_m[i])
                return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "mask must be [%lld, %lld, %lld, %lld]",
                                (long long)want_m[0], (long long)want_m[1], (long long)want_m[2], (long long)want_m[3]);
    }
    if (bias && sn_tensor_numel(bias) != g.OC)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "B must have %lld values", (long long)g.OC);
    const int64_t icg = g.C / g.group, ocg = g.OC / g.group, ico = g.C / g.og;
    sn_dtype t = x->dtype;
    for (int64_t n = 0; n < g.N; n++)
        for (int64_t oc = 0; oc < g.OC; oc++) {
            int64_t grp = oc / ocg;
            for (int64_t i = 0; i < g.oh; i++)
                for (int64_t j = 0; j < g.ow; j++) {
                    double acc = bias ? sn_ld_f64(t, bias->data, oc) : 0.0;
                    for (int64_t cl = 0; cl < icg; cl++) {
                        int64_t ic = grp * icg + cl, ogi = ic / ico;
                        int64_t xbase = (n * g.C + ic) * g.H * g.W;
                        for (int64_t a = 0; a < g.kh; a++)
                            for (int64_t b = 0; b < g.kw; b++) {
                                int64_t k = a * g.kw + b;
                                int64_t oi = ((n * g.og + ogi) * K + k) * 2 * P + i * g.ow + j;
                                double py = (double)(i * g.sh - g.ph + a * g.dh) + sn_ld_f64(t, off->data, oi);
                                double px = (double)(j * g.sw - g.pw + b * g.dw) + sn_ld_f64(t, off->data, oi + P);
                                double v = dfc_sample(t, x->data, xbase, g.H, g.W, py, px);
                                if (mask)
                                    v *= sn_ld_f64(t, mask->data, ((n * g.og + ogi) * K + k) * P + i * g.ow + j);
                                acc += v * sn_ld_f64(t, w->data, ((oc * icg + cl) * g.kh + a) * g.kw + b);
                            }
                    }
                    sn_st_f64(t, y->data, ((n * g.OC + oc) * g.oh + i) * g.ow + j, acc);
                }
        }
    return SNUG_OK;
}

/* ---- the family table ------------------------------------------------------------------------------ */

#define ML "ai.onnx.ml"

const sn_op_def sn_ops_newer[] = {
    {.domain = "", .name = "LpNormalization", .since_version = 1, .infer = lpnorm_infer, .cpu = {.run = lpnorm_run}},
    {.domain = "", .name = "Swish", .since_version = 24, .infer = swish_infer, .flags = SN_OP_INPLACE0,
     .cpu = {.run = swish_run}},
    {.domain = "", .name = "CenterCropPad", .since_version = 18, .infer = ccp_infer, .cpu = {.run = ccp_run}},
    {.domain = "", .name = "Col2Im", .since_version = 18, .infer = c2i_infer, .cpu = {.run = c2i_run}},
    {.domain = "", .name = "AffineGrid", .since_version = 20, .infer = affg_infer, .cpu = {.run = affg_run}},
    {.domain = "", .name = "TensorScatter", .since_version = 24, .infer = tsc_infer, .flags = SN_OP_INPLACE0,
     .cpu = {.run = tsc_run}},
    {.domain = "", .name = "DeformConv", .since_version = 19, .infer = dfc_infer, .cpu = {.run = dfc_run}},
    {.domain = "", .name = "StringConcat", .since_version = 20, .infer = nw_strconcat_infer,
     .cpu = {.run = nw_strconcat_run}},
    {.domain = "", .name = "StringSplit", .since_version = 20, .infer = nw_strsplit_infer,
     .cpu = {.run = nw_strsplit_run}},
    {.domain = "", .name = "RegexFullMatch", .since_version = 20, .infer = nw_regex_infer,
     .cpu = {.prepare = nw_regex_prepare, .run = nw_regex_run, .free_state = nw_regex_free}},
    {.domain = ML, .name = "Binarizer", .since_version = 1, .infer = nw_binarizer_infer, .flags = SN_OP_INPLACE0,
     .cpu = {.run = nw_binarizer_run}},
    {.domain = ML, .name = "ArrayFeatureExtractor", .since_version = 1, .infer = nw_afe_infer,
     .cpu = {.run = nw_afe_run}},
    {.domain = ML, .name = "LabelEncoder", .since_version = 2, .infer = nw_labelenc_infer,
     .cpu = {.prepare = nw_labelenc_prepare, .run = nw_labelenc_run, .free_state = nw_labelenc_free}},
    {.domain = ML, .name = "TreeEnsemble", .since_version = 5, .infer = nw_tree_infer,
     .cpu = {.prepare = nw_tree_prepare, .run = nw_tree_run, .free_state = nw_tree_free}},
    {0},
};
