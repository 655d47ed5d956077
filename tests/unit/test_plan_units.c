/* Planning building blocks without a model: MurmurHash3 x86_128 against
 * vectors from an independent Python implementation (tests/plan/murmur3_ref.py;
 * the quick-brown-fox vector is also the published one), node-stats keys as
 * ONNX Runtime forms them, stats-file parsing and its errors, ORT's
 * max_shape_override grammar, sizes, layer indices from names, and the
 * residency of weight streaming under a host budget. */
#include "graph/layers.h"
#include "onnx_test_util.h"
#include "plan/estimate.h"
#include "plan/murmur3.h"
#include "plan/plan.h"
#include "plan/stats.h"

typedef struct mvec {
    size_t len;
    uint32_t seed;
    uint32_t h[4];
} mvec;

static const char k_fox[] = "The quick brown fox jumps over the lazy dog";

static void test_murmur(void) {
    static const mvec v[] = {
        {0, 0u, {0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u}},
        {0, 1u, {0x88c4adecu, 0x54d201b9u, 0x54d201b9u, 0x54d201b9u}},
        {1, 0u, {0xa794933cu, 0x5556b01bu, 0x5556b01bu, 0x5556b01bu}},
        {3, 0u, {0x75cdc6d1u, 0xa2b006a5u, 0xa2b006a5u, 0xa2b006a5u}},
        {11, 42u, {0x345adfe4u, 0x5f36485eu, 0xb2c9e3afu, 0x25912b54u}},
        {16, 0u, {0xfb7d4409u, 0x36aed30au, 0x48ad1d9bu, 0x572b3bfdu}},
        {43, 0u, {0x2f1583c3u, 0xecee2c67u, 0x5d7bf66cu, 0xe5e91d2cu}},
        {512, 2538058380u, {0x8711166eu, 0x2233e705u, 0x244b8dc7u, 0x2c6fdbe5u}},
    };
    uint8_t big[512];
    for (int i = 0; i < 512; i++)
        big[i] = (uint8_t)i;
    const void *data[] = {"", "", "a", "abc", "hello world", "0123456789abcdef", k_fox, big};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        uint32_t h[4];
        sn_murmur3_x86_128(data[i], v[i].len, v[i].seed, h);
        for (int k = 0; k < 4; k++)
            if (h[k] != v[i].h[k]) {
                fprintf(stderr, "murmur vector %zu word %d: %08x, want %08x\n", i, k, h[k], v[i].h[k]);
                g_fails++;
            }
    }
    /* Unaligned input hashes the same. */
    uint8_t buf[64];
    memcpy(buf + 1, k_fox, 43);
    uint32_t a[4], b[4];
    sn_murmur3_x86_128(buf + 1, 43, 0, a);
    sn_murmur3_x86_128(k_fox, 43, 0, b);
    CHECK(!memcmp(a, b, sizeof a));
}

static void test_keys(void) {
    /* Keys from murmur3_ref.py's node_key: absent optional inputs hash as "". */
    const char *in1[] = {"x", "", "y"}, *out1[] = {"z"};
    sn_pnode p1 = {.name = "", .op_type = "Add", .domain = "", .n_in = 3, .n_out = 1, .inputs = in1, .outputs = out1};
    char key[256];
    sn_stats_node_key(&p1, key, sizeof key);
    CHECK(!strcmp(key, "Add_539842720151613851"));
    const char *in2[] = {"a", "w"}, *out2[] = {"o"};
    sn_pnode p2 = {.name = "/model/layers.0/attn/q_proj/MatMul", .op_type = "MatMul", .domain = "", .n_in = 2,
                   .n_out = 1, .inputs = in2, .outputs = out2};
    char *k2 = sn_stats_node_key_dup(&p2);
    CHECK(k2 && !strcmp(k2, "/model/layers.0/attn/q_proj/MatMul_8708668750484895776"));
    sn_free(k2);
    /* Truncation reports the full length. */
    CHECK(sn_stats_node_key(&p1, key, 5) == strlen("Add_539842720151613851") && strlen(key) == 4);
}

