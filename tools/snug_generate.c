/* snug generate DIR -p TEXT: text in, text out, like `ollama run` or
 * llama.cpp's llama-cli (src/genai/generate.h does the work). */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli.h"
#include "snug.h" /* the public generator only: the future server is its other client */

static const char k_gen_help[] =
    "usage: snug generate MODEL_DIR [-p TEXT] [options]\n\n"
    "Generates text with the LLM in MODEL_DIR, a folder as onnxruntime-genai writes it\n"
    "(genai_config.json, model.onnx, tokenizer.json, tokenizer_config.json) or as\n"
    "Optimum does (config.json, generation_config.json, model.onnx, tokenizer files).\n"
    "With -p the answer to TEXT streams to stdout, then one line of figures to stderr.\n"
    "Without -p: an interactive chat that keeps the conversation in the KV cache\n"
    "(only the new turn is prefilled); /bye or end of input quits, Ctrl-C stops the\n"
    "current answer.\n\n"
    "  -p, --prompt TEXT   the prompt ('-': read it from stdin)\n"
    "  --system TEXT       a system message before the prompt\n"
    "  --no-chat           send the prompt as raw text (no chat template; the\n"
    "                      tokenizer's BOS as tokenizer(text) adds it)\n"
    "  --chat-template F   a Jinja chat template file instead of the model's\n"
    "  -n, --max-tokens N  stop after N tokens (default: until EOS or the context)\n"
    "  --ctx N             context in tokens: the KV cache (default: the model's, at\n"
    "                      most 4096)\n"
    "  --batch N           prompt tokens per prefill step, at least 2 (default 512)\n"
    "  --temp T            temperature (default 0.8; 0: greedy, the most likely token)\n"
    "  --top-k K           keep the K most likely tokens (default 40; 0: all)\n"
    "  --top-p P           keep the smallest set reaching probability P (default 0.95)\n"
    "  --min-p P           drop tokens below P x the most likely's (default 0.05)\n"
    "  --repeat-penalty R  penalize the last 64 tokens (default 1.0: off)\n"
    "  --seed S            seed of the sampler (default 0; the same seed, the same text)\n"
    "  --stop TEXT         stop when TEXT appears (repeatable; TEXT is not printed)\n"
    "  --threads N         worker threads (default: all cores)\n"
    CLI_PLACEMENT_HELP
    "  --weights MODE      map (default) or load (read into owned memory)\n"
    "  --mem host=SIZE     the most memory the model may hold (weights, KV cache,\n"
    "                      activations): the layers that do not fit stream from\n"
    "                      the file while the ones before compute (docs/streaming.md)\n"
    "  --prefetch N        staging slots for streamed layers (default 2)\n"
    "  --print-ids         the answer's token ids to stderr: [ids 1 2 ...]\n"
    "  -q, --quiet         no figures line\n";

static volatile sig_atomic_t g_interrupted;

/* Config entries for the generator's session (--config, and the placement options). */
static const char *g_config[2 * 64];
static void add_config(snug_generator_config *c, const char *k, const char *v) {
    if (c->n_config == 64)
        cli_die_usage("generate", "at most 64 config entries");
    g_config[2 * c->n_config] = k;
    g_config[2 * c->n_config + 1] = v;
    c->n_config++;
    c->config = g_config;
}



static void on_sigint(int sig) {
    (void)sig;
    g_interrupted = 1;
}

static int print_piece(void *user, const char *text, size_t len) {
    (void)user;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return g_interrupted ? 1 : 0;
}

static float parse_float(const char *opt, const char *v, float lo, float hi) {
    char *end;
    float x = v ? strtof(v, &end) : 0;
    if (!v || !*v || *end || !(x >= lo && x <= hi)) {
        char m[160];
        snprintf(m, sizeof m, "%s wants a number from %g to %g, got '%s'", opt, (double)lo, (double)hi, v ? v : "");
        cli_die_usage("generate", m);
    }
    return x;
}

/* All of stdin (a prompt given as -p -). */
static char *read_stdin(void) {
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    for (size_t r; b && (r = fread(b + n, 1, cap - n - 1, stdin)) > 0;) {
        n += r;
        if (cap - n < 2) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) {
                free(b);
                return NULL;
            }
            b = nb;
        }
    }
    if (b)
        b[n] = 0;
    return b;
}

static const char *stop_name(int stop) {
    static const char *const names[] = {"eos", "length", "stop string", "context full", "cancelled"};
    return stop >= 0 && stop < (int)(sizeof names / sizeof *names) ? names[stop] : "?";
}

/* The streaming part of the figures line: the layers streamed, the bytes a
 * step reads of them, the rate this answer read them at and how long its
 * runs waited (before: the counters when the answer began). */
