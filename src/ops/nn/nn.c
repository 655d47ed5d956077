/* The neural-network layer family's op table: convolutions, pools,
 * normalizations (Softmax among them), resizing, recurrent layers, losses,
 * detection and sampling grids. The kernels are in the files nn.h lists. */
#include "ops/nn/nn.h"
#include "ops/shape/shape_util.h" /* sk_ws_free: Resize's state */

const sn_op_def sn_ops_nn[] = {
    /* conv.c */
    {.domain = "", .name = "Conv", .since_version = 1, .required = 0x3, .infer = nn_conv_infer, .estimate = nn_conv_estimate,
     .cpu = {.prepare = nn_conv_prepare, .run = nn_conv_run}},
    {.domain = "", .name = "ConvTranspose", .since_version = 1, .required = 0x3, .infer = nn_convt_infer, .estimate = nn_convt_estimate,
     .cpu = {.prepare = nn_convt_prepare, .run = nn_convt_run}},
    {.domain = "", .name = "ConvInteger", .since_version = 10, .required = 0x3, .infer = nn_convint_infer, .cpu = {.run = nn_convint_run}},
    {.domain = "", .name = "QLinearConv", .since_version = 10, .required = 0xff, .infer = nn_qlconv_infer, .cpu = {.run = nn_qlconv_run}},
    /* pool.c */
    {.domain = "", .name = "AveragePool", .since_version = 1, .infer = nn_avgpool_infer, .cpu = {.run = nn_avgpool_run}},
    {.domain = "", .name = "MaxPool", .since_version = 1, .infer = nn_maxpool_infer, .cpu = {.run = nn_maxpool_run}},
    {.domain = "", .name = "LpPool", .since_version = 1, .infer = nn_lppool_infer, .cpu = {.run = nn_lppool_run}},
    {.domain = "", .name = "GlobalAveragePool", .since_version = 1, .infer = nn_gavg_infer, .cpu = {.run = nn_gavg_run}},
    {.domain = "", .name = "GlobalMaxPool", .since_version = 1, .infer = nn_gmax_infer, .cpu = {.run = nn_gmax_run}},
    {.domain = "", .name = "GlobalLpPool", .since_version = 1, .infer = nn_glp_infer, .cpu = {.run = nn_glp_run}},
    {.domain = "", .name = "MaxUnpool", .since_version = 9, .required = 0x3, .infer = nn_unpool_infer, .cpu = {.run = nn_unpool_run}},
    /* norm.c */
    {.domain = "", .name = "Softmax", .since_version = 1, .infer = nn_smx_infer, .flags = SN_OP_INPLACE0, .estimate = nn_smx_estimate,
     .cpu = {.prepare = nn_smx_prepare, .run = nn_smx_run}},
    {.domain = "", .name = "LogSoftmax", .since_version = 1, .infer = nn_smx_infer, .flags = SN_OP_INPLACE0, .estimate = nn_smx_estimate,
     .cpu = {.prepare = nn_smx_prepare, .run = nn_smx_run}},
    {.domain = "", .name = "Hardmax", .since_version = 1, .infer = nn_smx_infer, .flags = SN_OP_INPLACE0, .estimate = nn_smx_estimate,
     .cpu = {.prepare = nn_smx_prepare, .run = nn_smx_run}},
    {.domain = "", .name = "BatchNormalization", .since_version = 1, .required = 0x1f, .infer = nn_bn_infer, .flags = SN_OP_INPLACE0, .estimate = nn_bn_estimate,
     .cpu = {.prepare = nn_bn_prepare, .run = nn_bn_run}},
    {.domain = "", .name = "InstanceNormalization", .since_version = 1, .required = 0x7, .infer = nn_in_infer, .flags = SN_OP_INPLACE0, .estimate = nn_chan_estimate,
     .cpu = {.prepare = nn_chan_prepare, .run = nn_in_run}},
    {.domain = "", .name = "LayerNormalization", .since_version = 17, .required = 0x3, .infer = nn_ln_infer, .flags = SN_OP_INPLACE0,
     .cpu = {.run = nn_ln_run}},
    {.domain = "", .name = "GroupNormalization", .since_version = 18, .required = 0x7, .infer = nn_gn_infer, .flags = SN_OP_INPLACE0, .estimate = nn_chan_estimate,
     .cpu = {.prepare = nn_chan_prepare, .run = nn_gn_run}},
    {.domain = "", .name = "LRN", .since_version = 1, .infer = nn_lrn_infer, .cpu = {.run = nn_lrn_run}},
    {.domain = "", .name = "LpNormalization", .since_version = 1, .infer = nn_lpnorm_infer, .cpu = {.run = nn_lpnorm_run}},
    /* resize.c */
    {.domain = "", .name = "Resize", .since_version = 10, .infer = nn_resize_infer, .estimate = nn_resize_estimate,
     .cpu = {.prepare = nn_resize_prepare, .run = nn_resize_run, .free_state = sk_ws_free}},
    {.domain = "", .name = "Upsample", .since_version = 7, .infer = nn_resize_infer, .estimate = nn_resize_estimate,
     .cpu = {.prepare = nn_resize_prepare, .run = nn_resize_run, .free_state = sk_ws_free}},
    /* rnn.c */
    /* The opsets differ only by attributes that default to the old behaviour
     * (layout 14, linear_before_reset 3, output_sequence gone in 7), so one def
     * per op serves all. */
    {.domain = "", .name = "RNN", .since_version = 1, .required = 0x7, .flags = SN_OP_OUTPUTS_OPTIONAL, .infer = nn_rnn_infer_simple,
     .cpu = {.prepare = nn_rnn_prepare_simple, .run = nn_rnn_run_simple}},
    {.domain = "", .name = "GRU", .since_version = 1, .required = 0x7, .flags = SN_OP_OUTPUTS_OPTIONAL, .infer = nn_rnn_infer_gru,
     .cpu = {.prepare = nn_rnn_prepare_gru, .run = nn_rnn_run_gru}},
    {.domain = "", .name = "LSTM", .since_version = 1, .required = 0x7, .flags = SN_OP_OUTPUTS_OPTIONAL, .infer = nn_rnn_infer_lstm,
     .cpu = {.prepare = nn_rnn_prepare_lstm, .run = nn_rnn_run_lstm}},
    /* loss.c */
    {.domain = "", .name = "NegativeLogLikelihoodLoss", .since_version = 12, .required = 0x3, .infer = nn_loss_infer,
     .cpu = {.run = nn_loss_run}},
    {.domain = "", .name = "SoftmaxCrossEntropyLoss", .since_version = 12, .required = 0x3, .infer = nn_loss_infer,
     .cpu = {.run = nn_loss_run}},
    /* detection.c */
    {.domain = "", .name = "NonMaxSuppression", .since_version = 10, .required = 0x3, .infer = nn_nms_infer, .flags = SN_OP_ALLOCS_OUTPUTS,
     .cpu = {.prepare = nn_nms_prepare, .run = nn_nms_run}},
    {.domain = "", .name = "RoiAlign", .since_version = 10, .required = 0x7, .infer = nn_roialign_infer, .cpu = {.run = nn_roialign_run}},
    /* grid.c */
    {.domain = "", .name = "GridSample", .since_version = 16, .required = 0x3, .infer = nn_gridsample_infer,
     .cpu = {.run = nn_gridsample_run}},
    {.domain = "", .name = "AffineGrid", .since_version = 20, .required = 0x3, .infer = nn_affg_infer, .cpu = {.run = nn_affg_run}},
    /* col2im.c */
    {.domain = "", .name = "Col2Im", .since_version = 18, .required = 0x7, .infer = nn_c2i_infer, .cpu = {.run = nn_c2i_run}},
    /* deformconv.c */
    {.domain = "", .name = "DeformConv", .since_version = 19, .required = 0x7, .infer = nn_dfc_infer, .cpu = {.run = nn_dfc_run}},
    {0},
};
