/* Cast and CastLike (between all numeric types, bool, float16/bfloat16,
 * float8 and string), Identity (tensors, sequences, optionals) and Dropout
 * (inference copy; training mode with a seeded mask). */
/* The element-wise loops are written to vectorize; -O2 on GCC 12 does not
 * (very-cheap cost model), so ask for it here. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ops/elementwise/elementwise.h"
#include "ops/sequence/value_util.h"

/* ---- numeric conversion ------------------------------------------------ */

/* float -> integer as x86 converts: NaN and out-of-range give INT64_MIN,
 * narrower targets then wrap (what numpy's astype does there). */
static inline int64_t ew_f2i(double v) {
    return (v == v && v >= -9.2233720368547758e18 && v < 9.2233720368547758e18) ? (int64_t)v
                                                                                : INT64_MIN;
}
static inline uint64_t ew_f2u(double v) {
    return (v >= 0 && v < 1.8446744073709552e19) ? (uint64_t)v : (uint64_t)ew_f2i(v);
}
/* float8 without saturation: past the largest finite value (after
 * rounding) gives inf where the type has it, else NaN. */
static uint8_t ew_to_f8(sn_dtype t, float f, bool sat) {
    if (sat || isnan(f))
        return sn_f32_to_f8(t, f, true);
    uint8_t maxc = t == SN_F8E5M2 ? 0x7b : t == SN_F8E4M3FN ? 0x7e : 0x7f;
    float maxv = sn_f8_to_f32(t, maxc), half = (maxv - sn_f8_to_f32(t, (uint8_t)(maxc - 1))) / 2;
    float a = fabsf(f);
    if (!(isinf(a) || a > maxv + half || (a == maxv + half && (maxc & 1))))
        return sn_f32_to_f8(t, f, true);
    uint8_t sign = signbit(f) ? 0x80 : 0;
    if (t == SN_F8E5M2)
        return sign | 0x7c;
    return t == SN_F8E4M3FN ? (uint8_t)(sign | 0x7f) : 0x80;
}

#define EW_TOI(v) _Generic((v), float: ew_f2i(v), double: ew_f2i(v), default: (int64_t)(v))
#define EW_TOU(v) _Generic((v), float: ew_f2u(v), double: ew_f2u(v), default: (uint64_t)(v))

#define EW_CASE(DT, TO, EXPR)                         \
    case DT: {                                        \
        TO *o = o_;                                   \
        for (int64_t i = 0; i < n; i++) {             \
            S v = x[i];                               \
            o[i] = (TO)(EXPR);                        \
        }                                             \
        break;                                        \
    }
#define EW_CAST_FROM(sfx, SI)                                                               \
    static void cast_from_##sfx(void *o_, sn_dtype to, const void *x_, int64_t n, bool sat) { \
        typedef SI S;                                                                       \
        const S *x = x_;                                                                    \
        switch (to) {                                                                       \
            EW_CASE(SN_F32, float, v)                                                       \
            EW_CASE(SN_F64, double, v)                                                      \
            EW_CASE(SN_I8, int8_t, EW_TOI(v))                                               \
            EW_CASE(SN_I16, int16_t, EW_TOI(v))                                             \
            EW_CASE(SN_I32, int32_t, EW_TOI(v))                                             \
            EW_CASE(SN_I64, int64_t, EW_TOI(v))                                             \
            EW_CASE(SN_U8, uint8_t, EW_TOI(v))                                              \
            EW_CASE(SN_U16, uint16_t, EW_TOI(v))                                            \
            EW_CASE(SN_U32, uint32_t, EW_TOI(v))                                            \
            EW_CASE(SN_U64, uint64_t, EW_TOU(v))                                            \
            EW_CASE(SN_BOOL, uint8_t, v != 0)                                               \
            EW_CASE(SN_F16, uint16_t, sn_f32_to_f16((float)v))                              \
            EW_CASE(SN_BF16, uint16_t, sn_f32_to_bf16((float)v))                            \
        case SN_F8E4M3FN: case SN_F8E4M3FNUZ: case SN_F8E5M2: case SN_F8E5M2FNUZ: {         \
            uint8_t *o = o_;                                                                \
            for (int64_t i = 0; i < n; i++)                                                 \
                o[i] = ew_to_f8(to, (float)x[i], sat);                                  \
            break;                                                                          \
        }                                                                                   \
        default:                                                                            \
            break;                                                                          \
        }                                                                                   \
    }
