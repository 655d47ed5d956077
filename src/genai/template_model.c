/* Chat templates (template.h): JSON into template values, and what a model
 * folder says about its chat template.
 *
 * JSON is read here rather than through cJSON because the values must be
 * Python's: json.loads keeps 1 an int and 1.0 a float (they print
 * differently), and a string may hold U+0000. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genai/template_impl.h"

typedef struct jp {
    tp_arena *a;
    sn_err *err;
    const char *what;
    const char *s;
    size_t n, i;
    int depth;
} jp;

static int jfail(jp *J, int code, const char *msg) {
    return sn_errf(J->err, code, "%s: JSON offset %zu: %s", J->what, J->i, msg);
}

static void jws(jp *J) {
    while (J->i < J->n && (J->s[J->i] == ' ' || J->s[J->i] == '\t' || J->s[J->i] == '\n' || J->s[J->i] == '\r'))
        J->i++;
}

static bool jlit(jp *J, const char *lit) {
    size_t k = strlen(lit);
    if (J->n - J->i >= k && memcmp(J->s + J->i, lit, k) == 0) {
        J->i += k;
        return true;
    }
    return false;
}

static int jhex4(jp *J, uint32_t *out) {
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) {
        char c = J->i < J->n ? J->s[J->i++] : 0;
        int h = c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : -1;
        if (h < 0)
            return jfail(J, SNUG_ERR_PARSE, "bad \\u escape");
        v = v << 4 | (uint32_t)h;
    }
    *out = v;
    return SNUG_OK;
}

static int jstring(jp *J, tp_val *out) {
    J->i++; /* the opening quote */
    size_t st = J->i, cap = 0;
    while (J->i < J->n && J->s[J->i] != '"') {
        if (J->s[J->i] == '\\')
            J->i++;
        J->i++;
    }
    if (J->i >= J->n)
        return jfail(J, SNUG_ERR_PARSE, "unterminated string");
    cap = J->i - st;
    char *o = tp_alloc(J->a, cap + 1);
    if (!o)
        return sn_errf(J->err, SNUG_ERR_OOM, "%s: out of memory", J->what);
    size_t k = 0;
    for (J->i = st; J->s[J->i] != '"';) {
        unsigned char c = (unsigned char)J->s[J->i++];
        if (c < 0x20)
            return jfail(J, SNUG_ERR_PARSE, "a control character in a string");
        if (c != '\\') {
            o[k++] = (char)c;
            continue;
        }
        char e = J->s[J->i++];
        uint32_t cp = 0;
        switch (e) {
        case '"': o[k++] = '"'; break;
        case '\\': o[k++] = '\\'; break;
        case '/': o[k++] = '/'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case 'n': o[k++] = '\n'; break;
        case 'r': o[k++] = '\r'; break;
        case 't': o[k++] = '\t'; break;
        case 'u':
            SN_TRY(jhex4(J, &cp));
            if (cp >= 0xd800 && cp < 0xdc00 && J->n - J->i >= 6 && J->s[J->i] == '\\' && J->s[J->i + 1] == 'u') {
                uint32_t lo = 0;
                size_t save = J->i;
                J->i += 2;
                SN_TRY(jhex4(J, &lo));
                if (lo >= 0xdc00 && lo < 0xe000)
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                else
                    J->i = save;
            }
            if (cp >= 0xd800 && cp < 0xe000)
                return jfail(J, SNUG_ERR_UNSUPPORTED, "a lone surrogate in a string");
            /* 6 or 12 bytes of source make at most 3 or 4 */
            if (cp < 0x80) {
                o[k++] = (char)cp;
            } else if (cp < 0x800) {
                o[k++] = (char)(0xc0 | cp >> 6);
                o[k++] = (char)(0x80 | (cp & 0x3f));
            } else if (cp < 0x10000) {
                o[k++] = (char)(0xe0 | cp >> 12);
                o[k++] = (char)(0x80 | (cp >> 6 & 0x3f));
                o[k++] = (char)(0x80 | (cp & 0x3f));
            } else {
                o[k++] = (char)(0xf0 | cp >> 18);
                o[k++] = (char)(0x80 | (cp >> 12 & 0x3f));
                o[k++] = (char)(0x80 | (cp >> 6 & 0x3f));
                o[k++] = (char)(0x80 | (cp & 0x3f));
            }
            break;
        default: return jfail(J, SNUG_ERR_PARSE, "bad escape in a string");
        }
    }
    J->i++;
    o[k] = 0;
    out->kind = TP_STR;
    out->u.s.p = o;
    out->u.s.n = k;
    return SNUG_OK;
}

