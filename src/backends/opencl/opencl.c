/* The OpenCL backend: a device chosen by index or name, its buffers (the
 * address scheme is in opencl.h), copies sync and async, and the program
 * built once per context from kernels.cl, its binary cached on disk. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/opencl/opencl.h"

const char *sn_cl_errstr(cl_int rc) {
    switch (rc) {
#define E(x) case x: return #x;
        E(CL_DEVICE_NOT_FOUND) E(CL_DEVICE_NOT_AVAILABLE) E(CL_COMPILER_NOT_AVAILABLE)
        E(CL_MEM_OBJECT_ALLOCATION_FAILURE) E(CL_OUT_OF_RESOURCES) E(CL_OUT_OF_HOST_MEMORY)
        E(CL_BUILD_PROGRAM_FAILURE) E(CL_INVALID_VALUE) E(CL_INVALID_DEVICE) E(CL_INVALID_BINARY)
        E(CL_INVALID_BUFFER_SIZE) E(CL_INVALID_KERNEL_ARGS) E(CL_INVALID_WORK_GROUP_SIZE)
        E(CL_INVALID_WORK_ITEM_SIZE) E(CL_INVALID_GLOBAL_WORK_SIZE) E(CL_INVALID_ARG_SIZE)
        E(CL_INVALID_ARG_VALUE) E(CL_INVALID_MEM_OBJECT) E(CL_INVALID_KERNEL_NAME)
#undef E
    default: return "an OpenCL error";
    }
}

/* ---- the address table (opencl.h, "Pointers") ---------------------------- */

typedef struct ocl_range {
    uintptr_t base;
    size_t size; /* of the reservation, whole pages */
    cl_mem mem;  /* owned */
    sn_cl_ctx *ctx;
} ocl_range;

static struct {
    pthread_mutex_t lock;
    ocl_range *r; /* owned, unordered: a session holds a few buffers per device */
    int n, cap;
} g_ranges = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0};

bool sn_cl_lookup(const void *p, size_t n, sn_cl_ctx **ctx, cl_mem *mem, size_t *off) {
    uintptr_t a = (uintptr_t)p;
    bool found = false;
    pthread_mutex_lock(&g_ranges.lock);
    for (int i = 0; i < g_ranges.n && !found; i++) {
        const ocl_range *r = &g_ranges.r[i];
        if (a >= r->base && a - r->base < r->size + (n == 0) && n <= r->size - (a - r->base)) {
            *ctx = r->ctx, *mem = r->mem, *off = a - r->base;
            found = true;
        }
    }
    pthread_mutex_unlock(&g_ranges.lock);
    return found;
}

/* ---- devices ------------------------------------------------------------- */

/* Every device of every platform, in order: the index "opencl:N" means. */
typedef struct ocl_devlist {
    int n;
    cl_platform_id plat[64];
    cl_device_id dev[64];
} ocl_devlist;

static int list_devices(ocl_devlist *l, sn_err *err) {
    cl_platform_id plats[16];
    cl_uint np = 0;
    cl_int rc = clGetPlatformIDs(16, plats, &np);
    l->n = 0;
    if (rc != CL_SUCCESS || np == 0)
        return sn_errf(err, SNUG_ERR_UNSUPPORTED,
                       "opencl: no OpenCL platform (%s; is an ICD installed, e.g. pocl-opencl-icd?)",
                       rc == CL_SUCCESS ? "none registered" : sn_cl_errstr(rc));
    for (cl_uint p = 0; p < np && p < 16; p++) {
        cl_uint nd = 0;
        cl_device_id devs[64];
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 64, devs, &nd) != CL_SUCCESS)
            continue;
        for (cl_uint d = 0; d < nd && l->n < 64; d++)
            l->plat[l->n] = plats[p], l->dev[l->n++] = devs[d];
    }
    if (!l->n)
        return sn_errf(err, SNUG_ERR_UNSUPPORTED, "opencl: %u platform(s) but no device", np);
    return SNUG_OK;
}

static void dev_str(cl_device_id d, cl_device_info what, char *buf, size_t cap) {
    buf[0] = 0;
    if (clGetDeviceInfo(d, what, cap, buf, NULL) != CL_SUCCESS)
        buf[0] = 0;
    buf[cap - 1] = 0;
}

