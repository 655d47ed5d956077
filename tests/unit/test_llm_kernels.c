/* The LLM operators' fast inner kernels (src/ops/llm_kernels.c) against
 * their scalar references on odd sizes: dot, block dequantization (2/4/8
 * bits, partial blocks), the 4-bit GEMV column kernel, int8 quantization, RMS and layer norm rows, rotary
 * (half/interleaved, partial, in place) and the online-softmax attention row
 * (ranges, masks, biases, softcap, sink, qk outputs, fully masked rows).
 * The ONNX Runtime parity kernels: the int8 MatMulNBits lanes (SIMD form
 * bit-identical to the scalar one, and the scalar one to the plain integer
 * dot), MLAS's exp and logistic near the true functions, the ORT norm rows
 * and the ORT attention rows near the reference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/llm_kernels.h"

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static float frand(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) & 0xFFFF) / 32768.0f - 1.0f;
}
static void fill(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        x[i] = frand();
}

static int g_fail = 0;
static bool close_to(float a, float b, float rtol, float atol) {
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    if (isinf(a) || isinf(b))
        return a == b;
    return fabsf(a - b) <= atol + rtol * fabsf(b);
}
static void expect_vec(const char *what, const float *got, const float *want, int64_t n,
                       float rtol, float atol) {
    for (int64_t i = 0; i < n; i++)
        if (!close_to(got[i], want[i], rtol, atol)) {
            fprintf(stderr, "FAIL %s: [%lld] got %.8g want %.8g\n", what, (long long)i,
                    (double)got[i], (double)want[i]);
            g_fail = 1;
            return;
        }
}

static void test_dot(void) {
    float a[301], b[301];
    fill(a, 301);
    fill(b, 301);
    for (int64_t n = 0; n <= 301; n += 7) {
        float f = llm_dot(a, b, n), r = llm_dot_ref(a, b, n);
        expect_vec("dot", &f, &r, 1, 1e-5f, 1e-5f);
    }
}

static void test_dequant(void) {
    uint8_t blob[256];
    for (int i = 0; i < 256; i++)
        blob[i] = (uint8_t)(frand() * 128 + 128);
    float f[256], r[256];
    int bits[3] = {2, 4, 8};
    for (int bi = 0; bi < 3; bi++)
        for (int64_t len = 1; len <= 256 && len * bits[bi] <= 2048; len += 5) {
            llm_q_dequant(blob, bits[bi], len, 0.037f, 1.0f + (float)bi, f);
            llm_q_dequant_ref(blob, bits[bi], len, 0.037f, 1.0f + (float)bi, r);
            expect_vec("dequant", f, r, len, 0, 0);
            /* integer codes agree with the float dequantization */
            int16_t q[256];
            llm_q_codes(blob, bits[bi], len, 1 + bi, q);
            for (int64_t i = 0; i < len; i++)
                if (fabsf((float)q[i] * 0.037f - r[i]) > 1e-6f) {
                    fprintf(stderr, "FAIL codes bits %d [%lld]\n", bits[bi], (long long)i);
                    g_fail = 1;
                    break;
                }
        }
    /* 4-bit layout: low nibble first */
    uint8_t one = 0x3A;
    llm_q_dequant(&one, 4, 2, 1.0f, 0.0f, f);
    if (f[0] != 10.0f || f[1] != 3.0f) {
        fprintf(stderr, "FAIL nibble order: %g %g\n", (double)f[0], (double)f[1]);
        g_fail = 1;
    }
}

