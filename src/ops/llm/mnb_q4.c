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
 * four blocks, 192 bytes: the codes (128, q4_place), sa_b (4 floats), -8 x
 * each block's code sum (4 int32: what the default zero point takes off,
 * where a kernel's integer sums start), each block's code sum (4 int32:
 * times -z_b with zero points given in the model), -16 x the code sum (4
 * int32: where the panel kernel's sums start with zero points, its codes
 * offset by 16 - z_b). */
#define Q4_GROUP_BYTES 192
#define Q4_SA 128
#define Q4_T8 144
#define Q4_AS 160
#define Q4_T16 176
static size_t q4_row_bytes(int64_t kb) { return (size_t)((kb + 3) / 4) * Q4_GROUP_BYTES; }

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

size_t llm_mnb4_p16_bytes(int64_t N, int64_t kb, bool has_zp) {
    return (size_t)((N + 15) / 16) * (size_t)kb * llm_mnb4_p16_block(has_zp);
}

/* Block b of the panel of column n in B in panels. */
static inline const uint8_t *p16_at(const llm_mnb4_args *g, int64_t n, int64_t b) {
    return g->b + ((size_t)(n / 16) * (size_t)g->kb + (size_t)b) * llm_mnb4_p16_block(g->zp != NULL);
}

/* Unit j (bytes 4 j .. 4 j + 3) of block b of column n, in either layout. */
static inline const uint8_t *q4_unit(const llm_mnb4_args *g, int64_t n, int64_t b, int j) {
    if (g->tiled == LLM_MNB4_P16)
        return p16_at(g, n, b) + 64 * j + 4 * (n % 16);
    return g->b + ((size_t)n * (size_t)g->kb + (size_t)b) * 16 + 4 * j;
}

/* Block b's scale and zero point of column n, in either layout. */
static inline float q4_sb(const llm_mnb4_args *g, int64_t n, int64_t b) {
    float v;
    if (g->tiled != LLM_MNB4_P16)
        return g->sb[n * g->kb + b];
    memcpy(&v, p16_at(g, n, b) + 256 + 4 * (n % 16), 4);
    return v;
}
static inline int q4_z(const llm_mnb4_args *g, int64_t n, int64_t b) {
    if (!g->zp)
        return 8;
    if (g->tiled == LLM_MNB4_P16)
        return 16 - p16_at(g, n, b)[320 + n % 16];
    return (g->zp[n * g->zp_stride + (b >> 1)] >> ((b & 1) * 4)) & 15;
}

static bool p16_pack_vnni(const uint8_t *b, const float *sb, int64_t N, int64_t kb, int64_t n, uint8_t *p, size_t bs);

void llm_mnb4_p16_pack(const uint8_t *b, const float *sb, const uint8_t *zp, int64_t zp_stride, int64_t N, int64_t kb,
                       uint8_t *dst, void (*done)(void *ctx, const void *p, size_t n), void *ctx) {
    const size_t bs = llm_mnb4_p16_block(zp != NULL);
    for (int64_t n = 0; n < N; n += 16) {
        int64_t w = sn_imin(16, N - n);
        uint8_t *p = dst + (size_t)(n / 16) * (size_t)kb * bs;
        memset(p, 0, (size_t)kb * bs);
        for (int64_t blk = 0; blk < kb && zp; blk++)
            for (int64_t c = 0; c < 16; c++)
                p[(size_t)blk * bs + 320 + c] = c < w ? (uint8_t)(16 - ((zp[(n + c) * zp_stride + (blk >> 1)] >>
                                                                         ((blk & 1) * 4)) & 15))
                                                      : 16;
        if (w == 16 && p16_pack_vnni(b, sb, N, kb, n, p, bs))
            goto packed;
        for (int64_t blk = 0; blk < kb; blk++) {
            uint8_t *d = p + (size_t)blk * bs;
            for (int64_t c = 0; c < w; c++) {
                for (int j = 0; j < 4; j++)
                    memcpy(d + 64 * j + 4 * c, b + ((n + c) * kb + blk) * 16 + 4 * j, 4);
                memcpy(d + 256 + 4 * c, sb + (n + c) * kb + blk, 4);
            }
        }
    packed:
        if (done) {
            done(ctx, b + n * kb * 16, (size_t)(w * kb * 16));
            done(ctx, sb + n * kb, sizeof *sb * (size_t)(w * kb));
            if (zp)
                done(ctx, zp + n * zp_stride, (size_t)(w * zp_stride));
        }
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
    for (int64_t b = 0; b < kb; b++) {
        __m256i nat;
        float s = q8_block_at(a, K, b, &nat);
        /* [evens | odds]: code 2 t at t, 2 t + 1 at 16 + t */
        _Alignas(32) int8_t eo[32];
        _mm256_store_si256((__m256i *)eo, _mm256_permute4x64_epi64(_mm256_shuffle_epi8(nat, evod), 0xD8));
        __m256i quads = _mm256_madd_epi16(_mm256_maddubs_epi16(one8, nat), one16);
        __m128i t = _mm_add_epi32(_mm256_castsi256_si128(quads), _mm256_extracti128_si256(quads, 1));
        t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4E));
        t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1));
        int32_t sum = _mm_cvtsi128_si32(t);
        char *g = row + (b / 4) * Q4_GROUP_BYTES;
        int h = (int)(b % 4);
        for (int j = 0; j < 4; j++) { /* q4_place's positions, four codes at a time */
            memcpy(g + 32 * j + 4 * h, eo + 4 * j, 4);
            memcpy(g + 32 * j + 16 + 4 * h, eo + 16 + 4 * j, 4);
        }
        ((float *)(g + Q4_SA))[h] = s;
        ((int32_t *)(g + Q4_T8))[h] = -8 * sum;
        ((int32_t *)(g + Q4_AS))[h] = sum;
        ((int32_t *)(g + Q4_T16))[h] = -16 * sum;
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
 * ORT's against float64, not equal to it). The kernels read ROWS_Q4 rows
 * and B in its original [N, kb, 16] layout, and give every output element
 * the same bits however many rows the call has (a prefill's last row and a
 * decode step, one sequence or a batch of them), which is what the scalar
 * form below computes too:
 *
 *  - per block b, s_b = sum_k a_k (q_k - z_b), exact in the integers;
 *  - acc[b % 4] = fma(float(s_b), sa_b x sb_b, acc[b % 4]), the four
 *    accumulators from +0, block after block (the blocks past kb up to a
 *    multiple of four count as s = 0 with a scale of 0);
 *  - y = (acc[0] + acc[1]) + (acc[2] + acc[3]), then + bias.
 *
 * A zmm holds four columns by four blocks (lane 4 c + b): B's bytes of a
 * group of four blocks of four columns are transposed once into eight
 * registers of nibbles (low and high, per 4-byte unit of a block), each
 * applied to every row by one vpdpbusd against the row's codes broadcast to
 * the four columns; so a block's 32 products land in one int32 lane, and
 * the float work is one convert, multiply and fused add per lane per four
 * blocks (the order before, per 8-code lane, took four times as many:
 * TinyLlama-class prefill and 16-row decode steps were bound by them).
 * One row takes q4s (below: B as loaded, the integer sums transposed);
 * two to four rows take each decoded group from registers; more rows
 * take panels of sixteen columns (q4p, below) decoded once into a buffer
 * on the stack and applied to the rows four at a time. B is read with plain unaligned loads but for a short
 * last group: a masked load that crosses a cache line or a page is slow,
 * and the model's weights sit at any offset of the file (the masked loads
 * alone made SmolLM2's one-sequence decode 1.2x slower than the order
 * before; with plain ones it is 1.5x faster, 2.6 against 4.0 ms a token,
 * and a 16-row step 1.25x, `snug bench --slots 16`). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define MNB4_FAST1 1
