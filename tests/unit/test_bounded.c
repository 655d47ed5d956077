/* Planning at input bounds (session.max_shape_override): stories260K is
 * planned once for input_ids [1,64] and a KV cache of 64 positions, then
 * driven token by token. The greedy ids still match the golden ones, decode
 * steps allocate nothing and never re-plan, an input beyond its bound is an
 * error naming the input and the bound, and snug.static_allocation=1
 * refuses a model that would allocate while running. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/session.h"

#define FIX "../shared/fixtures/stories260K/"

static int fails;
#define CHECK(c)                                                               \
    do {                                                                       \
        if (!(c)) {                                                            \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
            fails++;                                                           \
        }                                                                      \
    } while (0)

enum { MAXCTX = 64, KVH = 4, HD = 8, NL = 5 };

int main(void) {
    int64_t prompt[8] = {1, 403, 407, 261, 378}, gold[64];
    int ng = 0;
    FILE *f = fopen(FIX "greedy_ids.txt", "r");
    char line[4096];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "GEN ", 4))
            for (char *t = strtok(line + 4, " \n"); t && ng < 64; t = strtok(NULL, " \n"))
                gold[ng++] = atoll(t);
    if (f)
        fclose(f);
    CHECK(ng == 60);

    char ov[4096];
    int o = snprintf(ov, sizeof ov, "input_ids:[1,%d]", MAXCTX);
    for (int l = 0; l < NL; l++)
        o += snprintf(ov + o, sizeof ov - (size_t)o, ";past_key_values.%d.key:[1,%d,%d,%d];past_key_values.%d.value:[1,%d,%d,%d]",
                      l, KVH, MAXCTX, HD, l, KVH, MAXCTX, HD);
    snug_options *opt = snug_options_new();
    snug_options_set(opt, "snug.threads", "2");
    snug_options_set(opt, "session.max_shape_override", ov);
    sn_err err = {0};
    sn_session *s = NULL;
    int rc = sn_session_open(FIX "stories260K_kv.onnx", opt, &s, &err);
    CHECK(rc == SNUG_OK);
    if (rc != SNUG_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    /* KV buffers for the whole context, allocated before the loop. */
    static float kv[2 * NL][2][KVH * (MAXCTX + 8) * HD];
    int cur = 0;
    int64_t ids[128];
    memcpy(ids, prompt, sizeof(int64_t) * 5);
    int64_t past = 0;
    int pos = 0, matched = 0;
    uint64_t allocs_decode = 0;
    const sn_exec_stats *st = sn_exec_get_stats(s->exec);
    int plans0 = st->n_plans;
    for (int step = 0; step < ng; step++) {
        int64_t S = step == 0 ? 5 : 1;
        sn_tensor in[1 + 2 * NL], out[1 + 2 * NL];
        memset(in, 0, sizeof in);
        in[0] = (sn_tensor){.dtype = SN_I64, .rank = 2, .dims = {1, S}, .data = ids + pos};
        for (int l = 0; l < 2 * NL; l++)
            in[1 + l] = (sn_tensor){.dtype = SN_F32, .rank = 4, .dims = {1, KVH, past, HD}, .data = kv[l][cur]};
        uint64_t a0 = snug_alloc_count();
        rc = sn_session_run(s, in, out, &err);
        if (step > 0)
            allocs_decode += snug_alloc_count() - a0;
        if (rc != SNUG_OK) {
            fprintf(stderr, "step %d: %s\n", step, err.msg);
            fails++;
            break;
        }
        const float *lg = (const float *)out[0].data + (S - 1) * 512;
        int64_t best = 0;
        for (int v = 1; v < 512; v++)
            best = lg[v] > lg[best] ? v : best;
        matched += best == gold[step];
        if (best != gold[step])
            break;
        /* present -> next past (the other half of the double buffer) */
        for (int l = 0; l < 2 * NL; l++)
            memcpy(kv[l][1 - cur], out[1 + l].data, sn_tensor_nbytes(&out[1 + l]));
        cur = 1 - cur;
        pos += (int)S;
        ids[pos] = best;
        past += S;
    }
    printf("bounded plan: %d of %d greedy ids match; %llu allocations over %d decode steps; %d plan(s)\n", matched,
           ng, (unsigned long long)allocs_decode, ng - 1, st->n_plans);
    CHECK(matched == ng);
    CHECK(allocs_decode == 0);
    CHECK(st->n_plans == plans0);

    /* Beyond the bound: a clear error naming the input and the bound. */
    static int64_t many[80];
    sn_tensor in[1 + 2 * NL], out[1 + 2 * NL];
    memset(in, 0, sizeof in);
    in[0] = (sn_tensor){.dtype = SN_I64, .rank = 2, .dims = {1, 70}, .data = many};
    for (int l = 0; l < 2 * NL; l++)
        in[1 + l] = (sn_tensor){.dtype = SN_F32, .rank = 4, .dims = {1, KVH, 0, HD}, .data = kv[l][0]};
    rc = sn_session_run(s, in, out, &err);
    CHECK(rc == SNUG_ERR_RANGE && strstr(err.msg, "input 'input_ids'") && strstr(err.msg, "bound 64"));
    sn_session_close(s);
    snug_options_free(opt);

    /* Bad bounds and static allocation. */
    const char *bad[][3] = {
        {"session.max_shape_override", "nope:[1,2]", "'nope' is not an input"},
        {"session.max_shape_override", "input_ids:[1,2,3]", "rank 2, the bound 3"},
        {"session.max_shape_override", "input_ids:[2,8]", "dim 0 is fixed at 1"},
        {"snug.static_allocation", "1", "give its bound in session.max_shape_override"},
        {"snug.static_allocation", "yes", "not 0 or 1"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        opt = snug_options_new();
        snug_options_set(opt, bad[k][0], bad[k][1]);
        rc = sn_session_open(FIX "stories260K_kv.onnx", opt, &s, &err);
        CHECK(rc != SNUG_OK && strstr(err.msg, bad[k][2]));
        if (rc == SNUG_OK)
            sn_session_close(s);
        else if (!strstr(err.msg, bad[k][2]))
            fprintf(stderr, "case %zu: %s\n", k, err.msg);
        snug_options_free(opt);
    }
    /* A data-dependent shape (NonZero) cannot be planned statically. */
    opt = snug_options_new();
    snug_options_set(opt, "snug.static_allocation", "1");
    rc = sn_session_open("/usr/share/libonnx-testdata/data/node/test_nonzero_example/model.onnx", opt, &s, &err);
    CHECK(rc == SNUG_ERR_UNSUPPORTED && strstr(err.msg, "NonZero") && strstr(err.msg, "allocate at run time"));
    if (rc == SNUG_OK)
        sn_session_close(s);
    snug_options_free(opt);
    if (fails) {
        fprintf(stderr, "test_bounded: %d check(s) failed\n", fails);
        return 1;
    }
    printf("test_bounded: ok\n");
    return 0;
}
