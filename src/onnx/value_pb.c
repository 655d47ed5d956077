/* Standalone TensorProto / SequenceProto / OptionalProto files (the ONNX
 * backend-test layout, test_data_set_N/input_K.pb). Decoding parses in
 * place, then copies the whole value (tensors, sequence item arrays,
 * strings) into one owner block so the caller's buffer may go away. */
#include <string.h>

#include "onnx/load_impl.h"

#define NEW(c, T, n) ((T *)sn_arena_alloc((c)->a, sizeof(T) * (size_t)(n), _Alignof(T)))

enum { V_DETECT = 0, V_TENSOR = 1, V_SEQUENCE = 2, V_OPTIONAL = 3 };
/* SequenceProto / OptionalProto elem_type values. */
enum { ET_UNDEFINED = 0, ET_TENSOR = 1, ET_SPARSE = 2, ET_SEQUENCE = 3, ET_MAP = 4, ET_OPTIONAL = 5 };

/* Which message the bytes hold. TensorProto uses fields 1..16 with names
 * and data at 8 and 9; Sequence/OptionalProto only 1..7, with a LEN name
 * at 1. One value in fields 3..7 fits both a sequence and an optional:
 * the typed variant decides; untyped we say optional (in the ONNX test data
 * that guess is right 7 times out of 9), and with no value at all we say
 * empty optional for elem_type UNDEFINED, else empty sequence. */
static int detect(const uint8_t *buf, size_t len) {
    sn_pb r;
    sn_pb_field f;
    sn_pb_init(&r, buf, buf, len, "value", NULL);
    int n_vals = 0;
    uint64_t elem = 0;
    for (;;) {
        if (sn_pb_next(&r, &f))
            return V_TENSOR; /* let the tensor decoder report it */
        if (!f.num)
            break;
        if (f.num >= 8 || (f.num == 1 && f.wire != SN_PB_LEN))
            return V_TENSOR;
        if (f.num == 2) {
            if (f.wire != SN_PB_VARINT || f.v > ET_OPTIONAL)
                return V_TENSOR;
            elem = f.v;
        } else if (f.num >= 3) {
            if (f.wire != SN_PB_LEN)
                return V_TENSOR;
            n_vals++;
        }
    }
    if (n_vals > 1)
        return V_SEQUENCE;
    if (n_vals == 0)
        return elem == ET_UNDEFINED ? V_OPTIONAL : V_SEQUENCE;
    return V_OPTIONAL;
}

static int dec_value(sn_ld *c, sn_pb *r, int kind, const sn_type *ty, sn_tensor *t,
                     const char **name);

static int kind_of_type(const sn_type *ty) {
    if (!ty)
        return V_DETECT;
    switch (ty->kind) {
    case SN_TYPE_TENSOR: case SN_TYPE_SPARSE: return V_TENSOR;
    case SN_TYPE_SEQUENCE: return V_SEQUENCE;
    case SN_TYPE_OPTIONAL: return V_OPTIONAL;
    default: return V_DETECT;
    }
}

/* One element of a sequence / the value of an optional (fields 3..7). */
static int dec_elem(sn_ld *c, sn_pb *r, const sn_pb_field *f, const sn_type *ty, sn_tensor *t) {
    sn_pb sub;
    switch (f->num) {
    case 3:
        SN_TRY(sn_pb_sub(r, f, "TensorProto", &sub));
        return sn_ld_tensor(c, &sub, t, NULL, NULL);
    case 4:
        SN_TRY(sn_pb_sub(r, f, "SparseTensorProto", &sub));
        return sn_ld_sparse(c, &sub, t, NULL);
    case 5:
        SN_TRY(sn_pb_sub(r, f, "SequenceProto", &sub));
        return dec_value(c, &sub, V_SEQUENCE, ty, t, NULL);
    case 7:
        SN_TRY(sn_pb_sub(r, f, "OptionalProto", &sub));
        return dec_value(c, &sub, V_OPTIONAL, ty, t, NULL);
    default:
        return sn_errf(c->err, SNUG_ERR_UNSUPPORTED, "map values (at byte %zu) are not supported",
                       f->off);
    }
}

