/* The sampler (src/genai/sampler.c): greedy is the argmax (the first on a
 * tie), a seed repeats its ids, sampling follows the softmax of the tempered
 * logits, and top-k, top-p, min-p and the repetition penalty cut or move
 * what they should; bad parameters are errors naming them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genai/sampler.h"

static int fails;
#define CHECK(c)                                                               \
    do {                                                                       \
        if (!(c)) {                                                            \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
            fails++;                                                           \
        }                                                                      \
    } while (0)

static sn_sampler *make(int64_t vocab, sn_sampler_params p) {
    sn_sampler *s = NULL;
    sn_err err = {0};
    if (sn_sampler_new(vocab, &p, &s, &err) != SNUG_OK) {
        fprintf(stderr, "sampler: %s\n", err.msg);
        fails++;
    }
    return s;
}

/* Frequencies of n draws from logits [V]. */
static void draw(sn_sampler *s, const float *logits, int V, int n, double *freq) {
    memset(freq, 0, sizeof *freq * (size_t)V);
    for (int i = 0; i < n; i++) {
        int32_t id = sn_sampler_sample(s, logits);
        if (id >= 0 && id < V)
            freq[id] += 1.0 / n;
        else
            fails++;
    }
}

int main(void) {
    const sn_sampler_params plain = {1.0f, 0, 1.0f, 0.0f, 1.0f, 64, 42};
    /* greedy: the argmax, the first of equal ones */
    {
        sn_sampler_params p = plain;
        p.temperature = 0;
        sn_sampler *s = make(5, p);
        float lg[5] = {0.1f, 2.0f, -1.0f, 2.0f, 1.5f};
        CHECK(s && sn_sampler_sample(s, lg) == 1);
        float neg[5] = {-3, -2, -9, -2.5f, -2};
        CHECK(s && sn_sampler_sample(s, neg) == 1);
        sn_sampler_free(s);
        /* a vocabulary of lanes and a tail: against the plain scan, ties, NaN and -inf included */
        enum { V = 16 * 37 + 5 };
        s = make(V, p);
        float big[V];
        uint64_t x = 88172645463325252ull;
        for (int round = 0; s && round < 200; round++) {
            for (int i = 0; i < V; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                big[i] = (float)(x % 64) - 40.0f; /* few values: many ties */
            }
            if (round % 4 == 1)
                big[x % V] = NAN;
            if (round % 4 == 2)
                big[0] = NAN; /* the scan never leaves a NaN first value */
            if (round % 8 == 3)
                for (int i = 0; i < V; i++)
                    big[i] = -INFINITY;
            if (round % 5 == 4)
                big[V - 1 - (int)(x % 5)] = 99.0f; /* the largest in the tail */
            int32_t want = 0;
            for (int i = 1; i < V; i++)
                if (big[i] > big[want])
                    want = i;
            CHECK(sn_sampler_sample(s, big) == want);
        }
        sn_sampler_free(s);
        p.temperature = 0.7f; /* top-k 1 is greedy at any temperature */
        p.top_k = 1;
        s = make(5, p);
        for (int i = 0; s && i < 50; i++)
            CHECK(sn_sampler_sample(s, lg) == 1);
        sn_sampler_free(s);
    }
    /* the softmax of logits / T, and the same seed, the same ids */
    {
        enum { V = 4, N = 40000 };
        const float lg[V] = {logf(0.4f), logf(0.3f), logf(0.2f), logf(0.1f)};
        double f[V];
        sn_sampler *s = make(V, plain);
        draw(s, lg, V, N, f);
        const double want[V] = {0.4, 0.3, 0.2, 0.1};
        for (int k = 0; k < V; k++)
            CHECK(fabs(f[k] - want[k]) < 0.012);
        int32_t a[64], b[64];
        sn_sampler_reset(s);
        for (int i = 0; i < 64; i++)
            a[i] = sn_sampler_sample(s, lg);
        sn_sampler_reset(s);
        for (int i = 0; i < 64; i++)
            b[i] = sn_sampler_sample(s, lg);
        CHECK(!memcmp(a, b, sizeof a));
        sn_sampler_free(s);
        sn_sampler_params p = plain; /* T = 2: softmax of logits / 2, p_k ~ sqrt(q_k) */
        p.temperature = 2.0f;
        s = make(V, p);
        draw(s, lg, V, N, f);
        double z = 0;
        for (int k = 0; k < V; k++)
            z += sqrt(want[k]);
        for (int k = 0; k < V; k++)
            CHECK(fabs(f[k] - sqrt(want[k]) / z) < 0.012);
        sn_sampler_free(s);
        /* top-k 2: the two most likely, renormalized */
        p = plain;
        p.top_k = 2;
        s = make(V, p);
        draw(s, lg, V, N, f);
        CHECK(fabs(f[0] - 4.0 / 7) < 0.012 && fabs(f[1] - 3.0 / 7) < 0.012 && f[2] == 0 && f[3] == 0);
        sn_sampler_free(s);
        /* top-p 0.65: the smallest prefix reaching it is {0, 1} */
        p = plain;
        p.top_p = 0.65f;
        s = make(V, p);
        draw(s, lg, V, N, f);
        CHECK(f[2] == 0 && f[3] == 0 && fabs(f[0] - 4.0 / 7) < 0.012);
        sn_sampler_free(s);
        /* min-p 0.45: at least 0.45 x the most likely's 0.4 = 0.18, so 0.3 and 0.2 stay, 0.1 goes */
        p = plain;
        p.min_p = 0.45f;
        s = make(V, p);
        draw(s, lg, V, N, f);
        CHECK(f[3] == 0 && f[2] > 0.15 && fabs(f[0] - 4.0 / 9) < 0.012);
        sn_sampler_free(s);
    }
    /* the repetition penalty: a positive logit divided, a negative one multiplied */
    {
        sn_sampler_params p = plain;
        p.temperature = 0;
        p.repeat_penalty = 2.0f;
        sn_sampler *s = make(3, p);
        float lg[3] = {3.0f, 2.0f, -1.0f};
        CHECK(s && sn_sampler_sample(s, lg) == 0);
        sn_sampler_accept(s, 0); /* 3 / 2 = 1.5 < 2 */
        CHECK(s && sn_sampler_sample(s, lg) == 1);
        sn_sampler_accept(s, 1); /* 2 / 2 = 1 < 1.5 */
        CHECK(s && sn_sampler_sample(s, lg) == 0);
        sn_sampler_reset(s); /* history gone */
        float all_neg[3] = {-1.0f, -1.5f, -4.0f};
        sn_sampler_accept(s, 0); /* -1 * 2 = -2 < -1.5 */
        CHECK(s && sn_sampler_sample(s, all_neg) == 1);
        sn_sampler_free(s);
    }
    /* bad parameters */
    {
        sn_err err = {0};
        sn_sampler *s = NULL;
        sn_sampler_params p = plain;
        p.top_p = 1.5f;
        CHECK(sn_sampler_new(10, &p, &s, &err) == SNUG_ERR_INVALID_ARG && !s && strstr(err.msg, "top-p"));
        p = plain;
        p.min_p = -0.1f;
        CHECK(sn_sampler_new(10, &p, &s, &err) == SNUG_ERR_INVALID_ARG && strstr(err.msg, "min-p"));
        p = plain;
        p.repeat_penalty = 0;
        CHECK(sn_sampler_new(10, &p, &s, &err) == SNUG_ERR_INVALID_ARG && strstr(err.msg, "repeat"));
        p = plain;
        p.temperature = NAN;
        CHECK(sn_sampler_new(10, &p, &s, &err) == SNUG_ERR_INVALID_ARG && strstr(err.msg, "temperature"));
        CHECK(sn_sampler_new(0, &plain, &s, &err) == SNUG_ERR_INVALID_ARG);
    }
    if (fails) {
        fprintf(stderr, "test_sampler: %d check(s) failed\n", fails);
        return 1;
    }
    printf("test_sampler: ok\n");
    return 0;
}
