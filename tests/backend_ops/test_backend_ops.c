/* Every schema with an OpenCL kernel against the CPU's kernel (as ggml's
 * test-backend-ops does): over a grid of shapes (odd sizes, broadcast,
 * empty), random inputs from a seeded RNG, each node run on both; inputs
 * go up with tensor_set and outputs come back with tensor_get. Products
 * agree to a normalized error (||a - b|| / ||a||) of 5e-4; data movement,
 * comparisons, casts, Max and Min exactly (NaNs and infinities among the
 * inputs where they matter). Also: the program's binary cache (a second start loads it),
 * device selection by index and name, and the backend's memory calls.
 * Exit 77 (skip) when there is no OpenCL device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/backend.h"
#include "backends/opencl/opencl.h"
#include "onnx/model.h"
#include "ops/op.h"
#include "../unit/onnx_test_util.h" /* CHECK, g_fails */
#include "harness.h"


static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}
static float frand(float lo, float hi) { return lo + (hi - lo) * (float)(rnd() >> 40) / 16777216.0f; }

/* A float32 where conversions differ: NaN (any payload), infinities,
 * zeros, float16's ties, any magnitude to 2^70 (past int64 and
 * int32), float16's subnormals and the edge of its range. */
static float special(void) {
    float sign = rnd() >> 63 ? -1.0f : 1.0f;
    switch (rnd() % 8) {
    case 0: {
        uint32_t u = 0x7fc00000u | (uint32_t)(rnd() >> 42) | (uint32_t)(rnd() >> 63) << 31;
        float f;
        memcpy(&f, &u, sizeof f);
        return f;
    }
    case 1: return sign * INFINITY;
    case 2: return sign * 0.0f;
    case 3: return sign * ldexpf((float)(1024 + rnd() % 1024) + 0.5f, (int)(rnd() % 16) - 20);
    case 4: return sign * ldexpf(frand(1, 2), (int)(rnd() % 100) - 30);
    case 5: return frand(-1, 1) * ldexpf(1, -14);
    case 6: return sign * frand(65000, 66000);
    default: return frand(-1e5f, 1e5f);
    }
}

/* ---- a case: one node, its inputs' shapes and how to fill them ------------------ */

/* Input fills. R_INDEX: integers in [-range, range) (as floats for float32);
 * R_BYTES: uint8, any value; R_VALUES: the case's values (int64, int32 or
 * float32); R_SPAN: float32 in [-range, range]; R_SPECIAL: float32 for casts
 * (NaN, infinities, zeros, float16's ties, huge, float16's subnormals and edge);
 * R_WIDE: int64 or int32 of any magnitude; R_HALF: float16 of any bits. */
enum { R_SIGNED, R_POSITIVE, R_INDEX, R_BOOL, R_BYTES, R_VALUES, R_SPAN, R_SPECIAL, R_WIDE, R_HALF };

typedef struct tin {
    sn_dtype dtype;
    int rank; /* -1: absent */
    int64_t dims[6];
    int fill;
    int64_t range; /* R_INDEX, R_SPAN */
    const int64_t *vals; /* R_VALUES */
} tin;

#define T(r, ...) {SN_F32, r, {__VA_ARGS__}, R_SIGNED, 0, NULL}
#define TP(r, ...) {SN_F32, r, {__VA_ARGS__}, R_POSITIVE, 0, NULL}
#define TU8(r, ...) {SN_U8, r, {__VA_ARGS__}, R_BYTES, 0, NULL}
#define TX(r, ...) {SN_F32, r, {__VA_ARGS__}, R_SPECIAL, 0, NULL}
#define TB(r, ...) {SN_BOOL, r, {__VA_ARGS__}, R_BOOL, 0, NULL}
#define TI(dt, range, r, ...) {dt, r, {__VA_ARGS__}, R_INDEX, range, NULL}
#define TNONE {SN_F32, -1, {0}, R_SIGNED, 0, NULL}
/* 1-D int64 (TV) or float32 (TVF) given values */
#define TV_N(...) (int64_t)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t))
#define TV(...) {SN_I64, 1, {TV_N(__VA_ARGS__)}, R_VALUES, 0, (const int64_t[]){__VA_ARGS__}}
#define TVF(...) {SN_F32, 1, {TV_N(__VA_ARGS__)}, R_VALUES, 0, (const int64_t[]){__VA_ARGS__}}

typedef struct tcase {
    const char *domain, *op;
    int opset, n_in, n_out;
    tin in[6];
    bool exact;     /* data movement: bit for bit */
    const char *attr; /* NULL, or "name=int" / "name=f:float" / "name=i,j,k" (ints), several joined by ';' */
    uint8_t out_absent; /* bit i: output i absent */
} tcase;

static int n_attr;
static sn_attr attrs[6];
static int64_t attr_ints[6][8];
static char attr_names[6][32];

static void parse_attr(const char *a) {
    n_attr = 0;
    while (a && *a && n_attr < 6) {
        const char *eq = strchr(a, '='), *end = strchr(a, ';');
        if (!eq)
            break;
        char *name = attr_names[n_attr];
        snprintf(name, sizeof attr_names[0], "%.*s", (int)(eq - a), a);
        sn_attr *t = &attrs[n_attr++];
        memset(t, 0, sizeof *t);
        t->name = name;
        if (!strncmp(eq + 1, "f:", 2)) {
            t->type = SN_ATTR_FLOAT;
            t->f = strtof(eq + 3, NULL);
        } else if ((strchr(eq + 1, ',') && (!end || strchr(eq + 1, ',') < end)) || eq[1] == '[') {
            t->type = SN_ATTR_INTS;
            const char *s = eq + 1 + (eq[1] == '[');
            for (t->n = 0; *s && *s != ']' && *s != ';' && t->n < 8; t->n++) {
                char *e;
                attr_ints[n_attr - 1][t->n] = strtoll(s, &e, 10);
                s = *e == ',' ? e + 1 : e;
            }
            t->ints = attr_ints[n_attr - 1];
        } else {
            t->type = SN_ATTR_INT;
            t->i = strtoll(eq + 1, NULL, 10);
        }
        a = end ? end + 1 : NULL;
    }
}

int run_on_alias[4];

