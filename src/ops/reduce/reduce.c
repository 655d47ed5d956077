/* Reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare,
 * ArgMax/ArgMin, CumSum, TopK, and MeanVarianceNormalization (a reduction
 * followed by a broadcast back, so it shares the reduction plan).
 *
 * A reduction is planned by dropping size-1 dims and merging neighbouring
 * dims that are both reduced or both kept; the input is then walked once in
 * memory order, row by row over the innermost merged dim. A reduced inner
 * dim is a contiguous row folded into one accumulator; a kept inner dim is a
 * row added element-wise into a contiguous run of accumulators. Both loops
 * are contiguous, so any axis set costs about one pass over the input. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "ops/kit.h"
#include "ops/reduce/reduce_util.h"

/* ======================================================================
 * Reduction plan
 * ====================================================================== */

typedef enum red_kind {
    RK_SUM, RK_MEAN, RK_SUMSQ, RK_L1, RK_L2, RK_LOGSUM, RK_LSE, RK_PROD, RK_MAX, RK_MIN,
} red_kind;

typedef struct red_plan {
    int nd;                        /* merged dims (>= 1) */
    int64_t dims[SN_MAX_RANK];     /* merged dim sizes */
    bool red[SN_MAX_RANK];         /* merged dim is reduced */
    int64_t ostr[SN_MAX_RANK];     /* output stride of each merged dim (0: reduced) */
    int64_t n_in, n_out, n_red;    /* elements in, out, and folded into each output */
} red_plan;

/* x dims + reduced-axis mask -> plan. Dims must be concrete. */
static void red_plan_make(red_plan *p, int rank, const int64_t *dims, const bool *mask) {
    memset(p, 0, sizeof *p);
    p->n_in = 1;
    p->n_out = 1;
    p->n_red = 1;
    for (int i = 0; i < rank; i++) {
        p->n_in *= dims[i];
        if (mask[i])
            p->n_red *= dims[i];
        else
            p->n_out *= dims[i];
    }
    for (int i = 0; i < rank; i++) {
        if (dims[i] == 1)
            continue;
        if (p->nd > 0 && p->red[p->nd - 1] == mask[i]) {
            p->dims[p->nd - 1] *= dims[i];
            continue;
        }
        p->dims[p->nd] = dims[i];
        p->red[p->nd] = mask[i];
        p->nd++;
    }
    if (p->nd == 0) {
        p->nd = 1;
        p->dims[0] = 1;
        p->red[0] = false;
    }
    int64_t s = 1;
    for (int d = p->nd - 1; d >= 0; d--) {
        p->ostr[d] = p->red[d] ? 0 : s;
        if (!p->red[d])
            s *= p->dims[d];
    }
}

/* Steps the odometer over merged dims [0, nd-1) and the output offset *o. */
static inline void red_plan_next(const red_plan *p, int64_t *idx, int64_t *o) {
    for (int d = p->nd - 2; d >= 0; d--) {
        *o += p->ostr[d];
        if (++idx[d] < p->dims[d])
            return;
        *o -= p->ostr[d] * p->dims[d];
        idx[d] = 0;
    }
}

/* ======================================================================
 * Reduction engines, one per (element type, accumulator type)
 * ====================================================================== */

/* Sum of F(v) over a contiguous row, 4 independent partial sums for ILP. */
#define RED_ROW_SUM(ACC, T, LOAD, F)                                       \
    do {                                                                   \
        ACC s0_ = 0, s1_ = 0, s2_ = 0, s3_ = 0;                            \
        int64_t i_ = 0;                                                    \
        for (; i_ + 4 <= L; i_ += 4) {                                     \
            ACC v0 = LOAD(xr, i_), v1 = LOAD(xr, i_ + 1);                  \
            ACC v2 = LOAD(xr, i_ + 2), v3 = LOAD(xr, i_ + 3);              \
            s0_ += F(v0); s1_ += F(v1); s2_ += F(v2); s3_ += F(v3);        \
        }                                                                  \
        for (; i_ < L; i_++) {                                             \
            ACC v0 = LOAD(xr, i_);                                         \
            s0_ += F(v0);                                                  \
        }                                                                  \
        a += (s0_ + s1_) + (s2_ + s3_);                                    \
    } while (0)

#define RED_ID(v) (v)
#define RED_SQ(v) ((v) * (v))

/* NAME(x, acc, shift, plan, kind): folds x into acc (pre-initialized to the
 * identity). T: element type; ACC: accumulator; LOAD(x,i): element as ACC;
 * ABS/ISNAN/GT/LT: on ACC values; EXP: exp in ACC precision (floats only). */
#define RED_ENGINE(NAME, T, ACC, LOAD, ABS, ISNAN, GT, LT, EXP)                        \
    static void NAME(const void *xv, ACC *acc, const ACC *shift, const red_plan *p,   \
                     red_kind kind) {                                                 \
        const T *x = (const T *)xv;                                                   \
        const int nd = p->nd;                                                         \
        const int64_t L = p->dims[nd - 1];                                            \
        const bool inner_red = p->red[nd - 1];                                        \
        int64_t idx[SN_MAX_RANK] = {0};                                               \
        int64_t o = 0;                                                                \
        const int64_t n_rows = L ? p->n_in / L : 0;                                   \
        (void)shift;                                                                  \
        for (int64_t r = 0; r < n_rows; r++) {                                        \
            const T *xr = x + r * L;                                                  \
            if (inner_red) {                                                          \
                ACC a = acc[o];                                                       \
                switch (kind) {                                                       \
                case RK_SUM: case RK_MEAN: case RK_LOGSUM:                            \
                    RED_ROW_SUM(ACC, T, LOAD, RED_ID);                                \
                    break;                                                            \
                case RK_SUMSQ: case RK_L2:                                            \
                    RED_ROW_SUM(ACC, T, LOAD, RED_SQ);                                \
                    break;                                                            \
                case RK_L1:                                                           \
                    RED_ROW_SUM(ACC, T, LOAD, ABS);                                   \
                    break;                                                            \
                case RK_LSE: {                                                        \
                    ACC s = shift[o];                                                 \
                    for (int64_t i = 0; i < L; i++)                                   \
                        a += EXP(LOAD(xr, i) - s);                                    \
                    break;                                                            \
                }                                                                     \
                case RK_PROD:                                                         \
                    for (int64_t i = 0; i < L; i++)                                   \
                        a *= LOAD(xr, i);                                             \
                    break;                                                            \
                case RK_MAX:                                                          \
                    for (int64_t i = 0; i < L; i++) {                                 \
                        ACC v = LOAD(xr, i);                                          \
                        a = (GT(v, a) || ISNAN(v)) ? v : a;                           \
                    }                                                                 \
                    break;                                                            \
                case RK_MIN:                                                          \
                    for (int64_t i = 0; i < L; i++) {                                 \
                        ACC v = LOAD(xr, i);                                          \
                        a = (LT(v, a) || ISNAN(v)) ? v : a;                           \
                    }                                                                 \
                    break;                                                            \
                }                                                                     \
                acc[o] = a;                                                           \
            } else {                                                                  \
                ACC *ar = acc + o;                                                    \
                switch (kind) {                                                       \
                case RK_SUM: case RK_MEAN: case RK_LOGSUM:                            \
                    for (int64_t i = 0; i < L; i++)                                   \
                        ar[i] += LOAD(xr, i);                                         \
                    break;                                                            \
                case RK_SUMSQ: case RK_L2:                                            \
                    for (int64_t i = 0; i < L; i++) {                                 \
                        ACC v = LOAD(xr, i);                                          \
                        ar[i] += v * v;                                               \
                    }                                                                 \
                    break;                                                            \
                case RK_L1:                                                           \
                    for (int64_t i = 0; i < L; i++) {                                 \
                        ACC v = LOAD(xr, i);                                          \
                        ar[i] += ABS(v);                                              \
                    }                                                                 \
                    break;                                                            \
                case RK_LSE: {                                                        \
                    const ACC *sr = shift + o;                                        \
                    for (int64_t i = 0; i < L; i++)                                   \
                        ar[i] += EXP(LOAD(xr, i) - sr[i]);                            \
                    break;                                                            \
                }                                                                     \
                case RK_PROD:                                                         \
                    for (int64_t i = 0; i < L; i++)                                   \
                        ar[i] *= LOAD(xr, i);                                         \
                    break;                                                            \
                case RK_MAX:                                                          \
                    for (int64_t i = 0; i < L; i++) {                                 \
                        ACC v = LOAD(xr, i);                                          \
                        ar[i] = (GT(v, ar[i]) || ISNAN(v)) ? v : ar[i];               \
                    }                                                                 \
                    break;                                                            \
                case RK_MIN:                                                          \
                    for (int64_t i = 0; i < L; i++) {                                 \
                        ACC v = LOAD(xr, i);                                          \
                        ar[i] = (LT(v, ar[i]) || ISNAN(v)) ? v : ar[i];               \
                    }                                                                 \
                    break;                                                            \
                }                                                                     \
            }                                                                         \
            red_plan_next(p, idx, &o);                                                \
        }                                                                             \
    }

