/* Newer-opset family (newer*.c): ops added in ONNX opsets 18-24 and the
 * ai.onnx.ml ops. The family's table is in newer.c; the text ops live in
 * newer_text.c, the ai.onnx.ml ops in newer_ml.c. */
#ifndef SN_OPS_NEWER_H
#define SN_OPS_NEWER_H

#include "ops/kit.h"

/* newer_text.c */
int nw_strconcat_infer(sn_infer_ctx *c);
int nw_strconcat_run(sn_kctx *c);
int nw_strsplit_infer(sn_infer_ctx *c);
int nw_strsplit_run(sn_kctx *c);
int nw_regex_infer(sn_infer_ctx *c);
int nw_regex_prepare(sn_prep_ctx *c);
int nw_regex_run(sn_kctx *c);
void nw_regex_free(void *state);

/* newer_ml.c (domain ai.onnx.ml) */
int nw_binarizer_infer(sn_infer_ctx *c);
int nw_binarizer_run(sn_kctx *c);
int nw_afe_infer(sn_infer_ctx *c);
int nw_afe_run(sn_kctx *c);
int nw_labelenc_infer(sn_infer_ctx *c);
int nw_labelenc_prepare(sn_prep_ctx *c);
int nw_labelenc_run(sn_kctx *c);
void nw_labelenc_free(void *state);
int nw_tree_infer(sn_infer_ctx *c);
int nw_tree_prepare(sn_prep_ctx *c);
int nw_tree_run(sn_kctx *c);
void nw_tree_free(void *state);

#endif
