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
                            cfg->prefetch_layers, cfg->slots, cfg->device, cfg->config, cfg->n_config,
                            cfg->log, cfg->log_user};
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

void snug_generator_runs_get(const snug_generator *g, snug_generator_runs *out) {
    sn_gen_runs r = {0};
    if (g)
        sn_generator_runs(g->g, &r);
    *out = (snug_generator_runs){r.prefill_runs, r.prefill_rows, r.decode_runs, r.decode_rows, r.packed_runs,
                                 r.prefill_s,    r.decode_s,     r.packed_s};
}

const snug_session *snug_generator_session(const snug_generator *g) {
    return (const snug_session *)sn_generator_session(g->g);
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

static sn_gen_params params_of(const snug_sampling *s) {
    snug_sampling d;
    if (!s) {
        snug_sampling_defaults(&d);
        s = &d;
    }
    return (sn_gen_params){{s->temperature, s->top_k, s->top_p, s->min_p, s->repeat_penalty, 64, s->seed},
                           s->max_tokens, s->stop, s->n_stop};
}

static void generation_of(const sn_gen_result *r, snug_generation *out) {
    *out = (snug_generation){(int)r->stop, r->prompt_tokens, r->prefilled, r->generated, r->prefill_s, r->decode_s,
                             r->ttft_s, r->shared};
}

/* slot < 0: runs slot 0 to the end (out filled); else starts the answer there. */
static int run(snug_generator *h, int slot, int32_t *ids, size_t n, const snug_sampling *s, snug_text_fn fn,
               void *user, snug_generation *out) {
    sn_gen_params p = params_of(s);
    sn_gen_result r = {0};
    int rc = slot < 0 ? sn_generator_run(h->g, ids, n, &p, fn, user, &r, &h->err)
                      : sn_generator_start(h->g, slot, ids, n, &p, fn, user, &h->err);
    sn_free(ids);
    if (rc == SNUG_OK && out)
        generation_of(&r, out);
    return rc;
}

/* The ids of a conversation (text NULL) or of raw text, into *ids (owned). */
static int prompt_ids(snug_generator *g, const snug_message *msgs, int n, const char *text, int32_t **ids,
                      size_t *k) {
    if (text)
        return sn_generator_text_ids(g->g, text, ids, k, &g->err);
    if ((!msgs && n) || n < 0)
        return sn_errf(&g->err, SNUG_ERR_INVALID_ARG, "snug_generator_chat: no messages");
    sn_chat_msg *m = sn_calloc((size_t)n + 1, sizeof *m);
    if (!m)
        return sn_errf(&g->err, SNUG_ERR_OOM, "out of memory");
    for (int i = 0; i < n; i++)
        m[i] = (sn_chat_msg){msgs[i].role ? msgs[i].role : "", msgs[i].content ? msgs[i].content : ""};
    int rc = sn_generator_chat_ids(g->g, m, n, ids, k, &g->err);
    sn_free(m);
    return rc;
}

static int chat(snug_generator *g, int slot, const snug_message *msgs, int n, const snug_sampling *s,
                snug_text_fn fn, void *user, snug_generation *out) {
    if (!g)
        return SNUG_ERR_INVALID_ARG;
    int32_t *ids = NULL;
    size_t k = 0;
    int rc = prompt_ids(g, msgs, n, NULL, &ids, &k);
    return rc != SNUG_OK ? rc : run(g, slot, ids, k, s, fn, user, out);
}

static int complete(snug_generator *g, int slot, const char *text, const snug_sampling *s, snug_text_fn fn,
                    void *user, snug_generation *out) {
    if (!g || !text)
        return g ? sn_errf(&g->err, SNUG_ERR_INVALID_ARG, "snug_generator_complete: no text") : SNUG_ERR_INVALID_ARG;
    int32_t *ids = NULL;
    size_t k = 0;
    int rc = prompt_ids(g, NULL, 0, text, &ids, &k);
    return rc != SNUG_OK ? rc : run(g, slot, ids, k, s, fn, user, out);
}

int snug_generator_pick_slot(snug_generator *g, const int *slots, int n_slots, const snug_message *msgs, int n,
                             const char *text, int exact, int64_t *reuse) {
    if (reuse)
        *reuse = 0;
    if (!g || !slots || n_slots < 1)
        return g ? sn_errf(&g->err, SNUG_ERR_INVALID_ARG, "snug_generator_pick_slot: no slots") : SNUG_ERR_INVALID_ARG;
    int32_t *ids = NULL;
    size_t k = 0;
    int rc = prompt_ids(g, msgs, n, text, &ids, &k);
    if (rc != SNUG_OK)
        return rc;
    int slot = sn_generator_pick(g->g, ids, k, slots, n_slots, exact != 0, reuse);
    sn_free(ids);
    return slot >= 0 ? slot : sn_errf(&g->err, SNUG_ERR_INVALID_ARG, "snug_generator_pick_slot: no free slot given");
}

void snug_generator_set_share_prompt(snug_generator *g, int on) {
    if (g)
        sn_generator_set_share(g->g, on != 0);
}

int snug_generator_chat(snug_generator *g, const snug_message *msgs, int n, const snug_sampling *s,
                        snug_text_fn fn, void *user, snug_generation *out) {
    return chat(g, -1, msgs, n, s, fn, user, out);
}

int snug_generator_complete(snug_generator *g, const char *text, const snug_sampling *s, snug_text_fn fn,
                            void *user, snug_generation *out) {
    return complete(g, -1, text, s, fn, user, out);
}

int snug_generator_slots(const snug_generator *g) { return g ? sn_generator_slots(g->g) : 0; }

int snug_generator_start_chat(snug_generator *g, int slot, const snug_message *msgs, int n, const snug_sampling *s,
                              snug_text_fn fn, void *user) {
    if (g && slot < 0)
        return sn_errf(&g->err, SNUG_ERR_RANGE, "slot %d: not within 0..%d", slot, sn_generator_slots(g->g) - 1);
    return chat(g, slot, msgs, n, s, fn, user, NULL);
}

int snug_generator_start_complete(snug_generator *g, int slot, const char *text, const snug_sampling *s,
                                  snug_text_fn fn, void *user) {
    if (g && slot < 0)
        return sn_errf(&g->err, SNUG_ERR_RANGE, "slot %d: not within 0..%d", slot, sn_generator_slots(g->g) - 1);
    return complete(g, slot, text, s, fn, user, NULL);
}

int snug_generator_step(snug_generator *g, int *finished) {
    if (finished)
        *finished = 0;
    return g ? sn_generator_step(g->g, finished) : SNUG_ERR_INVALID_ARG;
}

int snug_generator_slot_done(const snug_generator *g, int slot) { return g && sn_generator_slot_done(g->g, slot); }

int snug_generator_finish(snug_generator *g, int slot, snug_generation *out) {
    if (!g)
        return SNUG_ERR_INVALID_ARG;
    sn_gen_result r = {0};
    int rc = sn_generator_finish(g->g, slot, &r, &g->err);
    if (out)
        generation_of(&r, out);
    return rc;
}

void snug_generator_slot_reset(snug_generator *g, int slot) {
    if (g)
        sn_generator_slot_reset(g->g, slot);
}

void snug_generator_slot_keep_exact(snug_generator *g, int slot) {
    if (g)
        sn_generator_slot_keep_exact(g->g, slot);
}

int64_t snug_generator_slot_answer_ids(const snug_generator *g, int slot, const int32_t **ids) {
    return sn_generator_slot_answer_ids(g->g, slot, ids);
}

void snug_generator_reset(snug_generator *g) {
    if (g)
        sn_generator_reset(g->g);
}
