/* Infer and fold, the stage of a plan that runs kernels (exec_impl.h). */
#include <string.h>

#include "exec/exec_impl.h"

static bool node_inputs_const(const sn_exec *ex, const sn_node *n) {
    bool shape_only = n->op->flags & SN_OP_SHAPE_ONLY;
    for (int j = 0; j < n->n_in; j++) {
        int v = n->in[j];
        if (v < 0 || ex->pl.values[v].storage == SN_STORE_CONST || ex->pl.values[v].storage == SN_STORE_FOLDED)
            continue;
        if (shape_only && ex->vals[v].kind == SN_KIND_TENSOR && sn_tensor_shape_known(&ex->vals[v]))
            continue;
        return false;
    }
    return n->n_impl == 0;
}

#define SN_FOLD_LIMIT ((size_t)16 << 20)

/* Runs node n at plan time on constant inputs; outputs become SN_STORE_FOLDED.
 * A folded value that read an input's shape (directly or through other
 * folded values) is marked vdep: a bounded run recomputes it. */
static int fold_node(sn_exec *ex, const sn_node *n, sn_err *err) {
    bool dep = false;
    for (int j = 0; j < n->n_in; j++) {
        int v = n->in[j];
        if (v >= 0 && (ex->pl.values[v].storage == SN_STORE_FOLDED ? ex->vdep[v] != 0 : ex->pl.values[v].storage != SN_STORE_CONST))
            dep = true;
    }
    for (int j = 0; j < n->n_out; j++) {
        int v = n->out[j];
        if (v < 0)
            continue;
        sn_tensor *t = &ex->vals[v];
        ex->vcap[v] = sn_tensor_nbytes(t);
        ex->vdep[v] = dep;
        if (!(t->data = ex_folded_alloc(ex, ex->vcap[v])))
            return sn_errf(err, SNUG_ERR_OOM, "out of memory folding constants");
    }
    void *state = NULL, *ws = NULL;
    size_t wsb = 0;
    if (ex->kern[n->index]->prepare) {
        ex_bind_args(ex, n, ex->argin, ex->argout);
        sn_prep_ctx pc = {.node = n, .n_in = n->n_in, .n_out = n->n_out, .in = ex->argin,
                          .out = (const sn_tensor *const *)ex->argout, .err = err,
                          .n_threads = sn_pool_size(ex->pool)};
        SN_TRY(ex->kern[n->index]->prepare(&pc));
        state = pc.state;
        wsb = pc.workspace;
    }
    if (wsb && !(ws = sn_calloc(1, wsb))) {
        if (state && ex->kern[n->index]->free_state)
            ex->kern[n->index]->free_state(state);
        return sn_errf(err, SNUG_ERR_OOM, "out of memory folding constants");
    }
    int rc = ex_call_kernel(ex, n, state, ws, err);
    sn_free(ws);
    if (state && ex->kern[n->index]->free_state)
        ex->kern[n->index]->free_state(state);
    if (rc != SNUG_OK)
        return rc;
    for (int j = 0; j < n->n_out; j++)
        if (n->out[j] >= 0)
            ex->pl.values[n->out[j]].storage = SN_STORE_FOLDED;
    return SNUG_OK;
}

/* An estimate (ex->dry) does not compute a folded constant larger than
 * this (a weight transposed or cast: reading weights is what an estimate
 * avoids); see fold_stand_in. */
#define SN_DRY_FOLD_MAX ((size_t)4 << 10)

/* For an estimate: node n's outputs, constants a plan would fold, take the
 * bytes of its largest constant input in their place, uncomputed: enough
 * for their shapes and for what a dry prepare decides from them (that an
 * input is constant); no infer reads the contents of a tensor that large.
 * False when no input is as large as every output: it is computed. */
static bool fold_stand_in(sn_exec *ex, const sn_node *n) {
    int src = -1;
    size_t best = 0;
    bool dep = false;
    for (int j = 0; j < n->n_in; j++) {
        int v = n->in[j];
        if (v < 0)
            continue;
        if (ex->pl.values[v].storage == SN_STORE_FOLDED ? ex->vdep[v] != 0 : ex->pl.values[v].storage != SN_STORE_CONST)
            dep = true;
        if ((ex->pl.values[v].storage == SN_STORE_CONST || ex->pl.values[v].storage == SN_STORE_FOLDED) && ex->vals[v].data &&
            sn_tensor_nbytes(&ex->vals[v]) > best)
            best = sn_tensor_nbytes(&ex->vals[v]), src = v;
    }
    for (int j = 0; j < n->n_out; j++)
        if (n->out[j] >= 0 && sn_tensor_nbytes(&ex->vals[n->out[j]]) > best)
            return false;
    if (src < 0)
        return false;
    for (int j = 0; j < n->n_out; j++) {
        int v = n->out[j];
        if (v < 0)
            continue;
        ex->vcap[v] = sn_tensor_nbytes(&ex->vals[v]);
        ex->vdep[v] = dep;
        ex->vals[v].data = ex->vals[src].data;
        ex->pl.values[v].storage = SN_STORE_FOLDED;
    }
    return true;
}