static bool contains_nocase(const char *hay, const char *needle) {
    size_t n = strlen(needle);
    for (; *hay; hay++)
        if (!strncasecmp(hay, needle, n))
            return true;
    return n == 0;
}

/* dev: NULL or "" (the first), digits (that index), or a part of a device's name. */
static int pick_device(const ocl_devlist *l, const char *dev, int *out, sn_err *err) {
    char name[256];
    if (!dev || !*dev) {
        *out = 0;
        return SNUG_OK;
    }
    bool digits = true;
    for (const char *s = dev; *s; s++)
        digits &= isdigit((unsigned char)*s) != 0;
    if (digits) {
        long i = strtol(dev, NULL, 10);
        if (i < l->n) {
            *out = (int)i;
            return SNUG_OK;
        }
    } else
        for (int i = 0; i < l->n; i++) {
            dev_str(l->dev[i], CL_DEVICE_NAME, name, sizeof name);
            if (contains_nocase(name, dev)) {
                *out = i;
                return SNUG_OK;
            }
        }
    char have[512] = "";
    for (int i = 0; i < l->n; i++) {
        dev_str(l->dev[i], CL_DEVICE_NAME, name, sizeof name);
        snprintf(have + strlen(have), sizeof have - strlen(have), "%s%d '%s'", i ? ", " : "", i, name);
    }
    return sn_errf(err, SNUG_ERR_INVALID_ARG, "opencl: no device '%s' (have: %s)", dev, have);
}

/* ---- the program and its binary cache -------------------------------------- */

static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static const char k_build_opts[] = "-cl-std=CL1.2";

/* ${SNUG_CACHE:-$HOME/.cache/snug}/opencl/<device>-<source>.bin, the folder
 * made; false when there is no home to put it in. */
static bool cache_path(const sn_cl_ctx *c, char *path, size_t cap) {
    const char *root = getenv("SNUG_CACHE"), *home = getenv("HOME");
    char dir[1024];
    if (root && *root)
        snprintf(dir, sizeof dir, "%s", root);
    else if (home && *home)
        snprintf(dir, sizeof dir, "%s/.cache/snug", home);
    else
        return false;
    /* the folders up to it, each made if missing */
    size_t len = strlen(dir);
    if (len + 8 >= sizeof dir)
        return false;
    strcat(dir, "/opencl");
    for (char *s = dir + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            mkdir(dir, 0755);
            *s = '/';
        }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return false;
    char s[256];
    uint64_t dh = 0xcbf29ce484222325ull;
    dev_str(c->device, CL_DEVICE_NAME, s, sizeof s), dh = fnv1a(dh, s, strlen(s) + 1);
    dev_str(c->device, CL_DEVICE_VERSION, s, sizeof s), dh = fnv1a(dh, s, strlen(s) + 1);
    dev_str(c->device, CL_DRIVER_VERSION, s, sizeof s), dh = fnv1a(dh, s, strlen(s) + 1);
    if (clGetPlatformInfo(c->platform, CL_PLATFORM_VERSION, sizeof s, s, NULL) == CL_SUCCESS)
        s[sizeof s - 1] = 0, dh = fnv1a(dh, s, strlen(s) + 1);
    uint64_t sh = fnv1a(0xcbf29ce484222325ull, sn_cl_source, strlen(sn_cl_source));
    sh = fnv1a(sh, k_build_opts, sizeof k_build_opts);
    snprintf(path, cap, "%s/%016llx-%016llx.bin", dir, (unsigned long long)dh, (unsigned long long)sh);
    return true;
}

/* The cached binary built for the device, or NULL (none, unreadable, stale). */
static cl_program load_cached(sn_cl_ctx *c, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    cl_program prog = NULL;
    unsigned char *bin = NULL;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n > 0 && fseek(f, 0, SEEK_SET) == 0 && (bin = sn_malloc((size_t)n)) && fread(bin, 1, (size_t)n, f) == (size_t)n) {
        size_t len = (size_t)n;
        const unsigned char *bins[1] = {bin};
        cl_int st, rc;
        prog = clCreateProgramWithBinary(c->context, 1, &c->device, &len, bins, &st, &rc);
        if (prog && (rc != CL_SUCCESS || st != CL_SUCCESS ||
                     clBuildProgram(prog, 1, &c->device, k_build_opts, NULL, NULL) != CL_SUCCESS)) {
            clReleaseProgram(prog);
            prog = NULL;
        }
    }
    sn_free(bin);
    fclose(f);
    return prog;
}

