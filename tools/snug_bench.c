/* snug bench: prefill and decode speed of an LLM, time to first token, peak
 * RSS; and (--bandwidth) the machine's memory read bandwidth. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "cli.h"
#include "snug.h"

int cmd_bench(int argc, char **argv);

static const char k_bench_help[] =
    "usage: snug bench MODEL.onnx [options]\n"
    "       snug bench --bandwidth [--threads T] [--json]\n\n"
    "Measures an LLM decoder (inputs input_ids, attention_mask, [position_ids],\n"
    "past_key_values.N.key/value; outputs logits, present.N.key/value: Optimum and\n"
    "onnxruntime-genai exports) with the KV cache carried between steps. Each round\n"
    "starts from an empty cache, prefills --prompt tokens in one step and decodes\n"
    "--gen tokens one at a time. Token ids are pseudo-random below the vocabulary\n"
    "size (xorshift64 from --seed: the first N are the prompt, the next M are fed\n"
    "to the decode steps), so every round and every runtime sees the same ids.\n\n"
    "Reported (median over the measured rounds, min and max beside it):\n"
    "  prefill tok/s   prompt tokens / time of the prefill step\n"
    "  TTFT            time to first token: the prefill step plus the argmax\n"
    "  decode tok/s    decoded tokens / time of the decode steps\n"
    "  CPU time        CPU seconds of all threads during prefill and per decode\n"
    "                  token (on a busy machine steadier than wall time)\n"
    "  peak RSS        the process's maximum resident set (getrusage), whole run\n"
    "  memory          the measured RSS growth (peak minus the RSS before loading,\n"
    "                  without the program's own code pages) beside two figures:\n"
    "                  estimated, before planning (the plan at the bounds run dry:\n"
    "                  no weight read or packed), and accounted, after planning\n"
    "                  (what the plan made, and the allocator's high-water mark):\n"
    "                  weights mapped and touched, weights held as copies or packed\n"
    "                  by kernels, arena, KV cache, the library's other heap;\n"
    "                  allocations made during the decode steps\n"
    "  weights         initializer bytes in the model file (mapped, or read into owned\n"
    "                  memory with --weights load), and\n"
    "                  the bytes a decode step reads (all but embedding tables that\n"
    "                  are only gathered)\n\n"
    "options:\n"
    "  --prompt N      prompt tokens (default 128)\n"
    "  --gen M         decoded tokens per round (default 32)\n"
    "  --threads T     worker threads (default: all cores)\n"
    "  --rounds R      measured rounds (default 3)\n"
    "  --warmup W      unmeasured rounds before them (default 1)\n"
    "  --ctx N         KV cache capacity in tokens (default prompt + gen)\n"
    "  --seed S        seed of the token ids (default 1)\n"
    "  --weights MODE  map (default): weights are read through a map of the model\n"
    "                  file, so what a read fault makes resident depends on the\n"
    "                  page cache; load: weights are read from the file into\n"
    "                  snug's own memory, nothing is mapped, and the measured\n"
    "                  peak is what the plan holds (config snug.weights)\n"
    "  --mem host=SIZE the most the plan may hold on the host (snug.mem.host):\n"
    "                  the layers that do not fit stream from the file, and the\n"
    "                  figures add the bytes streamed per decode token, the\n"
    "                  time waiting for them, and the I/O bound: the streamed\n"
    "                  layers read once alone, cold, as the prefetcher reads\n"
    "                  them, and the decode speed that allows (docs/streaming.md)\n"
    "  --prefetch N    staging slots for streamed layers (snug.prefetch_layers)\n"
    CLI_PLACEMENT_HELP
    "  --config K=V    a session config entry, e.g. session.set_denormal_as_zero=0\n"
    "                  (docs/config.md); may be given more than once\n"
    "  --json          one JSON object on stdout instead of the table\n"
    "  --ops           also time every node of the measured rounds and print the\n"
    "                  time per operator type: per prefill step and per decode\n"
    "                  token, with its share (in --json: \"ops\")\n"
    "  --nodes N       also time every node and list the N slowest, by name and\n"
    "                  operator type, per prefill step and per decode token (in\n"
    "                  --json: \"nodes\"); with --ops, both tables\n"
    "  --slots N       batched decode instead: N sequences in one KV cache, each\n"
    "                  prefilled with its own --prompt ids (in chunks of 32), then\n"
    "                  --gen decode steps that advance all N in one model run;\n"
    "                  beside it the same steps with one sequence in the same\n"
    "                  cache. Reports ms per step and generated tok/s for 1 and N,\n"
    "                  and their ratio (models with an attention_mask, docs/serve.md;\n"
    "                  --ctx is per sequence); with --ops, the time per operator\n"
    "                  type of a step of each\n"
    "  --bandwidth     measure memory read bandwidth instead: T threads sum a\n"
    "                  256 MiB float array (STREAM-style, best of 10 passes);\n"
    "                  takes no MODEL\n"
    "  -h, --help      this text\n\n"
    "Exit status: 0 on success, 1 when the model cannot be loaded or run, 2 on\n"
    "bad usage.\n";

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* CPU seconds of the whole process (all threads). */
static double cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static size_t peak_rss_bytes(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (size_t)ru.ru_maxrss * 1024; /* KiB on Linux */
}

static uint64_t xorshift64(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Index of the largest of n floats (the first on ties). */
static int64_t argmax(const float *x, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        best = x[i] > x[best] ? i : best;
    return best;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct stat3 {
    double med, min, max;
} stat3;

static stat3 stats_of(const double *v, int n) {
    double tmp[1024];
    int m = n < 1024 ? n : 1024;
    memcpy(tmp, v, sizeof *tmp * (size_t)m);
    qsort(tmp, (size_t)m, sizeof *tmp, cmp_double);
    stat3 s = {0, 0, 0};
    if (m) {
        s.min = tmp[0];
        s.max = tmp[m - 1];
        s.med = m % 2 ? tmp[m / 2] : 0.5 * (tmp[m / 2 - 1] + tmp[m / 2]);
    }
    return s;
}

static long parse_count(const char *opt, const char *val, long lo, long hi) {
    char *end;
    errno = 0;
    long v = val ? strtol(val, &end, 10) : 0;
    if (!val || !*val || *end || errno || v < lo || v > hi) {
        char m[200];
        if (val)
            snprintf(m, sizeof m, "%s takes an integer in %ld..%ld, got '%s'", opt, lo, hi, val);
        else
            snprintf(m, sizeof m, "%s takes an integer in %ld..%ld, and none was given", opt, lo, hi);
        cli_die_usage("bench", m);
    }
    return v;
}

/* A /proc/self/status figure in bytes ("VmRSS", "VmHWM"), 0 if unknown. */
static size_t proc_status_bytes(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return 0;
    char line[256];
    size_t klen = strlen(key), kib = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, klen) && line[klen] == ':') {
            kib = (size_t)strtoull(line + klen + 1, NULL, 10);
            break;
        }
    fclose(f);
    return kib * 1024;
}

