/* The public model (include/snug.h, snug_model_*): a loaded model, its
 * graph and layer map, read without planning; the op table and the option
 * value parsers beside. */
#include <string.h>

#include "api/api.h"
#include "exec/session.h"
#include "ops/gemm.h"
#include "ops/op.h"
#include "plan/estimate.h"

int snug_model_open(const char *path, snug_model **out, char *err, size_t err_cap) {
    *out = NULL;
    sn_err e = {0};
    snug_model *m = sn_calloc(1, sizeof *m);
    if (!m)
        return sn_api_fail(err, err_cap, &e, sn_errf(&e, SNUG_ERR_OOM, "out of memory"));
    int rc = sn_model_load(path, &m->model, &e);
    if (rc == SNUG_OK)
        rc = sn_graph_build(m->model, &m->graph, &e);
    if (rc == SNUG_OK)
        rc = sn_layers_discover(m->graph, &m->layers, &e);
    if (rc != SNUG_OK) {
        snug_model_free(m);
        return sn_api_fail(err, err_cap, &e, rc);
    }
    *out = m;
    return SNUG_OK;
}

void snug_model_free(snug_model *m) {
    if (!m || m->borrowed)
        return;
    sn_graph_free(m->graph);
    sn_model_free(m->model);
    sn_free(m);
}

const snug_model *snug_session_model(const snug_session *s) { return &((const sn_session *)s)->api_model; }

void snug_model_get_info(const snug_model *m, snug_model_info *out) {
    const sn_model *md = m->model;
    const sn_graph *g = m->graph;
    memset(out, 0, sizeof *out);
    out->path = md->path;
    out->dir = md->dir;
    out->producer_name = md->producer_name ? md->producer_name : "";
    out->producer_version = md->producer_version ? md->producer_version : "";
    out->ir_version = md->ir_version;
    out->n_opsets = md->n_opset;
    out->n_inputs = g->n_inputs;
    out->n_outputs = g->n_outputs;
    out->n_nodes = g->n_nodes;
    out->n_initializers = md->graph->n_init;
    out->n_dims = g->n_syms;
    for (int i = 0; i < md->graph->n_init; i++) {
        int64_t n = sn_tensor_numel(&md->graph->inits[i].t);
        out->parameters += n > 0 ? n : 0;
    }
    out->weight_bytes = md->weight_bytes;
    sn_graph_weight_use(g, &out->weight_bytes_read, &out->weight_bytes_gathered);
}

int snug_model_opset(const snug_model *m, int i, const char **domain, int64_t *version) {
    if (i < 0 || i >= m->model->n_opset)
        return SNUG_ERR_RANGE;
    *domain = m->model->opsets[i].domain;
    *version = m->model->opsets[i].version;
    return SNUG_OK;
}

const char *snug_model_dim_name(const snug_model *m, int i) {
    return i >= 0 && i < m->graph->n_syms ? m->graph->syms[i] : NULL;
}

static void value_info(const sn_graph *g, const sn_value *v, snug_value_info *out) {
    const sn_tensor *t = &v->info;
    const sn_type *d = v->declared;
    memset(out, 0, sizeof *out);
    out->name = v->name;
    out->kind = t->kind;
    out->optional = t->optional;
    out->dtype = t->dtype;
    out->rank = t->rank;
    for (int k = 0; k < out->rank && k < SN_MAX_RANK; k++) {
        int64_t x = t->dims[k];
        out->dims[k] = x >= 0 ? x : -1;
        if (x <= SN_DIM_SYM(0))
            out->dim_names[k] = g->syms[SN_DIM_SYM_ID(x)];
        else if (x < 0 && d && d->kind == SN_TYPE_TENSOR && k < d->rank)
            out->dim_names[k] = d->dim_params[k];
    }
}

int snug_model_input(const snug_model *m, int i, snug_value_info *out) {
    const sn_graph *g = m->graph;
    if (i < 0 || i >= g->n_inputs)
        return SNUG_ERR_RANGE;
    value_info(g, &g->values[g->inputs[i]], out);
    return SNUG_OK;
}

int snug_model_output(const snug_model *m, int i, snug_value_info *out) {
    const sn_graph *g = m->graph;
    if (i < 0 || i >= g->n_outputs)
        return SNUG_ERR_RANGE;
    value_info(g, &g->values[g->outputs[i]], out);
    return SNUG_OK;
}