#define LD_NATIVE(x, i) ((x)[i])
#define LD_F16(x, i) sn_f16_to_f32((x)[i])
#define LD_BF16(x, i) sn_bf16_to_f32((x)[i])
#define ABS_F(v) fabsf(v)
#define ABS_D(v) fabs(v)
#define ISNAN_F(v) isnan(v)
#define GT_(a, b) ((a) > (b))
#define LT_(a, b) ((a) < (b))
#define EXP_F(v) expf(v)
#define EXP_D(v) exp(v)

RED_ENGINE(red_f32, float, float, LD_NATIVE, ABS_F, ISNAN_F, GT_, LT_, EXP_F)
RED_ENGINE(red_f16, uint16_t, float, LD_F16, ABS_F, ISNAN_F, GT_, LT_, EXP_F)
RED_ENGINE(red_bf16, uint16_t, float, LD_BF16, ABS_F, ISNAN_F, GT_, LT_, EXP_F)
RED_ENGINE(red_f64, double, double, LD_NATIVE, ABS_D, ISNAN_F, GT_, LT_, EXP_D)

/* Integers accumulate in uint64 (wrapping add/mul, no UB); signedness only
 * matters for abs and comparisons. */
#define LD_S(x, i) ((uint64_t)(int64_t)(x)[i])
#define LD_U(x, i) ((uint64_t)(x)[i])
#define ABS_S(v) ((int64_t)(v) < 0 ? 0 - (v) : (v))
#define ABS_U(v) (v)
#define ISNAN_NO(v) ((void)(v), 0)
#define GT_S(a, b) ((int64_t)(a) > (int64_t)(b))
#define LT_S(a, b) ((int64_t)(a) < (int64_t)(b))
#define EXP_NO(v) (v)

RED_ENGINE(red_i8, int8_t, uint64_t, LD_S, ABS_S, ISNAN_NO, GT_S, LT_S, EXP_NO)
RED_ENGINE(red_i16, int16_t, uint64_t, LD_S, ABS_S, ISNAN_NO, GT_S, LT_S, EXP_NO)
RED_ENGINE(red_i32, int32_t, uint64_t, LD_S, ABS_S, ISNAN_NO, GT_S, LT_S, EXP_NO)
RED_ENGINE(red_i64, int64_t, uint64_t, LD_S, ABS_S, ISNAN_NO, GT_S, LT_S, EXP_NO)
RED_ENGINE(red_u8, uint8_t, uint64_t, LD_U, ABS_U, ISNAN_NO, GT_, LT_, EXP_NO)
RED_ENGINE(red_u16, uint16_t, uint64_t, LD_U, ABS_U, ISNAN_NO, GT_, LT_, EXP_NO)
RED_ENGINE(red_u32, uint32_t, uint64_t, LD_U, ABS_U, ISNAN_NO, GT_, LT_, EXP_NO)
RED_ENGINE(red_u64, uint64_t, uint64_t, LD_U, ABS_U, ISNAN_NO, GT_, LT_, EXP_NO)

/* Integers under mean/L2/log reductions: widened to double. */
#define LD_GEN_I8(x, i) ((double)(x)[i])
RED_ENGINE(red_d_i8, int8_t, double, LD_GEN_I8, ABS_D, ISNAN_F, GT_, LT_, EXP_D)
RED_ENGINE(red_d_i16, int16_t, double, LD_GEN_I8, ABS_D, ISNAN_F, GT_, LT_, EXP_D)
RED_ENGINE(red_d_i32, int32_t, double, LD_GEN_I8, ABS_D, ISNAN_F, GT_, LT_, EXP_D)
RED_ENGINE(red_d_i64, int64_t, double, LD_GEN_I8, ABS_D, ISNAN_F, GT_, LT_, EXP_D)
RED_ENGINE(red_d_u8, uint8_t, double, LD_GEN_I8, ABS_D, ISNAN_F, GT_, LT_, EXP_D)
RED_ENGINE(red_d_u16, uint16_t, double, LD_GEN_I8, ABS_D, ISNAN_F, GT_, LT_, EXP_D)
RED_ENGINE(red_d_u32, uint32_t, double, LD_GEN_I8, ABS_D, ISNAN_F, GT_, LT_, EXP_D)
RED_ENGINE(red_d_u64, uint64_t, double, LD_GEN_I8, ABS_D, ISNAN_F, GT_, LT_, EXP_D)

/* ======================================================================
 * float32 fast paths: contiguous rows folded with the lane kernels of
 * reduce_util.h, kept inner runs combined in blocks through a local buffer
 * (both vectorize at -O2), and the two common layouts split over threads.
 * ====================================================================== */

static inline float red_row_f32(const float *x, int64_t L, red_kind k, float a) {
    switch (k) {
    case RK_SUM: case RK_MEAN: case RK_LOGSUM:
        return a + sn_red_sum_f32(x, L, 0);
    case RK_SUMSQ: case RK_L2:
        return a + sn_red_sum_f32(x, L, 1);
    case RK_L1:
        return a + sn_red_sum_f32(x, L, 2);
    case RK_MAX: {
        float m = L ? sn_red_max_f32(x, L, false) : a;
        return (m > a || isnan(m)) ? m : a;
    }
    case RK_MIN: {
        float m = L ? sn_red_max_f32(x, L, true) : a;
        return (m < a || isnan(m)) ? m : a;
    }
    default:
        return a; /* not used: other kinds take the generic engine */
    }
}