/* Each column's stream fetched 4 KiB ahead into L2 (TinyLlama decode, 2
 * threads: T2 4.6% faster than T0, NTA 27% slower; 256 B ahead 11% slower,
 * 8 KiB no faster) */
#define FAST1_PF 4096
#define FAST1_HINT _MM_HINT_T2
#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define VNNI_INLINE __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"), always_inline)) static inline
#define Q4V_MR 4        /* rows of the column-quad form, and per tile of the panel form */

/* The 16 bytes at p in every 128-bit lane. */
VNNI_INLINE __m512i bc128(const void *p) { return _mm512_broadcast_i32x4(_mm_load_si128((const __m128i *)p)); }

/* Group gi of columns n .. n + nc - 1 (nc <= 4; the others zero): w[2 j]
 * and w[2 j + 1] the low and high nibbles of each block's 4-byte unit j,
 * lane 4 c + b; sb_b of each lane; -z_b of each lane (ZP). */
VNNI_INLINE void q4v_decode(const llm_mnb4_args *g, int64_t n, int nc, int64_t gi, bool ZP, __m512i w[8], __m512 *sb,
                            __m512i *zn) {
    const int64_t kb = g->kb;
    const int rb = (int)sn_imin(4, kb - 4 * gi);
    const __mmask64 m = rb == 4 ? ~(__mmask64)0 : (((__mmask64)1 << (16 * rb)) - 1);
    const __mmask8 m4 = (__mmask8)((1u << rb) - 1);
    /* Z_c dword 4 j + b = X_c dword 4 b + j (X_c: column c's 64 bytes) */
    const __m512i tr = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    __m512i Z[4];
    __m128 s4[4];
    uint64_t zb = 0;
    _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {
        if (c < nc) {
            const uint8_t *col = g->b + (size_t)(n + c) * (size_t)kb * 16 + 64 * gi;
            _mm_prefetch((const char *)col + FAST1_PF, FAST1_HINT); /* B streams from memory */
            Z[c] = _mm512_permutexvar_epi32(tr, rb == 4 ? _mm512_loadu_si512(col) : _mm512_maskz_loadu_epi8(m, col));
            s4[c] = rb == 4 ? _mm_loadu_ps(g->sb + (n + c) * kb + 4 * gi) : _mm_maskz_loadu_ps(m4, g->sb + (n + c) * kb + 4 * gi);
            if (ZP) {
                const uint8_t *z = g->zp + (n + c) * g->zp_stride + 2 * gi;
                uint64_t v = z[0];
                if (2 * gi + 1 < g->zp_stride)
                    v |= (uint64_t)z[1] << 8;
                zb |= v << (16 * c);
            }
        } else {
            Z[c] = _mm512_setzero_si512();
            s4[c] = _mm_setzero_ps();
        }
    }
    /* W_j lane 4 c + b = Z_c lane j: a transpose of 128-bit lanes */
    __m512i T0 = _mm512_shuffle_i32x4(Z[0], Z[1], 0x44), T1 = _mm512_shuffle_i32x4(Z[0], Z[1], 0xEE);
    __m512i T2 = _mm512_shuffle_i32x4(Z[2], Z[3], 0x44), T3 = _mm512_shuffle_i32x4(Z[2], Z[3], 0xEE);
    __m512i W[4] = {_mm512_shuffle_i32x4(T0, T2, 0x88), _mm512_shuffle_i32x4(T0, T2, 0xDD),
                    _mm512_shuffle_i32x4(T1, T3, 0x88), _mm512_shuffle_i32x4(T1, T3, 0xDD)};
    const __m512i m0f = _mm512_set1_epi8(15);
    _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
        w[2 * j] = _mm512_and_si512(W[j], m0f);
        w[2 * j + 1] = _mm512_and_si512(_mm512_srli_epi16(W[j], 4), m0f);
    }
    __m512 v = _mm512_castps128_ps512(s4[0]);
    v = _mm512_insertf32x4(v, s4[1], 1);
    v = _mm512_insertf32x4(v, s4[2], 2);
    *sb = _mm512_insertf32x4(v, s4[3], 3);
    if (ZP) { /* byte 2 c: z of blocks 0 (low nibble) and 1, byte 2 c + 1: blocks 2 and 3 */
        __m128i x = _mm_cvtsi64_si128((long long)zb), f = _mm_set1_epi8(15);
        __m128i z = _mm_unpacklo_epi8(_mm_and_si128(x, f), _mm_and_si128(_mm_srli_epi16(x, 4), f));
        *zn = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_cvtepu8_epi32(z));
    }
}

/* One row's group (grp) against a decoded group: acc + float(s) x (sa x sb). */
VNNI_INLINE __m512 q4v_row(const char *grp, const __m512i w[8], __m512 sb, __m512i zn, bool ZP, __m512 acc) {
    __m512i s = ZP ? _mm512_mullo_epi32(zn, bc128(grp + Q4_AS)) : bc128(grp + Q4_T8);
    _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
        s = _mm512_dpbusd_epi32(s, w[2 * j], bc128(grp + 32 * j));
        s = _mm512_dpbusd_epi32(s, w[2 * j + 1], bc128(grp + 32 * j + 16));
    }
    __m512 scale = _mm512_mul_ps(_mm512_castsi512_ps(bc128(grp + Q4_SA)), sb);
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), scale, acc);
}

