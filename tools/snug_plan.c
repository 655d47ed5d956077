/* snug plan / snug profile: the memory plan of a model at planning shapes,
 * without running it (plan), and per-node figures of one run in ONNX
 * Runtime's node-stats format (profile). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "snug.h"

typedef snug_dim dimbind;

typedef struct popts {
    const char *cmd;
    const char *path, *stats, *svg, *out, *shape, *threads, *weights;
    cli_placement place; /* --device, -ngl, --mem gpu=, --rules */
    const char *config[32][2];
    int n_config;
    bool json, strict, have_budget, last_logits, stream;
    uint64_t budget;
    int64_t ctx, batch, seq;
    dimbind dims[64];
    int n_dims;
} popts;

/* Bindings: the user's --dim first, then the LLM names at (batch, seq, past). */
static int make_binds(const popts *o, int64_t seq, int64_t past, dimbind *b) {
    int n = 0;
    for (int i = 0; i < o->n_dims; i++)
        b[n++] = o->dims[i];
    b[n++] = (dimbind){"batch_size", o->batch};
    b[n++] = (dimbind){"batch", o->batch};
    b[n++] = (dimbind){"sequence_length", seq};
    b[n++] = (dimbind){"seq_len", seq};
    b[n++] = (dimbind){"past_sequence_length", past};
    b[n++] = (dimbind){"past_seq_len", past};
    b[n++] = (dimbind){"total_sequence_length", past + seq};
    b[n++] = (dimbind){"total_seq_len", past + seq};
    return n;
}

/* The planning shape of graph input i: --shape entry, else declared dims
 * with symbols bound. Returns false with a message in err. */
static bool input_shape(const snug_model *m, int i, const snug_shape *ov, int n_ov, const dimbind *b, int nb,
                        snug_tensor *t, char *err, size_t cap) {
    snug_value_info v;
    snug_model_input(m, i, &v);
    memset(t, 0, sizeof *t);
    t->dtype = v.dtype;
    t->rank = v.rank;
    for (int k = 0; k < v.rank; k++)
        t->dims[k] = v.dims[k];
    for (int k = 0; k < n_ov; k++)
        if (!strcmp(ov[k].name, v.name)) {
            if (v.rank >= 0 && v.rank != ov[k].rank) {
                snprintf(err, cap, "--shape %s: rank %d, but the model declares rank %d", v.name, ov[k].rank,
                         v.rank);
                return false;
            }
            t->rank = ov[k].rank;
            memcpy(t->dims, ov[k].dims, sizeof t->dims);
            return true;
        }
    if (v.kind != SNUG_KIND_TENSOR || v.rank < 0) {
        snprintf(err, cap, "input '%s' has no declared shape; give it with --shape '%s:[d0,d1,...]'", v.name,
                 v.name);
        return false;
    }
    for (int k = 0; k < v.rank; k++) {
        if (v.dims[k] >= 0)
            continue;
        const char *nm = v.dim_names[k] && v.dim_names[k][0] ? v.dim_names[k] : NULL;
        if (!nm || snug_dim_eval(nm, b, nb, &t->dims[k]) != SNUG_OK) {
            snprintf(err, cap, "input '%s' dim %d (%s) is not bound: use --dim NAME=VALUE or --shape", v.name, k,
                     nm ? nm : "unnamed");
            return false;
        }
    }
    return true;
}

static bool is_kv_input(const char *name) { return !strncmp(name, "past", 4); }

/* ---- options ------------------------------------------------------------ */

static int64_t parse_count(const char *cmd, const char *opt, const char *v, int64_t lo) {
    char *end;
    errno = 0;
    long long x = v ? strtoll(v, &end, 10) : 0;
    if (!v || !*v || *end || errno || x < lo) {
        char m[256];
        snprintf(m, sizeof m, "%s takes an integer >= %lld, not '%s'", opt, (long long)lo, v ? v : "");
        cli_die_usage(cmd, m);
    }
    return x;
}

static void parse_opts(popts *o, int argc, char **argv, const char *help) {
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        bool takes = true;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(help, stdout);
            exit(0);
        } else if (!strcmp(a, "--json")) {
            o->json = true, takes = false;
        } else if (!strcmp(a, "--strict")) {
            o->strict = true, takes = false;
        } else if (!strcmp(a, "--last-logits")) {
            o->last_logits = true, takes = false;
        } else if (!strcmp(a, "--stream")) {
            o->stream = true, takes = false;
        } else if (a[0] == '-' && !val) {
            char m[256];
            snprintf(m, sizeof m, "unknown option or missing value: '%s'", a);
            cli_die_usage(o->cmd, m);
        } else if (cli_placement_arg(o->cmd, a, val, &o->place)) {
        } else if (!strcmp(a, "--mem")) {
            bool dev;
            o->budget = cli_mem_budget(o->cmd, val, &dev);
            o->have_budget = true;
        } else if (!strcmp(a, "--config")) {
            char *eq = strchr(argv[i + 1], '=');
            if (!eq || eq == argv[i + 1] || o->n_config == 32)
                cli_die_usage(o->cmd, "--config takes KEY=VALUE (at most 32)");
            *eq = 0;
            o->config[o->n_config][0] = argv[i + 1];
            o->config[o->n_config++][1] = eq + 1;
        } else if (!strcmp(a, "--ctx")) {
            o->ctx = parse_count(o->cmd, a, val, 1);
        } else if (!strcmp(a, "--batch")) {
            o->batch = parse_count(o->cmd, a, val, 1);
        } else if (!strcmp(a, "--seq")) {
            o->seq = parse_count(o->cmd, a, val, 1);
        } else if (!strcmp(a, "--shape")) {
            o->shape = val;
        } else if (!strcmp(a, "--stats")) {
            o->stats = val;
        } else if (!strcmp(a, "--svg")) {
            o->svg = val;
        } else if (!strcmp(a, "--out")) {
            o->out = val;
        } else if (!strcmp(a, "--threads")) {
            o->threads = val;

        } else if (!strcmp(a, "--weights")) {
            if (strcmp(val, "map") && strcmp(val, "load"))
                cli_die_usage(o->cmd, "--weights takes map or load");
            o->weights = val;
        } else if (!strcmp(a, "--dim")) {
            char *eq = strchr(argv[i + 1], '=');
            if (!eq || eq == argv[i + 1])
                cli_die_usage(o->cmd, "--dim takes NAME=VALUE");
            *eq = 0;
            if (o->n_dims == 56)
                cli_die_usage(o->cmd, "too many --dim");
            o->dims[o->n_dims++] = (dimbind){argv[i + 1], parse_count(o->cmd, "--dim", eq + 1, 0)};
        } else if (a[0] == '-') {
            char m[256];
            snprintf(m, sizeof m, "unknown option: '%s'", a);
            cli_die_usage(o->cmd, m);
        } else {
            if (o->path)
                cli_die_usage(o->cmd, "one model at a time");
            o->path = a;
            takes = false;
        }
        if (takes)
            i++;
    }
    if (!o->path)
        cli_die_usage(o->cmd, "missing MODEL");
    if (o->seq <= 0)
        o->seq = o->ctx;
    if (o->seq > o->ctx)
        cli_die_usage(o->cmd, "--seq cannot exceed --ctx");
}

