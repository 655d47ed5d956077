/* ModelProto → sn_model. Every message is read in two passes over the same
 * bytes: the first counts the repeated fields so each array is allocated
 * once at its final size in the arena, the second fills them in. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx/load_impl.h"

#define NEW(c, T, n) ((T *)sn_arena_alloc((c)->a, sizeof(T) * (size_t)(n), _Alignof(T)))

const char *sn_ld_domain(const char *d) { return strcmp(d, "ai.onnx") ? d : ""; }

static int want_len(sn_pb *r, const sn_pb_field *f, const char *what) {
    if (f->wire != SN_PB_LEN)
        return sn_pb_fail(r, f->off, "%s (field %u) has wire type %d", what, f->num, f->wire);
    return SNUG_OK;
}

static int get_str(sn_ld *c, sn_pb *r, const sn_pb_field *f, const char *what, const char **out) {
    SN_TRY(want_len(r, f, what));
    char *s = sn_ld_str(c, f);
    if (!s)
        return sn_ld_oom(c);
    *out = s;
    return SNUG_OK;
}

/* Counts that must fit an int (arrays are indexed by int in model.h). */
static int bump(sn_ld *c, sn_pb *r, const sn_pb_field *f, int *n, size_t by) {
    if (by > (size_t)(INT32_MAX - *n))
        return sn_pb_fail(r, f->off, "too many repeated values");
    (void)c;
    *n += (int)by;
    return SNUG_OK;
}

int sn_ld_kv(sn_ld *c, sn_pb *r, sn_kv *kv) {
    sn_pb_field f;
    kv->key = kv->value = "";
    for (;;) {
        SN_TRY(sn_pb_next(r, &f));
        if (!f.num)
            return SNUG_OK;
        if (f.num == 1)
            SN_TRY(get_str(c, r, &f, "key", &kv->key));
        else if (f.num == 2)
            SN_TRY(get_str(c, r, &f, "value", &kv->value));
    }
}

/* ---- TypeProto ------------------------------------------------------- */

static int ld_shape(sn_ld *c, sn_pb *r, sn_type *t) {
    sn_pb_field f;
    t->rank = 0;
    for (;;) {
        SN_TRY(sn_pb_next(r, &f));
        if (!f.num)
            return SNUG_OK;
        if (f.num != 1)
            continue;
        if (t->rank >= SN_MAX_RANK)
            return sn_errf(c->err, SNUG_ERR_UNSUPPORTED,
                           "shape at byte %zu has rank above %d", f.off, SN_MAX_RANK);
        sn_pb d;
        SN_TRY(sn_pb_sub(r, &f, "TensorShapeProto.Dimension", &d));
        int i = t->rank++;
        t->dims[i] = -1;
        t->dim_params[i] = NULL;
        sn_pb_field g;
        for (;;) {
            SN_TRY(sn_pb_next(&d, &g));
            if (!g.num)
                break;
            if (g.num == 1) {
                int64_t v;
                SN_TRY(sn_pb_int(&d, &g, &v));
                t->dims[i] = v >= 0 ? v : -1;
            } else if (g.num == 2) {
                SN_TRY(get_str(c, &d, &g, "dim_param", &t->dim_params[i]));
                t->dims[i] = -1;
            }
        }
    }
}

static int ld_inner_type(sn_ld *c, sn_pb *r, const sn_pb_field *f, sn_type **out) {
    sn_pb sub;
    SN_TRY(sn_pb_sub(r, f, "TypeProto", &sub));
    sn_type *t = NEW(c, sn_type, 1);
    if (!t)
        return sn_ld_oom(c);
    SN_TRY(sn_ld_type(c, &sub, t));
    *out = t;
    return SNUG_OK;
}

