/* The public views of include/snug.h (models, values, plans, node stats,
 * estimates, the decode loop, the op table) against the internal values
 * they wrap, on stories260K: every figure a client reads must be the one
 * the library holds, so each check compares the public answer with the
 * internal one (or with a fixed fact of the fixture), and fails when a
 * field is dropped, swapped or mistranslated. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec/session.h"
#include "graph/layers.h"
#include "genai/kvloop.h"
#include "ops/op.h"
#include "plan/estimate.h"
#include "plan/stats.h"

static int fails;
#define CHECK(c)                                                               \
    do {                                                                       \
        if (!(c)) {                                                            \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
            fails++;                                                           \
        }                                                                      \
    } while (0)

#define MODEL "../shared/fixtures/stories260K/stories260K_kv.onnx"

static int64_t g_ids[5] = {1, 403, 407, 261, 378}; /* a prompt; 432 follows it greedily */

/* Layers from the structure alone: with every node and value name gone (an
 * export that keeps none), the repeated blocks of weights give the same 5
 * layers, each node reading a weight in the layer its name gave, and the
 * others within one layer of it (the boundary may fall a few weightless
 * nodes earlier: a norm's reduction before its weight). */
static void check_layers_unnamed(sn_session *s) {
    sn_graph *g = s->graph;
    int nn = g->n_nodes, nv = g->n_values;
    int *named = malloc(sizeof *named * (size_t)nn);
    const sn_pnode **keep = malloc(sizeof *keep * (size_t)nn);
    sn_pnode *bare = malloc(sizeof *bare * (size_t)nn);
    const char **vnames = malloc(sizeof *vnames * (size_t)nv);
    for (int i = 0; i < nn; i++) {
        named[i] = g->nodes[i].layer;
        keep[i] = g->nodes[i].p;
        bare[i] = *keep[i];
        bare[i].name = "";
        g->nodes[i].p = &bare[i];
    }
    for (int v = 0; v < nv; v++) {
        vnames[v] = g->values[v].name;
        if (!(g->values[v].flags & (SN_VAL_INPUT | SN_VAL_OUTPUT)))
            g->values[v].name = "";
    }
    sn_layer_info li;
    sn_err err = {0};
    CHECK(sn_layers_discover(g, &li, &err) == SNUG_OK);
    CHECK(li.n_layers == s->layers.n_layers && li.n_named == 0 && li.n_valname == 0 && li.n_struct > 0);
    int weight_same = 0, weights = 0, near = 0;
    for (int i = 0; i < nn; i++) {
        bool w = false;
        for (int k = 0; k < g->nodes[i].n_in; k++)
            w |= g->nodes[i].in[k] >= 0 && (g->values[g->nodes[i].in[k]].flags & SN_VAL_INIT);
        if (w && named[i] >= 0 && named[i] < li.n_layers)
            weights++, weight_same += g->nodes[i].layer == named[i];
        near += abs(g->nodes[i].layer - named[i]) <= 1;
    }
    CHECK(weights > 0 && weight_same == weights && near == nn);
    for (int i = 0; i < nn; i++)
        g->nodes[i].p = keep[i];
    for (int v = 0; v < nv; v++)
        g->values[v].name = vnames[v];
    CHECK(sn_layers_discover(g, &li, &err) == SNUG_OK && li.n_struct == 0);
    for (int i = 0; i < nn; i++)
        CHECK(g->nodes[i].layer == named[i]);
    free(named), free(keep), free(bare), free(vnames);
}

/* The model: its info, inputs with symbolic dims, nodes and layers, against
 * the session's graph. */
