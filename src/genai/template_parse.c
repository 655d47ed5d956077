/* Chat templates (template.h): the lexer and parser, which follow jinja2
 * 3.1.6's lexer.py and parser.py with trim_blocks and lstrip_blocks on.
 *
 * The lexer reads the whole source into tokens first: text runs (with the
 * whitespace control of "-", "+", trim_blocks and lstrip_blocks already
 * applied, as jinja2's lexer applies it) and the tokens inside {{ }} and
 * {% %}. Comments leave nothing but their effect on whitespace. The parser
 * is recursive descent with jinja2's precedence. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genai/template_impl.h"

/* ---- arena --------------------------------------------------------------- */

struct tp_chunk {
    tp_chunk *next;
    size_t cap;
    max_align_t data[];
};

void *tp_alloc(tp_arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (!a->head || a->cap - a->used < n) {
        /* chunks grow from 1 KiB to 64 KiB: a small template stays small */
        size_t want = a->head ? (a->cap < 65536 ? 2 * a->cap : 65536) : 1024;
        size_t cap = n > want ? n : want;
        tp_chunk *c = sn_malloc(sizeof *c + cap);
        if (!c)
            return NULL;
        c->next = a->head;
        c->cap = cap;
        a->head = c;
        a->used = 0;
        a->cap = cap;
    }
    void *p = (char *)a->head->data + a->used;
    a->used += n;
    memset(p, 0, n);
    return p;
}

char *tp_strndup(tp_arena *a, const char *s, size_t n) {
    char *p = tp_alloc(a, n + 1);
    if (p && n)
        memcpy(p, s, n);
    return p;
}

void tp_arena_free(tp_arena *a) {
    for (tp_chunk *c = a->head, *next; c; c = next) {
        next = c->next;
        sn_free(c);
    }
    a->head = NULL;
    a->used = a->cap = 0;
}

/* ---- tokens -------------------------------------------------------------- */

typedef enum tok_type {
    T_TEXT,
    T_VBEGIN, /* {{ */
    T_VEND,
    T_BBEGIN, /* {% */
    T_BEND,
    T_NAME,
    T_STR,
    T_INT,
    T_FLOAT,
    T_OP, /* op: the character, or F // P ** E == N != L <= G >= */
    T_EOF,
} tok_type;

typedef struct tok {
    tok_type type;
    int line;
    int op;
    const char *s; /* T_TEXT, T_NAME (NUL-terminated), T_STR (decoded) */
    size_t n;
    int64_t i;
    double f;
} tok;

typedef struct tp_parser {
    sn_template *t;
    sn_err *err;
    const char *src; /* newline-normalized copy, in the arena */
    size_t len;
    tok *toks; /* owned (sn_malloc) */
    size_t ntok, cap, pos;
} tp_parser;

static int perr(tp_parser *P, int code, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int perr(tp_parser *P, int code, int line, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sn_errf(P->err, code, "%s line %d: %s", P->t->name, line, msg);
}

static int oom(tp_parser *P) { return sn_errf(P->err, SNUG_ERR_OOM, "%s: out of memory", P->t->name); }

static int push_tok(tp_parser *P, tok t) {
    if (P->ntok == P->cap) {
        size_t cap = P->cap ? 2 * P->cap : 256;
        tok *n = sn_realloc(P->toks, cap * sizeof *n);
        if (!n)
            return oom(P);
        P->toks = n;
        P->cap = cap;
    }
    P->toks[P->ntok++] = t;
    return SNUG_OK;
}

/* Python's \s on ASCII (str.isspace of the characters a template holds
 * around tags; other Unicode spaces there are not stripped). */
static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

static int count_lines(const char *s, size_t n) {
    int k = 0;
    for (size_t i = 0; i < n; i++)
        k += s[i] == '\n';
    return k;
}

/* The text before a tag, stripped as jinja2's OptionalLStrip does: "-"
 * strips all whitespace before the tag; lstrip_blocks (not for {{, not
 * with "+") strips spaces and tabs back to the line's start when only they
 * stand there. line_starting: the text starts a line. */
static size_t strip_text(const char *text, size_t n, char sign, bool is_var, bool line_starting) {
    if (sign == '-') {
        while (n && is_ws(text[n - 1]))
            n--;
        return n;
    }
    if (sign == '+' || is_var)
        return n;
    size_t l = n;
    while (l && text[l - 1] != '\n')
        l--;
    if (l > 0 || line_starting) {
        bool only_ws = l < n;
        for (size_t i = l; i < n; i++)
            only_ws = only_ws && is_ws(text[i]);
        if (only_ws)
            return l;
    }
    return n;
}

static int emit_text(tp_parser *P, const char *s, size_t n, int line) {
    if (!n)
        return SNUG_OK;
    tok t = {.type = T_TEXT, .line = line, .s = s, .n = n};
    return push_tok(P, t);
}

static int hexval(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)(c | 0x20);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static size_t u8enc(uint32_t cp, char *o) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | cp >> 12);
        o[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | cp >> 18);
    o[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* A string literal's body, decoded as jinja2 decodes it (Python's
 * unicode-escape after backslashreplace: the escapes of a Python string
 * literal, unknown ones kept with their backslash). */
static int decode_string(tp_parser *P, const char *s, size_t n, int line, tok *out) {
    char *o = tp_alloc(&P->t->arena, n + 1);
    if (!o)
        return oom(P);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\') {
            o[k++] = s[i];
            continue;
        }
        char c = s[++i]; /* the lexer saw the character after every backslash */
        uint32_t cp = 0;
        int digits = 0;
        switch (c) {
        case '\n': break;
        case '\\': o[k++] = '\\'; break;
        case '\'': o[k++] = '\''; break;
        case '"': o[k++] = '"'; break;
        case 'a': o[k++] = '\a'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case 'n': o[k++] = '\n'; break;
        case 'r': o[k++] = '\r'; break;
        case 't': o[k++] = '\t'; break;
        case 'v': o[k++] = '\v'; break;
        case 'x': digits = 2; break;
        case 'u': digits = 4; break;
        case 'U': digits = 8; break;
        case 'N':
            return perr(P, SNUG_ERR_UNSUPPORTED, line, "\\N{...} escapes in strings are not supported");
        default:
            if (c >= '0' && c <= '7') {
                for (int j = 0; j < 3 && i < n && s[i] >= '0' && s[i] <= '7'; j++, i++)
                    cp = cp * 8 + (uint32_t)(s[i] - '0');
                i--;
                k += u8enc(cp, o + k); /* at most \777: 2 bytes for 4 of source */
            } else if ((unsigned char)c >= 0x80) {
                /* backslashreplace would turn the character into an escape
                 * of its own code, which unicode-escape then reads back as
                 * text: not worth mirroring. */
                return perr(P, SNUG_ERR_UNSUPPORTED, line, "a backslash before a non-ASCII character in a string");
            } else {
                o[k++] = '\\';
                o[k++] = c;
            }
        }
        if (digits) {
            for (int j = 0; j < digits; j++) {
                int h = i + 1 + (size_t)j < n ? hexval(s[i + 1 + j]) : -1;
                if (h < 0)
                    return perr(P, SNUG_ERR_PARSE, line, "truncated \\%c escape in a string", c);
                cp = cp << 4 | (uint32_t)h;
            }
            i += (size_t)digits;
            if (cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000))
                return perr(P, SNUG_ERR_UNSUPPORTED, line, "a string escape of a surrogate or of no character");
            k += u8enc(cp, o + k); /* at most 4 bytes for the 4-10 of source */
        }
    }
    o[k] = 0;
    out->s = o;
    out->n = k;
    return SNUG_OK;
}

