#include <string.h>

#include "core/strmap.h"

static int grow(sn_strmap *m) {
    size_t cap = m->cap ? m->cap * 2 : 64;
    const char **keys = sn_calloc(cap, sizeof *keys);
    int *vals = sn_calloc(cap, sizeof *vals);
    if (!keys || !vals) {
        sn_free(keys);
        sn_free(vals);
        return SNUG_ERR_OOM;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i])
            continue;
        size_t j = sn_hash_str(m->keys[i]) & (cap - 1);
        while (keys[j])
            j = (j + 1) & (cap - 1);
        keys[j] = m->keys[i];
        vals[j] = m->vals[i];
    }
    sn_free(m->keys);
    sn_free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return SNUG_OK;
}

int sn_strmap_put(sn_strmap *m, const char *key, int val) {
    if ((m->len + 1) * 2 > m->cap && grow(m) != SNUG_OK)
        return SNUG_ERR_OOM;
    size_t j = sn_hash_str(key) & (m->cap - 1);
    while (m->keys[j]) {
        if (!strcmp(m->keys[j], key)) {
            m->vals[j] = val;
            return SNUG_OK;
        }
        j = (j + 1) & (m->cap - 1);
    }
    m->keys[j] = key;
    m->vals[j] = val;
    m->len++;
    return SNUG_OK;
}

int sn_strmap_get(const sn_strmap *m, const char *key) {
    if (!m->cap)
        return -1;
    size_t j = sn_hash_str(key) & (m->cap - 1);
    while (m->keys[j]) {
        if (!strcmp(m->keys[j], key))
            return m->vals[j];
        j = (j + 1) & (m->cap - 1);
    }
    return -1;
}

void sn_strmap_clear(sn_strmap *m) {
    sn_free(m->keys);
    sn_free(m->vals);
    memset(m, 0, sizeof *m);
}
