#include <malloc.h>
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

void *sn_pages_reserve(size_t n) {
    if (g_alloc.malloc_fn)
        return sn_malloc(n);
    __atomic_add_fetch(&g_count, 1, __ATOMIC_RELAXED);
    void *p = mmap(NULL, page_round(n ? n : 1), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void sn_pages_commit(size_t bytes) {
    if (!g_alloc.malloc_fn)
        live_adjust((int64_t)bytes);
}

void *sn_pages_alloc(size_t n) {
    void *p = sn_pages_reserve(n);
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
