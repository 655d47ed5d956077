/* The public plan (include/snug.h, snug_plan_*): a session's plan as a value
 * (sn_plan, plan/plan.h, from sn_exec_plan_value) with the graph that names
 * its values and nodes; planning a session for given shapes, its counts and
 * node timing. */
#include <string.h>

#include "backends/backend.h"
#include "api/api.h"
#include "exec/session.h"

/* The public enums mirror the internal ones value for value. */
_Static_assert(SNUG_STORE_STATE == (int)SN_STORE_STATE && SNUG_STORE_ARENA == (int)SN_STORE_ARENA &&
                   SNUG_STORE_STREAMED == (int)SN_STORE_STREAMED,
               "snug_storage and sn_storage differ");
_Static_assert(SNUG_MODE_FOLDED == (int)SN_MODE_FOLDED && SNUG_MODE_DYNAMIC == (int)SN_MODE_DYNAMIC,
               "SNUG_MODE_* and sn_node_mode differ");
_Static_assert(SNUG_KIND_SEQUENCE == (int)SN_KIND_SEQUENCE && SNUG_KIND_NONE == (int)SN_KIND_NONE,
               "SNUG_KIND_* and sn_kind differ");
_Static_assert(SNUG_MAX_RANK == SN_MAX_RANK, "SNUG_MAX_RANK and SN_MAX_RANK differ");

void snug_session_get_stats(const snug_session *ps, snug_session_stats *out) {
    const sn_exec_stats *st = sn_exec_get_stats(((const sn_session *)ps)->exec);
    *out = (snug_session_stats){
        .arena_bytes = st->arena_bytes,
        .lower_bound = st->lower_bound,
        .folded_bytes = st->folded_bytes,
        .n_static = st->n_static,
        .n_dynamic = st->n_dynamic,
        .n_folded = st->n_folded,
        .n_inplace = st->n_inplace,
        .n_grouped = st->n_grouped,
        .n_plans = st->n_plans,
        .copied_init_bytes = st->copied_init_bytes,
        .persistent_bytes = st->persistent_bytes,
        .kernel_state_bytes = st->kernel_state_bytes,
        .released_bytes = st->released_bytes,
        .device_bytes = st->device_bytes,
        .copied_bytes = st->copied_bytes,
        .n_tails = st->n_tails,
    };
}

int snug_session_device_count(const snug_session *ps) { return sn_exec_device_count(((const sn_session *)ps)->exec); }

int snug_session_device_info(const snug_session *ps, int d, snug_device_info *out) {
    const sn_exec *ex = ((const sn_session *)ps)->exec;
    const sn_backend *b = sn_exec_backend(ex, d);
    memset(out, 0, sizeof *out);
    if (!b)
        return SNUG_ERR_RANGE;
    sn_mem_info mi = {0};
    sn_err e = {0};
    sn_backend_mem_info(b, &mi, &e);
    out->name = sn_backend_device_name(b);
    out->total = mi.total;
    out->free = mi.free;
    out->held = mi.held;
    out->peak = mi.peak;
    out->state_bytes = sn_exec_state_bytes_on(ex, d);
    const sn_plan *p = sn_exec_plan_ref(ex);
    for (int i = 0; p && i < p->n_nodes; i++)
        out->n_nodes += p->nodes[i].device == d && p->nodes[i].mode != SN_MODE_FOLDED;
    for (int r = 1; p && p->layers && r < p->n_layer_rows; r++)
        out->n_layers += p->layers[r].device == d;
    const sn_plan_stream *ds = sn_exec_dstream_plan(ex);
    if (d > 0 && ds->device == d && ds->first_layer < ds->n_layers) {
        out->streamed_layers = ds->n_layers - ds->first_layer;
        out->stream_ring = ds->staging_bytes;
        out->streamed_per_run = ds->streamed_bytes;
        out->streamed_total = sn_exec_dstream_bytes(ex);
    }
    return SNUG_OK;
}

