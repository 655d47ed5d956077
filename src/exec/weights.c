/* Weight residency (exec_impl.h): every constant a plan's kernels read is
 * resident once, and only while a run may read it. */
#include <string.h>

#include "exec/exec_impl.h"

/* Copies of a page or more are whole pages of their own: a kernel packing
 * the weight can hand back each part once packed (ex_release_cb), and freeing
 * the copy returns its pages to the system (a freed heap block may stay
 * resident in the allocator's free lists: 3 MiB of SmolLM2's 55 KiB k and v
 * projections once they were tiled). */
#define SN_PAGES_MIN ((size_t)4 << 10)

static bool copy_in_pages(size_t nb) { return nb >= SN_PAGES_MIN; }

/* Initializer v in owned, aligned memory: the aligned copy of a misaligned
 * weight (copied in chunks whose source pages are released as soon as they
 * are copied), or under snug.weights=load any weight, read from the file
 * without mapping it. */
int ex_copy_init(sn_exec *ex, int v, sn_err *err) {
    const sn_init *in = ex->g->values[v].init;
    size_t nb = sn_tensor_nbytes(&in->t);
    bool pages = copy_in_pages(nb);
    void *d = pages ? sn_pages_alloc(nb) : sn_malloc(nb);
    if (!d)
        return sn_errf(err, SNUG_ERR_OOM, "out of memory for a copy of weight '%s' (%zu bytes)", in->name, nb);
    if (ex->weights_load) {
        int e = sn_model_read(ex->g->model, d, in->t.data, nb);
        if (e) {
            pages ? sn_pages_free(d, nb, 0) : sn_free(d);
            const char *file = sn_model_file_of(ex->g->model, in->t.data, nb);
            return sn_errf(err, SNUG_ERR_IO, "cannot read weight '%s' (%zu bytes) from '%s': %s", in->name, nb,
                           file ? file : ex->g->model->path, strerror(e));
        }
    } else {
        const size_t chunk = (size_t)4 << 20;
        for (size_t off = 0; off < nb; off += chunk) {
            size_t n = nb - off < chunk ? nb - off : chunk;
            memcpy((uint8_t *)d + off, (const uint8_t *)in->t.data + off, n);
            sn_model_release_bytes(ex->g->model, in->t.data, off + n);
        }
    }
    ex->init_copy[v] = d;
    ex->copy_released[v] = 0;
    ex->stats.copied_init_bytes += nb;
    ex->copy_dropped[v] = 0;
    return SNUG_OK;
}

void ex_copy_free(sn_exec *ex, int v) {
    if (!ex->init_copy[v])
        return;
    size_t nb = sn_tensor_nbytes(&ex->g->values[v].init->t);
    if (copy_in_pages(nb))
        sn_pages_free(ex->init_copy[v], nb, ex->copy_released[v]);
    else
        sn_free(ex->init_copy[v]);
    ex->stats.copied_init_bytes -= nb - ex->copy_released[v];
    ex->init_copy[v] = NULL;
    ex->copy_released[v] = 0;
}

/* A weight snug.weights=load reads into owned memory: every constant a
 * kernel may read whole that lies in the model's files (a table only
 * gathered is read row by row from the file instead, sn_kctx_read_const). */
static bool load_eligible(const sn_exec *ex, int v) {
    const sn_graph *g = ex->g;
    const sn_init *in = g->values[v].init;
    return (g->values[v].flags & SN_VAL_INIT) && in && in->t.data && g->values[v].n_cons > 0 &&
           !sn_value_gathered_only(g, v) && sn_model_maps(g->model, in->t.data, sn_tensor_nbytes(&in->t));
}

void sn_exec_set_weights_load(sn_exec *ex, bool on) {
    ex->weights_load = on;
    if (!on)
        return;
    for (int v = 0; v < ex->g->n_values; v++)
        if (!ex->init_copy[v] && load_eligible(ex, v))
            ex->copy_dropped[v] = 1; /* read by the next plan */
    sn_model_release_all(ex->g->model); /* what parsing the file mapped */
}

bool sn_exec_weights_load(const sn_exec *ex) { return ex->weights_load; }

bool ex_reads_file(const void *ctx, const sn_tensor *t) {
    const sn_exec *ex = ctx;
    return ex && ex->weights_load && t->data && sn_model_maps(ex->g->model, t->data, sn_tensor_nbytes(t));
}

