/* Text ops of opset 20: StringConcat, StringSplit, RegexFullMatch.
 *
 * RegexFullMatch compiles its pattern (RE2 syntax, the common subset:
 * literals, ., classes [..] with ranges and \w\d\s, escapes, groups (..)
 * and (?:..), alternation, * + ? {n} {n,} {n,m} and their lazy forms,
 * anchors ^ $ \A \z \b \B, the (?i) flag) into a small program run by a
 * Pike VM: time linear in the input, no backtracking. Matching is over
 * bytes: . and negated classes consume one byte of UTF-8. */
#include <string.h>

#include "ops/text/text.h"

/* ---- broadcasting helper ------------------------------------------------------------------ */

/* Element offsets of input t (right-aligned against out dims, 0 stride on
 * broadcast dims) for output element i. */
static int64_t bc_offset(const sn_tensor *t, int out_rank, const int64_t *out_dims, int64_t i) {
    int64_t off = 0, stride = 1;
    for (int d = out_rank - 1; d >= 0; d--) {
        int64_t od = out_dims[d], idx = od ? i % od : 0;
        i = od ? i / od : 0;
        int td = d - (out_rank - t->rank);
        if (td < 0)
            continue;
        if (t->dims[td] != 1)
            off += idx * stride;
        stride *= t->dims[td];
    }
    return off;
}

/* ---- StringConcat (20) ----------------------------------------------------------------------- */

int text_strconcat_infer(sn_infer_ctx *c) {
    const sn_tensor *a = sn_in(c->in, c->n_in, 0), *b = sn_in(c->in, c->n_in, 1);
    if (!a || !b)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "needs inputs X and Y");
    if (a->dtype != SN_STRING || b->dtype != SN_STRING)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "X and Y must be string tensors");
    if (a->rank < 0 || b->rank < 0) {
        sn_set_out(c->out[0], SN_STRING, SN_RANK_UNKNOWN, NULL);
        return SNUG_OK;
    }
    int r;
    int64_t d[SN_MAX_RANK];
    if (sn_broadcast_shape(a->rank, a->dims, b->rank, b->dims, &r, d, c->err) != SNUG_OK)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "%s", c->err->msg);
    sn_set_out(c->out[0], SN_STRING, r, d);
    return SNUG_OK;
}

int text_strconcat_run(sn_kctx *c) {
    const sn_tensor *a = c->in[0], *b = c->in[1];
    sn_tensor *y = c->out[0];
    const sn_string *A = a->data, *B = b->data;
    sn_string *Y = y->data;
    int64_t n = sn_tensor_numel(y);
    size_t total = 0;
    for (int64_t i = 0; i < n; i++)
        total += A[bc_offset(a, y->rank, y->dims, i)].len + B[bc_offset(b, y->rank, y->dims, i)].len;
    char *buf = total ? sn_kctx_alloc_extra(c, 0, total) : NULL;
    if (total && !buf)
        return c->err->code ? c->err->code : SNUG_ERR_OOM;
    for (int64_t i = 0; i < n; i++) {
        const sn_string *s = &A[bc_offset(a, y->rank, y->dims, i)], *t = &B[bc_offset(b, y->rank, y->dims, i)];
        Y[i].ptr = buf;
        Y[i].len = s->len + t->len;
        if (s->len)
            memcpy(buf, s->ptr, s->len);
        if (t->len)
            memcpy(buf + s->len, t->ptr, t->len);
        buf += Y[i].len;
    }
    return SNUG_OK;
}

/* ---- StringSplit (20) -------------------------------------------------------------------------
 * Python's str.split: with a delimiter, every occurrence splits (empty
 * pieces kept); without one (or ""), runs of whitespace split and leading
 * or trailing whitespace gives no pieces. maxsplit bounds the splits, the
 * rest of the string is the last piece. Output [..., max pieces] padded
 * with "", and the piece counts. */

static bool is_space(unsigned char ch) { return ch == ' ' || (ch >= '\t' && ch <= '\r'); }

/* Splits s; calls emit(arg, k, piece) for each piece when emit is not
 * NULL; returns the piece count. */
