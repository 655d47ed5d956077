#include <stdio.h>
#include <string.h>

#include "onnx/pb.h"

void sn_pb_init(sn_pb *r, const void *base, const void *buf, size_t len,
                const char *what, sn_err *err) {
    r->base = base;
    r->p = buf;
    r->end = (const uint8_t *)buf + len;
    r->what = what;
    r->depth = 0;
    r->err = err;
}

int sn_pb_fail(const sn_pb *r, size_t off, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sn_errf(r->err, SNUG_ERR_PARSE, "malformed protobuf at byte %zu: %s in %s",
                   off, msg, r->what);
}

size_t sn_pb_varint(const uint8_t *p, const uint8_t *end, uint64_t *v) {
    uint64_t x = 0;
    for (size_t i = 0; i < 10; i++) {
        if (p + i >= end)
            return 0;
        uint8_t b = p[i];
        if (i == 9 && b > 1) /* bits beyond 64 */
            return 0;
        x |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *v = x;
            return i + 1;
        }
    }
    return 0;
}

int sn_pb_next(sn_pb *r, sn_pb_field *f) {
    memset(f, 0, sizeof *f);
    if (r->p >= r->end)
        return SNUG_OK;
    size_t off = sn_pb_off(r, r->p);
    uint64_t key;
    size_t n = sn_pb_varint(r->p, r->end, &key);
    if (!n)
        return sn_pb_fail(r, off, "truncated or overlong field tag");
    uint64_t num = key >> 3;
    int wire = (int)(key & 7);
    if (num == 0 || num > 536870911u)
        return sn_pb_fail(r, off, "invalid field number %llu", (unsigned long long)num);
    const uint8_t *p = r->p + n;
    size_t left = (size_t)(r->end - p);
    switch (wire) {
    case SN_PB_VARINT:
        n = sn_pb_varint(p, r->end, &f->v);
        if (!n)
            return sn_pb_fail(r, off, "truncated varint (field %u)", (unsigned)num);
        p += n;
        break;
    case SN_PB_I64:
        if (left < 8)
            return sn_pb_fail(r, off, "truncated 64-bit value (field %u)", (unsigned)num);
        for (int i = 0; i < 8; i++)
            f->v |= (uint64_t)p[i] << (8 * i);
        p += 8;
        break;
    case SN_PB_I32:
        if (left < 4)
            return sn_pb_fail(r, off, "truncated 32-bit value (field %u)", (unsigned)num);
        for (int i = 0; i < 4; i++)
            f->v |= (uint64_t)p[i] << (8 * i);
        p += 4;
        break;
    case SN_PB_LEN: {
        uint64_t len;
        n = sn_pb_varint(p, r->end, &len);
        if (!n)
            return sn_pb_fail(r, off, "truncated length (field %u)", (unsigned)num);
        p += n;
        if (len > (uint64_t)(r->end - p))
            return sn_pb_fail(r, off, "length %llu of field %u runs past end",
                              (unsigned long long)len, (unsigned)num);
        f->data = p;
        f->len = (size_t)len;
        p += len;
        break;
    }
    default:
        return sn_pb_fail(r, off, "unsupported wire type %d (field %u)", wire, (unsigned)num);
    }
    f->num = (uint32_t)num;
    f->wire = wire;
    f->off = off;
    r->p = p;
    return SNUG_OK;
}

int sn_pb_sub(const sn_pb *r, const sn_pb_field *f, const char *what, sn_pb *sub) {
    if (f->wire != SN_PB_LEN)
        return sn_pb_fail(r, f->off, "field %u should be a %s message but has wire type %d",
                          f->num, what, f->wire);
    if (r->depth + 1 > SN_PB_MAX_DEPTH)
        return sn_pb_fail(r, f->off, "messages nested deeper than %d", SN_PB_MAX_DEPTH);
    sub->base = r->base;
    sub->p = f->data;
    sub->end = f->data + f->len;
    sub->what = what;
    sub->depth = r->depth + 1;
    sub->err = r->err;
    return SNUG_OK;
}

int sn_pb_int(const sn_pb *r, const sn_pb_field *f, int64_t *out) {
    if (f->wire != SN_PB_VARINT)
        return sn_pb_fail(r, f->off, "field %u should be a varint but has wire type %d",
                          f->num, f->wire);
    *out = (int64_t)f->v;
    return SNUG_OK;
}

int sn_pb_float(const sn_pb *r, const sn_pb_field *f, float *out) {
    if (f->wire != SN_PB_I32)
        return sn_pb_fail(r, f->off, "field %u should be a 32-bit float but has wire type %d",
                          f->num, f->wire);
    uint32_t u = (uint32_t)f->v;
    memcpy(out, &u, 4);
    return SNUG_OK;
}

int sn_pb_double(const sn_pb *r, const sn_pb_field *f, double *out) {
    if (f->wire != SN_PB_I64)
        return sn_pb_fail(r, f->off, "field %u should be a 64-bit double but has wire type %d",
                          f->num, f->wire);
    memcpy(out, &f->v, 8);
    return SNUG_OK;
}

int sn_pb_count_varints(const sn_pb *r, const sn_pb_field *f, size_t *n) {
    if (f->wire == SN_PB_VARINT) {
        *n = 1;
        return SNUG_OK;
    }
    if (f->wire != SN_PB_LEN)
        return sn_pb_fail(r, f->off, "field %u should be varints but has wire type %d",
                          f->num, f->wire);
    size_t c = 0;
    for (size_t i = 0; i < f->len; i++)
        c += !(f->data[i] & 0x80);
    if (f->len && (f->data[f->len - 1] & 0x80))
        return sn_pb_fail(r, sn_pb_off(r, f->data + f->len - 1),
                          "truncated varint in packed field %u", f->num);
    *n = c;
    return SNUG_OK;
}

