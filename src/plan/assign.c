/* assign: which device runs each node (plan/plan.h). */
#include <stdio.h>
#include <string.h>

#include "backends/backend.h"
#include "graph/graph.h"
#include "ops/op.h"
#include "plan/plan.h"

static bool has_kernel(const sn_backend *b, const sn_node *n) {
    return b->ops->supports_op ? b->ops->supports_op(b->ctx, n) : sn_backend_kernel(b, n) != NULL;
}

/* Why node i cannot run on an accelerator, or NULL when it may. */
static const char *host_only(const sn_plan *p, const sn_graph *g, int i) {
    const sn_node *n = &g->nodes[i];
    if (p->nodes[i].mode != SN_MODE_STATIC)
        return "its shapes are known only at run time";
    if (n->n_sub)
        return "it runs a subgraph";
    for (int k = 0; k < n->n_in; k++) {
        int v = n->in[k];
        if (v < 0)
            continue;
        const sn_plan_value *pv = &p->values[v];
        if (pv->storage == SN_STORE_STREAMED)
            return "it reads a streamed weight";
        if (pv->info.kind != SN_KIND_TENSOR || (!pv->size && pv->storage != SN_STORE_CONST &&
                                                pv->storage != SN_STORE_FOLDED && sn_tensor_numel(&pv->info)))
            return "it reads a value whose size only the run knows";
    }
    for (int j = 0; j < n->n_out; j++)
        if (n->out[j] >= 0 && p->values[n->out[j]].info.kind != SN_KIND_TENSOR)
            return "an output is not a tensor";
    return NULL;
}

bool sn_plan_node_is_view(const sn_plan *p, const sn_graph *g, int i) {
    const sn_node *n = &g->nodes[i];
    if (!(n->op->flags & SN_OP_VIEW0) || n->n_out < 1 || n->out[0] < 0 || p->values[n->out[0]].storage != SN_STORE_VIEW)
        return false;
    for (int j = 1; j < n->n_out; j++)
        if (n->out[j] >= 0)
            return false;
    return true;
}

void sn_plan_to_host(sn_plan *p, int i, const char *why) {
    p->nodes[i].device = 0;
    p->nodes[i].host_in = 0;
    snprintf(p->nodes[i].note, sizeof p->nodes[i].note, "%s", why);
}

void sn_plan_layers_ngl(sn_plan_layer *rows, int n_layers, int n, int accel, const char *why_on, const char *why_off) {
    for (int r = 0; r < n_layers + 2; r++) {
        /* row r: 0 pre, 1..L the layers, L+1 post; layer l is on when l >= L - n, post when n > L */
        bool on = r > 0 && (r == n_layers + 1 ? n > n_layers : r - 1 >= n_layers - n);
        rows[r].device = on ? accel : 0;
        snprintf(rows[r].why, sizeof rows[r].why, "%s", r == 0 ? "the input layers stay on the host"
                                                    : on ? why_on : why_off);
    }
}

void sn_plan_wants(const sn_graph *g, const sn_plan_layer *rows, const int *rule_dev, int *want) {
    int L = 0;
    for (int i = 0; i < g->n_nodes; i++)
        L = g->nodes[i].layer > L ? g->nodes[i].layer : L;
    for (int i = 0; i < g->n_nodes; i++) {
        int r = g->nodes[i].layer + 1; /* -1 pre: row 0 */
        want[i] = rule_dev && rule_dev[i] >= 0 ? rule_dev[i] : rows && r >= 0 ? rows[r].device : -1;
    }
}

int sn_plan_assign(sn_plan *p, const sn_graph *g, const sn_backend *devs, int n_devs, const int *want,
                   sn_err *err) {
    if (n_devs < 1 || n_devs > SN_MAX_DEVICES)
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "assign: %d devices (1 to %d)", n_devs, SN_MAX_DEVICES);
    p->n_devices = n_devs;
    for (int d = 0; d < n_devs; d++)
        p->device_names[d] = devs[d].ops->name;
    p->devices = p->device_names;
    for (int i = 0; i < g->n_nodes; i++) {
        const sn_node *n = &g->nodes[i];
        sn_plan_node *pn = &p->nodes[i];
        pn->device = 0;
        pn->host_in = 0;
        pn->note[0] = 0;
        if (pn->mode == SN_MODE_FOLDED) /* computed on the host at plan time */
            continue;
        int w = want ? want[i] : -1;
        if (n_devs > 1 && w != 0 && !sn_plan_node_is_view(p, g, i)) {
            const char *why = host_only(p, g, i);
            int d = w > 0 ? w : 1;
            while (!why && d < n_devs && !has_kernel(&devs[d], n))
                d = w > 0 ? n_devs : d + 1;
            if (!why && d < n_devs) {
                const sn_kernel *k = devs[d].ops->kernel ? sn_backend_kernel(&devs[d], n) : NULL;
                pn->device = d;
                pn->host_in = k ? k->host_in : 0;
                continue;
            }
            if (!why)
                why = w > 0 ? "its device has no kernel for it" : "no accelerator of this session has a kernel for it";
            snprintf(pn->note, sizeof pn->note, "%s", why);
        }
        if (!has_kernel(&devs[0], n))
            return sn_errf(err, SNUG_ERR_UNSUPPORTED, "%s node '%s': no device of this session can run it%s%s",
                           n->p->op_type, n->p->name, pn->note[0] ? ": " : "", pn->note);
    }
    return SNUG_OK;
}
