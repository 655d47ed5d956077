/* snug's OpenCL kernels, fp32, embedded into the library at build time
 * (CMakeLists.txt) and built once per context (opencl.c). Every tensor is a
 * buffer and a byte offset into it (the executor's pointer minus its
 * buffer's start, opencl.h); every kernel checks its range, so the global
 * size may round up to whole work groups. */

#define WG 64 /* work-group size of the row kernels (softmax, rmsnorm) */
#define TS 16 /* MatMul tile */

/* Up to 8 dims of an output and, per operand, its strides in elements
 * (0 along a broadcast dim): element-wise ops with broadcasting, Where,
 * Transpose (one operand, strides permuted), MatMul's batch dims. */
typedef struct sn_shape {
    long rank, n;
    long dims[8];
    long s0[8], s1[8], s2[8];
} sn_shape;

#define AT(T, buf, off) ((global T *)((buf) + (off)))

#define BINARY(name, expr)                                                                            \
    kernel void name(global const uchar *A, ulong oa, global const uchar *B, ulong ob, global uchar *Y, \
                     ulong oy, sn_shape s) {                                                          \
        long i = get_global_id(0);                                                                    \
        if (i >= s.n)                                                                                 \
            return;                                                                                   \
        long ia = 0, ib = 0, r = i;                                                                   \
        for (int d = (int)s.rank - 1; d >= 0; d--) {                                                  \
            long k = r % s.dims[d];                                                                   \
            r /= s.dims[d];                                                                           \
            ia += k * s.s0[d];                                                                        \
            ib += k * s.s1[d];                                                                        \
        }                                                                                             \
        float a = AT(const float, A, oa)[ia], b = AT(const float, B, ob)[ib];                         \
        AT(float, Y, oy)[i] = (expr);                                                                 \
    }
BINARY(add, a + b)
BINARY(sub, a - b)
BINARY(mul, a * b)
BINARY(div, a / b)

#define UNARY(name, expr)                                                                               \
    kernel void name(global const uchar *X, ulong ox, global uchar *Y, ulong oy, long n) {                \
        long i = get_global_id(0);                                                                      \
        if (i >= n)                                                                                     \
            return;                                                                                     \
        float x = AT(const float, X, ox)[i];                                                            \
        AT(float, Y, oy)[i] = (expr);                                                                   \
    }
UNARY(neg, -x)
UNARY(sqrt_, sqrt(x))
UNARY(recip, 1.0f / x)
UNARY(exp_, exp(x))
UNARY(sigmoid, x >= 0 ? 1.0f / (1.0f + exp(-x)) : exp(x) / (1.0f + exp(x)))
UNARY(tanh_, tanh(x))
UNARY(erf_, erf(x))

/* Where(cond, x, y): cond bytes (bool), x and y fp32, all broadcast. */
kernel void where_(global const uchar *C, ulong oc, global const uchar *A, ulong oa, global const uchar *B,
                   ulong ob, global uchar *Y, ulong oy, sn_shape s) {
    long i = get_global_id(0);
    if (i >= s.n)
        return;
    long ic = 0, ia = 0, ib = 0, r = i;
    for (int d = (int)s.rank - 1; d >= 0; d--) {
        long k = r % s.dims[d];
        r /= s.dims[d];
        ia += k * s.s0[d];
        ib += k * s.s1[d];
        ic += k * s.s2[d];
    }
    AT(float, Y, oy)[i] = AT(const uchar, C, oc)[ic] ? AT(const float, A, oa)[ia] : AT(const float, B, ob)[ib];
}

