/* Fault injection, SQLite-style (issue #14 item 7): every allocation and
 * every file call of a full load -> plan -> prepare -> run fails in turn.
 *
 * Allocations: an allocator (snug_set_allocator) that fails the N-th call,
 * either that one alone ("once") or it and every later one ("sticky"), for
 * N = 1, 2, ... until a run no longer reaches the N-th call. Each time the
 * run must end with a clean status: SNUG_ERR_OOM with a message, or
 * SNUG_OK where the failure was absorbed by a fallback, and then the
 * result must still be right (the greedy id, the logits within the
 * fixtures' tolerance). After everything is freed the allocator's count of
 * live blocks must be back to zero, no file descriptor may stay open and no
 * map of the model's files may remain: leaks are caught by this counting,
 * also in the optimized build without AddressSanitizer (the reference run
 * checks that the counts see an open session). A session whose run failed
 * must still work: the same run without faults gives the right result.
 * Absorbed failures are tallied by what the library logged about them.
 *
 * File calls: the loader's hook (sn_io_set_fault, src/onnx/model.h) fails
 * the N-th realpath / open / fstat / mmap / pread with EIO under
 * snug.weights=load (weights read with pread), for a model with external
 * data and for stories260K: each must be SNUG_ERR_IO with a message naming
 * the file, nothing leaked, the same checks otherwise.
 *
 * Models: stories260K through the public API (one prefill step, as
 * test_api; two threads, so the pool's allocations are swept too), and the
 * tiny genai and optimum-extdata fixtures through the LLM step driver
 * (prefill four tokens, decode one), the latter also under a host budget
 * that streams three of its four layers (snug.mem.host=3M: the I/O
 * thread's reads fail in turn too, and a run after a failed one starts a
 * fresh sweep). A missing tiny fixture is a skip (77)
 * after the rest ran; stories260K must be there. An argument runs one
 * scenario by name. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "exec/session.h"
#include "genai/kvloop.h"
#include "onnx/model.h"
#include "snug.h"

static int g_fail;
#define CHECK(c, ...)                                                  \
    do {                                                               \
        if (!(c)) {                                                    \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);       \
            fprintf(stderr, __VA_ARGS__);                              \
            fprintf(stderr, "\n");                                     \
            g_fail++;                                                  \
        }                                                              \
    } while (0)

/* ---- the failing allocator ---------------------------------------------- */

static struct {
    uint64_t at;    /* fail the at-th call (1-based); 0: none */
    int sticky;     /* and every call after it */
    uint64_t calls; /* malloc and realloc calls so far */
    uint64_t hits;  /* calls failed */
    int64_t live;   /* blocks held */
} A;

static int alloc_fails(void) {
    uint64_t k = __atomic_add_fetch(&A.calls, 1, __ATOMIC_RELAXED);
    if (A.at && (k == A.at || (A.sticky && k > A.at))) {
        __atomic_add_fetch(&A.hits, 1, __ATOMIC_RELAXED);
        return 1;
    }
    return 0;
}

static void *f_malloc(void *user, size_t n) {
    (void)user;
    if (alloc_fails())
        return NULL;
    void *p = malloc(n);
    if (p)
        __atomic_add_fetch(&A.live, 1, __ATOMIC_RELAXED);
    return p;
}

static void *f_realloc(void *user, void *p, size_t n) {
    (void)user;
    if (alloc_fails())
        return NULL; /* p stays the caller's */
    void *q = realloc(p, n);
    if (q && !p)
        __atomic_add_fetch(&A.live, 1, __ATOMIC_RELAXED);
    return q;
}

static void f_free(void *user, void *p) {
    (void)user;
    if (!p)
        return;
    __atomic_sub_fetch(&A.live, 1, __ATOMIC_RELAXED);
    free(p);
}

/* ---- the failing file calls ---------------------------------------------- */

static const char *const k_io_op[] = {"realpath", "open", "fstat", "mmap", "pread"};

static struct {
    uint64_t at;
    int sticky;
    uint64_t calls, hits;
    uint64_t by_op[5];   /* calls of each sn_io_op */
    sn_io_op first_op;   /* the first call failed */
    char first_path[1024];
} IO;

