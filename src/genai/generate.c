#include "genai/generate.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "exec/session.h"
#include "genai/kvloop.h"
#include "genai/tokenizer.h"

#define SN_GEN_MAX_EOS 8
#define SN_GEN_DEFAULT_CTX 4096
#define SN_GEN_DEFAULT_BATCH 512

/* One sequence: its slot of the KV cache, what is cached there, and the
 * answer under way (sampler, detokenizer, text held back for stop strings). */
typedef enum { SEQ_FREE = 0, SEQ_PREFILL, SEQ_DECODE, SEQ_DONE } seq_phase;

typedef struct gen_seq {
    seq_phase phase;
    int64_t *fed;           /* owned [ctx]: the ids in the slot's cache, in order */
    int64_t n_fed;
    int64_t n_exact;        /* the first n_exact of them came from prompt chunks of two tokens or more:
                             * the rows a fresh prefill computes, to the bit (seq_prefill) */
    int32_t *ans;           /* owned [ctx + 1]: the ids this answer sampled, an EOS included */
    int64_t n_ans;
    int32_t *prompt;        /* owned [n_prompt]: the prompt of the answer under way */
    int64_t n_prompt, at;   /* prompt tokens; the next one to prefill */
    int32_t next;           /* the id the next decode step feeds */
    sn_tokstream *ts;       /* owned */
    sn_sampler *smp;        /* owned while an answer is under way */
    char *hold;             /* owned [hold_cap]: answer text held back (a stop string may start there) */
    size_t hold_len, hold_cap;
    sn_gen_params p;        /* the caller's (stop strings borrowed until the answer is done) */
    sn_gen_text_fn cb;
    void *user;
    sn_gen_result res;
    double t0, t1;          /* start; first logits */
    int rc;                 /* the answer's status once done */
    sn_err err;
} gen_seq;

struct sn_generator {
    char *dir;              /* owned */
    char *model_path;       /* owned */
    sn_session *s;          /* owned */
    sn_kvloop *loop;        /* owned */
    sn_tokenizer *tok;      /* owned */
    sn_template *tpl;       /* owned, or NULL: the model has no chat template */
    sn_chat_config chat;    /* owned */
    int32_t eos[SN_GEN_MAX_EOS];
    int n_eos;
    int64_t ctx, batch;
    int n_slots;
    gen_seq *seq;           /* owned [n_slots] */
    int rr;                 /* the slot whose prompt the next step prefills first (round robin) */
    int *dslots;            /* owned [n_slots]: a decode step's slots */
    bool share;             /* a start copies its prompt's rows from other slots (sn_generator_set_share) */
    sn_gen_runs runs;       /* the model runs so far (sn_generator_runs) */
    int64_t *dids;          /* owned [n_slots]: and their ids */
    int32_t *drawn;         /* owned [n_slots]: the ids a decode step's rows sampled */
    sn_gen_info info;
    char tpl_err[sizeof(((sn_err *)0)->msg)]; /* why the model's template cannot be rendered, or "" */
};

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

const char *sn_gen_stop_name(sn_gen_stop s) {
    switch (s) {
    case SN_GEN_STOP_EOS: return "eos";
    case SN_GEN_STOP_LENGTH: return "length";
    case SN_GEN_STOP_STRING: return "stop string";
    case SN_GEN_STOP_CONTEXT: return "context full";
    case SN_GEN_STOP_CANCELLED: return "cancelled";
    }
    return "?";
}

static char *path_join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = sn_malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static bool file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* DIR/name parsed as JSON into *out (cJSON_Delete); *out NULL when the file is absent. */
static int read_json(const char *dir, const char *name, cJSON **out, sn_err *err) {
    *out = NULL;
    char *path = path_join(dir, name);
    if (!path)
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    if (!file_exists(path)) {
        sn_free(path);
        return SNUG_OK;
    }
    void *buf = NULL;
    size_t len = 0;
    int rc = sn_file_read(path, &buf, &len, err);
    if (rc == SNUG_OK) {
        *out = cJSON_ParseWithLength(buf, len);
        if (!*out)
            rc = sn_errf(err, SNUG_ERR_PARSE, "%s: not valid JSON (near byte %td)", path,
                         cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() - (const char *)buf : (ptrdiff_t)0);
    }
    sn_free(buf);
    sn_free(path);
    return rc;
}

static const cJSON *jget(const cJSON *o, const char *key) { return o ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL; }

/* An id or a list of ids (eos_token_id) into g->eos, after those there. */
static void add_eos(sn_generator *g, const cJSON *v) {
    if (cJSON_IsNumber(v)) {
        int32_t id = (int32_t)v->valuedouble;
        for (int k = 0; k < g->n_eos; k++)
            if (g->eos[k] == id)
                return;
        if (g->n_eos < SN_GEN_MAX_EOS && id >= 0)
            g->eos[g->n_eos++] = id;
    } else if (cJSON_IsArray(v)) {
        const cJSON *e;
        cJSON_ArrayForEach(e, v) add_eos(g, e);
    }
}