/* acc[i] = acc[i] (op) x[i] for i < n. */
static inline void red_col_f32(float *acc, const float *x, int64_t n, red_kind k) {
    float t[SN_RED_LANES];
    int64_t i = 0;
#define RED_COL_BLOCK(EXPR)                                         \
    for (; i + SN_RED_LANES <= n; i += SN_RED_LANES) {              \
        for (int j = 0; j < SN_RED_LANES; j++) {                    \
            float a = acc[i + j], v = x[i + j];                     \
            t[j] = EXPR;                                            \
        }                                                           \
        memcpy(acc + i, t, sizeof t);                               \
    }                                                               \
    for (; i < n; i++) {                                            \
        float a = acc[i], v = x[i];                                 \
        acc[i] = EXPR;                                              \
    }
    switch (k) {
    case RK_SUM: case RK_MEAN: case RK_LOGSUM:
        RED_COL_BLOCK(a + v)
        break;
    case RK_SUMSQ: case RK_L2:
        RED_COL_BLOCK(a + v * v)
        break;
    case RK_L1:
        RED_COL_BLOCK(a + fabsf(v))
        break;
    case RK_MAX:
        RED_COL_BLOCK(((v > a) | (v != v)) ? v : a)
        break;
    case RK_MIN:
        RED_COL_BLOCK(((v < a) | (v != v)) ? v : a)
        break;
    default:
        break;
    }
#undef RED_COL_BLOCK
}

typedef struct red_job {
    const float *x;
    float *acc;
    int64_t R, L; /* [kept R, reduced L] rows, or [reduced R, kept L] columns */
    red_kind k;
} red_job;

static void red_rows_job(void *arg, int64_t b, int64_t e) {
    const red_job *j = arg;
    for (int64_t r = b; r < e; r++)
        j->acc[r] = red_row_f32(j->x + r * j->L, j->L, j->k, j->acc[r]);
}

static void red_cols_job(void *arg, int64_t b, int64_t e) {
    const red_job *j = arg;
    for (int64_t r = 0; r < j->R; r++)
        red_col_f32(j->acc + b, j->x + r * j->L + b, e - b, j->k);
}

static bool red_f32_fast_kind(red_kind k) {
    return k != RK_PROD && k != RK_LSE;
}

/* Same contract as the RED_ENGINE functions, for float32 input. */
static void red_f32_fast(const void *xv, float *acc, const float *shift, const red_plan *p,
                         red_kind k, sn_pool *pool) {
    if (!red_f32_fast_kind(k)) {
        red_f32(xv, acc, shift, p, k);
        return;
    }
    const float *x = xv;
    const int nd = p->nd;
    red_job j = {x, acc, 0, p->dims[nd - 1], k};
    if (nd == 2 && !p->red[0] && p->red[1]) {
        j.R = p->dims[0];
        sn_pool_for(pool, j.R, sn_imax(1, 32768 / sn_imax(1, j.L)), red_rows_job, &j);
        return;
    }
    if ((nd == 2 && p->red[0] && !p->red[1]) || (nd == 1 && !p->red[0])) {
        j.R = nd == 2 ? p->dims[0] : 1;
        sn_pool_for(pool, j.L, sn_imax(256, 32768 / sn_imax(1, j.R)), red_cols_job, &j);
        return;
    }
    const int64_t L = p->dims[nd - 1];
    const bool inner_red = p->red[nd - 1];
    int64_t idx[SN_MAX_RANK] = {0};
    int64_t o = 0;
    const int64_t n_rows = L ? p->n_in / L : 0;
    for (int64_t r = 0; r < n_rows; r++) {
        if (inner_red)
            acc[o] = red_row_f32(x + r * L, L, k, acc[o]);
        else
            red_col_f32(acc + o, x + r * L, L, k);
        red_plan_next(p, idx, &o);
    }
}

/* ======================================================================
 * Reduce* ops
 * ====================================================================== */

static red_kind red_kind_of(const sn_node *n) {
    const char *t = n->p->op_type;
    if (!strcmp(t, "ReduceSum")) return RK_SUM;
    if (!strcmp(t, "ReduceMean")) return RK_MEAN;
    if (!strcmp(t, "ReduceSumSquare")) return RK_SUMSQ;
    if (!strcmp(t, "ReduceL1")) return RK_L1;
    if (!strcmp(t, "ReduceL2")) return RK_L2;
    if (!strcmp(t, "ReduceLogSum")) return RK_LOGSUM;
    if (!strcmp(t, "ReduceLogSumExp")) return RK_LSE;
    if (!strcmp(t, "ReduceProd")) return RK_PROD;
    if (!strcmp(t, "ReduceMax")) return RK_MAX;
    return RK_MIN;
}

/* How the accumulator is typed for a (dtype, kind). */
typedef enum red_class { RC_FLOAT, RC_DOUBLE, RC_INT, RC_BAD } red_class;

static red_class red_class_of(sn_dtype t, red_kind k) {
    switch (t) {
    case SN_F32: case SN_F16: case SN_BF16:
        return RC_FLOAT;
    case SN_F64:
        return RC_DOUBLE;
    case SN_I8: case SN_I16: case SN_I32: case SN_I64:
    case SN_U8: case SN_U16: case SN_U32: case SN_U64:
        return (k == RK_MEAN || k == RK_L2 || k == RK_LOGSUM || k == RK_LSE) ? RC_DOUBLE : RC_INT;
    case SN_BOOL:
        return (k == RK_MAX || k == RK_MIN) ? RC_INT : RC_BAD;
    default:
        return RC_BAD;
    }
}

/* The axes of a reduction: mask over x's dims. *known false when the axes
 * input's data is not available yet. */
typedef struct red_axes {
    bool known;
    bool mask[SN_MAX_RANK];
} red_axes;

static int red_resolve_axes(const sn_node *n, const sn_tensor *x, const sn_tensor *axes_in,
                            bool from_input, sn_err *err, red_axes *ra) {
    int64_t ax[64];
    int na = 0;
    ra->known = true;
    memset(ra->mask, 0, sizeof ra->mask);
    if (from_input) {
        if (axes_in) {
            if (axes_in->dtype != SN_I64 && axes_in->dtype != SN_I32)
                return sn_kfail(err, n, SNUG_ERR_TYPE, "axes must be int64, got %s",
                                sn_dtype_name(axes_in->dtype));
            if (axes_in->rank > 1)
                return sn_kfail(err, n, SNUG_ERR_SHAPE, "axes must be 1-D");
            if (!axes_in->data) {
                if (axes_in->rank == 1 && axes_in->dims[0] == 0)
                    na = 0;
                else {
                    ra->known = false;
                    return SNUG_OK;
                }
            } else {
                na = sn_input_ints(axes_in, ax, 64);
                if (na > 64)
                    return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "too many axes (%d)", na);
                if (na < 0)
                    na = 0;
            }
        }
    } else {
        const int64_t *v = NULL;
        int cnt = sn_attr_ints(n, "axes", &v);
        if (cnt > 64)
            return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "too many axes (%d)", cnt);
        for (int i = 0; i < cnt; i++)
            ax[na++] = v[i];
    }
    if (na == 0) {
        bool noop = from_input && sn_attr_int(n, "noop_with_empty_axes", 0) != 0;
        for (int i = 0; i < x->rank; i++)
            ra->mask[i] = !noop;
        return SNUG_OK;
    }
    for (int i = 0; i < na; i++) {
        int a;
        if (!sn_axis_norm(ax[i], x->rank, &a))
            return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "axis %lld out of range for rank %d",
                            (long long)ax[i], x->rank);
        ra->mask[a] = true;
    }
    return SNUG_OK;
}

static bool red_axes_from_input(const sn_node *n, red_kind k) {
    return k == RK_SUM ? n->opset >= 13 : n->opset >= 18;
}