static int64_t split_one(const sn_string *s, const sn_string *delim, int64_t maxsplit,
                         void (*emit)(void *, int64_t, const char *, size_t), void *arg) {
    const char *p = s->ptr, *end = s->ptr + s->len;
    int64_t k = 0;
    if (delim) {
        for (;;) {
            const char *hit = NULL;
            if (maxsplit < 0 || k < maxsplit)
                for (const char *q = p; q + delim->len <= end; q++)
                    if (!memcmp(q, delim->ptr, delim->len)) {
                        hit = q;
                        break;
                    }
            if (!hit) {
                if (emit)
                    emit(arg, k, p, (size_t)(end - p));
                return k + 1;
            }
            if (emit)
                emit(arg, k, p, (size_t)(hit - p));
            k++;
            p = hit + delim->len;
        }
    }
    for (;;) {
        while (p < end && is_space((unsigned char)*p))
            p++;
        if (p == end)
            return k;
        if (maxsplit >= 0 && k >= maxsplit) {
            /* the remainder, trailing whitespace included */
            if (emit)
                emit(arg, k, p, (size_t)(end - p));
            return k + 1;
        }
        const char *q = p;
        while (q < end && !is_space((unsigned char)*q))
            q++;
        if (emit)
            emit(arg, k, p, (size_t)(q - p));
        k++;
        p = q;
    }
}

static int split_params(const sn_node *node, sn_err *err, sn_string *delim_buf, const sn_string **delim,
                        int64_t *maxsplit) {
    const sn_attr *d = sn_attr_get(node, "delimiter");
    *delim = NULL;
    if (d && d->s.len) {
        *delim_buf = d->s;
        *delim = delim_buf;
    }
    const sn_attr *m = sn_attr_get(node, "maxsplit");
    *maxsplit = m ? m->i : -1;
    if (m && m->i < 0)
        return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "maxsplit must not be negative");
    return SNUG_OK;
}

int text_strsplit_infer(sn_infer_ctx *c) {
    const sn_tensor *x = sn_in(c->in, c->n_in, 0);
    if (!x)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "input is missing");
    if (x->dtype != SN_STRING)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "input must be a string tensor");
    sn_string db;
    const sn_string *delim;
    int64_t maxsplit;
    SN_TRY(split_params(c->node, c->err, &db, &delim, &maxsplit));
    if (x->rank < 0) {
        sn_set_out(c->out[0], SN_STRING, SN_RANK_UNKNOWN, NULL);
        sn_set_out(c->n_out > 1 ? c->out[1] : NULL, SN_I64, SN_RANK_UNKNOWN, NULL);
        return SNUG_OK;
    }
    if (x->rank + 1 > SN_MAX_RANK)
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "rank %d too large", x->rank);
    int64_t d[SN_MAX_RANK];
    memcpy(d, x->dims, sizeof(int64_t) * (size_t)x->rank);
    d[x->rank] = SN_DIM_UNKNOWN;
    if (x->data && sn_tensor_shape_known(x)) {
        int64_t n = sn_tensor_numel(x), most = 0;
        const sn_string *s = x->data;
        for (int64_t i = 0; i < n; i++)
            most = sn_imax(most, split_one(&s[i], delim, maxsplit, NULL, NULL));
        d[x->rank] = most;
    }
    sn_set_out(c->out[0], SN_STRING, x->rank + 1, d);
    sn_set_out(c->n_out > 1 ? c->out[1] : NULL, SN_I64, x->rank, x->dims);
    return SNUG_OK;
}

typedef struct split_sink {
    sn_string *row;
} split_sink;

static void split_emit(void *arg, int64_t k, const char *p, size_t len) {
    split_sink *s = arg;
    s->row[k].ptr = p;
    s->row[k].len = len;
}

