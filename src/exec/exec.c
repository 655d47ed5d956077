/* The executor: creation, options, persistent state and the plan it holds
 * (see exec.h; its files: exec_impl.h). */
#include <string.h>

#include "exec/exec_impl.h"

/* Node n's argument arrays: its input and output values, NULL where absent. */
void ex_bind_args(sn_exec *ex, const sn_node *n, const sn_tensor **in, sn_tensor **out) {
    const int *mir = ex->arg_copy + ex->arg_base[n->index];
    for (int j = 0; j < n->n_in; j++) /* a value held by another device: its copy on this one */
        in[j] = n->in[j] < 0 ? NULL : mir[j] >= 0 ? &ex->mirror[mir[j]] : &ex->vals[n->in[j]];
    for (int j = 0; j < n->n_out; j++)
        out[j] = n->out[j] >= 0 ? &ex->vals[n->out[j]] : NULL;
    if (ex->last_row_node >= 0 && n == &ex->g->nodes[ex->last_row_node] && in[0]) {
        /* [1, S, H] seen as its last position [1, 1, H]: every inference,
         * prepare and run of the node sees only that row */
        const sn_tensor *x = in[0];
        sn_tensor *v = &ex->last_row;
        *v = *x;
        int64_t k = ex->last_rows > 1 ? ex->last_rows : 1;
        if (sn_last_row_applies(x) && x->dims[1] > k) {
            v->dims[1] = k;
            if (x->data)
                v->data = (uint8_t *)x->data + (size_t)(x->dims[1] - k) * (size_t)x->dims[2] * sn_dtype_size(x->dtype);
        }
        in[0] = v;
    }
}

int sn_exec_set_last_row(sn_exec *ex, int node, sn_err *err) {
    const sn_graph *g = ex->g;
    if (node < 0 || node >= g->n_nodes || g->nodes[node].n_in < 1 || g->nodes[node].in[0] < 0 ||
        (g->nodes[node].op->flags & (SN_OP_VIEW0 | SN_OP_INPLACE0)) || g->nodes[node].n_sub)
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "last row: node %d cannot read a view of its input 0", node);
    ex->last_row_node = node;
    ex_plan_release(ex); /* the next plan sees the view */
    return SNUG_OK;
}

int sn_exec_last_row(const sn_exec *ex) { return ex->last_row_node; }

void sn_exec_set_last_rows(sn_exec *ex, int64_t k) { ex->last_rows = k > 1 ? k : 1; }

void sn_exec_set_packed(sn_exec *ex, const sn_packed *p) { ex->packed = p; }

/* Zeroed heap memory recorded in a growable list (*list, *n, *cap) so it
 * can be released in one sweep. */
static void *listed_alloc(void ***list, int *n, int *cap, size_t bytes) {
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 32;
        void **d = sn_realloc(*list, sizeof *d * (size_t)nc);
        if (!d)
            return NULL;
        *list = d;
        *cap = nc;
    }
    void *p = sn_calloc(1, bytes ? bytes : 1);
    if (p)
        (*list)[(*n)++] = p;
    return p;
}

/* Memory of the current run (dynamic values), released by the next run. */
void *ex_dyn_alloc(sn_exec *ex, size_t bytes) { return listed_alloc(&ex->dyn, &ex->n_dyn, &ex->cap_dyn, bytes); }

void ex_dyn_release(sn_exec *ex) {
    for (int i = 0; i < ex->n_dyn; i++)
        sn_free(ex->dyn[i]);
    ex->n_dyn = 0;
}

/* Memory of folded values, released with the plan. */
void *ex_folded_alloc(sn_exec *ex, size_t bytes) {
    return listed_alloc(&ex->folded, &ex->n_folded, &ex->cap_folded, bytes);
}

void sn_exec_set_groups(sn_exec *ex, bool on) { ex->no_groups = !on; }

void sn_exec_set_strict_workspace(sn_exec *ex, bool on) { ex->strict_ws = on; }
void sn_exec_set_flush_denormals(sn_exec *ex, bool on) { ex->flush_denormals = on; }

void sn_exec_set_streaming(sn_exec *ex, uint64_t host_budget, int depth, int n_layers) {
    ex->host_budget = host_budget;
    ex->prefetch_depth = depth < 2 ? 2 : depth;
    ex->n_layers = n_layers;
    ex->stream_decided = false;
}

