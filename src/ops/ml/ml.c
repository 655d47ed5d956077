/* ai.onnx.ml ops: Binarizer (1), ArrayFeatureExtractor (1), LabelEncoder
 * (2, 4: keys/values from the typed list attributes or tensors) and
 * TreeEnsemble (5). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/kit.h"

/* ---- Binarizer ------------------------------------------------------------------------------- */

static bool bin_type(sn_dtype t) { return sn_dtype_is_real(t) || t == SN_I64 || t == SN_I32; }

static int ml_binarizer_infer(sn_infer_ctx *c) {
    const sn_tensor *x = sn_in(c->in, c->n_in, 0);
    if (!x)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "input is missing");
    if (!bin_type(x->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "input type %s not supported", sn_dtype_name(x->dtype));
    sn_set_out(c->out[0], x->dtype, x->rank, x->dims);
    return SNUG_OK;
}

static int ml_binarizer_run(sn_kctx *c) {
    const sn_tensor *x = c->in[0];
    sn_tensor *y = c->out[0];
    double th = sn_attr_float(c->node, "threshold", 0.0f);
    int64_t n = sn_tensor_numel(x);
    if (x->dtype == SN_F32) {
        const float *X = x->data;
        float *Y = y->data, t = (float)th;
        for (int64_t i = 0; i < n; i++)
            Y[i] = X[i] > t ? 1.0f : 0.0f;
        return SNUG_OK;
    }
    for (int64_t i = 0; i < n; i++)
        sn_store_f64(y->dtype, y->data, (size_t)i, sn_load_f64(x->dtype, x->data, (size_t)i) > th ? 1.0 : 0.0);
    return SNUG_OK;
}

/* ---- ArrayFeatureExtractor -------------------------------------------------------------------
 * Z = X[..., indices] (indices flattened); a 1-D X gives [1, k], as
 * onnxruntime does. */

static int ml_afe_infer(sn_infer_ctx *c) {
    const sn_tensor *x = sn_in(c->in, c->n_in, 0), *idx = sn_in(c->in, c->n_in, 1);
    if (!x || !idx)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "needs inputs X and Y");
    if (!(bin_type(x->dtype) || x->dtype == SN_STRING))
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "X type %s not supported", sn_dtype_name(x->dtype));
    if (idx->dtype != SN_I64)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "Y must be int64");
    if (x->rank < 0) {
        sn_set_out(c->out[0], x->dtype, SN_RANK_UNKNOWN, NULL);
        return SNUG_OK;
    }
    if (x->rank == 0)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "X must have at least one dimension");
    int64_t k = sn_tensor_numel(idx), d[SN_MAX_RANK];
    int r = x->rank == 1 ? 2 : x->rank;
    if (x->rank == 1)
        d[0] = 1;
    else
        memcpy(d, x->dims, sizeof(int64_t) * (size_t)(r - 1));
    d[r - 1] = k >= 0 ? k : SN_DIM_UNKNOWN;
    sn_set_out(c->out[0], x->dtype, r, d);
    return SNUG_OK;
}

static int ml_afe_run(sn_kctx *c) {
    const sn_tensor *x = c->in[0], *idx = c->in[1];
    sn_tensor *y = c->out[0];
    int64_t F = x->dims[x->rank - 1], k = sn_tensor_numel(idx), rows = F ? sn_tensor_numel(x) / F : 0;
    if (F == 0)
        rows = sn_tensor_numel(y) / (k ? k : 1);
    const int64_t *I = idx->data;
    for (int64_t j = 0; j < k; j++)
        if (I[j] < 0 || I[j] >= F)
            return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "index %lld out of range [0, %lld)",
                            (long long)I[j], (long long)F);
    size_t es = sn_dtype_size(x->dtype);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < k; j++)
            memcpy((char *)y->data + (size_t)(r * k + j) * es, (const char *)x->data + (size_t)(r * F + I[j]) * es, es);
    return x->dtype == SN_STRING ? sn_strings_own(c, 0) : SNUG_OK;
}

