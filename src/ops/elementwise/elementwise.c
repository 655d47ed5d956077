/* Element-wise family: n-ary ops with multidirectional (numpy) broadcasting
 * (arithmetic, comparison, logic, bit ops, Max/Min/Sum/Mean, Where), the
 * broadcast iterator they share, and the family's op table. Unary ops live
 * in unary.c, Cast/Identity/Dropout in cast.c. */
/* The element-wise loops are written to vectorize; -O2 on GCC 12 does not
 * (very-cheap cost model), so ask for it here. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#endif
#include <math.h>
#include <string.h>

#include "ops/elementwise/elementwise.h"

/* ---- the broadcast iterator ------------------------------------------- */

void ew_plan_init(ew_plan *p, int out_rank, const int64_t *out_dims, int nin,
                  const int *ranks, const int64_t *const *dims) {
    memset(p, 0, sizeof *p);
    p->nin = nin;
    p->numel = 1;
    int64_t run[EW_MAX_IN]; /* contiguous stride of each input at the current dim */
    for (int k = 0; k < nin; k++)
        run[k] = 1;
    /* Walk dims from the innermost, building strides and merging a dim into
     * the one inside it when every input's stride continues it. */
    int nd = 0;
    int64_t rd[SN_MAX_RANK], rst[EW_MAX_IN][SN_MAX_RANK]; /* reversed order */
    for (int d = out_rank - 1; d >= 0; d--) {
        int64_t od = out_dims[d];
        p->numel *= od;
        if (od == 1)
            continue;
        int64_t s[EW_MAX_IN];
        for (int k = 0; k < nin; k++) {
            int id = d - (out_rank - ranks[k]);
            int64_t kd = id >= 0 ? dims[k][id] : 1;
            s[k] = kd == 1 ? 0 : run[k];
            run[k] *= kd;
        }
        bool merge = nd > 0;
        for (int k = 0; k < nin && merge; k++)
            merge = s[k] == rst[k][nd - 1] * rd[nd - 1];
        if (merge) {
            rd[nd - 1] *= od;
        } else {
            rd[nd] = od;
            for (int k = 0; k < nin; k++)
                rst[k][nd] = s[k];
            nd++;
        }
    }
    if (nd == 0) { /* scalar output, or all dims 1 */
        rd[0] = 1;
        for (int k = 0; k < nin; k++)
            rst[k][0] = 0;
        nd = 1;
    }
    p->nd = nd;
    for (int i = 0; i < nd; i++) {
        p->dims[i] = rd[nd - 1 - i];
        for (int k = 0; k < nin; k++)
            p->st[k][i] = rst[k][nd - 1 - i];
    }
}

typedef struct ew_job {
    const ew_plan *p;
    ew_kern k;
    const ew_args *a;
    char *o;
    size_t osz;
    const char *in[EW_MAX_IN];
    size_t isz[EW_MAX_IN];
} ew_job;

static void ew_plan_range(void *arg, int64_t begin, int64_t end) {
    const ew_job *j = arg;
    const ew_plan *p = j->p;
    int nd = p->nd, nin = p->nin;
    int64_t idx[SN_MAX_RANK], off[EW_MAX_IN] = {0}, inner[EW_MAX_IN];
    int64_t rem = begin;
    for (int d = nd - 1; d >= 0; d--) {
        idx[d] = rem % p->dims[d];
        rem /= p->dims[d];
        for (int k = 0; k < nin; k++)
            off[k] += idx[d] * p->st[k][d];
    }
    for (int k = 0; k < nin; k++)
        inner[k] = p->st[k][nd - 1];
    int64_t last = p->dims[nd - 1];
    for (int64_t i = begin; i < end;) {
        int64_t m = sn_imin(last - idx[nd - 1], end - i);
        const void *ptr[EW_MAX_IN];
        for (int k = 0; k < nin; k++)
            ptr[k] = j->in[k] + (size_t)off[k] * j->isz[k];
        j->k(j->a, j->o + (size_t)i * j->osz, ptr, inner, m);
        i += m;
        idx[nd - 1] += m;
        for (int k = 0; k < nin; k++)
            off[k] += m * inner[k];
        /* carry into the outer dims */
        for (int d = nd - 1; d > 0 && idx[d] == p->dims[d]; d--) {
            idx[d] = 0;
            idx[d - 1]++;
            for (int k = 0; k < nin; k++)
                off[k] += p->st[k][d - 1] - p->dims[d] * p->st[k][d];
        }
    }
}

void ew_plan_run(const ew_plan *p, sn_pool *pool, ew_kern k, const ew_args *a,
                 void *o, size_t osz, const void *const *in, const size_t *isz) {
    if (p->numel <= 0)
        return;
    ew_job j = {.p = p, .k = k, .a = a, .o = o, .osz = osz};
    for (int i = 0; i < p->nin; i++) {
        j.in[i] = in[i];
        j.isz[i] = isz[i];
    }
    if (pool && p->numel >= 2 * EW_GRAIN)
        sn_pool_for(pool, p->numel, EW_GRAIN, ew_plan_range, &j);
    else
        ew_plan_range(&j, 0, p->numel);
}

typedef struct ew_ujob {
    ew_ukern k;
    const ew_args *a;
    char *o;
    const char *x;
    size_t osz, xsz;
} ew_ujob;

