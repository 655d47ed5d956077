/* The public session API (include/snug.h) over model, graph and executor. */
#include <stdio.h>
#include <stdlib.h>
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "exec/exec.h"
#include "exec/session.h"
#include "plan/estimate.h"
#include "plan/stats.h"

struct snug_options {
    int n, cap;
    char **keys, **vals; /* owned */
    sn_logger log;
};

snug_options *snug_options_new(void) {
    snug_options *o = sn_calloc(1, sizeof *o);
    if (o)
        o->log.level = SNUG_LOG_WARN;
    return o;
}

void snug_options_free(snug_options *o) {
    if (!o)
        return;
    for (int i = 0; i < o->n; i++) {
        sn_free(o->keys[i]);
        sn_free(o->vals[i]);
    }
    sn_free(o->keys);
    sn_free(o->vals);
    sn_free(o);
}

int snug_options_set(snug_options *o, const char *key, const char *value) {
    if (!o || !key || !value)
        return SNUG_ERR_INVALID_ARG;
    for (int i = 0; i < o->n; i++)
        if (!strcmp(o->keys[i], key)) {
            char *v = sn_strdup(value);
            if (!v)
                return SNUG_ERR_OOM;
            sn_free(o->vals[i]);
            o->vals[i] = v;
            return SNUG_OK;
        }
    if (o->n == o->cap) {
        int nc = o->cap ? o->cap * 2 : 8;
        char **k = sn_realloc(o->keys, sizeof *k * (size_t)nc);
        if (!k)
            return SNUG_ERR_OOM;
        o->keys = k;
        char **v = sn_realloc(o->vals, sizeof *v * (size_t)nc);
        if (!v)
            return SNUG_ERR_OOM;
        o->vals = v;
        o->cap = nc;
    }
    o->keys[o->n] = sn_strdup(key);
    o->vals[o->n] = sn_strdup(value);
    if (!o->keys[o->n] || !o->vals[o->n]) {
        sn_free(o->keys[o->n]);
        sn_free(o->vals[o->n]);
        return SNUG_ERR_OOM;
    }
    o->n++;
    return SNUG_OK;
}

const char *snug_options_get(const snug_options *o, const char *key) {
    if (!o)
        return NULL;
    for (int i = 0; i < o->n; i++)
        if (!strcmp(o->keys[i], key))
            return o->vals[i];
    return NULL;
}

void snug_options_set_logger(snug_options *o, snug_log_fn fn, void *user, int level) {
    if (!o)
        return;
    o->log.fn = fn;
    o->log.user = user;
    o->log.level = level;
}

/* Keys this version understands; anything else is an error, not ignored. */
static const char *const k_known_keys[] = {"snug.threads", "session.collect_node_memory_stats_to_file",
                                           "session.max_shape_override", "snug.static_allocation", "snug.weights",
                                           "session.intra_op.allow_spinning", "snug.node_groups", "snug.last_logits",
                                           "session.strict_workspace_verification", "snug.memory_budget",
                                           "snug.max_loop_iterations", "session.set_denormal_as_zero",
                                           "snug.mem.host", "snug.prefetch_layers", "snug.device",
                                           "session.layer_assignment_settings", "session.name_based_layer_assignment",
                                           "snug.strict_layer_assignment", "snug.n_gpu_layers", "snug.mem.gpu", "snug.placement_overflow",
                                           "session.resource_partitioning_settings",
                                           "session.resource_cuda_partitioning_settings", "snug.spin_pauses", NULL};

/* snug.device: an accelerator beside the host ("opencl", "opencl:1",
 * "opencl:NAME"; ORT's "gpu" and "gpu:N" name the first GPU backend of the
 * build), whose kernels run every node they can (sn_plan_assign). */
