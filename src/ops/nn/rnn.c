/* Recurrent layers: RNN, GRU, LSTM (ai.onnx, opsets 7 and 14).
 *
 * One driver serves all three. Per direction it first computes the input
 * projection of every time step at once (XW = X * W^T + biases), then walks
 * the sequence doing one small matrix product per step (H_prev * R^T) plus
 * the gate math. Everything runs on float32 contiguous buffers; float16 and
 * double tensors are converted into the workspace and back.
 *
 * Gate orders (ONNX): GRU z,r,h; LSTM i,o,f,c; LSTM peepholes P i,o,f.
 * sequence_lens: steps at t >= len[b] leave the state unchanged and write
 * zeros to Y, so Y_h holds the last valid state in both directions. */
#include <math.h>
#include <string.h>
#include <strings.h>

#include "ops/gemm.h"
#include "ops/nn/nn.h"

enum { RNN_SIMPLE, RNN_GRU, RNN_LSTM };

typedef enum act_kind {
    ACT_SIGMOID, ACT_TANH, ACT_RELU, ACT_AFFINE, ACT_LEAKYRELU, ACT_THRESHRELU,
    ACT_SCALEDTANH, ACT_HARDSIGMOID, ACT_ELU, ACT_SOFTSIGN, ACT_SOFTPLUS,
} act_kind;

typedef struct rnn_act {
    act_kind kind;
    float alpha, beta;
} rnn_act;

typedef struct rnn_cfg {
    int kind;            /* RNN_SIMPLE / RNN_GRU / RNN_LSTM */
    int G;               /* gates: 1, 3, 4 */
    int n_act;           /* activations per direction: 1, 2, 3 */
    int D;               /* directions */
    bool reverse_only;   /* direction == "reverse" */
    int layout;          /* 0: [S,B,..]; 1: [B,S,..] */
    int64_t H;           /* hidden size, -1 when not known yet */
    bool has_clip;
    float clip;
    bool lbr;            /* GRU linear_before_reset */
    bool input_forget;   /* LSTM */
    rnn_act act[2][3];
} rnn_cfg;

static const struct {
    const char *name;
    act_kind kind;
    int n_alpha, n_beta;
    float alpha, beta;
} k_acts[] = {
    {"Sigmoid", ACT_SIGMOID, 0, 0, 0, 0},
    {"Tanh", ACT_TANH, 0, 0, 0, 0},
    {"Relu", ACT_RELU, 0, 0, 0, 0},
    {"Affine", ACT_AFFINE, 1, 1, 1.0f, 0.0f},
    {"LeakyRelu", ACT_LEAKYRELU, 1, 0, 0.01f, 0},
    {"ThresholdedRelu", ACT_THRESHRELU, 1, 0, 1.0f, 0},
    {"ScaledTanh", ACT_SCALEDTANH, 1, 1, 1.0f, 1.0f},
    {"HardSigmoid", ACT_HARDSIGMOID, 1, 1, 0.2f, 0.5f},
    {"Elu", ACT_ELU, 1, 0, 1.0f, 0},
    {"Softsign", ACT_SOFTSIGN, 0, 0, 0, 0},
    {"Softplus", ACT_SOFTPLUS, 0, 0, 0, 0},
};