int sn_pb_count_fixed(const sn_pb *r, const sn_pb_field *f, int width, size_t *n) {
    int wire = width == 4 ? SN_PB_I32 : SN_PB_I64;
    if (f->wire == wire) {
        *n = 1;
        return SNUG_OK;
    }
    if (f->wire != SN_PB_LEN)
        return sn_pb_fail(r, f->off, "field %u should be %d-bit values but has wire type %d",
                          f->num, width * 8, f->wire);
    if (f->len % (size_t)width)
        return sn_pb_fail(r, f->off, "packed field %u has %zu bytes, not a multiple of %d",
                          f->num, f->len, width);
    *n = f->len / (size_t)width;
    return SNUG_OK;
}

int sn_pb_get_varints(const sn_pb *r, const sn_pb_field *f, uint64_t *out,
                      size_t cap, size_t *n) {
    if (f->wire == SN_PB_VARINT) {
        if (*n >= cap)
            return sn_pb_fail(r, f->off, "more values than counted (field %u)", f->num);
        out[(*n)++] = f->v;
        return SNUG_OK;
    }
    if (f->wire != SN_PB_LEN)
        return sn_pb_fail(r, f->off, "field %u should be varints but has wire type %d",
                          f->num, f->wire);
    const uint8_t *p = f->data, *end = f->data + f->len;
    while (p < end) {
        uint64_t v;
        size_t k = sn_pb_varint(p, end, &v);
        if (!k)
            return sn_pb_fail(r, sn_pb_off(r, p), "bad varint in packed field %u", f->num);
        if (*n >= cap)
            return sn_pb_fail(r, sn_pb_off(r, p), "more values than counted (field %u)", f->num);
        out[(*n)++] = v;
        p += k;
    }
    return SNUG_OK;
}

int sn_pb_get_fixed(const sn_pb *r, const sn_pb_field *f, int width, void *out,
                    size_t cap, size_t *n) {
    size_t c;
    SN_TRY(sn_pb_count_fixed(r, f, width, &c));
    if (c > cap - *n)
        return sn_pb_fail(r, f->off, "more values than counted (field %u)", f->num);
    if (!c) /* out may be NULL with nothing to hold */
        return SNUG_OK;
    uint8_t *dst = (uint8_t *)out + *n * (size_t)width;
    if (f->wire == SN_PB_LEN) {
        memcpy(dst, f->data, f->len);
    } else {
        for (int i = 0; i < width; i++) /* little-endian, as on the wire */
            dst[i] = (uint8_t)(f->v >> (8 * i));
    }
    *n += c;
    return SNUG_OK;
}

/* ---- writer ----------------------------------------------------------- */

void sn_pbw_free(sn_pbw *w) {
    sn_free(w->buf);
    memset(w, 0, sizeof *w);
}

void sn_pbw_raw(sn_pbw *w, const void *p, size_t n) {
    if (w->oom || n == 0)
        return;
    if (n > w->cap - w->len) {
        size_t cap = w->cap ? w->cap : 256;
        while (cap - w->len < n) {
            if (cap > SIZE_MAX / 2) {
                w->oom = 1;
                return;
            }
            cap *= 2;
        }
        uint8_t *b = sn_realloc(w->buf, cap);
        if (!b) {
            w->oom = 1;
            return;
        }
        w->buf = b;
        w->cap = cap;
    }
    memcpy(w->buf + w->len, p, n);
    w->len += n;
}

void sn_pbw_varint(sn_pbw *w, uint64_t v) {
    uint8_t b[10];
    size_t n = 0;
    do {
        b[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            b[n] |= 0x80;
        n++;
    } while (v);
    sn_pbw_raw(w, b, n);
}

void sn_pbw_tag(sn_pbw *w, uint32_t num, int wire) {
    sn_pbw_varint(w, ((uint64_t)num << 3) | (uint64_t)wire);
}

void sn_pbw_int(sn_pbw *w, uint32_t num, int64_t v) {
    sn_pbw_tag(w, num, SN_PB_VARINT);
    sn_pbw_varint(w, (uint64_t)v);
}

void sn_pbw_fixed32(sn_pbw *w, uint32_t num, uint32_t v) {
    uint8_t b[4];
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    sn_pbw_tag(w, num, SN_PB_I32);
    sn_pbw_raw(w, b, 4);
}

void sn_pbw_fixed64(sn_pbw *w, uint32_t num, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    sn_pbw_tag(w, num, SN_PB_I64);
    sn_pbw_raw(w, b, 8);
}

void sn_pbw_float(sn_pbw *w, uint32_t num, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    sn_pbw_fixed32(w, num, u);
}

void sn_pbw_bytes(sn_pbw *w, uint32_t num, const void *p, size_t n) {
    sn_pbw_tag(w, num, SN_PB_LEN);
    sn_pbw_varint(w, n);
    sn_pbw_raw(w, p, n);
}

void sn_pbw_str(sn_pbw *w, uint32_t num, const char *s) {
    sn_pbw_bytes(w, num, s, strlen(s));
}

void sn_pbw_msg(sn_pbw *w, uint32_t num, const sn_pbw *sub) {
    if (sub->oom)
        w->oom = 1;
    sn_pbw_bytes(w, num, sub->buf, sub->len);
}
