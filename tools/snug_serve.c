/* snug serve DIR: an OpenAI-compatible HTTP server (docs/serve.md), on
 * libmicrohttpd (HTTP) and cJSON (JSON), both from Debian.
 *
 * Requests become jobs in one bounded queue; --parallel N slots take them,
 * each with its own KV cache (the weights are the model file's pages,
 * mapped once and shared by all). A slot keeps the rows of its last prompt
 * in its cache (with --cache-prompt its whole conversation), so a prompt
 * that starts as that one did, landing on that slot, prefills only the
 * rest (slot_prepare). Where the model
 * takes a length per sequence (attention_mask: GroupQueryAttention's
 * seqlens_k, or keys masked in a padded cache) the slots are one
 * generator's (engine_main): a decode step runs every slot under way in
 * one model run, reading the weights once for all, and a prompt goes in
 * chunks between those steps. Other models get a generator per slot, each
 * on a thread of its own (worker_main).
 *
 * Connections get a thread each (MHD_USE_THREAD_PER_CONNECTION): a
 * handler may block while its job waits or runs, and polls the socket
 * meanwhile, so a client that goes away cancels its job and frees its
 * slot. */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <microhttpd.h>

#include "cli.h"
#include "serve.h"
#include "snug.h"

static const char k_serve_help[] =
    "usage: snug serve MODEL_DIR [options]\n\n"
    "Serves the LLM in MODEL_DIR (as `snug generate` reads it) over HTTP with\n"
    "OpenAI's API: POST /v1/chat/completions and /v1/completions (streamed with\n"
    "server-sent events when the request says \"stream\": true), GET /v1/models,\n"
    "/health and /metrics (Prometheus). Runs until SIGTERM or SIGINT, which stop\n"
    "new requests and let running ones finish (a second one cancels them).\n\n"
    "  --host ADDR         IPv4 address to listen on (default 127.0.0.1; 0.0.0.0:\n"
    "                      every interface)\n"
    "  --port N            TCP port (default 8080)\n"
    "  --parallel N        slots: requests answered at once (default 1); each has\n"
    "                      its own KV cache of --ctx tokens. The slots decode\n"
    "                      together, one model run per token for all of them\n"
    "                      (continuous batching), where the model takes a length\n"
    "                      per sequence (attention_mask); others get a generator\n"
    "                      per slot\n"
    "  --no-batch          a generator per slot even where they could decode together\n"
    "  --ctx N             context of each slot in tokens (default: 4096 / parallel,\n"
    "                      at least 512)\n"
    "  --batch N           prompt tokens per prefill step, at least 2 (default 512;\n"
    "                      slots decoded together: max(32, 512 / parallel), a\n"
    "                      chunk of one prompt between two decode steps)\n"
    "  --threads N         worker threads (default: all cores; a generator per slot:\n"
    "                      all cores / parallel each, at least 1)\n"
    CLI_PLACEMENT_HELP
    "  --queue N           requests that may wait for a slot (default 64); more get\n"
    "                      429 with Retry-After\n"
    "  --timeout S         a request's limit in seconds, waiting included (default 600)\n"
    "  --idle-timeout S    close a connection idle this long (default 30)\n"
    "  --max-body SIZE     largest request body (default 1M); larger get 413\n"
    "  --cache-prompt      a slot keeps its whole last conversation in its KV cache\n"
    "                      (answers included) and a prompt that starts with it\n"
    "                      prefills only the rest; an answer can then part from the\n"
    "                      one a fresh `snug generate` gives at a near tie. Default:\n"
    "                      a slot keeps only its prompts' rows, which a fresh\n"
    "                      prefill computes to the bit, so every answer is the fresh\n"
    "                      one and a prompt that starts as the last one did (a\n"
    "                      system prompt) prefills only the rest\n"
    "  --no-cache-prompt   every request starts from an empty cache. A request's\n"
    "                      \"cache_prompt\" true asks for --cache-prompt, false for\n"
    "                      this\n"
    "  --no-share-prompt   a slot does not copy the rows of its prompt that another\n"
    "                      slot has computed. Default (unless the cache is off): a\n"
    "                      prompt that starts as another slot's did (a question\n"
    "                      asked before, a long system prompt) copies those rows,\n"
    "                      which are to the bit what its prefill would compute, and\n"
    "                      prefills only the rest\n"
    "  --api-key KEY       require 'Authorization: Bearer KEY' (all but /health)\n"
    "  --model-name NAME   the model's id in responses (default: MODEL_DIR's name)\n"
    "  --chat-template F   a Jinja chat template file instead of the model's\n"
    "  --weights MODE      map (default) or load (read into owned memory, per slot)\n"
    "  --config KEY=VALUE  a session config entry (docs/config.md), e.g.\n"
    "                      snug.spin_pauses=400; may be given more than once\n"
    "  -q, --quiet         no line per request on stderr\n";

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void job_release(job *j) {
    pthread_mutex_lock(&j->mu);
    int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (!left)
        serve_job_free(j);
}

/* ---- metrics -------------------------------------------------------------- */

#define N_BUCKETS 12
static const double k_buckets[N_BUCKETS] = {0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};

typedef struct hist {
    uint64_t count, bucket[N_BUCKETS];
    double sum;
} hist;

static void hist_add(hist *h, double v) {
    h->count++;
    h->sum += v;
    for (int i = 0; i < N_BUCKETS; i++)
        if (v <= k_buckets[i])
            h->bucket[i]++;
}

#define N_CODES 12
static const int k_codes[N_CODES] = {200, 400, 401, 404, 405, 408, 413, 429, 500, 503, 504, 0};

typedef struct metrics {
    uint64_t http[N_CODES]; /* responses by status (k_codes; the last: any other) */
    uint64_t chat, complete, prompt_tokens, prefilled_tokens, generated_tokens, shared_tokens;
    uint64_t cancelled, timed_out, rejected;
    hist request_s, ttft_s, queue_s;
} metrics;

/* ---- the server ----------------------------------------------------------- */

typedef struct server {
    const char *model_name;
    int parallel, queue_max, quiet, cache_prompt, share_prompt;
    bool has_template; /* the model (or --chat-template) gives a chat template snug renders */
    const char *template_why; /* why not, or NULL */
    double timeout_s;
    double keepalive_s; /* a stream silent this long gets an SSE comment (half of --idle-timeout) */
    size_t max_body;
    const char *api_key;
    int64_t ctx;
    snug_generator **gens;  /* [parallel], or one with parallel slots (batched) */
    bool batched;            /* one generator, its slots decoded together (engine_main) */
    /* batched: the engine's round count, bumped (and tick_cv broadcast) after each round; the
     * connections wait on it instead of their job's cv (wait_news) */
    pthread_mutex_t tick_mu;
    pthread_cond_t tick_cv;
    uint64_t tick;
    int tick_waiting;        /* connections blocked in wait_news (under tick_mu) */
    int tick_awake;          /* of those the last tick woke, the ones not yet back or gone (under tick_mu) */
    pthread_cond_t calm_cv;  /* tick_awake fell to 0 */
    job **slot_jobs;         /* [parallel]: the job on each slot (batched; the engine's own) */
    snug_generator_runs *runs; /* [parallel]: each generator's model runs as last noted (under mu) */
    pthread_t *workers;
    pthread_mutex_t mu; /* the queue, the slots' state, the metrics */
    pthread_cond_t cv;
    job *head, *tail;
    int queued, busy;
    int active; /* requests submitted whose response has not been sent in full */
    bool draining, stopping;
    metrics m;
    atomic_uint_fast64_t next_id;
} server;

static server g_srv;

static void count_status(int code) {
    pthread_mutex_lock(&g_srv.mu);
    int i = 0;
    while (i < N_CODES - 1 && k_codes[i] != code)
        i++;
    g_srv.m.http[i]++;
    pthread_mutex_unlock(&g_srv.mu);
}

