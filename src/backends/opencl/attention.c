/* The OpenCL backend's attention kernels, host side (kit.h; device side:
 * attention.cl): GroupQueryAttention (com.microsoft) with its KV cache on
 * the device, past and present one buffer or two, rotary inside, packed
 * QKV or not, causal with a local window, softcap, smooth softmax and head
 * sinks; RotaryEmbedding (com.microsoft and ONNX 23), its positions read
 * on the device (one outside the caches is reported through the status
 * word). GroupQueryAttention's seqlens_k and total_sequence_length are
 * read on the host (sn_kernel.host_in): the lengths go to the kernels as
 * arguments, so no step waits on the device to learn them; its
 * position_ids and attention_bias keep it on the CPU. */
#include <math.h>
#include <string.h>

#include "backends/opencl/kit.h"
#include "ops/kit.h"
#include "ops/llm/llm.h"

#define GQA_CHUNK 16 /* attention.cl's */
#define GQA_HMAX 256

enum { Q_, K_, V_, PK_, PV_, SEQLENS_, TOTAL_, COS_, SIN_, POS_, BIAS_, SINK_ };

typedef struct gqa_lens {
    cl_int T[GQA_CHUNK], Q[GQA_CHUNK];
} gqa_lens;

/* The shapes of a node's tensors: B, S, heads, head size H, past rows Lp,
 * present rows Lc, the rotary dims. */
typedef struct gqa_dims {
    int64_t B, S, Nq, Nkv, H, Lp, Lc, rot;
    bool packed;
} gqa_dims;

static int dims_of(const sn_node *n, int n_in, const sn_tensor *const *in, const sn_tensor *const *out, sn_err *err,
                   gqa_dims *g) {
    memset(g, 0, sizeof *g);
    const sn_tensor *q = in[Q_];
    g->Nq = sn_attr_int(n, "num_heads", 0);
    g->Nkv = sn_attr_int(n, "kv_num_heads", 0);
    g->packed = !sn_has_in(in, n_in, K_);
    if (q->rank != 3 || g->Nq < 1 || g->Nkv < 1 || g->Nq % g->Nkv)
        return sn_kfail(err, n, SNUG_ERR_UNSUPPORTED, "opencl: query [B, S, D], num_heads a multiple of kv_num_heads");
    g->B = q->dims[0], g->S = q->dims[1];
    int64_t div = g->packed ? g->Nq + 2 * g->Nkv : g->Nq;
    g->H = q->dims[2] / div;
    if (q->dims[2] % div || g->H < 1 || g->H > GQA_HMAX)
        return sn_kfail(err, n, SNUG_ERR_UNSUPPORTED, "opencl: GroupQueryAttention with head size %lld (1 to %d)",
                        (long long)g->H, GQA_HMAX);
    g->Lp = sn_has_in(in, n_in, PK_) ? in[PK_]->dims[2] : 0;
    g->Lc = out[1]->dims[2];
    g->rot = sn_attr_int(n, "do_rotary", 0) ? 2 * in[COS_]->dims[1] : 0;
    return SNUG_OK;
}

static int prep_gqa(sn_prep_ctx *c) {
    const sn_tensor *const *in = c->in;
    for (int i = POS_; i < c->n_in; i++)
        if (in[i] && i != SINK_)
            return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "opencl: GroupQueryAttention with input %d "
                            "(position_ids, attention_bias, a quantized cache)", i);
    /* every float input and output fp32; the lengths int32, on the host */
    SN_TRY(sn_cl_check_f32(c, ~0u & ~(1u << SEQLENS_ | 1u << TOTAL_)));
    if (in[SEQLENS_]->dtype != SN_I32 || in[TOTAL_]->dtype != SN_I32)
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "opencl: seqlens_k and total_sequence_length int32");
    if (c->n_out < 3 || !c->out[1] || !c->out[2] || c->out[1]->rank != 4)
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "opencl: GroupQueryAttention with present outputs");
    if (sn_attr_int(c->node, "do_rotary", 0) && (!sn_has_in(in, c->n_in, COS_) || !sn_has_in(in, c->n_in, SIN_)))
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "opencl: do_rotary needs cos_cache and sin_cache");
    gqa_dims g;
    return dims_of(c->node, c->n_in, in, c->out, c->err, &g);
}

