/* The neural-network layer family (src/ops/nn/): the kernels its table
 * (nn.c) names, file by file, and the window geometry convolutions and
 * pools share. Private to src/ops/nn. */
#ifndef SN_OPS_NN_H
#define SN_OPS_NN_H

#include "ops/kit.h"

/* conv.c: Conv, ConvTranspose, ConvInteger, QLinearConv */
int nn_conv_infer(sn_infer_ctx *c);
size_t nn_conv_estimate(const sn_infer_ctx *c);
int nn_conv_prepare(sn_prep_ctx *c);
int nn_conv_run(sn_kctx *c);
int nn_convt_infer(sn_infer_ctx *c);
size_t nn_convt_estimate(const sn_infer_ctx *c);
int nn_convt_prepare(sn_prep_ctx *c);
int nn_convt_run(sn_kctx *c);
int nn_convint_infer(sn_infer_ctx *c);
int nn_convint_run(sn_kctx *c);
int nn_qlconv_infer(sn_infer_ctx *c);
int nn_qlconv_run(sn_kctx *c);

/* pool.c: AveragePool, MaxPool, LpPool, GlobalAveragePool, GlobalMaxPool, GlobalLpPool, MaxUnpool */
int nn_avgpool_infer(sn_infer_ctx *c);
int nn_avgpool_run(sn_kctx *c);
int nn_maxpool_infer(sn_infer_ctx *c);
int nn_maxpool_run(sn_kctx *c);
int nn_lppool_infer(sn_infer_ctx *c);
int nn_lppool_run(sn_kctx *c);
int nn_gavg_infer(sn_infer_ctx *c);
int nn_gavg_run(sn_kctx *c);
int nn_gmax_infer(sn_infer_ctx *c);
int nn_gmax_run(sn_kctx *c);
int nn_glp_infer(sn_infer_ctx *c);
int nn_glp_run(sn_kctx *c);
int nn_unpool_infer(sn_infer_ctx *c);
int nn_unpool_run(sn_kctx *c);

/* norm.c: Softmax, LogSoftmax, Hardmax, BatchNormalization, InstanceNormalization,
 * LayerNormalization, GroupNormalization, LRN, LpNormalization */
int nn_smx_infer(sn_infer_ctx *c);
size_t nn_smx_estimate(const sn_infer_ctx *c);
int nn_smx_prepare(sn_prep_ctx *c);
int nn_smx_run(sn_kctx *c);
int nn_bn_infer(sn_infer_ctx *c);
size_t nn_bn_estimate(const sn_infer_ctx *c);
int nn_bn_prepare(sn_prep_ctx *c);
int nn_bn_run(sn_kctx *c);
int nn_in_infer(sn_infer_ctx *c);
size_t nn_chan_estimate(const sn_infer_ctx *c);
int nn_chan_prepare(sn_prep_ctx *c);
int nn_in_run(sn_kctx *c);
int nn_ln_infer(sn_infer_ctx *c);
int nn_ln_run(sn_kctx *c);
int nn_gn_infer(sn_infer_ctx *c);
int nn_gn_run(sn_kctx *c);
int nn_lrn_infer(sn_infer_ctx *c);
int nn_lrn_run(sn_kctx *c);
int nn_lpnorm_infer(sn_infer_ctx *c);
int nn_lpnorm_run(sn_kctx *c);

/* resize.c: Resize, Upsample */
int nn_resize_infer(sn_infer_ctx *c);
size_t nn_resize_estimate(const sn_infer_ctx *c);
int nn_resize_prepare(sn_prep_ctx *c);
int nn_resize_run(sn_kctx *c);

/* rnn.c: RNN, GRU, LSTM */
int nn_rnn_infer_simple(sn_infer_ctx *c);
int nn_rnn_prepare_simple(sn_prep_ctx *c);
int nn_rnn_run_simple(sn_kctx *c);
int nn_rnn_infer_gru(sn_infer_ctx *c);
int nn_rnn_prepare_gru(sn_prep_ctx *c);
int nn_rnn_run_gru(sn_kctx *c);
int nn_rnn_infer_lstm(sn_infer_ctx *c);
int nn_rnn_prepare_lstm(sn_prep_ctx *c);
int nn_rnn_run_lstm(sn_kctx *c);

/* loss.c: NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss */
int nn_loss_infer(sn_infer_ctx *c);
int nn_loss_run(sn_kctx *c);

/* detection.c: NonMaxSuppression, RoiAlign */
int nn_nms_infer(sn_infer_ctx *c);
int nn_nms_prepare(sn_prep_ctx *c);
int nn_nms_run(sn_kctx *c);
int nn_roialign_infer(sn_infer_ctx *c);
int nn_roialign_run(sn_kctx *c);

/* grid.c: GridSample, AffineGrid */
int nn_gridsample_infer(sn_infer_ctx *c);
int nn_gridsample_run(sn_kctx *c);
int nn_affg_infer(sn_infer_ctx *c);
int nn_affg_run(sn_kctx *c);

/* col2im.c: Col2Im */
int nn_c2i_infer(sn_infer_ctx *c);
int nn_c2i_run(sn_kctx *c);

/* deformconv.c: DeformConv */
int nn_dfc_infer(sn_infer_ctx *c);
int nn_dfc_run(sn_kctx *c);

/* ---- window geometry of convolutions and pools (geometry.c) ----------------- */

enum { NN_PAD_NOTSET, NN_PAD_SAME_UPPER, NN_PAD_SAME_LOWER, NN_PAD_VALID };

/* Window attributes (kernel sizes, strides, dilations, pads, group) above
 * this are refused where they are read: the geometry's sums and products
 * of them with a dim then cannot overflow int64. */
#define NN_ATTR_MAX ((int64_t)1 << 31)

typedef struct nn_geo {
    int nd;                               /* spatial dims */
    int64_t in[SN_MAX_RANK];              /* input spatial sizes */
    int64_t k[SN_MAX_RANK];               /* kernel */
    int64_t s[SN_MAX_RANK], d[SN_MAX_RANK]; /* strides, dilations */
    int64_t pb[SN_MAX_RANK], pe[SN_MAX_RANK]; /* pads begin / end */
    int64_t out[SN_MAX_RANK];
    int auto_pad;
} nn_geo;

/* Reads kernel_shape (when kshape is NULL), strides, dilations, pads and
 * auto_pad and validates them for nd spatial dims. kshape: the kernel
 * taken from the weights. */
int nn_geo_attrs(const sn_node *node, sn_err *err, int nd, const int64_t *kshape, nn_geo *g);

/* Output sizes and effective pads from input sizes (all known). ceil_mode
 * as for pooling. */
int nn_geo_output(const sn_node *node, sn_err *err, nn_geo *g, bool ceil_mode);

#endif
