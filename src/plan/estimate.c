#include "plan/estimate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/op.h"

const char *sn_ws_source_name(sn_ws_source s) {
    static const char *const names[] = {"estimator", "profile", "max", "fallback"};
    return (unsigned)s < SN_WS_SOURCE_COUNT ? names[s] : "?";
}

/* ---- Level-1 table ----------------------------------------------------------
 * Estimators for ops whose kernels live in files this module does not own
 * and whose defs have no estimate yet. An op def's own estimator wins. */

static size_t al64(size_t n) { return (n + 63) & ~(size_t)63; }

/* LayerNormalization (< 17), SimplifiedLayerNormalization, RMSNormalization:
 * staged x row, y row, gamma, beta over the normalized extent. */
static size_t est_norm(const sn_infer_ctx *c) {
    const sn_tensor *x = c->n_in > 0 ? c->in[0] : NULL;
    if (!x || x->rank < 0)
        return 0;
    int axis;
    if (!sn_axis_norm(sn_attr_int(c->node, "axis", -1), x->rank, &axis))
        return 0;
    int64_t n = 1;
    for (int i = axis; i < x->rank; i++)
        n *= x->dims[i] > 0 ? x->dims[i] : 1;
    return 4 * al64((size_t)n * sizeof(float));
}

/* Skip(Simplified)LayerNormalization: six rows of the hidden size. */
static size_t est_skip_norm(const sn_infer_ctx *c) {
    const sn_tensor *x = c->n_in > 0 ? c->in[0] : NULL;
    if (!x || x->rank < 0)
        return 0;
    int64_t h = x->rank > 0 && x->dims[x->rank - 1] > 0 ? x->dims[x->rank - 1] : 1;
    return 6 * al64((size_t)h * sizeof(float));
}

typedef struct est_entry {
    const char *domain, *op;
    sn_estimate_fn fn;
} est_entry;

static const est_entry k_table[] = {
    {"", "LayerNormalization", est_norm},
    {"", "SimplifiedLayerNormalization", est_norm},
    {"", "RMSNormalization", est_norm},
    {"com.microsoft", "SimplifiedLayerNormalization", est_norm},
    {"com.microsoft", "SkipLayerNormalization", est_skip_norm},
    {"com.microsoft", "SkipSimplifiedLayerNormalization", est_skip_norm},
};

/* Value v's planned info as an estimator may see it: data only where it is
 * known before any run (initializers, folded values). The plan's other
 * pointers lead to arena bytes no run has written yet. */
static const sn_tensor *known_info(const sn_plan *p, int v, sn_tensor *copy) {
    *copy = p->values[v].info;
    sn_storage st = p->values[v].storage;
    if (st != SN_STORE_CONST && st != SN_STORE_FOLDED && st != SN_STORE_STREAMED)
        copy->data = NULL;
    return copy;
}

bool sn_estimate_level1(const sn_node *n, const sn_tensor *const *in, const sn_tensor *const *out, int n_threads,
                        size_t *bytes, bool *from_table) {
    *bytes = 0;
    *from_table = false;
    const sn_op_def *d = n->op;
    if (!d)
        return false;
    sn_err e = {0};
    sn_infer_ctx c = {n, n->n_in, n->n_out, in, (sn_tensor **)out, &e, n_threads};
    if (d->estimate) {
        *bytes = d->estimate(&c);
        return true;
    }
    /* The ONNX LayerNormalization of opset >= 17 is nn/norm.c's, which has no
     * prepare; only consult the table for the def that is in use. */
    if (d->cpu.prepare) {
        for (size_t i = 0; i < sizeof k_table / sizeof *k_table; i++)
            if (!strcmp(k_table[i].domain, d->domain) && !strcmp(k_table[i].op, d->name)) {
                *bytes = k_table[i].fn(&c);
                *from_table = true;
                return true;
            }
        return false; /* declares workspace in prepare, but nobody can say how much beforehand */
    }
    return true; /* no prepare: no workspace */
}

