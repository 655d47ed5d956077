/* snug — the command-line tool. See `snug --help`. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"
#include "snug.h"

void cli_die_usage(const char *cmd, const char *msg) {
    fprintf(stderr, "snug %s: %s (see 'snug %s --help')\n", cmd, msg, cmd);
    exit(2);
}
#define die_usage cli_die_usage

void cli_model_error(const char *cmd, const char *path, const char *msg) {
    size_t n = strlen(path);
    if (!strncmp(msg, path, n) && msg[n] == ':')
        fprintf(stderr, "snug %s: %s\n", cmd, msg);
    else
        fprintf(stderr, "snug %s: %s: %s\n", cmd, path, msg);
}

/* ---- snug info ----------------------------------------------------------- */

static void print_type(const snug_value_info *v) {
    if (v->kind == SNUG_KIND_SEQUENCE) {
        printf("sequence<%s>", snug_dtype_name(v->dtype));
        return;
    }
    if (v->optional)
        printf("optional ");
    printf("%s ", snug_dtype_name(v->dtype));
    if (v->rank < 0) {
        printf("[?]");
        return;
    }
    printf("[");
    for (int i = 0; i < v->rank; i++) {
        if (i)
            printf(", ");
        if (v->dims[i] >= 0)
            printf("%lld", (long long)v->dims[i]);
        else
            printf("%s", v->dim_names[i] ? v->dim_names[i] : "?");
    }
    printf("]");
}

/* The n graph inputs or outputs (get: snug_model_input or _output), a line each. */
static void print_values(const snug_model *m, int n, int (*get)(const snug_model *, int, snug_value_info *)) {
    for (int i = 0; i < n; i++) {
        snug_value_info v;
        get(m, i, &v);
        printf("  %-32s ", v.name);
        print_type(&v);
        printf("\n");
    }
}

static int cmp_count(const void *a, const void *b) {
    const snug_op_count *x = a, *y = b;
    return x->count != y->count ? y->count - x->count : strcmp(x->op, y->op);
}

void cli_human_bytes(double b, char *buf, size_t cap) {
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (b >= 1024 && i < 4) {
        b /= 1024;
        i++;
    }
    snprintf(buf, cap, i ? "%.2f %s" : "%.0f %s", b, u[i]);
}

long cli_parse_long(const char *cmd, const char *opt, const char *v, long lo, long hi) {
    char *end;
    errno = 0;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || !*v || *end || errno || x < lo || x > hi) {
        char m[160];
        snprintf(m, sizeof m, "%s wants an integer from %ld to %ld, got '%s'", opt, lo, hi, v ? v : "");
        cli_die_usage(cmd, m);
    }
    return x;
}

unsigned long long cli_mem_budget(const char *cmd, const char *val, bool *device) {
    const char *eq = val ? strchr(val, '=') : NULL;
    if (!eq)
        cli_die_usage(cmd, "--mem takes DEVICE=SIZE, e.g. --mem host=2G or --mem gpu=4G");
    size_t dl = (size_t)(eq - val);
    static const char *const host[] = {"host", "cpu"}, *const acc[] = {"gpu", "opencl", "accelerator", "cuda"};
    *device = false;
    bool known = false;
    for (size_t k = 0; k < 2 && !known; k++)
        known = strlen(host[k]) == dl && !strncasecmp(val, host[k], dl);
    for (size_t k = 0; k < 4 && !known; k++)
        known = *device = strlen(acc[k]) == dl && !strncasecmp(val, acc[k], dl);
    if (!known) {
        fprintf(stderr, "snug %s: --mem %s: no device '%.*s' (host, or the accelerator: gpu, opencl)\n", cmd, val,
                (int)dl, val);
        exit(2);
    }
    char e[1024];
    uint64_t b = 0;
    if (snug_parse_size(eq + 1, &b, e, sizeof e) != SNUG_OK) {
        fprintf(stderr, "snug %s: --mem %s: %s\n", cmd, val, e);
        exit(2);
    }
    return (unsigned long long)b;
}