int run_on(const sn_backend *b, const sn_kernel *k, const sn_node *n, int n_in, sn_tensor *hin, int n_out,
           sn_tensor *hout, sn_err *err) {
    sn_tensor din[12], dout[4];
    const sn_tensor *pin[12];
    sn_tensor *pout[4];
    void *bufs[16] = {0};
    int nb = 0, rc = SNUG_OK;
    void *ws = NULL, *state = NULL;
    for (int i = 0; i < n_in; i++) {
        pin[i] = hin[i].rank >= 0 ? &din[i] : NULL;
        if (!pin[i])
            continue;
        din[i] = hin[i];
        if (i < 32 && (k->host_in >> i & 1))
            continue; /* the kernel reads it on the host */
        size_t nbytes = sn_tensor_nbytes(&hin[i]);
        if (!(din[i].data = bufs[nb++] = b->ops->buffer_alloc(b->ctx, nbytes, err))) {
            rc = SNUG_ERR_OOM;
            goto done;
        }
        if ((rc = sn_backend_tensor_set(b, din[i].data, 0, hin[i].data, nbytes, err)))
            goto done;
    }
    for (int i = 0; i < n_out; i++) {
        pout[i] = hout[i].rank >= 0 ? &dout[i] : NULL;
        if (!pout[i])
            continue;
        dout[i] = hout[i];
        if (run_on_alias[i] > 0) { /* one buffer with that input (a shared KV cache) */
            dout[i].data = din[run_on_alias[i] - 1].data;
            continue;
        }
        if (!(dout[i].data = bufs[nb++] = b->ops->buffer_alloc(b->ctx, sn_tensor_nbytes(&hout[i]), err))) {
            rc = SNUG_ERR_OOM;
            goto done;
        }
    }
    sn_prep_ctx pc = {.node = n, .n_in = n_in, .n_out = n_out, .in = pin, .out = (const sn_tensor *const *)pout,
                      .err = err, .n_threads = 1};
    if (k->prepare && (rc = k->prepare(&pc)))
        goto done;
    state = pc.state;
    ws = pc.workspace ? aligned_alloc(64, (pc.workspace + 63) / 64 * 64) : NULL;
    sn_kctx kc = {.node = n, .n_in = n_in, .n_out = n_out, .in = pin, .out = pout, .state = state, .ws = ws,
                  .err = err};
    if ((rc = k->run(&kc)) || (b->ops->synchronize && (rc = b->ops->synchronize(b->ctx, err))))
        goto done;
    for (int i = 0; i < n_out; i++)
        if (pout[i] && (rc = sn_backend_tensor_get(b, dout[i].data, 0, hout[i].data, sn_tensor_nbytes(&hout[i]), err)))
            goto done;
done:
    if (k->free_state)
        k->free_state(state);
    free(ws);
    for (int i = 0; i < nb; i++)
        b->ops->buffer_free(b->ctx, bufs[i]);
    return rc;
}

int n_cases;
static int n_schemas_seen;
static const char *schemas_seen[128];

void note_schema(const char *op) {
    for (int i = 0; i < n_schemas_seen; i++)
        if (!strcmp(schemas_seen[i], op))
            return;
    schemas_seen[n_schemas_seen++] = op;
}

/* One case: the node on the CPU and on OpenCL, outputs compared; refused:
 * its data is bad (an index out of range), so both must fail alike. */