int text_strsplit_run(sn_kctx *c) {
    const sn_tensor *x = c->in[0];
    sn_tensor *y = c->out[0], *cnt = c->n_out > 1 ? c->out[1] : NULL;
    sn_string db;
    const sn_string *delim;
    int64_t maxsplit;
    SN_TRY(split_params(c->node, c->err, &db, &delim, &maxsplit));
    int64_t n = sn_tensor_numel(x), W = y->dims[y->rank - 1];
    const sn_string *s = x->data;
    sn_string *Y = y->data;
    for (int64_t i = 0; i < n * W; i++)
        Y[i] = (sn_string){"", 0};
    for (int64_t i = 0; i < n; i++) {
        int64_t k = split_one(&s[i], delim, maxsplit, NULL, NULL);
        if (k > W)
            return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "string %lld splits into %lld pieces, output has %lld",
                            (long long)i, (long long)k, (long long)W);
        split_sink sink = {Y + i * W};
        split_one(&s[i], delim, maxsplit, split_emit, &sink);
        if (cnt)
            ((int64_t *)cnt->data)[i] = k;
    }
    return sn_strings_own(c, 0);
}

/* ---- regular expressions ---------------------------------------------------------------------- */

enum { RX_CHAR, RX_ANY, RX_CLASS, RX_SPLIT, RX_JMP, RX_ASSERT, RX_MATCH };
enum { RX_BOL, RX_EOL, RX_WORDB, RX_NWORDB };

/* One instruction; jumps are relative to the instruction, so a fragment
 * can be copied (counted repetition) or shifted (alternation) as is. */
typedef struct rx_inst {
    uint8_t op;
    uint8_t ch;   /* RX_CHAR byte, RX_ASSERT kind */
    int32_t x, y; /* RX_SPLIT targets (x preferred), RX_JMP target, RX_CLASS index */
} rx_inst;

typedef struct rx_prog {
    rx_inst *code;
    int n, cap;
    uint8_t (*cls)[32]; /* 256-bit byte sets */
    int ncls, cls_cap;
} rx_prog;

#define RX_MAX_INST 65536

typedef struct rx_parser {
    const char *p, *end;
    rx_prog *g;
    bool icase;
    const char *err; /* static message */
    int depth;
} rx_parser;

static bool rx_emit(rx_parser *ps, rx_inst in) {
    rx_prog *g = ps->g;
    if (g->n >= RX_MAX_INST) {
        ps->err = "pattern too large";
        return false;
    }
    if (g->n == g->cap) {
        int nc = g->cap ? g->cap * 2 : 64;
        rx_inst *c = sn_realloc(g->code, sizeof *c * (size_t)nc);
        if (!c) {
            ps->err = "out of memory";
            return false;
        }
        g->code = c;
        g->cap = nc;
    }
    g->code[g->n++] = in;
    return true;
}

/* Inserts `in` at position at (shifting [at, n) up by one). */
static bool rx_insert(rx_parser *ps, int at, rx_inst in) {
    if (!rx_emit(ps, in))
        return false;
    rx_prog *g = ps->g;
    memmove(&g->code[at + 1], &g->code[at], sizeof(rx_inst) * (size_t)(g->n - 1 - at));
    g->code[at] = in;
    return true;
}

static int rx_new_class(rx_parser *ps) {
    rx_prog *g = ps->g;
    if (g->ncls == g->cls_cap) {
        int nc = g->cls_cap ? g->cls_cap * 2 : 8;
        uint8_t(*c)[32] = sn_realloc(g->cls, 32 * (size_t)nc);
        if (!c) {
            ps->err = "out of memory";
            return -1;
        }
        g->cls = c;
        g->cls_cap = nc;
    }
    memset(g->cls[g->ncls], 0, 32);
    return g->ncls++;
}

static inline void set_add(uint8_t *set, unsigned ch) { set[ch >> 3] |= (uint8_t)(1u << (ch & 7)); }
static inline bool set_has(const uint8_t *set, unsigned ch) { return set[ch >> 3] & (1u << (ch & 7)); }

static bool is_word(unsigned ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
}

/* Adds the set of a class escape letter (w d s, upper case negated). */
static bool rx_add_perl(uint8_t *set, char e) {
    bool neg = e == 'W' || e == 'D' || e == 'S';
    char l = (char)(e | 0x20);
    if (l != 'w' && l != 'd' && l != 's')
        return false;
    for (unsigned ch = 0; ch < 256; ch++) {
        bool in = l == 'w' ? is_word(ch) : l == 'd' ? (ch >= '0' && ch <= '9')
                                                    : (ch == ' ' || (ch >= '\t' && ch <= '\r' && ch != '\v'));
        if (in != neg)
            set_add(set, ch);
    }
    return true;
}

