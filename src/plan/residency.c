/* residency: which weights stay resident and which stream (plan/plan.h,
 * docs/streaming.md). Pure functions of the plan and the graph: the
 * executor measures, this decides. */
#include <string.h>

#include "graph/graph.h"
#include "plan/memplan.h"
#include "plan/plan.h"

bool sn_plan_streamable(const sn_plan *p, const sn_graph *g, int v, int n_layers, int *layer) {
    const sn_value *val = &g->values[v];
    const sn_plan_value *pv = &p->values[v];
    *layer = -1;
    if (!(val->flags & SN_VAL_INIT) || (val->flags & SN_VAL_OUTPUT) || !val->init ||
        (pv->storage != SN_STORE_CONST && pv->storage != SN_STORE_STREAMED) || val->n_cons < 1 ||
        sn_tensor_nbytes(&val->init->t) < SN_STREAM_MIN || sn_value_gathered_only(g, v))
        return false;
    int l = g->nodes[val->cons[0]].layer;
    if (l < 0 || l >= n_layers)
        return false;
    for (int c = 0; c < val->n_cons; c++) {
        const sn_plan_node *pn = &p->nodes[val->cons[c]];
        if (g->nodes[val->cons[c]].layer != l || pn->mode == SN_MODE_FOLDED || g->nodes[val->cons[c]].n_sub)
            return false;
    }
    *layer = l;
    return true;
}

/* The ring's slot for the layers first..n-1: the largest of them. */
static uint64_t largest_from(const uint64_t *layer_bytes, int first, int n) {
    uint64_t m = 0;
    for (int l = first; l < n; l++)
        m = layer_bytes[l] > m ? layer_bytes[l] : m;
    return m;
}

int sn_plan_residency(const uint64_t *layer_bytes, int n_layers, uint64_t act, uint64_t kv, uint64_t other,
                      uint64_t budget, int depth, sn_plan_stream *st, sn_err *err) {
    memset(st, 0, sizeof *st);
    uint64_t fixed = act + kv + other;
    st->device = 0;
    st->fixed_act = act;
    st->fixed_kv = kv;
    st->n_layers = n_layers;
    st->first_layer = n_layers;
    st->depth = depth < 2 ? 2 : depth;
    st->budget = budget;
    st->fixed = fixed;
    uint64_t all = 0;
    for (int l = 0; l < n_layers; l++)
        all += layer_bytes[l];
    st->minimum = fixed + (uint64_t)st->depth * largest_from(layer_bytes, 0, n_layers);
    if (!budget || fixed + all <= budget) { /* everything resident */
        st->resident_weights = all;
        st->total = fixed + all;
        return SNUG_OK;
    }
    /* the most resident layers, earliest first, with a ring for the rest */
    uint64_t resident = all;
    for (int first = n_layers - 1; first >= 0; first--) {
        resident -= layer_bytes[first];
        uint64_t slot = largest_from(layer_bytes, first, n_layers);
        uint64_t total = fixed + resident + (uint64_t)st->depth * slot;
        if (total <= budget) {
            st->first_layer = first;
            st->resident_weights = resident;
            st->slot_bytes = (size_t)slot;
            st->staging_bytes = (size_t)((uint64_t)st->depth * slot);
            st->streamed_bytes = (size_t)(all - resident);
            st->total = total;
            return SNUG_OK;
        }
    }
    return sn_errf(err, SNUG_ERR_OOM,
                   "a budget of %llu bytes is too small: with every one of the %d layers streamed through "
                   "%d staging slots, the plan needs at least %llu bytes (activations %llu, KV cache %llu, weights "
                   "that cannot stream and packed or folded constants %llu, slots %llu; a shorter context or prefill "
                   "chunk shrinks the first two)",
                   (unsigned long long)budget, n_layers, st->depth, (unsigned long long)st->minimum,
                   (unsigned long long)act, (unsigned long long)kv, (unsigned long long)other,
                   (unsigned long long)(st->minimum - fixed));
}

int sn_plan_stream_values(sn_plan *p, const sn_graph *g, const uint8_t *candidate, sn_err *err) {
    sn_plan_stream *st = &p->stream;
    size_t *used = sn_calloc((size_t)st->n_layers + 1, sizeof *used);
    if (!used)
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    st->n_values = 0;
    size_t slot = 0;
    for (int v = 0; v < g->n_values; v++) {
        int l;
        if (!candidate[v] || !sn_plan_streamable(p, g, v, st->n_layers, &l) || l < st->first_layer)
            continue;
        sn_plan_value *pv = &p->values[v];
        const sn_value *val = &g->values[v];
        pv->storage = SN_STORE_STREAMED;
        pv->buffer = -1;
        pv->offset = used[l];
        pv->size = sn_tensor_nbytes(&val->init->t);
        pv->first = pv->last = val->cons[0];
        for (int c = 1; c < val->n_cons; c++) {
            pv->first = val->cons[c] < pv->first ? val->cons[c] : pv->first;
            pv->last = val->cons[c] > pv->last ? val->cons[c] : pv->last;
        }
        used[l] += sn_stream_align(pv->size);
        slot = used[l] > slot ? used[l] : slot;
        st->n_values++;
    }
    st->slot_bytes = slot;
    st->staging_bytes = (size_t)st->depth * slot;
    sn_free(used);
    return SNUG_OK;
}

