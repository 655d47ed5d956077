/* Matrix products: MatMul, Gemm, MatMulInteger, QLinearMatMul.
 * float32 goes through the blocked sgemm (gemm.h); other types use plain
 * loops with a wide accumulator (double for floats, wrapping 64-bit for
 * integers). */
#include <math.h>
#include <string.h>

#include "ops/gemm.h"
#include "ops/linalg/gemm_ops.h"
#include "ops/linalg/linalg.h"

/* ---- generic 2-D products -------------------------------------------------- */

/* C[M,N] = A[M,K] * B[K,N] for one matrix of any numeric type (not f32 fast
 * path); a/b/c point at the matrix's first element. */
static void mm2d_generic(sn_dtype t, const void *a, const void *b, void *c, int64_t M, int64_t N,
                         int64_t K) {
    if (t == SN_F64) {
        const double *A = a, *B = b;
        double *C = c;
        for (int64_t i = 0; i < M; i++) {
            double *crow = C + i * N;
            for (int64_t j = 0; j < N; j++)
                crow[j] = 0;
            for (int64_t p = 0; p < K; p++) {
                double av = A[i * K + p];
                const double *brow = B + p * N;
                for (int64_t j = 0; j < N; j++)
                    crow[j] += av * brow[j];
            }
        }
        return;
    }
    if (sn_dtype_is_float(t)) {
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double s = 0;
                for (int64_t p = 0; p < K; p++)
                    s += sn_load_f64(t, a, (size_t)(i * K + p)) * sn_load_f64(t, b, (size_t)(p * N + j));
                sn_store_f64(t, c, (size_t)(i * N + j), s);
            }
        return;
    }
    /* integers: two's complement wrap-around, like numpy */
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            uint64_t s = 0;
            for (int64_t p = 0; p < K; p++)
                s += (uint64_t)sn_load_i64(t, a, (size_t)(i * K + p)) *
                     (uint64_t)sn_load_i64(t, b, (size_t)(p * N + j));
            size_t o = (size_t)(i * N + j);
            switch (t) {
            case SN_I8: case SN_U8: case SN_BOOL: ((uint8_t *)c)[o] = (uint8_t)s; break;
            case SN_I16: case SN_U16: ((uint16_t *)c)[o] = (uint16_t)s; break;
            case SN_I32: case SN_U32: ((uint32_t *)c)[o] = (uint32_t)s; break;
            default: ((uint64_t *)c)[o] = s; break;
            }
        }
}

static bool mm_dtype_ok(sn_dtype t) {
    switch (t) {
    case SN_F32: case SN_F64: case SN_F16: case SN_BF16:
    case SN_I32: case SN_I64: case SN_U32: case SN_U64:
    case SN_I8: case SN_U8: case SN_I16: case SN_U16:
        return true;
    default:
        return false;
    }
}

/* ---- MatMul ------------------------------------------------------------------ */

int la_matmul_infer(sn_infer_ctx *c) {
    const sn_tensor *a = c->in[0], *b = c->in[1];
    if (c->n_in < 2 || !a || !b)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "needs inputs A and B");
    if (a->dtype != b->dtype)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "A is %s but B is %s", sn_dtype_name(a->dtype),
                        sn_dtype_name(b->dtype));
    if (!mm_dtype_ok(a->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "type %s not supported", sn_dtype_name(a->dtype));
    if (a->rank == SN_RANK_UNKNOWN || b->rank == SN_RANK_UNKNOWN) {
        sn_set_out(c->out[0], a->dtype, SN_RANK_UNKNOWN, NULL);
        return SNUG_OK;
    }
    gk_mm p;
    SN_TRY(gk_mm_plan(c->node, c->err, a, b, &p));
    sn_set_out(c->out[0], a->dtype, p.out_rank, p.out_dims);
    return SNUG_OK;
}

/* One sgemm covers the whole product when B is a single matrix and A's
 * batch is not broadcast: A's rows just stack up (M' = batch * M). */
static bool mm_fold_batch(const gk_mm *p) { return p->nbm == 1 && p->na == p->n_batch; }

