/* Normalizations: Softmax, LogSoftmax, Hardmax, BatchNormalization,
 * LayerNormalization, InstanceNormalization, GroupNormalization, LRN,
 * LpNormalization.
 *
 * float32 has its own loops; float64, float16 and bfloat16 go through
 * double (loads/stores widen and narrow), which is exact enough for all of
 * them and keeps the code short. */
#include <math.h>
#include <string.h>

#include "ops/nn/nn.h"
#include "ops/reduce/reduce_util.h"

/* ======================================================================
 * Softmax / LogSoftmax / Hardmax
 * ====================================================================== */

typedef enum smx_kind { SMX_SOFT, SMX_LOG, SMX_HARD } smx_kind;

static smx_kind smx_kind_of(const sn_node *n) {
    const char *t = n->p->op_type;
    return !strcmp(t, "Softmax") ? SMX_SOFT : !strcmp(t, "LogSoftmax") ? SMX_LOG : SMX_HARD;
}

/* The tensor as [outer, L, inner] rows. Before opset 13 the input is
 * coerced to 2-D at axis (inner = 1); from 13 the op runs along one axis. */
static int smx_geom(const sn_node *n, const sn_tensor *x, int64_t *outer, int64_t *L,
                    int64_t *inner, sn_err *err) {
    bool v13 = n->opset >= 13;
    int64_t axis = sn_attr_int(n, "axis", v13 ? -1 : 1);
    int a;
    if (x->rank == 0 && !v13 && (axis == 0 || axis == -1)) {
        *outer = *L = *inner = 1;
        return SNUG_OK;
    }
    if (!sn_axis_norm(axis, x->rank, &a) && !(!v13 && axis == x->rank))
        return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "axis %lld out of range for rank %d",
                        (long long)axis, x->rank);
    if (!v13 && axis == x->rank)
        a = x->rank;
    *outer = sn_dims_prod(x->dims, 0, a);
    if (v13) {
        *L = x->dims[a];
        *inner = sn_dims_prod(x->dims, a + 1, x->rank);
    } else {
        *L = sn_dims_prod(x->dims, a, x->rank);
        *inner = 1;
    }
    return SNUG_OK;
}

int nn_smx_infer(sn_infer_ctx *c) {
    const sn_tensor *x = sn_infer_in(c, 0);
    if (!x)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "missing input");
    if (!sn_dtype_is_real(x->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "unsupported input type %s",
                        sn_dtype_name(x->dtype));
    if (x->rank != SN_RANK_UNKNOWN) {
        int64_t o, l, i;
        SN_TRY(smx_geom(c->node, x, &o, &l, &i, c->err));
    }
    sn_set_out(c->out[0], x->dtype, x->rank, x->dims);
    return SNUG_OK;
}

/* Per-column max and sum when the axis is not the innermost. */
static size_t smx_ws(const sn_node *n, const sn_tensor *x) {
    int64_t outer = 0, L = 0, inner = 0;
    sn_err err;
    if (x->rank == SN_RANK_UNKNOWN || smx_geom(n, x, &outer, &L, &inner, &err) != SNUG_OK)
        return 0;
    return inner > 1 ? 2 * sn_align16((size_t)inner * sizeof(double)) : 0;
}

size_t nn_smx_estimate(const sn_infer_ctx *c) { return smx_ws(c->node, c->in[0]); }

int nn_smx_prepare(sn_prep_ctx *c) {
    c->workspace = smx_ws(c->node, c->in[0]);
    return SNUG_OK;
}

typedef struct smx_job {
    const void *x;
    void *y;
    int64_t L;
    smx_kind kind;
} smx_job;

/* Rows [b, e) of length L, contiguous (inner == 1). In-place safe. */
#define SMX_ROWS(NAME, T, EXP, LOG)                                                   \
    static void NAME(void *arg, int64_t b, int64_t e) {                               \
        const smx_job *j = arg;                                                       \
        const int64_t L = j->L;                                                       \
        for (int64_t r = b; r < e; r++) {                                             \
            const T *x = (const T *)j->x + r * L;                                     \
            T *y = (T *)j->y + r * L;                                                 \
            T m = x[0];                                                               \
            int64_t am = 0;                                                           \
            for (int64_t i = 1; i < L; i++)                                           \
                if (x[i] > m) {                                                       \
                    m = x[i];                                                         \
                    am = i;                                                           \
                }                                                                     \
            if (j->kind == SMX_HARD) {                                                \
                for (int64_t i = 0; i < L; i++)                                       \
                    y[i] = 0;                                                         \
                y[am] = 1;                                                            \
            } else if (j->kind == SMX_SOFT) {                                         \
                T s = 0;                                                              \
                for (int64_t i = 0; i < L; i++) {                                     \
                    T v = EXP(x[i] - m);                                              \
                    y[i] = v;                                                         \
                    s += v;                                                           \
                }                                                                     \
                T inv = 1 / s;                                                        \
                for (int64_t i = 0; i < L; i++)                                       \
                    y[i] *= inv;                                                      \
            } else {                                                                  \
                T s = 0;                                                              \
                for (int64_t i = 0; i < L; i++)                                       \
                    s += EXP(x[i] - m);                                               \
                T off = m + LOG(s);                                                   \
                for (int64_t i = 0; i < L; i++)                                       \
                    y[i] = x[i] - off;                                                \
            }                                                                         \
        }                                                                             \
    }

SMX_ROWS(smx_rows_f64, double, exp, log)
SMX_ROWS(smx_rows_hard_f32, float, expf, logf)

/* float32 rows: max, exp and sum passes in blocks of SN_RED_LANES through
 * a local buffer, which GCC vectorizes at -O2 even when y aliases x. */
