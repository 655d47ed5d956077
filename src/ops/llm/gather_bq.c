/* GatherBlockQuantized (com.microsoft): Gather over a block-quantized table,
 * each gathered element dequantized, (q - zero_point) * scale, in float.
 *
 *   data        uint8 [..., D8]   codes of `bits` (2, 4, 8) packed low bits
 *                                 first, 8/bits to a byte along the last axis
 *                                 (logical last dim D8 * 8/bits);
 *               or int4 / uint4   logical shape, two codes to a byte
 *   indices     int32 / int64     negative values count from the end
 *   scales      float32 / float16 data's rank; quantize_axis holds
 *                                 ceil(logical dim / block_size) blocks
 *   zero_points optional, data's type: uint8 packed 8/bits to a byte along
 *                                 each row of blocks (row padded); int4 /
 *                                 uint4 flat, scales' shape. Default
 *                                 2^(bits-1) for uint8, 0 for int4 / uint4
 *   output      scales' type, data[:g] + indices + data[g+1:] (logical)
 *
 * As ONNX Runtime's CPU kernel (contrib_ops/cpu/quantization/
 * gather_block_quantized.cc): uint8 data only with gather_axis 0 and
 * quantize_axis the last; int4 / uint4 with any two axes. An index out of
 * range is an error here, where ORT 1.32 writes zeros for it: a token id
 * past the vocabulary is a bad input, as for Gather.
 *
 * onnxruntime-genai's builder writes it for tied embeddings: the lm_head's
 * MatMulNBits B reshaped to [vocab, k_blocks * blob] and its scales. Rows are
 * dequantized straight from the table into the output: a decode step reads
 * one row of codes and its scales. */
#include <string.h>

#include "ops/llm/llm.h"

typedef struct gbq_geom {
    int rank, ga, qa;  /* data's rank, gather and quantize axes */
    int64_t bits, bs;
    int64_t comp;      /* codes per stored element: 8/bits for uint8, 1 for int4 / uint4 */
    int64_t gM, gD, gB; /* dims before the gather axis, along it, logical elements after it */
    int64_t gN;         /* indices (-1 while their shape is not known) */
    int64_t qdim, qN;   /* logical dim of the quantize axis, elements after it */
    int64_t nblk;       /* blocks along the quantize axis */
    int64_t zrow;       /* uint8 zero points: bytes per row of blocks */
    bool zp;
} gbq_geom;