/* ---- LabelEncoder ----------------------------------------------------------------------------
 * Keys and values come from keys_{strings,int64s,floats} / values_* or
 * (opset 4) keys_tensor / values_tensor; unmatched inputs get the default
 * (default_* or default_tensor; else -1, -0.0 or "_Unused"). Keys are
 * sorted once in prepare and looked up by binary search. */

typedef enum { LK_STR, LK_INT, LK_REAL } lk_kind;

typedef struct le_entry {
    sn_string s;
    int64_t i;
    double f;
    int64_t v; /* index into the values */
} le_entry;

typedef struct le_state {
    lk_kind kk;
    int64_t n;
    le_entry *keys;      /* owned, sorted */
    sn_dtype vt;         /* output type */
    const void *vals;    /* borrowed from the attribute: n values of vt (float list: float32) */
    sn_tensor defv;      /* one default value of vt; data points at defbuf or borrowed */
    union {
        int64_t i;
        double f;
        float f32;
        sn_string s;
        uint8_t b[16];
    } defbuf;
} le_state;

/* Key or value source: list attribute or tensor attribute. */
typedef struct le_src {
    int n;
    sn_dtype t;
    const void *data;
} le_src;

static bool le_find(const sn_node *node, const char *kind, le_src *out) {
    char name[32];
    const sn_attr *a;
    static const char *const sfx[] = {"_strings", "_int64s", "_floats"};
    static const sn_dtype types[] = {SN_STRING, SN_I64, SN_F32};
    for (int i = 0; i < 3; i++) {
        strcpy(name, kind);
        strcat(name, sfx[i]);
        if ((a = sn_attr_get(node, name))) {
            out->n = a->n;
            out->t = types[i];
            out->data = i == 0 ? (const void *)a->strings : i == 1 ? (const void *)a->ints : (const void *)a->floats;
            return true;
        }
    }
    strcpy(name, kind);
    strcat(name, "_tensor");
    const sn_tensor *t = sn_attr_tensor(node, name);
    if (t) {
        out->n = (int)sn_tensor_numel(t);
        out->t = t->dtype;
        out->data = t->data;
        return true;
    }
    return false;
}

static lk_kind le_kind(sn_dtype t) {
    return t == SN_STRING ? LK_STR : (t == SN_F32 || t == SN_F64 || t == SN_F16 || t == SN_BF16) ? LK_REAL : LK_INT;
}

static int le_cmp(const le_entry *a, const le_entry *b, lk_kind k) {
    if (k == LK_STR) {
        size_t n = a->s.len < b->s.len ? a->s.len : b->s.len;
        int r = n ? memcmp(a->s.ptr, b->s.ptr, n) : 0;
        return r ? r : (a->s.len > b->s.len) - (a->s.len < b->s.len);
    }
    if (k == LK_INT)
        return (a->i > b->i) - (a->i < b->i);
    return (a->f > b->f) - (a->f < b->f);
}

static int le_cmp_str(const void *a, const void *b) { return le_cmp(a, b, LK_STR); }
static int le_cmp_int(const void *a, const void *b) { return le_cmp(a, b, LK_INT); }
static int le_cmp_real(const void *a, const void *b) { return le_cmp(a, b, LK_REAL); }

static void ml_labelenc_free(void *state) {
    le_state *s = state;
    if (!s)
        return;
    sn_free(s->keys);
    sn_free(s);
}

static int le_sources(const sn_node *node, sn_err *err, le_src *ks, le_src *vs) {
    if (!le_find(node, "keys", ks) || !le_find(node, "values", vs))
        return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "keys_* and values_* attributes are required");
    if (ks->n != vs->n)
        return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "%d keys but %d values", ks->n, vs->n);
    return SNUG_OK;
}

