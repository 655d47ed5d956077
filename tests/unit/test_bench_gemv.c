/* The skinny sgemm paths (decode GEMV with B row-major or transposed, short
 * prefills with up to 8 rows of A) against the reference, for every kernel
 * set the machine has (portable C, AVX2): odd sizes around the 8/16-float
 * vector widths and the 4-row blocks, both transposes, alpha/beta, strides
 * larger than the matrix, serial and threaded. Matrices sit at the very end
 * of their allocation so a read past them shows under AddressSanitizer. Also
 * times the decode GEMV of a 576 x 1536 weight (reported, not checked). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gemm_check.h"
#include "ops/gemm.h"

static int check(sn_gemm_isa isa, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, float beta,
                 sn_pool *pool) {
    /* leading dimensions larger than needed, sometimes; exact allocations */
    gemm_case_opts o = {(int)isa, (M + N + K) % 3, 1, 1e-5f, 0};
    return gemm_check(&o, ta, tb, M, N, K, alpha, beta, pool);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(void) {
    g_rng = 0x2545F4914F6CDD1Dull;
    static const int64_t Ms[] = {1, 2, 3, 5, 8};
    static const int64_t Ns[] = {2, 7, 8, 9, 15, 16, 17, 31, 33, 64, 65, 130, 577, 2100};
    static const int64_t Ks[] = {1, 3, 4, 5, 8, 17, 64, 301};
    static const float ab[][2] = {{1, 0}, {0.5f, 1}, {-2, 0.25f}, {1, 1}};
    sn_pool *pool = NULL;
    sn_err err = {0};
    if (sn_pool_new(3, &pool, &err) != SNUG_OK) {
        fprintf(stderr, "pool: %s\n", err.msg);
        return 1;
    }
    const sn_gemm_isa isas[] = {SN_GEMM_ISA_C, SN_GEMM_ISA_AVX2, SN_GEMM_ISA_NEON, SN_GEMM_ISA_BEST};
    const char *names[] = {"c", "avx2", "neon", "best"};
    int fails = 0, runs = 0;
    for (int s = 0; s < 4; s++) {
        if (!sn_gemm_isa_available(isas[s])) {
            printf("kernel set %s: not available on this machine, skipped\n", names[s]);
            continue;
        }
        int before = fails;
        for (size_t m = 0; m < sizeof Ms / sizeof *Ms; m++)
            for (size_t n = 0; n < sizeof Ns / sizeof *Ns; n++)
                for (size_t k = 0; k < sizeof Ks / sizeof *Ks; k++)
                    for (int t = 0; t < 4; t++) {
                        int ta = t & 1, tb = t >> 1;
                        const float *x = ab[(m + n + k + (size_t)t) % 4];
                        sn_pool *p = (m + n + k) % 2 ? pool : NULL;
                        fails += check(isas[s], ta, tb, Ms[m], Ns[n], Ks[k], x[0], x[1], p);
                        runs++;
                    }
        /* the decode shapes of SmolLM2-135M */
        fails += check(isas[s], 0, 0, 1, 1536, 576, 1, 0, pool);
        fails += check(isas[s], 0, 0, 1, 576, 1536, 1, 0, pool);
        fails += check(isas[s], 0, 1, 1, 576, 1536, 1, 0, pool);
        fails += check(isas[s], 0, 0, 7, 1536, 576, 1, 0, pool);
        runs += 4;
        printf("kernel set %s: %s\n", names[s], fails == before ? "ok" : "FAILED");
    }

    /* decode GEMV throughput, informational: 576 x 1536 (3.4 MiB, beyond L2) */
    int64_t K = 576, N = 1536;
    size_t nb = (size_t)(K * N) * 64; /* 64 distinct weights: more than the L3 */
    float *A = malloc((size_t)K * sizeof *A), *B = malloc(nb * sizeof *B), *C = malloc((size_t)N * sizeof *C);
    for (int64_t i = 0; i < K; i++)
        A[i] = frand();
    for (size_t i = 0; i < nb; i++)
        B[i] = (float)(i & 15) * 0.0625f;
    for (int s = 0; s < 2; s++) {
        if (!sn_gemm_isa_available(isas[s]))
            continue;
        for (int t = 0; t < 2; t++) {
            double best = 1e30;
            for (int rep = 0; rep < 3; rep++) {
                double t0 = now_s();
                for (int w = 0; w < 64; w++)
                    sn_sgemm_isa(isas[s], 0, 0, 1, N, K, 1, A, K, B + (size_t)w * (size_t)(K * N), N, 0, C, N,
                                 t ? pool : NULL);
                double dt = (now_s() - t0) / 64;
                best = dt < best ? dt : best;
            }
            printf("gemv %s 1x%lldx%lld %s: %.1f us, %.2f GB/s of weights\n", names[s], (long long)N, (long long)K,
                   t ? "3 threads" : "1 thread", best * 1e6, (double)(K * N) * 4 / best * 1e-9);
        }
    }
    free(A);
    free(B);
    free(C);
    sn_pool_free(pool);
    printf("test_bench_gemv: %d/%d passed\n", runs - fails, runs);
    return fails ? 1 : 0;
}
