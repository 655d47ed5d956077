/* Inner kernels of the LLM operators; see llm_kernels.h. The fast versions
 * are plain loops written with independent lanes so GCC vectorizes them at
 * -O2; the _ref versions are the obvious scalar code. */
#include <math.h>
#include <string.h>

#include "ops/llm_kernels.h"
#include "ops/logistic.h"

#define LANES 8

/* Kernels that must round like ONNX Runtime's AVX2 code use fmaf: a clone
 * for x86-64-v3 (AVX2, FMA) is picked at load time where the
 * toolchain supports it; elsewhere fmaf is exact in software. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define LLM_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define LLM_CLONES
#endif

/* ---- dtype staging ------------------------------------------------------ */

bool llm_is_real(sn_dtype t) {
    return t == SN_F32 || t == SN_F16 || t == SN_BF16 || t == SN_F64;
}

void llm_to_f32(sn_dtype t, const void *src, float *dst, int64_t n) {
    switch (t) {
    case SN_F32:
        if ((const void *)dst != src)
            memmove(dst, src, (size_t)n * sizeof(float));
        break;
    case SN_F16:
        for (int64_t i = 0; i < n; i++)
            dst[i] = sn_f16_to_f32(((const uint16_t *)src)[i]);
        break;
    case SN_BF16:
        for (int64_t i = 0; i < n; i++)
            dst[i] = sn_bf16_to_f32(((const uint16_t *)src)[i]);
        break;
    case SN_F64:
        for (int64_t i = 0; i < n; i++)
            dst[i] = (float)((const double *)src)[i];
        break;
    default:
        for (int64_t i = 0; i < n; i++)
            dst[i] = (float)sn_load_f64(t, src, (size_t)i);
        break;
    }
}

void llm_from_f32(sn_dtype t, const float *src, void *dst, int64_t n) {
    switch (t) {
    case SN_F32:
        if ((void *)src != dst)
            memmove(dst, src, (size_t)n * sizeof(float));
        break;
    case SN_F16:
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = sn_f32_to_f16(src[i]);
        break;
    case SN_BF16:
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = sn_f32_to_bf16(src[i]);
        break;
    case SN_F64:
        for (int64_t i = 0; i < n; i++)
            ((double *)dst)[i] = src[i];
        break;
    default:
        for (int64_t i = 0; i < n; i++)
            sn_store_f64(t, dst, (size_t)i, src[i]);
        break;
    }
}

/* ---- reductions --------------------------------------------------------- */

static inline float lanes_sum(const float *acc) {
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

/* Four floats in a vector register (GCC/Clang vector extension; the SIMD
 * pass replaces this with intrinsics per ISA). */
typedef float v4f __attribute__((vector_size(16)));

static inline v4f v4_load(const float *p) {
    v4f v;
    memcpy(&v, p, sizeof v);
    return v;
}

float llm_dot(const float *a, const float *b, int64_t n) {
    v4f s0 = {0, 0, 0, 0}, s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 += v4_load(a + i) * v4_load(b + i);
        s1 += v4_load(a + i + 4) * v4_load(b + i + 4);
        s2 += v4_load(a + i + 8) * v4_load(b + i + 8);
        s3 += v4_load(a + i + 12) * v4_load(b + i + 12);
    }
    for (; i + 4 <= n; i += 4)
        s0 += v4_load(a + i) * v4_load(b + i);
    v4f v = (s0 + s1) + (s2 + s3);
    float s = (v[0] + v[2]) + (v[1] + v[3]);
    for (; i < n; i++)
        s += a[i] * b[i];
    return s;
}

void llm_axpy(float alpha, const float *x, float *y, int64_t n) {
    int64_t i = 0;
    v4f va = {alpha, alpha, alpha, alpha};
    for (; i + 8 <= n; i += 8) {
        v4f y0 = v4_load(y + i) + va * v4_load(x + i);
        v4f y1 = v4_load(y + i + 4) + va * v4_load(x + i + 4);
        memcpy(y + i, &y0, sizeof y0);
        memcpy(y + i + 4, &y1, sizeof y1);
    }
    for (; i < n; i++)
        y[i] += alpha * x[i];
}

float llm_dot_ref(const float *a, const float *b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return (float)s;
}

/* ---- block quantization ------------------------------------------------- */