/* Most kernels size element loops with sn_dtype_size, which would overrun
 * sub-byte packed tensors: only ops flagged SN_OP_PACKED_OK may see them. */
static int check_packed(const sn_node *n, const sn_tensor *const *t, int count, sn_err *err) {
    for (int j = 0; j < count; j++)
        if (t[j] && t[j]->kind == SN_KIND_TENSOR && sn_dtype_is_packed(t[j]->dtype))
            return sn_kfail(err, n, SNUG_ERR_UNSUPPORTED, "%s tensors are not supported by this op",
                            sn_dtype_name(t[j]->dtype));
    return SNUG_OK;
}

/* A state's output is computed into the state buffer instead of the arena. */
static int plan_state_output(sn_exec *ex, const sn_exec_state *st, sn_err *err) {
    int v = st->out_v;
    if (v < 0 || (ex->pl.values[v].storage != SN_STORE_ARENA && ex->pl.values[v].storage != SN_STORE_DYNAMIC))
        return SNUG_OK;
    size_t room = st->cap - st->off; /* the window runs use (sn_exec_state_window) */
    if (ex->pl.values[v].storage == SN_STORE_ARENA && sn_tensor_nbytes(&ex->vals[v]) > room) {
        char b[160];
        return sn_errf(err, SNUG_ERR_RANGE, "output '%s' %s needs %zu bytes, more than its %zu-byte state buffer",
                       ex->g->values[v].name, sn_shape_str(&ex->vals[v], b, sizeof b),
                       sn_tensor_nbytes(&ex->vals[v]), room);
    }
    ex->pl.values[v].storage = SN_STORE_STATE;
    ex->vals[v].data = (uint8_t *)st->data + st->off;
    ex->vcap[v] = room;
    return SNUG_OK;
}


/* Infer and fold, the one stage that runs kernels: every node in order is
 * inferred from its inputs' infos; a node whose inputs are all constant
 * (and whose outputs are small) is computed now (folded); the others run
 * with planned (static) or run-time (dynamic) shapes. Fills the plan's
 * value storage, alias, info and size and its node modes. */