/* The generator's text callback: appends, wakes the connection (batched:
 * the engine wakes them all after the step, engine_tick, but for an
 * answer's first text); stops a job whose client left or whose time is up. */
static void engine_tick(void);

static int on_text(void *user, const char *text, size_t len) {
    job *j = user;
    pthread_mutex_lock(&j->mu);
    bool first = j->len == 0;
    if (j->len + len + 1 > j->cap) {
        size_t cap = (j->len + len + 1) * 2;
        char *t = realloc(j->text, cap);
        if (!t) {
            j->oom = true;
            pthread_mutex_unlock(&j->mu);
            return 1;
        }
        j->text = t;
        j->cap = cap;
    }
    memcpy(j->text + j->len, text, len);
    j->len += len;
    j->text[j->len] = 0;
    if (now_s() > j->deadline)
        j->timed_out = true;
    int stop = j->cancelled || j->timed_out;
    pthread_mutex_unlock(&j->mu);
    /* after the unlock: a reader woken under the lock blocks on it at once and the unlock wakes it again
     * (16 streams, AMD EPYC VM: this callback 40-48 -> 32-39 us a token, most of it the wake-up) */
    if (!g_srv.batched)
        pthread_cond_broadcast(&j->cv);
    else if (first) /* the time to the first token is not kept waiting for the rest of the step */
        engine_tick();
    return stop;
}

/* The head of the queue, or NULL (under g_srv.mu); counted busy. */
static job *queue_pop(void) {
    job *j = g_srv.head;
    if (!j)
        return NULL;
    g_srv.head = j->next;
    if (!g_srv.head)
        g_srv.tail = NULL;
    g_srv.queued--;
    g_srv.busy++;
    return j;
}

/* A job taken by slot: running now; false when it is to be skipped (its
 * client left, or its time ran out in the queue). */
static bool job_begin(job *j, int slot) {
    j->started = now_s();
    pthread_mutex_lock(&j->mu);
    bool skip = j->cancelled || j->started > j->deadline;
    if (j->started > j->deadline)
        j->timed_out = true;
    j->state = JOB_RUNNING;
    j->slot = slot;
    pthread_mutex_unlock(&j->mu);
    return !skip;
}

/* What a slot keeps of its cache for the next job: nothing, its prompts'
 * rows (what a fresh prefill computes to the bit), or all of it. */
enum { CACHE_NONE, CACHE_EXACT, CACHE_ALL };

static int job_cache(const job *j) {
    return j->cache_prompt < 0 ? g_srv.cache_prompt : j->cache_prompt ? CACHE_ALL : CACHE_NONE;
}

static void slot_prepare(snug_generator *g, int slot, const job *j) {
    int mode = job_cache(j);
    if (mode == CACHE_NONE)
        snug_generator_slot_reset(g, slot); /* a fresh prefill */
    else if (mode == CACHE_EXACT)
        snug_generator_slot_keep_exact(g, slot); /* still the answer a fresh prefill gives */
}

/* A job's end: the figures first (a client that reads /metrics after its
 * answer sees its request in them), then the answer is done. */
/* Notes generator k's model runs for /metrics (its own thread, between steps). */
static void runs_note(int k) {
    snug_generator_runs r;
    snug_generator_runs_get(g_srv.gens[k], &r);
    pthread_mutex_lock(&g_srv.mu);
    g_srv.runs[k] = r;
    pthread_mutex_unlock(&g_srv.mu);
}

static void job_end(job *j, bool ran, int rc, const char *err, const snug_generation *gen) {
    pthread_mutex_lock(&j->mu);
    bool cancelled = j->cancelled, timed_out = j->timed_out;
    pthread_mutex_unlock(&j->mu);
    pthread_mutex_lock(&g_srv.mu);
    g_srv.busy--;
    hist_add(&g_srv.m.queue_s, j->started - j->submitted);
    if (rc == SNUG_OK && ran) {
        g_srv.m.prompt_tokens += (uint64_t)gen->prompt_tokens;
        g_srv.m.prefilled_tokens += (uint64_t)gen->prefilled;
        g_srv.m.shared_tokens += (uint64_t)gen->shared;
        g_srv.m.generated_tokens += (uint64_t)gen->generated;
        if (gen->generated > 0)
            hist_add(&g_srv.m.ttft_s, j->started - j->submitted + gen->ttft_s);
    }
    g_srv.m.cancelled += cancelled;
    g_srv.m.timed_out += timed_out;
    pthread_cond_broadcast(&g_srv.cv); /* a drain waits for idle slots */
    pthread_mutex_unlock(&g_srv.mu);

    pthread_mutex_lock(&j->mu);
    j->rc = rc;
    if (rc != SNUG_OK)
        snprintf(j->err, sizeof j->err, "%s", err);
    if (gen)
        j->gen = *gen;
    j->state = JOB_DONE;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    job_release(j);
}

/* One slot, one generator, one thread (models without batched decode). */
static void *worker_main(void *arg) {
    int slot = (int)(intptr_t)arg;
    snug_generator *g = g_srv.gens[slot];
    for (;;) {
        pthread_mutex_lock(&g_srv.mu);
        while (!g_srv.head && !g_srv.stopping)
            pthread_cond_wait(&g_srv.cv, &g_srv.mu);
        job *j = queue_pop();
        pthread_mutex_unlock(&g_srv.mu);
        if (!j)
            return NULL;
        bool run = job_begin(j, slot);
        snug_generation gen;
        memset(&gen, 0, sizeof gen);
        int rc = SNUG_OK;
        if (run)
            slot_prepare(g, 0, j);
        if (run)
            rc = j->kind == JOB_CHAT ? snug_generator_chat(g, j->msgs, j->n_msgs, &j->s, on_text, j, &gen)
                                     : snug_generator_complete(g, j->prompt, &j->s, on_text, j, &gen);
        runs_note(slot);
        job_end(j, run, rc, snug_generator_error(g), &gen);
    }
}

/* The most an engine round waits for the connections it woke (calm_wait). */
#define SERVE_CALM_S 1e-3

/* Under tick_mu: the connections a tick woke write their news before the
 * next model run starts. Else they run inside it, each taking a core from
 * a compute thread for tens of microseconds, and the other compute thread
 * waits for that one at the end of every parallel loop it was in: under 16
 * streams, the server's pool spun in 31% of its samples against 13% in
 * `snug bench --slots 16`. Waiting for them (1 ms at most: a connection
 * whose client reads slowly is not waited for again until it is back)
 * gave 16 streams 1002 tok/s against 894 (+12%, higher in each of five
 * alternating pairs), one stream 214 against 219 (docs/serve.md). */
static void calm_wait(void) {
    if (g_srv.tick_awake <= 0)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)(SERVE_CALM_S * 1e9);
    if (ts.tv_nsec >= 1000000000)
        ts.tv_sec++, ts.tv_nsec -= 1000000000;
    while (g_srv.tick_awake > 0 && pthread_cond_timedwait(&g_srv.calm_cv, &g_srv.tick_mu, &ts) == 0)
        ;
}

/* The end of an engine round: every connection waiting on a batched job
 * looks again (wait_news). One broadcast a round instead of a wake-up per
 * token and stream: on a VM a wake-up of a thread on the other vCPU costs
 * tens of microseconds of the engine's time, which 16 streams paid 16
 * times a step between the model runs. */
static void engine_tick(void) {
    pthread_mutex_lock(&g_srv.tick_mu);
    g_srv.tick++;
    g_srv.tick_awake = g_srv.tick_waiting; /* each comes back to wait_news or ends (tick_back) */
    g_srv.tick_waiting = 0;
    pthread_cond_broadcast(&g_srv.tick_cv);
    calm_wait();
    pthread_mutex_unlock(&g_srv.tick_mu);
}

/* All slots in one generator (continuous batching): each round takes
 * queued jobs into free slots, then one step runs a prompt chunk of one
 * slot (a model run of its own) and a token of every slot decoding (one
 * model run for all); an answer that ends frees its slot at once. */