/* The model file, its eos ids and context from genai_config.json or config.json. */
static int read_model_config(sn_generator *g, sn_err *err) {
    cJSON *gc = NULL, *hc = NULL, *gen = NULL;
    int rc = read_json(g->dir, "genai_config.json", &gc, err);
    if (rc == SNUG_OK && !gc)
        rc = read_json(g->dir, "config.json", &hc, err);
    if (rc == SNUG_OK)
        rc = read_json(g->dir, "generation_config.json", &gen, err);
    if (rc != SNUG_OK)
        goto done;
    const char *file = "model.onnx";
    if (gc) {
        const cJSON *m = jget(gc, "model"), *fn = jget(jget(m, "decoder"), "filename");
        if (!m) {
            rc = sn_errf(err, SNUG_ERR_PARSE, "%s/genai_config.json: no \"model\" object", g->dir);
            goto done;
        }
        if (cJSON_IsString(fn))
            file = fn->valuestring;
        add_eos(g, jget(m, "eos_token_id"));
        const cJSON *cl = jget(m, "context_length");
        g->info.model_ctx = cJSON_IsNumber(cl) ? (int64_t)cl->valuedouble : 0;
        g->info.style = "genai";
    } else if (hc) {
        add_eos(g, jget(hc, "eos_token_id"));
        const cJSON *mp = jget(hc, "max_position_embeddings");
        g->info.model_ctx = cJSON_IsNumber(mp) ? (int64_t)mp->valuedouble : 0;
        g->info.style = "optimum";
    } else {
        rc = sn_errf(err, SNUG_ERR_IO, "%s: neither genai_config.json nor config.json: not a model folder snug "
                     "knows (onnxruntime-genai's or Optimum's)", g->dir);
        goto done;
    }
    add_eos(g, jget(gen, "eos_token_id"));
    if (strchr(file, '/') || !strcmp(file, "..")) {
        rc = sn_errf(err, SNUG_ERR_INVALID_ARG, "%s/genai_config.json: decoder filename '%s' leaves the folder", g->dir,
                     file);
        goto done;
    }
    if (!(g->model_path = path_join(g->dir, file))) {
        rc = sn_errf(err, SNUG_ERR_OOM, "out of memory");
        goto done;
    }
done:
    cJSON_Delete(gc);
    cJSON_Delete(hc);
    cJSON_Delete(gen);
    return rc;
}

static int load_template(sn_generator *g, const char *override, sn_err *err) {
    SN_TRY(sn_chat_config_load(g->dir, &g->chat, err));
    if (override) { /* --chat-template FILE */
        void *buf = NULL;
        size_t len = 0;
        SN_TRY(sn_file_read(override, &buf, &len, err));
        sn_free(g->chat.template);
        sn_free(g->chat.source);
        g->chat.template = buf;
        g->chat.template_len = len;
        g->chat.source = sn_malloc(strlen(override) + 1);
        if (!g->chat.source)
            return sn_errf(err, SNUG_ERR_OOM, "out of memory");
        memcpy(g->chat.source, override, strlen(override) + 1);
    }
    if (!g->chat.template)
        return SNUG_OK;
    /* A template snug cannot render does not make the model unusable: raw
     * text still works (--no-chat), and a chat says why it cannot. */
    sn_err te = {0};
    if (sn_template_parse(g->chat.template, g->chat.template_len, g->chat.source, &g->tpl, &te) != SNUG_OK) {
        if (te.code == SNUG_ERR_OOM)
            return sn_errf(err, SNUG_ERR_OOM, "%s", te.msg);
        snprintf(g->tpl_err, sizeof g->tpl_err, "%s", te.msg);
    }
    return SNUG_OK;
}

/* Config entries given as key, value pairs. */
static int set_pairs(snug_options *o, const char *const *kv, int n) {
    for (int k = 0; k < n; k++)
        if (snug_options_set(o, kv[2 * k], kv[2 * k + 1]) != SNUG_OK)
            return SNUG_ERR_OOM;
    return SNUG_OK;
}

