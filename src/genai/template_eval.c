/* Chat templates (template.h): rendering a parsed template, with values
 * that behave as jinja2's Python values do (str(), repr(), ==, truth,
 * iteration) in the sandbox transformers renders in.
 *
 * Every value of a render lives in the render's arena and is freed with it.
 * Strings are UTF-8; indexes, slices and lengths count code points, as
 * Python's do. Where Python would need something this file does not mirror
 * exactly (full Unicode case mappings, printing a generator), the render
 * fails with a message instead of guessing. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <utf8proc.h>

#include "genai/template_impl.h"

const char *const tp_filter_names[] = {
    "abs", "capitalize", "count", "d", "default", "first", "float", "indent", "int", "items",
    "join", "last", "length", "list", "lower", "map", "reject", "rejectattr", "replace",
    "reverse", "round", "select", "selectattr", "string", "title", "tojson", "trim", "upper",
    NULL};
const char *const tp_test_names[] = {
    "defined", "undefined", "none", "boolean", "true", "false", "string", "number", "integer",
    "float", "mapping", "iterable", "sequence", "callable", "sameas", "eq", "equalto", "==",
    "ne", "!=", "lt", "lessthan", "<", "le", "<=", "gt", "greaterthan", ">", "ge", ">=", "in",
    "odd", "even", "divisibleby", "lower", "upper", NULL};

bool tp_name_in(const char *const *list, const char *name) {
    for (int i = 0; list[i]; i++)
        if (strcmp(list[i], name) == 0)
            return true;
    return false;
}

/* exec's answers besides statuses: a {% break %} or {% continue %} on its
 * way to the loop. */
#define TP_BREAK (-1)
#define TP_CONTINUE (-2)
#define TP_MAX_CALL_DEPTH 64

struct tp_scope {
    tp_scope *parent;
    size_t n, cap;
    const char **names;
    tp_val *vals;
};

struct tp_loop {
    const tp_val *items;
    size_t n, i;
    int depth; /* 1: jinja2 counts depth in recursive loops only, which are refused */
};

typedef struct tp_buf {
    char *p; /* arena */
    size_t n, cap;
} tp_buf;

typedef struct tp_ctx {
    const sn_template *t;
    sn_err *err;
    tp_arena *a;
    int line;        /* of the node being evaluated, for messages */
    int depth;       /* macro calls in progress */
    int loop_depth;  /* for loops in progress */
    tp_val captured; /* a set block's body while its filters run */
    size_t max_string; /* sn_template_vars.max_bytes, or TP_MAX_STRING */
} tp_ctx;

static int rerr(tp_ctx *C, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int rerr(tp_ctx *C, int code, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sn_errf(C->err, code, "%s line %d: %s", C->t->name, C->line, msg);
}

static int oom(tp_ctx *C) { return sn_errf(C->err, SNUG_ERR_OOM, "%s: out of memory while rendering", C->t->name); }

static int undefined_err(tp_ctx *C, const tp_val *u) {
    if (u->u.s.p)
        return rerr(C, SNUG_ERR_TYPE, "'%.*s' is undefined", (int)u->u.s.n, u->u.s.p);
    return rerr(C, SNUG_ERR_TYPE, "an undefined value is used");
}

static const char *type_name(const tp_val *v) {
    switch (v->kind) {
    case TP_UNDEF: return "Undefined";
    case TP_NONE: return "NoneType";
    case TP_BOOL: return "bool";
    case TP_INT: return "int";
    case TP_FLOAT: return "float";
    case TP_STR: return "str";
    case TP_LIST:
        switch (v->u.l->kind) {
        case TP_L_TUPLE: return "tuple";
        case TP_L_RANGE: return "range";
        case TP_L_GEN: return "generator";
        case TP_L_VIEW: return "dict view";
        default: return "list";
        }
    case TP_DICT: return "dict";
    case TP_NS: return "Namespace";
    case TP_LOOP: return "LoopContext";
    case TP_FUNC: return "function";
    case TP_MACRO: return "Macro";
    }
    return "?";
}

/* ---- values ---------------------------------------------------------------- */

static tp_val v_undef(const char *name) {
    tp_val v = {.kind = TP_UNDEF};
    v.u.s.p = name;
    v.u.s.n = name ? strlen(name) : 0;
    return v;
}
static tp_val v_none(void) { return (tp_val){.kind = TP_NONE}; }
static tp_val v_bool(bool b) {
    tp_val v = {.kind = TP_BOOL};
    v.u.b = b;
    return v;
}
static tp_val v_int(int64_t i) {
    tp_val v = {.kind = TP_INT};
    v.u.i = i;
    return v;
}
static tp_val v_float(double f) {
    tp_val v = {.kind = TP_FLOAT};
    v.u.f = f;
    return v;
}
static tp_val v_str(const char *p, size_t n) {
    tp_val v = {.kind = TP_STR};
    v.u.s.p = p;
    v.u.s.n = n;
    return v;
}

static int new_list(tp_ctx *C, tp_list_kind kind, size_t n, tp_val *out) {
    tp_list *l = tp_alloc(C->a, sizeof *l);
    if (!l || (n && !(l->v = tp_alloc(C->a, n * sizeof *l->v))))
        return oom(C);
    l->kind = kind;
    l->n = n;
    out->kind = TP_LIST;
    out->u.l = l;
    return SNUG_OK;
}

static int new_dict(tp_ctx *C, tp_kind kind, tp_val *out) {
    tp_dict *d = tp_alloc(C->a, sizeof *d);
    if (!d)
        return oom(C);
    out->kind = kind;
    out->u.d = d;
    return SNUG_OK;
}

static bool is_num(const tp_val *v) { return v->kind == TP_BOOL || v->kind == TP_INT || v->kind == TP_FLOAT; }
static double num_f(const tp_val *v) {
    return v->kind == TP_FLOAT ? v->u.f : v->kind == TP_INT ? (double)v->u.i : (double)v->u.b;
}
static int64_t num_i(const tp_val *v) { return v->kind == TP_INT ? v->u.i : (int64_t)v->u.b; }

static bool truthy(const tp_val *v) {
    switch (v->kind) {
    case TP_UNDEF:
    case TP_NONE: return false;
    case TP_BOOL: return v->u.b;
    case TP_INT: return v->u.i != 0;
    case TP_FLOAT: return v->u.f != 0;
    case TP_STR: return v->u.s.n != 0;
    case TP_LIST: return v->u.l->kind == TP_L_GEN || v->u.l->n != 0;
    case TP_DICT: return v->u.d->n != 0;
    default: return true;
    }
}

static bool val_eq(const tp_val *a, const tp_val *b);

static bool list_eq(const tp_list *a, const tp_list *b) {
    if (a == b)
        return true;
    if (a->kind == TP_L_GEN || b->kind == TP_L_GEN || a->kind == TP_L_VIEW || b->kind == TP_L_VIEW)
        return false;
    if ((a->kind == TP_L_TUPLE) != (b->kind == TP_L_TUPLE) || (a->kind == TP_L_RANGE) != (b->kind == TP_L_RANGE) ||
        a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (!val_eq(&a->v[i], &b->v[i]))
            return false;
    return true;
}

static tp_val *dict_find(const tp_dict *d, const tp_val *k) {
    for (size_t i = 0; i < d->n; i++)
        if (val_eq(&d->k[i], k))
            return &d->v[i];
    return NULL;
}

static bool val_eq(const tp_val *a, const tp_val *b) {
    if (is_num(a) && is_num(b)) {
        if (a->kind == TP_FLOAT || b->kind == TP_FLOAT)
            return num_f(a) == num_f(b) &&
                   (a->kind == TP_FLOAT || (double)num_i(a) == num_f(b)) &&
                   (b->kind == TP_FLOAT || (double)num_i(b) == num_f(a));
        return num_i(a) == num_i(b);
    }
    if (a->kind != b->kind)
        return false;
    switch (a->kind) {
    case TP_UNDEF:
    case TP_NONE: return true;
    case TP_STR: return a->u.s.n == b->u.s.n && memcmp(a->u.s.p, b->u.s.p, a->u.s.n) == 0;
    case TP_LIST: return list_eq(a->u.l, b->u.l);
    case TP_DICT:
        if (a->u.d->n != b->u.d->n)
            return false;
        for (size_t i = 0; i < a->u.d->n; i++) {
            const tp_val *o = dict_find(b->u.d, &a->u.d->k[i]);
            if (!o || !val_eq(&a->u.d->v[i], o))
                return false;
        }
        return true;
    case TP_NS: return a->u.d == b->u.d;
    case TP_LOOP: return a->u.loop == b->u.loop;
    case TP_FUNC: return a->u.fn == b->u.fn;
    case TP_MACRO: return a->u.mac.m == b->u.mac.m;
    default: return false;
    }
}

bool tp_dict_put(tp_arena *a, tp_dict *d, tp_val k, tp_val v) {
    tp_val *old = dict_find(d, &k);
    if (old) {
        *old = v;
        return true;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 4;
        tp_val *nk = tp_alloc(a, cap * sizeof *nk), *nv = tp_alloc(a, cap * sizeof *nv);
        if (!nk || !nv)
            return false;
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof *nk);
            memcpy(nv, d->v, d->n * sizeof *nv);
        }
        d->k = nk;
        d->v = nv;
        d->cap = cap;
    }
    d->k[d->n] = k;
    d->v[d->n++] = v;
    return true;
}

static tp_val *dict_get_str(const tp_dict *d, const char *key) {
    tp_val k = v_str(key, strlen(key));
    return dict_find(d, &k);
}

/* ---- buffers --------------------------------------------------------------- */

/* By default no string a template builds may outgrow this (the caller may
 * set less, sn_template_vars.max_bytes): a chat prompt is a few pages, and
 * loops nested over hostile data would otherwise double it until memory
 * runs out. */
#define TP_MAX_STRING ((size_t)16 << 20)

static int put(tp_ctx *C, tp_buf *b, const char *s, size_t n) {
    if (n > C->max_string || b->n > C->max_string - n)
        return sn_errf(C->err, SNUG_ERR_RANGE, "%s: the rendered text would exceed %zu bytes", C->t->name,
                       C->max_string);
    if (b->cap - b->n < n + 1) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->n < n + 1)
            cap *= 2;
        char *p = tp_alloc(C->a, cap);
        if (!p)
            return oom(C);
        if (b->n)
            memcpy(p, b->p, b->n);
        b->p = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return SNUG_OK;
}

static int puts_(tp_ctx *C, tp_buf *b, const char *s) { return put(C, b, s, strlen(s)); }

static tp_val buf_val(const tp_buf *b) { return v_str(b->p ? b->p : "", b->n); }

/* ---- UTF-8 ------------------------------------------------------------------ */

static size_t u8len(unsigned char c) { return c < 0xc0 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4; }

static uint32_t u8dec(const char *s, size_t *k) {
    const unsigned char *u = (const unsigned char *)s;
    size_t n = u8len(u[0]);
    uint32_t c = n == 1 ? u[0] : (uint32_t)(u[0] & (0x7f >> n));
    for (size_t i = 1; i < n; i++)
        c = c << 6 | (u[i] & 0x3f);
    *k = n;
    return c;
}

static size_t u8enc(uint32_t cp, char *o) {
    return (size_t)utf8proc_encode_char((utf8proc_int32_t)cp, (utf8proc_uint8_t *)o);
}

static size_t u8count(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += ((unsigned char)s[i] & 0xc0) != 0x80;
    return k;
}

/* The byte offset of code point cp (cp <= the count). */
static size_t u8off(const char *s, size_t n, size_t cp) {
    size_t i = 0;
    while (cp && i < n) {
        i += u8len((unsigned char)s[i]);
        cp--;
    }
    return i < n ? i : n;
}

static bool utf8_valid(const char *s, size_t n) {
    utf8proc_int32_t cp;
    for (size_t i = 0; i < n;) {
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k <= 0)
            return false;
        i += (size_t)k;
    }
    return true;
}

/* Python's str.isspace. */
static bool py_space(uint32_t c) {
    return (c >= 0x9 && c <= 0xd) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f ||
           c == 0x3000;
}

/* Code points whose Python case mapping is not the simple one utf8proc
 * gives (SpecialCasing.txt's unconditional mappings, the final sigma, and
 * the Greek ranges around them, taken whole). */
static bool special_case(uint32_t c) {
    return c == 0xdf || c == 0x130 || c == 0x149 || c == 0x1f0 || c == 0x390 || c == 0x3a3 || c == 0x3b0 ||
           c == 0x587 || (c >= 0x1e96 && c <= 0x1e9e) || (c >= 0x1f00 && c <= 0x1fff) ||
           (c >= 0xfb00 && c <= 0xfb17);
}

static bool is_cased(uint32_t c) {
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT;
}

enum { CASE_UPPER, CASE_LOWER, CASE_TITLE, CASE_CAPITALIZE, CASE_JTITLE };

/* str.upper(), lower(), title(), capitalize(), and jinja2's title filter
 * (words start after runs of whitespace and -({[<). */
static int case_map(tp_ctx *C, tp_val s, int mode, tp_val *out) {
    tp_buf b = {0};
    SN_TRY(put(C, &b, "", 0));
    bool prev_cased = false, word_start = true, first = true;
    for (size_t i = 0; i < s.u.s.n;) {
        size_t k;
        uint32_t c = u8dec(s.u.s.p + i, &k), m = c;
        if (c >= 0x80 && special_case(c))
            return rerr(C, SNUG_ERR_UNSUPPORTED,
                        "changing the case of U+%04X, whose Python case mapping snug does not mirror", c);
        utf8proc_int32_t ic = (utf8proc_int32_t)c;
        switch (mode) {
        case CASE_UPPER: m = (uint32_t)utf8proc_toupper(ic); break;
        case CASE_LOWER: m = (uint32_t)utf8proc_tolower(ic); break;
        case CASE_TITLE: m = (uint32_t)(prev_cased ? utf8proc_tolower(ic) : utf8proc_totitle(ic)); break;
        case CASE_CAPITALIZE: m = (uint32_t)(first ? utf8proc_totitle(ic) : utf8proc_tolower(ic)); break;
        default: {
            bool sep = py_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
            m = sep ? c : (uint32_t)(word_start ? utf8proc_toupper(ic) : utf8proc_tolower(ic));
            word_start = sep;
        }
        }
        prev_cased = is_cased(c);
        first = false;
        char e[4];
        SN_TRY(put(C, &b, e, u8enc(m, e)));
        i += k;
    }
    *out = buf_val(&b);
    return SNUG_OK;
}

