/* snug — the command-line tool. See `snug --help`. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"
#include "exec/session.h"
#include "onnx/model.h"
#include "ops/op.h"

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

static void print_type(const sn_graph *g, const sn_value *v) {
    const sn_tensor *t = &v->info;
    const sn_type *d = v->declared;
    if (t->kind == SN_KIND_SEQUENCE) {
        printf("sequence<%s>", sn_dtype_name(t->dtype));
        return;
    }
    if (t->optional)
        printf("optional ");
    printf("%s ", sn_dtype_name(t->dtype));
    if (t->rank < 0) {
        printf("[?]");
        return;
    }
    printf("[");
    for (int i = 0; i < t->rank; i++) {
        int64_t x = t->dims[i];
        if (i)
            printf(", ");
        if (x >= 0)
            printf("%lld", (long long)x);
        else if (x <= SN_DIM_SYM(0))
            printf("%s", g->syms[SN_DIM_SYM_ID(x)]);
        else if (d && d->kind == SN_TYPE_TENSOR && i < d->rank && d->dim_params[i])
            printf("%s", d->dim_params[i]);
        else
            printf("?");
    }
    printf("]");
}

typedef struct opcount {
    const char *domain, *op;
    int n;
} opcount;

static void count_ops(const sn_graph *g, opcount *h, int *nh, int cap, int *total) {
    for (int i = 0; i < g->n_nodes; i++) {
        const sn_pnode *p = g->nodes[i].p;
        int k = 0;
        for (; k < *nh; k++)
            if (!strcmp(h[k].op, p->op_type) && !strcmp(h[k].domain, p->domain))
                break;
        if (k == *nh && *nh < cap)
            h[(*nh)++] = (opcount){p->domain, p->op_type, 0};
        if (k < *nh)
            h[k].n++;
        (*total)++;
        for (int s = 0; s < g->nodes[i].n_sub; s++)
            count_ops(g->nodes[i].sub[s], h, nh, cap, total);
    }
}

static int cmp_count(const void *a, const void *b) {
    const opcount *x = a, *y = b;
    return x->n != y->n ? y->n - x->n : strcmp(x->op, y->op);
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
    sn_err err = {0};
    sn_model *m = NULL;
    sn_graph *g = NULL;
    if (sn_model_load(path, &m, &err) != SNUG_OK || sn_graph_build(m, &g, &err) != SNUG_OK) {
        cli_model_error("info", path, err.msg);
        sn_graph_free(g);
        sn_model_free(m);
        return 1;
    }
    printf("model      %s\n", path);
    printf("producer   %s %s, ir_version %lld\n", m->producer_name ? m->producer_name : "",
           m->producer_version ? m->producer_version : "", (long long)m->ir_version);
    printf("opsets    ");
    for (int i = 0; i < m->n_opset; i++)
        printf(" %s:%lld", m->opsets[i].domain[0] ? m->opsets[i].domain : "ai.onnx", (long long)m->opsets[i].version);
    printf("\ninputs     %d\n", g->n_inputs);
    for (int i = 0; i < g->n_inputs; i++) {
        printf("  %-32s ", g->values[g->inputs[i]].name);
        print_type(g, &g->values[g->inputs[i]]);
        printf("\n");
    }
    printf("outputs    %d\n", g->n_outputs);
    for (int i = 0; i < g->n_outputs; i++) {
        printf("  %-32s ", g->values[g->outputs[i]].name);
        print_type(g, &g->values[g->outputs[i]]);
        printf("\n");
    }
    int64_t params = 0;
    for (int i = 0; i < m->graph->n_init; i++) {
        int64_t n = sn_tensor_numel(&m->graph->inits[i].t);
        params += n > 0 ? n : 0;
    }
    char wb[64];
    cli_human_bytes((double)m->weight_bytes, wb, sizeof wb);
    printf("parameters %lld (%d initializers)\n", (long long)params, m->graph->n_init);
    printf("weights    %llu bytes (%s)\n", (unsigned long long)m->weight_bytes, wb);
    sn_layer_info li;
    if (sn_layers_discover(g, &li, &err) == SNUG_OK && li.n_layers > 0)
        printf("layers     %d (nodes: %d by name, %d by value names, %d from neighbours; %d pre, %d post)\n",
               li.n_layers, li.n_named, li.n_valname, li.n_filled, li.n_pre, li.n_post);
    opcount h[512];
    int nh = 0, total = 0;
    count_ops(g, h, &nh, 512, &total);
    qsort(h, (size_t)nh, sizeof *h, cmp_count);
    printf("nodes      %d (%d op types)\n", total, nh);
    for (int i = 0; i < nh; i++)
        printf("  %6d  %s%s%s\n", h[i].n, h[i].domain, h[i].domain[0] ? "." : "", h[i].op);
    sn_graph_free(g);
    sn_model_free(m);
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

/* Fills t (shape set) deterministically: floats uniform in [-1, 1), integers
 * in [0, 10), bools alternating. */
