/* Executor: plan (fold, infer, prepare, place) then run. See exec.h. */
#include <string.h>
#include <time.h>

#include "backends/backend.h"
#include "exec/exec.h"
#include "plan/estimate.h"

/* A persistent state buffer (sn_exec_add_state): outlives plans and runs. */
typedef struct sn_exec_state {
    int in_v;    /* the graph input value it feeds */
    int out_v;   /* the graph output value written into it, -1 if none */
    void *data;  /* owned: from the backend, zeroed when added */
    size_t cap;  /* bytes */
} sn_exec_state;

struct sn_exec {
    const sn_graph *g;       /* borrowed */
    sn_plan pl;              /* the current plan (arrays owned): every value's storage, buffer, offset,
                              * alias and lifetime, every node's device, mode, group and workspace */
    struct sn_exec *parent;  /* borrowed: executor of the enclosing graph */
    sn_pool *pool;           /* borrowed */
    const sn_logger *log;    /* borrowed */
    sn_tensor *vals;         /* owned [n_values]: infos and data of the current run */
    void **nstate;           /* owned [n_nodes]: prepared kernel state */
    const sn_tensor **gin;   /* owned scratch: SN_GROUP_MAX argument arrays for a group */
    sn_tensor **gout;
    struct sn_exec **sub;    /* owned [sum of n_sub]: child executors, created lazily */
    int *sub_base;           /* owned [n_nodes]: index of node i's first child in sub */
    void **init_copy;        /* owned [n_values]: aligned copies of misaligned initializers */
    const sn_kernel **kern;  /* owned [n_nodes]: how node i is computed, from its device's backend */
    sn_backend backends[SN_MAX_DEVICES]; /* owned [n_backends]: the devices a plan may use; 0 is the host
                              * (the CPU), where every node runs until placement assigns devices */
    int n_backends;
    uint8_t *buf[SN_MAX_DEVICES]; /* owned: the plan's buffers (activation arenas), from their devices' backends */
    size_t buf_cap[SN_MAX_DEVICES];
    int buf_dev[SN_MAX_DEVICES];   /* the backend each came from */
    void **folded;           /* owned: blocks of folded values */
    int n_folded, cap_folded;
    void **dyn;              /* owned: blocks allocated during the current run */
    int n_dyn, cap_dyn;
    sn_tensor *sig;          /* owned [n_sig]: shapes the plan was made for */
    int n_sig;
    bool planned;
    bool bounded;            /* plan made at input bounds: runs re-infer within it */
    bool planning_bounds;    /* sn_exec_set_bounds is planning */
    sn_tensor *bounds;       /* owned [n_inputs]: the planned bounds (sn_exec_set_bounds) */
    uint8_t *vdep;           /* owned [n_values]: folded value that depends on input shapes */
    size_t *vcap;            /* owned [n_values]: bytes planned for the value */
    uint32_t *nreplaces;     /* owned [n_nodes]: prepare's replaces mask (sn_prep_ctx) */
    uint8_t *copy_dropped;   /* owned [n_values]: aligned copy freed (every reader replaced it); made
                              * again by the next plan */
    size_t *copy_released;   /* owned [n_values]: bytes of that block handed back while packing */
    bool no_groups;          /* snug.node_groups=0: sn_plan_groups forms none */
    bool strict_ws;          /* session.strict_workspace_verification: Level 2 over Level 1 is an error */
    enum { EX_FOLD, EX_PREPARE } stage; /* the planning pass under way (drop_unread_inputs) */
    int prepared_upto;       /* static nodes up to this one are prepared */
    bool weights_load;       /* snug.weights=load: every weight a kernel reads is read from the file
                              * into owned memory, nothing of the file is mapped (sn_exec_set_weights_load) */
    int prep_node;           /* node being prepared (release_cb) */
    bool dry;                /* sn_exec_estimate_bounds: plan without preparing, allocating or releasing */
    size_t dry_state;        /* its sum of the prepared state kernels would hold */
    const sn_tensor **argin; /* owned scratch for kernel arguments */
    sn_tensor **argout;
    int arg_cap;
    int cur_node;            /* node being run (for subgraph calls) */
    double *node_time;       /* not owned, or NULL: seconds per node, added to (sn_exec_time_nodes) */
    double t_mark;           /* node timing: when node t_node began */
    int t_node;
    sn_exec_state *states;   /* owned [n_states] */
    int *vstate;             /* owned [n_values]: the state a value feeds or is written into, -1 if none */
    int n_states;
    sn_exec_stats stats;
    int last_row_node;       /* sn_exec_set_last_row: this node reads input 0's last position only, or -1 */
    sn_tensor last_row;      /* the view of it bound in place of input 0 */
};

