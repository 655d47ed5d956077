/* The linear algebra family beyond the matrix products (matmul.c): Einsum,
 * Det, Trilu; and the family's table. */
#include <math.h>
#include <string.h>

#include "ops/linalg/linalg.h"

/* ======================================================================
 * Einsum
 *
 * Labels: 'A'..'Z' -> 0..25, 'a'..'z' -> 26..51, ellipsis dims -> 52.. (the
 * ellipsis is right-aligned across operands and broadcasts). A repeated
 * label within one operand takes the diagonal: its strides add up. The
 * computation is one loop nest over all labels, output labels outside,
 * summed labels inside.
 * ====================================================================== */

#define EIN_MAX_OPS 16
#define EIN_ELL 52
#define EIN_NLAB (EIN_ELL + SN_MAX_RANK)

typedef struct ein_spec {
    int n_ops;
    int rank[EIN_MAX_OPS];                 /* operand ranks */
    int lab[EIN_MAX_OPS][SN_MAX_RANK];     /* label of each operand axis */
    int n_ell;                             /* ellipsis dims (max over operands) */
    int out_n;
    int out_lab[EIN_NLAB];
    int sum_n;
    int sum_lab[EIN_NLAB];                 /* labels summed over */
    int64_t size[EIN_NLAB];                /* label sizes (-1 unknown) */
} ein_spec;

static int ein_label(char ch) {
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return 26 + (ch - 'a');
    return -1;
}

/* Parses one term into labels (ellipsis as -2 placeholder). */
static int ein_term(const sn_node *n, const char *s, size_t len, int *labs, int *nl, bool *ell,
                    sn_err *err) {
    *nl = 0;
    *ell = false;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        if (ch == ' ')
            continue;
        if (ch == '.') {
            if (*ell || i + 2 >= len || s[i + 1] != '.' || s[i + 2] != '.')
                return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "bad ellipsis in equation");
            *ell = true;
            i += 2;
            if (*nl >= SN_MAX_RANK + 1)
                return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "term too long");
            labs[(*nl)++] = -2;
            continue;
        }
        int l = ein_label(ch);
        if (l < 0)
            return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "bad character '%c' in equation", ch);
        if (*nl >= SN_MAX_RANK + 1)
            return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "term too long");
        labs[(*nl)++] = l;
    }
    return SNUG_OK;
}

