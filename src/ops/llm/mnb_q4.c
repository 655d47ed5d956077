/* MatMulNBits, 4-bit blocks of 32, A quantized to int8 per block: ONNX
 * Runtime's AVX2 CompInt8 rounding (see llm_mnb4_lanes_ref), register-blocked.
 *
 * Every output element (m, n) gets exactly the float operations of
 * llm_mnb4_lanes_ref + llm_fold8 / llm_hsum8 + bias + llm_mnb4_blksum: the
 * integer lane sums are exact however they are formed, so only the order of
 * the fused multiply-adds per lane and of the final reductions matters, and
 * that is kept. What changes is the work around it:
 *
 *  - A rows are quantized once and laid out for the kernels (prepared row,
 *    below): per pair of blocks the even-k codes of both blocks, then the
 *    odd-k codes, so that B's low and high nibbles (k even / odd) are used
 *    as loaded, without interleaving them back into k order;
 *  - M > 1: the blocks of eight columns are decoded once (nibbles, scale
 *    patterns) and applied to all rows, four rows at a time, each lane
 *    vector in a register for the whole of K;
 *  - M = 1: a pair of blocks of the A row is loaded once for four columns;
 *  - the lane reductions, the bias and the zero-point block sums run across
 *    eight columns at a time.
 *
 * Lanes. For a pair of blocks (b, b + 1) ORT's lanes hold the sums over k in
 * [b:0-7, b:8-15, b+1:0-7, b+1:8-15, b:16-23, b:24-31, b+1:16-23, b+1:24-31];
 * the kernels here hold [b:0-7, b:8-15, b:16-23, b:24-31, b+1:0-7, ...],
 * i.e. the same lanes with 64-bit chunks 1 and 2 swapped (undone before the
 * reductions). A single block (the last one when k_blocks is odd, and every
 * block of the M = 1 kernel with zero points) has lanes k in [4j, 4j + 4). */
#include <math.h>
#include <string.h>

#include "ops/llm/kernels.h"

/* ---- prepared rows -------------------------------------------------------
 * One row of A (kb blocks, np = ceil(kb / 2) pairs):
 *   q    [np][64] int8: block b at pair b / 2, evens (k = 0, 2, .., 30) at
 *                       16 (b & 1), odds at 32 + 16 (b & 1); the missing
 *                       half of a last odd block is zero
 *   sap  [np][8] float: [sa_b x4, sa_b+1 x4] (last odd block: sa_b x8)
 *   sa   [kb] float:    block scales (padded to 8)
 *   ab   [kb] float:    sa_b * sum of the block's codes (padded to 8)
 *   asq  [np][16] int16: sums of the codes in k [4j, 4j + 4) of block b at
 *                       8 (b & 1) + j (LLM_MNB4_ROWS_1 only)
 * LLM_MNB4_ROWS_1Z rows (the quad kernel) lay out q and asq differently,
 * to match the tiled B's alternating 16-bit units (llm_mnb4_tile): code k
 * of block b at 64 (b / 2) + q1z_at(k, b & 1), that is the codes of lane
 * j of both blocks side by side (evens at 4j + 2 (b & 1), odds 32 bytes
 * on); the sum of lane j's codes at asq [b / 2][2 j + (b & 1)]. The
 * partner of a lone last block is zero. */
typedef struct mnb4_layout {
    size_t q, sap, sa, ab, asq, total;
} mnb4_layout;

static mnb4_layout mnb4_layout_of(int64_t kb) {
    size_t np = (size_t)(kb + 1) / 2, k8 = ((size_t)kb + 7) & ~(size_t)7;
    mnb4_layout L;
    L.q = 0;
    L.sap = L.q + np * 64;
    L.sa = L.sap + np * 32;
    L.ab = L.sa + k8 * 4;
    L.asq = L.ab + k8 * 4;
    L.total = (L.asq + np * 32 + 63) & ~(size_t)63;
    return L;
}

/* A ROWS_Q4 row (llm_mnb4_fast1_cols, llm_mnb4_fastm_cols): per group of
 * four blocks, 256 bytes: the four blocks' even codes (64), their odd codes
 * (64), sa_b for each int32 lane of a block (16 floats), and -8 times the
 * sum of the eight codes a lane multiplies (16 int32: what the default zero
 * point takes off, where a kernel's integer sums start); then ab_b per block (what a zero point given in
 * the model takes off, times sb_b zp_b). */
#define Q4_GROUP_BYTES 256
/* after the groups: ab_b = sa_b x the block's code sum, 16 floats per 16
 * blocks (zero-padded) */
static size_t q4_ab_at(int64_t kb) { return (size_t)((kb + 3) / 4) * Q4_GROUP_BYTES; }
static size_t q4_row_bytes(int64_t kb) { return q4_ab_at(kb) + (size_t)((kb + 15) / 16) * 64; }

size_t llm_mnb4_row_bytes(int64_t kb) {
    size_t a = mnb4_layout_of(kb).total, b = q4_row_bytes(kb);
    return a > b ? a : b;
}

/* Offset of code k of block (pair member) h within the pair, ROWS_1Z. */
static inline int q1z_at(int k, int h) {
    return ((k & 1) ? 32 : 0) + 4 * (k >> 2) + 2 * h + ((k >> 1) & 1);
}

/* Natural code k of block b in a prepared row of the given kind. */
static inline int qnat(const int8_t *q, int kind, int64_t b, int k) {
    if (kind == LLM_MNB4_ROWS_1Z)
        return q[64 * (b >> 1) + q1z_at(k, (int)(b & 1))];
    const int8_t *base = q + 64 * (b >> 1) + 16 * (b & 1);
    return (k & 1) ? base[32 + (k >> 1)] : base[k >> 1];
}

/* Places block b's natural codes nat[32] (and its scale) into the row. */
static void mnb4_place(char *row, const mnb4_layout *L, int64_t b, const int8_t nat[32],
                       float sa, int kind) {
    int32_t sum = 0;
    for (int k = 0; k < 32; k++)
        sum += nat[k];
    ((float *)(row + L->sa))[b] = sa;
    ((float *)(row + L->ab))[b] = sa * (float)sum;
    if (kind == LLM_MNB4_ROWS_1Z) {
        int8_t *q = (int8_t *)(row + L->q) + 64 * (b >> 1);
        int16_t *s = (int16_t *)(row + L->asq) + 16 * (b >> 1);
        int h = (int)(b & 1);
        if (!h) { /* blocks come in order: a lone last block's partner stays zero */
            memset(q, 0, 64);
            memset(s, 0, 32);
        }
        for (int k = 0; k < 32; k++)
            q[q1z_at(k, h)] = nat[k];
        for (int j = 0; j < 8; j++)
            s[2 * j + h] = (int16_t)(nat[4 * j] + nat[4 * j + 1] + nat[4 * j + 2] + nat[4 * j + 3]);
        return;
    }
    int8_t *q = (int8_t *)(row + L->q) + 64 * (b >> 1) + 16 * (b & 1);
    for (int i = 0; i < 16; i++) {
        q[i] = nat[2 * i];
        q[32 + i] = nat[2 * i + 1];
    }
    if (kind == LLM_MNB4_ROWS_1) {
        int16_t *s = (int16_t *)(row + L->asq) + 16 * (b >> 1) + 8 * (b & 1);
        for (int j = 0; j < 8; j++)
            s[j] = (int16_t)(nat[4 * j] + nat[4 * j + 1] + nat[4 * j + 2] + nat[4 * j + 3]);
    }
}

/* The parts of the row that depend on all blocks: sap, the zero halves of
 * a last odd block, the padding. */
static void mnb4_finish_row(char *row, const mnb4_layout *L, int64_t kb, int kind) {
    const float *sa = (const float *)(row + L->sa);
    float *sap = (float *)(row + L->sap);
    int64_t np = kb / 2;
    for (int64_t p = 0; p < np; p++)
        for (int j = 0; j < 8; j++)
            sap[8 * p + j] = sa[2 * p + (j >> 2)];
    if (kb & 1) {
        int8_t *q = (int8_t *)(row + L->q) + 64 * np;
        if (kind != LLM_MNB4_ROWS_1Z) { /* (1Z: zeroed when placed) */
            memset(q + 16, 0, 16);
            memset(q + 48, 0, 16);
        }
        for (int j = 0; j < 8; j++)
            sap[8 * np + j] = sa[kb - 1];
        if (kind == LLM_MNB4_ROWS_1)
            memset((int16_t *)(row + L->asq) + 16 * np + 8, 0, 16);
    }
    for (int64_t b = kb; b < ((kb + 7) & ~7); b++) {
        ((float *)(row + L->sa))[b] = 0;
        ((float *)(row + L->ab))[b] = 0;
    }
}

static void q4_prep_row(const float *a, int64_t K, char *row);

void llm_mnb4_prep_row_ref(const float *a, int64_t K, int kind, void *row) {
    if (kind == LLM_MNB4_ROWS_Q4) {
        q4_prep_row(a, K, row);
        return;
    }
    int64_t kb = (K + 31) / 32;
    mnb4_layout L = mnb4_layout_of(kb);
    int8_t nat[32];
    for (int64_t b = 0; b < kb; b++) {
        int64_t len = sn_imin(32, K - 32 * b);
        float sa = llm_q8_quantize(a + 32 * b, len, nat);
        memset(nat + len, 0, (size_t)(32 - len));
        mnb4_place(row, &L, b, nat, sa, kind);
    }
    mnb4_finish_row(row, &L, kb, kind);
}

/* ---- scalar lanes on a prepared row (reference and non-AVX2 fallback) --- */