static void run_case_as(const sn_backend *cpu, const sn_backend *ocl, const tcase *tc, bool refused) {
    char what[320];
    snprintf(what, sizeof what, "%s %s [", tc->op, tc->attr ? tc->attr : "");
    for (int i = 0; i < tc->n_in; i++) {
        const tin *t = &tc->in[i];
        if (t->rank < 0) {
            strcat(what, "- ");
            continue;
        }
        strcat(what, "(");
        for (int d = 0; d < t->rank; d++)
            snprintf(what + strlen(what), sizeof what - strlen(what), "%s%lld", d ? "," : "", (long long)t->dims[d]);
        snprintf(what + strlen(what), sizeof what - strlen(what), ")%s%s ", t->dtype == SN_F32 ? "" : ":",
                 t->dtype == SN_F32 ? "" : sn_dtype_name(t->dtype));
    }
    strcat(what, "]");
    const sn_op_def *op = sn_op_find(tc->domain, tc->op, tc->opset);
    if (!op) {
        fprintf(stderr, "FAIL %s: no schema\n", what);
        g_fails++;
        return;
    }
    parse_attr(tc->attr);
    int ids_in[6], ids_out[4];
    const char *names_in[6] = {"a", "b", "c", "d", "e", "f"}, *names_out[4] = {"y", "o1", "o2", "o3"};
    for (int i = 0; i < tc->n_in; i++)
        ids_in[i] = tc->in[i].rank >= 0 ? i : -1;
    for (int i = 0; i < tc->n_out; i++)
        ids_out[i] = tc->out_absent >> i & 1 ? -1 : 10 + i;
    sn_pnode pn = {.name = "t", .op_type = tc->op, .domain = tc->domain, .n_in = tc->n_in, .n_out = tc->n_out,
                   .inputs = names_in, .outputs = names_out, .n_attr = n_attr, .attrs = attrs};
    sn_node n = {.p = &pn, .op = op, .opset = tc->opset, .n_in = tc->n_in, .n_out = tc->n_out, .in = ids_in,
                 .out = ids_out};
    sn_tensor hin[6], ocpu[4], oocl[4];
    const sn_tensor *pin[6];
    sn_tensor *pout[4];
    memset(hin, 0, sizeof hin);
    memset(ocpu, 0, sizeof ocpu);
    for (int i = 0; i < tc->n_in; i++) {
        const tin *t = &tc->in[i];
        hin[i].kind = SN_KIND_TENSOR;
        hin[i].rank = t->rank;
        pin[i] = t->rank >= 0 ? &hin[i] : NULL;
        if (t->rank < 0)
            continue;
        hin[i].dtype = t->dtype;
        memcpy(hin[i].dims, t->dims, sizeof t->dims);
        int64_t ne = sn_tensor_numel(&hin[i]);
        hin[i].data = malloc(sn_tensor_nbytes(&hin[i]) + 8);
        for (int64_t e = 0; e < ne; e++) {
            if (t->fill == R_SIGNED)
                ((float *)hin[i].data)[e] = frand(-2, 2);
            else if (t->fill == R_POSITIVE)
                ((float *)hin[i].data)[e] = frand(0.25f, 4);
            else if (t->fill == R_BOOL) /* now and then a true byte other than 1 */
                ((uint8_t *)hin[i].data)[e] = rnd() >> 63 ? (rnd() % 8 ? 1 : (uint8_t)(rnd() >> 57) | 1) : 0;
            else if (t->fill == R_BYTES)
                ((uint8_t *)hin[i].data)[e] = (uint8_t)(rnd() >> 56);
            else if (t->fill == R_SPAN)
                ((float *)hin[i].data)[e] = frand(-(float)t->range, (float)t->range);
            else if (t->fill == R_SPECIAL)
                ((float *)hin[i].data)[e] = special();
            else if (t->fill == R_HALF)
                ((uint16_t *)hin[i].data)[e] = (uint16_t)(rnd() >> 48);
            else {
                int64_t v = t->fill == R_VALUES ? t->vals[e]
                          : t->fill == R_WIDE   ? (int64_t)rnd() >> (rnd() >> 58)
                                                : (int64_t)(rnd() >> 33) % (2 * t->range) - t->range;
                if (t->dtype == SN_I64)
                    ((int64_t *)hin[i].data)[e] = v;
                else if (t->dtype == SN_I32)
                    ((int32_t *)hin[i].data)[e] = (int32_t)v;
                else
                    ((float *)hin[i].data)[e] = (float)v;
            }
        }
    }
    for (int i = 0; i < tc->n_out; i++) {
        ocpu[i].kind = SN_KIND_TENSOR;
        pout[i] = ids_out[i] >= 0 ? &ocpu[i] : NULL;
        ocpu[i].rank = ids_out[i] >= 0 ? 0 : -1;
    }
    sn_err err = {0};
    sn_infer_ctx ic = {.node = &n, .n_in = tc->n_in, .n_out = tc->n_out, .in = pin, .out = pout, .err = &err};
    if (op->infer(&ic)) {
        fprintf(stderr, "FAIL %s: infer: %s\n", what, err.msg);
        g_fails++;
        goto done;
    }
    for (int i = 0; i < tc->n_out; i++) {
        if (ids_out[i] < 0) {
            ocpu[i].rank = -1;
            continue;
        }
        ocpu[i].data = calloc(1, sn_tensor_nbytes(&ocpu[i]) + 8);
        oocl[i] = ocpu[i];
        oocl[i].data = calloc(1, sn_tensor_nbytes(&ocpu[i]) + 8);
    }
    for (int i = 0; i < tc->n_out; i++)
        oocl[i].rank = ocpu[i].rank;
    const sn_kernel *kc = sn_backend_kernel(cpu, &n), *ko = sn_backend_kernel(ocl, &n);
    if (!ko) {
        fprintf(stderr, "FAIL %s: the OpenCL backend has no kernel\n", what);
        g_fails++;
        goto done;
    }
    if (refused) {
        int rc_cpu = run_on(cpu, kc, &n, tc->n_in, hin, tc->n_out, ocpu, &err);
        int rc_ocl = run_on(ocl, ko, &n, tc->n_in, hin, tc->n_out, oocl, &err);
        if (rc_cpu == SNUG_OK || rc_ocl != rc_cpu) {
            fprintf(stderr, "FAIL %s: bad data gives %d on the CPU and %d (%s) on OpenCL\n", what, rc_cpu, rc_ocl,
                    err.msg);
            g_fails++;
        }
        n_cases++;
        goto done;
    }
    if (run_on(cpu, kc, &n, tc->n_in, hin, tc->n_out, ocpu, &err)) {
        fprintf(stderr, "FAIL %s: cpu: %s\n", what, err.msg);
        g_fails++;
        goto done;
    }
    if (run_on(ocl, ko, &n, tc->n_in, hin, tc->n_out, oocl, &err)) {
        fprintf(stderr, "FAIL %s: opencl: %s\n", what, err.msg);
        g_fails++;
        goto done;
    }
    for (int i = 0; i < tc->n_out; i++) {
        if (ocpu[i].rank < 0)
            continue;
        size_t nb = sn_tensor_nbytes(&ocpu[i]);
        if (tc->exact || ocpu[i].dtype != SN_F32) {
            if (memcmp(ocpu[i].data, oocl[i].data, nb)) {
                fprintf(stderr, "FAIL %s: output %d differs (exact)\n", what, i);
                g_fails++;
            }
            continue;
        }
        double se = 0, sa = 0;
        int64_t ne = sn_tensor_numel(&ocpu[i]);
        const float *a = ocpu[i].data, *b = oocl[i].data;
        for (int64_t e = 0; e < ne; e++)
            se += ((double)a[e] - b[e]) * ((double)a[e] - b[e]), sa += (double)a[e] * a[e];
        double nerr = sa > 0 ? sqrt(se / sa) : sqrt(se);
        if (!(nerr <= 5e-4)) {
            fprintf(stderr, "FAIL %s: output %d normalized error %.3g > 5e-4\n", what, i, nerr);
            g_fails++;
        }
    }
    n_cases++;
    note_schema(tc->op);
done:
    for (int i = 0; i < tc->n_in; i++)
        free(hin[i].data);
    for (int i = 0; i < tc->n_out; i++)
        if (ocpu[i].rank >= 0 && ocpu[i].data)
            free(ocpu[i].data), free(oocl[i].data);
}

static void run_case(const sn_backend *cpu, const sn_backend *ocl, const tcase *tc) {
    run_case_as(cpu, ocl, tc, false);
}

/* ---- the grid ----------------------------------------------------------------- */

static const char *const k_binary[] = {"Add", "Sub", "Mul", "Div"};
static const char *const k_unary[] = {"Neg", "Sqrt", "Reciprocal", "Exp", "Sigmoid", "Tanh", "Erf", "Abs",
                                      "Relu", "Cos", "Sin", "Log", "Floor", "Ceil"};
static const char *const k_unary_positive[] = {"Sqrt", "Reciprocal", "Log"};
static const char *const k_unary_exact[] = {"Neg", "Abs", "Relu", "Floor", "Ceil"};
static const char *const k_compare[] = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"};
static const char *const k_logic[] = {"And", "Or", "Xor"};
static const char *const k_reduce_ops[] = {"ReduceSum", "ReduceMean", "ReduceMax"};
static const sn_dtype k_cast_types[] = {SN_F32, SN_F16, SN_I64, SN_I32, SN_BOOL};

static bool in_list(const char *op, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(op, list[i]))
            return true;
    return false;
}
#define IN_LIST(op, list) in_list(op, list, sizeof list / sizeof list[0])

static const tin k_bin_shapes[][2] = {
    {T(1, 7), TP(1, 7)},          {T(2, 3, 5), TP(1, 5)},          {T(3, 2, 1, 4), TP(2, 3, 1)},
    {T(1, 1), TP(2, 2, 3)},       {T(2, 0, 3), TP(1, 3)},          {T(2, 33, 17), TP(2, 33, 17)},
    {T(4, 2, 3, 4, 5), TP(4, 1, 3, 1, 5)}, {T(0), TP(0)},           {T(3, 1, 65, 1), TP(2, 1, 7)},
    {T(5, 2, 1, 3, 1, 4), TP(3, 3, 5, 1)},
};
static const tin k_un_shapes[] = {TP(1, 1), TP(1, 17), TP(2, 3, 65), TP(1, 0), TP(4, 2, 3, 4, 5), TP(0)};