static int ml_labelenc_infer(sn_infer_ctx *c) {
    const sn_tensor *x = sn_in(c->in, c->n_in, 0);
    if (!x)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "input is missing");
    le_src ks, vs;
    SN_TRY(le_sources(c->node, c->err, &ks, &vs));
    if (le_kind(x->dtype) != le_kind(ks.t))
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "input of type %s but keys of type %s",
                        sn_dtype_name(x->dtype), sn_dtype_name(ks.t));
    if (!(x->dtype == SN_STRING || sn_dtype_is_int(x->dtype) || sn_dtype_is_real(x->dtype)) ||
        !(vs.t == SN_STRING || sn_dtype_is_int(vs.t) || sn_dtype_is_real(vs.t)) ||
        sn_dtype_nbytes(vs.t, 2) != 2 * sn_dtype_size(vs.t))
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "types %s -> %s not supported",
                        sn_dtype_name(x->dtype), sn_dtype_name(vs.t));
    sn_set_out(c->out[0], vs.t, x->rank, x->dims);
    return SNUG_OK;
}

static int ml_labelenc_prepare(sn_prep_ctx *c) {
    le_src ks, vs;
    SN_TRY(le_sources(c->node, c->err, &ks, &vs));
    le_state *s = sn_calloc(1, sizeof *s);
    if (!s)
        return sn_kfail(c->err, c->node, SNUG_ERR_OOM, "out of memory");
    s->kk = le_kind(ks.t);
    s->n = ks.n;
    s->vt = vs.t;
    s->vals = vs.data;
    s->keys = sn_calloc(ks.n ? (size_t)ks.n : 1, sizeof *s->keys);
    if (!s->keys) {
        ml_labelenc_free(s);
        return sn_kfail(c->err, c->node, SNUG_ERR_OOM, "out of memory");
    }
    for (int i = 0; i < ks.n; i++) {
        le_entry *e = &s->keys[i];
        e->v = i;
        if (s->kk == LK_STR)
            e->s = ((const sn_string *)ks.data)[i];
        else if (s->kk == LK_INT)
            e->i = sn_load_i64(ks.t, ks.data, (size_t)i);
        else
            e->f = sn_load_f64(ks.t, ks.data, (size_t)i);
    }
    qsort(s->keys, (size_t)ks.n, sizeof *s->keys,
          s->kk == LK_STR ? le_cmp_str : s->kk == LK_INT ? le_cmp_int : le_cmp_real);
    /* the default */
    s->defv.dtype = s->vt;
    s->defv.data = &s->defbuf;
    memset(&s->defbuf, 0, sizeof s->defbuf);
    const sn_tensor *dt = sn_attr_tensor(c->node, "default_tensor");
    if (dt && sn_tensor_numel(dt) >= 1 && dt->dtype == s->vt) {
        s->defv.data = dt->data;
    } else if (s->vt == SN_STRING) {
        const sn_attr *a = sn_attr_get(c->node, "default_string");
        s->defbuf.s = a ? a->s : (sn_string){"_Unused", 7};
    } else if (s->vt == SN_I64 && sn_attr_get(c->node, "default_int64")) {
        s->defbuf.i = sn_attr_int(c->node, "default_int64", -1);
    } else if (s->vt == SN_F32 && sn_attr_get(c->node, "default_float")) {
        s->defbuf.f32 = sn_attr_float(c->node, "default_float", -0.0f);
    } else {
        sn_store_f64(s->vt, &s->defbuf, 0, sn_dtype_is_int(s->vt) ? -1.0 : -0.0);
    }
    c->state = s;
    return SNUG_OK;
}

static int ml_labelenc_run(sn_kctx *c) {
    const sn_tensor *x = c->in[0];
    sn_tensor *y = c->out[0];
    const le_state *s = c->state;
    int64_t n = sn_tensor_numel(x);
    size_t es = sn_dtype_size(s->vt);
    for (int64_t i = 0; i < n; i++) {
        le_entry q;
        memset(&q, 0, sizeof q);
        if (s->kk == LK_STR)
            q.s = ((const sn_string *)x->data)[i];
        else if (s->kk == LK_INT)
            q.i = sn_load_i64(x->dtype, x->data, (size_t)i);
        else
            q.f = sn_load_f64(x->dtype, x->data, (size_t)i);
        int64_t lo = 0, hi = s->n - 1, hit = -1;
        while (lo <= hi) {
            int64_t mid = lo + (hi - lo) / 2;
            int r = le_cmp(&q, &s->keys[mid], s->kk);
            if (!r) {
                hit = s->keys[mid].v;
                break;
            }
            if (r < 0)
                hi = mid - 1;
            else
                lo = mid + 1;
        }
        const void *src = hit >= 0 ? (const char *)s->vals + (size_t)hit * es : s->defv.data;
        memcpy((char *)y->data + (size_t)i * es, src, es);
    }
    return s->vt == SN_STRING ? sn_strings_own(c, 0) : SNUG_OK;
}