static int gbq_geom_of(const sn_node *node, int n_in, const sn_tensor *const *in, bool shapes, gbq_geom *g,
                       sn_err *err) {
    memset(g, 0, sizeof *g);
    SN_TRY(sn_check_in(node, err, n_in, in, 0, "data", SN_IN_REQUIRED, SN_DT(SN_U8) | SN_DT(SN_U4) | SN_DT(SN_I4),
                       SN_RANK_ANY));
    SN_TRY(sn_check_in(node, err, n_in, in, 1, "indices", SN_IN_REQUIRED, SN_DT_INT, SN_RANK_ANY));
    SN_TRY(sn_check_in(node, err, n_in, in, 2, "scales", SN_IN_REQUIRED, SN_DT(SN_F32) | SN_DT(SN_F16),
                       SN_RANK_ANY));
    SN_TRY(sn_check_in(node, err, n_in, in, 3, "zero_points", SN_IN_OPTIONAL, SN_DT_ANY, SN_RANK_ANY));
    const sn_tensor *d = in[0], *sc = in[2], *zp = sn_in(in, n_in, 3);
    g->bits = sn_attr_int(node, "bits", 4);
    g->bs = sn_attr_int(node, "block_size", 128);
    if (g->bs < 16 || (g->bs & (g->bs - 1)))
        return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "block_size %lld must be a power of two >= 16",
                        (long long)g->bs);
    if (d->dtype == SN_U8) {
        if (g->bits != 2 && g->bits != 4 && g->bits != 8)
            return sn_kfail(err, node, SNUG_ERR_UNSUPPORTED, "bits=%lld with uint8 data (2, 4 or 8)",
                            (long long)g->bits);
        g->comp = 8 / g->bits;
    } else {
        if (g->bits != 4)
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "bits=%lld with %s data (must be 4)",
                            (long long)g->bits, sn_dtype_name(d->dtype));
        g->comp = 1;
    }
    g->zp = zp != NULL;
    if (zp && zp->dtype != d->dtype)
        return sn_kfail(err, node, SNUG_ERR_TYPE, "zero_points type %s differs from data's %s",
                        sn_dtype_name(zp->dtype), sn_dtype_name(d->dtype));
    if (d->rank == SN_RANK_UNKNOWN)
        return SNUG_OK;
    g->rank = d->rank;
    int64_t ga = sn_attr_int(node, "gather_axis", 0), qa = sn_attr_int(node, "quantize_axis", 1);
    if (d->rank < 1 || !sn_axis_norm(ga, d->rank, &g->ga) || !sn_axis_norm(qa, d->rank, &g->qa))
        return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "gather_axis %lld or quantize_axis %lld out of range for "
                        "data of rank %d", (long long)ga, (long long)qa, d->rank);
    if (d->dtype == SN_U8 && (g->ga != 0 || g->qa != d->rank - 1 || g->ga == g->qa))
        return sn_kfail(err, node, SNUG_ERR_UNSUPPORTED, "uint8 data needs gather_axis 0 and quantize_axis %d (the "
                        "last), got gather_axis %lld, quantize_axis %lld", d->rank - 1, (long long)ga, (long long)qa);
    if (sc->rank != SN_RANK_UNKNOWN && sc->rank != d->rank)
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "scales have rank %d, data %d", sc->rank, d->rank);
    if (zp && zp->rank != SN_RANK_UNKNOWN && zp->rank != d->rank)
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "zero_points have rank %d, data %d", zp->rank, d->rank);
    if (!shapes)
        return SNUG_OK;
    g->qdim = d->dims[g->qa] * g->comp;
    g->nblk = (g->qdim + g->bs - 1) / g->bs;
    for (int i = 0; i < d->rank; i++) {
        int64_t want = i == g->qa ? g->nblk : d->dims[i];
        if (sc->dims[i] != want && i == g->qa)
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "scales dim %d is %lld, expected %lld (%lld codes in blocks of "
                            "%lld)", i, (long long)sc->dims[i], (long long)want, (long long)g->qdim, (long long)g->bs);
        if (sc->dims[i] != want)
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "scales dim %d is %lld, expected data's %lld", i,
                            (long long)sc->dims[i], (long long)want);
        if (zp) {
            int64_t zw = i == g->qa && g->comp > 1 ? (want + g->comp - 1) / g->comp : want;
            if (zp->dims[i] != zw)
                return sn_kfail(err, node, SNUG_ERR_SHAPE, "zero_points dim %d is %lld, expected %lld", i,
                                (long long)zp->dims[i], (long long)zw);
        }
    }
    g->gM = sn_dims_prod(d->dims, 0, g->ga);
    g->gD = d->dims[g->ga];
    g->gB = sn_dims_prod(d->dims, g->ga + 1, d->rank);
    g->qN = sn_dims_prod(d->dims, g->qa + 1, d->rank);
    g->gN = sn_tensor_shape_known(in[1]) ? sn_tensor_numel(in[1]) : -1; /* -1: not known yet (inference) */
    if (g->gM < 0 || g->gB < 0 || g->qN < 0 || !sn_dim_mul(&g->gB, g->comp))
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "data's size overflows");
    g->zrow = (g->nblk + g->comp - 1) / g->comp;
    return SNUG_OK;
}

