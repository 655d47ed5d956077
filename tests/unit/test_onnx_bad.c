/* Loader on bad input: external data that escapes the model folder or runs
 * past its file, tensors whose bytes do not match their shape, and a corpus
 * of truncated and randomly corrupted models. Every load must return OK or
 * an error with a message; never crash, hang or read out of bounds (this
 * test is meant to run under ASan/UBSan too). */
#include <sys/stat.h>

#include "onnx/load_impl.h"
#include "onnx_test_util.h"

#define STORIES "../shared/fixtures/stories260K/stories260K_kv.onnx"

static char g_dir[64];

static void path_in(char *buf, size_t cap, const char *name) {
    snprintf(buf, cap, "%s/%s", g_dir, name);
}

/* A model with one float [4] initializer stored as external data. */
static int load_ext(const char *location, long long off, long long len, sn_model **m, sn_err *err) {
    sn_pbw g = {0}, t = {0}, model = {0};
    tb_tensor_ext(&t, "w", SN_F32, 1, (int64_t[]){4}, location, off, len);
    sn_pbw_msg(&g, 5, &t);
    tb_model(&model, &g, NULL, 0);
    char path[256];
    path_in(path, sizeof path, "model.onnx");
    tb_write_file(path, model.buf, model.len);
    sn_pbw_free(&g);
    sn_pbw_free(&t);
    sn_pbw_free(&model);
    *m = NULL;
    return sn_model_load(path, m, err);
}

