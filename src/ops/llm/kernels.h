/* Inner kernels of the LLM operators (src/ops/llm/llm.c, matmulnbits.c,
 * attention.c). Each fast kernel has a plain scalar reference next to it
 * (suffix _ref) that tests/unit/test_llm_kernels.c checks it against; a
 * later SIMD pass replaces the fast bodies, not the callers. */
#ifndef SN_OPS_LLM_KERNELS_H
#define SN_OPS_LLM_KERNELS_H

#include "core/core.h"

/* ---- dtype staging: float16/bfloat16/double tensors are computed in float */

void llm_to_f32(sn_dtype t, const void *src, float *dst, int64_t n);
void llm_from_f32(sn_dtype t, const float *src, void *dst, int64_t n);

/* ---- reductions -------------------------------------------------------- */

float llm_dot(const float *a, const float *b, int64_t n);
float llm_dot_ref(const float *a, const float *b, int64_t n);
/* y += alpha * x */
void llm_axpy(float alpha, const float *x, float *y, int64_t n);

/* ---- block quantization (MatMulNBits) ----------------------------------
 * A block holds up to block_size codes of `bits` bits packed low-first into
 * bytes. Dequantized value = (code - zp) * scale. */

/* Dequantizes the first len codes of blob into out. bits: 2, 4 or 8. */
void llm_q_dequant(const uint8_t *blob, int bits, int64_t len, float scale, float zp, float *out);
void llm_q_dequant_ref(const uint8_t *blob, int bits, int64_t len, float scale, float zp,
                       float *out);
/* Sum of a[i] * code[i] over the first len codes (the GEMV inner kernel:
 * the caller applies scale * (dot - zp * sum(a))). */
float llm_q_dot(const uint8_t *blob, int bits, const float *a, int64_t len);
float llm_q_dot_ref(const uint8_t *blob, int bits, const float *a, int64_t len);
/* The 4-bit float kernels (llm_mnb4f_cols) work on A permuted per group of
 * 16 values into [a0, a2, ..., a14, a1, a3, ..., a15], matching the low and
 * high nibbles of 8 packed bytes. n16 groups. */
void llm_q4_permute(const float *a, float *ap, int64_t n16);
/* Float 4-bit products for a few rows (src/ops/llm/mnb_f32.c): for rows
 * m < M (M <= 3 takes the SIMD path) and columns [n0, n1),
 *   y[m * ldy + n] = sum over the nblk full blocks b of
 *                    sc[n, b] * (sum_k ap.code - zp[n, b] * asum[m, b])
 * with A permuted by llm_q4_permute (bs a multiple of 16) and asum its
 * block sums. Zero points packed 4-bit (zp8), float (zpf, stride sstride)
 * or neither (8). One row (M = 1, decode) takes the zero points off each
 * code instead, sum_k ap.(code - zp) (the same value without the
 * cancellation between the two sums; asum unused). */
typedef struct llm_mnb4f_args {
    int64_t M, nblk, bs;
    const float *ap;      /* [M, ldap] permuted A */
    int64_t ldap;
    const float *asum;    /* [M, ldasum] block sums of A */
    int64_t ldasum;
    const uint8_t *b;     /* column n's blocks at b + n * bstride */
    int64_t bstride;
    const float *sc;      /* [N, sstride] */
    int64_t sstride;
    const uint8_t *zp8;   /* [N, zstride] or NULL */
    int64_t zstride;
    const float *zpf;     /* [N, sstride] or NULL */
    float *y;             /* [M, ldy] */
    int64_t ldy;
} llm_mnb4f_args;
void llm_mnb4f_cols(const llm_mnb4f_args *g, int64_t n0, int64_t n1);
void llm_mnb4f_cols_ref(const llm_mnb4f_args *g, int64_t n0, int64_t n1);
/* Dequantizes rows [k0, k0 + kn) of nc 4-bit columns (column c: codes at
 * b + c * bstride, scales sc + c * sstride, zero points as above) into
 * panel[(k - k0) * ldp + c], blocks of bs (a multiple of 16). */