static int add_device(sn_exec *ex, const char *dev, bool streaming, sn_err *err) {
    if (!dev || !strcasecmp(dev, "cpu") || !strcasecmp(dev, "host"))
        return SNUG_OK;
    char name[128];
    if (!strncasecmp(dev, "gpu", 3) && (dev[3] == 0 || dev[3] == ':'))
        snprintf(name, sizeof name, "opencl%s", dev + 3);
    else
        snprintf(name, sizeof name, "%s", dev);
    for (char *p = name; *p && *p != ':'; p++)
        *p = (char)tolower((unsigned char)*p);
    if (streaming)
        return sn_errf(err, SNUG_ERR_UNSUPPORTED, "snug.device=%s with snug.mem.host: weight streaming to an "
                       "accelerator is not built yet (stream on the host, or give the device the model)", dev);
    int rc = sn_exec_add_backend(ex, name, err);
    if (rc != SNUG_OK)
        sn_err_prefix(err, "snug.device=%s", dev);
    return rc;
}

/* A 0/1 key: *on = its value, or def when unset; anything else is an error. */
static int opt_bool(const snug_options *opts, const char *key, bool def, bool *on, sn_err *err) {
    const char *v = snug_options_get(opts, key);
    *on = v ? !strcmp(v, "1") : def;
    if (v && strcmp(v, "0") && strcmp(v, "1"))
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "%s: '%s' is not 0 or 1", key, v);
    return SNUG_OK;
}

/* session.max_shape_override / snug.static_allocation: plan once at the
 * inputs' bounds; with static allocation, fail if anything would still
 * allocate while running. */
static int plan_bounds(sn_session *s, const snug_options *opts, sn_err *err) {
    const char *mso = snug_options_get(opts, "session.max_shape_override");
    bool strict;
    SN_TRY(opt_bool(opts, "snug.static_allocation", false, &strict, err));
    if (!mso && !strict)
        return SNUG_OK;
    const sn_graph *g = s->graph;
    sn_shape_override *ov = NULL;
    int n_ov = 0, rc = SNUG_OK;
    sn_tensor *b = sn_calloc((size_t)g->n_inputs + 1, sizeof *b);
    if (!b)
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    if (mso && (rc = sn_shape_override_parse(mso, &ov, &n_ov, err)) != SNUG_OK) {
        sn_err_prefix(err, "session.max_shape_override");
        goto done;
    }
    for (int k = 0; k < n_ov; k++) {
        int v = sn_graph_find(g, ov[k].name);
        if (v < 0 || !(g->values[v].flags & SN_VAL_INPUT)) {
            rc = sn_errf(err, SNUG_ERR_INVALID_ARG, "session.max_shape_override: '%s' is not an input of the model",
                         ov[k].name);
            goto done;
        }
    }
    for (int i = 0; i < g->n_inputs; i++) {
        const sn_value *val = &g->values[g->inputs[i]];
        const sn_tensor *d = &val->info;
        char sb[160];
        b[i] = *d;
        b[i].data = NULL;
        const sn_shape_override *o = NULL;
        for (int k = 0; k < n_ov; k++)
            if (!strcmp(ov[k].name, val->name))
                o = &ov[k];
        if (d->kind != SN_KIND_TENSOR || !sn_dtype_valid(d->dtype)) {
            rc = sn_errf(err, SNUG_ERR_UNSUPPORTED, "input '%s' is not a tensor with a known type: cannot plan it ahead",
                         val->name);
            goto done;
        }
        if (o) {
            if (d->rank >= 0 && o->rank != d->rank) {
                rc = sn_errf(err, SNUG_ERR_SHAPE, "session.max_shape_override: input '%s' has rank %d, the bound %d",
                             val->name, d->rank, o->rank);
                goto done;
            }
            for (int k = 0; k < o->rank; k++)
                if (d->rank >= 0 && d->dims[k] >= 0 && d->dims[k] != o->dims[k]) {
                    rc = sn_errf(err, SNUG_ERR_SHAPE,
                                 "session.max_shape_override: input '%s' dim %d is fixed at %lld, the bound says %lld",
                                 val->name, k, (long long)d->dims[k], (long long)o->dims[k]);
                    goto done;
                }
            sn_tensor_set_shape(&b[i], o->rank, o->dims);
        } else if (!sn_tensor_shape_known(d)) {
            rc = sn_errf(err, SNUG_ERR_INVALID_ARG,
                         "input '%s' %s has dynamic dims: give its bound in session.max_shape_override (e.g. "
                         "\"%s:[...]\") to plan ahead",
                         val->name, sn_shape_str(d, sb, sizeof sb), val->name);
            goto done;
        }
    }
    if ((rc = sn_exec_set_bounds(s->exec, b, err)) != SNUG_OK) {
        sn_err_prefix(err, "planning at the input bounds");
        goto done;
    }
    if (strict)
        for (int i = 0; i < g->n_nodes; i++)
            if (sn_exec_node_dynamic(s->exec, i)) {
                const sn_pnode *p = g->nodes[i].p;
                rc = sn_errf(err, SNUG_ERR_UNSUPPORTED,
                             "snug.static_allocation=1: node '%s' (%s) has output shapes known only while running, so "
                             "it would allocate at run time",
                             p->name[0] ? p->name : "(unnamed)", p->op_type);
                goto done;
            }
done:
    sn_shape_override_free(ov, n_ov);
    sn_free(b);
    return rc;
}

