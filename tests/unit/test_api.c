/* The public API (include/snug.h) only: sessions, options, runs and the
 * errors a caller sees. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snug.h"

static int fails;
#define CHECK(c)                                                               \
    do {                                                                       \
        if (!(c)) {                                                            \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
            fails++;                                                           \
        }                                                                      \
    } while (0)

#define MODEL "../shared/fixtures/stories260K/stories260K_kv.onnx"

static char g_warned[512];
static void log_capture(void *user, int level, const char *msg) {
    (void)user;
    if (level == SNUG_LOG_WARN && !g_warned[0])
        snprintf(g_warned, sizeof g_warned, "%s", msg);
}

static int g_mallocs, g_reallocs, g_frees;
static void *count_malloc(void *user, size_t n) {
    (void)user;
    g_mallocs++;
    return malloc(n);
}
static void *count_realloc(void *user, void *p, size_t n) {
    (void)user;
    g_reallocs++;
    return realloc(p, n);
}
static void count_free(void *user, void *p) {
    (void)user;
    if (p)
        g_frees++;
    free(p);
}

int main(void) {
    char err[512];
    snug_session *s = NULL;

    /* Bad paths and options are errors with messages, not crashes. */
    CHECK(snug_session_create("/nonexistent/model.onnx", NULL, &s, err, sizeof err) == SNUG_ERR_IO && !s);
    CHECK(strstr(err, "/nonexistent/model.onnx") != NULL);
    snug_options *o = snug_options_new();
    CHECK(snug_options_set(o, "session.no_such_key", "1") == SNUG_OK);
    CHECK(snug_session_create(MODEL, o, &s, err, sizeof err) == SNUG_ERR_INVALID_ARG && !s);
    CHECK(strstr(err, "session.no_such_key") != NULL);
    snug_options_free(o);
    o = snug_options_new();
    CHECK(snug_options_set(o, "snug.threads", "lots") == SNUG_OK);
    CHECK(snug_session_create(MODEL, o, &s, err, sizeof err) == SNUG_ERR_INVALID_ARG);
    CHECK(strstr(err, "snug.threads") != NULL);
    CHECK(snug_options_set(o, "snug.threads", "2") == SNUG_OK); /* later sets win */
    CHECK(snug_options_set(o, "session.set_denormal_as_zero", "yes") == SNUG_OK);
    CHECK(snug_session_create(MODEL, o, &s, err, sizeof err) == SNUG_ERR_INVALID_ARG);
    CHECK(strstr(err, "session.set_denormal_as_zero") != NULL);
    CHECK(snug_options_set(o, "session.set_denormal_as_zero", "1") == SNUG_OK);
    CHECK(!strcmp(snug_options_get(o, "snug.threads"), "2"));
    CHECK(snug_session_create(MODEL, o, &s, err, sizeof err) == SNUG_OK && s);
    snug_options_free(o);
    if (!s)
        return 1;

    CHECK(snug_session_input_count(s) == 11 && snug_session_output_count(s) == 11);
    CHECK(!strcmp(snug_session_input_name(s, 0), "input_ids"));
    CHECK(!strcmp(snug_session_output_name(s, 0), "logits"));
    CHECK(snug_session_input_name(s, 99) == NULL);

    /* One prefill step of the prompt with an empty cache. */
    int64_t ids[5] = {1, 403, 407, 261, 378};
    snug_tensor in[11], out[11];
    memset(in, 0, sizeof in);
    in[0] = (snug_tensor){SNUG_INT64, 2, {1, 5}, ids};
    for (int i = 1; i < 11; i++)
        in[i] = (snug_tensor){SNUG_FLOAT, 4, {1, 4, 0, 8}, NULL};
    volatile float tiny = 1e-39f, one = 1.0f;
    CHECK(snug_session_run(s, in, 11, out, 11) == SNUG_OK);
    /* the run flushed subnormals (session.set_denormal_as_zero), the caller's
     * thread keeps its own mode: a subnormal survives here */
    CHECK(tiny * one != 0.0f);
    CHECK(out[0].dtype == SNUG_FLOAT && out[0].rank == 3 && out[0].dims[1] == 5 && out[0].dims[2] == 512);
    const float *lg = (const float *)out[0].data + 4 * 512;
    int best = 0;
    for (int v = 1; v < 512; v++)
        best = lg[v] > lg[best] ? v : best;
    CHECK(best == 432); /* the first greedy id of ../shared/fixtures/stories260K/greedy_ids.txt */
    CHECK(out[1].rank == 4 && out[1].dims[2] == 5);

    /* Other shapes: the session plans again, and says so at WARN (the first
     * session here has no logger: see below). */
    {
        snug_options *lo = snug_options_new();
        snug_options_set_logger(lo, log_capture, NULL, SNUG_LOG_WARN);
        snug_session *s2 = NULL;
        CHECK(snug_session_create(MODEL, lo, &s2, err, sizeof err) == SNUG_OK && s2);
        snug_options_free(lo);
        snug_tensor in2[11], out2[11];
        memcpy(in2, in, sizeof in2);
        CHECK(s2 && snug_session_run(s2, in2, 11, out2, 11) == SNUG_OK && !g_warned[0]); /* the first plan */
        in2[0] = (snug_tensor){SNUG_INT64, 2, {1, 3}, ids};
        CHECK(s2 && snug_session_run(s2, in2, 11, out2, 11) == SNUG_OK);
        CHECK(strstr(g_warned, "planning again: input 'input_ids' is [1,3], the plan was made for [1,5]") != NULL);
        snug_session_free(s2);
    }

    /* Wrong calls: counts, dtypes, shapes. */
    CHECK(snug_session_run(s, in, 3, out, 11) == SNUG_ERR_INVALID_ARG);
    CHECK(strstr(snug_session_error(s), "11 inputs") != NULL);
    snug_tensor bad = in[0];
    bad.dtype = SNUG_INT32;
    in[0] = bad;
    CHECK(snug_session_run(s, in, 11, out, 11) == SNUG_ERR_TYPE);
    CHECK(strstr(snug_session_error(s), "input_ids") != NULL);
    in[0] = (snug_tensor){SNUG_INT64, 3, {1, 5, 1}, ids};
    CHECK(snug_session_run(s, in, 11, out, 11) == SNUG_ERR_SHAPE);
    in[0] = (snug_tensor){SNUG_INT64, 2, {1, -5}, ids};
    CHECK(snug_session_run(s, in, 11, out, 11) == SNUG_ERR_INVALID_ARG);
    /* An id out of the vocabulary is a range error from Gather, not a crash. */
    int64_t oob[1] = {100000};
    in[0] = (snug_tensor){SNUG_INT64, 2, {1, 1}, oob};
    CHECK(snug_session_run(s, in, 11, out, 11) != SNUG_OK);
    CHECK(strstr(snug_session_error(s), "Gather") != NULL);
    snug_session_free(s);
    snug_session_free(NULL);

    /* The allocator: all three functions or none. A partial table would pair
     * the caller's malloc with libc's free; it is refused and the allocator
     * in force stays (the default here: it counts live bytes, a caller's
     * allocator reports -1). */
    snug_allocator part = {.malloc_fn = count_malloc};
    CHECK(snug_set_allocator(&part) == SNUG_ERR_INVALID_ARG);
    part.realloc_fn = count_realloc;
    CHECK(snug_set_allocator(&part) == SNUG_ERR_INVALID_ARG);
    snug_allocator only_free = {.free_fn = count_free};
    CHECK(snug_set_allocator(&only_free) == SNUG_ERR_INVALID_ARG);
    CHECK(snug_alloc_live_bytes() >= 0);
    snug_allocator full = {count_malloc, count_realloc, count_free, NULL};
    CHECK(snug_set_allocator(&full) == SNUG_OK && snug_alloc_live_bytes() == -1);
    o = snug_options_new(); /* through the caller's table, freed by it */
    CHECK(o && snug_options_set(o, "snug.threads", "1") == SNUG_OK);
    snug_options_free(o);
    CHECK(g_mallocs > 0 && g_mallocs + g_reallocs >= g_frees && g_frees > 0);
    CHECK(snug_set_allocator(NULL) == SNUG_OK && snug_alloc_live_bytes() >= 0);
    snug_allocator none = {0};
    CHECK(snug_set_allocator(&none) == SNUG_OK);
    if (fails) {
        fprintf(stderr, "test_api: %d check(s) failed\n", fails);
        return 1;
    }
    printf("test_api: ok\n");
    return 0;
}
