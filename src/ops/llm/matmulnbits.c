/* MatMulNBits (com.microsoft): Y[..., N] = A[..., K] x dequant(B)^T + bias.
 *
 *   A       [..., K]                 float32 / float16 / bfloat16
 *   B       [N, k_blocks, blob]      uint8, codes packed low bits first along K
 *   scales  [N * k_blocks]           A's type
 *   zero_points (optional)           uint8 packed [N, ceil(k_blocks*bits/8)],
 *                                    or A's type [N * k_blocks]; default 2^(bits-1)
 *   g_idx   (deprecated, must be absent), bias [N] (optional)
 *
 * Three paths:
 *   - M < MNB_GEMM_MIN_M (decode), float: rows of A against the 4-bit
 *     columns in float (llm_mnb4f_cols, four columns per pass on a
 *     permuted copy of A), other widths block by block; parallel over
 *     groups of columns;
 *   - larger M (prefill), float: panels of columns are dequantized into the
 *     workspace ([K, nb] for 4 bits, so sn_sgemm_ws packs them by plain row
 *     copies) and multiplied with sn_sgemm_ws;
 *   - accuracy_level 4 with integer zero points and a constant B: A is
 *     quantized to int8 per block (symmetric, like MLAS's CompInt8) and
 *     blocks are dotted in integers; for blocks of 32 the float rounding
 *     reproduces ONNX Runtime's AVX2 kernels exactly, since an LLM amplifies
 *     any difference once the next layer re-quantizes: 4 bits through
 *     llm_mnb4_cols (src/ops/llm/mnb_q4.c; M = 1 and M > 1 differ there) on
 *     rows of A prepared once per call, 8 bits through llm_mnb8_cols
 *     (src/ops/llm/mnb_q8.c). ORT only takes this path when it can prepack
 *     B (a constant); with B a graph input it computes level 4 in float,
 *     and so does snug.
 * Float zero points take the two float paths at every accuracy_level, as in
 * ORT (which never prepacks B then: no int8). ORT dequantizes B and runs
 * MLAS's SGEMM; snug's float kernels sum in their own order, within the
 * float tolerance (a copy of MLAS's order was carried until issue #22, 1.5x
 * slower; docs/accuracy.md).
 * Non-float32 tensors are staged to float32 in the workspace. */
#include <string.h>

#include "ops/gemm.h"
#include "ops/llm/kernels.h"
#include "ops/llm/llm.h"

#define MNB_GEMM_MIN_M 4
#define MNB_PANEL_BYTES ((int64_t)2 << 20) /* dequantized panel (prefill), about */
#define MNB_PANEL_MIN 64                       /* columns, at least */
#define MNB_SLOTS 64  /* work slots of the generic int8 path */
#define MNB_INT8_ACC4 1
#define MNB4_GROUP 8 /* columns per task unit of the ort4 and small-M float paths */
#define MNB_TASK_MACS 65536 /* multiply-adds per task, at least (see mnb_grain) */

typedef struct mnb_geom {
    int64_t M, K, N, bits, bs, kb, blob;
    int zp_kind;  /* 0 none, 1 packed uint8, 2 float */
    bool empty;   /* B has a zero dim: Y = bias (or 0) */
    bool int8;    /* accuracy_level 4 path */
    bool ort4;    /* int8 path rounding exactly like ORT's AVX2 kernels (4-bit, block 32) */
    bool ort8;    /* int8 path rounding exactly like ORT's AVX2 kernels (8-bit, block 32) */
    bool gemm;    /* prefill path */
} mnb_geom;

/* prepare's state: its presence is the verdict on the int8 path (ORT
 * quantizes A only when B is a constant it can prepack, and otherwise
 * computes accuracy_level 4 in float); in plans that serve many runs the
 * 4-bit int8 path's B is also kept in another layout, which replaces the
 * original: with AVX-512 VNNI in panels of sixteen columns (LLM_MNB4_P16:
 * the kernels' decode without transposes, one ascending stream a panel),
 * else in llm_mnb4_tile's (the ORT-order decode reads it in one ascending
 * run). */
typedef struct mnb_state {
    uint8_t *tiled; /* sn_pages_reserve'd, or NULL */
    size_t bytes;
    int layout;     /* llm_mnb4_args.tiled of tiled */
} mnb_state;

/* The state of a constant B kept as it is (no allocation: the Level-1
 * estimate prepares every node at every bounded run). */
static const mnb_state mnb_const_b = {NULL, 0, 0};

void llm_mnb_free(void *state) {
    mnb_state *st = state;
    if (!st || st == &mnb_const_b)
        return;
    sn_pages_free(st->tiled, st->bytes, 0);
    sn_free(st);
}


