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
#include <stdio.h>

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
    SNUG_DOUBLE = 11, SNUG_UINT32 = 12, SNUG_UINT64 = 13, SNUG_COMPLEX64 = 14, SNUG_COMPLEX128 = 15,
    SNUG_BFLOAT16 = 16,
} snug_dtype;
/* ONNX's other types (float8, int4, ...) keep their ONNX values too. */

/* "float32", "int64", ... ("undefined" for a value that is no type). */
const char *snug_dtype_name(int dtype);

/* What kind of number an element type holds. */
enum {
    SNUG_DTYPE_INVALID = 0, /* not an ONNX element type */
    SNUG_DTYPE_FLOAT,       /* float16/32/64, bfloat16, the float8 and float4 types */
    SNUG_DTYPE_INT,         /* signed or unsigned integers, the 4- and 2-bit ones included */
    SNUG_DTYPE_BOOL,
    SNUG_DTYPE_STRING,
    SNUG_DTYPE_COMPLEX,
};
int snug_dtype_class(int dtype);

#define SNUG_MAX_RANK 12

/* A tensor view exchanged through the API. The memory stays the caller's
 * (for inputs) or the session's (for outputs, valid until the next run). */
typedef struct snug_tensor {
    int dtype;      /* snug_dtype */
    int rank;
    int64_t dims[SNUG_MAX_RANK];
    void *data;
} snug_tensor;

/* Bytes of t's elements (4- and 2-bit types packed); 0 when a dim is
 * negative, SIZE_MAX when the size does not fit. */
size_t snug_tensor_nbytes(const snug_tensor *t);

/* ---- sessions ------------------------------------------------------------ */

typedef struct snug_options snug_options; /* string key -> string value */
typedef struct snug_session snug_session;

snug_options *snug_options_new(void);
void snug_options_free(snug_options *o); /* accepts NULL */
/* Sets a config entry (ORT-style keys, e.g. "session.max_shape_override",
 * and snug's own "snug.*" keys; see docs/config.md). Later sets win. */
int snug_options_set(snug_options *o, const char *key, const char *value);
const char *snug_options_get(const snug_options *o, const char *key);
/* Where the session's messages go, up to level (SNUG_LOG_*); fn NULL (the
 * default): nowhere, the library prints nothing. */
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
 * outputs[i] views the session's output i, valid until the next run.
 * Tensors only: snug_session_run_values takes any value. */
int snug_session_run(snug_session *s, const snug_tensor *inputs, int n_inputs,
                     snug_tensor *outputs, int n_outputs);

/* Counts of the current plan, and how many plans were made. */
typedef struct snug_session_stats {
    size_t arena_bytes;        /* the activation arena (workspace inside) */
    size_t lower_bound;        /* the largest total of planned tensors alive at one step */
    size_t folded_bytes;       /* constants computed at plan time */
    int n_static, n_dynamic, n_folded; /* nodes by mode (see snug_plan_node.mode) */
    int n_inplace;             /* static nodes whose output reuses their input's slot */
    int n_grouped;             /* static nodes run in groups of one op */
    int n_plans;               /* plans made so far */
    size_t copied_init_bytes;  /* weights copied because the file left them misaligned */
    size_t persistent_bytes;   /* state buffers: a KV cache (snug_decoder) */
    size_t kernel_state_bytes; /* what prepared kernels hold (packed weights) */
    size_t released_bytes;     /* constants no run reads, released or freed */
    size_t device_bytes;       /* what the plan holds on accelerators (snug.device): arenas, weights, KV */
    size_t copied_bytes;       /* bytes the runs since the plan copied between devices */
    int n_tails;               /* static nodes a group's kernel computes in its job (a SwiGLU's) */
} snug_session_stats;
void snug_session_get_stats(const snug_session *s, snug_session_stats *out);

/* Device d of the session (0: the host; 1: snug.device's), as its backend
 * sees it now. */
typedef struct snug_device_info {
    const char *name;  /* "cpu", "opencl:0 (pthread-...)" */
    uint64_t total;    /* bytes of memory (0: unknown) */
    uint64_t free;     /* what the device says is free, else total minus what snug holds */
    uint64_t held;     /* what snug's buffers on it hold now, by the backend's own count (0: not counted) */
    uint64_t peak;     /* the most they held at once */
    int n_nodes;       /* nodes of the current plan it runs */
    uint64_t state_bytes; /* the persistent state (a KV cache) in its memory */
    int n_layers;      /* layers the placement put there (the output layer counts as one) */
    /* weights streamed to it from host memory (snug.placement_overflow=stream) */
    int streamed_layers;      /* the layers whose weights stream (0: all resident) */
    uint64_t stream_ring;     /* bytes of its ring of slots they come into */
    uint64_t streamed_per_run; /* bytes one run (a sweep over the layers) copies in */
    uint64_t streamed_total;  /* bytes copied in so far */
} snug_device_info;
int snug_session_device_count(const snug_session *s);

/* A placement rule of the session (session.layer_assignment_settings or
 * session.name_based_layer_assignment, ranges expanded) and what it matched. */
typedef struct snug_rule_info {
    const char *device;   /* as written, lower-cased */
    const char *pattern;
    int exact;            /* `=pattern` (annotations) */
    int entry;            /* the `device(...)` entry it came from, 0-based */
    int device_index;     /* the session's device it names (0 host, 1 the accelerator), -1: none (skipped) */
    int n_nodes;          /* nodes it placed */
    int first_layer, last_layer; /* their layers (-1 pre, n_layers post); -2 when none */
    int by_name;          /* name-based rules (else layer_ann annotations) */
} snug_rule_info;
int snug_session_rule_count(const snug_session *s);
int snug_session_rule(const snug_session *s, int k, snug_rule_info *out);
int snug_session_device_info(const snug_session *s, int d, snug_device_info *out);

