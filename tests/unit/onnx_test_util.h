/* Helpers for the loader tests: checks, and builders that write small
 * ONNX protobuf messages byte by byte with the loader's own writer (sn_pbw),
 * so tests can make models with exactly the defect they want. */
#ifndef SNUG_TEST_ONNX_UTIL_H
#define SNUG_TEST_ONNX_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "onnx/model.h"
#include "onnx/pb.h"

static int g_fails;
/* Checks not made because their data is missing (the ONNX test data that
 * scripts/deps.sh installs): a run with any exits 77, CTest's skip code. */
static int g_skips;

#define CHECK(cond)                                                          \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, \
                    #cond);                                                  \
            g_fails++;                                                       \
        }                                                                    \
    } while (0)

/* Expects status rc == want and, for errors, a message containing sub. */
static inline void check_rc(const char *file, int line, int rc, int want, const sn_err *err,
                            const char *sub) {
    if (rc == want && (want == 0 || (err->msg[0] && (!sub || strstr(err->msg, sub)))))
        return;
    fprintf(stderr, "%s:%d: got status %d (want %d), message '%s' (want '%s')\n", file, line, rc,
            want, rc ? err->msg : "", sub ? sub : "");
    g_fails++;
}
#define CHECK_RC(rc, want, err, sub) check_rc(__FILE__, __LINE__, (rc), (want), &(err), (sub))

static inline int test_done(const char *name) {
    if (g_fails) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, g_fails);
        return 1;
    }
    if (g_skips) {
        printf("%s: %d check(s) skipped (their data is missing)\n", name, g_skips);
        return 77;
    }
    printf("%s: ok\n", name);
    return 0;
}

/* ---- message builders (each appends fields to w) ------------------------ */

/* TensorProto with raw_data (raw may be NULL: then no data field). */
static inline void tb_tensor_raw(sn_pbw *w, const char *name, int dtype, int rank, const int64_t *dims,
                          const void *raw, size_t n) {
    for (int i = 0; i < rank; i++)
        sn_pbw_int(w, 1, dims[i]);
    sn_pbw_int(w, 2, dtype);
    if (name)
        sn_pbw_str(w, 8, name);
    if (raw)
        sn_pbw_bytes(w, 9, raw, n);
}

/* TensorProto that points at external data. */
static inline void tb_tensor_ext(sn_pbw *w, const char *name, int dtype, int rank, const int64_t *dims,
                          const char *location, long long offset, long long length) {
    tb_tensor_raw(w, name, dtype, rank, dims, NULL, 0);
    const char *keys[3] = {"location", "offset", "length"};
    char vals[3][64];
    snprintf(vals[0], sizeof vals[0], "%s", location);
    snprintf(vals[1], sizeof vals[1], "%lld", offset);
    snprintf(vals[2], sizeof vals[2], "%lld", length);
    for (int i = 0; i < 3; i++) {
        if (i > 0 && (i == 1 ? offset : length) < 0)
            continue;
        sn_pbw kv = {0};
        sn_pbw_str(&kv, 1, keys[i]);
        sn_pbw_str(&kv, 2, i == 0 ? location : vals[i]);
        sn_pbw_msg(w, 13, &kv);
        sn_pbw_free(&kv);
    }
    sn_pbw_int(w, 14, 1);
}

/* ValueInfoProto of a tensor; dims < 0 are written as dim_param "N". */
static inline void tb_value_info(sn_pbw *w, const char *name, int elem, int rank, const int64_t *dims) {
    sn_pbw shape = {0}, tt = {0}, tp = {0};
    for (int i = 0; i < rank; i++) {
        sn_pbw d = {0};
        if (dims[i] >= 0)
            sn_pbw_int(&d, 1, dims[i]);
        else
            sn_pbw_str(&d, 2, "N");
        sn_pbw_msg(&shape, 1, &d);
        sn_pbw_free(&d);
    }
    sn_pbw_int(&tt, 1, elem);
    if (rank >= 0)
        sn_pbw_msg(&tt, 2, &shape);
    sn_pbw_msg(&tp, 1, &tt);
    sn_pbw_str(w, 1, name);
    sn_pbw_msg(w, 2, &tp);
    sn_pbw_free(&shape);
    sn_pbw_free(&tt);
    sn_pbw_free(&tp);
}

/* NodeProto fields; inputs/outputs are NULL-terminated lists. Attributes
 * are appended by the caller with tb_attr_* into the same w. */
static inline void tb_node(sn_pbw *w, const char *op, const char *name, const char *const *ins,
                    const char *const *outs) {
    for (; ins && *ins; ins++)
        sn_pbw_str(w, 1, *ins);
    for (; outs && *outs; outs++)
        sn_pbw_str(w, 2, *outs);
    if (name)
        sn_pbw_str(w, 3, name);
    sn_pbw_str(w, 4, op);
}

static inline void tb_attr_int(sn_pbw *node, const char *name, int64_t v) {
    sn_pbw a = {0};
    sn_pbw_str(&a, 1, name);
    sn_pbw_int(&a, 20, SN_ATTR_INT);
    sn_pbw_int(&a, 3, v);
    sn_pbw_msg(node, 5, &a);
    sn_pbw_free(&a);
}

static inline void tb_attr_ref(sn_pbw *node, const char *name, int type, const char *ref) {
    sn_pbw a = {0};
    sn_pbw_str(&a, 1, name);
    sn_pbw_int(&a, 20, type);
    sn_pbw_str(&a, 21, ref);
    sn_pbw_msg(node, 5, &a);
    sn_pbw_free(&a);
}

/* ModelProto around a finished GraphProto (opset 17 plus one extra). */
static inline void tb_model(sn_pbw *w, const sn_pbw *graph, const char *extra_domain, int64_t extra_ver) {
    sn_pbw op = {0};
    sn_pbw_int(w, 1, 8);
    sn_pbw_str(w, 2, "snug-test");
    sn_pbw_str(&op, 1, "");
    sn_pbw_int(&op, 2, 17);
    sn_pbw_msg(w, 8, &op);
    sn_pbw_free(&op);
    if (extra_domain) {
        sn_pbw_str(&op, 1, extra_domain);
        sn_pbw_int(&op, 2, extra_ver);
        sn_pbw_msg(w, 8, &op);
        sn_pbw_free(&op);
    }
    sn_pbw_msg(w, 7, graph);
}

static inline int tb_write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    int ok = fwrite(p, 1, n, f) == n;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* A fresh temporary folder (mkdtemp), name into buf. */
static inline const char *tb_tmpdir(char *buf, size_t cap) {
    snprintf(buf, cap, "/tmp/snug-onnx-test-XXXXXX");
    return mkdtemp(buf);
}

#endif
