/* Estimation, layers and node stats on the real stories260K model
 * (../shared/fixtures/stories260K): every row of a stats file that ONNX
 * Runtime 1.32 recorded for it (tests/plan/ort_stats_stories260K.csv, made by
 * tests/plan/gen_ort_stats.py) matches one node and every node has a row, so
 * our names and hashes are ORT's byte for byte; the weights count every
 * initializer once; every node's workspace has a source; the stats snug
 * writes read back to the same figures. */
#include "exec/session.h"
#include "graph/layers.h"
#include "onnx_test_util.h"
#include "plan/estimate.h"
#include "plan/stats.h"

#define FIX "../shared/fixtures/stories260K/"

/* The plan value on its own: every arena slot and workspace slot inside the
 * buffer, no two slots alive at one step overlapping (an in-place output
 * shares its input's slot: same offset and lifetime), the buffer at least
 * its lower bound and the largest total of slots alive at one step at most
 * it, views aliasing a value, every node's group leader at or before it. */
static void check_plan_value(const sn_graph *g, const sn_plan *p) {
    CHECK(p->n_values == g->n_values && p->n_nodes == g->n_nodes && p->n_buffers == 1);
    const sn_plan_buffer *b = &p->buffers[0];
    CHECK(b->size >= b->lower_bound && b->size > 0);
    typedef struct { size_t off, size; int first, last; } slot;
    slot *sl = calloc((size_t)(p->n_values + p->n_nodes) + 1, sizeof *sl);
    int ns = 0;
    for (int v = 0; v < p->n_values; v++) {
        const sn_plan_value *pv = &p->values[v];
        if (pv->storage == SN_STORE_VIEW)
            CHECK(pv->alias >= 0 && pv->alias < p->n_values);
        if (pv->storage != SN_STORE_ARENA)
            continue;
        CHECK(pv->buffer == 0 && pv->offset + pv->size <= b->size && pv->first <= pv->last);
        bool shared = false;
        for (int k = 0; k < ns && !shared; k++)
            shared = sl[k].off == pv->offset && sl[k].first == pv->first && sl[k].last == pv->last;
        if (!shared)
            sl[ns++] = (slot){pv->offset, pv->size, pv->first, pv->last};
    }
    for (int i = 0; i < p->n_nodes; i++) {
        const sn_plan_node *pn = &p->nodes[i];
        CHECK(pn->group >= 0 && pn->group <= i);
        if (pn->workspace) {
            CHECK(pn->ws_buffer == 0 && pn->ws_offset + pn->workspace <= b->size);
            sl[ns++] = (slot){pn->ws_offset, pn->workspace, pn->group, i};
        }
    }
    size_t peak = 0;
    for (int t = 0; t <= p->n_nodes; t++) {
        size_t live = 0;
        for (int k = 0; k < ns; k++)
            if (sl[k].first <= t && t <= sl[k].last)
                live += sl[k].size;
        peak = live > peak ? live : peak;
    }
    CHECK(peak <= b->size);
    int overlaps = 0;
    for (int i = 0; i < ns; i++)
        for (int j = i + 1; j < ns; j++) {
            bool time = !(sl[i].last < sl[j].first || sl[j].last < sl[i].first);
            bool mem = sl[i].off < sl[j].off + sl[j].size && sl[j].off < sl[i].off + sl[i].size;
            overlaps += time && mem && sl[i].size && sl[j].size;
        }
    CHECK(overlaps == 0);
    free(sl);
}

static void keep_warning(void *user, int level, const char *msg) {
    if (level == SNUG_LOG_WARN)
        snprintf(user, 512, "%s", msg);
}