int sn_ld_type(sn_ld *c, sn_pb *r, sn_type *t) {
    sn_pb_field f, g;
    memset(t, 0, sizeof *t);
    t->rank = -1;
    for (;;) {
        SN_TRY(sn_pb_next(r, &f));
        if (!f.num)
            return SNUG_OK;
        sn_pb sub;
        int64_t v;
        switch (f.num) {
        case 1: /* tensor_type */
        case 8: /* sparse_tensor_type */
            t->kind = f.num == 1 ? SN_TYPE_TENSOR : SN_TYPE_SPARSE;
            SN_TRY(sn_pb_sub(r, &f, "TypeProto.Tensor", &sub));
            for (;;) {
                SN_TRY(sn_pb_next(&sub, &g));
                if (!g.num)
                    break;
                if (g.num == 1) {
                    SN_TRY(sn_pb_int(&sub, &g, &v));
                    t->elem = sn_dtype_valid((int)v) && v == (int)v ? (sn_dtype)v : SN_UNDEFINED;
                } else if (g.num == 2) {
                    sn_pb sh;
                    SN_TRY(sn_pb_sub(&sub, &g, "TensorShapeProto", &sh));
                    SN_TRY(ld_shape(c, &sh, t));
                }
            }
            break;
        case 4: /* sequence_type */
        case 9: /* optional_type */
            t->kind = f.num == 4 ? SN_TYPE_SEQUENCE : SN_TYPE_OPTIONAL;
            SN_TRY(sn_pb_sub(r, &f, f.num == 4 ? "TypeProto.Sequence" : "TypeProto.Optional", &sub));
            for (;;) {
                SN_TRY(sn_pb_next(&sub, &g));
                if (!g.num)
                    break;
                if (g.num == 1)
                    SN_TRY(ld_inner_type(c, &sub, &g, &t->inner));
            }
            break;
        case 5: /* map_type */
            t->kind = SN_TYPE_MAP;
            SN_TRY(sn_pb_sub(r, &f, "TypeProto.Map", &sub));
            for (;;) {
                SN_TRY(sn_pb_next(&sub, &g));
                if (!g.num)
                    break;
                if (g.num == 1) {
                    SN_TRY(sn_pb_int(&sub, &g, &v));
                    t->elem = sn_dtype_valid((int)v) && v == (int)v ? (sn_dtype)v : SN_UNDEFINED;
                } else if (g.num == 2) {
                    SN_TRY(ld_inner_type(c, &sub, &g, &t->inner));
                }
            }
            break;
        default: break;
        }
    }
}

static int ld_value_info(sn_ld *c, sn_pb *r, sn_value_info *vi) {
    sn_pb_field f;
    vi->name = "";
    vi->type.rank = -1;
    for (;;) {
        SN_TRY(sn_pb_next(r, &f));
        if (!f.num)
            return SNUG_OK;
        if (f.num == 1) {
            SN_TRY(get_str(c, r, &f, "name", &vi->name));
        } else if (f.num == 2) {
            sn_pb sub;
            SN_TRY(sn_pb_sub(r, &f, "TypeProto", &sub));
            SN_TRY(sn_ld_type(c, &sub, &vi->type));
        }
    }
}

/* ---- AttributeProto ---------------------------------------------------- */

enum {
    AT_NAME = 1, AT_F = 2, AT_I = 3, AT_S = 4, AT_T = 5, AT_G = 6, AT_FLOATS = 7, AT_INTS = 8,
    AT_STRINGS = 9, AT_TENSORS = 10, AT_GRAPHS = 11, AT_TP = 14, AT_TPS = 15, AT_TYPE = 20,
    AT_REF = 21, AT_SPARSE = 22, AT_SPARSES = 23,
};

static int ld_sub_tensor(sn_ld *c, sn_pb *r, const sn_pb_field *f, sn_tensor *t) {
    sn_pb sub;
    if (f->num == AT_SPARSE || f->num == AT_SPARSES) {
        SN_TRY(sn_pb_sub(r, f, "SparseTensorProto", &sub));
        return sn_ld_sparse(c, &sub, t, NULL);
    }
    SN_TRY(sn_pb_sub(r, f, "TensorProto", &sub));
    return sn_ld_tensor(c, &sub, t, NULL, NULL);
}

static int ld_sub_graph(sn_ld *c, sn_pb *r, const sn_pb_field *f, sn_pgraph **out) {
    sn_pb sub;
    SN_TRY(sn_pb_sub(r, f, "GraphProto", &sub));
    sn_pgraph *g = NEW(c, sn_pgraph, 1);
    if (!g)
        return sn_ld_oom(c);
    SN_TRY(sn_ld_graph(c, &sub, g));
    *out = g;
    return SNUG_OK;
}