int sn_plan_reserve(sn_plan *p, const sn_graph *g, sn_err *err) {
    int max_io = 1;
    for (int i = 0; i < g->n_nodes; i++) {
        max_io = g->nodes[i].n_in > max_io ? g->nodes[i].n_in : max_io;
        max_io = g->nodes[i].n_out > max_io ? g->nodes[i].n_out : max_io;
    }
    const sn_tensor **in = sn_calloc((size_t)max_io * 2, sizeof *in), **out = in ? in + max_io : NULL;
    sn_tensor *copies = sn_calloc((size_t)max_io * 2, sizeof *copies);
    if (!in || !copies) {
        sn_free(in);
        sn_free(copies);
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const sn_node *n = &g->nodes[i];
        sn_plan_node *pn = &p->nodes[i];
        pn->ws_reserved = 0;
        pn->has_reserve = false;
        if (pn->mode != SN_MODE_STATIC)
            continue;
        for (int k = 0; k < n->n_in; k++)
            in[k] = n->in[k] >= 0 ? known_info(p, n->in[k], &copies[k]) : NULL;
        for (int k = 0; k < n->n_out; k++)
            out[k] = n->out[k] >= 0 ? known_info(p, n->out[k], &copies[max_io + k]) : NULL;
        if (pn->last_row && sn_last_row_applies(in[0]))
            copies[0].dims[1] = 1; /* it reads the last position only */
        bool tab;
        pn->has_reserve = sn_estimate_level1(n, in, out, p->threads, &pn->ws_reserved, &tab);
    }
    sn_free(in);
    sn_free(copies);
    return SNUG_OK;
}

int sn_plan_check_workspace(const sn_plan *p, const sn_graph *g, bool strict, const sn_logger *log, sn_err *err) {
    for (int i = 0; i < g->n_nodes; i++) {
        const sn_plan_node *pn = &p->nodes[i];
        const sn_node *n = &g->nodes[i];
        if (pn->mode != SN_MODE_STATIC || !pn->has_reserve || pn->workspace <= pn->ws_reserved)
            continue;
        if (strict)
            return sn_errf(err, SNUG_ERR_RANGE, "%s '%s': prepare declared %zu bytes of workspace, more than its "
                           "Level-1 reservation of %zu (session.strict_workspace_verification)", n->p->op_type,
                           n->p->name, pn->workspace, pn->ws_reserved);
        sn_log(log, SNUG_LOG_WARN, "%s '%s': prepare declared %zu bytes of workspace, more than its Level-1 "
               "reservation of %zu; the arena is planned with the declared figure", n->p->op_type, n->p->name,
               pn->workspace, pn->ws_reserved);
    }
    return SNUG_OK;
}

/* ---- per-node figures ------------------------------------------------------ */

static uint64_t info_bytes(const sn_tensor *t) {
    if (!t || t->kind != SN_KIND_TENSOR || !sn_tensor_shape_known(t))
        return 0;
    size_t b = sn_tensor_nbytes(t);
    return b == SIZE_MAX ? 0 : (uint64_t)b;
}

static uint64_t init_bytes(const sn_value *v) {
    if (v->init)
        return v->init->nbytes ? v->init->nbytes : info_bytes(&v->init->t);
    return info_bytes(&v->info);
}

void sn_estimate_free(sn_estimate *e) {
    if (!e)
        return;
    sn_free(e->nodes);
    memset(e, 0, sizeof *e);
}

/* Charges initializer v to the node unless already charged on its device
 * (charged[v]: bit d set once charged on device d; devices >= 32 share bit 31). */
static void charge(const sn_graph *g, int v, int dev, uint32_t *charged, sn_node_est *ne) {
    uint64_t b = init_bytes(&g->values[v]);
    uint32_t bit = 1u << (dev < 31 ? dev : 31);
    ne->weights_read += b;
    if (charged[v] & bit)
        return;
    charged[v] |= bit;
    ne->weights += b;
}