static const tcase k_cases[] = {
    {"", "Softmax", 13, 1, 1, {T(2, 1, 1)}, false, NULL, 0},
    {"", "Softmax", 13, 1, 1, {T(2, 3, 7)}, false, NULL, 0},
    {"", "Softmax", 13, 1, 1, {T(3, 2, 5, 129)}, false, NULL, 0},
    {"", "Softmax", 13, 1, 1, {T(2, 4, 64)}, false, "axis=-1", 0},
    {"", "Softmax", 11, 1, 1, {T(2, 5, 1000)}, false, "axis=-1", 0},
    {"", "Softmax", 13, 1, 1, {T(2, 0, 5)}, false, NULL, 0},
    {"", "MatMul", 13, 2, 1, {T(2, 1, 1), T(2, 1, 1)}, false, NULL, 0},
    {"", "MatMul", 13, 2, 1, {T(2, 3, 5), T(2, 5, 7)}, false, NULL, 0},
    {"", "MatMul", 13, 2, 1, {T(2, 17, 33), T(2, 33, 19)}, false, NULL, 0},
    {"", "MatMul", 13, 2, 1, {T(2, 64, 64), T(2, 64, 64)}, false, NULL, 0},
    {"", "MatMul", 13, 2, 1, {T(3, 2, 3, 4), T(2, 4, 5)}, false, NULL, 0},
    {"", "MatMul", 13, 2, 1, {T(4, 2, 1, 3, 4), T(3, 3, 4, 6)}, false, NULL, 0},
    {"", "MatMul", 13, 2, 1, {T(1, 5), T(2, 5, 3)}, false, NULL, 0},
    {"", "MatMul", 13, 2, 1, {T(2, 3, 5), T(1, 5)}, false, NULL, 0},
    {"", "MatMul", 13, 2, 1, {T(2, 1, 300), T(2, 300, 41)}, false, NULL, 0},
    {"", "MatMul", 13, 2, 1, {T(2, 0, 4), T(2, 4, 3)}, false, NULL, 0},
    {"", "MatMul", 13, 2, 1, {T(2, 3, 0), T(2, 0, 4)}, false, NULL, 0},
    {"", "SimplifiedLayerNormalization", 17, 2, 1, {T(2, 1, 8), T(1, 8)}, false, NULL, 0},
    {"", "SimplifiedLayerNormalization", 17, 2, 1, {T(2, 3, 17), T(1, 17)}, false, "epsilon=f:1e-6", 0},
    {"", "SimplifiedLayerNormalization", 17, 2, 1, {T(3, 2, 3, 200), T(1, 200)}, false, NULL, 0},
    {"", "SimplifiedLayerNormalization", 17, 2, 1, {T(2, 0, 8), T(1, 8)}, false, NULL, 0},
    {"com.microsoft", "SkipSimplifiedLayerNormalization", 1, 3, 1, {T(3, 2, 3, 16), T(3, 2, 3, 16), T(1, 16)},
     false, NULL, 0},
    {"com.microsoft", "SkipSimplifiedLayerNormalization", 1, 4, 4,
     {T(3, 2, 3, 33), T(2, 3, 33), T(1, 33), T(1, 33)}, false, "epsilon=f:1e-5", 6},
    {"com.microsoft", "SkipSimplifiedLayerNormalization", 1, 3, 4, {T(2, 1, 129), T(2, 1, 129), T(1, 129)}, false,
     NULL, 6},
    /* MatMulNBits in float (accuracy_level 0, the CPU's float path): 4 and 8 bits, zero points or
     * not, bias, a short last block, decode and prompt rows, batch dims, no rows */
    {"com.microsoft", "MatMulNBits", 1, 3, 1, {T(2, 1, 64), TU8(3, 8, 2, 16), TP(1, 16)}, false,
     "K=64;N=8;bits=4;block_size=32", 0},
    {"com.microsoft", "MatMulNBits", 1, 4, 1, {T(2, 5, 100), TU8(3, 7, 4, 16), TP(1, 28), TU8(1, 14)}, false,
     "K=100;N=7;bits=4;block_size=32", 0},
    {"com.microsoft", "MatMulNBits", 1, 6, 1,
     {T(2, 3, 48), TU8(3, 5, 3, 16), TP(1, 15), TU8(1, 15), TNONE, T(1, 5)}, false, "K=48;N=5;bits=8;block_size=16",
     0},
    {"com.microsoft", "MatMulNBits", 1, 3, 1, {T(2, 1, 300), TU8(3, 33, 3, 64), TP(1, 99)}, false,
     "K=300;N=33;bits=4;block_size=128", 0},
    {"com.microsoft", "MatMulNBits", 1, 6, 1,
     {T(3, 2, 3, 64), TU8(3, 9, 2, 16), TP(1, 18), TNONE, TNONE, T(1, 9)}, false, "K=64;N=9;bits=4;block_size=32", 0},
    {"com.microsoft", "MatMulNBits", 1, 3, 1, {T(2, 17, 576), TU8(3, 70, 18, 16), TP(1, 1260)}, false,
     "K=576;N=70;bits=4;block_size=32", 0},
    /* long columns (64 blocks and more) at few rows: the work-group-per-output form */
    {"com.microsoft", "MatMulNBits", 1, 3, 1, {T(2, 1, 2048), TU8(3, 5, 64, 16), TP(1, 320)}, false,
     "K=2048;N=5;bits=4;block_size=32", 0},
    {"com.microsoft", "MatMulNBits", 1, 4, 1, {T(2, 3, 2100), TU8(3, 4, 66, 32), TP(1, 264), TU8(1, 264)}, false,
     "K=2100;N=4;bits=8;block_size=32", 0},
    {"com.microsoft", "MatMulNBits", 1, 3, 1, {T(2, 0, 64), TU8(3, 8, 2, 16), TP(1, 16)}, false,
     "K=64;N=8;bits=4;block_size=32", 0},
    {"", "Transpose", 13, 1, 1, {T(2, 2, 3)}, true, NULL, 0},
    {"", "Transpose", 13, 1, 1, {T(3, 2, 3, 4)}, true, "perm=1,0,2", 0},
    {"", "Transpose", 13, 1, 1, {T(3, 5, 3, 7)}, true, "perm=2,0,1", 0},
    {"", "Transpose", 13, 1, 1, {T(4, 1, 5, 1, 3)}, true, "perm=3,2,1,0", 0},
    {"", "Transpose", 13, 1, 1, {T(4, 2, 17, 4, 9)}, true, "perm=0,2,1,3", 0},
    {"", "Transpose", 13, 1, 1, {T(2, 0, 3)}, true, NULL, 0},
    {"", "Concat", 13, 2, 1, {T(2, 3, 4), T(2, 5, 4)}, true, "axis=0", 0},
    {"", "Concat", 13, 3, 1, {T(3, 2, 3, 4), T(3, 2, 1, 4), T(3, 2, 7, 4)}, true, "axis=1", 0},
    {"", "Concat", 13, 3, 1, {T(2, 3, 5), T(2, 3, 0), T(2, 3, 2)}, true, "axis=-1", 0},
    {"", "Concat", 13, 2, 1, {T(1, 0), T(1, 0)}, true, "axis=0", 0},
    {"", "Gather", 13, 2, 1, {T(2, 10, 4), {SN_I64, 1, {3}, R_INDEX, 10, NULL}}, true, "axis=0", 0},
    {"", "Gather", 13, 2, 1, {T(2, 10, 4), {SN_I64, 2, {2, 5}, R_INDEX, 10, NULL}}, true, NULL, 0},
    {"", "Gather", 13, 2, 1, {T(3, 3, 7, 5), {SN_I32, 1, {4}, R_INDEX, 7, NULL}}, true, "axis=1", 0},
    {"", "Gather", 13, 2, 1, {T(2, 6, 9), {SN_I64, 0, {0}, R_INDEX, 9, NULL}}, true, "axis=-1", 0},
    {"", "Gather", 13, 2, 1, {T(2, 6, 9), {SN_I64, 1, {0}, R_INDEX, 6, NULL}}, true, NULL, 0},
    {"", "Where", 16, 3, 1, {{SN_BOOL, 2, {3, 4}, R_BOOL, 0, NULL}, T(1, 4), T(2, 3, 1)}, true, NULL, 0},
    {"", "Where", 16, 3, 1, {{SN_BOOL, 1, {5}, R_BOOL, 0, NULL}, T(3, 2, 3, 5), T(0)}, true, NULL, 0},
    {"", "Where", 16, 3, 1, {{SN_BOOL, 2, {0, 2}, R_BOOL, 0, NULL}, T(1, 2), T(1, 2)}, true, NULL, 0},
    /* Pow: a base of either sign squared (a broadcast 2.0, as RMS norms have it) or cubed,
     * exponents 2 and 3 along the last axis, a scalar exponent */
    {"", "Pow", 15, 2, 1, {T(3, 2, 3, 17), TVF(2)}, false, NULL, 0},
    {"", "Pow", 15, 2, 1, {T(2, 4, 6), TVF(3)}, false, NULL, 0},
    {"", "Pow", 15, 2, 1, {T(2, 5, 2), TVF(2, 3)}, false, NULL, 0},
    {"", "Pow", 15, 2, 1, {TP(2, 4, 9), {SN_F32, 0, {0}, R_VALUES, 0, (const int64_t[]){3}}}, false, NULL, 0},
    /* Max, Min: one input, three and four broadcast */
    {"", "Max", 13, 1, 1, {T(2, 3, 5)}, true, NULL, 0},
    {"", "Min", 13, 1, 1, {T(2, 3, 5)}, true, NULL, 0},
    {"", "Max", 13, 3, 1, {T(3, 2, 1, 5), T(2, 4, 1), T(1, 5)}, true, NULL, 0},
    {"", "Min", 13, 4, 1, {T(1, 7), T(2, 3, 7), T(2, 3, 1), T(0)}, true, NULL, 0},
    /* NaNs, infinities and signed zeros (R_SPECIAL) through Max, Min, comparisons, Abs, Relu */
    {"", "Max", 13, 2, 1, {TX(2, 9, 40), TX(2, 9, 40)}, true, NULL, 0},
    {"", "Min", 13, 2, 1, {TX(2, 9, 40), TX(1, 40)}, true, NULL, 0},
    {"", "Equal", 13, 2, 1, {TX(2, 9, 40), TX(2, 9, 40)}, true, NULL, 0},
    {"", "Less", 13, 2, 1, {TX(2, 9, 40), TX(1, 40)}, true, NULL, 0},
    {"", "GreaterOrEqual", 16, 2, 1, {TX(2, 9, 40), TX(2, 9, 1)}, true, NULL, 0},
    {"", "Abs", 13, 1, 1, {TX(2, 9, 40)}, true, NULL, 0},
    {"", "Relu", 14, 1, 1, {TX(2, 9, 40)}, true, NULL, 0},
    /* Cos, Sin over rotary angles (positions up to 8192) */
    {"", "Cos", 7, 1, 1, {{SN_F32, 2, {3, 1000}, R_SPAN, 8192, NULL}}, false, NULL, 0},
    {"", "Sin", 7, 1, 1, {{SN_F32, 2, {3, 1000}, R_SPAN, 8192, NULL}}, false, NULL, 0},
    /* Slice (exact): steps past 1 and negative, clamped starts and ends (INT64_MAX as exports
     * write it), no axes or steps, an empty result, a step past the dim, rank 5, elements of
     * 8, 4, 2 and 1 bytes, opset 10, and opset 9's attributes */
    {"", "Slice", 13, 5, 1, {T(3, 2, 3, 17), TV(1), TV(10), TV(2), TV(2)}, true, NULL, 0},
    {"", "Slice", 13, 5, 1, {T(3, 2, 5, 7), TV(-1), TV(-100), TV(1), TV(-1)}, true, NULL, 0},
    {"", "Slice", 13, 5, 1, {T(3, 2, 5, 7), TV(4, 6), TV(0, 1), TV(1, 2), TV(-2, -3)}, true, NULL, 0},
    {"", "Slice", 13, 3, 1, {T(2, 5, 7), TV(-100, 2), TV(100, 9223372036854775807)}, true, NULL, 0},
    {"", "Slice", 13, 4, 1, {T(2, 5, 7), TV(3), TV(1), TV(0)}, true, NULL, 0},
    {"", "Slice", 13, 5, 1, {T(2, 5, 7), TV(-100), TV(-200), TV(1), TV(-1)}, true, NULL, 0},
    {"", "Slice", 13, 5, 1, {T(4, 3, 4, 6, 8), TV(2, 1), TV(8, 3), TV(-1, 0), TV(3, 1)}, true, NULL, 0},
    {"", "Slice", 13, 5, 1, {T(4, 3, 4, 6, 8), TV(0), TV(1), TV(1), TV(100)}, true, NULL, 0},
    {"", "Slice", 13, 5, 1, {T(5, 2, 3, 4, 5, 6), TV(1, -1, 0), TV(3, 0, 6), TV(2, 3, 4), TV(1, -2, 2)}, true, NULL,
     0},
    {"", "Slice", 13, 5, 1, {T(2, 0, 5), TV(1), TV(4), TV(1), TV(1)}, true, NULL, 0},
    {"", "Slice", 13, 5, 1, {TI(SN_I64, 1000, 2, 6, 9), TV(1), TV(8), TV(1), TV(3)}, true, NULL, 0},
    {"", "Slice", 13, 4, 1, {TI(SN_I32, 1000, 2, 3, 9), TV(-3), TV(9), TV(-1)}, true, NULL, 0},
    {"", "Slice", 13, 5, 1, {{SN_F16, 2, {6, 10}, R_HALF, 0, NULL}, TV(1, 9), TV(5, 0), TNONE, TV(2, -3)}, true,
     NULL, 0},
    {"", "Slice", 13, 5, 1, {TU8(3, 2, 5, 7), TV(4), TV(0), TV(2), TV(-1)}, true, NULL, 0},
    {"", "Slice", 13, 4, 1, {TB(2, 4, 4), TV(-3), TV(4), TV(-1)}, true, NULL, 0},
    {"", "Slice", 10, 5, 1, {T(2, 4, 6), TV(1), TV(-1), TV(1), TV(2)}, true, NULL, 0},
    {"", "Slice", 9, 1, 1, {T(2, 4, 6)}, true, "starts=1,0;ends=3,100;axes=0,1", 0},
    /* Expand (exact): numpy broadcast, a scalar, a shape of 1s shorter than x, rank 5, elements
     * of 8, 2 and 1 bytes, an empty result, an attention mask */
    {"", "Expand", 13, 2, 1, {T(3, 2, 3, 1), TV(2, 3, 4)}, true, NULL, 0},
    {"", "Expand", 13, 2, 1, {T(1, 1), TV(5)}, true, NULL, 0},
    {"", "Expand", 13, 2, 1, {T(0), TV(2, 3)}, true, NULL, 0},
    {"", "Expand", 13, 2, 1, {T(3, 2, 1, 3), TV(2, 4, 3)}, true, NULL, 0},
    {"", "Expand", 13, 2, 1, {T(2, 2, 3), TV(1, 1)}, true, NULL, 0},
    {"", "Expand", 13, 2, 1, {T(2, 2, 3), TV(4, 1, 1)}, true, NULL, 0},
    {"", "Expand", 13, 2, 1, {TI(SN_I64, 50, 2, 1, 4), TV(3, 2, 2, 5, 4)}, true, NULL, 0},
    {"", "Expand", 13, 2, 1, {{SN_F16, 1, {5}, R_HALF, 0, NULL}, TV(2, 1, 5)}, true, NULL, 0},
    {"", "Expand", 13, 2, 1, {TU8(2, 3, 1), TV(3, 7)}, true, NULL, 0},
    {"", "Expand", 13, 2, 1, {TB(4, 1, 1, 1, 9), TV(1, 1, 9, 9)}, true, NULL, 0},
    {"", "Expand", 13, 2, 1, {T(2, 0, 1), TV(0, 4)}, true, NULL, 0},
    /* Not */
    {"", "Not", 1, 1, 1, {TB(3, 2, 3, 65)}, true, NULL, 0},
    {"", "Not", 1, 1, 1, {TB(0)}, true, NULL, 0},
    {"", "Not", 1, 1, 1, {TB(1, 0)}, true, NULL, 0},
    /* LayerNormalization (opset 17, and ORT's before it): the last axis, SmolLM2's width, the
     * last two axes, no bias, one value of scale and bias, no rows, rank 1 */
    {"", "LayerNormalization", 17, 3, 1, {T(3, 2, 3, 17), T(1, 17), T(1, 17)}, false, NULL, 0},
    {"", "LayerNormalization", 17, 3, 1, {T(2, 4, 576), T(1, 576), T(1, 576)}, false, "epsilon=f:1e-6", 0},
    {"", "LayerNormalization", 17, 3, 1, {T(3, 2, 3, 5), T(2, 3, 5), T(2, 3, 5)}, false, "axis=1", 0},
    {"", "LayerNormalization", 17, 2, 1, {T(2, 3, 9), T(1, 9)}, false, NULL, 0},
    {"", "LayerNormalization", 17, 3, 1, {T(2, 3, 9), T(1, 1), T(1, 1)}, false, NULL, 0},
    {"", "LayerNormalization", 17, 3, 1, {T(2, 0, 8), T(1, 8), T(1, 8)}, false, NULL, 0},
    {"", "LayerNormalization", 17, 3, 1, {T(1, 200), T(1, 200), T(1, 200)}, false, NULL, 0},
    {"", "LayerNormalization", 16, 3, 1, {T(2, 3, 17), T(1, 17), T(1, 17)}, false, NULL, 0},
    /* SkipLayerNormalization: beta and bias with the sum output, skip rows broadcast, neither,
     * bias without beta, SmolLM2's width */
    {"com.microsoft", "SkipLayerNormalization", 1, 5, 4, {T(3, 2, 3, 33), T(3, 2, 3, 33), T(1, 33), T(1, 33), T(1, 33)},
     false, NULL, 6},
    {"com.microsoft", "SkipLayerNormalization", 1, 4, 1, {T(3, 2, 3, 33), T(2, 3, 33), T(1, 33), T(1, 33)}, false,
     "epsilon=f:1e-5", 0},
    {"com.microsoft", "SkipLayerNormalization", 1, 3, 1, {T(2, 5, 16), T(2, 5, 16), T(1, 16)}, false, NULL, 0},
    {"com.microsoft", "SkipLayerNormalization", 1, 5, 4,
     {T(3, 1, 3, 129), T(3, 1, 3, 129), T(1, 129), TNONE, T(1, 129)}, false, NULL, 6},
    {"com.microsoft", "SkipLayerNormalization", 1, 4, 1, {T(3, 2, 4, 576), T(3, 2, 4, 576), T(1, 576), T(1, 576)},
     false, "epsilon=f:1e-5", 0},
    /* Gemm: plain, C along N, both transposed with C along M, alpha and beta with a scalar C,
     * beta 0, a decode row through a transposed weight, a full C, no rows, no inner size */
    {"", "Gemm", 13, 2, 1, {T(2, 3, 5), T(2, 5, 7)}, false, NULL, 0},
    {"", "Gemm", 13, 3, 1, {T(2, 17, 33), T(2, 33, 19), T(1, 19)}, false, NULL, 0},
    {"", "Gemm", 13, 3, 1, {T(2, 5, 17), T(2, 19, 5), T(2, 17, 1)}, false, "transA=1;transB=1", 0},
    {"", "Gemm", 13, 3, 1, {T(2, 33, 47), T(2, 65, 47), T(0)}, false, "transB=1;alpha=f:0.5;beta=f:2", 0},
    {"", "Gemm", 13, 3, 1, {T(2, 6, 4), T(2, 4, 3), T(2, 6, 3)}, false, "beta=f:0", 0},
    {"", "Gemm", 13, 3, 1, {T(2, 1, 576), T(2, 1536, 576), T(1, 1536)}, false, "transB=1", 0},
    {"", "Gemm", 13, 3, 1, {T(2, 64, 64), T(2, 64, 64), T(2, 64, 64)}, false, "transA=1", 0},
    {"", "Gemm", 13, 3, 1, {T(2, 0, 4), T(2, 4, 3), T(1, 3)}, false, NULL, 0},
    {"", "Gemm", 13, 3, 1, {T(2, 3, 0), T(2, 0, 4), T(2, 1, 4)}, false, NULL, 0},
};

