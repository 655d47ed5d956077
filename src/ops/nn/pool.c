/* Pooling: AveragePool, MaxPool (with Indices), LpPool, GlobalAveragePool,
 * GlobalMaxPool, GlobalLpPool, MaxUnpool.
 *
 * Windowed pools share one N-D loop over output positions of each (image,
 * channel) plane, parallel over planes. Window positions outside the input
 * are skipped; AveragePool with count_include_pad divides by the positions
 * inside input + explicit pads (not the extra ceil_mode overhang), as the
 * ONNX reference does. Values are read as double for every type (exact for
 * the 8-bit MaxPool case), float32 gets its own instantiation. */
#include <math.h>
#include <string.h>

#include "ops/nn/nn.h"

enum { POOL_AVG, POOL_MAX, POOL_LP };

typedef struct pool_shape {
    nn_geo g;
    int64_t N, C, insz, outsz, ksz;
    bool ceil_mode, count_pad;
    int storage_order;
    double p; /* LpPool */
} pool_shape;

static int pool_shape_make(const sn_node *node, sn_err *err, const sn_tensor *x, int kind, pool_shape *s,
                           int64_t *ydims) {
    memset(s, 0, sizeof *s);
    if (x->rank < 3)
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "X must have rank >= 3, got %d", x->rank);
    int nd = x->rank - 2;
    SN_TRY(nn_geo_attrs(node, err, nd, NULL, &s->g));
    s->ceil_mode = sn_attr_int(node, "ceil_mode", 0) != 0;
    s->count_pad = sn_attr_int(node, "count_include_pad", 0) != 0;
    s->storage_order = (int)sn_attr_int(node, "storage_order", 0);
    if (kind == POOL_LP) {
        const sn_attr *a = sn_attr_get(node, "p");
        s->p = !a ? 2.0 : a->type == SN_ATTR_FLOAT ? a->f : (double)a->i;
        if (!(s->p > 0))
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "p must be positive");
    }
    for (int i = 0; i < nd; i++) {
        s->g.in[i] = x->dims[2 + i];
        if (s->g.auto_pad == NN_PAD_NOTSET && (s->g.pb[i] >= (s->g.k[i] - 1) * s->g.d[i] + 1 ||
                                               s->g.pe[i] >= (s->g.k[i] - 1) * s->g.d[i] + 1))
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "pads must be smaller than the kernel");
    }
    SN_TRY(nn_geo_output(node, err, &s->g, s->ceil_mode));
    s->N = x->dims[0];
    s->C = x->dims[1];
    s->insz = s->outsz = s->ksz = 1;
    for (int i = 0; i < nd; i++) {
        s->insz = sn_dim_known(s->g.in[i]) && s->insz >= 0 ? s->insz * s->g.in[i] : -1;
        s->outsz = sn_dim_known(s->g.out[i]) && s->outsz >= 0 ? s->outsz * s->g.out[i] : -1;
        s->ksz *= s->g.k[i];
    }
    ydims[0] = s->N;
    ydims[1] = s->C;
    for (int i = 0; i < nd; i++)
        ydims[2 + i] = s->g.out[i];
    return SNUG_OK;
}

static bool pool_dtype_ok(sn_dtype t, int kind) {
    if (t == SN_F32 || t == SN_F64 || t == SN_F16 || t == SN_BF16)
        return true;
    return kind == POOL_MAX && (t == SN_U8 || t == SN_I8);
}

static int pool_infer_common(sn_infer_ctx *c, int kind) {
    const sn_tensor *x = sn_in(c->in, c->n_in, 0);
    if (!x)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "needs input X");
    if (!pool_dtype_ok(x->dtype, kind))
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "type %s not supported", sn_dtype_name(x->dtype));
    sn_tensor *ind = c->n_out > 1 ? c->out[1] : NULL;
    if (ind && kind != POOL_MAX)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "only MaxPool has a second output");
    if (x->rank == SN_RANK_UNKNOWN) {
        sn_set_out(c->out[0], x->dtype, SN_RANK_UNKNOWN, NULL);
        sn_set_out(ind, SN_I64, SN_RANK_UNKNOWN, NULL);
        return SNUG_OK;
    }
    pool_shape s;
    int64_t yd[SN_MAX_RANK];
    SN_TRY(pool_shape_make(c->node, c->err, x, kind, &s, yd));
    sn_set_out(c->out[0], x->dtype, x->rank, yd);
    sn_set_out(ind, SN_I64, x->rank, yd);
    return SNUG_OK;
}

int nn_avgpool_infer(sn_infer_ctx *c) { return pool_infer_common(c, POOL_AVG); }
int nn_maxpool_infer(sn_infer_ctx *c) { return pool_infer_common(c, POOL_MAX); }
int nn_lppool_infer(sn_infer_ctx *c) { return pool_infer_common(c, POOL_LP); }

