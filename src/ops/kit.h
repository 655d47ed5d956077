/* The small helpers every op family uses: inputs that may be absent, an
 * output's type and shape, the float types kernels compute in, element
 * loads and stores widened to double or float, products of dims and
 * workspace alignment. Private to src/ops. */
#ifndef SN_OPS_KIT_H
#define SN_OPS_KIT_H

#include "ops/op.h"

/* A kernel's error with its node named, in a function whose context
 * (sn_infer_ctx, sn_prep_ctx or sn_kctx) is `c`. */
#define KFAIL(code, ...) sn_kfail(c->err, c->node, code, __VA_ARGS__)

/* ---- inputs ------------------------------------------------------------- */

/* Input i, or NULL when absent (an optional input left out, or past n_in). */
static inline const sn_tensor *sn_in(const sn_tensor *const *in, int n_in, int i) {
    return i < n_in ? in[i] : NULL;
}
static inline bool sn_has_in(const sn_tensor *const *in, int n_in, int i) {
    return i < n_in && in[i] != NULL;
}
static inline const sn_tensor *sn_infer_in(const sn_infer_ctx *c, int i) {
    return sn_in(c->in, c->n_in, i);
}
static inline const sn_tensor *sn_kctx_in(const sn_kctx *c, int i) {
    return sn_in(c->in, c->n_in, i);
}
/* Input i when present and a tensor: NULL also for an optional without a
 * value or a sequence. */
static inline const sn_tensor *sn_in_tensor(const sn_tensor *const *in, int n_in, int i) {
    return i < n_in && in[i] && in[i]->kind == SN_KIND_TENSOR ? in[i] : NULL;
}
/* Elements of an input that may be absent (0 for NULL). */
static inline int64_t sn_in_numel(const sn_tensor *t) { return t ? sn_tensor_numel(t) : 0; }
/* Input i must be present and a tensor; otherwise an error naming it. */
int sn_need_tensor(sn_infer_ctx *c, int i);

/* Inputs 0..n-1 must all be present tensors (the op's required ones). */
int sn_need_inputs(sn_infer_ctx *c, int n);

/* Input checks before kernel code touches an input: sn_check_in's dtypes
 * is a mask of SN_DT bits (SN_DT_ANY: every type), rank SN_RANK_ANY any. */
#define SN_DT(t) (1ull << (t))
#define SN_DT_ANY 0ull
#define SN_DT_INT (SN_DT(SN_I32) | SN_DT(SN_I64))
#define SN_RANK_ANY (-2)
enum { SN_IN_OPTIONAL = 0, SN_IN_REQUIRED = 1 };
/* Input i (named what in the error): when required, present and a tensor;
 * when present, a tensor of one of the dtypes and of the rank given (a
 * rank not known yet passes). Used where a geometry is read from the
 * inputs, in inference, prepare and run alike. */
int sn_check_in(const sn_node *node, sn_err *err, int n_in, const sn_tensor *const *in, int i, const char *what,
                int required, uint64_t dtypes, int rank);
/* A shape-like input (int32 or int64, 1-D, at most SN_MAX_RANK values) as
 * int64 values: their count, or -1 when absent, of another form or its data
 * not known yet. */
static inline int sn_input_shape(const sn_tensor *t, int64_t *v) {
    if (!t || !t->data || (t->dtype != SN_I64 && t->dtype != SN_I32) || t->rank != 1 ||
        t->dims[0] > SN_MAX_RANK)
        return -1;
    return sn_input_ints(t, v, SN_MAX_RANK);
}

/* ---- outputs ------------------------------------------------------------ */

/* Output o becomes a tensor of type dt and the given shape (dims NULL: every
 * dim unknown; rank may be SN_RANK_UNKNOWN). o NULL: an absent output. */
static inline void sn_set_out(sn_tensor *o, sn_dtype dt, int rank, const int64_t *dims) {
    if (!o)
        return;
    o->kind = SN_KIND_TENSOR;
    o->dtype = dt;
    o->rank = rank;
    for (int i = 0; i < rank && i < SN_MAX_RANK; i++)
        o->dims[i] = dims ? dims[i] : SN_DIM_UNKNOWN;
}

/* Makes output i's string elements own their bytes (copies them into
 * memory that lives with the output), so they outlive the inputs. */
int sn_strings_own(sn_kctx *c, int i);

/* ---- dtypes and elements ------------------------------------------------ */

/* The float types kernels compute (float32, float64, float16, bfloat16);
 * float8 and float4 are storage types only. */
static inline bool sn_dtype_is_real(sn_dtype t) {
    return t == SN_F32 || t == SN_F64 || t == SN_F16 || t == SN_BF16;
}

/* Element i widened to double, and stored back: sn_load_f64/sn_store_f64
 * with float32 and float64 inline, for element loops. */
static inline double sn_ld_f64(sn_dtype t, const void *d, int64_t i) {
    if (t == SN_F32)
        return ((const float *)d)[i];
    if (t == SN_F64)
        return ((const double *)d)[i];
    return sn_load_f64(t, d, (size_t)i);
}
static inline void sn_st_f64(sn_dtype t, void *d, int64_t i, double v) {
    if (t == SN_F32)
        ((float *)d)[i] = (float)v;
    else if (t == SN_F64)
        ((double *)d)[i] = v;
    else
        sn_store_f64(t, d, (size_t)i, v);
}

/* Element i as float, and stored back (float8 saturating): the same values
 * as through double for float32, 16-bit and 8-bit floats. */
static inline float sn_ld_f32(sn_dtype t, const void *d, int64_t i) {
    switch (t) {
    case SN_F32: return ((const float *)d)[i];
    case SN_F16: return sn_f16_to_f32(((const uint16_t *)d)[i]);
    case SN_BF16: return sn_bf16_to_f32(((const uint16_t *)d)[i]);
    case SN_F8E4M3FN: case SN_F8E4M3FNUZ: case SN_F8E5M2: case SN_F8E5M2FNUZ:
        return sn_f8_to_f32(t, ((const uint8_t *)d)[i]);
    default: return (float)sn_load_f64(t, d, (size_t)i);
    }
}
static inline void sn_st_f32(sn_dtype t, void *d, int64_t i, float v) {
    switch (t) {
    case SN_F32: ((float *)d)[i] = v; break;
    case SN_F16: ((uint16_t *)d)[i] = sn_f32_to_f16(v); break;
    case SN_BF16: ((uint16_t *)d)[i] = sn_f32_to_bf16(v); break;
    case SN_F8E4M3FN: case SN_F8E4M3FNUZ: case SN_F8E5M2: case SN_F8E5M2FNUZ:
        ((uint8_t *)d)[i] = sn_f32_to_f8(t, v, true);
        break;
    default: sn_store_f64(t, d, (size_t)i, v); break;
    }
}

/* ---- shapes and sizes --------------------------------------------------- */

/* Product of dims[a..b); -1 when any is not known or it overflows. */
static inline int64_t sn_dims_prod(const int64_t *dims, int a, int b) {
    int64_t p = 1;
    for (int i = a; i < b; i++)
        if (dims[i] < 0 || !sn_dim_mul(&p, dims[i]))
            return -1;
    return p;
}

/* Workspace sizes rounded up so that the arrays carved from it stay 16-
 * (or 64-) byte aligned. */
static inline size_t sn_align16(size_t n) { return (n + 15) & ~(size_t)15; }
static inline size_t sn_align64(size_t n) { return (n + 63) & ~(size_t)63; }

#endif