void llm_q4_dequant_panel(const uint8_t *b, int64_t bstride, const float *sc, int64_t sstride,
                          const uint8_t *zp8, int64_t zstride, const float *zpf, int64_t nc,
                          int64_t k0, int64_t kn, int64_t bs, float *panel, int64_t ldp);
void llm_q4_dequant_panel_ref(const uint8_t *b, int64_t bstride, const float *sc,
                              int64_t sstride, const uint8_t *zp8, int64_t zstride,
                              const float *zpf, int64_t nc, int64_t k0, int64_t kn, int64_t bs,
                              float *panel, int64_t ldp);
/* Codes minus an integer zero point as int8-range ints (for the int8 path;
 * 8-bit codes minus zp may exceed int8, hence int16). */
void llm_q_codes(const uint8_t *blob, int bits, int64_t len, int zp, int16_t *out);
/* Symmetric int8 quantization of x[0..len) (scale = max|x| / 127; codes
 * rounded to nearest even); returns the scale. */
float llm_q8_quantize(const float *x, int64_t len, int8_t *q);
int32_t llm_dot_i8_i16(const int8_t *a, const int16_t *b, int64_t n);

/* ---- normalization rows -------------------------------------------------- */

/* y = x * inv_rms * gamma (gamma may be NULL: 1); returns inv_rms. */
float llm_rms_row(const float *x, const float *gamma, float eps, int64_t n, float *y);
float llm_rms_row_ref(const float *x, const float *gamma, float eps, int64_t n, float *y);
/* y = (x - mean) * inv_std * gamma + beta (gamma/beta may be NULL);
 * returns mean, *inv_std set. */
float llm_ln_row(const float *x, const float *gamma, const float *beta, float eps, int64_t n,
                 float *y, float *inv_std);
float llm_ln_row_ref(const float *x, const float *gamma, const float *beta, float eps, int64_t n,
                     float *y, float *inv_std);

/* ---- ONNX Runtime parity ------------------------------------------------
 * The model fixtures compare with ONNX Runtime's CPU kernels on x86-64 with
 * AVX2 (MLAS); where int8 quantization of activations (MatMulNBits
 * accuracy_level 4) follows, a one-ulp difference upstream can flip a
 * rounding and grow through the layers, so these reproduce its rounding
 * order exactly. */

/* SimplifiedLayerNormalization / RMSNormalization (eight fused lanes). */
float llm_rms_row_ort(const float *x, const float *gamma, float eps, int64_t n, float *y);
/* SkipSimplifiedLayerNormalization (sequential sum, division). */
float llm_skip_rms_row_ort(const float *x, const float *gamma, float eps, int64_t n, float *y);
/* The same for rows <= 8 rows at once (x[r], y[r]; inv[r] = 1 / d), with
 * the same bits as one row at a time (eight rows side by side in AVX2). */
void llm_skip_rms_rows_ort(const float *const *x, const float *gamma, float eps, int64_t n,
                           float *const *y, float *inv, int rows);
/* exp(x), x <= 0, as MLAS's softmax computes it. */
float llm_exp_mlas(float x);
/* MLAS's logistic (Sigmoid, QuickGelu). */
float llm_logistic_mlas(float x);
/* SwiGLU's Sigmoid, Mul and Mul in one pass: y = (g * logistic(g)) * u
 * for rows [m0, m1) and columns [c0, c1) of [*, ld] row-major matrices,
 * each product rounded as the separate nodes round it. */
void llm_swiglu_f32(const float *g, const float *u, float *y, int64_t ld, int64_t m0, int64_t m1, int64_t c0,
                    int64_t c1);
/* Softmax denominator in MLAS's order: lanes[k] accumulates e[i] with
 * i % 8 == k, in order (call with consecutive pieces whose lengths are
 * multiples of 8 but the last); fold gives the sum. */
