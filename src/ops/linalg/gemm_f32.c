/* Blocked single-precision GEMM (see gemm.h).
 *
 * Loop nest, per task (a block of NC columns of C, optionally a range of rows):
 *   for each KC slice of K:   pack B[KC x NC] into NR-wide panels (row by row)
 *     for each MC rows:       pack A[MC x KC] into MR-high panels (or use A
 *                             packed once for the whole call when small)
 *       for each NR panel, for each MR panel: micro-kernel MR x NR
 * The packed B panel (KC x NR) stays in L1 while the A block (MC x KC) is
 * streamed from L2. Packing pads edge panels with zeros so the micro-kernel
 * always runs full tiles; it stores only the m x n part that exists. A B
 * prepacked whole (sn_sgemm_pack_b) is read in place of the per-block
 * packing.
 *
 * Packing buffers come from the caller's workspace, one slot per pool
 * thread; a task claims a free slot with an atomic exchange (sn_pool_for
 * does not tell which thread runs it). */
#include <string.h>

#include "ops/gemm.h"

#define KC 256
#define MC 96  /* multiple of every kernel's MR (6, 8) */
#define NC 256 /* multiple of every kernel's NR (8, 16) */
#define SLOT_ALIGN 64
#define NR_MAX 32 /* the widest kernel's NR (avx512-12x32) */

typedef void (*ukr_fn)(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                       float alpha, float beta, int m, int n);

/* The last row panel of a block when it holds fewer than MR rows: panel
 * pn at b + pn * ps, n valid columns over the span (ukr.tail_panels panels
 * when m <= 2, else one). NULL: fn runs it, padded to MR rows. */
typedef void (*tail_fn)(int64_t kc, const float *a, const float *b, int64_t ps, float *c, int64_t ldc,
                        float alpha, float beta, int m, int n);

/* fn that also prefetches pf_bytes from pf, a line every few k, while it
 * computes: the next panel of a B that comes from memory. */
typedef void (*ukr_pf_fn)(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, float alpha,
                          float beta, int m, int n, const char *pf, size_t pf_bytes);

typedef struct ukr {
    const char *name;
    int mr, nr;
    ukr_fn fn;
    tail_fn tail;
    ukr_pf_fn fn_pf; /* or NULL: the prefetches are issued between calls */
} ukr;

/* Writes the m x n valid part of an accumulator tile into C. */
#define UKR_STORE(MR, NR)                                                      \
    do {                                                                       \
        if (beta == 0.0f) {                                                    \
            for (int i = 0; i < m; i++)                                        \
                for (int j = 0; j < n; j++)                                    \
                    c[i * ldc + j] = alpha * acc[i][j];                        \
        } else if (beta == 1.0f) {                                             \
            for (int i = 0; i < m; i++)                                        \
                for (int j = 0; j < n; j++)                                    \
                    c[i * ldc + j] += alpha * acc[i][j];                       \
        } else {                                                               \
            for (int i = 0; i < m; i++)                                        \
                for (int j = 0; j < n; j++)                                    \
                    c[i * ldc + j] = alpha * acc[i][j] + beta * c[i * ldc + j]; \
        }                                                                      \
    } while (0)

/* Portable kernel: 6 x 8 accumulators fit the 16 SSE registers with room
 * for the B row and the broadcast A value; gcc -O2 vectorizes the j loop. */
static void ukr_c6x8(int64_t kc, const float *restrict a, const float *restrict b,
                     float *restrict c, int64_t ldc, float alpha, float beta, int m, int n) {
    float acc[6][8];
    memset(acc, 0, sizeof acc);
    for (int64_t p = 0; p < kc; p++, a += 6, b += 8)
#pragma GCC unroll 6
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < 8; j++)
                acc[i][j] += a[i] * b[j];
    UKR_STORE(6, 8);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SN_HAVE_AVX2_KERNEL 1
#include <immintrin.h>

#include "ops/simd_avx.h"

/* 6 x 16 accumulators in 12 ymm registers; per k: two B vectors, six
 * broadcasts of A, twelve FMAs. */
__attribute__((target("avx2,fma"))) static void
ukr_avx2_6x16(int64_t kc, const float *restrict a, const float *restrict b, float *restrict c,
              int64_t ldc, float alpha, float beta, int m, int n) {
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    /* C's tile is read or written after the loop: start its cache misses now
     * (large outputs such as logits do not stay in cache between K slices). */
    for (int i = 0; i < m; i++) {
        _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + i * ldc + 15), _MM_HINT_T0);
    }
    for (int64_t p = 0; p < kc; p++, a += 6, b += 16) {
        __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8), x;
        x = _mm256_broadcast_ss(a + 0);
        c00 = _mm256_fmadd_ps(x, b0, c00);
        c01 = _mm256_fmadd_ps(x, b1, c01);
        x = _mm256_broadcast_ss(a + 1);
        c10 = _mm256_fmadd_ps(x, b0, c10);
        c11 = _mm256_fmadd_ps(x, b1, c11);
        x = _mm256_broadcast_ss(a + 2);
        c20 = _mm256_fmadd_ps(x, b0, c20);
        c21 = _mm256_fmadd_ps(x, b1, c21);
        x = _mm256_broadcast_ss(a + 3);
        c30 = _mm256_fmadd_ps(x, b0, c30);
        c31 = _mm256_fmadd_ps(x, b1, c31);
        x = _mm256_broadcast_ss(a + 4);
        c40 = _mm256_fmadd_ps(x, b0, c40);
        c41 = _mm256_fmadd_ps(x, b1, c41);
        x = _mm256_broadcast_ss(a + 5);
        c50 = _mm256_fmadd_ps(x, b0, c50);
        c51 = _mm256_fmadd_ps(x, b1, c51);
    }
    __m256 r[6][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    if (m == 6 && n == 16) {
        const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
        for (int i = 0; i < 6; i++)
            for (int h = 0; h < 2; h++) {
                float *ci = c + i * ldc + 8 * h;
                __m256 v = _mm256_mul_ps(va, r[i][h]);
                if (beta == 1.0f)
                    v = _mm256_add_ps(v, _mm256_loadu_ps(ci));
                else if (beta != 0.0f)
                    v = _mm256_fmadd_ps(vb, _mm256_loadu_ps(ci), v);
                _mm256_storeu_ps(ci, v);
            }
        return;
    }
    float acc[6][16];
    for (int i = 0; i < 6; i++) {
        _mm256_storeu_ps(acc[i], r[i][0]);
        _mm256_storeu_ps(acc[i] + 8, r[i][1]);
    }
    UKR_STORE(6, 16);
}

/* Short last row panels. 6 x 16 on a panel of m < 6 rows does the work of
 * six (zero rows padded): a 128-row prefill has 21 full panels and one of
 * two rows, ~4% of its products' time (M = 126: 49.7 ms, M = 128: 51.6 ms
 * for 40 MLP-shaped products). R rows over P panels of 16 columns, R * 2P
 * accumulators (8: enough chains for two FMA pipes of latency 4); each
 * element the same fused chain over k from zero as in 6 x 16, and stored
 * through UKR_STORE as 6 x 16 stores a partial tile: the same bits. A's
 * panel keeps its stride of 6. */
__attribute__((target("avx2,fma"), always_inline)) static inline void
tail_avx2(const int R, const int P, int64_t kc, const float *restrict a, const float *restrict b, int64_t ps,
          float *restrict c, int64_t ldc, float alpha, float beta, int m, int n) {
    __m256 r[4][4];
    _Pragma("GCC unroll 4") for (int i = 0; i < R; i++)
        _Pragma("GCC unroll 4") for (int h = 0; h < 2 * P; h++)
            r[i][h] = _mm256_setzero_ps();
    for (int i = 0; i < m; i++)
        for (int h = 0; h < P; h++)
            _mm_prefetch((const char *)(c + i * ldc + 16 * h), _MM_HINT_T0);
    for (int64_t p = 0; p < kc; p++, a += 6, b += 16) {
        __m256 bv[4];
        _Pragma("GCC unroll 4") for (int h = 0; h < 2 * P; h++)
            bv[h] = _mm256_loadu_ps(b + (h / 2) * ps + 8 * (h % 2));
        _Pragma("GCC unroll 4") for (int i = 0; i < R; i++) {
            __m256 x = _mm256_broadcast_ss(a + i);
            _Pragma("GCC unroll 4") for (int h = 0; h < 2 * P; h++)
                r[i][h] = _mm256_fmadd_ps(x, bv[h], r[i][h]);
        }
    }
    /* zeroed: gcc 12 at -O3 cannot see that n <= 16 * P, so that UKR_STORE
     * reads only what was stored (a false maybe-uninitialized, an error
     * with -Werror); 512 bytes once per short panel */
    float acc[4][32] = {{0}};
    _Pragma("GCC unroll 4") for (int i = 0; i < R; i++)
        _Pragma("GCC unroll 4") for (int h = 0; h < 2 * P; h++)
            _mm256_storeu_ps(acc[i] + 8 * h, r[i][h]);
    UKR_STORE(R, 16 * P);
}

/* m <= 2: two panels at once (n > 16), else one; m 3..4: 4 x 16; m 5: 6 x 16. */
__attribute__((target("avx2,fma"))) static void
tail_avx2_rows(int64_t kc, const float *a, const float *b, int64_t ps, float *c, int64_t ldc, float alpha,
               float beta, int m, int n) {
    if (m <= 2 && n > 16)
        tail_avx2(2, 2, kc, a, b, ps, c, ldc, alpha, beta, m, n);
    else if (m <= 2)
        tail_avx2(2, 1, kc, a, b, ps, c, ldc, alpha, beta, m, n);
    else if (m <= 4)
        tail_avx2(4, 1, kc, a, b, ps, c, ldc, alpha, beta, m, n);
    else
        ukr_avx2_6x16(kc, a, b, c, ldc, alpha, beta, m, n);
}

/* pack_a's six-row panel in 32-byte moves: eight k of the six rows (two
 * zero rows added) transposed as one 8 x 8 tile, each k's six values
 * stored 24 bytes after the previous k's (the two extra floats of each
 * store are overwritten by the next; the last k of a tile stores 4 + 2).
 * The scalar copy was ~4% of an accuracy_level 0 prefill's samples. */
