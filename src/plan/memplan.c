#include <stdlib.h>

#include "plan/memplan.h"

static size_t align_up(size_t x) { return (x + SN_ARENA_ALIGN - 1) & ~(size_t)(SN_ARENA_ALIGN - 1); }

typedef struct key {
    int start;
    int idx;
    size_t size;
    int len; /* lifetime in steps */
} key;

static int by_start(const void *a, const void *b) {
    const key *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (x->size != y->size)
        return x->size > y->size ? -1 : 1; /* larger first at the same step */
    return x->idx - y->idx;
}

/* Greedy by size: the largest blocks are placed first, each at the best-fit
 * gap among the already placed blocks whose lifetimes overlap its own. This
 * usually lands close to the lower bound where the time-ordered placement
 * below fragments. Returns the arena size; offsets in b[]. */
static size_t place_by_size(sn_block *b, int n, const key *by_size, int *placed, size_t *ivs_off, size_t *ivs_end) {
    size_t top = 0;
    int n_placed = 0;
    for (int k = 0; k < n; k++) {
        sn_block *blk = &b[by_size[k].idx];
        size_t need = align_up(blk->size);
        /* Address intervals of placed blocks alive at the same time, sorted. */
        int m = 0;
        for (int j = 0; j < n_placed; j++) {
            const sn_block *o = &b[placed[j]];
            if (o->end < blk->start || o->start > blk->end)
                continue;
            size_t s0 = o->offset, e0 = o->offset + align_up(o->size);
            int pos = m;
            while (pos > 0 && ivs_off[pos - 1] > s0) {
                ivs_off[pos] = ivs_off[pos - 1];
                ivs_end[pos] = ivs_end[pos - 1];
                pos--;
            }
            ivs_off[pos] = s0;
            ivs_end[pos] = e0;
            m++;
        }
        size_t best = SIZE_MAX, best_gap = SIZE_MAX, prev = 0;
        for (int j = 0; j <= m; j++) {
            size_t gap_end = j < m ? ivs_off[j] : SIZE_MAX;
            if (gap_end > prev && gap_end - prev >= need) {
                size_t gap = j < m ? gap_end - prev : SIZE_MAX - 1;
                if (gap < best_gap) {
                    best_gap = gap;
                    best = prev;
                }
            }
            if (j < m && ivs_end[j] > prev)
                prev = ivs_end[j];
        }
        blk->offset = best;
        placed[n_placed++] = by_size[k].idx;
        if (best + need > top)
            top = best + need;
    }
    return top;
}

static int by_size_desc(const void *a, const void *b) {
    const key *x = a, *y = b;
    if (x->size != y->size)
        return x->size > y->size ? -1 : 1;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->idx - y->idx;
}

static int by_size_then_len(const void *a, const void *b) {
    const key *x = a, *y = b;
    if (x->size != y->size)
        return x->size > y->size ? -1 : 1;
    if (x->len != y->len)
        return x->len > y->len ? -1 : 1;
    return x->idx - y->idx;
}

static int by_len_then_size(const void *a, const void *b) {
    const key *x = a, *y = b;
    if (x->len != y->len)
        return x->len > y->len ? -1 : 1;
    if (x->size != y->size)
        return x->size > y->size ? -1 : 1;
    return x->idx - y->idx;
}

static int by_area(const void *a, const void *b) {
    const key *x = a, *y = b;
    double ax = (double)x->size * (x->len + 1), ay = (double)y->size * (y->len + 1);
    if (ax != ay)
        return ax > ay ? -1 : 1;
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
        keys[i] = (key){b[i].start, i, b[i].size, b[i].end - b[i].start};
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
    /* Try greedy-by-size too and keep the smaller arena. Without memory for
     * its scratch the first placement stands: valid, perhaps larger (a
     * fallback, not an error; test_faults counts it as absorbed). */
    key *ks = sn_malloc(sizeof *ks * (size_t)n);
    size_t *saved = sn_malloc(sizeof *saved * (size_t)n), *io = sn_malloc(sizeof *io * (size_t)n),
           *ie = sn_malloc(sizeof *ie * (size_t)n);
    /* Several orders of the same greedy; each is O(n^2), n is the number of
     * planned tensors. */
    int (*const orders[])(const void *, const void *) = {by_size_desc, by_size_then_len, by_area,
                                                         by_len_then_size};
    if (ks && saved && io && ie) {
        for (int i = 0; i < n; i++)
            saved[i] = b[i].offset;
        for (size_t o = 0; o < sizeof orders / sizeof orders[0]; o++) {
            for (int i = 0; i < n; i++)
                ks[i] = (key){b[i].start, i, b[i].size, b[i].end - b[i].start};
            qsort(ks, (size_t)n, sizeof *ks, orders[o]);
            size_t top2 = place_by_size(b, n, ks, order, io, ie);
            if (top2 < top) {
                top = top2;
                for (int i = 0; i < n; i++)
                    saved[i] = b[i].offset;
            }
        }
        for (int i = 0; i < n; i++)
            b[i].offset = saved[i];
    }
    sn_free(ks);
    sn_free(saved);
    sn_free(io);
    sn_free(ie);
    sn_free(order);
    sn_free(live);
    *total = top;
    if (lower)
        *lower = lb;
    return SNUG_OK;
}