/* Node n's argument arrays: its input and output values, NULL where absent. */
static void bind_args(sn_exec *ex, const sn_node *n, const sn_tensor **in, sn_tensor **out) {
    for (int j = 0; j < n->n_in; j++)
        in[j] = n->in[j] >= 0 ? &ex->vals[n->in[j]] : NULL;
    for (int j = 0; j < n->n_out; j++)
        out[j] = n->out[j] >= 0 ? &ex->vals[n->out[j]] : NULL;
    if (ex->last_row_node >= 0 && n == &ex->g->nodes[ex->last_row_node] && in[0]) {
        /* [1, S, H] seen as its last position [1, 1, H]: every inference,
         * prepare and run of the node sees only that row */
        const sn_tensor *x = in[0];
        sn_tensor *v = &ex->last_row;
        *v = *x;
        if (x->kind == SN_KIND_TENSOR && x->rank == 3 && x->dims[0] == 1 && x->dims[1] > 1) {
            v->dims[1] = 1;
            if (x->data)
                v->data = (uint8_t *)x->data + (size_t)(x->dims[1] - 1) * (size_t)x->dims[2] * sn_dtype_size(x->dtype);
        }
        in[0] = v;
    }
}

static void plan_release(sn_exec *ex);

int sn_exec_set_last_row(sn_exec *ex, int node, sn_err *err) {
    const sn_graph *g = ex->g;
    if (node < 0 || node >= g->n_nodes || g->nodes[node].n_in < 1 || g->nodes[node].in[0] < 0 ||
        (g->nodes[node].op->flags & (SN_OP_VIEW0 | SN_OP_INPLACE0)) || g->nodes[node].n_sub)
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "last row: node %d cannot read a view of its input 0", node);
    ex->last_row_node = node;
    plan_release(ex); /* the next plan sees the view */
    return SNUG_OK;
}

int sn_exec_last_row(const sn_exec *ex) { return ex->last_row_node; }


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
static void *dyn_alloc(sn_exec *ex, size_t bytes) { return listed_alloc(&ex->dyn, &ex->n_dyn, &ex->cap_dyn, bytes); }

static void dyn_release(sn_exec *ex) {
    for (int i = 0; i < ex->n_dyn; i++)
        sn_free(ex->dyn[i]);
    ex->n_dyn = 0;
}

/* Memory of folded values, released with the plan. */
static void *folded_alloc(sn_exec *ex, size_t bytes) {
    return listed_alloc(&ex->folded, &ex->n_folded, &ex->cap_folded, bytes);
}

static void plan_release(sn_exec *ex) {
    const sn_graph *g = ex->g;
    for (int i = 0; i < g->n_nodes; i++) {
        if (ex->nstate[i] && ex->kern[i]->free_state)
            ex->kern[i]->free_state(ex->nstate[i]);
        ex->nstate[i] = NULL;
    }
    for (int i = 0; i < ex->n_folded; i++)
        sn_free(ex->folded[i]);
    ex->n_folded = 0;
    ex->planned = false;
    for (int v = 0; ex->pl.values && v < g->n_values; v++)
        ex->pl.values[v].released = false;
    if (ex->nreplaces)
        memset(ex->nreplaces, 0, sizeof *ex->nreplaces * (size_t)g->n_nodes);
    for (int i = 0; ex->pl.nodes && i < g->n_nodes; i++)
        ex->pl.nodes[i].state_bytes = 0;
}

/* Copies of a page or more are whole pages of their own: a kernel packing
 * the weight can hand back each part once packed (release_cb), and freeing
 * the copy returns its pages to the system (a freed heap block may stay
 * resident in the allocator's free lists: 3 MiB of SmolLM2's 55 KiB k and v
 * projections once they were tiled). */
#define SN_PAGES_MIN ((size_t)4 << 10)
static bool copy_in_pages(size_t nb) { return nb >= SN_PAGES_MIN; }

/* Initializer v in owned, aligned memory: the aligned copy of a misaligned
 * weight (copied in chunks whose source pages are released as soon as they
 * are copied), or under snug.weights=load any weight, read from the file
 * without mapping it. */