/* *pending set (and OK returned) when an input's rank is not known yet. */
static int ein_parse(const sn_node *n, int n_in, const sn_tensor *const *in, ein_spec *sp,
                     bool *pending, sn_err *err) {
    const char *eq = sn_attr_str(n, "equation", NULL);
    if (!eq)
        return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "missing attribute equation");
    if (n_in < 1 || n_in > EIN_MAX_OPS)
        return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "unsupported number of inputs %d", n_in);
    memset(sp, 0, sizeof *sp);
    sp->n_ops = n_in;
    *pending = false;
    const char *arrow = strstr(eq, "->");
    size_t lhs_len = arrow ? (size_t)(arrow - eq) : strlen(eq);
    int count[EIN_NLAB] = {0};
    int ne_op[EIN_MAX_OPS];
    int tl[SN_MAX_RANK + 2];
    /* inputs */
    size_t pos = 0;
    for (int k = 0; k < n_in; k++) {
        size_t end = pos;
        while (end < lhs_len && eq[end] != ',')
            end++;
        if (k < n_in - 1 ? end >= lhs_len : end != lhs_len)
            return sn_kfail(err, n, SNUG_ERR_INVALID_ARG,
                            "equation has a different number of terms than the %d inputs", n_in);
        int nl;
        bool ell;
        SN_TRY(ein_term(n, eq + pos, end - pos, tl, &nl, &ell, err));
        const sn_tensor *x = in[k];
        if (!x)
            return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "input %d missing", k);
        if (x->rank == SN_RANK_UNKNOWN) {
            *pending = true;
            return SNUG_OK;
        }
        int nlet = nl - (ell ? 1 : 0);
        int ne = x->rank - nlet;
        if (ne < 0 || (!ell && ne != 0))
            return sn_kfail(err, n, SNUG_ERR_SHAPE, "input %d has rank %d, term has %d labels", k,
                            x->rank, nlet);
        sp->rank[k] = x->rank;
        ne_op[k] = ell ? ne : 0;
        if (ne_op[k] > sp->n_ell)
            sp->n_ell = ne_op[k];
        /* ellipsis labels are fixed up below once n_ell is known */
        int a = 0;
        for (int i = 0; i < nl; i++) {
            if (tl[i] == -2) {
                for (int j = 0; j < ne; j++)
                    sp->lab[k][a++] = -100 - j; /* placeholder: j-th ellipsis dim */
            } else {
                sp->lab[k][a++] = tl[i];
                count[tl[i]]++;
            }
        }
        pos = end + 1;
    }
    for (int k = 0; k < n_in; k++)
        for (int a = 0; a < sp->rank[k]; a++)
            if (sp->lab[k][a] <= -100) {
                int j = -100 - sp->lab[k][a];
                sp->lab[k][a] = EIN_ELL + (sp->n_ell - ne_op[k]) + j;
            }
    /* output */
    bool in_out[EIN_NLAB] = {0};
    if (arrow) {
        int ol[EIN_NLAB + 2], nl;
        bool ell;
        const char *o = arrow + 2;
        size_t olen = strlen(o);
        int labs[SN_MAX_RANK + 2];
        if (olen > EIN_NLAB)
            return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "output term too long");
        SN_TRY(ein_term(n, o, olen, labs, &nl, &ell, err));
        int m = 0;
        for (int i = 0; i < nl; i++) {
            if (labs[i] == -2) {
                for (int j = 0; j < sp->n_ell; j++)
                    ol[m++] = EIN_ELL + j;
                continue;
            }
            if (!count[labs[i]])
                return sn_kfail(err, n, SNUG_ERR_INVALID_ARG,
                                "output label '%c' does not appear in the inputs",
                                labs[i] < 26 ? 'A' + labs[i] : 'a' + labs[i] - 26);
            ol[m++] = labs[i];
        }
        for (int i = 0; i < m; i++) {
            if (in_out[ol[i]])
                return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "repeated output label");
            in_out[ol[i]] = true;
            sp->out_lab[sp->out_n++] = ol[i];
        }
    } else {
        for (int j = 0; j < sp->n_ell; j++) {
            in_out[EIN_ELL + j] = true;
            sp->out_lab[sp->out_n++] = EIN_ELL + j;
        }
        for (int l = 0; l < EIN_ELL; l++)
            if (count[l] == 1) {
                in_out[l] = true;
                sp->out_lab[sp->out_n++] = l;
            }
    }
    if (sp->out_n > SN_MAX_RANK)
        return sn_kfail(err, n, SNUG_ERR_UNSUPPORTED, "output rank %d too large", sp->out_n);
    /* sizes and summed labels */
    bool used[EIN_NLAB] = {0};
    for (int l = 0; l < EIN_NLAB; l++)
        sp->size[l] = -1;
    for (int k = 0; k < n_in; k++) {
        const sn_tensor *x = in[k];
        for (int a = 0; a < x->rank; a++) {
            int l = sp->lab[k][a];
            int64_t d = x->dims[a];
            used[l] = true;
            if (d < 0)
                continue;
            if (sp->size[l] < 0 || (l >= EIN_ELL && sp->size[l] == 1)) {
                sp->size[l] = d;
            } else if (d != sp->size[l] && !(l >= EIN_ELL && d == 1)) {
                return sn_kfail(err, n, SNUG_ERR_SHAPE, "label dims disagree: %lld vs %lld",
                                (long long)d, (long long)sp->size[l]);
            }
        }
    }
    /* unknown ellipsis dims seen only as 1 elsewhere stay unknown */
    for (int k = 0; k < n_in; k++)
        for (int a = 0; a < in[k]->rank; a++) {
            int l = sp->lab[k][a];
            if (l >= EIN_ELL && in[k]->dims[a] < 0 && sp->size[l] == 1)
                sp->size[l] = -1;
        }
    for (int l = 0; l < EIN_NLAB; l++)
        if (used[l] && !in_out[l])
            sp->sum_lab[sp->sum_n++] = l;
    return SNUG_OK;
}