int ex_read_const(const void *ctx, void *dst, const void *src, size_t n, sn_err *err) {
    const sn_exec *ex = ctx;
    int e = sn_model_read(ex->g->model, dst, src, n);
    if (e) {
        const char *file = sn_model_file_of(ex->g->model, src, n);
        return sn_errf(err, SNUG_ERR_IO, "cannot read %zu bytes of a weight from '%s': %s", n,
                       file ? file : ex->g->model->path, strerror(e));
    }
    return SNUG_OK;
}

/* Whether node c, already planned, will never read its input v in a run:
 * folded (and not recomputed by bounded runs), or prepared with state that
 * replaces v. */
static bool node_done_with(const sn_exec *ex, int c, int v) {
    const sn_node *n = &ex->g->nodes[c];
    if (n->n_sub || n->n_impl)
        return false;
    if (ex->pl.nodes[c].mode == SN_MODE_FOLDED) {
        for (int j = 0; j < n->n_out; j++)
            if (n->out[j] >= 0 && ex->vdep[n->out[j]])
                return false;
        return true;
    }
    if (ex->pl.nodes[c].mode != SN_MODE_STATIC || c > ex->prepared_upto)
        return false;
    for (int k = 0; k < n->n_in && k < 32; k++)
        if (n->in[k] == v && !(ex->nreplaces[c] & (1u << k)))
            return false;
    return true;
}

/* After node i is planned: a constant input (weight or folded value) that
 * no run will read any more (every reader planned and done with it) stops
 * taking memory now, not at the end of planning, so a weight is resident
 * once even while the plan packs or folds it: an aligned copy is freed, a
 * mapped weight's pages are released, a folded block is freed. The next
 * plan makes copies again (folded values are recomputed anyway). */
/* Constant v's host bytes handed back: a folded block freed, an aligned
 * copy freed (the file map stands in again), file pages released; false
 * when the model owns them (decoded at load). */
static bool release_const(sn_exec *ex, int v) {
    const sn_graph *g = ex->g;
    size_t nb = sn_tensor_nbytes(&ex->vals[v]);
    if (ex->pl.values[v].storage == SN_STORE_FOLDED) {
        bool found = false;
        for (int b = 0; b < ex->n_folded && !found; b++)
            if ((found = ex->folded[b] == ex->vals[v].data)) {
                sn_free(ex->folded[b]);
                ex->folded[b] = NULL;
                ex->vals[v].data = NULL;
            }
        if (found || ex->dry) /* an estimate's stand-ins (fold_stand_in) have no block */
            ex->stats.folded_bytes -= nb;
    } else if (ex->dry && ex->init_copy[v]) { /* an estimate frees no copy a plan made */
    } else if (ex->init_copy[v]) {
        ex_copy_free(ex, v);
        ex->copy_dropped[v] = 1;
        /* Back to the bytes in the file map (never read: every reader is
         * done with it), so that run-time re-inference still sees a
         * constant (a kernel's Level-1 estimate may depend on it). */
        ex->vals[v].data = (void *)g->values[v].init->t.data;
    } else if (sn_model_maps(g->model, ex->vals[v].data, nb)) {
        sn_model_release_bytes(g->model, ex->vals[v].data, nb);
    } else {
        return false; /* decoded at load: the model owns it */
    }
    ex->pl.values[v].released = 1;
    ex->stats.released_bytes += nb;
    return true;
}

void ex_release_uploaded(sn_exec *ex, int v) {
    const sn_graph *g = ex->g;
    const sn_value *val = &g->values[v];
    if (ex->dry || ex->pl.values[v].storage != SN_STORE_CONST || ex->pl.values[v].released ||
        (val->flags & SN_VAL_OUTPUT) || val->n_cons < 1)
        return;
    for (int c = 0; c < val->n_cons; c++) {
        const sn_node *r = &g->nodes[val->cons[c]];
        if (ex->pl.nodes[r->index].mode == SN_MODE_FOLDED)
            continue;
        for (int k = 0; k < r->n_in; k++)
            if (r->in[k] == v && sn_plan_reads_on(&ex->pl, r->index, k) == 0)
                return; /* a host reader, or a device kernel's host input */
    }
    release_const(ex, v);
}

