/* The executor: plans a graph for concrete input shapes (constant folding,
 * static shapes, one arena with best-fit offsets, prepared kernels) and runs
 * it. A plan is reused while input shapes stay the same; nodes whose output
 * shapes depend on run-time data are run dynamically (inferred and allocated
 * at run time). Subgraphs (If/Loop/Scan bodies) get child executors. */
#ifndef SN_EXEC_EXEC_H
#define SN_EXEC_EXEC_H

#include "core/core.h"
#include "graph/graph.h"
#include "ops/op.h"
#include "plan/plan.h"

typedef struct sn_exec sn_exec;

typedef struct sn_exec_stats {
    size_t arena_bytes;      /* planned arena on the host */
    size_t device_bytes;     /* what the plan holds on accelerators: arenas, weights, states */
    size_t copied_bytes;     /* bytes runs copied between devices since the plan */
    size_t lower_bound;      /* largest total of planned tensors alive at one step */
    size_t folded_bytes;     /* constant-folded values */
    int n_static, n_dynamic, n_folded; /* nodes by mode in the current plan */
    int n_inplace;           /* static nodes whose output reuses input 0's block */
    int n_grouped;           /* static nodes run in groups of one op (sn_op_def.run_group) */
    int n_tails;             /* static nodes run as a group's tail (sn_kernel.group_tail) */
    int n_plans;             /* how many times a plan was made */
    size_t copied_init_bytes; /* weights copied because the file left them misaligned */
    size_t persistent_bytes; /* state buffers (sn_exec_add_state): the KV cache */
    size_t kernel_state_bytes; /* what prepared kernels hold (prepacked weights) */
    size_t released_bytes;   /* constants no run reads, released or freed (drop_unread_inputs) */
} sn_exec_stats;

/* What a plan at input bounds will hold, found before any weight is packed
 * or read (sn_exec_estimate_bounds). */
typedef struct sn_exec_estimate {
    size_t arena;        /* the activation arena (workspace inside), placed as the plan will */
    size_t lower_bound;  /* largest total of planned tensors alive at one step */
    size_t folded;       /* constants computed at plan time */
    size_t state;        /* prepared kernels' state: packed weights, each replacing its source */
    size_t device;       /* what the plan would hold on accelerators: arenas, weights, KV */
    int n_static, n_dynamic;
} sn_exec_estimate;

/* pool and log are borrowed and may be NULL. */
int sn_exec_new(const sn_graph *g, sn_pool *pool, const sn_logger *log, sn_exec **out, sn_err *err);
/* Adds device `name` ("opencl", "opencl:1"; sn_backend_new) beside the
 * host: from the next plan on, nodes its backend has kernels for run there
 * (sn_plan_assign), values cross between the devices as the plan's copies
 * say. "cpu" adds nothing (the host is always device 0). Before states and
 * the first plan. */
int sn_exec_add_backend(sn_exec *ex, const char *name, sn_err *err);
int sn_exec_device_count(const sn_exec *ex);
/* Bytes of the state buffers device d holds. */
size_t sn_exec_state_bytes_on(const sn_exec *ex, int d);
/* Graph output `output` stays where it is computed: a run copies it to no
 * other device, and on an accelerator its outputs[] entry has no data.
 * The caller moves its bytes with sn_exec_output_to_state, and from then
 * on moves state bytes only through that and sn_exec_state_move, so a
 * state whose readers all run on one accelerator lives there. */
int sn_exec_keep_output(sn_exec *ex, int output, sn_err *err);
/* Placement on the accelerator (device 1), for the next plans: rule_dev
 * [n_nodes] (NULL: no rules) the device a rule puts each node on (-1 none:
 * its layer decides); ngl >= 0 the last ngl repeating layers there (the
 * output layer as the ngl+1-th, llama.cpp's -ngl), -1 auto: a plan at
 * bounds takes as many layers as keep the device within budget (bytes; 0:
 * its free memory less a margin), fitted by planning each count dry. A
 * plan holding more than a given budget there is an error. skip: the fit
 * goes on past a layer that does not fit (one dry plan per layer; else the
 * layers placed are contiguous, from the last one down). stream: every
 * layer (or -ngl's) on the device, the weights of those past its budget
 * streamed there from host memory layer by layer (sn_plan_device_stream). */
