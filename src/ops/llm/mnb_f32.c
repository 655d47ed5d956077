/* MatMulNBits in float (accuracy_level 0..3, or B not constant): 4-bit
 * blocks against float activations, and 4-bit dequantization into the
 * panels the prefill path hands to sn_sgemm_ws; and, for float zero
 * points, ONNX Runtime's dequantize-then-SGEMM rounding (llm_mnbu_*).
 * See kernels.h. */
#include <math.h>
#include <string.h>

#include "ops/llm/kernels.h"

static inline int code4(const uint8_t *blob, int64_t k) {
    return (blob[k >> 1] >> ((k & 1) * 4)) & 15;
}

/* Column n's zero point of block b: packed nibbles (zstride bytes per
 * column), floats (sstride per column, as the scales), or 8. */
static inline float zp_at(const uint8_t *zp8, int64_t zstride, const float *zpf, int64_t sstride, int64_t n,
                          int64_t b) {
    if (zp8)
        return (float)((zp8[n * zstride + (b >> 1)] >> ((b & 1) * 4)) & 15);
    if (zpf)
        return zpf[n * sstride + b];
    return 8.0f;
}

static inline float zp_of(const llm_mnb4f_args *g, int64_t n, int64_t b) {
    return zp_at(g->zp8, g->zstride, g->zpf, g->sstride, n, b);
}

void llm_mnb4f_cols_ref(const llm_mnb4f_args *g, int64_t n0, int64_t n1) {
    for (int64_t m = 0; m < g->M; m++) {
        const float *ap = g->ap + m * g->ldap, *as = g->asum + m * g->ldasum;
        for (int64_t n = n0; n < n1; n++) {
            const uint8_t *bcol = g->b + n * g->bstride;
            double s = 0;
            for (int64_t b = 0; b < g->nblk; b++) {
                double d = 0;
                const float *a = ap + b * g->bs;
                const uint8_t *blob = bcol + b * (g->bs / 2);
                /* ap is permuted per 16: [a0, a2, .., a14, a1, a3, .., a15] */
                for (int64_t k = 0; k < g->bs; k++) {
                    int64_t gi = k / 16, j = k % 16;
                    int64_t kn = 16 * gi + (j < 8 ? 2 * j : 2 * (j - 8) + 1);
                    d += (double)a[k] * code4(blob, kn);
                }
                float sc = g->sc[n * g->sstride + b];
                s += (double)sc * (d - (double)zp_of(g, n, b) * as[b]);
            }
            g->y[m * g->ldy + n] = (float)s;
        }
    }
}

/* 4-bit dequantization of columns [0, nc) of the panel into panel[k * ldp + c]. */
void llm_q4_dequant_panel_ref(const uint8_t *b, int64_t bstride, const float *sc, int64_t sstride,
                              const uint8_t *zp8, int64_t zstride, const float *zpf, int64_t nc,
                              int64_t k0, int64_t kn, int64_t bs, float *panel, int64_t ldp) {
    for (int64_t c = 0; c < nc; c++)
        for (int64_t k = k0; k < k0 + kn; k++) {
            int64_t blk = k / bs;
            float z = zp_at(zp8, zstride, zpf, sstride, c, blk);
            int q = code4(b + c * bstride + blk * (bs / 2), k % bs);
            panel[(k - k0) * ldp + c] = ((float)q - z) * sc[c * sstride + blk];
        }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include "ops/simd_avx.h"
#define AVX2 __attribute__((target("avx2,fma")))
#define AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline

AVX2_INLINE float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* The zero points of column n's blocks [b, b + 8) (b even; lanes past the
 * last block: whatever, or masked by live for float zero points) as floats:
 * eight nibbles of up to four bytes, built in a register (a copy of variable
 * length compiles to a byte loop whose stores the next load waits on). */
AVX2_INLINE __m256 zp_blocks8(const llm_mnb4f_args *g, int64_t n, int64_t b, __m256i live) {
    if (g->zp8) {
        const uint8_t *zb = g->zp8 + n * g->zstride + b / 2;
        int64_t have = sn_imin(4, g->zstride - b / 2);
        uint32_t w = 0;
        if (have == 4)
            memcpy(&w, zb, 4);
        else
            for (int64_t k = 0; k < have; k++)
                w |= (uint32_t)zb[k] << (8 * k);
        __m256i sh = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
        return _mm256_cvtepi32_ps(
            _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)w), sh), _mm256_set1_epi32(15)));
    }
    if (g->zpf)
        return _mm256_maskload_ps(g->zpf + n * g->sstride + b, live);
    return _mm256_set1_ps(8.0f);
}