/* Reads the attributes into cfg; validates them. */
static int rnn_cfg_read(const sn_node *n, int kind, rnn_cfg *cfg, sn_err *err) {
    memset(cfg, 0, sizeof *cfg);
    cfg->kind = kind;
    cfg->G = kind == RNN_SIMPLE ? 1 : kind == RNN_GRU ? 3 : 4;
    cfg->n_act = kind == RNN_SIMPLE ? 1 : kind == RNN_GRU ? 2 : 3;
    const char *dir = sn_attr_str(n, "direction", "forward");
    if (!strcmp(dir, "forward"))
        cfg->D = 1;
    else if (!strcmp(dir, "reverse"))
        cfg->D = 1, cfg->reverse_only = true;
    else if (!strcmp(dir, "bidirectional"))
        cfg->D = 2;
    else
        return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "direction '%s' is not forward, reverse or bidirectional", dir);
    cfg->layout = (int)sn_attr_int(n, "layout", 0);
    if (cfg->layout != 0 && cfg->layout != 1)
        return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "layout %d is not 0 or 1", cfg->layout);
    cfg->H = sn_attr_int(n, "hidden_size", -1);
    if (sn_attr_get(n, "hidden_size") && cfg->H < 0)
        return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "hidden_size %lld is negative", (long long)cfg->H);
    if (sn_attr_get(n, "clip")) {
        cfg->has_clip = true;
        cfg->clip = sn_attr_float(n, "clip", 0);
        if (!(cfg->clip > 0))
            return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "clip must be positive, got %g", (double)cfg->clip);
    }
    cfg->lbr = sn_attr_int(n, "linear_before_reset", 0) != 0;
    cfg->input_forget = sn_attr_int(n, "input_forget", 0) != 0;

    static const act_kind defaults[3][3] = {
        {ACT_TANH}, {ACT_SIGMOID, ACT_TANH}, {ACT_SIGMOID, ACT_TANH, ACT_TANH}};
    const sn_string *names = NULL;
    const float *alphas = NULL, *betas = NULL;
    int n_names = sn_attr_strings(n, "activations", &names);
    int n_alpha = sn_attr_floats(n, "activation_alpha", &alphas);
    int n_beta = sn_attr_floats(n, "activation_beta", &betas);
    if (n_names < 0) {
        for (int d = 0; d < 2; d++)
            for (int j = 0; j < cfg->n_act; j++)
                cfg->act[d][j] = (rnn_act){defaults[kind][j], 0, 0};
        return SNUG_OK;
    }
    if (n_names != cfg->n_act && n_names != cfg->n_act * cfg->D)
        return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "%d activations given, expected %d", n_names,
                        cfg->n_act * cfg->D);
    int ia = 0, ib = 0;
    for (int k = 0; k < n_names; k++) {
        size_t a;
        for (a = 0; a < sizeof k_acts / sizeof k_acts[0]; a++)
            if (strlen(k_acts[a].name) == names[k].len &&
                !strncasecmp(k_acts[a].name, names[k].ptr, names[k].len))
                break;
        if (a == sizeof k_acts / sizeof k_acts[0])
            return sn_kfail(err, n, SNUG_ERR_UNSUPPORTED, "activation '%.*s' is not supported",
                            (int)names[k].len, names[k].ptr);
        rnn_act ac = {k_acts[a].kind, k_acts[a].alpha, k_acts[a].beta};
        /* alpha/beta lists are consumed in order by the activations that
         * take them. */
        if (k_acts[a].n_alpha && ia < n_alpha)
            ac.alpha = alphas[ia++];
        if (k_acts[a].n_beta && ib < n_beta)
            ac.beta = betas[ib++];
        cfg->act[k / cfg->n_act][k % cfg->n_act] = ac;
    }
    if (n_names == cfg->n_act)
        memcpy(cfg->act[1], cfg->act[0], sizeof cfg->act[0]);
    return SNUG_OK;
}

/* Input indices. */
enum { IN_X, IN_W, IN_R, IN_B, IN_SEQ, IN_H0, IN_C0, IN_P };

/* Checks dim d of t against want when both are known. */
static int dim_check(const sn_node *n, const sn_tensor *t, const char *what, int d, int64_t want, sn_err *err) {
    if (t->rank >= 0 && sn_dim_known(t->dims[d]) && sn_dim_known(want) && t->dims[d] != want)
        return sn_kfail(err, n, SNUG_ERR_SHAPE, "%s dim %d is %lld, expected %lld", what, d,
                        (long long)t->dims[d], (long long)want);
    return SNUG_OK;
}