/* (acc0 + acc1) + (acc2 + acc3) of each column (lanes 4 c .. 4 c + 3), + bias, into y[0..nc). */
VNNI_INLINE void q4v_out(__m512 acc, int nc, const float *bias, float *y) {
    __m512 v = _mm512_add_ps(acc, _mm512_permute_ps(acc, 0xB1));
    v = _mm512_add_ps(v, _mm512_permute_ps(v, 0x4E));
    __m128 r = _mm512_castps512_ps128(
        _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), v));
    __mmask8 mc = (__mmask8)((1u << nc) - 1);
    if (bias)
        r = _mm_add_ps(r, _mm_maskz_loadu_ps(mc, bias));
    _mm_mask_storeu_ps(y, mc, r);
}

/* MR rows (from rows, rst apart) x the column quad at n, each group decoded
 * in registers. */
VNNI_INLINE void q4v_tile(const int MR, const bool ZP, const llm_mnb4_args *g, const char *rows, size_t rst,
                          int64_t n, int nc, float *y) {
    const int64_t ng = (g->kb + 3) / 4;
    __m512 acc[Q4V_MR];
    _Pragma("GCC unroll 4") for (int r = 0; r < MR; r++)
        acc[r] = _mm512_setzero_ps();
    for (int64_t gi = 0; gi < ng; gi++) {
        __m512i w[8], zn = _mm512_setzero_si512();
        __m512 sb;
        q4v_decode(g, n, nc, gi, ZP, w, &sb, &zn);
        _Pragma("GCC unroll 4") for (int r = 0; r < MR; r++)
            acc[r] = q4v_row(rows + (size_t)r * rst + (size_t)gi * Q4_GROUP_BYTES, w, sb, zn, ZP, acc[r]);
    }
    _Pragma("GCC unroll 4") for (int r = 0; r < MR; r++)
        q4v_out(acc[r], nc, g->bias ? g->bias + n : NULL, y + r * g->ldy);
}

/* T(R, Z) with the row count mr (1..4) and zero points zp as constants, so
 * each tile kernel is compiled for every combination. */
#define TILE_CALL(T, mr, zp)                                                                      \
    do {                                                                                          \
        switch ((mr) * 2 + (zp)) {                                                                \
        case 8: T(4, false); break;                                                               \
        case 9: T(4, true); break;                                                                \
        case 6: T(3, false); break;                                                               \
        case 7: T(3, true); break;                                                                \
        case 4: T(2, false); break;                                                               \
        case 5: T(2, true); break;                                                                \
        case 3: T(1, true); break;                                                                \
        default: T(1, false); break;                                                              \
        }                                                                                         \
    } while (0)

/* ---- more rows: panels of sixteen columns --------------------------------
 * A zmm holds sixteen columns of one block (lane c: column n + c). B's
 * bytes of a block of the panel are transposed once into eight registers of
 * nibbles (unit j of the block's 16 bytes, low and high), and each row's
 * 4-byte unit of codes is broadcast from the row as it lies (ROWS_Q4: block
 * 4 gi + h's unit at 32 j + 16 hi + 4 h of its group) into one vpdpbusd
 * per unit, so a block's 32 products land in one lane per column; then per
 * row and block one convert, multiply (sa_b x sb_b, both broadcast) and
 * fused add into acc[b % 4]: every element gets the operations of the
 * order above, in the same order, and the sums come out one column per lane
 * (no reduction across lanes but (acc0 + acc1) + (acc2 + acc3)). The float
 * work per product is that of the column quads; what the panel saves is
 * the decode (once per panel for all rows, by 16 x 16 transposes of B's
 * 64-byte runs, the scales and the zero points instead of per quad and
 * row tile) and the reductions of the quads' lanes; the row tiles of four
 * keep sixteen accumulators and eight nibble vectors in registers, and the
 * two halves of a block's units sum in two chains. SmolLM2's products at
 * 16 rows, one core, alone: 190 -> 215-240 GMAC/s; in the model a step's
 * MatMulNBits 9.3 -> 7.3 ms (`snug bench --slots 16 --ops`). Panels deeper than Q4P_KB blocks are done Q4P_KB blocks at a
 * time, the rows' accumulators kept between them in a buffer on the stack,
 * Q4P_MC rows at a time. */
#define Q4P_DEC 640 /* a decoded block of a panel: 8 code vectors, sb, 16 - z in each byte of a lane */
#define Q4P_KB 64   /* blocks of a panel decoded at a time (40 KiB on the stack) */
#define Q4P_MC 64   /* rows per pass of a deeper panel (their accumulators: 16 KiB) */
/* B in panels: up to this many rows decode each block in registers, every
 * tile of four rows again, instead of sharing a panel decoded once into a
 * buffer (q4p_decode). The decode's ands, shifts and adds then issue beside
 * the products instead of as a pass of their own, bound by its stores: a
 * 16-slot SmolLM2 decode step 1.061x and 1.066x the tokens a second, where
 * one sequence (the same code in both builds) read 1.032x and 1.037x, so
 * ~3%; 32-token prompts 1.014x, 64-token prompts 0.928x (more tiles decode
 * each block than the products hide), 128-token prompts 0.939x
 * (bench/ab_builds --rounds 6 -- --slots 16 --prompt 26 --gen 64; --prompt
 * 32, 64, 128 --gen 4; AMD EPYC VM). */
#define Q4P_DIRECT_ROWS 32
/* The next panel's B, scales and zero points are fetched into L2, not L1
 * (B in panels: by the first row tile, q4p_tile; else while this one is
 * decoded): on an AMD EPYC (Zen 4) VM a 16-slot SmolLM2
 * step's MatMulNBits took 16.0, 16.4, 21.3 ms with _MM_HINT_T0 and 11.8,
 * 13.6, 14.8 with this (`snug bench --slots 16 --prompt 40 --gen 64 --ops`,
 * builds b0a5035 and 215aefe alternated; nothing else in MatMulNBits
 * changed between them). Two panels ahead was no faster. */
#define Q4P_PF_HINT _MM_HINT_T1

/* x[e] element i <- x[i] element e: a transpose of 16 x 16 32-bit elements. */
VNNI_INLINE void tr16(__m512i x[16]);
/* A full panel (16 columns at n) of codes and scales into p (llm_mnb4_p16_pack). */
/* B's blocks blk .. blk + rb - 1 (rb <= 4) of the 16 columns at n (those
 * from nc on zero), transposed: X[4 h + j] unit j of block blk + h, lane c
 * column n + c. Masked loads only for a short group (one that crosses a
 * line or a page is slow). */
VNNI_INLINE void tr_codes(const uint8_t *b, int64_t kb, int64_t n, int nc, int64_t blk, int rb, __m512i X[16]) {
    const __mmask64 m = rb == 4 ? ~(__mmask64)0 : (((__mmask64)1 << (16 * rb)) - 1);
    _Pragma("GCC unroll 16") for (int c = 0; c < 16; c++) {
        const uint8_t *col = b + ((size_t)(n + c) * (size_t)kb + (size_t)blk) * 16;
        X[c] = c >= nc ? _mm512_setzero_si512() : rb == 4 ? _mm512_loadu_si512(col) : _mm512_maskz_loadu_epi8(m, col);
    }
    tr16(X);
}

