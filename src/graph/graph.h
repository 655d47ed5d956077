/* The graph IR: values and nodes by index, nodes in topological order,
 * consumers, subgraphs, inferred types. Built from a loaded model by
 * sn_graph_build; does not copy weights (initializer tensors borrow the
 * model's map). */
#ifndef SN_GRAPH_GRAPH_H
#define SN_GRAPH_GRAPH_H

#include "core/core.h"
#include "onnx/model.h"

struct sn_op_def;
struct sn_graph;

typedef struct sn_node {
    const sn_pnode *p;           /* borrowed: name, op_type, domain, attrs, metadata */
    const struct sn_op_def *op;  /* resolved kernel */
    int64_t opset;               /* the model's opset for the node's domain */
    int index;                   /* position in topological order */
    int n_in, n_out;
    int *in, *out;               /* owned: value ids; -1 = absent optional */
    int n_sub;
    struct sn_graph **sub;       /* owned: subgraphs, in attribute order */
    const char **sub_attr;       /* the attribute name of each subgraph */
    int layer;                   /* layer index (-1 pre, >= n_layers post), set by layer discovery */
} sn_node;

enum {
    SN_VAL_INPUT = 1u << 0,  /* graph input (fed by the caller) */
    SN_VAL_OUTPUT = 1u << 1, /* graph output */
    SN_VAL_INIT = 1u << 2,   /* initializer (constant data in init) */
    SN_VAL_OUTER = 1u << 3,  /* in a subgraph: value of an enclosing graph */
    SN_VAL_CONST = 1u << 4,  /* data known before run (initializer or folded) */
};

typedef struct sn_value {
    const char *name;           /* borrowed from the model */
    unsigned flags;
    sn_tensor info;             /* inferred kind/dtype/shape; data set when constant */
    const sn_type *declared;    /* borrowed: the ValueInfo type, or NULL */
    const sn_init *init;        /* borrowed, for SN_VAL_INIT */
    int producer;               /* node index, or -1 */
    int n_cons;
    int *cons;                  /* owned: consumer node indices (with repeats) */
    int outer_id;               /* SN_VAL_OUTER: value id in the parent graph */
} sn_value;

typedef struct sn_graph {
    const sn_model *model;      /* borrowed */
    const sn_pgraph *pg;        /* borrowed */
    struct sn_graph *parent;    /* enclosing graph for subgraphs, else NULL */
    int n_values, n_nodes;
    sn_value *values;           /* owned */
    sn_node *nodes;             /* owned, topological order */
    int n_inputs, n_outputs;
    int *inputs, *outputs;      /* owned: value ids of graph inputs (non-initializer) and outputs */
    int n_syms;
    char **syms;                /* owned: symbolic dim names by id */
} sn_graph;

#endif
