/* Cast, CastLike, Identity, Dropout (stub while being written). */
#include "ops/elementwise.h"

int ew_infer_cast(sn_infer_ctx *c) { return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "not yet"); }
int ew_run_cast(sn_kctx *c) { return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "not yet"); }
int ew_infer_castlike(sn_infer_ctx *c) { return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "not yet"); }
int ew_infer_identity(sn_infer_ctx *c) { return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "not yet"); }
int ew_run_identity(sn_kctx *c) { return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "not yet"); }
int ew_infer_dropout(sn_infer_ctx *c) { return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "not yet"); }
int ew_run_dropout(sn_kctx *c) { return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "not yet"); }
void ew_convert(void *o, sn_dtype to, const void *x, sn_dtype from, int64_t n, bool saturate) {
    (void)o; (void)to; (void)x; (void)from; (void)n; (void)saturate;
}
