/* Golden test: greedy decoding of the real stories260K model, token by
 * token with the KV cache fed back, reproduces the 60 ids that llama2.c and
 * ONNX Runtime produce (../shared/fixtures/stories260K/greedy_ids.txt). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/session.h"

#define FIX "../shared/fixtures/stories260K/"

static int read_ids(const char *tag, int64_t *ids, int cap) {
    FILE *f = fopen(FIX "greedy_ids.txt", "r");
    if (!f)
        return -1;
    char line[8192];
    int n = -1;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, tag, strlen(tag)))
            continue;
        n = 0;
        char *p = line + strlen(tag);
        for (char *tok = strtok(p, " \n"); tok && n < cap; tok = strtok(NULL, " \n"))
            ids[n++] = atoll(tok);
    }
    fclose(f);
    return n;
}

int main(void) {
    int64_t prompt[64], gold[128];
    int np = read_ids("PROMPT ", prompt, 64), ng = read_ids("GEN ", gold, 128);
    if (np <= 0 || ng <= 0) {
        fprintf(stderr, "cannot read " FIX "greedy_ids.txt\n");
        return 1;
    }
    snug_options *o = snug_options_new();
    snug_options_set(o, "snug.threads", "2");
    sn_err err = {0};
    sn_session *s;
    if (sn_session_open(FIX "stories260K_kv.onnx", o, &s, &err) != SNUG_OK) {
        fprintf(stderr, "open: %s\n", err.msg);
        return 1;
    }
    snug_options_free(o);
    const sn_graph *g = s->graph;
    int nin = g->n_inputs, nout = g->n_outputs, n_layers = (nin - 1) / 2;
    sn_tensor in[32], out[32];
    float *kv[32] = {0}; /* owned copies of present.* fed back as past */
    int64_t ids[256];
    int n_ids = np, fails = 0;
    memcpy(ids, prompt, sizeof(int64_t) * (size_t)np);
    int64_t past = 0;
    int pos = 0; /* tokens fed so far */
    for (int step = 0; step < ng; step++) {
        int64_t S = step == 0 ? np : 1;
        memset(in, 0, sizeof in);
        in[0] = (sn_tensor){.kind = SN_KIND_TENSOR, .dtype = SN_I64, .rank = 2, .dims = {1, S}, .data = ids + pos};
        for (int l = 0; l < 2 * n_layers; l++)
            in[1 + l] = (sn_tensor){.kind = SN_KIND_TENSOR, .dtype = SN_F32, .rank = 4, .dims = {1, 4, past, 8},
                                    .data = kv[l]};
        if (sn_exec_replan_for(s->exec, in, SN_REPLAN_AUTO, &err) != SNUG_OK ||
            sn_exec_run(s->exec, in, out, &err) != SNUG_OK) {
            fprintf(stderr, "step %d: %s\n", step, err.msg);
            return 1;
        }
        const float *logits = (const float *)out[0].data + (S - 1) * out[0].dims[2];
        int64_t best = 0;
        for (int64_t v = 1; v < out[0].dims[2]; v++)
            if (logits[v] > logits[best])
                best = v;
        if (best != gold[step]) {
            fprintf(stderr, "step %d: got %lld, expected %lld\n", step, (long long)best, (long long)gold[step]);
            fails++;
            break;
        }
        pos += (int)S;
        ids[n_ids++] = best;
        past += S;
        for (int l = 0; l < 2 * n_layers && l + 1 < nout; l++) {
            size_t nb = sn_tensor_nbytes(&out[1 + l]);
            float *c = malloc(nb ? nb : 1);
            memcpy(c, out[1 + l].data, nb);
            free(kv[l]);
            kv[l] = c;
        }
    }
    for (int l = 0; l < 32; l++)
        free(kv[l]);
    printf("stories260K greedy: %d of %d ids match\n", fails ? -1 : ng, ng);
    sn_session_close(s);
    return fails ? 1 : 0;
}
