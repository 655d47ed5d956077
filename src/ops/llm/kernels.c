/* Inner kernels of the LLM operators; see kernels.h. The fast versions
 * are plain loops written with independent lanes so GCC vectorizes them at
 * -O2; the _ref versions are the obvious scalar code. */
#include <math.h>
#include <string.h>

#include "ops/llm/kernels.h"
#include "ops/elementwise/logistic.h"

#define LANES 8

/* Kernels that must round like ONNX Runtime's AVX2 code use fmaf, in
 * SN_CLONES functions: the x86-64-v3 copy has it in hardware; elsewhere
 * fmaf is exact in software. */

/* ---- dtype staging ------------------------------------------------------ */

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

SN_CLONES void llm_mnb4_lanes_ref(const int8_t *qa, const float *sa, const uint8_t *bcol,
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

SN_CLONES float llm_mnb4_blksum(const float *ablk, const float *sb, const uint8_t *zp,
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
SN_CLONES float llm_rms_row_ort(const float *x, const float *gamma, float eps, int64_t n,
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

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include "ops/simd_avx.h"

/* Eight rows of llm_skip_rms_row_ort at once: lane r of every vector is row
 * r, with exactly that row's operations in its order (the sequential sum of
 * rounded squares runs down the transposed rows), so the results are the
 * same bits. */
__attribute__((target("avx2,fma"))) static void skip_rms_rows8_avx2(const float *const *x,
                                                                  const float *gamma, float eps,
                                                                  int64_t n, float *const *y,
                                                                  float *inv) {
    __m256 s = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 t[8];
        for (int r = 0; r < 8; r++)
            t[r] = _mm256_loadu_ps(x[r] + i);
        sn_avx_t8x8(t); /* t[k]: element i + k of every row */
        for (int k = 0; k < 8; k++)
            s = _mm256_add_ps(s, _mm256_mul_ps(t[k], t[k]));
    }
    for (; i < n; i++) {
        __m256 t = _mm256_setr_ps(x[0][i], x[1][i], x[2][i], x[3][i], x[4][i], x[5][i], x[6][i],
                                  x[7][i]);
        s = _mm256_add_ps(s, _mm256_mul_ps(t, t));
    }
    __m256 d = _mm256_sqrt_ps(
        _mm256_add_ps(_mm256_div_ps(s, _mm256_set1_ps((float)n)), _mm256_set1_ps(eps)));
    _Alignas(32) float dr[8];
    _mm256_store_ps(dr, d);
    _mm256_storeu_ps(inv, _mm256_div_ps(_mm256_set1_ps(1.0f), d));
    for (int r = 0; r < 8; r++) {
        __m256 dv = _mm256_set1_ps(dr[r]);
        int64_t j = 0;
        for (; j + 8 <= n; j += 8) {
            __m256 v = _mm256_div_ps(_mm256_loadu_ps(x[r] + j), dv);
            if (gamma)
                v = _mm256_mul_ps(v, _mm256_loadu_ps(gamma + j));
            _mm256_storeu_ps(y[r] + j, v);
        }
        for (; j < n; j++)
            y[r][j] = gamma ? x[r][j] / dr[r] * gamma[j] : x[r][j] / dr[r];
    }
}

/* One row (a decode step): the sequential sum stays scalar, the division
 * runs eight lanes at a time. */
__attribute__((target("avx2,fma"))) static float skip_rms_row_avx2(const float *x, const float *gamma,
                                                                 float eps, int64_t n, float *y) {
    float s = 0;
    for (int64_t i = 0; i < n; i++)
        s += x[i] * x[i];
    float d = sqrtf(s / (float)n + eps);
    __m256 dv = _mm256_set1_ps(d);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 v = _mm256_div_ps(_mm256_loadu_ps(x + j), dv);
        if (gamma)
            v = _mm256_mul_ps(v, _mm256_loadu_ps(gamma + j));
        _mm256_storeu_ps(y + j, v);
    }
    for (; j < n; j++)
        y[j] = gamma ? x[j] / d * gamma[j] : x[j] / d;
    return 1.0f / d;
}
#endif

void llm_skip_rms_rows_ort(const float *const *x, const float *gamma, float eps, int64_t n,
                           float *const *y, float *inv, int rows) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (rows == 8 && sn_cpu_avx2_fma()) {
        skip_rms_rows8_avx2(x, gamma, eps, n, y, inv);
        return;
    }
    if (sn_cpu_avx2_fma()) {
        for (int r = 0; r < rows; r++)
            inv[r] = skip_rms_row_avx2(x[r], gamma, eps, n, y[r]);
        return;
    }
#endif
    for (int r = 0; r < rows; r++)
        inv[r] = llm_skip_rms_row_ort(x[r], gamma, eps, n, y[r]);
}