/* ---- str() and repr() --------------------------------------------------------- */

/* Python's repr(float): the shortest digits that read back the same,
 * fixed notation for exponents -4..15, else d.ddde+XX. */
static void fmt_float(double f, char *out, size_t cap) {
    if (isnan(f)) {
        snprintf(out, cap, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(out, cap, f < 0 ? "-inf" : "inf");
        return;
    }
    char e[40];
    for (int p = 0; p < 17; p++) {
        snprintf(e, sizeof e, "%.*e", p, f);
        if (strtod(e, NULL) == f)
            break;
    }
    /* e: [-]d[.ddd]e[+-]XX */
    char digits[24];
    int nd = 0, exp10 = 0;
    const char *p = e;
    bool neg = *p == '-';
    if (neg)
        p++;
    for (; *p && *p != 'e'; p++)
        if (*p != '.')
            digits[nd++] = *p;
    exp10 = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = 0;
    size_t k = 0;
    if (neg)
        out[k++] = '-';
    if (exp10 < -4 || exp10 >= 16) {
        out[k++] = digits[0];
        if (nd > 1) {
            out[k++] = '.';
            memcpy(out + k, digits + 1, (size_t)nd - 1);
            k += (size_t)nd - 1;
        }
        snprintf(out + k, cap - k, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
        return;
    }
    int decpt = exp10 + 1; /* digits before the point */
    if (decpt <= 0) {
        out[k++] = '0';
        out[k++] = '.';
        for (int i = 0; i < -decpt; i++)
            out[k++] = '0';
        memcpy(out + k, digits, (size_t)nd);
        k += (size_t)nd;
    } else if (decpt >= nd) {
        memcpy(out + k, digits, (size_t)nd);
        k += (size_t)nd;
        for (int i = nd; i < decpt; i++)
            out[k++] = '0';
        out[k++] = '.';
        out[k++] = '0';
    } else {
        memcpy(out + k, digits, (size_t)decpt);
        k += (size_t)decpt;
        out[k++] = '.';
        memcpy(out + k, digits + decpt, (size_t)(nd - decpt));
        k += (size_t)(nd - decpt);
    }
    out[k] = 0;
}

static int to_str(tp_ctx *C, const tp_val *v, tp_buf *b);

/* Python's repr(str). */
static int repr_str(tp_ctx *C, const char *s, size_t n, tp_buf *b) {
    bool sq = memchr(s, '\'', n) != NULL, dq = memchr(s, '"', n) != NULL;
    char q = sq && !dq ? '"' : '\'';
    SN_TRY(put(C, b, &q, 1));
    for (size_t i = 0; i < n;) {
        size_t k;
        uint32_t c = u8dec(s + i, &k);
        char e[16];
        if (c == (uint32_t)q || c == '\\') {
            e[0] = '\\';
            e[1] = (char)c;
            SN_TRY(put(C, b, e, 2));
        } else if (c == '\n' || c == '\r' || c == '\t') {
            SN_TRY(puts_(C, b, c == '\n' ? "\\n" : c == '\r' ? "\\r" : "\\t"));
        } else {
            utf8proc_category_t cat = utf8proc_category((utf8proc_int32_t)c);
            bool printable = c == ' ' || !(cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF ||
                                           cat == UTF8PROC_CATEGORY_CS || cat == UTF8PROC_CATEGORY_CO ||
                                           cat == UTF8PROC_CATEGORY_CN || cat == UTF8PROC_CATEGORY_ZL ||
                                           cat == UTF8PROC_CATEGORY_ZP || cat == UTF8PROC_CATEGORY_ZS);
            if (printable) {
                SN_TRY(put(C, b, s + i, k));
            } else {
                snprintf(e, sizeof e, c < 0x100 ? "\\x%02x" : c < 0x10000 ? "\\u%04x" : "\\U%08x", c);
                SN_TRY(puts_(C, b, e));
            }
        }
        i += k;
    }
    return put(C, b, &q, 1);
}

static int repr(tp_ctx *C, const tp_val *v, tp_buf *b) {
    if (v->kind == TP_STR)
        return repr_str(C, v->u.s.p, v->u.s.n, b);
    if (v->kind == TP_UNDEF)
        return puts_(C, b, "Undefined");
    return to_str(C, v, b);
}

static int dict_str(tp_ctx *C, const tp_dict *d, tp_buf *b) {
    SN_TRY(put(C, b, "{", 1));
    for (size_t i = 0; i < d->n; i++) {
        if (i)
            SN_TRY(put(C, b, ", ", 2));
        SN_TRY(repr(C, &d->k[i], b));
        SN_TRY(put(C, b, ": ", 2));
        SN_TRY(repr(C, &d->v[i], b));
    }
    return put(C, b, "}", 1);
}

/* Python's str(v), as {{ v }} prints it. */
static int to_str(tp_ctx *C, const tp_val *v, tp_buf *b) {
    char num[64];
    switch (v->kind) {
    case TP_UNDEF: return SNUG_OK;
    case TP_NONE: return puts_(C, b, "None");
    case TP_BOOL: return puts_(C, b, v->u.b ? "True" : "False");
    case TP_INT:
        snprintf(num, sizeof num, "%lld", (long long)v->u.i);
        return puts_(C, b, num);
    case TP_FLOAT:
        fmt_float(v->u.f, num, sizeof num);
        return puts_(C, b, num);
    case TP_STR: return put(C, b, v->u.s.p, v->u.s.n);
    case TP_LIST: {
        const tp_list *l = v->u.l;
        if (l->kind == TP_L_GEN || l->kind == TP_L_VIEW)
            return rerr(C, SNUG_ERR_UNSUPPORTED,
                        "printing a %s (Python prints its address; add '|list' to print the items)", type_name(v));
        if (l->kind == TP_L_RANGE) {
            if (l->step == 1)
                snprintf(num, sizeof num, "range(%lld, %lld)", (long long)l->start, (long long)l->stop);
            else
                snprintf(num, sizeof num, "range(%lld, %lld, %lld)", (long long)l->start, (long long)l->stop,
                         (long long)l->step);
            return puts_(C, b, num);
        }
        bool tuple = l->kind == TP_L_TUPLE;
        SN_TRY(put(C, b, tuple ? "(" : "[", 1));
        for (size_t i = 0; i < l->n; i++) {
            if (i)
                SN_TRY(put(C, b, ", ", 2));
            SN_TRY(repr(C, &l->v[i], b));
        }
        if (tuple && l->n == 1)
            SN_TRY(put(C, b, ",", 1));
        return put(C, b, tuple ? ")" : "]", 1);
    }
    case TP_DICT: return dict_str(C, v->u.d, b);
    case TP_NS:
        SN_TRY(puts_(C, b, "<Namespace "));
        SN_TRY(dict_str(C, v->u.d, b));
        return put(C, b, ">", 1);
    case TP_LOOP:
        snprintf(num, sizeof num, "<LoopContext %zu/%zu>", v->u.loop->i + 1, v->u.loop->n);
        return puts_(C, b, num);
    default: return rerr(C, SNUG_ERR_UNSUPPORTED, "printing a %s", type_name(v));
    }
}

static int str_of(tp_ctx *C, const tp_val *v, tp_val *out) {
    if (v->kind == TP_STR) {
        *out = *v;
        return SNUG_OK;
    }
    tp_buf b = {0};
    SN_TRY(put(C, &b, "", 0));
    SN_TRY(to_str(C, v, &b));
    *out = buf_val(&b);
    return SNUG_OK;
}

/* ---- json.dumps ----------------------------------------------------------------- */

typedef struct json_opt {
    bool ensure_ascii, sort_keys, has_indent;
    tp_val indent;  /* a str of the indent */
    tp_val isep, ksep;
} json_opt;

static int json_str(tp_ctx *C, const char *s, size_t n, bool ensure_ascii, tp_buf *b) {
    SN_TRY(put(C, b, "\"", 1));
    for (size_t i = 0; i < n;) {
        size_t k;
        uint32_t c = u8dec(s + i, &k);
        char e[16];
        const char *esc = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\r' ? "\\r" :
                          c == '\t' ? "\\t" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
        if (esc) {
            SN_TRY(puts_(C, b, esc));
        } else if (c < 0x20 || (ensure_ascii && c >= 0x7f)) {
            if (c >= 0x10000) {
                uint32_t v = c - 0x10000;
                snprintf(e, sizeof e, "\\u%04x\\u%04x", 0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
            } else {
                snprintf(e, sizeof e, "\\u%04x", c);
            }
            SN_TRY(puts_(C, b, e));
        } else {
            SN_TRY(put(C, b, s + i, k));
        }
        i += k;
    }
    return put(C, b, "\"", 1);
}

static int json_newline(tp_ctx *C, const json_opt *o, int level, tp_buf *b) {
    SN_TRY(put(C, b, "\n", 1));
    for (int i = 0; i < level; i++)
        SN_TRY(put(C, b, o->indent.u.s.p, o->indent.u.s.n));
    return SNUG_OK;
}

static int json_dump(tp_ctx *C, const tp_val *v, const json_opt *o, int level, tp_buf *b);

/* A dict key as json.dumps writes it: str as is; numbers, bools, None
 * turned into their JSON text; anything else a TypeError. */
static int json_key(tp_ctx *C, const tp_val *k, tp_val *out) {
    char num[64];
    switch (k->kind) {
    case TP_STR: *out = *k; return SNUG_OK;
    case TP_BOOL: *out = v_str(k->u.b ? "true" : "false", k->u.b ? 4 : 5); return SNUG_OK;
    case TP_NONE: *out = v_str("null", 4); return SNUG_OK;
    case TP_INT:
    case TP_FLOAT: {
        if (k->kind == TP_INT)
            snprintf(num, sizeof num, "%lld", (long long)k->u.i);
        else if (isnan(k->u.f) || isinf(k->u.f))
            snprintf(num, sizeof num, isnan(k->u.f) ? "NaN" : k->u.f < 0 ? "-Infinity" : "Infinity");
        else
            fmt_float(k->u.f, num, sizeof num);
        char *p = tp_strndup(C->a, num, strlen(num));
        if (!p)
            return oom(C);
        *out = v_str(p, strlen(p));
        return SNUG_OK;
    }
    default: return rerr(C, SNUG_ERR_TYPE, "tojson: keys must be str, int, float, bool or None, not %s", type_name(k));
    }
}

static int cmp_str(const tp_val *a, const tp_val *b) {
    size_t n = a->u.s.n < b->u.s.n ? a->u.s.n : b->u.s.n;
    int c = memcmp(a->u.s.p, b->u.s.p, n);
    return c ? c : (a->u.s.n > b->u.s.n) - (a->u.s.n < b->u.s.n);
}

static int json_dump(tp_ctx *C, const tp_val *v, const json_opt *o, int level, tp_buf *b) {
    char num[64];
    if (level > 100)
        return rerr(C, SNUG_ERR_UNSUPPORTED, "tojson: values nested more than 100 deep");
    switch (v->kind) {
    case TP_NONE: return puts_(C, b, "null");
    case TP_BOOL: return puts_(C, b, v->u.b ? "true" : "false");
    case TP_INT:
    case TP_FLOAT: {
        tp_val k;
        SN_TRY(json_key(C, v, &k));
        return put(C, b, k.u.s.p, k.u.s.n);
    }
    case TP_STR: return json_str(C, v->u.s.p, v->u.s.n, o->ensure_ascii, b);
    case TP_LIST: {
        const tp_list *l = v->u.l;
        if (l->kind != TP_L_LIST && l->kind != TP_L_TUPLE)
            return rerr(C, SNUG_ERR_TYPE, "tojson: Object of type %s is not JSON serializable", type_name(v));
        if (!l->n)
            return puts_(C, b, "[]");
        SN_TRY(put(C, b, "[", 1));
        for (size_t i = 0; i < l->n; i++) {
            if (i)
                SN_TRY(put(C, b, o->isep.u.s.p, o->isep.u.s.n));
            if (o->has_indent)
                SN_TRY(json_newline(C, o, level + 1, b));
            SN_TRY(json_dump(C, &l->v[i], o, level + 1, b));
        }
        if (o->has_indent)
            SN_TRY(json_newline(C, o, level, b));
        return put(C, b, "]", 1);
    }
    case TP_DICT: {
        const tp_dict *d = v->u.d;
        if (!d->n)
            return puts_(C, b, "{}");
        size_t *order = tp_alloc(C->a, d->n * sizeof *order);
        tp_val *keys = tp_alloc(C->a, d->n * sizeof *keys);
        if (!order || !keys)
            return oom(C);
        for (size_t i = 0; i < d->n; i++) {
            order[i] = i;
            SN_TRY(json_key(C, &d->k[i], &keys[i]));
        }
        if (o->sort_keys) {
            for (size_t i = 0; i < d->n; i++)
                if (d->k[i].kind != TP_STR)
                    return rerr(C, SNUG_ERR_UNSUPPORTED, "tojson(sort_keys=true) with keys that are not all strings");
            for (size_t i = 1; i < d->n; i++) /* insertion sort: stable, small */
                for (size_t j = i; j > 0 && cmp_str(&keys[order[j - 1]], &keys[order[j]]) > 0; j--) {
                    size_t t = order[j];
                    order[j] = order[j - 1];
                    order[j - 1] = t;
                }
        }
        SN_TRY(put(C, b, "{", 1));
        for (size_t i = 0; i < d->n; i++) {
            if (i)
                SN_TRY(put(C, b, o->isep.u.s.p, o->isep.u.s.n));
            if (o->has_indent)
                SN_TRY(json_newline(C, o, level + 1, b));
            SN_TRY(json_str(C, keys[order[i]].u.s.p, keys[order[i]].u.s.n, o->ensure_ascii, b));
            SN_TRY(put(C, b, o->ksep.u.s.p, o->ksep.u.s.n));
            SN_TRY(json_dump(C, &d->v[order[i]], o, level + 1, b));
        }
        if (o->has_indent)
            SN_TRY(json_newline(C, o, level, b));
        return put(C, b, "}", 1);
    }
    default:
        (void)num;
        return rerr(C, SNUG_ERR_TYPE, "tojson: Object of type %s is not JSON serializable", type_name(v));
    }
}

/* ---- scopes ------------------------------------------------------------------------ */

static int scope_new(tp_ctx *C, tp_scope *parent, tp_scope **out) {
    tp_scope *s = tp_alloc(C->a, sizeof *s);
    if (!s)
        return oom(C);
    s->parent = parent;
    *out = s;
    return SNUG_OK;
}

static tp_val *scope_find(tp_scope *s, const char *name) {
    for (; s; s = s->parent)
        for (size_t i = 0; i < s->n; i++)
            if (strcmp(s->names[i], name) == 0)
                return &s->vals[i];
    return NULL;
}

static int scope_set(tp_ctx *C, tp_scope *s, const char *name, tp_val v) {
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->names[i], name) == 0) {
            s->vals[i] = v;
            return SNUG_OK;
        }
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 8;
        const char **nn = tp_alloc(C->a, cap * sizeof *nn);
        tp_val *nv = tp_alloc(C->a, cap * sizeof *nv);
        if (!nn || !nv)
            return oom(C);
        if (s->n) {
            memcpy(nn, s->names, s->n * sizeof *nn);
            memcpy(nv, s->vals, s->n * sizeof *nv);
        }
        s->names = nn;
        s->vals = nv;
        s->cap = cap;
    }
    s->names[s->n] = name;
    s->vals[s->n++] = v;
    return SNUG_OK;
}