/* Weight streaming under a host budget (snug.mem.host, docs/streaming.md):
 * what the current plan streams and what the prefetcher did so far. */
typedef struct snug_stream_stats {
    int n_layers;          /* the layer map's */
    int first_streamed;    /* layers first_streamed..n_layers-1 stream; == n_layers: none */
    int depth;             /* staging slots */
    uint64_t budget;       /* snug.mem.host (0: none) */
    uint64_t planned;      /* what the plan holds within it: activations, KV cache, resident weights, slots */
    uint64_t minimum;      /* the smallest budget that plans (every layer streamed) */
    uint64_t staging_bytes;
    uint64_t sweep_bytes;  /* the streamed layers' weights: what one run reads from the file */
    uint64_t bytes_read;   /* read so far */
    uint64_t loads;        /* layers loaded so far */
    double read_s;         /* the I/O thread's time reading */
    double stall_s;        /* the runs' time waiting for a layer to arrive */
} snug_stream_stats;
void snug_session_stream_stats(const snug_session *s, snug_stream_stats *out);
/* The I/O bound of that streaming: one sweep over the streamed layers read
 * exactly as the prefetcher reads them, with nothing computing, in bytes
 * per second (0 when nothing streams). Between runs. */
int snug_session_stream_probe(snug_session *s, double *bytes_per_s);
/* Likewise for weights streamed to the accelerator (--overflow stream):
 * one sweep's streamed weights copied from host memory to the device
 * alone, in bytes per second (0 when nothing streams there). Between runs. */
int snug_session_device_stream_probe(snug_session *s, double *bytes_per_s);

/* From now on every run adds each node's wall time, in seconds, to
 * acc[node] (snug_model_info.n_nodes entries, the caller's); NULL stops.
 * Off, a run pays one test per node. */
void snug_session_time_nodes(snug_session *s, double *acc);

/* ---- values: tensors, sequences, optionals --------------------------------- */

/* Any ONNX value: a tensor, a sequence of tensors, or an optional (holding
 * a tensor, or none). A value made here is the caller's (snug_value_free);
 * one from snug_session_run_values is the session's, valid until its next
 * run. String elements are set with snug_value_set_string (the value keeps
 * a copy). */
typedef struct snug_value snug_value;
typedef struct snug_model snug_model; /* below */

enum { SNUG_KIND_TENSOR = 0, SNUG_KIND_SEQUENCE = 1, SNUG_KIND_NONE = 2 /* an optional without a value */ };

/* A zeroed tensor. */
int snug_value_new(int dtype, int rank, const int64_t *dims, snug_value **out);
/* A zeroed tensor of graph input `input`'s declared element type with the
 * given shape; an input declared optional(tensor) gets an optional holding
 * it. SNUG_ERR_TYPE when the input is no tensor of a known type. */
int snug_value_new_input(const snug_model *m, int input, int rank, const int64_t *dims, snug_value **out);
/* Reads a .npy file (by its suffix), else a serialized ONNX TensorProto,
 * SequenceProto or OptionalProto (as the ONNX test data and
 * snug_value_write have them). With m and input >= 0 the bytes are read as
 * that graph input's declared type (the wire cannot tell a sequence of one
 * tensor from an optional). On failure *out is NULL and err receives the
 * message. */
int snug_value_read(const snug_model *m, int input, const char *path, snug_value **out, char *err,
                    size_t err_cap);
/* Writes v as a .npy file (by the suffix; tensors only), else as a
 * TensorProto / SequenceProto / OptionalProto named name. */
int snug_value_write(const snug_value *v, const char *name, const char *path, char *err, size_t err_cap);
void snug_value_free(snug_value *v); /* accepts NULL; not for the session's values */

int snug_value_kind(const snug_value *v);       /* SNUG_KIND_* */
/* Elements of a tensor, items of a sequence, 0 for none. */
int64_t snug_value_count(const snug_value *v);
/* A view of a tensor (dtype, shape, data: the value's, row-major). A
 * sequence gives its items' dtype, an empty optional its declared one, both
 * with rank -1 and data NULL. SNUG_STRING data is not C strings: read them
 * with snug_value_get_string. */
void snug_value_get_tensor(const snug_value *v, snug_tensor *out);
/* Item i of a sequence, as above; SNUG_ERR_RANGE outside it. */
int snug_value_get_item(const snug_value *v, int64_t i, snug_tensor *out);
/* Element i of a tensor of a numeric or bool type as a double (NaN for
 * strings, complex numbers or an index outside it), and written from one
 * (rounded to the type; SNUG_ERR_RANGE / SNUG_ERR_TYPE when it cannot be). */
double snug_value_get_f64(const snug_value *v, int64_t i);
int snug_value_set_f64(snug_value *v, int64_t i, double x);
/* String element i (bytes, not NUL-terminated; *len receives their count). */
const char *snug_value_get_string(const snug_value *v, int64_t i, size_t *len);
int snug_value_set_string(snug_value *v, int64_t i, const char *s, size_t len);

/* Runs once with any values (inputs[i] feeds graph input i). On success
 * outputs[i] is the session's value of output i, valid until the next run;
 * the failure's message is on the session. */
int snug_session_run_values(snug_session *s, const snug_value *const *inputs, int n_inputs,
                            const snug_value **outputs, int n_outputs);