static int ld_attr(sn_ld *c, sn_pb *r, sn_attr *a) {
    sn_pb start = *r;
    sn_pb_field f;
    int nf = 0, ni = 0, ns = 0, nt = 0, ng = 0, ntp = 0;
    int64_t type = 0;
    uint32_t seen = 0; /* which single-value fields appeared, by number */
    memset(a, 0, sizeof *a);
    a->name = "";
    for (;;) {
        SN_TRY(sn_pb_next(r, &f));
        if (!f.num)
            break;
        size_t n;
        if (f.num < 32)
            seen |= 1u << f.num;
        switch (f.num) {
        case AT_FLOATS:
            SN_TRY(sn_pb_count_fixed(r, &f, 4, &n));
            SN_TRY(bump(c, r, &f, &nf, n));
            break;
        case AT_INTS:
            SN_TRY(sn_pb_count_varints(r, &f, &n));
            SN_TRY(bump(c, r, &f, &ni, n));
            break;
        case AT_STRINGS: SN_TRY(bump(c, r, &f, &ns, 1)); break;
        case AT_TENSORS: case AT_SPARSES: SN_TRY(bump(c, r, &f, &nt, 1)); break;
        case AT_GRAPHS: SN_TRY(bump(c, r, &f, &ng, 1)); break;
        case AT_TPS: SN_TRY(bump(c, r, &f, &ntp, 1)); break;
        case AT_TYPE: SN_TRY(sn_pb_int(r, &f, &type)); break;
        default: break;
        }
    }
    if (type == 0) { /* IR < 0.0.2: the field present tells the type */
        static const struct { int field, type; } k_infer[] = {
            {AT_F, SN_ATTR_FLOAT}, {AT_I, SN_ATTR_INT}, {AT_S, SN_ATTR_STRING},
            {AT_T, SN_ATTR_TENSOR}, {AT_G, SN_ATTR_GRAPH}, {AT_SPARSE, SN_ATTR_SPARSE_TENSOR},
            {AT_TP, SN_ATTR_TYPE_PROTO}, {AT_FLOATS, SN_ATTR_FLOATS}, {AT_INTS, SN_ATTR_INTS},
            {AT_STRINGS, SN_ATTR_STRINGS}, {AT_TENSORS, SN_ATTR_TENSORS},
            {AT_GRAPHS, SN_ATTR_GRAPHS}, {AT_SPARSES, SN_ATTR_SPARSE_TENSORS},
            {AT_TPS, SN_ATTR_TYPE_PROTOS},
        };
        for (size_t i = 0; i < sizeof k_infer / sizeof k_infer[0] && !type; i++)
            if (seen & (1u << k_infer[i].field))
                type = k_infer[i].type;
    }
    if (type < 0 || type > SN_ATTR_TYPE_PROTOS)
        return sn_errf(c->err, SNUG_ERR_UNSUPPORTED, "attribute at byte %zu: unknown type %lld",
                       sn_pb_off(r, start.p), (long long)type);
    a->type = (sn_attr_type)type;
    if ((nf && !(a->floats = NEW(c, float, nf))) || (ni && !(a->ints = NEW(c, int64_t, ni))) ||
        (ns && !(a->strings = NEW(c, sn_string, ns))) ||
        (nt && !(a->tensors = NEW(c, sn_tensor, nt))) ||
        (ng && !(a->graphs = NEW(c, sn_pgraph *, ng))) || (ntp && !(a->tps = NEW(c, sn_type, ntp))))
        return sn_ld_oom(c);
    size_t kf = 0, ki = 0;
    int ks = 0, kt = 0, kg = 0, ktp = 0;
    *r = start;
    for (;;) {
        SN_TRY(sn_pb_next(r, &f));
        if (!f.num)
            break;
        sn_pb sub;
        switch (f.num) {
        case AT_NAME: SN_TRY(get_str(c, r, &f, "name", &a->name)); break;
        case AT_REF: SN_TRY(get_str(c, r, &f, "ref_attr_name", &a->ref_attr_name)); break;
        case AT_F: SN_TRY(sn_pb_float(r, &f, &a->f)); break;
        case AT_I: SN_TRY(sn_pb_int(r, &f, &a->i)); break;
        case AT_S:
            SN_TRY(get_str(c, r, &f, "s", &a->s.ptr));
            a->s.len = f.len;
            break;
        case AT_T:
        case AT_SPARSE:
            if (!a->t && !(a->t = NEW(c, sn_tensor, 1)))
                return sn_ld_oom(c);
            SN_TRY(ld_sub_tensor(c, r, &f, a->t));
            break;
        case AT_G: SN_TRY(ld_sub_graph(c, r, &f, &a->g)); break;
        case AT_TP:
            SN_TRY(sn_pb_sub(r, &f, "TypeProto", &sub));
            if (!a->tp && !(a->tp = NEW(c, sn_type, 1)))
                return sn_ld_oom(c);
            SN_TRY(sn_ld_type(c, &sub, a->tp));
            break;
        case AT_FLOATS: SN_TRY(sn_pb_get_fixed(r, &f, 4, a->floats, (size_t)nf, &kf)); break;
        case AT_INTS:
            /* int64 and uint64 have the same size: read in place. */
            SN_TRY(sn_pb_get_varints(r, &f, (uint64_t *)(void *)a->ints, (size_t)ni, &ki));
            break;
        case AT_STRINGS: {
            const char *s = NULL;
            SN_TRY(get_str(c, r, &f, "strings", &s));
            a->strings[ks].ptr = s;
            a->strings[ks++].len = f.len;
            break;
        }
        case AT_TENSORS: case AT_SPARSES: SN_TRY(ld_sub_tensor(c, r, &f, &a->tensors[kt++])); break;
        case AT_GRAPHS: SN_TRY(ld_sub_graph(c, r, &f, &a->graphs[kg++])); break;
        case AT_TPS:
            SN_TRY(sn_pb_sub(r, &f, "TypeProto", &sub));
            SN_TRY(sn_ld_type(c, &sub, &a->tps[ktp++]));
            break;
        default: break;
        }
    }
    switch (a->type) {
    case SN_ATTR_FLOATS: a->n = nf; break;
    case SN_ATTR_INTS: a->n = ni; break;
    case SN_ATTR_STRINGS: a->n = ns; break;
    case SN_ATTR_TENSORS: case SN_ATTR_SPARSE_TENSORS: a->n = nt; break;
    case SN_ATTR_GRAPHS: a->n = ng; break;
    case SN_ATTR_TYPE_PROTOS: a->n = ntp; break;
    default: break;
    }
    /* the value of a tensor, graph or type attribute is a pointer no reader checks */
    if (!a->ref_attr_name && ((a->type == SN_ATTR_GRAPH && !a->g) || ((a->type == SN_ATTR_TENSOR || a->type == SN_ATTR_SPARSE_TENSOR) && !a->t) ||
        (a->type == SN_ATTR_TYPE_PROTO && !a->tp)))
        return sn_errf(c->err, SNUG_ERR_PARSE, "attribute '%s' at byte %zu: of type %lld without its value", a->name,
                       sn_pb_off(r, start.p), (long long)type);
    if (!a->s.ptr)
        a->s.ptr = "";
    return SNUG_OK;
}

