/* The loaded ONNX model: ModelProto decoded into plain structs. Weights are
 * not copied: an initializer's data points into the mmapped model file or
 * into a mmapped external-data file (read-only memory), except bytes not
 * aligned to their element size (see sn_model_copied_tensors) and data
 * given in typed fields (float_data, ...), which are decoded into memory
 * the model owns. All strings are NUL-terminated copies owned by the model
 * (names are small); string tensor elements point into the map. Model-local
 * functions are inlined; sparse initializers are densified (up to 1 GiB).
 * Produced by sn_model_load, read by the graph builder. */
#ifndef SN_ONNX_MODEL_H
#define SN_ONNX_MODEL_H

#include <sys/types.h>

#include "core/core.h"

typedef enum sn_attr_type {
    SN_ATTR_UNDEFINED = 0,
    SN_ATTR_FLOAT = 1,
    SN_ATTR_INT = 2,
    SN_ATTR_STRING = 3,
    SN_ATTR_TENSOR = 4,
    SN_ATTR_GRAPH = 5,
    SN_ATTR_FLOATS = 6,
    SN_ATTR_INTS = 7,
    SN_ATTR_STRINGS = 8,
    SN_ATTR_TENSORS = 9,
    SN_ATTR_GRAPHS = 10,
    SN_ATTR_SPARSE_TENSOR = 11,
    SN_ATTR_SPARSE_TENSORS = 12,
    SN_ATTR_TYPE_PROTO = 13,
    SN_ATTR_TYPE_PROTOS = 14,
} sn_attr_type;

struct sn_pgraph;
struct sn_type;

typedef struct sn_attr {
    const char *name;
    sn_attr_type type;
    const char *ref_attr_name; /* in function bodies: refers to the caller's attribute; else NULL */
    float f;
    int64_t i;
    sn_string s;               /* STRING (ptr also NUL-terminated) */
    sn_tensor *t;              /* TENSOR */
    struct sn_pgraph *g;       /* GRAPH */
    struct sn_type *tp;        /* TYPE_PROTO */
    int n;                     /* element count of the list kinds below */
    float *floats;
    int64_t *ints;
    sn_string *strings;
    sn_tensor *tensors;
    struct sn_pgraph **graphs;
    struct sn_type *tps;       /* TYPE_PROTOS (n of them) */
} sn_attr;

typedef struct sn_kv {
    const char *key;
    const char *value;
} sn_kv;

typedef struct sn_pnode {
    const char *name;    /* "" when the node has no name */
    const char *op_type;
    const char *domain;  /* "" for the default domain ("ai.onnx" is mapped to "") */
    int n_in, n_out;
    const char **inputs;  /* "" marks an absent optional input/output */
    const char **outputs;
    int n_attr;
    sn_attr *attrs;
    int n_meta;
    sn_kv *meta;          /* NodeProto.metadata_props (layer_ann lives here) */
} sn_pnode;

typedef enum sn_type_kind {
    SN_TYPE_UNKNOWN = 0, /* no type given */
    SN_TYPE_TENSOR = 1,
    SN_TYPE_SEQUENCE = 2,
    SN_TYPE_OPTIONAL = 3,
    SN_TYPE_MAP = 4,
    SN_TYPE_SPARSE = 5,
} sn_type_kind;

/* A TypeProto. For tensors: elem, rank (-1 when no shape given), dims with
 * dim_params[i] != NULL for a named symbolic dim (dims[i] = -1 then, also
 * -1 for a dim with neither value nor name). */
typedef struct sn_type {
    sn_type_kind kind;
    sn_dtype elem;
    int rank;
    int64_t dims[SN_MAX_RANK];
    const char *dim_params[SN_MAX_RANK];
    struct sn_type *inner; /* sequence / optional element type */
} sn_type;

typedef struct sn_value_info {
    const char *name;
    sn_type type;
} sn_value_info;

