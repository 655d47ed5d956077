/* Small AVX building blocks shared by the x86 kernels: always inlined,
 * compiled for the calling function's target (AVX2 kernels). */
#ifndef SN_OPS_SIMD_AVX_H
#define SN_OPS_SIMD_AVX_H

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <stdint.h>

/* Eight vectors of eight floats transposed in place: r[j][c] <- r[c][j]
 * (unpack, shuffle, 128-bit swaps; no rounding, so every kernel using it
 * stays bit-identical to its scalar reference). */
__attribute__((target("avx"), always_inline)) static inline void sn_avx_t8x8(__m256 r[8]) {
    __m256 t[8], s[8];
#pragma GCC unroll 4
    for (int k = 0; k < 8; k += 2) {
        t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
        t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
    }
#pragma GCC unroll 2
    for (int k = 0; k < 8; k += 4) {
        s[k] = _mm256_shuffle_ps(t[k], t[k + 2], 0x44);
        s[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], 0xEE);
        s[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0x44);
        s[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0xEE);
    }
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        r[k] = _mm256_permute2f128_ps(s[k], s[k + 4], 0x20);
        r[k + 4] = _mm256_permute2f128_ps(s[k], s[k + 4], 0x31);
    }
}

/* The same, stored as eight rows of out (ld floats apart). */
__attribute__((target("avx"), always_inline)) static inline void sn_avx_t8x8_store(const __m256 r[8], float *out,
                                                                                  int64_t ld) {
    __m256 t[8];
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++)
        t[k] = r[k];
    sn_avx_t8x8(t);
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++)
        _mm256_storeu_ps(out + k * ld, t[k]);
}
#endif

#endif