static int dec_value(sn_ld *c, sn_pb *r, int kind, const sn_type *ty, sn_tensor *t,
                     const char **name) {
    if (kind == V_DETECT)
        kind = detect(r->p, (size_t)(r->end - r->p));
    if (kind == V_TENSOR) {
        r->what = "TensorProto";
        return sn_ld_tensor(c, r, t, NULL, name);
    }
    const sn_type *inner = ty && kind_of_type(ty) == kind ? ty->inner : NULL;
    sn_pb start = *r;
    sn_pb_field f;
    int n = 0;
    r->what = kind == V_SEQUENCE ? "SequenceProto" : "OptionalProto";
    memset(t, 0, sizeof *t);
    if (name)
        *name = "";
    for (;;) {
        SN_TRY(sn_pb_next(r, &f));
        if (!f.num)
            break;
        if (f.num == 1 && name) {
            if (f.wire != SN_PB_LEN)
                return sn_pb_fail(r, f.off, "name with wire type %d", f.wire);
            if (!(*name = sn_ld_str(c, &f)))
                return sn_ld_oom(c);
        } else if (f.num >= 3 && f.num <= 7) {
            if (n == INT32_MAX)
                return sn_pb_fail(r, f.off, "too many values");
            n++;
        }
    }
    if (kind == V_OPTIONAL) {
        if (n == 0) {
            t->kind = SN_KIND_NONE;
            t->optional = 1;
            if (inner && inner->kind == SN_TYPE_TENSOR)
                t->dtype = inner->elem;
            return SNUG_OK;
        }
        if (n > 1)
            return sn_pb_fail(r, sn_pb_off(r, start.p), "optional holds %d values", n);
        *r = start;
        for (;;) {
            SN_TRY(sn_pb_next(r, &f));
            if (!f.num)
                break;
            if (f.num >= 3 && f.num <= 7) {
                SN_TRY(dec_elem(c, r, &f, inner, t));
                t->optional = 1;
            }
        }
        return SNUG_OK;
    }
    sn_tensor *items = n ? NEW(c, sn_tensor, n) : NULL;
    if (n && !items)
        return sn_ld_oom(c);
    int k = 0;
    *r = start;
    for (;;) {
        SN_TRY(sn_pb_next(r, &f));
        if (!f.num)
            break;
        if (f.num >= 3 && f.num <= 7)
            SN_TRY(dec_elem(c, r, &f, inner, &items[k++]));
    }
    t->kind = SN_KIND_SEQUENCE;
    t->data = items;
    t->n_items = n;
    t->dtype = n ? items[0].dtype
                 : inner && inner->kind == SN_TYPE_TENSOR ? inner->elem : SN_UNDEFINED;
    return SNUG_OK;
}

/* ---- packing into one owner block -------------------------------------- */

#define ALIGN64(n) (((n) + 63) & ~(size_t)63)

static size_t pack_size(const sn_tensor *t) {
    if (t->kind == SN_KIND_NONE)
        return 0;
    if (t->kind == SN_KIND_SEQUENCE) {
        size_t s = ALIGN64(sizeof(sn_tensor) * (size_t)t->n_items);
        for (int64_t i = 0; i < t->n_items; i++)
            s += pack_size(&((const sn_tensor *)t->data)[i]);
        return s;
    }
    if (!t->data)
        return 0;
    if (t->dtype == SN_STRING) {
        int64_t n = sn_tensor_numel(t);
        size_t s = ALIGN64(sizeof(sn_string) * (size_t)n);
        for (int64_t i = 0; i < n; i++)
            s += ((const sn_string *)t->data)[i].len;
        return ALIGN64(s);
    }
    return ALIGN64(sn_tensor_nbytes(t));
}

static void pack(const sn_tensor *src, sn_tensor *dst, uint8_t *blk, size_t *off) {
    *dst = *src;
    if (src->kind == SN_KIND_NONE || !src->data) {
        dst->data = NULL;
        return;
    }
    if (src->kind == SN_KIND_SEQUENCE) {
        sn_tensor *items = (sn_tensor *)(void *)(blk + *off);
        *off += ALIGN64(sizeof(sn_tensor) * (size_t)src->n_items);
        for (int64_t i = 0; i < src->n_items; i++)
            pack(&((const sn_tensor *)src->data)[i], &items[i], blk, off);
        dst->data = items;
        return;
    }
    if (src->dtype == SN_STRING) {
        int64_t n = sn_tensor_numel(src);
        sn_string *s = (sn_string *)(void *)(blk + *off);
        size_t o = *off + ALIGN64(sizeof(sn_string) * (size_t)n), start = *off;
        for (int64_t i = 0; i < n; i++) {
            const sn_string *from = &((const sn_string *)src->data)[i];
            if (from->len)
                memcpy(blk + o, from->ptr, from->len);
            s[i].ptr = (const char *)blk + o;
            s[i].len = from->len;
            o += from->len;
        }
        *off = start + ALIGN64(o - start);
        dst->data = s;
        return;
    }
    size_t nb = sn_tensor_nbytes(src);
    memcpy(blk + *off, src->data, nb);
    dst->data = blk + *off;
    *off += ALIGN64(nb);
}