SN_CLONES static void smx_rows_f32(void *arg, int64_t b, int64_t e) {
    const smx_job *j = arg;
    const int64_t L = j->L;
    if (j->kind == SMX_HARD) {
        smx_rows_hard_f32(arg, b, e);
        return;
    }
    for (int64_t r = b; r < e; r++) {
        const float *x = (const float *)j->x + r * L;
        float *y = (float *)j->y + r * L;
        float m = sn_red_max_f32(x, L, false);
        if (isnan(m)) {
            for (int64_t i = 0; i < L; i++)
                y[i] = NAN;
            continue;
        }
        float acc[SN_RED_LANES] = {0}, t[SN_RED_LANES];
        int64_t i = 0;
        if (j->kind == SMX_SOFT) {
            for (; i + SN_RED_LANES <= L; i += SN_RED_LANES) {
                for (int k = 0; k < SN_RED_LANES; k++) {
                    t[k] = sn_red_expf(x[i + k] - m);
                    acc[k] += t[k];
                }
                memcpy(y + i, t, sizeof t);
            }
            float s = sn_red_lanes_sum(acc);
            for (; i < L; i++) {
                float v = sn_red_expf(x[i] - m);
                y[i] = v;
                s += v;
            }
            float inv = 1.0f / s;
            for (i = 0; i + SN_RED_LANES <= L; i += SN_RED_LANES) {
                for (int k = 0; k < SN_RED_LANES; k++)
                    t[k] = y[i + k] * inv;
                memcpy(y + i, t, sizeof t);
            }
            for (; i < L; i++)
                y[i] *= inv;
        } else {
            for (; i + SN_RED_LANES <= L; i += SN_RED_LANES)
                for (int k = 0; k < SN_RED_LANES; k++)
                    acc[k] += sn_red_expf(x[i + k] - m);
            float s = sn_red_lanes_sum(acc);
            for (; i < L; i++)
                s += sn_red_expf(x[i] - m);
            float off = m + logf(s);
            for (i = 0; i + SN_RED_LANES <= L; i += SN_RED_LANES) {
                for (int k = 0; k < SN_RED_LANES; k++)
                    t[k] = x[i + k] - off;
                memcpy(y + i, t, sizeof t);
            }
            for (; i < L; i++)
                y[i] = x[i] - off;
        }
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SMX_HAVE_AVX2 1
#define SMX_AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline

/* sn_red_expf on eight lanes, operation for operation: the same bits
 * (float min/max clamp as its integer one does for every input but NaN,
 * which the caller has ruled out). */
SMX_AVX2_INLINE __m256 smx_exp8(__m256 x) {
    const __m256 magic = _mm256_set1_ps(12582912.0f);
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
    __m256 t = _mm256_fmadd_ps(xc, _mm256_set1_ps(1.44269504088896341f), magic);
    __m256 nf = _mm256_sub_ps(t, magic);
    __m256 r = _mm256_fmadd_ps(nf, _mm256_set1_ps(-0.693145751953125f), xc);
    r = _mm256_fmadd_ps(nf, _mm256_set1_ps(-1.42860682030941723e-6f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* Softmax rows (inner == 1) with the bits of smx_rows_f32: the max (exact
 * in any order) with a NaN flag, the exps summed in the same sixteen lanes
 * (two vectors) folded as sn_red_lanes_sum folds them, then the tail in
 * order, then one reciprocal and a product per element. The portable copy
 * stages each block through a buffer to let GCC vectorize with y aliasing
 * x, which made it about three times slower than ONNX Runtime's (30
 * Softmax nodes of [1, 9, 128, 128]: 4.25 ms against 1.18). */
__attribute__((target("avx2,fma"))) static void smx_soft_rows_avx2(void *arg, int64_t b, int64_t e) {
    const smx_job *j = arg;
    const int64_t L = j->L;
    for (int64_t row = b; row < e; row++) {
        const float *x = (const float *)j->x + row * L;
        float *y = (float *)j->y + row * L;
        __m256 m0 = _mm256_set1_ps(x[0]), m1 = m0;
        __m256 un = _mm256_setzero_ps();
        int64_t i = 0;
        for (; i + 16 <= L; i += 16) {
            __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
            m0 = _mm256_max_ps(m0, v0);
            m1 = _mm256_max_ps(m1, v1);
            un = _mm256_or_ps(un, _mm256_cmp_ps(v0, v1, _CMP_UNORD_Q));
        }
        m0 = _mm256_max_ps(m0, m1);
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(m0), _mm256_extractf128_ps(m0, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
        float m = _mm_cvtss_f32(h);
        int nan = _mm256_movemask_ps(un) != 0;
        for (; i < L; i++) {
            m = x[i] > m ? x[i] : m;
            nan |= x[i] != x[i];
        }
        if (nan) {
            for (i = 0; i < L; i++)
                y[i] = NAN;
            continue;
        }
        const __m256 mv = _mm256_set1_ps(m);
        __m256 s0 = _mm256_setzero_ps(), s1 = s0;
        for (i = 0; i + 32 <= L; i += 32) { /* four exps in flight: each is one long dependent chain */
            __m256 e0 = smx_exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv));
            __m256 e1 = smx_exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), mv));
            __m256 e2 = smx_exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 16), mv));
            __m256 e3 = smx_exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 24), mv));
            _mm256_storeu_ps(y + i, e0);
            _mm256_storeu_ps(y + i + 8, e1);
            _mm256_storeu_ps(y + i + 16, e2);
            _mm256_storeu_ps(y + i + 24, e3);
            s0 = _mm256_add_ps(_mm256_add_ps(s0, e0), e2);
            s1 = _mm256_add_ps(_mm256_add_ps(s1, e1), e3);
        }
        for (; i + 16 <= L; i += 16) {
            __m256 e0 = smx_exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv));
            __m256 e1 = smx_exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), mv));
            _mm256_storeu_ps(y + i, e0);
            _mm256_storeu_ps(y + i + 8, e1);
            s0 = _mm256_add_ps(s0, e0);
            s1 = _mm256_add_ps(s1, e1);
        }
        __m256 s8 = _mm256_add_ps(s0, s1); /* s8[j] = acc[j] + acc[j + 8] */
        __m128 q = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
        _Alignas(16) float qv[4];
        _mm_store_ps(qv, q); /* (s0 + s4), (s1 + s5), (s2 + s6), (s3 + s7) */
        float s = (qv[0] + qv[1]) + (qv[2] + qv[3]);
        for (; i < L; i++) {
            float v = sn_red_expf(x[i] - m);
            y[i] = v;
            s += v;
        }
        const __m256 inv = _mm256_set1_ps(1.0f / s);
        for (i = 0; i + 8 <= L; i += 8)
            _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), inv));
        for (; i < L; i++)
            y[i] *= 1.0f / s;
    }
}
#endif

