/* Chat templates (src/genai/template*.c) on small templates with expected
 * renders worked out by hand from jinja2's rules (trim_blocks and
 * lstrip_blocks on, as transformers renders), the errors of templates snug
 * must refuse (unsupported tags and filters, unclosed blocks, syntax errors)
 * and of renders that fail (raise_exception, undefined values used),
 * sn_chat_config_load on model folders this test writes, and every
 * allocation failing in turn. tests/models/check_template.py compares real
 * templates against jinja2 itself. Exit 77 when snug was built without the
 * template's libraries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "genai/template.h"

#ifndef SNUG_HAVE_TOKENIZER
int main(void) {
    printf("snug was built without PCRE2, utf8proc or cJSON: no chat templates to test (skipped)\n");
    return 77;
}
#else

static int failures;
#define CHECK(c, ...)                                                                      \
    do {                                                                                   \
        if (!(c)) {                                                                        \
            fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fputc('\n', stderr);                                                           \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

static const sn_chat_msg CONV[] = {
    {"system", "Be brief."},
    {"user", "Hi \"there\"\nfriend"},
    {"assistant", "Hello."},
    {"user", "Bye"},
};

/* Renders src on CONV (n messages); returns the status, *out the text or
 * the message. */
static int render(const char *src, int n, bool agp, const char *extra, char *out, size_t cap) {
    sn_template *t = NULL;
    sn_err err = {0};
    char *text = NULL;
    size_t len = 0;
    sn_template_vars vars = {.bos_token = "<s>", .eos_token = "</s>", .add_generation_prompt = agp,
                             .extra_json = extra};
    int rc = sn_template_parse(src, strlen(src), NULL, &t, &err);
    if (rc == SNUG_OK)
        rc = sn_template_render(t, CONV, n, &vars, &text, &len, &err);
    snprintf(out, cap, "%s", rc == SNUG_OK ? text : err.msg);
    if (rc == SNUG_OK)
        CHECK(strlen(text) == len, "render length %zu, strlen %zu", len, strlen(text));
    sn_free(text);
    sn_template_free(t);
    return rc;
}

static void expect(const char *src, int n, bool agp, const char *extra, const char *want) {
    char got[4096];
    int rc = render(src, n, agp, extra, got, sizeof got);
    CHECK(rc == SNUG_OK && strcmp(got, want) == 0, "template %s\n  want %s\n  got (%d) %s", src, want, rc, got);
}

/* Fails with status code and a message containing each of the NULL-ended
 * fragments. */
static void expect_err(const char *src, int code, const char *frag1, const char *frag2) {
    char got[4096];
    int rc = render(src, 4, false, NULL, got, sizeof got);
    CHECK(rc == code && strstr(got, frag1) && (!frag2 || strstr(got, frag2)),
          "template %s\n  want status %d with '%s' '%s'\n  got (%d) %s", src, code, frag1, frag2 ? frag2 : "", rc, got);
}