/* The scales of blocks blk .. blk + rb - 1 (rb <= 16), the same way: S[h]
 * block blk + h, lane c. */
VNNI_INLINE void tr_scales(const float *sb, int64_t kb, int64_t n, int nc, int64_t blk, int rb, __m512i S[16]) {
    const __mmask16 m = (__mmask16)((1u << rb) - 1);
    _Pragma("GCC unroll 16") for (int c = 0; c < 16; c++) {
        const float *sc = sb + (n + c) * kb + blk;
        S[c] = c >= nc ? _mm512_setzero_si512()
                       : _mm512_castps_si512(rb == 16 ? _mm512_loadu_ps(sc) : _mm512_maskz_loadu_ps(m, sc));
    }
    tr16(S);
}

VNNI static void p16_pack_panel(const uint8_t *b, const float *sb, int64_t kb, int64_t n, uint8_t *p, size_t bs) {
    __m512i X[16];
    for (int64_t blk = 0; blk < kb; blk += 4) {
        const int rb = (int)sn_imin(4, kb - blk);
        tr_codes(b, kb, n, 16, blk, rb, X);
        for (int h = 0; h < rb; h++)
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++)
                _mm512_storeu_si512(p + (size_t)(blk + h) * bs + 64 * j, X[4 * h + j]);
    }
    for (int64_t blk = 0; blk < kb; blk += 16) {
        const int rb = (int)sn_imin(16, kb - blk);
        tr_scales(sb, kb, n, 16, blk, rb, X);
        for (int h = 0; h < rb; h++)
            _mm512_storeu_si512(p + (size_t)(blk + h) * bs + 256, X[h]);
    }
}

VNNI_INLINE void tr16(__m512i x[16]) {
    __m512i t[16];
    _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(x[2 * i], x[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(x[2 * i], x[2 * i + 1]);
    }
    /* x[4 i + k], 128-bit lane L: element 4 L + k of rows 4 i .. 4 i + 3 */
    _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {
        x[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        x[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        x[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        x[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
        __m512i t0 = _mm512_shuffle_i32x4(x[k], x[4 + k], 0x44), t1 = _mm512_shuffle_i32x4(x[k], x[4 + k], 0xEE);
        __m512i t2 = _mm512_shuffle_i32x4(x[8 + k], x[12 + k], 0x44), t3 = _mm512_shuffle_i32x4(x[8 + k], x[12 + k], 0xEE);
        t[k] = _mm512_shuffle_i32x4(t0, t2, 0x88);
        t[4 + k] = _mm512_shuffle_i32x4(t0, t2, 0xDD);
        t[8 + k] = _mm512_shuffle_i32x4(t1, t3, 0x88);
        t[12 + k] = _mm512_shuffle_i32x4(t1, t3, 0xDD);
    }
    _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++)
        x[i] = t[i];
}

/* llm_mnb4_p16_pack's codes and scales of a whole panel (at n) by the
 * decode's transposes: the packing of a model's weights at load is then a
 * fraction of its scalar time. False without VNNI (the caller packs). */
static bool p16_pack_vnni(const uint8_t *b, const float *sb, int64_t N, int64_t kb, int64_t n, uint8_t *p, size_t bs) {
    (void)N;
    if (!llm_mnb4_fast1_available())
        return false;
    p16_pack_panel(b, sb, kb, n, p, bs);
    return true;
}

/* The codes' offset 16 - z of a block in panels: the byte of lane c in its four. */
VNNI_INLINE __m512i p16_off(const uint8_t *blk) {
    return _mm512_mullo_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + 320))),
                              _mm512_set1_epi32(0x01010101));
}

/* Blocks [b0, b1) of the panel of columns n .. n + nc - 1 (nc <= 16; the
 * others zero) into dec (b0 a multiple of 16): per sixteen blocks each
 * column's scales and zero points, per four its 64 bytes of codes (plus
 * 16 - z with zero points), transposed (tr_scales, tr_codes); the next
 * panel's B and sb fetched meanwhile. B in panels: each block's codes and
 * scales as they lie, no transposes. */
VNNI static void q4p_decode(const llm_mnb4_args *g, int64_t n, int nc, int64_t b0, int64_t b1, char *dec) {
    const int64_t kb = g->kb;
    const __m512i m0f = _mm512_set1_epi8(15);
    const int pfc = (int)sn_imin(16, g->N - (n + 16)); /* columns of the next panel */
    if (g->tiled == LLM_MNB4_P16) { /* B in panels: as the transposes below leave it; the row tiles
                                     * fetch the next panel (q4p_tile), not this */
        const size_t bs = llm_mnb4_p16_block(g->zp != NULL);
        const uint8_t *pan = p16_at(g, n, 0);
        for (int64_t b = b0; b < b1; b++) {
            const uint8_t *src = pan + (size_t)b * bs;
            char *d = dec + (size_t)(b - b0) * Q4P_DEC;
            const __m512i off = g->zp ? p16_off(src) : _mm512_setzero_si512();
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
                const __m512i x = _mm512_loadu_si512(src + 64 * j);
                _mm512_store_si512(d + 128 * j, _mm512_add_epi8(_mm512_and_si512(x, m0f), off));
                _mm512_store_si512(d + 128 * j + 64, _mm512_add_epi8(_mm512_and_si512(_mm512_srli_epi16(x, 4), m0f), off));
            }
            _mm512_store_si512(d + 512, _mm512_loadu_si512(src + 256));
        }
        return;
    }
    /* scales and zero points first: the codes are offset by the zero points */
    for (int64_t b = b0; b < b1; b += 16) {
        const int rb = (int)sn_imin(16, b1 - b);
        __m512i S[16];
        tr_scales(g->sb, kb, n, nc, b, rb, S); /* S[h]: sb of block b + h, lane c */
        for (int h = 0; h < rb; h++)
            _mm512_store_si512(dec + (size_t)(b + h - b0) * Q4P_DEC + 512, S[h]);
        if (!g->zp)
            continue;
        /* zero points: the column's bytes of blocks b .. b + 15 (two a byte, low nibble first) */
        const int nz = (rb + 1) / 2;
        const __mmask16 mz = (__mmask16)((1u << nz) - 1);
        const __m128i f = _mm_set1_epi8(15);
        _Pragma("GCC unroll 16") for (int c = 0; c < 16; c++) {
            if (c >= nc) {
                S[c] = _mm512_setzero_si512();
                continue;
            }
            const uint8_t *z = g->zp + (n + c) * g->zp_stride + b / 2;
            __m128i x = nz == 8 ? _mm_loadl_epi64((const __m128i *)z) : _mm_maskz_loadu_epi8(mz, z);
            __m128i zz = _mm_unpacklo_epi8(_mm_and_si128(x, f), _mm_and_si128(_mm_srli_epi16(x, 4), f));
            S[c] = _mm512_cvtepu8_epi32(zz);
        }
        tr16(S); /* S[h]: z of block b + h, lane c; 16 - z in each of the lane's bytes */
        const __m512i k16 = _mm512_set1_epi32(16), rep4 = _mm512_set1_epi32(0x01010101);
        for (int h = 0; h < rb; h++)
            _mm512_store_si512(dec + (size_t)(b + h - b0) * Q4P_DEC + 576,
                               _mm512_mullo_epi32(_mm512_sub_epi32(k16, S[h]), rep4));
    }
    for (int64_t b = b0; b < b1; b += 4) {
        const int rb = (int)sn_imin(4, b1 - b);
        for (int c = 0; c < pfc; c++) /* each of the next panel's columns, a line a group */
            _mm_prefetch((const char *)(g->b + ((size_t)(n + 16 + c) * (size_t)kb + (size_t)b) * 16), Q4P_PF_HINT);
        if (((b - b0) & 15) == 0)
            for (int c = 0; c < pfc; c++) {
                _mm_prefetch((const char *)(g->sb + (n + 16 + c) * kb + b), Q4P_PF_HINT);
                if (g->zp)
                    _mm_prefetch((const char *)(g->zp + (n + 16 + c) * g->zp_stride + b / 2), Q4P_PF_HINT);
            }
        __m512i X[16];
        tr_codes(g->b, kb, n, nc, b, rb, X); /* X[4 h + j]: unit j of block b + h, lane c */
        for (int h = 0; h < rb; h++) {
            char *d = dec + (size_t)(b + h - b0) * Q4P_DEC;
            const __m512i off = g->zp ? _mm512_load_si512(d + 576) : _mm512_setzero_si512();
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
                _mm512_store_si512(d + 128 * j, _mm512_add_epi8(_mm512_and_si512(X[4 * h + j], m0f), off));
                _mm512_store_si512(d + 128 * j + 64,
                                   _mm512_add_epi8(_mm512_and_si512(_mm512_srli_epi16(X[4 * h + j], 4), m0f), off));
            }
        }
    }
}

