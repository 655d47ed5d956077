/* Indexing ops: Gather, GatherElements, GatherND, Scatter, ScatterElements,
 * ScatterND, OneHot, NonZero, Compress, Unique, ReverseSequence. Indices are
 * validated against the data before use: bad data is an error, never an
 * out-of-bounds access. */
#include <math.h>
#include <string.h>

#include "ops/shape/shape_util.h"



static int need_index_type(sn_infer_ctx *c, int i) {
    SN_TRY(sn_need_tensor(c, i));
    if (c->in[i]->dtype != SN_I64 && c->in[i]->dtype != SN_I32)
        return KFAIL(SNUG_ERR_TYPE, "input %d (indices) must be int32 or int64, got %s", i,
                     sn_dtype_name(c->in[i]->dtype));
    return SNUG_OK;
}

static inline int64_t idx_at(const sn_tensor *t, int64_t i) {
    return t->dtype == SN_I64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
}

static inline void copy_elem(char *dst, const char *src, size_t es) {
    switch (es) {
    case 1: *dst = *src; break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    case 8: memcpy(dst, src, 8); break;
    case 16: memcpy(dst, src, 16); break;
    default: memcpy(dst, src, es); break;
    }
}

/* Normalizes index v against dim d; false when out of range. */
static inline bool fix_index(int64_t *v, int64_t d) {
    if (*v < 0)
        *v += d;
    return *v >= 0 && *v < d;
}

/* ---- Gather ------------------------------------------------------------- */

static int gather_infer(sn_infer_ctx *c) {
    SN_TRY(sn_need_tensor(c, 0));
    SN_TRY(need_index_type(c, 1));
    const sn_tensor *x = c->in[0], *ind = c->in[1];
    if (x->rank == SN_RANK_UNKNOWN || ind->rank == SN_RANK_UNKNOWN) {
        sn_set_out(c->out[0], x->dtype, SN_RANK_UNKNOWN, NULL);
        return SNUG_OK;
    }
    int64_t axis = sn_attr_int(c->node, "axis", 0);
    int a;
    if (!sn_axis_norm(axis, x->rank, &a))
        return KFAIL(SNUG_ERR_INVALID_ARG, "axis %lld out of range for rank %d", (long long)axis,
                     x->rank);
    int r = x->rank - 1 + ind->rank;
    if (r > SN_MAX_RANK)
        return KFAIL(SNUG_ERR_UNSUPPORTED, "output rank %d too large", r);
    int64_t od[SN_MAX_RANK];
    int k = 0;
    for (int i = 0; i < a; i++)
        od[k++] = x->dims[i];
    for (int i = 0; i < ind->rank; i++)
        od[k++] = ind->dims[i];
    for (int i = a + 1; i < x->rank; i++)
        od[k++] = x->dims[i];
    sn_set_out(c->out[0], x->dtype, r, od);
    return SNUG_OK;
}

static int gather_run(sn_kctx *c) {
    const sn_tensor *x = sn_kctx_in(c, 0), *ind = sn_kctx_in(c, 1);
    sn_tensor *y = c->out[0];
    int a = 0;
    sn_axis_norm(sn_attr_int(c->node, "axis", 0), x->rank, &a);
    size_t es = sn_dtype_size(x->dtype);
    int64_t outer = sn_dims_prod(x->dims, 0, a), D = x->dims[a];
    size_t inner = (size_t)sn_dims_prod(x->dims, a + 1, x->rank) * es;
    int64_t ni = sn_tensor_numel(ind);
    for (int64_t j = 0; j < ni; j++) {
        int64_t v = idx_at(ind, j);
        if (!fix_index(&v, D))
            return KFAIL(SNUG_ERR_RANGE, "index %lld out of range [-%lld, %lld)",
                         (long long)idx_at(ind, j), (long long)D, (long long)D);
    }
    char *o = y->data;
    const char *xd = x->data;
    if (sn_kctx_reads_file(c, x)) { /* snug.weights=load: a table left in the file, read row by row */
        for (int64_t b = 0; b < outer; b++)
            for (int64_t j = 0; j < ni; j++, o += inner) {
                int64_t v = idx_at(ind, j);
                const char *row = xd + ((size_t)b * (size_t)D + (size_t)(v < 0 ? v + D : v)) * inner;
                SN_TRY(sn_kctx_read_const(c, o, row, inner));
            }
        return SNUG_OK;
    }
    for (int64_t b = 0; b < outer; b++) {
        const char *base = xd + (size_t)b * (size_t)D * inner;
        if (inner == 4) {
            for (int64_t j = 0; j < ni; j++, o += 4) {
                int64_t v = idx_at(ind, j);
                memcpy(o, base + (size_t)(v < 0 ? v + D : v) * 4, 4);
            }
        } else {
            for (int64_t j = 0; j < ni; j++, o += inner) {
                int64_t v = idx_at(ind, j);
                memcpy(o, base + (size_t)(v < 0 ? v + D : v) * inner, inner);
            }
        }
    }
    return SNUG_OK;
}

/* ---- GatherElements ----------------------------------------------------- */