/* The byte of a single-character escape (\n, \., ...), or -1. */
static int rx_escape_char(char e) {
    switch (e) {
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case 'f': return '\f';
    case 'v': return '\v';
    case 'a': return '\a';
    default:
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9'))
            return -1;
        return (unsigned char)e; /* escaped punctuation is literal */
    }
}

static void set_add_icase(uint8_t *set, unsigned ch, bool icase) {
    set_add(set, ch);
    if (icase && ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'z'))
        set_add(set, ch ^ 0x20);
}

static bool rx_class(rx_parser *ps) {
    int k = rx_new_class(ps);
    if (k < 0)
        return false;
    uint8_t set[32] = {0};
    bool neg = false;
    if (ps->p < ps->end && *ps->p == '^') {
        neg = true;
        ps->p++;
    }
    bool first = true;
    while (ps->p < ps->end && (*ps->p != ']' || first)) {
        first = false;
        int lo;
        if (*ps->p == '\\') {
            if (ps->p + 1 >= ps->end)
                break;
            char e = ps->p[1];
            ps->p += 2;
            if (rx_add_perl(set, e))
                continue;
            if ((lo = rx_escape_char(e)) < 0) {
                ps->err = "unsupported escape in class";
                return false;
            }
        } else if (*ps->p == '[' && ps->p + 1 < ps->end && ps->p[1] == ':') {
            ps->err = "POSIX classes [:name:] are not supported";
            return false;
        } else {
            lo = (unsigned char)*ps->p++;
        }
        int hi = lo;
        if (ps->p + 1 < ps->end && *ps->p == '-' && ps->p[1] != ']') {
            ps->p++;
            if (*ps->p == '\\') {
                if (ps->p + 1 >= ps->end || (hi = rx_escape_char(ps->p[1])) < 0) {
                    ps->err = "bad range in class";
                    return false;
                }
                ps->p += 2;
            } else {
                hi = (unsigned char)*ps->p++;
            }
            if (hi < lo) {
                ps->err = "bad range in class";
                return false;
            }
        }
        for (int ch = lo; ch <= hi; ch++)
            set_add_icase(set, (unsigned)ch, ps->icase);
    }
    if (ps->p >= ps->end) {
        ps->err = "missing ]";
        return false;
    }
    ps->p++;
    for (int i = 0; i < 32; i++)
        ps->g->cls[k][i] = neg ? (uint8_t)~set[i] : set[i];
    return rx_emit(ps, (rx_inst){RX_CLASS, 0, k, 0});
}

static bool rx_alt(rx_parser *ps);

static bool rx_atom(rx_parser *ps) {
    char ch = *ps->p++;
    switch (ch) {
    case '.': return rx_emit(ps, (rx_inst){RX_ANY, 0, 0, 0});
    case '^': return rx_emit(ps, (rx_inst){RX_ASSERT, RX_BOL, 0, 0});
    case '$': return rx_emit(ps, (rx_inst){RX_ASSERT, RX_EOL, 0, 0});
    case '[': return rx_class(ps);
    case '(': {
        if (ps->p < ps->end && *ps->p == '?') {
            if (ps->p + 1 < ps->end && ps->p[1] == ':') {
                ps->p += 2;
            } else {
                ps->err = "unsupported group syntax (?...)";
                return false;
            }
        }
        if (++ps->depth > 200) {
            ps->err = "groups nested too deeply";
            return false;
        }
        if (!rx_alt(ps))
            return false;
        ps->depth--;
        if (ps->p >= ps->end || *ps->p != ')') {
            ps->err = "missing )";
            return false;
        }
        ps->p++;
        return true;
    }
    case '\\': {
        if (ps->p >= ps->end) {
            ps->err = "trailing backslash";
            return false;
        }
        char e = *ps->p++;
        if (e == 'b' || e == 'B')
            return rx_emit(ps, (rx_inst){RX_ASSERT, (uint8_t)(e == 'b' ? RX_WORDB : RX_NWORDB), 0, 0});
        if (e == 'A')
            return rx_emit(ps, (rx_inst){RX_ASSERT, RX_BOL, 0, 0});
        if (e == 'z')
            return rx_emit(ps, (rx_inst){RX_ASSERT, RX_EOL, 0, 0});
        int k = rx_new_class(ps);
        if (k < 0)
            return false;
        if (rx_add_perl(ps->g->cls[k], e))
            return rx_emit(ps, (rx_inst){RX_CLASS, 0, k, 0});
        ps->g->ncls--;
        int b = rx_escape_char(e);
        if (b < 0) {
            ps->err = "unsupported escape";
            return false;
        }
        ch = (char)b;
        break;
    }
    case ')': case '*': case '+': case '?': case '|':
        ps->err = "misplaced operator";
        return false;
    default:
        break;
    }
    unsigned u = (unsigned char)ch;
    if (ps->icase && (u | 0x20) >= 'a' && (u | 0x20) <= 'z') {
        int k = rx_new_class(ps);
        if (k < 0)
            return false;
        set_add_icase(ps->g->cls[k], u, true);
        return rx_emit(ps, (rx_inst){RX_CLASS, 0, k, 0});
    }
    return rx_emit(ps, (rx_inst){RX_CHAR, (uint8_t)u, 0, 0});
}

