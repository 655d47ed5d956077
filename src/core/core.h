/* snug internal core: status/errors, dtypes, tensors, allocation, threads.
 * Every internal module includes this. Public API lives in include/snug.h. */
#ifndef SN_CORE_H
#define SN_CORE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "snug.h"

/* Writes s to f as a JSON string, quotes included (", \\ and control
 * characters escaped; other bytes as they are: snug's strings are UTF-8). */
void sn_json_write_str(FILE *f, const char *s);

/* ---- status and errors ------------------------------------------------ */

/* Internal functions return an int status (SNUG_OK == 0) and, on failure,
 * leave a message with context in an sn_err the caller passed in. */
typedef struct sn_err {
    int code;
    char msg[1024];
} sn_err;

/* Sets code and message (printf-style), returns code. Never NULL-unsafe:
 * err may be NULL. */
int sn_errf(sn_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prefixes the message already in err with more context ("while X: <old>"). */
int sn_err_prefix(sn_err *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define SN_TRY(expr)                  \
    do {                              \
        int sn_try_rc_ = (expr);      \
        if (sn_try_rc_ != SNUG_OK)    \
            return sn_try_rc_;        \
    } while (0)

/* ---- allocation -------------------------------------------------------- */

/* All heap memory of the library goes through these, so tests can count
 * allocations and inject failures (see snug_set_allocator). */
void *sn_malloc(size_t n);
void *sn_calloc(size_t count, size_t size);
void *sn_realloc(void *p, size_t n);
void sn_free(void *p);
char *sn_strdup(const char *s);
char *sn_strndup(const char *s, size_t n);
/* A large block of whole pages whose parts can be handed back to the
 * system before the block is freed (a weight copy packed slice by slice).
 * Counted like sn_malloc. Through a caller's allocator (snug_set_allocator)
 * it is an ordinary allocation and sn_pages_release does nothing. */
void *sn_pages_alloc(size_t n);
/* Hands back the whole pages inside [p, p+n) of a block from
 * sn_pages_alloc: they read as zeros afterwards. Returns the bytes handed
 * back (0 through a caller's allocator). Each page at most once. */
size_t sn_pages_release(void *p, size_t n);
/* Frees a block of n bytes of which `released` were handed back. */
void sn_pages_free(void *p, size_t n, size_t released);
/* A block of whole pages counted as it is written rather than at once
 * (a weight packed slice by slice while its source is handed back): the
 * writer reports each part with sn_pages_commit, sn_pages_size(n) bytes in
 * all before the block is freed with sn_pages_free. */
void *sn_pages_reserve(size_t n);
/* Block p of n bytes (sn_pages_reserve's) is written and will be read
 * often: the 2 MiB pages lying wholly inside it become huge pages where the
 * system has them (MADV_COLLAPSE, a copy now; asked for after the writes so
 * that a block written out of order does not hold its pages early). */
void sn_pages_settle(void *p, size_t n);
/* Block p of n bytes (sn_malloc's, its own pages) is written whole at once
 * (zeroed when made) and read often: its 2 MiB pages are faulted in as huge
 * pages where the system has them (MADV_HUGEPAGE; a KV cache, an arena). */
void sn_pages_huge(void *p, size_t n);
void sn_pages_commit(size_t bytes);
size_t sn_pages_size(size_t n);
/* Overflow-checked a*b (returns false on overflow). */
static inline bool sn_mul_ok(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool sn_add_ok(size_t a, size_t b, size_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

/* ---- data types -------------------------------------------------------- */

/* Values equal ONNX TensorProto.DataType. */
typedef enum sn_dtype {
    SN_UNDEFINED = 0,
    SN_F32 = 1,
    SN_U8 = 2,
    SN_I8 = 3,
    SN_U16 = 4,
    SN_I16 = 5,
    SN_I32 = 6,
    SN_I64 = 7,
    SN_STRING = 8,
    SN_BOOL = 9,
    SN_F16 = 10,
    SN_F64 = 11,
    SN_U32 = 12,
    SN_U64 = 13,
    SN_C64 = 14,
    SN_C128 = 15,
    SN_BF16 = 16,
    SN_F8E4M3FN = 17,
    SN_F8E4M3FNUZ = 18,
    SN_F8E5M2 = 19,
    SN_F8E5M2FNUZ = 20,
    SN_U4 = 21,
    SN_I4 = 22,
    SN_F4E2M1 = 23,  /* packed two per byte, low nibble first */
    SN_F8E8M0 = 24,  /* exponent only: 2^(e-127), 0xff NaN */
    SN_U2 = 25,      /* packed four per byte, low bits first */
    SN_I2 = 26,
    SN_DTYPE_COUNT
} sn_dtype;

/* A string element: bytes, not NUL-terminated. Points into the model map,
 * into memory the executor attached to the tensor, or into constants. */
typedef struct sn_string {
    const char *ptr;
    size_t len;
} sn_string;

bool sn_dtype_valid(int dtype);
/* Bytes per element; 0 for UNDEFINED. U4/I4 report 1 here: use
 * sn_dtype_nbytes for the packed size of a tensor. */
size_t sn_dtype_size(sn_dtype t);
const char *sn_dtype_name(sn_dtype t); /* "float32", "int64", ... */
bool sn_dtype_is_float(sn_dtype t);    /* f16, bf16, f32, f64, f8* */
bool sn_dtype_is_int(sn_dtype t);      /* signed or unsigned, not bool */
bool sn_dtype_is_signed(sn_dtype t);
/* Sub-byte types stored several to a byte (int4, uint4, int2, uint2, float4). */
bool sn_dtype_is_packed(sn_dtype t);

/* IEEE half and bfloat16 conversions (round to nearest even). */
float sn_f16_to_f32(uint16_t h);
uint16_t sn_f32_to_f16(float f);
float sn_bf16_to_f32(uint16_t h);
uint16_t sn_f32_to_bf16(float f);
float sn_f8_to_f32(sn_dtype t, uint8_t v);
uint8_t sn_f32_to_f8(sn_dtype t, float f, bool saturate);

/* Reads element i of any numeric/bool tensor data as double, and writes. */
double sn_load_f64(sn_dtype t, const void *data, size_t i);
void sn_store_f64(sn_dtype t, void *data, size_t i, double v);
int64_t sn_load_i64(sn_dtype t, const void *data, size_t i);

/* ---- tensors ----------------------------------------------------------- */

#define SN_MAX_RANK 12

/* Dimension values: >= 0 known; SN_DIM_UNKNOWN unknown; <= SN_DIM_SYM(0)
 * a named symbolic dimension (id = SN_DIM_SYM_ID(d)), equal symbols mean
 * equal sizes. */
#define SN_DIM_UNKNOWN (-1)
#define SN_DIM_SYM(id) (-2 - (int64_t)(id))
#define SN_DIM_SYM_ID(d) ((int)(-2 - (d)))
static inline bool sn_dim_known(int64_t d) { return d >= 0; }
#define SN_RANK_UNKNOWN (-1)

typedef enum sn_kind {
    SN_KIND_TENSOR = 0,
    SN_KIND_SEQUENCE = 1, /* data: sn_tensor[n_items]; dtype: element type */
    SN_KIND_NONE = 2,     /* an optional without a value */
} sn_kind;

typedef struct sn_tensor {
    uint8_t kind;     /* sn_kind */
    uint8_t optional; /* 1 when the value's type is optional(...) */
    sn_dtype dtype;   /* element type (sequence: element tensors' type) */
    int rank;         /* SN_RANK_UNKNOWN during inference when unknown */
    int64_t dims[SN_MAX_RANK];
    void *data;       /* borrowed: elements, row-major; sequence: sn_tensor[] */
    int64_t n_items;  /* sequence length */
} sn_tensor;

/* Product of dims; -1 if any dim unknown/symbolic; sets *overflow (may be
 * NULL) when it does not fit. */
int64_t sn_tensor_numel(const sn_tensor *t);
size_t sn_dtype_nbytes(sn_dtype t, int64_t numel); /* packs 4-bit types */
size_t sn_tensor_nbytes(const sn_tensor *t);
bool sn_tensor_shape_known(const sn_tensor *t);
/* A constant's info for inference: an empty one (data NULL, no bytes)
 * points at a static block, so that its values (none) read as known. */
void sn_const_info(sn_tensor *info, const sn_tensor *t);
/* Checked numel of dims; returns false on overflow or negative dims. */
bool sn_dims_numel(int rank, const int64_t *dims, int64_t *numel);
/* The one overflow-checked step of every shape product: *acc times dim d
 * (both >= 0); false, *acc unchanged, when it does not fit in int64. */
static inline bool sn_dim_mul(int64_t *acc, int64_t d) {
    int64_t r;
    if (__builtin_mul_overflow(*acc, d, &r))
        return false;
    *acc = r;
    return true;
}
/* Its sibling for sums (a dim plus pads): *acc + d, false on overflow. */
static inline bool sn_dim_add(int64_t *acc, int64_t d) {
    int64_t r;
    if (__builtin_add_overflow(*acc, d, &r))
        return false;
    *acc = r;
    return true;
}
/* Whether the known dims of a shape (symbolic and unknown ones left out)
 * have a product that fits in int64. */
bool sn_dims_fit(int rank, const int64_t *dims);
/* "[1,3,?,N0]"-style text into buf. */
const char *sn_shape_str(const sn_tensor *t, char *buf, size_t cap);
void sn_tensor_set_shape(sn_tensor *t, int rank, const int64_t *dims);
bool sn_shape_equal(const sn_tensor *a, const sn_tensor *b);
/* Row-major strides in elements into out[rank]. */
void sn_strides(int rank, const int64_t *dims, int64_t *out);

/* Numpy-style multidirectional broadcast of a and b into out dims. Works on
 * symbolic dims too. Returns SNUG_OK or SNUG_ERR_SHAPE with message. */
int sn_broadcast_shape(int ra, const int64_t *da, int rb, const int64_t *db,
                       int *rout, int64_t *dout, sn_err *err);

/* ---- logging ----------------------------------------------------------- */

typedef struct sn_logger {
    snug_log_fn fn; /* may be NULL: silent */
    void *user;
    int level;      /* messages above this level are dropped */
} sn_logger;
void sn_log(const sn_logger *lg, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- floating-point mode ------------------------------------------------ */

/* The calling thread's floating-point control word (x86-64 MXCSR, AArch64
 * FPCR; 0 elsewhere), and a way to flush subnormal numbers to zero in it
 * (x86-64: FTZ and DAZ; AArch64: FZ). Arithmetic on subnormals takes
 * microcode assists on x86, tens to hundreds of cycles each: a softmax
 * over long masked rows is full of them (docs/config.md,
 * session.set_denormal_as_zero). */
typedef unsigned sn_fpmode;
sn_fpmode sn_fp_get(void);
void sn_fp_set(sn_fpmode m);
sn_fpmode sn_fp_flushing(sn_fpmode m);

/* ---- threads ----------------------------------------------------------- */

/* A persistent pool of worker threads. fn(arg, begin, end) is called on
 * disjoint ranges covering [0, n); the call returns when all are done.
 * Every range runs in the caller's floating-point mode (sn_fp_get).
 * A NULL pool runs serially in the caller. */
typedef struct sn_pool sn_pool;
typedef void (*sn_range_fn)(void *arg, int64_t begin, int64_t end);
int sn_pool_new(int n_threads, sn_pool **out, sn_err *err);
void sn_pool_free(sn_pool *p);
int sn_pool_size(const sn_pool *p);
int sn_cpu_count(void); /* online CPUs, at least 1 */
bool sn_cpu_avx2_fma(void); /* x86-64 with AVX2 and FMA: the SIMD kernels' runtime dispatch */
bool sn_cpu_avx512f(void);  /* x86-64 with AVX-512F (and the OS saving its registers) */
/* A function GCC also builds for x86-64-v3 (AVX2, FMA), the copy picked at
 * load time: plain loops that the compiler vectorizes get 8-wide vectors and
 * fused multiply-adds without hand-written intrinsics. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define SN_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
/* Also an x86-64-v4 (AVX-512) copy: for compute-bound loops (a rational
 * function a value), which sixteen lanes speed up where memory does not
 * bound them. */
#define SN_CLONES_WIDE __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SN_CLONES
#define SN_CLONES_WIDE
#endif
/* grain: minimum elements per task (work below it is not split). */
void sn_pool_for(sn_pool *p, int64_t n, int64_t grain, sn_range_fn fn, void *arg);
/* Between jobs a worker spins briefly, then sleeps. While the pool is held
 * hot (calls nest: on adds one, off takes one away) workers spin until the
 * next job however long it takes: a model run alternates threaded kernels
 * with serial ones longer than the spin, and waking a sleeping worker costs
 * ~50-100 us on VMs, on every threaded kernel. The cost is CPU time burned
 * by the waiting workers during the serial parts of the run. NULL: no-op. */
void sn_pool_hot(sn_pool *p, bool on);
/* Whether threads spin at all while they wait (ONNX Runtime's
 * session.intra_op.allow_spinning; default on). Off: a worker sleeps as soon
 * as it finds no job, the caller sleeps until the workers are done, and
 * sn_pool_hot has no effect; no CPU is burned waiting, every job pays the
 * wake-ups. NULL: no-op. */
void sn_pool_set_spinning(sn_pool *p, bool on);
/* How long a waiting thread spins before it sleeps, in pauses (on: SN_POOL_SPIN
 * in pool.c, ~75 us on the machine it was measured on; 0: as spinning off).
 * Shorter where the pool shares its cores with other busy threads (a
 * server's HTTP threads and its clients): a thread that spins there holds a
 * core the one it waits for may be waiting to run on (config
 * snug.spin_pauses). NULL: no-op. */
void sn_pool_set_spin(sn_pool *p, int pauses);
/* Workers asleep between jobs now (0 for NULL): for tests and reports. */
int sn_pool_sleeping(sn_pool *p);

/* ---- small utilities --------------------------------------------------- */

uint64_t sn_hash_str(const char *s);
static inline int64_t sn_imin(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t sn_imax(int64_t a, int64_t b) { return a > b ? a : b; }
/* Normalizes a possibly negative axis into [0, rank); false if out of range. */
static inline bool sn_axis_norm(int64_t axis, int rank, int *out) {
    if (axis < -rank || axis >= rank)
        return false;
    *out = (int)(axis < 0 ? axis + rank : axis);
    return true;
}

#endif