static int mnb_geom_of(const sn_node *node, int n_in, const sn_tensor *const *in, bool shapes,
                       bool b_const, mnb_geom *g, sn_err *err) {
    memset(g, 0, sizeof *g);
    g->K = sn_attr_int(node, "K", -1);
    g->N = sn_attr_int(node, "N", -1);
    g->bits = sn_attr_int(node, "bits", 4);
    g->bs = sn_attr_int(node, "block_size", -1);
    if (g->K < 0 || g->N < 0)
        return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "attributes K and N are required");
    if (g->bits != 2 && g->bits != 4 && g->bits != 8)
        return sn_kfail(err, node, SNUG_ERR_UNSUPPORTED, "bits=%lld is not supported (2, 4, 8)",
                        (long long)g->bits);
    if (g->bs < 16 || (g->bs & (g->bs - 1)))
        return sn_kfail(err, node, SNUG_ERR_INVALID_ARG,
                        "block_size %lld must be a power of two >= 16", (long long)g->bs);
    if (sn_attr_int(node, "weight_prepacked", 0) != 0)
        return sn_kfail(err, node, SNUG_ERR_UNSUPPORTED, "prepacked weights are not supported");
    g->kb = (g->K + g->bs - 1) / g->bs;
    g->blob = g->bs * g->bits / 8;
    SN_TRY(sn_check_in(node, err, n_in, in, 0, "A", SN_IN_REQUIRED, SN_DT_ANY, SN_RANK_ANY));
    SN_TRY(sn_check_in(node, err, n_in, in, 1, "B", SN_IN_REQUIRED, SN_DT_ANY, SN_RANK_ANY));
    SN_TRY(sn_check_in(node, err, n_in, in, 2, "scales", SN_IN_REQUIRED, SN_DT_ANY, SN_RANK_ANY));
    SN_TRY(sn_check_in(node, err, n_in, in, 3, "zero_points", SN_IN_OPTIONAL, SN_DT_ANY, SN_RANK_ANY));
    SN_TRY(sn_check_in(node, err, n_in, in, 5, "bias", SN_IN_OPTIONAL, SN_DT_ANY, SN_RANK_ANY));
    const sn_tensor *a = in[0], *b = in[1], *sc = in[2];
    if (!(a->dtype == SN_F32 || a->dtype == SN_F16 || a->dtype == SN_BF16))
        return sn_kfail(err, node, SNUG_ERR_TYPE, "A must be float, float16 or bfloat16, got %s",
                        sn_dtype_name(a->dtype));
    if (b->dtype != SN_U8)
        return sn_kfail(err, node, SNUG_ERR_TYPE, "B must be uint8, got %s",
                        sn_dtype_name(b->dtype));
    if (sc->dtype != a->dtype)
        return sn_kfail(err, node, SNUG_ERR_TYPE, "scales type %s differs from A's %s",
                        sn_dtype_name(sc->dtype), sn_dtype_name(a->dtype));
    if (sn_has_in(in, n_in, 4))
        return sn_kfail(err, node, SNUG_ERR_UNSUPPORTED, "g_idx is not supported");
    if (sn_has_in(in, n_in, 3)) {
        sn_dtype zt = in[3]->dtype;
        if (zt == SN_U8)
            g->zp_kind = 1;
        else if (zt == a->dtype)
            g->zp_kind = 2;
        else
            return sn_kfail(err, node, SNUG_ERR_TYPE, "zero_points type %s not supported",
                            sn_dtype_name(zt));
    }
    if (sn_has_in(in, n_in, 5) && in[5]->dtype != a->dtype)
        return sn_kfail(err, node, SNUG_ERR_TYPE, "bias type differs from A's");
    if (a->rank < 1)
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "A must have rank >= 1");
    if (!shapes)
        return SNUG_OK;
    if (a->dims[a->rank - 1] != g->K)
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "A's last dim %lld differs from K=%lld",
                        (long long)a->dims[a->rank - 1], (long long)g->K);
    g->M = 1;
    for (int i = 0; i < a->rank - 1; i++)
        g->M *= a->dims[i];
    int64_t bn = sn_tensor_numel(b);
    g->empty = bn == 0 || g->N == 0 || g->K == 0;
    if (!g->empty) {
        if (bn != g->N * g->kb * g->blob)
            return sn_kfail(err, node, SNUG_ERR_SHAPE,
                            "B has %lld bytes, expected N*k_blocks*blob = %lld", (long long)bn,
                            (long long)(g->N * g->kb * g->blob));
        if (sn_tensor_numel(sc) != g->N * g->kb)
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "scales has %lld values, expected %lld",
                            (long long)sn_tensor_numel(sc), (long long)(g->N * g->kb));
        if (g->zp_kind) {
            int64_t want = g->zp_kind == 1 ? g->N * ((g->kb * g->bits + 7) / 8) : g->N * g->kb;
            if (sn_tensor_numel(in[3]) != want)
                return sn_kfail(err, node, SNUG_ERR_SHAPE,
                                "zero_points has %lld values, expected %lld",
                                (long long)sn_tensor_numel(in[3]), (long long)want);
        }
    }
    if (sn_has_in(in, n_in, 5) && sn_tensor_numel(in[5]) != g->N)
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "bias has %lld values, expected N=%lld",
                        (long long)sn_tensor_numel(in[5]), (long long)g->N);
    g->int8 = MNB_INT8_ACC4 && b_const && sn_attr_int(node, "accuracy_level", 0) == 4 &&
              g->zp_kind != 2 &&
              (g->bits == 4 || g->bits == 8);
    g->ort4 = g->int8 && g->bits == 4 && g->bs == 32 && g->zp_kind != 2;
    g->ort8 = g->int8 && g->bits == 8 && g->bs == 32;
    g->gemm = !g->int8 && g->M >= MNB_GEMM_MIN_M;
    return SNUG_OK;
}

int llm_mnb_infer(sn_infer_ctx *c) {
    mnb_geom g;
    const sn_tensor *a = c->in[0];
    SN_TRY(mnb_geom_of(c->node, c->n_in, c->in, false, false, &g, c->err));
    if (a->rank == SN_RANK_UNKNOWN) {
        sn_set_out(c->out[0], a->dtype, SN_RANK_UNKNOWN, NULL);
        return SNUG_OK;
    }
    if (a->dims[a->rank - 1] >= 0 && a->dims[a->rank - 1] != g.K)
        return KFAIL(SNUG_ERR_SHAPE, "A's last dim %lld differs from K=%lld",
                     (long long)a->dims[a->rank - 1], (long long)g.K);
    int64_t d[SN_MAX_RANK];
    memcpy(d, a->dims, sizeof(int64_t) * (size_t)a->rank);
    d[a->rank - 1] = g.N;
    sn_set_out(c->out[0], a->dtype, a->rank, d);
    return SNUG_OK;
}

/* Columns per dequantized panel of the prefill path: wide panels wake the
 * pool and re-pack A in sn_sgemm_ws less often; about MNB_PANEL_BYTES each. */
static int64_t mnb_panel_cols(const mnb_geom *g) {
    int64_t nb = MNB_PANEL_BYTES / (g->K * (int64_t)sizeof(float)) / 16 * 16;
    return sn_imin(g->N, sn_imax(nb, MNB_PANEL_MIN));
}

/* Workspace layout (each part 64-byte aligned). */
typedef struct mnb_ws {
    size_t a, y, sc, zp, bias; /* float32 staging (0 when not needed) */
    size_t qa, sa, ab;         /* int8 path: quantized A, its block scales, block sums */
    size_t asum, ap;           /* float GEMV path: block sums of A, permuted A */
    size_t slot;               /* per slot: block buffer */
    size_t panel, gemm;        /* prefill path */
    size_t total;
} mnb_ws;

