/* Col2Im (18): input [N, C * prod(block), L] -> [N, C, image...], summing
 * the blocks where they overlap (the inverse of im2col). */
#include <string.h>

#include "ops/nn/nn.h"

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
        if (g->dil[i] < 1 || g->str[i] < 1 || g->pb[i] < 0 || g->pe[i] < 0 || g->dil[i] > NN_ATTR_MAX ||
            g->str[i] > NN_ATTR_MAX || g->pb[i] > NN_ATTR_MAX || g->pe[i] > NN_ATTR_MAX)
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "dilations, strides or pads out of range");
    return SNUG_OK;
}

/* Checks the data-dependent geometry: x [N, C*bl, L]. */
static int c2i_check(const sn_node *node, sn_err *err, const sn_tensor *x, c2i_geo *g) {
    g->bl = 1;
    g->L = 1;
    for (int i = 0; i < g->nd; i++) {
        if (g->img[i] < 0 || g->blk[i] < 1 || g->img[i] > NN_ATTR_MAX || g->blk[i] > NN_ATTR_MAX)
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "image_shape or block_shape out of range");
        int64_t span = g->dil[i] * (g->blk[i] - 1) + 1;
        int64_t room = g->img[i] + g->pb[i] + g->pe[i] - span;
        if (room < 0)
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "block %d does not fit the padded image", i);
        g->cols[i] = room / g->str[i] + 1;
        if (!sn_dim_mul(&g->bl, g->blk[i]) || !sn_dim_mul(&g->L, g->cols[i]))
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "block or column count overflows");
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

int nn_c2i_infer(sn_infer_ctx *c) {
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
    if (sn_input_shape(is, g.img) == nd) {
        for (int i = 0; i < nd; i++)
            d[2 + i] = g.img[i];
        if (sn_input_shape(bs, g.blk) == nd && x->rank == 3) {
            SN_TRY(c2i_check(c->node, c->err, x, &g));
            d[1] = g.C;
        }
    }
    sn_set_out(c->out[0], x->dtype, nd + 2, d);
    return SNUG_OK;
}

int nn_c2i_run(sn_kctx *c) {
    const sn_tensor *x = c->in[0];
    sn_tensor *y = c->out[0];
    int nd = (int)c->in[1]->dims[0];
    c2i_geo g;
    SN_TRY(c2i_attrs(c->node, c->err, nd, &g));
    sn_input_shape(c->in[1], g.img);
    sn_input_shape(c->in[2], g.blk);
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
