/* Shape and data-movement ops: Reshape, Transpose, Flatten, Squeeze,
 * Unsqueeze, Concat, Split, Slice, Pad, Tile, Expand, Shape, Size,
 * ConstantOfShape, Constant, Range, EyeLike, DepthToSpace, SpaceToDepth,
 * CenterCropPad. They move elements of any dtype as bytes (strings as
 * sn_string structs). */
#include <math.h>
#include <string.h>

#include "ops/llm/kernels.h" /* llm_transpose_f32 */
#include "ops/shape/shape_util.h"

/* Run for view ops: copies input 0 unless the executor aliased it. */
static int run_copy0(sn_kctx *c) {
    const sn_tensor *x = sn_kctx_in(c, 0);
    sn_tensor *y = c->out[0];
    size_t nb = sn_tensor_nbytes(y);
    if (nb != sn_tensor_nbytes(x)) /* what inference checks, checked where bytes move */
        return KFAIL(SNUG_ERR_SHAPE, "output has %zu bytes, its input %zu", nb, sn_tensor_nbytes(x));
    if (nb && y->data != x->data)
        memmove(y->data, x->data, nb);
    return SNUG_OK;
}

/* ---- Reshape ------------------------------------------------------------ */

static int reshape_infer(sn_infer_ctx *c) {
    SN_TRY(sn_need_tensor(c, 0));
    const sn_tensor *x = c->in[0], *st = sn_infer_in(c, 1);
    int64_t shp[SN_MAX_RANK];
    int n = 0, rc;
    bool allowzero = sn_attr_int(c->node, "allowzero", 0) != 0;
    if (st) {
        rc = sk_read_ints(c->node, c->err, st, "shape", shp, SN_MAX_RANK, &n);
        if (rc < 0)
            return c->err->code;
        if (rc == 0) {
            if (st->rank == 1 && st->dims[0] >= 0 && st->dims[0] <= SN_MAX_RANK)
                sn_set_out(c->out[0], x->dtype, (int)st->dims[0], NULL);
            else
                sn_set_out(c->out[0], x->dtype, SN_RANK_UNKNOWN, NULL);
            return SNUG_OK;
        }
    } else {
        const int64_t *a;
        n = sn_attr_ints(c->node, "shape", &a);
        if (n < 0)
            return KFAIL(SNUG_ERR_INVALID_ARG, "missing shape input");
        if (n > SN_MAX_RANK)
            return KFAIL(SNUG_ERR_UNSUPPORTED, "rank %d too large", n);
        memcpy(shp, a, sizeof(int64_t) * (size_t)n);
    }
    int64_t od[SN_MAX_RANK];
    int neg = -1;
    for (int i = 0; i < n; i++) {
        int64_t v = shp[i];
        if (v == -1) {
            if (neg >= 0)
                return KFAIL(SNUG_ERR_INVALID_ARG, "shape has more than one -1");
            neg = i;
            od[i] = SN_DIM_UNKNOWN;
        } else if (v == 0 && !allowzero) {
            if (x->rank == SN_RANK_UNKNOWN)
                od[i] = SN_DIM_UNKNOWN;
            else if (i >= x->rank)
                return KFAIL(SNUG_ERR_SHAPE, "shape[%d] = 0 copies a dim the rank-%d input lacks", i,
                             x->rank);
            else
                od[i] = x->dims[i];
        } else if (v < 0) {
            return KFAIL(SNUG_ERR_INVALID_ARG, "invalid shape value %lld", (long long)v);
        } else {
            od[i] = v;
        }
    }
    if (allowzero && neg >= 0)
        for (int i = 0; i < n; i++)
            if (shp[i] == 0)
                return KFAIL(SNUG_ERR_INVALID_ARG, "allowzero with both 0 and -1 in shape");
    if (x->rank != SN_RANK_UNKNOWN) {
        /* known product of the input and of the output, cancelling symbolic
         * dims that appear on both sides */
        int64_t syms[SN_MAX_RANK];
        int ns = 0;
        bool ok = true;
        int64_t pin = 1, pout = 1;
        for (int i = 0; i < x->rank; i++) {
            if (x->dims[i] >= 0 && !sn_dim_mul(&pin, x->dims[i]))
                return KFAIL(SNUG_ERR_SHAPE, "input's dims have more elements than fit in int64");
            else if (x->dims[i] >= 0)
                continue;
            else if (x->dims[i] <= SN_DIM_SYM(0))
                syms[ns++] = x->dims[i];
            else
                ok = false;
        }
        for (int i = 0; i < n && ok; i++) {
            if (i == neg)
                continue;
            if (od[i] >= 0) {
                if (!sn_dim_mul(&pout, od[i]))
                    return KFAIL(SNUG_ERR_SHAPE, "shape's dims have more elements than fit in int64");
            } else if (od[i] <= SN_DIM_SYM(0)) {
                int k = 0;
                while (k < ns && syms[k] != od[i])
                    k++;
                if (k == ns)
                    ok = false;
                else
                    syms[k] = syms[--ns];
            } else {
                ok = false;
            }
        }
        if (ok && ns == 0) {
            if (neg >= 0) {
                if (pout == 0 || pin % pout)
                    return KFAIL(SNUG_ERR_SHAPE, "cannot reshape %lld elements with -1 (rest %lld)",
                                 (long long)pin, (long long)pout);
                od[neg] = pin / pout;
            } else if (pin != pout) {
                return KFAIL(SNUG_ERR_SHAPE, "cannot reshape %lld elements into %lld",
                             (long long)pin, (long long)pout);
            }
        }
    }
    sn_set_out(c->out[0], x->dtype, n, od);
    return SNUG_OK;
}

/* ---- Transpose ---------------------------------------------------------- */

static int transpose_perm(const sn_node *node, sn_err *err, int rank, int *perm) {
    const int64_t *p;
    int n = sn_attr_ints(node, "perm", &p);
    if (n < 0) {
        for (int i = 0; i < rank; i++)
            perm[i] = rank - 1 - i;
        return SNUG_OK;
    }
    if (n != rank)
        return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "perm has %d entries for rank %d", n, rank);
    unsigned seen = 0;
    for (int i = 0; i < n; i++) {
        int a;
        if (!sn_axis_norm(p[i], rank, &a) || (seen >> a & 1u))
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "perm is not a permutation");
        seen |= 1u << a;
        perm[i] = a;
    }
    return SNUG_OK;
}

static int transpose_infer(sn_infer_ctx *c) {
    SN_TRY(sn_need_tensor(c, 0));
    const sn_tensor *x = c->in[0];
    if (x->rank == SN_RANK_UNKNOWN) {
        const int64_t *p;
        int n = sn_attr_ints(c->node, "perm", &p);
        sn_set_out(c->out[0], x->dtype, n >= 0 ? n : SN_RANK_UNKNOWN, NULL);
        return SNUG_OK;
    }
    int perm[SN_MAX_RANK];
    SN_TRY(transpose_perm(c->node, c->err, x->rank, perm));
    int64_t od[SN_MAX_RANK];
    for (int i = 0; i < x->rank; i++)
        od[i] = x->dims[perm[i]];
    sn_set_out(c->out[0], x->dtype, x->rank, od);
    return SNUG_OK;
}

static int transpose_run(sn_kctx *c) {
    const sn_tensor *x = sn_kctx_in(c, 0);
    sn_tensor *y = c->out[0];
    int r = x->rank, perm[SN_MAX_RANK];
    SN_TRY(transpose_perm(c->node, c->err, r, perm));
    size_t es = sn_dtype_size(x->dtype);
    int64_t st[SN_MAX_RANK], bs[SN_MAX_RANK];
    sn_strides(r, x->dims, st);
    for (int i = 0; i < r; i++)
        bs[i] = st[perm[i]] * (int64_t)es;
    /* batched 2-D case of 4-byte elements (e.g. perm [0,2,1] on floats) */
    if (es == 4 && r >= 2 && perm[r - 1] == r - 2 && perm[r - 2] == r - 1) {
        bool batch = true;
        for (int i = 0; i < r - 2; i++)
            batch &= perm[i] == i;
        int64_t rows = x->dims[r - 2], cols = x->dims[r - 1];
        if (batch && rows > 1 && cols > 1) {
            int64_t nb = sn_dims_prod(x->dims, 0, r - 2);
            /* as floats: the kernel only moves the bits. One thread: a
             * split over the pool measured slower on a busy machine. */
            for (int64_t b = 0; b < nb; b++)
                llm_transpose_f32((const float *)x->data + b * rows * cols, rows, cols,
                                  (float *)y->data + b * rows * cols, rows);
            return SNUG_OK;
        }
    }
    sk_copy_strided(y->data, x->data, r, y->dims, bs, es);
    return SNUG_OK;
}

