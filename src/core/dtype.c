#include <math.h>
#include <string.h>

#include "core/core.h"

static const struct {
    const char *name;
    uint8_t size;
} k_dtypes[SN_DTYPE_COUNT] = {
    [SN_UNDEFINED] = {"undefined", 0}, [SN_F32] = {"float32", 4},
    [SN_U8] = {"uint8", 1},            [SN_I8] = {"int8", 1},
    [SN_U16] = {"uint16", 2},          [SN_I16] = {"int16", 2},
    [SN_I32] = {"int32", 4},           [SN_I64] = {"int64", 8},
    [SN_STRING] = {"string", sizeof(sn_string)},
    [SN_BOOL] = {"bool", 1},           [SN_F16] = {"float16", 2},
    [SN_F64] = {"float64", 8},         [SN_U32] = {"uint32", 4},
    [SN_U64] = {"uint64", 8},          [SN_C64] = {"complex64", 8},
    [SN_C128] = {"complex128", 16},    [SN_BF16] = {"bfloat16", 2},
    [SN_F8E4M3FN] = {"float8e4m3fn", 1}, [SN_F8E4M3FNUZ] = {"float8e4m3fnuz", 1},
    [SN_F8E5M2] = {"float8e5m2", 1},   [SN_F8E5M2FNUZ] = {"float8e5m2fnuz", 1},
    [SN_U4] = {"uint4", 1},            [SN_I4] = {"int4", 1},
    [SN_F4E2M1] = {"float4e2m1", 1},   [SN_F8E8M0] = {"float8e8m0", 1},
    [SN_U2] = {"uint2", 1},            [SN_I2] = {"int2", 1},
};

bool sn_dtype_valid(int t) { return t > 0 && t < SN_DTYPE_COUNT; }
size_t sn_dtype_size(sn_dtype t) { return sn_dtype_valid(t) ? k_dtypes[t].size : 0; }
const char *sn_dtype_name(sn_dtype t) { return sn_dtype_valid(t) ? k_dtypes[t].name : "undefined"; }

bool sn_dtype_is_float(sn_dtype t) {
    switch (t) {
    case SN_F32: case SN_F16: case SN_BF16: case SN_F64:
    case SN_F8E4M3FN: case SN_F8E4M3FNUZ: case SN_F8E5M2: case SN_F8E5M2FNUZ:
    case SN_F4E2M1: case SN_F8E8M0:
        return true;
    default:
        return false;
    }
}

bool sn_dtype_is_int(sn_dtype t) {
    switch (t) {
    case SN_U8: case SN_I8: case SN_U16: case SN_I16: case SN_I32: case SN_I64:
    case SN_U32: case SN_U64: case SN_U4: case SN_I4: case SN_U2: case SN_I2:
        return true;
    default:
        return false;
    }
}

bool sn_dtype_is_signed(sn_dtype t) {
    switch (t) {
    case SN_I8: case SN_I16: case SN_I32: case SN_I64: case SN_I4: case SN_I2:
        return true;
    default:
        return sn_dtype_is_float(t);
    }
}

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float sn_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0) {
        if (man == 0)
            return u2f(sign);
        float v = (float)man * (1.0f / 16777216.0f); /* man * 2^-24 */
        return sign ? -v : v;
    }
    if (exp == 31)
        return u2f(sign | 0x7f800000u | (man << 13));
    return u2f(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t sn_f32_to_f16(float f) {
    uint32_t x = f2u(f), sign = (x >> 16) & 0x8000;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf or nan */
        return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 | ((ax >> 13) & 0x3ff) : 0));
    if (ax >= 0x477ff000u) /* rounds to >= 65520: inf */
        return (uint16_t)(sign | 0x7c00);
    if (ax < 0x38800000u) { /* subnormal half (or zero) */
        float v = u2f(ax) * 16777216.0f; /* scale so 1 ulp == 1 */
        uint32_t m = (uint32_t)lrintf(v); /* ties to even under default rounding */
        return (uint16_t)(sign | m);
    }
    uint32_t e = ((ax >> 23) - 112) << 10, m = ax & 0x7fffffu;
    uint32_t h = e | (m >> 13);
    uint32_t rest = m & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
        h++;
    return (uint16_t)(sign | h);
}

float sn_bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