/* Parses {n}, {n,}, {n,m} at ps->p (just past '{'); false when it is not
 * a repetition (then '{' is a literal in RE2; we report it). */
static bool rx_counts(rx_parser *ps, int *lo, int *hi) {
    const char *p = ps->p;
    int a = 0, b, digits = 0;
    while (p < ps->end && *p >= '0' && *p <= '9' && a <= 1000)
        a = a * 10 + (*p++ - '0'), digits++;
    if (!digits)
        return false;
    b = a;
    if (p < ps->end && *p == ',') {
        p++;
        b = -1;
        if (p < ps->end && *p >= '0' && *p <= '9') {
            b = 0;
            while (p < ps->end && *p >= '0' && *p <= '9' && b <= 1000)
                b = b * 10 + (*p++ - '0');
        }
    }
    if (p >= ps->end || *p != '}' || a > 1000 || b > 1000 || (b >= 0 && b < a))
        return false;
    ps->p = p + 1;
    *lo = a;
    *hi = b;
    return true;
}

/* Appends a copy of code[from, from + len). */
static bool rx_copy(rx_parser *ps, int from, int len) {
    for (int i = 0; i < len; i++)
        if (!rx_emit(ps, ps->g->code[from + i]))
            return false;
    return true;
}

static bool rx_repeat(rx_parser *ps) {
    int start = ps->g->n;
    if (!rx_atom(ps))
        return false;
    for (int reps = 0; ps->p < ps->end && (*ps->p == '*' || *ps->p == '+' || *ps->p == '?' || *ps->p == '{');
         reps++) {
        int lo = 0, hi = 1;
        char op = *ps->p++;
        if (op == '*')
            lo = 0, hi = -1;
        else if (op == '+')
            lo = 1, hi = -1;
        else if (op == '{' && !rx_counts(ps, &lo, &hi)) {
            ps->p--; /* as in RE2, a '{' that is no repetition is a literal */
            break;
        }
        if (reps) {
            ps->err = "bad repetition operator (a repeat of a repeat)";
            return false;
        }
        if (ps->p < ps->end && *ps->p == '?')
            ps->p++; /* lazy: the same language, and full match only asks yes or no */
        int len = ps->g->n - start;
        /* the atom's code is at [start, start + len): build
         * e{lo} then e* (hi < 0) or (hi - lo) times e? */
        int body = start;
        if (lo == 0) {
            /* move the atom out of the way: it is re-emitted below */
            ps->g->n = start;
            rx_inst *tmp = sn_malloc(sizeof(rx_inst) * (size_t)(len ? len : 1));
            if (!tmp) {
                ps->err = "out of memory";
                return false;
            }
            memcpy(tmp, &ps->g->code[start], sizeof(rx_inst) * (size_t)len);
            bool ok = true;
            if (hi < 0) {
                ok = rx_emit(ps, (rx_inst){RX_SPLIT, 0, 1, len + 2});
                for (int i = 0; ok && i < len; i++)
                    ok = rx_emit(ps, tmp[i]);
                ok = ok && rx_emit(ps, (rx_inst){RX_JMP, 0, -(len + 1), 0});
            } else {
                for (int r = 0; ok && r < hi; r++) {
                    ok = rx_emit(ps, (rx_inst){RX_SPLIT, 0, 1, len + 1});
                    for (int i = 0; ok && i < len; i++)
                        ok = rx_emit(ps, tmp[i]);
                }
            }
            sn_free(tmp);
            if (!ok)
                return false;
            continue;
        }
        for (int r = 1; r < lo; r++)
            if (!rx_copy(ps, body, len))
                return false;
        if (hi < 0) {
            /* last copy loops: SPLIT back to its start */
            int last = ps->g->n - len;
            if (!rx_emit(ps, (rx_inst){RX_SPLIT, 0, last - ps->g->n, 1}))
                return false;
        } else {
            for (int r = lo; r < hi; r++) {
                if (!rx_emit(ps, (rx_inst){RX_SPLIT, 0, 1, len + 1}) || !rx_copy(ps, body, len))
                    return false;
            }
        }
    }
    return true;
}

