/* Helpers shared by the matmul, conv, pool and quant families. */
#ifndef SN_OPS_GEMM_OPS_H
#define SN_OPS_GEMM_OPS_H

#include <string.h>

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

/* ---- convolution / pooling geometry ---------------------------------------- */

enum { GK_PAD_NOTSET, GK_PAD_SAME_UPPER, GK_PAD_SAME_LOWER, GK_PAD_VALID };

typedef struct gk_geo {
    int nd;                               /* spatial dims */
    int64_t in[SN_MAX_RANK];              /* input spatial sizes */
    int64_t k[SN_MAX_RANK];               /* kernel */
    int64_t s[SN_MAX_RANK], d[SN_MAX_RANK]; /* strides, dilations */
    int64_t pb[SN_MAX_RANK], pe[SN_MAX_RANK]; /* pads begin / end */
    int64_t out[SN_MAX_RANK];
    int auto_pad;
} gk_geo;

/* Reads kernel_shape (when kshape is NULL), strides, dilations, pads and
 * auto_pad and validates them for nd spatial dims. kshape: the kernel
 * taken from the weights. */
int gk_geo_attrs(const sn_node *node, sn_err *err, int nd, const int64_t *kshape, gk_geo *g);

/* Output sizes and effective pads from input sizes (all known). ceil_mode
 * as for pooling. */
int gk_geo_output(const sn_node *node, sn_err *err, gk_geo *g, bool ceil_mode);

#endif