static int gather_el_infer(sn_infer_ctx *c) {
    SN_TRY(sn_need_tensor(c, 0));
    SN_TRY(need_index_type(c, 1));
    const sn_tensor *x = c->in[0], *ind = c->in[1];
    if (x->rank != SN_RANK_UNKNOWN && ind->rank != SN_RANK_UNKNOWN) {
        if (x->rank != ind->rank)
            return KFAIL(SNUG_ERR_SHAPE, "data rank %d and indices rank %d differ", x->rank,
                         ind->rank);
        int a;
        if (!sn_axis_norm(sn_attr_int(c->node, "axis", 0), x->rank, &a))
            return KFAIL(SNUG_ERR_INVALID_ARG, "axis out of range for rank %d", x->rank);
    }
    sn_set_out(c->out[0], x->dtype, ind->rank, ind->dims);
    return SNUG_OK;
}

/* Walks every element of an index tensor shaped like `dims` (rank r) and
 * reports the flat offset into a tensor with strides `xs` where axis a's
 * coordinate is replaced by the index value. */
static int gather_el_run(sn_kctx *c) {
    const sn_tensor *x = sn_kctx_in(c, 0), *ind = sn_kctx_in(c, 1);
    sn_tensor *y = c->out[0];
    int r = x->rank, a = 0;
    sn_axis_norm(sn_attr_int(c->node, "axis", 0), r, &a);
    for (int d = 0; d < r; d++)
        if (d != a && ind->dims[d] > x->dims[d])
            return KFAIL(SNUG_ERR_SHAPE, "indices dim %d (%lld) exceeds data dim (%lld)", d,
                         (long long)ind->dims[d], (long long)x->dims[d]);
    size_t es = sn_dtype_size(x->dtype);
    int64_t n = sn_tensor_numel(ind), xs[SN_MAX_RANK], idx[SN_MAX_RANK] = {0};
    sn_strides(r, x->dims, xs);
    int64_t base = 0; /* offset of the coordinate without axis a */
    for (int64_t i = 0; i < n; i++) {
        int64_t v = idx_at(ind, i);
        if (!fix_index(&v, x->dims[a]))
            return KFAIL(SNUG_ERR_RANGE, "index %lld out of range for axis of %lld",
                         (long long)idx_at(ind, i), (long long)x->dims[a]);
        copy_elem((char *)y->data + (size_t)i * es,
                  (const char *)x->data + (size_t)(base + v * xs[a]) * es, es);
        for (int d = r - 1; d >= 0; d--) {
            if (d != a)
                base += xs[d];
            if (++idx[d] < ind->dims[d])
                break;
            if (d != a)
                base -= xs[d] * ind->dims[d];
            idx[d] = 0;
        }
    }
    return SNUG_OK;
}

/* ---- GatherND ----------------------------------------------------------- */

static int gather_nd_infer(sn_infer_ctx *c) {
    SN_TRY(sn_need_tensor(c, 0));
    SN_TRY(need_index_type(c, 1));
    const sn_tensor *x = c->in[0], *ind = c->in[1];
    int64_t b = sn_attr_int(c->node, "batch_dims", 0);
    if (x->rank == SN_RANK_UNKNOWN || ind->rank == SN_RANK_UNKNOWN ||
        ind->dims[ind->rank - 1] < 0) {
        sn_set_out(c->out[0], x->dtype, SN_RANK_UNKNOWN, NULL);
        return SNUG_OK;
    }
    int q = ind->rank;
    int64_t k = ind->dims[q - 1];
    if (q < 1 || b < 0 || b >= q || b >= x->rank || k > x->rank - b)
        return KFAIL(SNUG_ERR_SHAPE, "bad ranks: data %d, indices %d, last dim %lld, batch_dims %lld",
                     x->rank, q, (long long)k, (long long)b);
    int64_t od[SN_MAX_RANK];
    int r = 0;
    for (int i = 0; i < q - 1; i++)
        od[r++] = ind->dims[i];
    for (int i = (int)(b + k); i < x->rank; i++)
        od[r++] = x->dims[i];
    if (r > SN_MAX_RANK)
        return KFAIL(SNUG_ERR_UNSUPPORTED, "output rank too large");
    sn_set_out(c->out[0], x->dtype, r, od);
    return SNUG_OK;
}

static int gather_nd_run(sn_kctx *c) {
    const sn_tensor *x = sn_kctx_in(c, 0), *ind = sn_kctx_in(c, 1);
    sn_tensor *y = c->out[0];
    int b = (int)sn_attr_int(c->node, "batch_dims", 0), q = ind->rank;
    int64_t k = ind->dims[q - 1];
    for (int i = 0; i < b; i++)
        if (x->dims[i] != ind->dims[i])
            return KFAIL(SNUG_ERR_SHAPE, "batch dim %d differs: %lld vs %lld", i,
                         (long long)x->dims[i], (long long)ind->dims[i]);
    size_t es = sn_dtype_size(x->dtype);
    int64_t xs[SN_MAX_RANK];
    sn_strides(x->rank, x->dims, xs);
    int64_t nb = sn_dims_prod(x->dims, 0, b), per = sn_dims_prod(ind->dims, b, q - 1);
    int64_t slice = sn_dims_prod(x->dims, b + (int)k, x->rank);
    int64_t bstride = sn_dims_prod(x->dims, b, x->rank);
    size_t sb = (size_t)slice * es;
    char *o = y->data;
    for (int64_t bi = 0; bi < nb; bi++)
        for (int64_t m = 0; m < per; m++) {
            int64_t row = (bi * per + m) * k, off = bi * bstride;
            for (int64_t j = 0; j < k; j++) {
                int64_t v = idx_at(ind, row + j);
                if (!fix_index(&v, x->dims[b + j]))
                    return KFAIL(SNUG_ERR_RANGE, "index %lld out of range for dim of %lld",
                                 (long long)idx_at(ind, row + j), (long long)x->dims[b + j]);
                off += v * xs[b + j];
            }
            if (sb)
                memcpy(o, (const char *)x->data + (size_t)off * es, sb);
            o += sb;
        }
    return SNUG_OK;
}

