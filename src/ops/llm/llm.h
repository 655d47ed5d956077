/* Kernels of the LLM operator family defined outside llm.c (which holds
 * the table sn_ops_llm). Private to src/ops/llm/. */
#ifndef SN_OPS_LLM_OPS_H
#define SN_OPS_LLM_OPS_H

#include "ops/kit.h"

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

#endif
