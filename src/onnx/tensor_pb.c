/* TensorProto decoding. raw_data and external data stay where they are (in
 * the mmapped file) unless misaligned for their element type; typed fields
 * (float_data, int32_data, ...) are converted into arena memory. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx/load_impl.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "the loader maps little-endian raw_data directly");

enum {
    TP_DIMS = 1, TP_DATA_TYPE = 2, TP_SEGMENT = 3, TP_FLOAT = 4, TP_INT32 = 5,
    TP_STRING = 6, TP_INT64 = 7, TP_NAME = 8, TP_RAW = 9, TP_DOUBLE = 10,
    TP_UINT64 = 11, TP_EXTERNAL = 13, TP_LOCATION = 14,
};

char *sn_ld_str(sn_ld *c, const sn_pb_field *f) {
    return sn_arena_strn(c->a, f->data, f->len);
}

int sn_ld_oom(sn_ld *c) { return sn_errf(c->err, SNUG_ERR_OOM, "out of memory while loading"); }

/* Alignment kernels may assume for an element type. */
static size_t need_align(sn_dtype t) {
    size_t s = sn_dtype_size(t);
    return s > 8 ? 8 : (s ? s : 1);
}

bool sn_init_misaligned(const sn_init *in) {
    return in->t.data && ((uintptr_t)in->t.data & (need_align(in->t.dtype) - 1)) != 0;
}

/* The copy above read the source pages of a file map into this process;
 * nothing reads them again, so hand the whole pages inside [p, p+n) back
 * (they are re-read from the file if ever touched): resident memory then
 * holds the weights once, not twice. Only for our own read-only file maps,
 * never for a caller's buffer. */
bool sn_model_maps(const sn_model *m, const void *ptr, size_t n) {
    const struct sn_model_priv *mp = m->priv;
    const uint8_t *p = ptr;
    bool in_map = mp->map && p >= (const uint8_t *)mp->map && p + n <= (const uint8_t *)mp->map + mp->map_len;
    for (int i = 0; i < mp->n_ext && !in_map; i++)
        in_map = mp->ext[i].map && p >= (const uint8_t *)mp->ext[i].map &&
                 p + n <= (const uint8_t *)mp->ext[i].map + mp->ext[i].size;
    return in_map;
}

/* The open file behind [p, p+n), its offset there and its path, or -1. */
static int file_of(const sn_model *m, const void *ptr, size_t n, uint64_t *off, const char **path) {
    const struct sn_model_priv *mp = m->priv;
    const uint8_t *p = ptr;
    if (mp->map && p >= (const uint8_t *)mp->map && p + n <= (const uint8_t *)mp->map + mp->map_len) {
        *off = (uint64_t)(p - (const uint8_t *)mp->map);
        *path = m->path;
        return mp->fd;
    }
    for (int i = 0; i < mp->n_ext; i++)
        if (mp->ext[i].map && p >= (const uint8_t *)mp->ext[i].map &&
            p + n <= (const uint8_t *)mp->ext[i].map + mp->ext[i].size) {
            *off = (uint64_t)(p - (const uint8_t *)mp->ext[i].map);
            *path = mp->ext[i].path;
            return mp->ext[i].fd;
        }
    return -1;
}

const char *sn_model_file_of(const sn_model *m, const void *p, size_t n) {
    uint64_t off;
    const char *path = NULL;
    return file_of(m, p, n, &off, &path) < 0 ? NULL : path;
}

