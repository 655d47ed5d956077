/* The float32 row kernels reductions share with the normalizations
 * (reduce/reduce.c, nn/norm.c: Softmax): lane sums, max/min, exp. */
#ifndef SN_OPS_REDUCE_UTIL_H
#define SN_OPS_REDUCE_UTIL_H

#include <math.h>
#include <string.h>

#include "ops/kit.h"

/* ---- float32 row kernels ------------------------------------------------
 * Written with independent lanes so that the compiler vectorizes them at -O2
 * without reassociating a single accumulator. */

#define SN_RED_LANES 16

/* The kernels below are always inlined: inside a caller's SN_CLONES copy
 * they are built for that copy's ISA (an out-of-line copy is baseline). */
#define SN_RED_KERNEL static inline __attribute__((always_inline))

SN_RED_KERNEL float sn_red_lanes_sum(const float *acc) {
    float s8[8];
    for (int j = 0; j < 8; j++)
        s8[j] = acc[j] + acc[j + 8];
    return ((s8[0] + s8[4]) + (s8[1] + s8[5])) + ((s8[2] + s8[6]) + (s8[3] + s8[7]));
}

/* Sum of x[i] (sq: of x[i]^2; ab: of |x[i]|). */
SN_RED_KERNEL float sn_red_sum_f32(const float *x, int64_t n, int mode) {
    float acc[SN_RED_LANES] = {0};
    int64_t i = 0;
    if (mode == 0) {
        for (; i + SN_RED_LANES <= n; i += SN_RED_LANES)
            for (int j = 0; j < SN_RED_LANES; j++)
                acc[j] += x[i + j];
    } else if (mode == 1) {
        for (; i + SN_RED_LANES <= n; i += SN_RED_LANES)
            for (int j = 0; j < SN_RED_LANES; j++)
                acc[j] += x[i + j] * x[i + j];
    } else {
        for (; i + SN_RED_LANES <= n; i += SN_RED_LANES)
            for (int j = 0; j < SN_RED_LANES; j++)
                acc[j] += fabsf(x[i + j]);
    }
    float s = sn_red_lanes_sum(acc);
    for (; i < n; i++)
        s += mode == 0 ? x[i] : mode == 1 ? x[i] * x[i] : fabsf(x[i]);
    return s;
}

/* Max (or min) of x[0..n), n >= 1; NaN if any element is NaN. */
SN_RED_KERNEL float sn_red_max_f32(const float *x, int64_t n, bool is_min) {
    float acc[SN_RED_LANES];
    int nan[SN_RED_LANES] = {0};
    for (int j = 0; j < SN_RED_LANES; j++)
        acc[j] = x[0];
    int64_t i = 0;
    if (is_min) {
        for (; i + SN_RED_LANES <= n; i += SN_RED_LANES)
            for (int j = 0; j < SN_RED_LANES; j++) {
                float v = x[i + j];
                acc[j] = v < acc[j] ? v : acc[j];
                nan[j] |= v != v;
            }
    } else {
        for (; i + SN_RED_LANES <= n; i += SN_RED_LANES)
            for (int j = 0; j < SN_RED_LANES; j++) {
                float v = x[i + j];
                acc[j] = v > acc[j] ? v : acc[j];
                nan[j] |= v != v;
            }
    }
    float m = acc[0];
    int any_nan = nan[0];
    for (int j = 1; j < SN_RED_LANES; j++) {
        m = is_min ? (acc[j] < m ? acc[j] : m) : (acc[j] > m ? acc[j] : m);
        any_nan |= nan[j];
    }
    for (; i < n; i++) {
        float v = x[i];
        m = is_min ? (v < m ? v : m) : (v > m ? v : m);
        any_nan |= v != v;
    }
    return any_nan ? NAN : m;
}

/* exp(x) for float32, branch-free so loops over it vectorize: 2^n * e^r
 * with |r| <= ln2/2 and a degree-7 Taylor polynomial in fused
 * multiply-adds (relative error about 1e-7); n is read from the bits of
 * the rounding sum x * log2(e) + 1.5 * 2^23. Inputs are clamped to
 * [-87, 88] with integer compares on the bits (float compares would keep
 * GCC from if-converting at -O2): e^-87 ~ 1.6e-38 stands in for smaller
 * results, including exp(-inf). NaN is not preserved: callers check for
 * it. Where the CPU has FMA (the x86-64-v3 clones, AArch64) fmaf is one
 * instruction and the loops vectorize; the baseline x86-64 clone calls
 * libm's, slowly, with the same bits. 17 vector operations per eight
 * values (was 30 with separate products and sums: Softmax ran at a third
 * of ONNX Runtime's speed). */
SN_RED_KERNEL float sn_red_expf(float x) {
    union { float f; int32_t i; uint32_t u; } v = {.f = x}, sc;
    const int32_t lo = (int32_t)0xC2AE0000u; /* -87.0f */
    const int32_t hi = 0x42B00000;           /* 88.0f */
    /* negative floats: a larger magnitude has larger (closer to 0) bits;
     * selects by mask, which GCC if-converts where ?: on floats it won't */
    int32_t b = v.i;
    int32_t m = -((b < 0) & (b > lo));
    b = (b & ~m) | (lo & m);
    m = -(b > hi);
    b = (b & ~m) | (hi & m);
    v.i = b;
    float xc = v.f;
    union { float f; uint32_t u; } t = {.f = fmaf(xc, 1.44269504088896341f, 12582912.0f)};
    float nf = t.f - 12582912.0f; /* n = round(x log2 e), |n| <= 127 */
    float r = fmaf(nf, -0.693145751953125f, xc);
    r = fmaf(nf, -1.42860682030941723e-6f, r);
    float p = 1.0f / 5040.0f;
    p = fmaf(p, r, 1.0f / 720.0f);
    p = fmaf(p, r, 1.0f / 120.0f);
    p = fmaf(p, r, 1.0f / 24.0f);
    p = fmaf(p, r, 1.0f / 6.0f);
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    /* t's bits are those of 1.5 * 2^23 plus n; shifted by 23 only the low 9
     * bits count, where 1.5 * 2^23 has zeros: (n + 127) << 23 */
    sc.u = (t.u + 127u) << 23;
    return p * sc.f;
}

/* Softmax over rows of L contiguous floats (nn/norm.c): the AVX2 kernel where
 * the CPU has one and avx2 != 0, else the portable one; the same bits. */
void sn_softmax_rows_f32(const float *x, float *y, int64_t rows, int64_t L, int avx2);

#endif