int sn_estimate_nodes(const sn_graph *g, const sn_plan *p, const sn_estimate_opts *o, sn_estimate *out,
                      sn_err *err) {
    memset(out, 0, sizeof *out);
    int nn = g->n_nodes, rc = SNUG_OK;
    uint32_t *charged = sn_calloc((size_t)g->n_values + 1, sizeof *charged);
    const sn_tensor **in = NULL, **op = NULL;
    sn_tensor *inc = NULL, *opc = NULL; /* infos with data only where it is known before a run */
    int max_io = 1;
    for (int i = 0; i < nn; i++) {
        max_io = g->nodes[i].n_in > max_io ? g->nodes[i].n_in : max_io;
        max_io = g->nodes[i].n_out > max_io ? g->nodes[i].n_out : max_io;
    }
    out->nodes = sn_calloc((size_t)nn + 1, sizeof *out->nodes);
    in = sn_calloc((size_t)max_io, sizeof *in);
    op = sn_calloc((size_t)max_io, sizeof *op);
    inc = sn_calloc((size_t)max_io, sizeof *inc);
    opc = sn_calloc((size_t)max_io, sizeof *opc);
    if (!out->nodes || !in || !op || !inc || !opc || !charged) {
        rc = sn_errf(err, SNUG_ERR_OOM, "out of memory");
        goto fail;
    }
    out->n_nodes = nn;
    for (int i = 0; i < nn; i++) {
        const sn_node *n = &g->nodes[i];
        sn_node_est *ne = &out->nodes[i];
        ne->device = o && o->device ? o->device[i] : 0;
        ne->dynamic = p->nodes[i].mode == SN_MODE_DYNAMIC;
        bool folded = p->nodes[i].mode == SN_MODE_FOLDED;
        for (int k = 0; k < n->n_in; k++) {
            int v = n->in[k];
            in[k] = v >= 0 ? known_info(p, v, &inc[k]) : NULL;
            if (v < 0)
                continue;
            if (g->values[v].flags & SN_VAL_INIT) {
                /* Folded readers count too: other shapes re-plan and need it. */
                charge(g, v, ne->device, charged, ne);
            } else {
                ne->inputs += info_bytes(in[k]);
            }
        }
        for (int k = 0; k < n->n_impl; k++) /* initializers a subgraph reads */
            if (g->values[n->impl[k]].flags & SN_VAL_INIT)
                charge(g, n->impl[k], ne->device, charged, ne);
        for (int k = 0; k < n->n_out; k++) {
            int v = n->out[k];
            op[k] = v >= 0 ? known_info(p, v, &opc[k]) : NULL;
            if (v < 0)
                continue;
            sn_storage st = p->values[v].storage;
            if (st == SN_STORE_FOLDED)
                ne->folded += info_bytes(op[k]);
            else if (st == SN_STORE_ARENA || st == SN_STORE_DYNAMIC)
                ne->outputs += info_bytes(op[k]);
        }
        if (folded) { /* computed once at plan time: no run-time scratch */
            ne->has_l1 = true;
        } else {
            size_t l1 = 0;
            bool tab = false;
            ne->has_l1 = sn_estimate_level1(n, in, op, p->threads, &l1, &tab);
            ne->ws_l1 = l1;
            out->n_l1_table += ne->has_l1 && tab;
        }
        ne->ws_l2 = p->nodes[i].workspace;
        int row = o && o->stats && o->node_row ? o->node_row[i] : -1;
        if (row >= 0) {
            ne->has_profile = true;
            ne->ws_profile = o->stats->rows[row].s.temp;
        }
        if (ne->has_l1 && ne->has_profile) {
            ne->src = SN_WS_MAX;
            ne->ws = ne->ws_l1 > ne->ws_profile ? ne->ws_l1 : ne->ws_profile;
        } else if (ne->has_l1) {
            ne->src = SN_WS_ESTIMATOR;
            ne->ws = ne->ws_l1;
        } else if (ne->has_profile) {
            ne->src = SN_WS_PROFILE;
            ne->ws = ne->ws_profile;
        } else {
            ne->src = SN_WS_FALLBACK;
            ne->ws = (ne->weights_read + ne->outputs) / 2;
        }
        out->n_by_src[ne->src]++;
        if (ne->has_l1 && ne->ws_l2 > ne->ws_l1) {
            ne->l2_over = true;
            out->n_l2_over++;
            if (o && o->strict) {
                rc = sn_errf(err, SNUG_ERR_RANGE,
                             "%s '%s': prepare declared %llu bytes of workspace, more than its Level-1 estimate of "
                             "%llu (strict mode)",
                             n->p->op_type, n->p->name, (unsigned long long)ne->ws_l2,
                             (unsigned long long)ne->ws_l1);
                goto fail;
            }
            sn_log(o ? o->log : NULL, SNUG_LOG_WARN,
                   "%s '%s': prepare declared %llu bytes of workspace, more than its Level-1 estimate of %llu; "
                   "planned with the larger figure",
                   n->p->op_type, n->p->name, (unsigned long long)ne->ws_l2, (unsigned long long)ne->ws_l1);
            if (ne->ws < ne->ws_l2)
                ne->ws = ne->ws_l2;
        }
        out->weights_total += ne->weights;
    }
    sn_free(in);
    sn_free(op);
    sn_free(inc);
    sn_free(opc);
    sn_free(charged);
    return SNUG_OK;
fail:
    sn_free(in);
    sn_free(op);
    sn_free(inc);
    sn_free(opc);
    sn_free(charged);
    sn_estimate_free(out);
    return rc;
}