/* A constant B is packed once, here, into the panels the micro-kernel
 * reads: the blocked product then never packs B per call, and the one-row
 * product (decode) streams four panels side by side instead of B's long
 * rows. The packed copy replaces the original (c->replaces): its rows are
 * handed back as they are packed, so the weight is resident once, packed.
 * Only in a plan that serves many runs (c->long_lived: made at input
 * bounds, as an LLM's step loop is): packing is a pass over every weight,
 * five times a one-shot run of SmolLM2-135M. Also when the planned product
 * has one row: the one-row product over packed B streams panels (and gives
 * the bits of that row of the blocked product, so an output projection
 * planned for the last position only, snug.last_logits, gives the logits
 * the whole projection would). */
#define MM_PREPACK_MIN_N 16

static bool mm_prepack_worth(const sn_prep_ctx *c, const gk_mm *p, const sn_tensor *b, int64_t M) {
    (void)M;
    return c->long_lived && !(c->streamed & (1u << 1)) && b->data && b->rank == 2 && p->nbm == 1 && p->N >= MM_PREPACK_MIN_N && p->K > 0;
}

typedef struct mm_packed {
    void *data;   /* sn_sgemm_pack_b's block (sn_pages_reserve) */
    size_t bytes;
} mm_packed;

void la_mm_packed_free(void *state) {
    mm_packed *st = state;
    if (!st)
        return;
    sn_pages_free(st->data, st->bytes, 0);
    sn_free(st);
}

/* A batch of products each too small to be worth threads (sn_sgemm_serial:
 * the attention products of a prefill, one per head) runs its entries side
 * by side instead, each on one thread in a workspace slot of its own. */
static bool mm_batch_split(const gk_mm *p, int threads) {
    return !mm_fold_batch(p) && p->n_batch > 1 && threads > 1 && sn_sgemm_serial(p->M, p->N, p->K);
}

/* Bytes of one slot of the split batch: an int claim flag, then the product's
 * one-thread workspace, both kept 64-byte aligned. */
static size_t mm_slot_bytes(const gk_mm *p) {
    return 64 + sn_align64(sn_sgemm_workspace(p->M, p->N, p->K, 1));
}

static size_t mm_workspace(const gk_mm *p, int threads) {
    int64_t M = mm_fold_batch(p) ? p->M * p->n_batch : p->M;
    size_t ws = sn_sgemm_workspace(M, p->N, p->K, threads);
    /* also when this size is not split: a run with fewer rows (a plan made
     * at an input bound) may be, in the same workspace */
    if (!mm_fold_batch(p) && p->n_batch > 1 && threads > 1) {
        size_t split = 64 + (size_t)threads * mm_slot_bytes(p);
        ws = ws > split ? ws : split;
    }
    return ws;
}

typedef struct mm_batch_job {
    const gk_mm *p;
    const float *A, *B;
    float *Y;
    char *slots; /* aligned to 64 */
    int n_slots;
    size_t slot_bytes;
} mm_batch_job;

static void mm_batch_task(void *arg, int64_t b0, int64_t b1) {
    const mm_batch_job *j = arg;
    const gk_mm *p = j->p;
    int slot = 0;
    while (__atomic_exchange_n((int *)(j->slots + (size_t)slot * j->slot_bytes), 1, __ATOMIC_ACQUIRE))
        slot = (slot + 1) % j->n_slots; /* a pool larger than the slots: wait for one */
    char *s = j->slots + (size_t)slot * j->slot_bytes;
    for (int64_t bi = b0; bi < b1; bi++) {
        int64_t oa, ob;
        gk_mm_offsets(p, bi, &oa, &ob);
        sn_sgemm_ws(0, 0, p->M, p->N, p->K, 1.0f, j->A + oa * p->M * p->K, p->K, j->B + ob * p->K * p->N, p->N,
                    0.0f, j->Y + bi * p->M * p->N, p->N, NULL, s + 64, j->slot_bytes - 64);
    }
    __atomic_store_n((int *)s, 0, __ATOMIC_RELEASE);
}