#define ZCH 64 /* blocks per chunk of the zero-point products */

/* MR rows x NR columns (n, n + 1, ..). Per block: lanes of sum a * code
 * (two chains), times the block's scale into acc; the zero points through
 * the block sums of A: corr += (scale * zp) * asum. */
AVX2_INLINE void f32_tile(const int MR, const int NR, const llm_mnb4f_args *g, int64_t m,
                          int64_t n) {
    const __m256i m0f = _mm256_set1_epi32(15);
    const int64_t bs = g->bs, g16 = bs / 16;
    __m256 acc[3][4], corr[3][4];
    _Alignas(32) float zs[4][ZCH];
    _Pragma("GCC unroll 4")
    for (int r = 0; r < MR; r++)
        _Pragma("GCC unroll 4")
        for (int c = 0; c < NR; c++)
            acc[r][c] = corr[r][c] = _mm256_setzero_ps();
    for (int64_t b0 = 0; b0 < g->nblk; b0 += ZCH) {
        int64_t nb = sn_imin(ZCH, g->nblk - b0);
        for (int c = 0; c < NR; c++) {
            const float *sc = g->sc + (n + c) * g->sstride + b0;
            for (int64_t i = 0; i < nb; i += 8) {
                __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)sn_imin(8, nb - i)),
                                                  _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
                __m256 z = zp_blocks8(g, n + c, b0 + i, tail);
                _mm256_store_ps(zs[c] + i, _mm256_mul_ps(_mm256_maskload_ps(sc + i, tail), z));
            }
        }
        for (int64_t b = b0; b < b0 + nb; b++) {
            __m256 p[3][4];
            _Pragma("GCC unroll 4")
            for (int r = 0; r < MR; r++)
                _Pragma("GCC unroll 4")
                for (int c = 0; c < NR; c++)
                    p[r][c] = _mm256_setzero_ps();
            for (int64_t q = 0; q < g16; q++) {
                _Pragma("GCC unroll 4")
                for (int c = 0; c < NR; c++) {
                    const uint8_t *blob = g->b + (n + c) * g->bstride + b * (bs / 2) + 8 * q;
                    __m256i x = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)blob));
                    __m256 lo = _mm256_cvtepi32_ps(_mm256_and_si256(x, m0f));
                    __m256 hi = _mm256_cvtepi32_ps(_mm256_srli_epi32(x, 4));
                    _Pragma("GCC unroll 4")
                    for (int r = 0; r < MR; r++) {
                        const float *a = g->ap + (m + r) * g->ldap + b * bs + 16 * q;
                        p[r][c] = _mm256_fmadd_ps(lo, _mm256_loadu_ps(a), p[r][c]);
                        p[r][c] = _mm256_fmadd_ps(hi, _mm256_loadu_ps(a + 8), p[r][c]);
                    }
                }
            }
            _Pragma("GCC unroll 4")
            for (int c = 0; c < NR; c++) {
                __m256 s = _mm256_broadcast_ss(g->sc + (n + c) * g->sstride + b);
                _Pragma("GCC unroll 4")
                for (int r = 0; r < MR; r++)
                    acc[r][c] = _mm256_fmadd_ps(p[r][c], s, acc[r][c]);
            }
        }
        for (int64_t i = 0; i < nb; i += 8) {
            __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)sn_imin(8, nb - i)),
                                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
            _Pragma("GCC unroll 4")
            for (int r = 0; r < MR; r++) {
                __m256 as = _mm256_maskload_ps(g->asum + (m + r) * g->ldasum + b0 + i, tail);
                _Pragma("GCC unroll 4")
                for (int c = 0; c < NR; c++)
                    corr[r][c] = _mm256_fmadd_ps(_mm256_load_ps(zs[c] + i), as, corr[r][c]);
            }
        }
    }
    _Pragma("GCC unroll 4")
    for (int r = 0; r < MR; r++)
        _Pragma("GCC unroll 4")
        for (int c = 0; c < NR; c++)
            g->y[(m + r) * g->ldy + n + c] = hsum(acc[r][c]) - hsum(corr[r][c]);
}