static void test_external(void) {
    char p[256], q[256];
    float w[16];
    for (int i = 0; i < 16; i++)
        w[i] = (float)i;
    path_in(p, sizeof p, "weights.bin");
    tb_write_file(p, w, sizeof w);
    path_in(p, sizeof p, "sub");
    mkdir(p, 0700);
    path_in(p, sizeof p, "sub/w2.bin");
    tb_write_file(p, w, sizeof w);
    /* a file outside the folder, and links to it and to an inside file */
    snprintf(q, sizeof q, "%s-outside.bin", g_dir);
    tb_write_file(q, w, sizeof w);
    path_in(p, sizeof p, "out_link.bin");
    CHECK(symlink(q, p) == 0);
    path_in(p, sizeof p, "in_link.bin");
    CHECK(symlink("weights.bin", p) == 0);

    sn_model *m;
    sn_err err = {0};
    int rc = load_ext("weights.bin", 16, 16, &m, &err);
    CHECK_RC(rc, SNUG_OK, err, NULL);
    if (!rc) {
        const sn_init *in = &m->graph->inits[0];
        CHECK(in->external && !strcmp(in->location, "weights.bin") && in->file_offset == 16 &&
              in->nbytes == 16);
        CHECK(((const float *)in->t.data)[0] == 4.0f && ((const float *)in->t.data)[3] == 7.0f);
        CHECK(m->weight_bytes == 16 && sn_model_copied_tensors(m, NULL) == 0);
        sn_model_free(m);
    }
    /* misaligned offset: copied, and counted */
    rc = load_ext("weights.bin", 2, 16, &m, &err);
    CHECK_RC(rc, SNUG_OK, err, NULL);
    if (!rc) {
        uint64_t bytes;
        CHECK(sn_model_copied_tensors(m, &bytes) == 1 && bytes == 16);
        CHECK((uintptr_t)m->graph->inits[0].t.data % 4 == 0);
        sn_model_free(m);
    }
    /* no offset/length: whole file must match */
    CHECK_RC(load_ext("sub/w2.bin", -1, -1, &m, &err), SNUG_ERR_PARSE, err,
             "has 64 bytes, shape and type need 16");
    CHECK_RC(load_ext("sub/w2.bin", 48, -1, &m, &err), SNUG_OK, err, NULL);
    sn_model_free(m);
    CHECK_RC(load_ext("in_link.bin", 0, 16, &m, &err), SNUG_OK, err, NULL);
    sn_model_free(m);
    CHECK_RC(load_ext("../x.bin", 0, 16, &m, &err), SNUG_ERR_INVALID_ARG, err, "'../x.bin'");
    CHECK(m == NULL);
    CHECK_RC(load_ext("sub/../weights.bin", 0, 16, &m, &err), SNUG_ERR_INVALID_ARG, err,
             "without '..'");
    CHECK_RC(load_ext(q, 0, 16, &m, &err), SNUG_ERR_INVALID_ARG, err, "relative path");
    CHECK_RC(load_ext("out_link.bin", 0, 16, &m, &err), SNUG_ERR_INVALID_ARG, err,
             "outside the model folder");
    CHECK_RC(load_ext("weights.bin", 56, 16, &m, &err), SNUG_ERR_RANGE, err, "runs past the file's end");
    CHECK_RC(load_ext("weights.bin", 1ll << 62, 16, &m, &err), SNUG_ERR_RANGE, err, "runs past");
    CHECK_RC(load_ext("weights.bin", 0, 12, &m, &err), SNUG_ERR_PARSE, err, "has 12 bytes");
    CHECK_RC(load_ext("missing.bin", 0, 16, &m, &err), SNUG_ERR_IO, err, "not found");
    CHECK_RC(load_ext("", 0, 16, &m, &err), SNUG_ERR_INVALID_ARG, err, "relative path");
    CHECK(strstr(err.msg, "tensor 'w'") != NULL);

    /* two tensors in one file: the file is mapped once */
    sn_pbw g = {0}, t = {0}, model = {0};
    for (int i = 0; i < 3; i++) {
        tb_tensor_ext(&t, i ? "b" : "a", SN_F32, 1, (int64_t[]){4}, i < 2 ? "weights.bin" : "sub/w2.bin",
                      16 * i, 16);
        sn_pbw_msg(&g, 5, &t);
        sn_pbw_free(&t);
    }
    tb_model(&model, &g, NULL, 0);
    path_in(p, sizeof p, "model.onnx");
    tb_write_file(p, model.buf, model.len);
    rc = sn_model_load(p, &m, &err);
    CHECK_RC(rc, SNUG_OK, err, NULL);
    if (!rc) {
        CHECK(m->priv->n_ext == 2 && m->weight_bytes == 48);
        sn_model_free(m);
    }
    /* from a buffer without a folder: external data cannot be resolved */
    rc = sn_model_load_buffer(model.buf, model.len, NULL, &m, &err);
    CHECK_RC(rc, SNUG_ERR_INVALID_ARG, err, "no model folder");
    sn_pbw_free(&g);
    sn_pbw_free(&model);
    unlink(q);
}

/* A model with one initializer written by the caller into t. */
static int load_init(const sn_pbw *t, sn_err *err) {
    sn_pbw g = {0}, model = {0};
    sn_pbw_msg(&g, 5, t);
    tb_model(&model, &g, NULL, 0);
    sn_model *m = NULL;
    int rc = sn_model_load_buffer(model.buf, model.len, NULL, &m, err);
    sn_model_free(m);
    sn_pbw_free(&g);
    sn_pbw_free(&model);
    return rc;
}