/* ---- session.max_shape_override ------------------------------------------- */

static void trim(const char **b, const char **e) {
    while (*b < *e && (**b == ' ' || **b == '\t'))
        (*b)++;
    while (*e > *b && ((*e)[-1] == ' ' || (*e)[-1] == '\t'))
        (*e)--;
}

void sn_shape_override_free(sn_shape_override *o, int n) {
    for (int i = 0; o && i < n; i++)
        sn_free(o[i].name);
    sn_free(o);
}

int sn_shape_override_parse(const char *text, sn_shape_override **out, int *n_out, sn_err *err) {
    *out = NULL;
    *n_out = 0;
    const char *b = text, *e = text + strlen(text);
    trim(&b, &e);
    sn_shape_override *o = NULL;
    int n = 0, cap = 0, rc = SNUG_OK;
    const char *pos = b;
    while (pos < e) {
        const char *close = memchr(pos, ']', (size_t)(e - pos));
        if (!close) {
            rc = sn_errf(err, SNUG_ERR_INVALID_ARG,
                         "max_shape_override: missing closing ']' in entry starting at position %d",
                         (int)(pos - b));
            goto fail;
        }
        const char *semi = memchr(close, ';', (size_t)(e - close));
        const char *eb = pos, *ee = semi ? semi : e;
        trim(&eb, &ee);
        pos = semi ? semi + 1 : e;
        if (eb == ee)
            continue;
        const char *colon = memchr(eb, ':', (size_t)(ee - eb));
        if (!colon) {
            rc = sn_errf(err, SNUG_ERR_INVALID_ARG, "max_shape_override: missing ':' in entry '%.*s'", (int)(ee - eb),
                         eb);
            goto fail;
        }
        const char *nb = eb, *ne = colon;
        trim(&nb, &ne);
        if (nb == ne) {
            rc = sn_errf(err, SNUG_ERR_INVALID_ARG, "max_shape_override: empty name in entry '%.*s'", (int)(ee - eb),
                         eb);
            goto fail;
        }
        const char *sb = colon + 1, *se = ee;
        trim(&sb, &se);
        if (se - sb < 2 || *sb != '[' || se[-1] != ']') {
            rc = sn_errf(err, SNUG_ERR_INVALID_ARG, "max_shape_override: shape must be enclosed in [] for '%.*s'",
                         (int)(ne - nb), nb);
            goto fail;
        }
        sn_shape_override so = {0};
        const char *db = sb + 1, *de = se - 1;
        const char *dp = db;
        while (db < de && dp < de) {
            const char *comma = memchr(dp, ',', (size_t)(de - dp));
            const char *tb = dp, *te = comma ? comma : de;
            trim(&tb, &te);
            int64_t v = 0;
            bool ok = tb < te;
            for (const char *q = tb; ok && q < te; q++) {
                if (*q < '0' || *q > '9' || v > (INT64_MAX - (*q - '0')) / 10)
                    ok = false;
                else
                    v = v * 10 + (*q - '0');
            }
            if (!ok) {
                rc = sn_errf(err, SNUG_ERR_INVALID_ARG, "max_shape_override: invalid dimension '%.*s' for input '%.*s'",
                             (int)(te - tb), tb, (int)(ne - nb), nb);
                goto fail;
            }
            if (v <= 0) {
                rc = sn_errf(err, SNUG_ERR_INVALID_ARG,
                             "max_shape_override: dimensions must be positive, got %lld for input '%.*s'",
                             (long long)v, (int)(ne - nb), nb);
                goto fail;
            }
            if (so.rank == SN_MAX_RANK) {
                rc = sn_errf(err, SNUG_ERR_UNSUPPORTED, "max_shape_override: '%.*s' has more than %d dims",
                             (int)(ne - nb), nb, SN_MAX_RANK);
                goto fail;
            }
            so.dims[so.rank++] = v;
            dp = comma ? comma + 1 : de;
        }
        for (int i = 0; i < n; i++)
            if (strlen(o[i].name) == (size_t)(ne - nb) && !strncmp(o[i].name, nb, (size_t)(ne - nb))) {
                rc = sn_errf(err, SNUG_ERR_INVALID_ARG, "max_shape_override: duplicate entry for '%s'", o[i].name);
                goto fail;
            }
        if (n == cap) {
            cap = cap ? 2 * cap : 8;
            sn_shape_override *t = sn_realloc(o, sizeof *t * (size_t)cap);
            if (!t) {
                rc = sn_errf(err, SNUG_ERR_OOM, "out of memory");
                goto fail;
            }
            o = t;
        }
        if (!(so.name = sn_strndup(nb, (size_t)(ne - nb)))) {
            rc = sn_errf(err, SNUG_ERR_OOM, "out of memory");
            goto fail;
        }
        o[n++] = so;
    }
    *out = o;
    *n_out = n;
    return SNUG_OK;
fail:
    sn_shape_override_free(o, n);
    return rc;
}

