#include "plan/stats.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/strmap.h"
#include "plan/murmur3.h"

uint64_t sn_stats_node_hash(const sn_pnode *p) {
    uint32_t h[4] = {0, 0, 0, 0};
    for (int i = 0; i < p->n_in; i++)
        sn_murmur3_x86_128(p->inputs[i], strlen(p->inputs[i]), h[0], h);
    for (int i = 0; i < p->n_out; i++)
        sn_murmur3_x86_128(p->outputs[i], strlen(p->outputs[i]), h[0], h);
    return (uint64_t)h[0] | (uint64_t)h[1] << 32;
}

size_t sn_stats_node_key(const sn_pnode *p, char *buf, size_t cap) {
    const char *name = p->name && p->name[0] ? p->name : p->op_type;
    int n = snprintf(buf, cap, "%s_%" PRIu64, name, sn_stats_node_hash(p));
    return n < 0 ? 0 : (size_t)n;
}

char *sn_stats_node_key_dup(const sn_pnode *p) {
    size_t n = sn_stats_node_key(p, NULL, 0);
    char *s = sn_malloc(n + 1);
    if (s)
        sn_stats_node_key(p, s, n + 1);
    return s;
}

void sn_stats_free(sn_stats *s) {
    if (!s)
        return;
    for (int i = 0; i < s->n; i++)
        sn_free(s->rows[i].name);
    sn_free(s->rows);
    sn_free(s->path);
    sn_free(s);
}

/* A field as a non-negative decimal: surrounding blanks (and a CR at the
 * line end) allowed, nothing else. */
static bool parse_u64(const char *b, const char *e, uint64_t *out) {
    while (b < e && (*b == ' ' || *b == '\t'))
        b++;
    while (e > b && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
        e--;
    if (b == e)
        return false;
    uint64_t v = 0;
    for (; b < e; b++) {
        if (*b < '0' || *b > '9' || v > (UINT64_MAX - (uint64_t)(*b - '0')) / 10)
            return false;
        v = v * 10 + (uint64_t)(*b - '0');
    }
    *out = v;
    return true;
}

static int add_row(sn_stats *s, const char *name, size_t len, const sn_node_stats *st, int line) {
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        sn_stats_row *r = sn_realloc(s->rows, sizeof *r * (size_t)cap);
        if (!r)
            return SNUG_ERR_OOM;
        s->rows = r;
        s->cap = cap;
    }
    char *nm = sn_strndup(name, len);
    if (!nm)
        return SNUG_ERR_OOM;
    s->rows[s->n++] = (sn_stats_row){nm, *st, line, -1};
    return SNUG_OK;
}

int sn_stats_parse(const char *text, size_t len, const char *what, sn_stats **out, sn_err *err) {
    *out = NULL;
    sn_stats *s = sn_calloc(1, sizeof *s);
    if (!s || !(s->path = sn_strdup(what ? what : "stats"))) {
        sn_free(s);
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    }
    int rc = SNUG_OK, line = 0;
    size_t pos = 0;
    while (pos < len) {
        size_t e = pos;
        while (e < len && text[e] != '\n')
            e++;
        const char *b = text + pos, *end = text + e;
        size_t next = e + 1;
        line++;
        pos = next;
        if (b == end || *b == '#' || (end - b == 1 && *b == '\r'))
            continue;
        const char *f[6];
        const char *fe[6];
        int nf = 0;
        const char *q = b;
        for (;;) {
            const char *c = memchr(q, ',', (size_t)(end - q));
            if (nf < 6) {
                f[nf] = q;
                fe[nf] = c ? c : end;
            }
            nf++;
            if (!c)
                break;
            q = c + 1;
        }
        if (nf != 5) {
            rc = sn_errf(err, SNUG_ERR_PARSE, "%s:%d: expected 5 comma-separated fields, got %d: '%.*s'", s->path,
                         line, nf, (int)(end - b > 200 ? 200 : end - b), b);
            goto fail;
        }
        if (f[0] == fe[0])
            continue; /* ORT skips rows without a name */
        uint64_t v[4];
        for (int k = 0; k < 4; k++)
            if (!parse_u64(f[k + 1], fe[k + 1], &v[k])) {
                static const char *const names[4] = {"input_sizes", "initializers_sizes", "total_dynamic_sizes",
                                                     "total_temp_allocations"};
                rc = sn_errf(err, SNUG_ERR_PARSE, "%s:%d: %s '%.*s' is not a non-negative integer", s->path, line,
                             names[k], (int)(fe[k + 1] - f[k + 1] > 64 ? 64 : fe[k + 1] - f[k + 1]), f[k + 1]);
                goto fail;
            }
        sn_node_stats st = {v[0], v[1], v[2], v[3]};
        if (add_row(s, f[0], (size_t)(fe[0] - f[0]), &st, line) != SNUG_OK) {
            rc = sn_errf(err, SNUG_ERR_OOM, "out of memory");
            goto fail;
        }
    }
    *out = s;
    return SNUG_OK;
fail:
    sn_stats_free(s);
    return rc;
}

