#include "genai/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct cand {
    float v; /* logit, then probability */
    int32_t id;
} cand;

struct sn_sampler {
    sn_sampler_params p;
    int64_t vocab;
    uint64_t rng;  /* xorshift64* state, from the seed */
    float *val;    /* owned [vocab]: the penalized logits */
    cand *c;       /* owned [vocab]: the candidates */
    int32_t *hist; /* owned [repeat_last_n]: a ring of the last ids */
    int n_hist, pos_hist;
};

sn_sampler_params sn_sampler_defaults(void) {
    return (sn_sampler_params){0.8f, 40, 0.95f, 0.05f, 1.0f, 64, 0};
}

static uint64_t seed_state(uint64_t seed) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ull; /* splitmix64: any seed, 0 included, gives a good state */
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return z ? z : 1;
}

/* A uniform double in [0, 1). */
static double rng_next(sn_sampler *s) {
    s->rng ^= s->rng >> 12;
    s->rng ^= s->rng << 25;
    s->rng ^= s->rng >> 27;
    return (double)((s->rng * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0);
}

int sn_sampler_new(int64_t vocab, const sn_sampler_params *p, sn_sampler **out, sn_err *err) {
    *out = NULL;
    if (vocab < 1 || vocab > INT32_MAX)
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "sampler: vocabulary of %lld tokens", (long long)vocab);
    if (isnan(p->temperature))
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "sampler: temperature is not a number");
    if (!(p->top_p >= 0 && p->top_p <= 1))
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "sampler: top-p %g is not within [0, 1]", (double)p->top_p);
    if (!(p->min_p >= 0 && p->min_p <= 1))
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "sampler: min-p %g is not within [0, 1]", (double)p->min_p);
    if (!(p->repeat_penalty > 0) || !isfinite(p->repeat_penalty))
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "sampler: repeat penalty %g must be above 0",
                       (double)p->repeat_penalty);
    sn_sampler *s = sn_calloc(1, sizeof *s);
    if (!s)
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    s->p = *p;
    if (s->p.repeat_last_n <= 0)
        s->p.repeat_last_n = 64;
    s->vocab = vocab;
    s->val = sn_malloc(sizeof *s->val * (size_t)vocab);
    s->c = sn_malloc(sizeof *s->c * (size_t)vocab);
    s->hist = sn_malloc(sizeof *s->hist * (size_t)s->p.repeat_last_n);
    if (!s->val || !s->c || !s->hist) {
        sn_sampler_free(s);
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    }
    sn_sampler_reset(s);
    *out = s;
    return SNUG_OK;
}

void sn_sampler_free(sn_sampler *s) {
    if (!s)
        return;
    sn_free(s->val);
    sn_free(s->c);
    sn_free(s->hist);
    sn_free(s);
}

void sn_sampler_reset(sn_sampler *s) {
    s->rng = seed_state(s->p.seed);
    s->n_hist = s->pos_hist = 0;
}

void sn_sampler_accept(sn_sampler *s, int32_t id) {
    s->hist[s->pos_hist] = id;
    s->pos_hist = (s->pos_hist + 1) % s->p.repeat_last_n;
    if (s->n_hist < s->p.repeat_last_n)
        s->n_hist++;
}

/* a before b: the larger value, on a tie the lower id (as an argmax picks) */
static bool before(const cand *a, const cand *b) { return a->v > b->v || (a->v == b->v && a->id < b->id); }

static int cmp_cand(const void *x, const void *y) {
    const cand *a = x, *b = y;
    return before(a, b) ? -1 : before(b, a) ? 1 : 0;
}

/* Sifts c[i] down the heap [0, n) whose top is the candidate every other is before. */
static void heap_down(cand *c, int64_t n, int64_t i) {
    for (;;) {
        int64_t l = 2 * i + 1, m = i;
        if (l < n && before(&c[m], &c[l]))
            m = l;
        if (l + 1 < n && before(&c[m], &c[l + 1]))
            m = l + 1;
        if (m == i)
            return;
        cand t = c[i];
        c[i] = c[m], c[m] = t;
        i = m;
    }
}

