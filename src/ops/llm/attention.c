/* Attention operators:
 *   GroupQueryAttention (com.microsoft): KV cache in BNSH, per-batch lengths
 *     from seqlens_k, causal (+ local window), rotary inside, packed QKV;
 *   MultiHeadAttention (com.microsoft): separate or packed q/k/v, projection
 *     bias, key padding mask, attention bias, past/present;
 *   Attention (ONNX opset 23+): 3-D/4-D inputs, GQA by head groups, boolean
 *     or additive mask, causal, softcap, past/present, qk output.
 *
 * All three stage their inputs as float32 head-major (BNSH) buffers — the
 * present key/value outputs themselves when those are float32 — and then run
 * one query row at a time through llm_attn_row_run (online softmax: decode
 * is a pass over L keys per head, no L-sized scratch), parallel over rows in
 * MNB-style work slots with per-slot scratch in the workspace.
 * GroupQueryAttention's rows, which round like ONNX Runtime, also get scores
 * scratch per slot (and, for prompts, the keys transposed once per KV head)
 * so that each key is scored once, eight at a time. */
#include <math.h>
#include <string.h>

#include "ops/llm/kernels.h"
#include "ops/llm/llm.h"

#define ATTN_SLOTS 64

/* ---- workspace carving -------------------------------------------------- */

typedef struct carve {
    char *p;      /* NULL while sizing */
    size_t used;
} carve;

static float *carve_f(carve *w, int64_t n) {
    size_t b = sn_align64((size_t)(n > 0 ? n : 1) * sizeof(float));
    float *r = w->p ? (float *)(w->p + w->used) : NULL;
    w->used += b;
    return r;
}

/* A float32 view of t: its data, or a staged copy. */
static const float *carve_in(carve *w, const sn_tensor *t) {
    if (!t)
        return NULL;
    if (t->dtype == SN_F32)
        return t->data;
    int64_t n = sn_tensor_numel(t);
    float *d = carve_f(w, n);
    if (d)
        llm_to_f32(t->dtype, t->data, d, n);
    return d;
}

/* Where output t's float32 values go: its data, or a staging buffer. */
static float *carve_out(carve *w, sn_tensor *t) {
    if (!t)
        return NULL;
    if (t->dtype == SN_F32)
        return t->data;
    return carve_f(w, sn_tensor_numel(t));
}

static void flush_out(sn_tensor *t, const float *f) {
    if (t && t->dtype != SN_F32)
        llm_from_f32(t->dtype, f, t->data, sn_tensor_numel(t));
}

/* Rounds values to what dtype t can hold (rotated q/k are stored in the
 * input's precision by ORT before attention reads them). */
static void round_to(sn_dtype t, float *x, int64_t n) {
    if (t == SN_F16)
        for (int64_t i = 0; i < n; i++)
            x[i] = sn_f16_to_f32(sn_f32_to_f16(x[i]));
    else if (t == SN_BF16)
        for (int64_t i = 0; i < n; i++)
            x[i] = sn_bf16_to_f32(sn_f32_to_bf16(x[i]));
}

/* ---- the row driver ----------------------------------------------------- */

struct attn_job;
/* Fills the per-row fields of r (lo, hi, masks, biases, sink); returns false
 * for a row that is not computed (output zero). */
typedef bool (*attn_setup_fn)(const struct attn_job *j, int64_t b, int64_t h, int64_t s,
                              llm_attn_row *r);

typedef struct attn_job {
    int64_t B, Nq, Nkv, S, H, Hv;
    const float *q;   /* [B, Nq, S, H] */
    const float *k;   /* [B, Nkv, Lk, H] */
    const float *v;   /* [B, Nkv, Lk, Hv] */
    int64_t Lk;       /* key rows per head in k and v */
    float *y;         /* y_bsnh ? [B, S, Nq, Hv] : [B, Nq, S, Hv] */
    bool y_bsnh;
    float *qk;        /* [B, Nq, S, Lk] or NULL */
    int qk_mode;
    float scale, softcap;
    int softcap_after_bias;
    int zero_if_masked;
    attn_setup_fn setup;
    const void *op;   /* op-specific data for setup */
    int64_t n_scores; /* per row of a slot: score scratch for the ort rows (0: none) */
    int rows;         /* rows run together (llm_attn_rows_run), each with n_scores of scratch */
    const float *kt;  /* [B, Nkv, H, kt_ld]: keys transposed for the ort prompt rows, or NULL */
    int64_t kt_ld;
    char *slots;
    size_t slot_bytes;
    const int *kvb;   /* k and v of batch entry b at entry kvb[b] (a packed run's slots), or NULL: b */
    int64_t unit;     /* decode: query rows per unit, of one key/value head (0: rows spread over the slots) */
    int64_t n_units;  /* decode: units in all (B x Nkv x units a key/value head), set by attn_run_rows */
} attn_job;

/* Row r of the job ((b, h, s) in order) with its score scratch: true when
 * it is to be computed, false when its setup masked it out (y zeroed). */
static bool attn_make_row(const attn_job *j, int64_t r, float *scores, llm_attn_row *row) {
    int64_t s = r % j->S, h = (r / j->S) % j->Nq, b = r / (j->S * j->Nq);
    int64_t kh = h / (j->Nq / j->Nkv), kb = j->kvb ? j->kvb[b] : b;
    *row = (llm_attn_row){0};
    row->q = j->q + r * j->H;
    row->k = j->k + (kb * j->Nkv + kh) * j->Lk * j->H;
    row->v = j->v + (kb * j->Nkv + kh) * j->Lk * j->Hv;
    row->k_stride = j->H;
    row->v_stride = j->Hv;
    row->H = j->H;
    row->Hv = j->Hv;
    row->lo = 0;
    row->hi = j->Lk;
    row->mask_lo = 0;
    row->mask_hi = j->Lk;
    row->scale = j->scale;
    row->softcap = j->softcap;
    row->softcap_after_bias = j->softcap_after_bias;
    row->zero_if_masked = j->zero_if_masked;
    row->qk_out = j->qk ? j->qk + r * j->Lk : NULL;
    row->qk_mode = j->qk_mode;
    row->scores = scores;
    if (j->kt) {
        row->kt = j->kt + (b * j->Nkv + kh) * j->H * j->kt_ld;
        row->kt_ld = j->kt_ld;
    }
    row->y = j->y + (j->y_bsnh ? ((b * j->S + s) * j->Nq + h) : r) * j->Hv;
    if (!j->setup(j, b, h, s, row)) {
        memset(row->y, 0, (size_t)j->Hv * sizeof(float));
        return false;
    }
    if (row->qk_out) {
        /* keys outside the computed range */
        float fill = j->qk_mode == LLM_QK_PROBS ? 0.0f : -INFINITY;
        for (int64_t t = 0; t < row->lo; t++)
            row->qk_out[t] = fill;
        for (int64_t t = row->hi; t < j->Lk; t++)
            row->qk_out[t] = fill;
    }
    return true;
}

static float *slot_acc(const attn_job *j, int64_t slot, float **scores) {
    float *acc = (float *)(j->slots + (size_t)slot * j->slot_bytes);
    *scores = j->n_scores ? acc + sn_align64((size_t)j->Hv * sizeof(float)) / sizeof(float) : NULL;
    return acc;
}

static void attn_rows_task(void *arg, int64_t s0, int64_t s1) {
    const attn_job *j = arg;
    int64_t R = j->B * j->Nq * j->S;
    int rows_max = j->rows > 0 ? j->rows : 1;
    for (int64_t slot = s0; slot < s1; slot++) {
        float *scores, *acc = slot_acc(j, slot, &scores);
        llm_attn_row group[LLM_ATTN_ROWS];
        int ng = 0;
        int64_t r1 = (slot + 1) * R / ATTN_SLOTS;
        for (int64_t r = slot * R / ATTN_SLOTS; r < r1; r++) {
            if (attn_make_row(j, r, scores ? scores + ng * j->n_scores : NULL, &group[ng]))
                ng++;
            /* consecutive rows of one head run together (llm_attn_rows_run) */
            bool more = r + 1 < r1 && (r + 1) % j->S != 0 && ng < rows_max;
            if (ng && !more) {
                llm_attn_rows_run(group, ng, acc);
                ng = 0;
            }
        }
    }
}

/* Decode units of `unit` query heads per key/value head of `grp`. */
static inline int64_t units_per_head(int64_t grp, int64_t unit) { return (grp + unit - 1) / unit; }

/* Decode (j->unit > 0): each unit is up to j->unit query heads of one
 * key/value head, which llm_attn_rows_run reads once for all of them; slot
 * s (one task, its own scratch) takes the units [s U / n, (s + 1) U / n)
 * of the U there are, n = min(U, ATTN_SLOTS). */
static void attn_units_task(void *arg, int64_t s0, int64_t s1) {
    const attn_job *j = arg;
    int64_t grp = j->Nq / j->Nkv, per = units_per_head(grp, j->unit), U = j->n_units;
    int64_t ns = sn_imin(U, ATTN_SLOTS);
    for (int64_t slot = s0; slot < s1; slot++) {
        float *scores, *acc = slot_acc(j, slot, &scores);
        for (int64_t u = slot * U / ns; u < (slot + 1) * U / ns; u++) {
            int64_t kvg = u / per, b = kvg / j->Nkv, kh = kvg % j->Nkv;
            int64_t h0 = kh * grp + u % per * j->unit, h1 = sn_imin(h0 + j->unit, (kh + 1) * grp);
            llm_attn_row group[LLM_ATTN_ROWS];
            int ng = 0;
            for (int64_t h = h0; h < h1; h++)
                if (attn_make_row(j, b * j->Nq + h, scores ? scores + ng * j->n_scores : NULL, &group[ng]))
                    ng++;
            if (ng)
                llm_attn_rows_run(group, ng, acc);
        }
    }
}

/* A slot: Hv floats of accumulators, then rows x n_scores floats of scores. */
static size_t attn_slot_bytes(int64_t Hv, int64_t n_scores, int rows) {
    return sn_align64((size_t)(Hv > 0 ? Hv : 1) * sizeof(float)) +
           sn_align64((size_t)n_scores * (size_t)(rows > 0 ? rows : 1) * sizeof(float));
}

