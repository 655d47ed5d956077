/* Random ops: Bernoulli, RandomUniform(Like), RandomNormal(Like),
 * Multinomial.
 *
 * Generator: xoshiro256** seeded through splitmix64. With a `seed`
 * attribute the generator starts from splitmix64(bits of (double)seed) at
 * every run, so a seeded node repeats its output; without one each node
 * keeps its own generator (per-node state, seeded from the clock and the
 * node) that advances across runs. Uniform doubles take the top 53 bits;
 * normals use Box-Muller. The values cannot equal numpy's or onnxruntime's
 * streams. */
#include <math.h>
#include <string.h>
#include <time.h>

#include "ops/kit.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

typedef struct sn_rng {
    uint64_t s[4];
} sn_rng;

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void rng_seed(sn_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(sn_rng *r) {
    uint64_t *s = r->s;
    const uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

/* Uniform in [0, 1). */
static inline double rng_uniform(sn_rng *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }

static double rng_normal(sn_rng *r) {
    double u1 = rng_uniform(r), u2 = rng_uniform(r);
    return sqrt(-2.0 * log(1.0 - u1)) * cos(2.0 * M_PI * u2);
}

static uint64_t seed_bits(float seed) {
    double d = seed;
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static int sn_random_prepare(sn_prep_ctx *c) {
    if (sn_attr_get(c->node, "seed"))
        return SNUG_OK; /* re-seeded at each run */
    sn_rng *r = sn_malloc(sizeof *r);
    if (!r)
        return sn_kfail(c->err, c->node, SNUG_ERR_OOM, "out of memory");
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    rng_seed(r, (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)(uintptr_t)c->node);
    c->state = r;
    return SNUG_OK;
}

static void sn_random_free(void *state) { sn_free(state); }

/* The generator for this run: seeded from the attribute, the node's state,
 * or (no prepare ran) a clock-seeded local one. */
static sn_rng *run_rng(sn_kctx *c, sn_rng *local) {
    if (sn_attr_get(c->node, "seed")) {
        rng_seed(local, seed_bits(sn_attr_float(c->node, "seed", 0)));
        return local;
    }
    if (c->state)
        return c->state;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    rng_seed(local, (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30));
    return local;
}

/* t from a dtype attribute, any int64: a float type kernels compute. */
static bool float_dtype(int64_t t) { return t == (int32_t)t && sn_dtype_is_real((sn_dtype)t); }

/* ---- Bernoulli -------------------------------------------------------------- */

static int sn_bernoulli_infer(sn_infer_ctx *c) {
    const sn_tensor *x = c->in[0];
    if (!float_dtype(x->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "input must be a float tensor");
    int64_t dt = sn_attr_int(c->node, "dtype", x->dtype);
    if (!sn_dtype_valid((int)dt) || dt == SN_STRING || dt == SN_C64 || dt == SN_C128)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "dtype %lld is not supported", (long long)dt);
    sn_tensor *o = c->out[0];
    sn_set_out(o, (sn_dtype)dt, x->rank, x->dims);
    return SNUG_OK;
}

static int sn_bernoulli_run(sn_kctx *c) {
    sn_rng local, *r = run_rng(c, &local);
    const sn_tensor *x = c->in[0];
    sn_tensor *y = c->out[0];
    const int64_t n = sn_tensor_numel(x);
    for (int64_t i = 0; i < n; i++) {
        double p = sn_load_f64(x->dtype, x->data, (size_t)i);
        sn_store_f64(y->dtype, y->data, (size_t)i, rng_uniform(r) < p ? 1.0 : 0.0);
    }
    return SNUG_OK;
}

/* ---- RandomUniform / RandomNormal (and the *Like forms) --------------------------- */

static int sn_rand_uniform_infer(sn_infer_ctx *c) {
    const int64_t *shape;
    int rank = sn_attr_ints(c->node, "shape", &shape);
    if (rank < 0 || rank > SN_MAX_RANK)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "attribute shape is required (rank <= %d)", SN_MAX_RANK);
    for (int i = 0; i < rank; i++)
        if (shape[i] < 0)
            return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "shape[%d] = %lld is negative", i, (long long)shape[i]);
    int64_t dt = sn_attr_int(c->node, "dtype", SN_F32);
    if (!float_dtype(dt))
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "dtype %lld is not a float type", (long long)dt);
    sn_tensor *o = c->out[0];
    sn_set_out(o, (sn_dtype)dt, rank, shape);
    return SNUG_OK;
}

static int sn_rand_uniform_like_infer(sn_infer_ctx *c) {
    const sn_tensor *x = c->in[0];
    int64_t dt = sn_attr_int(c->node, "dtype", x->dtype);
    if (!float_dtype(dt))
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "output type %s is not a float type",
                        sn_dtype_name((sn_dtype)dt));
    sn_tensor *o = c->out[0];
    sn_set_out(o, (sn_dtype)dt, x->rank, x->dims);
    return SNUG_OK;
}