static void test_renders(void) {
    /* SmolLM2's template shape: a loop over messages with string concatenation */
    const char *chatml = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
                         "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
    expect(chatml, 2, true, NULL,
           "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi \"there\"\nfriend<|im_end|>\n<|im_start|>assistant\n");
    expect(chatml, 0, false, NULL, "");
    /* trim_blocks eats the newline after a block tag, lstrip_blocks the
     * indentation before one; "-" strips all whitespace on its side, "+"
     * keeps it; one newline at the end of the template goes */
    expect("a\n  {% if true %}\n  b\n  {% endif %}\nc\n", 0, false, NULL, "a\n  b\nc");
    expect("  {%- if true -%}  x  {%- endif -%}  \n  {%+ if true %}y{% endif +%}\nz", 0, false, NULL, "xy\nz");
    expect("{# note #}\n  {# indented #}\nx {#- strip -#} y", 0, false, NULL, "xy");
    expect("{{ 'v' }}  \n{{- 'w' }}", 0, false, NULL, "vw");
    expect("{% raw %}{{ kept }}{% endraw %}", 0, false, NULL, "{{ kept }}");
    /* loops */
    expect("{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}"
           "{{ loop.length }},{% endfor %}", 2, false, NULL, "102TrueFalse2,211FalseTrue2,");
    expect("{% for m in messages if m.role == 'user' %}{{ m.content[:2] }}/{{ loop.length }} {% else %}none{% endfor %}",
           4, false, NULL, "Hi/2 By/2 ");
    expect("{% for m in [] %}x{% else %}empty{% endfor %}", 0, false, NULL, "empty");
    expect("{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}{{ i }}"
           "{% endfor %}", 0, false, NULL, "02");
    expect("{% for k, v in {'a': 1, 'b': [2]}.items() %}{{ k }}={{ v }};{% endfor %}", 0, false, NULL, "a=1;b=[2];");
    /* scoping: a set in a loop lasts one pass; a namespace outlives it */
    expect("{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = x + 10 %}{{ x }} {% endfor %}{{ x }}", 0, false, NULL,
           "111 111 1");
    expect("{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + m.content|length %}{% endfor %}"
           "{{ ns.n }}", 2, false, NULL, "26");
    expect("{% set b %}[{{ 1 + 1 }}]{% endset %}{{ b }}{{ b|length }}", 0, false, NULL, "[2]3");
    expect("{% macro tag(name, body='-') %}<{{ name }}>{{ body }}</{{ name }}>{% endmacro %}{{ tag('a') }}{{ tag('b', body=2) }}",
           0, false, NULL, "<a>-</a><b>2</b>");
    /* values print as Python prints them */
    expect("{{ 1/2 }} {{ 7//2 }} {{ -7 % 3 }} {{ 1e20 }} {{ 0.1 + 0.2 }} {{ 2 ** 10 }} {{ none }} {{ true }}", 0, false,
           NULL, "0.5 3 2 1e+20 0.30000000000000004 1024 None True");
    expect("{{ [1, 'a', none, 2.0] }} {{ {'k': \"it's\"} }} {{ (1,) }} {{ range(3) }}", 0, false, NULL,
           "[1, 'a', None, 2.0] {'k': \"it's\"} (1,) range(0, 3)");
    /* strings: code points, slices, methods, filters */
    expect("{{ 'h\\u00e9llo'[1] }}{{ 'abc'[::-1] }}{{ 'h\xc3\xa9llo'|length }}{{ '  x '.strip() }}{{ 'a,b'.split(',') }}",
           0, false, NULL, "\xc3\xa9" "cba5x['a', 'b']");
    expect("{{ 'hello world'|title }} {{ 'aBc'|upper }} {{ 'aBc'|lower }} {{ 'aBc'|capitalize }} {{ 'a-b'|replace('-', '+') }}"
           " {{ '  t  '|trim }} {{ ['x', 'y']|join(', ') }} {{ 'ab'.startswith('a') }}", 0, false, NULL,
           "Hello World ABC abc Abc a+b t x, y True");
    expect("{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|list|length }}"
           "{{ messages|map(attribute='role')|first }}{{ (messages|last).role }}", 4, false, NULL, "2systemuser");
    expect("{{ {'b': 1, 'a': [true, none, 'x\"\\n']}|tojson }}|{{ {'a': []}|tojson(indent=2) }}", 0, false, NULL,
           "{\"b\": 1, \"a\": [true, null, \"x\\\"\\n\"]}|{\n  \"a\": []\n}");
    /* undefined: prints empty, is falsy, default fills it */
    expect("[{{ nothing }}]{{ nothing is defined }}{{ nothing|default('d') }}{{ not nothing }}{{ messages[9] }}{{ d.x }}",
           1, false, "{\"d\": {}}", "[]FalsedTrue");
    /* the context: tokens, add_generation_prompt, tools/documents None,
     * extra variables (with an int and a float kept apart) */
    expect("{{ bos_token }}{{ eos_token }}{{ add_generation_prompt }}{{ tools }}{{ documents is none }}{{ n }}{{ f }}{{ x.y[1] }}",
           0, true, "{\"n\": 3, \"f\": 3.0, \"x\": {\"y\": [1, \"\\u00e9\"]}}", "<s></s>TrueNoneTrue33.0\xc3\xa9");
    expect("{{ messages[0].content }}", 4, false, "{\"messages\": [{\"role\": \"user\", \"content\": \"from json\"}]}",
           "from json");
    expect("{% if x is mapping and y is string and z is number and w is iterable %}ok{% endif %}", 0, false,
           "{\"x\": {}, \"y\": \"s\", \"z\": 1.5, \"w\": [1]}", "ok");
    expect("{% generation %}kept{% endgeneration %}", 0, false, NULL, "kept");
}