/* Block 4 gi + h (decoded at d, or with src, B in panels, decoded here) for
 * MR rows: acc[r][h] += float(s) x (sa x sb). The rows' products go
 * interleaved (each unit of B against every row, two chains a row), so
 * that consecutive vpdpbusd do not wait on each other (each row's chain in
 * turn was latency-bound; one chain a row is slower still). */
VNNI_INLINE void q4p_blk(const int MR, const int h, const bool ZP, const char *rows, size_t rst, int64_t gi,
                         const char *d, const uint8_t *src, __m512 acc[Q4V_MR][4]) {
    __m512i s[Q4V_MR], t[Q4V_MR];
    const char *grp[Q4V_MR];
    _Pragma("GCC unroll 4") for (int r = 0; r < MR; r++) {
        grp[r] = rows + (size_t)r * rst + (size_t)gi * Q4_GROUP_BYTES;
        /* with zero points the codes are offset by 16 - z (0..31, no sign), so the sum starts at
         * -16 x the row's code sum: the same integer as -z x the code sum plus the codes' products */
        s[r] = _mm512_set1_epi32(*(const int32_t *)(grp[r] + (ZP ? Q4_T16 : Q4_T8) + 4 * h));
        t[r] = _mm512_setzero_si512(); /* the integer sum is exact in any order */
    }
    const __m512i m0f = _mm512_set1_epi8(15), off = ZP && src ? p16_off(src) : _mm512_setzero_si512();
    _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
        __m512i w0, w1;
        if (src) { /* up to Q4P_DIRECT_ROWS rows: the block's codes from B in panels, in registers */
            const __m512i x = _mm512_loadu_si512(src + 64 * j);
            w0 = _mm512_add_epi8(_mm512_and_si512(x, m0f), off);
            w1 = _mm512_add_epi8(_mm512_and_si512(_mm512_srli_epi16(x, 4), m0f), off);
        } else {
            w0 = _mm512_load_si512(d + 128 * j);
            w1 = _mm512_load_si512(d + 128 * j + 64);
        }
        _Pragma("GCC unroll 4") for (int r = 0; r < MR; r++) {
            s[r] = _mm512_dpbusd_epi32(s[r], w0, _mm512_set1_epi32(*(const int32_t *)(grp[r] + 32 * j + 4 * h)));
            t[r] = _mm512_dpbusd_epi32(t[r], w1, _mm512_set1_epi32(*(const int32_t *)(grp[r] + 32 * j + 16 + 4 * h)));
        }
    }
    const __m512 sb = src ? _mm512_loadu_ps((const float *)(src + 256)) : _mm512_load_ps((const float *)(d + 512));
    _Pragma("GCC unroll 4") for (int r = 0; r < MR; r++) {
        __m512 scale = _mm512_mul_ps(_mm512_set1_ps(*(const float *)(grp[r] + Q4_SA + 4 * h)), sb);
        acc[r][h] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s[r], t[r])), scale, acc[r][h]);
    }
}

/* Blocks [b, b + nb) of the panel at pf (blocks of bs bytes) fetched into L2. */
VNNI_INLINE void q4p_fetch(const char *pf, int64_t b, int64_t nb, size_t bs) {
    for (size_t i = 0; i < (size_t)nb * bs; i += 64)
        _mm_prefetch(pf + (size_t)b * bs + i, Q4P_PF_HINT);
}

/* MR rows x blocks [b0, b1) of the panel at n (b0 a multiple of 4; dec
 * holds them from b0). The accumulators start from zero (b0 = 0) or from
 * ab, and go back to ab (b1 < kb) or, summed, plus the bias, into y. */