/* Softmax rows of float32: the AVX2 kernel where the CPU has it, the
 * portable one otherwise (avx2 0 forces it; for the tests). */
/* The float32 row kernel of a kind (inner == 1): AVX2 for Softmax where
 * the CPU has it and avx2 allows it. */
static sn_range_fn smx_rows_fn_f32(smx_kind kind, bool avx2) {
#ifdef SMX_HAVE_AVX2
    if (avx2 && kind == SMX_SOFT && sn_cpu_avx2_fma())
        return smx_soft_rows_avx2;
#endif
    (void)kind, (void)avx2;
    return smx_rows_f32;
}

void sn_softmax_rows_f32(const float *x, float *y, int64_t rows, int64_t L, int avx2) {
    smx_job j = {x, y, L, SMX_SOFT};
    smx_rows_fn_f32(SMX_SOFT, avx2 != 0)(&j, 0, rows);
}

/* Along an axis with inner > 1: vectorized over the inner run, with the
 * per-column max and sum in ws (2 * inner values). In-place safe. */
#define SMX_COLS(NAME, T, EXP, LOG)                                                   \
    static void NAME(const T *xa, T *ya, int64_t outer, int64_t L, int64_t inner,     \
                     smx_kind kind, T *m, T *s) {                                     \
        for (int64_t o = 0; o < outer; o++) {                                         \
            const T *x = xa + o * L * inner;                                          \
            T *y = ya + o * L * inner;                                                \
            for (int64_t i = 0; i < inner; i++)                                       \
                m[i] = x[i];                                                          \
            if (kind == SMX_HARD) {                                                   \
                /* s holds the argmax index */                                        \
                for (int64_t i = 0; i < inner; i++)                                   \
                    s[i] = 0;                                                         \
                for (int64_t l = 1; l < L; l++)                                       \
                    for (int64_t i = 0; i < inner; i++)                               \
                        if (x[l * inner + i] > m[i]) {                                \
                            m[i] = x[l * inner + i];                                  \
                            s[i] = (T)l;                                              \
                        }                                                             \
                for (int64_t l = 0; l < L; l++)                                       \
                    for (int64_t i = 0; i < inner; i++)                               \
                        y[l * inner + i] = s[i] == (T)l ? 1 : 0;                      \
                continue;                                                             \
            }                                                                         \
            for (int64_t l = 1; l < L; l++)                                           \
                for (int64_t i = 0; i < inner; i++)                                   \
                    m[i] = x[l * inner + i] > m[i] ? x[l * inner + i] : m[i];         \
            for (int64_t i = 0; i < inner; i++)                                       \
                s[i] = 0;                                                             \
            if (kind == SMX_SOFT) {                                                   \
                for (int64_t l = 0; l < L; l++)                                       \
                    for (int64_t i = 0; i < inner; i++) {                             \
                        T v = EXP(x[l * inner + i] - m[i]);                           \
                        y[l * inner + i] = v;                                         \
                        s[i] += v;                                                    \
                    }                                                                 \
                for (int64_t i = 0; i < inner; i++)                                   \
                    s[i] = 1 / s[i];                                                  \
                for (int64_t l = 0; l < L; l++)                                       \
                    for (int64_t i = 0; i < inner; i++)                               \
                        y[l * inner + i] *= s[i];                                     \
            } else {                                                                  \
                for (int64_t l = 0; l < L; l++)                                       \
                    for (int64_t i = 0; i < inner; i++)                               \
                        s[i] += EXP(x[l * inner + i] - m[i]);                         \
                for (int64_t i = 0; i < inner; i++)                                   \
                    m[i] += LOG(s[i]);                                                \
                for (int64_t l = 0; l < L; l++)                                       \
                    for (int64_t i = 0; i < inner; i++)                               \
                        y[l * inner + i] = x[l * inner + i] - m[i];                   \
            }                                                                         \
        }                                                                             \
    }

SMX_COLS(smx_cols_f32, float, expf, logf)
SMX_COLS(smx_cols_f64, double, exp, log)