static int model_read(const sn_model *m, void *dst, const void *src, size_t n, bool drop_cache) {
    uint64_t off;
    const char *path = NULL;
    int fd = file_of(m, src, n, &off, &path);
    if (fd < 0) {
        memcpy(dst, src, n);
        return 0;
    }
    uint64_t off0 = off;
    size_t n0 = n;
    uint8_t *d = dst;
    while (n > 0) {
        ssize_t r = sn_io_pread(fd, path, d, n, off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? errno : EIO; /* 0: the file shrank under us */
        d += r;
        off += (uint64_t)r;
        n -= (size_t)r;
    }
    /* clean pages: dropping them costs a re-read only if the range is read again */
    if (drop_cache)
        (void)posix_fadvise(fd, (off_t)off0, (off_t)n0, POSIX_FADV_DONTNEED);
    return 0;
}

int sn_model_read(const sn_model *m, void *dst, const void *src, size_t n) { return model_read(m, dst, src, n, false); }

int sn_model_read_uncached(const sn_model *m, void *dst, const void *src, size_t n) {
    return model_read(m, dst, src, n, true);
}

void sn_model_release_all(const sn_model *m) {
    const struct sn_model_priv *mp = m->priv;
    if (mp->map)
        madvise(mp->map, mp->map_len, MADV_DONTNEED);
    for (int i = 0; i < mp->n_ext; i++)
        if (mp->ext[i].map)
            madvise(mp->ext[i].map, (size_t)mp->ext[i].size, MADV_DONTNEED);
}

void sn_model_release_bytes(const sn_model *m, const void *ptr, size_t n) {
    const uint8_t *p = ptr;
    if (!sn_model_maps(m, ptr, n))
        return;
    /* Rounded outward: the map is read-only and never written, so dropping
     * a neighbour's page costs at most a re-read from the page cache. */
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t b = (uintptr_t)p & ~(pg - 1), e = ((uintptr_t)p + n + pg - 1) & ~(pg - 1);
    if (e > b)
        madvise((void *)b, e - b, MADV_DONTNEED);
}

/* Points t->data at p, or copies when p is misaligned. */
static int place_bytes(sn_ld *c, sn_tensor *t, const uint8_t *p, size_t n) {
    if (n == 0) {
        t->data = NULL;
        return SNUG_OK;
    }
    bool aligned = ((uintptr_t)p & (need_align(t->dtype) - 1)) == 0;
    /* no_align_copy 2 (initializers): only small tensors are copied here; a
     * large misaligned one stays in the map and the executor makes its
     * aligned copy when a session needs it (snug info copies nothing). */
    if (aligned || c->no_align_copy == 1 || (c->no_align_copy == 2 && n >= SN_ALIGN_COPY_MAX)) {
        t->data = (void *)p; /* read-only map: kernels never write weights */
        /* Reading this tensor's header mapped the page cache around it into
         * the process (the kernel maps whole large folios, up to megabytes):
         * unmap it again so loading leaves the weights out of resident
         * memory until a kernel reads them. */
        if (c->m && n >= SN_ALIGN_COPY_MAX)
            sn_model_release_bytes(c->m, p, n);
        return SNUG_OK;
    }
    void *d = sn_arena_alloc(c->a, n, 64);
    if (!d)
        return sn_ld_oom(c);
    memcpy(d, p, n);
    t->data = d;
    if (c->m) {
        c->m->priv->n_copied++;
        c->m->priv->copied_bytes += n;
        sn_model_release_bytes(c->m, p, n);
    }
    return SNUG_OK;
}

/* ---- external data ----------------------------------------------------- */

static int bad_location(const char *loc) {
    if (!loc[0] || loc[0] == '/' || loc[0] == '\\')
        return 1;
    const char *p = loc;
    while (*p) {
        size_t n = strcspn(p, "/\\");
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return 1;
        p += n;
        if (*p)
            p++;
    }
    return 0;
}

static int ext_open(sn_ld *c, const char *tname, const char *loc, sn_ext_map **out) {
    struct sn_model_priv *pv = c->m->priv;
    for (int i = 0; i < pv->n_ext; i++) {
        if (!strcmp(pv->ext[i].location, loc)) {
            *out = &pv->ext[i];
            return SNUG_OK;
        }
    }
    if (!pv->real_dir) {
        char *rd = sn_io_realpath(c->dir);
        if (!rd)
            return sn_errf(c->err, SNUG_ERR_IO, "tensor '%s': cannot resolve model folder '%s': %s",
                           tname, c->dir, strerror(errno));
        pv->real_dir = sn_arena_strn(c->a, rd, strlen(rd));
        free(rd);
        if (!pv->real_dir)
            return sn_ld_oom(c);
    }
    size_t plen = strlen(c->dir) + strlen(loc) + 2;
    char *path = sn_malloc(plen);
    if (!path)
        return sn_ld_oom(c);
    snprintf(path, plen, "%s/%s", c->dir, loc);
    char *rp = sn_io_realpath(path);
    if (!rp) {
        int e = errno;
        sn_free(path);
        return sn_errf(c->err, SNUG_ERR_IO, "tensor '%s': external data file '%s' not found: %s",
                       tname, loc, strerror(e));
    }
    size_t rdl = strlen(pv->real_dir);
    int inside = !strncmp(rp, pv->real_dir, rdl) &&
                 (rp[rdl] == '/' || (rdl == 1 && pv->real_dir[0] == '/'));
    if (!inside) {
        sn_errf(c->err, SNUG_ERR_INVALID_ARG,
                "tensor '%s': external data file '%s' resolves to '%s', outside the model folder '%s'",
                tname, loc, rp, pv->real_dir);
        free(rp);
        sn_free(path);
        return SNUG_ERR_INVALID_ARG;
    }
    int fd = sn_io_open(rp);
    int e = errno;
    free(rp);
    if (fd < 0) {
        sn_free(path);
        return sn_errf(c->err, SNUG_ERR_IO, "tensor '%s': cannot open external data file '%s': %s",
                       tname, loc, strerror(e));
    }
    struct stat st;
    int st_rc = sn_io_fstat(fd, path, &st);
    if (st_rc != 0 || !S_ISREG(st.st_mode)) {
        e = errno;
        close(fd);
        sn_free(path);
        if (st_rc != 0)
            return sn_errf(c->err, SNUG_ERR_IO, "tensor '%s': cannot stat external data '%s': %s", tname,
                           loc, strerror(e));
        return sn_errf(c->err, SNUG_ERR_IO, "tensor '%s': external data '%s' is not a regular file",
                       tname, loc);
    }
    void *map = NULL;
    if (st.st_size > 0) {
        map = sn_io_mmap(fd, path, (size_t)st.st_size);
        if (map == MAP_FAILED) {
            e = errno;
            close(fd);
            sn_free(path);
            return sn_errf(c->err, SNUG_ERR_IO, "tensor '%s': cannot map external data '%s': %s",
                           tname, loc, strerror(e));
        }
        /* As the model file's map (load.c): a fault brings in its page, not
         * a read-around that would map weights nothing reads, or that the
         * executor released, into this process. */
        madvise(map, (size_t)st.st_size, MADV_RANDOM);
    }
    if (pv->n_ext == pv->cap_ext) {
        int cap = pv->cap_ext ? pv->cap_ext * 2 : 4;
        sn_ext_map *x = sn_realloc(pv->ext, (size_t)cap * sizeof *x);
        if (!x)
            goto oom;
        pv->ext = x;
        pv->cap_ext = cap;
    }
    sn_ext_map *x = &pv->ext[pv->n_ext];
    x->location = sn_arena_strn(c->a, loc, strlen(loc));
    x->path = sn_arena_strn(c->a, path, strlen(path));
    if (!x->location || !x->path)
        goto oom;
    sn_free(path);
    x->map = map;
    x->size = (uint64_t)st.st_size;
    x->fd = fd;
    pv->n_ext++;
    *out = x;
    return SNUG_OK;
oom:
    if (map)
        munmap(map, (size_t)st.st_size);
    close(fd);
    sn_free(path);
    return sn_ld_oom(c);
}

static int parse_u64(const char *s, uint64_t *v) {
    if (!*s)
        return 0;
    uint64_t x = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || __builtin_mul_overflow(x, 10, &x) ||
            __builtin_add_overflow(x, (uint64_t)(*s - '0'), &x))
            return 0;
    }
    *v = x;
    return 1;
}