static void attn_run_rows(attn_job *j, sn_pool *pool, carve *w) {
    j->slot_bytes = attn_slot_bytes(j->Hv, j->n_scores, j->rows);
    j->slots = w->p + w->used;
    w->used += ATTN_SLOTS * j->slot_bytes;
    if (j->B * j->Nq * j->S == 0)
        return;
    if (j->unit > 0) {
        j->n_units = j->B * j->Nkv * units_per_head(j->Nq / j->Nkv, j->unit);
        sn_pool_for(pool, sn_imin(j->n_units, ATTN_SLOTS), 1, attn_units_task, j);
    } else {
        sn_pool_for(pool, ATTN_SLOTS, 1, attn_rows_task, j);
    }
}

/* Copies a [B, L, N, H]-strided source (row stride `rs` elements, head
 * offset `off`) into [B, N, dstL, H] at row offset dst0, adding bias[n*H+d]. */
static void to_bnsh(const float *src, int64_t B, int64_t L, int64_t N, int64_t H, int64_t rs,
                    int64_t off, const float *bias, float *dst, int64_t dstL, int64_t dst0) {
    for (int64_t b = 0; b < B; b++)
        for (int64_t l = 0; l < L; l++)
            for (int64_t n = 0; n < N; n++) {
                const float *s = src + (b * L + l) * rs + off + n * H;
                float *d = dst + ((b * N + n) * dstL + dst0 + l) * H;
                if (bias)
                    for (int64_t i = 0; i < H; i++)
                        d[i] = s[i] + bias[n * H + i];
                else
                    memcpy(d, s, (size_t)H * sizeof(float));
            }
}

/* ======================================================================
 * GroupQueryAttention
 * ====================================================================== */

enum { GQA_Q, GQA_K, GQA_V, GQA_PK, GQA_PV, GQA_SEQLENS, GQA_TOTAL, GQA_COS, GQA_SIN,
       GQA_POS, GQA_BIAS, GQA_SINK, GQA_KSCALE, GQA_VSCALE, GQA_QNORM, GQA_KNORM, GQA_QSEQ };

typedef struct gqa_geom {
    int64_t B, S, Nq, Nkv, H, D;
    bool packed;
    int64_t Lp;      /* past buffer rows (0 without past) */
    int64_t total;   /* total_sequence_length (-1 unknown) */
    int64_t Lc;      /* present rows = max(total, Lp) */
    int64_t rot;     /* rotary dim (0: none) */
} gqa_geom;

static int gqa_geom_of(const sn_node *node, int n_in, const sn_tensor *const *in, gqa_geom *g,
                       sn_err *err) {
    memset(g, 0, sizeof *g);
    uint64_t fl = SN_DT(SN_F32) | SN_DT(SN_F16) | SN_DT(SN_BF16);
    SN_TRY(sn_check_in(node, err, n_in, in, GQA_Q, "query", SN_IN_REQUIRED, fl, 3));
    uint64_t qt = SN_DT(in[GQA_Q]->dtype);
    SN_TRY(sn_check_in(node, err, n_in, in, GQA_K, "key", SN_IN_OPTIONAL, qt, 3));
    SN_TRY(sn_check_in(node, err, n_in, in, GQA_V, "value", SN_IN_OPTIONAL, qt, 3));
    SN_TRY(sn_check_in(node, err, n_in, in, GQA_PK, "past_key", SN_IN_OPTIONAL, SN_DT_ANY, SN_RANK_ANY));
    SN_TRY(sn_check_in(node, err, n_in, in, GQA_PV, "past_value", SN_IN_OPTIONAL, qt, 4));
    SN_TRY(sn_check_in(node, err, n_in, in, GQA_SEQLENS, "seqlens_k", SN_IN_REQUIRED, SN_DT(SN_I32), SN_RANK_ANY));
    SN_TRY(sn_check_in(node, err, n_in, in, GQA_TOTAL, "total_sequence_length", SN_IN_REQUIRED, SN_DT(SN_I32),
                       SN_RANK_ANY));
    SN_TRY(sn_check_in(node, err, n_in, in, GQA_COS, "cos_cache", SN_IN_OPTIONAL, qt, 2));
    SN_TRY(sn_check_in(node, err, n_in, in, GQA_SIN, "sin_cache", SN_IN_OPTIONAL, qt, 2));
    SN_TRY(sn_check_in(node, err, n_in, in, GQA_POS, "position_ids", SN_IN_OPTIONAL, SN_DT(SN_I64), 2));
    SN_TRY(sn_check_in(node, err, n_in, in, GQA_BIAS, "attention_bias", SN_IN_OPTIONAL, qt, 4));
    SN_TRY(sn_check_in(node, err, n_in, in, GQA_SINK, "head_sink", SN_IN_OPTIONAL, qt, SN_RANK_ANY));
    const sn_tensor *q = in[GQA_Q];
    g->Nq = sn_attr_int(node, "num_heads", 0);
    g->Nkv = sn_attr_int(node, "kv_num_heads", 0);
    if (g->Nq <= 0 || g->Nkv <= 0 || g->Nq % g->Nkv)
        return sn_kfail(err, node, SNUG_ERR_INVALID_ARG,
                        "num_heads %lld must be a positive multiple of kv_num_heads %lld",
                        (long long)g->Nq, (long long)g->Nkv);
    if (!sn_dtype_is_real(q->dtype) || q->dtype == SN_F64)
        return sn_kfail(err, node, SNUG_ERR_TYPE, "query type %s not supported",
                        sn_dtype_name(q->dtype));
    if (q->rank != 3)
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "query must be 3-D, got rank %d", q->rank);
    for (int i = GQA_KSCALE; i <= GQA_QSEQ; i++)
        if (i != GQA_QSEQ && sn_has_in(in, n_in, i))
            return sn_kfail(err, node, SNUG_ERR_UNSUPPORTED,
                            "input %d (quantized cache / q-k norm) is not supported", i);
    g->packed = !sn_has_in(in, n_in, GQA_K);
    if (g->packed != !sn_has_in(in, n_in, GQA_V))
        return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "key and value must be given together");
    g->B = q->dims[0];
    g->S = q->dims[1];
    g->D = q->dims[2];
    if (g->D >= 0) {
        int64_t div = g->packed ? g->Nq + 2 * g->Nkv : g->Nq;
        if (g->D % div)
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "query hidden size %lld not divisible by %lld",
                            (long long)g->D, (long long)div);
        g->H = g->D / div;
    } else {
        g->H = -1;
    }
    if (!g->packed) {
        const sn_tensor *k = in[GQA_K], *v = in[GQA_V];
        if (k->rank != 3 || v->rank != 3)
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "key and value must be 3-D");
        if (k->dtype != q->dtype || v->dtype != q->dtype)
            return sn_kfail(err, node, SNUG_ERR_TYPE, "query, key and value types differ");
        if (g->H >= 0 && ((k->dims[2] >= 0 && k->dims[2] != g->Nkv * g->H) ||
                          (v->dims[2] >= 0 && v->dims[2] != g->Nkv * g->H)))
            return sn_kfail(err, node, SNUG_ERR_SHAPE,
                            "key/value hidden size must be kv_num_heads * head_size = %lld",
                            (long long)(g->Nkv * g->H));
        if (k->dims[1] >= 0 && g->S >= 0 && k->dims[1] != g->S)
            return sn_kfail(err, node, SNUG_ERR_UNSUPPORTED,
                            "key sequence length must equal the query's");
    }
    if (sn_has_in(in, n_in, GQA_PK) != sn_has_in(in, n_in, GQA_PV))
        return sn_kfail(err, node, SNUG_ERR_INVALID_ARG,
                        "past_key and past_value must be given together");
    if (sn_has_in(in, n_in, GQA_PK)) {
        const sn_tensor *pk = in[GQA_PK];
        if (pk->dtype != q->dtype)
            return sn_kfail(err, node, SNUG_ERR_UNSUPPORTED,
                            "quantized or mixed-type KV cache (%s) is not supported",
                            sn_dtype_name(pk->dtype));
        if (pk->rank != 4)
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "past_key must be 4-D (BNSH)");
        if ((pk->dims[1] >= 0 && pk->dims[1] != g->Nkv) ||
            (g->H >= 0 && pk->dims[3] >= 0 && pk->dims[3] != g->H))
            return sn_kfail(err, node, SNUG_ERR_SHAPE,
                            "past_key must be (batch, kv_num_heads, len, head_size)");
        g->Lp = pk->dims[2];
    }
    const sn_tensor *sl = in[GQA_SEQLENS], *tt = in[GQA_TOTAL];
    if (sl->dtype != SN_I32 || tt->dtype != SN_I32)
        return sn_kfail(err, node, SNUG_ERR_TYPE,
                        "seqlens_k and total_sequence_length must be int32");
    g->total = -1;
    if (tt->data) {
        if (sn_tensor_numel(tt) != 1)
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "total_sequence_length must be a scalar");
        g->total = *(const int32_t *)tt->data;
        if (g->total < 0)
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "total_sequence_length is negative");
    }
    g->Lc = g->total < 0 || g->Lp < 0 ? -1 : sn_imax(g->total, g->Lp);
    if (sn_attr_int(node, "do_rotary", 0)) {
        if (!sn_has_in(in, n_in, GQA_COS) || !sn_has_in(in, n_in, GQA_SIN))
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "do_rotary needs cos_cache and sin_cache");
        const sn_tensor *cs = in[GQA_COS];
        if (cs->rank != 2 || in[GQA_SIN]->rank != 2 || cs->dims[0] != in[GQA_SIN]->dims[0] ||
            cs->dims[1] != in[GQA_SIN]->dims[1])
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "cos_cache and sin_cache must be 2-D, of one shape");
        g->rot = cs->dims[1] * 2;
        if (g->H >= 0 && g->rot > g->H)
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "cos_cache is wider than head_size/2");
    }
    if (sn_attr_int(node, "sliding_window_cache", 0))
        return sn_kfail(err, node, SNUG_ERR_UNSUPPORTED, "sliding_window_cache is not supported");
    return SNUG_OK;
}