/* ---- the planned session ------------------------------------------------ */

typedef struct planned {
    snug_session *s;
    const snug_model *m; /* the session's */
    snug_layer_map li;
    snug_tensor *in;     /* [n_inputs] planning shapes */
    uint64_t *kv_bytes;  /* [n_inputs] KV input bytes at ctx (0 for others) */
    int *kv_layer;       /* [n_inputs] */
    uint64_t kv_total;
    snug_decoder *loop;  /* an LLM: planned the way snug run / bench drive it, or NULL */
} planned;

static void planned_free(planned *p) {
    snug_decoder_free(p->loop);
    free(p->in);
    free(p->kv_bytes);
    free(p->kv_layer);
    snug_session_free(p->s);
}

static void layer_name(int l, int L, char *buf, size_t cap);
static void device_parts(const snug_session *s, const snug_plan *pl, int d, size_t *w, size_t *act, size_t *kv);

/* The accelerators' entries of snug plan --json's "devices" (after the
 * host's): their figures, the layers placed and why, the rules' coverage. */
static void json_devices(FILE *f, const snug_session *s, const snug_plan *pl, int L, const char *budget) {
    snug_session_stats st;
    snug_session_get_stats(s, &st);
    for (int d = 1; d < snug_session_device_count(s); d++) {
        snug_device_info di;
        snug_session_device_info(s, d, &di);
        size_t w, act, kv;
        device_parts(s, pl, d, &w, &act, &kv);
        fprintf(f, ",\n    {\"name\": ");
        snug_json_write_str(f, di.name);
        fprintf(f, ", \"budget\": %s, \"weights\": %zu, \"kv\": %zu, \"activations\": %zu, \"total\": %zu, "
                   "\"nodes\": %d, \"layers\": %d, \"stream\": {\"layers\": %d, \"ring\": %llu, \"per_run\": %llu}, "
                   "\"placement\": [",
                budget[0] ? budget : "null", w, kv, act, st.device_bytes, di.n_nodes, di.n_layers, di.streamed_layers,
                (unsigned long long)di.stream_ring, (unsigned long long)di.streamed_per_run);
        for (int l = -1; l <= L; l++) {
            int dev;
            const char *why;
            if (snug_plan_layer(pl, l, &dev, &why) != SNUG_OK)
                break;
            fprintf(f, "%s{\"layer\": %d, \"device\": %d, \"why\": ", l > -1 ? ", " : "", l, dev);
            snug_json_write_str(f, why);
            fputc('}', f);
        }
        fprintf(f, "]}");
    }
    int nr = snug_session_rule_count(s);
    if (!nr)
        return;
    fprintf(f, "],\n  \"rules\": [");
    for (int k = 0; k < nr; k++) {
        snug_rule_info ri;
        snug_session_rule(s, k, &ri);
        fprintf(f, "%s{\"entry\": %d, \"device\": ", k ? ", " : "", ri.entry + 1);
        snug_json_write_str(f, ri.device);
        fprintf(f, ", \"pattern\": ");
        snug_json_write_str(f, ri.pattern);
        fprintf(f, ", \"exact\": %s, \"device_index\": %d, \"nodes\": %d, \"first_layer\": %d, "
                   "\"last_layer\": %d}", ri.exact ? "true" : "false", ri.device_index, ri.n_nodes, ri.first_layer,
                ri.last_layer);
    }
}

/* Where the layers went and why (runs of layers with one device and one
 * reason on one line), and what each placement rule matched. */
static void print_placement(const snug_session *s, const snug_plan *pl, int L) {
    int dev0;
    const char *why0;
    if (snug_plan_layer(pl, -1, &dev0, &why0) == SNUG_OK) {
        printf("\nplacement\n");
        for (int l = -1; l <= L;) {
            int dev;
            const char *why;
            snug_plan_layer(pl, l, &dev, &why);
            int e = l;
            for (int d2; e + 1 <= L; e++) {
                const char *w2;
                snug_plan_layer(pl, e + 1, &d2, &w2);
                if (d2 != dev || strcmp(w2, why) || e + 1 == L || l == -1)
                    break;
            }
            char a[16], b[16], span[40];
            layer_name(l, L, a, sizeof a);
            layer_name(e, L, b, sizeof b);
            snprintf(span, sizeof span, e > l ? "layers %s-%s" : l < 0 || l >= L ? "%s" : "layer %s", a, b);
            printf("  %-14s %-8s %s\n", span, snug_plan_device(pl, dev), why);
            l = e + 1;
        }
    }
    int nr = snug_session_rule_count(s);
    if (!nr)
        return;
    snug_rule_info ri;
    snug_session_rule(s, 0, &ri);
    printf("\nrules      %s, in priority order as written%s\n",
           ri.by_name ? "session.name_based_layer_assignment (node-name substrings)"
                      : "session.layer_assignment_settings (layer_ann annotations)",
           ri.by_name ? " (the longest matching pattern wins)" : " (prefix rules before exact ones)");
    printf("  %-5s %-12s %7s  %-12s %s\n", "entry", "device", "nodes", "layers", "pattern");
    for (int k = 0; k < nr; k++) {
        snug_session_rule(s, k, &ri);
        char lay[40] = "-", a[16], b[16];
        if (ri.n_nodes) {
            layer_name(ri.first_layer, L, a, sizeof a);
            layer_name(ri.last_layer, L, b, sizeof b);
            snprintf(lay, sizeof lay, ri.first_layer == ri.last_layer ? "%s" : "%s-%s", a, b);
        }
        printf("  %-5d %-12s %7d  %-12s %s%s%s\n", ri.entry + 1, ri.device, ri.n_nodes, lay, ri.exact ? "=" : "",
               ri.pattern, ri.device_index < 0 ? "   (no such device here: skipped)"
                           : !ri.n_nodes      ? "   (matched nothing)" : "");
    }
}

/* Accelerator d's part of the plan: its weights' copies, activation arena
 * and KV cache (what the plan holds there beyond its buffers). */