static void check_model(const snug_model *m, const sn_session *s) {
    const sn_graph *g = s->graph;
    snug_model_info mi;
    snug_model_get_info(m, &mi);
    CHECK(mi.n_inputs == g->n_inputs && mi.n_outputs == g->n_outputs && mi.n_nodes == g->n_nodes);
    CHECK(mi.parameters == 297170 && mi.n_initializers == s->model->graph->n_init);
    CHECK(mi.weight_bytes == s->model->weight_bytes && mi.ir_version == 8);
    uint64_t rd, ga;
    sn_graph_weight_use(g, &rd, &ga);
    CHECK(mi.weight_bytes_read == rd && mi.weight_bytes_gathered == ga && ga > 0);
    CHECK(!strcmp(mi.producer_name, "llama2c-to-onnx-probe") && !strcmp(mi.dir, s->model->dir));
    const char *dom = NULL;
    int64_t ver = 0;
    CHECK(snug_model_opset(m, 0, &dom, &ver) == SNUG_OK && dom && !dom[0] && ver == 17);
    CHECK(snug_model_opset(m, mi.n_opsets, &dom, &ver) == SNUG_ERR_RANGE);
    CHECK(mi.n_dims == g->n_syms);
    for (int i = 0; i < mi.n_dims; i++)
        CHECK(!strcmp(snug_model_dim_name(m, i), g->syms[i]));

    snug_value_info v;
    CHECK(snug_model_input(m, 1, &v) == SNUG_OK); /* past_key_values.0.key [1, 4, past_sequence_length, 8] */
    CHECK(!strcmp(v.name, "past_key_values.0.key") && v.kind == SNUG_KIND_TENSOR && v.dtype == SNUG_FLOAT);
    CHECK(v.rank == 4 && v.dims[0] == 1 && v.dims[1] == 4 && v.dims[2] == -1 && v.dims[3] == 8);
    CHECK(v.dim_names[2] && !strcmp(v.dim_names[2], "past_sequence_length") && !v.dim_names[1]);
    CHECK(snug_model_output(m, 0, &v) == SNUG_OK && !strcmp(v.name, "logits") && v.dims[2] == 512);
    CHECK(v.dim_names[1] && !strcmp(v.dim_names[1], "sequence_length"));
    CHECK(snug_model_input(m, mi.n_inputs, &v) == SNUG_ERR_RANGE);

    snug_layer_map lm;
    snug_model_layers(m, &lm);
    CHECK(lm.n_layers == 5 && lm.n_layers == s->layers.n_layers && lm.nodes_named == s->layers.n_named);
    CHECK(lm.nodes_from_value_names == s->layers.n_valname && lm.nodes_from_neighbours == s->layers.n_filled);
    CHECK(lm.nodes_pre == s->layers.n_pre && lm.nodes_post == s->layers.n_post);
    int named = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        snug_node_info n;
        CHECK(snug_model_node(m, i, &n) == SNUG_OK);
        CHECK(!strcmp(n.name, g->nodes[i].p->name) && !strcmp(n.op, g->nodes[i].p->op_type));
        CHECK(!strcmp(n.domain, g->nodes[i].p->domain) && n.layer == g->nodes[i].layer);
        named += n.layer >= 0 && n.layer < lm.n_layers;
    }
    CHECK(named == g->n_nodes - lm.nodes_pre - lm.nodes_post);
    /* past_key_values.3.key is read first inside layer 3; input_ids only
     * by the embedding (pre). */
    CHECK(snug_model_input_layer(m, 7) == 3 && snug_model_input_layer(m, 0) == -1);

    snug_op_count h[64];
    int total = 0, nh = snug_model_op_counts(m, h, 64, &total), sum = 0, matmuls = 0;
    for (int k = 0; k < nh; k++)
        sum += h[k].count;
    for (int i = 0; i < g->n_nodes; i++)
        matmuls += !strcmp(g->nodes[i].p->op_type, "MatMul");
    CHECK(total == g->n_nodes && sum == total && nh > 10);
    for (int k = 0; k < nh; k++)
        if (!strcmp(h[k].op, "MatMul"))
            CHECK(h[k].count == matmuls && matmuls > 0);
    CHECK(snug_model_op_counts(m, h, 2, NULL) == 2); /* capped */

    snug_dim b[2] = {{"past_sequence_length", 5}, {"sequence_length", 2}};
    int64_t x = 0;
    CHECK(snug_dim_eval("past_sequence_length + sequence_length", b, 2, &x) == SNUG_OK && x == 7);
    CHECK(snug_dim_eval("total_sequence_length", b, 2, &x) == SNUG_ERR_INVALID_ARG);
    char key[512], want[512];
    sn_stats_node_key(g->nodes[3].p, want, sizeof want);
    CHECK(snug_model_node_stats_key(m, 3, key, sizeof key) == strlen(want) && !strcmp(key, want));
}

