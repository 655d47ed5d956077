/* Loader internals shared by the files of src/onnx/: the model arena, the
 * decoding context and the TensorProto / TypeProto / GraphProto decoders. */
#ifndef SN_ONNX_LOAD_IMPL_H
#define SN_ONNX_LOAD_IMPL_H

#include "onnx/model.h"
#include "onnx/pb.h"

/* ---- arena: many small allocations freed at once ---------------------- */

typedef struct sn_arena_blk sn_arena_blk;
typedef struct sn_arena {
    sn_arena_blk *head; /* owned list; the head has free room */
    size_t total;       /* bytes allocated in all blocks */
} sn_arena;

/* Zeroed memory aligned to align (a power of two, <= 64); NULL on OOM. */
void *sn_arena_alloc(sn_arena *a, size_t n, size_t align);
/* NUL-terminated copy of n bytes. */
char *sn_arena_strn(sn_arena *a, const void *s, size_t n);
void sn_arena_free(sn_arena *a);

/* ---- the model's private part ----------------------------------------- */

typedef struct sn_ext_map {
    char *location;  /* owned (arena): as written in the model */
    char *path;      /* owned (arena): the model's folder joined with location, for messages */
    void *map;       /* owned: mmap of the whole file (NULL when empty) */
    uint64_t size;
    int fd;          /* owned: the open file, for reads that bypass the map (sn_model_read) */
} sn_ext_map;

struct sn_model_priv {
    sn_arena arena;      /* every struct and string of the model */
    void *map;           /* owned: mmap of the model file, or NULL (buffer load) */
    size_t map_len;
    int fd;              /* owned: the open model file (-1 for a buffer load) */
    char *real_dir;      /* owned (arena): realpath of model->dir, lazily */
    int n_ext, cap_ext;
    sn_ext_map *ext;     /* owned (heap): external data files, mapped once */
    uint64_t n_copied;   /* tensors copied because their bytes were misaligned */
    uint64_t copied_bytes;
    int n_inlined;       /* function calls replaced by their bodies */
};

/* ---- decoding context -------------------------------------------------- */

typedef struct sn_ld_func sn_ld_func;

typedef struct sn_ld {
    sn_model *m;          /* may be NULL (standalone TensorProto decode) */
    sn_arena *a;
    const uint8_t *base;  /* start of the buffer: offsets count from here */
    const char *dir;      /* folder for external data, or NULL */
    sn_err *err;
    int n_func;
    sn_ld_func *funcs;    /* arena */
    int no_align_copy;    /* 1: leave misaligned data in place (copied later anyway) */
} sn_ld;

char *sn_ld_str(sn_ld *c, const sn_pb_field *f); /* arena copy of a LEN field */
int sn_ld_oom(sn_ld *c);
/* Decodes the TensorProto payload of r into t; init (may be NULL) gets the
 * byte location; name (may be NULL) the tensor's name ("" if none). */
int sn_ld_tensor(sn_ld *c, sn_pb *r, sn_tensor *t, sn_init *init, const char **name);
int sn_ld_type(sn_ld *c, sn_pb *r, sn_type *t);
int sn_ld_graph(sn_ld *c, sn_pb *r, sn_pgraph *g);
int sn_ld_node(sn_ld *c, sn_pb *r, sn_pnode *n);
int sn_ld_kv(sn_ld *c, sn_pb *r, sn_kv *kv);
/* SparseTensorProto → dense tensor in the arena (at most this many bytes). */
#define SN_SPARSE_DENSE_MAX (1ull << 30)
int sn_ld_sparse(sn_ld *c, sn_pb *r, sn_tensor *t, const char **name);

/* Functions: parsed FunctionProtos and inlining (inline.c). */
struct sn_ld_func {
    const char *name, *domain, *overload;
    int n_in, n_out;
    const char **inputs, **outputs;
    int n_attr_default;
    sn_attr *attr_default;   /* attribute_proto: defaults */
    int n_node;
    sn_pnode *nodes;
    int n_opset;
    sn_opset *opsets;
    int active;              /* recursion guard while expanding */
};
int sn_ld_function(sn_ld *c, sn_pb *r, sn_ld_func *fn);
int sn_ld_inline(sn_ld *c, sn_pgraph *g);
/* Calls expanded per model at most: nested functions each calling the next
 * twice grow exponentially, and a small file must not exhaust memory. */
#define SN_INLINE_MAX_CALLS 100000

/* Maps "ai.onnx" to "". */
const char *sn_ld_domain(const char *d);

#endif