static int ext_data(sn_ld *c, sn_pb *r, const char *tname, sn_tensor *t, size_t expect,
                    sn_init *init) {
    const char *loc = NULL;
    uint64_t off = 0, len = UINT64_MAX;
    sn_pb_field f;
    sn_pb rr = *r; /* re-scan the TensorProto for external_data entries */
    for (;;) {
        SN_TRY(sn_pb_next(&rr, &f));
        if (!f.num)
            break;
        if (f.num != TP_EXTERNAL)
            continue;
        sn_pb sub;
        sn_kv kv;
        SN_TRY(sn_pb_sub(&rr, &f, "StringStringEntryProto", &sub));
        SN_TRY(sn_ld_kv(c, &sub, &kv));
        if (!strcmp(kv.key, "location"))
            loc = kv.value;
        else if (!strcmp(kv.key, "offset") && !parse_u64(kv.value, &off))
            return sn_errf(c->err, SNUG_ERR_PARSE, "tensor '%s': bad external data offset '%s'",
                           tname, kv.value);
        else if (!strcmp(kv.key, "length") && !parse_u64(kv.value, &len))
            return sn_errf(c->err, SNUG_ERR_PARSE, "tensor '%s': bad external data length '%s'",
                           tname, kv.value);
    }
    if (!loc)
        return sn_errf(c->err, SNUG_ERR_PARSE, "tensor '%s': external data without a location",
                       tname);
    if (t->dtype == SN_STRING)
        return sn_errf(c->err, SNUG_ERR_UNSUPPORTED,
                       "tensor '%s': string tensors cannot use external data", tname);
    if (bad_location(loc))
        return sn_errf(c->err, SNUG_ERR_INVALID_ARG,
                       "tensor '%s': external data location '%s' must be a relative path "
                       "without '..' inside the model folder", tname, loc);
    if (!c->dir || !c->m)
        return sn_errf(c->err, SNUG_ERR_INVALID_ARG,
                       "tensor '%s': external data '%s' but no model folder to resolve it in",
                       tname, loc);
    sn_ext_map *e = NULL;
    SN_TRY(ext_open(c, tname, loc, &e));
    if (len == UINT64_MAX)
        len = off <= e->size ? e->size - off : 0;
    if (off > e->size || len > e->size - off)
        return sn_errf(c->err, SNUG_ERR_RANGE,
                       "tensor '%s': external data '%s' offset %llu + length %llu runs past the "
                       "file's end (%llu bytes)", tname, loc, (unsigned long long)off,
                       (unsigned long long)len, (unsigned long long)e->size);
    if (len != expect)
        return sn_errf(c->err, SNUG_ERR_PARSE,
                       "tensor '%s': external data '%s' has %llu bytes, shape and type need %zu",
                       tname, loc, (unsigned long long)len, expect);
    SN_TRY(place_bytes(c, t, (const uint8_t *)e->map + off, (size_t)len));
    if (init) {
        init->external = 1;
        init->location = e->location;
        init->file_offset = off;
        init->nbytes = len;
    }
    return SNUG_OK;
}

