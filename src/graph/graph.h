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
    const struct sn_op_def *op;  /* the op schema, from the op table (ops/op.h) */
    int64_t opset;               /* the model's opset for the node's domain */
    int index;                   /* position in topological order */
    int n_in, n_out;
    int *in, *out;               /* owned: value ids; -1 = absent optional */
    int n_sub;
    struct sn_graph **sub;       /* owned: subgraphs, in attribute order */
    const char **sub_attr;       /* the attribute name of each subgraph */
    int n_impl;
    int *impl;                   /* owned: values of this graph its subgraphs read (implicit inputs) */
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
    struct sn_strmap *names;    /* owned: value name -> id */
    int depth;                  /* 0 for the main graph */
    int cap_values;             /* allocated length of values */
} sn_graph;

/* Builds the IR of the model's main graph: resolves every op (an op snug
 * lacks is an error naming op, domain and opset), checks that every input is
 * defined and every value produced once, sorts nodes topologically (a cycle is
 * an error naming a node on it), builds subgraphs, and runs symbolic type and
 * shape inference from the declared input types. */
int sn_graph_build(const sn_model *m, sn_graph **out, sn_err *err);
void sn_graph_free(sn_graph *g); /* accepts NULL */

/* Id of a symbolic dim name (interned in the main graph), or -1 on OOM. */
int sn_graph_sym(sn_graph *g, const char *name);
/* The value id of name in g, or -1. */
int sn_graph_find(const sn_graph *g, const char *name);

/* True when every reader of value v is a Gather taking it as its data
 * (an embedding table): only the selected rows are ever read. */
bool sn_value_gathered_only(const sn_graph *g, int v);
/* Initializer bytes a run reads whole (all but gathered-only tables), and
 * the bytes of the gathered-only tables. */
void sn_graph_weight_use(const sn_graph *g, uint64_t *read_whole, uint64_t *gathered);

/* Symbolic inference over g: input infos from the declared types, dims named
 * in dim_names bound to dim_vals (n_bind entries). Fills values[].info. */
int sn_graph_infer(sn_graph *g, int n_bind, const char *const *dim_names,
                   const int64_t *dim_vals, sn_err *err);

/* A value bound to a symbolic dim name. */
typedef struct sn_dim_bind {
    const char *name;
    int64_t val;
} sn_dim_bind;
/* Evaluates a dim_param such as "past_sequence_length + sequence_length"
 * (names, integers, + - *) with the bindings; false if a name is unbound,
 * the text is not such an expression, or the result is negative. */
bool sn_dim_eval(const char *expr, const sn_dim_bind *b, int n, int64_t *out);

/* Converts a declared type into a tensor info (symbolic dims interned). */
int sn_type_to_info(sn_graph *g, const sn_type *t, sn_tensor *info);

#endif