static int ein_infer(sn_infer_ctx *c) {
    const sn_node *n = c->node;
    sn_dtype dt = c->n_in > 0 && c->in[0] ? c->in[0]->dtype : SN_UNDEFINED;
    for (int k = 0; k < c->n_in; k++) {
        if (!c->in[k])
            return sn_kfail(c->err, n, SNUG_ERR_INVALID_ARG, "input %d missing", k);
        if (c->in[k]->dtype != dt)
            return sn_kfail(c->err, n, SNUG_ERR_TYPE, "inputs must share one type");
    }
    if (!(sn_dtype_is_real(dt) || sn_dtype_is_int(dt)) || dt == SN_U4 || dt == SN_I4)
        return sn_kfail(c->err, n, SNUG_ERR_TYPE, "unsupported input type %s", sn_dtype_name(dt));
    sn_tensor *y = c->out[0];
    y->kind = SN_KIND_TENSOR;
    y->dtype = dt;
    ein_spec sp;
    bool pending;
    SN_TRY(ein_parse(n, c->n_in, c->in, &sp, &pending, c->err));
    if (pending) {
        y->rank = SN_RANK_UNKNOWN;
        return SNUG_OK;
    }
    y->rank = sp.out_n;
    for (int i = 0; i < sp.out_n; i++)
        y->dims[i] = sp.size[sp.out_lab[i]];
    return SNUG_OK;
}

static int ein_run(sn_kctx *c) {
    const sn_node *n = c->node;
    ein_spec sp;
    bool pending;
    SN_TRY(ein_parse(n, c->n_in, c->in, &sp, &pending, c->err));
    if (pending)
        return sn_kfail(c->err, n, SNUG_ERR_INTERNAL, "input rank not known at run time");
    sn_tensor *y = c->out[0];
    const int K = sp.n_ops;
    /* per-label strides in each operand (repeated labels add: diagonal) */
    int64_t str[EIN_MAX_OPS][EIN_NLAB];
    memset(str, 0, sizeof str);
    for (int k = 0; k < K; k++) {
        const sn_tensor *x = c->in[k];
        int64_t s = 1;
        for (int a = x->rank - 1; a >= 0; a--) {
            if (x->dims[a] != 1)
                str[k][sp.lab[k][a]] += s;
            s *= x->dims[a];
        }
    }
    int64_t onum = 1, snum = 1;
    for (int i = 0; i < sp.out_n; i++)
        onum *= sp.size[sp.out_lab[i]];
    for (int i = 0; i < sp.sum_n; i++)
        snum *= sp.size[sp.sum_lab[i]];
    if (onum == 0)
        return SNUG_OK;
    /* output odometer (row-major) with operand offsets */
    int64_t oidx[EIN_NLAB] = {0}, sidx[EIN_NLAB] = {0};
    int64_t ooff[EIN_MAX_OPS] = {0};
    sn_dtype dt = y->dtype;
    for (int64_t o = 0; o < onum; o++) {
        double acc = 0;
        if (snum > 0) {
            /* odometer over the summed labels but the last; the last one
             * (size S) is a strided inner loop */
            int last = sp.sum_n - 1;
            int64_t S = last >= 0 ? sp.size[sp.sum_lab[last]] : 1;
            int64_t ist[EIN_MAX_OPS] = {0};
            for (int k = 0; k < K && last >= 0; k++)
                ist[k] = str[k][sp.sum_lab[last]];
            int64_t off[EIN_MAX_OPS];
            memcpy(off, ooff, sizeof off);
            memset(sidx, 0, sizeof sidx);
            for (int64_t s = 0; s < snum; s += S) {
                if (K == 2 && dt == SN_F32) {
                    const float *a = (const float *)c->in[0]->data + off[0];
                    const float *b = (const float *)c->in[1]->data + off[1];
                    for (int64_t t = 0; t < S; t++)
                        acc += (double)a[t * ist[0]] * b[t * ist[1]];
                } else if (K == 2 && dt == SN_F64) {
                    const double *a = (const double *)c->in[0]->data + off[0];
                    const double *b = (const double *)c->in[1]->data + off[1];
                    for (int64_t t = 0; t < S; t++)
                        acc += a[t * ist[0]] * b[t * ist[1]];
                } else {
                    for (int64_t t = 0; t < S; t++) {
                        double p = 1;
                        for (int k = 0; k < K; k++)
                            p *= sn_ld_f64(dt, c->in[k]->data, off[k] + t * ist[k]);
                        acc += p;
                    }
                }
                for (int i = last - 1; i >= 0; i--) {
                    int l = sp.sum_lab[i];
                    for (int k = 0; k < K; k++)
                        off[k] += str[k][l];
                    if (++sidx[i] < sp.size[l])
                        break;
                    for (int k = 0; k < K; k++)
                        off[k] -= str[k][l] * sp.size[l];
                    sidx[i] = 0;
                }
            }
        }
        sn_store_f64(dt, y->data, (size_t)o, acc);
        for (int i = sp.out_n - 1; i >= 0; i--) {
            int l = sp.out_lab[i];
            for (int k = 0; k < K; k++)
                ooff[k] += str[k][l];
            if (++oidx[i] < sp.size[l])
                break;
            for (int k = 0; k < K; k++)
                ooff[k] -= str[k][l] * sp.size[l];
            oidx[i] = 0;
        }
    }
    return SNUG_OK;
}

