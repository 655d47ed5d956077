#include "ops/op.h"

const sn_op_def sn_ops_rnn[] = {
    {0},
};
