/* Loading a tokenizer.json into an sn_tokenizer (tokenizer_impl.h).
 *
 * The JSON tree from cJSON is transient: it is freed before the load returns,
 * and everything the tokenizer keeps goes through sn_malloc. cJSON allocates
 * with malloc (its hooks are process-wide, so snug leaves them alone). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "genai/tokenizer_impl.h"

/* ---- UTF-8 and small helpers ------------------------------------------- */

size_t tk_u8len(unsigned char c) {
    if (c < 0xc0)
        return 1;
    if (c < 0xe0)
        return 2;
    if (c < 0xf0)
        return 3;
    return c < 0xf8 ? 4 : 1;
}

size_t tk_u8dec(const char *s, uint32_t *cp) {
    const unsigned char *u = (const unsigned char *)s;
    size_t n = tk_u8len(u[0]);
    uint32_t c = n == 1 ? u[0] : (uint32_t)(u[0] & (0x7f >> n));
    for (size_t i = 1; i < n; i++)
        c = c << 6 | (u[i] & 0x3f);
    *cp = c;
    return n;
}

size_t tk_u8enc(uint32_t cp, char *out) {
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xc0 | cp >> 6);
        o[1] = (unsigned char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xe0 | cp >> 12);
        o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
        o[2] = (unsigned char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (unsigned char)(0xf0 | cp >> 18);
    o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
    o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
    o[3] = (unsigned char)(0x80 | (cp & 0x3f));
    return 4;
}

bool tk_is_space(uint32_t c) {
    /* The White_Space property, which Rust's char::is_whitespace follows: a
     * fixed list since Unicode 6.3. */
    return (c >= 0x9 && c <= 0xd) || c == 0x20 || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
           c == 0x205f || c == 0x3000;
}

void tk_regex_free(tk_regex *r) {
    if (r->code)
        pcre2_code_free(r->code);
    r->code = NULL;
}

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

static uint64_t hash_u64(uint64_t x) {
    x ^= x >> 33; /* murmur3's finalizer */
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static size_t table_size(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    return cap;
}

/* ---- the vocabulary and merge tables ------------------------------------ */

int32_t tk_vocab_get(const sn_tokenizer *t, const char *s, size_t n) {
    if (!t->vocab.slot)
        return -1;
    for (size_t i = hash_bytes(s, n) & t->vocab.mask;; i = (i + 1) & t->vocab.mask) {
        uint32_t v = t->vocab.slot[i];
        if (!v)
            return -1;
        int32_t id = (int32_t)(v - 1);
        if (t->vlen[id] == n && memcmp(t->text + t->voff[id], s, n) == 0)
            return id;
    }
}

const tk_merge *tk_merge_get(const sn_tokenizer *t, int32_t a, int32_t b) {
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    for (size_t i = hash_u64(key) & t->merge_mask;; i = (i + 1) & t->merge_mask) {
        const tk_merge *m = &t->merges[i];
        if (m->key == key)
            return m;
        if (m->key == UINT64_MAX)
            return NULL;
    }
}

/* ---- loading ------------------------------------------------------------ */

typedef struct tk_load {
    sn_tokenizer *t;
    sn_err *err;
    pcre2_general_context *gctx; /* owned: PCRE2 allocates through sn_malloc */
    char *scratch;               /* owned: a path or pattern being built */
} tk_load;

static int fail(tk_load *L, int code, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(tk_load *L, int code, const char *path, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sn_errf(L->err, code, "%s: %s: %s", L->t->name, path, msg);
}

static void *pcre_alloc(size_t n, void *data) {
    (void)data;
    return sn_malloc(n);
}

static void pcre_free(void *p, void *data) {
    (void)data;
    sn_free(p);
}

static const cJSON *jget(const cJSON *o, const char *key) {
    return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
}

static bool jnull(const cJSON *v) { return !v || cJSON_IsNull(v); }

/* A boolean member; absent or null: def. */
static int jbool(tk_load *L, const cJSON *o, const char *key, bool def, bool *out, const char *path) {
    const cJSON *v = jget(o, key);
    if (jnull(v)) {
        *out = def;
        return SNUG_OK;
    }
    if (!cJSON_IsBool(v))
        return fail(L, SNUG_ERR_PARSE, path, "'%s' is not a boolean", key);
    *out = cJSON_IsTrue(v);
    return SNUG_OK;
}

/* A string member; absent or null: *out = NULL (an error when required). */
static int jstr(tk_load *L, const cJSON *o, const char *key, bool required, const char **out,
                const char *path) {
    const cJSON *v = jget(o, key);
    *out = NULL;
    if (jnull(v)) {
        if (required)
            return fail(L, SNUG_ERR_PARSE, path, "'%s' is missing", key);
        return SNUG_OK;
    }
    if (!cJSON_IsString(v))
        return fail(L, SNUG_ERR_PARSE, path, "'%s' is not a string", key);
    *out = v->valuestring;
    return SNUG_OK;
}

/* A non-negative integer that fits an int32. */
static int jint(tk_load *L, const cJSON *v, int64_t max, int64_t *out, const char *path) {
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > (double)max ||
        v->valuedouble != floor(v->valuedouble))
        return fail(L, SNUG_ERR_PARSE, path, "expected an integer in [0, %lld]", (long long)max);
    *out = (int64_t)v->valuedouble;
    return SNUG_OK;
}

/* One character given as a string (Metaspace's replacement, Strip's content). */
static int jchar(tk_load *L, const cJSON *o, const char *key, const char *def, uint32_t *out,
                 const char *path) {
    const char *s;
    SN_TRY(jstr(L, o, key, false, &s, path));
    if (!s)
        s = def;
    size_t n = strlen(s);
    if (n == 0 || tk_u8len((unsigned char)s[0]) != n)
        return fail(L, SNUG_ERR_PARSE, path, "'%s' is not one character: \"%s\"", key, s);
    tk_u8dec(s, out);
    return SNUG_OK;
}

/* Oniguruma, the engine `tokenizers` runs these patterns on, and PCRE2 give
 * a few escapes different meanings; they are rewritten to Oniguruma's:
 *   \s \S  Oniguruma: White_Space; PCRE2 (UCP) also takes U+180E
 *   \w     Oniguruma: letters, marks, decimal digits, connectors; PCRE2 10.42
 *          letters, all numbers and '_'
 *   \h \H  Oniguruma: hexadecimal digits; PCRE2: horizontal space
 * \W and \H inside a character class have no class form and stay PCRE2's.
 * The result is in L->scratch. */
static int onig_to_pcre2(tk_load *L, const char *p, size_t n, size_t *out_len) {
    static const char *const w_in = "\\p{L}\\p{M}\\p{Nd}\\p{Pc}";
    size_t o = 0;
    sn_free(L->scratch);
    /* the longest replacement, "[^\p{L}\p{M}\p{Nd}\p{Pc}]", is 25 bytes for 2 */
    L->scratch = sn_malloc(n * 13 + 16);
    if (!L->scratch)
        return sn_errf(L->err, SNUG_ERR_OOM, "out of memory compiling a pattern");
    char *q = L->scratch;
    bool in_class = false;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c == '\\' && i + 1 < n) {
            char e = p[++i];
            const char *rep = NULL;
            char buf[64];
            switch (e) {
            case 's': rep = "\\p{White_Space}"; break;
            case 'S': rep = "\\P{White_Space}"; break;
            case 'w':
                snprintf(buf, sizeof buf, in_class ? "%s" : "[%s]", w_in);
                rep = buf;
                break;
            case 'W':
                if (!in_class) {
                    snprintf(buf, sizeof buf, "[^%s]", w_in);
                    rep = buf;
                }
                break;
            case 'h': rep = in_class ? "0-9a-fA-F" : "[0-9a-fA-F]"; break;
            case 'H':
                if (!in_class)
                    rep = "[^0-9a-fA-F]";
                break;
            default: break;
            }
            if (rep) {
                size_t r = strlen(rep);
                memcpy(q + o, rep, r);
                o += r;
            } else {
                q[o++] = '\\';
                q[o++] = e;
            }
            continue;
        }
        q[o++] = c;
        if (!in_class && c == '[') {
            in_class = true;
            /* "[^]..." and "[]...": the first ']' is a literal */
            if (i + 1 < n && p[i + 1] == '^')
                q[o++] = p[++i];
            if (i + 1 < n && p[i + 1] == ']')
                q[o++] = p[++i];
        } else if (in_class && c == ']') {
            in_class = false;
        }
    }
    *out_len = o;
    return SNUG_OK;
}

