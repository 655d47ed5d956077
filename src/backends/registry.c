/* Backends compiled into this build: one line each. */
#include <stdio.h>
#include <string.h>

#include "backends/backend.h"
#include "graph/graph.h"

extern const sn_backend_ops sn_backend_cpu_ops;
extern const sn_backend_ops sn_backend_opencl_ops;

static const sn_backend_ops *const k_backends[] = {
    &sn_backend_cpu_ops,
#ifdef SNUG_WITH_OPENCL
    &sn_backend_opencl_ops,
#endif
};
#define SN_N_BACKENDS (int)(sizeof k_backends / sizeof k_backends[0])

int sn_backend_count(void) { return SN_N_BACKENDS; }
const char *sn_backend_name(int i) { return i >= 0 && i < SN_N_BACKENDS ? k_backends[i]->name : NULL; }

int sn_backend_new(const char *name, sn_backend *out, sn_err *err) {
    memset(out, 0, sizeof *out);
    if (!name)
        name = "cpu";
    const char *colon = strchr(name, ':');
    size_t len = colon ? (size_t)(colon - name) : strlen(name);
    for (int i = 0; i < SN_N_BACKENDS; i++)
        if (strlen(k_backends[i]->name) == len && !strncmp(k_backends[i]->name, name, len)) {
            const sn_backend_ops *ops = k_backends[i];
            if (!ops->ctx_new && colon)
                return sn_errf(err, SNUG_ERR_INVALID_ARG, "backend '%s' has no devices to choose ('%s')", ops->name, name);
            if (ops->ctx_new)
                SN_TRY(ops->ctx_new(colon ? colon + 1 : NULL, &out->ctx, err));
            out->ops = ops;
            return SNUG_OK;
        }
    char have[256] = "";
    for (int i = 0; i < SN_N_BACKENDS; i++)
        snprintf(have + strlen(have), sizeof have - strlen(have), "%s%s", i ? ", " : "", k_backends[i]->name);
    return sn_errf(err, SNUG_ERR_UNSUPPORTED, "no backend '%s' in this build (have: %s)", name, have);
}

void sn_backend_free(sn_backend *b) {
    if (!b)
        return;
    if (b->ops && b->ops->ctx_free)
        b->ops->ctx_free(b->ctx);
    memset(b, 0, sizeof *b);
}

int sn_backend_mem_info(const sn_backend *b, sn_mem_info *out, sn_err *err) {
    memset(out, 0, sizeof *out);
    return b->ops->mem_info ? b->ops->mem_info(b->ctx, out, err) : SNUG_OK;
}

int sn_backend_copy_device(const sn_backend *b, void *dst, const void *src, size_t n, sn_err *err) {
    if (!b->ops->copy_device || !n || dst == src) {
        if (n && dst != src)
            memmove(dst, src, n);
        return SNUG_OK;
    }
    uint8_t *d = dst;
    const uint8_t *s = src;
    size_t gap = d > s ? (size_t)(d - s) : (size_t)(s - d);
    if (gap >= n)
        return b->ops->copy_device(b->ctx, dst, src, n, err);
    /* overlapping: pieces of at most the gap, from the end when moving up */
    for (size_t done = 0; done < n;) {
        size_t c = n - done < gap ? n - done : gap;
        size_t at = d > s ? n - done - c : done;
        SN_TRY(b->ops->copy_device(b->ctx, d + at, s + at, c, err));
        done += c;
    }
    return SNUG_OK;
}

const char *sn_backend_device_name(const sn_backend *b) {
    return b->ops->device_name ? b->ops->device_name(b->ctx) : b->ops->name;
}

const struct sn_kernel *sn_backend_kernel(const sn_backend *b, const struct sn_node *n) {
    return b->ops->kernel && n->op ? b->ops->kernel(b->ctx, n->op, n) : NULL;
}

void sn_backend_buffer_type(const sn_backend *b, sn_buffer_type *out) {
    *out = (sn_buffer_type){b->ops->name, 64, 0, true};
    if (b->ops->buffer_type)
        b->ops->buffer_type(b->ctx, out);
}

int sn_backend_tensor_set(const sn_backend *b, void *buf, size_t offset, const void *src, size_t n, sn_err *err) {
    if (b->ops->tensor_set)
        return b->ops->tensor_set(b->ctx, buf, offset, src, n, err);
    if (n)
        memcpy((uint8_t *)buf + offset, src, n);
    return SNUG_OK;
}

int sn_backend_tensor_get(const sn_backend *b, const void *buf, size_t offset, void *dst, size_t n, sn_err *err) {
    if (b->ops->tensor_get)
        return b->ops->tensor_get(b->ctx, buf, offset, dst, n, err);
    if (n)
        memcpy(dst, (const uint8_t *)buf + offset, n);
    return SNUG_OK;
}

int sn_backend_copy_async(const sn_backend *b, void *dst, const void *src, size_t n, bool to_device, sn_event **ev,
                          sn_err *err) {
    *ev = NULL;
    if (b->ops->copy_async)
        return b->ops->copy_async(b->ctx, dst, src, n, to_device, ev, err);
    return to_device ? b->ops->copy_to_device(b->ctx, dst, src, n, err) : b->ops->copy_to_host(b->ctx, dst, src, n, err);
}

int sn_backend_event_wait(const sn_backend *b, sn_event *ev, sn_err *err) {
    if (!ev)
        return SNUG_OK;
    if (!b->ops->event_wait)
        return sn_errf(err, SNUG_ERR_INTERNAL, "backend '%s' made an event it cannot wait for", b->ops->name);
    return b->ops->event_wait(b->ctx, ev, err);
}