/* ---- sizes ------------------------------------------------------------------ */

int sn_parse_size(const char *text, uint64_t *out, sn_err *err) {
    const char *p = text;
    char *end = NULL;
    if (!p || !*p || !((*p >= '0' && *p <= '9') || *p == '.'))
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "'%s' is not a size (e.g. 512M, 2G, 1.5G, 1048576)",
                       p ? p : "");
    double v = strtod(p, &end);
    const char *u = end;
    uint64_t mul = 1;
    switch (*u) {
    case 'k': case 'K': mul = 1ull << 10; u++; break;
    case 'm': case 'M': mul = 1ull << 20; u++; break;
    case 'g': case 'G': mul = 1ull << 30; u++; break;
    case 't': case 'T': mul = 1ull << 40; u++; break;
    default: break;
    }
    if (mul > 1 && (*u == 'i' || *u == 'I') && (u[1] == 'b' || u[1] == 'B'))
        u += 2;
    else if (*u == 'b' || *u == 'B')
        u++;
    if (*u || !isfinite(v) || v < 0 || (mul == 1 && v != floor(v)))
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "'%s' is not a size (e.g. 512M, 2G, 1.5G, 1048576)", text);
    double bytes = v * (double)mul;
    if (bytes >= 18446744073709551615.0)
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "size '%s' is too large", text);
    *out = (uint64_t)bytes;
    return SNUG_OK;
}
