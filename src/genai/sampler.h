/* The next token from a row of logits: greedy, or sampled with a seeded RNG
 * after the usual filters, in Hugging Face's (and onnxruntime-genai's) order:
 * repetition penalty, temperature, top-k, top-p, min-p. A sampler holds all
 * it needs from creation on (vocab-sized buffers, the recent ids), so a step
 * allocates nothing; the same seed and logits give the same ids. */
#ifndef SN_GENAI_SAMPLER_H
#define SN_GENAI_SAMPLER_H

#include "core/core.h"

typedef struct sn_sampler_params {
    float temperature;    /* <= 0: greedy (the argmax after the penalty), as llama.cpp's --temp 0 */
    int top_k;            /* keep the k most likely; <= 0: all */
    float top_p;          /* keep the smallest set whose probability reaches p; >= 1: all */
    float min_p;          /* drop tokens below min_p x the most likely's probability; <= 0: none */
    float repeat_penalty; /* > 1 penalizes ids among the last repeat_last_n (HF's rule: a positive
                           * logit divided by it, a negative one multiplied); 1: off */
    int repeat_last_n;    /* how many recent ids the penalty sees (<= 0: 64) */
    uint64_t seed;
} sn_sampler_params;

/* llama.cpp's defaults: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05, no penalty. */
sn_sampler_params sn_sampler_defaults(void);

typedef struct sn_sampler sn_sampler;

/* Checks the parameters (a negative temperature is greedy; top_p and min_p
 * must lie in [0, 1], repeat_penalty be > 0): an error names the bad one. */
int sn_sampler_new(int64_t vocab, const sn_sampler_params *p, sn_sampler **out, sn_err *err);
void sn_sampler_free(sn_sampler *s); /* accepts NULL */

/* The next id from logits [vocab] (not modified). */
int32_t sn_sampler_sample(sn_sampler *s, const float *logits);
/* Records id as generated or prompted (the repetition penalty's history). */
void sn_sampler_accept(sn_sampler *s, int32_t id);
/* Forgets the history and restarts the RNG from the seed. */
void sn_sampler_reset(sn_sampler *s);

#endif