VNNI_INLINE void q4p_tile(const int MR, const bool ZP, const bool DIRECT, const llm_mnb4_args *g, const char *rows,
                          size_t rst, int64_t n, int nc, int64_t b0, int64_t b1, const char *dec, const uint8_t *pan,
                          float *ab, float *y, const char *npf) {
    const size_t bs = llm_mnb4_p16_block(ZP);
    __m512 acc[Q4V_MR][4];
    _Pragma("GCC unroll 4") for (int r = 0; r < MR; r++)
        _Pragma("GCC unroll 4") for (int h = 0; h < 4; h++)
            acc[r][h] = b0 ? _mm512_load_ps(ab + 64 * r + 16 * h) : _mm512_setzero_ps();
    int64_t gi = b0 / 4;
    /* The first row tile (npf) fetches the next panel, a group of four blocks between products, so its
     * lines go out a few at a time as this panel's are reached. Rows decoding B here (DIRECT): for three
     * or four rows alone, SmolLM2 decode at 4 sequences a step, MatMulNBits 6.6, 6.9 -> 5.4, 5.1 ms; 3
     * sequences 5.1, 5.3 -> 4.5, 4.3 (`snug bench --slots 4 --ops`, AMD EPYC VM, alternated); one and
     * two rows are bound by memory bandwidth and read B as it lies: one row was slower with this (3.6
     * -> 4.2 ms a token), two no faster. Rows sharing a decoded panel: fetched all at once while this
     * panel was decoded (as before), the decode's own loads queued behind them: in a 16-slot SmolLM2
     * step q4p_decode had 0.24x the samples of the products (mnb4_q4p_vnni), then 0.14x (perf record
     * of `snug bench --slots 16 --prompt 26 --gen 64`, AMD EPYC VM) */
    const char *pf = !DIRECT || MR > 2 ? npf : NULL;
    for (; 4 * gi + 4 <= b1; gi++) {
        if (pf)
            q4p_fetch(pf, 4 * gi, 4, bs);
        const char *d = dec + (size_t)(4 * gi - b0) * Q4P_DEC;
        q4p_blk(MR, 0, ZP, rows, rst, gi, d, DIRECT ? pan + (size_t)(4 * gi + 0) * bs : NULL, acc);
        q4p_blk(MR, 1, ZP, rows, rst, gi, d + Q4P_DEC, DIRECT ? pan + (size_t)(4 * gi + 1) * bs : NULL, acc);
        q4p_blk(MR, 2, ZP, rows, rst, gi, d + 2 * Q4P_DEC, DIRECT ? pan + (size_t)(4 * gi + 2) * bs : NULL, acc);
        q4p_blk(MR, 3, ZP, rows, rst, gi, d + 3 * Q4P_DEC, DIRECT ? pan + (size_t)(4 * gi + 3) * bs : NULL, acc);
    }
    const int rem = (int)(b1 - 4 * gi); /* a short last group: its missing blocks add nothing */
    const char *d = dec + (size_t)(4 * gi - b0) * Q4P_DEC;
    if (pf && rem > 0)
        q4p_fetch(pf, 4 * gi, rem, bs);
    if (rem > 0)
        q4p_blk(MR, 0, ZP, rows, rst, gi, d, DIRECT ? pan + (size_t)(4 * gi + 0) * bs : NULL, acc);
    if (rem > 1)
        q4p_blk(MR, 1, ZP, rows, rst, gi, d + Q4P_DEC, DIRECT ? pan + (size_t)(4 * gi + 1) * bs : NULL, acc);
    if (rem > 2)
        q4p_blk(MR, 2, ZP, rows, rst, gi, d + 2 * Q4P_DEC, DIRECT ? pan + (size_t)(4 * gi + 2) * bs : NULL, acc);
    if (b1 < g->kb) {
        _Pragma("GCC unroll 4") for (int r = 0; r < MR; r++)
            _Pragma("GCC unroll 4") for (int h = 0; h < 4; h++)
                _mm512_store_ps(ab + 64 * r + 16 * h, acc[r][h]);
        return;
    }
    const __mmask16 mc = (__mmask16)((1u << nc) - 1);
    const __m512 bias = g->bias ? _mm512_maskz_loadu_ps(mc, g->bias + n) : _mm512_setzero_ps();
    _Pragma("GCC unroll 4") for (int r = 0; r < MR; r++) {
        __m512 v = _mm512_add_ps(_mm512_add_ps(acc[r][0], acc[r][1]), _mm512_add_ps(acc[r][2], acc[r][3]));
        if (g->bias)
            v = _mm512_add_ps(v, bias);
        _mm512_mask_storeu_ps(y + r * g->ldy, mc, v);
    }
}

static void q4_own_order_ref(const llm_mnb4_args *g, int64_t n0, int64_t n1);

VNNI static void mnb4_q4p_vnni(const llm_mnb4_args *g, int64_t n0, int64_t n1) {
    const size_t rst = llm_mnb4_row_bytes(g->kb);
    const bool zp = g->zp != NULL, p16 = g->tiled == LLM_MNB4_P16;
    /* B in panels: up to Q4P_DIRECT_ROWS rows decode each block in registers; more share a decoded panel */
    const bool direct = p16 && g->M <= Q4P_DIRECT_ROWS;
    if (p16 && n0 % 16) { /* ranges start at a panel (the executor's units are 16 columns) */
        const int64_t e = sn_imin(n1, (n0 / 16 + 1) * 16);
        q4_own_order_ref(g, n0, e);
        n0 = e;
    }
    const int64_t mstep = g->kb > Q4P_KB ? Q4P_MC : g->M;
    _Alignas(64) char dec[Q4P_KB * Q4P_DEC];
    _Alignas(64) float ab[Q4P_MC * 64];
    for (int64_t n = n0; n < n1; n += 16) {
        const int nc = (int)sn_imin(16, n1 - n);
        const uint8_t *pan = p16 ? p16_at(g, n, 0) : NULL;
        for (int64_t m0 = 0; m0 < g->M; m0 += mstep) {
            const int64_t m1 = sn_imin(g->M, m0 + mstep);
            for (int64_t b0 = 0; b0 < g->kb; b0 += Q4P_KB) {
                const int64_t b1 = sn_imin(g->kb, b0 + Q4P_KB);
                if (!direct) /* more rows than Q4P_DIRECT_ROWS: the panel decoded once, for all */
                    q4p_decode(g, n, nc, b0, b1, dec);
                /* the next panel, fetched by the first pass's row tiles (q4p_tile) */
                const char *npf = p16 && m0 == 0 && n + 16 < g->N
                                      ? (const char *)pan + (size_t)g->kb * llm_mnb4_p16_block(zp)
                                      : NULL;
                for (int64_t m = m0; m < m1; m += Q4V_MR) {
                    const int mr = (int)sn_imin(Q4V_MR, m1 - m);
                    const char *rows = (const char *)g->rows + (size_t)m * rst;
                    float *a = ab + 64 * (m - m0), *y = g->y + m * g->ldy + n;
#define PT(R, Z) q4p_tile(R, Z, false, g, rows, rst, n, nc, b0, b1, dec, NULL, a, y, m == m0 ? npf : NULL)
#define PTD(R, Z) q4p_tile(R, Z, true, g, rows, rst, n, nc, b0, b1, dec, pan, a, y, m == m0 ? npf : NULL)
                    if (direct)
                        TILE_CALL(PTD, mr, zp);
                    else
                        TILE_CALL(PT, mr, zp);
#undef PT
#undef PTD
                }
            }
        }
    }
}

