/* .npy files (format versions 1, 2 and 3; little-endian numeric dtypes and
 * bool, C order) and whole-file reads. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx/model.h"

int sn_file_read(const char *path, void **buf, size_t *len, sn_err *err) {
    *buf = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return sn_errf(err, SNUG_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return sn_errf(err, SNUG_ERR_IO, "'%s' is not a regular file", path);
    }
    size_t n = (size_t)st.st_size;
    char *b = sn_malloc(n + 1); /* +1: a NUL after the bytes, handy for text */
    if (!b) {
        close(fd);
        return sn_errf(err, SNUG_ERR_OOM, "out of memory reading '%s' (%zu bytes)", path, n);
    }
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(fd, b + got, n - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            int e = errno;
            close(fd);
            sn_free(b);
            return sn_errf(err, SNUG_ERR_IO, "cannot read '%s': %s", path,
                           k < 0 ? strerror(e) : "file shrank while reading");
        }
        got += (size_t)k;
    }
    close(fd);
    b[n] = 0;
    *buf = b;
    *len = n;
    return SNUG_OK;
}

static const struct {
    char code[3];
    sn_dtype dtype;
} k_npy_types[] = {
    {"f2", SN_F16}, {"f4", SN_F32}, {"f8", SN_F64}, {"i1", SN_I8},  {"i2", SN_I16},
    {"i4", SN_I32}, {"i8", SN_I64}, {"u1", SN_U8},  {"u2", SN_U16}, {"u4", SN_U32},
    {"u8", SN_U64}, {"b1", SN_BOOL},
};

/* Finds 'key' in the header dict and returns a pointer just past its ':'. */
static const char *npy_key(const char *h, const char *end, const char *key) {
    size_t kl = strlen(key);
    for (const char *p = h; p + kl + 2 <= end; p++) {
        if ((*p == '\'' || *p == '"') && !memcmp(p + 1, key, kl) && p[kl + 1] == *p) {
            p += kl + 2;
            while (p < end && (*p == ' ' || *p == ':'))
                p++;
            return p;
        }
    }
    return NULL;
}