/* The first of the largest (a NaN never is; a NaN first value: 0), as the scan
 * `if (v[i] > v[best]) best = i` gives it: the largest per lane, 16 lanes
 * (the compiler's max instructions: a NaN in v loses, as in that scan), then
 * the first index holding it. Greedy decoding over a 49152-token vocabulary
 * at 16 sequences a step was 0.8 ms of scalar compares a step. */
#define ARGMAX_LANES 16
static int32_t argmax_first(const float *v, int64_t n) {
    if (n < 1 || isnan(v[0]))
        return 0; /* nothing is above a NaN first value in the scan */
    float m[ARGMAX_LANES];
    for (int j = 0; j < ARGMAX_LANES; j++)
        m[j] = -INFINITY;
    int64_t i = 0;
    for (; i + ARGMAX_LANES <= n; i += ARGMAX_LANES)
        for (int j = 0; j < ARGMAX_LANES; j++)
            m[j] = v[i + j] > m[j] ? v[i + j] : m[j];
    float top = -INFINITY;
    for (int j = 0; j < ARGMAX_LANES; j++)
        top = m[j] > top ? m[j] : top;
    for (; i < n; i++)
        top = v[i] > top ? v[i] : top;
    for (int64_t k = 0; k < n; k++)
        if (v[k] == top)
            return (int32_t)k;
    return 0; /* no value above -inf other than NaN: the scan keeps 0 */
}

int32_t sn_sampler_sample(sn_sampler *s, const float *logits) {
    const sn_sampler_params *p = &s->p;
    const int64_t V = s->vocab;
    /* the logits as they are, or a penalized copy (the copy only when there is a penalty:
     * a greedy step over a 49152-token vocabulary is one pass over the row) */
    const float *val = logits;
    if (p->repeat_penalty != 1.0f) {
        float *pv = s->val;
        memcpy(pv, logits, sizeof *pv * (size_t)V);
        for (int k = 0; k < s->n_hist; k++) {
            int32_t id = s->hist[k];
            bool seen = false; /* each id once, however often it repeats */
            for (int j = 0; j < k && !seen; j++)
                seen = s->hist[j] == id;
            if (id >= 0 && id < V && !seen)
                pv[id] = pv[id] > 0 ? pv[id] / p->repeat_penalty : pv[id] * p->repeat_penalty;
        }
        val = pv;
    }
    if (!(p->temperature > 0))
        return argmax_first(val, V);
    cand *c = s->c;
    int64_t n;
    if (p->top_k > 0 && p->top_k < V) {
        /* the k first in order: a heap of k whose top is the last of them, one pass */
        n = p->top_k;
        for (int64_t i = 0; i < n; i++)
            c[i] = (cand){val[i] / p->temperature, (int32_t)i};
        for (int64_t i = n / 2; i-- > 0;) /* heapify: the top is the one all others are before */
            heap_down(c, n, i);
        for (int64_t i = n; i < V; i++) {
            cand x = {val[i] / p->temperature, (int32_t)i};
            if (before(&x, &c[0])) {
                c[0] = x;
                heap_down(c, n, 0);
            }
        }
    } else {
        n = V;
        for (int64_t i = 0; i < V; i++)
            c[i] = (cand){val[i] / p->temperature, (int32_t)i};
    }
    qsort(c, (size_t)n, sizeof *c, cmp_cand);
    /* softmax over the candidates (c[0] is the largest) */
    double sum = 0;
    const double top = c[0].v;
    for (int64_t i = 0; i < n; i++) {
        double e = exp((double)c[i].v - top);
        c[i].v = (float)e;
        sum += e;
    }
    if (p->top_p < 1.0f) { /* the smallest prefix reaching top_p */
        double acc = 0;
        for (int64_t i = 0; i < n; i++) {
            acc += c[i].v / sum;
            if (acc >= p->top_p) {
                n = i + 1;
                break;
            }
        }
    }
    if (p->min_p > 0) { /* relative to the most likely, whose weight is 1 */
        int64_t keep = 1;
        while (keep < n && c[keep].v >= p->min_p)
            keep++;
        n = keep;
    }
    double total = 0;
    for (int64_t i = 0; i < n; i++)
        total += c[i].v;
    double r = rng_next(s) * total, acc = 0;
    for (int64_t i = 0; i < n; i++) {
        acc += c[i].v;
        if (r < acc)
            return c[i].id;
    }
    return c[n - 1].id;
}