/* Whether copy c (a constant uploaded once) may stream through device d's
 * ring: a weight of at least SN_STREAM_MIN bytes whose readers there all
 * sit in one repeating layer; its layer in *layer. */
static bool copy_streamable(const sn_plan *p, const sn_graph *g, const sn_plan_xfer *cp, int n_layers, int *layer) {
    const sn_value *val = &g->values[cp->value];
    *layer = -1;
    if (cp->at >= 0 || !(val->flags & SN_VAL_INIT) || !val->init || cp->size < SN_STREAM_MIN ||
        p->values[cp->value].storage != SN_STORE_CONST)
        return false;
    int l = -2;
    for (int c = 0; c < val->n_cons; c++) {
        int i = val->cons[c];
        if (p->nodes[i].device != cp->to || p->nodes[i].mode == SN_MODE_FOLDED)
            continue;
        int li = g->nodes[i].layer;
        if (li < 0 || li >= n_layers || (l != -2 && li != l))
            return false;
        l = li;
    }
    *layer = l >= 0 ? l : -1;
    return l >= 0;
}

int sn_plan_device_stream(sn_plan *p, const sn_graph *g, int d, int n_layers, uint64_t budget, uint64_t kv, int depth,
                          const char *dev_name, sn_err *err) {
    sn_plan_stream *st = &p->dstream;
    uint64_t *lb = sn_calloc((size_t)n_layers + 1, sizeof *lb);
    size_t *used = sn_calloc((size_t)n_layers + 1, sizeof *used);
    int rc = SNUG_OK;
    if (!lb || !used) {
        rc = sn_errf(err, SNUG_ERR_OOM, "out of memory");
        goto done;
    }
    uint64_t act = 0, weights = 0, streamable = 0;
    int wb = -1;
    for (int b = 0; b < p->n_buffers; b++)
        if (p->buffers[b].device == d) {
            if (p->buffers[b].weights)
                weights += p->buffers[b].size, wb = b;
            else
                act += p->buffers[b].size;
        }
    for (int c = 0; c < p->n_copies; c++) {
        int l;
        if (p->copies[c].to == d && copy_streamable(p, g, &p->copies[c], n_layers, &l)) {
            uint64_t a = sn_stream_align(p->copies[c].size);
            lb[l] += a;
            streamable += a;
        }
    }
    /* what the weights buffer holds beyond the streamable copies, aligned as laid out */
    uint64_t other = weights > streamable ? weights - streamable : 0;
    if ((rc = sn_plan_residency(lb, n_layers, act, kv, other, budget, depth, st, err)) != SNUG_OK) {
        sn_err_prefix(err, "streaming weights to %s", dev_name);
        goto done;
    }
    st->device = d;
    if (st->first_layer >= n_layers)
        goto done; /* everything fits resident */
    /* the ring, and each streamed copy at its place in its layer's slot */
    size_t slot = 0, at = 0;
    int ring = p->n_buffers;
    st->n_values = 0;
    for (int c = 0; c < p->n_copies; c++) {
        sn_plan_xfer *cp = &p->copies[c];
        int l;
        if (cp->to != d || cp->at >= 0)
            continue;
        if (copy_streamable(p, g, cp, n_layers, &l) && l >= st->first_layer) {
            cp->stream_layer = l;
            cp->buffer = ring;
            cp->offset = used[l];
            used[l] += sn_stream_align(cp->size);
            slot = used[l] > slot ? used[l] : slot;
            st->n_values++;
        } else { /* resident: the weights buffer packed again without the streamed ones */
            cp->offset = at;
            at += (cp->size + SN_ARENA_ALIGN - 1) / SN_ARENA_ALIGN * SN_ARENA_ALIGN;
        }
    }
    if (wb >= 0)
        p->buffers[wb].size = p->buffers[wb].lower_bound = at;
    st->slot_bytes = slot;
    st->staging_bytes = (size_t)st->depth * slot;
    p->buffers[p->n_buffers++] = (sn_plan_buffer){.device = d, .ring = true, .size = st->staging_bytes,
                                                  .lower_bound = st->staging_bytes};
done:
    sn_free(lb);
    sn_free(used);
    return rc;
}

int sn_plan_stream_schedule(int n_nodes, int n, const int *first, const int *last, int *wait, int *release) {
    for (int i = 0; i < n_nodes; i++)
        wait[i] = release[i] = -1;
    for (int o = 0; o < n; o++)
        if (first[o] < n_nodes && o > wait[first[o]])
            wait[first[o]] = o;
    /* after node i, layers [0, r) done: every one of them last read at or before i */
    int r = 0, need = 2;
    for (int i = 0; i < n_nodes; i++) {
        int w = wait[i];
        if (w >= 0 && w - r + 1 > need) /* loads up to w need the slots of [0, w - depth] back */
            need = w - r + 1;
        int r0 = r;
        while (r < n && last[r] <= i)
            r++;
        if (r > r0)
            release[i] = r;
    }
    return need;
}