/* ---- Scatter reductions ------------------------------------------------- */

enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN };

static int parse_reduction(sn_kctx *c, const sn_tensor *x, int *red) {
    const char *s = sn_attr_str(c->node, "reduction", "none");
    if (!strcmp(s, "none"))
        *red = RED_NONE;
    else if (!strcmp(s, "add"))
        *red = RED_ADD;
    else if (!strcmp(s, "mul"))
        *red = RED_MUL;
    else if (!strcmp(s, "max"))
        *red = RED_MAX;
    else if (!strcmp(s, "min"))
        *red = RED_MIN;
    else
        return KFAIL(SNUG_ERR_INVALID_ARG, "unknown reduction '%s'", s);
    if (*red != RED_NONE && (x->dtype == SN_STRING || x->dtype == SN_BOOL))
        return KFAIL(SNUG_ERR_UNSUPPORTED, "reduction '%s' on %s", s, sn_dtype_name(x->dtype));
    return SNUG_OK;
}

#define RED_APPLY(T, d, s)                         \
    do {                                           \
        T a_ = *(T *)(d), b_ = *(const T *)(s);    \
        switch (red) {                             \
        case RED_ADD: a_ = (T)(a_ + b_); break;    \
        case RED_MUL: a_ = (T)(a_ * b_); break;    \
        case RED_MAX: a_ = a_ > b_ ? a_ : b_; break; \
        default: a_ = a_ < b_ ? a_ : b_; break;    \
        }                                          \
        *(T *)(d) = a_;                            \
    } while (0)

/* dst op= src for one element. */
static void reduce_elem(int red, sn_dtype t, char *dst, const char *src, size_t es) {
    if (red == RED_NONE) {
        copy_elem(dst, src, es);
        return;
    }
    switch (t) {
    case SN_F32: RED_APPLY(float, dst, src); break;
    case SN_F64: RED_APPLY(double, dst, src); break;
    case SN_I8: RED_APPLY(int8_t, dst, src); break;
    case SN_I16: RED_APPLY(int16_t, dst, src); break;
    case SN_I32: RED_APPLY(int32_t, dst, src); break;
    case SN_I64: RED_APPLY(int64_t, dst, src); break;
    case SN_U8: RED_APPLY(uint8_t, dst, src); break;
    case SN_U16: RED_APPLY(uint16_t, dst, src); break;
    case SN_U32: RED_APPLY(uint32_t, dst, src); break;
    case SN_U64: RED_APPLY(uint64_t, dst, src); break;
    default: {
        double a = sn_load_f64(t, dst, 0), b = sn_load_f64(t, src, 0);
        switch (red) {
        case RED_ADD: a += b; break;
        case RED_MUL: a *= b; break;
        case RED_MAX: a = a > b ? a : b; break;
        default: a = a < b ? a : b; break;
        }
        sn_store_f64(t, dst, 0, a);
    }
    }
}

/* ---- ScatterElements / Scatter ------------------------------------------ */

static int scatter_el_infer(sn_infer_ctx *c) {
    SN_TRY(sn_need_tensor(c, 0));
    SN_TRY(need_index_type(c, 1));
    SN_TRY(sn_need_tensor(c, 2));
    const sn_tensor *x = c->in[0], *ind = c->in[1], *u = c->in[2];
    if (u->dtype != x->dtype)
        return KFAIL(SNUG_ERR_TYPE, "updates are %s, data is %s", sn_dtype_name(u->dtype),
                     sn_dtype_name(x->dtype));
    if (x->rank != SN_RANK_UNKNOWN && ind->rank != SN_RANK_UNKNOWN && x->rank != ind->rank)
        return KFAIL(SNUG_ERR_SHAPE, "data rank %d and indices rank %d differ", x->rank, ind->rank);
    sn_set_out(c->out[0], x->dtype, x->rank, x->dims);
    return SNUG_OK;
}

static int scatter_el_run(sn_kctx *c) {
    const sn_tensor *x = sn_kctx_in(c, 0), *ind = sn_kctx_in(c, 1), *u = sn_kctx_in(c, 2);
    sn_tensor *y = c->out[0];
    int red;
    SN_TRY(parse_reduction(c, x, &red));
    int r = x->rank, a = 0;
    if (!sn_axis_norm(sn_attr_int(c->node, "axis", 0), r, &a))
        return KFAIL(SNUG_ERR_INVALID_ARG, "axis out of range for rank %d", r);
    if (!sn_shape_equal(ind, u))
        return KFAIL(SNUG_ERR_SHAPE, "indices and updates shapes differ");
    for (int d = 0; d < r; d++)
        if (d != a && ind->dims[d] > x->dims[d])
            return KFAIL(SNUG_ERR_SHAPE, "indices dim %d (%lld) exceeds data dim (%lld)", d,
                         (long long)ind->dims[d], (long long)x->dims[d]);
    size_t es = sn_dtype_size(x->dtype);
    size_t nb = sn_tensor_nbytes(x);
    if (nb && y->data != x->data)
        memcpy(y->data, x->data, nb);
    int64_t n = sn_tensor_numel(ind), xs[SN_MAX_RANK], idx[SN_MAX_RANK] = {0};
    sn_strides(r, x->dims, xs);
    /* validate first so a bad index leaves no half-done work behind */
    for (int64_t i = 0; i < n; i++) {
        int64_t v = idx_at(ind, i);
        if (!fix_index(&v, x->dims[a]))
            return KFAIL(SNUG_ERR_RANGE, "index %lld out of range for axis of %lld",
                         (long long)idx_at(ind, i), (long long)x->dims[a]);
    }
    int64_t base = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t v = idx_at(ind, i);
        fix_index(&v, x->dims[a]);
        reduce_elem(red, x->dtype, (char *)y->data + (size_t)(base + v * xs[a]) * es,
                    (const char *)u->data + (size_t)i * es, es);
        for (int d = r - 1; d >= 0; d--) {
            if (d != a)
                base += xs[d];
            if (++idx[d] < ind->dims[d])
                break;
            if (d != a)
                base -= xs[d] * ind->dims[d];
            idx[d] = 0;
        }
    }
    return SNUG_OK;
}