/* One row (decode), NR columns (n, n + 1, ..): per block, sum of
 * (code - zp) * a (the difference exact) in two chains per column (low and
 * high nibbles: eight FMA chains for four columns keep both FMA units
 * busy), times the block's scale into acc. The zero points are not taken
 * off afterwards through the block sums of A: that difference of two large
 * sums cancels when the activations have a large mean. */
AVX2_INLINE void f32_m1_tile(const int NR, const llm_mnb4f_args *g, int64_t n) {
    const __m256i m0f = _mm256_set1_epi32(15);
    const int64_t bs = g->bs, g16 = bs / 16, nblk = g->nblk;
    const uint8_t *bc[4];
    const float *scc[4];
    _Pragma("GCC unroll 4")
    for (int c = 0; c < NR; c++) {
        bc[c] = g->b + (n + c) * g->bstride;
        scc[c] = g->sc + (n + c) * g->sstride;
    }
    __m256 acc[4];
    _Pragma("GCC unroll 4")
    for (int c = 0; c < NR; c++)
        acc[c] = _mm256_setzero_ps();
    _Alignas(32) float zs[4][8];
    for (int64_t b0 = 0; b0 < nblk; b0 += 8) {
        int64_t nb = sn_imin(8, nblk - b0);
        /* the zero points of eight blocks per column, as floats */
        __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)nb), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        _Pragma("GCC unroll 4")
        for (int c = 0; c < NR; c++)
            _mm256_store_ps(zs[c], zp_blocks8(g, n + c, b0, live));
        for (int64_t b = b0; b < b0 + nb; b++) {
            __m256 zv[4], pl[4], ph[4];
            _Pragma("GCC unroll 4")
            for (int c = 0; c < NR; c++) {
                zv[c] = _mm256_broadcast_ss(zs[c] + (b - b0));
                pl[c] = ph[c] = _mm256_setzero_ps();
            }
            const float *a = g->ap + b * bs;
            for (int64_t q = 0; q < g16; q++) {
                __m256 alo = _mm256_loadu_ps(a + 16 * q), ahi = _mm256_loadu_ps(a + 16 * q + 8);
                _Pragma("GCC unroll 4")
                for (int c = 0; c < NR; c++) {
                    __m256i x = _mm256_cvtepu8_epi32(
                        _mm_loadl_epi64((const __m128i *)(bc[c] + b * (bs / 2) + 8 * q)));
                    __m256 wl = _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_and_si256(x, m0f)), zv[c]);
                    __m256 wh = _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(x, 4)), zv[c]);
                    pl[c] = _mm256_fmadd_ps(wl, alo, pl[c]);
                    ph[c] = _mm256_fmadd_ps(wh, ahi, ph[c]);
                }
            }
            _Pragma("GCC unroll 4")
            for (int c = 0; c < NR; c++)
                acc[c] = _mm256_fmadd_ps(_mm256_add_ps(pl[c], ph[c]), _mm256_broadcast_ss(scc[c] + b), acc[c]);
        }
    }
    _Pragma("GCC unroll 4")
    for (int c = 0; c < NR; c++)
        g->y[n + c] = hsum(acc[c]);
}

AVX2 static void mnb4f_cols_avx2(const llm_mnb4f_args *g, int64_t n0, int64_t n1) {
    for (int64_t m = 0; m < g->M; m += 3) {
        int mr = (int)sn_imin(3, g->M - m);
        int64_t n = n0;
        if (mr == 1 && g->M == 1) {
            for (; n + 4 <= n1; n += 4)
                f32_m1_tile(4, g, n);
            for (; n < n1; n++)
                f32_m1_tile(1, g, n);
        } else if (mr == 1) {
            for (; n + 4 <= n1; n += 4)
                f32_tile(1, 4, g, m, n);
            for (; n < n1; n++)
                f32_tile(1, 1, g, m, n);
        } else if (mr == 2) {
            for (; n + 2 <= n1; n += 2)
                f32_tile(2, 2, g, m, n);
            for (; n < n1; n++)
                f32_tile(2, 1, g, m, n);
        } else {
            for (; n + 2 <= n1; n += 2)
                f32_tile(3, 2, g, m, n);
            for (; n < n1; n++)
                f32_tile(3, 1, g, m, n);
        }
    }
}