/* Values: made, filled, written and read back; a run with them gives the
 * dense API's logits. */
static void check_values(snug_session *ps, const char *dir) {
    sn_session *s = (sn_session *)ps;
    const snug_model *m = snug_session_model(ps);
    snug_value *in[11] = {0};
    int64_t d_ids[2] = {1, 5}, d_kv[4] = {1, 4, 0, 8};
    CHECK(snug_value_new_input(m, 0, 2, d_ids, &in[0]) == SNUG_OK);
    for (int i = 0; i < 5; i++)
        CHECK(snug_value_set_f64(in[0], i, (double)g_ids[i]) == SNUG_OK);
    CHECK(snug_value_set_f64(in[0], 5, 1.0) == SNUG_ERR_RANGE && snug_value_count(in[0]) == 5);
    for (int i = 1; i < 11; i++)
        CHECK(snug_value_new(SNUG_FLOAT, 4, d_kv, &in[i]) == SNUG_OK);
    snug_tensor t;
    snug_value_get_tensor(in[0], &t);
    CHECK(t.dtype == SNUG_INT64 && t.rank == 2 && t.dims[1] == 5 && ((int64_t *)t.data)[4] == 378);

    /* .pb and .npy round trips */
    char pb[512], npy[512], err[1024];
    snprintf(pb, sizeof pb, "%s/ids.pb", dir);
    snprintf(npy, sizeof npy, "%s/ids.npy", dir);
    snug_value *back = NULL;
    CHECK(snug_value_write(in[0], "input_ids", pb, err, sizeof err) == SNUG_OK);
    CHECK(snug_value_read(m, 0, pb, &back, err, sizeof err) == SNUG_OK && back);
    CHECK(back && snug_value_count(back) == 5 && snug_value_get_f64(back, 2) == 407.0);
    snug_value_free(back);
    back = NULL;
    CHECK(snug_value_write(in[0], "input_ids", npy, err, sizeof err) == SNUG_OK);
    CHECK(snug_value_read(NULL, -1, npy, &back, err, sizeof err) == SNUG_OK && back);
    CHECK(back && snug_value_kind(back) == SNUG_KIND_TENSOR && snug_value_get_f64(back, 4) == 378.0);
    snug_value_free(back);
    CHECK(snug_value_read(m, 0, "/nonexistent/x.pb", &back, err, sizeof err) == SNUG_ERR_IO && !back);
    CHECK(strstr(err, "/nonexistent/x.pb") != NULL);

    /* strings keep copies */
    snug_value *sv = NULL;
    int64_t two = 2;
    CHECK(snug_value_new(SNUG_STRING, 1, &two, &sv) == SNUG_OK);
    char word[8] = "snug";
    CHECK(snug_value_set_string(sv, 1, word, 4) == SNUG_OK);
    word[0] = 'X';
    size_t len = 0;
    const char *got = snug_value_get_string(sv, 1, &len);
    CHECK(got && len == 4 && !memcmp(got, "snug", 4) && isnan(snug_value_get_f64(sv, 1)));
    CHECK(snug_value_set_f64(sv, 0, 1.0) == SNUG_ERR_TYPE);
    snug_value_free(sv);

    /* a run with values against the dense API on the same inputs */
    const snug_value *out[11];
    CHECK(snug_session_run_values(ps, (const snug_value *const *)in, 3, out, 11) == SNUG_ERR_INVALID_ARG);
    CHECK(snug_session_run_values(ps, (const snug_value *const *)in, 11, out, 11) == SNUG_OK);
    snug_tensor lg;
    snug_value_get_tensor(out[0], &lg);
    CHECK(lg.dtype == SNUG_FLOAT && lg.rank == 3 && lg.dims[1] == 5 && lg.dims[2] == 512);
    CHECK(lg.data == s->api_out[0].data && snug_value_count(out[0]) == 5 * 512);
    const float *row = (const float *)lg.data + 4 * 512;
    int best = 0;
    for (int k = 1; k < 512; k++)
        best = row[k] > row[best] ? k : best;
    CHECK(best == 432);
    CHECK(snug_value_get_f64(out[0], 4 * 512 + 432) == (double)row[432]);
    snug_value_free((snug_value *)out[0]); /* the session's: left alone */
    for (int i = 0; i < 11; i++)
        snug_value_free(in[i]);
}

