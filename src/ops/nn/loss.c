/* Losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (12).
 *
 * input (N, C, d1..dk), target (N, d1..dk), optional weight (C).
 * loss[n,d] = -w[t] * logp[n, t, d] with t = target[n,d] (0 when t is
 * ignore_index); reduction "none" keeps the (N, d1..dk) losses, "sum" adds
 * them, "mean" divides the sum by the sum of the weights used. */
#include <math.h>
#include <string.h>

#include "ops/nn/nn.h"

typedef enum loss_red { LOSS_NONE, LOSS_SUM, LOSS_MEAN } loss_red;

static int loss_reduction(const sn_node *n, loss_red *r, sn_err *err) {
    const char *s = sn_attr_str(n, "reduction", "mean");
    if (!strcmp(s, "none"))
        *r = LOSS_NONE;
    else if (!strcmp(s, "sum"))
        *r = LOSS_SUM;
    else if (!strcmp(s, "mean"))
        *r = LOSS_MEAN;
    else
        return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "unknown reduction '%s'", s);
    return SNUG_OK;
}

int nn_loss_infer(sn_infer_ctx *c) {
    const sn_node *n = c->node;
    bool sce = !strcmp(n->p->op_type, "SoftmaxCrossEntropyLoss");
    const sn_tensor *x = sn_infer_in(c, 0);
    if (!x)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "missing input");
    const sn_tensor *t = sn_has_in(c->in, c->n_in, 1) ? c->in[1] : NULL;
    const sn_tensor *w = sn_has_in(c->in, c->n_in, 2) ? c->in[2] : NULL;
    loss_red red = LOSS_NONE;
    SN_TRY(loss_reduction(n, &red, c->err));
    if (!sn_dtype_is_real(x->dtype))
        return sn_kfail(c->err, n, SNUG_ERR_TYPE, "unsupported input type %s",
                        sn_dtype_name(x->dtype));
    if (!t)
        return sn_kfail(c->err, n, SNUG_ERR_INVALID_ARG, "missing target input");
    if (t->dtype != SN_I32 && t->dtype != SN_I64)
        return sn_kfail(c->err, n, SNUG_ERR_TYPE, "target must be int32 or int64, got %s",
                        sn_dtype_name(t->dtype));
    if (w && !sn_dtype_is_real(w->dtype))
        return sn_kfail(c->err, n, SNUG_ERR_TYPE, "weight has unsupported type %s",
                        sn_dtype_name(w->dtype));
    if (x->rank != SN_RANK_UNKNOWN) {
        if (x->rank < 2)
            return sn_kfail(c->err, n, SNUG_ERR_SHAPE, "input must have rank >= 2, got %d", x->rank);
        if (t->rank != SN_RANK_UNKNOWN) {
            if (t->rank != x->rank - 1)
                return sn_kfail(c->err, n, SNUG_ERR_SHAPE, "target rank %d, expected %d", t->rank,
                                x->rank - 1);
            for (int i = 0; i < t->rank; i++) {
                int64_t xd = x->dims[i ? i + 1 : 0], td = t->dims[i];
                if (xd >= 0 && td >= 0 && xd != td)
                    return sn_kfail(c->err, n, SNUG_ERR_SHAPE,
                                    "target dim %d is %lld, input has %lld", i, (long long)td,
                                    (long long)xd);
            }
        }
        if (w && w->rank != SN_RANK_UNKNOWN &&
            (w->rank != 1 || (w->dims[0] >= 0 && x->dims[1] >= 0 && w->dims[0] != x->dims[1])))
            return sn_kfail(c->err, n, SNUG_ERR_SHAPE, "weight must have shape (C)");
    }
    sn_tensor *y = c->out[0];
    y->kind = SN_KIND_TENSOR;
    y->dtype = x->dtype;
    if (red != LOSS_NONE) {
        y->rank = 0;
    } else if (t->rank != SN_RANK_UNKNOWN) {
        sn_set_out(y, x->dtype, t->rank, t->dims);
        if (x->rank != SN_RANK_UNKNOWN)
            for (int i = 0; i < t->rank; i++)
                if (y->dims[i] < 0 && x->dims[i ? i + 1 : 0] >= 0)
                    y->dims[i] = x->dims[i ? i + 1 : 0];
    } else if (x->rank != SN_RANK_UNKNOWN) {
        y->rank = x->rank - 1;
        for (int i = 0; i < y->rank; i++)
            y->dims[i] = x->dims[i ? i + 1 : 0];
    } else {
        y->rank = SN_RANK_UNKNOWN;
    }
    if (c->n_out > 1 && c->out[1]) {
        if (!sce)
            return sn_kfail(c->err, n, SNUG_ERR_INVALID_ARG, "too many outputs");
        sn_set_out(c->out[1], x->dtype, x->rank, x->dims);
    }
    return SNUG_OK;
}