static void device_parts(const snug_session *s, const snug_plan *pl, int d, size_t *w, size_t *act, size_t *kv) {
    snug_plan_info pi;
    snug_plan_get_info(pl, &pi);
    snug_device_info di;
    snug_session_device_info(s, d, &di);
    *w = *act = 0;
    for (int b = 0; b < pi.n_buffers; b++) {
        snug_plan_buffer pb;
        snug_plan_get_buffer(pl, b, &pb);
        if (pb.device == d)
            *(pb.weights ? w : act) += pb.size;
    }
    *act -= di.stream_ring; /* the ring of streamed weights: their own line */
    *kv = di.state_bytes;
}

/* Each accelerator's part of the plan, and why the nodes that stayed on
 * the host did (one line per op and reason). */
static void print_devices(const snug_session *s, const snug_plan *pl, const snug_plan_node *nodes, int nn) {
    snug_plan_info pi;
    snug_plan_get_info(pl, &pi);
    snug_session_stats st;
    snug_session_get_stats(s, &st);
    for (int d = 1; d < pi.n_devices; d++) {
        snug_device_info di;
        snug_session_device_info(s, d, &di);
        size_t w, act, kv;
        device_parts(s, pl, d, &w, &act, &kv);
        int running = 0, host = 0;
        for (int i = 0; i < nn; i++) {
            running += nodes[i].mode != SNUG_MODE_FOLDED;
            host += nodes[i].host_because && nodes[i].host_because[0];
        }
        char a[32], b[32], c[32], t[32], f[32];
        cli_human_bytes((double)w, a, sizeof a);
        cli_human_bytes((double)act, b, sizeof b);
        cli_human_bytes((double)kv, c, sizeof c);
        cli_human_bytes((double)st.device_bytes, t, sizeof t);
        cli_human_bytes((double)di.free, f, sizeof f);
        printf("\ndevice %s\n", di.name);
        printf("  nodes        %14d  of %d that run (%d on the host for a reason below)\n", di.n_nodes, running, host);
        printf("  weights      %14zu  %s copies uploaded once\n", w, a);
        printf("  KV cache     %14zu  %s\n", kv, c);
        printf("  activations  %14zu  %s arena incl. workspace and copies in\n", act, b);
        if (di.streamed_layers) {
            char r[32], q[32];
            cli_human_bytes((double)di.stream_ring, r, sizeof r);
            cli_human_bytes((double)di.streamed_per_run, q, sizeof q);
            printf("  streamed     %14llu  %s ring: the weights of %d layers, %s copied in from host memory "
                   "each run, layer by layer\n",
                   (unsigned long long)di.stream_ring, r, di.streamed_layers, q);
        }
        printf("  total        %14zu  %s (%s free now)\n", st.device_bytes, t, f);
        for (int i = 0; i < nn; i++) {
            const char *why = nodes[i].host_because;
            if (!why || !why[0])
                continue;
            bool seen = false;
            for (int j = 0; j < i && !seen; j++)
                seen = nodes[j].host_because && !strcmp(nodes[j].op, nodes[i].op) && !strcmp(nodes[j].host_because, why);
            if (seen)
                continue;
            int count = 0;
            for (int j = i; j < nn; j++)
                count += nodes[j].host_because && !strcmp(nodes[j].op, nodes[i].op) && !strcmp(nodes[j].host_because, why);
            printf("  on the host  %dx %s: %s\n", count, nodes[i].op, why);
        }
    }
}

static int open_and_plan(const popts *o, planned *p) {
    memset(p, 0, sizeof *p);
    char err[1024];
    snug_options *so = snug_options_new();
    if (o->threads)
        snug_options_set(so, "snug.threads", o->threads);
    if (o->weights)
        snug_options_set(so, "snug.weights", o->weights);
    snug_options_set_logger(so, cli_log, "plan", SNUG_LOG_WARN);
    for (int k = 0; k < o->place.n; k++)
        snug_options_set(so, o->place.kv[2 * k], o->place.kv[2 * k + 1]);
    for (int k = 0; k < o->n_config; k++)
        snug_options_set(so, o->config[k][0], o->config[k][1]);
    if (o->last_logits)
        snug_options_set(so, "snug.last_logits", "1");
    char mh[32];
    snprintf(mh, sizeof mh, "%llu", (unsigned long long)o->budget);
    if (o->stream && !o->have_budget)
        cli_die_usage(o->cmd, "--stream needs a budget: --mem host=SIZE");
    if (o->stream)
        snug_options_set(so, "snug.mem.host", mh);
    int rc = snug_session_create(o->path, so, &p->s, err, sizeof err);
    snug_options_free(so);
    if (rc != SNUG_OK) {
        cli_model_error(o->cmd, o->path, err);
        return 1;
    }
    const snug_model *m = p->m = snug_session_model(p->s);
    snug_model_info mi;
    snug_model_get_info(m, &mi);
    snug_model_layers(m, &p->li); /* found by the session */
    snug_shape *ov = NULL;
    int n_ov = 0;
    if (o->shape && snug_shapes_parse(o->shape, &ov, &n_ov, err, sizeof err) != SNUG_OK) {
        fprintf(stderr, "snug %s: --shape: %s\n", o->cmd, err);
        return 2;
    }
    for (int k = 0; k < n_ov; k++) {
        bool found = false;
        for (int i = 0; i < mi.n_inputs; i++)
            found |= !strcmp(snug_session_input_name(p->s, i), ov[k].name);
        if (!found) {
            fprintf(stderr, "snug %s: --shape: the model has no input '%s'\n", o->cmd, ov[k].name);
            snug_shapes_free(ov, n_ov);
            return 2;
        }
    }
    for (int k = 0; k < o->n_dims; k++) {
        bool found = false;
        for (int s = 0; s < mi.n_dims; s++)
            found |= !strcmp(snug_model_dim_name(m, s), o->dims[k].name);
        if (!found) {
            fprintf(stderr, "snug %s: --dim %s: the model has no symbolic dim of that name\n", o->cmd,
                    o->dims[k].name);
            snug_shapes_free(ov, n_ov);
            return 2;
        }
    }
    int ni = mi.n_inputs;
    p->in = calloc((size_t)ni + 1, sizeof *p->in);
    p->kv_bytes = calloc((size_t)ni + 1, sizeof *p->kv_bytes);
    p->kv_layer = calloc((size_t)ni + 1, sizeof *p->kv_layer);
    dimbind b[80], bkv[80];
    int nb = make_binds(o, o->seq, 0, b), nbkv = make_binds(o, o->seq, o->ctx, bkv);
    char msg[512];
    rc = 0;
    for (int i = 0; i < ni && !rc; i++) {
        if (!input_shape(m, i, ov, n_ov, b, nb, &p->in[i], msg, sizeof msg)) {
            fprintf(stderr, "snug %s: %s\n", o->cmd, msg);
            rc = 2;
            break;
        }
        if (is_kv_input(snug_session_input_name(p->s, i))) {
            snug_tensor t;
            /* The cache at full context: past bound to ctx (a --shape entry
             * for the input is its size as given). */
            if (input_shape(m, i, ov, n_ov, bkv, nbkv, &t, msg, sizeof msg)) {
                size_t nbytes = snug_tensor_nbytes(&t);
                p->kv_bytes[i] = nbytes == SIZE_MAX ? 0 : nbytes;
                p->kv_total += p->kv_bytes[i];
            }
            /* The layer of its first reader inside a layer (the shape
             * computations reading it are pre). */
            p->kv_layer[i] = snug_model_input_layer(m, i);
        }
    }
    snug_shapes_free(ov, n_ov);
    if (rc)
        return rc;
    /* An LLM at its default shapes is planned by the step driver itself: the
     * KV cache as the executor's persistent state (present computed into it
     * where the attention op can), activations at the bounds of a prompt of
     * up to ctx tokens. That is the plan snug run and snug bench execute. */
    int lrc = p->kv_total && !n_ov && !o->n_dims && o->batch == 1 && o->seq == o->ctx
                  ? snug_decoder_new(p->s, o->ctx, 0, &p->loop)
                  : SNUG_ERR_UNSUPPORTED;
    if (lrc == SNUG_ERR_RANGE) { /* a context the model cannot hold */
        cli_model_error(o->cmd, o->path, snug_session_error(p->s));
        return 1;
    }
    if (lrc == SNUG_ERR_OOM && o->stream) { /* even streaming every layer does not fit: it says by how much */
        cli_model_error(o->cmd, o->path, snug_session_error(p->s));
        return 3;
    }
    snug_session_stats st;
    snug_session_get_stats(p->s, &st);
    if (lrc == SNUG_OK && st.n_plans > 0) {
        snug_decoder_info info;
        snug_decoder_get_info(p->loop, &info);
        uint64_t per = info.n_layers ? (uint64_t)info.kv_bytes / (2 * (uint64_t)info.n_layers) : 0;
        for (int i = 0; i < ni; i++)
            p->kv_bytes[i] = p->kv_bytes[i] ? per : 0;
        p->kv_total = info.kv_bytes;
        return 0;
    }
    if ((rc = snug_session_plan(p->s, p->in, ni)) != SNUG_OK) {
        fprintf(stderr, "snug %s: planning %s: %s\n", o->cmd, o->path, snug_session_error(p->s));
        if (rc == SNUG_ERR_RANGE)
            fprintf(stderr, "snug %s: (planned for --ctx %lld: is that longer than the model supports?)\n", o->cmd,
                    (long long)o->ctx);
        return 1;
    }
    return 0;
}

