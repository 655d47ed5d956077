/* snug's chat template renderer for tests/models/check_template.py: reads
 * requests from stdin, one JSON object a line, and answers each with one
 * line on stdout.
 *   {"template": "...", "messages": [{"role": "...", "content": "..."}, ...],
 *    "add_generation_prompt": true, "bos_token": "<s>" (or null), "eos_token": ...,
 *    "extra_json": "{...}" (optional: more variables, as JSON text)}
 *   -> OK <hex of the render>
 *   -> ERR <status> <message>
 * Messages go through sn_chat_msg; what else a test needs (tools, content
 * that is not a string) goes in extra_json. Also: tpl_render --dir MODEL_DIR
 * prints what sn_chat_config_load finds there (source, bos, eos, template
 * as hex). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "genai/template.h"

static void put_hex(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        printf("%02x", (unsigned char)s[i]);
}

static const char *jstr(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void answer(const char *line) {
    cJSON *req = cJSON_Parse(line);
    sn_chat_msg *msgs = NULL;
    sn_template *t = NULL;
    char *out = NULL;
    size_t len = 0;
    sn_err err = {0};
    const char *src = jstr(req, "template");
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(req, "messages");
    if (!req || !src || !cJSON_IsArray(ms)) {
        printf("ERR -1 bad request");
        goto done;
    }
    int n = cJSON_GetArraySize(ms);
    msgs = calloc((size_t)n + 1, sizeof *msgs);
    for (int i = 0; i < n; i++) {
        const cJSON *m = cJSON_GetArrayItem(ms, i);
        msgs[i].role = jstr(m, "role");
        msgs[i].content = jstr(m, "content");
    }
    sn_template_vars vars = {
        .bos_token = jstr(req, "bos_token"),
        .eos_token = jstr(req, "eos_token"),
        .add_generation_prompt = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "add_generation_prompt")),
        .extra_json = jstr(req, "extra_json"),
    };
    int rc = sn_template_parse(src, strlen(src), NULL, &t, &err);
    if (rc == SNUG_OK)
        rc = sn_template_render(t, msgs, n, &vars, &out, &len, &err);
    if (rc != SNUG_OK) {
        for (char *p = err.msg; *p; p++)
            if (*p == '\n')
                *p = ' ';
        printf("ERR %d %s", rc, err.msg);
    } else {
        printf("OK ");
        put_hex(out, len);
    }
done:
    putchar('\n');
    fflush(stdout);
    sn_free(out);
    sn_template_free(t);
    free(msgs);
    cJSON_Delete(req);
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--dir")) {
        sn_chat_config cfg;
        sn_err err = {0};
        if (sn_chat_config_load(argv[2], &cfg, &err) != SNUG_OK) {
            printf("ERR %s\n", err.msg);
            return 1;
        }
        printf("source %s\nbos %s\neos %s\ntemplate ", cfg.source ? cfg.source : "-",
               cfg.bos_token ? cfg.bos_token : "-", cfg.eos_token ? cfg.eos_token : "-");
        if (cfg.template)
            put_hex(cfg.template, cfg.template_len);
        putchar('\n');
        sn_chat_config_free(&cfg);
        return 0;
    }
    if (argc != 1) {
        fprintf(stderr, "usage: tpl_render < requests (one JSON object a line)\n       tpl_render --dir MODEL_DIR\n");
        return 2;
    }
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, stdin) > 0)
        answer(line);
    free(line);
    return 0;
}
