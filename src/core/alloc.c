#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

/* The one process-wide setting (like sqlite3_config): the allocator.
 * Set before sessions exist; the counter is atomic. */
static snug_allocator g_alloc;
static uint64_t g_count;
static int64_t g_live; /* bytes held through the default allocator (malloc_usable_size) */
static int64_t g_peak; /* the most g_live has been */

static void live_add(void *p, int sign) {
    if (!p || g_alloc.malloc_fn)
        return;
    int64_t v = __atomic_add_fetch(&g_live, sign * (int64_t)malloc_usable_size(p), __ATOMIC_RELAXED);
    int64_t pk = __atomic_load_n(&g_peak, __ATOMIC_RELAXED);
    while (v > pk && !__atomic_compare_exchange_n(&g_peak, &pk, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

int snug_set_allocator(const snug_allocator *a) {
    int set = a ? !!a->malloc_fn + !!a->realloc_fn + !!a->free_fn : 0;
    if (set != 0 && set != 3)
        return SNUG_ERR_INVALID_ARG;
    if (set)
        g_alloc = *a;
    else
        memset(&g_alloc, 0, sizeof g_alloc);
    return SNUG_OK;
}

uint64_t snug_alloc_count(void) { return __atomic_load_n(&g_count, __ATOMIC_RELAXED); }

int64_t snug_alloc_live_bytes(void) {
    return g_alloc.malloc_fn ? -1 : __atomic_load_n(&g_live, __ATOMIC_RELAXED);
}

int64_t snug_alloc_peak_bytes(void) {
    return g_alloc.malloc_fn ? -1 : __atomic_load_n(&g_peak, __ATOMIC_RELAXED);
}

void *sn_malloc(size_t n) {
    __atomic_add_fetch(&g_count, 1, __ATOMIC_RELAXED);
    if (n == 0)
        n = 1;
    if (g_alloc.malloc_fn)
        return g_alloc.malloc_fn(g_alloc.user, n);
    void *p = malloc(n);
    live_add(p, 1);
    return p;
}

void *sn_calloc(size_t count, size_t size) {
    size_t n;
    if (!sn_mul_ok(count, size, &n))
        return NULL;
    void *p = sn_malloc(n);
    if (p)
        memset(p, 0, n ? n : 1);
    return p;
}

void *sn_realloc(void *p, size_t n) {
    __atomic_add_fetch(&g_count, 1, __ATOMIC_RELAXED);
    if (n == 0)
        n = 1;
    if (g_alloc.realloc_fn)
        return g_alloc.realloc_fn(g_alloc.user, p, n);
    size_t old = p ? malloc_usable_size(p) : 0;
    void *q = realloc(p, n);
    if (q) {
        __atomic_sub_fetch(&g_live, (int64_t)old, __ATOMIC_RELAXED);
        live_add(q, 1);
    }
    return q;
}

void sn_free(void *p) {
    if (!p)
        return;
    if (g_alloc.free_fn) {
        g_alloc.free_fn(g_alloc.user, p);
    } else {
        live_add(p, -1);
        free(p);
    }
}

static size_t page_round(size_t n) {
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    return (n + pg - 1) / pg * pg;
}

static void live_adjust(int64_t d) {
    int64_t v = __atomic_add_fetch(&g_live, d, __ATOMIC_RELAXED);
    int64_t pk = __atomic_load_n(&g_peak, __ATOMIC_RELAXED);
    while (v > pk && !__atomic_compare_exchange_n(&g_peak, &pk, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

size_t sn_pages_size(size_t n) { return g_alloc.malloc_fn ? n : page_round(n ? n : 1); }

static void *pages_map(size_t n) {
    void *p = mmap(NULL, page_round(n ? n : 1), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* ---- huge pages for packed weights -------------------------------------
 * The blocks kernels pack weights into (sn_pages_reserve: MatMulNBits'
 * panels, a MatMul's packed B) are read through once per decode token, a
 * few hundred KiB each. In 4 KiB pages every page is a TLB miss and a
 * stop for the hardware prefetcher, which does not cross a page. So the
 * blocks of 64 KiB to 2 MiB are carved one after another from slabs of
 * address space aligned to 2 MiB, and once a block is written
 * (sn_pages_settle) the 2 MiB pages it completes are collapsed into huge
 * pages (MADV_COLLAPSE, Linux 6.1; where the system has none, they stay
 * ordinary pages); a larger block has pages of its own, those wholly
 * inside it collapsed the same way. Asked for after the writes, not
 * before: a block written out of order (a float MatMul's packed B) would
 * otherwise hold each 2 MiB at its first write while the weight it is
 * packed from is still there (113 MiB more at the peak of SmolLM2's
 * float32 export under snug.weights=load). A freed block's pages go back
 * at once, and a slab is unmapped with its last block. SmolLM2-135M int4
 * on an AMD EPYC (Zen 4) VM: MatMulNBits 3.36 -> 2.96 ms a token, and
 * 11.4 -> 9.6 ms for a 16-sequence step (`snug bench --slots 16 --prompt
 * 64 --ops`, medians of 6 alternated runs). */
#if defined(__linux__) && !defined(MADV_COLLAPSE)
#define MADV_COLLAPSE 25 /* Linux 6.1 (glibc 2.36's headers lack it); an older kernel refuses it (EINVAL) */
#endif
#define SLAB_HUGE ((size_t)2 << 20)
#define SLAB_BYTES ((size_t)64 << 20)
#define SLAB_MIN ((size_t)64 << 10) /* smaller blocks get pages of their own */
#define SLAB_MAX 256                /* slabs at once; past that, pages of their own */

typedef struct slab {
    char *base;
    size_t used, live; /* live: blocks not yet freed */
} slab;

static slab g_slabs[SLAB_MAX];
static int g_n_slabs;
static pthread_mutex_t g_slab_mu = PTHREAD_MUTEX_INITIALIZER;

/* SLAB_BYTES of address space aligned to 2 MiB, or NULL. */
static char *slab_map(void) {
    char *r = mmap(NULL, SLAB_BYTES + SLAB_HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (r == MAP_FAILED)
        return NULL;
    char *b = (char *)(((uintptr_t)r + SLAB_HUGE - 1) & ~(uintptr_t)(SLAB_HUGE - 1));
    if (b > r)
        munmap(r, (size_t)(b - r));
    munmap(b + SLAB_BYTES, SLAB_HUGE - (size_t)(b - r));
    return b;
}

/* A block of m bytes (whole pages, less than 2 MiB) from the last slab or
 * a new one, or NULL (no slab to be had: the caller maps pages of its own). */
static void *slab_take(size_t m) {
    pthread_mutex_lock(&g_slab_mu);
    void *p = NULL;
    slab *s = g_n_slabs ? &g_slabs[g_n_slabs - 1] : NULL;
    if (!s || s->used + m > SLAB_BYTES) {
        char *b = g_n_slabs < SLAB_MAX ? slab_map() : NULL;
        if (b) {
            s = &g_slabs[g_n_slabs++];
            *s = (slab){.base = b};
        } else {
            s = NULL;
        }
    }
    if (s) {
        p = s->base + s->used;
        s->used += m;
        s->live++;
    }
    pthread_mutex_unlock(&g_slab_mu);
    return p;
}

/* The slab holding p, or NULL (under g_slab_mu). */
static slab *slab_of(const void *p) {
    for (int i = 0; i < g_n_slabs; i++)
        if ((const char *)p >= g_slabs[i].base && (const char *)p < g_slabs[i].base + SLAB_BYTES)
            return &g_slabs[i];
    return NULL;
}

/* Frees the m-byte block p if a slab holds it: its pages go back to the
 * system at once (the slab's room is not carved again), the slab too
 * with its last block. */
static bool slab_give(void *p, size_t m) {
    pthread_mutex_lock(&g_slab_mu);
    slab *s = slab_of(p);
    if (s && --s->live > 0) {
        madvise(p, m, MADV_DONTNEED);
    } else if (s) {
        munmap(s->base, SLAB_BYTES);
        memmove(s, s + 1, sizeof *s * (size_t)(g_n_slabs - (s - g_slabs) - 1));
        g_n_slabs--;
    }
    pthread_mutex_unlock(&g_slab_mu);
    return s != NULL;
}

void *sn_pages_reserve(size_t n) {
    if (g_alloc.malloc_fn)
        return sn_malloc(n);
    __atomic_add_fetch(&g_count, 1, __ATOMIC_RELAXED);
    size_t m = page_round(n ? n : 1);
    void *p = m >= SLAB_MIN && m < SLAB_HUGE ? slab_take(m) : NULL;
    return p ? p : pages_map(n);
}

/* Advice (MADV_HUGEPAGE, MADV_COLLAPSE) for the 2 MiB pages of [p, p + n),
 * from the one p starts in (from_start) or the first wholly inside, to
 * the last wholly inside; none where the advice is unknown. */
static void advise_huge(void *p, size_t n, bool from_start, int advice) {
    const uintptr_t mask = ~(uintptr_t)(SLAB_HUGE - 1);
    char *b = (char *)(from_start ? (uintptr_t)p & mask : ((uintptr_t)p + SLAB_HUGE - 1) & mask);
    char *e = (char *)(((uintptr_t)p + n) & mask);
    if (advice >= 0 && e > b)
        madvise(b, (size_t)(e - b), advice);
}

void sn_pages_huge(void *p, size_t n) {
#ifdef MADV_HUGEPAGE
    if (!g_alloc.malloc_fn && p)
        advise_huge(p, n, false, MADV_HUGEPAGE);
#else
    (void)p;
    (void)n;
#endif
}

void sn_pages_settle(void *p, size_t n) {
    if (g_alloc.malloc_fn || !p)
        return;
    pthread_mutex_lock(&g_slab_mu);
    bool in_slab = slab_of(p) != NULL;
    pthread_mutex_unlock(&g_slab_mu);
    /* in a slab the 2 MiB page it starts in is complete too (the blocks before it are written), the one
     * it ends in waits for the next block; a block of its own: the pages wholly inside it */
#ifdef MADV_COLLAPSE
    advise_huge(p, n, in_slab, MADV_COLLAPSE);
#else
    (void)in_slab;
#endif
}

void sn_pages_commit(size_t bytes) {
    if (!g_alloc.malloc_fn)
        live_adjust((int64_t)bytes);
}

void *sn_pages_alloc(size_t n) {
    void *p;
    if (g_alloc.malloc_fn) {
        p = sn_malloc(n);
    } else { /* pages of its own: parts of it are handed back (sn_pages_release) */
        __atomic_add_fetch(&g_count, 1, __ATOMIC_RELAXED);
        p = pages_map(n);
    }
    if (p)
        sn_pages_commit(sn_pages_size(n));
    return p;
}

size_t sn_pages_release(void *p, size_t n) {
    if (g_alloc.malloc_fn || !p)
        return 0;
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t b = ((uintptr_t)p + pg - 1) & ~(pg - 1), e = ((uintptr_t)p + n) & ~(pg - 1);
    if (e <= b)
        return 0;
    madvise((void *)b, e - b, MADV_DONTNEED);
    live_adjust(-(int64_t)(e - b));
    return e - b;
}

void sn_pages_free(void *p, size_t n, size_t released) {
    if (!p)
        return;
    if (g_alloc.malloc_fn) {
        sn_free(p);
        return;
    }
    size_t len = page_round(n ? n : 1);
    if (!slab_give(p, len))
        munmap(p, len);
    live_adjust(-(int64_t)(len - released));
}

char *sn_strndup(const char *s, size_t n) {
    char *d = sn_malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

char *sn_strdup(const char *s) { return sn_strndup(s, strlen(s)); }
