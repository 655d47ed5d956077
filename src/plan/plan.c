#include "plan/plan.h"

#include <string.h>

#include "graph/graph.h"

const char *sn_storage_name(sn_storage s) {
    static const char *const names[SN_STORE_COUNT] = {
        [SN_STORE_NONE] = "none",   [SN_STORE_CONST] = "const", [SN_STORE_FOLDED] = "folded",
        [SN_STORE_INPUT] = "input", [SN_STORE_ARENA] = "arena", [SN_STORE_VIEW] = "view",
        [SN_STORE_DYNAMIC] = "dynamic", [SN_STORE_STATE] = "state",
        [SN_STORE_STREAMED] = "streamed",
    };
    return s >= 0 && s < SN_STORE_COUNT ? names[s] : "?";
}

const char *sn_node_mode_name(sn_node_mode m) {
    switch (m) {
    case SN_MODE_STATIC: return "static";
    case SN_MODE_DYNAMIC: return "dynamic";
    case SN_MODE_FOLDED: return "folded";
    }
    return "?";
}

int sn_plan_copy(const sn_plan *p, sn_plan **out, sn_err *err) {
    *out = NULL;
    sn_plan *c = sn_calloc(1, sizeof *c);
    if (!c)
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    *c = *p;
    c->values = sn_malloc(sizeof *c->values * ((size_t)p->n_values + 1));
    c->nodes = sn_malloc(sizeof *c->nodes * ((size_t)p->n_nodes + 1));
    c->buffers = sn_malloc(sizeof *c->buffers * ((size_t)p->n_buffers + 1));
    c->shapes = sn_malloc(sizeof *c->shapes * ((size_t)p->n_inputs + 1));
    c->copies = sn_malloc(sizeof *c->copies * ((size_t)p->n_copies + 1));
    c->layers = sn_malloc(sizeof *c->layers * ((size_t)p->n_layer_rows + 1));
    if (!c->values || !c->nodes || !c->buffers || !c->shapes || !c->copies || !c->layers) {
        sn_plan_free(c);
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    }
    memcpy(c->values, p->values, sizeof *c->values * (size_t)p->n_values);
    memcpy(c->nodes, p->nodes, sizeof *c->nodes * (size_t)p->n_nodes);
    memcpy(c->buffers, p->buffers, sizeof *c->buffers * (size_t)p->n_buffers);
    memcpy(c->shapes, p->shapes, sizeof *c->shapes * (size_t)p->n_inputs);
    if (p->n_copies)
        memcpy(c->copies, p->copies, sizeof *c->copies * (size_t)p->n_copies);
    if (p->n_layer_rows && p->layers)
        memcpy(c->layers, p->layers, sizeof *c->layers * (size_t)p->n_layer_rows);
    else
        c->n_layer_rows = 0;
    c->devices = c->device_names;
    *out = c;
    return SNUG_OK;
}

void sn_plan_free(sn_plan *p) {
    if (!p)
        return;
    sn_free(p->values);
    sn_free(p->nodes);
    sn_free(p->buffers);
    sn_free(p->shapes);
    sn_free(p->copies);
    sn_free(p->layers);
    sn_free(p);
}

static void json_shape(FILE *f, const sn_tensor *t) {
    fputc('[', f);
    for (int k = 0; t->kind == SN_KIND_TENSOR && k < t->rank; k++)
        fprintf(f, "%s%lld", k ? ", " : "", (long long)t->dims[k]);
    fputc(']', f);
}