typedef struct pool_job {
    const pool_shape *s;
    int kind;
    sn_dtype t;
    const void *x;
    void *y;
    int64_t *ind; /* MaxPool Indices, or NULL */
} pool_job;

static inline double ld_f32(sn_dtype t, const void *p, int64_t i) {
    (void)t;
    return ((const float *)p)[i];
}
static inline void st_f32(sn_dtype t, void *p, int64_t i, double v) {
    (void)t;
    ((float *)p)[i] = (float)v;
}

/* One plane range [q0, q1) of planes (n*C + c). LD/ST read and write. */
#define POOL_PLANES(NAME, LD, ST)                                                              \
    static void NAME(void *arg, int64_t q0, int64_t q1) {                                      \
        const pool_job *j = arg;                                                               \
        const pool_shape *s = j->s;                                                            \
        const nn_geo *g = &s->g;                                                               \
        int nd = g->nd;                                                                        \
        int64_t rstr[SN_MAX_RANK]; /* column-major spatial strides (storage_order 1) */        \
        int64_t acc_s = 1;                                                                     \
        for (int d = 0; d < nd; d++) {                                                         \
            rstr[d] = acc_s;                                                                   \
            acc_s *= g->in[d];                                                                 \
        }                                                                                      \
        for (int64_t q = q0; q < q1; q++) {                                                    \
            int64_t xb = q * s->insz;                                                          \
            int64_t oi[SN_MAX_RANK] = {0};                                                     \
            for (int64_t o = 0; o < s->outsz; o++) {                                           \
                int64_t st[SN_MAX_RANK], kk[SN_MAX_RANK] = {0};                                \
                for (int d = 0; d < nd; d++)                                                   \
                    st[d] = oi[d] * g->s[d] - g->pb[d];                                        \
                double acc = j->kind == POOL_MAX ? -INFINITY : 0.0;                            \
                int64_t best = -1, cnt = 0, cnt_pad = 0;                                       \
                for (int64_t kr = 0; kr < s->ksz; kr++) {                                      \
                    bool in = true, inpad = true;                                              \
                    int64_t off = 0, roff = 0;                                                 \
                    for (int d = 0; d < nd; d++) {                                             \
                        int64_t ip = st[d] + kk[d] * g->d[d];                                  \
                        if (ip < 0 || ip >= g->in[d])                                          \
                            in = false;                                                        \
                        if (ip >= g->in[d] + g->pe[d])                                         \
                            inpad = false;                                                     \
                        off = off * g->in[d] + ip;                                             \
                        roff += ip * rstr[d];                                                  \
                    }                                                                          \
                    for (int d = nd - 1; d >= 0; d--) { /* next kernel offset */               \
                        if (++kk[d] < g->k[d])                                                 \
                            break;                                                             \
                        kk[d] = 0;                                                             \
                    }                                                                          \
                    cnt_pad += inpad;                                                          \
                    if (!in)                                                                   \
                        continue;                                                              \
                    double v = LD(j->t, j->x, xb + off);                                       \
                    cnt++;                                                                     \
                    if (j->kind == POOL_MAX) {                                                 \
                        if (best < 0 || v > acc) { /* first maximum wins */                  \
                            acc = v;                                                           \
                            best = s->storage_order ? roff : off;                              \
                        }                                                                      \
                    } else if (j->kind == POOL_AVG) {                                          \
                        acc += v;                                                              \
                    } else {                                                                   \
                        acc += pow(fabs(v), s->p);                                             \
                    }                                                                          \
                }                                                                              \
                double r;                                                                      \
                if (j->kind == POOL_AVG)                                                       \
                    r = (s->count_pad ? cnt_pad : cnt) ? acc / (double)(s->count_pad ? cnt_pad : cnt) \
                                                       : 0.0;                                  \
                else if (j->kind == POOL_LP)                                                   \
                    r = pow(acc, 1.0 / s->p);                                                  \
                else                                                                           \
                    r = best < 0 ? 0.0 : acc;                                                  \
                int64_t yo = q * s->outsz + o;                                                 \
                ST(j->t, j->y, yo, r);                                                         \
                if (j->ind)                                                                    \
                    j->ind[yo] = xb + (best < 0 ? 0 : best);                                   \
                for (int d = nd - 1; d >= 0; d--) { /* next output position */                 \
                    if (++oi[d] < g->out[d])                                                   \
                        break;                                                                 \
                    oi[d] = 0;                                                                 \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    }

POOL_PLANES(pool_planes_f32, ld_f32, st_f32)
POOL_PLANES(pool_planes_any, sn_ld_f64, sn_st_f64)

static int pool_run_common(sn_kctx *c, int kind) {
    const sn_tensor *x = c->in[0];
    pool_shape s;
    int64_t yd[SN_MAX_RANK];
    SN_TRY(pool_shape_make(c->node, c->err, x, kind, &s, yd));
    sn_tensor *ind = c->n_out > 1 ? c->out[1] : NULL;
    pool_job j = {&s, kind, x->dtype, x->data, c->out[0]->data, ind ? ind->data : NULL};
    int64_t planes = s.N * s.C;
    if (planes == 0 || s.outsz == 0)
        return SNUG_OK;
    int64_t grain = sn_imax(1, 16384 / sn_imax(1, s.outsz * s.ksz));
    sn_pool_for(c->pool, planes, grain, x->dtype == SN_F32 ? pool_planes_f32 : pool_planes_any, &j);
    return SNUG_OK;
}

int nn_avgpool_run(sn_kctx *c) { return pool_run_common(c, POOL_AVG); }
int nn_maxpool_run(sn_kctx *c) { return pool_run_common(c, POOL_MAX); }
int nn_lppool_run(sn_kctx *c) { return pool_run_common(c, POOL_LP); }

/* ---- global pools ------------------------------------------------------------------- */

static int gpool_infer_common(sn_infer_ctx *c, int kind) {
    const sn_tensor *x = sn_in(c->in, c->n_in, 0);
    if (!x)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "needs input X");
    if (!pool_dtype_ok(x->dtype, POOL_AVG))
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "type %s not supported", sn_dtype_name(x->dtype));
    (void)kind;
    if (x->rank == SN_RANK_UNKNOWN) {
        sn_set_out(c->out[0], x->dtype, SN_RANK_UNKNOWN, NULL);
        return SNUG_OK;
    }
    if (x->rank < 3)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "X must have rank >= 3, got %d", x->rank);
    int64_t yd[SN_MAX_RANK];
    yd[0] = x->dims[0];
    yd[1] = x->dims[1];
    for (int i = 2; i < x->rank; i++)
        yd[i] = 1;
    sn_set_out(c->out[0], x->dtype, x->rank, yd);
    return SNUG_OK;
}