static void stream_figures(const snug_stream_stats *before, const snug_stream_stats *now, char *buf, size_t cap) {
    buf[0] = 0;
    if (!now->budget || now->first_streamed >= now->n_layers)
        return;
    char a[64], b[64];
    uint64_t read = now->bytes_read - before->bytes_read;
    cli_human_bytes((double)now->sweep_bytes, a, sizeof a);
    double rs = now->read_s - before->read_s;
    cli_human_bytes(rs > 0 ? (double)read / rs : 0, b, sizeof b);
    snprintf(buf, cap, " | streamed layers %d-%d: %s a step, read at %s/s, stalled %.0f ms", now->first_streamed,
             now->n_layers - 1, a, b, (now->stall_s - before->stall_s) * 1e3);
}

/* The accelerator's part of the figures line: layers, what the plan holds
 * there and the most its backend held. */
static void device_figures(const snug_generator *g, char *buf, size_t cap) {
    buf[0] = 0;
    const snug_session *s = snug_generator_session(g);
    snug_device_info di;
    if (!s || snug_session_device_count(s) < 2 || snug_session_device_info(s, 1, &di) != SNUG_OK)
        return;
    snug_session_stats st;
    snug_session_get_stats(s, &st);
    char a[64], b[64];
    cli_human_bytes((double)st.device_bytes, a, sizeof a);
    cli_human_bytes((double)di.peak, b, sizeof b);
    snprintf(buf, cap, " | %s: %d layers, %d nodes, planned %s, peak %s", di.name, di.n_layers, di.n_nodes, a, b);
}

static void print_figures(const snug_generation *r, const char *extra) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    char rss[64];
    cli_human_bytes((double)ru.ru_maxrss * 1024.0, rss, sizeof rss);
    double dec = r->generated > 1 && r->decode_s > 0 ? (double)(r->generated - 1) / r->decode_s : 0;
    fprintf(stderr,
            "\n[prompt %lld tokens (%lld prefilled) %.1f tok/s | generated %lld tokens %.1f tok/s | first token "
            "%.0f ms | peak RSS %s%s | stop: %s]\n",
            (long long)r->prompt_tokens, (long long)r->prefilled,
            r->prefill_s > 0 ? (double)r->prefilled / r->prefill_s : 0.0, (long long)r->generated, dec,
            r->ttft_s * 1e3, rss, extra, stop_name(r->stop));
}

static bool g_print_ids;

/* The figures line (unless quiet), then the ids if asked for. */
static void answer_figures(const snug_generator *g, const snug_stream_stats *before, const snug_generation *r,
                           bool quiet) {
    snug_stream_stats now;
    snug_generator_stream_stats(g, &now);
    char extra[640], dev[384];
    stream_figures(before, &now, extra, 256);
    device_figures(g, dev, sizeof dev);
    strncat(extra, dev, sizeof extra - strlen(extra) - 1);
    if (!quiet)
        print_figures(r, extra);
    if (g_print_ids) {
        const int32_t *ids;
        int64_t n = snug_generator_answer_ids(g, &ids);
        fputs("[ids", stderr);
        for (int64_t k = 0; k < n; k++)
            fprintf(stderr, " %d", ids[k]);
        fputs("]\n", stderr);
    }
}

typedef struct conv {
    snug_message *m;
    char **own; /* owned copies of the texts */
    int n, cap;
} conv;

static int conv_add(conv *c, const char *role, const char *text, size_t len) {
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 8;
        snug_message *m = realloc(c->m, sizeof *m * (size_t)cap);
        char **o = realloc(c->own, sizeof *o * (size_t)cap);
        if (m)
            c->m = m;
        if (o)
            c->own = o;
        if (!m || !o)
            return -1;
        c->cap = cap;
    }
    char *t = malloc(len + 1);
    if (!t)
        return -1;
    memcpy(t, text, len);
    t[len] = 0;
    c->own[c->n] = t;
    c->m[c->n] = (snug_message){role, t};
    c->n++;
    return 0;
}

static void conv_free(conv *c) {
    for (int i = 0; i < c->n; i++)
        free(c->own[i]);
    free(c->m);
    free(c->own);
}

/* The answer as text, for the conversation's next turn. */
typedef struct answer {
    char *b;
    size_t n, cap;
} answer;

static int collect_piece(void *user, const char *text, size_t len) {
    answer *a = user;
    if (a->n + len + 1 > a->cap) {
        size_t cap = (a->n + len + 1) * 2;
        char *nb = realloc(a->b, cap);
        if (nb) {
            a->b = nb;
            a->cap = cap;
        }
    }
    if (a->n + len + 1 <= a->cap) {
        memcpy(a->b + a->n, text, len);
        a->n += len;
        a->b[a->n] = 0;
    }
    return print_piece(NULL, text, len);
}