int sn_generator_open(const char *dir, const sn_gen_config *cfg, sn_generator **out, sn_err *err) {
    *out = NULL;
    sn_gen_config c = cfg ? *cfg : (sn_gen_config){0};
    sn_generator *g = sn_calloc(1, sizeof *g);
    if (!g)
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    int rc = SNUG_OK;
    snug_options *opts = NULL;
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/')
        dl--;
    if (!(g->dir = sn_malloc(dl + 1))) {
        rc = sn_errf(err, SNUG_ERR_OOM, "out of memory");
        goto fail;
    }
    memcpy(g->dir, dir, dl);
    g->dir[dl] = 0;
    if ((rc = read_model_config(g, err)) != SNUG_OK)
        goto fail;
    char *tp = path_join(g->dir, "tokenizer.json");
    if (!tp) {
        rc = sn_errf(err, SNUG_ERR_OOM, "out of memory");
        goto fail;
    }
    rc = sn_tokenizer_load(tp, &g->tok, err);
    sn_free(tp);
    if (rc != SNUG_OK)
        goto fail;
    if ((rc = load_template(g, c.chat_template_path, err)) != SNUG_OK)
        goto fail;
    if (!g->n_eos && g->chat.eos_token) { /* no eos id in the config: the tokenizer's eos token */
        int32_t id = sn_tokenizer_token_id(g->tok, g->chat.eos_token);
        if (id >= 0)
            g->eos[g->n_eos++] = id;
    }
    g->ctx = c.ctx > 0 ? c.ctx : g->info.model_ctx > 0 && g->info.model_ctx < SN_GEN_DEFAULT_CTX ? g->info.model_ctx
                                                                                                 : SN_GEN_DEFAULT_CTX;
    if (g->info.model_ctx > 0 && g->ctx > g->info.model_ctx) {
        rc = sn_errf(err, SNUG_ERR_RANGE, "a context of %lld tokens is longer than the model's %lld",
                     (long long)g->ctx, (long long)g->info.model_ctx);
        goto fail;
    }
    g->n_slots = c.slots > 1 ? c.slots : 1;
    if (g->n_slots > SN_KVLOOP_MAX_SLOTS) {
        rc = sn_errf(err, SNUG_ERR_INVALID_ARG, "%d sequences: at most %d", g->n_slots, SN_KVLOOP_MAX_SLOTS);
        goto fail;
    }
    if (c.batch == 1) { /* every prompt token would be a decode row (attention rounds those otherwise) */
        rc = sn_errf(err, SNUG_ERR_INVALID_ARG,
                     "batch 1: prompt steps need at least 2 tokens (a one-token step is a decode row, which "
                     "attention rounds otherwise than a prompt row, so answers would depend on the batch)");
        goto fail;
    }
    /* several slots: the plan holds slots x batch tokens of activations */
    g->batch = c.batch > 0 ? c.batch
             : g->n_slots > 1 ? (SN_GEN_DEFAULT_BATCH / g->n_slots > 32 ? SN_GEN_DEFAULT_BATCH / g->n_slots : 32)
                              : SN_GEN_DEFAULT_BATCH;
    if (g->batch > g->ctx)
        g->batch = g->ctx;
    opts = snug_options_new();
    char num[32];
    snprintf(num, sizeof num, "%d", c.threads);
    if (!opts || (c.threads > 0 && snug_options_set(opts, "snug.threads", num) != SNUG_OK) ||
        snug_options_set(opts, "snug.last_logits", "1") != SNUG_OK || /* the generator reads no other row */
        (c.weights_load && snug_options_set(opts, "snug.weights", "load") != SNUG_OK)) {
        rc = sn_errf(err, SNUG_ERR_OOM, "out of memory");
        goto fail;
    }
    if (c.log)
        snug_options_set_logger(opts, c.log, c.log_user, SNUG_LOG_WARN);
    char mh[32], pl[16];
    snprintf(mh, sizeof mh, "%llu", (unsigned long long)c.mem_host);
    snprintf(pl, sizeof pl, "%d", c.prefetch_layers);
    if ((c.mem_host && snug_options_set(opts, "snug.mem.host", mh) != SNUG_OK) ||
        (c.device && snug_options_set(opts, "snug.device", c.device) != SNUG_OK) ||
        set_pairs(opts, c.config, c.n_config) != SNUG_OK ||
        (c.prefetch_layers && snug_options_set(opts, "snug.prefetch_layers", pl) != SNUG_OK)) {
        rc = sn_errf(err, SNUG_ERR_OOM, "out of memory");
        goto fail;
    }
    if ((rc = sn_session_open(g->model_path, opts, &g->s, err)) != SNUG_OK)
        goto fail;
    if ((rc = sn_kvloop_new_slots(g->s, g->ctx, g->batch, g->n_slots, &g->loop, err)) != SNUG_OK)
        goto fail;
    g->seq = sn_calloc((size_t)g->n_slots, sizeof *g->seq);
    g->dslots = sn_malloc(sizeof *g->dslots * (size_t)g->n_slots);
    g->dids = sn_malloc(sizeof *g->dids * (size_t)g->n_slots);
    g->drawn = sn_malloc(sizeof *g->drawn * (size_t)g->n_slots);
    if (!g->seq || !g->dslots || !g->dids || !g->drawn) {
        rc = sn_errf(err, SNUG_ERR_OOM, "out of memory");
        goto fail;
    }
    for (int k = 0; k < g->n_slots; k++) {
        gen_seq *q = &g->seq[k];
        if ((rc = sn_tokstream_new(g->tok, true, &q->ts, err)) != SNUG_OK)
            goto fail;
        q->fed = sn_malloc(sizeof *q->fed * (size_t)g->ctx);
        q->ans = sn_malloc(sizeof *q->ans * ((size_t)g->ctx + 1));
        q->hold_cap = 4096;
        q->hold = sn_malloc(q->hold_cap);
        if (!q->fed || !q->hold || !q->ans) {
            rc = sn_errf(err, SNUG_ERR_OOM, "out of memory");
            goto fail;
        }
    }
    g->info.model_path = g->model_path;
    g->info.ctx = g->ctx;
    g->info.slots = g->n_slots;
    g->info.batch = g->batch;
    g->info.vocab = sn_kvloop_get_info(g->loop)->vocab;
    if (g->info.vocab < 1)
        g->info.vocab = sn_tokenizer_vocab_size(g->tok);
    g->info.eos = g->eos;
    g->info.n_eos = g->n_eos;
    g->info.has_template = g->tpl != NULL;
    g->info.template_source = g->chat.source;
    g->info.template_error = g->tpl_err[0] ? g->tpl_err : NULL;
    snug_options_free(opts);
    *out = g;
    return SNUG_OK;
fail:
    snug_options_free(opts);
    sn_generator_free(g);
    return rc;
}