static void test_stats_parse(void) {
    sn_err err = {0};
    sn_stats *s = NULL;
    const char *ok = "#name,input_sizes,initializers_sizes,total_dynamic_sizes,total_temp_allocations\n"
                     "a_1,1,2,3,4\n"
                     "\n"
                     "# comment\n"
                     ",9,9,9,9\n"          /* no name: skipped, as ORT does */
                     "b_2, 10 ,20,30,40\r\n" /* blanks and CRLF tolerated */
                     "a_1,5,6,7,8";        /* repeated name, no final newline */
    CHECK_RC(sn_stats_parse(ok, strlen(ok), "ok.csv", &s, &err), 0, err, NULL);
    if (s) {
        CHECK(s->n == 3);
        CHECK(!strcmp(s->rows[1].name, "b_2") && s->rows[1].s.input == 10 && s->rows[1].s.temp == 40);
        CHECK(s->rows[1].line == 6 && s->rows[2].line == 7);
    }
    sn_stats_free(s);
    const char *four = "#h\na_1,1,2,3,4\nb_2,1,2,3\n";
    CHECK_RC(sn_stats_parse(four, strlen(four), "f.csv", &s, &err), SNUG_ERR_PARSE, err,
             "f.csv:3: expected 5 comma-separated fields, got 4");
    CHECK(s == NULL);
    const char *six = "a,1,2,3,4,5\n";
    CHECK_RC(sn_stats_parse(six, strlen(six), "g.csv", &s, &err), SNUG_ERR_PARSE, err, "g.csv:1: expected 5");
    const char *neg = "a,1,-2,3,4\n";
    CHECK_RC(sn_stats_parse(neg, strlen(neg), "h.csv", &s, &err), SNUG_ERR_PARSE, err,
             "h.csv:1: initializers_sizes '-2' is not a non-negative integer");
    const char *junk = "a,1,2,3x,4\n";
    CHECK_RC(sn_stats_parse(junk, strlen(junk), "i.csv", &s, &err), SNUG_ERR_PARSE, err, "total_dynamic_sizes");
    CHECK_RC(sn_stats_load("no/such/file.csv", NULL, &s, &err), SNUG_ERR_IO, err, "no/such/file.csv");
}

static void test_shape_override(void) {
    sn_err err = {0};
    sn_shape_override *o = NULL;
    int n = 0;
    CHECK_RC(sn_shape_override_parse(" input_ids : [ 8 , 4096 ] ;attention_mask:[8,4096]; scalar:[];", &o, &n, &err),
             0, err, NULL);
    CHECK(n == 3);
    if (n == 3) {
        CHECK(!strcmp(o[0].name, "input_ids") && o[0].rank == 2 && o[0].dims[0] == 8 && o[0].dims[1] == 4096);
        CHECK(!strcmp(o[1].name, "attention_mask") && o[1].rank == 2);
        CHECK(!strcmp(o[2].name, "scalar") && o[2].rank == 0);
    }
    sn_shape_override_free(o, n);
    /* ORT's scanner quirks, kept: an entry runs from after the previous ';'
     * to the first ';' after the next ']' (so "; ;b" names the input ";b"),
     * and a trailing comma inside the brackets ends the dims. */
    CHECK_RC(sn_shape_override_parse("a:[1]; ;b:[2,]", &o, &n, &err), 0, err, NULL);
    CHECK(n == 2 && !strcmp(o[1].name, ";b") && o[1].rank == 1 && o[1].dims[0] == 2);
    sn_shape_override_free(o, n);
    CHECK_RC(sn_shape_override_parse("", &o, &n, &err), 0, err, NULL);
    CHECK(n == 0 && !o);
    CHECK_RC(sn_shape_override_parse("a:[1,2", &o, &n, &err), SNUG_ERR_INVALID_ARG, err, "missing closing ']'");
    CHECK_RC(sn_shape_override_parse("a[1,2]", &o, &n, &err), SNUG_ERR_INVALID_ARG, err, "missing ':'");
    CHECK_RC(sn_shape_override_parse(" :[1]", &o, &n, &err), SNUG_ERR_INVALID_ARG, err, "empty name");
    CHECK_RC(sn_shape_override_parse("a:1,2]", &o, &n, &err), SNUG_ERR_INVALID_ARG, err, "enclosed in []");
    CHECK_RC(sn_shape_override_parse("a:[,1]", &o, &n, &err), SNUG_ERR_INVALID_ARG, err, "invalid dimension ''");
    CHECK_RC(sn_shape_override_parse("a:[1,x]", &o, &n, &err), SNUG_ERR_INVALID_ARG, err, "invalid dimension 'x'");
    CHECK_RC(sn_shape_override_parse("a:[0]", &o, &n, &err), SNUG_ERR_INVALID_ARG, err, "must be positive, got 0");
    CHECK_RC(sn_shape_override_parse("a:[1];a:[2]", &o, &n, &err), SNUG_ERR_INVALID_ARG, err, "duplicate entry for 'a'");
    CHECK_RC(sn_shape_override_parse("a:[99999999999999999999]", &o, &n, &err), SNUG_ERR_INVALID_ARG, err,
             "invalid dimension");
}

static void test_sizes(void) {
    sn_err err = {0};
    uint64_t v = 0;
    CHECK(sn_parse_size("1048576", &v, &err) == 0 && v == 1048576);
    CHECK(sn_parse_size("64K", &v, &err) == 0 && v == 65536);
    CHECK(sn_parse_size("2G", &v, &err) == 0 && v == 2ull << 30);
    CHECK(sn_parse_size("1.5g", &v, &err) == 0 && v == 3ull << 29);
    CHECK(sn_parse_size("300MiB", &v, &err) == 0 && v == 300ull << 20);
    CHECK(sn_parse_size("1T", &v, &err) == 0 && v == 1ull << 40);
    CHECK_RC(sn_parse_size("", &v, &err), SNUG_ERR_INVALID_ARG, err, "is not a size");
    CHECK_RC(sn_parse_size("12Q", &v, &err), SNUG_ERR_INVALID_ARG, err, "'12Q' is not a size");
    CHECK_RC(sn_parse_size("-1G", &v, &err), SNUG_ERR_INVALID_ARG, err, "not a size");
    CHECK_RC(sn_parse_size("1.5", &v, &err), SNUG_ERR_INVALID_ARG, err, "not a size");
    CHECK_RC(sn_parse_size("G", &v, &err), SNUG_ERR_INVALID_ARG, err, "not a size");
    CHECK_RC(sn_parse_size("99999999999T", &v, &err), SNUG_ERR_INVALID_ARG, err, "too large");
}

