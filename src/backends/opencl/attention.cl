/* snug's OpenCL attention kernels (host side: attention.c), after
 * kernels.cl in one program (AT, WG, wg_reduce).
 *
 * GroupQueryAttention in three steps on the device's in-order queue:
 * gqa_past (present = past rows [0, P), zeros from T; skipped when past and
 * present are one buffer, a shared KV cache), gqa_kv (the new key rows,
 * rotated, and value rows at [P, T)), gqa_attend (every query row over its
 * keys). Lengths come per batch entry in gqa_lens, from seqlens_k read on
 * the host (T = seqlens_k + 1 keys, Q = min(S, T) new rows, P = T - Q). */

#define GQA_CHUNK 16 /* batch entries per launch (gqa_lens) */
#define GQA_HMAX 256 /* head size the kernels hold in local memory */

typedef struct gqa_lens {
    int T[GQA_CHUNK], Q[GQA_CHUNK];
} gqa_lens;

/* Element d of a head row x rotated to position pos: rot leading dims,
 * halves (x[i], x[i + rot/2]) or pairs (x[2i], x[2i+1]) by cos/sin row pos
 * of [max_pos, rot/2] caches; dims from rot on pass through. */
static float rope_at(global const float *x, global const float *cs, global const float *sn, long pos, int rot,
                     int interleaved, int d) {
    if (d >= rot)
        return x[d];
    int hr = rot / 2, i = interleaved ? d / 2 : d % hr;
    bool first = interleaved ? (d & 1) == 0 : d < hr;
    int i1 = interleaved ? 2 * i : i, i2 = interleaved ? 2 * i + 1 : i + hr;
    float c = cs[pos * hr + i], s = sn[pos * hr + i], a = x[i1], b = x[i2];
    return first ? a * c - b * s : a * s + b * c;
}

/* present[b, h, r] for r < P from past (rows Lp apart), zero for r >= T:
 * global (H, Lc, nb * Nkv). */
kernel void gqa_past(global const uchar *PK, ulong opk, global const uchar *PV, ulong opv, global uchar *K,
                     ulong ok, global uchar *V, ulong ov, gqa_lens lens, long b0, long Nkv, long Lp, long Lc,
                     long H) {
    long d = get_global_id(0), r = get_global_id(1), bh = get_global_id(2);
    if (d >= H || r >= Lc)
        return;
    long bi = bh / Nkv, b = b0 + bi, h = bh % Nkv;
    int T = lens.T[bi], P = T - lens.Q[bi];
    if (r >= P && r < T)
        return; /* gqa_kv's */
    long y = ((b * Nkv + h) * Lc + r) * H + d, x = ((b * Nkv + h) * Lp + r) * H + d;
    AT(float, K, ok)[y] = r < P ? AT(const float, PK, opk)[x] : 0.0f;
    AT(float, V, ov)[y] = r < P ? AT(const float, PV, opv)[x] : 0.0f;
}

/* The new rows s < Q of key (rotated to P + s) and value into present at
 * P + s: global (H, S, nb * Nkv). Key and value rows are krs floats apart,
 * the heads at koff and voff in them (a packed QKV input, or key and value
 * themselves). */
kernel void gqa_kv(global const uchar *KS, ulong oks, global const uchar *VS, ulong ovs, long krs, long koff,
                   long voff, global uchar *K, ulong ok, global uchar *V, ulong ov, global const uchar *C, ulong oc,
                   global const uchar *Sn, ulong osn, int rot, int interleaved, gqa_lens lens, long b0, long S,
                   long Nkv, long Lc, long H) {
    long d = get_global_id(0), s = get_global_id(1), bh = get_global_id(2);
    if (d >= H || s >= S)
        return;
    long bi = bh / Nkv, b = b0 + bi, h = bh % Nkv;
    int T = lens.T[bi], Q = lens.Q[bi], P = T - Q;
    if (s >= Q)
        return;
    global const float *kx = AT(const float, KS, oks) + (b * S + s) * krs + koff + h * H;
    global const float *vx = AT(const float, VS, ovs) + (b * S + s) * krs + voff + h * H;
    long y = ((b * Nkv + h) * Lc + P + s) * H + d;
    AT(float, K, ok)[y] = rope_at(kx, AT(const float, C, oc), AT(const float, Sn, osn), P + s, rot, interleaved,
                                  (int)d);
    AT(float, V, ov)[y] = vx[d];
}

/* One query row (b, head h, s) per work group of WG items over keys
 * [lo, hi): causal hi = P + s + 1 (else T), lo = hi - window. Blocks of WG
 * keys: each item scores one (q . k * scale, softcap), then an online
 * softmax over blocks; item t accumulates output dims t, t + WG, ... A sink
 * logit (head_sink, or 0 for smooth_softmax) joins the denominator only.
 * Rows s >= Q (padding) are zero. Y is [B, S, Nq * H]. */
