#include "ops/shape/shape_util.h"

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

int sk_ws_declare(sn_prep_ctx *c, size_t bytes) {
    sk_ws_state *s = c->state ? c->state : sn_malloc(sizeof *s);
    if (!s)
        return sn_kfail(c->err, c->node, SNUG_ERR_OOM, "out of memory");
    s->bytes = bytes;
    c->state = s;
    c->workspace = bytes;
    return SNUG_OK;
}

void sk_ws_free(void *state) { sn_free(state); }

#define SK_MAXR (2 * SN_MAX_RANK)

/* Tiled copy for sk_copy_strided: d/s are the merged dims and source byte
 * strides, axis k has source stride es, the last axis is strided. */
static void tiled_copy(void *dst, const void *src, int r, const int64_t *d, const int64_t *s,
                       int k, size_t es) {
    enum { TB = 16 };
    int64_t ost[SK_MAXR]; /* dense output strides in bytes */
    int64_t acc = (int64_t)es;
    for (int i = r - 1; i >= 0; i--) {
        ost[i] = acc;
        acc *= d[i];
    }
    int64_t nk = d[k], nl = d[r - 1], sl = s[r - 1], ok = ost[k];
    int64_t idx[SK_MAXR] = {0};
    const char *ib = src;
    char *ob = dst;
    for (;;) {
        for (int64_t k0 = 0; k0 < nk; k0 += TB)
            for (int64_t l0 = 0; l0 < nl; l0 += TB) {
                int64_t k1 = k0 + TB < nk ? k0 + TB : nk, l1 = l0 + TB < nl ? l0 + TB : nl;
                for (int64_t kk = k0; kk < k1; kk++) {
                    char *op = ob + kk * ok;
                    const char *ip = ib + kk * (int64_t)es;
                    switch (es) {
                    case 4:
                        for (int64_t l = l0; l < l1; l++)
                            memcpy(op + l * 4, ip + l * sl, 4);
                        break;
                    case 2:
                        for (int64_t l = l0; l < l1; l++)
                            memcpy(op + l * 2, ip + l * sl, 2);
                        break;
                    case 8:
                        for (int64_t l = l0; l < l1; l++)
                            memcpy(op + l * 8, ip + l * sl, 8);
                        break;
                    default:
                        for (int64_t l = l0; l < l1; l++)
                            op[l] = ip[l * sl];
                        break;
                    }
                }
            }
        /* next position over the other axes */
        int a = r - 2;
        for (; a >= 0; a--) {
            if (a == k)
                continue;
            ib += s[a];
            ob += ost[a];
            if (++idx[a] < d[a])
                break;
            ib -= s[a] * d[a];
            ob -= ost[a] * d[a];
            idx[a] = 0;
        }
        if (a < 0)
            break;
    }
}

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
    /* a transpose whose source-contiguous axis k is not innermost: copy
     * tiles of (k, last) so that reads and writes both stay in cache */
    if (r >= 2 && s[r - 1] != (int64_t)es && (es == 4 || es == 2 || es == 8 || es == 1)) {
        int k = -1;
        for (int i = 0; i < r - 1; i++)
            if (s[i] == (int64_t)es)
                k = i;
        if (k >= 0 && d[k] >= 8 && d[r - 1] >= 8) {
            tiled_copy(dst, src, r, d, s, k, es);
            return;
        }
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