void llm_sumexp_lanes_add(float lanes[8], const float *e, int64_t n);
float llm_sumexp_lanes_fold(const float lanes[8]);

/* MatMulNBits 4-bit, block 32, A quantized to int8 per block (qa, scales sa),
 * one column (codes bcol [kb, 16], scales sb [kb], packed zero points zp or
 * NULL): the eight lane accumulators of ORT's AVX2 kernels. m1: the M = 1
 * kernel (zero points applied to the codes); else the M > 1 kernel (codes
 * unsigned; add llm_mnb4_blksum after the fold and the bias). The plain
 * statement of the rounding that llm_mnb4_cols reproduces. */
void llm_mnb4_lanes_ref(const int8_t *qa, const float *sa, const uint8_t *bcol, const float *sb,
                        const uint8_t *zp, int64_t kb, int m1, float acc[8]);
/* Lane reductions: columns in groups of four (fold) and the rest (hsum). */
float llm_fold8(const float a[8]);
float llm_hsum8(const float a[8]);
/* sum over blocks of ablk[b] * -(sb[b] * zp[b]) as one fused chain
 * (ablk = scale_a * sum of the block's int8 codes). */
float llm_mnb4_blksum(const float *ablk, const float *sb, const uint8_t *zp, int64_t kb);

/* The same for whole matrices (src/ops/llm/mnb_q4.c), register-blocked and
 * bit-identical per element to llm_mnb4_lanes_ref + fold (n < N - N % 4) or
 * hsum + bias + (M > 1) llm_mnb4_blksum, with A quantized by
 * llm_q8_quantize per block. Rows of A are first prepared (quantized and
 * laid out for the kernel that will read them) into llm_mnb4_row_bytes(kb)
 * bytes each, 64-byte aligned; kind: llm_mnb4_row_kind of the product. */
enum {
    LLM_MNB4_ROWS_M = 0,  /* M > 1 */
    LLM_MNB4_ROWS_1 = 1,  /* M = 1 without zero points */
    LLM_MNB4_ROWS_1Z = 2, /* M = 1 with zero points */
    LLM_MNB4_ROWS_Q4 = 3, /* llm_mnb4_fast1_cols / _fastm_cols (AVX-512 VNNI, any M) */
};
static inline int llm_mnb4_row_kind(int64_t M, int has_zp) {
    return M > 1 ? LLM_MNB4_ROWS_M : has_zp ? LLM_MNB4_ROWS_1Z : LLM_MNB4_ROWS_1;
}
size_t llm_mnb4_row_bytes(int64_t kb);
void llm_mnb4_prep_row(const float *a, int64_t K, int kind, void *row);
void llm_mnb4_prep_row_ref(const float *a, int64_t K, int kind, void *row);
typedef struct llm_mnb4_args {
    int64_t M, N, kb;
    const void *rows;   /* M prepared rows, llm_mnb4_row_bytes(kb) apart */
    const uint8_t *b;   /* [N, kb, 16] */
    const float *sb;    /* [N, kb] */
    const uint8_t *zp;  /* packed [N, zp_stride], or NULL (8) */
    int64_t zp_stride;
    const float *bias;  /* [N] or NULL */
    float *y;           /* [M, ldy] */
    int64_t ldy;
    int tiled;          /* b's layout: [N, kb, 16] (0), LLM_MNB4_TILED, LLM_MNB4_P16 */
} llm_mnb4_args;
#define LLM_MNB4_TILED 1 /* llm_mnb4_tile's */
/* B in panels of sixteen columns for the VNNI kernels (llm_mnb4_fast1_cols,
 * llm_mnb4_fastm_cols; column ranges then start at a multiple of 16), with
 * the scales and zero points: per panel kb blocks of
 * llm_mnb4_p16_block(has_zp) bytes: four vectors of 64 bytes, vector j
 * holding unit j (bytes 4 j .. 4 j + 3) of the block's 16 bytes of each of
 * the panel's columns (column c at 4 c); the 16 columns' scales (floats);
 * with zero points 16 - z of each column (a byte each). Columns past N are
 * zero (z 16). The kernels read no other copy of B, the scales or the zero
 * points (sb and zp of llm_mnb4_args are then not read; zp non-NULL says
 * that there are zero points): one ascending stream a panel, decoded by two
 * nibble masks a vector, no transposes. Every row count reads it with the
 * panel kernel (up to 32 rows decoding each block in registers, tile by
 * tile; more sharing a panel decoded once), so every row keeps its bits
 * whatever the rows beside it. */