static void test_bad_tensors(void) {
    sn_pbw t = {0};
    sn_err err = {0};
    float v[4] = {0};
#define CASE(build, want, msg)                     \
    do {                                           \
        build;                                     \
        CHECK_RC(load_init(&t, &err), want, err, msg); \
        sn_pbw_free(&t);                           \
    } while (0)
    CASE(tb_tensor_raw(&t, "short", SN_F32, 1, (int64_t[]){4}, v, 8), SNUG_ERR_PARSE,
         "tensor 'short': raw_data has 8 bytes, shape and type need 16");
    CASE(tb_tensor_raw(&t, "long", SN_F32, 0, NULL, v, 8), SNUG_ERR_PARSE, "need 4");
    CASE(tb_tensor_raw(&t, "huge", SN_F32, 3, ((int64_t[]){1ll << 40, 1ll << 40, 1ll << 40}), v, 8),
         SNUG_ERR_PARSE, "tensor 'huge': element count of its dimensions overflows");
    CASE(tb_tensor_raw(&t, "big", SN_F64, 2, ((int64_t[]){1ll << 31, 1ll << 31}), v, 8),
         SNUG_ERR_PARSE, "overflows");
    CASE(tb_tensor_raw(&t, "neg", SN_F32, 2, ((int64_t[]){2, -2}), v, 8), SNUG_ERR_PARSE,
         "negative dimension -2");
    CASE(tb_tensor_raw(&t, "odd", 99, 1, (int64_t[]){1}, v, 4), SNUG_ERR_UNSUPPORTED,
         "tensor 'odd': unknown data_type 99");
    CASE(tb_tensor_raw(&t, "zero", 0, 1, (int64_t[]){1}, v, 4), SNUG_ERR_UNSUPPORTED,
         "unknown data_type 0");
    CASE(tb_tensor_raw(&t, "r13", SN_F32, 13, ((int64_t[13]){1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}), v, 4),
         SNUG_ERR_UNSUPPORTED, "rank above 12");
    CASE((tb_tensor_raw(&t, "few", SN_F32, 1, (int64_t[]){3}, NULL, 0), sn_pbw_float(&t, 4, 1),
          sn_pbw_float(&t, 4, 2)),
         SNUG_ERR_PARSE, "tensor 'few': float_data has 2 values, shape needs 3");
    CASE((tb_tensor_raw(&t, "wrongfield", SN_I64, 1, (int64_t[]){1}, NULL, 0), sn_pbw_int(&t, 5, 1)),
         SNUG_ERR_PARSE, "int64_data has 0 values");
    CASE((tb_tensor_raw(&t, "nodata", SN_F32, 1, (int64_t[]){1}, NULL, 0)), SNUG_ERR_PARSE,
         "float_data has 0 values, shape needs 1");
    sn_pbw seg = {0};
    sn_pbw_int(&seg, 1, 0);
    CASE((tb_tensor_raw(&t, "seg", SN_F32, 1, (int64_t[]){1}, v, 4), sn_pbw_msg(&t, 3, &seg)),
         SNUG_ERR_UNSUPPORTED, "segmented");
    sn_pbw_free(&seg);
    CASE((tb_tensor_raw(&t, "wire", SN_F32, 1, (int64_t[]){1}, NULL, 0), sn_pbw_int(&t, 9, 4)),
         SNUG_ERR_PARSE, "raw_data with wire type 0");
    CASE((tb_tensor_raw(&t, "extnoloc", SN_F32, 1, (int64_t[]){1}, NULL, 0), sn_pbw_int(&t, 14, 1)),
         SNUG_ERR_PARSE, "external data without a location");
#undef CASE

    /* sparse initializer: densified */
    sn_pbw sp = {0}, vals = {0}, idx = {0}, g = {0}, model = {0};
    float sv[2] = {5, 7};
    int64_t si[2] = {1, 5};
    tb_tensor_raw(&vals, "sp", SN_F32, 1, (int64_t[]){2}, sv, 8);
    tb_tensor_raw(&idx, NULL, SN_I64, 1, (int64_t[]){2}, si, 16);
    sn_pbw_msg(&sp, 1, &vals);
    sn_pbw_msg(&sp, 2, &idx);
    sn_pbw_int(&sp, 3, 2);
    sn_pbw_int(&sp, 3, 3);
    sn_pbw_msg(&g, 15, &sp);
    tb_model(&model, &g, NULL, 0);
    sn_model *m = NULL;
    int rc = sn_model_load_buffer(model.buf, model.len, NULL, &m, &err);
    CHECK_RC(rc, SNUG_OK, err, NULL);
    if (!rc) {
        const sn_init *in = &m->graph->inits[0];
        const float *d = in->t.data;
        CHECK(!strcmp(in->name, "sp") && in->t.rank == 2 && in->t.dims[1] == 3 && d[0] == 0 &&
              d[1] == 5 && d[5] == 7 && in->nbytes == 24);
        sn_model_free(m);
    }
    sn_pbw_free(&g);
    sn_pbw_free(&model);
    sn_pbw_free(&sp);
    sn_pbw_free(&idx);
    si[1] = 6; /* out of range */
    tb_tensor_raw(&idx, NULL, SN_I64, 1, (int64_t[]){2}, si, 16);
    sn_pbw_msg(&sp, 1, &vals);
    sn_pbw_msg(&sp, 2, &idx);
    sn_pbw_int(&sp, 3, 2);
    sn_pbw_int(&sp, 3, 3);
    sn_pbw_msg(&g, 15, &sp);
    tb_model(&model, &g, NULL, 0);
    CHECK_RC(sn_model_load_buffer(model.buf, model.len, NULL, &m, &err), SNUG_ERR_RANGE, err,
             "sparse_initializer 'sp'");
    sn_pbw *all[] = {&sp, &vals, &idx, &g, &model};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        sn_pbw_free(all[i]);

    /* not a model */
    CHECK_RC(sn_model_load_buffer("\x08\x07", 2, NULL, &m, &err), SNUG_ERR_PARSE, err, "no graph");
    CHECK_RC(sn_model_load_buffer("\x38\x07", 2, NULL, &m, &err), SNUG_ERR_PARSE, err,
             "should be a GraphProto message");
    CHECK_RC(sn_model_load_buffer("", 0, NULL, &m, &err), SNUG_ERR_PARSE, err, "no graph");
    CHECK_RC(sn_model_load("/nonexistent/model.onnx", &m, &err), SNUG_ERR_IO, err, "cannot open");
    CHECK_RC(sn_model_load("/tmp", &m, &err), SNUG_ERR_IO, err, "not a regular file");
    char p[256];
    path_in(p, sizeof p, "empty.onnx");
    tb_write_file(p, "", 0);
    CHECK_RC(sn_model_load(p, &m, &err), SNUG_ERR_PARSE, err, "empty file");
    path_in(p, sizeof p, "trunc.onnx");
    tb_write_file(p, "\x3a\x7f\x0a", 3); /* graph of 127 bytes, 1 present */
    CHECK_RC(sn_model_load(p, &m, &err), SNUG_ERR_PARSE, err,
             "trunc.onnx: malformed protobuf at byte 0: length 127 of field 7 runs past end in "
             "ModelProto");
}