/* ---- typed data fields ----------------------------------------------- */

static void store_int(sn_dtype t, void *d, size_t i, uint64_t v) {
    switch (t) {
    case SN_BOOL: ((uint8_t *)d)[i] = v != 0; break;
    case SN_I8: case SN_U8: case SN_U4: case SN_I4:
    case SN_F8E4M3FN: case SN_F8E4M3FNUZ: case SN_F8E5M2: case SN_F8E5M2FNUZ:
    case SN_F4E2M1: case SN_F8E8M0: case SN_U2: case SN_I2:
        ((uint8_t *)d)[i] = (uint8_t)v; break;
    case SN_I16: case SN_U16: case SN_F16: case SN_BF16:
        ((uint16_t *)d)[i] = (uint16_t)v; break;
    case SN_I32: case SN_U32: ((uint32_t *)d)[i] = (uint32_t)v; break;
    default: ((uint64_t *)d)[i] = v; break;
    }
}

/* Which typed field carries dtype t, and how many values an element needs. */
static int typed_field(sn_dtype t) {
    switch (t) {
    case SN_F32: case SN_C64: return TP_FLOAT;
    case SN_F64: case SN_C128: return TP_DOUBLE;
    case SN_I64: return TP_INT64;
    case SN_U32: case SN_U64: return TP_UINT64;
    case SN_STRING: return TP_STRING;
    default: return TP_INT32;
    }
}

static const char *field_name(int f) {
    switch (f) {
    case TP_FLOAT: return "float_data";
    case TP_DOUBLE: return "double_data";
    case TP_INT64: return "int64_data";
    case TP_UINT64: return "uint64_data";
    case TP_STRING: return "string_data";
    default: return "int32_data";
    }
}

