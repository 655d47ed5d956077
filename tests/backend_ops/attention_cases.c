/* GroupQueryAttention and RotaryEmbedding, OpenCL against the CPU
 * (harness.h). GroupQueryAttention: lengths per
 * batch entry (prompt, decode, ragged rows with padding), past and present
 * as two buffers or one (a shared KV cache), packed QKV, rotary in halves
 * and in pairs, a local window, softcap, smooth softmax and head sinks.
 * Every output (the attention and both present caches) to a normalized
 * error of 5e-4. RotaryEmbedding: both domains, 3-D and 4-D, halves and
 * pairs, a partial rotary width, positions per token, one start position,
 * or (ONNX) caches per token. A length or position the caches cannot
 * serve is an error on the device as on the CPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static uint64_t g_rng = 0x243F6A8885A308D3ull;
static float frand(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)(g_rng >> 40) / 8388608.0f - 1.0f; /* [-1, 1) */
}

typedef struct gqa_case {
    int B, S, Nq, Nkv, H, Lp; /* Lp: past rows (0: no past) */
    int seqlens[4];           /* seqlens_k: keys - 1 per batch entry */
    bool packed, shared;      /* QKV in one input; past and present one buffer (Lp rows) */
    int rot, interleaved;     /* rotary dims (0: none) */
    int window, smooth, sink; /* local_window_size (0: none), smooth_softmax, head_sink given */
    float softcap;
    int total; /* total_sequence_length when not the longest row (a bad length: both must refuse) */
} gqa_case;

static const gqa_case k_gqa[] = {
    /* a prompt alone: 3 query heads per key/value head, rotary */
    {1, 7, 6, 2, 16, 0, {6}, false, false, 16, 0, 0, 0, 0, 0, 0},
    /* decode on a past of 9, two buffers */
    {1, 1, 4, 4, 8, 9, {9}, false, false, 8, 0, 0, 0, 0, 0, 0},
    /* decode on a shared cache, two sequences of other lengths, SmolLM2's heads (64) */
    {2, 1, 9, 3, 64, 40, {12, 30}, false, true, 64, 0, 0, 0, 0, 0, 0},
    /* prompt chunk after a past, shared, rotary on half the head in pairs */
    {1, 5, 4, 2, 32, 24, {13}, false, true, 16, 1, 0, 0, 0, 0, 0},
    /* ragged batch: a short row padded (its rows past Q are zero), packed QKV */
    {3, 4, 2, 1, 24, 8, {3, 9, 1}, true, false, 0, 0, 0, 0, 0, 0, 0},
    /* local window, softcap, a head larger than one work group (130) */
    {1, 6, 2, 2, 130, 10, {15}, false, false, 0, 0, 5, 0, 0, 30.0f, 0},
    /* smooth softmax, then head sinks */
    {2, 2, 4, 2, 16, 10, {7, 4}, false, true, 16, 0, 0, 1, 0, 0, 0},
    {1, 3, 4, 1, 16, 0, {2}, true, false, 0, 0, 0, 0, 1, 0, 0},
    /* many keys: more than one block of 64 per row, decode and prompt */
    {1, 1, 2, 1, 32, 300, {299}, false, true, 32, 0, 0, 0, 0, 0, 0},
    {1, 70, 2, 2, 8, 0, {69}, false, false, 8, 0, 0, 0, 0, 0, 0},
    /* seqlens_k past what the cache holds: an error on the device too, not a read past its end */
    {1, 1, 2, 1, 8, 4, {9}, false, false, 8, 0, 0, 0, 0, 0, 5},
    {2, 1, 2, 1, 8, 6, {2, 7}, false, true, 0, 0, 0, 0, 0, 0, 6},
};