/* Reductions: x, its axes (n -1: none given, 0: an empty axes input), keepdims,
 * noop_with_empty_axes; empty: reductions of no elements (Mean's NaN left out). */
typedef struct rspec {
    tin x;
    int n;
    int64_t axes[3];
    int keep, noop;
    bool empty;
} rspec;

static const rspec k_reduce[] = {
    {T(3, 2, 3, 17), 1, {-1}, 1, 0, false},      /* rows: the last axis */
    {T(3, 2, 64, 576), 1, {2}, 1, 0, false},     /* SmolLM2's hidden rows */
    {T(3, 2, 1, 1000), 1, {-1}, 0, 0, false},    /* a long row */
    {T(3, 2, 3, 17), 1, {1}, 1, 0, false},       /* columns: the innermost dim kept */
    {T(3, 2, 300, 3), 1, {0}, 0, 0, false},      /* long columns */
    {T(3, 2, 3, 17), 2, {0, 2}, 0, 0, false},    /* reduced, kept, reduced */
    {T(4, 4, 1, 5, 7), 2, {1, 2}, 1, 0, false},  /* a dim of 1 merged away */
    {T(5, 3, 4, 5, 2, 7), 3, {0, 2, 4}, 0, 0, false}, /* rank 5, alternating */
    {T(5, 3, 4, 5, 2, 7), 2, {-1, -2}, 1, 0, false},
    {T(3, 2, 2, 5), -1, {0}, 0, 0, false},       /* no axes: all */
    {T(0), -1, {0}, 1, 0, false},                /* a scalar */
    {T(3, 2, 3, 0), 1, {1}, 1, 0, false},        /* nothing out */
    {T(3, 2, 0, 3), 1, {1}, 1, 0, true},         /* empty reductions: 0, -inf */
    {T(3, 2, 3, 4), 0, {0}, 1, 1, false},        /* empty axes with noop: a copy */
    {T(3, 2, 3, 4), 0, {0}, 0, 0, false},        /* empty axes: all */
};