int nn_smx_run(sn_kctx *c) {
    const sn_tensor *x = c->in[0];
    sn_tensor *y = c->out[0];
    smx_kind kind = smx_kind_of(c->node);
    int64_t outer, L, inner;
    SN_TRY(smx_geom(c->node, x, &outer, &L, &inner, c->err));
    if (outer * L * inner == 0)
        return SNUG_OK;
    if (x->dtype == SN_F32 || x->dtype == SN_F64) {
        bool f32 = x->dtype == SN_F32;
        if (inner == 1) {
            smx_job j = {x->data, y->data, L, kind};
            int64_t grain = sn_imax(1, 16384 / L);
            sn_pool_for(c->pool, outer, grain, f32 ? smx_rows_fn_f32(kind, true) : smx_rows_f64, &j);
        } else if (f32) {
            float *m = c->ws, *s = (float *)((char *)c->ws + sn_align16((size_t)inner * 8));
            smx_cols_f32(x->data, y->data, outer, L, inner, kind, m, s);
        } else {
            double *m = c->ws, *s = (double *)((char *)c->ws + sn_align16((size_t)inner * 8));
            smx_cols_f64(x->data, y->data, outer, L, inner, kind, m, s);
        }
        return SNUG_OK;
    }
    /* float16 / bfloat16: per column, strided, in float */
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * L * inner + i;
            float m = sn_ld_f32(x->dtype, x->data, base);
            int64_t am = 0;
            for (int64_t l = 1; l < L; l++) {
                float v = sn_ld_f32(x->dtype, x->data, base + l * inner);
                if (v > m) {
                    m = v;
                    am = l;
                }
            }
            float s = 0.0f;
            if (kind != SMX_HARD)
                for (int64_t l = 0; l < L; l++)
                    s += expf(sn_ld_f32(x->dtype, x->data, base + l * inner) - m);
            float ls = logf(s);
            for (int64_t l = 0; l < L; l++) {
                int64_t e = base + l * inner;
                float v = sn_ld_f32(x->dtype, x->data, e), r;
                if (kind == SMX_HARD)
                    r = l == am ? 1.0f : 0.0f;
                else if (kind == SMX_SOFT)
                    r = expf(v - m) / s;
                else
                    r = v - m - ls;
                sn_st_f32(y->dtype, y->data, e, r);
            }
        }
    return SNUG_OK;
}

/* ======================================================================
 * Shared: y = x * a[p] + b[p] per parameter index p over [outer, P, inner]
 * blocks (P channels, or P channel*spatial elements when inner == 1).
 * ====================================================================== */

static void affine_apply(const sn_tensor *x, sn_tensor *y, int64_t outer, int64_t P,
                         int64_t inner, const double *a, const double *b) {
    if (x->dtype == SN_F32) {
        const float *xs = x->data;
        float *ys = y->data;
        float t[SN_RED_LANES];
        for (int64_t o = 0; o < outer; o++)
            for (int64_t p = 0; p < P; p++) {
                const float *xr = xs + (o * P + p) * inner;
                float *yr = ys + (o * P + p) * inner;
                float fa = (float)a[p], fb = (float)b[p];
                int64_t i = 0;
                for (; i + SN_RED_LANES <= inner; i += SN_RED_LANES) {
                    for (int k = 0; k < SN_RED_LANES; k++)
                        t[k] = xr[i + k] * fa + fb;
                    memcpy(yr + i, t, sizeof t);
                }
                for (; i < inner; i++)
                    yr[i] = xr[i] * fa + fb;
            }
        return;
    }
    for (int64_t o = 0; o < outer; o++)
        for (int64_t p = 0; p < P; p++)
            for (int64_t i = 0; i < inner; i++) {
                size_t e = (size_t)((o * P + p) * inner + i);
                sn_store_f64(y->dtype, y->data, e, sn_load_f64(x->dtype, x->data, e) * a[p] + b[p]);
            }
}

/* Mean and population variance of n values at x + off (stride 1), in
 * double (two passes: the mean, then squared deviations). */
static void moments(const sn_tensor *x, int64_t off, int64_t n, double *mean, double *var) {
    if (x->dtype == SN_F32) {
        const float *p = (const float *)x->data + off;
        double acc[8] = {0};
        int64_t i = 0;
        for (; i + 8 <= n; i += 8)
            for (int k = 0; k < 8; k++)
                acc[k] += p[i + k];
        double s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
        for (; i < n; i++)
            s += p[i];
        double m = s / (double)n;
        memset(acc, 0, sizeof acc);
        for (i = 0; i + 8 <= n; i += 8)
            for (int k = 0; k < 8; k++) {
                double d = p[i + k] - m;
                acc[k] += d * d;
            }
        s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
        for (; i < n; i++) {
            double d = p[i] - m;
            s += d * d;
        }
        *mean = m;
        *var = s / (double)n;
        return;
    }
    double s0 = 0;
    for (int64_t i = 0; i < n; i++)
        s0 += sn_load_f64(x->dtype, x->data, (size_t)(off + i));
    double m = s0 / (double)n;
    s0 = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = sn_load_f64(x->dtype, x->data, (size_t)(off + i)) - m;
        s0 += d * d;
    }
    *mean = m;
    *var = s0 / (double)n;
}

static int check_param(const sn_node *n, const sn_tensor *t, const char *what, int64_t want,
                       sn_err *err) {
    if (!t)
        return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "missing input %s", what);
    if (!sn_dtype_is_real(t->dtype))
        return sn_kfail(err, n, SNUG_ERR_TYPE, "%s has unsupported type %s", what,
                        sn_dtype_name(t->dtype));
    int64_t cnt = sn_tensor_numel(t);
    if (want >= 0 && cnt >= 0 && cnt != want)
        return sn_kfail(err, n, SNUG_ERR_SHAPE, "%s has %lld elements, expected %lld", what,
                        (long long)cnt, (long long)want);
    return SNUG_OK;
}

/* ======================================================================
 * BatchNormalization
 * ====================================================================== */

static bool bn_training(const sn_node *n) {
    return n->opset >= 14 && sn_attr_int(n, "training_mode", 0) != 0;
}

/* Parameters per channel (P = C), or per channel and spatial element for
 * the old spatial=0 form (P = C * inner). */
static int bn_params(const sn_node *n, const sn_tensor *const *in, int n_in, int64_t C,
                     int64_t inner, int64_t *P, sn_err *err) {
    const char *names[4] = {"scale", "B", "mean", "var"};
    int64_t cnt = n_in > 1 && in[1] ? sn_tensor_numel(in[1]) : -1;
    *P = C;
    if (n->opset < 9 && sn_attr_int(n, "spatial", 1) == 0 && inner >= 0 && C >= 0)
        *P = C * inner;
    else if (cnt >= 0 && C >= 0 && inner >= 0 && cnt == C * inner && cnt != C)
        *P = C * inner;
    for (int i = 1; i <= 4; i++)
        SN_TRY(check_param(n, i < n_in ? in[i] : NULL, names[i - 1], *P, err));
    return SNUG_OK;
}