/* ---- TreeEnsemble (5) -------------------------------------------------------------------------
 * Trees given as node arrays: each interior node compares feature
 * nodes_featureids[i] with nodes_splits[i] by nodes_modes[i] (LEQ, LT,
 * GTE, GT, EQ, NEQ, MEMBER of a set from membership_values) and continues
 * to the true or false child, which is a node or (nodes_*leafs) a leaf.
 * Leaves add leaf_weights to target leaf_targetids; trees aggregate by
 * SUM, AVERAGE, MIN or MAX, then post_transform. */

enum { TE_LEQ, TE_LT, TE_GTE, TE_GT, TE_EQ, TE_NEQ, TE_MEMBER };
enum { TE_AVG, TE_SUM, TE_MIN, TE_MAX };
enum { TE_PT_NONE, TE_PT_SOFTMAX, TE_PT_LOGISTIC, TE_PT_SOFTMAX_ZERO, TE_PT_PROBIT };

typedef struct te_node {
    int64_t feature;
    double split;
    int mode;
    bool missing_true;
    int64_t child[2];  /* [false, true] */
    bool leaf[2];
    int64_t set_begin, set_end; /* MEMBER: range in members */
} te_node;

typedef struct te_state {
    int64_t n_nodes, n_leaves, n_trees, n_targets;
    te_node *nodes;     /* owned */
    double *members;    /* owned */
    double *leaf_w;     /* owned */
    int64_t *leaf_t;    /* owned */
    int64_t *roots;     /* owned */
    bool *root_leaf;    /* owned: the degenerate one-leaf trees */
    int agg, post;
    int64_t max_feature;
} te_state;

static void ml_tree_free(void *state) {
    te_state *s = state;
    if (!s)
        return;
    sn_free(s->nodes);
    sn_free(s->members);
    sn_free(s->leaf_w);
    sn_free(s->leaf_t);
    sn_free(s->roots);
    sn_free(s->root_leaf);
    sn_free(s);
}

static int ml_tree_infer(sn_infer_ctx *c) {
    const sn_tensor *x = sn_in(c->in, c->n_in, 0);
    if (!x)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "input is missing");
    if (!sn_dtype_is_real(x->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "X must be a float tensor");
    if (x->rank >= 0 && x->rank != 2)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "X must be [N, features]");
    int64_t nt = sn_attr_int(c->node, "n_targets", -1);
    if (nt < 1)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "n_targets must be positive");
    int64_t d[2] = {x->rank == 2 ? x->dims[0] : SN_DIM_UNKNOWN, nt};
    sn_set_out(c->out[0], x->dtype, 2, d);
    return SNUG_OK;
}

/* Values of a float list or float/double tensor attribute into out[n]. */
static int te_reals(const sn_node *node, const char *name, int64_t *n, double **out) {
    const float *fl;
    int k = sn_attr_floats(node, name, &fl);
    const sn_tensor *t = k < 0 ? sn_attr_tensor(node, name) : NULL;
    *out = NULL;
    *n = k >= 0 ? k : t ? sn_tensor_numel(t) : -1;
    if (*n < 0)
        return SNUG_OK;
    *out = sn_malloc(sizeof(double) * (size_t)(*n ? *n : 1));
    if (!*out)
        return SNUG_ERR_OOM;
    for (int64_t i = 0; i < *n; i++)
        (*out)[i] = k >= 0 ? fl[i] : sn_load_f64(t->dtype, t->data, (size_t)i);
    return SNUG_OK;
}