void ex_drop_unread_inputs(sn_exec *ex, const sn_node *n, int i) {
    const sn_graph *g = ex->g;
    for (int k = 0; k < n->n_in; k++) {
        int v = n->in[k];
        if (v < 0 || ex->pl.values[v].released || (g->values[v].flags & SN_VAL_OUTPUT) ||
            !(ex->pl.values[v].storage == SN_STORE_CONST || (ex->pl.values[v].storage == SN_STORE_FOLDED && !ex->vdep[v])))
            continue;
        const sn_value *val = &g->values[v];
        bool done = val->n_cons > 0;
        for (int c = 0; c < val->n_cons && done; c++)
            done = (val->cons[c] <= i || ex->stage == EX_PREPARE) && node_done_with(ex, val->cons[c], v);
        if (!done)
            continue;
        release_const(ex, v);
    }
}

/* Pages released while planning come back when a neighbour is read: a
 * read fault maps the whole aligned window around it from the page cache.
 * Once every kernel is prepared, the mapped bytes no run reads (released
 * constants, sources of aligned copies) are released once more. */
void ex_sweep_released(sn_exec *ex) {
    const sn_graph *g = ex->g;
    if (ex->dry)
        return;
    if (ex->weights_load) { /* nothing of the files is read through the map */
        sn_model_release_all(g->model);
        return;
    }
    for (int v = 0; v < g->n_values; v++) {
        const sn_init *in = g->values[v].init;
        if (!(g->values[v].flags & SN_VAL_INIT) || !in || !in->t.data)
            continue;
        if (ex->pl.values[v].released || ex->init_copy[v] || ex->copy_dropped[v])
            sn_model_release_bytes(g->model, in->t.data, sn_tensor_nbytes(&in->t));
    }
}

/* A kernel handing back part of a constant input it has packed: pages of
 * the model's file map are dropped (read again if touched), pages of an
 * owned copy are freed, but only when the node being prepared is the
 * copy's one reader (anything else would read zeros where they were). */
void ex_release_cb(void *ctx, const void *p, size_t n) {
    sn_exec *ex = ctx;
    const sn_graph *g = ex->g;
    const sn_node *nd = &g->nodes[ex->prep_node];
    const uint8_t *q = p;
    for (int k = 0; k < nd->n_in; k++) {
        int v = nd->in[k];
        if (v < 0 || !ex->init_copy[v])
            continue;
        const uint8_t *b = ex->init_copy[v];
        if (q < b || q + n > b + sn_tensor_nbytes(&g->values[v].init->t))
            continue;
        int uses = 0;
        for (int j = 0; j < nd->n_in; j++)
            uses += nd->in[j] == v;
        if (copy_in_pages(sn_tensor_nbytes(&g->values[v].init->t)) && g->values[v].n_cons == 1 && uses == 1 && !(g->values[v].flags & SN_VAL_OUTPUT)) {
            size_t r = sn_pages_release((void *)p, n);
            ex->copy_released[v] += r;
            ex->stats.copied_init_bytes -= r;
        }
        return;
    }
    sn_model_release_bytes(g->model, p, n);
}

/* ---- weight streaming (docs/streaming.md) ------------------------------- */

/* Whether v may stream in the plan now held (dry or not): a streamable
 * weight (sn_plan_streamable) whose bytes lie in the model's files, so that
 * the prefetcher can read it with pread (to an aligned place in its slot:
 * a weight the file leaves misaligned needs no copy of its own then). */
static bool stream_candidate(const sn_exec *ex, int v, int *layer) {
    const sn_graph *g = ex->g;
    if (!sn_plan_streamable(&ex->pl, g, v, ex->n_layers, layer))
        return false;
    const sn_init *in = g->values[v].init;
    return in->t.data && sn_model_maps(g->model, in->t.data, sn_tensor_nbytes(&in->t));
}

/* Bytes a weight read whole holds when resident: its own copy
 * (snug.weights=load, which a host budget implies), in whole pages when a
 * page or more (ex_copy_init). */
static uint64_t held_bytes(size_t nb) { return copy_in_pages(nb) ? sn_pages_size(nb) : nb; }