/* ---- ONNX Runtime's transcendental kernels (MLAS, FMA3) ----------------- */

static inline float bits_f(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* exp(x) for x <= 0 as MLAS's sum-of-exp kernel computes it. */
SN_CLONES float llm_exp_mlas(float x) {
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
SN_CLONES float llm_logistic_mlas(float x) { return sn_logistic_f32(x); }

/* y = (g * logistic(g)) * u over rows [m0, m1) and columns [c0, c1) of
 * [*, ld] matrices: the graph's Sigmoid, Mul and Mul, each product rounded
 * as those nodes round it (the same bits), in one pass. */
SN_CLONES_WIDE void llm_swiglu_f32(const float *g, const float *u, float *y, int64_t ld, int64_t m0, int64_t m1,
                                   int64_t c0, int64_t c1) {
    for (int64_t m = m0; m < m1; m++) {
        const float *gr = g + m * ld, *ur = u + m * ld;
        float *yr = y + m * ld;
        for (int64_t c = c0; c < c1; c++) {
            float t = gr[c] * sn_logistic_f32(gr[c]);
            yr[c] = t * ur[c];
        }
    }
}

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
SN_CLONES void llm_rope(const float *x, float *y, const float *cos, const float *sin,
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
 * decode) and scaled by 1 / sum at the end. This scalar form, the reference,
 * computes the scores twice (max, then exps) and needs no scratch
 * proportional to the key count; attn_row_ort_avx2 keeps them instead. */
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

SN_CLONES static void attn_row_ort(const llm_attn_row *r, float *acc) {
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

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include "ops/simd_avx.h"
#define ATTN_AVX2 __attribute__((target("avx2,fma")))
#define ATTN_AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline

/* The AVX2 form of attn_row_ort. Each lane of a vector is one key (scores,
 * exps) or one value column (accumulation) and performs exactly the scalar
 * row's operations on it, in its order; only independent elements are put
 * side by side, so the results are the same bits. */

/* Eight decode scores (attn_dot_lanes): per key a vector of the eight lane
 * sums over d, then the pairwise fold of all eight keys at once by hadd
 * ((l0+l1)+(l2+l3)) + ((l4+l5)+(l6+l7)). kp: the keys' rows; H % 8 == 0. */
ATTN_AVX2_INLINE __m256 attn_lanes8(const float *q, const float *const kp[8], int64_t H) {
    __m256 a[8];
    for (int t = 0; t < 8; t++)
        a[t] = _mm256_setzero_ps();
    for (int64_t d = 0; d < H; d += 8) {
        __m256 qv = _mm256_loadu_ps(q + d);
#pragma GCC unroll 8
        for (int t = 0; t < 8; t++)
            a[t] = _mm256_add_ps(a[t], _mm256_mul_ps(qv, _mm256_loadu_ps(kp[t] + d)));
    }
    __m256 h0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    __m256 h1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
    return _mm256_add_ps(_mm256_permute2f128_ps(h0, h1, 0x20), _mm256_permute2f128_ps(h0, h1, 0x31));
}

#define ATTN_PF_KEYS 16 /* decode: keys fetched this far ahead of the scoring */

/* Decode rows, the block of eight keys at j (of n, from k0 / v0): the cache
 * comes from memory (the weights streamed through it since the last step),
 * so the keys ATTN_PF_KEYS ahead and the values this block's exps will
 * weigh are fetched now, into L2: with this and the one pass over a
 * key/value head for its query heads (attn_dec_rows_r) a 16-slot SmolLM2
 * step's GroupQueryAttention went from 4.3, 4.5, 6.0 ms to 2.8, 3.1, 3.4,
 * one sequence's from 0.40-0.58 to 0.27-0.39 (AMD EPYC VM, `snug bench
 * --slots 16 --prompt 40 --gen 64 --ops`, builds b0a5035 and 215aefe
 * alternated). 32 keys ahead, or the first keys fetched at the start,
 * were no faster. */
ATTN_AVX2_INLINE void attn_prefetch_kv(const float *k0, int64_t ks, int64_t H, const float *v0, int64_t vs,
                                       int64_t Hv, int64_t j, int64_t n) {
    for (int t = 0; t < 8 && j + ATTN_PF_KEYS + t < n; t++)
        for (int64_t d = 0; d < H; d += 16)
            _mm_prefetch((const char *)(k0 + (j + ATTN_PF_KEYS + t) * ks + d), _MM_HINT_T1);
    for (int t = 0; t < 8 && j + t < n; t++)
        for (int64_t d = 0; d < Hv; d += 16)
            _mm_prefetch((const char *)(v0 + (j + t) * vs + d), _MM_HINT_T1);
}

/* Scores of keys [0, n) of the row (from lo), times the scale, into sc; the
 * last block's lanes past n hold values of no key. */
ATTN_AVX2 static void attn_scores_avx2(const llm_attn_row *r, int64_t n, float *sc) {
    const __m256 scale = _mm256_set1_ps(r->scale);
    int64_t H = r->H;
    if (r->ort == 2 && H % 8 == 0) {
        const float *k0 = r->k + r->lo * r->k_stride;
        const float *v0 = r->v + r->lo * r->v_stride;
        for (int64_t j = 0; j < n; j += 8) {
            const float *kp[8];
            for (int t = 0; t < 8; t++) /* past the last key: repeat it */
                kp[t] = k0 + (j + t < n ? j + t : n - 1) * r->k_stride;
            attn_prefetch_kv(k0, r->k_stride, H, v0, r->v_stride, r->Hv, j, n);
            _mm256_storeu_ps(sc + j, _mm256_mul_ps(attn_lanes8(r->q, kp, H), scale));
        }
        return;
    }
    if (r->ort == 2 || !r->kt) {
        for (int64_t j = 0; j < n; j++) {
            const float *k = r->k + (r->lo + j) * r->k_stride;
            sc[j] = (r->ort == 2 ? attn_dot_lanes(r->q, k, H) : attn_dot_fma(r->q, k, H)) * r->scale;
        }
        return;
    }
    /* prompt rows: fused chains over d, one key per lane, 32 keys in flight */
    const float *kt = r->kt + r->lo;
    int64_t ld = r->kt_ld, j = 0;
    for (; j + 32 <= n; j += 32) {
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t d = 0; d < H; d++) {
            __m256 qd = _mm256_broadcast_ss(r->q + d);
            const float *kd = kt + d * ld + j;
            a0 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(kd), a0);
            a1 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(kd + 8), a1);
            a2 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(kd + 16), a2);
            a3 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(kd + 24), a3);
        }
        _mm256_storeu_ps(sc + j, _mm256_mul_ps(a0, scale));
        _mm256_storeu_ps(sc + j + 8, _mm256_mul_ps(a1, scale));
        _mm256_storeu_ps(sc + j + 16, _mm256_mul_ps(a2, scale));
        _mm256_storeu_ps(sc + j + 24, _mm256_mul_ps(a3, scale));
    }
    for (; j < n; j += 8) {
        __m256 a = _mm256_setzero_ps();
        for (int64_t d = 0; d < H; d++)
            a = _mm256_fmadd_ps(_mm256_broadcast_ss(r->q + d), _mm256_loadu_ps(kt + d * ld + j), a);
        _mm256_storeu_ps(sc + j, _mm256_mul_ps(a, scale));
    }
}

