/* The plan as a value: what a plan decided, in plain data, for every reader
 * of it (estimates, node stats, `snug plan --json` and `--svg`, and later
 * the placer and the prefetcher), so that none of them replays planning or
 * reaches into an executor.
 *
 * It is made in DESIGN.md's stages (docs/plan.md draws them):
 *   layers   the session's layer map (graph/layers.h), carried per node;
 *   infer and fold   the executor's one planning pass (src/exec/fold.c: it
 *            runs kernels to fold constants): every value's storage, info
 *            and alias, every node's mode;
 *   assign   every node's device (sn_plan_assign, the placer's seat);
 *   groups   nodes run as one call (sn_plan_groups);
 *   estimate the Level-1 workspace reserved per node (sn_plan_reserve,
 *            plan/estimate.h), from shapes and infos only;
 *   memory   lifetimes, views, in place, a slot per value and workspace in
 *            one buffer per device (sn_plan_memory).
 * The executor then prepares it (kernels declare their Level-2 workspace,
 * checked against the reservation; buffers allocated through each device's
 * backend) and runs it. The stages are pure functions of the plan and the
 * graph; this header includes nothing from src/exec/. */
#ifndef SN_PLAN_PLAN_H
#define SN_PLAN_PLAN_H

#include <stdio.h>

#include "core/core.h"

/* Devices one plan may use: the host and the accelerators beside it. */
#define SN_MAX_DEVICES 8
/* Buffers one plan may have: an activation arena per device and a weights
 * buffer per accelerator. */
#define SN_MAX_BUFFERS (3 * SN_MAX_DEVICES) /* per device: activations, weights, a streaming ring */

/* How a value is stored. */
typedef enum sn_storage {
    SN_STORE_NONE = 0,
    SN_STORE_CONST,   /* initializer (in the model file) */
    SN_STORE_FOLDED,  /* computed at plan time */
    SN_STORE_INPUT,   /* graph input or outer-scope value */
    SN_STORE_ARENA,   /* planned slot in a buffer (the arena) */
    SN_STORE_VIEW,    /* alias of another value's bytes */
    SN_STORE_DYNAMIC, /* shape known only at run time: allocated by the run */
    SN_STORE_STATE,   /* computed into a persistent state buffer (a KV cache) */
    SN_STORE_STREAMED, /* a weight kept on the host or on disk and brought to its device layer by
                        * layer by the prefetcher (weight streaming; no stage makes it yet) */
    SN_STORE_COUNT
} sn_storage;

const char *sn_storage_name(sn_storage s); /* "const", "folded", "input", "arena", ... */

/* How a node runs. */
typedef enum sn_node_mode {
    SN_MODE_STATIC = 0, /* shapes known at plan time: outputs and workspace planned */
    SN_MODE_DYNAMIC,    /* run-time shapes: outputs allocated by the run */
    SN_MODE_FOLDED,     /* computed at plan time (a constant) */
} sn_node_mode;

const char *sn_node_mode_name(sn_node_mode m); /* "static", "dynamic", "folded" */

typedef struct sn_plan_value {
    sn_storage storage;
    int buffer;      /* SN_STORE_ARENA: index into sn_plan.buffers; else -1 */
    size_t offset;   /* SN_STORE_ARENA: byte offset in that buffer */
    size_t size;     /* bytes at the planning shapes (0 when dynamic) */
    int alias;       /* SN_STORE_VIEW: the value whose bytes it views; else -1 */
    int first, last; /* SN_STORE_ARENA: steps (node indices) its slot is held, inclusive; a
                      * graph output to n_nodes; an in-place output shares its input's slot */
    bool released;   /* a constant no run reads (folded away or replaced by a packed form) */
    int device;      /* the device whose memory holds its bytes (transfers: its producer's, a view its
                      * source's, a state its readers'; constants and inputs the host's) */
    sn_tensor info;  /* kind, dtype, shape at the planning shapes; data only for a constant
                      * (SN_STORE_CONST, SN_STORE_FOLDED): its bytes, borrowed from the model or
                      * the executor that made the plan, valid while that plan stands */
} sn_plan_value;

