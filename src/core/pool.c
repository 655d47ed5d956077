/* A persistent thread pool: n-1 workers plus the calling thread. One job at
 * a time; each job is a range split into chunks that threads claim with an
 * atomic counter, so uneven chunks balance themselves. */
#include <pthread.h>
#include <sched.h>

#include "core/core.h"

struct sn_pool {
    int n;                 /* threads including the caller */
    pthread_t *threads;    /* owned: n-1 workers */
    pthread_mutex_t mu;
    pthread_cond_t cv_job, cv_done;
    uint64_t generation;   /* atomic: bumped per job (release after the job is written) */
    int busy;              /* atomic: workers still in the current job */
    int sleepers;          /* atomic, changed under mu: workers blocked on cv_job */
    int waiting;           /* atomic, changed under mu: the caller is blocked on cv_done */
    int stop;              /* atomic */
    int hot;               /* atomic: > 0 while workers spin without a limit (sn_pool_hot) */
    int spin;              /* pauses before sleeping: SN_POOL_SPIN, or what sn_pool_set_spin says */
    /* current job */
    sn_range_fn fn;
    void *arg;
    int64_t n_items, chunk, n_chunks;
    int64_t next;          /* atomic: next chunk to claim */
    sn_fpmode fp;          /* the caller's floating-point mode, which workers adopt */
};

/* Spin this many pauses (tens of microseconds) for the next job or for the
 * workers to finish before sleeping: an LLM decode step is hundreds of short
 * parallel loops, and a futex wake-up costs ~100 us on some VMs. */
#define SN_POOL_SPIN 4000

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

static void pool_work(sn_pool *p) {
    for (;;) {
        int64_t c = __atomic_fetch_add(&p->next, 1, __ATOMIC_RELAXED);
        if (c >= p->n_chunks)
            return;
        int64_t b = c * p->chunk, e = b + p->chunk;
        if (e > p->n_items)
            e = p->n_items;
        p->fn(p->arg, b, e);
    }
}

static void *pool_main(void *arg) {
    sn_pool *p = arg;
    uint64_t seen = 0;
    for (;;) {
        uint64_t g = __atomic_load_n(&p->generation, __ATOMIC_ACQUIRE);
        const int spin = __atomic_load_n(&p->spin, __ATOMIC_RELAXED);
        for (int i = 0; g == seen && i < spin && !__atomic_load_n(&p->stop, __ATOMIC_RELAXED); i++) {
            cpu_relax();
            g = __atomic_load_n(&p->generation, __ATOMIC_ACQUIRE);
            if (i == spin - 1 && __atomic_load_n(&p->hot, __ATOMIC_RELAXED) > 0) {
                /* held hot: keep polling, but let other runnable threads
                 * (the caller's serial kernel, on an oversubscribed
                 * machine) have the core between spins */
                sched_yield();
                i = 0;
            }
        }
        if (g == seen) {
            /* sleepers before generation, both seq_cst: the caller bumps
             * generation before it reads sleepers, so either this thread
             * sees the new job or the caller sees a sleeper and wakes it
             * (under mu, which this thread holds until cond_wait) */
            pthread_mutex_lock(&p->mu);
            __atomic_add_fetch(&p->sleepers, 1, __ATOMIC_SEQ_CST);
            while ((g = __atomic_load_n(&p->generation, __ATOMIC_SEQ_CST)) == seen &&
                   !__atomic_load_n(&p->stop, __ATOMIC_RELAXED))
                pthread_cond_wait(&p->cv_job, &p->mu);
            __atomic_sub_fetch(&p->sleepers, 1, __ATOMIC_RELAXED);
            pthread_mutex_unlock(&p->mu);
        }
        if (__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE))
            break;
        seen = g;
        if (sn_fp_get() != p->fp)
            sn_fp_set(p->fp);
        pool_work(p);
        /* the same handshake with a caller that stopped spinning: the
         * mutex only when it sleeps, so a caller that spins never meets
         * this thread on the lock when it posts the next job */
        if (__atomic_sub_fetch(&p->busy, 1, __ATOMIC_SEQ_CST) == 0 &&
            __atomic_load_n(&p->waiting, __ATOMIC_SEQ_CST)) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->cv_done);
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

int sn_pool_new(int n_threads, sn_pool **out, sn_err *err) {
    *out = NULL;
    if (n_threads < 1)
        n_threads = 1;
    sn_pool *p = sn_calloc(1, sizeof *p);
    if (!p)
        return sn_errf(err, SNUG_ERR_OOM, "thread pool: out of memory");
    p->n = n_threads;
    p->spin = SN_POOL_SPIN;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_job, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    if (n_threads > 1) {
        p->threads = sn_calloc((size_t)n_threads - 1, sizeof *p->threads);
        if (!p->threads) {
            sn_pool_free(p);
            return sn_errf(err, SNUG_ERR_OOM, "thread pool: out of memory");
        }
        for (int i = 0; i < n_threads - 1; i++) {
            if (pthread_create(&p->threads[i], NULL, pool_main, p) != 0) {
                p->n = i + 1; /* the ones started, plus the caller */
                sn_pool_free(p);
                return sn_errf(err, SNUG_ERR_INTERNAL, "thread pool: cannot start thread %d", i);
            }
        }
    }
    *out = p;
    return SNUG_OK;
}