int la_matmul_prepare(sn_prep_ctx *c) {
    if (c->in[0]->dtype != SN_F32)
        return SNUG_OK;
    gk_mm p;
    SN_TRY(gk_mm_plan(c->node, c->err, c->in[0], c->in[1], &p));
    int64_t M = mm_fold_batch(&p) ? p.M * p.n_batch : p.M;
    c->workspace = mm_workspace(&p, c->n_threads);
    if (mm_fold_batch(&p) && mm_prepack_worth(c, &p, c->in[1], M)) {
        size_t nb = sn_sgemm_pack_b_bytes(SN_GEMM_ISA_BEST, p.N, p.K);
        if (c->dry) { /* what the packed copy would hold, and that it replaces B */
            c->state_bytes = sn_pages_size(nb); /* in whole pages (sn_rebuild_end) */
            c->replaces = 1u << 1;
            return SNUG_OK;
        }
        mm_packed *st = sn_calloc(1, sizeof *st);
        sn_rebuild r;
        if (!st || !sn_rebuild_begin(&r, c, nb, (size_t)p.K * (size_t)p.N * sizeof(float))) {
            sn_free(st); /* the unpacked path needs no state: run without */
            return SNUG_OK;
        }
        /* B's rows handed back slice by slice as they are packed */
        sn_sgemm_pack_b(SN_GEMM_ISA_BEST, 0, p.N, p.K, c->in[1]->data, p.N, r.block, sn_rebuild_part, &r);
        sn_rebuild_end(&r, c, 1); /* run reads the packed copy only */
        st->data = r.block;
        st->bytes = nb;
        c->state = st;
    }
    return SNUG_OK;
}

/* Level 1: the figure prepare will declare, from the inferred shapes. */
size_t la_matmul_estimate(const sn_infer_ctx *c) {
    if (c->n_in < 2 || !c->in[0] || !c->in[1] || c->in[0]->dtype != SN_F32 ||
        !sn_tensor_shape_known(c->in[0]) || !sn_tensor_shape_known(c->in[1]))
        return 0;
    gk_mm p;
    if (gk_mm_plan(c->node, NULL, c->in[0], c->in[1], &p) != SNUG_OK)
        return 0;
    return mm_workspace(&p, sn_gemm_threads(c->n_threads));
}

int la_matmul_run(sn_kctx *c) {
    const sn_tensor *a = c->in[0], *b = c->in[1];
    sn_tensor *y = c->out[0];
    gk_mm p;
    SN_TRY(gk_mm_plan(c->node, c->err, a, b, &p));
    int64_t M = p.M, N = p.N, K = p.K;
    if (sn_in_numel(y) == 0)
        return SNUG_OK;
    if (a->dtype == SN_F32) {
        const float *A = a->data, *B = b->data;
        float *Y = y->data;
        if (mm_fold_batch(&p) && c->state) { /* B packed by prepare */
            int64_t Mf = M * p.n_batch;
            sn_sgemm_packed_ws(0, Mf, 1.0f, A, K, ((const mm_packed *)c->state)->data, 0.0f, Y, N, c->pool, c->ws,
                               sn_sgemm_workspace(Mf, N, K, sn_pool_size(c->pool)));
            return SNUG_OK;
        }
        if (mm_fold_batch(&p)) {
            int64_t Mf = M * p.n_batch;
            sn_sgemm_ws(0, 0, Mf, N, K, 1.0f, A, K, B, N, 0.0f, Y, N, c->pool, c->ws,
                        sn_sgemm_workspace(Mf, N, K, sn_pool_size(c->pool)));
            return SNUG_OK;
        }
        int threads = sn_pool_size(c->pool);
        if (mm_batch_split(&p, threads)) {
            uintptr_t base = ((uintptr_t)c->ws + 63) & ~(uintptr_t)63;
            mm_batch_job j = {&p, A, B, Y, (char *)base, threads, mm_slot_bytes(&p)};
            for (int t = 0; t < threads; t++)
                *(int *)(j.slots + (size_t)t * j.slot_bytes) = 0;
            sn_pool_for(c->pool, p.n_batch, 1, mm_batch_task, &j);
            return SNUG_OK;
        }
        size_t wsn = sn_sgemm_workspace(M, N, K, threads);
        for (int64_t bi = 0; bi < p.n_batch; bi++) {
            int64_t oa, ob;
            gk_mm_offsets(&p, bi, &oa, &ob);
            sn_sgemm_ws(0, 0, M, N, K, 1.0f, A + oa * M * K, K, B + ob * K * N, N, 0.0f,
                        Y + bi * M * N, N, c->pool, c->ws, wsn);
        }
        return SNUG_OK;
    }
    size_t es = sn_dtype_size(a->dtype);
    for (int64_t bi = 0; bi < p.n_batch; bi++) {
        int64_t oa, ob;
        gk_mm_offsets(&p, bi, &oa, &ob);
        mm2d_generic(a->dtype, (const char *)a->data + (size_t)(oa * M * K) * es,
                     (const char *)b->data + (size_t)(ob * K * N) * es,
                     (char *)y->data + (size_t)(bi * M * N) * es, M, N, K);
    }
    return SNUG_OK;
}