int sn_ld_tensor(sn_ld *c, sn_pb *r, sn_tensor *t, sn_init *init, const char **name_out) {
    sn_pb_field f;
    sn_pb start = *r;
    const char *name = "";
    int64_t dtype = 0, location = 0;
    uint64_t dims[SN_MAX_RANK];
    size_t rank = 0, cnt[16] = {0};
    const uint8_t *raw = NULL;
    size_t raw_len = 0, raw_off = 0;
    int has_raw = 0;

    memset(t, 0, sizeof *t);
    /* Pass 1: scalars, raw_data, counts of the typed fields. */
    for (;;) {
        SN_TRY(sn_pb_next(r, &f));
        if (!f.num)
            break;
        size_t n = 0;
        switch (f.num) {
        case TP_DIMS:
            SN_TRY(sn_pb_count_varints(r, &f, &n));
            if (n > SN_MAX_RANK - rank)
                return sn_errf(c->err, SNUG_ERR_UNSUPPORTED,
                               "tensor at byte %zu: rank above %d", f.off, SN_MAX_RANK);
            SN_TRY(sn_pb_get_varints(r, &f, dims, SN_MAX_RANK, &rank));
            break;
        case TP_DATA_TYPE: SN_TRY(sn_pb_int(r, &f, &dtype)); break;
        case TP_SEGMENT:
            return sn_errf(c->err, SNUG_ERR_UNSUPPORTED,
                           "tensor at byte %zu: segmented tensors are not supported", f.off);
        case TP_FLOAT: SN_TRY(sn_pb_count_fixed(r, &f, 4, &n)); cnt[f.num] += n; break;
        case TP_DOUBLE: SN_TRY(sn_pb_count_fixed(r, &f, 8, &n)); cnt[f.num] += n; break;
        case TP_INT32: case TP_INT64: case TP_UINT64:
            SN_TRY(sn_pb_count_varints(r, &f, &n));
            cnt[f.num] += n;
            break;
        case TP_STRING:
            if (f.wire != SN_PB_LEN)
                return sn_pb_fail(r, f.off, "string_data with wire type %d", f.wire);
            cnt[f.num]++;
            break;
        case TP_NAME:
            if (f.wire != SN_PB_LEN)
                return sn_pb_fail(r, f.off, "name with wire type %d", f.wire);
            if (!(name = sn_ld_str(c, &f)))
                return sn_ld_oom(c);
            break;
        case TP_RAW:
            if (f.wire != SN_PB_LEN)
                return sn_pb_fail(r, f.off, "raw_data with wire type %d", f.wire);
            raw = f.data;
            raw_len = f.len;
            raw_off = sn_pb_off(r, f.data);
            has_raw = 1;
            break;
        case TP_LOCATION: SN_TRY(sn_pb_int(r, &f, &location)); break;
        default: break;
        }
    }
    if (name_out)
        *name_out = name;
    if (init)
        init->name = name;
    if (!sn_dtype_valid((int)dtype) || dtype != (int)dtype)
        return sn_errf(c->err, SNUG_ERR_UNSUPPORTED, "tensor '%s': unknown data_type %lld",
                       name, (long long)dtype);
    t->kind = SN_KIND_TENSOR;
    t->dtype = (sn_dtype)dtype;
    t->rank = (int)rank;
    for (size_t i = 0; i < rank; i++) {
        if ((int64_t)dims[i] < 0)
            return sn_errf(c->err, SNUG_ERR_PARSE, "tensor '%s': negative dimension %lld",
                           name, (long long)(int64_t)dims[i]);
        t->dims[i] = (int64_t)dims[i];
    }
    int64_t numel;
    if (!sn_dims_numel(t->rank, t->dims, &numel))
        return sn_errf(c->err, SNUG_ERR_PARSE,
                       "tensor '%s': element count of its dimensions overflows", name);
    size_t expect = sn_dtype_nbytes(t->dtype, numel);
    if (expect == SIZE_MAX || (uint64_t)numel > SIZE_MAX / 16)
        return sn_errf(c->err, SNUG_ERR_PARSE, "tensor '%s': byte size overflows", name);

    if (location == 1) {
        *r = start;
        SN_TRY(ext_data(c, r, name, t, expect, init));
        if (c->m && init)
            c->m->weight_bytes += expect;
        return SNUG_OK;
    }
    if (init) {
        init->external = 0;
        init->location = NULL;
        init->nbytes = expect;
        init->file_offset = has_raw ? raw_off : 0;
    }
    if (c->m && init)
        c->m->weight_bytes += expect;
    if (has_raw && t->dtype != SN_STRING) {
        if (raw_len != expect)
            return sn_errf(c->err, SNUG_ERR_PARSE,
                           "tensor '%s': raw_data has %zu bytes, shape and type need %zu",
                           name, raw_len, expect);
        return place_bytes(c, t, raw, raw_len);
    }
    int tf = typed_field(t->dtype);
    size_t want = (size_t)numel;
    if (t->dtype == SN_C64 || t->dtype == SN_C128)
        want *= 2;
    if (t->dtype == SN_U4 || t->dtype == SN_I4 || t->dtype == SN_F4E2M1 || t->dtype == SN_U2 ||
        t->dtype == SN_I2)
        want = expect; /* packed: one int32 value per byte */
    if (cnt[tf] != want) {
        if (numel == 0 && cnt[tf] == 0)
            return SNUG_OK;
        return sn_errf(c->err, SNUG_ERR_PARSE, "tensor '%s': %s has %zu values, shape needs %zu",
                       name, field_name(tf), cnt[tf], want);
    }
    size_t nbytes = t->dtype == SN_STRING ? want * sizeof(sn_string) : expect;
    void *d = sn_arena_alloc(c->a, nbytes, 64);
    if (!d)
        return sn_ld_oom(c);
    t->data = d;
    /* Pass 2: convert the typed field into the element type. */
    *r = start;
    size_t k = 0;
    for (;;) {
        SN_TRY(sn_pb_next(r, &f));
        if (!f.num)
            break;
        if ((int)f.num != tf)
            continue;
        if (tf == TP_FLOAT) {
            SN_TRY(sn_pb_get_fixed(r, &f, 4, d, want, &k));
        } else if (tf == TP_DOUBLE) {
            SN_TRY(sn_pb_get_fixed(r, &f, 8, d, want, &k));
        } else if (tf == TP_STRING) {
            sn_string *s = (sn_string *)d + k++;
            s->ptr = (const char *)f.data;
            s->len = f.len;
        } else if (f.wire == SN_PB_VARINT) {
            store_int(t->dtype, d, k++, f.v);
        } else {
            const uint8_t *p = f.data, *end = f.data + f.len;
            while (p < end) {
                uint64_t v;
                size_t used = sn_pb_varint(p, end, &v);
                if (!used)
                    return sn_pb_fail(r, sn_pb_off(r, p), "bad varint in %s", field_name(tf));
                if (k >= want)
                    return sn_pb_fail(r, f.off, "more values than counted in %s", field_name(tf));
                store_int(t->dtype, d, k++, v);
                p += used;
            }
        }
    }
    return SNUG_OK;
}

