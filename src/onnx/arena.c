#include <string.h>

#include "onnx/load_impl.h"

#define SN_ARENA_BLOCK (64 * 1024)

struct sn_arena_blk {
    sn_arena_blk *next;
    size_t used, cap;
    unsigned char data[];
};

void *sn_arena_alloc(sn_arena *a, size_t n, size_t align) {
    sn_arena_blk *b = a->head;
    if (align < 1)
        align = 1;
    if (b) {
        uintptr_t p = (uintptr_t)(b->data + b->used);
        size_t pad = (size_t)(-p & (align - 1));
        if (pad <= b->cap - b->used && n <= b->cap - b->used - pad) {
            void *r = b->data + b->used + pad;
            b->used += pad + n;
            memset(r, 0, n);
            return r;
        }
    }
    size_t cap;
    if (!sn_add_ok(n, align, &cap) || cap > SIZE_MAX - sizeof(sn_arena_blk))
        return NULL;
    /* Small requests share 64 KiB blocks; a large one (a quarter block or
     * more) gets a block of its own size, so that no block is left half
     * empty: its unused tail would be heap the memory counters report but
     * that is never resident. */
    if (cap < SN_ARENA_BLOCK / 4)
        cap = SN_ARENA_BLOCK;
    sn_arena_blk *nb = sn_malloc(sizeof *nb + cap);
    if (!nb)
        return NULL;
    nb->cap = cap;
    uintptr_t p = (uintptr_t)nb->data;
    size_t pad = (size_t)(-p & (align - 1));
    nb->used = pad + n;
    /* A block that is mostly used up goes second so the head keeps its room. */
    if (b && cap - nb->used < b->cap - b->used) {
        nb->next = b->next;
        b->next = nb;
    } else {
        nb->next = b;
        a->head = nb;
    }
    a->total += cap;
    memset(nb->data + pad, 0, n);
    return nb->data + pad;
}

char *sn_arena_strn(sn_arena *a, const void *s, size_t n) {
    if (n == SIZE_MAX)
        return NULL;
    char *d = sn_arena_alloc(a, n + 1, 1);
    if (d && n)
        memcpy(d, s, n);
    return d;
}

void sn_arena_free(sn_arena *a) {
    sn_arena_blk *b = a->head;
    while (b) {
        sn_arena_blk *next = b->next;
        sn_free(b);
        b = next;
    }
    a->head = NULL;
    a->total = 0;
}
