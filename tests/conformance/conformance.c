/* ONNX backend-test conformance runner.
 *
 * Runs every test_* case below the given suite folders (model.onnx plus
 * test_data_set_N/{input,output}_K.pb), each in a forked child with a time
 * limit so a crash or hang is reported as such, compares outputs with
 * rtol/atol (default 1e-3 / 1e-5), and prints one line per case that did not
 * pass and a summary per suite. Expected failures come from a file with one
 * "test_name reason" per line; the exit status is non-zero when a case
 * crashed or hung, failed without being expected to, or the pass rate is
 * below --min-pass. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "exec/exec.h"
#include "graph/graph.h"
#include "onnx/model.h"

enum { R_PASS = 0, R_FAIL = 1, R_UNSUPPORTED = 2, R_CRASH = 3, R_TIMEOUT = 4, R_LOADERR = 5 };
static const char *k_rname[] = {"PASS", "FAIL", "UNSUPPORTED", "CRASH", "TIMEOUT", "FAIL"};

typedef struct opts {
    double rtol, atol;
    const char *filter;
    const char *exclude;
    int verbose;
    int timeout_s;
    int no_fork;
    int threads;
} opts;

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted entries of dir starting with prefix; returns count. */
static int list_dir(const char *dir, const char *prefix, char ***out) {
    DIR *d = opendir(dir);
    *out = NULL;
    if (!d)
        return 0;
    int n = 0, cap = 0;
    char **v = NULL;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, prefix, strlen(prefix)))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            v = realloc(v, sizeof *v * (size_t)cap);
        }
        v[n++] = strdup(e->d_name);
    }
    closedir(d);
    if (n)
        qsort(v, (size_t)n, sizeof *v, cmp_names);
    *out = v;
    return n;
}

