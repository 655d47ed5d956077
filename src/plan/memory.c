/* groups and memory: the last stages of a plan (plan/plan.h). */
#include <string.h>

#include "graph/graph.h"
#include "ops/op.h"
#include "plan/memplan.h"
#include "plan/plan.h"

static bool constant(const sn_plan *p, int v) {
    return v < 0 || p->values[v].storage == SN_STORE_CONST || p->values[v].storage == SN_STORE_FOLDED ||
           p->values[v].storage == SN_STORE_STREAMED;
}

/* Whether the nodes first+n .. first+n+t-1 may be the tail of the group
 * first..first+n-1: the plan's conditions (the kernel's group_tail vouched
 * for what they compute and who reads them). */
static bool tail_ok(const sn_plan *p, const sn_graph *g, int first, int n, int t) {
    const sn_plan_node *lead = &p->nodes[first];
    if (t < 1 || t > SN_TAIL_MAX || first + n + t > g->n_nodes)
        return false;
    for (int i = first + n; i < first + n + t; i++) {
        const sn_node *b = &g->nodes[i];
        const sn_plan_node *pb = &p->nodes[i];
        if (pb->mode != SN_MODE_STATIC || pb->device != lead->device || b->n_sub || pb->last_row)
            return false;
    }
    return true; /* right after the members, a tail node reads nothing made after the group's start outside it */
}

void sn_plan_groups(sn_plan *p, const sn_graph *g, const sn_kernel *const *kern, bool enabled) {
    p->n_grouped = 0;
    p->n_tails = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        p->nodes[i].group = i;
        p->nodes[i].group_size = 1;
        p->nodes[i].n_tail = 0;
    }
    for (int i = 0; i < g->n_nodes && enabled; i++) {
        const sn_node *a = &g->nodes[i];
        const sn_plan_node *pa = &p->nodes[i];
        if (pa->mode != SN_MODE_STATIC || !kern[i] || !kern[i]->run_group || !a->op->group_ok || a->n_in < 1 ||
            a->in[0] < 0 || a->n_sub || pa->last_row)
            continue;
        int j = i + 1;
        for (; j < g->n_nodes && j - i < SN_GROUP_MAX; j++) {
            const sn_node *b = &g->nodes[j];
            const sn_plan_node *pb = &p->nodes[j];
            bool ok = pb->mode == SN_MODE_STATIC && pb->device == pa->device && b->op == a->op && kern[j] &&
                      kern[j]->run_group == kern[i]->run_group && b->n_in >= 1 && b->in[0] == a->in[0] &&
                      !b->n_sub && !pb->last_row && a->op->group_ok(a, b);
            for (int k = 1; k < b->n_in && ok; k++)
                ok = constant(p, b->in[k]);
            if (!ok)
                break;
        }
        if (j - i < 2)
            continue;
        int t = kern[i]->group_tail ? kern[i]->group_tail(g, i, j - i) : 0;
        if (!tail_ok(p, g, i, j - i, t))
            t = 0;
        p->nodes[i].group_size = j - i;
        p->nodes[i].n_tail = t;
        for (int k = i + 1; k < j + t; k++) {
            p->nodes[k].group = i;
            p->nodes[k].group_size = 0;
        }
        p->n_grouped += j - i;
        p->n_tails += t;
        i = j + t - 1;
    }
}

/* The device whose buffer holds value v: its producer's (graph inputs and
 * outer values: the host). */
static int value_device(const sn_plan *p, const sn_graph *g, int v) {
    int prod = g->values[v].producer;
    return prod >= 0 ? p->nodes[prod].device : 0;
}

