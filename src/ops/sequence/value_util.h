/* Deep copies of values (tensors, sequences, optionals) for control-flow and
 * sequence kernels, whose results must outlive the subgraph runs or the
 * buffers they came from. */
#ifndef SN_OPS_VALUE_UTIL_H
#define SN_OPS_VALUE_UTIL_H

#include "ops/op.h"

/* Output i of c becomes a deep copy of src (memory from the executor). */
int sn_value_emit(sn_kctx *c, int i, const sn_tensor *src);
/* Deep copy of src into memory attached to output i (for sequence items). */
int sn_value_copy_extra(sn_kctx *c, int i, const sn_tensor *src, sn_tensor *dst);
/* Deep copy on the heap (sn_malloc), released with sn_value_heap_free. */
int sn_value_heap_copy(const sn_tensor *src, sn_tensor *dst);
void sn_value_heap_free(sn_tensor *t);

#endif
