/* Single-precision GEMM for MatMul, Gemm, Conv and ConvTranspose:
 *   C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C
 * row-major, op(X) = X or X^T. Cache-blocked: B is packed into KC x NC
 * blocks, A into MC x KC blocks, and a register-blocked micro-kernel (chosen
 * at run time by CPU features, see linalg/gemm_f32.c) computes MR x NR tiles. Work
 * is split over the thread pool by column blocks (and row blocks when there
 * are too few column blocks).
 *
 * Skinny products are not packed: with one row of A (decode), or up to 8
 * rows and B row-major (short prefills), B is streamed once, in place; the
 * product is bound by reading B. Threads take column ranges, or with one row
 * of A and N <= 4096 bands of B's rows (partial sums on the stack, added in
 * a fixed order). In the blocked path a small A (<= 8 MiB packed) is packed
 * once per call, not once per column block; B, being the weights, is packed
 * block by block and never kept (no second copy of the weights), unless the
 * caller packed it once beforehand (sn_sgemm_pack_b, below).
 *
 * beta == 0 means C is not read (so NaN/garbage in C is overwritten). */
#ifndef SN_OPS_GEMM_H
#define SN_OPS_GEMM_H

#include "core/core.h"

/* Bytes of scratch sn_sgemm_ws needs for these sizes with a pool of
 * n_threads threads (packing buffers, one set per thread, and the packed A
 * when it is small). 0 when no packing is needed (M == 1 or N == 1); with
 * 2..8 rows and B row-major the skinny path does not use it either, but
 * transB is not known here. */
size_t sn_sgemm_workspace(int64_t M, int64_t N, int64_t K, int n_threads);

/* Threads a kernel's prepare sizes the workspace for (sn_prep_ctx does not
 * know the pool); with a bigger pool the extra threads wait for a slot. */
#define SN_GEMM_PREP_THREADS 16

/* Threads to size sgemm scratch for: n, or SN_GEMM_PREP_THREADS when the
 * caller does not know (an estimate made before the session exists). */
static inline int sn_gemm_threads(int n) { return n > 0 ? n : SN_GEMM_PREP_THREADS; }

/* Below ~4M multiply-adds (~50 us on one core) waking a pool thread costs
 * about as much as it saves (tens of us on VMs): such a product runs on the
 * calling thread (attention products of one head in a prefill are of this
 * size; a batch of them is better split by entries, see MatMul). */
static inline bool sn_sgemm_serial(int64_t M, int64_t N, int64_t K) {
    return (double)M * (double)N * (double)K < 4194304.0;
}

/* The kernel entry point: ws holds ws_size bytes, 16-byte aligned, from
 * sn_sgemm_workspace(M, N, K, t) for some t >= 1; at most t threads work on
 * it. Never allocates. */
void sn_sgemm_ws(int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
                 const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                 float *C, int64_t ldc, sn_pool *pool, void *ws, size_t ws_size);

/* Convenience for tests and tools: allocates its workspace (falls back to
 * the reference when that fails). Kernels use sn_sgemm_ws from run. */
void sn_sgemm(int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
              const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
              float *C, int64_t ldc, sn_pool *pool);

/* Kernel sets by CPU level. BEST is what sn_sgemm_ws runs (chosen at run
 * time from the CPU's features); C is the portable set; AVX2 needs AVX2 and
 * FMA in the build and the CPU, AVX512 AVX-512F too. */
typedef enum sn_gemm_isa {
    SN_GEMM_ISA_BEST = 0,
    SN_GEMM_ISA_C,
    SN_GEMM_ISA_AVX2,
    SN_GEMM_ISA_NEON,   /* AArch64 */
    SN_GEMM_ISA_AVX512, /* AVX-512F (with the AVX2 set's B-in-place loops) */
} sn_gemm_isa;
bool sn_gemm_isa_available(sn_gemm_isa isa);

/* sn_sgemm with one kernel set (an unavailable one falls back to C), so
 * tests check every set the machine has against the reference. */
void sn_sgemm_isa(sn_gemm_isa isa, int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
                  const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc,
                  sn_pool *pool);

/* ---- constant B, packed once ----
 * A weight that every call multiplies (MatMul's constant B) can be packed
 * once, in prepare, into the panel layout the micro-kernel reads: calls then
 * skip packing B (the blocked path) and the one-row product streams the
 * panels in address order. The copy is as large as B (padded to the panel
 * width): the caller decides whether that memory is worth it.
 * Bytes of the packed form of B [K, N] (transB: B is [N, K]) for a kernel
 * set (SN_GEMM_ISA_BEST in kernels; the packed form records its panel
 * width, so a set the CPU lacks falls back correctly). */
size_t sn_sgemm_pack_b_bytes(sn_gemm_isa isa, int64_t N, int64_t K);
/* done (may be NULL) is called with each slice of B's rows once packed
 * (B not transposed): the caller may release them. */
void sn_sgemm_pack_b(sn_gemm_isa isa, int transB, int64_t N, int64_t K, const float *B, int64_t ldb,
                     void *packed, void (*done)(void *ctx, const void *rows, size_t bytes), void *ctx);

/* C[M,N] = alpha * op(A) * B + beta * C with B from sn_sgemm_pack_b (N and
 * K are its). ws as for sn_sgemm_ws with sn_sgemm_workspace(M, N, K, t).
 * Never allocates. */
void sn_sgemm_packed_ws(int transA, int64_t M, float alpha, const float *A, int64_t lda, const void *packed,
                        float beta, float *C, int64_t ldc, sn_pool *pool, void *ws, size_t ws_size);
/* C[M,N] = A * B (A row-major) where B is produced block by block by the
 * caller: bfn(ctx, j0, nb, p0, kb, bp, ps, nr) writes rows [p0, p0 + kb) of
 * columns [j0, j0 + nb) into nr-wide panels, panel t at bp + t * ps and
 * row p of it at + p * nr (columns past nb zero). A weight stored in another
 * form (quantized) is thus expanded straight into the micro-kernel's
 * layout, one L2-sized block at a time, never whole. Always the blocked
 * path: the same bits as sn_sgemm_ws on that B with more than 8 rows. ws as
 * for sn_sgemm_ws. Never allocates. */
typedef void (*sn_sgemm_bfn)(void *ctx, int64_t j0, int64_t nb, int64_t p0, int64_t kb, float *bp,
                             int64_t ps, int nr);
void sn_sgemm_cb_ws(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, sn_sgemm_bfn bfn,
                    void *ctx, float *C, int64_t ldc, sn_pool *pool, void *ws, size_t ws_size);
/* Same, allocating its workspace: for tests. */
void sn_sgemm_packed(int transA, int64_t M, float alpha, const float *A, int64_t lda, const void *packed,
                     float beta, float *C, int64_t ldc, sn_pool *pool);

/* Plain triple loop with a double accumulator: the oracle for tests. */
void sn_sgemm_ref(int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
                  const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                  float *C, int64_t ldc);

/* Name of the micro-kernel in use ("c6x8", "avx2-6x16"), for reports. */
const char *sn_sgemm_kernel_name(void);

#endif