int nn_bn_infer(sn_infer_ctx *c) {
    const sn_node *n = c->node;
    const sn_tensor *x = sn_infer_in(c, 0);
    if (!x)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "missing input");
    if (!sn_dtype_is_real(x->dtype))
        return sn_kfail(c->err, n, SNUG_ERR_TYPE, "unsupported input type %s",
                        sn_dtype_name(x->dtype));
    int64_t C = -1, inner = -1, P = -1;
    if (x->rank != SN_RANK_UNKNOWN) {
        if (x->rank < 2)
            return sn_kfail(c->err, n, SNUG_ERR_SHAPE, "input must have rank >= 2, got %d", x->rank);
        C = x->dims[1];
        inner = sn_dims_prod(x->dims, 2, x->rank);
    }
    SN_TRY(bn_params(n, c->in, c->n_in, C, inner, &P, c->err));
    sn_set_out(c->out[0], x->dtype, x->rank, x->dims);
    int64_t pd[SN_MAX_RANK];
    const sn_tensor *mean = c->in[3];
    for (int o = 1; o < c->n_out; o++) {
        if (!c->out[o])
            continue;
        if (n->opset >= 14 && !bn_training(n))
            return sn_kfail(c->err, n, SNUG_ERR_INVALID_ARG,
                            "outputs running_mean/var need training_mode=1");
        memcpy(pd, mean->dims, sizeof pd);
        sn_set_out(c->out[o], mean->dtype, mean->rank, pd);
    }
    return SNUG_OK;
}

/* Affine a, b and the statistics used, per parameter. */
static size_t bn_ws(const sn_node *n, const sn_tensor *const *in, int n_in) {
    const sn_tensor *x = in[0];
    int64_t P;
    sn_err err;
    if (x->rank < 2 || bn_params(n, in, n_in, x->dims[1], sn_dims_prod(x->dims, 2, x->rank), &P,
                                 &err) != SNUG_OK || P < 0)
        return 0;
    return 4 * sn_align16((size_t)P * sizeof(double));
}

size_t nn_bn_estimate(const sn_infer_ctx *c) { return bn_ws(c->node, c->in, c->n_in); }

int nn_bn_prepare(sn_prep_ctx *c) {
    c->workspace = bn_ws(c->node, c->in, c->n_in);
    return SNUG_OK;
}

int nn_bn_run(sn_kctx *c) {
    const sn_node *n = c->node;
    const sn_tensor *x = c->in[0];
    int64_t N = x->dims[0], C = x->dims[1], inner = sn_dims_prod(x->dims, 2, x->rank), P;
    SN_TRY(bn_params(n, c->in, c->n_in, C, inner, &P, c->err));
    if (P != C)
        inner = 1; /* per-element parameters: blocks of one */
    size_t stride = sn_align16((size_t)P * sizeof(double));
    double *a = c->ws;
    double *b = (double *)((char *)c->ws + stride);
    double *bm = (double *)((char *)c->ws + 2 * stride);
    double *bv = (double *)((char *)c->ws + 3 * stride);
    double eps = sn_attr_float(n, "epsilon", 1e-5f);
    const sn_tensor *sc = c->in[1], *bi = c->in[2], *mt = c->in[3], *vt = c->in[4];
    bool train = bn_training(n);
    for (int64_t p = 0; p < P; p++) {
        bm[p] = sn_load_f64(mt->dtype, mt->data, (size_t)p);
        bv[p] = sn_load_f64(vt->dtype, vt->data, (size_t)p);
    }
    if (train) {
        /* batch statistics over N and the spatial dims (population var) */
        double mom = sn_attr_float(n, "momentum", 0.9f);
        int64_t cnt = N * inner;
        for (int64_t p = 0; p < P; p++) {
            double s = 0, s2 = 0;
            for (int64_t k = 0; k < N; k++)
                for (int64_t i = 0; i < inner; i++)
                    s += sn_load_f64(x->dtype, x->data, (size_t)((k * P + p) * inner + i));
            double m = cnt ? s / (double)cnt : 0;
            for (int64_t k = 0; k < N; k++)
                for (int64_t i = 0; i < inner; i++) {
                    double d = sn_load_f64(x->dtype, x->data, (size_t)((k * P + p) * inner + i)) - m;
                    s2 += d * d;
                }
            double v = cnt ? s2 / (double)cnt : 0;
            if (c->n_out > 1 && c->out[1])
                sn_store_f64(c->out[1]->dtype, c->out[1]->data, (size_t)p, bm[p] * mom + m * (1 - mom));
            if (c->n_out > 2 && c->out[2])
                sn_store_f64(c->out[2]->dtype, c->out[2]->data, (size_t)p, bv[p] * mom + v * (1 - mom));
            bm[p] = m;
            bv[p] = v;
        }
    } else {
        /* inference: extra outputs (old opsets) echo the running stats */
        for (int o = 1; o < c->n_out; o++)
            if (c->out[o])
                for (int64_t p = 0; p < P; p++)
                    sn_store_f64(c->out[o]->dtype, c->out[o]->data, (size_t)p, o % 2 ? bm[p] : bv[p]);
    }
    for (int64_t p = 0; p < P; p++) {
        double s = sn_load_f64(sc->dtype, sc->data, (size_t)p);
        a[p] = s / sqrt(bv[p] + eps);
        b[p] = sn_load_f64(bi->dtype, bi->data, (size_t)p) - bm[p] * a[p];
    }
    affine_apply(x, c->out[0], N, P, inner, a, b);
    return SNUG_OK;
}