const sn_plan_stream *sn_exec_stream_plan(const sn_exec *ex) { return &ex->pl.stream; }
const sn_plan_stream *sn_exec_stream_decided(const sn_exec *ex) { return &ex->stream; }
bool sn_exec_value_streamed(const sn_exec *ex, int v) { return ex->streamed[v] != 0; }

int sn_exec_stream_probe(sn_exec *ex, double *bytes_per_s, sn_err *err) {
    *bytes_per_s = 0;
    return ex->pf ? ex_prefetch_probe(ex->pf, bytes_per_s, err) : SNUG_OK;
}

int sn_exec_stream_decide(sn_exec *ex, const sn_tensor *bounds, sn_err *err) {
    const sn_graph *g = ex->g;
    sn_tensor *in = ex_shapes_only(g, bounds);
    if (!in)
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    bool pb = ex->planning_bounds;
    ex->planning_bounds = true;
    int rc = ex_stream_decide(ex, in, err);
    ex->planning_bounds = pb;
    sn_free(in);
    return rc;
}

void sn_exec_stream_counts(const sn_exec *ex, sn_exec_stream_stats *out) {
    memset(out, 0, sizeof *out);
    if (ex->pf)
        ex_prefetch_stats(ex->pf, out);
}

sn_fpmode ex_fp_enter(const sn_exec *ex) {
    sn_fpmode saved = sn_fp_get();
    if (ex->flush_denormals)
        sn_fp_set(sn_fp_flushing(saved));
    return saved;
}

void sn_exec_set_limits(sn_exec *ex, const sn_limits *l) { ex->limits = *l; }
const sn_limits *sn_exec_limits(const sn_exec *ex) { return &ex->limits; }

int ex_check_resident(const sn_exec *ex, size_t more, size_t arena, const char *what, sn_err *err) {
    /* Host memory made resident (state zeroed, an arena at bounds touched)
     * beyond the budget would end in the kernel's OOM killer, not in an
     * error: refused first. */
    size_t budget = ex->dry || !ex->limits.mem_budget ? 0 : ex->limits.mem_budget;
    size_t held = ex->stats.persistent_bytes + arena;
    char also[64] = "";
    if (held)
        snprintf(also, sizeof also, ", with the %.1f MiB already held,", (double)held / (1 << 20));
    if (budget && (held > budget || more > budget - held))
        return sn_errf(err, SNUG_ERR_OOM, "%s of %.1f MiB%s is more than the memory budget of %.1f MiB "
                       "(snug.memory_budget; default: the machine's memory): a shorter context, shorter prompt "
                       "chunks or fewer sequences", what, (double)more / (1 << 20), also, (double)budget / (1 << 20));
    /* and what the machine has now (what was made resident before is gone from it) */
    sn_mem_info mi;
    sn_err ignored = {0};
    if (!ex->dry && sn_backend_mem_info(&ex->backends[0], &mi, &ignored) == SNUG_OK && mi.free && more > mi.free)
        return sn_errf(err, SNUG_ERR_OOM, "%s of %.1f MiB is more than the %.1f MiB of memory available now (with "
                       "%.1f MiB of KV cache and arena already held): a shorter context, shorter prompt chunks or "
                       "fewer sequences", what, (double)more / (1 << 20), (double)mi.free / (1 << 20),
                       (double)held / (1 << 20));
    return SNUG_OK;
}

int sn_exec_check_resident(const sn_exec *ex, size_t bytes, const char *what, sn_err *err) {
    return ex_check_resident(ex, bytes, 0, what, err);
}

int ex_check_budget(const sn_exec *ex, const sn_node *n, int j, const sn_tensor *t, sn_err *err) {
    char b[160];
    size_t nb = sn_tensor_nbytes(t);
    /* an estimate reports what a shape would need, a plan refuses it */
    size_t budget = ex->dry || !ex->limits.mem_budget ? (size_t)1 << 56 : ex->limits.mem_budget;
    if (sn_tensor_numel(t) < 0 || nb > ((size_t)1 << 56))
        return sn_kfail(err, n, SNUG_ERR_RANGE, "output %d %s %s is too large", j, sn_dtype_name(t->dtype),
                        sn_shape_str(t, b, sizeof b));
    if (nb > budget)
        return sn_kfail(err, n, SNUG_ERR_RANGE,
                        "output %d %s %s needs %zu bytes, more than the memory budget of %zu bytes "
                        "(snug.memory_budget)", j, sn_dtype_name(t->dtype), sn_shape_str(t, b, sizeof b), nb,
                        budget);
    return SNUG_OK;
}