/* ---- sparse tensors ---------------------------------------------------- */

int sn_ld_sparse(sn_ld *c, sn_pb *r, sn_tensor *t, const char **name_out) {
    sn_tensor vals = {0}, idx = {0};
    const char *name = "";
    uint64_t dims[SN_MAX_RANK];
    size_t rank = 0;
    int have_vals = 0, have_idx = 0;
    int no_copy = c->no_align_copy;
    sn_pb_field f;
    for (;;) {
        SN_TRY(sn_pb_next(r, &f));
        if (!f.num)
            break;
        sn_pb sub;
        size_t n;
        if (f.num == 1 || f.num == 2) {
            SN_TRY(sn_pb_sub(r, &f, "TensorProto", &sub));
            c->no_align_copy = 0; /* indices are read as int64 below */
            int rc = sn_ld_tensor(c, &sub, f.num == 1 ? &vals : &idx, NULL,
                                  f.num == 1 ? &name : NULL);
            c->no_align_copy = no_copy;
            SN_TRY(rc);
            have_vals |= f.num == 1;
            have_idx |= f.num == 2;
        } else if (f.num == 3) {
            SN_TRY(sn_pb_count_varints(r, &f, &n));
            if (n > SN_MAX_RANK - rank)
                return sn_errf(c->err, SNUG_ERR_UNSUPPORTED, "sparse tensor rank above %d",
                               SN_MAX_RANK);
            SN_TRY(sn_pb_get_varints(r, &f, dims, SN_MAX_RANK, &rank));
        }
    }
    if (name_out)
        *name_out = name;
    if (!have_vals || !have_idx)
        return sn_errf(c->err, SNUG_ERR_PARSE, "sparse tensor '%s' lacks values or indices", name);
    memset(t, 0, sizeof *t);
    t->dtype = vals.dtype;
    t->rank = (int)rank;
    for (size_t i = 0; i < rank; i++) {
        if ((int64_t)dims[i] < 0)
            return sn_errf(c->err, SNUG_ERR_PARSE, "sparse tensor '%s': negative dimension", name);
        t->dims[i] = (int64_t)dims[i];
    }
    int64_t numel;
    if (!sn_dims_numel(t->rank, t->dims, &numel))
        return sn_errf(c->err, SNUG_ERR_PARSE, "sparse tensor '%s': dimensions overflow", name);
    if (vals.dtype == SN_STRING || vals.dtype == SN_U4 || vals.dtype == SN_I4 ||
        vals.dtype == SN_F4E2M1 || vals.dtype == SN_U2 || vals.dtype == SN_I2)
        return sn_errf(c->err, SNUG_ERR_UNSUPPORTED, "sparse tensor '%s' of type %s", name,
                       sn_dtype_name(vals.dtype));
    int64_t nnz = sn_tensor_numel(&vals);
    if (vals.rank != 1 || idx.dtype != SN_I64 ||
        !((idx.rank == 1 && idx.dims[0] == nnz) ||
          (idx.rank == 2 && idx.dims[0] == nnz && idx.dims[1] == t->rank)))
        return sn_errf(c->err, SNUG_ERR_PARSE,
                       "sparse tensor '%s': values must be [NNZ] and int64 indices [NNZ] or "
                       "[NNZ, rank]", name);
    size_t es = sn_dtype_size(t->dtype), nb = sn_dtype_nbytes(t->dtype, numel);
    if (nb == SIZE_MAX)
        return sn_errf(c->err, SNUG_ERR_PARSE, "sparse tensor '%s': size overflows", name);
    /* Densifying costs the dense size in memory; a few bytes of protobuf
     * must not make the loader write gigabytes. */
    if (nb > SN_SPARSE_DENSE_MAX)
        return sn_errf(c->err, SNUG_ERR_UNSUPPORTED,
                       "sparse tensor '%s': %zu dense bytes, more than the %llu that are densified",
                       name, nb, (unsigned long long)SN_SPARSE_DENSE_MAX);
    uint8_t *d = sn_arena_alloc(c->a, nb, 64);
    if (!d)
        return sn_ld_oom(c);
    int64_t strides[SN_MAX_RANK];
    sn_strides(t->rank, t->dims, strides);
    for (int64_t i = 0; i < nnz; i++) {
        int64_t lin = 0;
        if (idx.rank == 1) {
            lin = ((const int64_t *)idx.data)[i];
        } else {
            for (int j = 0; j < t->rank; j++) {
                int64_t v = ((const int64_t *)idx.data)[i * t->rank + j];
                if (v < 0 || v >= t->dims[j])
                    return sn_errf(c->err, SNUG_ERR_RANGE, "sparse tensor '%s': index out of range",
                                   name);
                lin += v * strides[j];
            }
        }
        if (lin < 0 || lin >= numel)
            return sn_errf(c->err, SNUG_ERR_RANGE, "sparse tensor '%s': index out of range", name);
        memcpy(d + (size_t)lin * es, (const uint8_t *)vals.data + (size_t)i * es, es);
    }
    t->data = nb ? d : NULL;
    return SNUG_OK;
}