static void mnb_ws_layout(const mnb_geom *g, sn_dtype dt, int threads, mnb_ws *w) {
    memset(w, 0, sizeof *w);
    bool stage = dt != SN_F32;
    size_t f = sizeof(float);
    if (stage) {
        w->a = sn_align64((size_t)(g->M * g->K) * f);
        w->y = sn_align64((size_t)(g->M * g->N) * f);
        w->sc = sn_align64((size_t)(g->N * g->kb) * f);
        w->zp = g->zp_kind == 2 ? sn_align64((size_t)(g->N * g->kb) * f) : 0;
        w->bias = sn_align64((size_t)g->N * f);
    }
    if (g->ort4) {
        w->qa = sn_align64((size_t)g->M * llm_mnb4_row_bytes(g->kb)); /* prepared rows */
    } else if (g->int8) {
        w->qa = sn_align64((size_t)(g->M * g->kb * g->bs));
        w->sa = sn_align64((size_t)(g->M * g->kb) * f);
        w->ab = sn_align64((size_t)(g->M * g->kb) * f);
    }
    if (g->gemm && g->bits == 4) { /* B dequantized block by block into the GEMM's panels */
        w->gemm = sn_align64(sn_sgemm_workspace(g->M, g->N, g->K, threads));
    } else if (g->gemm) {
        int64_t nb = mnb_panel_cols(g);
        w->panel = sn_align64((size_t)(nb * g->K) * f);
        w->gemm = sn_align64(sn_sgemm_workspace(g->M, nb, g->K, threads));
    } else if (!g->ort4 && !g->ort8) {
        w->slot = g->int8 ? MNB_SLOTS * sn_align64((size_t)g->bs * f) : 0;
        if (!g->int8)
            w->asum = sn_align64((size_t)(g->M * g->kb) * f);
        if (!g->int8 && g->bits == 4)
            w->ap = sn_align64((size_t)(g->M * (g->K / g->bs) * g->bs) * f);
    }
    w->total = w->a + w->y + w->sc + w->zp + w->bias + w->qa + w->sa + w->ab + w->asum + w->ap +
               w->slot + w->panel + w->gemm;
}

static int mnb_ws_bytes(const sn_node *node, int n_in, const sn_tensor *const *in, int n_out,
                  const sn_tensor *const *out, int n_threads, size_t *ws, sn_err *err) {
    (void)n_out, (void)out;
    mnb_geom g;
    SN_TRY(mnb_geom_of(node, n_in, in, true, in[1]->data != NULL, &g, err));
    mnb_ws w;
    mnb_ws_layout(&g, in[0]->dtype, n_threads, &w);
    *ws = w.total;
    return SNUG_OK;
}

size_t llm_mnb_estimate(const sn_infer_ctx *c) { return llm_estimate_with(c, mnb_ws_bytes); }

/* llm_mnb4_p16_pack's parts: B's count toward the panels' pages
 * (sn_rebuild_part); the scales and zero points go back as they are taken,
 * page by page (sn_rebuild_release), so that neither they nor an aligned
 * copy of them stays beside the panels while the rest is packed. */
typedef struct p16_rebuild {
    sn_rebuild r;
    const uint8_t *lo[2]; /* the scales' and zero points' first byte not handed back */
} p16_rebuild;

static void p16_part(void *arg, const void *p, size_t n) {
    p16_rebuild *pr = arg;
    const sn_prep_ctx *c = pr->r.c;
    const uint8_t *q = p;
    for (int k = 1; k <= 3 && k < c->n_in; k++) {
        if (!c->in[k] || !c->in[k]->data)
            continue;
        const uint8_t *t = c->in[k]->data, *e = t + sn_tensor_nbytes(c->in[k]);
        if (q < t || q >= e)
            continue;
        if (k == 1)
            sn_rebuild_part(&pr->r, p, n);
        else
            sn_rebuild_release(c, &pr->lo[k - 2], p, n, q + n == e);
        return;
    }
}

int llm_mnb_prepare(sn_prep_ctx *c) {
    mnb_geom g;
    bool b_const = c->in[1]->data != NULL;
    SN_TRY(mnb_geom_of(c->node, c->n_in, c->in, true, b_const, &g, c->err));
    c->state = b_const ? (void *)&mnb_const_b : NULL;
    mnb_state *st;
    p16_rebuild pr = {0};
    sn_rebuild *rp = &pr.r;
    /* panels serve the VNNI kernels, tiles the ORT-order decode kernel */
    bool relay = b_const && g.ort4 && c->long_lived && !(c->streamed & (1u << 1)) && !g.empty;
    /* the panels hold the scales and zero points too: those constant and not streamed */
    bool has_zp = g.zp_kind == 1;
    uint32_t p16_in = (1u << 1) | (1u << 2) | (has_zp ? 1u << 3 : 0);
    bool p16 = relay && llm_mnb4_fast1_available() && !(c->streamed & p16_in) && c->in[2]->data &&
               c->in[2]->dtype == SN_F32 && (!has_zp || c->in[3]->data);
    bool tile = relay && !p16 && g.kb <= LLM_MNB4_TILE_MAX_KB;
    size_t bytes = p16 ? llm_mnb4_p16_bytes(g.N, g.kb, has_zp) : tile ? llm_mnb4_tiled_bytes(g.N, g.kb) : 0;
    if ((p16 || tile) && c->dry) {
        /* they would replace B (and the panels the scales and zero points), in whole pages */
        c->state_bytes = sn_pages_size(bytes);
        c->replaces = p16 ? p16_in : 1u << 1;
    } else if ((p16 || tile) && (st = sn_calloc(1, sizeof *st))) { /* without memory: the original layout, as is */
        size_t src = (size_t)(g.N * g.kb * 16);
        if (!sn_rebuild_begin(rp, c, bytes, src)) {
            sn_free(st);
        } else {
            if (p16)
                llm_mnb4_p16_pack(c->in[1]->data, c->in[2]->data, has_zp ? c->in[3]->data : NULL,
                                  (g.kb + 1) / 2, g.N, g.kb, rp->block, p16_part, &pr);
            else
                llm_mnb4_tile(c->in[1]->data, g.N, g.kb, rp->block, sn_rebuild_part, rp);
            sn_rebuild_end(rp, c, 1); /* run reads the new layout only */
            if (p16)
                c->replaces = p16_in;
            st->tiled = rp->block;
            st->bytes = rp->bytes;
            st->layout = p16 ? LLM_MNB4_P16 : LLM_MNB4_TILED;
            c->state = st;
        }
    }
    return mnb_ws_bytes(c->node, c->n_in, c->in, c->n_out, c->out, c->n_threads, &c->workspace, c->err);
}