static inline int zp4(const uint8_t *zp, int64_t b) {
    return zp ? (zp[b >> 1] >> ((b & 1) * 4)) & 15 : 8;
}
static inline int code4(const uint8_t *bcol, int64_t b, int k) {
    return (bcol[16 * b + (k >> 1)] >> ((k & 1) * 4)) & 15;
}

/* Lanes of one column in ORT's order (as llm_mnb4_lanes_ref computes them
 * from natural codes). */
static void mnb4_lanes_row(const char *row, const mnb4_layout *L, const uint8_t *bcol,
                           const float *sb, const uint8_t *zp, int64_t kb, int kind,
                           float acc[8]) {
    const int8_t *q = (const int8_t *)(row + L->q);
    const float *sa = (const float *)(row + L->sa);
    for (int j = 0; j < 8; j++)
        acc[j] = 0;
    int64_t b = 0;
    if (kind == LLM_MNB4_ROWS_1Z) {
        for (; b < kb; b++) {
            int z = zp4(zp, b);
            float c = sa[b] * sb[b];
            for (int j = 0; j < 8; j++) {
                int32_t s = 0;
                for (int k = 4 * j; k < 4 * j + 4; k++)
                    s += qnat(q, kind, b, k) * (code4(bcol, b, k) - z);
                acc[j] = fmaf((float)s, c, acc[j]);
            }
        }
        return;
    }
    int z = kind == LLM_MNB4_ROWS_1 ? 8 : 0;
    for (; b + 1 < kb; b += 2) {
        float c0 = sa[b] * sb[b], c1 = sa[b + 1] * sb[b + 1];
        for (int j = 0; j < 8; j++) {
            int64_t bb = b + ((j >> 1) & 1);          /* lanes 2, 3, 6, 7: block b + 1 */
            int g = (j & 1) + ((j >> 2) << 1);        /* group of 8 within the block */
            int32_t s = 0;
            for (int k = 8 * g; k < 8 * g + 8; k++)
                s += qnat(q, kind, bb, k) * (code4(bcol, bb, k) - z);
            acc[j] = fmaf((float)s, (j & 2) ? c1 : c0, acc[j]);
        }
    }
    if (b < kb) {
        float c = sa[b] * sb[b];
        for (int j = 0; j < 8; j++) {
            int32_t s = 0;
            for (int k = 4 * j; k < 4 * j + 4; k++)
                s += qnat(q, kind, b, k) * (code4(bcol, b, k) - z);
            acc[j] = fmaf((float)s, c, acc[j]);
        }
    }
}

static float mnb4_blksum_row(const float *ab, const float *sb, const uint8_t *zp, int64_t kb) {
    float g = 0;
    for (int64_t b = 0; b < kb; b++)
        g = fmaf(ab[b], -(sb[b] * (float)zp4(zp, b)), g);
    return g;
}

static inline float mnb4_out(const llm_mnb4_args *g, const char *row, const mnb4_layout *L,
                             int64_t n, const float lanes[8]) {
    float v = n < g->N - g->N % 4 ? llm_fold8(lanes) : llm_hsum8(lanes);
    if (g->bias)
        v += g->bias[n];
    if (g->M > 1)
        v += mnb4_blksum_row((const float *)(row + L->ab), g->sb + n * g->kb,
                             g->zp ? g->zp + n * g->zp_stride : NULL, g->kb);
    return v;
}

/* ---- the tiled layout of B (llm_mnb4_tile) ------------------------------ */

size_t llm_mnb4_tiled_bytes(int64_t N, int64_t kb) { return (size_t)N * (size_t)((kb + 1) / 2) * 32; }

/* Column n's first pair in the tiled layout, and the distance between its
 * pairs (the width of its tile x 32). */
static const uint8_t *tiled_col(const uint8_t *t, int64_t N, int64_t kb, int64_t n, int64_t *pst) {
    int64_t t0 = n / 4 * 4, w = sn_imin(4, N - t0);
    *pst = 32 * w;
    return t + (size_t)t0 * (size_t)((kb + 1) / 2) * 32 + (size_t)(n - t0) * 32;
}

void llm_mnb4_tile(const uint8_t *b, int64_t N, int64_t kb, uint8_t *dst,
                   void (*done)(void *ctx, const void *p, size_t n), void *ctx) {
    for (int64_t t0 = 0; t0 < N; t0 += 4) {
        int64_t w = sn_imin(4, N - t0);
        for (int64_t c = 0; c < w; c++) {
            int64_t pst;
            uint8_t *d = (uint8_t *)tiled_col(dst, N, kb, t0 + c, &pst);
            const uint8_t *src = b + (t0 + c) * kb * 16;
            for (int64_t p = 0; 2 * p < kb; p++, d += pst) {
                const uint8_t *b0 = src + 32 * p, *b1 = b0 + 16;
                int lone = 2 * p + 1 == kb;
                for (int u = 0; u < 8; u++) { /* 16-bit units alternate */
                    memcpy(d + 4 * u, b0 + 2 * u, 2);
                    if (lone)
                        memset(d + 4 * u + 2, 0, 2);
                    else
                        memcpy(d + 4 * u + 2, b1 + 2 * u, 2);
                }
            }
        }
        if (done)
            done(ctx, b + t0 * kb * 16, (size_t)(w * kb * 16));
    }
}

/* Column n of B as [kb, 16] bytes: in place, or copied out of the tiles
 * into tmp (kb * 16 bytes). */
static const uint8_t *col_bytes(const llm_mnb4_args *g, int64_t n, uint8_t *tmp) {
    if (!g->tiled)
        return g->b + n * g->kb * 16;
    int64_t pst;
    const uint8_t *s = tiled_col(g->b, g->N, g->kb, n, &pst);
    for (int64_t p = 0; 2 * p < g->kb; p++, s += pst) {
        int lone = 2 * p + 1 == g->kb;
        for (int u = 0; u < 8; u++) {
            memcpy(tmp + 32 * p + 2 * u, s + 4 * u, 2);
            if (!lone)
                memcpy(tmp + 32 * p + 16 + 2 * u, s + 4 * u + 2, 2);
        }
    }
    return tmp;
}

void llm_mnb4_cols_ref(const llm_mnb4_args *g, int64_t n0, int64_t n1) {
    mnb4_layout L = mnb4_layout_of(g->kb);
    uint8_t tmp[LLM_MNB4_TILE_MAX_KB * 16 + 16];
    for (int64_t m = 0; m < g->M; m++) {
        const char *row = (const char *)g->rows + (size_t)m * llm_mnb4_row_bytes(g->kb);
        for (int64_t n = n0; n < n1; n++) {
            float lanes[8];
            mnb4_lanes_row(row, &L, col_bytes(g, n, tmp), g->sb + n * g->kb,
                           g->zp ? g->zp + n * g->zp_stride : NULL, g->kb,
                           llm_mnb4_row_kind(g->M, g->zp != NULL), lanes);
            g->y[m * g->ldy + n] = mnb4_out(g, row, &L, n, lanes);
        }
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include "ops/simd_avx.h"
#define AVX2 __attribute__((target("avx2,fma")))
#define AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline

/* ---- row preparation ---------------------------------------------------- */

/* llm_q8_quantize of a full block of 32 (same scale, same codes). */
AVX2_INLINE float q8_block(const float *x, __m256i *codes) {
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 x0 = _mm256_loadu_ps(x), x1 = _mm256_loadu_ps(x + 8);
    __m256 x2 = _mm256_loadu_ps(x + 16), x3 = _mm256_loadu_ps(x + 24);
    __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(x0, absm), _mm256_and_ps(x1, absm)),
                             _mm256_max_ps(_mm256_and_ps(x2, absm), _mm256_and_ps(x3, absm)));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    float amax = _mm_cvtss_f32(h);
    float scale = amax / 127.0f;
    float inv = amax != 0.0f ? 127.0f / amax : 0.0f;
    const __m256 vi = _mm256_set1_ps(inv), hi = _mm256_set1_ps(127.0f), lo = _mm256_set1_ps(-127.0f);
#define Q8R(v)                                                                                    \
    _mm256_cvtps_epi32(_mm256_min_ps(                                                             \
        _mm256_max_ps(_mm256_round_ps(_mm256_mul_ps(v, vi), _MM_FROUND_TO_NEAREST_INT |           \
                                                                _MM_FROUND_NO_EXC),               \
                      lo),                                                                        \
        hi))
    __m256i i0 = Q8R(x0), i1 = Q8R(x1), i2 = Q8R(x2), i3 = Q8R(x3);
#undef Q8R
    __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
    *codes = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    return scale;
}

/* Block b of a row of K: q8_block, or llm_q8_quantize of a short last
 * block with its codes zero-padded to 32. */
AVX2_INLINE float q8_block_at(const float *a, int64_t K, int64_t b, __m256i *nat) {
    if (32 * b + 32 <= K)
        return q8_block(a + 32 * b, nat);
    int8_t buf[32];
    int64_t len = K - 32 * b;
    float s = llm_q8_quantize(a + 32 * b, len, buf);
    memset(buf + len, 0, (size_t)(32 - len));
    *nat = _mm256_loadu_si256((const __m256i *)buf);
    return s;
}

/* A ROWS_1Z pair from its two blocks' evens (e), odds (o) and lane sums
 * (s, eight int16), block b in the first of each (zero for a lone block's
 * partner): the 16-bit units of the two blocks alternate. */
