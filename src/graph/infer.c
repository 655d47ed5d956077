/* Symbolic type and shape inference over a graph (for reports and early
 * validation). The executor runs the same kernel infer functions on concrete
 * shapes when it plans.
 *
 * Subgraphs are inferred where their node is, after the producers of every
 * value they read (graph.c orders a node after the values its subgraphs
 * read at any depth): a value of an enclosing graph keeps its type, shape
 * and, for an initializer, its data; a Loop or Scan body's inputs with no
 * declared type take it from the node's inputs. A body node whose kernel
 * cannot infer its outputs leaves them unknown (or as declared) and
 * inference goes on: a branch that is never taken may not fit the shapes of
 * the other, and control-flow ops only need the types of a body's outputs. */
#include <string.h>

#include "graph/graph.h"
#include "ops/op.h"

static bool info_concrete(const sn_tensor *t) {
    return t->kind != SN_KIND_TENSOR || sn_tensor_shape_known(t);
}

static void info_unknown(sn_tensor *t) {
    memset(t, 0, sizeof *t);
    t->rank = SN_RANK_UNKNOWN;
}

/* What subgraph input j of node n is fed with, from the node's inputs (in):
 * Loop bodies get the iteration number, the condition and the loop-carried
 * values (their dims may change between iterations: rank only); Scan bodies
 * the states and one slice of each scan input. Unknown (rank unknown, dtype
 * undefined) when the op does not say. */
static void body_input_seed(const sn_node *n, const sn_tensor *const *in, int j, sn_tensor *out) {
    info_unknown(out);
    if (n->p->domain[0])
        return;
    const sn_tensor *src = NULL;
    int drop[2] = {-1, -1}; /* axes of src the body does not see */
    if (!strcmp(n->p->op_type, "Loop")) {
        if (j < 2) {
            out->dtype = j == 0 ? SN_I64 : SN_BOOL;
            out->rank = 0;
            return;
        }
        if (j < n->n_in)
            src = in[j];
        if (src && src->kind == SN_KIND_TENSOR) {
            out->dtype = src->dtype;
            out->rank = src->rank;
            for (int d = 0; d < out->rank; d++)
                out->dims[d] = SN_DIM_UNKNOWN;
            return;
        }
    } else if (!strcmp(n->p->op_type, "Scan")) {
        int first = n->opset < 9 ? 1 : 0;
        int m = (int)sn_attr_int(n, "num_scan_inputs", -1);
        int n_state = n->n_in - first - m;
        if (m < 1 || n_state < 0 || first + j >= n->n_in)
            return;
        src = in[first + j];
        if (first)
            drop[0] = 0; /* the batch axis */
        if (j >= n_state) {
            if (first) {
                drop[1] = 1;
            } else {
                const int64_t *axes = NULL;
                int n_ax = sn_attr_ints(n, "scan_input_axes", &axes);
                int64_t ax = j - n_state < n_ax ? axes[j - n_state] : 0;
                int a;
                if (!src || src->rank < 0 || !sn_axis_norm(ax, src->rank, &a))
                    return;
                drop[0] = a;
            }
        }
    }
    if (!src || src->kind != SN_KIND_TENSOR)
        return;
    out->dtype = src->dtype;
    if (src->rank < 0)
        return;
    int nd = (drop[0] >= 0) + (drop[1] >= 0);
    if (src->rank < nd)
        return;
    out->rank = 0;
    for (int d = 0; d < src->rank; d++)
        if (d != drop[0] && d != drop[1])
            out->dims[out->rank++] = src->dims[d];
}

/* Fills what inference left unknown in t from the declared type decl. */
static void info_from_declared(sn_graph *g, const sn_type *decl, sn_tensor *t) {
    if (!decl || decl->kind == SN_TYPE_UNKNOWN)
        return;
    sn_tensor d;
    if (sn_type_to_info(g, decl, &d) != SNUG_OK)
        return; /* out of memory interning a dim name: the declared shape is only a hint */
    if (t->kind == SN_KIND_TENSOR && t->rank == SN_RANK_UNKNOWN && t->dtype == SN_UNDEFINED) {
        *t = d; /* nothing was inferred: all of the declaration (also sequences, optionals) */
        return;
    }
    if (t->kind != SN_KIND_TENSOR || d.kind != SN_KIND_TENSOR)
        return;
    if (t->dtype == SN_UNDEFINED)
        t->dtype = d.dtype;
    if (t->rank == SN_RANK_UNKNOWN && d.rank >= 0)
        sn_tensor_set_shape(t, d.rank, d.dims);
}

