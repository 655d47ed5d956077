/* The op families' shared helpers (kit.h) that are not inline. */
#include <string.h>

#include "ops/kit.h"

int sn_need_tensor(sn_infer_ctx *c, int i) {
    const sn_tensor *t = sn_infer_in(c, i);
    if (!t)
        return KFAIL(SNUG_ERR_INVALID_ARG, "input %d is required", i);
    if (t->kind != SN_KIND_TENSOR)
        return KFAIL(SNUG_ERR_TYPE, "input %d must be a tensor", i);
    return SNUG_OK;
}

int sn_need_inputs(sn_infer_ctx *c, int n) {
    for (int i = 0; i < n; i++)
        SN_TRY(sn_need_tensor(c, i));
    return SNUG_OK;
}

int sn_check_in(const sn_node *node, sn_err *err, int n_in, const sn_tensor *const *in, int i, const char *what,
                int required, uint64_t dtypes, int rank) {
    const sn_tensor *t = sn_in(in, n_in, i);
    if (!t)
        return required ? sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "input %d (%s) is required", i, what) : SNUG_OK;
    if (t->kind != SN_KIND_TENSOR)
        return sn_kfail(err, node, SNUG_ERR_TYPE, "input %d (%s) must be a tensor", i, what);
    if (dtypes && (t->dtype < 0 || t->dtype >= 64 || !(dtypes & SN_DT(t->dtype))))
        return sn_kfail(err, node, SNUG_ERR_TYPE, "input %d (%s) of type %s is not supported", i, what,
                        sn_dtype_name(t->dtype));
    if (rank != SN_RANK_ANY && t->rank != SN_RANK_UNKNOWN && t->rank != rank)
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "input %d (%s) must be %d-D, got rank %d", i, what, rank,
                        t->rank);
    return SNUG_OK;
}

int sn_strings_own(sn_kctx *c, int i) {
    sn_tensor *t = c->out[i];
    int64_t n = sn_tensor_numel(t);
    sn_string *s = t->data;
    size_t total = 0;
    for (int64_t e = 0; e < n; e++)
        total += s[e].len;
    if (total == 0)
        return SNUG_OK;
    char *buf = sn_kctx_alloc_extra(c, i, total);
    if (!buf)
        return c->err->code ? c->err->code : SNUG_ERR_OOM;
    for (int64_t e = 0; e < n; e++) {
        if (s[e].len)
            memcpy(buf, s[e].ptr, s[e].len);
        s[e].ptr = buf;
        buf += s[e].len;
    }
    return SNUG_OK;
}
