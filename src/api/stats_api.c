/* The public node stats files and per-node estimates (include/snug.h,
 * snug_stats_*, snug_estimate_*) over plan/stats.h and plan/estimate.h. */
#include <string.h>

#include "api/api.h"
#include "plan/estimate.h"
#include "plan/stats.h"

_Static_assert(SNUG_WS_SOURCE_COUNT == (int)SN_WS_SOURCE_COUNT && SNUG_WS_FALLBACK == (int)SN_WS_FALLBACK,
               "SNUG_WS_* and sn_ws_source differ");

struct snug_stats {
    sn_stats *st;          /* owned */
    const sn_graph *graph; /* the graph it was matched to (borrowed), or NULL */
    int *node_row;         /* owned [graph->n_nodes]: the row of each node, or -1 */
};

struct snug_estimate {
    sn_estimate est; /* owns its arrays */
};

size_t snug_model_node_stats_key(const snug_model *m, int i, char *buf, size_t cap) {
    if (i < 0 || i >= m->graph->n_nodes) {
        if (buf && cap)
            buf[0] = 0;
        return 0;
    }
    return sn_stats_node_key(m->graph->nodes[i].p, buf, cap);
}

int snug_plan_node_stats(const snug_plan *p, snug_node_stats *st, char *err, size_t err_cap) {
    const sn_graph *g = p->model->graph;
    sn_err e = {0};
    sn_node_stats *s = sn_calloc((size_t)g->n_nodes + 1, sizeof *s);
    if (!s)
        return sn_api_fail(err, err_cap, &e, sn_errf(&e, SNUG_ERR_OOM, "out of memory"));
    int rc = sn_stats_from_plan(g, p->plan, s, &e);
    for (int i = 0; rc == SNUG_OK && i < g->n_nodes; i++)
        st[i] = (snug_node_stats){s[i].input, s[i].init, s[i].dynamic, s[i].temp};
    sn_free(s);
    return rc == SNUG_OK ? rc : sn_api_fail(err, err_cap, &e, rc);
}

int snug_stats_write(const char *path, const snug_model *m, const snug_node_stats *st, char *err,
                     size_t err_cap) {
    const sn_graph *g = m->graph;
    int nn = g->n_nodes, rc = SNUG_OK;
    sn_err e = {0};
    char **keys = sn_calloc((size_t)nn + 1, sizeof *keys);
    sn_node_stats *s = sn_calloc((size_t)nn + 1, sizeof *s);
    if (!keys || !s)
        rc = sn_errf(&e, SNUG_ERR_OOM, "out of memory");
    for (int i = 0; rc == SNUG_OK && i < nn; i++) {
        s[i] = (sn_node_stats){st[i].input, st[i].init, st[i].dynamic, st[i].temp};
        if (!(keys[i] = sn_stats_node_key_dup(g->nodes[i].p)))
            rc = sn_errf(&e, SNUG_ERR_OOM, "out of memory");
    }
    if (rc == SNUG_OK)
        rc = sn_stats_write(path, nn, keys, s, &e);
    for (int i = 0; keys && i < nn; i++)
        sn_free(keys[i]);
    sn_free(keys);
    sn_free(s);
    return rc == SNUG_OK ? rc : sn_api_fail(err, err_cap, &e, rc);
}

int snug_stats_load(const char *path, const char *model_dir, snug_stats **out, char *err, size_t err_cap) {
    *out = NULL;
    sn_err e = {0};
    snug_stats *st = sn_calloc(1, sizeof *st);
    if (!st)
        return sn_api_fail(err, err_cap, &e, sn_errf(&e, SNUG_ERR_OOM, "out of memory"));
    int rc = sn_stats_load(path, model_dir, &st->st, &e);
    if (rc != SNUG_OK) {
        sn_free(st);
        return sn_api_fail(err, err_cap, &e, rc);
    }
    *out = st;
    return SNUG_OK;
}

void snug_stats_free(snug_stats *st) {
    if (!st)
        return;
    sn_stats_free(st->st);
    sn_free(st->node_row);
    sn_free(st);
}

const char *snug_stats_path(const snug_stats *st) { return st->st->path; }
int snug_stats_count(const snug_stats *st) { return st->st->n; }