bool cli_placement_arg(const char *cmd, const char *a, const char *v, cli_placement *p) {
    const char *key = NULL, *val = v;
    if (!strcmp(a, "--device"))
        key = "snug.device";
    else if (!strcmp(a, "-ngl") || !strcmp(a, "--n-gpu-layers"))
        key = "snug.n_gpu_layers";
    else if (!strcmp(a, "--rules"))
        key = "session.name_based_layer_assignment";
    else if (!strcmp(a, "--overflow"))
        key = "snug.placement_overflow";
    else if (!strcmp(a, "--mem") && v && (!strncasecmp(v, "gpu=", 4) || !strncasecmp(v, "opencl=", 7) ||
                                         !strncasecmp(v, "accelerator=", 12) || !strncasecmp(v, "cuda=", 5))) {
        bool dev;
        snprintf(p->mem, sizeof p->mem, "%llu", cli_mem_budget(cmd, v, &dev));
        key = "snug.mem.gpu", val = p->mem;
    } else
        return false;
    if (!v || !*v) {
        char m[96];
        snprintf(m, sizeof m, "%s needs a value", a);
        cli_die_usage(cmd, m);
    }
    if (p->n == 8)
        cli_die_usage(cmd, "too many placement options");
    if (!strcmp(key, "snug.device"))
        p->device = v;
    p->kv[2 * p->n] = key;
    p->kv[2 * p->n + 1] = val;
    p->n++;
    return true;
}

/* The tools' logger: the library's warnings and errors to stderr, after
 * "snug CMD:" (user: the command's name). */
void cli_log(void *user, int level, const char *msg) {
    fprintf(stderr, "snug %s: %s: %s\n", user ? (const char *)user : "", level == SNUG_LOG_ERROR ? "error" : "warning",
            msg);
}

static int cmd_info(int argc, char **argv) {
    const char *path = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: snug info MODEL.onnx\n\n"
                   "Prints the model's inputs and outputs with types and shapes (symbolic dims\n"
                   "by name), opset imports, an op histogram, the parameter count and the weight\n"
                   "bytes. Weights are mapped, not read: this is fast on any model size.\n");
            return 0;
        }
        if (argv[i][0] == '-')
            die_usage("info", "unknown option");
        if (path)
            die_usage("info", "one model at a time");
        path = argv[i];
    }
    if (!path)
        die_usage("info", "missing MODEL");
    char err[1024];
    snug_model *m = NULL;
    if (snug_model_open(path, &m, err, sizeof err) != SNUG_OK) {
        cli_model_error("info", path, err);
        return 1;
    }
    snug_model_info mi;
    snug_model_get_info(m, &mi);
    printf("model      %s\n", path);
    printf("producer   %s %s, ir_version %lld\n", mi.producer_name, mi.producer_version, (long long)mi.ir_version);
    printf("opsets    ");
    for (int i = 0; i < mi.n_opsets; i++) {
        const char *domain;
        int64_t version;
        snug_model_opset(m, i, &domain, &version);
        printf(" %s:%lld", domain[0] ? domain : "ai.onnx", (long long)version);
    }
    printf("\ninputs     %d\n", mi.n_inputs);
    print_values(m, mi.n_inputs, snug_model_input);
    printf("outputs    %d\n", mi.n_outputs);
    print_values(m, mi.n_outputs, snug_model_output);
    char wb[64];
    cli_human_bytes((double)mi.weight_bytes, wb, sizeof wb);
    printf("parameters %lld (%d initializers)\n", (long long)mi.parameters, mi.n_initializers);
    printf("weights    %llu bytes (%s)\n", (unsigned long long)mi.weight_bytes, wb);
    snug_layer_map li;
    snug_model_layers(m, &li);
    if (li.n_layers > 0)
        printf("layers     %d (nodes: %d by name, %d by value names, %d by structure, %d from neighbours; %d pre, "
               "%d post)\n",
               li.n_layers, li.nodes_named, li.nodes_from_value_names, li.nodes_from_structure,
               li.nodes_from_neighbours, li.nodes_pre, li.nodes_post);
    snug_op_count h[512];
    int total = 0, nh = snug_model_op_counts(m, h, 512, &total);
    qsort(h, (size_t)nh, sizeof *h, cmp_count);
    printf("nodes      %d (%d op types)\n", total, nh);
    for (int i = 0; i < nh; i++)
        printf("  %6d  %s%s%s\n", h[i].count, h[i].domain, h[i].domain[0] ? "." : "", h[i].op);
    snug_model_free(m);
    return 0;
}