static int io_fault(void *user, sn_io_op op, const char *path) {
    (void)user;
    uint64_t k = __atomic_add_fetch(&IO.calls, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&IO.by_op[op], 1, __ATOMIC_RELAXED);
    if (!IO.at || !(k == IO.at || (IO.sticky && k > IO.at)))
        return 0;
    if (__atomic_add_fetch(&IO.hits, 1, __ATOMIC_RELAXED) == 1) {
        IO.first_op = op;
        snprintf(IO.first_path, sizeof IO.first_path, "%s", path ? path : "");
    }
    return EIO;
}

/* ---- what a run leaves behind -------------------------------------------- */

static int open_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Maps of files whose path contains name. */
static int file_maps(const char *name) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return -1;
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += strstr(line, name) != NULL;
    fclose(f);
    return n;
}

/* While a session is open (the reference run): the counts above must see
 * its maps, descriptors and blocks, or their return to zero proves nothing. */
static int g_probe, g_probe_maps, g_probe_fds;
static int64_t g_probe_live;
static void probe(const char *map_name) {
    if (!g_probe)
        return;
    g_probe_maps = file_maps(map_name);
    g_probe_fds = open_fds();
    g_probe_live = __atomic_load_n(&A.live, __ATOMIC_RELAXED);
}

/* ---- scenarios: one full load -> plan -> prepare -> run each ------------- */

typedef struct scen {
    const char *name;
    const char *path;       /* the model */
    const char *map_name;   /* a name every map of its files contains */
    int llm;                /* 0: stories260K through the public API; 1: the step driver */
    int weights_load;       /* snug.weights=load */
    const char *threads;    /* snug.threads: the pool's allocations and kernels split over threads; the
                             * N-th call stays the same call because nothing allocates while running */
    int64_t vocab;          /* known after the reference run */
    float *ref;             /* the reference run's last logits: prefill's last row, then decode's */
    int64_t ref_best[2];
    const char *mem_host;   /* snug.mem.host, or NULL: a budget that streams layers (the reference run
                             * checks that some do), so the prefetcher's reads fail in turn too */
} scen;

#define STORIES "../shared/fixtures/stories260K/stories260K_kv.onnx"

/* The fixtures' tolerance (tests/models/README.md). */
static int logits_ok(const float *ref, const float *got, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!(fabsf(got[i] - ref[i]) <= 1e-4f + 1e-3f * fabsf(ref[i])))
            return 0;
    return 1;
}

/* The last message the library logged during a run: an absorbed failure
 * should have said what it fell back to. */
static char g_log[256];
static void logger(void *user, int level, const char *msg) {
    (void)user;
    (void)level;
    snprintf(g_log, sizeof g_log, "%s", msg);
}

static snug_options *options(const scen *sc) {
    snug_options *o = snug_options_new();
    if (!o)
        return NULL;
    snug_options_set_logger(o, logger, NULL, SNUG_LOG_INFO);
    if (snug_options_set(o, "snug.threads", sc->threads) != SNUG_OK ||
        (sc->weights_load && snug_options_set(o, "snug.weights", "load") != SNUG_OK) ||
        (sc->mem_host && snug_options_set(o, "snug.mem.host", sc->mem_host) != SNUG_OK)) {
        snug_options_free(o);
        return NULL;
    }
    return o;
}

/* After a failed run the session must still work: faults off, the same
 * run again must give the right result. */
static void faults_off(void) {
    A.at = 0;
    IO.at = 0;
}

/* Public API: one prefill step of stories260K with an empty cache. */
static int stories_step(snug_session *s, char *msg, size_t cap, int *wrong) {
    int64_t ids[5] = {1, 403, 407, 261, 378};
    snug_tensor in[11], out[11];
    memset(in, 0, sizeof in);
    in[0] = (snug_tensor){SNUG_INT64, 2, {1, 5}, ids};
    for (int i = 1; i < 11; i++)
        in[i] = (snug_tensor){SNUG_FLOAT, 4, {1, 4, 0, 8}, NULL};
    int rc = snug_session_run(s, in, 11, out, 11);
    if (rc != SNUG_OK) {
        snprintf(msg, cap, "%s", snug_session_error(s));
        return rc;
    }
    const float *lg = (const float *)out[0].data + 4 * 512;
    int best = 0;
    for (int v = 1; v < 512; v++)
        best = lg[v] > lg[best] ? v : best;
    *wrong = best != 432; /* ../shared/fixtures/stories260K/greedy_ids.txt */
    return SNUG_OK;
}

