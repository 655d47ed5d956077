/* Object detection: NonMaxSuppression (10, 11) and RoiAlign (10, 16). */
#include <math.h>
#include <string.h>

#include "ops/nn/nn.h"

/* ---- NonMaxSuppression (10, 11) ------------------------------------------------ */

int nn_nms_infer(sn_infer_ctx *c) {
    const sn_tensor *boxes = c->in[0], *scores = sn_infer_in(c, 1);
    if (!scores)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "boxes and scores are required");
    if (boxes->dtype != SN_F32 || scores->dtype != SN_F32)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "boxes and scores must be float");
    if ((boxes->rank >= 0 && boxes->rank != 3) || (scores->rank >= 0 && scores->rank != 3))
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "boxes and scores must have rank 3");
    if (boxes->rank == 3 && sn_dim_known(boxes->dims[2]) && boxes->dims[2] != 4)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "boxes must be [batches, boxes, 4]");
    if (boxes->rank == 3 && scores->rank == 3) {
        for (int k = 0; k < 2; k++) {
            int64_t a = boxes->dims[k ? 1 : 0], b = scores->dims[k ? 2 : 0];
            if (sn_dim_known(a) && sn_dim_known(b) && a != b)
                return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "boxes and scores disagree on %s (%lld vs %lld)",
                                k ? "box count" : "batch count", (long long)a, (long long)b);
        }
    }
    int64_t cpb = sn_attr_int(c->node, "center_point_box", 0);
    if (cpb != 0 && cpb != 1)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "center_point_box must be 0 or 1");
    sn_tensor *o = c->out[0];
    o->kind = SN_KIND_TENSOR;
    o->dtype = SN_I64;
    int64_t d[2] = {SN_DIM_UNKNOWN, 3};
    sn_tensor_set_shape(o, 2, d);
    return SNUG_OK;
}

int nn_nms_prepare(sn_prep_ctx *c) {
    int64_t n = c->in[0]->dims[1];
    c->workspace = (size_t)(n > 0 ? n : 0) * 3 * sizeof(int64_t);
    return SNUG_OK;
}

/* Box corners (ymin, xmin, ymax, xmax) of box i. */
static void nms_corners(const float *b, bool center, float out[4]) {
    if (center) {
        out[0] = b[1] - b[3] / 2;
        out[2] = b[1] + b[3] / 2;
        out[1] = b[0] - b[2] / 2;
        out[3] = b[0] + b[2] / 2;
    } else {
        out[0] = fminf(b[0], b[2]);
        out[2] = fmaxf(b[0], b[2]);
        out[1] = fminf(b[1], b[3]);
        out[3] = fmaxf(b[1], b[3]);
    }
}

static bool nms_suppress(const float *b1, const float *b2, bool center, float iou_th) {
    float a[4], b[4];
    nms_corners(b1, center, a);
    nms_corners(b2, center, b);
    const float ixmin = fmaxf(a[1], b[1]), ixmax = fminf(a[3], b[3]);
    const float iymin = fmaxf(a[0], b[0]), iymax = fminf(a[2], b[2]);
    if (ixmax <= ixmin || iymax <= iymin)
        return false;
    const float inter = (ixmax - ixmin) * (iymax - iymin);
    const float area1 = (a[3] - a[1]) * (a[2] - a[0]), area2 = (b[3] - b[1]) * (b[2] - b[0]);
    const float uni = area1 + area2 - inter;
    if (inter <= 0 || area1 <= 0 || area2 <= 0 || uni <= 0)
        return false;
    return inter / uni > iou_th;
}

/* Stable merge sort of idx[0..n) by score descending (ties: lower index
 * first, as the order is stable over ascending indices). */
static void nms_sort(int64_t *idx, int64_t *tmp, int64_t n, const float *score) {
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = sn_imin(lo + w, n), hi = sn_imin(lo + 2 * w, n);
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                tmp[k++] = score[idx[j]] > score[idx[i]] ? idx[j++] : idx[i++];
            while (i < mid)
                tmp[k++] = idx[i++];
            while (j < hi)
                tmp[k++] = idx[j++];
        }
        memcpy(idx, tmp, (size_t)n * sizeof *idx);
    }
}

/* Runs NMS for every (batch, class); writes triples to out when non-NULL.
 * Returns the number selected. */
