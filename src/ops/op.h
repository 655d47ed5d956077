/* The kernel interface. Every operator is an sn_op_def in its family's table
 * (src/ops/<family>/, listed in src/ops/optable.c): its schema
 *   infer   — output kinds/dtypes/shapes from input shapes (and input data
 *             where the data is known: constants, shape computations);
 *   estimate — optional, the Level-1 workspace from those infos;
 * and the CPU's kernel (sn_kernel):
 *   prepare — optional, once per planned shape set: per-node state and the
 *             exact workspace size (Level 2);
 *   run     — computes outputs into buffers the executor provides; never
 *             allocates (except ops flagged SN_OP_ALLOCS_OUTPUTS).
 * Shapes passed to infer may hold unknown (-1) or symbolic (<= -2) dims and
 * inputs whose data is NULL (not known before run). At run time infer is
 * called with every input's data present and must then give concrete shapes. */
#ifndef SN_OPS_OP_H
#define SN_OPS_OP_H

#include "core/core.h"
#include "graph/graph.h"

/* What a kernel may ask of the runner calling it, the one way back to it
 * (sn_kctx.host): memory that lives until the next run (outputs whose
 * shapes the kernel decides), its node's subgraphs run, and bytes of a
 * constant left in the model's file read (the runner owns weight
 * residency). Kernels use it through the sn_kctx_* helpers below. */
/* What a run may spend on one model, whatever the model asks
 * (docs/robustness.md). */
typedef struct sn_limits {
    size_t mem_budget;     /* snug.memory_budget: bytes one value may take (0: no bound) */
    int64_t max_iterations; /* snug.max_loop_iterations: iterations of one Loop or Scan */
} sn_limits;
#define SN_MAX_LOOP_ITERATIONS ((int64_t)1 << 24) /* snug.max_loop_iterations' default */

typedef struct sn_host {
    void *(*alloc)(void *ctx, size_t bytes); /* zeroed; NULL when out of memory */
    const sn_limits *(*limits)(const void *ctx); /* NULL: the defaults (no budget) */
    int (*run_subgraph)(void *ctx, const sn_node *n, int k, int n_in, const sn_tensor *in,
                        const sn_tensor **outs, int *n_out, sn_err *err);
    bool (*reads_file)(const void *ctx, const sn_tensor *t);
    int (*read_const)(const void *ctx, void *dst, const void *src, size_t n, sn_err *err);
} sn_host;

typedef struct sn_infer_ctx {
    const sn_node *node;
    int n_in, n_out;
    const sn_tensor *const *in; /* in[i] NULL: optional input absent; ->data NULL: data not known yet */
    sn_tensor **out;            /* set kind, dtype, rank, dims; out[i] NULL for absent optional outputs */
    sn_err *err;
    int n_threads;              /* for Level-1 estimates: threads run will use (0: not known) */
} sn_infer_ctx;

typedef struct sn_prep_ctx {
    const sn_node *node;
    int n_in, n_out;
    const sn_tensor *const *in; /* concrete shapes; data only for constants */
    const sn_tensor *const *out;
    void *state;                /* set by prepare; freed with op->free_state */
    size_t workspace;           /* set by prepare: bytes of scratch run needs */
    sn_err *err;
    int n_threads;              /* threads run will use (size the workspace for them) */
    size_t state_bytes;         /* set by prepare: memory its state holds (a prepacked weight) */
    uint32_t replaces;          /* set by prepare: bit k when the state holds constant input k in
                                 * another form, so run never reads the original (the executor
                                 * may release its mapped pages) */
    /* May be NULL. While building state that replaces a constant input, a
     * kernel may hand back each part of it once read: the executor releases
     * whatever of [p, p+n) lies in the model's file map (so a weight is never
     * resident twice, not even while being packed). */
    void (*release)(void *ctx, const void *p, size_t n);
    void *release_ctx;
    /* The plan serves many runs (made at input bounds: an LLM's step loop,
     * session.max_shape_override): state that costs a pass over a weight to
     * build (prepacking) pays off. False for a plan that may serve one run. */
    bool long_lived;
    /* An estimate only (sn_exec_estimate_bounds): declare the workspace, and
     * in state_bytes / replaces the state a real prepare would build, but
     * build nothing and read no weight (state may stay NULL). */
    bool dry;
    /* Bit k: constant input k streams (docs/streaming.md): its bytes move
     * between runs (a staging slot the prefetcher fills per sweep), so the
     * state may neither hold a pointer into it nor replace it (no packing);
     * prepare may read it. */
    uint32_t streamed;
} sn_prep_ctx;