/* ---- iteration, attributes, items -------------------------------------------------- */

/* The items a for loop (or list()) sees. A generator is used up. */
static int iterate(tp_ctx *C, const tp_val *v, const tp_val **items, size_t *n) {
    *items = NULL;
    *n = 0;
    switch (v->kind) {
    case TP_UNDEF: return SNUG_OK;
    case TP_LIST: {
        tp_list *l = v->u.l;
        size_t from = l->kind == TP_L_GEN ? l->pos : 0;
        *items = l->v + from;
        *n = l->n - from;
        if (l->kind == TP_L_GEN)
            l->pos = l->n;
        return SNUG_OK;
    }
    case TP_DICT:
        *items = v->u.d->k;
        *n = v->u.d->n;
        return SNUG_OK;
    case TP_STR: {
        size_t cnt = u8count(v->u.s.p, v->u.s.n);
        tp_val *o = tp_alloc(C->a, (cnt ? cnt : 1) * sizeof *o);
        if (!o)
            return oom(C);
        for (size_t i = 0, k = 0; i < v->u.s.n; k++) {
            size_t len = u8len((unsigned char)v->u.s.p[i]);
            o[k] = v_str(v->u.s.p + i, len);
            i += len;
        }
        *items = o;
        *n = cnt;
        return SNUG_OK;
    }
    default: return rerr(C, SNUG_ERR_TYPE, "'%s' object is not iterable", type_name(v));
    }
}

static int loop_attr(tp_ctx *C, const tp_loop *L, const char *name, tp_val *out) {
    size_t i = L->i, n = L->n;
    if (!strcmp(name, "index"))
        *out = v_int((int64_t)i + 1);
    else if (!strcmp(name, "index0"))
        *out = v_int((int64_t)i);
    else if (!strcmp(name, "revindex"))
        *out = v_int((int64_t)(n - i));
    else if (!strcmp(name, "revindex0"))
        *out = v_int((int64_t)(n - i - 1));
    else if (!strcmp(name, "first"))
        *out = v_bool(i == 0);
    else if (!strcmp(name, "last"))
        *out = v_bool(i + 1 == n);
    else if (!strcmp(name, "length"))
        *out = v_int((int64_t)n);
    else if (!strcmp(name, "depth"))
        *out = v_int(L->depth);
    else if (!strcmp(name, "depth0"))
        *out = v_int(L->depth - 1);
    else if (!strcmp(name, "previtem"))
        *out = i ? L->items[i - 1] : v_undef("previtem");
    else if (!strcmp(name, "nextitem"))
        *out = i + 1 < n ? L->items[i + 1] : v_undef("nextitem");
    else if (!strcmp(name, "cycle") || !strcmp(name, "changed"))
        return rerr(C, SNUG_ERR_UNSUPPORTED, "loop.%s used other than as a call", name);
    else
        *out = v_undef(name);
    return SNUG_OK;
}

static bool is_method(const tp_val *v, const char *name) {
    static const char *const str_m[] = {
        "strip", "lstrip", "rstrip", "startswith", "endswith", "split", "upper", "lower", "title",
        "capitalize", "replace", "join", "find", "count", "format", "splitlines", "isdigit",
        "isspace", "isalpha", "isalnum", "islower", "isupper", "encode", "rsplit", "rfind",
        "index", "zfill", "center", "ljust", "rjust", "partition", "casefold", "swapcase", NULL};
    static const char *const dict_m[] = {"get", "items", "keys", "values", "copy", "pop", "setdefault",
                                         "update", "clear", "popitem", "fromkeys", NULL};
    static const char *const list_m[] = {"index", "count", "append", "extend", "insert", "pop",
                                         "remove", "reverse", "sort", "copy", "clear", NULL};
    if (v->kind == TP_STR)
        return tp_name_in(str_m, name);
    if (v->kind == TP_DICT)
        return tp_name_in(dict_m, name);
    if (v->kind == TP_LIST && (v->u.l->kind == TP_L_LIST || v->u.l->kind == TP_L_TUPLE))
        return tp_name_in(list_m, name);
    return false;
}

/* jinja2's environment.getattr: Python's attribute first, then the item. */
static int get_attr(tp_ctx *C, const tp_val *obj, const char *name, tp_val *out) {
    if (obj->kind == TP_UNDEF)
        return undefined_err(C, obj);
    if (obj->kind == TP_LOOP)
        return loop_attr(C, obj->u.loop, name, out);
    if (is_method(obj, name))
        return rerr(C, SNUG_ERR_UNSUPPORTED, "the %s method '%s' used other than as a call", type_name(obj), name);
    if (obj->kind == TP_DICT || obj->kind == TP_NS) {
        tp_val *v = dict_get_str(obj->u.d, name);
        *out = v ? *v : v_undef(name);
        return SNUG_OK;
    }
    *out = v_undef(name);
    return SNUG_OK;
}

static bool index_of(const tp_val *k, size_t n, size_t *at) {
    if (k->kind != TP_INT && k->kind != TP_BOOL)
        return false;
    int64_t i = num_i(k);
    if (i < 0)
        i += (int64_t)n;
    if (i < 0 || i >= (int64_t)n)
        return false;
    *at = (size_t)i;
    return true;
}

/* jinja2's environment.getitem: obj[k], then for a str k the attribute;
 * undefined when neither is there. */
static int get_item(tp_ctx *C, const tp_val *obj, const tp_val *k, tp_val *out) {
    size_t at;
    switch (obj->kind) {
    case TP_UNDEF: return undefined_err(C, obj);
    case TP_DICT:
    case TP_NS: {
        tp_val *v = obj->kind == TP_DICT ? dict_find(obj->u.d, k) : NULL;
        if (v) {
            *out = *v;
            return SNUG_OK;
        }
        break;
    }
    case TP_LIST:
        if (obj->u.l->kind != TP_L_GEN && obj->u.l->kind != TP_L_VIEW && index_of(k, obj->u.l->n, &at)) {
            *out = obj->u.l->v[at];
            return SNUG_OK;
        }
        break;
    case TP_STR:
        if (index_of(k, u8count(obj->u.s.p, obj->u.s.n), &at)) {
            size_t off = u8off(obj->u.s.p, obj->u.s.n, at);
            *out = v_str(obj->u.s.p + off, u8len((unsigned char)obj->u.s.p[off]));
            return SNUG_OK;
        }
        break;
    default: break;
    }
    if (k->kind == TP_STR) {
        char *name = tp_strndup(C->a, k->u.s.p, k->u.s.n);
        if (!name)
            return oom(C);
        return get_attr(C, obj, name, out);
    }
    *out = v_undef(NULL);
    return SNUG_OK;
}

/* Python's slice.indices. */
static int slice_idx(tp_ctx *C, const tp_val *b, const tp_val *e, const tp_val *s, size_t n, int64_t *start,
                     int64_t *stop, int64_t *step) {
    *step = 1;
    if (s && s->kind != TP_NONE) {
        if (s->kind != TP_INT && s->kind != TP_BOOL)
            return rerr(C, SNUG_ERR_TYPE, "slice indices must be integers or None");
        *step = num_i(s);
        if (!*step)
            return rerr(C, SNUG_ERR_TYPE, "slice step cannot be zero");
    }
    int64_t len = (int64_t)n;
    const tp_val *ends[2] = {b, e};
    int64_t *outs[2] = {start, stop};
    for (int j = 0; j < 2; j++) {
        const tp_val *x = ends[j];
        if (!x || x->kind == TP_NONE) {
            *outs[j] = *step < 0 ? (j == 0 ? len - 1 : -1) : (j == 0 ? 0 : len);
            continue;
        }
        if (x->kind != TP_INT && x->kind != TP_BOOL)
            return rerr(C, SNUG_ERR_TYPE, "slice indices must be integers or None");
        int64_t v = num_i(x);
        if (v < 0) {
            v += len;
            if (v < 0)
                v = *step < 0 ? -1 : 0;
        } else if (v >= len) {
            v = *step < 0 ? len - 1 : len;
        }
        *outs[j] = v;
    }
    return SNUG_OK;
}

static int get_slice(tp_ctx *C, const tp_val *obj, const tp_val *b, const tp_val *e, const tp_val *s, tp_val *out) {
    if (obj->kind == TP_UNDEF)
        return undefined_err(C, obj);
    bool is_str = obj->kind == TP_STR;
    if (!is_str && !(obj->kind == TP_LIST && (obj->u.l->kind == TP_L_LIST || obj->u.l->kind == TP_L_TUPLE))) {
        *out = v_undef(NULL); /* jinja2: the TypeError of obj[slice] makes an undefined */
        return SNUG_OK;
    }
    const tp_val *items = NULL;
    size_t n = 0;
    if (is_str)
        SN_TRY(iterate(C, obj, &items, &n));
    else {
        items = obj->u.l->v;
        n = obj->u.l->n;
    }
    int64_t start = 0, stop = 0, step = 1;
    SN_TRY(slice_idx(C, b, e, s, n, &start, &stop, &step));
    size_t cnt = 0;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
        cnt++;
    if (is_str) {
        tp_buf buf = {0};
        SN_TRY(put(C, &buf, "", 0));
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
            SN_TRY(put(C, &buf, items[i].u.s.p, items[i].u.s.n));
        *out = buf_val(&buf);
        return SNUG_OK;
    }
    SN_TRY(new_list(C, obj->u.l->kind, cnt, out));
    size_t k = 0;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
        out->u.l->v[k++] = items[i];
    return SNUG_OK;
}

/* ---- operators ---------------------------------------------------------------------- */

static int overflow(tp_ctx *C) { return rerr(C, SNUG_ERR_UNSUPPORTED, "integer arithmetic beyond 64 bits"); }