int sn_exec_new(const sn_graph *g, sn_pool *pool, const sn_logger *log, sn_exec **out, sn_err *err) {
    *out = NULL;
    sn_exec *ex = sn_calloc(1, sizeof *ex);
    if (!ex)
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    ex->g = g;
    ex->pool = pool;
    ex->log = log;
    int brc = sn_backend_new("cpu", &ex->backends[0], err); /* the host, always there */
    if (brc != SNUG_OK) {
        sn_free(ex);
        return brc;
    }
    ex->n_backends = 1;
    ex->limits.max_iterations = SN_MAX_LOOP_ITERATIONS;
    sn_mem_info mi = {0};
    sn_err ignored = {0};
    if (sn_backend_mem_info(&ex->backends[0], &mi, &ignored) == SNUG_OK && mi.total > 0)
        ex->limits.mem_budget = (size_t)mi.total; /* the default: the machine's memory */
    size_t nv = (size_t)g->n_values + 1, nn = (size_t)g->n_nodes + 1;
    int n_sub = 0, arg = 1, n_args = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        n_args += g->nodes[i].n_in;
        n_sub += g->nodes[i].n_sub;
        arg = g->nodes[i].n_in > arg ? g->nodes[i].n_in : arg;
        arg = g->nodes[i].n_out > arg ? g->nodes[i].n_out : arg;
    }
    ex->arg_cap = arg;
    ex->vals = sn_calloc(nv, sizeof *ex->vals);
    ex->pl.values = sn_calloc(nv, sizeof *ex->pl.values);
    ex->pl.nodes = sn_calloc(nn, sizeof *ex->pl.nodes);
    ex->pl.buffers = sn_calloc(SN_MAX_BUFFERS, sizeof *ex->pl.buffers);
    ex->pl.shapes = sn_calloc((size_t)g->n_inputs + 1, sizeof *ex->pl.shapes);
    ex->pl.n_values = g->n_values;
    ex->pl.n_nodes = g->n_nodes;
    ex->pl.n_inputs = g->n_inputs;
    ex->nstate = sn_calloc(nn, sizeof *ex->nstate);
    ex->gin = sn_calloc((size_t)arg * (SN_GROUP_MAX + SN_TAIL_MAX), sizeof *ex->gin);
    ex->gout = sn_calloc((size_t)arg * (SN_GROUP_MAX + SN_TAIL_MAX), sizeof *ex->gout);
    ex->sub_base = sn_calloc(nn, sizeof *ex->sub_base);
    ex->sub = sn_calloc((size_t)n_sub + 1, sizeof *ex->sub);
    ex->argin = sn_calloc((size_t)arg, sizeof *ex->argin);
    ex->argout = sn_calloc((size_t)arg, sizeof *ex->argout);
    ex->sig = sn_calloc((size_t)g->n_values + 1, sizeof *ex->sig);
    ex->init_copy = sn_calloc(nv, sizeof *ex->init_copy);
    ex->kern = sn_calloc(nn, sizeof *ex->kern);
    ex->vdep = sn_calloc(nv, 1);
    ex->vcap = sn_calloc(nv, sizeof *ex->vcap);
    ex->vstate = sn_malloc(nv * sizeof *ex->vstate);
    ex->nreplaces = sn_calloc(nn, sizeof *ex->nreplaces);
    ex->copy_dropped = sn_calloc(nv, 1);
    ex->copy_released = sn_calloc(nv, sizeof *ex->copy_released);
    ex->bounds = sn_calloc((size_t)g->n_inputs + 1, sizeof *ex->bounds);
    ex->streamed = sn_calloc(nv, 1);
    ex->stream_for = sn_calloc((size_t)g->n_inputs + 1, sizeof *ex->stream_for);
    ex->stream_wait = sn_malloc(nn * sizeof *ex->stream_wait);
    ex->stream_release = sn_malloc(nn * sizeof *ex->stream_release);
    ex->arg_copy = sn_malloc(((size_t)n_args + 1) * sizeof *ex->arg_copy);
    ex->arg_base = sn_malloc(nn * sizeof *ex->arg_base);
    ex->state_dev = sn_malloc(nv * sizeof *ex->state_dev);
    ex->keep_out = sn_calloc(nv, 1);
    if (!ex->keep_out || !ex->arg_copy || !ex->arg_base || !ex->state_dev ||
        !ex->vals || !ex->pl.values || !ex->pl.nodes || !ex->pl.buffers || !ex->pl.shapes || !ex->nstate ||
        !ex->sub_base || !ex->sub || !ex->argin || !ex->argout || !ex->sig || !ex->init_copy || !ex->vdep ||
        !ex->vcap || !ex->bounds || !ex->copy_dropped || !ex->vstate || !ex->nreplaces || !ex->copy_released ||
        !ex->gin || !ex->gout || !ex->kern || !ex->streamed || !ex->stream_for || !ex->stream_wait || !ex->stream_release) {
        sn_exec_free(ex);
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    }
    for (size_t v = 0; v < nv; v++)
        ex->vstate[v] = ex->state_dev[v] = -1;
    for (int i = 0, b = 0; i < g->n_nodes; i++) {
        ex->arg_base[i] = b;
        b += g->nodes[i].n_in;
    }
    for (int k = 0; k < n_args; k++)
        ex->arg_copy[k] = -1;
    for (int i = 0; i < g->n_nodes; i++) /* every node on the host until placement assigns devices */
        if (!(ex->kern[i] = sn_backend_kernel(&ex->backends[0], &g->nodes[i]))) {
            const sn_node *n = &g->nodes[i];
            int rc = sn_kfail(err, n, SNUG_ERR_UNSUPPORTED, "no %s kernel for this op", ex->backends[0].ops->name);
            sn_exec_free(ex);
            return rc;
        }
    ex->last_row_node = -1;
    ex->last_rows = 1;
    ex->prefetch_depth = 2;
    ex->ngl = -1;
    for (int i = 0; i < g->n_nodes; i++)
        ex->stream_wait[i] = ex->stream_release[i] = -1;
    for (int i = 0, b = 0; i < g->n_nodes; i++) {
        ex->sub_base[i] = b;
        b += g->nodes[i].n_sub;
    }
    /* Weights the loader left misaligned in the file map get one aligned
     * copy, made by the first plan (ex_copy_init) in chunks whose source pages
     * are released as soon as they are copied: the weights are resident
     * once, and at no moment twice. Gather copies bytes whatever their alignment, so a table only
     * gathered (an embedding) stays mapped and only its selected rows are
     * ever resident. */
    for (int v = 0; v < g->n_values; v++) {
        const sn_init *in = g->values[v].init;
        if ((g->values[v].flags & SN_VAL_INIT) && in && sn_init_misaligned(in) && !sn_value_gathered_only(g, v))
            ex->copy_dropped[v] = 1; /* made by the first plan */
    }
    *out = ex;
    return SNUG_OK;
}