static sn_tensor tensor(sn_dtype dt, int rank, const int64_t *dims) {
    sn_tensor t;
    memset(&t, 0, sizeof t);
    t.kind = SN_KIND_TENSOR;
    t.dtype = dt;
    t.rank = rank;
    for (int d = 0; d < rank; d++)
        t.dims[d] = dims[d];
    t.data = calloc(1, sn_tensor_nbytes(&t) + 8);
    return t;
}

static void fill(sn_tensor *t) {
    for (int64_t e = 0; e < sn_tensor_numel(t); e++)
        ((float *)t->data)[e] = frand();
}

static double nerr(const sn_tensor *a, const sn_tensor *b) {
    double se = 0, sa = 0;
    const float *x = a->data, *y = b->data;
    for (int64_t e = 0; e < sn_tensor_numel(a); e++)
        se += ((double)x[e] - y[e]) * ((double)x[e] - y[e]), sa += (double)x[e] * x[e];
    return sa > 0 ? sqrt(se / sa) : sqrt(se);
}

static int gqa_one(const sn_backend *cpu, const sn_backend *ocl, const gqa_case *t) {
    char what[128];
    snprintf(what, sizeof what, "GroupQueryAttention B=%d S=%d heads %d/%d H=%d past %d%s%s rot %d%s", t->B, t->S,
             t->Nq, t->Nkv, t->H, t->Lp, t->packed ? " packed" : "", t->shared ? " shared" : "", t->rot,
             t->interleaved ? " pairs" : "");
    int64_t total = 0;
    for (int b = 0; b < t->B; b++)
        total = t->seqlens[b] + 1 > total ? t->seqlens[b] + 1 : total;
    total = t->total ? t->total : total;
    int64_t Lc = total > t->Lp ? total : t->Lp, max_pos = Lc + 3;
    int64_t qd[3] = {t->B, t->S, (int64_t)(t->packed ? t->Nq + 2 * t->Nkv : t->Nq) * t->H};
    int64_t kd[3] = {t->B, t->S, (int64_t)t->Nkv * t->H}, pd[4] = {t->B, t->Nkv, t->Lp, t->H};
    int64_t bd[1] = {t->B}, one[1] = {1}, cd[2] = {max_pos, t->rot / 2}, hd[1] = {t->Nq};
    sn_tensor in[12];
    memset(in, 0, sizeof in);
    for (int i = 0; i < 12; i++)
        in[i].rank = -1;
    in[0] = tensor(SN_F32, 3, qd);
    if (!t->packed)
        in[1] = tensor(SN_F32, 3, kd), in[2] = tensor(SN_F32, 3, kd);
    if (t->Lp)
        in[3] = tensor(SN_F32, 4, pd), in[4] = tensor(SN_F32, 4, pd);
    in[5] = tensor(SN_I32, 1, bd);
    in[6] = tensor(SN_I32, 1, one);
    for (int b = 0; b < t->B; b++)
        ((int32_t *)in[5].data)[b] = t->seqlens[b];
    *(int32_t *)in[6].data = (int32_t)total;
    if (t->rot)
        in[7] = tensor(SN_F32, 2, cd), in[8] = tensor(SN_F32, 2, cd);
    if (t->sink)
        in[11] = tensor(SN_F32, 1, hd);
    for (int i = 0; i < 12; i++)
        if (in[i].rank >= 0 && in[i].dtype == SN_F32)
            fill(&in[i]);
    int n_in = t->sink ? 12 : t->rot ? 9 : 7;
    /* the node */
    sn_attr at[8];
    memset(at, 0, sizeof at);
    int na = 0;
    const char *inames[] = {"num_heads", "kv_num_heads", "do_rotary", "rotary_interleaved", "local_window_size",
                            "smooth_softmax"};
    int64_t ivals[] = {t->Nq, t->Nkv, t->rot != 0, t->interleaved, t->window ? t->window : -1, t->smooth};
    for (int i = 0; i < 6; i++)
        at[na++] = (sn_attr){.name = inames[i], .type = SN_ATTR_INT, .i = ivals[i]};
    if (t->softcap > 0)
        at[na++] = (sn_attr){.name = "softcap", .type = SN_ATTR_FLOAT, .f = t->softcap};
    const sn_op_def *op = sn_op_find("com.microsoft", "GroupQueryAttention", 1);
    int ids_in[12], ids_out[3] = {20, 21, 22};
    const char *names_in[12] = {"q", "k", "v", "pk", "pv", "sl", "tot", "cos", "sin", "pos", "bias", "sink"};
    const char *names_out[3] = {"y", "present_key", "present_value"};
    for (int i = 0; i < n_in; i++)
        ids_in[i] = in[i].rank >= 0 ? i : -1;
    sn_pnode pn = {.name = "gqa", .op_type = "GroupQueryAttention", .domain = "com.microsoft", .n_in = n_in,
                   .n_out = 3, .inputs = names_in, .outputs = names_out, .n_attr = na, .attrs = at};
    sn_node n = {.p = &pn, .op = op, .opset = 1, .n_in = n_in, .n_out = 3, .in = ids_in, .out = ids_out};
    /* the outputs' shapes, as the graph infers them */
    sn_tensor oc[3], oo[3];
    const sn_tensor *pin[12];
    sn_tensor *pout[3] = {&oc[0], &oc[1], &oc[2]};
    memset(oc, 0, sizeof oc);
    for (int i = 0; i < n_in; i++)
        pin[i] = in[i].rank >= 0 ? &in[i] : NULL;
    sn_err err = {0};
    int fails = 0;
    sn_infer_ctx ic = {.node = &n, .n_in = n_in, .n_out = 3, .in = pin, .out = pout, .err = &err};
    if (!op || op->infer(&ic) || oc[1].dims[2] != Lc) {
        fprintf(stderr, "FAIL %s: infer: %s\n", what, err.msg);
        fails++;
        goto done;
    }
    for (int i = 0; i < 3; i++) {
        oc[i].kind = oo[i].kind = SN_KIND_TENSOR;
        oo[i] = oc[i];
        oc[i].data = calloc(1, sn_tensor_nbytes(&oc[i]) + 8);
        oo[i].data = calloc(1, sn_tensor_nbytes(&oc[i]) + 8);
    }
    run_on_alias[1] = t->shared ? 4 : 0; /* present_key is past_key's buffer */
    run_on_alias[2] = t->shared ? 5 : 0;
    const sn_kernel *kc = sn_backend_kernel(cpu, &n), *ko = sn_backend_kernel(ocl, &n);
    if (!ko) {
        fprintf(stderr, "FAIL %s: the OpenCL backend has no kernel\n", what);
        fails++;
    } else if (t->total) {
        int rc_cpu = run_on(cpu, kc, &n, n_in, in, 3, oc, &err), rc_ocl = run_on(ocl, ko, &n, n_in, in, 3, oo, &err);
        if (rc_cpu != SNUG_ERR_INVALID_ARG || rc_ocl != SNUG_ERR_INVALID_ARG || !strstr(err.msg, "seqlens_k")) {
            fprintf(stderr, "FAIL %s: a bad length gives %d on the CPU and %d (%s) on OpenCL\n", what, rc_cpu, rc_ocl,
                    err.msg);
            fails++;
        }
        n_cases++;
    } else if (run_on(cpu, kc, &n, n_in, in, 3, oc, &err)) {
        fprintf(stderr, "FAIL %s: cpu: %s\n", what, err.msg);
        fails++;
    } else if (run_on(ocl, ko, &n, n_in, in, 3, oo, &err)) {
        fprintf(stderr, "FAIL %s: opencl: %s\n", what, err.msg);
        fails++;
    } else {
        for (int i = 0; i < 3; i++) {
            double e = nerr(&oc[i], &oo[i]);
            if (!(e <= 5e-4)) {
                fprintf(stderr, "FAIL %s: output %d normalized error %.3g > 5e-4\n", what, i, e);
                fails++;
            }
        }
        n_cases++;
        note_schema("GroupQueryAttention");
    }
    run_on_alias[1] = run_on_alias[2] = 0;
    for (int i = 0; i < 3; i++)
        free(oc[i].data), free(oo[i].data);
done:
    for (int i = 0; i < 12; i++)
        if (in[i].rank >= 0)
            free(in[i].data);
    return fails;
}