static void test_q4_col(void) {
    enum { BS = 64, NB = 5 };
    static uint8_t b[NB * BS / 2];
    static float a[NB * BS], ap[NB * BS], sc[NB];
    for (int i = 0; i < NB * BS / 2; i++)
        b[i] = (uint8_t)(frand() * 128 + 128);
    fill(a, NB * BS);
    fill(sc, NB);
    llm_q4_permute(a, ap, NB * BS / 16);
    for (int nb = 0; nb <= NB; nb++) {
        float f = llm_q4_col(b, ap, sc, nb, BS), r = llm_q4_col_ref(b, a, sc, nb, BS);
        expect_vec("q4_col", &f, &r, 1, 1e-5f, 1e-4f);
    }
    /* bs = 16: one group per block */
    float f = llm_q4_col(b, ap, sc, 3, 16), r = llm_q4_col_ref(b, a, sc, 3, 16);
    expect_vec("q4_col bs16", &f, &r, 1, 1e-5f, 1e-4f);
    for (int64_t len = 1; len < 100; len += 9) {
        float d = llm_q_dot(b, 4, a, len), e = llm_q_dot_ref(b, 4, a, len);
        expect_vec("q_dot", &d, &e, 1, 1e-5f, 1e-4f);
        d = llm_q_dot(b, 8, a, len);
        e = llm_q_dot_ref(b, 8, a, len);
        expect_vec("q_dot 8", &d, &e, 1, 1e-5f, 1e-3f);
        d = llm_q_dot(b, 2, a, len);
        e = llm_q_dot_ref(b, 2, a, len);
        expect_vec("q_dot 2", &d, &e, 1, 1e-5f, 1e-4f);
    }
}

static void test_q8(void) {
    float x[77];
    int8_t q[77];
    fill(x, 77);
    x[5] = -1.5f; /* the max magnitude maps to -127 */
    float s = llm_q8_quantize(x, 77, q);
    if (q[5] != -127 || fabsf(s - 1.5f / 127) > 1e-9f) {
        fprintf(stderr, "FAIL q8 scale %g q %d\n", (double)s, q[5]);
        g_fail = 1;
    }
    for (int i = 0; i < 77; i++)
        if (fabsf((float)q[i] * s - x[i]) > s * 0.5f + 1e-7f) {
            fprintf(stderr, "FAIL q8 [%d]\n", i);
            g_fail = 1;
            break;
        }
    int16_t b[77];
    int32_t want = 0;
    for (int i = 0; i < 77; i++) {
        b[i] = (int16_t)(i % 31 - 15);
        want += q[i] * b[i];
    }
    if (llm_dot_i8_i16(q, b, 77) != want) {
        fprintf(stderr, "FAIL dot_i8\n");
        g_fail = 1;
    }
    float z[9] = {0};
    if (llm_q8_quantize(z, 9, q) != 0.0f || q[3] != 0) {
        fprintf(stderr, "FAIL q8 zeros\n");
        g_fail = 1;
    }
}

static void test_norms(void) {
    float x[203], g[203], b[203], y[203], r[203];
    fill(x, 203);
    fill(g, 203);
    fill(b, 203);
    for (int64_t n = 1; n <= 203; n += 101) {
        float i1 = llm_rms_row(x, g, 1e-5f, n, y), i2 = llm_rms_row_ref(x, g, 1e-5f, n, r);
        expect_vec("rms", y, r, n, 1e-5f, 1e-6f);
        expect_vec("rms inv", &i1, &i2, 1, 1e-5f, 0);
        llm_rms_row(x, NULL, 1e-5f, n, y);
        llm_rms_row_ref(x, NULL, 1e-5f, n, r);
        expect_vec("rms nogamma", y, r, n, 1e-5f, 1e-6f);
        float s1, s2;
        float m1 = llm_ln_row(x, g, b, 1e-5f, n, y, &s1);
        float m2 = llm_ln_row_ref(x, g, b, 1e-5f, n, r, &s2);
        expect_vec("ln", y, r, n, 1e-4f, 1e-5f);
        expect_vec("ln mean", &m1, &m2, 1, 1e-5f, 1e-6f);
        expect_vec("ln inv", &s1, &s2, 1, 1e-4f, 0);
    }
}

static void test_rope(void) {
    float x[64], y[64], r[64], c[32], s[32];
    fill(x, 64);
    for (int i = 0; i < 32; i++) {
        c[i] = cosf((float)i * 0.3f);
        s[i] = sinf((float)i * 0.3f);
    }
    int64_t dims[3][2] = {{64, 64}, {64, 32}, {10, 6}};
    for (int d = 0; d < 3; d++)
        for (int il = 0; il < 2; il++) {
            llm_rope(x, y, c, s, dims[d][1], dims[d][0], il);
            llm_rope_ref(x, r, c, s, dims[d][1], dims[d][0], il);
            expect_vec("rope", y, r, dims[d][0], 1e-6f, 1e-6f);
            memcpy(y, x, sizeof y); /* in place */
            llm_rope(y, y, c, s, dims[d][1], dims[d][0], il);
            expect_vec("rope in place", y, r, dims[d][0], 1e-6f, 1e-6f);
        }
}

