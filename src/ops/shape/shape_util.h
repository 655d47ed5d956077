/* Helpers shared by the data-movement kernels (shape/shape.c, index/index.c, nn/resize.c). */
#ifndef SN_OPS_SHAPE_UTIL_H
#define SN_OPS_SHAPE_UTIL_H

#include <string.h>

#include "ops/kit.h"

/* Reads an int32/int64 input's values. Returns 1 when known (*n set), 0 when
 * the data is not known yet, -1 with err set. */
int sk_read_ints(const sn_node *node, sn_err *err, const sn_tensor *t, const char *what,
                 int64_t *vals, int cap, int *n);

/* Copies a strided view of src into dst, densely in row-major order of dims.
 * bstride: source byte strides per dim (any sign, 0 broadcasts). rank may be
 * up to 2 * SN_MAX_RANK. */
void sk_copy_strided(void *dst, const void *src, int rank, const int64_t *dims,
                     const int64_t *bstride, size_t es);

/* Per-node state of kernels that size a workspace in prepare: run checks
 * that its actual need fits what prepare declared (shapes may have changed
 * without the caller noticing). */
typedef struct sk_ws_state {
    size_t bytes;
} sk_ws_state;
/* Sets c->workspace = bytes and c->state to a new sk_ws_state. */
int sk_ws_declare(sn_prep_ctx *c, size_t bytes);
void sk_ws_free(void *state);
/* True when need bytes fit the workspace declared for this node. */
static inline bool sk_ws_fits(const sn_kctx *c, size_t need) {
    const sk_ws_state *s = c->state;
    return s && c->ws && need <= s->bytes;
}

#endif