int llm_gbq_infer(sn_infer_ctx *c) {
    gbq_geom g;
    SN_TRY(gbq_geom_of(c->node, c->n_in, c->in, false, &g, c->err));
    const sn_tensor *d = c->in[0], *ind = c->in[1];
    sn_dtype dt = c->in[2]->dtype;
    if (d->rank == SN_RANK_UNKNOWN || ind->rank == SN_RANK_UNKNOWN) {
        sn_set_out(c->out[0], dt, SN_RANK_UNKNOWN, NULL);
        return SNUG_OK;
    }
    int r = d->rank - 1 + ind->rank;
    if (r > SN_MAX_RANK)
        return KFAIL(SNUG_ERR_UNSUPPORTED, "output rank %d too large", r);
    int64_t od[SN_MAX_RANK];
    int k = 0;
    for (int i = 0; i < g.ga; i++)
        od[k++] = d->dims[i];
    for (int i = 0; i < ind->rank; i++)
        od[k++] = ind->dims[i];
    for (int i = g.ga + 1; i < d->rank; i++)
        od[k++] = d->dims[i];
    /* uint8: the packed last axis (the quantize axis) unpacks in the output */
    if (g.comp > 1)
        od[r - 1] = od[r - 1] >= 0 ? od[r - 1] * g.comp : SN_DIM_UNKNOWN;
    if (sn_tensor_shape_known(d) && sn_tensor_shape_known(c->in[2]) &&
        (!sn_has_in(c->in, c->n_in, 3) || sn_tensor_shape_known(c->in[3])))
        SN_TRY(gbq_geom_of(c->node, c->n_in, c->in, true, &g, c->err));
    sn_set_out(c->out[0], dt, r, od);
    return SNUG_OK;
}

/* No scratch: rows are dequantized into the output. The rule checks the
 * geometry, so that a bad table fails at planning. */
static int gbq_ws(const sn_node *n, int n_in, const sn_tensor *const *in, int n_out, const sn_tensor *const *out,
                  int n_threads, size_t *ws, sn_err *err) {
    (void)n_out, (void)out, (void)n_threads;
    gbq_geom g;
    *ws = 0;
    return gbq_geom_of(n, n_in, in, true, &g, err);
}

size_t llm_gbq_estimate(const sn_infer_ctx *c) { return llm_estimate_with(c, gbq_ws); }

int llm_gbq_prepare(sn_prep_ctx *c) {
    return gbq_ws(c->node, c->n_in, c->in, c->n_out, c->out, c->n_threads, &c->workspace, c->err);
}

static inline int64_t gbq_index(const sn_tensor *t, int64_t i) {
    return t->dtype == SN_I64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
}

/* Logical element i of a packed table (or of packed zero points). */
static inline int32_t gbq_code(sn_dtype t, int64_t bits, const uint8_t *p, int64_t i) {
    if (t == SN_U8) {
        if (bits == 8)
            return p[i];
        int64_t per = 8 / bits;
        return (p[i / per] >> ((i % per) * bits)) & ((1 << bits) - 1);
    }
    int32_t v = (p[i >> 1] >> ((i & 1) * 4)) & 15;
    return t == SN_I4 && v >= 8 ? v - 16 : v;
}

static inline void gbq_store(sn_dtype t, void *y, int64_t i, float v) {
    if (t == SN_F32)
        ((float *)y)[i] = v;
    else
        ((uint16_t *)y)[i] = sn_f32_to_f16(v);
}

/* Zero point of block b in row r (of the table seen as [rows, qdim], the
 * quantize axis last). */
static inline int32_t gbq_zp_row(const gbq_geom *g, sn_dtype t, const uint8_t *zp, int64_t r, int64_t b) {
    if (!zp)
        return t == SN_U8 ? 1 << (g->bits - 1) : 0;
    if (t == SN_U8)
        return gbq_code(t, g->bits, zp + r * g->zrow, b);
    return gbq_code(t, 4, zp, r * g->nblk + b);
}

/* Row r of a table whose quantize axis is the last, qdim logical elements,
 * into y[0, qdim). */