/* ---- Gemm ---------------------------------------------------------------------- */

typedef struct gemm_dims {
    int64_t M, N, K;
    int ta, tb;
} gemm_dims;

static int gemm_shape(const sn_node *node, sn_err *err, const sn_tensor *a, const sn_tensor *b,
                      const sn_tensor *cc, gemm_dims *g) {
    g->ta = sn_attr_int(node, "transA", 0) != 0;
    g->tb = sn_attr_int(node, "transB", 0) != 0;
    if (a->rank != 2 || b->rank != 2)
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "A and B must be 2-D (got rank %d and %d)", a->rank, b->rank);
    g->M = a->dims[g->ta ? 1 : 0];
    int64_t ka = a->dims[g->ta ? 0 : 1];
    int64_t kb = b->dims[g->tb ? 1 : 0];
    g->N = b->dims[g->tb ? 0 : 1];
    if (sn_dim_known(ka) && sn_dim_known(kb) && ka != kb)
        return sn_kfail(err, node, SNUG_ERR_SHAPE, "inner dimensions differ: %lld vs %lld", (long long)ka,
                        (long long)kb);
    g->K = sn_dim_known(ka) ? ka : kb;
    if (cc && cc->rank != SN_RANK_UNKNOWN) {
        if (cc->rank > 2)
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "C must have rank <= 2, got %d", cc->rank);
        /* unidirectional broadcast of C to [M, N] */
        int64_t cm = cc->rank == 2 ? cc->dims[0] : 1, cn = cc->rank >= 1 ? cc->dims[cc->rank - 1] : 1;
        if ((sn_dim_known(cm) && cm != 1 && sn_dim_known(g->M) && cm != g->M) ||
            (sn_dim_known(cn) && cn != 1 && sn_dim_known(g->N) && cn != g->N))
            return sn_kfail(err, node, SNUG_ERR_SHAPE, "C of shape [%lld,%lld] does not broadcast to [%lld,%lld]",
                            (long long)cm, (long long)cn, (long long)g->M, (long long)g->N);
    }
    return SNUG_OK;
}

