/* Window geometry of convolutions and pools (nn.h). */
#include <string.h>

#include "ops/nn/nn.h"

int nn_geo_attrs(const sn_node *node, sn_err *err, int nd, const int64_t *kshape, nn_geo *g) {
    memset(g, 0, sizeof *g);
    if (nd < 1 || nd > SN_MAX_RANK - 2)
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "need 1 to %d spatial dims, got %d", SN_MAX_RANK - 2, nd);
    g->nd = nd;
    const int64_t *v;
    int n = sn_attr_ints(node, "kernel_shape", &v);
    if (n >= 0) {
        if (n != nd)
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "kernel_shape has %d values for %d spatial dims", n, nd);
        for (int i = 0; i < nd; i++) {
            if (v[i] < 1 || v[i] > NN_ATTR_MAX || (kshape && sn_dim_known(kshape[i]) && kshape[i] != v[i]))
                return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "bad kernel_shape[%d] = %lld", i, (long long)v[i]);
            g->k[i] = v[i];
        }
    } else if (kshape) {
        for (int i = 0; i < nd; i++)
            g->k[i] = kshape[i];
    } else {
        return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "kernel_shape attribute is required");
    }
    n = sn_attr_ints(node, "strides", &v);
    if (n >= 0 && n != nd)
        return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "strides has %d values for %d spatial dims", n, nd);
    for (int i = 0; i < nd; i++) {
        g->s[i] = n >= 0 ? v[i] : 1;
        if (g->s[i] < 1 || g->s[i] > NN_ATTR_MAX)
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "strides must be in [1, 2^31]");
    }
    n = sn_attr_ints(node, "dilations", &v);
    if (n >= 0 && n != nd)
        return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "dilations has %d values for %d spatial dims", n, nd);
    for (int i = 0; i < nd; i++) {
        g->d[i] = n >= 0 ? v[i] : 1;
        if (g->d[i] < 1 || g->d[i] > NN_ATTR_MAX)
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "dilations must be in [1, 2^31]");
    }
    n = sn_attr_ints(node, "pads", &v);
    if (n >= 0 && n != 2 * nd)
        return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "pads has %d values for %d spatial dims", n, nd);
    for (int i = 0; i < nd; i++) {
        g->pb[i] = n >= 0 ? v[i] : 0;
        g->pe[i] = n >= 0 ? v[nd + i] : 0;
        if (g->pb[i] < 0 || g->pe[i] < 0 || g->pb[i] > NN_ATTR_MAX || g->pe[i] > NN_ATTR_MAX)
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "pads must be in [0, 2^31]");
    }
    const char *ap = sn_attr_str(node, "auto_pad", "NOTSET");
    if (!strcmp(ap, "NOTSET") || !ap[0])
        g->auto_pad = NN_PAD_NOTSET;
    else if (!strcmp(ap, "SAME_UPPER"))
        g->auto_pad = NN_PAD_SAME_UPPER;
    else if (!strcmp(ap, "SAME_LOWER"))
        g->auto_pad = NN_PAD_SAME_LOWER;
    else if (!strcmp(ap, "VALID"))
        g->auto_pad = NN_PAD_VALID;
    else
        return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "unknown auto_pad '%s'", ap);
    return SNUG_OK;
}

int nn_geo_output(const sn_node *node, sn_err *err, nn_geo *g, bool ceil_mode) {
    for (int i = 0; i < g->nd; i++) {
        int64_t in = g->in[i], s = g->s[i];
        int64_t dk = (g->k[i] - 1) * g->d[i] + 1; /* dilated kernel extent */
        if (!sn_dim_known(in)) {
            g->out[i] = SN_DIM_UNKNOWN;
            continue;
        }
        switch (g->auto_pad) {
        case NN_PAD_SAME_UPPER:
        case NN_PAD_SAME_LOWER: {
            int64_t out = (in + s - 1) / s;
            int64_t total = sn_imax(0, (out - 1) * s + dk - in);
            g->pb[i] = g->auto_pad == NN_PAD_SAME_UPPER ? total / 2 : total - total / 2;
            g->pe[i] = total - g->pb[i];
            g->out[i] = out;
            break;
        }
        case NN_PAD_VALID:
            g->pb[i] = g->pe[i] = 0;
            g->out[i] = in >= dk ? (in - dk) / s + 1 : 0;
            break;
        default: {
            int64_t span = in + g->pb[i] + g->pe[i] - dk;
            if (span < 0) {
                g->out[i] = 0;
                break;
            }
            int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
            if (ceil_mode && (out - 1) * s >= in + g->pb[i])
                out--; /* the last window must start inside input or left pad */
            g->out[i] = out;
        }
        }
        if (g->out[i] < 0)
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "negative output size for spatial dim %d", i);
    }
    return SNUG_OK;
}