static void free_list(char **v, int n) {
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static int file_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

/* Compares got against want; writes a reason into msg on mismatch. */
static int compare(const sn_tensor *got, const sn_tensor *want, const opts *o, char *msg, size_t cap,
                   double *max_err) {
    if (want->kind == SN_KIND_NONE || got->kind == SN_KIND_NONE) {
        if (want->kind != got->kind) {
            snprintf(msg, cap, "optional: expected %s, got %s", want->kind == SN_KIND_NONE ? "none" : "a value",
                     got->kind == SN_KIND_NONE ? "none" : "a value");
            return 0;
        }
        return 1;
    }
    if (want->kind == SN_KIND_SEQUENCE) {
        if (got->kind != SN_KIND_SEQUENCE || got->n_items != want->n_items) {
            snprintf(msg, cap, "sequence: expected %lld items, got %s %lld", (long long)want->n_items,
                     got->kind == SN_KIND_SEQUENCE ? "sequence of" : "non-sequence", (long long)got->n_items);
            return 0;
        }
        for (int64_t i = 0; i < want->n_items; i++) {
            char sub[400];
            if (!compare(&((sn_tensor *)got->data)[i], &((sn_tensor *)want->data)[i], o, sub, sizeof sub, max_err)) {
                snprintf(msg, cap, "sequence item %lld: %s", (long long)i, sub);
                return 0;
            }
        }
        return 1;
    }
    if (got->kind != SN_KIND_TENSOR) {
        snprintf(msg, cap, "expected a tensor, got kind %d", got->kind);
        return 0;
    }
    char b1[160], b2[160];
    if (got->dtype != want->dtype) {
        snprintf(msg, cap, "dtype: expected %s, got %s", sn_dtype_name(want->dtype), sn_dtype_name(got->dtype));
        return 0;
    }
    if (!sn_shape_equal(got, want)) {
        snprintf(msg, cap, "shape: expected %s, got %s", sn_shape_str(want, b1, sizeof b1),
                 sn_shape_str(got, b2, sizeof b2));
        return 0;
    }
    int64_t n = sn_tensor_numel(want);
    if (want->dtype == SN_STRING) {
        const sn_string *a = got->data, *b = want->data;
        for (int64_t i = 0; i < n; i++)
            if (a[i].len != b[i].len || memcmp(a[i].ptr, b[i].ptr, a[i].len)) {
                snprintf(msg, cap, "string element %lld: expected '%.*s', got '%.*s'", (long long)i,
                         (int)(b[i].len > 40 ? 40 : b[i].len), b[i].ptr, (int)(a[i].len > 40 ? 40 : a[i].len),
                         a[i].ptr);
                return 0;
            }
        return 1;
    }
    if (want->dtype == SN_C64 || want->dtype == SN_C128 || want->dtype == SN_U4 || want->dtype == SN_I4) {
        size_t nb = sn_tensor_nbytes(want);
        if (memcmp(got->data, want->data, nb)) {
            snprintf(msg, cap, "bytes differ");
            return 0;
        }
        return 1;
    }
    bool isf = sn_dtype_is_float(want->dtype);
    for (int64_t i = 0; i < n; i++) {
        if (isf) {
            double a = sn_load_f64(got->dtype, got->data, (size_t)i), b = sn_load_f64(want->dtype, want->data, (size_t)i);
            if (isnan(b) && isnan(a))
                continue;
            if (isinf(b) && a == b)
                continue;
            double e = fabs(a - b);
            if (e > *max_err && !isnan(e))
                *max_err = e;
            if (!(e <= o->atol + o->rtol * fabs(b))) {
                snprintf(msg, cap, "element %lld: expected %.9g, got %.9g (abs err %.3g)", (long long)i, b, a, e);
                return 0;
            }
        } else {
            int64_t a = sn_load_i64(got->dtype, got->data, (size_t)i), b = sn_load_i64(want->dtype, want->data, (size_t)i);
            if (a != b) {
                snprintf(msg, cap, "element %lld: expected %lld, got %lld", (long long)i, (long long)b, (long long)a);
                return 0;
            }
        }
    }
    return 1;
}

static int read_value(const char *path, const sn_type *type, sn_tensor *t, void **owner, sn_err *err) {
    void *buf;
    size_t len;
    int rc = sn_file_read(path, &buf, &len, err);
    if (rc != SNUG_OK)
        return rc;
    rc = sn_value_decode_pb_typed(buf, len, type, t, owner, NULL, err);
    sn_free(buf);
    /* Older test data stores bfloat16 tensors with data_type UINT16. */
    if (rc == SNUG_OK && type && type->kind == SN_TYPE_TENSOR && type->elem == SN_BF16 && t->kind == SN_KIND_TENSOR &&
        t->dtype == SN_U16)
        t->dtype = SN_BF16;
    return rc;
}

/* Runs one case in this process; writes a one-line reason into msg. */
static int run_case(const char *dir, const opts *o, char *msg, size_t cap) {
    char path[4096];
    sn_err err = {0};
    sn_model *m = NULL;
    sn_graph *g = NULL;
    sn_exec *ex = NULL;
    sn_pool *pool = NULL;
    int result = R_FAIL;
    char **sets = NULL;
    int n_sets = 0;
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    int rc = sn_model_load(path, &m, &err);
    if (rc == SNUG_OK)
        rc = sn_graph_build(m, &g, &err);
    if (rc == SNUG_OK)
        rc = sn_pool_new(o->threads, &pool, &err);
    if (rc == SNUG_OK)
        rc = sn_exec_new(g, pool, NULL, &ex, &err);
    if (rc != SNUG_OK) {
        snprintf(msg, cap, "%s", err.msg);
        result = rc == SNUG_ERR_UNSUPPORTED ? R_UNSUPPORTED : R_LOADERR;
        goto done;
    }
    n_sets = list_dir(dir, "test_data_set_", &sets);
    if (!n_sets) {
        snprintf(msg, cap, "no test_data_set_* folders");
        goto done;
    }
    for (int s = 0; s < n_sets; s++) {
        sn_tensor in[64], out[64], want[64];
        void *in_own[64] = {0}, *want_own[64] = {0};
        int n_in = g->n_inputs, n_out = g->n_outputs, ok = 1;
        if (n_in > 64 || n_out > 64) {
            snprintf(msg, cap, "too many inputs/outputs");
            goto done;
        }
        memset(in, 0, sizeof in);
        for (int i = 0; i < n_in && ok; i++) {
            snprintf(path, sizeof path, "%s/%s/input_%d.pb", dir, sets[s], i);
            if (!file_exists(path)) {
                /* An optional input left out: feed an empty optional. */
                in[i].kind = SN_KIND_NONE;
                in[i].optional = 1;
                continue;
            }
            if (read_value(path, g->values[g->inputs[i]].declared, &in[i], &in_own[i], &err) != SNUG_OK) {
                snprintf(msg, cap, "reading %.500s: %.1000s", path, err.msg);
                ok = 0;
            }
        }
        for (int i = 0; i < n_out && ok; i++) {
            snprintf(path, sizeof path, "%s/%s/output_%d.pb", dir, sets[s], i);
            if (read_value(path, g->values[g->outputs[i]].declared, &want[i], &want_own[i], &err) != SNUG_OK) {
                snprintf(msg, cap, "reading %.500s: %.1000s", path, err.msg);
                ok = 0;
            }
        }
        if (ok && (sn_exec_replan_for(ex, in, SN_REPLAN_AUTO, &err) != SNUG_OK ||
                   sn_exec_run(ex, in, out, &err) != SNUG_OK)) {
            snprintf(msg, cap, "run: %s", err.msg);
            result = err.code == SNUG_ERR_UNSUPPORTED ? R_UNSUPPORTED : R_FAIL;
            ok = 0;
        }
        double max_err = 0;
        for (int i = 0; i < n_out && ok; i++) {
            char why[600];
            if (!compare(&out[i], &want[i], o, why, sizeof why, &max_err)) {
                snprintf(msg, cap, "%s output %d '%s': %s", sets[s], i, g->values[g->outputs[i]].name, why);
                ok = 0;
            }
        }
        for (int i = 0; i < 64; i++) {
            sn_free(in_own[i]);
            sn_free(want_own[i]);
        }
        if (!ok)
            goto done;
        snprintf(msg, cap, "max abs err %.3g", max_err);
    }
    result = R_PASS;
done:
    free_list(sets, n_sets);
    sn_exec_free(ex);
    sn_pool_free(pool);
    sn_graph_free(g);
    sn_model_free(m);
    return result;
}

/* Present when built with AddressSanitizer: children leave with _exit, which
 * skips the exit-time leak check, so it is run explicitly. */
extern void __lsan_do_leak_check(void) __attribute__((weak));

/* Runs a case in a child process with a time limit. */
static int run_isolated(const char *dir, const opts *o, char *msg, size_t cap) {
    if (o->no_fork)
        return run_case(dir, o, msg, cap);
    int fd[2];
    if (pipe(fd) != 0) {
        snprintf(msg, cap, "pipe: %s", strerror(errno));
        return R_FAIL;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        alarm((unsigned)o->timeout_s);
        char m[2048] = {0};
        int r = run_case(dir, o, m, sizeof m);
        unsigned char code = (unsigned char)r;
        if (write(fd[1], &code, 1) != 1 || write(fd[1], m, strlen(m)) < 0)
            _exit(99);
        close(fd[1]);
        if (__lsan_do_leak_check)
            __lsan_do_leak_check();
        _exit(0);
    }
    close(fd[1]);
    char buf[2049];
    size_t got = 0;
    ssize_t k;
    while (got < sizeof buf - 1 && (k = read(fd[0], buf + got, sizeof buf - 1 - got)) > 0)
        got += (size_t)k;
    close(fd[0]);
    buf[got] = 0;
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        snprintf(msg, cap, "%s (signal %d)", sig == SIGALRM ? "timed out" : "crashed", sig);
        return sig == SIGALRM ? R_TIMEOUT : R_CRASH;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || got < 1) {
        snprintf(msg, cap, "child exited with status %d (sanitizer report above?)",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return R_CRASH;
    }
    snprintf(msg, cap, "%s", buf + 1);
    return (unsigned char)buf[0];
}

typedef struct xfail {
    char **names;
    int n;
    int *seen;
} xfail;

static void load_xfail(const char *path, xfail *x) {
    memset(x, 0, sizeof *x);
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f)
        return;
    char line[1024];
    int cap = 0;
    while (fgets(line, sizeof line, f)) {
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '#' || *p == '\n' || !*p)
            continue;
        char *e = p;
        while (*e && *e != ' ' && *e != '\t' && *e != '\n')
            e++;
        *e = 0;
        if (x->n == cap) {
            cap = cap ? cap * 2 : 64;
            x->names = realloc(x->names, sizeof *x->names * (size_t)cap);
        }
        x->names[x->n++] = strdup(p);
    }
    fclose(f);
    x->seen = calloc((size_t)x->n + 1, sizeof *x->seen);
}

