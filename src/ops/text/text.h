/* The text family (src/ops/text/): the kernels of strings.c, named by the
 * family's table (text.c). Private to src/ops/text. */
#ifndef SN_OPS_TEXT_H
#define SN_OPS_TEXT_H

#include "ops/kit.h"

/* strings.c: StringConcat, StringSplit, RegexFullMatch */
int text_strconcat_infer(sn_infer_ctx *c);
int text_strconcat_run(sn_kctx *c);
int text_strsplit_infer(sn_infer_ctx *c);
int text_strsplit_run(sn_kctx *c);
int text_regex_infer(sn_infer_ctx *c);
int text_regex_prepare(sn_prep_ctx *c);
int text_regex_run(sn_kctx *c);
void text_regex_free(void *state);

#endif