/* ---- RotaryEmbedding --------------------------------------------------------- */

typedef struct rope_case {
    bool onnx;            /* ONNX 23 (X, cos, sin, ids?) or com.microsoft (X, ids, cos, sin) */
    int B, S, N, H, rot;  /* rot: rotary_embedding_dim (0: the head) */
    bool four_d;          /* (B, N, S, H) or (B, S, N*H) */
    int interleaved;
    int pos;              /* 0 ids (B, S); 1 one id, the first position (com.microsoft); 2 none (ONNX: caches per token) */
    int bad;              /* a position this far past the caches: both must refuse */
} rope_case;

static const rope_case k_rope[] = {
    {false, 2, 5, 3, 16, 0, false, 0, 0, 0},  {false, 1, 7, 2, 32, 16, false, 1, 0, 0},
    {false, 2, 3, 4, 8, 0, true, 0, 1, 0},    {false, 1, 1, 9, 64, 0, false, 1, 0, 0},
    {true, 2, 4, 3, 16, 0, false, 0, 0, 0},   {true, 1, 6, 2, 24, 8, true, 1, 0, 0},
    {true, 2, 3, 2, 16, 0, false, 2, 0, 0},   {false, 1, 0, 2, 8, 0, false, 0, 0, 0},
    {false, 1, 4, 2, 8, 0, false, 0, 0, 3},   {true, 2, 2, 2, 8, 0, true, 0, 0, 1},
};