typedef struct sn_plan_node {
    int device;         /* index into sn_plan.devices */
    sn_node_mode mode;
    int group;          /* the node leading its group (itself when alone) */
    int group_size;     /* members of the group it leads (1: alone); 0 for the other members, which
                         * their leader runs (sn_kernel.run_group), and for its tail */
    int n_tail;         /* a leader: the nodes right after its members that it runs too (sn_kernel.group_tail) */
    size_t workspace;   /* bytes its kernel declared when prepared (Level 2); 0 if none */
    size_t ws_reserved; /* the Level-1 reservation made before prepare (has_reserve) */
    bool has_reserve;   /* its op's estimator gave ws_reserved; false: the declaration is the first figure */
    int ws_buffer;      /* the buffer of its workspace slot, or -1 */
    size_t ws_offset;
    size_t state_bytes; /* what its prepared kernel holds (a packed weight) */
    bool last_row;      /* reads only the last position of its input 0 (snug.last_logits) */
    int layer;          /* the session's layer map (graph/layers.h): -1 pre, 0..L-1, L post */
    uint32_t host_in;   /* inputs its device's kernel reads on the host (sn_kernel.host_in) */
    char note[96];      /* why it runs on the host where an accelerator was asked for ("" if not) */
} sn_plan_node;

typedef struct sn_plan_buffer {
    int device;
    bool weights;       /* the device's copies of constants, uploaded once (else an activation arena) */
    bool ring;          /* the slots streamed weights come into, layer by layer (sn_plan_device_stream) */
    size_t size;        /* bytes */
    size_t lower_bound; /* the largest total of its slots alive at one step */
} sn_plan_buffer;

/* Where one layer goes (the placement): rows for the input layers (pre,
 * row 0), the repeating layers 0..L-1 (rows 1..L) and the output layer
 * (post, row L+1). */
typedef struct sn_plan_layer {
    int device;         /* its nodes' device, unless a rule places a node elsewhere */
    char why[112];      /* "-ngl 12", "auto: fits, 410 MiB of the 512 MiB budget", ... */
} sn_plan_layer;

/* A value copied to another device (sn_plan_transfers): its mirror, a slot
 * in a buffer of that device, which the nodes reading it there read
 * instead. A constant's mirror is uploaded once, when the plan is
 * prepared, into the device's weights buffer; any other is copied before
 * its first reader there (at) and lives in that device's arena until its
 * last. A graph output computed on an accelerator comes back to the host
 * after the last node (at = n_nodes). */
typedef struct sn_plan_xfer {
    int value;
    int from, to;   /* devices */
    int at;         /* copied before node at (n_nodes: after the last); -1: once, when prepared */
    int last;       /* the last node reading the mirror (n_nodes: a graph output) */
    size_t size;    /* bytes at the planning shapes */
    int buffer;     /* memory: the mirror's buffer and offset */
    size_t offset;
    int stream_layer; /* a weight streamed to its device (sn_plan_device_stream): its layer, its offset one
                       * inside that layer's ring slot (buffer: the ring); -1: uploaded once */
} sn_plan_xfer;

/* Weight streaming (sn_plan_residency, docs/streaming.md): the layers
 * whose weights are not resident but read from the model's files into a
 * ring of staging slots, layer by layer, ahead of the nodes reading them. */
typedef struct sn_plan_stream {
    int device;             /* whose budget: 0 the host (from the model's files), else an accelerator
                             * (from host memory) */
    int first_layer;        /* layers first_layer..n_layers-1 stream; == n_layers: none */
    int n_layers;
    int depth;              /* slots in the staging ring (>= 2: one computes while the next loads) */
    size_t slot_bytes;      /* the largest streamed layer's weights, each value 64-byte aligned */
    size_t staging_bytes;   /* depth x slot_bytes */
    size_t streamed_bytes;  /* the streamed layers' weights: what one sweep over the layers reads */
    int n_values;           /* values streamed */
    uint64_t budget;        /* the host budget planned for (0: none) */
    uint64_t fixed;         /* what the budget holds whatever streams: activations, KV, folded,
                             * packed state and the weights that cannot stream */
    uint64_t fixed_act, fixed_kv; /* of it: the activation arena, the KV cache (the rest: weights) */
    uint64_t resident_weights; /* the resident layers' streamable weights */
    uint64_t total;         /* fixed + resident_weights + staging_bytes */
    uint64_t minimum;       /* the smallest budget that plans: every layer streamed */
} sn_plan_stream;

typedef struct sn_plan {
    int n_values, n_nodes, n_buffers, n_devices, n_inputs;
    sn_plan_value *values;   /* owned [n_values], by graph value index */
    sn_plan_node *nodes;     /* owned [n_nodes], in execution order */
    sn_plan_buffer *buffers; /* owned [n_buffers] */
    const char *const *devices; /* [n_devices] names (static strings): device_names */
    const char *device_names[SN_MAX_DEVICES];
    sn_tensor *shapes;       /* owned [n_inputs]: the input shapes (or bounds) planned for */
    bool at_bounds;          /* planned once for input bounds (runs within them re-infer) */
    int threads;             /* the kernels' thread count */
    size_t folded_bytes;     /* constants computed at plan time and kept */
    size_t persistent_bytes; /* state buffers (the KV cache) */
    size_t state_bytes;      /* prepared kernels' state (packed weights) */
    int n_static, n_dynamic, n_folded, n_inplace, n_grouped, n_tails;
    sn_plan_stream stream;   /* weight streaming; stream.first_layer == stream.n_layers: none */
    sn_plan_stream dstream;  /* to an accelerator (snug.placement_overflow=stream); likewise */
    sn_plan_layer *layers;   /* owned [n_layer_rows]: the placement per layer (NULL: none) */
    int n_layer_rows;        /* n_layers + 2 */
    sn_plan_xfer *copies;    /* owned [n_copies]: between devices (sn_plan_transfers), by `at` */
    int n_copies;
    size_t copy_bytes;       /* what one run copies between devices at the planning shapes */
} sn_plan;