static void test_layer_names(void) {
    bool fin;
    CHECK(sn_layer_from_name("/model/layers.12/attn/q_proj/MatMul", &fin) == 12 && !fin);
    CHECK(sn_layer_from_name("model/layers.3/self_attn/Reshape", &fin) == 3);
    CHECK(sn_layer_from_name("model.layers.7.mlp.down_proj.weight", &fin) == 7);
    CHECK(sn_layer_from_name("/transformer/h.4/attn/c_attn/Gemm", &fin) == 4);
    CHECK(sn_layer_from_name("encoder.layer.2.output.dense", &fin) == 2);
    CHECK(sn_layer_from_name("/decoder/decoder.layers.5/fc1/MatMul", &fin) == 5);
    CHECK(sn_layer_from_name("blocks.0.attn", &fin) == 0);
    CHECK(sn_layer_from_name("/model/layers.30/final_norm_layernorm/SkipLayerNorm", &fin) == 30 && fin);
    CHECK(sn_layer_from_name("/model/embed_tokens/Gather", &fin) == -1);
    CHECK(sn_layer_from_name("graph.0/Add", &fin) == -1);     /* "h." inside a word */
    CHECK(sn_layer_from_name("layers.x/Add", &fin) == -1);    /* no digits */
    CHECK(sn_layer_from_name("layers.1x/Add", &fin) == -1);   /* digits not ending the token */
    CHECK(sn_layer_from_name("onnx::MatMul_123", &fin) == -1);
    CHECK(sn_layer_from_name(NULL, &fin) == -1);
}

/* sn_plan_residency: the earliest layers resident, the rest streamed
 * through depth slots of the largest streamed layer, the figures exact. */
static void test_residency(void) {
    sn_err err = {0};
    sn_plan_stream st;
    const uint64_t lb[6] = {100, 100, 100, 100, 300, 100}; /* layer 4 the largest */
    /* no budget, or everything fits: nothing streams */
    CHECK(sn_plan_residency(lb, 6, 40, 30, 30, 0, 2, &st, &err) == SNUG_OK && st.first_layer == 6 &&
          st.total == 900 && st.resident_weights == 800);
    CHECK(sn_plan_residency(lb, 6, 40, 30, 30, 900, 2, &st, &err) == SNUG_OK && st.first_layer == 6);
    /* 899: layer 5 streams (slot 100 x 2): 100 + 700 + 200 = 1000 > 899; layers 4-5 (slot 300):
     * 100 + 400 + 600 = 1100; 3-5: 100 + 300 + 600; 2-5: 100 + 200 + 600; 1-5: 100 + 100 + 600
     * = 800 fits */
    CHECK(sn_plan_residency(lb, 6, 40, 30, 30, 899, 2, &st, &err) == SNUG_OK && st.first_layer == 1 &&
          st.slot_bytes == 300 && st.staging_bytes == 600 && st.resident_weights == 100 &&
          st.streamed_bytes == 700 && st.total == 800 && st.minimum == 700 && st.fixed == 100 &&
          st.fixed_act == 40 && st.fixed_kv == 30);
    /* exactly the minimum: every layer streams */
    CHECK(sn_plan_residency(lb, 6, 40, 30, 30, 700, 2, &st, &err) == SNUG_OK && st.first_layer == 0 &&
          st.total == 700);
    /* one byte less: an error saying the minimum and its parts */
    CHECK_RC(sn_plan_residency(lb, 6, 40, 30, 30, 699, 2, &st, &err), SNUG_ERR_OOM, err,
             "the plan needs at least 700 bytes (activations 40, KV cache 30,");
    /* three slots: what fit in two no longer does (the slots of the largest layer, 300, are
     * streamed whatever else is) */
    CHECK_RC(sn_plan_residency(lb, 6, 40, 30, 30, 899, 3, &st, &err), SNUG_ERR_OOM, err,
             "through 3 staging slots, the plan needs at least 1000 bytes");
    CHECK(sn_plan_residency(lb, 6, 40, 30, 30, 900, 3, &st, &err) == SNUG_OK && st.first_layer == 6 &&
          st.total == 900); /* all resident: the ring would cost more than it saves */
    /* a depth below two is two */
    CHECK(sn_plan_residency(lb, 6, 0, 0, 0, 850, 1, &st, &err) == SNUG_OK && st.depth == 2);
}

int main(void) {
    test_murmur();
    test_keys();
    test_stats_parse();
    test_shape_override();
    test_sizes();
    test_layer_names();
    test_residency();
    return test_done("test_plan_units");
}