/* Up to four rows from registers; more in panels (mnb4_q4p_vnni). */
VNNI static void mnb4_q4v_vnni(const llm_mnb4_args *g, int64_t n0, int64_t n1) {
    if (g->M > Q4V_MR || g->tiled == LLM_MNB4_P16) {
        mnb4_q4p_vnni(g, n0, n1);
        return;
    }
    const size_t rst = llm_mnb4_row_bytes(g->kb);
    const bool zp = g->zp != NULL;
    const int mr = (int)g->M;
    for (int64_t n = n0; n < n1; n += 4) {
        int nc = (int)sn_imin(4, n1 - n);
        float *y = g->y + n;
#define QT(R, Z) q4v_tile(R, Z, g, (const char *)g->rows, rst, n, nc, y)
        TILE_CALL(QT, mr, zp);
#undef QT
    }
}
/* The one-row form: B's 64 bytes of a group of four blocks of a column as
 * loaded, against the row's codes of those blocks in B's order (block b's
 * unit p in lane 4 b + p: ae the low nibbles', ao the high ones'); two
 * vpdpbusd give each lane the sum of eight products, and the four lanes of
 * a block of each of four columns are summed in the integers (lane 4 b + c
 * after the transposing adds), where the float work is as above, lane by
 * lane: the same operations on each element in the same order. Cheaper
 * than the transpose of B when B is not shared by rows. The row, per group
 * in Q4S_GROUP bytes: ae, ao, then for lane 4 b + c: -8 x the code sum of
 * block b, sa_b, the code sum. */
#define Q4S_GROUP 320

VNNI static void q4s_row(const char *row, int64_t kb, char *out) {
    const __m512i ie = _mm512_setr_epi32(0, 8, 16, 24, 1, 9, 17, 25, 2, 10, 18, 26, 3, 11, 19, 27);
    const __m512i io = _mm512_add_epi32(ie, _mm512_set1_epi32(4));
    const __m512i rep = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    for (int64_t gi = 0; gi < (kb + 3) / 4; gi++) {
        const char *grp = row + (size_t)gi * Q4_GROUP_BYTES;
        char *o = out + (size_t)gi * Q4S_GROUP;
        __m512i c0 = _mm512_load_si512(grp), c1 = _mm512_load_si512(grp + 64);
        _mm512_store_si512(o, _mm512_permutex2var_epi32(c0, ie, c1));
        _mm512_store_si512(o + 64, _mm512_permutex2var_epi32(c0, io, c1));
        _mm512_store_si512(o + 128, _mm512_permutexvar_epi32(rep, bc128(grp + Q4_T8)));
        _mm512_store_si512(o + 192, _mm512_permutexvar_epi32(rep, bc128(grp + Q4_SA)));
        _mm512_store_si512(o + 256, _mm512_permutexvar_epi32(rep, bc128(grp + Q4_AS)));
    }
}

/* One row (srow: q4s_row's) x the column quad at n. */
VNNI_INLINE void q4s_quad(const bool ZP, const llm_mnb4_args *g, const char *srow, int64_t n, int nc, float *y) {
    const int64_t kb = g->kb, ng = (kb + 3) / 4;
    const __m512i m0f = _mm512_set1_epi8(15);
    const __m512i tr = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m128i ztr = _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const uint8_t *col[4];
    for (int c = 0; c < 4; c++)
        col[c] = g->b + (size_t)(n + sn_imin(c, nc - 1)) * (size_t)kb * 16;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t gi = 0; gi < ng; gi++) {
        const char *o = srow + (size_t)gi * Q4S_GROUP;
        const int rb = (int)sn_imin(4, kb - 4 * gi);
        const __mmask64 m = rb == 4 ? ~(__mmask64)0 : (((__mmask64)1 << (16 * rb)) - 1);
        const __mmask8 m4 = (__mmask8)((1u << rb) - 1);
        __m512i ae = _mm512_load_si512(o), ao = _mm512_load_si512(o + 64), D[4];
        __m128 s4[4];
        uint64_t zb = 0;
        /* the column loads as in q4v_decode, written out here: one helper for both made
         * this kernel 15-20% slower with zero points (llm_mnb4_fast1_cols timed alone, M 1,
         * K 576, N 1536: 72 -> 59 GMAC/s) */
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {
            if (c < nc) {
                const uint8_t *bc = col[c] + 64 * gi;
                _mm_prefetch((const char *)bc + FAST1_PF, FAST1_HINT);
                /* a masked load only for a short last group: one that crosses a page is slow */
                __m512i v = rb == 4 ? _mm512_loadu_si512(bc) : _mm512_maskz_loadu_epi8(m, bc);
                __m512i lo = _mm512_and_si512(v, m0f), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m0f);
                D[c] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, ae), hi, ao);
                s4[c] = rb == 4 ? _mm_loadu_ps(g->sb + (n + c) * kb + 4 * gi) : _mm_maskz_loadu_ps(m4, g->sb + (n + c) * kb + 4 * gi);
                if (ZP) {
                    const uint8_t *z = g->zp + (n + c) * g->zp_stride + 2 * gi;
                    uint64_t zv = z[0];
                    if (2 * gi + 1 < g->zp_stride)
                        zv |= (uint64_t)z[1] << 8;
                    zb |= zv << (16 * c);
                }
            } else {
                D[c] = _mm512_setzero_si512();
                s4[c] = _mm_setzero_ps();
            }
        }
        /* per 128-bit lane b: [D0 p0+p2, D1 p0+p2, D0 p1+p3, D1 p1+p3], then the columns' block sums */
        __m512i u01 = _mm512_add_epi32(_mm512_unpacklo_epi32(D[0], D[1]), _mm512_unpackhi_epi32(D[0], D[1]));
        __m512i u23 = _mm512_add_epi32(_mm512_unpacklo_epi32(D[2], D[3]), _mm512_unpackhi_epi32(D[2], D[3]));
        __m512i S = _mm512_add_epi32(_mm512_unpacklo_epi64(u01, u23), _mm512_unpackhi_epi64(u01, u23));
        if (ZP) {
            __m128i x = _mm_cvtsi64_si128((long long)zb), f = _mm_set1_epi8(15);
            __m128i z = _mm_unpacklo_epi8(_mm_and_si128(x, f), _mm_and_si128(_mm_srli_epi16(x, 4), f));
            __m512i zn = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_cvtepu8_epi32(_mm_shuffle_epi8(z, ztr)));
            S = _mm512_add_epi32(S, _mm512_mullo_epi32(zn, _mm512_load_si512(o + 256)));
        } else {
            S = _mm512_add_epi32(S, _mm512_load_si512(o + 128));
        }
        __m512 sv = _mm512_castps128_ps512(s4[0]);
        sv = _mm512_insertf32x4(sv, s4[1], 1);
        sv = _mm512_insertf32x4(sv, s4[2], 2);
        sv = _mm512_permutexvar_ps(tr, _mm512_insertf32x4(sv, s4[3], 3));
        __m512 scale = _mm512_mul_ps(_mm512_load_ps((const float *)(o + 192)), sv);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S), scale, acc);
    }
    /* lane c of the first 128 bits: (acc0 + acc1) + (acc2 + acc3) */
    __m512 v = _mm512_add_ps(acc, _mm512_shuffle_f32x4(acc, acc, 0xB1));
    v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0x4E));
    __m128 r = _mm512_castps512_ps128(v);
    __mmask8 mc = (__mmask8)((1u << nc) - 1);
    if (g->bias)
        r = _mm_add_ps(r, _mm_maskz_loadu_ps(mc, g->bias + n));
    _mm_mask_storeu_ps(y, mc, r);
}