EW_CAST_FROM(f32, float)
EW_CAST_FROM(f64, double)
EW_CAST_FROM(i8, int8_t)
EW_CAST_FROM(i16, int16_t)
EW_CAST_FROM(i32, int32_t)
EW_CAST_FROM(i64, int64_t)
EW_CAST_FROM(u8, uint8_t)
EW_CAST_FROM(u16, uint16_t)
EW_CAST_FROM(u32, uint32_t)
EW_CAST_FROM(u64, uint64_t)

typedef void (*ew_cast_fn)(void *o, sn_dtype to, const void *x, int64_t n, bool sat);
static const ew_cast_fn k_cast_from[SN_DTYPE_COUNT] = {
    [SN_F32] = cast_from_f32, [SN_F64] = cast_from_f64, [SN_I8] = cast_from_i8,
    [SN_I16] = cast_from_i16, [SN_I32] = cast_from_i32, [SN_I64] = cast_from_i64,
    [SN_U8] = cast_from_u8,   [SN_U16] = cast_from_u16, [SN_U32] = cast_from_u32,
    [SN_U64] = cast_from_u64, [SN_BOOL] = cast_from_u8,
};

/* ---- sub-byte types and float8 e8m0 ------------------------------------- */

/* 4- and 2-bit types pack two or four elements per byte, low bits first. */
static int ew_sub_bits(sn_dtype t) {
    return t == SN_U4 || t == SN_I4 || t == SN_F4E2M1 ? 4 : t == SN_U2 || t == SN_I2 ? 2 : 0;
}
static bool ew_is_sub(sn_dtype t) { return ew_sub_bits(t) || t == SN_F8E8M0; }

enum { EW_ROUND_UP, EW_ROUND_DOWN, EW_ROUND_NEAREST };

/* float32 -> float8 e8m0 (2^(e-127), 0xff NaN) by its exponent, rounding
 * the fraction as round_mode says; saturate stops at 2^127 instead of
 * reaching the NaN code. Infinities and NaN give NaN. */
static uint8_t ew_to_e8m0(float f, bool sat, int mode) {
    uint32_t b;
    memcpy(&b, &f, 4);
    uint32_t e = (b >> 23) & 0xff;
    if (e == 0xff)
        return 0xff;
    bool up = false;
    if (mode == EW_ROUND_UP) {
        up = (b & 0x7fffffu) != 0;
    } else if (mode == EW_ROUND_NEAREST) {
        bool g = b & 0x400000u, r = b & 0x200000u, st = b & 0x1fffffu;
        up = g && (r || st || e > 0);
    }
    if (up && !(sat && e == 0xfe))
        e++;
    return (uint8_t)e;
}

/* Integer value of element i of a non-sub-byte source, truncating floats
 * toward zero as the other casts do. */
static int64_t ew_load_int(sn_dtype t, const void *x, size_t i) {
    if (sn_dtype_is_float(t))
        return ew_f2i(sn_load_f64(t, x, i));
    return sn_load_i64(t, x, i);
}

/* Casts involving 4-/2-bit types or e8m0, element by element: narrow
 * integers keep the low bits (wrap), float4 rounds to nearest even and
 * saturates, e8m0 follows round_mode. */
static void ew_convert_sub(void *o, sn_dtype to, const void *x, sn_dtype from, int64_t n, bool sat,
                           int mode) {
    int bits = ew_sub_bits(to);
    if (bits)
        memset(o, 0, sn_dtype_nbytes(to, n));
    if (to == SN_F4E2M1) {
        for (int64_t i = 0; i < n; i++)
            sn_store_f64(to, o, (size_t)i, sn_load_f64(from, x, (size_t)i));
        return;
    }
    if (bits) {
        unsigned mask = (1u << bits) - 1, per = 8u / (unsigned)bits;
        uint8_t *ob = o;
        for (int64_t i = 0; i < n; i++) {
            uint64_t v = (uint64_t)ew_load_int(from, x, (size_t)i) & mask;
            ob[(uint64_t)i / per] |= (uint8_t)(v << (((uint64_t)i % per) * (unsigned)bits));
        }
        return;
    }
    if (to == SN_F8E8M0) {
        uint8_t *ob = o;
        for (int64_t i = 0; i < n; i++)
            ob[i] = ew_to_e8m0((float)sn_load_f64(from, x, (size_t)i), sat, mode);
        return;
    }
    /* from a sub-byte type or e8m0 into an ordinary type: every value is
     * exact in float32 */
    float buf[EW_CHUNK];
    size_t osz = sn_dtype_size(to);
    for (int64_t s = 0; s < n; s += EW_CHUNK) {
        int64_t m = sn_imin(EW_CHUNK, n - s);
        for (int64_t i = 0; i < m; i++)
            buf[i] = (float)sn_load_f64(from, x, (size_t)(s + i));
        cast_from_f32((char *)o + (size_t)s * osz, to, buf, m, sat);
    }
}