__attribute__((target("avx2"))) static void pack_a6_avx2(const float *r0, int64_t lda, int64_t kb, float *dst) {
    int64_t p = 0;
    for (; p + 8 <= kb; p += 8, dst += 48) {
        __m256 t[8];
        for (int i = 0; i < 6; i++)
            t[i] = _mm256_loadu_ps(r0 + i * lda + p);
        t[6] = t[7] = _mm256_setzero_ps();
        sn_avx_t8x8(t);
        for (int j = 0; j < 7; j++)
            _mm256_storeu_ps(dst + 6 * j, t[j]);
        _mm_storeu_ps(dst + 42, _mm256_castps256_ps128(t[7]));
        _mm_storel_pi((__m64 *)(dst + 46), _mm256_extractf128_ps(t[7], 1));
    }
    for (; p < kb; p++, dst += 6)
        for (int i = 0; i < 6; i++)
            dst[i] = r0[i * lda + p];
}

/* The twelve-row panel (avx512-12x32) the same way: rows 0-7 and 8-11 (four
 * zero rows added) as two 8 x 8 tiles, each k's twelve values one 32-byte
 * and one 16-byte store. */
__attribute__((target("avx2"))) static void pack_a12_avx2(const float *r0, int64_t lda, int64_t kb, float *dst) {
    int64_t p = 0;
    for (; p + 8 <= kb; p += 8, dst += 96) {
        __m256 t[8], u[8];
        for (int i = 0; i < 8; i++)
            t[i] = _mm256_loadu_ps(r0 + i * lda + p);
        for (int i = 0; i < 4; i++)
            u[i] = _mm256_loadu_ps(r0 + (8 + i) * lda + p);
        u[4] = u[5] = u[6] = u[7] = _mm256_setzero_ps();
        sn_avx_t8x8(t);
        sn_avx_t8x8(u);
        for (int j = 0; j < 8; j++) {
            _mm256_storeu_ps(dst + 12 * j, t[j]);
            _mm_storeu_ps(dst + 12 * j + 8, _mm256_castps256_ps128(u[j]));
        }
    }
    for (; p < kb; p++, dst += 12)
        for (int i = 0; i < 12; i++)
            dst[i] = r0[i * lda + p];
}
#endif

#if defined(__aarch64__) && defined(__ARM_NEON)
#define SN_HAVE_NEON_KERNEL 1
#include <arm_neon.h>

/* 8 x 8 accumulators in 16 of the 32 NEON registers; per k: two B vectors,
 * two A vectors, sixteen FMAs by lane (no broadcasts needed). */
static void ukr_neon_8x8(int64_t kc, const float *restrict a, const float *restrict b, float *restrict c,
                         int64_t ldc, float alpha, float beta, int m, int n) {
    float32x4_t r[8][2];
    for (int i = 0; i < 8; i++)
        r[i][0] = r[i][1] = vdupq_n_f32(0.0f);
    for (int64_t p = 0; p < kc; p++, a += 8, b += 8) {
        float32x4_t b0 = vld1q_f32(b), b1 = vld1q_f32(b + 4), a0 = vld1q_f32(a), a1 = vld1q_f32(a + 4);
#define NEON_ROW(i, av, l)                                  \
    r[i][0] = vfmaq_laneq_f32(r[i][0], b0, av, l);          \
    r[i][1] = vfmaq_laneq_f32(r[i][1], b1, av, l)
        NEON_ROW(0, a0, 0);
        NEON_ROW(1, a0, 1);
        NEON_ROW(2, a0, 2);
        NEON_ROW(3, a0, 3);
        NEON_ROW(4, a1, 0);
        NEON_ROW(5, a1, 1);
        NEON_ROW(6, a1, 2);
        NEON_ROW(7, a1, 3);
#undef NEON_ROW
    }
    if (m == 8 && n == 8 && beta == 0.0f) {
        for (int i = 0; i < 8; i++) {
            vst1q_f32(c + i * ldc, vmulq_n_f32(r[i][0], alpha));
            vst1q_f32(c + i * ldc + 4, vmulq_n_f32(r[i][1], alpha));
        }
        return;
    }
    float acc[8][8];
    for (int i = 0; i < 8; i++) {
        vst1q_f32(acc[i], r[i][0]);
        vst1q_f32(acc[i] + 4, r[i][1]);
    }
    UKR_STORE(8, 8);
}
#endif

static const ukr k_ukr_c = {"c6x8", 6, 8, ukr_c6x8, NULL, NULL};
#ifdef SN_HAVE_NEON_KERNEL
static const ukr k_ukr_neon = {"neon-8x8", 8, 8, ukr_neon_8x8, NULL, NULL};
#endif
#ifdef SN_HAVE_AVX2_KERNEL
static const ukr k_ukr_avx2 = {"avx2-6x16", 6, 16, ukr_avx2_6x16, tail_avx2_rows, NULL};
#endif

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* ---- skinny products: B read in place, once ------------------------------ */

/* With few rows of A (decode: M == 1; short prefills) the product is bound
 * by reading B, so B is never packed: each task owns a range of columns
 * (multiples of 16 floats: C's cache lines are not shared) and streams B's
 * rows four at a time through it, accumulating in C, which stays in L1 (or,
 * see ksplit_task, a band of B's rows). */
#define SKINNY_M 8

typedef struct skinny_job {
    const struct kset *ks;
    int transA, transB;
    int64_t M, N, K;
    float alpha, beta;
    const float *A, *B;
    int64_t lda, ldb, ldc;
    float *C;
    int64_t width; /* columns per task */
} skinny_job;

static inline float a_at(const skinny_job *g, int64_t i, int64_t p) {
    return g->transA ? g->A[p * g->lda + i] : g->A[i * g->lda + p];
}

/* C[i, j0..j0+n) = beta * C (0 when beta == 0: C is not read). */
static void skinny_init_c(const skinny_job *g, int64_t j0, int64_t n) {
    for (int64_t i = 0; i < g->M; i++) {
        float *c = g->C + i * g->ldc + j0;
        if (g->beta == 0.0f)
            memset(c, 0, sizeof *c * (size_t)n);
        else if (g->beta != 1.0f)
            for (int64_t j = 0; j < n; j++)
                c[j] *= g->beta;
    }
}

/* Portable: the j loops vectorize with whatever the build targets. */
static void skinny_c(const skinny_job *g, int64_t j0, int64_t n) {
    skinny_init_c(g, j0, n);
    const int64_t ldb = g->ldb;
    int64_t p = 0;
    for (; p + 4 <= g->K; p += 4) {
        const float *restrict b0 = g->B + p * ldb + j0, *restrict b1 = b0 + ldb, *restrict b2 = b1 + ldb,
                    *restrict b3 = b2 + ldb;
        for (int64_t i = 0; i < g->M; i++) {
            float a0 = g->alpha * a_at(g, i, p), a1 = g->alpha * a_at(g, i, p + 1);
            float a2 = g->alpha * a_at(g, i, p + 2), a3 = g->alpha * a_at(g, i, p + 3);
            float *restrict c = g->C + i * g->ldc + j0;
            for (int64_t j = 0; j < n; j++)
                c[j] += (a0 * b0[j] + a1 * b1[j]) + (a2 * b2[j] + a3 * b3[j]);
        }
    }
    for (; p < g->K; p++) {
        const float *restrict b0 = g->B + p * ldb + j0;
        for (int64_t i = 0; i < g->M; i++) {
            float a0 = g->alpha * a_at(g, i, p);
            float *restrict c = g->C + i * g->ldc + j0;
            for (int64_t j = 0; j < n; j++)
                c[j] += a0 * b0[j];
        }
    }
}

/* M == 1 with B stored transposed ([N, K]): one dot product per column. */
static float dot_c(const float *x, int64_t incx, const float *y, int64_t n) {
    float s[8] = {0};
    int64_t p = 0;
    if (incx == 1) {
        for (; p + 8 <= n; p += 8)
            for (int k = 0; k < 8; k++)
                s[k] += x[p + k] * y[p + k];
    }
    float t = 0;
    for (; p < n; p++)
        t += x[p * incx] * y[p];
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7])) + t;
}

/* One row of A against np (<= 4) prepacked panels of B (each K rows of NR
 * floats, contiguous, bps floats apart): out[t * nr + j] = sum_p a[p * inca]
 * * panel_t[p * nr + j]. Each panel is one sequential stream: the decode
 * product over prepacked weights reads memory in the order it lies. The
 * sums are ukr_c6x8's: per K slice of KC rows one chain per column from
 * zero, the slices' sums added in order, so one row gives the bits of that
 * row of the blocked product (the portable kernel set's, as panel_dot_avx2
 * and panel_dot_neon do for theirs). */
static void panel_dot_c(const float *a, int64_t inca, const float *panels, int64_t bps, int np, int64_t K, int nr,
                        float *out) {
    for (int t = 0; t < np; t++) {
        const float *panel = panels + t * bps;
        float acc[NR_MAX] = {0}, s[NR_MAX];
        for (int64_t p0 = 0; p0 < K; p0 += KC) {
            int64_t kb = sn_imin(KC, K - p0);
            for (int j = 0; j < nr; j++)
                s[j] = 0;
            for (int64_t p = p0; p < p0 + kb; p++)
                for (int j = 0; j < nr; j++)
                    s[j] += a[p * inca] * panel[p * nr + j];
            for (int j = 0; j < nr; j++)
                acc[j] = p0 == 0 ? s[j] : acc[j] + s[j];
        }
        for (int j = 0; j < nr; j++)
            out[t * nr + j] = acc[j];
    }
}

