/* Text ops: StringNormalizer (10) and TfIdfVectorizer (9); and the text
 * family's table (StringConcat, StringSplit, RegexFullMatch are in strings.c).
 *
 * Case mapping covers ASCII and the two-byte UTF-8 letters of Latin-1
 * Supplement and basic Cyrillic, whose upper and lower forms have the same
 * byte length; other bytes are left as they are. */
#include <string.h>

#include "ops/text/text.h"

/* ---- case mapping ---------------------------------------------------------------- */

/* Maps one character at s[0..len) (ASCII or a 2-byte UTF-8 letter) into
 * out; returns bytes consumed (= bytes written). */
static size_t case_map(const unsigned char *s, size_t len, bool upper, unsigned char *out) {
    unsigned char c = s[0];
    if (c < 0x80) {
        if (upper && c >= 'a' && c <= 'z')
            c = (unsigned char)(c - 32);
        else if (!upper && c >= 'A' && c <= 'Z')
            c = (unsigned char)(c + 32);
        out[0] = c;
        return 1;
    }
    if (len >= 2 && (c & 0xE0) == 0xC0 && (s[1] & 0xC0) == 0x80) {
        unsigned cp = ((unsigned)(c & 0x1F) << 6) | (s[1] & 0x3F);
        if (upper) {
            if (cp >= 0xE0 && cp <= 0xFE && cp != 0xF7)
                cp -= 0x20; /* Latin-1 */
            else if (cp >= 0x430 && cp <= 0x44F)
                cp -= 0x20; /* Cyrillic a..ya */
            else if (cp >= 0x450 && cp <= 0x45F)
                cp -= 0x50; /* Cyrillic ie-grave..dzhe */
        } else {
            if (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7)
                cp += 0x20;
            else if (cp >= 0x410 && cp <= 0x42F)
                cp += 0x20;
            else if (cp >= 0x400 && cp <= 0x40F)
                cp += 0x50;
        }
        out[0] = (unsigned char)(0xC0 | (cp >> 6));
        out[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    out[0] = c;
    return 1;
}

static void str_case(const char *src, size_t len, bool upper, char *dst) {
    size_t i = 0;
    while (i < len)
        i += case_map((const unsigned char *)src + i, len - i, upper, (unsigned char *)dst + i);
}

/* Case-insensitive equality (both folded to lower case). */
static bool str_eq_nocase(const char *a, size_t la, const char *b, size_t lb) {
    if (la != lb)
        return false;
    size_t i = 0;
    while (i < la) {
        unsigned char ca[2], cb[2];
        size_t na = case_map((const unsigned char *)a + i, la - i, false, ca);
        size_t nb = case_map((const unsigned char *)b + i, lb - i, false, cb);
        if (na != nb || memcmp(ca, cb, na))
            return false;
        i += na;
    }
    return true;
}

/* ---- StringNormalizer --------------------------------------------------------------- */

typedef struct strnorm_cfg {
    int action; /* 0 none, 1 lower, 2 upper */
    bool sensitive;
    int n_stop;
    const sn_string *stop;
} strnorm_cfg;

static int strnorm_cfg_read(const sn_node *n, strnorm_cfg *cfg, sn_err *err) {
    const char *a = sn_attr_str(n, "case_change_action", "NONE");
    if (!strcmp(a, "NONE"))
        cfg->action = 0;
    else if (!strcmp(a, "LOWER"))
        cfg->action = 1;
    else if (!strcmp(a, "UPPER"))
        cfg->action = 2;
    else
        return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "case_change_action '%s' is not LOWER, UPPER or NONE", a);
    cfg->sensitive = sn_attr_int(n, "is_case_sensitive", 0) != 0;
    cfg->n_stop = sn_attr_strings(n, "stopwords", &cfg->stop);
    if (cfg->n_stop < 0)
        cfg->n_stop = 0;
    return SNUG_OK;
}

static int sn_strnorm_infer(sn_infer_ctx *c) {
    strnorm_cfg cfg;
    SN_TRY(strnorm_cfg_read(c->node, &cfg, c->err));
    const sn_tensor *x = c->in[0];
    if (x->dtype != SN_STRING)
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "input must be a string tensor");
    if (x->rank >= 0 && x->rank != 1 && x->rank != 2)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "input must be [C] or [1, C]");
    if (x->rank == 2 && sn_dim_known(x->dims[0]) && x->dims[0] != 1)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "2-D input must be [1, C], got %lld rows",
                        (long long)x->dims[0]);
    sn_tensor *o = c->out[0];
    o->kind = SN_KIND_TENSOR;
    o->dtype = SN_STRING;
    int64_t d[2] = {1, SN_DIM_UNKNOWN};
    if (x->rank == 1)
        sn_tensor_set_shape(o, 1, d + 1);
    else if (x->rank == 2)
        sn_tensor_set_shape(o, 2, d);
    else
        o->rank = SN_RANK_UNKNOWN;
    return SNUG_OK;
}