/* The row in q4s_row's layout on the stack up to this many groups (40 KiB;
 * deeper rows take the register form, the same bits: no run allocates). */
#define Q4S_STACK_G 128

VNNI static void mnb4_q4s_vnni(const llm_mnb4_args *g, int64_t n0, int64_t n1) {
    if ((g->kb + 3) / 4 > Q4S_STACK_G) {
        mnb4_q4v_vnni(g, n0, n1);
        return;
    }
    _Alignas(64) char srow[Q4S_STACK_G * Q4S_GROUP];
    q4s_row(g->rows, g->kb, srow);
    for (int64_t n = n0; n < n1; n += 4) {
        int nc = (int)sn_imin(4, n1 - n);
        if (g->zp)
            q4s_quad(true, g, srow, n, nc, g->y + n);
        else
            q4s_quad(false, g, srow, n, nc, g->y + n);
    }
}

#else
static bool p16_pack_vnni(const uint8_t *b, const float *sb, int64_t N, int64_t kb, int64_t n, uint8_t *p, size_t bs) {
    (void)b, (void)sb, (void)N, (void)kb, (void)n, (void)p, (void)bs;
    return false;
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

/* The portable form, and where there is no VNNI: the same operations in the
 * same order on each element (so the same bits as the kernels above). */
static void q4_own_order_ref(const llm_mnb4_args *g, int64_t n0, int64_t n1) {
    int64_t kb = g->kb, ng = (kb + 3) / 4;
    size_t rst = llm_mnb4_row_bytes(kb);
    for (int64_t m = 0; m < g->M; m++) {
        const char *row = (const char *)g->rows + (size_t)m * rst;
        for (int64_t n = n0; n < n1; n++) {
            float acc[4] = {0, 0, 0, 0};
            for (int64_t gi = 0; gi < ng; gi++) {
                const char *grp = row + (size_t)gi * Q4_GROUP_BYTES;
                for (int h = 0; h < 4; h++) {
                    int64_t b = 4 * gi + h;
                    int32_t s = 0;
                    float sbv = 0;
                    if (b < kb) {
                        int z = q4_z(g, n, b);
                        for (int k = 0; k < 32; k++) {
                            int j = k / 8, i = (k % 8) / 2;
                            int q = ((const int8_t *)grp)[32 * j + 16 * (k & 1) + 4 * h + i];
                            int code = (q4_unit(g, n, b, k / 8)[(k % 8) / 2] >> ((k & 1) * 4)) & 15;
                            s += q * (code - z);
                        }
                        sbv = q4_sb(g, n, b);
                    }
                    float sa = ((const float *)(grp + Q4_SA))[h];
                    acc[h] = fmaf((float)s, sa * sbv, acc[h]);
                }
            }
            float y = (acc[0] + acc[1]) + (acc[2] + acc[3]);
            g->y[m * g->ldy + n] = g->bias ? y + g->bias[n] : y;
        }
    }
}

void llm_mnb4_fast_ref_cols(const llm_mnb4_args *g, int64_t n0, int64_t n1) { q4_own_order_ref(g, n0, n1); }

void llm_mnb4_fast1_cols(const llm_mnb4_args *g, int64_t n0, int64_t n1) {
#ifdef MNB4_FAST1
    if (llm_mnb4_fast1_available()) {
        if (g->tiled == LLM_MNB4_P16)
            mnb4_q4p_vnni(g, n0, n1);
        else
            mnb4_q4s_vnni(g, n0, n1);
        return;
    }
#endif
    q4_own_order_ref(g, n0, n1);
}

void llm_mnb4_fastm_cols(const llm_mnb4_args *g, int64_t n0, int64_t n1) {
#ifdef MNB4_FAST1
    if (llm_mnb4_fast1_available()) {
        mnb4_q4v_vnni(g, n0, n1);
        return;
    }
#endif
    q4_own_order_ref(g, n0, n1);
}

int64_t llm_mnb4_fastm_unit(int64_t M, int64_t other) {
#ifdef MNB4_FAST1
    if (llm_mnb4_fast1_available() && M > Q4V_MR)
        return 16;
#endif
    (void)M;
    return other;
}

/* Block b's natural codes (zero past K) and scale into its group: code k at
 * 32 (k / 8) + 16 (k & 1) + 4 (b % 4) + (k % 8) / 2, the unit of B's byte
 * k / 2 that the kernels' lane for block b multiplies; sa_b, -8 x and 1 x
 * the code sum. */
static void q4_place(char *row, int64_t b, const int8_t nat[32], float sa) {
    char *grp = row + (size_t)(b / 4) * Q4_GROUP_BYTES;
    int h = (int)(b % 4);
    int32_t sum = 0;
    for (int k = 0; k < 32; k++) {
        sum += nat[k];
        grp[32 * (k / 8) + 16 * (k & 1) + 4 * h + (k % 8) / 2] = (char)nat[k];
    }
    ((float *)(grp + Q4_SA))[h] = sa;
    ((int32_t *)(grp + Q4_T8))[h] = -8 * sum;
    ((int32_t *)(grp + Q4_AS))[h] = sum;
    ((int32_t *)(grp + Q4_T16))[h] = -16 * sum;
}

static void q4_prep_row(const float *a, int64_t K, char *row) {
    int64_t kb = (K + 31) / 32;
    memset(row, 0, q4_row_bytes(kb));
    int8_t nat[32];
    for (int64_t b = 0; b < kb; b++) {
        int64_t len = sn_imin(32, K - 32 * b);
        float sa = llm_q8_quantize(a + 32 * b, len, nat);
        memset(nat + len, 0, (size_t)(32 - len));
        q4_place(row, b, nat, sa);
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
