/* Kernels of the LLM operator family defined outside llm.c (which holds
 * the table sn_ops_llm). Private to src/ops/llm/. */
#ifndef SN_OPS_LLM_OPS_H
#define SN_OPS_LLM_OPS_H

#include "ops/kit.h"

/* The workspace an op's CPU kernel needs for these infos: the one rule its
 * prepare declares (Level 2) and its Level-1 estimate reserves
 * (llm_estimate_with), computed from shapes, attributes and the data of
 * constants only. */
typedef int (*llm_ws_fn)(const sn_node *n, int n_in, const sn_tensor *const *in, int n_out,
                         const sn_tensor *const *out, int n_threads, size_t *ws, sn_err *err);
/* Level 1 through that rule when every shape is concrete (0 otherwise:
 * prepare declares the figure once shapes are known). llm.c. */
size_t llm_estimate_with(const sn_infer_ctx *c, llm_ws_fn ws);

/* matmulnbits.c */
int llm_mnb_infer(sn_infer_ctx *c);
int llm_mnb_prepare(sn_prep_ctx *c);
size_t llm_mnb_estimate(const sn_infer_ctx *c);
void llm_mnb_free(void *state);
int llm_mnb_run(sn_kctx *c);
bool llm_mnb_group_ok(const sn_node *first, const sn_node *next);
/* Whether node n of g gives each row the same bits however many rows a run
 * has (a packed step, sn_kvloop_step_packed, runs a decode row among
 * others): 4 bits in blocks of 32 at accuracy_level 4, a constant B, no
 * float zero points (the int8 path), on AVX-512 VNNI, whose order is
 * snug's own for one row and more; ORT's AVX2 order differs between them,
 * and the float path changes kernels at MNB_GEMM_MIN_M rows. */
bool llm_mnb_rows_invariant(const struct sn_graph *g, const sn_node *n);
int llm_mnb_run_group(sn_kctx *const *cs, int n, int n_tail);
int llm_mnb_group_tail(const struct sn_graph *g, int first, int n);

/* gather_bq.c: GatherBlockQuantized */
int llm_gbq_infer(sn_infer_ctx *c);
int llm_gbq_prepare(sn_prep_ctx *c);
size_t llm_gbq_estimate(const sn_infer_ctx *c);
int llm_gbq_run(sn_kctx *c);

/* attention.c */
/* RotaryEmbedding's geometry (com.microsoft: input, position_ids, cos,
 * sin; ONNX opset 23: X, cos, sin, position_ids?), checked: input (B, S,
 * N*H) or (B, N, S, H), rot rotary dims. Shared with the OpenCL kernel. */
typedef struct llm_rope_geom {
    int64_t B, S, N, H, rot;
    bool four_d;
    bool onnx;
    bool pos_scalar; /* ms: position_ids of shape (1): position = ids[0] + s */
    bool pos_none;   /* onnx: no position_ids, cos/sin are (B, S, rot/2) */
} llm_rope_geom;
int llm_rope_geom_of(const sn_node *node, int n_in, const sn_tensor *const *in, llm_rope_geom *g, sn_err *err);

int llm_gqa_infer(sn_infer_ctx *c);
int llm_gqa_prepare(sn_prep_ctx *c);
size_t llm_gqa_estimate(const sn_infer_ctx *c);
int llm_gqa_run(sn_kctx *c);
int llm_mha_infer(sn_infer_ctx *c);
int llm_mha_prepare(sn_prep_ctx *c);
size_t llm_mha_estimate(const sn_infer_ctx *c);
int llm_mha_run(sn_kctx *c);
int llm_sdpa_infer(sn_infer_ctx *c); /* ONNX Attention (opset 23+) */
int llm_sdpa_prepare(sn_prep_ctx *c);
size_t llm_sdpa_estimate(const sn_infer_ctx *c);
int llm_sdpa_run(sn_kctx *c);

#endif
