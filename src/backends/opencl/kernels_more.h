/* The kernels of kernels_more.cl (their host side: kernels_more.c). */
#ifndef SN_BACKENDS_OPENCL_KERNELS_MORE_H
#define SN_BACKENDS_OPENCL_KERNELS_MORE_H

#define SN_CL_KERNELS_MORE(X)                                                                               \
    X(pow_) X(max_) X(min_) X(abs_) X(relu) X(cos_) X(sin_) X(log_) X(floor_) X(ceil_) X(bool_binary) X(not_) \
    X(cast_) X(reduce_rows) X(reduce_cols) X(gemm)

#endif