static bool ew_cast_ok(sn_dtype t) {
    return sn_dtype_valid(t) && (k_cast_from[t] || ew_is_half(t) || ew_is_sub(t) || t == SN_STRING);
}

void ew_convert(void *o, sn_dtype to, const void *x, sn_dtype from, int64_t n, bool saturate) {
    if (n <= 0)
        return;
    if (from != to && (ew_is_sub(from) || ew_is_sub(to))) {
        ew_convert_sub(o, to, x, from, n, saturate, EW_ROUND_UP);
        return;
    }
    if (from == to) {
        if (o != x)
            memmove(o, x, sn_dtype_nbytes(to, n));
        return;
    }
    if (from == SN_BOOL && to != SN_BOOL) {
        /* bool bytes other than 0/1 still mean true */
        const uint8_t *b = x;
        uint8_t one[EW_CHUNK];
        size_t osz = sn_dtype_size(to);
        for (int64_t s = 0; s < n; s += EW_CHUNK) {
            int64_t m = sn_imin(EW_CHUNK, n - s);
            for (int64_t i = 0; i < m; i++)
                one[i] = b[s + i] != 0;
            cast_from_u8((char *)o + (size_t)s * osz, to, one, m, saturate);
        }
        return;
    }
    if (k_cast_from[from]) {
        k_cast_from[from](o, to, x, n, saturate);
        return;
    }
    /* half and 8-bit floats: through float32 a chunk at a time */
    float buf[EW_CHUNK];
    size_t osz = sn_dtype_size(to);
    for (int64_t s = 0; s < n; s += EW_CHUNK) {
        int64_t m = sn_imin(EW_CHUNK, n - s);
        for (int64_t i = 0; i < m; i++)
            buf[i] = sn_ld_f32(from, x, s + i);
        cast_from_f32((char *)o + (size_t)s * osz, to, buf, m, saturate);
    }
}

/* ---- strings ------------------------------------------------------------ */

/* Shortest decimal that reads back as the same value of type t, laid out as
 * numpy prints it: positional for 1e-4 <= |v| < 10^cut, else d.ddde+XX. */
static int ew_fmt_float(char *buf, size_t cap, double v, sn_dtype t) {
    if (isnan(v))
        return snprintf(buf, cap, "nan");
    if (isinf(v))
        return snprintf(buf, cap, v < 0 ? "-inf" : "inf");
    int maxp = 17, cut = 16;
    if (t == SN_F32) {
        maxp = 9;
        cut = 6;
    } else if (t == SN_F16 || t == SN_BF16 || ew_is_half(t)) {
        maxp = 5;
        cut = t == SN_F16 ? 3 : 6;
    }
    char e[40];
    int p = 1;
    for (; p < maxp; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, v);
        double r = strtod(e, NULL);
        bool same;
        if (t == SN_F64)
            same = r == v;
        else if (t == SN_F32)
            same = (float)r == (float)v;
        else if (t == SN_F16)
            same = sn_f32_to_f16((float)r) == sn_f32_to_f16((float)v);
        else if (t == SN_BF16)
            same = sn_f32_to_bf16((float)r) == sn_f32_to_bf16((float)v);
        else
            same = sn_f32_to_f8(t, (float)r, true) == sn_f32_to_f8(t, (float)v, true);
        if (same)
            break;
    }
    snprintf(e, sizeof e, "%.*e", p - 1, v);
    /* e = [-]d[.ddd]e(+|-)XX: collect the digits and the exponent */
    char dig[24];
    int nd = 0;
    const char *s = e;
    bool neg = *s == '-';
    if (neg)
        s++;
    for (; *s && *s != 'e'; s++)
        if (*s >= '0' && *s <= '9' && nd < (int)sizeof dig - 1)
            dig[nd++] = *s;
    int ex = *s == 'e' ? atoi(s + 1) : 0;
    while (nd > 1 && dig[nd - 1] == '0')
        nd--;
    dig[nd] = 0;
    double a = fabs(v);
    size_t k = 0;
    char out[64];
    if (neg)
        out[k++] = '-';
    if (a == 0 || (a >= 1e-4 && a < pow(10, cut))) {
        if (ex >= 0) {
            for (int i = 0; i <= ex; i++)
                out[k++] = i < nd ? dig[i] : '0';
            out[k++] = '.';
            if (nd > ex + 1)
                for (int i = ex + 1; i < nd; i++)
                    out[k++] = dig[i];
            else
                out[k++] = '0';
        } else {
            out[k++] = '0';
            out[k++] = '.';
            for (int i = 0; i < -ex - 1; i++)
                out[k++] = '0';
            for (int i = 0; i < nd; i++)
                out[k++] = dig[i];
        }
        out[k] = 0;
    } else {
        out[k++] = dig[0];
        if (nd > 1) {
            out[k++] = '.';
            for (int i = 1; i < nd; i++)
                out[k++] = dig[i];
        }
        snprintf(out + k, sizeof out - k, "e%c%02d", ex < 0 ? '-' : '+', ex < 0 ? -ex : ex);
    }
    return snprintf(buf, cap, "%s", out);
}

