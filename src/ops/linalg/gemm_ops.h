/* Numpy-style batching of matrix products: MatMul, MatMulInteger and
 * QLinearMatMul (linalg/matmul.c), QLinearMatMul 21 (quant/quant.c). */
#ifndef SN_OPS_GEMM_OPS_H
#define SN_OPS_GEMM_OPS_H

#include "ops/kit.h"

/* ---- matmul batching (numpy semantics) ------------------------------------ */

/* A[..., M, K] x B[..., K, N] with broadcast batch dims; 1-D A is [1, K]
 * (M dropped from the output), 1-D B is [K, 1] (N dropped). */
typedef struct gk_mm {
    int64_t M, N, K;          /* may be unknown/symbolic during inference */
    int nb;                   /* batch rank of the output */
    int64_t bdims[SN_MAX_RANK];
    int64_t sa[SN_MAX_RANK], sb[SN_MAX_RANK]; /* batch strides in matrices, 0 = broadcast */
    int64_t n_batch;          /* product of bdims (concrete shapes only) */
    int64_t na, nbm;          /* matrices in A, in B */
    int out_rank;
    int64_t out_dims[SN_MAX_RANK];
} gk_mm;

/* Fills p from the two shapes (ranks must be known). Returns SNUG_OK or an
 * error naming the node. */
int gk_mm_plan(const sn_node *node, sn_err *err, const sn_tensor *a, const sn_tensor *b, gk_mm *p);

/* Offsets (in matrices) of A and B for output batch index bi. */
static inline void gk_mm_offsets(const gk_mm *p, int64_t bi, int64_t *oa, int64_t *ob) {
    int64_t a = 0, b = 0;
    for (int d = p->nb - 1; d >= 0; d--) {
        int64_t i = bi % p->bdims[d];
        bi /= p->bdims[d];
        a += i * p->sa[d];
        b += i * p->sb[d];
    }
    *oa = a;
    *ob = b;
}

#endif
