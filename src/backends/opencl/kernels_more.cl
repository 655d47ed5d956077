/* More of snug's OpenCL kernels (host side: kernels_more.c), after
 * kernels.cl in one program: its macros and helpers are in scope. */

BINARY(pow_, pow(a, b))
/* Max and Min as the CPU has them: a NaN in the first operand wins, one in
 * the second comes through the comparison being false */
BINARY(max_, (a > b || a != a) ? a : b)
BINARY(min_, (a < b || a != a) ? a : b)

UNARY(abs_, fabs(x))
UNARY(relu, x < 0 ? 0.0f : x)
UNARY(cos_, cos(x))
UNARY(sin_, sin(x))
UNARY(log_, log(x))
UNARY(floor_, floor(x))
UNARY(ceil_, ceil(x))

/* Flat element i of an output as offsets into two broadcast operands
 * (strides s0, s1). */
static void bcast2(const sn_shape *s, long i, long *ia, long *ib) {
    long a = 0, b = 0;
    for (int d = (int)s->rank - 1; d >= 0; d--) {
        long k = i % s->dims[d];
        i /= s->dims[d];
        a += k * s->s0[d];
        b += k * s->s1[d];
    }
    *ia = a, *ib = b;
}

/* The binary ops with a bool output: op 0 ==, 1 <, 2 >, 3 <=, 4 >= on
 * float32 (t 0) or int64 (t 1); op 5 and, 6 or, 7 xor on bool (t 2, any
 * nonzero byte true). Operands broadcast (s). */
kernel void bool_binary(global const uchar *A, ulong oa, global const uchar *B, ulong ob, global uchar *Y,
                        ulong oy, sn_shape s, int op, int t) {
    long i = get_global_id(0), ia, ib;
    if (i >= s.n)
        return;
    bcast2(&s, i, &ia, &ib);
    int r;
    if (t == 2) {
        int a = A[oa + ia] != 0, b = B[ob + ib] != 0;
        r = op == 5 ? a & b : op == 6 ? a | b : a ^ b;
    } else if (t == 1) {
        long a = AT(const long, A, oa)[ia], b = AT(const long, B, ob)[ib];
        r = op == 0 ? a == b : op == 1 ? a < b : op == 2 ? a > b : op == 3 ? a <= b : a >= b;
    } else {
        float a = AT(const float, A, oa)[ia], b = AT(const float, B, ob)[ib];
        r = op == 0 ? a == b : op == 1 ? a < b : op == 2 ? a > b : op == 3 ? a <= b : a >= b;
    }
    Y[oy + i] = (uchar)r;
}

kernel void not_(global const uchar *X, ulong ox, global uchar *Y, ulong oy, long n) {
    long i = get_global_id(0);
    if (i < n)
        Y[oy + i] = X[ox + i] == 0;
}

/* ---- Cast ------------------------------------------------------------------------ */

/* Codes of the dtypes Cast handles (kernels_more.c's cast_code). */
#define CF32 0
#define CF16 1
#define CI64 2
#define CI32 3
#define CBOOL 4

/* float16 bits to float32 and back exactly as the CPU converts (core's
 * sn_f16_to_f32, sn_f32_to_f16: round to nearest even, NaN kept quiet with
 * its top payload bits), by integer arithmetic. */
static float h2f(uint h) {
    uint sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (e == 0) {
        float v = (float)m * (1.0f / 16777216.0f);
        return as_float(as_uint(v) | sign);
    }
    if (e == 31)
        return as_float(sign | 0x7f800000u | (m << 13));
    return as_float(sign | ((e + 112) << 23) | (m << 13));
}

static ushort f2h(float f) {
    uint x = as_uint(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u)
        return (ushort)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0u));
    if (ax >= 0x477ff000u)
        return (ushort)(sign | 0x7c00u);
    if (ax < 0x38800000u)
        return (ushort)(sign | (uint)rint(as_float(ax) * 16777216.0f));
    uint h = (((ax >> 23) - 112) << 10) | ((ax & 0x7fffffu) >> 13), rest = ax & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1)))
        h++;
    return (ushort)(sign | h);
}

/* float -> integer as the CPU (x86) converts: truncated; NaN and values
 * outside int64 give INT64_MIN, narrower types keep the low bits (the
 * casts through uint below: defined in OpenCL C). */
static long f2i(float v) {
    return v == v && v >= -9.2233720368547758e18f && v < 9.2233720368547758e18f ? (long)v : LONG_MIN;
}

/* Y[i] = X[i] converted from dtype code `from` to `to`; bool in is any
 * nonzero byte. One dtype to itself copies the bits (bool's bytes too, as
 * the CPU's memmove). */