void snug_session_stream_stats(const snug_session *ps, snug_stream_stats *out) {
    const sn_exec *ex = ((const sn_session *)ps)->exec;
    const sn_plan_stream *st = sn_exec_stream_plan(ex);
    sn_exec_stream_stats c;
    sn_exec_stream_counts(ex, &c);
    *out = (snug_stream_stats){
        .n_layers = ((const sn_session *)ps)->layers.n_layers,
        .first_streamed = st->n_layers ? st->first_layer : ((const sn_session *)ps)->layers.n_layers,
        .depth = st->depth,
        .budget = st->budget,
        .planned = st->total,
        .minimum = st->minimum,
        .staging_bytes = st->staging_bytes,
        .sweep_bytes = st->streamed_bytes,
        .bytes_read = c.bytes_read,
        .loads = c.loads,
        .read_s = c.read_s,
        .stall_s = c.stall_s,
    };
}

int snug_session_device_stream_probe(snug_session *ps, double *bytes_per_s) {
    sn_session *s = (sn_session *)ps;
    return sn_exec_dstream_probe(s->exec, bytes_per_s, &s->err);
}

int snug_session_stream_probe(snug_session *ps, double *bytes_per_s) {
    sn_session *s = (sn_session *)ps;
    return sn_exec_stream_probe(s->exec, bytes_per_s, &s->err);
}

void snug_session_time_nodes(snug_session *ps, double *acc) { sn_exec_time_nodes(((sn_session *)ps)->exec, acc); }

int snug_session_plan(snug_session *ps, const snug_tensor *shapes, int n_shapes) {
    sn_session *s = (sn_session *)ps;
    const sn_graph *g = s->graph;
    if (n_shapes != g->n_inputs)
        return sn_errf(&s->err, SNUG_ERR_INVALID_ARG, "the model takes %d inputs, %d shapes given", g->n_inputs,
                       n_shapes);
    for (int i = 0; i < n_shapes; i++) {
        const snug_tensor *t = &shapes[i];
        if (t->dtype < 0 || t->dtype >= SN_DTYPE_COUNT || t->rank < 0 || t->rank > SN_MAX_RANK)
            return sn_errf(&s->err, SNUG_ERR_INVALID_ARG, "input %d: bad dtype or rank", i);
        sn_tensor *in = &s->api_in[i];
        *in = g->values[g->inputs[i]].info; /* kind and the optional flag as declared */
        in->data = NULL;
        in->dtype = (sn_dtype)t->dtype;
        sn_tensor_set_shape(in, t->rank, t->dims);
    }
    return sn_exec_plan(s->exec, s->api_in, &s->err);
}

int snug_plan_new(snug_session *ps, snug_plan **out) {
    sn_session *s = (sn_session *)ps;
    *out = NULL;
    snug_plan *p = sn_calloc(1, sizeof *p);
    if (!p)
        return sn_errf(&s->err, SNUG_ERR_OOM, "out of memory");
    int rc = sn_exec_plan_value(s->exec, &p->plan, &s->err);
    if (rc != SNUG_OK) {
        sn_free(p);
        return rc;
    }
    p->model = &s->api_model;
    *out = p;
    return SNUG_OK;
}

void snug_plan_free(snug_plan *p) {
    if (!p)
        return;
    sn_plan_free(p->plan);
    sn_free(p);
}

void snug_plan_get_info(const snug_plan *p, snug_plan_info *out) {
    const sn_plan *pl = p->plan;
    *out = (snug_plan_info){
        .n_values = pl->n_values,
        .n_nodes = pl->n_nodes,
        .n_buffers = pl->n_buffers,
        .n_devices = pl->n_devices,
        .n_inputs = pl->n_inputs,
        .at_bounds = pl->at_bounds,
        .threads = pl->threads,
        .folded_bytes = pl->folded_bytes,
        .persistent_bytes = pl->persistent_bytes,
        .state_bytes = pl->state_bytes,
        .n_static = pl->n_static,
        .n_dynamic = pl->n_dynamic,
        .n_folded = pl->n_folded,
        .n_inplace = pl->n_inplace,
        .n_grouped = pl->n_grouped,
    };
}

const char *snug_storage_name(int storage) {
    return storage >= 0 && storage < SN_STORE_COUNT ? sn_storage_name((sn_storage)storage) : "?";
}

const char *snug_node_mode_name(int mode) {
    return mode >= SN_MODE_STATIC && mode <= SN_MODE_FOLDED ? sn_node_mode_name((sn_node_mode)mode) : "?";
}