/* ---- Flatten ------------------------------------------------------------ */

static int64_t prod_or_sym(const int64_t *d, int a, int b) {
    if (b - a == 1)
        return d[a];
    int64_t p = sn_dims_prod(d, a, b);
    return p >= 0 ? p : SN_DIM_UNKNOWN;
}

static int flatten_infer(sn_infer_ctx *c) {
    SN_TRY(sn_need_tensor(c, 0));
    const sn_tensor *x = c->in[0];
    int64_t axis = sn_attr_int(c->node, "axis", 1);
    if (x->rank == SN_RANK_UNKNOWN) {
        sn_set_out(c->out[0], x->dtype, 2, NULL);
        return SNUG_OK;
    }
    if (axis < 0)
        axis += x->rank;
    if (axis < 0 || axis > x->rank)
        return KFAIL(SNUG_ERR_INVALID_ARG, "axis %lld out of range for rank %d",
                     (long long)sn_attr_int(c->node, "axis", 1), x->rank);
    int64_t od[2] = {prod_or_sym(x->dims, 0, (int)axis), prod_or_sym(x->dims, (int)axis, x->rank)};
    sn_set_out(c->out[0], x->dtype, 2, od);
    return SNUG_OK;
}

/* ---- Squeeze / Unsqueeze ------------------------------------------------ */

/* Axes from input 1 or the "axes" attribute. Returns 1 known, 0 absent,
 * 2 present but not known yet, -1 error. */
static int get_axes(const sn_node *node, sn_err *err, const sn_tensor *t, int64_t *ax, int *n) {
    if (t) {
        int rc = sk_read_ints(node, err, t, "axes", ax, SN_MAX_RANK, n);
        if (rc < 0)
            return -1;
        if (rc == 0) {
            *n = t->rank == 1 ? (int)t->dims[0] : -1;
            return 2;
        }
        return 1;
    }
    const int64_t *a;
    int k = sn_attr_ints(node, "axes", &a);
    if (k < 0)
        return 0;
    if (k > SN_MAX_RANK) {
        sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "too many axes");
        return -1;
    }
    memcpy(ax, a, sizeof(int64_t) * (size_t)k);
    *n = k;
    return 1;
}

static int squeeze_infer(sn_infer_ctx *c) {
    SN_TRY(sn_need_tensor(c, 0));
    const sn_tensor *x = c->in[0];
    int64_t ax[SN_MAX_RANK];
    int n = 0;
    int rc = get_axes(c->node, c->err, sn_infer_in(c, 1), ax, &n);
    if (rc < 0)
        return c->err->code;
    if (x->rank == SN_RANK_UNKNOWN || rc == 2) {
        int r = SN_RANK_UNKNOWN;
        if (x->rank != SN_RANK_UNKNOWN && rc == 2 && n >= 0)
            r = x->rank - n;
        sn_set_out(c->out[0], x->dtype, r, NULL);
        return SNUG_OK;
    }
    bool drop[SN_MAX_RANK] = {false};
    if (rc == 0) {
        for (int i = 0; i < x->rank; i++) {
            if (x->dims[i] < 0) {
                sn_set_out(c->out[0], x->dtype, SN_RANK_UNKNOWN, NULL);
                return SNUG_OK;
            }
            drop[i] = x->dims[i] == 1;
        }
    } else {
        for (int i = 0; i < n; i++) {
            int a;
            if (!sn_axis_norm(ax[i], x->rank, &a))
                return KFAIL(SNUG_ERR_INVALID_ARG, "axis %lld out of range for rank %d",
                             (long long)ax[i], x->rank);
            if (x->dims[a] >= 0 && x->dims[a] != 1)
                return KFAIL(SNUG_ERR_SHAPE, "cannot squeeze axis %d of size %lld", a,
                             (long long)x->dims[a]);
            drop[a] = true;
        }
    }
    int64_t od[SN_MAX_RANK];
    int r = 0;
    for (int i = 0; i < x->rank; i++)
        if (!drop[i])
            od[r++] = x->dims[i];
    sn_set_out(c->out[0], x->dtype, r, od);
    return SNUG_OK;
}

static int unsqueeze_infer(sn_infer_ctx *c) {
    SN_TRY(sn_need_tensor(c, 0));
    const sn_tensor *x = c->in[0];
    int64_t ax[SN_MAX_RANK];
    int n = 0;
    int rc = get_axes(c->node, c->err, sn_infer_in(c, 1), ax, &n);
    if (rc < 0)
        return c->err->code;
    if (rc == 0)
        return KFAIL(SNUG_ERR_INVALID_ARG, "axes are required");
    if (x->rank == SN_RANK_UNKNOWN || rc == 2) {
        int r = SN_RANK_UNKNOWN;
        if (x->rank != SN_RANK_UNKNOWN && n >= 0)
            r = x->rank + n;
        sn_set_out(c->out[0], x->dtype, r, NULL);
        return SNUG_OK;
    }
    int r = x->rank + n;
    if (r > SN_MAX_RANK)
        return KFAIL(SNUG_ERR_UNSUPPORTED, "rank %d exceeds %d", r, SN_MAX_RANK);
    bool ins[SN_MAX_RANK] = {false};
    for (int i = 0; i < n; i++) {
        int a;
        if (!sn_axis_norm(ax[i], r, &a) || ins[a])
            return KFAIL(SNUG_ERR_INVALID_ARG, "invalid or repeated axis %lld for output rank %d",
                         (long long)ax[i], r);
        ins[a] = true;
    }
    int64_t od[SN_MAX_RANK];
    for (int i = 0, j = 0; i < r; i++)
        od[i] = ins[i] ? 1 : x->dims[j++];
    sn_set_out(c->out[0], x->dtype, r, od);
    return SNUG_OK;
}

/* ---- Concat ------------------------------------------------------------- */

static int concat_infer(sn_infer_ctx *c) {
    if (c->n_in < 1)
        return KFAIL(SNUG_ERR_INVALID_ARG, "needs at least one input");
    const sn_attr *aa = sn_attr_get(c->node, "axis");
    if (!aa)
        return KFAIL(SNUG_ERR_INVALID_ARG, "axis attribute is required");
    int64_t axis = sn_attr_int(c->node, "axis", 0);
    int rank = SN_RANK_UNKNOWN;
    sn_dtype dt = SN_UNDEFINED;
    for (int i = 0; i < c->n_in; i++) {
        SN_TRY(sn_need_tensor(c, i));
        if (i == 0)
            dt = c->in[i]->dtype;
        else if (c->in[i]->dtype != dt)
            return KFAIL(SNUG_ERR_TYPE, "input %d is %s, input 0 is %s", i,
                         sn_dtype_name(c->in[i]->dtype), sn_dtype_name(dt));
        if (c->in[i]->rank != SN_RANK_UNKNOWN) {
            if (rank != SN_RANK_UNKNOWN && rank != c->in[i]->rank)
                return KFAIL(SNUG_ERR_SHAPE, "inputs have ranks %d and %d", rank, c->in[i]->rank);
            rank = c->in[i]->rank;
        }
    }
    if (rank == SN_RANK_UNKNOWN) {
        sn_set_out(c->out[0], dt, SN_RANK_UNKNOWN, NULL);
        return SNUG_OK;
    }
    int a;
    if (!sn_axis_norm(axis, rank, &a))
        return KFAIL(SNUG_ERR_INVALID_ARG, "axis %lld out of range for rank %d", (long long)axis,
                     rank);
    int64_t od[SN_MAX_RANK];
    for (int d = 0; d < rank; d++) {
        od[d] = SN_DIM_UNKNOWN;
        if (d == a) {
            int64_t sum = 0;
            for (int i = 0; i < c->n_in && sum >= 0; i++) {
                const sn_tensor *t = c->in[i];
                if (t->rank == SN_RANK_UNKNOWN || t->dims[d] < 0)
                    sum = -1;
                else
                    sum += t->dims[d];
            }
            od[d] = sum >= 0 ? sum : SN_DIM_UNKNOWN;
            continue;
        }
        for (int i = 0; i < c->n_in; i++) {
            const sn_tensor *t = c->in[i];
            if (t->rank == SN_RANK_UNKNOWN)
                continue;
            int64_t v = t->dims[d];
            if (v >= 0 && od[d] >= 0 && v != od[d])
                return KFAIL(SNUG_ERR_SHAPE, "inputs differ in dim %d: %lld vs %lld", d,
                             (long long)od[d], (long long)v);
            if (v >= 0 || od[d] == SN_DIM_UNKNOWN)
                od[d] = v;
        }
    }
    sn_set_out(c->out[0], dt, rank, od);
    return SNUG_OK;
}