/* The plan as a value against sn_exec_plan_value, its JSON byte for byte,
 * node stats against sn_stats_from_plan through a file round trip, the
 * estimate against sn_estimate_nodes. */
static void check_plan(snug_session *ps, const char *dir) {
    sn_session *s = (sn_session *)ps;
    const sn_graph *g = s->graph;
    char err[1024];
    snug_tensor shapes[11];
    memset(shapes, 0, sizeof shapes);
    shapes[0] = (snug_tensor){SNUG_INT64, 2, {1, 6}, NULL};
    for (int i = 1; i < 11; i++)
        shapes[i] = (snug_tensor){SNUG_FLOAT, 4, {1, 4, 3, 8}, NULL};
    CHECK(snug_session_plan(ps, shapes, 2) == SNUG_ERR_INVALID_ARG);
    CHECK(snug_session_plan(ps, shapes, 11) == SNUG_OK);
    snug_plan *p = NULL;
    sn_plan *ip = NULL;
    sn_err e = {0};
    CHECK(snug_plan_new(ps, &p) == SNUG_OK && p);
    CHECK(sn_exec_plan_value(s->exec, &ip, &e) == SNUG_OK);
    if (!p || !ip)
        return;
    snug_plan_info pi;
    snug_plan_get_info(p, &pi);
    CHECK(pi.n_values == ip->n_values && pi.n_nodes == ip->n_nodes && pi.n_buffers == ip->n_buffers);
    CHECK(pi.n_static == ip->n_static && pi.n_folded == ip->n_folded && pi.n_inplace == ip->n_inplace);
    CHECK(pi.folded_bytes == ip->folded_bytes && pi.threads == ip->threads && pi.n_inputs == 11);
    int arena = 0;
    for (int v = 0; v < ip->n_values; v++) {
        snug_plan_value pv;
        const sn_plan_value *iv = &ip->values[v];
        CHECK(snug_plan_get_value(p, v, &pv) == SNUG_OK);
        CHECK(pv.storage == (int)iv->storage && pv.buffer == iv->buffer && pv.offset == iv->offset);
        CHECK(pv.size == iv->size && pv.alias == iv->alias && pv.first == iv->first && pv.last == iv->last);
        CHECK(pv.released == iv->released && pv.producer == g->values[v].producer);
        CHECK(pv.dtype == (int)iv->info.dtype && pv.rank == iv->info.rank && !strcmp(pv.name, g->values[v].name));
        CHECK(pv.rank < 1 || pv.dims[pv.rank - 1] == iv->info.dims[iv->info.rank - 1]);
        CHECK(snug_plan_find_value(p, pv.name) == v);
        arena += pv.storage == SNUG_STORE_ARENA;
    }
    CHECK(arena > 0 && snug_plan_get_value(p, ip->n_values, &(snug_plan_value){0}) == SNUG_ERR_RANGE);
    for (int i = 0; i < ip->n_nodes; i++) {
        snug_plan_node pn;
        const sn_plan_node *in = &ip->nodes[i];
        CHECK(snug_plan_get_node(p, i, &pn) == SNUG_OK);
        CHECK(pn.mode == (int)in->mode && pn.group == in->group && pn.workspace == in->workspace);
        CHECK(pn.ws_buffer == in->ws_buffer && pn.ws_offset == in->ws_offset && pn.layer == in->layer);
        CHECK(pn.state_bytes == in->state_bytes && !strcmp(pn.op, g->nodes[i].p->op_type));
    }
    snug_plan_buffer pb;
    CHECK(snug_plan_get_buffer(p, 0, &pb) == SNUG_OK && pb.size == ip->buffers[0].size && pb.size > 0);
    CHECK(pb.lower_bound == ip->buffers[0].lower_bound && pb.lower_bound <= pb.size);
    CHECK(!strcmp(snug_plan_device(p, 0), ip->devices[0]) && !snug_plan_device(p, pi.n_devices));
    snug_tensor sh;
    CHECK(snug_plan_input_shape(p, 0, &sh) == SNUG_OK && sh.rank == 2 && sh.dims[1] == 6);
    CHECK(snug_plan_input_shape(p, 3, &sh) == SNUG_OK && sh.dims[2] == 3);
    snug_session_stats st;
    snug_session_get_stats(ps, &st);
    const sn_exec_stats *xst = sn_exec_get_stats(s->exec);
    CHECK(st.arena_bytes == xst->arena_bytes && st.lower_bound == xst->lower_bound && st.n_plans == xst->n_plans);
    CHECK(st.n_static == xst->n_static && st.n_grouped == xst->n_grouped && st.arena_bytes == pb.size);

    /* JSON, byte for byte the internal writer's */
    char *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    FILE *fa = open_memstream(&a, &na), *fb = open_memstream(&b, &nb);
    CHECK(snug_plan_write_json(p, fa) == SNUG_OK);
    sn_plan_write_json(ip, g, fb);
    fclose(fa);
    fclose(fb);
    CHECK(na > 100 && na == nb && !memcmp(a, b, na));
    free(a);
    free(b);

    /* node stats: the public figures, written and loaded back, match */
    int nn = g->n_nodes;
    snug_node_stats *ps_st = calloc((size_t)nn, sizeof *ps_st);
    sn_node_stats *is_st = calloc((size_t)nn, sizeof *is_st);
    CHECK(snug_plan_node_stats(p, ps_st, err, sizeof err) == SNUG_OK);
    CHECK(sn_stats_from_plan(g, ip, is_st, &e) == SNUG_OK);
    uint64_t init = 0;
    for (int i = 0; i < nn; i++) {
        CHECK(ps_st[i].input == is_st[i].input && ps_st[i].init == is_st[i].init);
        CHECK(ps_st[i].dynamic == is_st[i].dynamic && ps_st[i].temp == is_st[i].temp);
        init += ps_st[i].init;
    }
    CHECK(init > 0);
    char path[512];
    snprintf(path, sizeof path, "%s/stats.csv", dir);
    const snug_model *m = snug_session_model(ps);
    CHECK(snug_stats_write(path, m, ps_st, err, sizeof err) == SNUG_OK);
    snug_stats *stats = NULL;
    int unmatched = -1, missing = -1;
    CHECK(snug_stats_load("stats.csv", dir, &stats, err, sizeof err) == SNUG_OK && stats); /* against dir */
    CHECK(stats && snug_stats_match(stats, m, &unmatched, &missing, err, sizeof err) == SNUG_OK);
    if (stats) {
        CHECK(unmatched == 0 && missing == 0 && snug_stats_count(stats) == nn);
        CHECK(strstr(snug_stats_path(stats), "stats.csv") != NULL);
        for (int i = 0; i < nn; i++) {
            snug_stats_row row;
            int r = snug_stats_node_row(stats, i);
            CHECK(snug_stats_get_row(stats, r, &row) == SNUG_OK && row.node == i && row.line == r + 2);
            CHECK(row.s.init == ps_st[i].init && row.s.dynamic == ps_st[i].dynamic && row.s.temp == ps_st[i].temp);
        }
    }
    CHECK(snug_stats_load("/nonexistent/stats.csv", NULL, &(snug_stats *){NULL}, err, sizeof err) == SNUG_ERR_IO);

    /* estimates, with the stats as profile */
    snug_estimate *est = NULL;
    snug_estimate_opts eo = {stats, 0, NULL, NULL, SNUG_LOG_WARN};
    CHECK(snug_estimate_new(p, &eo, &est, err, sizeof err) == SNUG_OK && est);
    sn_estimate ie = {0};
    sn_stats *ist = NULL;
    int *node_row = calloc((size_t)nn, sizeof *node_row);
    CHECK(sn_stats_load(path, NULL, &ist, &e) == SNUG_OK);
    CHECK(ist && sn_stats_match(ist, g, node_row, NULL, NULL, &e) == SNUG_OK);
    for (int i = 0; stats && i < nn; i++)
        CHECK(snug_stats_node_row(stats, i) == node_row[i]);
    sn_estimate_opts ieo = {NULL, 1, ist, node_row, false, NULL};
    CHECK(sn_estimate_nodes(g, ip, &ieo, &ie, &e) == SNUG_OK);
    if (est) {
        snug_estimate_info ei;
        snug_estimate_get_info(est, &ei);
        CHECK(ei.n_nodes == nn && ei.weights_total == ie.weights_total && ei.weights_total > 0);
        CHECK(ei.n_level1_from_table == ie.n_l1_table && ei.n_level2_over == ie.n_l2_over);
        for (int k = 0; k < SNUG_WS_SOURCE_COUNT; k++)
            CHECK(ei.n_by_source[k] == ie.n_by_src[k]);
        CHECK(ei.n_by_source[SNUG_WS_PROFILE] + ei.n_by_source[SNUG_WS_MAX] > 0); /* the stats were read */
        for (int i = 0; i < nn; i++) {
            snug_node_estimate ne;
            const sn_node_est *in = &ie.nodes[i];
            CHECK(snug_estimate_get_node(est, i, &ne) == SNUG_OK);
            CHECK(ne.weights == in->weights && ne.weights_read == in->weights_read && ne.inputs == in->inputs);
            CHECK(ne.outputs == in->outputs && ne.folded == in->folded && ne.workspace == in->ws);
            CHECK(ne.ws_level1 == in->ws_l1 && ne.ws_level2 == in->ws_l2 && ne.ws_profile == in->ws_profile);
            CHECK(ne.source == (int)in->src && ne.has_level1 == in->has_l1 && ne.has_profile == in->has_profile);
        }
        CHECK(!strcmp(snug_ws_source_name(SNUG_WS_FALLBACK), "fallback"));
    }
    snug_estimate_free(est);
    sn_estimate_free(&ie);
    sn_stats_free(ist);
    free(node_row);
    snug_stats_free(stats);
    free(ps_st);
    free(is_st);
    sn_plan_free(ip);
    snug_plan_free(p);
}