/* Makes every page of the files mapped now (the program, its libraries)
 * resident, so that the RSS taken as the base already holds the code and
 * read-only data the run will execute: how many of those pages a run faults
 * in on its own depends on the kernel's fault-around, not on the plan. */
__attribute__((no_sanitize_address)) /* reads the program's own data pages, redzones included */
static void touch_program_pages(void) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi, off;
        char perm[8];
        const char *path = strchr(line, '/');
        struct stat st;
        if (sscanf(line, "%lx-%lx %7s %lx", &lo, &hi, perm, &off) != 4 || perm[0] != 'r' || !path)
            continue;
        line[strcspn(line, "\n")] = 0;
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue; /* devices and the like: not program pages */
        unsigned long pg = (unsigned long)sysconf(_SC_PAGESIZE);
        for (unsigned long a = lo; a < hi && off + (a - lo) < (unsigned long)st.st_size; a += pg)
            (void)*(volatile const char *)a; /* never past the file's end (SIGBUS) */
    }
    fclose(f);
}

/* Resident bytes of the file mappings whose path starts with dir (the
 * model file and its external data). */
static size_t mapped_rss_under(const char *dir) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return 0;
    char line[4096];
    size_t dlen = strlen(dir), total = 0;
    bool in = false;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) { /* a mapping's header line */
            const char *path = strchr(line, '/');
            in = path && !strncmp(path, dir, dlen);
        } else if (in && !strncmp(line, "Rss:", 4)) {
            total += (size_t)strtoull(line + 4, NULL, 10) * 1024;
        }
    }
    fclose(f);
    return total;
}

/* ---- memory bandwidth ------------------------------------------------------ */

/* T threads (the caller one of them) each sum their slice of the array
 * per pass, between two barriers; the workers wait for go (1: all T
 * started, -1: some could not be, leave) before the first. */
typedef struct bw_job {
    const float *a;
    int64_t n;        /* floats */
    int threads, passes;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int go;
    pthread_barrier_t start, end;
    float sums[1024]; /* one per thread */
} bw_job;

typedef struct bw_worker_arg {
    bw_job *j;
    int t;
} bw_worker_arg;

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static float sum_avx2(const float *a, int64_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_add_ps(s0, _mm256_loadu_ps(a + i));
        s1 = _mm256_add_ps(s1, _mm256_loadu_ps(a + i + 8));
        s2 = _mm256_add_ps(s2, _mm256_loadu_ps(a + i + 16));
        s3 = _mm256_add_ps(s3, _mm256_loadu_ps(a + i + 24));
    }
    float t[8];
    _mm256_storeu_ps(t, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    float s = t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
    for (; i < n; i++)
        s += a[i];
    return s;
}
#endif

static float sum_plain(const float *a, int64_t n) {
    float s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            s[k] += a[i + k];
    float r = s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
    for (; i < n; i++)
        r += a[i];
    return r;
}

static void bw_sum_slice(bw_job *j, int t) {
    int64_t b = j->n * t / j->threads, e = j->n * (t + 1) / j->threads;
    float s;
#if defined(__x86_64__) && defined(__GNUC__)
    s = __builtin_cpu_supports("avx2") ? sum_avx2(j->a + b, e - b) : sum_plain(j->a + b, e - b);
#else
    s = sum_plain(j->a + b, e - b);
#endif
    j->sums[t] += s;
}

static void *bw_worker(void *arg) {
    bw_worker_arg *w = arg;
    pthread_mutex_lock(&w->j->mu);
    while (!w->j->go)
        pthread_cond_wait(&w->j->cv, &w->j->mu);
    pthread_mutex_unlock(&w->j->mu);
    for (int p = 0; w->j->go > 0 && p < w->j->passes; p++) {
        pthread_barrier_wait(&w->j->start);
        bw_sum_slice(w->j, w->t);
        pthread_barrier_wait(&w->j->end);
    }
    return NULL;
}

/* Best read bandwidth in bytes/s over `passes` passes of `bytes` on
 * `threads` threads; 0 when the buffer cannot be allocated, -1 when the
 * threads cannot be started. */
static double measure_bandwidth(int threads, size_t bytes, int passes) {
    bw_job *j = calloc(1, sizeof *j);
    float *a = malloc(bytes);
    pthread_t *tid = calloc((size_t)threads, sizeof *tid);
    bw_worker_arg *args = calloc((size_t)threads, sizeof *args);
    double best = 0;
    int started = 1;
    if (!j || !a || !tid || !args)
        goto done;
    j->a = a;
    j->n = (int64_t)(bytes / sizeof(float));
    j->threads = threads;
    j->passes = passes;
    for (int64_t i = 0; i < j->n; i++)
        a[i] = (float)(i & 7);
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    pthread_barrier_init(&j->start, NULL, (unsigned)threads);
    pthread_barrier_init(&j->end, NULL, (unsigned)threads);
    for (; started < threads; started++) {
        args[started] = (bw_worker_arg){j, started};
        if (pthread_create(&tid[started], NULL, bw_worker, &args[started]) != 0)
            break;
    }
    pthread_mutex_lock(&j->mu);
    j->go = started == threads ? 1 : -1;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    for (int p = 0; j->go > 0 && p < passes; p++) {
        double t0 = now_s();
        pthread_barrier_wait(&j->start);
        bw_sum_slice(j, 0);
        pthread_barrier_wait(&j->end);
        double dt = now_s() - t0;
        if (dt > 0 && (double)bytes / dt > best)
            best = (double)bytes / dt;
    }
    for (int t = 1; t < started; t++)
        pthread_join(tid[t], NULL);
    pthread_barrier_destroy(&j->start);
    pthread_barrier_destroy(&j->end);
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    volatile float sink = j->sums[0];
    (void)sink;
    if (j->go < 0)
        best = -1;
done:
    free(args);
    free(tid);
    free(a);
    free(j);
    return best;
}

static int bench_bandwidth(int threads, bool json) {
    size_t bytes = (size_t)256 << 20;
    double bw = measure_bandwidth(threads, bytes, 10);
    if (bw < 0) {
        fprintf(stderr, "snug bench: cannot start %d threads\n", threads);
        return 1;
    }
    if (bw == 0) {
        fprintf(stderr, "snug bench: cannot allocate the %zu-byte bandwidth buffer\n", bytes);
        return 1;
    }
    if (json)
        printf("{\"threads\": %d, \"buffer_bytes\": %zu, \"read_bandwidth_bytes_per_s\": %.0f}\n", threads, bytes, bw);
    else
        printf("read bandwidth  %.2f GB/s (%d threads, %zu MiB buffer, best of 10)\n", bw / 1e9, threads,
               bytes >> 20);
    return 0;
}