static int red_infer(sn_infer_ctx *c) {
    const sn_node *n = c->node;
    red_kind k = red_kind_of(n);
    const sn_tensor *x = sn_infer_in(c, 0);
    if (!x)
        return sn_kfail(c->err, n, SNUG_ERR_INVALID_ARG, "missing input");
    if (red_class_of(x->dtype, k) == RC_BAD)
        return sn_kfail(c->err, n, SNUG_ERR_TYPE, "unsupported input type %s",
                        sn_dtype_name(x->dtype));
    bool keep = sn_attr_int(n, "keepdims", 1) != 0;
    bool from_input = red_axes_from_input(n, k);
    const sn_tensor *axes_in = from_input && sn_has_in(c->in, c->n_in, 1) ? c->in[1] : NULL;
    sn_tensor *y = c->out[0];
    y->kind = SN_KIND_TENSOR;
    y->dtype = x->dtype;
    if (x->rank == SN_RANK_UNKNOWN) {
        y->rank = SN_RANK_UNKNOWN;
        return SNUG_OK;
    }
    red_axes ra;
    SN_TRY(red_resolve_axes(n, x, axes_in, from_input, c->err, &ra));
    if (!ra.known) {
        if (!keep) {
            y->rank = SN_RANK_UNKNOWN;
            return SNUG_OK;
        }
        y->rank = x->rank;
        for (int i = 0; i < x->rank; i++)
            y->dims[i] = x->dims[i] == 1 ? 1 : SN_DIM_UNKNOWN;
        return SNUG_OK;
    }
    int r = 0;
    for (int i = 0; i < x->rank; i++) {
        if (!ra.mask[i])
            y->dims[r++] = x->dims[i];
        else if (keep)
            y->dims[r++] = 1;
    }
    y->rank = r;
    return SNUG_OK;
}

/* Accumulators, and the per-output shift of LogSumExp: 2 x 8 bytes per
 * output element (0 while the output size is not known). */
static size_t red_ws(const sn_tensor *y) {
    int64_t n_out = sn_tensor_numel(y);
    return n_out < 0 ? 0 : 2 * sn_align16((size_t)n_out * 8);
}

static size_t red_estimate(const sn_infer_ctx *c) { return red_ws(c->out[0]); }

static int red_prepare(sn_prep_ctx *c) {
    c->workspace = red_ws(c->out[0]);
    return SNUG_OK;
}

static void red_init_float(float *a, int64_t n, red_kind k) {
    float v = k == RK_PROD ? 1.0f : k == RK_MAX ? -INFINITY : k == RK_MIN ? INFINITY : 0.0f;
    for (int64_t i = 0; i < n; i++)
        a[i] = v;
}
static void red_init_double(double *a, int64_t n, red_kind k) {
    double v = k == RK_PROD ? 1.0 : k == RK_MAX ? -INFINITY : k == RK_MIN ? INFINITY : 0.0;
    for (int64_t i = 0; i < n; i++)
        a[i] = v;
}

/* Smallest and largest values of an integer dtype, as uint64 bit patterns. */
static uint64_t red_int_lowest(sn_dtype t) {
    switch (t) {
    case SN_I8: return (uint64_t)(int64_t)INT8_MIN;
    case SN_I16: return (uint64_t)(int64_t)INT16_MIN;
    case SN_I32: return (uint64_t)(int64_t)INT32_MIN;
    case SN_I64: return (uint64_t)INT64_MIN;
    default: return 0;
    }
}
static uint64_t red_int_highest(sn_dtype t) {
    switch (t) {
    case SN_I8: return INT8_MAX;
    case SN_I16: return INT16_MAX;
    case SN_I32: return INT32_MAX;
    case SN_I64: return INT64_MAX;
    case SN_U8: return UINT8_MAX;
    case SN_BOOL: return 1;
    case SN_U16: return UINT16_MAX;
    case SN_U32: return UINT32_MAX;
    default: return UINT64_MAX;
    }
}

static void red_store_int(sn_dtype t, void *y, int64_t i, uint64_t v) {
    switch (t) {
    case SN_I8: ((int8_t *)y)[i] = (int8_t)v; break;
    case SN_I16: ((int16_t *)y)[i] = (int16_t)v; break;
    case SN_I32: ((int32_t *)y)[i] = (int32_t)v; break;
    case SN_I64: ((int64_t *)y)[i] = (int64_t)v; break;
    case SN_U8: ((uint8_t *)y)[i] = (uint8_t)v; break;
    case SN_BOOL: ((uint8_t *)y)[i] = v != 0; break;
    case SN_U16: ((uint16_t *)y)[i] = (uint16_t)v; break;
    case SN_U32: ((uint32_t *)y)[i] = (uint32_t)v; break;
    default: ((uint64_t *)y)[i] = v; break;
    }
}

typedef void (*red_fn_float)(const void *, float *, const float *, const red_plan *, red_kind);
typedef void (*red_fn_double)(const void *, double *, const double *, const red_plan *, red_kind);
typedef void (*red_fn_int)(const void *, uint64_t *, const uint64_t *, const red_plan *, red_kind);

static int red_run_plan(sn_kctx *c, red_kind k, const sn_tensor *x, const red_plan *p) {
    sn_tensor *y = c->out[0];
    const int64_t n = p->n_out;
    const double cnt = (double)p->n_red;
    if (n == 0)
        return SNUG_OK;
    switch (red_class_of(x->dtype, k)) {
    case RC_FLOAT: {
        red_fn_float f = x->dtype == SN_F16 ? red_f16 : red_bf16;
        float *acc = c->ws;
        float *shift = (float *)((char *)c->ws + sn_align16((size_t)n * 8));
        if (k == RK_LSE) {
            red_init_float(shift, n, RK_MAX);
            if (p->n_in && x->dtype == SN_F32)
                red_f32_fast(x->data, shift, NULL, p, RK_MAX, c->pool);
            else if (p->n_in)
                f(x->data, shift, NULL, p, RK_MAX);
            for (int64_t i = 0; i < n; i++)
                if (!isfinite(shift[i]))
                    shift[i] = 0.0f;
        }
        red_init_float(acc, n, k);
        if (p->n_in && x->dtype == SN_F32)
            red_f32_fast(x->data, acc, shift, p, k, c->pool);
        else if (p->n_in)
            f(x->data, acc, shift, p, k);
        if (x->dtype == SN_F32) {
            float *yo = y->data;
            switch (k) {
            case RK_MEAN: for (int64_t i = 0; i < n; i++) yo[i] = (float)(acc[i] / cnt); break;
            case RK_L2: for (int64_t i = 0; i < n; i++) yo[i] = sqrtf(acc[i]); break;
            case RK_LOGSUM: for (int64_t i = 0; i < n; i++) yo[i] = logf(acc[i]); break;
            case RK_LSE: for (int64_t i = 0; i < n; i++) yo[i] = logf(acc[i]) + shift[i]; break;
            default: memcpy(yo, acc, (size_t)n * sizeof(float)); break;
            }
            return SNUG_OK;
        }
        for (int64_t i = 0; i < n; i++) {
            float v = acc[i];
            switch (k) {
            case RK_MEAN: v = (float)(v / cnt); break;
            case RK_L2: v = sqrtf(v); break;
            case RK_LOGSUM: v = logf(v); break;
            case RK_LSE: v = logf(v) + shift[i]; break;
            default: break;
            }
            sn_st_f32(x->dtype, y->data, i, v);
        }
        return SNUG_OK;
    }
    case RC_DOUBLE: {
        red_fn_double f;
        switch (x->dtype) {
        case SN_F64: f = red_f64; break;
        case SN_I8: f = red_d_i8; break;
        case SN_I16: f = red_d_i16; break;
        case SN_I32: f = red_d_i32; break;
        case SN_I64: f = red_d_i64; break;
        case SN_U8: f = red_d_u8; break;
        case SN_U16: f = red_d_u16; break;
        case SN_U32: f = red_d_u32; break;
        default: f = red_d_u64; break;
        }
        double *acc = c->ws;
        double *shift = (double *)((char *)c->ws + sn_align16((size_t)n * 8));
        if (k == RK_LSE) {
            red_init_double(shift, n, RK_MAX);
            if (p->n_in)
                f(x->data, shift, NULL, p, RK_MAX);
            for (int64_t i = 0; i < n; i++)
                if (!isfinite(shift[i]))
                    shift[i] = 0.0;
        }
        red_init_double(acc, n, k);
        if (p->n_in)
            f(x->data, acc, shift, p, k);
        for (int64_t i = 0; i < n; i++) {
            double v = acc[i];
            switch (k) {
            case RK_MEAN: v = v / cnt; break;
            case RK_L2: v = sqrt(v); break;
            case RK_LOGSUM: v = log(v); break;
            case RK_LSE: v = log(v) + shift[i]; break;
            default: break;
            }
            if (x->dtype == SN_F64)
                ((double *)y->data)[i] = v;
            else if (k == RK_MEAN && p->n_red == 0)
                red_store_int(x->dtype, y->data, i, 0);
            else
                sn_store_f64(x->dtype, y->data, (size_t)i, isfinite(v) ? v : 0.0);
        }
        return SNUG_OK;
    }
    case RC_INT: {
        red_fn_int f;
        switch (x->dtype) {
        case SN_I8: f = red_i8; break;
        case SN_I16: f = red_i16; break;
        case SN_I32: f = red_i32; break;
        case SN_I64: f = red_i64; break;
        case SN_U8: case SN_BOOL: f = red_u8; break;
        case SN_U16: f = red_u16; break;
        case SN_U32: f = red_u32; break;
        default: f = red_u64; break;
        }
        uint64_t *acc = c->ws;
        uint64_t init = k == RK_PROD ? 1 : k == RK_MAX ? red_int_lowest(x->dtype)
                      : k == RK_MIN ? red_int_highest(x->dtype) : 0;
        for (int64_t i = 0; i < n; i++)
            acc[i] = init;
        if (p->n_in)
            f(x->data, acc, NULL, p, k);
        for (int64_t i = 0; i < n; i++)
            red_store_int(x->dtype, y->data, i, acc[i]);
        return SNUG_OK;
    }
    default:
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "unsupported input type %s",
                        sn_dtype_name(x->dtype));
    }
}