int nn_loss_run(sn_kctx *c) {
    const sn_node *n = c->node;
    bool sce = !strcmp(n->p->op_type, "SoftmaxCrossEntropyLoss");
    const sn_tensor *x = c->in[0], *t = c->in[1];
    const sn_tensor *w = sn_has_in(c->in, c->n_in, 2) ? c->in[2] : NULL;
    sn_tensor *y = c->out[0];
    sn_tensor *lp = sce && c->n_out > 1 ? c->out[1] : NULL;
    loss_red red = LOSS_NONE;
    SN_TRY(loss_reduction(n, &red, c->err));
    bool has_ii = sn_attr_get(n, "ignore_index") != NULL;
    int64_t ii = sn_attr_int(n, "ignore_index", 0);
    int64_t N = x->dims[0], C = x->dims[1], D = sn_dims_prod(x->dims, 2, x->rank);
    if (w && sn_tensor_numel(w) != C)
        return sn_kfail(c->err, n, SNUG_ERR_SHAPE, "weight must have C=%lld elements", (long long)C);
    double sum_l = 0, sum_w = 0;
    for (int64_t b = 0; b < N; b++)
        for (int64_t d = 0; d < D; d++) {
            int64_t base = b * C * D + d; /* element (b, 0, d) */
            double m = 0, lse = 0;
            if (sce && C > 0) {
                m = sn_load_f64(x->dtype, x->data, (size_t)base);
                for (int64_t k = 1; k < C; k++) {
                    double v = sn_load_f64(x->dtype, x->data, (size_t)(base + k * D));
                    m = v > m ? v : m;
                }
                double s = 0;
                for (int64_t k = 0; k < C; k++)
                    s += exp(sn_load_f64(x->dtype, x->data, (size_t)(base + k * D)) - m);
                lse = m + log(s);
                if (lp)
                    for (int64_t k = 0; k < C; k++) {
                        size_t e = (size_t)(base + k * D);
                        sn_store_f64(lp->dtype, lp->data, e, sn_load_f64(x->dtype, x->data, e) - lse);
                    }
            }
            int64_t tv = sn_load_i64(t->dtype, t->data, (size_t)(b * D + d));
            double loss = 0, wt = 0;
            if (!(has_ii && tv == ii)) {
                if (tv < 0 || tv >= C)
                    return sn_kfail(c->err, n, SNUG_ERR_RANGE,
                                    "target value %lld out of range [0, %lld)", (long long)tv,
                                    (long long)C);
                wt = w ? sn_load_f64(w->dtype, w->data, (size_t)tv) : 1.0;
                double v = sn_load_f64(x->dtype, x->data, (size_t)(base + tv * D));
                loss = -(sce ? v - lse : v) * wt;
            }
            if (red == LOSS_NONE)
                sn_store_f64(y->dtype, y->data, (size_t)(b * D + d), loss);
            sum_l += loss;
            sum_w += wt;
        }
    if (red == LOSS_SUM)
        sn_store_f64(y->dtype, y->data, 0, sum_l);
    else if (red == LOSS_MEAN)
        sn_store_f64(y->dtype, y->data, 0, sum_l / sum_w);
    return SNUG_OK;
}