void sn_generator_free(sn_generator *g) {
    if (!g)
        return;
    for (int k = 0; g->seq && k < g->n_slots; k++) {
        gen_seq *q = &g->seq[k];
        sn_tokstream_free(q->ts);
        sn_sampler_free(q->smp);
        sn_free(q->fed);
        sn_free(q->ans);
        sn_free(q->hold);
        sn_free(q->prompt);
    }
    sn_free(g->seq);
    sn_free(g->dslots);
    sn_free(g->dids);
    sn_free(g->drawn);
    sn_kvloop_free(g->loop);
    sn_session_close(g->s);
    sn_template_free(g->tpl);
    sn_chat_config_free(&g->chat);
    sn_tokenizer_free(g->tok);
    sn_free(g->model_path);
    sn_free(g->dir);
    sn_free(g);
}

const sn_gen_info *sn_generator_info(const sn_generator *g) { return &g->info; }

int64_t sn_generator_answer_ids(const sn_generator *g, const int32_t **ids) {
    return sn_generator_slot_answer_ids(g, 0, ids);
}

int64_t sn_generator_slot_answer_ids(const sn_generator *g, int slot, const int32_t **ids) {
    if (slot < 0 || slot >= g->n_slots) {
        *ids = NULL;
        return 0;
    }
    *ids = g->seq[slot].ans;
    return g->seq[slot].n_ans;
}

const struct snug_session *sn_generator_session(const sn_generator *g) { return (const struct snug_session *)g->s; }

void sn_generator_reset(sn_generator *g) { sn_generator_slot_reset(g, 0); }

void sn_generator_slot_reset(sn_generator *g, int slot) {
    if (slot < 0 || slot >= g->n_slots || (g->seq[slot].phase != SEQ_FREE && g->seq[slot].phase != SEQ_DONE))
        return;
    g->seq[slot].n_fed = g->seq[slot].n_exact = 0;
    sn_kvloop_slot_reset(g->loop, slot);
}

/* Attention rounds a row of a prompt chunk and a decode row differently (as
 * ONNX Runtime does), so only the rows prompt chunks computed are what a
 * fresh prefill would compute; the rest (answers, one-token chunks) go. */
void sn_generator_slot_keep_exact(sn_generator *g, int slot) {
    if (slot < 0 || slot >= g->n_slots || (g->seq[slot].phase != SEQ_FREE && g->seq[slot].phase != SEQ_DONE))
        return;
    gen_seq *q = &g->seq[slot];
    sn_err e = {0};
    if (q->n_exact >= q->n_fed)
        return;
    if (sn_kvloop_slot_rewind(g->loop, slot, q->n_exact, &e) != SNUG_OK) {
        q->n_exact = 0;
        sn_kvloop_slot_reset(g->loop, slot);
    }
    q->n_fed = q->n_exact;
}

void sn_generator_set_share(sn_generator *g, bool on) { g->share = on; }

/* The ids a start on slot would keep of its cache for ids[0..n) (exact: of
 * its prompt rows only): the common prefix, short of the two last ids. */
static int64_t slot_reuse(const sn_generator *g, int slot, const int32_t *ids, size_t n, bool exact) {
    const gen_seq *q = &g->seq[slot];
    int64_t have = sn_imin(exact ? q->n_exact : q->n_fed, sn_kvloop_slot_pos(g->loop, slot));
    int64_t keep = (int64_t)n - (n >= 2 ? 2 : 1), c = 0;
    while (c < have && c < keep && q->fed[c] == ids[c])
        c++;
    return c;
}

int sn_generator_pick(const sn_generator *g, const int32_t *ids, size_t n, const int *slots, int n_slots, bool exact,
                      int64_t *reuse) {
    int best = -1;
    int64_t most = -1;
    for (int i = 0; i < n_slots; i++) {
        int k = slots[i];
        if (k < 0 || k >= g->n_slots || (g->seq[k].phase != SEQ_FREE && g->seq[k].phase != SEQ_DONE))
            continue;
        int64_t c = slot_reuse(g, k, ids, n, exact);
        if (c > most) {
            most = c;
            best = k;
        }
    }
    if (reuse)
        *reuse = most < 0 ? 0 : most;
    return best;
}