int la_gemm_infer(sn_infer_ctx *c) {
    if (c->n_in < 2 || !c->in[0] || !c->in[1])
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "needs inputs A and B");
    const sn_tensor *a = c->in[0], *b = c->in[1], *cc = sn_in(c->in, c->n_in, 2);
    if (a->dtype != b->dtype || (cc && cc->dtype != a->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "A, B and C must have the same type");
    if (!mm_dtype_ok(a->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_UNSUPPORTED, "type %s not supported", sn_dtype_name(a->dtype));
    if (a->rank == SN_RANK_UNKNOWN || b->rank == SN_RANK_UNKNOWN) {
        int64_t d[2] = {SN_DIM_UNKNOWN, SN_DIM_UNKNOWN};
        sn_set_out(c->out[0], a->dtype, 2, d);
        return SNUG_OK;
    }
    gemm_dims g = {0};
    SN_TRY(gemm_shape(c->node, c->err, a, b, cc, &g));
    int64_t d[2] = {g.M, g.N};
    sn_set_out(c->out[0], a->dtype, 2, d);
    return SNUG_OK;
}

int la_gemm_prepare(sn_prep_ctx *c) {
    if (c->in[0]->dtype != SN_F32)
        return SNUG_OK;
    gemm_dims g = {0};
    SN_TRY(gemm_shape(c->node, c->err, c->in[0], c->in[1], sn_in(c->in, c->n_in, 2), &g));
    c->workspace = sn_sgemm_workspace(g.M, g.N, g.K, c->n_threads);
    return SNUG_OK;
}

size_t la_gemm_estimate(const sn_infer_ctx *c) {
    if (c->n_in < 2 || !c->in[0] || !c->in[1] || c->in[0]->dtype != SN_F32 ||
        !sn_tensor_shape_known(c->in[0]) || !sn_tensor_shape_known(c->in[1]))
        return 0;
    gemm_dims g = {0};
    if (gemm_shape(c->node, NULL, c->in[0], c->in[1], sn_in(c->in, c->n_in, 2), &g) != SNUG_OK)
        return 0;
    return sn_sgemm_workspace(g.M, g.N, g.K, sn_gemm_threads(c->n_threads));
}

int la_gemm_run(sn_kctx *c) {
    const sn_tensor *a = c->in[0], *b = c->in[1], *cc = sn_in(c->in, c->n_in, 2);
    sn_tensor *y = c->out[0];
    gemm_dims g = {0};
    SN_TRY(gemm_shape(c->node, c->err, a, b, cc, &g));
    float alpha = sn_attr_float(c->node, "alpha", 1.0f);
    float beta = sn_attr_float(c->node, "beta", 1.0f);
    int64_t M = g.M, N = g.N, K = g.K;
    if (M == 0 || N == 0)
        return SNUG_OK;
    if (cc && sn_in_numel(cc) == 0)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "C is empty");
    /* C's strides over [M, N]: 0 where it broadcasts */
    int64_t csm = 0, csn = 0;
    if (cc) {
        int64_t cm = cc->rank == 2 ? cc->dims[0] : 1, cn = cc->rank >= 1 ? cc->dims[cc->rank - 1] : 1;
        csn = cn == 1 ? 0 : 1;
        csm = cm == 1 ? 0 : cn;
    }
    int64_t lda = a->dims[1], ldb = b->dims[1];
    if (a->dtype == SN_F32) {
        float *Y = y->data;
        float bt = 0.0f;
        if (cc && beta != 0.0f) {
            const float *C = cc->data;
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++)
                    Y[i * N + j] = C[i * csm + j * csn];
            bt = beta;
        }
        sn_sgemm_ws(g.ta, g.tb, M, N, K, alpha, a->data, lda, b->data, ldb, bt, Y, N, c->pool, c->ws,
                    sn_sgemm_workspace(M, N, K, sn_pool_size(c->pool)));
        return SNUG_OK;
    }
    sn_dtype t = a->dtype;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0;
            for (int64_t p = 0; p < K; p++)
                s += sn_load_f64(t, a->data, (size_t)(g.ta ? p * lda + i : i * lda + p)) *
                     sn_load_f64(t, b->data, (size_t)(g.tb ? j * ldb + p : p * ldb + j));
            s *= alpha;
            if (cc && beta != 0.0f)
                s += beta * sn_load_f64(t, cc->data, (size_t)(i * csm + j * csn));
            sn_store_f64(t, y->data, (size_t)(i * N + j), s);
        }
    return SNUG_OK;
}

/* ---- MatMulInteger, QLinearMatMul -------------------------------------------- */

static bool is_q8(sn_dtype t) { return t == SN_U8 || t == SN_I8; }

/* A zero point or scale for per-row (A) / per-column (B) quantization:
 * scalar, [M] / [N], or the full batch shape with a 1 in the other spot.
 * Returns the element index for (batch matrix, row-or-col index). */
typedef struct qparam {
    const sn_tensor *t; /* NULL: absent (0 zero point) */
    int64_t n;          /* elements */
    int64_t per;        /* M or N when per-row/col, else 0 */
} qparam;

