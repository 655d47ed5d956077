/* Running a plan (exec_impl.h): one loop, the inputs' check against the
 * plan, and the host services kernels call back. */
#include <string.h>
#include <time.h>

#include "exec/exec_impl.h"

bool ex_sig_equal(const sn_tensor *a, const sn_tensor *b) {
    if (a->kind != b->kind || a->dtype != b->dtype || a->optional != b->optional)
        return false;
    if (a->kind == SN_KIND_SEQUENCE)
        return a->n_items == b->n_items;
    return sn_shape_equal(a, b);
}

/* Node i's workspace slot, or NULL. */
static void *ws_of(const sn_exec *ex, int i) {
    const sn_plan_node *pn = &ex->pl.nodes[i];
    return pn->workspace && pn->ws_buffer >= 0 ? ex->buf[pn->ws_buffer] + pn->ws_offset : NULL;
}


/* Node n's context: in and out bound to its values, its state and workspace. */
static const sn_host k_host;

static sn_kctx kctx_of(sn_exec *ex, const sn_node *n, const sn_tensor **in, sn_tensor **out, void *state,
                       void *ws, sn_err *err) {
    ex_bind_args(ex, n, in, out);
    return (sn_kctx){.node = n, .n_in = n->n_in, .n_out = n->n_out, .in = in, .out = out, .state = state,
                     .ws = ws, .pool = ex->pool, .host = &k_host, .host_ctx = ex, .err = err,
                     .packed = ex->packed};
}

int ex_call_kernel(sn_exec *ex, const sn_node *n, void *state, void *ws, sn_err *err) {
    sn_kctx kc = kctx_of(ex, n, ex->argin, ex->argout, state, ws, err);
    ex->cur_node = n->index;
    return ex->kern[n->index]->run(&kc);
}

static int reinfer_node(sn_exec *ex, const sn_node *n, sn_err *err);

/* The group node i leads (group_size members from i on, then n_tail tail
 * nodes), each with its own arguments, state and workspace; reinfer: a
 * bounded plan's run (every member's and tail node's outputs inferred
 * again first). */
static int run_group(sn_exec *ex, int i, bool reinfer, sn_err *err) {
    const sn_graph *g = ex->g;
    int n = ex->pl.nodes[i].group_size, t = ex->pl.nodes[i].n_tail;
    sn_kctx kc[SN_GROUP_MAX + SN_TAIL_MAX], *cs[SN_GROUP_MAX + SN_TAIL_MAX];
    for (int m = 0; m < n + t; m++) {
        const sn_node *nd = &g->nodes[i + m];
        if (reinfer)
            SN_TRY(reinfer_node(ex, nd, err));
        kc[m] = kctx_of(ex, nd, ex->gin + (size_t)m * (size_t)ex->arg_cap, ex->gout + (size_t)m * (size_t)ex->arg_cap,
                        ex->nstate[i + m], ws_of(ex, i + m), err);
        cs[m] = &kc[m];
    }
    ex->cur_node = i;
    return ex->kern[i]->run_group(cs, n, t);
}