typedef struct gpool_job {
    int kind;
    sn_dtype t;
    const void *x;
    void *y;
    int64_t sz;
    double p;
} gpool_job;

static void gpool_planes(void *arg, int64_t q0, int64_t q1) {
    const gpool_job *j = arg;
    for (int64_t q = q0; q < q1; q++) {
        double acc;
        if (j->t == SN_F32) {
            const float *x = (const float *)j->x + q * j->sz;
            if (j->kind == POOL_AVG) {
                float s[8] = {0}, t = 0;
                int64_t i = 0;
                for (; i + 8 <= j->sz; i += 8)
                    for (int k = 0; k < 8; k++)
                        s[k] += x[i + k];
                for (; i < j->sz; i++)
                    t += x[i];
                acc = (double)(s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7]) + t;
            } else if (j->kind == POOL_MAX) {
                float m = -INFINITY;
                for (int64_t i = 0; i < j->sz; i++)
                    m = x[i] > m ? x[i] : m;
                acc = m;
            } else {
                acc = 0;
                for (int64_t i = 0; i < j->sz; i++)
                    acc += pow(fabs((double)x[i]), j->p);
            }
        } else {
            acc = j->kind == POOL_MAX ? -INFINITY : 0.0;
            for (int64_t i = 0; i < j->sz; i++) {
                double v = sn_load_f64(j->t, j->x, (size_t)(q * j->sz + i));
                if (j->kind == POOL_MAX)
                    acc = v > acc ? v : acc;
                else if (j->kind == POOL_AVG)
                    acc += v;
                else
                    acc += pow(fabs(v), j->p);
            }
        }
        if (j->kind == POOL_AVG)
            acc = j->sz ? acc / (double)j->sz : NAN;
        else if (j->kind == POOL_LP)
            acc = pow(acc, 1.0 / j->p);
        sn_store_f64(j->t, j->y, (size_t)q, acc);
    }
}

static int gpool_run_common(sn_kctx *c, int kind) {
    const sn_tensor *x = c->in[0];
    gpool_job j = {kind, x->dtype, x->data, c->out[0]->data, 1, 2.0};
    for (int i = 2; i < x->rank; i++)
        j.sz *= x->dims[i];
    if (kind == POOL_LP) {
        const sn_attr *a = sn_attr_get(c->node, "p");
        j.p = !a ? 2.0 : a->type == SN_ATTR_FLOAT ? a->f : (double)a->i;
    }
    int64_t planes = x->dims[0] * x->dims[1];
    sn_pool_for(c->pool, planes, sn_imax(1, 16384 / sn_imax(1, j.sz)), gpool_planes, &j);
    return SNUG_OK;
}