/* Writes the program's binary beside where the next start looks for it
 * (through a temporary file, so a reader never sees half of one). */
static void store_cached(const sn_cl_ctx *c, const char *path) {
    size_t n = 0;
    if (clGetProgramInfo(c->program, CL_PROGRAM_BINARY_SIZES, sizeof n, &n, NULL) != CL_SUCCESS || !n)
        return;
    char tmp[1200];
    if (snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid()) >= (int)sizeof tmp)
        return;
    unsigned char *bin = sn_malloc(n);
    FILE *f = NULL;
    if (bin && clGetProgramInfo(c->program, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) == CL_SUCCESS &&
        (f = fopen(tmp, "wb"))) {
        bool ok = fwrite(bin, 1, n, f) == n;
        ok &= fclose(f) == 0;
        if (!ok || rename(tmp, path) != 0)
            remove(tmp);
    }
    sn_free(bin);
}

static int build_program(sn_cl_ctx *c, sn_err *err) {
    char path[1100];
    bool cached = cache_path(c, path, sizeof path);
    if (cached && (c->program = load_cached(c, path)))
        c->from_cache = true;
    else {
        const char *src = sn_cl_source;
        cl_int rc;
        c->program = clCreateProgramWithSource(c->context, 1, &src, NULL, &rc);
        if (!c->program)
            return sn_errf(err, SNUG_ERR_INTERNAL, "%s: cannot create the program (%s)", c->name, sn_cl_errstr(rc));
        rc = clBuildProgram(c->program, 1, &c->device, k_build_opts, NULL, NULL);
        if (rc != CL_SUCCESS) {
            /* the log's start (a query with a buffer shorter than the log fails) */
            char log[768] = "";
            size_t len = 0;
            clGetProgramBuildInfo(c->program, c->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &len);
            char *full = len ? sn_malloc(len + 1) : NULL;
            if (full && clGetProgramBuildInfo(c->program, c->device, CL_PROGRAM_BUILD_LOG, len, full, NULL) ==
                            CL_SUCCESS) {
                full[len] = 0;
                snprintf(log, sizeof log, "%s", full);
            }
            sn_free(full);
            return sn_errf(err, SNUG_ERR_UNSUPPORTED, "%s: the kernels do not compile (%s): %s", c->name,
                           sn_cl_errstr(rc), log);
        }
        if (cached)
            store_cached(c, path);
    }
    static const char *const names[] = {
#define SN_CL_NAME(k) #k,
        SN_CL_KERNELS(SN_CL_NAME)
#undef SN_CL_NAME
    };
    for (int k = 0; k < SN_CLK_COUNT; k++) {
        cl_int rc;
        if (!(c->kernels[k] = clCreateKernel(c->program, names[k], &rc)))
            return sn_errf(err, SNUG_ERR_INTERNAL, "%s: no kernel '%s' in the program (%s)", c->name, names[k],
                           sn_cl_errstr(rc));
    }
    return SNUG_OK;
}

bool sn_cl_from_cache(const void *ctx) { return ctx && ((const sn_cl_ctx *)ctx)->from_cache; }

/* ---- the context ----------------------------------------------------------- */

static void ocl_ctx_free(void *ctx) {
    sn_cl_ctx *c = ctx;
    if (!c)
        return;
    for (int k = 0; k < SN_CLK_COUNT; k++)
        if (c->kernels[k])
            clReleaseKernel(c->kernels[k]);
    if (c->program)
        clReleaseProgram(c->program);
    if (c->status)
        clReleaseMemObject(c->status);
    if (c->queue)
        clReleaseCommandQueue(c->queue);
    if (c->tqueue)
        clReleaseCommandQueue(c->tqueue);
    if (c->context)
        clReleaseContext(c->context);
    pthread_mutex_destroy(&c->lock);
    sn_free(c);
}

