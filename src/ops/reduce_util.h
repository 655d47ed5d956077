/* Small helpers shared by the reduce, norm and math op families
 * (reduce.c, norm.c, math.c). Private to those files. */
#ifndef SN_OPS_REDUCE_UTIL_H
#define SN_OPS_REDUCE_UTIL_H

#include <math.h>
#include <string.h>

#include "ops/op.h"

/* Sets t to a tensor of the given type and shape (t may be NULL: absent). */
static inline void sn_red_set_out(sn_tensor *t, sn_dtype dt, int rank, const int64_t *dims) {
    if (!t)
        return;
    t->kind = SN_KIND_TENSOR;
    t->dtype = dt;
    t->rank = rank;
    for (int i = 0; i < rank && i < SN_MAX_RANK; i++)
        t->dims[i] = dims[i];
}

/* Product of dims[a..b); -1 if any is not known. */
static inline int64_t sn_red_prod(const int64_t *dims, int a, int b) {
    int64_t p = 1;
    for (int i = a; i < b; i++) {
        if (dims[i] < 0)
            return -1;
        p *= dims[i];
    }
    return p;
}

/* True for the input of index i being present (not an absent optional). */
static inline bool sn_red_has(const sn_infer_ctx *c, int i) {
    return i < c->n_in && c->in[i] != NULL;
}
static inline bool sn_red_khas(const sn_kctx *c, int i) {
    return i < c->n_in && c->in[i] != NULL;
}

/* Float-like dtypes that the normalization kernels compute in float. */
static inline bool sn_red_is_real(sn_dtype t) {
    return t == SN_F32 || t == SN_F64 || t == SN_F16 || t == SN_BF16;
}

/* Element i of a float-like tensor, widened. */
static inline float sn_red_ldf(sn_dtype t, const void *d, int64_t i) {
    switch (t) {
    case SN_F32: return ((const float *)d)[i];
    case SN_F16: return sn_f16_to_f32(((const uint16_t *)d)[i]);
    case SN_BF16: return sn_bf16_to_f32(((const uint16_t *)d)[i]);
    default: return (float)sn_load_f64(t, d, (size_t)i);
    }
}
static inline void sn_red_stf(sn_dtype t, void *d, int64_t i, float v) {
    switch (t) {
    case SN_F32: ((float *)d)[i] = v; break;
    case SN_F16: ((uint16_t *)d)[i] = sn_f32_to_f16(v); break;
    case SN_BF16: ((uint16_t *)d)[i] = sn_f32_to_bf16(v); break;
    default: sn_store_f64(t, d, (size_t)i, v); break;
    }
}

/* Rounds a workspace size up so that sub-arrays stay 16-byte aligned. */
static inline size_t sn_red_align(size_t n) { return (n + 15) & ~(size_t)15; }

#endif