/* ---- corpus -------------------------------------------------------------- */

/* A small model using most features: typed and raw initializers, strings,
 * attributes of every kind with a subgraph, a function with references,
 * value infos with nested types. */
static void build_rich_model(sn_pbw *model) {
    sn_pbw g = {0}, t = {0}, n = {0}, a = {0}, sub = {0}, fn = {0}, vi = {0};
    float f4[4] = {1, 2, 3, 4};
    tb_tensor_raw(&t, "w", SN_F32, 2, (int64_t[]){2, 2}, f4, 16);
    sn_pbw_msg(&g, 5, &t);
    sn_pbw_free(&t);
    tb_tensor_raw(&t, "ints", SN_I64, 1, (int64_t[]){2}, NULL, 0);
    sn_pbw_int(&t, 7, -1);
    sn_pbw_int(&t, 7, 300);
    sn_pbw_msg(&g, 5, &t);
    sn_pbw_free(&t);
    tb_tensor_raw(&t, "s", SN_STRING, 1, (int64_t[]){2}, NULL, 0);
    sn_pbw_str(&t, 6, "x");
    sn_pbw_str(&t, 6, "yz");
    sn_pbw_msg(&g, 5, &t);
    sn_pbw_free(&t);
    tb_node(&n, "Relu", "inner", (const char *[]){"a", NULL}, (const char *[]){"b", NULL});
    sn_pbw_msg(&sub, 1, &n);
    sn_pbw_free(&n);
    tb_value_info(&vi, "b", SN_F32, 2, (int64_t[]){-1, 3});
    sn_pbw_msg(&sub, 12, &vi);
    sn_pbw_free(&vi);
    tb_node(&n, "Loop", "loop", (const char *[]){"X", "w", NULL}, (const char *[]){"Y", NULL});
    sn_pbw_str(&a, 1, "body");
    sn_pbw_int(&a, 20, SN_ATTR_GRAPH);
    sn_pbw_msg(&a, 6, &sub);
    sn_pbw_msg(&n, 5, &a);
    sn_pbw_free(&a);
    tb_attr_int(&n, "axis", -1);
    sn_pbw_str(&a, 1, "perm");
    sn_pbw_int(&a, 20, SN_ATTR_INTS);
    sn_pbw_int(&a, 8, 1);
    sn_pbw_int(&a, 8, 0);
    sn_pbw_msg(&n, 5, &a);
    sn_pbw_free(&a);
    tb_tensor_raw(&t, "c", SN_F32, 0, NULL, f4, 4);
    sn_pbw_str(&a, 1, "value");
    sn_pbw_int(&a, 20, SN_ATTR_TENSOR);
    sn_pbw_msg(&a, 5, &t);
    sn_pbw_msg(&n, 5, &a);
    sn_pbw_free(&a);
    sn_pbw_free(&t);
    sn_pbw_msg(&g, 1, &n);
    sn_pbw_free(&n);
    tb_node(&n, "F", "call", (const char *[]){"Y", NULL}, (const char *[]){"Z", NULL});
    sn_pbw_str(&n, 7, "local");
    tb_attr_int(&n, "k", 3);
    sn_pbw_msg(&g, 1, &n);
    sn_pbw_free(&n);
    tb_value_info(&vi, "X", SN_F32, 2, (int64_t[]){-1, 2});
    sn_pbw_msg(&g, 11, &vi);
    sn_pbw_free(&vi);
    tb_value_info(&vi, "Z", SN_F32, -1, NULL);
    sn_pbw_msg(&g, 12, &vi);
    sn_pbw_free(&vi);
    sn_pbw_str(&fn, 1, "F");
    sn_pbw_str(&fn, 10, "local");
    sn_pbw_str(&fn, 4, "A");
    sn_pbw_str(&fn, 5, "B");
    tb_node(&n, "Softmax", NULL, (const char *[]){"A", NULL}, (const char *[]){"B", NULL});
    tb_attr_ref(&n, "axis", SN_ATTR_INT, "k");
    sn_pbw_msg(&fn, 7, &n);
    sn_pbw_free(&n);
    tb_model(model, &g, "local", 1);
    sn_pbw_msg(model, 25, &fn);
    sn_pbw_free(&g);
    sn_pbw_free(&sub);
    sn_pbw_free(&fn);
}

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) { /* xorshift64*: seeded, so failures repeat */
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 2685821657736338717ull;
}