/* Eight 16-byte rows (x[c]: 16 bytes of column c) transposed: out[i] holds
 * byte i of every column in its low 8 bytes and byte i + 1 in its high 8
 * bytes, for i = 0, 2, .., 14 (three rounds of unpacks). */
AVX2_INLINE void t8x16_bytes(const __m128i x[8], __m128i out[8]) {
    __m128i p[8], q[8];
    for (int c = 0; c < 8; c += 2) { /* byte pairs (c, c + 1) for bytes 0-7, then 8-15 */
        p[c / 2] = _mm_unpacklo_epi8(x[c], x[c + 1]);
        p[4 + c / 2] = _mm_unpackhi_epi8(x[c], x[c + 1]);
    }
    for (int h = 0; h < 2; h++) { /* column quads (0-3, 4-7) for bytes 4h .. */
        q[4 * h + 0] = _mm_unpacklo_epi16(p[4 * h + 0], p[4 * h + 1]);
        q[4 * h + 1] = _mm_unpackhi_epi16(p[4 * h + 0], p[4 * h + 1]);
        q[4 * h + 2] = _mm_unpacklo_epi16(p[4 * h + 2], p[4 * h + 3]);
        q[4 * h + 3] = _mm_unpackhi_epi16(p[4 * h + 2], p[4 * h + 3]);
    }
    for (int h = 0; h < 2; h++) { /* all eight columns, two bytes per vector */
        out[4 * h + 0] = _mm_unpacklo_epi32(q[4 * h + 0], q[4 * h + 2]);
        out[4 * h + 1] = _mm_unpackhi_epi32(q[4 * h + 0], q[4 * h + 2]);
        out[4 * h + 2] = _mm_unpacklo_epi32(q[4 * h + 1], q[4 * h + 3]);
        out[4 * h + 3] = _mm_unpackhi_epi32(q[4 * h + 1], q[4 * h + 3]);
    }
}

/* One panel row: the eight columns' codes in the low 8 bytes of v, (q - z) * s. */
AVX2_INLINE void dq4_row8(__m128i v, __m256 z, __m256 s, float *dst) {
    __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v));
    _mm256_storeu_ps(dst, _mm256_mul_ps(_mm256_sub_ps(f, z), s));
}

/* Eight columns, 32 k at a time: the codes are transposed as bytes (nibbles
 * split, k order restored, then an 8 x 16 byte transpose per half block)
 * and each panel row is converted straight from its eight bytes; the
 * arithmetic per element is the reference's (q - z) * s (k0 a multiple of
 * 32, bs of 32). */
AVX2 static void dq4_panel_avx2(const uint8_t *b, int64_t bstride, const float *sc, int64_t sstride,
                                const uint8_t *zp8, int64_t zstride, const float *zpf,
                                int64_t nc, int64_t k0, int64_t kn, int64_t bs, float *panel, int64_t ldp) {
    int64_t c0 = 0, k1 = k0 + kn;
    const __m128i m0f = _mm_set1_epi8(15);
    for (; c0 + 8 <= nc; c0 += 8) {
        /* The next eight columns' codes and scales for these k, fetched
         * while these are expanded: B comes from memory, eight columns
         * bstride apart, and the loads below waited for it */
        for (int c = 8; c < 16; c++) {
            int64_t n = c0 + c;
            const char *nb = (const char *)(b + n * bstride + k0 / 2);
            for (int64_t o = 0; o < kn / 2; o += 64)
                _mm_prefetch(nb + o, _MM_HINT_T0);
            _mm_prefetch((const char *)(sc + n * sstride + k0 / bs), _MM_HINT_T0);
        }
        int64_t kk = k0;
        for (; kk + 32 <= k1; kk += 32) {
            int64_t blk = kk / bs;
            float zs[8], ss[8];
            __m128i lo[8], hi[8];
            for (int c = 0; c < 8; c++) {
                int64_t n = c0 + c;
                zs[c] = zp_at(zp8, zstride, zpf, sstride, n, blk);
                ss[c] = sc[n * sstride + blk];
                __m128i v = _mm_loadu_si128((const __m128i *)(b + n * bstride + blk * (bs / 2) + (kk % bs) / 2));
                __m128i l = _mm_and_si128(v, m0f), h = _mm_and_si128(_mm_srli_epi16(v, 4), m0f);
                lo[c] = _mm_unpacklo_epi8(l, h); /* k 0-15 of the 32 */
                hi[c] = _mm_unpackhi_epi8(l, h); /* k 16-31 */
            }
            __m256 z = _mm256_loadu_ps(zs), s = _mm256_loadu_ps(ss);
            __m128i t[8];
            float *dst = panel + (kk - k0) * ldp + c0;
            for (int half = 0; half < 2; half++) {
                t8x16_bytes(half ? hi : lo, t);
                for (int i = 0; i < 8; i++, dst += 2 * ldp) {
                    dq4_row8(t[i], z, s, dst);
                    dq4_row8(_mm_srli_si128(t[i], 8), z, s, dst + ldp);
                }
            }
        }
        if (kk < k1) /* the rows past the last whole group of 32 */
            llm_q4_dequant_panel_ref(b + c0 * bstride, bstride, sc + c0 * sstride, sstride,
                                     zp8 ? zp8 + c0 * zstride : NULL, zstride,
                                     zpf ? zpf + c0 * sstride : NULL, 8, kk, k1 - kk, bs,
                                     panel + (kk - k0) * ldp + c0, ldp);
    }
    if (c0 < nc)
        llm_q4_dequant_panel_ref(b + c0 * bstride, bstride, sc + c0 * sstride, sstride,
                                 zp8 ? zp8 + c0 * zstride : NULL, zstride,
                                 zpf ? zpf + c0 * sstride : NULL, nc - c0, k0, kn, bs, panel + c0, ldp);
}
#endif