static inline int q_code(const uint8_t *blob, int bits, int64_t i) {
    int64_t bit = i * bits;
    return (blob[bit >> 3] >> (bit & 7)) & ((1 << bits) - 1);
}

void llm_q_dequant_ref(const uint8_t *blob, int bits, int64_t len, float scale, float zp,
                       float *out) {
    for (int64_t i = 0; i < len; i++)
        out[i] = ((float)q_code(blob, bits, i) - zp) * scale;
}

void llm_q_dequant(const uint8_t *blob, int bits, int64_t len, float scale, float zp,
                   float *out) {
    int64_t i = 0;
    if (bits == 4) {
        for (; i + 2 <= len; i += 2) {
            uint8_t b = blob[i >> 1];
            out[i] = ((float)(b & 15) - zp) * scale;
            out[i + 1] = ((float)(b >> 4) - zp) * scale;
        }
    } else if (bits == 8) {
        for (; i < len; i++)
            out[i] = ((float)blob[i] - zp) * scale;
    } else if (bits == 2) {
        for (; i + 4 <= len; i += 4) {
            uint8_t b = blob[i >> 2];
            out[i] = ((float)(b & 3) - zp) * scale;
            out[i + 1] = ((float)((b >> 2) & 3) - zp) * scale;
            out[i + 2] = ((float)((b >> 4) & 3) - zp) * scale;
            out[i + 3] = ((float)(b >> 6) - zp) * scale;
        }
    }
    for (; i < len; i++)
        out[i] = ((float)q_code(blob, bits, i) - zp) * scale;
}

float llm_q_dot_ref(const uint8_t *blob, int bits, const float *a, int64_t len) {
    double s = 0;
    for (int64_t i = 0; i < len; i++)
        s += (double)a[i] * q_code(blob, bits, i);
    return (float)s;
}

/* 4-bit codes of one byte as two floats (low nibble first). */
#define NIB1(b) {(float)((b) & 15), (float)((b) >> 4)}
#define NIB4(b) NIB1(b), NIB1((b) + 1), NIB1((b) + 2), NIB1((b) + 3)
#define NIB16(b) NIB4(b), NIB4((b) + 4), NIB4((b) + 8), NIB4((b) + 12)
#define NIB64(b) NIB16(b), NIB16((b) + 16), NIB16((b) + 32), NIB16((b) + 48)
static const float k_nib[256][2] = {NIB64(0), NIB64(64), NIB64(128), NIB64(192)};

/* 4 codes of bytes b[0], b[1] as a vector. */
static inline v4f nib4(const uint8_t *b) {
    v4f v;
    memcpy(&v, k_nib[b[0]], 8);
    memcpy((char *)&v + 8, k_nib[b[1]], 8);
    return v;
}

/* 16 codes per step with four vector accumulators; other widths fill a
 * fixed-size array of 16 and use 16 independent lanes. */
float llm_q_dot(const uint8_t *blob, int bits, const float *a, int64_t len) {
    float acc[16] = {0}, t[16];
    int64_t i = 0;
    if (bits == 4) {
        v4f s0 = {0, 0, 0, 0}, s1 = s0, s2 = s0, s3 = s0;
        for (; i + 16 <= len; i += 16) {
            const uint8_t *b = blob + (i >> 1);
            s0 += v4_load(a + i) * nib4(b);
            s1 += v4_load(a + i + 4) * nib4(b + 2);
            s2 += v4_load(a + i + 8) * nib4(b + 4);
            s3 += v4_load(a + i + 12) * nib4(b + 6);
        }
        v4f s = (s0 + s1) + (s2 + s3);
        memcpy(acc, &s, sizeof s);
    } else if (bits == 8) {
        v4f s0 = {0, 0, 0, 0}, s1 = s0;
        for (; i + 8 <= len; i += 8) {
            const uint8_t *b = blob + i;
            v4f c0 = {(float)b[0], (float)b[1], (float)b[2], (float)b[3]};
            v4f c1 = {(float)b[4], (float)b[5], (float)b[6], (float)b[7]};
            s0 += v4_load(a + i) * c0;
            s1 += v4_load(a + i + 4) * c1;
        }
        v4f s = s0 + s1;
        memcpy(acc, &s, sizeof s);
    } else if (bits == 2) {
        for (; i + 16 <= len; i += 16) {
            const uint8_t *b = blob + (i >> 2);
            for (int j = 0; j < 4; j++) {
                t[4 * j] = (float)(b[j] & 3);
                t[4 * j + 1] = (float)((b[j] >> 2) & 3);
                t[4 * j + 2] = (float)((b[j] >> 4) & 3);
                t[4 * j + 3] = (float)(b[j] >> 6);
            }
            for (int j = 0; j < 16; j++)
                acc[j] += a[i + j] * t[j];
        }
    }
    float s = lanes_sum(acc) + lanes_sum(acc + 8);
    for (; i < len; i++)
        s += a[i] * (float)q_code(blob, bits, i);
    return s;
}

