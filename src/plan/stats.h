/* Node stats files in ONNX Runtime's format (session.collect_node_memory_stats_to_file,
 * session.resource_partitioning_settings):
 *
 *   #name,input_sizes,initializers_sizes,total_dynamic_sizes,total_temp_allocations
 *   /model/layers.0/attn/q_proj/MatMul_1234567890,256,4096,256,0
 *
 * The name is (node name, or op type when empty) + "_" + the decimal low 64
 * bits of MurmurHash3 x86_128 chained over the node's input names then its
 * output names (absent optional ones as ""), each call seeded with h1 of the
 * previous one. Lines starting with '#' and empty lines are skipped; every
 * other line has exactly 5 fields; a row with an empty name is skipped; a
 * repeated name keeps the last row (all as ORT reads them). */
#ifndef SN_PLAN_STATS_H
#define SN_PLAN_STATS_H

#include "core/core.h"
#include "graph/graph.h"
#include "plan/plan.h"

typedef struct sn_node_stats {
    uint64_t input;   /* input_sizes: non-initializer inputs */
    uint64_t init;    /* initializers_sizes */
    uint64_t dynamic; /* total_dynamic_sizes: outputs allocated for the node */
    uint64_t temp;    /* total_temp_allocations: workspace */
} sn_node_stats;

typedef struct sn_stats_row {
    char *name;      /* owned */
    sn_node_stats s;
    int line;        /* 1-based line in the file */
    int node;        /* matched node index, or -1 (set by sn_stats_match) */
} sn_stats_row;

typedef struct sn_stats {
    int n, cap;
    sn_stats_row *rows; /* owned */
    char *path;         /* owned: the file read (for messages) */
} sn_stats;

/* The low 64 bits of the chained hash over the node's input then output names. */
uint64_t sn_stats_node_hash(const sn_pnode *p);
/* Writes the node's stats key into buf (truncated to cap); returns the
 * full length it needs (excluding the NUL). */
size_t sn_stats_node_key(const sn_pnode *p, char *buf, size_t cap);
/* The same as a new string (NULL on OOM). */
char *sn_stats_node_key_dup(const sn_pnode *p);

/* Parses stats text (len bytes, need not be NUL-terminated). what names the
 * source in messages. A line with a field count other than 5, or a number
 * that is not a non-negative decimal integer, is SNUG_ERR_PARSE naming the
 * source, the line number and the line. */
int sn_stats_parse(const char *text, size_t len, const char *what, sn_stats **out, sn_err *err);
/* Reads the file at path; a relative path is taken against model_dir when
 * model_dir is not NULL (as ORT resolves it against the model's folder). */
int sn_stats_load(const char *path, const char *model_dir, sn_stats **out, sn_err *err);
void sn_stats_free(sn_stats *s); /* accepts NULL */

/* Matches the rows against g's nodes by key: sets rows[].node, and
 * node_row[i] (n_nodes entries, may be NULL) to the row of node i or -1.
 * *unmatched_rows / *missing_nodes (may be NULL) receive the counts of
 * rows matching no node and nodes without a row. */
int sn_stats_match(sn_stats *s, const sn_graph *g, int *node_row, int *unmatched_rows,
                   int *missing_nodes, sn_err *err);

/* The figures of each node of g in plan p (plan/plan.h; a plan taken after a
 * run has the run-time sizes of dynamic nodes), as ONNX Runtime's recorder
 * counts them: a value is counted once, at the first node that reads (input,
 * init) or makes (dynamic) it; input = non-initializer inputs, init =
 * initializers, dynamic = outputs given memory (arena, run-time or
 * plan-time folded; views excluded), temp = the workspace prepare declared.
 * st has g->n_nodes entries. */
int sn_stats_from_plan(const sn_graph *g, const sn_plan *p, sn_node_stats *st, sn_err *err);
/* Per-field maximum (ORT's UpdateIfGreater, for stats over several runs). */
void sn_node_stats_max(sn_node_stats *acc, const sn_node_stats *s);

/* Writes a stats file: the header, then one row per node (keys[i], st[i]). */
int sn_stats_write(const char *path, int n, char *const *keys, const sn_node_stats *st, sn_err *err);

#endif