/* ======================================================================
 * Det: determinants of the trailing (M, M) matrices, LU with partial
 * pivoting in double.
 * ====================================================================== */

static int det_infer(sn_infer_ctx *c) {
    const sn_tensor *x = sn_infer_in(c, 0);
    if (!x)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "missing input");
    if (!sn_dtype_is_real(x->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "unsupported input type %s",
                        sn_dtype_name(x->dtype));
    sn_tensor *y = c->out[0];
    y->kind = SN_KIND_TENSOR;
    y->dtype = x->dtype;
    if (x->rank == SN_RANK_UNKNOWN) {
        y->rank = SN_RANK_UNKNOWN;
        return SNUG_OK;
    }
    if (x->rank < 2)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "input must have rank >= 2");
    int64_t a = x->dims[x->rank - 2], b = x->dims[x->rank - 1];
    if (a >= 0 && b >= 0 && a != b)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "matrices must be square, got %lldx%lld",
                        (long long)a, (long long)b);
    sn_set_out(y, x->dtype, x->rank - 2, x->dims);
    return SNUG_OK;
}

/* One matrix in double, factored in place. */
static size_t det_ws(const sn_tensor *x) {
    if (x->rank < 2 || x->dims[x->rank - 1] < 0)
        return 0;
    size_t M = (size_t)x->dims[x->rank - 1];
    return M * M * sizeof(double);
}

static size_t det_estimate(const sn_infer_ctx *c) { return det_ws(c->in[0]); }

static int det_prepare(sn_prep_ctx *c) {
    c->workspace = det_ws(c->in[0]);
    return SNUG_OK;
}

static int det_run(sn_kctx *c) {
    const sn_tensor *x = c->in[0];
    sn_tensor *y = c->out[0];
    int64_t M = x->dims[x->rank - 1];
    int64_t B = sn_dims_prod(x->dims, 0, x->rank - 2);
    double *a = c->ws;
    for (int64_t b = 0; b < B; b++) {
        for (int64_t i = 0; i < M * M; i++)
            a[i] = sn_load_f64(x->dtype, x->data, (size_t)(b * M * M + i));
        double det = 1;
        for (int64_t k = 0; k < M; k++) {
            int64_t p = k;
            for (int64_t i = k + 1; i < M; i++)
                if (fabs(a[i * M + k]) > fabs(a[p * M + k]))
                    p = i;
            if (a[p * M + k] == 0) {
                det = 0;
                break;
            }
            if (p != k) {
                for (int64_t j = 0; j < M; j++) {
                    double t = a[k * M + j];
                    a[k * M + j] = a[p * M + j];
                    a[p * M + j] = t;
                }
                det = -det;
            }
            double piv = a[k * M + k];
            det *= piv;
            for (int64_t i = k + 1; i < M; i++) {
                double f = a[i * M + k] / piv;
                for (int64_t j = k + 1; j < M; j++)
                    a[i * M + j] -= f * a[k * M + j];
            }
        }
        sn_store_f64(y->dtype, y->data, (size_t)b, det);
    }
    return SNUG_OK;
}

/* ======================================================================
 * Trilu: keep the upper (j - i >= k) or lower (j - i <= k) triangle of
 * the trailing matrices, zero the rest. Any element type.
 * ====================================================================== */

