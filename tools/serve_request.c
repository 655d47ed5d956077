/* A completion request's body into a job (tools/serve.h). */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "serve.h"

void serve_job_free(job *j) {
    for (int i = 0; i < j->n_msgs; i++) {
        free((char *)j->msgs[i].role);
        free((char *)j->msgs[i].content);
    }
    free(j->msgs);
    free(j->prompt);
    for (int i = 0; i < j->s.n_stop; i++)
        free(j->stop[i]);
    free(j->stop);
    free(j->text);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

/* Makes s valid UTF-8 in place: a byte that starts no well-formed sequence
 * becomes '?', a sequence cut at the end (a message cut at its buffer) goes.
 * Messages quote what a client sent (a path, a method), and JSON must be
 * UTF-8 (cJSON prints bytes as they are). */
static void utf8_clean(char *s) {
    unsigned char *p = (unsigned char *)s;
    while (*p) {
        int n = *p < 0x80 ? 1 : (*p & 0xE0) == 0xC0 && *p >= 0xC2 ? 2 : (*p & 0xF0) == 0xE0 ? 3
              : (*p & 0xF8) == 0xF0 && *p <= 0xF4 ? 4 : 0;
        int k = 1;
        while (n > 1 && k < n && (p[k] & 0xC0) == 0x80)
            k++;
        bool ok = n >= 1 && k == n;
        if (ok && n == 3) /* overlong, surrogates */
            ok = !(p[0] == 0xE0 && p[1] < 0xA0) && !(p[0] == 0xED && p[1] >= 0xA0);
        if (ok && n == 4)
            ok = !(p[0] == 0xF0 && p[1] < 0x90) && !(p[0] == 0xF4 && p[1] >= 0x90);
        if (ok) {
            p += n;
        } else if (n > 1 && !p[k]) { /* cut at the end */
            *p = 0;
        } else {
            *p++ = '?';
        }
    }
}

int serve_fail(bad *b, int code, const char *param, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->msg, sizeof b->msg, fmt, ap);
    va_end(ap);
    utf8_clean(b->msg);
    b->code = code;
    b->param = param;
    b->type = code == 401 ? "authentication_error" : code >= 500 ? "server_error" : "invalid_request_error";
    return -1;
}

/* A number field within [lo, hi], or absent/null (keeps *v). */
static int num_field(const cJSON *root, const char *name, double lo, double hi, double *v, bad *b) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!x || cJSON_IsNull(x))
        return 0;
    if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble))
        return serve_fail(b, 400, name, "'%s' must be a number", name);
    if (x->valuedouble < lo || x->valuedouble > hi)
        return serve_fail(b, 400, name, "'%s' is %g; it must be from %g to %g", name, x->valuedouble, lo, hi);
    *v = x->valuedouble;
    return 0;
}

static int int_field(const cJSON *root, const char *name, double lo, double hi, int64_t *v, bad *b) {
    double d = (double)*v;
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(root, name);
    if (x && cJSON_IsNumber(x) && x->valuedouble != floor(x->valuedouble))
        return serve_fail(b, 400, name, "'%s' must be an integer", name);
    if (num_field(root, name, lo, hi, &d, b))
        return -1;
    *v = (int64_t)d;
    return 0;
}

static int bool_field(const cJSON *root, const char *name, bool *v, bad *b) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!x || cJSON_IsNull(x))
        return 0;
    if (!cJSON_IsBool(x))
        return serve_fail(b, 400, name, "'%s' must be true or false", name);
    *v = cJSON_IsTrue(x);
    return 0;
}

