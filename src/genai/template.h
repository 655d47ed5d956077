/* Hugging Face chat templates: the Jinja2 strings of tokenizer_config.json's
 * "chat_template" (or chat_template.jinja), rendered byte for byte as
 * transformers' apply_chat_template renders them with jinja2 3.1.6.
 *
 * The environment mirrored is transformers 4.45 to 5.x's
 * (utils/chat_template_utils.py, _cached_compile_jinja_template):
 * ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
 * extensions=[AssistantTracker ({% generation %}), jinja2.ext.loopcontrols])
 * with the globals raise_exception(msg) and strftime_now(fmt) and the filter
 * tojson overridden by json.dumps(x, ensure_ascii=False, indent=...,
 * separators=..., sort_keys=...). The context is messages, tools and
 * documents (None unless given), add_generation_prompt and the tokenizer's
 * special tokens (bos_token, eos_token; undefined when the model has none).
 *
 * Supported: the statements for (else, an if filter, tuple targets,
 * loop.*, break/continue), if/elif/else, set (names, tuples, ns.attr, the
 * block form), macro, generation, raw, comments and whitespace control; the
 * expression language of jinja2 with the filters, tests, globals and
 * str/dict methods that chat templates use (docs/template.md lists them). A
 * construct outside that set is an error naming it and its template line,
 * at parse time where it can be seen then (an unknown tag, filter or test)
 * or at render time (an unknown method or an operation on the wrong types),
 * never a guess: the caller can then ask for another template.
 *
 * A template is immutable once parsed: renders may run on it from several
 * threads at once. */
#ifndef SN_GENAI_TEMPLATE_H
#define SN_GENAI_TEMPLATE_H

#include "core/core.h"

typedef struct sn_template sn_template;

/* One message of a conversation; both strings NUL-terminated UTF-8. */
typedef struct sn_chat_msg {
    const char *role;    /* "system", "user", "assistant", ... */
    const char *content;
} sn_chat_msg;

/* The rest of the context. */
typedef struct sn_template_vars {
    const char *bos_token; /* NULL: undefined in the template */
    const char *eos_token; /* NULL: undefined in the template */
    bool add_generation_prompt;
    /* NULL or a JSON object whose members are more context variables, as
     * apply_chat_template's **kwargs: tools, documents, date_string,
     * enable_thinking... A member named messages replaces msgs (messages
     * with tool_calls, content lists). */
    const char *extra_json;
    /* The most bytes any string the template builds may take, its output
     * included (0: 16 MiB); more is an error naming the template. */
    size_t max_bytes;
} sn_template_vars;

/* Parses len bytes of template source. name (NULL: "chat template") starts
 * every message: "chat template line 12: unknown filter 'wordwrap'". Syntax
 * errors are SNUG_ERR_PARSE, constructs snug does not render
 * SNUG_ERR_UNSUPPORTED. */
int sn_template_parse(const char *src, size_t len, const char *name, sn_template **out,
                      sn_err *err);
void sn_template_free(sn_template *t); /* accepts NULL */

/* Renders n messages. *out (owned by the caller, sn_free; NUL-terminated)
 * gets *out_len bytes. The template's raise_exception('msg') is
 * SNUG_ERR_INVALID_ARG with "...: raise_exception: msg" (the conversation
 * does not suit the template); what the template does that snug does not
 * render is SNUG_ERR_UNSUPPORTED; a template error jinja2 would raise too
 * (an undefined value used, a type error) is SNUG_ERR_TYPE. vars may be
 * NULL. */
int sn_template_render(const sn_template *t, const sn_chat_msg *msgs, int n,
                       const sn_template_vars *vars, char **out, size_t *out_len, sn_err *err);

/* What a model folder says about its chat template. */
typedef struct sn_chat_config {
    char *template; /* owned: the template source; NULL when the model has none */
    size_t template_len;
    char *source;    /* owned: where it came from, for messages ("DIR/chat_template.jinja") */
    char *bos_token; /* owned: NULL when tokenizer_config.json has none */
    char *eos_token; /* owned: NULL when tokenizer_config.json has none */
} sn_chat_config;

/* Reads DIR/tokenizer_config.json (its "chat_template": a string, or a list
 * of {"name", "template"} of which "default" is taken; its bos_token and
 * eos_token: strings or AddedToken objects with "content") and
 * DIR/chat_template.jinja, which transformers 5 writes and prefers. A
 * folder with neither file, or without a template, is not an error:
 * cfg->template is NULL. A file that is there and malformed is. */
int sn_chat_config_load(const char *dir, sn_chat_config *cfg, sn_err *err);
void sn_chat_config_free(sn_chat_config *cfg); /* accepts NULL; zeroes it */

#endif