kernel void gqa_attend(global const uchar *QS, ulong oqs, long qrs, global const uchar *K, ulong ok,
                       global const uchar *V, ulong ov, global uchar *Y, ulong oy, global const uchar *C, ulong oc,
                       global const uchar *Sn, ulong osn, global const uchar *Sk, ulong osk, int rot, int interleaved,
                       gqa_lens lens, long b0, long S, long Nq, long Nkv, long Lc, long H, float scale, float softcap,
                       long window, int causal, int sink) {
    local float qv[GQA_HMAX], p[WG], red[WG];
    long bi = get_group_id(2), b = b0 + bi, hs = get_group_id(1), h = hs / S, s = hs % S;
    int t = get_local_id(0);
    int T = lens.T[bi], Q = lens.Q[bi], P = T - Q;
    global float *y = AT(float, Y, oy) + ((b * S + s) * Nq + h) * H;
    if (s >= Q) {
        for (long d = t; d < H; d += WG)
            y[d] = 0.0f;
        return;
    }
    global const float *qx = AT(const float, QS, oqs) + (b * S + s) * qrs + h * H;
    for (long d = t; d < H; d += WG)
        qv[d] = rope_at(qx, AT(const float, C, oc), AT(const float, Sn, osn), P + s, rot, interleaved, (int)d);
    barrier(CLK_LOCAL_MEM_FENCE);
    long hi = causal ? P + s + 1 : T, lo = window > 0 && hi > window ? hi - window : 0;
    long kvh = h / (Nq / Nkv);
    global const float *kb = AT(const float, K, ok) + (b * Nkv + kvh) * Lc * H;
    global const float *vb = AT(const float, V, ov) + (b * Nkv + kvh) * Lc * H;
    float m = -INFINITY, l = 0, acc[GQA_HMAX / WG];
    for (int i = 0; i < GQA_HMAX / WG; i++)
        acc[i] = 0;
    for (long j0 = lo; j0 < hi; j0 += WG) {
        long j = j0 + t;
        float sc = -INFINITY;
        if (j < hi) {
            global const float *kr = kb + j * H;
            float dot = 0;
            for (long d = 0; d < H; d++)
                dot += qv[d] * kr[d];
            sc = dot * scale;
            if (softcap > 0)
                sc = softcap * tanh(sc / softcap);
        }
        float mn = fmax(m, wg_reduce(red, sc, 1));
        float pj = j < hi ? exp(sc - mn) : 0.0f;
        p[t] = pj;
        float a = exp(m - mn);
        l = l * a + wg_reduce(red, pj, 0); /* its barriers also publish p */
        long nk = min((long)WG, hi - j0);
        for (int i = 0; i * WG + t < H; i++) {
            long d = i * WG + t;
            float v = 0;
            for (long jj = 0; jj < nk; jj++)
                v += p[jj] * vb[(j0 + jj) * H + d];
            acc[i] = acc[i] * a + v;
        }
        m = mn;
        barrier(CLK_LOCAL_MEM_FENCE); /* p is read before the next block writes it */
    }
    float inv_scale = 1.0f;
    if (sink) {
        float sv = sink > 1 ? AT(const float, Sk, osk)[h] : 0.0f, nm = fmax(m, sv);
        inv_scale = exp(m - nm);
        l = l * inv_scale + exp(sv - nm);
    }
    for (int i = 0; i * WG + t < H; i++)
        y[i * WG + t] = acc[i] * inv_scale / l;
}

/* RotaryEmbedding (com.microsoft, ONNX 23), fp32: one item per rotated pair
 * (i < rot/2) or passed-through dim (rot <= d < H) of a head row, so the
 * output may be the input's buffer. Row r of the caches: position_ids[b,
 * s] (pos_mode 0), ids[0] + s (1), or b * S + s with per-token caches (2,
 * ONNX without ids); a position outside them is reported. X and Y are
 * (B, S, N, H) (four_d 0) or (B, N, S, H): global (rot/2 + H - rot, N, B * S). */
kernel void rope(global const uchar *X, ulong ox, global const uchar *P, ulong op, global const uchar *C, ulong oc,
                 global const uchar *Sn, ulong osn, global uchar *Y, ulong oy, long S, long N, long H, int rot,
                 int interleaved, int four_d, int pos_mode, long max_pos, volatile global int *status) {
    long j = get_global_id(0), h = get_global_id(1), bs = get_global_id(2), hr = rot / 2;
    if (j >= hr + H - rot || h >= N)
        return;
    long b = bs / S, s = bs % S;
    long row = ((four_d ? (b * N + h) * S + s : bs * N + h)) * H;
    global const float *x = AT(const float, X, ox) + row;
    global float *y = AT(float, Y, oy) + row;
    if (j >= hr) { /* past the rotary dims */
        long d = rot + (j - hr);
        y[d] = x[d];
        return;
    }
    global const long *ids = AT(const long, P, op);
    long r = pos_mode == 0 ? ids[bs] : pos_mode == 1 ? ids[0] + s : bs;
    if (r < 0 || r >= max_pos) {
        if (j == 0 && h == 0)
            report_bad(status, 2, r, max_pos);
        return;
    }
    long i1 = interleaved ? 2 * j : j, i2 = interleaved ? 2 * j + 1 : j + hr;
    float c = AT(const float, C, oc)[r * hr + j], sn = AT(const float, Sn, osn)[r * hr + j];
    float a = x[i1], bb = x[i2];
    y[i1] = a * c - bb * sn;
    y[i2] = a * sn + bb * c;
}