/* llm_exp_mlas on eight values */
ATTN_AVX2_INLINE __m256 attn_exp8(__m256 x) {
    const __m256 rb = _mm256_set1_ps(12582912.0f);
    x = _mm256_max_ps(x, _mm256_set1_ps(-88.3762626647949f)); /* NaN -> the bound, as scalar */
    __m256 biased = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), rb);
    __m256 m = _mm256_sub_ps(biased, rb);
    x = _mm256_fmadd_ps(m, _mm256_set1_ps(-6.93145752e-1f), x);
    x = _mm256_fmadd_ps(m, _mm256_set1_ps(-1.42860677e-6f), x);
    __m256 p = _mm256_set1_ps(0x1.694000p-10f);
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(0x1.125edcp-7f));
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(0x1.555b5ap-5f));
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(0x1.555450p-3f));
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(0x1.fffff6p-2f));
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_add_epi32(_mm256_slli_epi32(_mm256_castps_si256(biased), 23),
                                 _mm256_set1_epi32(0x3F800000));
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* acc[c] (+)= e_j * v_j[c] over keys j in order for the NV * 8 columns at
 * c0: fused for prompt rows, a rounded product and a sum for decode. */
ATTN_AVX2_INLINE void attn_vacc(const float *e, const float *v, int64_t vs, int64_t n, int fused,
                                int NV, float *out) {
    __m256 a[8]; /* in registers: the loops over i are unrolled (NV is a constant) */
#pragma GCC unroll 8
    for (int i = 0; i < NV; i++)
        a[i] = _mm256_setzero_ps();
    for (int64_t j = 0; j < n; j++) {
        __m256 ej = _mm256_broadcast_ss(e + j);
        const float *vj = v + j * vs;
        if (fused) {
#pragma GCC unroll 8
            for (int i = 0; i < NV; i++)
                a[i] = _mm256_fmadd_ps(ej, _mm256_loadu_ps(vj + 8 * i), a[i]);
        } else {
#pragma GCC unroll 8
            for (int i = 0; i < NV; i++)
                a[i] = _mm256_add_ps(a[i], _mm256_mul_ps(ej, _mm256_loadu_ps(vj + 8 * i)));
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < NV; i++)
        _mm256_storeu_ps(out + 8 * i, a[i]);
}

/* Prompt rows of one head side by side (same kt, lo, H, scale; R <= 4):
 * per key and row the same fused chain over d as attn_scores_avx2, sixteen
 * keys of R rows in flight (the single row keeps four chains, half the FMA
 * rate). Scores of keys [0, n) into each row's scores; a row whose own range
 * is shorter gets scores it does not read. */
ATTN_AVX2_INLINE void attn_scores_rows_r(const int R, const llm_attn_row *rows, int64_t n) {
    const float *kt = rows[0].kt + rows[0].lo;
    int64_t ld = rows[0].kt_ld, H = rows[0].H, n8 = (n + 7) / 8 * 8, j = 0;
    const __m256 scale = _mm256_set1_ps(rows[0].scale);
    for (; j + 16 <= n8; j += 16) { /* within the rows' score scratch and kt's zero columns */
        __m256 a[4][2];
        for (int r = 0; r < R; r++)
            a[r][0] = a[r][1] = _mm256_setzero_ps();
        for (int64_t d = 0; d < H; d++) {
            __m256 k0 = _mm256_loadu_ps(kt + d * ld + j), k1 = _mm256_loadu_ps(kt + d * ld + j + 8);
            for (int r = 0; r < R; r++) {
                __m256 qd = _mm256_broadcast_ss(rows[r].q + d);
                a[r][0] = _mm256_fmadd_ps(qd, k0, a[r][0]);
                a[r][1] = _mm256_fmadd_ps(qd, k1, a[r][1]);
            }
        }
        for (int r = 0; r < R; r++) {
            _mm256_storeu_ps(rows[r].scores + j, _mm256_mul_ps(a[r][0], scale));
            _mm256_storeu_ps(rows[r].scores + j + 8, _mm256_mul_ps(a[r][1], scale));
        }
    }
    for (; j < n; j += 8) {
        __m256 a[4];
        for (int r = 0; r < R; r++)
            a[r] = _mm256_setzero_ps();
        for (int64_t d = 0; d < H; d++) {
            __m256 k0 = _mm256_loadu_ps(kt + d * ld + j);
            for (int r = 0; r < R; r++)
                a[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(rows[r].q + d), k0, a[r]);
        }
        for (int r = 0; r < R; r++)
            _mm256_storeu_ps(rows[r].scores + j, _mm256_mul_ps(a[r], scale));
    }
}

ATTN_AVX2 static void attn_scores_rows_avx2(const llm_attn_row *rows, int R, int64_t n) {
    switch (R) {
    case 4: attn_scores_rows_r(4, rows, n); break;
    case 3: attn_scores_rows_r(3, rows, n); break;
    case 2: attn_scores_rows_r(2, rows, n); break;
    default: attn_scores_rows_r(1, rows, n); break;
    }
}

/* An ort row's max, exps (in place of its scores) and the eight lanes of
 * their sum (lane t takes keys lo + t mod 8). */
ATTN_AVX2 static void attn_exps_avx2(const llm_attn_row *r, float l[8]) {
    int64_t n = r->hi - r->lo;
    float *sc = r->scores;
    /* the maximum is exact in any order */
    __m256 mv = _mm256_set1_ps(-INFINITY);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        mv = _mm256_max_ps(_mm256_loadu_ps(sc + j), mv);
    float mx[8], m;
    _mm256_storeu_ps(mx, mv);
    m = -INFINITY;
    for (int t = 0; t < 8; t++)
        m = mx[t] > m ? mx[t] : m;
    for (; j < n; j++)
        m = sc[j] > m ? sc[j] : m;
    /* exps in place; lane t of the sum takes keys lo + t (mod 8) */
    __m256 nm = _mm256_set1_ps(-m), lanes = _mm256_setzero_ps();
    for (j = 0; j < n; j += 8) {
        __m256 e = attn_exp8(_mm256_add_ps(_mm256_loadu_ps(sc + j), nm));
        if (j + 8 > n) {
            __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
            __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - j)), idx);
            e = _mm256_and_ps(e, _mm256_castsi256_ps(live));
        }
        _mm256_storeu_ps(sc + j, e);
        lanes = _mm256_add_ps(lanes, e);
    }
    _mm256_storeu_ps(l, lanes);
}

