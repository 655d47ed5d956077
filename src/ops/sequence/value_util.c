#include <string.h>
#include <unistd.h>

#include "ops/sequence/value_util.h"

/* Bytes needed for the string payloads of a string tensor. */
static size_t string_bytes(const sn_tensor *t) {
    size_t n = 0;
    int64_t k = sn_tensor_numel(t);
    const sn_string *s = t->data;
    for (int64_t i = 0; i < k; i++)
        n += s[i].len;
    return n;
}

/* Copies tensor elements of src into dst->data (already sized); strings get
 * their bytes copied into pool. */
static void copy_elems(const sn_tensor *src, sn_tensor *dst, char *pool) {
    size_t nb = sn_tensor_nbytes(src);
    if (nb && src->data)
        memcpy(dst->data, src->data, nb);
    if (src->dtype == SN_STRING) {
        int64_t k = sn_tensor_numel(src);
        sn_string *d = dst->data;
        for (int64_t i = 0; i < k; i++) {
            if (d[i].len)
                memcpy(pool, d[i].ptr, d[i].len);
            d[i].ptr = pool;
            pool += d[i].len;
        }
    }
}

int sn_value_copy_extra(sn_kctx *c, int i, const sn_tensor *src, sn_tensor *dst) {
    *dst = *src;
    if (src->kind == SN_KIND_NONE)
        return SNUG_OK;
    if (src->kind == SN_KIND_SEQUENCE) {
        sn_tensor *items = sn_kctx_alloc_extra(c, i, sizeof(sn_tensor) * (size_t)(src->n_items ? src->n_items : 1));
        if (!items)
            return c->err->code;
        for (int64_t k = 0; k < src->n_items; k++)
            SN_TRY(sn_value_copy_extra(c, i, &((const sn_tensor *)src->data)[k], &items[k]));
        dst->data = items;
        return SNUG_OK;
    }
    size_t nb = sn_tensor_nbytes(src), sb = src->dtype == SN_STRING ? string_bytes(src) : 0;
    char *mem = sn_kctx_alloc_extra(c, i, nb + sb);
    if (!mem)
        return c->err->code;
    dst->data = mem;
    copy_elems(src, dst, mem + nb);
    return SNUG_OK;
}

int sn_value_emit(sn_kctx *c, int i, const sn_tensor *src) {
    if (!c->out[i])
        return SNUG_OK;
    if (src->kind == SN_KIND_NONE)
        return sn_kctx_set_none(c, i);
    uint8_t opt = c->out[i]->optional | src->optional;
    if (src->kind == SN_KIND_SEQUENCE) {
        sn_tensor *items = sn_kctx_alloc_sequence(c, i, src->dtype, src->n_items);
        if (!items)
            return c->err->code;
        for (int64_t k = 0; k < src->n_items; k++)
            SN_TRY(sn_value_copy_extra(c, i, &((const sn_tensor *)src->data)[k], &items[k]));
        c->out[i]->optional = opt;
        return SNUG_OK;
    }
    void *d = sn_kctx_alloc_output(c, i, src->dtype, src->rank, src->dims);
    if (!d)
        return c->err->code;
    if (src->dtype == SN_STRING) {
        size_t sb = string_bytes(src);
        char *pool = sn_kctx_alloc_extra(c, i, sb);
        if (!pool)
            return c->err->code;
        copy_elems(src, c->out[i], pool);
    } else {
        copy_elems(src, c->out[i], NULL);
    }
    c->out[i]->optional = opt;
    return SNUG_OK;
}

int sn_value_heap_copy(const sn_tensor *src, sn_tensor *dst) {
    *dst = *src;
    dst->data = NULL;
    if (src->kind == SN_KIND_NONE)
        return SNUG_OK;
    if (src->kind == SN_KIND_SEQUENCE) {
        sn_tensor *items = sn_calloc((size_t)(src->n_items ? src->n_items : 1), sizeof *items);
        if (!items)
            return SNUG_ERR_OOM;
        dst->data = items;
        for (int64_t k = 0; k < src->n_items; k++) {
            int rc = sn_value_heap_copy(&((const sn_tensor *)src->data)[k], &items[k]);
            if (rc != SNUG_OK) {
                dst->n_items = k;
                sn_value_heap_free(dst);
                return rc;
            }
        }
        return SNUG_OK;
    }
    size_t nb = sn_tensor_nbytes(src), sb = src->dtype == SN_STRING ? string_bytes(src) : 0;
    char *mem = sn_malloc(nb + sb);
    if (!mem)
        return SNUG_ERR_OOM;
    dst->data = mem;
    copy_elems(src, dst, mem + nb);
    return SNUG_OK;
}

void sn_value_heap_free(sn_tensor *t) {
    if (t->kind == SN_KIND_SEQUENCE && t->data)
        for (int64_t k = 0; k < t->n_items; k++)
            sn_value_heap_free(&((sn_tensor *)t->data)[k]);
    sn_free(t->data);
    t->data = NULL;
}

bool sn_rebuild_begin(sn_rebuild *r, const sn_prep_ctx *c, size_t bytes, size_t src_bytes) {
    memset(r, 0, sizeof *r);
    r->c = c;
    r->bytes = bytes;
    r->src_bytes = src_bytes ? src_bytes : 1;
    r->block = sn_pages_reserve(bytes);
    return r->block != NULL;
}

void sn_rebuild_part(void *arg, const void *p, size_t n) {
    sn_rebuild *r = arg;
    r->src_done += n;
    size_t total = sn_pages_size(r->bytes);
    size_t upto = (size_t)((double)total * (double)r->src_done / (double)r->src_bytes);
    if (upto > total)
        upto = total;
    if (upto > r->committed) {
        sn_pages_commit(upto - r->committed);
        r->committed = upto;
    }
    sn_rebuild_release(r->c, &r->lo, p, n, r->src_done >= r->src_bytes);
}

void sn_rebuild_release(const sn_prep_ctx *c, const uint8_t **lo, const void *p, size_t n, bool last) {
    const uint8_t *from = *lo ? *lo : p, *end = (const uint8_t *)p + n;
    if (!last)
        end = (const uint8_t *)((uintptr_t)end & ~((uintptr_t)sysconf(_SC_PAGESIZE) - 1));
    if (end > from && c->release) {
        c->release(c->release_ctx, from, (size_t)(end - from));
        from = end;
    }
    *lo = from;
}

void sn_rebuild_end(sn_rebuild *r, sn_prep_ctx *c, int input) {
    size_t total = sn_pages_size(r->bytes);
    if (total > r->committed)
        sn_pages_commit(total - r->committed);
    r->committed = total;
    sn_pages_settle(r->block, r->bytes);
    c->state_bytes = total;
    c->replaces = 1u << input;
}