static int64_t nms_pass(const sn_tensor *boxes, const sn_tensor *scores, int64_t max_out, float iou_th,
                        bool has_sth, float sth, bool center, int64_t *ws, int64_t *out) {
    const int64_t NB = boxes->dims[0], S = boxes->dims[1], NC = scores->dims[1];
    const float *bx = boxes->data, *sc = scores->data;
    int64_t *order = ws, *tmp = ws + S, *sel = ws + 2 * S;
    int64_t total = 0;
    for (int64_t b = 0; b < NB; b++)
        for (int64_t cl = 0; cl < NC; cl++) {
            const float *s = sc + (b * NC + cl) * S;
            const float *bb = bx + b * S * 4;
            int64_t n = 0;
            for (int64_t i = 0; i < S; i++)
                if (!has_sth || s[i] > sth)
                    order[n++] = i;
            nms_sort(order, tmp, n, s);
            int64_t nsel = 0;
            for (int64_t k = 0; k < n && nsel < max_out; k++) {
                bool keep = true;
                for (int64_t j = 0; j < nsel && keep; j++)
                    if (nms_suppress(bb + order[k] * 4, bb + sel[j] * 4, center, iou_th))
                        keep = false;
                if (!keep)
                    continue;
                sel[nsel++] = order[k];
                if (out) {
                    out[total * 3] = b;
                    out[total * 3 + 1] = cl;
                    out[total * 3 + 2] = order[k];
                }
                total++;
            }
        }
    return total;
}

int nn_nms_run(sn_kctx *c) {
    const sn_tensor *boxes = c->in[0], *scores = c->in[1];
    const sn_tensor *tmax = sn_in_tensor(c->in, c->n_in, 2), *tiou = sn_in_tensor(c->in, c->n_in, 3),
                    *tsth = sn_in_tensor(c->in, c->n_in, 4);
    if (boxes->dims[0] != scores->dims[0] || boxes->dims[1] != scores->dims[2] || boxes->dims[2] != 4)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "boxes [B,N,4] and scores [B,C,N] do not agree");
    int64_t max_out = 0;
    if (tmax && sn_tensor_numel(tmax) > 0)
        max_out = sn_imax(sn_load_i64(tmax->dtype, tmax->data, 0), 0);
    float iou_th = tiou && sn_tensor_numel(tiou) > 0 ? (float)sn_load_f64(tiou->dtype, tiou->data, 0) : 0.0f;
    bool has_sth = tsth && sn_tensor_numel(tsth) > 0;
    float sth = has_sth ? (float)sn_load_f64(tsth->dtype, tsth->data, 0) : 0.0f;
    bool center = sn_attr_int(c->node, "center_point_box", 0) != 0;
    if (boxes->dims[1] > 0 && !c->ws)
        return sn_kfail(c->err, c->node, SNUG_ERR_INTERNAL, "workspace missing");
    int64_t n = nms_pass(boxes, scores, max_out, iou_th, has_sth, sth, center, c->ws, NULL);
    int64_t dims[2] = {n, 3};
    int64_t *out = sn_kctx_alloc_output(c, 0, SN_I64, 2, dims);
    if (!out)
        return c->err->code ? c->err->code : SNUG_ERR_OOM;
    nms_pass(boxes, scores, max_out, iou_th, has_sth, sth, center, c->ws, out);
    return SNUG_OK;
}

/* ---- RoiAlign (10, 16) -------------------------------------------------------- */

int nn_roialign_infer(sn_infer_ctx *c) {
    if (c->n_in < 3 || !c->in[1] || !c->in[2])
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "X, rois and batch_indices are required");
    const sn_tensor *x = c->in[0], *rois = c->in[1], *bi = c->in[2];
    if (!sn_dtype_is_real(x->dtype) || rois->dtype != x->dtype)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "X and rois must have the same float type");
    if (!sn_dtype_is_int(bi->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "batch_indices must be int64");
    if ((x->rank >= 0 && x->rank != 4) || (rois->rank >= 0 && rois->rank != 2) || (bi->rank >= 0 && bi->rank != 1))
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "expected X [N,C,H,W], rois [R,4], batch_indices [R]");
    if (rois->rank == 2 && sn_dim_known(rois->dims[1]) && rois->dims[1] != 4)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "rois must be [R,4]");
    const char *mode = sn_attr_str(c->node, "mode", "avg");
    if (strcmp(mode, "avg") && strcmp(mode, "max"))
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "mode '%s' is not avg or max", mode);
    const char *ctm = sn_attr_str(c->node, "coordinate_transformation_mode", "half_pixel");
    if (strcmp(ctm, "half_pixel") && strcmp(ctm, "output_half_pixel"))
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "coordinate_transformation_mode '%s' is not supported", ctm);
    int64_t oh = sn_attr_int(c->node, "output_height", 1), ow = sn_attr_int(c->node, "output_width", 1);
    if (oh <= 0 || ow <= 0 || sn_attr_int(c->node, "sampling_ratio", 0) < 0)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "output size must be positive, sampling_ratio >= 0");
    int64_t r = rois->rank == 2 ? rois->dims[0] : SN_DIM_UNKNOWN;
    if (!sn_dim_known(r) && bi->rank == 1)
        r = bi->dims[0];
    sn_tensor *o = c->out[0];
    o->kind = SN_KIND_TENSOR;
    o->dtype = x->dtype;
    int64_t d[4] = {r, x->rank == 4 ? x->dims[1] : SN_DIM_UNKNOWN, oh, ow};
    sn_tensor_set_shape(o, 4, d);
    return SNUG_OK;
}