uint16_t sn_f32_to_bf16(float f) {
    uint32_t x = f2u(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/* float8: exponent bits, bias, and the NaN/inf conventions per variant. */
static void f8_params(sn_dtype t, int *ebits, int *bias, bool *fnuz, bool *has_inf) {
    switch (t) {
    case SN_F8E4M3FN: *ebits = 4; *bias = 7; *fnuz = false; *has_inf = false; break;
    case SN_F8E4M3FNUZ: *ebits = 4; *bias = 8; *fnuz = true; *has_inf = false; break;
    case SN_F8E5M2: *ebits = 5; *bias = 15; *fnuz = false; *has_inf = true; break;
    default: *ebits = 5; *bias = 16; *fnuz = true; *has_inf = false; break;
    }
}

float sn_f8_to_f32(sn_dtype t, uint8_t v) {
    int eb, bias;
    bool fnuz, inf;
    f8_params(t, &eb, &bias, &fnuz, &inf);
    int mb = 7 - eb;
    if (fnuz && v == 0x80)
        return NAN;
    int sign = v >> 7, e = (v >> mb) & ((1 << eb) - 1), m = v & ((1 << mb) - 1);
    if (!fnuz) {
        if (inf && e == (1 << eb) - 1)
            return m ? NAN : (sign ? -INFINITY : INFINITY);
        if (!inf && e == (1 << eb) - 1 && m == (1 << mb) - 1)
            return NAN;
    }
    float r = e == 0 ? ldexpf((float)m, 1 - bias - mb) : ldexpf((float)((1 << mb) | m), e - bias - mb);
    return sign ? -r : r;
}

uint8_t sn_f32_to_f8(sn_dtype t, float f, bool saturate) {
    int eb, bias;
    bool fnuz, inf;
    f8_params(t, &eb, &bias, &fnuz, &inf);
    if (isnan(f))
        return fnuz ? 0x80 : 0x7f;
    /* Largest finite code and its value. */
    uint8_t maxc = fnuz ? 0x7f : (inf ? 0x7b : 0x7e);
    float maxv = sn_f8_to_f32(t, maxc);
    uint8_t sign = signbit(f) ? 0x80 : 0;
    float a = fabsf(f);
    if (a > maxv) {
        /* ONNX: saturate clamps to the largest finite value (infinities
         * too); otherwise overflow is NaN, or infinity for E5M2, the one
         * variant that has it. */
        if (saturate)
            return (uint8_t)(sign | maxc);
        if (inf)
            return (uint8_t)(sign | 0x7c);
        return fnuz ? 0x80 : (uint8_t)(sign | 0x7f);
    }
    /* Nearest code, ties to even code, by search over the monotonic codes. */
    uint8_t best = 0;
    float bestd = INFINITY;
    for (int c = 0; c <= maxc; c++) {
        float v = sn_f8_to_f32(t, (uint8_t)c), d = fabsf(v - a);
        if (d < bestd || (d == bestd && !(c & 1))) {
            bestd = d;
            best = (uint8_t)c;
        }
    }
    if (fnuz && best == 0)
        return 0; /* no negative zero */
    return (uint8_t)(sign | best);
}

/* float4 e2m1: sign, 2 exponent bits (bias 1), 1 mantissa bit; no inf or
 * NaN. Codes 0..7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6. */
static const float k_f4_vals[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

static float f4_to_f32(uint8_t v) {
    float r = k_f4_vals[v & 7];
    return (v & 8) ? -r : r;
}

/* Nearest code, ties to the even code; saturates (infinities too) to 6.
 * NaN has no code: it becomes 0x8 (what ml_dtypes and the ONNX tests do). */
static uint8_t f32_to_f4(float f) {
    if (isnan(f))
        return 0x8;
    uint8_t sign = signbit(f) ? 8 : 0;
    float a = fabsf(f);
    uint8_t c = 7;
    for (uint8_t k = 0; k < 7; k++) {
        float mid = (k_f4_vals[k] + k_f4_vals[k + 1]) * 0.5f;
        if (a < mid || (a == mid && !(k & 1))) {
            c = k;
            break;
        }
    }
    return (uint8_t)(sign | c);
}

/* float8 e8m0: 2^(e-127); 0xff is NaN. From float32 by the exponent,
 * rounding up when any fraction bit is set (the ONNX default round_mode),
 * saturating at 2^127. */
static float e8m0_to_f32(uint8_t v) {
    if (v == 0xff)
        return NAN;
    return v == 0 ? u2f(0x00400000u) : u2f((uint32_t)v << 23);
}

static uint8_t f32_to_e8m0(float f) {
    uint32_t b = f2u(f), e = (b >> 23) & 0xff;
    if (e == 0xff)
        return 0xff;
    if ((b & 0x7fffffu) && e < 0xfe)
        e++;
    return (uint8_t)e;
}

/* Packed sub-byte element i: bits wide (4 or 2), low bits first. */
static inline unsigned packed_get(const void *d, size_t i, int bits) {
    int per = 8 / bits;
    unsigned byte = ((const uint8_t *)d)[i / (size_t)per];
    return (byte >> ((i % (size_t)per) * (size_t)bits)) & ((1u << bits) - 1);
}

static inline void packed_set(void *d, size_t i, int bits, unsigned v) {
    int per = 8 / bits;
    uint8_t *p = (uint8_t *)d + i / (size_t)per;
    unsigned sh = (unsigned)((i % (size_t)per) * (size_t)bits), mask = ((1u << bits) - 1) << sh;
    *p = (uint8_t)((*p & ~mask) | ((v << sh) & mask));
}

/* Signed value of a two's-complement field of the given width. */
static inline int sext(unsigned v, int bits) {
    return (v & (1u << (bits - 1))) ? (int)v - (1 << bits) : (int)v;
}

double sn_load_f64(sn_dtype t, const void *d, size_t i) {
    switch (t) {
    case SN_F32: return ((const float *)d)[i];
    case SN_F64: return ((const double *)d)[i];
    case SN_F16: return sn_f16_to_f32(((const uint16_t *)d)[i]);
    case SN_BF16: return sn_bf16_to_f32(((const uint16_t *)d)[i]);
    case SN_U8: return ((const uint8_t *)d)[i];
    case SN_I8: return ((const int8_t *)d)[i];
    case SN_U16: return ((const uint16_t *)d)[i];
    case SN_I16: return ((const int16_t *)d)[i];
    case SN_I32: return ((const int32_t *)d)[i];
    case SN_I64: return (double)((const int64_t *)d)[i];
    case SN_U32: return ((const uint32_t *)d)[i];
    case SN_U64: return (double)((const uint64_t *)d)[i];
    case SN_BOOL: return ((const uint8_t *)d)[i] ? 1.0 : 0.0;
    case SN_F8E4M3FN: case SN_F8E4M3FNUZ: case SN_F8E5M2: case SN_F8E5M2FNUZ:
        return sn_f8_to_f32(t, ((const uint8_t *)d)[i]);
    case SN_F8E8M0: return e8m0_to_f32(((const uint8_t *)d)[i]);
    case SN_U4: return packed_get(d, i, 4);
    case SN_I4: return sext(packed_get(d, i, 4), 4);
    case SN_F4E2M1: return f4_to_f32((uint8_t)packed_get(d, i, 4));
    case SN_U2: return packed_get(d, i, 2);
    case SN_I2: return sext(packed_get(d, i, 2), 2);
    default: return 0.0;
    }
}

int64_t sn_load_i64(sn_dtype t, const void *d, size_t i) {
    switch (t) {
    case SN_I64: return ((const int64_t *)d)[i];
    case SN_I32: return ((const int32_t *)d)[i];
    case SN_U64: return (int64_t)((const uint64_t *)d)[i];
    case SN_U32: return ((const uint32_t *)d)[i];
    case SN_I16: return ((const int16_t *)d)[i];
    case SN_U16: return ((const uint16_t *)d)[i];
    case SN_I8: return ((const int8_t *)d)[i];
    case SN_U8: case SN_BOOL: return ((const uint8_t *)d)[i];
    default: return (int64_t)sn_load_f64(t, d, i);
    }
}

void sn_store_f64(sn_dtype t, void *d, size_t i, double v) {
    switch (t) {
    case SN_F32: ((float *)d)[i] = (float)v; break;
    case SN_F64: ((double *)d)[i] = v; break;
    case SN_F16: ((uint16_t *)d)[i] = sn_f32_to_f16((float)v); break;
    case SN_BF16: ((uint16_t *)d)[i] = sn_f32_to_bf16((float)v); break;
    case SN_U8: ((uint8_t *)d)[i] = (uint8_t)v; break;
    case SN_I8: ((int8_t *)d)[i] = (int8_t)v; break;
    case SN_U16: ((uint16_t *)d)[i] = (uint16_t)v; break;
    case SN_I16: ((int16_t *)d)[i] = (int16_t)v; break;
    case SN_I32: ((int32_t *)d)[i] = (int32_t)v; break;
    case SN_I64: ((int64_t *)d)[i] = (int64_t)v; break;
    case SN_U32: ((uint32_t *)d)[i] = (uint32_t)v; break;
    case SN_U64: ((uint64_t *)d)[i] = (uint64_t)v; break;
    case SN_BOOL: ((uint8_t *)d)[i] = v != 0.0; break;
    case SN_F8E4M3FN: case SN_F8E4M3FNUZ: case SN_F8E5M2: case SN_F8E5M2FNUZ:
        ((uint8_t *)d)[i] = sn_f32_to_f8(t, (float)v, true);
        break;
    case SN_F8E8M0: ((uint8_t *)d)[i] = f32_to_e8m0((float)v); break;
    /* integers of 4 and 2 bits keep the low bits (wrap, like the casts) */
    case SN_U4: case SN_I4: packed_set(d, i, 4, (unsigned)(int64_t)(fabs(v) < 1e18 ? v : 0)); break;
    case SN_U2: case SN_I2: packed_set(d, i, 2, (unsigned)(int64_t)(fabs(v) < 1e18 ? v : 0)); break;
    case SN_F4E2M1: packed_set(d, i, 4, f32_to_f4((float)v)); break;
    default: break;
    }
}

bool sn_dtype_is_packed(sn_dtype t) {
    return t == SN_U4 || t == SN_I4 || t == SN_F4E2M1 || t == SN_U2 || t == SN_I2;
}