void sn_exec_free(sn_exec *ex) {
    if (!ex)
        return;
    if (ex->nstate)
        ex_plan_release(ex);
    ex_dyn_release(ex);
    if (ex->sub) {
        int n_sub = 0;
        for (int i = 0; i < ex->g->n_nodes; i++)
            n_sub += ex->g->nodes[i].n_sub;
        for (int i = 0; i < n_sub; i++)
            sn_exec_free(ex->sub[i]);
    }
    sn_free(ex->vals);
    sn_free(ex->pl.values);
    sn_free(ex->pl.nodes);
    sn_free(ex->pl.buffers);
    sn_free(ex->pl.shapes);
    sn_free(ex->nstate);
    sn_free(ex->gin);
    sn_free(ex->gout);
    sn_free(ex->sub_base);
    sn_free(ex->sub);
    sn_free(ex->argin);
    sn_free(ex->argout);
    sn_free(ex->sig);
    if (ex->init_copy && ex->copy_released)
        for (int v = 0; v < ex->g->n_values; v++)
            ex_copy_free(ex, v);
    sn_free(ex->init_copy);
    sn_free(ex->kern);
    sn_free(ex->copy_released);
    sn_free(ex->vdep);
    sn_free(ex->vcap);
    sn_free(ex->vstate);
    sn_free(ex->nreplaces);
    sn_free(ex->copy_dropped);
    sn_free(ex->bounds);
    sn_free(ex->streamed);
    sn_free(ex->stream_for);
    sn_free(ex->stream_wait);
    sn_free(ex->stream_release);
    sn_free(ex->dwait);
    sn_free(ex->drelease);
    sn_free(ex->arg_copy);
    sn_free(ex->arg_base);
    sn_free(ex->state_dev);
    sn_free(ex->keep_out);
    sn_free(ex->rule_dev);
    sn_free(ex->want);
    sn_free(ex->rows);
    sn_free(ex->mirror);
    sn_free(ex->pl.copies);
    sn_free(ex->pl.layers);
    for (int b = 0; b < SN_MAX_BUFFERS; b++)
        if (ex->buf[b])
            ex->backends[ex->buf_dev[b]].ops->buffer_free(ex->backends[ex->buf_dev[b]].ctx, ex->buf[b]);
    for (int k = 0; k < ex->n_states; k++)
        ex->backends[ex->states[k].dev].ops->buffer_free(ex->backends[ex->states[k].dev].ctx, ex->states[k].data);
    sn_free(ex->states);
    for (int b = 0; b < ex->n_backends; b++)
        sn_backend_free(&ex->backends[b]);
    sn_free(ex->folded);
    sn_free(ex->dyn);
    sn_free(ex);
}