AVX2_INLINE void put_pair_1z(char *row, const mnb4_layout *L, int64_t p, __m128i e0, __m128i o0,
                             __m128i s0, __m128i e1, __m128i o1, __m128i s1) {
    char *q = row + L->q + 64 * p, *d = row + L->asq + 32 * p;
    _mm_storeu_si128((__m128i *)q, _mm_unpacklo_epi16(e0, e1));
    _mm_storeu_si128((__m128i *)(q + 16), _mm_unpackhi_epi16(e0, e1));
    _mm_storeu_si128((__m128i *)(q + 32), _mm_unpacklo_epi16(o0, o1));
    _mm_storeu_si128((__m128i *)(q + 48), _mm_unpackhi_epi16(o0, o1));
    _mm_storeu_si128((__m128i *)d, _mm_unpacklo_epi16(s0, s1));
    _mm_storeu_si128((__m128i *)(d + 16), _mm_unpackhi_epi16(s0, s1));
}

AVX2 static void mnb4_prep_row_avx2(const float *a, int64_t K, int kind, char *row) {
    int64_t kb = (K + 31) / 32;
    mnb4_layout L = mnb4_layout_of(kb);
    const __m256i evod = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,
                                          0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    const __m256i one8 = _mm256_set1_epi8(1), one16 = _mm256_set1_epi16(1);
    float *sa = (float *)(row + L.sa), *ab = (float *)(row + L.ab);
    __m128i e0 = _mm_setzero_si128(), o0 = e0, s0 = e0; /* ROWS_1Z: the pair's first block */
    for (int64_t b = 0; b < kb; b++) {
        __m256i nat;
        float s = q8_block_at(a, K, b, &nat);
        /* [evens | odds] of the block */
        __m256i eo = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(nat, evod), 0xD8);
        /* pair sums, then sums of four (quads j at [j] for j < 4, [4 + j - 4] above) */
        __m256i quads = _mm256_madd_epi16(_mm256_maddubs_epi16(one8, nat), one16);
        __m128i q4 = _mm_add_epi32(_mm256_castsi256_si128(quads), _mm256_extracti128_si256(quads, 1));
        q4 = _mm_add_epi32(q4, _mm_shuffle_epi32(q4, 0x4E));
        q4 = _mm_add_epi32(q4, _mm_shuffle_epi32(q4, 0xB1));
        sa[b] = s;
        ab[b] = s * (float)_mm_cvtsi128_si32(q4);
        __m128i s16 = _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packs_epi32(quads, quads), 0x08));
        if (kind == LLM_MNB4_ROWS_1Z) {
            __m128i e = _mm256_castsi256_si128(eo), o = _mm256_extracti128_si256(eo, 1);
            if (b & 1) {
                put_pair_1z(row, &L, b >> 1, e0, o0, s0, e, o, s16);
            } else if (b + 1 == kb) {
                __m128i z = _mm_setzero_si128();
                put_pair_1z(row, &L, b >> 1, e, o, s16, z, z, z);
            } else {
                e0 = e, o0 = o, s0 = s16;
            }
            continue;
        }
        int8_t *q = (int8_t *)(row + L.q) + 64 * (b >> 1) + 16 * (b & 1);
        _mm_storeu_si128((__m128i *)q, _mm256_castsi256_si128(eo));
        _mm_storeu_si128((__m128i *)(q + 32), _mm256_extracti128_si256(eo, 1));
        if (kind == LLM_MNB4_ROWS_1)
            _mm_storeu_si128((__m128i *)((int16_t *)(row + L.asq) + 16 * (b >> 1) + 8 * (b & 1)), s16);
    }
    mnb4_finish_row(row, &L, kb, kind);
}


/* q4_prep_row (below), the same bytes. */
AVX2 static void q4_prep_row_avx2(const float *a, int64_t K, char *row) {
    int64_t kb = (K + 31) / 32;
    memset(row, 0, q4_row_bytes(kb));
    const __m256i evod = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,
                                          0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    const __m256i one8 = _mm256_set1_epi8(1), one16 = _mm256_set1_epi16(1);
    float *ab = (float *)(row + q4_ab_at(kb));
    for (int64_t b = 0; b < kb; b++) {
        __m256i nat;
        float s = q8_block_at(a, K, b, &nat);
        __m256i eo = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(nat, evod), 0xD8);
        /* sums of codes [4i, 4i + 4), then lane j's: [8j, 8j + 8) */
        __m256i quads = _mm256_madd_epi16(_mm256_maddubs_epi16(one8, nat), one16);
        __m256i pairs = _mm256_hadd_epi32(quads, quads);
        __m128i lanes = _mm256_castsi256_si128(_mm256_permute4x64_epi64(pairs, 0x08));
        __m128i t = _mm_add_epi32(lanes, _mm_shuffle_epi32(lanes, 0x4E));
        t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1));
        char *g = row + (b / 4) * Q4_GROUP_BYTES;
        int h = (int)(b % 4);
        _mm_store_si128((__m128i *)(g + 16 * h), _mm256_castsi256_si128(eo));
        _mm_store_si128((__m128i *)(g + 64 + 16 * h), _mm256_extracti128_si256(eo, 1));
        _mm_store_ps((float *)(g + 128) + 4 * h, _mm_set1_ps(s));
        _mm_store_si128((__m128i *)(g + 192 + 16 * h), _mm_mullo_epi32(lanes, _mm_set1_epi32(-8)));
        ab[b] = s * (float)_mm_cvtsi128_si32(t);
    }
}

/* ---- kernels ------------------------------------------------------------- */

/* [s0 x4, s1 x4] from two consecutive floats */
AVX2_INLINE __m256 pat2(const float *s) {
    __m128 v = _mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)s));
    return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(v),
                                    _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
}

/* acc in the kernels' lane order <-> ORT's: swap 64-bit chunks 1 and 2 */
AVX2_INLINE __m256 swap12(__m256 v) {
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(v), 0xD8));
}

#define MNB4_MR 4 /* rows per tile of the pair kernel (M > 1) */

/* B decoded ahead (pair_decode): per column and pair of blocks the low and
 * high nibbles and the scale pattern, DEC_BYTES apart; prefill decodes each
 * group of eight columns once for all its row tiles. */
#define DEC_BYTES 96
#define DEC_MAX_KB 96 /* blocks of eight columns decoded ahead on the stack (36 KiB) */

/* A pair of the tiled layout (llm_mnb4_tile) back in block order: per lane
 * [block b's units | block b + 1's], then b's halves together. */
AVX2_INLINE __m256i untile_pair(const uint8_t *t) {
    const __m256i unit = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,
                                          0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    return _mm256_permute4x64_epi64(_mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)t), unit), 0xD8);
}

/* pst 0: bcol is a column [kb, 16]; else its first pair in the tiled
 * layout, pairs pst apart (read in place, no copy of the column). */
AVX2_INLINE void pair_decode(const uint8_t *bcol, int64_t pst, const float *sb, int64_t kb, char *dec) {
    const __m256i m0f = _mm256_set1_epi8(15);
    int64_t np = kb / 2;
    for (int64_t p = 0; p < np; p++, dec += DEC_BYTES) {
        __m256i v = pst ? untile_pair(bcol + p * pst) : _mm256_loadu_si256((const __m256i *)(bcol + 32 * p));
        _mm256_store_si256((__m256i *)dec, _mm256_and_si256(v, m0f));
        _mm256_store_si256((__m256i *)(dec + 32), _mm256_and_si256(_mm256_srli_epi16(v, 4), m0f));
        _mm256_store_ps((float *)(dec + 64), pat2(sb + 2 * p));
    }
    if (kb & 1) {
        __m128i v = pst ? _mm256_castsi256_si128(untile_pair(bcol + np * pst))
                        : _mm_loadu_si128((const __m128i *)(bcol + 16 * (kb - 1)));
        _mm_store_si128((__m128i *)dec, _mm_and_si128(v, _mm256_castsi256_si128(m0f)));
        _mm_store_si128((__m128i *)(dec + 32),
                        _mm_and_si128(_mm_srli_epi16(v, 4), _mm256_castsi256_si128(m0f)));
        _mm256_store_ps((float *)(dec + 64), _mm256_set1_ps(sb[kb - 1]));
    }
}

/* Pair kernel: MR rows x NR columns, blocks in pairs (M > 1, and M = 1
 * without zero points, where codes count from 8: M1). Lanes out[r][c][8]
 * (out + (8 r + c) 8) in ORT's order. PRE: columns decoded ahead, column c
 * at dc[c] (bc, sbc unused). */