static bool is_stopword(const strnorm_cfg *cfg, const sn_string *s) {
    for (int k = 0; k < cfg->n_stop; k++) {
        const sn_string *w = &cfg->stop[k];
        if (cfg->sensitive ? (w->len == s->len && !memcmp(w->ptr, s->ptr, s->len))
                           : str_eq_nocase(w->ptr, w->len, s->ptr, s->len))
            return true;
    }
    return false;
}

static int sn_strnorm_run(sn_kctx *c) {
    strnorm_cfg cfg;
    SN_TRY(strnorm_cfg_read(c->node, &cfg, c->err));
    const sn_tensor *x = c->in[0];
    const sn_string *in = x->data;
    const int64_t n = sn_tensor_numel(x);
    if (x->rank == 2 && x->dims[0] != 1)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "2-D input must be [1, C]");
    int64_t kept = 0;
    size_t bytes = 0;
    for (int64_t i = 0; i < n; i++)
        if (!is_stopword(&cfg, &in[i]))
            kept++, bytes += in[i].len;
    /* An empty result is one empty string, as in onnxruntime. */
    int64_t dims[2] = {1, kept ? kept : 1};
    const int rank = x->rank == 2 ? 2 : 1;
    sn_string *out = sn_kctx_alloc_output(c, 0, SN_STRING, rank, rank == 2 ? dims : dims + 1);
    if (!out)
        return c->err->code ? c->err->code : SNUG_ERR_OOM;
    char *buf = NULL;
    if (bytes) {
        buf = sn_kctx_alloc_extra(c, 0, bytes);
        if (!buf)
            return c->err->code ? c->err->code : SNUG_ERR_OOM;
    }
    if (!kept) {
        out[0] = (sn_string){"", 0};
        return SNUG_OK;
    }
    int64_t j = 0;
    for (int64_t i = 0; i < n; i++) {
        if (is_stopword(&cfg, &in[i]))
            continue;
        /* copied even without a case change: the input's bytes may be
         * freed before the output is */
        if (cfg.action)
            str_case(in[i].ptr, in[i].len, cfg.action == 2, buf);
        else if (in[i].len)
            memcpy(buf, in[i].ptr, in[i].len);
        if (in[i].len) {
            out[j++] = (sn_string){buf, in[i].len};
            buf += in[i].len;
        } else {
            out[j++] = (sn_string){"", 0};
        }
    }
    return SNUG_OK;
}

/* ---- TfIdfVectorizer ------------------------------------------------------------------ */

typedef struct tfidf_cfg {
    int mode;                 /* 1 TF, 2 IDF, 3 TFIDF */
    int64_t min_n, max_n, max_skip;
    int n_counts, n_idx, n_weights;
    const int64_t *counts;    /* pool start of each gram length */
    const int64_t *idx;       /* output column of each n-gram */
    const float *weights;
    bool strings;
    int64_t pool_len;
    const int64_t *pool_i;
    const sn_string *pool_s;
    int64_t out_size;
} tfidf_cfg;