typedef enum { SN_OVERFLOW_STOP, SN_OVERFLOW_SKIP, SN_OVERFLOW_STREAM } sn_overflow;
int sn_exec_set_placement(sn_exec *ex, const int *rule_dev, int ngl, uint64_t budget, sn_overflow overflow,
                          sn_err *err);
/* Weights streamed to accelerator d (snug.placement_overflow=stream): the
 * plan's decision and the bytes copied in so far. */
const sn_plan_stream *sn_exec_dstream_plan(const sn_exec *ex);
uint64_t sn_exec_dstream_bytes(const sn_exec *ex);
/* The copy bound of it: one sweep's streamed weights copied to the device
 * alone, blocking, nothing computing (bytes per second; 0: nothing
 * streams). Between runs. */
int sn_exec_dstream_probe(sn_exec *ex, double *bytes_per_s, sn_err *err);
/* n bytes of graph output `output` from byte src_off, as the last run left
 * them, into the buffer of state `input` at byte dst_off (a KV cache's new
 * rows), on whichever devices the two live. */
int sn_exec_output_to_state(sn_exec *ex, int output, size_t src_off, int input, size_t dst_off, size_t n,
                            sn_err *err);
/* memmove of n bytes inside state `input`'s buffer, on its device. */
int sn_exec_state_move(sn_exec *ex, int input, size_t dst_off, size_t src_off, size_t n, sn_err *err);
const struct sn_backend *sn_exec_backend(const sn_exec *ex, int d); /* NULL out of range */
void sn_exec_free(sn_exec *ex); /* accepts NULL */

/* Runs the current plan: one loop over the nodes, no planning. inputs[i]
 * feeds g->inputs[i] (borrowed for the run) and must lie inside the plan
 * (its bounds, or the shapes it was made for): else an error naming the
 * input, its shape and the bound (see sn_exec_replan_for). On success
 * outputs[i] (n_outputs == g->n_outputs) views the values of
 * g->outputs[i]; they stay valid until the next run or sn_exec_free. */
int sn_exec_run(sn_exec *ex, const sn_tensor *inputs, sn_tensor *outputs, sn_err *err);

const sn_exec_stats *sn_exec_get_stats(const sn_exec *ex);
/* From now on the runs add each node's wall time, in seconds, to acc[node
 * index] (n_nodes values, not owned); NULL stops. For profiles such as
 * snug bench --ops; off, a run pays one test per node. */
void sn_exec_time_nodes(sn_exec *ex, double *acc);
/* snug.weights=load: from the next plan on, every weight a kernel reads is
 * read from the model's files into owned memory and nothing of the files
 * stays mapped (tables only gathered are read row by row with pread), so
 * resident memory is exactly what the plan holds, whatever the page cache
 * holds. Off (the default): weights are read through the file map. */
void sn_exec_set_weights_load(sn_exec *ex, bool on);
/* snug.node_groups (default on): from the next plan on, consecutive nodes of
 * an op that runs groups (sn_op_def.run_group) and read the same input run
 * as one call; off: every node on its own. */
void sn_exec_set_groups(sn_exec *ex, bool on);
bool sn_exec_weights_load(const sn_exec *ex);
/* session.strict_workspace_verification=1 (ONNX Runtime 1.31's key): from
 * the next plan on, a kernel declaring more workspace in prepare (Level 2)
 * than the Level-1 reservation of the plan's estimate stage is an error
 * naming the node and both figures; off (the default) it is a warning and
 * the arena holds the declared figure. */
void sn_exec_set_strict_workspace(sn_exec *ex, bool on);
/* session.set_denormal_as_zero (ONNX Runtime's key; a session's default
 * here is on): runs, folds and plans compute with subnormal numbers
 * flushed to zero (sn_fp_flushing), the caller's mode restored after;
 * off (an executor's default): in the caller's mode. */
void sn_exec_set_flush_denormals(sn_exec *ex, bool on);
/* Weight streaming (docs/streaming.md): from the next plan at bounds on,
 * with host_budget > 0 (snug.mem.host) the plan holds at most that many
 * bytes on the host: the earliest layers' weights resident, the rest
 * (a run of layers at the end) read from the model's files into a ring of
 * depth staging slots (snug.prefetch_layers) by an I/O thread while the
 * layers before compute. n_layers: the session's layer map. A budget too
 * small for one layer at a time plus everything that cannot stream fails
 * the plan, naming the minimum. */
