#include "graph/layers.h"

#include <string.h>

static bool is_sep(char c) { return c == '/' || c == '.' || c == ':' || c == '_' || c == '-'; }

int sn_layer_from_name(const char *name, bool *final_norm) {
    static const char *const tokens[] = {"layers.", "layer.", "blocks.", "h."};
    if (final_norm)
        *final_norm = false;
    if (!name)
        return -1;
    for (const char *p = name; *p; p++) {
        if (p != name && !is_sep(p[-1]))
            continue;
        for (size_t t = 0; t < sizeof tokens / sizeof *tokens; t++) {
            size_t n = strlen(tokens[t]);
            if (strncmp(p, tokens[t], n))
                continue;
            const char *d = p + n;
            long v = 0;
            int nd = 0;
            while (d[nd] >= '0' && d[nd] <= '9' && nd < 7)
                v = v * 10 + (d[nd++] - '0');
            if (!nd || (d[nd] && !is_sep(d[nd])))
                continue;
            if (final_norm)
                *final_norm = strstr(d + nd, "final_norm") != NULL;
            return (int)v;
        }
    }
    return -1;
}

static void set_sub_layers(sn_graph *g, int layer) {
    for (int i = 0; i < g->n_nodes; i++) {
        g->nodes[i].layer = layer;
        for (int s = 0; s < g->nodes[i].n_sub; s++)
            set_sub_layers(g->nodes[i].sub[s], layer);
    }
}

/* The index a node's names give: its own name, else an output's, else an
 * initializer input's. *src: 1 own name, 2 value names. */
static int node_name_layer(const sn_graph *g, const sn_node *n, bool *fin, int *src) {
    int l = sn_layer_from_name(n->p->name, fin);
    *src = 1;
    for (int k = 0; l < 0 && k < n->n_out; k++)
        if (n->out[k] >= 0)
            l = sn_layer_from_name(g->values[n->out[k]].name, fin), *src = 2;
    for (int k = 0; l < 0 && k < n->n_in; k++)
        if (n->in[k] >= 0 && (g->values[n->in[k]].flags & SN_VAL_INIT))
            l = sn_layer_from_name(g->values[n->in[k]].name, fin), *src = 2;
    return l;
}

/* A node's signature for the structure search: its op and the position
 * and shape of each initializer it reads (0: it reads none). */
static uint64_t weight_sig(const sn_graph *g, const sn_node *n) {
    uint64_t h = 0;
    for (int k = 0; k < n->n_in; k++) {
        if (n->in[k] < 0 || !(g->values[n->in[k]].flags & SN_VAL_INIT))
            continue;
        const sn_tensor *t = &g->values[n->in[k]].info;
        if (!h)
            for (const char *c = n->p->op_type; *c; c++)
                h = (h ^ (uint8_t)*c) * 0x100000001B3ull;
        h = (h ^ (uint64_t)(k + 1)) * 0x100000001B3ull;
        for (int d = 0; d < t->rank; d++)
            h = (h ^ (uint64_t)t->dims[d]) * 0x100000001B3ull;
    }
    return h;
}

/* Layers from the graph's structure, where no name gives an index: the
 * nodes reading initializers, in order, repeat with some period p over r
 * >= 2 blocks (a decoder's norms and projections, layer after layer). The
 * period covering the most of them wins (the shorter on a tie), its run
 * starting where the repetition starts; the i-th block's nodes get layer
 * i, the others (embedding, final norm, lm_head, everything reading no
 * weight) are filled from their neighbours like unnamed nodes. Returns
 * the number of layers (0: no repetition found). */
