/* Kernels of the LLM operator family defined outside llm.c (which holds
 * the table sn_ops_contrib). Private to src/ops/llm/. */
#ifndef SN_OPS_LLM_OPS_H
#define SN_OPS_LLM_OPS_H

#include "ops/op.h"

/* matmulnbits.c */
int llm_mnb_infer(sn_infer_ctx *c);
int llm_mnb_prepare(sn_prep_ctx *c);
void llm_mnb_free(void *state);
int llm_mnb_run(sn_kctx *c);
bool llm_mnb_group_ok(const sn_node *first, const sn_node *next);
int llm_mnb_run_group(sn_kctx *const *cs, int n);

/* attention.c */
int llm_gqa_infer(sn_infer_ctx *c);
int llm_gqa_prepare(sn_prep_ctx *c);
int llm_gqa_run(sn_kctx *c);
int llm_mha_infer(sn_infer_ctx *c);
int llm_mha_prepare(sn_prep_ctx *c);
int llm_mha_run(sn_kctx *c);
int llm_sdpa_infer(sn_infer_ctx *c); /* ONNX Attention (opset 23+) */
int llm_sdpa_prepare(sn_prep_ctx *c);
int llm_sdpa_run(sn_kctx *c);

/* Small shared helpers. */
static inline bool llm_has(int n_in, const sn_tensor *const *in, int i) {
    return i < n_in && in[i] != NULL;
}
static inline void llm_set_out(sn_tensor *t, sn_dtype dt, int rank, const int64_t *dims) {
    if (!t)
        return;
    t->kind = SN_KIND_TENSOR;
    t->dtype = dt;
    t->rank = rank;
    for (int i = 0; i < rank && i < SN_MAX_RANK; i++)
        t->dims[i] = dims[i];
}
/* Rounds a byte count up to 64 for workspace carving. */
static inline size_t llm_al(size_t n) {
    return (n + 63) & ~(size_t)63;
}

#endif