void llm_mnb4f_cols(const llm_mnb4f_args *g, int64_t n0, int64_t n1) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (sn_cpu_avx2_fma() && g->bs % 16 == 0 && g->M <= 3) {
        mnb4f_cols_avx2(g, n0, n1);
        return;
    }
#endif
    llm_mnb4f_cols_ref(g, n0, n1);
}

void llm_q4_dequant_panel(const uint8_t *b, int64_t bstride, const float *sc, int64_t sstride,
                          const uint8_t *zp8, int64_t zstride, const float *zpf, int64_t nc,
                          int64_t k0, int64_t kn, int64_t bs, float *panel, int64_t ldp) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (sn_cpu_avx2_fma() && bs % 32 == 0 && k0 % 32 == 0) {
        dq4_panel_avx2(b, bstride, sc, sstride, zp8, zstride, zpf, nc, k0, kn, bs, panel, ldp);
        return;
    }
#endif
    llm_q4_dequant_panel_ref(b, bstride, sc, sstride, zp8, zstride, zpf, nc, k0, kn, bs, panel, ldp);
}

/* ---- B dequantized first, MLAS SGEMM rounding (float zero points) -------
 * ONNX Runtime does not prepack B when the zero points are float: it
 * dequantizes B into a [N, K] float matrix (DequantizeBlockwise: q * s plus
 * the rounded -(s * zp)) and calls MlasGemmBatch(NoTrans, Trans). MLAS takes
 * its M = 1 kernel (MlasSgemmKernelM1TransposeBAvx: eight lanes of separate
 * multiplies and adds, its own reductions per group of four, two and one
 * columns) for a single row, and otherwise packs B and runs the FMA kernel
 * over K in slices, each slice's sums added to C. The weights are produced
 * here on the fly, by columns (M = 1) or into [K, 8 c] panels (M > 1). */

static inline int mnbu_code(const uint8_t *blob, int64_t bits, int64_t k) {
    int64_t bit = k * bits;
    return (blob[bit >> 3] >> (bit & 7)) & ((1 << bits) - 1);
}

static inline float mnbu_w_at(const llm_mnbu_args *g, int64_t n, int64_t k) {
    int64_t blob = g->bs * g->bits / 8, b = k / g->bs;
    float s = g->sc[n * g->kb + b];
    float z = -(s * g->zpf[n * g->kb + b]);
    return llm_mnbu_w(mnbu_code(g->b + (n * g->kb + b) * blob, g->bits, k % g->bs), s, z);
}

