/* Unary element-wise ops: math functions, activations, predicates, Clip.
 * Each op has float32/float64 kernels (half types go through float32) and,
 * where ONNX allows, integer kernels; Swish, at the end, is computed in
 * double. */
/* The element-wise loops are written to vectorize; -O2 on GCC 12 does not
 * (very-cheap cost model), so ask for it here (no-trapping-math lets it if-convert the float selects;
 * snug never reads the FP exception flags). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic", "no-trapping-math")
#endif
#include <math.h>
#include <string.h>

#include "ops/elementwise/logistic.h"
#include <tgmath.h>

#include "ops/elementwise/elementwise.h"

/* A float kernel pair from one expression of v (type T) and attributes A;
 * <tgmath.h> picks the float or double math function. */
/* The loop over n elements, with a separate in-place form: GCC's runtime
 * alias check rejects o == x and would run the scalar loop. */
#define EW_ULOOP(T, TOUT, EXPR)                                                            \
    if ((const void *)o_ == x_) {                                                          \
        TOUT *io = o_;                                                                     \
        for (int64_t i = 0; i < n; i++) {                                                  \
            T v = (T)io[i];                                                                \
            io[i] = (TOUT)(EXPR);                                                          \
        }                                                                                  \
    } else {                                                                               \
        TOUT *restrict o = o_;                                                             \
        const T *restrict x = x_;                                                          \
        for (int64_t i = 0; i < n; i++) {                                                  \
            T v = x[i];                                                                    \
            o[i] = (TOUT)(EXPR);                                                           \
        }                                                                                  \
    }
#define EW_UF(name, EXPR)                                                                  \
    static void name##_f32(const ew_args *A, void *o_, const void *x_, int64_t n) {        \
        typedef float T;                                                                   \
        (void)A;                                                                           \
        EW_ULOOP(T, T, EXPR)                                                               \
    }                                                                                      \
    static void name##_f64(const ew_args *A, void *o_, const void *x_, int64_t n) {        \
        typedef double T;                                                                  \
        (void)A;                                                                           \
        EW_ULOOP(T, T, EXPR)                                                               \
    }
#define EW_UF64(name, EXPR)                                                                \
    static void name##_f64(const ew_args *A, void *o_, const void *x_, int64_t n) {        \
        typedef double T;                                                                  \
        (void)A;                                                                           \
        EW_ULOOP(T, T, EXPR)                                                               \
    }
/* Integer kernels: X-list over C types (T, unsigned twin U). */
#define EW_UI(sfx, TI, UI, DT, name, TOUT, EXPR)                                           \
    static void name##_##sfx(const ew_args *A, void *o_, const void *x_, int64_t n) {      \
        typedef TI T;                                                                      \
        typedef UI U;                                                                      \
        (void)A;                                                                           \
        (void)sizeof(U);                                                                   \
        EW_ULOOP(T, TOUT, EXPR)                                                            \
    }
#define EW_UE(sfx, TI, UI, DT, name, ...) [DT] = name##_##sfx,
#define EW_SINTS(X, ...)                                                                   \
    X(i8, int8_t, uint8_t, SN_I8, __VA_ARGS__) X(i16, int16_t, uint16_t, SN_I16, __VA_ARGS__) \
    X(i32, int32_t, uint32_t, SN_I32, __VA_ARGS__) X(i64, int64_t, uint64_t, SN_I64, __VA_ARGS__)
#define EW_UINTS(X, ...)                                                                      \
    X(u8, uint8_t, uint8_t, SN_U8, __VA_ARGS__) X(u16, uint16_t, uint16_t, SN_U16, __VA_ARGS__) \
    X(u32, uint32_t, uint32_t, SN_U32, __VA_ARGS__) X(u64, uint64_t, uint64_t, SN_U64, __VA_ARGS__)
#define EW_INTS(X, ...) EW_SINTS(X, __VA_ARGS__) EW_UINTS(X, __VA_ARGS__)