static void *engine_main(void *arg) {
    (void)arg;
    snug_generator *g = g_srv.gens[0];
    int n = g_srv.parallel, running = 0;
    job **at = g_srv.slot_jobs;
    for (;;) {
        pthread_mutex_lock(&g_srv.mu);
        while (!running && !g_srv.head && !g_srv.stopping)
            pthread_cond_wait(&g_srv.cv, &g_srv.mu);
        if (!running && !g_srv.head) { /* stopping, nothing left */
            pthread_mutex_unlock(&g_srv.mu);
            return NULL;
        }
        job *take[SNUG_SERVE_MAX_PARALLEL];
        int nt = 0, freed[SNUG_SERVE_MAX_PARALLEL], nf = 0;
        for (int k = 0; k < n; k++)
            if (!at[k] && !snug_generator_slot_done(g, k))
                freed[nf++] = k;
        while (nt < nf && g_srv.head)
            take[nt++] = queue_pop();
        pthread_mutex_unlock(&g_srv.mu);
        for (int t = 0; t < nt; t++) {
            job *j = take[t];
            /* the free slot whose cache this prompt reuses most of (llama.cpp's server
             * picks by prompt similarity too): a repeated system prompt or question, an
             * earlier turn, prefills only the rest */
            int mode = job_cache(j), k = freed[0], nc = 1; /* freed ascends */
            /* candidates: the lowest free slot, and those below the highest busy one: a
             * decode step runs rows up to the highest slot under way, so a cache hit
             * higher up would cost stand-in rows at every step of the answer */
            int top = 0;
            for (int i = 0; i < n; i++)
                if (at[i])
                    top = i + 1;
            while (nc < nf && freed[nc] < top)
                nc++;
            if (mode != CACHE_NONE && nc > 1) {
                int best = j->kind == JOB_CHAT
                               ? snug_generator_pick_slot(g, freed, nc, j->msgs, j->n_msgs, NULL, mode == CACHE_EXACT, NULL)
                               : snug_generator_pick_slot(g, freed, nc, NULL, 0, j->prompt, mode == CACHE_EXACT, NULL);
                if (best >= 0)
                    k = best; /* else the start below says what is wrong with the prompt */
            }
            for (int i = 0; i < nf; i++)
                if (freed[i] == k) {
                    memmove(freed + i, freed + i + 1, sizeof *freed * (size_t)(nf - i - 1));
                    nf--;
                    break;
                }
            at[k] = j;
            int rc = SNUG_OK;
            if (job_begin(j, k)) {
                slot_prepare(g, k, j);
                /* what other slots computed of the prompt is copied, not run again */
                snug_generator_set_share_prompt(g, mode != CACHE_NONE && g_srv.share_prompt);
                rc = j->kind == JOB_CHAT ? snug_generator_start_chat(g, k, j->msgs, j->n_msgs, &j->s, on_text, j)
                                         : snug_generator_start_complete(g, k, j->prompt, &j->s, on_text, j);
                if (rc == SNUG_OK) {
                    running++;
                    continue;
                }
            }
            at[k] = NULL;
            job_end(j, false, rc, snug_generator_error(g), NULL);
        }
        if (!running) {
            engine_tick();
            continue;
        }
        int fin = 0;
        running = snug_generator_step(g, &fin);
        runs_note(0);
        for (int k = 0; k < n && fin > 0; k++) {
            if (!at[k] || !snug_generator_slot_done(g, k))
                continue;
            snug_generation gen;
            memset(&gen, 0, sizeof gen);
            int rc = snug_generator_finish(g, k, &gen);
            job *j = at[k];
            at[k] = NULL;
            fin--;
            job_end(j, true, rc, snug_generator_error(g), &gen);
        }
        engine_tick();
    }
}

/* ---- responses ------------------------------------------------------------ */

static enum MHD_Result send_body(struct MHD_Connection *c, int code, const char *type, char *body) {
    struct MHD_Response *r =
        MHD_create_response_from_buffer(body ? strlen(body) : 0, body ? body : (char *)"", MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    if (code == 429 || code == 503)
        MHD_add_response_header(r, "Retry-After", "1");
    if (code == 401)
        MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)code, r);
    MHD_destroy_response(r);
    count_status(code);
    return ok;
}

static enum MHD_Result send_json(struct MHD_Connection *c, int code, cJSON *o) {
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s)
        return MHD_NO;
    return send_body(c, code, "application/json", s);
}

static cJSON *error_json(const bad *b) {
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(e, "message", b->msg);
    cJSON_AddStringToObject(e, "type", b->type ? b->type : "invalid_request_error");
    if (b->param)
        cJSON_AddStringToObject(e, "param", b->param);
    else
        cJSON_AddNullToObject(e, "param");
    cJSON_AddNullToObject(e, "code");
    return o;
}

static enum MHD_Result send_error(struct MHD_Connection *c, const bad *b) { return send_json(c, b->code, error_json(b)); }

static const char *finish_reason(const job *j) {
    return j->gen.stop == SNUG_STOP_LENGTH || j->gen.stop == SNUG_STOP_CONTEXT ? "length" : "stop";
}

static int64_t completion_tokens(const job *j) {
    return j->gen.generated - (j->gen.stop == SNUG_STOP_EOS && j->gen.generated > 0);
}

static cJSON *usage_json(const job *j) {
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)j->gen.prompt_tokens);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)completion_tokens(j));
    cJSON_AddNumberToObject(u, "total_tokens", (double)(j->gen.prompt_tokens + completion_tokens(j)));
    return u;
}

/* The envelope every completion object shares. */
static cJSON *envelope(const job *j, const char *id, long created, bool chunk) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "object", j->kind == JOB_CHAT ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                                               : "text_completion");
    cJSON_AddNumberToObject(o, "created", (double)created);
    cJSON_AddStringToObject(o, "model", g_srv.model_name);
    cJSON_AddStringToObject(o, "system_fingerprint", "snug");
    return o;
}

/* One choice: text (NULL: none), finish (NULL: null). */
static cJSON *choice(const job *j, const char *text, size_t len, const char *finish, bool chunk, bool role) {
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", 0);
    char *t = malloc(len + 1);
    if (t) {
        memcpy(t, text ? text : "", len);
        t[len] = 0;
    }
    if (j->kind == JOB_CHAT) {
        cJSON *m = cJSON_AddObjectToObject(c, chunk ? "delta" : "message");
        if (role || !chunk)
            cJSON_AddStringToObject(m, "role", "assistant");
        if (text || !chunk)
            cJSON_AddStringToObject(m, "content", t ? t : "");
    } else {
        cJSON_AddStringToObject(c, "text", t ? t : "");
        cJSON_AddNullToObject(c, "logprobs");
    }
    free(t);
    if (finish)
        cJSON_AddStringToObject(c, "finish_reason", finish);
    else
        cJSON_AddNullToObject(c, "finish_reason");
    return c;
}

/* ---- connections ---------------------------------------------------------- */

enum { EP_CHAT = 1, EP_COMPLETE, EP_MODELS, EP_HEALTH, EP_METRICS };

typedef struct conn {
    int ep;
    char *body;
    size_t len, cap;
    bool too_large;
    job *j;
    /* streaming */
    char id[40];
    long created;
    char *out;       /* SSE bytes not yet given to MHD */
    size_t out_len, out_at, sent_text;
    bool role_sent, finished;
    int fd;
    double t0;
    const char *path;
    atomic_int refs; /* the request, and a stream's response */
    bool woke;       /* a tick woke it (woke_tick) and it has not waited again (under tick_mu) */
    uint64_t woke_tick;
} conn;

/* Under tick_mu: connection c is back in wait_news, or gone; one the last
 * tick woke counts off. */