static int ocl_ctx_new(const char *dev, void **out, sn_err *err) {
    *out = NULL;
    ocl_devlist l;
    int idx = 0;
    SN_TRY(list_devices(&l, err));
    SN_TRY(pick_device(&l, dev, &idx, err));
    sn_cl_ctx *c = sn_calloc(1, sizeof *c);
    if (!c)
        return sn_errf(err, SNUG_ERR_OOM, "opencl: out of memory");
    pthread_mutex_init(&c->lock, NULL);
    c->platform = l.plat[idx], c->device = l.dev[idx];
    char dname[200], ext[4096];
    dev_str(c->device, CL_DEVICE_NAME, dname, sizeof dname);
    snprintf(c->name, sizeof c->name, "opencl:%d (%s)", idx, dname);
    cl_ulong total = 0, max_alloc = 0;
    cl_uint align_bits = 0;
    size_t max_wg = 0;
    clGetDeviceInfo(c->device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof total, &total, NULL);
    clGetDeviceInfo(c->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc, &max_alloc, NULL);
    clGetDeviceInfo(c->device, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits, &align_bits, NULL);
    clGetDeviceInfo(c->device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof max_wg, &max_wg, NULL);
    dev_str(c->device, CL_DEVICE_EXTENSIONS, ext, sizeof ext);
    c->total = total, c->max_alloc = (size_t)max_alloc, c->max_wg = max_wg;
    c->align = align_bits / 8 > 64 ? align_bits / 8 : 64;
    c->amd_free = strstr(ext, "cl_amd_device_attribute_query") != NULL;
    int rc = SNUG_OK;
    cl_int crc;
    if (max_wg < 64) {
        rc = sn_errf(err, SNUG_ERR_UNSUPPORTED, "%s: work groups of %zu items, snug's kernels need 64", c->name, max_wg);
        goto fail;
    }
    if (!(c->context = clCreateContext(NULL, 1, &c->device, NULL, NULL, &crc))) {
        rc = sn_errf(err, SNUG_ERR_UNSUPPORTED, "%s: cannot create a context (%s)", c->name, sn_cl_errstr(crc));
        goto fail;
    }
    if (!(c->queue = clCreateCommandQueue(c->context, c->device, 0, &crc)) ||
        !(c->tqueue = clCreateCommandQueue(c->context, c->device, 0, &crc))) {
        rc = sn_errf(err, SNUG_ERR_UNSUPPORTED, "%s: cannot create a queue (%s)", c->name, sn_cl_errstr(crc));
        goto fail;
    }
    cl_int zero[4] = {0};
    if (!(c->status = clCreateBuffer(c->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof zero, zero, &crc))) {
        rc = sn_errf(err, SNUG_ERR_OOM, "%s: cannot allocate its status word (%s)", c->name, sn_cl_errstr(crc));
        goto fail;
    }
    if ((rc = build_program(c, err)) != SNUG_OK)
        goto fail;
    *out = c;
    return SNUG_OK;
fail:
    ocl_ctx_free(c);
    return rc;
}

/* ---- memory ---------------------------------------------------------------- */

/* CL_DEVICE_GLOBAL_FREE_MEMORY_AMD: free memory in KiB (cl_amd_device_attribute_query). */
#define SN_CL_FREE_MEMORY_AMD 0x4039

static const char *ocl_device_name(void *ctx) { return ((sn_cl_ctx *)ctx)->name; }

static int ocl_mem_info(void *ctx, sn_mem_info *out, sn_err *err) {
    (void)err;
    sn_cl_ctx *c = ctx;
    out->total = c->total;
    out->held = c->held;
    out->peak = c->peak;
    out->free = c->total > c->held ? c->total - c->held : 0;
    size_t kib[2] = {0, 0};
    if (c->amd_free && clGetDeviceInfo(c->device, SN_CL_FREE_MEMORY_AMD, sizeof kib, kib, NULL) == CL_SUCCESS)
        out->free = (uint64_t)kib[0] * 1024;
    return SNUG_OK;
}

