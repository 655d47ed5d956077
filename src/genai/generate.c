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

struct sn_generator {
    char *dir;              /* owned */
    char *model_path;       /* owned */
    sn_session *s;          /* owned */
    sn_kvloop *loop;        /* owned */
    sn_tokenizer *tok;      /* owned */
    sn_tokstream *ts;       /* owned */
    sn_template *tpl;       /* owned, or NULL: the model has no chat template */
    sn_chat_config chat;    /* owned */
    int32_t eos[SN_GEN_MAX_EOS];
    int n_eos;
    int64_t ctx, batch;
    int64_t *fed;           /* owned [ctx]: the ids in the KV cache, in order */
    int32_t *ans;           /* owned [ctx + 1]: the ids the last answer sampled, an EOS included */
    int64_t n_ans;
    int64_t n_fed;
    char *hold;             /* owned [hold_cap]: answer text held back (a stop string may start there) */
    size_t hold_len, hold_cap;
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
    g->batch = c.batch > 0 ? c.batch : SN_GEN_DEFAULT_BATCH;
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
    char mh[32], pl[16];
    snprintf(mh, sizeof mh, "%llu", (unsigned long long)c.mem_host);
    snprintf(pl, sizeof pl, "%d", c.prefetch_layers);
    if ((c.mem_host && snug_options_set(opts, "snug.mem.host", mh) != SNUG_OK) ||
        (c.prefetch_layers && snug_options_set(opts, "snug.prefetch_layers", pl) != SNUG_OK)) {
        rc = sn_errf(err, SNUG_ERR_OOM, "out of memory");
        goto fail;
    }
    if ((rc = sn_session_open(g->model_path, opts, &g->s, err)) != SNUG_OK)
        goto fail;
    if ((rc = sn_kvloop_new_chunked(g->s, g->ctx, g->batch, &g->loop, err)) != SNUG_OK)
        goto fail;
    if ((rc = sn_tokstream_new(g->tok, true, &g->ts, err)) != SNUG_OK)
        goto fail;
    g->fed = sn_malloc(sizeof *g->fed * (size_t)g->ctx);
    g->ans = sn_malloc(sizeof *g->ans * ((size_t)g->ctx + 1));
    g->hold_cap = 4096;
    g->hold = sn_malloc(g->hold_cap);
    if (!g->fed || !g->hold || !g->ans) {
        rc = sn_errf(err, SNUG_ERR_OOM, "out of memory");
        goto fail;
    }
    g->info.model_path = g->model_path;
    g->info.ctx = g->ctx;
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
    sn_tokstream_free(g->ts);
    sn_kvloop_free(g->loop);
    sn_session_close(g->s);
    sn_template_free(g->tpl);
    sn_chat_config_free(&g->chat);
    sn_tokenizer_free(g->tok);
    sn_free(g->fed);
    sn_free(g->ans);
    sn_free(g->hold);
    sn_free(g->model_path);
    sn_free(g->dir);
    sn_free(g);
}

const sn_gen_info *sn_generator_info(const sn_generator *g) { return &g->info; }

int64_t sn_generator_answer_ids(const sn_generator *g, const int32_t **ids) {
    *ids = g->ans;
    return g->n_ans;
}

const struct snug_session *sn_generator_session(const sn_generator *g) { return (const struct snug_session *)g->s; }