int nn_roialign_run(sn_kctx *c) {
    const sn_tensor *x = c->in[0], *rois = c->in[1], *bi = c->in[2];
    sn_tensor *y = c->out[0];
    const int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    const int64_t R = rois->dims[0], OH = y->dims[2], OW = y->dims[3];
    if (bi->dims[0] != R)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "batch_indices has %lld entries for %lld rois",
                        (long long)bi->dims[0], (long long)R);
    const bool max_mode = !strcmp(sn_attr_str(c->node, "mode", "avg"), "max");
    const bool half = !strcmp(sn_attr_str(c->node, "coordinate_transformation_mode",
                                          c->node->opset >= 16 ? "half_pixel" : "output_half_pixel"),
                              "half_pixel");
    const int64_t sr = sn_attr_int(c->node, "sampling_ratio", 0);
    const double scale = sn_attr_float(c->node, "spatial_scale", 1.0f);
    const double off = half ? 0.5 : 0.0;
    for (int64_t r = 0; r < R; r++) {
        const int64_t b = sn_load_i64(bi->dtype, bi->data, (size_t)r);
        if (b < 0 || b >= N)
            return sn_kfail(c->err, c->node, SNUG_ERR_RANGE, "batch_indices[%lld] = %lld is outside [0, %lld)",
                            (long long)r, (long long)b, (long long)N);
        const double x0 = sn_ld_f64(rois->dtype, rois->data, r * 4) * scale - off;
        const double y0 = sn_ld_f64(rois->dtype, rois->data, r * 4 + 1) * scale - off;
        const double x1 = sn_ld_f64(rois->dtype, rois->data, r * 4 + 2) * scale - off;
        const double y1 = sn_ld_f64(rois->dtype, rois->data, r * 4 + 3) * scale - off;
        double rw = x1 - x0, rh = y1 - y0;
        if (!half) {
            rw = fmax(rw, 1.0);
            rh = fmax(rh, 1.0);
        }
        const double bh = rh / (double)OH, bw = rw / (double)OW;
        const int64_t gh = sr > 0 ? sr : (int64_t)ceil(rh / (double)OH);
        const int64_t gw = sr > 0 ? sr : (int64_t)ceil(rw / (double)OW);
        const double count = (double)sn_imax(gh * gw, 1);
        for (int64_t ch = 0; ch < C; ch++) {
            const int64_t base = (b * C + ch) * H * W;
            for (int64_t ph = 0; ph < OH; ph++)
                for (int64_t pw = 0; pw < OW; pw++) {
                    double acc = 0.0;
                    bool first = true;
                    for (int64_t iy = 0; iy < gh; iy++) {
                        double yy = y0 + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
                        for (int64_t ix = 0; ix < gw; ix++) {
                            double xx = x0 + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw;
                            double v1 = 0, v2 = 0, v3 = 0, v4 = 0, w1 = 0, w2 = 0, w3 = 0, w4 = 0;
                            if (!(yy < -1.0 || yy > (double)H || xx < -1.0 || xx > (double)W) && H > 0 && W > 0) {
                                double yv = fmax(yy, 0.0), xv = fmax(xx, 0.0);
                                int64_t ylo = (int64_t)yv, xlo = (int64_t)xv, yhi, xhi;
                                if (ylo >= H - 1)
                                    yhi = ylo = H - 1, yv = (double)ylo;
                                else
                                    yhi = ylo + 1;
                                if (xlo >= W - 1)
                                    xhi = xlo = W - 1, xv = (double)xlo;
                                else
                                    xhi = xlo + 1;
                                double ly = yv - (double)ylo, lx = xv - (double)xlo, hy = 1.0 - ly, hx = 1.0 - lx;
                                w1 = hy * hx, w2 = hy * lx, w3 = ly * hx, w4 = ly * lx;
                                v1 = sn_ld_f64(x->dtype, x->data, base + ylo * W + xlo);
                                v2 = sn_ld_f64(x->dtype, x->data, base + ylo * W + xhi);
                                v3 = sn_ld_f64(x->dtype, x->data, base + yhi * W + xlo);
                                v4 = sn_ld_f64(x->dtype, x->data, base + yhi * W + xhi);
                            }
                            if (max_mode) {
                                /* the reference takes the max of the weighted corners */
                                double v = fmax(fmax(w1 * v1, w2 * v2), fmax(w3 * v3, w4 * v4));
                                acc = first ? v : fmax(acc, v);
                                first = false;
                            } else {
                                acc += w1 * v1 + w2 * v2 + w3 * v3 + w4 * v4;
                            }
                        }
                    }
                    sn_st_f64(y->dtype, y->data, ((r * C + ch) * OH + ph) * OW + pw, max_mode ? acc : acc / count);
                }
        }
    }
    return SNUG_OK;
}