static int run_dynamic(sn_exec *ex, const sn_node *n, sn_err *err) {
    ex_bind_args(ex, n, ex->argin, ex->argout);
    for (int j = 0; j < n->n_out; j++)
        if (ex->argout[j])
            ex_init_out_info(ex->argout[j]);
    sn_infer_ctx c = {.node = n, .n_in = n->n_in, .n_out = n->n_out, .in = ex->argin, .out = ex->argout,
                      .err = err};
    SN_TRY(n->op->infer(&c));
    if (!(n->op->flags & SN_OP_ALLOCS_OUTPUTS)) {
        for (int j = 0; j < n->n_out; j++) {
            sn_tensor *t = ex->argout[j];
            if (!t)
                continue;
            if (t->kind != SN_KIND_TENSOR) {
                t->data = NULL; /* sequences and optionals: the kernel emits them */
                continue;
            }
            if (!sn_tensor_shape_known(t) || !sn_dtype_valid(t->dtype)) {
                char b[128];
                return sn_kfail(err, n, SNUG_ERR_INTERNAL, "output %d has no concrete shape at run time (%s)",
                                j, sn_shape_str(t, b, sizeof b));
            }
            SN_TRY(ex_check_budget(ex, n, j, t, err));
            size_t nb = sn_tensor_nbytes(t);
            if (ex->pl.values[n->out[j]].storage == SN_STORE_STATE) {
                if (nb > ex->vcap[n->out[j]])
                    return sn_kfail(err, n, SNUG_ERR_RANGE, "output %d needs %zu bytes, more than its %zu-byte "
                                    "state buffer", j, nb, ex->vcap[n->out[j]]);
                const sn_exec_state *st = ex_state_of(ex, n->out[j]);
                t->data = (uint8_t *)st->data + st->off;
                continue;
            }
            if (j == 0 && (n->op->flags & SN_OP_VIEW0) && ex->argin[0] && ex->argin[0]->data &&
                sn_tensor_nbytes(ex->argin[0]) == nb && ex->argin[0]->dtype == t->dtype) {
                t->data = ex->argin[0]->data;
                continue;
            }
            if (!(t->data = ex_dyn_alloc(ex, nb)))
                return sn_kfail(err, n, SNUG_ERR_OOM, "out of memory for output %d (%zu bytes)", j, nb);
        }
        if ((n->op->flags & SN_OP_VIEW0) && ex->argout[0] && ex->argout[0]->data == ex->argin[0]->data)
            return SNUG_OK;
    }
    void *state = NULL, *ws = NULL;
    if (ex->kern[n->index]->prepare) {
        sn_prep_ctx pc = {.node = n, .n_in = n->n_in, .n_out = n->n_out, .in = ex->argin,
                          .out = (const sn_tensor *const *)ex->argout, .err = err,
                          .n_threads = sn_pool_size(ex->pool)};
        SN_TRY(ex->kern[n->index]->prepare(&pc));
        state = pc.state;
        if (pc.workspace && !(ws = ex_dyn_alloc(ex, pc.workspace))) {
            if (state && ex->kern[n->index]->free_state)
                ex->kern[n->index]->free_state(state);
            return sn_kfail(err, n, SNUG_ERR_OOM, "out of memory for workspace");
        }
    }
    int rc = ex_call_kernel(ex, n, state, ws, err);
    if (state && ex->kern[n->index]->free_state)
        ex->kern[n->index]->free_state(state);
    return rc;
}

/* Infers node n's outputs for the current (actual) inputs, keeping their
 * planned buffers, and checks they fit the bytes planned for them. */
static int reinfer_node(sn_exec *ex, const sn_node *n, sn_err *err) {
    void *keep[64];
    if (n->n_out > 64)
        return sn_kfail(err, n, SNUG_ERR_UNSUPPORTED, "more than 64 outputs in a bounded plan");
    ex_bind_args(ex, n, ex->argin, ex->argout);
    for (int j = 0; j < n->n_out; j++) {
        if (ex->argout[j]) {
            keep[j] = ex->argout[j]->data;
            ex_init_out_info(ex->argout[j]);
        }
    }
    sn_infer_ctx c = {n, n->n_in, n->n_out, ex->argin, ex->argout, err, sn_pool_size(ex->pool)};
    SN_TRY(n->op->infer(&c));
    for (int j = 0; j < n->n_out; j++) {
        sn_tensor *t = ex->argout[j];
        if (!t)
            continue;
        t->data = keep[j];
        size_t nb = sn_tensor_nbytes(t);
        if (t->kind != SN_KIND_TENSOR || !sn_tensor_shape_known(t) || nb > ex->vcap[n->out[j]]) {
            char b[160];
            return sn_kfail(err, n, SNUG_ERR_RANGE,
                            "output %d %s needs %zu bytes, more than the %zu planned at the input bounds", j,
                            sn_shape_str(t, b, sizeof b), nb, ex->vcap[n->out[j]]);
        }
    }
    /* the estimate is the host kernel's need; an accelerator's kernel declared its own */
    if (n->op->estimate && ex->pl.nodes[n->index].mode == SN_MODE_STATIC && ex->pl.nodes[n->index].device == 0) {
        size_t need = n->op->estimate(&c);
        if (need > ex->pl.nodes[n->index].workspace)
            return sn_kfail(err, n, SNUG_ERR_RANGE, "needs %zu bytes of workspace, more than the %zu planned", need,
                            ex->pl.nodes[n->index].workspace);
    }
    return SNUG_OK;
}