#ifdef SN_HAVE_AVX2_KERNEL
/* Lane masks for a tail of r < 8 floats: k_tail + 8 - r. */
static const int32_t k_tail[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

/* c[0..n) += sum over ROWS rows r of a[r] * b[r * ldb + 0..n). */
__attribute__((target("avx2,fma"), always_inline)) static inline void
skinny_rows_avx2(int rows, const float *b, int64_t ldb, const float *a, float *c, int64_t n) {
    const __m256 a0 = _mm256_set1_ps(a[0]);
    const __m256 a1 = _mm256_set1_ps(rows > 1 ? a[1] : 0.0f);
    const __m256 a2 = _mm256_set1_ps(rows > 2 ? a[2] : 0.0f);
    const __m256 a3 = _mm256_set1_ps(rows > 3 ? a[3] : 0.0f);
    const float *b1 = b + ldb, *b2 = b + 2 * ldb, *b3 = b + 3 * ldb;
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m256 c0 = _mm256_loadu_ps(c + j), c1 = _mm256_loadu_ps(c + j + 8);
        c0 = _mm256_fmadd_ps(a0, _mm256_loadu_ps(b + j), c0);
        c1 = _mm256_fmadd_ps(a0, _mm256_loadu_ps(b + j + 8), c1);
        if (rows > 1) {
            c0 = _mm256_fmadd_ps(a1, _mm256_loadu_ps(b1 + j), c0);
            c1 = _mm256_fmadd_ps(a1, _mm256_loadu_ps(b1 + j + 8), c1);
        }
        if (rows > 2) {
            c0 = _mm256_fmadd_ps(a2, _mm256_loadu_ps(b2 + j), c0);
            c1 = _mm256_fmadd_ps(a2, _mm256_loadu_ps(b2 + j + 8), c1);
        }
        if (rows > 3) {
            c0 = _mm256_fmadd_ps(a3, _mm256_loadu_ps(b3 + j), c0);
            c1 = _mm256_fmadd_ps(a3, _mm256_loadu_ps(b3 + j + 8), c1);
        }
        _mm256_storeu_ps(c + j, c0);
        _mm256_storeu_ps(c + j + 8, c1);
    }
    for (; j < n; j += 8) {
        int64_t r = n - j;
        if (r >= 8) {
            __m256 c0 = _mm256_loadu_ps(c + j);
            c0 = _mm256_fmadd_ps(a0, _mm256_loadu_ps(b + j), c0);
            if (rows > 1)
                c0 = _mm256_fmadd_ps(a1, _mm256_loadu_ps(b1 + j), c0);
            if (rows > 2)
                c0 = _mm256_fmadd_ps(a2, _mm256_loadu_ps(b2 + j), c0);
            if (rows > 3)
                c0 = _mm256_fmadd_ps(a3, _mm256_loadu_ps(b3 + j), c0);
            _mm256_storeu_ps(c + j, c0);
        } else { /* masked lanes are neither read nor written */
            __m256i m = _mm256_loadu_si256((const __m256i *)(k_tail + 8 - r));
            __m256 c0 = _mm256_maskload_ps(c + j, m);
            c0 = _mm256_fmadd_ps(a0, _mm256_maskload_ps(b + j, m), c0);
            if (rows > 1)
                c0 = _mm256_fmadd_ps(a1, _mm256_maskload_ps(b1 + j, m), c0);
            if (rows > 2)
                c0 = _mm256_fmadd_ps(a2, _mm256_maskload_ps(b2 + j, m), c0);
            if (rows > 3)
                c0 = _mm256_fmadd_ps(a3, _mm256_maskload_ps(b3 + j, m), c0);
            _mm256_maskstore_ps(c + j, m, c0);
        }
    }
}

__attribute__((target("avx2,fma"))) static void skinny_avx2(const skinny_job *g, int64_t j0, int64_t n) {
    skinny_init_c(g, j0, n);
    const int64_t ldb = g->ldb;
    float a[4];
    int64_t p = 0;
    if (g->M == 1 && g->K >= 16 && n == g->N) {
        /* Whole rows (a band of B: one contiguous block) are read in four
         * quarters side by side (rows r, q+r, 2q+r, 3q+r): four sequential
         * streams keep more misses in flight than one, and with one row of
         * A the product is bound by reading B. (Column slices of a wide B
         * are strided already; measured no better there.) */
        const int64_t q = g->K / 4;
        for (int64_t r = 0; r < q; r++) {
            for (int t = 0; t < 4; t++)
                a[t] = g->alpha * a_at(g, 0, t * q + r);
            skinny_rows_avx2(4, g->B + r * ldb + j0, q * ldb, a, g->C + j0, n);
        }
        p = 4 * q;
    }
    for (; p + 4 <= g->K; p += 4) {
        const float *b = g->B + p * ldb + j0;
        for (int64_t i = 0; i < g->M; i++) {
            for (int r = 0; r < 4; r++)
                a[r] = g->alpha * a_at(g, i, p + r);
            skinny_rows_avx2(4, b, ldb, a, g->C + i * g->ldc + j0, n);
        }
    }
    for (; p < g->K; p++) {
        for (int64_t i = 0; i < g->M; i++) {
            a[0] = g->alpha * a_at(g, i, p);
            skinny_rows_avx2(1, g->B + p * ldb + j0, ldb, a, g->C + i * g->ldc + j0, n);
        }
    }
}

__attribute__((target("avx2,fma"))) static float dot_avx2(const float *x, int64_t incx, const float *y, int64_t n) {
    if (incx != 1)
        return dot_c(x, incx, y, n);
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t p = 0;
    for (; p + 32 <= n; p += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + p), _mm256_loadu_ps(y + p), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + p + 8), _mm256_loadu_ps(y + p + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + p + 16), _mm256_loadu_ps(y + p + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + p + 24), _mm256_loadu_ps(y + p + 24), s3);
    }
    for (; p + 8 <= n; p += 8)
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + p), _mm256_loadu_ps(y + p), s0);
    __m256 s = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    float t = _mm_cvtss_f32(h);
    for (; p < n; p++)
        t += x[p] * y[p];
    return t;
}
#endif

#ifdef SN_HAVE_AVX2_KERNEL
/* panel_dot_c for NR == 16. Four panels are read side by side: four
 * streams keep more misses in flight than one (a single sequential stream
 * per thread does not reach the memory's bandwidth), and their eight FMA
 * chains hide the latency. */

/* np (<= 4) panels, rows [0, kb): one sequential FMA chain per column
 * (two vectors per panel), started from zero. */
__attribute__((target("avx2,fma"), always_inline)) static inline void
panel_dot_block(const int NP, const float *a, int64_t inca, const float *panels, int64_t bps, int64_t kb,
                __m256 *s) {
#pragma GCC unroll 8
    for (int i = 0; i < 2 * NP; i++)
        s[i] = _mm256_setzero_ps();
    for (int64_t p = 0; p < kb; p++) {
        __m256 x = _mm256_broadcast_ss(a + p * inca);
#pragma GCC unroll 4
        for (int t = 0; t < NP; t++) {
            const float *b = panels + t * bps + p * 16;
            s[2 * t] = _mm256_fmadd_ps(x, _mm256_loadu_ps(b), s[2 * t]);
            s[2 * t + 1] = _mm256_fmadd_ps(x, _mm256_loadu_ps(b + 8), s[2 * t + 1]);
        }
    }
}

/* Every column gets the same operations whatever np is (so the result does
 * not depend on how the panels are split over threads), in the order of
 * the blocked path and of MLAS's packed kernel: per K slice of KC rows a
 * chain from zero, the slices' sums added in order. Four panels keep eight
 * chains in flight. */
__attribute__((target("avx2,fma"), always_inline)) static inline void
panel_dot_np(const int NP, const float *a, int64_t inca, const float *panels, int64_t bps, int64_t K,
             float *out) {
    __m256 acc[8], s[8];
#pragma GCC unroll 8
    for (int i = 0; i < 2 * NP; i++)
        acc[i] = _mm256_setzero_ps();
    for (int64_t p0 = 0; p0 < K; p0 += KC) {
        int64_t kb = sn_imin(KC, K - p0);
        panel_dot_block(NP, a + p0 * inca, inca, panels + p0 * 16, bps, kb, s);
#pragma GCC unroll 8
        for (int i = 0; i < 2 * NP; i++)
            acc[i] = p0 == 0 ? s[i] : _mm256_add_ps(s[i], acc[i]);
    }
#pragma GCC unroll 8
    for (int i = 0; i < 2 * NP; i++)
        _mm256_storeu_ps(out + 8 * i, acc[i]);
}

__attribute__((target("avx2,fma"))) static void panel_dot_avx2(const float *a, int64_t inca, const float *panels,
                                                               int64_t bps, int np, int64_t K, int nr, float *out) {
    if (nr != 16) {
        panel_dot_c(a, inca, panels, bps, np, K, nr, out);
        return;
    }
    switch (np) {
    case 4: panel_dot_np(4, a, inca, panels, bps, K, out); break;
    case 3: panel_dot_np(3, a, inca, panels, bps, K, out); break;
    case 2: panel_dot_np(2, a, inca, panels, bps, K, out); break;
    default: panel_dot_np(1, a, inca, panels, bps, K, out); break;
    }
}
#endif

/* A kernel set: what one CPU level runs. */
typedef struct kset {
    const ukr *ukr;
    void (*skinny)(const skinny_job *g, int64_t j0, int64_t n);
    float (*dot)(const float *x, int64_t incx, const float *y, int64_t n);
    void (*panel_dot)(const float *a, int64_t inca, const float *panels, int64_t bps, int np, int64_t K, int nr,
                      float *out);
} kset;

#ifdef SN_HAVE_NEON_KERNEL
/* panel_dot_c for NR == 8 in ukr_neon_8x8's order, so that one row against
 * prepacked B gives the bits of that row of the blocked product (as
 * panel_dot_avx2 does for the AVX2 kernel): per K slice of KC rows one
 * fused multiply-add chain per column from zero, the slices' sums added in
 * order. panel_dot_c's two plain chains round differently. */
static void panel_dot_neon(const float *a, int64_t inca, const float *panels, int64_t bps, int np, int64_t K, int nr,
                           float *out) {
    if (nr != 8) {
        panel_dot_c(a, inca, panels, bps, np, K, nr, out);
        return;
    }
    for (int t = 0; t < np; t++) {
        const float *panel = panels + t * bps;
        float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = acc0;
        for (int64_t p0 = 0; p0 < K; p0 += KC) {
            int64_t kb = sn_imin(KC, K - p0);
            float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0;
            for (int64_t p = p0; p < p0 + kb; p++) {
                const float *b = panel + p * 8;
                s0 = vfmaq_n_f32(s0, vld1q_f32(b), a[p * inca]);
                s1 = vfmaq_n_f32(s1, vld1q_f32(b + 4), a[p * inca]);
            }
            acc0 = p0 == 0 ? s0 : vaddq_f32(acc0, s0);
            acc1 = p0 == 0 ? s1 : vaddq_f32(acc1, s1);
        }
        vst1q_f32(out + t * 8, acc0);
        vst1q_f32(out + t * 8 + 4, acc1);
    }
}
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SN_HAVE_AVX512_KERNEL 1