int sn_plan_memory(sn_plan *p, const sn_graph *g, sn_err *err) {
    int nv = g->n_values, nn = g->n_nodes, rc = SNUG_OK;
    int *last = sn_malloc(sizeof *last * ((size_t)nv + 1));
    int *share = sn_malloc(sizeof *share * ((size_t)nv + 1));
    size_t nblk = (size_t)nv + (size_t)nn + (size_t)p->n_copies + 1;
    sn_block *blocks = sn_malloc(sizeof *blocks * nblk);
    int *bval = sn_malloc(sizeof *bval * nblk);
    if (!last || !share || !blocks || !bval) {
        rc = sn_errf(err, SNUG_ERR_OOM, "out of memory");
        goto done;
    }
    /* Lifetimes: producer to last reader; a view keeps its source alive as
     * long as itself. */
    for (int v = 0; v < nv; v++) {
        const sn_value *val = &g->values[v];
        int l = val->producer;
        for (int c = 0; c < val->n_cons; c++)
            l = val->cons[c] > l ? val->cons[c] : l;
        if (val->flags & SN_VAL_OUTPUT)
            l = nn;
        last[v] = l;
        share[v] = v;
    }
    /* A tail's inner outputs (sn_kernel.group_tail): its group's kernel computes the tail in one pass and
     * writes only the last node's, and no one else reads them: no slot (SN_STORE_NONE; SmolLM2 int4, a
     * 512-token prefill with snug.last_logits: the arena 18.6 -> 12.6 MiB; 10.2 without tails, whose last
     * output cannot take its input's slot in place) */
    for (int i = 0; i < nn; i++)
        for (int t = i + p->nodes[i].group_size; p->nodes[i].n_tail && t < i + p->nodes[i].group_size +
                                                                       p->nodes[i].n_tail - 1; t++)
            for (int j = 0; j < g->nodes[t].n_out; j++) {
                int v = g->nodes[t].out[j];
                if (v >= 0 && p->values[v].storage == SN_STORE_ARENA)
                    p->values[v].storage = SN_STORE_NONE;
            }
    for (int v = 0; v < nv; v++) /* each view extends every value it may alias */
        for (int r = p->values[v].alias; r >= 0; r = p->values[r].alias)
            if (last[v] > last[r])
                last[r] = last[v];
    /* In place: an element-wise output takes over its input's block when
     * the input dies at that node (share[v] = the value whose block v uses). */
    p->n_inplace = 0;
    for (int i = 0; i < nn; i++) {
        const sn_node *n = &g->nodes[i];
        if (p->nodes[i].mode != SN_MODE_STATIC || !(n->op->flags & SN_OP_INPLACE0) || n->n_in < 1 || n->n_out < 1 ||
            p->nodes[i].group_size != 1) /* a group's input 0 is read by every member */
            continue;
        int a = n->in[0], o = n->out[0];
        if (a < 0 || o < 0 || p->values[a].storage != SN_STORE_ARENA || p->values[o].storage != SN_STORE_ARENA ||
            last[a] != i || (g->values[a].flags & SN_VAL_OUTPUT) || p->values[a].info.dtype != p->values[o].info.dtype ||
            p->values[a].size != p->values[o].size || value_device(p, g, a) != value_device(p, g, o))
            continue;
        int r = share[a];
        share[o] = r;
        if (last[o] > last[r])
            last[r] = last[o];
        p->n_inplace++;
    }
    /* One buffer per device that holds a slot, placed on its own: values,
     * workspaces, and the mirrors of values copied there for a run. */
    p->n_buffers = 0;
    for (int d = 0; d < p->n_devices && d < SN_MAX_DEVICES; d++) {
        int nb = 0;
        for (int v = 0; v < nv; v++) {
            if (p->values[v].storage != SN_STORE_ARENA || share[v] != v || value_device(p, g, v) != d)
                continue;
            int from = g->values[v].producer; /* a group member's outputs are written by its leader */
            if (from >= 0)
                from = p->nodes[from].group;
            blocks[nb] = (sn_block){p->values[v].size, from, last[v], 0};
            bval[nb++] = v;
        }
        for (int i = 0; i < nn; i++) {
            if (p->nodes[i].mode != SN_MODE_STATIC || !p->nodes[i].workspace || p->nodes[i].device != d)
                continue;
            blocks[nb] = (sn_block){p->nodes[i].workspace, p->nodes[i].group, i, 0};
            bval[nb++] = -1 - i;
        }
        for (int c = 0; c < p->n_copies; c++) {
            const sn_plan_xfer *cp = &p->copies[c];
            if (cp->to != d || cp->at < 0)
                continue;
            blocks[nb] = (sn_block){cp->size, cp->at, cp->last, 0};
            bval[nb++] = -1 - nn - c;
        }
        if (!nb && d > 0)
            continue;
        size_t total, lower;
        if ((rc = sn_memplan_place(blocks, nb, &total, &lower, err)) != SNUG_OK)
            goto done;
        int b = p->n_buffers++;
        p->buffers[b] = (sn_plan_buffer){.device = d, .size = total, .lower_bound = lower};
        for (int k = 0; k < nb; k++) {
            if (bval[k] >= 0) {
                sn_plan_value *pv = &p->values[bval[k]];
                pv->buffer = b;
                pv->offset = blocks[k].offset;
                pv->first = blocks[k].start;
                pv->last = blocks[k].end;
            } else if (bval[k] < -nn) {
                p->copies[-1 - nn - bval[k]].buffer = b;
                p->copies[-1 - nn - bval[k]].offset = blocks[k].offset;
            } else {
                sn_plan_node *pn = &p->nodes[-1 - bval[k]];
                pn->ws_buffer = b;
                pn->ws_offset = blocks[k].offset;
            }
        }
    }
    /* Each accelerator's copies of constants in one buffer, one after
     * another: uploaded once, read by every run. */
    for (int d = 1; d < p->n_devices && d < SN_MAX_DEVICES; d++) {
        size_t at = 0;
        int b = p->n_buffers;
        for (int c = 0; c < p->n_copies; c++) {
            sn_plan_xfer *cp = &p->copies[c];
            if (cp->to != d || cp->at >= 0)
                continue;
            cp->buffer = b;
            cp->offset = at;
            at += (cp->size + SN_ARENA_ALIGN - 1) / SN_ARENA_ALIGN * SN_ARENA_ALIGN;
        }
        if (at)
            p->buffers[p->n_buffers++] = (sn_plan_buffer){.device = d, .weights = true, .size = at, .lower_bound = at};
    }
    for (int v = 0; v < nv; v++) {
        sn_plan_value *pv = &p->values[v];
        if (pv->storage == SN_STORE_STREAMED) { /* its slot offset and readers (sn_plan_stream_values) */
            continue;
        } else if (pv->storage != SN_STORE_ARENA) {
            pv->buffer = -1;
            pv->offset = 0;
            pv->first = pv->last = -1;
        } else if (share[v] != v) { /* in place: its input's slot */
            const sn_plan_value *r = &p->values[share[v]];
            pv->buffer = r->buffer;
            pv->offset = r->offset;
            pv->first = r->first;
            pv->last = r->last;
        }
    }
    for (int i = 0; i < nn; i++)
        if (p->nodes[i].mode != SN_MODE_STATIC || !p->nodes[i].workspace) {
            p->nodes[i].ws_buffer = -1;
            p->nodes[i].ws_offset = 0;
        }
done:
    sn_free(last);
    sn_free(share);
    sn_free(blocks);
    sn_free(bval);
    return rc;
}