/* Element i of x (not string) as text into buf; returns its length. */
static int ew_fmt_elem(char *buf, size_t cap, sn_dtype t, const void *x, size_t i) {
    if (t == SN_BOOL)
        return snprintf(buf, cap, "%s", ((const uint8_t *)x)[i] ? "True" : "False");
    if (sn_dtype_is_float(t))
        return ew_fmt_float(buf, cap, sn_load_f64(t, x, i), t);
    if (t == SN_U64)
        return snprintf(buf, cap, "%llu", (unsigned long long)((const uint64_t *)x)[i]);
    return snprintf(buf, cap, "%lld", (long long)sn_load_i64(t, x, i));
}

static int ew_cast_to_string(sn_kctx *c, const sn_tensor *x, sn_tensor *y, int64_t n) {
    char tmp[64];
    size_t total = 0;
    for (int64_t i = 0; i < n; i++)
        total += (size_t)ew_fmt_elem(tmp, sizeof tmp, x->dtype, x->data, (size_t)i);
    char *buf = total ? sn_kctx_alloc_extra(c, 0, total) : NULL;
    if (total && !buf)
        return c->err->code ? c->err->code : SNUG_ERR_OOM;
    sn_string *s = y->data;
    for (int64_t i = 0; i < n; i++) {
        int len = ew_fmt_elem(tmp, sizeof tmp, x->dtype, x->data, (size_t)i);
        memcpy(buf, tmp, (size_t)len);
        s[i].ptr = buf;
        s[i].len = (size_t)len;
        buf += len;
    }
    return SNUG_OK;
}

static void ew_parse_elem(const sn_string *s, sn_dtype to, void *o, size_t i, bool sat) {
    char tmp[128];
    size_t len = s->len < sizeof tmp - 1 ? s->len : sizeof tmp - 1;
    if (len)
        memcpy(tmp, s->ptr, len);
    tmp[len] = 0;
    size_t osz = sn_dtype_size(to);
    char *dst = (char *)o + i * osz;
    if (to == SN_BOOL) {
        if (!strcasecmp(tmp, "true") || !strcasecmp(tmp, "false")) {
            *(uint8_t *)dst = tmp[0] == 't' || tmp[0] == 'T';
            return;
        }
    }
    if (sn_dtype_is_int(to) || to == SN_BOOL) {
        char *end;
        if (to == SN_U64) {
            unsigned long long u = strtoull(tmp, &end, 10);
            if (end != tmp && *end == 0 && tmp[0] != '-') {
                memcpy(dst, &u, sizeof u);
                return;
            }
        } else {
            long long v = strtoll(tmp, &end, 10);
            if (end != tmp && *end == 0) {
                int64_t iv = v;
                ew_convert(dst, to, &iv, SN_I64, 1, sat);
                return;
            }
        }
    }
    double d = strtod(tmp, NULL);
    ew_convert(dst, to, &d, SN_F64, 1, sat);
}

/* ---- Cast / CastLike ----------------------------------------------------- */