static int run_gqa(sn_kctx *c) {
    const sn_tensor *const *in = (const sn_tensor *const *)c->in;
    gqa_dims g;
    SN_TRY(dims_of(c->node, c->n_in, in, (const sn_tensor *const *)c->out, c->err, &g));
    const sn_tensor *q = in[Q_], *pk = sn_has_in(in, c->n_in, PK_) ? in[PK_] : NULL;
    const sn_tensor *pv = pk ? in[PV_] : NULL, *sink = sn_has_in(in, c->n_in, SINK_) ? in[SINK_] : NULL;
    sn_tensor *y = c->out[0], *k = c->out[1], *v = c->out[2];
    const sn_tensor *cs = g.rot ? in[COS_] : NULL, *sn = g.rot ? in[SIN_] : NULL;
    if (sn_tensor_numel(in[SEQLENS_]) != g.B)
        return KFAIL(SNUG_ERR_SHAPE, "seqlens_k must have batch_size values");
    if (sink && sn_tensor_numel(sink) != g.Nq)
        return KFAIL(SNUG_ERR_SHAPE, "head_sink must have num_heads values");
    const int32_t *seqlens = in[SEQLENS_]->data;
    int64_t max_pos = g.rot ? cs->dims[0] : 0;
    /* the lengths checked as the CPU does: a bad one is an error, never a read out of range */
    for (int64_t b = 0; b < g.B; b++) {
        int64_t T = (int64_t)seqlens[b] + 1, Q = T < g.S ? T : g.S, P = T - Q;
        if (T < 1 || T > g.Lc || P > g.Lp)
            return KFAIL(SNUG_ERR_INVALID_ARG,
                         "seqlens_k[%lld]=%d inconsistent with sequence_length %lld, past %lld and present %lld rows",
                         (long long)b, seqlens[b], (long long)g.S, (long long)g.Lp, (long long)g.Lc);
        if (g.rot && T > max_pos)
            return KFAIL(SNUG_ERR_INVALID_ARG, "position %lld outside cos_cache (%lld rows)", (long long)(T - 1),
                         (long long)max_pos);
    }
    bool shared = pk && pk->data == k->data && pv->data == v->data;
    cl_long B0, S = g.S, Nq = g.Nq, Nkv = g.Nkv, H = g.H, Lp = g.Lp, Lc = g.Lc;
    cl_long qrs = q->dims[2], krs = g.packed ? qrs : Nkv * H, koff = g.packed ? Nq * H : 0;
    cl_long voff = g.packed ? (Nq + Nkv) * H : 0, window = sn_attr_int(c->node, "local_window_size", -1);
    cl_int rot = (cl_int)g.rot, inter = (cl_int)sn_attr_int(c->node, "rotary_interleaved", 0);
    cl_int causal = sn_attr_int(c->node, "causal", 1) != 0;
    cl_int sk = sink ? 2 : sn_attr_int(c->node, "smooth_softmax", 0) != 0;
    float sc = sn_attr_float(c->node, "scale", 0.0f);
    cl_float scale = sc != 0.0f ? sc : 1.0f / sqrtf((float)H), softcap = sn_attr_float(c->node, "softcap", 0.0f);
    const sn_tensor *ks = g.packed ? q : in[K_], *vs = g.packed ? q : in[V_];
    for (int64_t b0 = 0; b0 < g.B; b0 += GQA_CHUNK) {
        int64_t nb = g.B - b0 < GQA_CHUNK ? g.B - b0 : GQA_CHUNK;
        gqa_lens lens;
        memset(&lens, 0, sizeof lens);
        for (int64_t i = 0; i < nb; i++) {
            int64_t T = (int64_t)seqlens[b0 + i] + 1;
            lens.T[i] = (cl_int)T, lens.Q[i] = (cl_int)(T < S ? T : S);
        }
        B0 = b0;
        if (!shared) {
            sn_cl_call kp = {.c = c};
            sn_cl_arg_buf(&kp, pk, k);
            sn_cl_arg_buf(&kp, pv, v);
            sn_cl_arg_buf(&kp, k, k);
            sn_cl_arg_buf(&kp, v, v);
            sn_cl_arg_val(&kp, &lens, sizeof lens);
            sn_cl_arg_val(&kp, &B0, sizeof B0);
            sn_cl_arg_val(&kp, &Nkv, sizeof Nkv);
            sn_cl_arg_val(&kp, &Lp, sizeof Lp);
            sn_cl_arg_val(&kp, &Lc, sizeof Lc);
            sn_cl_arg_val(&kp, &H, sizeof H);
            size_t gl[3] = {(size_t)H, (size_t)Lc, (size_t)(nb * Nkv)};
            SN_TRY(sn_cl_enqueue(&kp, SN_CLK_gqa_past, 3, gl, NULL));
        }
        sn_cl_call kv = {.c = c};
        sn_cl_arg_buf(&kv, ks, k);
        sn_cl_arg_buf(&kv, vs, k);
        sn_cl_arg_val(&kv, &krs, sizeof krs);
        sn_cl_arg_val(&kv, &koff, sizeof koff);
        sn_cl_arg_val(&kv, &voff, sizeof voff);
        sn_cl_arg_buf(&kv, k, k);
        sn_cl_arg_buf(&kv, v, v);
        sn_cl_arg_buf(&kv, cs, k);
        sn_cl_arg_buf(&kv, sn, k);
        sn_cl_arg_val(&kv, &rot, sizeof rot);
        sn_cl_arg_val(&kv, &inter, sizeof inter);
        sn_cl_arg_val(&kv, &lens, sizeof lens);
        sn_cl_arg_val(&kv, &B0, sizeof B0);
        sn_cl_arg_val(&kv, &S, sizeof S);
        sn_cl_arg_val(&kv, &Nkv, sizeof Nkv);
        sn_cl_arg_val(&kv, &Lc, sizeof Lc);
        sn_cl_arg_val(&kv, &H, sizeof H);
        size_t gk[3] = {(size_t)H, (size_t)S, (size_t)(nb * Nkv)};
        SN_TRY(sn_cl_enqueue(&kv, SN_CLK_gqa_kv, 3, gk, NULL));
        sn_cl_call ka = {.c = c};
        sn_cl_arg_buf(&ka, q, y);
        sn_cl_arg_val(&ka, &qrs, sizeof qrs);
        sn_cl_arg_buf(&ka, k, k);
        sn_cl_arg_buf(&ka, v, v);
        sn_cl_arg_buf(&ka, y, y);
        sn_cl_arg_buf(&ka, cs, y);
        sn_cl_arg_buf(&ka, sn, y);
        sn_cl_arg_buf(&ka, sink, y);
        sn_cl_arg_val(&ka, &rot, sizeof rot);
        sn_cl_arg_val(&ka, &inter, sizeof inter);
        sn_cl_arg_val(&ka, &lens, sizeof lens);
        sn_cl_arg_val(&ka, &B0, sizeof B0);
        sn_cl_arg_val(&ka, &S, sizeof S);
        sn_cl_arg_val(&ka, &Nq, sizeof Nq);
        sn_cl_arg_val(&ka, &Nkv, sizeof Nkv);
        sn_cl_arg_val(&ka, &Lc, sizeof Lc);
        sn_cl_arg_val(&ka, &H, sizeof H);
        sn_cl_arg_val(&ka, &scale, sizeof scale);
        sn_cl_arg_val(&ka, &softcap, sizeof softcap);
        sn_cl_arg_val(&ka, &window, sizeof window);
        sn_cl_arg_val(&ka, &causal, sizeof causal);
        sn_cl_arg_val(&ka, &sk, sizeof sk);
        size_t ga[3] = {64, (size_t)(S * Nq), (size_t)nb}, la[3] = {64, 1, 1};
        SN_TRY(sn_cl_enqueue(&ka, SN_CLK_gqa_attend, 3, ga, la));
    }
    return SNUG_OK;
}

