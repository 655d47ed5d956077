/* Model-local functions are inlined at load time, so the graph stage sees
 * only ops. A call node becomes the function body with
 *  - formal inputs/outputs renamed to the call's actual names (a formal
 *    input the call leaves out becomes "", i.e. absent),
 *  - every other name prefixed with "<call name>#<k>/" so two calls of the
 *    same function do not collide (also inside the body's subgraphs),
 *  - attributes with ref_attr_name replaced by the call's attribute of
 *    that name, else the function's default, else dropped.
 * Calls inside bodies and inside subgraphs are expanded the same way;
 * a function that (indirectly) calls itself is an error. */
#include <stdio.h>
#include <string.h>

#include "onnx/load_impl.h"

#define NEW(c, T, n) ((T *)sn_arena_alloc((c)->a, sizeof(T) * (size_t)(n), _Alignof(T)))

typedef struct node_vec {
    sn_pnode *v; /* owned (heap) until copied into the arena */
    int n, cap;
} node_vec;

typedef struct call_ctx {
    sn_ld *c;
    const sn_pnode *call;
    const sn_ld_func *fn;
    const char *prefix;
} call_ctx;

static int push(sn_ld *c, node_vec *out, const sn_pnode *n) {
    if (out->n == out->cap) {
        int cap = out->cap ? out->cap * 2 : 16;
        sn_pnode *v = sn_realloc(out->v, sizeof *v * (size_t)cap);
        if (!v)
            return sn_ld_oom(c);
        out->v = v;
        out->cap = cap;
    }
    out->v[out->n++] = *n;
    return SNUG_OK;
}

static const sn_ld_func *find_func(const sn_ld *c, const sn_pnode *n) {
    for (int i = 0; i < c->n_func; i++)
        if (!strcmp(c->funcs[i].name, n->op_type) && !strcmp(c->funcs[i].domain, n->domain))
            return &c->funcs[i];
    return NULL;
}

static const char *cat(sn_ld *c, const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    char *s = sn_arena_alloc(c->a, na + nb + 1, 1);
    if (s) {
        memcpy(s, a, na);
        memcpy(s + na, b, nb + 1);
    }
    return s;
}

static const char *rename_value(call_ctx *x, const char *name) {
    if (!name[0])
        return name;
    for (int i = 0; i < x->fn->n_in; i++)
        if (!strcmp(x->fn->inputs[i], name))
            return i < x->call->n_in ? x->call->inputs[i] : "";
    for (int i = 0; i < x->fn->n_out; i++)
        if (!strcmp(x->fn->outputs[i], name) && i < x->call->n_out)
            return x->call->outputs[i];
    return cat(x->c, x->prefix, name);
}

static int rename_list(call_ctx *x, int n, const char *const *in, const char ***out) {
    *out = NULL;
    if (!n)
        return SNUG_OK;
    const char **v = NEW(x->c, const char *, n);
    if (!v)
        return sn_ld_oom(x->c);
    for (int i = 0; i < n; i++)
        if (!(v[i] = rename_value(x, in[i])))
            return sn_ld_oom(x->c);
    *out = v;
    return SNUG_OK;
}

static int clone_node(call_ctx *x, const sn_pnode *b, sn_pnode *o);

static int clone_graph(call_ctx *x, const sn_pgraph *g, sn_pgraph **out) {
    sn_ld *c = x->c;
    sn_pgraph *n = NEW(c, sn_pgraph, 1);
    if (!n)
        return sn_ld_oom(c);
    *n = *g;
    if ((g->n_node && !(n->nodes = NEW(c, sn_pnode, g->n_node))) ||
        (g->n_init && !(n->inits = NEW(c, sn_init, g->n_init))) ||
        (g->n_input && !(n->inputs = NEW(c, sn_value_info, g->n_input))) ||
        (g->n_output && !(n->outputs = NEW(c, sn_value_info, g->n_output))) ||
        (g->n_value_info && !(n->value_info = NEW(c, sn_value_info, g->n_value_info))))
        return sn_ld_oom(c);
    for (int i = 0; i < g->n_node; i++)
        SN_TRY(clone_node(x, &g->nodes[i], &n->nodes[i]));
    for (int i = 0; i < g->n_init; i++) {
        n->inits[i] = g->inits[i];
        if (!(n->inits[i].name = rename_value(x, g->inits[i].name)))
            return sn_ld_oom(c);
    }
    const sn_value_info *src[3] = {g->inputs, g->outputs, g->value_info};
    sn_value_info *dst[3] = {n->inputs, n->outputs, n->value_info};
    int cnt[3] = {g->n_input, g->n_output, g->n_value_info};
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < cnt[k]; i++) {
            dst[k][i] = src[k][i];
            if (!(dst[k][i].name = rename_value(x, src[k][i].name)))
                return sn_ld_oom(c);
        }
    }
    *out = n;
    return SNUG_OK;
}