/* exp for float32 written so loops over it vectorize (no libm call):
 * 2^n * e^r with r in [-ln2/2, ln2/2] and a degree-6 polynomial, about
 * 2 ulp. Inputs are clamped so 2^n stays a normal float: use it only where
 * the result saturates anyway (Sigmoid, Tanh). NaN gives a finite value;
 * callers pass NaN through. A statement macro, not a function, so that it
 * lands inside the target_clones copies below (GCC will not inline across
 * targets). */
#define EW_EXPF_FAST(xin, out)                                                             \
    do {                                                                                   \
        float x_ = (xin);                                                                  \
        x_ = x_ < -87.0f ? -87.0f : x_;                                                    \
        x_ = x_ > 88.0f ? 88.0f : x_;                                                      \
        x_ = x_ == x_ ? x_ : 0.0f;                                                         \
        float n_ = (x_ * 1.44269504088896341f + 12582912.0f) - 12582912.0f;               \
        float r_ = x_ - n_ * 0.693359375f - n_ * -2.12194440e-4f;                          \
        float p_ = 1.9875691500e-4f;                                                       \
        p_ = p_ * r_ + 1.3981999507e-3f;                                                   \
        p_ = p_ * r_ + 8.3334519073e-3f;                                                   \
        p_ = p_ * r_ + 4.1665795894e-2f;                                                   \
        p_ = p_ * r_ + 1.6666665459e-1f;                                                   \
        p_ = p_ * r_ + 5.0000001201e-1f;                                                   \
        p_ = p_ * r_ * r_ + r_ + 1.0f;                                                     \
        int32_t bits_ = ((int32_t)n_ + 127) * (1 << 23);                                   \
        float scale_;                                                                      \
        memcpy(&scale_, &bits_, sizeof scale_);                                            \
        (out) = p_ * scale_;                                                               \
    } while (0)
/* tanh(|v|) = 1 - 2 / (e^2|v| + 1); tiny |v| gives v itself */
#define EW_TANH_FAST(v, out)                                                               \
    do {                                                                                   \
        float a_ = (v) < 0 ? -(v) : (v), e2_;                                              \
        EW_EXPF_FAST(2.0f * a_, e2_);                                                      \
        float t_ = 1.0f - 2.0f / (e2_ + 1.0f);                                             \
        t_ = a_ < 0.004f ? a_ : t_;                                                        \
        t_ = (v) < 0 ? -t_ : t_;                                                           \
        (out) = (v) == (v) ? t_ : (v);                                                     \
    } while (0)

static inline float ew_softplus_f(float v) { return v > 0 ? v + log1pf(expf(-v)) : log1pf(expf(v)); }
static inline double ew_softplus_d(double v) { return v > 0 ? v + log1p(exp(-v)) : log1p(exp(v)); }
#define EW_SOFTPLUS(v) _Generic((v), float: ew_softplus_f, default: ew_softplus_d)(v)

EW_UF(abs, fabs(v))
EW_UF(acos, acos(v))
EW_UF(acosh, acosh(v))
EW_UF(asin, asin(v))
EW_UF(asinh, asinh(v))
EW_UF(atan, atan(v))
EW_UF(atanh, atanh(v))
EW_UF(ceil, ceil(v))
EW_UF(celu, (v > 0 ? v : (T)0) + (v < 0 ? A->alpha * (exp(v / A->alpha) - 1) : (T)0))
EW_UF(cos, cos(v))
EW_UF(cosh, cosh(v))
EW_UF(elu, v < 0 ? A->alpha * (exp(v) - 1) : v)
EW_UF(erf, erf(v))
EW_UF(exp, exp(v))
EW_UF(floor, floor(v))
EW_UF(gelu, A->flag ? (T)0.5 * v * (1 + tanh((T)0.7978845608028654 * (v + (T)0.044715 * v * v * v)))
                    : (T)0.5 * v * (1 + erf(v * (T)0.7071067811865476)))
