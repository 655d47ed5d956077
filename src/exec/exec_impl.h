/* The executor's insides, shared by its files (src/exec/):
 *   exec.c     the executor: creation, options, persistent state, the plan
 *              it holds and what it tells about it;
 *   fold.c     the infer-and-fold stage of a plan (it runs kernels);
 *   prepare.c  a plan made (the stages of plan/plan.h in order) and
 *              prepared: kernels, Level-2 checks, buffers from backends;
 *   weights.c  weight residency: aligned copies, snug.weights=load, pages of
 *              the model's files released when no run reads them (where the
 *              prefetcher will grow);
 *   run.c      the run loop, the inputs' check against the plan, and the
 *              host services kernels call back (sn_host).
 * Nothing outside src/exec/ includes this header. */
#ifndef SN_EXEC_EXEC_IMPL_H
#define SN_EXEC_EXEC_IMPL_H

#include "backends/backend.h"
#include "exec/exec.h"

/* Executor: plan (fold, infer, prepare, place) then run. See exec.h. */
#include <string.h>
#include <time.h>

#include "backends/backend.h"
#include "exec/exec.h"
#include "plan/estimate.h"

/* The prefetcher of streamed weights (prefetch.c): a ring of staging slots
 * and its I/O thread. */
typedef struct ex_prefetch ex_prefetch;
/* The streamer of weights to an accelerator (dstream.c): its ring's slots
 * filled on the device's transfer queue, kernels ordered after them. */
typedef struct ex_dstream ex_dstream;

/* A persistent state buffer (sn_exec_add_state): outlives plans and runs. */
typedef struct sn_exec_state {
    int in_v;    /* the graph input value it feeds */
    int out_v;   /* the graph output value written into it, -1 if none */
    void *data;  /* owned: from backend dev's, zeroed when added */
    int dev;     /* the device holding it: the host's until a plan puts its readers elsewhere */
    size_t cap;  /* bytes */
    size_t off;  /* the window runs read and write: bytes [off, cap) (sn_exec_state_window) */
} sn_exec_state;