static void fill_input(sn_tensor *t, uint64_t seed) {
    int64_t n = sn_tensor_numel(t);
    uint64_t s = seed * 2654435761u + 88172645463325252ull;
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = rng_next(&s);
        if (sn_dtype_is_float(t->dtype))
            sn_store_f64(t->dtype, t->data, (size_t)i, (double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0);
        else if (t->dtype == SN_BOOL)
            ((uint8_t *)t->data)[i] = (uint8_t)(i & 1);
        else if (t->dtype == SN_STRING)
            ((sn_string *)t->data)[i] = (sn_string){"snug", 4};
        else
            sn_store_f64(t->dtype, t->data, (size_t)i, (double)(r % 10));
    }
}

/* LLM inputs whose generated values must make sense: an attention mask of
 * ones (masks decide sequence lengths in GroupQueryAttention) and
 * position_ids counting 0, 1, ... along the last axis. */
static void fill_llm_input(const char *name, sn_tensor *t) {
    if (t->rank < 1 || !sn_dtype_is_int(t->dtype))
        return;
    int64_t n = sn_tensor_numel(t), last = t->dims[t->rank - 1];
    if (strstr(name, "attention_mask"))
        for (int64_t i = 0; i < n; i++)
            sn_store_f64(t->dtype, t->data, (size_t)i, 1.0);
    else if (!strcmp(name, "position_ids") && last > 0)
        for (int64_t i = 0; i < n; i++)
            sn_store_f64(t->dtype, t->data, (size_t)i, (double)(i % last));
}

static const char *ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf) ? s + a - b : NULL;
}

static int read_input_file(const char *path, const sn_type *type, sn_tensor *t, void **own, sn_err *err) {
    if (ends_with(path, ".npy"))
        return sn_npy_read(path, t, own, err);
    void *buf;
    size_t len;
    SN_TRY(sn_file_read(path, &buf, &len, err));
    int rc = sn_value_decode_pb_typed(buf, len, type, t, own, NULL, err);
    sn_free(buf);
    return rc;
}

static void summarize(const char *name, const sn_tensor *t) {
    char sb[256];
    if (t->kind == SN_KIND_NONE) {
        printf("%-28s optional: none\n", name);
        return;
    }
    if (t->kind == SN_KIND_SEQUENCE) {
        printf("%-28s sequence of %lld %s tensors\n", name, (long long)t->n_items, sn_dtype_name(t->dtype));
        return;
    }
    int64_t n = sn_tensor_numel(t);
    printf("%-28s %-8s %-20s", name, sn_dtype_name(t->dtype), sn_shape_str(t, sb, sizeof sb));
    if (t->dtype == SN_STRING || n <= 0 || t->dtype == SN_C64 || t->dtype == SN_C128) {
        printf(" (%lld elements)\n", (long long)n);
        return;
    }
    double mn = INFINITY, mx = -INFINITY, sum = 0;
    int64_t nan = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = sn_load_f64(t->dtype, t->data, (size_t)i);
        if (isnan(v)) {
            nan++;
            continue;
        }
        mn = v < mn ? v : mn;
        mx = v > mx ? v : mx;
        sum += v;
    }
    printf(" min %-12.6g max %-12.6g mean %-12.6g", mn, mx, n > nan ? sum / (double)(n - nan) : NAN);
    if (nan)
        printf(" nan %lld", (long long)nan);
    printf("\n");
}