static int run_stories(scen *sc, char *msg, size_t cap, int *wrong, int *stuck) {
    snug_options *o = options(sc);
    if (!o) {
        snprintf(msg, cap, "snug_options_new/set: out of memory");
        return SNUG_ERR_OOM;
    }
    snug_session *s = NULL;
    int rc = snug_session_create(sc->path, o, &s, msg, cap);
    if (rc == SNUG_OK) {
        rc = stories_step(s, msg, cap, wrong);
        probe(sc->map_name);
        if (rc != SNUG_OK) {
            char m2[1024];
            int w2 = 0;
            faults_off();
            *stuck = stories_step(s, m2, sizeof m2, &w2) != SNUG_OK || w2;
        }
    }
    snug_session_free(s);
    snug_options_free(o);
    return rc;
}

/* The step driver: prefill four tokens, decode one. The first run (no
 * faults) keeps the logits the others are held to. */
static int llm_steps(scen *sc, sn_kvloop *l, sn_err *err, int *wrong) {
    static const int64_t ids[4] = {1, 7, 11, 5};
    const float *lg = NULL;
    SN_TRY(sn_kvloop_prefill(l, ids, 4, &lg, err));
    for (int step = 0; step < 2; step++) {
        if (step == 1)
            SN_TRY(sn_kvloop_decode(l, sc->ref_best[0] >= 0 ? sc->ref_best[0] : 0, &lg, err));
        int64_t V = sn_kvloop_get_info(l)->vocab;
        const float *last = step == 0 ? lg + 3 * V : lg;
        if (!sc->ref) { /* the reference run */
            sc->vocab = V;
            if (!(sc->ref = malloc(2 * (size_t)V * sizeof(float))))
                return sn_errf(err, SNUG_ERR_OOM, "test: out of memory");
        }
        if (sc->ref_best[step] < 0) {
            memcpy(sc->ref + step * V, last, (size_t)V * sizeof(float));
            sc->ref_best[step] = sn_argmax_f32(last, V);
        } else if (V != sc->vocab || sn_argmax_f32(last, V) != sc->ref_best[step] ||
                   !logits_ok(sc->ref + step * V, last, V)) {
            *wrong = 1;
        }
    }
    return SNUG_OK;
}

static int run_llm(scen *sc, char *msg, size_t cap, int *wrong, int *stuck) {
    snug_options *o = options(sc);
    if (!o) {
        snprintf(msg, cap, "snug_options_new/set: out of memory");
        return SNUG_ERR_OOM;
    }
    sn_err err = {0};
    sn_session *s = NULL;
    sn_kvloop *l = NULL;
    int rc = sn_session_open(sc->path, o, &s, &err);
    if (rc == SNUG_OK)
        rc = sn_kvloop_new(s, 16, &l, &err);
    if (rc == SNUG_OK) {
        rc = llm_steps(sc, l, &err, wrong);
        if (rc == SNUG_OK && sc->mem_host && g_probe) { /* the reference run: something streamed */
            snug_stream_stats st;
            snug_session_stream_stats((snug_session *)s, &st);
            CHECK(st.first_streamed < st.n_layers && st.loads > 0,
                  "%s: snug.mem.host=%s streams nothing (layers %d.., %llu loads)", sc->name, sc->mem_host,
                  st.first_streamed, (unsigned long long)st.loads);
        }
        if (rc != SNUG_OK) { /* the loop again from an empty cache */
            sn_err e2 = {0};
            int w2 = 0;
            faults_off();
            sn_kvloop_reset(l);
            *stuck = llm_steps(sc, l, &e2, &w2) != SNUG_OK || w2;
        }
    }
    probe(sc->map_name);
    sn_kvloop_free(l);
    sn_session_close(s);
    snug_options_free(o);
    snprintf(msg, cap, "%s", err.msg);
    return rc;
}

static int run_scen(scen *sc, char *msg, size_t cap, int *wrong, int *stuck) {
    msg[0] = 0;
    g_log[0] = 0;
    *wrong = *stuck = 0;
    return sc->llm ? run_llm(sc, msg, cap, wrong, stuck) : run_stories(sc, msg, cap, wrong, stuck);
}

/* ---- sweeps -------------------------------------------------------------- */

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int g_maps_left; /* maps an earlier defective run left */

