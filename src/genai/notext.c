/* A build without the tokenizer's libraries (PCRE2, utf8proc, cJSON: the
 * AArch64 cross build, or a machine without scripts/deps.sh's packages)
 * leaves src/genai/{tokenizer,template,generate}*.c out; the public
 * generator then says why instead of failing to link. */
#ifndef SNUG_HAVE_TOKENIZER
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "genai/sampler.h"

static const char k_why[] = "this build of snug has no tokenizer (PCRE2, utf8proc and cJSON were not found when it "
                            "was configured; scripts/deps.sh installs them)";

int snug_generator_create(const char *model_dir, const snug_generator_config *cfg, snug_generator **out,
                          char *err, size_t err_cap) {
    (void)model_dir, (void)cfg;
    *out = NULL;
    if (err && err_cap)
        snprintf(err, err_cap, "%s", k_why);
    return SNUG_ERR_UNSUPPORTED;
}
void snug_generator_free(snug_generator *g) { (void)g; }
int snug_generator_has_chat_template(const snug_generator *g) {
    (void)g;
    return 0;
}
const char *snug_generator_chat_template_error(const snug_generator *g) {
    (void)g;
    return NULL;
}
const char *snug_generator_error(const snug_generator *g) {
    (void)g;
    return k_why;
}
void snug_sampling_defaults(snug_sampling *s) {
    sn_sampler_params d = sn_sampler_defaults();
    *s = (snug_sampling){d.temperature, d.top_k, d.top_p, d.min_p, d.repeat_penalty, d.seed, 0, NULL, 0};
}
int snug_generator_chat(snug_generator *g, const snug_message *msgs, int n, const snug_sampling *s,
                        snug_text_fn fn, void *user, snug_generation *out) {
    (void)g, (void)msgs, (void)n, (void)s, (void)fn, (void)user, (void)out;
    return SNUG_ERR_UNSUPPORTED;
}
int snug_generator_complete(snug_generator *g, const char *text, const snug_sampling *s, snug_text_fn fn,
                            void *user, snug_generation *out) {
    (void)g, (void)text, (void)s, (void)fn, (void)user, (void)out;
    return SNUG_ERR_UNSUPPORTED;
}
void snug_generator_reset(snug_generator *g) { (void)g; }
int64_t snug_generator_answer_ids(const snug_generator *g, const int32_t **ids) {
    (void)g;
    *ids = NULL;
    return 0;
}
void snug_generator_stream_stats(const snug_generator *g, snug_stream_stats *out) {
    (void)g;
    memset(out, 0, sizeof *out);
}
void snug_generator_runs_get(const snug_generator *g, snug_generator_runs *out) {
    (void)g;
    memset(out, 0, sizeof *out);
}
const snug_session *snug_generator_session(const snug_generator *g) {
    (void)g;
    return NULL;
}
#else
typedef int sn_notext_unused; /* ISO C wants a translation unit to declare something */
#endif