int sn_generator_chat_ids(sn_generator *g, const sn_chat_msg *msgs, int n, int32_t **ids, size_t *n_ids,
                          sn_err *err) {
    *ids = NULL;
    *n_ids = 0;
    if (!g->tpl && g->tpl_err[0])
        return sn_errf(err, SNUG_ERR_UNSUPPORTED, "%s: give another with --chat-template FILE, or send raw text with "
                       "--no-chat", g->tpl_err);
    if (!g->tpl)
        return sn_errf(err, SNUG_ERR_UNSUPPORTED, "%s has no chat template (tokenizer_config.json's chat_template or "
                       "chat_template.jinja): give one with --chat-template FILE, or send raw text with --no-chat",
                       g->dir);
    sn_template_vars v = {.bos_token = g->chat.bos_token, .eos_token = g->chat.eos_token, .add_generation_prompt = true};
    char *text = NULL;
    size_t len = 0;
    SN_TRY(sn_template_render(g->tpl, msgs, n, &v, &text, &len, err));
    int rc = sn_tokenizer_encode(g->tok, text, len, false, ids, n_ids, err);
    sn_free(text);
    return rc;
}

int sn_generator_text_ids(sn_generator *g, const char *text, int32_t **ids, size_t *n_ids, sn_err *err) {
    return sn_tokenizer_encode(g->tok, text, strlen(text), true, ids, n_ids, err);
}

static bool is_eos(const sn_generator *g, int32_t id) {
    for (int k = 0; k < g->n_eos; k++)
        if (g->eos[k] == id)
            return true;
    return false;
}

/* Appends text to the held-back answer text (grown as needed). */
static int hold_add(gen_seq *q, const char *t, size_t n, sn_err *err) {
    if (q->hold_len + n + 1 > q->hold_cap) {
        size_t cap = (q->hold_len + n + 1) * 2;
        char *h = sn_realloc(q->hold, cap);
        if (!h)
            return sn_errf(err, SNUG_ERR_OOM, "out of memory");
        q->hold = h;
        q->hold_cap = cap;
    }
    memcpy(q->hold + q->hold_len, t, n);
    q->hold_len += n;
    q->hold[q->hold_len] = 0;
    return SNUG_OK;
}

/* Emits what of the held text can no longer be part of a stop string (all
 * of it when final); *stopped when one appeared (the text before it is
 * emitted, it and what follows are not). Returns the callback's verdict. */
static int hold_emit(gen_seq *q, bool final, bool *stopped) {
    const sn_gen_params *p = &q->p;
    size_t keep = 0, cut = q->hold_len;
    *stopped = false;
    for (int k = 0; k < p->n_stop; k++) {
        const char *st = p->stop[k];
        size_t sl = st ? strlen(st) : 0;
        if (!sl)
            continue;
        const char *at = strstr(q->hold, st);
        if (at && (size_t)(at - q->hold) < cut) {
            cut = (size_t)(at - q->hold);
            *stopped = true;
        }
        /* the longest tail of hold that starts st */
        for (size_t t = sl - 1 < q->hold_len ? sl - 1 : q->hold_len; t > keep && !final; t--)
            if (!memcmp(q->hold + q->hold_len - t, st, t)) {
                keep = t;
                break;
            }
    }
    size_t emit = *stopped ? cut : q->hold_len - keep;
    int stop = 0;
    if (emit && q->cb)
        stop = q->cb(q->user, q->hold, emit);
    if (*stopped) {
        q->hold_len = 0;
    } else {
        memmove(q->hold, q->hold + emit, q->hold_len - emit);
        q->hold_len -= emit;
    }
    q->hold[q->hold_len] = 0;
    return stop;
}

int sn_generator_slots(const sn_generator *g) { return g->n_slots; }

bool sn_generator_slot_busy(const sn_generator *g, int slot) {
    return slot >= 0 && slot < g->n_slots && g->seq[slot].phase != SEQ_FREE;
}

bool sn_generator_slot_done(const sn_generator *g, int slot) {
    return slot >= 0 && slot < g->n_slots && g->seq[slot].phase == SEQ_DONE;
}