typedef struct mnb_job {
    const mnb_geom *g;
    const float *a;       /* [M, K] */
    float *y;             /* [M, N], accumulated into (zeroed first) */
    const uint8_t *b;     /* [N, kb, blob] */
    const float *sc;      /* [N, kb] */
    const uint8_t *zp8;   /* packed, row stride zp_stride */
    int64_t zp_stride;
    const float *zpf;     /* [N, kb] */
    const int8_t *qa;     /* int8 path: [M, kb * bs] */
    const float *sa;      /* [M, kb] */
    const float *ab;      /* [M, kb]: sa * sum of the block's codes */
    const float *bias;    /* [N] or NULL: added by the ort4 path itself */
    /* ort4: the column kernel and the layout of the rows it reads
     * (llm_mnb4_cols, or on AVX-512 VNNI llm_mnb4_fast1_cols / _fastm_cols) */
    void (*q4_cols)(const llm_mnb4_args *g, int64_t n0, int64_t n1);
    int q4_kind;
    const float *asum;    /* float path: block sums of A [M, kb] */
    const float *ap;      /* 4-bit float path: A's full blocks permuted [M, K / bs * bs] */
    char *slots;          /* MNB_SLOTS buffers of slot_bytes */
    size_t slot_bytes;
    float *panel;         /* prefill, widths other than 4 bits: [nb, K] */
    int64_t n0, nb;       /* prefill: first column and width of the panel */
    llm_mnb4_args q4;     /* ort4 path: prepared rows at q4.rows */
    int64_t q4_unit;      /* ort4 path: columns per task unit (MNB4_GROUP, or the kernel's panel) */
    llm_mnb8_args q8;     /* ort8 path */
} mnb_job;

static inline float mnb_zp(const mnb_job *j, int64_t n, int64_t blk) {
    const mnb_geom *g = j->g;
    if (j->zp8) {
        int64_t bit = blk * g->bits;
        return (float)((j->zp8[n * j->zp_stride + (bit >> 3)] >> (bit & 7)) &
                       ((1 << g->bits) - 1));
    }
    if (j->zpf)
        return j->zpf[n * g->kb + blk];
    return (float)(1 << (g->bits - 1));
}

/* Columns [n0, n1): float path, every row of A. Per block,
 * sum_k a_k (q_k - zp) s = s (sum_k a_k q_k) - s zp (sum_k a_k), with the
 * block sums of A precomputed (j->asum); 4-bit full blocks go through
 * llm_mnb4f_cols on the permuted copy of A (j->ap), the rest here. */
static void mnb_cols_f32(const mnb_job *j, int64_t n0, int64_t n1) {
    const mnb_geom *g = j->g;
    int64_t full = j->ap ? g->K / g->bs : 0; /* blocks done by llm_mnb4f_cols */
    if (full) {
        llm_mnb4f_args a = {g->M, full, g->bs, j->ap, full * g->bs, j->asum, g->kb,
                            j->b, g->kb * g->blob, j->sc, g->kb, j->zp8, j->zp_stride, j->zpf,
                            j->y, g->N};
        llm_mnb4f_cols(&a, n0, n1); /* writes y */
        if (full == g->kb)
            return;
    }
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *bcol = j->b + n * g->kb * g->blob;
        const float *sc = j->sc + n * g->kb;
        for (int64_t m = 0; m < g->M; m++) {
            const float *a = j->a + m * g->K, *as = j->asum + m * g->kb;
            float acc = 0;
            for (int64_t blk = full; blk < g->kb; blk++) {
                int64_t k0 = blk * g->bs, len = sn_imin(g->bs, g->K - k0);
                acc += sc[blk] * llm_q_dot(bcol + blk * g->blob, (int)g->bits, a + k0, len);
                acc -= sc[blk] * mnb_zp(j, n, blk) * as[blk];
            }
            j->y[m * g->N + n] += acc;
        }
    }
}

/* Columns [n0, n1): int8 path. */
static void mnb_cols_i8(const mnb_job *j, int64_t n0, int64_t n1, int16_t *codes) {
    const mnb_geom *g = j->g;
    int64_t kp = g->kb * g->bs;
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *bcol = j->b + n * g->kb * g->blob;
        for (int64_t blk = 0; blk < g->kb; blk++) {
            int64_t k0 = blk * g->bs, len = sn_imin(g->bs, g->K - k0);
            llm_q_codes(bcol + blk * g->blob, (int)g->bits, len, (int)mnb_zp(j, n, blk), codes);
            float sb = j->sc[n * g->kb + blk];
            for (int64_t m = 0; m < g->M; m++) {
                int32_t d = llm_dot_i8_i16(j->qa + m * kp + k0, codes, len);
                j->y[m * g->N + n] += j->sa[m * g->kb + blk] * sb * (float)d;
            }
        }
    }
}

/* Generic int8 path: slots [s0, s1) of the columns, each with its buffer. */
static void mnb_slot_task(void *arg, int64_t s0, int64_t s1) {
    const mnb_job *j = arg;
    int64_t N = j->g->N;
    for (int64_t s = s0; s < s1; s++) {
        int64_t n0 = s * N / MNB_SLOTS, n1 = (s + 1) * N / MNB_SLOTS;
        mnb_cols_i8(j, n0, n1, (int16_t *)(j->slots + (size_t)s * j->slot_bytes));
    }
}

/* Float path (small M): column groups [s0, s1) of MNB4_GROUP columns. */
static void mnb_f32_group_task(void *arg, int64_t s0, int64_t s1) {
    const mnb_job *j = arg;
    mnb_cols_f32(j, s0 * MNB4_GROUP, sn_imin(s1 * MNB4_GROUP, j->g->N));
}

/* Prefill, widths other than 4 bits: dequantizes panel columns
 * [j->n0 + c0, j->n0 + c1) into j->panel as [nb, K] rows. */
static void mnb_panel_task(void *arg, int64_t c0, int64_t c1) {
    const mnb_job *j = arg;
    const mnb_geom *g = j->g;
    for (int64_t c = c0; c < c1; c++) {
        int64_t n = j->n0 + c;
        const uint8_t *bcol = j->b + n * g->kb * g->blob;
        for (int64_t blk = 0; blk < g->kb; blk++) {
            int64_t k0 = blk * g->bs, len = sn_imin(g->bs, g->K - k0);
            llm_q_dequant(bcol + blk * g->blob, (int)g->bits, len, j->sc[n * g->kb + blk],
                          mnb_zp(j, n, blk), j->panel + c * g->K + k0);
        }
    }
}