/* ---- models: what a file holds, before any plan ----------------------------- */

/* A loaded model with its graph built (ops resolved, types and shapes
 * inferred from the declared inputs) and its layer map found; no executor
 * is made, no kernel prepared and no weight read (they are mapped), so
 * opening is fast on any size. */
int snug_model_open(const char *path, snug_model **out, char *err, size_t err_cap);
void snug_model_free(snug_model *m); /* accepts NULL; not for a session's model */
/* The model a session runs (the session's: valid while it lives). */
const snug_model *snug_session_model(const snug_session *s);

typedef struct snug_model_info {
    const char *path;             /* as opened */
    const char *dir;              /* its folder (external data and stats files are found there) */
    const char *producer_name;    /* "" when absent */
    const char *producer_version; /* "" when absent */
    int64_t ir_version;
    int n_opsets, n_inputs, n_outputs;
    int n_nodes;                  /* of the main graph, in execution order (subgraphs' not counted) */
    int n_initializers;           /* of the main graph */
    int n_dims;                   /* symbolic dim names (snug_model_dim_name) */
    int64_t parameters;           /* elements of the main graph's initializers */
    uint64_t weight_bytes;        /* bytes of every initializer, subgraphs' included */
    uint64_t weight_bytes_read;   /* of the main graph's, read whole by a run: all but the
                                   * tables only gathered from (an embedding) */
    uint64_t weight_bytes_gathered; /* those tables: a run reads only the rows it selects */
} snug_model_info;
void snug_model_get_info(const snug_model *m, snug_model_info *out);

/* Opset import i: *domain "" for the default (ai.onnx) domain. */
int snug_model_opset(const snug_model *m, int i, const char **domain, int64_t *version);
/* Symbolic dim name i: the model's dim_params (a name, or an expression such
 * as "past_sequence_length + 1") and those inference made. */
const char *snug_model_dim_name(const snug_model *m, int i);

/* A graph input's or output's type as inferred (for inputs: as declared). */
typedef struct snug_value_info {
    const char *name;
    int kind;      /* SNUG_KIND_TENSOR, or SNUG_KIND_SEQUENCE of tensors of dtype */
    int optional;  /* declared optional(...) */
    int dtype;     /* element type; 0 when unknown */
    int rank;      /* -1 when unknown */
    int64_t dims[SNUG_MAX_RANK];          /* >= 0 known, -1 symbolic or unknown */
    const char *dim_names[SNUG_MAX_RANK]; /* a dim's symbolic name (as snug_model_dim_name) or
                                           * declared dim_param, or NULL */
} snug_value_info;
int snug_model_input(const snug_model *m, int i, snug_value_info *out);
int snug_model_output(const snug_model *m, int i, snug_value_info *out);

/* Evaluates a dim_param ("sequence_length", "past_sequence_length +
 * sequence_length": names, integers, + - *) with the names bound to values.
 * SNUG_ERR_INVALID_ARG when a name is unbound, the text is no such
 * expression or the result is negative. */
typedef struct snug_dim {
    const char *name;
    int64_t value;
} snug_dim;
int snug_dim_eval(const char *expr, const snug_dim *binds, int n_binds, int64_t *out);

/* Node i of the main graph, in execution order. */
typedef struct snug_node_info {
    const char *name;   /* "" when unnamed */
    const char *op;     /* op type */
    const char *domain; /* "" for ai.onnx */
    int layer;          /* the layer map: -1 pre, 0..n_layers-1, n_layers post */
} snug_node_info;
int snug_model_node(const snug_model *m, int i, snug_node_info *out);

/* Nodes by (domain, op type), subgraph nodes included, in the order first
 * met: writes up to cap entries and returns how many; *n_nodes (may be
 * NULL) receives the count of all nodes. */
typedef struct snug_op_count {
    const char *domain, *op;
    int count;
} snug_op_count;
int snug_model_op_counts(const snug_model *m, snug_op_count *out, int cap, int *n_nodes);

/* The layer map, the unit of placement: node -> layer from names
 * (layers.N, h.N, blocks.N, layer.N, ...), else from neighbours; nodes
 * before the first layer are pre (embeddings), after the last post (final
 * norm, lm_head). */
typedef struct snug_layer_map {
    int n_layers;
    int nodes_named;            /* nodes indexed from their own name */
    int nodes_from_value_names; /* ... from their output or initializer names */
    int nodes_from_neighbours;  /* ... from the nodes around them */
    int nodes_pre, nodes_post;
    int nodes_from_structure;   /* ... from the repeated blocks of weights (no name gave an index) */
} snug_layer_map;
void snug_model_layers(const snug_model *m, snug_layer_map *out);
/* The layer of the first node reading graph input i that lies inside a
 * layer (where a KV cache input belongs), or -1 when none does. */
int snug_model_input_layer(const snug_model *m, int i);

/* ---- plans: every byte placed before the first run -------------------------- */

/* Plans for the given input shapes without running: shapes[i] (dtype and
 * shape; data ignored) for graph input i. A run with the same shapes uses
 * the plan. The failure's message is on the session. */
int snug_session_plan(snug_session *s, const snug_tensor *shapes, int n_shapes);

/* The session's current plan as a value, a copy the caller frees (before
 * the session): per value its storage, buffer, offset, size, alias and
 * lifetime, per node its mode, group and workspace, per buffer its size and
 * lower bound. SNUG_ERR_INVALID_ARG, with the message on the session, when
 * nothing is planned yet. */