int snug_plan_get_value(const snug_plan *p, int v, snug_plan_value *out) {
    if (v < 0 || v >= p->plan->n_values)
        return SNUG_ERR_RANGE;
    const sn_plan_value *pv = &p->plan->values[v];
    const sn_value *gv = &p->model->graph->values[v];
    *out = (snug_plan_value){
        .name = gv->name,
        .storage = pv->storage,
        .buffer = pv->buffer,
        .offset = pv->offset,
        .size = pv->size,
        .alias = pv->alias,
        .first = pv->first,
        .last = pv->last,
        .released = pv->released,
        .producer = gv->producer,
        .kind = pv->info.kind,
        .dtype = pv->info.dtype,
        .rank = pv->info.rank,
    };
    for (int k = 0; k < pv->info.rank && k < SN_MAX_RANK; k++)
        out->dims[k] = pv->info.dims[k];
    return SNUG_OK;
}

int snug_plan_find_value(const snug_plan *p, const char *name) { return sn_graph_find(p->model->graph, name); }

int snug_plan_get_node(const snug_plan *p, int i, snug_plan_node *out) {
    if (i < 0 || i >= p->plan->n_nodes)
        return SNUG_ERR_RANGE;
    const sn_plan_node *pn = &p->plan->nodes[i];
    const sn_pnode *n = p->model->graph->nodes[i].p;
    *out = (snug_plan_node){
        .name = n->name,
        .op = n->op_type,
        .domain = n->domain,
        .layer = pn->layer,
        .device = pn->device,
        .mode = pn->mode,
        .group = pn->group,
        .workspace = pn->workspace,
        .ws_buffer = pn->ws_buffer,
        .ws_offset = pn->ws_offset,
        .state_bytes = pn->state_bytes,
        .last_row = pn->last_row,
        .host_because = pn->note,
    };
    return SNUG_OK;
}

int snug_plan_get_buffer(const snug_plan *p, int b, snug_plan_buffer *out) {
    if (b < 0 || b >= p->plan->n_buffers) {
        memset(out, 0, sizeof *out);
        return SNUG_ERR_RANGE;
    }
    const sn_plan_buffer *pb = &p->plan->buffers[b];
    *out = (snug_plan_buffer){.device = pb->device, .size = pb->size, .lower_bound = pb->lower_bound,
                              .weights = pb->weights};
    return SNUG_OK;
}

int snug_plan_layer(const snug_plan *p, int layer, int *device, const char **why) {
    int r = layer + 1;
    if (!p->plan->layers || r < 0 || r >= p->plan->n_layer_rows)
        return SNUG_ERR_RANGE;
    *device = p->plan->layers[r].device;
    *why = p->plan->layers[r].why;
    return SNUG_OK;
}

int snug_session_rule_count(const snug_session *ps) { return ((const sn_session *)ps)->rules.n; }

int snug_session_rule(const snug_session *ps, int k, snug_rule_info *out) {
    const sn_session *s = (const sn_session *)ps;
    memset(out, 0, sizeof *out);
    if (k < 0 || k >= s->rules.n)
        return SNUG_ERR_RANGE;
    const sn_rule *r = &s->rules.r[k];
    *out = (snug_rule_info){r->device, r->pat, r->exact, r->entry, s->rule_dev[k], s->rule_nodes[k],
                            s->rule_first[k], s->rule_last[k], s->rules.by_name};
    return SNUG_OK;
}

const char *snug_plan_device(const snug_plan *p, int d) {
    return d >= 0 && d < p->plan->n_devices ? p->plan->devices[d] : NULL;
}

int snug_plan_input_shape(const snug_plan *p, int i, snug_tensor *out) {
    memset(out, 0, sizeof *out);
    if (i < 0 || i >= p->plan->n_inputs)
        return SNUG_ERR_RANGE;
    const sn_tensor *t = &p->plan->shapes[i];
    out->dtype = t->dtype;
    out->rank = t->rank;
    for (int k = 0; k < t->rank && k < SN_MAX_RANK; k++)
        out->dims[k] = t->dims[k];
    return SNUG_OK;
}

int snug_plan_write_json(const snug_plan *p, FILE *f) {
    sn_plan_write_json(p->plan, p->model->graph, f);
    return ferror(f) ? SNUG_ERR_IO : SNUG_OK;
}

void snug_json_write_str(FILE *f, const char *s) { sn_json_write_str(f, s); }