/* Compiles tokenizers' Pattern {"String": s} or {"Regex": r} (or a bare
 * regex string, as ByteLevel's built-in one). */
static int compile_re(tk_load *L, const char *pat, size_t n, bool literal, tk_regex *out,
                      const char *path) {
    pcre2_compile_context *cc = pcre2_compile_context_create(L->gctx);
    if (!cc)
        return sn_errf(L->err, SNUG_ERR_OOM, "out of memory compiling a pattern");
    const char *src = pat;
    size_t len = n;
    int rc = SNUG_OK;
    if (!literal) {
        rc = onig_to_pcre2(L, pat, n, &len);
        if (rc != SNUG_OK)
            goto done;
        src = L->scratch;
    }
    int ec;
    PCRE2_SIZE eoff;
    uint32_t opts = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
    out->code = pcre2_compile((PCRE2_SPTR)src, len, opts, &ec, &eoff, cc);
    if (!out->code) {
        if (ec == PCRE2_ERROR_HEAP_FAILED) {
            rc = sn_errf(L->err, SNUG_ERR_OOM, "out of memory compiling a pattern");
        } else {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(ec, msg, sizeof msg);
            rc = fail(L, SNUG_ERR_UNSUPPORTED, path, "PCRE2 cannot compile the pattern \"%.*s\": %s (at offset %zu)",
                      (int)(n > 200 ? 200 : n), pat, (const char *)msg, (size_t)eoff);
        }
        goto done;
    }
    /* JIT where PCRE2 has it for this machine; the interpreter otherwise. */
    (void)pcre2_jit_compile(out->code, PCRE2_JIT_COMPLETE);
done:
    pcre2_compile_context_free(cc);
    return rc;
}

static int load_pattern(tk_load *L, const cJSON *o, tk_regex *out, const char *path) {
    const cJSON *p = jget(o, "pattern");
    const char *s = NULL;
    bool literal = false;
    if (cJSON_IsObject(p)) {
        const cJSON *v = jget(p, "String");
        if (v) {
            literal = true;
        } else {
            v = jget(p, "Regex");
        }
        if (cJSON_IsString(v))
            s = v->valuestring;
    }
    if (!s)
        return fail(L, SNUG_ERR_PARSE, path, "'pattern' is not {\"String\": ...} or {\"Regex\": ...}");
    return compile_re(L, s, strlen(s), literal, out, path);
}

static int load_string(tk_load *L, const cJSON *o, const char *key, char **out, size_t *len,
                       const char *path) {
    const char *s;
    SN_TRY(jstr(L, o, key, true, &s, path));
    *len = strlen(s);
    *out = sn_strndup(s, *len);
    return *out ? SNUG_OK : sn_errf(L->err, SNUG_ERR_OOM, "out of memory");
}

static int grow(tk_load *L, void **arr, size_t *cap, size_t n, size_t elem) {
    if (n < *cap)
        return SNUG_OK;
    size_t nc = *cap ? *cap * 2 : 4, bytes;
    if (!sn_mul_ok(nc, elem, &bytes))
        return sn_errf(L->err, SNUG_ERR_OOM, "out of memory");
    void *p = sn_realloc(*arr, bytes);
    if (!p)
        return sn_errf(L->err, SNUG_ERR_OOM, "out of memory");
    memset((char *)p + *cap * elem, 0, (nc - *cap) * elem);
    *arr = p;
    *cap = nc;
    return SNUG_OK;
}

/* The type of a component; path names it in messages. */
static int jtype(tk_load *L, const cJSON *o, const char **type, const char *path) {
    if (!cJSON_IsObject(o))
        return fail(L, SNUG_ERR_PARSE, path, "expected an object");
    return jstr(L, o, "type", true, type, path);
}