static void test_attn(void) {
    enum { H = 24, HV = 13, L = 203 };
    static float q[H], k[L * H], v[L * HV], b1[L], b2[L], y1[HV], y2[HV], acc[HV], sc[L];
    static float qk1[L], qk2[L];
    fill(q, H);
    fill(k, L * H);
    fill(v, L * HV);
    fill(b1, L);
    fill(b2, L);
    for (int i = 0; i < H; i++)
        q[i] *= 3; /* peaky softmax */
    for (int variant = 0; variant < 10; variant++)
        for (int mode = 0; mode < 6; mode++) {
            llm_attn_row r = {0};
            /* modes 4, 5: the ONNX Runtime rows (prompt, decode) where they apply */
            r.ort = mode >= 4 ? mode - 3 : 0;
            r.q = q;
            r.k = k;
            r.v = v;
            r.k_stride = H;
            r.v_stride = HV;
            r.H = H;
            r.Hv = HV;
            r.lo = variant == 1 ? 17 : 0;
            r.hi = variant == 2 ? 1 : variant == 3 ? 129 : L;
            r.mask_lo = r.lo + (variant == 4 ? 30 : 0);
            r.mask_hi = r.hi - (variant == 4 ? 5 : 0);
            r.scale = 0.2f;
            r.softcap = variant == 5 || variant == 6 ? 1.5f : 0;
            r.softcap_after_bias = variant == 6;
            r.bias1 = variant >= 6 ? b1 : NULL;
            r.bias1_len = variant == 7 ? 150 : L;
            r.bias2 = variant == 8 ? b2 : NULL;
            r.sink = variant == 9;
            r.sink_val = 0.7f;
            r.qk_mode = mode < 4 ? mode : 0;
            r.zero_if_masked = 1;
            for (int j = 0; j < L; j++)
                qk1[j] = qk2[j] = 0;
            r.qk_out = mode < 4 ? qk1 : NULL;
            r.y = y1;
            llm_attn_row_run(&r, acc);
            r.qk_out = mode < 4 ? qk2 : NULL;
            r.y = y2;
            llm_attn_row_ref(&r, sc);
            char what[64];
            snprintf(what, sizeof what, "attn variant %d mode %d", variant, mode);
            expect_vec(what, y1, y2, HV, 1e-4f, 1e-5f);
            expect_vec(what, qk1, qk2, L, 1e-4f, 1e-6f);
        }
    /* a row whose every key is masked: zeros (or NaN when asked) */
    llm_attn_row r = {.q = q, .k = k, .v = v, .k_stride = H, .v_stride = HV, .H = H, .Hv = HV,
                      .lo = 0, .hi = 8, .mask_lo = 8, .mask_hi = 8, .scale = 1,
                      .zero_if_masked = 1, .y = y1};
    llm_attn_row_run(&r, acc);
    for (int d = 0; d < HV; d++)
        if (y1[d] != 0.0f) {
            fprintf(stderr, "FAIL masked row not zero\n");
            g_fail = 1;
            break;
        }
    r.zero_if_masked = 0;
    llm_attn_row_run(&r, acc);
    if (!isnan(y1[0])) {
        fprintf(stderr, "FAIL masked row not NaN\n");
        g_fail = 1;
    }
}

/* The ort rows with score scratch (eight keys per vector where the CPU
 * allows) against the scalar two-pass rows: the same bits, on head sizes
 * with and without whole vectors, key ranges with partial blocks, keys
 * row-major and transposed. */