AVX2_INLINE void pair_tile(const int MR, const int NR, const int M1, const int PRE,
                           const char *const *rows, const mnb4_layout *L,
                           const uint8_t *const *bc, const float *const *sbc,
                           const char *const *dc, int64_t kb, float *out) {
    const __m256i m0f = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
    __m256 acc[MNB4_MR][4];
    _Pragma("GCC unroll 8")
    for (int r = 0; r < MR; r++)
        _Pragma("GCC unroll 8")
        for (int c = 0; c < NR; c++)
            acc[r][c] = _mm256_setzero_ps();
    int64_t np = kb / 2;
    for (int64_t p = 0; p < np; p++) {
        _Pragma("GCC unroll 8")
        for (int c = 0; c < NR; c++) {
            __m256i lo, hi;
            __m256 sbv;
            if (PRE) {
                const char *d = dc[c] + DEC_BYTES * p;
                lo = _mm256_load_si256((const __m256i *)d);
                hi = _mm256_load_si256((const __m256i *)(d + 32));
                sbv = _mm256_load_ps((const float *)(d + 64));
            } else {
                __m256i v = _mm256_loadu_si256((const __m256i *)(bc[c] + 32 * p));
                lo = _mm256_and_si256(v, m0f);
                hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m0f);
                sbv = pat2(sbc[c] + 2 * p);
            }
            _Pragma("GCC unroll 8")
            for (int r = 0; r < MR; r++) {
                const char *q = rows[r] + L->q + 64 * p;
                __m256i d = _mm256_add_epi16(
                    _mm256_maddubs_epi16(lo, _mm256_load_si256((const __m256i *)q)),
                    _mm256_maddubs_epi16(hi, _mm256_load_si256((const __m256i *)(q + 32))));
                if (M1)
                    d = _mm256_sub_epi16(
                        d, _mm256_slli_epi16(
                               _mm256_load_si256((const __m256i *)(rows[r] + L->asq + 32 * p)), 3));
                __m256i l = _mm256_madd_epi16(d, ones);
                __m256 cs = _mm256_mul_ps(_mm256_load_ps((const float *)(rows[r] + L->sap) + 8 * p), sbv);
                acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(l), cs, acc[r][c]);
            }
        }
    }
    if (kb & 1) {
        int64_t b = kb - 1;
        _Pragma("GCC unroll 8")
        for (int c = 0; c < NR; c++) {
            __m128i lo, hi;
            __m256 sbv;
            if (PRE) {
                const char *d = dc[c] + DEC_BYTES * np;
                lo = _mm_load_si128((const __m128i *)d);
                hi = _mm_load_si128((const __m128i *)(d + 32));
                sbv = _mm256_load_ps((const float *)(d + 64));
            } else {
                __m128i v = _mm_loadu_si128((const __m128i *)(bc[c] + 16 * b));
                lo = _mm_and_si128(v, _mm256_castsi256_si128(m0f));
                hi = _mm_and_si128(_mm_srli_epi16(v, 4), _mm256_castsi256_si128(m0f));
                sbv = _mm256_set1_ps(sbc[c][b]);
            }
            _Pragma("GCC unroll 8")
            for (int r = 0; r < MR; r++) {
                const char *q = rows[r] + L->q + 64 * np;
                __m128i d = _mm_add_epi16(_mm_maddubs_epi16(lo, _mm_load_si128((const __m128i *)q)),
                                          _mm_maddubs_epi16(hi, _mm_load_si128((const __m128i *)(q + 32))));
                if (M1)
                    d = _mm_sub_epi16(
                        d, _mm_slli_epi16(_mm_load_si128((const __m128i *)(rows[r] + L->asq + 32 * np)), 3));
                __m256i l = _mm256_permute4x64_epi64(_mm256_cvtepi16_epi32(d), 0xD8);
                __m256 cs = _mm256_mul_ps(_mm256_load_ps((const float *)(rows[r] + L->sap) + 8 * np), sbv);
                acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(l), cs, acc[r][c]);
            }
        }
    }
    _Pragma("GCC unroll 8")
    for (int r = 0; r < MR; r++)
        _Pragma("GCC unroll 8")
        for (int c = 0; c < NR; c++)
            _mm256_storeu_ps(out + (r * 8 + c) * 8, swap12(acc[r][c]));
}

#define QCH 16 /* blocks per chunk of the quad kernel: the chunk's zero points fill a 128-bit lane */
#define QUAD_PF 2048 /* bytes of the tiled B stream read ahead (a pair of four columns is 128) */

/* Pair p of an untiled column in the tiled layout (llm_mnb4_tile): the two
 * blocks' 16-bit units alternated, a lone last block's partner zero. */
AVX2_INLINE __m256i tile_pair(const uint8_t *bcol, int64_t p, int lone) {
    __m128i x0 = _mm_loadu_si128((const __m128i *)(bcol + 32 * p));
    __m128i x1 = lone ? _mm_setzero_si128() : _mm_loadu_si128((const __m128i *)(bcol + 32 * p + 16));
    return _mm256_set_m128i(_mm_unpackhi_epi16(x0, x1), _mm_unpacklo_epi16(x0, x1));
}

/* One column's step of the quad kernel over the pair (b, b + 1) (BOTH) or
 * the lone block b: d holds lane j of block b at int16 2 j and of block
 * b + 1 at 2 j + 1 (the row and B interleaved alike), the zero points
 * already taken off; each block's lanes are widened (the low units by a
 * multiply-add with 1, the high ones by a shift) and added into acc in
 * block order, one fused multiply-add per block as in ORT. */
AVX2_INLINE __m256 quad_step(const int BOTH, __m256 acc, __m256i v, __m256i aev, __m256i aod,
                             __m256i aq, __m256i z, const float *cb) {
    const __m256i m0f = _mm256_set1_epi8(15);
    __m256i lo = _mm256_and_si256(v, m0f);
    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m0f);
    __m256i d = _mm256_add_epi16(_mm256_maddubs_epi16(lo, aev), _mm256_maddubs_epi16(hi, aod));
    d = _mm256_sub_epi16(d, _mm256_mullo_epi16(z, aq));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(d, _mm256_set1_epi32(1))),
                          _mm256_broadcast_ss(cb), acc);
    if (BOTH)
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srai_epi32(d, 16)), _mm256_broadcast_ss(cb + 1), acc);
    return acc;
}

/* Quad kernel: one row (M = 1, a ROWS_1Z row) with zero points, NR
 * columns; every block on its own with lanes k in [4j, 4j + 4) of
 * (code - zp) * a, in ORT's order. TILED: column c's pair p at b0 + c *
 * cst + p * pst (llm_mnb4_tile's layout); else column c's codes at b0 + c *
 * cst ([kb, 16]), tiled a chunk at a time on the stack. Scales at s0 + c *
 * kb, packed zero points at z0 + c * zst; zend: the end of the zero points. */
AVX2_INLINE void quad_tile(const int NR, const int TILED, const char *row, const mnb4_layout *L,
                           const uint8_t *b0, int64_t cst, int64_t pst, const float *s0,
                           const uint8_t *z0, int64_t zst, const uint8_t *zend, int64_t kb, float *out) {
    const __m128i m0f4 = _mm_set1_epi8(15);
    const __m256i one16 = _mm256_set1_epi16(1);
    const float *sa = (const float *)(row + L->sa);
    const char *qr = row + L->q, *asq = row + L->asq;
    __m256 acc[4];
    _Alignas(32) float cb[4][QCH];
    _Alignas(32) uint8_t tb[QCH / 2][4][32];
    __m256i zv[4];
    _Pragma("GCC unroll 4")
    for (int c = 0; c < NR; c++)
        acc[c] = _mm256_setzero_ps();
    for (int64_t k0 = 0; k0 < kb; k0 += QCH) {
        int64_t nb = sn_imin(QCH, kb - k0), nz = (nb + 1) / 2;
        const uint8_t *bp = b0 + k0 / 2 * pst;
        int64_t cs = cst, ps = pst;
        if (!TILED) {
            for (int c = 0; c < NR; c++)
                for (int64_t i = 0; i < nz; i++)
                    _mm256_store_si256((__m256i *)tb[i][c],
                                       tile_pair(b0 + c * cst, k0 / 2 + i, k0 + 2 * i + 1 == kb));
            bp = &tb[0][0][0];
            cs = 32;
            ps = 4 * 32;
        }
        /* per column: the scale products c_b = sa_b * sb_b, and the chunk's
         * zero points, [even blocks' | odd blocks'] in each 128-bit lane */
        __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(nb & 7)),
                                          _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        _Pragma("GCC unroll 4")
        for (int c = 0; c < NR; c++) {
            const float *sb = s0 + c * kb + k0;
            int64_t i = 0;
            for (; i + 8 <= nb; i += 8)
                _mm256_store_ps(cb[c] + i, _mm256_mul_ps(_mm256_loadu_ps(sa + k0 + i), _mm256_loadu_ps(sb + i)));
            if (i < nb)
                _mm256_store_ps(cb[c] + i, _mm256_mul_ps(_mm256_maskload_ps(sa + k0 + i, tail),
                                                         _mm256_maskload_ps(sb + i, tail)));
            const uint8_t *zp = z0 + c * zst + k0 / 2;
            __m128i x;
            if (zp + 8 <= zend) {
                x = _mm_loadl_epi64((const __m128i *)zp);
            } else {
                uint8_t t[16] = {0};
                for (int64_t k = 0; k < nz; k++)
                    t[k] = zp[k];
                x = _mm_loadu_si128((const __m128i *)t);
            }
            zv[c] = _mm256_broadcastsi128_si256(
                _mm_unpacklo_epi64(_mm_and_si128(x, m0f4), _mm_and_si128(_mm_srli_epi16(x, 4), m0f4)));
        }
        /* pshufb control for the pair i: int16 units zp(k0 + 2i), zp(k0 + 2i + 1) alternating */
        __m256i zsel = _mm256_set1_epi32((int)0x80088000u);
        int64_t b = k0, i = 0;
        for (; b + 1 < k0 + nb; b += 2, i++) {
            int64_t p = b >> 1;
            __m256i aev = _mm256_load_si256((const __m256i *)(qr + 64 * p));
            __m256i aod = _mm256_load_si256((const __m256i *)(qr + 64 * p + 32));
            __m256i aq = _mm256_load_si256((const __m256i *)(asq + 32 * p));
            if (TILED) { /* B from memory: its stream fetched ahead (-18..-25% time from memory) */
                _mm_prefetch((const char *)(bp + i * ps) + QUAD_PF, _MM_HINT_T0);
                _mm_prefetch((const char *)(bp + i * ps) + QUAD_PF + 64, _MM_HINT_T0);
            }
            _Pragma("GCC unroll 4")
            for (int c = 0; c < NR; c++)
                acc[c] = quad_step(1, acc[c], _mm256_loadu_si256((const __m256i *)(bp + c * cs + i * ps)), aev,
                                   aod, aq, _mm256_shuffle_epi8(zv[c], zsel), cb[c] + (b - k0));
            zsel = _mm256_add_epi16(zsel, one16);
        }
        if (b < k0 + nb) { /* the last block, kb odd: its partner's codes and sums are zero */
            int64_t p = b >> 1;
            __m256i aev = _mm256_load_si256((const __m256i *)(qr + 64 * p));
            __m256i aod = _mm256_load_si256((const __m256i *)(qr + 64 * p + 32));
            __m256i aq = _mm256_load_si256((const __m256i *)(asq + 32 * p));
            _Pragma("GCC unroll 4")
            for (int c = 0; c < NR; c++)
                acc[c] = quad_step(0, acc[c], _mm256_loadu_si256((const __m256i *)(bp + c * cs + i * ps)), aev,
                                   aod, aq, _mm256_shuffle_epi8(zv[c], zsel), cb[c] + (b - k0));
        }
    }
    _Pragma("GCC unroll 4")
    for (int c = 0; c < NR; c++)
        _mm256_storeu_ps(out + c * 8, acc[c]);
}

