/* What the OpenCL backend's kernel files share (kernels.c, kernels_more.c,
 * attention.c): a kernel call's arguments and its enqueue, the checks at
 * prepare, shapes and broadcast strides in the device code's layout, and
 * the table row each file gives sn_cl_kernel (kernels.c). */
#ifndef SN_BACKENDS_OPENCL_KIT_H
#define SN_BACKENDS_OPENCL_KIT_H

#include "backends/opencl/opencl.h"

#define SN_CL_RANK 8 /* the device kernels' sn_shape */

/* kernels.cl's sn_shape: same fields, same order, 64-bit each. */
typedef struct sn_cl_shape {
    cl_long rank, n;
    cl_long dims[SN_CL_RANK];
    cl_long s[3][SN_CL_RANK];
} sn_cl_shape;

/* One kernel call: its arguments, then the enqueue. */
typedef struct sn_cl_call {
    const sn_kctx *c;
    sn_cl_ctx *ctx; /* of the first buffer */
    int n;
    struct {
        size_t size;
        const void *p;
    } arg[32];
    cl_mem mem[10];
    cl_ulong off[10];
    int n_mem;
    int rc; /* the first failure */
} sn_cl_call;

int64_t sn_cl_numel(const sn_tensor *t);
/* A by-value argument (p must live until the enqueue). */
void sn_cl_arg_val(sn_cl_call *k, const void *p, size_t size);
/* Two arguments: t's buffer and its byte offset in it. An absent or empty
 * tensor may stand in with `like`'s buffer (a kernel told not to read it). */
void sn_cl_arg_buf(sn_cl_call *k, const sn_tensor *t, const sn_tensor *like);
/* One argument: the context's status word (opencl.h), where a kernel
 * reports bad data; after an sn_cl_arg_buf (which picks the context). */
void sn_cl_arg_status(sn_cl_call *k);
/* Enqueues kernel `which` over global (rounded up to whole groups of local;
 * local NULL: the device's choice). */
int sn_cl_enqueue(sn_cl_call *k, int which, cl_uint dims, const size_t *global, const size_t *local);

/* Every present input in mask f32_in and every present output is fp32, and
 * ranks fit the device's sn_shape. */
int sn_cl_check_f32(sn_prep_ctx *c, unsigned f32_in);
int sn_cl_prep_f32(sn_prep_ctx *c); /* all of them */
/* Strides of t (elements) as seen from y's dims, right-aligned, 0 along
 * broadcast dims. */
void sn_cl_bcast_strides(const sn_tensor *t, const sn_tensor *y, cl_long *s);
sn_cl_shape sn_cl_shape_of(const sn_tensor *y);

/* Element-wise runs over kernels.cl's BINARY (two fp32 operands,
 * broadcast) and UNARY (one, same shape) forms. */
int sn_cl_run_binary(sn_kctx *c, int which);

/* A row normalization (kernels.cl's norm): rows of L of x (+ skip, its rows
 * repeating) (+ bias), RMS or centered (layer norm), times gamma (+ beta);
 * the sum x + skip + bias into sum where given. */
typedef struct sn_cl_norm {
    const sn_tensor *x, *skip, *gamma, *beta, *bias; /* skip, beta, bias: NULL when absent */
    sn_tensor *y, *sum;
    int64_t L;
    bool center;
    float eps;
} sn_cl_norm;
int sn_cl_run_norm(sn_kctx *c, const sn_cl_norm *a);
int sn_cl_run_unary(sn_kctx *c, int which);

/* A table row: the op, its kernel, and the attributes a node must have for
 * it (the node shows no dtypes or shapes; prepare checks those). */
typedef struct sn_cl_op {
    const char *domain, *name;
    sn_kernel k;
    bool (*ok)(const sn_node *n);
} sn_cl_op;

/* Each kernel file's rows (sn_cl_kernel looks in all). */
extern const sn_cl_op sn_cl_ops_more[];
extern const int sn_cl_n_ops_more;
extern const sn_cl_op sn_cl_ops_attn[];
extern const int sn_cl_n_ops_attn;

bool sn_cl_ok_any(const sn_node *n);

#endif
