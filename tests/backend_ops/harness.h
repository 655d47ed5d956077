/* What test_backend_ops.c shares with the case files beside it. */
#ifndef SN_TESTS_BACKEND_OPS_HARNESS_H
#define SN_TESTS_BACKEND_OPS_HARNESS_H

#include "backends/backend.h"
#include "ops/op.h"

/* Runs node n with kernel k on backend b: inputs from host tensors hin
 * (rank -1: absent), outputs (shapes set by the caller) read back into
 * hout's data. Inputs in k->host_in are passed as they are. */
int run_on(const sn_backend *b, const sn_kernel *k, const sn_node *n, int n_in, sn_tensor *hin, int n_out,
           sn_tensor *hout, sn_err *err);
/* run_on_alias[i] = k + 1: output i is input k's buffer (0: its own). */
extern int run_on_alias[4];
/* One case run (the count printed at the end), of schema op. */
extern int n_cases;
void note_schema(const char *op);

/* attention_cases.c: GroupQueryAttention and RotaryEmbedding, whose inputs
 * (lengths, positions, a shared cache) the table's random fills cannot make.
 * Returns its failures. */
int run_attention_cases(const sn_backend *cpu, const sn_backend *ocl);

#endif