/* 12 x 32 accumulators in 24 of the 32 ZMM registers; per k: two B
 * vectors, twelve broadcasts, 24 FMAs. Each element is the same fused
 * chain over k from zero as in the 6 x 16 AVX2 kernel and the portable
 * one, stored the same way: the same bits, at twice the width. Short
 * last panels run padded to twelve rows. */
__attribute__((target("avx512f"), always_inline)) static inline void
ukr_avx512_body(int64_t kc, const float *restrict a, const float *restrict b, float *restrict c, int64_t ldc,
                float alpha, float beta, int m, int n, const char *pf, size_t pf_bytes) {
    __m512 r[12][2];
    _Pragma("GCC unroll 12") for (int i = 0; i < 12; i++)
        r[i][0] = r[i][1] = _mm512_setzero_ps();
    /* one line of pf per `every` k (a burst between calls stalled on the
     * fill buffers) */
    size_t lines = pf_bytes / 64, pfo = 0;
    int64_t every = lines ? sn_imax(1, kc / (int64_t)lines) : kc + 1, until = every;
    for (int64_t p = 0; p < kc; p++, a += 12, b += 32) {
        if (pf && p == until - 1 && pfo < pf_bytes) {
            __builtin_prefetch(pf + pfo);
            pfo += 64, until += every;
        }
        __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
        _Pragma("GCC unroll 12") for (int i = 0; i < 12; i++) {
            __m512 x = _mm512_set1_ps(a[i]);
            r[i][0] = _mm512_fmadd_ps(x, b0, r[i][0]);
            r[i][1] = _mm512_fmadd_ps(x, b1, r[i][1]);
        }
    }
    for (; pf && pfo < pf_bytes; pfo += 64) /* kc shorter than the lines */
        __builtin_prefetch(pf + pfo);
    if (n == 32) {
        const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
        for (int i = 0; i < m; i++)
            for (int h = 0; h < 2; h++) {
                float *ci = c + i * ldc + 16 * h;
                __m512 v = _mm512_mul_ps(va, r[i][h]);
                if (beta == 1.0f)
                    v = _mm512_add_ps(v, _mm512_loadu_ps(ci));
                else if (beta != 0.0f)
                    v = _mm512_fmadd_ps(vb, _mm512_loadu_ps(ci), v);
                _mm512_storeu_ps(ci, v);
            }
        return;
    }
    float acc[12][32];
    for (int i = 0; i < m; i++) {
        _mm512_storeu_ps(acc[i], r[i][0]);
        _mm512_storeu_ps(acc[i] + 16, r[i][1]);
    }
    UKR_STORE(12, 32);
}

/* 12 x 32 accumulators in 24 of the 32 ZMM registers; per k: two B
 * vectors, twelve broadcasts, 24 FMAs. Each element is the same fused
 * chain over k from zero as in the 6 x 16 AVX2 kernel and the portable
 * one, stored the same way: the same bits, at twice the width. Short
 * last panels run padded to twelve rows. */
__attribute__((target("avx512f"))) static void ukr_avx512_12x32(int64_t kc, const float *restrict a,
                                                               const float *restrict b, float *restrict c,
                                                               int64_t ldc, float alpha, float beta, int m, int n) {
    ukr_avx512_body(kc, a, b, c, ldc, alpha, beta, m, n, NULL, 0);
}

__attribute__((target("avx512f"))) static void ukr_avx512_12x32_pf(int64_t kc, const float *restrict a,
                                                                  const float *restrict b, float *restrict c,
                                                                  int64_t ldc, float alpha, float beta, int m,
                                                                  int n, const char *pf, size_t pf_bytes) {
    ukr_avx512_body(kc, a, b, c, ldc, alpha, beta, m, n, pf, pf_bytes);
}

/* Short last row panels, as tail_avx2 for the 6 x 16 kernel: R rows over P
 * panels of 32 columns (R * 2P <= 16 accumulators), each element the same
 * chain and store as inside a full 12 x 32 tile. A's panel keeps its
 * stride of 12. */
__attribute__((target("avx512f"), always_inline)) static inline void
tail_avx512(const int R, const int P, int64_t kc, const float *restrict a, const float *restrict b, int64_t ps,
            float *restrict c, int64_t ldc, float alpha, float beta, int m, int n) {
    __m512 r[8][4];
    _Pragma("GCC unroll 8") for (int i = 0; i < R; i++)
        _Pragma("GCC unroll 4") for (int h = 0; h < 2 * P; h++)
            r[i][h] = _mm512_setzero_ps();
    for (int64_t p = 0; p < kc; p++, a += 12, b += 32) {
        __m512 bv[4];
        _Pragma("GCC unroll 4") for (int h = 0; h < 2 * P; h++)
            bv[h] = _mm512_loadu_ps(b + (h / 2) * ps + 16 * (h % 2));
        _Pragma("GCC unroll 8") for (int i = 0; i < R; i++) {
            __m512 x = _mm512_set1_ps(a[i]);
            _Pragma("GCC unroll 4") for (int h = 0; h < 2 * P; h++)
                r[i][h] = _mm512_fmadd_ps(x, bv[h], r[i][h]);
        }
    }
    float acc[8][64] = {{0}}; /* zeroed: see tail_avx2 */
    _Pragma("GCC unroll 8") for (int i = 0; i < R; i++)
        _Pragma("GCC unroll 4") for (int h = 0; h < 2 * P; h++)
            _mm512_storeu_ps(acc[i] + 16 * h, r[i][h]);
    UKR_STORE(R, 32 * P);
}

/* m <= 4: two panels at once (n > 32), else one; m 5..8: 8 x 32; more: 12 x 32. */
__attribute__((target("avx512f"))) static void tail_avx512_rows(int64_t kc, const float *a, const float *b,
                                                               int64_t ps, float *c, int64_t ldc, float alpha,
                                                               float beta, int m, int n) {
    if (m <= 4 && n > 32)
        tail_avx512(4, 2, kc, a, b, ps, c, ldc, alpha, beta, m, n);
    else if (m <= 4)
        tail_avx512(4, 1, kc, a, b, ps, c, ldc, alpha, beta, m, n);
    else if (m <= 8)
        tail_avx512(8, 1, kc, a, b, ps, c, ldc, alpha, beta, m, n);
    else
        ukr_avx512_12x32(kc, a, b, c, ldc, alpha, beta, m, n);
}

/* panel_dot_c for NR == 32 in ukr_avx512_12x32's order (one chain per
 * column and K slice from zero, the slices added in order), np <= 4
 * panels side by side: eight chains and four streams in flight. */
__attribute__((target("avx512f"), always_inline)) static inline void
panel_dot512_np(const int NP, const float *a, int64_t inca, const float *panels, int64_t bps, int64_t K,
                float *out) {
    __m512 acc[8], s[8];
#pragma GCC unroll 8
    for (int i = 0; i < 2 * NP; i++)
        acc[i] = _mm512_setzero_ps();
    for (int64_t p0 = 0; p0 < K; p0 += KC) {
        int64_t kb = sn_imin(KC, K - p0);
#pragma GCC unroll 8
        for (int i = 0; i < 2 * NP; i++)
            s[i] = _mm512_setzero_ps();
        for (int64_t p = p0; p < p0 + kb; p++) {
            __m512 x = _mm512_set1_ps(a[p * inca]);
#pragma GCC unroll 4
            for (int t = 0; t < NP; t++) {
                const float *bb = panels + t * bps + p * 32;
                s[2 * t] = _mm512_fmadd_ps(x, _mm512_loadu_ps(bb), s[2 * t]);
                s[2 * t + 1] = _mm512_fmadd_ps(x, _mm512_loadu_ps(bb + 16), s[2 * t + 1]);
            }
        }
#pragma GCC unroll 8
        for (int i = 0; i < 2 * NP; i++)
            acc[i] = p0 == 0 ? s[i] : _mm512_add_ps(s[i], acc[i]);
    }
#pragma GCC unroll 8
    for (int i = 0; i < 2 * NP; i++)
        _mm512_storeu_ps(out + 16 * i, acc[i]);
}

__attribute__((target("avx512f"))) static void panel_dot_avx512(const float *a, int64_t inca, const float *panels,
                                                               int64_t bps, int np, int64_t K, int nr, float *out) {
    if (nr != 32) {
        panel_dot_c(a, inca, panels, bps, np, K, nr, out);
        return;
    }
    switch (np) {
    case 4: panel_dot512_np(4, a, inca, panels, bps, K, out); break;
    case 3: panel_dot512_np(3, a, inca, panels, bps, K, out); break;
    case 2: panel_dot512_np(2, a, inca, panels, bps, K, out); break;
    default: panel_dot512_np(1, a, inca, panels, bps, K, out); break;
    }
}
#endif

static const kset k_kset_c = {&k_ukr_c, skinny_c, dot_c, panel_dot_c};
#ifdef SN_HAVE_NEON_KERNEL
/* The portable skinny and dot loops: gcc vectorizes them with NEON. */
static const kset k_kset_neon = {&k_ukr_neon, skinny_c, dot_c, panel_dot_neon};
#endif
#ifdef SN_HAVE_AVX2_KERNEL
static const kset k_kset_avx2 = {&k_ukr_avx2, skinny_avx2, dot_avx2, panel_dot_avx2};
#endif
#ifdef SN_HAVE_AVX512_KERNEL
/* B read in place (skinny, dot) stays on the AVX2 loops: bound by memory */
static const ukr k_ukr_avx512 = {"avx512-12x32", 12, 32, ukr_avx512_12x32, tail_avx512_rows, ukr_avx512_12x32_pf};
static const kset k_kset_avx512 = {&k_ukr_avx512, skinny_avx2, dot_avx2, panel_dot_avx512};
#endif