void llm_q4_permute(const float *a, float *ap, int64_t n16) {
    for (int64_t g = 0; g < n16; g++)
        for (int j = 0; j < 8; j++) {
            ap[16 * g + j] = a[16 * g + 2 * j];
            ap[16 * g + 8 + j] = a[16 * g + 2 * j + 1];
        }
}

void llm_q_codes(const uint8_t *blob, int bits, int64_t len, int zp, int16_t *out) {
    int64_t i = 0;
    if (bits == 4) {
        for (; i + 2 <= len; i += 2) {
            uint8_t b = blob[i >> 1];
            out[i] = (int16_t)((b & 15) - zp);
            out[i + 1] = (int16_t)((b >> 4) - zp);
        }
    } else if (bits == 8) {
        for (; i < len; i++)
            out[i] = (int16_t)(blob[i] - zp);
    }
    for (; i < len; i++)
        out[i] = (int16_t)(q_code(blob, bits, i) - zp);
}

float llm_q8_quantize(const float *x, int64_t len, int8_t *q) {
    float amax = 0;
    for (int64_t i = 0; i < len; i++) {
        float a = fabsf(x[i]);
        amax = a > amax ? a : amax;
    }
    float scale = amax / 127.0f;
    float inv = amax != 0.0f ? 127.0f / amax : 0.0f;
    for (int64_t i = 0; i < len; i++) {
        float r = nearbyintf(x[i] * inv);
        r = r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r;
        q[i] = (int8_t)r;
    }
    return scale;
}

int32_t llm_dot_i8_i16(const int8_t *a, const int16_t *b, int64_t n) {
    int32_t s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (int32_t)a[i] * b[i];
    return s;
}

/* ---- MatMulNBits, 4-bit blocks of 32, int8 A (ONNX Runtime's AVX2 CompInt8) */

static inline int q4_at(const uint8_t *blob, int i) {
    return (blob[i >> 1] >> ((i & 1) * 4)) & 15;
}

/* lanes[j] = sum over k in [4j, 4j+4) of qa[k] * (code[k] - zp) */
static inline void q4_lanes_quad(const int8_t *qa, const uint8_t *blob, int zp, int32_t l[8]) {
    for (int j = 0; j < 8; j++) {
        int32_t s = 0;
        for (int k = 4 * j; k < 4 * j + 4; k++)
            s += (int32_t)qa[k] * (q4_at(blob, k) - zp);
        l[j] = s;
    }
}

/* Two blocks b0, b1 summed in groups of 8 and interleaved the way
 * maddubs + hadd leave them: [b0 0-7, b0 8-15, b1 0-7, b1 8-15, b0 16-23,
 * b0 24-31, b1 16-23, b1 24-31]. */
static inline void q4_lanes_pair(const int8_t *qa, const uint8_t *blob, int zp, int32_t l[8]) {
    int32_t g[2][4];
    for (int b = 0; b < 2; b++)
        for (int q = 0; q < 4; q++) {
            int32_t s = 0;
            for (int k = 8 * q; k < 8 * q + 8; k++)
                s += (int32_t)qa[32 * b + k] * (q4_at(blob + 16 * b, k) - zp);
            g[b][q] = s;
        }
    l[0] = g[0][0], l[1] = g[0][1], l[2] = g[1][0], l[3] = g[1][1];
    l[4] = g[0][2], l[5] = g[0][3], l[6] = g[1][2], l[7] = g[1][3];
}

static inline int zp_of(const uint8_t *zp, int64_t blk) {
    return zp ? (zp[blk >> 1] >> ((blk & 1) * 4)) & 15 : 8;
}

