/* The kernel-side helpers of sn_kctx (ops/op.h): memory, subgraphs and
 * constant reads go through the runner's host services (sn_host); the
 * rest reads the node. */
#include <string.h>

#include "ops/op.h"

const sn_limits *sn_kctx_limits(const sn_kctx *c) {
    static const sn_limits k_defaults = {0, SN_MAX_LOOP_ITERATIONS};
    return c->host && c->host->limits ? c->host->limits(c->host_ctx) : &k_defaults;
}

void *sn_kctx_alloc_output(sn_kctx *c, int i, sn_dtype dtype, int rank, const int64_t *dims) {
    sn_tensor *t = c->out[i];
    if (!t) {
        sn_kfail(c->err, c->node, SNUG_ERR_INTERNAL, "output %d is absent", i);
        return NULL;
    }
    if (rank < 0 || rank > SN_MAX_RANK) {
        sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "output %d rank %d not supported", i, rank);
        return NULL;
    }
    uint8_t opt = t->optional;
    memset(t, 0, sizeof *t);
    t->optional = opt;
    t->kind = SN_KIND_TENSOR;
    t->dtype = dtype;
    sn_tensor_set_shape(t, rank, dims);
    int64_t numel;
    if (!sn_dims_numel(rank, dims, &numel)) {
        sn_kfail(c->err, c->node, SNUG_ERR_RANGE, "output %d shape overflows", i);
        return NULL;
    }
    size_t nb = sn_dtype_nbytes(dtype, numel);
    size_t budget = sn_kctx_limits(c)->mem_budget;
    if (nb == SIZE_MAX || (budget && nb > budget)) {
        char b[160];
        sn_kfail(c->err, c->node, SNUG_ERR_RANGE, "output %d %s %s needs %zu bytes, more than the memory budget "
                 "of %zu bytes (snug.memory_budget)", i, sn_dtype_name(dtype), sn_shape_str(t, b, sizeof b), nb,
                 budget);
        return NULL;
    }
    if (!(t->data = c->host->alloc(c->host_ctx, nb))) {
        sn_kfail(c->err, c->node, SNUG_ERR_OOM, "out of memory for output %d (%zu bytes)", i, nb);
        return NULL;
    }
    return t->data;
}

sn_tensor *sn_kctx_alloc_sequence(sn_kctx *c, int i, sn_dtype elem, int64_t n) {
    sn_tensor *t = c->out[i];
    if (!t || n < 0) {
        sn_kfail(c->err, c->node, SNUG_ERR_INTERNAL, "bad sequence output %d", i);
        return NULL;
    }
    uint8_t opt = t->optional;
    memset(t, 0, sizeof *t);
    t->optional = opt;
    t->kind = SN_KIND_SEQUENCE;
    t->dtype = elem;
    t->n_items = n;
    size_t nb;
    if (!sn_mul_ok((size_t)n, sizeof(sn_tensor), &nb) || !(t->data = c->host->alloc(c->host_ctx, nb))) {
        sn_kfail(c->err, c->node, SNUG_ERR_OOM, "out of memory for sequence output %d", i);
        return NULL;
    }
    return t->data;
}

void *sn_kctx_alloc_extra(sn_kctx *c, int i, size_t bytes) {
    (void)i;
    void *p = c->host->alloc(c->host_ctx, bytes);
    if (!p)
        sn_kfail(c->err, c->node, SNUG_ERR_OOM, "out of memory (%zu bytes)", bytes);
    return p;
}

int sn_kctx_set_none(sn_kctx *c, int i) {
    sn_tensor *t = c->out[i];
    if (!t)
        return SNUG_OK;
    memset(t, 0, sizeof *t);
    t->kind = SN_KIND_NONE;
    t->optional = 1;
    return SNUG_OK;
}

const sn_graph *sn_kctx_subgraph(const sn_kctx *c, int k) {
    return k >= 0 && k < c->node->n_sub ? c->node->sub[k] : NULL;
}

int sn_kctx_subgraph_index(const sn_kctx *c, const char *attr) {
    for (int k = 0; k < c->node->n_sub; k++)
        if (!strcmp(c->node->sub_attr[k], attr))
            return k;
    return -1;
}

int sn_kctx_run_subgraph(sn_kctx *c, int k, int n_in, const sn_tensor *in, const sn_tensor **outs, int *n_out) {
    return c->host->run_subgraph(c->host_ctx, c->node, k, n_in, in, outs, n_out, c->err);
}

bool sn_kctx_reads_file(const sn_kctx *c, const sn_tensor *t) {
    return c->host && c->host->reads_file && c->host->reads_file(c->host_ctx, t);
}

int sn_kctx_read_const(const sn_kctx *c, void *dst, const void *src, size_t n) {
    return c->host->read_const(c->host_ctx, dst, src, n, c->err);
}