static int arith(tp_ctx *C, int op, const tp_val *a, const tp_val *b, tp_val *out) {
    if (a->kind == TP_UNDEF)
        return undefined_err(C, a);
    if (b->kind == TP_UNDEF)
        return undefined_err(C, b);
    if (op == '+' && a->kind == TP_STR && b->kind == TP_STR) {
        char *p = tp_alloc(C->a, a->u.s.n + b->u.s.n + 1);
        if (!p)
            return oom(C);
        memcpy(p, a->u.s.p, a->u.s.n);
        memcpy(p + a->u.s.n, b->u.s.p, b->u.s.n);
        *out = v_str(p, a->u.s.n + b->u.s.n);
        return SNUG_OK;
    }
    if (op == '+' && a->kind == TP_LIST && b->kind == TP_LIST && a->u.l->kind == b->u.l->kind &&
        (a->u.l->kind == TP_L_LIST || a->u.l->kind == TP_L_TUPLE)) {
        SN_TRY(new_list(C, a->u.l->kind, a->u.l->n + b->u.l->n, out));
        if (a->u.l->n)
            memcpy(out->u.l->v, a->u.l->v, a->u.l->n * sizeof(tp_val));
        if (b->u.l->n)
            memcpy(out->u.l->v + a->u.l->n, b->u.l->v, b->u.l->n * sizeof(tp_val));
        return SNUG_OK;
    }
    if (op == '*' && ((a->kind == TP_STR && (b->kind == TP_INT || b->kind == TP_BOOL)) ||
                      (b->kind == TP_STR && (a->kind == TP_INT || a->kind == TP_BOOL)))) {
        const tp_val *s = a->kind == TP_STR ? a : b;
        int64_t k = num_i(a->kind == TP_STR ? b : a);
        if (k < 0)
            k = 0;
        size_t total;
        if (!sn_mul_ok(s->u.s.n, (size_t)k, &total) || total > ((size_t)1 << 30))
            return rerr(C, SNUG_ERR_UNSUPPORTED, "a string repeated to more than 1 GiB");
        tp_buf buf = {0};
        SN_TRY(put(C, &buf, "", 0));
        for (int64_t i = 0; i < k; i++)
            SN_TRY(put(C, &buf, s->u.s.p, s->u.s.n));
        *out = buf_val(&buf);
        return SNUG_OK;
    }
    if (op == '%' && a->kind == TP_STR)
        return rerr(C, SNUG_ERR_UNSUPPORTED, "printf-style string formatting ('...' %% x)");
    if (!is_num(a) || !is_num(b)) {
        static const char *names[] = {"+", "-", "*", "/", "//", "%", "**"};
        const char *ops = "+-*/F%P";
        const char *on = names[strchr(ops, op) - ops];
        return rerr(C, SNUG_ERR_TYPE, "unsupported operand type(s) for %s: '%s' and '%s'", on, type_name(a),
                    type_name(b));
    }
    bool fl = a->kind == TP_FLOAT || b->kind == TP_FLOAT;
    if (op == '/') {
        if (num_f(b) == 0)
            return rerr(C, SNUG_ERR_TYPE, "division by zero");
        *out = v_float(num_f(a) / num_f(b));
        return SNUG_OK;
    }
    if (fl) {
        double x = num_f(a), y = num_f(b), r = 0;
        switch (op) {
        case '+': r = x + y; break;
        case '-': r = x - y; break;
        case '*': r = x * y; break;
        case 'F':
        case '%':
            if (y == 0)
                return rerr(C, SNUG_ERR_TYPE, "float division by zero");
            if (op == 'F') {
                r = floor(x / y);
            } else {
                r = fmod(x, y);
                if (r && ((r < 0) != (y < 0)))
                    r += y;
                else if (!r)
                    r = copysign(0.0, y);
            }
            break;
        case 'P':
            if (x < 0 && y != floor(y))
                return rerr(C, SNUG_ERR_UNSUPPORTED, "a negative number to a fractional power (complex)");
            r = pow(x, y);
            break;
        }
        *out = v_float(r);
        return SNUG_OK;
    }
    int64_t x = num_i(a), y = num_i(b), r = 0;
    switch (op) {
    case '+':
        if (__builtin_add_overflow(x, y, &r))
            return overflow(C);
        break;
    case '-':
        if (__builtin_sub_overflow(x, y, &r))
            return overflow(C);
        break;
    case '*':
        if (__builtin_mul_overflow(x, y, &r))
            return overflow(C);
        break;
    case 'F':
    case '%':
        if (!y)
            return rerr(C, SNUG_ERR_TYPE, "integer division or modulo by zero");
        if (x == INT64_MIN && y == -1)
            return overflow(C);
        r = op == 'F' ? x / y : x % y;
        if (op == 'F' && (x % y) && ((x < 0) != (y < 0)))
            r--;
        if (op == '%' && r && ((r < 0) != (y < 0)))
            r += y;
        break;
    case 'P':
        if (y < 0) {
            if (!x)
                return rerr(C, SNUG_ERR_TYPE, "0 cannot be raised to a negative power");
            *out = v_float(pow((double)x, (double)y));
            return SNUG_OK;
        }
        r = 1;
        for (int64_t i = 0; i < y; i++)
            if (__builtin_mul_overflow(r, x, &r))
                return overflow(C);
        break;
    }
    *out = v_int(r);
    return SNUG_OK;
}

/* a < b and the like: -1, 0, 1, or a TypeError. */
static int compare(tp_ctx *C, const tp_val *a, const tp_val *b, int *out) {
    if (is_num(a) && is_num(b)) {
        if (a->kind != TP_FLOAT && b->kind != TP_FLOAT) {
            int64_t x = num_i(a), y = num_i(b);
            *out = (x > y) - (x < y);
        } else {
            double x = num_f(a), y = num_f(b);
            *out = (x > y) - (x < y);
        }
        return SNUG_OK;
    }
    if (a->kind == TP_STR && b->kind == TP_STR) {
        int c = cmp_str(a, b);
        *out = (c > 0) - (c < 0);
        return SNUG_OK;
    }
    if (a->kind == TP_LIST && b->kind == TP_LIST && a->u.l->kind == b->u.l->kind &&
        (a->u.l->kind == TP_L_LIST || a->u.l->kind == TP_L_TUPLE)) {
        size_t n = a->u.l->n < b->u.l->n ? a->u.l->n : b->u.l->n;
        for (size_t i = 0; i < n; i++) {
            if (val_eq(&a->u.l->v[i], &b->u.l->v[i]))
                continue;
            return compare(C, &a->u.l->v[i], &b->u.l->v[i], out);
        }
        *out = (a->u.l->n > b->u.l->n) - (a->u.l->n < b->u.l->n);
        return SNUG_OK;
    }
    if (a->kind == TP_UNDEF)
        return undefined_err(C, a);
    if (b->kind == TP_UNDEF)
        return undefined_err(C, b);
    return rerr(C, SNUG_ERR_TYPE, "'<' not supported between instances of '%s' and '%s'", type_name(a), type_name(b));
}

static int contains(tp_ctx *C, const tp_val *item, const tp_val *seq, bool *out) {
    *out = false;
    if (seq->kind == TP_STR) {
        if (item->kind != TP_STR)
            return item->kind == TP_UNDEF ? undefined_err(C, item)
                                          : rerr(C, SNUG_ERR_TYPE, "'in <string>' requires string as left operand, not %s",
                                                 type_name(item));
        if (!item->u.s.n) {
            *out = true;
            return SNUG_OK;
        }
        *out = memmem(seq->u.s.p, seq->u.s.n, item->u.s.p, item->u.s.n) != NULL;
        return SNUG_OK;
    }
    if (seq->kind == TP_DICT || seq->kind == TP_UNDEF) {
        *out = seq->kind == TP_DICT && dict_find(seq->u.d, item);
        return SNUG_OK;
    }
    if (seq->kind == TP_LIST) {
        tp_list *l = seq->u.l;
        size_t from = l->kind == TP_L_GEN ? l->pos : 0;
        for (size_t i = from; i < l->n; i++)
            if (val_eq(item, &l->v[i])) {
                *out = true;
                if (l->kind == TP_L_GEN)
                    l->pos = i + 1;
                return SNUG_OK;
            }
        if (l->kind == TP_L_GEN)
            l->pos = l->n;
        return SNUG_OK;
    }
    return rerr(C, SNUG_ERR_TYPE, "argument of type '%s' is not iterable", type_name(seq));
}

/* ---- evaluation ---------------------------------------------------------------------- */

static int eval(tp_ctx *C, const tp_node *n, tp_scope *sc, tp_val *out);
static int exec_body(tp_ctx *C, const tp_node *n, tp_scope *sc, tp_buf *b);

/* Binds a call's arguments to parameter names: vals[i] and set[i] for
 * names[i]. */
static int bind(tp_ctx *C, const tp_args *args, tp_scope *sc, const char *what, const char *const *names, int nn,
                tp_val *vals, bool *set) {
    for (int i = 0; i < nn; i++) {
        set[i] = false;
        vals[i] = v_undef(names[i]);
    }
    if (args->npos > nn)
        return rerr(C, SNUG_ERR_TYPE, "%s takes at most %d positional arguments, %d given", what, nn, args->npos);
    for (int i = 0; i < args->n; i++) {
        int at = i;
        if (i >= args->npos) {
            for (at = 0; at < nn && strcmp(names[at], args->names[i]); at++)
                ;
            if (at == nn)
                return rerr(C, SNUG_ERR_TYPE, "%s got an unexpected keyword argument '%s'", what, args->names[i]);
        }
        if (set[at])
            return rerr(C, SNUG_ERR_TYPE, "%s got multiple values for argument '%s'", what, names[at]);
        SN_TRY(eval(C, args->v[i], sc, &vals[at]));
        set[at] = true;
    }
    return SNUG_OK;
}

/* The positional arguments only, all of them. */
static int eval_positional(tp_ctx *C, const tp_args *args, tp_scope *sc, const char *what, tp_val **vals) {
    if (args->npos < args->n)
        return rerr(C, SNUG_ERR_UNSUPPORTED, "keyword arguments to %s", what);
    *vals = tp_alloc(C->a, (size_t)(args->n ? args->n : 1) * sizeof **vals);
    if (!*vals)
        return oom(C);
    for (int i = 0; i < args->n; i++)
        SN_TRY(eval(C, args->v[i], sc, &(*vals)[i]));
    return SNUG_OK;
}

static int need_str(tp_ctx *C, const tp_val *v, const char *what) {
    if (v->kind == TP_STR)
        return SNUG_OK;
    if (v->kind == TP_UNDEF)
        return undefined_err(C, v);
    return rerr(C, SNUG_ERR_TYPE, "%s wants a string, not %s", what, type_name(v));
}

static int need_int(tp_ctx *C, const tp_val *v, const char *what) {
    if (v->kind == TP_INT || v->kind == TP_BOOL)
        return SNUG_OK;
    if (v->kind == TP_UNDEF)
        return undefined_err(C, v);
    return rerr(C, SNUG_ERR_TYPE, "%s wants an integer, not %s", what, type_name(v));
}

/* ---- str methods ---- */

/* Whether code point c is in chars (a str), or whitespace when chars is NULL. */
static bool strip_char(uint32_t c, const tp_val *chars) {
    if (!chars)
        return py_space(c);
    for (size_t i = 0; i < chars->u.s.n;) {
        size_t k;
        if (u8dec(chars->u.s.p + i, &k) == c)
            return true;
        i += k;
    }
    return false;
}

static tp_val do_strip(tp_val s, const tp_val *chars, bool left, bool right) {
    size_t b = 0, e = s.u.s.n;
    while (left && b < e) {
        size_t k;
        if (!strip_char(u8dec(s.u.s.p + b, &k), chars))
            break;
        b += k;
    }
    while (right && e > b) {
        size_t st = e - 1, k;
        while (st > b && ((unsigned char)s.u.s.p[st] & 0xc0) == 0x80)
            st--;
        if (!strip_char(u8dec(s.u.s.p + st, &k), chars))
            break;
        e = st;
    }
    return v_str(s.u.s.p + b, e - b);
}

static int do_replace(tp_ctx *C, tp_val s, tp_val old, tp_val rep, int64_t count, tp_val *out) {
    tp_buf b = {0};
    SN_TRY(put(C, &b, "", 0));
    size_t i = 0;
    int64_t done = 0;
    if (!old.u.s.n) {
        /* Python puts the replacement before every character and at the end */
        while (count < 0 || done < count) {
            SN_TRY(put(C, &b, rep.u.s.p, rep.u.s.n));
            done++;
            if (i >= s.u.s.n)
                break;
            size_t k = u8len((unsigned char)s.u.s.p[i]);
            SN_TRY(put(C, &b, s.u.s.p + i, k));
            i += k;
        }
        SN_TRY(put(C, &b, s.u.s.p + i, s.u.s.n - i));
        *out = buf_val(&b);
        return SNUG_OK;
    }
    while (i <= s.u.s.n && (count < 0 || done < count)) {
        const char *f = memmem(s.u.s.p + i, s.u.s.n - i, old.u.s.p, old.u.s.n);
        if (!f)
            break;
        size_t at = (size_t)(f - s.u.s.p);
        SN_TRY(put(C, &b, s.u.s.p + i, at - i));
        SN_TRY(put(C, &b, rep.u.s.p, rep.u.s.n));
        i = at + old.u.s.n;
        done++;
    }
    SN_TRY(put(C, &b, s.u.s.p + i, s.u.s.n - i));
    *out = buf_val(&b);
    return SNUG_OK;
}

static int list_push(tp_ctx *C, tp_val *list, size_t *cap, tp_val v) {
    tp_list *l = list->u.l;
    if (l->n == *cap) {
        size_t nc = *cap ? 2 * *cap : 8;
        tp_val *nv = tp_alloc(C->a, nc * sizeof *nv);
        if (!nv)
            return oom(C);
        if (l->n)
            memcpy(nv, l->v, l->n * sizeof *nv);
        l->v = nv;
        *cap = nc;
    }
    l->v[l->n++] = v;
    return SNUG_OK;
}

static int do_split(tp_ctx *C, tp_val s, const tp_val *sep, int64_t maxsplit, tp_val *out) {
    SN_TRY(new_list(C, TP_L_LIST, 0, out));
    size_t cap = 0, i = 0, n = s.u.s.n;
    int64_t done = 0;
    if (!sep) {
        for (;;) {
            size_t k;
            while (i < n && py_space(u8dec(s.u.s.p + i, &k)))
                i += k;
            if (i >= n)
                break;
            size_t st = i;
            if (maxsplit >= 0 && done >= maxsplit) {
                tp_val rest = do_strip(v_str(s.u.s.p + st, n - st), NULL, false, true);
                return list_push(C, out, &cap, rest);
            }
            while (i < n && !py_space(u8dec(s.u.s.p + i, &k)))
                i += k;
            SN_TRY(list_push(C, out, &cap, v_str(s.u.s.p + st, i - st)));
            done++;
        }
        return SNUG_OK;
    }
    if (!sep->u.s.n)
        return rerr(C, SNUG_ERR_TYPE, "split: empty separator");
    for (;;) {
        const char *f = maxsplit >= 0 && done >= maxsplit ? NULL : memmem(s.u.s.p + i, n - i, sep->u.s.p, sep->u.s.n);
        if (!f)
            return list_push(C, out, &cap, v_str(s.u.s.p + i, n - i));
        size_t at = (size_t)(f - s.u.s.p);
        SN_TRY(list_push(C, out, &cap, v_str(s.u.s.p + i, at - i)));
        i = at + sep->u.s.n;
        done++;
    }
}