static int decode(const void *buf, size_t len, int kind, const sn_type *ty, sn_tensor *t,
                  void **owner, char **name, sn_err *err) {
    sn_arena a = {0};
    sn_ld c = {0};
    c.a = &a;
    c.base = buf;
    c.err = err;
    c.no_align_copy = 1; /* everything is copied into the owner block below */
    sn_pb r;
    sn_pb_init(&r, buf, buf, len, "value", err);
    sn_tensor tmp;
    const char *nm = "";
    *owner = NULL;
    if (name)
        *name = NULL;
    int rc = dec_value(&c, &r, kind, ty, &tmp, &nm);
    if (!rc) {
        size_t off = 0;
        uint8_t *blk = sn_malloc(pack_size(&tmp));
        char *nc = name ? sn_strdup(nm) : NULL;
        if (!blk || (name && !nc)) {
            sn_free(blk);
            sn_free(nc);
            rc = sn_errf(err, SNUG_ERR_OOM, "out of memory");
        } else {
            pack(&tmp, t, blk, &off);
            *owner = blk;
            if (name)
                *name = nc;
        }
    }
    sn_arena_free(&a);
    return rc;
}

int sn_tensor_decode_pb(const void *buf, size_t len, sn_tensor *t, void **owner, char **name,
                        sn_err *err) {
    return decode(buf, len, V_TENSOR, NULL, t, owner, name, err);
}

int sn_value_decode_pb(const void *buf, size_t len, sn_tensor *t, void **owner, char **name,
                       sn_err *err) {
    return decode(buf, len, V_DETECT, NULL, t, owner, name, err);
}

int sn_value_decode_pb_typed(const void *buf, size_t len, const sn_type *expected,
                             sn_tensor *t, void **owner, char **name, sn_err *err) {
    return decode(buf, len, kind_of_type(expected), expected, t, owner, name, err);
}

/* ---- encoding ----------------------------------------------------------- */

static void enc_tensor(sn_pbw *w, const sn_tensor *t, const char *name) {
    for (int i = 0; i < t->rank; i++)
        sn_pbw_int(w, 1, t->dims[i]);
    sn_pbw_int(w, 2, t->dtype);
    /* Fields in number order, as protobuf writers do: equal files compare equal. */
    if (t->dtype == SN_STRING) {
        int64_t n = sn_tensor_numel(t);
        for (int64_t i = 0; i < n; i++) {
            const sn_string *s = &((const sn_string *)t->data)[i];
            sn_pbw_bytes(w, 6, s->ptr, s->len);
        }
    }
    if (name && name[0])
        sn_pbw_str(w, 8, name);
    if (t->dtype != SN_STRING)
        sn_pbw_bytes(w, 9, t->data, sn_tensor_nbytes(t));
}

static int elem_type_of(const sn_tensor *t) {
    if (t->optional)
        return ET_OPTIONAL;
    return t->kind == SN_KIND_SEQUENCE ? ET_SEQUENCE : ET_TENSOR;
}

static void enc_value(sn_pbw *w, const sn_tensor *t, const char *name);

static void enc_sub(sn_pbw *w, uint32_t num, const sn_tensor *t) {
    sn_pbw sub = {0};
    enc_value(&sub, t, NULL);
    sn_pbw_msg(w, num, &sub);
    sn_pbw_free(&sub);
}

static void enc_value(sn_pbw *w, const sn_tensor *t, const char *name) {
    if (t->optional) {
        if (name && name[0])
            sn_pbw_str(w, 1, name);
        if (t->kind == SN_KIND_NONE) {
            sn_pbw_int(w, 2, ET_UNDEFINED);
            return;
        }
        sn_tensor v = *t;
        v.optional = 0;
        int et = elem_type_of(&v);
        sn_pbw_int(w, 2, et);
        enc_sub(w, et == ET_SEQUENCE ? 5 : 3, &v);
    } else if (t->kind == SN_KIND_SEQUENCE) {
        if (name && name[0])
            sn_pbw_str(w, 1, name);
        const sn_tensor *items = t->data;
        int et = t->n_items ? elem_type_of(&items[0]) : ET_TENSOR;
        sn_pbw_int(w, 2, et);
        for (int64_t i = 0; i < t->n_items; i++)
            enc_sub(w, et == ET_OPTIONAL ? 7 : et == ET_SEQUENCE ? 5 : 3, &items[i]);
    } else {
        enc_tensor(w, t, name);
    }
}

int sn_value_encode_pb(const sn_tensor *t, const char *name, void **buf, size_t *len,
                       sn_err *err) {
    sn_pbw w = {0};
    *buf = NULL;
    *len = 0;
    if (t->kind == SN_KIND_NONE && !t->optional)
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "cannot encode a missing value that is not optional");
    if (t->kind == SN_KIND_TENSOR && !sn_tensor_shape_known(t))
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "cannot encode a tensor of unknown shape");
    enc_value(&w, t, name);
    if (w.oom) {
        sn_pbw_free(&w);
        return sn_errf(err, SNUG_ERR_OOM, "out of memory encoding '%s'", name ? name : "");
    }
    if (!w.buf && !(w.buf = sn_malloc(1))) /* empty message: still a buffer */
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    *buf = w.buf;
    *len = w.len;
    return SNUG_OK;
}