/* ---- ScatterND ---------------------------------------------------------- */

static int scatter_nd_infer(sn_infer_ctx *c) {
    SN_TRY(sn_need_tensor(c, 0));
    SN_TRY(need_index_type(c, 1));
    SN_TRY(sn_need_tensor(c, 2));
    const sn_tensor *x = c->in[0], *u = c->in[2];
    if (u->dtype != x->dtype)
        return KFAIL(SNUG_ERR_TYPE, "updates are %s, data is %s", sn_dtype_name(u->dtype),
                     sn_dtype_name(x->dtype));
    sn_set_out(c->out[0], x->dtype, x->rank, x->dims);
    return SNUG_OK;
}

static int scatter_nd_run(sn_kctx *c) {
    const sn_tensor *x = sn_kctx_in(c, 0), *ind = sn_kctx_in(c, 1), *u = sn_kctx_in(c, 2);
    sn_tensor *y = c->out[0];
    int red;
    SN_TRY(parse_reduction(c, x, &red));
    int q = ind->rank;
    if (q < 1)
        return KFAIL(SNUG_ERR_SHAPE, "indices must have rank >= 1");
    int64_t k = ind->dims[q - 1];
    if (k > x->rank)
        return KFAIL(SNUG_ERR_SHAPE, "index tuples of %lld for data rank %d", (long long)k, x->rank);
    /* updates shape = indices.shape[:-1] + data.shape[k:] */
    bool ok = u->rank == q - 1 + x->rank - (int)k;
    for (int i = 0; ok && i < q - 1; i++)
        ok = u->dims[i] == ind->dims[i];
    for (int i = (int)k; ok && i < x->rank; i++)
        ok = u->dims[q - 1 + i - k] == x->dims[i];
    if (!ok)
        return KFAIL(SNUG_ERR_SHAPE, "updates shape does not match indices and data");
    size_t es = sn_dtype_size(x->dtype), nb = sn_tensor_nbytes(x);
    if (nb && y->data != x->data)
        memcpy(y->data, x->data, nb);
    int64_t xs[SN_MAX_RANK];
    sn_strides(x->rank, x->dims, xs);
    int64_t m = sn_dims_prod(ind->dims, 0, q - 1), slice = sn_dims_prod(x->dims, (int)k, x->rank);
    for (int pass = 0; pass < 2; pass++)
        for (int64_t i = 0; i < m; i++) {
            int64_t off = 0;
            for (int64_t j = 0; j < k; j++) {
                int64_t v = idx_at(ind, i * k + j);
                if (!fix_index(&v, x->dims[j]))
                    return KFAIL(SNUG_ERR_RANGE, "index %lld out of range for dim of %lld",
                                 (long long)idx_at(ind, i * k + j), (long long)x->dims[j]);
                off += v * xs[j];
            }
            if (pass == 0)
                continue;
            char *d = (char *)y->data + (size_t)off * es;
            const char *s = (const char *)u->data + (size_t)(i * slice) * es;
            if (red == RED_NONE)
                memcpy(d, s, (size_t)slice * es);
            else
                for (int64_t e = 0; e < slice; e++)
                    reduce_elem(red, x->dtype, d + (size_t)e * es, s + (size_t)e * es, es);
        }
    return SNUG_OK;
}

/* ---- OneHot ------------------------------------------------------------- */

static int onehot_depth(sn_err *err, const sn_node *node, const sn_tensor *d, int64_t *depth) {
    *depth = SN_DIM_UNKNOWN;
    if (!d->data)
        return SNUG_OK;
    if (sn_tensor_numel(d) != 1)
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "depth must hold one value");
    double v = sn_load_f64(d->dtype, d->data, 0);
    if (!(v >= 1 && v < 1e12))
        return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "invalid depth %g", v);
    *depth = (int64_t)v;
    return SNUG_OK;
}

static int onehot_infer(sn_infer_ctx *c) {
    for (int i = 0; i < 3; i++)
        SN_TRY(sn_need_tensor(c, i));
    const sn_tensor *ind = c->in[0], *val = c->in[2];
    if (val->rank != SN_RANK_UNKNOWN && sn_tensor_numel(val) >= 0 && sn_tensor_numel(val) != 2)
        return KFAIL(SNUG_ERR_SHAPE, "values must hold two elements");
    if (ind->rank == SN_RANK_UNKNOWN) {
        sn_set_out(c->out[0], val->dtype, SN_RANK_UNKNOWN, NULL);
        return SNUG_OK;
    }
    int r = ind->rank + 1, a;
    if (r > SN_MAX_RANK)
        return KFAIL(SNUG_ERR_UNSUPPORTED, "rank too large");
    if (!sn_axis_norm(sn_attr_int(c->node, "axis", -1), r, &a))
        return KFAIL(SNUG_ERR_INVALID_ARG, "axis out of range for output rank %d", r);
    int64_t depth, od[SN_MAX_RANK];
    SN_TRY(onehot_depth(c->err, c->node, c->in[1], &depth));
    for (int i = 0, j = 0; i < r; i++)
        od[i] = i == a ? depth : ind->dims[j++];
    sn_set_out(c->out[0], val->dtype, r, od);
    return SNUG_OK;
}