static int parse_int(const char *s, long lo, long hi, long *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi)
        return 0;
    *out = v;
    return 1;
}

/* snug.last_logits: the output projection to "logits" (a MatMul, MatMulNBits
 * or Gemm of the hidden state [1, S, H] and constant weights, each position
 * on its own) computes the last position only. A graph where logits come
 * otherwise keeps every position, and the log says why. */
static void set_last_logits(sn_session *s) {
    const sn_graph *g = s->graph;
    int lv = sn_graph_find(g, "logits"), node = lv >= 0 ? g->values[lv].producer : -1;
    const char *why = NULL;
    if (node < 0) {
        why = "no node makes 'logits'";
    } else {
        const sn_node *n = &g->nodes[node];
        const char *op = n->p->op_type;
        bool proj = !strcmp(op, "MatMul") || !strcmp(op, "MatMulNBits") || !strcmp(op, "Gemm");
        bool consts = true;
        for (int k = 1; k < n->n_in; k++)
            consts &= n->in[k] < 0 || (g->values[n->in[k]].flags & SN_VAL_INIT) != 0;
        const sn_tensor *x = n->in[0] >= 0 ? &g->values[n->in[0]].info : NULL;
        if (!proj)
            why = "logits are not made by a MatMul, MatMulNBits or Gemm";
        else if (!consts)
            why = "the projection's weights are not constant";
        else if (!x || x->kind != SN_KIND_TENSOR || x->rank != 3)
            why = "the projection's input is not [batch, sequence, hidden]";
    }
    sn_err e = {0};
    if (!why && sn_exec_set_last_row(s->exec, node, &e) != SNUG_OK)
        why = e.msg;
    if (why)
        sn_log(&s->log, SNUG_LOG_INFO, "snug.last_logits: every position's logits computed (%s)", why);
}

