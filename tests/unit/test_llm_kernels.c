/* The LLM operators' fast inner kernels (src/ops/llm/kernels.c) against
 * their scalar references on odd sizes: dot, block dequantization (2/4/8
 * bits, partial blocks), the 4-bit float MatMulNBits kernels (rows of
 * permuted A against columns, [K, nb] panel dequantization), int8
 * quantization, RMS and layer norm rows, rotary (half/interleaved, partial,
 * in place) and the online-softmax attention row (ranges, masks, biases,
 * softcap, sink, qk outputs, fully masked rows). The ONNX Runtime parity
 * kernels: the int8 MatMulNBits lanes (the scalar statement against the
 * plain integer dot, and the whole-matrix kernels bit-identical to it, for
 * 4 and 8 bits), the float-zero-point kernels (MLAS SGEMM's rounding) against
 * their references, MLAS's
 * exp and logistic near the true functions, the ORT norm rows and the ORT
 * attention rows near the reference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/llm/kernels.h"

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
    enum { BS = 64, NB = 5, NB16 = NB * BS / 16 };
    static uint8_t b[NB * BS / 2];
    static float a[NB * BS], ap[NB * BS], sc[NB16], as[NB16];
    for (int i = 0; i < NB * BS / 2; i++)
        b[i] = (uint8_t)(frand() * 128 + 128);
    fill(a, NB * BS);
    fill(sc, NB16);
    llm_q4_permute(a, ap, NB * BS / 16);
    /* the permuted A through llm_mnb4f_cols against the plain dot in k
     * order, default zero point 8 (block sums of A for it); blocks of 16
     * (one group each) and 64 */
    for (int bs = 16; bs <= BS; bs *= 4) {
        int nb = NB * BS / bs;
        double want = 0;
        for (int blk = 0; blk < nb; blk++) {
            double d = 0, sum = 0;
            for (int k = 0; k < bs; k++) {
                int i = blk * bs + k;
                d += (double)a[i] * (((b[i / 2] >> (4 * (i & 1))) & 15) - 8);
                sum += a[i];
            }
            want += (double)sc[blk] * d;
            as[blk] = (float)sum;
        }
        float got, w = (float)want;
        llm_mnb4f_args g = {1, nb, bs, ap, NB * BS, as, nb, b, NB * BS / 2, sc, nb, NULL, 0, NULL, &got, 1};
        llm_mnb4f_cols(&g, 0, 1);
        expect_vec("q4 permute + mnb4f", &got, &w, 1, 1e-5f, 1e-4f);
    }
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
/* Rows of one head (R of them, their q, y and scores set here from qs, the
 * y and scratch arrays) run one at a time and then together
 * (llm_attn_rows_run): true when every row's output and the exps left in
 * its scratch (more sensitive) have the same bits both ways. */
enum { ATT_HMAX = 72, ATT_VMAX = 136, ATT_L = 203 };
static bool attn_rows_same(llm_attn_row *rows, int R, float qs[][ATT_HMAX], float ys[][ATT_VMAX],
                           float yw[][ATT_VMAX], float scs[][LLM_ATTN_SCORES(ATT_L)],
                           float scw[][LLM_ATTN_SCORES(ATT_L)], float *acc) {
    for (int i = 0; i < R; i++) {
        fill(qs[i], rows[i].H);
        for (int64_t d = 0; d < rows[i].H; d++)
            qs[i][d] *= 1.37f + 0.1f * (float)i; /* products that round */
        rows[i].q = qs[i];
        rows[i].y = yw[i];
        rows[i].scores = scw[i];
        llm_attn_row_run(&rows[i], acc);
        rows[i].y = ys[i];
        rows[i].scores = scs[i];
    }
    llm_attn_rows_run(rows, R, acc);
    for (int i = 0; i < R; i++)
        if (memcmp(ys[i], yw[i], (size_t)rows[i].Hv * sizeof(float)) ||
            memcmp(scs[i], scw[i], (size_t)(rows[i].hi - rows[i].lo) * sizeof(float))) {
            fprintf(stderr, "row %d of %d differs\n", i, R);
            g_fail = 1;
            return false;
        }
    return true;
}