/* Node timing: the time since the last mark goes to the node marked then,
 * node i (or none, -1) starts now. */
static void time_mark(sn_exec *ex, int i) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    double now = (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
    if (ex->t_node >= 0)
        ex->node_time[ex->t_node] += now - ex->t_mark;
    ex->t_node = i;
    ex->t_mark = now;
}

void sn_exec_time_nodes(sn_exec *ex, double *acc) {
    ex->node_time = acc;
    ex->t_node = -1;
}

/* Copy c of the plan (sn_plan_xfer): the value's bytes now, from its
 * device into its mirror on the other. */
static int run_copy(sn_exec *ex, int c, sn_err *err) {
    const sn_plan_xfer *cp = &ex->pl.copies[c];
    const sn_tensor *src = &ex->vals[cp->value];
    sn_tensor *m = &ex->mirror[c];
    void *dst = m->data;
    size_t n = src->kind == SN_KIND_TENSOR ? sn_tensor_nbytes(src) : 0;
    const char *name = ex->g->values[cp->value].name;
    if (n > cp->size)
        return sn_errf(err, SNUG_ERR_RANGE, "value '%s' is %zu bytes, more than the %zu its copy to %s was planned "
                       "for", name, n, cp->size, ex->backends[cp->to].ops->name);
    *m = *src;
    m->data = dst;
    if (!n)
        return SNUG_OK;
    if (!src->data)
        return sn_errf(err, SNUG_ERR_INTERNAL, "value '%s' has no data to copy to %s", name,
                       ex->backends[cp->to].ops->name);
    int rc;
    if (cp->from == 0)
        rc = sn_backend_tensor_set(&ex->backends[cp->to], dst, 0, src->data, n, err);
    else if (cp->to == 0)
        rc = sn_backend_tensor_get(&ex->backends[cp->from], src->data, 0, dst, n, err);
    else
        rc = sn_errf(err, SNUG_ERR_UNSUPPORTED, "no copy from %s to %s", ex->backends[cp->from].ops->name,
                     ex->backends[cp->to].ops->name);
    if (rc != SNUG_OK)
        sn_err_prefix(err, "copying '%s' (%zu bytes) from %s to %s", name, n, ex->backends[cp->from].ops->name,
                      ex->backends[cp->to].ops->name);
    ex->stats.copied_bytes += n;
    return rc;
}

/* The one run loop: every node of the plan in order. A plan made at input
 * bounds infers each node again for the actual shapes (cheap) and computes
 * into the buffers planned at the bounds; shape computations folded at plan
 * time are recomputed when they read an input shape. Nothing is allocated,
 * except by dynamic nodes. */