static int rnn_infer(sn_infer_ctx *c, int kind) {
    rnn_cfg cfg;
    SN_TRY(rnn_cfg_read(c->node, kind, &cfg, c->err));
    const sn_tensor *X = sn_in_tensor(c->in, c->n_in, IN_X), *W = sn_in_tensor(c->in, c->n_in, IN_W),
                    *R = sn_in_tensor(c->in, c->n_in, IN_R);
    if (!X || !W || !R)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "inputs X, W and R are required");
    sn_dtype dt = X->dtype;
    if (dt != SN_F32 && dt != SN_F64 && dt != SN_F16)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "X has type %s; float, double or float16 expected",
                        sn_dtype_name(dt));
    for (int i = IN_W; i < 8; i++) {
        const sn_tensor *t = sn_in_tensor(c->in, c->n_in, i);
        if (!t || i == IN_SEQ)
            continue;
        if (t->dtype != dt)
            return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "input %d has type %s, X has %s", i,
                            sn_dtype_name(t->dtype), sn_dtype_name(dt));
    }
    const sn_tensor *seq = sn_in_tensor(c->in, c->n_in, IN_SEQ);
    if (seq && seq->dtype != SN_I32 && seq->dtype != SN_I64)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "sequence_lens has type %s; int32 expected",
                        sn_dtype_name(seq->dtype));
    if ((X->rank >= 0 && X->rank != 3) || (W->rank >= 0 && W->rank != 3) || (R->rank >= 0 && R->rank != 3))
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "X, W and R must have rank 3 (got %d, %d, %d)",
                        X->rank, W->rank, R->rank);
    int64_t H = cfg.H;
    if (H < 0 && R->rank == 3 && sn_dim_known(R->dims[2]))
        H = R->dims[2];
    int64_t S = X->rank == 3 ? X->dims[cfg.layout ? 1 : 0] : SN_DIM_UNKNOWN;
    int64_t B = X->rank == 3 ? X->dims[cfg.layout ? 0 : 1] : SN_DIM_UNKNOWN;
    int64_t I = X->rank == 3 ? X->dims[2] : SN_DIM_UNKNOWN;
    int64_t GH = H >= 0 ? cfg.G * H : SN_DIM_UNKNOWN;
    if (W->rank == 3) {
        SN_TRY(dim_check(c->node, W, "W", 0, cfg.D, c->err));
        SN_TRY(dim_check(c->node, W, "W", 1, GH, c->err));
        SN_TRY(dim_check(c->node, W, "W", 2, I, c->err));
    }
    if (R->rank == 3) {
        SN_TRY(dim_check(c->node, R, "R", 0, cfg.D, c->err));
        SN_TRY(dim_check(c->node, R, "R", 1, GH, c->err));
        SN_TRY(dim_check(c->node, R, "R", 2, H, c->err));
    }
    const sn_tensor *Bt = sn_in_tensor(c->in, c->n_in, IN_B);
    if (Bt) {
        if (Bt->rank >= 0 && Bt->rank != 2)
            return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "B must have rank 2");
        if (Bt->rank == 2) {
            SN_TRY(dim_check(c->node, Bt, "B", 0, cfg.D, c->err));
            SN_TRY(dim_check(c->node, Bt, "B", 1, GH >= 0 ? 2 * GH : -1, c->err));
        }
    }
    if (seq && seq->rank >= 0) {
        if (seq->rank != 1)
            return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "sequence_lens must have rank 1");
        SN_TRY(dim_check(c->node, seq, "sequence_lens", 0, B, c->err));
    }
    for (int i = IN_H0; i <= IN_C0; i++) {
        const sn_tensor *t = sn_in_tensor(c->in, c->n_in, i);
        if (!t || (i == IN_C0 && kind != RNN_LSTM) || t->rank < 0)
            continue;
        const char *what = i == IN_H0 ? "initial_h" : "initial_c";
        if (t->rank != 3)
            return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "%s must have rank 3", what);
        SN_TRY(dim_check(c->node, t, what, cfg.layout ? 1 : 0, cfg.D, c->err));
        SN_TRY(dim_check(c->node, t, what, cfg.layout ? 0 : 1, B, c->err));
        SN_TRY(dim_check(c->node, t, what, 2, H, c->err));
    }
    const sn_tensor *P = kind == RNN_LSTM ? sn_in_tensor(c->in, c->n_in, IN_P) : NULL;
    if (P && P->rank >= 0) {
        if (P->rank != 2)
            return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "P must have rank 2");
        SN_TRY(dim_check(c->node, P, "P", 0, cfg.D, c->err));
        SN_TRY(dim_check(c->node, P, "P", 1, H >= 0 ? 3 * H : -1, c->err));
    }
    int64_t hd = H >= 0 ? H : SN_DIM_UNKNOWN;
    for (int o = 0; o < c->n_out && o < (kind == RNN_LSTM ? 3 : 2); o++) {
        sn_tensor *t = c->out[o];
        if (!t)
            continue;
        t->kind = SN_KIND_TENSOR;
        t->dtype = dt;
        if (o == 0) {
            int64_t d[4] = {S, cfg.D, B, hd};
            if (cfg.layout)
                d[0] = B, d[1] = S, d[2] = cfg.D;
            sn_tensor_set_shape(t, 4, d);
        } else {
            int64_t d[3] = {cfg.D, B, hd};
            if (cfg.layout)
                d[0] = B, d[1] = cfg.D;
            sn_tensor_set_shape(t, 3, d);
        }
    }
    return SNUG_OK;
}