/* prepare building state that replaces a constant input (a weight packed
 * or laid out anew) in a block of whole pages, part by part: each source
 * part once consumed counts its share of the block as written and is handed
 * back (sn_prep_ctx.release), so the library's memory counters follow what
 * is resident and the weight is never held twice. */
typedef struct sn_rebuild {
    const sn_prep_ctx *c;
    void *block;      /* from sn_pages_reserve; the caller's state frees it (sn_pages_free) */
    size_t bytes;     /* of the block */
    size_t src_bytes; /* of the source */
    size_t src_done, committed;
    const uint8_t *lo; /* the source's first byte not handed back (NULL: none yet) */
} sn_rebuild;
/* Hands back [*lo, p + n) of an ascending source in whole pages (all of it
 * when last) and moves *lo (NULL at first: p) past what went back: parts
 * smaller than a page still go back, page by page, and none twice. */
void sn_rebuild_release(const sn_prep_ctx *c, const uint8_t **lo, const void *p, size_t n, bool last);
/* Reserves the block; false without memory (then nothing to undo). */
bool sn_rebuild_begin(sn_rebuild *r, const sn_prep_ctx *c, size_t bytes, size_t src_bytes);
/* Source bytes [p, p + n) consumed (a packing routine's done callback). */
void sn_rebuild_part(void *r, const void *p, size_t n);
/* The block written: counts the rest and declares it as the state that
 * replaces input `input` (state_bytes: the whole pages it holds; replaces). */
void sn_rebuild_end(sn_rebuild *r, sn_prep_ctx *c, int input);

/* A packed run (sn_exec_set_packed): input rows [1, T, ...] that are the new
 * tokens of several sequences of a slotted KV cache, sequence i's at rows
 * [first[i], first[i + 1]), its cache the slot's, holding past[i] tokens
 * before them. GroupQueryAttention places and attends each sequence's rows
 * in its own slot, its sequences of one token as decode rows and the others
 * as prompt rows, each with the bits its own run gives; every other node
 * treats the rows as rows. Sequences of one token come last. */
#define SN_PACKED_MAX_SEQ 257 /* a decode row of every slot (SN_KVLOOP_MAX_SLOTS) and a prompt chunk */
typedef struct sn_packed {
    int n_seq;
    const int *slot;      /* [n_seq] */
    const int64_t *first; /* [n_seq + 1]; first[n_seq] = T */
    const int64_t *past;  /* [n_seq] */
    int n_slots;          /* the slots the cache buffers hold, [n_slots, kv_heads, cap, head_dim] each */
    int64_t cap;          /* positions a slot holds */
} sn_packed;

typedef struct sn_kctx {
    const sn_node *node;
    int n_in, n_out;
    const sn_tensor *const *in; /* in[i] NULL: absent optional input */
    sn_tensor *const *out;      /* allocated by the executor (data set); NULL: absent output */
    void *state;                /* from prepare, or NULL */
    void *ws;                   /* workspace of the size prepare declared (16-byte aligned) */
    sn_pool *pool;              /* may be NULL (serial) */
    const sn_host *host;        /* the runner's services (sn_kctx_* below) */
    void *host_ctx;
    sn_err *err;
    const sn_packed *packed;    /* the run's packed rows (sn_exec_set_packed), or NULL */
} sn_kctx;

typedef int (*sn_infer_fn)(sn_infer_ctx *c);
typedef int (*sn_prepare_fn)(sn_prep_ctx *c);
typedef int (*sn_run_fn)(sn_kctx *c);
typedef void (*sn_free_fn)(void *state);
/* Level-1 workspace estimate: bytes of scratch the kernel will need for
 * these input/output infos, computed before any kernel state exists (same
 * context as infer, outputs already inferred). */
typedef size_t (*sn_estimate_fn)(const sn_infer_ctx *c);