/* Groups of MNB4_GROUP columns per task, at least: tasks of at least about
 * MNB_TASK_MACS multiply-adds (~10 us of decode), so that the small
 * products of a decode step (k and v projections) are not cut into tasks
 * that cost more to hand out than to compute. One row (decode, read from
 * memory): about MNB_M1_TASKS tasks per thread, never fewer than one per
 * thread; each task's columns are one ascending run of B, and every new
 * run starts a memory stream afresh (SmolLM2 int4 decode, MatMulNBits
 * per token: -7 to -13% against tasks of MNB_TASK_MACS; TinyLlama -3.5%;
 * one and three tasks per thread were slower). The same for the panels of
 * the many-row VNNI kernel (unit 16: a batch of decode rows), whose every
 * task starts its B cold too (SmolLM2, 16 rows: MatMulNBits 7.8 -> 6.8 ms
 * a step against 8 tasks per thread). */
#define MNB_M1_TASKS 2
static int64_t mnb_grain(const mnb_geom *g, int threads, int64_t unit) {
    int64_t per = g->M * g->K * unit;
    int64_t grain = sn_imax(1, MNB_TASK_MACS / sn_imax(per, 1));
    if ((g->M == 1 || unit > MNB4_GROUP) && threads > 1) {
        int64_t groups = (g->N + unit - 1) / unit;
        grain = sn_imax(grain, (groups + MNB_M1_TASKS * threads - 1) / (MNB_M1_TASKS * threads));
        grain = sn_imin(grain, (groups + threads - 1) / threads);
    }
    return grain;
}

/* Float prefill path, 4 bits (sn_sgemm_bfn): rows [p0, p0 + kb) of the
 * columns [j0, j0 + nb) dequantized into the GEMM's nr-wide panels, eight
 * columns at a time. */
static void mnb_q4_block(void *arg, int64_t j0, int64_t nb, int64_t p0, int64_t kb, float *bp, int64_t ps,
                         int nr) {
    const mnb_job *j = arg;
    const mnb_geom *g = j->g;
    for (int64_t c = 0; c < nb; c += 8) {
        int64_t n = j0 + c;
        llm_q4_dequant_panel(j->b + n * g->kb * g->blob, g->kb * g->blob, j->sc + n * g->kb, g->kb,
                             j->zp8 ? j->zp8 + n * j->zp_stride : NULL, j->zp_stride,
                             j->zpf ? j->zpf + n * g->kb : NULL, sn_imin(8, nb - c), p0, kb, g->bs,
                             bp + c / nr * ps + c % nr, nr);
    }
    int64_t full = nb / nr * nr;
    if (full < nb) /* the last panel's columns past nb */
        for (int64_t p = 0; p < kb; p++)
            memset(bp + full / nr * ps + p * nr + (nb - full), 0, sizeof(float) * (size_t)(nr - (nb - full)));
}

/* ort4 path: rows [m0, m1) of A prepared for j->q4_cols, in its layout (j->q4_kind). */
static void mnb4_prep_task(void *arg, int64_t m0, int64_t m1) {
    const mnb_job *j = arg;
    size_t rb = llm_mnb4_row_bytes(j->g->kb);
    for (int64_t m = m0; m < m1; m++)
        llm_mnb4_prep_row(j->a + m * j->g->K, j->g->K, j->q4_kind, (char *)j->q4.rows + (size_t)m * rb);
}

/* ort4 path: column groups [s0, s1) of q4_unit columns, by j->q4_cols. */
static void mnb4_cols_task(void *arg, int64_t s0, int64_t s1) {
    const mnb_job *j = arg;
    j->q4_cols(&j->q4, s0 * j->q4_unit, sn_imin(s1 * j->q4_unit, j->g->N));
}

/* ort8 path: column groups [s0, s1) of MNB4_GROUP columns. */
static void mnb8_cols_task(void *arg, int64_t s0, int64_t s1) {
    const mnb_job *j = arg;
    llm_mnb8_cols(&j->q8, s0 * MNB4_GROUP, sn_imin(s1 * MNB4_GROUP, j->g->N));
}

static void mnb_quantize_a(void *arg, int64_t m0, int64_t m1) {
    const mnb_job *j = arg;
    const mnb_geom *g = j->g;
    int64_t kp = g->kb * g->bs;
    for (int64_t m = m0; m < m1; m++)
        for (int64_t blk = 0; blk < g->kb; blk++) {
            int64_t k0 = blk * g->bs, len = sn_imin(g->bs, g->K - k0);
            int8_t *q = (int8_t *)j->qa + m * kp + k0;
            float sa = llm_q8_quantize(j->a + m * g->K + k0, len, q);
            ((float *)j->sa)[m * g->kb + blk] = sa;
            /* the block is zero-padded to bs codes (ORT reads whole blocks) */
            memset(q + len, 0, (size_t)(g->bs - len));
            int32_t sum = 0;
            for (int64_t k = 0; k < len; k++)
                sum += q[k];
            ((float *)j->ab)[m * g->kb + blk] = sa * (float)sum;
        }
}

/* One call, set up (mnb_begin), computed (mnb_compute) and finished
 * (mnb_end) in steps, so that a group of calls (llm_mnb_run_group) can
 * share one column job between the first and the last step. */
typedef struct mnb_call {
    mnb_geom g;
    mnb_job j;
    float *y;          /* [M, N] float: Y's data, or workspace converted at the end */
    const float *bias;
    sn_range_fn cols;  /* the job is column groups (of j.q4_unit on the ort4 path, else of
                        * MNB4_GROUP): this task, else NULL */
    int64_t groups, grain;
    char *p;           /* workspace past the buffers laid out */
    mnb_ws w;
    int stage;         /* MNB_DONE: nothing left; MNB_OUT: only the conversion of y */
} mnb_call;

enum { MNB_RUN = 0, MNB_OUT, MNB_DONE };