void sn_exec_set_streaming(sn_exec *ex, uint64_t host_budget, int depth, int n_layers);
/* The current plan's residency (first_layer == n_layers: nothing streams). */
const struct sn_plan_stream *sn_exec_stream_plan(const sn_exec *ex);
typedef struct sn_exec_stream_stats {
    uint64_t bytes_read, loads; /* over the session */
    double read_s;              /* the I/O thread's time reading */
    double stall_s;             /* the runs' time waiting for a layer */
    size_t staging_bytes;
    int layers;                 /* streamed layers */
} sn_exec_stream_stats;
void sn_exec_stream_counts(const sn_exec *ex, sn_exec_stream_stats *out);
/* The residency a plan at these bounds will get (what sn_exec_set_bounds
 * decides first): for an estimate made before planning. */
int sn_exec_stream_decide(sn_exec *ex, const sn_tensor *bounds, sn_err *err);
const struct sn_plan_stream *sn_exec_stream_decided(const sn_exec *ex);
/* The I/O bound of the current plan's streaming: one sweep over the
 * streamed layers read exactly as the prefetcher reads them (pread, the
 * page cache dropped behind), with nothing computing; *bytes_per_s 0 when
 * nothing streams. Between runs only. */
int sn_exec_stream_probe(sn_exec *ex, double *bytes_per_s, sn_err *err);
/* Whether constant v streams under the residency decided last. */
bool sn_exec_value_streamed(const sn_exec *ex, int v);
/* What a hostile model may spend (docs/robustness.md); subgraphs' executors
 * take their parent's. mem_budget (snug.memory_budget, default the
 * machine's memory from the CPU backend, 0: no bound): from the next plan
 * on, a value whose shape asks for more bytes is an error naming its node,
 * shape and size, when planned (static outputs), when a dynamic output is
 * allocated and when a kernel allocates its outputs. max_iterations
 * (snug.max_loop_iterations, default SN_MAX_LOOP_ITERATIONS): one Loop or
 * Scan runs its body at most this many times, or fails. */
void sn_exec_set_limits(sn_exec *ex, const sn_limits *limits);
const sn_limits *sn_exec_limits(const sn_exec *ex);
/* Threads the executor's kernels run on. */
int sn_exec_threads(const sn_exec *ex);

/* Plans for the given input shapes without running (inputs[i] need kind,
 * dtype and shape; data is ignored). The plan is kept and reused by a run
 * with the same shapes. */
int sn_exec_plan(sn_exec *ex, const sn_tensor *inputs, sn_err *err);

/* The plan sn_exec_set_bounds(bounds) would make, as an estimate, before
 * any weight is read or packed: shapes inferred and constants folded as the
 * plan does, every kernel's prepare run dry (sn_prep_ctx.dry: the workspace
 * it declares and the state it would build, built not), the arena placed but
 * not allocated, nothing released. gone (n_values, may be NULL) gets 1 for
 * each constant no run of that plan would read (folded away, or replaced by
 * a kernel's packed state): its file pages would be released. Discards the
 * current plan (call it before planning). */
int sn_exec_estimate_bounds(sn_exec *ex, const sn_tensor *bounds, sn_exec_estimate *e, uint8_t *gone,
                            sn_err *err);
/* Plans once for input bounds (bounds[i]: kind, dtype and the largest shape
 * of graph input i). Later runs take any inputs whose dims are within the
 * bounds: each node is inferred again for the actual shapes and computes into
 * the buffers planned at the bounds, with no allocation (dynamic nodes
 * excepted); an input beyond its bound is an error naming input and bound. */
int sn_exec_set_bounds(sn_exec *ex, const sn_tensor *bounds, sn_err *err);

/* Makes graph input `input` persistent state: a buffer of bound's bytes
 * (kind, dtype, shape; zeroed), allocated now from the executor's device
 * and kept across plans and runs: the persistent region of the memory plan,
 * where a KV cache lives. Every run feeds the input from that buffer (the
 * caller's data pointer is ignored; its shape must fit the buffer), and the
 * caller reads and writes it through sn_exec_state_data. With output >= 0,
 * graph output `output` is computed straight into the same buffer instead of
 * the arena: its producer must be the input's only reader and must declare
 * SN_OP_KV_SHARE (GroupQueryAttention with past and present in one buffer
 * writes only the new rows). Call before the first plan. */
int sn_exec_add_state(sn_exec *ex, int input, int output, const sn_tensor *bound, sn_err *err);
/* Whether `bytes` more host memory made resident now stays within the
 * memory budget and what the machine has available; SNUG_ERR_OOM naming
 * `what` if not (a caller about to add states totalling that checks first,
 * before any is touched). */