enum {
    /* run decides output shapes itself and allocates them with
     * sn_kctx_alloc_output (control flow, sequences, data-dependent shapes
     * that are cheaper to find while computing). infer still gives what it
     * can (dtype, rank). */
    SN_OP_ALLOCS_OUTPUTS = 1u << 0,
    /* Output 0 may share input 0's buffer (same shape and dtype,
     * element-wise): the planner may run it in place. */
    SN_OP_INPLACE0 = 1u << 1,
    /* Output 0 is a view of input 0's bytes (Reshape, Squeeze, ...): the
     * executor aliases it and run is not called. */
    SN_OP_VIEW0 = 1u << 2,
    /* Results are not deterministic (random ops): never constant-folded. */
    SN_OP_NONDETERMINISTIC = 1u << 3,
    /* Outputs depend only on the inputs' shapes and dtypes, never their data
     * (Shape, Size, EyeLike): folded at plan time once shapes are known. */
    SN_OP_SHAPE_ONLY = 1u << 4,
    /* Handles sub-byte element types (int4, uint4, int2, uint2, float4),
     * packed several to a byte. Other ops refuse such tensors. */
    SN_OP_PACKED_OK = 1u << 5,
    /* Outputs 1 and 2 (present key, value) may be the very buffers of
     * inputs 3 and 4 (past key, value), sized for the whole context (a
     * shared KV cache): run then writes only the new rows
     * (sn_exec_add_state). */
    SN_OP_KV_SHARE = 1u << 6,
    /* Every output may be absent ("", or not listed): RNN, GRU and LSTM.
     * Of any other op the graph requires output 0 named. */
    SN_OP_OUTPUTS_OPTIONAL = 1u << 7,
};

/* sn_op_def.required: one bit per input position that must be present (a
 * name other than ""), checked by the graph before infer is called, so no
 * op reads an input the schema requires without it being there. 0 (the
 * default) means input 0 alone, as for most ops; SN_IN_NONE: no input is
 * required (Constant, Loop, Optional, the random generators). Where the
 * requirement changed across the opsets one row serves, it is the least
 * of them. */
#define SN_IN_NONE (1u << 31)

/* Groups: consecutive static nodes of one op that read the same input 0
 * and whose other inputs are constant (a decode step's q, k and v
 * projections; gate and up) may be run by one call, so that their work
 * can be one job for the thread pool. group_ok(first, next): next may
 * join first's group. run_group gets every member's context (its own
 * state, workspace and outputs) and must compute all of them, as run
 * would one after the other. The executor plans each member's outputs
 * and workspace live from the first member on. */
#define SN_GROUP_MAX 4
typedef bool (*sn_group_ok_fn)(const sn_node *first, const sn_node *next);

/* Tails: the nodes right after a group that its kernel computes in the
 * group's own job, where the members' outputs are still in each thread's
 * cache (gate and up's SwiGLU: Sigmoid, Mul, Mul). group_tail(g, first, n)
 * says how many of the nodes after members first..first+n-1 its run_group
 * takes on (at most SN_TAIL_MAX), 0 for none. It offers only nodes every
 * output of which but the last node's is read by the tail alone and is no
 * graph output: the kernel writes the last node's outputs only. The plan
 * takes them when they are static, on the group's device, and read nothing
 * but constants, values made before the group, the members' outputs and
 * the tail's own (sn_plan_groups); run_group(cs, n, n_tail) then gets their
 * contexts after the members'. */
#define SN_TAIL_MAX 3
typedef int (*sn_group_tail_fn)(const sn_graph *g, int first, int n);
typedef int (*sn_run_group_fn)(sn_kctx *const *cs, int n, int n_tail);

/* How a device computes an op: what a backend returns for a schema and a
 * node (sn_backend_ops.kernel). */
typedef struct sn_kernel {
    sn_prepare_fn prepare;     /* may be NULL */
    sn_run_fn run;
    sn_free_fn free_state;     /* may be NULL */
    sn_run_group_fn run_group; /* NULL: never grouped */
    sn_group_tail_fn group_tail; /* NULL: no tail */
    /* Inputs (bit i) whose bytes the kernel reads on the host: a few values
     * an accelerator's kernel takes as arguments (lengths, a total), as ORT's
     * OrtMemTypeCPUInput. The plan leaves them where the host has them. */
    uint32_t host_in;
} sn_kernel;

/* What an op means, resolved by the graph with no backend involved: its
 * name and versions, inference, Level-1 estimate, flags and grouping rule.
 * The CPU's kernel is registered beside it (cpu), the row's one tie to a
 * device: src/backends/cpu returns it; another backend has its own. */