/* The tokens between {{ and }} or {% and %}, from *pos (just after the
 * opening and its sign) up to and including the closing. */
static int lex_tag(tp_parser *P, size_t *pos, int *line, bool is_block, bool *line_starting) {
    const char *s = P->src;
    size_t n = P->len, i = *pos;
    char stack[64];
    int depth = 0;
    for (;;) {
        while (i < n && is_ws(s[i])) {
            *line += s[i] == '\n';
            i++;
        }
        if (i >= n)
            return perr(P, SNUG_ERR_PARSE, *line, "unexpected end of template inside %s",
                        is_block ? "a {% %} tag" : "a {{ }} expression");
        char end = is_block ? '%' : '}';
        if (depth == 0) {
            size_t e = 0;
            char sign = 0;
            if ((s[i] == '-' || (s[i] == '+' && is_block)) && i + 2 < n && s[i + 1] == end && s[i + 2] == '}') {
                sign = s[i];
                e = i + 3;
            } else if (i + 1 < n && s[i] == end && s[i + 1] == '}') {
                e = i + 2;
            }
            if (e) {
                if (sign == '-') {
                    while (e < n && is_ws(s[e])) {
                        *line += s[e] == '\n';
                        e++;
                    }
                } else if (is_block && !sign && e < n && s[e] == '\n') {
                    e++; /* trim_blocks */
                    (*line)++;
                }
                tok t = {.type = is_block ? T_BEND : T_VEND, .line = *line};
                SN_TRY(push_tok(P, t));
                *line_starting = s[e - 1] == '\n';
                *pos = e;
                return SNUG_OK;
            }
        }
        tok t = {.line = *line};
        char c = s[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
            size_t j = i;
            while (j < n && ((s[j] >= 'a' && s[j] <= 'z') || (s[j] >= 'A' && s[j] <= 'Z') ||
                             (s[j] >= '0' && s[j] <= '9') || s[j] == '_'))
                j++;
            t.type = T_NAME;
            t.s = tp_strndup(&P->t->arena, s + i, j - i);
            if (!t.s)
                return oom(P);
            t.n = j - i;
            i = j;
        } else if (c >= '0' && c <= '9') {
            char num[64];
            size_t k = 0, j = i;
            bool is_float = false;
            while (j < n && ((s[j] >= '0' && s[j] <= '9') || (s[j] == '_' && j + 1 < n && s[j + 1] >= '0' && s[j + 1] <= '9'))) {
                if (s[j] != '_' && k < sizeof num - 1)
                    num[k++] = s[j];
                j++;
            }
            if (j + 1 < n && s[j] == '.' && s[j + 1] >= '0' && s[j + 1] <= '9') {
                is_float = true;
                num[k < sizeof num - 1 ? k++ : k] = '.';
                j++;
                while (j < n && ((s[j] >= '0' && s[j] <= '9') || s[j] == '_')) {
                    if (s[j] != '_' && k < sizeof num - 1)
                        num[k++] = s[j];
                    j++;
                }
            }
            if (j < n && (s[j] == 'e' || s[j] == 'E')) {
                size_t m = j + 1;
                if (m < n && (s[m] == '+' || s[m] == '-'))
                    m++;
                if (m < n && s[m] >= '0' && s[m] <= '9') {
                    is_float = true;
                    if (k < sizeof num - 1)
                        num[k++] = 'e';
                    for (size_t q = j + 1; q < m; q++)
                        if (k < sizeof num - 1)
                            num[k++] = s[q];
                    j = m;
                    while (j < n && ((s[j] >= '0' && s[j] <= '9') || s[j] == '_')) {
                        if (s[j] != '_' && k < sizeof num - 1)
                            num[k++] = s[j];
                        j++;
                    }
                }
            }
            num[k] = 0;
            if (k >= sizeof num - 1)
                return perr(P, SNUG_ERR_UNSUPPORTED, *line, "a number literal of more than 62 digits");
            if (is_float) {
                t.type = T_FLOAT;
                t.f = strtod(num, NULL);
            } else {
                if (num[0] == '0' && (j < n && (s[j] == 'x' || s[j] == 'X' || s[j] == 'o' || s[j] == 'O' || s[j] == 'b' || s[j] == 'B')))
                    return perr(P, SNUG_ERR_UNSUPPORTED, *line, "hexadecimal, octal and binary integer literals are not supported");
                char *endp = NULL;
                long long v = strtoll(num, &endp, 10);
                if (num[0] == '0' && k > 1) /* "01": jinja2 lexes 0 then 1, a syntax error */
                    return perr(P, SNUG_ERR_PARSE, *line, "an integer literal with a leading zero");
                if (v == LLONG_MAX)
                    return perr(P, SNUG_ERR_UNSUPPORTED, *line, "an integer literal beyond 64 bits");
                t.type = T_INT;
                t.i = v;
            }
            i = j;
        } else if (c == '\'' || c == '"') {
            size_t j = i + 1;
            int nl = 0;
            while (j < n && s[j] != c) {
                if (s[j] == '\\' && j + 1 < n)
                    j++;
                nl += s[j] == '\n';
                j++;
            }
            if (j >= n)
                return perr(P, SNUG_ERR_PARSE, *line, "unterminated string literal");
            t.type = T_STR;
            SN_TRY(decode_string(P, s + i + 1, j - i - 1, *line, &t));
            *line += nl;
            i = j + 1;
        } else {
            static const char two[][3] = {"//", "**", "==", "!=", "<=", ">="};
            static const char code2[] = "FPENLG";
            t.type = T_OP;
            for (int k = 0; k < 6 && !t.op; k++)
                if (i + 1 < n && s[i] == two[k][0] && s[i + 1] == two[k][1])
                    t.op = code2[k];
            if (t.op) {
                i += 2;
            } else if (c && strchr("+-/*%~[](){}<>=.,:|;", c)) {
                t.op = c;
                i++;
                if (c == '(' || c == '[' || c == '{') {
                    if (depth == (int)sizeof stack)
                        return perr(P, SNUG_ERR_UNSUPPORTED, *line, "brackets nested more than 64 deep");
                    stack[depth++] = c == '(' ? ')' : c == '[' ? ']' : '}';
                } else if (c == ')' || c == ']' || c == '}') {
                    if (!depth)
                        return perr(P, SNUG_ERR_PARSE, *line, "unexpected '%c'", c);
                    if (stack[--depth] != c)
                        return perr(P, SNUG_ERR_PARSE, *line, "unexpected '%c', expected '%c'", c, stack[depth]);
                }
            } else {
                return perr(P, SNUG_ERR_PARSE, *line, "unexpected character '%c' (0x%02x) in a tag",
                            c >= 0x20 && c < 0x7f ? c : '?', (unsigned char)c);
            }
        }
        SN_TRY(push_tok(P, t));
    }
}