int llm_gqa_infer(sn_infer_ctx *c) {
    gqa_geom g;
    SN_TRY(gqa_geom_of(c->node, c->n_in, c->in, &g, c->err));
    sn_dtype dt = c->in[GQA_Q]->dtype;
    int64_t od[3] = {g.B, g.S, g.H >= 0 ? g.Nq * g.H : -1};
    sn_set_out(c->out[0], dt, 3, od);
    int64_t pd[4] = {g.B, g.Nkv, g.Lc, g.H};
    for (int i = 1; i < 3 && i < c->n_out; i++)
        sn_set_out(c->out[i], dt, 4, pd);
    if (c->n_out > 3 && c->out[3])
        return KFAIL(SNUG_ERR_UNSUPPORTED, "output_qk is not supported");
    return SNUG_OK;
}

typedef struct gqa_run {
    const int32_t *seqlens;
    const int32_t *qseq;     /* query_seqlens or NULL */
    int64_t window;          /* local_window_size (<= 0: none) */
    bool causal;
    const float *bias;       /* attention_bias [Bb, Nb, S, total] */
    int64_t bias_b, bias_n, bias_s, bias_len;
    const float *sink;       /* head_sink [Nq] */
    bool smooth;
    int64_t S;
} gqa_run;

static inline int64_t gqa_T(const gqa_run *o, int64_t b) {
    return (int64_t)o->seqlens[b] + 1;
}
static inline int64_t gqa_Q(const gqa_run *o, int64_t b) {
    return o->qseq ? o->qseq[b] : sn_imin(o->S, gqa_T(o, b));
}

static bool gqa_setup(const attn_job *j, int64_t b, int64_t h, int64_t s, llm_attn_row *r) {
    const gqa_run *o = j->op;
    int64_t T = gqa_T(o, b), Q = gqa_Q(o, b), P = T - Q;
    if (s >= Q)
        return false;
    int64_t hi = o->causal ? P + s + 1 : T;
    int64_t lo = 0;
    if (o->window > 0 && hi > o->window)
        lo = hi - o->window; /* the last local_window_size keys */
    r->lo = r->mask_lo = lo;
    r->hi = r->mask_hi = hi;
    r->ort = o->S == 1 ? 2 : 1;
    if (o->bias) {
        r->bias1 = o->bias + b * o->bias_b + h * o->bias_n + s * o->bias_s;
        r->bias1_len = o->bias_len;
    }
    if (o->sink) {
        r->sink = 1;
        r->sink_val = o->sink[h];
    } else if (o->smooth) {
        r->sink = 1;
        r->sink_val = 0;
    }
    return true;
}

/* Workspace: staged inputs/outputs, rotated q [B, Nq, S, H], present k/v
 * when not requested as outputs, slots. */
static size_t gqa_carve(int n_in, const sn_tensor *const *in, sn_tensor *const *out, int n_out,
                        const gqa_geom *g, carve *w, const float **fin, float **fout) {
    for (int i = 0; i < 17; i++)
        fin[i] = NULL;
    for (int i = 0; i < n_in && i < 17; i++)
        if (i != GQA_SEQLENS && i != GQA_TOTAL && i != GQA_POS && i != GQA_QSEQ &&
            sn_has_in(in, n_in, i))
            fin[i] = carve_in(w, in[i]);
    for (int i = 0; i < 3; i++)
        fout[i] = i < n_out && out[i] ? carve_out(w, out[i]) : NULL;
    int64_t Lc = g->Lc;
    if (!fout[1])
        fout[1] = carve_f(w, g->B * g->Nkv * Lc * g->H);
    if (!fout[2])
        fout[2] = carve_f(w, g->B * g->Nkv * Lc * g->H);
    fout[3] = carve_f(w, g->B * g->Nq * g->S * g->H); /* q in BNSH, rotated */
    fout[4] = carve_f(w, g->B * g->S * g->Nq * g->H); /* output in float */
    /* prompt rows: keys transposed, llm_attn_keys_t's layout */
    fout[5] = g->S > 1 ? carve_f(w, g->B * g->Nkv * g->H * (Lc + 8)) : NULL;
    return w->used;
}

/* Decode: the query heads of a key/value head (grp of them) in units of
 * at most LLM_ATTN_ROWS, as even as can be (8: 4 + 4, 6: 3 + 3, 5: 3 + 2),
 * each run by llm_attn_rows_run with one pass over the head's cache. */
static int64_t gqa_dec_unit(int64_t grp) {
    int64_t units = (grp + LLM_ATTN_ROWS - 1) / LLM_ATTN_ROWS;
    return units > 0 ? (grp + units - 1) / units : 1;
}

static int gqa_ws(const sn_node *node, int n_in, const sn_tensor *const *in, int n_out,
                  const sn_tensor *const *out, int n_threads, size_t *ws, sn_err *err) {
    (void)n_threads;
    gqa_geom g;
    SN_TRY(gqa_geom_of(node, n_in, in, &g, err));
    /* concrete shapes: present rows from output 1 when known */
    if (g.Lc < 0 && n_out > 1 && out[1])
        g.Lc = out[1]->dims[2];
    if (g.Lc < 0)
        g.Lc = g.Lp + g.S;
    carve w = {0};
    const float *fin[17];
    float *fout[6];
    /* sizing pass: tensors with NULL data are never read */
    gqa_carve(n_in, in, (sn_tensor *const *)out, n_out, &g, &w, fin, fout);
    /* prompt rows (keys transposed) score LLM_ATTN_ROWS rows at a time,
     * decode rows a unit of query heads (gqa_dec_unit) */
    int rows = g.S > 1 ? LLM_ATTN_ROWS : (int)gqa_dec_unit(g.Nkv > 0 ? g.Nq / g.Nkv : 1);
    *ws = w.used + ATTN_SLOTS * attn_slot_bytes(g.H, LLM_ATTN_SCORES(g.Lc), rows) + 64;
    return SNUG_OK;
}

int llm_gqa_prepare(sn_prep_ctx *c) {
    return gqa_ws(c->node, c->n_in, c->in, c->n_out, c->out, c->n_threads, &c->workspace, c->err);
}

size_t llm_gqa_estimate(const sn_infer_ctx *c) { return llm_estimate_with(c, gqa_ws); }

/* Staging of the new rows: q rotated into BNSH, k rotated and v copied into
 * present after the past (rows of a batch entry past its query length:
 * q only, at position 0 when out of the cache, its result unused). */
typedef struct gqa_stage {
    const gqa_geom *g;
    const gqa_run *o;
    const float *qsrc, *ksrc, *vsrc;
    int64_t qrs, krs, koff, voff;
    const int64_t *pos_ids;
    const float *cosc, *sinc;
    int64_t half, max_pos;
    int interleaved;
    sn_dtype qdt;
    float *qh, *pk, *pv;
    const sn_packed *packed; /* a packed run's sequences (gqa_pstage_rows), or NULL */
} gqa_stage;

/* Source row r at position pos: head h of q rotated into qd + h qstep (the
 * heads' rows qstep apart), and with kv, of k rotated and v copied into
 * kd + h kvstep and vd + h kvstep. */
static void gqa_stage_row(const gqa_stage *t, int64_t r, int64_t pos, float *qd, int64_t qstep, bool kv, float *kd,
                          float *vd, int64_t kvstep) {
    const gqa_geom *g = t->g;
    int64_t H = g->H;
    const float *cr = g->rot ? t->cosc + pos * t->half : NULL, *sr = g->rot ? t->sinc + pos * t->half : NULL;
    for (int64_t h = 0; h < g->Nq; h++) {
        const float *src = t->qsrc + r * t->qrs + h * H;
        float *dst = qd + h * qstep;
        if (g->rot) {
            llm_rope(src, dst, cr, sr, g->rot, H, t->interleaved);
            round_to(t->qdt, dst, g->rot);
        } else {
            memcpy(dst, src, (size_t)H * sizeof(float));
        }
    }
    for (int64_t h = 0; h < g->Nkv && kv; h++) {
        const float *ks = t->ksrc + r * t->krs + t->koff + h * H, *vs = t->vsrc + r * t->krs + t->voff + h * H;
        if (g->rot) {
            llm_rope(ks, kd + h * kvstep, cr, sr, g->rot, H, t->interleaved);
            round_to(t->qdt, kd + h * kvstep, g->rot);
        } else {
            memcpy(kd + h * kvstep, ks, (size_t)H * sizeof(float));
        }
        memcpy(vd + h * kvstep, vs, (size_t)H * sizeof(float));
    }
}

static void gqa_stage_rows(void *arg, int64_t r0, int64_t r1) {
    const gqa_stage *t = arg;
    const gqa_geom *g = t->g;
    int64_t S = g->S, Nq = g->Nq, Nkv = g->Nkv, H = g->H, Lc = g->Lc;
    for (int64_t r = r0; r < r1; r++) {
        int64_t b = r / S, s = r % S;
        int64_t T = gqa_T(t->o, b), Q = gqa_Q(t->o, b), P = T - Q;
        int64_t pos = t->pos_ids ? t->pos_ids[b * S + s] : P + s;
        if (g->rot && (pos < 0 || pos >= t->max_pos))
            pos = 0; /* a padding row (s >= Q; the others were checked) */
        gqa_stage_row(t, b * S + s, pos, t->qh + (b * Nq * S + s) * H, S * H, s < Q, t->pk + (b * Nkv * Lc + P + s) * H,
                      t->pv + (b * Nkv * Lc + P + s) * H, Lc * H);
    }
}

/* Attends B batch entries of o->S query rows each (q [B, Nq, S, H]) over
 * their keys and values (entry b's at kvb[b] of k and v, Lk rows a head;
 * kvb NULL: b) into y (BSNH); kt: room for the prompt rows' keys
 * transposed (NULL: decode rows, the query heads of a key/value head
 * together, which read its keys and values once: SmolLM2, three query heads
 * per key/value head, one pass over the cache per head instead of three). */
