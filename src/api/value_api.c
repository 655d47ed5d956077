/* The public values (include/snug.h, snug_value_*): any ONNX value over an
 * sn_tensor, read from and written to .npy and ONNX .pb files, and runs of
 * a session with them; the dtype helpers beside. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "api/api.h"
#include "exec/session.h"

const char *snug_dtype_name(int dtype) { return sn_dtype_name((sn_dtype)dtype); }

int snug_dtype_class(int dtype) {
    if (!sn_dtype_valid(dtype))
        return SNUG_DTYPE_INVALID;
    if (sn_dtype_is_float((sn_dtype)dtype))
        return SNUG_DTYPE_FLOAT;
    if (sn_dtype_is_int((sn_dtype)dtype))
        return SNUG_DTYPE_INT;
    if (dtype == SN_BOOL)
        return SNUG_DTYPE_BOOL;
    if (dtype == SN_STRING)
        return SNUG_DTYPE_STRING;
    return SNUG_DTYPE_COMPLEX;
}

size_t snug_tensor_nbytes(const snug_tensor *t) {
    int64_t n;
    if (t->rank < 0 || t->rank > SN_MAX_RANK)
        return 0;
    for (int k = 0; k < t->rank; k++)
        if (t->dims[k] < 0)
            return 0;
    return sn_dims_numel(t->rank, t->dims, &n) ? sn_dtype_nbytes((sn_dtype)t->dtype, n) : SIZE_MAX;
}

/* A value around t (shape set) with zeroed elements of its own. */
static int value_alloc(const sn_tensor *t, snug_value **out) {
    *out = NULL;
    int64_t n = sn_tensor_numel(t);
    size_t nb = sn_tensor_nbytes(t);
    if (n < 0 || nb == SIZE_MAX)
        return SNUG_ERR_RANGE;
    snug_value *v = sn_calloc(1, sizeof *v);
    if (!v || !(v->own = sn_calloc(1, nb ? nb : 1))) {
        sn_free(v);
        return SNUG_ERR_OOM;
    }
    v->t = *t;
    v->t.data = v->own;
    *out = v;
    return SNUG_OK;
}

static bool shape_ok(int rank, const int64_t *dims) {
    if (rank < 0 || rank > SN_MAX_RANK || (rank && !dims))
        return false;
    for (int k = 0; k < rank; k++)
        if (dims[k] < 0)
            return false;
    return true;
}

int snug_value_new(int dtype, int rank, const int64_t *dims, snug_value **out) {
    *out = NULL;
    if (!sn_dtype_valid(dtype) || !shape_ok(rank, dims))
        return SNUG_ERR_INVALID_ARG;
    sn_tensor t = {.kind = SN_KIND_TENSOR, .dtype = (sn_dtype)dtype};
    sn_tensor_set_shape(&t, rank, dims);
    return value_alloc(&t, out);
}

int snug_value_new_input(const snug_model *m, int input, int rank, const int64_t *dims, snug_value **out) {
    *out = NULL;
    if (input < 0 || input >= m->graph->n_inputs || !shape_ok(rank, dims))
        return SNUG_ERR_INVALID_ARG;
    const sn_tensor *d = &m->graph->values[m->graph->inputs[input]].info;
    if (d->kind != SN_KIND_TENSOR || !sn_dtype_valid(d->dtype))
        return SNUG_ERR_TYPE;
    sn_tensor t = *d; /* kind, dtype and the optional flag as declared */
    t.data = NULL;
    sn_tensor_set_shape(&t, rank, dims);
    return value_alloc(&t, out);
}

static const char *ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf) ? s + a - b : NULL;
}

int snug_value_read(const snug_model *m, int input, const char *path, snug_value **out, char *err,
                    size_t err_cap) {
    *out = NULL;
    sn_err e = {0};
    snug_value *v = sn_calloc(1, sizeof *v);
    if (!v)
        return sn_api_fail(err, err_cap, &e, sn_errf(&e, SNUG_ERR_OOM, "out of memory"));
    int rc;
    if (ends_with(path, ".npy")) {
        rc = sn_npy_read(path, &v->t, &v->own, &e);
    } else {
        const sn_type *type = m && input >= 0 && input < m->graph->n_inputs
                                  ? m->graph->values[m->graph->inputs[input]].declared
                                  : NULL;
        void *buf = NULL;
        size_t len;
        rc = sn_file_read(path, &buf, &len, &e);
        if (rc == SNUG_OK)
            rc = sn_value_decode_pb_typed(buf, len, type, &v->t, &v->own, NULL, &e);
        sn_free(buf);
    }
    if (rc != SNUG_OK) {
        snug_value_free(v);
        return sn_api_fail(err, err_cap, &e, rc);
    }
    *out = v;
    return SNUG_OK;
}

