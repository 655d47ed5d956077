/* Optimizer steps of domain ai.onnx.preview.training (opset 1): Adagrad,
 * Adam, Momentum. Inputs are R (learning rate), T (step count), then n
 * tensors of each kind (X..., G..., state...); outputs the new X... and the
 * new states, each shaped like its input. Computed in double. */
#include <math.h>
#include <string.h>

#include "ops/kit.h"

/* Common inference: groups of `k` input kinds after R and T; outputs are
 * (k - 1) kinds (every kind but G), each like the matching input. */
static int train_infer(sn_infer_ctx *c, int k) {
    if (c->n_in < 2 + k || (c->n_in - 2) % k)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "expected R, T and %d groups of n tensors, got %d inputs",
                        k, c->n_in);
    const int n = (c->n_in - 2) / k;
    for (int i = 0; i < c->n_in; i++)
        if (!c->in[i])
            return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "input %d is missing", i);
    const sn_tensor *R = c->in[0], *T = c->in[1];
    if (R->dtype != SN_F32 && R->dtype != SN_F64)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "R must be float or double");
    if (T->dtype != SN_I64)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "T must be int64");
    for (int i = 2; i < c->n_in; i++) {
        const sn_tensor *a = c->in[i], *x = c->in[2 + (i - 2) % n];
        if (a->dtype != SN_F32 && a->dtype != SN_F64)
            return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "input %d must be float or double", i);
        if (a->rank >= 0 && x->rank >= 0 && sn_tensor_shape_known(a) && sn_tensor_shape_known(x) &&
            !sn_shape_equal(a, x))
            return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "input %d's shape differs from its X's", i);
    }
    if (c->n_out > (k - 1) * n)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "%d outputs for %d tensors", c->n_out, n);
    for (int o = 0; o < c->n_out; o++) {
        if (!c->out[o])
            continue;
        /* outputs: X_new..., then each state kind (input kind 2.. of k) */
        int kind = o / n, j = o % n;
        const sn_tensor *src = c->in[2 + (kind == 0 ? 0 : kind + 1) * n + j];
        sn_set_out(c->out[o], src->dtype, src->rank, src->dims);
    }
    return SNUG_OK;
}

static int sn_adagrad_infer(sn_infer_ctx *c) { return train_infer(c, 3); }
static int sn_adam_infer(sn_infer_ctx *c) { return train_infer(c, 4); }
static int sn_momentum_infer(sn_infer_ctx *c) { return train_infer(c, 3); }

/* Element i of a float32 or float64 tensor (infer admits no other), and
 * stored back; t NULL (an absent output): nothing stored. */
static inline double ld(const sn_tensor *t, int64_t i) { return sn_ld_f64(t->dtype, t->data, i); }
static inline void st(sn_tensor *t, int64_t i, double v) {
    if (t)
        sn_st_f64(t->dtype, t->data, i, v);
}

static int train_scalars(sn_kctx *c, double *r, int64_t *t) {
    if (sn_tensor_numel(c->in[0]) != 1 || sn_tensor_numel(c->in[1]) != 1)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "R and T must be scalars");
    *r = ld(c->in[0], 0);
    *t = ((const int64_t *)c->in[1]->data)[0];
    return SNUG_OK;
}

static sn_tensor *out_at(sn_kctx *c, int o) { return o < c->n_out ? c->out[o] : NULL; }

static int sn_adagrad_run(sn_kctx *c) {
    double r = 0;
    int64_t t = 0;
    SN_TRY(train_scalars(c, &r, &t));
    const double decay = sn_attr_float(c->node, "decay_factor", 0.0f);
    const double eps = sn_attr_float(c->node, "epsilon", 1e-6f);
    const double norm = sn_attr_float(c->node, "norm_coefficient", 0.0f);
    const int n = (c->n_in - 2) / 3;
    const double rt = r / (1.0 + (double)t * decay);
    for (int j = 0; j < n; j++) {
        const sn_tensor *X = c->in[2 + j], *G = c->in[2 + n + j], *H = c->in[2 + 2 * n + j];
        sn_tensor *Xo = out_at(c, j), *Ho = out_at(c, n + j);
        const int64_t m = sn_tensor_numel(X);
        if (sn_tensor_numel(G) != m || sn_tensor_numel(H) != m)
            return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "tensor group %d has mismatched sizes", j);
        for (int64_t i = 0; i < m; i++) {
            const double x = ld(X, i), g = norm * x + ld(G, i);
            const double h = ld(H, i) + g * g;
            st(Xo, i, x - rt * g / (sqrt(h) + eps));
            st(Ho, i, h);
        }
    }
    return SNUG_OK;
}