int snug_stats_get_row(const snug_stats *st, int r, snug_stats_row *out) {
    if (r < 0 || r >= st->st->n)
        return SNUG_ERR_RANGE;
    const sn_stats_row *row = &st->st->rows[r];
    const sn_node_stats *s = &row->s;
    *out = (snug_stats_row){row->name, {s->input, s->init, s->dynamic, s->temp}, row->line, row->node};
    return SNUG_OK;
}

int snug_stats_match(snug_stats *st, const snug_model *m, int *unmatched_rows, int *missing_nodes, char *err,
                     size_t err_cap) {
    sn_err e = {0};
    int *rows = sn_calloc((size_t)m->graph->n_nodes + 1, sizeof *rows);
    if (!rows)
        return sn_api_fail(err, err_cap, &e, sn_errf(&e, SNUG_ERR_OOM, "out of memory"));
    int rc = sn_stats_match(st->st, m->graph, rows, unmatched_rows, missing_nodes, &e);
    if (rc != SNUG_OK) {
        sn_free(rows);
        return sn_api_fail(err, err_cap, &e, rc);
    }
    sn_free(st->node_row);
    st->node_row = rows;
    st->graph = m->graph;
    return SNUG_OK;
}

int snug_stats_node_row(const snug_stats *st, int i) {
    return st->graph && i >= 0 && i < st->graph->n_nodes ? st->node_row[i] : -1;
}

const char *snug_ws_source_name(int source) {
    return source >= 0 && source < SN_WS_SOURCE_COUNT ? sn_ws_source_name((sn_ws_source)source) : "?";
}

int snug_estimate_new(const snug_plan *p, const snug_estimate_opts *o, snug_estimate **out, char *err,
                      size_t err_cap) {
    *out = NULL;
    sn_err e = {0};
    snug_estimate_opts none = {0};
    if (!o)
        o = &none;
    if (o->stats && o->stats->graph != p->model->graph)
        return sn_api_fail(err, err_cap, &e,
                           sn_errf(&e, SNUG_ERR_INVALID_ARG, "the stats are not matched to the plan's model"));
    snug_estimate *est = sn_calloc(1, sizeof *est);
    if (!est)
        return sn_api_fail(err, err_cap, &e, sn_errf(&e, SNUG_ERR_OOM, "out of memory"));
    sn_logger lg = {o->log, o->log_user, o->log_level};
    sn_estimate_opts eo = {NULL, 1, o->stats ? o->stats->st : NULL, o->stats ? o->stats->node_row : NULL,
                           o->strict != 0, &lg};
    int rc = sn_estimate_nodes(p->model->graph, p->plan, &eo, &est->est, &e);
    if (rc != SNUG_OK) {
        snug_estimate_free(est);
        return sn_api_fail(err, err_cap, &e, rc);
    }
    *out = est;
    return SNUG_OK;
}

void snug_estimate_free(snug_estimate *e) {
    if (!e)
        return;
    sn_estimate_free(&e->est);
    sn_free(e);
}

int snug_estimate_get_node(const snug_estimate *e, int i, snug_node_estimate *out) {
    if (i < 0 || i >= e->est.n_nodes)
        return SNUG_ERR_RANGE;
    const sn_node_est *n = &e->est.nodes[i];
    *out = (snug_node_estimate){
        .device = n->device,
        .weights = n->weights,
        .weights_read = n->weights_read,
        .inputs = n->inputs,
        .outputs = n->outputs,
        .folded = n->folded,
        .ws_level1 = n->ws_l1,
        .ws_level2 = n->ws_l2,
        .ws_profile = n->ws_profile,
        .workspace = n->ws,
        .source = n->src,
        .has_level1 = n->has_l1,
        .has_profile = n->has_profile,
        .level2_over = n->l2_over,
        .dynamic = n->dynamic,
    };
    return SNUG_OK;
}

void snug_estimate_get_info(const snug_estimate *e, snug_estimate_info *out) {
    memset(out, 0, sizeof *out);
    out->n_nodes = e->est.n_nodes;
    memcpy(out->n_by_source, e->est.n_by_src, sizeof out->n_by_source);
    out->n_level1_from_table = e->est.n_l1_table;
    out->n_level2_over = e->est.n_l2_over;
    out->weights_total = e->est.weights_total;
}
