/* Private to template_parse.c (lexer, parser), template_eval.c (rendering)
 * and template_model.c (JSON, model folders): the parsed form of a chat
 * template and the values it computes with. */
#ifndef SN_GENAI_TEMPLATE_IMPL_H
#define SN_GENAI_TEMPLATE_IMPL_H

#include "genai/template.h"

/* ---- arena --------------------------------------------------------------- */

/* Everything a template or a render allocates lives until the template or
 * the render ends, so nothing is freed one by one and an error path has
 * nothing to undo. */
typedef struct tp_chunk tp_chunk;
typedef struct tp_arena {
    tp_chunk *head; /* owned: a list of sn_malloc'd chunks */
    size_t used, cap;
} tp_arena;

void *tp_alloc(tp_arena *a, size_t n); /* NULL when out of memory; zeroed */
char *tp_strndup(tp_arena *a, const char *s, size_t n);
void tp_arena_free(tp_arena *a);

/* ---- values -------------------------------------------------------------- */

typedef enum tp_kind {
    TP_UNDEF,  /* jinja2's default Undefined: s names what was missing */
    TP_NONE,
    TP_BOOL,
    TP_INT,
    TP_FLOAT,
    TP_STR,
    TP_LIST,   /* also tuples and range() (tp_list.kind) */
    TP_DICT,
    TP_NS,     /* namespace(): a dict whose attributes set can assign */
    TP_LOOP,   /* the loop variable of a for */
    TP_FUNC,   /* a global function (tp_func) */
    TP_MACRO,
} tp_kind;

/* GEN: what Python hands over as a one-pass iterator (selectattr, map,
 * reverse, the items filter): iterating it uses it up, it is always true
 * and has no len(). VIEW: dict.items(), keys(), values(). Neither prints
 * (Python would print "<generator object ...>"): printing one is refused. */
typedef enum tp_list_kind { TP_L_LIST, TP_L_TUPLE, TP_L_RANGE, TP_L_GEN, TP_L_VIEW } tp_list_kind;

typedef enum tp_func {
    TP_F_RANGE,
    TP_F_NAMESPACE,
    TP_F_DICT,
    TP_F_RAISE,
    TP_F_STRFTIME,
} tp_func;

typedef struct tp_list tp_list;
typedef struct tp_dict tp_dict;
typedef struct tp_loop tp_loop;
typedef struct tp_macro tp_macro;
typedef struct tp_scope tp_scope;

typedef struct tp_val {
    tp_kind kind;
    union {
        bool b;
        int64_t i;
        double f;
        struct {
            const char *p; /* arena or template memory; UTF-8, not NUL-terminated */
            size_t n;
        } s;
        tp_list *l;
        tp_dict *d;
        tp_loop *loop;
        tp_func fn;
        struct {
            const tp_macro *m;
            tp_scope *scope; /* where it was defined: what its body sees */
        } mac;
    } u;
} tp_val;

struct tp_list {
    tp_list_kind kind;
    size_t n;
    tp_val *v;
    int64_t start, stop, step; /* TP_L_RANGE: what it prints as */
    size_t pos;                /* TP_L_GEN: items [0, pos) are used up */
};

/* Keys in insertion order, as Python's dict; looked up linearly (a chat
 * message has a handful). */
struct tp_dict {
    size_t n, cap;
    tp_val *k, *v;
};

/* ---- syntax tree ----------------------------------------------------------- */

typedef enum tp_nkind {
    /* statements */
    TP_N_TEXT,     /* s */
    TP_N_OUTPUT,   /* a */
    TP_N_IF,       /* a: condition, body, orelse */
    TP_N_FOR,      /* target, a: iterable, b: filter (or NULL), body, orelse */
    TP_N_SET,      /* target, a: value */
    TP_N_SETBLOCK, /* target (a name), body, b: a filter chain on TP_N_CAPTURED or NULL */
    TP_N_MACRO,    /* s: name, macro */
    TP_N_BREAK,
    TP_N_CONTINUE,
    /* expressions */
    TP_N_CONST,    /* val */
    TP_N_NAME,     /* s */
    TP_N_ATTR,     /* a.s */
    TP_N_ITEM,     /* a[b] */
    TP_N_SLICE,    /* a[b:c:d], each of b, c, d NULL when left out */
    TP_N_CALL,     /* a(args) */
    TP_N_FILTER,   /* a | s(args); a NULL in a filter block's chain */
    TP_N_TEST,     /* a is [not] s(args); op: negated */
    TP_N_UNARY,    /* op a: '-', '+', 'n' (not) */
    TP_N_BINARY,   /* a op b: + - * / F(//) % P(**) ~ a(and) o(or) */
    TP_N_COMPARE,  /* a, then args[i] with ops[i]: chained comparisons */
    TP_N_CONDEXPR, /* b if a else c (c NULL: undefined) */
    TP_N_LIST,     /* args */
    TP_N_TUPLE,    /* args */
    TP_N_DICT,     /* args: key, value, key, value... */
    TP_N_CAPTURED, /* the captured body in a filter block's chain */
} tp_nkind;

/* Comparison operators of TP_N_COMPARE. */
enum { TP_CMP_EQ, TP_CMP_NE, TP_CMP_LT, TP_CMP_LE, TP_CMP_GT, TP_CMP_GE, TP_CMP_IN, TP_CMP_NOTIN };

typedef struct tp_node tp_node;

/* A call's or filter's arguments: positional first, then named. */
typedef struct tp_args {
    int n, npos;        /* n arguments, the first npos positional */
    tp_node **v;
    const char **names; /* [npos..n): NUL-terminated names */
} tp_args;

struct tp_macro {
    const char *name;
    int nparams;
    const char **params;
    tp_node **defaults; /* NULL entries: no default */
    tp_node *body;
    int line;
};

/* Assignment targets: a name (s), a tuple of names (args), or ns.attr
 * (a: the namespace expression, s: the attribute). */
typedef struct tp_target {
    const char *s;
    tp_node *ns;
    int n;
    const char **names;
} tp_target;

struct tp_node {
    tp_nkind kind;
    int line;
    int op;
    const char *s; /* NUL-terminated (names) or with slen bytes (text) */
    size_t slen;
    tp_val val;
    tp_node *a, *b, *c, *d;
    tp_args args;
    int *ops;        /* TP_N_COMPARE */
    tp_target target;
    tp_macro *macro;
    tp_node *body, *orelse; /* statement lists, linked through next */
    tp_node *next;
};

struct sn_template {
    tp_arena arena; /* owns every node and string */
    tp_node *body;
    const char *name;
};

/* Sets d[k] = v (Python's dict: a new key goes last, an old one keeps its
 * place); false when out of memory. */
bool tp_dict_put(tp_arena *a, tp_dict *d, tp_val k, tp_val v);

/* The filters and tests the parser accepts (template_eval.c has them all). */
extern const char *const tp_filter_names[];
extern const char *const tp_test_names[];
bool tp_name_in(const char *const *list, const char *name);

/* ---- JSON (template_model.c) ------------------------------------------------ */

/* Parses len bytes of JSON into a value in arena a, as Python's json.loads
 * does (integers stay integers, "1.0" is a float). what names the text in
 * messages. */
int tp_json_parse(tp_arena *a, const char *json, size_t len, const char *what, tp_val *out,
                  sn_err *err);

#endif