/* ---- the LLM benchmark ----------------------------------------------------- */

/* --ops: time per operator type, seconds per prefill step and per decode
 * token, largest shares first. */
typedef struct op_row {
    const char *op;
    double pre, dec;
} op_row;

static double op_tot_pre, op_tot_dec;

/* The sort key of --ops and --nodes: share of a prefill plus share of a
 * decode token (op_rows sets the totals first). */
static double time_share(double pre, double dec) {
    return (op_tot_pre > 0 ? pre / op_tot_pre : 0) + (op_tot_dec > 0 ? dec / op_tot_dec : 0);
}

static int op_row_cmp(const void *a, const void *b) {
    const op_row *x = a, *y = b;
    double sx = time_share(x->pre, x->dec), sy = time_share(y->pre, y->dec);
    return sx < sy ? 1 : sx > sy ? -1 : strcmp(x->op, y->op);
}

/* --nodes: the slowest nodes (the same order: share of prefill plus share
 * of decode); node: its index in the graph. */
typedef struct node_row {
    int node;
    double pre, dec;
} node_row;

static int node_row_cmp(const void *a, const void *b) {
    const node_row *x = a, *y = b;
    double sx = time_share(x->pre, x->dec), sy = time_share(y->pre, y->dec);
    return sx < sy ? 1 : sx > sy ? -1 : x->node - y->node;
}

/* All nodes sorted, slowest first (op_rows sets the totals first). */
static void node_rows(int n_nodes, const double *t, long rounds, long gen, node_row *rows) {
    for (int i = 0; i < n_nodes; i++)
        rows[i] = (node_row){i, t[i] / (double)rounds, gen ? t[n_nodes + i] / (double)(rounds * gen) : 0};
    qsort(rows, (size_t)n_nodes, sizeof *rows, node_row_cmp);
}

/* JSON string body (quotes and backslashes escaped, control bytes as \u). */
/* "name": {the figures of m}, */
static void json_mem(const char *name, const snug_memory *m) {
    printf("\"%s\": {\"weights_read\": %llu, \"weights_gathered\": %llu, \"weights_copied\": %llu, "
           "\"packed\": %llu, \"staging\": %llu, \"arena\": %llu, \"lower_bound\": %llu, \"kv\": %llu, \"folded\": %llu, "
           "\"driver\": %llu, \"other_heap\": %llu, \"total\": %llu}, ",
           name, (unsigned long long)m->weights_read, (unsigned long long)m->weights_gathered,
           (unsigned long long)m->weights_copied, (unsigned long long)m->packed, (unsigned long long)m->staging,
           (unsigned long long)m->arena,
           (unsigned long long)m->lower_bound, (unsigned long long)m->kv, (unsigned long long)m->folded,
           (unsigned long long)m->driver, (unsigned long long)m->other_heap, (unsigned long long)m->total);
}

static int op_rows(const snug_model *m, const double *t, long rounds, long gen, op_row *rows) {
    snug_model_info mi;
    snug_model_get_info(m, &mi);
    int n = 0, nn = mi.n_nodes;
    op_tot_pre = op_tot_dec = 0;
    for (int i = 0; i < nn; i++) {
        snug_node_info nd;
        snug_model_node(m, i, &nd);
        const char *op = nd.op;
        int k = 0;
        while (k < n && strcmp(rows[k].op, op))
            k++;
        if (k == n)
            rows[n++] = (op_row){op, 0, 0};
        double pre = t[i] / (double)rounds, dec = gen ? t[nn + i] / (double)(rounds * gen) : 0;
        rows[k].pre += pre;
        rows[k].dec += dec;
        op_tot_pre += pre;
        op_tot_dec += dec;
    }
    qsort(rows, (size_t)n, sizeof *rows, op_row_cmp);
    return n;
}

/* --slots: decode steps of one sequence and of `slots` in one cache,
 * alternating round by round, medians of ms per step. */
