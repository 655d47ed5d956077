/* Loader: protobuf reader, ModelProto decoding (stories260K and built
 * models), typed tensor fields, attributes, function inlining, the ONNX
 * test-data .pb formats and .npy. */
#include <math.h>

#include "onnx_test_util.h"

#define STORIES "../shared/fixtures/stories260K/stories260K_kv.onnx"
#define TESTDATA "/usr/share/libonnx-testdata/data/node"

/* ---- the wire reader ---------------------------------------------------- */

static void test_pb_reader(void) {
    sn_pbw w = {0};
    static const uint64_t vals[] = {0, 1, 127, 128, 300, 1ull << 63, UINT64_MAX};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++)
        sn_pbw_int(&w, 1, (int64_t)vals[i]);
    sn_pbw_fixed32(&w, 2, 0xdeadbeef);
    sn_pbw_fixed64(&w, 3, 0x0123456789abcdefull);
    sn_pbw_str(&w, 536870911, "max field");
    CHECK(!w.oom);
    sn_err err = {0};
    sn_pb r;
    sn_pb_field f;
    sn_pb_init(&r, w.buf, w.buf, w.len, "Test", &err);
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        CHECK(sn_pb_next(&r, &f) == 0 && f.num == 1 && f.wire == SN_PB_VARINT && f.v == vals[i]);
    }
    CHECK(sn_pb_next(&r, &f) == 0 && f.num == 2 && f.v == 0xdeadbeef);
    CHECK(sn_pb_next(&r, &f) == 0 && f.num == 3 && f.v == 0x0123456789abcdefull);
    CHECK(sn_pb_next(&r, &f) == 0 && f.num == 536870911 && f.len == 9 &&
          !memcmp(f.data, "max field", 9));
    CHECK(sn_pb_next(&r, &f) == 0 && f.num == 0);
    sn_pbw_free(&w);

    static const struct {
        const char *bytes;
        size_t n;
        const char *msg;
    } bad[] = {
        {"\x08\x80", 2, "at byte 0: truncated varint"},
        {"\x08\x01\x10\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 14, "at byte 2: truncated varint"},
        {"\x00\x01", 2, "invalid field number 0"},
        {"\x0b\x01", 2, "unsupported wire type 3"},
        {"\x08\x01\x0a\x05" "ab", 6, "at byte 2: length 5 of field 1 runs past end in Test"},
        {"\x0d\x01\x02", 3, "truncated 32-bit"},
        {"\x09\x01\x02\x03", 4, "truncated 64-bit"},
        {"\x80", 1, "truncated or overlong field tag"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sn_pb_init(&r, bad[i].bytes, bad[i].bytes, bad[i].n, "Test", &err);
        int rc;
        do
            rc = sn_pb_next(&r, &f);
        while (!rc && f.num);
        CHECK_RC(rc, SNUG_ERR_PARSE, err, bad[i].msg);
    }

    /* Packed and unpacked repeated values read the same. */
    sn_pbw p = {0}, packed = {0};
    for (int i = 0; i < 5; i++)
        sn_pbw_varint(&packed, (uint64_t)(i * 1000));
    sn_pbw_msg(&p, 4, &packed);
    sn_pbw_int(&p, 4, 77);
    uint64_t out[8];
    size_t n = 0, cnt = 0, c1;
    sn_pb_init(&r, p.buf, p.buf, p.len, "Test", &err);
    while (sn_pb_next(&r, &f) == 0 && f.num) {
        CHECK(sn_pb_count_varints(&r, &f, &c1) == 0);
        cnt += c1;
        CHECK(sn_pb_get_varints(&r, &f, out, 8, &n) == 0);
    }
    CHECK(cnt == 6 && n == 6 && out[3] == 3000 && out[5] == 77);
    sn_pbw_free(&p);
    sn_pbw_free(&packed);

    /* Nesting deeper than the limit is refused, not recursed into. */
    sn_pbw inner = {0};
    sn_pbw_int(&inner, 1, 1);
    for (int d = 0; d < SN_PB_MAX_DEPTH + 2; d++) {
        sn_pbw outer = {0};
        sn_pbw_msg(&outer, 1, &inner);
        sn_pbw_free(&inner);
        inner = outer;
    }
    sn_pb_init(&r, inner.buf, inner.buf, inner.len, "Test", &err);
    int rc = SNUG_OK;
    while (!rc) {
        rc = sn_pb_next(&r, &f);
        if (rc || !f.num || f.wire != SN_PB_LEN)
            break;
        sn_pb sub;
        rc = sn_pb_sub(&r, &f, "Test", &sub);
        r = sub;
    }
    CHECK_RC(rc, SNUG_ERR_PARSE, err, "nested deeper than");
    sn_pbw_free(&inner);
}

/* ---- stories260K --------------------------------------------------------- */

static void test_stories(void) {
    sn_model *m = NULL;
    sn_err err = {0};
    int rc = sn_model_load(STORIES, &m, &err);
    CHECK_RC(rc, SNUG_OK, err, NULL);
    if (rc)
        return;
    const sn_pgraph *g = m->graph;
    CHECK(m->ir_version == 8);
    CHECK(sn_model_opset(m, "") == 17 && sn_model_opset(m, "ai.onnx") == 17);
    CHECK(sn_model_opset(m, "com.microsoft") == -1);
    CHECK(g->n_node == 394 && g->n_init == 134);
    CHECK(g->n_input == 11 && g->n_output == 11);
    CHECK(!strcmp(g->inputs[0].name, "input_ids"));
    CHECK(g->inputs[0].type.kind == SN_TYPE_TENSOR && g->inputs[0].type.elem == SN_I64);
    CHECK(g->inputs[0].type.rank == 2 && g->inputs[0].type.dims[0] == 1 &&
          g->inputs[0].type.dims[1] == -1 &&
          !strcmp(g->inputs[0].type.dim_params[1], "sequence_length"));
    CHECK(!strcmp(g->inputs[1].name, "past_key_values.0.key"));
    CHECK(!strcmp(g->outputs[0].name, "logits"));
    CHECK(!strcmp(g->nodes[0].name, "/model/shape_ids") && !strcmp(g->nodes[0].op_type, "Shape"));
    CHECK(!strcmp(g->nodes[0].domain, ""));
    CHECK(!strcmp(g->inits[2].name, "emb"));
    CHECK(g->inits[2].t.dtype == SN_F32 && g->inits[2].t.rank == 2 && g->inits[2].t.dims[0] == 512 &&
          g->inits[2].t.dims[1] == 64);
    CHECK(m->weight_bytes == 1189760);
    CHECK(m->file_size == 1254000);
    CHECK(!strcmp(m->dir, "../shared/fixtures/stories260K"));
    /* Every initializer's bytes are the file's bytes at file_offset; small
     * misaligned ones were copied (aligned), large misaligned ones stay in
     * the map flagged as misaligned (sessions copy them), the rest point
     * into the map. */
    void *file;
    size_t len;
    CHECK(sn_file_read(STORIES, &file, &len, &err) == 0);
    uint64_t copied_bytes, copied = sn_model_copied_tensors(m, &copied_bytes);
    uint64_t n_borrowed = 0;
    for (int i = 0; i < g->n_init; i++) {
        const sn_init *in = &g->inits[i];
        CHECK(!in->external && in->nbytes == sn_tensor_nbytes(&in->t));
        CHECK(in->file_offset + in->nbytes <= len);
        CHECK(!memcmp((char *)file + in->file_offset, in->t.data, in->nbytes));
        bool aligned = (uintptr_t)in->t.data % sn_dtype_size(in->t.dtype) == 0;
        CHECK(aligned == !sn_init_misaligned(in));
        CHECK(aligned || in->nbytes >= SN_ALIGN_COPY_MAX);
        n_borrowed += (in->file_offset % sn_dtype_size(in->t.dtype)) == 0 || in->nbytes >= SN_ALIGN_COPY_MAX;
    }
    CHECK(copied + n_borrowed == (uint64_t)g->n_init && copied_bytes < m->weight_bytes);
    sn_free(file);
    sn_model_free(m);
    sn_model_free(NULL);
}

/* ---- typed data fields, attributes -------------------------------------- */

static void add_init(sn_pbw *graph, const sn_pbw *t) { sn_pbw_msg(graph, 5, t); }

static void test_typed_fields(void) {
    sn_pbw g = {0}, t = {0}, pk = {0};
    int64_t d3[] = {3}, d22[] = {2, 2};
    /* float: one packed field plus one unpacked value */
    tb_tensor_raw(&t, "f", SN_F32, 1, d3, NULL, 0);
    float fv[2] = {1.5f, -2.0f};
    sn_pbw_bytes(&t, 4, fv, sizeof fv);
    sn_pbw_float(&t, 4, 3.25f);
    add_init(&g, &t);
    sn_pbw_free(&t);
    /* int8 via int32_data, negative values sign-extended on the wire */
    tb_tensor_raw(&t, "i8", SN_I8, 1, d3, NULL, 0);
    sn_pbw_int(&t, 5, -1);
    sn_pbw_int(&t, 5, 127);
    sn_pbw_int(&t, 5, -128);
    add_init(&g, &t);
    sn_pbw_free(&t);
    /* float16 bits via packed int32_data */
    tb_tensor_raw(&t, "h", SN_F16, 2, d22, NULL, 0);
    for (int i = 0; i < 4; i++)
        sn_pbw_varint(&pk, sn_f32_to_f16((float)i + 0.5f));
    sn_pbw_msg(&t, 5, &pk);
    sn_pbw_free(&pk);
    add_init(&g, &t);
    sn_pbw_free(&t);
    /* bool, int64, double, uint32 via uint64_data, uint64, strings, int4 */
    tb_tensor_raw(&t, "b", SN_BOOL, 1, d3, NULL, 0);
    sn_pbw_int(&t, 5, 1), sn_pbw_int(&t, 5, 0), sn_pbw_int(&t, 5, 1);
    add_init(&g, &t);
    sn_pbw_free(&t);
    tb_tensor_raw(&t, "i64", SN_I64, 1, d3, NULL, 0);
    sn_pbw_int(&t, 7, INT64_MIN), sn_pbw_int(&t, 7, -5), sn_pbw_int(&t, 7, INT64_MAX);
    add_init(&g, &t);
    sn_pbw_free(&t);
    tb_tensor_raw(&t, "f64", SN_F64, 0, NULL, NULL, 0);
    double dv = -0.125;
    uint64_t du;
    memcpy(&du, &dv, 8);
    sn_pbw_fixed64(&t, 10, du);
    add_init(&g, &t);
    sn_pbw_free(&t);
    tb_tensor_raw(&t, "u32", SN_U32, 1, d3, NULL, 0);
    sn_pbw_int(&t, 11, 0xffffffffu), sn_pbw_int(&t, 11, 0), sn_pbw_int(&t, 11, 7);
    add_init(&g, &t);
    sn_pbw_free(&t);
    tb_tensor_raw(&t, "s", SN_STRING, 1, d3, NULL, 0);
    sn_pbw_str(&t, 6, "alpha"), sn_pbw_str(&t, 6, ""), sn_pbw_str(&t, 6, "gamma");
    add_init(&g, &t);
    sn_pbw_free(&t);
    tb_tensor_raw(&t, "i4", SN_I4, 1, d3, NULL, 0); /* 3 nibbles: 2 bytes */
    sn_pbw_int(&t, 5, 0x21), sn_pbw_int(&t, 5, 0x0f);
    add_init(&g, &t);
    sn_pbw_free(&t);
    tb_tensor_raw(&t, "c64", SN_C64, 1, d3 , NULL, 0);
    for (int i = 0; i < 6; i++)
        sn_pbw_float(&t, 4, (float)i);
    add_init(&g, &t);
    sn_pbw_free(&t);
    tb_tensor_raw(&t, "empty", SN_F32, 2, (int64_t[]){0, 4}, NULL, 0);
    add_init(&g, &t);
    sn_pbw_free(&t);
    /* raw_data: int32 scalar */
    int32_t iv = -42;
    tb_tensor_raw(&t, "raw", SN_I32, 0, NULL, &iv, 4);
    add_init(&g, &t);
    sn_pbw_free(&t);

    sn_pbw model = {0};
    tb_model(&model, &g, NULL, 0);
    sn_model *m = NULL;
    sn_err err = {0};
    int rc = sn_model_load_buffer(model.buf, model.len, NULL, &m, &err);
    CHECK_RC(rc, SNUG_OK, err, NULL);
    if (!rc) {
        const sn_init *in = m->graph->inits;
        CHECK(m->graph->n_init == 12);
        const float *f = in[0].t.data;
        CHECK(f[0] == 1.5f && f[1] == -2.0f && f[2] == 3.25f);
        const int8_t *i8 = in[1].t.data;
        CHECK(i8[0] == -1 && i8[1] == 127 && i8[2] == -128);
        const uint16_t *h = in[2].t.data;
        CHECK(in[2].t.rank == 2 && sn_f16_to_f32(h[3]) == 3.5f);
        const uint8_t *b = in[3].t.data;
        CHECK(b[0] == 1 && b[1] == 0 && b[2] == 1);
        const int64_t *i64 = in[4].t.data;
        CHECK(i64[0] == INT64_MIN && i64[1] == -5 && i64[2] == INT64_MAX);
        CHECK(in[5].t.rank == 0 && *(const double *)in[5].t.data == -0.125);
        const uint32_t *u32 = in[6].t.data;
        CHECK(u32[0] == 0xffffffffu && u32[2] == 7);
        const sn_string *s = in[7].t.data;
        CHECK(s[0].len == 5 && !memcmp(s[0].ptr, "alpha", 5) && s[1].len == 0 && s[2].len == 5);
        const uint8_t *i4 = in[8].t.data;
        CHECK(in[8].nbytes == 2 && i4[0] == 0x21 && i4[1] == 0x0f);
        const float *c = in[9].t.data;
        CHECK(in[9].nbytes == 24 && c[5] == 5.0f);
        CHECK(in[10].t.rank == 2 && in[10].nbytes == 0);
        CHECK(!strcmp(in[11].name, "raw") && *(const int32_t *)in[11].t.data == -42);
        sn_model_free(m);
    }
    sn_pbw_free(&model);
    sn_pbw_free(&g);
}

static void test_attrs(void) {
    sn_pbw g = {0}, node = {0}, a = {0}, sub = {0}, subnode = {0}, t = {0}, pk = {0};
    /* subgraph: one Identity node */
    tb_node(&subnode, "Identity", "inner", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
    sn_pbw_msg(&sub, 1, &subnode);
    sn_pbw_str(&sub, 2, "body");
    tb_node(&node, "Custom", "n0", (const char *[]){"X", "", NULL}, (const char *[]){"Y", NULL});
    sn_pbw_str(&node, 7, "ai.onnx");
#define ATTR(name_, type_, body)      \
    do {                              \
        sn_pbw_str(&a, 1, name_);     \
        sn_pbw_int(&a, 20, type_);    \
        body;                         \
        sn_pbw_msg(&node, 5, &a);     \
        sn_pbw_free(&a);              \
    } while (0)
    ATTR("f", SN_ATTR_FLOAT, sn_pbw_float(&a, 2, 0.5f));
    ATTR("i", SN_ATTR_INT, sn_pbw_int(&a, 3, -7));
    ATTR("s", SN_ATTR_STRING, sn_pbw_str(&a, 4, "hello"));
    tb_tensor_raw(&t, "tv", SN_F32, 1, (int64_t[]){1}, (float[]){2.0f}, 4);
    ATTR("t", SN_ATTR_TENSOR, sn_pbw_msg(&a, 5, &t));
    ATTR("g", SN_ATTR_GRAPH, sn_pbw_msg(&a, 6, &sub));
    ATTR("floats", SN_ATTR_FLOATS, (sn_pbw_float(&a, 7, 1.0f), sn_pbw_float(&a, 7, 2.0f)));
    for (int i = 0; i < 3; i++)
        sn_pbw_varint(&pk, (uint64_t)(int64_t)(i - 1));
    ATTR("ints", SN_ATTR_INTS, (sn_pbw_msg(&a, 8, &pk), sn_pbw_int(&a, 8, 9)));
    ATTR("strings", SN_ATTR_STRINGS, (sn_pbw_str(&a, 9, "a"), sn_pbw_str(&a, 9, "bc")));
    ATTR("tensors", SN_ATTR_TENSORS, (sn_pbw_msg(&a, 10, &t), sn_pbw_msg(&a, 10, &t)));
    ATTR("graphs", SN_ATTR_GRAPHS, sn_pbw_msg(&a, 11, &sub));
    sn_pbw tp = {0}, tt = {0};
    sn_pbw_int(&tt, 1, SN_F16);
    sn_pbw_msg(&tp, 1, &tt);
    ATTR("tp", SN_ATTR_TYPE_PROTO, sn_pbw_msg(&a, 14, &tp));
    ATTR("empty_ints", SN_ATTR_INTS, (void)0);
    /* no type field (IR < 0.0.2): inferred from the value field */
    sn_pbw_str(&a, 1, "old");
    sn_pbw_int(&a, 3, 5);
    sn_pbw_msg(&node, 5, &a);
    sn_pbw_free(&a);
    sn_pbw kv = {0};
    sn_pbw_str(&kv, 1, "layer_ann");
    sn_pbw_str(&kv, 2, "layers.3");
    sn_pbw_msg(&node, 9, &kv);
    sn_pbw_msg(&g, 1, &node);
    sn_pbw model = {0};
    tb_model(&model, &g, NULL, 0);

    sn_model *m = NULL;
    sn_err err = {0};
    int rc = sn_model_load_buffer(model.buf, model.len, NULL, &m, &err);
    CHECK_RC(rc, SNUG_OK, err, NULL);
    if (!rc) {
        const sn_pnode *n = &m->graph->nodes[0];
        CHECK(!strcmp(n->domain, "") && n->n_in == 2 && !strcmp(n->inputs[1], ""));
        CHECK(n->n_attr == 13);
        const sn_attr *at = n->attrs;
        CHECK(at[0].type == SN_ATTR_FLOAT && at[0].f == 0.5f);
        CHECK(at[1].type == SN_ATTR_INT && at[1].i == -7);
        CHECK(at[2].s.len == 5 && !strcmp(at[2].s.ptr, "hello"));
        CHECK(at[3].t && at[3].t->dtype == SN_F32 && *(const float *)at[3].t->data == 2.0f);
        CHECK(at[4].g && at[4].g->n_node == 1 && !strcmp(at[4].g->nodes[0].op_type, "Identity") &&
              !strcmp(at[4].g->name, "body"));
        CHECK(at[5].n == 2 && at[5].floats[1] == 2.0f);
        CHECK(at[6].n == 4 && at[6].ints[0] == -1 && at[6].ints[2] == 1 && at[6].ints[3] == 9);
        CHECK(at[7].n == 2 && at[7].strings[1].len == 2 && !strcmp(at[7].strings[1].ptr, "bc"));
        CHECK(at[8].n == 2 && at[8].tensors[1].rank == 1);
        CHECK(at[9].n == 1 && at[9].graphs[0]->n_node == 1);
        CHECK(at[10].tp && at[10].tp->kind == SN_TYPE_TENSOR && at[10].tp->elem == SN_F16 &&
              at[10].tp->rank == -1);
        CHECK(at[11].type == SN_ATTR_INTS && at[11].n == 0);
        CHECK(at[12].type == SN_ATTR_INT && at[12].i == 5 && !strcmp(at[12].name, "old"));
        CHECK(n->n_meta == 1 && !strcmp(n->meta[0].key, "layer_ann") &&
              !strcmp(n->meta[0].value, "layers.3"));
        sn_model_free(m);
    }
#undef ATTR
    sn_pbw *all[] = {&g, &node, &sub, &subnode, &t, &pk, &tp, &tt, &kv, &model};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        sn_pbw_free(all[i]);
}

/* Value types: sequence/optional/map/sparse tensor types in value_info. */
static void test_types(void) {
    sn_pbw g = {0}, vi = {0}, tp = {0}, seq = {0}, inner = {0}, tt = {0}, opt = {0};
    sn_pbw_int(&tt, 1, SN_F32);
    sn_pbw_msg(&inner, 1, &tt);          /* TypeProto{tensor_type{float}} */
    sn_pbw_msg(&seq, 1, &inner);         /* Sequence{elem_type} */
    sn_pbw_msg(&tp, 4, &seq);            /* TypeProto{sequence_type} */
    sn_pbw_msg(&opt, 1, &tp);            /* Optional{elem_type: sequence} */
    sn_pbw top = {0};
    sn_pbw_msg(&top, 9, &opt);
    sn_pbw_str(&vi, 1, "o");
    sn_pbw_msg(&vi, 2, &top);
    sn_pbw_msg(&g, 11, &vi);
    sn_pbw_free(&vi);
    tb_value_info(&vi, "t", SN_I64, 3, (int64_t[]){2, -1, 0});
    sn_pbw_msg(&g, 12, &vi);
    sn_pbw model = {0};
    tb_model(&model, &g, NULL, 0);
    sn_model *m = NULL;
    sn_err err = {0};
    int rc = sn_model_load_buffer(model.buf, model.len, NULL, &m, &err);
    CHECK_RC(rc, SNUG_OK, err, NULL);
    if (!rc) {
        const sn_type *o = &m->graph->inputs[0].type;
        CHECK(o->kind == SN_TYPE_OPTIONAL && o->inner && o->inner->kind == SN_TYPE_SEQUENCE &&
              o->inner->inner && o->inner->inner->kind == SN_TYPE_TENSOR &&
              o->inner->inner->elem == SN_F32 && o->inner->inner->rank == -1);
        const sn_type *t = &m->graph->outputs[0].type;
        CHECK(t->kind == SN_TYPE_TENSOR && t->elem == SN_I64 && t->rank == 3 && t->dims[0] == 2 &&
              t->dims[1] == -1 && !strcmp(t->dim_params[1], "N") && t->dims[2] == 0 &&
              !t->dim_params[2]);
        sn_model_free(m);
    }
    sn_pbw *all[] = {&g, &vi, &tp, &seq, &inner, &tt, &opt, &top, &model};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        sn_pbw_free(all[i]);
}

/* ---- functions ----------------------------------------------------------- */

static void test_functions(void) {
    sn_pbw g = {0}, n = {0}, fn = {0}, fn2 = {0}, op = {0}, a = {0}, model = {0}, sub = {0};
    /* Inner(A) -> B: B = Neg(A) */
    sn_pbw_str(&fn2, 1, "Inner");
    sn_pbw_str(&fn2, 10, "my.domain");
    sn_pbw_str(&fn2, 4, "A");
    sn_pbw_str(&fn2, 5, "B");
    tb_node(&n, "Neg", NULL, (const char *[]){"A", NULL}, (const char *[]){"B", NULL});
    sn_pbw_msg(&fn2, 7, &n);
    sn_pbw_free(&n);
    /* Outer(X, Opt) -> Y, attrs alpha (default 0.25), beta:
     *   t = Mul(X, X); u = LeakyRelu(t, alpha=@alpha); v = Inner(u);
     *   Y = If(Opt) with then-branch Identity(v) -> w, and Foo(beta=@beta) */
    sn_pbw_str(&fn, 1, "Outer");
    sn_pbw_str(&fn, 10, "my.domain");
    sn_pbw_str(&fn, 4, "X");
    sn_pbw_str(&fn, 4, "Opt");
    sn_pbw_str(&fn, 5, "Y");
    sn_pbw_str(&a, 1, "alpha");
    sn_pbw_int(&a, 20, SN_ATTR_FLOAT);
    sn_pbw_float(&a, 2, 0.25f);
    sn_pbw_msg(&fn, 11, &a);
    sn_pbw_free(&a);
    sn_pbw_str(&fn, 6, "beta");
    tb_node(&n, "Mul", NULL, (const char *[]){"X", "X", NULL}, (const char *[]){"t", NULL});
    sn_pbw_msg(&fn, 7, &n);
    sn_pbw_free(&n);
    tb_node(&n, "LeakyRelu", "lr", (const char *[]){"t", NULL}, (const char *[]){"u", NULL});
    tb_attr_ref(&n, "alpha", SN_ATTR_FLOAT, "alpha");
    sn_pbw_msg(&fn, 7, &n);
    sn_pbw_free(&n);
    tb_node(&n, "Inner", NULL, (const char *[]){"u", NULL}, (const char *[]){"v", NULL});
    sn_pbw_str(&n, 7, "my.domain");
    sn_pbw_msg(&fn, 7, &n);
    sn_pbw_free(&n);
    tb_node(&n, "Identity", NULL, (const char *[]){"v", NULL}, (const char *[]){"w", NULL});
    sn_pbw_msg(&sub, 1, &n);
    sn_pbw_free(&n);
    tb_value_info(&a, "w", SN_F32, -1, NULL);
    sn_pbw_msg(&sub, 12, &a);
    sn_pbw_free(&a);
    tb_node(&n, "If", NULL, (const char *[]){"Opt", NULL}, (const char *[]){"Y", NULL});
    sn_pbw_str(&a, 1, "then_branch");
    sn_pbw_int(&a, 20, SN_ATTR_GRAPH);
    sn_pbw_msg(&a, 6, &sub);
    sn_pbw_msg(&n, 5, &a);
    sn_pbw_free(&a);
    tb_attr_ref(&n, "k", SN_ATTR_INT, "beta");
    tb_attr_ref(&n, "missing", SN_ATTR_INT, "nope");
    sn_pbw_msg(&fn, 7, &n);
    sn_pbw_free(&n);
    sn_pbw_str(&op, 1, "extra.domain");
    sn_pbw_int(&op, 2, 3);
    sn_pbw_msg(&fn, 9, &op);
    /* graph: two calls of Outer; the second passes alpha and beta, and
     * leaves the optional input out */
    tb_node(&n, "Outer", "call1", (const char *[]){"in", "c", NULL}, (const char *[]){"mid", NULL});
    sn_pbw_str(&n, 7, "my.domain");
    sn_pbw_msg(&g, 1, &n);
    sn_pbw_free(&n);
    tb_node(&n, "Outer", "", (const char *[]){"mid", NULL}, (const char *[]){"out", NULL});
    sn_pbw_str(&n, 7, "my.domain");
    sn_pbw_str(&a, 1, "alpha");
    sn_pbw_int(&a, 20, SN_ATTR_FLOAT);
    sn_pbw_float(&a, 2, 0.75f);
    sn_pbw_msg(&n, 5, &a);
    sn_pbw_free(&a);
    tb_attr_int(&n, "beta", 4);
    sn_pbw_msg(&g, 1, &n);
    sn_pbw_free(&n);
    tb_model(&model, &g, "my.domain", 1);
    sn_pbw_msg(&model, 25, &fn);
    sn_pbw_msg(&model, 25, &fn2);

    sn_model *m = NULL;
    sn_err err = {0};
    int rc = sn_model_load_buffer(model.buf, model.len, NULL, &m, &err);
    CHECK_RC(rc, SNUG_OK, err, NULL);
    if (!rc) {
        const sn_pgraph *gr = m->graph;
        CHECK(sn_model_inlined_calls(m) == 4);
        CHECK(sn_model_opset(m, "extra.domain") == 3 && sn_model_opset(m, "my.domain") == 1);
        CHECK(gr->n_node == 8);
        const sn_pnode *nd = gr->nodes;
        CHECK(!strcmp(nd[0].op_type, "Mul") && !strcmp(nd[0].inputs[0], "in") &&
              !strcmp(nd[0].outputs[0], "call1#1/t") && !strcmp(nd[0].name, "call1#1/Mul"));
        CHECK(!strcmp(nd[1].op_type, "LeakyRelu") && !strcmp(nd[1].inputs[0], "call1#1/t") &&
              nd[1].n_attr == 1 && !strcmp(nd[1].attrs[0].name, "alpha") &&
              nd[1].attrs[0].f == 0.25f && !nd[1].attrs[0].ref_attr_name);
        CHECK(!strcmp(nd[2].op_type, "Neg") && !strcmp(nd[2].inputs[0], "call1#1/u") &&
              !strcmp(nd[2].outputs[0], "call1#1/v"));
        CHECK(!strcmp(nd[3].op_type, "If") && !strcmp(nd[3].inputs[0], "c") &&
              !strcmp(nd[3].outputs[0], "mid"));
        CHECK(nd[3].n_attr == 1); /* beta not given, no default; "missing" dropped */
        const sn_pgraph *then = nd[3].attrs[0].g;
        CHECK(then && !strcmp(then->nodes[0].inputs[0], "call1#1/v") &&
              !strcmp(then->nodes[0].outputs[0], "call1#1/w") &&
              !strcmp(then->outputs[0].name, "call1#1/w"));
        /* second call: alpha from the call, beta substituted, absent input */
        CHECK(!strcmp(nd[4].inputs[0], "mid") && !strcmp(nd[4].outputs[0], "Outer#3/t"));
        CHECK(nd[5].attrs[0].f == 0.75f);
        CHECK(!strcmp(nd[7].inputs[0], "") && !strcmp(nd[7].outputs[0], "out"));
        CHECK(nd[7].n_attr == 2 && !strcmp(nd[7].attrs[1].name, "k") && nd[7].attrs[1].i == 4);
        sn_model_free(m);
    }
    /* A function calling itself is refused. */
    sn_pbw rec = {0}, rg = {0};
    sn_pbw_str(&rec, 1, "Loopy");
    sn_pbw_str(&rec, 4, "A");
    sn_pbw_str(&rec, 5, "B");
    tb_node(&n, "Loopy", NULL, (const char *[]){"A", NULL}, (const char *[]){"B", NULL});
    sn_pbw_msg(&rec, 7, &n);
    sn_pbw_msg(&rg, 1, &n);
    sn_pbw_free(&n);
    sn_pbw_free(&model);
    tb_model(&model, &rg, NULL, 0);
    sn_pbw_msg(&model, 25, &rec);
    rc = sn_model_load_buffer(model.buf, model.len, NULL, &m, &err);
    CHECK_RC(rc, SNUG_ERR_GRAPH, err, "calls itself");
    CHECK(m == NULL);
    sn_pbw *all[] = {&g, &fn, &fn2, &op, &model, &sub, &rec, &rg};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        sn_pbw_free(all[i]);
}

/* ---- .pb values ------------------------------------------------------------ */

static int read_test_file(const char *rel, void **buf, size_t *len) {
    char path[512];
    sn_err err;
    snprintf(path, sizeof path, "%s/%s", TESTDATA, rel);
    return sn_file_read(path, buf, len, &err);
}

/* Decodes the file, checks, re-encodes and compares bytes. */
static void roundtrip(const char *rel, const sn_type *ty, int kind, int optional, int64_t n_items) {
    void *buf;
    size_t len;
    if (read_test_file(rel, &buf, &len)) {
        printf("skip %s (ONNX test data not installed)\n", rel);
        g_skips++;
        return;
    }
    sn_tensor t;
    void *owner;
    char *name;
    sn_err err = {0};
    int rc = sn_value_decode_pb_typed(buf, len, ty, &t, &owner, &name, &err);
    CHECK_RC(rc, SNUG_OK, err, NULL);
    if (!rc) {
        CHECK(t.kind == kind && t.optional == optional);
        if (kind == SN_KIND_SEQUENCE)
            CHECK(t.n_items == n_items);
        void *enc;
        size_t elen;
        CHECK(sn_value_encode_pb(&t, name, &enc, &elen, &err) == 0);
        if (elen != len || memcmp(enc, buf, len)) {
            fprintf(stderr, "re-encoding %s differs (%zu vs %zu bytes)\n", rel, elen, len);
            g_fails++;
        }
        sn_free(enc);
        sn_free(owner);
        sn_free(name);
    }
    sn_free(buf);
}

static void test_value_pb(void) {
    void *buf;
    size_t len;
    if (read_test_file("test_abs/test_data_set_0/input_0.pb", &buf, &len)) {
        printf("skip .pb tests (ONNX test data not installed)\n");
        g_skips++;
        return;
    }
    sn_tensor t;
    void *owner;
    char *name;
    sn_err err = {0};
    CHECK_RC(sn_tensor_decode_pb(buf, len, &t, &owner, &name, &err), SNUG_OK, err, NULL);
    CHECK(t.dtype == SN_F32 && t.rank == 3 && t.dims[0] == 3 && t.dims[1] == 4 && t.dims[2] == 5);
    CHECK(!strcmp(name, "x") && (uintptr_t)t.data % 16 == 0);
    CHECK(!memcmp(t.data, (char *)buf + len - 240, 240));
    sn_free(owner);
    sn_free(name);
    /* a truncated file names the offset */
    CHECK_RC(sn_tensor_decode_pb(buf, len - 7, &t, &owner, &name, &err), SNUG_ERR_PARSE, err,
             "malformed protobuf at byte");
    CHECK(owner == NULL);
    sn_free(buf);

    sn_type tens = {.kind = SN_TYPE_TENSOR, .elem = SN_F32, .rank = -1};
    sn_type seq = {.kind = SN_TYPE_SEQUENCE, .inner = &tens};
    sn_type opt = {.kind = SN_TYPE_OPTIONAL, .inner = &tens};
    sn_type opt_seq = {.kind = SN_TYPE_OPTIONAL, .inner = &seq};
    roundtrip("test_sequence_insert_at_back/test_data_set_0/input_0.pb", &seq, SN_KIND_SEQUENCE, 0, 3);
    roundtrip("test_sequence_insert_at_back/test_data_set_0/input_0.pb", NULL, SN_KIND_SEQUENCE, 0, 3);
    roundtrip("test_optional_get_element/test_data_set_0/input_0.pb", &opt, SN_KIND_TENSOR, 1, 0);
    roundtrip("test_optional_get_element_sequence/test_data_set_0/input_0.pb", &opt_seq,
              SN_KIND_SEQUENCE, 1, 1);
    roundtrip("test_optional_get_element_sequence/test_data_set_0/output_0.pb", &seq,
              SN_KIND_SEQUENCE, 0, 1);
    roundtrip("test_optional_has_element_empty/test_data_set_0/input_0.pb", &opt, SN_KIND_NONE, 1, 0);
    roundtrip("test_optional_has_element_empty/test_data_set_0/input_0.pb", NULL, SN_KIND_NONE, 1, 0);
    roundtrip("test_optional_has_element_empty/test_data_set_0/output_0.pb", NULL, SN_KIND_TENSOR, 0, 0);
    roundtrip("test_strnormalizer_export_monday_casesensintive_lower/test_data_set_0/input_0.pb",
              NULL, SN_KIND_TENSOR, 0, 0);

    /* string tensors survive the copy into the owner block */
    sn_string strs[2] = {{"ab", 2}, {"xyz", 3}};
    sn_tensor st = {.kind = SN_KIND_TENSOR, .dtype = SN_STRING, .rank = 1, .dims = {2}, .data = strs};
    void *enc;
    size_t elen;
    CHECK(sn_value_encode_pb(&st, "s", &enc, &elen, &err) == 0);
    CHECK(sn_tensor_decode_pb(enc, elen, &t, &owner, NULL, &err) == 0);
    memset(enc, 0, elen);
    const sn_string *ds = t.data;
    CHECK(t.dtype == SN_STRING && ds[1].len == 3 && !memcmp(ds[1].ptr, "xyz", 3));
    sn_free(owner);
    sn_free(enc);
}

/* ---- .npy ---------------------------------------------------------------- */

static void test_npy(void) {
    char dir[64], path[128];
    if (!tb_tmpdir(dir, sizeof dir)) {
        CHECK(0);
        return;
    }
    snprintf(path, sizeof path, "%s/a.npy", dir);
    float v[6] = {1, 2, 3, 4, 5, 6};
    sn_tensor t = {.kind = SN_KIND_TENSOR, .dtype = SN_F32, .rank = 2, .dims = {2, 3}, .data = v};
    sn_err err = {0};
    CHECK_RC(sn_npy_write(path, &t, &err), SNUG_OK, err, NULL);
    void *buf;
    size_t len;
    CHECK(sn_file_read(path, &buf, &len, &err) == 0);
    /* exactly what numpy writes for np.arange(1, 7, dtype='<f4').reshape(2, 3) */
    static const char hdr[] = "\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', 'fortran_order': False, "
                              "'shape': (2, 3), }";
    CHECK(len == 128 + 24 && !memcmp(buf, hdr, sizeof hdr - 1) && ((char *)buf)[127] == '\n');
    sn_free(buf);
    sn_tensor r;
    void *owner;
    CHECK_RC(sn_npy_read(path, &r, &owner, &err), SNUG_OK, err, NULL);
    CHECK(r.dtype == SN_F32 && r.rank == 2 && r.dims[1] == 3 && !memcmp(r.data, v, sizeof v));
    sn_free(owner);
    uint8_t bv[3] = {1, 0, 1};
    sn_tensor tb = {.kind = SN_KIND_TENSOR, .dtype = SN_BOOL, .rank = 1, .dims = {3}, .data = bv};
    CHECK(sn_npy_write(path, &tb, &err) == 0);
    CHECK(sn_npy_read(path, &r, &owner, &err) == 0 && r.dtype == SN_BOOL && r.rank == 1 &&
          r.dims[0] == 3);
    sn_free(owner);
    sn_tensor ts = {.kind = SN_KIND_TENSOR, .dtype = SN_F32, .rank = 0, .data = v};
    CHECK(sn_npy_write(path, &ts, &err) == 0);
    CHECK(sn_npy_read(path, &r, &owner, &err) == 0 && r.rank == 0 && *(float *)r.data == 1.0f);
    sn_free(owner);
    /* refused: Fortran order, big-endian, truncated data */
    static const char *bad[] = {
        "{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }",
        "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
        "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }",
    };
    static const char *msgs[] = {"Fortran", "dtype '>f4'", "shape needs 8", "'<c8'"};
    for (int i = 0; i < 4; i++) {
        char file[128];
        size_t hl = strlen(bad[i]);
        memcpy(file, "\x93NUMPY\x01\x00", 8);
        file[8] = (char)hl;
        file[9] = 0;
        memcpy(file + 10, bad[i], hl);
        memcpy(file + 10 + hl, v, 4);
        tb_write_file(path, file, 10 + hl + 4);
        CHECK_RC(sn_npy_read(path, &r, &owner, &err), i == 2 ? SNUG_ERR_PARSE : SNUG_ERR_UNSUPPORTED,
                 err, msgs[i]);
    }
    CHECK_RC(sn_npy_read("/nonexistent/x.npy", &r, &owner, &err), SNUG_ERR_IO, err, "cannot open");
    unlink(path);
    rmdir(dir);
}

int main(void) {
    test_pb_reader();
    test_stories();
    test_typed_fields();
    test_attrs();
    test_types();
    test_functions();
    test_value_pb();
    test_npy();
    return test_done("test_onnx_load");
}