/* The rest of an ort row once its scores are in r->scores. */
ATTN_AVX2 static void attn_row_ort_rest_avx2(const llm_attn_row *r, float *acc) {
    int64_t n = r->hi - r->lo, Hv = r->Hv, j;
    float *sc = r->scores, l[8];
    attn_exps_avx2(r, l);
    const float *v = r->v + r->lo * r->v_stride;
    int fused = r->ort != 2;
    int64_t c = 0;
    for (; c + 64 <= Hv; c += 64)
        attn_vacc(sc, v + c, r->v_stride, n, fused, 8, acc + c);
    for (; c + 8 <= Hv; c += 8)
        attn_vacc(sc, v + c, r->v_stride, n, fused, 1, acc + c);
    for (; c < Hv; c++) {
        float a = 0;
        for (j = 0; j < n; j++)
            a = fused ? fmaf(sc[j], v[j * r->v_stride + c], a) : a + sc[j] * v[j * r->v_stride + c];
        acc[c] = a;
    }
    float inv = 1.0f / llm_sumexp_lanes_fold(l);
    for (c = 0; c < Hv; c++)
        r->y[c] = acc[c] * inv;
}

/* The scores of KT keys (KT 2 or 4) from their eight lane sums each,
 * folded pairwise ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)) as
 * attn_lanes8 does, times the scale, into sc[0 .. KT). */
