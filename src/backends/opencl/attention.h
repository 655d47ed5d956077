/* The kernels of attention.cl (their host side: attention.c). */
#ifndef SN_BACKENDS_OPENCL_ATTENTION_H
#define SN_BACKENDS_OPENCL_ATTENTION_H

#define SN_CL_KERNELS_ATTN(X) X(gqa_past) X(gqa_kv) X(gqa_attend) X(rope)

#endif