/* "{%" [-+] \s* NAME \s* ("-%}" \s* | "%}") at i: the end of the match, 0
 * when it is not there. For {% raw %} and {% endraw %}. */
static size_t match_word_tag(const char *s, size_t n, size_t i, const char *word, bool endraw, char *sign) {
    if (i + 2 > n || s[i] != '{' || s[i + 1] != '%')
        return 0;
    i += 2;
    *sign = 0;
    if (i < n && (s[i] == '-' || s[i] == '+'))
        *sign = s[i++];
    while (i < n && is_ws(s[i]))
        i++;
    size_t w = strlen(word);
    if (i + w > n || memcmp(s + i, word, w) != 0)
        return 0;
    i += w;
    while (i < n && is_ws(s[i]))
        i++;
    if (endraw && i + 3 <= n && s[i] == '+' && s[i + 1] == '%' && s[i + 2] == '}')
        return i + 3;
    if (i + 3 <= n && s[i] == '-' && s[i + 1] == '%' && s[i + 2] == '}') {
        i += 3;
        while (i < n && is_ws(s[i]))
            i++;
        return i;
    }
    if (i + 2 <= n && s[i] == '%' && s[i + 1] == '}') {
        i += 2;
        if (endraw && i < n && s[i] == '\n')
            i++; /* trim_blocks after endraw (not after raw: jinja2's rule has no suffix there) */
        return i;
    }
    return 0;
}

static int lex(tp_parser *P) {
    const char *s = P->src;
    size_t n = P->len, pos = 0;
    int line = 1;
    bool line_starting = true;
    while (pos < n) {
        size_t st = pos;
        while (st + 1 < n && !(s[st] == '{' && (s[st + 1] == '{' || s[st + 1] == '%' || s[st + 1] == '#')))
            st++;
        if (st + 1 >= n) {
            SN_TRY(emit_text(P, s + pos, n - pos, line));
            break;
        }
        char kind = s[st + 1];
        char sign = st + 2 < n && (s[st + 2] == '-' || s[st + 2] == '+') ? s[st + 2] : 0;
        char rsign = 0;
        size_t raw_end = kind == '%' ? match_word_tag(s, n, st, "raw", false, &rsign) : 0;
        size_t tl = strip_text(s + pos, st - pos, sign, kind == '{', line_starting);
        SN_TRY(emit_text(P, s + pos, tl, line));
        line += count_lines(s + pos, st - pos);
        if (raw_end) {
            /* {% raw %}: text up to {% endraw %}, the text before it
             * stripped as the text before any tag */
            line += count_lines(s + st, raw_end - st);
            size_t j = raw_end, e = 0;
            char esign = 0;
            for (; j < n; j++)
                if (s[j] == '{' && (e = match_word_tag(s, n, j, "endraw", true, &esign)) != 0)
                    break;
            if (!e)
                return perr(P, SNUG_ERR_PARSE, line, "missing end of raw directive");
            bool ls = s[raw_end - 1] == '\n';
            SN_TRY(emit_text(P, s + raw_end, strip_text(s + raw_end, j - raw_end, esign, false, ls), line));
            line += count_lines(s + raw_end, e - raw_end);
            line_starting = s[e - 1] == '\n';
            pos = e;
            continue;
        }
        pos = st + 2 + (sign ? 1 : 0);
        if (kind == '#') {
            size_t j = pos;
            while (j + 1 < n && !(s[j] == '#' && s[j + 1] == '}'))
                j++;
            if (j + 1 >= n)
                return perr(P, SNUG_ERR_PARSE, line, "missing end of comment tag");
            size_t e = j + 2;
            char esign = j > pos && (s[j - 1] == '-' || s[j - 1] == '+') ? s[j - 1] : 0;
            if (esign == '-')
                while (e < n && is_ws(s[e]))
                    e++;
            else if (!esign && e < n && s[e] == '\n')
                e++;
            line += count_lines(s + pos, e - pos);
            line_starting = s[e - 1] == '\n';
            pos = e;
            continue;
        }
        tok t = {.type = kind == '%' ? T_BBEGIN : T_VBEGIN, .line = line};
        SN_TRY(push_tok(P, t));
        SN_TRY(lex_tag(P, &pos, &line, kind == '%', &line_starting));
    }
    tok t = {.type = T_EOF, .line = line};
    return push_tok(P, t);
}

/* ---- parser -------------------------------------------------------------- */

static tok *cur(tp_parser *P) { return &P->toks[P->pos]; }
static tok *peek(tp_parser *P, size_t k) {
    size_t i = P->pos + k;
    return &P->toks[i < P->ntok ? i : P->ntok - 1];
}
static void advance(tp_parser *P) {
    if (P->toks[P->pos].type != T_EOF)
        P->pos++;
}
static bool is_op(const tok *t, int op) { return t->type == T_OP && t->op == op; }
static bool is_name(const tok *t, const char *name) { return t->type == T_NAME && strcmp(t->s, name) == 0; }

static const char *describe(const tok *t, char *buf, size_t n) {
    switch (t->type) {
    case T_TEXT: return "template text";
    case T_VBEGIN: return "'{{'";
    case T_VEND: return "'}}'";
    case T_BBEGIN: return "'{%'";
    case T_BEND: return "'%}'";
    case T_NAME: snprintf(buf, n, "'%s'", t->s); return buf;
    case T_STR: return "a string";
    case T_INT: return "an integer";
    case T_FLOAT: return "a float";
    case T_EOF: return "the end of the template";
    case T_OP: break;
    }
    static const char code2[] = "FPENLG";
    static const char *two[] = {"//", "**", "==", "!=", "<=", ">="};
    const char *c = strchr(code2, t->op);
    if (c && t->op)
        snprintf(buf, n, "'%s'", two[c - code2]);
    else
        snprintf(buf, n, "'%c'", t->op);
    return buf;
}

