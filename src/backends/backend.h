/* The backend interface: a const table of functions plus a context, one per
 * device kind (see DESIGN.md, "Backends"). The executor reaches kernels and
 * memory only through it, so adding a device touches its own folder, one
 * registry line (src/backends/registry.c) and one build option. A NULL
 * member means the default described beside it. */
#ifndef SN_BACKENDS_BACKEND_H
#define SN_BACKENDS_BACKEND_H

#include "core/core.h"

struct sn_node;
struct sn_op_def;
struct sn_kernel;

typedef enum sn_device_type {
    SN_DEVICE_CPU = 0,
    SN_DEVICE_GPU = 1,
    SN_DEVICE_ACCELERATOR = 2,
} sn_device_type;

typedef struct sn_mem_info {
    uint64_t total, free; /* bytes */
    uint64_t held;        /* what this backend's buffers hold now, by its own count (0: not counted) */
    uint64_t peak;        /* the most they held at once */
} sn_mem_info;

/* What a device's buffers are, for the planner (what may live where, in
 * pieces of what size) and the executor (whether host code may touch the
 * bytes directly or must copy them through tensor_set / tensor_get). */
typedef struct sn_buffer_type {
    const char *name;  /* "cpu", "opencl", ... */
    size_t alignment;  /* of every buffer's start, in bytes */
    size_t max_size;   /* the largest one buffer may be (0: no limit but memory) */
    bool host_visible; /* host code may read and write the bytes in place */
} sn_buffer_type;

/* A copy in flight (sn_backend_ops.copy_async), opaque to the executor. */
typedef struct sn_event sn_event;

typedef struct sn_backend_ops {
    const char *name;       /* "cpu", "opencl", "cuda" */
    sn_device_type type;
    /* Opens the device named by dev, the part of the backend's name after
     * ':' ("opencl:1", "opencl:gfx": an index or a name's part; NULL: the
     * first), into *ctx; ctx_free closes it. NULL: no context (ctx NULL). */
    int (*ctx_new)(const char *dev, void **ctx, sn_err *err);
    void (*ctx_free)(void *ctx);
    /* The device's name for messages ("opencl:0 (pthread-...)"); NULL: the backend's name. */
    const char *(*device_name)(void *ctx);
    /* Device memory now; NULL: unknown (all 0). */
    int (*mem_info)(void *ctx, sn_mem_info *out, sn_err *err);
    /* A buffer of at least n bytes aligned to 64; NULL with err set. */
    void *(*buffer_alloc)(void *ctx, size_t n, sn_err *err);
    void (*buffer_free)(void *ctx, void *p);
    /* Synchronous copies between host memory and device buffers (for the
     * CPU both are host memory). */
    int (*copy_to_device)(void *ctx, void *dst, const void *src, size_t n, sn_err *err);
    int (*copy_to_host)(void *ctx, void *dst, const void *src, size_t n, sn_err *err);
    /* The device's buffers; NULL: host memory aligned to 64, no limit. */
    void (*buffer_type)(void *ctx, sn_buffer_type *out);
    /* Bytes [offset, offset + n) of buffer buf written from host memory, or
     * read into it; NULL: memcpy (host-visible buffers). */
    int (*tensor_set)(void *ctx, void *buf, size_t offset, const void *src, size_t n, sn_err *err);
    int (*tensor_get)(void *ctx, const void *buf, size_t offset, void *dst, size_t n, sn_err *err);
    /* An asynchronous copy of n bytes, host to device (to_device) or back:
     * *ev gets the event to wait on, or NULL when the copy is complete on
     * return; src and dst must stay valid until then. NULL: the synchronous
     * copy (complete on return). The prefetcher streams weights with it. */
    int (*copy_async)(void *ctx, void *dst, const void *src, size_t n, bool to_device, sn_event **ev,
                      sn_err *err);
    /* n bytes from src to dst, both in this device's buffers, not
     * overlapping; NULL: memmove (host-visible buffers). In order with the
     * device's kernels. */
    int (*copy_device)(void *ctx, void *dst, const void *src, size_t n, sn_err *err);
    /* Waits for ev and frees it. */
    int (*event_wait)(void *ctx, sn_event *ev, sn_err *err);
    /* Streaming weights to the device without the host waiting (all four
     * NULL: the device cannot stream). stream_in: n host bytes to dst on
     * the device's transfer queue, beside its kernels, once `after` (NULL:
     * at once) has happened; *done its event. src stays valid until then.
     * event_record: an event for the work queued on the kernels' queue so
     * far. queue_wait: kernels queued from now on start after ev. event_free
     * releases an event (NULL: nothing); event_check says whether it ended
     * in an error. */
    int (*stream_in)(void *ctx, void *dst, const void *src, size_t n, sn_event *after, sn_event **done, sn_err *err);
    int (*event_record)(void *ctx, sn_event **ev, sn_err *err);
    int (*queue_wait)(void *ctx, sn_event *ev, sn_err *err);
    void (*event_free)(void *ctx, sn_event *ev);
    int (*event_check)(void *ctx, sn_event *ev, sn_err *err);
    /* How this device computes node n of op schema op (resolved by the
     * graph from the op table), or NULL when it cannot. */
    const struct sn_kernel *(*kernel)(void *ctx, const struct sn_op_def *op, const struct sn_node *n);
    /* Whether the device can run this node; NULL: kernel != NULL. */
    bool (*supports_op)(void *ctx, const struct sn_node *n);
    /* Waits for queued work; NULL: work is synchronous. */
    int (*synchronize)(void *ctx, sn_err *err);
} sn_backend_ops;

typedef struct sn_backend {
    const sn_backend_ops *ops; /* borrowed: static table */
    void *ctx;                 /* owned by the backend */
} sn_backend;

/* The registry: backends compiled into this build, by name ("cpu", ...).
 * A backend is its folder src/backends/NAME/, one line in registry.c
 * (guarded by its build option's SNUG_WITH_NAME definition; the CPU's is
 * always there) and one CMake option. */
int sn_backend_count(void);
const char *sn_backend_name(int i);
/* Creates backend `name` (NULL: "cpu"), "NAME" or "NAME:DEVICE" where the
 * backend has devices (ctx_new). Free with sn_backend_free. */
int sn_backend_new(const char *name, sn_backend *out, sn_err *err);
void sn_backend_free(sn_backend *b);

/* Convenience wrappers that apply the NULL defaults. */
int sn_backend_mem_info(const sn_backend *b, sn_mem_info *out, sn_err *err);
const char *sn_backend_device_name(const sn_backend *b);
void sn_backend_buffer_type(const sn_backend *b, sn_buffer_type *out);
int sn_backend_tensor_set(const sn_backend *b, void *buf, size_t offset, const void *src, size_t n, sn_err *err);
int sn_backend_tensor_get(const sn_backend *b, const void *buf, size_t offset, void *dst, size_t n, sn_err *err);
int sn_backend_copy_async(const sn_backend *b, void *dst, const void *src, size_t n, bool to_device, sn_event **ev,
                          sn_err *err);
/* n bytes between two places of b's buffers; they may overlap (copied in
 * pieces that do not, where the device needs that). */
int sn_backend_copy_device(const sn_backend *b, void *dst, const void *src, size_t n, sn_err *err);
/* ev may be NULL (a copy complete on return): nothing to wait for. */
int sn_backend_event_wait(const sn_backend *b, sn_event *ev, sn_err *err);
/* b's kernel for node n (of schema n->op), or NULL. */
const struct sn_kernel *sn_backend_kernel(const sn_backend *b, const struct sn_node *n);

#endif
