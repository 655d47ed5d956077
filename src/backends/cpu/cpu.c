/* The CPU backend: host memory, the kernels of src/ops. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>

#include "backends/backend.h"
#include "ops/op.h"

static int cpu_mem_info(void *ctx, sn_mem_info *out, sn_err *err) {
    (void)ctx;
    struct sysinfo si;
    if (sysinfo(&si) != 0)
        return sn_errf(err, SNUG_ERR_IO, "sysinfo failed");
    out->total = (uint64_t)si.totalram * si.mem_unit;
    out->free = ((uint64_t)si.freeram + si.bufferram) * si.mem_unit;
    /* Linux's own estimate of what can be had without swapping (the page
     * cache that can be dropped included), where it gives one */
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[128];
        unsigned long long kib;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
                out->free = (uint64_t)kib * 1024;
                break;
            }
        fclose(f);
    }
    return SNUG_OK;
}

static void *cpu_alloc(void *ctx, size_t n, sn_err *err) {
    (void)ctx;
    /* sn_malloc keeps allocation counting and fault injection in one place;
     * over-allocate to align to 64 and keep the original pointer before it. */
    size_t total;
    if (!sn_add_ok(n, 64 + sizeof(void *), &total)) {
        sn_errf(err, SNUG_ERR_OOM, "buffer of %zu bytes is too large", n);
        return NULL;
    }
    char *raw = sn_malloc(total);
    if (!raw) {
        sn_errf(err, SNUG_ERR_OOM, "cannot allocate a buffer of %zu bytes", n);
        return NULL;
    }
    uintptr_t a = ((uintptr_t)raw + sizeof(void *) + 63) & ~(uintptr_t)63;
    ((void **)a)[-1] = raw;
    /* a KV cache or an arena (both zeroed when made, so every page is resident anyway): huge pages,
     * fewer TLB misses and prefetch streams that do not stop every 4 KiB */
    if (n >= ((size_t)4 << 20))
        sn_pages_huge((void *)a, n);
    return (void *)a;
}

static void cpu_free(void *ctx, void *p) {
    (void)ctx;
    if (p)
        sn_free(((void **)p)[-1]);
}

static int cpu_copy(void *ctx, void *dst, const void *src, size_t n, sn_err *err) {
    (void)ctx;
    (void)err;
    if (n)
        memcpy(dst, src, n);
    return SNUG_OK;
}

/* Host memory: the kernels read and write it in place, a copy is done when
 * it returns (no copy_async, tensor_set, tensor_get: the defaults). */
static void cpu_buffer_type(void *ctx, sn_buffer_type *out) {
    (void)ctx;
    *out = (sn_buffer_type){"cpu", 64, 0, true};
}

/* Every schema in the op table registers its CPU kernel beside it. */
static const sn_kernel *cpu_kernel(void *ctx, const sn_op_def *op, const sn_node *n) {
    (void)ctx;
    (void)n;
    return op->cpu.run ? &op->cpu : NULL;
}

const sn_backend_ops sn_backend_cpu_ops = {
    .name = "cpu",
    .type = SN_DEVICE_CPU,
    .mem_info = cpu_mem_info,
    .buffer_alloc = cpu_alloc,
    .buffer_free = cpu_free,
    .copy_to_device = cpu_copy,
    .copy_to_host = cpu_copy,
    .buffer_type = cpu_buffer_type,
    .kernel = cpu_kernel,
    .supports_op = NULL,
    .synchronize = NULL,
};
