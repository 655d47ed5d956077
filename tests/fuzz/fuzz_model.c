/* libFuzzer targets over models from bytes (tests/fuzz/README.md), one
 * source built three times: FUZZ_STAGE 0 loads the protobuf (sn_model_load_
 * buffer), 1 also builds the graph, infers and plans it at its declared
 * shapes (symbolic dims 1..3 from the input's first byte), 2 also runs it
 * once on generated inputs. Every failure must be a status. */
#include <stdint.h>
#include <string.h>

#include "exec/exec.h"
#include "graph/graph.h"
#include "onnx/model.h"

#ifndef FUZZ_STAGE
#define FUZZ_STAGE 0
#endif

#if FUZZ_STAGE >= 1
/* A small budget: a mutant asking for gigabytes is refused, not run. */
#define FUZZ_BUDGET ((size_t)64 << 20)

static int fuzz_inputs(const sn_graph *g, int64_t sym, sn_tensor *in, void **own) {
    for (int i = 0; i < g->n_inputs; i++) {
        const sn_tensor *d = &g->values[g->inputs[i]].info;
        if (d->kind != SN_KIND_TENSOR || d->rank < 0 || !sn_dtype_valid(d->dtype) || d->dtype == SN_STRING)
            return -1;
        in[i] = *d;
        for (int k = 0; k < d->rank; k++)
            in[i].dims[k] = d->dims[k] < 0 ? sym : d->dims[k];
        size_t nb = sn_tensor_nbytes(&in[i]);
        if (sn_tensor_numel(&in[i]) < 0 || nb > ((size_t)1 << 20) || !(own[i] = sn_calloc(1, nb ? nb : 1)))
            return -1;
        in[i].data = own[i];
    }
    return 0;
}
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sn_err err = {0};
    sn_model *m = NULL;
    if (sn_model_load_buffer(data, size, NULL, &m, &err) != SNUG_OK)
        return 0;
#if FUZZ_STAGE >= 1
    sn_graph *g = NULL;
    sn_pool *pool = NULL;
    sn_exec *ex = NULL;
    sn_tensor *in = NULL, *out = NULL;
    void **own = NULL;
    if (sn_graph_build(m, &g, &err) != SNUG_OK || sn_pool_new(1, &pool, &err) != SNUG_OK ||
        sn_exec_new(g, pool, NULL, &ex, &err) != SNUG_OK)
        goto done;
    sn_limits lim = {FUZZ_BUDGET, 1000};
    sn_exec_set_limits(ex, &lim);
    in = sn_calloc((size_t)g->n_inputs + 1, sizeof *in);
    out = sn_calloc((size_t)g->n_outputs + 1, sizeof *out);
    own = sn_calloc((size_t)g->n_inputs + 1, sizeof *own);
    if (!in || !out || !own || fuzz_inputs(g, 1 + (size ? data[0] % 3 : 0), in, own))
        goto done;
#if FUZZ_STAGE == 1
    (void)sn_exec_plan(ex, in, &err);
#else
    (void)sn_exec_run(ex, in, out, &err);
#endif
done:
    for (int i = 0; own && i < g->n_inputs; i++)
        sn_free(own[i]);
    sn_free(own);
    sn_free(in);
    sn_free(out);
    sn_exec_free(ex);
    if (pool)
        sn_pool_free(pool);
    sn_graph_free(g);
#endif
    sn_model_free(m);
    return 0;
}
