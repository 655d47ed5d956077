/* transfers: where every value's bytes are, and the copies between devices
 * that the nodes reading them elsewhere need (plan/plan.h). */
#include <stdlib.h>

#include "graph/graph.h"
#include "ops/op.h"
#include "plan/plan.h"

bool sn_plan_value_constant(const sn_plan *p, int v) {
    while (v >= 0 && p->values[v].storage == SN_STORE_VIEW)
        v = p->values[v].alias;
    return v >= 0 && (p->values[v].storage == SN_STORE_CONST || p->values[v].storage == SN_STORE_FOLDED);
}

/* The device holding v's bytes. */
static int home(const sn_plan *p, const sn_graph *g, const int *state_dev, int v) {
    while (p->values[v].storage == SN_STORE_VIEW && p->values[v].alias >= 0)
        v = p->values[v].alias;
    if (state_dev && state_dev[v] >= 0)
        return state_dev[v];
    sn_storage s = p->values[v].storage;
    int prod = g->values[v].producer;
    return (s == SN_STORE_ARENA || s == SN_STORE_DYNAMIC) && prod >= 0 ? p->nodes[prod].device : 0;
}

static int by_step(const void *a, const void *b) {
    const sn_plan_xfer *x = a, *y = b;
    return x->at != y->at ? (x->at > y->at) - (x->at < y->at) : (x->value > y->value) - (x->value < y->value);
}

/* The copy of v to device `to`, made if there is none yet; NULL without memory. */
static sn_plan_xfer *copy_of(sn_plan *p, int *cap, int v, int from, int to) {
    for (int c = 0; c < p->n_copies; c++)
        if (p->copies[c].value == v && p->copies[c].to == to)
            return &p->copies[c];
    if (p->n_copies == *cap) {
        int nc = *cap ? 2 * *cap : 16;
        sn_plan_xfer *n = sn_realloc(p->copies, sizeof *n * (size_t)nc);
        if (!n)
            return NULL;
        p->copies = n;
        *cap = nc;
    }
    sn_plan_xfer *c = &p->copies[p->n_copies++];
    *c = (sn_plan_xfer){.value = v, .from = from, .to = to, .at = -2, .last = -1, .size = p->values[v].size,
                        .buffer = -1, .stream_layer = -1};
    return c;
}

int sn_plan_transfers(sn_plan *p, const sn_graph *g, const int *state_dev, const uint8_t *varies,
                      const uint8_t *stay, sn_err *err) {
    sn_free(p->copies);
    p->copies = NULL;
    p->n_copies = 0;
    p->copy_bytes = 0;
    int cap = 0;
    for (int v = 0; v < g->n_values; v++)
        p->values[v].device = home(p, g, state_dev, v);
    for (int i = 0; i < g->n_nodes; i++) {
        const sn_node *n = &g->nodes[i];
        const sn_plan_node *pn = &p->nodes[i];
        if (pn->mode == SN_MODE_FOLDED)
            continue;
        if (sn_plan_node_is_view(p, g, i) || (n->op->flags & SN_OP_SHAPE_ONLY))
            continue; /* a view moves nothing (its bytes are its source's), Shape reads none */
        for (int k = 0; k < n->n_in; k++) {
            int v = n->in[k], on = sn_plan_reads_on(p, i, k);
            if (v < 0 || p->values[v].device == on)
                continue;
            sn_plan_xfer *c = copy_of(p, &cap, v, p->values[v].device, on);
            if (!c)
                return sn_errf(err, SNUG_ERR_OOM, "out of memory");
            bool once = sn_plan_value_constant(p, v) && !(varies && varies[v]);
            int step = pn->group >= 0 ? pn->group : i;
            c->at = once ? -1 : c->at == -2 || step < c->at ? step : c->at;
            c->last = i > c->last ? i : c->last;
        }
    }
    for (int o = 0; o < g->n_outputs; o++) {
        int v = g->outputs[o];
        if (p->values[v].device == 0 || p->values[v].storage == SN_STORE_STATE || (stay && stay[v]))
            continue;
        sn_plan_xfer *c = copy_of(p, &cap, v, p->values[v].device, 0);
        if (!c)
            return sn_errf(err, SNUG_ERR_OOM, "out of memory");
        if (c->at == -2)
            c->at = g->n_nodes;
        c->last = g->n_nodes;
    }
    if (p->n_copies > 1)
        qsort(p->copies, (size_t)p->n_copies, sizeof *p->copies, by_step);
    for (int c = 0; c < p->n_copies; c++)
        if (p->copies[c].at >= 0)
            p->copy_bytes += p->copies[c].size;
    return SNUG_OK;
}