struct sn_exec {
    const sn_graph *g;       /* borrowed */
    sn_plan pl;              /* the current plan (arrays owned): every value's storage, buffer, offset,
                              * alias and lifetime, every node's device, mode, group and workspace */
    struct sn_exec *parent;  /* borrowed: executor of the enclosing graph */
    sn_pool *pool;           /* borrowed */
    const sn_logger *log;    /* borrowed */
    sn_tensor *vals;         /* owned [n_values]: infos and data of the current run */
    void **nstate;           /* owned [n_nodes]: prepared kernel state */
    const sn_tensor **gin;   /* owned scratch: SN_GROUP_MAX + SN_TAIL_MAX argument arrays for a group */
    sn_tensor **gout;
    struct sn_exec **sub;    /* owned [sum of n_sub]: child executors, created lazily */
    int *sub_base;           /* owned [n_nodes]: index of node i's first child in sub */
    void **init_copy;        /* owned [n_values]: aligned copies of misaligned initializers */
    const sn_kernel **kern;  /* owned [n_nodes]: how node i is computed, from its device's backend */
    sn_backend backends[SN_MAX_DEVICES]; /* owned [n_backends]: the devices a plan may use; 0 is the host
                              * (the CPU), where every node runs until placement assigns devices */
    int n_backends;
    uint8_t *buf[SN_MAX_BUFFERS]; /* owned: the plan's buffers (activation arenas, accelerators' weights),
                              * from their devices' backends */
    size_t buf_cap[SN_MAX_BUFFERS];
    int buf_dev[SN_MAX_BUFFERS];   /* the backend each came from */
    /* copies between devices (sn_plan_transfers): */
    sn_tensor *mirror;       /* owned [pl.n_copies]: each copy's mirror as its readers see it */
    int *arg_copy;           /* owned [sum of n_in]: node i's input k reads mirror arg_copy[arg_base[i] + k], or -1 */
    int *arg_base;           /* owned [n_nodes] */
    int *state_dev;          /* owned [n_values]: the device of a state value's buffer, -1 for others */
    bool uploaded;           /* the weights buffers hold the current plan's constants */
    uint8_t *keep_out;       /* owned [n_values]: a graph output left on its device (sn_exec_keep_output) */
    /* placement (place.c): */
    int *rule_dev;           /* owned [n_nodes] or NULL: the device a rule puts node i on, -1 none */
    int *want;               /* owned [n_nodes]: the device the placement wants for node i (assign) */
    sn_plan_layer *rows;     /* owned [n_layers + 2]: each layer's device and why */
    int ngl;                 /* -ngl: layers on the accelerator from the last one down; -1 auto */
    uint64_t dev_budget;     /* the accelerator's budget (0: its free memory less a margin) */
    uint64_t fit_budget;     /* the budget the placement was fitted to (0: none) */
    bool placed;             /* rows decided (ex_place_decide) */
    bool overflow_skip;      /* snug.placement_overflow=skip: past a layer that does not fit, try the next */
    bool states_anywhere;    /* the caller moves state bytes only through sn_exec_output_to_state and
                              * sn_exec_state_move: any state may live on an accelerator */
    void **folded;           /* owned: blocks of folded values */
    int n_folded, cap_folded;
    void **dyn;              /* owned: blocks allocated during the current run */
    int n_dyn, cap_dyn;
    sn_tensor *sig;          /* owned [n_sig]: shapes the plan was made for */
    int n_sig;
    bool planned;
    bool bounded;            /* plan made at input bounds: runs re-infer within it */
    bool planning_bounds;    /* sn_exec_set_bounds is planning */
    sn_tensor *bounds;       /* owned [n_inputs]: the planned bounds (sn_exec_set_bounds) */
    uint8_t *vdep;           /* owned [n_values]: folded value that depends on input shapes */
    size_t *vcap;            /* owned [n_values]: bytes planned for the value */
    uint32_t *nreplaces;     /* owned [n_nodes]: prepare's replaces mask (sn_prep_ctx) */
    uint8_t *copy_dropped;   /* owned [n_values]: aligned copy freed (every reader replaced it); made
                              * again by the next plan */
    size_t *copy_released;   /* owned [n_values]: bytes of that block handed back while packing */
    bool no_groups;          /* snug.node_groups=0: sn_plan_groups forms none */
    sn_limits limits;        /* snug.memory_budget, snug.max_loop_iterations (sn_exec_set_limits) */
    bool strict_ws;          /* session.strict_workspace_verification: Level 2 over Level 1 is an error */
    bool flush_denormals;    /* session.set_denormal_as_zero (sn_exec_set_flush_denormals) */
    enum { EX_FOLD, EX_PREPARE } stage; /* the planning pass under way (ex_drop_unread_inputs) */
    int prepared_upto;       /* static nodes up to this one are prepared */
    bool weights_load;       /* snug.weights=load: every weight a kernel reads is read from the file
                              * into owned memory, nothing of the file is mapped (sn_exec_set_weights_load) */
    int prep_node;           /* node being prepared (ex_release_cb) */
    bool dry;                /* sn_exec_estimate_bounds: plan without preparing, allocating or releasing */
    size_t dry_state;        /* its sum of the prepared state kernels would hold */
    const sn_tensor **argin; /* owned scratch for kernel arguments */
    sn_tensor **argout;
    int arg_cap;
    int cur_node;            /* node being run (for subgraph calls) */
    double *node_time;       /* not owned, or NULL: seconds per node, added to (sn_exec_time_nodes) */
    double t_mark;           /* node timing: when node t_node began */
    int t_node;
    sn_exec_state *states;   /* owned [n_states] */
    int *vstate;             /* owned [n_values]: the state a value feeds or is written into, -1 if none */
    int n_states;
    sn_exec_stats stats;
    /* weight streaming (weights.c decides, prefetch.c loads): */
    uint64_t host_budget;    /* snug.mem.host (0: none): what the plan at bounds may hold on the host */
    int prefetch_depth;      /* snug.prefetch_layers: staging slots, >= 2 */
    int n_layers;            /* the session's layer map */
    sn_plan_stream stream;   /* the residency decided for the bounds (first_layer == n_layers: none) */
    uint8_t *streamed;       /* owned [n_values]: 1 for a weight that streams (copies skip it) */
    sn_tensor *stream_for;   /* owned [n_inputs]: the bounds ex->stream was decided for */
    bool stream_decided;
    bool budget_warned;      /* a plan for concrete shapes was told once that snug.mem.host does not hold it */     /* ex->stream holds the decision for stream_for (cleared by set_streaming) */
    ex_prefetch *pf;         /* owned: when the current plan streams */
    int *stream_wait;        /* owned [n_nodes]: before node i, the streamed layer (ordinal) to wait for; -1 */
    int *stream_release;     /* owned [n_nodes]: after node i, layers [0, this) are done with; -1 */
    /* weights streamed to the accelerator (snug.placement_overflow=stream; dstream.c): */
    bool overflow_stream;
    uint64_t dstream_budget; /* the accelerator's budget the plan streams under (0: no streaming) */
    ex_dstream *ds;          /* owned: when the current plan streams to the device */
    int *dwait;              /* owned [n_nodes]: before node i, the streamed ordinal to wait for; -1 */
    int *drelease;           /* owned [n_nodes]: after node i, ordinals [0, this) are done with; -1 */
    uint64_t dstream_bytes;  /* copied in so far */
    int last_row_node;       /* sn_exec_set_last_row: this node reads input 0's last position only, or -1 */
    sn_tensor last_row;      /* the view of it bound in place of input 0 */
    int64_t last_rows;       /* positions that view holds (sn_exec_set_last_rows; 1 unless a run says) */
    const sn_packed *packed; /* sn_exec_set_packed: the runs' packed rows, or NULL */
};