static int mnb_begin(sn_kctx *c, mnb_call *k) {
    mnb_geom *gp = &k->g;
    SN_TRY(mnb_geom_of(c->node, c->n_in, c->in, true, c->state != NULL, gp, c->err));
    const mnb_geom g = *gp;
    const mnb_state *st = c->state;
    const sn_tensor *A = c->in[0];
    sn_tensor *Y = c->out[0];
    sn_dtype dt = A->dtype;
    mnb_ws w;
    mnb_ws_layout(&g, dt, sn_pool_size(c->pool), &w);
    char *p = c->ws;
    float *a = dt == SN_F32 ? A->data : (float *)p;
    p += w.a;
    float *y = dt == SN_F32 ? Y->data : (float *)p;
    p += w.y;
    k->y = y;
    k->cols = NULL;
    k->stage = MNB_RUN;
    const sn_tensor *bias_t = sn_has_in(c->in, c->n_in, 5) ? c->in[5] : NULL;
    const float *bias = NULL;
    if (bias_t) {
        if (dt == SN_F32) {
            bias = bias_t->data;
        } else {
            llm_to_f32(dt, bias_t->data, (float *)(p + w.sc + w.zp), g.N);
            bias = (const float *)(p + w.sc + w.zp);
        }
    }
    k->bias = bias;
    if (g.M * g.N == 0) {
        k->stage = MNB_DONE;
        return SNUG_OK;
    }
    if (g.empty) {
        for (int64_t m = 0; m < g.M; m++)
            for (int64_t n = 0; n < g.N; n++)
                y[m * g.N + n] = bias ? bias[n] : 0.0f;
        k->stage = MNB_OUT;
        return SNUG_OK;
    }
    mnb_job j = {.g = gp, .a = a, .y = y, .b = c->in[1]->data};
    if (dt == SN_F32) {
        j.sc = c->in[2]->data;
        if (g.zp_kind == 2)
            j.zpf = c->in[3]->data;
    } else {
        llm_to_f32(dt, A->data, a, g.M * g.K);
        llm_to_f32(dt, c->in[2]->data, (float *)p, g.N * g.kb);
        j.sc = (const float *)p;
        if (g.zp_kind == 2) {
            llm_to_f32(dt, c->in[3]->data, (float *)(p + w.sc), g.N * g.kb);
            j.zpf = (const float *)(p + w.sc);
        }
    }
    p += w.sc + w.zp + w.bias;
    if (g.zp_kind == 1) {
        j.zp8 = c->in[3]->data;
        j.zp_stride = (g.kb * g.bits + 7) / 8;
    }
    j.qa = (const int8_t *)p;
    p += w.qa;
    j.sa = (const float *)p;
    p += w.sa;
    j.ab = (const float *)p;
    p += w.ab;
    if (g.ort4)
        j.bias = bias;
    j.asum = (const float *)p;
    for (int64_t m = 0; m < g.M && w.asum; m++)
        for (int64_t blk = 0; blk < g.kb; blk++) {
            int64_t k0 = blk * g.bs, len = sn_imin(g.bs, g.K - k0);
            float s = 0;
            for (int64_t kk = 0; kk < len; kk++)
                s += a[m * g.K + k0 + kk];
            ((float *)p)[m * g.kb + blk] = s;
        }
    p += w.asum;
    if (w.ap) {
        int64_t kf = (g.K / g.bs) * g.bs;
        for (int64_t m = 0; m < g.M; m++)
            llm_q4_permute(a + m * g.K, (float *)p + m * kf, kf / 16);
        j.ap = (const float *)p;
    }
    p += w.ap;
    /* column groups, and per task at least */
    j.q4_unit = MNB4_GROUP;
    if (g.ort4) {
        j.q4 = (llm_mnb4_args){.M = g.M, .N = g.N, .kb = g.kb, .rows = j.qa, .b = j.b, .sb = j.sc, .zp = j.zp8,
                               .zp_stride = j.zp_stride, .bias = bias, .y = y, .ldy = g.N};
        if (st && st->tiled) {
            j.q4.b = st->tiled;
            j.q4.tiled = st->layout;
        }
        j.q4_cols = llm_mnb4_cols;
        j.q4_kind = llm_mnb4_row_kind(g.M, j.q4.zp != NULL);
        if (j.q4.tiled != LLM_MNB4_TILED && llm_mnb4_fast1_available()) { /* as it is, or in panels: prepare chose so */
            j.q4_cols = g.M == 1 ? llm_mnb4_fast1_cols : llm_mnb4_fastm_cols;
            j.q4_kind = LLM_MNB4_ROWS_Q4; /* both: one row gives the same bits in either */
            j.q4_unit = j.q4.tiled == LLM_MNB4_P16 ? 16 : llm_mnb4_fastm_unit(g.M, MNB4_GROUP);
        }
        k->cols = mnb4_cols_task;
    } else if (g.ort8) {
        j.q8 = (llm_mnb8_args){g.M, g.N, g.kb, j.qa, j.sa, j.ab, j.b, j.sc, j.zp8, j.zp_stride, bias,
                               y, g.N};
        k->cols = mnb8_cols_task;
    } else if (!g.gemm && !g.int8) {
        k->cols = mnb_f32_group_task;
    }
    k->groups = (g.N + j.q4_unit - 1) / j.q4_unit;
    k->grain = mnb_grain(&g, sn_pool_size(c->pool), j.q4_unit);
    k->j = j;
    k->p = p;
    k->w = w;
    return SNUG_OK;
}

/* What comes before the column job, on the call's own buffers: A's rows
 * prepared or quantized, y zeroed for the paths that add into it. */
static void mnb_before_cols(sn_kctx *c, mnb_call *k) {
    if (k->g.ort4)
        sn_pool_for(c->pool, k->g.M, 4, mnb4_prep_task, &k->j);
    else if (k->g.ort8)
        sn_pool_for(c->pool, k->g.M, 1, mnb_quantize_a, &k->j);
    else
        memset(k->y, 0, (size_t)(k->g.M * k->g.N) * sizeof(float));
}

static void mnb_compute(sn_kctx *c, mnb_call *k) {
    const mnb_geom g = k->g;
    mnb_job *j = &k->j;
    char *p = k->p;
    const mnb_ws w = k->w;
    if (k->cols) {
        mnb_before_cols(c, k);
        sn_pool_for(c->pool, k->groups, k->grain, k->cols, j);
    } else if (g.gemm && g.bits == 4) {
        sn_sgemm_cb_ws(g.M, g.N, g.K, j->a, g.K, mnb_q4_block, j, k->y, g.N, c->pool, p + w.panel,
                       sn_sgemm_workspace(g.M, g.N, g.K, sn_pool_size(c->pool)));
    } else if (g.gemm) {
        j->panel = (float *)p;
        void *gws = p + w.panel;
        int64_t nbmax = mnb_panel_cols(&g);
        size_t gsize = sn_sgemm_workspace(g.M, nbmax, g.K, sn_pool_size(c->pool));
        for (int64_t n0 = 0; n0 < g.N; n0 += nbmax) {
            int64_t nb = sn_imin(nbmax, g.N - n0);
            j->n0 = n0;
            j->nb = nb;
            sn_pool_for(c->pool, nb, 8, mnb_panel_task, j);
            sn_sgemm_ws(0, 1, g.M, nb, g.K, 1.0f, j->a, g.K, j->panel, g.K, 0.0f, k->y + n0, g.N, c->pool,
                        gws, gsize);
        }
    } else { /* int8 without a layout of its own */
        memset(k->y, 0, (size_t)(g.M * g.N) * sizeof(float));
        sn_pool_for(c->pool, g.M, 1, mnb_quantize_a, j);
        j->slots = p;
        j->slot_bytes = sn_align64((size_t)g.bs * sizeof(float));
        sn_pool_for(c->pool, MNB_SLOTS, 1, mnb_slot_task, j);
    }
}