/* ---- NodeProto ---------------------------------------------------------- */

int sn_ld_node(sn_ld *c, sn_pb *r, sn_pnode *n) {
    sn_pb start = *r;
    sn_pb_field f;
    memset(n, 0, sizeof *n);
    n->name = n->op_type = n->domain = "";
    for (;;) {
        SN_TRY(sn_pb_next(r, &f));
        if (!f.num)
            break;
        if (f.num == 1)
            SN_TRY(bump(c, r, &f, &n->n_in, 1));
        else if (f.num == 2)
            SN_TRY(bump(c, r, &f, &n->n_out, 1));
        else if (f.num == 5)
            SN_TRY(bump(c, r, &f, &n->n_attr, 1));
        else if (f.num == 9)
            SN_TRY(bump(c, r, &f, &n->n_meta, 1));
    }
    if ((n->n_in && !(n->inputs = NEW(c, const char *, n->n_in))) ||
        (n->n_out && !(n->outputs = NEW(c, const char *, n->n_out))) ||
        (n->n_attr && !(n->attrs = NEW(c, sn_attr, n->n_attr))) ||
        (n->n_meta && !(n->meta = NEW(c, sn_kv, n->n_meta))))
        return sn_ld_oom(c);
    int ki = 0, ko = 0, ka = 0, km = 0;
    *r = start;
    for (;;) {
        SN_TRY(sn_pb_next(r, &f));
        if (!f.num)
            break;
        sn_pb sub;
        switch (f.num) {
        case 1: SN_TRY(get_str(c, r, &f, "input", &n->inputs[ki++])); break;
        case 2: SN_TRY(get_str(c, r, &f, "output", &n->outputs[ko++])); break;
        case 3: SN_TRY(get_str(c, r, &f, "name", &n->name)); break;
        case 4: SN_TRY(get_str(c, r, &f, "op_type", &n->op_type)); break;
        case 7:
            SN_TRY(get_str(c, r, &f, "domain", &n->domain));
            n->domain = sn_ld_domain(n->domain);
            break;
        case 5:
            SN_TRY(sn_pb_sub(r, &f, "AttributeProto", &sub));
            SN_TRY(ld_attr(c, &sub, &n->attrs[ka++]));
            break;
        case 9:
            SN_TRY(sn_pb_sub(r, &f, "StringStringEntryProto", &sub));
            SN_TRY(sn_ld_kv(c, &sub, &n->meta[km++]));
            break;
        default: break;
        }
    }
    return SNUG_OK;
}