static int rope_one(const sn_backend *cpu, const sn_backend *ocl, const rope_case *t) {
    char what[128];
    snprintf(what, sizeof what, "RotaryEmbedding %s B=%d S=%d N=%d H=%d rot %d%s%s pos %d%s",
             t->onnx ? "onnx" : "ms", t->B, t->S, t->N, t->H, t->rot, t->four_d ? " 4-D" : "",
             t->interleaved ? " pairs" : "", t->pos, t->bad ? " bad" : "");
    int rot = t->rot ? t->rot : t->H, max_pos = t->S + 5;
    int64_t xd[4] = {t->B, t->S, (int64_t)t->N * t->H}, x4[4] = {t->B, t->N, t->S, t->H};
    int64_t cd2[2] = {max_pos, rot / 2}, cd3[3] = {t->B, t->S, rot / 2}, pd[2] = {t->B, t->S}, p1[1] = {1};
    sn_tensor in[4], oc, oo;
    int ix = 0, ip = t->onnx ? 3 : 1, ic = t->onnx ? 1 : 2, is = t->onnx ? 2 : 3;
    in[ix] = t->four_d ? tensor(SN_F32, 4, x4) : tensor(SN_F32, 3, xd);
    in[ic] = t->pos == 2 ? tensor(SN_F32, 3, cd3) : tensor(SN_F32, 2, cd2);
    in[is] = t->pos == 2 ? tensor(SN_F32, 3, cd3) : tensor(SN_F32, 2, cd2);
    if (t->pos == 2) {
        memset(&in[ip], 0, sizeof in[ip]);
        in[ip].rank = -1;
    } else {
        in[ip] = t->pos == 1 ? tensor(SN_I64, 1, p1) : tensor(SN_I64, 2, pd);
        int64_t *ids = in[ip].data;
        for (int64_t e = 0; e < sn_tensor_numel(&in[ip]); e++) {
            int64_t r = (int64_t)((frand() + 1.0f) * 0.5f * (float)max_pos);
            ids[e] = t->pos == 1 ? 3 : r < max_pos ? r : max_pos - 1;
        }
        if (t->bad)
            ids[sn_tensor_numel(&in[ip]) - 1] = max_pos + t->bad - 1;
    }
    fill(&in[ix]), fill(&in[ic]), fill(&in[is]);
    sn_attr at[3] = {{.name = "interleaved", .type = SN_ATTR_INT, .i = t->interleaved},
                     {.name = "num_heads", .type = SN_ATTR_INT, .i = t->N},
                     {.name = "rotary_embedding_dim", .type = SN_ATTR_INT, .i = t->rot}};
    const char *dom = t->onnx ? "" : "com.microsoft";
    const sn_op_def *op = sn_op_find(dom, "RotaryEmbedding", t->onnx ? 23 : 1);
    int n_in = t->onnx && t->pos == 2 ? 3 : 4, ids_in[4] = {0, 1, 2, 3}, ids_out[1] = {10};
    const char *names_in[4] = {"x", "a", "b", "c"}, *names_out[1] = {"y"};
    sn_pnode pn = {.name = "rope", .op_type = "RotaryEmbedding", .domain = dom, .n_in = n_in, .n_out = 1,
                   .inputs = names_in, .outputs = names_out, .n_attr = 3, .attrs = at};
    sn_node n = {.p = &pn, .op = op, .opset = t->onnx ? 23 : 1, .n_in = n_in, .n_out = 1, .in = ids_in,
                 .out = ids_out};
    oc = in[ix];
    oc.data = calloc(1, sn_tensor_nbytes(&in[ix]) + 8);
    oo = oc;
    oo.data = calloc(1, sn_tensor_nbytes(&in[ix]) + 8);
    sn_err err = {0};
    int fails = 0;
    const sn_kernel *kc = op ? sn_backend_kernel(cpu, &n) : NULL, *ko = op ? sn_backend_kernel(ocl, &n) : NULL;
    if (!kc || !ko) {
        fprintf(stderr, "FAIL %s: no kernel\n", what);
        fails++;
    } else if (t->bad) {
        int rc_cpu = run_on(cpu, kc, &n, n_in, in, 1, &oc, &err), rc_ocl = run_on(ocl, ko, &n, n_in, in, 1, &oo, &err);
        if (rc_cpu != SNUG_ERR_INVALID_ARG || rc_ocl != SNUG_ERR_INVALID_ARG || !strstr(err.msg, "out of range")) {
            fprintf(stderr, "FAIL %s: a bad position gives %d on the CPU and %d (%s) on OpenCL\n", what, rc_cpu,
                    rc_ocl, err.msg);
            fails++;
        }
        n_cases++;
    } else if (run_on(cpu, kc, &n, n_in, in, 1, &oc, &err) || run_on(ocl, ko, &n, n_in, in, 1, &oo, &err)) {
        fprintf(stderr, "FAIL %s: %s\n", what, err.msg);
        fails++;
    } else {
        double e = nerr(&oc, &oo);
        if (!(e <= 5e-4)) {
            fprintf(stderr, "FAIL %s: normalized error %.3g > 5e-4\n", what, e);
            fails++;
        }
        n_cases++;
        note_schema(t->onnx ? "RotaryEmbedding (ONNX)" : "RotaryEmbedding");
    }
    free(oc.data), free(oo.data);
    for (int i = 0; i < 4; i++)
        if (in[i].rank >= 0)
            free(in[i].data);
    return fails;
}

int run_attention_cases(const sn_backend *cpu, const sn_backend *ocl) {
    int fails = 0;
    for (size_t i = 0; i < sizeof k_gqa / sizeof k_gqa[0]; i++)
        fails += gqa_one(cpu, ocl, &k_gqa[i]);
    for (size_t i = 0; i < sizeof k_rope / sizeof k_rope[0]; i++)
        fails += rope_one(cpu, ocl, &k_rope[i]);
    return fails;
}