void sn_generator_reset(sn_generator *g) {
    g->n_fed = 0;
    sn_kvloop_reset(g->loop);
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
static int hold_add(sn_generator *g, const char *t, size_t n, sn_err *err) {
    if (g->hold_len + n + 1 > g->hold_cap) {
        size_t cap = (g->hold_len + n + 1) * 2;
        char *h = sn_realloc(g->hold, cap);
        if (!h)
            return sn_errf(err, SNUG_ERR_OOM, "out of memory");
        g->hold = h;
        g->hold_cap = cap;
    }
    memcpy(g->hold + g->hold_len, t, n);
    g->hold_len += n;
    g->hold[g->hold_len] = 0;
    return SNUG_OK;
}

/* Emits what of the held text can no longer be part of a stop string (all
 * of it when final); *stopped when one appeared (the text before it is
 * emitted, it and what follows are not). Returns the callback's verdict. */
static int hold_emit(sn_generator *g, const sn_gen_params *p, bool final, sn_gen_text_fn cb, void *user,
                     bool *stopped) {
    size_t keep = 0, cut = g->hold_len;
    *stopped = false;
    for (int k = 0; k < p->n_stop; k++) {
        const char *st = p->stop[k];
        size_t sl = st ? strlen(st) : 0;
        if (!sl)
            continue;
        const char *at = strstr(g->hold, st);
        if (at && (size_t)(at - g->hold) < cut) {
            cut = (size_t)(at - g->hold);
            *stopped = true;
        }
        /* the longest tail of hold that starts st */
        for (size_t t = sl - 1 < g->hold_len ? sl - 1 : g->hold_len; t > keep && !final; t--)
            if (!memcmp(g->hold + g->hold_len - t, st, t)) {
                keep = t;
                break;
            }
    }
    size_t emit = *stopped ? cut : g->hold_len - keep;
    int stop = 0;
    if (emit && cb)
        stop = cb(user, g->hold, emit);
    if (*stopped) {
        g->hold_len = 0;
    } else {
        memmove(g->hold, g->hold + emit, g->hold_len - emit);
        g->hold_len -= emit;
    }
    g->hold[g->hold_len] = 0;
    return stop;
}

int sn_generator_run(sn_generator *g, const int32_t *ids, size_t n, const sn_gen_params *p, sn_gen_text_fn cb,
                     void *user, sn_gen_result *res, sn_err *err) {
    memset(res, 0, sizeof *res);
    g->n_ans = 0;
    double t0 = now_s();
    if (n < 1)
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "the prompt has no tokens");
    if ((int64_t)n >= g->ctx)
        return sn_errf(err, SNUG_ERR_RANGE, "the prompt has %zu tokens, the context %lld: it leaves no room for an "
                       "answer (a larger --ctx, or a shorter prompt)", n, (long long)g->ctx);
    res->prompt_tokens = (int64_t)n;
    /* What is cached already: the common prefix (one token at least is fed, for its logits). */
    int64_t c = 0;
    while (c < g->n_fed && c < (int64_t)n - 1 && g->fed[c] == ids[c])
        c++;
    if (c < g->n_fed) {
        if (sn_kvloop_rewind(g->loop, c, err) != SNUG_OK) {
            sn_generator_reset(g);
            c = 0;
        }
        g->n_fed = c;
    }
    const float *logits = NULL;
    int64_t last = 0;
    for (int64_t at = c; at < (int64_t)n; at += last) {
        last = (int64_t)n - at < g->batch ? (int64_t)n - at : g->batch;
        for (int64_t k = 0; k < last; k++)
            g->fed[at + k] = ids[at + k];
        int rc = sn_kvloop_prefill(g->loop, g->fed + at, last, &logits, err);
        if (rc != SNUG_OK) {
            sn_generator_reset(g); /* the cache is as before this step, but the caller's turn is lost */
            return rc;
        }
        g->n_fed = at + last;
    }
    res->prefilled = (int64_t)n - c;
    const sn_kvloop_info *li = sn_kvloop_get_info(g->loop);
    int64_t V = li->vocab;
    if (!li->last_logits)
        logits += (last - 1) * V;
    double t1 = now_s();
    res->prefill_s = t1 - t0;
    sn_sampler *smp = NULL;
    SN_TRY(sn_sampler_new(V, &p->sampling, &smp, err));
    for (size_t k = 0; k < n; k++)
        sn_sampler_accept(smp, ids[k]);
    sn_tokstream_reset(g->ts);
    g->hold_len = 0;
    int rc = SNUG_OK;
    bool stopped = false;
    for (;;) {
        int32_t id = sn_sampler_sample(smp, logits);
        if (g->n_ans <= g->ctx)
            g->ans[g->n_ans++] = id;
        if (res->generated == 0)
            res->ttft_s = now_s() - t0;
        res->generated++;
        if (is_eos(g, id)) {
            res->stop = SN_GEN_STOP_EOS;
            break;
        }
        sn_sampler_accept(smp, id);
        const char *piece = "";
        size_t plen = 0;
        /* An id the tokenizer lacks (a model's vocabulary padded past its
         * tokenizer's, as Phi-3's and Qwen2's are) has no text: nothing, as
         * `tokenizers` decodes it; it still goes into the cache. */
        bool known = id >= 0 && id < sn_tokenizer_vocab_size(g->tok);
        if ((known && (rc = sn_tokstream_step(g->ts, id, &piece, &plen, err)) != SNUG_OK) ||
            (rc = hold_add(g, piece, plen, err)) != SNUG_OK)
            break;
        if (hold_emit(g, p, false, cb, user, &stopped)) {
            res->stop = SN_GEN_STOP_CANCELLED;
            break;
        }
        if (stopped) {
            res->stop = SN_GEN_STOP_STRING;
            break;
        }
        if (p->max_tokens > 0 && res->generated >= p->max_tokens) {
            res->stop = SN_GEN_STOP_LENGTH;
            break;
        }
        if (g->n_fed >= g->ctx) {
            res->stop = SN_GEN_STOP_CONTEXT;
            break;
        }
        int64_t id64 = id;
        if ((rc = sn_kvloop_decode(g->loop, id64, &logits, err)) != SNUG_OK)
            break;
        g->fed[g->n_fed++] = id64;
    }
    if (rc == SNUG_OK && res->stop != SN_GEN_STOP_STRING && res->stop != SN_GEN_STOP_CANCELLED) {
        const char *tail;
        size_t tl;
        if ((rc = sn_tokstream_flush(g->ts, &tail, &tl, err)) == SNUG_OK &&
            (rc = hold_add(g, tail, tl, err)) == SNUG_OK && hold_emit(g, p, true, cb, user, &stopped))
            res->stop = SN_GEN_STOP_CANCELLED;
        if (stopped)
            res->stop = SN_GEN_STOP_STRING;
    }
    sn_sampler_free(smp);
    res->decode_s = now_s() - t1;
    return rc;
}