LLM_CLONES void llm_mnb4_lanes_ref(const int8_t *qa, const float *sa, const uint8_t *bcol,
                                   const float *sb, const uint8_t *zp, int64_t kb, int m1,
                                   float acc[8]) {
    int32_t l[8];
    for (int j = 0; j < 8; j++)
        acc[j] = 0;
    int64_t b = 0;
    /* M = 1 with zero points: each block on its own, codes minus zp */
    if (m1 && zp) {
        for (; b < kb; b++) {
            q4_lanes_quad(qa + 32 * b, bcol + 16 * b, zp_of(zp, b), l);
            float c = sa[b] * sb[b];
            for (int j = 0; j < 8; j++)
                acc[j] = fmaf((float)l[j], c, acc[j]);
        }
        return;
    }
    /* pairs of blocks; M = 1 subtracts 8, M > 1 keeps the codes unsigned
     * (the zero points come back through the block sums) */
    int z = m1 ? 8 : 0;
    for (; b + 1 < kb; b += 2) {
        q4_lanes_pair(qa + 32 * b, bcol + 16 * b, z, l);
        float c0 = sa[b] * sb[b], c1 = sa[b + 1] * sb[b + 1];
        for (int j = 0; j < 8; j++)
            acc[j] = fmaf((float)l[j], (j & 2) ? c1 : c0, acc[j]);
    }
    if (b < kb) {
        q4_lanes_quad(qa + 32 * b, bcol + 16 * b, z, l);
        float c = sa[b] * sb[b];
        for (int j = 0; j < 8; j++)
            acc[j] = fmaf((float)l[j], c, acc[j]);
    }
}

float llm_fold8(const float a[8]) {
    return (((a[0] + a[1]) + a[2]) + a[3]) + (((a[4] + a[5]) + a[6]) + a[7]);
}

float llm_hsum8(const float a[8]) {
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

LLM_CLONES float llm_mnb4_blksum(const float *ablk, const float *sb, const uint8_t *zp,
                                 int64_t kb) {
    float g = 0;
    for (int64_t b = 0; b < kb; b++)
        g = fmaf(ablk[b], -(sb[b] * (float)zp_of(zp, b)), g);
    return g;
}

/* ---- normalization rows ------------------------------------------------- */

static float sumsq(const float *x, int64_t n) {
    return llm_dot(x, x, n);
}

float llm_rms_row(const float *x, const float *gamma, float eps, int64_t n, float *y) {
    float inv = 1.0f / sqrtf(sumsq(x, n) / (float)n + eps);
    if (gamma)
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] * inv * gamma[i];
    else
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] * inv;
    return inv;
}

float llm_rms_row_ref(const float *x, const float *gamma, float eps, int64_t n, float *y) {
    double ss = 0;
    for (int64_t i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    double inv = 1.0 / sqrt(ss / (double)n + eps);
    for (int64_t i = 0; i < n; i++)
        y[i] = (float)(x[i] * inv * (gamma ? gamma[i] : 1.0f));
    return (float)inv;
}

float llm_ln_row(const float *x, const float *gamma, const float *beta, float eps, int64_t n,
                 float *y, float *inv_std) {
    float acc[LANES] = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++)
            acc[j] += x[i + j];
    float s = lanes_sum(acc);
    for (; i < n; i++)
        s += x[i];
    float mean = s / (float)n;
    float acc2[LANES] = {0};
    for (i = 0; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) {
            float d = x[i + j] - mean;
            acc2[j] += d * d;
        }
    float v = lanes_sum(acc2);
    for (; i < n; i++)
        v += (x[i] - mean) * (x[i] - mean);
    float inv = 1.0f / sqrtf(v / (float)n + eps);
    for (i = 0; i < n; i++) {
        float t = (x[i] - mean) * inv;
        if (gamma)
            t *= gamma[i];
        if (beta)
            t += beta[i];
        y[i] = t;
    }
    *inv_std = inv;
    return mean;
}