float llm_mnbu_red(const float l[8], int64_t n, int64_t N) {
    int64_t full = N - N % 4;
    if (n < full)
        return llm_fold8(l);
    if (N % 4 >= 2 && n < full + 2)
        return ((l[0] + l[2]) + (l[4] + l[6])) + ((l[1] + l[3]) + (l[5] + l[7]));
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

/* MlasSgemmOperation's strides: a narrow B panel gets a longer K slice. */
int64_t llm_mnbu_slice(int64_t N, int64_t K) {
    int64_t sn = 128, sk = 128;
    if (N >= K) {
        while (sk / 2 >= K) {
            sn *= 2;
            sk /= 2;
        }
    } else {
        while (sn > 16 && sn / 2 >= N) {
            sk *= 2;
            sn /= 2;
        }
    }
    return sk;
}

void llm_mnbu_m1_cols_ref(const llm_mnbu_args *g, int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; n++) {
        float l[8] = {0};
        for (int64_t k = 0; k < g->K; k++) {
            float p = g->a[k] * mnbu_w_at(g, n, k);
            l[k & 7] += p;
        }
        for (int64_t j = g->K & 7; j && j < 8; j++) /* the masked tail adds 0 * 0 */
            l[j] += 0.0f;
        g->y[n] = llm_mnbu_red(l, n, g->N) + (g->bias ? g->bias[n] : 0.0f);
    }
}

void llm_mnbu_panel_ref(const llm_mnbu_args *g, int64_t n0, int64_t nc, float *panel,
                        int64_t ldp) {
    int64_t nc8 = (nc + 7) & ~(int64_t)7;
    for (int64_t k = 0; k < g->K; k++)
        for (int64_t c = 0; c < nc8; c++)
            panel[k * ldp + c] = c < nc ? mnbu_w_at(g, n0 + c, k) : 0.0f;
}

void llm_mnbu_gemm_cols_ref(const llm_mnbu_args *g, const float *panel, int64_t ldp,
                            int64_t n0, int64_t c0, int64_t c1) {
    int64_t sk = llm_mnbu_slice(g->N, g->K);
    for (int64_t m = 0; m < g->M; m++)
        for (int64_t c = c0; c < c1; c++) {
            const float *a = g->a + m * g->K;
            bool have = g->bias != NULL;
            float v = have ? g->bias[n0 + c] : 0.0f;
            for (int64_t k0 = 0; k0 < g->K; k0 += sk) {
                int64_t k1 = sn_imin(g->K, k0 + sk);
                float acc = 0;
                for (int64_t k = k0; k < k1; k++)
                    acc = fmaf(a[k], panel[k * ldp + c], acc);
                v = have ? v + acc : acc;
                have = true;
            }
            g->y[m * g->ldy + n0 + c] = v;
        }
}

#if defined(__x86_64__) && defined(__GNUC__)
/* Eight codes from k (a multiple of 8) of a block, as floats (BITS a
 * constant: the copy below inlines). */
AVX2_INLINE __m256 mnbu_codes8(const uint8_t *blob, const int BITS, int64_t k) {
    const int bits = BITS;
    if (bits == 8)
        return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(blob + k))));
    uint32_t w = 0;
    memcpy(&w, blob + k * bits / 8, bits == 4 ? 4 : 2); /* 8 codes of `bits` bits: `bits` bytes */
    __m256i sh = bits == 4 ? _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)
                           : _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    return _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)w), sh),
                                               _mm256_set1_epi32((1 << bits) - 1)));
}