int ex_stream_decide(sn_exec *ex, const sn_tensor *bounds, sn_err *err) {
    const sn_graph *g = ex->g;
    /* decided already for these bounds (the estimate before planning asked first) */
    bool same = ex->stream_decided;
    for (int i = 0; i < g->n_inputs && same; i++)
        same = ex_sig_equal(&ex->stream_for[i], &bounds[i]);
    if (same)
        return SNUG_OK;
    ex->stream_decided = false;
    memset(&ex->stream, 0, sizeof ex->stream);
    memset(ex->streamed, 0, (size_t)g->n_values);
    if (!ex->host_budget || ex->parent || ex->n_layers < 1)
        return SNUG_OK;
    /* the plan at these bounds, dry: arena, folded values, what kernels
     * would pack, without reading or packing a weight */
    sn_exec_stats saved = ex->stats;
    ex->dry = true;
    ex->dry_state = 0;
    int rc = sn_exec_plan(ex, bounds, err);
    ex->dry = false;
    uint64_t *lb = rc == SNUG_OK ? sn_calloc((size_t)ex->n_layers + 1, sizeof *lb) : NULL;
    if (rc == SNUG_OK && !lb)
        rc = sn_errf(err, SNUG_ERR_OOM, "out of memory");
    if (rc != SNUG_OK) {
        ex_plan_release(ex);
        ex->stats = saved;
        return rc;
    }
    uint64_t act = ex->stats.arena_bytes, kv = saved.persistent_bytes, fixed = ex->stats.folded_bytes;
    int *lay = sn_malloc(sizeof *lay * ((size_t)g->n_values + 1)); /* a candidate's layer, or -1 */
    for (int v = 0; lay && v < g->n_values; v++) {
        int l = -1;
        lay[v] = -1;
        const sn_value *val = &g->values[v];
        if (!(val->flags & SN_VAL_INIT) || !val->init || !val->n_cons)
            continue;
        size_t nb = sn_tensor_nbytes(&val->init->t);
        if (stream_candidate(ex, v, &l)) {
            lay[v] = l;
            lb[l] += sn_stream_align(nb);
        } else if (!ex->pl.values[v].released && !sn_value_gathered_only(g, v) && val->init->t.data &&
                   sn_model_maps(g->model, val->init->t.data, nb)) {
            fixed += held_bytes(nb); /* resident whatever streams (gathered rows go to the arena) */
        }
    }
    /* packed state counts unless what it replaces is a candidate (then the
     * candidate's bytes stand for it, resident or streamed) */
    for (int i = 0; i < g->n_nodes; i++) {
        const sn_node *n = &g->nodes[i];
        bool cand = false;
        for (int k = 0; k < n->n_in && k < 32 && lay; k++)
            cand |= (ex->nreplaces[i] & (1u << k)) && n->in[k] >= 0 && lay[n->in[k]] >= 0;
        if (!cand)
            fixed += ex->pl.nodes[i].state_bytes;
    }
    ex_plan_release(ex);
    ex->stats = saved;
    if (!lay) {
        sn_free(lb);
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    }
    rc = sn_plan_residency(lb, ex->n_layers, act, kv, fixed, ex->host_budget, ex->prefetch_depth, &ex->stream, err);
    for (int v = 0; v < g->n_values && rc == SNUG_OK; v++)
        ex->streamed[v] = lay[v] >= ex->stream.first_layer && ex->stream.first_layer < ex->stream.n_layers;
    sn_free(lay);
    sn_free(lb);
    if (rc != SNUG_OK)
        return rc;
    for (int i = 0; i < g->n_inputs; i++) {
        ex->stream_for[i] = bounds[i];
        ex->stream_for[i].data = NULL;
    }
    ex->stream_decided = true;
    const sn_plan_stream *st = &ex->stream;
    if (st->first_layer < st->n_layers)
        sn_log(ex->log, SNUG_LOG_INFO,
               "weight streaming: layers %d..%d of %d stream (%zu bytes a sweep) through %d slots of %zu bytes; "
               "%llu bytes of layer weights resident, %llu fixed, %llu of the %llu-byte budget planned",
               st->first_layer, st->n_layers - 1, st->n_layers, st->streamed_bytes, st->depth, st->slot_bytes,
               (unsigned long long)st->resident_weights, (unsigned long long)st->fixed,
               (unsigned long long)st->total, (unsigned long long)st->budget);
    return SNUG_OK;
}