static void mnb_end(sn_kctx *c, mnb_call *k) {
    const mnb_geom *g = &k->g;
    if (k->stage == MNB_DONE)
        return;
    if (k->stage == MNB_RUN && k->bias && !g->ort4 && !g->ort8)
        for (int64_t m = 0; m < g->M; m++)
            for (int64_t n = 0; n < g->N; n++)
                k->y[m * g->N + n] += k->bias[n];
    if (c->in[0]->dtype != SN_F32)
        llm_from_f32(c->in[0]->dtype, k->y, c->out[0]->data, g->M * g->N);
}

/* A begun call finished on its own. */
static void mnb_alone(sn_kctx *c, mnb_call *k) {
    if (k->stage == MNB_RUN)
        mnb_compute(c, k);
    mnb_end(c, k);
}

int llm_mnb_run(sn_kctx *c) {
    mnb_call k;
    SN_TRY(mnb_begin(c, &k));
    mnb_alone(c, &k);
    return SNUG_OK;
}

bool llm_mnb_rows_invariant(const sn_graph *g, const sn_node *n) {
    if (n->n_in < 3 || n->in[1] < 0 || !(g->values[n->in[1]].flags & SN_VAL_INIT))
        return false;
    if (n->n_in > 3 && n->in[3] >= 0 && sn_dtype_is_float(g->values[n->in[3]].info.dtype))
        return false;
    for (int k = 6; k < n->n_in; k++) /* g_idx and anything after it */
        if (n->in[k] >= 0)
            return false;
    return MNB_INT8_ACC4 && sn_attr_int(n, "accuracy_level", 0) == 4 && sn_attr_int(n, "bits", 4) == 4 &&
           sn_attr_int(n, "block_size", 0) == 32 && llm_mnb4_fast1_available();
}