static int g_loads, g_oks;

/* Loads a heap copy of exactly len bytes (so ASan sees any overread). */
static void try_load(const uint8_t *src, size_t len, const char *dir) {
    uint8_t *buf = malloc(len ? len : 1);
    if (len)
        memcpy(buf, src, len);
    sn_model *m = NULL;
    sn_err err = {0};
    int rc = sn_model_load_buffer(buf, len, dir, &m, &err);
    g_loads++;
    if (rc == SNUG_OK) {
        g_oks++;
        CHECK(m != NULL);
        sn_model_free(m);
    } else {
        CHECK(m == NULL && err.msg[0] != 0 && err.code == rc);
    }
    free(buf);
}

static void corpus(const uint8_t *b, size_t len, const char *dir, int flips) {
    for (size_t i = 0; i < 64 && i < len; i++)
        try_load(b, i, dir);
    for (int k = 1; k < 200; k++)
        try_load(b, len * (size_t)k / 200, dir);
    uint8_t *c = malloc(len);
    for (int k = 0; k < flips; k++) {
        memcpy(c, b, len);
        int n = 1 + (int)(rnd() % 4);
        for (int j = 0; j < n; j++) {
            size_t at = (size_t)(rnd() % len);
            switch (rnd() % 3) {
            case 0: c[at] ^= (uint8_t)(1u << (rnd() % 8)); break;
            case 1: c[at] = (uint8_t)rnd(); break;
            default: c[at] = (uint8_t)(0x80 | rnd()); break; /* long varints */
            }
        }
        /* flips near the start hit the structure; elsewhere mostly weights */
        try_load(c, (k % 7 == 0) ? len - (size_t)(rnd() % (len / 4 + 1)) : len, dir);
    }
    free(c);
}

