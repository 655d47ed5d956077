/* The public handles of include/snug.h over the internal modules: a model
 * with its graph, a value, a plan. The session (exec/session.h) holds the
 * views of its own model and outputs. */
#ifndef SN_API_API_H
#define SN_API_API_H

#include <stdio.h>

#include "graph/graph.h"
#include "graph/layers.h"
#include "onnx/model.h"
#include "plan/plan.h"

struct snug_model {
    sn_model *model;      /* owned, or a session's (borrowed) */
    sn_graph *graph;      /* owned, or a session's (borrowed) */
    sn_layer_info layers; /* the layer map found at open (graph/layers.h: sn_node.layer) */
    bool borrowed;        /* a session's view: snug_model_free leaves it */
};

struct snug_value {
    sn_tensor t;   /* kind, dtype, shape; data in own, or the session's */
    void *own;     /* owned: the elements (a sequence's items and theirs), or NULL */
    char **strs;   /* owned [numel]: copies of the strings snug_value_set_string set, or NULL */
    bool session;  /* a session's output: snug_value_free leaves it */
};

struct snug_plan {
    sn_plan *plan;           /* owned: sn_exec_plan_value's copy */
    const snug_model *model; /* the session's: names, the layer map, stats keys */
};

/* A failure for a caller without a handle: e's message into dst (cap bytes,
 * when dst is not NULL); returns rc. */
static inline int sn_api_fail(char *dst, size_t cap, const sn_err *e, int rc) {
    if (dst && cap)
        snprintf(dst, cap, "%s", e->msg);
    return rc;
}

#endif