int sn_npy_read(const char *path, sn_tensor *t, void **owner, sn_err *err) {
    void *vb;
    size_t len;
    *owner = NULL;
    SN_TRY(sn_file_read(path, &vb, &len, err));
    const uint8_t *b = vb;
    int rc = SNUG_OK;
    if (len < 10 || memcmp(b, "\x93NUMPY", 6)) {
        rc = sn_errf(err, SNUG_ERR_PARSE, "'%s' is not a .npy file", path);
        goto done;
    }
    size_t hl, ho;
    if (b[6] == 1) {
        hl = (size_t)b[8] | (size_t)b[9] << 8;
        ho = 10;
    } else if (b[6] == 2 || b[6] == 3) {
        if (len < 12) {
            rc = sn_errf(err, SNUG_ERR_PARSE, "'%s': truncated .npy header", path);
            goto done;
        }
        hl = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
        ho = 12;
    } else {
        rc = sn_errf(err, SNUG_ERR_UNSUPPORTED, "'%s': .npy format version %d", path, b[6]);
        goto done;
    }
    if (hl > len - ho) {
        rc = sn_errf(err, SNUG_ERR_PARSE, "'%s': .npy header runs past the end", path);
        goto done;
    }
    const char *h = (const char *)b + ho, *he = h + hl;
    const char *d = npy_key(h, he, "descr"), *fo = npy_key(h, he, "fortran_order"),
               *sh = npy_key(h, he, "shape");
    if (!d || !fo || !sh || d + 5 > he || (*d != '\'' && *d != '"')) {
        rc = sn_errf(err, SNUG_ERR_PARSE, "'%s': .npy header lacks descr, fortran_order or shape",
                     path);
        goto done;
    }
    if (he - fo >= 4 && !memcmp(fo, "True", 4)) {
        rc = sn_errf(err, SNUG_ERR_UNSUPPORTED, "'%s': Fortran-order .npy arrays are not supported",
                     path);
        goto done;
    }
    char order = d[1];
    memset(t, 0, sizeof *t);
    for (size_t i = 0; i < sizeof k_npy_types / sizeof k_npy_types[0]; i++)
        if (!memcmp(d + 2, k_npy_types[i].code, 2) && d[4] == d[0])
            t->dtype = k_npy_types[i].dtype;
    if (!t->dtype || (order != '<' && order != '|' && order != '=' &&
                      !(order == '>' && sn_dtype_size(t->dtype) == 1))) {
        int n = 0;
        while (d + 1 + n < he && d[1 + n] != d[0] && n < 16)
            n++;
        rc = sn_errf(err, SNUG_ERR_UNSUPPORTED, "'%s': .npy dtype '%.*s' is not supported", path,
                     n, d + 1);
        goto done;
    }
    if (*sh != '(') {
        rc = sn_errf(err, SNUG_ERR_PARSE, "'%s': bad .npy shape", path);
        goto done;
    }
    for (const char *p = sh + 1; p < he && *p != ')';) {
        if (*p == ' ' || *p == ',') {
            p++;
            continue;
        }
        if (*p < '0' || *p > '9' || t->rank >= SN_MAX_RANK) {
            rc = sn_errf(err, SNUG_ERR_PARSE, "'%s': bad .npy shape", path);
            goto done;
        }
        int64_t v = 0;
        while (p < he && *p >= '0' && *p <= '9') {
            if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *p - '0', &v)) {
                rc = sn_errf(err, SNUG_ERR_PARSE, "'%s': .npy dimension overflows", path);
                goto done;
            }
            p++;
        }
        t->dims[t->rank++] = v;
    }
    int64_t numel;
    size_t nb;
    if (!sn_dims_numel(t->rank, t->dims, &numel) ||
        (nb = sn_dtype_nbytes(t->dtype, numel)) == SIZE_MAX) {
        rc = sn_errf(err, SNUG_ERR_PARSE, "'%s': .npy shape overflows", path);
        goto done;
    }
    if (nb != len - ho - hl) {
        rc = sn_errf(err, SNUG_ERR_PARSE, "'%s': .npy data has %zu bytes, shape needs %zu", path,
                     len - ho - hl, nb);
        goto done;
    }
    void *data = sn_malloc(nb);
    if (!data) {
        rc = sn_errf(err, SNUG_ERR_OOM, "out of memory reading '%s'", path);
        goto done;
    }
    if (nb)
        memcpy(data, b + ho + hl, nb);
    t->data = data;
    *owner = data;
done:
    sn_free(vb);
    return rc;
}

int sn_npy_write(const char *path, const sn_tensor *t, sn_err *err) {
    const char *code = NULL;
    for (size_t i = 0; i < sizeof k_npy_types / sizeof k_npy_types[0]; i++)
        if (k_npy_types[i].dtype == t->dtype)
            code = k_npy_types[i].code;
    if (!code || t->kind != SN_KIND_TENSOR)
        return sn_errf(err, SNUG_ERR_UNSUPPORTED, "cannot write %s values to .npy",
                       t->kind != SN_KIND_TENSOR ? "non-tensor" : sn_dtype_name(t->dtype));
    if (!sn_tensor_shape_known(t))
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "cannot write a tensor of unknown shape");
    char h[512];
    int n = snprintf(h, sizeof h, "{'descr': '%c%s', 'fortran_order': False, 'shape': (",
                     code[1] == '1' ? '|' : '<', code);
    for (int i = 0; i < t->rank; i++)
        n += snprintf(h + n, sizeof h - (size_t)n, "%lld,%s", (long long)t->dims[i],
                      i + 1 < t->rank ? " " : "");
    if (t->rank > 1) /* numpy writes (2, 3) but (4,) */
        n--;
    n += snprintf(h + n, sizeof h - (size_t)n, "), }");
    size_t total = 10 + (size_t)n + 1;
    size_t pad = (64 - total % 64) % 64;
    memset(h + n, ' ', pad);
    h[n + (int)pad] = '\n';
    size_t hl = (size_t)n + pad + 1;
    uint8_t pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)hl, (uint8_t)(hl >> 8)};
    FILE *f = fopen(path, "wb");
    if (!f)
        return sn_errf(err, SNUG_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
    size_t nb = sn_tensor_nbytes(t);
    int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(h, 1, hl, f) == hl &&
             (nb == 0 || fwrite(t->data, 1, nb, f) == nb);
    if (fclose(f) != 0)
        ok = 0;
    if (!ok)
        return sn_errf(err, SNUG_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    return SNUG_OK;
}