static int copy_init(sn_exec *ex, int v, sn_err *err) {
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

static void copy_free(sn_exec *ex, int v) {
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

void sn_exec_set_groups(sn_exec *ex, bool on) { ex->no_groups = !on; }

void sn_exec_set_strict_workspace(sn_exec *ex, bool on) { ex->strict_ws = on; }

static bool host_reads_file(const void *ctx, const sn_tensor *t) {
    const sn_exec *ex = ctx;
    return ex && ex->weights_load && t->data && sn_model_maps(ex->g->model, t->data, sn_tensor_nbytes(t));
}

static int host_read_const(const void *ctx, void *dst, const void *src, size_t n, sn_err *err) {
    const sn_exec *ex = ctx;
    int e = sn_model_read(ex->g->model, dst, src, n);
    if (e) {
        const char *file = sn_model_file_of(ex->g->model, src, n);
        return sn_errf(err, SNUG_ERR_IO, "cannot read %zu bytes of a weight from '%s': %s", n,
                       file ? file : ex->g->model->path, strerror(e));
    }
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
    size_t nv = (size_t)g->n_values + 1, nn = (size_t)g->n_nodes + 1;
    int n_sub = 0, arg = 1;
    for (int i = 0; i < g->n_nodes; i++) {
        n_sub += g->nodes[i].n_sub;
        arg = g->nodes[i].n_in > arg ? g->nodes[i].n_in : arg;
        arg = g->nodes[i].n_out > arg ? g->nodes[i].n_out : arg;
    }
    ex->arg_cap = arg;
    ex->vals = sn_calloc(nv, sizeof *ex->vals);
    ex->pl.values = sn_calloc(nv, sizeof *ex->pl.values);
    ex->pl.nodes = sn_calloc(nn, sizeof *ex->pl.nodes);
    ex->pl.buffers = sn_calloc(SN_MAX_DEVICES, sizeof *ex->pl.buffers);
    ex->pl.shapes = sn_calloc((size_t)g->n_inputs + 1, sizeof *ex->pl.shapes);
    ex->pl.n_values = g->n_values;
    ex->pl.n_nodes = g->n_nodes;
    ex->pl.n_inputs = g->n_inputs;
    ex->nstate = sn_calloc(nn, sizeof *ex->nstate);
    ex->gin = sn_calloc((size_t)arg * SN_GROUP_MAX, sizeof *ex->gin);
    ex->gout = sn_calloc((size_t)arg * SN_GROUP_MAX, sizeof *ex->gout);
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
    if (!ex->vals || !ex->pl.values || !ex->pl.nodes || !ex->pl.buffers || !ex->pl.shapes || !ex->nstate ||
        !ex->sub_base || !ex->sub || !ex->argin || !ex->argout || !ex->sig || !ex->init_copy || !ex->vdep ||
        !ex->vcap || !ex->bounds || !ex->copy_dropped || !ex->vstate || !ex->nreplaces || !ex->copy_released ||
        !ex->gin || !ex->gout || !ex->kern) {
        sn_exec_free(ex);
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    }
    for (size_t v = 0; v < nv; v++)
        ex->vstate[v] = -1;
    for (int i = 0; i < g->n_nodes; i++) /* every node on the host until placement assigns devices */
        if (!(ex->kern[i] = sn_backend_kernel(&ex->backends[0], &g->nodes[i]))) {
            const sn_node *n = &g->nodes[i];
            int rc = sn_kfail(err, n, SNUG_ERR_UNSUPPORTED, "no %s kernel for this op", ex->backends[0].ops->name);
            sn_exec_free(ex);
            return rc;
        }
    ex->last_row_node = -1;
    for (int i = 0, b = 0; i < g->n_nodes; i++) {
        ex->sub_base[i] = b;
        b += g->nodes[i].n_sub;
    }
    /* Weights the loader left misaligned in the file map get one aligned
     * copy, made by the first plan (copy_init) in chunks whose source pages
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
        plan_release(ex);
    dyn_release(ex);
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
            copy_free(ex, v);
    sn_free(ex->init_copy);
    sn_free(ex->kern);
    sn_free(ex->copy_released);
    sn_free(ex->vdep);
    sn_free(ex->vcap);
    sn_free(ex->vstate);
    sn_free(ex->nreplaces);
    sn_free(ex->copy_dropped);
    sn_free(ex->bounds);
    for (int b = 0; b < SN_MAX_DEVICES; b++)
        if (ex->buf[b])
            ex->backends[ex->buf_dev[b]].ops->buffer_free(ex->backends[ex->buf_dev[b]].ctx, ex->buf[b]);
    for (int k = 0; k < ex->n_states; k++)
        ex->backends[0].ops->buffer_free(ex->backends[0].ctx, ex->states[k].data);
    sn_free(ex->states);
    for (int b = 0; b < ex->n_backends; b++)
        sn_backend_free(&ex->backends[b]);
    sn_free(ex->folded);
    sn_free(ex->dyn);
    sn_free(ex);
}

const sn_exec_stats *sn_exec_get_stats(const sn_exec *ex) { return &ex->stats; }
int sn_exec_threads(const sn_exec *ex) { return sn_pool_size(ex->pool); }

/* ---- planning -------------------------------------------------------- */

static bool sig_equal(const sn_tensor *a, const sn_tensor *b) {
    if (a->kind != b->kind || a->dtype != b->dtype || a->optional != b->optional)
        return false;
    if (a->kind == SN_KIND_SEQUENCE)
        return a->n_items == b->n_items;
    return sn_shape_equal(a, b);
}

static void init_out_info(sn_tensor *t) {
    memset(t, 0, sizeof *t);
    t->rank = SN_RANK_UNKNOWN;
}

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

static int call_kernel(sn_exec *ex, const sn_node *n, void *state, void *ws, sn_err *err);

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
        if (!(t->data = folded_alloc(ex, ex->vcap[v])))
            return sn_errf(err, SNUG_ERR_OOM, "out of memory folding constants");
    }
    void *state = NULL, *ws = NULL;
    size_t wsb = 0;
    if (ex->kern[n->index]->prepare) {
        bind_args(ex, n, ex->argin, ex->argout);
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
    int rc = call_kernel(ex, n, state, ws, err);
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

/* The state value v feeds (a graph input) or is written into (an output). */
static sn_exec_state *state_of(const sn_exec *ex, int v) {
    return ex->vstate[v] >= 0 ? &ex->states[ex->vstate[v]] : NULL;
}

/* A state's output is computed into the state buffer instead of the arena. */
static int plan_state_output(sn_exec *ex, const sn_exec_state *st, sn_err *err) {
    int v = st->out_v;
    if (v < 0 || (ex->pl.values[v].storage != SN_STORE_ARENA && ex->pl.values[v].storage != SN_STORE_DYNAMIC))
        return SNUG_OK;
    if (ex->pl.values[v].storage == SN_STORE_ARENA && sn_tensor_nbytes(&ex->vals[v]) > st->cap) {
        char b[160];
        return sn_errf(err, SNUG_ERR_RANGE, "output '%s' %s needs %zu bytes, more than its %zu-byte state buffer",
                       ex->g->values[v].name, sn_shape_str(&ex->vals[v], b, sizeof b),
                       sn_tensor_nbytes(&ex->vals[v]), st->cap);
    }
    ex->pl.values[v].storage = SN_STORE_STATE;
    ex->vals[v].data = st->data;
    ex->vcap[v] = st->cap;
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
static void drop_unread_inputs(sn_exec *ex, const sn_node *n, int i) {
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
            copy_free(ex, v);
            ex->copy_dropped[v] = 1;
            /* Back to the bytes in the file map (never read: every reader is
             * done with it), so that run-time re-inference still sees a
             * constant (a kernel's Level-1 estimate may depend on it). */
            ex->vals[v].data = (void *)g->values[v].init->t.data;
        } else if (sn_model_maps(g->model, ex->vals[v].data, nb)) {
            sn_model_release_bytes(g->model, ex->vals[v].data, nb);
        } else {
            continue; /* decoded at load: the model owns it */
        }
        ex->pl.values[v].released = 1;
        ex->stats.released_bytes += nb;
    }
}

/* Pages released while planning come back when a neighbour is read: a
 * read fault maps the whole aligned window around it from the page cache.
 * Once every kernel is prepared, the mapped bytes no run reads (released
 * constants, sources of aligned copies) are released once more. */
static void sweep_released(sn_exec *ex) {
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
static void release_cb(void *ctx, const void *p, size_t n) {
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

/* ---- planning: the stages (plan/plan.h) -------------------------------- */

/* Infer and fold, the one stage that runs kernels: every node in order is
 * inferred from its inputs' infos; a node whose inputs are all constant
 * (and whose outputs are small) is computed now (folded); the others run
 * with planned (static) or run-time (dynamic) shapes. Fills the plan's
 * value storage, alias, info and size and its node modes. */
static int infer_fold(sn_exec *ex, sn_err *err) {
    const sn_graph *g = ex->g;
    int rc = SNUG_OK;
    /* Value kinds and infos for what is known before any node. Graph-input
     * data is hidden while planning: a plan depends on shapes only. */
    for (int v = 0; v < g->n_values; v++) {
        const sn_value *val = &g->values[v];
        if (val->flags & SN_VAL_INIT) {
            ex->pl.values[v].storage = SN_STORE_CONST;
            ex->vals[v] = val->init->t;
            if (ex->init_copy[v])
                ex->vals[v].data = ex->init_copy[v];
        } else if (val->flags & (SN_VAL_INPUT | SN_VAL_OUTER)) {
            ex->pl.values[v].storage = SN_STORE_INPUT;
        } else {
            ex->pl.values[v].storage = SN_STORE_NONE;
            init_out_info(&ex->vals[v]);
        }
        ex->pl.values[v].alias = -1;
    }
    ex->stage = EX_FOLD;
    for (int i = 0; i < g->n_nodes && rc == SNUG_OK; i++) {
        const sn_node *n = &g->nodes[i];
        ex->pl.nodes[i].last_row = i == ex->last_row_node;
        bind_args(ex, n, ex->argin, ex->argout);
        for (int j = 0; j < n->n_out; j++)
            if (ex->argout[j])
                init_out_info(ex->argout[j]);
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
                size_t nb = sn_tensor_nbytes(t);
                if (sn_tensor_numel(t) < 0 || nb > ((size_t)1 << 56)) {
                    char b[256];
                    rc = sn_kfail(err, n, SNUG_ERR_RANGE, "output %d %s %s is too large", j,
                                  sn_dtype_name(t->dtype), sn_shape_str(t, b, sizeof b));
                    break;
                }
                out_bytes += nb;
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
                drop_unread_inputs(ex, n, i);
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

/* Prepare, the executor's side of a plan: every static node's kernel
 * prepared on its device (state, and the Level-2 workspace it declares),
 * each declaration checked once against the Level-1 reservation of the
 * estimate stage: larger is a warning (the memory stage then places the
 * declared figure) or, under session.strict_workspace_verification, an
 * error. Constants every reader is done with are released as it goes. */
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
            bind_args(ex, n, ex->argin, ex->argout);
            sn_prep_ctx pc = {.node = n, .n_in = n->n_in, .n_out = n->n_out, .in = ex->argin,
                              .out = (const sn_tensor *const *)ex->argout, .err = err,
                              .n_threads = sn_pool_size(ex->pool), .release = release_cb, .release_ctx = ex,
                              .long_lived = ex->planning_bounds, .dry = ex->dry};
            ex->prep_node = i;
            SN_TRY(k->prepare(&pc));
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
        }
        if (pn->has_reserve && pn->workspace > pn->ws_reserved) {
            if (ex->strict_ws)
                return sn_kfail(err, n, SNUG_ERR_RANGE, "prepare declared %zu bytes of workspace, more than its "
                                "Level-1 reservation of %zu (session.strict_workspace_verification)",
                                pn->workspace, pn->ws_reserved);
            sn_log(ex->log, SNUG_LOG_WARN, "%s '%s': prepare declared %zu bytes of workspace, more than its Level-1 "
                   "reservation of %zu; the arena is planned with the declared figure", n->p->op_type, n->p->name,
                   pn->workspace, pn->ws_reserved);
        }
        drop_unread_inputs(ex, n, i);
    }
    return SNUG_OK;
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

/* Each buffer of the plan from its device's backend (kept while large
 * enough), and every planned value and workspace bound into it. */
static int bind_buffers(sn_exec *ex, sn_err *err) {
    const sn_graph *g = ex->g;
    for (int b = 0; b < ex->pl.n_buffers; b++) {
        const sn_plan_buffer *pb = &ex->pl.buffers[b];
        const sn_backend *be = &ex->backends[pb->device];
        if (pb->size <= ex->buf_cap[b])
            continue;
        uint8_t *a = be->ops->buffer_alloc(be->ctx, pb->size, err);
        if (!a)
            return sn_errf(err, SNUG_ERR_OOM, "cannot allocate the %zu-byte activation arena on %s", pb->size,
                           be->ops->name);
        if (ex->buf[b])
            ex->backends[ex->buf_dev[b]].ops->buffer_free(ex->backends[ex->buf_dev[b]].ctx, ex->buf[b]);
        ex->buf[b] = a;
        ex->buf_cap[b] = pb->size;
        ex->buf_dev[b] = pb->device;
        /* A plan at input bounds serves many runs: its arena is made
         * resident now (every workspace slot included), so a run never
         * faults in fresh pages and the memory the plan reports is held. */
        if (ex->planning_bounds)
            SN_TRY(zero_buffer(be, a, pb->size, err));
    }
    for (int v = 0; v < g->n_values; v++) {
        const sn_plan_value *pv = &ex->pl.values[v];
        if (pv->storage != SN_STORE_ARENA)
            continue;
        ex->vals[v].data = ex->buf[pv->buffer] + pv->offset;
        ex->vcap[v] = pv->size;
    }
    return SNUG_OK;
}

/* A plan for the shapes now in ex->vals (graph inputs and outer values):
 * the stages in order, then prepared and bound. An estimate (ex->dry)
 * stops before any buffer is allocated. */
static int plan_for(sn_exec *ex, sn_err *err) {
    const sn_graph *g = ex->g;
    plan_release(ex);
    for (int v = 0; v < g->n_values && !ex->dry; v++) { /* an estimate reads no weight */
        if (ex->copy_released[v]) { /* partly handed back by a plan that failed after packing it */
            copy_free(ex, v);
            ex->copy_dropped[v] = 1;
        }
        if (ex->copy_dropped[v]) /* copies a previous plan's kernels no longer needed */
            SN_TRY(copy_init(ex, v, err));
    }
    int n_plans = ex->stats.n_plans + 1;
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
    uint8_t *groupable = NULL;
    int rc = infer_fold(ex, err);
    if (rc == SNUG_OK)
        rc = sn_plan_assign(&ex->pl, g, ex->backends, ex->n_backends, err);
    if (rc == SNUG_OK && !(groupable = sn_calloc((size_t)g->n_nodes + 1, 1)))
        rc = sn_errf(err, SNUG_ERR_OOM, "out of memory");
    for (int i = 0; i < g->n_nodes && rc == SNUG_OK; i++) {
        const sn_node *n = &g->nodes[i];
        if (!(ex->kern[i] = sn_backend_kernel(&ex->backends[ex->pl.nodes[i].device], n)))
            rc = sn_kfail(err, n, SNUG_ERR_UNSUPPORTED, "no %s kernel for this op",
                          ex->backends[ex->pl.nodes[i].device].ops->name);
        else
            groupable[i] = ex->kern[i]->run_group != NULL;
    }
    if (rc == SNUG_OK)
        sn_plan_groups(&ex->pl, g, groupable, !ex->no_groups);
    sn_free(groupable);
    if (rc == SNUG_OK)
        rc = sn_plan_reserve(&ex->pl, g, err);
    if (rc == SNUG_OK)
        rc = prepare_kernels(ex, err);
    for (int v = 0; v < g->n_values; v++)
        if ((g->values[v].flags & (SN_VAL_INPUT | SN_VAL_OUTER)) && !(g->values[v].flags & SN_VAL_INIT))
            ex->vals[v].data = saved[v];
    sn_free(saved);
    if (rc == SNUG_OK)
        sweep_released(ex);
    if (rc == SNUG_OK)
        rc = sn_plan_memory(&ex->pl, g, err);
    if (rc == SNUG_OK && !ex->dry)
        rc = bind_buffers(ex, err);
    if (rc != SNUG_OK) {
        plan_release(ex);
        return rc;
    }
    ex->stats.arena_bytes = 0;
    ex->stats.lower_bound = 0;
    for (int b = 0; b < ex->pl.n_buffers; b++) {
        ex->stats.arena_bytes += ex->pl.buffers[b].size;
        ex->stats.lower_bound += ex->pl.buffers[b].lower_bound;
    }
    ex->stats.n_inplace = ex->pl.n_inplace;
    ex->stats.n_grouped = ex->pl.n_grouped;
    ex->pl.n_static = ex->stats.n_static;
    ex->pl.n_dynamic = ex->stats.n_dynamic;
    ex->pl.n_folded = ex->stats.n_folded;
    ex->pl.folded_bytes = ex->stats.folded_bytes;
    ex->pl.state_bytes = ex->stats.kernel_state_bytes;
    ex->pl.persistent_bytes = ex->stats.persistent_bytes;
    ex->planned = !ex->dry;
    return SNUG_OK;
}

/* Node i's workspace slot, or NULL. */
static void *ws_of(const sn_exec *ex, int i) {
    const sn_plan_node *pn = &ex->pl.nodes[i];
    return pn->workspace && pn->ws_buffer >= 0 ? ex->buf[pn->ws_buffer] + pn->ws_offset : NULL;
}

/* ---- running --------------------------------------------------------- */

/* Node n's context: in and out bound to its values, its state and workspace. */
static const sn_host k_host;

static sn_kctx kctx_of(sn_exec *ex, const sn_node *n, const sn_tensor **in, sn_tensor **out, void *state,
                       void *ws, sn_err *err) {
    bind_args(ex, n, in, out);
    return (sn_kctx){.node = n, .n_in = n->n_in, .n_out = n->n_out, .in = in, .out = out, .state = state,
                     .ws = ws, .pool = ex->pool, .host = &k_host, .host_ctx = ex, .err = err};
}

static int call_kernel(sn_exec *ex, const sn_node *n, void *state, void *ws, sn_err *err) {
    sn_kctx kc = kctx_of(ex, n, ex->argin, ex->argout, state, ws, err);
    ex->cur_node = n->index;
    return ex->kern[n->index]->run(&kc);
}

static int reinfer_node(sn_exec *ex, const sn_node *n, sn_err *err);

/* The group node i leads (group_size members from i on), each member with
 * its own arguments, state and workspace; reinfer: a bounded plan's run
 * (every member's outputs inferred again first). */
static int run_group(sn_exec *ex, int i, bool reinfer, sn_err *err) {
    const sn_graph *g = ex->g;
    int n = ex->pl.nodes[i].group_size;
    sn_kctx kc[SN_GROUP_MAX], *cs[SN_GROUP_MAX];
    for (int m = 0; m < n; m++) {
        const sn_node *nd = &g->nodes[i + m];
        if (reinfer)
            SN_TRY(reinfer_node(ex, nd, err));
        kc[m] = kctx_of(ex, nd, ex->gin + (size_t)m * (size_t)ex->arg_cap, ex->gout + (size_t)m * (size_t)ex->arg_cap,
                        ex->nstate[i + m], ws_of(ex, i + m), err);
        cs[m] = &kc[m];
    }
    ex->cur_node = i;
    return ex->kern[i]->run_group(cs, n);
}

static int run_dynamic(sn_exec *ex, const sn_node *n, sn_err *err) {
    bind_args(ex, n, ex->argin, ex->argout);
    for (int j = 0; j < n->n_out; j++)
        if (ex->argout[j])
            init_out_info(ex->argout[j]);
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
            size_t nb = sn_tensor_nbytes(t);
            if (sn_tensor_numel(t) < 0 || nb > ((size_t)1 << 56))
                return sn_kfail(err, n, SNUG_ERR_RANGE, "output %d is too large", j);
            if (ex->pl.values[n->out[j]].storage == SN_STORE_STATE) {
                if (nb > ex->vcap[n->out[j]])
                    return sn_kfail(err, n, SNUG_ERR_RANGE, "output %d needs %zu bytes, more than its %zu-byte "
                                    "state buffer", j, nb, ex->vcap[n->out[j]]);
                t->data = state_of(ex, n->out[j])->data;
                continue;
            }
            if (j == 0 && (n->op->flags & SN_OP_VIEW0) && ex->argin[0] && ex->argin[0]->data &&
                sn_tensor_nbytes(ex->argin[0]) == nb && ex->argin[0]->dtype == t->dtype) {
                t->data = ex->argin[0]->data;
                continue;
            }
            if (!(t->data = dyn_alloc(ex, nb)))
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
        if (pc.workspace && !(ws = dyn_alloc(ex, pc.workspace))) {
            if (state && ex->kern[n->index]->free_state)
                ex->kern[n->index]->free_state(state);
            return sn_kfail(err, n, SNUG_ERR_OOM, "out of memory for workspace");
        }
    }
    int rc = call_kernel(ex, n, state, ws, err);
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
    bind_args(ex, n, ex->argin, ex->argout);
    for (int j = 0; j < n->n_out; j++) {
        if (ex->argout[j]) {
            keep[j] = ex->argout[j]->data;
            init_out_info(ex->argout[j]);
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
    if (n->op->estimate && ex->pl.nodes[n->index].mode == SN_MODE_STATIC) {
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

int sn_exec_estimate_bounds(sn_exec *ex, const sn_tensor *bounds, sn_exec_estimate *e, uint8_t *gone,
                            sn_err *err) {
    const sn_graph *g = ex->g;
    memset(e, 0, sizeof *e);
    sn_exec_stats saved = ex->stats;
    sn_tensor *in = sn_calloc((size_t)g->n_inputs + 1, sizeof *in);
    if (!in)
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    for (int i = 0; i < g->n_inputs; i++) {
        in[i] = bounds[i];
        in[i].data = NULL;
    }
    ex->dry = true;
    ex->dry_state = 0;
    ex->planning_bounds = true;
    int rc = sn_exec_plan(ex, in, err);
    ex->planning_bounds = false;
    ex->dry = false;
    if (rc == SNUG_OK) {
        e->arena = ex->stats.arena_bytes;
        e->lower_bound = ex->stats.lower_bound;
        e->folded = ex->stats.folded_bytes;
        e->state = ex->dry_state;
        e->n_static = ex->stats.n_static;
        e->n_dynamic = ex->stats.n_dynamic;
        if (gone)
            for (int v = 0; v < g->n_values; v++)
                gone[v] = ex->pl.values[v].released;
    }
    plan_release(ex); /* nothing prepared; the folded blocks go */
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
    int rc = sn_exec_plan(ex, ex->bounds, err);
    ex->planning_bounds = false;
    SN_TRY(rc);
    ex->bounded = true;
    return SNUG_OK;
}

/* The one run loop: every node of the plan in order. A plan made at input
 * bounds infers each node again for the actual shapes (cheap) and computes
 * into the buffers planned at the bounds; shape computations folded at plan
 * time are recomputed when they read an input shape. Nothing is allocated,
 * except by dynamic nodes. */
static int run_loop(sn_exec *ex, sn_err *err) {
    const sn_graph *g = ex->g;
    bool re = ex->bounded;
    int rc = SNUG_OK;
    for (int i = 0; i < g->n_nodes && rc == SNUG_OK; i++) {
        const sn_node *n = &g->nodes[i];
        const sn_plan_node *pn = &ex->pl.nodes[i];
        if (ex->node_time)
            time_mark(ex, i);
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
                rc = call_kernel(ex, n, NULL, NULL, err);
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
            rc = call_kernel(ex, n, ex->nstate[i], ws_of(ex, i), err);
        }
    }
    if (ex->node_time)
        time_mark(ex, -1);
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
        if (!sig_equal(&ex->sig[k], &ex->vals[v]))
            return sn_errf(err, SNUG_ERR_SHAPE, "input '%s' is %s, the plan was made for %s (plan again, or plan "
                           "once for bounds)", g->values[v].name, sn_shape_str(&ex->vals[v], b1, sizeof b1),
                           sn_shape_str(&ex->sig[k], b2, sizeof b2));
        k++;
    }
    return SNUG_OK;
}

/* A plan for the shapes now bound, as the owner's policy says, when the
 * current plan does not cover them. */
static int plan_if_needed(sn_exec *ex, sn_replan policy, sn_err *err) {
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
    const sn_graph *g = ex->g;
    int k = 0;
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].flags & (SN_VAL_INPUT | SN_VAL_OUTER))
            ex->sig[k++] = ex->vals[v];
    ex->n_sig = k;
    return plan_for(ex, err);
}

/* Graph inputs bound for a run, each checked against its declaration (and
 * its state buffer). */
static int bind_inputs(sn_exec *ex, const sn_tensor *inputs, sn_err *err) {
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
        const sn_exec_state *st = state_of(ex, v);
        if (st) {
            char b[160];
            if (t->kind != SN_KIND_TENSOR || sn_tensor_nbytes(t) > st->cap)
                return sn_errf(err, SNUG_ERR_RANGE, "input '%s' %s needs %zu bytes, more than its %zu-byte state "
                               "buffer", g->values[v].name, sn_shape_str(t, b, sizeof b), sn_tensor_nbytes(t),
                               st->cap);
            ex->vals[v].data = st->data;
        }
        if (t->kind == SN_KIND_TENSOR && !ex->vals[v].data && sn_tensor_numel(t) > 0)
            return sn_errf(err, SNUG_ERR_INVALID_ARG, "input '%s' has no data", g->values[v].name);
    }
    return SNUG_OK;
}

int sn_exec_run(sn_exec *ex, const sn_tensor *inputs, sn_tensor *outputs, sn_err *err) {
    const sn_graph *g = ex->g;
    dyn_release(ex);
    SN_TRY(bind_inputs(ex, inputs, err));
    if (ex->parent) {
        for (int v = 0; v < g->n_values; v++)
            if (g->values[v].flags & SN_VAL_OUTER)
                ex->vals[v] = ex->parent->vals[g->values[v].outer_id];
    }
    SN_TRY(plan_covers(ex, err));
    sn_pool_hot(ex->pool, true); /* the workers wait spinning through the run's serial kernels */
    int rc = run_loop(ex, err);
    sn_pool_hot(ex->pool, false);
    if (rc != SNUG_OK)
        return rc;
    for (int i = 0; i < g->n_outputs; i++)
        outputs[i] = ex->vals[g->outputs[i]];
    return SNUG_OK;
}

int sn_exec_replan_for(sn_exec *ex, const sn_tensor *inputs, sn_replan policy, sn_err *err) {
    SN_TRY(bind_inputs(ex, inputs, err));
    return plan_if_needed(ex, policy, err);
}

int sn_exec_plan(sn_exec *ex, const sn_tensor *inputs, sn_err *err) {
    const sn_graph *g = ex->g;
    for (int i = 0; i < g->n_inputs; i++) {
        ex->vals[g->inputs[i]] = inputs[i];
        ex->vals[g->inputs[i]].data = NULL;
    }
    int k = 0;
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].flags & (SN_VAL_INPUT | SN_VAL_OUTER))
            ex->sig[k++] = ex->vals[v];
    ex->n_sig = k;
    return plan_for(ex, err);
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
    if (state_of(ex, iv))
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "input '%s' is already persistent state", in->name);
    if (bound->kind != SN_KIND_TENSOR || !sn_tensor_shape_known(bound) || bound->dtype != decl->dtype)
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "state '%s': its bound %s %s must be a concrete %s tensor",
                       in->name, sn_dtype_name(bound->dtype), sn_shape_str(bound, b, sizeof b),
                       sn_dtype_name(decl->dtype));
    if (ov >= 0 && !sn_exec_state_shareable(ex, input, output))
        return sn_errf(err, SNUG_ERR_UNSUPPORTED, "output '%s' cannot share a buffer with input '%s': its producer "
                       "must be the input's only reader and write a shared KV cache", g->values[ov].name, in->name);
    size_t cap = sn_tensor_nbytes(bound);
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
    ex->states[ex->n_states++] = (sn_exec_state){iv, ov, data, cap};
    ex->stats.persistent_bytes += cap;
    return SNUG_OK;
}

void *sn_exec_state_data(const sn_exec *ex, int input) {
    const sn_exec_state *st = input >= 0 && input < ex->g->n_inputs ? state_of(ex, ex->g->inputs[input]) : NULL;
    return st ? st->data : NULL;
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

/* ---- host services (sn_host): what kernels may ask of the runner ------- */

static void *host_alloc(void *ctx, size_t bytes) { return dyn_alloc(ctx, bytes); }

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
    }
    sn_exec *se = *slot;
    /* The child's outputs of the previous call are released by this run. */
    for (int i = 0; i < sg->n_inputs; i++) {
        int v = sg->inputs[i];
        se->vals[v] = in[i];
    }
    dyn_release(se);
    for (int v = 0; v < sg->n_values; v++)
        if (sg->values[v].flags & SN_VAL_OUTER)
            se->vals[v] = ex->vals[sg->values[v].outer_id];
    int rc = plan_if_needed(se, SN_REPLAN_AUTO, err); /* the parent's run decides the child's shapes */
    if (rc == SNUG_OK)
        rc = run_loop(se, err);
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
    .run_subgraph = host_run_subgraph,
    .reads_file = host_reads_file,
    .read_const = host_read_const,
};