/* ======================================================================
 * InstanceNormalization
 * ====================================================================== */

int nn_in_infer(sn_infer_ctx *c) {
    const sn_node *n = c->node;
    const sn_tensor *x = sn_infer_in(c, 0);
    if (!x)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "missing input");
    if (!sn_dtype_is_real(x->dtype))
        return sn_kfail(c->err, n, SNUG_ERR_TYPE, "unsupported input type %s",
                        sn_dtype_name(x->dtype));
    int64_t C = -1;
    if (x->rank != SN_RANK_UNKNOWN) {
        if (x->rank < 2)
            return sn_kfail(c->err, n, SNUG_ERR_SHAPE, "input must have rank >= 2, got %d", x->rank);
        C = x->dims[1];
    }
    SN_TRY(check_param(n, sn_has_in(c->in, c->n_in, 1) ? c->in[1] : NULL, "scale", C, c->err));
    SN_TRY(check_param(n, sn_has_in(c->in, c->n_in, 2) ? c->in[2] : NULL, "B", C, c->err));
    sn_set_out(c->out[0], x->dtype, x->rank, x->dims);
    return SNUG_OK;
}

/* Per-channel affine a, b of one sample (InstanceNormalization and
 * GroupNormalization). */
static size_t chan_ws(const sn_tensor *x) {
    if (x->rank < 2 || x->dims[1] < 0)
        return 0;
    return 2 * sn_align16((size_t)x->dims[1] * sizeof(double));
}

size_t nn_chan_estimate(const sn_infer_ctx *c) { return chan_ws(c->in[0]); }

int nn_chan_prepare(sn_prep_ctx *c) {
    c->workspace = chan_ws(c->in[0]);
    return SNUG_OK;
}

int nn_in_run(sn_kctx *c) {
    const sn_tensor *x = c->in[0], *sc = c->in[1], *bi = c->in[2];
    int64_t N = x->dims[0], C = x->dims[1], inner = sn_dims_prod(x->dims, 2, x->rank);
    double eps = sn_attr_float(c->node, "epsilon", 1e-5f);
    double *a = c->ws;
    double *b = (double *)((char *)c->ws + sn_align16((size_t)C * sizeof(double)));
    if (inner == 0)
        return SNUG_OK;
    /* one (n) at a time: a/b hold that sample's per-channel affine */
    for (int64_t k = 0; k < N; k++) {
        for (int64_t ch = 0; ch < C; ch++) {
            double m, v;
            moments(x, (k * C + ch) * inner, inner, &m, &v);
            a[ch] = sn_load_f64(sc->dtype, sc->data, (size_t)ch) / sqrt(v + eps);
            b[ch] = sn_load_f64(bi->dtype, bi->data, (size_t)ch) - m * a[ch];
        }
        sn_tensor xs = *x, ys = *c->out[0];
        size_t off = (size_t)(k * C * inner) * sn_dtype_size(x->dtype);
        xs.data = (char *)x->data + off;
        ys.data = (char *)ys.data + off;
        affine_apply(&xs, &ys, 1, C, inner, a, b);
    }
    return SNUG_OK;
}

/* ======================================================================
 * LayerNormalization (opset 17)
 * ====================================================================== */

static int ln_geom(const sn_node *n, const sn_tensor *x, int *axis, sn_err *err) {
    int64_t ax = sn_attr_int(n, "axis", -1);
    if (!sn_axis_norm(ax, x->rank, axis))
        return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "axis %lld out of range for rank %d",
                        (long long)ax, x->rank);
    return SNUG_OK;
}

/* A parameter (Scale or B) must broadcast to the normalized shape x[axis:]. */
static int ln_check_bcast(const sn_node *n, const sn_tensor *x, int axis, const sn_tensor *t,
                          const char *what, sn_err *err) {
    if (!sn_dtype_is_real(t->dtype))
        return sn_kfail(err, n, SNUG_ERR_TYPE, "%s has unsupported type %s", what,
                        sn_dtype_name(t->dtype));
    if (t->rank == SN_RANK_UNKNOWN)
        return SNUG_OK;
    int nr = x->rank - axis;
    if (t->rank > nr) {
        for (int i = 0; i < t->rank - nr; i++)
            if (t->dims[i] != 1)
                return sn_kfail(err, n, SNUG_ERR_SHAPE, "%s does not broadcast to x[%d:]", what, axis);
    }
    for (int i = 0; i < t->rank && i < nr; i++) {
        int64_t td = t->dims[t->rank - 1 - i], xd = x->dims[x->rank - 1 - i];
        if (td >= 0 && xd >= 0 && td != 1 && td != xd)
            return sn_kfail(err, n, SNUG_ERR_SHAPE, "%s does not broadcast to x[%d:]", what, axis);
    }
    return SNUG_OK;
}

