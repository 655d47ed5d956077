/* Shared machinery of the element-wise family (src/ops/elementwise/): the
 * broadcast iterator every n-ary op runs on, kernel signatures, and the
 * kernels the other files of the family define. */
#ifndef SN_OPS_ELEMENTWISE_H
#define SN_OPS_ELEMENTWISE_H

#include "ops/kit.h"

#define EW_MAX_IN 3
/* Elements per chunk when a kernel converts through a float buffer (half
 * types): small enough for the stack, large enough to amortize the call. */
#define EW_CHUNK 256
/* Elements below which work is not split over the thread pool. A batched
 * decode step's Mul over 16 x 1536 values is worth splitting: its input was
 * written half by each thread (a MatMul splits columns), and one thread
 * alone pulls the other's half across while the other waits. */
#define EW_GRAIN ((int64_t)1 << 13)
/* The same for kernels that spend tens of operations an element (a
 * transcendental or rational function). */
#define EW_GRAIN_MATH ((int64_t)1 << 12)

/* Parameters kernels read; filled from attributes/inputs before a run. */
typedef struct ew_args {
    sn_dtype ta, tb, to;     /* element types of input 0, input 1, output */
    int flag;                /* op-specific switch (Mod fmod, Gelu tanh, BitShift left, IsInf detect bits) */
    float alpha, beta, gamma, lambd, bias;
    uint8_t lo[8], hi[8];    /* Clip bounds in the input's dtype */
    float lo_f, hi_f;        /* Clip bounds as float (half types) */
    const void *inner;       /* for wrappers: the float32 kernel they call */
} ew_args;

/* A broadcast kernel: n output elements from inputs whose innermost
 * element strides are st[k] (0: the same element repeated, 1: contiguous).
 * o may equal in[0] (in-place). */
typedef void (*ew_kern)(const ew_args *a, void *o, const void *const *in, const int64_t *st, int64_t n);
/* A unary kernel over contiguous elements (o may equal x). */
typedef void (*ew_ukern)(const ew_args *a, void *o, const void *x, int64_t n);

/* The output's index space with each input's strides in output
 * coordinates (0 along broadcast dims), size-1 dims dropped and adjacent
 * dims merged where every input allows. */
typedef struct ew_plan {
    int nd, nin;
    int64_t numel;
    int64_t dims[SN_MAX_RANK];
    int64_t st[EW_MAX_IN][SN_MAX_RANK];
} ew_plan;

/* Input shapes right-aligned against out_dims (which must be their
 * broadcast). */
void ew_plan_init(ew_plan *p, int out_rank, const int64_t *out_dims, int nin,
                  const int *ranks, const int64_t *const *dims);
/* Runs k over the whole plan, split over pool when large. Element sizes
 * give the byte strides of output and inputs. */
void ew_plan_run(const ew_plan *p, sn_pool *pool, ew_kern k, const ew_args *a,
                 void *o, size_t osz, const void *const *in, const size_t *isz);
/* Runs a unary kernel over n contiguous elements, split over pool in
 * chunks of at least grain (EW_GRAIN, EW_GRAIN_MATH). */
void ew_unary_run(sn_pool *pool, ew_ukern k, const ew_args *a, void *o, size_t osz,
                  const void *x, size_t xsz, int64_t n, int64_t grain);

/* 16-bit and 8-bit floats: computed in float32 chunks (sn_ld_f32, sn_st_f32). */
static inline bool ew_is_half(sn_dtype t) {
    return t == SN_F16 || t == SN_BF16 || t == SN_F8E4M3FN || t == SN_F8E4M3FNUZ ||
           t == SN_F8E5M2 || t == SN_F8E5M2FNUZ;
}

/* Unary-shaped ops (unary.c). */
#define EW_UNARY_OPS(X) \
    X(Abs) X(Acos) X(Acosh) X(Asin) X(Asinh) X(Atan) X(Atanh) X(Ceil) X(Celu) X(Cos) \
    X(Cosh) X(Elu) X(Erf) X(Exp) X(Floor) X(Gelu) X(HardSigmoid) X(HardSwish) X(IsInf) \
    X(IsNaN) X(LeakyRelu) X(Log) X(Mish) X(Neg) X(Not) X(BitwiseNot) X(Reciprocal) \
    X(Relu) X(Round) X(Selu) X(Shrink) X(Sigmoid) X(Sign) X(Sin) X(Sinh) X(Softplus) \
    X(Softsign) X(Sqrt) X(Tan) X(Tanh) X(ThresholdedRelu) X(Clip)
#define EW_DECL_UNARY(name) int ew_infer_##name(sn_infer_ctx *c); int ew_run_##name(sn_kctx *c);
EW_UNARY_OPS(EW_DECL_UNARY)
int ew_infer_swish(sn_infer_ctx *c); /* Swish (24): computed in double */
int ew_run_swish(sn_kctx *c);

/* Type conversion and copies (cast.c). */
int ew_infer_cast(sn_infer_ctx *c);
int ew_run_cast(sn_kctx *c);
int ew_infer_castlike(sn_infer_ctx *c);
int ew_infer_identity(sn_infer_ctx *c);
int ew_run_identity(sn_kctx *c);
int ew_infer_dropout(sn_infer_ctx *c);
int ew_run_dropout(sn_kctx *c);
/* Converts n elements from type from to type to (neither string). */
void ew_convert(void *o, sn_dtype to, const void *x, sn_dtype from, int64_t n, bool saturate);

#endif