static void tick_back(conn *c) {
    if (!c->woke)
        return;
    c->woke = false;
    if (c->woke_tick == g_srv.tick && --g_srv.tick_awake == 0)
        pthread_cond_signal(&g_srv.calm_cv);
}

static void conn_release(conn *c) {
    if (atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    if (g_srv.batched) {
        pthread_mutex_lock(&g_srv.tick_mu);
        tick_back(c);
        pthread_mutex_unlock(&g_srv.tick_mu);
    }
    if (c->j)
        job_release(c->j);
    free(c->body);
    free(c->out);
    free(c);
}

/* Whether the peer closed its end (a read would return 0). */
static bool peer_gone(int fd) {
    if (fd < 0)
        return false;
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0)
        return false;
    if (p.revents & (POLLHUP | POLLERR | POLLRDHUP))
        return true;
    char c;
    ssize_t r = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return r == 0;
}

/* Waits (j->mu held, and held again on return) for news of j: a change
 * of its own cv's, or with a batched server the engine's next round
 * (engine_tick); 100 ms at most, so that the caller polls its socket. No
 * news is lost: the round count is read before j->mu is let go, and news
 * of j comes under j->mu before the round ends. */
static void wait_news(conn *c, job *j) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 100 * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000)
        ts.tv_sec++, ts.tv_nsec -= 1000000000;
    if (!g_srv.batched) {
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
        return;
    }
    pthread_mutex_lock(&g_srv.tick_mu);
    tick_back(c);
    uint64_t t = g_srv.tick;
    pthread_mutex_unlock(&j->mu);
    g_srv.tick_waiting++;
    while (g_srv.tick == t && pthread_cond_timedwait(&g_srv.tick_cv, &g_srv.tick_mu, &ts) == 0)
        ;
    if (g_srv.tick != t) { /* counted in tick_awake by engine_tick */
        c->woke = true;
        c->woke_tick = t + 1; /* the tick that woke it, whichever is the last now */
    } else
        g_srv.tick_waiting--;
    pthread_mutex_unlock(&g_srv.tick_mu);
    pthread_mutex_lock(&j->mu);
}

/* Waits until pred holds (1), the client left (0, the job cancelled), or,
 * with until > 0, that time passed (2). */
static int wait_job_until(conn *c, bool (*pred)(const job *, const conn *), double until) {
    job *j = c->j;
    pthread_mutex_lock(&j->mu);
    while (!pred(j, c)) {
        if (until > 0 && now_s() >= until) {
            pthread_mutex_unlock(&j->mu);
            return 2;
        }
        wait_news(c, j);
        if (!pred(j, c) && peer_gone(c->fd)) {
            j->cancelled = true;
            pthread_mutex_unlock(&j->mu);
            return 0;
        }
        if (j->state == JOB_QUEUED && now_s() > j->deadline)
            j->timed_out = true; /* the worker skips it */
    }
    pthread_mutex_unlock(&j->mu);
    return 1;
}

static bool wait_job(conn *c, bool (*pred)(const job *, const conn *)) { return wait_job_until(c, pred, 0) == 1; }

static bool job_done(const job *j, const conn *c) {
    (void)c;
    return j->state == JOB_DONE;
}
static bool job_news(const job *j, const conn *c) { return j->state == JOB_DONE || j->len > c->sent_text; }

static void log_request(const conn *c, int code) {
    if (g_srv.quiet)
        return;
    const job *j = c->j;
    if (j && j->state == JOB_DONE && j->rc == SNUG_OK)
        fprintf(stderr, "snug serve: %s %d, slot %d: prompt %lld tokens (%lld prefilled), %lld generated, %.2f s%s%s\n",
                c->path, code, j->slot, (long long)j->gen.prompt_tokens, (long long)j->gen.prefilled,
                (long long)j->gen.generated, now_s() - c->t0, j->cancelled ? ", cancelled (client left)" : "",
                j->timed_out ? ", timed out" : "");
    else
        fprintf(stderr, "snug serve: %s %d, %.2f s\n", c->path, code, now_s() - c->t0);
}

static void sse_append(conn *c, cJSON *o) {
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    const char *d = s ? s : "[DONE]";
    size_t n = strlen(d) + 8;
    char *nb = realloc(c->out, c->out_len + n + 1);
    if (nb) {
        c->out = nb;
        c->out_len += (size_t)snprintf(c->out + c->out_len, n + 1, "data: %s\n\n", d);
    }
    free(s);
}

/* The events of what is new in the job (under j->mu). */
static void sse_fill(conn *c) {
    job *j = c->j;
    if (!c->role_sent && j->kind == JOB_CHAT) {
        cJSON *o = envelope(j, c->id, c->created, true), *a = cJSON_AddArrayToObject(o, "choices");
        cJSON_AddItemToArray(a, choice(j, "", 0, NULL, true, true));
        sse_append(c, o);
    }
    c->role_sent = true;
    if (j->len > c->sent_text) {
        cJSON *o = envelope(j, c->id, c->created, true), *a = cJSON_AddArrayToObject(o, "choices");
        cJSON_AddItemToArray(a, choice(j, j->text + c->sent_text, j->len - c->sent_text, NULL, true, false));
        sse_append(c, o);
        c->sent_text = j->len;
    }
    if (j->state == JOB_DONE && !c->finished) {
        if (j->rc != SNUG_OK || j->timed_out || j->oom) {
            bad b = {0};
            serve_fail(&b, j->timed_out ? 504 : 500, NULL, "%s",
                 j->timed_out ? "the request ran past --timeout" : j->oom ? "out of memory" : j->err);
            sse_append(c, error_json(&b));
        } else {
            cJSON *o = envelope(j, c->id, c->created, true), *a = cJSON_AddArrayToObject(o, "choices");
            cJSON_AddItemToArray(a, choice(j, NULL, 0, finish_reason(j), true, false));
            sse_append(c, o);
        }
        if (j->include_usage && j->rc == SNUG_OK) {
            cJSON *o = envelope(j, c->id, c->created, true);
            cJSON_AddArrayToObject(o, "choices");
            cJSON_AddItemToObject(o, "usage", usage_json(j));
            sse_append(c, o);
        }
        sse_append(c, NULL);
        c->finished = true;
    }
}

/* MHD's content reader of a stream: blocks (this connection's own thread)
 * until there is something to send. */
static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    conn *c = cls;
    if (c->out_at == c->out_len) {
        if (c->finished)
            return MHD_CONTENT_READER_END_OF_STREAM;
        c->out_len = c->out_at = 0;
        /* libmicrohttpd counts this wait as the connection's idle time: a
         * stream whose next token is late (a long prompt prefilling in the
         * batch) sends an SSE comment before --idle-timeout would close it */
        int w = wait_job_until(c, job_news, now_s() + g_srv.keepalive_s);
        if (!w)
            return MHD_CONTENT_READER_END_WITH_ERROR;
        if (w == 2) {
            static const char ka[] = ": keep-alive\n\n";
            size_t n = sizeof ka - 1 < max ? sizeof ka - 1 : max;
            memcpy(buf, ka, n);
            return (ssize_t)n;
        }
        pthread_mutex_lock(&c->j->mu);
        sse_fill(c);
        pthread_mutex_unlock(&c->j->mu);
        if (c->out_at == c->out_len)
            return c->finished ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = c->out_len - c->out_at < max ? c->out_len - c->out_at : max;
    memcpy(buf, c->out + c->out_at, n);
    c->out_at += n;
    return (ssize_t)n;
}

static void sse_done(void *cls) {
    conn *c = cls;
    pthread_mutex_lock(&c->j->mu);
    if (c->j->state != JOB_DONE)
        c->j->cancelled = true; /* the client left mid-stream: the slot stops at its next token */
    pthread_mutex_unlock(&c->j->mu);
    log_request(c, 200);
    conn_release(c);
}