static int str_method(tp_ctx *C, const tp_val *s, const char *name, const tp_args *args, tp_scope *sc,
                      tp_val *out) {
    tp_val a[3];
    bool set[3];
    char what[64];
    snprintf(what, sizeof what, "str.%s", name);
    if (!strcmp(name, "strip") || !strcmp(name, "lstrip") || !strcmp(name, "rstrip")) {
        static const char *const p[] = {"chars"};
        SN_TRY(bind(C, args, sc, what, p, 1, a, set));
        bool has = set[0] && a[0].kind != TP_NONE;
        if (has)
            SN_TRY(need_str(C, &a[0], what));
        *out = do_strip(*s, has ? &a[0] : NULL, name[0] != 'r', name[0] != 'l');
        return SNUG_OK;
    }
    if (!strcmp(name, "startswith") || !strcmp(name, "endswith")) {
        static const char *const p[] = {"prefix"};
        SN_TRY(bind(C, args, sc, what, p, 1, a, set));
        const tp_val *cands = &a[0];
        size_t nc = 1;
        if (a[0].kind == TP_LIST && a[0].u.l->kind == TP_L_TUPLE) {
            cands = a[0].u.l->v;
            nc = a[0].u.l->n;
        }
        bool r = false;
        for (size_t i = 0; i < nc; i++) {
            SN_TRY(need_str(C, &cands[i], what));
            size_t k = cands[i].u.s.n;
            if (k <= s->u.s.n &&
                !memcmp(name[0] == 's' ? s->u.s.p : s->u.s.p + s->u.s.n - k, cands[i].u.s.p, k))
                r = true;
        }
        *out = v_bool(r);
        return SNUG_OK;
    }
    if (!strcmp(name, "split")) {
        static const char *const p[] = {"sep", "maxsplit"};
        SN_TRY(bind(C, args, sc, what, p, 2, a, set));
        bool has = set[0] && a[0].kind != TP_NONE;
        if (has)
            SN_TRY(need_str(C, &a[0], what));
        if (set[1])
            SN_TRY(need_int(C, &a[1], what));
        return do_split(C, *s, has ? &a[0] : NULL, set[1] ? num_i(&a[1]) : -1, out);
    }
    if (!strcmp(name, "upper") || !strcmp(name, "lower") || !strcmp(name, "title") || !strcmp(name, "capitalize")) {
        SN_TRY(bind(C, args, sc, what, NULL, 0, a, set));
        int mode = name[0] == 'u' ? CASE_UPPER : name[0] == 'l' ? CASE_LOWER : name[0] == 't' ? CASE_TITLE : CASE_CAPITALIZE;
        return case_map(C, *s, mode, out);
    }
    if (!strcmp(name, "replace")) {
        static const char *const p[] = {"old", "new", "count"};
        SN_TRY(bind(C, args, sc, what, p, 3, a, set));
        SN_TRY(need_str(C, &a[0], what));
        SN_TRY(need_str(C, &a[1], what));
        if (set[2])
            SN_TRY(need_int(C, &a[2], what));
        return do_replace(C, *s, a[0], a[1], set[2] ? num_i(&a[2]) : -1, out);
    }
    if (!strcmp(name, "find") || !strcmp(name, "count")) {
        static const char *const p[] = {"sub"};
        SN_TRY(bind(C, args, sc, what, p, 1, a, set));
        SN_TRY(need_str(C, &a[0], what));
        const char *hay = s->u.s.p;
        size_t n = s->u.s.n, k = a[0].u.s.n;
        if (name[0] == 'f') {
            const char *f = k ? memmem(hay, n, a[0].u.s.p, k) : hay;
            *out = v_int(f ? (int64_t)u8count(hay, (size_t)(f - hay)) : -1);
            return SNUG_OK;
        }
        int64_t cnt = 0;
        if (!k) {
            cnt = (int64_t)u8count(hay, n) + 1;
        } else {
            for (const char *f = hay; (f = memmem(f, n - (size_t)(f - hay), a[0].u.s.p, k)) != NULL; f += k)
                cnt++;
        }
        *out = v_int(cnt);
        return SNUG_OK;
    }
    if (!strcmp(name, "join")) {
        static const char *const p[] = {"iterable"};
        SN_TRY(bind(C, args, sc, what, p, 1, a, set));
        const tp_val *items;
        size_t n;
        if (a[0].kind == TP_UNDEF)
            return undefined_err(C, &a[0]);
        SN_TRY(iterate(C, &a[0], &items, &n));
        tp_buf b = {0};
        SN_TRY(put(C, &b, "", 0));
        for (size_t i = 0; i < n; i++) {
            SN_TRY(need_str(C, &items[i], what));
            if (i)
                SN_TRY(put(C, &b, s->u.s.p, s->u.s.n));
            SN_TRY(put(C, &b, items[i].u.s.p, items[i].u.s.n));
        }
        *out = buf_val(&b);
        return SNUG_OK;
    }
    return rerr(C, SNUG_ERR_UNSUPPORTED, "the str method '%s' is not supported", name);
}

static int dict_method(tp_ctx *C, const tp_val *d, const char *name, const tp_args *args, tp_scope *sc,
                       tp_val *out) {
    tp_val a[2];
    bool set[2];
    char what[64];
    snprintf(what, sizeof what, "dict.%s", name);
    if (!strcmp(name, "get")) {
        static const char *const p[] = {"key", "default"};
        SN_TRY(bind(C, args, sc, what, p, 2, a, set));
        if (!set[0])
            return rerr(C, SNUG_ERR_TYPE, "dict.get needs a key");
        tp_val *v = dict_find(d->u.d, &a[0]);
        *out = v ? *v : set[1] ? a[1] : v_none();
        return SNUG_OK;
    }
    if (!strcmp(name, "items") || !strcmp(name, "keys") || !strcmp(name, "values")) {
        SN_TRY(bind(C, args, sc, what, NULL, 0, a, set));
        const tp_dict *dd = d->u.d;
        SN_TRY(new_list(C, TP_L_VIEW, dd->n, out));
        for (size_t i = 0; i < dd->n; i++) {
            if (name[0] == 'i') {
                tp_val t;
                SN_TRY(new_list(C, TP_L_TUPLE, 2, &t));
                t.u.l->v[0] = dd->k[i];
                t.u.l->v[1] = dd->v[i];
                out->u.l->v[i] = t;
            } else {
                out->u.l->v[i] = name[0] == 'k' ? dd->k[i] : dd->v[i];
            }
        }
        return SNUG_OK;
    }
    return rerr(C, SNUG_ERR_UNSUPPORTED, "the dict method '%s' is not supported (the sandbox refuses the ones that change a dict)", name);
}

/* ---- calls ---- */

static int call_macro(tp_ctx *C, const tp_val *mv, const tp_args *args, tp_scope *sc, tp_val *out) {
    const tp_macro *m = mv->u.mac.m;
    if (C->depth >= TP_MAX_CALL_DEPTH)
        return rerr(C, SNUG_ERR_UNSUPPORTED, "macro calls nested more than %d deep", TP_MAX_CALL_DEPTH);
    char what[96];
    snprintf(what, sizeof what, "macro '%s'", m->name);
    tp_val *vals = tp_alloc(C->a, (size_t)(m->nparams ? m->nparams : 1) * sizeof *vals);
    bool *set = tp_alloc(C->a, (size_t)(m->nparams ? m->nparams : 1) * sizeof *set);
    if (!vals || !set)
        return oom(C);
    SN_TRY(bind(C, args, sc, what, m->params, m->nparams, vals, set));
    tp_scope *ms = NULL;
    SN_TRY(scope_new(C, mv->u.mac.scope, &ms));
    for (int i = 0; i < m->nparams; i++) {
        if (!set[i] && m->defaults[i])
            SN_TRY(eval(C, m->defaults[i], ms, &vals[i]));
        SN_TRY(scope_set(C, ms, m->params[i], vals[i]));
    }
    tp_buf b = {0};
    SN_TRY(put(C, &b, "", 0));
    int saved_loops = C->loop_depth, line = C->line;
    C->depth++;
    C->loop_depth = 0;
    int rc = exec_body(C, m->body, ms, &b);
    C->depth--;
    C->loop_depth = saved_loops;
    C->line = line;
    if (rc == TP_BREAK || rc == TP_CONTINUE)
        return rerr(C, SNUG_ERR_PARSE, "{%% %s %%} outside a loop in macro '%s'", rc == TP_BREAK ? "break" : "continue", m->name);
    SN_TRY(rc);
    *out = buf_val(&b);
    return SNUG_OK;
}

static int call_func(tp_ctx *C, tp_func fn, const tp_args *args, tp_scope *sc, tp_val *out) {
    tp_val *v = NULL;
    switch (fn) {
    case TP_F_RANGE: {
        SN_TRY(eval_positional(C, args, sc, "range()", &v));
        if (args->n < 1 || args->n > 3)
            return rerr(C, SNUG_ERR_TYPE, "range expected 1 to 3 arguments, got %d", args->n);
        for (int i = 0; i < args->n; i++)
            SN_TRY(need_int(C, &v[i], "range()"));
        int64_t start = args->n > 1 ? num_i(&v[0]) : 0, stop = num_i(&v[args->n > 1 ? 1 : 0]),
                step = args->n > 2 ? num_i(&v[2]) : 1;
        if (!step)
            return rerr(C, SNUG_ERR_TYPE, "range() arg 3 must not be zero");
        int64_t cnt = step > 0 ? (stop > start ? (stop - start + step - 1) / step : 0)
                               : (start > stop ? (start - stop - step - 1) / -step : 0);
        if (cnt > 100000) /* the sandbox's MAX_RANGE */
            return rerr(C, SNUG_ERR_TYPE, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
        SN_TRY(new_list(C, TP_L_RANGE, (size_t)cnt, out));
        out->u.l->start = start;
        out->u.l->stop = stop;
        out->u.l->step = step;
        for (int64_t i = 0; i < cnt; i++)
            out->u.l->v[i] = v_int(start + i * step);
        return SNUG_OK;
    }
    case TP_F_NAMESPACE:
    case TP_F_DICT: {
        SN_TRY(new_dict(C, fn == TP_F_NAMESPACE ? TP_NS : TP_DICT, out));
        if (args->npos > 1)
            return rerr(C, SNUG_ERR_TYPE, "%s takes at most one positional argument", fn == TP_F_DICT ? "dict()" : "namespace()");
        if (args->npos == 1) {
            tp_val init;
            SN_TRY(eval(C, args->v[0], sc, &init));
            if (init.kind != TP_DICT)
                return rerr(C, SNUG_ERR_UNSUPPORTED, "%s from a %s", fn == TP_F_DICT ? "dict()" : "namespace()", type_name(&init));
            for (size_t i = 0; i < init.u.d->n; i++)
                if (!tp_dict_put(C->a, out->u.d, init.u.d->k[i], init.u.d->v[i]))
                    return oom(C);
        }
        for (int i = args->npos; i < args->n; i++) {
            tp_val x;
            SN_TRY(eval(C, args->v[i], sc, &x));
            if (!tp_dict_put(C->a, out->u.d, v_str(args->names[i], strlen(args->names[i])), x))
                return oom(C);
        }
        return SNUG_OK;
    }
    case TP_F_RAISE: {
        SN_TRY(eval_positional(C, args, sc, "raise_exception()", &v));
        tp_val msg = v_str("", 0);
        if (args->n)
            SN_TRY(str_of(C, &v[0], &msg));
        return rerr(C, SNUG_ERR_INVALID_ARG, "raise_exception: %.*s", (int)msg.u.s.n, msg.u.s.p);
    }
    case TP_F_STRFTIME: {
        SN_TRY(eval_positional(C, args, sc, "strftime_now()", &v));
        if (args->n != 1)
            return rerr(C, SNUG_ERR_TYPE, "strftime_now takes one argument");
        SN_TRY(need_str(C, &v[0], "strftime_now()"));
        char fmt[256], res[512];
        if (v[0].u.s.n >= sizeof fmt || memchr(v[0].u.s.p, 0, v[0].u.s.n))
            return rerr(C, SNUG_ERR_UNSUPPORTED, "a strftime_now format this long or with a NUL");
        memcpy(fmt, v[0].u.s.p, v[0].u.s.n);
        fmt[v[0].u.s.n] = 0;
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        size_t k = strftime(res, sizeof res, fmt, &tm);
        if (!k && fmt[0])
            return rerr(C, SNUG_ERR_UNSUPPORTED, "strftime_now('%s') gives nothing or too much", fmt);
        char *p = tp_strndup(C->a, res, k);
        if (!p)
            return oom(C);
        *out = v_str(p, k);
        return SNUG_OK;
    }
    }
    return rerr(C, SNUG_ERR_INTERNAL, "unknown function");
}

static int call_value(tp_ctx *C, const tp_val *f, const tp_args *args, tp_scope *sc, tp_val *out) {
    if (f->kind == TP_MACRO)
        return call_macro(C, f, args, sc, out);
    if (f->kind == TP_FUNC)
        return call_func(C, f->u.fn, args, sc, out);
    if (f->kind == TP_UNDEF)
        return undefined_err(C, f);
    return rerr(C, SNUG_ERR_TYPE, "'%s' object is not callable", type_name(f));
}

static int eval_call(tp_ctx *C, const tp_node *n, tp_scope *sc, tp_val *out) {
    if (n->a->kind == TP_N_ATTR) {
        tp_val obj;
        SN_TRY(eval(C, n->a->a, sc, &obj));
        C->line = n->line;
        const char *name = n->a->s;
        if (obj.kind == TP_STR && is_method(&obj, name))
            return str_method(C, &obj, name, &n->args, sc, out);
        if (obj.kind == TP_DICT && is_method(&obj, name))
            return dict_method(C, &obj, name, &n->args, sc, out);
        if (obj.kind == TP_LIST && is_method(&obj, name))
            return rerr(C, SNUG_ERR_UNSUPPORTED, "the list method '%s' is not supported", name);
        if (obj.kind == TP_LOOP && !strcmp(name, "cycle")) {
            tp_val *v = NULL;
            SN_TRY(eval_positional(C, &n->args, sc, "loop.cycle()", &v));
            if (!n->args.n)
                return rerr(C, SNUG_ERR_TYPE, "no items for cycling given");
            *out = v[obj.u.loop->i % (size_t)n->args.n];
            return SNUG_OK;
        }
        tp_val f;
        SN_TRY(get_attr(C, &obj, name, &f));
        return call_value(C, &f, &n->args, sc, out);
    }
    tp_val f;
    SN_TRY(eval(C, n->a, sc, &f));
    C->line = n->line;
    return call_value(C, &f, &n->args, sc, out);
}

static int lookup(tp_ctx *C, tp_scope *sc, const char *name, tp_val *out) {
    tp_val *v = scope_find(sc, name);
    if (v) {
        *out = *v;
        return SNUG_OK;
    }
    static const struct {
        const char *name;
        tp_func fn;
    } globals[] = {{"range", TP_F_RANGE},
                   {"namespace", TP_F_NAMESPACE},
                   {"dict", TP_F_DICT},
                   {"raise_exception", TP_F_RAISE},
                   {"strftime_now", TP_F_STRFTIME}};
    for (size_t i = 0; i < sizeof globals / sizeof *globals; i++)
        if (!strcmp(name, globals[i].name)) {
            out->kind = TP_FUNC;
            out->u.fn = globals[i].fn;
            return SNUG_OK;
        }
    if (!strcmp(name, "lipsum") || !strcmp(name, "cycler") || !strcmp(name, "joiner"))
        return rerr(C, SNUG_ERR_UNSUPPORTED, "the global '%s' is not supported", name);
    *out = v_undef(name);
    return SNUG_OK;
}

/* ---- tests ---- */

static int run_test(tp_ctx *C, const char *name, const tp_val *v, const tp_val *args, int nargs, bool *out) {
    const tp_val *a = nargs ? &args[0] : NULL;
    bool needs_arg = false;
    int c = 0;
    if (!strcmp(name, "defined") || !strcmp(name, "undefined"))
        *out = (v->kind != TP_UNDEF) == (name[0] == 'd');
    else if (!strcmp(name, "none"))
        *out = v->kind == TP_NONE;
    else if (!strcmp(name, "boolean"))
        *out = v->kind == TP_BOOL;
    else if (!strcmp(name, "true") || !strcmp(name, "false"))
        *out = v->kind == TP_BOOL && v->u.b == (name[0] == 't');
    else if (!strcmp(name, "string"))
        *out = v->kind == TP_STR;
    else if (!strcmp(name, "number"))
        *out = is_num(v);
    else if (!strcmp(name, "integer"))
        *out = v->kind == TP_INT;
    else if (!strcmp(name, "float"))
        *out = v->kind == TP_FLOAT;
    else if (!strcmp(name, "mapping"))
        *out = v->kind == TP_DICT;
    else if (!strcmp(name, "iterable"))
        *out = v->kind == TP_STR || v->kind == TP_LIST || v->kind == TP_DICT || v->kind == TP_UNDEF;
    else if (!strcmp(name, "sequence"))
        *out = v->kind == TP_STR || v->kind == TP_DICT || v->kind == TP_UNDEF ||
               (v->kind == TP_LIST && v->u.l->kind != TP_L_GEN && v->u.l->kind != TP_L_VIEW);
    else if (!strcmp(name, "callable"))
        *out = v->kind == TP_FUNC || v->kind == TP_MACRO;
    else if (!strcmp(name, "odd") || !strcmp(name, "even")) {
        SN_TRY(need_int(C, v, name));
        *out = (num_i(v) % 2 != 0) == (name[0] == 'o');
    } else if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        /* str.islower / isupper: some cased character, none of the other case */
        tp_val s;
        SN_TRY(str_of(C, v, &s));
        bool any = false, ok = true;
        for (size_t i = 0; i < s.u.s.n;) {
            size_t k;
            uint32_t ch = u8dec(s.u.s.p + i, &k);
            utf8proc_category_t cat = utf8proc_category((utf8proc_int32_t)ch);
            if (cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LT)
                ok = ok && name[0] == 'u' && cat == UTF8PROC_CATEGORY_LU, any = true;
            else if (cat == UTF8PROC_CATEGORY_LL)
                ok = ok && name[0] == 'l', any = true;
            i += k;
        }
        *out = any && ok;
    } else {
        needs_arg = true;
    }
    if (!needs_arg)
        return SNUG_OK;
    if (!a)
        return rerr(C, SNUG_ERR_TYPE, "the test '%s' needs an argument", name);
    if (!strcmp(name, "sameas")) {
        /* identity: the singletons None, True, False; CPython's small ints */
        *out = v->kind == a->kind && (v->kind == TP_NONE || v->kind == TP_UNDEF ? v->kind == TP_NONE
                                      : v->kind == TP_BOOL ? v->u.b == a->u.b
                                      : v->kind == TP_INT ? v->u.i == a->u.i && v->u.i >= -5 && v->u.i <= 256
                                      : v->kind == TP_LIST ? v->u.l == a->u.l
                                      : (v->kind == TP_DICT || v->kind == TP_NS) ? v->u.d == a->u.d
                                      : false);
    } else if (!strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "==")) {
        *out = val_eq(v, a);
    } else if (!strcmp(name, "ne") || !strcmp(name, "!=")) {
        *out = !val_eq(v, a);
    } else if (!strcmp(name, "in")) {
        SN_TRY(contains(C, v, a, out));
    } else if (!strcmp(name, "divisibleby")) {
        SN_TRY(need_int(C, v, name));
        SN_TRY(need_int(C, a, name));
        if (!num_i(a))
            return rerr(C, SNUG_ERR_TYPE, "integer division or modulo by zero");
        *out = num_i(v) % num_i(a) == 0;
    } else {
        SN_TRY(compare(C, v, a, &c));
        if (!strcmp(name, "lt") || !strcmp(name, "lessthan") || !strcmp(name, "<"))
            *out = c < 0;
        else if (!strcmp(name, "le") || !strcmp(name, "<="))
            *out = c <= 0;
        else if (!strcmp(name, "gt") || !strcmp(name, "greaterthan") || !strcmp(name, ">"))
            *out = c > 0;
        else
            *out = c >= 0;
    }
    return SNUG_OK;
}