static void gqa_attend(sn_kctx *c, const gqa_geom *g, const gqa_run *o, int64_t B, const float *q, float *k, float *v,
                       int64_t Lk, float *y, float *kt, const int *kvb, carve *w) {
    int64_t Nq = g->Nq, Nkv = g->Nkv, H = g->H;
    float scale = sn_attr_float(c->node, "scale", 0.0f);
    attn_job j = {
        .B = B, .Nq = Nq, .Nkv = Nkv, .S = o->S, .H = H, .Hv = H, .q = q, .k = k, .v = v, .Lk = Lk, .y = y,
        .y_bsnh = true, .scale = scale != 0.0f ? scale : 1.0f / sqrtf((float)H),
        .softcap = sn_attr_float(c->node, "softcap", 0.0f), .setup = gqa_setup, .op = o,
        .n_scores = LLM_ATTN_SCORES(Lk), .rows = kt ? LLM_ATTN_ROWS : 1, .kt = kt, .kt_ld = Lk + 8, .kvb = kvb,
    };
    int64_t grp = Nq / Nkv;
    if (o->S == 1 && !kt && grp > 1) {
        j.unit = gqa_dec_unit(grp);
        j.rows = (int)j.unit;
    }
    for (int64_t b = 0; b < B && kt; b++)
        for (int64_t h = 0; h < Nkv; h++)
            llm_attn_keys_t(k + ((kvb ? kvb[b] : b) * Nkv + h) * Lk * H, gqa_T(o, b), H, kt + (b * Nkv + h) * H * (Lk + 8),
                            Lk + 8);
    attn_run_rows(&j, c->pool, w);
}

/* ---- packed runs (sn_packed) -------------------------------------------- */

/* Sequence i of a packed run holds rows [first[i], first[i + 1]). */
static int packed_seq_of(const sn_packed *p, int64_t t) {
    int lo = 0, hi = p->n_seq - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (p->first[mid] <= t)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* A packed run's rows staged: q rotated at the row's position into
 * sequence i's block [Nq, S_i, H] at qh + first[i] Nq H (the decode
 * sequences, last, together: [n, Nq, 1, H]), k rotated and v copied into
 * the slot's cache at that position. */
static void gqa_pstage_rows(void *arg, int64_t r0, int64_t r1) {
    const gqa_stage *t = arg;
    const sn_packed *p = t->packed;
    int64_t Nq = t->g->Nq, Nkv = t->g->Nkv, H = t->g->H;
    for (int64_t r = r0; r < r1; r++) {
        int i = packed_seq_of(p, r);
        int64_t s = r - p->first[i], Si = p->first[i + 1] - p->first[i], pos = p->past[i] + s;
        size_t kv = (size_t)((((int64_t)p->slot[i] * Nkv) * p->cap + pos) * H);
        gqa_stage_row(t, r, pos, t->qh + (p->first[i] * Nq + s) * H, Si * H, true, t->pk + kv, t->pv + kv, p->cap * H);
    }
}

/* Sequences [i0, i1) of a packed run, all of one length S (one token: the
 * decode sequences together; a prompt chunk alone), attended as their own
 * run would: the job's batch entry b is sequence i0 + b, its keys and
 * values the slot's. */
static void gqa_packed_job(sn_kctx *c, const gqa_geom *g, const sn_packed *p, int i0, int i1, const float *qh,
                           float *pk, float *pv, float *yf, float *kt, carve w) {
    int64_t S = p->first[i0 + 1] - p->first[i0], off = p->first[i0] * g->Nq * g->H;
    int32_t seqlens[SN_PACKED_MAX_SEQ];
    for (int i = i0; i < i1; i++)
        seqlens[i - i0] = (int32_t)(p->past[i] + S - 1);
    gqa_run o = {.seqlens = seqlens, .S = S, .causal = sn_attr_int(c->node, "causal", 1) != 0,
                 .window = sn_attr_int(c->node, "local_window_size", -1),
                 .smooth = sn_attr_int(c->node, "smooth_softmax", 0) != 0};
    gqa_attend(c, g, &o, i1 - i0, qh + off, pk, pv, p->cap, yf + off, S > 1 ? kt : NULL, p->slot + i0, &w);
}

/* A packed run (c->packed): the rows staged into their slots, then the
 * decode sequences attended together and each prompt chunk alone. Needs
 * float32, a cache shared between past and present, rows [1, T]. */
static int gqa_run_packed(sn_kctx *c, const gqa_geom *g) {
    const sn_packed *p = c->packed;
    const sn_tensor *const *in = c->in;
    int64_t T = p->first[p->n_seq], H = g->H, Nq = g->Nq, Nkv = g->Nkv;
    if (in[GQA_Q]->dtype != SN_F32 || c->n_out < 3 || !c->out[1] || !c->out[2] || !sn_has_in(in, c->n_in, GQA_PK))
        return KFAIL(SNUG_ERR_UNSUPPORTED, "a packed run needs float32 rows and past/present key and value");
    if (g->B != 1 || g->S != T || p->n_seq < 1 || p->n_seq > SN_PACKED_MAX_SEQ || g->Lp != p->cap ||
        sn_has_in(in, c->n_in, GQA_BIAS) || sn_has_in(in, c->n_in, GQA_SINK) || sn_has_in(in, c->n_in, GQA_POS))
        return KFAIL(SNUG_ERR_INVALID_ARG, "packed run of %d sequences, %lld rows: the node is [%lld, %lld] with %lld "
                     "past positions (%lld a slot), or has an attention bias, head sink or position ids",
                     p->n_seq, (long long)T, (long long)g->B, (long long)g->S, (long long)g->Lp, (long long)p->cap);
    float *pk = c->out[1]->data, *pv = c->out[2]->data;
    if (in[GQA_PK]->data != pk || in[GQA_PV]->data != pv)
        return KFAIL(SNUG_ERR_INVALID_ARG, "a packed run needs past and present in one buffer");
    int64_t max_pos = g->rot ? in[GQA_COS]->dims[0] : INT64_MAX;
    for (int i = 0; i < p->n_seq; i++) {
        int64_t Si = p->first[i + 1] - p->first[i];
        if (p->slot[i] < 0 || p->slot[i] >= p->n_slots || Si < 1 || p->past[i] < 0 || p->past[i] + Si > p->cap ||
            p->past[i] + Si > max_pos || (i > 0 && Si > 1 && p->first[i] - p->first[i - 1] == 1))
            return KFAIL(SNUG_ERR_INVALID_ARG, "packed sequence %d: slot %d (of %d), %lld + %lld positions (of %lld, "
                         "cos_cache %lld), one-token sequences last", i, p->slot[i], p->n_slots,
                         (long long)p->past[i], (long long)Si, (long long)p->cap, (long long)max_pos);
    }
    carve w = {c->ws, 0};
    const float *fin[17];
    float *fout[6];
    gqa_carve(c->n_in, in, c->out, c->n_out, g, &w, fin, fout);
    float *qh = fout[3], *yf = c->out[0]->data;
    gqa_stage st = {.g = g, .packed = p, .qsrc = fin[GQA_Q], .qrs = g->D, .cosc = fin[GQA_COS], .sinc = fin[GQA_SIN],
                    .half = g->rot / 2, .interleaved = (int)sn_attr_int(c->node, "rotary_interleaved", 0),
                    .qdt = in[GQA_Q]->dtype, .qh = qh, .pk = pk, .pv = pv};
    if (g->packed) {
        st.ksrc = st.vsrc = fin[GQA_Q];
        st.krs = g->D;
        st.koff = Nq * H;
        st.voff = Nq * H + Nkv * H;
    } else {
        st.ksrc = fin[GQA_K];
        st.vsrc = fin[GQA_V];
        st.krs = Nkv * H;
    }
    sn_pool_for(c->pool, T, 8, gqa_pstage_rows, &st);
    int d0 = p->n_seq; /* the decode sequences (one token each, last), together */
    while (d0 > 0 && p->first[d0] - p->first[d0 - 1] == 1)
        d0--;
    for (int i = 0; i < d0; i++)
        gqa_packed_job(c, g, p, i, i + 1, qh, pk, pv, yf, fout[5], w);
    if (d0 < p->n_seq)
        gqa_packed_job(c, g, p, d0, p->n_seq, qh, pk, pv, yf, fout[5], w);
    return SNUG_OK;
}