/* ---- workspace layout ---------------------------------------------------- */

typedef struct rnn_dims {
    int64_t S, B, I, H, GH;
} rnn_dims;

typedef struct rnn_ws {
    size_t rt, xw, gates, h, cell, tmp;     /* float offsets */
    size_t gemm, gemm_bytes;                 /* sn_sgemm_ws scratch for X * W^T */
    size_t lens;                             /* int64[B] sequence lengths */
    size_t conv;                             /* start of conversion buffers */
    size_t total;                            /* floats */
} rnn_ws;

static size_t add_sz(size_t *acc, size_t n) {
    size_t at = *acc;
    *acc += (n + 3) & ~(size_t)3; /* keep 16-byte alignment */
    return at;
}

/* Per-tensor float counts converted when the dtype is not float32. */
static size_t rnn_conv_floats(int n_in, const sn_tensor *const *in, int n_out, const sn_tensor *const *out) {
    size_t acc = 0;
    for (int i = 0; i < n_in && i < 8; i++) {
        const sn_tensor *t = sn_in_tensor(in, n_in, i);
        if (t && i != IN_SEQ)
            add_sz(&acc, (size_t)sn_tensor_numel(t));
    }
    for (int o = 0; o < n_out && o < 3; o++)
        if (out[o])
            add_sz(&acc, (size_t)sn_tensor_numel(out[o]));
    return acc;
}

static void rnn_ws_layout(const rnn_cfg *cfg, const rnn_dims *d, size_t conv, int threads, rnn_ws *w) {
    size_t acc = 0;
    w->rt = add_sz(&acc, (size_t)(d->H * d->GH));
    w->xw = add_sz(&acc, (size_t)(d->S * d->B * d->GH));
    w->gates = add_sz(&acc, (size_t)(d->B * d->GH));
    w->h = add_sz(&acc, (size_t)(d->B * d->H));
    w->cell = add_sz(&acc, cfg->kind == RNN_LSTM ? (size_t)(d->B * d->H) : 0);
    w->tmp = add_sz(&acc, cfg->kind == RNN_GRU ? (size_t)(d->B * d->H) : 0);
    w->lens = add_sz(&acc, (size_t)(2 * d->B));
    w->gemm_bytes = sn_sgemm_workspace(d->S * d->B, d->GH, d->I, threads);
    w->gemm = add_sz(&acc, (w->gemm_bytes + sizeof(float) - 1) / sizeof(float));
    w->conv = add_sz(&acc, conv);
    w->total = acc;
}

static void rnn_dims_get(const rnn_cfg *cfg, const sn_tensor *X, const sn_tensor *R, rnn_dims *d) {
    d->S = X->dims[cfg->layout ? 1 : 0];
    d->B = X->dims[cfg->layout ? 0 : 1];
    d->I = X->dims[2];
    d->H = cfg->H >= 0 ? cfg->H : R->dims[2];
    d->GH = cfg->G * d->H;
}

static int rnn_prepare(sn_prep_ctx *c, int kind) {
    rnn_cfg cfg;
    SN_TRY(rnn_cfg_read(c->node, kind, &cfg, c->err));
    rnn_dims d;
    rnn_dims_get(&cfg, c->in[IN_X], c->in[IN_R], &d);
    size_t conv = c->in[IN_X]->dtype == SN_F32 ? 0 : rnn_conv_floats(c->n_in, c->in, c->n_out, c->out);
    rnn_ws w;
    rnn_ws_layout(&cfg, &d, conv, c->n_threads, &w);
    c->workspace = w.total * sizeof(float);
    return SNUG_OK;
}

/* ---- math ------------------------------------------------------------------ */

/* C[M,N] += A[M,K] * Bt[K,N] (row-major, leading dims given). The inner
 * loop runs over N so it vectorizes; large products split N over the pool. */
