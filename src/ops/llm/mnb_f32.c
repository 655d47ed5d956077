/* MatMulNBits in float (accuracy_level 0..3, or B not constant): 4-bit
 * blocks against float activations, and 4-bit dequantization into the
 * panels the prefill path hands to sn_sgemm_ws; zero points packed,
 * float or the default.
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

/* The codes and scales of columns n .. n + NR - 1 (the one-row tiles). */
AVX2_INLINE void m1_columns(const int NR, const llm_mnb4f_args *g, int64_t n, const uint8_t *bc[4],
                            const float *scc[4]) {
    _Pragma("GCC unroll 4")
    for (int c = 0; c < NR; c++) {
        bc[c] = g->b + (n + c) * g->bstride;
        scc[c] = g->sc + (n + c) * g->sstride;
    }
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
    m1_columns(NR, g, n, bc, scc);
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

#define AVX512 __attribute__((target("avx2,fma,avx512f")))
#define AVX512_INLINE __attribute__((target("avx2,fma,avx512f"), always_inline)) static inline

/* Two 8-float halves from memory as one vector (AVX-512F only). */
AVX512_INLINE __m512 ld2x8(const float *lo, const float *hi) {
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(_mm256_loadu_ps(lo))),
                                               _mm256_castps_pd(_mm256_loadu_ps(hi)), 1));
}

/* One row, blocks of 32, AVX-512: per block and column the 16 weights
 * (q - z) s of the sixteen codes are a table (one fused multiply-subtract,
 * q s - z s), each byte's two codes pick theirs (vpermps) and two FMA
 * chains per column take the products: about half the operations per
 * weight of f32_m1_tile's (code, convert, subtract, FMA, then the block's
 * scale), which kept this product compute-bound below the memory's pace.
 * The weight is rounded as dequantized (ORT dequantizes B the same way),
 * not as (code - zero point) against A then scaled: within the float
 * tolerance of either. A comes permuted (llm_q4_permute, per 16: evens then
 * odds): the low codes of a block's 16 bytes are k 0, 2, .., 30, ap's first
 * and third eight, the high ones its second and fourth. */
AVX512_INLINE void f32_m1_tile512(const int NR, const llm_mnb4f_args *g, int64_t n) {
    const __m512i m0f = _mm512_set1_epi32(15);
    const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const int64_t nblk = g->nblk;
    const uint8_t *bc[4];
    const float *scc[4];
    m1_columns(NR, g, n, bc, scc);
    __m512 al[4], ah[4];
    _Pragma("GCC unroll 4")
    for (int c = 0; c < NR; c++)
        al[c] = ah[c] = _mm512_setzero_ps();
    _Alignas(32) float zs[4][8];
    for (int64_t b0 = 0; b0 < nblk; b0 += 8) {
        int64_t nb = sn_imin(8, nblk - b0);
        __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)nb), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        _Pragma("GCC unroll 4")
        for (int c = 0; c < NR; c++) /* z s of eight blocks */
            _mm256_store_ps(zs[c], _mm256_mul_ps(zp_blocks8(g, n + c, b0, live),
                                                 _mm256_maskload_ps(scc[c] + b0, live)));
        for (int64_t b = b0; b < b0 + nb; b++) {
            const float *a = g->ap + b * 32;
            __m512 alo = ld2x8(a, a + 16), ahi = ld2x8(a + 8, a + 24);
            if ((b & 3) == 0) /* B from memory: the columns two tiles on, a line per four blocks */
                _Pragma("GCC unroll 4") for (int c = 0; c < NR; c++)
                    _mm_prefetch((const char *)(bc[c] + 8 * g->bstride + b * 16), _MM_HINT_T0);
            if ((b & 15) == 0)
                _Pragma("GCC unroll 4") for (int c = 0; c < NR; c++) {
                    _mm_prefetch((const char *)(scc[c] + 8 * g->sstride + b), _MM_HINT_T0);
                    if (g->zpf)
                        _mm_prefetch((const char *)(g->zpf + (n + c + 8) * g->sstride + b), _MM_HINT_T0);
                }
            _Pragma("GCC unroll 4")
            for (int c = 0; c < NR; c++) {
                __m512 t = _mm512_fmsub_ps(iota, _mm512_set1_ps(scc[c][b]), _mm512_set1_ps(zs[c][b - b0]));
                __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(bc[c] + b * 16)));
                __m512 wl = _mm512_permutexvar_ps(_mm512_and_si512(x, m0f), t);
                __m512 wh = _mm512_permutexvar_ps(_mm512_srli_epi32(x, 4), t);
                al[c] = _mm512_fmadd_ps(wl, alo, al[c]);
                ah[c] = _mm512_fmadd_ps(wh, ahi, ah[c]);
            }
        }
    }
    _Pragma("GCC unroll 4")
    for (int c = 0; c < NR; c++)
        g->y[n + c] = _mm512_reduce_add_ps(_mm512_add_ps(al[c], ah[c]));
}

AVX512 static void mnb4f_m1_avx512(const llm_mnb4f_args *g, int64_t n0, int64_t n1) {
    int64_t n = n0;
    for (; n + 4 <= n1; n += 4)
        f32_m1_tile512(4, g, n);
    for (; n < n1; n++)
        f32_m1_tile512(1, g, n);
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
    if (g->M == 1 && g->bs == 32 && sn_cpu_avx512f()) {
        mnb4f_m1_avx512(g, n0, n1);
        return;
    }
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