/* ---- snug run ------------------------------------------------------------ */

typedef struct kv {
    const char *key, *val;
} kv;

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Fills v deterministically: floats uniform in [-1, 1), integers in
 * [0, 10), bools alternating. */
static void fill_input(snug_value *v, uint64_t seed) {
    snug_tensor t;
    snug_value_get_tensor(v, &t);
    int64_t n = snug_value_count(v);
    uint64_t s = seed * 2654435761u + 88172645463325252ull;
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = rng_next(&s);
        if (snug_dtype_class(t.dtype) == SNUG_DTYPE_FLOAT)
            snug_value_set_f64(v, i, (double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0);
        else if (t.dtype == SNUG_BOOL)
            snug_value_set_f64(v, i, (double)(i & 1));
        else if (t.dtype == SNUG_STRING)
            snug_value_set_string(v, i, "snug", 4);
        else
            snug_value_set_f64(v, i, (double)(r % 10));
    }
}

/* LLM inputs whose generated values must make sense: an attention mask of
 * ones (masks decide sequence lengths in GroupQueryAttention) and
 * position_ids counting 0, 1, ... along the last axis. */
static void fill_llm_input(const char *name, snug_value *v) {
    snug_tensor t;
    snug_value_get_tensor(v, &t);
    if (t.rank < 1 || snug_dtype_class(t.dtype) != SNUG_DTYPE_INT)
        return;
    int64_t n = snug_value_count(v), last = t.dims[t.rank - 1];
    if (strstr(name, "attention_mask"))
        for (int64_t i = 0; i < n; i++)
            snug_value_set_f64(v, i, 1.0);
    else if (!strcmp(name, "position_ids") && last > 0)
        for (int64_t i = 0; i < n; i++)
            snug_value_set_f64(v, i, (double)(i % last));
}

/* "[1,4,512]": a run's outputs have concrete shapes. */
static const char *shape_str(const snug_tensor *t, char *buf, size_t cap) {
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int k = 0; k < t->rank && o < cap; k++)
        o += (size_t)snprintf(buf + o, cap - o, k ? ",%lld" : "%lld", (long long)t->dims[k]);
    if (o < cap)
        snprintf(buf + o, cap - o, "]");
    return buf;
}

static void summarize(const char *name, const snug_value *v) {
    char sb[256];
    snug_tensor t;
    snug_value_get_tensor(v, &t);
    int64_t n = snug_value_count(v);
    if (snug_value_kind(v) == SNUG_KIND_NONE) {
        printf("%-28s optional: none\n", name);
        return;
    }
    if (snug_value_kind(v) == SNUG_KIND_SEQUENCE) {
        printf("%-28s sequence of %lld %s tensors\n", name, (long long)n, snug_dtype_name(t.dtype));
        return;
    }
    printf("%-28s %-8s %-20s", name, snug_dtype_name(t.dtype), shape_str(&t, sb, sizeof sb));
    if (t.dtype == SNUG_STRING || n <= 0 || t.dtype == SNUG_COMPLEX64 || t.dtype == SNUG_COMPLEX128) {
        printf(" (%lld elements)\n", (long long)n);
        return;
    }
    double mn = INFINITY, mx = -INFINITY, sum = 0;
    int64_t nan = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = snug_value_get_f64(v, i);
        if (isnan(x)) {
            nan++;
            continue;
        }
        mn = x < mn ? x : mn;
        mx = x > mx ? x : mx;
        sum += x;
    }
    printf(" min %-12.6g max %-12.6g mean %-12.6g", mn, mx, n > nan ? sum / (double)(n - nan) : NAN);
    if (nan)
        printf(" nan %lld", (long long)nan);
    printf("\n");
}