static int jvalue(jp *J, tp_val *out);

static int jnumber(jp *J, tp_val *out) {
    size_t st = J->i;
    bool is_float = false;
    if (J->s[J->i] == '-')
        J->i++;
    if (jlit(J, "Infinity")) {
        out->kind = TP_FLOAT;
        out->u.f = J->s[st] == '-' ? -INFINITY : INFINITY;
        return SNUG_OK;
    }
    if (J->i >= J->n || J->s[J->i] < '0' || J->s[J->i] > '9')
        return jfail(J, SNUG_ERR_PARSE, "expected a value");
    if (J->s[J->i] == '0')
        J->i++;
    else
        while (J->i < J->n && J->s[J->i] >= '0' && J->s[J->i] <= '9')
            J->i++;
    if (J->i + 1 < J->n && J->s[J->i] == '.' && J->s[J->i + 1] >= '0' && J->s[J->i + 1] <= '9') {
        is_float = true;
        J->i++;
        while (J->i < J->n && J->s[J->i] >= '0' && J->s[J->i] <= '9')
            J->i++;
    }
    if (J->i < J->n && (J->s[J->i] == 'e' || J->s[J->i] == 'E')) {
        size_t m = J->i + 1;
        if (m < J->n && (J->s[m] == '+' || J->s[m] == '-'))
            m++;
        if (m < J->n && J->s[m] >= '0' && J->s[m] <= '9') {
            is_float = true;
            J->i = m;
            while (J->i < J->n && J->s[J->i] >= '0' && J->s[J->i] <= '9')
                J->i++;
        }
    }
    char buf[400];
    size_t len = J->i - st;
    if (len >= sizeof buf)
        return jfail(J, SNUG_ERR_UNSUPPORTED, "a number of more than 399 characters");
    memcpy(buf, J->s + st, len);
    buf[len] = 0;
    errno = 0;
    if (is_float) {
        out->kind = TP_FLOAT;
        out->u.f = strtod(buf, NULL);
    } else {
        out->kind = TP_INT;
        out->u.i = strtoll(buf, NULL, 10);
        if (errno == ERANGE)
            return jfail(J, SNUG_ERR_UNSUPPORTED, "an integer beyond 64 bits");
    }
    return SNUG_OK;
}