static int concat_run(sn_kctx *c) {
    sn_tensor *y = c->out[0];
    int a = 0;
    if (!sn_axis_norm(sn_attr_int(c->node, "axis", 0), y->rank, &a))
        return KFAIL(SNUG_ERR_INVALID_ARG, "axis out of range");
    size_t es = sn_dtype_size(y->dtype);
    int64_t outer = sn_dims_prod(y->dims, 0, a);
    size_t inner = (size_t)sn_dims_prod(y->dims, a + 1, y->rank) * es;
    size_t orow = (size_t)y->dims[a] * inner;
    size_t off = 0;
    for (int i = 0; i < c->n_in; i++) {
        const sn_tensor *t = c->in[i];
        size_t row = (size_t)t->dims[a] * inner;
        if (row) {
            for (int64_t o = 0; o < outer; o++)
                memcpy((char *)y->data + (size_t)o * orow + off,
                       (const char *)t->data + (size_t)o * row, row);
        }
        off += row;
    }
    return SNUG_OK;
}

/* ---- Split -------------------------------------------------------------- */

/* Sizes of the outputs along the axis; false (not an error) when unknown. */
static int split_sizes(const sn_node *node, sn_err *err, const sn_tensor *x,
                       const sn_tensor *split_in, int axis, int n_out, int64_t *sz, bool *known) {
    int64_t sp[64];
    int ns = -1;
    *known = false;
    if (split_in) {
        int rc = sk_read_ints(node, err, split_in, "split", sp, 64, &ns);
        if (rc < 0)
            return err->code;
        if (rc == 0)
            return SNUG_OK;
    } else {
        const int64_t *a;
        int k = sn_attr_ints(node, "split", &a);
        if (k > 64)
            return sn_kfail(err, node, SNUG_ERR_UNSUPPORTED, "too many splits");
        if (k >= 0) {
            memcpy(sp, a, sizeof(int64_t) * (size_t)k);
            ns = k;
        }
    }
    int64_t dim = x->dims[axis];
    if (ns >= 0) {
        if (ns != n_out)
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "split has %d entries for %d outputs",
                            ns, n_out);
        int64_t sum = 0;
        for (int i = 0; i < ns; i++) {
            if (sp[i] < 0)
                return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "negative split %lld",
                                (long long)sp[i]);
            sz[i] = sp[i];
            sum += sp[i];
        }
        if (dim >= 0 && sum != dim)
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "splits sum to %lld, axis has %lld",
                            (long long)sum, (long long)dim);
        *known = true;
        return SNUG_OK;
    }
    if (dim < 0)
        return SNUG_OK;
    int64_t parts = sn_attr_int(node, "num_outputs", n_out);
    if (parts != n_out || parts <= 0)
        return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "num_outputs %lld but %d outputs",
                        (long long)parts, n_out);
    int64_t chunk = (dim + parts - 1) / parts;
    if (node->opset < 18 && dim % parts)
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "axis of %lld does not split into %lld parts",
                        (long long)dim, (long long)parts);
    int64_t left = dim;
    for (int i = 0; i < n_out; i++) {
        sz[i] = sn_imin(chunk, left);
        left -= sz[i];
    }
    *known = true;
    return SNUG_OK;
}

static int split_infer(sn_infer_ctx *c) {
    SN_TRY(sn_need_tensor(c, 0));
    const sn_tensor *x = c->in[0];
    if (c->n_out > 64)
        return KFAIL(SNUG_ERR_UNSUPPORTED, "too many outputs");
    if (x->rank == SN_RANK_UNKNOWN) {
        for (int i = 0; i < c->n_out; i++)
            if (c->out[i])
                sn_set_out(c->out[i], x->dtype, SN_RANK_UNKNOWN, NULL);
        return SNUG_OK;
    }
    int64_t axis = sn_attr_int(c->node, "axis", 0);
    int a;
    if (!sn_axis_norm(axis, x->rank, &a))
        return KFAIL(SNUG_ERR_INVALID_ARG, "axis %lld out of range for rank %d", (long long)axis,
                     x->rank);
    int64_t sz[64];
    bool known;
    SN_TRY(split_sizes(c->node, c->err, x, sn_infer_in(c, 1), a, c->n_out, sz, &known));
    for (int i = 0; i < c->n_out; i++) {
        if (!c->out[i])
            continue;
        sn_set_out(c->out[i], x->dtype, x->rank, x->dims);
        c->out[i]->dims[a] = known ? sz[i] : SN_DIM_UNKNOWN;
    }
    return SNUG_OK;
}

static int split_run(sn_kctx *c) {
    const sn_tensor *x = sn_kctx_in(c, 0);
    int a = 0;
    if (!sn_axis_norm(sn_attr_int(c->node, "axis", 0), x->rank, &a))
        return KFAIL(SNUG_ERR_INVALID_ARG, "axis out of range");
    size_t es = sn_dtype_size(x->dtype);
    int64_t outer = sn_dims_prod(x->dims, 0, a);
    size_t inner = (size_t)sn_dims_prod(x->dims, a + 1, x->rank) * es;
    size_t irow = (size_t)x->dims[a] * inner, off = 0;
    int64_t sz[64];
    bool known;
    SN_TRY(split_sizes(c->node, c->err, x, sn_kctx_in(c, 1), a, c->n_out, sz, &known));
    for (int i = 0; i < c->n_out; i++) {
        size_t row = (size_t)sz[i] * inner;
        sn_tensor *y = c->out[i];
        if (y && row)
            for (int64_t o = 0; o < outer; o++)
                memcpy((char *)y->data + (size_t)o * row,
                       (const char *)x->data + (size_t)o * irow + off, row);
        off += row;
    }
    return SNUG_OK;
}

/* ---- Slice -------------------------------------------------------------- */

typedef struct slice_plan {
    int64_t start[SN_MAX_RANK], step[SN_MAX_RANK], len[SN_MAX_RANK];
    bool touched[SN_MAX_RANK];
} slice_plan;

/* Normalizes one axis' start/end/step against dim (known, >= 0). */
static void slice_axis(int64_t dim, int64_t s, int64_t e, int64_t step, int64_t *start,
                       int64_t *len) {
    if (s < 0)
        s = s < -dim ? -dim - 1 : s + dim; /* stays below 0 when past the front */
    if (e < 0)
        e = e < -dim ? -dim - 1 : e + dim;
    if (step > 0) {
        s = s < 0 ? 0 : (s > dim ? dim : s);
        e = e < 0 ? 0 : (e > dim ? dim : e);
        *start = s;
        *len = e > s ? (e - s - 1) / step + 1 : 0;
    } else {
        s = s < 0 ? -1 : (s > dim - 1 ? dim - 1 : s);
        e = e < -1 ? -1 : (e > dim - 1 ? dim - 1 : e);
        *start = s;
        *len = s > e ? (int64_t)((uint64_t)(s - e - 1) / ((uint64_t)(-(step + 1)) + 1u)) + 1 : 0;
    }
    if (*len == 0)
        *start = 0;
}

/* Returns 1 when the plan is complete, 0 when starts/ends/axes/steps are not
 * known yet, -1 on error. Dims of x may be unknown: then len is -1. */