/* Leftovers of the run just finished: live blocks, descriptors, maps. */
static int leftovers(const scen *sc, const char *what, uint64_t n, int *fds0) {
    int bad = 0;
    int64_t live = __atomic_load_n(&A.live, __ATOMIC_RELAXED);
    int fds = open_fds(), maps = file_maps(sc->map_name);
    if (live != 0) {
        fprintf(stderr, "FAIL %s: %s N=%llu: %lld block(s) leaked\n", sc->name, what,
                (unsigned long long)n, (long long)live);
        bad = 1;
        A.live = 0; /* count the next run's alone */
    }
    if (fds != *fds0) {
        fprintf(stderr, "FAIL %s: %s N=%llu: %d file descriptor(s) left open\n", sc->name, what,
                (unsigned long long)n, fds - *fds0);
        bad = 1;
        *fds0 = fds; /* count the next run's alone */
    }
    if (maps != g_maps_left) {
        fprintf(stderr, "FAIL %s: %s N=%llu: %d map(s) of the model's files left\n", sc->name, what,
                (unsigned long long)n, maps - g_maps_left);
        bad = 1;
        g_maps_left = maps; /* count the next run's alone */
    }
    return bad;
}

/* Absorbed failures by what the library logged (its first words). */
enum { N_WHY = 8 };
typedef struct why_tally {
    char why[N_WHY][64];
    uint64_t n[N_WHY];
} why_tally;

static void tally(why_tally *t, const char *log) {
    char key[64];
    size_t n = strlen(log);
    n = n < sizeof key - 1 ? n : sizeof key - 1;
    memcpy(key, log, n);
    key[n] = 0;
    if (!n)
        snprintf(key, sizeof key, "(nothing logged)");
    char *colon = strchr(key, ':');
    if (colon && strchr(colon + 1, ':')) /* "kvloop: planning per step (...: why)" -> up to the second colon */
        *strchr(colon + 1, ':') = 0;
    for (int i = 0; i < N_WHY; i++) {
        if (!t->why[i][0])
            snprintf(t->why[i], sizeof t->why[i], "%s", key);
        if (!strcmp(t->why[i], key)) {
            t->n[i]++;
            return;
        }
    }
}

/* A weight read (pread) that fails must name the file read, the external
 * data file where the bytes are there (src/exec/exec.c's copy_init and
 * sn_kctx_read_const ask sn_model_file_of); 0 would only count messages
 * that name the model instead. */
#define STRICT_READ_NAMES 1

typedef struct sweep_res {
    why_tally why;     /* the absorbed failures' logged fallbacks */
    uint64_t named_model; /* read failures of a data file whose message named the model instead */
    uint64_t swept;    /* N values run */
    uint64_t calls;    /* calls of the clean run */
    uint64_t absorbed; /* failures the run absorbed (SNUG_OK, right result) */
    int bad;           /* N values with a defect */
} sweep_res;

/* Reports a defect of one N (printing only the first few of a sweep). */
static void defect(sweep_res *r, const scen *sc, const char *what, uint64_t n, const char *fmt,
                   const char *a, const char *b) {
    if (r->bad++ < 8) {
        fprintf(stderr, "FAIL %s: %s N=%llu: ", sc->name, what, (unsigned long long)n);
        fprintf(stderr, fmt, a, b);
        fprintf(stderr, "\n");
    }
    g_fail++;
}

static sweep_res sweep_alloc(scen *sc, int sticky) {
    const char *what = sticky ? "alloc sticky" : "alloc once";
    sweep_res r = {0};
    char msg[2048];
    int fds0 = open_fds();
    g_maps_left = file_maps(sc->map_name);
    for (uint64_t n = 1;; n++) {
        A.at = n;
        A.sticky = sticky;
        A.calls = A.hits = 0;
        int wrong = 0, stuck = 0;
        int rc = run_scen(sc, msg, sizeof msg, &wrong, &stuck);
        uint64_t hits = A.hits, calls = A.calls;
        A.at = 0;
        r.swept++;
        if (leftovers(sc, what, n, &fds0))
            defect(&r, sc, what, n, "%s%s", "(leftovers above)", "");
        if (!hits) { /* the run never reached the N-th call: done */
            r.calls = calls;
            r.swept--;
            if (rc != SNUG_OK || wrong)
                defect(&r, sc, what, n, "the clean run failed: %s%s", snug_status_str(rc), msg);
            break;
        }
        if (rc == SNUG_OK) {
            r.absorbed++;
            tally(&r.why, g_log);
            if (wrong)
                defect(&r, sc, what, n, "%s%s", "SNUG_OK after a failed allocation, but a wrong result", "");
        } else if (rc != SNUG_ERR_OOM) {
            defect(&r, sc, what, n, "status %s, not SNUG_ERR_OOM: %s", snug_status_str(rc), msg);
        } else if (!msg[0]) {
            defect(&r, sc, what, n, "%s%s", "SNUG_ERR_OOM without a message", "");
        }
        if (stuck)
            defect(&r, sc, what, n, "after this failure the same run without faults failed or was wrong: %s%s", msg,
                   "");
        if (n > 1000000) {
            defect(&r, sc, what, n, "%s%s", "the sweep does not end", "");
            break;
        }
    }
    return r;
}