static int red_run(sn_kctx *c) {
    const sn_node *n = c->node;
    red_kind k = red_kind_of(n);
    const sn_tensor *x = c->in[0];
    bool from_input = red_axes_from_input(n, k);
    const sn_tensor *axes_in = from_input && sn_has_in(c->in, c->n_in, 1) ? c->in[1] : NULL;
    red_axes ra;
    SN_TRY(red_resolve_axes(n, x, axes_in, from_input, c->err, &ra));
    if (!ra.known)
        return sn_kfail(c->err, n, SNUG_ERR_INTERNAL, "axes not known at run time");
    red_plan p;
    red_plan_make(&p, x->rank, x->dims, ra.mask);
    if (p.n_out != sn_tensor_numel(c->out[0]))
        return sn_kfail(c->err, n, SNUG_ERR_INTERNAL, "output size does not match the reduction");
    return red_run_plan(c, k, x, &p);
}

/* ======================================================================
 * MeanVarianceNormalization: (x - mean) / (sqrt(E[x^2] - mean^2) + 1e-9)
 * over the axes attribute (default N, H, W).
 * ====================================================================== */

static int mvn_mask(const sn_node *n, const sn_tensor *x, bool *mask, sn_err *err) {
    static const int64_t def_axes[3] = {0, 2, 3};
    const int64_t *ax = def_axes;
    int na = sn_attr_ints(n, "axes", &ax);
    if (na < 0) {
        ax = def_axes;
        na = 3;
    }
    memset(mask, 0, SN_MAX_RANK * sizeof *mask);
    for (int i = 0; i < na; i++) {
        int a;
        if (!sn_axis_norm(ax[i], x->rank, &a))
            return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "axis %lld out of range for rank %d",
                            (long long)ax[i], x->rank);
        mask[a] = true;
    }
    return SNUG_OK;
}

static int mvn_infer(sn_infer_ctx *c) {
    const sn_tensor *x = sn_infer_in(c, 0);
    if (!x)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "missing input");
    if (!sn_dtype_is_real(x->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "unsupported input type %s",
                        sn_dtype_name(x->dtype));
    if (x->rank != SN_RANK_UNKNOWN) {
        bool mask[SN_MAX_RANK];
        SN_TRY(mvn_mask(c->node, x, mask, c->err));
    }
    sn_set_out(c->out[0], x->dtype, x->rank, x->dims);
    return SNUG_OK;
}

/* Sum and sum of squares per reduced group (0 while shapes are unknown). */
static size_t mvn_ws(const sn_node *n, const sn_tensor *x) {
    bool mask[SN_MAX_RANK];
    sn_err err;
    if (!sn_tensor_shape_known(x) || mvn_mask(n, x, mask, &err) != SNUG_OK)
        return 0;
    red_plan p;
    red_plan_make(&p, x->rank, x->dims, mask);
    return 2 * sn_align16((size_t)p.n_out * sizeof(double));
}

static size_t mvn_estimate(const sn_infer_ctx *c) { return mvn_ws(c->node, c->in[0]); }

static int mvn_prepare(sn_prep_ctx *c) {
    c->workspace = mvn_ws(c->node, c->in[0]);
    return SNUG_OK;
}

static int mvn_run(sn_kctx *c) {
    const sn_tensor *x = c->in[0];
    sn_tensor *y = c->out[0];
    bool mask[SN_MAX_RANK];
    SN_TRY(mvn_mask(c->node, x, mask, c->err));
    red_plan p;
    red_plan_make(&p, x->rank, x->dims, mask);
    if (p.n_in == 0)
        return SNUG_OK;
    double *s1 = c->ws;
    double *s2 = (double *)((char *)c->ws + sn_align16((size_t)p.n_out * sizeof(double)));
    for (int64_t i = 0; i < p.n_out; i++)
        s1[i] = s2[i] = 0.0;
    const int64_t L = p.dims[p.nd - 1];
    const bool inner_red = p.red[p.nd - 1];
    const int64_t n_rows = p.n_in / L;
    int64_t idx[SN_MAX_RANK] = {0}, o = 0;
    for (int64_t r = 0; r < n_rows; r++) {
        for (int64_t i = 0; i < L; i++) {
            double v = sn_load_f64(x->dtype, x->data, (size_t)(r * L + i));
            int64_t oi = inner_red ? o : o + i;
            s1[oi] += v;
            s2[oi] += v * v;
        }
        red_plan_next(&p, idx, &o);
    }
    double inv = 1.0 / (double)p.n_red;
    for (int64_t i = 0; i < p.n_out; i++) {
        double m = s1[i] * inv, var = s2[i] * inv - m * m;
        s1[i] = m;
        s2[i] = 1.0 / (sqrt(var > 0 ? var : 0) + 1e-9);
    }
    memset(idx, 0, sizeof idx);
    o = 0;
    for (int64_t r = 0; r < n_rows; r++) {
        for (int64_t i = 0; i < L; i++) {
            size_t e = (size_t)(r * L + i);
            int64_t oi = inner_red ? o : o + i;
            double v = sn_load_f64(x->dtype, x->data, e);
            sn_store_f64(y->dtype, y->data, e, (v - s1[oi]) * s2[oi]);
        }
        red_plan_next(&p, idx, &o);
    }
    return SNUG_OK;
}

/* ======================================================================
 * Shared by ArgMax/ArgMin, CumSum, TopK: a tensor seen as [outer, L, inner]
 * around one axis.
 * ====================================================================== */