static void test_attn_ort_simd(void) {
    enum { L = 203, HMAX = 72, VMAX = 136 };
    static float q[HMAX], k[L * HMAX], v[L * VMAX], kt[HMAX * (L + 8)];
    static float y1[VMAX], y2[VMAX], acc[VMAX], sc[LLM_ATTN_SCORES(L)];
    const int64_t dims[][2] = {{64, 64}, {24, 13}, {8, 136}, {72, 72}, {5, 3}};
    const int64_t ranges[][2] = {{0, L}, {17, L}, {0, 1}, {3, 11}, {0, 129}, {40, 72}};
    for (int di = 0; di < 5; di++) {
        int64_t H = dims[di][0], HV = dims[di][1];
        fill(q, H);
        fill(k, L * H);
        fill(v, L * HV);
        for (int i = 0; i < H; i++)
            q[i] *= 3;
        llm_attn_keys_t(k, L, H, kt, L + 8);
        for (int ri = 0; ri < 6; ri++)
            for (int ort = 1; ort <= 2; ort++)
                for (int use_kt = 0; use_kt < 2; use_kt++) {
                    llm_attn_row r = {.q = q, .k = k, .v = v, .k_stride = H, .v_stride = HV,
                                      .H = H, .Hv = HV, .lo = ranges[ri][0],
                                      .hi = ranges[ri][1], .mask_lo = 0, .mask_hi = L,
                                      .scale = 0.125f, .ort = ort, .y = y1};
                    llm_attn_row_run(&r, acc);
                    r.scores = sc;
                    r.kt = use_kt ? kt : NULL;
                    r.kt_ld = L + 8;
                    r.y = y2;
                    llm_attn_row_run(&r, acc);
                    if (memcmp(y1, y2, (size_t)HV * sizeof(float))) {
                        fprintf(stderr, "FAIL attn ort simd H %lld Hv %lld keys [%lld, %lld) "
                                "ort %d kt %d\n", (long long)H, (long long)HV,
                                (long long)r.lo, (long long)r.hi, ort, use_kt);
                        g_fail = 1;
                    }
                }
    }
    /* the transposed keys and their zeroed tail */
    for (int64_t d = 0; d < 5; d++)
        for (int64_t j = 0; j < L + 8; j++)
            if (kt[d * (L + 8) + j] != (j < L ? k[j * 5 + d] : 0.0f)) {
                fprintf(stderr, "FAIL keys_t [%lld, %lld]\n", (long long)d, (long long)j);
                g_fail = 1;
                return;
            }
}

/* The blocked transpose against the plain loops, on sizes around the
 * eight-by-eight blocks and the column tiles, into a wider destination. */
static void test_transpose(void) {
    const int64_t dims[][2] = {{1, 1}, {8, 8}, {7, 9}, {150, 64}, {17, 300}, {64, 129}, {3, 8}};
    for (int i = 0; i < 7; i++) {
        int64_t rows = dims[i][0], cols = dims[i][1], ld = rows + 5;
        static float src[64 * 300], got[300 * 155], want[300 * 155];
        fill(src, rows * cols);
        for (int64_t j = 0; j < cols * ld; j++)
            got[j] = want[j] = -7.0f; /* gaps between rows stay untouched */
        llm_transpose_f32(src, rows, cols, got, ld);
        llm_transpose_f32_ref(src, rows, cols, want, ld);
        if (memcmp(got, want, (size_t)(cols * ld) * sizeof(float))) {
            fprintf(stderr, "FAIL transpose %lld x %lld\n", (long long)rows, (long long)cols);
            g_fail = 1;
        }
    }
}

