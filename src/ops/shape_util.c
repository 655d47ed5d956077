#include "ops/shape_util.h"

int sk_read_ints(const sn_node *node, sn_err *err, const sn_tensor *t, const char *what,
                 int64_t *vals, int cap, int *n) {
    if (!t || !t->data)
        return 0;
    if (t->dtype != SN_I64 && t->dtype != SN_I32)
    {
        sn_kfail(err, node, SNUG_ERR_TYPE, "%s must be int32 or int64, got %s", what,
                 sn_dtype_name(t->dtype));
        return -1;
    }
    int64_t cnt = sn_tensor_numel(t);
    if (cnt < 0 || cnt > cap) {
        sn_kfail(err, node, SNUG_ERR_SHAPE, "%s has %lld values (at most %d supported)", what,
                 (long long)cnt, cap);
        return -1;
    }
    for (int64_t i = 0; i < cnt; i++)
        vals[i] = sn_load_i64(t->dtype, t->data, (size_t)i);
    *n = (int)cnt;
    return 1;
}

#define SK_MAXR (2 * SN_MAX_RANK)

void sk_copy_strided(void *dst, const void *src, int rank, const int64_t *dims,
                     const int64_t *bstride, size_t es) {
    int64_t d[SK_MAXR], s[SK_MAXR];
    int r = 0;
    for (int i = 0; i < rank; i++) {
        if (dims[i] == 0)
            return;
        if (dims[i] == 1)
            continue;
        /* merge with the previous dim when contiguous in the source */
        if (r > 0 && s[r - 1] == bstride[i] * dims[i]) {
            d[r - 1] *= dims[i];
            s[r - 1] = bstride[i];
            continue;
        }
        d[r] = dims[i];
        s[r] = bstride[i];
        r++;
    }
    char *o = dst;
    const char *base = src;
    if (r == 0) {
        memcpy(o, base, es);
        return;
    }
    /* inner run: a contiguous chunk (memcpy) or a strided row */
    int64_t inner = d[r - 1], ist = s[r - 1];
    bool contig = ist == (int64_t)es;
    size_t chunk = (size_t)inner * es;
    int outer_r = r - 1;
    int64_t idx[SK_MAXR] = {0};
    for (;;) {
        if (contig) {
            memcpy(o, base, chunk);
            o += chunk;
        } else {
            const char *p = base;
            switch (es) {
            case 1:
                for (int64_t k = 0; k < inner; k++, p += ist)
                    ((uint8_t *)o)[k] = *(const uint8_t *)p;
                break;
            case 2:
                for (int64_t k = 0; k < inner; k++, p += ist)
                    memcpy(o + 2 * k, p, 2);
                break;
            case 4:
                for (int64_t k = 0; k < inner; k++, p += ist)
                    memcpy(o + 4 * k, p, 4);
                break;
            case 8:
                for (int64_t k = 0; k < inner; k++, p += ist)
                    memcpy(o + 8 * k, p, 8);
                break;
            case 16:
                for (int64_t k = 0; k < inner; k++, p += ist)
                    memcpy(o + 16 * k, p, 16);
                break;
            default:
                for (int64_t k = 0; k < inner; k++, p += ist)
                    memcpy(o + es * (size_t)k, p, es);
                break;
            }
            o += chunk;
        }
        int a = outer_r - 1;
        for (; a >= 0; a--) {
            base += s[a];
            if (++idx[a] < d[a])
                break;
            base -= s[a] * d[a];
            idx[a] = 0;
        }
        if (a < 0)
            break;
    }
}