/* exec.c */
void ex_bind_args(sn_exec *ex, const sn_node *n, const sn_tensor **in, sn_tensor **out);
void *ex_dyn_alloc(sn_exec *ex, size_t bytes);
/* Output j of node n, of shape t, fits the memory budget (and size_t);
 * otherwise an error naming the node, the shape and the bytes. */
/* Whether `more` host bytes made resident (what: named in the error), with
 * the state buffers and `arena` bytes of arena already held, stay within
 * the memory budget; SNUG_ERR_OOM saying so if not. */
int ex_check_resident(const sn_exec *ex, size_t more, size_t arena, const char *what, sn_err *err);
int ex_check_budget(const sn_exec *ex, const sn_node *n, int j, const sn_tensor *t, sn_err *err);
void ex_dyn_release(sn_exec *ex);
void *ex_folded_alloc(sn_exec *ex, size_t bytes);
void ex_init_out_info(sn_tensor *t);
sn_exec_state *ex_state_of(const sn_exec *ex, int v);

/* weights.c: copies, reads and releases of constants */
int ex_copy_init(sn_exec *ex, int v, sn_err *err);
void ex_copy_free(sn_exec *ex, int v);
bool ex_reads_file(const void *ctx, const sn_tensor *t);
int ex_read_const(const void *ctx, void *dst, const void *src, size_t n, sn_err *err);
void ex_drop_unread_inputs(sn_exec *ex, const sn_node *n, int i);
/* Constant v, uploaded to the accelerators that read it, released on the
 * host when no node there reads it (its file pages, an aligned copy). */
void ex_release_uploaded(sn_exec *ex, int v);
void ex_sweep_released(sn_exec *ex);
void ex_release_cb(void *ctx, const void *p, size_t n);

/* weights.c: weight streaming. ex_stream_decide: under a host budget, the
 * residency for these bounds from a dry plan (nothing read or packed);
 * ex_stream_mark: the current plan's streamed values, after assign;
 * ex_stream_start: once prepared, the schedule and the prefetcher. */
int ex_stream_decide(sn_exec *ex, const sn_tensor *bounds, sn_err *err);
int ex_stream_mark(sn_exec *ex, sn_err *err);
int ex_stream_start(sn_exec *ex, sn_err *err);

