/* Every model of the ONNX backend test data loads, and every .pb beside it
 * decodes with the type the model declares and re-encodes to the very same
 * bytes. Skips when the test data is not installed. */
#include <glob.h>

#include "onnx_test_util.h"

#define TESTDATA "/usr/share/libonnx-testdata/data"

/* The declared type of test file input_K / output_K: inputs count the
 * graph inputs that are not initializers. */
static const sn_type *declared(const sn_model *m, const char *file) {
    const sn_pgraph *g = m->graph;
    const char *base = strrchr(file, '/') + 1;
    int out = !strncmp(base, "output_", 7);
    int idx = atoi(base + (out ? 7 : 6));
    if (out)
        return idx < g->n_output ? &g->outputs[idx].type : NULL;
    for (int i = 0, k = 0; i < g->n_input; i++) {
        int is_init = 0;
        for (int j = 0; j < g->n_init && !is_init; j++)
            is_init = !strcmp(g->inits[j].name, g->inputs[i].name);
        if (!is_init && k++ == idx)
            return &g->inputs[i].type;
    }
    return NULL;
}

int main(void) {
    glob_t models;
    if (glob(TESTDATA "/*/*/model.onnx", 0, NULL, &models) != 0) {
        printf("skip: no ONNX test data at %s\n", TESTDATA);
        return 77;
    }
    int n_models = 0, n_pb = 0;
    for (size_t i = 0; i < models.gl_pathc; i++) {
        sn_model *m = NULL;
        sn_err err = {0};
        int rc = sn_model_load(models.gl_pathv[i], &m, &err);
        CHECK_RC(rc, SNUG_OK, err, NULL);
        if (rc)
            continue;
        n_models++;
        char pat[1024];
        snprintf(pat, sizeof pat, "%s/test_data_set_*/*.pb", m->dir);
        glob_t pbs;
        if (glob(pat, 0, NULL, &pbs) != 0)
            pbs.gl_pathc = 0;
        for (size_t j = 0; j < pbs.gl_pathc; j++) {
            void *buf, *owner, *enc;
            size_t len, elen;
            char *name;
            sn_tensor t;
            if (sn_file_read(pbs.gl_pathv[j], &buf, &len, &err)) {
                CHECK_RC(1, 0, err, NULL);
                continue;
            }
            rc = sn_value_decode_pb_typed(buf, len, declared(m, pbs.gl_pathv[j]), &t, &owner,
                                          &name, &err);
            if (rc) {
                fprintf(stderr, "%s: %s\n", pbs.gl_pathv[j], err.msg);
                g_fails++;
            } else {
                n_pb++;
                if (sn_value_encode_pb(&t, name, &enc, &elen, &err) != 0 || elen != len ||
                    memcmp(enc, buf, len) != 0) {
                    fprintf(stderr, "%s: re-encoding differs\n", pbs.gl_pathv[j]);
                    g_fails++;
                }
                sn_free(enc);
                sn_free(owner);
                sn_free(name);
            }
            sn_free(buf);
        }
        if (pbs.gl_pathc)
            globfree(&pbs);
        sn_model_free(m);
    }
    globfree(&models);
    printf("%d models, %d .pb files\n", n_models, n_pb);
    CHECK(n_models > 1000 && n_pb > 3000);
    return test_done("test_onnx_testdata");
}