static void split3(const sn_tensor *x, int axis, int64_t *outer, int64_t *L, int64_t *inner) {
    *outer = sn_dims_prod(x->dims, 0, axis);
    *L = x->dims[axis];
    *inner = sn_dims_prod(x->dims, axis + 1, x->rank);
}

/* ======================================================================
 * ArgMax / ArgMin
 * ====================================================================== */

static bool arg_type_ok(sn_dtype t) {
    switch (t) {
    case SN_F32: case SN_F64: case SN_F16: case SN_BF16:
    case SN_I8: case SN_I16: case SN_I32: case SN_I64:
    case SN_U8: case SN_U16: case SN_U32: case SN_U64:
        return true;
    default:
        return false;
    }
}

static int arg_infer(sn_infer_ctx *c) {
    const sn_node *n = c->node;
    const sn_tensor *x = sn_infer_in(c, 0);
    if (!x)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "missing input");
    if (!arg_type_ok(x->dtype))
        return sn_kfail(c->err, n, SNUG_ERR_TYPE, "unsupported input type %s",
                        sn_dtype_name(x->dtype));
    sn_tensor *y = c->out[0];
    y->kind = SN_KIND_TENSOR;
    y->dtype = SN_I64;
    if (x->rank == SN_RANK_UNKNOWN) {
        y->rank = SN_RANK_UNKNOWN;
        return SNUG_OK;
    }
    int64_t axis = sn_attr_int(n, "axis", 0);
    int a;
    if (!sn_axis_norm(axis, x->rank, &a))
        return sn_kfail(c->err, n, SNUG_ERR_INVALID_ARG, "axis %lld out of range for rank %d",
                        (long long)axis, x->rank);
    bool keep = sn_attr_int(n, "keepdims", 1) != 0;
    int r = 0;
    for (int i = 0; i < x->rank; i++) {
        if (i != a)
            y->dims[r++] = x->dims[i];
        else if (keep)
            y->dims[r++] = 1;
    }
    y->rank = r;
    return SNUG_OK;
}

/* better(v, b): v replaces the current best b. */
#define ARG_LOOP(NAME, T, VT, LOAD)                                                     \
    static void NAME(const void *xv, int64_t *y, int64_t outer, int64_t L, int64_t inner, \
                     bool is_max, bool last) {                                        \
        const T *x = (const T *)xv;                                                   \
        for (int64_t o = 0; o < outer; o++) {                                         \
            const T *xo = x + o * L * inner;                                          \
            int64_t *yo = y + o * inner;                                              \
            for (int64_t i = 0; i < inner; i++) {                                     \
                int64_t bi = 0;                                                       \
                VT b = LOAD(xo, i);                                                 \
                for (int64_t l = 1; l < L; l++) {                                     \
                    VT v = LOAD(xo, l * inner + i);                                   \
                    bool better = is_max ? (v > b || (last && v == b))                \
                                         : (v < b || (last && v == b));               \
                    if (better) {                                                     \
                        b = v;                                                        \
                        bi = l;                                                       \
                    }                                                                 \
                }                                                                     \
                yo[i] = bi;                                                           \
            }                                                                         \
        }                                                                             \
    }

ARG_LOOP(arg_f32, float, float, LD_NATIVE)
ARG_LOOP(arg_f64, double, double, LD_NATIVE)
ARG_LOOP(arg_f16, uint16_t, float, LD_F16)
ARG_LOOP(arg_bf16, uint16_t, float, LD_BF16)
ARG_LOOP(arg_i8, int8_t, int8_t, LD_NATIVE)
ARG_LOOP(arg_i16, int16_t, int16_t, LD_NATIVE)
ARG_LOOP(arg_i32, int32_t, int32_t, LD_NATIVE)
ARG_LOOP(arg_i64, int64_t, int64_t, LD_NATIVE)
ARG_LOOP(arg_u8, uint8_t, uint8_t, LD_NATIVE)
ARG_LOOP(arg_u16, uint16_t, uint16_t, LD_NATIVE)
ARG_LOOP(arg_u32, uint32_t, uint32_t, LD_NATIVE)
ARG_LOOP(arg_u64, uint64_t, uint64_t, LD_NATIVE)

static int arg_run(sn_kctx *c) {
    const sn_node *n = c->node;
    const sn_tensor *x = c->in[0];
    int a;
    if (!sn_axis_norm(sn_attr_int(n, "axis", 0), x->rank, &a))
        return sn_kfail(c->err, n, SNUG_ERR_INVALID_ARG, "axis out of range");
    bool is_max = !strcmp(n->p->op_type, "ArgMax");
    bool last = n->opset >= 12 && sn_attr_int(n, "select_last_index", 0) != 0;
    int64_t outer, L, inner;
    split3(x, a, &outer, &L, &inner);
    if (outer * inner == 0)
        return SNUG_OK;
    if (L == 0)
        return sn_kfail(c->err, n, SNUG_ERR_INVALID_ARG, "reduction over an empty axis");
    if (x->dtype == SN_F32 && inner == 1) {
        /* rows: the extreme value with the vector kernel, then its index */
        const float *xs = x->data;
        int64_t *y = c->out[0]->data;
        for (int64_t o = 0; o < outer; o++) {
            const float *xr = xs + o * L;
            float m = sn_red_max_f32(xr, L, !is_max);
            int64_t bi = 0;
            if (isnan(m)) {
                while (bi < L - 1 && !isnan(xr[bi]))
                    bi++;
            } else if (last) {
                bi = L - 1;
                while (bi > 0 && xr[bi] != m)
                    bi--;
            } else {
                while (bi < L - 1 && xr[bi] != m)
                    bi++;
            }
            y[o] = bi;
        }
        return SNUG_OK;
    }
    void (*f)(const void *, int64_t *, int64_t, int64_t, int64_t, bool, bool);
    switch (x->dtype) {
    case SN_F32: f = arg_f32; break;
    case SN_F64: f = arg_f64; break;
    case SN_F16: f = arg_f16; break;
    case SN_BF16: f = arg_bf16; break;
    case SN_I8: f = arg_i8; break;
    case SN_I16: f = arg_i16; break;
    case SN_I32: f = arg_i32; break;
    case SN_I64: f = arg_i64; break;
    case SN_U8: f = arg_u8; break;
    case SN_U16: f = arg_u16; break;
    case SN_U32: f = arg_u32; break;
    default: f = arg_u64; break;
    }
    f(x->data, c->out[0]->data, outer, L, inner, is_max, last);
    return SNUG_OK;
}

/* ======================================================================
 * CumSum
 * ====================================================================== */

static int cumsum_axis(const sn_node *n, const sn_tensor *x, const sn_tensor *at, int *axis,
                       bool *known, sn_err *err) {
    *known = false;
    if (!at)
        return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "missing axis input");
    if (at->dtype != SN_I32 && at->dtype != SN_I64)
        return sn_kfail(err, n, SNUG_ERR_TYPE, "axis must be int32 or int64");
    if (at->rank > 1 || (at->rank == 1 && at->dims[0] != 1 && at->dims[0] >= 0))
        return sn_kfail(err, n, SNUG_ERR_SHAPE, "axis must be a scalar");
    if (!at->data || x->rank == SN_RANK_UNKNOWN)
        return SNUG_OK;
    int64_t v;
    if (sn_input_ints(at, &v, 1) != 1)
        return sn_kfail(err, n, SNUG_ERR_SHAPE, "axis must hold one value");
    if (!sn_axis_norm(v, x->rank, axis))
        return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "axis %lld out of range for rank %d",
                        (long long)v, x->rank);
    *known = true;
    return SNUG_OK;
}