int ex_infer_fold(sn_exec *ex, sn_err *err) {
    const sn_graph *g = ex->g;
    int rc = SNUG_OK;
    /* Value kinds and infos for what is known before any node. Graph-input
     * data is hidden while planning: a plan depends on shapes only. */
    for (int v = 0; v < g->n_values; v++) {
        const sn_value *val = &g->values[v];
        if (val->flags & SN_VAL_INIT) {
            ex->pl.values[v].storage = SN_STORE_CONST;
            sn_const_info(&ex->vals[v], &val->init->t);
            if (ex->init_copy[v])
                ex->vals[v].data = ex->init_copy[v];
        } else if (val->flags & (SN_VAL_INPUT | SN_VAL_OUTER)) {
            ex->pl.values[v].storage = SN_STORE_INPUT;
        } else {
            ex->pl.values[v].storage = SN_STORE_NONE;
            ex_init_out_info(&ex->vals[v]);
        }
        ex->pl.values[v].alias = -1;
        const sn_tensor *t = &ex->vals[v];
        if (ex->pl.values[v].storage != SN_STORE_NONE && t->kind == SN_KIND_TENSOR && t->rank > 0 &&
            !sn_dims_fit(t->rank, t->dims)) {
            char b[160];
            return sn_errf(err, SNUG_ERR_SHAPE, "value '%s' %s has more elements than fit in int64", val->name,
                           sn_shape_str(t, b, sizeof b));
        }
    }
    ex->stage = EX_FOLD;
    for (int i = 0; i < g->n_nodes && rc == SNUG_OK; i++) {
        const sn_node *n = &g->nodes[i];
        ex->pl.nodes[i].last_row = i == ex->last_row_node;
        ex_bind_args(ex, n, ex->argin, ex->argout);
        for (int j = 0; j < n->n_out; j++)
            if (ex->argout[j])
                ex_init_out_info(ex->argout[j]);
        if (!(n->op->flags & SN_OP_PACKED_OK) && (rc = check_packed(n, ex->argin, n->n_in, err)) != SNUG_OK)
            break;
        sn_infer_ctx c = {.node = n, .n_in = n->n_in, .n_out = n->n_out, .in = ex->argin, .out = ex->argout,
                          .err = err};
        if ((rc = n->op->infer(&c)) != SNUG_OK)
            break;
        if (!(n->op->flags & SN_OP_PACKED_OK) &&
            (rc = check_packed(n, (const sn_tensor *const *)ex->argout, n->n_out, err)) != SNUG_OK)
            break;
        bool concrete = !(n->op->flags & SN_OP_ALLOCS_OUTPUTS);
        size_t out_bytes = 0;
        for (int j = 0; j < n->n_out && concrete; j++) {
            sn_tensor *t = ex->argout[j];
            if (!t)
                continue;
            t->data = NULL;
            if (t->kind != SN_KIND_TENSOR || !sn_tensor_shape_known(t) || !sn_dtype_valid(t->dtype)) {
                concrete = false;
            } else {
                if ((rc = ex_check_budget(ex, n, j, t, err)) != SNUG_OK)
                    break;
                out_bytes += sn_tensor_nbytes(t);
            }
        }
        if (rc != SNUG_OK)
            break;
        if (concrete && node_inputs_const(ex, n) && !(n->op->flags & SN_OP_NONDETERMINISTIC) &&
            out_bytes <= SN_FOLD_LIMIT && n->n_sub == 0) {
            ex->pl.nodes[i].mode = SN_MODE_FOLDED;
            rc = ex->dry && out_bytes > SN_DRY_FOLD_MAX && fold_stand_in(ex, n) ? SNUG_OK : fold_node(ex, n, err);
            ex->stats.n_folded++;
            ex->stats.folded_bytes += out_bytes;
            if (rc == SNUG_OK)
                ex_drop_unread_inputs(ex, n, i);
            continue;
        }
        ex->pl.nodes[i].mode = concrete ? SN_MODE_STATIC : SN_MODE_DYNAMIC;
        for (int j = 0; j < n->n_out; j++) {
            int v = n->out[j];
            if (v < 0)
                continue;
            if (!concrete) {
                ex->pl.values[v].storage = SN_STORE_DYNAMIC;
                /* A dynamic view may alias its input at run time: keep the input alive. */
                if (j == 0 && (n->op->flags & SN_OP_VIEW0))
                    ex->pl.values[v].alias = n->in[0];
            } else if (j == 0 && (n->op->flags & SN_OP_VIEW0) && n->in[0] >= 0 &&
                       ex->vals[n->in[0]].kind == SN_KIND_TENSOR &&
                       sn_tensor_nbytes(&ex->vals[v]) == sn_tensor_nbytes(&ex->vals[n->in[0]]) &&
                       ex->vals[v].dtype == ex->vals[n->in[0]].dtype) {
                ex->pl.values[v].storage = SN_STORE_VIEW;
                ex->pl.values[v].alias = n->in[0];
                ex->vcap[v] = sn_tensor_nbytes(&ex->vals[v]);
                /* A view of a constant is itself constant data. */
                int src = n->in[0];
                if (ex->pl.values[src].storage == SN_STORE_CONST || ex->pl.values[src].storage == SN_STORE_FOLDED)
                    ex->vals[v].data = ex->vals[src].data;
            } else {
                ex->pl.values[v].storage = SN_STORE_ARENA;
            }
        }
        if (concrete)
            ex->stats.n_static++;
        else
            ex->stats.n_dynamic++;
    }
    for (int k = 0; k < ex->n_states && rc == SNUG_OK; k++)
        rc = plan_state_output(ex, &ex->states[k], err);
    /* The plan's record of every value at the planning shapes. */
    for (int v = 0; v < g->n_values && rc == SNUG_OK; v++) {
        sn_plan_value *pv = &ex->pl.values[v];
        pv->info = ex->vals[v];
        if (pv->storage != SN_STORE_CONST && pv->storage != SN_STORE_FOLDED)
            pv->info.data = NULL; /* arena bytes no run has written, or none */
        pv->size = pv->storage == SN_STORE_DYNAMIC || pv->info.kind != SN_KIND_TENSOR ||
                           !sn_tensor_shape_known(&pv->info) || !sn_dtype_valid(pv->info.dtype)
                       ? 0
                       : sn_tensor_nbytes(&pv->info);
    }
    return rc;
}