static int onehot_run(sn_kctx *c) {
    const sn_tensor *ind = sn_kctx_in(c, 0), *val = sn_kctx_in(c, 2);
    sn_tensor *y = c->out[0];
    int a = 0;
    sn_axis_norm(sn_attr_int(c->node, "axis", -1), y->rank, &a);
    int64_t depth = y->dims[a];
    size_t es = sn_dtype_size(y->dtype);
    int64_t outer = sn_dims_prod(y->dims, 0, a), inner = sn_dims_prod(y->dims, a + 1, y->rank);
    int64_t n = sn_tensor_numel(y);
    const char *off = val->data, *on = (const char *)val->data + es;
    for (int64_t i = 0; i < n; i++)
        copy_elem((char *)y->data + (size_t)i * es, off, es);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t v;
            if (ind->dtype == SN_I64 || ind->dtype == SN_I32)
                v = idx_at(ind, o * inner + i);
            else {
                double f = sn_load_f64(ind->dtype, ind->data, (size_t)(o * inner + i));
                if (!(f > -1e15 && f < 1e15))
                    continue;
                v = (int64_t)f;
            }
            if (!fix_index(&v, depth))
                continue;
            copy_elem((char *)y->data + (size_t)((o * depth + v) * inner + i) * es, on, es);
        }
    return SNUG_OK;
}

/* ---- NonZero ------------------------------------------------------------ */

static bool is_nonzero(sn_dtype t, const void *d, int64_t i) {
    switch (t) {
    case SN_F32: return ((const float *)d)[i] != 0.0f;
    case SN_F64: return ((const double *)d)[i] != 0.0;
    case SN_BOOL:
    case SN_U8:
    case SN_I8: return ((const uint8_t *)d)[i] != 0;
    case SN_I32:
    case SN_U32: return ((const uint32_t *)d)[i] != 0;
    case SN_I64:
    case SN_U64: return ((const uint64_t *)d)[i] != 0;
    case SN_I16:
    case SN_U16: return ((const uint16_t *)d)[i] != 0;
    case SN_STRING: return ((const sn_string *)d)[i].len != 0;
    default: return sn_load_f64(t, d, (size_t)i) != 0.0;
    }
}

static int nonzero_infer(sn_infer_ctx *c) {
    SN_TRY(sn_need_tensor(c, 0));
    const sn_tensor *x = c->in[0];
    int64_t od[2] = {x->rank == SN_RANK_UNKNOWN ? SN_DIM_UNKNOWN : x->rank, SN_DIM_UNKNOWN};
    int64_t n = sn_tensor_numel(x);
    if (x->data && n >= 0) {
        int64_t cnt = 0;
        for (int64_t i = 0; i < n; i++)
            cnt += is_nonzero(x->dtype, x->data, i);
        od[1] = cnt;
    }
    sn_set_out(c->out[0], SN_I64, 2, od);
    return SNUG_OK;
}

static int nonzero_run(sn_kctx *c) {
    const sn_tensor *x = sn_kctx_in(c, 0);
    sn_tensor *y = c->out[0];
    int64_t n = sn_tensor_numel(x), nnz = y->dims[1], j = 0, idx[SN_MAX_RANK] = {0};
    int r = x->rank;
    int64_t *o = y->data;
    for (int64_t i = 0; i < n; i++) {
        if (is_nonzero(x->dtype, x->data, i)) {
            if (j >= nnz)
                return KFAIL(SNUG_ERR_INTERNAL, "nonzero count changed");
            for (int d = 0; d < r; d++)
                o[d * nnz + j] = idx[d];
            j++;
        }
        for (int d = r - 1; d >= 0; d--) {
            if (++idx[d] < x->dims[d])
                break;
            idx[d] = 0;
        }
    }
    return SNUG_OK;
}

/* ---- Compress ----------------------------------------------------------- */

static int compress_infer(sn_infer_ctx *c) {
    SN_TRY(sn_need_tensor(c, 0));
    SN_TRY(sn_need_tensor(c, 1));
    const sn_tensor *x = c->in[0], *cond = c->in[1];
    if (cond->dtype != SN_BOOL)
        return KFAIL(SNUG_ERR_TYPE, "condition must be bool, got %s", sn_dtype_name(cond->dtype));
    if (cond->rank != SN_RANK_UNKNOWN && cond->rank != 1)
        return KFAIL(SNUG_ERR_SHAPE, "condition must be 1-D");
    const sn_attr *aa = sn_attr_get(c->node, "axis");
    int a = -1;
    int64_t len;
    if (x->rank == SN_RANK_UNKNOWN) {
        sn_set_out(c->out[0], x->dtype, aa ? SN_RANK_UNKNOWN : 1, NULL);
        return SNUG_OK;
    }
    if (aa) {
        if (!sn_axis_norm(sn_attr_int(c->node, "axis", 0), x->rank, &a))
            return KFAIL(SNUG_ERR_INVALID_ARG, "axis out of range for rank %d", x->rank);
        len = x->dims[a];
    } else {
        len = sn_tensor_numel(x);
    }
    int64_t cnt = SN_DIM_UNKNOWN;
    int64_t nc = sn_tensor_numel(cond);
    if (cond->data && nc >= 0) {
        if (len >= 0 && nc > len)
            return KFAIL(SNUG_ERR_SHAPE, "condition has %lld entries, axis has %lld",
                         (long long)nc, (long long)len);
        cnt = 0;
        for (int64_t i = 0; i < nc; i++)
            cnt += ((const uint8_t *)cond->data)[i] != 0;
    }
    if (a < 0) {
        sn_set_out(c->out[0], x->dtype, 1, &cnt);
    } else {
        sn_set_out(c->out[0], x->dtype, x->rank, x->dims);
        c->out[0]->dims[a] = cnt;
    }
    return SNUG_OK;
}