static int load_normalizer(tk_load *L, const cJSON *o, size_t *cap, const char *path) {
    sn_tokenizer *t = L->t;
    const char *type;
    SN_TRY(jtype(L, o, &type, path));
    if (strcmp(type, "Sequence") == 0) {
        const cJSON *list = jget(o, "normalizers"), *it;
        if (!cJSON_IsArray(list))
            return fail(L, SNUG_ERR_PARSE, path, "'normalizers' is not an array");
        int i = 0;
        cJSON_ArrayForEach(it, list) {
            char sub[256];
            snprintf(sub, sizeof sub, "%s.normalizers[%d]", path, i++);
            SN_TRY(load_normalizer(L, it, cap, sub));
        }
        return SNUG_OK;
    }
    SN_TRY(grow(L, (void **)&t->norms, cap, t->n_norms, sizeof *t->norms));
    tk_norm *n = &t->norms[t->n_norms++];
    if (strcmp(type, "NFC") == 0) {
        n->kind = TK_NORM_NFC;
    } else if (strcmp(type, "NFD") == 0) {
        n->kind = TK_NORM_NFD;
    } else if (strcmp(type, "NFKC") == 0) {
        n->kind = TK_NORM_NFKC;
    } else if (strcmp(type, "NFKD") == 0) {
        n->kind = TK_NORM_NFKD;
    } else if (strcmp(type, "Prepend") == 0) {
        n->kind = TK_NORM_PREPEND;
        SN_TRY(load_string(L, o, "prepend", &n->str, &n->len, path));
    } else if (strcmp(type, "Replace") == 0) {
        n->kind = TK_NORM_REPLACE;
        SN_TRY(load_pattern(L, o, &n->re, path));
        SN_TRY(load_string(L, o, "content", &n->str, &n->len, path));
    } else if (strcmp(type, "Strip") == 0) {
        n->kind = TK_NORM_STRIP;
        SN_TRY(jbool(L, o, "strip_left", true, &n->left, path));
        SN_TRY(jbool(L, o, "strip_right", true, &n->right, path));
    } else {
        t->n_norms--;
        return fail(L, SNUG_ERR_UNSUPPORTED, path, "unsupported normalizer type '%s'", type);
    }
    return SNUG_OK;
}

static int load_scheme(tk_load *L, const cJSON *o, tk_prepend *out, const char *path) {
    const char *s;
    SN_TRY(jstr(L, o, "prepend_scheme", false, &s, path));
    if (!s) {
        /* files before tokenizers 0.15 say add_prefix_space instead */
        bool aps = false;
        SN_TRY(jbool(L, o, "add_prefix_space", true, &aps, path));
        *out = aps ? TK_PREPEND_ALWAYS : TK_PREPEND_NEVER;
    } else if (strcmp(s, "always") == 0) {
        *out = TK_PREPEND_ALWAYS;
    } else if (strcmp(s, "first") == 0) {
        *out = TK_PREPEND_FIRST;
    } else if (strcmp(s, "never") == 0) {
        *out = TK_PREPEND_NEVER;
    } else {
        return fail(L, SNUG_ERR_PARSE, path, "unknown prepend_scheme '%s'", s);
    }
    return SNUG_OK;
}