/* Sum (op 0) or maximum (op 1) of v over the work group, in every item. */
static float wg_reduce(local float *red, float v, int op) {
    int t = get_local_id(0);
    red[t] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = WG / 2; h > 0; h /= 2) {
        if (t < h)
            red[t] = op ? fmax(red[t], red[t + h]) : red[t] + red[t + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float out = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return out;
}

/* Softmax over rows of L: one work group of WG items per row. */
kernel void softmax(global const uchar *X, ulong ox, global uchar *Y, ulong oy, long L) {
    local float red[WG];
    long row = get_group_id(0);
    int t = get_local_id(0);
    global const float *x = AT(const float, X, ox) + row * L;
    global float *y = AT(float, Y, oy) + row * L;
    float m = -INFINITY;
    for (long j = t; j < L; j += WG)
        m = fmax(m, x[j]);
    m = wg_reduce(red, m, 1);
    float s = 0;
    for (long j = t; j < L; j += WG)
        s += exp(x[j] - m);
    s = wg_reduce(red, s, 0);
    for (long j = t; j < L; j += WG)
        y[j] = exp(x[j] - m) / s;
}

/* Element j of a row to normalize: x (+ skip) (+ bias, bs its stride). */
static float norm_in(global const float *x, global const float *sk, global const float *b, long bs, int has_skip,
                     int has_bias, long j) {
    return x[j] + (has_skip ? sk[j] : 0.0f) + (has_bias ? b[j * bs] : 0.0f);
}

/* Normalization of rows of L, one work group per row: v = x (+ skip row
 * r % srows) (+ bias); center (layer norm): y = (v - mean) / sqrt(var +
 * eps) * gamma (+ beta), the variance from a second pass over v - mean;
 * else (RMS): y = v / sqrt(mean(v^2) + eps) * gamma. sum gets v where
 * has_sum. gamma, beta and bias are L values or one (gs, bts, bs: their
 * strides, 1 or 0). */
kernel void norm(global const uchar *X, ulong ox, global const uchar *S, ulong os, long srows, global const uchar *G,
                 ulong og, long gs, global const uchar *Bt, ulong obt, long bts, global const uchar *Bi, ulong obi,
                 long bs, global uchar *Y, ulong oy, global uchar *Sum, ulong osum, int has_skip, int has_beta,
                 int has_bias, int has_sum, int center, long L, float eps) {
    local float red[WG];
    long row = get_group_id(0);
    int t = get_local_id(0);
    global const float *x = AT(const float, X, ox) + row * L;
    global const float *sk = AT(const float, S, os) + (has_skip ? row % srows : 0) * L;
    global const float *g = AT(const float, G, og), *be = AT(const float, Bt, obt), *b = AT(const float, Bi, obi);
    global float *y = AT(float, Y, oy) + row * L, *sum = AT(float, Sum, osum) + row * L;
    float mean = 0;
    if (center) {
        float s = 0;
        for (long j = t; j < L; j += WG)
            s += norm_in(x, sk, b, bs, has_skip, has_bias, j);
        mean = wg_reduce(red, s, 0) / (float)L;
    }
    float ss = 0;
    for (long j = t; j < L; j += WG) {
        float v = norm_in(x, sk, b, bs, has_skip, has_bias, j);
        if (has_sum)
            sum[j] = v;
        ss += (v - mean) * (v - mean);
    }
    float inv = 1.0f / sqrt(wg_reduce(red, ss, 0) / (float)L + eps);
    for (long j = t; j < L; j += WG) {
        float v = (norm_in(x, sk, b, bs, has_skip, has_bias, j) - mean) * inv * g[j * gs];
        y[j] = has_beta ? v + be[j * bts] : v;
    }
}

/* Y[batch] (M x N) = A[batch] (M x K) @ B[batch] (K x N), tiles of TS x TS
 * through local memory; batch dims in s (s0, s1: A's and B's batch strides
 * in elements, 0 where broadcast). */
kernel void matmul(global const uchar *A, ulong oa, global const uchar *B, ulong ob, global uchar *Y, ulong oy,
                   long M, long N, long K, sn_shape s) {
    local float As[TS][TS], Bs[TS][TS];
    int lr = get_local_id(1), lc = get_local_id(0);
    long row = get_group_id(1) * TS + lr, col = get_group_id(0) * TS + lc, bt = get_global_id(2);
    long ia = 0, ib = 0, r = bt;
    for (int d = (int)s.rank - 1; d >= 0; d--) {
        long k = r % s.dims[d];
        r /= s.dims[d];
        ia += k * s.s0[d];
        ib += k * s.s1[d];
    }
    global const float *a = AT(const float, A, oa) + ia;
    global const float *b = AT(const float, B, ob) + ib;
    float acc = 0;
    for (long k0 = 0; k0 < K; k0 += TS) {
        As[lr][lc] = row < M && k0 + lc < K ? a[row * K + k0 + lc] : 0.0f;
        Bs[lr][lc] = k0 + lr < K && col < N ? b[(k0 + lr) * N + col] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int kk = 0; kk < TS; kk++)
            acc += As[lr][kk] * Bs[kk][lc];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < M && col < N)
        AT(float, Y, oy)[bt * M * N + row * N + col] = acc;
}