static int te_build(const sn_node *node, sn_err *err, te_state *s) {
    const int64_t *fid, *tn, *fn, *tl, *fl, *lt, *roots, *mvt;
    int nf = sn_attr_ints(node, "nodes_featureids", &fid);
    int ntn = sn_attr_ints(node, "nodes_truenodeids", &tn), nfn = sn_attr_ints(node, "nodes_falsenodeids", &fn);
    int ntl = sn_attr_ints(node, "nodes_trueleafs", &tl), nfl = sn_attr_ints(node, "nodes_falseleafs", &fl);
    int nlt = sn_attr_ints(node, "leaf_targetids", &lt), nr = sn_attr_ints(node, "tree_roots", &roots);
    int nmvt = sn_attr_ints(node, "nodes_missing_value_tracks_true", &mvt);
    const sn_tensor *modes = sn_attr_tensor(node, "nodes_modes");
    double *splits = NULL;
    int64_t ns, nw, nm;
    int rc = te_reals(node, "nodes_splits", &ns, &splits);
    if (rc == SNUG_OK)
        rc = te_reals(node, "leaf_weights", &nw, &s->leaf_w);
    if (rc == SNUG_OK)
        rc = te_reals(node, "membership_values", &nm, &s->members);
    if (rc != SNUG_OK) {
        sn_free(splits);
        return sn_kfail(err, node, SNUG_ERR_OOM, "out of memory");
    }
    rc = SNUG_ERR_INVALID_ARG;
    if (nf < 0 || ntn != nf || nfn != nf || ntl != nf || nfl != nf || ns != nf || !modes ||
        sn_tensor_numel(modes) != nf || (nmvt >= 0 && nmvt != nf)) {
        sn_kfail(err, node, rc, "the nodes_* attributes must all be present with one value per node");
        goto fail;
    }
    if (nlt < 0 || nw != nlt || nr < 1) {
        sn_kfail(err, node, rc, "leaf_targetids, leaf_weights and tree_roots are required, one weight per leaf");
        goto fail;
    }
    s->n_nodes = nf;
    s->n_leaves = nlt;
    s->n_trees = nr;
    s->agg = (int)sn_attr_int(node, "aggregate_function", TE_SUM);
    s->post = (int)sn_attr_int(node, "post_transform", TE_PT_NONE);
    if (s->agg < TE_AVG || s->agg > TE_MAX || s->post < TE_PT_NONE || s->post > TE_PT_SOFTMAX_ZERO) {
        sn_kfail(err, node, s->post == TE_PT_PROBIT ? SNUG_ERR_UNSUPPORTED : rc,
                 "aggregate_function %d / post_transform %d not supported", s->agg, s->post);
        goto fail;
    }
    s->nodes = sn_calloc((size_t)(nf ? nf : 1), sizeof *s->nodes);
    s->leaf_t = sn_malloc(sizeof(int64_t) * (size_t)(nlt ? nlt : 1));
    s->roots = sn_malloc(sizeof(int64_t) * (size_t)nr);
    s->root_leaf = sn_calloc((size_t)nr, sizeof(bool));
    if (!s->nodes || !s->leaf_t || !s->roots || !s->root_leaf) {
        rc = sn_kfail(err, node, SNUG_ERR_OOM, "out of memory");
        goto fail;
    }
    for (int64_t i = 0; i < nlt; i++) {
        if (lt[i] < 0 || lt[i] >= s->n_targets) {
            sn_kfail(err, node, rc, "leaf %lld targets %lld, not in [0, %lld)", (long long)i, (long long)lt[i],
                     (long long)s->n_targets);
            goto fail;
        }
        s->leaf_t[i] = lt[i];
    }
    int64_t mpos = 0;
    s->max_feature = -1;
    for (int64_t i = 0; i < nf; i++) {
        te_node *n = &s->nodes[i];
        n->feature = fid[i];
        n->split = splits[i];
        n->mode = (int)sn_load_i64(modes->dtype, modes->data, (size_t)i);
        n->missing_true = nmvt >= 0 && mvt[i] != 0;
        n->child[0] = fn[i], n->child[1] = tn[i];
        n->leaf[0] = fl[i] != 0, n->leaf[1] = tl[i] != 0;
        if (n->mode < TE_LEQ || n->mode > TE_MEMBER || n->feature < 0) {
            sn_kfail(err, node, rc, "node %lld: bad mode %d or feature %lld", (long long)i, n->mode,
                     (long long)n->feature);
            goto fail;
        }
        s->max_feature = sn_imax(s->max_feature, n->feature);
        for (int b = 0; b < 2; b++)
            if (n->child[b] < 0 || n->child[b] >= (n->leaf[b] ? nlt : nf)) {
                sn_kfail(err, node, rc, "node %lld: child %lld out of range", (long long)i, (long long)n->child[b]);
                goto fail;
            }
        if (n->mode == TE_MEMBER) {
            /* the next NaN-terminated run of membership_values */
            n->set_begin = mpos;
            while (mpos < nm && !isnan(s->members[mpos]))
                mpos++;
            if (mpos >= nm) {
                sn_kfail(err, node, rc, "membership_values has no set for node %lld", (long long)i);
                goto fail;
            }
            n->set_end = mpos++;
        }
    }
    for (int64_t t = 0; t < nr; t++) {
        int64_t r = roots[t];
        if (r < 0 || r >= nf) {
            sn_kfail(err, node, rc, "tree root %lld out of range", (long long)r);
            goto fail;
        }
        s->roots[t] = r;
        const te_node *n = &s->nodes[r];
        /* a tree that is only a leaf: both branches the same leaf (the
         * reference then takes leaf index = root index) */
        s->root_leaf[t] = n->leaf[0] && n->leaf[1] && n->child[0] == n->child[1];
        if (s->root_leaf[t] && r >= nlt) {
            sn_kfail(err, node, rc, "one-leaf tree %lld: leaf %lld out of range", (long long)t, (long long)r);
            goto fail;
        }
    }
    sn_free(splits);
    return SNUG_OK;
fail:
    sn_free(splits);
    return rc == SNUG_ERR_OOM ? rc : err->code;
}

