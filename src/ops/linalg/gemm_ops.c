/* Numpy-style batching of matrix products (gemm_ops.h). */
#include <string.h>

#include "ops/linalg/gemm_ops.h"

int gk_mm_plan(const sn_node *node, sn_err *err, const sn_tensor *a, const sn_tensor *b, gk_mm *p) {
    memset(p, 0, sizeof *p);
    int ra = a->rank, rb = b->rank;
    if (ra < 1 || rb < 1)
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "inputs must have rank >= 1 (got %d and %d)", ra, rb);
    p->M = ra == 1 ? 1 : a->dims[ra - 2];
    int64_t ka = a->dims[ra - 1];
    int64_t kb = rb == 1 ? b->dims[0] : b->dims[rb - 2];
    p->N = rb == 1 ? 1 : b->dims[rb - 1];
    if (sn_dim_known(ka) && sn_dim_known(kb) && ka != kb)
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "inner dimensions differ: %lld vs %lld",
                        (long long)ka, (long long)kb);
    p->K = sn_dim_known(ka) ? ka : kb;
    int nba = ra > 2 ? ra - 2 : 0, nbb = rb > 2 ? rb - 2 : 0;
    int nb = 0;
    if (nba || nbb)
        SN_TRY(sn_broadcast_shape(nba, a->dims, nbb, b->dims, &nb, p->bdims, err));
    if (nb + 2 > SN_MAX_RANK)
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "rank too large");
    p->nb = nb;
    /* batch strides in matrices; a dim of 1 that broadcasts gets stride 0 */
    int64_t s = 1;
    for (int d = nb - 1, da = nba - 1; d >= 0; d--, da--) {
        int64_t ad = da >= 0 ? a->dims[da] : 1;
        p->sa[d] = (ad == 1) ? 0 : s;
        if (da >= 0 && ad > 0)
            s *= ad;
    }
    p->na = s;
    s = 1;
    for (int d = nb - 1, db = nbb - 1; d >= 0; d--, db--) {
        int64_t bd = db >= 0 ? b->dims[db] : 1;
        p->sb[d] = (bd == 1) ? 0 : s;
        if (db >= 0 && bd > 0)
            s *= bd;
    }
    p->nbm = s;
    p->n_batch = 1;
    for (int d = 0; d < nb; d++)
        p->n_batch = sn_dim_known(p->bdims[d]) && p->n_batch >= 0 ? p->n_batch * p->bdims[d] : -1;
    int r = 0;
    for (int d = 0; d < nb; d++)
        p->out_dims[r++] = p->bdims[d];
    if (ra > 1)
        p->out_dims[r++] = p->M;
    if (rb > 1)
        p->out_dims[r++] = p->N;
    p->out_rank = r;
    return SNUG_OK;
}