int snug_value_write(const snug_value *v, const char *name, const char *path, char *err, size_t err_cap) {
    sn_err e = {0};
    if (ends_with(path, ".npy")) {
        int rc = sn_npy_write(path, &v->t, &e);
        return rc == SNUG_OK ? rc : sn_api_fail(err, err_cap, &e, rc);
    }
    void *buf;
    size_t len;
    int rc = sn_value_encode_pb(&v->t, name, &buf, &len, &e);
    if (rc != SNUG_OK)
        return sn_api_fail(err, err_cap, &e, rc);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, len, f) != len)
        rc = sn_errf(&e, SNUG_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    if (f && fclose(f) != 0 && rc == SNUG_OK)
        rc = sn_errf(&e, SNUG_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    sn_free(buf);
    return rc == SNUG_OK ? rc : sn_api_fail(err, err_cap, &e, rc);
}

void snug_value_free(snug_value *v) {
    if (!v || v->session)
        return;
    if (v->strs) {
        int64_t n = sn_tensor_numel(&v->t);
        for (int64_t i = 0; i < n; i++)
            sn_free(v->strs[i]);
    }
    sn_free(v->strs);
    sn_free(v->own);
    sn_free(v);
}

int snug_value_kind(const snug_value *v) { return v->t.kind; }

int64_t snug_value_count(const snug_value *v) {
    if (v->t.kind == SN_KIND_SEQUENCE)
        return v->t.n_items;
    return v->t.kind == SN_KIND_TENSOR ? sn_tensor_numel(&v->t) : 0;
}

static void tensor_view(const sn_tensor *t, snug_tensor *out) {
    memset(out, 0, sizeof *out);
    out->dtype = t->dtype;
    out->rank = t->kind == SN_KIND_TENSOR ? t->rank : -1;
    for (int k = 0; k < out->rank; k++)
        out->dims[k] = t->dims[k];
    out->data = t->kind == SN_KIND_TENSOR ? t->data : NULL;
}

void snug_value_get_tensor(const snug_value *v, snug_tensor *out) { tensor_view(&v->t, out); }

int snug_value_get_item(const snug_value *v, int64_t i, snug_tensor *out) {
    if (v->t.kind != SN_KIND_SEQUENCE || i < 0 || i >= v->t.n_items)
        return SNUG_ERR_RANGE;
    tensor_view(&((const sn_tensor *)v->t.data)[i], out);
    return SNUG_OK;
}

/* Element i of a tensor of a numeric or bool type. */
static bool number_at(const snug_value *v, int64_t i) {
    int c = snug_dtype_class(v->t.dtype);
    return v->t.kind == SN_KIND_TENSOR && i >= 0 && i < sn_tensor_numel(&v->t) &&
           (c == SNUG_DTYPE_FLOAT || c == SNUG_DTYPE_INT || c == SNUG_DTYPE_BOOL);
}

double snug_value_get_f64(const snug_value *v, int64_t i) {
    return number_at(v, i) ? sn_load_f64(v->t.dtype, v->t.data, (size_t)i) : NAN;
}

int snug_value_set_f64(snug_value *v, int64_t i, double x) {
    if (!number_at(v, i))
        return v->t.kind == SN_KIND_TENSOR && i >= 0 && i < sn_tensor_numel(&v->t) ? SNUG_ERR_TYPE
                                                                                  : SNUG_ERR_RANGE;
    sn_store_f64(v->t.dtype, v->t.data, (size_t)i, x);
    return SNUG_OK;
}

static sn_string *string_at(const snug_value *v, int64_t i) {
    if (v->t.kind != SN_KIND_TENSOR || v->t.dtype != SN_STRING || i < 0 || i >= sn_tensor_numel(&v->t))
        return NULL;
    return &((sn_string *)v->t.data)[i];
}

const char *snug_value_get_string(const snug_value *v, int64_t i, size_t *len) {
    const sn_string *s = string_at(v, i);
    *len = s ? s->len : 0;
    return s ? s->ptr : NULL;
}

int snug_value_set_string(snug_value *v, int64_t i, const char *s, size_t len) {
    sn_string *e = string_at(v, i);
    if (!e || v->session)
        return e ? SNUG_ERR_INVALID_ARG : SNUG_ERR_RANGE;
    if (!v->strs && !(v->strs = sn_calloc((size_t)sn_tensor_numel(&v->t), sizeof *v->strs)))
        return SNUG_ERR_OOM;
    char *copy = sn_strndup(s, len);
    if (!copy)
        return SNUG_ERR_OOM;
    sn_free(v->strs[i]);
    v->strs[i] = copy;
    *e = (sn_string){copy, len};
    return SNUG_OK;
}

int snug_session_run_values(snug_session *ps, const snug_value *const *inputs, int n_inputs,
                            const snug_value **outputs, int n_outputs) {
    sn_session *s = (sn_session *)ps;
    SN_TRY(sn_session_check_counts(s, n_inputs, n_outputs));
    if (!s->api_vals && !(s->api_vals = sn_calloc((size_t)n_outputs + 1, sizeof *s->api_vals)))
        return sn_errf(&s->err, SNUG_ERR_OOM, "out of memory");
    for (int i = 0; i < n_inputs; i++) {
        if (!inputs[i])
            return sn_errf(&s->err, SNUG_ERR_INVALID_ARG, "input %d: no value", i);
        s->api_in[i] = inputs[i]->t;
    }
    SN_TRY(sn_session_run(s, s->api_in, s->api_out, &s->err));
    for (int i = 0; i < n_outputs; i++) {
        s->api_vals[i] = (snug_value){.t = s->api_out[i], .session = true};
        outputs[i] = &s->api_vals[i];
    }
    return SNUG_OK;
}