int llm_gqa_run(sn_kctx *c) {
    gqa_geom g;
    SN_TRY(gqa_geom_of(c->node, c->n_in, c->in, &g, c->err));
    if (c->packed)
        return gqa_run_packed(c, &g);
    const sn_tensor *const *in = c->in;
    int64_t B = g.B, S = g.S, Nq = g.Nq, Nkv = g.Nkv, H = g.H, Lc = g.Lc, Lp = g.Lp;
    if (sn_tensor_numel(in[GQA_SEQLENS]) != B)
        return KFAIL(SNUG_ERR_SHAPE, "seqlens_k must have batch_size values");
    gqa_run o = {0};
    o.seqlens = in[GQA_SEQLENS]->data;
    o.S = S;
    if (sn_has_in(in, c->n_in, GQA_QSEQ)) {
        if (in[GQA_QSEQ]->dtype != SN_I32 || sn_tensor_numel(in[GQA_QSEQ]) != B)
            return KFAIL(SNUG_ERR_SHAPE, "query_seqlens must be int32 [batch_size]");
        o.qseq = in[GQA_QSEQ]->data;
    }
    for (int64_t b = 0; b < B; b++) {
        int64_t T = gqa_T(&o, b), Q = gqa_Q(&o, b), P = T - Q;
        if (T < 1 || T > Lc || Q < 0 || Q > S || P < 0)
            return KFAIL(SNUG_ERR_INVALID_ARG,
                         "seqlens_k[%lld]=%d inconsistent with sequence_length %lld and "
                         "present length %lld", (long long)b, o.seqlens[b], (long long)S,
                         (long long)Lc);
        if (P > Lp)
            return KFAIL(SNUG_ERR_INVALID_ARG,
                         "batch %lld needs %lld past tokens, past_key holds %lld", (long long)b,
                         (long long)P, (long long)Lp);
    }
    if ((c->n_out < 3 || !c->out[1] || !c->out[2]) && Lc > Lp + S)
        return KFAIL(SNUG_ERR_UNSUPPORTED,
                     "without present outputs the total length may not exceed past + new");
    carve w = {c->ws, 0};
    const float *fin[17];
    float *fout[6];
    gqa_carve(c->n_in, in, c->out, c->n_out, &g, &w, fin, fout);
    float *pk = fout[1], *pv = fout[2], *qh = fout[3], *yf = c->out[0]->dtype == SN_F32
                                                               ? (float *)c->out[0]->data
                                                               : fout[4];
    /* past and present in one buffer (a KV cache shared between steps) */
    bool shared = Lp > 0 && fin[GQA_PK] == pk && fin[GQA_PV] == pv;
    /* new q, k, v rows and their row strides */
    const float *qsrc = fin[GQA_Q], *ksrc, *vsrc;
    int64_t qrs = g.D, krs, koff = 0, voff = 0;
    if (g.packed) {
        ksrc = vsrc = qsrc;
        krs = g.D;
        koff = Nq * H;
        voff = Nq * H + Nkv * H;
    } else {
        ksrc = fin[GQA_K];
        vsrc = fin[GQA_V];
        krs = Nkv * H;
    }
    int interleaved = (int)sn_attr_int(c->node, "rotary_interleaved", 0);
    const int64_t *pos_ids = sn_has_in(in, c->n_in, GQA_POS) ? in[GQA_POS]->data : NULL;
    if (pos_ids && sn_tensor_numel(in[GQA_POS]) < B * S)
        return KFAIL(SNUG_ERR_SHAPE, "position_ids must be (batch_size, sequence_length)");
    int64_t half = g.rot / 2, max_pos = g.rot ? in[GQA_COS]->dims[0] : 0;
    const float *cosc = fin[GQA_COS], *sinc = fin[GQA_SIN];
    /* q -> BNSH with rotary; present = past[0:P] ++ new k/v[0:Q], zero beyond:
     * positions checked first, then the rows staged in parallel */
    for (int64_t b = 0; b < B && g.rot; b++) {
        int64_t T = gqa_T(&o, b), Q = gqa_Q(&o, b), P = T - Q;
        for (int64_t s = 0; s < Q; s++) {
            int64_t pos = pos_ids ? pos_ids[b * S + s] : P + s;
            if (pos < 0 || pos >= max_pos)
                return KFAIL(SNUG_ERR_INVALID_ARG, "position %lld outside cos_cache (%lld rows)",
                             (long long)pos, (long long)max_pos);
        }
    }
    gqa_stage st = {.g = &g, .o = &o, .qsrc = qsrc, .ksrc = ksrc, .vsrc = vsrc, .qrs = qrs, .krs = krs,
                    .koff = koff, .voff = voff, .pos_ids = pos_ids, .cosc = cosc, .sinc = sinc,
                    .half = half, .max_pos = max_pos, .interleaved = interleaved,
                    .qdt = in[GQA_Q]->dtype, .qh = qh, .pk = pk, .pv = pv};
    /* a decode step's one row stays on this thread */
    sn_pool_for(B * S > 1 ? c->pool : NULL, B * S, 8, gqa_stage_rows, &st);
    for (int64_t b = 0; b < B; b++) {
        int64_t T = gqa_T(&o, b), Q = gqa_Q(&o, b), P = T - Q;
        for (int64_t h = 0; h < Nkv; h++) {
            size_t pbytes = (size_t)(P * H) * sizeof(float);
            float *kd = pk + (b * Nkv + h) * Lc * H, *vd = pv + (b * Nkv + h) * Lc * H;
            if (P > 0) {
                /* past and present may be one buffer (shared KV cache) */
                const float *ks = fin[GQA_PK] + (b * Nkv + h) * Lp * H;
                const float *vs = fin[GQA_PV] + (b * Nkv + h) * Lp * H;
                if (ks != kd)
                    memmove(kd, ks, pbytes);
                if (vs != vd)
                    memmove(vd, vs, pbytes);
            }
            if (!shared) { /* a shared cache keeps its rows beyond T: nobody reads them */
                memset(kd + T * H, 0, (size_t)((Lc - T) * H) * sizeof(float));
                memset(vd + T * H, 0, (size_t)((Lc - T) * H) * sizeof(float));
            }
        }
    }
    o.causal = sn_attr_int(c->node, "causal", 1) != 0;
    o.window = sn_attr_int(c->node, "local_window_size", -1);
    o.smooth = sn_attr_int(c->node, "smooth_softmax", 0) != 0;
    if (sn_has_in(in, c->n_in, GQA_SINK)) {
        if (sn_tensor_numel(in[GQA_SINK]) != Nq)
            return KFAIL(SNUG_ERR_SHAPE, "head_sink must have num_heads values");
        o.sink = fin[GQA_SINK];
    }
    if (sn_has_in(in, c->n_in, GQA_BIAS)) {
        const sn_tensor *ab = in[GQA_BIAS];
        if (ab->rank != 4 || (ab->dims[0] != 1 && ab->dims[0] != B) ||
            (ab->dims[1] != 1 && ab->dims[1] != Nq) || ab->dims[2] != S ||
            ab->dims[3] < g.total)
            return KFAIL(SNUG_ERR_SHAPE,
                         "attention_bias must be (batch or 1, num_heads or 1, seq, total_seq)");
        o.bias = fin[GQA_BIAS];
        o.bias_len = ab->dims[3];
        o.bias_s = ab->dims[3];
        o.bias_n = ab->dims[1] == 1 ? 0 : S * o.bias_s;
        o.bias_b = ab->dims[0] == 1 ? 0 : ab->dims[1] * S * o.bias_s;
    }
    gqa_attend(c, &g, &o, B, qh, pk, pv, Lc, yf, fout[5], NULL, &w);
    flush_out(c->out[0], yf);
    for (int i = 1; i < 3 && i < c->n_out; i++)
        flush_out(c->out[i], fout[i]);
    return SNUG_OK;
}

/* ======================================================================
 * MultiHeadAttention (com.microsoft)
 * ====================================================================== */

enum { MHA_Q, MHA_K, MHA_V, MHA_BIAS, MHA_MASK, MHA_ABIAS, MHA_PK, MHA_PV, MHA_PLEN, MHA_CACHE };

typedef struct mha_geom {
    int64_t B, S, L, N, H, Hv, P, T;
    int qkv;      /* 0 separate 3-D, 1 packed QKV (query 5-D), 2 packed KV (key 5-D), 3 BNSH key/value */
} mha_geom;

static int mha_geom_of(const sn_node *node, int n_in, const sn_tensor *const *in, mha_geom *g,
                       sn_err *err) {
    memset(g, 0, sizeof *g);
    SN_TRY(sn_check_in(node, err, n_in, in, MHA_Q, "query", SN_IN_REQUIRED, SN_DT_ANY, SN_RANK_ANY));
    uint64_t qt = SN_DT(in[MHA_Q]->dtype);
    SN_TRY(sn_check_in(node, err, n_in, in, MHA_K, "key", SN_IN_OPTIONAL, qt, SN_RANK_ANY));
    SN_TRY(sn_check_in(node, err, n_in, in, MHA_V, "value", SN_IN_OPTIONAL, qt, SN_RANK_ANY));
    SN_TRY(sn_check_in(node, err, n_in, in, MHA_BIAS, "bias", SN_IN_OPTIONAL, qt, 1));
    SN_TRY(sn_check_in(node, err, n_in, in, MHA_MASK, "key_padding_mask", SN_IN_OPTIONAL, SN_DT(SN_I32),
                       SN_RANK_ANY));
    SN_TRY(sn_check_in(node, err, n_in, in, MHA_ABIAS, "attention_bias", SN_IN_OPTIONAL, qt, 4));
    SN_TRY(sn_check_in(node, err, n_in, in, MHA_PK, "past_key", SN_IN_OPTIONAL, qt, 4));
    SN_TRY(sn_check_in(node, err, n_in, in, MHA_PV, "past_value", SN_IN_OPTIONAL, qt, 4));
    const sn_tensor *q = in[MHA_Q];
    g->N = sn_attr_int(node, "num_heads", 0);
    if (g->N <= 0)
        return sn_kfail(err, node, SNUG_ERR_INVALID_ARG, "num_heads must be positive");
    if (!sn_dtype_is_real(q->dtype) || q->dtype == SN_F64)
        return sn_kfail(err, node, SNUG_ERR_TYPE, "query type %s not supported",
                        sn_dtype_name(q->dtype));
    if (sn_has_in(in, n_in, MHA_PLEN) || sn_has_in(in, n_in, MHA_CACHE))
        return sn_kfail(err, node, SNUG_ERR_UNSUPPORTED,
                        "past_sequence_length / cache_indirection are not supported");
    bool hk = sn_has_in(in, n_in, MHA_K), hv = sn_has_in(in, n_in, MHA_V);
    g->B = q->dims[0];
    g->S = q->dims[1];
    if (!hk) {
        if (q->rank != 5 || q->dims[3] != 3 || q->dims[2] != g->N)
            return sn_kfail(err, node, SNUG_ERR_SHAPE,
                            "without key, query must be packed QKV (batch, seq, heads, 3, head)");
        g->qkv = 1;
        g->L = g->S;
        g->H = g->Hv = q->dims[4];
    } else {
        if (q->rank != 3)
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "query must be 3-D");
        if (q->dims[2] % g->N)
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "hidden size not divisible by num_heads");
        g->H = q->dims[2] / g->N;
        const sn_tensor *k = in[MHA_K];
        if (k->dtype != q->dtype)
            return sn_kfail(err, node, SNUG_ERR_TYPE, "query and key types differ");
        if (k->rank == 5) {
            if (hv || k->dims[3] != 2 || k->dims[2] != g->N || k->dims[4] != g->H)
                return sn_kfail(err, node, SNUG_ERR_SHAPE,
                                "packed KV must be (batch, kv_seq, heads, 2, head) without value");
            g->qkv = 2;
            g->L = k->dims[1];
            g->Hv = g->H;
        } else if (k->rank == 3) {
            if (!hv || in[MHA_V]->rank != 3 || in[MHA_V]->dtype != q->dtype)
                return sn_kfail(err, node, SNUG_ERR_SHAPE, "value must be 3-D like key");
            if (k->dims[2] != g->N * g->H || in[MHA_V]->dims[2] % g->N ||
                in[MHA_V]->dims[1] != k->dims[1])
                return sn_kfail(err, node, SNUG_ERR_SHAPE, "key/value shapes do not match");
            g->L = k->dims[1];
            g->Hv = in[MHA_V]->dims[2] / g->N;
        } else if (k->rank == 4) {
            if (!hv || in[MHA_V]->rank != 4 || k->dims[1] != g->N || k->dims[3] != g->H ||
                in[MHA_V]->dims[1] != g->N || in[MHA_V]->dims[2] != k->dims[2])
                return sn_kfail(err, node, SNUG_ERR_SHAPE,
                                "BNSH key/value must be (batch, heads, kv_seq, head)");
            if (sn_has_in(in, n_in, MHA_PK))
                return sn_kfail(err, node, SNUG_ERR_INVALID_ARG,
                                "past_key is not allowed with BNSH key");
            g->qkv = 3;
            g->L = k->dims[2];
            g->Hv = in[MHA_V]->dims[3];
        } else {
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "key must be 3-D, 4-D or 5-D");
        }
    }
    if (sn_has_in(in, n_in, MHA_PK) != sn_has_in(in, n_in, MHA_PV))
        return sn_kfail(err, node, SNUG_ERR_INVALID_ARG,
                        "past_key and past_value must be given together");
    if (sn_has_in(in, n_in, MHA_PK)) {
        const sn_tensor *pk = in[MHA_PK], *pv = in[MHA_PV];
        if (pk->rank != 4 || pv->rank != 4 || pk->dims[1] != g->N || pk->dims[3] != g->H ||
            pv->dims[3] != g->Hv || pv->dims[2] != pk->dims[2])
            return sn_kfail(err, node, SNUG_ERR_SHAPE,
                            "past_key/past_value must be (batch, heads, past_len, head)");
        g->P = pk->dims[2];
    }
    if (sn_has_in(in, n_in, MHA_BIAS) && g->qkv == 3)
        return sn_kfail(err, node, SNUG_ERR_UNSUPPORTED, "bias with BNSH key is not supported");
    g->T = g->P + g->L;
    return SNUG_OK;
}