static void ew_unary_range(void *arg, int64_t begin, int64_t end) {
    const ew_ujob *j = arg;
    j->k(j->a, j->o + (size_t)begin * j->osz, j->x + (size_t)begin * j->xsz, end - begin);
}

void ew_unary_run(sn_pool *pool, ew_ukern k, const ew_args *a, void *o, size_t osz,
                  const void *x, size_t xsz, int64_t n, int64_t grain) {
    if (n <= 0)
        return;
    ew_ujob j = {k, a, o, x, osz, xsz};
    if (pool && n >= 2 * grain)
        sn_pool_for(pool, n, grain, ew_unary_range, &j);
    else
        ew_unary_range(&j, 0, n);
}

/* ---- kernels ----------------------------------------------------------- */

/* Type lists: X(suffix, C type, unsigned C type of the same width, dtype, ...). */
#define EW_FLOATS(X, ...) X(f32, float, float, SN_F32, __VA_ARGS__) X(f64, double, double, SN_F64, __VA_ARGS__)
#define EW_SINTS(X, ...)                                                                  \
    X(i8, int8_t, uint8_t, SN_I8, __VA_ARGS__) X(i16, int16_t, uint16_t, SN_I16, __VA_ARGS__) \
    X(i32, int32_t, uint32_t, SN_I32, __VA_ARGS__) X(i64, int64_t, uint64_t, SN_I64, __VA_ARGS__)
#define EW_UINTS(X, ...)                                                                     \
    X(u8, uint8_t, uint8_t, SN_U8, __VA_ARGS__) X(u16, uint16_t, uint16_t, SN_U16, __VA_ARGS__) \
    X(u32, uint32_t, uint32_t, SN_U32, __VA_ARGS__) X(u64, uint64_t, uint64_t, SN_U64, __VA_ARGS__)
#define EW_BOOLS(X, ...) X(b8, uint8_t, uint8_t, SN_BOOL, __VA_ARGS__)
#define EW_INTS(X, ...) EW_SINTS(X, __VA_ARGS__) EW_UINTS(X, __VA_ARGS__)
#define EW_NUMS(X, ...) EW_FLOATS(X, __VA_ARGS__) EW_INTS(X, __VA_ARGS__)

/* A binary kernel: x, y are the operands (type T; U its unsigned twin),
 * EXPR the result; four loops so each case vectorizes. */
#define EW_BIN_K(fname, TI, UI, TOUT, EXPR)                                              \
    static void fname(const ew_args *A, void *o_, const void *const *in, const int64_t *st, \
                      int64_t n) {                                                       \
        typedef TI T;                                                                    \
        typedef UI U;                                                                    \
        (void)A;                                                                         \
        (void)sizeof(U);                                                                 \
        TOUT *o = o_;                                                                    \
        const T *a = in[0], *b = in[1];                                                  \
        if ((const void *)o == (const void *)a && st[0]) {                               \
            /* in place: one pointer, so the alias check only involves b */              \
            T *io = (T *)o_;                                                             \
            if (st[1]) {                                                                 \
                for (int64_t i = 0; i < n; i++) {                                        \
                    T x = io[i], y = b[i];                                               \
                    io[i] = (T)(EXPR);                                                   \
                }                                                                        \
            } else {                                                                     \
                T y = b[0];                                                              \
                for (int64_t i = 0; i < n; i++) {                                        \
                    T x = io[i];                                                         \
                    io[i] = (T)(EXPR);                                                   \
                }                                                                        \
            }                                                                            \
        } else if (st[0] && st[1]) {                                                     \
            for (int64_t i = 0; i < n; i++) {                                            \
                T x = a[i], y = b[i];                                                    \
                o[i] = (TOUT)(EXPR);                                                     \
            }                                                                            \
        } else if (st[1]) {                                                              \
            T x = a[0];                                                                  \
            for (int64_t i = 0; i < n; i++) {                                            \
                T y = b[i];                                                              \
                o[i] = (TOUT)(EXPR);                                                     \
            }                                                                            \
        } else if (st[0]) {                                                              \
            T y = b[0];                                                                  \
            for (int64_t i = 0; i < n; i++) {                                            \
                T x = a[i];                                                              \
                o[i] = (TOUT)(EXPR);                                                     \
            }                                                                            \
        } else {                                                                         \
            T x = a[0], y = b[0];                                                        \
            TOUT v = (TOUT)(EXPR);                                                       \
            for (int64_t i = 0; i < n; i++)                                              \
                o[i] = v;                                                                \
        }                                                                                \
    }
#define EW_GEN_K(sfx, TI, UI, DT, op, TOUT, EXPR) EW_BIN_K(op##_##sfx, TI, UI, TOUT, EXPR)
#define EW_GEN_E(sfx, TI, UI, DT, op, ...) [DT] = op##_##sfx,

static inline int64_t ew_imod(int64_t x, int64_t y, int fmod_) {
    if (y == -1)
        return 0;
    int64_t r = x % y;
    if (!fmod_ && r != 0 && ((r < 0) != (y < 0)))
        r += y;
    return r;
}
static inline double ew_fmod(double x, double y, int fmod_) {
    double r = fmod(x, y);
    if (!fmod_ && r != 0 && ((r < 0) != (y < 0)))
        r += y;
    return r;
}
static inline int64_t ew_idiv(int64_t x, int64_t y) {
    return y == -1 ? (int64_t)(0 - (uint64_t)x) : x / y;
}
/* Integer power with wrap-around; negative exponents give 1/x truncated. */
static inline int64_t ew_ipow(int64_t x, int64_t y) {
    if (y < 0)
        return x == 1 ? 1 : x == -1 ? ((y & 1) ? -1 : 1) : 0;
    uint64_t r = 1, b = (uint64_t)x;
    while (y) {
        if (y & 1)
            r *= b;
        b *= b;
        y >>= 1;
    }
    return (int64_t)r;
}
static inline uint64_t ew_upow(uint64_t x, uint64_t y) {
    uint64_t r = 1;
    while (y) {
        if (y & 1)
            r *= x;
        x *= x;
        y >>= 1;
    }
    return r;
}