int main(void) {
    snug_options *o = snug_options_new();
    snug_options_set(o, "snug.threads", "2");
    sn_err err = {0};
    sn_session *s = NULL;
    if (sn_session_open(FIX "stories260K_kv.onnx", o, &s, &err) != SNUG_OK) {
        fprintf(stderr, "open: %s\n", err.msg);
        return 1;
    }
    snug_options_free(o);
    sn_graph *g = s->graph;
    int nn = g->n_nodes;

    /* Layers: 5 named layers; the embedding and mask/rotary setup before,
     * the final norm and lm_head after. */
    sn_layer_info li;
    CHECK_RC(sn_layers_discover(g, &li, &err), 0, err, NULL);
    CHECK(li.n_layers == 5);
    CHECK(li.n_pre > 0 && li.n_post > 0);
    for (int i = 0; i < nn; i++) {
        const char *nm = g->nodes[i].p->name;
        if (strstr(nm, "/layers.3/"))
            CHECK(g->nodes[i].layer == 3);
        if (!strcmp(g->nodes[i].p->op_type, "Gather") && g->nodes[i].in[0] >= 0 &&
            strstr(g->values[g->nodes[i].in[0]].name, "embed"))
            CHECK(g->nodes[i].layer == -1);
        if (g->nodes[i].n_out && !strcmp(g->values[g->nodes[i].out[0]].name, "logits"))
            CHECK(g->nodes[i].layer == 5);
    }

    /* Plan a 4-token prefill from an empty cache. */
    sn_tensor in[16];
    memset(in, 0, sizeof in);
    CHECK(g->n_inputs == 11);
    in[0] = (sn_tensor){.kind = SN_KIND_TENSOR, .dtype = SN_I64, .rank = 2, .dims = {1, 4}};
    for (int i = 1; i < g->n_inputs && i < 16; i++)
        in[i] = (sn_tensor){.kind = SN_KIND_TENSOR, .dtype = SN_F32, .rank = 4, .dims = {1, 4, 0, 8}};
    CHECK_RC(sn_exec_plan(s->exec, in, &err), 0, err, NULL);

    /* Level 1 reserved before prepare, Level 2 declared by it: every
     * declaration within its reservation, and the check of the two says so
     * (a larger declaration: a warning naming the node, strict an error). */
    {
        sn_plan *pv = NULL;
        CHECK_RC(sn_exec_plan_value(s->exec, &pv, &err), 0, err, NULL);
        int reserved = 0, over = -1;
        for (int i = 0; pv && i < pv->n_nodes; i++) {
            const sn_plan_node *pn = &pv->nodes[i];
            if (pn->mode != SN_MODE_STATIC || !pn->has_reserve)
                continue;
            reserved++;
            CHECK(pn->workspace <= pn->ws_reserved);
            if (over < 0 && pn->ws_reserved)
                over = i;
        }
        CHECK(reserved > 100 && over >= 0);
        char said[512] = "";
        sn_logger lg = {.fn = keep_warning, .user = said, .level = SNUG_LOG_WARN};
        CHECK_RC(sn_plan_check_workspace(pv, g, true, &lg, &err), 0, err, NULL);
        CHECK(!said[0]);
        if (pv && over >= 0) {
            pv->nodes[over].workspace = pv->nodes[over].ws_reserved + 64;
            CHECK_RC(sn_plan_check_workspace(pv, g, false, &lg, &err), 0, err, NULL);
            CHECK(strstr(said, g->nodes[over].p->name) && strstr(said, "more than its Level-1 reservation"));
            CHECK_RC(sn_plan_check_workspace(pv, g, true, &lg, &err), SNUG_ERR_RANGE, err,
                     "(session.strict_workspace_verification)");
        }
        sn_plan_free(pv);
    }

    /* ORT's stats file: every row one node, every node one row. */
    sn_stats *ort = NULL;
    int *row = calloc((size_t)nn, sizeof *row), unmatched = -1, missing = -1;
    CHECK_RC(sn_stats_load("tests/plan/ort_stats_stories260K.csv", NULL, &ort, &err), 0, err, NULL);
    if (ort) {
        CHECK(ort->n == nn);
        CHECK_RC(sn_stats_match(ort, g, row, &unmatched, &missing, &err), 0, err, NULL);
        CHECK(unmatched == 0 && missing == 0);
        for (int r = 0; r < ort->n; r++)
            if (ort->rows[r].node < 0) {
                fprintf(stderr, "ORT row '%s' matches no node\n", ort->rows[r].name);
                g_fails++;
            }
    }

    /* Estimates without a profile: every initializer once, every node's
     * workspace from an estimator (no op here lacks one), and Level 2 never
     * above Level 1 for the ops this model uses. */
    sn_plan *pl = NULL;
    CHECK_RC(sn_exec_plan_value(s->exec, &pl, &err), 0, err, NULL);
    if (!pl)
        return test_done("test_plan_stories");
    check_plan_value(g, pl);
    sn_estimate est = {0};
    sn_estimate_opts eo = {NULL, 1, NULL, NULL, true, NULL};
    CHECK_RC(sn_estimate_nodes(g, pl, &eo, &est, &err), 0, err, NULL);
    CHECK(est.weights_total == s->model->weight_bytes);
    int total_src = 0;
    for (int k = 0; k < SN_WS_SOURCE_COUNT; k++)
        total_src += est.n_by_src[k];
    CHECK(total_src == nn);
    CHECK(est.n_by_src[SN_WS_FALLBACK] == 0 && est.n_by_src[SN_WS_PROFILE] == 0);
    CHECK(est.n_l2_over == 0);
    uint64_t outs = 0, read = 0;
    for (int i = 0; i < nn; i++) {
        outs += est.nodes[i].outputs;
        read += est.nodes[i].weights_read;
        CHECK(est.nodes[i].weights <= est.nodes[i].weights_read);
        CHECK(est.nodes[i].ws >= est.nodes[i].ws_l2);
    }
    CHECK(outs > 0 && read >= est.weights_total);
    /* logits [1,4,512] f32 are one node's output. */
    for (int i = 0; i < nn; i++)
        if (g->nodes[i].n_out && !strcmp(g->values[g->nodes[i].out[0]].name, "logits"))
            CHECK(est.nodes[i].outputs == 4 * 512 * 4);
    sn_estimate_free(&est);

    /* With ORT's profile every node has both figures: max(profile, L1). */
    sn_estimate_opts ep = {NULL, 1, ort, row, false, NULL};
    CHECK_RC(sn_estimate_nodes(g, pl, &ep, &est, &err), 0, err, NULL);
    CHECK(est.n_by_src[SN_WS_MAX] == nn);
    sn_estimate_free(&est);

    /* The stats our recorder gives: initializers once in all, and the file
     * written reads back to the same figures. */
    sn_node_stats *st = calloc((size_t)nn, sizeof *st);
    char **keys = calloc((size_t)nn, sizeof *keys);
    CHECK_RC(sn_stats_from_plan(g, pl, st, &err), 0, err, NULL);
    uint64_t init_sum = 0;
    for (int i = 0; i < nn; i++) {
        keys[i] = sn_stats_node_key_dup(g->nodes[i].p);
        init_sum += st[i].init;
    }
    CHECK(init_sum == s->model->weight_bytes);
    char path[] = "/tmp/snug_test_plan_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    CHECK_RC(sn_stats_write(path, nn, keys, st, &err), 0, err, NULL);
    sn_stats *back = NULL;
    CHECK_RC(sn_stats_load(path, NULL, &back, &err), 0, err, NULL);
    if (back) {
        CHECK(back->n == nn);
        CHECK_RC(sn_stats_match(back, g, row, &unmatched, &missing, &err), 0, err, NULL);
        CHECK(unmatched == 0 && missing == 0);
        for (int i = 0; i < nn; i++)
            CHECK(row[i] >= 0 && !memcmp(&back->rows[row[i]].s, &st[i], sizeof st[i]));
    }
    unlink(path);
    sn_stats_free(back);
    for (int i = 0; i < nn; i++)
        sn_free(keys[i]);
    free(keys);
    free(st);
    free(row);
    sn_stats_free(ort);
    sn_plan_free(pl);
    /* A run never plans: one with other shapes than the plan's is an
     * error naming the input and both shapes, not a silent plan. */
    {
        sn_tensor in2[16];
        memcpy(in2, in, sizeof in2);
        int64_t few[2] = {1, 2};
        in2[0].dims[1] = 2;
        in2[0].data = few;
        for (int i = 1; i < g->n_inputs; i++)
            in2[i].data = NULL;
        sn_tensor o2[16];
        int rc2 = sn_exec_run(s->exec, in2, o2, &err);
        CHECK_RC(rc2, SNUG_ERR_SHAPE, err, "input 'input_ids' is [1,2], the plan was made for [1,4]");
    }
    sn_session_close(s);
    return test_done("test_plan_stories");
}