static int compress_run(sn_kctx *c) {
    const sn_tensor *x = sn_kctx_in(c, 0), *cond = sn_kctx_in(c, 1);
    sn_tensor *y = c->out[0];
    size_t es = sn_dtype_size(x->dtype);
    int64_t outer = 1, len, inner = 1;
    if (sn_attr_get(c->node, "axis")) {
        int a = 0;
        sn_axis_norm(sn_attr_int(c->node, "axis", 0), x->rank, &a);
        outer = sn_dims_prod(x->dims, 0, a);
        len = x->dims[a];
        inner = sn_dims_prod(x->dims, a + 1, x->rank);
    } else {
        len = sn_tensor_numel(x);
    }
    int64_t nc = sn_imin(sn_tensor_numel(cond), len), cnt = 0;
    for (int64_t i = 0; i < nc; i++)
        cnt += ((const uint8_t *)cond->data)[i] != 0;
    if (outer * cnt * inner != sn_tensor_numel(y))
        return KFAIL(SNUG_ERR_INTERNAL, "output size mismatch");
    size_t row = (size_t)inner * es;
    char *o = y->data;
    for (int64_t b = 0; b < outer; b++)
        for (int64_t i = 0; i < nc; i++)
            if (((const uint8_t *)cond->data)[i]) {
                memcpy(o, (const char *)x->data + ((size_t)(b * len + i)) * row, row);
                o += row;
            }
    return SNUG_OK;
}

/* ---- Unique ------------------------------------------------------------- */

typedef struct uniq_ctx {
    sn_dtype t;
    const char *data;
    int64_t outer, n, inner; /* slices along the axis: outer x inner elements each */
    size_t es;
} uniq_ctx;

static int cmp_elem(sn_dtype t, const char *a, const char *b) {
    switch (t) {
#define CMPT(T)                                                              \
    {                                                                        \
        T x_, y_;                                                            \
        memcpy(&x_, a, sizeof(T));                                           \
        memcpy(&y_, b, sizeof(T));                                           \
        return x_ < y_ ? -1 : (x_ > y_ ? 1 : 0);                             \
    }
    case SN_F32: CMPT(float)
    case SN_F64: CMPT(double)
    case SN_I8: CMPT(int8_t)
    case SN_I16: CMPT(int16_t)
    case SN_I32: CMPT(int32_t)
    case SN_I64: CMPT(int64_t)
    case SN_U8: case SN_BOOL: CMPT(uint8_t)
    case SN_U16: CMPT(uint16_t)
    case SN_U32: CMPT(uint32_t)
    case SN_U64: CMPT(uint64_t)
#undef CMPT
    case SN_STRING: {
        sn_string x, y;
        memcpy(&x, a, sizeof x);
        memcpy(&y, b, sizeof y);
        size_t m = x.len < y.len ? x.len : y.len;
        int r = m ? memcmp(x.ptr, y.ptr, m) : 0;
        if (r)
            return r < 0 ? -1 : 1;
        return x.len < y.len ? -1 : (x.len > y.len ? 1 : 0);
    }
    default: {
        double x = sn_load_f64(t, a, 0), y = sn_load_f64(t, b, 0);
        return x < y ? -1 : (x > y ? 1 : 0);
    }
    }
}

static int cmp_slices(const uniq_ctx *u, int64_t i, int64_t j) {
    for (int64_t o = 0; o < u->outer; o++) {
        const char *a = u->data + (size_t)((o * u->n + i) * u->inner) * u->es;
        const char *b = u->data + (size_t)((o * u->n + j) * u->inner) * u->es;
        for (int64_t k = 0; k < u->inner; k++) {
            int r = cmp_elem(u->t, a + (size_t)k * u->es, b + (size_t)k * u->es);
            if (r)
                return r;
        }
    }
    return 0;
}

/* Stable bottom-up merge sort of ord[0..n) by key(ord[i]); tmp has room for n. */
static void merge_sort(int64_t *ord, int64_t *tmp, int64_t n, const uniq_ctx *u,
                       const int64_t *key) {
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = sn_imin(lo + w, n), hi = sn_imin(lo + 2 * w, n);
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                bool take_right = key ? key[ord[j]] < key[ord[i]] : cmp_slices(u, ord[j], ord[i]) < 0;
                tmp[k++] = take_right ? ord[j++] : ord[i++];
            }
            while (i < mid)
                tmp[k++] = ord[i++];
            while (j < hi)
                tmp[k++] = ord[j++];
        }
        memcpy(ord, tmp, sizeof(int64_t) * (size_t)n);
    }
}