const sn_exec_stats *sn_exec_get_stats(const sn_exec *ex) { return &ex->stats; }

int sn_exec_threads(const sn_exec *ex) { return sn_pool_size(ex->pool); }

void ex_init_out_info(sn_tensor *t) {
    memset(t, 0, sizeof *t);
    t->rank = SN_RANK_UNKNOWN;
}

/* The state value v feeds (a graph input) or is written into (an output). */
sn_exec_state *ex_state_of(const sn_exec *ex, int v) {
    return ex->vstate[v] >= 0 ? &ex->states[ex->vstate[v]] : NULL;
}

bool sn_exec_state_shareable(const sn_exec *ex, int input, int output) {
    const sn_graph *g = ex->g;
    if (input < 0 || input >= g->n_inputs || output < 0 || output >= g->n_outputs)
        return false;
    /* The output's producer writes into the buffer the input is read from,
     * so it must be the only reader and must declare that it can. */
    const sn_value *in = &g->values[g->inputs[input]];
    int p = g->values[g->outputs[output]].producer;
    if (p < 0 || !(g->nodes[p].op->flags & SN_OP_KV_SHARE) || in->n_cons < 1)
        return false;
    for (int c = 0; c < in->n_cons; c++)
        if (in->cons[c] != p)
            return false;
    /* and the pair must be one the op shares: past key (value) at input 3
     * (4) with present key (value) at output 1 (2) */
    const sn_node *n = &g->nodes[p];
    int ov = g->outputs[output], iv = g->inputs[input];
    for (int j = 1; j <= 2; j++)
        if (j < n->n_out && j + 2 < n->n_in && n->out[j] == ov && n->in[j + 2] == iv)
            return true;
    return false;
}

int sn_exec_add_state(sn_exec *ex, int input, int output, const sn_tensor *bound, sn_err *err) {
    const sn_graph *g = ex->g;
    if (ex->planned)
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "persistent state must be added before the first plan");
    if (input < 0 || input >= g->n_inputs || output < -1 || output >= g->n_outputs)
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "state: input %d / output %d out of range", input, output);
    int iv = g->inputs[input], ov = output >= 0 ? g->outputs[output] : -1;
    const sn_value *in = &g->values[iv];
    const sn_tensor *decl = &in->info;
    char b[160];
    if (ex_state_of(ex, iv))
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "input '%s' is already persistent state", in->name);
    if (bound->kind != SN_KIND_TENSOR || !sn_tensor_shape_known(bound) || bound->dtype != decl->dtype)
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "state '%s': its bound %s %s must be a concrete %s tensor",
                       in->name, sn_dtype_name(bound->dtype), sn_shape_str(bound, b, sizeof b),
                       sn_dtype_name(decl->dtype));
    if (ov >= 0 && !sn_exec_state_shareable(ex, input, output))
        return sn_errf(err, SNUG_ERR_UNSUPPORTED, "output '%s' cannot share a buffer with input '%s': its producer "
                       "must be the input's only reader and write a shared KV cache", g->values[ov].name, in->name);
    size_t cap = sn_tensor_nbytes(bound);
    /* zeroed now, every page touched */
    SN_TRY(ex_check_resident(ex, cap, 0, "the KV cache (persistent state)", err));
    sn_exec_state *ns = sn_realloc(ex->states, sizeof *ns * (size_t)(ex->n_states + 1));
    if (!ns)
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    ex->states = ns;
    void *data = ex->backends[0].ops->buffer_alloc(ex->backends[0].ctx, cap ? cap : 1, err);
    if (!data)
        return sn_errf(err, SNUG_ERR_OOM, "cannot allocate the %zu-byte state buffer of '%s'", cap, in->name);
    memset(data, 0, cap); /* stale rows are masked, but NaN garbage would still poison scores */
    ex->vstate[iv] = ex->n_states;
    if (ov >= 0)
        ex->vstate[ov] = ex->n_states;
    ex->states[ex->n_states++] = (sn_exec_state){iv, ov, data, 0, cap, 0};
    ex->stats.persistent_bytes += cap;
    return SNUG_OK;
}