int sn_generator_start(sn_generator *g, int slot, const int32_t *ids, size_t n, const sn_gen_params *p,
                       sn_gen_text_fn cb, void *user, sn_err *err) {
    if (slot < 0 || slot >= g->n_slots)
        return sn_errf(err, SNUG_ERR_RANGE, "slot %d: not within 0..%d", slot, g->n_slots - 1);
    gen_seq *q = &g->seq[slot];
    if (q->phase != SEQ_FREE)
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "slot %d is busy with another answer", slot);
    if (n < 1)
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "the prompt has no tokens");
    if ((int64_t)n >= g->ctx)
        return sn_errf(err, SNUG_ERR_RANGE, "the prompt has %zu tokens, the context %lld: it leaves no room for an "
                       "answer (a larger --ctx, or a shorter prompt)", n, (long long)g->ctx);
    int32_t *pr = sn_malloc(sizeof *pr * n);
    if (!pr)
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    int rc = sn_sampler_new(g->info.vocab, &p->sampling, &q->smp, err);
    if (rc != SNUG_OK) {
        sn_free(pr);
        return rc;
    }
    memcpy(pr, ids, sizeof *pr * n);
    sn_free(q->prompt);
    q->prompt = pr;
    q->n_prompt = (int64_t)n;
    memset(&q->res, 0, sizeof q->res);
    q->res.prompt_tokens = (int64_t)n;
    q->p = *p;
    q->cb = cb;
    q->user = user;
    q->n_ans = 0;
    q->rc = SNUG_OK;
    q->err = (sn_err){0};
    q->t0 = now_s();
    /* What is cached already: the common prefix. Two tokens at least are
     * fed (one alone would be a decode row, rounded otherwise than the same
     * token in a fresh prompt), one for a one-token prompt. */
    int64_t held = sn_kvloop_slot_pos(g->loop, slot);
    if (q->n_fed > held) /* a decode step's stand-in took a full idle slot's last row */
        q->n_fed = held;
    if (q->n_exact > q->n_fed)
        q->n_exact = q->n_fed;
    int64_t c = slot_reuse(g, slot, ids, n, false);
    if (c < q->n_fed) {
        sn_err e = {0};
        if (sn_kvloop_slot_rewind(g->loop, slot, c, &e) != SNUG_OK) {
            sn_kvloop_slot_reset(g->loop, slot);
            c = 0;
        }
        q->n_fed = c;
    }
    if (q->n_exact > c)
        q->n_exact = c;
    /* More of the prompt among another slot's exact rows (sn_generator_set_share):
     * copied after this slot's own, what a fresh prefill computes here too as far
     * as those were exact. */
    int from = -1;
    int64_t best = c;
    for (int d = 0; d < g->n_slots && g->share; d++) {
        int64_t k = d == slot ? 0 : slot_reuse(g, d, ids, n, true);
        if (k > best)
            best = k, from = d;
    }
    sn_err ce = {0};
    if (from >= 0 && sn_kvloop_slot_copy(g->loop, slot, from, c, best, &ce) == SNUG_OK) {
        for (int64_t i = c; i < best; i++)
            q->fed[i] = ids[i];
        if (q->n_exact == c)
            q->n_exact = best;
        q->n_fed = best;
        q->res.shared = best - c;
        c = best;
    }
    q->at = c;
    q->res.prefilled = (int64_t)n - c;
    for (size_t k = 0; k < n; k++)
        sn_sampler_accept(q->smp, ids[k]);
    sn_tokstream_reset(q->ts);
    q->hold_len = 0;
    q->phase = SEQ_PREFILL;
    return SNUG_OK;
}

/* The answer ends: the text held back goes out (unless a stop string or
 * the caller ended it), the sampler goes. */
static void seq_end(gen_seq *q, int rc, const sn_err *err) {
    if (rc == SNUG_OK && q->res.stop != SN_GEN_STOP_STRING && q->res.stop != SN_GEN_STOP_CANCELLED) {
        const char *tail;
        size_t tl;
        bool stopped = false;
        if ((rc = sn_tokstream_flush(q->ts, &tail, &tl, &q->err)) == SNUG_OK &&
            (rc = hold_add(q, tail, tl, &q->err)) == SNUG_OK && hold_emit(q, true, &stopped))
            q->res.stop = SN_GEN_STOP_CANCELLED;
        if (stopped)
            q->res.stop = SN_GEN_STOP_STRING;
    } else if (rc != SNUG_OK && err) {
        q->err = *err;
    }
    q->rc = rc;
    sn_sampler_free(q->smp);
    q->smp = NULL;
    q->res.decode_s = q->t1 > 0 ? now_s() - q->t1 : 0;
    q->phase = SEQ_DONE;
}

/* Samples the next id from the slot's logits and takes it: the answer's
 * text, its stops; the sequence decodes on or is done. */
static void seq_take_id(sn_generator *g, int slot, int32_t id);

static void seq_take(sn_generator *g, int slot, const float *logits) {
    seq_take_id(g, slot, sn_sampler_sample(g->seq[slot].smp, logits));
}

/* The token slot k sampled (id) taken: kept, its text emitted, its answer
 * ended where a stop says so. */
static void seq_take_id(sn_generator *g, int slot, int32_t id) {
    gen_seq *q = &g->seq[slot];
    if (q->n_ans <= g->ctx)
        q->ans[q->n_ans++] = id;
    if (q->res.generated == 0)
        q->res.ttft_s = now_s() - q->t0;
    q->res.generated++;
    if (is_eos(g, id)) {
        q->res.stop = SN_GEN_STOP_EOS;
        seq_end(q, SNUG_OK, NULL);
        return;
    }
    sn_sampler_accept(q->smp, id);
    const char *piece = "";
    size_t plen = 0;
    /* An id the tokenizer lacks (a model's vocabulary padded past its
     * tokenizer's, as Phi-3's and Qwen2's are) has no text: nothing, as
     * `tokenizers` decodes it; it still goes into the cache. */
    bool known = id >= 0 && id < sn_tokenizer_vocab_size(g->tok);
    sn_err e = {0};
    int rc;
    if ((known && (rc = sn_tokstream_step(q->ts, id, &piece, &plen, &e)) != SNUG_OK) ||
        (rc = hold_add(q, piece, plen, &e)) != SNUG_OK) {
        seq_end(q, rc, &e);
        return;
    }
    bool stopped = false;
    if (hold_emit(q, false, &stopped))
        q->res.stop = SN_GEN_STOP_CANCELLED;
    else if (stopped)
        q->res.stop = SN_GEN_STOP_STRING;
    else if (q->p.max_tokens > 0 && q->res.generated >= q->p.max_tokens)
        q->res.stop = SN_GEN_STOP_LENGTH;
    else if (q->n_fed >= g->ctx)
        q->res.stop = SN_GEN_STOP_CONTEXT;
    else {
        q->next = id;
        q->phase = SEQ_DECODE;
        return;
    }
    seq_end(q, SNUG_OK, NULL);
}