static bool uniq_setup(const sn_node *node, const sn_tensor *x, uniq_ctx *u, int *axis) {
    u->t = x->dtype;
    u->data = x->data;
    u->es = sn_dtype_size(x->dtype);
    *axis = -1;
    if (sn_attr_get(node, "axis")) {
        if (!sn_axis_norm(sn_attr_int(node, "axis", 0), x->rank, axis))
            return false;
        u->outer = sn_dims_prod(x->dims, 0, *axis);
        u->n = x->dims[*axis];
        u->inner = sn_dims_prod(x->dims, *axis + 1, x->rank);
    } else {
        u->outer = u->inner = 1;
        u->n = sn_tensor_numel(x);
    }
    return true;
}

static int unique_infer(sn_infer_ctx *c) {
    SN_TRY(sn_need_tensor(c, 0));
    const sn_tensor *x = c->in[0];
    bool has_axis = sn_attr_get(c->node, "axis") != NULL;
    if (has_axis && x->rank != SN_RANK_UNKNOWN) {
        int a;
        if (!sn_axis_norm(sn_attr_int(c->node, "axis", 0), x->rank, &a))
            return KFAIL(SNUG_ERR_INVALID_ARG, "axis out of range for rank %d", x->rank);
        sn_set_out(c->out[0], x->dtype, x->rank, x->dims);
        c->out[0]->dims[a] = SN_DIM_UNKNOWN;
    } else {
        sn_set_out(c->out[0], x->dtype, has_axis ? SN_RANK_UNKNOWN : 1, NULL);
    }
    for (int i = 1; i < 4 && i < c->n_out; i++)
        if (c->out[i])
            sn_set_out(c->out[i], SN_I64, 1, NULL);
    return SNUG_OK;
}

/* Workspace for x: 5 int64 per element (or per slice along axis); false
 * when axis is out of range. */
static bool unique_ws_bytes(const sn_node *node, const sn_tensor *x, size_t *bytes) {
    int64_t n = sn_tensor_numel(x);
    if (sn_attr_get(node, "axis")) {
        int a;
        if (!sn_axis_norm(sn_attr_int(node, "axis", 0), x->rank, &a))
            return false;
        n = x->dims[a];
    }
    *bytes = (size_t)(n < 0 ? 0 : n) * 5 * sizeof(int64_t) + 16;
    return true;
}

static int unique_prepare(sn_prep_ctx *c) {
    size_t bytes;
    if (!unique_ws_bytes(c->node, c->in[0], &bytes))
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "axis out of range");
    return sk_ws_declare(c, bytes);
}

/* Level 1: the figure prepare will declare, from the inferred shapes. */
static size_t unique_estimate(const sn_infer_ctx *c) {
    size_t bytes;
    if (c->n_in < 1 || !c->in[0] || c->in[0]->rank < 0 || !unique_ws_bytes(c->node, c->in[0], &bytes))
        return 0;
    return bytes;
}

static int unique_run(sn_kctx *c) {
    const sn_tensor *x = sn_kctx_in(c, 0);
    uniq_ctx u;
    int axis;
    if (!uniq_setup(c->node, x, &u, &axis))
        return KFAIL(SNUG_ERR_INVALID_ARG, "axis out of range");
    int64_t n = u.n;
    if (!sk_ws_fits(c, (size_t)n * 5 * sizeof(int64_t)))
        return KFAIL(SNUG_ERR_INTERNAL, "workspace from prepare is too small for these shapes");
    int64_t *ord = c->ws, *tmp = ord + n, *grp = tmp + n, *gfirst = grp + n, *gcnt = gfirst + n;
    for (int64_t i = 0; i < n; i++)
        ord[i] = i;
    merge_sort(ord, tmp, n, &u, NULL);
    /* groups of equal slices in sorted order; grp[orig] = group id */
    int64_t ng = 0;
    for (int64_t i = 0; i < n; i++) {
        if (i == 0 || cmp_slices(&u, ord[i - 1], ord[i]) != 0) {
            gfirst[ng] = ord[i]; /* stable sort: the earliest occurrence */
            gcnt[ng] = 0;
            ng++;
        }
        grp[ord[i]] = ng - 1;
        gcnt[ng - 1]++;
    }
    /* output order of the groups: sorted, or by first occurrence */
    int64_t *gord = ord; /* reuse: gord[k] = group shown k-th */
    for (int64_t g = 0; g < ng; g++)
        gord[g] = g;
    if (!sn_attr_int(c->node, "sorted", 1))
        merge_sort(gord, tmp, ng, &u, gfirst);
    int64_t *gpos = tmp; /* group id -> output position */
    for (int64_t k = 0; k < ng; k++)
        gpos[gord[k]] = k;

    int64_t dims[SN_MAX_RANK];
    int rank;
    if (axis >= 0) {
        rank = x->rank;
        memcpy(dims, x->dims, sizeof(int64_t) * (size_t)rank);
        dims[axis] = ng;
    } else {
        rank = 1;
        dims[0] = ng;
    }
    char *y = sn_kctx_alloc_output(c, 0, x->dtype, rank, dims);
    if (!y)
        return c->err->code ? c->err->code : SNUG_ERR_OOM;
    size_t row = (size_t)u.inner * u.es;
    for (int64_t o = 0; o < u.outer; o++)
        for (int64_t k = 0; k < ng; k++) {
            if (row)
                memcpy(y + (size_t)(o * ng + k) * row,
                       u.data + (size_t)(o * n + gfirst[gord[k]]) * row, row);
        }
    int64_t d1 = ng;
    if (c->n_out > 1 && c->out[1]) {
        int64_t *p = sn_kctx_alloc_output(c, 1, SN_I64, 1, &d1);
        if (!p)
            return c->err->code ? c->err->code : SNUG_ERR_OOM;
        for (int64_t k = 0; k < ng; k++)
            p[k] = gfirst[gord[k]];
    }
    if (c->n_out > 2 && c->out[2]) {
        int64_t *p = sn_kctx_alloc_output(c, 2, SN_I64, 1, &n);
        if (!p)
            return c->err->code ? c->err->code : SNUG_ERR_OOM;
        for (int64_t i = 0; i < n; i++)
            p[i] = gpos[grp[i]];
    }
    if (c->n_out > 3 && c->out[3]) {
        int64_t *p = sn_kctx_alloc_output(c, 3, SN_I64, 1, &d1);
        if (!p)
            return c->err->code ? c->err->code : SNUG_ERR_OOM;
        for (int64_t k = 0; k < ng; k++)
            p[k] = gcnt[gord[k]];
    }
    return SNUG_OK;
}

