/* Internal view of a session, for the CLI and tests. */
#ifndef SN_EXEC_SESSION_H
#define SN_EXEC_SESSION_H

#include "api/api.h"
#include "exec/exec.h"
#include "plan/rules.h"
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
    /* placement rules (session_place.c) and what each matched: */
    sn_rules rules;             /* owned */
    int *rule_dev;              /* owned [rules.n]: the device each names here, -1 none */
    int *rule_nodes;            /* owned [rules.n]: nodes it matched */
    int *rule_first, *rule_last; /* owned [rules.n]: the layers of those nodes (-2: none) */
    int *node_rule;             /* owned [n_nodes]: the rule placing node i, -1 none (NULL: no rules) */
} sn_session;

/* The session's placement config: session.layer_assignment_settings or
 * session.name_based_layer_assignment (exclusive), their coverage (a
 * pattern matching nothing is a warning, an error under
 * snug.strict_layer_assignment=1; so is a rule's device the session lacks),
 * snug.n_gpu_layers, the accelerator's budget (snug.mem.gpu,
 * session.resource_partitioning_settings); to the executor. */
int sn_session_placement(sn_session *s, const snug_options *opts, sn_err *err);

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