int sn_session_open(const char *path, const snug_options *opts, sn_session **out, sn_err *err) {
    *out = NULL;
    sn_session *s = sn_calloc(1, sizeof *s);
    if (!s)
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    if (opts)
        s->log = opts->log;
    long threads = 0;
    int rc = SNUG_OK;
    for (int i = 0; opts && i < opts->n; i++) {
        bool known = false;
        for (int k = 0; k_known_keys[k]; k++)
            known |= !strcmp(opts->keys[i], k_known_keys[k]);
        if (!known) {
            rc = sn_errf(err, SNUG_ERR_INVALID_ARG, "unknown config key '%s'", opts->keys[i]);
            goto fail;
        }
    }
    const char *t = snug_options_get(opts, "snug.threads");
    if (t && !parse_int(t, 0, 1024, &threads)) {
        rc = sn_errf(err, SNUG_ERR_INVALID_ARG, "snug.threads: '%s' is not a thread count (0..1024)", t);
        goto fail;
    }
    if (threads <= 0) {
        threads = sn_cpu_count();
    }
    const char *wm = snug_options_get(opts, "snug.weights");
    if (wm && strcmp(wm, "map") && strcmp(wm, "load")) {
        rc = sn_errf(err, SNUG_ERR_INVALID_ARG, "snug.weights: '%s' is not 'map' or 'load'", wm);
        goto fail;
    }
    /* weight streaming: a host budget, and the staging ring's depth */
    const char *mh = snug_options_get(opts, "snug.mem.host"), *pd = snug_options_get(opts, "snug.prefetch_layers");
    uint64_t host_budget = 0;
    long depth = 2;
    if (mh && (rc = sn_parse_size(mh, &host_budget, err)) != SNUG_OK) {
        sn_err_prefix(err, "snug.mem.host");
        goto fail;
    }
    if (pd && !parse_int(pd, 2, 64, &depth)) {
        rc = sn_errf(err, SNUG_ERR_INVALID_ARG, "snug.prefetch_layers: '%s' is not a slot count (2..64)", pd);
        goto fail;
    }
    if (host_budget && wm && !strcmp(wm, "map")) {
        rc = sn_errf(err, SNUG_ERR_INVALID_ARG, "snug.mem.host reads every weight from the file into memory of its "
                     "own (snug.weights=load), which snug.weights=map contradicts");
        goto fail;
    }
    bool spin, groups, last_logits, strict_ws, daz;
    if ((rc = opt_bool(opts, "session.intra_op.allow_spinning", true, &spin, err)) != SNUG_OK ||
        (rc = opt_bool(opts, "session.strict_workspace_verification", false, &strict_ws, err)) != SNUG_OK ||
        (rc = opt_bool(opts, "snug.node_groups", true, &groups, err)) != SNUG_OK ||
        (rc = opt_bool(opts, "snug.last_logits", false, &last_logits, err)) != SNUG_OK ||
        (rc = opt_bool(opts, "session.set_denormal_as_zero", true, &daz, err)) != SNUG_OK)
        goto fail;
    if ((rc = sn_model_load(path, &s->model, err)) != SNUG_OK)
        goto fail;
    if ((rc = sn_graph_build(s->model, &s->graph, err)) != SNUG_OK)
        goto fail;
    /* The layers, the unit of placement, belong to the session: every plan
     * and every report sees the same map. */
    if ((rc = sn_layers_discover(s->graph, &s->layers, err)) != SNUG_OK)
        goto fail;
    s->api_model = (snug_model){s->model, s->graph, s->layers, true};
    if ((rc = sn_pool_new((int)threads, &s->pool, err)) != SNUG_OK)
        goto fail;
    sn_pool_set_spinning(s->pool, spin);
    const char *spn = snug_options_get(opts, "snug.spin_pauses");
    long pauses = 0;
    if (spn && !parse_int(spn, 0, 10000000, &pauses)) {
        rc = sn_errf(err, SNUG_ERR_INVALID_ARG, "snug.spin_pauses: '%s' is not a count of pauses (0..10000000)", spn);
        goto fail;
    }
    if (spn && spin)
        sn_pool_set_spin(s->pool, (int)pauses);
    if ((rc = sn_exec_new(s->graph, s->pool, &s->log, &s->exec, err)) != SNUG_OK)
        goto fail;
    if ((rc = add_device(s->exec, snug_options_get(opts, "snug.device"), host_budget != 0, err)) != SNUG_OK)
        goto fail;
    sn_exec_set_streaming(s->exec, host_budget, (int)depth, s->layers.n_layers); /* the layer count placement needs */
    if ((rc = sn_session_placement(s, opts, err)) != SNUG_OK)
        goto fail;
    /* a budget is exact only when nothing of the files is mapped */
    sn_exec_set_weights_load(s->exec, host_budget || (wm && !strcmp(wm, "load")));
    sn_exec_set_streaming(s->exec, host_budget, (int)depth, s->layers.n_layers);
    sn_exec_set_groups(s->exec, groups);
    sn_exec_set_strict_workspace(s->exec, strict_ws);
    sn_exec_set_flush_denormals(s->exec, daz);
    /* what a hostile model may spend (docs/robustness.md) */
    sn_limits lim = *sn_exec_limits(s->exec);
    const char *mb = snug_options_get(opts, "snug.memory_budget");
    const char *mi = snug_options_get(opts, "snug.max_loop_iterations");
    uint64_t u;
    if (mb && (rc = sn_parse_size(mb, &u, err)) != SNUG_OK) {
        sn_err_prefix(err, "snug.memory_budget");
        goto fail;
    }
    lim.mem_budget = mb ? (size_t)u : lim.mem_budget;
    char *end = NULL;
    long long it = mi ? strtoll(mi, &end, 10) : 0;
    if (mi && (!mi[0] || *end || it < 1)) {
        rc = sn_errf(err, SNUG_ERR_INVALID_ARG, "snug.max_loop_iterations: '%s' is not a positive integer", mi);
        goto fail;
    }
    lim.max_iterations = mi ? (int64_t)it : lim.max_iterations;
    sn_exec_set_limits(s->exec, &lim);
    if (last_logits)
        set_last_logits(s);
    s->api_in = sn_calloc((size_t)s->graph->n_inputs + 1, sizeof *s->api_in);
    s->api_out = sn_calloc((size_t)s->graph->n_outputs + 1, sizeof *s->api_out);
    if (!s->api_in || !s->api_out) {
        rc = sn_errf(err, SNUG_ERR_OOM, "out of memory");
        goto fail;
    }
    if ((rc = plan_bounds(s, opts, err)) != SNUG_OK)
        goto fail;
    const char *sp = snug_options_get(opts, "session.collect_node_memory_stats_to_file");
    if (sp && sp[0]) {
        int nn = s->graph->n_nodes;
        s->stats_path = sn_strdup(sp);
        s->stats_keys = sn_calloc((size_t)nn + 1, sizeof *s->stats_keys);
        s->stats_max = sn_calloc((size_t)nn + 1, sizeof *s->stats_max);
        s->stats_run = sn_calloc((size_t)nn + 1, sizeof *s->stats_run);
        if (!s->stats_path || !s->stats_keys || !s->stats_max || !s->stats_run) {
            rc = sn_errf(err, SNUG_ERR_OOM, "out of memory");
            goto fail;
        }
        for (int i = 0; i < nn; i++)
            if (!(s->stats_keys[i] = sn_stats_node_key_dup(s->graph->nodes[i].p))) {
                rc = sn_errf(err, SNUG_ERR_OOM, "out of memory");
                goto fail;
            }
    }
    *out = s;
    return SNUG_OK;
fail:
    sn_session_close(s);
    return rc;
}