static int slice_make(const sn_node *node, sn_err *err, const sn_tensor *const *in, int n_in,
                      slice_plan *p) {
    const sn_tensor *x = in[0];
    int64_t st[SN_MAX_RANK], en[SN_MAX_RANK], ax[SN_MAX_RANK], sp[SN_MAX_RANK];
    int ns, ne, na = -1, nsp = -1;
    if (n_in >= 2) {
        int rc;
        if ((rc = sk_read_ints(node, err, sn_in(in, n_in, 1), "starts", st, SN_MAX_RANK, &ns)) <= 0)
            return rc;
        if ((rc = sk_read_ints(node, err, sn_in(in, n_in, 2), "ends", en, SN_MAX_RANK, &ne)) <= 0)
            return rc;
        const sn_tensor *ta = sn_in(in, n_in, 3), *ts = sn_in(in, n_in, 4);
        if (ta && (rc = sk_read_ints(node, err, ta, "axes", ax, SN_MAX_RANK, &na)) <= 0)
            return rc;
        if (ts && (rc = sk_read_ints(node, err, ts, "steps", sp, SN_MAX_RANK, &nsp)) <= 0)
            return rc;
    } else {
        const int64_t *a;
        ns = sn_attr_ints(node, "starts", &a);
        if (ns < 0 || ns > SN_MAX_RANK)
            goto bad_attr;
        memcpy(st, a, sizeof(int64_t) * (size_t)ns);
        ne = sn_attr_ints(node, "ends", &a);
        if (ne < 0 || ne > SN_MAX_RANK)
            goto bad_attr;
        memcpy(en, a, sizeof(int64_t) * (size_t)ne);
        na = sn_attr_ints(node, "axes", &a);
        if (na > SN_MAX_RANK)
            goto bad_attr;
        if (na >= 0)
            memcpy(ax, a, sizeof(int64_t) * (size_t)na);
    }
    if (ne != ns || (na >= 0 && na != ns) || (nsp >= 0 && nsp != ns)) {
        sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "starts/ends/axes/steps lengths differ");
        return -1;
    }
    for (int i = 0; i < x->rank; i++) {
        p->start[i] = 0;
        p->step[i] = 1;
        p->len[i] = x->dims[i];
        p->touched[i] = false;
    }
    for (int i = 0; i < ns; i++) {
        int a = i;
        if (na >= 0 && !sn_axis_norm(ax[i], x->rank, &a)) {
            sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "axis %lld out of range for rank %d",
                     (long long)ax[i], x->rank);
            return -1;
        }
        if (a >= x->rank || p->touched[a]) {
            sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "invalid or repeated axis %d", a);
            return -1;
        }
        int64_t step = nsp >= 0 ? sp[i] : 1;
        if (step == 0) {
            sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "step is 0");
            return -1;
        }
        p->touched[a] = true;
        p->step[a] = step;
        if (x->dims[a] >= 0) {
            slice_axis(x->dims[a], st[i], en[i], step, &p->start[a], &p->len[a]);
            if (p->len[a] <= 1)
                p->step[a] = 1; /* keeps huge steps out of stride arithmetic */
        } else if (step == 1 && st[i] == 0 && en[i] >= INT32_MAX) {
            p->len[a] = x->dims[a]; /* whole (symbolic) axis */
        } else {
            p->len[a] = SN_DIM_UNKNOWN;
        }
    }
    return 1;
bad_attr:
    sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "starts/ends attributes missing or too long");
    return -1;
}

static int slice_infer(sn_infer_ctx *c) {
    SN_TRY(sn_need_tensor(c, 0));
    const sn_tensor *x = c->in[0];
    if (x->rank == SN_RANK_UNKNOWN) {
        sn_set_out(c->out[0], x->dtype, SN_RANK_UNKNOWN, NULL);
        return SNUG_OK;
    }
    slice_plan p;
    int rc = slice_make(c->node, c->err, c->in, c->n_in, &p);
    if (rc < 0)
        return c->err->code;
    if (rc == 0) {
        sn_set_out(c->out[0], x->dtype, x->rank, NULL);
        return SNUG_OK;
    }
    sn_set_out(c->out[0], x->dtype, x->rank, p.len);
    return SNUG_OK;
}

static int slice_run(sn_kctx *c) {
    const sn_tensor *x = sn_kctx_in(c, 0);
    sn_tensor *y = c->out[0];
    slice_plan p;
    if (slice_make(c->node, c->err, c->in, c->n_in, &p) <= 0)
        return c->err->code ? c->err->code : SNUG_ERR_INTERNAL;
    if (sn_tensor_numel(y) == 0)
        return SNUG_OK;
    size_t es = sn_dtype_size(x->dtype);
    int64_t st[SN_MAX_RANK], bs[SN_MAX_RANK];
    sn_strides(x->rank, x->dims, st);
    int64_t off = 0;
    for (int i = 0; i < x->rank; i++) {
        off += p.start[i] * st[i];
        bs[i] = st[i] * p.step[i] * (int64_t)es;
    }
    sk_copy_strided(y->data, (const char *)x->data + off * (int64_t)es, x->rank, y->dims, bs, es);
    return SNUG_OK;
}

/* ---- Pad ---------------------------------------------------------------- */

enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP };

typedef struct pad_plan {
    int mode;
    int64_t pb[SN_MAX_RANK], pe[SN_MAX_RANK];
} pad_plan;

static int pad_make(const sn_node *node, sn_err *err, const sn_tensor *const *in, int n_in,
                    pad_plan *p) {
    const sn_tensor *x = in[0];
    const char *mode = sn_attr_str(node, "mode", "constant");
    if (!strcmp(mode, "constant"))
        p->mode = PAD_CONSTANT;
    else if (!strcmp(mode, "reflect"))
        p->mode = PAD_REFLECT;
    else if (!strcmp(mode, "edge"))
        p->mode = PAD_EDGE;
    else if (!strcmp(mode, "wrap"))
        p->mode = PAD_WRAP;
    else {
        sn_kfail(err, node, SNUG_ERR_UNSUPPORTED, "unknown mode '%s'", mode);
        return -1;
    }
    int r = x->rank;
    int64_t pads[2 * SN_MAX_RANK], ax[SN_MAX_RANK];
    int np, na = -1;
    if (n_in >= 2 && in[1]) {
        int rc = sk_read_ints(node, err, in[1], "pads", pads, 2 * SN_MAX_RANK, &np);
        if (rc <= 0)
            return rc;
        const sn_tensor *ta = sn_in(in, n_in, 3);
        if (ta && (rc = sk_read_ints(node, err, ta, "axes", ax, SN_MAX_RANK, &na)) <= 0)
            return rc;
    } else {
        const int64_t *a;
        np = sn_attr_ints(node, "pads", &a);
        if (np < 0)
            np = sn_attr_ints(node, "paddings", &a);
        if (np < 0 || np > 2 * SN_MAX_RANK) {
            sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "pads missing or too long");
            return -1;
        }
        memcpy(pads, a, sizeof(int64_t) * (size_t)np);
    }
    int nax = na >= 0 ? na : r;
    if (np != 2 * nax) {
        sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "pads has %d values for %d axes", np, nax);
        return -1;
    }
    for (int i = 0; i < r; i++)
        p->pb[i] = p->pe[i] = 0;
    for (int i = 0; i < nax; i++) {
        int a = i;
        if (na >= 0 && !sn_axis_norm(ax[i], r, &a)) {
            sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "axis %lld out of range", (long long)ax[i]);
            return -1;
        }
        p->pb[a] = pads[i];
        p->pe[a] = pads[i + nax];
    }
    return 1;
}

static int pad_infer(sn_infer_ctx *c) {
    SN_TRY(sn_need_tensor(c, 0));
    const sn_tensor *x = c->in[0];
    if (x->rank == SN_RANK_UNKNOWN) {
        sn_set_out(c->out[0], x->dtype, SN_RANK_UNKNOWN, NULL);
        return SNUG_OK;
    }
    pad_plan p;
    int rc = pad_make(c->node, c->err, c->in, c->n_in, &p);
    if (rc < 0)
        return c->err->code;
    int64_t od[SN_MAX_RANK];
    for (int i = 0; i < x->rank; i++) {
        od[i] = SN_DIM_UNKNOWN;
        if (rc == 0)
            continue;
        if (x->dims[i] < 0) {
            if (p.pb[i] == 0 && p.pe[i] == 0)
                od[i] = x->dims[i];
            continue;
        }
        od[i] = x->dims[i];
        if (!sn_dim_add(&od[i], p.pb[i]) || !sn_dim_add(&od[i], p.pe[i]))
            return KFAIL(SNUG_ERR_SHAPE, "pads of axis %d overflow", i);
        if (od[i] < 0)
            return KFAIL(SNUG_ERR_SHAPE, "pads make axis %d negative", i);
        if (x->dims[i] == 0 && od[i] > 0 && p.mode != PAD_CONSTANT)
            return KFAIL(SNUG_ERR_SHAPE, "cannot pad empty axis %d in this mode", i);
    }
    sn_set_out(c->out[0], x->dtype, x->rank, od);
    return SNUG_OK;
}

/* Maps an output coordinate minus the front pad into the input, for the
 * non-constant modes; i may be anywhere. */
static int64_t pad_src(int mode, int64_t i, int64_t d) {
    if (i >= 0 && i < d)
        return i;
    if (mode == PAD_EDGE)
        return i < 0 ? 0 : d - 1;
    if (mode == PAD_WRAP) {
        int64_t m = i % d;
        return m < 0 ? m + d : m;
    }
    if (d == 1)
        return 0;
    int64_t per = 2 * (d - 1), m = i % per;
    if (m < 0)
        m += per;
    return m < d ? m : per - m;
}