/* arithmetic (integers wrap, computed unsigned to stay defined) */
EW_FLOATS(EW_GEN_K, add, T, x + y)
EW_INTS(EW_GEN_K, add, T, (U)x + (U)y)
EW_FLOATS(EW_GEN_K, sub, T, x - y)
EW_INTS(EW_GEN_K, sub, T, (U)x - (U)y)
EW_FLOATS(EW_GEN_K, mul, T, x * y)
EW_INTS(EW_GEN_K, mul, T, 1u * (U)x * (U)y)
EW_FLOATS(EW_GEN_K, div, T, x / y)
EW_SINTS(EW_GEN_K, div, T, ew_idiv(x, y))
EW_UINTS(EW_GEN_K, div, T, x / y)
EW_FLOATS(EW_GEN_K, mod, T, ew_fmod(x, y, A->flag))
EW_SINTS(EW_GEN_K, mod, T, ew_imod(x, y, A->flag))
EW_UINTS(EW_GEN_K, mod, T, x % y)
/* x^2 (RMSNorm) as one multiply: the same correctly rounded result, far
 * cheaper; a broadcast exponent 2 gets a loop of its own, which vectorizes */
EW_BIN_K(pow_any_f32, float, float, float, y == 2.0f ? x * x : powf(x, y))
EW_BIN_K(pow_sq_f32, float, float, float, ((void)y, x * x))
static void pow_f32(const ew_args *A, void *o, const void *const *in, const int64_t *st,
                    int64_t n) {
    bool sq = !st[1] && *(const float *)in[1] == 2.0f;
    (sq ? pow_sq_f32 : pow_any_f32)(A, o, in, st, n);
}
EW_BIN_K(pow_f64, double, double, double, pow(x, y))
EW_SINTS(EW_GEN_K, pow, T, ew_ipow(x, y))
EW_UINTS(EW_GEN_K, pow, T, ew_upow(x, y))
EW_FLOATS(EW_GEN_K, max, T, (x > y || x != x) ? x : y)
EW_INTS(EW_GEN_K, max, T, x > y ? x : y)
EW_FLOATS(EW_GEN_K, min, T, (x < y || x != x) ? x : y)
EW_INTS(EW_GEN_K, min, T, x < y ? x : y)
EW_FLOATS(EW_GEN_K, prelu, T, x < 0 ? x * y : x)
EW_SINTS(EW_GEN_K, prelu, T, x < 0 ? (T)(1u * (U)x * (U)y) : x)
EW_UINTS(EW_GEN_K, prelu, T, ((void)y, x))

/* comparisons and logic (bool is one byte, 0 or 1) */
EW_NUMS(EW_GEN_K, eq, uint8_t, x == y)
EW_BOOLS(EW_GEN_K, eq, uint8_t, (x != 0) == (y != 0))
EW_NUMS(EW_GEN_K, gt, uint8_t, x > y)
EW_NUMS(EW_GEN_K, ge, uint8_t, x >= y)
EW_NUMS(EW_GEN_K, lt, uint8_t, x < y)
EW_NUMS(EW_GEN_K, le, uint8_t, x <= y)
EW_BOOLS(EW_GEN_K, and, uint8_t, (x != 0) & (y != 0))
EW_BOOLS(EW_GEN_K, or, uint8_t, (x != 0) | (y != 0))
EW_BOOLS(EW_GEN_K, xor, uint8_t, (x != 0) ^ (y != 0))
EW_INTS(EW_GEN_K, band, T, x & y)
EW_INTS(EW_GEN_K, bor, T, x | y)
EW_INTS(EW_GEN_K, bxor, T, x ^ y)
EW_UINTS(EW_GEN_K, shift, T, y >= 8 * sizeof(T) ? 0 : A->flag ? (U)x << y : x >> y)
/* signed: shifts past the width (or negative) give 0, or -1 shifting a
 * negative value right; left shifts act on the bits */
EW_SINTS(EW_GEN_K, shift, T,
         (y < 0 || (int64_t)y >= (int64_t)(8 * sizeof(T)))
             ? (A->flag || x >= 0 ? 0 : -1)
             : A->flag ? (T)((U)x << y) : (T)(x >> y))

static void eq_str(const ew_args *A, void *o_, const void *const *in, const int64_t *st, int64_t n) {
    (void)A;
    uint8_t *o = o_;
    const sn_string *a = in[0], *b = in[1];
    for (int64_t i = 0; i < n; i++) {
        const sn_string *x = &a[i * st[0]], *y = &b[i * st[1]];
        o[i] = x->len == y->len && (x->len == 0 || !memcmp(x->ptr, y->ptr, x->len));
    }
}