/* ---- reports ------------------------------------------------------------ */

typedef struct lrow {
    int nodes;
    uint64_t weights, kv, act, ws, folded;
    int src[SNUG_WS_SOURCE_COUNT];
} lrow;

static void hb(uint64_t b, char *buf, size_t cap) { cli_human_bytes((double)b, buf, cap); }

static void xml_str(FILE *f, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default:
            if ((unsigned char)*s >= 0x20)
                fputc(*s, f);
        }
    }
}

static void layer_name(int l, int L, char *buf, size_t cap) {
    if (l < 0)
        snprintf(buf, cap, "pre");
    else if (l >= L)
        snprintf(buf, cap, "post");
    else
        snprintf(buf, cap, "%d", l);
}

/* One bar of the SVG: a slot of the arena over the steps it is held. */
typedef struct bar {
    size_t size;
    int start, end; /* steps, inclusive */
    size_t offset;
    int v;          /* the value it holds, or -1 - node for a workspace slot */
} bar;

/* The arena over time, drawn from the plan value: each arena slot a bar
 * over the steps it is held at its offset (an in-place output shares its
 * input's slot: one bar), each workspace slot a bar over its node's group.
 * Nothing is replayed. nodes: the plan's [n_nodes]. */
static int write_svg(const char *path, const snug_plan *pl, const snug_plan_node *nodes, int L, char *err,
                     size_t cap) {
    snug_plan_info pi;
    snug_plan_get_info(pl, &pi);
    int nn = pi.n_nodes, nv = pi.n_values, rc = SNUG_OK;
    bar *bl = calloc((size_t)nv + (size_t)nn + 1, sizeof *bl);
    FILE *f = NULL;
    if (!bl) {
        snprintf(err, cap, "out of memory");
        rc = SNUG_ERR_OOM;
        goto done;
    }
    int nb = 0;
    for (int v = 0; v < nv; v++) {
        snug_plan_value pv;
        snug_plan_get_value(pl, v, &pv);
        if (pv.storage != SNUG_STORE_ARENA)
            continue;
        bool shared = false; /* the slot of an earlier value (in place) */
        for (int k = 0; k < nb && !shared; k++)
            shared = bl[k].offset == pv.offset && bl[k].start == pv.first && bl[k].end == pv.last;
        if (!shared)
            bl[nb++] = (bar){pv.size, pv.first, pv.last, pv.offset, v};
    }
    for (int i = 0; i < nn; i++)
        if (nodes[i].workspace)
            bl[nb++] = (bar){nodes[i].workspace, nodes[i].group, i, nodes[i].ws_offset, -1 - i};
    snug_plan_buffer arena_buf;
    snug_plan_get_buffer(pl, 0, &arena_buf);
    size_t arena = arena_buf.size ? arena_buf.size : 1;
    if (!(f = fopen(path, "w"))) {
        snprintf(err, cap, "cannot write %s: %s", path, strerror(errno));
        rc = SNUG_ERR_IO;
        goto done;
    }
    const double W = 1200, H = 640, x0 = 70, y0 = 40, pw = W - x0 - 20, ph = H - y0 - 50;
    double sx = pw / (nn > 0 ? nn + 1 : 1), sy = ph / (double)arena;
    char ab[64], lb[64];
    hb(arena_buf.size, ab, sizeof ab);
    hb(arena_buf.lower_bound, lb, sizeof lb);
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n",
            W, H, W, H);
    fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n", W, H);
    fprintf(f, "<text x=\"%.0f\" y=\"20\">arena %s (lower bound %s): offset (down) over execution step (right); ", x0,
            ab, lb);
    fprintf(f, "colour = layer, grey = workspace</text>\n");
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#888\"/>\n", x0,
            y0, pw, ph);
    if (pi.n_devices > 1) { /* a band above: each step's device, layer by layer */
        static const char *const dev_fill[] = {"#4a7ab0", "#e08a1e", "#4caf50", "#9c27b0"};
        for (int i = 0; i < nn; i++) {
            if (nodes[i].mode == SNUG_MODE_FOLDED)
                continue;
            char lname[16];
            layer_name(nodes[i].layer, L, lname, sizeof lname);
            fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"7\" fill=\"%s\"><title>layer %s on %s"
                       "</title></rect>\n", x0 + sx * i, y0 - 10, sx, dev_fill[nodes[i].device & 3], lname,
                    snug_plan_device(pl, nodes[i].device));
        }
        fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\" font-size=\"10\">device</text>\n", x0 - 4,
                y0 - 3);
        for (int d = 0; d < pi.n_devices && d < 4; d++)
            fprintf(f, "<rect x=\"%.0f\" y=\"26\" width=\"10\" height=\"7\" fill=\"%s\"/><text x=\"%.0f\" "
                       "y=\"33\" font-size=\"10\">%s</text>\n", W - 220 + 100.0 * d, dev_fill[d], W - 206 + 100.0 * d,
                    snug_plan_device(pl, d));
    }
    for (int k = 0; k < nb; k++) {
        size_t off = bl[k].offset;
        snug_plan_value pv = {0};
        if (bl[k].v >= 0)
            snug_plan_get_value(pl, bl[k].v, &pv);
        const snug_plan_node *ws_node = bl[k].v < 0 ? &nodes[-1 - bl[k].v] : NULL;
        int layer = ws_node ? ws_node->layer : pv.producer >= 0 ? nodes[pv.producer].layer : -1;
        double x = x0 + sx * bl[k].start, w = sx * (bl[k].end - bl[k].start + 1);
        double y = y0 + sy * (double)off, h = sy * (double)bl[k].size;
        if (h < 0.5)
            h = 0.5;
        char fill[32];
        if (ws_node)
            snprintf(fill, sizeof fill, "#999999");
        else
            snprintf(fill, sizeof fill, "hsl(%d,65%%,55%%)", (int)(((layer + 1) * 137) % 360));
        fprintf(f,
                "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\" fill-opacity=\"0.8\" "
                "stroke=\"#333\" stroke-width=\"0.2\"><title>",
                x, y, w, h, fill);
        char lname[16], sz[64];
        layer_name(layer, L, lname, sizeof lname);
        hb(bl[k].size, sz, sizeof sz);
        if (!ws_node)
            xml_str(f, pv.name);
        else {
            fputs("workspace of ", f);
            xml_str(f, ws_node->name[0] ? ws_node->name : ws_node->op);
        }
        fprintf(f, ": %s at offset %zu, steps %d..%d, layer %s</title></rect>\n", sz, off, bl[k].start, bl[k].end,
                lname);
    }
    for (int t = 0; t <= 4; t++) {
        char lab[64];
        hb((uint64_t)((double)arena * t / 4), lab, sizeof lab);
        fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\" font-size=\"10\">%s</text>\n", x0 - 4,
                y0 + ph * t / 4 + 4, lab);
        fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\" font-size=\"10\">%d</text>\n",
                x0 + pw * t / 4, y0 + ph + 16, nn * t / 4);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">execution step (node)</text>\n", x0 + pw / 2,
            H - 12);
    fprintf(f, "</svg>\n");