static void *ocl_alloc(void *ctx, size_t n, sn_err *err) {
    sn_cl_ctx *c = ctx;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (n > c->max_alloc) {
        sn_errf(err, SNUG_ERR_OOM, "%s: a buffer of %zu bytes is over the device's largest (%zu)", c->name, n,
                c->max_alloc);
        return NULL;
    }
    size_t size = (n + page - 1) / page * page;
    if (!size)
        size = page; /* an empty buffer still has an address of its own */
    void *base = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
        sn_errf(err, SNUG_ERR_OOM, "%s: cannot reserve %zu bytes of address space for a buffer", c->name, size);
        return NULL;
    }
    cl_int rc;
    cl_mem mem = clCreateBuffer(c->context, CL_MEM_READ_WRITE, n ? n : 1, NULL, &rc);
    if (!mem) {
        munmap(base, size);
        sn_errf(err, SNUG_ERR_OOM, "%s: cannot allocate a buffer of %zu bytes (%s)", c->name, n, sn_cl_errstr(rc));
        return NULL;
    }
    pthread_mutex_lock(&g_ranges.lock);
    bool ok = true;
    if (g_ranges.n == g_ranges.cap) {
        int cap = g_ranges.cap ? 2 * g_ranges.cap : 16;
        ocl_range *r = sn_realloc(g_ranges.r, (size_t)cap * sizeof *r);
        if (r)
            g_ranges.r = r, g_ranges.cap = cap;
        ok = r != NULL;
    }
    if (ok)
        g_ranges.r[g_ranges.n++] = (ocl_range){(uintptr_t)base, n, mem, c};
    pthread_mutex_unlock(&g_ranges.lock);
    if (!ok) {
        clReleaseMemObject(mem);
        munmap(base, size);
        sn_errf(err, SNUG_ERR_OOM, "%s: out of memory for the buffer table", c->name);
        return NULL;
    }
    uint64_t now = __atomic_add_fetch(&c->held, (uint64_t)n, __ATOMIC_RELAXED);
    uint64_t peak = __atomic_load_n(&c->peak, __ATOMIC_RELAXED);
    while (now > peak && !__atomic_compare_exchange_n(&c->peak, &peak, now, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
    return base;
}

static void ocl_free(void *ctx, void *p) {
    sn_cl_ctx *c = ctx;
    if (!p)
        return;
    ocl_range r = {0};
    pthread_mutex_lock(&g_ranges.lock);
    for (int i = 0; i < g_ranges.n; i++)
        if (g_ranges.r[i].base == (uintptr_t)p) {
            r = g_ranges.r[i];
            g_ranges.r[i] = g_ranges.r[--g_ranges.n];
            break;
        }
    if (!g_ranges.n) {
        sn_free(g_ranges.r);
        g_ranges.r = NULL, g_ranges.cap = 0;
    }
    pthread_mutex_unlock(&g_ranges.lock);
    if (!r.mem)
        return;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    clReleaseMemObject(r.mem);
    munmap(p, r.size ? (r.size + page - 1) / page * page : page);
    __atomic_sub_fetch(&c->held, (uint64_t)r.size, __ATOMIC_RELAXED);
}

static void ocl_buffer_type(void *ctx, sn_buffer_type *out) {
    sn_cl_ctx *c = ctx;
    *out = (sn_buffer_type){"opencl", c->align, c->max_alloc, false};
}

/* ---- copies ---------------------------------------------------------------- */

static int find(sn_cl_ctx *c, const void *p, size_t n, cl_mem *mem, size_t *off, sn_err *err) {
    sn_cl_ctx *owner;
    if (!sn_cl_lookup(p, n, &owner, mem, off) || owner != c)
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "%s: %zu bytes at %p are in none of its buffers", c->name, n, p);
    return SNUG_OK;
}

/* One copy between host memory and a device pointer; ev NULL: blocking. */
static int copy(sn_cl_ctx *c, void *dst, const void *src, size_t n, bool to_device, cl_event *ev, sn_err *err) {
    cl_mem mem;
    size_t off;
    if (ev)
        *ev = NULL;
    SN_TRY(find(c, to_device ? dst : src, n, &mem, &off, err));
    if (!n)
        return SNUG_OK;
    cl_bool block = ev ? CL_FALSE : CL_TRUE;
    cl_int rc = to_device ? clEnqueueWriteBuffer(c->queue, mem, block, off, n, src, 0, NULL, ev)
                          : clEnqueueReadBuffer(c->queue, mem, block, off, n, dst, 0, NULL, ev);
    if (rc != CL_SUCCESS)
        return sn_errf(err, SNUG_ERR_IO, "%s: a copy of %zu bytes %s the device failed (%s)", c->name, n,
                       to_device ? "to" : "from", sn_cl_errstr(rc));
    return SNUG_OK;
}