/* GPT-2's split regex, which the ByteLevel pre-tokenizer runs when use_regex. */
static const char BYTELEVEL_RE[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static int load_pre(tk_load *L, const cJSON *o, size_t *cap, const char *path) {
    sn_tokenizer *t = L->t;
    const char *type;
    SN_TRY(jtype(L, o, &type, path));
    if (strcmp(type, "Sequence") == 0) {
        const cJSON *list = jget(o, "pretokenizers"), *it;
        if (!cJSON_IsArray(list))
            return fail(L, SNUG_ERR_PARSE, path, "'pretokenizers' is not an array");
        int i = 0;
        cJSON_ArrayForEach(it, list) {
            char sub[256];
            snprintf(sub, sizeof sub, "%s.pretokenizers[%d]", path, i++);
            SN_TRY(load_pre(L, it, cap, sub));
        }
        return SNUG_OK;
    }
    SN_TRY(grow(L, (void **)&t->pres, cap, t->n_pres, sizeof *t->pres));
    tk_pre *p = &t->pres[t->n_pres++];
    if (strcmp(type, "Split") == 0) {
        p->kind = TK_PRE_SPLIT;
        SN_TRY(load_pattern(L, o, &p->re, path));
        const char *b;
        SN_TRY(jstr(L, o, "behavior", true, &b, path));
        static const struct { const char *name; tk_behavior b; } names[] = {
            {"Removed", TK_REMOVED}, {"Isolated", TK_ISOLATED}, {"MergedWithPrevious", TK_MERGED_PREV},
            {"MergedWithNext", TK_MERGED_NEXT}, {"Contiguous", TK_CONTIGUOUS}};
        size_t k = 0;
        while (k < sizeof names / sizeof *names && strcmp(names[k].name, b) != 0)
            k++;
        if (k == sizeof names / sizeof *names)
            return fail(L, SNUG_ERR_PARSE, path, "unknown split behavior '%s'", b);
        p->behavior = names[k].b;
        SN_TRY(jbool(L, o, "invert", false, &p->invert, path));
    } else if (strcmp(type, "ByteLevel") == 0) {
        p->kind = TK_PRE_BYTELEVEL;
        bool use_regex = false;
        SN_TRY(jbool(L, o, "add_prefix_space", true, &p->add_prefix_space, path));
        SN_TRY(jbool(L, o, "use_regex", true, &use_regex, path));
        if (use_regex)
            SN_TRY(compile_re(L, BYTELEVEL_RE, sizeof BYTELEVEL_RE - 1, false, &p->re, path));
    } else if (strcmp(type, "Metaspace") == 0) {
        p->kind = TK_PRE_METASPACE;
        SN_TRY(jchar(L, o, "replacement", "\xe2\x96\x81", &p->repl, path));
        p->repl_len = tk_u8enc(p->repl, p->repl_utf8);
        SN_TRY(load_scheme(L, o, &p->scheme, path));
        SN_TRY(jbool(L, o, "split", true, &p->split, path));
    } else if (strcmp(type, "Digits") == 0) {
        p->kind = TK_PRE_DIGITS;
        SN_TRY(jbool(L, o, "individual_digits", false, &p->individual, path));
    } else {
        t->n_pres--;
        return fail(L, SNUG_ERR_UNSUPPORTED, path, "unsupported pre-tokenizer type '%s'", type);
    }
    return SNUG_OK;
}

static int load_decoder(tk_load *L, const cJSON *o, size_t *cap, const char *path) {
    sn_tokenizer *t = L->t;
    const char *type;
    SN_TRY(jtype(L, o, &type, path));
    if (strcmp(type, "Sequence") == 0) {
        const cJSON *list = jget(o, "decoders"), *it;
        if (!cJSON_IsArray(list))
            return fail(L, SNUG_ERR_PARSE, path, "'decoders' is not an array");
        int i = 0;
        cJSON_ArrayForEach(it, list) {
            char sub[256];
            snprintf(sub, sizeof sub, "%s.decoders[%d]", path, i++);
            SN_TRY(load_decoder(L, it, cap, sub));
        }
        return SNUG_OK;
    }
    SN_TRY(grow(L, (void **)&t->decs, cap, t->n_decs, sizeof *t->decs));
    tk_dec *d = &t->decs[t->n_decs++];
    if (strcmp(type, "ByteLevel") == 0) {
        d->kind = TK_DEC_BYTELEVEL;
    } else if (strcmp(type, "ByteFallback") == 0) {
        d->kind = TK_DEC_BYTEFALLBACK;
    } else if (strcmp(type, "Fuse") == 0) {
        d->kind = TK_DEC_FUSE;
    } else if (strcmp(type, "Metaspace") == 0) {
        d->kind = TK_DEC_METASPACE;
        SN_TRY(jchar(L, o, "replacement", "\xe2\x96\x81", &d->ch, path));
        SN_TRY(load_scheme(L, o, &d->scheme, path));
    } else if (strcmp(type, "Replace") == 0) {
        d->kind = TK_DEC_REPLACE;
        SN_TRY(load_pattern(L, o, &d->re, path));
        SN_TRY(load_string(L, o, "content", &d->str, &d->len, path));
    } else if (strcmp(type, "Strip") == 0) {
        d->kind = TK_DEC_STRIP;
        SN_TRY(jchar(L, o, "content", " ", &d->ch, path));
        int64_t v = 0;
        const cJSON *s = jget(o, "start"), *e = jget(o, "stop");
        SN_TRY(jint(L, s, INT32_MAX, &v, path));
        d->start = (size_t)v;
        SN_TRY(jint(L, e, INT32_MAX, &v, path));
        d->stop = (size_t)v;
    } else {
        t->n_decs--;
        return fail(L, SNUG_ERR_UNSUPPORTED, path, "unsupported decoder type '%s'", type);
    }
    return SNUG_OK;
}

/* TemplateProcessing's single template; other post-processors are noted
 * and refused when an encode asks for special tokens. */
static int load_post(tk_load *L, const cJSON *o, const char *path) {
    sn_tokenizer *t = L->t;
    const char *type;
    SN_TRY(jtype(L, o, &type, path));
    if (strcmp(type, "Sequence") == 0) {
        const cJSON *list = jget(o, "processors"), *it;
        if (!cJSON_IsArray(list))
            return fail(L, SNUG_ERR_PARSE, path, "'processors' is not an array");
        int i = 0;
        cJSON_ArrayForEach(it, list) {
            char sub[256];
            snprintf(sub, sizeof sub, "%s.processors[%d]", path, i++);
            SN_TRY(load_post(L, it, sub));
        }
        return SNUG_OK;
    }
    if (strcmp(type, "ByteLevel") == 0)
        return SNUG_OK; /* offsets only */
    if (strcmp(type, "TemplateProcessing") != 0 || t->tmpl) {
        if (!t->post_unsupported[0])
            snprintf(t->post_unsupported, sizeof t->post_unsupported, "%s", type);
        return SNUG_OK;
    }
    const cJSON *single = jget(o, "single"), *specials = jget(o, "special_tokens"), *it;
    if (!cJSON_IsArray(single))
        return fail(L, SNUG_ERR_PARSE, path, "'single' is not an array");
    size_t n = (size_t)cJSON_GetArraySize(single), i = 0;
    t->tmpl = sn_calloc(n ? n : 1, sizeof *t->tmpl);
    if (!t->tmpl)
        return sn_errf(L->err, SNUG_ERR_OOM, "out of memory");
    cJSON_ArrayForEach(it, single) {
        char sub[256];
        snprintf(sub, sizeof sub, "%s.single[%zu]", path, i);
        tk_tmpl *m = &t->tmpl[t->n_tmpl++];
        const cJSON *sp = jget(it, "SpecialToken");
        if (jget(it, "Sequence")) {
            m->seq = true;
        } else if (sp) {
            const char *name;
            SN_TRY(jstr(L, sp, "id", true, &name, sub));
            const cJSON *def = jget(specials, name), *ids = jget(def, "ids"), *x;
            if (!cJSON_IsArray(ids))
                return fail(L, SNUG_ERR_PARSE, sub, "special token '%s' has no ids in special_tokens", name);
            m->n = (size_t)cJSON_GetArraySize(ids);
            m->ids = sn_malloc((m->n ? m->n : 1) * sizeof *m->ids);
            if (!m->ids)
                return sn_errf(L->err, SNUG_ERR_OOM, "out of memory");
            size_t k = 0;
            cJSON_ArrayForEach(x, ids) {
                int64_t v = 0;
                SN_TRY(jint(L, x, INT32_MAX, &v, sub));
                m->ids[k++] = (int32_t)v;
            }
        } else {
            return fail(L, SNUG_ERR_PARSE, sub, "expected {\"SpecialToken\": ...} or {\"Sequence\": ...}");
        }
        i++;
    }
    return SNUG_OK;
}

static int vocab_put(sn_tokenizer *t, int32_t id) {
    const char *s = t->text + t->voff[id];
    size_t n = t->vlen[id];
    for (size_t i = hash_bytes(s, n) & t->vocab.mask;; i = (i + 1) & t->vocab.mask) {
        uint32_t v = t->vocab.slot[i];
        if (!v) {
            t->vocab.slot[i] = (uint32_t)id + 1;
            return SNUG_OK;
        }
        int32_t o = (int32_t)(v - 1);
        if (t->vlen[o] == n && memcmp(t->text + t->voff[o], s, n) == 0)
            return SNUG_ERR_PARSE; /* cJSON keeps duplicate keys; tokenizers' map would not */
    }
}

static int merge_put(tk_load *L, int32_t a, int32_t b, uint32_t rank, int32_t id) {
    sn_tokenizer *t = L->t;
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    for (size_t i = hash_u64(key) & t->merge_mask;; i = (i + 1) & t->merge_mask) {
        tk_merge *m = &t->merges[i];
        if (m->key == UINT64_MAX || m->key == key) {
            /* a repeated pair: the later rank wins, as in tokenizers' map */
            m->key = key;
            m->rank = rank;
            m->id = id;
            return SNUG_OK;
        }
    }
}

static int load_merges(tk_load *L, const cJSON *model) {
    sn_tokenizer *t = L->t;
    const cJSON *merges = jget(model, "merges"), *it;
    if (jnull(merges))
        merges = NULL;
    else if (!cJSON_IsArray(merges))
        return fail(L, SNUG_ERR_PARSE, "model.merges", "not an array");
    size_t n = merges ? (size_t)cJSON_GetArraySize(merges) : 0;
    t->merge_mask = table_size(n) - 1;
    t->merges = sn_malloc((t->merge_mask + 1) * sizeof *t->merges);
    if (!t->merges)
        return sn_errf(L->err, SNUG_ERR_OOM, "out of memory for %zu merges", n);
    memset(t->merges, 0xff, (t->merge_mask + 1) * sizeof *t->merges);
    size_t plen = t->cont_prefix ? strlen(t->cont_prefix) : 0;
    uint32_t rank = 0;
    size_t cap = 0;
    cJSON_ArrayForEach(it, merges) {
        char path[64];
        snprintf(path, sizeof path, "model.merges[%u]", rank);
        const char *a, *b;
        size_t na, nb;
        if (cJSON_IsString(it)) {
            /* "a b": split at the first space, as tokenizers does */
            const char *s = it->valuestring, *sp = strchr(s, ' ');
            if (!sp)
                return fail(L, SNUG_ERR_PARSE, path, "\"%.100s\" is not two tokens separated by a space", s);
            a = s;
            na = (size_t)(sp - s);
            b = sp + 1;
            nb = strlen(b);
        } else if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2 && cJSON_IsString(it->child) &&
                   cJSON_IsString(it->child->next)) {
            a = it->child->valuestring;
            na = strlen(a);
            b = it->child->next->valuestring;
            nb = strlen(b);
        } else {
            return fail(L, SNUG_ERR_PARSE, path, "expected \"a b\" or [\"a\", \"b\"]");
        }
        int32_t ia = tk_vocab_get(t, a, na), ib = tk_vocab_get(t, b, nb);
        if (ia < 0 || ib < 0)
            return fail(L, SNUG_ERR_PARSE, path, "token \"%.*s\" is not in the vocabulary",
                        (int)(ia < 0 ? na : nb), ia < 0 ? a : b);
        /* the merged token: a, then b without its continuing-subword prefix */
        size_t skip = plen && nb >= plen && memcmp(b, t->cont_prefix, plen) == 0 ? plen : 0;
        if (na + nb + 1 > cap) {
            cap = 2 * (na + nb + 1);
            sn_free(L->scratch);
            L->scratch = sn_malloc(cap);
            if (!L->scratch)
                return sn_errf(L->err, SNUG_ERR_OOM, "out of memory");
        }
        memcpy(L->scratch, a, na);
        memcpy(L->scratch + na, b + skip, nb - skip);
        int32_t id = tk_vocab_get(t, L->scratch, na + nb - skip);
        if (id < 0)
            return fail(L, SNUG_ERR_PARSE, path, "the merged token \"%.*s\" is not in the vocabulary",
                        (int)(na + nb - skip), L->scratch);
        SN_TRY(merge_put(L, ia, ib, rank, id));
        rank++;
    }
    return SNUG_OK;
}