static int pad_run(sn_kctx *c) {
    const sn_tensor *x = sn_kctx_in(c, 0);
    sn_tensor *y = c->out[0];
    pad_plan p;
    if (pad_make(c->node, c->err, c->in, c->n_in, &p) <= 0)
        return c->err->code ? c->err->code : SNUG_ERR_INTERNAL;
    int64_t n = sn_tensor_numel(y);
    if (n == 0)
        return SNUG_OK;
    size_t es = sn_dtype_size(x->dtype);
    unsigned char cval[16] = {0};
    const sn_tensor *cv = sn_kctx_in(c, 2);
    if (cv && cv->data && sn_tensor_numel(cv) >= 1) {
        if (cv->dtype != x->dtype)
            return KFAIL(SNUG_ERR_TYPE, "constant_value is %s, data is %s",
                         sn_dtype_name(cv->dtype), sn_dtype_name(x->dtype));
        memcpy(cval, cv->data, es);
    } else if (x->dtype != SN_STRING) {
        sn_store_f64(x->dtype, cval, 0, sn_attr_float(c->node, "value", 0.0f));
    }
    int r = x->rank;
    if (r == 0) {
        memcpy(y->data, x->data, es);
        return SNUG_OK;
    }
    /* negative pads crop first; the modes then work on the cropped box
     * (origin co[d], size cd[d]) */
    int64_t xs[SN_MAX_RANK], co[SN_MAX_RANK], cd[SN_MAX_RANK], pb[SN_MAX_RANK];
    sn_strides(r, x->dims, xs);
    for (int d = 0; d < r; d++) {
        co[d] = sn_imax(-p.pb[d], 0);
        cd[d] = x->dims[d] - co[d] - sn_imax(-p.pe[d], 0);
        pb[d] = sn_imax(p.pb[d], 0);
        if (cd[d] <= 0 && p.mode != PAD_CONSTANT)
            return KFAIL(SNUG_ERR_SHAPE, "axis %d is empty after cropping; mode needs data", d);
    }
    int64_t idx[SN_MAX_RANK] = {0};
    int64_t olast = y->dims[r - 1], dlast = sn_imax(cd[r - 1], 0), pbl = pb[r - 1];
    char *o = y->data;
    const char *xd = x->data;
    int64_t rows = n / olast;
    for (int64_t row = 0; row < rows; row++) {
        /* source row offset, or constant fill */
        bool fill = false;
        int64_t off = co[r - 1];
        for (int d = 0; d < r - 1; d++) {
            int64_t i = idx[d] - pb[d];
            if (i < 0 || i >= cd[d]) {
                if (p.mode == PAD_CONSTANT) {
                    fill = true;
                    break;
                }
                i = pad_src(p.mode, i, cd[d]);
            }
            off += (co[d] + i) * xs[d];
        }
        if (fill || dlast == 0) {
            for (int64_t k = 0; k < olast; k++)
                memcpy(o + (size_t)k * es, cval, es);
        } else {
            const char *src = xd + (size_t)off * es;
            /* [k0, k1) maps straight into the row */
            int64_t k0 = sn_imin(pbl, olast), k1 = sn_imin(olast, pbl + dlast);
            for (int64_t k = 0; k < olast; k++) {
                if (k == k0 && k1 > k0) {
                    memcpy(o + (size_t)k0 * es, src + (size_t)(k0 - pbl) * es,
                           (size_t)(k1 - k0) * es);
                    k = k1 - 1;
                    continue;
                }
                if (p.mode == PAD_CONSTANT)
                    memcpy(o + (size_t)k * es, cval, es);
                else
                    memcpy(o + (size_t)k * es, src + (size_t)pad_src(p.mode, k - pbl, dlast) * es,
                           es);
            }
        }
        o += (size_t)olast * es;
        for (int d = r - 2; d >= 0; d--) {
            if (++idx[d] < y->dims[d])
                break;
            idx[d] = 0;
        }
    }
    return SNUG_OK;
}

/* ---- Tile / Expand ------------------------------------------------------ */

static int tile_infer(sn_infer_ctx *c) {
    SN_TRY(sn_need_tensor(c, 0));
    const sn_tensor *x = c->in[0];
    int64_t rep[SN_MAX_RANK];
    int n = 0;
    int rc = sk_read_ints(c->node, c->err, sn_infer_in(c, 1), "repeats", rep, SN_MAX_RANK, &n);
    if (rc < 0)
        return c->err->code;
    if (x->rank == SN_RANK_UNKNOWN || rc == 0) {
        sn_set_out(c->out[0], x->dtype, x->rank, NULL);
        return SNUG_OK;
    }
    if (n != x->rank)
        return KFAIL(SNUG_ERR_SHAPE, "repeats has %d values for rank %d", n, x->rank);
    int64_t od[SN_MAX_RANK];
    for (int i = 0; i < n; i++) {
        if (rep[i] < 0)
            return KFAIL(SNUG_ERR_INVALID_ARG, "negative repeat %lld", (long long)rep[i]);
        od[i] = x->dims[i] >= 0 || rep[i] == 1 ? x->dims[i] : SN_DIM_UNKNOWN;
        if (x->dims[i] >= 0 && !sn_dim_mul(&od[i], rep[i]))
            return KFAIL(SNUG_ERR_SHAPE, "axis %d: %lld x %lld repeats overflows", i, (long long)x->dims[i],
                         (long long)rep[i]);
    }
    sn_set_out(c->out[0], x->dtype, x->rank, od);
    return SNUG_OK;
}

static int tile_run(sn_kctx *c) {
    const sn_tensor *x = sn_kctx_in(c, 0);
    sn_tensor *y = c->out[0];
    int r = x->rank;
    size_t es = sn_dtype_size(x->dtype);
    if (r == 0) {
        memcpy(y->data, x->data, es);
        return SNUG_OK;
    }
    /* the output as [rep0, d0, rep1, d1, ...] reading x with stride 0 on reps */
    int64_t st[SN_MAX_RANK], dims[2 * SN_MAX_RANK], bs[2 * SN_MAX_RANK];
    sn_strides(r, x->dims, st);
    for (int i = 0; i < r; i++) {
        dims[2 * i] = x->dims[i] ? y->dims[i] / x->dims[i] : 0;
        dims[2 * i + 1] = x->dims[i];
        bs[2 * i] = 0;
        bs[2 * i + 1] = st[i] * (int64_t)es;
    }
    if (sn_tensor_numel(y) > 0)
        sk_copy_strided(y->data, x->data, 2 * r, dims, bs, es);
    return SNUG_OK;
}

static int expand_infer(sn_infer_ctx *c) {
    SN_TRY(sn_need_tensor(c, 0));
    const sn_tensor *x = c->in[0], *s = sn_infer_in(c, 1);
    int64_t shp[SN_MAX_RANK];
    int n = 0;
    int rc = sk_read_ints(c->node, c->err, s, "shape", shp, SN_MAX_RANK, &n);
    if (rc < 0)
        return c->err->code;
    if (rc == 0) {
        int r = SN_RANK_UNKNOWN;
        if (s && s->rank == 1 && s->dims[0] >= 0 && x->rank != SN_RANK_UNKNOWN)
            r = (int)sn_imax(s->dims[0], x->rank);
        sn_set_out(c->out[0], x->dtype, r, NULL);
        return SNUG_OK;
    }
    if (x->rank == SN_RANK_UNKNOWN) {
        sn_set_out(c->out[0], x->dtype, SN_RANK_UNKNOWN, NULL);
        return SNUG_OK;
    }
    for (int i = 0; i < n; i++)
        if (shp[i] < 0)
            return KFAIL(SNUG_ERR_INVALID_ARG, "negative dim %lld in shape", (long long)shp[i]);
    int r;
    int64_t od[SN_MAX_RANK];
    sn_err e = {0};
    if (sn_broadcast_shape(x->rank, x->dims, n, shp, &r, od, &e))
        return KFAIL(SNUG_ERR_SHAPE, "%s", e.msg);
    sn_set_out(c->out[0], x->dtype, r, od);
    return SNUG_OK;
}

static int expand_run(sn_kctx *c) {
    const sn_tensor *x = sn_kctx_in(c, 0);
    sn_tensor *y = c->out[0];
    size_t es = sn_dtype_size(x->dtype);
    int r = y->rank, off = r - x->rank;
    int64_t st[SN_MAX_RANK], bs[SN_MAX_RANK];
    sn_strides(x->rank, x->dims, st);
    for (int i = 0; i < r; i++) {
        int j = i - off;
        bs[i] = (j < 0 || x->dims[j] == 1) ? 0 : st[j] * (int64_t)es;
    }
    if (sn_tensor_numel(y) > 0)
        sk_copy_strided(y->data, x->data, r, y->dims, bs, es);
    return SNUG_OK;
}