EW_UF(hardsigmoid, fmax((T)0, fmin((T)1, A->alpha * v + A->beta)))
EW_UF(hardswish, v * fmax((T)0, fmin((T)1, v / 6 + (T)0.5)))
EW_UF(leakyrelu, v < 0 ? A->alpha * v : v)
EW_UF(log, log(v))
EW_UF(mish, v * tanh(EW_SOFTPLUS(v)))
EW_UF(neg, -v)
EW_UF(reciprocal, 1 / v)
EW_UF(relu, v < 0 ? 0 : v)
EW_UF(round, nearbyint(v))
EW_UF(selu, v > 0 ? A->gamma * v : A->gamma * (A->alpha * exp(v) - A->alpha))
EW_UF(shrink, v < -A->lambd ? v + A->bias : v > A->lambd ? v - A->bias : 0)
EW_UF64(sigmoid, v >= 0 ? 1 / (1 + exp(-v)) : exp(v) / (1 + exp(v)))
EW_UF(sign, v > 0 ? 1 : v < 0 ? -1 : v)
EW_UF(sin, sin(v))
EW_UF(sinh, sinh(v))
EW_UF(softplus, EW_SOFTPLUS(v))
EW_UF(softsign, v / (1 + fabs(v)))
EW_UF(sqrt, sqrt(v))
EW_UF(tan, tan(v))
EW_UF64(tanh, tanh(v))
EW_UF(thresholdedrelu, v > A->alpha ? v : 0)

/* Sigmoid and Tanh are compute-bound: on x86-64 also build AVX2 and
 * AVX-512 copies, picked at load time (the same operations an element,
 * so the same bits). AVX-512 over AVX2: a 16-sequence SmolLM2 decode
 * step's Sigmoid nodes 0.42 -> 0.33 ms (AMD EPYC VM, snug bench --slots 16
 * --ops). */
SN_CLONES_WIDE static void sigmoid_fast_f32(const ew_args *A, void *o_, const void *x_, int64_t n) {
    (void)A;
    float *o = o_;
    const float *x = x_;
    if ((const void *)o == x_) {
        for (int64_t i = 0; i < n; i++)
            o[i] = sn_logistic_f32(o[i]);
    } else {
        for (int64_t i = 0; i < n; i++)
            o[i] = sn_logistic_f32(x[i]);
    }
}
SN_CLONES_WIDE static void tanh_fast_f32(const ew_args *A, void *o_, const void *x_, int64_t n) {
    (void)A;
    float *o = o_;
    const float *x = x_;
    if ((const void *)o == x_) {
        for (int64_t i = 0; i < n; i++)
            EW_TANH_FAST(o[i], o[i]);
    } else {
        for (int64_t i = 0; i < n; i++)
            EW_TANH_FAST(x[i], o[i]);
    }
}

EW_SINTS(EW_UI, abs, T, v < 0 ? (U)0 - (U)v : (U)v)
EW_UINTS(EW_UI, abs, T, v)
EW_SINTS(EW_UI, neg, T, (U)0 - (U)v)
EW_SINTS(EW_UI, relu, T, v < 0 ? 0 : v)
EW_SINTS(EW_UI, sign, T, v > 0 ? 1 : v < 0 ? -1 : 0)
EW_UINTS(EW_UI, sign, T, v > 0)
EW_INTS(EW_UI, bnot, T, ~(U)v)
static void not_b8(const ew_args *A, void *o_, const void *x_, int64_t n) {
    (void)A;
    uint8_t *o = o_;
    const uint8_t *x = x_;
    for (int64_t i = 0; i < n; i++)
        o[i] = !x[i];
}