bool sn_gemm_isa_available(sn_gemm_isa isa) {
    switch (isa) {
    case SN_GEMM_ISA_BEST:
    case SN_GEMM_ISA_C:
        return true;
    case SN_GEMM_ISA_AVX2:
#ifdef SN_HAVE_AVX2_KERNEL
        return sn_cpu_avx2_fma();
#else
        return false;
#endif
    case SN_GEMM_ISA_AVX512:
#ifdef SN_HAVE_AVX512_KERNEL
        return sn_cpu_avx2_fma() && sn_cpu_avx512f();
#else
        return false;
#endif
    case SN_GEMM_ISA_NEON:
#ifdef SN_HAVE_NEON_KERNEL
        return true; /* NEON is part of every AArch64 CPU */
#else
        return false;
#endif
    }
    return false;
}

static const kset *kset_select(sn_gemm_isa isa) {
#ifdef SN_HAVE_NEON_KERNEL
    if (isa == SN_GEMM_ISA_BEST || isa == SN_GEMM_ISA_NEON)
        return &k_kset_neon;
#endif
#ifdef SN_HAVE_AVX512_KERNEL
    if ((isa == SN_GEMM_ISA_BEST || isa == SN_GEMM_ISA_AVX512) && sn_gemm_isa_available(SN_GEMM_ISA_AVX512))
        return &k_kset_avx512;
#endif
#ifdef SN_HAVE_AVX2_KERNEL
    if ((isa == SN_GEMM_ISA_BEST || isa == SN_GEMM_ISA_AVX2) && sn_gemm_isa_available(SN_GEMM_ISA_AVX2))
        return &k_kset_avx2;
#endif
    (void)isa;
    return &k_kset_c;
}

static const ukr *ukr_select(void) { return kset_select(SN_GEMM_ISA_BEST)->ukr; }

const char *sn_sgemm_kernel_name(void) { return ukr_select()->name; }

/* ---- reference ----------------------------------------------------------- */

void sn_sgemm_ref(int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
                  const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                  float *C, int64_t ldc) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0;
            for (int64_t p = 0; p < K; p++) {
                float a = transA ? A[p * lda + i] : A[i * lda + p];
                float b = transB ? B[j * ldb + p] : B[p * ldb + j];
                s += (double)a * b;
            }
            float *c = &C[i * ldc + j];
            *c = beta == 0.0f ? (float)(alpha * s) : (float)(alpha * s + (double)beta * *c);
        }
}

/* ---- vector cases ---------------------------------------------------------- */

static void skinny_task(void *arg, int64_t t0, int64_t t1) {
    const skinny_job *g = arg;
    for (int64_t t = t0; t < t1; t++) {
        int64_t j0 = t * g->width, n = sn_imin(g->width, g->N - j0);
        if (!g->transB) {
            g->ks->skinny(g, j0, n);
            continue;
        }
        /* M == 1, B(p, j) = B[j*ldb + p]: dot products over B's rows */
        int64_t inca = g->transA ? g->lda : 1;
        for (int64_t j = j0; j < j0 + n; j++) {
            float s = g->ks->dot(g->A, inca, g->B + j * g->ldb, g->K);
            float *c = &g->C[j];
            *c = g->beta == 0.0f ? g->alpha * s : g->alpha * s + g->beta * *c;
        }
    }
}

static inline void scale_c(float *c, float beta) {
    *c = beta == 0.0f ? 0.0f : *c * beta;
}

/* N == 1: c[i] = alpha * sum_p A(i, p) * b[p] + beta * c[i], rows [i0, i1). */
typedef struct gemv_job {
    const kset *ks;
    int transA, transB;
    int64_t M, N, K;
    float alpha, beta;
    const float *A, *B;
    int64_t lda, ldb, ldc;
    float *C;
} gemv_job;

static void gemv_col_task(void *arg, int64_t i0, int64_t i1) {
    const gemv_job *g = arg;
    int64_t incb = g->transB ? 1 : g->ldb;
    if (!g->transA) { /* dot's y must be contiguous: the A row is */
        for (int64_t i = i0; i < i1; i++) {
            float s = g->ks->dot(g->B, incb, g->A + i * g->lda, g->K);
            float *c = &g->C[i * g->ldc];
            *c = g->beta == 0.0f ? g->alpha * s : g->alpha * s + g->beta * *c;
        }
        return;
    }
    /* A(i, p) = A[p*lda + i]: axpy over rows */
    for (int64_t i = i0; i < i1; i++)
        scale_c(&g->C[i * g->ldc], g->beta);
    for (int64_t p = 0; p < g->K; p++) {
        float b = g->alpha * g->B[p * incb];
        const float *a = g->A + p * g->lda;
        for (int64_t i = i0; i < i1; i++)
            g->C[i * g->ldc] += b * a[i];
    }
}

/* Skinny when B can be read in place once: few rows of A and B row-major,
 * or one row of A (dot products against B's rows). */
static bool is_skinny(int transB, int64_t M, int64_t N) {
    return N > 1 && (M == 1 || (!transB && M <= SKINNY_M));
}

/* M == 1, B row-major and not too wide: threads split K instead, so that
 * each streams one contiguous band of B's rows (the best access pattern
 * there is); partial rows go to the caller's stack (64 KiB) and are summed
 * in a fixed order (results do not depend on timing). Four bands per thread:
 * a worker that wakes late (a pool wake-up costs up to ~100 us on some VMs,
 * as much as a whole 576 x 576 GEMV) leaves its bands to the others instead
 * of holding up the call. */
#define KSPLIT_FLOATS 16384

typedef struct ksplit_job {
    const skinny_job *g;
    int64_t rows; /* rows of B per task (multiple of 4) */
    float *part;  /* [n_tasks, N] */
} ksplit_job;

static void ksplit_task(void *arg, int64_t t0, int64_t t1) {
    const ksplit_job *kj = arg;
    const skinny_job *g = kj->g;
    for (int64_t t = t0; t < t1; t++) {
        int64_t k0 = t * kj->rows, k1 = sn_imin(g->K, k0 + kj->rows);
        skinny_job sub = *g;
        sub.A = g->A + k0 * (g->transA ? g->lda : 1);
        sub.B = g->B + k0 * g->ldb;
        sub.K = k1 - k0;
        sub.C = kj->part + t * g->N;
        sub.ldc = g->N;
        sub.beta = 0.0f;
        g->ks->skinny(&sub, 0, g->N);
    }
}

static void skinny_run(const kset *ks, int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
                       const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                       int64_t ldc, sn_pool *pool) {
    skinny_job g = {ks, transA, transB, M, N, K, alpha, beta, A, B, lda, ldb, ldc, C, 0};
    int threads = sn_pool_size(pool);
    if ((double)M * (double)N * (double)K < 32768.0)
        threads = 1;
    if (threads > 1 && M == 1 && !transB && N * 2 <= KSPLIT_FLOATS && K >= 64 * threads) {
        float part[KSPLIT_FLOATS];
        int64_t n_tasks = sn_imin(sn_imin(4 * threads, KSPLIT_FLOATS / N), K / 16);
        ksplit_job kj = {&g, round_up((K + n_tasks - 1) / n_tasks, 4), part};
        n_tasks = (K + kj.rows - 1) / kj.rows;
        sn_pool_for(pool, n_tasks, 1, ksplit_task, &kj);
        for (int64_t j = 0; j < N; j++) {
            float sum = beta == 0.0f ? 0.0f : beta * C[j];
            for (int64_t t = 0; t < n_tasks; t++)
                sum += part[t * N + j];
            C[j] = sum;
        }
        return;
    }
    /* Four tasks per thread with one row of A (the pool balances them), two
     * with more (per-row overhead wants long rows), 16-float multiples, C's
     * slice small enough for L1 when M > 1. */
    int64_t per = M == 1 ? 4 * threads : 2 * threads;
    int64_t w = (N + per - 1) / per;
    w = (w + 15) / 16 * 16;
    int64_t cap = M == 1 ? 2048 : 512;
    w = w < 64 ? 64 : w > cap ? cap : w;
    g.width = w;
    int64_t n_tasks = (N + w - 1) / w;
    sn_pool_for(threads > 1 ? pool : NULL, n_tasks, 1, skinny_task, &g);
}

/* ---- blocked path ---------------------------------------------------------- */

typedef struct gemm_job {
    const ukr *k;
    int transA, transB;
    int64_t M, N, K;
    float alpha, beta;
    const float *A, *B;
    int64_t lda, ldb, ldc;
    float *C;
    int64_t mc, nc, kc;   /* block sizes actually used */
    int64_t n_jc;         /* column blocks */
    int64_t rows_per_task; /* rows of C per task (multiple of MR) */
    char *slots;          /* n_slots * slot_bytes */
    size_t slot_bytes;
    int n_slots;
    int *busy;            /* n_slots flags */
    float *apack;         /* A packed once for all tasks (see apack_bytes), or NULL */
    const float *bpk;     /* B prepacked whole (sn_sgemm_pack_b), or NULL: packed per block */
    sn_sgemm_bfn bfn;     /* B produced per block by the caller (sn_sgemm_cb_ws), or NULL */
    void *bctx;
    int64_t bps;          /* floats between bpk's panels */
    int64_t mpad;         /* M rounded up to MR */
} gemm_job;

static void block_sizes(const ukr *k, int64_t M, int64_t N, int64_t K, int64_t *mc,
                        int64_t *nc, int64_t *kc) {
    *kc = K < KC ? K : KC;
    *mc = sn_imin(MC, round_up(M, k->mr));
    *nc = sn_imin(NC, round_up(N, k->nr));
}

/* Floats from one packed B panel (kb x NR) to the next. One cache line
 * more than the panel: with kb*NR*4 a multiple of 4 KiB every panel would
 * start in the same L1 set, and packing, which writes one line of each
 * panel per row of B, would evict its own lines (8 ways, 16 panels). */
static int64_t b_panel_stride(int nr, int64_t kb) { return kb * nr + 16; }

static size_t slot_size(const ukr *k, int64_t M, int64_t N, int64_t K) {
    int64_t mc, nc, kc;
    block_sizes(k, M, N, K, &mc, &nc, &kc);
    size_t floats = (size_t)round_up(mc, k->mr) * (size_t)kc +
                    (size_t)(round_up(nc, k->nr) / k->nr) * (size_t)b_panel_stride(k->nr, kc);
    return (floats * sizeof(float) + SLOT_ALIGN - 1) / SLOT_ALIGN * SLOT_ALIGN;
}