typedef struct snug_plan snug_plan;
int snug_plan_new(snug_session *s, snug_plan **out);
void snug_plan_free(snug_plan *p); /* accepts NULL */

typedef struct snug_plan_info {
    int n_values, n_nodes, n_buffers, n_devices, n_inputs;
    int at_bounds;           /* planned once for input bounds (runs within them re-infer) */
    int threads;             /* the kernels' thread count */
    size_t folded_bytes;     /* constants computed at plan time and kept */
    size_t persistent_bytes; /* state buffers (a KV cache) */
    size_t state_bytes;      /* prepared kernels' state (packed weights) */
    int n_static, n_dynamic, n_folded, n_inplace, n_grouped;
} snug_plan_info;
void snug_plan_get_info(const snug_plan *p, snug_plan_info *out);

/* How a value is stored. */
typedef enum snug_storage {
    SNUG_STORE_NONE = 0,
    SNUG_STORE_CONST,   /* an initializer (in the model file) */
    SNUG_STORE_FOLDED,  /* computed at plan time */
    SNUG_STORE_INPUT,   /* a graph input */
    SNUG_STORE_ARENA,   /* a planned slot in a buffer */
    SNUG_STORE_VIEW,    /* the bytes of another value */
    SNUG_STORE_DYNAMIC, /* shape known only at run time: allocated by the run */
    SNUG_STORE_STATE,   /* computed into a persistent state buffer (a KV cache) */
    SNUG_STORE_STREAMED, /* a weight brought to its device layer by layer (weight streaming; not made yet) */
} snug_storage;
const char *snug_storage_name(int storage); /* "const", "folded", "input", "arena", ... */

/* Value v (by graph value index: 0..n_values-1). */
typedef struct snug_plan_value {
    const char *name;
    int storage;       /* snug_storage */
    int buffer;        /* SNUG_STORE_ARENA: its buffer; else -1 */
    size_t offset;     /* SNUG_STORE_ARENA: byte offset in that buffer */
    size_t size;       /* bytes at the planning shapes (0 when dynamic) */
    int alias;         /* SNUG_STORE_VIEW: the value whose bytes it views; else -1 */
    int first, last;   /* SNUG_STORE_ARENA: the steps (node indices) its slot is held, inclusive
                        * (a graph output's to n_nodes); an in-place output shares its input's */
    int released;      /* a constant no run reads (folded away, or replaced by a packed form) */
    int producer;      /* the node making it, or -1 */
    int kind, dtype, rank;        /* at the planning shapes (rank -1 when unknown) */
    int64_t dims[SNUG_MAX_RANK];
} snug_plan_value;
int snug_plan_get_value(const snug_plan *p, int v, snug_plan_value *out);
/* The index of the value called name, or -1. */
int snug_plan_find_value(const snug_plan *p, const char *name);

/* How a node runs. */
enum {
    SNUG_MODE_STATIC = 0, /* shapes known at plan time: outputs and workspace planned */
    SNUG_MODE_DYNAMIC,    /* run-time shapes: outputs allocated by the run */
    SNUG_MODE_FOLDED,     /* computed at plan time (a constant) */
};
const char *snug_node_mode_name(int mode); /* "static", "dynamic", "folded" */

/* Node i, in execution order. */
typedef struct snug_plan_node {
    const char *name, *op, *domain; /* as snug_node_info */
    int layer;          /* the layer map */
    int device;         /* index into the plan's devices */
    int mode;           /* SNUG_MODE_* */
    int group;          /* the node leading its group (itself when alone) */
    size_t workspace;   /* bytes its kernel declared when prepared; 0 if none */
    int ws_buffer;      /* the buffer of its workspace slot, or -1 */
    size_t ws_offset;
    size_t state_bytes; /* what its prepared kernel holds (a packed weight) */
    int last_row;       /* reads only the last position of its input 0 (snug.last_logits) */
    const char *host_because; /* where an accelerator was asked for: why this node runs on the host ("" if not) */
} snug_plan_node;
int snug_plan_get_node(const snug_plan *p, int i, snug_plan_node *out);

typedef struct snug_plan_buffer {
    int device;
    size_t size;        /* bytes */
    int weights;        /* an accelerator's copies of the weights (else an activation arena) */
    size_t lower_bound; /* the largest total of its slots alive at one step */
} snug_plan_buffer;
int snug_plan_get_buffer(const snug_plan *p, int b, snug_plan_buffer *out);
/* Device d's name ("cpu", ...), or NULL. */
const char *snug_plan_device(const snug_plan *p, int d);
/* Where layer `layer` (-1 the input layers, n_layers the output layer) was
 * placed and why ("-ngl 12", "auto: ..."); SNUG_ERR_RANGE when the plan has
 * no placement (no accelerator) or no such layer. */
int snug_plan_layer(const snug_plan *p, int layer, int *device, const char **why);
/* The shape (or bound) graph input i was planned for. */
int snug_plan_input_shape(const snug_plan *p, int i, snug_tensor *out);

/* Prints p as one JSON object ({"devices", "buffers", "values", "nodes",
 * ...}); SNUG_ERR_IO when f reports an error. */
int snug_plan_write_json(const snug_plan *p, FILE *f);
/* Writes s as a JSON string, quotes included (", \ and control characters
 * escaped, other bytes as they are): for callers that put names beside a
 * plan in their own JSON. */
void snug_json_write_str(FILE *f, const char *s);

/* ---- node stats files and per-node estimates -------------------------------- */