/* One turn: the conversation (or raw text); the generator prefills only what it has not cached. */
static int turn(snug_generator *g, const conv *c, const char *raw, const snug_sampling *sp, answer *ans,
                snug_generation *res) {
    snug_text_fn fn = ans ? collect_piece : print_piece;
    return raw ? snug_generator_complete(g, raw, sp, fn, ans, res) : snug_generator_chat(g, c->m, c->n, sp, fn, ans, res);
}

int cmd_generate(int argc, char **argv) {
    const char *dir = NULL, *prompt = NULL, *system = NULL;
    const char *stops[16];
    int n_stop = 0;
    bool chat = true, quiet = false;
    snug_generator_config cfg = {.log = cli_log, .log_user = "generate"};
    cli_placement place = {0};
    snug_sampling gp;
    snug_sampling_defaults(&gp);
    gp.stop = stops;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(k_gen_help, stdout);
            return 0;
        }
        bool takes = true;
        if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            if (!v)
                cli_die_usage("generate", "-p needs the prompt text ('-' for stdin)");
            prompt = v;
        } else if (!strcmp(a, "--system")) {
            if (!v)
                cli_die_usage("generate", "--system needs a text");
            system = v;
        } else if (!strcmp(a, "--chat-template")) {
            if (!v)
                cli_die_usage("generate", "--chat-template needs a file");
            cfg.chat_template_path = v;
        } else if (!strcmp(a, "--stop")) {
            if (!v || !*v)
                cli_die_usage("generate", "--stop needs a non-empty text");
            if (n_stop == 16)
                cli_die_usage("generate", "at most 16 --stop strings");
            stops[n_stop++] = v;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--max-tokens")) {
            gp.max_tokens = cli_parse_long("generate", a, v, 1, 1L << 30);
        } else if (!strcmp(a, "--ctx")) {
            cfg.ctx = cli_parse_long("generate", a, v, 2, 1L << 24);
        } else if (!strcmp(a, "--batch")) {
            cfg.batch = cli_parse_long("generate", a, v, 2, 1L << 20);
        } else if (cli_placement_arg("generate", a, v, &place)) {
        } else if (!strcmp(a, "--threads")) {
            cfg.threads = (int)cli_parse_long("generate", a, v, 1, 1024);
        } else if (!strcmp(a, "--temp")) {
            gp.temperature = parse_float(a, v, 0, 100);
        } else if (!strcmp(a, "--top-k")) {
            gp.top_k = (int)cli_parse_long("generate", a, v, 0, 1L << 24);
        } else if (!strcmp(a, "--top-p")) {
            gp.top_p = parse_float(a, v, 0, 1);
        } else if (!strcmp(a, "--min-p")) {
            gp.min_p = parse_float(a, v, 0, 1);
        } else if (!strcmp(a, "--repeat-penalty")) {
            gp.repeat_penalty = parse_float(a, v, 0.01f, 100);
        } else if (!strcmp(a, "--seed")) {
            gp.seed = (uint64_t)cli_parse_long("generate", a, v, 0, 0x7fffffffL);
        } else if (!strcmp(a, "--weights")) {
            if (!v || (strcmp(v, "map") && strcmp(v, "load")))
                cli_die_usage("generate", "--weights is map or load");
            cfg.weights_load = !strcmp(v, "load");
        } else if (!strcmp(a, "--mem")) {
            bool dev;
            cfg.mem_host = cli_mem_budget("generate", v, &dev);
        } else if (!strcmp(a, "--config")) {
            char *eq = v ? strchr(v, '=') : NULL;
            if (!eq || eq == v)
                cli_die_usage("generate", "--config takes KEY=VALUE");
            *eq = 0;
            add_config(&cfg, v, eq + 1);
        } else if (!strcmp(a, "--prefetch")) {
            cfg.prefetch_layers = (int)cli_parse_long("generate", a, v, 2, 64);
        } else {
            takes = false;
            if (!strcmp(a, "--no-chat"))
                chat = false;
            else if (!strcmp(a, "-q") || !strcmp(a, "--quiet"))
                quiet = true;
            else if (!strcmp(a, "--print-ids"))
                g_print_ids = true;
            else if (a[0] == '-' && a[1]) {
                char m[160];
                snprintf(m, sizeof m, "unknown option '%s'", a);
                cli_die_usage("generate", m);
            } else if (dir) {
                cli_die_usage("generate", "one model folder only");
            } else {
                dir = a;
            }
        }
        if (takes)
            i++;
    }
    gp.n_stop = n_stop;
    if (!dir)
        cli_die_usage("generate", "no model folder given");
    char *stdin_prompt = NULL;
    if (prompt && !strcmp(prompt, "-")) {
        if (!(stdin_prompt = read_stdin())) {
            fprintf(stderr, "snug generate: cannot read the prompt from stdin\n");
            return 1;
        }
        prompt = stdin_prompt;
    }
    if (prompt && !prompt[strspn(prompt, " \t\r\n")]) {
        fprintf(stderr, "snug generate: the prompt is empty\n");
        free(stdin_prompt);
        return 2;
    }
    char err[1024];
    snug_generator *g = NULL;
    for (int k = 0; k < place.n; k++) /* after --config's entries: a later set wins */
        add_config(&cfg, place.kv[2 * k], place.kv[2 * k + 1]);
    int rc0 = snug_generator_create(dir, &cfg, &g, err, sizeof err);
    if (rc0 != SNUG_OK) {
        fprintf(stderr, "snug generate: %s\n", err);
        free(stdin_prompt);
        return 1;
    }
    if (chat && !snug_generator_has_chat_template(g)) { /* the prompt goes as raw text */
        const char *why = snug_generator_chat_template_error(g);
        if (why)
            fprintf(stderr, "snug generate: the chat template cannot be rendered (%s): the prompt goes as raw text "
                            "(--chat-template FILE gives another)\n", why);
        else
            fprintf(stderr, "snug generate: %s has no chat template: the prompt goes as raw text "
                            "(--chat-template FILE gives one)\n", dir);
        chat = false;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    conv c = {0};
    int status = 0;
    if (system && chat && conv_add(&c, "system", system, strlen(system)) != 0)
        status = 1;
    if (prompt && !status) { /* one answer */
        snug_generation res;
        snug_stream_stats sb;
        snug_generator_stream_stats(g, &sb);
        if (chat && conv_add(&c, "user", prompt, strlen(prompt)) != 0) {
            fprintf(stderr, "snug generate: out of memory\n");
            status = 1;
        } else if (turn(g, &c, chat ? NULL : prompt, &gp, NULL, &res) != SNUG_OK) {
            fprintf(stderr, "\nsnug generate: %s\n", snug_generator_error(g));
            status = 1;
        } else {
            fputc('\n', stdout);
            answer_figures(g, &sb, &res, quiet);
        }
    } else if (!status) { /* a chat */
        bool tty = isatty(0);
        char line[65536];
        for (;;) {
            if (tty)
                fputs("\n>>> ", stdout), fflush(stdout);
            g_interrupted = 0;
            if (!fgets(line, sizeof line, stdin))
                break;
            size_t len = strlen(line);
            while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
                line[--len] = 0;
            if (!len)
                continue;
            if (!strcmp(line, "/bye") || !strcmp(line, "/exit"))
                break;
            answer ans = {0};
            snug_generation res;
            snug_stream_stats sb;
            if (chat && conv_add(&c, "user", line, len) != 0) {
                status = 1;
                break;
            }
            int rc = turn(g, &c, chat ? NULL : line, &gp, &ans, &res);
            if (rc == SNUG_ERR_RANGE && chat && c.n > 1 + (system != NULL)) {
                /* the conversation outgrew the context: start over from this message */
                fprintf(stderr, "(the earlier turns no longer fit the context of --ctx tokens: forgotten)\n");
                snug_generator_reset(g);
                conv_free(&c);
                memset(&c, 0, sizeof c);
                if ((system && conv_add(&c, "system", system, strlen(system)) != 0) ||
                    conv_add(&c, "user", line, len) != 0) {
                    status = 1;
                    break;
                }
                free(ans.b);
                memset(&ans, 0, sizeof ans);
                snug_generator_stream_stats(g, &sb);
                rc = turn(g, &c, NULL, &gp, &ans, &res);
            }
            if (rc != SNUG_OK) {
                fprintf(stderr, "\nsnug generate: %s\n", snug_generator_error(g));
                free(ans.b);
                if (rc == SNUG_ERR_RANGE) { /* this message alone does not fit: the next may */
                    if (chat)
                        c.n--, free(c.own[c.n]);
                    continue;
                }
                status = 1;
                break;
            }
            fputc('\n', stdout);
            answer_figures(g, &sb, &res, quiet);
            if (chat && conv_add(&c, "assistant", ans.b ? ans.b : "", ans.n) != 0)
                status = 1;
            free(ans.b);
            if (status)
                break;
        }
    }
    conv_free(&c);
    snug_generator_free(g);
    free(stdin_prompt);
    return status;
}