static int ocl_copy_device(void *ctx, void *dst, const void *src, size_t n, sn_err *err) {
    sn_cl_ctx *c = ctx;
    cl_mem dm, sm;
    size_t doff, soff;
    SN_TRY(find(c, dst, n, &dm, &doff, err));
    SN_TRY(find(c, src, n, &sm, &soff, err));
    if (!n)
        return SNUG_OK;
    cl_int rc = clEnqueueCopyBuffer(c->queue, sm, dm, soff, doff, n, 0, NULL, NULL);
    if (rc != CL_SUCCESS)
        return sn_errf(err, SNUG_ERR_IO, "%s: a copy of %zu bytes on the device failed (%s)", c->name, n,
                       sn_cl_errstr(rc));
    return SNUG_OK;
}

static int ocl_to_device(void *ctx, void *dst, const void *src, size_t n, sn_err *err) {
    return copy(ctx, dst, src, n, true, NULL, err);
}

static int ocl_to_host(void *ctx, void *dst, const void *src, size_t n, sn_err *err) {
    return copy(ctx, dst, src, n, false, NULL, err);
}

static int ocl_tensor_set(void *ctx, void *buf, size_t offset, const void *src, size_t n, sn_err *err) {
    return copy(ctx, (uint8_t *)buf + offset, src, n, true, NULL, err);
}

static int ocl_tensor_get(void *ctx, const void *buf, size_t offset, void *dst, size_t n, sn_err *err) {
    return copy(ctx, dst, (const uint8_t *)buf + offset, n, false, NULL, err);
}

static int ocl_copy_async(void *ctx, void *dst, const void *src, size_t n, bool to_device, sn_event **ev,
                         sn_err *err) {
    cl_event e;
    int rc = copy(ctx, dst, src, n, to_device, &e, err);
    *ev = (sn_event *)e; /* NULL for an empty copy: complete on return */
    return rc;
}

static int ocl_event_wait(void *ctx, sn_event *ev, sn_err *err) {
    sn_cl_ctx *c = ctx;
    cl_event e = (cl_event)ev;
    cl_int rc = clWaitForEvents(1, &e);
    cl_int st = CL_COMPLETE;
    if (rc == CL_SUCCESS)
        clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL);
    clReleaseEvent(e);
    if (rc != CL_SUCCESS || st < 0)
        return sn_errf(err, SNUG_ERR_IO, "%s: an asynchronous copy failed (%s)", c->name,
                       sn_cl_errstr(rc != CL_SUCCESS ? rc : st));
    return SNUG_OK;
}

static int ocl_stream_in(void *ctx, void *dst, const void *src, size_t n, sn_event *after, sn_event **done,
                         sn_err *err) {
    sn_cl_ctx *c = ctx;
    cl_mem mem;
    size_t off;
    cl_event w = (cl_event)after, e = NULL;
    *done = NULL;
    SN_TRY(find(c, dst, n ? n : 1, &mem, &off, err));
    /* an empty copy still orders: a marker after `after` */
    cl_int rc = n ? clEnqueueWriteBuffer(c->tqueue, mem, CL_FALSE, off, n, src, w ? 1 : 0, w ? &w : NULL, &e)
                  : clEnqueueMarkerWithWaitList(c->tqueue, w ? 1 : 0, w ? &w : NULL, &e);
    if (rc != CL_SUCCESS)
        return sn_errf(err, SNUG_ERR_IO, "%s: streaming %zu bytes to the device failed (%s)", c->name, n,
                       sn_cl_errstr(rc));
    clFlush(c->tqueue); /* started now, not at the next wait */
    *done = (sn_event *)e;
    return SNUG_OK;
}

static int ocl_event_record(void *ctx, sn_event **ev, sn_err *err) {
    sn_cl_ctx *c = ctx;
    cl_event e = NULL;
    cl_int rc = clEnqueueMarkerWithWaitList(c->queue, 0, NULL, &e);
    *ev = (sn_event *)e;
    if (rc != CL_SUCCESS)
        return sn_errf(err, SNUG_ERR_IO, "%s: cannot mark its queue (%s)", c->name, sn_cl_errstr(rc));
    return SNUG_OK;
}