#define LLM_MNB4_P16 2
static inline size_t llm_mnb4_p16_block(bool has_zp) { return has_zp ? 336 : 320; }
size_t llm_mnb4_p16_bytes(int64_t N, int64_t kb, bool has_zp);
/* done(ctx, p, n) after each panel with each source range it took (its
 * columns' bytes of b, of sb, of zp): not read again. */
void llm_mnb4_p16_pack(const uint8_t *b, const float *sb, const uint8_t *zp, int64_t zp_stride, int64_t N, int64_t kb,
                       uint8_t *dst, void (*done)(void *ctx, const void *p, size_t n), void *ctx);
/* One row (M = 1, a ROWS_Q4 row) against untiled B in the fastest order the
 * CPU has (AVX-512 VNNI), not ONNX Runtime's (issue #22's accuracy rule,
 * docs/accuracy.md): each block's integer dot, its zero point taken off,
 * exact in one int32; then per block one fused multiply-add by sa_b sb_b
 * into one of four float accumulators (block b into b % 4), summed as
 * (acc0 + acc1) + (acc2 + acc3), then the bias (src/ops/llm/mnb_q4.c).
 * Without VNNI (llm_mnb4_fast1_available false) the scalar form
 * (llm_mnb4_fast_ref_cols) computes the same bits, slowly: the executor
 * then uses llm_mnb4_cols instead. */
bool llm_mnb4_fast1_available(void);
void llm_mnb4_fast1_cols(const llm_mnb4_args *g, int64_t n0, int64_t n1);
/* Any number of rows (ROWS_Q4 rows) in the same order: up to four rows
 * with B decoded per group of four columns by four blocks in registers;
 * more in panels of 16 columns, each block of a panel decoded once into a
 * buffer on the stack for the row tiles of four (one column per lane, no
 * reduction across lanes): every element the same bits as
 * llm_mnb4_fast1_cols gives its row alone, so a row's result does not
 * depend on the rows beside it. Without VNNI, as llm_mnb4_fast1_cols. */
void llm_mnb4_fastm_cols(const llm_mnb4_args *g, int64_t n0, int64_t n1);
/* Columns a task of llm_mnb4_fastm_cols with M rows should take a multiple
 * of: more than four rows go in panels of 16 columns (a column range that
 * starts and ends on them decodes no panel partly), else `other`. */
int64_t llm_mnb4_fastm_unit(int64_t M, int64_t other);
/* Their scalar form (what they run without VNNI): the same bits, slowly. */
void llm_mnb4_fast_ref_cols(const llm_mnb4_args *g, int64_t n0, int64_t n1);
/* B in tiles of four columns for the decode kernel: per pair of blocks,
 * the four columns' 32 bytes side by side (a lone last block padded to 32
 * with zeros), so that one row of A against four columns reads memory in
 * one ascending run instead of four streams a column apart (1.3x faster
 * from memory on TinyLlama's 2048-deep columns). Within the 32 bytes of a
 * pair the two blocks' 16-bit units alternate (unit u of block b at bytes
 * 4u, 4u + 1, of block b + 1 at 4u + 2, 4u + 3): the decode kernel's
 * integer lanes of the two blocks then come out interleaved, and are
 * widened by one shift each. The last tile holds N % 4 columns when N is
 * not a multiple of 4. At most LLM_MNB4_TILE_MAX_KB blocks deep. */