/* prefetch.c: ex_prefetch_wait binds layer o's values (vals) into its
 * slot once loaded; ex_prefetch_release: layers [0, upto) of this sweep
 * are done with; ex_prefetch_end_run: the run ended (complete: every
 * layer of the sweep run), values point at the file map again. */
int ex_prefetch_new(const sn_graph *g, const sn_plan *p, ex_prefetch **out, sn_err *err);
void ex_prefetch_free(ex_prefetch *pf);
int ex_prefetch_wait(ex_prefetch *pf, int o, sn_tensor *vals, sn_err *err);
void ex_prefetch_release(ex_prefetch *pf, int upto);
void ex_prefetch_end_run(ex_prefetch *pf, sn_tensor *vals, bool complete);
void ex_prefetch_stats(ex_prefetch *pf, sn_exec_stream_stats *c);
int ex_prefetch_ordinal(const ex_prefetch *pf, int layer); /* -1: the layer does not stream */
int ex_prefetch_count(const ex_prefetch *pf);               /* ordinals */
/* One sweep's reads done as the I/O thread does them, with no run beside:
 * the rate the file gives the streamed layers (sn_exec_stream_probe). */
int ex_prefetch_probe(ex_prefetch *pf, double *bytes_per_s, sn_err *err);

/* dstream.c: ex_dstream_plan (after memory): the device residency and the
 * schedule (dwait, drelease), the ring deepened where readers interleave;
 * ex_dstream_start (after binding): the streamer; ex_dstream_begin at a
 * run's start (the first loads queued), _wait before the first reader of
 * a streamed layer (its kernels ordered after its load, the mirrors bound
 * to its slot), _release after the last (the slot's next load queued),
 * _end_run when the run ends (incomplete: the ring starts afresh). */
int ex_dstream_plan(sn_exec *ex, sn_err *err);
int ex_dstream_start(sn_exec *ex, sn_err *err);
void ex_dstream_free(sn_exec *ex);
int ex_dstream_begin(sn_exec *ex, sn_err *err);
int ex_dstream_wait(sn_exec *ex, int o, sn_err *err);
int ex_dstream_release(sn_exec *ex, int upto, sn_err *err);
int ex_dstream_end_run(sn_exec *ex, bool complete, sn_err *err);

/* place.c: ex_place_decide fits the layers to the accelerator's budget
 * for these bounds (dry plans); ex_place_prepare, before assign, makes the
 * rows when none were decided and each node's want. */
int ex_place_decide(sn_exec *ex, const sn_tensor *bounds, sn_err *err);
int ex_place_prepare(sn_exec *ex, sn_err *err);

/* fold.c */
int ex_infer_fold(sn_exec *ex, sn_err *err);

/* prepare.c */
void ex_plan_release(sn_exec *ex);
int ex_plan_for(sn_exec *ex, sn_err *err);
/* A copy of the n_inputs bounds without their data (sn_free it), or NULL
 * without memory: what a plan at bounds is made from. */
sn_tensor *ex_shapes_only(const sn_graph *g, const sn_tensor *bounds);
/* The floating-point mode a run, a fold or a plan computes in: the
 * caller's, with subnormals flushed when ex->flush_denormals; returns the
 * caller's to restore with sn_fp_set. A subgraph's executor (flag off)
 * keeps the mode its parent's run set. */
sn_fpmode ex_fp_enter(const sn_exec *ex);

/* run.c */
/* Same kind, type and shape (a sequence: as many items): what a plan was made for. */
bool ex_sig_equal(const sn_tensor *a, const sn_tensor *b);
int ex_call_kernel(sn_exec *ex, const sn_node *n, void *state, void *ws, sn_err *err);
int ex_run_loop(sn_exec *ex, sn_err *err);
int ex_plan_if_needed(sn_exec *ex, sn_replan policy, sn_err *err);
int ex_bind_inputs(sn_exec *ex, const sn_tensor *inputs, sn_err *err);

#endif