/* ---- RotaryEmbedding ------------------------------------------------------------ */

static int prep_rope(sn_prep_ctx *c) {
    llm_rope_geom g;
    SN_TRY(llm_rope_geom_of(c->node, c->n_in, c->in, &g, c->err));
    unsigned f32 = g.onnx ? 0x7u : 0xdu; /* everything but position_ids */
    return sn_cl_check_f32(c, f32);
}

static int run_rope(sn_kctx *c) {
    llm_rope_geom g;
    SN_TRY(llm_rope_geom_of(c->node, c->n_in, (const sn_tensor *const *)c->in, &g, c->err));
    const sn_tensor *x = c->in[0], *cs = g.onnx ? c->in[1] : c->in[2], *sn = g.onnx ? c->in[2] : c->in[3];
    const sn_tensor *pid = g.onnx ? (sn_has_in((const sn_tensor *const *)c->in, c->n_in, 3) ? c->in[3] : NULL)
                                  : c->in[1];
    sn_tensor *y = c->out[0];
    if (sn_tensor_numel(sn) != sn_tensor_numel(cs))
        return KFAIL(SNUG_ERR_SHAPE, "sin_cache and cos_cache shapes differ");
    if (!sn_tensor_numel(y))
        return SNUG_OK;
    cl_long S = g.S, N = g.N, H = g.H, max_pos = g.pos_none ? g.B * g.S : cs->dims[0];
    cl_int rot = (cl_int)g.rot, inter = (cl_int)sn_attr_int(c->node, "interleaved", 0), four = g.four_d;
    cl_int mode = g.pos_none ? 2 : g.pos_scalar ? 1 : 0;
    sn_cl_call k = {.c = c};
    sn_cl_arg_buf(&k, x, y);
    sn_cl_arg_buf(&k, pid, y);
    sn_cl_arg_buf(&k, cs, y);
    sn_cl_arg_buf(&k, sn, y);
    sn_cl_arg_buf(&k, y, y);
    sn_cl_arg_val(&k, &S, sizeof S);
    sn_cl_arg_val(&k, &N, sizeof N);
    sn_cl_arg_val(&k, &H, sizeof H);
    sn_cl_arg_val(&k, &rot, sizeof rot);
    sn_cl_arg_val(&k, &inter, sizeof inter);
    sn_cl_arg_val(&k, &four, sizeof four);
    sn_cl_arg_val(&k, &mode, sizeof mode);
    sn_cl_arg_val(&k, &max_pos, sizeof max_pos);
    sn_cl_arg_status(&k);
    size_t gl[3] = {(size_t)(rot / 2 + H - rot), (size_t)N, (size_t)(g.B * S)};
    return sn_cl_enqueue(&k, SN_CLK_rope, 3, gl, NULL);
}

static bool ok_gqa(const sn_node *n) {
    return n->n_out <= 3 && !sn_attr_int(n, "sliding_window_cache", 0) && !(n->n_in > POS_ && n->in[POS_] >= 0) &&
           !(n->n_in > BIAS_ && n->in[BIAS_] >= 0);
}

const sn_cl_op sn_cl_ops_attn[] = {
    {"com.microsoft", "GroupQueryAttention", {.prepare = prep_gqa, .run = run_gqa, .host_in = 1u << SEQLENS_ | 1u << TOTAL_}, ok_gqa},
    {"com.microsoft", "RotaryEmbedding", {.prepare = prep_rope, .run = run_rope, .host_in = 0}, sn_cl_ok_any},
    {"", "RotaryEmbedding", {.prepare = prep_rope, .run = run_rope, .host_in = 0}, sn_cl_ok_any},
};
const int sn_cl_n_ops_attn = (int)(sizeof sn_cl_ops_attn / sizeof sn_cl_ops_attn[0]);