static int load_added(tk_load *L, const cJSON *list) {
    sn_tokenizer *t = L->t;
    if (jnull(list))
        return SNUG_OK;
    if (!cJSON_IsArray(list))
        return fail(L, SNUG_ERR_PARSE, "added_tokens", "not an array");
    size_t n = (size_t)cJSON_GetArraySize(list), i = 0;
    t->added = sn_calloc(n ? n : 1, sizeof *t->added);
    if (!t->added)
        return sn_errf(L->err, SNUG_ERR_OOM, "out of memory");
    const cJSON *it;
    int64_t max_added = -1;
    cJSON_ArrayForEach(it, list) {
        char path[64];
        snprintf(path, sizeof path, "added_tokens[%zu]", i++);
        if (!cJSON_IsObject(it))
            return fail(L, SNUG_ERR_PARSE, path, "expected an object");
        const char *content;
        SN_TRY(jstr(L, it, "content", true, &content, path));
        size_t len = strlen(content);
        if (len == 0)
            return fail(L, SNUG_ERR_PARSE, path, "empty content");
        if (tk_utf8_invalid_at(content, len) < len)
            return fail(L, SNUG_ERR_PARSE, path, "content is not valid UTF-8");
        tk_added a = {0};
        SN_TRY(jbool(L, it, "single_word", false, &a.single_word, path));
        SN_TRY(jbool(L, it, "lstrip", false, &a.lstrip, path));
        SN_TRY(jbool(L, it, "rstrip", false, &a.rstrip, path));
        SN_TRY(jbool(L, it, "normalized", true, &a.normalized, path));
        SN_TRY(jbool(L, it, "special", false, &a.special, path));
        /* The id is not read from the file: tokenizers gives an added token
         * the model's id for its content, else the next free one, in file
         * order (they agree for files tokenizers wrote itself). */
        size_t k = 0;
        while (k < t->n_added && !(t->added[k].len == len && memcmp(t->added[k].content, content, len) == 0))
            k++;
        if (k < t->n_added)
            continue; /* the same content again: tokenizers keeps the first */
        int32_t id = tk_vocab_get(t, content, len);
        if (id < 0) {
            int64_t vs = (int64_t)t->vocab_count;
            id = (int32_t)(max_added < 0 ? vs : (max_added >= vs || vs == 0) ? max_added + 1 : vs);
        }
        if (id > max_added)
            max_added = id;
        a.id = id;
        a.len = len;
        a.content = sn_strndup(content, len);
        if (!a.content)
            return sn_errf(L->err, SNUG_ERR_OOM, "out of memory");
        t->added[t->n_added++] = a;
    }
    return SNUG_OK;
}

