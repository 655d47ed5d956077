/* The thread pool: every index of a range is handed out exactly once (odd
 * sizes, grains, nested use from the caller), and workers held hot keep
 * spinning between jobs instead of sleeping, then sleep again once let go;
 * with spinning off they sleep even when held hot. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/core.h"

static int failures;
#define CHECK(c, ...)                                                                      \
    do {                                                                                   \
        if (!(c)) {                                                                        \
            fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fputc('\n', stderr);                                                           \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

static int hits[10007];

static void mark(void *arg, int64_t b, int64_t e) {
    (void)arg;
    for (int64_t i = b; i < e; i++)
        __atomic_add_fetch(&hits[i], 1, __ATOMIC_RELAXED);
}

/* Each index: 1 when a subnormal survives a multiply in the thread that ran
 * it (the mode that thread computes in), 0 when it is flushed. */
static volatile float g_tiny = 1e-39f, g_one = 1.0f;
static int kept[10007];
static void subnormal_kept(void *arg, int64_t b, int64_t e) {
    (void)arg;
    for (int64_t i = b; i < e; i++) {
        float r = g_tiny * g_one;
        kept[i] = r != 0.0f;
        for (volatile int spin = 0; spin < 200; spin++) /* long enough for every thread to take some */
            ;
    }
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits up to ~2 s for the pool's sleeping count to become want. */
static int settle(sn_pool *p, int want) {
    int n = -1;
    for (int i = 0; i < 200 && (n = sn_pool_sleeping(p)) != want; i++)
        sleep_ms(10);
    return n;
}

int main(void) {
    sn_err err;
    sn_pool *pool = NULL;
    if (sn_pool_new(3, &pool, &err) != SNUG_OK) {
        fprintf(stderr, "pool: %s\n", err.msg);
        return 1;
    }
    const int64_t sizes[] = {1, 2, 3, 7, 64, 1000, 10007};
    const int64_t grains[] = {1, 5, 64, 100000};
    for (size_t a = 0; a < sizeof sizes / sizeof *sizes; a++)
        for (size_t b = 0; b < sizeof grains / sizeof *grains; b++) {
            memset(hits, 0, sizeof hits);
            sn_pool_for(pool, sizes[a], grains[b], mark, NULL);
            for (int64_t i = 0; i < sizes[a]; i++)
                CHECK(hits[i] == 1, "n %lld grain %lld: index %lld run %d times", (long long)sizes[a],
                      (long long)grains[b], (long long)i, hits[i]);
        }

    /* Idle workers fall asleep after their spin (milliseconds at most). */
    int n = settle(pool, 2);
    CHECK(n == 2, "idle pool: %d of 2 workers asleep", n);
    /* Held hot (nested twice), a job wakes them and they stay awake
     * through a pause far longer than the spin. */
    sn_pool_hot(pool, true);
    sn_pool_hot(pool, true);
    memset(hits, 0, sizeof hits);
    sn_pool_for(pool, 10007, 1, mark, NULL);
    sleep_ms(200);
    n = sn_pool_sleeping(pool);
    CHECK(n == 0, "hot pool: %d workers asleep after 200 ms between jobs", n);
    sn_pool_hot(pool, false);
    sleep_ms(100);
    n = sn_pool_sleeping(pool);
    CHECK(n == 0, "still held once: %d workers asleep", n);
    memset(hits, 0, sizeof hits);
    sn_pool_for(pool, 10007, 1, mark, NULL);
    for (int64_t i = 0; i < 10007; i++)
        CHECK(hits[i] == 1, "hot pool: index %lld run %d times", (long long)i, hits[i]);
    sn_pool_hot(pool, false);
    n = settle(pool, 2);
    CHECK(n == 2, "let go: %d of 2 workers asleep", n);
    /* Spinning off (session.intra_op.allow_spinning=0): workers sleep
     * between jobs even while the pool is held hot, and jobs still run
     * every index once. */
    sn_pool_set_spinning(pool, false);
    sn_pool_hot(pool, true);
    for (int rep = 0; rep < 20; rep++) {
        memset(hits, 0, sizeof hits);
        sn_pool_for(pool, 10007, 1, mark, NULL);
        for (int64_t i = 0; i < 10007; i++)
            CHECK(hits[i] == 1, "spinning off: index %lld run %d times", (long long)i, hits[i]);
    }
    n = settle(pool, 2);
    CHECK(n == 2, "spinning off, held hot: %d of 2 workers asleep", n);
    sn_pool_hot(pool, false);
    sn_pool_set_spinning(pool, true);
    sn_pool_set_spinning(NULL, false);
    /* NULL pool: both calls are no-ops, the range still runs. */
    sn_pool_hot(NULL, true);
    sn_pool_hot(NULL, false);
    CHECK(sn_pool_sleeping(NULL) == 0, "NULL pool sleeping");
    memset(hits, 0, sizeof hits);
    sn_pool_for(NULL, 5, 1, mark, NULL);
    CHECK(hits[0] == 1 && hits[4] == 1, "NULL pool ran the range");
    /* Every range runs in the caller's floating-point mode: subnormals
     * flushed in all threads while the caller flushes, kept again after. */
#if defined(__x86_64__) || defined(__aarch64__)
    sn_fpmode saved = sn_fp_get();
    for (int flush = 1; flush >= 0; flush--) {
        sn_fp_set(flush ? sn_fp_flushing(saved) : saved);
        sn_pool_for(pool, 10007, 1, subnormal_kept, NULL);
        int n_kept = 0;
        for (int64_t i = 0; i < 10007; i++)
            n_kept += kept[i];
        CHECK(n_kept == (flush ? 0 : 10007), "caller %s subnormals: %d of 10007 indices kept them", flush ? "flushing" : "keeping",
              n_kept);
    }
    sn_fp_set(saved);
#endif
    sn_pool_free(pool);
    if (failures)
        fprintf(stderr, "%d failures\n", failures);
    else
        printf("pool: ok\n");
    return failures != 0;
}