static int structure_layers(const sn_graph *g, int *lab, sn_err *err) {
    int nn = g->n_nodes, m = 0;
    uint64_t *sig = sn_malloc(sizeof *sig * ((size_t)nn + 1));
    int *at = sn_malloc(sizeof *at * ((size_t)nn + 1));
    if (!sig || !at) {
        sn_free(sig), sn_free(at);
        return sn_errf(err, SNUG_ERR_OOM, "out of memory"), -1;
    }
    for (int i = 0; i < nn; i++) {
        uint64_t h = weight_sig(g, &g->nodes[i]);
        if (h)
            sig[m] = h, at[m++] = i;
    }
    int best_p = 0, best_a = 0, best_r = 0;
    for (int p = 2; 2 * p <= m; p++) {
        /* runs of s[i] == s[i + p]: a run of len from a makes s[a, a + len + p) p-periodic */
        for (int i = 0, run = 0; i + p <= m; i++) {
            bool eq = i + p < m && sig[i] == sig[i + p];
            if (eq) {
                run++;
                continue;
            }
            int r = (run + p) / p;
            if (run > 0 && r >= 2 && r * p > best_r * best_p)
                best_p = p, best_a = i - run, best_r = r;
            run = 0;
        }
    }
    int L = 0;
    if (best_r >= 2 && 2 * best_r * best_p >= m) { /* the repetition is most of the weights */
        L = best_r;
        for (int w = best_a; w < best_a + best_r * best_p; w++)
            lab[at[w]] = (w - best_a) / best_p;
    }
    sn_free(sig), sn_free(at);
    return L;
}

int sn_layers_discover(sn_graph *g, sn_layer_info *info, sn_err *err) {
    int nn = g->n_nodes;
    sn_layer_info inf = {0};
    int *lab = sn_malloc(sizeof *lab * ((size_t)nn + 1));
    int *fwd = sn_malloc(sizeof *fwd * ((size_t)nn + 1));
    unsigned char *down = sn_calloc((size_t)nn + 1, 1);
    unsigned char *fin = sn_calloc((size_t)nn + 1, 1);
    if (!lab || !fwd || !down || !fin) {
        sn_free(lab), sn_free(fwd), sn_free(down), sn_free(fin);
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    }
    int max_layer = -1;
    for (int i = 0; i < nn; i++) {
        bool f = false;
        int src = 0;
        lab[i] = node_name_layer(g, &g->nodes[i], &f, &src);
        fin[i] = f && lab[i] >= 0;
        if (lab[i] >= 0) {
            if (src == 1)
                inf.n_named++;
            else
                inf.n_valname++;
        }
        if (lab[i] >= 0 && !fin[i] && lab[i] > max_layer)
            max_layer = lab[i];
    }
    int L = max_layer + 1;
    if (L == 0) {
        L = structure_layers(g, lab, err);
        if (L < 0) {
            sn_free(lab), sn_free(fwd), sn_free(down), sn_free(fin);
            return err->code;
        }
        for (int i = 0; i < nn; i++)
            inf.n_struct += lab[i] >= 0;
    }
    /* The final norm sits at the phantom index L (or wherever it says): post. */
    for (int i = 0; i < nn; i++)
        if (fin[i] || lab[i] > L)
            lab[i] = L;
    for (int i = 0; i < nn; i++) {
        const sn_node *n = &g->nodes[i];
        int f = -1;
        for (int k = 0; k < n->n_in; k++) {
            if (n->in[k] < 0)
                continue;
            int p = g->values[n->in[k]].producer;
            if (p < 0)
                continue;
            int v = lab[p] >= 0 ? lab[p] : fwd[p];
            f = v > f ? v : f;
        }
        fwd[i] = f;
    }
    for (int i = nn - 1; i >= 0; i--) {
        const sn_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_out && !down[i]; k++) {
            if (n->out[k] < 0)
                continue;
            const sn_value *v = &g->values[n->out[k]];
            for (int c = 0; c < v->n_cons && !down[i]; c++) {
                int cn = v->cons[c];
                down[i] = (lab[cn] >= 0 && lab[cn] < L) || down[cn];
            }
        }
    }
    for (int i = 0; i < nn; i++) {
        int l = lab[i];
        if (l < 0) {
            inf.n_filled++;
            l = fwd[i] < 0 ? -1 : !down[i] ? L : fwd[i];
            if (l > L)
                l = L;
        }
        g->nodes[i].layer = l;
        inf.n_pre += l < 0;
        inf.n_post += l >= L;
        for (int s = 0; s < g->nodes[i].n_sub; s++)
            set_sub_layers(g->nodes[i].sub[s], l);
    }
    inf.n_layers = L;
    if (info)
        *info = inf;
    sn_free(lab), sn_free(fwd), sn_free(down), sn_free(fin);
    return SNUG_OK;
}