void *sn_exec_state_data(const sn_exec *ex, int input) {
    const sn_exec_state *st = input >= 0 && input < ex->g->n_inputs ? ex_state_of(ex, ex->g->inputs[input]) : NULL;
    return st && st->dev == 0 ? st->data : NULL;
}

int sn_exec_state_device(const sn_exec *ex, int input) {
    const sn_exec_state *st = input >= 0 && input < ex->g->n_inputs ? ex_state_of(ex, ex->g->inputs[input]) : NULL;
    return st ? st->dev : -1;
}

int sn_exec_add_backend(sn_exec *ex, const char *name, sn_err *err) {
    if (ex->planned || ex->n_states)
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "devices must be added before state and the first plan");
    if (ex->n_backends == SN_MAX_DEVICES)
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "%s: at most %d devices in one session", name, SN_MAX_DEVICES);
    sn_backend b;
    SN_TRY(sn_backend_new(name, &b, err));
    if (b.ops->type == SN_DEVICE_CPU) { /* the host is device 0 already */
        sn_backend_free(&b);
        return SNUG_OK;
    }
    ex->backends[ex->n_backends++] = b;
    return SNUG_OK;
}

int sn_exec_device_count(const sn_exec *ex) { return ex->n_backends; }

size_t sn_exec_state_bytes_on(const sn_exec *ex, int d) {
    size_t n = 0;
    for (int k = 0; k < ex->n_states; k++)
        n += ex->states[k].dev == d ? ex->states[k].cap : 0;
    return n;
}

int sn_exec_keep_output(sn_exec *ex, int output, sn_err *err) {
    if (output < 0 || output >= ex->g->n_outputs)
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "keep output: no output %d", output);
    ex->keep_out[ex->g->outputs[output]] = 1;
    ex->states_anywhere = true;
    ex_plan_release(ex); /* the next plan leaves it where it is made */
    return SNUG_OK;
}

/* n bytes from (device sd, src) to (device dd, dst). */
static int copy_between(sn_exec *ex, int dd, void *dst, int sd, const void *src, size_t n, sn_err *err) {
    if (dd == sd)
        return sn_backend_copy_device(&ex->backends[dd], dst, src, n, err);
    if (sd == 0)
        return sn_backend_tensor_set(&ex->backends[dd], dst, 0, src, n, err);
    if (dd == 0)
        return sn_backend_tensor_get(&ex->backends[sd], src, 0, dst, n, err);
    return sn_errf(err, SNUG_ERR_UNSUPPORTED, "no copy from %s to %s", ex->backends[sd].ops->name,
                   ex->backends[dd].ops->name);
}

static sn_exec_state *state_at(const sn_exec *ex, int input, sn_err *err) {
    sn_exec_state *st = input >= 0 && input < ex->g->n_inputs ? ex_state_of(ex, ex->g->inputs[input]) : NULL;
    if (!st)
        sn_errf(err, SNUG_ERR_INVALID_ARG, "input %d is not persistent state", input);
    return st;
}

