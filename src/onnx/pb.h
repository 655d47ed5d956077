/* A protobuf wire-format reader and writer, just enough for ONNX.
 *
 * The reader never copies: length-delimited fields are (pointer, length)
 * views into the buffer. Every read is bounds-checked; malformed input
 * gives SNUG_ERR_PARSE with the byte offset from the start of the file
 * (base) and the message being read ("while reading TensorProto"). Nested
 * readers carry a depth so hostile nesting cannot exhaust the stack.
 *
 * The writer appends to a growable heap buffer (sn_pbw); it is used to
 * serialize test data (sn_value_encode_pb) and by tests to build models. */
#ifndef SN_ONNX_PB_H
#define SN_ONNX_PB_H

#include "core/core.h"

#define SN_PB_MAX_DEPTH 64

enum { SN_PB_VARINT = 0, SN_PB_I64 = 1, SN_PB_LEN = 2, SN_PB_I32 = 5 };

typedef struct sn_pb {
    const uint8_t *base; /* borrowed: start of the file, for offsets */
    const uint8_t *p;    /* next byte to read */
    const uint8_t *end;  /* one past the message */
    const char *what;    /* message type name, for errors */
    int depth;
    sn_err *err;
} sn_pb;

typedef struct sn_pb_field {
    uint32_t num;        /* field number; 0 after the last field */
    int wire;            /* SN_PB_* */
    uint64_t v;          /* VARINT / I64 / I32 value */
    const uint8_t *data; /* LEN: payload (borrowed) */
    size_t len;
    size_t off;          /* offset of the field's tag from base */
} sn_pb_field;

/* A reader over [buf, buf+len) whose offsets count from base. */
void sn_pb_init(sn_pb *r, const void *base, const void *buf, size_t len,
                const char *what, sn_err *err);
/* Reads the next field. At the end returns SNUG_OK with f->num == 0. */
int sn_pb_next(sn_pb *r, sn_pb_field *f);
/* A reader over the payload of a LEN field (checks wire type and depth). */
int sn_pb_sub(const sn_pb *r, const sn_pb_field *f, const char *what, sn_pb *sub);
/* Error at an offset: "malformed protobuf at byte N: <msg> in <what>". */
int sn_pb_fail(const sn_pb *r, size_t off, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline size_t sn_pb_off(const sn_pb *r, const void *p) {
    return (size_t)((const uint8_t *)p - r->base);
}

/* Scalar accessors with wire-type checks. */
int sn_pb_int(const sn_pb *r, const sn_pb_field *f, int64_t *out);
int sn_pb_float(const sn_pb *r, const sn_pb_field *f, float *out);
int sn_pb_double(const sn_pb *r, const sn_pb_field *f, double *out);

/* Repeated scalars arrive unpacked (one field per value) or packed (one
 * LEN field). These count the values one field holds, then append them. */
int sn_pb_count_varints(const sn_pb *r, const sn_pb_field *f, size_t *n);
int sn_pb_count_fixed(const sn_pb *r, const sn_pb_field *f, int width, size_t *n);
/* Appends to out[*n..]; cap is out's capacity (checked). */
int sn_pb_get_varints(const sn_pb *r, const sn_pb_field *f, uint64_t *out,
                      size_t cap, size_t *n);
/* width 4 or 8: raw little-endian words into out as bytes. */
int sn_pb_get_fixed(const sn_pb *r, const sn_pb_field *f, int width, void *out,
                    size_t cap, size_t *n);

/* Reads a varint at p (< end); returns bytes used, 0 if malformed. */
size_t sn_pb_varint(const uint8_t *p, const uint8_t *end, uint64_t *v);

/* ---- writer ----------------------------------------------------------- */

typedef struct sn_pbw {
    uint8_t *buf; /* owned (sn_malloc) */
    size_t len, cap;
    int oom;      /* sticky: set when an append failed */
} sn_pbw;

void sn_pbw_free(sn_pbw *w);
void sn_pbw_raw(sn_pbw *w, const void *p, size_t n);
void sn_pbw_varint(sn_pbw *w, uint64_t v);
void sn_pbw_tag(sn_pbw *w, uint32_t num, int wire);
void sn_pbw_int(sn_pbw *w, uint32_t num, int64_t v);
void sn_pbw_fixed32(sn_pbw *w, uint32_t num, uint32_t v);
void sn_pbw_fixed64(sn_pbw *w, uint32_t num, uint64_t v);
void sn_pbw_float(sn_pbw *w, uint32_t num, float v);
void sn_pbw_bytes(sn_pbw *w, uint32_t num, const void *p, size_t n);
void sn_pbw_str(sn_pbw *w, uint32_t num, const char *s);
/* Appends sub's bytes as a LEN field (sub is left untouched). */
void sn_pbw_msg(sn_pbw *w, uint32_t num, const sn_pbw *sub);

#endif