/* content: a string, or an array of {"type": "text", "text": ...} parts (joined). */
static char *content_text(const cJSON *c, int i, bad *b) {
    static const char *param = "messages";
    if (cJSON_IsString(c))
        return strdup(c->valuestring);
    if (cJSON_IsNull(c))
        return strdup("");
    if (!cJSON_IsArray(c)) {
        serve_fail(b, 400, param, "messages[%d].content must be a string or an array of text parts", i);
        return NULL;
    }
    size_t n = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, c) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(p, "type"), *x = cJSON_GetObjectItemCaseSensitive(p, "text");
        if (!cJSON_IsString(t) || strcmp(t->valuestring, "text") || !cJSON_IsString(x)) {
            serve_fail(b, 400, param, "messages[%d].content: only parts of type \"text\" are supported", i);
            return NULL;
        }
        n += strlen(x->valuestring);
    }
    char *s = malloc(n + 1);
    if (!s) {
        serve_fail(b, 500, NULL, "out of memory");
        return NULL;
    }
    size_t k = 0;
    cJSON_ArrayForEach(p, c) {
        const char *x = cJSON_GetObjectItemCaseSensitive(p, "text")->valuestring;
        size_t l = strlen(x);
        memcpy(s + k, x, l);
        k += l;
    }
    s[k] = 0;
    return s;
}

/* The request body of a completion into a job (sampling as OpenAI defines
 * it: temperature 1, top_p 1; top_k, min_p, repeat_penalty as llama.cpp's
 * server takes them). Fields snug does not know are ignored. */