static sweep_res sweep_io(scen *sc, int sticky) {
    const char *what = sticky ? "io sticky" : "io once";
    sweep_res r = {0};
    char msg[2048];
    int fds0 = open_fds();
    g_maps_left = file_maps(sc->map_name);
    sn_io_set_fault(io_fault, NULL);
    for (uint64_t n = 1;; n++) {
        IO.at = n;
        IO.sticky = sticky;
        IO.calls = IO.hits = 0;
        memset(IO.by_op, 0, sizeof IO.by_op);
        IO.first_path[0] = 0;
        A.at = 0;
        int wrong = 0, stuck = 0;
        int rc = run_scen(sc, msg, sizeof msg, &wrong, &stuck);
        uint64_t hits = IO.hits, calls = IO.calls;
        IO.at = 0;
        r.swept++;
        if (leftovers(sc, what, n, &fds0))
            defect(&r, sc, what, n, "%s%s", "(leftovers above)", "");
        if (!hits) {
            r.calls = calls;
            r.swept--;
            if (rc != SNUG_OK || wrong)
                defect(&r, sc, what, n, "the clean run failed: %s%s", snug_status_str(rc), msg);
            if (sticky) {
                printf("%-16s io calls:", sc->name);
                for (int op = 0; op < 5; op++)
                    printf(" %s %llu", k_io_op[op], (unsigned long long)IO.by_op[op]);
                printf("\n");
            }
            break;
        }
        /* The file the failed call was on, by its last component. */
        const char *base = strrchr(IO.first_path, '/');
        base = base ? base + 1 : IO.first_path;
        if (rc == SNUG_OK) {
            r.absorbed++;
            tally(&r.why, g_log);
            if (wrong)
                defect(&r, sc, what, n, "SNUG_OK after a failed %s of %s, but a wrong result",
                       k_io_op[IO.first_op], IO.first_path);
        } else if (rc != SNUG_ERR_IO) {
            defect(&r, sc, what, n, "status not SNUG_ERR_IO after a failed %s: %s", k_io_op[IO.first_op], msg);
        } else if (!msg[0] || !strstr(msg, base)) {
            if (!STRICT_READ_NAMES && IO.first_op == SN_IO_READ && strstr(msg, sc->path))
                r.named_model++;
            else
                defect(&r, sc, what, n, "the message does not name '%s': %s", base, msg);
        }
        if (stuck)
            defect(&r, sc, what, n, "after this failure the same run without faults failed or was wrong: %s%s", msg,
                   "");
        if (n > 1000000) {
            defect(&r, sc, what, n, "%s%s", "the sweep does not end", "");
            break;
        }
    }
    sn_io_set_fault(NULL, NULL);
    return r;
}

static void report(const scen *sc, const char *what, sweep_res r, double t) {
    printf("%-16s %-12s N swept %5llu (clean run: %5llu calls)  absorbed %4llu  defects %d  %.1f s\n", sc->name, what,
           (unsigned long long)r.swept, (unsigned long long)r.calls, (unsigned long long)r.absorbed, r.bad, t);
    if (r.named_model)
        printf("%-16s   %llu read failure(s) of the data file named the model file instead "
               "(src/exec/exec.c; STRICT_READ_NAMES)\n", "", (unsigned long long)r.named_model);
    for (int i = 0; i < N_WHY && r.why.why[i][0]; i++)
        printf("%-16s   absorbed %4llu x: %s\n", "", (unsigned long long)r.why.n[i], r.why.why[i]);
}

