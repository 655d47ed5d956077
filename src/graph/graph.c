/* Graph IR construction: values, node resolution, validation, topological
 * order, subgraphs with outer-scope references. */
#include <stdio.h>
#include <string.h>

#include "core/strmap.h"
#include "graph/graph.h"
#include "ops/op.h"

#define SN_MAX_DEPTH 32

static sn_graph *graph_root(sn_graph *g) {
    while (g->parent)
        g = g->parent;
    return g;
}

int sn_graph_sym(sn_graph *g, const char *name) {
    g = graph_root(g);
    for (int i = 0; i < g->n_syms; i++)
        if (!strcmp(g->syms[i], name))
            return i;
    char **s = sn_realloc(g->syms, sizeof *s * (size_t)(g->n_syms + 1));
    if (!s)
        return -1;
    g->syms = s;
    if (!(s[g->n_syms] = sn_strdup(name)))
        return -1;
    return g->n_syms++;
}

int sn_graph_find(const sn_graph *g, const char *name) { return sn_strmap_get(g->names, name); }

int sn_type_to_info(sn_graph *g, const sn_type *t, sn_tensor *info) {
    memset(info, 0, sizeof *info);
    info->rank = SN_RANK_UNKNOWN;
    if (!t)
        return SNUG_OK;
    if (t->kind == SN_TYPE_OPTIONAL) {
        int rc = sn_type_to_info(g, t->inner, info);
        info->optional = 1;
        return rc;
    }
    if (t->kind == SN_TYPE_SEQUENCE) {
        info->kind = SN_KIND_SEQUENCE;
        info->dtype = t->inner && t->inner->kind == SN_TYPE_TENSOR ? t->inner->elem : SN_UNDEFINED;
        return SNUG_OK;
    }
    if (t->kind != SN_TYPE_TENSOR)
        return SNUG_OK;
    info->dtype = t->elem;
    info->rank = t->rank;
    for (int i = 0; i < t->rank && i < SN_MAX_RANK; i++) {
        if (t->dims[i] >= 0)
            info->dims[i] = t->dims[i];
        else if (t->dim_params[i] && t->dim_params[i][0]) {
            int id = sn_graph_sym(g, t->dim_params[i]);
            if (id < 0)
                return SNUG_ERR_OOM;
            info->dims[i] = SN_DIM_SYM(id);
        } else
            info->dims[i] = SN_DIM_UNKNOWN;
    }
    return SNUG_OK;
}

/* Adds a value; the name must not exist yet. Returns id or -1 (OOM). */
static int add_value(sn_graph *g, const char *name, unsigned flags) {
    int *cap = &g->cap_values;
    if (g->n_values == *cap) {
        int nc = *cap ? *cap * 2 : 64;
        sn_value *v = sn_realloc(g->values, sizeof *v * (size_t)nc);
        if (!v)
            return -1;
        g->values = v;
        *cap = nc;
    }
    int id = g->n_values++;
    sn_value *v = &g->values[id];
    memset(v, 0, sizeof *v);
    v->name = name;
    v->flags = flags;
    v->producer = -1;
    v->outer_id = -1;
    v->info.rank = SN_RANK_UNKNOWN;
    if (sn_strmap_put(g->names, name, id) != SNUG_OK)
        return -1;
    return id;
}

/* Looks a name up in g, then in enclosing graphs; an outer hit creates an
 * SN_VAL_OUTER value in each graph on the way. -1: not found, -2: OOM. */
static int lookup(sn_graph *g, const char *name) {
    int id = sn_strmap_get(g->names, name);
    if (id >= 0 || !g->parent)
        return id;
    int pid = lookup(g->parent, name);
    if (pid < 0)
        return pid;
    id = add_value(g, g->parent->values[pid].name, SN_VAL_OUTER);
    if (id < 0)
        return -2;
    g->values[id].outer_id = pid;
    return id;
}

static int build_graph(const sn_model *m, const sn_pgraph *pg, sn_graph *parent, int depth,
                       sn_graph **out, sn_err *err);

