/* The OpenCL backend's private parts, shared by its device side (opencl.c:
 * devices, buffers, copies, the program and its cache) and its kernels
 * (kernels.c). See docs/opencl.md.
 *
 * Pointers. The executor does byte arithmetic on what buffer_alloc returns
 * and hands kernels, tensor_set and tensor_get pointers inside it. A cl_mem
 * has no address, so each buffer gets one: buffer_alloc reserves an address
 * range of the buffer's size (mmap, PROT_NONE, MAP_NORESERVE: no memory,
 * never touched) and records (range, cl_mem, context) in a table; any
 * pointer inside the range maps back to (cl_mem, offset). The table is the
 * process's, not a context's, because a kernel's run gets no backend
 * context (sn_kctx carries none): it finds its device, queue and buffers
 * from its tensors' pointers. Addresses are process-wide, so is the map
 * from an address to what it stands for; a mutex guards it. */
#ifndef SN_BACKENDS_OPENCL_H
#define SN_BACKENDS_OPENCL_H

#include <pthread.h>

#define CL_TARGET_OPENCL_VERSION 120
#ifdef __APPLE__
#include <OpenCL/cl.h>
#else
#include <CL/cl.h>
#endif

#include "backends/backend.h"
#include "ops/op.h"

/* The kernels of the program, by name, created once per context: those of
 * kernels.cl, then each further file's list (its own header). */
#include "backends/opencl/kernels_more.h"
#include "backends/opencl/attention.h"
#define SN_CL_KERNELS_CORE(X)                                                                          \
    X(add) X(sub) X(mul) X(div) X(neg) X(sqrt_) X(recip) X(exp_) X(sigmoid) X(tanh_) X(erf_) X(softmax) \
    X(matmul) X(matmul_rows) X(norm) X(transpose) X(copy2d) X(gather) X(where_) X(matmulnbits) X(matmulnbits_rows)
#define SN_CL_KERNELS(X) SN_CL_KERNELS_CORE(X) SN_CL_KERNELS_MORE(X) SN_CL_KERNELS_ATTN(X)
enum {
#define SN_CL_ENUM(k) SN_CLK_##k,
    SN_CL_KERNELS(SN_CL_ENUM)
#undef SN_CL_ENUM
    SN_CLK_COUNT
};

typedef struct sn_cl_ctx {
    cl_platform_id platform;
    cl_device_id device;
    cl_context context;      /* owned */
    cl_command_queue queue;  /* owned: in order, so a read after a kernel sees its writes */
    cl_command_queue tqueue; /* owned: in order, streamed weights' copies beside the kernels */
    cl_mem status;           /* owned: int [4], what a kernel found wrong in its data (SN_CL_BAD_*: its code
                              * and two values); synchronize reports and clears it */
    cl_program program;      /* owned */
    cl_kernel kernels[SN_CLK_COUNT]; /* owned */
    pthread_mutex_t lock;    /* kernel arguments are set and enqueued under it */
    char name[256];          /* "opencl:0 (device name)", for messages */
    size_t max_alloc, align, max_wg;
    uint64_t total, held;    /* bytes: the device's global memory, what snug's buffers hold */
    uint64_t peak;           /* the most they held at once */
    bool amd_free;           /* the device says how much is free (cl_amd_device_attribute_query) */
    bool from_cache;         /* the program came from the binary cache */
} sn_cl_ctx;

/* Codes a kernel leaves in the status word (kernels.cl's). */
enum { SN_CL_BAD_NONE, SN_CL_BAD_INDEX, SN_CL_BAD_POSITION };

/* Where pointer p's n bytes live: its buffer's context, cl_mem and the
 * offset in it. False when p is in no OpenCL buffer or the bytes overrun it. */
bool sn_cl_lookup(const void *p, size_t n, sn_cl_ctx **ctx, cl_mem *mem, size_t *off);
/* An OpenCL error code's name ("CL_OUT_OF_RESOURCES"). */
const char *sn_cl_errstr(cl_int rc);

/* The kernels (kernels.c). */
const sn_kernel *sn_cl_kernel(const sn_op_def *op, const sn_node *n);
extern const char sn_cl_source[]; /* kernels.cl and the others, embedded at build time */

/* Whether ctx (an "opencl" backend's) built its program from the binary
 * cache: for the tests. */
bool sn_cl_from_cache(const void *ctx);

#endif