static int unexpected(tp_parser *P, const char *wanted) {
    char b[80];
    const tok *t = cur(P);
    return perr(P, SNUG_ERR_PARSE, t->line, "unexpected %s, expected %s", describe(t, b, sizeof b), wanted);
}

static int expect_op(tp_parser *P, int op, const char *wanted) {
    if (!is_op(cur(P), op))
        return unexpected(P, wanted);
    advance(P);
    return SNUG_OK;
}

static int expect_bend(tp_parser *P) {
    if (cur(P)->type != T_BEND)
        return unexpected(P, "the end of the tag '%}'");
    advance(P);
    return SNUG_OK;
}

static tp_node *new_node(tp_parser *P, tp_nkind kind, int line) {
    tp_node *n = tp_alloc(&P->t->arena, sizeof *n);
    if (n) {
        n->kind = kind;
        n->line = line;
    }
    return n;
}

#define NEW(var, kind, line)                    \
    do {                                        \
        if (!((var) = new_node(P, kind, line))) \
            return oom(P);                      \
    } while (0)

/* A growable array of node pointers, copied into the arena when done. */
typedef struct nvec {
    tp_node *v[64];
    const char *names[64];
    int n;
} nvec;

static int nvec_push(tp_parser *P, nvec *v, tp_node *n, const char *name, int line) {
    if (v->n == 64)
        return perr(P, SNUG_ERR_UNSUPPORTED, line, "more than 64 items in one list, dict or call");
    v->names[v->n] = name;
    v->v[v->n++] = n;
    return SNUG_OK;
}

static int nvec_args(tp_parser *P, const nvec *v, int npos, tp_args *out) {
    out->n = v->n;
    out->npos = npos;
    if (!v->n)
        return SNUG_OK;
    out->v = tp_alloc(&P->t->arena, (size_t)v->n * sizeof *out->v);
    out->names = tp_alloc(&P->t->arena, (size_t)v->n * sizeof *out->names);
    if (!out->v || !out->names)
        return oom(P);
    memcpy(out->v, v->v, (size_t)v->n * sizeof *out->v);
    memcpy(out->names, v->names, (size_t)v->n * sizeof *out->names);
    return SNUG_OK;
}

static int parse_expr(tp_parser *P, bool with_cond, tp_node **out);
static int parse_tuple(tp_parser *P, bool with_cond, bool explicit_parens, const char *end_name,
                       tp_node **out);
static int parse_unary(tp_parser *P, bool with_filter, tp_node **out);

/* (args) of a call, filter or test; the current token is '('. */
static int parse_call_args(tp_parser *P, tp_args *out) {
    int line = cur(P)->line;
    advance(P);
    nvec v = {0};
    int npos = 0;
    bool named = false;
    while (!is_op(cur(P), ')')) {
        if (v.n && !is_op(cur(P), ','))
            return unexpected(P, "',' or ')'");
        if (v.n)
            advance(P);
        if (is_op(cur(P), ')'))
            break;
        if (is_op(cur(P), '*'))
            return perr(P, SNUG_ERR_UNSUPPORTED, cur(P)->line, "*args and **kwargs in calls are not supported");
        const char *name = NULL;
        if (cur(P)->type == T_NAME && is_op(peek(P, 1), '=')) {
            name = cur(P)->s;
            advance(P);
            advance(P);
            named = true;
        } else if (named) {
            return perr(P, SNUG_ERR_PARSE, cur(P)->line, "a positional argument after a named one");
        }
        tp_node *e = NULL;
        SN_TRY(parse_expr(P, true, &e));
        SN_TRY(nvec_push(P, &v, e, name, line));
        if (!name)
            npos++;
    }
    advance(P);
    return nvec_args(P, &v, npos, out);
}

static int parse_primary(tp_parser *P, tp_node **out) {
    tok *t = cur(P);
    tp_node *n = NULL;
    switch (t->type) {
    case T_NAME:
        if (!strcmp(t->s, "true") || !strcmp(t->s, "True") || !strcmp(t->s, "false") || !strcmp(t->s, "False")) {
            NEW(n, TP_N_CONST, t->line);
            n->val.kind = TP_BOOL;
            n->val.u.b = t->s[0] == 't' || t->s[0] == 'T';
        } else if (!strcmp(t->s, "none") || !strcmp(t->s, "None")) {
            NEW(n, TP_N_CONST, t->line);
            n->val.kind = TP_NONE;
        } else {
            NEW(n, TP_N_NAME, t->line);
            n->s = t->s;
        }
        advance(P);
        break;
    case T_STR: {
        NEW(n, TP_N_CONST, t->line);
        n->val.kind = TP_STR;
        size_t total = 0, k = 0;
        for (size_t i = P->pos; P->toks[i].type == T_STR; i++)
            total += P->toks[i].n;
        char *s = tp_alloc(&P->t->arena, total + 1);
        if (!s)
            return oom(P);
        for (; cur(P)->type == T_STR; advance(P)) {
            memcpy(s + k, cur(P)->s, cur(P)->n);
            k += cur(P)->n;
        }
        n->val.u.s.p = s;
        n->val.u.s.n = total;
        break;
    }
    case T_INT:
    case T_FLOAT:
        NEW(n, TP_N_CONST, t->line);
        if (t->type == T_INT) {
            n->val.kind = TP_INT;
            n->val.u.i = t->i;
        } else {
            n->val.kind = TP_FLOAT;
            n->val.u.f = t->f;
        }
        advance(P);
        break;
    case T_OP:
        if (t->op == '(') {
            advance(P);
            SN_TRY(parse_tuple(P, true, true, NULL, &n));
            SN_TRY(expect_op(P, ')', "')'"));
        } else if (t->op == '[' || t->op == '{') {
            int close = t->op == '[' ? ']' : '}';
            NEW(n, t->op == '[' ? TP_N_LIST : TP_N_DICT, t->line);
            advance(P);
            nvec v = {0};
            while (!is_op(cur(P), close)) {
                if (v.n) {
                    SN_TRY(expect_op(P, ',', close == ']' ? "',' or ']'" : "',' or '}'"));
                    if (is_op(cur(P), close))
                        break;
                }
                tp_node *e = NULL;
                SN_TRY(parse_expr(P, true, &e));
                SN_TRY(nvec_push(P, &v, e, NULL, n->line));
                if (close == '}') {
                    SN_TRY(expect_op(P, ':', "':'"));
                    SN_TRY(parse_expr(P, true, &e));
                    SN_TRY(nvec_push(P, &v, e, NULL, n->line));
                }
            }
            advance(P);
            SN_TRY(nvec_args(P, &v, v.n, &n->args));
        } else {
            return unexpected(P, "an expression");
        }
        break;
    default:
        return unexpected(P, "an expression");
    }
    *out = n;
    return SNUG_OK;
}