#define EW_TABLE(op, LISTS) static const ew_kern k_##op[SN_DTYPE_COUNT] = {LISTS(EW_GEN_E, op)};
#define EW_L_NUMS(X, op) EW_NUMS(X, op)
#define EW_L_INTS(X, op) EW_INTS(X, op)
#define EW_L_BOOLS(X, op) EW_BOOLS(X, op)
#define EW_L_NUMS_BOOLS(X, op) EW_NUMS(X, op) EW_BOOLS(X, op)
EW_TABLE(add, EW_L_NUMS)
EW_TABLE(sub, EW_L_NUMS)
EW_TABLE(mul, EW_L_NUMS)
EW_TABLE(div, EW_L_NUMS)
EW_TABLE(mod, EW_L_NUMS)
EW_TABLE(pow, EW_L_NUMS)
EW_TABLE(max, EW_L_NUMS)
EW_TABLE(min, EW_L_NUMS)
EW_TABLE(prelu, EW_L_NUMS)
static const ew_kern k_eq[SN_DTYPE_COUNT] = {EW_NUMS(EW_GEN_E, eq) EW_BOOLS(EW_GEN_E, eq)[SN_STRING] = eq_str};
EW_TABLE(gt, EW_L_NUMS)
EW_TABLE(ge, EW_L_NUMS)
EW_TABLE(lt, EW_L_NUMS)
EW_TABLE(le, EW_L_NUMS)
EW_TABLE(and, EW_L_BOOLS)
EW_TABLE(or, EW_L_BOOLS)
EW_TABLE(xor, EW_L_BOOLS)
EW_TABLE(band, EW_L_INTS)
EW_TABLE(bor, EW_L_INTS)
EW_TABLE(bxor, EW_L_INTS)
EW_TABLE(shift, EW_L_INTS)

/* Half and 8-bit floats: convert a chunk to float32, run the float32
 * kernel (a->inner), convert back (or write bools directly). */
static void ew_bin_half(const ew_args *A, void *o, const void *const *in, const int64_t *st,
                        int64_t n) {
    ew_kern f = (ew_kern)A->inner;
    float x[EW_CHUNK], y[EW_CHUNK], r[EW_CHUNK];
    bool half_out = ew_is_half(A->to);
    size_t osz = sn_dtype_size(A->to);
    for (int64_t s = 0; s < n; s += EW_CHUNK) {
        int64_t m = sn_imin(EW_CHUNK, n - s);
        for (int64_t i = 0; i < (st[0] ? m : 1); i++)
            x[i] = sn_ld_f32(A->ta, in[0], st[0] * s + i);
        for (int64_t i = 0; i < (st[1] ? m : 1); i++)
            y[i] = sn_ld_f32(A->tb, in[1], st[1] * s + i);
        const void *fin[2] = {x, y};
        if (half_out) {
            f(A, r, fin, st, m);
            for (int64_t i = 0; i < m; i++)
                sn_st_f32(A->to, o, s + i, r[i]);
        } else {
            f(A, (char *)o + (size_t)s * osz, fin, st, m);
        }
    }
}

/* Pow with base and exponent of different types: computed in double (or
 * exactly for two integers), stored in the base's type. */
static void ew_pow_mixed(const ew_args *A, void *o, const void *const *in, const int64_t *st,
                         int64_t n) {
    bool ia = sn_dtype_is_int(A->ta), ib = sn_dtype_is_int(A->tb);
    for (int64_t i = 0; i < n; i++) {
        size_t ea = (size_t)(i * st[0]), eb = (size_t)(i * st[1]);
        if (ia && ib) {
            int64_t v = ew_ipow(sn_load_i64(A->ta, in[0], ea), sn_load_i64(A->tb, in[1], eb));
            switch (A->to) {
            case SN_I8: case SN_U8: ((uint8_t *)o)[i] = (uint8_t)v; break;
            case SN_I16: case SN_U16: ((uint16_t *)o)[i] = (uint16_t)v; break;
            case SN_I32: case SN_U32: ((uint32_t *)o)[i] = (uint32_t)v; break;
            default: ((uint64_t *)o)[i] = (uint64_t)v; break;
            }
            continue;
        }
        double v = pow(sn_load_f64(A->ta, in[0], ea), sn_load_f64(A->tb, in[1], eb));
        if (ia) {
            /* float -> int like a C cast on x86: out of range and NaN give INT64_MIN's low bits */
            int64_t iv = (v == v && v > -9.2233720368547758e18 && v < 9.2233720368547758e18)
                             ? (int64_t)v : INT64_MIN;
            switch (A->to) {
            case SN_I8: case SN_U8: ((uint8_t *)o)[i] = (uint8_t)iv; break;
            case SN_I16: case SN_U16: ((uint16_t *)o)[i] = (uint16_t)iv; break;
            case SN_I32: case SN_U32: ((uint32_t *)o)[i] = (uint32_t)iv; break;
            default: ((uint64_t *)o)[i] = (uint64_t)iv; break;
            }
        } else {
            sn_store_f64(A->to, o, (size_t)i, v);
        }
    }
}

/* ---- n-ary ops: infer and run ----------------------------------------- */

enum { EW_OUT_SAME = 0, EW_OUT_BOOL = 1 };
enum { EW_P_NONE = 0, EW_P_FMOD, EW_P_SHIFT, EW_P_INTDIV };

typedef struct ew_binop {
    const ew_kern *k;  /* by dtype; half types go through k[SN_F32] */
    uint8_t out;       /* EW_OUT_* */
    uint8_t mixed;     /* input types may differ (Pow) */
    uint8_t param;     /* EW_P_*: attribute or data check the op needs */
    uint8_t legacy;    /* opset < 7: broadcast/axis attributes */
} ew_binop;