/* ---- filters ---- */

/* select/reject/selectattr/rejectattr: args[0..) after the attribute. */
static int filter_select(tp_ctx *C, const char *fname, const tp_val *seq, const tp_val *args, int nargs,
                         tp_val *out) {
    bool by_attr = strstr(fname, "attr") != NULL, keep = fname[0] == 's';
    int at = 0;
    const char *attr = NULL;
    if (by_attr) {
        if (nargs < 1)
            return rerr(C, SNUG_ERR_TYPE, "%s needs an attribute name", fname);
        SN_TRY(need_str(C, &args[0], fname));
        if (memchr(args[0].u.s.p, '.', args[0].u.s.n))
            return rerr(C, SNUG_ERR_UNSUPPORTED, "%s with a dotted attribute", fname);
        attr = tp_strndup(C->a, args[0].u.s.p, args[0].u.s.n);
        if (!attr)
            return oom(C);
        at = 1;
    }
    const char *test = NULL;
    if (nargs > at) {
        SN_TRY(need_str(C, &args[at], fname));
        test = tp_strndup(C->a, args[at].u.s.p, args[at].u.s.n);
        if (!test)
            return oom(C);
        if (!tp_name_in(tp_test_names, test))
            return rerr(C, SNUG_ERR_UNSUPPORTED, "test '%s' (in %s) is not supported", test, fname);
        at++;
    }
    const tp_val *items;
    size_t n;
    SN_TRY(iterate(C, seq, &items, &n));
    SN_TRY(new_list(C, TP_L_GEN, 0, out));
    size_t cap = 0;
    for (size_t i = 0; i < n; i++) {
        tp_val x = items[i];
        if (attr)
            SN_TRY(get_attr(C, &items[i], attr, &x));
        bool r;
        if (test)
            SN_TRY(run_test(C, test, &x, args + at, nargs - at, &r));
        else
            r = truthy(&x);
        if (r == keep)
            SN_TRY(list_push(C, out, &cap, items[i]));
    }
    return SNUG_OK;
}

static int apply_filter(tp_ctx *C, const tp_node *n, tp_val v, tp_scope *sc, tp_val *out);

static int filter_by_name(tp_ctx *C, const char *name, tp_val v, tp_val *out) {
    /* map('lower') and the like: the filter with no arguments */
    tp_node fake = {.kind = TP_N_FILTER, .line = C->line, .s = name};
    return apply_filter(C, &fake, v, NULL, out);
}

