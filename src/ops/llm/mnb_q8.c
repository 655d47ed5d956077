/* MatMulNBits, 8-bit blocks of 32, A quantized to int8 per block: ONNX
 * Runtime's AVX2 CompInt8 rounding for 8 bits (llm_mnb8_lanes_ref states
 * it; see kernels.h).
 *
 * The integer lane sums are exact however they are formed; what has to
 * match is the grouping of k into lanes, the fused multiply-add of each
 * block's sum with sa * sb, the reductions and the order of bias and block
 * sums. Unsigned codes (0..255) times int8 codes can overflow the int16
 * pairs of maddubs, so even and odd bytes of B are multiplied apart (each
 * product fits) and widened to int32 sums of four k before they are added.
 * Eight columns at a time, so that the folds and the zero-point block sums
 * run across them in vectors. */
#include <math.h>
#include <string.h>

#include "ops/llm/kernels.h"

static inline int zp8_of(const uint8_t *zp, int64_t b) {
    return zp ? zp[b] : 128;
}

static inline int32_t q8_sum(const int8_t *qa, const uint8_t *bc, int k0, int n) {
    int32_t s = 0;
    for (int k = k0; k < k0 + n; k++)
        s += (int32_t)qa[k] * bc[k];
    return s;
}

SN_CLONES void llm_mnb8_lanes_ref(const int8_t *qa, const float *sa, const uint8_t *bcol,
                                  const float *sb, int64_t kb, float acc[8]) {
    for (int j = 0; j < 8; j++)
        acc[j] = 0;
    int64_t b = 0;
    for (; b + 1 < kb; b += 2) {
        float c0 = sa[b] * sb[b], c1 = sa[b + 1] * sb[b + 1];
        for (int j = 0; j < 8; j++) {
            int64_t bb = b + ((j >> 1) & 1);   /* lanes 2, 3, 6, 7: block b + 1 */
            int grp = (j & 1) + ((j >> 2) << 1); /* group of 8 within the block */
            int32_t s = q8_sum(qa + 32 * bb, bcol + 32 * bb, 8 * grp, 8);
            acc[j] = fmaf((float)s, (j & 2) ? c1 : c0, acc[j]);
        }
    }
    if (b < kb) {
        float c = sa[b] * sb[b];
        for (int j = 0; j < 8; j++)
            acc[j] = fmaf((float)q8_sum(qa + 32 * b, bcol + 32 * b, 4 * j, 4), c, acc[j]);
    }
}

SN_CLONES float llm_mnb8_blksum(const float *ab, const float *sb, const uint8_t *zp, int64_t kb) {
    float g = 0;
    for (int64_t b = 0; b < kb; b++)
        g = fmaf(ab[b], -(sb[b] * (float)zp8_of(zp, b)), g);
    return g;
}

static float mnb8_out(const llm_mnb8_args *g, int64_t m, int64_t n, const float l[8]) {
    float v = n < g->N - g->N % 4 ? llm_fold8(l) : llm_hsum8(l);
    if (g->bias)
        v += g->bias[n];
    return v + llm_mnb8_blksum(g->ab + m * g->kb, g->sb + n * g->kb,
                               g->zp ? g->zp + n * g->zp_stride : NULL, g->kb);
}

void llm_mnb8_cols_ref(const llm_mnb8_args *g, int64_t n0, int64_t n1) {
    int64_t kb = g->kb;
    for (int64_t m = 0; m < g->M; m++)
        for (int64_t n = n0; n < n1; n++) {
            float l[8];
            llm_mnb8_lanes_ref(g->qa + m * kb * 32, g->sa + m * kb, g->b + n * kb * 32,
                               g->sb + n * kb, kb, l);
            g->y[m * g->ldy + n] = mnb8_out(g, m, n, l);
        }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include "ops/simd_avx.h"
#define AVX2 __attribute__((target("avx2,fma")))
#define AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline

/* int32 lane j: sum over k in [4j, 4j + 4) of b[k] (unsigned) * a[k] */
AVX2_INLINE __m256i q8_quads(__m256i b, __m256i a) {
    const __m256i ev = _mm256_set1_epi16(0x00ff), one = _mm256_set1_epi16(1);
    __m256i lo = _mm256_maddubs_epi16(_mm256_and_si256(b, ev), a);
    __m256i hi = _mm256_maddubs_epi16(_mm256_andnot_si256(ev, b), a);
    return _mm256_add_epi32(_mm256_madd_epi16(lo, one), _mm256_madd_epi16(hi, one));
}

/* Lanes of NC columns (codes bc[c], scales sbc[c]) against one row of A:
 * out[c][8]. */
AVX2_INLINE void q8_tile(const int NC, const int8_t *qa, const float *sa,
                         const uint8_t *const *bc, const float *const *sbc, int64_t kb,
                         float *out) {
    const __m256i pat = _mm256_setr_epi32(0, 0, 1, 1, 0, 0, 1, 1);
    __m256 acc[4];
    _Pragma("GCC unroll 4")
    for (int c = 0; c < NC; c++)
        acc[c] = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 1 < kb; b += 2) {
        __m256i a0 = _mm256_loadu_si256((const __m256i *)(qa + 32 * b));
        __m256i a1 = _mm256_loadu_si256((const __m256i *)(qa + 32 * b + 32));
        __m128 sap = _mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)(sa + b)));
        _Pragma("GCC unroll 4")
        for (int c = 0; c < NC; c++) {
            const uint8_t *p = bc[c] + 32 * b;
            _mm_prefetch((const char *)(p + 8 * 32 * kb), _MM_HINT_T0); /* the next eight columns */
            __m256i q0 = q8_quads(_mm256_loadu_si256((const __m256i *)p), a0);
            __m256i q1 = q8_quads(_mm256_loadu_si256((const __m256i *)(p + 32)), a1);
            __m256 l = _mm256_cvtepi32_ps(_mm256_hadd_epi32(q0, q1));
            __m128 sbp = _mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)(sbc[c] + b)));
            __m128 sc = _mm_mul_ps(sap, sbp);
            acc[c] = _mm256_fmadd_ps(l, _mm256_permutevar8x32_ps(_mm256_castps128_ps256(sc), pat),
                                     acc[c]);
        }
    }
    if (b < kb) {
        __m256i a0 = _mm256_loadu_si256((const __m256i *)(qa + 32 * b));
        _Pragma("GCC unroll 4")
        for (int c = 0; c < NC; c++) {
            __m256 l = _mm256_cvtepi32_ps(
                q8_quads(_mm256_loadu_si256((const __m256i *)(bc[c] + 32 * b)), a0));
            acc[c] = _mm256_fmadd_ps(l, _mm256_set1_ps(sa[b] * sbc[c][b]), acc[c]);
        }
    }
    _Pragma("GCC unroll 4")
    for (int c = 0; c < NC; c++)
        _mm256_storeu_ps(out + 8 * c, acc[c]);
}