/* Node stats in ONNX Runtime's format (session.collect_node_memory_stats_to_file,
 * session.resource_partitioning_settings; docs/config.md):
 *   #name,input_sizes,initializers_sizes,total_dynamic_sizes,total_temp_allocations
 * one row per node, keyed by its name (or op type) and a hash of its input
 * and output names, so files recorded by ORT load here and the other way. */
typedef struct snug_node_stats {
    uint64_t input;   /* input_sizes: non-initializer inputs */
    uint64_t init;    /* initializers_sizes */
    uint64_t dynamic; /* total_dynamic_sizes: outputs given memory */
    uint64_t temp;    /* total_temp_allocations: workspace */
} snug_node_stats;

/* Node i's key in a stats file, into buf (truncated to cap); returns the
 * length it needs, the NUL excluded. */
size_t snug_model_node_stats_key(const snug_model *m, int i, char *buf, size_t cap);
/* Each node's figures in plan p as ORT's recorder counts them (a value
 * once, at the first node that reads or makes it); a plan taken after a run
 * has the run's sizes of dynamic nodes. st: snug_plan_info.n_nodes entries. */
int snug_plan_node_stats(const snug_plan *p, snug_node_stats *st, char *err, size_t err_cap);
/* Writes a stats file: the header, then a row per node of m with st[i]. */
int snug_stats_write(const char *path, const snug_model *m, const snug_node_stats *st, char *err,
                     size_t err_cap);

/* A stats file read back. */
typedef struct snug_stats snug_stats;
/* A relative path is taken against model_dir when that is not NULL (ORT
 * resolves it against the model's folder). A malformed line is
 * SNUG_ERR_PARSE naming the file and the line. */
int snug_stats_load(const char *path, const char *model_dir, snug_stats **out, char *err, size_t err_cap);
void snug_stats_free(snug_stats *st); /* accepts NULL */
const char *snug_stats_path(const snug_stats *st);
int snug_stats_count(const snug_stats *st); /* rows */
typedef struct snug_stats_row {
    const char *name;
    snug_node_stats s;
    int line;         /* 1-based line in the file */
    int node;         /* the node it matched (snug_stats_match), or -1 */
} snug_stats_row;
int snug_stats_get_row(const snug_stats *st, int r, snug_stats_row *out);
/* Matches the rows against m's nodes by key; *unmatched_rows and
 * *missing_nodes (may be NULL) receive the counts of rows that match no
 * node and of nodes without a row. */
int snug_stats_match(snug_stats *st, const snug_model *m, int *unmatched_rows, int *missing_nodes, char *err,
                     size_t err_cap);
/* The row matched to node i, or -1. */
int snug_stats_node_row(const snug_stats *st, int i);

/* Per-node memory estimates of a plan at the planning shapes, each figure
 * with its source: weights (an initializer counted once per device, at its
 * first reader), outputs, folded constants, and the workspace from the
 * op's Level-1 estimator (shapes alone, before any kernel), a stats file's
 * temp allocations, the larger of both, or a fallback ((initializers +
 * static outputs) x 0.5); the workspace prepare declared (Level 2) is
 * checked against Level 1. */
enum { SNUG_WS_ESTIMATOR = 0, SNUG_WS_PROFILE, SNUG_WS_MAX, SNUG_WS_FALLBACK, SNUG_WS_SOURCE_COUNT };
const char *snug_ws_source_name(int source); /* "estimator", "profile", "max", "fallback" */

typedef struct snug_estimate_opts {
    const snug_stats *stats; /* matched to the plan's model (snug_stats_match), or NULL */
    int strict;              /* a Level 2 over Level 1 is an error (else a warning) */
    snug_log_fn log;         /* warnings, or NULL */
    void *log_user;
    int log_level;
} snug_estimate_opts;

typedef struct snug_estimate snug_estimate;
/* o may be NULL (no stats, not strict, silent). p must be its session's
 * current plan (not planned again since snug_plan_new): estimators read
 * the plan's constants, which are the session's bytes. */
int snug_estimate_new(const snug_plan *p, const snug_estimate_opts *o, snug_estimate **out, char *err,
                      size_t err_cap);
void snug_estimate_free(snug_estimate *e); /* accepts NULL */

typedef struct snug_node_estimate {
    int device;
    uint64_t weights;      /* initializer bytes charged here (the first reader on the device) */
    uint64_t weights_read; /* all initializer bytes it reads */
    uint64_t inputs;       /* non-initializer input bytes */
    uint64_t outputs;      /* output bytes (arena and dynamic) */
    uint64_t folded;       /* constant-folded output bytes */
    uint64_t ws_level1, ws_level2, ws_profile;
    uint64_t workspace;    /* the figure resolved from them */
    int source;            /* SNUG_WS_* */
    int has_level1, has_profile;
    int level2_over;       /* Level 2 > Level 1 */
    int dynamic;           /* runs with run-time shapes: outputs are what the plan knows */
} snug_node_estimate;
int snug_estimate_get_node(const snug_estimate *e, int i, snug_node_estimate *out);

typedef struct snug_estimate_info {
    int n_nodes;
    int n_by_source[SNUG_WS_SOURCE_COUNT];
    int n_level1_from_table; /* Level 1 from snug's table rather than the op's own estimator */
    int n_level2_over;
    uint64_t weights_total;  /* all devices */
} snug_estimate_info;
void snug_estimate_get_info(const snug_estimate *e, snug_estimate_info *out);

/* ---- the LLM step loop ------------------------------------------------------ */