#define LLM_MNB4_TILE_MAX_KB 256
size_t llm_mnb4_tiled_bytes(int64_t N, int64_t kb);
/* Tiles b into dst; done(ctx, p, n) after each tile with the source bytes
 * [p, p + n) it took (not read again). */
void llm_mnb4_tile(const uint8_t *b, int64_t N, int64_t kb, uint8_t *dst,
                   void (*done)(void *ctx, const void *p, size_t n), void *ctx);
/* Y[m, n] for every row and the columns [n0, n1). */
void llm_mnb4_cols(const llm_mnb4_args *g, int64_t n0, int64_t n1);
void llm_mnb4_cols_ref(const llm_mnb4_args *g, int64_t n0, int64_t n1);

/* MatMulNBits 8-bit, blocks of 32, A quantized to int8 per block
 * (accuracy_level 4 with B constant; src/ops/llm/mnb_q8.c): ORT's AVX2
 * SQ8BitGemm CompInt8 rounding, for every M (it has no M = 1 kernel for 8
 * bits). Per column, eight lanes: over pairs of blocks (b, b + 1) lanes
 * hold the exact integer sums over k in [b:0-7, b:8-15, b+1:0-7, b+1:8-15,
 * b:16-23, b:24-31, b+1:16-23, b+1:24-31] of unsigned code times A's code,
 * each fused into its lane times sa * sb of its block; a last odd block
 * has lanes k in [4j, 4j + 4). Then fold (columns below N - N % 4) or
 * hsum, plus the bias, plus llm_mnb8_blksum: the zero points (128 unless
 * given, one byte per block) come in through A's block sums. */
void llm_mnb8_lanes_ref(const int8_t *qa, const float *sa, const uint8_t *bcol, const float *sb,
                        int64_t kb, float acc[8]);
/* sum over blocks of ab[b] * -(sb[b] * zp[b]) as one fused chain */
float llm_mnb8_blksum(const float *ab, const float *sb, const uint8_t *zp, int64_t kb);
typedef struct llm_mnb8_args {
    int64_t M, N, kb;
    const int8_t *qa;   /* [M, kb * 32] A's codes (llm_q8_quantize per block, zero-padded) */
    const float *sa;    /* [M, kb] A's block scales */
    const float *ab;    /* [M, kb] sa * the sum of the block's codes */
    const uint8_t *b;   /* [N, kb, 32] */
    const float *sb;    /* [N, kb] */
    const uint8_t *zp;  /* [N, zp_stride], one byte per block, or NULL (128) */
    int64_t zp_stride;
    const float *bias;  /* [N] or NULL */
    float *y;           /* [M, ldy] */
    int64_t ldy;
} llm_mnb8_args;
/* Y[m, n] for every row and the columns [n0, n1). */
void llm_mnb8_cols(const llm_mnb8_args *g, int64_t n0, int64_t n1);
void llm_mnb8_cols_ref(const llm_mnb8_args *g, int64_t n0, int64_t n1);

/* ---- data movement ------------------------------------------------------ */

/* dst[c * ld + r] = src[r * cols + c]: a rows x cols matrix transposed
 * (ld >= rows). */
void llm_transpose_f32(const float *src, int64_t rows, int64_t cols, float *dst, int64_t ld);
void llm_transpose_f32_ref(const float *src, int64_t rows, int64_t cols, float *dst, int64_t ld);

/* ---- rotary embedding ---------------------------------------------------
 * Rotates the first rot_dim values of one head vector x[0..head) by the
 * angles whose cos/sin are cos[0..rot_dim/2), sin[...]; the rest is copied.
 * interleaved: pairs (x[2i], x[2i+1]); else (x[i], x[i + rot_dim/2]).
 * x and y may be the same. */