static bool ew_op_has(const ew_kern *k, sn_dtype t) {
    if (!sn_dtype_valid(t))
        return false;
    return k[t] || (ew_is_half(t) && k[SN_F32]);
}

/* Input k's shape as the op broadcasts it: before opset 7 a binary op
 * with broadcast=1 and axis aligns input 1 at axis, and PRelu's 1-D slope
 * runs along the channel axis. */
static void ew_shape_of(const sn_node *n, const sn_tensor *const *in, int k, bool legacy,
                        int *r, int64_t *d) {
    const sn_tensor *t = in[k];
    *r = t->rank;
    if (t->rank > 0)
        memcpy(d, t->dims, sizeof(int64_t) * (size_t)t->rank);
    if (k != 1 || n->opset >= 7 || t->rank < 0 || in[0]->rank < 0)
        return;
    int ra = in[0]->rank;
    if (!strcmp(n->p->op_type, "PRelu")) {
        if (ra >= 2 && t->rank == 1 && t->dims[0] != 1 && t->dims[0] == in[0]->dims[1]) {
            *r = ra - 1;
            for (int i = 0; i < ra - 1; i++)
                d[i] = i == 0 ? t->dims[0] : 1;
        }
        return;
    }
    const sn_attr *ax = sn_attr_get(n, "axis");
    if (!legacy || sn_attr_int(n, "broadcast", 0) != 1 || !ax)
        return;
    int64_t axis = sn_attr_int(n, "axis", 0);
    if (axis < 0)
        axis += ra;
    if (axis < 0 || axis + t->rank > ra)
        return; /* infer reports the mismatch */
    *r = ra - (int)axis;
    for (int i = 0; i < *r; i++)
        d[i] = i < t->rank ? t->dims[i] : 1;
}

/* Broadcast shape of inputs [0, nin) into out; dtype set by caller. */
static int ew_infer_shape(sn_infer_ctx *c, int nin, bool legacy, sn_tensor *out) {
    out->kind = SN_KIND_TENSOR;
    int r = 0;
    int64_t d[SN_MAX_RANK];
    for (int k = 0; k < nin; k++) {
        const sn_tensor *t = c->in[k];
        if (t->rank < 0) {
            out->rank = SN_RANK_UNKNOWN;
            return SNUG_OK;
        }
        int rk;
        int64_t dk[SN_MAX_RANK], tmp[SN_MAX_RANK];
        ew_shape_of(c->node, c->in, k, legacy, &rk, dk);
        sn_err e = {0};
        int rc = sn_broadcast_shape(r, d, rk, dk, &r, tmp, &e);
        if (rc)
            return sn_kfail(c->err, c->node, rc, "input %d does not broadcast: %s", k, e.msg);
        memcpy(d, tmp, sizeof(int64_t) * (size_t)r);
    }
    sn_tensor_set_shape(out, r, d);
    return SNUG_OK;
}

static int ew_check_inputs(sn_infer_ctx *c, int nmin) {
    if (c->n_in < nmin)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "needs %d inputs, has %d",
                        nmin, c->n_in);
    for (int k = 0; k < c->n_in; k++) {
        if (!c->in[k])
            return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "input %d is missing", k);
        if (c->in[k]->kind != SN_KIND_TENSOR)
            return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "input %d is not a tensor", k);
    }
    return SNUG_OK;
}

static int ew_binary_infer(sn_infer_ctx *c, const ew_binop *op) {
    SN_TRY(ew_check_inputs(c, 2));
    sn_dtype ta = c->in[0]->dtype, tb = c->in[1]->dtype;
    if (!op->mixed && ta != tb)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "input types differ: %s vs %s",
                        sn_dtype_name(ta), sn_dtype_name(tb));
    if (!ew_op_has(op->k, ta) || (op->mixed && !ew_op_has(op->k, tb)))
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "type %s not supported",
                        sn_dtype_name(ew_op_has(op->k, ta) ? tb : ta));
    if (op->param == EW_P_SHIFT) {
        const char *dir = sn_attr_str(c->node, "direction", "");
        if (strcmp(dir, "LEFT") && strcmp(dir, "RIGHT"))
            return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG,
                            "direction must be LEFT or RIGHT, got '%s'", dir);
    }
    if (!c->out[0])
        return SNUG_OK;
    c->out[0]->dtype = op->out == EW_OUT_BOOL ? SN_BOOL : ta;
    return ew_infer_shape(c, 2, op->legacy, c->out[0]);
}

/* Picks the kernel for args a (ta/tb/to set); NULL if none. */
static ew_kern ew_pick(const ew_kern *k, ew_args *a) {
    if (a->ta != a->tb) /* only Pow allows it */
        return ew_pow_mixed;
    if (k[a->ta])
        return k[a->ta];
    if (ew_is_half(a->ta) && k[SN_F32]) {
        if (k == k_pow)
            return ew_pow_mixed;
        a->inner = (const void *)k[SN_F32];
        return ew_bin_half;
    }
    return NULL;
}

static bool ew_any_zero(const sn_tensor *t) {
    int64_t n = sn_tensor_numel(t);
    for (int64_t i = 0; i < n; i++)
        if (sn_load_i64(t->dtype, t->data, (size_t)i) == 0)
            return true;
    return false;
}