static int trilu_k(const sn_node *n, const sn_tensor *kt, int64_t *k, bool *known, sn_err *err) {
    *k = 0;
    *known = true;
    if (!kt)
        return SNUG_OK;
    if (kt->dtype != SN_I64 && kt->dtype != SN_I32)
        return sn_kfail(err, n, SNUG_ERR_TYPE, "k must be int64");
    if (!kt->data) {
        *known = false;
        return SNUG_OK;
    }
    if (sn_input_ints(kt, k, 1) != 1)
        return sn_kfail(err, n, SNUG_ERR_SHAPE, "k must be a scalar");
    return SNUG_OK;
}

static int trilu_infer(sn_infer_ctx *c) {
    const sn_tensor *x = sn_infer_in(c, 0);
    if (!x)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "missing input");
    if (x->dtype == SN_U4 || x->dtype == SN_I4 || x->dtype == SN_UNDEFINED)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "unsupported input type %s",
                        sn_dtype_name(x->dtype));
    if (x->rank != SN_RANK_UNKNOWN && x->rank < 2)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "input must have rank >= 2");
    int64_t k;
    bool known;
    SN_TRY(trilu_k(c->node, sn_has_in(c->in, c->n_in, 1) ? c->in[1] : NULL, &k, &known, c->err));
    sn_set_out(c->out[0], x->dtype, x->rank, x->dims);
    return SNUG_OK;
}

static int trilu_run(sn_kctx *c) {
    const sn_tensor *x = c->in[0];
    sn_tensor *y = c->out[0];
    int64_t k;
    bool known;
    SN_TRY(trilu_k(c->node, sn_has_in(c->in, c->n_in, 1) ? c->in[1] : NULL, &k, &known, c->err));
    bool upper = sn_attr_int(c->node, "upper", 1) != 0;
    int64_t R = x->dims[x->rank - 2], C = x->dims[x->rank - 1];
    int64_t B = sn_dims_prod(x->dims, 0, x->rank - 2);
    size_t es = sn_dtype_size(x->dtype);
    const char *xs = x->data;
    char *ys = y->data;
    bool str = x->dtype == SN_STRING;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < R; i++) {
            size_t row = (size_t)((b * R + i) * C);
            /* columns [lo, hi) are kept */
            int64_t lo, hi;
            if (upper) {
                lo = k > C - i ? C : (i + k < 0 ? 0 : i + k);
                hi = C;
            } else {
                lo = 0;
                hi = k >= C - i ? C : (i + k + 1 < 0 ? 0 : i + k + 1);
            }
            for (int64_t j = 0; j < C; j++) {
                char *dst = ys + (row + (size_t)j) * es;
                if (j >= lo && j < hi) {
                    if (dst != xs + (row + (size_t)j) * es)
                        memcpy(dst, xs + (row + (size_t)j) * es, es);
                } else if (str) {
                    sn_string e = {"", 0};
                    memcpy(dst, &e, sizeof e);
                } else {
                    memset(dst, 0, es);
                }
            }
        }
    return SNUG_OK;
}

const sn_op_def sn_ops_linalg[] = {
    /* matmul.c */
    {.domain = "", .name = "MatMul", .since_version = 1, .required = 0x3, .infer = la_matmul_infer, .estimate = la_matmul_estimate,
     .cpu = {.prepare = la_matmul_prepare, .run = la_matmul_run, .free_state = la_mm_packed_free}},
    {.domain = "", .name = "Gemm", .since_version = 1, .required = 0x3, .infer = la_gemm_infer, .estimate = la_gemm_estimate,
     .cpu = {.prepare = la_gemm_prepare, .run = la_gemm_run}},
    {.domain = "", .name = "MatMulInteger", .since_version = 10, .required = 0x3, .infer = la_mmi_infer, .cpu = {.run = la_mmi_run}},
    {.domain = "", .name = "QLinearMatMul", .since_version = 10, .required = 0xff, .infer = la_qlmm_infer, .cpu = {.run = la_qlmm_run}},
    /* linalg.c */
    {.domain = "", .name = "Einsum", .since_version = 12, .infer = ein_infer, .cpu = {.run = ein_run}},
    {.domain = "", .name = "Det", .since_version = 11, .infer = det_infer, .estimate = det_estimate,
     .cpu = {.prepare = det_prepare, .run = det_run}},
    {.domain = "", .name = "Trilu", .since_version = 14, .infer = trilu_infer, .flags = SN_OP_INPLACE0,
     .cpu = {.run = trilu_run}},
    {0},
};
