#include "ops/op.h"

const sn_op_def sn_ops_matmul[] = {
    {0},
};
