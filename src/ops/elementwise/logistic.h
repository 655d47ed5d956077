/* The logistic function 1/(1+e^-x) as ONNX Runtime's MLAS computes it on
 * CPUs (a rational approximation with FMA, clamped to [-18, 18]): Sigmoid,
 * SiLU-style Sigmoid*Mul and QuickGelu must round exactly like it for int8
 * activation quantization downstream (MatMulNBits accuracy_level 4) to pick
 * the same codes as ONNX Runtime. Error against the exact function < 1e-7. */
#ifndef SN_OPS_LOGISTIC_H
#define SN_OPS_LOGISTIC_H

#include <math.h>

static inline float sn_logistic_f32(float x) {
    float v = x < -18.0f ? -18.0f : x > 18.0f ? 18.0f : x;
    float v2 = v * v;
    float p = fmaf(v2, 4.37031012579801e-11f, 1.15627324459942e-07f);
    p = fmaf(p, v2, 6.08574864600143e-05f);
    p = fmaf(p, v2, 8.51377133304701e-03f);
    p = fmaf(p, v2, 2.48287947061529e-01f);
    p = p * v;
    float q = fmaf(v2, 6.10247389755681e-13f, 5.76102136993427e-09f);
    q = fmaf(q, v2, 6.29106785017040e-06f);
    q = fmaf(q, v2, 1.70198817374094e-03f);
    q = fmaf(q, v2, 1.16817656904453e-01f);
    q = fmaf(q, v2, 9.93151921023180e-01f);
    float r = p / q + 0.5f;
    r = r < 0.0f ? 0.0f : r > 1.0f ? 1.0f : r;
    return x != x ? x : r;
}

#endif