/* Prefill, then decode a token at a time, with the KV cache carried from
 * each step's present.N.key/value into the next one's
 * past_key_values.N.key/value: the loop snug_generator runs, on token ids
 * (no tokenizer), for callers that drive a model themselves (benchmarks,
 * servers). Optimum and onnxruntime-genai exports, batch 1. The cache is
 * the session's persistent state, planned once for max_ctx tokens. The
 * message of a failed call is on the session. */
typedef struct snug_decoder snug_decoder;

/* One decoder per session, made before the session plans or runs (its
 * cache is part of the first plan; else SNUG_ERR_INVALID_ARG); s must
 * outlive it and run nothing else meanwhile. Steps take at most max_step
 * tokens (a longer prompt is an error; 0: max_ctx), so the activation arena
 * is planned for that many. A context the model cannot hold is
 * SNUG_ERR_RANGE; a model that is no LLM of a known convention
 * SNUG_ERR_UNSUPPORTED, naming the input. */
int snug_decoder_new(snug_session *s, int64_t max_ctx, int64_t max_step, snug_decoder **out);
void snug_decoder_free(snug_decoder *d); /* accepts NULL */

typedef struct snug_decoder_info {
    int n_layers;         /* past_key_values.N pairs */
    int64_t kv_heads, head_dim;
    int64_t vocab;        /* last dim of logits; < 1 until a first step when the model leaves it symbolic */
    int64_t max_ctx;
    int has_position_ids;
    size_t kv_bytes;      /* the KV cache */
    int shared_kv;        /* present is computed into the past buffers: no copy per step */
    int last_logits;      /* steps give the last position's logits only (snug.last_logits) */
    int slots;            /* sequences in the cache (snug_decoder_new_slots; 1 otherwise) */
} snug_decoder_info;
void snug_decoder_get_info(const snug_decoder *d, snug_decoder_info *out);

/* Runs the n prompt tokens ids[0..n) after what is cached. *logits (may be
 * NULL) receives [n, vocab] floats (the last position's only, [1, vocab],
 * when info.last_logits), valid until the next step, reset or free. */
int snug_decoder_prefill(snug_decoder *d, const int64_t *ids, int64_t n, const float **logits);
/* One token; *logits receives [vocab] floats, as above. */
int snug_decoder_decode(snug_decoder *d, int64_t id, const float **logits);
/* Forgets the cached tokens (the buffers stay). */
void snug_decoder_reset(snug_decoder *d);
/* Keeps the first pos cached tokens (a conversation going on from a common
 * prefix prefills only what differs). */
int snug_decoder_rewind(snug_decoder *d, int64_t pos);
int64_t snug_decoder_pos(const snug_decoder *d); /* tokens cached */

/* A decoder of `slots` sequences in one cache (each max_ctx tokens), so a
 * decode step advances several in one model run, every weight read once for
 * all (models with an attention_mask input; others are SNUG_ERR_UNSUPPORTED,
 * saying why). The plan holds slots x max_step tokens of activations: keep max_step
 * small. Slot 0 is the one the calls above run. */
int snug_decoder_new_slots(snug_session *s, int64_t max_ctx, int64_t max_step, int slots, snug_decoder **out);
/* n prompt tokens on one slot, as snug_decoder_prefill. */
int snug_decoder_slot_prefill(snug_decoder *d, int slot, const int64_t *ids, int64_t n, const float **logits);
/* One decode step of n slots, slots[k] fed ids[k]: *logits is [B, vocab]
 * with B one past the highest slot given, the row of slot s at s (the rows
 * of slots not given are stand-ins: ignore them; those slots keep their
 * cache, a full one but its last token). */
int snug_decoder_decode_slots(snug_decoder *d, int n, const int *slots, const int64_t *ids, const float **logits);
void snug_decoder_slot_reset(snug_decoder *d, int slot);
int64_t snug_decoder_slot_pos(const snug_decoder *d, int slot); /* tokens cached; -1: no such slot */

/* What a decoder holds resident at its peak, in bytes (docs/executor.md). */
typedef struct snug_memory {
    uint64_t weights_read;     /* mapped weights read whole: the fault-around windows covering them */
    uint64_t weights_gathered; /* pages of tables only gathered from, bound for max_ctx tokens */
    uint64_t weights_copied;   /* aligned copies of misaligned weights; under snug.weights=load all
                                * weights read whole */
    uint64_t packed;           /* prepared kernels' state: packed weights, each replacing its source */
    uint64_t staging;          /* weight streaming's staging slots (snug.mem.host); streamed weights
                                * count nowhere else */
    uint64_t arena;            /* the activation arena (workspace inside) */
    uint64_t lower_bound;      /* the largest total of planned tensors alive at one step */
    uint64_t kv;               /* the KV cache */
    uint64_t folded;           /* constants computed at plan time */
    uint64_t driver;           /* the loop's own buffers (ids, mask, positions) */
    uint64_t other_heap;       /* the rest of the library's heap (0 under a caller's allocator) */
    uint64_t total;            /* all of the above but lower_bound */
} snug_memory;
/* Accounted after planning: from what the plan made, with the allocator's
 * high-water mark for the rest of the heap. */
void snug_decoder_memory(const snug_decoder *d, snug_memory *out);
/* Estimated before planning (the plan at the bounds run dry, nothing read,
 * packed or allocated); SNUG_ERR_UNSUPPORTED when there is none (a model
 * that cannot be planned at its bounds). */
int snug_decoder_estimate(const snug_decoder *d, snug_memory *out);

/* ---- this build ------------------------------------------------------------- */

/* The operators it implements, as domain ("" for ai.onnx), op type and the
 * opset each entry serves from (up to the next entry of the same op). */