/* The decode loop against the internal one on a second session: the same
 * info, the same logits bit for bit, the same memory figures. */
static void check_decoder(snug_session *planned) {
    sn_err e = {0};
    sn_session *s2 = NULL;
    sn_kvloop *il = NULL;
    snug_decoder *d = NULL, *d2 = NULL;
    char err[1024];
    snug_session *ps = NULL;
    /* the cache is planned with the session's first plan: not after it */
    CHECK(snug_decoder_new(planned, 32, 0, &d2) == SNUG_ERR_INVALID_ARG && !d2);
    CHECK(strstr(snug_session_error(planned), "first plan") != NULL);
    CHECK(snug_session_create(MODEL, NULL, &ps, err, sizeof err) == SNUG_OK && ps);
    CHECK(ps && snug_decoder_new(ps, 32, 0, &d) == SNUG_OK && d);
    CHECK(ps && snug_decoder_new(ps, 32, 0, &d2) == SNUG_ERR_INVALID_ARG && !d2); /* one per session */
    CHECK(sn_session_open(MODEL, NULL, &s2, &e) == SNUG_OK && sn_kvloop_new(s2, 32, &il, &e) == SNUG_OK);
    if (!d || !il)
        goto done;
    snug_decoder_info di;
    const sn_kvloop_info *ii = sn_kvloop_get_info(il);
    snug_decoder_get_info(d, &di);
    CHECK(di.n_layers == 5 && di.n_layers == ii->n_layers && di.kv_heads == ii->kv_heads && di.head_dim == 8);
    CHECK(di.vocab == 512 && di.max_ctx == 32 && di.kv_bytes == ii->kv_bytes && di.shared_kv == ii->shared_kv);
    CHECK(di.has_position_ids == ii->has_position_ids && di.last_logits == ii->last_logits);
    const float *a = NULL, *b = NULL;
    CHECK(snug_decoder_prefill(d, g_ids, 5, &a) == SNUG_OK && sn_kvloop_prefill(il, g_ids, 5, &b, &e) == SNUG_OK);
    CHECK(a && b && !memcmp(a, b, 5 * 512 * sizeof *a));
    CHECK(snug_decoder_pos(d) == 5 && sn_argmax_f32(a + 4 * 512, 512) == 432);
    CHECK(snug_decoder_decode(d, 432, &a) == SNUG_OK && sn_kvloop_decode(il, 432, &b, &e) == SNUG_OK);
    CHECK(a && b && !memcmp(a, b, 512 * sizeof *a) && snug_decoder_pos(d) == 6);
    CHECK(snug_decoder_rewind(d, 5) == SNUG_OK && snug_decoder_pos(d) == 5);
    CHECK(snug_decoder_decode(d, 432, &a) == SNUG_OK && !memcmp(a, b, 512 * sizeof *a)); /* the same step again */
    CHECK(snug_decoder_prefill(d, g_ids, 40, NULL) != SNUG_OK && strlen(snug_session_error(ps)) > 0);
    snug_decoder_reset(d);
    CHECK(snug_decoder_pos(d) == 0);
    snug_memory mm, me;
    sn_kvloop_mem im, iest;
    snug_decoder_memory(d, &mm);
    sn_kvloop_memory(il, &im);
    CHECK(mm.kv == di.kv_bytes && mm.kv == im.kv && mm.arena == im.arena && mm.packed == im.packed);
    CHECK(mm.lower_bound == im.lower_bound && mm.driver == im.driver && mm.folded == im.folded);
    CHECK(mm.weights_copied == im.weights_copied && mm.total >= mm.kv + mm.arena);
    CHECK(snug_decoder_estimate(d, &me) == SNUG_OK && sn_kvloop_estimate(il, &iest));
    CHECK(me.kv == iest.kv && me.arena == iest.arena && me.packed == iest.packed && me.arena > 0);

    /* node timing: runs add to the caller's array, NULL stops */
    snug_model_info mi;
    snug_model_get_info(snug_session_model(ps), &mi);
    double *acc = calloc((size_t)mi.n_nodes, sizeof *acc), sum = 0, again = 0;
    snug_session_time_nodes(ps, acc);
    CHECK(snug_decoder_prefill(d, g_ids, 5, NULL) == SNUG_OK);
    snug_session_time_nodes(ps, NULL);
    for (int i = 0; i < mi.n_nodes; i++)
        sum += acc[i];
    CHECK(snug_decoder_decode(d, 432, NULL) == SNUG_OK);
    for (int i = 0; i < mi.n_nodes; i++)
        again += acc[i];
    CHECK(sum > 0 && again == sum);
    free(acc);
done:
    snug_decoder_free(d);
    snug_session_free(ps);
    sn_kvloop_free(il);
    sn_session_close(s2);
}

