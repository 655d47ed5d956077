/* Newer-opset family (newer*.c): ops added in ONNX opsets 18-24 and the
 * ai.onnx.ml ops. The family's table is in newer.c; the text ops live in
 * newer_text.c, the ai.onnx.ml ops in newer_ml.c. */
#ifndef SN_OPS_NEWER_H
#define SN_OPS_NEWER_H

#include "ops/op.h"

/* Input i when present (NULL when absent or past n_in). */
static inline const sn_tensor *nw_in(const sn_tensor *const *in, int n_in, int i) {
    return i < n_in ? in[i] : NULL;
}

/* Output o as a tensor of dtype dt and the given shape (dims NULL: all
 * unknown). o may be NULL (absent output). */
static inline void nw_set_out(sn_tensor *o, sn_dtype dt, int rank, const int64_t *dims) {
    if (!o)
        return;
    o->kind = SN_KIND_TENSOR;
    o->dtype = dt;
    o->rank = rank;
    for (int i = 0; i < rank && i < SN_MAX_RANK; i++)
        o->dims[i] = dims ? dims[i] : SN_DIM_UNKNOWN;
}

static inline bool nw_is_real(sn_dtype t) {
    return t == SN_F32 || t == SN_F64 || t == SN_F16 || t == SN_BF16;
}

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
