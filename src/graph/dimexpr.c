/* Symbolic dim expressions as exporters write them in dim_param
 * ("past_sequence_length + sequence_length"): names, integers, + - *. */
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"

typedef struct dimexpr {
    const char *p;
    const sn_dim_bind *b;
    int n;
} dimexpr;

static void skip_space(dimexpr *e) {
    while (*e->p == ' ')
        e->p++;
}

static bool factor(dimexpr *e, int64_t *out) {
    skip_space(e);
    if (*e->p >= '0' && *e->p <= '9') {
        char *end;
        *out = strtoll(e->p, &end, 10);
        e->p = end;
        return true;
    }
    const char *s = e->p;
    while (*e->p && !strchr(" +-*", *e->p))
        e->p++;
    size_t len = (size_t)(e->p - s);
    for (int i = 0; len && i < e->n; i++)
        if (strlen(e->b[i].name) == len && !strncmp(e->b[i].name, s, len)) {
            *out = e->b[i].val;
            return true;
        }
    return false;
}

static bool term(dimexpr *e, int64_t *out) {
    if (!factor(e, out))
        return false;
    for (;;) {
        skip_space(e);
        if (*e->p != '*')
            return true;
        e->p++;
        int64_t r;
        if (!factor(e, &r))
            return false;
        *out *= r;
    }
}

bool sn_dim_eval(const char *text, const sn_dim_bind *b, int n, int64_t *out) {
    dimexpr e = {text, b, n};
    if (!term(&e, out))
        return false;
    for (;;) {
        skip_space(&e);
        if (!*e.p)
            return *out >= 0;
        char op = *e.p++;
        int64_t r;
        if ((op != '+' && op != '-') || !term(&e, &r))
            return false;
        *out = op == '+' ? *out + r : *out - r;
    }
}