/* Each reduction as the attribute gives its axes (opset 13, ReduceSum 11) and as input 1
 * does (opset 18, ReduceSum 13). */
static void run_reduce_cases(const sn_backend *cpu, const sn_backend *ocl) {
    for (size_t o = 0; o < sizeof k_reduce_ops / sizeof k_reduce_ops[0]; o++)
        for (size_t i = 0; i < sizeof k_reduce / sizeof k_reduce[0]; i++)
            for (int from_input = 0; from_input < 2; from_input++) {
                const rspec *r = &k_reduce[i];
                bool sum = o == 0, mean = o == 1;
                if ((!from_input && r->n == 0) || (mean && r->empty))
                    continue;
                char attr[96];
                int at = snprintf(attr, sizeof attr, "keepdims=%d", r->keep);
                if (r->noop)
                    at += snprintf(attr + at, sizeof attr - (size_t)at, ";noop_with_empty_axes=1");
                tcase tc = {"", k_reduce_ops[o], from_input ? (sum ? 13 : 18) : (sum ? 11 : 13), 1, 1, {r->x},
                            o == 2, attr, 0};
                if (from_input && r->n >= 0) {
                    tin ax = {SN_I64, 1, {r->n}, R_VALUES, 0, r->axes};
                    tc.in[1] = ax;
                    tc.n_in = 2;
                } else if (r->n > 0) {
                    at += snprintf(attr + at, sizeof attr - (size_t)at, ";axes=[");
                    for (int a = 0; a < r->n; a++)
                        at += snprintf(attr + at, sizeof attr - (size_t)at, "%s%lld", a ? "," : "",
                                       (long long)r->axes[a]);
                    snprintf(attr + at, sizeof attr - (size_t)at, "]");
                }
                run_case(cpu, ocl, &tc);
            }
}