static int bench_slots(const char *path, snug_options *opts, int slots, long prompt, long gen, long rounds,
                       long warmup, long ctx, uint64_t seed, long threads, bool json, bool ops) {
    char err[1024];
    snug_session *s = NULL;
    snug_decoder *d = NULL;
    int64_t *ids = NULL, *in = NULL;
    int *sl = NULL;
    double *t1 = NULL, *tn = NULL, *op_t = NULL; /* op_t: per node, one sequence's steps then N's */
    op_row *op_tab = NULL;
    int status = 1, n_nodes = 0;
    int rc = snug_session_create(path, opts, &s, err, sizeof err);
    snug_options_free(opts);
    if (rc != SNUG_OK) {
        cli_model_error("bench", path, err);
        return 1;
    }
    long chunk = prompt < 32 ? prompt : 32;
    if (snug_decoder_new_slots(s, ctx, chunk, slots, &d) != SNUG_OK) {
        cli_model_error("bench", path, snug_session_error(s));
        goto done;
    }
    snug_decoder_info info;
    snug_decoder_get_info(d, &info);
    int64_t zero = 0;
    if (info.vocab < 1 && snug_decoder_prefill(d, &zero, 1, NULL) != SNUG_OK) {
        cli_model_error("bench", path, snug_session_error(s));
        goto done;
    }
    snug_decoder_get_info(d, &info);
    size_t per = (size_t)(prompt + gen);
    ids = malloc(sizeof *ids * per * (size_t)slots);
    in = malloc(sizeof *in * (size_t)slots);
    sl = malloc(sizeof *sl * (size_t)slots);
    t1 = calloc((size_t)rounds, sizeof *t1);
    tn = calloc((size_t)rounds, sizeof *tn);
    if (ops) {
        snug_model_info mi;
        snug_model_get_info(snug_session_model(s), &mi);
        n_nodes = mi.n_nodes;
        op_t = calloc(2 * (size_t)n_nodes + 1, sizeof *op_t);
        op_tab = calloc((size_t)n_nodes + 1, sizeof *op_tab);
    }
    if (!ids || !in || !sl || !t1 || !tn || (ops && (!op_t || !op_tab))) {
        fprintf(stderr, "snug bench: out of memory\n");
        goto done;
    }
    uint64_t st = 0x9E3779B97F4A7C15ull ^ seed;
    for (size_t i = 0; i < per * (size_t)slots; i++)
        ids[i] = (int64_t)((xorshift64(&st) >> 11) % (uint64_t)info.vocab);
    for (long r = -warmup; r < rounds; r++) {
        for (int pass = 0; pass < 2; pass++) { /* one sequence, then all of them */
            int n = pass ? slots : 1;
            for (int k = 0; k < slots; k++)
                snug_decoder_slot_reset(d, k);
            for (int k = 0; k < n; k++)
                for (long at = 0; at < prompt; at += chunk) {
                    long c = prompt - at < chunk ? prompt - at : chunk;
                    if (snug_decoder_slot_prefill(d, k, ids + (size_t)k * per + at, c, NULL) != SNUG_OK) {
                        fprintf(stderr, "snug bench: %s: prefill of slot %d: %s\n", path, k, snug_session_error(s));
                        goto done;
                    }
                }
            if (op_t && r >= 0)
                snug_session_time_nodes(s, op_t + (pass ? n_nodes : 0));
            double t0 = now_s();
            for (long g = 0; g < gen; g++) {
                for (int k = 0; k < n; k++) {
                    sl[k] = k;
                    in[k] = ids[(size_t)k * per + (size_t)(prompt + g)];
                }
                if (snug_decoder_decode_slots(d, n, sl, in, NULL) != SNUG_OK) {
                    fprintf(stderr, "snug bench: %s: decode step of %d: %s\n", path, n, snug_session_error(s));
                    goto done;
                }
            }
            double dt = now_s() - t0;
            snug_session_time_nodes(s, NULL);
            if (r >= 0)
                (pass ? tn : t1)[r] = gen ? dt * 1e3 / (double)gen : 0;
        }
    }
    stat3 a = stats_of(t1, (int)rounds), b = stats_of(tn, (int)rounds);
    double tok1 = a.med > 0 ? 1e3 / a.med : 0, tokn = b.med > 0 ? 1e3 * slots / b.med : 0;
    if (json) {
        printf("{\"model\": \"%s\", \"threads\": %ld, \"slots\": %d, \"prompt\": %ld, \"gen\": %ld, "
               "\"rounds\": %ld, \"ctx\": %ld, \"kv_bytes\": %zu, \"one\": {\"ms_per_step\": %.4f, \"tok_s\": %.3f}, "
               "\"batched\": {\"ms_per_step\": %.4f, \"tok_s\": %.3f}, \"ratio\": %.4f",
               path, threads, slots, prompt, gen, rounds, ctx, info.kv_bytes, a.med, tok1, b.med, tokn,
               tok1 > 0 ? tokn / tok1 : 0);
    } else {
        printf("model         %s\n", path);
        printf("setup         %d sequences of %ld prompt ids (chunks of %ld), %ld decode steps, %ld thread%s, "
               "%ld rounds; KV cache %.1f MiB (%ld tokens a sequence)\n", slots, prompt, chunk, gen, threads,
               threads == 1 ? "" : "s", rounds, (double)info.kv_bytes / (1 << 20), ctx);
        printf("                 ms/step (min..max)           tok/s\n");
        printf("one sequence   %8.3f (%.3f..%.3f)   %10.1f\n", a.med, a.min, a.max, tok1);
        printf("%3d sequences  %8.3f (%.3f..%.3f)   %10.1f\n", slots, b.med, b.min, b.max, tokn);
        printf("batched / one  %.2fx the tokens per second\n", tok1 > 0 ? tokn / tok1 : 0);
    }
    if (ops && gen > 0) { /* op_rows' two columns: the one sequence's steps, the N's */
        for (int i = 0; i < n_nodes; i++) /* op_rows divides column one by rounds, two by rounds x gen */
            op_t[i] /= (double)gen;
        int n_ops = op_rows(snug_session_model(s), op_t, rounds, gen, op_tab);
        if (json) {
            printf(", \"ops\": [");
            for (int k = 0; k < n_ops; k++) {
                printf("%s{\"op\": ", k ? ", " : "");
                snug_json_write_str(stdout, op_tab[k].op);
                printf(", \"one_ms_per_step\": %.6f, \"batched_ms_per_step\": %.6f}", op_tab[k].pre * 1e3,
                       op_tab[k].dec * 1e3);
            }
            printf("]");
        } else {
            printf("ops           time per operator type and decode step (all nodes of the type, wall time)\n");
            char lab[32];
            snprintf(lab, sizeof lab, "%d sequences", slots);
            printf("  %-26s %12s %7s %14s %7s %8s\n", "", "one sequence", "share", lab, "share", "N / one");
            int shown = n_ops < 12 ? n_ops : 12;
            for (int k = 0; k < shown; k++)
                printf("  %-26s %9.3f ms %6.1f%% %11.3f ms %6.1f%% %7.2fx\n", op_tab[k].op, op_tab[k].pre * 1e3,
                       op_tot_pre > 0 ? 100 * op_tab[k].pre / op_tot_pre : 0, op_tab[k].dec * 1e3,
                       op_tot_dec > 0 ? 100 * op_tab[k].dec / op_tot_dec : 0,
                       op_tab[k].pre > 0 ? op_tab[k].dec / op_tab[k].pre : 0);
            printf("  %-26s %9.3f ms %7s %11.3f ms\n", "all nodes", op_tot_pre * 1e3, "", op_tot_dec * 1e3);
        }
    }
    if (json)
        printf("}\n");
    status = 0;
done:
    free(ids);
    free(in);
    free(sl);
    free(t1);
    free(tn);
    free(op_t);
    free(op_tab);
    snug_decoder_free(d);
    snug_session_free(s);
    return status;
}

