/* Shared by the GEMM tests: one product against the scalar reference. */
#ifndef SNUG_TEST_GEMM_CHECK_H
#define SNUG_TEST_GEMM_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/gemm.h"

static uint64_t g_rng;
static float frand(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) & 0xFFFF) / 32768.0f - 1.0f;
}

typedef struct gemm_case_opts {
    int isa;          /* sn_gemm_isa for sn_sgemm_isa, or -1: the public sn_sgemm */
    int64_t pad;      /* extra leading-dimension elements */
    int exact_alloc;  /* matrices end exactly where their allocation ends (ASan sees overreads) */
    float tol;        /* |c - r| <= tol*K + tol*|r| */
    int packed;       /* B through sn_sgemm_pack_b + sn_sgemm_packed (isa -1: the best set) */
} gemm_case_opts;

/* Returns 1 (and prints the case) when C differs from the reference, when a
 * beta == 0 product read the NaN-poisoned C, or a padding column changed. */
static int gemm_check(const gemm_case_opts *o, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha,
                      float beta, sn_pool *pool) {
    int64_t pad = o->pad;
    int64_t lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
    int64_t arows = ta ? K : M, brows = tb ? N : K;
    size_t na, nb, nc;
    if (o->exact_alloc) {
        na = (size_t)((arows - 1) * lda + (ta ? M : K));
        nb = (size_t)((brows - 1) * ldb + (tb ? K : N));
        nc = (size_t)(M * ldc);
    } else {
        na = (size_t)(arows * lda + 1);
        nb = (size_t)(brows * ldb + 1);
        nc = (size_t)(M * ldc + 1);
    }
    float *A = malloc(na * sizeof *A), *B = malloc(nb * sizeof *B);
    float *C = malloc(nc * sizeof *C), *R = malloc(nc * sizeof *R);
    for (size_t i = 0; i < na; i++)
        A[i] = frand();
    for (size_t i = 0; i < nb; i++)
        B[i] = frand();
    for (size_t i = 0; i < nc; i++)
        C[i] = R[i] = frand();
    if (beta == 0.0f) /* beta == 0 must not read C: poison it */
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++)
                C[i * ldc + j] = NAN;
    if (o->packed) {
        sn_gemm_isa isa = o->isa < 0 ? SN_GEMM_ISA_BEST : (sn_gemm_isa)o->isa;
        void *pk = malloc(sn_sgemm_pack_b_bytes(isa, N, K));
        float *keep = malloc(nb * sizeof *keep);
        sn_sgemm_pack_b(isa, tb, N, K, B, ldb, pk, NULL, NULL);
        memcpy(keep, B, nb * sizeof *keep);
        for (size_t i = 0; i < nb; i++) /* the product must not read B after packing */
            B[i] = NAN;
        sn_sgemm_packed(ta, M, alpha, A, lda, pk, beta, C, ldc, pool);
        memcpy(B, keep, nb * sizeof *keep);
        free(keep);
        free(pk);
    } else if (o->isa < 0)
        sn_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, pool);
    else
        sn_sgemm_isa((sn_gemm_isa)o->isa, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, pool);
    sn_sgemm_ref(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, R, ldc);
    int bad = 0;
    for (int64_t i = 0; i < M && !bad; i++)
        for (int64_t j = 0; j < ldc && !bad; j++) {
            float c = C[i * ldc + j], r = R[i * ldc + j];
            if (j >= N) { /* padding columns must be untouched */
                if (memcmp(&c, &r, sizeof c) != 0)
                    bad = 1;
            } else if (!(fabsf(c - r) <= o->tol * (float)K + o->tol * fabsf(r))) {
                bad = 1;
            }
            if (bad)
                fprintf(stderr, "FAIL isa=%d ta=%d tb=%d M=%lld N=%lld K=%lld alpha=%g beta=%g at (%lld,%lld): %g vs %g\n",
                        o->isa, ta, tb, (long long)M, (long long)N, (long long)K, alpha, beta, (long long)i,
                        (long long)j, c, r);
        }
    free(A);
    free(B);
    free(C);
    free(R);
    return bad;
}

#endif
