/* The arena planner: no two blocks alive at the same step overlap in
 * memory, and the arena against the lower bound (the largest total of
 * blocks alive at one step): within 1.10x on every model of the ONNX
 * backend test data planned for its test inputs, and on 200 rounds of
 * random lifetimes (a harder case than any graph: blocks of unrelated
 * sizes start at any step) median <= 1.05x and worst <= RANDOM_WORST.
 * The greedy placements (time order, four size orders) do not reach 1.10x
 * on all random rounds: 9 of 200 exceeded it when this was measured, the
 * worst at 1.212 (the bound is NP-hard to meet exactly). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec.h"
#include "plan/memplan.h"

static int fails;
#define CHECK(c)                                                               \
    do {                                                                       \
        if (!(c)) {                                                            \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
            fails++;                                                           \
        }                                                                      \
    } while (0)

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void check_no_overlap(const sn_block *b, int n, size_t total) {
    for (int i = 0; i < n; i++) {
        CHECK(b[i].offset % SN_ARENA_ALIGN == 0);
        CHECK(b[i].offset + b[i].size <= total);
        for (int j = i + 1; j < n; j++) {
            bool time = !(b[i].end < b[j].start || b[j].end < b[i].start);
            bool mem = b[i].offset < b[j].offset + b[j].size && b[j].offset < b[i].offset + b[i].size;
            if (time && mem && b[i].size && b[j].size) {
                fprintf(stderr, "blocks %d and %d overlap\n", i, j);
                fails++;
                return;
            }
        }
    }
}

/* Plans every model under dir for its test_data_set_0 input shapes. */
static void plan_models(const char *dir, int *n_models, double *worst, char *worst_name) {
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "test_", 5))
            continue;
        char path[4096];
        sn_err err = {0};
        sn_model *m = NULL;
        sn_graph *g = NULL;
        sn_exec *ex = NULL;
        snprintf(path, sizeof path, "%s/%s/model.onnx", dir, e->d_name);
        if (sn_model_load(path, &m, &err) || sn_graph_build(m, &g, &err) || sn_exec_new(g, NULL, NULL, &ex, &err))
            goto next; /* unsupported models are the conformance suite's business */
        sn_tensor in[64];
        void *own[64] = {0};
        bool ok = g->n_inputs <= 64;
        for (int i = 0; ok && i < g->n_inputs; i++) {
            void *buf;
            size_t len;
            snprintf(path, sizeof path, "%s/%s/test_data_set_0/input_%d.pb", dir, e->d_name, i);
            if (sn_file_read(path, &buf, &len, &err)) {
                ok = false;
                break;
            }
            ok = sn_value_decode_pb_typed(buf, len, g->values[g->inputs[i]].declared, &in[i], &own[i], NULL, &err) ==
                 SNUG_OK;
            sn_free(buf);
        }
        if (ok && sn_exec_plan(ex, in, &err) == SNUG_OK) {
            const sn_exec_stats *st = sn_exec_get_stats(ex);
            (*n_models)++;
            CHECK(st->arena_bytes >= st->lower_bound);
            double r = st->lower_bound ? (double)st->arena_bytes / (double)st->lower_bound : 1.0;
            if (r > *worst) {
                *worst = r;
                snprintf(worst_name, 256, "%s", e->d_name);
            }
        }
        for (int i = 0; i < 64; i++)
            sn_free(own[i]);
    next:
        sn_exec_free(ex);
        sn_graph_free(g);
        sn_model_free(m);
    }
    closedir(d);
}

#define RANDOM_ROUNDS 200
#define RANDOM_WORST 1.25

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(void) {
    /* Random lifetimes and sizes. */
    double ratio[RANDOM_ROUNDS];
    for (int round = 0; round < RANDOM_ROUNDS; round++) {
        int n = 1 + (int)(next() % 120), steps = 1 + (int)(next() % 60);
        sn_block b[128];
        for (int i = 0; i < n; i++) {
            int s = (int)(next() % (uint64_t)steps), len = (int)(next() % 8);
            b[i] = (sn_block){(size_t)(next() % 5000) * (next() % 3 ? 1 : 64), s, s + len, 0};
        }
        size_t total, lower;
        CHECK(sn_memplan_place(b, n, &total, &lower, NULL) == SNUG_OK);
        CHECK(total >= lower);
        check_no_overlap(b, n, total);
        ratio[round] = lower ? (double)total / (double)lower : 1.0;
    }
    qsort(ratio, RANDOM_ROUNDS, sizeof *ratio, cmp_double);
    int over = 0;
    for (int r = 0; r < RANDOM_ROUNDS; r++)
        over += ratio[r] > 1.10;
    printf("random lifetimes, %d rounds: arena / lower bound median %.3f, 95th percentile %.3f, worst %.3f; "
           "%d above 1.10\n",
           RANDOM_ROUNDS, ratio[RANDOM_ROUNDS / 2], ratio[RANDOM_ROUNDS * 95 / 100], ratio[RANDOM_ROUNDS - 1], over);
    CHECK(ratio[RANDOM_ROUNDS / 2] <= 1.05);
    CHECK(ratio[RANDOM_ROUNDS - 1] <= RANDOM_WORST);
    /* Models. */
    int n_models = 0;
    double worst = 1.0;
    char worst_name[256] = "";
    const char *root = "/usr/share/libonnx-testdata/data";
    const char *suites[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};
    char dir[512];
    for (int s = 0; s < 4; s++) {
        snprintf(dir, sizeof dir, "%s/%s", root, suites[s]);
        plan_models(dir, &n_models, &worst, worst_name);
    }
    printf("planned %d models; worst arena / lower bound %.3f (%s)\n", n_models, worst, worst_name);
    CHECK(n_models > 900);
    CHECK(worst <= 1.10);
    if (fails) {
        fprintf(stderr, "test_memplan: %d check(s) failed\n", fails);
        return 1;
    }
    printf("test_memplan: ok\n");
    return 0;
}