/* ---- Shape / Size ------------------------------------------------------- */

static void shape_range(const sn_node *node, int rank, int64_t *s, int64_t *e) {
    int64_t a = sn_attr_int(node, "start", 0), b = sn_attr_int(node, "end", rank);
    if (a < 0)
        a += rank;
    if (b < 0)
        b += rank;
    *s = sn_imin(sn_imax(a, 0), rank);
    *e = sn_imin(sn_imax(b, 0), rank);
}

static int shape_infer(sn_infer_ctx *c) {
    const sn_tensor *x = sn_infer_in(c, 0);
    if (!x)
        return KFAIL(SNUG_ERR_INVALID_ARG, "input is required");
    int64_t d = SN_DIM_UNKNOWN;
    if (x->rank != SN_RANK_UNKNOWN) {
        int64_t s, e;
        shape_range(c->node, x->rank, &s, &e);
        d = sn_imax(e - s, 0);
    }
    sn_set_out(c->out[0], SN_I64, 1, &d);
    return SNUG_OK;
}

static int shape_run(sn_kctx *c) {
    const sn_tensor *x = sn_kctx_in(c, 0);
    int64_t s, e;
    shape_range(c->node, x->rank, &s, &e);
    for (int64_t i = s; i < e; i++)
        ((int64_t *)c->out[0]->data)[i - s] = x->dims[i];
    return SNUG_OK;
}

static int size_infer(sn_infer_ctx *c) {
    if (!sn_infer_in(c, 0))
        return KFAIL(SNUG_ERR_INVALID_ARG, "input is required");
    sn_set_out(c->out[0], SN_I64, 0, NULL);
    return SNUG_OK;
}

static int size_run(sn_kctx *c) {
    *(int64_t *)c->out[0]->data = sn_tensor_numel(sn_kctx_in(c, 0));
    return SNUG_OK;
}

/* ---- ConstantOfShape / Constant ----------------------------------------- */

static int cos_infer(sn_infer_ctx *c) {
    SN_TRY(sn_need_tensor(c, 0));
    const sn_tensor *v = sn_attr_tensor(c->node, "value"), *s = c->in[0];
    sn_dtype dt = SN_F32;
    if (v) {
        if (sn_tensor_numel(v) != 1)
            return KFAIL(SNUG_ERR_INVALID_ARG, "value must hold one element");
        dt = v->dtype;
    }
    int64_t shp[SN_MAX_RANK];
    int n = 0;
    int rc = sk_read_ints(c->node, c->err, s, "shape", shp, SN_MAX_RANK, &n);
    if (rc < 0)
        return c->err->code;
    if (rc == 0) {
        int r = s->rank == 1 && s->dims[0] >= 0 && s->dims[0] <= SN_MAX_RANK ? (int)s->dims[0]
                                                                             : SN_RANK_UNKNOWN;
        sn_set_out(c->out[0], dt, r, NULL);
        return SNUG_OK;
    }
    for (int i = 0; i < n; i++)
        if (shp[i] < 0)
            return KFAIL(SNUG_ERR_INVALID_ARG, "negative dim %lld", (long long)shp[i]);
    sn_set_out(c->out[0], dt, n, shp);
    return SNUG_OK;
}

static int cos_run(sn_kctx *c) {
    const sn_tensor *v = sn_attr_tensor(c->node, "value");
    sn_tensor *y = c->out[0];
    int64_t n = sn_tensor_numel(y);
    size_t es = sn_dtype_size(y->dtype);
    if (!v) {
        memset(y->data, 0, (size_t)n * es);
        return SNUG_OK;
    }
    bool zero = true;
    for (size_t k = 0; k < es; k++)
        zero &= ((const unsigned char *)v->data)[k] == 0;
    if (zero) {
        memset(y->data, 0, (size_t)n * es);
    } else if (es == 4) {
        uint32_t w;
        memcpy(&w, v->data, 4);
        for (int64_t i = 0; i < n; i++)
            ((uint32_t *)y->data)[i] = w;
    } else {
        for (int64_t i = 0; i < n; i++)
            memcpy((char *)y->data + (size_t)i * es, v->data, es);
    }
    return SNUG_OK;
}

static int constant_infer(sn_infer_ctx *c) {
    const sn_node *nd = c->node;
    const sn_tensor *t = sn_attr_tensor(nd, "value");
    const float *fs;
    const int64_t *is;
    const sn_string *ss;
    int n;
    if (t) {
        if (t->kind != SN_KIND_TENSOR)
            return KFAIL(SNUG_ERR_UNSUPPORTED, "value is not a tensor");
        sn_set_out(c->out[0], t->dtype, t->rank, t->dims);
        return SNUG_OK;
    }
    if (sn_attr_get(nd, "sparse_value"))
        return KFAIL(SNUG_ERR_UNSUPPORTED, "sparse_value is not supported");
    const sn_attr *a;
    int64_t one = 1;
    if ((a = sn_attr_get(nd, "value_float")) != NULL) {
        sn_set_out(c->out[0], SN_F32, 0, NULL);
    } else if ((a = sn_attr_get(nd, "value_int")) != NULL) {
        sn_set_out(c->out[0], SN_I64, 0, NULL);
    } else if ((a = sn_attr_get(nd, "value_string")) != NULL) {
        sn_set_out(c->out[0], SN_STRING, 0, NULL);
    } else if ((n = sn_attr_floats(nd, "value_floats", &fs)) >= 0) {
        one = n;
        sn_set_out(c->out[0], SN_F32, 1, &one);
    } else if ((n = sn_attr_ints(nd, "value_ints", &is)) >= 0) {
        one = n;
        sn_set_out(c->out[0], SN_I64, 1, &one);
    } else if ((n = sn_attr_strings(nd, "value_strings", &ss)) >= 0) {
        one = n;
        sn_set_out(c->out[0], SN_STRING, 1, &one);
    } else {
        return KFAIL(SNUG_ERR_INVALID_ARG, "no value attribute");
    }
    return SNUG_OK;
}

static int constant_run(sn_kctx *c) {
    const sn_node *nd = c->node;
    sn_tensor *y = c->out[0];
    const sn_tensor *t = sn_attr_tensor(nd, "value");
    const float *fs;
    const int64_t *is;
    const sn_string *ss;
    int n;
    if (t) {
        size_t nb = sn_tensor_nbytes(t);
        if (nb)
            memcpy(y->data, t->data, nb);
    } else if (sn_attr_get(nd, "value_float")) {
        *(float *)y->data = sn_attr_float(nd, "value_float", 0);
    } else if (sn_attr_get(nd, "value_int")) {
        *(int64_t *)y->data = sn_attr_int(nd, "value_int", 0);
    } else if (sn_attr_get(nd, "value_string")) {
        *(sn_string *)y->data = sn_attr_get(nd, "value_string")->s;
    } else if ((n = sn_attr_floats(nd, "value_floats", &fs)) >= 0) {
        if (n)
            memcpy(y->data, fs, sizeof(float) * (size_t)n);
    } else if ((n = sn_attr_ints(nd, "value_ints", &is)) >= 0) {
        if (n)
            memcpy(y->data, is, sizeof(int64_t) * (size_t)n);
    } else if ((n = sn_attr_strings(nd, "value_strings", &ss)) >= 0) {
        if (n)
            memcpy(y->data, ss, sizeof(sn_string) * (size_t)n);
    }
    return SNUG_OK;
}

/* ---- Range -------------------------------------------------------------- */

static int range_count(sn_infer_ctx *c, int64_t *count) {
    const sn_tensor *s = sn_infer_in(c, 0), *l = sn_infer_in(c, 1), *d = sn_infer_in(c, 2);
    *count = SN_DIM_UNKNOWN;
    if (!s->data || !l->data || !d->data)
        return SNUG_OK;
    if (sn_tensor_numel(s) != 1 || sn_tensor_numel(l) != 1 || sn_tensor_numel(d) != 1)
        return KFAIL(SNUG_ERR_SHAPE, "start, limit and delta must be scalars");
    sn_dtype t = s->dtype;
    if (sn_dtype_is_float(t)) {
        double a = sn_load_f64(t, s->data, 0), b = sn_load_f64(t, l->data, 0),
               e = sn_load_f64(t, d->data, 0);
        if (e == 0)
            return KFAIL(SNUG_ERR_INVALID_ARG, "delta is 0");
        double n = ceil((b - a) / e);
        if (!(n >= 0))
            n = 0;
        if (n > 1e15)
            return KFAIL(SNUG_ERR_RANGE, "range too long");
        *count = (int64_t)n;
    } else {
        int64_t a = sn_load_i64(t, s->data, 0), b = sn_load_i64(t, l->data, 0),
                e = sn_load_i64(t, d->data, 0);
        if (e == 0)
            return KFAIL(SNUG_ERR_INVALID_ARG, "delta is 0");
        int64_t n = 0;
        if (e > 0 && b > a)
            n = (b - a + e - 1) / e;
        else if (e < 0 && b < a)
            n = (a - b + (-e) - 1) / (-e);
        *count = n;
    }
    return SNUG_OK;
}