static void test_errors(void) {
    /* refused when parsed, naming the construct and its line */
    expect_err("ok\n{% include 'x.jinja' %}", SNUG_ERR_UNSUPPORTED, "line 2", "'include' tag is not supported");
    expect_err("{% for m in messages %}\n{{ m }}\n", SNUG_ERR_PARSE, "'for' block opened on line 1 is never closed", "endfor");
    expect_err("{% if x %}a{% endfor %}", SNUG_ERR_PARSE, "unexpected 'endfor' inside the 'if' block", NULL);
    expect_err("{{ x|wordwrap }}", SNUG_ERR_UNSUPPORTED, "filter 'wordwrap' is not supported", NULL);
    expect_err("{{ x is divisible }}", SNUG_ERR_UNSUPPORTED, "test 'divisible' is not supported", NULL);
    expect_err("\n\n{{ foo( }}", SNUG_ERR_PARSE, "line 3", "unexpected '}', expected ')'");
    expect_err("{% frobnicate %}", SNUG_ERR_PARSE, "unknown tag 'frobnicate'", NULL);
    expect_err("{{ 'unterminated }}", SNUG_ERR_PARSE, "unterminated string", NULL);
    expect_err("{# never closed", SNUG_ERR_PARSE, "missing end of comment", NULL);
    expect_err("{% for x in y recursive %}{% endfor %}", SNUG_ERR_UNSUPPORTED, "recursive", NULL);
    /* refused when rendered */
    expect_err("{% if messages[1].role != 'assistant' %}\n{{ raise_exception('Roles must alternate!') }}{% endif %}",
               SNUG_ERR_INVALID_ARG, "line 2", "raise_exception: Roles must alternate!");
    expect_err("{{ nothing.attr }}", SNUG_ERR_TYPE, "'nothing' is undefined", NULL);
    expect_err("{{ nothing + 1 }}", SNUG_ERR_TYPE, "'nothing' is undefined", NULL);
    expect_err("{{ 'a' + 1 }}", SNUG_ERR_TYPE, "unsupported operand", NULL);
    expect_err("{{ messages|selectattr('role') }}", SNUG_ERR_UNSUPPORTED, "printing a generator", NULL);
    expect_err("{{ 'x'.format(1) }}", SNUG_ERR_UNSUPPORTED, "str method 'format'", NULL);
    expect_err("{{ '\xc3\x9f'|upper }}", SNUG_ERR_UNSUPPORTED, "U+00DF", NULL);
    expect_err("{% break %}", SNUG_ERR_PARSE, "outside a loop", NULL);
    expect_err("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", SNUG_ERR_UNSUPPORTED, "nested more than", NULL);
    expect_err("{{ 9223372036854775807 + 1 }}", SNUG_ERR_UNSUPPORTED, "beyond 64 bits", NULL);
    expect_err("{{ range(1000000) }}", SNUG_ERR_TYPE, "Range too big", NULL);
    /* bad input */
    char got[1024];
    CHECK(render("{{ x }}", 0, false, "[1]", got, sizeof got) == SNUG_ERR_INVALID_ARG, "extra not an object: %s", got);
    CHECK(render("{{ x }}", 0, false, "{\"x\": ", got, sizeof got) == SNUG_ERR_PARSE, "bad extra JSON: %s", got);
    sn_template *t = NULL;
    sn_err err = {0};
    CHECK(sn_template_parse("\xff", 1, "bad.jinja", &t, &err) == SNUG_ERR_PARSE && !t && strstr(err.msg, "bad.jinja"),
          "invalid UTF-8 template: %s", err.msg);
}

/* ---- model folders ---- */

static char dir[64];

static void write_file(const char *name, const char *text) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    fputs(text, f);
    fclose(f);
}

static void remove_file(const char *name) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unlink(path);
}

static void test_config(void) {
    sn_chat_config cfg;
    sn_err err = {0};
    CHECK(sn_chat_config_load(dir, &cfg, &err) == SNUG_OK && !cfg.template && !cfg.bos_token, "empty folder: %s", err.msg);
    sn_chat_config_free(&cfg);

    write_file("tokenizer_config.json",
               "{\"bos_token\": \"<s>\", \"eos_token\": {\"__type\": \"AddedToken\", \"content\": \"</s>\", \"lstrip\": false},"
               " \"chat_template\": \"{{ bos_token }}\\u00e9\"}");
    CHECK(sn_chat_config_load(dir, &cfg, &err) == SNUG_OK && cfg.template && !strcmp(cfg.template, "{{ bos_token }}\xc3\xa9") &&
              cfg.template_len == 17 && !strcmp(cfg.bos_token, "<s>") && !strcmp(cfg.eos_token, "</s>") &&
              strstr(cfg.source, "tokenizer_config.json"),
          "string template: %s", err.msg);
    sn_chat_config_free(&cfg);

    write_file("tokenizer_config.json",
               "{\"bos_token\": null, \"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T\"},"
               " {\"name\": \"default\", \"template\": \"D\"}]}");
    CHECK(sn_chat_config_load(dir, &cfg, &err) == SNUG_OK && cfg.template && !strcmp(cfg.template, "D") && !cfg.bos_token,
          "named templates: %s", err.msg);
    sn_chat_config_free(&cfg);

    write_file("chat_template.jinja", "J\n");
    CHECK(sn_chat_config_load(dir, &cfg, &err) == SNUG_OK && cfg.template && !strcmp(cfg.template, "J\n") &&
              strstr(cfg.source, "chat_template.jinja"),
          "chat_template.jinja first: %s", err.msg);
    sn_chat_config_free(&cfg);
    remove_file("chat_template.jinja");

    write_file("tokenizer_config.json", "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T\"}]}");
    CHECK(sn_chat_config_load(dir, &cfg, &err) == SNUG_ERR_UNSUPPORTED && strstr(err.msg, "default"), "no default: %s",
          err.msg);
    write_file("tokenizer_config.json", "{\"chat_template\": ");
    CHECK(sn_chat_config_load(dir, &cfg, &err) == SNUG_ERR_PARSE && strstr(err.msg, "tokenizer_config.json"),
          "bad JSON: %s", err.msg);
    CHECK(!cfg.template && !cfg.source, "a failed load leaves nothing");
    remove_file("tokenizer_config.json");
}

