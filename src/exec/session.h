/* Internal view of a session, for the CLI and tests. */
#ifndef SN_EXEC_SESSION_H
#define SN_EXEC_SESSION_H

#include "api/api.h"
#include "exec/exec.h"
#include "graph/graph.h"
#include "graph/layers.h"
#include "onnx/model.h"

typedef struct sn_session {
    sn_model *model;  /* owned */
    sn_graph *graph;  /* owned */
    sn_pool *pool;    /* owned */
    sn_exec *exec;    /* owned */
    sn_layer_info layers; /* the layer map, found at open (graph/layers.h: sn_node.layer) */
    sn_logger log;
    sn_err err;       /* last error of the public API */
    /* session.collect_node_memory_stats_to_file: per-node maxima over runs,
     * rewritten to the file after each run. */
    sn_tensor *api_in, *api_out; /* owned [n_inputs], [n_outputs]: snug_session_run's views */
    char *stats_path;           /* owned, or NULL */
    char **stats_keys;          /* owned [n_nodes] */
    struct sn_node_stats *stats_max, *stats_run; /* owned [n_nodes] */
    snug_model api_model;       /* snug_session_model's view of model, graph and layers (borrowed) */
    snug_value *api_vals;       /* owned [n_outputs], or NULL: snug_session_run_values' outputs */
} sn_session;

int sn_session_open(const char *path, const snug_options *opts, sn_session **out, sn_err *err);
void sn_session_close(sn_session *s);
/* Runs the session's graph (inputs by position; outputs valid until the next
 * run) and does the session's per-run bookkeeping (node stats). */
int sn_session_run(sn_session *s, const sn_tensor *in, sn_tensor *out, sn_err *err);
/* The public runs' check of the caller's input and output counts (the
 * message on s). */
int sn_session_check_counts(sn_session *s, int n_inputs, int n_outputs);

/* Online CPUs (at least 1). */
int sn_cpu_count(void);

#endif