int nn_ln_infer(sn_infer_ctx *c) {
    const sn_node *n = c->node;
    const sn_tensor *x = sn_infer_in(c, 0);
    if (!x)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "missing input");
    if (!sn_dtype_is_real(x->dtype))
        return sn_kfail(c->err, n, SNUG_ERR_TYPE, "unsupported input type %s",
                        sn_dtype_name(x->dtype));
    int64_t st = sn_attr_int(n, "stash_type", 1);
    if (!sn_dtype_valid((int)st) || !sn_dtype_is_real((sn_dtype)st))
        return sn_kfail(c->err, n, SNUG_ERR_INVALID_ARG, "bad stash_type %lld", (long long)st);
    if (!sn_has_in(c->in, c->n_in, 1))
        return sn_kfail(c->err, n, SNUG_ERR_INVALID_ARG, "missing input Scale");
    sn_set_out(c->out[0], x->dtype, x->rank, x->dims);
    if (x->rank == SN_RANK_UNKNOWN) {
        for (int o = 1; o < 3 && o < c->n_out; o++)
            if (c->out[o]) {
                c->out[o]->kind = SN_KIND_TENSOR;
                c->out[o]->dtype = (sn_dtype)st;
                c->out[o]->rank = SN_RANK_UNKNOWN;
            }
        return SNUG_OK;
    }
    int axis = 0;
    SN_TRY(ln_geom(n, x, &axis, c->err));
    SN_TRY(ln_check_bcast(n, x, axis, c->in[1], "Scale", c->err));
    if (sn_has_in(c->in, c->n_in, 2))
        SN_TRY(ln_check_bcast(n, x, axis, c->in[2], "B", c->err));
    int64_t d[SN_MAX_RANK];
    for (int i = 0; i < x->rank; i++)
        d[i] = i < axis ? x->dims[i] : 1;
    for (int o = 1; o < 3 && o < c->n_out; o++)
        sn_set_out(c->out[o], (sn_dtype)st, x->rank, d);
    return SNUG_OK;
}

/* Index into a parameter broadcast over the normalized shape x[axis:] of
 * size D, for flat position j in it. */
static int64_t ln_pidx(const sn_tensor *x, int axis, const sn_tensor *t, int64_t D, int64_t j) {
    int64_t cnt = sn_tensor_numel(t);
    if (cnt == D)
        return j;
    if (cnt == 1)
        return 0;
    int64_t idx = 0, tstride = 1;
    for (int i = x->rank - 1, k = t->rank - 1; i >= axis; i--, k--) {
        int64_t xd = x->dims[i], coord = j % xd;
        j /= xd;
        if (k >= 0) {
            if (t->dims[k] != 1)
                idx += coord * tstride;
            tstride *= t->dims[k];
        }
    }
    return idx;
}

int nn_ln_run(sn_kctx *c) {
    const sn_node *n = c->node;
    const sn_tensor *x = c->in[0], *sc = c->in[1];
    const sn_tensor *bt = sn_has_in(c->in, c->n_in, 2) ? c->in[2] : NULL;
    sn_tensor *y = c->out[0];
    sn_tensor *mo = c->n_out > 1 ? c->out[1] : NULL, *so = c->n_out > 2 ? c->out[2] : NULL;
    int axis = 0;
    SN_TRY(ln_geom(n, x, &axis, c->err));
    int64_t R = sn_dims_prod(x->dims, 0, axis), D = sn_dims_prod(x->dims, axis, x->rank);
    double eps = sn_attr_float(n, "epsilon", 1e-5f);
    bool fast = x->dtype == SN_F32 && sc->dtype == SN_F32 && sn_tensor_numel(sc) == D &&
                (!bt || (bt->dtype == SN_F32 && sn_tensor_numel(bt) == D));
    for (int64_t r = 0; r < R; r++) {
        double m = 0, v = 0;
        if (D > 0)
            moments(x, r * D, D, &m, &v);
        double inv = 1.0 / sqrt(v + eps);
        if (mo)
            sn_store_f64(mo->dtype, mo->data, (size_t)r, m);
        if (so)
            sn_store_f64(so->dtype, so->data, (size_t)r, inv);
        if (fast) {
            const float *xr = (const float *)x->data + r * D, *s = sc->data;
            const float *b = bt ? bt->data : NULL;
            float *yr = (float *)y->data + r * D;
            float fm = (float)m, fi = (float)inv, t[SN_RED_LANES];
            int64_t j = 0;
            if (b)
                for (; j + SN_RED_LANES <= D; j += SN_RED_LANES) {
                    for (int k = 0; k < SN_RED_LANES; k++)
                        t[k] = (xr[j + k] - fm) * fi * s[j + k] + b[j + k];
                    memcpy(yr + j, t, sizeof t);
                }
            else
                for (; j + SN_RED_LANES <= D; j += SN_RED_LANES) {
                    for (int k = 0; k < SN_RED_LANES; k++)
                        t[k] = (xr[j + k] - fm) * fi * s[j + k];
                    memcpy(yr + j, t, sizeof t);
                }
            for (; j < D; j++)
                yr[j] = (xr[j] - fm) * fi * s[j] + (b ? b[j] : 0.0f);
            continue;
        }
        for (int64_t j = 0; j < D; j++) {
            size_t e = (size_t)(r * D + j);
            double s = sn_load_f64(sc->dtype, sc->data, (size_t)ln_pidx(x, axis, sc, D, j));
            double b = bt ? sn_load_f64(bt->dtype, bt->data, (size_t)ln_pidx(x, axis, bt, D, j)) : 0;
            sn_store_f64(y->dtype, y->data, e, (sn_load_f64(x->dtype, x->data, e) - m) * inv * s + b);
        }
    }
    return SNUG_OK;
}

/* ======================================================================
 * GroupNormalization (18; 21 made scale/bias per channel)
 * ====================================================================== */