void sn_pool_free(sn_pool *p) {
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    __atomic_store_n(&p->stop, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&p->cv_job);
    pthread_mutex_unlock(&p->mu);
    if (p->threads)
        for (int i = 0; i < p->n - 1; i++)
            pthread_join(p->threads[i], NULL);
    sn_free(p->threads);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv_job);
    pthread_cond_destroy(&p->cv_done);
    sn_free(p);
}

int sn_pool_size(const sn_pool *p) { return p ? p->n : 1; }

int sn_pool_sleeping(sn_pool *p) {
    if (!p)
        return 0;
    pthread_mutex_lock(&p->mu);
    int n = p->sleepers;
    pthread_mutex_unlock(&p->mu);
    return n;
}

void sn_pool_set_spin(sn_pool *p, int pauses) {
    if (p)
        __atomic_store_n(&p->spin, pauses < 0 ? 0 : pauses, __ATOMIC_RELAXED);
}

void sn_pool_set_spinning(sn_pool *p, bool on) { sn_pool_set_spin(p, on ? SN_POOL_SPIN : 0); }

void sn_pool_hot(sn_pool *p, bool on) {
    if (p)
        __atomic_add_fetch(&p->hot, on ? 1 : -1, __ATOMIC_RELAXED);
}

void sn_pool_for(sn_pool *p, int64_t n, int64_t grain, sn_range_fn fn, void *arg) {
    if (n <= 0)
        return;
    if (grain < 1)
        grain = 1;
    if (!p || p->n == 1 || n <= grain) {
        fn(arg, 0, n);
        return;
    }
    /* About 8 chunks per thread for balance, never below the grain. */
    int64_t chunk = (n + (int64_t)p->n * 8 - 1) / ((int64_t)p->n * 8);
    if (chunk < grain)
        chunk = grain;
    p->fn = fn;
    p->arg = arg;
    p->fp = sn_fp_get();
    p->n_items = n;
    p->chunk = chunk;
    p->n_chunks = (n + chunk - 1) / chunk;
    __atomic_store_n(&p->next, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&p->busy, p->n - 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&p->generation, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&p->sleepers, __ATOMIC_SEQ_CST) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv_job);
        pthread_mutex_unlock(&p->mu);
    }
    pool_work(p);
    const int spin = __atomic_load_n(&p->spin, __ATOMIC_RELAXED);
    for (int i = 0; i < spin && __atomic_load_n(&p->busy, __ATOMIC_ACQUIRE) > 0; i++)
        cpu_relax();
    if (__atomic_load_n(&p->busy, __ATOMIC_ACQUIRE) > 0) {
        pthread_mutex_lock(&p->mu);
        __atomic_store_n(&p->waiting, 1, __ATOMIC_SEQ_CST);
        while (__atomic_load_n(&p->busy, __ATOMIC_SEQ_CST) > 0)
            pthread_cond_wait(&p->cv_done, &p->mu);
        __atomic_store_n(&p->waiting, 0, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&p->mu);
    }
}

#include <unistd.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <xmmintrin.h>
sn_fpmode sn_fp_get(void) { return _mm_getcsr(); }
void sn_fp_set(sn_fpmode m) { _mm_setcsr(m); }
sn_fpmode sn_fp_flushing(sn_fpmode m) { return m | 0x8040u; /* FTZ (bit 15), DAZ (bit 6) */ }
#elif defined(__aarch64__) && defined(__GNUC__)
sn_fpmode sn_fp_get(void) {
    uint64_t r;
    __asm__ volatile("mrs %0, fpcr" : "=r"(r));
    return (sn_fpmode)r;
}
void sn_fp_set(sn_fpmode m) {
    uint64_t r = m;
    __asm__ volatile("msr fpcr, %0" : : "r"(r));
}
sn_fpmode sn_fp_flushing(sn_fpmode m) { return m | (1u << 24); /* FZ */ }
#else
sn_fpmode sn_fp_get(void) { return 0; }
void sn_fp_set(sn_fpmode m) { (void)m; }
sn_fpmode sn_fp_flushing(sn_fpmode m) { return m; }
#endif

bool sn_cpu_avx512f(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    static int v = -1; /* idempotent, as sn_cpu_avx2_fma */
    if (v < 0)
        v = __builtin_cpu_supports("avx512f");
    return v;
#else
    return false;
#endif
}

bool sn_cpu_avx2_fma(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    static int v = -1; /* idempotent: every thread computes the same value */
    if (v < 0)
        v = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return v;
#else
    return false;
#endif
}

int sn_cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}