int ex_run_loop(sn_exec *ex, sn_err *err) {
    const sn_graph *g = ex->g;
    bool re = ex->bounded;
    int rc = SNUG_OK, c = 0;
    while (c < ex->pl.n_copies && ex->pl.copies[c].at < 0) /* constants: uploaded when prepared */
        c++;
    for (int i = 0; i < g->n_nodes && rc == SNUG_OK; i++) {
        const sn_node *n = &g->nodes[i];
        const sn_plan_node *pn = &ex->pl.nodes[i];
        if (ex->node_time)
            time_mark(ex, i);
        for (; c < ex->pl.n_copies && ex->pl.copies[c].at == i && rc == SNUG_OK; c++)
            rc = run_copy(ex, c, err);
        if (rc != SNUG_OK)
            break;
        if (ex->pf) { /* streamed layers: done with after the last reader, loaded before the first */
            if (i > 0 && ex->stream_release[i - 1] >= 0)
                ex_prefetch_release(ex->pf, ex->stream_release[i - 1]);
            if (ex->stream_wait[i] >= 0 && (rc = ex_prefetch_wait(ex->pf, ex->stream_wait[i], ex->vals, err)) != SNUG_OK)
                break;
        }
        if (ex->ds) { /* likewise to the accelerator, ordered on its queues */
            if (i == 0)
                rc = ex_dstream_begin(ex, err);
            if (rc == SNUG_OK && i > 0 && ex->drelease[i - 1] >= 0)
                rc = ex_dstream_release(ex, ex->drelease[i - 1], err);
            if (rc == SNUG_OK && ex->dwait[i] >= 0)
                rc = ex_dstream_wait(ex, ex->dwait[i], err);
            if (rc != SNUG_OK)
                break;
        }
        if (pn->mode == SN_MODE_DYNAMIC) {
            rc = run_dynamic(ex, n, err);
        } else if (pn->mode == SN_MODE_FOLDED) {
            bool dep = false;
            for (int j = 0; j < n->n_out && re; j++)
                dep |= n->out[j] >= 0 && ex->vdep[n->out[j]];
            if (!dep)
                continue;
            if (ex->kern[i]->prepare)
                return sn_kfail(err, n, SNUG_ERR_UNSUPPORTED, "cannot recompute this shape computation in a bounded plan");
            if ((rc = reinfer_node(ex, n, err)) == SNUG_OK)
                rc = ex_call_kernel(ex, n, NULL, NULL, err);
        } else if (pn->group_size == 0) { /* run with its group's leader */
            continue;
        } else if (pn->group_size > 1) {
            rc = run_group(ex, i, re, err);
        } else {
            if (re && (rc = reinfer_node(ex, n, err)) != SNUG_OK)
                break;
            if ((n->op->flags & SN_OP_VIEW0) && n->out[0] >= 0 && ex->pl.values[n->out[0]].storage == SN_STORE_VIEW) {
                ex->vals[n->out[0]].data = ex->vals[ex->pl.values[n->out[0]].alias].data;
                bool others = false;
                for (int j = 1; j < n->n_out; j++)
                    others |= n->out[j] >= 0;
                if (!others)
                    continue;
            }
            rc = ex_call_kernel(ex, n, ex->nstate[i], ws_of(ex, i), err);
        }
    }
    for (; c < ex->pl.n_copies && rc == SNUG_OK; c++) /* outputs back to the host */
        rc = run_copy(ex, c, err);
    for (int d = 1; d < ex->n_backends && rc == SNUG_OK; d++) /* a device's failure is this run's */
        if (ex->backends[d].ops->synchronize)
            rc = ex->backends[d].ops->synchronize(ex->backends[d].ctx, err);
    if (ex->node_time)
        time_mark(ex, -1);
    if (ex->pf)
        ex_prefetch_end_run(ex->pf, ex->vals, rc == SNUG_OK);
    if (ex->ds) {
        int r = ex_dstream_end_run(ex, rc == SNUG_OK, err);
        rc = rc == SNUG_OK ? r : rc;
    }
    return rc;
}

/* Whether the inputs and outer values now bound (ex->vals) lie inside the
 * current plan: within its bounds, or the very shapes it was made for. An
 * error names the input, its shape and the bound (or planned shape). */
static int plan_covers(const sn_exec *ex, sn_err *err) {
    const sn_graph *g = ex->g;
    char b1[160], b2[160];
    if (!ex->planned)
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "run without a plan (plan first)");
    if (ex->bounded) {
        for (int i = 0; i < g->n_inputs; i++) {
            const sn_tensor *t = &ex->vals[g->inputs[i]], *b = &ex->bounds[i];
            const char *nm = g->values[g->inputs[i]].name;
            if (t->kind != b->kind || t->dtype != b->dtype || t->rank != b->rank)
                return sn_errf(err, SNUG_ERR_SHAPE, "input '%s' %s %s does not match its planned bound %s %s", nm,
                               sn_dtype_name(t->dtype), sn_shape_str(t, b1, sizeof b1), sn_dtype_name(b->dtype),
                               sn_shape_str(b, b2, sizeof b2));
            for (int d = 0; d < t->rank; d++)
                if (t->dims[d] > b->dims[d])
                    return sn_errf(err, SNUG_ERR_RANGE,
                                   "input '%s' %s: dim %d is %lld, beyond its planned bound %lld (bounds %s)", nm,
                                   sn_shape_str(t, b1, sizeof b1), d, (long long)t->dims[d], (long long)b->dims[d],
                                   sn_shape_str(b, b2, sizeof b2));
        }
        return SNUG_OK;
    }
    for (int v = 0, k = 0; v < g->n_values; v++) {
        if (!(g->values[v].flags & (SN_VAL_INPUT | SN_VAL_OUTER)))
            continue;
        if (!ex_sig_equal(&ex->sig[k], &ex->vals[v]))
            return sn_errf(err, SNUG_ERR_SHAPE, "input '%s' is %s, the plan was made for %s (plan again, or plan "
                           "once for bounds)", g->values[v].name, sn_shape_str(&ex->vals[v], b1, sizeof b1),
                           sn_shape_str(&ex->sig[k], b2, sizeof b2));
        k++;
    }
    return SNUG_OK;
}