/* [...] after an expression: an index or a slice; the current token is '['. */
static int parse_subscript(tp_parser *P, tp_node *obj, tp_node **out) {
    int line = cur(P)->line;
    advance(P);
    tp_node *parts[3] = {NULL, NULL, NULL};
    int nparts = 0;
    bool slice = false;
    for (;;) {
        if (!is_op(cur(P), ':') && !is_op(cur(P), ']'))
            SN_TRY(parse_expr(P, true, &parts[nparts]));
        if (is_op(cur(P), ':')) {
            if (nparts == 2)
                return unexpected(P, "']'");
            slice = true;
            nparts++;
            advance(P);
            continue;
        }
        break;
    }
    if (is_op(cur(P), ','))
        return perr(P, SNUG_ERR_UNSUPPORTED, line, "a tuple as a subscript");
    SN_TRY(expect_op(P, ']', "']'"));
    tp_node *n = NULL;
    if (!slice) {
        if (!parts[0])
            return perr(P, SNUG_ERR_PARSE, line, "an empty subscript");
        NEW(n, TP_N_ITEM, line);
        n->b = parts[0];
    } else {
        NEW(n, TP_N_SLICE, line);
        n->b = parts[0];
        n->c = parts[1];
        n->d = parts[2];
    }
    n->a = obj;
    *out = n;
    return SNUG_OK;
}

static int parse_postfix(tp_parser *P, tp_node **node) {
    for (;;) {
        tok *t = cur(P);
        tp_node *n = NULL;
        if (is_op(t, '.')) {
            advance(P);
            tok *a = cur(P);
            if (a->type == T_NAME) {
                NEW(n, TP_N_ATTR, a->line);
                n->s = a->s;
            } else if (a->type == T_INT) {
                NEW(n, TP_N_ITEM, a->line);
                NEW(n->b, TP_N_CONST, a->line);
                n->b->val.kind = TP_INT;
                n->b->val.u.i = a->i;
            } else {
                return unexpected(P, "an attribute name after '.'");
            }
            advance(P);
            n->a = *node;
        } else if (is_op(t, '[')) {
            SN_TRY(parse_subscript(P, *node, &n));
        } else if (is_op(t, '(')) {
            NEW(n, TP_N_CALL, t->line);
            n->a = *node;
            SN_TRY(parse_call_args(P, &n->args));
        } else {
            return SNUG_OK;
        }
        *node = n;
    }
}

/* | name(args): the current token is the filter's name. */
static int parse_filter(tp_parser *P, tp_node *arg, tp_node **out) {
    tok *t = cur(P);
    if (t->type != T_NAME)
        return unexpected(P, "a filter name");
    if (is_op(peek(P, 1), '.'))
        return perr(P, SNUG_ERR_UNSUPPORTED, t->line, "dotted filter names are not supported");
    if (!tp_name_in(tp_filter_names, t->s))
        return perr(P, SNUG_ERR_UNSUPPORTED, t->line, "filter '%s' is not supported", t->s);
    tp_node *n = NULL;
    NEW(n, TP_N_FILTER, t->line);
    n->s = t->s;
    n->a = arg;
    advance(P);
    if (is_op(cur(P), '('))
        SN_TRY(parse_call_args(P, &n->args));
    *out = n;
    return SNUG_OK;
}

static int parse_filter_expr(tp_parser *P, tp_node **node) {
    for (;;) {
        tok *t = cur(P);
        tp_node *n = NULL;
        if (is_op(t, '|')) {
            advance(P);
            SN_TRY(parse_filter(P, *node, &n));
        } else if (is_name(t, "is")) {
            advance(P);
            bool neg = false;
            if (is_name(cur(P), "not")) {
                neg = true;
                advance(P);
            }
            tok *name = cur(P);
            if (name->type != T_NAME)
                return unexpected(P, "a test name");
            if (!tp_name_in(tp_test_names, name->s))
                return perr(P, SNUG_ERR_UNSUPPORTED, name->line, "test '%s' is not supported", name->s);
            NEW(n, TP_N_TEST, name->line);
            n->s = name->s;
            n->a = *node;
            n->op = neg;
            advance(P);
            tok *a = cur(P);
            if (is_op(a, '(')) {
                SN_TRY(parse_call_args(P, &n->args));
            } else if ((a->type == T_NAME || a->type == T_STR || a->type == T_INT || a->type == T_FLOAT ||
                        is_op(a, '[') || is_op(a, '{')) &&
                       !is_name(a, "else") && !is_name(a, "or") && !is_name(a, "and")) {
                if (is_name(a, "is"))
                    return perr(P, SNUG_ERR_PARSE, a->line, "tests cannot be chained with 'is'");
                tp_node *arg = NULL;
                SN_TRY(parse_primary(P, &arg));
                SN_TRY(parse_postfix(P, &arg));
                nvec v = {0};
                SN_TRY(nvec_push(P, &v, arg, NULL, a->line));
                SN_TRY(nvec_args(P, &v, 1, &n->args));
            }
        } else if (is_op(t, '(')) {
            NEW(n, TP_N_CALL, t->line);
            n->a = *node;
            SN_TRY(parse_call_args(P, &n->args));
        } else {
            return SNUG_OK;
        }
        *node = n;
    }
}

static int parse_unary(tp_parser *P, bool with_filter, tp_node **out) {
    tok *t = cur(P);
    tp_node *n = NULL;
    if (is_op(t, '-') || is_op(t, '+')) {
        NEW(n, TP_N_UNARY, t->line);
        n->op = t->op;
        advance(P);
        SN_TRY(parse_unary(P, false, &n->a));
    } else {
        SN_TRY(parse_primary(P, &n));
    }
    SN_TRY(parse_postfix(P, &n));
    if (with_filter)
        SN_TRY(parse_filter_expr(P, &n));
    *out = n;
    return SNUG_OK;
}

static int binary(tp_parser *P, int op, int line, tp_node *a, tp_node *b, tp_node **out) {
    tp_node *n = NULL;
    NEW(n, TP_N_BINARY, line);
    n->op = op;
    n->a = a;
    n->b = b;
    *out = n;
    return SNUG_OK;
}

static int parse_pow(tp_parser *P, tp_node **out) {
    SN_TRY(parse_unary(P, true, out));
    while (is_op(cur(P), 'P')) {
        int line = cur(P)->line;
        advance(P);
        tp_node *r = NULL;
        SN_TRY(parse_unary(P, true, &r));
        SN_TRY(binary(P, 'P', line, *out, r, out));
    }
    return SNUG_OK;
}