/* Ids index tables (text by id, added marks), so the id space a file
 * declares must be about its token count: a real vocabulary is 0..n-1 and
 * its added tokens follow with few gaps; a 100-byte file naming id 2^31
 * would otherwise ask for gigabytes. */
#define TK_ID_SLACK 65536

static int id_space_ok(tk_load *L, int64_t n_ids, size_t n_tokens, const char *where) {
    if (n_ids <= 2 * (int64_t)n_tokens + TK_ID_SLACK)
        return SNUG_OK;
    return fail(L, SNUG_ERR_PARSE, where, "ids run up to %lld for %zu tokens: too sparse to index",
                (long long)n_ids - 1, n_tokens);
}

static int load_vocab(tk_load *L, const cJSON *model, const cJSON *added) {
    sn_tokenizer *t = L->t;
    const cJSON *vocab = jget(model, "vocab"), *it;
    if (!cJSON_IsObject(vocab))
        return fail(L, SNUG_ERR_PARSE, "model.vocab", "not an object of token -> id");
    size_t count = 0, bytes = 0;
    int64_t max_id = -1;
    cJSON_ArrayForEach(it, vocab) {
        int64_t id = 0;
        char path[64];
        snprintf(path, sizeof path, "model.vocab[%zu]", count);
        SN_TRY(jint(L, it, INT32_MAX - 1, &id, path));
        if (id > max_id)
            max_id = id;
        count++;
        bytes += strlen(it->string);
    }
    const cJSON *a;
    cJSON_ArrayForEach(a, added) {
        const cJSON *c = jget(a, "content");
        if (cJSON_IsString(c))
            bytes += strlen(c->valuestring);
    }
    SN_TRY(id_space_ok(L, max_id + 1, count, "model.vocab"));
    t->vocab_count = count;
    t->n_vocab = (int32_t)(max_id + 1);
    t->text = sn_malloc(bytes ? bytes : 1);
    t->voff = sn_malloc((size_t)(t->n_vocab ? t->n_vocab : 1) * sizeof *t->voff);
    t->vlen = sn_calloc((size_t)(t->n_vocab ? t->n_vocab : 1), sizeof *t->vlen);
    t->vocab.mask = table_size(count) - 1;
    t->vocab.slot = sn_calloc(t->vocab.mask + 1, sizeof *t->vocab.slot);
    if (!t->text || !t->voff || !t->vlen || !t->vocab.slot)
        return sn_errf(L->err, SNUG_ERR_OOM, "out of memory for a vocabulary of %zu tokens", count);
    for (int32_t i = 0; i < t->n_vocab; i++)
        t->voff[i] = SIZE_MAX;
    size_t off = 0;
    cJSON_ArrayForEach(it, vocab) {
        int32_t id = (int32_t)it->valuedouble;
        size_t n = strlen(it->string);
        if (tk_utf8_invalid_at(it->string, n) < n)
            return fail(L, SNUG_ERR_PARSE, "model.vocab", "token %d is not valid UTF-8", id);
        if (t->voff[id] != SIZE_MAX)
            return fail(L, SNUG_ERR_PARSE, "model.vocab", "id %d is given to \"%.100s\" and to \"%.*s\"", id,
                        it->string, (int)t->vlen[id], t->text + t->voff[id]);
        memcpy(t->text + off, it->string, n);
        t->voff[id] = off;
        t->vlen[id] = (uint32_t)n;
        off += n;
        if (vocab_put(t, id) != SNUG_OK)
            return fail(L, SNUG_ERR_PARSE, "model.vocab", "token \"%.100s\" appears twice", it->string);
    }
    t->text_used = off;
    return SNUG_OK;
}

static int load_model(tk_load *L, const cJSON *model, const cJSON *added) {
    sn_tokenizer *t = L->t;
    if (!cJSON_IsObject(model))
        return fail(L, SNUG_ERR_PARSE, "model", "missing or not an object");
    const char *type;
    SN_TRY(jstr(L, model, "type", false, &type, "model"));
    if (!type && !jget(model, "merges"))
        return fail(L, SNUG_ERR_UNSUPPORTED, "model", "no 'type' and no 'merges': not a BPE model");
    if (type && strcmp(type, "BPE") != 0)
        return fail(L, SNUG_ERR_UNSUPPORTED, "model.type", "unsupported tokenizer model type '%s' (snug supports BPE)",
                    type);
    const cJSON *dropout = jget(model, "dropout");
    if (!jnull(dropout) && !(cJSON_IsNumber(dropout) && dropout->valuedouble == 0))
        return fail(L, SNUG_ERR_UNSUPPORTED, "model.dropout", "BPE dropout is random; only null or 0 is supported");
    SN_TRY(jbool(L, model, "fuse_unk", false, &t->fuse_unk, "model"));
    SN_TRY(jbool(L, model, "byte_fallback", false, &t->byte_fallback, "model"));
    SN_TRY(jbool(L, model, "ignore_merges", false, &t->ignore_merges, "model"));
    const char *s;
    SN_TRY(jstr(L, model, "continuing_subword_prefix", false, &s, "model"));
    if (s && !(t->cont_prefix = sn_strdup(s)))
        return sn_errf(L->err, SNUG_ERR_OOM, "out of memory");
    SN_TRY(jstr(L, model, "end_of_word_suffix", false, &s, "model"));
    if (s && !(t->eow_suffix = sn_strdup(s)))
        return sn_errf(L->err, SNUG_ERR_OOM, "out of memory");
    SN_TRY(load_vocab(L, model, added));
    SN_TRY(jstr(L, model, "unk_token", false, &s, "model"));
    t->unk = -1;
    if (s && (t->unk = tk_vocab_get(t, s, strlen(s))) < 0)
        return fail(L, SNUG_ERR_PARSE, "model.unk_token", "\"%s\" is not in the vocabulary", s);
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        t->byte_tok[b] = tk_vocab_get(t, name, 6);
    }
    return load_merges(L, model);
}

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves,
 * the others for 256, 257, ... in byte order. */