static int sn_adam_run(sn_kctx *c) {
    double r = 0;
    int64_t t = 0;
    SN_TRY(train_scalars(c, &r, &t));
    const double alpha = sn_attr_float(c->node, "alpha", 0.9f);
    const double beta = sn_attr_float(c->node, "beta", 0.999f);
    const double eps = sn_attr_float(c->node, "epsilon", 1e-6f);
    const double norm = sn_attr_float(c->node, "norm_coefficient", 0.0f);
    const double post = sn_attr_float(c->node, "norm_coefficient_post", 0.0f);
    const int n = (c->n_in - 2) / 4;
    const double ra = t > 0 ? r * sqrt(1.0 - pow(beta, (double)t)) / (1.0 - pow(alpha, (double)t)) : r;
    for (int j = 0; j < n; j++) {
        const sn_tensor *X = c->in[2 + j], *G = c->in[2 + n + j], *V = c->in[2 + 2 * n + j],
                        *H = c->in[2 + 3 * n + j];
        sn_tensor *Xo = out_at(c, j), *Vo = out_at(c, n + j), *Ho = out_at(c, 2 * n + j);
        const int64_t m = sn_tensor_numel(X);
        if (sn_tensor_numel(G) != m || sn_tensor_numel(V) != m || sn_tensor_numel(H) != m)
            return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "tensor group %d has mismatched sizes", j);
        for (int64_t i = 0; i < m; i++) {
            const double x = ld(X, i), g = norm * x + ld(G, i);
            const double v = alpha * ld(V, i) + (1.0 - alpha) * g;
            const double h = beta * ld(H, i) + (1.0 - beta) * g * g;
            const double xn = x - ra * (v / (sqrt(h) + eps));
            st(Xo, i, (1.0 - post) * xn);
            st(Vo, i, v);
            st(Ho, i, h);
        }
    }
    return SNUG_OK;
}

static int sn_momentum_run(sn_kctx *c) {
    double r = 0;
    int64_t t = 0;
    SN_TRY(train_scalars(c, &r, &t));
    const double alpha = sn_attr_float(c->node, "alpha", 0.0f);
    const double beta = sn_attr_float(c->node, "beta", 0.0f);
    const double norm = sn_attr_float(c->node, "norm_coefficient", 0.0f);
    const char *mode = sn_attr_str(c->node, "mode", "standard");
    bool nesterov;
    if (!strcmp(mode, "standard"))
        nesterov = false;
    else if (!strcmp(mode, "nesterov"))
        nesterov = true;
    else
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "mode '%s' is not standard or nesterov", mode);
    const double badj = t > 0 ? beta : 1.0;
    const int n = (c->n_in - 2) / 3;
    for (int j = 0; j < n; j++) {
        const sn_tensor *X = c->in[2 + j], *G = c->in[2 + n + j], *V = c->in[2 + 2 * n + j];
        sn_tensor *Xo = out_at(c, j), *Vo = out_at(c, n + j);
        const int64_t m = sn_tensor_numel(X);
        if (sn_tensor_numel(G) != m || sn_tensor_numel(V) != m)
            return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "tensor group %d has mismatched sizes", j);
        for (int64_t i = 0; i < m; i++) {
            const double x = ld(X, i), g = norm * x + ld(G, i);
            const double v = alpha * ld(V, i) + badj * g;
            st(Xo, i, nesterov ? x - r * (g + alpha * v) : x - r * v);
            st(Vo, i, v);
        }
    }
    return SNUG_OK;
}

#define TRAINING "ai.onnx.preview.training"

const sn_op_def sn_ops_training[] = {
    {.domain = TRAINING, .name = "Adagrad", .since_version = 1, .required = 0x7, .infer = sn_adagrad_infer,
     .cpu = {.run = sn_adagrad_run}},
    {.domain = TRAINING, .name = "Adam", .since_version = 1, .required = 0x7, .infer = sn_adam_infer, .cpu = {.run = sn_adam_run}},
    {.domain = TRAINING, .name = "Momentum", .since_version = 1, .required = 0x7, .infer = sn_momentum_infer,
     .cpu = {.run = sn_momentum_run}},
    {0},
};
