/* A plan made and prepared (exec_impl.h): the stages of plan/plan.h in
 * order, kernels prepared, buffers from the devices' backends. */
#include <string.h>

#include "exec/exec_impl.h"
#include "plan/estimate.h"

void ex_plan_release(sn_exec *ex) {
    const sn_graph *g = ex->g;
    if (ex->pf) { /* the I/O thread stops before the plan it reads for goes */
        ex_prefetch_free(ex->pf);
        ex->pf = NULL;
    }
    ex_dstream_free(ex); /* nothing writes into the ring once its plan goes */
    for (int i = 0; i < g->n_nodes; i++) {
        if (ex->nstate[i] && ex->kern[i]->free_state)
            ex->kern[i]->free_state(ex->nstate[i]);
        ex->nstate[i] = NULL;
    }
    for (int i = 0; i < ex->n_folded; i++)
        sn_free(ex->folded[i]);
    ex->n_folded = 0;
    /* No value keeps a pointer into the blocks just freed (folded values,
     * views of them): a failed plan leaves infos a reader may still see. */
    for (int v = 0; ex->pl.values && v < g->n_values; v++) {
        sn_plan_value *pv = &ex->pl.values[v];
        if (pv->storage == SN_STORE_FOLDED || pv->storage == SN_STORE_VIEW) {
            ex->vals[v].data = NULL;
            pv->info.data = NULL;
        }
    }
    ex->planned = false;
    for (int v = 0; ex->pl.values && v < g->n_values; v++)
        ex->pl.values[v].released = false;
    /* no mirrors until the next plan's transfers (folding binds the values themselves) */
    for (int i = 0; ex->arg_copy && ex->pl.copies && i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            ex->arg_copy[ex->arg_base[i] + k] = -1;
    ex->pl.n_copies = 0;
    ex->uploaded = false;
    if (ex->nreplaces)
        memset(ex->nreplaces, 0, sizeof *ex->nreplaces * (size_t)g->n_nodes);
    for (int i = 0; ex->pl.nodes && i < g->n_nodes; i++)
        ex->pl.nodes[i].state_bytes = 0;
}

/* Prepare, the executor's side of a plan: every static node's kernel
 * prepared on its device (state, and the Level-2 workspace it declares),
 * each declaration then checked once against the Level-1 reservation of
 * the estimate stage (sn_plan_check_workspace). Constants every reader is
 * done with are released as it goes. */
static int prepare_kernels(sn_exec *ex, sn_err *err) {
    const sn_graph *g = ex->g;
    ex->stage = EX_PREPARE;
    for (int i = 0; i < g->n_nodes; i++) {
        const sn_node *n = &g->nodes[i];
        sn_plan_node *pn = &ex->pl.nodes[i];
        ex->prepared_upto = i;
        if (pn->mode != SN_MODE_STATIC)
            continue;
        const sn_kernel *k = ex->kern[i];
        if (k->prepare) {
            ex_bind_args(ex, n, ex->argin, ex->argout);
            sn_prep_ctx pc = {.node = n, .n_in = n->n_in, .n_out = n->n_out, .in = ex->argin,
                              .out = (const sn_tensor *const *)ex->argout, .err = err,
                              .n_threads = sn_pool_size(ex->pool), .release = ex_release_cb, .release_ctx = ex,
                              .long_lived = ex->planning_bounds, .dry = ex->dry};
            for (int k = 0; k < n->n_in && k < 32; k++)
                if (n->in[k] >= 0 && ex->pl.values[n->in[k]].storage == SN_STORE_STREAMED)
                    pc.streamed |= 1u << k;
            ex->prep_node = i;
            int rc = k->prepare(&pc);
            if (rc == SNUG_ERR_UNSUPPORTED && pn->device != 0) {
                /* the accelerator's kernel cannot take these dtypes or shapes: the host's can */
                const char *why = strstr(err->msg, "': "); /* past sn_kfail's "Op node 'name': " */
                sn_plan_to_host(&ex->pl, i, why ? why + 3 : err->msg);
                sn_log(ex->log, SNUG_LOG_DEBUG, "%s node '%s' on the host: %s", n->p->op_type, n->p->name, err->msg);
                *err = (sn_err){0};
                ex->kern[i] = k = sn_backend_kernel(&ex->backends[0], n);
                if (!k)
                    return sn_kfail(err, n, SNUG_ERR_UNSUPPORTED, "no host kernel for this op");
                if (!k->prepare)
                    goto prepared;
                pc.state = NULL, pc.workspace = 0, pc.state_bytes = 0, pc.replaces = 0;
                rc = k->prepare(&pc);
            }
            SN_TRY(rc);
            if (ex->dry) { /* the state it would build is counted, not kept */
                if (pc.state && k->free_state)
                    k->free_state(pc.state);
                pc.state = NULL;
                ex->dry_state += pc.state_bytes;
            }
            ex->nstate[i] = pc.state;
            pn->workspace = pc.workspace;
            pn->state_bytes = pc.state_bytes;
            ex->stats.kernel_state_bytes += pc.state_bytes;
            ex->nreplaces[i] = pc.replaces;
            if (pc.replaces & pc.streamed)
                return sn_kfail(err, n, SNUG_ERR_INTERNAL, "its kernel's state replaces a streamed weight");
        }
    prepared:
        ex_drop_unread_inputs(ex, n, i);
    }
    return sn_plan_check_workspace(&ex->pl, g, ex->strict_ws, ex->log, err);
}

/* n bytes of device buffer a zeroed: in place where the host sees them,
 * else through tensor_set in pieces. */
static int zero_buffer(const sn_backend *be, uint8_t *a, size_t n, sn_err *err) {
    sn_buffer_type bt;
    sn_backend_buffer_type(be, &bt);
    if (bt.host_visible) {
        memset(a, 0, n);
        return SNUG_OK;
    }
    static const uint8_t zeros[4096];
    for (size_t off = 0; off < n; off += sizeof zeros)
        SN_TRY(sn_backend_tensor_set(be, a, off, zeros, n - off < sizeof zeros ? n - off : sizeof zeros, err));
    return SNUG_OK;
}

/* A buffer of n bytes fits what device be has free (where it says). */
static int check_device_room(const sn_backend *be, size_t n, const char *what, sn_err *err) {
    sn_mem_info mi = {0};
    sn_err ignored = {0};
    if (sn_backend_mem_info(be, &mi, &ignored) != SNUG_OK || !mi.total || n <= mi.free)
        return SNUG_OK;
    return sn_errf(err, SNUG_ERR_OOM, "the plan's %s buffer on %s is %.1f MiB, more than the %.1f MiB it has free",
                   what, be->ops->name, (double)n / (1 << 20), (double)mi.free / (1 << 20));
}

/* The device of each state's buffer: an accelerator when every reader of
 * its input runs there and either writes it in place (a shared KV cache)
 * or its caller moves its bytes only through the executor
 * (states_anywhere), so that it never crosses to the host; else the host
 * (an accelerator reading it gets a copy each run). */
static void place_states(sn_exec *ex) {
    const sn_graph *g = ex->g;
    for (int k = 0; k < ex->n_states; k++) {
        const sn_exec_state *st = &ex->states[k];
        const sn_value *in = &g->values[st->in_v];
        int d = -1;
        for (int c = 0; c < in->n_cons; c++) {
            const sn_node *r = &g->nodes[in->cons[c]];
            if (ex->pl.nodes[r->index].mode == SN_MODE_FOLDED || (r->op->flags & SN_OP_SHAPE_ONLY))
                continue; /* reads its shape, not its bytes */
            for (int k = 0; k < r->n_in; k++) {
                if (r->in[k] != st->in_v)
                    continue;
                int nd = sn_plan_reads_on(&ex->pl, r->index, k);
                d = d < 0 || d == nd ? nd : 0;
            }
        }
        if (d < 0 || (st->out_v < 0 && !ex->states_anywhere))
            d = 0;
        ex->state_dev[st->in_v] = d;
        if (st->out_v >= 0)
            ex->state_dev[st->out_v] = d;
    }
}

/* The plan's copies between devices, and each reader's input bound to
 * the mirror on its device. */
static int plan_transfers(sn_exec *ex, sn_err *err) {
    const sn_graph *g = ex->g;
    place_states(ex);
    SN_TRY(sn_plan_transfers(&ex->pl, g, ex->state_dev, ex->vdep, ex->keep_out, err));
    sn_free(ex->mirror);
    if (!(ex->mirror = sn_calloc((size_t)ex->pl.n_copies + 1, sizeof *ex->mirror)))
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    for (int c = 0; c < ex->pl.n_copies; c++) {
        const sn_plan_xfer *cp = &ex->pl.copies[c];
        const sn_value *val = &g->values[cp->value];
        ex->mirror[c] = ex->pl.values[cp->value].info;
        ex->mirror[c].data = NULL;
        for (int r = 0; r < val->n_cons; r++) {
            int i = val->cons[r];
            if (ex->pl.nodes[i].mode == SN_MODE_FOLDED || sn_plan_node_is_view(&ex->pl, g, i) ||
                (g->nodes[i].op->flags & SN_OP_SHAPE_ONLY))
                continue;
            for (int k = 0; k < g->nodes[i].n_in; k++)
                if (g->nodes[i].in[k] == cp->value && sn_plan_reads_on(&ex->pl, i, k) == cp->to)
                    ex->arg_copy[ex->arg_base[i] + k] = c;
        }
    }
    return SNUG_OK;
}

/* State k's buffer moved to device d, its bytes with it. */
static int move_state(sn_exec *ex, sn_exec_state *st, int d, sn_err *err) {
    const sn_backend *from = &ex->backends[st->dev], *to = &ex->backends[d];
    const char *name = ex->g->values[st->in_v].name;
    void *data = to->ops->buffer_alloc(to->ctx, st->cap ? st->cap : 1, err);
    if (!data)
        return sn_err_prefix(err, "the %zu-byte state buffer of '%s' on %s", st->cap, name, to->ops->name);
    int rc = SNUG_OK;
    if (st->dev == 0)
        rc = sn_backend_tensor_set(to, data, 0, st->data, st->cap, err);
    else if (d == 0)
        rc = sn_backend_tensor_get(from, st->data, 0, data, st->cap, err);
    else
        rc = sn_errf(err, SNUG_ERR_UNSUPPORTED, "state '%s': no copy from %s to %s", name, from->ops->name,
                     to->ops->name);
    if (rc != SNUG_OK) {
        to->ops->buffer_free(to->ctx, data);
        return rc;
    }
    from->ops->buffer_free(from->ctx, st->data);
    st->data = data;
    st->dev = d;
    return SNUG_OK;
}

/* Each accelerator's copies of constants uploaded, the mirrors bound to
 * their slots, the states on the devices the plan put them. */
static int bind_transfers(sn_exec *ex, sn_err *err) {
    const sn_graph *g = ex->g;
    for (int k = 0; k < ex->n_states; k++) {
        sn_exec_state *st = &ex->states[k];
        if (ex->state_dev[st->in_v] != st->dev)
            SN_TRY(move_state(ex, st, ex->state_dev[st->in_v], err));
    }
    for (int c = 0; c < ex->pl.n_copies; c++) {
        const sn_plan_xfer *cp = &ex->pl.copies[c];
        ex->mirror[c].data = ex->buf[cp->buffer] + cp->offset;
        if (cp->at >= 0)
            continue;
        if (cp->stream_layer >= 0) { /* copied into a ring slot by each run (dstream.c), bound there */
            ex->mirror[c] = ex->vals[cp->value];
            ex->mirror[c].data = ex->buf[cp->buffer] + cp->offset;
            continue;
        }
        const sn_tensor *src = &ex->vals[cp->value];
        size_t n = sn_tensor_nbytes(src);
        if (n > cp->size || (n && !src->data))
            return sn_errf(err, SNUG_ERR_INTERNAL, "constant '%s': %zu bytes to upload to %s, %zu planned",
                           g->values[cp->value].name, n, ex->backends[cp->to].ops->name, cp->size);
        if (n) {
            int rc = sn_backend_tensor_set(&ex->backends[cp->to], ex->mirror[c].data, 0, src->data, n, err);
            if (rc != SNUG_OK)
                return sn_err_prefix(err, "uploading weight '%s' (%zu bytes)", g->values[cp->value].name, n);
        }
        ex->mirror[c] = *src;
        ex->mirror[c].data = ex->buf[cp->buffer] + cp->offset;
    }
    for (int c = 0; c < ex->pl.n_copies; c++) {
        bool streamed = false; /* the host's bytes are what each run copies from */
        for (int k = 0; k < ex->pl.n_copies; k++)
            streamed |= ex->pl.copies[k].value == ex->pl.copies[c].value && ex->pl.copies[k].stream_layer >= 0;
        if (ex->pl.copies[c].at < 0 && !streamed)
            ex_release_uploaded(ex, ex->pl.copies[c].value);
    }
    ex->uploaded = true;
    return SNUG_OK;
}

/* Each buffer of the plan from its device's backend (kept while large
 * enough), and every planned value and workspace bound into it. */
static int bind_buffers(sn_exec *ex, sn_err *err) {
    const sn_graph *g = ex->g;
    size_t host = 0; /* the host arena bytes before buffer b */
    for (int b = 0; b < ex->pl.n_buffers; b++) {
        const sn_plan_buffer *pb = &ex->pl.buffers[b];
        const sn_backend *be = &ex->backends[pb->device];
        size_t before = host;
        host += pb->device == 0 ? pb->size : 0;
        if (ex->buf[b] && ex->buf_dev[b] == pb->device && pb->size <= ex->buf_cap[b])
            continue;
        if (ex->planning_bounds && pb->device == 0) /* made resident below */
            SN_TRY(ex_check_resident(ex, pb->size, before, "the activation arena planned at the bounds", err));
        if (ex->buf[b] && ex->buf_dev[b] == pb->device && pb->device > 0) { /* its room counts as free */
            ex->backends[pb->device].ops->buffer_free(ex->backends[pb->device].ctx, ex->buf[b]);
            ex->buf[b] = NULL;
        }
        if (pb->device > 0)
            SN_TRY(check_device_room(be, pb->size, pb->weights ? "weights" : "activation arena", err));
        /* an empty arena is a buffer too: every planned value points into one */
        uint8_t *a = be->ops->buffer_alloc(be->ctx, pb->size ? pb->size : 64, err);
        if (!a)
            return pb->device ? sn_err_prefix(err, "the plan's %zu-byte %s buffer", pb->size,
                                              pb->weights ? "weights" : "activation arena")
                              : sn_errf(err, SNUG_ERR_OOM, "cannot allocate the %zu-byte activation arena on %s",
                                        pb->size, be->ops->name);
        if (ex->buf[b])
            ex->backends[ex->buf_dev[b]].ops->buffer_free(ex->backends[ex->buf_dev[b]].ctx, ex->buf[b]);
        ex->buf[b] = a;
        ex->buf_cap[b] = pb->size;
        ex->buf_dev[b] = pb->device;
        /* A plan at input bounds serves many runs: its arena is made
         * resident now (every workspace slot included), so a run never
         * faults in fresh pages and the memory the plan reports is held. */
        if (ex->planning_bounds && !pb->weights)
            SN_TRY(zero_buffer(be, a, pb->size, err));
    }
    for (int v = 0; v < g->n_values; v++) {
        const sn_plan_value *pv = &ex->pl.values[v];
        if (pv->storage == SN_STORE_NONE && g->values[v].producer >= 0 &&
            ex->pl.nodes[g->values[v].producer].group_size == 0) { /* a tail's inner output: never written */
            ex->vals[v].data = NULL;
            ex->vcap[v] = pv->size;
        }
        if (pv->storage != SN_STORE_ARENA)
            continue;
        ex->vals[v].data = ex->buf[pv->buffer] + pv->offset;
        ex->vcap[v] = pv->size;
    }
    return bind_transfers(ex, err);
}

/* A plan for the shapes now in ex->vals (graph inputs and outer values):
 * the stages in order, then prepared and bound. An estimate (ex->dry)
 * stops before any buffer is allocated. */
int ex_plan_for(sn_exec *ex, sn_err *err) {
    const sn_graph *g = ex->g;
    ex_plan_release(ex);
    int k = 0; /* the shapes planned for */
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].flags & (SN_VAL_INPUT | SN_VAL_OUTER))
            ex->sig[k++] = ex->vals[v];
    ex->n_sig = k;
    for (int v = 0; v < g->n_values && !ex->dry; v++) { /* an estimate reads no weight */
        if (ex->copy_released[v]) { /* partly handed back by a plan that failed after packing it */
            ex_copy_free(ex, v);
            ex->copy_dropped[v] = 1;
        }
        if (ex->streamed[v] && ex->init_copy[v]) { /* it streams now: its slot is its only copy */
            ex_copy_free(ex, v);
            ex->copy_dropped[v] = 1;
        }
        if (ex->copy_dropped[v] && !ex->streamed[v]) /* copies a previous plan's kernels no longer needed */
            SN_TRY(ex_copy_init(ex, v, err));
    }
    int n_plans = ex->stats.n_plans; /* plans made: this one counts once it stands */
    size_t copied = ex->stats.copied_init_bytes, persistent = ex->stats.persistent_bytes;
    memset(&ex->stats, 0, sizeof ex->stats);
    ex->stats.n_plans = n_plans;
    ex->stats.copied_init_bytes = copied;
    ex->stats.persistent_bytes = persistent;
    ex->pl.threads = sn_pool_size(ex->pool);
    ex->prepared_upto = -1;
    /* Graph-input data is hidden while planning: a plan depends on shapes
     * only (a kernel's prepare must not take an input for a constant). */
    void **saved = sn_calloc((size_t)g->n_values + 1, sizeof *saved);
    if (!saved)
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    for (int v = 0; v < g->n_values; v++)
        if ((g->values[v].flags & (SN_VAL_INPUT | SN_VAL_OUTER)) && !(g->values[v].flags & SN_VAL_INIT)) {
            saved[v] = ex->vals[v].data;
            ex->vals[v].data = NULL;
        }
    int rc = ex_infer_fold(ex, err);
    if (rc == SNUG_OK)
        rc = ex_place_prepare(ex, err);
    if (rc == SNUG_OK)
        rc = sn_plan_assign(&ex->pl, g, ex->backends, ex->n_backends, ex->n_backends > 1 ? ex->want : NULL, err);
    if (rc == SNUG_OK && ex->n_backends > 1) {
        sn_free(ex->pl.layers);
        ex->pl.n_layer_rows = 0;
        if (!(ex->pl.layers = sn_malloc(sizeof *ex->pl.layers * ((size_t)ex->n_layers + 2))))
            rc = sn_errf(err, SNUG_ERR_OOM, "out of memory");
        else {
            memcpy(ex->pl.layers, ex->rows, sizeof *ex->pl.layers * ((size_t)ex->n_layers + 2));
            ex->pl.n_layer_rows = ex->n_layers + 2;
        }
    }
    if (rc == SNUG_OK)
        rc = ex_stream_mark(ex, err);
    for (int i = 0; i < g->n_nodes && rc == SNUG_OK; i++) {
        const sn_node *n = &g->nodes[i];
        if (!(ex->kern[i] = sn_backend_kernel(&ex->backends[ex->pl.nodes[i].device], n)))
            rc = sn_kfail(err, n, SNUG_ERR_UNSUPPORTED, "no %s kernel for this op",
                          ex->backends[ex->pl.nodes[i].device].ops->name);
    }
    if (rc == SNUG_OK)
        sn_plan_groups(&ex->pl, g, ex->kern, !ex->no_groups);
    if (rc == SNUG_OK)
        rc = sn_plan_reserve(&ex->pl, g, err);
    if (rc == SNUG_OK)
        rc = prepare_kernels(ex, err);
    for (int v = 0; v < g->n_values; v++)
        if ((g->values[v].flags & (SN_VAL_INPUT | SN_VAL_OUTER)) && !(g->values[v].flags & SN_VAL_INIT))
            ex->vals[v].data = saved[v];
    sn_free(saved);
    if (rc == SNUG_OK)
        ex_sweep_released(ex);
    if (rc == SNUG_OK)
        rc = plan_transfers(ex, err);
    if (rc == SNUG_OK)
        rc = sn_plan_memory(&ex->pl, g, err);
    if (rc == SNUG_OK)
        rc = ex_dstream_plan(ex, err);
    if (rc == SNUG_OK && !ex->dry)
        rc = bind_buffers(ex, err);
    if (rc == SNUG_OK)
        rc = ex_stream_start(ex, err);
    if (rc == SNUG_OK)
        rc = ex_dstream_start(ex, err);
    if (rc != SNUG_OK) {
        ex_plan_release(ex);
        return rc;
    }
    ex->stats.arena_bytes = 0;
    ex->stats.lower_bound = 0;
    ex->stats.device_bytes = 0;
    for (int b = 0; b < ex->pl.n_buffers; b++) {
        if (ex->pl.buffers[b].device) {
            ex->stats.device_bytes += ex->pl.buffers[b].size;
            continue;
        }
        ex->stats.arena_bytes += ex->pl.buffers[b].size;
        ex->stats.lower_bound += ex->pl.buffers[b].lower_bound;
    }
    for (int k = 0; k < ex->n_states; k++)
        if (ex->state_dev[ex->states[k].in_v] > 0)
            ex->stats.device_bytes += ex->states[k].cap;
    if (!ex->dry && ex->dev_budget && ex->stats.device_bytes > ex->dev_budget) {
        int over = sn_errf(err, SNUG_ERR_OOM, "the plan holds %.1f MiB on %s, over its budget of %.1f MiB: fewer "
                           "layers there (-ngl), or a shorter context", (double)ex->stats.device_bytes / (1 << 20),
                           sn_backend_device_name(&ex->backends[1]), (double)ex->dev_budget / (1 << 20));
        ex_plan_release(ex);
        return over;
    }
    ex->stats.n_inplace = ex->pl.n_inplace;
    ex->stats.n_grouped = ex->pl.n_grouped;
    ex->stats.n_tails = ex->pl.n_tails;
    ex->pl.n_static = ex->stats.n_static;
    ex->pl.n_dynamic = ex->stats.n_dynamic;
    ex->pl.n_folded = ex->stats.n_folded;
    ex->pl.folded_bytes = ex->stats.folded_bytes;
    ex->pl.state_bytes = ex->stats.kernel_state_bytes;
    ex->pl.persistent_bytes = ex->stats.persistent_bytes;
    ex->planned = !ex->dry;
    ex->stats.n_plans += ex->planned;
    return SNUG_OK;
}