typedef struct sn_op_def {
    const char *domain;  /* "" = ai.onnx, "com.microsoft", ... */
    const char *name;    /* op_type */
    int since_version;   /* serves opsets >= this (up to the next def of the same op) */
    uint32_t required;   /* inputs that must be present (see SN_IN_NONE) */
    sn_infer_fn infer;
    unsigned flags;
    sn_estimate_fn estimate; /* Level-1 workspace estimate; NULL: no scratch */
    sn_group_ok_fn group_ok; /* NULL: never grouped */
    sn_kernel cpu;
} sn_op_def;

/* Finds the def for (domain, name) at the given opset: the one with the
 * highest since_version <= opset. NULL if none. */
const sn_op_def *sn_op_find(const char *domain, const char *name, int64_t opset);
/* Iterates over all defs (for `snug info --ops` and tests). */
int sn_op_count(void);
const sn_op_def *sn_op_at(int i);

/* ---- attributes (read from node->p->attrs) ----------------------------- */

const sn_attr *sn_attr_get(const sn_node *n, const char *name);
int64_t sn_attr_int(const sn_node *n, const char *name, int64_t def);
float sn_attr_float(const sn_node *n, const char *name, float def);
/* NUL-terminated string value, or def. */
const char *sn_attr_str(const sn_node *n, const char *name, const char *def);
/* Count of values (and *vals set), or -1 when absent. */
int sn_attr_ints(const sn_node *n, const char *name, const int64_t **vals);
int sn_attr_floats(const sn_node *n, const char *name, const float **vals);
int sn_attr_strings(const sn_node *n, const char *name, const sn_string **vals);
const sn_tensor *sn_attr_tensor(const sn_node *n, const char *name);

/* ---- helpers for kernels ------------------------------------------------ */

/* Errors with the node named: "<op> '<name>': <message>". */
int sn_kfail(sn_err *err, const sn_node *n, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The run's limits (sn_host.limits, or the defaults). */
const sn_limits *sn_kctx_limits(const sn_kctx *c);

/* For SN_OP_ALLOCS_OUTPUTS kernels: allocate output i as a tensor with the
 * given type and shape; returns its data pointer (non-NULL even for zero
 * elements) or NULL with c->err set. The executor frees it after last use. */
void *sn_kctx_alloc_output(sn_kctx *c, int i, sn_dtype dtype, int rank,
                           const int64_t *dims);
/* Output i as a sequence of n tensors: returns the item array (each item's
 * data then allocated with sn_kctx_alloc_item or borrowed... see exec.h). */
sn_tensor *sn_kctx_alloc_sequence(sn_kctx *c, int i, sn_dtype elem, int64_t n);
/* Memory that lives as long as output i (string bytes, sequence items). */
void *sn_kctx_alloc_extra(sn_kctx *c, int i, size_t bytes);
/* Output i becomes an optional without value. */
int sn_kctx_set_none(sn_kctx *c, int i);

/* For control-flow kernels: runs subgraph k of the node with the given
 * inputs bound to the subgraph's inputs in order. *outs receives the
 * subgraph's n outputs, valid until the next call for the same subgraph. */
int sn_kctx_run_subgraph(sn_kctx *c, int k, int n_in, const sn_tensor *in, const sn_tensor **outs, int *n_out);
/* The graph of subgraph k of the node, or NULL. */
const sn_graph *sn_kctx_subgraph(const sn_kctx *c, int k);
/* Subgraph by attribute name (-1 if absent). */
int sn_kctx_subgraph_index(const sn_kctx *c, const char *attr);
/* True when t's bytes must be read with sn_kctx_read_const: a weight the
 * runner left in the model's file (snug.weights=load). */
bool sn_kctx_reads_file(const sn_kctx *c, const sn_tensor *t);
/* n bytes of such a constant at src into dst. */
int sn_kctx_read_const(const sn_kctx *c, void *dst, const void *src, size_t n);

/* Input i's data as a list of int64 (from int32 or int64 tensors), for
 * shape-like inputs. Returns count, or -1 if absent / data unknown. At most
 * cap values are written. */
int sn_input_ints(const sn_tensor *t, int64_t *vals, int cap);

#endif