static const struct {
    const char *name;
    sn_dtype t;
} k_type_names[] = {
    {"FLOAT", SN_F32},   {"UINT8", SN_U8},   {"INT8", SN_I8},     {"UINT16", SN_U16},
    {"INT16", SN_I16},   {"INT32", SN_I32},  {"INT64", SN_I64},   {"STRING", SN_STRING},
    {"BOOL", SN_BOOL},   {"FLOAT16", SN_F16}, {"DOUBLE", SN_F64}, {"UINT32", SN_U32},
    {"UINT64", SN_U64},  {"BFLOAT16", SN_BF16},
};

/* The target type: attribute 'to' (an enum value, or before opset 6 a
 * type name), or CastLike's input 1. */
static int ew_cast_target(sn_infer_ctx *c, sn_dtype *to) {
    if (!strcmp(c->node->p->op_type, "CastLike")) {
        if (c->n_in < 2 || !c->in[1])
            return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "target_type input is missing");
        *to = c->in[1]->dtype;
        return SNUG_OK;
    }
    const sn_attr *a = sn_attr_get(c->node, "to");
    if (!a)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "attribute 'to' is missing");
    if (a->type == SN_ATTR_STRING) {
        for (size_t i = 0; i < sizeof k_type_names / sizeof k_type_names[0]; i++)
            if (!strcasecmp(a->s.ptr, k_type_names[i].name)) {
                *to = k_type_names[i].t;
                return SNUG_OK;
            }
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "unknown type name '%s'", a->s.ptr);
    }
    int64_t v = sn_attr_int(c->node, "to", 0);
    *to = sn_dtype_valid((int)v) ? (sn_dtype)v : SN_UNDEFINED;
    if (*to == SN_UNDEFINED)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "bad target type %lld", (long long)v);
    return SNUG_OK;
}

int ew_infer_cast(sn_infer_ctx *c) {
    if (c->n_in < 1 || !c->in[0])
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "input is missing");
    const sn_tensor *x = c->in[0];
    if (x->kind != SN_KIND_TENSOR)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "input is not a tensor");
    sn_dtype to;
    SN_TRY(ew_cast_target(c, &to));
    if (!ew_cast_ok(x->dtype) || !ew_cast_ok(to) ||
        ((x->dtype == SN_STRING || to == SN_STRING) && (ew_is_sub(x->dtype) || ew_is_sub(to))))
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "cast of '%s' from %s to %s not supported",
                        c->node->p->inputs[0], sn_dtype_name(x->dtype), sn_dtype_name(to));
    sn_tensor *y = c->out[0];
    if (!y)
        return SNUG_OK;
    sn_set_out(y, to, x->rank, x->dims);
    return SNUG_OK;
}

int ew_infer_castlike(sn_infer_ctx *c) { return ew_infer_cast(c); }

int ew_run_cast(sn_kctx *c) {
    const sn_tensor *x = c->in[0];
    sn_tensor *y = c->out[0];
    int64_t n = sn_tensor_numel(x);
    bool sat = sn_attr_int(c->node, "saturate", 1) != 0;
    if (x->dtype == SN_STRING && y->dtype == SN_STRING) {
        if (n > 0)
            memcpy(y->data, x->data, (size_t)n * sizeof(sn_string));
        return sn_strings_own(c, 0);
    }
    if (y->dtype == SN_STRING)
        return ew_cast_to_string(c, x, y, n);
    if (x->dtype != y->dtype && (ew_is_sub(x->dtype) || ew_is_sub(y->dtype))) {
        const char *rm = sn_attr_str(c->node, "round_mode", "up");
        int mode = !strcmp(rm, "down") ? EW_ROUND_DOWN : !strcmp(rm, "nearest") ? EW_ROUND_NEAREST : EW_ROUND_UP;
        if (n > 0)
            ew_convert_sub(y->data, y->dtype, x->data, x->dtype, n, sat, mode);
        return SNUG_OK;
    }
    if (x->dtype == SN_STRING) {
        const sn_string *s = x->data;
        for (int64_t i = 0; i < n; i++)
            ew_parse_elem(&s[i], y->dtype, y->data, (size_t)i, sat);
        return SNUG_OK;
    }
    ew_convert(y->data, y->dtype, x->data, x->dtype, n, sat);
    return SNUG_OK;
}

/* ---- Identity ------------------------------------------------------------ */