static int ocl_queue_wait(void *ctx, sn_event *ev, sn_err *err) {
    sn_cl_ctx *c = ctx;
    cl_event e = (cl_event)ev;
    if (!e)
        return SNUG_OK;
    cl_int rc = clEnqueueBarrierWithWaitList(c->queue, 1, &e, NULL);
    if (rc != CL_SUCCESS)
        return sn_errf(err, SNUG_ERR_IO, "%s: cannot order its queue after a copy (%s)", c->name, sn_cl_errstr(rc));
    return SNUG_OK;
}

static void ocl_event_free(void *ctx, sn_event *ev) {
    (void)ctx;
    if (ev)
        clReleaseEvent((cl_event)ev);
}

static int ocl_event_check(void *ctx, sn_event *ev, sn_err *err) {
    sn_cl_ctx *c = ctx;
    cl_int st = CL_COMPLETE;
    if (ev && clGetEventInfo((cl_event)ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL) == CL_SUCCESS &&
        st < 0)
        return sn_errf(err, SNUG_ERR_IO, "%s: a streamed copy failed (%s)", c->name, sn_cl_errstr(st));
    return SNUG_OK;
}

/* The queue done, and what a kernel found wrong in its data since the last
 * time (a bad index or position: the run's error, as on the CPU). */
static int ocl_synchronize(void *ctx, sn_err *err) {
    sn_cl_ctx *c = ctx;
    cl_int rc = clFinish(c->queue), st[4] = {0};
    if (rc == CL_SUCCESS)
        rc = clEnqueueReadBuffer(c->queue, c->status, CL_TRUE, 0, sizeof st, st, 0, NULL, NULL);
    if (rc != CL_SUCCESS)
        return sn_errf(err, SNUG_ERR_IO, "%s: the queue failed (%s)", c->name, sn_cl_errstr(rc));
    if (st[0] == SN_CL_BAD_NONE)
        return SNUG_OK;
    cl_int zero[4] = {0};
    clEnqueueWriteBuffer(c->queue, c->status, CL_TRUE, 0, sizeof zero, zero, 0, NULL, NULL);
    if (st[0] == SN_CL_BAD_INDEX)
        return sn_errf(err, SNUG_ERR_RANGE, "%s: Gather: index %d is out of range for an axis of %d", c->name,
                       st[1], st[2]);
    if (st[0] == SN_CL_BAD_POSITION)
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "%s: RotaryEmbedding: position id %d out of range [0, %d)",
                       c->name, st[1], st[2]);
    return sn_errf(err, SNUG_ERR_INTERNAL, "%s: a kernel left status %d", c->name, st[0]);
}

/* ---- kernels ----------------------------------------------------------------- */

static const sn_kernel *ocl_kernel(void *ctx, const sn_op_def *op, const sn_node *n) {
    (void)ctx;
    return sn_cl_kernel(op, n);
}

const sn_backend_ops sn_backend_opencl_ops = {
    .name = "opencl",
    .type = SN_DEVICE_GPU,
    .ctx_new = ocl_ctx_new,
    .ctx_free = ocl_ctx_free,
    .mem_info = ocl_mem_info,
    .device_name = ocl_device_name,
    .buffer_alloc = ocl_alloc,
    .buffer_free = ocl_free,
    .copy_to_device = ocl_to_device,
    .copy_to_host = ocl_to_host,
    .buffer_type = ocl_buffer_type,
    .tensor_set = ocl_tensor_set,
    .copy_device = ocl_copy_device,
    .tensor_get = ocl_tensor_get,
    .copy_async = ocl_copy_async,
    .event_wait = ocl_event_wait,
    .stream_in = ocl_stream_in,
    .event_record = ocl_event_record,
    .queue_wait = ocl_queue_wait,
    .event_free = ocl_event_free,
    .event_check = ocl_event_check,
    .kernel = ocl_kernel,
    .supports_op = NULL, /* kernel != NULL: sn_cl_kernel checks the node's attributes */
    .synchronize = ocl_synchronize,
};