int sn_session_run(sn_session *s, const sn_tensor *in, sn_tensor *out, sn_err *err) {
    /* The session's decision: shapes the plan was not made for are planned
     * for again, and it says so (a plan at bounds refuses what is beyond). */
    SN_TRY(sn_exec_replan_for(s->exec, in, SN_REPLAN_WARN, err));
    SN_TRY(sn_exec_run(s->exec, in, out, err));
    if (s->stats_path) {
        const sn_graph *g = s->graph;
        sn_plan *pl;
        SN_TRY(sn_exec_plan_value(s->exec, &pl, err));
        int rs = sn_stats_from_plan(g, pl, s->stats_run, err);
        sn_plan_free(pl);
        SN_TRY(rs);
        for (int i = 0; i < g->n_nodes; i++)
            sn_node_stats_max(&s->stats_max[i], &s->stats_run[i]);
        int rc = sn_stats_write(s->stats_path, g->n_nodes, s->stats_keys, s->stats_max, err);
        if (rc != SNUG_OK)
            return sn_err_prefix(err, "session.collect_node_memory_stats_to_file");
    }
    return SNUG_OK;
}

void sn_session_close(sn_session *s) {
    if (!s)
        return;
    if (s->stats_keys)
        for (int i = 0; i < s->graph->n_nodes; i++)
            sn_free(s->stats_keys[i]);
    sn_free(s->stats_keys);
    sn_free(s->stats_max);
    sn_free(s->stats_run);
    sn_free(s->stats_path);
    sn_free(s->api_in);
    sn_free(s->api_out);
    sn_free(s->api_vals);
    sn_rules_free(&s->rules);
    sn_free(s->rule_dev);
    sn_free(s->rule_nodes);
    sn_free(s->rule_first);
    sn_free(s->rule_last);
    sn_free(s->node_rule);
    sn_exec_free(s->exec);
    sn_pool_free(s->pool);
    sn_graph_free(s->graph);
    sn_model_free(s->model);
    sn_free(s);
}