job *serve_parse_job(const char *body, size_t n, int kind, bad *b) {
    cJSON *root = cJSON_ParseWithLength(body, n);
    if (!root) {
        serve_fail(b, 400, NULL, "the body is not valid JSON (near byte %td)",
             cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() - body : (ptrdiff_t)0);
        return NULL;
    }
    job *j = calloc(1, sizeof *j);
    if (!j) {
        cJSON_Delete(root);
        serve_fail(b, 500, NULL, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->kind = kind;
    j->slot = -1;
    j->s = (snug_sampling){.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0, .repeat_penalty = 1.0f};
    double temp = 1, top_p = 1, min_p = 0, rep = 1;
    int64_t top_k = 0, max_tokens = 0, nn = 1, seed = 0;
    const cJSON *x;
    if (!cJSON_IsObject(root)) {
        serve_fail(b, 400, NULL, "the body must be a JSON object");
        goto bad;
    }
    if (num_field(root, "temperature", 0, 2, &temp, b) || num_field(root, "top_p", 0, 1, &top_p, b) ||
        num_field(root, "min_p", 0, 1, &min_p, b) || num_field(root, "repeat_penalty", 0.01, 10, &rep, b) ||
        int_field(root, "top_k", 0, 1e9, &top_k, b) || int_field(root, "n", 1, 1e9, &nn, b) ||
        int_field(root, "seed", -9.2e18, 9.2e18, &seed, b) || bool_field(root, "stream", &j->stream, b))
        goto bad;
    bool cache = false;
    j->cache_prompt = -1;
    if ((x = cJSON_GetObjectItemCaseSensitive(root, "cache_prompt")) && !cJSON_IsNull(x)) {
        if (bool_field(root, "cache_prompt", &cache, b))
            goto bad;
        j->cache_prompt = cache;
    }
    if (int_field(root, "max_tokens", 1, 1e9, &max_tokens, b) ||
        int_field(root, "max_completion_tokens", 1, 1e9, &max_tokens, b))
        goto bad;
    if (nn != 1) {
        serve_fail(b, 400, "n", "'n' is %lld; snug answers one choice per request (n = 1)", (long long)nn);
        goto bad;
    }
    if ((x = cJSON_GetObjectItemCaseSensitive(root, "logprobs")) && cJSON_IsTrue(x)) {
        serve_fail(b, 400, "logprobs", "logprobs are not supported");
        goto bad;
    }
    if ((x = cJSON_GetObjectItemCaseSensitive(root, "tools")) && cJSON_IsArray(x) && cJSON_GetArraySize(x) > 0) {
        serve_fail(b, 400, "tools", "tools (function calling) are not supported");
        goto bad;
    }
    if ((x = cJSON_GetObjectItemCaseSensitive(root, "stream_options")) && cJSON_IsObject(x) &&
        bool_field(x, "include_usage", &j->include_usage, b))
        goto bad;
    j->s.temperature = (float)temp;
    j->s.top_p = (float)top_p;
    j->s.min_p = (float)min_p;
    j->s.repeat_penalty = (float)rep;
    j->s.top_k = (int)top_k;
    j->s.seed = (uint64_t)seed;
    j->s.max_tokens = max_tokens;
    /* stop: a string or up to 4 strings */
    if ((x = cJSON_GetObjectItemCaseSensitive(root, "stop")) && !cJSON_IsNull(x)) {
        int ns = cJSON_IsString(x) ? 1 : cJSON_IsArray(x) ? cJSON_GetArraySize(x) : -1;
        if (ns < 0 || ns > 4) {
            serve_fail(b, 400, "stop", "'stop' must be a string or an array of at most 4 strings");
            goto bad;
        }
        j->stop = calloc((size_t)ns + 1, sizeof *j->stop);
        if (!j->stop) {
            serve_fail(b, 500, NULL, "out of memory");
            goto bad;
        }
        for (int i = 0; i < ns; i++) {
            const cJSON *e = cJSON_IsString(x) ? x : cJSON_GetArrayItem(x, i);
            if (!cJSON_IsString(e) || !*e->valuestring) {
                serve_fail(b, 400, "stop", "'stop' entries must be non-empty strings");
                goto bad;
            }
            if (!(j->stop[i] = strdup(e->valuestring))) {
                serve_fail(b, 500, NULL, "out of memory");
                goto bad;
            }
            j->s.n_stop = i + 1;
        }
        j->s.stop = (const char *const *)j->stop;
    }
    if (kind == JOB_CHAT) {
        const cJSON *ms = cJSON_GetObjectItemCaseSensitive(root, "messages");
        if (!cJSON_IsArray(ms) || cJSON_GetArraySize(ms) == 0) {
            serve_fail(b, 400, "messages", "'messages' must be a non-empty array");
            goto bad;
        }
        int nm = cJSON_GetArraySize(ms);
        j->msgs = calloc((size_t)nm, sizeof *j->msgs);
        if (!j->msgs) {
            serve_fail(b, 500, NULL, "out of memory");
            goto bad;
        }
        int i = 0;
        const cJSON *m;
        cJSON_ArrayForEach(m, ms) {
            const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
            if (!cJSON_IsString(role) || (strcmp(role->valuestring, "system") && strcmp(role->valuestring, "user") &&
                                          strcmp(role->valuestring, "assistant") &&
                                          strcmp(role->valuestring, "developer"))) {
                serve_fail(b, 400, "messages", "messages[%d].role must be \"system\", \"developer\", \"user\" or \"assistant\"",
                     i);
                goto bad;
            }
            char *c = content_text(cJSON_GetObjectItemCaseSensitive(m, "content"), i, b);
            if (!c)
                goto bad;
            /* OpenAI's "developer" is the system message of newer clients */
            j->msgs[i].role = strdup(strcmp(role->valuestring, "developer") ? role->valuestring : "system");
            j->msgs[i].content = c;
            j->n_msgs = ++i;
            if (!j->msgs[i - 1].role) {
                serve_fail(b, 500, NULL, "out of memory");
                goto bad;
            }
        }
    } else {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "prompt");
        if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1)
            p = cJSON_GetArrayItem(p, 0);
        if (!cJSON_IsString(p)) {
            serve_fail(b, 400, "prompt", "'prompt' must be a string (or an array of one string)");
            goto bad;
        }
        if ((x = cJSON_GetObjectItemCaseSensitive(root, "echo")) && cJSON_IsTrue(x)) {
            serve_fail(b, 400, "echo", "echo is not supported");
            goto bad;
        }
        if (!(j->prompt = strdup(p->valuestring))) {
            serve_fail(b, 500, NULL, "out of memory");
            goto bad;
        }
    }
    cJSON_Delete(root);
    return j;
bad:
    cJSON_Delete(root);
    serve_job_free(j);
    return NULL;
}