int sn_exec_check_resident(const sn_exec *ex, size_t bytes, const char *what, sn_err *err);
/* Whether sn_exec_add_state(ex, input, output, ...) may share the buffer. */
bool sn_exec_state_shareable(const sn_exec *ex, int input, int output);
/* The state buffer of graph input `input`, or NULL when it is not state
 * or lives on an accelerator (sn_exec_state_device). */
void *sn_exec_state_data(const sn_exec *ex, int input);
/* The device holding that state buffer (0: the host; -1: no state). A
 * plan moves a state whose readers all run on one accelerator, and which
 * its reader writes in place (a shared KV cache), to that device, its
 * bytes with it. */
int sn_exec_state_device(const sn_exec *ex, int input);
/* Runs from now on bind input `input` (and its shared output) to its state
 * buffer from byte off on, as if the buffer began there and held cap - off
 * bytes: a batch-1 step on one slot of a cache planned for several
 * sequences (kvloop.c). off 0 restores the whole buffer. */
int sn_exec_state_window(sn_exec *ex, int input, size_t off, sn_err *err);

/* The planned info (kind, dtype, shape) of value v, its storage, and for
 * SN_STORE_ARENA its offset. */
const sn_tensor *sn_exec_value_info(const sn_exec *ex, int v);
sn_storage sn_exec_value_storage(const sn_exec *ex, int v, size_t *offset);
/* From the next plan on, node `node` reads only the last position of its
 * input 0 ([1, S, H] is bound to it as [1, 1, H], a view of the last row):
 * the output projection of an LLM's prefill, whose other rows a generator
 * never reads (snug.last_logits). Refused for views, in-place and
 * control-flow nodes. */
int sn_exec_set_last_row(sn_exec *ex, int node, sn_err *err);
/* That node, or -1. */
int sn_exec_last_row(const sn_exec *ex);
/* The runs from now on give that node the last k positions (k >= 1) of its
 * input 0 instead of the last one: a packed step's (sn_exec_set_packed)
 * decode rows and its prompt chunk's last row. */
void sn_exec_set_last_rows(sn_exec *ex, int64_t k);
/* The runs from now on are packed as p says (NULL: not packed; p must live
 * until it is reset). The caller binds inputs of [1, T] rows, the cache
 * buffers as slot 0's [1, kv_heads, cap, head_dim] with every slot behind
 * it, and checks that the model allows it (sn_kvloop_step_packed). */
void sn_exec_set_packed(sn_exec *ex, const sn_packed *p);

/* A run never plans: inputs outside the current plan are its error. What
 * to do about them is the owner's decision, taken before the run with
 * sn_exec_replan_for: AUTO plans again (subgraph executors, whose shapes
 * follow their parent's run; one-shot tools); WARN plans again and says so
 * at WARN (sessions); NEVER leaves the error naming the input, its shape
 * and the planned one. A plan at bounds is never re-made this way: inputs
 * beyond its bounds stay an error. */
typedef enum sn_replan { SN_REPLAN_AUTO = 0, SN_REPLAN_WARN, SN_REPLAN_NEVER } sn_replan;
int sn_exec_replan_for(sn_exec *ex, const sn_tensor *inputs, sn_replan policy, sn_err *err);

/* The current plan as a value (src/plan/plan.h), a copy the caller frees
 * with sn_plan_free: every value's storage, buffer, offset, lifetime and
 * planned info, every node's mode, group and workspace slot. An error when
 * the executor has no plan. */
int sn_exec_plan_value(const sn_exec *ex, sn_plan **out, sn_err *err);
/* The current plan itself (borrowed, valid until the next plan or
 * sn_exec_free), or NULL before the first. */
const sn_plan *sn_exec_plan_ref(const sn_exec *ex);
/* True when no run of the current plan reads constant v (its readers are
 * folded, or hold it in another form): its mapped pages were released, or
 * its aligned copy or folded block freed. */
bool sn_exec_value_released(const sn_exec *ex, int v);
/* Workspace bytes node i declared in prepare (0 if none or dynamic). */
size_t sn_exec_node_workspace(const sn_exec *ex, int i);
/* True when node i was folded at plan time / runs with run-time shapes. */
bool sn_exec_node_folded(const sn_exec *ex, int i);
bool sn_exec_node_dynamic(const sn_exec *ex, int i);

#endif