static void test_mnb4_parity(void) {
    enum { KB = 7 };
    int8_t qa[KB * 32];
    uint8_t b[KB * 16], zp[(KB + 1) / 2];
    float sa[KB], sb[KB];
    for (int i = 0; i < KB * 32; i++)
        qa[i] = (int8_t)(int)(frand() * 127.0f);
    for (int i = 0; i < KB * 16; i++)
        b[i] = (uint8_t)((unsigned)(g_rng >> 20) & 255), frand();
    for (int i = 0; i < (KB + 1) / 2; i++)
        zp[i] = (uint8_t)((unsigned)(g_rng >> 30) & 255), frand();
    for (int i = 0; i < KB; i++) {
        sa[i] = 0.01f + fabsf(frand()) * 0.02f;
        sb[i] = 0.001f + fabsf(frand()) * 0.01f;
    }
    for (int64_t kb = 1; kb <= KB; kb++)
        for (int m1 = 0; m1 < 2; m1++)
            for (int z = 0; z < 2; z++) {
                const uint8_t *zpp = z ? zp : NULL;
                float a[8], r[8];
                llm_mnb4_lanes(qa, sa, b, sb, zpp, kb, m1, a);
                llm_mnb4_lanes_ref(qa, sa, b, sb, zpp, kb, m1, r);
                if (memcmp(a, r, sizeof a)) {
                    fprintf(stderr, "FAIL mnb4 lanes kb %lld m1 %d zp %d not bit-identical\n",
                            (long long)kb, m1, z);
                    g_fail = 1;
                }
                /* the lanes sum to the block-scaled integer dot (plus the
                 * zero-point term for M > 1) */
                double want = 0, got = 0;
                for (int64_t blk = 0; blk < kb; blk++) {
                    int zv = zpp ? (zp[blk / 2] >> (4 * (blk & 1))) & 15 : 8;
                    int32_t d = 0;
                    for (int k = 0; k < 32; k++) {
                        int c = (b[blk * 16 + k / 2] >> (4 * (k & 1))) & 15;
                        d += qa[blk * 32 + k] * (c - zv);
                    }
                    want += (double)sa[blk] * sb[blk] * d;
                }
                for (int j = 0; j < 8; j++)
                    got += r[j];
                if (!m1 || !zpp) {
                    /* M > 1 lanes hold unsigned codes (zero points apart);
                     * M = 1 without zero points subtracts 8 in the lanes */
                    float ab[KB];
                    for (int64_t blk = 0; blk < kb; blk++) {
                        int32_t s = 0;
                        for (int k = 0; k < 32; k++)
                            s += qa[blk * 32 + k];
                        ab[blk] = sa[blk] * (float)s;
                    }
                    if (!m1)
                        got += llm_mnb4_blksum(ab, sb, zpp, kb);
                }
                if (fabs(got - want) > 1e-5 * (1 + fabs(want))) {
                    fprintf(stderr, "FAIL mnb4 dot kb %lld m1 %d zp %d: %g vs %g\n",
                            (long long)kb, m1, z, got, want);
                    g_fail = 1;
                }
            }
}

static void test_mlas_functions(void) {
    for (float x = -30.0f; x <= 0.0f; x += 0.37f) {
        float e = llm_exp_mlas(x);
        if (!close_to(e, expf(x), 3e-7f, 0)) {
            fprintf(stderr, "FAIL exp_mlas(%g) = %g\n", (double)x, (double)e);
            g_fail = 1;
        }
    }
    for (float x = -25.0f; x <= 25.0f; x += 0.41f) {
        float l = llm_logistic_mlas(x), w = 1.0f / (1.0f + expf(-x));
        if (!close_to(l, w, 1e-5f, 1e-7f)) {
            fprintf(stderr, "FAIL logistic_mlas(%g) = %g\n", (double)x, (double)l);
            g_fail = 1;
        }
    }
    float x[203], g[203], y[203], r[203];
    fill(x, 203);
    fill(g, 203);
    for (int64_t n = 1; n <= 203; n += 101) {
        llm_rms_row_ort(x, g, 1e-5f, n, y);
        llm_rms_row_ref(x, g, 1e-5f, n, r);
        expect_vec("rms ort", y, r, n, 1e-5f, 1e-6f);
        llm_skip_rms_row_ort(x, g, 1e-5f, n, y);
        expect_vec("skip rms ort", y, r, n, 1e-5f, 1e-6f);
    }
}

int main(void) {
    test_dot();
    test_dequant();
    test_q4_col();
    test_q8();
    test_norms();
    test_rope();
    test_attn();
    test_attn_ort_simd();
    test_transpose();
    test_mnb4_parity();
    test_mlas_functions();
    if (g_fail)
        return 1;
    printf("test_llm_kernels: ok\n");
    return 0;
}