/* Queues the job, or says why not (429: the queue is full; 503: draining). */
static int submit(job *j, bad *b) {
    pthread_mutex_lock(&g_srv.mu);
    if (g_srv.draining) {
        pthread_mutex_unlock(&g_srv.mu);
        return serve_fail(b, 503, NULL, "the server is shutting down");
    }
    if (g_srv.queued - (g_srv.parallel - g_srv.busy) >= g_srv.queue_max) { /* what no idle slot takes at once */
        g_srv.m.rejected++;
        pthread_mutex_unlock(&g_srv.mu);
        return serve_fail(b, 429, NULL, "all %d slots are busy and %d requests wait already; retry later", g_srv.parallel,
                    g_srv.queued);
    }
    j->submitted = now_s();
    j->deadline = j->submitted + g_srv.timeout_s;
    j->refs = 2;
    if (g_srv.tail)
        g_srv.tail->next = j;
    else
        g_srv.head = j;
    g_srv.tail = j;
    g_srv.queued++;
    g_srv.active++;
    if (j->kind == JOB_CHAT)
        g_srv.m.chat++;
    else
        g_srv.m.complete++;
    pthread_cond_broadcast(&g_srv.cv);
    pthread_mutex_unlock(&g_srv.mu);
    return 0;
}

/* The job's failure as an HTTP error (under no lock; the job is done). */
static bool job_failed(const job *j, bad *b) {
    if (j->timed_out)
        return serve_fail(b, 504, NULL, "the request ran past --timeout (%g s)", g_srv.timeout_s), true;
    if (j->oom)
        return serve_fail(b, 500, NULL, "out of memory"), true;
    if (j->rc == SNUG_ERR_RANGE || j->rc == SNUG_ERR_INVALID_ARG)
        return serve_fail(b, 400, j->kind == JOB_CHAT ? "messages" : "prompt", "%s", j->err), true;
    if (j->rc != SNUG_OK)
        return serve_fail(b, 500, NULL, "%s", j->err), true;
    return false;
}

static bool job_started(const job *j, const conn *c) {
    (void)c;
    return j->state == JOB_DONE || j->len > 0;
}

static enum MHD_Result answer_job(struct MHD_Connection *mc, conn *c) {
    job *j = c->j;
    snprintf(c->id, sizeof c->id, "%s-%llu", j->kind == JOB_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)atomic_fetch_add(&g_srv.next_id, 1));
    c->created = (long)time(NULL);
    bad b = {0};
    if (j->stream) {
        /* the status waits for the first text, so that a prompt that does not fit is a 400 */
        if (!wait_job(c, job_started))
            return MHD_NO;
        pthread_mutex_lock(&j->mu);
        bool failed = j->state == JOB_DONE && job_failed(j, &b);
        pthread_mutex_unlock(&j->mu);
        if (failed) {
            log_request(c, b.code);
            return send_error(mc, &b);
        }
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sse_read, c, sse_done);
        if (!r)
            return MHD_NO;
        atomic_fetch_add(&c->refs, 1);
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        enum MHD_Result ok = MHD_queue_response(mc, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        count_status(200);
        return ok;
    }
    if (!wait_job(c, job_done))
        return MHD_NO;
    if (job_failed(j, &b)) {
        log_request(c, b.code);
        return send_error(mc, &b);
    }
    cJSON *o = envelope(j, c->id, c->created, false), *a = cJSON_AddArrayToObject(o, "choices");
    cJSON_AddItemToArray(a, choice(j, j->text ? j->text : "", j->len, finish_reason(j), false, true));
    cJSON_AddItemToObject(o, "usage", usage_json(j));
    log_request(c, 200);
    return send_json(mc, 200, o);
}

static void add_hist(char **b, size_t *n, size_t *cap, const char *name, const char *help, const hist *h);

static int buf_printf(char **b, size_t *n, size_t *cap, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int buf_printf(char **b, size_t *n, size_t *cap, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(*b ? *b + *n : NULL, *b ? *cap - *n : 0, fmt, ap);
        va_end(ap);
        if (k < 0)
            return -1;
        if (*b && *n + (size_t)k < *cap) {
            *n += (size_t)k;
            return 0;
        }
        size_t nc = (*cap + (size_t)k + 1) * 2;
        char *nb = realloc(*b, nc);
        if (!nb)
            return -1;
        *b = nb;
        *cap = nc;
    }
}