int llm_mha_infer(sn_infer_ctx *c) {
    const sn_tensor *q = c->in[MHA_Q];
    for (int i = 0; i < 3; i++)
        if (sn_has_in(c->in, c->n_in, i) && c->in[i]->rank == SN_RANK_UNKNOWN) {
            sn_set_out(c->out[0], q->dtype, SN_RANK_UNKNOWN, NULL);
            return SNUG_OK;
        }
    mha_geom g;
    SN_TRY(mha_geom_of(c->node, c->n_in, c->in, &g, c->err));
    int64_t od[3] = {g.B, g.S, g.N * g.Hv};
    sn_set_out(c->out[0], q->dtype, 3, od);
    int64_t kd[4] = {g.B, g.N, g.T, g.H}, vd[4] = {g.B, g.N, g.T, g.Hv};
    if (c->n_out > 1)
        sn_set_out(c->out[1], q->dtype, 4, kd);
    if (c->n_out > 2)
        sn_set_out(c->out[2], q->dtype, 4, vd);
    if (c->n_out > 3 && c->out[3])
        return KFAIL(SNUG_ERR_UNSUPPORTED, "the qk output is not supported");
    return SNUG_OK;
}

typedef struct mha_run {
    const float *mask;    /* additive [B, Sm, T] (Sm = S or 1) */
    int64_t mask_s;       /* row stride (0 when one row per batch) */
    const float *ab;
    int64_t ab_b, ab_n, ab_s;
    bool causal;
    int64_t P, T;
} mha_run;

static bool mha_setup(const attn_job *j, int64_t b, int64_t h, int64_t s, llm_attn_row *r) {
    const mha_run *o = j->op;
    if (o->causal)
        r->hi = r->mask_hi = sn_imin(o->T, o->P + s + 1);
    if (o->mask) {
        r->bias1 = o->mask + (b * (o->mask_s ? j->S : 1) + (o->mask_s ? s : 0)) * o->T;
        r->bias1_len = o->T;
    }
    if (o->ab)
        r->bias2 = o->ab + b * o->ab_b + h * o->ab_n + s * o->ab_s;
    return true;
}

static void mha_carve(const sn_tensor *const *in, int n_in, sn_tensor *const *out, int n_out,
                      const mha_geom *g, carve *w, const float **fin, float **fbuf) {
    for (int i = 0; i < 8; i++)
        fin[i] = i != MHA_MASK && sn_has_in(in, n_in, i) ? carve_in(w, in[i]) : NULL;
    float *pk = n_out > 1 && out[1] ? carve_out(w, out[1]) : NULL;
    float *pv = n_out > 2 && out[2] ? carve_out(w, out[2]) : NULL;
    fbuf[0] = pk ? pk : carve_f(w, g->B * g->N * g->T * g->H);
    fbuf[1] = pv ? pv : carve_f(w, g->B * g->N * g->T * g->Hv);
    fbuf[2] = carve_f(w, g->B * g->N * g->S * g->H);            /* q BNSH */
    fbuf[3] = carve_out(w, out[0]);                              /* y */
    fbuf[4] = sn_has_in(in, n_in, MHA_MASK) ? carve_f(w, g->B * g->S * g->T) : NULL;
}

static int mha_ws(const sn_node *node, int n_in, const sn_tensor *const *in, int n_out,
                  const sn_tensor *const *out, int n_threads, size_t *ws, sn_err *err) {
    (void)n_threads;
    mha_geom g;
    SN_TRY(mha_geom_of(node, n_in, in, &g, err));
    carve w = {0};
    const float *fin[8];
    float *fb[5];
    mha_carve(in, n_in, (sn_tensor *const *)out, n_out, &g, &w, fin, fb);
    *ws = w.used + ATTN_SLOTS * attn_slot_bytes(g.Hv, 0, 1) + 64;
    return SNUG_OK;
}

int llm_mha_prepare(sn_prep_ctx *c) {
    return mha_ws(c->node, c->n_in, c->in, c->n_out, c->out, c->n_threads, &c->workspace, c->err);
}

size_t llm_mha_estimate(const sn_infer_ctx *c) { return llm_estimate_with(c, mha_ws); }

int llm_mha_run(sn_kctx *c) {
    mha_geom g;
    SN_TRY(mha_geom_of(c->node, c->n_in, c->in, &g, c->err));
    const sn_tensor *const *in = c->in;
    carve w = {c->ws, 0};
    const float *fin[8];
    float *fb[5];
    mha_carve(in, c->n_in, c->out, c->n_out, &g, &w, fin, fb);
    float *kh = fb[0], *vh = fb[1], *qh = fb[2], *y = fb[3];
    int64_t B = g.B, S = g.S, L = g.L, N = g.N, H = g.H, Hv = g.Hv, P = g.P, T = g.T;
    const float *bias = fin[MHA_BIAS];
    if (bias && sn_tensor_numel(in[MHA_BIAS]) != 2 * N * H + N * Hv)
        return KFAIL(SNUG_ERR_SHAPE, "bias must have 2*hidden + v_hidden values");
    const float *bq = bias, *bk = bias ? bias + N * H : NULL, *bv = bias ? bias + 2 * N * H : NULL;
    /* past rows */
    for (int64_t b = 0; b < B && P > 0; b++)
        for (int64_t n = 0; n < N; n++) {
            memmove(kh + ((b * N + n) * T) * H, fin[MHA_PK] + (b * N + n) * P * H,
                    (size_t)(P * H) * sizeof(float));
            memmove(vh + ((b * N + n) * T) * Hv, fin[MHA_PV] + (b * N + n) * P * Hv,
                    (size_t)(P * Hv) * sizeof(float));
        }
    const float *q = fin[MHA_Q];
    switch (g.qkv) {
    case 0:
        to_bnsh(q, B, S, N, H, N * H, 0, bq, qh, S, 0);
        to_bnsh(fin[MHA_K], B, L, N, H, N * H, 0, bk, kh, T, P);
        to_bnsh(fin[MHA_V], B, L, N, Hv, N * Hv, 0, bv, vh, T, P);
        break;
    case 1: /* (B, S, N, 3, H) */
        for (int64_t b = 0; b < B; b++)
            for (int64_t s = 0; s < S; s++)
                for (int64_t n = 0; n < N; n++)
                    for (int64_t t = 0; t < 3; t++) {
                        const float *src = q + (((b * S + s) * N + n) * 3 + t) * H;
                        float *dst = t == 0 ? qh + ((b * N + n) * S + s) * H
                                   : t == 1 ? kh + ((b * N + n) * T + P + s) * H
                                            : vh + ((b * N + n) * T + P + s) * H;
                        const float *bb = t == 0 ? bq : t == 1 ? bk : bv;
                        for (int64_t i = 0; i < H; i++)
                            dst[i] = src[i] + (bb ? bb[n * H + i] : 0.0f);
                    }
        break;
    case 2: /* (B, L, N, 2, H) */
        to_bnsh(q, B, S, N, H, N * H, 0, bq, qh, S, 0);
        for (int64_t b = 0; b < B; b++)
            for (int64_t l = 0; l < L; l++)
                for (int64_t n = 0; n < N; n++)
                    for (int64_t t = 0; t < 2; t++) {
                        const float *src = fin[MHA_K] + (((b * L + l) * N + n) * 2 + t) * H;
                        float *dst = (t == 0 ? kh : vh) + ((b * N + n) * T + P + l) * H;
                        const float *bb = t == 0 ? bk : bv;
                        for (int64_t i = 0; i < H; i++)
                            dst[i] = src[i] + (bb ? bb[n * H + i] : 0.0f);
                    }
        break;
    default: /* BNSH key/value */
        to_bnsh(q, B, S, N, H, N * H, 0, bq, qh, S, 0);
        memmove(kh, fin[MHA_K], (size_t)(B * N * L * H) * sizeof(float));
        memmove(vh, fin[MHA_V], (size_t)(B * N * L * Hv) * sizeof(float));
        break;
    }
    mha_run o = {.causal = sn_attr_int(c->node, "unidirectional", 0) != 0, .P = P, .T = T};
    float mfv = sn_attr_float(c->node, "mask_filter_value", -10000.0f);
    if (sn_has_in(in, c->n_in, MHA_MASK)) {
        const sn_tensor *m = in[MHA_MASK];
        if (m->dtype != SN_I32)
            return KFAIL(SNUG_ERR_TYPE, "key_padding_mask must be int32");
        const int32_t *md = m->data;
        float *mb = fb[4];
        if (m->rank == 1 && m->dims[0] == B) {
            for (int64_t b = 0; b < B; b++)
                for (int64_t t = 0; t < T; t++)
                    mb[b * T + t] = t < md[b] ? 0.0f : mfv;
            o.mask_s = 0;
        } else if (m->rank == 2 && m->dims[0] == B && (m->dims[1] == T || m->dims[1] == L)) {
            int64_t ml = m->dims[1];
            for (int64_t b = 0; b < B; b++)
                for (int64_t t = 0; t < T; t++) {
                    /* a (batch, kv_seq) mask covers the newest keys */
                    int64_t mi = t - (T - ml);
                    mb[b * T + t] = mi < 0 || md[b * ml + mi] ? 0.0f : mfv;
                }
            o.mask_s = 0;
        } else if (m->rank == 3 && m->dims[0] == B && m->dims[1] == S && m->dims[2] == T) {
            for (int64_t i = 0; i < B * S * T; i++)
                mb[i] = md[i] ? 0.0f : mfv;
            o.mask_s = 1;
        } else {
            return KFAIL(SNUG_ERR_UNSUPPORTED, "key_padding_mask shape not supported");
        }
        o.mask = mb;
    }
    if (sn_has_in(in, c->n_in, MHA_ABIAS)) {
        const sn_tensor *ab = in[MHA_ABIAS];
        if (ab->rank != 4 || (ab->dims[0] != 1 && ab->dims[0] != B) ||
            (ab->dims[1] != 1 && ab->dims[1] != N) || ab->dims[2] != S || ab->dims[3] != T)
            return KFAIL(SNUG_ERR_SHAPE,
                         "attention_bias must be (batch or 1, heads or 1, seq, total_seq)");
        o.ab = fin[MHA_ABIAS];
        o.ab_s = T;
        o.ab_n = ab->dims[1] == 1 ? 0 : S * T;
        o.ab_b = ab->dims[0] == 1 ? 0 : ab->dims[1] * S * T;
    }
    float scale = sn_attr_float(c->node, "scale", 0.0f);
    attn_job j = {
        .B = B, .Nq = N, .Nkv = N, .S = S, .H = H, .Hv = Hv, .q = qh, .k = kh, .v = vh, .Lk = T,
        .y = y, .y_bsnh = true, .scale = scale != 0.0f ? scale : 1.0f / sqrtf((float)H),
        .setup = mha_setup, .op = &o,
    };
    attn_run_rows(&j, c->pool, &w);
    flush_out(c->out[0], y);
    for (int i = 1; i < 3 && i < c->n_out; i++)
        flush_out(c->out[i], fb[i - 1]);
    return SNUG_OK;
}