/* col_bytes with the tiles' 16-bit units sorted back by vector. */
AVX2_INLINE const uint8_t *col_bytes_avx2(const llm_mnb4_args *g, int64_t n, uint8_t *tmp) {
    if (!g->tiled)
        return g->b + n * g->kb * 16;
    int64_t pst;
    const uint8_t *s = tiled_col(g->b, g->N, g->kb, n, &pst);
    for (int64_t p = 0; 2 * p < g->kb; p++, s += pst) {
        __m256i v = untile_pair(s);
        if (2 * p + 1 < g->kb)
            _mm256_storeu_si256((__m256i *)(tmp + 32 * p), v);
        else
            _mm_storeu_si128((__m128i *)(tmp + 32 * p), _mm256_castsi256_si128(v));
    }
    return tmp;
}

/* ---- epilogue: lane reductions, bias, zero-point block sums ------------- */

/* Lanes of eight columns (lanes[c][8]) -> ORT's fold of each, in one vector. */
AVX2_INLINE __m256 fold8x8(const float *lanes) {
    __m256 r[8];
    for (int k = 0; k < 8; k++)
        r[k] = _mm256_loadu_ps(lanes + 8 * k);
    sn_avx_t8x8(r); /* r[j]: lane j of every column */
    __m256 lo = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(r[0], r[1]), r[2]), r[3]);
    __m256 hi = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(r[4], r[5]), r[6]), r[7]);
    return _mm256_add_ps(lo, hi);
}

#define NZ_MAX 256 /* blocks whose -(sb * zp) of eight columns fit the stack (8 KiB) */

/* Rows rows[0..mr) (m, m + 1, ..), columns [n, n + nc): Y from the lanes
 * (lanes[r][c][8]); nz: -(sb * zp) per block for eight columns ([kb][8]),
 * or NULL (M = 1, or kb too large). */
AVX2_INLINE void finish_rows(const int MR, const llm_mnb4_args *g, const char *const *rows,
                             const mnb4_layout *L, int64_t m, int64_t n, int nc,
                             const float *lanes, const float *nz) {
    if (nc == 8 && n + 8 <= g->N - g->N % 4 && (g->M == 1 || nz)) {
        __m256 s[MNB4_MR];
        _Pragma("GCC unroll 8")
        for (int r = 0; r < MR; r++)
            s[r] = _mm256_setzero_ps();
        if (g->M > 1) /* MR chains side by side */
            for (int64_t b = 0; b < g->kb; b++) {
                __m256 z = _mm256_load_ps(nz + 8 * b);
                _Pragma("GCC unroll 8")
                for (int r = 0; r < MR; r++)
                    s[r] = _mm256_fmadd_ps(
                        _mm256_broadcast_ss((const float *)(rows[r] + L->ab) + b), z, s[r]);
            }
        _Pragma("GCC unroll 8")
        for (int r = 0; r < MR; r++) {
            __m256 v = fold8x8(lanes + 64 * r);
            if (g->bias)
                v = _mm256_add_ps(v, _mm256_loadu_ps(g->bias + n));
            if (g->M > 1)
                v = _mm256_add_ps(v, s[r]);
            _mm256_storeu_ps(g->y + (m + r) * g->ldy + n, v);
        }
        return;
    }
    for (int r = 0; r < MR; r++)
        for (int c = 0; c < nc; c++)
            g->y[(m + r) * g->ldy + n + c] = mnb4_out(g, rows[r], L, n + c, lanes + 64 * r + 8 * c);
}

/* One tile of MR rows, columns [n, n + nc) of a group (lanes[r][c][8]). */
AVX2_INLINE void pair_rows(const int MR, const llm_mnb4_args *g, const char *const *rows,
                           const mnb4_layout *L, int64_t m, int64_t n, int nc,
                           const uint8_t *const *bc, const float *const *sbc,
                           const char *const *dc, float *lanes, const float *nz) {
    int c = 0;
    if (g->M == 1) {
        for (; c + 4 <= nc; c += 4)
            pair_tile(1, 4, 1, 0, rows, L, bc + c, sbc + c, NULL, g->kb, lanes + 8 * c);
        for (; c < nc; c++)
            pair_tile(1, 1, 1, 0, rows, L, bc + c, sbc + c, NULL, g->kb, lanes + 8 * c);
    } else if (dc) {
        for (; c < nc; c++)
            pair_tile(MR, 1, 0, 1, rows, L, bc + c, sbc + c, dc + c, g->kb, lanes + 8 * c);
    } else {
        for (; c < nc; c++)
            pair_tile(MR, 1, 0, 0, rows, L, bc + c, sbc + c, NULL, g->kb, lanes + 8 * c);
    }
    finish_rows(MR, g, rows, L, m, n, nc, lanes, nz);
}

AVX2 static void mnb4_cols_avx2(const llm_mnb4_args *g, int64_t n0, int64_t n1) {
    mnb4_layout L = mnb4_layout_of(g->kb);
    int64_t kb = g->kb;
    _Alignas(32) float lanes[MNB4_MR * 64];
    _Alignas(32) float nz[NZ_MAX * 8];
    _Alignas(32) char dec[8 * (DEC_MAX_KB / 2) * DEC_BYTES];
    /* tiled B for the paths that read columns whole: eight columns copied out */
    _Alignas(32) uint8_t cols[8 * LLM_MNB4_TILE_MAX_KB * 16 + 16];
    for (int64_t n = n0; n < n1; n += 8) {
        int nc = (int)sn_imin(8, n1 - n);
        const uint8_t *bc[8], *zc[8];
        const float *sbc[8];
        for (int c = 0; c < nc; c++) {
            bc[c] = g->tiled ? NULL : g->b + (n + c) * kb * 16;
            sbc[c] = g->sb + (n + c) * kb;
            zc[c] = g->zp ? g->zp + (n + c) * g->zp_stride : NULL;
        }
        if (g->M == 1 && g->zp) {
            const char *row = g->rows;
            const uint8_t *zend = g->zp + g->N * g->zp_stride;
            int c = 0;
#define QT(nr, t) quad_tile(nr, t, row, &L, b0, cst, pst, sbc[c], zc[c], g->zp_stride, zend, kb, lanes + 8 * c)
            while (c < nc) {
                /* four columns at a time, never across a tile of the tiled layout */
                int nr = g->tiled ? (int)sn_imin(4 - (n + c) % 4, nc - c) : (int)sn_imin(4, nc - c);
                int64_t cst = kb * 16, pst = 32;
                const uint8_t *b0 = bc[c];
                if (g->tiled) {
                    b0 = tiled_col(g->b, g->N, kb, n + c, &pst);
                    cst = 32;
                    switch (nr) {
                    case 4: QT(4, 1); break;
                    case 3: QT(3, 1); break;
                    case 2: QT(2, 1); break;
                    default: QT(1, 1); break;
                    }
                } else {
                    switch (nr) {
                    case 4: QT(4, 0); break;
                    case 3: QT(3, 0); break;
                    case 2: QT(2, 0); break;
                    default: QT(1, 0); break;
                    }
                }
                c += nr;
            }
#undef QT
            finish_rows(1, g, &row, &L, 0, n, nc, lanes, NULL);
            continue;
        }
        /* B decoded ahead reads the tiles in place; the other paths want
         * columns in block order */
        bool decode = g->M > 1 && kb <= DEC_MAX_KB;
        int64_t tst[8] = {0};
        if (g->tiled)
            for (int c = 0; c < nc; c++)
                bc[c] = decode ? tiled_col(g->b, g->N, kb, n + c, &tst[c])
                               : col_bytes_avx2(g, n + c, cols + (size_t)c * (size_t)kb * 16);
        const float *nzp = NULL;
        if (g->M > 1 && nc == 8 && kb <= NZ_MAX) {
            for (int64_t b = 0; b < kb; b++)
                for (int c = 0; c < 8; c++)
                    nz[8 * b + c] = -(sbc[c][b] * (float)zp4(zc[c], b));
            nzp = nz;
        }
        const char *dc[8], *const *dcp = NULL;
        if (decode) {
            for (int c = 0; c < nc; c++) {
                char *d = dec + (size_t)c * (size_t)((kb + 1) / 2) * DEC_BYTES;
                pair_decode(bc[c], tst[c], sbc[c], kb, d);
                dc[c] = d;
            }
            dcp = dc;
        }
        for (int64_t m = 0; m < g->M; m += MNB4_MR) {
            int mr = (int)sn_imin(MNB4_MR, g->M - m);
            const char *rows[MNB4_MR];
            for (int r = 0; r < mr; r++)
                rows[r] = (const char *)g->rows + (size_t)(m + r) * llm_mnb4_row_bytes(g->kb);
            switch (mr) {
            case 4: pair_rows(4, g, rows, &L, m, n, nc, bc, sbc, dcp, lanes, nzp); break;
            case 3: pair_rows(3, g, rows, &L, m, n, nc, bc, sbc, dcp, lanes, nzp); break;
            case 2: pair_rows(2, g, rows, &L, m, n, nc, bc, sbc, dcp, lanes, nzp); break;
            default: pair_rows(1, g, rows, &L, m, n, nc, bc, sbc, dcp, lanes, nzp); break;
            }
        }
    }
}
#endif