static void add_hist(char **b, size_t *n, size_t *cap, const char *name, const char *help, const hist *h) {
    buf_printf(b, n, cap, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    for (int i = 0; i < N_BUCKETS; i++)
        buf_printf(b, n, cap, "%s_bucket{le=\"%g\"} %llu\n", name, k_buckets[i], (unsigned long long)h->bucket[i]);
    buf_printf(b, n, cap, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name,
               (unsigned long long)h->count, name, h->sum, name, (unsigned long long)h->count);
}

/* Prometheus' text format (version 0.0.4). */
static char *metrics_text(void) {
    char *b = NULL;
    size_t n = 0, cap = 0;
    pthread_mutex_lock(&g_srv.mu);
    metrics m = g_srv.m;
    int queued = g_srv.queued, busy = g_srv.busy;
    snug_generator_runs sum = {0}, *t = &sum; /* the generators' model runs as last noted (runs_note) */
    for (int k = 0; k < g_srv.parallel; k++) {
        const snug_generator_runs *r = &g_srv.runs[k];
        t->prefill_runs += r->prefill_runs, t->prefill_rows += r->prefill_rows, t->prefill_s += r->prefill_s;
        t->decode_runs += r->decode_runs, t->decode_rows += r->decode_rows, t->decode_s += r->decode_s;
        t->packed_runs += r->packed_runs, t->packed_s += r->packed_s;
    }
    pthread_mutex_unlock(&g_srv.mu);
    buf_printf(&b, &n, &cap, "# HELP snug_http_responses_total HTTP responses by status code.\n"
                             "# TYPE snug_http_responses_total counter\n");
    for (int i = 0; i < N_CODES; i++)
        if (k_codes[i])
            buf_printf(&b, &n, &cap, "snug_http_responses_total{code=\"%d\"} %llu\n", k_codes[i],
                       (unsigned long long)m.http[i]);
        else
            buf_printf(&b, &n, &cap, "snug_http_responses_total{code=\"other\"} %llu\n",
                       (unsigned long long)m.http[i]);
    buf_printf(&b, &n, &cap,
               "# HELP snug_requests_total Completion requests queued, by endpoint.\n"
               "# TYPE snug_requests_total counter\n"
               "snug_requests_total{endpoint=\"chat\"} %llu\nsnug_requests_total{endpoint=\"completions\"} %llu\n"
               "# HELP snug_requests_rejected_total Requests refused because the queue was full (429).\n"
               "# TYPE snug_requests_rejected_total counter\nsnug_requests_rejected_total %llu\n"
               "# HELP snug_requests_cancelled_total Requests whose client left before the answer ended.\n"
               "# TYPE snug_requests_cancelled_total counter\nsnug_requests_cancelled_total %llu\n"
               "# HELP snug_requests_timed_out_total Requests stopped at --timeout.\n"
               "# TYPE snug_requests_timed_out_total counter\nsnug_requests_timed_out_total %llu\n"
               "# HELP snug_prompt_tokens_total Prompt tokens of answered requests.\n"
               "# TYPE snug_prompt_tokens_total counter\nsnug_prompt_tokens_total %llu\n"
               "# HELP snug_prefilled_tokens_total Of those, tokens the model ran (the rest were in a slot's cache).\n"
               "# TYPE snug_prefilled_tokens_total counter\nsnug_prefilled_tokens_total %llu\n"
               "# HELP snug_shared_prompt_tokens_total Of the cached ones, tokens copied from another slot's cache "
               "at the request's start (--no-share-prompt: none).\n"
               "# TYPE snug_shared_prompt_tokens_total counter\nsnug_shared_prompt_tokens_total %llu\n"
               "# HELP snug_generated_tokens_total Tokens generated.\n"
               "# TYPE snug_generated_tokens_total counter\nsnug_generated_tokens_total %llu\n"
               "# HELP snug_queue_depth Requests waiting for a slot.\n# TYPE snug_queue_depth gauge\nsnug_queue_depth %d\n"
               "# HELP snug_slots_busy Slots answering a request.\n# TYPE snug_slots_busy gauge\nsnug_slots_busy %d\n"
               "# HELP snug_slots_total Slots (--parallel).\n# TYPE snug_slots_total gauge\nsnug_slots_total %d\n",
               (unsigned long long)m.chat, (unsigned long long)m.complete, (unsigned long long)m.rejected,
               (unsigned long long)m.cancelled, (unsigned long long)m.timed_out, (unsigned long long)m.prompt_tokens,
               (unsigned long long)m.prefilled_tokens, (unsigned long long)m.shared_tokens,
               (unsigned long long)m.generated_tokens, queued, busy,
               g_srv.parallel);
    buf_printf(&b, &n, &cap,
               "# HELP snug_model_runs_total Model runs, by kind: a prompt chunk of one slot alone (prefill), one token "
               "of every answer under way (decode), both in one run (packed).\n# TYPE snug_model_runs_total counter\n"
               "snug_model_runs_total{kind=\"prefill\"} %llu\nsnug_model_runs_total{kind=\"decode\"} %llu\n"
               "snug_model_runs_total{kind=\"packed\"} %llu\n"
               "# HELP snug_model_run_tokens_total Tokens the runs computed: prompt tokens (prefill, alone or packed) "
               "and decoded ones (decode, alone or packed; over the decode and packed runs: the mean batch).\n"
               "# TYPE snug_model_run_tokens_total counter\n"
               "snug_model_run_tokens_total{kind=\"prefill\"} %llu\nsnug_model_run_tokens_total{kind=\"decode\"} %llu\n"
               "# HELP snug_model_run_seconds_total Wall time of the runs, by kind (sampling and streaming the text "
               "not included).\n# TYPE snug_model_run_seconds_total counter\n"
               "snug_model_run_seconds_total{kind=\"prefill\"} %.6f\nsnug_model_run_seconds_total{kind=\"decode\"} %.6f\n"
               "snug_model_run_seconds_total{kind=\"packed\"} %.6f\n",
               (unsigned long long)t->prefill_runs, (unsigned long long)t->decode_runs,
               (unsigned long long)t->packed_runs, (unsigned long long)t->prefill_rows,
               (unsigned long long)t->decode_rows, t->prefill_s, t->decode_s, t->packed_s);
    add_hist(&b, &n, &cap, "snug_request_duration_seconds", "From a request's arrival to its last byte.", &m.request_s);
    add_hist(&b, &n, &cap, "snug_time_to_first_token_seconds", "From a request's arrival to its first token.",
             &m.ttft_s);
    add_hist(&b, &n, &cap, "snug_queue_wait_seconds", "From a request's arrival to a slot taking it.", &m.queue_s);
    return b;
}

static bool authorized(struct MHD_Connection *mc) {
    if (!g_srv.api_key)
        return true;
    const char *h = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7))
        return false;
    h += 7;
    /* compared in time independent of where they differ */
    size_t a = strlen(h), k = strlen(g_srv.api_key);
    unsigned diff = (unsigned)(a != k);
    for (size_t i = 0; i < a && i < k; i++)
        diff |= (unsigned)(h[i] ^ g_srv.api_key[i]);
    return diff == 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)cls, (void)version;
    conn *c = *con_cls;
    bad b = {0};
    if (!c) { /* the headers are in: route */
        c = calloc(1, sizeof *c);
        if (!c)
            return MHD_NO;
        *con_cls = c;
        atomic_init(&c->refs, 1);
        c->t0 = now_s();
        c->fd = -1;
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci)
            c->fd = ci->connect_fd;
        static const struct {
            const char *path, *method;
            int ep;
        } routes[] = {{"/v1/chat/completions", "POST", EP_CHAT}, {"/chat/completions", "POST", EP_CHAT},
                      {"/v1/completions", "POST", EP_COMPLETE},    {"/completions", "POST", EP_COMPLETE},
                      {"/v1/models", "GET", EP_MODELS},            {"/models", "GET", EP_MODELS},
                      {"/health", "GET", EP_HEALTH},               {"/metrics", "GET", EP_METRICS}};
        const char *want = NULL;
        for (size_t i = 0; i < sizeof routes / sizeof *routes; i++)
            if (!strcmp(url, routes[i].path)) {
                want = routes[i].method;
                c->path = routes[i].path;
                if (!strcmp(method, routes[i].method))
                    c->ep = routes[i].ep;
            }
        if (!want)
            c->path = "(unknown path)";
        if (!c->ep) {
            if (want)
                serve_fail(&b, 405, NULL, "%s takes %s, not %s", url, want, method);
            else
                serve_fail(&b, 404, NULL, "no such endpoint: %s %s", method, url);
            c->too_large = true; /* the body, if any, is not read */
            log_request(c, b.code);
            return send_error(mc, &b);
        }
        if (c->ep != EP_HEALTH && !authorized(mc)) {
            serve_fail(&b, 401, NULL, "a valid API key is required (Authorization: Bearer KEY)");
            c->too_large = true;
            log_request(c, 401);
            return send_error(mc, &b);
        }
        const char *cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > g_srv.max_body) {
            serve_fail(&b, 413, NULL, "the body is %s bytes; the limit is %zu (--max-body)", cl, g_srv.max_body);
            c->too_large = true;
            log_request(c, 413);
            return send_error(mc, &b);
        }
        return MHD_YES;
    }
    if (*upload_size) { /* a piece of the body */
        if (!c->too_large && c->len + *upload_size > g_srv.max_body)
            c->too_large = true, free(c->body), c->body = NULL, c->len = 0, c->cap = 1;
        if (!c->too_large) {
            if (c->len + *upload_size + 1 > c->cap) {
                size_t cap = (c->len + *upload_size + 1) * 2;
                char *nb = realloc(c->body, cap);
                if (!nb)
                    return MHD_NO;
                c->body = nb;
                c->cap = cap;
            }
            memcpy(c->body + c->len, upload, *upload_size);
            c->len += *upload_size;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (c->too_large && c->cap == 1) { /* chunked past the limit: no Content-Length to refuse early */
        c->cap = 0;
        serve_fail(&b, 413, NULL, "the body is over the limit of %zu bytes (--max-body)", g_srv.max_body);
        log_request(c, 413);
        return send_error(mc, &b);
    }
    if (c->too_large) /* answered already */
        return MHD_YES;
    switch (c->ep) {
    case EP_HEALTH: {
        pthread_mutex_lock(&g_srv.mu);
        bool draining = g_srv.draining;
        int idle = g_srv.parallel - g_srv.busy, queued = g_srv.queued;
        pthread_mutex_unlock(&g_srv.mu);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "status", draining ? "shutting down" : "ok");
        cJSON_AddNumberToObject(o, "slots_idle", idle);
        cJSON_AddNumberToObject(o, "slots_total", g_srv.parallel);
        cJSON_AddNumberToObject(o, "queued", queued);
        return send_json(mc, draining ? 503 : 200, o);
    }
    case EP_MODELS: {
        cJSON *o = cJSON_CreateObject(), *d = cJSON_AddArrayToObject(o, "data"), *m = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "object", "list");
        cJSON_AddStringToObject(m, "id", g_srv.model_name);
        cJSON_AddStringToObject(m, "object", "model");
        cJSON_AddNumberToObject(m, "created", 0);
        cJSON_AddStringToObject(m, "owned_by", "snug");
        cJSON_AddNumberToObject(m, "context_length", (double)g_srv.ctx);
        cJSON_AddItemToArray(d, m);
        return send_json(mc, 200, o);
    }
    case EP_METRICS: {
        char *t = metrics_text();
        return t ? send_body(mc, 200, "text/plain; version=0.0.4", t) : MHD_NO;
    }
    default: break;
    }
    if (c->ep == EP_CHAT && !g_srv.has_template) {
        serve_fail(&b, 400, "messages", "this model has no chat template snug can render (%s): send raw text to "
                   "/v1/completions, or start the server with --chat-template FILE",
                   g_srv.template_why ? g_srv.template_why : "none in its folder");
        log_request(c, 400);
        return send_error(mc, &b);
    }
    c->j = serve_parse_job(c->body ? c->body : "", c->len, c->ep == EP_CHAT ? JOB_CHAT : JOB_COMPLETE, &b);
    if (!c->j || submit(c->j, &b)) {
        if (c->j) {
            serve_job_free(c->j);
            c->j = NULL;
        }
        log_request(c, b.code);
        return send_error(mc, &b);
    }
    return answer_job(mc, c);
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls, (void)mc, (void)toe;
    conn *c = *con_cls;
    if (!c)
        return;
    if (c->j) {
        pthread_mutex_lock(&c->j->mu);
        if (c->j->state != JOB_DONE)
            c->j->cancelled = true;
        pthread_mutex_unlock(&c->j->mu);
        pthread_mutex_lock(&g_srv.mu);
        hist_add(&g_srv.m.request_s, now_s() - c->t0);
        g_srv.active--;
        pthread_cond_broadcast(&g_srv.cv); /* a drain waits for the last response */
        pthread_mutex_unlock(&g_srv.mu);
    }
    conn_release(c);
    *con_cls = NULL;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    if (g_srv.quiet)
        return;
    fputs("snug serve: (http) ", stderr);
    vfprintf(stderr, fmt, ap);
}