static int apply_filter(tp_ctx *C, const tp_node *n, tp_val v, tp_scope *sc, tp_val *out) {
    const char *f = n->s;
    const tp_args *args = &n->args;
    tp_val a[5];
    bool set[5];
    char what[64];
    snprintf(what, sizeof what, "the filter '%s'", f);
    C->line = n->line;
    if (!strcmp(f, "default") || !strcmp(f, "d")) {
        static const char *const p[] = {"default_value", "boolean"};
        SN_TRY(bind(C, args, sc, what, p, 2, a, set));
        bool use = v.kind == TP_UNDEF || (set[1] && truthy(&a[1]) && !truthy(&v));
        *out = use ? (set[0] ? a[0] : v_str("", 0)) : v;
        return SNUG_OK;
    }
    if (!strcmp(f, "length") || !strcmp(f, "count")) {
        SN_TRY(bind(C, args, sc, what, NULL, 0, a, set));
        switch (v.kind) {
        case TP_UNDEF: *out = v_int(0); return SNUG_OK;
        case TP_STR: *out = v_int((int64_t)u8count(v.u.s.p, v.u.s.n)); return SNUG_OK;
        case TP_DICT: *out = v_int((int64_t)v.u.d->n); return SNUG_OK;
        case TP_LIST:
            if (v.u.l->kind != TP_L_GEN) {
                *out = v_int((int64_t)v.u.l->n);
                return SNUG_OK;
            }
            break;
        default: break;
        }
        return rerr(C, SNUG_ERR_TYPE, "object of type '%s' has no len()", type_name(&v));
    }
    if (!strcmp(f, "upper") || !strcmp(f, "lower") || !strcmp(f, "capitalize") || !strcmp(f, "title")) {
        SN_TRY(bind(C, args, sc, what, NULL, 0, a, set));
        tp_val s;
        SN_TRY(str_of(C, &v, &s));
        int mode = f[0] == 'u' ? CASE_UPPER : f[0] == 'l' ? CASE_LOWER : f[0] == 'c' ? CASE_CAPITALIZE : CASE_JTITLE;
        return case_map(C, s, mode, out);
    }
    if (!strcmp(f, "trim")) {
        static const char *const p[] = {"chars"};
        SN_TRY(bind(C, args, sc, what, p, 1, a, set));
        tp_val s;
        SN_TRY(str_of(C, &v, &s));
        bool has = set[0] && a[0].kind != TP_NONE;
        if (has)
            SN_TRY(need_str(C, &a[0], what));
        *out = do_strip(s, has ? &a[0] : NULL, true, true);
        return SNUG_OK;
    }
    if (!strcmp(f, "string")) {
        SN_TRY(bind(C, args, sc, what, NULL, 0, a, set));
        return str_of(C, &v, out);
    }
    if (!strcmp(f, "replace")) {
        static const char *const p[] = {"old", "new", "count"};
        SN_TRY(bind(C, args, sc, what, p, 3, a, set));
        tp_val s, o, r;
        SN_TRY(str_of(C, &v, &s));
        SN_TRY(str_of(C, &a[0], &o));
        SN_TRY(str_of(C, &a[1], &r));
        if (set[2] && a[2].kind != TP_NONE)
            SN_TRY(need_int(C, &a[2], what));
        return do_replace(C, s, o, r, set[2] && a[2].kind != TP_NONE ? num_i(&a[2]) : -1, out);
    }
    if (!strcmp(f, "tojson")) {
        /* transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None,
         * separators=None, sort_keys=False) */
        static const char *const p[] = {"ensure_ascii", "indent", "separators", "sort_keys"};
        SN_TRY(bind(C, args, sc, what, p, 4, a, set));
        json_opt o = {.ensure_ascii = set[0] && truthy(&a[0]), .sort_keys = set[3] && truthy(&a[3])};
        if (set[1] && a[1].kind != TP_NONE) {
            o.has_indent = true;
            if (a[1].kind == TP_STR) {
                o.indent = a[1];
            } else {
                SN_TRY(need_int(C, &a[1], what));
                int64_t w = num_i(&a[1]);
                if (w > 64)
                    return rerr(C, SNUG_ERR_UNSUPPORTED, "tojson(indent=%lld)", (long long)w);
                char *sp = tp_alloc(C->a, 65);
                if (!sp)
                    return oom(C);
                memset(sp, ' ', w > 0 ? (size_t)w : 0);
                o.indent = v_str(sp, w > 0 ? (size_t)w : 0);
            }
        }
        o.isep = o.has_indent ? v_str(",", 1) : v_str(", ", 2);
        o.ksep = v_str(": ", 2);
        if (set[2] && a[2].kind != TP_NONE) {
            if (a[2].kind != TP_LIST || a[2].u.l->n != 2 || a[2].u.l->v[0].kind != TP_STR || a[2].u.l->v[1].kind != TP_STR)
                return rerr(C, SNUG_ERR_TYPE, "tojson: separators must be a pair of strings");
            o.isep = a[2].u.l->v[0];
            o.ksep = a[2].u.l->v[1];
        }
        tp_buf b = {0};
        SN_TRY(put(C, &b, "", 0));
        SN_TRY(json_dump(C, &v, &o, 0, &b));
        *out = buf_val(&b);
        return SNUG_OK;
    }
    if (!strcmp(f, "join")) {
        static const char *const p[] = {"d", "attribute"};
        SN_TRY(bind(C, args, sc, what, p, 2, a, set));
        tp_val sep = v_str("", 0);
        if (set[0])
            SN_TRY(str_of(C, &a[0], &sep));
        const char *attr = NULL;
        if (set[1] && a[1].kind != TP_NONE) {
            SN_TRY(need_str(C, &a[1], what));
            if (!(attr = tp_strndup(C->a, a[1].u.s.p, a[1].u.s.n)))
                return oom(C);
        }
        const tp_val *items;
        size_t cnt;
        SN_TRY(iterate(C, &v, &items, &cnt));
        tp_buf b = {0};
        SN_TRY(put(C, &b, "", 0));
        for (size_t i = 0; i < cnt; i++) {
            tp_val x = items[i];
            if (attr)
                SN_TRY(get_attr(C, &items[i], attr, &x));
            if (i)
                SN_TRY(put(C, &b, sep.u.s.p, sep.u.s.n));
            SN_TRY(to_str(C, &x, &b));
        }
        *out = buf_val(&b);
        return SNUG_OK;
    }
    if (!strcmp(f, "first") || !strcmp(f, "last")) {
        SN_TRY(bind(C, args, sc, what, NULL, 0, a, set));
        if (v.kind == TP_LIST && v.u.l->kind == TP_L_GEN) {
            if (f[0] == 'l')
                return rerr(C, SNUG_ERR_TYPE, "'generator' object is not reversible");
            tp_list *l = v.u.l;
            *out = l->pos < l->n ? l->v[l->pos++] : v_undef(NULL);
            return SNUG_OK;
        }
        const tp_val *items;
        size_t cnt;
        SN_TRY(iterate(C, &v, &items, &cnt));
        *out = cnt ? items[f[0] == 'f' ? 0 : cnt - 1] : v_undef(NULL);
        return SNUG_OK;
    }
    if (!strcmp(f, "list")) {
        SN_TRY(bind(C, args, sc, what, NULL, 0, a, set));
        const tp_val *items;
        size_t cnt;
        SN_TRY(iterate(C, &v, &items, &cnt));
        SN_TRY(new_list(C, TP_L_LIST, cnt, out));
        if (cnt)
            memcpy(out->u.l->v, items, cnt * sizeof *items);
        return SNUG_OK;
    }
    if (!strcmp(f, "items")) {
        SN_TRY(bind(C, args, sc, what, NULL, 0, a, set));
        if (v.kind == TP_UNDEF)
            return new_list(C, TP_L_GEN, 0, out);
        if (v.kind != TP_DICT)
            return rerr(C, SNUG_ERR_TYPE, "Can only get item pairs from a mapping.");
        static const tp_args none = {0};
        SN_TRY(dict_method(C, &v, "items", &none, sc, out));
        out->u.l->kind = TP_L_GEN;
        return SNUG_OK;
    }
    if (!strcmp(f, "reverse")) {
        SN_TRY(bind(C, args, sc, what, NULL, 0, a, set));
        if (v.kind == TP_STR) {
            tp_val m1 = v_int(-1);
            return get_slice(C, &v, NULL, NULL, &m1, out);
        }
        if (v.kind == TP_UNDEF || (v.kind == TP_LIST && v.u.l->kind == TP_L_GEN))
            return rerr(C, SNUG_ERR_UNSUPPORTED, "reverse of a %s", type_name(&v));
        const tp_val *items;
        size_t cnt;
        SN_TRY(iterate(C, &v, &items, &cnt));
        SN_TRY(new_list(C, TP_L_GEN, cnt, out));
        for (size_t i = 0; i < cnt; i++)
            out->u.l->v[i] = items[cnt - 1 - i];
        return SNUG_OK;
    }
    if (!strcmp(f, "map")) {
        if (args->npos == 0) {
            static const char *const p[] = {"attribute", "default"};
            SN_TRY(bind(C, args, sc, what, p, 2, a, set));
            if (!set[0])
                return rerr(C, SNUG_ERR_TYPE, "map needs a filter name or attribute=");
            SN_TRY(need_str(C, &a[0], what));
            if (memchr(a[0].u.s.p, '.', a[0].u.s.n) || (a[0].u.s.n && a[0].u.s.p[0] >= '0' && a[0].u.s.p[0] <= '9'))
                return rerr(C, SNUG_ERR_UNSUPPORTED, "map with a dotted or numeric attribute");
            const char *attr = tp_strndup(C->a, a[0].u.s.p, a[0].u.s.n);
            if (!attr)
                return oom(C);
            const tp_val *items;
            size_t cnt;
            SN_TRY(iterate(C, &v, &items, &cnt));
            SN_TRY(new_list(C, TP_L_GEN, cnt, out));
            for (size_t i = 0; i < cnt; i++) {
                SN_TRY(get_attr(C, &items[i], attr, &out->u.l->v[i]));
                if (set[1] && out->u.l->v[i].kind == TP_UNDEF)
                    out->u.l->v[i] = a[1];
            }
            return SNUG_OK;
        }
        tp_val *pv = NULL;
        SN_TRY(eval_positional(C, args, sc, what, &pv));
        if (args->n != 1)
            return rerr(C, SNUG_ERR_UNSUPPORTED, "map with a filter and arguments for it");
        SN_TRY(need_str(C, &pv[0], what));
        const char *fn = tp_strndup(C->a, pv[0].u.s.p, pv[0].u.s.n);
        if (!fn)
            return oom(C);
        if (!tp_name_in(tp_filter_names, fn))
            return rerr(C, SNUG_ERR_UNSUPPORTED, "filter '%s' (in map) is not supported", fn);
        const tp_val *items;
        size_t cnt;
        SN_TRY(iterate(C, &v, &items, &cnt));
        SN_TRY(new_list(C, TP_L_GEN, cnt, out));
        for (size_t i = 0; i < cnt; i++)
            SN_TRY(filter_by_name(C, fn, items[i], &out->u.l->v[i]));
        return SNUG_OK;
    }
    if (!strcmp(f, "select") || !strcmp(f, "reject") || !strcmp(f, "selectattr") || !strcmp(f, "rejectattr")) {
        tp_val *pv = NULL;
        SN_TRY(eval_positional(C, args, sc, what, &pv));
        return filter_select(C, f, &v, pv, args->n, out);
    }
    if (!strcmp(f, "int") || !strcmp(f, "float")) {
        static const char *const p[] = {"default", "base"};
        SN_TRY(bind(C, args, sc, what, p, f[0] == 'i' ? 2 : 1, a, set));
        if (f[0] == 'i' && set[1] && !(a[1].kind == TP_INT && a[1].u.i == 10))
            return rerr(C, SNUG_ERR_UNSUPPORTED, "int with a base other than 10");
        tp_val def = set[0] ? a[0] : f[0] == 'i' ? v_int(0) : v_float(0);
        double d = 0;
        bool ok = true;
        if (is_num(&v)) {
            d = num_f(&v);
            if (f[0] == 'i' && v.kind != TP_FLOAT) {
                *out = v_int(num_i(&v));
                return SNUG_OK;
            }
        } else if (v.kind == TP_STR) {
            char buf[128];
            tp_val t = do_strip(v, NULL, true, true);
            if (!t.u.s.n || t.u.s.n >= sizeof buf || memchr(t.u.s.p, '_', t.u.s.n)) {
                ok = false;
            } else {
                memcpy(buf, t.u.s.p, t.u.s.n);
                buf[t.u.s.n] = 0;
                char *end = NULL;
                if (f[0] == 'i') {
                    long long x = strtoll(buf, &end, 10);
                    if (*end == 0 && x != LLONG_MAX && x != LLONG_MIN) {
                        *out = v_int(x);
                        return SNUG_OK;
                    }
                }
                /* jinja2's int falls back to int(float(s)) */
                d = strtod(buf, &end);
                ok = *end == 0 && !(buf[0] == '0' && (buf[1] == 'x' || buf[1] == 'X'));
            }
        } else {
            ok = false;
        }
        if (!ok) {
            *out = def;
            return SNUG_OK;
        }
        if (f[0] == 'f') {
            *out = v_float(d);
            return SNUG_OK;
        }
        if (isnan(d) || isinf(d)) {
            *out = def;
            return SNUG_OK;
        }
        if (fabs(d) >= 9.2e18)
            return overflow(C);
        *out = v_int((int64_t)d);
        return SNUG_OK;
    }
    if (!strcmp(f, "abs")) {
        SN_TRY(bind(C, args, sc, what, NULL, 0, a, set));
        if (v.kind == TP_FLOAT)
            *out = v_float(fabs(v.u.f));
        else if (v.kind == TP_INT || v.kind == TP_BOOL) {
            if (num_i(&v) == INT64_MIN)
                return overflow(C);
            *out = v_int(llabs(num_i(&v)));
        } else
            return rerr(C, SNUG_ERR_TYPE, "bad operand type for abs(): '%s'", type_name(&v));
        return SNUG_OK;
    }
    if (!strcmp(f, "round")) {
        static const char *const p[] = {"precision", "method"};
        SN_TRY(bind(C, args, sc, what, p, 2, a, set));
        int64_t prec = 0;
        if (set[0]) {
            SN_TRY(need_int(C, &a[0], what));
            prec = num_i(&a[0]);
        }
        const char *method = "common";
        char mb[16] = "common";
        if (set[1]) {
            SN_TRY(need_str(C, &a[1], what));
            snprintf(mb, sizeof mb, "%.*s", (int)(a[1].u.s.n < 15 ? a[1].u.s.n : 15), a[1].u.s.p);
            method = mb;
        }
        if (!is_num(&v))
            return rerr(C, SNUG_ERR_TYPE, "round of a %s", type_name(&v));
        if (prec < 0 || prec > 15)
            return rerr(C, SNUG_ERR_UNSUPPORTED, "round to %lld digits", (long long)prec);
        if (v.kind != TP_FLOAT && !strcmp(method, "common")) {
            *out = v_int(num_i(&v));
            return SNUG_OK;
        }
        double x = num_f(&v), m = pow(10, (double)prec), r;
        if (!strcmp(method, "common")) {
            /* Python's round: half to even on the exact binary value, as
             * printf's correctly rounded conversion does */
            char buf[400];
            snprintf(buf, sizeof buf, "%.*f", (int)prec, x);
            r = strtod(buf, NULL);
        } else if (!strcmp(method, "floor")) {
            r = floor(x * m) / m;
        } else if (!strcmp(method, "ceil")) {
            r = ceil(x * m) / m;
        } else {
            return rerr(C, SNUG_ERR_TYPE, "method must be common, ceil or floor");
        }
        *out = v_float(r);
        return SNUG_OK;
    }
    if (!strcmp(f, "indent")) {
        static const char *const p[] = {"width", "first", "blank"};
        SN_TRY(bind(C, args, sc, what, p, 3, a, set));
        tp_val s, ind = v_str("    ", 4);
        SN_TRY(str_of(C, &v, &s));
        if (set[0]) {
            if (a[0].kind == TP_STR) {
                ind = a[0];
            } else {
                SN_TRY(need_int(C, &a[0], what));
                int64_t w = num_i(&a[0]);
                if (w > 256)
                    return rerr(C, SNUG_ERR_UNSUPPORTED, "indent(%lld)", (long long)w);
                char *sp = tp_alloc(C->a, 257);
                if (!sp)
                    return oom(C);
                memset(sp, ' ', w > 0 ? (size_t)w : 0);
                ind = v_str(sp, w > 0 ? (size_t)w : 0);
            }
        }
        bool first = set[1] && truthy(&a[1]), blank = set[2] && truthy(&a[2]);
        /* jinja2: s += "\n"; lines = s.splitlines(); every line but the
         * first indented (blank ones only with blank=True) */
        tp_buf b = {0};
        SN_TRY(put(C, &b, "", 0));
        if (first)
            SN_TRY(put(C, &b, ind.u.s.p, ind.u.s.n));
        size_t i = 0, nline = 0;
        while (i < s.u.s.n || (nline == 0 && i == 0 && s.u.s.n == 0)) {
            size_t st = i, k = 0;
            uint32_t c = 0;
            while (i < s.u.s.n) {
                c = u8dec(s.u.s.p + i, &k);
                if (c == '\n' || c == '\r' || c == 0xb || c == 0xc || (c >= 0x1c && c <= 0x1e) || c == 0x85 ||
                    c == 0x2028 || c == 0x2029)
                    break;
                i += k;
            }
            size_t len = i - st;
            if (nline) {
                SN_TRY(put(C, &b, "\n", 1));
                if (len || blank)
                    SN_TRY(put(C, &b, ind.u.s.p, ind.u.s.n));
            }
            SN_TRY(put(C, &b, s.u.s.p + st, len));
            nline++;
            if (i < s.u.s.n) {
                i += k;
                if (c == '\r' && i < s.u.s.n && s.u.s.p[i] == '\n')
                    i++;
            } else {
                break;
            }
        }
        *out = buf_val(&b);
        return SNUG_OK;
    }
    return rerr(C, SNUG_ERR_INTERNAL, "filter '%s' is listed but not implemented", f);
}

/* ---- expressions ---- */