ATTN_AVX2_INLINE void attn_fold_keys(const int KT, const __m256 a[4], __m128 scale, float *sc) {
    __m256 x = _mm256_hadd_ps(a[0], a[1]);
    __m256 h = _mm256_hadd_ps(x, KT == 4 ? _mm256_hadd_ps(a[2], a[3]) : x);
    __m128 s4 = _mm_mul_ps(_mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)), scale);
    if (KT == 4)
        _mm_storeu_ps(sc, s4);
    else
        _mm_storel_pi((__m64 *)sc, s4);
}

/* R decode rows of one key/value head (GroupQueryAttention's query heads
 * sharing it, R <= LLM_ATTN_ROWS): the keys and values are read once for
 * all of them. Per row and key the operations of attn_scores_avx2 (lanes
 * over d, folded pairwise; KT keys at a time here) and per row and column
 * those of attn_vacc (VC vectors of columns at a time), so each row's bits
 * are the one-row form's. KT and VC keep the accumulators in registers
 * (R x KT and R x VC of them). H % 8 == 0, Hv % (8 VC) == 0. */
ATTN_AVX2_INLINE void attn_dec_rows_r(const int R, const int KT, const int VC, const llm_attn_row *rows) {
    const llm_attn_row *r0 = &rows[0];
    int64_t n = r0->hi - r0->lo, H = r0->H, Hv = r0->Hv;
    const __m128 scale = _mm_set1_ps(r0->scale);
    const float *k0 = r0->k + r0->lo * r0->k_stride, *v0 = r0->v + r0->lo * r0->v_stride;
    for (int64_t j = 0; j < n; j += KT) { /* the scores' scratch holds whole blocks of eight */
        const float *kp[4];
        for (int t = 0; t < KT; t++) /* past the last key: repeat it */
            kp[t] = k0 + (j + t < n ? j + t : n - 1) * r0->k_stride;
        if (j % 8 == 0)
            attn_prefetch_kv(k0, r0->k_stride, H, v0, r0->v_stride, Hv, j, n);
        __m256 a[LLM_ATTN_ROWS][4];
        for (int i = 0; i < R; i++)
            for (int t = 0; t < KT; t++)
                a[i][t] = _mm256_setzero_ps();
        for (int64_t d = 0; d < H; d += 8) {
#pragma GCC unroll 4
            for (int t = 0; t < KT; t++) {
                __m256 kv = _mm256_loadu_ps(kp[t] + d);
#pragma GCC unroll 4
                for (int i = 0; i < R; i++)
                    a[i][t] = _mm256_add_ps(a[i][t], _mm256_mul_ps(_mm256_loadu_ps(rows[i].q + d), kv));
            }
        }
        for (int i = 0; i < R; i++)
            attn_fold_keys(KT, a[i], scale, rows[i].scores + j);
    }
    float inv[LLM_ATTN_ROWS];
    for (int i = 0; i < R; i++) {
        float l[8];
        attn_exps_avx2(&rows[i], l);
        inv[i] = 1.0f / llm_sumexp_lanes_fold(l);
    }
    for (int64_t c = 0; c < Hv; c += 8 * VC) { /* VC vectors of columns of every row in registers */
        __m256 b[LLM_ATTN_ROWS][4];
        for (int i = 0; i < R; i++)
            for (int u = 0; u < VC; u++)
                b[i][u] = _mm256_setzero_ps();
        for (int64_t j = 0; j < n; j++) {
            const float *vj = v0 + j * r0->v_stride + c;
#pragma GCC unroll 4
            for (int u = 0; u < VC; u++) {
                __m256 vv = _mm256_loadu_ps(vj + 8 * u);
#pragma GCC unroll 4
                for (int i = 0; i < R; i++)
                    b[i][u] = _mm256_add_ps(b[i][u], _mm256_mul_ps(_mm256_broadcast_ss(rows[i].scores + j), vv));
            }
        }
        for (int i = 0; i < R; i++)
            for (int u = 0; u < VC; u++)
                _mm256_storeu_ps(rows[i].y + c + 8 * u, _mm256_mul_ps(b[i][u], _mm256_set1_ps(inv[i])));
    }
}