/* ---- main ----------------------------------------------------------------- */

static volatile sig_atomic_t g_signals;

static void on_signal(int sig) {
    (void)sig;
    g_signals++;
}

/* --max-body: snug_parse_size's grammar, from 1 byte to 1T */
static size_t parse_size(const char *opt, const char *v) {
    char e[256] = "";
    uint64_t n = 0;
    bool parsed = snug_parse_size(v, &n, e, sizeof e) == SNUG_OK;
    if (!parsed || n < 1 || n > ((uint64_t)1 << 40)) {
        char m[400];
        snprintf(m, sizeof m, "%s wants a size from 1 byte to 1T such as 65536, 512K or 4M, got '%s'%s%s", opt, v,
                 parsed ? "" : ": ", parsed ? "" : e);
        cli_die_usage("serve", m);
    }
    return (size_t)n;
}

/* The options below that take a value (the last argument, without one, is
 * then missing its value rather than unknown). */
static bool takes_value(const char *a) {
    static const char *const names[] = {"--host", "--port", "--parallel", "-np", "--ctx", "-c", "--batch",
                                        "--threads", "-t", "--queue", "--timeout", "--idle-timeout",
                                        "--max-body", "--api-key", "--model-name", "--chat-template",
                                        "--weights", "--config", "--device", "-ngl", "--n-gpu-layers",
                                        "--rules", "--overflow", "--mem"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(a, names[i]))
            return true;
    return false;
}