#define Q8_NZ_MAX 256 /* blocks whose -(sb * zp) of eight columns fit the stack (8 KiB) */

AVX2 static void mnb8_cols_avx2(const llm_mnb8_args *g, int64_t n0, int64_t n1) {
    const int64_t kb = g->kb, full = g->N - g->N % 4;
    _Alignas(32) float lanes[8 * 8];
    _Alignas(32) float nz[Q8_NZ_MAX * 8];
    for (int64_t n = n0; n < n1; n += 8) {
        int nc = (int)sn_imin(8, n1 - n);
        const uint8_t *bc[8];
        const float *sbc[8];
        for (int c = 0; c < nc; c++) {
            bc[c] = g->b + (n + c) * kb * 32;
            sbc[c] = g->sb + (n + c) * kb;
        }
        /* eight whole columns folded together: -(sb * zp) per block across them */
        bool vec = nc == 8 && n + 8 <= full && kb <= Q8_NZ_MAX;
        if (vec) {
            int64_t b = 0;
            if (!g->zp)
                for (; b + 8 <= kb; b += 8) {
                    __m256 r[8];
                    for (int c = 0; c < 8; c++)
                        r[c] = _mm256_loadu_ps(sbc[c] + b);
                    sn_avx_t8x8(r);
                    for (int i = 0; i < 8; i++)
                        _mm256_store_ps(nz + 8 * (b + i), _mm256_mul_ps(r[i], _mm256_set1_ps(-128.0f)));
                }
            for (; b < kb; b++)
                for (int c = 0; c < 8; c++)
                    nz[8 * b + c] =
                        -(sbc[c][b] * (float)zp8_of(g->zp ? g->zp + (n + c) * g->zp_stride : NULL, b));
        }
        for (int64_t m = 0; m < g->M; m++) {
            const int8_t *qa = g->qa + m * kb * 32;
            const float *sa = g->sa + m * kb;
            int c = 0;
            for (; c + 4 <= nc; c += 4)
                q8_tile(4, qa, sa, bc + c, sbc + c, kb, lanes + 8 * c);
            for (; c < nc; c++)
                q8_tile(1, qa, sa, bc + c, sbc + c, kb, lanes + 8 * c);
            float *yr = g->y + m * g->ldy + n;
            if (!vec) {
                for (c = 0; c < nc; c++)
                    yr[c] = mnb8_out(g, m, n + c, lanes + 8 * c);
                continue;
            }
            __m256 r[8];
            for (int i = 0; i < 8; i++)
                r[i] = _mm256_load_ps(lanes + 8 * i);
            sn_avx_t8x8(r); /* r[j]: lane j of the eight columns */
            __m256 v = _mm256_add_ps(
                _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(r[0], r[1]), r[2]), r[3]),
                _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(r[4], r[5]), r[6]), r[7]));
            if (g->bias)
                v = _mm256_add_ps(v, _mm256_loadu_ps(g->bias + n));
            const float *ab = g->ab + m * kb;
            __m256 s = _mm256_setzero_ps();
            for (int64_t b = 0; b < kb; b++)
                s = _mm256_fmadd_ps(_mm256_broadcast_ss(ab + b), _mm256_load_ps(nz + 8 * b), s);
            _mm256_storeu_ps(yr, _mm256_add_ps(v, s));
        }
    }
}
#endif

void llm_mnb8_cols(const llm_mnb8_args *g, int64_t n0, int64_t n1) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (sn_cpu_avx2_fma()) {
        mnb8_cols_avx2(g, n0, n1);
        return;
    }
#endif
    llm_mnb8_cols_ref(g, n0, n1);
}
