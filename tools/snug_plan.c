/* snug plan / snug profile: the memory plan of a model at planning shapes,
 * without running it (plan), and per-node figures of one run in ONNX
 * Runtime's node-stats format (profile). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "exec/session.h"
#include "genai/kvloop.h"
#include "graph/layers.h"
#include "plan/estimate.h"
#include "plan/memplan.h"
#include "plan/stats.h"

typedef sn_dim_bind dimbind;

typedef struct popts {
    const char *cmd;
    const char *path, *stats, *svg, *out, *shape, *threads, *weights;
    bool json, strict, have_budget, last_logits;
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

/* The planning shape of graph input v: --shape entry, else declared dims
 * with symbols bound. Returns false with a message in err. */
static bool input_shape(const sn_graph *g, const sn_value *v, const sn_shape_override *ov, int n_ov,
                        const dimbind *b, int nb, sn_tensor *t, char *err, size_t cap) {
    *t = v->info;
    t->data = NULL;
    for (int k = 0; k < n_ov; k++)
        if (!strcmp(ov[k].name, v->name)) {
            if (t->rank >= 0 && t->rank != ov[k].rank) {
                snprintf(err, cap, "--shape %s: rank %d, but the model declares rank %d", v->name, ov[k].rank,
                         t->rank);
                return false;
            }
            sn_tensor_set_shape(t, ov[k].rank, ov[k].dims);
            return true;
        }
    if (t->kind != SN_KIND_TENSOR || t->rank < 0) {
        snprintf(err, cap, "input '%s' has no declared shape; give it with --shape '%s:[d0,d1,...]'", v->name,
                 v->name);
        return false;
    }
    for (int k = 0; k < t->rank; k++) {
        int64_t d = t->dims[k];
        if (d >= 0)
            continue;
        const char *nm = d <= SN_DIM_SYM(0) ? g->syms[SN_DIM_SYM_ID(d)] : NULL;
        int64_t val;
        if (!nm || !sn_dim_eval(nm, b, nb, &val)) {
            snprintf(err, cap, "input '%s' dim %d (%s) is not bound: use --dim NAME=VALUE or --shape", v->name, k,
                     nm ? nm : "unnamed");
            return false;
        }
        t->dims[k] = val;
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
        } else if (a[0] == '-' && !val) {
            char m[256];
            snprintf(m, sizeof m, "unknown option or missing value: '%s'", a);
            cli_die_usage(o->cmd, m);
        } else if (!strcmp(a, "--mem")) {
            const char *eq = strchr(val, '=');
            if (!eq)
                cli_die_usage(o->cmd, "--mem takes DEVICE=SIZE, e.g. --mem host=2G");
            size_t dl = (size_t)(eq - val);
            if (!((dl == 4 && !strncasecmp(val, "host", 4)) || (dl == 3 && !strncasecmp(val, "cpu", 3)))) {
                fprintf(stderr, "snug %s: --mem %s: device '%.*s' is not in this build (devices: host)\n", o->cmd,
                        val, (int)dl, val);
                exit(2);
            }
            sn_err e = {0};
            if (sn_parse_size(eq + 1, &o->budget, &e) != SNUG_OK) {
                fprintf(stderr, "snug %s: --mem %s: %s\n", o->cmd, val, e.msg);
                exit(2);
            }
            o->have_budget = true;
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
    sn_session *s;
    sn_layer_info li;
    sn_tensor *in;      /* [n_inputs] planning infos */
    uint64_t *kv_bytes; /* [n_inputs] KV input bytes at ctx (0 for others) */
    int *kv_layer;      /* [n_inputs] */
    uint64_t kv_total;
    sn_kvloop *loop;    /* an LLM: planned the way snug run / bench drive it, or NULL */
} planned;

static void planned_free(planned *p) {
    sn_kvloop_free(p->loop);
    free(p->in);
    free(p->kv_bytes);
    free(p->kv_layer);
    sn_session_close(p->s);
}

static int open_and_plan(const popts *o, planned *p) {
    memset(p, 0, sizeof *p);
    sn_err err = {0};
    snug_options *so = snug_options_new();
    if (o->threads)
        snug_options_set(so, "snug.threads", o->threads);
    if (o->weights)
        snug_options_set(so, "snug.weights", o->weights);
    if (o->last_logits)
        snug_options_set(so, "snug.last_logits", "1");
    int rc = sn_session_open(o->path, so, &p->s, &err);
    snug_options_free(so);
    if (rc != SNUG_OK) {
        cli_model_error(o->cmd, o->path, err.msg);
        return 1;
    }
    sn_graph *g = p->s->graph;
    p->li = p->s->layers; /* found by the session */
    sn_shape_override *ov = NULL;
    int n_ov = 0;
    if (o->shape && sn_shape_override_parse(o->shape, &ov, &n_ov, &err) != SNUG_OK) {
        fprintf(stderr, "snug %s: --shape: %s\n", o->cmd, err.msg);
        return 2;
    }
    for (int k = 0; k < n_ov; k++) {
        int v = sn_graph_find(g, ov[k].name);
        if (v < 0 || !(g->values[v].flags & SN_VAL_INPUT)) {
            fprintf(stderr, "snug %s: --shape: the model has no input '%s'\n", o->cmd, ov[k].name);
            sn_shape_override_free(ov, n_ov);
            return 2;
        }
    }
    for (int k = 0; k < o->n_dims; k++) {
        bool found = false;
        for (int s = 0; s < g->n_syms; s++)
            found |= !strcmp(g->syms[s], o->dims[k].name);
        if (!found) {
            fprintf(stderr, "snug %s: --dim %s: the model has no symbolic dim of that name\n", o->cmd,
                    o->dims[k].name);
            sn_shape_override_free(ov, n_ov);
            return 2;
        }
    }
    int ni = g->n_inputs;
    p->in = calloc((size_t)ni + 1, sizeof *p->in);
    p->kv_bytes = calloc((size_t)ni + 1, sizeof *p->kv_bytes);
    p->kv_layer = calloc((size_t)ni + 1, sizeof *p->kv_layer);
    dimbind b[80], bkv[80];
    int nb = make_binds(o, o->seq, 0, b), nbkv = make_binds(o, o->seq, o->ctx, bkv);
    char msg[512];
    rc = 0;
    for (int i = 0; i < ni && !rc; i++) {
        const sn_value *v = &g->values[g->inputs[i]];
        if (!input_shape(g, v, ov, n_ov, b, nb, &p->in[i], msg, sizeof msg)) {
            fprintf(stderr, "snug %s: %s\n", o->cmd, msg);
            rc = 2;
            break;
        }
        if (is_kv_input(v->name)) {
            sn_tensor t;
            /* The cache at full context: past bound to ctx (a --shape entry
             * for the input is its size as given). */
            if (input_shape(g, v, ov, n_ov, bkv, nbkv, &t, msg, sizeof msg)) {
                size_t nbytes = sn_tensor_nbytes(&t);
                p->kv_bytes[i] = nbytes == SIZE_MAX ? 0 : nbytes;
                p->kv_total += p->kv_bytes[i];
            }
            /* The layer of its first reader inside a layer (the shape
             * computations reading it are pre). */
            p->kv_layer[i] = -1;
            for (int c = 0; c < v->n_cons && p->kv_layer[i] < 0; c++) {
                int l = g->nodes[v->cons[c]].layer;
                p->kv_layer[i] = l >= 0 && l < p->li.n_layers ? l : -1;
            }
        }
    }
    sn_shape_override_free(ov, n_ov);
    if (rc)
        return rc;
    /* An LLM at its default shapes is planned by the step driver itself: the
     * KV cache as the executor's persistent state (present computed into it
     * where the attention op can), activations at the bounds of a prompt of
     * up to ctx tokens. That is the plan snug run and snug bench execute. */
    int lrc = p->kv_total && !n_ov && !o->n_dims && o->batch == 1 && o->seq == o->ctx
                  ? sn_kvloop_new(p->s, o->ctx, &p->loop, &err)
                  : SNUG_ERR_UNSUPPORTED;
    if (lrc == SNUG_ERR_RANGE) { /* a context the model cannot hold */
        cli_model_error(o->cmd, o->path, err.msg);
        return 1;
    }
    if (lrc == SNUG_OK && sn_exec_get_stats(p->s->exec)->n_plans > 0) {
        const sn_kvloop_info *info = sn_kvloop_get_info(p->loop);
        uint64_t per = info->n_layers ? (uint64_t)info->kv_bytes / (2 * (uint64_t)info->n_layers) : 0;
        for (int i = 0; i < ni; i++)
            p->kv_bytes[i] = p->kv_bytes[i] ? per : 0;
        p->kv_total = info->kv_bytes;
        return 0;
    }
    if (sn_exec_plan(p->s->exec, p->in, &err) != SNUG_OK) {
        fprintf(stderr, "snug %s: planning %s: %s\n", o->cmd, o->path, err.msg);
        if (err.code == SNUG_ERR_RANGE)
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
    int src[SN_WS_SOURCE_COUNT];
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

/* The arena over time, drawn from the plan value: each arena slot a bar
 * over the steps it is held at its offset (an in-place output shares its
 * input's slot: one bar), each workspace slot a bar over its node's group.
 * Nothing is replayed. */
static int write_svg(const char *path, const sn_graph *g, const sn_plan *pl, int L, sn_err *err) {
    int nn = g->n_nodes, nv = g->n_values, rc = SNUG_OK;
    sn_block *bl = calloc((size_t)nv + (size_t)nn + 1, sizeof *bl);
    int *bv = calloc((size_t)nv + (size_t)nn + 1, sizeof *bv);
    FILE *f = NULL;
    if (!bl || !bv) {
        rc = sn_errf(err, SNUG_ERR_OOM, "out of memory");
        goto done;
    }
    int nb = 0;
    for (int v = 0; v < nv; v++) {
        const sn_plan_value *pv = &pl->values[v];
        if (pv->storage != SN_STORE_ARENA)
            continue;
        bool shared = false; /* the slot of an earlier value (in place) */
        for (int k = 0; k < nb && !shared; k++)
            shared = bl[k].offset == pv->offset && bl[k].start == pv->first && bl[k].end == pv->last;
        if (shared)
            continue;
        bl[nb] = (sn_block){pv->size, pv->first, pv->last, pv->offset};
        bv[nb++] = v;
    }
    for (int i = 0; i < nn; i++)
        if (pl->nodes[i].workspace) {
            bl[nb] = (sn_block){pl->nodes[i].workspace, pl->nodes[i].group, i, pl->nodes[i].ws_offset};
            bv[nb++] = -1 - i;
        }
    size_t arena = pl->buffers[0].size ? pl->buffers[0].size : 1;
    if (!(f = fopen(path, "w"))) {
        rc = sn_errf(err, SNUG_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        goto done;
    }
    const double W = 1200, H = 640, x0 = 70, y0 = 40, pw = W - x0 - 20, ph = H - y0 - 50;
    double sx = pw / (nn > 0 ? nn + 1 : 1), sy = ph / (double)arena;
    char ab[64], lb[64];
    hb(pl->buffers[0].size, ab, sizeof ab);
    hb(pl->buffers[0].lower_bound, lb, sizeof lb);
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
    for (int k = 0; k < nb; k++) {
        size_t off = bl[k].offset;
        int layer = bv[k] >= 0 ? (g->values[bv[k]].producer >= 0 ? g->nodes[g->values[bv[k]].producer].layer : -1)
                               : g->nodes[-1 - bv[k]].layer;
        double x = x0 + sx * bl[k].start, w = sx * (bl[k].end - bl[k].start + 1);
        double y = y0 + sy * (double)off, h = sy * (double)bl[k].size;
        if (h < 0.5)
            h = 0.5;
        char fill[32];
        if (bv[k] < 0)
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
        if (bv[k] >= 0)
            xml_str(f, g->values[bv[k]].name);
        else {
            fputs("workspace of ", f);
            xml_str(f, g->nodes[-1 - bv[k]].p->name[0] ? g->nodes[-1 - bv[k]].p->name : g->nodes[-1 - bv[k]].p->op_type);
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
    if (f && fclose(f) != 0 && rc == SNUG_OK)
        rc = sn_errf(err, SNUG_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    free(bl);
    free(bv);
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
    "  --last-logits       plan the output projection for the last position only, as\n"
    "                      snug generate does (config snug.last_logits)\n"
    "  --threads N         threads the kernels are prepared for\n"
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
    sn_stats *stats = NULL;
    int *node_row = NULL, unmatched = 0, missing = 0;
    sn_estimate est = {0};
    lrow *rows = NULL;
    sn_plan *pl = NULL;
    sn_err err = {0};
    if (status)
        goto done;
    const sn_graph *g = p.s->graph;
    int nn = g->n_nodes, L = p.li.n_layers;
    status = 1;
    if (sn_exec_plan_value(p.s->exec, &pl, &err) != SNUG_OK) {
        fprintf(stderr, "snug plan: %s\n", err.msg);
        goto done;
    }
    if (o.stats) {
        FILE *probe = fopen(o.stats, "r");
        const char *dir = probe ? NULL : p.s->model->dir; /* as given, else next to the model */
        if (probe)
            fclose(probe);
        node_row = calloc((size_t)nn + 1, sizeof *node_row);
        if (sn_stats_load(o.stats, dir, &stats, &err) != SNUG_OK ||
            sn_stats_match(stats, g, node_row, &unmatched, &missing, &err) != SNUG_OK) {
            fprintf(stderr, "snug plan: --stats: %s\n", err.msg);
            goto done;
        }
        for (int r = 0; r < stats->n && unmatched; r++)
            if (stats->rows[r].node < 0)
                fprintf(stderr, "snug plan: note: %s:%d: row '%s' matches no node\n", stats->path,
                        stats->rows[r].line, stats->rows[r].name);
        for (int i = 0; i < nn && missing; i++)
            if (node_row[i] < 0) {
                char key[512];
                sn_stats_node_key(g->nodes[i].p, key, sizeof key);
                fprintf(stderr, "snug plan: note: node %s '%s' has no row in %s (key %s)\n",
                        g->nodes[i].p->op_type, g->nodes[i].p->name, stats->path, key);
            }
    }
    int n_logged = 0;
    sn_logger lg = {log_stderr, &n_logged, SNUG_LOG_WARN};
    sn_estimate_opts eo = {NULL, 1, stats, node_row, o.strict, &lg};
    if (sn_estimate_nodes(g, pl, &eo, &est, &err) != SNUG_OK) {
        fprintf(stderr, "snug plan: %s\n", err.msg);
        goto done;
    }
    if (n_logged > 3)
        fprintf(stderr, "warning: ... and %d more like these\n", n_logged - 3);
    /* Per layer: index 0 = pre, 1..L = layers, L+1 = post. */
    rows = calloc((size_t)L + 2, sizeof *rows);
    uint64_t folded = 0, ws_max = 0, present = 0;
    for (int i = 0; i < nn; i++) {
        int l = g->nodes[i].layer, r = l < 0 ? 0 : l >= L ? L + 1 : l + 1;
        const sn_node_est *ne = &est.nodes[i];
        rows[r].nodes++;
        rows[r].weights += ne->weights;
        rows[r].act += ne->outputs;
        rows[r].folded += ne->folded;
        rows[r].ws = ne->ws > rows[r].ws ? ne->ws : rows[r].ws;
        rows[r].src[ne->src]++;
        folded += ne->folded;
        ws_max = ne->ws > ws_max ? ne->ws : ws_max;
    }
    for (int i = 0; i < g->n_inputs; i++) {
        if (!p.kv_bytes[i])
            continue;
        int l = p.kv_layer[i], r = l < 0 ? 0 : l >= L ? L + 1 : l + 1;
        rows[r].kv += p.kv_bytes[i];
    }
    for (int i = 0; i < g->n_outputs; i++)
        if (!strncmp(g->values[g->outputs[i]].name, "present", 7))
            present += pl->values[g->outputs[i]].storage == SN_STORE_ARENA ? pl->values[g->outputs[i]].size : 0;
    const size_t arena_bytes = pl->buffers[0].size, lower_bound = pl->buffers[0].lower_bound;
    uint64_t total = est.weights_total + p.kv_total + arena_bytes + folded;
    if (o.svg && write_svg(o.svg, g, pl, L, &err) != SNUG_OK) {
        fprintf(stderr, "snug plan: --svg: %s\n", err.msg);
        goto done;
    }
    if (o.json) {
        FILE *f = stdout;
        fprintf(f, "{\n  \"model\": ");
        sn_json_write_str(f, o.path);
        fprintf(f, ",\n  \"ctx\": %lld, \"batch\": %lld, \"seq\": %lld,\n", (long long)o.ctx, (long long)o.batch,
                (long long)o.seq);
        fprintf(f, "  \"inputs\": [");
        for (int i = 0; i < g->n_inputs; i++) {
            fprintf(f, "%s{\"name\": ", i ? ", " : "");
            sn_json_write_str(f, g->values[g->inputs[i]].name);
            fprintf(f, ", \"shape\": [");
            for (int k = 0; k < p.in[i].rank; k++)
                fprintf(f, "%s%lld", k ? ", " : "", (long long)p.in[i].dims[k]);
            fprintf(f, "], \"kv_bytes\": %" PRIu64 "}", p.kv_bytes[i]);
        }
        fprintf(f, "],\n  \"layers\": {\"count\": %d, \"nodes_named\": %d, \"nodes_from_value_names\": %d, "
                   "\"nodes_from_neighbours\": %d, \"pre\": %d, \"post\": %d},\n",
                L, p.li.n_named, p.li.n_valname, p.li.n_filled, p.li.n_pre, p.li.n_post);
        fprintf(f, "  \"devices\": [{\"name\": \"host\", \"budget\": ");
        if (o.have_budget)
            fprintf(f, "%" PRIu64, o.budget);
        else
            fprintf(f, "null");
        fprintf(f,
                ", \"weights\": %" PRIu64 ", \"kv\": %" PRIu64 ", \"activations\": %zu, \"lower_bound\": %zu, "
                "\"workspace_max\": %" PRIu64 ", \"folded\": %" PRIu64 ", \"present_in_arena\": %" PRIu64
                ", \"total\": %" PRIu64 ", \"fits\": %s}],\n",
                est.weights_total, p.kv_total, arena_bytes, lower_bound, ws_max, folded, present, total,
                !o.have_budget ? "null" : total <= o.budget ? "true" : "false");
        fprintf(f, "  \"per_layer\": [\n");
        for (int r = 0; r < L + 2; r++) {
            char ln[16];
            layer_name(r - 1, L, ln, sizeof ln);
            fprintf(f,
                    "    {\"layer\": \"%s\", \"nodes\": %d, \"weights\": %" PRIu64 ", \"kv\": %" PRIu64
                    ", \"activations\": %" PRIu64 ", \"workspace\": %" PRIu64 ", \"folded\": %" PRIu64
                    ", \"sources\": {",
                    ln, rows[r].nodes, rows[r].weights, rows[r].kv, rows[r].act, rows[r].ws, rows[r].folded);
            for (int s = 0; s < SN_WS_SOURCE_COUNT; s++)
                fprintf(f, "%s\"%s\": %d", s ? ", " : "", sn_ws_source_name((sn_ws_source)s), rows[r].src[s]);
            fprintf(f, "}}%s\n", r + 1 < L + 2 ? "," : "");
        }
        fprintf(f, "  ],\n  \"coverage\": {");
        for (int s = 0; s < SN_WS_SOURCE_COUNT; s++)
            fprintf(f, "\"%s\": %d, ", sn_ws_source_name((sn_ws_source)s), est.n_by_src[s]);
        fprintf(f, "\"level1_from_table\": %d, \"level2_over_level1\": %d},\n", est.n_l1_table, est.n_l2_over);
        fprintf(f, "  \"stats\": ");
        if (stats) {
            fprintf(f, "{\"file\": ");
            sn_json_write_str(f, stats->path);
            fprintf(f, ", \"rows\": %d, \"unmatched_rows\": %d, \"nodes_without_row\": %d},\n", stats->n, unmatched,
                    missing);
        } else {
            fprintf(f, "null,\n");
        }
        fprintf(f, "  \"nodes\": [\n");
        for (int i = 0; i < nn; i++) {
            const sn_node_est *ne = &est.nodes[i];
            fprintf(f, "    {\"name\": ");
            sn_json_write_str(f, g->nodes[i].p->name);
            fprintf(f, ", \"op\": ");
            sn_json_write_str(f, g->nodes[i].p->op_type);
            fprintf(f,
                    ", \"layer\": %d, \"weights\": %" PRIu64 ", \"outputs\": %" PRIu64 ", \"folded\": %" PRIu64
                    ", \"workspace\": %" PRIu64 ", \"level1\": %" PRIu64 ", \"level2\": %" PRIu64
                    ", \"source\": \"%s\"}%s\n",
                    g->nodes[i].layer, ne->weights, ne->outputs, ne->folded, ne->ws, ne->ws_l1, ne->ws_l2,
                    sn_ws_source_name(ne->src), i + 1 < nn ? "," : "");
        }
        fprintf(f, "  ],\n  \"plan\": ");
        sn_plan_write_json(pl, g, f);
        fprintf(f, "\n}\n");
    } else {
        char a[64], b2[64], c[64], d[64], e[64];
        printf("model      %s\n", o.path);
        printf("shapes     batch %lld, prefill %lld tokens, KV cache for %lld tokens\n", (long long)o.batch,
               (long long)o.seq, (long long)o.ctx);
        printf("layers     %d (nodes: %d by name, %d by value names, %d from neighbours; %d pre, %d post)\n", L,
               p.li.n_named, p.li.n_valname, p.li.n_filled, p.li.n_pre, p.li.n_post);
        if (stats)
            printf("stats      %s: %d rows, %d match no node, %d nodes without a row\n", stats->path, stats->n,
                   unmatched, missing);
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
                   rows[r].src[SN_WS_ESTIMATOR], rows[r].src[SN_WS_PROFILE], rows[r].src[SN_WS_MAX],
                   rows[r].src[SN_WS_FALLBACK]);
        }
        printf("\ndevice host%s\n", o.have_budget ? "" : " (no budget given: --mem host=SIZE)");
        hb(est.weights_total, a, sizeof a);
        printf("  weights      %14" PRIu64 "  %s (each initializer once)\n", est.weights_total, a);
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
        hb(total, a, sizeof a);
        printf("  total        %14" PRIu64 "  %s", total, a);
        if (o.have_budget) {
            hb(o.budget, e, sizeof e);
            hb(total > o.budget ? total - o.budget : o.budget - total, d, sizeof d);
            printf(" of %s budget: %s by %s", e, total <= o.budget ? "fits" : "OVER", d);
        }
        printf("\n\ncoverage   workspace figures by source: %d estimator, %d profile, %d max(profile, estimator), "
               "%d fallback",
               est.n_by_src[SN_WS_ESTIMATOR], est.n_by_src[SN_WS_PROFILE], est.n_by_src[SN_WS_MAX],
               est.n_by_src[SN_WS_FALLBACK]);
        printf(" (of %d nodes; %d Level-1 from the plan table)\n", nn, est.n_l1_table);
        if (est.n_l2_over)
            printf("warning    %d node(s) declared more workspace in prepare than their Level-1 estimate\n",
                   est.n_l2_over);
        if (est.n_by_src[SN_WS_FALLBACK]) {
            printf("fallback   ");
            int shown = 0;
            for (int i = 0; i < nn && shown < 8; i++) {
                if (est.nodes[i].src != SN_WS_FALLBACK)
                    continue;
                bool dup = false;
                for (int j = 0; j < i && !dup; j++)
                    dup = est.nodes[j].src == SN_WS_FALLBACK && !strcmp(g->nodes[j].p->op_type, g->nodes[i].p->op_type);
                if (!dup)
                    printf("%s%s", shown++ ? ", " : "ops without a Level-1 estimator: ", g->nodes[i].p->op_type);
            }
            printf("\n");
        }
        if (o.svg)
            printf("svg        %s\n", o.svg);
    }
    status = o.have_budget && total > o.budget ? 3 : 0;
done:
    free(rows);
    free(node_row);
    sn_estimate_free(&est);
    sn_plan_free(pl);
    sn_stats_free(stats);
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
    sn_tensor *outs = NULL;
    void **own = NULL;
    sn_node_stats *st = NULL;
    char **keys = NULL;
    sn_err err = {0};
    if (status)
        goto done;
    status = 1;
    const sn_graph *g = p.s->graph;
    int ni = g->n_inputs, nn = g->n_nodes;
    own = calloc((size_t)ni + 1, sizeof *own);
    outs = calloc((size_t)g->n_outputs + 1, sizeof *outs);
    st = calloc((size_t)nn + 1, sizeof *st);
    keys = calloc((size_t)nn + 1, sizeof *keys);
    for (int i = 0; i < ni; i++) {
        sn_tensor *t = &p.in[i];
        int64_t n = sn_tensor_numel(t);
        size_t nb = sn_tensor_nbytes(t);
        if (t->kind != SN_KIND_TENSOR || n < 0 || nb == SIZE_MAX || !(own[i] = calloc(1, nb ? nb : 1))) {
            fprintf(stderr, "snug profile: input '%s' cannot be generated\n", g->values[g->inputs[i]].name);
            goto done;
        }
        t->data = own[i];
        if (!sn_dtype_is_float(t->dtype) && t->dtype != SN_STRING)
            for (int64_t k = 0; k < n; k++)
                sn_store_f64(t->dtype, t->data, (size_t)k, 1.0);
    }
    if (sn_exec_run(p.s->exec, p.in, outs, &err) != SNUG_OK) {
        fprintf(stderr, "snug profile: %s\n", err.msg);
        goto done;
    }
    sn_plan *pl = NULL;
    int rs = sn_exec_plan_value(p.s->exec, &pl, &err);
    if (rs == SNUG_OK)
        rs = sn_stats_from_plan(g, pl, st, &err);
    sn_plan_free(pl);
    if (rs != SNUG_OK) {
        fprintf(stderr, "snug profile: %s\n", err.msg);
        goto done;
    }
    for (int i = 0; i < nn; i++)
        if (!(keys[i] = sn_stats_node_key_dup(g->nodes[i].p))) {
            fprintf(stderr, "snug profile: out of memory\n");
            goto done;
        }
    if (sn_stats_write(o.out, nn, keys, st, &err) != SNUG_OK) {
        fprintf(stderr, "snug profile: %s\n", err.msg);
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
    for (int i = 0; keys && i < (p.s ? p.s->graph->n_nodes : 0); i++)
        sn_free(keys[i]);
    free(keys);
    for (int i = 0; own && p.s && i < p.s->graph->n_inputs; i++)
        free(own[i]);
    free(own);
    free(outs);
    free(st);
    planned_free(&p);
    return status;
}