void sn_plan_free(sn_plan *p); /* accepts NULL */

struct sn_graph;
struct sn_backend;

/* assign: the device of every node that runs (static or dynamic), among
 * the n_devs backends (0 is the host). A node goes to the device want[i]
 * asks for (0 the host; NULL or -1: the first accelerator, devs 1..)
 * when that backend has a kernel for it and it is
 * static, has no subgraph, reads no streamed weight and no value whose
 * size only the run knows; otherwise to the host, with a note saying why
 * when an accelerator was there. A view (a Reshape whose output is its
 * input's bytes) stays on the host and moves nothing: its bytes are where
 * its source's are. This is where the placer (layer rules, budgets) goes.
 * An error names a node no device can run. */
int sn_plan_assign(sn_plan *p, const struct sn_graph *g, const struct sn_backend *devs, int n_devs, const int *want,
                   sn_err *err);

/* The layer rows for `-ngl n` on accelerator accel (n_layers repeating
 * layers): as llama.cpp counts, the last n repeating layers, the output
 * layer as the (n+1)-th, the input layers on the host. why_fmt takes the
 * layer's reason ("-ngl %d" style, n given). */
void sn_plan_layers_ngl(sn_plan_layer *rows, int n_layers, int n, int accel, const char *why_on, const char *why_off);
/* Node by node, the device the placement wants (want[i]): the rule's
 * (rule_dev[i] >= 0; NULL: no rules), else its layer row's. */
void sn_plan_wants(const struct sn_graph *g, const sn_plan_layer *rows, const int *rule_dev, int *want);

/* Whether node i's one output is a view of its input 0 (a Reshape,
 * Squeeze...): it computes nothing and moves nothing. */
bool sn_plan_node_is_view(const sn_plan *p, const struct sn_graph *g, int i);

/* Node i back on the host (its device kernel refused the node when
 * prepared), noting why. */
void sn_plan_to_host(sn_plan *p, int i, const char *why);
/* The device where node i reads its input k: its own, or the host for an
 * input its kernel reads there (host_in). */
static inline int sn_plan_reads_on(const sn_plan *p, int i, int k) {
    return k < 32 && (p->nodes[i].host_in >> k & 1) ? 0 : p->nodes[i].device;
}

/* transfers: every value's device (sn_plan_value.device), and a copy
 * (sn_plan_xfer) wherever a node reads a value held by another device:
 * constants once to each accelerator reading them, activations and
 * inputs before their first reader there (its group's leader), outputs
 * computed on an accelerator back to the host after the last node.
 * state_dev[v] is the device of state value v's buffer, -1 for a value
 * that is no state (NULL: no state); varies[v] marks a folded value a run
 * may compute again (it depends on input shapes: copied every run);
 * stay[v] (NULL: none) a graph output left where it is computed (its
 * caller moves it on the device). Sets copies, n_copies and copy_bytes. */
int sn_plan_transfers(sn_plan *p, const struct sn_graph *g, const int *state_dev, const uint8_t *varies,
                      const uint8_t *stay, sn_err *err);
/* Whether value v of p is a view (transitively) of a constant: data that
 * no run changes. */
bool sn_plan_value_constant(const sn_plan *p, int v);

/* groups: consecutive static nodes of one op reading the same input 0,
 * whose other inputs are constant and whose op's group_ok admits them, up
 * to SN_GROUP_MAX, when kern[i] (node i's kernel) runs groups and neither
 * reads a last-row view; then the tail its kernel offers (group_tail), when
 * those nodes are static, on the group's device and read no last-row view
 * (right after the members, they read nothing else made since). Sets group,
 * group_size, n_tail, n_grouped and n_tails. enabled false
 * (snug.node_groups=0): every node alone. */
struct sn_kernel;
void sn_plan_groups(sn_plan *p, const struct sn_graph *g, const struct sn_kernel *const *kern, bool enabled);