/* An initializer: the tensor plus where its bytes live, for reports and
 * streaming. file_offset is the offset in the model file, or in the external
 * data file when external != 0. */
/* Initializers below this size whose raw bytes are not aligned for their
 * element type are copied at load; larger ones stay in the map, flagged
 * misaligned, and get an aligned copy when a session plans them. */
#define SN_ALIGN_COPY_MAX ((size_t)64 << 10)

typedef struct sn_init {
    const char *name;
    sn_tensor t;
    int external;
    const char *location; /* external data file (relative), else NULL */
    uint64_t file_offset;
    uint64_t nbytes;
} sn_init;

typedef struct sn_pgraph {
    const char *name;
    int n_node;
    sn_pnode *nodes;
    int n_init;
    sn_init *inits;
    int n_input, n_output, n_value_info;
    sn_value_info *inputs, *outputs, *value_info;
} sn_pgraph;

typedef struct sn_opset {
    const char *domain; /* "" for ai.onnx */
    int64_t version;
} sn_opset;

typedef struct sn_model {
    int64_t ir_version;
    const char *producer_name;
    const char *producer_version;
    const char *domain;
    int64_t model_version;
    const char *doc_string;
    int n_opset;
    sn_opset *opsets;
    int n_meta;
    sn_kv *meta;
    sn_pgraph *graph;     /* model-local functions already inlined */
    const char *path;     /* the file it was loaded from */
    const char *dir;      /* its folder (external data is resolved in it) */
    uint64_t file_size;
    uint64_t weight_bytes; /* sum of initializer bytes (main graph and subgraphs) */
    struct sn_model_priv *priv; /* owned: maps, arena */
} sn_model;

/* Loads path. Never copies weight bytes. On error returns a status and a
 * message naming what is wrong (with byte offsets for malformed protobuf). */
int sn_model_load(const char *path, sn_model **out, sn_err *err);

/* True when an initializer's data is not aligned for its element type (then
 * it points into the file map; see SN_ALIGN_COPY_MAX). */
bool sn_init_misaligned(const sn_init *in);
/* After a caller copied [p, p+n) out of the model's file map: drops the
 * whole pages inside it from this process's resident memory (they are read
 * again from the file if touched). No-op for memory that is not a file map
 * of m, e.g. a caller's buffer. */
void sn_model_release_bytes(const sn_model *m, const void *p, size_t n);
/* True when [p, p+n) lies in one of the model's own file maps. */
bool sn_model_maps(const sn_model *m, const void *p, size_t n);
/* Copies [src, src+n) to dst. Bytes of a file map are read from the file
 * (pread), so their pages are never mapped into this process: resident
 * memory is then exactly what the caller holds. Returns 0 or an errno. */
int sn_model_read(const sn_model *m, void *dst, const void *src, size_t n);
/* The same, then the file's pages of the range dropped from the page cache
 * (posix_fadvise DONTNEED): for weight streaming, which reads each layer
 * again every sweep and must not let the cache grow to the model's size
 * (under a memory cgroup the cache counts against the limit). */
int sn_model_read_uncached(const sn_model *m, void *dst, const void *src, size_t n);
/* Drops every mapped page of the model's files from this process (read
 * again from the file if touched). */
void sn_model_release_all(const sn_model *m);
/* The path of the file behind [p, p+n) (the model's, or an external data
 * file's as resolved at load), or NULL when it is no file of m: for
 * messages about a failed sn_model_read. */
const char *sn_model_file_of(const sn_model *m, const void *p, size_t n);
/* Same, from a buffer the caller keeps alive (dir used for external data;
 * may be NULL, then external data is an error). */
int sn_model_load_buffer(const void *buf, size_t len, const char *dir,
                         sn_model **out, sn_err *err);
void sn_model_free(sn_model *m); /* accepts NULL */