/* ---- snug's own order: AVX-512 VNNI, any number of rows ---------------
 * The product where ONNX Runtime's rounding is not the reference (issue
 * #22, docs/accuracy.md: an int8-activation kernel must be as accurate as
 * ORT's against float64, not equal to it). Both kernels read ROWS_Q4 rows
 * and B in its original [N, kb, 16] layout, and give every output element
 * the same bits however many rows the call has (a prefill's last row and a
 * decode step, one sequence or a batch of them):
 *
 *  - per group of four blocks, int32 lane t (block t / 4, eight codes)
 *    holds sum q c exactly (two vpdpbusd of B's low and high nibbles
 *    against the row's even and odd codes), less 8 x the lane's code sum
 *    when there are no zero points (the default 8, exact in the integers);
 *  - acc (16 floats) += float(lane) x (sa_b x sb_b), group after group;
 *  - with zero points, zacc (16 floats, lane l: blocks 16 i + l) +=
 *    ab_b x (sb_b x zp_b), sixteen blocks at a time, after the groups;
 *  - every FAST_CHUNK groups (96 blocks) the lanes acc - zacc are reduced
 *    (_mm512_reduce_add_ps) and added to the column's sum (the first chunk's
 *    reduction is the sum); then the bias.
 *
 * The one-row kernel reads each column once, four short columns at a time
 * (the row's loads shared) or one long one as an ascending stream; the
 * many-row kernel decodes a chunk of four columns ahead on the stack and
 * applies it to the rows two at a time. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define MNB4_FAST1 1
/* Each column's stream fetched 4 KiB ahead into L2 (TinyLlama decode, 2
 * threads: T2 4.6% faster than T0, NTA 27% slower; 256 B ahead 11% slower,
 * 8 KiB no faster) */
#define FAST1_PF 4096
#define FAST1_HINT _MM_HINT_T2
#define FAST1_SHORT 1024 /* bytes: columns up to this long go four at a time */
#define FAST_CHUNK 24    /* groups of four blocks per reduction (96 blocks; fastm's decode buffer) */
#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define VNNI_INLINE __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"), always_inline)) static inline

/* sb_b zp_b of blocks b .. b + r - 1 (b a multiple of 16, r <= 16; zero
 * past r), as floats */
VNNI_INLINE __m512 q4_sbzp16(const float *sb, const uint8_t *zp, int64_t b, int r) {
    const __m128i m0f = _mm_set1_epi8(15);
    __m128i x = _mm_maskz_loadu_epi8((__mmask16)((1u << ((r + 1) / 2)) - 1), zp + b / 2);
    __m128i z = _mm_unpacklo_epi8(_mm_and_si128(x, m0f), _mm_and_si128(_mm_srli_epi16(x, 4), m0f));
    return _mm512_mul_ps(_mm512_maskz_loadu_ps((__mmask16)((1u << r) - 1), sb + b),
                         _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(z)));
}

/* sb of blocks b .. b + rb - 1, each to its four lanes */
VNNI_INLINE __m512 q4_sb_lanes(const float *sb, int64_t b, int rb) {
    const __m512i rep4 = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    return _mm512_permutexvar_ps(rep4, _mm512_castps128_ps512(_mm_maskz_loadu_ps((__mmask8)((1u << rb) - 1), sb + b)));
}

/* NR columns from col0 (kb * 16 bytes apart; scales s0, kb apart; zero
 * points zp0, zst apart, or NULL) against one ROWS_Q4 row. */
VNNI_INLINE void fast1_tile(const int NR, const bool ZP, const char *row, const uint8_t *col0, const float *s0,
                            const uint8_t *zp0, int64_t zst, int64_t kb, float *out) {
    const __m512i m0f = _mm512_set1_epi8(15);
    const int64_t ng = (kb + 3) / 4;
    const float *ab = (const float *)(row + q4_ab_at(kb));
    __m512 acc[4];
    for (int64_t g0 = 0; g0 < ng; g0 += FAST_CHUNK) {
        int64_t g1 = sn_imin(ng, g0 + FAST_CHUNK);
        _Pragma("GCC unroll 4") for (int c = 0; c < NR; c++)
            acc[c] = _mm512_setzero_ps();
        for (int64_t gi = g0; gi < g1; gi++) {
            int64_t b = 4 * gi;
            int rb = (int)sn_imin(4, kb - b);
            const char *gr = row + (size_t)gi * Q4_GROUP_BYTES;
            __m512i ae = _mm512_load_si512(gr), ao = _mm512_load_si512(gr + 64);
            __m512 sav = _mm512_load_ps((const float *)(gr + 128));
            /* the default zero point's -8 x code sum, the sums' start (exact in the integers) */
            __m512i T = ZP ? _mm512_setzero_si512() : _mm512_load_si512(gr + 192);
            __mmask64 kb64 = rb == 4 ? ~(__mmask64)0 : (((__mmask64)1 << (16 * rb)) - 1);
            _Pragma("GCC unroll 4") for (int c = 0; c < NR; c++) {
                const uint8_t *bc = col0 + (size_t)c * (size_t)kb * 16 + 16 * b;
                _mm_prefetch((const char *)bc + FAST1_PF, FAST1_HINT);
                __m512i v = rb == 4 ? _mm512_loadu_si512(bc) : _mm512_maskz_loadu_epi8(kb64, bc);
                __m512i lo = _mm512_and_si512(v, m0f), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m0f);
                __m512i d = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(T, lo, ae), hi, ao);
                __m512 sbv = q4_sb_lanes(s0 + c * kb, b, rb);
                acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), _mm512_mul_ps(sav, sbv), acc[c]);
            }
        }
        if (ZP) {
            __m512 zacc[4];
            _Pragma("GCC unroll 4") for (int c = 0; c < NR; c++)
                zacc[c] = _mm512_setzero_ps();
            for (int64_t b = 4 * g0; b < sn_imin(kb, 4 * g1); b += 16) {
                int r = (int)sn_imin(16, kb - b);
                __m512 abv = _mm512_load_ps(ab + b);
                _Pragma("GCC unroll 4") for (int c = 0; c < NR; c++)
                    zacc[c] = _mm512_fmadd_ps(abv, q4_sbzp16(s0 + c * kb, zp0 + c * zst, b, r), zacc[c]);
            }
            _Pragma("GCC unroll 4") for (int c = 0; c < NR; c++)
                acc[c] = _mm512_sub_ps(acc[c], zacc[c]);
        }
        _Pragma("GCC unroll 4") for (int c = 0; c < NR; c++) {
            float r = _mm512_reduce_add_ps(acc[c]);
            out[c] = g0 ? out[c] + r : r;
        }
    }
}

VNNI static void mnb4_fast1_vnni(const llm_mnb4_args *g, int64_t n0, int64_t n1) {
    const char *row = g->rows;
    int64_t kb = g->kb;
    /* short columns four at a time (the row's loads shared), long ones one
     * at a time: B then is one ascending stream, which the prefetchers
     * follow best (TinyLlama's 5632-deep down_proj). Single runs, decode
     * tok/s: four at a time up to 512 B, SmolLM2 308, TinyLlama 29.1; up
     * to 1024 B, 332 and 31.0. */
    const int64_t nr_max = kb * 16 <= FAST1_SHORT ? 4 : 1;
    for (int64_t n = n0; n < n1; n += nr_max) {
        int nr = (int)sn_imin(nr_max, n1 - n);
        const uint8_t *col = g->b + (size_t)n * (size_t)kb * 16;
        const float *s0 = g->sb + n * kb;
        const uint8_t *zp = g->zp ? g->zp + n * g->zp_stride : NULL;
        float out[4];
#define F1(R, Z) fast1_tile(R, Z, row, col, s0, zp, g->zp_stride, kb, out)
#define F1_COLS(Z)            \
    switch (nr) {             \
    case 4: F1(4, Z); break;  \
    case 3: F1(3, Z); break;  \
    case 2: F1(2, Z); break;  \
    default: F1(1, Z); break; \
    }
        if (zp) {
            F1_COLS(true);
        } else {
            F1_COLS(false);
        }
#undef F1_COLS
#undef F1
        for (int c = 0; c < nr; c++)
            g->y[n + c] = g->bias ? out[c] + g->bias[n + c] : out[c];
    }
}

/* A few rows at once: fast1_tile's sums for MR rows (ROWS_Q4, rst apart)
 * against NR columns decoded in registers once for all of them, in
 * fast1_tile's order for each row, so every row's result is the bits
 * fast1_tile gives it alone. The rows' bytes come from L1; a column set's
 * bytes stay there from one row tile to the next. */
#define FASTR_MR 4
/* The few-row form up to this many rows, the many-row one (decoded columns
 * in L1, shared by every row tile) beyond. SmolLM2 int4, 2 threads, decode
 * steps of B rows, ms: B 2: 4.2 against 6.8; 4: 6.7, 8.7; 8: 12.3, 12.7;
 * 16: 23.0, 21.8. */
