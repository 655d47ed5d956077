#include <stdlib.h>

#include "plan/memplan.h"

static size_t align_up(size_t x) { return (x + SN_ARENA_ALIGN - 1) & ~(size_t)(SN_ARENA_ALIGN - 1); }

typedef struct key {
    int start;
    int idx;
    size_t size;
} key;

static int by_start(const void *a, const void *b) {
    const key *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (x->size != y->size)
        return x->size > y->size ? -1 : 1; /* larger first at the same step */
    return x->idx - y->idx;
}

int sn_memplan_place(sn_block *b, int n, size_t *total, size_t *lower, sn_err *err) {
    *total = 0;
    if (lower)
        *lower = 0;
    if (n == 0)
        return SNUG_OK;
    int *order = sn_malloc(sizeof *order * (size_t)n);
    int *live = sn_malloc(sizeof *live * (size_t)n); /* indices of live blocks sorted by offset */
    if (!order || !live) {
        sn_free(order);
        sn_free(live);
        return sn_errf(err, SNUG_ERR_OOM, "memory plan: out of memory");
    }
    key *keys = sn_malloc(sizeof *keys * (size_t)n);
    if (!keys) {
        sn_free(order);
        sn_free(live);
        return sn_errf(err, SNUG_ERR_OOM, "memory plan: out of memory");
    }
    for (int i = 0; i < n; i++)
        keys[i] = (key){b[i].start, i, b[i].size};
    qsort(keys, (size_t)n, sizeof *keys, by_start);
    for (int i = 0; i < n; i++)
        order[i] = keys[i].idx;
    sn_free(keys);
    int n_live = 0;
    size_t top = 0, lb = 0, cur = 0;
    for (int k = 0; k < n; k++) {
        sn_block *blk = &b[order[k]];
        int t = blk->start;
        /* Free blocks that ended before this step. */
        int w = 0;
        for (int i = 0; i < n_live; i++) {
            if (b[live[i]].end < t)
                cur -= align_up(b[live[i]].size);
            else
                live[w++] = live[i];
        }
        n_live = w;
        size_t need = align_up(blk->size), best_off = SIZE_MAX, best_gap = SIZE_MAX, prev_end = 0;
        int best_pos = n_live;
        for (int i = 0; i <= n_live; i++) {
            size_t gap_end = i < n_live ? b[live[i]].offset : SIZE_MAX;
            if (gap_end >= prev_end && gap_end - prev_end >= need) {
                size_t gap = gap_end - prev_end;
                if (i == n_live)
                    gap = SIZE_MAX - 1; /* the open end is the last resort */
                if (gap < best_gap) {
                    best_gap = gap;
                    best_off = prev_end;
                    best_pos = i;
                }
            }
            if (i < n_live)
                prev_end = b[live[i]].offset + align_up(b[live[i]].size);
        }
        blk->offset = best_off;
        for (int i = n_live; i > best_pos; i--)
            live[i] = live[i - 1];
        live[best_pos] = order[k];
        n_live++;
        if (best_off + need > top)
            top = best_off + need;
        cur += need;
        /* The live set only grows at block starts, so the peak is seen here. */
        if (k + 1 == n || b[order[k + 1]].start != t) {
            if (cur > lb)
                lb = cur;
        }
    }
    sn_free(order);
    sn_free(live);
    *total = top;
    if (lower)
        *lower = lb;
    return SNUG_OK;
}
