/* Per-node memory estimates for placement and `snug plan`.
 *
 * For every node of a plan at the planning shapes (the plan value, plan/plan.h):
 *   weights  initializer bytes charged to the node: an initializer read by
 *            several nodes on one device counts once there (at its first
 *            reader), so a tied embedding / lm_head counts once;
 *   outputs  bytes of its outputs at the planning shapes (arena or dynamic;
 *            views and folded constants excluded);
 *   folded   bytes of constant-folded outputs (held for the session);
 *   workspace, resolved from
 *     Level 1  the op's estimator (sn_op_def.estimate, else this module's
 *              table keyed by domain and op type), run on the inferred
 *              shapes before any kernel exists; an op without prepare
 *              cannot declare scratch, so its Level 1 is 0 by construction;
 *     profile  total_temp_allocations of its row in a stats file;
 *   as: estimator only / profile only / max(profile, estimator) / fallback
 *   ((initializer bytes + static output bytes) * 1.5, i.e. a workspace of
 *   half that sum, as ONNX Runtime's ad-hoc accountant does).
 *   Level 2 (the workspace prepare declared) is checked against Level 1: a
 *   larger Level 2 is a warning and the node's figure is raised to it (the
 *   arena was planned with Level 2), or an error in strict mode. */
#ifndef SN_PLAN_ESTIMATE_H
#define SN_PLAN_ESTIMATE_H

#include "core/core.h"
#include "plan/plan.h"
#include "graph/graph.h"
#include "plan/stats.h"

typedef enum sn_ws_source {
    SN_WS_ESTIMATOR = 0, /* Level 1 only */
    SN_WS_PROFILE,       /* stats file only */
    SN_WS_MAX,           /* max(profile, Level 1) */
    SN_WS_FALLBACK,      /* neither: (init + static outputs) * 0.5 */
    SN_WS_SOURCE_COUNT
} sn_ws_source;

const char *sn_ws_source_name(sn_ws_source s); /* "estimator", "profile", "max", "fallback" */

typedef struct sn_node_est {
    int device;
    uint64_t weights;     /* initializer bytes charged here (first reader on the device) */
    uint64_t weights_read;/* all initializer bytes the node reads */
    uint64_t inputs;      /* non-initializer input bytes at the planning shapes */
    uint64_t outputs;     /* output bytes at the planning shapes (arena + dynamic) */
    uint64_t folded;      /* constant-folded output bytes */
    uint64_t ws_l1, ws_l2, ws_profile;
    uint64_t ws;          /* resolved workspace */
    sn_ws_source src;
    bool has_l1, has_profile;
    bool l2_over;         /* Level 2 > Level 1 */
    bool dynamic;         /* runs with run-time shapes: outputs are what the plan knows */
} sn_node_est;

typedef struct sn_estimate_opts {
    const int *device;      /* [n_nodes] device per node, NULL: all 0 */
    int n_devices;          /* >= 1 */
    const sn_stats *stats;  /* may be NULL */
    const int *node_row;    /* [n_nodes] row in stats per node (sn_stats_match), or NULL */
    bool strict;            /* Level 2 over Level 1 is an error */
    const sn_logger *log;   /* warnings; may be NULL */
} sn_estimate_opts;

typedef struct sn_estimate {
    int n_nodes;
    sn_node_est *nodes;     /* owned [n_nodes] */
    int n_by_src[SN_WS_SOURCE_COUNT];
    int n_l1_table;         /* Level 1 from this module's table (not the op def) */
    int n_l2_over;
    uint64_t weights_total; /* all devices */
} sn_estimate;

/* Estimates every node of g from plan p (made for g at the planning shapes). */
int sn_estimate_nodes(const sn_graph *g, const sn_plan *p, const sn_estimate_opts *o, sn_estimate *out,
                      sn_err *err);
void sn_estimate_free(sn_estimate *e); /* accepts NULL; frees the arrays */

/* Level 1 for one node with the given infos, for a run on n_threads
 * threads (0: not known); false when the op has neither an estimator nor a
 * reason to need none (then the caller falls back). *from_table is set when
 * it came from this module's table. */
bool sn_estimate_level1(const sn_node *n, const sn_tensor *const *in, const sn_tensor *const *out, int n_threads,
                        size_t *bytes, bool *from_table);

/* session.max_shape_override, ONNX Runtime's grammar:
 * "name1:[d0,d1,...];name2:[...]" — entries split at the first ';' after
 * each ']', blanks (space, tab) trimmed around names, brackets and commas,
 * empty entries skipped, dims positive decimal integers, "[]" a scalar,
 * a repeated name an error. */
typedef struct sn_shape_override {
    char *name; /* owned */
    int rank;
    int64_t dims[SN_MAX_RANK];
} sn_shape_override;
int sn_shape_override_parse(const char *text, sn_shape_override **out, int *n, sn_err *err);
void sn_shape_override_free(sn_shape_override *o, int n);

/* "512", "64K", "1.5G", "2GiB", "300MB": bytes (K/M/G/T are KiB multiples);
 * SNUG_ERR_INVALID_ARG with a message otherwise. */
int sn_parse_size(const char *text, uint64_t *out, sn_err *err);

/* The estimate stage of a plan: every static node's Level-1 workspace
 * (nodes[i].ws_reserved, has_reserve where its op has an estimator or a
 * reason to need none), from the plan's infos alone (data only for
 * constants), before any kernel is prepared. */
int sn_plan_reserve(sn_plan *p, const sn_graph *g, sn_err *err);
/* Every static node's Level-2 declaration (nodes[i].workspace, set when
 * prepared) against its reservation, once: larger is a warning naming the
 * node and both figures (the memory stage then places the declared one),
 * or with strict (session.strict_workspace_verification=1) an error. */
int sn_plan_check_workspace(const sn_plan *p, const sn_graph *g, bool strict, const sn_logger *log, sn_err *err);

#endif