static int gn_check(const sn_infer_ctx *c, int64_t *G) {
    const sn_node *n = c->node;
    const sn_tensor *x = sn_infer_in(c, 0);
    if (!x)
        return sn_kfail(c->err, n, SNUG_ERR_INVALID_ARG, "missing input");
    *G = sn_attr_int(n, "num_groups", -1);
    if (*G <= 0)
        return sn_kfail(c->err, n, SNUG_ERR_INVALID_ARG, "num_groups must be positive");
    if (!sn_dtype_is_real(x->dtype))
        return sn_kfail(c->err, n, SNUG_ERR_TYPE, "unsupported input type %s",
                        sn_dtype_name(x->dtype));
    if (x->rank == SN_RANK_UNKNOWN)
        return SNUG_OK;
    if (x->rank < 2)
        return sn_kfail(c->err, n, SNUG_ERR_SHAPE, "input must have rank >= 2");
    int64_t C = x->dims[1];
    if (C >= 0 && C % *G)
        return sn_kfail(c->err, n, SNUG_ERR_SHAPE, "channels %lld not divisible by num_groups %lld",
                        (long long)C, (long long)*G);
    for (int i = 1; i <= 2; i++) {
        const sn_tensor *t = sn_has_in(c->in, c->n_in, i) ? c->in[i] : NULL;
        SN_TRY(check_param(n, t, i == 1 ? "scale" : "bias", -1, c->err));
        int64_t cnt = sn_tensor_numel(t);
        if (cnt >= 0 && C >= 0 && cnt != C && (n->opset >= 21 || cnt != *G))
            return sn_kfail(c->err, n, SNUG_ERR_SHAPE, "%s has %lld elements, expected %lld",
                            i == 1 ? "scale" : "bias", (long long)cnt,
                            (long long)(n->opset >= 21 ? C : *G));
    }
    return SNUG_OK;
}

int nn_gn_infer(sn_infer_ctx *c) {
    int64_t G;
    SN_TRY(gn_check(c, &G));
    sn_set_out(c->out[0], c->in[0]->dtype, c->in[0]->rank, c->in[0]->dims);
    return SNUG_OK;
}

int nn_gn_run(sn_kctx *c) {
    const sn_node *n = c->node;
    const sn_tensor *x = c->in[0], *sc = c->in[1], *bi = c->in[2];
    int64_t G = sn_attr_int(n, "num_groups", 1);
    int64_t N = x->dims[0], C = x->dims[1], inner = sn_dims_prod(x->dims, 2, x->rank);
    int64_t CG = C / G;
    bool per_ch = sn_tensor_numel(sc) == C && (n->opset >= 21 || G == C || sn_tensor_numel(sc) != G);
    double eps = sn_attr_float(n, "epsilon", 1e-5f);
    double *a = c->ws;
    double *b = (double *)((char *)c->ws + sn_align16((size_t)C * sizeof(double)));
    if (inner * CG == 0)
        return SNUG_OK;
    for (int64_t k = 0; k < N; k++) {
        for (int64_t g = 0; g < G; g++) {
            double m, v;
            moments(x, (k * C + g * CG) * inner, CG * inner, &m, &v);
            double inv = 1.0 / sqrt(v + eps);
            for (int64_t ch = g * CG; ch < (g + 1) * CG; ch++) {
                size_t pi = (size_t)(per_ch ? ch : g);
                a[ch] = sn_load_f64(sc->dtype, sc->data, pi) * inv;
                b[ch] = sn_load_f64(bi->dtype, bi->data, pi) - m * a[ch];
            }
        }
        sn_tensor xs = *x, ys = *c->out[0];
        size_t off = (size_t)(k * C * inner) * sn_dtype_size(x->dtype);
        xs.data = (char *)x->data + off;
        ys.data = (char *)ys.data + off;
        affine_apply(&xs, &ys, 1, C, inner, a, b);
    }
    return SNUG_OK;
}

/* ======================================================================
 * LRN: y = x / (bias + alpha/size * sum of x^2 over nearby channels)^beta
 * ====================================================================== */

int nn_lrn_infer(sn_infer_ctx *c) {
    const sn_node *n = c->node;
    const sn_tensor *x = sn_infer_in(c, 0);
    if (!x)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "missing input");
    if (!sn_dtype_is_real(x->dtype))
        return sn_kfail(c->err, n, SNUG_ERR_TYPE, "unsupported input type %s",
                        sn_dtype_name(x->dtype));
    if (sn_attr_int(n, "size", 0) <= 0)
        return sn_kfail(c->err, n, SNUG_ERR_INVALID_ARG, "attribute size must be positive");
    if (x->rank != SN_RANK_UNKNOWN && x->rank < 2)
        return sn_kfail(c->err, n, SNUG_ERR_SHAPE, "input must have rank >= 2");
    sn_set_out(c->out[0], x->dtype, x->rank, x->dims);
    return SNUG_OK;
}

int nn_lrn_run(sn_kctx *c) {
    const sn_node *n = c->node;
    const sn_tensor *x = c->in[0];
    sn_tensor *y = c->out[0];
    int64_t size = sn_attr_int(n, "size", 1);
    double alpha = sn_attr_float(n, "alpha", 1e-4f), beta = sn_attr_float(n, "beta", 0.75f);
    double bias = sn_attr_float(n, "bias", 1.0f);
    int64_t N = x->dims[0], C = x->dims[1], inner = sn_dims_prod(x->dims, 2, x->rank);
    int64_t lo = (size - 1) / 2, hi = size / 2; /* floor and ceil of (size-1)/2 */
    double k = alpha / (double)size;
    for (int64_t b = 0; b < N; b++)
        for (int64_t ch = 0; ch < C; ch++) {
            int64_t c0 = sn_imax(0, ch - lo), c1 = sn_imin(C - 1, ch + hi);
            for (int64_t i = 0; i < inner; i++) {
                double s = 0;
                for (int64_t cc = c0; cc <= c1; cc++) {
                    double v = sn_load_f64(x->dtype, x->data, (size_t)((b * C + cc) * inner + i));
                    s += v * v;
                }
                size_t e = (size_t)((b * C + ch) * inner + i);
                double v = sn_load_f64(x->dtype, x->data, e);
                sn_store_f64(y->dtype, y->data, e, v / pow(bias + k * s, beta));
            }
        }
    return SNUG_OK;
}

/* ---- LpNormalization (1, 22) ------------------------------------------------------------
 * y = x / ||x||_p along axis (p 1 or 2). A zero norm gives NaN, as 0/0 does
 * in the reference. */

int nn_lpnorm_infer(sn_infer_ctx *c) {
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

int nn_lpnorm_run(sn_kctx *c) {
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