static int sn_rand_uniform_run(sn_kctx *c) {
    sn_rng local, *r = run_rng(c, &local);
    sn_tensor *y = c->out[0];
    const double lo = sn_attr_float(c->node, "low", 0.0f), hi = sn_attr_float(c->node, "high", 1.0f);
    const int64_t n = sn_tensor_numel(y);
    for (int64_t i = 0; i < n; i++)
        sn_store_f64(y->dtype, y->data, (size_t)i, lo + (hi - lo) * rng_uniform(r));
    return SNUG_OK;
}

static int sn_rand_normal_run(sn_kctx *c) {
    sn_rng local, *r = run_rng(c, &local);
    sn_tensor *y = c->out[0];
    const double mean = sn_attr_float(c->node, "mean", 0.0f), scale = sn_attr_float(c->node, "scale", 1.0f);
    const int64_t n = sn_tensor_numel(y);
    for (int64_t i = 0; i < n; i++)
        sn_store_f64(y->dtype, y->data, (size_t)i, mean + scale * rng_normal(r));
    return SNUG_OK;
}

/* ---- Multinomial ---------------------------------------------------------------------- */

static int sn_multinomial_infer(sn_infer_ctx *c) {
    const sn_tensor *x = c->in[0];
    if (!float_dtype(x->dtype))
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "input must be a float tensor");
    if (x->rank >= 0 && x->rank != 2)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "input must be [batch, classes]");
    int64_t dt = sn_attr_int(c->node, "dtype", SN_I32);
    if (dt != SN_I32 && dt != SN_I64)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "dtype must be int32 or int64");
    int64_t ss = sn_attr_int(c->node, "sample_size", 1);
    if (ss < 0)
        return sn_kfail(c->err, c->node, SNUG_ERR_INVALID_ARG, "sample_size %lld is negative", (long long)ss);
    sn_tensor *o = c->out[0];
    o->kind = SN_KIND_TENSOR;
    o->dtype = (sn_dtype)dt;
    int64_t d[2] = {x->rank == 2 ? x->dims[0] : SN_DIM_UNKNOWN, ss};
    sn_tensor_set_shape(o, 2, d);
    return SNUG_OK;
}

static int sn_multinomial_run(sn_kctx *c) {
    sn_rng local, *r = run_rng(c, &local);
    const sn_tensor *x = c->in[0];
    sn_tensor *y = c->out[0];
    const int64_t B = x->dims[0], K = x->dims[1], S = y->dims[1];
    if (K == 0 && B * S > 0)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "no classes to sample from");
    for (int64_t b = 0; b < B; b++) {
        /* the input holds unnormalized log-probabilities */
        double mx = -INFINITY, total = 0;
        for (int64_t k = 0; k < K; k++)
            mx = fmax(mx, sn_load_f64(x->dtype, x->data, (size_t)(b * K + k)));
        for (int64_t k = 0; k < K; k++)
            total += exp(sn_load_f64(x->dtype, x->data, (size_t)(b * K + k)) - mx);
        for (int64_t s = 0; s < S; s++) {
            double u = rng_uniform(r) * total, acc = 0;
            int64_t pick = K - 1;
            for (int64_t k = 0; k < K; k++) {
                acc += exp(sn_load_f64(x->dtype, x->data, (size_t)(b * K + k)) - mx);
                if (u < acc) {
                    pick = k;
                    break;
                }
            }
            sn_store_f64(y->dtype, y->data, (size_t)(b * S + s), (double)pick);
        }
    }
    return SNUG_OK;
}

const sn_op_def sn_ops_random[] = {
    {.domain = "", .name = "Bernoulli", .since_version = 15, .infer = sn_bernoulli_infer, .flags = SN_OP_NONDETERMINISTIC,
     .cpu = {.prepare = sn_random_prepare, .run = sn_bernoulli_run, .free_state = sn_random_free}},
    {.domain = "", .name = "RandomUniform", .since_version = 1, .required = SN_IN_NONE, .infer = sn_rand_uniform_infer,
     .flags = SN_OP_NONDETERMINISTIC,
     .cpu = {.prepare = sn_random_prepare, .run = sn_rand_uniform_run, .free_state = sn_random_free}},
    {.domain = "", .name = "RandomUniformLike", .since_version = 1, .infer = sn_rand_uniform_like_infer,
     .flags = SN_OP_NONDETERMINISTIC,
     .cpu = {.prepare = sn_random_prepare, .run = sn_rand_uniform_run, .free_state = sn_random_free}},
    {.domain = "", .name = "RandomNormal", .since_version = 1, .required = SN_IN_NONE, .infer = sn_rand_uniform_infer,
     .flags = SN_OP_NONDETERMINISTIC,
     .cpu = {.prepare = sn_random_prepare, .run = sn_rand_normal_run, .free_state = sn_random_free}},
    {.domain = "", .name = "RandomNormalLike", .since_version = 1, .infer = sn_rand_uniform_like_infer,
     .flags = SN_OP_NONDETERMINISTIC,
     .cpu = {.prepare = sn_random_prepare, .run = sn_rand_normal_run, .free_state = sn_random_free}},
    {.domain = "", .name = "Multinomial", .since_version = 7, .infer = sn_multinomial_infer,
     .flags = SN_OP_NONDETERMINISTIC,
     .cpu = {.prepare = sn_random_prepare, .run = sn_multinomial_run, .free_state = sn_random_free}},
    {0},
};