static int cumsum_infer(sn_infer_ctx *c) {
    const sn_tensor *x = sn_infer_in(c, 0);
    if (!x)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "missing input");
    switch (x->dtype) {
    case SN_F32: case SN_F64: case SN_F16: case SN_BF16:
    case SN_I32: case SN_I64: case SN_U32: case SN_U64:
        break;
    default:
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "unsupported input type %s",
                        sn_dtype_name(x->dtype));
    }
    int axis;
    bool known;
    SN_TRY(cumsum_axis(c->node, x, sn_has_in(c->in, c->n_in, 1) ? c->in[1] : NULL, &axis, &known, c->err));
    sn_set_out(c->out[0], x->dtype, x->rank, x->dims);
    return SNUG_OK;
}

/* Walks the axis forward or backward; y[l] = y[prev] + x[l or prev]. */
#define CUMSUM_LOOP(NAME, T, ADD)                                                     \
    static void NAME(const void *xv, void *yv, int64_t outer, int64_t L, int64_t inner, \
                     bool excl, bool rev) {                                           \
        const T *x = (const T *)xv;                                                   \
        T *y = (T *)yv;                                                               \
        for (int64_t o = 0; o < outer; o++) {                                         \
            const T *xo = x + o * L * inner;                                          \
            T *yo = y + o * L * inner;                                                \
            for (int64_t s = 0; s < L; s++) {                                         \
                int64_t l = rev ? L - 1 - s : s, pl = rev ? l + 1 : l - 1;            \
                T *yl = yo + l * inner;                                               \
                const T *xl = xo + l * inner;                                         \
                if (s == 0) {                                                         \
                    for (int64_t i = 0; i < inner; i++)                               \
                        yl[i] = excl ? (T)0 : xl[i];                                  \
                    continue;                                                         \
                }                                                                     \
                const T *yp = yo + pl * inner;                                        \
                const T *xa = excl ? xo + pl * inner : xl;                            \
                for (int64_t i = 0; i < inner; i++)                                   \
                    yl[i] = ADD(yp[i], xa[i]);                                        \
            }                                                                         \
        }                                                                             \
    }

#define ADD_F(a, b) ((a) + (b))
#define ADD_I32(a, b) ((int32_t)((uint32_t)(a) + (uint32_t)(b)))
#define ADD_I64(a, b) ((int64_t)((uint64_t)(a) + (uint64_t)(b)))
CUMSUM_LOOP(cumsum_f32, float, ADD_F)
CUMSUM_LOOP(cumsum_f64, double, ADD_F)
CUMSUM_LOOP(cumsum_i32, int32_t, ADD_I32)
CUMSUM_LOOP(cumsum_i64, int64_t, ADD_I64)
CUMSUM_LOOP(cumsum_u32, uint32_t, ADD_F)
CUMSUM_LOOP(cumsum_u64, uint64_t, ADD_F)

static int cumsum_run(sn_kctx *c) {
    const sn_tensor *x = c->in[0];
    sn_tensor *y = c->out[0];
    int axis;
    bool known;
    SN_TRY(cumsum_axis(c->node, x, sn_has_in(c->in, c->n_in, 1) ? c->in[1] : NULL, &axis, &known, c->err));
    if (!known)
        return sn_kfail(c->err, c->node, SNUG_ERR_INTERNAL, "axis not known at run time");
    bool excl = sn_attr_int(c->node, "exclusive", 0) != 0;
    bool rev = sn_attr_int(c->node, "reverse", 0) != 0;
    int64_t outer, L, inner;
    split3(x, axis, &outer, &L, &inner);
    if (outer * L * inner == 0)
        return SNUG_OK;
    switch (x->dtype) {
    case SN_F32: cumsum_f32(x->data, y->data, outer, L, inner, excl, rev); return SNUG_OK;
    case SN_F64: cumsum_f64(x->data, y->data, outer, L, inner, excl, rev); return SNUG_OK;
    case SN_I32: cumsum_i32(x->data, y->data, outer, L, inner, excl, rev); return SNUG_OK;
    case SN_I64: cumsum_i64(x->data, y->data, outer, L, inner, excl, rev); return SNUG_OK;
    case SN_U32: cumsum_u32(x->data, y->data, outer, L, inner, excl, rev); return SNUG_OK;
    case SN_U64: cumsum_u64(x->data, y->data, outer, L, inner, excl, rev); return SNUG_OK;
    default: break;
    }
    /* float16 / bfloat16: a float running sum per (outer, inner) column */
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            float acc = 0.0f;
            for (int64_t s = 0; s < L; s++) {
                int64_t l = rev ? L - 1 - s : s;
                int64_t e = (o * L + l) * inner + i;
                float v = sn_ld_f32(x->dtype, x->data, e);
                if (excl) {
                    sn_st_f32(y->dtype, y->data, e, acc);
                    acc += v;
                } else {
                    acc += v;
                    sn_st_f32(y->dtype, y->data, e, acc);
                }
            }
        }
    return SNUG_OK;
}

/* ======================================================================
 * TopK
 * ====================================================================== */

/* k, or -1 when not known yet. */
static int topk_k(const sn_node *n, const sn_tensor *const *in, int n_in, int64_t *k,
                  sn_err *err) {
    if (n->opset < 10) {
        *k = sn_attr_int(n, "k", -1);
        if (*k < 0)
            return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "attribute k missing or negative");
        return SNUG_OK;
    }
    const sn_tensor *kt = n_in > 1 ? in[1] : NULL;
    if (!kt)
        return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "missing input K");
    if (kt->dtype != SN_I64 && kt->dtype != SN_I32)
        return sn_kfail(err, n, SNUG_ERR_TYPE, "K must be int64");
    *k = -1;
    if (!kt->data)
        return SNUG_OK;
    if (sn_input_ints(kt, k, 1) != 1)
        return sn_kfail(err, n, SNUG_ERR_SHAPE, "K must hold exactly one value");
    if (*k < 0)
        return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "K must be non-negative, got %lld",
                        (long long)*k);
    return SNUG_OK;
}

static int topk_infer(sn_infer_ctx *c) {
    const sn_node *n = c->node;
    const sn_tensor *x = sn_infer_in(c, 0);
    if (!x)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "missing input");
    if (!arg_type_ok(x->dtype))
        return sn_kfail(c->err, n, SNUG_ERR_TYPE, "unsupported input type %s",
                        sn_dtype_name(x->dtype));
    int64_t k;
    SN_TRY(topk_k(n, c->in, c->n_in, &k, c->err));
    for (int o = 0; o < 2 && o < c->n_out; o++) {
        sn_tensor *y = c->out[o];
        if (!y)
            continue;
        y->kind = SN_KIND_TENSOR;
        y->dtype = o == 0 ? x->dtype : SN_I64;
        y->rank = x->rank;
    }
    if (x->rank == SN_RANK_UNKNOWN)
        return SNUG_OK;
    int a;
    if (!sn_axis_norm(sn_attr_int(n, "axis", -1), x->rank, &a))
        return sn_kfail(c->err, n, SNUG_ERR_INVALID_ARG, "axis out of range for rank %d", x->rank);
    if (k >= 0 && x->dims[a] >= 0 && k > x->dims[a])
        return sn_kfail(c->err, n, SNUG_ERR_INVALID_ARG, "K=%lld exceeds the axis size %lld",
                        (long long)k, (long long)x->dims[a]);
    for (int o = 0; o < 2 && o < c->n_out; o++) {
        sn_tensor *y = c->out[o];
        if (!y)
            continue;
        for (int i = 0; i < x->rank; i++)
            y->dims[i] = i == a ? (k >= 0 ? k : SN_DIM_UNKNOWN) : x->dims[i];
    }
    return SNUG_OK;
}