/* ---- GraphProto --------------------------------------------------------- */

int sn_ld_graph(sn_ld *c, sn_pb *r, sn_pgraph *g) {
    sn_pb start = *r;
    sn_pb_field f;
    memset(g, 0, sizeof *g);
    g->name = "";
    for (;;) {
        SN_TRY(sn_pb_next(r, &f));
        if (!f.num)
            break;
        switch (f.num) {
        case 1: SN_TRY(bump(c, r, &f, &g->n_node, 1)); break;
        case 5: case 15:
            SN_TRY(bump(c, r, &f, &g->n_init, 1));
            /* Reading the tag mapped the file pages around it: unmap them
             * (see place_bytes) so counting does not fill resident memory. */
            if (c->m && f.len >= SN_ALIGN_COPY_MAX)
                sn_model_release_bytes(c->m, f.data, f.len);
            break;
        case 11: SN_TRY(bump(c, r, &f, &g->n_input, 1)); break;
        case 12: SN_TRY(bump(c, r, &f, &g->n_output, 1)); break;
        case 13: SN_TRY(bump(c, r, &f, &g->n_value_info, 1)); break;
        default: break;
        }
    }
    if ((g->n_node && !(g->nodes = NEW(c, sn_pnode, g->n_node))) ||
        (g->n_init && !(g->inits = NEW(c, sn_init, g->n_init))) ||
        (g->n_input && !(g->inputs = NEW(c, sn_value_info, g->n_input))) ||
        (g->n_output && !(g->outputs = NEW(c, sn_value_info, g->n_output))) ||
        (g->n_value_info && !(g->value_info = NEW(c, sn_value_info, g->n_value_info))))
        return sn_ld_oom(c);
    int kn = 0, kin = 0, ki = 0, ko = 0, kv = 0;
    *r = start;
    for (;;) {
        SN_TRY(sn_pb_next(r, &f));
        if (!f.num)
            break;
        sn_pb sub;
        int rc = SNUG_OK;
        switch (f.num) {
        case 1:
            SN_TRY(sn_pb_sub(r, &f, "NodeProto", &sub));
            rc = sn_ld_node(c, &sub, &g->nodes[kn]);
            if (rc)
                return sn_err_prefix(c->err, "node %d '%s' (%s)", kn, g->nodes[kn].name,
                                     g->nodes[kn].op_type);
            kn++;
            break;
        case 2: SN_TRY(get_str(c, r, &f, "name", &g->name)); break;
        case 5: {
            sn_init *in = &g->inits[kin++];
            SN_TRY(sn_pb_sub(r, &f, "TensorProto", &sub));
            /* Large misaligned weights stay in the map (see sn_init.misaligned). */
            int save = c->no_align_copy;
            c->no_align_copy = 2;
            rc = sn_ld_tensor(c, &sub, &in->t, in, NULL);
            c->no_align_copy = save;
            SN_TRY(rc);
            break;
        }
        case 15: {
            sn_init *in = &g->inits[kin++];
            SN_TRY(sn_pb_sub(r, &f, "SparseTensorProto", &sub));
            rc = sn_ld_sparse(c, &sub, &in->t, &in->name);
            if (rc)
                return sn_err_prefix(c->err, "sparse_initializer '%s'", in->name ? in->name : "");
            /* Densified into the arena: no bytes in the file to point at. */
            in->nbytes = sn_tensor_nbytes(&in->t);
            if (c->m)
                c->m->weight_bytes += in->nbytes;
            break;
        }
        case 11: case 12: case 13: {
            sn_value_info *vi = f.num == 11 ? &g->inputs[ki++]
                              : f.num == 12 ? &g->outputs[ko++] : &g->value_info[kv++];
            SN_TRY(sn_pb_sub(r, &f, "ValueInfoProto", &sub));
            SN_TRY(ld_value_info(c, &sub, vi));
            break;
        }
        default: break;
        }
    }
    return SNUG_OK;
}