int cmd_serve(int argc, char **argv) {
    const char *dir = NULL, *host = "127.0.0.1", *name = NULL, *tmpl = NULL;
    long port = 8080, parallel = 1, queue = 64, threads = 0, idle = 30;
    int64_t ctx = 0, batch = 0;
    double timeout = 600;
    size_t max_body = 1 << 20;
    bool load = false, no_batch = false;
    cli_placement place = {0};
    const char *user[32]; /* --config KEY=VALUE, as given */
    int n_user = 0;
    memset(&g_srv, 0, sizeof g_srv);
    g_srv.cache_prompt = CACHE_EXACT;
    g_srv.share_prompt = 1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(k_serve_help, stdout);
            return 0;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            g_srv.quiet = 1;
            continue;
        } else if (!strcmp(a, "--cache-prompt")) {
            g_srv.cache_prompt = CACHE_ALL;
            continue;
        } else if (!strcmp(a, "--no-cache-prompt")) {
            g_srv.cache_prompt = CACHE_NONE;
            continue;
        } else if (!strcmp(a, "--no-share-prompt")) {
            g_srv.share_prompt = 0;
            continue;
        } else if (!strcmp(a, "--no-batch")) {
            no_batch = true;
            continue;
        } else if (a[0] != '-') {
            if (dir)
                cli_die_usage("serve", "one MODEL_DIR only");
            dir = a;
            continue;
        }
        if (!v) {
            char m[96];
            snprintf(m, sizeof m, takes_value(a) ? "%s needs a value" : "unknown option %s", a);
            cli_die_usage("serve", m);
        }
        i++;
        if (!strcmp(a, "--host"))
            host = v;
        else if (!strcmp(a, "--port"))
            port = cli_parse_long("serve", a, v, 1, 65535);
        else if (!strcmp(a, "--parallel") || !strcmp(a, "-np"))
            parallel = cli_parse_long("serve", a, v, 1, SNUG_SERVE_MAX_PARALLEL);
        else if (!strcmp(a, "--ctx") || !strcmp(a, "-c"))
            ctx = cli_parse_long("serve", a, v, 16, 1L << 24);
        else if (!strcmp(a, "--batch"))
            batch = cli_parse_long("serve", a, v, 2, 1L << 20);
        else if (!strcmp(a, "--threads") || !strcmp(a, "-t"))
            threads = cli_parse_long("serve", a, v, 1, 1024);
        else if (!strcmp(a, "--queue"))
            queue = cli_parse_long("serve", a, v, 0, 1L << 20);
        else if (!strcmp(a, "--timeout"))
            timeout = (double)cli_parse_long("serve", a, v, 1, 86400 * 7);
        else if (!strcmp(a, "--idle-timeout"))
            idle = cli_parse_long("serve", a, v, 1, 86400);
        else if (!strcmp(a, "--max-body"))
            max_body = parse_size(a, v);
        else if (!strcmp(a, "--api-key"))
            g_srv.api_key = *v ? v : NULL;
        else if (!strcmp(a, "--model-name"))
            name = v;
        else if (!strcmp(a, "--chat-template"))
            tmpl = v;
        else if (!strcmp(a, "--weights")) {
            if (strcmp(v, "map") && strcmp(v, "load"))
                cli_die_usage("serve", "--weights wants map or load");
            load = !strcmp(v, "load");
        } else if (!strcmp(a, "--config")) {
            const char *eq = strchr(v, '=');
            if (!eq || eq == v)
                cli_die_usage("serve", "--config takes KEY=VALUE");
            if (eq - v >= 128)
                cli_die_usage("serve", "--config: a key of 128 characters or more");
            if (n_user == 32)
                cli_die_usage("serve", "at most 32 --config entries");
            user[n_user++] = v;
        } else if (cli_placement_arg("serve", a, v, &place)) {
        } else {
            char m[96];
            snprintf(m, sizeof m, "unknown option %s", a);
            cli_die_usage("serve", m);
        }
    }
    if (!dir)
        cli_die_usage("serve", "a MODEL_DIR is needed");
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, !strcmp(host, "localhost") ? "127.0.0.1" : host, &addr.sin_addr) != 1) {
        char m[160];
        snprintf(m, sizeof m, "--host wants an IPv4 address such as 127.0.0.1 or 0.0.0.0, got '%s'", host);
        cli_die_usage("serve", m);
    }
    if (!ctx)
        ctx = 4096 / parallel < 512 ? 512 : 4096 / parallel;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    long threads_given = threads;
    /* The sessions' config: --config's entries, then the placement options (a later entry wins) */
    static const char *kv[2 * (32 + 8)];
    static char keys[32][128];
    int nkv = 0;
    for (int u = 0; u < n_user; u++) {
        const char *eq = strchr(user[u], '=');
        snprintf(keys[u], sizeof keys[u], "%.*s", (int)(eq - user[u]), user[u]);
        kv[2 * nkv] = keys[u], kv[2 * nkv + 1] = eq + 1, nkv++;
    }
    for (int k = 0; k < place.n; k++)
        kv[2 * nkv] = place.kv[2 * k], kv[2 * nkv + 1] = place.kv[2 * k + 1], nkv++;
    if (!name) {
        size_t n = strlen(dir);
        while (n > 1 && dir[n - 1] == '/')
            n--;
        const char *s = dir + n;
        while (s > dir && s[-1] != '/')
            s--;
        static char base[256];
        snprintf(base, sizeof base, "%.*s", (int)(dir + n - s), s);
        name = base;
    }
    g_srv.model_name = name;
    g_srv.parallel = (int)parallel;
    g_srv.queue_max = (int)queue;
    g_srv.timeout_s = timeout;
    g_srv.keepalive_s = (double)idle / 2;
    g_srv.max_body = max_body;
    g_srv.ctx = ctx;
    pthread_mutex_init(&g_srv.mu, NULL);
    pthread_cond_init(&g_srv.cv, NULL);
    pthread_mutex_init(&g_srv.tick_mu, NULL);
    pthread_cond_init(&g_srv.tick_cv, NULL);
    pthread_cond_init(&g_srv.calm_cv, NULL);
    atomic_init(&g_srv.next_id, 1);
    g_srv.gens = calloc((size_t)parallel, sizeof *g_srv.gens);
    g_srv.workers = calloc((size_t)parallel, sizeof *g_srv.workers);
    g_srv.slot_jobs = calloc((size_t)parallel, sizeof *g_srv.slot_jobs);
    g_srv.runs = calloc((size_t)parallel, sizeof *g_srv.runs);
    if (!g_srv.gens || !g_srv.workers || !g_srv.slot_jobs || !g_srv.runs) {
        fprintf(stderr, "snug serve: out of memory\n");
        return 1;
    }
    int status = 0;
    int made = 0;
    bool tty = isatty(2);
    /* Batched first: one generator whose slots decode together, on every
     * core. A model whose attention cannot take a length per sequence gets
     * a generator per slot, the cores shared among them. */
    if (parallel > 1 && !no_batch) {
        threads = threads_given ? threads_given : cores;
        snug_generator_config bc = {.ctx = ctx, .batch = batch, .threads = (int)threads, .weights_load = load,
                                    .chat_template_path = tmpl, .slots = (int)parallel, .config = kv,
                                    .n_config = nkv, .log = cli_log, .log_user = "serve"};
        char err[1024];
        if (!g_srv.quiet)
            fprintf(stderr, "snug serve: loading %ld slots decoded together\n", parallel);
        int rc = snug_generator_create(dir, &bc, &g_srv.gens[0], err, sizeof err);
        if (rc == SNUG_OK) {
            g_srv.batched = true;
            made = 1;
        } else if (rc == SNUG_ERR_UNSUPPORTED) {
            fprintf(stderr, "snug serve: no batched decode for this model (%s)\n", err);
        } else {
            fprintf(stderr, "snug serve: %s\n", err);
            status = 1;
        }
    }
    if (!g_srv.batched)
        threads = threads_given ? threads_given : cores / parallel < 1 ? 1 : cores / parallel;
    snug_generator_config cfg = {.ctx = ctx, .batch = batch, .threads = (int)threads, .weights_load = load,
                                 .chat_template_path = tmpl, .config = kv, .n_config = nkv,
                                 .log = cli_log, .log_user = "serve"};
    for (; !status && !g_srv.batched && made < parallel; made++) {
        char err[1024];
        if (!g_srv.quiet)
            fprintf(stderr, "%ssnug serve: loading slot %d of %ld%s", tty ? "\r" : "", made + 1, parallel,
                    tty ? "" : "\n");
        if (snug_generator_create(dir, &cfg, &g_srv.gens[made], err, sizeof err) != SNUG_OK) {
            fprintf(stderr, "%ssnug serve: %s\n", g_srv.quiet || !tty ? "" : "\n", err);
            status = 1;
            break;
        }
    }
    if (!g_srv.quiet && !status && tty)
        fputc('\n', stderr);
    if (!status)
        g_srv.has_template = snug_generator_has_chat_template(g_srv.gens[0]);
    if (!status && !g_srv.has_template) {
        const char *why = g_srv.template_why = snug_generator_chat_template_error(g_srv.gens[0]);
        fprintf(stderr, "snug serve: %s: /v1/chat/completions will answer 400 (/v1/completions works; "
                        "--chat-template FILE gives a template)\n",
                why ? why : "the model has no chat template");
    }
    int started = 0;
    struct MHD_Daemon *d = NULL;
    if (!status) {
        for (; started < (g_srv.batched ? 1 : parallel); started++)
            if (pthread_create(&g_srv.workers[started], NULL, g_srv.batched ? engine_main : worker_main,
                               (void *)(intptr_t)started)) {
                fprintf(stderr, "snug serve: cannot start slot %d's thread\n", started);
                status = 1;
                break;
            }
    }
    if (!status) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        signal(SIGPIPE, SIG_IGN);
        d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG,
                             0, NULL, NULL, on_request, NULL, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
                             MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_CONNECTION_TIMEOUT,
                             (unsigned)idle, MHD_OPTION_CONNECTION_LIMIT, (unsigned)(parallel + queue + 64),
                             MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_END);
        if (!d) {
            fprintf(stderr, "snug serve: cannot listen on %s:%ld: %s\n", host, port,
                    errno ? strerror(errno) : "the HTTP library refused");
            status = 1;
        }
    }
    if (!status) {
        if (g_srv.batched)
            fprintf(stderr, "snug serve: %s on http://%s:%ld/v1 (%ld slots of %lld tokens decoded together, %ld "
                    "thread%s, queue %ld)\n", name, host, port, parallel, (long long)ctx, threads,
                    threads == 1 ? "" : "s", queue);
        else
            fprintf(stderr, "snug serve: %s on http://%s:%ld/v1 (%ld slot%s of %lld tokens%s, %ld thread%s each, "
                    "queue %ld)\n", name, host, port, parallel, parallel == 1 ? "" : "s", (long long)ctx,
                    parallel > 1 ? ", a generator per slot" : "", threads, threads == 1 ? "" : "s", queue);
        while (!g_signals)
            pause();
        /* drain: no new requests; the queued and running ones finish (a second signal cancels them) */
        fprintf(stderr, "snug serve: shutting down: finishing %d running and %d waiting request(s)\n", g_srv.busy,
                g_srv.queued);
        pthread_mutex_lock(&g_srv.mu);
        g_srv.draining = true;
        double until = now_s() + timeout;
        while ((g_srv.busy || g_srv.queued || g_srv.active) && g_signals < 2 && now_s() < until) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            pthread_cond_timedwait(&g_srv.cv, &g_srv.mu, &ts);
        }
        for (job *j = g_srv.head; j; j = j->next) { /* left only after a second signal or the timeout */
            pthread_mutex_lock(&j->mu);
            j->cancelled = true;
            pthread_mutex_unlock(&j->mu);
        }
        pthread_mutex_unlock(&g_srv.mu);
    }
    pthread_mutex_lock(&g_srv.mu);
    g_srv.stopping = true;
    pthread_cond_broadcast(&g_srv.cv);
    pthread_mutex_unlock(&g_srv.mu);
    for (int i = 0; i < started; i++)
        pthread_join(g_srv.workers[i], NULL);
    if (d)
        MHD_stop_daemon(d); /* the connections end once their jobs have */
    for (int i = 0; i < made; i++)
        snug_generator_free(g_srv.gens[i]);
    free(g_srv.gens);
    free(g_srv.workers);
    free(g_srv.slot_jobs);
    free(g_srv.runs);
    if (!status)
        fprintf(stderr, "snug serve: stopped\n");
    return status;
}