void sn_graph_free(sn_graph *g) {
    if (!g)
        return;
    for (int i = 0; i < g->n_nodes; i++) {
        sn_node *n = &g->nodes[i];
        sn_free(n->in);
        sn_free(n->out);
        sn_free(n->impl);
        for (int j = 0; j < n->n_sub; j++)
            sn_graph_free(n->sub[j]);
        sn_free(n->sub);
        sn_free(n->sub_attr);
    }
    for (int i = 0; i < g->n_values; i++)
        sn_free(g->values[i].cons);
    sn_free(g->values);
    sn_free(g->nodes);
    sn_free(g->inputs);
    sn_free(g->outputs);
    for (int i = 0; i < g->n_syms; i++)
        sn_free(g->syms[i]);
    sn_free(g->syms);
    if (g->names) {
        sn_strmap_clear(g->names);
        sn_free(g->names);
    }
    sn_free(g);
}

static const char *node_label(const sn_pnode *p, int idx, char *buf, size_t cap) {
    if (p->name && p->name[0])
        snprintf(buf, cap, "'%s'", p->name);
    else
        snprintf(buf, cap, "#%d (unnamed %s)", idx, p->op_type);
    return buf;
}

static int build_graph(const sn_model *m, const sn_pgraph *pg, sn_graph *parent, int depth,
                       sn_graph **out, sn_err *err) {
    *out = NULL;
    if (depth > SN_MAX_DEPTH)
        return sn_errf(err, SNUG_ERR_GRAPH, "subgraphs nested deeper than %d", SN_MAX_DEPTH);
    int rc = SNUG_ERR_OOM;
    int *order = NULL, *indeg = NULL, *queue = NULL, *node_of = NULL;
    sn_node *tmp = NULL;
    char lb[300];
    sn_graph *g = sn_calloc(1, sizeof *g);
    if (!g || !(g->names = sn_calloc(1, sizeof *g->names)))
        goto oom;
    g->model = m;
    g->pg = pg;
    g->parent = parent;
    g->depth = depth;

    /* Values: initializers, inputs, then node outputs. */
    for (int i = 0; i < pg->n_init; i++) {
        if (sn_strmap_get(g->names, pg->inits[i].name) >= 0) {
            rc = sn_errf(err, SNUG_ERR_GRAPH, "initializer '%s' defined twice", pg->inits[i].name);
            goto fail;
        }
        int id = add_value(g, pg->inits[i].name, SN_VAL_INIT | SN_VAL_CONST);
        if (id < 0)
            goto oom;
        g->values[id].init = &pg->inits[i];
        g->values[id].info = pg->inits[i].t;
    }
    g->inputs = sn_calloc((size_t)pg->n_input + 1, sizeof *g->inputs);
    g->outputs = sn_calloc((size_t)pg->n_output + 1, sizeof *g->outputs);
    if (!g->inputs || !g->outputs)
        goto oom;
    for (int i = 0; i < pg->n_input; i++) {
        const char *nm = pg->inputs[i].name;
        int id = sn_strmap_get(g->names, nm);
        if (id >= 0) {
            if (g->values[id].flags & SN_VAL_INIT) {
                g->values[id].declared = &pg->inputs[i].type;
                continue; /* an input with a default: the initializer (IR < 4 style) */
            }
            rc = sn_errf(err, SNUG_ERR_GRAPH, "graph input '%s' listed twice", nm);
            goto fail;
        }
        if ((id = add_value(g, nm, SN_VAL_INPUT)) < 0)
            goto oom;
        g->values[id].declared = &pg->inputs[i].type;
        g->inputs[g->n_inputs++] = id;
    }
    tmp = sn_calloc((size_t)pg->n_node + 1, sizeof *tmp);
    node_of = NULL;
    if (!tmp)
        goto oom;
    g->n_nodes = pg->n_node; /* not before: the failure path would walk a NULL g->nodes */
    for (int i = 0; i < pg->n_node; i++) {
        const sn_pnode *p = &pg->nodes[i];
        sn_node *n = &tmp[i];
        n->p = p;
        n->layer = -1;
        n->n_out = p->n_out;
        if (!(n->out = sn_calloc((size_t)p->n_out + 1, sizeof *n->out)))
            goto oom;
        for (int j = 0; j < p->n_out; j++) {
            const char *nm = p->outputs[j];
            n->out[j] = -1;
            if (!nm[0])
                continue;
            int id = sn_strmap_get(g->names, nm);
            if (id >= 0) {
                const sn_value *v = &g->values[id];
                rc = sn_errf(err, SNUG_ERR_GRAPH,
                             "node %s (%s) output '%s' is already %s", node_label(p, i, lb, sizeof lb),
                             p->op_type, nm,
                             v->flags & SN_VAL_INIT ? "an initializer"
                             : v->flags & SN_VAL_INPUT ? "a graph input"
                                                       : "produced by another node");
                goto fail;
            }
            if ((id = add_value(g, nm, 0)) < 0)
                goto oom;
            g->values[id].producer = i; /* original index; remapped after sorting */
            n->out[j] = id;
        }
    }
    /* Resolve ops and inputs. */
    for (int i = 0; i < pg->n_node; i++) {
        const sn_pnode *p = &pg->nodes[i];
        sn_node *n = &tmp[i];
        int64_t opset = sn_model_opset(m, p->domain);
        if (opset < 0) {
            rc = sn_errf(err, SNUG_ERR_GRAPH,
                         "node %s uses op %s of domain '%s', which the model does not import",
                         node_label(p, i, lb, sizeof lb), p->op_type, p->domain);
            goto fail;
        }
        n->opset = opset;
        /* What the op means, from the op table; how a device computes it
         * is the executor's question to the backends. */
        n->op = sn_op_find(p->domain, p->op_type, opset);
        if (!n->op) {
            rc = sn_errf(err, SNUG_ERR_UNSUPPORTED,
                         "unsupported op %s (domain '%s', opset %lld) at node %s",
                         p->op_type, p->domain[0] ? p->domain : "ai.onnx", (long long)opset,
                         node_label(p, i, lb, sizeof lb));
            goto fail;
        }
        n->n_in = p->n_in;
        if (!(n->in = sn_calloc((size_t)p->n_in + 1, sizeof *n->in)))
            goto oom;
        for (int j = 0; j < p->n_in; j++) {
            n->in[j] = -1;
            if (!p->inputs[j][0])
                continue;
            int id = lookup(g, p->inputs[j]);
            if (id == -2)
                goto oom;
            if (id < 0) {
                rc = sn_errf(err, SNUG_ERR_GRAPH, "node %s (%s) input %d '%s' is not defined",
                             node_label(p, i, lb, sizeof lb), p->op_type, j, p->inputs[j]);
                goto fail;
            }
            n->in[j] = id;
        }
        /* The inputs the op's schema requires, before any of its code runs. */
        uint32_t req = n->op->required ? n->op->required & ~SN_IN_NONE : 1u;
        for (int j = 0; req >> j; j++) {
            if (!(req >> j & 1u) || (j < n->n_in && n->in[j] >= 0))
                continue;
            rc = sn_errf(err, SNUG_ERR_GRAPH, "%s node %s: input %d is required, %s", p->op_type,
                         node_label(p, i, lb, sizeof lb), j,
                         j < n->n_in ? "its name is empty" : n->n_in ? "the node lists fewer inputs" : "the node has no inputs");
            goto fail;
        }
        /* and its output 0, which every op's code writes */
        if (!(n->op->flags & SN_OP_OUTPUTS_OPTIONAL) && (n->n_out < 1 || n->out[0] < 0)) {
            rc = sn_errf(err, SNUG_ERR_GRAPH, "%s node %s: output 0 is required, %s", p->op_type,
                         node_label(p, i, lb, sizeof lb), n->n_out ? "its name is empty" : "the node has no outputs");
            goto fail;
        }
    }
    /* Graph outputs. */
    for (int i = 0; i < pg->n_output; i++) {
        int id = lookup(g, pg->outputs[i].name);
        if (id == -2)
            goto oom;
        if (id < 0) {
            rc = sn_errf(err, SNUG_ERR_GRAPH, "graph output '%s' is not produced by any node",
                         pg->outputs[i].name);
            goto fail;
        }
        g->values[id].flags |= SN_VAL_OUTPUT;
        if (!g->values[id].declared)
            g->values[id].declared = &pg->outputs[i].type;
        g->outputs[g->n_outputs++] = id;
    }
    for (int i = 0; i < pg->n_value_info; i++) {
        int id = sn_strmap_get(g->names, pg->value_info[i].name);
        if (id >= 0 && !g->values[id].declared)
            g->values[id].declared = &pg->value_info[i].type;
    }
    /* Subgraphs (they may add OUTER values to g for names of enclosing graphs). */
    for (int i = 0; i < pg->n_node; i++) {
        const sn_pnode *p = &pg->nodes[i];
        sn_node *n = &tmp[i];
        int ns = 0;
        for (int a = 0; a < p->n_attr; a++)
            ns += p->attrs[a].type == SN_ATTR_GRAPH ? 1 : p->attrs[a].type == SN_ATTR_GRAPHS ? p->attrs[a].n : 0;
        if (!ns)
            continue;
        n->sub = sn_calloc((size_t)ns, sizeof *n->sub);
        n->sub_attr = sn_calloc((size_t)ns, sizeof *n->sub_attr);
        if (!n->sub || !n->sub_attr)
            goto oom;
        for (int a = 0; a < p->n_attr; a++) {
            const sn_attr *at = &p->attrs[a];
            int cnt = at->type == SN_ATTR_GRAPH ? 1 : at->type == SN_ATTR_GRAPHS ? at->n : 0;
            for (int k = 0; k < cnt; k++) {
                const sn_pgraph *sg = at->type == SN_ATTR_GRAPH ? at->g : at->graphs[k];
                sn_graph *child;
                rc = build_graph(m, sg, g, depth + 1, &child, err);
                if (rc != SNUG_OK) {
                    sn_err_prefix(err, "in subgraph '%s' of node %s", at->name,
                                  node_label(p, i, lb, sizeof lb));
                    goto fail;
                }
                n->sub[n->n_sub] = child;
                n->sub_attr[n->n_sub++] = at->name;
                /* The child's outer references are implicit inputs of n. */
                int more = 0;
                for (int v = 0; v < child->n_values; v++)
                    more += child->values[v].flags & SN_VAL_OUTER ? 1 : 0;
                if (more) {
                    int *im = sn_realloc(n->impl, sizeof *im * (size_t)(n->n_impl + more));
                    if (!im)
                        goto oom;
                    n->impl = im;
                    for (int v = 0; v < child->n_values; v++)
                        if (child->values[v].flags & SN_VAL_OUTER)
                            n->impl[n->n_impl++] = child->values[v].outer_id;
                }
            }
        }
    }
    /* Topological order (Kahn's algorithm, stable in file order). */
    node_of = sn_calloc((size_t)pg->n_node + 1, sizeof *node_of);
    indeg = sn_calloc((size_t)pg->n_node + 1, sizeof *indeg);
    order = sn_calloc((size_t)pg->n_node + 1, sizeof *order);
    queue = sn_calloc((size_t)pg->n_node + 1, sizeof *queue);
    if (!node_of || !indeg || !order || !queue)
        goto oom;
    for (int i = 0; i < pg->n_node; i++) {
        sn_node *n = &tmp[i];
        for (int j = 0; j < n->n_in + n->n_impl; j++) {
            int id = j < n->n_in ? n->in[j] : n->impl[j - n->n_in];
            if (id >= 0 && g->values[id].producer >= 0)
                indeg[i]++;
        }
    }
    /* Consumers per value (original node indices for now). */
    for (int i = 0; i < pg->n_node; i++) {
        sn_node *n = &tmp[i];
        for (int j = 0; j < n->n_in + n->n_impl; j++) {
            int id = j < n->n_in ? n->in[j] : n->impl[j - n->n_in];
            if (id < 0)
                continue;
            sn_value *v = &g->values[id];
            int *c = sn_realloc(v->cons, sizeof *c * (size_t)(v->n_cons + 1));
            if (!c)
                goto oom;
            v->cons = c;
            c[v->n_cons++] = i;
        }
    }
    {
        int head = 0, tail = 0, done = 0;
        for (int i = 0; i < pg->n_node; i++)
            if (!indeg[i])
                queue[tail++] = i;
        /* Min-index selection keeps file order when it is already valid. */
        while (head < tail) {
            int best = head;
            for (int k = head + 1; k < tail; k++)
                if (queue[k] < queue[best])
                    best = k;
            int i = queue[best];
            queue[best] = queue[head];
            queue[head++] = i;
            order[done++] = i;
            for (int j = 0; j < tmp[i].n_out; j++) {
                int id = tmp[i].out[j];
                if (id < 0)
                    continue;
                for (int c = 0; c < g->values[id].n_cons; c++)
                    if (--indeg[g->values[id].cons[c]] == 0)
                        queue[tail++] = g->values[id].cons[c];
            }
        }
        if (done < pg->n_node) {
            int bad = 0;
            for (int i = 0; i < pg->n_node; i++)
                if (indeg[i]) {
                    bad = i;
                    break;
                }
            rc = sn_errf(err, SNUG_ERR_GRAPH, "the graph has a cycle through node %s (%s)",
                         node_label(&pg->nodes[bad], bad, lb, sizeof lb), pg->nodes[bad].op_type);
            goto fail;
        }
    }
    if (!(g->nodes = sn_calloc((size_t)pg->n_node + 1, sizeof *g->nodes)))
        goto oom;
    for (int k = 0; k < pg->n_node; k++) {
        node_of[order[k]] = k;
        g->nodes[k] = tmp[order[k]];
        g->nodes[k].index = k;
    }
    sn_free(tmp);
    tmp = NULL;
    for (int v = 0; v < g->n_values; v++) {
        sn_value *val = &g->values[v];
        if (val->producer >= 0)
            val->producer = node_of[val->producer];
        for (int c = 0; c < val->n_cons; c++)
            val->cons[c] = node_of[val->cons[c]];
    }
    sn_free(order);
    sn_free(indeg);
    sn_free(queue);
    sn_free(node_of);
    *out = g;
    return SNUG_OK;
oom:
    rc = sn_errf(err, SNUG_ERR_OOM, "out of memory building the graph");
fail:
    if (tmp && g) {
        /* nodes not yet moved into g: free them through g */
        g->nodes = tmp;
        g->n_nodes = pg->n_node;
        tmp = NULL;
    }
    sn_free(order);
    sn_free(indeg);
    sn_free(queue);
    sn_free(node_of);
    sn_graph_free(g);
    return rc;
}