static int eval(tp_ctx *C, const tp_node *n, tp_scope *sc, tp_val *out) {
    tp_val a, b;
    C->line = n->line;
    switch (n->kind) {
    case TP_N_CONST: *out = n->val; return SNUG_OK;
    case TP_N_NAME: return lookup(C, sc, n->s, out);
    case TP_N_CAPTURED: *out = C->captured; return SNUG_OK;
    case TP_N_ATTR:
        SN_TRY(eval(C, n->a, sc, &a));
        C->line = n->line;
        return get_attr(C, &a, n->s, out);
    case TP_N_ITEM:
        SN_TRY(eval(C, n->a, sc, &a));
        SN_TRY(eval(C, n->b, sc, &b));
        C->line = n->line;
        return get_item(C, &a, &b, out);
    case TP_N_SLICE: {
        tp_val p[3];
        const tp_node *parts[3] = {n->b, n->c, n->d};
        SN_TRY(eval(C, n->a, sc, &a));
        for (int i = 0; i < 3; i++)
            if (parts[i])
                SN_TRY(eval(C, parts[i], sc, &p[i]));
        C->line = n->line;
        return get_slice(C, &a, n->b ? &p[0] : NULL, n->c ? &p[1] : NULL, n->d ? &p[2] : NULL, out);
    }
    case TP_N_CALL: return eval_call(C, n, sc, out);
    case TP_N_FILTER:
        SN_TRY(eval(C, n->a, sc, &a));
        return apply_filter(C, n, a, sc, out);
    case TP_N_TEST: {
        SN_TRY(eval(C, n->a, sc, &a));
        tp_val *args = NULL;
        SN_TRY(eval_positional(C, &n->args, sc, "a test", &args));
        bool r;
        C->line = n->line;
        SN_TRY(run_test(C, n->s, &a, args, n->args.n, &r));
        *out = v_bool(r != (bool)n->op);
        return SNUG_OK;
    }
    case TP_N_UNARY:
        SN_TRY(eval(C, n->a, sc, &a));
        C->line = n->line;
        if (n->op == 'n') {
            *out = v_bool(!truthy(&a));
            return SNUG_OK;
        }
        if (a.kind == TP_UNDEF)
            return undefined_err(C, &a);
        if (!is_num(&a))
            return rerr(C, SNUG_ERR_TYPE, "bad operand type for unary %c: '%s'", n->op, type_name(&a));
        if (n->op == '+')
            *out = a.kind == TP_BOOL ? v_int(a.u.b) : a;
        else if (a.kind == TP_FLOAT)
            *out = v_float(-a.u.f);
        else if (num_i(&a) == INT64_MIN)
            return overflow(C);
        else
            *out = v_int(-num_i(&a));
        return SNUG_OK;
    case TP_N_BINARY:
        SN_TRY(eval(C, n->a, sc, &a));
        if (n->op == 'a' || n->op == 'o') {
            if (truthy(&a) == (n->op == 'o')) {
                *out = a;
                return SNUG_OK;
            }
            return eval(C, n->b, sc, out);
        }
        SN_TRY(eval(C, n->b, sc, &b));
        C->line = n->line;
        if (n->op == '~') {
            tp_buf buf = {0};
            SN_TRY(put(C, &buf, "", 0));
            SN_TRY(to_str(C, &a, &buf));
            SN_TRY(to_str(C, &b, &buf));
            *out = buf_val(&buf);
            return SNUG_OK;
        }
        return arith(C, n->op, &a, &b, out);
    case TP_N_COMPARE: {
        SN_TRY(eval(C, n->a, sc, &a));
        for (int i = 0; i < n->args.n; i++) {
            SN_TRY(eval(C, n->args.v[i], sc, &b));
            C->line = n->line;
            bool r = false;
            int c = 0;
            switch (n->ops[i]) {
            case TP_CMP_EQ: r = val_eq(&a, &b); break;
            case TP_CMP_NE: r = !val_eq(&a, &b); break;
            case TP_CMP_IN:
            case TP_CMP_NOTIN:
                SN_TRY(contains(C, &a, &b, &r));
                r = r == (n->ops[i] == TP_CMP_IN);
                break;
            default:
                SN_TRY(compare(C, &a, &b, &c));
                r = n->ops[i] == TP_CMP_LT ? c < 0 : n->ops[i] == TP_CMP_LE ? c <= 0 : n->ops[i] == TP_CMP_GT ? c > 0 : c >= 0;
            }
            if (!r) {
                *out = v_bool(false);
                return SNUG_OK;
            }
            a = b;
        }
        *out = v_bool(true);
        return SNUG_OK;
    }
    case TP_N_CONDEXPR:
        SN_TRY(eval(C, n->a, sc, &a));
        if (truthy(&a))
            return eval(C, n->b, sc, out);
        if (n->c)
            return eval(C, n->c, sc, out);
        *out = v_undef(NULL);
        return SNUG_OK;
    case TP_N_LIST:
    case TP_N_TUPLE:
        SN_TRY(new_list(C, n->kind == TP_N_LIST ? TP_L_LIST : TP_L_TUPLE, (size_t)n->args.n, out));
        for (int i = 0; i < n->args.n; i++)
            SN_TRY(eval(C, n->args.v[i], sc, &out->u.l->v[i]));
        return SNUG_OK;
    case TP_N_DICT:
        SN_TRY(new_dict(C, TP_DICT, out));
        for (int i = 0; i + 1 < n->args.n; i += 2) {
            SN_TRY(eval(C, n->args.v[i], sc, &a));
            SN_TRY(eval(C, n->args.v[i + 1], sc, &b));
            if (a.kind == TP_LIST || a.kind == TP_DICT || a.kind == TP_NS || a.kind == TP_UNDEF)
                return rerr(C, SNUG_ERR_TYPE, "unhashable type: '%s'", type_name(&a));
            if (!tp_dict_put(C->a, out->u.d, a, b))
                return oom(C);
        }
        return SNUG_OK;
    default: return rerr(C, SNUG_ERR_INTERNAL, "a statement where an expression should be");
    }
}

/* ---- statements ---- */

static int assign(tp_ctx *C, const tp_target *tg, tp_val v, tp_scope *sc) {
    if (tg->ns) {
        tp_val ns;
        SN_TRY(eval(C, tg->ns, sc, &ns));
        if (ns.kind != TP_NS)
            return rerr(C, SNUG_ERR_TYPE, "cannot assign attribute on non-namespace object");
        if (!tp_dict_put(C->a, ns.u.d, v_str(tg->s, strlen(tg->s)), v))
            return oom(C);
        return SNUG_OK;
    }
    if (!tg->n)
        return scope_set(C, sc, tg->s, v);
    const tp_val *items;
    size_t n;
    if (v.kind == TP_UNDEF)
        return undefined_err(C, &v);
    SN_TRY(iterate(C, &v, &items, &n));
    if (n != (size_t)tg->n)
        return rerr(C, SNUG_ERR_TYPE, "cannot unpack %zu values into %d names", n, tg->n);
    for (int i = 0; i < tg->n; i++)
        SN_TRY(scope_set(C, sc, tg->names[i], items[i]));
    return SNUG_OK;
}

static int exec_for(tp_ctx *C, const tp_node *n, tp_scope *sc, tp_buf *b) {
    tp_val seq;
    SN_TRY(eval(C, n->a, sc, &seq));
    C->line = n->line;
    const tp_val *items;
    size_t cnt;
    SN_TRY(iterate(C, &seq, &items, &cnt));
    if (n->b) {
        /* {% for x in xs if cond %}: the loop sees only the items kept */
        tp_val *kept = tp_alloc(C->a, (cnt ? cnt : 1) * sizeof *kept);
        if (!kept)
            return oom(C);
        size_t k = 0;
        for (size_t i = 0; i < cnt; i++) {
            tp_scope *fs = NULL;
            SN_TRY(scope_new(C, sc, &fs));
            SN_TRY(assign(C, &n->target, items[i], fs));
            tp_val c;
            SN_TRY(eval(C, n->b, fs, &c));
            if (truthy(&c))
                kept[k++] = items[i];
        }
        items = kept;
        cnt = k;
    }
    if (!cnt)
        return n->orelse ? exec_body(C, n->orelse, sc, b) : SNUG_OK;
    tp_loop *L = tp_alloc(C->a, sizeof *L);
    if (!L)
        return oom(C);
    L->items = items;
    L->n = cnt;
    L->depth = 1;
    C->loop_depth++;
    int rc = SNUG_OK;
    for (size_t i = 0; i < cnt; i++) {
        tp_scope *it = NULL;
        L->i = i;
        /* each pass gets a fresh scope: what the body sets does not
         * outlive the pass (jinja2's scoping; namespaces exist for that) */
        if ((rc = scope_new(C, sc, &it)) != SNUG_OK)
            break;
        tp_val lv = {.kind = TP_LOOP};
        lv.u.loop = L;
        if ((rc = scope_set(C, it, "loop", lv)) != SNUG_OK || (rc = assign(C, &n->target, items[i], it)) != SNUG_OK)
            break;
        rc = exec_body(C, n->body, it, b);
        if (rc == TP_CONTINUE) {
            rc = SNUG_OK;
            continue;
        }
        if (rc == TP_BREAK) {
            rc = SNUG_OK;
            break;
        }
        if (rc != SNUG_OK)
            break;
    }
    C->loop_depth--;
    return rc;
}

static int exec_body(tp_ctx *C, const tp_node *n, tp_scope *sc, tp_buf *b) {
    for (; n; n = n->next) {
        tp_val v;
        C->line = n->line;
        switch (n->kind) {
        case TP_N_TEXT: SN_TRY(put(C, b, n->s, n->slen)); break;
        case TP_N_OUTPUT:
            SN_TRY(eval(C, n->a, sc, &v));
            SN_TRY(to_str(C, &v, b));
            break;
        case TP_N_IF:
            SN_TRY(eval(C, n->a, sc, &v));
            if (truthy(&v)) {
                SN_TRY(exec_body(C, n->body, sc, b));
            } else if (n->orelse) {
                SN_TRY(exec_body(C, n->orelse, sc, b));
            }
            break;
        case TP_N_FOR: SN_TRY(exec_for(C, n, sc, b)); break;
        case TP_N_SET:
            SN_TRY(eval(C, n->a, sc, &v));
            SN_TRY(assign(C, &n->target, v, sc));
            break;
        case TP_N_SETBLOCK: {
            tp_buf cap = {0};
            SN_TRY(put(C, &cap, "", 0));
            SN_TRY(exec_body(C, n->body, sc, &cap));
            v = buf_val(&cap);
            if (n->b) {
                tp_val saved = C->captured;
                C->captured = v;
                int rc = eval(C, n->b, sc, &v);
                C->captured = saved;
                SN_TRY(rc);
            }
            SN_TRY(assign(C, &n->target, v, sc));
            break;
        }
        case TP_N_MACRO:
            v.kind = TP_MACRO;
            v.u.mac.m = n->macro;
            v.u.mac.scope = sc;
            SN_TRY(scope_set(C, sc, n->s, v));
            break;
        case TP_N_BREAK:
        case TP_N_CONTINUE:
            if (!C->loop_depth)
                return rerr(C, SNUG_ERR_PARSE, "{%% %s %%} outside a loop", n->kind == TP_N_BREAK ? "break" : "continue");
            return n->kind == TP_N_BREAK ? TP_BREAK : TP_CONTINUE;
        default: return rerr(C, SNUG_ERR_INTERNAL, "an expression where a statement should be");
        }
    }
    return SNUG_OK;
}

/* ---- entry ---- */

static int ctx_str(tp_ctx *C, tp_scope *root, const char *name, const char *s) {
    size_t n = strlen(s);
    if (!utf8_valid(s, n))
        return sn_errf(C->err, SNUG_ERR_INVALID_ARG, "%s: %s is not valid UTF-8", C->t->name, name);
    return scope_set(C, root, name, v_str(s, n));
}

int sn_template_render(const sn_template *t, const sn_chat_msg *msgs, int n,
                       const sn_template_vars *vars, char **out, size_t *out_len, sn_err *err) {
    *out = NULL;
    *out_len = 0;
    tp_arena arena = {0};
    tp_ctx C = {.t = t, .err = err, .a = &arena, .max_string = TP_MAX_STRING};
    if (vars && vars->max_bytes)
        C.max_string = vars->max_bytes;
    tp_scope *root = NULL, *top = NULL;
    tp_buf b = {0};
    tp_val msgv = {0};
    int rc = scope_new(&C, NULL, &root);
    if (rc == SNUG_OK)
        rc = scope_new(&C, root, &top);
    if (rc == SNUG_OK)
        rc = new_list(&C, TP_L_LIST, n > 0 ? (size_t)n : 0, &msgv);
    if (rc != SNUG_OK)
        goto done;
    for (int i = 0; i < n && rc == SNUG_OK; i++) {
        tp_val m;
        if ((rc = new_dict(&C, TP_DICT, &m)) != SNUG_OK)
            break;
        const char *vals[2] = {msgs[i].role ? msgs[i].role : "", msgs[i].content ? msgs[i].content : ""};
        static const char *const keys[2] = {"role", "content"};
        for (int k = 0; k < 2; k++) {
            size_t len = strlen(vals[k]);
            if (!utf8_valid(vals[k], len)) {
                rc = sn_errf(err, SNUG_ERR_INVALID_ARG, "%s: the %s of message %d is not valid UTF-8", t->name, keys[k], i);
                goto done;
            }
            if (!tp_dict_put(&arena, m.u.d, v_str(keys[k], strlen(keys[k])), v_str(vals[k], len))) {
                rc = oom(&C);
                goto done;
            }
        }
        msgv.u.l->v[i] = m;
    }
    /* what transformers passes: messages, tools and documents (None unless
     * given), add_generation_prompt, the special tokens, the caller's
     * kwargs */
    if ((rc = scope_set(&C, root, "messages", msgv)) != SNUG_OK ||
        (rc = scope_set(&C, root, "tools", v_none())) != SNUG_OK ||
        (rc = scope_set(&C, root, "documents", v_none())) != SNUG_OK ||
        (rc = scope_set(&C, root, "add_generation_prompt", v_bool(vars && vars->add_generation_prompt))) != SNUG_OK)
        goto done;
    if (vars && vars->bos_token && (rc = ctx_str(&C, root, "bos_token", vars->bos_token)) != SNUG_OK)
        goto done;
    if (vars && vars->eos_token && (rc = ctx_str(&C, root, "eos_token", vars->eos_token)) != SNUG_OK)
        goto done;
    if (vars && vars->extra_json) {
        size_t len = strlen(vars->extra_json);
        tp_val extra;
        if (!utf8_valid(vars->extra_json, len)) {
            rc = sn_errf(err, SNUG_ERR_INVALID_ARG, "%s: the extra variables are not valid UTF-8", t->name);
            goto done;
        }
        if ((rc = tp_json_parse(&arena, vars->extra_json, len, "the extra template variables", &extra, err)) != SNUG_OK)
            goto done;
        if (extra.kind != TP_DICT) {
            rc = sn_errf(err, SNUG_ERR_INVALID_ARG, "%s: the extra variables are not a JSON object", t->name);
            goto done;
        }
        for (size_t i = 0; i < extra.u.d->n && rc == SNUG_OK; i++) {
            const tp_val *k = &extra.u.d->k[i];
            char *name = tp_strndup(&arena, k->u.s.p, k->u.s.n);
            rc = name ? scope_set(&C, root, name, extra.u.d->v[i]) : oom(&C);
        }
        if (rc != SNUG_OK)
            goto done;
    }
    if ((rc = put(&C, &b, "", 0)) != SNUG_OK)
        goto done;
    rc = exec_body(&C, t->body, top, &b);
    if (rc != SNUG_OK)
        goto done;
    *out = sn_malloc(b.n + 1);
    if (!*out) {
        rc = sn_errf(err, SNUG_ERR_OOM, "%s: out of memory", t->name);
        goto done;
    }
    memcpy(*out, b.p, b.n + 1);
    *out_len = b.n;
done:
    tp_arena_free(&arena);
    return rc;
}
