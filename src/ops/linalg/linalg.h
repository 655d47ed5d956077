/* The linear algebra family (src/ops/linalg/): the matrix products of
 * matmul.c, named by the family's table (linalg.c). Private to
 * src/ops/linalg. */
#ifndef SN_OPS_LINALG_H
#define SN_OPS_LINALG_H

#include "ops/kit.h"

/* matmul.c: MatMul, Gemm, MatMulInteger, QLinearMatMul (10) */
int la_matmul_infer(sn_infer_ctx *c);
size_t la_matmul_estimate(const sn_infer_ctx *c);
int la_matmul_prepare(sn_prep_ctx *c);
int la_matmul_run(sn_kctx *c);
void la_mm_packed_free(void *state);
int la_gemm_infer(sn_infer_ctx *c);
size_t la_gemm_estimate(const sn_infer_ctx *c);
int la_gemm_prepare(sn_prep_ctx *c);
int la_gemm_run(sn_kctx *c);
int la_mmi_infer(sn_infer_ctx *c);
int la_mmi_run(sn_kctx *c);
int la_qlmm_infer(sn_infer_ctx *c);
int la_qlmm_run(sn_kctx *c);

#endif