static int tfidf_cfg_read(const sn_node *n, tfidf_cfg *cfg, sn_err *err) {
    memset(cfg, 0, sizeof *cfg);
    const char *m = sn_attr_str(n, "mode", "");
    if (!strcmp(m, "TF"))
        cfg->mode = 1;
    else if (!strcmp(m, "IDF"))
        cfg->mode = 2;
    else if (!strcmp(m, "TFIDF"))
        cfg->mode = 3;
    else
        return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "mode '%s' is not TF, IDF or TFIDF", m);
    cfg->min_n = sn_attr_int(n, "min_gram_length", 0);
    cfg->max_n = sn_attr_int(n, "max_gram_length", 0);
    cfg->max_skip = sn_attr_int(n, "max_skip_count", 0);
    if (cfg->min_n < 1 || cfg->max_n < cfg->min_n || cfg->max_skip < 0)
        return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "need 1 <= min_gram_length <= max_gram_length and max_skip_count >= 0");
    cfg->n_counts = sn_attr_ints(n, "ngram_counts", &cfg->counts);
    cfg->n_idx = sn_attr_ints(n, "ngram_indexes", &cfg->idx);
    cfg->n_weights = sn_attr_floats(n, "weights", &cfg->weights);
    if (cfg->n_counts < 1 || cfg->n_idx < 1)
        return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "ngram_counts and ngram_indexes are required");
    int np = sn_attr_ints(n, "pool_int64s", &cfg->pool_i);
    int ns = sn_attr_strings(n, "pool_strings", &cfg->pool_s);
    if ((np < 0) == (ns < 0))
        return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "exactly one of pool_int64s and pool_strings is required");
    cfg->strings = ns >= 0;
    cfg->pool_len = cfg->strings ? ns : np;
    for (int i = 0; i < cfg->n_counts; i++) {
        int64_t end = i + 1 < cfg->n_counts ? cfg->counts[i + 1] : cfg->pool_len;
        if (cfg->counts[i] < 0 || cfg->counts[i] > end || end > cfg->pool_len)
            return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "ngram_counts are not ascending offsets into the pool");
    }
    for (int i = 0; i < cfg->n_idx; i++) {
        if (cfg->idx[i] < 0)
            return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "ngram_indexes[%d] is negative", i);
        cfg->out_size = sn_imax(cfg->out_size, cfg->idx[i] + 1);
    }
    if (cfg->n_weights >= 0 && cfg->n_weights < cfg->out_size && cfg->mode != 1)
        return sn_kfail(err, n, SNUG_ERR_INVALID_ARG, "%d weights for %lld outputs", cfg->n_weights,
                        (long long)cfg->out_size);
    return SNUG_OK;
}

static int sn_tfidf_infer(sn_infer_ctx *c) {
    tfidf_cfg cfg;
    SN_TRY(tfidf_cfg_read(c->node, &cfg, c->err));
    const sn_tensor *x = c->in[0];
    if (cfg.strings ? x->dtype != SN_STRING : (x->dtype != SN_I32 && x->dtype != SN_I64))
        return sn_kfail(c->err, c->node, SNUG_ERR_TYPE, "input type %s does not match the %s pool",
                        sn_dtype_name(x->dtype), cfg.strings ? "string" : "int64");
    if (x->rank > 2)
        return sn_kfail(c->err, c->node, SNUG_ERR_SHAPE, "input must be [C] or [N, C]");
    sn_tensor *o = c->out[0];
    o->kind = SN_KIND_TENSOR;
    o->dtype = SN_F32;
    if (x->rank == 2) {
        int64_t d[2] = {x->dims[0], cfg.out_size};
        sn_tensor_set_shape(o, 2, d);
    } else if (x->rank >= 0) {
        sn_tensor_set_shape(o, 1, &cfg.out_size);
    } else {
        o->rank = SN_RANK_UNKNOWN;
    }
    return SNUG_OK;
}

/* Element equality between input item xi and pool item p. */
static inline bool tf_eq(const tfidf_cfg *cfg, const sn_tensor *x, int64_t xi, int64_t p) {
    if (cfg->strings) {
        const sn_string *a = &((const sn_string *)x->data)[xi], *b = &cfg->pool_s[p];
        return a->len == b->len && !memcmp(a->ptr, b->ptr, a->len);
    }
    return sn_load_i64(x->dtype, x->data, (size_t)xi) == cfg->pool_i[p];
}

