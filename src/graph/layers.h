/* Layer discovery: node -> layer index, the unit of placement.
 *
 * Names first: a node's own name, else its output names, else the names of
 * its initializer inputs, searched for `layers.N`, `layer.N`, `h.N`,
 * `blocks.N` (so `decoder.layers.N`, `model/layers.N`, `encoder.layer.N`,
 * `transformer.h.N`, `model.layers.N.mlp.weight` all count), the token
 * starting the name or following one of "/.:_-". The genai builder's
 * `layers.{L}/final_norm_layernorm` (a phantom index one past the last layer)
 * is post. Where no name gives an index, the structure does: the nodes
 * reading initializers repeat block after block (norms, projections), and
 * the i-th block is layer i. Nodes left without an index take one from their neighbours:
 * nothing indexed upstream -> pre (embeddings, masks, rotary tables);
 * nothing indexed downstream -> post (final norm, lm_head); otherwise the
 * layer of their indexed ancestors (the latest of them).
 *
 * Results go into sn_node.layer: -1 pre, 0..n_layers-1, n_layers post. */
#ifndef SN_GRAPH_LAYERS_H
#define SN_GRAPH_LAYERS_H

#include "graph/graph.h"

typedef struct sn_layer_info {
    int n_layers;
    int n_named;    /* nodes indexed from their own name */
    int n_valname;  /* ... from output / initializer names */
    int n_struct;   /* ... from the graph's structure (no name gave an index) */
    int n_filled;   /* ... from their neighbours */
    int n_pre, n_post;
} sn_layer_info;

/* The layer index in name, or -1; *final_norm set when the name is the
 * genai builder's final norm (`final_norm_layernorm` after the index). */
int sn_layer_from_name(const char *name, bool *final_norm);

/* Fills g->nodes[i].layer for the main graph (subgraph nodes take their
 * parent node's layer). */
int sn_layers_discover(sn_graph *g, sn_layer_info *info, sn_err *err);

#endif
