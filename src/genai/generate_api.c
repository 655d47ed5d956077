/* The public generator (include/snug.h, snug_generator_*) over sn_generator. */
#include <stdio.h>
#include <string.h>

#include "genai/generate.h"

struct snug_generator {
    sn_generator *g; /* owned */
    sn_err err;      /* the last failed call's message */
};

static void copy_err(char *dst, size_t cap, const char *msg) {
    if (dst && cap)
        snprintf(dst, cap, "%s", msg);
}

int snug_generator_create(const char *model_dir, const snug_generator_config *cfg, snug_generator **out,
                          char *err, size_t err_cap) {
    *out = NULL;
    sn_err e = {0};
    if (!model_dir) {
        copy_err(err, err_cap, "no model folder");
        return SNUG_ERR_INVALID_ARG;
    }
    snug_generator *h = sn_calloc(1, sizeof *h);
    if (!h) {
        copy_err(err, err_cap, "out of memory");
        return SNUG_ERR_OOM;
    }
    sn_gen_config c = {0};
    if (cfg)
        c = (sn_gen_config){cfg->ctx,         cfg->batch,           cfg->threads,
                            cfg->weights_load != 0, cfg->chat_template_path, cfg->mem_host,
                            cfg->prefetch_layers};
    int rc = sn_generator_open(model_dir, &c, &h->g, &e);
    if (rc != SNUG_OK) {
        copy_err(err, err_cap, e.msg);
        sn_free(h);
        return rc;
    }
    *out = h;
    return SNUG_OK;
}

void snug_generator_free(snug_generator *g) {
    if (!g)
        return;
    sn_generator_free(g->g);
    sn_free(g);
}

const char *snug_generator_error(const snug_generator *g) { return g ? g->err.msg : ""; }

int64_t snug_generator_answer_ids(const snug_generator *g, const int32_t **ids) {
    return sn_generator_answer_ids(g->g, ids);
}

void snug_generator_stream_stats(const snug_generator *g, snug_stream_stats *out) {
    snug_session_stream_stats(sn_generator_session(g->g), out);
}

int snug_generator_has_chat_template(const snug_generator *g) {
    return g && sn_generator_info(g->g)->has_template;
}

const char *snug_generator_chat_template_error(const snug_generator *g) {
    return g ? sn_generator_info(g->g)->template_error : NULL;
}

void snug_sampling_defaults(snug_sampling *s) {
    sn_sampler_params d = sn_sampler_defaults();
    *s = (snug_sampling){d.temperature, d.top_k, d.top_p, d.min_p, d.repeat_penalty, d.seed, 0, NULL, 0};
}

static int run(snug_generator *h, int32_t *ids, size_t n, const snug_sampling *s, snug_text_fn fn, void *user,
               snug_generation *out) {
    snug_sampling d;
    if (!s) {
        snug_sampling_defaults(&d);
        s = &d;
    }
    sn_gen_params p = {{s->temperature, s->top_k, s->top_p, s->min_p, s->repeat_penalty, 64, s->seed},
                       s->max_tokens, s->stop, s->n_stop};
    sn_gen_result r;
    int rc = sn_generator_run(h->g, ids, n, &p, fn, user, &r, &h->err);
    sn_free(ids);
    if (rc == SNUG_OK && out)
        *out = (snug_generation){(int)r.stop, r.prompt_tokens, r.prefilled, r.generated, r.prefill_s, r.decode_s,
                                 r.ttft_s};
    return rc;
}

int snug_generator_chat(snug_generator *g, const snug_message *msgs, int n, const snug_sampling *s,
                        snug_text_fn fn, void *user, snug_generation *out) {
    if (!g || (!msgs && n) || n < 0)
        return g ? sn_errf(&g->err, SNUG_ERR_INVALID_ARG, "snug_generator_chat: no messages") : SNUG_ERR_INVALID_ARG;
    sn_chat_msg *m = sn_calloc((size_t)n + 1, sizeof *m);
    if (!m)
        return sn_errf(&g->err, SNUG_ERR_OOM, "out of memory");
    for (int i = 0; i < n; i++)
        m[i] = (sn_chat_msg){msgs[i].role ? msgs[i].role : "", msgs[i].content ? msgs[i].content : ""};
    int32_t *ids = NULL;
    size_t k = 0;
    int rc = sn_generator_chat_ids(g->g, m, n, &ids, &k, &g->err);
    sn_free(m);
    return rc != SNUG_OK ? rc : run(g, ids, k, s, fn, user, out);
}

int snug_generator_complete(snug_generator *g, const char *text, const snug_sampling *s, snug_text_fn fn,
                            void *user, snug_generation *out) {
    if (!g || !text)
        return g ? sn_errf(&g->err, SNUG_ERR_INVALID_ARG, "snug_generator_complete: no text") : SNUG_ERR_INVALID_ARG;
    int32_t *ids = NULL;
    size_t k = 0;
    int rc = sn_generator_text_ids(g->g, text, &ids, &k, &g->err);
    return rc != SNUG_OK ? rc : run(g, ids, k, s, fn, user, out);
}

void snug_generator_reset(snug_generator *g) {
    if (g)
        sn_generator_reset(g->g);
}
