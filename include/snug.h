/* snug — run ONNX models on devices with less memory than the model wants.
 *
 * Every fallible function returns a snug_status (SNUG_OK == 0); the message,
 * with context (which node, which file offset, which input), is kept on the
 * handle and read with snug_session_error / the err out-parameter. The
 * library never prints and never exits; it logs through a callback. */
#ifndef SNUG_H
#define SNUG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SNUG_VERSION "0.1.0"

typedef enum snug_status {
    SNUG_OK = 0,
    SNUG_ERR_INVALID_ARG = 1, /* bad argument or option */
    SNUG_ERR_IO = 2,          /* file could not be opened, mapped or read */
    SNUG_ERR_PARSE = 3,       /* malformed model or tensor file */
    SNUG_ERR_UNSUPPORTED = 4, /* op, opset, dtype or feature not implemented */
    SNUG_ERR_OOM = 5,         /* out of memory */
    SNUG_ERR_SHAPE = 6,       /* shapes do not agree */
    SNUG_ERR_TYPE = 7,        /* types do not agree */
    SNUG_ERR_GRAPH = 8,       /* invalid graph: cycle, undefined input, ... */
    SNUG_ERR_RANGE = 9,       /* a value is out of range (index, axis, bound) */
    SNUG_ERR_INTERNAL = 10,   /* a bug in snug */
} snug_status;

const char *snug_status_str(int status);

/* ---- logging and allocation ---------------------------------------------- */

enum { SNUG_LOG_ERROR = 0, SNUG_LOG_WARN = 1, SNUG_LOG_INFO = 2, SNUG_LOG_DEBUG = 3 };
typedef void (*snug_log_fn)(void *user, int level, const char *msg);

/* Process-wide allocator, set before any other call (tests use it to count
 * allocations and inject failures). All three functions or none: a table
 * with every function NULL, or a NULL table, restores the default; a
 * partial one (say malloc_fn without free_fn, which would pair the
 * caller's malloc with libc's free) is refused with SNUG_ERR_INVALID_ARG
 * and the allocator in force stays. */
typedef struct snug_allocator {
    void *(*malloc_fn)(void *user, size_t n);
    void *(*realloc_fn)(void *user, void *p, size_t n);
    void (*free_fn)(void *user, void *p);
    void *user;
} snug_allocator;
int snug_set_allocator(const snug_allocator *a);
/* Number of allocations made through the library allocator so far. */
uint64_t snug_alloc_count(void);
/* Bytes the library holds right now through the default allocator (-1 when
 * an allocator was set with snug_set_allocator: it keeps its own count). */
int64_t snug_alloc_live_bytes(void);
/* The most snug_alloc_live_bytes has been so far (-1 as above). */
int64_t snug_alloc_peak_bytes(void);

/* ---- tensors ------------------------------------------------------------- */

/* Element types: the values of ONNX TensorProto.DataType. */
typedef enum snug_dtype {
    SNUG_FLOAT = 1, SNUG_UINT8 = 2, SNUG_INT8 = 3, SNUG_UINT16 = 4, SNUG_INT16 = 5,
    SNUG_INT32 = 6, SNUG_INT64 = 7, SNUG_STRING = 8, SNUG_BOOL = 9, SNUG_FLOAT16 = 10,
    SNUG_DOUBLE = 11, SNUG_UINT32 = 12, SNUG_UINT64 = 13, SNUG_BFLOAT16 = 16,
} snug_dtype;

#define SNUG_MAX_RANK 12

/* A tensor view exchanged through the API. The memory stays the caller's
 * (for inputs) or the session's (for outputs, valid until the next run). */
typedef struct snug_tensor {
    int dtype;      /* snug_dtype */
    int rank;
    int64_t dims[SNUG_MAX_RANK];
    void *data;
} snug_tensor;

/* ---- sessions ------------------------------------------------------------ */

typedef struct snug_options snug_options; /* string key -> string value */
typedef struct snug_session snug_session;

snug_options *snug_options_new(void);
void snug_options_free(snug_options *o); /* accepts NULL */
/* Sets a config entry (ORT-style keys, e.g. "session.max_shape_override",
 * and snug's own "snug.*" keys; see docs/config.md). Later sets win. */
int snug_options_set(snug_options *o, const char *key, const char *value);
const char *snug_options_get(const snug_options *o, const char *key);
void snug_options_set_logger(snug_options *o, snug_log_fn fn, void *user, int level);

/* Loads and plans a model. On failure *out is NULL and err (if not NULL)
 * receives the message (err_cap bytes). */
int snug_session_create(const char *model_path, const snug_options *opts,
                        snug_session **out, char *err, size_t err_cap);
void snug_session_free(snug_session *s); /* accepts NULL */
const char *snug_session_error(const snug_session *s);

int snug_session_input_count(const snug_session *s);
int snug_session_output_count(const snug_session *s);
const char *snug_session_input_name(const snug_session *s, int i);
const char *snug_session_output_name(const snug_session *s, int i);

/* Runs once. inputs[i] feeds graph input i (by position). On success
 * outputs[i] views the session's output i, valid until the next run. */
int snug_session_run(snug_session *s, const snug_tensor *inputs, int n_inputs,
                     snug_tensor *outputs, int n_outputs);

#ifdef __cplusplus
}
#endif
#endif