/* Ordinal of the n-gram x[at], x[at+step], ... in the pool, or -1. The last
 * duplicate wins, as in the reference. */
static int64_t tf_find(const tfidf_cfg *cfg, const sn_tensor *x, int64_t at, int64_t step, int64_t n) {
    if (n > cfg->n_counts)
        return -1;
    int64_t ordinal = 0;
    for (int64_t m = 1; m < n; m++) {
        int64_t s = cfg->counts[m - 1], e = cfg->counts[m];
        ordinal += (e - s) / m;
    }
    const int64_t s = cfg->counts[n - 1], e = n < cfg->n_counts ? cfg->counts[n] : cfg->pool_len;
    int64_t found = -1;
    for (int64_t g = 0; s + (g + 1) * n <= e; g++) {
        int64_t k = 0;
        while (k < n && tf_eq(cfg, x, at + k * step, s + g * n + k))
            k++;
        if (k == n)
            found = ordinal + g;
    }
    return found;
}

static int sn_tfidf_run(sn_kctx *c) {
    tfidf_cfg cfg;
    SN_TRY(tfidf_cfg_read(c->node, &cfg, c->err));
    const sn_tensor *x = c->in[0];
    sn_tensor *y = c->out[0];
    float *out = y->data;
    const int64_t rows = x->rank == 2 ? x->dims[0] : 1;
    const int64_t C = x->rank == 2 ? x->dims[1] : x->rank == 1 ? x->dims[0] : 1;
    const int64_t O = cfg.out_size;
    memset(out, 0, (size_t)(rows * O) * sizeof(float));
    for (int64_t r = 0; r < rows; r++) {
        float *yr = out + r * O;
        const int64_t base = r * C;
        int64_t start_n = cfg.min_n;
        for (int64_t sd = 1; sd <= cfg.max_skip + 1; sd++) {
            for (int64_t i = 0; i < C; i++) {
                if (i + sd * (start_n - 1) >= C)
                    break;
                for (int64_t n = start_n; n <= cfg.max_n && i + sd * (n - 1) < C; n++) {
                    int64_t ord = tf_find(&cfg, x, base + i, sd, n);
                    if (ord >= 0 && ord < cfg.n_idx)
                        yr[cfg.idx[ord]] += 1.0f;
                }
            }
            /* unigrams do not depend on the skip distance: count them once */
            if (start_n == 1) {
                start_n = 2;
                if (start_n > cfg.max_n)
                    break;
            }
        }
        for (int64_t k = 0; k < O; k++) {
            const float w = cfg.n_weights > k ? cfg.weights[k] : 1.0f;
            if (cfg.mode == 2)
                yr[k] = yr[k] > 0 ? w : 0.0f;
            else if (cfg.mode == 3)
                yr[k] *= w;
        }
    }
    return SNUG_OK;
}

const sn_op_def sn_ops_text[] = {
    {.domain = "", .name = "StringNormalizer", .since_version = 10, .infer = sn_strnorm_infer, .flags = SN_OP_ALLOCS_OUTPUTS,
     .cpu = {.run = sn_strnorm_run}},
    {.domain = "", .name = "TfIdfVectorizer", .since_version = 9, .infer = sn_tfidf_infer,
     .cpu = {.run = sn_tfidf_run}},
    /* strings.c */
    {.domain = "", .name = "StringConcat", .since_version = 20, .required = 0x3, .infer = text_strconcat_infer,
     .cpu = {.run = text_strconcat_run}},
    {.domain = "", .name = "StringSplit", .since_version = 20, .infer = text_strsplit_infer,
     .cpu = {.run = text_strsplit_run}},
    {.domain = "", .name = "RegexFullMatch", .since_version = 20, .infer = text_regex_infer,
     .cpu = {.prepare = text_regex_prepare, .run = text_regex_run, .free_state = text_regex_free}},
    {0},
};