int nn_gavg_infer(sn_infer_ctx *c) { return gpool_infer_common(c, POOL_AVG); }
int nn_gmax_infer(sn_infer_ctx *c) { return gpool_infer_common(c, POOL_MAX); }
int nn_glp_infer(sn_infer_ctx *c) { return gpool_infer_common(c, POOL_LP); }
int nn_gavg_run(sn_kctx *c) { return gpool_run_common(c, POOL_AVG); }
int nn_gmax_run(sn_kctx *c) { return gpool_run_common(c, POOL_MAX); }
int nn_glp_run(sn_kctx *c) { return gpool_run_common(c, POOL_LP); }

/* ---- MaxUnpool ---------------------------------------------------------------------------- */

/* The shape MaxPool's input had: (in - 1) * s - pb - pe + k per spatial dim. */
static int unpool_shape(const sn_node *node, sn_err *err, const sn_tensor *x, nn_geo *g, int64_t *inf) {
    if (x->rank < 3)
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "X must have rank >= 3, got %d", x->rank);
    int nd = x->rank - 2;
    SN_TRY(nn_geo_attrs(node, err, nd, NULL, g));
    inf[0] = x->dims[0];
    inf[1] = x->dims[1];
    for (int i = 0; i < nd; i++) {
        int64_t in = x->dims[2 + i];
        inf[2 + i] = sn_dim_known(in) ? (in - 1) * g->s[i] - g->pb[i] - g->pe[i] + g->k[i] : SN_DIM_UNKNOWN;
        if (sn_dim_known(in) && inf[2 + i] < 0)
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "negative output size in spatial dim %d", i);
    }
    return SNUG_OK;
}

int nn_unpool_infer(sn_infer_ctx *c) {
    const sn_tensor *x = sn_in(c->in, c->n_in, 0), *ind = sn_in(c->in, c->n_in, 1);
    const sn_tensor *os = sn_in(c->in, c->n_in, 2);
    if (!x || !ind)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "needs inputs X and I");
    if (ind->dtype != SN_I64)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "I must be int64");
    if (x->rank == SN_RANK_UNKNOWN) {
        sn_set_out(c->out[0], x->dtype, SN_RANK_UNKNOWN, NULL);
        return SNUG_OK;
    }
    nn_geo g;
    int64_t inf[SN_MAX_RANK];
    SN_TRY(unpool_shape(c->node, c->err, x, &g, inf));
    if (os) {
        int64_t v[SN_MAX_RANK];
        int n = sn_input_ints(os, v, SN_MAX_RANK);
        if (n >= 0 && n != x->rank)
            return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "output_shape has %d values for rank %d", n, x->rank);
        for (int i = 0; i < x->rank; i++)
            inf[i] = n >= 0 ? v[i] : SN_DIM_UNKNOWN;
    }
    sn_set_out(c->out[0], x->dtype, x->rank, inf);
    return SNUG_OK;
}

int nn_unpool_run(sn_kctx *c) {
    const sn_tensor *x = c->in[0], *ind = c->in[1];
    sn_tensor *y = c->out[0];
    nn_geo g;
    int64_t inf[SN_MAX_RANK];
    SN_TRY(unpool_shape(c->node, c->err, x, &g, inf));
    int r = x->rank;
    int64_t n_inf = 1;
    for (int i = 0; i < r; i++)
        n_inf *= inf[i];
    int64_t nx = sn_in_numel(x);
    if (sn_in_numel(ind) != nx)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "I has %lld elements, X has %lld",
                        (long long)sn_in_numel(ind), (long long)nx);
    size_t es = sn_dtype_size(x->dtype);
    memset(y->data, 0, sn_tensor_nbytes(y));
    const int64_t *I = ind->data;
    for (int64_t j = 0; j < nx; j++) {
        int64_t idx = I[j];
        if (idx < 0 || idx >= n_inf)
            return sn_kfail(c->err, c->node, SNUG_ERR_RANGE, "index %lld out of range [0, %lld)", (long long)idx,
                            (long long)n_inf);
        /* indices address the inferred shape; place into the output's corner */
        int64_t yo = 0, mul = 1, t = idx;
        bool inside = true;
        for (int d = r - 1; d >= 0; d--) {
            int64_t id = t % inf[d];
            t /= inf[d];
            if (id >= y->dims[d])
                inside = false;
            yo += id * mul;
            mul *= y->dims[d];
        }
        if (inside)
            memcpy((char *)y->data + (size_t)yo * es, (const char *)x->data + (size_t)j * es, es);
    }
    return SNUG_OK;
}
