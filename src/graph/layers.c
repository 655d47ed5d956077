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