int cmd_bench(int argc, char **argv) {
    const char *path = NULL;
    long prompt = 128, gen = 32, threads = 0, rounds = 3, warmup = 1, ctx = 0;
    uint64_t seed = 1;
    bool json = false, bandwidth = false, ops = false;
    long top_nodes = 0, slots = 0;
    const char *weights = NULL;
    const char *cfg[64][2];
    cli_placement place = {0};
    int n_cfg = 0;
    char mem_host[32] = "", prefetch[16] = "";
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(k_bench_help, stdout);
            return 0;
        } else if (!strcmp(a, "--prompt")) {
            prompt = parse_count(a, val, 1, 1 << 20), i++;
        } else if (!strcmp(a, "--gen")) {
            gen = parse_count(a, val, 0, 1 << 20), i++;
        } else if (!strcmp(a, "--threads")) {
            threads = parse_count(a, val, 1, 1024), i++;
        } else if (!strcmp(a, "--rounds")) {
            rounds = parse_count(a, val, 1, 1000), i++;
        } else if (!strcmp(a, "--warmup")) {
            warmup = parse_count(a, val, 0, 1000), i++;
        } else if (!strcmp(a, "--ctx")) {
            ctx = parse_count(a, val, 1, 1 << 24), i++;
        } else if (!strcmp(a, "--seed")) {
            seed = (uint64_t)parse_count(a, val, 0, 0x7fffffffL), i++;
        } else if (!strcmp(a, "--weights")) {
            if (!val || (strcmp(val, "map") && strcmp(val, "load")))
                cli_die_usage("bench", "--weights takes map or load");
            weights = val, i++;
        } else if (cli_placement_arg("bench", a, val, &place)) {
            i++;
        } else if (!strcmp(a, "--mem")) {
            bool dev;
            snprintf(mem_host, sizeof mem_host, "%llu", cli_mem_budget("bench", val, &dev)), i++;
        } else if (!strcmp(a, "--prefetch")) {
            snprintf(prefetch, sizeof prefetch, "%ld", parse_count(a, val, 2, 64)), i++;
        } else if (!strcmp(a, "--config")) {
            char *eq = val ? strchr(val, '=') : NULL;
            if (!eq || eq == val || n_cfg == 64)
                cli_die_usage("bench", "--config takes KEY=VALUE (at most 64)");
            *eq = 0;
            cfg[n_cfg][0] = val, cfg[n_cfg++][1] = eq + 1, i++;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "--ops")) {
            ops = true;
        } else if (!strcmp(a, "--nodes")) {
            top_nodes = parse_count(a, val, 1, 1 << 20), i++;
        } else if (!strcmp(a, "--bandwidth")) {
            bandwidth = true;
        } else if (!strcmp(a, "--slots")) {
            slots = parse_count(a, val, 1, 256), i++;
        } else if (a[0] == '-') {
            char m[300];
            snprintf(m, sizeof m, "unknown option '%s'", a);
            cli_die_usage("bench", m);
        } else if (path) {
            cli_die_usage("bench", "one model at a time");
        } else {
            path = a;
        }
    }
    if (threads == 0) { /* all online CPUs, as a session's default */
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? n : 1;
    }
    if (bandwidth) {
        if (path)
            cli_die_usage("bench", "--bandwidth takes no MODEL");
        return bench_bandwidth((int)threads, json);
    }
    if (!path)
        cli_die_usage("bench", "missing MODEL");
    if (ctx == 0)
        ctx = prompt + gen;
    if (ctx < prompt + gen)
        cli_die_usage("bench", "--ctx is smaller than --prompt + --gen");
    if (slots && gen == 0)
        cli_die_usage("bench", "--slots times decode steps: --gen must be at least 1");

    char tbuf[32];
    snprintf(tbuf, sizeof tbuf, "%ld", threads);
    snug_options *opts = snug_options_new();
    if (!opts || snug_options_set(opts, "snug.threads", tbuf) != SNUG_OK ||
        (weights && snug_options_set(opts, "snug.weights", weights) != SNUG_OK) ||
        (mem_host[0] && snug_options_set(opts, "snug.mem.host", mem_host) != SNUG_OK) ||
        (prefetch[0] && snug_options_set(opts, "snug.prefetch_layers", prefetch) != SNUG_OK)) {
        fprintf(stderr, "snug bench: out of memory\n");
        snug_options_free(opts);
        return 1;
    }
    for (int k = 0; k < place.n && n_cfg < 64; k++)
        cfg[n_cfg][0] = place.kv[2 * k], cfg[n_cfg++][1] = place.kv[2 * k + 1];
    snug_options_set_logger(opts, cli_log, "bench", SNUG_LOG_WARN);
    for (int k = 0; k < n_cfg; k++) {
        if (snug_options_set(opts, cfg[k][0], cfg[k][1]) != SNUG_OK) {
            fprintf(stderr, "snug bench: out of memory\n");
            snug_options_free(opts);
            return 1;
        }
    }
    if (slots) {
        if (snug_options_set(opts, "snug.last_logits", "1") != SNUG_OK) { /* what a generator runs */
            fprintf(stderr, "snug bench: out of memory\n");
            snug_options_free(opts);
            return 1;
        }
        return bench_slots(path, opts, (int)slots, prompt, gen, rounds, warmup, ctx, seed, threads, json, ops);
    }
    char err[1024];
    snug_session *s = NULL;
    snug_decoder *loop = NULL;
    int64_t *ids = NULL;
    double *op_t = NULL; /* --ops: [2][n_nodes] seconds, prefill then decode */
    op_row *op_tab = NULL;
    node_row *node_tab = NULL;
    int n_ops = 0;
    double *t_prefill = NULL, *t_ttft = NULL, *t_decode = NULL, *c_prefill = NULL, *c_decode = NULL;
    int status = 1;
    touch_program_pages();
    size_t rss_base = proc_status_bytes("VmRSS"), file_base = proc_status_bytes("RssFile");
    /* load_s: everything up to the first token's readiness (open, plan at the
     * bounds, weights tiled and packed, the vocab probe), as ONNX Runtime's
     * session creation is its whole set-up; open_s is the part before
     * planning. Mapped weights still fault in during the first prefill
     * (first_prefill_s), where ONNX Runtime read them at load. */
    double t_start = now_s(), t_open, t_load;
    int rc = snug_session_create(path, opts, &s, err, sizeof err);
    snug_options_free(opts);
    if (rc != SNUG_OK) {
        cli_model_error("bench", path, err);
        return 1;
    }
    t_open = now_s() - t_start;
    if (snug_decoder_new(s, ctx, 0, &loop) != SNUG_OK) {
        cli_model_error("bench", path, snug_session_error(s));
        goto done;
    }
    snug_decoder_info info;
    snug_decoder_get_info(loop, &info);
    if (info.vocab < 1) { /* symbolic in the model: one step tells it */
        int64_t zero = 0;
        if (snug_decoder_prefill(loop, &zero, 1, NULL) != SNUG_OK) {
            cli_model_error("bench", path, snug_session_error(s));
            goto done;
        }
        snug_decoder_reset(loop);
        snug_decoder_get_info(loop, &info);
    }
    int64_t vocab = info.vocab;
    t_load = now_s() - t_start;
    double t_first_prefill = -1;
    ids = malloc(sizeof *ids * (size_t)(prompt + gen));
    t_prefill = calloc((size_t)rounds, sizeof(double));
    t_ttft = calloc((size_t)rounds, sizeof(double));
    t_decode = calloc((size_t)rounds, sizeof(double));
    c_prefill = calloc((size_t)rounds, sizeof(double));
    c_decode = calloc((size_t)rounds, sizeof(double));
    const snug_model *m = snug_session_model(s);
    snug_model_info mi;
    snug_model_get_info(m, &mi);
    int n_nodes = mi.n_nodes;
    if (ops || top_nodes)
        op_t = calloc(2 * (size_t)n_nodes + 1, sizeof(double));
    if (!ids || !t_prefill || !t_ttft || !t_decode || !c_prefill || !c_decode || ((ops || top_nodes) && !op_t)) {
        fprintf(stderr, "snug bench: out of memory\n");
        goto done;
    }
    uint64_t st = 0x9E3779B97F4A7C15ull ^ seed;
    for (long i = 0; i < prompt + gen; i++)
        ids[i] = (int64_t)((xorshift64(&st) >> 11) % (uint64_t)vocab);

    int64_t first = -1;
    uint64_t decode_allocs = 0;
    snug_stream_stats ss0, ss1;
    memset(&ss1, 0, sizeof ss1);
    uint64_t dec_streamed = 0;
    double dec_stall = 0, dec_read_s = 0;
    for (long r = -warmup; r < rounds; r++) {
        const float *logits;
        snug_decoder_reset(loop);
        if (op_t && r >= 0)
            snug_session_time_nodes(s, op_t);
        double c0 = cpu_s(), t0 = now_s();
        if (snug_decoder_prefill(loop, ids, prompt, &logits) != SNUG_OK) {
            fprintf(stderr, "snug bench: %s: prefill: %s\n", path, snug_session_error(s));
            goto done;
        }
        double t1 = now_s(), c1 = cpu_s();
        if (t_first_prefill < 0)
            t_first_prefill = t1 - t0;
        snug_session_time_nodes(s, op_t && r >= 0 ? op_t + n_nodes : NULL);
        first = argmax(logits + (prompt - 1) * vocab, vocab);
        double t2 = now_s(), c2 = cpu_s();
        uint64_t a0 = snug_alloc_count();
        snug_session_stream_stats(s, &ss0);
        for (long k = 0; k < gen; k++) {
            if (snug_decoder_decode(loop, ids[prompt + k], &logits) != SNUG_OK) {
                fprintf(stderr, "snug bench: %s: decode step %ld: %s\n", path, k, snug_session_error(s));
                goto done;
            }
        }
        double t3 = now_s(), c3 = cpu_s();
        snug_session_stream_stats(s, &ss1);
        if (r >= 0) {
            dec_streamed += ss1.bytes_read - ss0.bytes_read;
            dec_stall += ss1.stall_s - ss0.stall_s;
            dec_read_s += ss1.read_s - ss0.read_s;
        }
        snug_session_time_nodes(s, NULL);
        decode_allocs += snug_alloc_count() - a0;
        if (r >= 0) {
            t_prefill[r] = t1 - t0;
            t_ttft[r] = t2 - t0;
            t_decode[r] = t3 - t2;
            c_prefill[r] = c1 - c0;
            c_decode[r] = c3 - c2;
        }
    }
    double v_prefill[1024], v_decode[1024], v_ttft[1024], v_cp[1024], v_cd[1024];
    int nr = rounds < 1024 ? (int)rounds : 1024;
    for (int r = 0; r < nr; r++) {
        v_prefill[r] = (double)prompt / t_prefill[r];
        v_decode[r] = gen ? (double)gen / t_decode[r] : 0;
        v_ttft[r] = t_ttft[r] * 1e3;
        v_cp[r] = c_prefill[r] * 1e3;
        v_cd[r] = gen ? c_decode[r] * 1e3 / (double)gen : 0;
    }
    stat3 sp = stats_of(v_prefill, nr), sd = stats_of(v_decode, nr), stt = stats_of(v_ttft, nr);
    stat3 scp = stats_of(v_cp, nr), scd = stats_of(v_cd, nr);
    size_t rss = peak_rss_bytes(), hwm = proc_status_bytes("VmHWM");
    /* RSS growth without the pages of the program's own code that ran (file
     * pages outside the model's folder): those belong to no plan. Code only
     * ever grows, so subtracting its final figure from the peak is safe. */
    char mdir[4096];
    snprintf(mdir, sizeof mdir, "%s", path);
    char *slash = strrchr(mdir, '/');
    if (slash)
        slash[1] = 0;
    char mabs[4096];
    if (!realpath(slash ? mdir : ".", mabs))
        snprintf(mabs, sizeof mabs, "%s", mdir);
    size_t model_rss = mapped_rss_under(mabs), file_now = proc_status_bytes("RssFile");
    size_t code = file_now > file_base + model_rss ? file_now - file_base - model_rss : 0;
    size_t growth = hwm > rss_base + code ? hwm - rss_base - code : 0;
    uint64_t wb = mi.weight_bytes, wtok = mi.weight_bytes_read;
    /* streaming: per decode token, against what reading those layers alone allows */
    bool streams = ss1.budget && ss1.first_streamed < ss1.n_layers;
    double tok_dec = (double)rounds * (double)gen;
    double s_bytes = streams && tok_dec > 0 ? (double)dec_streamed / tok_dec : 0;
    double s_stall = streams && tok_dec > 0 ? dec_stall / tok_dec : 0;
    double probe_bw = 0;
    if (streams && snug_session_stream_probe(s, &probe_bw) != SNUG_OK) {
        fprintf(stderr, "snug bench: %s: %s\n", path, snug_session_error(s));
        goto done;
    }
    double io_bound = s_bytes > 0 && probe_bw > 0 ? probe_bw / s_bytes : 0;
    /* weights streamed to the accelerator: per decode token (one sweep), against copying them alone */
    double dcopy_bw = 0, dbound = 0;
    snug_device_info dsi = {0};
    if (snug_session_device_count(s) > 1)
        snug_session_device_info(s, 1, &dsi);
    if (dsi.streamed_layers && snug_session_device_stream_probe(s, &dcopy_bw) != SNUG_OK) {
        fprintf(stderr, "snug bench: %s: %s\n", path, snug_session_error(s));
        goto done;
    }
    if (dsi.streamed_per_run && dcopy_bw > 0)
        dbound = dcopy_bw / (double)dsi.streamed_per_run;
    snug_memory mem, est;
    snug_decoder_memory(loop, &mem);
    bool has_est = snug_decoder_estimate(loop, &est) == SNUG_OK;
    if (op_t) {
        op_tab = calloc((size_t)n_nodes + 1, sizeof *op_tab);
        if (!op_tab) {
            fprintf(stderr, "snug bench: out of memory\n");
            goto done;
        }
        n_ops = op_rows(m, op_t, rounds, gen, op_tab);
        if (top_nodes) {
            node_tab = calloc((size_t)n_nodes + 1, sizeof *node_tab);
            if (!node_tab) {
                fprintf(stderr, "snug bench: out of memory\n");
                goto done;
            }
            node_rows(n_nodes, op_t, rounds, gen, node_tab);
            if (top_nodes > n_nodes)
                top_nodes = n_nodes;
        }
    }
    if (json) {
        printf("{\"model\": ");
        snug_json_write_str(stdout, path);
        printf(", \"threads\": %ld, \"prompt\": %ld, \"gen\": %ld, \"rounds\": %ld, \"warmup\": %ld, "
               "\"seed\": %llu, \"vocab\": %lld, \"layers\": %d, \"kv_heads\": %lld, \"head_dim\": %lld, "
               "\"kv_cache_bytes\": %zu, \"load_s\": %.6f, \"open_s\": %.6f, \"first_prefill_s\": %.6f, "
               "\"prefill_tok_s\": %.4f, \"decode_tok_s\": %.4f, \"ttft_ms\": %.4f, "
               "\"decode_ms_per_token\": %.4f, \"peak_rss_bytes\": %zu, \"weight_bytes\": %llu, "
               "\"weight_bytes_per_token\": %llu, \"first_token\": %lld, \"gemm_kernel\": \"%s\", "
               "\"prefill_cpu_ms\": %.4f, \"decode_cpu_ms_per_token\": %.4f, "
               "\"decode_allocations\": %llu, \"rss_base_bytes\": %zu, \"rss_growth_bytes\": %zu, \"code_rss_bytes\": %zu, "
               ,
               threads, prompt, gen, rounds, warmup, (unsigned long long)seed, (long long)vocab, info.n_layers,
               (long long)info.kv_heads, (long long)info.head_dim, info.kv_bytes, t_load, t_open, t_first_prefill, sp.med, sd.med,
               stt.med, sd.med > 0 ? 1e3 / sd.med : 0, rss, (unsigned long long)wb, (unsigned long long)wtok,
               (long long)first, snug_gemm_kernel_name(), scp.med, scd.med, (unsigned long long)decode_allocs,
               rss_base, growth, code);
        if (streams)
            printf("\"stream\": {\"budget\": %llu, \"planned\": %llu, \"first_layer\": %d, \"layers\": %d, "
                   "\"slots\": %d, \"staging_bytes\": %llu, \"sweep_bytes\": %llu, \"bytes_per_token\": %.0f, "
                   "\"stall_ms_per_token\": %.4f, \"read_bytes_per_s\": %.0f, \"probe_bytes_per_s\": %.0f, "
                   "\"io_bound_tok_s\": %.4f, \"of_io_bound\": %.4f}, ",
                   (unsigned long long)ss1.budget, (unsigned long long)ss1.planned, ss1.first_streamed, ss1.n_layers,
                   ss1.depth, (unsigned long long)ss1.staging_bytes, (unsigned long long)ss1.sweep_bytes, s_bytes,
                   s_stall * 1e3, dec_read_s > 0 ? (double)dec_streamed / dec_read_s : 0, probe_bw, io_bound,
                   io_bound > 0 ? sd.med / io_bound : 0);
        for (int d = 1; d < snug_session_device_count(s); d++) {
            snug_device_info di;
            snug_session_device_info(s, d, &di);
            snug_session_stats st;
            snug_session_get_stats(s, &st);
            printf("\"device\": {\"name\": ");
            snug_json_write_str(stdout, di.name);
            printf(", \"nodes\": %d, \"layers\": %d, \"planned_bytes\": %zu, \"peak_bytes\": %llu, "
                   "\"copied_bytes\": %zu, \"state_bytes\": %llu, \"stream_layers\": %d, \"stream_ring\": %llu, "
                   "\"streamed_bytes_per_token\": %llu, \"copy_bytes_per_s\": %.0f, \"copy_bound_tok_s\": %.4f, "
                   "\"of_copy_bound\": %.4f}, ",
                   di.n_nodes, di.n_layers, st.device_bytes, (unsigned long long)di.peak, st.copied_bytes,
                   (unsigned long long)di.state_bytes, di.streamed_layers, (unsigned long long)di.stream_ring,
                   (unsigned long long)di.streamed_per_run, d == 1 ? dcopy_bw : 0, d == 1 ? dbound : 0,
                   d == 1 && dbound > 0 ? sd.med / dbound : 0);
        }
        json_mem("accounted", &mem);
        if (has_est)
            json_mem("estimate", &est);
        if (node_tab) {
            printf("\"nodes\": [");
            for (long k = 0; k < top_nodes; k++) {
                snug_node_info nd;
                snug_model_node(m, node_tab[k].node, &nd);
                printf("%s{\"name\": ", k ? ", " : "");
                snug_json_write_str(stdout, nd.name);
                printf(", \"op\": ");
                snug_json_write_str(stdout, nd.op);
                printf(", \"prefill_ms\": %.4f, \"decode_ms_per_token\": %.4f}", node_tab[k].pre * 1e3,
                       node_tab[k].dec * 1e3);
            }
            printf("], ");
        }
        if (ops) {
            printf("\"ops\": [");
            for (int k = 0; k < n_ops; k++)
                printf("%s{\"op\": \"%s\", \"prefill_ms\": %.4f, \"decode_ms_per_token\": %.4f}", k ? ", " : "",
                       op_tab[k].op, op_tab[k].pre * 1e3, op_tab[k].dec * 1e3);
            printf("], ");
        }
        const char *names[3] = {"prefill_tok_s_rounds", "decode_tok_s_rounds", "ttft_ms_rounds"};
        const double *arrs[3] = {v_prefill, v_decode, v_ttft};
        for (int k = 0; k < 3; k++) {
            printf("\"%s\": [", names[k]);
            for (int r = 0; r < nr; r++)
                printf("%s%.4f", r ? ", " : "", arrs[k][r]);
            printf("]%s", k < 2 ? ", " : "}\n");
        }
    } else {
        char b1[64], b2[64], b3[64], b4[64];
        cli_human_bytes((double)wb, b1, sizeof b1);
        cli_human_bytes((double)wtok, b2, sizeof b2);
        cli_human_bytes((double)rss, b3, sizeof b3);
        cli_human_bytes((double)info.kv_bytes, b4, sizeof b4);
        printf("model        %s\n", path);
        printf("shape        %d layers, %lld kv heads x %lld, vocab %lld; KV cache %s for %ld tokens\n",
               info.n_layers, (long long)info.kv_heads, (long long)info.head_dim, (long long)vocab, b4, ctx);
        printf("run          %ld threads, prompt %ld, gen %ld, %ld rounds (+%ld warmup), gemm %s\n", threads,
               prompt, gen, rounds, warmup, snug_gemm_kernel_name());
        printf("load         %.1f ms to the first token's readiness (open %.1f ms, then plan, tile and pack); "
               "first prefill %.1f ms (mapped weights fault in)\n",
               t_load * 1e3, t_open * 1e3, t_first_prefill * 1e3);
        printf("prefill      %10.2f tok/s   (min %.2f, max %.2f)\n", sp.med, sp.min, sp.max);
        printf("TTFT         %10.2f ms      (min %.2f, max %.2f)\n", stt.med, stt.min, stt.max);
        if (gen)
            printf("decode       %10.2f tok/s   (min %.2f, max %.2f; %.2f ms/token)\n", sd.med, sd.min, sd.max,
                   1e3 / sd.med);
        printf("CPU time     prefill %.1f ms, decode %.2f ms/token (all threads; wall time above)\n", scp.med,
               scd.med);
        printf("peak RSS     %s\n", b3);
        char p1[64], p2[64], p3[64], p4[64], p5[64], p6[64], p7[64];
        cli_human_bytes((double)mem.staging, p7, sizeof p7);
        cli_human_bytes((double)growth, p1, sizeof p1);
        cli_human_bytes((double)mem.total, p2, sizeof p2);
        cli_human_bytes((double)(mem.weights_read + mem.weights_gathered), p3, sizeof p3);
        cli_human_bytes((double)(mem.weights_copied + mem.packed), p6, sizeof p6);
        cli_human_bytes((double)mem.arena, p4, sizeof p4);
        cli_human_bytes((double)mem.lower_bound, p5, sizeof p5);
        char pe[64] = "none (planned per step)";
        if (has_est)
            cli_human_bytes((double)est.total, pe, sizeof pe);
        printf("memory       RSS growth %s; estimated before planning %s (%+.1f%%), accounted after planning %s "
               "(%+.1f%%): weights mapped %s, held %s (copies, packed), staging %s, arena %s (lower bound %s), "
               "KV %s (--weights %s)\n",
               p1, pe, has_est && growth ? 100.0 * ((double)est.total - (double)growth) / (double)growth : 0.0, p2,
               growth ? 100.0 * ((double)mem.total - (double)growth) / (double)growth : 0.0, p3, p6, p7, p4, p5, b4,
               (weights && !strcmp(weights, "load")) || mem_host[0] ? "load" : "map");
        printf("allocations  %llu during the decode steps\n", (unsigned long long)decode_allocs);
        for (int d = 1; d < snug_session_device_count(s); d++) {
            snug_device_info di;
            snug_session_device_info(s, d, &di);
            snug_session_stats st;
            snug_session_get_stats(s, &st);
            char q1[64], q2[64], q3[64];
            cli_human_bytes((double)st.device_bytes, q1, sizeof q1);
            cli_human_bytes((double)di.peak, q2, sizeof q2);
            cli_human_bytes((double)st.copied_bytes, q3, sizeof q3);
            printf("device       %s: %d nodes; planned %s, peak held %s by its backend's count (%+.2f%%); %s "
                   "copied between devices by the runs since the plan\n",
                   di.name, di.n_nodes, q1, q2,
                   st.device_bytes ? 100.0 * ((double)di.peak - (double)st.device_bytes) / (double)st.device_bytes : 0.0,
                   q3);
            if (d == 1 && di.streamed_layers) {
                char r1[64], r2[64], r3[64];
                cli_human_bytes((double)di.stream_ring, r1, sizeof r1);
                cli_human_bytes((double)di.streamed_per_run, r2, sizeof r2);
                cli_human_bytes(dcopy_bw, r3, sizeof r3);
                printf("streamed     to %s: the weights of %d layers through a %s ring, %s copied in per decode "
                       "token; copied alone at %s/s: a bound of %.2f tok/s, decode at %.0f%% of it\n",
                       di.name, di.streamed_layers, r1, r2, r3, dbound, dbound > 0 ? 100.0 * sd.med / dbound : 0.0);
            }
        }
        if (streams) {
            char q1[64], q2[64], q3[64], q4[64], q5[64];
            cli_human_bytes((double)ss1.budget, q1, sizeof q1);
            cli_human_bytes(s_bytes, q2, sizeof q2);
            cli_human_bytes(probe_bw, q3, sizeof q3);
            cli_human_bytes(dec_read_s > 0 ? (double)dec_streamed / dec_read_s : 0, q4, sizeof q4);
            cli_human_bytes((double)ss1.staging_bytes, q5, sizeof q5);
            printf("streaming    --mem host=%s: layers %d-%d of %d stream through %d slots (%s); %s read per decode "
                   "token at %s/s, stalled %.2f ms/token; those layers read alone (cold, nothing computing) at "
                   "%s/s: I/O bound %.2f tok/s, decode at %.0f%% of it\n",
                   q1, ss1.first_streamed, ss1.n_layers - 1, ss1.n_layers, ss1.depth, q5, q2, q4, s_stall * 1e3, q3,
                   io_bound, io_bound > 0 ? 100 * sd.med / io_bound : 0);
        }
        printf("weights      %s in the file, %s read per decode step\n", b1, b2);
        if (ops) {
            printf("ops          time per operator type (all nodes of the type, wall time)\n");
            printf("  %-34s %12s %7s %14s %7s\n", "", "per prefill", "share", "per decode tok", "share");
            int shown = n_ops < 12 ? n_ops : 12;
            double rp = 0, rd = 0;
            for (int k = 0; k < n_ops; k++) {
                if (k < shown)
                    printf("  %-34s %9.3f ms %6.1f%% %11.4f ms %6.1f%%\n", op_tab[k].op, op_tab[k].pre * 1e3,
                           op_tot_pre > 0 ? 100 * op_tab[k].pre / op_tot_pre : 0, op_tab[k].dec * 1e3,
                           op_tot_dec > 0 ? 100 * op_tab[k].dec / op_tot_dec : 0);
                else
                    rp += op_tab[k].pre, rd += op_tab[k].dec;
            }
            if (n_ops > shown)
                printf("  (%d more types)%*s %9.3f ms %6.1f%% %11.4f ms %6.1f%%\n", n_ops - shown, 19, "", rp * 1e3,
                       op_tot_pre > 0 ? 100 * rp / op_tot_pre : 0, rd * 1e3, op_tot_dec > 0 ? 100 * rd / op_tot_dec : 0);
            printf("  %-34s %9.3f ms %7s %11.4f ms\n", "all nodes", op_tot_pre * 1e3, "", op_tot_dec * 1e3);
        }
        if (node_tab) {
            printf("nodes        the %ld slowest nodes (wall time; name, then operator type)\n", top_nodes);
            printf("  %-50s %-20s %12s %7s %14s %7s\n", "", "", "per prefill", "share", "per decode tok", "share");
            for (long k = 0; k < top_nodes; k++) {
                snug_node_info nd;
                snug_model_node(m, node_tab[k].node, &nd);
                const char *nm = nd.name[0] ? nd.name : "(unnamed)";
                size_t len = strlen(nm);
                /* long exporter names: keep their informative end */
                printf("  %s%-*s %-20.20s %9.3f ms %6.1f%% %11.4f ms %6.1f%%\n", len > 50 ? "..." : "",
                       len > 50 ? 47 : 50, len > 50 ? nm + len - 47 : nm, nd.op, node_tab[k].pre * 1e3,
                       op_tot_pre > 0 ? 100 * node_tab[k].pre / op_tot_pre : 0, node_tab[k].dec * 1e3,
                       op_tot_dec > 0 ? 100 * node_tab[k].dec / op_tot_dec : 0);
            }
        }
    }
    status = 0;
done:
    free(op_t);
    free(op_tab);
    free(node_tab);
    free(ids);
    free(t_prefill);
    free(t_ttft);
    free(t_decode);
    free(c_prefill);
    free(c_decode);
    snug_decoder_free(loop);
    snug_session_free(s);
    return status;
}
