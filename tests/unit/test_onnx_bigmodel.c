/* Zero-copy proof: a model with more than 1 GiB of weights loads without
 * its resident memory growing by more than 5% of the weight bytes. The
 * files are sparse (headers written with pwrite, the weights are holes),
 * so the test needs almost no disk and runs in well under a second. Done
 * twice: weights as raw_data inside the model, and as external data. */
#include <fcntl.h>
#include <sys/resource.h>

#include "onnx/load_impl.h"
#include "onnx_test_util.h"

#define N_TENSOR 4
#define NUMEL (68ll << 20) /* floats per tensor: 272 MiB, 1088 MiB in all */

static long max_rss_kib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* The prefix of a TensorProto whose raw_data (nbytes) follows it directly;
 * the name is padded so the payload lands 64-byte aligned in the file when
 * the prefix starts at file offset at. */
static void tensor_head(sn_pbw *w, int k, size_t at, uint64_t nbytes, sn_pbw *field) {
    for (int pad = 0; pad < 64; pad++) {
        char name[128];
        snprintf(name, sizeof name, "weight_%d_%.*s", k, pad, "................................................................");
        sn_pbw_free(w);
        sn_pbw_free(field);
        sn_pbw_int(w, 1, NUMEL);
        sn_pbw_int(w, 2, SN_F32);
        sn_pbw_str(w, 8, name);
        sn_pbw_tag(w, 9, SN_PB_LEN);
        sn_pbw_varint(w, nbytes);
        /* GraphProto field 5 (initializer) wrapping it */
        sn_pbw_tag(field, 5, SN_PB_LEN);
        sn_pbw_varint(field, w->len + nbytes);
        if ((at + field->len + w->len) % 64 == 0)
            return;
    }
}

static int write_raw_model(const char *path) {
    const uint64_t nb = (uint64_t)NUMEL * 4;
    /* Graph payload = N × (field header + tensor header + nb). Lay out the
     * ModelProto header first, then each initializer's headers by pwrite. */
    sn_pbw head = {0}, op = {0};
    sn_pbw_int(&head, 1, 8);
    sn_pbw_str(&op, 1, "");
    sn_pbw_int(&op, 2, 17);
    sn_pbw_msg(&head, 8, &op);
    sn_pbw_free(&op);
    /* The graph length depends on the header sizes, which depend on the
     * padding, which depends on offsets: header sizes do not change with
     * the pad search below by more than the name, so compute in two steps. */
    sn_pbw th[N_TENSOR] = {{0}}, fh[N_TENSOR] = {{0}};
    size_t graph_len = 0;
    uint64_t gl_guess = 0;
    for (int iter = 0; iter < 3; iter++) {
        sn_pbw mh = {0};
        sn_pbw_raw(&mh, head.buf, head.len);
        sn_pbw_tag(&mh, 7, SN_PB_LEN);
        sn_pbw_varint(&mh, gl_guess);
        size_t at = mh.len;
        graph_len = 0;
        for (int k = 0; k < N_TENSOR; k++) {
            tensor_head(&th[k], k, at, nb, &fh[k]);
            size_t part = fh[k].len + th[k].len + (size_t)nb;
            at += part;
            graph_len += part;
        }
        sn_pbw_free(&mh);
        if (gl_guess == graph_len)
            break;
        gl_guess = graph_len;
    }
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    if (fd < 0)
        return -1;
    int ok = 1;
    sn_pbw mh = {0};
    sn_pbw_raw(&mh, head.buf, head.len);
    sn_pbw_tag(&mh, 7, SN_PB_LEN);
    sn_pbw_varint(&mh, graph_len);
    ok &= pwrite(fd, mh.buf, mh.len, 0) == (ssize_t)mh.len;
    off_t at = (off_t)mh.len;
    for (int k = 0; k < N_TENSOR; k++) {
        ok &= pwrite(fd, fh[k].buf, fh[k].len, at) == (ssize_t)fh[k].len;
        at += (off_t)fh[k].len;
        ok &= pwrite(fd, th[k].buf, th[k].len, at) == (ssize_t)th[k].len;
        at += (off_t)th[k].len + (off_t)nb;
        sn_pbw_free(&th[k]);
        sn_pbw_free(&fh[k]);
    }
    ok &= ftruncate(fd, at) == 0;
    ok &= close(fd) == 0;
    sn_pbw_free(&mh);
    sn_pbw_free(&head);
    return ok ? 0 : -1;
}

static int write_ext_model(const char *dir, const char *path) {
    const uint64_t nb = (uint64_t)NUMEL * 4;
    char data[256];
    snprintf(data, sizeof data, "%s/weights.data", dir);
    int fd = open(data, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)(nb * N_TENSOR)) != 0 || close(fd) != 0)
        return -1;
    sn_pbw g = {0}, t = {0}, model = {0};
    for (int k = 0; k < N_TENSOR; k++) {
        char name[32];
        snprintf(name, sizeof name, "weight_%d", k);
        tb_tensor_ext(&t, name, SN_F32, 1, (int64_t[]){NUMEL}, "weights.data",
                      (long long)(nb * (uint64_t)k), (long long)nb);
        sn_pbw_msg(&g, 5, &t);
        sn_pbw_free(&t);
    }
    tb_model(&model, &g, NULL, 0);
    int rc = tb_write_file(path, model.buf, model.len);
    sn_pbw_free(&g);
    sn_pbw_free(&model);
    return rc;
}

static void check_load(const char *path, int external) {
    long before = max_rss_kib();
    sn_model *m = NULL;
    sn_err err = {0};
    int rc = sn_model_load(path, &m, &err);
    long after = max_rss_kib();
    CHECK_RC(rc, SNUG_OK, err, NULL);
    if (rc)
        return;
    const uint64_t want = (uint64_t)NUMEL * 4 * N_TENSOR;
    CHECK(m->weight_bytes == want && m->graph->n_init == N_TENSOR);
    CHECK(sn_model_copied_tensors(m, NULL) == 0);
    for (int k = 0; k < N_TENSOR; k++) {
        const sn_init *in = &m->graph->inits[k];
        CHECK(in->external == external && in->nbytes == want / N_TENSOR);
        CHECK((uintptr_t)in->t.data % 64 == 0);
        if (!external) /* points into the map of the model file */
            CHECK((const char *)in->t.data == (const char *)m->priv->map + in->file_offset);
    }
    double grew = (double)(after - before) * 1024.0;
    printf("%s: %.1f MiB of weights, peak RSS grew by %.2f MiB\n",
           external ? "external data" : "raw_data", (double)want / (1 << 20), grew / (1 << 20));
    CHECK(grew < 0.05 * (double)want);
    sn_model_free(m);
}

int main(void) {
    char dir[64], path[128], data[128];
    if (!tb_tmpdir(dir, sizeof dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    snprintf(data, sizeof data, "%s/weights.data", dir);
    if (write_raw_model(path) == 0)
        check_load(path, 0);
    else
        CHECK(!"could not write the sparse model");
    unlink(path);
    if (write_ext_model(dir, path) == 0)
        check_load(path, 1);
    else
        CHECK(!"could not write the sparse external data");
    unlink(path);
    unlink(data);
    rmdir(dir);
    return test_done("test_onnx_bigmodel");
}