static int range_infer(sn_infer_ctx *c) {
    for (int i = 0; i < 3; i++)
        SN_TRY(sn_need_tensor(c, i));
    sn_dtype t = c->in[0]->dtype;
    if (c->in[1]->dtype != t || c->in[2]->dtype != t)
        return KFAIL(SNUG_ERR_TYPE, "start, limit and delta must have one type");
    if (!(sn_dtype_is_float(t) || sn_dtype_is_int(t)))
        return KFAIL(SNUG_ERR_TYPE, "unsupported type %s", sn_dtype_name(t));
    int64_t n;
    SN_TRY(range_count(c, &n));
    sn_set_out(c->out[0], t, 1, &n);
    return SNUG_OK;
}

static int range_run(sn_kctx *c) {
    sn_tensor *y = c->out[0];
    if (!y) /* its one output not asked for */
        return SNUG_OK;
    const sn_tensor *s = sn_kctx_in(c, 0), *d = sn_kctx_in(c, 2);
    int64_t n = y->dims[0];
    sn_dtype t = y->dtype;
    switch (t) {
    case SN_F32: {
        float a = *(const float *)s->data, e = *(const float *)d->data;
        for (int64_t i = 0; i < n; i++)
            ((float *)y->data)[i] = a + (float)i * e;
        break;
    }
    case SN_F64: {
        double a = *(const double *)s->data, e = *(const double *)d->data;
        for (int64_t i = 0; i < n; i++)
            ((double *)y->data)[i] = a + (double)i * e;
        break;
    }
    case SN_I64: {
        int64_t a = *(const int64_t *)s->data, e = *(const int64_t *)d->data;
        for (int64_t i = 0; i < n; i++)
            ((int64_t *)y->data)[i] = a + i * e;
        break;
    }
    case SN_I32: {
        int32_t a = *(const int32_t *)s->data, e = *(const int32_t *)d->data;
        for (int64_t i = 0; i < n; i++)
            ((int32_t *)y->data)[i] = (int32_t)(a + i * e);
        break;
    }
    default:
        if (sn_dtype_is_float(t)) {
            double a = sn_load_f64(t, s->data, 0), e = sn_load_f64(t, d->data, 0);
            for (int64_t i = 0; i < n; i++)
                sn_store_f64(t, y->data, (size_t)i, a + (double)i * e);
        } else {
            int64_t a = sn_load_i64(t, s->data, 0), e = sn_load_i64(t, d->data, 0);
            for (int64_t i = 0; i < n; i++)
                sn_store_f64(t, y->data, (size_t)i, (double)(a + i * e));
        }
    }
    return SNUG_OK;
}

/* ---- EyeLike ------------------------------------------------------------ */

static int eyelike_infer(sn_infer_ctx *c) {
    SN_TRY(sn_need_tensor(c, 0));
    const sn_tensor *x = c->in[0];
    int64_t dt = sn_attr_int(c->node, "dtype", x->dtype);
    if (!sn_dtype_valid((int)dt) || dt == SN_STRING || dt == SN_UNDEFINED)
        return KFAIL(SNUG_ERR_TYPE, "unsupported dtype %lld", (long long)dt);
    if (x->rank != SN_RANK_UNKNOWN && x->rank != 2)
        return KFAIL(SNUG_ERR_SHAPE, "input must be 2-D, got rank %d", x->rank);
    sn_set_out(c->out[0], (sn_dtype)dt, 2, x->rank == 2 ? x->dims : NULL);
    return SNUG_OK;
}

static int eyelike_run(sn_kctx *c) {
    sn_tensor *y = c->out[0];
    int64_t k = sn_attr_int(c->node, "k", 0), r = y->dims[0], cl = y->dims[1];
    size_t es = sn_dtype_size(y->dtype);
    memset(y->data, 0, (size_t)(r * cl) * es);
    for (int64_t i = 0; i < r; i++) {
        int64_t j = i + k;
        if (j >= 0 && j < cl)
            sn_store_f64(y->dtype, y->data, (size_t)(i * cl + j), 1.0);
    }
    return SNUG_OK;
}

/* ---- DepthToSpace / SpaceToDepth ---------------------------------------- */

static int d2s_infer(sn_infer_ctx *c) {
    SN_TRY(sn_need_tensor(c, 0));
    const sn_tensor *x = c->in[0];
    int64_t b = sn_attr_int(c->node, "blocksize", 0);
    bool d2s = !strcmp(c->node->p->op_type, "DepthToSpace");
    int64_t bb = b;
    if (b <= 0 || !sn_dim_mul(&bb, b))
        return KFAIL(SNUG_ERR_INVALID_ARG, "blocksize %lld must be positive and its square fit", (long long)b);
    if (x->rank == SN_RANK_UNKNOWN) {
        sn_set_out(c->out[0], x->dtype, 4, NULL);
        return SNUG_OK;
    }
    if (x->rank != 4)
        return KFAIL(SNUG_ERR_SHAPE, "input must be 4-D, got rank %d", x->rank);
    int64_t od[4] = {x->dims[0], SN_DIM_UNKNOWN, SN_DIM_UNKNOWN, SN_DIM_UNKNOWN};
    if (d2s) {
        if (x->dims[1] >= 0) {
            if (x->dims[1] % bb)
                return KFAIL(SNUG_ERR_SHAPE, "channels %lld not divisible by blocksize^2",
                             (long long)x->dims[1]);
            od[1] = x->dims[1] / bb;
        }
        for (int i = 2; i < 4; i++) {
            od[i] = x->dims[i] >= 0 ? x->dims[i] : SN_DIM_UNKNOWN;
            if (x->dims[i] >= 0 && !sn_dim_mul(&od[i], b))
                return KFAIL(SNUG_ERR_SHAPE, "spatial dim %lld x blocksize overflows", (long long)x->dims[i]);
        }
    } else {
        od[1] = x->dims[1] >= 0 ? x->dims[1] : SN_DIM_UNKNOWN;
        if (x->dims[1] >= 0 && !sn_dim_mul(&od[1], bb))
            return KFAIL(SNUG_ERR_SHAPE, "channels %lld x blocksize^2 overflows", (long long)x->dims[1]);
        for (int i = 2; i < 4; i++) {
            if (x->dims[i] >= 0) {
                if (x->dims[i] % b)
                    return KFAIL(SNUG_ERR_SHAPE, "spatial dim %lld not divisible by blocksize",
                                 (long long)x->dims[i]);
                od[i] = x->dims[i] / b;
            }
        }
    }
    sn_set_out(c->out[0], x->dtype, 4, od);
    return SNUG_OK;
}

static int d2s_run(sn_kctx *c) {
    const sn_tensor *x = sn_kctx_in(c, 0);
    sn_tensor *y = c->out[0];
    int64_t b = sn_attr_int(c->node, "blocksize", 0);
    size_t es = sn_dtype_size(x->dtype);
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    int64_t dims[6], bs[6], E = (int64_t)es;
    if (!strcmp(c->node->p->op_type, "DepthToSpace")) {
        int64_t Co = C / (b * b);
        /* output [N, Co, H, b1, W, b2] */
        dims[0] = N; dims[1] = Co; dims[2] = H; dims[3] = b; dims[4] = W; dims[5] = b;
        int64_t sH = W * E, sC = H * W * E, sN = C * H * W * E;
        bs[0] = sN; bs[2] = sH; bs[4] = E;
        if (!strcmp(sn_attr_str(c->node, "mode", "DCR"), "CRD")) {
            /* input channel = co*b*b + b1*b + b2 */
            bs[1] = b * b * sC; bs[3] = b * sC; bs[5] = sC;
        } else {
            /* input channel = b1*b*Co + b2*Co + co */
            bs[1] = sC; bs[3] = b * Co * sC; bs[5] = Co * sC;
        }
    } else {
        /* output [N, b1, b2, C, Ho, Wo]; input (n, c, ho*b + b1, wo*b + b2) */
        int64_t Ho = H / b, Wo = W / b;
        dims[0] = N; dims[1] = b; dims[2] = b; dims[3] = C; dims[4] = Ho; dims[5] = Wo;
        bs[0] = C * H * W * E; bs[1] = W * E; bs[2] = E; bs[3] = H * W * E;
        bs[4] = b * W * E; bs[5] = b * E;
    }
    if (sn_tensor_numel(y) > 0)
        sk_copy_strided(y->data, x->data, 6, dims, bs, es);
    return SNUG_OK;
}