static int ew_binary_run(sn_kctx *c, const ew_binop *op) {
    const sn_tensor *A = c->in[0], *B = c->in[1];
    sn_tensor *O = c->out[0];
    ew_args a = {.ta = A->dtype, .tb = B->dtype, .to = O->dtype};
    if (op->param == EW_P_FMOD)
        a.flag = (int)sn_attr_int(c->node, "fmod", 0);
    else if (op->param == EW_P_SHIFT)
        a.flag = !strcmp(sn_attr_str(c->node, "direction", ""), "LEFT");
    if ((op->param == EW_P_FMOD || op->param == EW_P_INTDIV) && sn_dtype_is_int(B->dtype) &&
        ew_any_zero(B))
        return sn_kfail(c->err, c->node, SNUG_ERR_RANGE, "integer division by zero");
    ew_kern k = ew_pick(op->k, &a);
    if (!k)
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "type %s not supported",
                        sn_dtype_name(A->dtype));
    int r[2];
    int64_t d[2][SN_MAX_RANK];
    ew_shape_of(c->node, c->in, 0, op->legacy, &r[0], d[0]);
    ew_shape_of(c->node, c->in, 1, op->legacy, &r[1], d[1]);
    const int64_t *dp[2] = {d[0], d[1]};
    ew_plan p;
    ew_plan_init(&p, O->rank, O->dims, 2, r, dp);
    const void *in[2] = {A->data, B->data};
    size_t isz[2] = {sn_dtype_size(A->dtype), sn_dtype_size(B->dtype)};
    ew_plan_run(&p, c->pool, k, &a, O->data, sn_dtype_size(O->dtype), in, isz);
    return SNUG_OK;
}

#define EW_BINOP_DEF(Name, ktab, out, mixed, param, legacy)                                 \
    static const ew_binop op_##Name = {ktab, out, mixed, param, legacy};                    \
    static int infer_##Name(sn_infer_ctx *c) { return ew_binary_infer(c, &op_##Name); }   \
    static int run_##Name(sn_kctx *c) { return ew_binary_run(c, &op_##Name); }
EW_BINOP_DEF(Add, k_add, EW_OUT_SAME, 0, EW_P_NONE, 1)
EW_BINOP_DEF(Sub, k_sub, EW_OUT_SAME, 0, EW_P_NONE, 1)
EW_BINOP_DEF(Mul, k_mul, EW_OUT_SAME, 0, EW_P_NONE, 1)
EW_BINOP_DEF(Div, k_div, EW_OUT_SAME, 0, EW_P_INTDIV, 1)
EW_BINOP_DEF(Mod, k_mod, EW_OUT_SAME, 0, EW_P_FMOD, 0)
EW_BINOP_DEF(Pow, k_pow, EW_OUT_SAME, 1, EW_P_NONE, 1)
EW_BINOP_DEF(PRelu, k_prelu, EW_OUT_SAME, 0, EW_P_NONE, 0)
EW_BINOP_DEF(Equal, k_eq, EW_OUT_BOOL, 0, EW_P_NONE, 1)
EW_BINOP_DEF(Greater, k_gt, EW_OUT_BOOL, 0, EW_P_NONE, 1)
EW_BINOP_DEF(GreaterOrEqual, k_ge, EW_OUT_BOOL, 0, EW_P_NONE, 0)
EW_BINOP_DEF(Less, k_lt, EW_OUT_BOOL, 0, EW_P_NONE, 1)
EW_BINOP_DEF(LessOrEqual, k_le, EW_OUT_BOOL, 0, EW_P_NONE, 0)
EW_BINOP_DEF(And, k_and, EW_OUT_BOOL, 0, EW_P_NONE, 1)
EW_BINOP_DEF(Or, k_or, EW_OUT_BOOL, 0, EW_P_NONE, 1)
EW_BINOP_DEF(Xor, k_xor, EW_OUT_BOOL, 0, EW_P_NONE, 1)
EW_BINOP_DEF(BitwiseAnd, k_band, EW_OUT_SAME, 0, EW_P_NONE, 0)
EW_BINOP_DEF(BitwiseOr, k_bor, EW_OUT_SAME, 0, EW_P_NONE, 0)
EW_BINOP_DEF(BitwiseXor, k_bxor, EW_OUT_SAME, 0, EW_P_NONE, 0)
EW_BINOP_DEF(BitShift, k_shift, EW_OUT_SAME, 0, EW_P_SHIFT, 0)

/* ---- variadic: Sum, Mean, Max, Min ------------------------------------- */

static int ew_variadic_infer(sn_infer_ctx *c, const ew_kern *k, bool float_only) {
    SN_TRY(ew_check_inputs(c, 1));
    sn_dtype t = c->in[0]->dtype;
    for (int i = 1; i < c->n_in; i++)
        if (c->in[i]->dtype != t)
            return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "input %d is %s, input 0 is %s", i,
                            sn_dtype_name(c->in[i]->dtype), sn_dtype_name(t));
    if (!ew_op_has(k, t) || (float_only && !sn_dtype_is_float(t)))
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "type %s not supported",
                        sn_dtype_name(t));
    if (!c->out[0])
        return SNUG_OK;
    c->out[0]->dtype = t;
    return ew_infer_shape(c, c->n_in, false, c->out[0]);
}

