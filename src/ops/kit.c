/* The op families' shared helpers (kit.h) that are not inline. */
#include "ops/kit.h"

int sn_need_tensor(sn_infer_ctx *c, int i) {
    const sn_tensor *t = sn_infer_in(c, i);
    if (!t)
        return KFAIL(SNUG_ERR_INVALID_ARG, "input %d is required", i);
    if (t->kind != SN_KIND_TENSOR)
        return KFAIL(SNUG_ERR_TYPE, "input %d must be a tensor", i);
    return SNUG_OK;
}