/* The next chunk of slot k's prompt, of at most room tokens: its length,
 * its ids copied to where they are fed from. */
static int64_t seq_chunk(sn_generator *g, int k, int64_t room) {
    gen_seq *q = &g->seq[k];
    int64_t cap = room < g->batch ? room : g->batch;
    int64_t left = q->n_prompt - q->at, last = left < cap ? left : cap;
    if (left - last == 1 && last > 2) /* no one-token last chunk (a decode row's rounding) */
        last--;
    for (int64_t i = 0; i < last; i++)
        q->fed[q->at + i] = q->prompt[q->at + i];
    return last;
}

/* Slot k's chunk of `last` tokens has run (rc; logits: its last token's,
 * or every position's without snug.last_logits): the prompt goes on, or its
 * end samples the first token. */
static void seq_chunk_done(sn_generator *g, int k, int64_t last, int rc, const sn_err *re, const float *logits) {
    gen_seq *q = &g->seq[k];
    sn_err e = *re;
    if (rc != SNUG_OK) {
        q->n_fed = q->n_exact = 0; /* the cache is as before this step, but the caller's turn is lost */
        sn_kvloop_slot_reset(g->loop, k);
        seq_end(q, rc, &e);
        return;
    }
    if (last >= 2 && q->n_exact == q->at)
        q->n_exact = q->at + last;
    q->at += last;
    q->n_fed = q->at;
    if (q->at < q->n_prompt)
        return;
    const sn_kvloop_info *li = sn_kvloop_get_info(g->loop);
    if (!li->last_logits)
        logits += (last - 1) * li->vocab;
    if (li->vocab != g->info.vocab) { /* the logits' width, known now: the sampler's */
        sn_sampler_free(q->smp);
        q->smp = NULL;
        g->info.vocab = li->vocab;
        if ((rc = sn_sampler_new(li->vocab, &q->p.sampling, &q->smp, &e)) != SNUG_OK) {
            seq_end(q, rc, &e);
            return;
        }
        for (int64_t i = 0; i < q->n_prompt; i++)
            sn_sampler_accept(q->smp, q->prompt[i]);
    }
    q->t1 = now_s();
    q->res.prefill_s = q->t1 - q->t0;
    seq_take(g, k, logits);
}

/* One chunk of the prompt of slot k in a run of its own. */
static void seq_prefill(sn_generator *g, int k) {
    gen_seq *q = &g->seq[k];
    int64_t last = seq_chunk(g, k, g->batch);
    const float *logits = NULL;
    sn_err e = {0};
    double t0 = now_s();
    int rc = sn_kvloop_slot_prefill(g->loop, k, q->fed + q->at, last, &logits, &e);
    g->runs.prefill_runs++;
    g->runs.prefill_rows += (uint64_t)last;
    g->runs.prefill_s += now_s() - t0;
    seq_chunk_done(g, k, last, rc, &e, logits);
}

/* The slots decoding into g->dslots, their next ids into g->dids: how many. */
static int seq_decoding(sn_generator *g) {
    int n = 0;
    for (int k = 0; k < g->n_slots; k++)
        if (g->seq[k].phase == SEQ_DECODE) {
            g->dslots[n] = k;
            g->dids[n++] = g->seq[k].next;
        }
    return n;
}

typedef struct draw_job {
    sn_generator *g;
    const float *logits;
    bool packed;
} draw_job;

/* Decode rows [i0, i1) sampled (each slot's sampler is its own). */
static void draw_task(void *arg, int64_t i0, int64_t i1) {
    const draw_job *d = arg;
    sn_generator *g = d->g;
    const int64_t vocab = sn_kvloop_get_info(g->loop)->vocab;
    for (int64_t i = i0; i < i1; i++) {
        int k = g->dslots[i];
        int64_t row = d->packed ? i : g->n_slots > 1 ? k : 0;
        g->drawn[i] = sn_sampler_sample(g->seq[k].smp, d->logits + row * vocab);
    }
}

/* The n decode rows of g->dslots (and their sampled tokens) from a run's
 * logits, row i at logits + i x vocab, or the run's failure. The rows are
 * sampled on the session's threads, two rows a task at least (16 rows of
 * SmolLM2's 49152 logits: ~0.2 ms on one thread between two runs); their
 * text goes out in slot order after. */