float llm_ln_row_ref(const float *x, const float *gamma, const float *beta, float eps, int64_t n,
                     float *y, float *inv_std) {
    double s = 0, v = 0;
    for (int64_t i = 0; i < n; i++)
        s += x[i];
    double mean = s / (double)n;
    for (int64_t i = 0; i < n; i++)
        v += (x[i] - mean) * (x[i] - mean);
    double inv = 1.0 / sqrt(v / (double)n + eps);
    for (int64_t i = 0; i < n; i++)
        y[i] = (float)((x[i] - mean) * inv * (gamma ? gamma[i] : 1.0f) + (beta ? beta[i] : 0.0f));
    *inv_std = (float)inv;
    return (float)mean;
}

/* ONNX Runtime's SimplifiedLayerNormalization / RMSNormalization: the sum
 * of squares in eight lanes of fused multiply-adds, folded by halves
 * ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)), the tail fused on top;
 * y = x * (1 / sqrt(ms / n + eps)) * g. */
LLM_CLONES float llm_rms_row_ort(const float *x, const float *gamma, float eps, int64_t n,
                                 float *y) {
    float l[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            l[k] = fmaf(x[i + k], x[i + k], l[k]);
    float s = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
    for (; i < n; i++)
        s = fmaf(x[i], x[i], s);
    float inv = 1.0f / sqrtf(s / (float)n + eps);
    for (i = 0; i < n; i++)
        y[i] = gamma ? x[i] * inv * gamma[i] : x[i] * inv;
    return inv;
}

/* ONNX Runtime's SkipSimplifiedLayerNormalization: a sequential sum of
 * squares and a division, y = x / sqrt(ms / n + eps) * g. */
float llm_skip_rms_row_ort(const float *x, const float *gamma, float eps, int64_t n, float *y) {
    float s = 0;
    for (int64_t i = 0; i < n; i++)
        s += x[i] * x[i];
    float d = sqrtf(s / (float)n + eps);
    for (int64_t i = 0; i < n; i++)
        y[i] = gamma ? x[i] / d * gamma[i] : x[i] / d;
    return 1.0f / d;
}

/* ---- ONNX Runtime's transcendental kernels (MLAS, FMA3) ----------------- */

static inline float bits_f(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* exp(x) for x <= 0 as MLAS's sum-of-exp kernel computes it. */
LLM_CLONES float llm_exp_mlas(float x) {
    const float rb = 12582912.0f;
    x = x > -88.3762626647949f ? x : -88.3762626647949f;
    float biased = fmaf(x, 1.44269504088896341f, rb);
    float m = biased - rb;
    x = fmaf(m, -6.93145752e-1f, x);
    x = fmaf(m, -1.42860677e-6f, x);
    float p = 0x1.694000p-10f;
    p = fmaf(p, x, 0x1.125edcp-7f);
    p = fmaf(p, x, 0x1.555b5ap-5f);
    p = fmaf(p, x, 0x1.555450p-3f);
    p = fmaf(p, x, 0x1.fffff6p-2f);
    p = fmaf(p, x, 1.0f);
    p = fmaf(p, x, 1.0f);
    uint32_t b;
    memcpy(&b, &biased, sizeof b);
    return p * bits_f((b << 23) + 0x3F800000u);
}

/* The logistic function as MLAS computes it (rational approximation). */
LLM_CLONES float llm_logistic_mlas(float x) { return sn_logistic_f32(x); }

/* Sum of exps in the order of MLAS's AVX2 kernel: eight lane accumulators
 * fed 24 values per step, then 8 at a time (a short tail zero-padded), then
 * ((a0+a1)+(a2+a3)) + ((a4+a5)+(a6+a7)). */
void llm_sumexp_lanes_add(float lanes[8], const float *e, int64_t n) {
    for (int64_t i = 0; i < n; i += 8)
        for (int k = 0; k < 8 && i + k < n; k++)
            lanes[k] += e[i + k];
}

float llm_sumexp_lanes_fold(const float lanes[8]) {
    return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
           ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

/* ---- rotary ------------------------------------------------------------- */

/* ONNX Runtime's MLAS kernel (AVX2) rounds one product and fuses the other:
 * y1 = fma(a, cos, -(b * sin)), y2 = fma(a, sin, b * cos). */
LLM_CLONES void llm_rope(const float *x, float *y, const float *cos, const float *sin,
                         int64_t rot_dim, int64_t head, int interleaved) {
    int64_t half = rot_dim / 2;
    for (int64_t i = 0; i < half; i++) {
        int64_t i1 = interleaved ? 2 * i : i, i2 = interleaved ? 2 * i + 1 : i + half;
        float a = x[i1], b = x[i2];
        float bs = b * sin[i], bc = b * cos[i];
        y[i1] = fmaf(a, cos[i], -bs);
        y[i2] = fmaf(a, sin[i], bc);
    }
    if (x != y && head > rot_dim)
        memcpy(y + rot_dim, x + rot_dim, (size_t)(head - rot_dim) * sizeof(float));
}

void llm_rope_ref(const float *x, float *y, const float *cos, const float *sin, int64_t rot_dim,
                  int64_t head, int interleaved) {
    int64_t half = rot_dim / 2;
    for (int64_t i = 0; i < half; i++) {
        int64_t i1 = interleaved ? 2 * i : i, i2 = interleaved ? 2 * i + 1 : i + half;
        double a = x[i1], b = x[i2];
        y[i1] = (float)(a * cos[i] - b * sin[i]);
        y[i2] = (float)(a * sin[i] + b * cos[i]);
    }
    for (int64_t i = rot_dim; i < head; i++)
        y[i] = x[i];
}

/* ---- attention row ------------------------------------------------------ */

#define ATTN_CHUNK 64

/* Score of key j through softcap and biases; writes qk_out per mode. */
static inline float attn_score(const llm_attn_row *r, int64_t j, float dot) {
    float s = dot * r->scale;
    float *qo = r->qk_out;
    if (qo && r->qk_mode == LLM_QK_RAW)
        qo[j] = s;
    if (!r->softcap_after_bias) {
        if (r->softcap > 0)
            s = r->softcap * tanhf(s / r->softcap);
        if (qo && r->qk_mode == LLM_QK_CAPPED)
            qo[j] = s;
    }
    if (j < r->mask_lo || j >= r->mask_hi)
        s += -INFINITY;
    if (r->bias1)
        s += j < r->bias1_len ? r->bias1[j] : -INFINITY;
    if (r->bias2)
        s += r->bias2[j];
    if (qo && r->qk_mode == LLM_QK_BIASED)
        qo[j] = s;
    if (r->softcap_after_bias) {
        if (r->softcap > 0)
            s = r->softcap * tanhf(s / r->softcap);
        if (qo && r->qk_mode == LLM_QK_CAPPED)
            qo[j] = s;
    }
    if (qo && r->qk_mode == LLM_QK_PROBS)
        qo[j] = s;
    return s;
}

static void attn_finish(const llm_attn_row *r, const float *acc, float m, float l) {
    if (r->sink) {
        /* the sink logit joins the softmax denominator only */
        float nm = m > r->sink_val ? m : r->sink_val;
        float a = m == -INFINITY ? 0.0f : expf(m - nm);
        l = l * a + expf(r->sink_val - nm);
        for (int64_t d = 0; d < r->Hv; d++)
            r->y[d] = acc[d] * a / l;
        m = nm;
    } else if (m == -INFINITY || !(l > 0)) {
        float fill = r->zero_if_masked ? 0.0f : NAN;
        for (int64_t d = 0; d < r->Hv; d++)
            r->y[d] = fill;
    } else {
        float inv = 1.0f / l;
        for (int64_t d = 0; d < r->Hv; d++)
            r->y[d] = acc[d] * inv;
    }
    if (r->qk_out && r->qk_mode == LLM_QK_PROBS) {
        bool dead = m == -INFINITY || !(l > 0);
        for (int64_t j = r->lo; j < r->hi; j++)
            r->qk_out[j] = dead ? (r->zero_if_masked ? 0.0f : NAN) : expf(r->qk_out[j] - m) / l;
    }
}

/* ONNX Runtime's GroupQueryAttention (CPU, float): prompt rows score with
 * fused multiply-add chains (decode rows: see attn_dot_lanes) times the
 * scale, MLAS's softmax exps and denominator, the value rows accumulated
 * unnormalized in key order (fused for prompts, rounded products for
 * decode) and scaled by 1 / sum at the end. Scores are computed twice (max, then exps) so the
 * row needs no scratch proportional to the key count. */
static inline float attn_dot_fma(const float *a, const float *b, int64_t n) {
    float s = 0;
    for (int64_t i = 0; i < n; i++)
        s = fmaf(a[i], b[i], s);
    return s;
}

/* Decode rows (one query): products rounded and summed in eight lanes,
 * reduced pairwise. */
static inline float attn_dot_lanes(const float *a, const float *b, int64_t n) {
    float l[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t i = 0; i < n; i++)
        l[i & 7] += a[i] * b[i];
    return llm_sumexp_lanes_fold(l);
}

LLM_CLONES static void attn_row_ort(const llm_attn_row *r, float *acc) {
    bool dec = r->ort == 2;
    float m = -INFINITY;
    for (int64_t j = r->lo; j < r->hi; j++) {
        const float *k = r->k + j * r->k_stride;
        float s = (dec ? attn_dot_lanes(r->q, k, r->H) : attn_dot_fma(r->q, k, r->H)) * r->scale;
        m = s > m ? s : m;
    }
    for (int64_t d = 0; d < r->Hv; d++)
        acc[d] = 0;
    float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t j = r->lo; j < r->hi; j++) {
        const float *k = r->k + j * r->k_stride;
        float s = (dec ? attn_dot_lanes(r->q, k, r->H) : attn_dot_fma(r->q, k, r->H)) * r->scale;
        float e = llm_exp_mlas(s + -m);
        lanes[(j - r->lo) & 7] += e;
        const float *v = r->v + j * r->v_stride;
        if (dec)
            for (int64_t d = 0; d < r->Hv; d++)
                acc[d] += e * v[d];
        else
            for (int64_t d = 0; d < r->Hv; d++)
                acc[d] = fmaf(e, v[d], acc[d]);
    }
    float inv = 1.0f / llm_sumexp_lanes_fold(lanes);
    for (int64_t d = 0; d < r->Hv; d++)
        r->y[d] = acc[d] * inv;
}

void llm_attn_row_run(const llm_attn_row *r, float *acc) {
    if (r->ort && r->hi > r->lo && r->softcap <= 0 && !r->bias1 && !r->bias2 && !r->sink &&
        !r->qk_out && r->mask_lo <= r->lo && r->mask_hi >= r->hi) {
        attn_row_ort(r, acc);
        return;
    }
    float sc[ATTN_CHUNK];
    float m = -INFINITY, l = 0;
    for (int64_t d = 0; d < r->Hv; d++)
        acc[d] = 0;
    for (int64_t c0 = r->lo; c0 < r->hi; c0 += ATTN_CHUNK) {
        int64_t n = sn_imin(ATTN_CHUNK, r->hi - c0);
        float cm = -INFINITY;
        for (int64_t t = 0; t < n; t++) {
            int64_t j = c0 + t;
            sc[t] = attn_score(r, j, llm_dot(r->q, r->k + j * r->k_stride, r->H));
            cm = sc[t] > cm ? sc[t] : cm;
        }
        if (cm == -INFINITY)
            continue;
        float nm = m > cm ? m : cm;
        if (nm != m) {
            float a = m == -INFINITY ? 0.0f : expf(m - nm);
            l *= a;
            for (int64_t d = 0; d < r->Hv; d++)
                acc[d] *= a;
            m = nm;
        }
        for (int64_t t = 0; t < n; t++) {
            float p = expf(sc[t] - m);
            l += p;
            llm_axpy(p, r->v + (c0 + t) * r->v_stride, acc, r->Hv);
        }
    }
    attn_finish(r, acc, m, l);
}

void llm_attn_row_ref(const llm_attn_row *r, float *scores) {
    float m = -INFINITY;
    for (int64_t j = r->lo; j < r->hi; j++) {
        scores[j] = attn_score(r, j, llm_dot_ref(r->q, r->k + j * r->k_stride, r->H));
        m = scores[j] > m ? scores[j] : m;
    }
    double l = 0;
    if (m != -INFINITY)
        for (int64_t j = r->lo; j < r->hi; j++)
            l += exp((double)scores[j] - m);
    for (int64_t d = 0; d < r->Hv; d++) {
        double s = 0;
        if (m != -INFINITY)
            for (int64_t j = r->lo; j < r->hi; j++)
                s += exp((double)scores[j] - m) * r->v[j * r->v_stride + d];
        r->y[d] = (float)s; /* unnormalized: finished below */
    }
    attn_finish(r, r->y, m, (float)l); /* normalizes the sums in place */
}