/* A is packed once, before the tasks, when it is small (prefill: a few
 * hundred rows): otherwise every column block would pack it again. Layout:
 * K slices of kc; slice p0 at p0 * mpad holds the MR-row panels of all rows,
 * panel of row i0 at i0 * kb. */
#define APACK_MAX ((size_t)8 << 20)

static size_t apack_bytes(const ukr *k, int64_t M, int64_t K) {
    size_t n = (size_t)round_up(M, k->mr) * (size_t)K * sizeof(float);
    return n <= APACK_MAX ? n + SLOT_ALIGN : 0;
}

/* What the workspace reserves for it: never less than any smaller M uses.
 * A kernel prepared at an input bound (many rows, A not packed up front)
 * also serves runs with fewer rows, which do pack A up front, in the same
 * workspace: the size must grow with M (it did not: 0.7 MB at 1,500 rows of
 * K = 1536, 6.9 MB at 1,000). */
static size_t apack_reserve(const ukr *k, int64_t M, int64_t K) {
    size_t n = (size_t)round_up(M, k->mr) * (size_t)K * sizeof(float);
    return (n < APACK_MAX ? n : APACK_MAX) + SLOT_ALIGN;
}

static bool is_vector_case(int64_t M, int64_t N, int64_t K) {
    return M == 1 || N == 1 || K == 0 || M == 0 || N == 0;
}

static size_t workspace_for(const ukr *k, int64_t M, int64_t N, int64_t K, int n_threads) {
    if (is_vector_case(M, N, K))
        return 0;
    if (n_threads < 1)
        n_threads = 1;
    size_t header = ((size_t)n_threads * sizeof(int) + SLOT_ALIGN - 1) / SLOT_ALIGN * SLOT_ALIGN;
    /* slack so the slots can start on a 64-byte boundary */
    return header + (size_t)n_threads * slot_size(k, M, N, K) + SLOT_ALIGN + apack_reserve(k, M, K);
}

size_t sn_sgemm_workspace(int64_t M, int64_t N, int64_t K, int n_threads) {
    return workspace_for(ukr_select(), M, N, K, n_threads);
}

/* ap: panels of MR rows, ap[(panel*kb + p)*MR + i] = A(i0 + panel*MR + i, p0 + p). */
static void pack_a(const gemm_job *g, int64_t i0, int64_t mb, int64_t p0, int64_t kb, float *ap) {
    const int mr = g->k->mr;
    for (int64_t ir = 0; ir < mb; ir += mr) {
        int m = (int)sn_imin(mr, mb - ir);
        float *dst = ap + ir * kb;
        if (!g->transA && m == 6 && mr == 6) { /* six row streams in, one sequential stream out */
#ifdef SN_HAVE_AVX2_KERNEL
            if (g->k == &k_ukr_avx2) {
                pack_a6_avx2(g->A + (i0 + ir) * g->lda + p0, g->lda, kb, dst);
                continue;
            }
#endif
            const float *r0 = g->A + (i0 + ir) * g->lda + p0, *r1 = r0 + g->lda, *r2 = r1 + g->lda;
            const float *r3 = r2 + g->lda, *r4 = r3 + g->lda, *r5 = r4 + g->lda;
            for (int64_t p = 0; p < kb; p++, dst += 6) {
                dst[0] = r0[p], dst[1] = r1[p], dst[2] = r2[p];
                dst[3] = r3[p], dst[4] = r4[p], dst[5] = r5[p];
            }
            continue;
        } else if (!g->transA && m == mr) { /* mr row streams in, one sequential stream out */
            const float *src = g->A + (i0 + ir) * g->lda + p0;
#ifdef SN_HAVE_AVX512_KERNEL
            if (g->k == &k_ukr_avx512) {
                pack_a12_avx2(src, g->lda, kb, dst);
                continue;
            }
#endif
            for (int64_t p = 0; p < kb; p++, dst += mr)
                for (int i = 0; i < mr; i++)
                    dst[i] = src[i * g->lda + p];
            continue;
        } else if (!g->transA) {
            for (int i = 0; i < m; i++) {
                const float *src = g->A + (i0 + ir + i) * g->lda + p0;
                for (int64_t p = 0; p < kb; p++)
                    dst[p * mr + i] = src[p];
            }
        } else {
            for (int64_t p = 0; p < kb; p++) {
                const float *src = g->A + (p0 + p) * g->lda + i0 + ir;
                for (int i = 0; i < m; i++)
                    dst[p * mr + i] = src[i];
            }
        }
        for (int i = m; i < mr; i++)
            for (int64_t p = 0; p < kb; p++)
                dst[p * mr + i] = 0.0f;
    }
}

/* bp: panels of NR columns, bp[panel*ps + p*NR + j] = B(p0 + p, j0 + panel*NR + j),
 * ps = b_panel_stride(NR, kb). */
static void pack_b(const gemm_job *g, int64_t j0, int64_t nb, int64_t p0, int64_t kb, float *bp) {
    const int nr = g->k->nr;
    const int64_t ps = b_panel_stride(nr, kb);
    if (!g->transB) {
        /* Row by row: each row of the block is one sequential read (panel
         * by panel would touch one cache line per row and page, kb times
         * over: latency-bound on weights that come from memory). */
        int64_t full = nb / nr * nr;
        for (int64_t p = 0; p < kb; p++) {
            const float *src = g->B + (p0 + p) * g->ldb + j0;
            float *d = bp + p * nr;
            if (p + 8 < kb) /* weights come from memory: keep 8 rows of reads in flight */
                for (int64_t j = 0; j < nb; j += 16)
                    __builtin_prefetch(src + 8 * g->ldb + j);
            if (nr == 8) /* constant size: inlined vector moves, not calls (16: pack_b_avx2) */
                for (int64_t jr = 0; jr < full; jr += 8)
                    memcpy(d + jr / 8 * ps, src + jr, 8 * sizeof(float));
            else
                for (int64_t jr = 0; jr < full; jr += nr)
                    memcpy(d + jr / nr * ps, src + jr, sizeof(float) * (size_t)nr);
            if (full < nb) {
                float *e = d + full / nr * ps;
                int n = (int)(nb - full), j = 0;
                for (; j < n; j++)
                    e[j] = src[full + j];
                for (; j < nr; j++)
                    e[j] = 0.0f;
            }
        }
        return;
    }
    for (int64_t jr = 0; jr < nb; jr += nr) {
        int n = (int)sn_imin(nr, nb - jr);
        float *dst = bp + jr / nr * ps;
        for (int j = 0; j < n; j++) {
            const float *src = g->B + (j0 + jr + j) * g->ldb + p0;
            for (int64_t p = 0; p < kb; p++)
                dst[p * nr + j] = src[p];
        }
        for (int j = n; j < nr; j++)
            for (int64_t p = 0; p < kb; p++)
                dst[p * nr + j] = 0.0f;
    }
}

/* pack_b for the 16-wide AVX2 kernel and B row-major: the same row by row
 * copy in 32-byte moves (the baseline build copies 16 bytes at a time). */
#ifdef SN_HAVE_AVX2_KERNEL
__attribute__((target("avx2"))) static void pack_b_avx2(const gemm_job *g, int64_t j0, int64_t nb, int64_t p0,
                                                        int64_t kb, float *bp) {
    if (g->transB) {
        pack_b(g, j0, nb, p0, kb, bp);
        return;
    }
    const int64_t ps = b_panel_stride(16, kb), full = nb / 16 * 16;
    for (int64_t p = 0; p < kb; p++) {
        const float *src = g->B + (p0 + p) * g->ldb + j0;
        float *d = bp + p * 16;
        if (p + 8 < kb) /* as in pack_b: 8 rows of reads in flight */
            for (int64_t j = 0; j < nb; j += 16)
                _mm_prefetch((const char *)(src + 8 * g->ldb + j), _MM_HINT_T0);
        for (int64_t jr = 0; jr < full; jr += 16, d += ps) {
            _mm256_storeu_ps(d, _mm256_loadu_ps(src + jr));
            _mm256_storeu_ps(d + 8, _mm256_loadu_ps(src + jr + 8));
        }
        if (full < nb) { /* the last panel: n < 16 columns, zeros after */
            int n = (int)(nb - full), j = 0;
            for (; j < n; j++)
                d[j] = src[full + j];
            for (; j < 16; j++)
                d[j] = 0.0f;
        }
    }
}
#endif

static void pack_b_any(const gemm_job *g, int64_t j0, int64_t nb, int64_t p0, int64_t kb, float *bp) {
    if (g->bfn) {
        g->bfn(g->bctx, j0, nb, p0, kb, bp, b_panel_stride(g->k->nr, kb), g->k->nr);
        return;
    }
#ifdef SN_HAVE_AVX2_KERNEL
    if (g->k == &k_ukr_avx2) {
        pack_b_avx2(g, j0, nb, p0, kb, bp);
        return;
    }
#endif
    pack_b(g, j0, nb, p0, kb, bp);
}

/* The up-front packing of a small A (apack), unit u: K slice u / groups,
 * rows of panel group u % groups. */
#define APACK_PANELS 4
static void apack_task(void *arg, int64_t u0, int64_t u1) {
    const gemm_job *g = arg;
    const int mr = g->k->mr;
    int64_t groups = (g->mpad / mr + APACK_PANELS - 1) / APACK_PANELS;
    for (int64_t u = u0; u < u1; u++) {
        int64_t p0 = u / groups * g->kc, kb = sn_imin(g->kc, g->K - p0);
        int64_t i0 = u % groups * APACK_PANELS * mr, mb = sn_imin((int64_t)APACK_PANELS * mr, g->M - i0);
        if (mb > 0)
            pack_a(g, i0, mb, p0, kb, g->apack + p0 * g->mpad + i0 * kb);
    }
}