/* A plan for the shapes now bound, as the owner's policy says, when the
 * current plan does not cover them. */
int ex_plan_if_needed(sn_exec *ex, sn_replan policy, sn_err *err) {
    sn_err why = {0};
    if (plan_covers(ex, &why) == SNUG_OK)
        return SNUG_OK;
    if (policy == SN_REPLAN_NEVER || ex->bounded) {
        *err = why;
        return why.code;
    }
    if (policy == SN_REPLAN_WARN && ex->planned)
        sn_log(ex->log, SNUG_LOG_WARN, "planning again: %s (a plan at bounds, session.max_shape_override, serves "
               "both without re-planning)", why.msg);
    return ex_plan_for(ex, err);
}

/* Graph inputs bound for a run, each checked against its declaration (and
 * its state buffer). */
int ex_bind_inputs(sn_exec *ex, const sn_tensor *inputs, sn_err *err) {
    const sn_graph *g = ex->g;
    for (int i = 0; i < g->n_inputs; i++) {
        int v = g->inputs[i];
        const sn_tensor *t = &inputs[i];
        const sn_tensor *decl = &g->values[v].info;
        if (t->kind == SN_KIND_TENSOR && decl->kind == SN_KIND_TENSOR && decl->dtype != SN_UNDEFINED &&
            t->dtype != decl->dtype)
            return sn_errf(err, SNUG_ERR_TYPE, "input '%s': expected %s, got %s", g->values[v].name,
                           sn_dtype_name(decl->dtype), sn_dtype_name(t->dtype));
        if (t->kind == SN_KIND_TENSOR && decl->kind == SN_KIND_TENSOR && decl->rank >= 0) {
            char b1[128], b2[128];
            if (t->rank != decl->rank)
                return sn_errf(err, SNUG_ERR_SHAPE, "input '%s': expected rank %d %s, got %s",
                               g->values[v].name, decl->rank, sn_shape_str(decl, b1, sizeof b1),
                               sn_shape_str(t, b2, sizeof b2));
            for (int d = 0; d < t->rank; d++)
                if (decl->dims[d] >= 0 && decl->dims[d] != t->dims[d])
                    return sn_errf(err, SNUG_ERR_SHAPE, "input '%s': dim %d must be %lld, got %s",
                                   g->values[v].name, d, (long long)decl->dims[d],
                                   sn_shape_str(t, b2, sizeof b2));
        }
        ex->vals[v] = *t;
        const sn_exec_state *st = ex_state_of(ex, v);
        if (st) {
            char b[160];
            size_t room = st->cap - st->off;
            if (t->kind != SN_KIND_TENSOR || sn_tensor_nbytes(t) > room)
                return sn_errf(err, SNUG_ERR_RANGE, "input '%s' %s needs %zu bytes, more than its %zu-byte state "
                               "buffer%s", g->values[v].name, sn_shape_str(t, b, sizeof b), sn_tensor_nbytes(t),
                               room, st->off ? " window" : "");
            ex->vals[v].data = (uint8_t *)st->data + st->off;
            /* a shared output is computed into the same window */
            if (st->out_v >= 0 && ex->pl.values[st->out_v].storage == SN_STORE_STATE) {
                ex->vals[st->out_v].data = ex->vals[v].data;
                ex->vcap[st->out_v] = room;
            }
        }
        if (t->kind == SN_KIND_TENSOR && !ex->vals[v].data && sn_tensor_numel(t) > 0)
            return sn_errf(err, SNUG_ERR_INVALID_ARG, "input '%s' has no data", g->values[v].name);
    }
    return SNUG_OK;
}