/* Cast between every pair (itself too) of float32, float16, int64, int32 and bool, from values
 * where conversions differ: NaN, infinities, huge and tiny (R_SPECIAL), any float16 bits, int64
 * and int32 of any magnitude. */
static void run_cast_cases(const sn_backend *cpu, const sn_backend *ocl) {
    static const tin shapes[] = {T(3, 3, 7, 33), T(0), T(2, 2, 0)};
    size_t nt = sizeof k_cast_types / sizeof k_cast_types[0];
    for (size_t f = 0; f < nt; f++)
        for (size_t t = 0; t < nt; t++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                sn_dtype from = k_cast_types[f];
                char attr[16];
                snprintf(attr, sizeof attr, "to=%d", (int)k_cast_types[t]);
                tcase tc = {"", "Cast", 13, 1, 1, {shapes[s]}, true, attr, 0};
                tc.in[0].dtype = from;
                tc.in[0].fill = from == SN_F32   ? R_SPECIAL
                                : from == SN_F16 ? R_HALF
                                : from == SN_BOOL ? R_BOOL
                                                  : R_WIDE;
                run_case(cpu, ocl, &tc);
            }
}

static void run_grid(const sn_backend *cpu, const sn_backend *ocl) {
    for (size_t o = 0; o < sizeof k_binary / sizeof k_binary[0]; o++)
        for (size_t s = 0; s < sizeof k_bin_shapes / sizeof k_bin_shapes[0]; s++) {
            tcase tc = {"", k_binary[o], 14, 2, 1, {k_bin_shapes[s][0], k_bin_shapes[s][1]}, false, NULL, 0};
            run_case(cpu, ocl, &tc);
        }
    for (size_t s = 0; s < sizeof k_bin_shapes / sizeof k_bin_shapes[0]; s++) {
        /* Pow: positive bases, exponents of either sign; Max, Min: exact, as comparisons are */
        tcase pow = {"", "Pow", 15, 2, 1, {k_bin_shapes[s][0], k_bin_shapes[s][1]}, false, NULL, 0};
        pow.in[0].fill = R_POSITIVE, pow.in[1].fill = R_SIGNED;
        run_case(cpu, ocl, &pow);
        for (int m = 0; m < 2; m++) {
            tcase tc = {"", m ? "Min" : "Max", 13, 2, 1, {k_bin_shapes[s][0], k_bin_shapes[s][1]}, true, NULL, 0};
            run_case(cpu, ocl, &tc);
        }
        /* comparisons of small integers (so some are equal) as float32 and int64; logic on bool */
        for (size_t o = 0; o < sizeof k_compare / sizeof k_compare[0]; o++)
            for (int i64 = 0; i64 < 2; i64++) {
                tcase tc = {"", k_compare[o], 16, 2, 1, {k_bin_shapes[s][0], k_bin_shapes[s][1]}, true, NULL, 0};
                for (int i = 0; i < 2; i++)
                    tc.in[i].dtype = i64 ? SN_I64 : SN_F32, tc.in[i].fill = R_INDEX, tc.in[i].range = 3;
                run_case(cpu, ocl, &tc);
            }
        for (size_t o = 0; o < sizeof k_logic / sizeof k_logic[0]; o++) {
            tcase tc = {"", k_logic[o], 7, 2, 1, {k_bin_shapes[s][0], k_bin_shapes[s][1]}, true, NULL, 0};
            for (int i = 0; i < 2; i++)
                tc.in[i].dtype = SN_BOOL, tc.in[i].fill = R_BOOL;
            run_case(cpu, ocl, &tc);
        }
    }
    for (size_t o = 0; o < sizeof k_unary / sizeof k_unary[0]; o++)
        for (size_t s = 0; s < sizeof k_un_shapes / sizeof k_un_shapes[0]; s++) {
            tcase tc = {"", k_unary[o], 13, 1, 1, {k_un_shapes[s]}, IN_LIST(k_unary[o], k_unary_exact), NULL, 0};
            if (!IN_LIST(k_unary[o], k_unary_positive))
                tc.in[0].fill = R_SIGNED;
            run_case(cpu, ocl, &tc);
        }
    run_reduce_cases(cpu, ocl);
    run_cast_cases(cpu, ocl);
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++)
        run_case(cpu, ocl, &k_cases[i]);
    /* indices out of range: an error on the device too (its status word), not zeros */
    const tcase refused[] = {
        {"", "Gather", 13, 2, 1, {T(2, 10, 4), TV(3, 10, 1)}, true, "axis=0", 0},
        {"", "Gather", 13, 2, 1, {T(2, 6, 9), TV(-10)}, true, "axis=-1", 0},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        run_case_as(cpu, ocl, &refused[i], true);
}