static void gemm_task(void *arg, int64_t t0, int64_t t1) {
    const gemm_job *g = arg;
    int slot = 0;
    while (__atomic_exchange_n(&g->busy[slot], 1, __ATOMIC_ACQUIRE))
        slot = (slot + 1) % g->n_slots; /* at most n_slots tasks run at once */
    float *ap = (float *)(g->slots + (size_t)slot * g->slot_bytes);
    float *bp = ap + round_up(g->mc, g->k->mr) * g->kc;
    const int mr = g->k->mr, nr = g->k->nr;

    for (int64_t t = t0; t < t1; t++) {
        int64_t jc = t % g->n_jc, ic = t / g->n_jc;
        /* the column blocks share the panels evenly (none wider than nc),
         * the wider ones first: 18 panels in 4 blocks are 5, 5, 4, 4, and
         * two threads taking blocks in turn do 9 each (blocks of nc = 5
         * panels were 5, 5, 5, 3: one thread did 10) */
        int64_t panels = (g->N + nr - 1) / nr, q = panels / g->n_jc, rem = panels % g->n_jc;
        int64_t j0 = (jc * q + sn_imin(jc, rem)) * nr;
        int64_t nb = sn_imin(j0 + (q + (jc < rem)) * nr, g->N) - j0;
        int64_t r0 = ic * g->rows_per_task, r1 = sn_imin(g->M, r0 + g->rows_per_task);
        for (int64_t p0 = 0; p0 < g->K; p0 += g->kc) {
            int64_t kb = sn_imin(g->kc, g->K - p0);
            float beta = p0 == 0 ? g->beta : 1.0f;
            /* the K slice of B's panels: prepacked (rows p0.. of each
             * full-K panel) or packed here */
            const float *b = g->bpk ? g->bpk + j0 / nr * g->bps + p0 * nr : bp;
            int64_t ps = g->bpk ? g->bps : b_panel_stride(nr, kb);
            if (!g->bpk)
                pack_b_any(g, j0, nb, p0, kb, bp);
            for (int64_t i0 = r0; i0 < r1; i0 += g->mc) {
                int64_t mb = sn_imin(g->mc, r1 - i0);
                const float *a = ap;
                if (g->apack)
                    a = g->apack + p0 * g->mpad + i0 * kb;
                else
                    pack_a(g, i0, mb, p0, kb, ap);
                for (int64_t jr = 0; jr < nb; jr += nr) {
                    int n = (int)sn_imin(nr, nb - jr);
                    /* A prepacked B comes from memory on the first row
                     * block: the next panel's slice (or the next K slice's
                     * first panel) is fetched, a share per micro-kernel
                     * call, while this one is used; else each panel's
                     * first call waits for it. fp32 SmolLM2 prefill, the
                     * MatMul nodes: -3 to -4% each (smallest of 5 passes) */
                    const char *nx = NULL;
                    size_t nx_bytes = (size_t)kb * (size_t)nr * sizeof(float), nx_step = 0;
                    if (g->bpk && i0 == r0) {
                        if (jr + nr < nb)
                            nx = (const char *)(b + (jr / nr + 1) * ps);
                        else if (p0 + kb < g->K)
                            nx = (const char *)(g->bpk + j0 / nr * g->bps + (p0 + kb) * nr);
                        nx_step = (nx_bytes / (size_t)((mb + mr - 1) / mr) + 63) & ~(size_t)63;
                    }
                    size_t nx_at = 0;
                    for (int64_t ir = 0; ir < mb; ir += mr) {
                        int m = (int)sn_imin(mr, mb - ir);
                        float *c = g->C + (i0 + ir) * g->ldc + j0 + jr;
                        if (nx && m == mr && g->k->fn_pf && nx_at < nx_bytes) {
                            size_t len = sn_imin((int64_t)nx_step, (int64_t)(nx_bytes - nx_at));
                            g->k->fn_pf(kb, a + ir * kb, b + jr / nr * ps, c, g->ldc, g->alpha, beta, m, n,
                                        nx + nx_at, len);
                            nx_at += len;
                            continue;
                        }
                        for (size_t e = nx_at + nx_step; nx && nx_at < e && nx_at < nx_bytes; nx_at += 64)
                            __builtin_prefetch(nx + nx_at);
                        if (m == mr || !g->k->tail)
                            g->k->fn(kb, a + ir * kb, b + jr / nr * ps, c, g->ldc, g->alpha, beta, m, n);
                        else if (m > 2) /* one panel */
                            g->k->tail(kb, a + ir * kb, b + jr / nr * ps, ps, c, g->ldc, g->alpha, beta, m, n);
                        else if (jr / nr % 2 == 0) /* this panel and the next (the odd ones are done) */
                            g->k->tail(kb, a + ir * kb, b + jr / nr * ps, ps, c, g->ldc, g->alpha, beta, m,
                                       (int)sn_imin(2 * nr, nb - jr));
                    }
                }
            }
        }
    }
    __atomic_store_n(&g->busy[slot], 0, __ATOMIC_RELEASE);
}

/* ---- prepacked B ------------------------------------------------------------ */

/* A constant B packed once (sn_sgemm_pack_b): a header, then the panels of
 * NR columns, each all K rows long (K * NR floats, contiguous, padding
 * columns zero), b_panel_stride(NR, K) floats apart. The blocked path reads
 * rows p0.. of each panel in place of pack_b's block; the one-row product
 * streams whole panels. */
typedef struct bpack_hdr {
    uint32_t magic;
    int32_t nr;
    int64_t N, K;
} bpack_hdr;

#define BPACK_MAGIC 0x42504b31u /* "BPK1" */
#define BPACK_DATA 64           /* panels start one cache line in */

static int64_t bpack_panels(int nr, int64_t N) { return (N + nr - 1) / nr; }

/* M == 1 against prepacked B: tasks are units of four whole panels. */
typedef struct pgemv_job {
    const kset *ks;
    int nr;
    int64_t N, K, inca, bps;
    float alpha, beta;
    const float *a, *bpk;
    float *c;
} pgemv_job;

static void pgemv_task(void *arg, int64_t u0, int64_t u1) {
    const pgemv_job *g = arg;
    float out[4 * NR_MAX];
    int64_t panels = bpack_panels(g->nr, g->N);
    for (int64_t q = 4 * u0; q < 4 * u1 && q < panels; q += 4) {
        int np = (int)sn_imin(4, panels - q);
        g->ks->panel_dot(g->a, g->inca, g->bpk + q * g->bps, g->bps, np, g->K, g->nr, out);
        int64_t j0 = q * g->nr, n = sn_imin(np * g->nr, g->N - j0);
        float *c = g->c + j0;
        for (int64_t j = 0; j < n; j++)
            c[j] = g->beta == 0.0f ? g->alpha * out[j] : g->alpha * out[j] + g->beta * c[j];
    }
}

/* sn_sgemm_ref over prepacked B: B(p, j) = panel j / nr, row p, lane j % nr. */
static void packed_ref(int nr, int64_t bps, int transA, int64_t M, int64_t N, int64_t K, float alpha,
                       const float *A, int64_t lda, const float *bpk, float beta, float *C, int64_t ldc) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0;
            for (int64_t p = 0; p < K; p++)
                s += (double)(transA ? A[p * lda + i] : A[i * lda + p]) * bpk[j / nr * bps + p * nr + j % nr];
            float *c = &C[i * ldc + j];
            *c = beta == 0.0f ? (float)(alpha * s) : (float)(alpha * s + (double)beta * *c);
        }
}

static void cb_ref(const ukr *k, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, sn_sgemm_bfn bfn,
                   void *ctx, float *C, int64_t ldc);

static void sgemm_impl(const kset *ks, int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
                       const float *A, int64_t lda, const float *B, int64_t ldb, const float *bpk, float beta,
                       float *C, int64_t ldc, sn_pool *pool, void *ws, size_t ws_size, sn_sgemm_bfn bfn,
                       void *bctx) {
    if (M <= 0 || N <= 0)
        return;
    if (K == 0 || alpha == 0.0f) {
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++)
                scale_c(&C[i * ldc + j], beta);
        return;
    }
    int n_threads = sn_pool_size(pool);
    const int64_t bps = b_panel_stride(ks->ukr->nr, K);
    if (bfn) /* the blocked path only */
        goto blocked;
    if (bpk && M == 1) {
        pgemv_job pg = {ks, ks->ukr->nr, N, K, transA ? lda : 1, bps, alpha, beta, A, bpk, C};
        /* tasks are units of four panels (eight FMA chains in flight: only
         * the last unit is short); >= 64K multiply-adds per task: below
         * that a wake-up costs more */
        int64_t units = (bpack_panels(ks->ukr->nr, N) + 3) / 4;
        int64_t grain = sn_imax(1, 65536 / (K * ks->ukr->nr * 4));
        sn_pool_for(N * K < 32768 ? NULL : pool, units, grain, pgemv_task, &pg);
        return;
    }
    if (!bpk && is_skinny(transB, M, N)) {
        skinny_run(ks, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, pool);
        return;
    }
    if (!bpk && N == 1) {
        gemv_job g = {ks, transA, transB, M, N, K, alpha, beta, A, B, lda, ldb, ldc, C};
        int64_t grain = sn_imax(16, 65536 / K); /* >= 64K multiply-adds per task */
        sn_pool_for(pool, M, grain, gemv_col_task, &g);
        return;
    }