static void gbq_row(const gbq_geom *g, sn_dtype dt, const uint8_t *data, const void *scales, sn_dtype st,
                    const uint8_t *zp, sn_dtype yt, void *y, int64_t r) {
    int64_t e0 = r * g->qdim; /* logical index of the row's first element */
    for (int64_t b = 0; b < g->nblk; b++) {
        float s = sn_ld_f32(st, scales, r * g->nblk + b);
        float z = (float)gbq_zp_row(g, dt, zp, r, b);
        int64_t k0 = b * g->bs, k1 = sn_imin(k0 + g->bs, g->qdim);
        if (dt == SN_U8 && g->bits == 4 && yt == SN_F32) { /* the builder's table: two codes a byte */
            const uint8_t *p = data + (e0 + k0) / 2;
            float *o = (float *)y + k0;
            for (int64_t k = 0; k < k1 - k0; k += 2, p++) {
                o[k] = ((float)(*p & 15) - z) * s;
                o[k + 1] = ((float)(*p >> 4) - z) * s;
            }
            continue;
        }
        for (int64_t k = k0; k < k1; k++)
            gbq_store(yt, y, k, ((float)gbq_code(dt, g->bits, data, e0 + k) - z) * s);
    }
}

int llm_gbq_run(sn_kctx *c) {
    gbq_geom g;
    SN_TRY(gbq_geom_of(c->node, c->n_in, c->in, true, &g, c->err));
    const sn_tensor *d = c->in[0], *ind = c->in[1], *sc = c->in[2], *zpt = sn_kctx_in(c, 3);
    sn_tensor *y = c->out[0];
    for (int i = 0; i < 4 && i < c->n_in; i++)
        if (c->in[i] && sn_kctx_reads_file(c, c->in[i]))
            return KFAIL(SNUG_ERR_UNSUPPORTED, "input %d left in the model's file (snug.weights=load)", i);
    for (int64_t j = 0; j < g.gN; j++) {
        int64_t v = gbq_index(ind, j);
        if (v < -g.gD || v >= g.gD)
            return KFAIL(SNUG_ERR_RANGE, "index %lld (at %lld of the indices) out of range [-%lld, %lld)",
                         (long long)v, (long long)j, (long long)g.gD, (long long)g.gD);
    }
    if (!g.gM || !g.gN || !g.gB)
        return SNUG_OK;
    const uint8_t *data = d->data, *zp = zpt ? zpt->data : NULL;
    size_t es = sn_dtype_size(y->dtype);
    int64_t sfb = g.nblk * g.qN; /* scales per step of the axes before the quantize axis */
    for (int64_t m = 0; m < g.gM; m++)
        for (int64_t j = 0; j < g.gN; j++) {
            int64_t v = gbq_index(ind, j);
            v = v < 0 ? v + g.gD : v;
            int64_t base = (m * g.gD + v) * g.gB; /* logical index of the gathered block */
            char *o = (char *)y->data + (size_t)((m * g.gN + j) * g.gB) * es;
            if (g.qN == 1 && g.qa > g.ga) { /* quantize axis last: whole rows of blocks */
                for (int64_t s = 0; s < g.gB / g.qdim; s++)
                    gbq_row(&g, d->dtype, data, sc->data, sc->dtype, zp, y->dtype, o + (size_t)(s * g.qdim) * es,
                            base / g.qdim + s);
                continue;
            }
            for (int64_t i = 0; i < g.gB; i++) { /* int4 / uint4, any axes: ORT's index map */
                int64_t e = base + i;
                int64_t x = e / (g.qdim * g.qN), yq = e % (g.qdim * g.qN) / g.qN, z = e % g.qN;
                int64_t si = x * sfb + yq / g.bs * g.qN + z;
                int32_t zv = zp ? gbq_code(d->dtype, 4, zp, si) : 0;
                float s = sn_ld_f32(sc->dtype, sc->data, si);
                gbq_store(y->dtype, o, i, ((float)(gbq_code(d->dtype, 4, data, e) - zv)) * s);
            }
        }
    return SNUG_OK;
}
