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

/* The callback's B: column-major in a buffer (ld K), any block on request. */
typedef struct cb_src {
    const float *B; /* [K, N] row-major */
    int64_t N;
    int calls;
} cb_src;

static void cb_block(void *ctx, int64_t j0, int64_t nb, int64_t p0, int64_t kb, float *bp, int64_t ps, int nr) {
    cb_src *c = ctx;
    __atomic_fetch_add(&c->calls, 1, __ATOMIC_RELAXED);
    for (int64_t j = 0; j < (nb + nr - 1) / nr * nr; j++)
        for (int64_t p = 0; p < kb; p++)
            bp[j / nr * ps + p * nr + j % nr] = j < nb ? c->B[(p0 + p) * c->N + j0 + j] : 0.0f;
}

static int cb_check(int64_t M, int64_t N, int64_t K, sn_pool *pool) {
    float *A = malloc(sizeof(float) * (size_t)(M * K)), *B = malloc(sizeof(float) * (size_t)(K * N));
    float *C = malloc(sizeof(float) * (size_t)(M * N)), *W = malloc(sizeof(float) * (size_t)(M * N));
    float *R = malloc(sizeof(float) * (size_t)(M * N));
    for (int64_t i = 0; i < M * K; i++)
        A[i] = frand();
    for (int64_t i = 0; i < K * N; i++)
        B[i] = frand();
    int t = sn_pool_size(pool);
    size_t n = sn_sgemm_workspace(M, N, K, t);
    void *ws = aligned_alloc(64, (n + 63) / 64 * 64);
    cb_src src = {B, N, 0};
    sn_sgemm_ws(0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, W, N, pool, ws, n);
    sn_sgemm_cb_ws(M, N, K, A, K, cb_block, &src, C, N, pool, ws, n);
    /* up to 8 rows sn_sgemm_ws takes the skinny path: then near it only */
    int bad = src.calls == 0;
    if (M > 8)
        bad |= memcmp(C, W, sizeof(float) * (size_t)(M * N)) != 0;
    else
        for (int64_t i = 0; i < M * N && !bad; i++)
            bad = fabsf(C[i] - W[i]) > 1e-4f * (1.0f + fabsf(W[i]));
    sn_sgemm_cb_ws(M, N, K, A, K, cb_block, &src, R, N, pool, NULL, 0); /* no workspace */
    sn_sgemm_ref(0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, W, N);
    for (int64_t i = 0; i < M * N && !bad; i++)
        bad = fabsf(R[i] - W[i]) > 1e-4f * (1.0f + fabsf(W[i]));
    if (bad)
        fprintf(stderr, "FAIL sgemm_cb M %lld N %lld K %lld threads %d\n", (long long)M, (long long)N,
                (long long)K, t);
    free(A), free(B), free(C), free(W), free(R), free(ws);
    return bad;
}