static const char k_run_help[] =
    "usage: snug run MODEL.onnx [options]\n\n"
    "Runs the model once and prints a summary of each output (dtype, shape, min,\n"
    "max, mean), or writes the outputs with --output-dir.\n\n"
    "  --input NAME=FILE   feed input NAME from FILE: .npy, or an ONNX TensorProto /\n"
    "                      SequenceProto / OptionalProto .pb (as --output-dir writes)\n"
    "  --input-dir DIR     feed inputs from DIR/input_<i>.pb in graph-input order (the\n"
    "                      ONNX backend-test layout); --input entries take precedence\n"
    "  --dim NAME=VALUE    bind the symbolic dim NAME (e.g. batch_size=1) for inputs\n"
    "                      that are generated; unbound symbolic dims default to 1\n"
    "  --seed N            seed for generated inputs (default 1); inputs not given\n"
    "                      are filled deterministically: floats in [-1,1), integers in\n"
    "                      [0,10), bools alternating; an attention_mask with ones and\n"
    "                      position_ids counting 0, 1, ... along the last axis\n"
    "  --output-dir DIR    write output i to DIR/output_<i>.pb (created if missing)\n"
    "  --threads N         worker threads (default: all cores)\n"
    CLI_PLACEMENT_HELP
    "  --bound NAME=VALUE  plan once with the symbolic dim NAME at most VALUE (sets\n"
    "                      session.max_shape_override for every input from the\n"
    "                      declared shapes; give one per symbolic dim)\n"
    "  --config KEY=VALUE  a session config entry (ONNX Runtime keys such as\n"
    "                      session.collect_node_memory_stats_to_file; docs/config.md)\n"
    "  --repeat N          run N times and report the time per run\n"
    "  --verbose           also print the execution plan's figures (nodes folded /\n"
    "                      static / dynamic, arena size against its lower bound)\n";

/* --dim/--bound values as bindings for snug_dim_eval. */
static bool dim_eval(const char *text, const kv *dims, const int64_t *vals, int n, int64_t *out) {
    snug_dim b[64];
    for (int i = 0; i < n && i < 64; i++)
        b[i] = (snug_dim){dims[i].key, vals[i]};
    return snug_dim_eval(text, b, n < 64 ? n : 64, out) == SNUG_OK;
}

/* The symbolic name of dim k of v, or NULL. */
static const char *dim_name(const snug_value_info *v, int k) {
    return v->dim_names[k] && v->dim_names[k][0] ? v->dim_names[k] : NULL;
}

/* session.max_shape_override text for every input of the model at path,
 * with symbolic dims (and dim expressions) at the given bounds. NULL after
 * printing an error. */
static char *bounds_override(const char *path, const kv *b, int n) {
    int64_t vals[64];
    for (int i = 0; i < n; i++) {
        char *end;
        vals[i] = strtoll(b[i].val, &end, 10);
        if (!*b[i].val || *end || vals[i] < 1) {
            fprintf(stderr, "snug run: --bound %s=%s: the bound must be a positive integer\n", b[i].key, b[i].val);
            return NULL;
        }
    }
    char err[1024];
    snug_model *m = NULL;
    if (snug_model_open(path, &m, err, sizeof err) != SNUG_OK) {
        cli_model_error("run", path, err);
        return NULL;
    }
    snug_model_info mi;
    snug_model_get_info(m, &mi);
    size_t cap = 256 + (size_t)mi.n_inputs * 256, o = 0;
    char *text = malloc(cap);
    text[0] = 0;
    for (int i = 0; i < mi.n_inputs && text; i++) {
        snug_value_info v;
        snug_model_input(m, i, &v);
        if (v.kind != SNUG_KIND_TENSOR || v.rank < 0)
            continue;
        o += (size_t)snprintf(text + o, cap - o, "%s%s:[", o ? ";" : "", v.name);
        for (int k = 0; k < v.rank; k++) {
            int64_t x = v.dims[k];
            const char *nm = dim_name(&v, k);
            if (x < 0 && !(nm && dim_eval(nm, b, vals, n, &x))) {
                fprintf(stderr, "snug run: input '%s' dim %d (%s) has no --bound\n", v.name, k, nm ? nm : "?");
                free(text);
                text = NULL;
                break;
            }
            o += (size_t)snprintf(text + o, cap - o, "%s%lld", k ? "," : "", (long long)(x < 1 ? 1 : x));
        }
        if (text)
            o += (size_t)snprintf(text + o, cap - o, "]");
    }
    snug_model_free(m);
    return text;
}