typedef struct snug_op_def {
    const char *domain, *name;
    int since_version;
} snug_op_def;
int snug_op_table_size(void);
int snug_op_table_get(int i, snug_op_def *out);
/* The float32 GEMM micro-kernel this CPU runs ("avx2-6x16", ...). */
const char *snug_gemm_kernel_name(void);

/* ---- option values ---------------------------------------------------------- */

/* "512", "64K", "1.5G", "2GiB", "300MB" in bytes (K, M, G, T: multiples of
 * 1024). */
int snug_parse_size(const char *text, uint64_t *bytes, char *err, size_t err_cap);
/* session.max_shape_override's grammar, "name:[d0,d1];name2:[...]", into
 * *n entries the caller frees with snug_shapes_free. */
typedef struct snug_shape {
    char *name;
    int rank;
    int64_t dims[SNUG_MAX_RANK];
} snug_shape;
int snug_shapes_parse(const char *text, snug_shape **out, int *n, char *err, size_t err_cap);
void snug_shapes_free(snug_shape *s, int n); /* accepts NULL */

/* ---- text generation ------------------------------------------------------ */

/* An LLM folder as onnxruntime-genai writes it (genai_config.json) or as
 * Optimum does (config.json, generation_config.json), with tokenizer.json and
 * tokenizer_config.json (or chat_template.jinja); see docs/generate.md. A
 * conversation stays in the KV cache between calls: a prompt that starts with
 * what is cached prefills only the rest. A build without the tokenizer's
 * libraries (PCRE2, utf8proc, cJSON) returns SNUG_ERR_UNSUPPORTED. */
typedef struct snug_generator snug_generator;

typedef struct snug_generator_config {
    int64_t ctx;      /* context in tokens (the KV cache); 0: the model's, at most 4096 */
    int64_t batch;    /* prompt tokens per prefill step, at least 2 (a one-token step would be a
                       * decode row: SNUG_ERR_INVALID_ARG); 0: 512 */
    int threads;      /* 0: all cores */
    int weights_load; /* nonzero: snug.weights=load (weights read into owned memory) */
    const char *chat_template_path; /* a Jinja template file instead of the model's, or NULL */
    uint64_t mem_host;   /* snug.mem.host: bytes the plan may hold on the host, weights that do not fit
                          * streamed from the file layer by layer (docs/streaming.md); 0: no budget */
    int prefetch_layers; /* snug.prefetch_layers: staging slots for streamed layers; 0: 2 */
    int slots;           /* answers under way at once, each with its own ctx tokens of KV cache and all
                          * decoded in one model run per token (snug_generator_step); 0 or 1: one.
                          * More needs an attention_mask input (GroupQueryAttention's lengths, or
                          * keys masked in a padded cache as Optimum exports do, docs/serve.md):
                          * other models fail to open with SNUG_ERR_UNSUPPORTED, saying so. With
                          * batch 0 a prompt goes in chunks of max(32, 512 / slots) tokens */
    const char *device;  /* snug.device: an accelerator beside the host ("opencl", "opencl:1"), or NULL */
    const char *const *config; /* [2 n_config]: more session config entries, key then value (placement:
                                * snug.n_gpu_layers, snug.mem.gpu, session.name_based_layer_assignment ...) */
    int n_config;
    snug_log_fn log;     /* the session's warnings (a placement rule matching nothing...), or NULL */
    void *log_user;
} snug_generator_config;

/* cfg may be NULL (defaults). On failure *out is NULL and err (if not NULL)
 * receives the message. */
int snug_generator_create(const char *model_dir, const snug_generator_config *cfg, snug_generator **out,
                          char *err, size_t err_cap);
void snug_generator_free(snug_generator *g); /* accepts NULL */
/* The message of the last failed call on g. */
const char *snug_generator_error(const snug_generator *g);
/* Nonzero when the model (or cfg->chat_template_path) gives a chat template
 * snug can render. */
int snug_generator_has_chat_template(const snug_generator *g);
/* Why the model's chat template cannot be rendered (a construct snug does
 * not render, a syntax error), or NULL: raw text still works. */
const char *snug_generator_chat_template_error(const snug_generator *g);

typedef struct snug_message {
    const char *role;    /* "system", "user", "assistant" */
    const char *content; /* UTF-8 */
} snug_message;

typedef struct snug_sampling {
    float temperature;    /* <= 0: greedy */
    int top_k;            /* <= 0: all */
    float top_p;          /* >= 1: all */
    float min_p;          /* <= 0: none */
    float repeat_penalty; /* 1: off */
    uint64_t seed;
    int64_t max_tokens;   /* <= 0: until EOS or a full context */
    const char *const *stop; /* [n_stop] stop strings (not part of the text), or NULL */
    int n_stop;
} snug_sampling;

/* llama.cpp's defaults: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05. */
void snug_sampling_defaults(snug_sampling *s);

enum { SNUG_STOP_EOS = 0, SNUG_STOP_LENGTH, SNUG_STOP_STRING, SNUG_STOP_CONTEXT, SNUG_STOP_CANCELLED };

typedef struct snug_generation {
    int stop;              /* SNUG_STOP_* */
    int64_t prompt_tokens; /* in the prompt */
    int64_t prefilled;     /* of those, fed to the model (the rest were cached) */
    int64_t generated;     /* tokens generated, the EOS included */
    double prefill_s, decode_s, ttft_s;
    int64_t shared;        /* of the cached prompt tokens, copied from another slot (snug_generator_set_share_prompt) */
} snug_generation;