int sn_stats_load(const char *path, const char *model_dir, sn_stats **out, sn_err *err) {
    *out = NULL;
    char full[4096];
    if (path[0] != '/' && model_dir && model_dir[0])
        snprintf(full, sizeof full, "%s/%s", model_dir, path);
    else
        snprintf(full, sizeof full, "%s", path);
    void *buf = NULL;
    size_t len = 0;
    SN_TRY(sn_file_read(full, &buf, &len, err));
    int rc = sn_stats_parse(buf, len, full, out, err);
    sn_free(buf);
    return rc;
}

int sn_stats_match(sn_stats *s, const sn_graph *g, int *node_row, int *unmatched_rows, int *missing_nodes,
                   sn_err *err) {
    sn_strmap map = {0};
    char **keys = sn_calloc((size_t)g->n_nodes + 1, sizeof *keys);
    int rc = SNUG_OK;
    if (!keys) {
        rc = sn_errf(err, SNUG_ERR_OOM, "out of memory");
        goto done;
    }
    /* Rows in order, so a repeated name maps to its last row. */
    for (int r = 0; r < s->n; r++) {
        s->rows[r].node = -1;
        if (sn_strmap_put(&map, s->rows[r].name, r) != SNUG_OK) {
            rc = sn_errf(err, SNUG_ERR_OOM, "out of memory");
            goto done;
        }
    }
    int missing = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (!(keys[i] = sn_stats_node_key_dup(g->nodes[i].p))) {
            rc = sn_errf(err, SNUG_ERR_OOM, "out of memory");
            goto done;
        }
        int r = sn_strmap_get(&map, keys[i]);
        if (node_row)
            node_row[i] = r;
        if (r < 0)
            missing++;
        else
            s->rows[r].node = i;
    }
    int unmatched = 0;
    for (int r = 0; r < s->n; r++)
        if (s->rows[r].node < 0 && sn_strmap_get(&map, s->rows[r].name) == r)
            unmatched++;
    if (unmatched_rows)
        *unmatched_rows = unmatched;
    if (missing_nodes)
        *missing_nodes = missing;
done:
    for (int i = 0; keys && i < g->n_nodes; i++)
        sn_free(keys[i]);
    sn_free(keys);
    sn_strmap_clear(&map);
    return rc;
}

int sn_stats_write(const char *path, int n, char *const *keys, const sn_node_stats *st, sn_err *err) {
    FILE *f = fopen(path, "w");
    if (!f)
        return sn_errf(err, SNUG_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    fputs("#name,input_sizes,initializers_sizes,total_dynamic_sizes,total_temp_allocations\n", f);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "\n", keys[i], st[i].input, st[i].init,
                st[i].dynamic, st[i].temp);
    if (ferror(f) | (fclose(f) != 0))
        return sn_errf(err, SNUG_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    return SNUG_OK;
}

static uint64_t value_bytes(const sn_tensor *t) {
    if (!t || t->kind != SN_KIND_TENSOR || !sn_tensor_shape_known(t))
        return 0;
    size_t b = sn_tensor_nbytes(t);
    return b == SIZE_MAX ? 0 : (uint64_t)b;
}

int sn_stats_from_plan(const sn_graph *g, const sn_plan *p, sn_node_stats *st, sn_err *err) {
    unsigned char *seen = sn_calloc((size_t)g->n_values + 1, 1);
    if (!seen)
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    for (int i = 0; i < g->n_nodes; i++) {
        const sn_node *n = &g->nodes[i];
        sn_node_stats s = {0};
        for (int k = 0; k < n->n_in; k++) {
            int v = n->in[k];
            if (v < 0 || seen[v])
                continue;
            seen[v] = 1;
            const sn_value *val = &g->values[v];
            if (val->flags & SN_VAL_INIT)
                s.init += val->init && val->init->nbytes ? val->init->nbytes : value_bytes(&val->info);
            else
                s.input += value_bytes(&p->values[v].info);
        }
        for (int k = 0; k < n->n_out; k++) {
            int v = n->out[k];
            if (v < 0 || seen[v])
                continue;
            seen[v] = 1;
            sn_storage sto = p->values[v].storage;
            if (sto == SN_STORE_ARENA || sto == SN_STORE_DYNAMIC || sto == SN_STORE_FOLDED)
                s.dynamic += value_bytes(&p->values[v].info);
        }
        s.temp = p->nodes[i].workspace;
        st[i] = s;
    }
    sn_free(seen);
    return SNUG_OK;
}

void sn_node_stats_max(sn_node_stats *acc, const sn_node_stats *s) {
    acc->input = s->input > acc->input ? s->input : acc->input;
    acc->init = s->init > acc->init ? s->init : acc->init;
    acc->dynamic = s->dynamic > acc->dynamic ? s->dynamic : acc->dynamic;
    acc->temp = s->temp > acc->temp ? s->temp : acc->temp;
}