/* Group members: one A (the executor checks), the same depth and format. */
bool llm_mnb_group_ok(const sn_node *first, const sn_node *next) {
    static const char *const keys[] = {"K", "bits", "block_size", "accuracy_level"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (sn_attr_int(first, keys[i], -1) != sn_attr_int(next, keys[i], -1))
            return false;
    return true;
}

/* The SwiGLU after a gate/up pair (sn_kernel.group_tail): the nodes
 * Sigmoid(g), Mul(g, that) and Mul(that, u) right after the two members,
 * in float, where g is one member's output and u the other's (same N, so
 * the same shape: one A) and the first two outputs are read by the next
 * node alone. The onnxruntime-genai builder's SiLU MLP (SmolLM2, Llama,
 * Qwen): three elementwise nodes a layer, each a pool job with many rows.
 * 3 when the tail is there, else 0. */
static bool node_is(const sn_node *n, const char *op, int n_in) {
    return !strcmp(n->p->op_type, op) && !n->p->domain[0] && n->n_in == n_in && n->n_out == 1 && !n->n_sub;
}

static bool only_read_by(const sn_graph *g, int v, int node) {
    const sn_value *val = &g->values[v];
    return !(val->flags & SN_VAL_OUTPUT) && val->n_cons == 1 && val->cons[0] == node;
}

static bool reads_pair(const sn_node *n, int a, int b) {
    return (n->in[0] == a && n->in[1] == b) || (n->in[0] == b && n->in[1] == a);
}

int llm_mnb_group_tail(const sn_graph *g, int first, int n) {
    if (n != 2 || first + 5 > g->n_nodes)
        return 0;
    const sn_node *m0 = &g->nodes[first], *m1 = &g->nodes[first + 1];
    const sn_node *sg = &g->nodes[first + 2], *mg = &g->nodes[first + 3], *mu = &g->nodes[first + 4];
    if (!node_is(sg, "Sigmoid", 1) || !node_is(mg, "Mul", 2) || !node_is(mu, "Mul", 2) || m0->n_out < 1 ||
        m1->n_out < 1 || sn_attr_int(m0, "N", -1) != sn_attr_int(m1, "N", -1))
        return 0;
    int gv = sg->in[0], uv = gv == m0->out[0] ? m1->out[0] : m0->out[0];
    if (gv < 0 || (gv != m0->out[0] && gv != m1->out[0]) || uv < 0 || g->values[gv].info.dtype != SN_F32 ||
        !reads_pair(mg, gv, sg->out[0]) || !reads_pair(mu, mg->out[0], uv) || sg->out[0] < 0 || mg->out[0] < 0 ||
        mu->out[0] < 0 || !only_read_by(g, sg->out[0], first + 3) || !only_read_by(g, mg->out[0], first + 4))
        return 0;
    return 3;
}

/* The tail's work on rows [0, M) and columns [c0, c1) of the members'
 * outputs. In a joint job, members of at most MNB_TAIL_GROUPS column
 * groups (a done mark each on the stack). */
#define MNB_TAIL_GROUPS 4096
typedef struct mnb_tail {
    const float *g, *u;
    float *y;
    int64_t M, N;
} mnb_tail;

static void mnb_tail_cols(const mnb_tail *t, int64_t c0, int64_t c1) {
    llm_swiglu_f32(t->g, t->u, t->y, t->N, 0, t->M, c0, sn_imin(c1, t->N));
}

/* On its own after the members (items: rows times 256-column blocks). */
static void mnb_tail_task(void *arg, int64_t i0, int64_t i1) {
    const mnb_tail *t = arg;
    int64_t nb = (t->N + 255) / 256;
    for (int64_t i = i0; i < i1; i++)
        llm_swiglu_f32(t->g, t->u, t->y, t->N, i / nb, i / nb + 1, i % nb * 256, sn_imin(i % nb * 256 + 256, t->N));
}

/* Column groups [s0, s1) of a group's joint job: member i owns
 * [first[i], first[i + 1]). */
typedef struct mnb_group_job {
    mnb_call *k;
    int n;
    int64_t first[SN_GROUP_MAX + 1];
    const mnb_tail *tail; /* a pair's SwiGLU, done per column group by whichever member finishes it second */
    uint8_t *done;        /* tail: per column group, how many members have it (atomic) */
    int64_t unit;         /* columns in a column group */
} mnb_group_job;

/* The tail's columns of groups [a, b) whose other member is done. */
static void mnb_group_tail_of(const mnb_group_job *gj, int64_t a, int64_t b) {
    int64_t run = -1;
    for (int64_t q = a; q <= b; q++) {
        bool both = q < b && __atomic_add_fetch(&gj->done[q], 1, __ATOMIC_ACQ_REL) == 2;
        if (both && run < 0)
            run = q;
        if (!both && run >= 0) {
            mnb_tail_cols(gj->tail, run * gj->unit, q * gj->unit);
            run = -1;
        }
    }
}

static void mnb_group_task(void *arg, int64_t s0, int64_t s1) {
    const mnb_group_job *gj = arg;
    for (int i = 0; i < gj->n; i++) {
        int64_t a = sn_imax(s0, gj->first[i]), b = sn_imin(s1, gj->first[i + 1]);
        if (a >= b)
            continue;
        gj->k[i].cols(&gj->k[i].j, a - gj->first[i], b - gj->first[i]);
        if (gj->tail)
            mnb_group_tail_of(gj, a - gj->first[i], b - gj->first[i]);
    }
}

/* A group of calls (sn_op_def.run_group). With one row each, or the rows of
 * a batch of decode steps in the VNNI kernel's panels, and the same column
 * path, their column groups are one job: one hand-out to the pool and one
 * wait instead of one per node, and the threads' runs of columns go on from
 * one B into the next instead of each node's B starting fresh streams
 * (SmolLM2 int4 decode: q/k/v and gate/up, 90 of its 211 MatMulNBits calls
 * a step). Their one A is prepared once for the ort4 members that read it
 * the same way. Every member computes exactly what its own run would
 * (SmolLM2, 16 sequences a step: 9.5 -> 9.0 ms). Otherwise they run one by
 * one. A SwiGLU tail (llm_mnb_group_tail) is computed in the joint job:
 * the thread that finishes a column group of gate or up second computes
 * the tail's columns there, while they are in its cache (the job's order
 * stays gate, then up: interleaving their column groups slowed a one-row
 * step by 7%). One row's tail is too little for the marks' traffic between
 * the threads: it comes after the job, as with other shapes. SmolLM2, 16
 * sequences a step: 15.0 -> 14.7 ms. */
int llm_mnb_run_group(sn_kctx *const *cs, int n, int n_tail) {
    mnb_call k[SN_GROUP_MAX];
    mnb_tail tail = {0};
    if (n_tail) {
        const sn_kctx *sg = cs[n], *mu = cs[n + 2];
        if (n != 2 || n_tail != 3 || sg->in[0]->dtype != SN_F32 || mu->out[0]->dtype != SN_F32 ||
            (sg->in[0]->data != cs[0]->out[0]->data && sg->in[0]->data != cs[1]->out[0]->data) ||
            sn_tensor_numel(mu->out[0]) != sn_tensor_numel(cs[0]->out[0]) ||
            sn_tensor_numel(cs[0]->out[0]) != sn_tensor_numel(cs[1]->out[0]))
            return sn_kfail(sg->err, sg->node, SNUG_ERR_INTERNAL, "not the SwiGLU tail of the MatMulNBits before it");
        int gi = sg->in[0]->data == cs[0]->out[0]->data ? 0 : 1;
        int64_t N = cs[0]->out[0]->rank > 0 ? cs[0]->out[0]->dims[cs[0]->out[0]->rank - 1] : 1;
        tail = (mnb_tail){cs[gi]->out[0]->data, cs[1 - gi]->out[0]->data, mu->out[0]->data, 0, N};
        tail.M = N ? sn_tensor_numel(mu->out[0]) / N : 0;
    }
    int begun = 0;
    bool joint = n >= 2 && n <= SN_GROUP_MAX;
    while (joint && begun < n) {
        mnb_call *ki = &k[begun];
        SN_TRY(mnb_begin(cs[begun++], ki));
        joint = ki->stage == MNB_RUN && ki->cols && ki->cols == k[0].cols && ki->g.M == k[0].g.M &&
                (ki->g.M == 1 || ki->j.q4_unit > MNB4_GROUP) && ki->j.q4_unit == k[0].j.q4_unit;
    }
    if (!joint) { /* each on its own: the calls begun finish, the rest run */
        for (int r = 0; r < begun; r++)
            mnb_alone(cs[r], &k[r]);
        for (int r = begun; r < n; r++)
            SN_TRY(llm_mnb_run(cs[r]));
    } else {
        uint8_t done[MNB_TAIL_GROUPS];
        mnb_group_job gj = {k, n, {0}, NULL, done, k[0].j.q4_unit};
        for (int i = 0; i < n; i++) {
            /* one A: rows prepared the same way are prepared once (the first member's workspace
             * lives until the job is done) */
            if (i > 0 && k[i].g.ort4 && k[i].g.K == k[0].g.K && k[i].j.q4_kind == k[0].j.q4_kind)
                k[i].j.q4.rows = k[0].j.q4.rows;
            else
                mnb_before_cols(cs[i], &k[i]);
            gj.first[i + 1] = gj.first[i] + k[i].groups;
        }
        mnb_geom all = k[0].g; /* the job's grain as for one product of every column */
        all.N = gj.first[n] * gj.unit;
        /* the tail in the job: the members' outputs final when their columns are (no bias added after) */
        if (n_tail && tail.M > 1 && k[0].groups == k[1].groups && k[0].groups <= MNB_TAIL_GROUPS &&
            !(k[0].bias && !k[0].g.ort4 && !k[0].g.ort8) && !(k[1].bias && !k[1].g.ort4 && !k[1].g.ort8)) {
            memset(done, 0, (size_t)k[0].groups);
            gj.tail = &tail;
        }
        sn_pool_for(cs[0]->pool, gj.first[n], mnb_grain(&all, sn_pool_size(cs[0]->pool), gj.unit), mnb_group_task,
                    &gj);
        for (int i = 0; i < n; i++)
            mnb_end(cs[i], &k[i]);
        if (gj.tail)
            return SNUG_OK;
    }
    if (n_tail && tail.M * tail.N > 0) /* up to 4096 elements (a row) on the caller: less than a hand-out */
        sn_pool_for(cs[0]->pool, tail.M * ((tail.N + 255) / 256), 16, mnb_tail_task, &tail);
    return SNUG_OK;
}