int snug_session_create(const char *model_path, const snug_options *opts, snug_session **out, char *errbuf,
                        size_t err_cap) {
    sn_err err = {0};
    sn_session *s;
    int rc = sn_session_open(model_path, opts, &s, &err);
    if (rc != SNUG_OK) {
        if (errbuf && err_cap)
            snprintf(errbuf, err_cap, "%s", err.msg);
        *out = NULL;
        return rc;
    }
    *out = (snug_session *)s;
    return SNUG_OK;
}

void snug_session_free(snug_session *s) { sn_session_close((sn_session *)s); }

const char *snug_session_error(const snug_session *s) { return s ? ((const sn_session *)s)->err.msg : ""; }

int snug_session_input_count(const snug_session *s) { return ((const sn_session *)s)->graph->n_inputs; }
int snug_session_output_count(const snug_session *s) { return ((const sn_session *)s)->graph->n_outputs; }

const char *snug_session_input_name(const snug_session *s, int i) {
    const sn_graph *g = ((const sn_session *)s)->graph;
    return i >= 0 && i < g->n_inputs ? g->values[g->inputs[i]].name : NULL;
}

const char *snug_session_output_name(const snug_session *s, int i) {
    const sn_graph *g = ((const sn_session *)s)->graph;
    return i >= 0 && i < g->n_outputs ? g->values[g->outputs[i]].name : NULL;
}

int sn_session_check_counts(sn_session *s, int n_inputs, int n_outputs) {
    const sn_graph *g = s->graph;
    if (n_inputs != g->n_inputs)
        return sn_errf(&s->err, SNUG_ERR_INVALID_ARG, "the model takes %d inputs, %d given", g->n_inputs, n_inputs);
    if (n_outputs != g->n_outputs)
        return sn_errf(&s->err, SNUG_ERR_INVALID_ARG, "the model has %d outputs, room for %d given", g->n_outputs,
                       n_outputs);
    return SNUG_OK;
}

int snug_session_run(snug_session *ps, const snug_tensor *inputs, int n_inputs, snug_tensor *outputs,
                     int n_outputs) {
    sn_session *s = (sn_session *)ps;
    SN_TRY(sn_session_check_counts(s, n_inputs, n_outputs));
    sn_tensor *in = s->api_in, *out = s->api_out;
    for (int i = 0; i < n_inputs; i++) {
        const snug_tensor *t = &inputs[i];
        if (!sn_dtype_valid(t->dtype) || t->rank < 0 || t->rank > SN_MAX_RANK)
            return sn_errf(&s->err, SNUG_ERR_INVALID_ARG, "input %d: bad dtype or rank", i);
        memset(&in[i], 0, sizeof in[i]);
        in[i].dtype = (sn_dtype)t->dtype;
        sn_tensor_set_shape(&in[i], t->rank, t->dims);
        in[i].data = t->data;
        if (sn_tensor_numel(&in[i]) < 0)
            return sn_errf(&s->err, SNUG_ERR_INVALID_ARG, "input %d: negative or overflowing dims", i);
    }
    SN_TRY(sn_session_run(s, in, out, &s->err));
    for (int i = 0; i < n_outputs; i++) {
        if (out[i].kind != SN_KIND_TENSOR)
            return sn_errf(&s->err, SNUG_ERR_UNSUPPORTED,
                           "output %d is not a tensor (snug_session_run_values takes any value)", i);
        outputs[i].dtype = out[i].dtype;
        outputs[i].rank = out[i].rank;
        memcpy(outputs[i].dims, out[i].dims, sizeof(int64_t) * (size_t)out[i].rank);
        outputs[i].data = out[i].data;
    }
    return SNUG_OK;
}