/* ---- FunctionProto ----------------------------------------------------- */

static int ld_opset(sn_ld *c, sn_pb *r, sn_opset *o) {
    sn_pb_field f;
    o->domain = "";
    o->version = 0;
    for (;;) {
        SN_TRY(sn_pb_next(r, &f));
        if (!f.num)
            break;
        if (f.num == 1)
            SN_TRY(get_str(c, r, &f, "domain", &o->domain));
        else if (f.num == 2)
            SN_TRY(sn_pb_int(r, &f, &o->version));
    }
    o->domain = sn_ld_domain(o->domain);
    return SNUG_OK;
}

int sn_ld_function(sn_ld *c, sn_pb *r, sn_ld_func *fn) {
    sn_pb start = *r;
    sn_pb_field f;
    memset(fn, 0, sizeof *fn);
    fn->name = fn->domain = fn->overload = "";
    for (;;) {
        SN_TRY(sn_pb_next(r, &f));
        if (!f.num)
            break;
        switch (f.num) {
        case 4: SN_TRY(bump(c, r, &f, &fn->n_in, 1)); break;
        case 5: SN_TRY(bump(c, r, &f, &fn->n_out, 1)); break;
        case 11: SN_TRY(bump(c, r, &f, &fn->n_attr_default, 1)); break;
        case 7: SN_TRY(bump(c, r, &f, &fn->n_node, 1)); break;
        case 9: SN_TRY(bump(c, r, &f, &fn->n_opset, 1)); break;
        default: break;
        }
    }
    if ((fn->n_in && !(fn->inputs = NEW(c, const char *, fn->n_in))) ||
        (fn->n_out && !(fn->outputs = NEW(c, const char *, fn->n_out))) ||
        (fn->n_attr_default && !(fn->attr_default = NEW(c, sn_attr, fn->n_attr_default))) ||
        (fn->n_node && !(fn->nodes = NEW(c, sn_pnode, fn->n_node))) ||
        (fn->n_opset && !(fn->opsets = NEW(c, sn_opset, fn->n_opset))))
        return sn_ld_oom(c);
    int ki = 0, ko = 0, ka = 0, kn = 0, kp = 0;
    *r = start;
    for (;;) {
        SN_TRY(sn_pb_next(r, &f));
        if (!f.num)
            break;
        sn_pb sub;
        switch (f.num) {
        case 1: SN_TRY(get_str(c, r, &f, "name", &fn->name)); break;
        case 10:
            SN_TRY(get_str(c, r, &f, "domain", &fn->domain));
            fn->domain = sn_ld_domain(fn->domain);
            break;
        case 13: SN_TRY(get_str(c, r, &f, "overload", &fn->overload)); break;
        case 4: SN_TRY(get_str(c, r, &f, "input", &fn->inputs[ki++])); break;
        case 5: SN_TRY(get_str(c, r, &f, "output", &fn->outputs[ko++])); break;
        case 11:
            SN_TRY(sn_pb_sub(r, &f, "AttributeProto", &sub));
            SN_TRY(ld_attr(c, &sub, &fn->attr_default[ka++]));
            break;
        case 7:
            SN_TRY(sn_pb_sub(r, &f, "NodeProto", &sub));
            if (sn_ld_node(c, &sub, &fn->nodes[kn]))
                return sn_err_prefix(c->err, "function '%s' node %d", fn->name, kn);
            kn++;
            break;
        case 9:
            SN_TRY(sn_pb_sub(r, &f, "OperatorSetIdProto", &sub));
            SN_TRY(ld_opset(c, &sub, &fn->opsets[kp++]));
            break;
        default: break;
        }
    }
    return SNUG_OK;
}

/* ---- ModelProto -------------------------------------------------------- */