static void ew_copy_kern(const ew_args *A, void *o, const void *const *in, const int64_t *st,
                         int64_t n) {
    size_t sz = sn_dtype_size(A->to);
    if (st[0]) {
        if (o != in[0])
            memmove(o, in[0], (size_t)n * sz);
    } else {
        for (int64_t i = 0; i < n; i++)
            memcpy((char *)o + (size_t)i * sz, in[0], sz);
    }
}

static int ew_variadic_run(sn_kctx *c, const ew_kern *ktab, bool mean) {
    sn_tensor *O = c->out[0];
    ew_args a = {.ta = O->dtype, .tb = O->dtype, .to = O->dtype};
    size_t sz = sn_dtype_size(O->dtype);
    ew_kern k = ew_pick(ktab, &a);
    if (!k)
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "type %s not supported",
                        sn_dtype_name(O->dtype));
    const size_t isz[2] = {sz, sz};
    ew_plan p;
    if (c->n_in == 1) {
        const int64_t *dp[1] = {c->in[0]->dims};
        ew_plan_init(&p, O->rank, O->dims, 1, &c->in[0]->rank, dp);
        const void *in[1] = {c->in[0]->data};
        ew_plan_run(&p, c->pool, ew_copy_kern, &a, O->data, sz, in, isz);
        return SNUG_OK;
    }
    for (int i = 1; i < c->n_in; i++) {
        /* first step: in0 op in1; then out op in_i, in place */
        const sn_tensor *X = i == 1 ? c->in[0] : O, *Y = c->in[i];
        int r[2] = {X->rank, Y->rank};
        const int64_t *dp[2] = {X->dims, Y->dims};
        ew_plan_init(&p, O->rank, O->dims, 2, r, dp);
        const void *in[2] = {X->data, Y->data};
        ew_plan_run(&p, c->pool, k, &a, O->data, sz, in, isz);
    }
    if (mean) {
        int64_t n = sn_tensor_numel(O);
        double div = (double)c->n_in;
        if (O->dtype == SN_F32) {
            float *o = O->data, fd = (float)div;
            for (int64_t i = 0; i < n; i++)
                o[i] /= fd;
        } else {
            for (int64_t i = 0; i < n; i++)
                sn_store_f64(O->dtype, O->data, (size_t)i,
                             sn_load_f64(O->dtype, O->data, (size_t)i) / div);
        }
    }
    return SNUG_OK;
}

static int infer_Sum(sn_infer_ctx *c) { return ew_variadic_infer(c, k_add, false); }
static int run_Sum(sn_kctx *c) { return ew_variadic_run(c, k_add, false); }
static int infer_Mean(sn_infer_ctx *c) { return ew_variadic_infer(c, k_add, true); }
static int run_Mean(sn_kctx *c) { return ew_variadic_run(c, k_add, true); }
static int infer_Max(sn_infer_ctx *c) { return ew_variadic_infer(c, k_max, false); }
static int run_Max(sn_kctx *c) { return ew_variadic_run(c, k_max, false); }
static int infer_Min(sn_infer_ctx *c) { return ew_variadic_infer(c, k_min, false); }
static int run_Min(sn_kctx *c) { return ew_variadic_run(c, k_min, false); }

/* ---- Where -------------------------------------------------------------- */

#define EW_WHERE_K(T)                                                                      \
    static void where_##T(const ew_args *A, void *o_, const void *const *in, const int64_t *st, \
                          int64_t n) {                                                     \
        (void)A;                                                                           \
        T *o = o_;                                                                         \
        const uint8_t *c = in[0];                                                          \
        const T *x = in[1], *y = in[2];                                                    \
        if (st[0] && st[1] && st[2]) {                                                     \
            for (int64_t i = 0; i < n; i++)                                                \
                o[i] = c[i] ? x[i] : y[i];                                                 \
        } else {                                                                           \
            for (int64_t i = 0; i < n; i++)                                                \
                o[i] = c[i * st[0]] ? x[i * st[1]] : y[i * st[2]];                         \
        }                                                                                  \
    }
EW_WHERE_K(uint8_t)
EW_WHERE_K(uint16_t)
EW_WHERE_K(uint32_t)
EW_WHERE_K(uint64_t)
EW_WHERE_K(sn_string)

static int infer_Where(sn_infer_ctx *c) {
    SN_TRY(ew_check_inputs(c, 3));
    if (c->in[0]->dtype != SN_BOOL)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "condition must be bool, is %s",
                        sn_dtype_name(c->in[0]->dtype));
    sn_dtype t = c->in[1]->dtype;
    if (c->in[2]->dtype != t)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "X is %s but Y is %s",
                        sn_dtype_name(t), sn_dtype_name(c->in[2]->dtype));
    size_t sz = sn_dtype_size(t);
    if (t == SN_U4 || t == SN_I4 || !(sz == 1 || sz == 2 || sz == 4 || sz == 8 || t == SN_STRING))
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "type %s not supported",
                        sn_dtype_name(t));
    if (!c->out[0])
        return SNUG_OK;
    c->out[0]->dtype = t;
    return ew_infer_shape(c, 3, false, c->out[0]);
}