static void byte_map(sn_tokenizer *t) {
    int next = 256;
    for (int i = 0; i < 512; i++)
        t->char_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
        t->byte_char[b] = (uint16_t)(printable ? b : next++);
        t->char_byte[t->byte_char[b]] = (int16_t)b;
    }
}

/* Whether added token a sorts before b in a matcher: by first byte, then
 * longer first, then file order. */
static bool added_before(const sn_tokenizer *t, int32_t a, int32_t b) {
    const tk_added *x = &t->added[a], *y = &t->added[b];
    const char *sx = x->normalized ? x->norm : x->content, *sy = y->normalized ? y->norm : y->content;
    size_t nx = x->normalized ? x->norm_len : x->len, ny = y->normalized ? y->norm_len : y->len;
    if ((unsigned char)sx[0] != (unsigned char)sy[0])
        return (unsigned char)sx[0] < (unsigned char)sy[0];
    if (nx != ny)
        return nx > ny;
    return a < b;
}

/* The matcher over tokens with the given normalized flag: by first byte,
 * longest first, so the first hit at a position is the leftmost-longest. */
static int build_matcher(tk_load *L, bool normalized, tk_matcher *m) {
    sn_tokenizer *t = L->t;
    m->order = sn_malloc((t->n_added ? t->n_added : 1) * sizeof *m->order);
    if (!m->order)
        return sn_errf(L->err, SNUG_ERR_OOM, "out of memory");
    for (size_t i = 0; i < t->n_added; i++) {
        const tk_added *a = &t->added[i];
        if (a->normalized == normalized && (normalized ? a->norm_len : a->len) > 0)
            m->order[m->n++] = (int32_t)i;
    }
    /* insertion sort by (first byte, length descending, file order): a few
     * hundred tokens at most */
    for (size_t i = 1; i < m->n; i++) {
        int32_t x = m->order[i];
        size_t j = i;
        while (j > 0 && added_before(t, x, m->order[j - 1])) {
            m->order[j] = m->order[j - 1];
            j--;
        }
        m->order[j] = x;
    }
    size_t k = 0;
    for (int b = 0; b <= 256; b++) {
        while (k < m->n) {
            const tk_added *a = &t->added[m->order[k]];
            unsigned char f = (unsigned char)(normalized ? a->norm[0] : a->content[0]);
            if (f >= b)
                break;
            k++;
        }
        m->first[b] = (uint32_t)k;
    }
    return SNUG_OK;
}

/* Token text by id for decoding, and the added-token marks. A normalized
 * added token decodes as its normalized content, as tokenizers' id_to_token
 * gives it (Llama-2's normalizer makes "<x>" "▁<x>"). */
static int build_ids(tk_load *L) {
    sn_tokenizer *t = L->t;
    int64_t n = t->n_vocab;
    size_t extra = 0;
    for (size_t i = 0; i < t->n_added; i++) {
        if (t->added[i].id >= n)
            n = (int64_t)t->added[i].id + 1;
        extra += t->added[i].normalized ? t->added[i].norm_len : t->added[i].len;
    }
    if (n > INT32_MAX)
        return fail(L, SNUG_ERR_PARSE, "added_tokens", "ids beyond the int32 range");
    SN_TRY(id_space_ok(L, n, t->vocab_count + t->n_added, "added_tokens"));
    t->n_ids = (int32_t)n;
    size_t cnt = (size_t)(n ? n : 1);
    char *text = sn_realloc(t->text, t->text_used + extra + 1);
    if (text)
        t->text = text;
    t->tok_off = sn_malloc(cnt * sizeof *t->tok_off);
    t->tok_len = sn_calloc(cnt, sizeof *t->tok_len);
    t->is_added = sn_calloc(cnt, 1);
    if (!text || !t->tok_off || !t->tok_len || !t->is_added)
        return sn_errf(L->err, SNUG_ERR_OOM, "out of memory");
    for (int32_t i = 0; i < t->n_ids; i++) {
        t->tok_off[i] = i < t->n_vocab ? t->voff[i] : SIZE_MAX;
        t->tok_len[i] = i < t->n_vocab ? t->vlen[i] : 0;
    }
    for (size_t i = 0; i < t->n_added; i++) {
        tk_added *a = &t->added[i];
        const char *s = a->normalized ? a->norm : a->content;
        size_t len = a->normalized ? a->norm_len : a->len;
        memcpy(t->text + t->text_used, s, len);
        t->tok_off[a->id] = t->text_used;
        t->tok_len[a->id] = (uint32_t)len;
        t->text_used += len;
        t->is_added[a->id] = a->special ? 2 : 1;
    }
    return SNUG_OK;
}

/* Normalized added tokens are matched on normalized text: their pattern is
 * their content through the normalizer, as in tokenizers. */
static int normalize_added(tk_load *L) {
    sn_tokenizer *t = L->t;
    for (size_t i = 0; i < t->n_added; i++) {
        tk_added *a = &t->added[i];
        if (!a->normalized)
            continue;
        tk_nbuf nb = {0};
        int rc = tk_normalize(t, a->content, a->len, &nb, L->err);
        if (rc != SNUG_OK) {
            sn_free(nb.p);
            return sn_err_prefix(L->err, "%s: added_tokens: normalizing \"%s\"", t->name, a->content);
        }
        a->norm = nb.p;
        a->norm_len = nb.len;
        if (!a->norm && !(a->norm = sn_strdup("")))
            return sn_errf(L->err, SNUG_ERR_OOM, "out of memory");
    }
    return SNUG_OK;
}