/* Two to four decode rows: four keys and four column vectors at a time up
 * to three rows (AVX2's sixteen registers), two of each for four (with
 * AVX-512VL's 32 registers four of each was tried for four rows: no
 * faster). */
ATTN_AVX2 static void attn_dec_rows_avx2(const llm_attn_row *rows, int R) {
    switch (R) {
    case 4: attn_dec_rows_r(4, 2, 2, rows); break;
    case 3: attn_dec_rows_r(3, 4, 4, rows); break;
    default: attn_dec_rows_r(2, 4, 4, rows); break;
    }
}

ATTN_AVX2 static void attn_row_ort_avx2(const llm_attn_row *r, float *acc) {
    attn_scores_avx2(r, r->hi - r->lo, r->scores);
    attn_row_ort_rest_avx2(r, acc);
}

/* 8 x 8 blocks through registers (unpack, shuffle, 128-bit swaps); column
 * tiles keep the destination rows being filled in cache. */
ATTN_AVX2 static void transpose_avx2(const float *src, int64_t rows, int64_t cols, float *dst,
                                     int64_t ld) {
    int64_t r8 = rows / 8 * 8, c8 = cols / 8 * 8;
    for (int64_t t0 = 0; t0 < c8; t0 += 128)
        for (int64_t r = 0; r < r8; r += 8)
            for (int64_t c = t0; c < c8 && c < t0 + 128; c += 8) {
                const float *s = src + r * cols + c;
                __m256 a[8]; /* registers once the loops are unrolled */
#pragma GCC unroll 8
                for (int k = 0; k < 8; k++)
                    a[k] = _mm256_loadu_ps(s + k * cols);
                sn_avx_t8x8_store(a, dst + c * ld + r, ld);
            }
    /* the edges: the last rows % 8 rows, then the last cols % 8 columns */
    for (int64_t r = r8; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            dst[c * ld + r] = src[r * cols + c];
    for (int64_t c = c8; c < cols; c++)
        for (int64_t r = 0; r < r8; r++)
            dst[c * ld + r] = src[r * cols + c];
}

#endif

void llm_transpose_f32_ref(const float *src, int64_t rows, int64_t cols, float *dst, int64_t ld) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            dst[c * ld + r] = src[r * cols + c];
}