int64_t sn_model_opset(const sn_model *m, const char *domain); /* -1 if absent */
/* Tensors (initializers, attribute tensors) whose bytes were copied into
 * the model's memory because they were not aligned to their element size
 * in the file: kernels may assume aligned data. All others borrow the map.
 * protobuf puts raw_data at arbitrary offsets, so small models copy often;
 * writers that align raw_data / external data offsets copy nothing.
 * bytes (may be NULL) receives the bytes copied. */
uint64_t sn_model_copied_tensors(const sn_model *m, uint64_t *bytes);
/* Model-local function calls that were replaced by the function's body. */
int sn_model_inlined_calls(const sn_model *m);

/* Decodes one serialized TensorProto (e.g. an ONNX test input_0.pb) into t.
 * Data is copied into memory owned by *owner (free with sn_free) so the
 * buffer may go away. name (optional) receives a copy of the tensor name. */
int sn_tensor_decode_pb(const void *buf, size_t len, sn_tensor *t, void **owner,
                        char **name, sn_err *err);
/* Decodes a serialized SequenceProto / OptionalProto / TensorProto, whichever
 * the bytes hold (the ONNX test layout uses all three for outputs). A
 * sequence: t->kind SN_KIND_SEQUENCE, t->data = sn_tensor[n_items]; an
 * optional: t->optional = 1, kind SN_KIND_NONE when empty. A message with
 * exactly one value is ambiguous on the wire and is read as an optional:
 * prefer sn_value_decode_pb_typed when the type is known. */
int sn_value_decode_pb(const void *buf, size_t len, sn_tensor *t, void **owner,
                       char **name, sn_err *err);
/* Same, using the declared type (e.g. the model's graph output type) to
 * tell a SequenceProto from an OptionalProto: their bytes can be identical
 * (one tensor). expected may be NULL or SN_TYPE_UNKNOWN: then as above. */
int sn_value_decode_pb_typed(const void *buf, size_t len, const sn_type *expected,
                             sn_tensor *t, void **owner, char **name, sn_err *err);
/* Serializes t (tensor, sequence or optional) as TensorProto / SequenceProto /
 * OptionalProto with the given name into a new buffer. */
int sn_value_encode_pb(const sn_tensor *t, const char *name, void **buf,
                       size_t *len, sn_err *err);
/* Reads a .npy file into a tensor (owner as above). */
int sn_npy_read(const char *path, sn_tensor *t, void **owner, sn_err *err);
int sn_npy_write(const char *path, const sn_tensor *t, sn_err *err);
/* Reads a whole file into a new buffer. */
int sn_file_read(const char *path, void **buf, size_t *len, sn_err *err);

/* ---- file calls, with a fault hook for the tests (io.c) ---------------- */

/* Every file call of the loader and of sn_model_read goes through these.
 * A test sets a hook (SQLite's fault injection, for I/O): each call asks
 * it first, passing what the call is and the file's path, and a nonzero
 * return is the errno the call then fails with, without being made. Set
 * it before sessions exist and clear it (NULL) after; not in the public
 * API. */
typedef enum sn_io_op {
    SN_IO_RESOLVE, /* realpath */
    SN_IO_OPEN,
    SN_IO_STAT,    /* fstat of the opened file */
    SN_IO_MAP,     /* mmap of the whole file */
    SN_IO_READ,    /* one pread of sn_model_read */
} sn_io_op;
typedef int (*sn_io_fault_fn)(void *user, sn_io_op op, const char *path);
void sn_io_set_fault(sn_io_fault_fn fn, void *user);

struct stat;
char *sn_io_realpath(const char *path); /* malloc'd (libc's free), NULL with errno */
int sn_io_open(const char *path);       /* read-only, close-on-exec */
int sn_io_fstat(int fd, const char *path, struct stat *st);
void *sn_io_mmap(int fd, const char *path, size_t n); /* read-only private map, MAP_FAILED */
ssize_t sn_io_pread(int fd, const char *path, void *dst, size_t n, uint64_t off);

#endif