static int infer_graph(sn_graph *g, const sn_tensor *seed, int n_bind, const char *const *dim_names,
                       const int64_t *dim_vals, sn_err *err) {
    int rc = SNUG_OK;
    const sn_tensor **in = NULL;
    sn_tensor **out = NULL;
    sn_tensor *sub_seed = NULL;
    int max_in = 1, max_out = 1, max_sub_in = 1;
    for (int i = 0; i < g->n_nodes; i++) {
        max_in = g->nodes[i].n_in > max_in ? g->nodes[i].n_in : max_in;
        max_out = g->nodes[i].n_out > max_out ? g->nodes[i].n_out : max_out;
        for (int k = 0; k < g->nodes[i].n_sub; k++)
            max_sub_in = g->nodes[i].sub[k]->n_inputs > max_sub_in ? g->nodes[i].sub[k]->n_inputs : max_sub_in;
    }
    in = sn_calloc((size_t)max_in, sizeof *in);
    out = sn_calloc((size_t)max_out, sizeof *out);
    sub_seed = sn_calloc((size_t)max_sub_in, sizeof *sub_seed);
    if (!in || !out || !sub_seed) {
        rc = sn_errf(err, SNUG_ERR_OOM, "out of memory");
        goto done;
    }
    for (int v = 0; v < g->n_values; v++) {
        sn_value *val = &g->values[v];
        if (val->flags & SN_VAL_INIT) {
            sn_const_info(&val->info, &val->init->t);
            continue;
        }
        if (val->flags & SN_VAL_OUTER) {
            /* All the enclosing graph knows, data included: inferred values
             * carry none, so it is an initializer's, borrowed from the model. */
            val->info = g->parent->values[val->outer_id].info;
            continue;
        }
        if (val->flags & SN_VAL_INPUT) {
            if ((rc = sn_type_to_info(g, val->declared, &val->info)) != SNUG_OK) {
                rc = sn_errf(err, rc, "out of memory");
                goto done;
            }
            for (int d = 0; d < val->info.rank; d++) {
                int64_t dv = val->info.dims[d];
                if (dv >= SN_DIM_UNKNOWN)
                    continue;
                const sn_graph *root = g;
                while (root->parent)
                    root = root->parent;
                const char *nm = root->syms[SN_DIM_SYM_ID(dv)];
                for (int b = 0; b < n_bind; b++)
                    if (!strcmp(dim_names[b], nm))
                        val->info.dims[d] = dim_vals[b];
            }
            continue;
        }
        info_unknown(&val->info);
    }
    /* What a body's node feeds its inputs, where they declare less. */
    for (int j = 0; seed && j < g->n_inputs; j++) {
        sn_tensor *t = &g->values[g->inputs[j]].info;
        const sn_tensor *s = &seed[j];
        if (t->kind != SN_KIND_TENSOR || s->kind != SN_KIND_TENSOR)
            continue;
        if (t->dtype == SN_UNDEFINED)
            t->dtype = s->dtype;
        if (t->rank == SN_RANK_UNKNOWN && s->rank >= 0)
            sn_tensor_set_shape(t, s->rank, s->dims);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        sn_node *n = &g->nodes[i];
        bool all_concrete = true;
        for (int j = 0; j < n->n_in; j++) {
            in[j] = n->in[j] >= 0 ? &g->values[n->in[j]].info : NULL;
            if (in[j] && !info_concrete(in[j]))
                all_concrete = false;
        }
        for (int j = 0; j < n->n_out; j++) {
            out[j] = n->out[j] >= 0 ? &g->values[n->out[j]].info : NULL;
            if (out[j])
                info_unknown(out[j]);
        }
        /* Subgraphs first: control-flow ops read their bodies' output types. */
        for (int k = 0; k < n->n_sub; k++) {
            const sn_graph *sg = n->sub[k];
            for (int j = 0; j < sg->n_inputs; j++)
                body_input_seed(n, in, j, &sub_seed[j]);
            sn_err sub_err = {0};
            int r = infer_graph(n->sub[k], sub_seed, n_bind, dim_names, dim_vals, &sub_err);
            if (r != SNUG_OK) {
                rc = sn_errf(err, r, "%s", sub_err.msg);
                goto done;
            }
        }
        sn_infer_ctx c = {.node = n, .n_in = n->n_in, .n_out = n->n_out, .in = in, .out = out, .err = err};
        int r = n->op->infer(&c);
        if (r != SNUG_OK) {
            if (r == SNUG_ERR_OOM || (all_concrete && !g->parent)) {
                rc = r;
                goto done;
            }
            /* Symbolic inputs the kernel could not reason about, or a
             * subgraph's node (a branch not taken may not fit): unknown. */
            for (int j = 0; j < n->n_out; j++)
                if (out[j])
                    info_unknown(out[j]);
        }
        for (int j = 0; j < n->n_out; j++) {
            if (!out[j])
                continue;
            out[j]->data = NULL;
            info_from_declared(g, g->values[n->out[j]].declared, out[j]);
        }
    }
done:
    sn_free(in);
    sn_free(out);
    sn_free(sub_seed);
    return rc;
}

int sn_graph_infer(sn_graph *g, int n_bind, const char *const *dim_names, const int64_t *dim_vals,
                   sn_err *err) {
    return infer_graph(g, NULL, n_bind, dim_names, dim_vals, err);
}
