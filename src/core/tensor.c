#include <stdio.h>
#include <string.h>

#include "core/core.h"

bool sn_dims_numel(int rank, const int64_t *dims, int64_t *numel) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0 || !sn_dim_mul(&n, dims[i]))
            return false;
    }
    *numel = n;
    return true;
}

bool sn_dims_fit(int rank, const int64_t *dims) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        if (dims[i] >= 0 && !sn_dim_mul(&n, dims[i]))
            return false;
    return true;
}

int64_t sn_tensor_numel(const sn_tensor *t) {
    int64_t n;
    if (t->rank < 0 || !sn_dims_numel(t->rank, t->dims, &n))
        return -1;
    return n;
}

size_t sn_dtype_nbytes(sn_dtype t, int64_t numel) {
    if (numel <= 0)
        return 0;
    if (t == SN_U4 || t == SN_I4 || t == SN_F4E2M1)
        return (size_t)(numel + 1) / 2;
    if (t == SN_U2 || t == SN_I2)
        return (size_t)(numel + 3) / 4;
    size_t n;
    if (!sn_mul_ok((size_t)numel, sn_dtype_size(t), &n))
        return SIZE_MAX;
    return n;
}

void sn_const_info(sn_tensor *info, const sn_tensor *t) {
    static const uint64_t k_empty[1];
    *info = *t;
    if (!info->data && info->kind == SN_KIND_TENSOR && sn_tensor_numel(info) == 0)
        info->data = (void *)k_empty;
}

size_t sn_tensor_nbytes(const sn_tensor *t) {
    int64_t n = sn_tensor_numel(t);
    return n < 0 ? 0 : sn_dtype_nbytes(t->dtype, n);
}

bool sn_tensor_shape_known(const sn_tensor *t) {
    if (t->rank < 0)
        return false;
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] < 0)
            return false;
    return true;
}

const char *sn_shape_str(const sn_tensor *t, char *buf, size_t cap) {
    size_t o = 0;
    if (t->rank < 0) {
        snprintf(buf, cap, "[?rank]");
        return buf;
    }
    o += (size_t)snprintf(buf + o, cap - o, "[");
    for (int i = 0; i < t->rank && o < cap; i++) {
        int64_t d = t->dims[i];
        if (d >= 0)
            o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? "," : "", (long long)d);
        else if (d == SN_DIM_UNKNOWN)
            o += (size_t)snprintf(buf + o, cap - o, "%s?", i ? "," : "");
        else
            o += (size_t)snprintf(buf + o, cap - o, "%ss%d", i ? "," : "", SN_DIM_SYM_ID(d));
    }
    if (o < cap)
        snprintf(buf + o, cap - o, "]");
    return buf;
}

void sn_tensor_set_shape(sn_tensor *t, int rank, const int64_t *dims) {
    t->rank = rank;
    for (int i = 0; i < rank; i++)
        t->dims[i] = dims[i];
}

bool sn_shape_equal(const sn_tensor *a, const sn_tensor *b) {
    if (a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i])
            return false;
    return true;
}

void sn_strides(int rank, const int64_t *dims, int64_t *out) {
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        out[i] = s;
        s *= dims[i];
    }
}

int sn_broadcast_shape(int ra, const int64_t *da, int rb, const int64_t *db,
                       int *rout, int64_t *dout, sn_err *err) {
    int r = ra > rb ? ra : rb;
    if (r > SN_MAX_RANK)
        return sn_errf(err, SNUG_ERR_UNSUPPORTED, "rank %d exceeds %d", r, SN_MAX_RANK);
    for (int i = 0; i < r; i++) {
        int ia = i - (r - ra), ib = i - (r - rb);
        int64_t a = ia >= 0 ? da[ia] : 1, b = ib >= 0 ? db[ib] : 1, o;
        if (a == b)
            o = a;
        else if (a == 1)
            o = b;
        else if (b == 1)
            o = a;
        else if (a >= 0 && b >= 0)
            return sn_errf(err, SNUG_ERR_SHAPE,
                           "cannot broadcast dim %d: %lld vs %lld", i, (long long)a, (long long)b);
        else if (a >= 0 && a != 1)
            o = a; /* the symbolic one must equal it (or be 1) */
        else if (b >= 0 && b != 1)
            o = b;
        else
            o = SN_DIM_UNKNOWN;
        dout[i] = o;
    }
    *rout = r;
    return SNUG_OK;
}