/* matmul's product for few rows (decode: M of 1 to 7), where 16 x 16 tiles
 * would idle 15 of 16 rows: an item per output column n of row m, B read
 * along its rows by neighbouring items. */
kernel void matmul_rows(global const uchar *A, ulong oa, global const uchar *B, ulong ob, global uchar *Y,
                        ulong oy, long M, long N, long K, sn_shape s) {
    long col = get_global_id(0), row = get_global_id(1), bt = get_global_id(2);
    if (col >= N)
        return;
    long ia = 0, ib = 0, r = bt;
    for (int d = (int)s.rank - 1; d >= 0; d--) {
        long k = r % s.dims[d];
        r /= s.dims[d];
        ia += k * s.s0[d];
        ib += k * s.s1[d];
    }
    global const float *a = AT(const float, A, oa) + ia + row * K;
    global const float *b = AT(const float, B, ob) + ib + col;
    float acc = 0;
    for (long k = 0; k < K; k++)
        acc += a[k] * b[k * N];
    AT(float, Y, oy)[bt * M * N + row * N + col] = acc;
}

/* Y[i] = X[the element that lands at i]: s0 holds X's strides as seen
 * from Y's dims (permuted: Transpose; stepped and offset: Slice; 0 along
 * a broadcast dim: Expand). Elements of esz bytes (1, 2, 4 or 8). */
kernel void transpose(global const uchar *X, ulong ox, global uchar *Y, ulong oy, sn_shape s, int esz) {
    long i = get_global_id(0);
    if (i >= s.n)
        return;
    long ix = 0, r = i;
    for (int d = (int)s.rank - 1; d >= 0; d--) {
        ix += (r % s.dims[d]) * s.s0[d];
        r /= s.dims[d];
    }
    if (esz == 4)
        AT(uint, Y, oy)[i] = AT(const uint, X, ox)[ix];
    else if (esz == 8)
        AT(ulong, Y, oy)[i] = AT(const ulong, X, ox)[ix];
    else if (esz == 2)
        AT(ushort, Y, oy)[i] = AT(const ushort, X, ox)[ix];
    else
        Y[oy + i] = X[ox + ix];
}

/* rows x w bytes: Y[r * yw + j] = X[r * xw + j] (Concat's pieces). */
kernel void copy2d(global const uchar *X, ulong ox, long xw, global uchar *Y, ulong oy, long yw, long rows, long w) {
    long j = get_global_id(0), r = get_global_id(1);
    if (j < w && r < rows)
        Y[oy + r * yw + j] = X[ox + r * xw + j];
}

/* Bad data a kernel found (opencl.h's SN_CL_BAD_*, with two values): the
 * first report stays in the status word, which synchronize turns into the
 * run's error. */
static void report_bad(volatile global int *status, int code, long a, long b) {
    if (atomic_cmpxchg(status, 0, -1) == 0) {
        status[1] = (int)a;
        status[2] = (int)b;
        mem_fence(CLK_GLOBAL_MEM_FENCE);
        atomic_xchg(status, code);
    }
}

/* Gather along an axis: Y[o, q, in] = X[o, idx[q] (negative from the end), in],
 * with outer o, nq indices q (int64 or int32: i64), inner bytes `inner`.
 * An index out of range is reported (the run fails, as on the CPU). */
kernel void gather(global const uchar *X, ulong ox, global const uchar *I, ulong oi, int i64, global uchar *Y,
                   ulong oy, long outer, long axis_n, long nq, long inner, volatile global int *status) {
    long j = get_global_id(0), q = get_global_id(1), o = get_global_id(2);
    if (j >= inner || q >= nq || o >= outer)
        return;
    long k0 = i64 ? AT(const long, I, oi)[q] : (long)AT(const int, I, oi)[q], k = k0 < 0 ? k0 + axis_n : k0;
    bool in = k >= 0 && k < axis_n;
    if (!in && j == 0 && o == 0)
        report_bad(status, 1, k0, axis_n);
    Y[oy + (o * nq + q) * inner + j] = in ? X[ox + (o * axis_n + k) * inner + j] : 0;
}