static int parse_math2(tp_parser *P, tp_node **out) {
    SN_TRY(parse_pow(P, out));
    while (is_op(cur(P), '*') || is_op(cur(P), '/') || is_op(cur(P), 'F') || is_op(cur(P), '%')) {
        int op = cur(P)->op, line = cur(P)->line;
        advance(P);
        tp_node *r = NULL;
        SN_TRY(parse_pow(P, &r));
        SN_TRY(binary(P, op, line, *out, r, out));
    }
    return SNUG_OK;
}

static int parse_concat(tp_parser *P, tp_node **out) {
    SN_TRY(parse_math2(P, out));
    while (is_op(cur(P), '~')) {
        int line = cur(P)->line;
        advance(P);
        tp_node *r = NULL;
        SN_TRY(parse_math2(P, &r));
        SN_TRY(binary(P, '~', line, *out, r, out));
    }
    return SNUG_OK;
}

static int parse_math1(tp_parser *P, tp_node **out) {
    SN_TRY(parse_concat(P, out));
    while (is_op(cur(P), '+') || is_op(cur(P), '-')) {
        int op = cur(P)->op, line = cur(P)->line;
        advance(P);
        tp_node *r = NULL;
        SN_TRY(parse_concat(P, &r));
        SN_TRY(binary(P, op, line, *out, r, out));
    }
    return SNUG_OK;
}

static int parse_compare(tp_parser *P, tp_node **out) {
    tp_node *first = NULL;
    SN_TRY(parse_math1(P, &first));
    nvec v = {0};
    int ops[64];
    int line = cur(P)->line;
    for (;;) {
        tok *t = cur(P);
        int op = -1;
        if (t->type == T_OP) {
            switch (t->op) {
            case 'E': op = TP_CMP_EQ; break;
            case 'N': op = TP_CMP_NE; break;
            case '<': op = TP_CMP_LT; break;
            case 'L': op = TP_CMP_LE; break;
            case '>': op = TP_CMP_GT; break;
            case 'G': op = TP_CMP_GE; break;
            default: break;
            }
            if (op >= 0)
                advance(P);
        } else if (is_name(t, "in")) {
            op = TP_CMP_IN;
            advance(P);
        } else if (is_name(t, "not") && is_name(peek(P, 1), "in")) {
            op = TP_CMP_NOTIN;
            advance(P);
            advance(P);
        }
        if (op < 0)
            break;
        tp_node *r = NULL;
        SN_TRY(parse_math1(P, &r));
        ops[v.n] = op;
        SN_TRY(nvec_push(P, &v, r, NULL, line));
    }
    if (!v.n) {
        *out = first;
        return SNUG_OK;
    }
    tp_node *n = NULL;
    NEW(n, TP_N_COMPARE, line);
    n->a = first;
    SN_TRY(nvec_args(P, &v, v.n, &n->args));
    n->ops = tp_alloc(&P->t->arena, (size_t)v.n * sizeof *n->ops);
    if (!n->ops)
        return oom(P);
    memcpy(n->ops, ops, (size_t)v.n * sizeof *ops);
    *out = n;
    return SNUG_OK;
}

static int parse_not(tp_parser *P, tp_node **out) {
    if (is_name(cur(P), "not")) {
        tp_node *n = NULL;
        NEW(n, TP_N_UNARY, cur(P)->line);
        n->op = 'n';
        advance(P);
        SN_TRY(parse_not(P, &n->a));
        *out = n;
        return SNUG_OK;
    }
    return parse_compare(P, out);
}

static int parse_and(tp_parser *P, tp_node **out) {
    SN_TRY(parse_not(P, out));
    while (is_name(cur(P), "and")) {
        int line = cur(P)->line;
        advance(P);
        tp_node *r = NULL;
        SN_TRY(parse_not(P, &r));
        SN_TRY(binary(P, 'a', line, *out, r, out));
    }
    return SNUG_OK;
}

static int parse_or(tp_parser *P, tp_node **out) {
    SN_TRY(parse_and(P, out));
    while (is_name(cur(P), "or")) {
        int line = cur(P)->line;
        advance(P);
        tp_node *r = NULL;
        SN_TRY(parse_and(P, &r));
        SN_TRY(binary(P, 'o', line, *out, r, out));
    }
    return SNUG_OK;
}

static int parse_expr(tp_parser *P, bool with_cond, tp_node **out) {
    SN_TRY(parse_or(P, out));
    while (with_cond && is_name(cur(P), "if")) {
        tp_node *n = NULL;
        NEW(n, TP_N_CONDEXPR, cur(P)->line);
        advance(P);
        n->b = *out;
        SN_TRY(parse_or(P, &n->a));
        if (is_name(cur(P), "else")) {
            advance(P);
            SN_TRY(parse_expr(P, true, &n->c));
        }
        *out = n;
    }
    return SNUG_OK;
}

static bool tuple_end(tp_parser *P, const char *end_name) {
    tok *t = cur(P);
    return t->type == T_VEND || t->type == T_BEND || is_op(t, ')') || (end_name && is_name(t, end_name));
}

/* Expressions separated by commas: one alone is itself, more (or one with
 * a trailing comma) a tuple. */
static int parse_tuple(tp_parser *P, bool with_cond, bool explicit_parens, const char *end_name,
                       tp_node **out) {
    int line = cur(P)->line;
    nvec v = {0};
    bool is_tuple = false;
    for (;;) {
        if (v.n)
            SN_TRY(expect_op(P, ',', "','"));
        if (tuple_end(P, end_name))
            break;
        tp_node *e = NULL;
        SN_TRY(parse_expr(P, with_cond, &e));
        SN_TRY(nvec_push(P, &v, e, NULL, line));
        if (is_op(cur(P), ','))
            is_tuple = true;
        else
            break;
    }
    if (!is_tuple) {
        if (v.n) {
            *out = v.v[0];
            return SNUG_OK;
        }
        if (!explicit_parens)
            return unexpected(P, "an expression");
    }
    tp_node *n = NULL;
    NEW(n, TP_N_TUPLE, line);
    SN_TRY(nvec_args(P, &v, v.n, &n->args));
    *out = n;
    return SNUG_OK;
}

/* The target of for or set: a name, names separated by commas (in
 * parentheses or not), or, for set, ns.attr. */