static void seq_decoded(sn_generator *g, int n, int rc, const sn_err *e, const float *logits, bool packed) {
    if (rc == SNUG_OK) {
        draw_job d = {g, logits, packed};
        sn_pool_for(g->s->pool, n, 2, draw_task, &d);
    }
    for (int i = 0; i < n; i++) {
        int k = g->dslots[i];
        gen_seq *q = &g->seq[k];
        if (rc != SNUG_OK) {
            seq_end(q, rc, e);
            continue;
        }
        q->fed[q->n_fed++] = g->dids[i];
        seq_take_id(g, k, g->drawn[i]);
    }
}

int sn_generator_step(sn_generator *g, int *finished) {
    int before = 0;
    for (int k = 0; k < g->n_slots; k++)
        before += g->seq[k].phase == SEQ_DONE;
    /* a chunk of one prompt (round robin over the slots prefilling), so a
     * long prompt does not hold up the answers under way */
    int pre = -1;
    for (int i = 0; i < g->n_slots && pre < 0; i++)
        if (g->seq[(g->rr + i) % g->n_slots].phase == SEQ_PREFILL)
            pre = (g->rr + i) % g->n_slots;
    if (pre >= 0)
        g->rr = (pre + 1) % g->n_slots;
    /* and one token of every answer under way: with the chunk in one run where
     * the model allows (the chunk as many tokens as the run has room for beside
     * the decode rows), else after it (an answer whose prompt it ended among them) */
    int n = seq_decoding(g);
    int64_t room = g->batch - n;
    if (pre >= 0 && n > 0 && room >= 2 && sn_kvloop_can_pack(g->loop)) {
        gen_seq *q = &g->seq[pre];
        int64_t last = seq_chunk(g, pre, room);
        const float *logits = NULL;
        sn_err e = {0};
        double t0 = now_s();
        int rc = sn_kvloop_step_packed(g->loop, n, g->dslots, g->dids, pre, q->fed + q->at, last, &logits, &e);
        g->runs.packed_runs++;
        g->runs.prefill_rows += (uint64_t)last;
        g->runs.decode_rows += (uint64_t)n;
        g->runs.packed_s += now_s() - t0;
        const int64_t vocab = sn_kvloop_get_info(g->loop)->vocab;
        seq_decoded(g, n, rc, &e, logits ? logits + vocab : NULL, true); /* after the chunk's row */
        seq_chunk_done(g, pre, last, rc, &e, logits);
        n = 0;
    } else if (pre >= 0) {
        seq_prefill(g, pre);
        n = seq_decoding(g);
    }
    if (n) {
        const float *logits = NULL;
        sn_err e = {0};
        double t0 = now_s();
        /* slots idle below the highest one decoding (answers ended, their
         * next prompt not in yet) would each run a stand-in row, a token's
         * whole work for nothing: packed, the run has the decode rows only */
        bool packed = g->dslots[n - 1] + 1 > n && sn_kvloop_can_pack(g->loop); /* dslots ascend */
        int rc = packed ? sn_kvloop_step_packed(g->loop, n, g->dslots, g->dids, -1, NULL, 0, &logits, &e)
                        : sn_kvloop_decode_slots(g->loop, n, g->dslots, g->dids, &logits, &e);
        g->runs.decode_runs++;
        g->runs.decode_rows += (uint64_t)n;
        g->runs.decode_s += now_s() - t0;
        seq_decoded(g, n, rc, &e, logits, packed);
    }
    int done = 0, busy = 0;
    for (int k = 0; k < g->n_slots; k++) {
        done += g->seq[k].phase == SEQ_DONE;
        busy += g->seq[k].phase == SEQ_PREFILL || g->seq[k].phase == SEQ_DECODE;
    }
    if (finished)
        *finished = done - before;
    return busy;
}

void sn_generator_runs(const sn_generator *g, sn_gen_runs *out) { *out = g->runs; }

int sn_generator_finish(sn_generator *g, int slot, sn_gen_result *res, sn_err *err) {
    if (slot < 0 || slot >= g->n_slots || g->seq[slot].phase != SEQ_DONE)
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "slot %d has no finished answer", slot);
    gen_seq *q = &g->seq[slot];
    q->phase = SEQ_FREE;
    if (res)
        *res = q->res;
    if (q->rc != SNUG_OK)
        *err = q->err;
    return q->rc;
}

int sn_generator_run(sn_generator *g, const int32_t *ids, size_t n, const sn_gen_params *p, sn_gen_text_fn cb,
                     void *user, sn_gen_result *res, sn_err *err) {
    memset(res, 0, sizeof *res);
    g->seq[0].n_ans = 0;
    if (sn_generator_slot_busy(g, 0))
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "slot 0 is busy with another answer");
    SN_TRY(sn_generator_start(g, 0, ids, n, p, cb, user, err));
    while (!sn_generator_slot_done(g, 0))
        sn_generator_step(g, NULL);
    return sn_generator_finish(g, 0, res, err);
}