done:
    if (f && fclose(f) != 0 && rc == SNUG_OK) {
        snprintf(err, cap, "cannot write %s: %s", path, strerror(errno));
        rc = SNUG_ERR_IO;
    }
    free(bl);
    return rc;
}

static const char k_plan_help[] =
    "usage: snug plan MODEL.onnx [options]\n\n"
    "Plans the model at planning shapes without running it and prints, per layer,\n"
    "weights / KV cache / activations / workspace with where each figure came from\n"
    "(Level-1 estimator, profile, max of both, fallback), and the totals per device\n"
    "against the budget.\n\n"
    "  --mem host=SIZE     budget for host memory (K/M/G/T = KiB multiples, or bytes)\n"
    "  --ctx N             context length (default 2048): the KV cache is sized for N\n"
    "                      tokens, and the prefill plan binds sequence_length to N\n"
    "  --seq N             prefill chunk: bind sequence_length to N (default: --ctx)\n"
    "  --batch N           bind batch dims (batch_size; default 1)\n"
    "  --dim NAME=VALUE    bind any other symbolic dim\n"
    "  --shape SPEC        planning shapes as session.max_shape_override:\n"
    "                      'name:[d0,d1];name2:[...]' (wins over the bindings)\n"
    "  --stats FILE        node stats (ONNX Runtime's or snug profile's format): their\n"
    "                      temp allocations join the workspace figures\n"
    "  --strict            a kernel declaring more workspace than its Level-1 estimate\n"
    "                      is an error (default: a warning)\n"
    "  --json              the report as JSON on stdout\n"
    "  --svg FILE          draw the activation arena over time (offset x lifetime)\n"
    "  --stream            with --mem: plan as snug generate --mem does, the layers\n"
    "                      that do not fit streamed from the file (docs/streaming.md):\n"
    "                      which layers, the staging slots, the bytes a step reads\n"
    "  --last-logits       plan the output projection for the last position only, as\n"
    "                      snug generate does (config snug.last_logits)\n"
    "  --threads N         threads the kernels are prepared for\n"
    CLI_PLACEMENT_HELP
    "  --config KEY=VALUE  a session config entry (session.layer_assignment_settings,\n"
    "                      snug.strict_layer_assignment=1, ...; docs/config.md)\n"
    "  --weights MODE      map (default: weights read through the file map) or load\n"
    "                      (read into snug's own memory; config snug.weights)\n";

/* Prints the first few messages; *user counts them all. */
static void log_stderr(void *user, int level, const char *msg) {
    int *count = user;
    if ((*count)++ >= 3)
        return;
    fprintf(stderr, "%s: %s\n", level == SNUG_LOG_ERROR ? "error" : level == SNUG_LOG_WARN ? "warning" : "note",
            msg);
}