static bool rx_concat(rx_parser *ps) {
    while (ps->p < ps->end && *ps->p != '|' && *ps->p != ')')
        if (!rx_repeat(ps))
            return false;
    return true;
}

static bool rx_alt(rx_parser *ps) {
    int start = ps->g->n;
    if (!rx_concat(ps))
        return false;
    while (ps->p < ps->end && *ps->p == '|') {
        ps->p++;
        /* SPLIT first, second; first: ...; JMP end; second: ... */
        int len1 = ps->g->n - start;
        if (!rx_insert(ps, start, (rx_inst){RX_SPLIT, 0, 1, len1 + 2}))
            return false;
        int jmp = ps->g->n;
        if (!rx_emit(ps, (rx_inst){RX_JMP, 0, 0, 0}))
            return false;
        if (!rx_concat(ps))
            return false;
        ps->g->code[jmp].x = ps->g->n - jmp;
    }
    return true;
}

typedef struct rx_state {
    rx_prog g;
} rx_state;

void text_regex_free(void *state) {
    rx_state *s = state;
    if (!s)
        return;
    sn_free(s->g.code);
    sn_free(s->g.cls);
    sn_free(s);
}

/* Compiles the node's pattern; *out owned by the caller. */
static int rx_compile(const sn_node *node, sn_err *err, rx_state **out) {
    const sn_attr *a = sn_attr_get(node, "pattern");
    if (!a || a->type != SN_ATTR_STRING)
        return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "attribute 'pattern' is missing");
    rx_state *s = sn_calloc(1, sizeof *s);
    if (!s)
        return sn_kfail(err, node, SNUG_ERR_OOM, "out of memory");
    rx_parser ps = {a->s.ptr, a->s.ptr + a->s.len, &s->g, false, NULL, 0};
    if (a->s.len >= 4 && !memcmp(ps.p, "(?i)", 4)) {
        ps.icase = true;
        ps.p += 4;
    }
    bool ok = rx_alt(&ps);
    if (ok && ps.p != ps.end) {
        ps.err = "unbalanced )";
        ok = false;
    }
    ok = ok && rx_emit(&ps, (rx_inst){RX_MATCH, 0, 0, 0});
    if (!ok) {
        int code = ps.err && !strcmp(ps.err, "out of memory") ? SNUG_ERR_OOM
                   : ps.err && strstr(ps.err, "supported") ? SNUG_ERR_UNSUPPORTED : SNUG_ERR_INVALID_ARG;
        int rc = sn_kfail(err, node, code, "pattern '%s': %s (at offset %d)", a->s.ptr,
                          ps.err ? ps.err : "invalid", (int)(ps.p - a->s.ptr));
        text_regex_free(s);
        return rc;
    }
    *out = s;
    return SNUG_OK;
}