static int run_Where(sn_kctx *c) {
    sn_tensor *O = c->out[0];
    ew_args a = {.to = O->dtype};
    ew_kern k;
    switch (O->dtype == SN_STRING ? 16 : sn_dtype_size(O->dtype)) {
    case 1: k = where_uint8_t; break;
    case 2: k = where_uint16_t; break;
    case 4: k = where_uint32_t; break;
    case 8: k = where_uint64_t; break;
    default: k = where_sn_string; break;
    }
    int r[3];
    const int64_t *dp[3];
    const void *in[3];
    size_t isz[3];
    for (int i = 0; i < 3; i++) {
        r[i] = c->in[i]->rank;
        dp[i] = c->in[i]->dims;
        in[i] = c->in[i]->data;
        isz[i] = sn_dtype_size(c->in[i]->dtype);
    }
    ew_plan p;
    ew_plan_init(&p, O->rank, O->dims, 3, r, dp);
    ew_plan_run(&p, c->pool, k, &a, O->data, sn_dtype_size(O->dtype), in, isz);
    return O->dtype == SN_STRING ? sn_strings_own(c, 0) : SNUG_OK;
}

/* ---- the table ---------------------------------------------------------- */

/* Binary ops need both inputs; variadic ones (Sum, ...) input 0 alone. */
#define EW_BIN(op, since)                                                                      \
    {.domain = "", .name = #op, .since_version = since, .required = 0x3, .infer = infer_##op, \
     .cpu = {.run = run_##op}}
#define EW_BIN_IP(op, since)                                                                   \
    {.domain = "", .name = #op, .since_version = since, .required = 0x3, .infer = infer_##op, \
     .flags = SN_OP_INPLACE0, .cpu = {.run = run_##op}}
#define EW_VAR(op, since)                                                                      \
    {.domain = "", .name = #op, .since_version = since, .infer = infer_##op, .flags = SN_OP_INPLACE0, \
     .cpu = {.run = run_##op}}
#define EW_UN(op, since)                                                                            \
    {.domain = "", .name = #op, .since_version = since, .infer = ew_infer_##op, .flags = SN_OP_INPLACE0, \
     .cpu = {.run = ew_run_##op}}

const sn_op_def sn_ops_elementwise[] = {
    EW_BIN_IP(Add, 1), EW_BIN_IP(Sub, 1), EW_BIN_IP(Mul, 1), EW_BIN_IP(Div, 1),
    EW_BIN_IP(Mod, 10), EW_BIN_IP(Pow, 1), EW_BIN_IP(PRelu, 1),
    EW_BIN(Equal, 1), EW_BIN(Greater, 1), EW_BIN(GreaterOrEqual, 12), EW_BIN(Less, 1),
    EW_BIN(LessOrEqual, 12), EW_BIN_IP(And, 1), EW_BIN_IP(Or, 1), EW_BIN_IP(Xor, 1),
    EW_BIN_IP(BitwiseAnd, 18), EW_BIN_IP(BitwiseOr, 18), EW_BIN_IP(BitwiseXor, 18),
    EW_BIN_IP(BitShift, 11),
    EW_VAR(Sum, 1), EW_VAR(Mean, 1), EW_VAR(Max, 1), EW_VAR(Min, 1),
    {.domain = "", .name = "Where", .since_version = 9, .required = 0x7, .infer = infer_Where,
     .cpu = {.run = run_Where}},

    EW_UN(Abs, 1), EW_UN(Acos, 7), EW_UN(Acosh, 9), EW_UN(Asin, 7), EW_UN(Asinh, 9),
    EW_UN(Atan, 7), EW_UN(Atanh, 9), EW_UN(Ceil, 1), EW_UN(Celu, 12), EW_UN(Cos, 7),
    EW_UN(Cosh, 9), EW_UN(Elu, 1), EW_UN(Erf, 9), EW_UN(Exp, 1), EW_UN(Floor, 1),
    EW_UN(Gelu, 20), EW_UN(HardSigmoid, 1), EW_UN(HardSwish, 14), EW_UN(IsInf, 10),
    EW_UN(IsNaN, 9), EW_UN(LeakyRelu, 1), EW_UN(Log, 1), EW_UN(Mish, 18), EW_UN(Neg, 1),
    EW_UN(Not, 1), EW_UN(BitwiseNot, 18), EW_UN(Reciprocal, 1), EW_UN(Relu, 1),
    EW_UN(Round, 11), EW_UN(Selu, 1), EW_UN(Shrink, 9), EW_UN(Sigmoid, 1), EW_UN(Sign, 9),
    EW_UN(Sin, 7), EW_UN(Sinh, 9), EW_UN(Softplus, 1), EW_UN(Softsign, 1), EW_UN(Sqrt, 1),
    EW_UN(Tan, 7), EW_UN(Tanh, 1), EW_UN(ThresholdedRelu, 10), EW_UN(Clip, 1),

    {.domain = "", .name = "Cast", .since_version = 1, .infer = ew_infer_cast, .flags = SN_OP_PACKED_OK,
     .cpu = {.run = ew_run_cast}},
    {.domain = "", .name = "CastLike", .since_version = 15, .required = 0x3, .infer = ew_infer_castlike, .flags = SN_OP_PACKED_OK,
     .cpu = {.run = ew_run_cast}},
    {.domain = "", .name = "Identity", .since_version = 1, .infer = ew_infer_identity, .flags = SN_OP_VIEW0,
     .cpu = {.run = ew_run_identity}},
    {.domain = "", .name = "Dropout", .since_version = 1, .infer = ew_infer_dropout, .flags = SN_OP_INPLACE0,
     .cpu = {.run = ew_run_dropout}},
    {.domain = "", .name = "Swish", .since_version = 24, .infer = ew_infer_swish, .flags = SN_OP_INPLACE0,
     .cpu = {.run = ew_run_swish}},
    {0},
};