int snug_cmd_plan(int argc, char **argv) {
    popts o = {.cmd = "plan", .ctx = 2048, .batch = 1, .seq = 0};
    parse_opts(&o, argc, argv, k_plan_help);
    planned p;
    int status = open_and_plan(&o, &p);
    snug_stats *stats = NULL;
    int unmatched = 0, missing = 0;
    snug_estimate *est = NULL;
    snug_node_estimate *ne = NULL; /* [nn] */
    snug_plan_node *nodes = NULL;  /* [nn] */
    lrow *rows = NULL;
    snug_plan *pl = NULL;
    char err[1024];
    if (status)
        goto done;
    const snug_model *m = p.m;
    snug_model_info mi;
    snug_model_get_info(m, &mi);
    int nn = mi.n_nodes, L = p.li.n_layers;
    status = 1;
    if (snug_plan_new(p.s, &pl) != SNUG_OK) {
        fprintf(stderr, "snug plan: %s\n", snug_session_error(p.s));
        goto done;
    }
    nodes = calloc((size_t)nn + 1, sizeof *nodes);
    ne = calloc((size_t)nn + 1, sizeof *ne);
    for (int i = 0; i < nn; i++)
        snug_plan_get_node(pl, i, &nodes[i]);
    if (o.stats) {
        FILE *probe = fopen(o.stats, "r");
        const char *dir = probe ? NULL : mi.dir; /* as given, else next to the model */
        if (probe)
            fclose(probe);
        if (snug_stats_load(o.stats, dir, &stats, err, sizeof err) != SNUG_OK ||
            snug_stats_match(stats, m, &unmatched, &missing, err, sizeof err) != SNUG_OK) {
            fprintf(stderr, "snug plan: --stats: %s\n", err);
            goto done;
        }
        for (int r = 0; r < snug_stats_count(stats) && unmatched; r++) {
            snug_stats_row row;
            snug_stats_get_row(stats, r, &row);
            if (row.node < 0)
                fprintf(stderr, "snug plan: note: %s:%d: row '%s' matches no node\n", snug_stats_path(stats),
                        row.line, row.name);
        }
        for (int i = 0; i < nn && missing; i++)
            if (snug_stats_node_row(stats, i) < 0) {
                char key[512];
                snug_model_node_stats_key(m, i, key, sizeof key);
                fprintf(stderr, "snug plan: note: node %s '%s' has no row in %s (key %s)\n", nodes[i].op,
                        nodes[i].name, snug_stats_path(stats), key);
            }
    }
    int n_logged = 0;
    snug_estimate_opts eo = {stats, o.strict, log_stderr, &n_logged, SNUG_LOG_WARN};
    if (snug_estimate_new(pl, &eo, &est, err, sizeof err) != SNUG_OK) {
        fprintf(stderr, "snug plan: %s\n", err);
        goto done;
    }
    snug_estimate_info ei;
    snug_estimate_get_info(est, &ei);
    for (int i = 0; i < nn; i++)
        snug_estimate_get_node(est, i, &ne[i]);
    if (n_logged > 3)
        fprintf(stderr, "warning: ... and %d more like these\n", n_logged - 3);
    /* Per layer: index 0 = pre, 1..L = layers, L+1 = post. */
    rows = calloc((size_t)L + 2, sizeof *rows);
    uint64_t folded = 0, ws_max = 0, present = 0;
    for (int i = 0; i < nn; i++) {
        int l = nodes[i].layer, r = l < 0 ? 0 : l >= L ? L + 1 : l + 1;
        const snug_node_estimate *e = &ne[i];
        rows[r].nodes++;
        rows[r].weights += e->weights;
        rows[r].act += e->outputs;
        rows[r].folded += e->folded;
        rows[r].ws = e->workspace > rows[r].ws ? e->workspace : rows[r].ws;
        rows[r].src[e->source]++;
        folded += e->folded;
        ws_max = e->workspace > ws_max ? e->workspace : ws_max;
    }
    for (int i = 0; i < mi.n_inputs; i++) {
        if (!p.kv_bytes[i])
            continue;
        int l = p.kv_layer[i], r = l < 0 ? 0 : l >= L ? L + 1 : l + 1;
        rows[r].kv += p.kv_bytes[i];
    }
    for (int i = 0; i < mi.n_outputs; i++) {
        const char *name = snug_session_output_name(p.s, i);
        snug_plan_value pv;
        if (!strncmp(name, "present", 7) && snug_plan_get_value(pl, snug_plan_find_value(pl, name), &pv) == SNUG_OK)
            present += pv.storage == SNUG_STORE_ARENA ? pv.size : 0;
    }
    snug_plan_buffer arena_buf;
    snug_plan_get_buffer(pl, 0, &arena_buf);
    const size_t arena_bytes = arena_buf.size, lower_bound = arena_buf.lower_bound;
    snug_plan_info pinfo;
    snug_plan_get_info(pl, &pinfo);
    for (int d = 1; d < pinfo.n_devices; d++) { /* what the accelerators hold, the host does not */
        size_t w, act, kv;
        device_parts(p.s, pl, d, &w, &act, &kv);
        ei.weights_total = ei.weights_total > w ? ei.weights_total - w : 0;
        p.kv_total = p.kv_total > kv ? p.kv_total - kv : 0;
    }
    uint64_t total = ei.weights_total + p.kv_total + arena_bytes + folded;
    snug_stream_stats ss;
    snug_session_stream_stats(p.s, &ss);
    bool streams = ss.budget && ss.first_streamed < ss.n_layers;
    if (streams) /* resident layers, the slots, what cannot stream, activations and KV */
        total = ss.planned;
    if (o.svg && write_svg(o.svg, pl, nodes, L, err, sizeof err) != SNUG_OK) {
        fprintf(stderr, "snug plan: --svg: %s\n", err);
        goto done;
    }
    if (o.json) {
        FILE *f = stdout;
        fprintf(f, "{\n  \"model\": ");
        snug_json_write_str(f, o.path);
        fprintf(f, ",\n  \"ctx\": %lld, \"batch\": %lld, \"seq\": %lld,\n", (long long)o.ctx, (long long)o.batch,
                (long long)o.seq);
        fprintf(f, "  \"inputs\": [");
        for (int i = 0; i < mi.n_inputs; i++) {
            fprintf(f, "%s{\"name\": ", i ? ", " : "");
            snug_json_write_str(f, snug_session_input_name(p.s, i));
            fprintf(f, ", \"shape\": [");
            for (int k = 0; k < p.in[i].rank; k++)
                fprintf(f, "%s%lld", k ? ", " : "", (long long)p.in[i].dims[k]);
            fprintf(f, "], \"kv_bytes\": %" PRIu64 "}", p.kv_bytes[i]);
        }
        fprintf(f, "],\n  \"layers\": {\"count\": %d, \"nodes_named\": %d, \"nodes_from_value_names\": %d, "
                   "\"nodes_from_structure\": %d, \"nodes_from_neighbours\": %d, \"pre\": %d, \"post\": %d},\n",
                L, p.li.nodes_named, p.li.nodes_from_value_names, p.li.nodes_from_structure, p.li.nodes_from_neighbours,
                p.li.nodes_pre, p.li.nodes_post);
        fprintf(f, "  \"devices\": [{\"name\": \"host\", \"budget\": ");
        if (o.have_budget)
            fprintf(f, "%" PRIu64, o.budget);
        else
            fprintf(f, "null");
        fprintf(f,
                ", \"weights\": %" PRIu64 ", \"kv\": %" PRIu64 ", \"activations\": %zu, \"lower_bound\": %zu, "
                "\"workspace_max\": %" PRIu64 ", \"folded\": %" PRIu64 ", \"present_in_arena\": %" PRIu64
                ", \"total\": %" PRIu64 ", \"fits\": %s}",
                ei.weights_total, p.kv_total, arena_bytes, lower_bound, ws_max, folded, present, total,
                !o.have_budget ? "null" : total <= o.budget ? "true" : "false");
        json_devices(f, p.s, pl, L, o.place.mem);
        fprintf(f, "],\n");
        if (streams)
            fprintf(f,
                    "  \"stream\": {\"first_layer\": %d, \"layers\": %d, \"slots\": %d, \"staging_bytes\": %" PRIu64
                    ", \"sweep_bytes\": %" PRIu64 ", \"planned\": %" PRIu64 ", \"minimum\": %" PRIu64 "},\n",
                    ss.first_streamed, ss.n_layers, ss.depth, ss.staging_bytes, ss.sweep_bytes, ss.planned,
                    ss.minimum);
        fprintf(f, "  \"per_layer\": [\n");
        for (int r = 0; r < L + 2; r++) {
            char ln[16];
            layer_name(r - 1, L, ln, sizeof ln);
            fprintf(f,
                    "    {\"layer\": \"%s\", \"nodes\": %d, \"weights\": %" PRIu64 ", \"kv\": %" PRIu64
                    ", \"activations\": %" PRIu64 ", \"workspace\": %" PRIu64 ", \"folded\": %" PRIu64
                    ", \"sources\": {",
                    ln, rows[r].nodes, rows[r].weights, rows[r].kv, rows[r].act, rows[r].ws, rows[r].folded);
            for (int s = 0; s < SNUG_WS_SOURCE_COUNT; s++)
                fprintf(f, "%s\"%s\": %d", s ? ", " : "", snug_ws_source_name(s), rows[r].src[s]);
            fprintf(f, "}}%s\n", r + 1 < L + 2 ? "," : "");
        }
        fprintf(f, "  ],\n  \"coverage\": {");
        for (int s = 0; s < SNUG_WS_SOURCE_COUNT; s++)
            fprintf(f, "\"%s\": %d, ", snug_ws_source_name(s), ei.n_by_source[s]);
        fprintf(f, "\"level1_from_table\": %d, \"level2_over_level1\": %d},\n", ei.n_level1_from_table,
                ei.n_level2_over);
        fprintf(f, "  \"stats\": ");
        if (stats) {
            fprintf(f, "{\"file\": ");
            snug_json_write_str(f, snug_stats_path(stats));
            fprintf(f, ", \"rows\": %d, \"unmatched_rows\": %d, \"nodes_without_row\": %d},\n",
                    snug_stats_count(stats), unmatched, missing);
        } else {
            fprintf(f, "null,\n");
        }
        fprintf(f, "  \"nodes\": [\n");
        for (int i = 0; i < nn; i++) {
            const snug_node_estimate *e = &ne[i];
            fprintf(f, "    {\"name\": ");
            snug_json_write_str(f, nodes[i].name);
            fprintf(f, ", \"op\": ");
            snug_json_write_str(f, nodes[i].op);
            fprintf(f,
                    ", \"layer\": %d, \"weights\": %" PRIu64 ", \"outputs\": %" PRIu64 ", \"folded\": %" PRIu64
                    ", \"workspace\": %" PRIu64 ", \"level1\": %" PRIu64 ", \"level2\": %" PRIu64
                    ", \"source\": \"%s\"}%s\n",
                    nodes[i].layer, e->weights, e->outputs, e->folded, e->workspace, e->ws_level1, e->ws_level2,
                    snug_ws_source_name(e->source), i + 1 < nn ? "," : "");
        }
        fprintf(f, "  ],\n  \"plan\": ");
        snug_plan_write_json(pl, f);
        fprintf(f, "\n}\n");
    } else {
        char a[64], b2[64], c[64], d[64], e[64];
        printf("model      %s\n", o.path);
        printf("shapes     batch %lld, prefill %lld tokens, KV cache for %lld tokens\n", (long long)o.batch,
               (long long)o.seq, (long long)o.ctx);
        printf("layers     %d (nodes: %d by name, %d by value names, %d by structure, %d from neighbours; %d pre, "
               "%d post)\n",
               L, p.li.nodes_named, p.li.nodes_from_value_names, p.li.nodes_from_structure, p.li.nodes_from_neighbours,
               p.li.nodes_pre, p.li.nodes_post);
        if (stats)
            printf("stats      %s: %d rows, %d match no node, %d nodes without a row\n", snug_stats_path(stats),
                   snug_stats_count(stats), unmatched, missing);
        printf("\n%-6s %6s %12s %12s %12s %12s  %s\n", "layer", "nodes", "weights", "KV", "act(sum)", "ws(max)",
               "workspace source: est/prof/max/fallback");
        for (int r = 0; r < L + 2; r++) {
            char ln[16];
            layer_name(r - 1, L, ln, sizeof ln);
            if (!rows[r].nodes && !rows[r].kv)
                continue;
            hb(rows[r].weights, a, sizeof a);
            hb(rows[r].kv, b2, sizeof b2);
            hb(rows[r].act, c, sizeof c);
            hb(rows[r].ws, d, sizeof d);
            printf("%-6s %6d %12s %12s %12s %12s  %d/%d/%d/%d\n", ln, rows[r].nodes, a, b2, c, d,
                   rows[r].src[SNUG_WS_ESTIMATOR], rows[r].src[SNUG_WS_PROFILE], rows[r].src[SNUG_WS_MAX],
                   rows[r].src[SNUG_WS_FALLBACK]);
        }
        printf("\ndevice host%s\n", o.have_budget ? "" : " (no budget given: --mem host=SIZE)");
        hb(ei.weights_total, a, sizeof a);
        printf("  weights      %14" PRIu64 "  %s (each initializer once%s)\n", ei.weights_total, a,
               snug_session_device_count(p.s) > 1 ? "; not those on the device" : "");
        hb(p.kv_total, a, sizeof a);
        printf("  KV cache     %14" PRIu64 "  %s (%lld tokens x batch %lld)\n", p.kv_total, a, (long long)o.ctx,
               (long long)o.batch);
        hb(arena_bytes, a, sizeof a);
        hb(lower_bound, b2, sizeof b2);
        hb(present, c, sizeof c);
        printf("  activations  %14zu  %s arena incl. workspace (lower bound %s; present.* outputs %s)\n",
               arena_bytes, a, b2, c);
        hb(ws_max, a, sizeof a);
        printf("  workspace    %14" PRIu64 "  %s largest node (inside the arena)\n", ws_max, a);
        if (folded) {
            hb(folded, a, sizeof a);
            printf("  folded       %14" PRIu64 "  %s constants computed at plan time\n", folded, a);
        }
        if (streams) {
            char s1[64], s2[64], s3[64];
            hb(ss.staging_bytes, s1, sizeof s1);
            hb(ss.sweep_bytes, s2, sizeof s2);
            hb(ss.minimum, s3, sizeof s3);
            printf("  streamed     layers %d-%d of %d through %d staging slots (%s): %s read from the file per "
                   "step, not resident (the smallest budget that plans: %s)\n",
                   ss.first_streamed, ss.n_layers - 1, ss.n_layers, ss.depth, s1, s2, s3);
        } else if (o.stream) {
            printf("  streamed     nothing: everything fits the budget resident\n");
        }
        hb(total, a, sizeof a);
        printf("  total        %14" PRIu64 "  %s%s", total, a, streams ? " (resident and staging)" : "");
        if (o.have_budget) {
            hb(o.budget, e, sizeof e);
            hb(total > o.budget ? total - o.budget : o.budget - total, d, sizeof d);
            printf(" of %s budget: %s by %s", e, total <= o.budget ? "fits" : "OVER", d);
        }
        printf("\n");
        print_devices(p.s, pl, nodes, nn);
        print_placement(p.s, pl, L);
        printf("\ncoverage   workspace figures by source: %d estimator, %d profile, %d max(profile, estimator), "
               "%d fallback",
               ei.n_by_source[SNUG_WS_ESTIMATOR], ei.n_by_source[SNUG_WS_PROFILE], ei.n_by_source[SNUG_WS_MAX],
               ei.n_by_source[SNUG_WS_FALLBACK]);
        printf(" (of %d nodes; %d Level-1 from the plan table)\n", nn, ei.n_level1_from_table);
        if (ei.n_level2_over)
            printf("warning    %d node(s) declared more workspace in prepare than their Level-1 estimate\n",
                   ei.n_level2_over);
        if (ei.n_by_source[SNUG_WS_FALLBACK]) {
            printf("fallback   ");
            int shown = 0;
            for (int i = 0; i < nn && shown < 8; i++) {
                if (ne[i].source != SNUG_WS_FALLBACK)
                    continue;
                bool dup = false;
                for (int j = 0; j < i && !dup; j++)
                    dup = ne[j].source == SNUG_WS_FALLBACK && !strcmp(nodes[j].op, nodes[i].op);
                if (!dup)
                    printf("%s%s", shown++ ? ", " : "ops without a Level-1 estimator: ", nodes[i].op);
            }
            printf("\n");
        }
        if (o.svg)
            printf("svg        %s\n", o.svg);
    }
    status = o.have_budget && total > o.budget ? 3 : 0;
done:
    free(rows);
    free(nodes);
    free(ne);
    snug_estimate_free(est);
    snug_plan_free(pl);
    snug_stats_free(stats);
    planned_free(&p);
    return status;
}

