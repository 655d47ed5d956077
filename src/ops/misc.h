/* Kernels of the misc family that live in src/ops/misc_*.c; the family's
 * table is in misc.c. */
#ifndef SN_OPS_MISC_H
#define SN_OPS_MISC_H

#include "ops/kit.h"

/* misc_text.c */
int sn_strnorm_infer(sn_infer_ctx *c);
int sn_strnorm_run(sn_kctx *c);
int sn_tfidf_infer(sn_infer_ctx *c);
int sn_tfidf_run(sn_kctx *c);

/* misc_train.c (domain ai.onnx.preview.training) */
int sn_adagrad_infer(sn_infer_ctx *c);
int sn_adagrad_run(sn_kctx *c);
int sn_adam_infer(sn_infer_ctx *c);
int sn_adam_run(sn_kctx *c);
int sn_momentum_infer(sn_infer_ctx *c);
int sn_momentum_run(sn_kctx *c);

/* misc_random.c */
int sn_random_prepare(sn_prep_ctx *c);
void sn_random_free(void *state);
int sn_bernoulli_infer(sn_infer_ctx *c);
int sn_bernoulli_run(sn_kctx *c);
int sn_rand_uniform_infer(sn_infer_ctx *c);
int sn_rand_uniform_run(sn_kctx *c);
int sn_rand_uniform_like_infer(sn_infer_ctx *c);
int sn_rand_normal_run(sn_kctx *c);
int sn_multinomial_infer(sn_infer_ctx *c);
int sn_multinomial_run(sn_kctx *c);

#endif