static int add_opset(sn_ld *c, const sn_opset *o) {
    sn_model *m = c->m;
    for (int i = 0; i < m->n_opset; i++)
        if (!strcmp(m->opsets[i].domain, o->domain))
            return SNUG_OK;
    sn_opset *n = NEW(c, sn_opset, m->n_opset + 1);
    if (!n)
        return sn_ld_oom(c);
    if (m->n_opset)
        memcpy(n, m->opsets, sizeof *n * (size_t)m->n_opset);
    n[m->n_opset++] = *o;
    m->opsets = n;
    return SNUG_OK;
}

static int ld_model(sn_ld *c, const uint8_t *buf, size_t len) {
    sn_model *m = c->m;
    sn_pb r;
    sn_pb_init(&r, buf, buf, len, "ModelProto", c->err);
    sn_pb start = r;
    sn_pb_field f, graph = {0};
    m->producer_name = m->producer_version = m->domain = m->doc_string = "";
    for (;;) {
        SN_TRY(sn_pb_next(&r, &f));
        if (!f.num)
            break;
        switch (f.num) {
        case 8: SN_TRY(bump(c, &r, &f, &m->n_opset, 1)); break;
        case 14: SN_TRY(bump(c, &r, &f, &m->n_meta, 1)); break;
        case 25: SN_TRY(bump(c, &r, &f, &c->n_func, 1)); break;
        case 7: graph = f; break;
        default: break;
        }
    }
    if (!graph.num)
        return sn_errf(c->err, SNUG_ERR_PARSE, "not an ONNX model: ModelProto has no graph");
    if ((m->n_opset && !(m->opsets = NEW(c, sn_opset, m->n_opset))) ||
        (m->n_meta && !(m->meta = NEW(c, sn_kv, m->n_meta))) ||
        (c->n_func && !(c->funcs = NEW(c, sn_ld_func, c->n_func))))
        return sn_ld_oom(c);
    int ko = 0, km = 0, kf = 0;
    r = start;
    for (;;) {
        SN_TRY(sn_pb_next(&r, &f));
        if (!f.num)
            break;
        sn_pb sub;
        switch (f.num) {
        case 1: SN_TRY(sn_pb_int(&r, &f, &m->ir_version)); break;
        case 2: SN_TRY(get_str(c, &r, &f, "producer_name", &m->producer_name)); break;
        case 3: SN_TRY(get_str(c, &r, &f, "producer_version", &m->producer_version)); break;
        case 4: SN_TRY(get_str(c, &r, &f, "domain", &m->domain)); break;
        case 5: SN_TRY(sn_pb_int(&r, &f, &m->model_version)); break;
        case 6: SN_TRY(get_str(c, &r, &f, "doc_string", &m->doc_string)); break;
        case 8:
            SN_TRY(sn_pb_sub(&r, &f, "OperatorSetIdProto", &sub));
            SN_TRY(ld_opset(c, &sub, &m->opsets[ko++]));
            break;
        case 14:
            SN_TRY(sn_pb_sub(&r, &f, "StringStringEntryProto", &sub));
            SN_TRY(sn_ld_kv(c, &sub, &m->meta[km++]));
            break;
        case 25:
            SN_TRY(sn_pb_sub(&r, &f, "FunctionProto", &sub));
            SN_TRY(sn_ld_function(c, &sub, &c->funcs[kf++]));
            break;
        default: break;
        }
    }
    sn_pb sub;
    SN_TRY(sn_pb_sub(&r, &graph, "GraphProto", &sub));
    if (!(m->graph = NEW(c, sn_pgraph, 1)))
        return sn_ld_oom(c);
    SN_TRY(sn_ld_graph(c, &sub, m->graph));
    for (int i = 0; i < c->n_func; i++)
        for (int j = 0; j < c->funcs[i].n_opset; j++)
            SN_TRY(add_opset(c, &c->funcs[i].opsets[j]));
    if (c->n_func)
        SN_TRY(sn_ld_inline(c, m->graph));
    return SNUG_OK;
}

/* ---- public ------------------------------------------------------------ */

static int model_new(sn_model **out, sn_err *err) {
    sn_model *m = sn_calloc(1, sizeof *m);
    struct sn_model_priv *pv = sn_calloc(1, sizeof *pv);
    if (!m || !pv) {
        sn_free(m);
        sn_free(pv);
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    }
    m->priv = pv;
    pv->fd = -1;
    m->path = m->dir = "";
    *out = m;
    return SNUG_OK;
}

static int parse(sn_model *m, const void *buf, size_t len, const char *dir, sn_err *err) {
    sn_ld c = {0};
    c.m = m;
    c.a = &m->priv->arena;
    c.base = buf;
    c.dir = dir;
    c.err = err;
    return ld_model(&c, buf, len);
}