#define FASTR_MAX_M 8
VNNI_INLINE void fastr_tile(const int MR, const int NR, const bool ZP, const char *rows, size_t rst,
                            const uint8_t *col0, const float *s0, const uint8_t *zp0, int64_t zst, int64_t kb,
                            float *out, int64_t ldo) {
    const __m512i m0f = _mm512_set1_epi8(15);
    const int64_t ng = (kb + 3) / 4;
    __m512 acc[FASTR_MR][4];
    for (int64_t g0 = 0; g0 < ng; g0 += FAST_CHUNK) {
        int64_t g1 = sn_imin(ng, g0 + FAST_CHUNK);
        _Pragma("GCC unroll 4") for (int r = 0; r < MR; r++)
            _Pragma("GCC unroll 4") for (int c = 0; c < NR; c++)
                acc[r][c] = _mm512_setzero_ps();
        for (int64_t gi = g0; gi < g1; gi++) {
            int64_t b = 4 * gi;
            int rb = (int)sn_imin(4, kb - b);
            __mmask64 kb64 = rb == 4 ? ~(__mmask64)0 : (((__mmask64)1 << (16 * rb)) - 1);
            _Pragma("GCC unroll 4") for (int c = 0; c < NR; c++) {
                const uint8_t *bc = col0 + (size_t)c * (size_t)kb * 16 + 16 * b;
                _mm_prefetch((const char *)bc + FAST1_PF, FAST1_HINT);
                __m512i v = rb == 4 ? _mm512_loadu_si512(bc) : _mm512_maskz_loadu_epi8(kb64, bc);
                __m512i lo = _mm512_and_si512(v, m0f), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m0f);
                __m512 sbv = q4_sb_lanes(s0 + c * kb, b, rb);
                _Pragma("GCC unroll 4") for (int r = 0; r < MR; r++) {
                    const char *gr = rows + (size_t)r * rst + (size_t)gi * Q4_GROUP_BYTES;
                    __m512i T = ZP ? _mm512_setzero_si512() : _mm512_load_si512(gr + 192);
                    __m512i d = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(T, lo, _mm512_load_si512(gr)), hi,
                                                    _mm512_load_si512(gr + 64));
                    __m512 sav = _mm512_load_ps((const float *)(gr + 128));
                    acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), _mm512_mul_ps(sav, sbv), acc[r][c]);
                }
            }
        }
        if (ZP) {
            _Pragma("GCC unroll 4") for (int r = 0; r < MR; r++) {
                const float *ab = (const float *)(rows + (size_t)r * rst + q4_ab_at(kb));
                __m512 zacc[4];
                _Pragma("GCC unroll 4") for (int c = 0; c < NR; c++)
                    zacc[c] = _mm512_setzero_ps();
                for (int64_t b = 4 * g0; b < sn_imin(kb, 4 * g1); b += 16) {
                    int n16 = (int)sn_imin(16, kb - b);
                    __m512 abv = _mm512_load_ps(ab + b);
                    _Pragma("GCC unroll 4") for (int c = 0; c < NR; c++)
                        zacc[c] = _mm512_fmadd_ps(abv, q4_sbzp16(s0 + c * kb, zp0 + c * zst, b, n16), zacc[c]);
                }
                _Pragma("GCC unroll 4") for (int c = 0; c < NR; c++)
                    acc[r][c] = _mm512_sub_ps(acc[r][c], zacc[c]);
            }
        }
        _Pragma("GCC unroll 4") for (int r = 0; r < MR; r++)
            _Pragma("GCC unroll 4") for (int c = 0; c < NR; c++) {
                float x = _mm512_reduce_add_ps(acc[r][c]);
                out[r * ldo + c] = g0 ? out[r * ldo + c] + x : x;
            }
    }
}

VNNI static void mnb4_fastr_vnni(const llm_mnb4_args *g, int64_t n0, int64_t n1) {
    int64_t kb = g->kb;
    size_t rst = llm_mnb4_row_bytes(kb);
    const int64_t nr_max = kb * 16 <= FAST1_SHORT ? 4 : 1; /* as fast1 */
    for (int64_t n = n0; n < n1; n += nr_max) {
        int nr = (int)sn_imin(nr_max, n1 - n);
        const uint8_t *col = g->b + (size_t)n * (size_t)kb * 16;
        const float *s0 = g->sb + n * kb;
        const uint8_t *zp = g->zp ? g->zp + n * g->zp_stride : NULL;
        for (int64_t m = 0; m < g->M; m += FASTR_MR) {
            int mr = (int)sn_imin(FASTR_MR, g->M - m);
            const char *rows = (const char *)g->rows + (size_t)m * rst;
            float *y = g->y + m * g->ldy + n;
#define FR(R, C, Z) fastr_tile(R, C, Z, rows, rst, col, s0, zp, g->zp_stride, kb, y, g->ldy)
#define FR_COLS(R, Z)            \
    switch (nr) {                \
    case 4: FR(R, 4, Z); break;  \
    case 3: FR(R, 3, Z); break;  \
    case 2: FR(R, 2, Z); break;  \
    default: FR(R, 1, Z); break; \
    }
#define FR_ROWS(Z)                \
    switch (mr) {                 \
    case 4: FR_COLS(4, Z); break; \
    case 3: FR_COLS(3, Z); break; \
    case 2: FR_COLS(2, Z); break; \
    default: FR_COLS(1, Z); break; \
    }
            if (zp) {
                FR_ROWS(true);
            } else {
                FR_ROWS(false);
            }
#undef FR_ROWS
#undef FR_COLS
#undef FR
        }
        if (g->bias)
            for (int64_t m = 0; m < g->M; m++)
                for (int c = 0; c < nr; c++)
                    g->y[m * g->ldy + n + c] += g->bias[n + c];
    }
}

/* B of NR columns decoded ahead for all row tiles: per column, per group of
 * four blocks, 192 bytes (the low nibbles, the high ones, sb_b per lane),
 * then with zero points sb_b zp_b, 16 floats per 16 blocks. */
#define FASTM_NR 8
#define FASTM_MR 2
#define FASTM_MAX_KB (4 * FAST_CHUNK) /* blocks decoded ahead on the stack at a time (a multiple of 16) */
#define FASTM_GROUP 192
static size_t fastm_dec_bytes(int64_t kn) { return (size_t)((kn + 3) / 4) * FASTM_GROUP + (size_t)((kn + 15) / 16) * 64; }

VNNI_INLINE void fastm_decode(const uint8_t *col, const float *sb, const uint8_t *zp, int64_t kb, char *dec) {
    const __m512i m0f = _mm512_set1_epi8(15);
    char *d = dec;
    for (int64_t b = 0; b < kb; b += 4, d += FASTM_GROUP) {
        int rb = (int)sn_imin(4, kb - b);
        __mmask64 kb64 = rb == 4 ? ~(__mmask64)0 : (((__mmask64)1 << (16 * rb)) - 1);
        _mm_prefetch((const char *)col + 16 * b + FAST1_PF, FAST1_HINT); /* B streams from memory */
        __m512i v = _mm512_maskz_loadu_epi8(kb64, col + 16 * b);
        _mm512_store_si512(d, _mm512_and_si512(v, m0f));
        _mm512_store_si512(d + 64, _mm512_and_si512(_mm512_srli_epi16(v, 4), m0f));
        _mm512_store_ps((float *)(d + 128), q4_sb_lanes(sb, b, rb));
    }
    if (zp)
        for (int64_t b = 0; b < kb; b += 16, d += 64)
            _mm512_store_ps((float *)d, q4_sbzp16(sb, zp, b, (int)sn_imin(16, kb - b)));
}

/* MR rows (ROWS_Q4, rst apart; their ab at rab) x NR decoded columns (dcs
 * apart), ZP: with zero points. The order of llm_mnb4_fast1_cols (above),
 * for one chunk; add: the chunk's sums go onto out. */