/* Two index arrays and the keys, 8 bytes each per element of the axis. */
static size_t topk_ws(const sn_node *n, const sn_tensor *x) {
    int a;
    if (x->rank == SN_RANK_UNKNOWN || !sn_axis_norm(sn_attr_int(n, "axis", -1), x->rank, &a) ||
        x->dims[a] < 0)
        return 0;
    return 3 * sn_align16((size_t)x->dims[a] * 8);
}

static size_t topk_estimate(const sn_infer_ctx *c) { return topk_ws(c->node, c->in[0]); }

static int topk_prepare(sn_prep_ctx *c) {
    c->workspace = topk_ws(c->node, c->in[0]);
    return SNUG_OK;
}

/* Stable bottom-up merge sort of the index array a[0..n) by key: an element
 * moves ahead only when strictly better, so ties keep the lower index. */
#define TOPK_SORT(NAME, KT)                                                           \
    static int64_t *NAME(int64_t *a, int64_t *tmp, int64_t n, const KT *key, bool largest) { \
        for (int64_t w = 1; w < n; w *= 2) {                                          \
            for (int64_t lo = 0; lo < n; lo += 2 * w) {                               \
                int64_t mid = sn_imin(lo + w, n), hi = sn_imin(lo + 2 * w, n);        \
                int64_t i = lo, j = mid, t = lo;                                      \
                while (i < mid && j < hi) {                                           \
                    KT ki = key[a[i]], kj = key[a[j]];                                \
                    bool take_j = largest ? kj > ki : kj < ki;                        \
                    tmp[t++] = take_j ? a[j++] : a[i++];                              \
                }                                                                     \
                while (i < mid)                                                       \
                    tmp[t++] = a[i++];                                                \
                while (j < hi)                                                        \
                    tmp[t++] = a[j++];                                                \
            }                                                                         \
            int64_t *s = a;                                                           \
            a = tmp;                                                                  \
            tmp = s;                                                                  \
        }                                                                             \
        return a;                                                                     \
    }

TOPK_SORT(topk_sort_d, double)
TOPK_SORT(topk_sort_i, int64_t)
TOPK_SORT(topk_sort_u, uint64_t)

static int topk_run(sn_kctx *c) {
    const sn_node *n = c->node;
    const sn_tensor *x = c->in[0];
    int64_t k;
    SN_TRY(topk_k(n, c->in, c->n_in, &k, c->err));
    int a;
    if (!sn_axis_norm(sn_attr_int(n, "axis", -1), x->rank, &a))
        return sn_kfail(c->err, n, SNUG_ERR_INVALID_ARG, "axis out of range");
    int64_t outer, L, inner;
    split3(x, a, &outer, &L, &inner);
    if (k < 0 || k > L)
        return sn_kfail(c->err, n, SNUG_ERR_INVALID_ARG, "K=%lld out of range [0, %lld]",
                        (long long)k, (long long)L);
    bool largest = n->opset < 11 || sn_attr_int(n, "largest", 1) != 0;
    sn_tensor *vals = c->n_out > 0 ? c->out[0] : NULL;
    sn_tensor *idxs = c->n_out > 1 ? c->out[1] : NULL;
    if (outer * inner * k == 0)
        return SNUG_OK;
    size_t stride = sn_align16((size_t)L * 8);
    int64_t *ia = c->ws;
    int64_t *ib = (int64_t *)((char *)c->ws + stride);
    void *keys = (char *)c->ws + 2 * stride;
    size_t es = sn_dtype_size(x->dtype);
    bool is_s64 = x->dtype == SN_I64, is_u64 = x->dtype == SN_U64;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * L * inner + i;
            for (int64_t l = 0; l < L; l++) {
                size_t e = (size_t)(base + l * inner);
                ia[l] = l;
                if (is_s64)
                    ((int64_t *)keys)[l] = ((const int64_t *)x->data)[e];
                else if (is_u64)
                    ((uint64_t *)keys)[l] = ((const uint64_t *)x->data)[e];
                else
                    ((double *)keys)[l] = sn_load_f64(x->dtype, x->data, e);
            }
            const int64_t *sorted = is_s64 ? topk_sort_i(ia, ib, L, keys, largest)
                                  : is_u64 ? topk_sort_u(ia, ib, L, keys, largest)
                                           : topk_sort_d(ia, ib, L, keys, largest);
            int64_t obase = o * k * inner + i;
            for (int64_t j = 0; j < k; j++) {
                int64_t oe = obase + j * inner;
                if (vals)
                    memcpy((char *)vals->data + (size_t)oe * es,
                           (const char *)x->data + (size_t)(base + sorted[j] * inner) * es, es);
                if (idxs)
                    ((int64_t *)idxs->data)[oe] = sorted[j];
            }
        }
    return SNUG_OK;
}

const sn_op_def sn_ops_reduce[] = {
    {.domain = "", .name = "ReduceSum", .since_version = 1, .infer = red_infer, .estimate = red_estimate,
     .cpu = {.prepare = red_prepare, .run = red_run}},
    {.domain = "", .name = "ReduceMean", .since_version = 1, .infer = red_infer, .estimate = red_estimate,
     .cpu = {.prepare = red_prepare, .run = red_run}},
    {.domain = "", .name = "ReduceMax", .since_version = 1, .infer = red_infer, .estimate = red_estimate,
     .cpu = {.prepare = red_prepare, .run = red_run}},
    {.domain = "", .name = "ReduceMin", .since_version = 1, .infer = red_infer, .estimate = red_estimate,
     .cpu = {.prepare = red_prepare, .run = red_run}},
    {.domain = "", .name = "ReduceProd", .since_version = 1, .infer = red_infer, .estimate = red_estimate,
     .cpu = {.prepare = red_prepare, .run = red_run}},
    {.domain = "", .name = "ReduceL1", .since_version = 1, .infer = red_infer, .estimate = red_estimate,
     .cpu = {.prepare = red_prepare, .run = red_run}},
    {.domain = "", .name = "ReduceL2", .since_version = 1, .infer = red_infer, .estimate = red_estimate,
     .cpu = {.prepare = red_prepare, .run = red_run}},
    {.domain = "", .name = "ReduceLogSum", .since_version = 1, .infer = red_infer, .estimate = red_estimate,
     .cpu = {.prepare = red_prepare, .run = red_run}},
    {.domain = "", .name = "ReduceLogSumExp", .since_version = 1, .infer = red_infer, .estimate = red_estimate,
     .cpu = {.prepare = red_prepare, .run = red_run}},
    {.domain = "", .name = "ReduceSumSquare", .since_version = 1, .infer = red_infer, .estimate = red_estimate,
     .cpu = {.prepare = red_prepare, .run = red_run}},
    {.domain = "", .name = "ArgMax", .since_version = 1, .infer = arg_infer, .cpu = {.run = arg_run}},
    {.domain = "", .name = "ArgMin", .since_version = 1, .infer = arg_infer, .cpu = {.run = arg_run}},
    {.domain = "", .name = "CumSum", .since_version = 11, .required = 0x3, .infer = cumsum_infer, .cpu = {.run = cumsum_run}},
    {.domain = "", .name = "TopK", .since_version = 1, .infer = topk_infer, .estimate = topk_estimate,
     .cpu = {.prepare = topk_prepare, .run = topk_run}},
    {.domain = "", .name = "MeanVarianceNormalization", .since_version = 9, .infer = mvn_infer, .estimate = mvn_estimate,
     .cpu = {.prepare = mvn_prepare, .run = mvn_run}},
    {0},
};