/* Predicates: float in, bool out. */
static void isnan_f32(const ew_args *A, void *o_, const void *x_, int64_t n) {
    (void)A;
    uint8_t *o = o_;
    const float *x = x_;
    for (int64_t i = 0; i < n; i++)
        o[i] = x[i] != x[i];
}
static void isnan_f64(const ew_args *A, void *o_, const void *x_, int64_t n) {
    (void)A;
    uint8_t *o = o_;
    const double *x = x_;
    for (int64_t i = 0; i < n; i++)
        o[i] = x[i] != x[i];
}
/* flag bit 0: detect +inf, bit 1: detect -inf */
static void isinf_f32(const ew_args *A, void *o_, const void *x_, int64_t n) {
    uint8_t *o = o_;
    const float *x = x_;
    for (int64_t i = 0; i < n; i++)
        o[i] = isinf(x[i]) && ((x[i] > 0 && (A->flag & 1)) || (x[i] < 0 && (A->flag & 2)));
}
static void isinf_f64(const ew_args *A, void *o_, const void *x_, int64_t n) {
    uint8_t *o = o_;
    const double *x = x_;
    for (int64_t i = 0; i < n; i++)
        o[i] = isinf(x[i]) && ((x[i] > 0 && (A->flag & 1)) || (x[i] < 0 && (A->flag & 2)));
}

/* Clip: bounds in A->lo/hi as the input's type (max applied last, so
 * min > max gives max, as ONNX says). */
#define EW_CLIP_K(sfx, TI, UI, DT, ...)                                                   \
    static void clip_##sfx(const ew_args *A, void *o_, const void *x_, int64_t n) {         \
        TI *o = o_, lo, hi;                                                                 \
        const TI *x = x_;                                                                   \
        memcpy(&lo, A->lo, sizeof lo);                                                      \
        memcpy(&hi, A->hi, sizeof hi);                                                      \
        for (int64_t i = 0; i < n; i++) {                                                   \
            TI v = x[i] < lo ? lo : x[i];                                                   \
            o[i] = v > hi ? hi : v;                                                         \
        }                                                                                   \
    }
EW_CLIP_K(f32, float, float, SN_F32)
EW_CLIP_K(f64, double, double, SN_F64)
EW_INTS(EW_CLIP_K, )

/* ---- op descriptors ---------------------------------------------------- */

typedef struct ew_unop {
    ew_ukern f32, f64;     /* NULL: floats not allowed */
    const ew_ukern *ints;  /* by dtype (ints and bool), or NULL */
    bool out_bool;
    bool half;             /* f16/bf16 allowed (through f32) */
    int64_t grain;         /* EW_GRAIN, or EW_GRAIN_MATH for the costly functions */
} ew_unop;

#define EW_ITAB(name, LIST) static const ew_ukern ki_##name[SN_DTYPE_COUNT] = {LIST(EW_UE, name)};
EW_ITAB(abs, EW_INTS)
EW_ITAB(neg, EW_SINTS)
EW_ITAB(relu, EW_SINTS)
EW_ITAB(sign, EW_INTS)
EW_ITAB(bnot, EW_INTS)
EW_ITAB(clip, EW_INTS)
static const ew_ukern ki_not[SN_DTYPE_COUNT] = {[SN_BOOL] = not_b8};

/* Half and 8-bit floats through the float32 kernel, a chunk at a time. */
static void ew_un_half(const ew_args *A, void *o, const void *x, int64_t n) {
    ew_ukern f = (ew_ukern)A->inner;
    float v[EW_CHUNK], r[EW_CHUNK];
    bool half_out = ew_is_half(A->to);
    for (int64_t s = 0; s < n; s += EW_CHUNK) {
        int64_t m = sn_imin(EW_CHUNK, n - s);
        for (int64_t i = 0; i < m; i++)
            v[i] = sn_ld_f32(A->ta, x, s + i);
        if (half_out) {
            f(A, r, v, m);
            for (int64_t i = 0; i < m; i++)
                sn_st_f32(A->to, o, s + i, r[i]);
        } else {
            f(A, (uint8_t *)o + s, v, m); /* bool output */
        }
    }
}

static ew_ukern ew_unop_kernel(const ew_unop *op, ew_args *a) {
    sn_dtype t = a->ta;
    if (t == SN_F32)
        return op->f32;
    if (t == SN_F64)
        return op->f64;
    if (ew_is_half(t) && op->half && op->f32) {
        a->inner = (const void *)op->f32;
        return ew_un_half;
    }
    return op->ints && sn_dtype_valid(t) ? op->ints[t] : NULL;
}