static const sn_attr *find_attr(const sn_attr *v, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(v[i].name, name))
            return &v[i];
    return NULL;
}

/* A body node with names renamed and attribute references resolved. */
static int clone_node(call_ctx *x, const sn_pnode *b, sn_pnode *o) {
    sn_ld *c = x->c;
    *o = *b;
    o->name = cat(c, x->prefix, b->name[0] ? b->name : b->op_type);
    if (!o->name)
        return sn_ld_oom(c);
    SN_TRY(rename_list(x, b->n_in, b->inputs, &o->inputs));
    SN_TRY(rename_list(x, b->n_out, b->outputs, &o->outputs));
    o->attrs = NULL;
    o->n_attr = 0;
    if (!b->n_attr)
        return SNUG_OK;
    if (!(o->attrs = NEW(c, sn_attr, b->n_attr)))
        return sn_ld_oom(c);
    for (int i = 0; i < b->n_attr; i++) {
        const sn_attr *a = &b->attrs[i];
        if (a->ref_attr_name) {
            const sn_attr *v = find_attr(x->call->attrs, x->call->n_attr, a->ref_attr_name);
            if (!v)
                v = find_attr(x->fn->attr_default, x->fn->n_attr_default, a->ref_attr_name);
            if (!v)
                continue; /* not given and no default: the attribute is absent */
            sn_attr *d = &o->attrs[o->n_attr++];
            *d = *v; /* the caller's value belongs to the caller's scope: no renaming */
            d->name = a->name;
            d->ref_attr_name = NULL;
            continue;
        }
        sn_attr *d = &o->attrs[o->n_attr++];
        *d = *a;
        if (a->g)
            SN_TRY(clone_graph(x, a->g, &d->g));
        if (a->graphs && a->n) {
            if (!(d->graphs = NEW(c, sn_pgraph *, a->n)))
                return sn_ld_oom(c);
            for (int k = 0; k < a->n; k++)
                SN_TRY(clone_graph(x, a->graphs[k], &d->graphs[k]));
        }
    }
    return SNUG_OK;
}

static int inline_graph(sn_ld *c, sn_pgraph *g, int depth);

static int emit(sn_ld *c, node_vec *out, const sn_pnode *n, int depth) {
    if (depth > 64)
        return sn_errf(c->err, SNUG_ERR_GRAPH, "functions or subgraphs nested deeper than 64");
    sn_ld_func *fn = (sn_ld_func *)find_func(c, n);
    if (!fn) {
        for (int i = 0; i < n->n_attr; i++) {
            const sn_attr *a = &n->attrs[i];
            if (a->g)
                SN_TRY(inline_graph(c, a->g, depth + 1));
            for (int k = 0; a->graphs && k < a->n; k++)
                SN_TRY(inline_graph(c, a->graphs[k], depth + 1));
        }
        return push(c, out, n);
    }
    if (fn->active)
        return sn_errf(c->err, SNUG_ERR_GRAPH, "function '%s' (domain '%s') calls itself",
                       fn->name, fn->domain);
    if (c->m->priv->n_inlined >= SN_INLINE_MAX_CALLS)
        return sn_errf(c->err, SNUG_ERR_UNSUPPORTED,
                       "more than %d function calls to inline", SN_INLINE_MAX_CALLS);
    int k = ++c->m->priv->n_inlined;
    char pre[64];
    snprintf(pre, sizeof pre, "#%d/", k);
    call_ctx x = {c, n, fn, cat(c, n->name[0] ? n->name : fn->name, pre)};
    if (!x.prefix)
        return sn_ld_oom(c);
    fn->active = 1;
    int rc = SNUG_OK;
    for (int i = 0; i < fn->n_node && !rc; i++) {
        sn_pnode b;
        rc = clone_node(&x, &fn->nodes[i], &b);
        if (!rc)
            rc = emit(c, out, &b, depth + 1);
    }
    fn->active = 0;
    if (rc)
        sn_err_prefix(c->err, "inlining function '%s' called by node '%s'", fn->name, n->name);
    return rc;
}

static int inline_graph(sn_ld *c, sn_pgraph *g, int depth) {
    node_vec out = {0};
    int rc = SNUG_OK;
    for (int i = 0; i < g->n_node && !rc; i++)
        rc = emit(c, &out, &g->nodes[i], depth);
    if (!rc) {
        sn_pnode *v = out.n ? NEW(c, sn_pnode, out.n) : NULL;
        if (out.n && !v) {
            rc = sn_ld_oom(c);
        } else {
            if (out.n)
                memcpy(v, out.v, sizeof *v * (size_t)out.n);
            g->nodes = v;
            g->n_node = out.n;
        }
    }
    sn_free(out.v);
    return rc;
}

int sn_ld_inline(sn_ld *c, sn_pgraph *g) { return inline_graph(c, g, 0); }
