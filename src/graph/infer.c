/* Symbolic type and shape inference over a graph (for reports and early
 * validation). The executor runs the same kernel infer functions on concrete
 * shapes when it plans. */
#include <string.h>

#include "graph/graph.h"
#include "ops/op.h"

static bool info_concrete(const sn_tensor *t) {
    return t->kind != SN_KIND_TENSOR || sn_tensor_shape_known(t);
}

int sn_graph_infer(sn_graph *g, int n_bind, const char *const *dim_names, const int64_t *dim_vals,
                   sn_err *err) {
    int rc = SNUG_OK;
    const sn_tensor **in = NULL;
    sn_tensor **out = NULL;
    int max_in = 1, max_out = 1;
    for (int i = 0; i < g->n_nodes; i++) {
        max_in = g->nodes[i].n_in > max_in ? g->nodes[i].n_in : max_in;
        max_out = g->nodes[i].n_out > max_out ? g->nodes[i].n_out : max_out;
    }
    in = sn_calloc((size_t)max_in, sizeof *in);
    out = sn_calloc((size_t)max_out, sizeof *out);
    if (!in || !out) {
        rc = sn_errf(err, SNUG_ERR_OOM, "out of memory");
        goto done;
    }
    for (int v = 0; v < g->n_values; v++) {
        sn_value *val = &g->values[v];
        if (val->flags & SN_VAL_INIT) {
            val->info = val->init->t;
            continue;
        }
        if (val->flags & SN_VAL_OUTER) {
            const sn_graph *p = g->parent;
            val->info = p->values[val->outer_id].info;
            val->info.data = NULL;
            continue;
        }
        if (val->flags & SN_VAL_INPUT) {
            if ((rc = sn_type_to_info(g, val->declared, &val->info)) != SNUG_OK) {
                rc = sn_errf(err, rc, "out of memory");
                goto done;
            }
            for (int d = 0; d < val->info.rank; d++) {
                int64_t dv = val->info.dims[d];
                if (dv > SN_DIM_UNKNOWN)
                    continue;
                if (dv == SN_DIM_UNKNOWN)
                    continue;
                const char *nm = g->syms ? NULL : NULL;
                const sn_graph *root = g;
                while (root->parent)
                    root = root->parent;
                nm = root->syms[SN_DIM_SYM_ID(dv)];
                for (int b = 0; b < n_bind; b++)
                    if (!strcmp(dim_names[b], nm))
                        val->info.dims[d] = dim_vals[b];
            }
            continue;
        }
        memset(&val->info, 0, sizeof val->info);
        val->info.rank = SN_RANK_UNKNOWN;
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
            if (out[j]) {
                memset(out[j], 0, sizeof *out[j]);
                out[j]->rank = SN_RANK_UNKNOWN;
            }
        }
        /* Subgraphs first: control-flow ops read their bodies' output types. */
        for (int k = 0; k < n->n_sub; k++) {
            sn_err sub_err = {0};
            if (sn_graph_infer(n->sub[k], n_bind, dim_names, dim_vals, &sub_err) == SNUG_ERR_OOM) {
                rc = sn_errf(err, SNUG_ERR_OOM, "out of memory");
                goto done;
            }
        }
        sn_infer_ctx c = {n, n->n_in, n->n_out, in, out, err};
        int r = n->op->infer(&c);
        if (r != SNUG_OK) {
            if (all_concrete && r != SNUG_ERR_OOM) {
                rc = r;
                goto done;
            }
            /* Symbolic inputs the kernel could not reason about: unknown. */
            for (int j = 0; j < n->n_out; j++)
                if (out[j]) {
                    memset(out[j], 0, sizeof *out[j]);
                    out[j]->rank = SN_RANK_UNKNOWN;
                }
        }
        for (int j = 0; j < n->n_out; j++) {
            if (!out[j])
                continue;
            out[j]->data = NULL;
            const sn_type *decl = g->values[n->out[j]].declared;
            if (out[j]->rank == SN_RANK_UNKNOWN && decl && decl->kind == SN_TYPE_TENSOR && decl->rank >= 0) {
                sn_dtype dt = out[j]->dtype;
                sn_type_to_info(g, decl, out[j]);
                if (dt != SN_UNDEFINED)
                    out[j]->dtype = dt;
            }
        }
    }
done:
    sn_free(in);
    sn_free(out);
    return rc;
}