static int jvalue(jp *J, tp_val *out) {
    jws(J);
    if (J->i >= J->n)
        return jfail(J, SNUG_ERR_PARSE, "unexpected end of JSON");
    char c = J->s[J->i];
    memset(out, 0, sizeof *out);
    if (c == '"')
        return jstring(J, out);
    if (c == '{' || c == '[') {
        if (++J->depth > 200)
            return jfail(J, SNUG_ERR_UNSUPPORTED, "JSON nested more than 200 deep");
        J->i++;
        char close = c == '{' ? '}' : ']';
        tp_dict *d = NULL;
        tp_list *l = NULL;
        size_t cap = 0;
        if (c == '{') {
            d = tp_alloc(J->a, sizeof *d);
            out->kind = TP_DICT;
            out->u.d = d;
        } else {
            l = tp_alloc(J->a, sizeof *l);
            out->kind = TP_LIST;
            out->u.l = l;
        }
        if (!d && !l)
            return sn_errf(J->err, SNUG_ERR_OOM, "%s: out of memory", J->what);
        jws(J);
        if (J->i < J->n && J->s[J->i] == close) {
            J->i++;
            J->depth--;
            return SNUG_OK;
        }
        for (;;) {
            tp_val k = {0}, v = {0};
            jws(J);
            if (d) {
                if (J->i >= J->n || J->s[J->i] != '"')
                    return jfail(J, SNUG_ERR_PARSE, "expected a string key");
                SN_TRY(jstring(J, &k));
                jws(J);
                if (J->i >= J->n || J->s[J->i] != ':')
                    return jfail(J, SNUG_ERR_PARSE, "expected ':'");
                J->i++;
            }
            SN_TRY(jvalue(J, &v));
            if (d) {
                if (!tp_dict_put(J->a, d, k, v))
                    return sn_errf(J->err, SNUG_ERR_OOM, "%s: out of memory", J->what);
            } else {
                if (l->n == cap) {
                    size_t nc = cap ? 2 * cap : 8;
                    tp_val *nv = tp_alloc(J->a, nc * sizeof *nv);
                    if (!nv)
                        return sn_errf(J->err, SNUG_ERR_OOM, "%s: out of memory", J->what);
                    if (l->n)
                        memcpy(nv, l->v, l->n * sizeof *nv);
                    l->v = nv;
                    cap = nc;
                }
                l->v[l->n++] = v;
            }
            jws(J);
            if (J->i < J->n && J->s[J->i] == ',') {
                J->i++;
                continue;
            }
            if (J->i < J->n && J->s[J->i] == close) {
                J->i++;
                J->depth--;
                return SNUG_OK;
            }
            return jfail(J, SNUG_ERR_PARSE, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
        }
    }
    if (jlit(J, "true") || jlit(J, "false")) {
        out->kind = TP_BOOL;
        out->u.b = c == 't';
        return SNUG_OK;
    }
    if (jlit(J, "null")) {
        out->kind = TP_NONE;
        return SNUG_OK;
    }
    if (jlit(J, "NaN")) {
        out->kind = TP_FLOAT;
        out->u.f = NAN;
        return SNUG_OK;
    }
    return jnumber(J, out);
}

int tp_json_parse(tp_arena *a, const char *json, size_t len, const char *what, tp_val *out,
                  sn_err *err) {
    jp J = {.a = a, .err = err, .what = what, .s = json, .n = len};
    SN_TRY(jvalue(&J, out));
    jws(&J);
    if (J.i != J.n)
        return jfail(&J, SNUG_ERR_PARSE, "text after the JSON value");
    return SNUG_OK;
}

/* ---- model folders --------------------------------------------------------- */

/* Reads a whole file; SNUG_ERR_IO with *missing when it is not there. */
static int read_file(const char *path, char **out, size_t *len, bool *missing, sn_err *err) {
    *out = NULL;
    *missing = false;
    FILE *f = fopen(path, "rb");
    if (!f) {
        *missing = errno == ENOENT;
        return sn_errf(err, SNUG_ERR_IO, "%s: %s", path, strerror(errno));
    }
    int rc = SNUG_OK;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (cap - n < 65536) {
            cap = cap ? 2 * cap : 65536;
            char *nb = sn_realloc(buf, cap + 1);
            if (!nb) {
                rc = sn_errf(err, SNUG_ERR_OOM, "%s: out of memory", path);
                goto fail;
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    if (ferror(f)) {
        rc = sn_errf(err, SNUG_ERR_IO, "%s: read error", path);
        goto fail;
    }
    fclose(f);
    buf[n] = 0;
    *out = buf;
    *len = n;
    return SNUG_OK;
fail:
    fclose(f);
    sn_free(buf);
    return rc;
}

static const tp_val *dict_str_get(const tp_dict *d, const char *key) {
    size_t k = strlen(key);
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].kind == TP_STR && d->k[i].u.s.n == k && memcmp(d->k[i].u.s.p, key, k) == 0)
            return &d->v[i];
    return NULL;
}

/* A special token: a string, an AddedToken object's "content", or null. */
static int special_token(const tp_dict *cfg, const char *key, const char *path, char **out, sn_err *err) {
    const tp_val *v = dict_str_get(cfg, key);
    *out = NULL;
    if (v && v->kind == TP_DICT)
        v = dict_str_get(v->u.d, "content");
    if (!v || v->kind == TP_NONE)
        return SNUG_OK;
    if (v->kind != TP_STR)
        return sn_errf(err, SNUG_ERR_PARSE, "%s: %s is neither a string nor an object with \"content\"", path, key);
    *out = sn_strndup(v->u.s.p, v->u.s.n);
    return *out ? SNUG_OK : sn_errf(err, SNUG_ERR_OOM, "%s: out of memory", path);
}

static int take_template(sn_chat_config *cfg, const char *src, size_t n, const char *source, sn_err *err) {
    sn_free(cfg->template);
    sn_free(cfg->source);
    cfg->template = sn_strndup(src, n);
    cfg->source = sn_strdup(source);
    cfg->template_len = n;
    if (!cfg->template || !cfg->source)
        return sn_errf(err, SNUG_ERR_OOM, "%s: out of memory", source);
    return SNUG_OK;
}

int sn_chat_config_load(const char *dir, sn_chat_config *cfg, sn_err *err) {
    memset(cfg, 0, sizeof *cfg);
    tp_arena a = {0};
    char *text = NULL, *path = NULL, *source = NULL;
    size_t len = 0, plen = strlen(dir) + 64;
    bool missing = false;
    int rc = SNUG_OK;
    path = sn_malloc(plen);
    source = sn_malloc(plen + 32);
    if (!path || !source) {
        rc = sn_errf(err, SNUG_ERR_OOM, "%s: out of memory", dir);
        goto fail;
    }
    snprintf(path, plen, "%s/tokenizer_config.json", dir);
    rc = read_file(path, &text, &len, &missing, err);
    if (rc != SNUG_OK && !missing)
        goto fail;
    if (rc == SNUG_OK) {
        tp_val root;
        rc = tp_json_parse(&a, text, len, path, &root, err);
        if (rc != SNUG_OK)
            goto fail;
        if (root.kind != TP_DICT) {
            rc = sn_errf(err, SNUG_ERR_PARSE, "%s: not a JSON object", path);
            goto fail;
        }
        const tp_dict *d = root.u.d;
        if ((rc = special_token(d, "bos_token", path, &cfg->bos_token, err)) != SNUG_OK ||
            (rc = special_token(d, "eos_token", path, &cfg->eos_token, err)) != SNUG_OK)
            goto fail;
        const tp_val *ct = dict_str_get(d, "chat_template");
        if (ct && ct->kind == TP_LIST) {
            /* named templates: transformers takes "default" when asked for none */
            const tp_val *def = NULL;
            for (size_t i = 0; i < ct->u.l->n && !def; i++) {
                const tp_val *e = &ct->u.l->v[i];
                const tp_val *name = e->kind == TP_DICT ? dict_str_get(e->u.d, "name") : NULL;
                if (name && name->kind == TP_STR && name->u.s.n == 7 && !memcmp(name->u.s.p, "default", 7))
                    def = dict_str_get(e->u.d, "template");
            }
            if (!def || def->kind != TP_STR) {
                rc = sn_errf(err, SNUG_ERR_UNSUPPORTED,
                             "%s: chat_template is a list of named templates without a \"default\" one", path);
                goto fail;
            }
            ct = def;
            snprintf(source, plen + 32, "%s: chat_template \"default\"", path);
        } else {
            snprintf(source, plen + 32, "%s: chat_template", path);
        }
        if (ct && ct->kind == TP_STR) {
            if ((rc = take_template(cfg, ct->u.s.p, ct->u.s.n, source, err)) != SNUG_OK)
                goto fail;
        } else if (ct && ct->kind != TP_NONE) {
            rc = sn_errf(err, SNUG_ERR_PARSE, "%s: chat_template is neither a string nor a list", path);
            goto fail;
        }
        sn_free(text);
        text = NULL;
    }
    /* transformers reads chat_template.jinja in preference to the config's */
    snprintf(path, plen, "%s/chat_template.jinja", dir);
    rc = read_file(path, &text, &len, &missing, err);
    if (rc != SNUG_OK && !missing)
        goto fail;
    if (rc == SNUG_OK && (rc = take_template(cfg, text, len, path, err)) != SNUG_OK)
        goto fail;
    rc = SNUG_OK;
    sn_free(text);
    sn_free(path);
    sn_free(source);
    tp_arena_free(&a);
    return SNUG_OK;
fail:
    sn_free(text);
    sn_free(path);
    sn_free(source);
    tp_arena_free(&a);
    sn_chat_config_free(cfg);
    return rc;
}

void sn_chat_config_free(sn_chat_config *cfg) {
    if (!cfg)
        return;
    sn_free(cfg->template);
    sn_free(cfg->source);
    sn_free(cfg->bos_token);
    sn_free(cfg->eos_token);
    memset(cfg, 0, sizeof *cfg);
}