/* ======================================================================
 * Attention (ONNX opset 23+)
 * ====================================================================== */

enum { SD_Q, SD_K, SD_V, SD_MASK, SD_PK, SD_PV, SD_NONPAD };

typedef struct sd_geom {
    int64_t B, Nq, Nkv, S, L, P, T, H, Hv;
    bool three_d;
} sd_geom;

static int sd_geom_of(const sn_node *node, int n_in, const sn_tensor *const *in, sd_geom *g,
                      sn_err *err) {
    memset(g, 0, sizeof *g);
    SN_TRY(sn_check_in(node, err, n_in, in, SD_Q, "Q", SN_IN_REQUIRED, SN_DT_ANY, SN_RANK_ANY));
    SN_TRY(sn_check_in(node, err, n_in, in, SD_K, "K", SN_IN_REQUIRED, SN_DT_ANY, SN_RANK_ANY));
    SN_TRY(sn_check_in(node, err, n_in, in, SD_V, "V", SN_IN_REQUIRED, SN_DT_ANY, SN_RANK_ANY));
    SN_TRY(sn_check_in(node, err, n_in, in, SD_PK, "past_key", SN_IN_OPTIONAL, SN_DT_ANY, 4));
    SN_TRY(sn_check_in(node, err, n_in, in, SD_PV, "past_value", SN_IN_OPTIONAL, SN_DT_ANY, 4));
    SN_TRY(sn_check_in(node, err, n_in, in, SD_NONPAD, "nonpad_kv_seqlen", SN_IN_OPTIONAL, SN_DT(SN_I64), 1));
    const sn_tensor *q = in[SD_Q], *k = in[SD_K], *v = in[SD_V];
    if (!sn_dtype_is_real(q->dtype) || k->dtype != q->dtype || v->dtype != q->dtype)
        return sn_kfail(err, node, SNUG_ERR_TYPE, "Q, K, V must share one float type");
    if (q->rank != k->rank || q->rank != v->rank || (q->rank != 3 && q->rank != 4))
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "Q, K, V must all be 3-D or all 4-D");
    g->three_d = q->rank == 3;
    g->B = q->dims[0];
    if (g->three_d) {
        g->Nq = sn_attr_int(node, "q_num_heads", 0);
        g->Nkv = sn_attr_int(node, "kv_num_heads", 0);
        if (g->Nq <= 0 || g->Nkv <= 0)
            return sn_kfail(err, node, SNUG_ERR_INVALID_ARG,
                            "3-D inputs need q_num_heads and kv_num_heads");
        g->S = q->dims[1];
        g->L = k->dims[1];
        if (q->dims[2] % g->Nq || k->dims[2] % g->Nkv || v->dims[2] % g->Nkv)
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "hidden sizes not divisible by head counts");
        g->H = q->dims[2] / g->Nq;
        if (k->dims[2] / g->Nkv != g->H)
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "Q and K head sizes differ");
        g->Hv = v->dims[2] / g->Nkv;
        if (v->dims[1] != g->L)
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "K and V sequence lengths differ");
    } else {
        g->Nq = q->dims[1];
        g->Nkv = k->dims[1];
        g->S = q->dims[2];
        g->L = k->dims[2];
        g->H = q->dims[3];
        g->Hv = v->dims[3];
        if (k->dims[3] != g->H || v->dims[1] != g->Nkv || v->dims[2] != g->L)
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "Q, K, V shapes do not match");
    }
    if (g->Nkv <= 0 || g->Nq % g->Nkv)
        return sn_kfail(err, node, SNUG_ERR_SHAPE,
                        "q heads %lld must be a multiple of kv heads %lld", (long long)g->Nq,
                        (long long)g->Nkv);
    if (k->dims[0] != g->B || v->dims[0] != g->B)
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "batch sizes differ");
    if (sn_has_in(in, n_in, SD_PK) != sn_has_in(in, n_in, SD_PV))
        return sn_kfail(err, node, SNUG_ERR_INVALID_ARG,
                        "past_key and past_value must be given together");
    if (sn_has_in(in, n_in, SD_PK)) {
        const sn_tensor *pk = in[SD_PK], *pv = in[SD_PV];
        if (pk->rank != 4 || pv->rank != 4 || pk->dims[0] != g->B || pk->dims[1] != g->Nkv ||
            pk->dims[3] != g->H || pv->dims[1] != g->Nkv || pv->dims[2] != pk->dims[2] ||
            pv->dims[3] != g->Hv || pk->dtype != q->dtype || pv->dtype != q->dtype)
            return sn_kfail(err, node, SNUG_ERR_SHAPE,
                            "past_key/past_value must be (batch, kv_heads, past, head)");
        g->P = pk->dims[2];
    }
    if (sn_has_in(in, n_in, SD_NONPAD) && sn_has_in(in, n_in, SD_PK))
        return sn_kfail(err, node, SNUG_ERR_INVALID_ARG,
                        "nonpad_kv_seqlen cannot be combined with past_key");
    g->T = g->P + g->L;
    if (sn_has_in(in, n_in, SD_MASK)) {
        const sn_tensor *m = in[SD_MASK];
        if (m->dtype != SN_BOOL && m->dtype != q->dtype)
            return sn_kfail(err, node, SNUG_ERR_TYPE, "attn_mask must be bool or Q's type");
        if (m->rank < 1 || m->rank > 4)
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "attn_mask rank must be 1..4");
        int64_t want[4] = {g->B, g->Nq, g->S, g->T};
        for (int i = 0; i < m->rank - 1; i++) {
            int64_t d = m->dims[m->rank - 1 - 1 - i], w = want[2 - i];
            if (d >= 0 && w >= 0 && d != 1 && d != w)
                return sn_kfail(err, node, SNUG_ERR_SHAPE,
                                "attn_mask is not broadcastable to (B, heads, S, T)");
        }
        int64_t mt = m->dims[m->rank - 1];
        if (mt >= 0 && g->T >= 0 && mt > g->T)
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "attn_mask is longer than the keys");
    }
    return SNUG_OK;
}

int llm_sdpa_infer(sn_infer_ctx *c) {
    const sn_tensor *q = c->in[SD_Q];
    for (int i = 0; i < 3; i++)
        if (c->in[i]->rank == SN_RANK_UNKNOWN) {
            sn_set_out(c->out[0], q->dtype, SN_RANK_UNKNOWN, NULL);
            return SNUG_OK;
        }
    sd_geom g;
    SN_TRY(sd_geom_of(c->node, c->n_in, c->in, &g, c->err));
    if (g.three_d) {
        int64_t d[3] = {g.B, g.S, g.Nq * g.Hv};
        sn_set_out(c->out[0], q->dtype, 3, d);
    } else {
        int64_t d[4] = {g.B, g.Nq, g.S, g.Hv};
        sn_set_out(c->out[0], q->dtype, 4, d);
    }
    int64_t kd[4] = {g.B, g.Nkv, g.T, g.H}, vd[4] = {g.B, g.Nkv, g.T, g.Hv};
    int64_t qd[4] = {g.B, g.Nq, g.S, g.T};
    if (c->n_out > 1)
        sn_set_out(c->out[1], q->dtype, 4, kd);
    if (c->n_out > 2)
        sn_set_out(c->out[2], q->dtype, 4, vd);
    if (c->n_out > 3)
        sn_set_out(c->out[3], q->dtype, 4, qd);
    return SNUG_OK;
}

