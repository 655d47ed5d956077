/* Softmax rows: the AVX2 kernel gives the portable kernel's bits (sums in
 * the same lanes, the same exp operations) for row lengths around the
 * vector and lane-block widths, large and tiny inputs, infinities, rows
 * with a NaN, and in place; and both stay near the double-precision
 * softmax. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "ops/reduce/reduce_util.h"

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static float frand(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) & 0xFFFFFF) / 8388608.0f - 1.0f;
}

int main(void) {
    static const int64_t lens[] = {1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 100, 128, 129, 300, 1000};
    static const float scales[] = {1.0f, 30.0f, 200.0f, 1e-3f};
    int fails = 0, runs = 0;
    if (!sn_cpu_avx2_fma())
        printf("no AVX2/FMA on this CPU: the portable kernel against itself and the reference only\n");
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
        for (int si = 0; si < 4; si++) {
            int64_t L = lens[li], rows = 5;
            size_t n = (size_t)(rows * L);
            float *x = malloc(n * sizeof *x), *a = malloc(n * sizeof *a), *p = malloc(n * sizeof *p);
            for (size_t i = 0; i < n; i++)
                x[i] = frand() * scales[si];
            x[(size_t)L - 1] = -INFINITY;                      /* row 0: a -inf */
            x[L + (L > 1)] = 95.0f;                            /* row 1: a large maximum */
            x[2 * L + L / 2] = NAN;                            /* row 2: NaN, every output NaN */
            x[3 * L] = -1e30f;                                 /* row 3: far below the max */
            sn_softmax_rows_f32(x, p, rows, L, 0);
            sn_softmax_rows_f32(x, a, rows, L, 1);
            int bad = memcmp(a, p, n * sizeof *a) != 0;
            memcpy(a, x, n * sizeof *a); /* in place */
            sn_softmax_rows_f32(a, a, rows, L, 1);
            bad |= memcmp(a, p, n * sizeof *a) != 0;
            for (int64_t r = 0; r < rows && !bad; r++) {
                const float *xr = x + r * L;
                double m = -INFINITY, s = 0;
                int has_nan = 0;
                for (int64_t i = 0; i < L; i++) {
                    has_nan |= isnan(xr[i]);
                    m = xr[i] > m ? xr[i] : m;
                }
                for (int64_t i = 0; i < L; i++)
                    s += exp((double)xr[i] - m);
                for (int64_t i = 0; i < L && !bad; i++) {
                    float got = p[r * L + i];
                    if (has_nan)
                        bad = !isnan(got);
                    else
                        bad = fabs(got - exp((double)xr[i] - m) / s) > 1e-6 * (1 + L / 100.0);
                }
            }
            if (bad)
                fprintf(stderr, "FAIL softmax rows L %lld scale %g\n", (long long)L, scales[si]);
            fails += bad;
            runs++;
            free(x), free(a), free(p);
        }
    /* many exps over the whole reduced range: a single rounding step of the
     * polynomial done differently shows in some of them */
    {
        int64_t rows = 64, L = 4096;
        size_t n = (size_t)(rows * L);
        float *x = malloc(n * sizeof *x), *a = malloc(n * sizeof *a), *p = malloc(n * sizeof *p);
        for (size_t i = 0; i < n; i++)
            x[i] = frand() * 40.0f;
        sn_softmax_rows_f32(x, p, rows, L, 0);
        sn_softmax_rows_f32(x, a, rows, L, 1);
        int bad = memcmp(a, p, n * sizeof *a) != 0;
        if (bad)
            fprintf(stderr, "FAIL softmax %lld rows of %lld: the AVX2 bits differ\n", (long long)rows, (long long)L);
        fails += bad;
        runs++;
        free(x), free(a), free(p);
    }
    printf("test_softmax: %d/%d passed\n", runs - fails, runs);
    return fails != 0;
}