static int ew_unop_infer(sn_infer_ctx *c, const ew_unop *op) {
    if (c->n_in < 1 || !c->in[0])
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "input is missing");
    const sn_tensor *x = c->in[0];
    if (x->kind != SN_KIND_TENSOR)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "input is not a tensor");
    ew_args a = {.ta = x->dtype};
    if (!ew_unop_kernel(op, &a))
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "type %s not supported",
                        sn_dtype_name(x->dtype));
    sn_tensor *y = c->out[0];
    if (!y)
        return SNUG_OK;
    sn_set_out(y, op->out_bool ? SN_BOOL : x->dtype, x->rank, x->dims);
    return SNUG_OK;
}

static int ew_unop_run(sn_kctx *c, const ew_unop *op, ew_args *a) {
    const sn_tensor *x = c->in[0];
    sn_tensor *y = c->out[0];
    a->ta = a->tb = x->dtype;
    a->to = y->dtype;
    ew_ukern k = ew_unop_kernel(op, a);
    if (!k)
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "type %s not supported",
                        sn_dtype_name(x->dtype));
    ew_unary_run(c->pool, k, a, y->data, sn_dtype_size(y->dtype), x->data,
                 sn_dtype_size(x->dtype), sn_tensor_numel(x), op->grain);
    return SNUG_OK;
}

/* Attributes each op reads, with ONNX defaults. */
static void ew_attrs_none(const sn_node *n, ew_args *a) { (void)n; (void)a; }
static void ew_attrs_alpha1(const sn_node *n, ew_args *a) { a->alpha = sn_attr_float(n, "alpha", 1.0f); }
static void ew_attrs_leaky(const sn_node *n, ew_args *a) { a->alpha = sn_attr_float(n, "alpha", 0.01f); }
static void ew_attrs_hsig(const sn_node *n, ew_args *a) {
    a->alpha = sn_attr_float(n, "alpha", 0.2f);
    a->beta = sn_attr_float(n, "beta", 0.5f);
}
static void ew_attrs_selu(const sn_node *n, ew_args *a) {
    a->alpha = sn_attr_float(n, "alpha", 1.67326319217681884765625f);
    a->gamma = sn_attr_float(n, "gamma", 1.05070102214813232421875f);
}
static void ew_attrs_shrink(const sn_node *n, ew_args *a) {
    a->lambd = sn_attr_float(n, "lambd", 0.5f);
    a->bias = sn_attr_float(n, "bias", 0.0f);
}
static void ew_attrs_gelu(const sn_node *n, ew_args *a) {
    a->flag = !strcmp(sn_attr_str(n, "approximate", "none"), "tanh");
}
static void ew_attrs_isinf(const sn_node *n, ew_args *a) {
    a->flag = (sn_attr_int(n, "detect_positive", 1) ? 1 : 0) |
              (sn_attr_int(n, "detect_negative", 1) ? 2 : 0);
}

#define EW_UNOP_G(Name, f32, f64, ints, out_bool, half, attrs, grain)                      \
    static const ew_unop op_##Name = {f32, f64, ints, out_bool, half, grain};              \
    int ew_infer_##Name(sn_infer_ctx *c) { return ew_unop_infer(c, &op_##Name); }        \
    int ew_run_##Name(sn_kctx *c) {                                                        \
        ew_args a = {0};                                                                   \
        attrs(c->node, &a);                                                                \
        return ew_unop_run(c, &op_##Name, &a);                                             \
    }
#define EW_UNOP(Name, f32, f64, ints, out_bool, half, attrs) \
    EW_UNOP_G(Name, f32, f64, ints, out_bool, half, attrs, EW_GRAIN)
#define EW_UNOP_F(Name, k, attrs) EW_UNOP(Name, k##_f32, k##_f64, NULL, false, true, attrs)
/* a libm function or a polynomial an element: split in smaller chunks */
#define EW_UNOP_M(Name, k, attrs) EW_UNOP_G(Name, k##_f32, k##_f64, NULL, false, true, attrs, EW_GRAIN_MATH)

