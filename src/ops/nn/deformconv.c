/* DeformConv (19, 22; 2-D): a convolution whose taps sample X bilinearly
 * (zeros outside) at positions moved by `offset` [N, offset_group*kh*kw*2,
 * oh, ow] (dy, dx per tap) and scaled by `mask` [N, offset_group*kh*kw, oh,
 * ow]. */
#include <math.h>
#include <string.h>

#include "ops/nn/nn.h"

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
        g->pe_w < 0 || g->group < 1 || g->og < 1 || g->sh > NN_ATTR_MAX || g->sw > NN_ATTR_MAX ||
        g->dh > NN_ATTR_MAX || g->dw > NN_ATTR_MAX || g->ph > NN_ATTR_MAX || g->pw > NN_ATTR_MAX ||
        g->pe_h > NN_ATTR_MAX || g->pe_w > NN_ATTR_MAX || g->group > NN_ATTR_MAX || g->og > NN_ATTR_MAX ||
        (sn_dim_known(g->kh) && g->kh > NN_ATTR_MAX) || (sn_dim_known(g->kw) && g->kw > NN_ATTR_MAX))
        return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "strides, dilations, kernel, pads, group or offset_group out of range");
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

int nn_dfc_infer(sn_infer_ctx *c) {
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

int nn_dfc_run(sn_kctx *c) {
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