static int qparam_make(const sn_node *node, sn_err *err, const sn_tensor *t, int64_t per,
                       int64_t n_mats, const char *what, qparam *q) {
    q->t = t;
    q->n = t ? sn_in_numel(t) : 0;
    q->per = 0;
    if (!t || q->n == 1)
        return SNUG_OK;
    if (q->n == per || q->n == per * n_mats) {
        q->per = per;
        return SNUG_OK;
    }
    return sn_kfail(err, node, SNUG_ERR_SHAPE, "%s has %lld elements; expected 1 or %lld", what,
                    (long long)q->n, (long long)per);
}

static inline int64_t qparam_idx(const qparam *q, int64_t mat, int64_t i) {
    if (!q->per)
        return 0;
    return q->n == q->per ? i : mat * q->per + i;
}

int la_mmi_infer(sn_infer_ctx *c) {
    const sn_tensor *a = c->in[0], *b = sn_in(c->in, c->n_in, 1);
    if (!a || !b)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "needs inputs A and B");
    if (!is_q8(a->dtype) || !is_q8(b->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "A and B must be int8 or uint8");
    const sn_tensor *az = sn_in(c->in, c->n_in, 2), *bz = sn_in(c->in, c->n_in, 3);
    if ((az && az->dtype != a->dtype) || (bz && bz->dtype != b->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "zero points must match their input's type");
    if (a->rank == SN_RANK_UNKNOWN || b->rank == SN_RANK_UNKNOWN) {
        sn_set_out(c->out[0], SN_I32, SN_RANK_UNKNOWN, NULL);
        return SNUG_OK;
    }
    gk_mm p;
    SN_TRY(gk_mm_plan(c->node, c->err, a, b, &p));
    sn_set_out(c->out[0], SN_I32, p.out_rank, p.out_dims);
    return SNUG_OK;
}

/* Integer product of one batch entry: acc[i][j] = sum (a - za_i)(b - zb_j). */
static inline int32_t qdot(const sn_tensor *a, const sn_tensor *b, size_t ao, size_t bo, int64_t K,
                           int64_t N, int32_t za, int32_t zb) {
    uint32_t s = 0; /* wraps like int32 accumulators do, without UB */
    for (int64_t p = 0; p < K; p++) {
        int32_t av = (int32_t)sn_load_i64(a->dtype, a->data, ao + (size_t)p) - za;
        int32_t bv = (int32_t)sn_load_i64(b->dtype, b->data, bo + (size_t)(p * N)) - zb;
        s += (uint32_t)(av * bv);
    }
    return (int32_t)s;
}

int la_mmi_run(sn_kctx *c) {
    const sn_tensor *a = c->in[0], *b = c->in[1];
    const sn_tensor *az = sn_in(c->in, c->n_in, 2), *bz = sn_in(c->in, c->n_in, 3);
    gk_mm p;
    SN_TRY(gk_mm_plan(c->node, c->err, a, b, &p));
    qparam qa, qb;
    SN_TRY(qparam_make(c->node, c->err, az, p.M, p.na, "a_zero_point", &qa));
    SN_TRY(qparam_make(c->node, c->err, bz, p.N, p.nbm, "b_zero_point", &qb));
    int32_t *Y = c->out[0]->data;
    int64_t M = p.M, N = p.N, K = p.K;
    for (int64_t bi = 0; bi < p.n_batch; bi++) {
        int64_t oa, ob;
        gk_mm_offsets(&p, bi, &oa, &ob);
        for (int64_t i = 0; i < M; i++) {
            int32_t za = az ? (int32_t)sn_load_i64(az->dtype, az->data, (size_t)qparam_idx(&qa, oa, i)) : 0;
            for (int64_t j = 0; j < N; j++) {
                int32_t zb = bz ? (int32_t)sn_load_i64(bz->dtype, bz->data, (size_t)qparam_idx(&qb, ob, j)) : 0;
                Y[(bi * M + i) * N + j] =
                    qdot(a, b, (size_t)(oa * M * K + i * K), (size_t)(ob * K * N + j), K, N, za, zb);
            }
        }
    }
    return SNUG_OK;
}

/* Saturating round-half-to-even into a quantized type. */
static inline void q_store(sn_dtype t, void *d, size_t i, double v) {
    v = nearbyint(v);
    if (t == SN_U8)
        ((uint8_t *)d)[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
    else
        ((int8_t *)d)[i] = (int8_t)(v < -128 ? -128 : v > 127 ? 127 : v);
}

/* inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point */
int la_qlmm_infer(sn_infer_ctx *c) {
    if (c->n_in < 8)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "needs 8 inputs");
    for (int i = 0; i < 8; i++)
        if (!c->in[i])
            return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "input %d is required", i);
    const sn_tensor *a = c->in[0], *b = c->in[3];
    if (!is_q8(a->dtype) || !is_q8(b->dtype) || !is_q8(c->in[7]->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "a, b and y_zero_point must be int8 or uint8");
    if (c->in[1]->dtype != SN_F32 || c->in[4]->dtype != SN_F32 || c->in[6]->dtype != SN_F32)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "scales must be float32");
    sn_dtype yt = c->in[7]->dtype;
    if (a->rank == SN_RANK_UNKNOWN || b->rank == SN_RANK_UNKNOWN) {
        sn_set_out(c->out[0], yt, SN_RANK_UNKNOWN, NULL);
        return SNUG_OK;
    }
    gk_mm p;
    SN_TRY(gk_mm_plan(c->node, c->err, a, b, &p));
    sn_set_out(c->out[0], yt, p.out_rank, p.out_dims);
    return SNUG_OK;
}

