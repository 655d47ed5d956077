/* Graph validation and executor behaviour on small generated models:
 * cycles, undefined inputs, duplicate outputs and unknown ops give errors
 * naming the node; a static-shape model plans once and runs without heap
 * allocations; shapes that change re-plan; overflowing shapes are errors. */
#include "exec/exec.h"
#include "onnx_test_util.h"

typedef struct nodespec {
    const char *op, *name;
    const char *ins[4], *outs[3];
} nodespec;

/* A model with float inputs X[2,3] (and Y[2,3] when two_inputs) and the given
 * nodes; output Z. */
static int build(const nodespec *nodes, int n, bool two_inputs, const char *out, sn_model **m, sn_pbw *buf,
                 sn_err *err) {
    sn_pbw g = {0}, w = {0};
    for (int i = 0; i < n; i++) {
        sn_pbw nd = {0};
        tb_node(&nd, nodes[i].op, nodes[i].name, nodes[i].ins, nodes[i].outs);
        sn_pbw_msg(&g, 1, &nd);
        sn_pbw_free(&nd);
    }
    sn_pbw_str(&g, 2, "g");
    int64_t dims[2] = {2, 3};
    sn_pbw vi = {0};
    tb_value_info(&vi, "X", SN_F32, 2, dims);
    sn_pbw_msg(&g, 11, &vi);
    sn_pbw_free(&vi);
    if (two_inputs) {
        tb_value_info(&vi, "Y", SN_F32, 2, dims);
        sn_pbw_msg(&g, 11, &vi);
        sn_pbw_free(&vi);
    }
    tb_value_info(&vi, out, SN_F32, -1, NULL);
    sn_pbw_msg(&g, 12, &vi);
    sn_pbw_free(&vi);
    tb_model(&w, &g, NULL, 0);
    /* The model points into the buffer: the caller frees it after the model. */
    int rc = sn_model_load_buffer(w.buf, w.len, NULL, m, err);
    sn_pbw_free(&g);
    *buf = w;
    return rc;
}

static void expect_graph_error(const nodespec *nodes, int n, const char *out, int code, const char *sub) {
    sn_err err = {0};
    sn_model *m = NULL;
    sn_graph *g = NULL;
    sn_pbw buf;
    int rc = build(nodes, n, true, out, &m, &buf, &err);
    if (rc == SNUG_OK)
        rc = sn_graph_build(m, &g, &err);
    CHECK_RC(rc, code, err, sub);
    sn_graph_free(g);
    sn_model_free(m);
    sn_pbw_free(&buf);
}