blocked:;
    gemm_job g = {0};
    g.k = ks->ukr;
    g.bfn = bfn, g.bctx = bctx;
    g.transA = transA, g.transB = transB;
    g.M = M, g.N = N, g.K = K;
    g.alpha = alpha, g.beta = beta;
    g.A = A, g.B = B, g.lda = lda, g.ldb = ldb, g.ldc = ldc, g.C = C;
    g.bpk = bpk, g.bps = bps;
    block_sizes(g.k, M, N, K, &g.mc, &g.nc, &g.kc);

    /* Tasks: column blocks of nc; when there are fewer than ~2 per thread
     * and the product is big enough to be worth threads, split rows too. */
    if (sn_sgemm_serial(M, N, K))
        n_threads = 1;
    g.n_jc = (N + g.nc - 1) / g.nc;
    if (n_threads > 1 && g.n_jc < 2 * n_threads) { /* narrower column blocks before splitting rows */
        int64_t nc = round_up((N + 2 * n_threads - 1) / (2 * n_threads), g.k->nr);
        if (nc >= 2 * g.k->nr && nc < g.nc) {
            g.nc = nc;
            g.n_jc = (N + nc - 1) / nc;
        }
    }
    /* a multiple of the threads where the panels allow: 36 panels in five
     * blocks of at most 8 left one thread 22 panels and the other 14 */
    if (n_threads > 1 && g.n_jc % n_threads &&
        (g.n_jc + n_threads - 1) / n_threads * n_threads <= (N + g.k->nr - 1) / g.k->nr)
        g.n_jc = (g.n_jc + n_threads - 1) / n_threads * n_threads;
    int64_t n_ic = 1;
    if (n_threads > 1 && g.n_jc < 2 * n_threads) {
        n_ic = (2 * n_threads + g.n_jc - 1) / g.n_jc;
        n_ic = sn_imin(n_ic, (M + g.k->mr - 1) / g.k->mr);
    }
    g.rows_per_task = round_up((M + n_ic - 1) / n_ic, g.k->mr);
    n_ic = (M + g.rows_per_task - 1) / g.rows_per_task;

    /* As many slots as the workspace holds (it was sized for some thread
     * count t: header(t) + t slots + alignment slack). */
    g.slot_bytes = slot_size(g.k, M, N, K); /* for the block sizes of block_sizes(): g.nc is not larger */
    int t = ws ? sn_pool_size(pool) : 0;
    while (t > 0 && workspace_for(g.k, M, N, K, t) > ws_size)
        t--;
    if (t == 0) { /* no usable workspace: a caller bug, stay correct */
        if (bfn)
            cb_ref(g.k, M, N, K, A, lda, bfn, bctx, C, ldc);
        else if (bpk)
            packed_ref(ks->ukr->nr, bps, transA, M, N, K, alpha, A, lda, bpk, beta, C, ldc);
        else
            sn_sgemm_ref(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    g.n_slots = t;
    size_t header = ((size_t)t * sizeof(int) + SLOT_ALIGN - 1) / SLOT_ALIGN * SLOT_ALIGN;
    g.busy = ws;
    memset(g.busy, 0, (size_t)t * sizeof(int));
    uintptr_t base = (uintptr_t)ws + header;
    base = (base + SLOT_ALIGN - 1) / SLOT_ALIGN * SLOT_ALIGN;
    g.slots = (char *)base;
    if (apack_bytes(g.k, M, K)) {
        uintptr_t ab = base + (size_t)t * g.slot_bytes;
        g.apack = (float *)((ab + SLOT_ALIGN - 1) / SLOT_ALIGN * SLOT_ALIGN);
        g.mpad = round_up(M, g.k->mr);
        /* units of (K slice, APACK_PANELS panels of MR rows), over the threads */
        int64_t groups = (g.mpad / g.k->mr + APACK_PANELS - 1) / APACK_PANELS;
        int64_t units = (K + g.kc - 1) / g.kc * groups;
        sn_pool_for(n_threads > 1 && units > 1 ? pool : NULL, units, 1, apack_task, &g);
    }

    int64_t n_tasks = g.n_jc * n_ic;
    if (n_threads == 1)
        gemm_task(&g, 0, n_tasks);
    else
        sn_pool_for(pool, n_tasks, 1, gemm_task, &g);
}

void sn_sgemm_ws(int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
                 const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                 float *C, int64_t ldc, sn_pool *pool, void *ws, size_t ws_size) {
    sgemm_impl(kset_select(SN_GEMM_ISA_BEST), transA, transB, M, N, K, alpha, A, lda, B, ldb, NULL, beta, C, ldc,
               pool, ws, ws_size, NULL, NULL);
}

void sn_sgemm_isa(sn_gemm_isa isa, int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
                  const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc,
                  sn_pool *pool) {
    const kset *ks = kset_select(isa);
    size_t n = workspace_for(ks->ukr, M, N, K, sn_pool_size(pool));
    void *ws = n ? sn_malloc(n) : NULL;
    if (n && !ws) {
        sn_sgemm_ref(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    sgemm_impl(ks, transA, transB, M, N, K, alpha, A, lda, B, ldb, NULL, beta, C, ldc, pool, ws, n, NULL, NULL);
    sn_free(ws);
}

void sn_sgemm(int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
              const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
              float *C, int64_t ldc, sn_pool *pool) {
    sn_sgemm_isa(SN_GEMM_ISA_BEST, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, pool);
}

/* ---- prepacked B: public side ------------------------------------------------ */

static const float *bpack_data(const void *packed) {
    uintptr_t d = (uintptr_t)packed + BPACK_DATA;
    return (const float *)((d + SLOT_ALIGN - 1) / SLOT_ALIGN * SLOT_ALIGN);
}

size_t sn_sgemm_pack_b_bytes(sn_gemm_isa isa, int64_t N, int64_t K) {
    int nr = kset_select(isa)->ukr->nr;
    return BPACK_DATA + SLOT_ALIGN +
           (size_t)bpack_panels(nr, N) * (size_t)b_panel_stride(nr, K) * sizeof(float);
}

#define BPACK_ROWS 32 /* rows of B per slice (handed to done once packed) */

void sn_sgemm_pack_b(sn_gemm_isa isa, int transB, int64_t N, int64_t K, const float *B, int64_t ldb,
                     void *packed, void (*done)(void *ctx, const void *rows, size_t bytes), void *ctx) {
    const int nr = kset_select(isa)->ukr->nr;
    const int64_t bps = b_panel_stride(nr, K), panels = bpack_panels(nr, N);
    bpack_hdr h = {BPACK_MAGIC, nr, N, K};
    memcpy(packed, &h, sizeof h);
    float *d = (float *)bpack_data(packed);
    /* Slices of B's rows, then sixteen panels at a time, rows in order
     * within them: the reads are runs of 16 * nr floats, the writes stay
     * within ~16 panels, and a slice's rows are never read again once it is
     * done (so the caller may release them). */
    for (int64_t p0 = 0; p0 < K; p0 += BPACK_ROWS) {
        int64_t p1 = sn_imin(K, p0 + BPACK_ROWS);
        for (int64_t q0 = 0; q0 < panels; q0 += 16) {
            int64_t q1 = sn_imin(panels, q0 + 16);
            for (int64_t p = p0; p < p1; p++)
                for (int64_t q = q0; q < q1; q++) {
                    float *dst = d + q * bps + p * nr;
                    if (!transB && (q + 1) * nr <= N) { /* a whole run of B's row */
                        memcpy(dst, B + p * ldb + q * nr, sizeof(float) * (size_t)nr);
                        continue;
                    }
                    for (int j = 0; j < nr; j++) {
                        int64_t col = q * nr + j;
                        dst[j] = col >= N ? 0.0f : transB ? B[col * ldb + p] : B[p * ldb + col];
                    }
                }
        }
        if (done && !transB)
            done(ctx, B + p0 * ldb, (size_t)((p1 - p0) * ldb) * sizeof(float));
    }
    for (int64_t q = 0; q < panels; q++) /* the line of padding after each panel */
        memset(d + q * bps + K * nr, 0, (size_t)(bps - K * nr) * sizeof(float));
}

/* The kernel set whose panel width the packing used (the best when the CPU
 * still has it, else the portable one), or NULL. */
static const kset *bpack_kset(const bpack_hdr *h) {
    const kset *best = kset_select(SN_GEMM_ISA_BEST);
    if (best->ukr->nr == h->nr)
        return best;
    return k_kset_c.ukr->nr == h->nr ? &k_kset_c : NULL;
}

void sn_sgemm_packed_ws(int transA, int64_t M, float alpha, const float *A, int64_t lda, const void *packed,
                        float beta, float *C, int64_t ldc, sn_pool *pool, void *ws, size_t ws_size) {
    bpack_hdr h;
    memcpy(&h, packed, sizeof h);
    const kset *ks = bpack_kset(&h);
    if (!ks) { /* packed for a wider kernel than this CPU runs: stay correct */
        packed_ref(h.nr, b_panel_stride(h.nr, h.K), transA, M, h.N, h.K, alpha, A, lda, bpack_data(packed), beta,
                   C, ldc);
        return;
    }
    sgemm_impl(ks, transA, 0, M, h.N, h.K, alpha, A, lda, NULL, 0, bpack_data(packed), beta, C, ldc, pool, ws,
               ws_size, NULL, NULL);
}

void sn_sgemm_packed(int transA, int64_t M, float alpha, const float *A, int64_t lda, const void *packed,
                     float beta, float *C, int64_t ldc, sn_pool *pool) {
    bpack_hdr h;
    memcpy(&h, packed, sizeof h);
    const kset *ks = bpack_kset(&h);
    size_t n = ks ? workspace_for(ks->ukr, M, h.N, h.K, sn_pool_size(pool)) : 0;
    void *ws = n ? sn_malloc(n) : NULL;
    if (n && !ws) {
        packed_ref(h.nr, b_panel_stride(h.nr, h.K), transA, M, h.N, h.K, alpha, A, lda, bpack_data(packed), beta,
                   C, ldc);
        return;
    }
    sn_sgemm_packed_ws(transA, M, alpha, A, lda, packed, beta, C, ldc, pool, ws, n);
    sn_free(ws);
}

/* ---- B produced by the caller ------------------------------------------------ */

/* Without a workspace (a caller bug): K slices of one panel at a time in a
 * stack buffer, plainly summed into C. */
static void cb_ref(const ukr *k, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, sn_sgemm_bfn bfn,
                   void *ctx, float *C, int64_t ldc) {
    float buf[32 * NR_MAX + 16];
    const int nr = k->nr;
    for (int64_t i = 0; i < M; i++)
        memset(C + i * ldc, 0, sizeof(float) * (size_t)N);
    for (int64_t j0 = 0; j0 < N; j0 += nr) {
        int64_t nb = sn_imin(nr, N - j0);
        for (int64_t p0 = 0; p0 < K; p0 += 32) {
            int64_t kb = sn_imin(32, K - p0);
            bfn(ctx, j0, nb, p0, kb, buf, b_panel_stride(nr, kb), nr);
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < nb; j++) {
                    float s = 0;
                    for (int64_t p = 0; p < kb; p++)
                        s += A[i * lda + p0 + p] * buf[p * nr + j];
                    C[i * ldc + j0 + j] += s;
                }
        }
    }
}

void sn_sgemm_cb_ws(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, sn_sgemm_bfn bfn,
                    void *ctx, float *C, int64_t ldc, sn_pool *pool, void *ws, size_t ws_size) {
    sgemm_impl(kset_select(SN_GEMM_ISA_BEST), 0, 0, M, N, K, 1.0f, A, lda, NULL, 0, NULL, 0.0f, C, ldc, pool, ws,
               ws_size, bfn, ctx);
}