typedef struct sd_run {
    const float *mask;          /* additive, broadcast strides below */
    int64_t m_b, m_n, m_s, m_len;
    const int64_t *nonpad;      /* [B] or NULL */
    bool causal;
    int64_t P, S, T;
    int64_t left, right;        /* windows (-1: none) */
} sd_run;

static bool sd_setup(const attn_job *j, int64_t b, int64_t h, int64_t s, llm_attn_row *r) {
    const sd_run *o = j->op;
    int64_t off = o->P;
    if (o->nonpad && !o->P)
        off = o->nonpad[b] - o->S;
    int64_t lo = 0, hi = o->T;
    if (o->causal)
        hi = sn_imin(hi, off + s + 1);
    if (o->left >= 0)
        lo = sn_imax(lo, off + s - o->left);
    if (o->right >= 0)
        hi = sn_imin(hi, off + s + o->right + 1);
    if (o->nonpad)
        hi = sn_imin(hi, o->nonpad[b]);
    r->mask_lo = lo;
    r->mask_hi = hi;
    if (!j->qk) {
        /* nothing to report outside the allowed keys: skip them */
        r->lo = sn_imax(lo, 0);
        r->hi = sn_imax(r->lo, hi);
    }
    if (o->mask) {
        r->bias1 = o->mask + b * o->m_b + h * o->m_n + s * o->m_s;
        r->bias1_len = o->m_len;
    }
    return true;
}

static void sd_carve(const sn_tensor *const *in, int n_in, sn_tensor *const *out, int n_out,
                     const sd_geom *g, carve *w, const float **fin, float **fb) {
    for (int i = 0; i < 6; i++)
        fin[i] = i != SD_MASK && sn_has_in(in, n_in, i) ? carve_in(w, in[i]) : NULL;
    float *pk = n_out > 1 && out[1] ? carve_out(w, out[1]) : NULL;
    float *pv = n_out > 2 && out[2] ? carve_out(w, out[2]) : NULL;
    fb[0] = pk ? pk : carve_f(w, g->B * g->Nkv * g->T * g->H);
    fb[1] = pv ? pv : carve_f(w, g->B * g->Nkv * g->T * g->Hv);
    fb[2] = g->three_d ? carve_f(w, g->B * g->Nq * g->S * g->H) : NULL;
    fb[3] = carve_out(w, out[0]);
    fb[4] = n_out > 3 && out[3] ? carve_out(w, out[3]) : NULL;
    fb[5] = sn_has_in(in, n_in, SD_MASK) ? carve_f(w, sn_tensor_numel(in[SD_MASK])) : NULL;
}

static int sdpa_ws(const sn_node *node, int n_in, const sn_tensor *const *in, int n_out,
                   const sn_tensor *const *out, int n_threads, size_t *ws, sn_err *err) {
    (void)n_threads;
    sd_geom g;
    SN_TRY(sd_geom_of(node, n_in, in, &g, err));
    carve w = {0};
    const float *fin[6];
    float *fb[6];
    sd_carve(in, n_in, (sn_tensor *const *)out, n_out, &g, &w, fin, fb);
    *ws = w.used + ATTN_SLOTS * attn_slot_bytes(g.Hv, 0, 1) + 64;
    return SNUG_OK;
}

int llm_sdpa_prepare(sn_prep_ctx *c) {
    return sdpa_ws(c->node, c->n_in, c->in, c->n_out, c->out, c->n_threads, &c->workspace, c->err);
}

size_t llm_sdpa_estimate(const sn_infer_ctx *c) { return llm_estimate_with(c, sdpa_ws); }

int llm_sdpa_run(sn_kctx *c) {
    sd_geom g;
    SN_TRY(sd_geom_of(c->node, c->n_in, c->in, &g, c->err));
    const sn_tensor *const *in = c->in;
    carve w = {c->ws, 0};
    const float *fin[6];
    float *fb[6];
    sd_carve(in, c->n_in, c->out, c->n_out, &g, &w, fin, fb);
    int64_t B = g.B, Nq = g.Nq, Nkv = g.Nkv, S = g.S, L = g.L, P = g.P, T = g.T, H = g.H,
            Hv = g.Hv;
    float *kh = fb[0], *vh = fb[1], *y = fb[3];
    const float *qh = fin[SD_Q];
    /* present = past ++ new, head-major */
    for (int64_t b = 0; b < B; b++)
        for (int64_t n = 0; n < Nkv; n++) {
            if (P > 0) {
                memmove(kh + (b * Nkv + n) * T * H, fin[SD_PK] + (b * Nkv + n) * P * H,
                        (size_t)(P * H) * sizeof(float));
                memmove(vh + (b * Nkv + n) * T * Hv, fin[SD_PV] + (b * Nkv + n) * P * Hv,
                        (size_t)(P * Hv) * sizeof(float));
            }
            if (!g.three_d) {
                memmove(kh + ((b * Nkv + n) * T + P) * H, fin[SD_K] + (b * Nkv + n) * L * H,
                        (size_t)(L * H) * sizeof(float));
                memmove(vh + ((b * Nkv + n) * T + P) * Hv, fin[SD_V] + (b * Nkv + n) * L * Hv,
                        (size_t)(L * Hv) * sizeof(float));
            }
        }
    if (g.three_d) {
        to_bnsh(fin[SD_K], B, L, Nkv, H, Nkv * H, 0, NULL, kh, T, P);
        to_bnsh(fin[SD_V], B, L, Nkv, Hv, Nkv * Hv, 0, NULL, vh, T, P);
        to_bnsh(fin[SD_Q], B, S, Nq, H, Nq * H, 0, NULL, fb[2], S, 0);
        qh = fb[2];
    }
    sd_run o = {.causal = sn_attr_int(c->node, "is_causal", 0) != 0, .P = P, .S = S, .T = T};
    o.left = sn_attr_int(c->node, "left_window_size", -1);
    o.right = sn_attr_int(c->node, "right_window_size", -1);
    if (sn_has_in(in, c->n_in, SD_NONPAD)) {
        const sn_tensor *np = in[SD_NONPAD];
        if (np->dtype != SN_I64 || sn_tensor_numel(np) != B)
            return KFAIL(SNUG_ERR_SHAPE, "nonpad_kv_seqlen must be int64 [batch]");
        o.nonpad = np->data;
        for (int64_t b = 0; b < B; b++)
            if (o.nonpad[b] < 0 || o.nonpad[b] > T)
                return KFAIL(SNUG_ERR_INVALID_ARG, "nonpad_kv_seqlen[%lld]=%lld out of [0, %lld]",
                             (long long)b, (long long)o.nonpad[b], (long long)T);
    }
    if (sn_has_in(in, c->n_in, SD_MASK)) {
        const sn_tensor *m = in[SD_MASK];
        int64_t mn = sn_tensor_numel(m);
        float *mb = fb[5];
        if (m->dtype == SN_BOOL) {
            const uint8_t *md = m->data;
            for (int64_t i = 0; i < mn; i++)
                mb[i] = md[i] ? 0.0f : -INFINITY;
        } else {
            llm_to_f32(m->dtype, m->data, mb, mn);
        }
        o.mask = mb;
        int64_t st[4] = {0, 0, 0, 0}, acc = 1;
        for (int i = m->rank - 1, a = 3; i >= 0; i--, a--) {
            st[a] = m->dims[i] == 1 && a < 3 ? 0 : acc;
            acc *= m->dims[i];
        }
        o.m_b = st[0];
        o.m_n = st[1];
        o.m_s = st[2];
        o.m_len = m->dims[m->rank - 1];
        if (o.m_len == 1 && T > 1) {
            /* a length-1 key axis broadcasts */
            return KFAIL(SNUG_ERR_UNSUPPORTED, "attn_mask with a broadcast key axis");
        }
    }
    float scale = sn_attr_float(c->node, "scale", 0.0f);
    int mode = (int)sn_attr_int(c->node, "qk_matmul_output_mode", 0);
    if (mode < 0 || mode > 3)
        return KFAIL(SNUG_ERR_INVALID_ARG, "qk_matmul_output_mode %d out of range", mode);
    /* Opsets 23-24 (as ONNX 1.19 tests them) apply softcap after the mask,
     * with mode 1 = after the mask and 2 = after softcap; opset 25 caps
     * first, with mode 1 = after softcap and 2 = after the mask. */
    bool v25 = c->node->opset >= 25;
    int qk_mode = mode == 0   ? LLM_QK_RAW
                  : mode == 3 ? LLM_QK_PROBS
                  : (mode == 1) == v25 ? LLM_QK_CAPPED
                                       : LLM_QK_BIASED;
    attn_job j = {
        .B = B, .Nq = Nq, .Nkv = Nkv, .S = S, .H = H, .Hv = Hv, .q = qh, .k = kh, .v = vh,
        .Lk = T, .y = y, .y_bsnh = g.three_d,
        .scale = scale != 0.0f ? scale : 1.0f / sqrtf((float)H),
        .softcap = sn_attr_float(c->node, "softcap", 0.0f), .softcap_after_bias = !v25,
        .zero_if_masked = 1, .qk = fb[4], .qk_mode = qk_mode, .setup = sd_setup, .op = &o,
    };
    attn_run_rows(&j, c->pool, &w);
    flush_out(c->out[0], y);
    for (int i = 1; i < 4 && i < c->n_out; i++)
        flush_out(c->out[i], i < 3 ? fb[i - 1] : fb[4]);
    return SNUG_OK;
}
