/* assign: which device runs each node (plan/plan.h). */
#include "backends/backend.h"
#include "graph/graph.h"
#include "plan/plan.h"

int sn_plan_assign(sn_plan *p, const sn_graph *g, const sn_backend *devs, int n_devs, sn_err *err) {
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
        if (pn->mode == SN_MODE_FOLDED) /* computed on the host at plan time */
            continue;
        int d = 0;
        while (d < n_devs && !(devs[d].ops->supports_op ? devs[d].ops->supports_op(devs[d].ctx, n)
                                                         : sn_backend_kernel(&devs[d], n) != NULL))
            d++;
        if (d == n_devs)
            return sn_errf(err, SNUG_ERR_UNSUPPORTED, "%s node '%s': no device of this session can run it",
                           n->p->op_type, n->p->name);
        pn->device = d;
    }
    return SNUG_OK;
}