int sn_graph_build(const sn_model *m, sn_graph **out, sn_err *err) {
    int rc = build_graph(m, m->graph, NULL, 0, out, err);
    if (rc != SNUG_OK)
        return rc;
    rc = sn_graph_infer(*out, 0, NULL, NULL, err);
    if (rc != SNUG_OK) {
        sn_graph_free(*out);
        *out = NULL;
    }
    return rc;
}

bool sn_value_gathered_only(const sn_graph *g, int v) {
    const sn_value *val = &g->values[v];
    if (val->n_cons < 1 || (val->flags & SN_VAL_OUTPUT))
        return false;
    for (int c = 0; c < val->n_cons; c++) {
        const sn_node *n = &g->nodes[val->cons[c]];
        if (strcmp(n->p->op_type, "Gather") || strcmp(n->p->domain, "") || n->in[0] != v)
            return false;
    }
    return true;
}

void sn_graph_weight_use(const sn_graph *g, uint64_t *read_whole, uint64_t *gathered) {
    *read_whole = *gathered = 0;
    for (int v = 0; v < g->n_values; v++) {
        const sn_value *val = &g->values[v];
        if (!(val->flags & SN_VAL_INIT) || !val->n_cons)
            continue;
        *(sn_value_gathered_only(g, v) ? gathered : read_whole) += sn_tensor_nbytes(&val->init->t);
    }
}