kernel void cast_(global const uchar *X, ulong ox, int from, global uchar *Y, ulong oy, int to, long n) {
    long i = get_global_id(0);
    if (i >= n)
        return;
    if (from == to) {
        if (to == CF32 || to == CI32)
            AT(uint, Y, oy)[i] = AT(const uint, X, ox)[i];
        else if (to == CI64)
            AT(ulong, Y, oy)[i] = AT(const ulong, X, ox)[i];
        else if (to == CF16)
            AT(ushort, Y, oy)[i] = AT(const ushort, X, ox)[i];
        else
            Y[oy + i] = X[ox + i];
        return;
    }
    if (from == CF32 || from == CF16) {
        float f = from == CF32 ? AT(const float, X, ox)[i] : h2f(AT(const ushort, X, ox)[i]);
        if (to == CF32)
            AT(float, Y, oy)[i] = f;
        else if (to == CF16)
            AT(ushort, Y, oy)[i] = f2h(f);
        else if (to == CI64)
            AT(long, Y, oy)[i] = f2i(f);
        else if (to == CI32)
            AT(int, Y, oy)[i] = as_int((uint)(ulong)f2i(f));
        else
            Y[oy + i] = f != 0.0f;
        return;
    }
    long v = from == CI64 ? AT(const long, X, ox)[i] : from == CI32 ? (long)AT(const int, X, ox)[i] : X[ox + i] != 0;
    if (to == CF32)
        AT(float, Y, oy)[i] = (float)v;
    else if (to == CF16)
        AT(ushort, Y, oy)[i] = f2h((float)v);
    else if (to == CI64)
        AT(long, Y, oy)[i] = v;
    else if (to == CI32)
        AT(int, Y, oy)[i] = as_int((uint)(ulong)v);
    else
        Y[oy + i] = v != 0;
}

/* ---- ReduceSum, ReduceMean, ReduceMax ------------------------------------------- */

/* A reduction after merging its axes: the kept dims (kd, their input
 * strides ks; n outputs in all) and the reduced ones (rd, rs; nred
 * elements folded into each output). */
typedef struct sn_red {
    long n, nred, kr, rr;
    long kd[8], ks[8], rd[8], rs[8];
} sn_red;

/* Input offset of flat index i over dims d (strides st). */
static long red_at(long i, long rank, const long *d, const long *st) {
    long off = 0;
    for (int k = (int)rank - 1; k >= 0; k--) {
        off += (i % d[k]) * st[k];
        i /= d[k];
    }
    return off;
}

/* op 0 sum, 1 mean, 2 max (a NaN wins, as on the CPU) */
static float red_step(float a, float v, int op) { return op == 2 ? (v > a || v != v ? v : a) : a + v; }

/* One work group per output (the reduced elements contiguous, or at least
 * not the innermost kept dim): items stride over them, then a tree. */
kernel void reduce_rows(global const uchar *X, ulong ox, global uchar *Y, ulong oy, sn_red r, int op) {
    local float red[WG];
    long o = get_group_id(0);
    int t = get_local_id(0);
    global const float *x = AT(const float, X, ox) + red_at(o, r.kr, r.kd, r.ks);
    float a = op == 2 ? -INFINITY : 0.0f;
    for (long j = t; j < r.nred; j += WG)
        a = red_step(a, x[red_at(j, r.rr, r.rd, r.rs)], op);
    red[t] = a;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = WG / 2; h > 0; h /= 2) {
        if (t < h)
            red[t] = red_step(red[t], red[t + h], op);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (t == 0)
        AT(float, Y, oy)[o] = op == 1 ? red[0] / (float)r.nred : red[0];
}

/* One item per output, for an innermost kept dim: neighbouring items read
 * neighbouring columns as each folds its reduced elements in turn. */
kernel void reduce_cols(global const uchar *X, ulong ox, global uchar *Y, ulong oy, sn_red r, int op) {
    long o = get_global_id(0);
    if (o >= r.n)
        return;
    global const float *x = AT(const float, X, ox) + red_at(o, r.kr, r.kd, r.ks);
    float a = op == 2 ? -INFINITY : 0.0f;
    for (long j = 0; j < r.nred; j++)
        a = red_step(a, x[red_at(j, r.rr, r.rd, r.rs)], op);
    AT(float, Y, oy)[o] = op == 1 ? a / (float)r.nred : a;
}

/* ---- Gemm ------------------------------------------------------------------------ */

/* Y (M x N) = alpha A' B' (+ beta C), A' = A or A^T (ta), B' likewise (tb),
 * in TS x TS tiles through local memory as matmul; C broadcast over [M, N]
 * by its strides csm, csn (0 along a broadcast dim). */
kernel void gemm(global const uchar *A, ulong oa, global const uchar *B, ulong ob, global const uchar *C, ulong oc,
                 global uchar *Y, ulong oy, long M, long N, long K, int ta, int tb, float alpha, float beta,
                 int has_c, long csm, long csn) {
    local float As[TS][TS], Bs[TS][TS];
    int lr = get_local_id(1), lc = get_local_id(0);
    long row = get_group_id(1) * TS + lr, col = get_group_id(0) * TS + lc;
    global const float *a = AT(const float, A, oa), *b = AT(const float, B, ob);
    float acc = 0;
    for (long k0 = 0; k0 < K; k0 += TS) {
        long ka = k0 + lc, kb = k0 + lr;
        As[lr][lc] = row < M && ka < K ? a[ta ? ka * M + row : row * K + ka] : 0.0f;
        Bs[lr][lc] = kb < K && col < N ? b[tb ? col * K + kb : kb * N + col] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int kk = 0; kk < TS; kk++)
            acc += As[lr][kk] * Bs[kk][lc];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < M && col < N)
        AT(float, Y, oy)[row * N + col] =
            alpha * acc + (has_c ? beta * AT(const float, C, oc)[row * csm + col * csn] : 0.0f);
}