EW_UNOP(Abs, abs_f32, abs_f64, ki_abs, false, true, ew_attrs_none)
EW_UNOP_M(Acos, acos, ew_attrs_none)
EW_UNOP_M(Acosh, acosh, ew_attrs_none)
EW_UNOP_M(Asin, asin, ew_attrs_none)
EW_UNOP_M(Asinh, asinh, ew_attrs_none)
EW_UNOP_M(Atan, atan, ew_attrs_none)
EW_UNOP_M(Atanh, atanh, ew_attrs_none)
EW_UNOP_F(Ceil, ceil, ew_attrs_none)
EW_UNOP_M(Celu, celu, ew_attrs_alpha1)
EW_UNOP_M(Cos, cos, ew_attrs_none)
EW_UNOP_M(Cosh, cosh, ew_attrs_none)
EW_UNOP_M(Elu, elu, ew_attrs_alpha1)
EW_UNOP_M(Erf, erf, ew_attrs_none)
EW_UNOP_M(Exp, exp, ew_attrs_none)
EW_UNOP_F(Floor, floor, ew_attrs_none)
EW_UNOP_M(Gelu, gelu, ew_attrs_gelu)
EW_UNOP_F(HardSigmoid, hardsigmoid, ew_attrs_hsig)
EW_UNOP_F(HardSwish, hardswish, ew_attrs_none)
EW_UNOP(IsInf, isinf_f32, isinf_f64, NULL, true, true, ew_attrs_isinf)
EW_UNOP(IsNaN, isnan_f32, isnan_f64, NULL, true, true, ew_attrs_none)
EW_UNOP_F(LeakyRelu, leakyrelu, ew_attrs_leaky)
EW_UNOP_M(Log, log, ew_attrs_none)
EW_UNOP_M(Mish, mish, ew_attrs_none)
EW_UNOP(Neg, neg_f32, neg_f64, ki_neg, false, true, ew_attrs_none)
EW_UNOP(Not, NULL, NULL, ki_not, false, false, ew_attrs_none)
EW_UNOP(BitwiseNot, NULL, NULL, ki_bnot, false, false, ew_attrs_none)
EW_UNOP_F(Reciprocal, reciprocal, ew_attrs_none)
EW_UNOP(Relu, relu_f32, relu_f64, ki_relu, false, true, ew_attrs_none)
EW_UNOP_F(Round, round, ew_attrs_none)
EW_UNOP_M(Selu, selu, ew_attrs_selu)
EW_UNOP_F(Shrink, shrink, ew_attrs_shrink)
EW_UNOP_G(Sigmoid, sigmoid_fast_f32, sigmoid_f64, NULL, false, true, ew_attrs_none, EW_GRAIN_MATH)
EW_UNOP(Sign, sign_f32, sign_f64, ki_sign, false, true, ew_attrs_none)
EW_UNOP_M(Sin, sin, ew_attrs_none)
EW_UNOP_M(Sinh, sinh, ew_attrs_none)
EW_UNOP_M(Softplus, softplus, ew_attrs_none)
EW_UNOP_F(Softsign, softsign, ew_attrs_none)
EW_UNOP_F(Sqrt, sqrt, ew_attrs_none)
EW_UNOP_M(Tan, tan, ew_attrs_none)
EW_UNOP_G(Tanh, tanh_fast_f32, tanh_f64, NULL, false, true, ew_attrs_none, EW_GRAIN_MATH)
EW_UNOP_F(ThresholdedRelu, thresholdedrelu, ew_attrs_alpha1)

/* ---- Clip ---------------------------------------------------------------
 * Before opset 11 the bounds are attributes (floats); from 11 they are
 * optional scalar inputs of the input's type. */

static const ew_unop op_Clip = {clip_f32, clip_f64, ki_clip, false, true, EW_GRAIN};