void llm_rope(const float *x, float *y, const float *cos, const float *sin, int64_t rot_dim,
              int64_t head, int interleaved);
void llm_rope_ref(const float *x, float *y, const float *cos, const float *sin, int64_t rot_dim,
                  int64_t head, int interleaved);

/* ---- attention ----------------------------------------------------------
 * One query row against keys [lo, hi) of one head: scores = scale * q.k,
 * optional softcap, additive biases, softmax (online, in chunks, so no
 * scratch proportional to the key count), then y = sum p_j v_j. */

/* What llm_attn_row.qk_out receives per key. */
enum {
    LLM_QK_RAW = 0,    /* scale * q.k */
    LLM_QK_CAPPED = 1, /* after the softcap step (identity without softcap) */
    LLM_QK_BIASED = 2, /* after masks and biases are added */
    LLM_QK_PROBS = 3,  /* softmax probabilities */
};

typedef struct llm_attn_row {
    const float *q;        /* [H] */
    const float *k;        /* key j at k + j * k_stride, [H] each */
    const float *v;        /* value j at v + j * v_stride, [Hv] each */
    int64_t k_stride, v_stride;
    int64_t H, Hv;
    int64_t lo, hi;        /* keys computed: [lo, hi) (work outside is skipped) */
    int64_t mask_lo, mask_hi; /* keys outside [mask_lo, mask_hi) get -inf (still scored) */
    float scale;
    float softcap;         /* > 0: s = softcap * tanh(s / softcap) */
    int softcap_after_bias;
    const float *bias1;    /* additive bias indexed by key j (may be NULL) */
    const float *bias2;
    int64_t bias1_len;     /* keys >= this get -inf from bias1 (padding) */
    float *qk_out;         /* if non-NULL: scores written per key j (see qk_mode) */
    int qk_mode;           /* LLM_QK_* */
    int sink;              /* smooth softmax: extra logit sink_val in the denominator */
    float sink_val;
    int zero_if_masked;    /* all keys at -inf: output zeros (else NaN like the math) */
    float *y;              /* [Hv] */
    int ort;               /* round like ONNX Runtime's GroupQueryAttention where
                              the row allows (no softcap, biases, sink or qk_out):
                              1 prompt rows, 2 decode (one query row) */
    /* Optional, for the ort rows only. With scores (LLM_ATTN_SCORES(hi - lo)
     * floats of scratch) and a CPU with AVX2/FMA, each key is scored once,
     * eight keys at a time, with the same bits as the scalar two-pass row. */
    float *scores;
    const float *kt;       /* prompt rows: keys transposed by llm_attn_keys_t
                              (element d of key j at kt[d * kt_ld + j]) */
    int64_t kt_ld;
} llm_attn_row;

/* Scratch floats for the scores of n keys (whole blocks of eight). */
#define LLM_ATTN_SCORES(n) ((((n) + 7) / 8) * 8)

/* acc: Hv floats of scratch. */
void llm_attn_row_run(const llm_attn_row *r, float *acc);
/* Up to LLM_ATTN_ROWS rows of one head at once, the same bits as one at a
 * time: prompt rows in ONNX Runtime's form sharing kt and lo (each with its
 * own scores scratch, LLM_ATTN_SCORES of the longest row's key count) are
 * scored together; any other row runs alone. */
#define LLM_ATTN_ROWS 4
void llm_attn_rows_run(const llm_attn_row *rows, int R, float *acc);
/* kt[d * ld + j] = k[j * H + d] for keys j < n; columns [n, n + 8) are zeroed
 * (ld >= n + 8): the eight-key blocks of a row may read past its last key. */
void llm_attn_keys_t(const float *k, int64_t n, int64_t H, float *kt, int64_t ld);
/* Two-pass reference (scores in a buffer of hi floats). */
void llm_attn_row_ref(const llm_attn_row *r, float *scores);

#endif