static int write_output(const char *dir, int i, const char *name, const sn_tensor *t, sn_err *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/output_%d.pb", dir, i);
    void *buf;
    size_t len;
    SN_TRY(sn_value_encode_pb(t, name, &buf, &len, err));
    FILE *f = fopen(path, "wb");
    int rc = SNUG_OK;
    if (!f || fwrite(buf, 1, len, f) != len)
        rc = sn_errf(err, SNUG_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    if (f && fclose(f) != 0 && rc == SNUG_OK)
        rc = sn_errf(err, SNUG_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    sn_free(buf);
    return rc;
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
    "  --bound NAME=VALUE  plan once with the symbolic dim NAME at most VALUE (sets\n"
    "                      session.max_shape_override for every input from the\n"
    "                      declared shapes; give one per symbolic dim)\n"
    "  --config KEY=VALUE  a session config entry (ONNX Runtime keys such as\n"
    "                      session.collect_node_memory_stats_to_file; docs/config.md)\n"
    "  --repeat N          run N times and report the time per run\n"
    "  --verbose           also print the execution plan's figures (nodes folded /\n"
    "                      static / dynamic, arena size against its lower bound)\n";

/* --dim/--bound values as bindings for sn_dim_eval. */
static bool dim_eval(const char *text, const kv *dims, const int64_t *vals, int n, int64_t *out) {
    sn_dim_bind b[64];
    for (int i = 0; i < n && i < 64; i++)
        b[i] = (sn_dim_bind){dims[i].key, vals[i]};
    return sn_dim_eval(text, b, n < 64 ? n : 64, out);
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
    sn_err err = {0};
    sn_model *m = NULL;
    sn_graph *g = NULL;
    if (sn_model_load(path, &m, &err) != SNUG_OK || sn_graph_build(m, &g, &err) != SNUG_OK) {
        cli_model_error("run", path, err.msg);
        sn_graph_free(g);
        sn_model_free(m);
        return NULL;
    }
    size_t cap = 256 + (size_t)g->n_inputs * 256, o = 0;
    char *text = malloc(cap);
    text[0] = 0;
    for (int i = 0; i < g->n_inputs && text; i++) {
        const sn_value *v = &g->values[g->inputs[i]];
        const sn_tensor *d = &v->info;
        if (d->kind != SN_KIND_TENSOR || d->rank < 0)
            continue;
        o += (size_t)snprintf(text + o, cap - o, "%s%s:[", o ? ";" : "", v->name);
        for (int k = 0; k < d->rank; k++) {
            int64_t x = d->dims[k];
            const char *nm = x <= SN_DIM_SYM(0) ? g->syms[SN_DIM_SYM_ID(x)] : NULL;
            if (x < 0 && !(nm && dim_eval(nm, b, vals, n, &x))) {
                fprintf(stderr, "snug run: input '%s' dim %d (%s) has no --bound\n", v->name, k, nm ? nm : "?");
                free(text);
                text = NULL;
                break;
            }
            o += (size_t)snprintf(text + o, cap - o, "%s%lld", k ? "," : "", (long long)(x < 1 ? 1 : x));
        }
        if (text)
            o += (size_t)snprintf(text + o, cap - o, "]");
    }
    sn_graph_free(g);
    sn_model_free(m);
    return text;
}

static int cmd_run(int argc, char **argv) {
    const char *path = NULL, *input_dir = NULL, *output_dir = NULL, *threads = NULL;
    kv inputs[256], dims[64], configs[64], bounds[64];
    int n_inputs = 0, n_dims = 0, n_configs = 0, n_bounds = 0, repeat = 1, verbose = 0;
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
    if (override)
        snug_options_set(opts, "session.max_shape_override", override);
    free(override);
    if (threads)
        snug_options_set(opts, "snug.threads", threads);
    for (int k = 0; k < n_configs; k++)
        snug_options_set(opts, configs[k].key, configs[k].val);
    sn_err err = {0};
    sn_session *s = NULL;
    int rc = sn_session_open(path, opts, &s, &err);
    snug_options_free(opts);
    if (rc != SNUG_OK) {
        cli_model_error("run", path, err.msg);
        return 1;
    }
    const sn_graph *g = s->graph;
    int nin = g->n_inputs, status = 1;
    sn_tensor *in = calloc((size_t)nin + 1, sizeof *in), *out = calloc((size_t)g->n_outputs + 1, sizeof *out);
    void **own = calloc((size_t)nin + 1, sizeof *own);
    for (int k = 0; k < n_inputs; k++) {
        if (sn_graph_find(g, inputs[k].key) < 0 || !(g->values[sn_graph_find(g, inputs[k].key)].flags & SN_VAL_INPUT)) {
            fprintf(stderr, "snug run: --input %s: the model has no input of that name (inputs:", inputs[k].key);
            for (int i = 0; i < nin; i++)
                fprintf(stderr, " %s", g->values[g->inputs[i]].name);
            fprintf(stderr, ")\n");
            goto done;
        }
    }
    for (int k = 0; k < n_dims; k++) {
        bool found = false;
        for (int sy = 0; sy < g->n_syms; sy++)
            found |= !strcmp(g->syms[sy], dims[k].key);
        if (!found) {
            fprintf(stderr, "snug run: --dim %s: the model has no symbolic dim of that name", dims[k].key);
            if (g->n_syms) {
                fprintf(stderr, " (it has:");
                for (int sy = 0; sy < g->n_syms; sy++)
                    fprintf(stderr, " %s", g->syms[sy]);
                fprintf(stderr, ")");
            }
            fprintf(stderr, "\n");
            goto done;
        }
    }
    for (int i = 0; i < nin; i++) {
        const sn_value *v = &g->values[g->inputs[i]];
        const char *file = NULL;
        char pbuf[4096];
        for (int k = 0; k < n_inputs; k++)
            if (!strcmp(inputs[k].key, v->name))
                file = inputs[k].val;
        if (!file && input_dir) {
            snprintf(pbuf, sizeof pbuf, "%s/input_%d.pb", input_dir, i);
            struct stat st;
            if (stat(pbuf, &st) == 0)
                file = pbuf;
        }
        if (file) {
            if (read_input_file(file, v->declared, &in[i], &own[i], &err) != SNUG_OK) {
                fprintf(stderr, "snug run: input '%s' from %s: %s\n", v->name, file, err.msg);
                goto done;
            }
            continue;
        }
        /* Generate from the declared type. */
        const sn_tensor *d = &v->info;
        if (d->kind != SN_KIND_TENSOR || d->rank < 0 || !sn_dtype_valid(d->dtype)) {
            fprintf(stderr, "snug run: input '%s' has no tensor type with a known rank; give it with --input\n",
                    v->name);
            goto done;
        }
        in[i] = *d;
        in[i].data = NULL;
        for (int k = 0; k < d->rank; k++) {
            if (d->dims[k] >= 0)
                continue;
            int64_t val = 1;
            const char *nm = d->dims[k] <= SN_DIM_SYM(0) ? g->syms[SN_DIM_SYM_ID(d->dims[k])] : NULL;
            bool bound = nm && dim_eval(nm, dims, dimv, n_dims, &val);
            if (!bound)
                fprintf(stderr, "snug run: note: input '%s' dim %d (%s) not bound, using 1 (--dim NAME=VALUE)\n",
                        v->name, k, nm ? nm : "?");
            in[i].dims[k] = val;
        }
        size_t nb = sn_tensor_nbytes(&in[i]);
        if (sn_tensor_numel(&in[i]) < 0 || nb == SIZE_MAX || !(own[i] = sn_calloc(1, nb ? nb : 1))) {
            fprintf(stderr, "snug run: input '%s' is too large to generate\n", v->name);
            goto done;
        }
        in[i].data = own[i];
        fill_input(&in[i], seed + (uint64_t)i);
        fill_llm_input(v->name, &in[i]);
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int r = 0; r < repeat; r++) {
        if (sn_session_run(s, in, out, &err) != SNUG_OK) {
            fprintf(stderr, "snug run: %s\n", err.msg);
            goto done;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = ((double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6) / repeat;
    if (output_dir) {
        mkdir(output_dir, 0777);
        for (int i = 0; i < g->n_outputs; i++)
            if (write_output(output_dir, i, g->values[g->outputs[i]].name, &out[i], &err) != SNUG_OK) {
                fprintf(stderr, "snug run: %s\n", err.msg);
                goto done;
            }
        fprintf(stderr, "wrote %d outputs to %s (%.3f ms per run)\n", g->n_outputs, output_dir, ms);
    } else {
        for (int i = 0; i < g->n_outputs; i++)
            summarize(g->values[g->outputs[i]].name, &out[i]);
        printf("time       %.3f ms per run (%d run%s)\n", ms, repeat, repeat > 1 ? "s" : "");
    }
    if (verbose) {
        const sn_exec_stats *st = sn_exec_get_stats(s->exec);
        char a[64], l[64], f[64];
        cli_human_bytes((double)st->arena_bytes, a, sizeof a);
        cli_human_bytes((double)st->lower_bound, l, sizeof l);
        cli_human_bytes((double)st->folded_bytes, f, sizeof f);
        printf("plan       %d node(s) folded (%s), %d static (%d in place, %d run in groups), %d dynamic; arena %s "
               "(lower bound %s); %d plan(s) made\n",
               st->n_folded, f, st->n_static, st->n_inplace, st->n_grouped, st->n_dynamic, a, l, st->n_plans);
    }
    status = 0;
done:
    for (int i = 0; i < nin; i++)
        sn_free(own[i]);
    free(own);
    free(in);
    free(out);
    sn_session_close(s);
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
    "  ops             the operators this build implements\n";

static int cmd_ops(int argc, char **argv) {
    if (argc > 0 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) {
        printf("usage: snug ops\n\nLists every implemented operator as domain, name and the opset it serves from.\n");
        return 0;
    }
    for (int i = 0; i < sn_op_count(); i++) {
        const sn_op_def *d = sn_op_at(i);
        printf("%-16s %-32s %d\n", d->domain[0] ? d->domain : "ai.onnx", d->name, d->since_version);
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
    fprintf(stderr, "snug: unknown command '%s'\n\n%s", argv[1], k_help);
    return 2;
}