/* "line 3, column 17" of byte off. */
static void where(const char *s, size_t off, char *buf, size_t cap) {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < off; i++) {
        if (s[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    snprintf(buf, cap, "line %zu, column %zu", line, col);
}

int sn_tokenizer_load_json(const char *json, size_t len, const char *name, sn_tokenizer **out,
                           sn_err *err) {
    *out = NULL;
    tk_load L = {.err = err};
    cJSON *root = NULL;
    sn_tokenizer *t = sn_calloc(1, sizeof *t);
    int rc = SNUG_ERR_OOM;
    if (!t || !(t->name = sn_strdup(name ? name : "tokenizer.json"))) {
        sn_errf(err, SNUG_ERR_OOM, "out of memory");
        goto fail;
    }
    L.t = t;
    L.gctx = pcre2_general_context_create(pcre_alloc, pcre_free, NULL);
    if (!L.gctx) {
        sn_errf(err, SNUG_ERR_OOM, "out of memory");
        goto fail;
    }
    byte_map(t);
    const char *end = NULL;
    root = cJSON_ParseWithLengthOpts(json, len, &end, false);
    if (!root) {
        size_t off = end && end >= json && end <= json + len ? (size_t)(end - json) : 0;
        char at[64];
        where(json, off, at, sizeof at);
        rc = sn_errf(err, SNUG_ERR_PARSE, "%s: malformed JSON at %s (byte %zu of %zu)%s", t->name, at, off, len,
                     off + 1 >= len ? ": the file ends early (truncated?)" : "");
        goto fail;
    }
    if (!cJSON_IsObject(root)) {
        rc = sn_errf(err, SNUG_ERR_PARSE, "%s: the top level is not a JSON object", t->name);
        goto fail;
    }
    const cJSON *added = jget(root, "added_tokens");
    if ((rc = load_model(&L, jget(root, "model"), cJSON_IsArray(added) ? added : NULL)) != SNUG_OK)
        goto fail;
    if ((rc = load_added(&L, added)) != SNUG_OK)
        goto fail;
    size_t cap = 0;
    const cJSON *c = jget(root, "normalizer");
    if (!jnull(c) && (rc = load_normalizer(&L, c, &cap, "normalizer")) != SNUG_OK)
        goto fail;
    cap = 0;
    c = jget(root, "pre_tokenizer");
    if (!jnull(c) && (rc = load_pre(&L, c, &cap, "pre_tokenizer")) != SNUG_OK)
        goto fail;
    cap = 0;
    c = jget(root, "decoder");
    if (!jnull(c) && (rc = load_decoder(&L, c, &cap, "decoder")) != SNUG_OK)
        goto fail;
    c = jget(root, "post_processor");
    if (!jnull(c) && (rc = load_post(&L, c, "post_processor")) != SNUG_OK)
        goto fail;
    t->gctx = L.gctx;
    L.gctx = NULL;
    if ((rc = normalize_added(&L)) != SNUG_OK || (rc = build_ids(&L)) != SNUG_OK ||
        (rc = build_matcher(&L, false, &t->raw_match)) != SNUG_OK ||
        (rc = build_matcher(&L, true, &t->norm_match)) != SNUG_OK)
        goto fail;
    cJSON_Delete(root);
    sn_free(L.scratch);
    *out = t;
    return SNUG_OK;
fail:
    cJSON_Delete(root);
    sn_free(L.scratch);
    if (L.gctx)
        pcre2_general_context_free(L.gctx);
    sn_tokenizer_free(t);
    return rc;
}

int sn_tokenizer_load(const char *path, sn_tokenizer **out, sn_err *err) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    int rc;
    if (!f)
        return sn_errf(err, SNUG_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0) {
        rc = sn_errf(err, SNUG_ERR_IO, "%s: cannot seek: %s", path, strerror(errno));
        goto done;
    }
    long size = ftell(f);
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0) {
        rc = sn_errf(err, SNUG_ERR_IO, "%s: cannot tell its size: %s", path, strerror(errno));
        goto done;
    }
    buf = sn_malloc((size_t)size + 1);
    if (!buf) {
        rc = sn_errf(err, SNUG_ERR_OOM, "%s: out of memory for %ld bytes", path, size);
        goto done;
    }
    if (fread(buf, 1, (size_t)size, f) != (size_t)size) {
        rc = sn_errf(err, SNUG_ERR_IO, "%s: read error", path);
        goto done;
    }
    buf[size] = 0;
    rc = sn_tokenizer_load_json(buf, (size_t)size, path, out, err);
done:
    fclose(f);
    sn_free(buf);
    return rc;
}

void sn_tokenizer_free(sn_tokenizer *t) {
    if (!t)
        return;
    for (size_t i = 0; i < t->n_norms; i++) {
        sn_free(t->norms[i].str);
        tk_regex_free(&t->norms[i].re);
    }
    for (size_t i = 0; i < t->n_pres; i++)
        tk_regex_free(&t->pres[i].re);
    for (size_t i = 0; i < t->n_decs; i++) {
        sn_free(t->decs[i].str);
        tk_regex_free(&t->decs[i].re);
    }
    for (size_t i = 0; i < t->n_added; i++) {
        sn_free(t->added[i].content);
        sn_free(t->added[i].norm);
    }
    for (size_t i = 0; i < t->n_tmpl; i++)
        sn_free(t->tmpl[i].ids);
    if (t->gctx)
        pcre2_general_context_free(t->gctx);
    sn_free(t->norms);
    sn_free(t->pres);
    sn_free(t->decs);
    sn_free(t->added);
    sn_free(t->tmpl);
    sn_free(t->raw_match.order);
    sn_free(t->norm_match.order);
    sn_free(t->is_added);
    sn_free(t->tok_off);
    sn_free(t->tok_len);
    sn_free(t->voff);
    sn_free(t->vlen);
    sn_free(t->vocab.slot);
    sn_free(t->merges);
    sn_free(t->cont_prefix);
    sn_free(t->eow_suffix);
    sn_free(t->text);
    sn_free(t->name);
    sn_free(t);
}

int32_t sn_tokenizer_token_id(const sn_tokenizer *t, const char *tok) {
    size_t n = strlen(tok);
    for (size_t i = 0; i < t->n_added; i++)
        if (t->added[i].len == n && memcmp(t->added[i].content, tok, n) == 0)
            return t->added[i].id;
    return tk_vocab_get(t, tok, n);
}

const char *sn_tokenizer_token(const sn_tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n_ids || t->tok_off[id] == SIZE_MAX)
        return NULL;
    *len = t->tok_len[id];
    return t->text + t->tok_off[id];
}

int32_t sn_tokenizer_vocab_size(const sn_tokenizer *t) { return t->n_ids; }

bool sn_tokenizer_is_special(const sn_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_ids && t->is_added[id] == 2;
}