int sn_model_load_buffer(const void *buf, size_t len, const char *dir, sn_model **out,
                         sn_err *err) {
    sn_model *m = NULL;
    *out = NULL;
    SN_TRY(model_new(&m, err));
    if (dir && !(m->dir = sn_arena_strn(&m->priv->arena, dir, strlen(dir)))) {
        sn_model_free(m);
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    }
    m->file_size = len;
    int rc = parse(m, buf, len, dir, err);
    if (rc) {
        sn_model_free(m);
        return rc;
    }
    *out = m;
    return SNUG_OK;
}

int sn_model_load(const char *path, sn_model **out, sn_err *err) {
    sn_model *m = NULL;
    *out = NULL;
    SN_TRY(model_new(&m, err));
    struct sn_model_priv *pv = m->priv;
    int rc = SNUG_OK;
    const char *slash = strrchr(path, '/');
    m->path = sn_arena_strn(&pv->arena, path, strlen(path));
    m->dir = !slash ? sn_arena_strn(&pv->arena, ".", 1)
                    : sn_arena_strn(&pv->arena, path, slash == path ? 1 : (size_t)(slash - path));
    if (!m->path || !m->dir) {
        rc = sn_errf(err, SNUG_ERR_OOM, "out of memory");
        goto fail;
    }
    int fd = sn_io_open(path);
    if (fd < 0) {
        rc = sn_errf(err, SNUG_ERR_IO, "cannot open model '%s': %s", path, strerror(errno));
        goto fail;
    }
    struct stat st;
    if (sn_io_fstat(fd, path, &st) != 0) {
        int e = errno;
        close(fd);
        rc = sn_errf(err, SNUG_ERR_IO, "cannot stat model '%s': %s", path, strerror(e));
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        rc = sn_errf(err, SNUG_ERR_IO, "model '%s' is not a regular file", path);
        goto fail;
    }
    if (st.st_size == 0) {
        close(fd);
        rc = sn_errf(err, SNUG_ERR_PARSE, "model '%s' is an empty file", path);
        goto fail;
    }
    void *map = sn_io_mmap(fd, path, (size_t)st.st_size);
    int e = errno;
    if (map == MAP_FAILED) {
        close(fd);
        rc = sn_errf(err, SNUG_ERR_IO, "cannot map model '%s': %s", path, strerror(e));
        goto fail;
    }
    /* The parser touches only headers and small tensors; weights are read
     * later, by the kernels that need them. Without this hint the kernel's
     * read-around would bring most of the file into this process while the
     * headers are walked. */
    madvise(map, (size_t)st.st_size, MADV_RANDOM);
    pv->map = map;
    pv->map_len = (size_t)st.st_size;
    pv->fd = fd;
    m->file_size = (uint64_t)st.st_size;
    rc = parse(m, map, pv->map_len, m->dir, err);
    if (rc) {
        sn_err_prefix(err, "%s", path);
        goto fail;
    }
    *out = m;
    return SNUG_OK;
fail:
    sn_model_free(m);
    return rc;
}

void sn_model_free(sn_model *m) {
    if (!m)
        return;
    struct sn_model_priv *pv = m->priv;
    if (pv) {
        if (pv->map)
            munmap(pv->map, pv->map_len);
        if (pv->fd >= 0)
            close(pv->fd);
        for (int i = 0; i < pv->n_ext; i++) {
            if (pv->ext[i].map)
                munmap(pv->ext[i].map, (size_t)pv->ext[i].size);
            close(pv->ext[i].fd);
        }
        sn_free(pv->ext);
        sn_arena_free(&pv->arena);
        sn_free(pv);
    }
    sn_free(m);
}

int64_t sn_model_opset(const sn_model *m, const char *domain) {
    domain = sn_ld_domain(domain ? domain : "");
    for (int i = 0; i < m->n_opset; i++)
        if (!strcmp(m->opsets[i].domain, domain))
            return m->opsets[i].version;
    return -1;
}

uint64_t sn_model_copied_tensors(const sn_model *m, uint64_t *bytes) {
    if (bytes)
        *bytes = m->priv->copied_bytes;
    return m->priv->n_copied;
}

int sn_model_inlined_calls(const sn_model *m) { return m->priv->n_inlined; }