int ew_infer_identity(sn_infer_ctx *c) {
    if (c->n_in < 1 || !c->in[0])
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "input is missing");
    const sn_tensor *x = c->in[0];
    sn_tensor *y = c->out[0];
    if (!y)
        return SNUG_OK;
    y->kind = x->kind;
    y->optional = x->optional;
    y->dtype = x->dtype;
    y->n_items = x->n_items;
    if (x->kind == SN_KIND_TENSOR)
        sn_tensor_set_shape(y, x->rank, x->dims);
    else
        y->rank = x->rank;
    return SNUG_OK;
}

int ew_run_identity(sn_kctx *c) {
    const sn_tensor *x = c->in[0];
    sn_tensor *y = c->out[0];
    if (x->kind != SN_KIND_TENSOR)
        return sn_value_emit(c, 0, x);
    if (y->data != x->data && sn_tensor_nbytes(x))
        memcpy(y->data, x->data, sn_tensor_nbytes(x));
    return x->dtype == SN_STRING ? sn_strings_own(c, 0) : SNUG_OK;
}

/* ---- Dropout --------------------------------------------------------------
 * opset < 12: ratio attribute, always inference (a copy). From 12: ratio
 * and training_mode inputs; training with ratio > 0 drops with a mask from
 * a generator seeded by the seed attribute. Mask: T before opset 10, bool
 * after. */

static bool ew_dropout_training(const sn_kctx *c, float *ratio) {
    *ratio = 0.5f;
    if (c->node->opset < 12)
        return false;
    if (c->n_in > 1 && c->in[1] && c->in[1]->data && sn_tensor_numel(c->in[1]) > 0)
        *ratio = (float)sn_load_f64(c->in[1]->dtype, c->in[1]->data, 0);
    return c->n_in > 2 && c->in[2] && c->in[2]->data && sn_tensor_numel(c->in[2]) > 0 &&
           sn_load_f64(c->in[2]->dtype, c->in[2]->data, 0) != 0;
}

int ew_infer_dropout(sn_infer_ctx *c) {
    if (c->n_in < 1 || !c->in[0])
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "input is missing");
    const sn_tensor *x = c->in[0];
    if (x->kind != SN_KIND_TENSOR || !sn_dtype_is_float(x->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "input must be a float tensor, is %s",
                        sn_dtype_name(x->dtype));
    if (c->node->opset >= 12 && c->n_in > 1 && c->in[1] && c->in[1]->data &&
        sn_tensor_numel(c->in[1]) > 0) {
        double r = sn_load_f64(c->in[1]->dtype, c->in[1]->data, 0);
        if (!(r >= 0 && r < 1))
            return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "ratio %g is not in [0, 1)", r);
    }
    for (int j = 0; j < 2 && j < c->n_out; j++) {
        sn_tensor *y = c->out[j];
        if (!y)
            continue;
        sn_set_out(y, j == 0 || c->node->opset < 10 ? x->dtype : SN_BOOL, x->rank, x->dims);
    }
    return SNUG_OK;
}

static inline uint64_t ew_splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int ew_run_dropout(sn_kctx *c) {
    const sn_tensor *x = c->in[0];
    sn_tensor *y = c->out[0], *mask = c->n_out > 1 ? c->out[1] : NULL;
    int64_t n = sn_tensor_numel(x);
    float ratio;
    bool train = ew_dropout_training(c, &ratio) && ratio > 0;
    if (!train) {
        if (y && y->data != x->data && n > 0)
            memcpy(y->data, x->data, sn_tensor_nbytes(x));
        if (mask) {
            for (int64_t i = 0; i < n; i++)
                sn_store_f64(mask->dtype, mask->data, (size_t)i, 1.0);
        }
        return SNUG_OK;
    }
    uint64_t seed = (uint64_t)sn_attr_int(c->node, "seed", 0);
    double scale = 1.0 / (1.0 - ratio);
    for (int64_t i = 0; i < n; i++) {
        bool keep = (double)(ew_splitmix(&seed) >> 11) * 0x1p-53 >= ratio;
        if (y)
            sn_store_f64(y->dtype, y->data, (size_t)i,
                         keep ? sn_load_f64(x->dtype, x->data, (size_t)i) * scale : 0.0);
        if (mask)
            sn_store_f64(mask->dtype, mask->data, (size_t)i, keep ? 1.0 : 0.0);
    }
    return SNUG_OK;
}