/* ---- ReverseSequence ---------------------------------------------------- */

static int revseq_infer(sn_infer_ctx *c) {
    SN_TRY(sn_need_tensor(c, 0));
    SN_TRY(need_index_type(c, 1));
    const sn_tensor *x = c->in[0];
    int64_t ba = sn_attr_int(c->node, "batch_axis", 1), ta = sn_attr_int(c->node, "time_axis", 0);
    if (!((ba == 0 && ta == 1) || (ba == 1 && ta == 0)))
        return KFAIL(SNUG_ERR_INVALID_ARG, "batch_axis/time_axis must be 0 and 1");
    if (x->rank != SN_RANK_UNKNOWN && x->rank < 2)
        return KFAIL(SNUG_ERR_SHAPE, "input must have rank >= 2");
    sn_set_out(c->out[0], x->dtype, x->rank, x->dims);
    return SNUG_OK;
}

static int revseq_run(sn_kctx *c) {
    const sn_tensor *x = sn_kctx_in(c, 0), *lens = sn_kctx_in(c, 1);
    sn_tensor *y = c->out[0];
    int ba = (int)sn_attr_int(c->node, "batch_axis", 1), ta = 1 - ba;
    int64_t B = x->dims[ba], T = x->dims[ta], R = sn_dims_prod(x->dims, 2, x->rank);
    if (sn_tensor_numel(lens) != B)
        return KFAIL(SNUG_ERR_SHAPE, "sequence_lens has %lld values for batch %lld",
                     (long long)sn_tensor_numel(lens), (long long)B);
    size_t es = sn_dtype_size(x->dtype), row = (size_t)R * es;
    int64_t st_t = ta == 0 ? B * R : R, st_b = ba == 0 ? T * R : R;
    for (int64_t b = 0; b < B; b++) {
        int64_t len = idx_at(lens, b);
        if (len < 0 || len > T)
            return KFAIL(SNUG_ERR_RANGE, "sequence length %lld out of [0, %lld]", (long long)len,
                         (long long)T);
        for (int64_t t = 0; t < T; t++) {
            int64_t src = t < len ? len - 1 - t : t;
            if (row)
                memcpy((char *)y->data + (size_t)(t * st_t + b * st_b) * es,
                       (const char *)x->data + (size_t)(src * st_t + b * st_b) * es, row);
        }
    }
    return SNUG_OK;
}

/* ------------------------------------------------------------------------- */

const sn_op_def sn_ops_index[] = {
    {.domain = "", .name = "Gather", .since_version = 1, .required = 0x3, .infer = gather_infer, .cpu = {.run = gather_run}},
    {.domain = "", .name = "GatherElements", .since_version = 11, .required = 0x3, .infer = gather_el_infer,
     .cpu = {.run = gather_el_run}},
    {.domain = "", .name = "GatherND", .since_version = 11, .required = 0x3, .infer = gather_nd_infer, .cpu = {.run = gather_nd_run}},
    {.domain = "", .name = "Scatter", .since_version = 9, .required = 0x7, .infer = scatter_el_infer, .cpu = {.run = scatter_el_run}},
    {.domain = "", .name = "ScatterElements", .since_version = 11, .required = 0x7, .infer = scatter_el_infer,
     .cpu = {.run = scatter_el_run}},
    {.domain = "", .name = "ScatterND", .since_version = 11, .required = 0x7, .infer = scatter_nd_infer,
     .cpu = {.run = scatter_nd_run}},
    {.domain = "", .name = "OneHot", .since_version = 9, .required = 0x7, .infer = onehot_infer, .cpu = {.run = onehot_run}},
    {.domain = "", .name = "NonZero", .since_version = 9, .infer = nonzero_infer, .cpu = {.run = nonzero_run}},
    {.domain = "", .name = "Compress", .since_version = 9, .required = 0x3, .infer = compress_infer, .cpu = {.run = compress_run}},
    {.domain = "", .name = "Unique", .since_version = 11, .infer = unique_infer, .flags = SN_OP_ALLOCS_OUTPUTS, .estimate = unique_estimate,
     .cpu = {.prepare = unique_prepare, .run = unique_run, .free_state = sk_ws_free}},
    {.domain = "", .name = "ReverseSequence", .since_version = 10, .required = 0x3, .infer = revseq_infer, .cpu = {.run = revseq_run}},
    {0},
};