static int cmd_run(int argc, char **argv) {
    const char *path = NULL, *input_dir = NULL, *output_dir = NULL, *threads = NULL;
    kv inputs[256], dims[64], configs[64], bounds[64];
    int n_inputs = 0, n_dims = 0, n_configs = 0, n_bounds = 0, repeat = 1, verbose = 0;
    cli_placement place = {0};
    uint64_t seed = 1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(k_run_help, stdout);
            return 0;
        } else if (!strcmp(a, "--input") || !strcmp(a, "--dim") || !strcmp(a, "--config") ||
                   !strcmp(a, "--bound")) {
            if (!val || !strchr(val, '=') || val[0] == '=')
                die_usage("run", !strcmp(a, "--input") ? "--input takes NAME=FILE"
                                 : !strcmp(a, "--config") ? "--config takes KEY=VALUE"
                                                          : "--dim and --bound take NAME=VALUE");
            char *eq = strchr(argv[i + 1], '=');
            *eq = 0;
            if (!strcmp(a, "--input") && n_inputs < 256)
                inputs[n_inputs++] = (kv){argv[i + 1], eq + 1};
            else if (!strcmp(a, "--dim") && n_dims < 64)
                dims[n_dims++] = (kv){argv[i + 1], eq + 1};
            else if (!strcmp(a, "--config") && n_configs < 64)
                configs[n_configs++] = (kv){argv[i + 1], eq + 1};
            else if (!strcmp(a, "--bound") && n_bounds < 64)
                bounds[n_bounds++] = (kv){argv[i + 1], eq + 1};
            i++;
        } else if (!strcmp(a, "--input-dir") && val) {
            input_dir = val;
            i++;
        } else if (!strcmp(a, "--output-dir") && val) {
            output_dir = val;
            i++;
        } else if (!strcmp(a, "--threads") && val) {
            threads = val;
            i++;
        } else if (cli_placement_arg("run", a, val, &place)) {
            i++;
        } else if (!strcmp(a, "--seed") && val) {
            seed = strtoull(val, NULL, 10);
            i++;
        } else if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
            verbose = 1;
        } else if (!strcmp(a, "--repeat") && val) {
            repeat = atoi(val);
            if (repeat < 1)
                die_usage("run", "--repeat takes a positive count");
            i++;
        } else if (a[0] == '-') {
            char m[300];
            snprintf(m, sizeof m, "unknown option or missing value: '%s'", a);
            die_usage("run", m);
        } else if (path) {
            die_usage("run", "one model at a time");
        } else {
            path = a;
        }
    }
    if (!path)
        die_usage("run", "missing MODEL");
    int64_t dimv[64];
    for (int i = 0; i < n_dims; i++) {
        char *end;
        dimv[i] = strtoll(dims[i].val, &end, 10);
        if (!*dims[i].val || *end || dimv[i] < 0) {
            fprintf(stderr, "snug run: --dim %s=%s: the value must be a non-negative integer\n", dims[i].key,
                    dims[i].val);
            return 2;
        }
    }
    char *override = NULL;
    if (n_bounds && !(override = bounds_override(path, bounds, n_bounds)))
        return 1;
    snug_options *opts = snug_options_new();
    snug_options_set_logger(opts, cli_log, "run", SNUG_LOG_WARN); /* what the library warns of */
    if (override)
        snug_options_set(opts, "session.max_shape_override", override);
    free(override);
    if (threads)
        snug_options_set(opts, "snug.threads", threads);
    for (int k = 0; k < place.n; k++)
        snug_options_set(opts, place.kv[2 * k], place.kv[2 * k + 1]);
    for (int k = 0; k < n_configs; k++)
        snug_options_set(opts, configs[k].key, configs[k].val);
    char err[1024];
    snug_session *s = NULL;
    int rc = snug_session_create(path, opts, &s, err, sizeof err);
    snug_options_free(opts);
    if (rc != SNUG_OK) {
        cli_model_error("run", path, err);
        return 1;
    }
    const snug_model *m = snug_session_model(s);
    snug_model_info mi;
    snug_model_get_info(m, &mi);
    int nin = mi.n_inputs, nout = mi.n_outputs, status = 1;
    snug_value **in = calloc((size_t)nin + 1, sizeof *in);
    const snug_value **out = calloc((size_t)nout + 1, sizeof *out);
    for (int k = 0; k < n_inputs; k++) {
        bool found = false;
        for (int i = 0; i < nin; i++)
            found |= !strcmp(snug_session_input_name(s, i), inputs[k].key);
        if (!found) {
            fprintf(stderr, "snug run: --input %s: the model has no input of that name (inputs:", inputs[k].key);
            for (int i = 0; i < nin; i++)
                fprintf(stderr, " %s", snug_session_input_name(s, i));
            fprintf(stderr, ")\n");
            goto done;
        }
    }
    for (int k = 0; k < n_dims; k++) {
        bool found = false;
        for (int sy = 0; sy < mi.n_dims; sy++)
            found |= !strcmp(snug_model_dim_name(m, sy), dims[k].key);
        if (!found) {
            fprintf(stderr, "snug run: --dim %s: the model has no symbolic dim of that name", dims[k].key);
            if (mi.n_dims) {
                fprintf(stderr, " (it has:");
                for (int sy = 0; sy < mi.n_dims; sy++)
                    fprintf(stderr, " %s", snug_model_dim_name(m, sy));
                fprintf(stderr, ")");
            }
            fprintf(stderr, "\n");
            goto done;
        }
    }
    for (int i = 0; i < nin; i++) {
        snug_value_info v;
        snug_model_input(m, i, &v);
        const char *file = NULL;
        char pbuf[4096];
        for (int k = 0; k < n_inputs; k++)
            if (!strcmp(inputs[k].key, v.name))
                file = inputs[k].val;
        if (!file && input_dir) {
            snprintf(pbuf, sizeof pbuf, "%s/input_%d.pb", input_dir, i);
            struct stat st;
            if (stat(pbuf, &st) == 0)
                file = pbuf;
        }
        if (file) {
            if (snug_value_read(m, i, file, &in[i], err, sizeof err) != SNUG_OK) {
                fprintf(stderr, "snug run: input '%s' from %s: %s\n", v.name, file, err);
                goto done;
            }
            continue;
        }
        /* Generate from the declared type. */
        if (v.kind != SNUG_KIND_TENSOR || v.rank < 0 || snug_dtype_class(v.dtype) == SNUG_DTYPE_INVALID) {
            fprintf(stderr, "snug run: input '%s' has no tensor type with a known rank; give it with --input\n",
                    v.name);
            goto done;
        }
        int64_t shape[SNUG_MAX_RANK];
        for (int k = 0; k < v.rank; k++) {
            shape[k] = v.dims[k];
            if (v.dims[k] >= 0)
                continue;
            int64_t val = 1;
            const char *nm = dim_name(&v, k);
            bool bound = nm && dim_eval(nm, dims, dimv, n_dims, &val);
            if (!bound)
                fprintf(stderr, "snug run: note: input '%s' dim %d (%s) not bound, using 1 (--dim NAME=VALUE)\n",
                        v.name, k, nm ? nm : "?");
            shape[k] = val;
        }
        if (snug_value_new_input(m, i, v.rank, shape, &in[i]) != SNUG_OK) {
            fprintf(stderr, "snug run: input '%s' is too large to generate\n", v.name);
            goto done;
        }
        fill_input(in[i], seed + (uint64_t)i);
        fill_llm_input(v.name, in[i]);
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int r = 0; r < repeat; r++) {
        if (snug_session_run_values(s, (const snug_value *const *)in, nin, out, nout) != SNUG_OK) {
            fprintf(stderr, "snug run: %s\n", snug_session_error(s));
            goto done;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = ((double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6) / repeat;
    if (output_dir) {
        mkdir(output_dir, 0777);
        for (int i = 0; i < nout; i++) {
            char opath[4096];
            snprintf(opath, sizeof opath, "%s/output_%d.pb", output_dir, i);
            if (snug_value_write(out[i], snug_session_output_name(s, i), opath, err, sizeof err) != SNUG_OK) {
                fprintf(stderr, "snug run: %s\n", err);
                goto done;
            }
        }
        fprintf(stderr, "wrote %d outputs to %s (%.3f ms per run)\n", nout, output_dir, ms);
    } else {
        for (int i = 0; i < nout; i++)
            summarize(snug_session_output_name(s, i), out[i]);
        printf("time       %.3f ms per run (%d run%s)\n", ms, repeat, repeat > 1 ? "s" : "");
    }
    if (verbose) {
        snug_session_stats st;
        snug_session_get_stats(s, &st);
        char a[64], l[64], f[64];
        cli_human_bytes((double)st.arena_bytes, a, sizeof a);
        cli_human_bytes((double)st.lower_bound, l, sizeof l);
        cli_human_bytes((double)st.folded_bytes, f, sizeof f);
        printf("plan       %d node(s) folded (%s), %d static (%d in place, %d run in groups, %d in their jobs), %d "
               "dynamic; arena %s (lower bound %s); %d plan(s) made\n",
               st.n_folded, f, st.n_static, st.n_inplace, st.n_grouped, st.n_tails, st.n_dynamic, a, l, st.n_plans);
    }
    status = 0;
done:
    for (int i = 0; i < nin; i++)
        snug_value_free(in[i]);
    free(in);
    free(out);
    snug_session_free(s);
    return status;
}

static const char k_help[] =
    "snug " SNUG_VERSION " — run ONNX models on devices with less memory than the model wants\n\n"
    "usage: snug COMMAND [options]   (snug COMMAND --help for each)\n\n"
    "commands:\n"
    "  info MODEL      inputs, outputs, opsets, op histogram, parameters, weight bytes\n"
    "  run MODEL       one inference with inputs from files or generated\n"
    "  plan MODEL      the memory plan without running: per layer and device, weights,\n"
    "                  KV, activations, workspace and their sources; --json, --svg\n"
    "  profile MODEL   per-node memory of one run, in ONNX Runtime's node-stats format\n"
    "  bench MODEL     LLM prefill and decode tokens/s, time to first token, peak RSS\n"
    "  generate DIR    text generation with an LLM folder: -p TEXT, or an interactive chat\n"
    "  serve DIR       an OpenAI-compatible HTTP server for an LLM folder\n"
    "  ops             the operators this build implements\n";

static int cmd_ops(int argc, char **argv) {
    if (argc > 0 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) {
        printf("usage: snug ops\n\nLists every implemented operator as domain, name and the opset it serves from.\n");
        return 0;
    }
    for (int i = 0; i < snug_op_table_size(); i++) {
        snug_op_def d;
        snug_op_table_get(i, &d);
        printf("%-16s %-32s %d\n", d.domain[0] ? d.domain : "ai.onnx", d.name, d.since_version);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        fputs(k_help, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("snug %s\n", SNUG_VERSION);
        return 0;
    }
    if (!strcmp(argv[1], "info"))
        return cmd_info(argc - 2, argv + 2);
    if (!strcmp(argv[1], "run"))
        return cmd_run(argc - 2, argv + 2);
    if (!strcmp(argv[1], "ops"))
        return cmd_ops(argc - 2, argv + 2);
    int snug_cmd_plan(int argc, char **argv), snug_cmd_profile(int argc, char **argv); /* snug_plan.c */
    if (!strcmp(argv[1], "plan"))
        return snug_cmd_plan(argc - 2, argv + 2);
    if (!strcmp(argv[1], "profile"))
        return snug_cmd_profile(argc - 2, argv + 2);
    if (!strcmp(argv[1], "bench")) { int cmd_bench(int, char **); return cmd_bench(argc - 2, argv + 2); }
    if (!strcmp(argv[1], "generate")) { int cmd_generate(int, char **); return cmd_generate(argc - 2, argv + 2); }
    if (!strcmp(argv[1], "serve")) {
#ifdef SNUG_WITH_SERVE
        int cmd_serve(int, char **);
        return cmd_serve(argc - 2, argv + 2);
#else
        fprintf(stderr, "snug serve: this build has no server: libmicrohttpd or the tokenizer's libraries were "
                        "not found when it was configured (scripts/deps.sh installs them)\n");
        return 1;
#endif
    }
    fprintf(stderr, "snug: unknown command '%s'\n\n%s", argv[1], k_help);
    return 2;
}