int main(void) {
    /* Validation. */
    nodespec cyc[] = {{"Add", "a", {"X", "B"}, {"A"}}, {"Relu", "b", {"A"}, {"B"}}, {"Relu", "c", {"A"}, {"Z"}}};
    expect_graph_error(cyc, 3, "Z", SNUG_ERR_GRAPH, "cycle");
    nodespec undef[] = {{"Add", "adder", {"X", "nope"}, {"Z"}}};
    expect_graph_error(undef, 1, "Z", SNUG_ERR_GRAPH, "'adder' (Add) input 1 'nope' is not defined");
    nodespec dup[] = {{"Relu", "r1", {"X"}, {"Z"}}, {"Relu", "r2", {"Y"}, {"Z"}}};
    expect_graph_error(dup, 2, "Z", SNUG_ERR_GRAPH, "'r2' (Relu) output 'Z' is already produced");
    nodespec shadow[] = {{"Relu", "r1", {"X"}, {"Y"}}};
    expect_graph_error(shadow, 1, "Y", SNUG_ERR_GRAPH, "is already a graph input");
    nodespec unk[] = {{"FrobnicateOp", "f", {"X"}, {"Z"}}};
    expect_graph_error(unk, 1, "Z", SNUG_ERR_UNSUPPORTED, "unsupported op FrobnicateOp (domain 'ai.onnx', opset 17) at node 'f'");
    nodespec noout[] = {{"Relu", "r", {"X"}, {"Q"}}};
    expect_graph_error(noout, 1, "Z", SNUG_ERR_GRAPH, "graph output 'Z' is not produced");
    nodespec badshape[] = {{"MatMul", "mm", {"X", "Y"}, {"Z"}}};
    expect_graph_error(badshape, 1, "Z", SNUG_ERR_SHAPE, "mm");

    /* Static plan: one plan, no allocation per run, results right. */
    nodespec mlp[] = {{"Add", "add", {"X", "Y"}, {"S"}},
                      {"Relu", "relu", {"S"}, {"R"}},
                      {"Reshape", "flat", {"R", "shape"}, {"F"}},
                      {"Mul", "mul", {"R", "Y"}, {"Z"}}};
    /* shape comes from Shape(X) so the Reshape target is folded at plan time */
    nodespec mlp2[5] = {{"Shape", "shp", {"X"}, {"shape"}}, mlp[0], mlp[1], mlp[2], mlp[3]};
    sn_err err = {0};
    sn_model *m = NULL;
    sn_graph *g = NULL;
    sn_exec *ex = NULL;
    sn_pbw buf;
    int rc = build(mlp2, 5, true, "Z", &m, &buf, &err);
    if (rc == SNUG_OK)
        rc = sn_graph_build(m, &g, &err);
    if (rc == SNUG_OK)
        rc = sn_exec_new(g, NULL, NULL, &ex, &err);
    CHECK_RC(rc, SNUG_OK, err, NULL);
    if (rc == SNUG_OK) {
        float x[6] = {1, -2, 3, -4, 5, -6}, y[6] = {1, 1, 1, 1, 1, 1};
        sn_tensor in[2] = {{.dtype = SN_F32, .rank = 2, .dims = {2, 3}, .data = x},
                           {.dtype = SN_F32, .rank = 2, .dims = {2, 3}, .data = y}};
        sn_tensor out[1];
        /* A run never plans: the owner plans first. */
        CHECK_RC(sn_exec_run(ex, in, out, &err), SNUG_ERR_INVALID_ARG, err, "run without a plan (plan first)");
        CHECK_RC(sn_exec_plan(ex, in, &err), SNUG_OK, err, NULL);
        CHECK_RC(sn_exec_run(ex, in, out, &err), SNUG_OK, err, NULL);
        uint64_t a0 = snug_alloc_count();
        for (int r = 0; r < 5; r++)
            CHECK_RC(sn_exec_run(ex, in, out, &err), SNUG_OK, err, NULL);
        CHECK(snug_alloc_count() == a0);
        const sn_exec_stats *st = sn_exec_get_stats(ex);
        CHECK(st->n_plans == 1);
        CHECK(st->n_dynamic == 0);
        CHECK(st->n_folded == 1); /* Shape */
        float *z = out[0].data;
        float want[6] = {2, 0, 4, 0, 6, 0};
        for (int i = 0; i < 6; i++)
            CHECK(z[i] == want[i]);
        /* A changed input shape re-plans. */
        float x2[3] = {1, 2, 3}, y2[3] = {1, 1, 1};
        sn_tensor in2[2] = {{.dtype = SN_F32, .rank = 2, .dims = {1, 3}, .data = x2},
                            {.dtype = SN_F32, .rank = 2, .dims = {1, 3}, .data = y2}};
        rc = sn_exec_run(ex, in2, out, &err);
        /* X is declared [2,3]: the executor rejects a different shape. */
        CHECK_RC(rc, SNUG_ERR_SHAPE, err, "input 'X': dim 0 must be 2");
        /* Wrong dtype. */
        int32_t xi[6] = {0};
        sn_tensor in3[2] = {{.dtype = SN_I32, .rank = 2, .dims = {2, 3}, .data = xi}, in[1]};
        CHECK_RC(sn_exec_run(ex, in3, out, &err), SNUG_ERR_TYPE, err, "input 'X': expected float32, got int32");
    }
    sn_exec_free(ex);
    sn_graph_free(g);
    sn_model_free(m);
    sn_pbw_free(&buf);

    /* A shape whose byte size overflows is an error naming the node. */
    {
        nodespec big[] = {{"ConstantOfShape", "huge", {"dims"}, {"Z"}}};
        sn_pbw gr = {0}, w = {0}, nd = {0}, t = {0};
        tb_node(&nd, big[0].op, big[0].name, big[0].ins, big[0].outs);
        sn_pbw_msg(&gr, 1, &nd);
        sn_pbw_str(&gr, 2, "g");
        int64_t dv[3] = {(int64_t)1 << 40, (int64_t)1 << 40, 16}, d1 = 3;
        tb_tensor_raw(&t, "dims", SN_I64, 1, &d1, dv, sizeof dv);
        sn_pbw_msg(&gr, 5, &t);
        sn_pbw vi = {0};
        tb_value_info(&vi, "Z", SN_F32, -1, NULL);
        sn_pbw_msg(&gr, 12, &vi);
        tb_model(&w, &gr, NULL, 0);
        sn_model *bm = NULL;
        sn_graph *bg = NULL;
        sn_exec *be = NULL;
        rc = sn_model_load_buffer(w.buf, w.len, NULL, &bm, &err);
        if (rc == SNUG_OK)
            rc = sn_graph_build(bm, &bg, &err);
        if (rc == SNUG_OK)
            rc = sn_exec_new(bg, NULL, NULL, &be, &err);
        if (rc == SNUG_OK) {
            sn_tensor o[1];
            rc = sn_exec_plan(be, NULL, &err);
            if (rc == SNUG_OK)
                rc = sn_exec_run(be, NULL, o, &err);
        }
        CHECK_RC(rc, SNUG_ERR_RANGE, err, "huge");
        sn_exec_free(be);
        sn_graph_free(bg);
        sn_model_free(bm);
        sn_pbw_free(&gr);
        sn_pbw_free(&w);
        sn_pbw_free(&nd);
        sn_pbw_free(&t);
        sn_pbw_free(&vi);
    }
    return test_done("test_graph");
}