static void test_attn_ort_simd(void) {
    enum { L = ATT_L, HMAX = ATT_HMAX, VMAX = ATT_VMAX };
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
    /* rows of one head together (llm_attn_rows_run): causal prompt rows with
     * ranges [lo, lo + len), the same bits as one at a time */
    {
        enum { RQ = LLM_ATTN_ROWS };
        static float qs[RQ][HMAX], ys[RQ][VMAX], yw[RQ][VMAX], scs[RQ][LLM_ATTN_SCORES(L)],
            scw[RQ][LLM_ATTN_SCORES(L)];
        int64_t H = 64, HV = 64;
        fill(k, L * H);
        fill(v, L * HV);
        llm_attn_keys_t(k, L, H, kt, L + 8);
        const int64_t lens[][2] = {{0, 1}, {0, 8}, {0, 15}, {0, 16}, {5, 30}, {0, 190}, {9, 193}};
        for (int li = 0; li < 7; li++)
            for (int R = 1; R <= RQ; R++) {
                llm_attn_row rows[RQ];
                for (int i = 0; i < R; i++) {
                    int64_t lo = lens[li][0], hi = sn_imin(L, lo + lens[li][1] + i); /* causal: one more key per row */
                    rows[i] = (llm_attn_row){.k = k, .v = v, .k_stride = H, .v_stride = HV, .H = H, .Hv = HV,
                                             .lo = lo, .hi = hi, .mask_lo = 0, .mask_hi = L, .scale = 0.125f,
                                             .ort = 1, .kt = kt, .kt_ld = L + 8};
                }
                if (!attn_rows_same(rows, R, qs, ys, yw, scs, scw, acc))
                    fprintf(stderr, "FAIL attn rows: %d rows from [%lld, +%lld)\n", R, (long long)lens[li][0],
                            (long long)lens[li][1]);
            }
        /* two to four decode rows of one key/value head (GroupQueryAttention's
         * query heads sharing it): keys and values read once for all */
        const int64_t dec[][2] = {{0, 1}, {0, 2}, {0, 3}, {0, 4}, {0, 5}, {0, 8}, {0, 13}, {7, 160}, {0, 203}};
        for (int R = 2; R <= RQ; R++)
            for (int di = 0; di < 9; di++) {
                llm_attn_row rows[RQ];
                for (int i = 0; i < R; i++)
                    rows[i] = (llm_attn_row){.k = k, .v = v, .k_stride = H, .v_stride = HV, .H = H, .Hv = HV,
                                             .lo = dec[di][0], .hi = dec[di][1], .mask_lo = 0, .mask_hi = L,
                                             .scale = 0.125f, .ort = 2};
                if (!attn_rows_same(rows, R, qs, ys, yw, scs, scw, acc))
                    fprintf(stderr, "FAIL attn decode group of %d: keys [%lld, %lld)\n", R, (long long)dec[di][0],
                            (long long)dec[di][1]);
            }
        fill(k, L * 5); /* as the check below expects */
        llm_attn_keys_t(k, L, 5, kt, L + 8);
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
                float r[8];
                llm_mnb4_lanes_ref(qa, sa, b, sb, zpp, kb, m1, r);
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

/* The whole-matrix int8 MatMulNBits path (llm_mnb4_cols on prepared rows)
 * against the per-element composition it replaces: llm_q8_quantize per
 * block, llm_mnb4_lanes_ref, fold (columns below N - N % 4) or hsum, bias,
 * llm_mnb4_blksum (M > 1). Bit-identical, for the SIMD and the scalar form,
 * on odd sizes: K not a multiple of the block, an odd block count, N not a
 * multiple of the 8-column groups, M = 1, 2, 3, 5, 128, with and without
 * zero points and bias, partial column ranges. */
static void test_mnb4_cols(void) {
    /* 3100 and 8200: past the columns decoded ahead and the zero-point
     * block sums kept on the stack (the slower paths) */
    static const int64_t Ks[] = {32, 64, 100, 160, 576, 2200, 3100, 8200};
    static const int64_t Ns[] = {1, 3, 4, 7, 8, 9, 13, 17, 36};
    static const int64_t Ms[] = {1, 2, 3, 5, 128};
    int cases = 0, tiled = 0;
    for (size_t ki = 0; ki < sizeof Ks / sizeof *Ks; ki++)
        for (size_t ni = 0; ni < sizeof Ns / sizeof *Ns; ni++)
            for (size_t mi = 0; mi < sizeof Ms / sizeof *Ms; mi++) {
                int64_t K = Ks[ki], N = Ns[ni], M = Ms[mi], kb = (K + 31) / 32;
                if ((M == 128 && (K > 576 || N > 17)) || (K > 2200 && (N > 9 || M > 5)))
                    continue;
                int variant = (int)((ki + ni + mi) % 4); /* bit 0: zero points, bit 1: bias */
                for (int v = 0; v < 2; v++, variant ^= 3) {
                    int zpon = variant & 1, biason = (variant >> 1) & 1;
                    int64_t zs = (kb + 1) / 2;
                    float *a = malloc(sizeof(float) * (size_t)(M * K));
                    uint8_t *b = malloc((size_t)(N * kb * 16)), *zp = malloc((size_t)(N * zs));
                    float *sb = malloc(sizeof(float) * (size_t)(N * kb));
                    float *bias = malloc(sizeof(float) * (size_t)N);
                    float *y = malloc(sizeof(float) * (size_t)(M * N));
                    float *yr = malloc(sizeof(float) * (size_t)(M * N));
                    float *want = malloc(sizeof(float) * (size_t)(M * N));
                    int8_t *qa = malloc((size_t)(kb * 32));
                    float *sa = malloc(sizeof(float) * (size_t)kb), *ab = malloc(sizeof(float) * (size_t)kb);
                    size_t rb = llm_mnb4_row_bytes(kb);
                    char *rows = aligned_alloc(64, rb * (size_t)M), *rows2 = aligned_alloc(64, rb);
                    for (int64_t i = 0; i < M * K; i++)
                        a[i] = frand() * (i % 37 == 0 ? 20.0f : 1.0f);
                    for (int64_t i = 0; i < N * kb * 16; i++)
                        b[i] = (uint8_t)(g_rng >> 20), frand();
                    for (int64_t i = 0; i < N * zs; i++)
                        zp[i] = (uint8_t)(g_rng >> 30), frand();
                    for (int64_t i = 0; i < N * kb; i++)
                        sb[i] = 0.001f + fabsf(frand()) * 0.01f;
                    fill(bias, N);
                    int m1 = M == 1;
                    const uint8_t *zpp = zpon ? zp : NULL;
                    int64_t n4 = N - N % 4;
                    for (int64_t m = 0; m < M; m++) {
                        for (int64_t blk = 0; blk < kb; blk++) {
                            int64_t len = K - 32 * blk < 32 ? K - 32 * blk : 32;
                            sa[blk] = llm_q8_quantize(a + m * K + 32 * blk, len, qa + 32 * blk);
                            memset(qa + 32 * blk + len, 0, (size_t)(32 - len));
                            int32_t s = 0;
                            for (int k = 0; k < 32; k++)
                                s += qa[32 * blk + k];
                            ab[blk] = sa[blk] * (float)s;
                        }
                        for (int64_t n = 0; n < N; n++) {
                            float l[8];
                            const uint8_t *zn = zpp ? zpp + n * zs : NULL;
                            llm_mnb4_lanes_ref(qa, sa, b + n * kb * 16, sb + n * kb, zn, kb, m1, l);
                            float val = n < n4 ? llm_fold8(l) : llm_hsum8(l);
                            if (biason)
                                val += bias[n];
                            if (!m1)
                                val += llm_mnb4_blksum(ab, sb + n * kb, zn, kb);
                            want[m * N + n] = val;
                        }
                        memset(rows + (size_t)m * rb, 0x5A, rb);
                        memset(rows2, 0x5A, rb);
                        llm_mnb4_prep_row(a + m * K, K, llm_mnb4_row_kind(M, zpp != NULL), rows + (size_t)m * rb);
                        llm_mnb4_prep_row_ref(a + m * K, K, llm_mnb4_row_kind(M, zpp != NULL), rows2);
                        if (memcmp(rows + (size_t)m * rb, rows2, rb)) {
                            fprintf(stderr, "FAIL mnb4 prep_row K %lld m1 %d differs from ref\n",
                                    (long long)K, m1);
                            g_fail = 1;
                        }
                    }
                    llm_mnb4_args g = {.M = M, .N = N, .kb = kb, .rows = rows, .b = b, .sb = sb, .zp = zpp,
                                       .zp_stride = zs, .bias = biason ? bias : NULL, .y = y, .ldy = N};
                    /* two column ranges, the split not on a group boundary */
                    int64_t split = N / 3;
                    llm_mnb4_cols(&g, 0, split);
                    llm_mnb4_cols(&g, split, N);
                    g.y = yr;
                    llm_mnb4_cols_ref(&g, 0, N);
                    if (memcmp(y, want, sizeof(float) * (size_t)(M * N)) ||
                        memcmp(yr, want, sizeof(float) * (size_t)(M * N))) {
                        for (int64_t i = 0; i < M * N; i++)
                            if (memcmp(&y[i], &want[i], 4) || memcmp(&yr[i], &want[i], 4)) {
                                fprintf(stderr,
                                        "FAIL mnb4 cols M %lld N %lld K %lld zp %d bias %d: "
                                        "[%lld] %.9g / ref %.9g, want %.9g\n",
                                        (long long)M, (long long)N, (long long)K, zpon, biason,
                                        (long long)i, (double)y[i], (double)yr[i], (double)want[i]);
                                break;
                            }
                        g_fail = 1;
                    }
                    /* the same from B in tiles of four columns (llm_mnb4_tile) */
                    if (kb <= LLM_MNB4_TILE_MAX_KB) {
                        uint8_t *bt = malloc(llm_mnb4_tiled_bytes(N, kb));
                        llm_mnb4_tile(b, N, kb, bt, NULL, NULL);
                        llm_mnb4_args gt = g;
                        gt.b = bt;
                        gt.tiled = 1;
                        gt.y = y;
                        memset(y, 0, sizeof(float) * (size_t)(M * N));
                        llm_mnb4_cols(&gt, 0, split);
                        llm_mnb4_cols(&gt, split, N);
                        gt.y = yr;
                        llm_mnb4_cols_ref(&gt, 0, N);
                        if (memcmp(y, want, sizeof(float) * (size_t)(M * N)) ||
                            memcmp(yr, want, sizeof(float) * (size_t)(M * N))) {
                            fprintf(stderr, "FAIL mnb4 cols tiled M %lld N %lld K %lld zp %d bias %d\n", (long long)M,
                                    (long long)N, (long long)K, zpon, biason);
                            g_fail = 1;
                        }
                        free(bt);
                        tiled++;
                    }
                    cases++;
                    free(a), free(b), free(zp), free(sb), free(bias), free(y), free(yr), free(want);
                    free(qa), free(sa), free(ab), free(rows), free(rows2);
                }
            }
    if (cases < 150 || tiled < 120) {
        fprintf(stderr, "FAIL mnb4 cols: only %d cases, %d tiled\n", cases, tiled);
        g_fail = 1;
    }
}

/* The 8-bit int8 MatMulNBits kernels (src/ops/llm/mnb_q8.c): the lanes
 * plus the block sums equal the block-scaled integer dot with the zero
 * points; llm_mnb8_cols, SIMD and scalar, bit-identical to the composition
 * lanes + fold (columns below N - N % 4) or hsum + bias + block sums, on odd
 * block counts, K not a multiple of 32, N tails, M = 1, 2, 3, 5, with and
 * without zero points and bias, split column ranges; 8300: past the block
 * sums kept on the stack. */
static void test_mnb8(void) {
    static const int64_t Ks[] = {32, 64, 96, 100, 576, 8300};
    static const int64_t Ns[] = {1, 3, 4, 7, 8, 9, 13, 17, 36};
    static const int64_t Ms[] = {1, 2, 3, 5};
    int cases = 0;
    for (size_t ki = 0; ki < sizeof Ks / sizeof *Ks; ki++)
        for (size_t ni = 0; ni < sizeof Ns / sizeof *Ns; ni++)
            for (size_t mi = 0; mi < sizeof Ms / sizeof *Ms; mi++) {
                int64_t K = Ks[ki], N = Ns[ni], M = Ms[mi], kb = (K + 31) / 32;
                if (K > 576 && (N > 9 || M > 2))
                    continue;
                int variant = (int)((ki + ni + mi) % 4);
                for (int v = 0; v < 2; v++, variant ^= 3) {
                    int zpon = variant & 1, biason = (variant >> 1) & 1;
                    float *a = malloc(sizeof(float) * (size_t)(M * K));
                    uint8_t *b = malloc((size_t)(N * kb * 32)), *zp = malloc((size_t)(N * kb));
                    float *sb = malloc(sizeof(float) * (size_t)(N * kb));
                    float *bias = malloc(sizeof(float) * (size_t)N);
                    float *y = malloc(sizeof(float) * (size_t)(M * N));
                    float *yr = malloc(sizeof(float) * (size_t)(M * N));
                    float *want = malloc(sizeof(float) * (size_t)(M * N));
                    int8_t *qa = malloc((size_t)(M * kb * 32));
                    float *sa = malloc(sizeof(float) * (size_t)(M * kb));
                    float *ab = malloc(sizeof(float) * (size_t)(M * kb));
                    for (int64_t i = 0; i < M * K; i++)
                        a[i] = frand() * (i % 37 == 0 ? 20.0f : 1.0f);
                    for (int64_t i = 0; i < N * kb * 32; i++)
                        b[i] = (uint8_t)(g_rng >> 20), frand();
                    for (int64_t i = 0; i < N * kb; i++) {
                        zp[i] = (uint8_t)(g_rng >> 30), frand();
                        sb[i] = 0.001f + fabsf(frand()) * 0.01f;
                    }
                    fill(bias, N);
                    const uint8_t *zpp = zpon ? zp : NULL;
                    for (int64_t m = 0; m < M; m++)
                        for (int64_t blk = 0; blk < kb; blk++) {
                            int64_t len = K - 32 * blk < 32 ? K - 32 * blk : 32;
                            int8_t *q = qa + m * kb * 32 + 32 * blk;
                            sa[m * kb + blk] = llm_q8_quantize(a + m * K + 32 * blk, len, q);
                            memset(q + len, 0, (size_t)(32 - len));
                            int32_t s = 0;
                            for (int k = 0; k < 32; k++)
                                s += q[k];
                            ab[m * kb + blk] = sa[m * kb + blk] * (float)s;
                        }
                    for (int64_t m = 0; m < M; m++)
                        for (int64_t n = 0; n < N; n++) {
                            float l[8];
                            const int8_t *q = qa + m * kb * 32;
                            const uint8_t *zn = zpp ? zpp + n * kb : NULL;
                            llm_mnb8_lanes_ref(q, sa + m * kb, b + n * kb * 32, sb + n * kb, kb, l);
                            float blks = llm_mnb8_blksum(ab + m * kb, sb + n * kb, zn, kb);
                            float val = n < N - N % 4 ? llm_fold8(l) : llm_hsum8(l);
                            if (biason)
                                val += bias[n];
                            want[m * N + n] = val + blks;
                            if (m == 0 && n == 0) { /* the statement: lanes + block sums */
                                double dot = 0, mag = 0, got = blks;
                                for (int64_t blk = 0; blk < kb; blk++) {
                                    int zv = zn ? zn[blk] : 128;
                                    int32_t d = 0, e = 0;
                                    for (int k = 0; k < 32; k++) {
                                        d += q[32 * blk + k] * (b[32 * blk + k] - zv);
                                        e += abs(q[32 * blk + k]) * (b[32 * blk + k] + zv);
                                    }
                                    dot += (double)sa[blk] * sb[blk] * d;
                                    mag += (double)sa[blk] * sb[blk] * e;
                                }
                                for (int j = 0; j < 8; j++)
                                    got += l[j];
                                /* float sums of terms as large as mag */
                                if (fabs(got - dot) > 1e-6 * mag + 1e-6) {
                                    fprintf(stderr, "FAIL mnb8 dot K %lld zp %d: %g vs %g\n",
                                            (long long)K, zpon, got, dot);
                                    g_fail = 1;
                                }
                            }
                        }
                    llm_mnb8_args g = {M, N, kb, qa, sa, ab, b, sb, zpp, kb, biason ? bias : NULL, y, N};
                    int64_t split = N / 3;
                    llm_mnb8_cols(&g, 0, split);
                    llm_mnb8_cols(&g, split, N);
                    g.y = yr;
                    llm_mnb8_cols_ref(&g, 0, N);
                    if (memcmp(y, want, sizeof(float) * (size_t)(M * N)) ||
                        memcmp(yr, want, sizeof(float) * (size_t)(M * N))) {
                        for (int64_t i = 0; i < M * N; i++)
                            if (memcmp(&y[i], &want[i], 4) || memcmp(&yr[i], &want[i], 4)) {
                                fprintf(stderr,
                                        "FAIL mnb8 cols M %lld N %lld K %lld zp %d bias %d: "
                                        "[%lld] %.9g / ref %.9g, want %.9g\n",
                                        (long long)M, (long long)N, (long long)K, zpon, biason,
                                        (long long)i, (double)y[i], (double)yr[i], (double)want[i]);
                                break;
                            }
                        g_fail = 1;
                    }
                    cases++;
                    free(a), free(b), free(zp), free(sb), free(bias), free(y), free(yr), free(want);
                    free(qa), free(sa), free(ab);
                }
            }
    if (cases < 300) {
        fprintf(stderr, "FAIL mnb8 cols: only %d cases\n", cases);
        g_fail = 1;
    }
}

/* The float 4-bit kernels (src/ops/llm/mnb_f32.c) against their references:
 * llm_mnb4f_cols (rows of permuted A against 4-bit columns, zero points
 * packed, float or absent) and the [K, nb] panel dequantization, on odd
 * sizes: block counts, column counts not a multiple of the 4-column tiles,
 * M = 1, 2, 3, blocks of 16, 32, 64, K not a multiple of 32. */
/* Each of g's rows alone (llm_mnb4_fast1_cols, columns split at split)
 * against its row of y (the many-row result): the same bits. */
static void mnb4_rows_alone(const llm_mnb4_args *g, int64_t K, const char *rows, size_t rb, const float *y, float *y1,
                            int64_t split, const char *what) {
    for (int64_t m = 0; m < g->M; m++) {
        llm_mnb4_args g1 = *g;
        g1.M = 1, g1.rows = rows + (size_t)m * rb, g1.y = y1;
        llm_mnb4_fast1_cols(&g1, 0, split);
        llm_mnb4_fast1_cols(&g1, split, g->N);
        if (memcmp(y1, y + m * g->N, sizeof(float) * (size_t)g->N)) {
            fprintf(stderr, "FAIL mnb4 K %lld N %lld zp %d bias %d row %lld: %s\n", (long long)K,
                    (long long)g->N, g->zp != NULL, g->bias != NULL, (long long)m, what);
            g_fail = 1;
        }
    }
}

/* The AVX-512 VNNI kernels in snug's own order (llm_mnb4_fast1_cols one
 * row, llm_mnb4_fastm_cols many): against the float64 value of the same
 * int8 x int4 product (each block's integer dot exact, times sa_b sb_b,
 * summed in double), within float32 rounding of the sum's magnitude; each
 * row of the many-row kernel's result the same bits as the one-row
 * kernel's on that row alone (a prefill's last row, a batch of decode
 * steps), and both the same bits as the scalar form
 * (llm_mnb4_fast_ref_cols). Block counts around its groups of four and
 * and past the 64 blocks of a panel decoded at a time (2144 .. 8224),
 * with and without zero points and bias, columns in two ranges, in quads
 * and panels of sixteen with a short one, 3 rows (column quads decoded in
 * registers), 6, 13 and 70 (panels of sixteen columns decoded once for
 * tiles of four rows, 64 rows a pass past 64 blocks). B in panels of
 * sixteen columns (llm_mnb4_p16_pack, scales and zero points inside: the
 * originals handed to the kernels are poisoned) gives the same bits with
 * the many-row kernel, three rows, each row alone and the scalar form, its
 * columns split at a panel and off one. */
static void test_mnb4_fast1(void) {
    /* without VNNI the scalar form of both is what is checked */
    static const int64_t Ks[] = {32, 64, 96, 100, 160, 576, 2048, 2144, 3100, 6200, 8224};
    static const int64_t Ns[] = {1, 3, 4, 5, 9, 17, 40};
    int cases = 0;
    for (size_t ki = 0; ki < sizeof Ks / sizeof *Ks; ki++)
        for (size_t ni = 0; ni < sizeof Ns / sizeof *Ns; ni++)
            for (int variant = 0; variant < 4; variant++) {
                int64_t K = Ks[ki], N = Ns[ni], kb = (K + 31) / 32, zs = (kb + 1) / 2;
                int zpon = variant & 1, biason = variant >> 1;
                /* rows: a tile of the few-row form; 6 (a tile and a short one) and 13 rows, which
                 * decode B in registers tile by tile (up to Q4P_DIRECT_ROWS); 70, which share a
                 * decoded panel, past the 64 rows a pass of a panel deeper than 64 blocks takes
                 * (each M over a quarter of the cases) */
                int64_t M = (int64_t[]){3, 6, 13, 70}[(ki + ni + (size_t)variant) % 4];
                float *a = malloc(sizeof(float) * (size_t)(M * K)), *sb = malloc(sizeof(float) * (size_t)(N * kb));
                float *bias = malloc(sizeof(float) * (size_t)N), *y = malloc(sizeof(float) * (size_t)(M * N));
                float *y1 = malloc(sizeof(float) * (size_t)N);
                uint8_t *b = malloc((size_t)(N * kb * 16)), *zp = malloc((size_t)(N * zs));
                size_t rb = llm_mnb4_row_bytes(kb);
                char *row = aligned_alloc(64, (size_t)M * rb);
                fill(a, M * K);
                for (int64_t i = 0; i < N * kb; i++)
                    sb[i] = 0.01f + 0.02f * fabsf(frand());
                for (int64_t i = 0; i < N * kb * 16; i++)
                    b[i] = (uint8_t)(frand() * 128 + 128);
                for (int64_t i = 0; i < N * zs; i++)
                    zp[i] = (uint8_t)(frand() * 128 + 128);
                fill(bias, N);
                char *ref = aligned_alloc(64, rb);
                memset(row, 0, (size_t)M * rb);
                for (int64_t m = 0; m < M; m++) {
                    llm_mnb4_prep_row(a + m * K, K, LLM_MNB4_ROWS_Q4, row + (size_t)m * rb);
                    memset(ref, 0, rb);
                    llm_mnb4_prep_row_ref(a + m * K, K, LLM_MNB4_ROWS_Q4, ref);
                    if (memcmp(ref, row + (size_t)m * rb, rb)) {
                        fprintf(stderr, "FAIL mnb4 ROWS_Q4 prep K %lld row %lld differs from ref\n", (long long)K,
                                (long long)m);
                        g_fail = 1;
                    }
                }
                free(ref);
                llm_mnb4_args g = {.M = M, .N = N, .kb = kb, .rows = row, .b = b, .sb = sb, .zp = zpon ? zp : NULL,
                                   .zp_stride = zs, .bias = biason ? bias : NULL, .y = y, .ldy = N};
                int64_t split = N / 2;
                llm_mnb4_fastm_cols(&g, 0, split);
                llm_mnb4_fastm_cols(&g, split, N);
                float *yr = malloc(sizeof(float) * (size_t)(M * N));
                llm_mnb4_args gr = g;
                gr.y = yr;
                llm_mnb4_fast_ref_cols(&gr, 0, N);
                if (memcmp(yr, y, sizeof(float) * (size_t)(M * N))) {
                    fprintf(stderr, "FAIL mnb4 K %lld N %lld zp %d bias %d M %lld: fastm and the scalar form differ\n",
                            (long long)K, (long long)N, zpon, biason, (long long)M);
                    g_fail = 1;
                }
                free(yr);
                /* B in panels of sixteen columns: the same bits for every row count (split at a
                 * panel, and one that is not: its head columns by the scalar form) */
                {
                    uint8_t *bp = malloc(llm_mnb4_p16_bytes(N, kb, zpon));
                    float *yp = malloc(sizeof(float) * (size_t)(M * N));
                    llm_mnb4_p16_pack(b, sb, zpon ? zp : NULL, zs, N, kb, bp, NULL, NULL);
                    llm_mnb4_args gp = g;
                    /* the panels hold the scales and zero points: nothing else is read */
                    float *sb_gone = malloc(sizeof(float) * (size_t)(N * kb));
                    uint8_t *zp_gone = malloc((size_t)(N * zs));
                    for (int64_t i = 0; i < N * kb; i++)
                        sb_gone[i] = NAN;
                    memset(zp_gone, 0x77, (size_t)(N * zs));
                    gp.b = bp, gp.tiled = LLM_MNB4_P16, gp.y = yp, gp.sb = sb_gone, gp.zp = zpon ? zp_gone : NULL;
                    int64_t ps = N > 16 ? 16 : split;
                    for (int pass = 0; pass < 3; pass++) {
                        memset(yp, 0, sizeof(float) * (size_t)(M * N));
                        int64_t cut = pass == 2 ? split : ps;
                        if (pass == 1) { /* a few rows: each block decoded in registers */
                            llm_mnb4_args g3 = gp;
                            g3.M = sn_imin(M, 3);
                            llm_mnb4_fastm_cols(&g3, 0, cut);
                            llm_mnb4_fastm_cols(&g3, cut, N);
                            if (memcmp(yp, y, sizeof(float) * (size_t)(g3.M * N))) {
                                fprintf(stderr, "FAIL mnb4 P16 K %lld N %lld zp %d bias %d: %lld rows differ\n",
                                        (long long)K, (long long)N, zpon, biason, (long long)g3.M);
                                g_fail = 1;
                            }
                            continue;
                        }
                        llm_mnb4_fastm_cols(&gp, 0, cut);
                        llm_mnb4_fastm_cols(&gp, cut, N);
                        if (memcmp(yp, y, sizeof(float) * (size_t)(M * N))) {
                            fprintf(stderr, "FAIL mnb4 P16 K %lld N %lld zp %d bias %d M %lld split %lld: fastm "
                                    "differs from B as it is\n", (long long)K, (long long)N, zpon, biason, (long long)M,
                                    (long long)cut);
                            g_fail = 1;
                        }
                    }
                    mnb4_rows_alone(&gp, K, row, rb, y, y1, ps, "P16: fast1 differs");
                    llm_mnb4_args gr2 = gp; /* the scalar form reads the panels too */
                    gr2.y = yp;
                    llm_mnb4_fast_ref_cols(&gr2, 0, N);
                    if (memcmp(yp, y, sizeof(float) * (size_t)(M * N))) {
                        fprintf(stderr, "FAIL mnb4 P16 K %lld N %lld: the scalar form differs\n", (long long)K,
                                (long long)N);
                        g_fail = 1;
                    }
                    free(bp), free(yp), free(sb_gone), free(zp_gone);
                }
                mnb4_rows_alone(&g, K, row, rb, y, y1, split, "fast1 and fastm differ");
                for (int64_t mn = 0; mn < M * N; mn++) {
                    int64_t m = mn / N, n = mn % N;
                    double want = biason ? bias[n] : 0, mag = fabs(want);
                    for (int64_t blk = 0; blk < kb; blk++) {
                        int64_t len = sn_imin(32, K - 32 * blk);
                        int8_t q[32] = {0};
                        float sa = llm_q8_quantize(a + m * K + 32 * blk, len, q);
                        int z = zpon ? (zp[n * zs + blk / 2] >> (4 * (blk & 1))) & 15 : 8;
                        int64_t dot = 0;
                        for (int k = 0; k < 32; k++) {
                            int code = (b[(n * kb + blk) * 16 + k / 2] >> (4 * (k & 1))) & 15;
                            dot += (int64_t)q[k] * (code - z);
                        }
                        double term = (double)sa * sb[n * kb + blk] * (double)dot;
                        want += term;
                        mag += fabs(term);
                    }
                    if (fabs(y[mn] - want) > 2e-6 * (double)kb * mag + 1e-6) {
                        fprintf(stderr, "FAIL mnb4 fastm K %lld N %lld zp %d bias %d col %lld: %.9g, float64 %.9g\n",
                                (long long)K, (long long)N, zpon, biason, (long long)n,
                                (double)y[mn], want);
                        g_fail = 1;
                    }
                }
                cases++;
                free(a), free(sb), free(bias), free(y), free(y1), free(b), free(zp), free(row);
            }
    printf("mnb4 fast1/fastm (%s): %d cases against float64\n", llm_mnb4_fast1_available() ? "VNNI" : "scalar",
           cases);
}

static void test_mnb4f(void) {
    static const int64_t Ns[] = {1, 3, 4, 5, 7, 8, 9, 13};
    static const int64_t nbs[] = {1, 2, 3, 18, 70};
    static const int64_t bss[] = {16, 32, 64};
    for (size_t bi = 0; bi < sizeof bss / sizeof *bss; bi++)
        for (size_t ki = 0; ki < sizeof nbs / sizeof *nbs; ki++)
            for (size_t ni = 0; ni < sizeof Ns / sizeof *Ns; ni++)
                for (int64_t M = 1; M <= 3; M++) {
                    int64_t bs = bss[bi], nblk = nbs[ki], N = Ns[ni], K = nblk * bs;
                    int zk = (int)((bi + ki + ni + (size_t)M) % 3); /* 0 none, 1 packed, 2 float */
                    int64_t zs = (nblk + 1) / 2;
                    float *ap = malloc(sizeof(float) * (size_t)(M * K));
                    float *as = malloc(sizeof(float) * (size_t)(M * nblk));
                    uint8_t *b = malloc((size_t)(N * K / 2)), *zp8 = malloc((size_t)(N * zs));
                    float *sc = malloc(sizeof(float) * (size_t)(N * nblk));
                    float *zpf = malloc(sizeof(float) * (size_t)(N * nblk));
                    float *y = malloc(sizeof(float) * (size_t)(M * N));
                    float *r = malloc(sizeof(float) * (size_t)(M * N));
                    fill(ap, M * K);
                    for (int64_t m = 0; m < M; m++) /* the block sums of A, as the kernels' contract says */
                        for (int64_t blk = 0; blk < nblk; blk++) {
                            float t = 0;
                            for (int64_t k = 0; k < bs; k++)
                                t += ap[m * K + blk * bs + k];
                            as[m * nblk + blk] = t;
                        }
                    fill(sc, N * nblk);
                    for (int64_t i = 0; i < N * nblk; i++)
                        zpf[i] = 16.0f * fabsf(frand());
                    for (int64_t i = 0; i < N * K / 2; i++)
                        b[i] = (uint8_t)(g_rng >> 20), frand();
                    for (int64_t i = 0; i < N * zs; i++)
                        zp8[i] = (uint8_t)(g_rng >> 30), frand();
                    llm_mnb4f_args g = {M, nblk, bs, ap, K, as, nblk, b, K / 2, sc, nblk,
                                        zk == 1 ? zp8 : NULL, zs, zk == 2 ? zpf : NULL, y, N};
                    llm_mnb4f_cols(&g, 0, N);
                    g.y = r;
                    llm_mnb4f_cols_ref(&g, 0, N);
                    /* the sum has K terms of |a| <= 1 times codes <= 15, scales <= 1 */
                    expect_vec("mnb4f cols", y, r, M * N, 1e-4f, 2e-5f * (float)K);
                    free(ap), free(as), free(b), free(zp8), free(sc), free(zpf), free(y), free(r);
                }
    /* panels: K not a multiple of 32 (last block partial), odd column counts */
    static const int64_t Ks[] = {16, 32, 48, 100, 576, 1000};
    for (size_t bi = 0; bi < sizeof bss / sizeof *bss; bi++)
        for (size_t ki = 0; ki < sizeof Ks / sizeof *Ks; ki++)
            for (size_t ni = 0; ni < sizeof Ns / sizeof *Ns; ni++) {
                int64_t bs = bss[bi], K = Ks[ki], N = Ns[ni], nblk = (K + bs - 1) / bs;
                int zk = (int)((bi + ki + ni) % 3);
                int64_t zs = (nblk + 1) / 2, ldp = N + 3;
                uint8_t *b = malloc((size_t)(N * nblk * bs / 2)), *zp8 = malloc((size_t)(N * zs));
                float *sc = malloc(sizeof(float) * (size_t)(N * nblk));
                float *zpf = malloc(sizeof(float) * (size_t)(N * nblk));
                float *p = malloc(sizeof(float) * (size_t)(K * ldp));
                float *q = malloc(sizeof(float) * (size_t)(K * ldp));
                fill(sc, N * nblk);
                for (int64_t i = 0; i < N * nblk; i++)
                    zpf[i] = 16.0f * fabsf(frand());
                for (int64_t i = 0; i < N * nblk * bs / 2; i++)
                    b[i] = (uint8_t)(g_rng >> 20), frand();
                for (int64_t i = 0; i < N * zs; i++)
                    zp8[i] = (uint8_t)(g_rng >> 30), frand();
                for (int64_t i = 0; i < K * ldp; i++)
                    p[i] = q[i] = -7.0f; /* the padding columns stay untouched */
                const uint8_t *z8 = zk == 1 ? zp8 : NULL;
                const float *zf = zk == 2 ? zpf : NULL;
                /* all rows, then the rows from a multiple of 32 on (a K slice) */
                int64_t k0s[2] = {0, K / 64 * 32};
                for (int r = 0; r < 2; r++) {
                    int64_t k0 = k0s[r], kn = K - k0;
                    llm_q4_dequant_panel(b, nblk * bs / 2, sc, nblk, z8, zs, zf, N, k0, kn, bs, p, ldp);
                    llm_q4_dequant_panel_ref(b, nblk * bs / 2, sc, nblk, z8, zs, zf, N, k0, kn, bs, q, ldp);
                    if (memcmp(p, q, sizeof(float) * (size_t)(K * ldp))) {
                        fprintf(stderr, "FAIL q4 dequant panel K %lld (from %lld) N %lld bs %lld zp %d\n",
                                (long long)K, (long long)k0, (long long)N, (long long)bs, zk);
                        g_fail = 1;
                    }
                }
                free(b), free(zp8), free(sc), free(zpf), free(p), free(q);
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
    /* eight (or fewer) rows at once: the same bits as one row at a time */
    enum { RW = 203 };
    static float xs[8][RW], ys[8][RW], want[8][RW];
    for (int q = 0; q < 8; q++) {
        fill(xs[q], RW);
        for (int i = 0; i < RW; i++)
            xs[q][i] *= (float)(q + 1); /* rows of different scales */
    }
    for (int64_t n = 1; n <= RW; n += 29)
        for (int rows = 1; rows <= 8; rows += 7)
            for (int gon = 0; gon < 2; gon++) {
                const float *xp[8];
                float *yp[8], inv[8], winv[8];
                for (int q = 0; q < rows; q++) {
                    xp[q] = xs[q];
                    yp[q] = ys[q];
                    winv[q] = llm_skip_rms_row_ort(xs[q], gon ? g : NULL, 1e-5f, n, want[q]);
                }
                llm_skip_rms_rows_ort(xp, gon ? g : NULL, 1e-5f, n, yp, inv, rows);
                for (int q = 0; q < rows; q++)
                    if (memcmp(ys[q], want[q], sizeof(float) * (size_t)n) || memcmp(&inv[q], &winv[q], 4)) {
                        fprintf(stderr, "FAIL skip rms rows n %lld rows %d gamma %d: row %d differs\n",
                                (long long)n, rows, gon, q);
                        g_fail = 1;
                        break;
                    }
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
    test_mnb4_cols();
    test_mnb4_fast1();
    test_mnb4f();
    test_mnb8();
    test_mlas_functions();
    if (g_fail)
        return 1;
    printf("test_llm_kernels: ok\n");
    return 0;
}