static int ml_tree_prepare(sn_prep_ctx *c) {
    te_state *s = sn_calloc(1, sizeof *s);
    if (!s)
        return sn_kfail(c->err, c->node, SNUG_ERR_OOM, "out of memory");
    s->n_targets = sn_attr_int(c->node, "n_targets", 1);
    int rc = te_build(c->node, c->err, s);
    if (rc != SNUG_OK) {
        ml_tree_free(s);
        return rc;
    }
    c->state = s;
    return SNUG_OK;
}

static bool te_test(const te_state *s, const te_node *n, double v) {
    if (isnan(v) && n->missing_true)
        return true;
    switch (n->mode) {
    case TE_LEQ: return v <= n->split;
    case TE_LT: return v < n->split;
    case TE_GTE: return v >= n->split;
    case TE_GT: return v > n->split;
    case TE_EQ: return v == n->split;
    case TE_NEQ: return v != n->split;
    default:
        for (int64_t k = n->set_begin; k < n->set_end; k++)
            if (s->members[k] == v)
                return true;
        return false;
    }
}

static int ml_tree_run(sn_kctx *c) {
    const sn_tensor *x = c->in[0];
    sn_tensor *y = c->out[0];
    const te_state *s = c->state;
    int64_t N = x->dims[0], F = x->dims[1], T = s->n_targets;
    if (s->max_feature >= F)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "a node reads feature %lld, X has %lld",
                        (long long)s->max_feature, (long long)F);
    double init = s->agg == TE_MIN ? (x->dtype == SN_F64 ? DBL_MAX : FLT_MAX)
                  : s->agg == TE_MAX ? (x->dtype == SN_F64 ? -DBL_MAX : -FLT_MAX) : 0.0;
    for (int64_t r = 0; r < N; r++) {
        double acc[64], *out = acc;
        /* accumulate straight into the output row when targets are many */
        bool direct = T > 64;
        for (int64_t t = 0; t < T; t++) {
            if (direct)
                sn_store_f64(y->dtype, y->data, (size_t)(r * T + t), init);
            else
                out[t] = init;
        }
        for (int64_t tr = 0; tr < s->n_trees; tr++) {
            int64_t leaf;
            if (s->root_leaf[tr]) {
                leaf = s->roots[tr];
            } else {
                int64_t cur = s->roots[tr];
                /* at most n_nodes steps: a malformed cycle cannot hang */
                for (int64_t steps = 0;; steps++) {
                    const te_node *n = &s->nodes[cur];
                    double v = sn_load_f64(x->dtype, x->data, (size_t)(r * F + n->feature));
                    int b = te_test(s, n, v);
                    if (n->leaf[b]) {
                        leaf = n->child[b];
                        break;
                    }
                    cur = n->child[b];
                    if (steps > s->n_nodes)
                        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "tree %lld has a cycle", (long long)tr);
                }
            }
            int64_t t = s->leaf_t[leaf];
            double w = s->leaf_w[leaf];
            double cur = direct ? sn_load_f64(y->dtype, y->data, (size_t)(r * T + t)) : out[t];
            if (s->agg == TE_SUM)
                cur += w;
            else if (s->agg == TE_AVG)
                cur += w / (double)s->n_trees;
            else if (s->agg == TE_MIN)
                cur = w < cur ? w : cur;
            else
                cur = w > cur ? w : cur;
            if (direct)
                sn_store_f64(y->dtype, y->data, (size_t)(r * T + t), cur);
            else
                out[t] = cur;
        }
        /* post transform over the row */
        double mx = -INFINITY, sum = 0;
        for (int64_t t = 0; t < T; t++) {
            double v = direct ? sn_load_f64(y->dtype, y->data, (size_t)(r * T + t)) : out[t];
            mx = v > mx ? v : mx;
        }
        for (int64_t t = 0; t < T && (s->post == TE_PT_SOFTMAX || s->post == TE_PT_SOFTMAX_ZERO); t++) {
            double v = direct ? sn_load_f64(y->dtype, y->data, (size_t)(r * T + t)) : out[t];
            if (!(s->post == TE_PT_SOFTMAX_ZERO && v == 0))
                sum += exp(v - mx);
        }
        for (int64_t t = 0; t < T; t++) {
            double v = direct ? sn_load_f64(y->dtype, y->data, (size_t)(r * T + t)) : out[t];
            if (s->post == TE_PT_LOGISTIC)
                v = 1.0 / (1.0 + exp(-v));
            else if (s->post == TE_PT_SOFTMAX)
                v = exp(v - mx) / sum;
            else if (s->post == TE_PT_SOFTMAX_ZERO)
                v = v == 0 ? 0 : exp(v - mx) / sum;
            sn_store_f64(y->dtype, y->data, (size_t)(r * T + t), v);
        }
    }
    return SNUG_OK;
}

#define ML "ai.onnx.ml"

const sn_op_def sn_ops_ml[] = {
    {.domain = ML, .name = "Binarizer", .since_version = 1, .infer = ml_binarizer_infer, .flags = SN_OP_INPLACE0,
     .cpu = {.run = ml_binarizer_run}},
    {.domain = ML, .name = "ArrayFeatureExtractor", .since_version = 1, .required = 0x3, .infer = ml_afe_infer,
     .cpu = {.run = ml_afe_run}},
    {.domain = ML, .name = "LabelEncoder", .since_version = 2, .infer = ml_labelenc_infer,
     .cpu = {.prepare = ml_labelenc_prepare, .run = ml_labelenc_run, .free_state = ml_labelenc_free}},
    {.domain = ML, .name = "TreeEnsemble", .since_version = 5, .infer = ml_tree_infer,
     .cpu = {.prepare = ml_tree_prepare, .run = ml_tree_run, .free_state = ml_tree_free}},
    {0},
};