int sn_exec_output_to_state(sn_exec *ex, int output, size_t src_off, int input, size_t dst_off, size_t n,
                            sn_err *err) {
    sn_exec_state *st = state_at(ex, input, err);
    if (!st)
        return err->code;
    if (output < 0 || output >= ex->g->n_outputs)
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "no output %d", output);
    int v = ex->g->outputs[output];
    const sn_tensor *t = &ex->vals[v];
    size_t have = t->kind == SN_KIND_TENSOR ? sn_tensor_nbytes(t) : 0;
    if (!t->data || src_off > have || n > have - src_off || dst_off > st->cap || n > st->cap - dst_off)
        return sn_errf(err, SNUG_ERR_RANGE, "output '%s' bytes [%zu, +%zu) into state '%s' at %zu: out of their %zu "
                       "and %zu bytes", ex->g->values[v].name, src_off, n, ex->g->values[st->in_v].name, dst_off, have,
                       st->cap);
    return copy_between(ex, st->dev, (uint8_t *)st->data + dst_off, ex->pl.values[v].device,
                        (const uint8_t *)t->data + src_off, n, err);
}

int sn_exec_state_move(sn_exec *ex, int input, size_t dst_off, size_t src_off, size_t n, sn_err *err) {
    sn_exec_state *st = state_at(ex, input, err);
    if (!st)
        return err->code;
    if (dst_off > st->cap || src_off > st->cap || n > st->cap - dst_off || n > st->cap - src_off)
        return sn_errf(err, SNUG_ERR_RANGE, "state '%s': a move of %zu bytes from %zu to %zu is out of its %zu",
                       ex->g->values[st->in_v].name, n, src_off, dst_off, st->cap);
    uint8_t *b = st->data;
    return sn_backend_copy_device(&ex->backends[st->dev], b + dst_off, b + src_off, n, err);
}

const sn_backend *sn_exec_backend(const sn_exec *ex, int d) {
    return d >= 0 && d < ex->n_backends ? &ex->backends[d] : NULL;
}

int sn_exec_state_window(sn_exec *ex, int input, size_t off, sn_err *err) {
    sn_exec_state *st = input >= 0 && input < ex->g->n_inputs ? ex_state_of(ex, ex->g->inputs[input]) : NULL;
    if (!st)
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "state window: input %d is not persistent state", input);
    if (off >= st->cap)
        return sn_errf(err, SNUG_ERR_RANGE, "state window of '%s': offset %zu is not inside its %zu bytes",
                       ex->g->values[st->in_v].name, off, st->cap);
    st->off = off;
    return SNUG_OK;
}

const sn_tensor *sn_exec_value_info(const sn_exec *ex, int v) { return &ex->vals[v]; }

sn_storage sn_exec_value_storage(const sn_exec *ex, int v, size_t *offset) {
    if (offset)
        *offset = ex->pl.values[v].storage == SN_STORE_ARENA ? ex->pl.values[v].offset : 0;
    return ex->pl.values[v].storage;
}

bool sn_exec_value_released(const sn_exec *ex, int v) { return ex->pl.values[v].released; }

const sn_plan *sn_exec_plan_ref(const sn_exec *ex) { return ex->planned ? &ex->pl : NULL; }

int sn_exec_plan_value(const sn_exec *ex, sn_plan **out, sn_err *err) {
    const sn_graph *g = ex->g;
    *out = NULL;
    if (!ex->planned)
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "no plan: plan the executor first");
    SN_TRY(sn_plan_copy(&ex->pl, out, err));
    sn_plan *p = *out;
    const sn_tensor *shapes = ex->bounded ? ex->bounds : NULL;
    for (int i = 0; i < g->n_inputs; i++) {
        p->shapes[i] = shapes ? shapes[i] : ex->vals[g->inputs[i]];
        p->shapes[i].data = NULL;
    }
    p->at_bounds = ex->bounded;
    p->persistent_bytes = ex->stats.persistent_bytes;
    for (int i = 0; i < g->n_nodes; i++)
        p->nodes[i].layer = g->nodes[i].layer;
    return SNUG_OK;
}

size_t sn_exec_node_workspace(const sn_exec *ex, int i) {
    return ex->pl.nodes[i].mode == SN_MODE_STATIC ? ex->pl.nodes[i].workspace : 0;
}

bool sn_exec_node_folded(const sn_exec *ex, int i) { return ex->pl.nodes[i].mode == SN_MODE_FOLDED; }

bool sn_exec_node_dynamic(const sn_exec *ex, int i) { return ex->pl.nodes[i].mode == SN_MODE_DYNAMIC; }