void sn_plan_write_json(const sn_plan *p, const struct sn_graph *g, FILE *f) {
    fprintf(f, "{\"devices\": [");
    for (int d = 0; d < p->n_devices; d++) {
        fputs(d ? ", " : "", f);
        sn_json_write_str(f, p->devices[d]);
    }
    fprintf(f, "], \"at_bounds\": %s, \"threads\": %d, \"folded_bytes\": %zu, \"persistent_bytes\": %zu, "
               "\"state_bytes\": %zu, \"n_static\": %d, \"n_dynamic\": %d, \"n_folded\": %d, \"n_inplace\": %d, "
               "\"n_grouped\": %d, \"n_tails\": %d,\n \"inputs\": [",
            p->at_bounds ? "true" : "false", p->threads, p->folded_bytes, p->persistent_bytes, p->state_bytes,
            p->n_static, p->n_dynamic, p->n_folded, p->n_inplace, p->n_grouped, p->n_tails);
    for (int i = 0; i < p->n_inputs && i < g->n_inputs; i++) {
        fprintf(f, "%s{\"name\": ", i ? ", " : "");
        sn_json_write_str(f, g->values[g->inputs[i]].name);
        fprintf(f, ", \"shape\": ");
        json_shape(f, &p->shapes[i]);
        fputc('}', f);
    }
    fprintf(f, "],\n \"buffers\": [");
    for (int b = 0; b < p->n_buffers; b++)
        fprintf(f, "%s{\"device\": %d, \"kind\": \"%s\", \"size\": %zu, \"lower_bound\": %zu}", b ? ", " : "",
                p->buffers[b].device, p->buffers[b].weights ? "weights" : "arena", p->buffers[b].size,
                p->buffers[b].lower_bound);
    fprintf(f, "],\n \"layers\": [");
    for (int r = 0; r < p->n_layer_rows; r++) {
        fprintf(f, "%s{\"layer\": %d, \"device\": %d, \"why\": ", r ? ", " : "", r - 1, p->layers[r].device);
        sn_json_write_str(f, p->layers[r].why);
        fputc('}', f);
    }
    fprintf(f, "],\n \"copy_bytes\": %zu, \"copies\": [", p->copy_bytes);
    for (int c = 0; c < p->n_copies; c++) {
        const sn_plan_xfer *cp = &p->copies[c];
        fprintf(f, "%s\n  {\"value\": ", c ? "," : "");
        sn_json_write_str(f, g->values[cp->value].name);
        fprintf(f, ", \"from\": %d, \"to\": %d, \"at\": %d, \"last\": %d, \"size\": %zu, \"buffer\": %d, "
                   "\"offset\": %zu}", cp->from, cp->to, cp->at, cp->last, cp->size, cp->buffer, cp->offset);
    }
    fprintf(f, "],\n \"values\": [");
    for (int v = 0; v < p->n_values; v++) {
        const sn_plan_value *pv = &p->values[v];
        fprintf(f, "%s\n  {\"name\": ", v ? "," : "");
        sn_json_write_str(f, g->values[v].name);
        fprintf(f, ", \"storage\": \"%s\", \"size\": %zu", sn_storage_name(pv->storage), pv->size);
        if (pv->device)
            fprintf(f, ", \"device\": %d", pv->device);
        if (pv->info.kind == SN_KIND_TENSOR && sn_dtype_valid(pv->info.dtype)) {
            fprintf(f, ", \"dtype\": \"%s\", \"shape\": ", sn_dtype_name(pv->info.dtype));
            json_shape(f, &pv->info);
        }
        if (pv->storage == SN_STORE_ARENA)
            fprintf(f, ", \"buffer\": %d, \"offset\": %zu, \"first\": %d, \"last\": %d", pv->buffer, pv->offset,
                    pv->first, pv->last);
        if (pv->storage == SN_STORE_STREAMED) /* its place in its layer's staging slot, and its readers */
            fprintf(f, ", \"slot_offset\": %zu, \"first\": %d, \"last\": %d, \"layer\": %d", pv->offset, pv->first,
                    pv->last, g->nodes[pv->first].layer);
        if (pv->alias >= 0)
            fprintf(f, ", \"alias\": %d", pv->alias);
        if (pv->released)
            fprintf(f, ", \"released\": true");
        fputc('}', f);
    }
    fprintf(f, "],\n \"nodes\": [");
    for (int i = 0; i < p->n_nodes; i++) {
        const sn_plan_node *pn = &p->nodes[i];
        const sn_node *n = &g->nodes[i];
        fprintf(f, "%s\n  {\"name\": ", i ? "," : "");
        sn_json_write_str(f, n->p->name);
        fprintf(f, ", \"op\": ");
        sn_json_write_str(f, n->p->op_type);
        fprintf(f, ", \"layer\": %d, \"device\": %d, \"mode\": \"%s\", \"group\": %d, \"workspace\": %zu", pn->layer,
                pn->device, sn_node_mode_name(pn->mode), pn->group, pn->workspace);
        if (pn->ws_buffer >= 0)
            fprintf(f, ", \"ws_buffer\": %d, \"ws_offset\": %zu", pn->ws_buffer, pn->ws_offset);
        if (pn->has_reserve)
            fprintf(f, ", \"ws_reserved\": %zu", pn->ws_reserved);
        if (pn->group_size > 1)
            fprintf(f, ", \"group_size\": %d", pn->group_size);
        if (pn->n_tail)
            fprintf(f, ", \"tail\": %d", pn->n_tail);
        if (pn->state_bytes)
            fprintf(f, ", \"state_bytes\": %zu", pn->state_bytes);
        if (pn->last_row)
            fprintf(f, ", \"last_row\": true");
        if (pn->note[0]) {
            fprintf(f, ", \"host_because\": ");
            sn_json_write_str(f, pn->note);
        }
        fputc('}', f);
    }
    fprintf(f, "],\n \"stream\": {\"first_layer\": %d, \"n_layers\": %d, \"depth\": %d, \"slot_bytes\": %zu, "
               "\"staging_bytes\": %zu, \"streamed_bytes\": %zu, \"n_values\": %d, \"budget\": %llu, \"total\": %llu}}",
            p->stream.first_layer, p->stream.n_layers, p->stream.depth, p->stream.slot_bytes, p->stream.staging_bytes,
            p->stream.streamed_bytes, p->stream.n_values, (unsigned long long)p->stream.budget,
            (unsigned long long)p->stream.total);
}