typedef struct mm_args {
    int64_t M, K, lda, ldb, ldc;
    const float *A, *Bt;
    float *C;
} mm_args;

typedef float v4f __attribute__((vector_size(16)));

static inline v4f v4_load(const float *p) {
    v4f v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Four k at a time so each C element is loaded and stored once per four
 * rows of Bt; explicit 4-lane vectors because -O2 does not vectorize the
 * plain loop. */
static void mm_cols(void *arg, int64_t j0, int64_t j1) {
    const mm_args *m = arg;
    const int64_t K = m->K, ldb = m->ldb;
    for (int64_t i = 0; i < m->M; i++) {
        float *ci = m->C + i * m->ldc;
        const float *ai = m->A + i * m->lda;
        int64_t k = 0;
        for (; k + 4 <= K; k += 4) {
            const float a0 = ai[k], a1 = ai[k + 1], a2 = ai[k + 2], a3 = ai[k + 3];
            const float *b0 = m->Bt + k * ldb, *b1 = b0 + ldb, *b2 = b1 + ldb, *b3 = b2 + ldb;
            int64_t j = j0;
            for (; j + 8 <= j1; j += 8) {
                v4f c0 = v4_load(ci + j), c1 = v4_load(ci + j + 4);
                c0 += a0 * v4_load(b0 + j);
                c1 += a0 * v4_load(b0 + j + 4);
                c0 += a1 * v4_load(b1 + j);
                c1 += a1 * v4_load(b1 + j + 4);
                c0 += a2 * v4_load(b2 + j);
                c1 += a2 * v4_load(b2 + j + 4);
                c0 += a3 * v4_load(b3 + j);
                c1 += a3 * v4_load(b3 + j + 4);
                memcpy(ci + j, &c0, sizeof c0);
                memcpy(ci + j + 4, &c1, sizeof c1);
            }
            for (; j < j1; j++)
                ci[j] += a0 * b0[j] + a1 * b1[j] + a2 * b2[j] + a3 * b3[j];
        }
        for (; k < K; k++) {
            const float a = ai[k];
            const float *bk = m->Bt + k * ldb;
            for (int64_t j = j0; j < j1; j++)
                ci[j] += a * bk[j];
        }
    }
}

static void sgemm_acc(sn_pool *pool, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                      const float *Bt, int64_t ldb, float *C, int64_t ldc) {
    mm_args m = {M, K, lda, ldb, ldc, A, Bt, C};
    if (pool && M * N * K >= ((int64_t)1 << 17))
        sn_pool_for(pool, N, 64, mm_cols, &m);
    else
        mm_cols(&m, 0, N);
}

static void act_apply(const rnn_act *a, float *x, int64_t n) {
    const float al = a->alpha, be = a->beta;
    switch (a->kind) {
    case ACT_SIGMOID:
        for (int64_t i = 0; i < n; i++)
            x[i] = 1.0f / (1.0f + expf(-x[i]));
        break;
    case ACT_TANH:
        for (int64_t i = 0; i < n; i++)
            x[i] = tanhf(x[i]);
        break;
    case ACT_RELU:
        for (int64_t i = 0; i < n; i++)
            x[i] = x[i] > 0 ? x[i] : 0;
        break;
    case ACT_AFFINE:
        for (int64_t i = 0; i < n; i++)
            x[i] = al * x[i] + be;
        break;
    case ACT_LEAKYRELU:
        for (int64_t i = 0; i < n; i++)
            x[i] = x[i] >= 0 ? x[i] : al * x[i];
        break;
    case ACT_THRESHRELU:
        for (int64_t i = 0; i < n; i++)
            x[i] = x[i] > al ? x[i] : 0;
        break;
    case ACT_SCALEDTANH:
        for (int64_t i = 0; i < n; i++)
            x[i] = al * tanhf(be * x[i]);
        break;
    case ACT_HARDSIGMOID:
        for (int64_t i = 0; i < n; i++) {
            float v = al * x[i] + be;
            x[i] = v < 0 ? 0 : v > 1 ? 1 : v;
        }
        break;
    case ACT_ELU:
        for (int64_t i = 0; i < n; i++)
            x[i] = x[i] >= 0 ? x[i] : al * (expf(x[i]) - 1.0f);
        break;
    case ACT_SOFTSIGN:
        for (int64_t i = 0; i < n; i++)
            x[i] = x[i] / (1.0f + fabsf(x[i]));
        break;
    case ACT_SOFTPLUS:
        for (int64_t i = 0; i < n; i++)
            x[i] = x[i] > 20.0f ? x[i] : log1pf(expf(x[i]));
        break;
    }
}

static void clip_apply(const rnn_cfg *cfg, float *x, int64_t n) {
    if (!cfg->has_clip)
        return;
    const float lo = -cfg->clip, hi = cfg->clip;
    for (int64_t i = 0; i < n; i++)
        x[i] = x[i] < lo ? lo : x[i] > hi ? hi : x[i];
}

/* The float32 views of every tensor the driver touches. */
typedef struct rnn_io {
    const float *X, *W, *R, *Bias, *H0, *C0, *P; /* NULL when absent */
    float *Y, *Yh, *Yc;                          /* NULL when absent */
    const int64_t *lens;                         /* per batch, clamped to [0,S] */
} rnn_io;

/* Row of X / XW for step t, batch b. */
static inline int64_t xrow(const rnn_cfg *cfg, const rnn_dims *d, int64_t t, int64_t b) {
    return cfg->layout ? b * d->S + t : t * d->B + b;
}

static void rnn_direction(const rnn_cfg *cfg, const rnn_dims *d, const rnn_io *io, int dir, float *ws,
                          const rnn_ws *w, sn_pool *pool) {
    const int64_t S = d->S, B = d->B, I = d->I, H = d->H, GH = d->GH, D = cfg->D;
    const bool reverse = cfg->reverse_only || dir == 1;
    const rnn_act *act = cfg->act[dir];
    float *Rt = ws + w->rt, *XW = ws + w->xw, *gates = ws + w->gates;
    float *h = ws + w->h, *cell = ws + w->cell, *tmp = ws + w->tmp;
    const float *Wd = io->W + dir * GH * I, *Rd = io->R + dir * GH * H;
    const float *Wb = io->Bias ? io->Bias + dir * 2 * GH : NULL, *Rb = Wb ? Wb + GH : NULL;

    /* Rt[H,GH] = R^T, so the per-step product runs along contiguous rows. */
    for (int64_t g = 0; g < GH; g++)
        for (int64_t k = 0; k < H; k++)
            Rt[k * GH + g] = Rd[g * H + k];
    /* XW = biases + X * W^T for all steps; R's bias of GRU's h gate is only
     * folded in when it is not applied inside the reset product. */
    const int64_t rows = S * B;
    for (int64_t r = 0; r < rows; r++) {
        float *xr = XW + r * GH;
        for (int64_t g = 0; g < GH; g++) {
            float v = 0;
            if (Wb) {
                v = Wb[g];
                if (!(cfg->kind == RNN_GRU && cfg->lbr && g >= 2 * H))
                    v += Rb[g];
            }
            xr[g] = v;
        }
    }
    if (rows > 0 && GH > 0)
        sn_sgemm_ws(0, 1, rows, GH, I, 1.0f, io->X, I, Wd, I, 1.0f, XW, GH, pool, ws + w->gemm, w->gemm_bytes);

    /* Initial state. */
    for (int64_t b = 0; b < B; b++) {
        int64_t off = cfg->layout ? (b * D + dir) * H : (dir * B + b) * H;
        for (int64_t j = 0; j < H; j++) {
            h[b * H + j] = io->H0 ? io->H0[off + j] : 0.0f;
            if (cfg->kind == RNN_LSTM)
                cell[b * H + j] = io->C0 ? io->C0[off + j] : 0.0f;
        }
    }
    const float *P = io->P ? io->P + dir * 3 * H : NULL;

    for (int64_t s = 0; s < S; s++) {
        const int64_t t = reverse ? S - 1 - s : s;
        /* gates = XW[t] + h * R^T (GRU: z and r gates only for now). */
        const int64_t ncols = cfg->kind == RNN_GRU ? 2 * H : GH;
        for (int64_t b = 0; b < B; b++)
            memcpy(gates + b * GH, XW + xrow(cfg, d, t, b) * GH, (size_t)GH * sizeof(float));
        sgemm_acc(pool, B, ncols, H, h, H, Rt, GH, gates, GH);
        if (cfg->kind == RNN_GRU && cfg->lbr) {
            /* tmp = h * Rh^T + Rbh, later scaled by r. */
            for (int64_t b = 0; b < B; b++)
                for (int64_t j = 0; j < H; j++)
                    tmp[b * H + j] = Rb ? Rb[2 * H + j] : 0.0f;
            sgemm_acc(pool, B, H, H, h, H, Rt + 2 * H, GH, tmp, H);
        }
        for (int64_t b = 0; b < B; b++) {
            const bool valid = t < io->lens[b];
            float *gb = gates + b * GH, *hb = h + b * H;
            if (valid) {
                if (cfg->kind == RNN_SIMPLE) {
                    clip_apply(cfg, gb, H);
                    act_apply(&act[0], gb, H);
                    memcpy(hb, gb, (size_t)H * sizeof(float));
                } else if (cfg->kind == RNN_GRU) {
                    float *z = gb, *r = gb + H, *hh = gb + 2 * H;
                    clip_apply(cfg, gb, 2 * H);
                    act_apply(&act[0], gb, 2 * H);
                    if (cfg->lbr) {
                        const float *tb = tmp + b * H;
                        for (int64_t j = 0; j < H; j++)
                            hh[j] += r[j] * tb[j];
                    } else {
                        float *tb = tmp + b * H;
                        for (int64_t j = 0; j < H; j++)
                            tb[j] = r[j] * hb[j];
                        sgemm_acc(pool, 1, H, H, tb, H, Rt + 2 * H, GH, hh, H);
                    }
                    clip_apply(cfg, hh, H);
                    act_apply(&act[1], hh, H);
                    for (int64_t j = 0; j < H; j++)
                        hb[j] = (1.0f - z[j]) * hh[j] + z[j] * hb[j];
                } else {
                    float *gi = gb, *go = gb + H, *gf = gb + 2 * H, *gc = gb + 3 * H;
                    float *cb = cell + b * H;
                    if (P)
                        for (int64_t j = 0; j < H; j++) {
                            gi[j] += P[j] * cb[j];
                            gf[j] += P[2 * H + j] * cb[j];
                        }
                    clip_apply(cfg, gi, H);
                    act_apply(&act[0], gi, H);
                    if (cfg->input_forget) {
                        for (int64_t j = 0; j < H; j++)
                            gf[j] = 1.0f - gi[j];
                    } else {
                        clip_apply(cfg, gf, H);
                        act_apply(&act[0], gf, H);
                    }
                    clip_apply(cfg, gc, H);
                    act_apply(&act[1], gc, H);
                    for (int64_t j = 0; j < H; j++)
                        cb[j] = gf[j] * cb[j] + gi[j] * gc[j];
                    if (P)
                        for (int64_t j = 0; j < H; j++)
                            go[j] += P[H + j] * cb[j];
                    clip_apply(cfg, go, H);
                    act_apply(&act[0], go, H);
                    /* reuse gc for h(C) */
                    memcpy(gc, cb, (size_t)H * sizeof(float));
                    act_apply(&act[2], gc, H);
                    for (int64_t j = 0; j < H; j++)
                        hb[j] = go[j] * gc[j];
                }
            }
            if (io->Y) {
                float *y = io->Y + (cfg->layout ? ((b * S + t) * D + dir) * H : ((t * D + dir) * B + b) * H);
                if (valid)
                    memcpy(y, hb, (size_t)H * sizeof(float));
                else
                    memset(y, 0, (size_t)H * sizeof(float));
            }
        }
    }
    for (int64_t b = 0; b < B; b++) {
        int64_t off = cfg->layout ? (b * D + dir) * H : (dir * B + b) * H;
        if (io->Yh)
            memcpy(io->Yh + off, h + b * H, (size_t)H * sizeof(float));
        if (io->Yc)
            memcpy(io->Yc + off, cell + b * H, (size_t)H * sizeof(float));
    }
}

static int rnn_run(sn_kctx *c, int kind) {
    rnn_cfg cfg;
    SN_TRY(rnn_cfg_read(c->node, kind, &cfg, c->err));
    const sn_tensor *X = c->in[IN_X];
    rnn_dims d;
    rnn_dims_get(&cfg, X, c->in[IN_R], &d);
    const sn_dtype dt = X->dtype;
    rnn_ws w;
    rnn_ws_layout(&cfg, &d, dt == SN_F32 ? 0 : rnn_conv_floats(c->n_in, c->in, c->n_out, (const sn_tensor *const *)c->out),
                  sn_pool_size(c->pool), &w);
    if (d.B == 0 || d.H == 0)
        return SNUG_OK; /* every output is empty */
    if (!c->ws)
        return sn_kfail(c->err, c->node, SNUG_ERR_INTERNAL, "workspace missing");
    float *ws = c->ws;

    int64_t *lens = (int64_t *)(ws + w.lens);
    const sn_tensor *seq = sn_in_tensor(c->in, c->n_in, IN_SEQ);
    if (seq && sn_tensor_numel(seq) != d.B)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "sequence_lens has %lld values for batch %lld",
                        (long long)sn_tensor_numel(seq), (long long)d.B);
    for (int64_t b = 0; b < d.B; b++) {
        lens[b] = seq ? sn_load_i64(seq->dtype, seq->data, (size_t)b) : d.S;
        if (lens[b] < 0 || lens[b] > d.S)
            return sn_kfail(c->err, c->node, SNUG_ERR_RANGE, "sequence_lens[%lld] = %lld is outside [0, %lld]",
                            (long long)b, (long long)lens[b], (long long)d.S);
    }

    rnn_io io = {0};
    io.lens = lens;
    const float **ins[8] = {&io.X, &io.W, &io.R, &io.Bias, NULL, &io.H0, &io.C0, &io.P};
    float **outs[3] = {&io.Y, &io.Yh, &io.Yc};
    size_t conv = w.conv;
    for (int i = 0; i < 8; i++) {
        const sn_tensor *t = sn_in_tensor(c->in, c->n_in, i);
        if (!t || !ins[i] || (kind != RNN_LSTM && (i == IN_C0 || i == IN_P)))
            continue;
        if (dt == SN_F32) {
            *ins[i] = t->data;
        } else {
            size_t n = (size_t)sn_tensor_numel(t);
            float *dst = ws + add_sz(&conv, n);
            for (size_t k = 0; k < n; k++)
                dst[k] = (float)sn_load_f64(dt, t->data, k);
            *ins[i] = dst;
        }
    }
    for (int o = 0; o < c->n_out && o < (kind == RNN_LSTM ? 3 : 2); o++) {
        sn_tensor *t = c->out[o];
        if (!t)
            continue;
        *outs[o] = dt == SN_F32 ? t->data : ws + add_sz(&conv, (size_t)sn_tensor_numel(t));
    }
    for (int dir = 0; dir < cfg.D; dir++)
        rnn_direction(&cfg, &d, &io, dir, ws, &w, c->pool);
    if (dt != SN_F32)
        for (int o = 0; o < c->n_out && o < (kind == RNN_LSTM ? 3 : 2); o++) {
            sn_tensor *t = c->out[o];
            if (!t)
                continue;
            size_t n = (size_t)sn_tensor_numel(t);
            for (size_t k = 0; k < n; k++)
                sn_store_f64(dt, t->data, k, (*outs[o])[k]);
        }
    return SNUG_OK;
}

int nn_rnn_infer_simple(sn_infer_ctx *c) { return rnn_infer(c, RNN_SIMPLE); }
int nn_rnn_infer_gru(sn_infer_ctx *c) { return rnn_infer(c, RNN_GRU); }
int nn_rnn_infer_lstm(sn_infer_ctx *c) { return rnn_infer(c, RNN_LSTM); }
int nn_rnn_prepare_simple(sn_prep_ctx *c) { return rnn_prepare(c, RNN_SIMPLE); }
int nn_rnn_prepare_gru(sn_prep_ctx *c) { return rnn_prepare(c, RNN_GRU); }
int nn_rnn_prepare_lstm(sn_prep_ctx *c) { return rnn_prepare(c, RNN_LSTM); }
int nn_rnn_run_simple(sn_kctx *c) { return rnn_run(c, RNN_SIMPLE); }
int nn_rnn_run_gru(sn_kctx *c) { return rnn_run(c, RNN_GRU); }
int nn_rnn_run_lstm(sn_kctx *c) { return rnn_run(c, RNN_LSTM); }