sn_tensor *ex_shapes_only(const sn_graph *g, const sn_tensor *bounds) {
    sn_tensor *in = sn_calloc((size_t)g->n_inputs + 1, sizeof *in);
    for (int i = 0; in && i < g->n_inputs; i++) {
        in[i] = bounds[i];
        in[i].data = NULL;
    }
    return in;
}

int sn_exec_estimate_bounds(sn_exec *ex, const sn_tensor *bounds, sn_exec_estimate *e, uint8_t *gone,
                            sn_err *err) {
    const sn_graph *g = ex->g;
    memset(e, 0, sizeof *e);
    sn_exec_stats saved = ex->stats;
    sn_tensor *in = ex_shapes_only(g, bounds);
    if (!in)
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    bool was_bounds = ex->planning_bounds; /* sn_exec_set_bounds fits placements with estimates */
    ex->dry = true;
    ex->dry_state = 0;
    ex->planning_bounds = true;
    int rc = sn_exec_plan(ex, in, err);
    ex->planning_bounds = was_bounds;
    ex->dry = false;
    if (rc == SNUG_OK) {
        e->arena = ex->stats.arena_bytes;
        e->lower_bound = ex->stats.lower_bound;
        e->folded = ex->stats.folded_bytes;
        e->state = ex->dry_state;
        e->device = ex->stats.device_bytes;
        e->n_static = ex->stats.n_static;
        e->n_dynamic = ex->stats.n_dynamic;
        if (gone)
            for (int v = 0; v < g->n_values; v++)
                gone[v] = ex->pl.values[v].released;
    }
    ex_plan_release(ex); /* nothing prepared; the folded blocks go */
    ex->stats = saved;
    sn_free(in);
    if (ex->weights_load) /* what folding read through the map */
        sn_model_release_all(g->model);
    return rc;
}

int sn_exec_set_bounds(sn_exec *ex, const sn_tensor *bounds, sn_err *err) {
    const sn_graph *g = ex->g;
    for (int i = 0; i < g->n_inputs; i++) {
        ex->bounds[i] = bounds[i];
        ex->bounds[i].data = NULL;
    }
    ex->bounded = false;
    ex->planning_bounds = true;
    int rc = ex_place_decide(ex, ex->bounds, err);
    if (rc == SNUG_OK)
        rc = ex_stream_decide(ex, ex->bounds, err);
    if (rc == SNUG_OK)
        rc = sn_exec_plan(ex, ex->bounds, err);
    ex->planning_bounds = false;
    SN_TRY(rc);
    ex->bounded = true;
    return SNUG_OK;
}

int sn_exec_plan(sn_exec *ex, const sn_tensor *inputs, sn_err *err) {
    const sn_graph *g = ex->g;
    for (int i = 0; i < g->n_inputs; i++) {
        ex->vals[g->inputs[i]] = inputs[i];
        ex->vals[g->inputs[i]].data = NULL;
    }
    sn_fpmode saved = ex_fp_enter(ex); /* folding runs kernels */
    int rc = ex_plan_for(ex, err);
    sn_fp_set(saved);
    return rc;
}