int la_qlmm_run(sn_kctx *c) {
    const sn_tensor *a = c->in[0], *b = c->in[3];
    const sn_tensor *as = c->in[1], *az = c->in[2], *bs = c->in[4], *bz = c->in[5];
    const sn_tensor *ys = c->in[6], *yz = c->in[7];
    sn_tensor *y = c->out[0];
    gk_mm p;
    SN_TRY(gk_mm_plan(c->node, c->err, a, b, &p));
    qparam qas, qaz, qbs, qbz;
    SN_TRY(qparam_make(c->node, c->err, as, p.M, p.na, "a_scale", &qas));
    SN_TRY(qparam_make(c->node, c->err, az, p.M, p.na, "a_zero_point", &qaz));
    SN_TRY(qparam_make(c->node, c->err, bs, p.N, p.nbm, "b_scale", &qbs));
    SN_TRY(qparam_make(c->node, c->err, bz, p.N, p.nbm, "b_zero_point", &qbz));
    if (sn_in_numel(ys) != 1 || sn_in_numel(yz) != 1)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "y_scale and y_zero_point must be scalars");
    if (sn_in_numel(as) == 0 || sn_in_numel(bs) == 0 || sn_in_numel(az) == 0 || sn_in_numel(bz) == 0)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "empty scale or zero point");
    float ysv = ((const float *)ys->data)[0];
    double yzv = (double)sn_load_i64(yz->dtype, yz->data, 0);
    int64_t M = p.M, N = p.N, K = p.K;
    for (int64_t bi = 0; bi < p.n_batch; bi++) {
        int64_t oa, ob;
        gk_mm_offsets(&p, bi, &oa, &ob);
        for (int64_t i = 0; i < M; i++) {
            float asv = ((const float *)as->data)[qparam_idx(&qas, oa, i)];
            int32_t za = (int32_t)sn_load_i64(az->dtype, az->data, (size_t)qparam_idx(&qaz, oa, i));
            for (int64_t j = 0; j < N; j++) {
                float bsv = ((const float *)bs->data)[qparam_idx(&qbs, ob, j)];
                int32_t zb = (int32_t)sn_load_i64(bz->dtype, bz->data, (size_t)qparam_idx(&qbz, ob, j));
                int32_t acc = qdot(a, b, (size_t)(oa * M * K + i * K), (size_t)(ob * K * N + j), K, N, za, zb);
                /* scale in float like the reference: acc * (as * bs / ys) */
                float scale = asv * bsv / ysv;
                q_store(y->dtype, y->data, (size_t)((bi * M + i) * N + j), (double)((float)acc * scale) + yzv);
            }
        }
    }
    return SNUG_OK;
}