static int xfail_find(const xfail *x, const char *name) {
    for (int i = 0; i < x->n; i++)
        if (!strcmp(x->names[i], name))
            return i;
    return -1;
}

static void usage(void) {
    printf("usage: snug_conformance [options] [SUITE_DIR...]\n"
           "Runs ONNX backend test cases (SUITE_DIR/test_*/model.onnx + test_data_set_*).\n"
           "Default suites: the Debian libonnx-testdata folders node, pytorch-converted,\n"
           "pytorch-operator and simple under /usr/share/libonnx-testdata/data.\n\n"
           "  --filter SUBSTR     only cases whose name contains SUBSTR\n"
           "  --exclude SUBSTR    leave out cases whose name contains SUBSTR\n"
           "  --expected FILE     expected failures, one 'test_name reason' per line; any\n"
           "                      other failure makes the exit status 1\n"
           "  --min-pass FRACTION fail unless at least this fraction passes (default 0)\n"
           "  --rtol X --atol Y   tolerances (default 1e-3, 1e-5)\n"
           "  --timeout S         per-case time limit in seconds (default 60)\n"
           "  --threads N         worker threads per case (default 1)\n"
           "  --no-fork           run cases in this process (for debugging)\n"
           "  --verbose           print passing cases too\n");
}

int main(int argc, char **argv) {
    opts o = {1e-3, 1e-5, NULL, NULL, 0, 60, 0, 1};
    const char *xpath = NULL;
    double min_pass = 0;
    const char *dirs[64];
    int n_dirs = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage();
            return 0;
        } else if (!strcmp(a, "--filter") && i + 1 < argc)
            o.filter = argv[++i];
        else if (!strcmp(a, "--exclude") && i + 1 < argc)
            o.exclude = argv[++i];
        else if (!strcmp(a, "--expected") && i + 1 < argc)
            xpath = argv[++i];
        else if (!strcmp(a, "--min-pass") && i + 1 < argc)
            min_pass = atof(argv[++i]);
        else if (!strcmp(a, "--rtol") && i + 1 < argc)
            o.rtol = atof(argv[++i]);
        else if (!strcmp(a, "--atol") && i + 1 < argc)
            o.atol = atof(argv[++i]);
        else if (!strcmp(a, "--timeout") && i + 1 < argc)
            o.timeout_s = atoi(argv[++i]);
        else if (!strcmp(a, "--threads") && i + 1 < argc)
            o.threads = atoi(argv[++i]);
        else if (!strcmp(a, "--no-fork"))
            o.no_fork = 1;
        else if (!strcmp(a, "--verbose") || !strcmp(a, "-v"))
            o.verbose = 1;
        else if (a[0] == '-') {
            fprintf(stderr, "snug_conformance: unknown option '%s' (see --help)\n", a);
            return 2;
        } else if (n_dirs < 64)
            dirs[n_dirs++] = a;
    }
    static const char *k_default[] = {"/usr/share/libonnx-testdata/data/node",
                                      "/usr/share/libonnx-testdata/data/pytorch-converted",
                                      "/usr/share/libonnx-testdata/data/pytorch-operator",
                                      "/usr/share/libonnx-testdata/data/simple"};
    if (!n_dirs)
        for (int i = 0; i < 4; i++)
            dirs[n_dirs++] = k_default[i];
    xfail xf;
    load_xfail(xpath, &xf);
    int tot[6] = {0}, unexpected = 0, hard = 0, cases = 0;
    for (int d = 0; d < n_dirs; d++) {
        char **tests;
        int nt = list_dir(dirs[d], "test_", &tests);
        if (!nt) {
            fprintf(stderr, "snug_conformance: no test_* cases in %s\n", dirs[d]);
            hard++;
            continue;
        }
        int cnt[6] = {0};
        for (int t = 0; t < nt; t++) {
            if ((o.filter && !strstr(tests[t], o.filter)) || (o.exclude && strstr(tests[t], o.exclude)))
                continue;
            char path[4096], msg[2048];
            snprintf(path, sizeof path, "%s/%s", dirs[d], tests[t]);
            if (!file_exists(path) || (snprintf(path + strlen(path), 20, "/model.onnx"), !file_exists(path)))
                continue;
            snprintf(path, sizeof path, "%s/%s", dirs[d], tests[t]);
            struct timespec t0, t1;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            int r = run_isolated(path, &o, msg, sizeof msg);
            clock_gettime(CLOCK_MONOTONIC, &t1);
            double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
            cnt[r]++;
            cases++;
            int xi = xfail_find(&xf, tests[t]);
            if (xi >= 0)
                xf.seen[xi] = 1;
            if (r == R_CRASH || r == R_TIMEOUT)
                hard++;
            else if (r != R_PASS && xi < 0)
                unexpected++;
            if (r != R_PASS || o.verbose)
                printf("%-11s %s%s  %s (%.0f ms)\n", k_rname[r], tests[t], r != R_PASS && xi >= 0 ? " [expected]" : "",
                       msg, ms);
            if (r == R_PASS && xi >= 0)
                printf("NOTE        %s passes but is listed as an expected failure\n", tests[t]);
        }
        const char *base = strrchr(dirs[d], '/');
        base = base ? base + 1 : dirs[d];
        printf("suite %-20s passed %d, failed %d, unsupported %d, crashed %d, timed out %d\n", base, cnt[R_PASS],
               cnt[R_FAIL] + cnt[R_LOADERR], cnt[R_UNSUPPORTED], cnt[R_CRASH], cnt[R_TIMEOUT]);
        for (int k = 0; k < 6; k++)
            tot[k] += cnt[k];
        free_list(tests, nt);
    }
    int failed = cases - tot[R_PASS];
    double rate = cases ? (double)tot[R_PASS] / cases : 0;
    printf("total: %d cases, pass rate %.1f%%, unexpected failures %d, crashes/hangs %d\n", cases, rate * 100,
           unexpected, tot[R_CRASH] + tot[R_TIMEOUT]);
    printf("conformance: %d passed, %d failed\n", tot[R_PASS], failed);
    int bad = hard > 0 || unexpected > 0 || rate < min_pass;
    for (int i = 0; i < xf.n; i++)
        free(xf.names[i]);
    free(xf.names);
    free(xf.seen);
    return bad ? 1 : 0;
}