int snug_dim_eval(const char *expr, const snug_dim *binds, int n_binds, int64_t *out) {
    sn_dim_bind *b = n_binds > 0 ? sn_malloc(sizeof *b * (size_t)n_binds) : NULL;
    if (n_binds > 0 && !b)
        return SNUG_ERR_OOM;
    for (int i = 0; i < n_binds; i++)
        b[i] = (sn_dim_bind){binds[i].name, binds[i].value};
    bool ok = sn_dim_eval(expr, b, n_binds > 0 ? n_binds : 0, out);
    sn_free(b);
    return ok ? SNUG_OK : SNUG_ERR_INVALID_ARG;
}

int snug_model_node(const snug_model *m, int i, snug_node_info *out) {
    if (i < 0 || i >= m->graph->n_nodes)
        return SNUG_ERR_RANGE;
    const sn_node *n = &m->graph->nodes[i];
    *out = (snug_node_info){n->p->name, n->p->op_type, n->p->domain, n->layer};
    return SNUG_OK;
}

static void count_ops(const sn_graph *g, snug_op_count *h, int *nh, int cap, int *total) {
    for (int i = 0; i < g->n_nodes; i++) {
        const sn_pnode *p = g->nodes[i].p;
        int k = 0;
        for (; k < *nh; k++)
            if (!strcmp(h[k].op, p->op_type) && !strcmp(h[k].domain, p->domain))
                break;
        if (k == *nh && *nh < cap)
            h[(*nh)++] = (snug_op_count){p->domain, p->op_type, 0};
        if (k < *nh)
            h[k].count++;
        (*total)++;
        for (int s = 0; s < g->nodes[i].n_sub; s++)
            count_ops(g->nodes[i].sub[s], h, nh, cap, total);
    }
}

int snug_model_op_counts(const snug_model *m, snug_op_count *out, int cap, int *n_nodes) {
    int nh = 0, total = 0;
    count_ops(m->graph, out, &nh, cap > 0 ? cap : 0, &total);
    if (n_nodes)
        *n_nodes = total;
    return nh;
}

void snug_model_layers(const snug_model *m, snug_layer_map *out) {
    const sn_layer_info *l = &m->layers;
    *out = (snug_layer_map){l->n_layers, l->n_named, l->n_valname, l->n_filled, l->n_pre, l->n_post, l->n_struct};
}

int snug_model_input_layer(const snug_model *m, int i) {
    const sn_graph *g = m->graph;
    if (i < 0 || i >= g->n_inputs)
        return -1;
    const sn_value *v = &g->values[g->inputs[i]];
    for (int c = 0; c < v->n_cons; c++) {
        int l = g->nodes[v->cons[c]].layer;
        if (l >= 0 && l < m->layers.n_layers)
            return l;
    }
    return -1;
}

/* ---- this build ------------------------------------------------------------- */

int snug_op_table_size(void) { return sn_op_count(); }

int snug_op_table_get(int i, snug_op_def *out) {
    if (i < 0 || i >= sn_op_count())
        return SNUG_ERR_RANGE;
    const sn_op_def *d = sn_op_at(i);
    *out = (snug_op_def){d->domain, d->name, d->since_version};
    return SNUG_OK;
}

const char *snug_gemm_kernel_name(void) { return sn_sgemm_kernel_name(); }

/* ---- option values ---------------------------------------------------------- */

int snug_parse_size(const char *text, uint64_t *bytes, char *err, size_t err_cap) {
    sn_err e = {0};
    int rc = sn_parse_size(text, bytes, &e);
    return rc == SNUG_OK ? rc : sn_api_fail(err, err_cap, &e, rc);
}

int snug_shapes_parse(const char *text, snug_shape **out, int *n, char *err, size_t err_cap) {
    *out = NULL;
    *n = 0;
    sn_err e = {0};
    sn_shape_override *ov = NULL;
    int n_ov = 0, rc = sn_shape_override_parse(text, &ov, &n_ov, &e);
    if (rc != SNUG_OK)
        return sn_api_fail(err, err_cap, &e, rc);
    snug_shape *s = sn_calloc((size_t)n_ov + 1, sizeof *s);
    if (!s) {
        sn_shape_override_free(ov, n_ov);
        return sn_api_fail(err, err_cap, &e, sn_errf(&e, SNUG_ERR_OOM, "out of memory"));
    }
    for (int k = 0; k < n_ov; k++) { /* the names move over */
        s[k] = (snug_shape){ov[k].name, ov[k].rank, {0}};
        memcpy(s[k].dims, ov[k].dims, sizeof s[k].dims);
        ov[k].name = NULL;
    }
    sn_shape_override_free(ov, n_ov);
    *out = s;
    *n = n_ov;
    return SNUG_OK;
}

void snug_shapes_free(snug_shape *s, int n) {
    for (int k = 0; s && k < n; k++)
        sn_free(s[k].name);
    sn_free(s);
}