/* Receives each piece of the answer as it completes; nonzero stops. */
typedef int (*snug_text_fn)(void *user, const char *text, size_t len);

/* Answers a conversation (rendered by the model's chat template with the
 * generation prompt). s NULL: snug_sampling_defaults. out may be NULL. */
int snug_generator_chat(snug_generator *g, const snug_message *msgs, int n, const snug_sampling *s,
                        snug_text_fn fn, void *user, snug_generation *out);
/* Continues raw text (tokenized with the tokenizer's special tokens). */
int snug_generator_complete(snug_generator *g, const char *text, const snug_sampling *s, snug_text_fn fn,
                            void *user, snug_generation *out);
/* Forgets the cached conversation. */
void snug_generator_reset(snug_generator *g);
/* The token ids the last answer sampled, in order (an EOS that ended it
 * included); *ids stays valid until the next call on g. */
int64_t snug_generator_answer_ids(const snug_generator *g, const int32_t **ids);
/* Its session's weight streaming (snug_session_stream_stats). */
void snug_generator_stream_stats(const snug_generator *g, snug_stream_stats *out);
/* The session under the generator (devices, plan, stats); valid while g is. */
const snug_session *snug_generator_session(const snug_generator *g);

/* Continuous batching (config.slots > 1; docs/serve.md). An answer starts on
 * a free slot; each snug_generator_step then runs one prompt chunk of one
 * slot that is prefilling and one token of every slot that is decoding, in
 * one model run where the model allows (GroupQueryAttention, a float32
 * cache, 4-bit MatMulNBits at accuracy_level 4 on AVX-512 VNNI: packed,
 * each row with the bits of its own run), else the chunk in a run of its
 * own first, calling each answer's fn with its text (fn returning
 * nonzero cancels that answer only). A step returns how many answers are
 * still under way (negative: an error) and sets *finished (may be NULL) to
 * how many ended in it; snug_generator_finish collects an ended answer and
 * frees its slot. The text and messages are read at the start; s->stop and
 * user must live until the answer is collected. snug_generator_chat and
 * _complete run slot 0 to the end (stepping any other slot under way). */
int snug_generator_slots(const snug_generator *g);
int snug_generator_start_chat(snug_generator *g, int slot, const snug_message *msgs, int n, const snug_sampling *s,
                              snug_text_fn fn, void *user);
int snug_generator_start_complete(snug_generator *g, int slot, const char *text, const snug_sampling *s,
                                  snug_text_fn fn, void *user);
int snug_generator_step(snug_generator *g, int *finished);
/* Nonzero when slot's answer has ended and waits to be collected. */
int snug_generator_slot_done(const snug_generator *g, int slot);
/* The ended answer's status (its message in snug_generator_error) and figures (out may be NULL). */
int snug_generator_finish(snug_generator *g, int slot, snug_generation *out);
/* A free slot forgets its cached conversation. */
void snug_generator_slot_reset(snug_generator *g, int slot);
/* A free slot keeps of its cached conversation only the rows that prompt
 * chunks of two tokens or more computed (attention rounds a decode row, and
 * a one-token chunk, otherwise than a row of a longer prompt, as ONNX
 * Runtime does): a prompt that starts with them prefills only the rest and
 * still gets, to the bit, the answer a fresh prefill gives. An answer's
 * tokens, and the turn after them, are fed again. */
void snug_generator_slot_keep_exact(snug_generator *g, int slot);
/* Of the slots[0..n_slots) that are free, the one whose cache a start of
 * this conversation (text NULL) or raw text would reuse most of (exact
 * nonzero: only the rows snug_generator_slot_keep_exact keeps; the first on
 * a tie), and how many prompt tokens (reuse, may be NULL): where to start
 * it. Negative on an error (a template or tokenizer failure, no free slot
 * given). */
int snug_generator_pick_slot(snug_generator *g, const int *slots, int n_slots, const snug_message *msgs, int n,
                             const char *text, int exact, int64_t *reuse);
/* Whether the starts that follow (snug_generator_start_chat,
 * snug_generator_start_complete) copy prompt rows another slot holds, free
 * or answering, when it holds more of the prompt among the rows
 * snug_generator_slot_keep_exact would keep than the starting slot does (a
 * prompt computed once is not computed again; the answer is still, to the
 * bit, the one a fresh prefill gives, as far as the slot's own kept rows
 * are exact). Default: no. snug_generation.shared counts the rows copied. */
void snug_generator_set_share_prompt(snug_generator *g, int on);
/* The ids slot's last answer sampled (as snug_generator_answer_ids). */
int64_t snug_generator_slot_answer_ids(const snug_generator *g, int slot, const int32_t **ids);

/* The model runs g made since it was created, by kind: a prompt chunk of
 * one slot alone (prefill), one token of every answer under way (decode),
 * or both in one run (packed: where the model allows, a step's chunk runs
 * beside its decode rows). Rows: the tokens run, a packed run's counted in
 * prefill_rows and decode_rows (decode: the answers under way at each
 * step, so decode_rows / (decode_runs + packed_runs) is the mean batch; a
 * stand-in row of an idle slot is not counted); seconds: their wall time,
 * sampling and the text callbacks not included. Not thread-safe against a
 * step running on g. */
typedef struct snug_generator_runs {
    uint64_t prefill_runs, prefill_rows;
    uint64_t decode_runs, decode_rows;
    uint64_t packed_runs;
    double prefill_s, decode_s, packed_s;
} snug_generator_runs;
void snug_generator_runs_get(const snug_generator *g, snug_generator_runs *out);

#ifdef __cplusplus
}
#endif
#endif