int main(void) {
    char err[1024];
    char dir[] = "/tmp/snug_test_api_views_XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }

    snug_model *m = NULL;
    CHECK(snug_model_open("/nonexistent/model.onnx", &m, err, sizeof err) == SNUG_ERR_IO && !m);
    CHECK(strstr(err, "/nonexistent/model.onnx") != NULL);
    snug_session *ps = NULL;
    CHECK(snug_session_create(MODEL, NULL, &ps, err, sizeof err) == SNUG_OK && ps);
    CHECK(snug_model_open(MODEL, &m, err, sizeof err) == SNUG_OK && m);
    if (!ps || !m)
        return 1;
    snug_plan *none = NULL;
    CHECK(snug_plan_new(ps, &none) == SNUG_ERR_INVALID_ARG && !none); /* no plan yet */
    CHECK(strstr(snug_session_error(ps), "no plan") != NULL);
    check_model(m, (const sn_session *)ps);
    check_model(snug_session_model(ps), (const sn_session *)ps);
    check_layers_unnamed((sn_session *)ps);
    snug_model_free((snug_model *)snug_session_model(ps)); /* the session's: left alone */
    snug_model_free(m);
    check_values(ps, dir);
    check_plan(ps, dir);
    check_decoder(ps);
    snug_session_free(ps);

    /* the op table and the option values */
    CHECK(snug_op_table_size() == sn_op_count() && snug_op_table_size() > 100);
    for (int i = 0; i < snug_op_table_size(); i++) {
        snug_op_def d;
        CHECK(snug_op_table_get(i, &d) == SNUG_OK);
        CHECK(!strcmp(d.name, sn_op_at(i)->name) && !strcmp(d.domain, sn_op_at(i)->domain));
        CHECK(d.since_version == sn_op_at(i)->since_version);
    }
    CHECK(snug_op_table_get(snug_op_table_size(), &(snug_op_def){0}) == SNUG_ERR_RANGE);
    CHECK(strlen(snug_gemm_kernel_name()) > 0);
    uint64_t bytes = 0;
    CHECK(snug_parse_size("1.5G", &bytes, err, sizeof err) == SNUG_OK && bytes == 3ull << 29);
    CHECK(snug_parse_size("lots", &bytes, err, sizeof err) == SNUG_ERR_INVALID_ARG && strstr(err, "lots"));
    snug_shape *sh = NULL;
    int n = 0;
    CHECK(snug_shapes_parse("a:[1,2]; b:[]", &sh, &n, err, sizeof err) == SNUG_OK && n == 2);
    CHECK(sh && !strcmp(sh[0].name, "a") && sh[0].rank == 2 && sh[0].dims[1] == 2 && sh[1].rank == 0);
    snug_shapes_free(sh, n);
    CHECK(snug_shapes_parse("a:[1,2", &sh, &n, err, sizeof err) != SNUG_OK && !sh && n == 0);
    CHECK(!strcmp(snug_dtype_name(SNUG_BFLOAT16), "bfloat16") && snug_dtype_class(SNUG_FLOAT16) == SNUG_DTYPE_FLOAT);
    CHECK(snug_dtype_class(SNUG_UINT8) == SNUG_DTYPE_INT && snug_dtype_class(SNUG_COMPLEX64) == SNUG_DTYPE_COMPLEX);
    CHECK(snug_dtype_class(SNUG_STRING) == SNUG_DTYPE_STRING && snug_dtype_class(0) == SNUG_DTYPE_INVALID);
    snug_tensor t4 = {21 /* int4 */, 2, {3, 3}, NULL}, big = {SNUG_FLOAT, 2, {INT64_MAX, 4}, NULL};
    CHECK(snug_tensor_nbytes(&t4) == 5 && snug_tensor_nbytes(&big) == SIZE_MAX);
    CHECK(!strcmp(snug_storage_name(SNUG_STORE_VIEW), "view"));
    CHECK(!strcmp(snug_node_mode_name(SNUG_MODE_FOLDED), "folded"));

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "test_api_views: could not remove %s\n", dir);
    if (fails) {
        fprintf(stderr, "test_api_views: %d check(s) failed\n", fails);
        return 1;
    }
    printf("test_api_views: ok\n");
    return 0;
}