/* Row m of A against column n's blocks first, first + step, ..: the sum of
 * a (c - z) s over them (MatMulNBits' layout, below). */
static float mnb_blocks(global const uchar *A, ulong oa, global const uchar *B, ulong ob, global const uchar *S,
                        ulong os, global const uchar *Z, ulong oz, long n, long m, long K, int bits, int bs,
                        int has_zp, long zst, long first, long step) {
    long kb = (K + bs - 1) / bs, blob = (long)bs * bits / 8;
    global const float *a = AT(const float, A, oa) + m * K;
    global const uchar *q = B + ob + n * kb * blob;
    global const float *sc = AT(const float, S, os) + n * kb;
    global const uchar *zp = Z + oz + n * zst;
    float acc = 0;
    for (long b = first; b < kb; b += step) {
        int z = 1 << (bits - 1);
        if (has_zp)
            z = bits == 8 ? zp[b] : (zp[b >> 1] >> ((b & 1) * 4)) & 15;
        long k0 = b * bs, kn = min((long)bs, K - k0);
        global const uchar *qb = q + b * blob;
        float s = 0;
        for (long k = 0; k < kn; k++) {
            int c = bits == 8 ? qb[k] : (qb[k >> 1] >> ((k & 1) * 4)) & 15;
            s += a[k0 + k] * (float)(c - z);
        }
        acc += s * sc[b];
    }
    return acc;
}

/* MatMulNBits (com.microsoft), in float: Y[m, n] = sum over k of A[m, k]
 * (c - z) s + bias[n], c the bits-bit code of column n at k (B [N, kb,
 * blob], little nibble first for 4 bits), s and z block (k / bs)'s scale
 * (S [N, kb]) and zero point (Z packed like the codes, rows zst bytes
 * apart; absent: 2^(bits - 1)). One work-group of 64 per output element:
 * item l takes blocks l, l + 64, ..; then a tree over the 64 partial sums. */
#define MNB_WG 64
kernel void matmulnbits(global const uchar *A, ulong oa, global const uchar *B, ulong ob, global const uchar *S,
                        ulong os, global const uchar *Z, ulong oz, global const uchar *Bi, ulong obi,
                        global uchar *Y, ulong oy, long N, long K, int bits, int bs, int has_zp, int has_bias,
                        long zst) {
    local float part[MNB_WG];
    long n = get_group_id(0), m = get_global_id(1);
    int l = get_local_id(0);
    float acc = mnb_blocks(A, oa, B, ob, S, os, Z, oz, n, m, K, bits, bs, has_zp, zst, l, MNB_WG);
    part[l] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int w = MNB_WG / 2; w > 0; w >>= 1) {
        if (l < w)
            part[l] += part[l + w];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0)
        AT(float, Y, oy)[m * N + n] = part[0] + (has_bias ? AT(const float, Bi, obi)[n] : 0.0f);
}

/* matmulnbits with an item per output element, its column's blocks in
 * turn: where a column has fewer blocks than matmulnbits' 64 items (18 at
 * K = 576, blocks of 32), and for many rows. */
kernel void matmulnbits_rows(global const uchar *A, ulong oa, global const uchar *B, ulong ob, global const uchar *S,
                             ulong os, global const uchar *Z, ulong oz, global const uchar *Bi, ulong obi,
                             global uchar *Y, ulong oy, long N, long K, int bits, int bs, int has_zp, int has_bias,
                             long zst) {
    long n = get_global_id(0), m = get_global_id(1);
    if (n >= N)
        return;
    float acc = mnb_blocks(A, oa, B, ob, S, os, Z, oz, n, m, K, bits, bs, has_zp, zst, 0, 1);
    AT(float, Y, oy)[m * N + n] = acc + (has_bias ? AT(const float, Bi, obi)[n] : 0.0f);
}