void llm_transpose_f32(const float *src, int64_t rows, int64_t cols, float *dst, int64_t ld) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (sn_cpu_avx2_fma()) {
        transpose_avx2(src, rows, cols, dst, ld);
        return;
    }
#endif
    /* tiles of 32 x 32 keep both sides in cache */
    for (int64_t r0 = 0; r0 < rows; r0 += 32)
        for (int64_t c0 = 0; c0 < cols; c0 += 32) {
            int64_t r1 = sn_imin(r0 + 32, rows), c1 = sn_imin(c0 + 32, cols);
            for (int64_t c = c0; c < c1; c++)
                for (int64_t r = r0; r < r1; r++)
                    dst[c * ld + r] = src[r * cols + c];
        }
}

void llm_attn_keys_t(const float *k, int64_t n, int64_t H, float *kt, int64_t ld) {
    llm_transpose_f32(k, n, H, kt, ld);
    for (int64_t d = 0; d < H; d++)
        memset(kt + d * ld + n, 0, 8 * sizeof(float));
}

/* The row's ort form applies (see llm_attn_row.ort). */
static bool attn_row_is_ort(const llm_attn_row *r) {
    return r->ort && r->hi > r->lo && r->softcap <= 0 && !r->bias1 && !r->bias2 && !r->sink &&
           !r->qk_out && r->mask_lo <= r->lo && r->mask_hi >= r->hi;
}

#if defined(__x86_64__) && defined(__GNUC__)
/* Decode rows that read the same keys and values (attn_dec_rows_avx2). */
static bool attn_dec_group(const llm_attn_row *rows, int R) {
    if (R < 2 || R > LLM_ATTN_ROWS)
        return false;
    const llm_attn_row *a = &rows[0];
    if (!(attn_row_is_ort(a) && a->ort == 2 && a->scores && a->H % 8 == 0 && a->Hv % 32 == 0))
        return false;
    for (int i = 1; i < R; i++) {
        const llm_attn_row *b = &rows[i];
        if (!(attn_row_is_ort(b) && b->ort == 2 && b->scores && a->k == b->k && a->v == b->v && a->lo == b->lo &&
              a->hi == b->hi && a->k_stride == b->k_stride && a->v_stride == b->v_stride && a->H == b->H &&
              a->Hv == b->Hv && a->scale == b->scale))
            return false;
    }
    return true;
}
#endif

void llm_attn_rows_run(const llm_attn_row *rows, int R, float *acc) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (attn_dec_group(rows, R) && sn_cpu_avx2_fma()) {
        attn_dec_rows_avx2(rows, R);
        return;
    }
    bool group = R > 1 && R <= LLM_ATTN_ROWS && sn_cpu_avx2_fma();
    int64_t n = 0;
    for (int i = 0; i < R && group; i++) {
        const llm_attn_row *r = &rows[i];
        group = attn_row_is_ort(r) && r->ort == 1 && r->kt && r->scores && r->kt == rows[0].kt &&
                r->kt_ld == rows[0].kt_ld && r->lo == rows[0].lo && r->H == rows[0].H &&
                r->scale == rows[0].scale;
        n = r->hi - r->lo > n ? r->hi - r->lo : n;
    }
    if (group) {
        attn_scores_rows_avx2(rows, R, n);
        for (int i = 0; i < R; i++)
            attn_row_ort_rest_avx2(&rows[i], acc);
        return;
    }
#endif
    for (int i = 0; i < R; i++)
        llm_attn_row_run(&rows[i], acc);
}

void llm_attn_row_run(const llm_attn_row *r, float *acc) {
    if (attn_row_is_ort(r)) {
#if defined(__x86_64__) && defined(__GNUC__)
        if (r->scores && sn_cpu_avx2_fma()) {
            attn_row_ort_avx2(r, acc);
            return;
        }
#endif
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