/* M == 1: the lanes of NC columns from n (lanes[c][8]). */
AVX2_INLINE void mnbu_m1_tile(const int NC, const int BITS, const llm_mnbu_args *g, int64_t n,
                              float *lanes) {
    const int64_t blob = g->bs * g->bits / 8, kb = g->kb, K = g->K;
    __m256 acc[4];
    _Pragma("GCC unroll 4")
    for (int c = 0; c < NC; c++)
        acc[c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < kb; b++) {
        __m256 s[4], z[4];
        const uint8_t *bc[4];
        _Pragma("GCC unroll 4")
        for (int c = 0; c < NC; c++) {
            float sc = g->sc[(n + c) * kb + b];
            s[c] = _mm256_set1_ps(sc);
            z[c] = _mm256_set1_ps(-(sc * g->zpf[(n + c) * kb + b]));
            bc[c] = g->b + ((n + c) * kb + b) * blob;
            if (((b * blob) & 63) < blob) /* a line of the next four columns */
                _mm_prefetch((const char *)(bc[c] + 4 * kb * blob), _MM_HINT_T0);
        }
        int64_t k0 = b * g->bs, k1 = sn_imin(K, k0 + g->bs), k = k0;
        for (; k + 8 <= k1; k += 8) {
            __m256 a = _mm256_loadu_ps(g->a + k);
            _Pragma("GCC unroll 4")
            for (int c = 0; c < NC; c++) {
                __m256 w = _mm256_add_ps(_mm256_mul_ps(mnbu_codes8(bc[c], BITS, k - k0), s[c]), z[c]);
                acc[c] = _mm256_add_ps(acc[c], _mm256_mul_ps(a, w));
            }
        }
        if (k < k1) { /* K % 8: masked a and w, zero products in the other lanes */
            __m256i mk = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(k1 - k)),
                                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
            __m256 a = _mm256_maskload_ps(g->a + k, mk);
            _Pragma("GCC unroll 4")
            for (int c = 0; c < NC; c++) {
                __m256 w = _mm256_add_ps(_mm256_mul_ps(mnbu_codes8(bc[c], BITS, k - k0), s[c]), z[c]);
                w = _mm256_and_ps(w, _mm256_castsi256_ps(mk));
                acc[c] = _mm256_add_ps(acc[c], _mm256_mul_ps(a, w));
            }
        }
    }
    _Pragma("GCC unroll 4")
    for (int c = 0; c < NC; c++)
        _mm256_storeu_ps(lanes + 8 * c, acc[c]);
}

AVX2 static void mnbu_m1_avx2(const llm_mnbu_args *g, int64_t n0, int64_t n1) {
    float l[4 * 8];
    int64_t n = n0;
    for (; n < n1; ) {
        int nc = n + 4 <= n1 ? 4 : 1;
#define MT(c, b) mnbu_m1_tile(c, b, g, n, l)
        if (g->bits == 4)
            nc == 4 ? MT(4, 4) : MT(1, 4);
        else if (g->bits == 8)
            nc == 4 ? MT(4, 8) : MT(1, 8);
        else
            nc == 4 ? MT(4, 2) : MT(1, 2);
#undef MT
        for (int c = 0; c < nc; c++)
            g->y[n + c] = llm_mnbu_red(l + 8 * c, n + c, g->N) + (g->bias ? g->bias[n + c] : 0.0f);
        n += nc;
    }
}


AVX2_INLINE void mnbu_panel_bits(const int BITS, const llm_mnbu_args *g, int64_t n0, int64_t nc,
                                 float *panel, int64_t ldp) {
    const int64_t blob = g->bs * g->bits / 8, kb = g->kb, K8 = g->K & ~(int64_t)7;
    int64_t c0 = 0;
    for (; c0 + 8 <= nc; c0 += 8) {
        for (int64_t k = 0; k < K8; k += 8) {
            int64_t b = k / g->bs;
            __m256 r[8];
            for (int c = 0; c < 8; c++) {
                int64_t n = n0 + c0 + c;
                float sc = g->sc[n * kb + b];
                __m256 z = _mm256_set1_ps(-(sc * g->zpf[n * kb + b]));
                r[c] = _mm256_add_ps(_mm256_mul_ps(mnbu_codes8(g->b + (n * kb + b) * blob, BITS,
                                                               k - b * g->bs),
                                                   _mm256_set1_ps(sc)),
                                     z);
            }
            sn_avx_t8x8_store(r, panel + k * ldp + c0, ldp);
        }
        for (int64_t k = K8; k < g->K; k++)
            for (int c = 0; c < 8; c++)
                panel[k * ldp + c0 + c] = mnbu_w_at(g, n0 + c0 + c, k);
    }
    if (c0 < nc) {
        llm_mnbu_args t = *g;
        llm_mnbu_panel_ref(&t, n0 + c0, nc - c0, panel + c0, ldp);
    }
}

AVX2 static void mnbu_panel_avx2(const llm_mnbu_args *g, int64_t n0, int64_t nc, float *panel,
                                 int64_t ldp) {
    if (g->bits == 4)
        mnbu_panel_bits(4, g, n0, nc, panel, ldp);
    else if (g->bits == 8)
        mnbu_panel_bits(8, g, n0, nc, panel, ldp);
    else
        mnbu_panel_bits(2, g, n0, nc, panel, ldp);
}

/* M > 1: MR rows from m, NV vectors of 8 columns from panel column c (the
 * last vector's columns below `valid`). */