/* ---- the backend itself --------------------------------------------------------- */

static void check_backend(const sn_backend *ocl) {
    sn_err err = {0};
    sn_buffer_type bt;
    sn_backend_buffer_type(ocl, &bt);
    CHECK(!strcmp(bt.name, "opencl") && bt.alignment >= 64 && bt.max_size > 0 && !bt.host_visible);
    sn_mem_info m0, m1;
    CHECK(sn_backend_mem_info(ocl, &m0, &err) == SNUG_OK && m0.total > 0 && m0.free <= m0.total);
    uint8_t *buf = ocl->ops->buffer_alloc(ocl->ctx, 1 << 20, &err);
    CHECK(buf && (uintptr_t)buf % bt.alignment == 0);
    if (!buf)
        return;
    CHECK(sn_backend_mem_info(ocl, &m1, &err) == SNUG_OK && m1.free <= m0.free);
    float src[256], back[256];
    for (int i = 0; i < 256; i++)
        src[i] = (float)i - 100.5f;
    CHECK(sn_backend_tensor_set(ocl, buf, 4096, src, sizeof src, &err) == SNUG_OK);
    CHECK(sn_backend_tensor_get(ocl, buf, 4096, back, sizeof back, &err) == SNUG_OK && !memcmp(src, back, sizeof src));
    sn_event *ev;
    memset(back, 0, sizeof back);
    CHECK(sn_backend_copy_async(ocl, buf + 8192, src, sizeof src, true, &ev, &err) == SNUG_OK && ev);
    CHECK(sn_backend_event_wait(ocl, ev, &err) == SNUG_OK);
    CHECK(sn_backend_copy_async(ocl, back, buf + 8192, sizeof back, false, &ev, &err) == SNUG_OK);
    CHECK(sn_backend_event_wait(ocl, ev, &err) == SNUG_OK && !memcmp(src, back, sizeof src));
    /* outside any buffer, or running over its end: an error, not a crash */
    CHECK(sn_backend_tensor_set(ocl, buf, (1 << 20) - 8, src, 64, &err) == SNUG_ERR_INVALID_ARG && strstr(err.msg, "opencl:"));
    CHECK(sn_backend_tensor_get(ocl, src, 0, back, 4, &err) == SNUG_ERR_INVALID_ARG);
    CHECK(ocl->ops->buffer_alloc(ocl->ctx, bt.max_size + 1, &err) == NULL && strstr(err.msg, "largest"));
    ocl->ops->buffer_free(ocl->ctx, buf);
}

int main(void) {
    sn_err err = {0};
    /* the binary cache: the first start compiles and stores, the second loads */
    char dir[] = "/tmp/snug-ocl-cache-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    setenv("SNUG_CACHE", dir, 1);
    sn_backend ocl, cpu, again;
    int rc = sn_backend_new("opencl", &ocl, &err);
    if (rc == SNUG_ERR_UNSUPPORTED && strstr(err.msg, "no OpenCL platform")) {
        printf("test_backend_ops: skipped: %s\n", err.msg);
        rmdir(dir);
        return 77;
    }
    if (rc) {
        fprintf(stderr, "test_backend_ops: %s\n", err.msg);
        return 1;
    }
    CHECK(!sn_cl_from_cache(ocl.ctx));
    CHECK(sn_backend_new("opencl:0", &again, &err) == SNUG_OK && sn_cl_from_cache(again.ctx));
    sn_backend_free(&again);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    unsetenv("SNUG_CACHE");
    /* device selection: a name's part, and devices that are not there */
    CHECK(sn_backend_new("opencl:99", &again, &err) == SNUG_ERR_INVALID_ARG && strstr(err.msg, "no device '99'") &&
          strstr(err.msg, "0 '"));
    CHECK(sn_backend_new("opencl:no-such-gpu", &again, &err) == SNUG_ERR_INVALID_ARG);
    const char *dname = strchr(((const sn_cl_ctx *)ocl.ctx)->name, '(') + 1; /* "opencl:0 (NAME)" */
    char part[8];
    snprintf(part, sizeof part, "%.5s", dname);
    CHECK(sn_backend_new(strcat(strcpy(cmd, "opencl:"), part), &again, &err) == SNUG_OK &&
          strstr(((const sn_cl_ctx *)again.ctx)->name, part));
    sn_backend_free(&again);
    CHECK(sn_backend_new("cpu:1", &again, &err) == SNUG_ERR_INVALID_ARG);
    CHECK(sn_backend_new("cpu", &cpu, &err) == SNUG_OK);
    check_backend(&ocl);
    run_grid(&cpu, &ocl);
    g_fails += run_attention_cases(&cpu, &ocl);
    printf("test_backend_ops: %d schemas, %d shape cases, OpenCL against the CPU\n", n_schemas_seen, n_cases);
    sn_backend_free(&ocl);
    sn_backend_free(&cpu);
    if (g_fails) {
        fprintf(stderr, "test_backend_ops: %d failure(s)\n", g_fails);
        return 1;
    }
    printf("test_backend_ops: ok\n");
    return 0;
}