/* memory: every planned (arena) value's slot and every static node's
 * workspace slot (nodes[i].workspace bytes) in the buffer of its device:
 * lifetimes from producer to last reader (a graph output to n_nodes, a
 * view extending its source's), an element-wise output in place of an
 * input that dies there (not within a group), best-fit offsets (memplan.h).
 * Sets offset, first, last, buffer, ws_buffer, ws_offset, the buffers and
 * n_inplace. */
int sn_plan_memory(sn_plan *p, const struct sn_graph *g, sn_err *err);

/* Weights smaller than this never stream (norm scales, biases): their
 * bytes are noise in a budget and each would cost a read per sweep. */
#define SN_STREAM_MIN ((size_t)64 << 10)
/* A streamed value's bytes in its slot: 64-byte aligned. */
static inline size_t sn_stream_align(size_t n) { return (n + 63) & ~(size_t)63; }

/* A last_row node's input 0 is seen as its last position only when it is
 * one sequence [1, S > 1, H] (the executor's binding, ex_bind_args, and the
 * Level-1 estimate agree through this); a batch keeps every row. */
static inline bool sn_last_row_applies(const sn_tensor *x) {
    return x && x->kind == SN_KIND_TENSOR && x->rank == 3 && x->dims[0] == 1 && x->dims[1] > 1;
}

/* Whether constant v may stream: an initializer no plan stage released,
 * (released or not: a kernel that would pack it does not when it streams)
 * of SN_STREAM_MIN bytes or more, not a table only gathered (an embedding
 * is read a row per token: it stays mapped), read only by nodes that run
 * (static or dynamic, none folded) of one layer in [0, n_layers), whose
 * index goes to *layer. The caller adds what the plan cannot see (that the
 * bytes lie in the model's files). */
bool sn_plan_streamable(const sn_plan *p, const struct sn_graph *g, int v, int n_layers, int *layer);

/* residency: which layers stream under a host budget. layer_bytes[l] is
 * layer l's streamable weights (n_layers entries); what the budget holds
 * anyway is act (the activation arena) + kv (the KV cache) + other (folded
 * values, packed state, the weights that cannot stream). The resident layers are the earliest ones (0..first-1),
 * as many as fit with a ring of depth slots for the rest, each slot the
 * largest streamed layer: so the streamed set is one run of layers at the
 * end, swept in order. Fills every field of *st; an error when even every
 * layer streamed does not fit, saying the minimum. */
int sn_plan_residency(const uint64_t *layer_bytes, int n_layers, uint64_t act, uint64_t kv, uint64_t other,
                      uint64_t budget, int depth, sn_plan_stream *st, sn_err *err);

/* The values of the streamed layers (candidate[v] and sn_plan_streamable,
 * layer >= st->first_layer) marked SN_STORE_STREAMED, each at its 64-byte
 * aligned offset inside its layer's slot (offset; first and last: the
 * first and last node reading it); sets stream.n_values and slot_bytes as
 * laid out. */
int sn_plan_stream_values(sn_plan *p, const struct sn_graph *g, const uint8_t *candidate, sn_err *err);

/* The schedule of n streamed layers (ordinals) whose readers run from node
 * first[o] to node last[o]: wait[i] the ordinal to wait for before node i,
 * release[i] = r when ordinals [0, r) are done with after node i (-1 where
 * neither). Returns the slots a ring needs for it (>= 2: more where one
 * layer's readers begin before those of the layer a ring's depth before
 * it end). */
int sn_plan_stream_schedule(int n_nodes, int n, const int *first, const int *last, int *wait, int *release);

/* Streaming to accelerator d under its budget, after memory: the copies of
 * weights there (uploaded once) that may stream (at least SN_STREAM_MIN
 * bytes, read there by one repeating layer only) give each layer's bytes;
 * the device's activation buffers, kv (its states' bytes) and the rest of
 * its weights buffer are fixed; sn_plan_residency decides. The streamed
 * copies (stream_layer) move into a new ring buffer of dstream.depth slots
 * (sn_plan_buffer.ring), the weights buffer shrinks to the resident rest.
 * Sets dstream; an error naming dev_name and the minimum when even every
 * layer streamed does not fit. */
int sn_plan_device_stream(sn_plan *p, const struct sn_graph *g, int d, int n_layers, uint64_t budget, uint64_t kv,
                          int depth, const char *dev_name, sn_err *err);

/* A deep copy of the arrays (info data pointers stay borrowed). */
int sn_plan_copy(const sn_plan *p, sn_plan **out, sn_err *err);

/* Prints p as one JSON object ({"devices", "buffers", "values", "nodes", ...}),
 * names from g (the graph it was planned for). */
void sn_plan_write_json(const sn_plan *p, const struct sn_graph *g, FILE *f);

#endif