VNNI_INLINE void fastm_tile(const int MR, const int NR, const bool ZP, const char *row0, const float *rab, size_t rst,
                            const char *dec, size_t dcs, int64_t kb, float *out, int64_t ldo, bool add) {
    __m512 acc[FASTM_MR][FASTM_NR];
    _Pragma("GCC unroll 4") for (int r = 0; r < MR; r++)
        _Pragma("GCC unroll 8") for (int c = 0; c < NR; c++)
            acc[r][c] = _mm512_setzero_ps();
    const int64_t ng = (kb + 3) / 4;
    for (int64_t gi = 0; gi < ng; gi++) {
        __m512i ae[FASTM_MR], ao[FASTM_MR], T[FASTM_MR];
        __m512 sa[FASTM_MR];
        _Pragma("GCC unroll 4") for (int r = 0; r < MR; r++) {
            const char *g = row0 + (size_t)r * rst + (size_t)gi * Q4_GROUP_BYTES;
            ae[r] = _mm512_load_si512(g);
            ao[r] = _mm512_load_si512(g + 64);
            sa[r] = _mm512_load_ps((const float *)(g + 128));
            T[r] = ZP ? _mm512_setzero_si512() : _mm512_load_si512(g + 192);
        }
        _Pragma("GCC unroll 8") for (int c = 0; c < NR; c++) {
            const char *d = dec + (size_t)c * dcs + (size_t)gi * FASTM_GROUP;
            __m512i lo = _mm512_load_si512(d), hi = _mm512_load_si512(d + 64);
            __m512 sbv = _mm512_load_ps((const float *)(d + 128));
            _Pragma("GCC unroll 4") for (int r = 0; r < MR; r++) {
                __m512i x = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(T[r], lo, ae[r]), hi, ao[r]);
                acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(x), _mm512_mul_ps(sa[r], sbv), acc[r][c]);
            }
        }
    }
    if (ZP) {
        __m512 zacc[FASTM_MR][FASTM_NR];
        _Pragma("GCC unroll 4") for (int r = 0; r < MR; r++)
            _Pragma("GCC unroll 8") for (int c = 0; c < NR; c++)
                zacc[r][c] = _mm512_setzero_ps();
        for (int64_t i = 0; i < (kb + 15) / 16; i++) {
            __m512 abv[FASTM_MR];
            _Pragma("GCC unroll 4") for (int r = 0; r < MR; r++)
                abv[r] = _mm512_load_ps(rab + (size_t)r * (rst / sizeof(float)) + 16 * i);
            _Pragma("GCC unroll 8") for (int c = 0; c < NR; c++) {
                __m512 w = _mm512_load_ps((const float *)(dec + (size_t)c * dcs + (size_t)ng * FASTM_GROUP) + 16 * i);
                _Pragma("GCC unroll 4") for (int r = 0; r < MR; r++)
                    zacc[r][c] = _mm512_fmadd_ps(abv[r], w, zacc[r][c]);
            }
        }
        _Pragma("GCC unroll 4") for (int r = 0; r < MR; r++)
            _Pragma("GCC unroll 8") for (int c = 0; c < NR; c++)
                acc[r][c] = _mm512_sub_ps(acc[r][c], zacc[r][c]);
    }
    _Pragma("GCC unroll 4") for (int r = 0; r < MR; r++)
        _Pragma("GCC unroll 8") for (int c = 0; c < NR; c++) {
            float s = _mm512_reduce_add_ps(acc[r][c]);
            out[r * ldo + c] = add ? out[r * ldo + c] + s : s;
        }
}

VNNI static void mnb4_fastm_vnni(const llm_mnb4_args *g, int64_t n0, int64_t n1) {
    int64_t kb = g->kb;
    size_t rst = llm_mnb4_row_bytes(kb);
    _Alignas(64) char dec[FASTM_NR * ((FASTM_MAX_KB / 4) * FASTM_GROUP + (FASTM_MAX_KB / 16) * 64)];
    for (int64_t n = n0; n < n1; n += FASTM_NR) {
        int nr = (int)sn_imin(FASTM_NR, n1 - n);
        /* deeper columns in chunks of FASTM_MAX_KB blocks, each chunk's sums
         * added to the last ones' */
        for (int64_t k0 = 0; k0 < kb; k0 += FASTM_MAX_KB) {
            int64_t kn = sn_imin(FASTM_MAX_KB, kb - k0);
            size_t dcs = fastm_dec_bytes(kn);
            for (int c = 0; c < nr; c++)
                fastm_decode(g->b + (size_t)(n + c) * (size_t)kb * 16 + 16 * k0, g->sb + (n + c) * kb + k0,
                             g->zp ? g->zp + (n + c) * g->zp_stride + k0 / 2 : NULL, kn, dec + (size_t)c * dcs);
            for (int64_t m = 0; m < g->M; m += FASTM_MR) {
                int mr = (int)sn_imin(FASTM_MR, g->M - m);
                const char *row0 = (const char *)g->rows + (size_t)m * rst + (size_t)(k0 / 4) * Q4_GROUP_BYTES;
                const float *rab = (const float *)((const char *)g->rows + (size_t)m * rst + q4_ab_at(kb)) + k0;
                float *y = g->y + m * g->ldy + n;
                bool zp = g->zp != NULL;
#define FT(R, C, Z) fastm_tile(R, C, Z, row0, rab, rst, dec, dcs, kn, y, g->ldy, k0 > 0)
#define FT_COLS(R, Z)            \
    switch (nr) {                \
    case 8: FT(R, 8, Z); break;  \
    case 7: FT(R, 7, Z); break;  \
    case 6: FT(R, 6, Z); break;  \
    case 5: FT(R, 5, Z); break;  \
    case 4: FT(R, 4, Z); break;  \
    case 3: FT(R, 3, Z); break;  \
    case 2: FT(R, 2, Z); break;  \
    default: FT(R, 1, Z); break; \
    }
                if (mr == 2 && zp) {
                    FT_COLS(2, true);
                } else if (mr == 2) {
                    FT_COLS(2, false);
                } else if (zp) {
                    FT_COLS(1, true);
                } else {
                    FT_COLS(1, false);
                }
#undef FT_COLS
#undef FT
            }
        }
        if (g->bias)
            for (int64_t m = 0; m < g->M; m++)
                for (int c = 0; c < nr; c++)
                    g->y[m * g->ldy + n + c] += g->bias[n + c];
    }
}
#endif

bool llm_mnb4_fast1_available(void) {
#ifdef MNB4_FAST1
    static int v = -1; /* idempotent: every thread computes the same value */
    if (v < 0)
        v = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
    return v;
#else
    return false;
#endif
}

/* The portable form of the two, and where there is no VNNI: the same
 * product on ROWS_Q4 rows, summed in double (per element, so it too is
 * the same whatever M). */
static void q4_own_order_ref(const llm_mnb4_args *g, int64_t n0, int64_t n1) {
    int64_t kb = g->kb;
    size_t rst = llm_mnb4_row_bytes(kb);
    for (int64_t m = 0; m < g->M; m++) {
        const char *row = (const char *)g->rows + (size_t)m * rst;
        for (int64_t n = n0; n < n1; n++) {
            const uint8_t *bcol = g->b + (size_t)n * (size_t)kb * 16;
            const uint8_t *zp = g->zp ? g->zp + n * g->zp_stride : NULL;
            double s = g->bias ? g->bias[n] : 0;
            for (int64_t b = 0; b < kb; b++) {
                const char *grp = row + (b / 4) * Q4_GROUP_BYTES;
                float sa = ((const float *)(grp + 128))[4 * (b % 4)];
                int64_t d = 0;
                for (int k = 0; k < 32; k++) {
                    int q = ((const int8_t *)grp)[(k & 1) * 64 + 16 * (b % 4) + k / 2];
                    d += (int64_t)q * (code4(bcol, b, k) - zp4(zp, b));
                }
                s += (double)sa * g->sb[n * kb + b] * (double)d;
            }
            g->y[m * g->ldy + n] = (float)s;
        }
    }
}

void llm_mnb4_fast1_cols(const llm_mnb4_args *g, int64_t n0, int64_t n1) {
#ifdef MNB4_FAST1
    if (llm_mnb4_fast1_available()) {
        mnb4_fast1_vnni(g, n0, n1);
        return;
    }
#endif
    q4_own_order_ref(g, n0, n1);
}

void llm_mnb4_fastm_cols(const llm_mnb4_args *g, int64_t n0, int64_t n1) {
#ifdef MNB4_FAST1
    if (llm_mnb4_fast1_available()) {
        if (g->M <= FASTR_MAX_M)
            mnb4_fastr_vnni(g, n0, n1);
        else
            mnb4_fastm_vnni(g, n0, n1);
        return;
    }
#endif
    q4_own_order_ref(g, n0, n1);
}

static void q4_prep_row(const float *a, int64_t K, char *row) {
    int64_t kb = (K + 31) / 32;
    memset(row, 0, q4_row_bytes(kb));
    int8_t nat[32];
    for (int64_t b = 0; b < kb; b++) {
        int64_t len = sn_imin(32, K - 32 * b);
        float sa = llm_q8_quantize(a + 32 * b, len, nat);
        memset(nat + len, 0, (size_t)(32 - len));
        int32_t codes = 0;
        for (int k = 0; k < 32; k++)
            codes += nat[k];
        ((float *)(row + q4_ab_at(kb)))[b] = sa * (float)codes;
        char *g = row + (b / 4) * Q4_GROUP_BYTES;
        int h = (int)(b % 4);
        int8_t *ev = (int8_t *)g + 16 * h, *od = (int8_t *)g + 64 + 16 * h;
        float *sal = (float *)(g + 128) + 4 * h;
        int32_t *sum = (int32_t *)(g + 192) + 4 * h;
        for (int i = 0; i < 16; i++) {
            ev[i] = nat[2 * i];
            od[i] = nat[2 * i + 1];
        }
        for (int j = 0; j < 4; j++) { /* lane j: byte positions 4j..4j+3 of evens and odds */
            int s = 0;
            for (int i = 4 * j; i < 4 * j + 4; i++)
                s += ev[i] + od[i];
            sal[j] = sa;
            sum[j] = -8 * s;
        }
    }
}

void llm_mnb4_prep_row(const float *a, int64_t K, int kind, void *row) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (kind == LLM_MNB4_ROWS_Q4 && sn_cpu_avx2_fma()) {
        q4_prep_row_avx2(a, K, row);
        return;
    }
#endif
    if (kind == LLM_MNB4_ROWS_Q4) {
        q4_prep_row(a, K, row);
        return;
    }
#if defined(__x86_64__) && defined(__GNUC__)
    if (sn_cpu_avx2_fma()) {
        mnb4_prep_row_avx2(a, K, kind, row);
        return;
    }
#endif
    llm_mnb4_prep_row_ref(a, K, kind, row);
}

void llm_mnb4_cols(const llm_mnb4_args *g, int64_t n0, int64_t n1) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (sn_cpu_avx2_fma()) {
        mnb4_cols_avx2(g, n0, n1);
        return;
    }
#endif
    llm_mnb4_cols_ref(g, n0, n1);
}