int ex_stream_mark(sn_exec *ex, sn_err *err) {
    memset(&ex->pl.stream, 0, sizeof ex->pl.stream);
    if (!ex->dry && !ex->planning_bounds && ex->host_budget && !ex->parent && !ex->budget_warned) {
        ex->budget_warned = true; /* said, not silently ignored */
        sn_log(ex->log, SNUG_LOG_WARN,
               "snug.mem.host holds plans made at input bounds (snug generate and bench, session.max_shape_override, "
               "snug run --bound); this plan for the shapes of one run is not held to it and streams nothing");
    }
    if (ex->dry || !ex->planning_bounds)
        return SNUG_OK;
    ex->pl.stream = ex->stream; /* the budget's figures, whether anything streams or not */
    if (ex->stream.first_layer >= ex->stream.n_layers)
        return SNUG_OK;
    SN_TRY(sn_plan_stream_values(&ex->pl, ex->g, ex->streamed, err));
    sn_plan_stream *st = &ex->pl.stream;
    st->total = st->fixed + st->resident_weights + st->staging_bytes;
    return SNUG_OK;
}

/* The schedule of the current plan: before which node each streamed layer
 * must be loaded (the first node reading it, a group's leader for its
 * members), after which it is done with (its last reader), and the slots
 * that takes: a ring of depth slots serves when each layer's first reader
 * comes after the reader of the layer depth places before it is done. */
static int stream_schedule(sn_exec *ex, int n, int *depth, sn_err *err) {
    const sn_graph *g = ex->g;
    int *first = sn_malloc(sizeof *first * ((size_t)n + 1)), *last = sn_malloc(sizeof *last * ((size_t)n + 1));
    if (!first || !last) {
        sn_free(first);
        sn_free(last);
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    }
    for (int o = 0; o < n; o++)
        first[o] = g->n_nodes, last[o] = -1;
    for (int v = 0; v < g->n_values; v++) {
        if (ex->pl.values[v].storage != SN_STORE_STREAMED)
            continue;
        int o = ex_prefetch_ordinal(ex->pf, g->nodes[ex->pl.values[v].first].layer);
        const sn_value *val = &g->values[v];
        for (int c = 0; c < val->n_cons && o >= 0; c++) {
            int lead = ex->pl.nodes[val->cons[c]].group;
            first[o] = lead < first[o] ? lead : first[o];
            last[o] = lead > last[o] ? lead : last[o];
        }
    }
    *depth = sn_plan_stream_schedule(g->n_nodes, n, first, last, ex->stream_wait, ex->stream_release);
    sn_free(first);
    sn_free(last);
    return SNUG_OK;
}

int ex_stream_start(sn_exec *ex, sn_err *err) {
    sn_plan_stream *st = &ex->pl.stream;
    if (ex->dry || st->first_layer >= st->n_layers)
        return SNUG_OK;
    const sn_graph *g = ex->g;
    /* what planning read through the file map of a streamed weight goes */
    for (int v = 0; v < g->n_values; v++)
        if (ex->pl.values[v].storage == SN_STORE_STREAMED)
            sn_model_release_bytes(g->model, g->values[v].init->t.data, ex->pl.values[v].size);
    SN_TRY(ex_prefetch_new(g, &ex->pl, &ex->pf, err));
    int need = 2;
    int rc = stream_schedule(ex, ex_prefetch_count(ex->pf), &need, err);
    if (rc == SNUG_OK && need > st->depth) { /* layers read out of order: a deeper ring, said */
        sn_log(ex->log, SNUG_LOG_WARN,
               "weight streaming: the streamed layers' readers interleave: %d staging slots instead of %d", need,
               st->depth);
        st->depth = need;
        st->staging_bytes = (size_t)need * st->slot_bytes;
        st->total = st->fixed + st->resident_weights + st->staging_bytes;
        ex_prefetch_free(ex->pf);
        ex->pf = NULL;
        rc = ex_prefetch_new(g, &ex->pl, &ex->pf, err);
    }
    if (rc != SNUG_OK) {
        ex_prefetch_free(ex->pf);
        ex->pf = NULL;
    }
    return rc;
}