int text_regex_infer(sn_infer_ctx *c) {
    const sn_tensor *x = sn_in(c->in, c->n_in, 0);
    if (!x)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "input is missing");
    if (x->dtype != SN_STRING)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "input must be a string tensor");
    if (!sn_attr_get(c->node, "pattern"))
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "attribute 'pattern' is missing");
    sn_set_out(c->out[0], SN_BOOL, x->rank, x->dims);
    return SNUG_OK;
}

int text_regex_prepare(sn_prep_ctx *c) {
    rx_state *s = NULL;
    SN_TRY(rx_compile(c->node, c->err, &s));
    c->state = s;
    /* two thread lists and the on-list marks (n each), the closure stack
     * (each instruction pushes at most two successors: 2n + 1) */
    c->workspace = sizeof(int32_t) * (5 * (size_t)s->g.n + 2);
    return SNUG_OK;
}

typedef struct rx_vm {
    const rx_prog *g;
    int32_t *mark; /* generation that last added each pc */
    int32_t *stack;
    const unsigned char *s;
    size_t len;
} rx_vm;

static bool rx_assert(const rx_vm *vm, int kind, size_t pos) {
    switch (kind) {
    case RX_BOL: return pos == 0;
    case RX_EOL: return pos == vm->len;
    default: {
        bool a = pos > 0 && is_word(vm->s[pos - 1]), b = pos < vm->len && is_word(vm->s[pos]);
        return (a != b) == (kind == RX_WORDB);
    }
    }
}

/* Adds pc and everything reachable by empty moves at pos to list (n in
 * *nl); returns true when MATCH is reached. */
static bool rx_add(rx_vm *vm, int32_t *list, int *nl, int pc0, int32_t gen, size_t pos) {
    bool matched = false;
    int sp = 0;
    vm->stack[sp++] = pc0;
    while (sp) {
        int pc = vm->stack[--sp];
        if (vm->mark[pc] == gen)
            continue;
        vm->mark[pc] = gen;
        const rx_inst *in = &vm->g->code[pc];
        switch (in->op) {
        case RX_JMP: vm->stack[sp++] = pc + in->x; break;
        case RX_SPLIT:
            vm->stack[sp++] = pc + in->y;
            vm->stack[sp++] = pc + in->x;
            break;
        case RX_ASSERT:
            if (rx_assert(vm, in->ch, pos))
                vm->stack[sp++] = pc + 1;
            break;
        case RX_MATCH: matched = true; break;
        default: list[(*nl)++] = pc; break;
        }
    }
    return matched;
}

static bool rx_full_match(const rx_prog *g, int32_t *ws, const unsigned char *s, size_t len) {
    int n = g->n;
    int32_t *cl = ws, *nlist = ws + n;
    rx_vm vm = {g, ws + 2 * n, ws + 3 * n, s, len};
    for (int i = 0; i < n; i++)
        vm.mark[i] = -1;
    int ncl = 0;
    int32_t gen = 0;
    bool matched = rx_add(&vm, cl, &ncl, 0, gen, 0);
    for (size_t pos = 0; pos < len; pos++) {
        if (!ncl)
            return false;
        int nn = 0;
        gen++;
        matched = false;
        unsigned ch = s[pos];
        for (int i = 0; i < ncl; i++) {
            const rx_inst *in = &g->code[cl[i]];
            bool ok = in->op == RX_CHAR ? in->ch == ch
                      : in->op == RX_ANY ? ch != '\n'
                                         : set_has(g->cls[in->x], ch);
            if (ok && rx_add(&vm, nlist, &nn, cl[i] + 1, gen, pos + 1))
                matched = true;
        }
        int32_t *t = cl;
        cl = nlist;
        nlist = t;
        ncl = nn;
    }
    return matched;
}

int text_regex_run(sn_kctx *c) {
    const sn_tensor *x = c->in[0];
    sn_tensor *y = c->out[0];
    const rx_state *st = c->state;
    int64_t n = sn_tensor_numel(x);
    const sn_string *s = x->data;
    uint8_t *Y = y->data;
    for (int64_t i = 0; i < n; i++)
        Y[i] = rx_full_match(&st->g, c->ws, (const unsigned char *)s[i].ptr, s[i].len);
    return SNUG_OK;
}