static void test_corpus(void) {
    sn_pbw rich = {0};
    build_rich_model(&rich);
    sn_err err = {0};
    sn_model *m = NULL;
    int rc = sn_model_load_buffer(rich.buf, rich.len, NULL, &m, &err);
    CHECK_RC(rc, SNUG_OK, err, NULL);
    if (!rc) {
        CHECK(m->graph->n_node == 2 && !strcmp(m->graph->nodes[1].op_type, "Softmax") &&
              m->graph->nodes[1].attrs[0].i == 3);
        sn_model_free(m);
    }
    corpus(rich.buf, rich.len, g_dir, 3000);
    sn_pbw_free(&rich);

    void *buf;
    size_t len;
    if (sn_file_read(STORIES, &buf, &len, &err) == 0) {
        corpus(buf, len, NULL, 1000);
        sn_free(buf);
    } else {
        CHECK_RC(1, 0, err, NULL);
    }
    /* pure noise */
    uint8_t noise[256];
    for (int k = 0; k < 500; k++) {
        size_t n = (size_t)(rnd() % sizeof noise);
        for (size_t i = 0; i < n; i++)
            noise[i] = (uint8_t)rnd();
        try_load(noise, n, NULL);
    }
    /* .pb values: truncated and corrupted */
    sn_tensor t;
    sn_string ss[2] = {{"ab", 2}, {"c", 1}};
    sn_tensor items[2] = {
        {.kind = SN_KIND_TENSOR, .dtype = SN_F32, .rank = 1, .dims = {2}, .data = (float[]){1, 2}},
        {.kind = SN_KIND_TENSOR, .dtype = SN_STRING, .rank = 1, .dims = {2}, .data = ss}};
    sn_tensor seq = {.kind = SN_KIND_SEQUENCE, .optional = 1, .dtype = SN_F32, .n_items = 2,
                     .data = items};
    void *enc;
    size_t elen;
    CHECK(sn_value_encode_pb(&seq, "seq", &enc, &elen, &err) == 0);
    for (int k = 0; k < 2000; k++) {
        uint8_t *c = malloc(elen);
        memcpy(c, enc, elen);
        size_t n = k < (int)elen ? (size_t)k : elen;
        if (k >= (int)elen)
            c[rnd() % elen] = (uint8_t)rnd();
        void *owner;
        char *name;
        rc = sn_value_decode_pb(c, n, &t, &owner, &name, &err);
        if (rc == 0) {
            sn_free(owner);
            sn_free(name);
        } else {
            CHECK(err.msg[0] && owner == NULL);
        }
        free(c);
    }
    sn_free(enc);
    printf("corpus: %d loads, %d ok\n", g_loads, g_oks);
    CHECK(g_oks > 0 && g_oks < g_loads);
}

static void rm_tree(void) {
    static const char *files[] = {"model.onnx", "weights.bin", "sub/w2.bin", "out_link.bin",
                                  "in_link.bin", "empty.onnx", "trunc.onnx", "sub"};
    char p[256];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        path_in(p, sizeof p, files[i]);
        if (unlink(p) != 0)
            rmdir(p);
    }
    rmdir(g_dir);
}

int main(void) {
    if (!tb_tmpdir(g_dir, sizeof g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_external();
    test_bad_tensors();
    test_corpus();
    rm_tree();
    return test_done("test_onnx_bad");
}