static int exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

int main(int argc, char **argv) {
    const char *only = argc > 1 ? argv[1] : NULL; /* one scenario by name, for debugging */
    if (!exists(STORIES)) {
        fprintf(stderr, "FAIL: %s missing\n", STORIES);
        return 1;
    }
    char genai[1024], extdata[1024];
    const char *root = getenv("SNUG_MODELS");
    const char *home = getenv("HOME");
    if (root && root[0]) {
        snprintf(genai, sizeof genai, "%s/tiny/genai/model.onnx", root);
        snprintf(extdata, sizeof extdata, "%s/tiny/optimum-extdata/model.onnx", root);
    } else {
        snprintf(genai, sizeof genai, "%s/.cache/snug/models/tiny/genai/model.onnx", home ? home : "");
        snprintf(extdata, sizeof extdata, "%s/.cache/snug/models/tiny/optimum-extdata/model.onnx", home ? home : "");
    }
    snug_allocator fa = {f_malloc, f_realloc, f_free, NULL};
    if (snug_set_allocator(&fa) != SNUG_OK) {
        fprintf(stderr, "FAIL: snug_set_allocator\n");
        return 1;
    }

    scen scens[] = {
        {"stories260K", STORIES, "stories260K_kv.onnx", 0, 0, "2", 0, NULL, {-1, -1}, NULL},
        {"stories260K/load", STORIES, "stories260K_kv.onnx", 0, 1, "1", 0, NULL, {-1, -1}, NULL},
        {"tiny/genai", genai, "tiny/genai/model.onnx", 1, 0, "1", 0, NULL, {-1, -1}, NULL},
        {"optimum-extdata", extdata, "optimum-extdata/model.onnx", 1, 1, "1", 0, NULL, {-1, -1}, NULL},
        {"extdata/stream", extdata, "optimum-extdata/model.onnx", 1, 1, "1", 0, NULL, {-1, -1}, "3M"},
    };
    int missing = 0;
    for (size_t i = 0; i < sizeof scens / sizeof scens[0]; i++) {
        scen *sc = &scens[i];
        if (only && strcmp(only, sc->name))
            continue;
        if (!exists(sc->path)) {
            printf("%-16s missing (%s; tests/models/fetch_and_build.sh --preset ci builds it)\n", sc->name, sc->path);
            missing++;
            continue;
        }
        char msg[2048];
        int wrong = 0, stuck = 0;
        int fds0 = open_fds();
        g_probe = 1;
        int rc = run_scen(sc, msg, sizeof msg, &wrong, &stuck); /* the reference, and the allocator is counted */
        g_probe = 0;
        CHECK(rc == SNUG_OK && !wrong, "%s: the run without faults: %s %s", sc->name, snug_status_str(rc), msg);
        CHECK(g_probe_maps > 0 && g_probe_fds > fds0 && g_probe_live > 0,
              "%s: an open session shows %d map(s), %d more descriptor(s), %lld block(s)", sc->name, g_probe_maps,
              g_probe_fds - fds0, (long long)g_probe_live);
        CHECK(A.live == 0 && open_fds() == fds0 && file_maps(sc->map_name) == 0,
              "%s: the run without faults left %lld block(s), %d descriptor(s), %d map(s)", sc->name,
              (long long)A.live, open_fds() - fds0, file_maps(sc->map_name));
        if (rc != SNUG_OK)
            continue;
        for (int sticky = 1; sticky >= 0; sticky--) {
            double t0 = now_s();
            sweep_res r = sweep_alloc(sc, sticky);
            report(sc, sticky ? "alloc sticky" : "alloc once", r, now_s() - t0);
        }
        if (sc->weights_load)
            for (int sticky = 1; sticky >= 0; sticky--) {
                double t0 = now_s();
                sweep_res r = sweep_io(sc, sticky);
                report(sc, sticky ? "io sticky" : "io once", r, now_s() - t0);
            }
        free(sc->ref);
    }
    snug_set_allocator(NULL);
    if (g_fail) {
        fprintf(stderr, "test_faults: %d failure(s)\n", g_fail);
        return 1;
    }
    if (missing) {
        printf("test_faults: %d fixture(s) missing: skipped\n", missing);
        return 77;
    }
    printf("test_faults: ok\n");
    return 0;
}