int ew_infer_Clip(sn_infer_ctx *c) {
    SN_TRY(ew_unop_infer(c, &op_Clip));
    if (c->node->opset < 11)
        return SNUG_OK;
    for (int i = 1; i < 3 && i < c->n_in; i++) {
        const sn_tensor *b = c->in[i];
        if (!b)
            continue;
        if (b->dtype != c->in[0]->dtype)
            return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "%s is %s, input is %s",
                            i == 1 ? "min" : "max", sn_dtype_name(b->dtype),
                            sn_dtype_name(c->in[0]->dtype));
        int64_t n = sn_tensor_numel(b);
        if (n > 1)
            return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "%s must be a scalar, has %lld elements",
                            i == 1 ? "min" : "max", (long long)n);
    }
    return SNUG_OK;
}

/* Lowest/highest value of t written in t's representation into buf. */
static void ew_type_limit(sn_dtype t, bool high, uint8_t *buf, float *f) {
    union {
        float f;
        double d;
        int8_t i8;
        int16_t i16;
        int32_t i32;
        int64_t i64;
        uint8_t u8;
        uint16_t u16;
        uint32_t u32;
        uint64_t u64;
    } v;
    memset(&v, 0, sizeof v);
    switch (t) {
    case SN_F64: v.d = high ? INFINITY : -INFINITY; break;
    case SN_I8: v.i8 = high ? INT8_MAX : INT8_MIN; break;
    case SN_I16: v.i16 = high ? INT16_MAX : INT16_MIN; break;
    case SN_I32: v.i32 = high ? INT32_MAX : INT32_MIN; break;
    case SN_I64: v.i64 = high ? INT64_MAX : INT64_MIN; break;
    case SN_U8: v.u8 = high ? UINT8_MAX : 0; break;
    case SN_U16: v.u16 = high ? UINT16_MAX : 0; break;
    case SN_U32: v.u32 = high ? UINT32_MAX : 0; break;
    case SN_U64: v.u64 = high ? UINT64_MAX : 0; break;
    default: v.f = high ? INFINITY : -INFINITY; break;
    }
    memcpy(buf, &v, 8);
    *f = high ? INFINITY : -INFINITY;
}

int ew_run_Clip(sn_kctx *c) {
    sn_dtype t = c->in[0]->dtype;
    ew_args a = {0};
    ew_type_limit(t, false, a.lo, &a.lo_f);
    ew_type_limit(t, true, a.hi, &a.hi_f);
    if (c->node->opset < 11) {
        float lo = sn_attr_float(c->node, "min", -3.402823466e38f);
        float hi = sn_attr_float(c->node, "max", 3.402823466e38f);
        sn_store_f64(t, a.lo, 0, lo);
        sn_store_f64(t, a.hi, 0, hi);
        a.lo_f = lo;
        a.hi_f = hi;
    } else {
        for (int i = 1; i < 3 && i < c->n_in; i++) {
            const sn_tensor *b = c->in[i];
            if (!b || sn_tensor_numel(b) < 1)
                continue;
            uint8_t *dst = i == 1 ? a.lo : a.hi;
            memcpy(dst, b->data, sn_dtype_size(t));
            *(i == 1 ? &a.lo_f : &a.hi_f) = (float)sn_load_f64(t, b->data, 0);
        }
    }
    if (ew_is_half(t)) { /* the float32 kernel reads float bounds */
        memcpy(a.lo, &a.lo_f, sizeof(float));
        memcpy(a.hi, &a.hi_f, sizeof(float));
    }
    return ew_unop_run(c, &op_Clip, &a);
}

/* ---- Swish (24) ----------------------------------------------------------------------------
 * y = x * sigmoid(alpha * x). */

int ew_infer_swish(sn_infer_ctx *c) {
    const sn_tensor *x = sn_in(c->in, c->n_in, 0);
    if (!x)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "input is missing");
    if (!sn_dtype_is_real(x->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "input must be a float tensor, is %s",
                        sn_dtype_name(x->dtype));
    sn_set_out(c->out[0], x->dtype, x->rank, x->dims);
    return SNUG_OK;
}

int ew_run_swish(sn_kctx *c) {
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