static int exec_run(sn_exec *ex, const sn_tensor *inputs, sn_tensor *outputs, sn_err *err) {
    const sn_graph *g = ex->g;
    ex_dyn_release(ex);
    SN_TRY(ex_bind_inputs(ex, inputs, err));
    if (ex->parent) {
        for (int v = 0; v < g->n_values; v++)
            if (g->values[v].flags & SN_VAL_OUTER)
                ex->vals[v] = ex->parent->vals[g->values[v].outer_id];
    }
    SN_TRY(plan_covers(ex, err));
    sn_pool_hot(ex->pool, true); /* the workers wait spinning through the run's serial kernels */
    int rc = ex_run_loop(ex, err);
    sn_pool_hot(ex->pool, false);
    if (rc != SNUG_OK)
        return rc;
    for (int i = 0; i < g->n_outputs; i++) {
        int v = g->outputs[i];
        outputs[i] = ex->vals[v];
        if (ex->pl.values[v].device != 0) { /* computed on an accelerator: its copy on the host */
            outputs[i].data = NULL; /* a state left on its device (sn_exec_state_device) */
            for (int c = 0; c < ex->pl.n_copies; c++)
                if (ex->pl.copies[c].value == v && ex->pl.copies[c].to == 0)
                    outputs[i] = ex->mirror[c];
        }
    }
    return SNUG_OK;
}

int sn_exec_run(sn_exec *ex, const sn_tensor *inputs, sn_tensor *outputs, sn_err *err) {
    sn_fpmode saved = ex_fp_enter(ex);
    int rc = exec_run(ex, inputs, outputs, err);
    sn_fp_set(saved);
    return rc;
}

int sn_exec_replan_for(sn_exec *ex, const sn_tensor *inputs, sn_replan policy, sn_err *err) {
    SN_TRY(ex_bind_inputs(ex, inputs, err));
    sn_fpmode saved = ex_fp_enter(ex); /* folding runs kernels */
    int rc = ex_plan_if_needed(ex, policy, err);
    sn_fp_set(saved);
    return rc;
}

/* ---- host services (sn_host): what kernels may ask of the runner ------- */

static void *host_alloc(void *ctx, size_t bytes) { return ex_dyn_alloc(ctx, bytes); }
static const sn_limits *host_limits(const void *ctx) { return &((const sn_exec *)ctx)->limits; }

static int host_run_subgraph(void *ctx, const sn_node *n, int k, int n_in, const sn_tensor *in,
                             const sn_tensor **outs, int *n_out, sn_err *err) {
    sn_exec *ex = ctx;
    if (k < 0 || k >= n->n_sub)
        return sn_kfail(err, n, SNUG_ERR_INTERNAL, "no subgraph %d", k);
    const sn_graph *sg = n->sub[k];
    if (n_in != sg->n_inputs)
        return sn_kfail(err, n, SNUG_ERR_GRAPH, "subgraph '%s' takes %d inputs, given %d", n->sub_attr[k],
                        sg->n_inputs, n_in);
    sn_exec **slot = &ex->sub[ex->sub_base[n->index] + k];
    if (!*slot) {
        SN_TRY(sn_exec_new(sg, ex->pool, ex->log, slot, err));
        (*slot)->parent = ex;
        sn_exec_set_weights_load(*slot, ex->weights_load);
        (*slot)->no_groups = ex->no_groups;
        (*slot)->limits = ex->limits;
    }
    sn_exec *se = *slot;
    /* The child's outputs of the previous call are released by this run. */
    for (int i = 0; i < sg->n_inputs; i++) {
        int v = sg->inputs[i];
        se->vals[v] = in[i];
    }
    ex_dyn_release(se);
    for (int v = 0; v < sg->n_values; v++)
        if (sg->values[v].flags & SN_VAL_OUTER)
            se->vals[v] = ex->vals[sg->values[v].outer_id];
    int rc = ex_plan_if_needed(se, SN_REPLAN_AUTO, err); /* the parent's run decides the child's shapes */
    if (rc == SNUG_OK)
        rc = ex_run_loop(se, err);
    if (rc != SNUG_OK) {
        sn_err_prefix(err, "in subgraph '%s' of %s node '%s'", n->sub_attr[k], n->p->op_type, n->p->name);
        return rc;
    }
    for (int i = 0; i < sg->n_outputs; i++)
        outs[i] = &se->vals[sg->outputs[i]];
    *n_out = sg->n_outputs;
    ex->cur_node = n->index;
    return SNUG_OK;
}

static const sn_host k_host = {
    .alloc = host_alloc,
    .limits = host_limits,
    .run_subgraph = host_run_subgraph,
    .reads_file = ex_reads_file,
    .read_const = ex_read_const,
};
