/* The blocked sgemm against the scalar reference on odd sizes, both
 * transposes, several alpha/beta, serial and with a thread pool, and
 * row/column strides larger than the matrix. Also times one big product
 * (reported, not checked). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gemm_check.h"
#include "ops/gemm.h"

static int check(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, float beta,
                 sn_pool *pool) {
    gemm_case_opts o = {-1, 3, 0, 1e-4f, 0}; /* the public sn_sgemm; leading dimensions 3 larger */
    return gemm_check(&o, ta, tb, M, N, K, alpha, beta, pool);
}

int main(void) {
    g_rng = 0x9E3779B97F4A7C15ull;
    static const int64_t sizes[] = {1, 3, 7, 17, 33, 65, 129};
    static const float ab[][2] = {{1, 0}, {0.5f, 1}, {-2, 0.25f}, {1, 1}};
    int ns = (int)(sizeof sizes / sizeof sizes[0]);
    sn_pool *pool = NULL;
    sn_err err = {0};
    if (sn_pool_new(4, &pool, &err) != SNUG_OK) {
        fprintf(stderr, "pool: %s\n", err.msg);
        return 1;
    }
    int fails = 0, runs = 0;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int a = 0; a < ns; a++)
                for (int b = 0; b < ns; b++)
                    for (int k = 0; k < ns; k++) {
                        const float *x = ab[(a + b + k + ta + tb) % 4];
                        sn_pool *p = (a + b + k) % 2 ? pool : NULL;
                        fails += check(ta, tb, sizes[a], sizes[b], sizes[k], x[0], x[1], p);
                        runs++;
                    }
    /* sizes crossing the block boundaries (KC 256, MC 96, NC 256) */
    fails += check(0, 0, 300, 520, 600, 1, 0, pool);
    fails += check(1, 1, 197, 263, 513, 0.5f, 2, pool);
    fails += check(0, 1, 1, 1000, 300, 1, 0, pool);
    fails += check(1, 0, 1000, 1, 300, 1, 1, pool);
    fails += check(0, 0, 5, 0, 7, 1, 0, pool); /* empty */
    fails += check(0, 0, 5, 6, 0, 1, 0.5f, pool);
    runs += 6;

    /* B prepacked once (MatMul's constant weights): every kernel set, the
     * one-row (panel GEMV) and blocked paths, odd N around the panel width,
     * K across the K-slice boundary, serial and threaded */
    static const int64_t pm[] = {1, 2, 7, 130}, pn[] = {1, 15, 16, 17, 100, 300}, pk[] = {1, 5, 64, 300};
    const sn_gemm_isa isas[] = {SN_GEMM_ISA_C, SN_GEMM_ISA_AVX2, SN_GEMM_ISA_NEON};
    for (int s = 0; s < 3; s++) {
        if (!sn_gemm_isa_available(isas[s]))
            continue;
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 6; b++)
                for (int k = 0; k < 4; k++) {
                    int ta = (a + k) % 2, tb = (b + k) % 2;
                    const float *x = ab[(a + b + k) % 4];
                    gemm_case_opts o = {(int)isas[s], (a + b) % 3, 1, 1e-4f, 1};
                    fails += gemm_check(&o, ta, tb, pm[a], pn[b], pk[k], x[0], x[1], (a + b + k) % 2 ? pool : NULL);
                    runs++;
                }
    }
    gemm_case_opts big = {-1, 0, 0, 1e-4f, 1};
    fails += gemm_check(&big, 0, 0, 1, 5000, 576, 1, 0, pool); /* lm_head-like, threaded panel GEMV */
    fails += gemm_check(&big, 0, 0, 128, 1000, 600, 1, 0, pool);
    runs += 2;

    /* throughput, informational */
    int64_t n = 512;
    float *A = calloc((size_t)(n * n), 4), *B = calloc((size_t)(n * n), 4), *C = calloc((size_t)(n * n), 4);
    for (int64_t i = 0; i < n * n; i++)
        A[i] = frand(), B[i] = frand();
    for (int t = 0; t < 2; t++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int reps = 5;
        for (int r = 0; r < reps; r++)
            sn_sgemm(0, 0, n, n, n, 1, A, n, B, n, 0, C, n, t ? pool : NULL);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        printf("sgemm %s %lldx%lldx%lld %s: %.1f GFLOP/s\n", sn_sgemm_kernel_name(), (long long)n,
               (long long)n, (long long)n, t ? "4 threads" : "1 thread",
               2.0 * (double)(n * n * n) * reps / s * 1e-9);
    }
    free(A);
    free(B);
    free(C);
    sn_pool_free(pool);
    printf("test_gemm: %d/%d passed\n", runs - fails, runs);
    return fails ? 1 : 0;
}