static int parse_target(tp_parser *P, bool with_ns, tp_target *tg) {
    tok *t = cur(P);
    int line = t->line;
    if (with_ns && t->type == T_NAME && is_op(peek(P, 1), '.') && peek(P, 2)->type == T_NAME) {
        NEW(tg->ns, TP_N_NAME, line);
        tg->ns->s = t->s;
        tg->s = peek(P, 2)->s;
        advance(P);
        advance(P);
        advance(P);
        return SNUG_OK;
    }
    bool paren = is_op(t, '(');
    if (paren)
        advance(P);
    const char *names[16];
    int n = 0;
    for (;;) {
        if (cur(P)->type != T_NAME)
            return unexpected(P, "a variable name to assign to");
        if (n == 16)
            return perr(P, SNUG_ERR_UNSUPPORTED, line, "more than 16 names in one assignment");
        names[n++] = cur(P)->s;
        advance(P);
        if (!is_op(cur(P), ','))
            break;
        advance(P);
        if (!paren && (is_name(cur(P), "in") || is_op(cur(P), '=')))
            break;
    }
    if (paren)
        SN_TRY(expect_op(P, ')', "')'"));
    if (n == 1 && !paren) {
        tg->s = names[0];
        return SNUG_OK;
    }
    tg->n = n;
    tg->names = tp_alloc(&P->t->arena, (size_t)n * sizeof *tg->names);
    if (!tg->names)
        return oom(P);
    memcpy(tg->names, names, (size_t)n * sizeof *names);
    return SNUG_OK;
}

/* Where a block started, for the message when it never ends. */
typedef struct opener {
    const char *tag, *end;
    int line;
} opener;

static int parse_body(tp_parser *P, const char *const *ends, const opener *op, tp_node **out);

static int parse_for(tp_parser *P, int line, tp_node **out) {
    tp_node *n = NULL;
    NEW(n, TP_N_FOR, line);
    SN_TRY(parse_target(P, false, &n->target));
    if (!is_name(cur(P), "in"))
        return unexpected(P, "'in'");
    advance(P);
    SN_TRY(parse_tuple(P, false, false, "recursive", &n->a));
    if (is_name(cur(P), "if")) {
        advance(P);
        SN_TRY(parse_expr(P, true, &n->b));
    }
    if (is_name(cur(P), "recursive"))
        return perr(P, SNUG_ERR_UNSUPPORTED, cur(P)->line, "recursive for loops are not supported");
    SN_TRY(expect_bend(P));
    static const char *const ends[] = {"endfor", "else", NULL};
    static const char *const ends2[] = {"endfor", NULL};
    opener o = {"for", "endfor", line};
    SN_TRY(parse_body(P, ends, &o, &n->body));
    if (is_name(cur(P), "else")) {
        advance(P);
        SN_TRY(expect_bend(P));
        SN_TRY(parse_body(P, ends2, &o, &n->orelse));
    }
    advance(P); /* endfor */
    SN_TRY(expect_bend(P));
    *out = n;
    return SNUG_OK;
}

static int parse_if(tp_parser *P, int line, tp_node **out) {
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    static const char *const ends2[] = {"endif", NULL};
    opener o = {"if", "endif", line};
    tp_node *first = NULL, *n = NULL;
    for (;;) {
        tp_node *c = NULL;
        NEW(c, TP_N_IF, cur(P)->line);
        SN_TRY(parse_tuple(P, false, false, NULL, &c->a));
        SN_TRY(expect_bend(P));
        SN_TRY(parse_body(P, ends, &o, &c->body));
        if (n)
            n->orelse = c;
        else
            first = c;
        n = c;
        if (is_name(cur(P), "elif")) {
            advance(P);
            continue;
        }
        if (is_name(cur(P), "else")) {
            advance(P);
            SN_TRY(expect_bend(P));
            SN_TRY(parse_body(P, ends2, &o, &n->orelse));
        }
        break;
    }
    advance(P); /* endif */
    SN_TRY(expect_bend(P));
    *out = first;
    return SNUG_OK;
}

static int parse_set(tp_parser *P, int line, tp_node **out) {
    tp_node *n = NULL;
    NEW(n, TP_N_SET, line);
    SN_TRY(parse_target(P, true, &n->target));
    if (is_op(cur(P), '=')) {
        advance(P);
        SN_TRY(parse_tuple(P, true, false, NULL, &n->a));
        SN_TRY(expect_bend(P));
        *out = n;
        return SNUG_OK;
    }
    if (n->target.ns || n->target.n)
        return unexpected(P, "'='");
    n->kind = TP_N_SETBLOCK;
    if (is_op(cur(P), '|')) {
        tp_node *cap = NULL;
        NEW(cap, TP_N_CAPTURED, line);
        n->b = cap;
        while (is_op(cur(P), '|')) {
            advance(P);
            SN_TRY(parse_filter(P, n->b, &n->b));
        }
    }
    SN_TRY(expect_bend(P));
    static const char *const ends[] = {"endset", NULL};
    opener o = {"set", "endset", line};
    SN_TRY(parse_body(P, ends, &o, &n->body));
    advance(P);
    SN_TRY(expect_bend(P));
    *out = n;
    return SNUG_OK;
}

static int parse_macro(tp_parser *P, int line, tp_node **out) {
    tp_node *n = NULL;
    NEW(n, TP_N_MACRO, line);
    if (cur(P)->type != T_NAME)
        return unexpected(P, "a macro name");
    tp_macro *m = tp_alloc(&P->t->arena, sizeof *m);
    if (!m)
        return oom(P);
    m->name = n->s = cur(P)->s;
    m->line = line;
    n->macro = m;
    advance(P);
    if (!is_op(cur(P), '('))
        return unexpected(P, "'('");
    advance(P);
    nvec v = {0};
    while (!is_op(cur(P), ')')) {
        if (v.n)
            SN_TRY(expect_op(P, ',', "',' or ')'"));
        if (cur(P)->type != T_NAME)
            return unexpected(P, "a parameter name");
        const char *name = cur(P)->s;
        advance(P);
        tp_node *def = NULL;
        if (is_op(cur(P), '=')) {
            advance(P);
            SN_TRY(parse_expr(P, true, &def));
        } else if (v.n && v.v[v.n - 1]) {
            return perr(P, SNUG_ERR_PARSE, line, "a macro parameter without a default after one with");
        }
        SN_TRY(nvec_push(P, &v, def, name, line));
    }
    advance(P);
    SN_TRY(expect_bend(P));
    m->nparams = v.n;
    if (v.n) {
        m->params = tp_alloc(&P->t->arena, (size_t)v.n * sizeof *m->params);
        m->defaults = tp_alloc(&P->t->arena, (size_t)v.n * sizeof *m->defaults);
        if (!m->params || !m->defaults)
            return oom(P);
        memcpy(m->params, v.names, (size_t)v.n * sizeof *m->params);
        memcpy(m->defaults, v.v, (size_t)v.n * sizeof *m->defaults);
    }
    static const char *const ends[] = {"endmacro", NULL};
    opener o = {"macro", "endmacro", line};
    SN_TRY(parse_body(P, ends, &o, &m->body));
    advance(P);
    if (cur(P)->type == T_NAME && !strcmp(cur(P)->s, m->name))
        advance(P);
    SN_TRY(expect_bend(P));
    *out = n;
    return SNUG_OK;
}