/* Random A [M, K] and B [K, N] (malloc'd), and B packed for the best kernel set. */
static void *rand_packed(int64_t M, int64_t N, int64_t K, float **A, float **B) {
    *A = malloc(sizeof(float) * (size_t)(M * K));
    *B = malloc(sizeof(float) * (size_t)(K * N));
    void *pk = malloc(sn_sgemm_pack_b_bytes(SN_GEMM_ISA_BEST, N, K));
    for (int64_t j = 0; j < M * K; j++)
        (*A)[j] = frand();
    for (int64_t j = 0; j < K * N; j++)
        (*B)[j] = frand();
    sn_sgemm_pack_b(SN_GEMM_ISA_BEST, 0, N, K, *B, N, pk, NULL, NULL);
    return pk;
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
    const sn_gemm_isa isas[] = {SN_GEMM_ISA_C, SN_GEMM_ISA_AVX2, SN_GEMM_ISA_NEON, SN_GEMM_ISA_AVX512};
    for (int s = 0; s < 4; s++) {
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

    /* One row against prepacked B gives the same bits serially, with any
     * thread count (the panels split differently), and as a row of the
     * blocked product (every column one chain per K slice, the slices added
     * in order: MLAS's packed order) */
    {
        static const int64_t gn[] = {37, 100, 300, 1000}, gk[] = {300, 600, 77, 1100};
        sn_pool *pools[3] = {NULL, pool, NULL};
        sn_pool *p3 = NULL;
        if (sn_pool_new(3, &p3, &err) == SNUG_OK)
            pools[2] = p3;
        for (int c = 0; c < 4; c++) {
            int64_t N = gn[c], K = gk[c], M = 7;
            float *A, *B;
            void *pk = rand_packed(M, N, K, &A, &B);
            float *C = malloc(sizeof(float) * (size_t)(M * N)), *C1 = malloc(sizeof(float) * (size_t)N);
            sn_sgemm_packed(0, M, 1.0f, A, K, pk, 0.0f, C, N, pool);
            for (int t = 0; t < 3; t++) {
                sn_sgemm_packed(0, 1, 1.0f, A + 3 * K, K, pk, 0.0f, C1, N, pools[t]);
                int bad = memcmp(C1, C + 3 * N, sizeof(float) * (size_t)N) != 0;
                if (bad)
                    fprintf(stderr, "FAIL packed one-row N %lld K %lld (%d threads): not the blocked row's bits\n",
                            (long long)N, (long long)K, sn_pool_size(pools[t]));
                fails += bad;
                runs++;
            }
            free(A), free(B), free(C), free(C1), free(pk);
        }
        sn_pool_free(p3);
    }

    /* A last row panel of 1-5 rows (its own kernels where the set has them:
     * two panels at once up to 2 rows, 4 x 16 up to 4) gives the bits those
     * rows get inside a full panel: M = 13..17 against the first rows of
     * M = 18, B prepacked and packed per block, serial and threaded, odd
     * panel counts and a partial last panel, K across the slice boundary */
    {
        static const int64_t tn[] = {40, 53, 300}, tk[] = {300, 77};
        for (int c = 0; c < 6; c++) {
            int64_t N = tn[c % 3], K = tk[c / 3], Mf = 18;
            float *A, *B;
            void *pk = rand_packed(Mf, N, K, &A, &B);
            float *F = malloc(sizeof(float) * (size_t)(Mf * N)), *T = malloc(sizeof(float) * (size_t)(Mf * N));
            for (int packed = 0; packed < 2; packed++) {
                sn_pool *p = c % 2 ? pool : NULL;
                float beta = packed ? 0.0f : 1.0f;
                for (int64_t j = 0; j < Mf * N; j++)
                    F[j] = T[j] = (float)(j % 7);
                if (packed)
                    sn_sgemm_packed(0, Mf, 1.0f, A, K, pk, beta, F, N, p);
                else
                    sn_sgemm(0, 0, Mf, N, K, 1.0f, A, K, B, N, beta, F, N, p);
                for (int64_t M = 13; M < Mf; M++) {
                    if (packed)
                        sn_sgemm_packed(0, M, 1.0f, A, K, pk, beta, T, N, p);
                    else
                        sn_sgemm(0, 0, M, N, K, 1.0f, A, K, B, N, beta, T, N, p);
                    int bad = memcmp(T, F, sizeof(float) * (size_t)(M * N)) != 0;
                    if (bad)
                        fprintf(stderr, "FAIL sgemm %s M %lld N %lld K %lld: the last %lld rows' bits differ from "
                                "a full panel's\n", packed ? "packed" : "blocked", (long long)M, (long long)N,
                                (long long)K, (long long)(M % 6));
                    fails += bad;
                    runs++;
                    for (int64_t j = 0; j < M * N; j++)
                        T[j] = (float)(j % 7);
                }
            }
            free(A), free(B), free(F), free(T), free(pk);
        }
    }

    /* B produced block by block by a callback (sn_sgemm_cb_ws): the same bits
     * as sn_sgemm_ws on that B with more than 8 rows (both blocked), near it
     * with fewer, serial and threaded, sizes across the K-slice and
     * column-block boundaries; and without a workspace, near the reference */
    static const int64_t cm[] = {9, 130, 97, 4}, cn[] = {16, 17, 300, 531}, ck[] = {5, 256, 600};
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            for (int k = 0; k < 3; k++) {
                fails += cb_check(cm[a], cn[b], ck[k], (a + b + k) % 2 ? pool : NULL);
                runs++;
            }

    /* a workspace sized at a bound serves every smaller product: its size
     * grows with M (A packed up front below a size, not above), and a product
     * of fewer rows runs correctly in the workspace sized for more (under
     * ASan any write past it fails) */
    {
        static const int64_t bk[] = {576, 1536, 4096};
        for (int i = 0; i < 3; i++) {
            size_t prev = 0;
            for (int64_t M = 2; M <= 4000; M += 37) {
                size_t w = sn_sgemm_workspace(M, 576, bk[i], 2);
                if (w < prev) {
                    fprintf(stderr, "FAIL sgemm workspace shrinks at M %lld (K %lld): %zu < %zu\n", (long long)M,
                            (long long)bk[i], w, prev);
                    fails++;
                    break;
                }
                prev = w;
            }
            runs++;
        }
        int64_t Mb = 1500, Ms = 1000, N = 40, K = 1536;
        size_t wb = sn_sgemm_workspace(Mb, N, K, sn_pool_size(pool));
        void *ws = malloc(wb);
        float *A = malloc(sizeof(float) * (size_t)(Ms * K)), *B = malloc(sizeof(float) * (size_t)(K * N));
        float *C = malloc(sizeof(float) * (size_t)(Ms * N)), *R = malloc(sizeof(float) * (size_t)(Ms * N));
        for (int64_t j = 0; j < Ms * K; j++)
            A[j] = frand();
        for (int64_t j = 0; j < K * N; j++)
            B[j] = frand();
        sn_sgemm_ws(0, 0, Ms, N, K, 1.0f, A, K, B, N, 0.0f, C, N, pool, ws,
                    sn_sgemm_workspace(Ms, N, K, sn_pool_size(pool)));
        sn_sgemm_ref(0, 0, Ms, N, K, 1.0f, A, K, B, N, 0.0f, R, N);
        int bad = 0;
        for (int64_t j = 0; j < Ms * N && !bad; j++)
            bad = fabsf(C[j] - R[j]) > 1e-3f * (1.0f + fabsf(R[j]));
        if (bad)
            fprintf(stderr, "FAIL sgemm %lld rows in the workspace of %lld\n", (long long)Ms, (long long)Mb);
        fails += bad;
        runs++;
        free(ws), free(A), free(B), free(C), free(R);
    }

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