/* ---- allocation failures ---- */

static long budget = -1, live;

static void *f_malloc(void *u, size_t n) {
    (void)u;
    if (budget == 0)
        return NULL;
    if (budget > 0)
        budget--;
    char *p = malloc(n + 16);
    if (!p)
        return NULL;
    live++;
    return p + 16;
}

static void *f_realloc(void *u, void *q, size_t n) {
    if (!q)
        return f_malloc(u, n);
    if (budget == 0)
        return NULL;
    if (budget > 0)
        budget--;
    char *p = realloc((char *)q - 16, n + 16);
    return p ? p + 16 : NULL;
}

static void f_free(void *u, void *q) {
    (void)u;
    if (q) {
        live--;
        free((char *)q - 16);
    }
}

/* Parse and render with the k-th allocation failing, for every k until
 * none fails: SNUG_OK or SNUG_ERR_OOM each time, nothing left allocated. */
static void test_oom(void) {
    const char *src = "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
                      "{{ '<|' ~ m.role ~ '|>' + m.content|trim }}{{ m|tojson }}{% endfor %}{{ ns.n }}{{ x|list }}";
    snug_allocator a = {f_malloc, f_realloc, f_free, NULL};
    snug_set_allocator(&a);
    long k;
    for (k = 0; k < 100000; k++) {
        budget = k;
        live = 0;
        sn_err err = {0};
        sn_template *t = NULL;
        char *out = NULL;
        size_t len = 0;
        sn_template_vars vars = {.extra_json = "{\"x\": [1, 2, {\"y\": \"z\"}]}"};
        int rc = sn_template_parse(src, strlen(src), NULL, &t, &err);
        if (rc == SNUG_OK)
            rc = sn_template_render(t, CONV, 4, &vars, &out, &len, &err);
        bool done = rc == SNUG_OK && budget > 0;
        CHECK(rc == SNUG_OK || rc == SNUG_ERR_OOM, "allocation %ld failing: status %d (%s)", k, rc, err.msg);
        sn_free(out);
        sn_template_free(t);
        CHECK(live == 0, "allocation %ld failing: %ld blocks leaked", k, live);
        if (done || failures)
            break;
    }
    snug_set_allocator(NULL);
    printf("allocation failures: %ld failure points checked\n", k);
}

/* A string that doubles each pass outgrows the caller's max_bytes (and,
 * by default, 16 MiB): an error naming the template, not memory spent. */
static void test_limits(void) {
    const char *src = "{% set s = namespace(v='ab') %}{% for i in range(40) %}{% set s.v = s.v ~ s.v %}{% endfor %}"
                      "{{ s.v|length }}";
    for (int pass = 0; pass < 2; pass++) {
        sn_template *t = NULL;
        sn_err err = {0};
        char *out = NULL;
        size_t len = 0;
        sn_template_vars vars = {.max_bytes = pass ? 4096 : 0};
        CHECK(sn_template_parse(src, strlen(src), "doubling", &t, &err) == SNUG_OK, "parse: %s", err.msg);
        int rc = sn_template_render(t, CONV, 4, &vars, &out, &len, &err);
        char want[64];
        snprintf(want, sizeof want, "exceed %zu bytes", pass ? (size_t)4096 : (size_t)16 << 20);
        CHECK(rc == SNUG_ERR_RANGE && strstr(err.msg, "doubling") && strstr(err.msg, want),
              "max_bytes %d: status %d (%s)", pass ? 4096 : 0, rc, err.msg);
        sn_free(out);
        sn_template_free(t);
    }
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/snug-test-tpl-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_renders();
    test_errors();
    test_config();
    test_oom();
    test_limits();
    rmdir(dir);
    if (failures) {
        fprintf(stderr, "test_template: %d failures\n", failures);
        return 1;
    }
    printf("test_template: ok\n");
    return 0;
}
#endif