/* One {% %} statement; the current token is its name. */
static int parse_statement(tp_parser *P, tp_node **out) {
    tok *t = cur(P);
    int line = t->line;
    if (t->type != T_NAME)
        return unexpected(P, "a tag name");
    const char *name = t->s;
    advance(P);
    if (!strcmp(name, "for"))
        return parse_for(P, line, out);
    if (!strcmp(name, "if"))
        return parse_if(P, line, out);
    if (!strcmp(name, "set"))
        return parse_set(P, line, out);
    if (!strcmp(name, "macro"))
        return parse_macro(P, line, out);
    if (!strcmp(name, "break") || !strcmp(name, "continue")) {
        tp_node *n = NULL;
        NEW(n, name[0] == 'b' ? TP_N_BREAK : TP_N_CONTINUE, line);
        SN_TRY(expect_bend(P));
        *out = n;
        return SNUG_OK;
    }
    if (!strcmp(name, "generation")) {
        /* transformers' AssistantTracker: the body renders as it is (the
         * tracker only records where it went) */
        tp_node *n = NULL;
        NEW(n, TP_N_IF, line);
        NEW(n->a, TP_N_CONST, line);
        n->a->val.kind = TP_BOOL;
        n->a->val.u.b = true;
        SN_TRY(expect_bend(P));
        static const char *const ends[] = {"endgeneration", NULL};
        opener o = {"generation", "endgeneration", line};
        SN_TRY(parse_body(P, ends, &o, &n->body));
        advance(P);
        SN_TRY(expect_bend(P));
        *out = n;
        return SNUG_OK;
    }
    static const char *const jinja_tags[] = {
        "call", "filter", "include", "import", "from", "extends", "block", "with", "autoescape",
        "do", "trans", "pluralize", "print", NULL};
    for (int i = 0; jinja_tags[i]; i++)
        if (!strcmp(name, jinja_tags[i]))
            return perr(P, SNUG_ERR_UNSUPPORTED, line, "the '%s' tag is not supported", name);
    return perr(P, SNUG_ERR_PARSE, line, "unknown tag '%s'", name);
}

/* Statements until {% END %} for an END in ends (NULL: the end of the
 * template); returns with END the current token. */
static int parse_body(tp_parser *P, const char *const *ends, const opener *op, tp_node **out) {
    tp_node *head = NULL, **tail = &head;
    *out = NULL;
    for (;;) {
        tok *t = cur(P);
        tp_node *n = NULL;
        if (t->type == T_EOF) {
            if (op)
                return perr(P, SNUG_ERR_PARSE, t->line,
                            "unexpected end of template: the '%s' block opened on line %d is never closed (expected '%s')",
                            op->tag, op->line, op->end);
            break;
        }
        if (t->type == T_TEXT) {
            NEW(n, TP_N_TEXT, t->line);
            n->s = t->s;
            n->slen = t->n;
            advance(P);
        } else if (t->type == T_VBEGIN) {
            NEW(n, TP_N_OUTPUT, t->line);
            advance(P);
            SN_TRY(parse_tuple(P, true, false, NULL, &n->a));
            if (cur(P)->type != T_VEND)
                return unexpected(P, "'}}'");
            advance(P);
        } else if (t->type == T_BBEGIN) {
            advance(P);
            tok *name = cur(P);
            for (int i = 0; ends && ends[i]; i++)
                if (is_name(name, ends[i])) {
                    *out = head;
                    return SNUG_OK;
                }
            if (name->type == T_NAME && (!strncmp(name->s, "end", 3) || !strcmp(name->s, "else") || !strcmp(name->s, "elif"))) {
                if (op)
                    return perr(P, SNUG_ERR_PARSE, name->line,
                                "unexpected '%s' inside the '%s' block opened on line %d (expected '%s')",
                                name->s, op->tag, op->line, op->end);
                return perr(P, SNUG_ERR_PARSE, name->line, "unexpected '%s' outside any block", name->s);
            }
            SN_TRY(parse_statement(P, &n));
        } else {
            return unexpected(P, "template text or a tag");
        }
        *tail = n;
        while (n->next)
            n = n->next;
        tail = &n->next;
    }
    *out = head;
    return SNUG_OK;
}

/* Well-formed UTF-8: no overlong forms, surrogates or code points past
 * U+10FFFF (what a Python str can be made of). */
static bool utf8_ok(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned c = u[i];
        size_t k = c < 0x80 ? 1 : (c >= 0xc2 && c < 0xe0) ? 2 : (c >= 0xe0 && c < 0xf0) ? 3 : (c >= 0xf0 && c < 0xf5) ? 4 : 0;
        if (!k || i + k > n)
            return false;
        uint32_t cp = k == 1 ? c : c & (0x7fu >> k);
        for (size_t j = 1; j < k; j++) {
            if ((u[i + j] & 0xc0) != 0x80)
                return false;
            cp = cp << 6 | (u[i + j] & 0x3f);
        }
        if ((k == 3 && cp < 0x800) || (k == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp < 0xe000))
            return false;
        i += k;
    }
    return true;
}

int sn_template_parse(const char *src, size_t len, const char *name, sn_template **out,
                      sn_err *err) {
    *out = NULL;
    sn_template *t = sn_calloc(1, sizeof *t);
    if (!t)
        return sn_errf(err, SNUG_ERR_OOM, "chat template: out of memory");
    tp_parser P = {.t = t, .err = err};
    int rc = SNUG_OK;
    t->name = tp_strndup(&t->arena, name ? name : "chat template", strlen(name ? name : "chat template"));
    char *s = tp_alloc(&t->arena, len + 1);
    if (!t->name || !s) {
        rc = oom(&P);
        goto fail;
    }
    if (!utf8_ok(src, len)) {
        rc = perr(&P, SNUG_ERR_PARSE, 1, "the template is not valid UTF-8");
        goto fail;
    }
    /* jinja2 reads \r\n and \r as \n and drops one newline at the end
     * (keep_trailing_newline is off) */
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[k++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n')
                i++;
        } else {
            s[k++] = src[i];
        }
    }
    if (k && s[k - 1] == '\n')
        k--;
    s[k] = 0;
    P.src = s;
    P.len = k;
    rc = lex(&P);
    if (rc != SNUG_OK)
        goto fail;
    rc = parse_body(&P, NULL, NULL, &t->body);
    if (rc != SNUG_OK)
        goto fail;
    sn_free(P.toks);
    *out = t;
    return SNUG_OK;
fail:
    sn_free(P.toks);
    sn_template_free(t);
    return rc;
}

void sn_template_free(sn_template *t) {
    if (!t)
        return;
    tp_arena_free(&t->arena);
    sn_free(t);
}