/* ---- snug profile --------------------------------------------------------- */

static const char k_profile_help[] =
    "usage: snug profile MODEL.onnx --out FILE [options]\n\n"
    "Runs the model once at the planning shapes (inputs generated: integers 1,\n"
    "floats 0) and writes per-node memory in ONNX Runtime's node-stats format\n"
    "(#name,input_sizes,initializers_sizes,total_dynamic_sizes,total_temp_allocations),\n"
    "which `snug plan --stats` and ONNX Runtime's resource partitioning read.\n"
    "Each value counts once, at the first node that reads or makes it.\n\n"
    "  --out FILE          the stats file to write (required)\n"
    "  --ctx N, --seq N, --batch N, --dim NAME=VALUE, --shape SPEC, --threads N\n"
    "                      planning shapes as for snug plan (default --ctx 128)\n";

int snug_cmd_profile(int argc, char **argv) {
    popts o = {.cmd = "profile", .ctx = 128, .batch = 1, .seq = 0};
    parse_opts(&o, argc, argv, k_profile_help);
    if (!o.out)
        cli_die_usage("profile", "missing --out FILE");
    planned p;
    int status = open_and_plan(&o, &p);
    snug_value **in = NULL;
    const snug_value **outs = NULL;
    snug_node_stats *st = NULL;
    snug_plan *pl = NULL;
    char err[1024];
    int ni = 0;
    if (status)
        goto done;
    status = 1;
    snug_model_info mi;
    snug_model_get_info(p.m, &mi);
    int nn = mi.n_nodes;
    ni = mi.n_inputs;
    in = calloc((size_t)ni + 1, sizeof *in);
    outs = calloc((size_t)mi.n_outputs + 1, sizeof *outs);
    st = calloc((size_t)nn + 1, sizeof *st);
    for (int i = 0; i < ni; i++) {
        const snug_tensor *t = &p.in[i];
        snug_value_info v;
        snug_model_input(p.m, i, &v);
        if (v.kind != SNUG_KIND_TENSOR || snug_value_new_input(p.m, i, t->rank, t->dims, &in[i]) != SNUG_OK) {
            fprintf(stderr, "snug profile: input '%s' cannot be generated\n", v.name);
            goto done;
        }
        if (snug_dtype_class(t->dtype) != SNUG_DTYPE_FLOAT && t->dtype != SNUG_STRING)
            for (int64_t k = 0; k < snug_value_count(in[i]); k++)
                snug_value_set_f64(in[i], k, 1.0);
    }
    if (snug_session_run_values(p.s, (const snug_value *const *)in, ni, outs, mi.n_outputs) != SNUG_OK ||
        snug_plan_new(p.s, &pl) != SNUG_OK) {
        fprintf(stderr, "snug profile: %s\n", snug_session_error(p.s));
        goto done;
    }
    if (snug_plan_node_stats(pl, st, err, sizeof err) != SNUG_OK ||
        snug_stats_write(o.out, p.m, st, err, sizeof err) != SNUG_OK) {
        fprintf(stderr, "snug profile: %s\n", err);
        goto done;
    }
    uint64_t tin = 0, tinit = 0, tdyn = 0, ttemp = 0;
    for (int i = 0; i < nn; i++)
        tin += st[i].input, tinit += st[i].init, tdyn += st[i].dynamic, ttemp += st[i].temp;
    printf("wrote %d rows to %s (inputs %" PRIu64 ", initializers %" PRIu64 ", outputs %" PRIu64
           ", temp %" PRIu64 " bytes in total)\n",
           nn, o.out, tin, tinit, tdyn, ttemp);
    status = 0;
done:
    for (int i = 0; in && i < ni; i++)
        snug_value_free(in[i]);
    free(in);
    free(outs);
    free(st);
    snug_plan_free(pl);
    planned_free(&p);
    return status;
}