/* ---- CenterCropPad (18) ----------------------------------------------------------------------
 * Each listed axis is cropped (centered, the extra element at the end) or
 * zero-padded (likewise) to the size in `shape`. */

typedef struct ccp_geo {
    int64_t out[SN_MAX_RANK];
    int64_t shift[SN_MAX_RANK]; /* source index = output index + shift */
} ccp_geo;

/* Fills g from x's shape and the target sizes; returns a status. known:
 * whether the shape input's data is available. */
static int ccp_geometry(const sn_node *node, sn_err *err, const sn_tensor *x, const sn_tensor *shape,
                        ccp_geo *g, bool *known) {
    int64_t sizes[SN_MAX_RANK];
    int ns = sn_input_shape(shape, sizes);
    const int64_t *axes_attr;
    int na = sn_attr_ints(node, "axes", &axes_attr);
    int axes[SN_MAX_RANK];
    if (na < 0) {
        na = x->rank;
        for (int i = 0; i < na; i++)
            axes[i] = i;
    } else {
        if (na > x->rank)
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "%d axes for rank %d", na, x->rank);
        for (int i = 0; i < na; i++) {
            if (!sn_axis_norm(axes_attr[i], x->rank, &axes[i]))
                return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "axis %lld out of range for rank %d",
                                (long long)axes_attr[i], x->rank);
            for (int j = 0; j < i; j++)
                if (axes[j] == axes[i])
                    return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "axis %d repeated", axes[i]);
        }
    }
    if (shape->rank != 1 || (sn_dim_known(shape->dims[0]) && shape->dims[0] != na))
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "shape must be 1-D with one value per axis (%d)", na);
    for (int i = 0; i < x->rank; i++) {
        g->out[i] = x->dims[i];
        g->shift[i] = 0;
    }
    *known = ns == na;
    for (int k = 0; k < na; k++) {
        int a = axes[k];
        if (!*known) {
            g->out[a] = SN_DIM_UNKNOWN;
            continue;
        }
        if (sizes[k] < 0)
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "negative target size %lld", (long long)sizes[k]);
        g->out[a] = sizes[k];
        /* crop: start at (dim - size) / 2; pad: (size - dim) / 2 zeros
         * before, i.e. a negative shift; the odd element goes at the end */
        if (sn_dim_known(x->dims[a]))
            g->shift[a] = x->dims[a] >= sizes[k] ? (x->dims[a] - sizes[k]) / 2 : -((sizes[k] - x->dims[a]) / 2);
    }
    return SNUG_OK;
}

static int ccp_infer(sn_infer_ctx *c) {
    const sn_tensor *x = sn_in(c->in, c->n_in, 0), *shape = sn_in(c->in, c->n_in, 1);
    if (!x || !shape)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "needs inputs input_data and shape");
    if (shape->dtype != SN_I64 && shape->dtype != SN_I32)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "shape must be int32 or int64");
    if (sn_dtype_nbytes(x->dtype, 2) != 2 * sn_dtype_size(x->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "type %s not supported", sn_dtype_name(x->dtype));
    if (x->rank < 0) {
        sn_set_out(c->out[0], x->dtype, SN_RANK_UNKNOWN, NULL);
        return SNUG_OK;
    }
    ccp_geo g;
    bool known;
    SN_TRY(ccp_geometry(c->node, c->err, x, shape, &g, &known));
    sn_set_out(c->out[0], x->dtype, x->rank, g.out);
    return SNUG_OK;
}

static int ccp_run(sn_kctx *c) {
    const sn_tensor *x = c->in[0];
    sn_tensor *y = c->out[0];
    ccp_geo g;
    bool known;
    SN_TRY(ccp_geometry(c->node, c->err, x, c->in[1], &g, &known));
    size_t es = sn_dtype_size(x->dtype);
    int64_t ny = sn_tensor_numel(y);
    if (ny == 0)
        return SNUG_OK;
    memset(y->data, 0, (size_t)ny * es);
    int r = x->rank;
    if (r == 0) {
        memcpy(y->data, x->data, es);
    } else {
        /* row by row along the last axis: copy the overlapping segment */
        int last = r - 1;
        int64_t OW = y->dims[last], W = x->dims[last], sh = g.shift[last];
        int64_t lo = sn_imax(0, -sh), hi = sn_imin(OW, W - sh);
        int64_t xs[SN_MAX_RANK];
        sn_strides(r, x->dims, xs);
        int64_t rows = ny / OW, idx[SN_MAX_RANK] = {0};
        for (int64_t row = 0; row < rows; row++) {
            bool inside = hi > lo;
            int64_t src = 0;
            for (int d = 0; d < last && inside; d++) {
                int64_t s = idx[d] + g.shift[d];
                inside = s >= 0 && s < x->dims[d];
                src += s * xs[d];
            }
            if (inside)
                memcpy((char *)y->data + (size_t)(row * OW + lo) * es,
                       (const char *)x->data + (size_t)(src + lo + sh) * es, (size_t)(hi - lo) * es);
            for (int d = last - 1; d >= 0; d--) {
                if (++idx[d] < y->dims[d])
                    break;
                idx[d] = 0;
            }
        }
    }
    return x->dtype == SN_STRING ? sn_strings_own(c, 0) : SNUG_OK;
}

/* ------------------------------------------------------------------------- */

#define VIEW SN_OP_VIEW0

const sn_op_def sn_ops_shape[] = {
    {.domain = "", .name = "Reshape", .since_version = 1, .infer = reshape_infer, .flags = VIEW,
     .cpu = {.run = run_copy0}},
    {.domain = "", .name = "Flatten", .since_version = 1, .infer = flatten_infer, .flags = VIEW,
     .cpu = {.run = run_copy0}},
    {.domain = "", .name = "Squeeze", .since_version = 1, .infer = squeeze_infer, .flags = VIEW,
     .cpu = {.run = run_copy0}},
    {.domain = "", .name = "Unsqueeze", .since_version = 1, .infer = unsqueeze_infer, .flags = VIEW,
     .cpu = {.run = run_copy0}},
    {.domain = "", .name = "Transpose", .since_version = 1, .infer = transpose_infer, .cpu = {.run = transpose_run}},
    {.domain = "", .name = "Concat", .since_version = 1, .infer = concat_infer, .cpu = {.run = concat_run}},
    {.domain = "", .name = "Split", .since_version = 1, .infer = split_infer, .cpu = {.run = split_run}},
    {.domain = "", .name = "Slice", .since_version = 1, .infer = slice_infer, .cpu = {.run = slice_run}},
    {.domain = "", .name = "Pad", .since_version = 1, .infer = pad_infer, .cpu = {.run = pad_run}},
    {.domain = "", .name = "Tile", .since_version = 1, .required = 0x3, .infer = tile_infer, .cpu = {.run = tile_run}},
    {.domain = "", .name = "Expand", .since_version = 8, .required = 0x3, .infer = expand_infer, .cpu = {.run = expand_run}},
    {.domain = "", .name = "Shape", .since_version = 1, .infer = shape_infer, .flags = SN_OP_SHAPE_ONLY,
     .cpu = {.run = shape_run}},
    {.domain = "", .name = "Size", .since_version = 1, .infer = size_infer, .flags = SN_OP_SHAPE_ONLY,
     .cpu = {.run = size_run}},
    {.domain = "", .name = "ConstantOfShape", .since_version = 9, .infer = cos_infer, .cpu = {.run = cos_run}},
    {.domain = "", .name = "Constant", .since_version = 1, .required = SN_IN_NONE, .infer = constant_infer, .cpu = {.run = constant_run}},
    {.domain = "", .name = "Range", .since_version = 11, .required = 0x7, .infer = range_infer, .cpu = {.run = range_run}},
    {.domain = "", .name = "EyeLike", .since_version = 9, .infer = eyelike_infer, .flags = SN_OP_SHAPE_ONLY,
     .cpu = {.run = eyelike_run}},
    {.domain = "", .name = "DepthToSpace", .since_version = 1, .infer = d2s_infer, .cpu = {.run = d2s_run}},
    {.domain = "", .name = "SpaceToDepth", .since_version = 1, .infer = d2s_infer, .cpu = {.run = d2s_run}},
    {.domain = "", .name = "CenterCropPad", .since_version = 18, .required = 0x3, .infer = ccp_infer, .cpu = {.run = ccp_run}},
    {0},
};
