#include <stdio.h>
#include <string.h>

#include "ops/op.h"

/* Kernels look their attributes up on every run (hundreds of nodes per
 * decode step, often for names the node lacks): the first byte settles
 * most comparisons without a call. */
const sn_attr *sn_attr_get(const sn_node *n, const char *name) {
    for (int i = 0; i < n->p->n_attr; i++) {
        const char *an = n->p->attrs[i].name;
        if (an[0] == name[0] && !strcmp(an, name))
            return &n->p->attrs[i];
    }
    return NULL;
}

int64_t sn_attr_int(const sn_node *n, const char *name, int64_t def) {
    const sn_attr *a = sn_attr_get(n, name);
    if (!a)
        return def;
    if (a->type == SN_ATTR_FLOAT)
        return (int64_t)a->f;
    return a->type == SN_ATTR_INT ? a->i : def;
}

float sn_attr_float(const sn_node *n, const char *name, float def) {
    const sn_attr *a = sn_attr_get(n, name);
    if (!a)
        return def;
    if (a->type == SN_ATTR_INT)
        return (float)a->i;
    return a->type == SN_ATTR_FLOAT ? a->f : def;
}

const char *sn_attr_str(const sn_node *n, const char *name, const char *def) {
    const sn_attr *a = sn_attr_get(n, name);
    return a && a->type == SN_ATTR_STRING ? a->s.ptr : def;
}

int sn_attr_ints(const sn_node *n, const char *name, const int64_t **vals) {
    const sn_attr *a = sn_attr_get(n, name);
    if (!a)
        return -1;
    if (a->type == SN_ATTR_INT) {
        *vals = &a->i;
        return 1;
    }
    if (a->type != SN_ATTR_INTS)
        return -1;
    *vals = a->ints;
    return a->n;
}

int sn_attr_floats(const sn_node *n, const char *name, const float **vals) {
    const sn_attr *a = sn_attr_get(n, name);
    if (!a)
        return -1;
    if (a->type == SN_ATTR_FLOAT) {
        *vals = &a->f;
        return 1;
    }
    if (a->type != SN_ATTR_FLOATS)
        return -1;
    *vals = a->floats;
    return a->n;
}

int sn_attr_strings(const sn_node *n, const char *name, const sn_string **vals) {
    const sn_attr *a = sn_attr_get(n, name);
    if (!a)
        return -1;
    if (a->type == SN_ATTR_STRING) {
        *vals = &a->s;
        return 1;
    }
    if (a->type != SN_ATTR_STRINGS)
        return -1;
    *vals = a->strings;
    return a->n;
}

const sn_tensor *sn_attr_tensor(const sn_node *n, const char *name) {
    const sn_attr *a = sn_attr_get(n, name);
    return a && a->type == SN_ATTR_TENSOR ? a->t : NULL;
}

int sn_kfail(sn_err *err, const sn_node *n, int code, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sn_errf(err, code, "%s node '%s': %s", n->p->op_type,
                   n->p->name[0] ? n->p->name : "(unnamed)", msg);
}

int sn_input_ints(const sn_tensor *t, int64_t *vals, int cap) {
    if (!t || !t->data || t->kind != SN_KIND_TENSOR)
        return -1;
    if (t->dtype != SN_I64 && t->dtype != SN_I32)
        return -1;
    int64_t n = sn_tensor_numel(t);
    if (n < 0)
        return -1;
    for (int64_t i = 0; i < n && i < cap; i++)
        vals[i] = sn_load_i64(t->dtype, t->data, (size_t)i);
    return (int)n;
}