AVX2_INLINE void mnbu_gemm_tile(const int MR, const int NV, const llm_mnbu_args *g,
                                const float *panel, int64_t ldp, int64_t n0, int64_t m, int64_t c,
                                int valid, int64_t sk) {
    const int64_t K = g->K;
    const float *a = g->a + m * K;
    const __m256i mk = _mm256_cmpgt_epi32(_mm256_set1_epi32(valid),
                                          _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    bool first = true;
    for (int64_t k0 = 0; k0 < K; k0 += sk) {
        int64_t k1 = sn_imin(K, k0 + sk);
        __m256 acc[4][2];
        _Pragma("GCC unroll 4")
        for (int r = 0; r < MR; r++)
            _Pragma("GCC unroll 2")
            for (int v = 0; v < NV; v++)
                acc[r][v] = _mm256_setzero_ps();
        for (int64_t k = k0; k < k1; k++) {
            const float *pk = panel + k * ldp + c;
            __m256 b0 = _mm256_loadu_ps(pk);
            __m256 b1 = NV > 1 ? _mm256_loadu_ps(pk + 8) : b0;
            _Pragma("GCC unroll 4")
            for (int r = 0; r < MR; r++) {
                __m256 av = _mm256_broadcast_ss(a + r * K + k);
                acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
                if (NV > 1)
                    acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
            }
        }
        _Pragma("GCC unroll 4")
        for (int r = 0; r < MR; r++)
            _Pragma("GCC unroll 2")
            for (int v = 0; v < NV; v++) {
                float *yp = g->y + (m + r) * g->ldy + n0 + c + 8 * v;
                bool last = v == NV - 1;
                __m256 out = acc[r][v];
                if (!first || g->bias) {
                    const float *src = first ? g->bias + n0 + c + 8 * v : yp;
                    out = _mm256_add_ps(out, last ? _mm256_maskload_ps(src, mk) : _mm256_loadu_ps(src));
                }
                if (last)
                    _mm256_maskstore_ps(yp, mk, out);
                else
                    _mm256_storeu_ps(yp, out);
            }
        first = false;
    }
}

AVX2 static void mnbu_gemm_avx2(const llm_mnbu_args *g, const float *panel, int64_t ldp,
                                int64_t n0, int64_t c0, int64_t c1) {
    int64_t sk = llm_mnbu_slice(g->N, g->K);
    for (int64_t c = c0; c < c1;) {
        int64_t left = c1 - c;
        int nv = left > 8 ? 2 : 1;
        int valid = (int)sn_imin(8, left - 8 * (nv - 1));
        for (int64_t m = 0; m < g->M; m += 4) {
            int mr = (int)sn_imin(4, g->M - m);
#define GT(r, v) mnbu_gemm_tile(r, v, g, panel, ldp, n0, m, c, valid, sk)
            if (nv == 2) {
                switch (mr) {
                case 4: GT(4, 2); break;
                case 3: GT(3, 2); break;
                case 2: GT(2, 2); break;
                default: GT(1, 2); break;
                }
            } else {
                switch (mr) {
                case 4: GT(4, 1); break;
                case 3: GT(3, 1); break;
                case 2: GT(2, 1); break;
                default: GT(1, 1); break;
                }
            }
#undef GT
        }
        c += 8 * nv;
    }
}
#endif

void llm_mnbu_m1_cols(const llm_mnbu_args *g, int64_t n0, int64_t n1) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (sn_cpu_avx2_fma() && g->bs % 8 == 0) {
        mnbu_m1_avx2(g, n0, n1);
        return;
    }
#endif
    llm_mnbu_m1_cols_ref(g, n0, n1);
}

void llm_mnbu_panel(const llm_mnbu_args *g, int64_t n0, int64_t nc, float *panel, int64_t ldp) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (sn_cpu_avx2_fma() && g->bs % 8 == 0) {
        mnbu_panel_avx2(g, n0, nc, panel, ldp);
        return;
    }
#endif
    llm_mnbu_panel_ref(g, n0, nc, panel, ldp);
}

void llm_mnbu_gemm_cols(const llm_mnbu_args *g, const float *panel, int64_t ldp, int64_t n0,
                        int64_t c0, int64_t c1) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (sn_cpu_avx2_fma()) {
        mnbu_gemm_avx2(g, panel, ldp, n0, c0, c1);
        return;
    }
#endif
    llm_mnbu_gemm_cols_ref(g, panel, ldp, n0, c0, c1);
}
