/* Subgraphs that read values of enclosing graphs (issue #14 item 9), on
 * small models of the shapes exporters of speech models emit: If branches of
 * different ranks before a Conv, a branch never taken whose shapes do not fit,
 * If inside Loop and Scan bodies whose inputs declare no type, If in a Loop in
 * an If, values read only three levels down and produced after the If in file
 * order, Conv in a branch with the main graph's weights, sibling branches
 * reusing a name, conditional padding with Constant nodes, folded constants
 * read in branches, and an If's output read in a later If's nested branch.
 * Every branch combination is run and compared with ONNX Runtime's outputs
 * (the numbers below; test_subgraph_scope_oracle.py recomputes them from the
 * models this test writes with SNUG_SCOPE_DUMP=DIR). */
#include <math.h>
#include <stdarg.h>

#include "exec/exec.h"
#include "onnx_test_util.h"

/* ---- builders ------------------------------------------------------------ */

/* Splits a space-separated name list; "_" stands for an absent input. */
static int split(const char *s, char out[][32], int cap) {
    int n = 0;
    while (s && *s && n < cap) {
        while (*s == ' ')
            s++;
        if (!*s)
            break;
        int k = 0;
        while (*s && *s != ' ' && k < 31)
            out[n][k++] = *s++;
        out[n][k] = 0;
        if (!strcmp(out[n], "_"))
            out[n][0] = 0;
        n++;
    }
    return n;
}

/* A node with attributes at (AttributeProto messages as field 5, freed here). */
static void node(sn_pbw *g, const char *op, const char *ins, const char *outs, sn_pbw *at) {
    char in[8][32], out[8][32];
    int ni = split(ins, in, 8), no = split(outs, out, 8);
    sn_pbw nd = {0};
    for (int i = 0; i < ni; i++)
        sn_pbw_str(&nd, 1, in[i]);
    for (int i = 0; i < no; i++)
        sn_pbw_str(&nd, 2, out[i]);
    sn_pbw_str(&nd, 4, op);
    if (at) {
        sn_pbw_raw(&nd, at->buf, at->len);
        sn_pbw_free(at);
    }
    sn_pbw_msg(g, 1, &nd);
    sn_pbw_free(&nd);
}

static void a_ints(sn_pbw *at, const char *name, int n, const int64_t *v) {
    sn_pbw a = {0};
    sn_pbw_str(&a, 1, name);
    sn_pbw_int(&a, 20, SN_ATTR_INTS);
    for (int i = 0; i < n; i++)
        sn_pbw_int(&a, 8, v[i]);
    sn_pbw_msg(at, 5, &a);
    sn_pbw_free(&a);
}

/* A graph attribute; the subgraph's buffer is freed. */
static void a_graph(sn_pbw *at, const char *name, sn_pbw *sub) {
    sn_pbw a = {0};
    sn_pbw_str(&a, 1, name);
    sn_pbw_int(&a, 20, SN_ATTR_GRAPH);
    sn_pbw_msg(&a, 6, sub);
    sn_pbw_msg(at, 5, &a);
    sn_pbw_free(&a);
    sn_pbw_free(sub);
}

/* dims "1,2,T": numbers, or names for symbolic dims; "" a scalar. */
static int parse_dims(const char *s, int64_t *dims, const char **params, char names[][16]) {
    int r = 0;
    while (*s && r < SN_MAX_RANK) {
        int k = 0;
        char tok[16];
        while (*s && *s != ',' && k < 15)
            tok[k++] = *s++;
        tok[k] = 0;
        if (*s == ',')
            s++;
        if (tok[0] >= '0' && tok[0] <= '9') {
            dims[r] = atoll(tok);
            params[r] = NULL;
        } else {
            dims[r] = -1;
            strcpy(names[r], tok);
            params[r] = names[r];
        }
        r++;
    }
    return r;
}

/* ValueInfoProto in field num of g: elem 0 writes the name only (no type),
 * dims NULL a type without shape. */
static void vinfo(sn_pbw *g, int num, const char *name, int elem, const char *dims) {
    sn_pbw v = {0}, tp = {0}, tt = {0}, sh = {0};
    sn_pbw_str(&v, 1, name);
    if (elem) {
        sn_pbw_int(&tt, 1, elem);
        if (dims) {
            int64_t d[SN_MAX_RANK];
            const char *pn[SN_MAX_RANK];
            char names[SN_MAX_RANK][16];
            int r = parse_dims(dims, d, pn, names);
            for (int i = 0; i < r; i++) {
                sn_pbw dd = {0};
                if (pn[i])
                    sn_pbw_str(&dd, 2, pn[i]);
                else
                    sn_pbw_int(&dd, 1, d[i]);
                sn_pbw_msg(&sh, 1, &dd);
                sn_pbw_free(&dd);
            }
            sn_pbw_msg(&tt, 2, &sh);
        }
        sn_pbw_msg(&tp, 1, &tt);
        sn_pbw_msg(&v, 2, &tp);
    }
    sn_pbw_msg(g, num, &v);
    sn_pbw_free(&v);
    sn_pbw_free(&tp);
    sn_pbw_free(&tt);
    sn_pbw_free(&sh);
}
#define IN(g, n, e, d) vinfo(g, 11, n, e, d)
#define OUT(g, n, e, d) vinfo(g, 12, n, e, d)

static void tensor_msg(sn_pbw *t, const char *name, int dtype, const char *dims, const void *raw, size_t es) {
    int64_t d[SN_MAX_RANK];
    const char *pn[SN_MAX_RANK];
    char names[SN_MAX_RANK][16];
    int r = parse_dims(dims, d, pn, names);
    int64_t n = 1;
    for (int i = 0; i < r; i++)
        n *= d[i];
    tb_tensor_raw(t, name, dtype, r, d, raw, (size_t)n * es);
}

static void init_f32(sn_pbw *g, const char *name, const char *dims, const float *v) {
    sn_pbw t = {0};
    tensor_msg(&t, name, SN_F32, dims, v, 4);
    sn_pbw_msg(g, 5, &t);
    sn_pbw_free(&t);
}

static void init_i64(sn_pbw *g, const char *name, const char *dims, const int64_t *v) {
    sn_pbw t = {0};
    tensor_msg(&t, name, SN_I64, dims, v, 8);
    sn_pbw_msg(g, 5, &t);
    sn_pbw_free(&t);
}

/* A Constant node's value attribute (int64). */
static void a_value_i64(sn_pbw *at, const char *dims, const int64_t *v) {
    sn_pbw a = {0}, t = {0};
    sn_pbw_str(&a, 1, "value");
    sn_pbw_int(&a, 20, SN_ATTR_TENSOR);
    tensor_msg(&t, "v", SN_I64, dims, v, 8);
    sn_pbw_msg(&a, 5, &t);
    sn_pbw_msg(at, 5, &a);
    sn_pbw_free(&a);
    sn_pbw_free(&t);
}

static void gname(sn_pbw *g, const char *name) { sn_pbw_str(g, 2, name); }

/* If(cond) -> outs with two branches (their buffers are freed). */
static void if_node(sn_pbw *g, const char *cond, const char *outs, sn_pbw *then_g, sn_pbw *else_g) {
    sn_pbw at = {0};
    a_graph(&at, "then_branch", then_g);
    a_graph(&at, "else_branch", else_g);
    node(g, "If", cond, outs, &at);
}

/* A branch of one node reading ins, with output out (declared elem, no shape;
 * elem 0: no type). */
static void branch1(sn_pbw *b, const char *name, const char *op, const char *ins, const char *out, int elem,
                    sn_pbw *at) {
    gname(b, name);
    node(b, op, ins, out, at);
    OUT(b, out, elem, NULL);
}

/* ---- running ------------------------------------------------------------- */

typedef struct feed {
    const char *name;
    sn_dtype dtype;
    const char *dims;
    const void *data;
} feed;

typedef struct want {
    int out;          /* graph output index */
    sn_dtype dtype;
    const char *dims; /* "" for a scalar */
    const double *v;
} want;

static const char *g_dump; /* SNUG_SCOPE_DUMP: folder for the models and feeds (the oracle's input) */
static int g_cases;

static void dump_feeds(const char *cname, int k, const feed *f, int nf) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s_%d.txt", g_dump, cname, k);
    FILE *fp = fopen(path, "w");
    if (!fp)
        return;
    for (int i = 0; i < nf; i++) {
        int64_t d[SN_MAX_RANK];
        const char *pn[SN_MAX_RANK];
        char names[SN_MAX_RANK][16];
        int r = parse_dims(f[i].dims, d, pn, names);
        int64_t n = 1;
        fprintf(fp, "%s %s %d", f[i].name, sn_dtype_name(f[i].dtype), r);
        for (int j = 0; j < r; j++) {
            fprintf(fp, " %lld", (long long)d[j]);
            n *= d[j];
        }
        for (int64_t j = 0; j < n; j++)
            fprintf(fp, " %.9g", sn_load_f64(f[i].dtype, f[i].data, (size_t)j));
        fprintf(fp, "\n");
    }
    fclose(fp);
}

/* Builds the model around graph g (opset), then runs each variant k (feeds
 * fk[k] of nf[k], expected wk[k]) on one executor, in order. */
static void run_case(const char *cname, sn_pbw *graph, int opset, int nv, const feed *const *fk, const int *nf,
                     const want *wk) {
    g_cases++;
    sn_pbw w = {0}, op = {0};
    sn_pbw_int(&w, 1, opset < 9 ? 3 : 8);
    sn_pbw_str(&op, 1, "");
    sn_pbw_int(&op, 2, opset);
    sn_pbw_msg(&w, 8, &op);
    sn_pbw_free(&op);
    sn_pbw_msg(&w, 7, graph);
    sn_pbw_free(graph);
    if (g_dump) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s.onnx", g_dump, cname);
        tb_write_file(path, w.buf, w.len);
        for (int k = 0; k < nv; k++)
            dump_feeds(cname, k, fk[k], nf[k]);
    }
    sn_err err = {0};
    sn_model *m = NULL;
    sn_graph *g = NULL;
    sn_exec *ex = NULL;
    int rc = sn_model_load_buffer(w.buf, w.len, NULL, &m, &err);
    if (rc == SNUG_OK)
        rc = sn_graph_build(m, &g, &err);
    if (rc == SNUG_OK)
        rc = sn_exec_new(g, NULL, NULL, &ex, &err);
    if (rc != SNUG_OK) {
        fprintf(stderr, "%s: %s\n", cname, err.msg);
        g_fails++;
    }
    for (int k = 0; k < nv && rc == SNUG_OK; k++) {
        sn_tensor in[8], out[8];
        memset(in, 0, sizeof in);
        CHECK(g->n_inputs <= 8 && g->n_outputs <= 8);
        for (int i = 0; i < g->n_inputs && i < 8; i++) {
            const feed *f = NULL;
            for (int j = 0; j < nf[k]; j++)
                if (!strcmp(fk[k][j].name, g->values[g->inputs[i]].name))
                    f = &fk[k][j];
            CHECK(f != NULL);
            if (!f)
                continue;
            const char *pn[SN_MAX_RANK];
            char names[SN_MAX_RANK][16];
            in[i].dtype = f->dtype;
            in[i].rank = parse_dims(f->dims, in[i].dims, pn, names);
            in[i].data = (void *)f->data;
        }
        int r = sn_exec_replan_for(ex, in, SN_REPLAN_AUTO, &err);
        if (r == SNUG_OK)
            r = sn_exec_run(ex, in, out, &err);
        if (r != SNUG_OK) {
            fprintf(stderr, "%s variant %d: %s\n", cname, k, err.msg);
            g_fails++;
            continue;
        }
        const want *wt = &wk[k];
        const sn_tensor *o = &out[wt->out];
        int64_t d[SN_MAX_RANK];
        const char *pn[SN_MAX_RANK];
        char names[SN_MAX_RANK][16];
        int rank = parse_dims(wt->dims, d, pn, names);
        char b[128];
        bool shape_ok = o->kind == SN_KIND_TENSOR && o->dtype == wt->dtype && o->rank == rank;
        for (int i = 0; shape_ok && i < rank; i++)
            shape_ok = o->dims[i] == d[i];
        if (!shape_ok) {
            fprintf(stderr, "%s variant %d: output %d is %s %s, want %s [%s]\n", cname, k, wt->out,
                    sn_dtype_name(o->dtype), sn_shape_str(o, b, sizeof b), sn_dtype_name(wt->dtype), wt->dims);
            g_fails++;
            continue;
        }
        int64_t n = sn_tensor_numel(o);
        for (int64_t i = 0; i < n; i++) {
            double got = sn_load_f64(o->dtype, o->data, (size_t)i), exp = wt->v[i];
            if (!(fabs(got - exp) <= 1e-5 + 1e-3 * fabs(exp))) {
                fprintf(stderr, "%s variant %d: output %d [%lld] is %.9g, want %.9g\n", cname, k, wt->out,
                        (long long)i, got, exp);
                g_fails++;
                break;
            }
        }
    }
    sn_exec_free(ex);
    sn_graph_free(g);
    sn_model_free(m);
    sn_pbw_free(&w);
}

static const uint8_t k_false = 0, k_true = 1;
#define BOOLP(x) ((x) ? &k_true : &k_false)

/* ---- the cases ----------------------------------------------------------- */

/* If whose then_branch adds an axis (rank 4) while the else_branch passes
 * the rank-3 input on, then a Conv1d: the If's output rank is unknown until
 * it runs (was: "W has rank 3, X has rank 4" at plan time). */
static void case_rank_mismatch(void) {
    static const float W[6] = {1, 0, -1, 0.5f, 0.5f, 0.5f}, B[2] = {0.1f, -0.2f};
    static const int64_t two = 2, one = 1;
    sn_pbw g = {0}, t = {0}, e = {0}, at = {0};
    gname(&g, "rank_mismatch");
    gname(&t, "then");
    init_i64(&t, "one", "1", &one);
    node(&t, "Unsqueeze", "x one", "t_out", NULL);
    OUT(&t, "t_out", 0, NULL);
    branch1(&e, "else", "Identity", "x", "e_out", 0, NULL);
    node(&g, "Shape", "x", "sh", NULL);
    node(&g, "Size", "sh", "rk", NULL);
    node(&g, "Equal", "rk two", "cond", NULL);
    if_node(&g, "cond", "y", &t, &e);
    a_ints(&at, "pads", 2, (const int64_t[]){1, 1});
    node(&g, "Conv", "y W B", "z", &at);
    init_f32(&g, "W", "2,1,3", W);
    init_f32(&g, "B", "2", B);
    init_i64(&g, "two", "", &two);
    IN(&g, "x", SN_F32, "1,1,T");
    OUT(&g, "z", SN_F32, NULL);
    static const float x[5] = {1, 2, 3, 4, 5};
    static const feed f0[] = {{"x", SN_F32, "1,1,5", x}};
    static const double z[] = {-1.89999998, -1.89999998, -1.89999998, -1.89999998, 4.0999999,
                               1.29999995,  2.79999995,  4.30000019,  5.80000019,  4.30000019};
    const feed *fk[] = {f0};
    const int nf[] = {1};
    const want wk[] = {{0, SN_F32, "1,2,5", z}};
    run_case("rank_mismatch", &g, 17, 1, fk, nf, wk);
}

/* A then_branch never taken whose Reshape cannot fit the input: its output
 * type is still float (declared, and what the other branch gives), so the
 * Cast after the If plans (was: "cast of 'y' from undefined"). */
static void case_dead_branch(void) {
    static const int64_t sh[2] = {3, 3};
    sn_pbw g = {0}, t = {0}, e = {0};
    gname(&g, "dead_branch");
    gname(&t, "then");
    init_i64(&t, "sh", "2", sh);
    node(&t, "Reshape", "x sh", "s", NULL);
    node(&t, "Relu", "s", "t_out", NULL);
    OUT(&t, "t_out", SN_F32, NULL);
    branch1(&e, "else", "Neg", "x", "e_out", SN_F32, NULL);
    if_node(&g, "c", "y", &t, &e);
    sn_pbw at = {0};
    tb_attr_int(&at, "to", SN_I32);
    node(&g, "Cast", "y", "z", &at);
    IN(&g, "x", SN_F32, "1,1,8");
    IN(&g, "c", SN_BOOL, "");
    OUT(&g, "z", SN_I32, NULL);
    static const float x[8] = {0.5f, 1.5f, -2.5f, 3, 4.25f, -5, 6.75f, -7.5f};
    static const feed f0[] = {{"x", SN_F32, "1,1,8", x}, {"c", SN_BOOL, "", &k_false}};
    static const double z[] = {0, -1, 2, -3, -4, 5, -6, 7};
    const feed *fk[] = {f0};
    const int nf[] = {2};
    const want wk[] = {{0, SN_I32, "1,1,8", z}};
    run_case("dead_branch", &g, 17, 1, fk, nf, wk);
}

/* A Loop whose body declares no input or output types; an If in the body
 * reads the loop-carried value and the main graph's x; Casts after it in
 * the body and after the Loop (was: "cast of 'acc' from undefined"). */
static void case_loop_if(void) {
    static const int64_t lim = 1;
    sn_pbw g = {0}, body = {0}, t = {0}, e = {0}, at = {0};
    gname(&g, "loop_if");
    gname(&body, "body");
    branch1(&t, "it", "Add", "acc_in x", "it_o", 0, NULL);
    branch1(&e, "ie", "Sub", "acc_in x", "ie_o", 0, NULL);
    node(&body, "Greater", "i lim", "c", NULL);
    if_node(&body, "c", "v", &t, &e);
    tb_attr_int(&at, "to", SN_I64);
    node(&body, "Cast", "v", "vi64", &at);
    tb_attr_int(&at, "to", SN_F32);
    node(&body, "Cast", "vi64", "acc_out", &at);
    node(&body, "Identity", "cond_in", "cond_out", NULL);
    tb_attr_int(&at, "to", SN_F32);
    node(&body, "Cast", "i", "scan_o", &at);
    IN(&body, "i", SN_I64, "");
    IN(&body, "cond_in", SN_BOOL, "");
    IN(&body, "acc_in", 0, NULL);
    OUT(&body, "cond_out", 0, NULL);
    OUT(&body, "acc_out", 0, NULL);
    OUT(&body, "scan_o", 0, NULL);
    a_graph(&at, "body", &body);
    node(&g, "Loop", "M _ a0", "acc scans", &at);
    tb_attr_int(&at, "to", SN_F64);
    node(&g, "Cast", "acc", "z", &at);
    init_i64(&g, "lim", "", &lim);
    IN(&g, "M", SN_I64, "");
    IN(&g, "a0", SN_F32, "N");
    IN(&g, "x", SN_F32, "N");
    OUT(&g, "z", SN_F64, NULL);
    OUT(&g, "scans", SN_F32, NULL);
    static const int64_t M = 4;
    static const float a0[2] = {0.5f, 1.5f}, x[2] = {1, -2};
    static const feed f0[] = {{"M", SN_I64, "", &M}, {"a0", SN_F32, "2", a0}, {"x", SN_F32, "2", x}};
    static const double z[] = {1, 1}, sc[] = {0, 1, 2, 3};
    const feed *fk[] = {f0, f0};
    const int nf[] = {3, 3};
    const want wk[] = {{0, SN_F64, "2", z}, {1, SN_F32, "4", sc}};
    run_case("loop_if", &g, 17, 2, fk, nf, wk);
}

/* A Scan whose body declares no types; an If in the body reads the scan
 * slice and the main graph's w (was: "input types differ: float32 vs
 * undefined" in the body). */
static void case_scan_if(void) {
    static const float zero = 0;
    sn_pbw g = {0}, body = {0}, t = {0}, e = {0}, at = {0};
    gname(&g, "scan_if");
    gname(&body, "body");
    branch1(&t, "it", "Mul", "xs w", "it_o", 0, NULL);
    branch1(&e, "ie", "Add", "xs w", "ie_o", 0, NULL);
    tb_attr_int(&at, "keepdims", 0);
    node(&body, "ReduceSum", "xs", "sm", &at);
    node(&body, "Greater", "sm zero", "c", NULL);
    if_node(&body, "c", "v", &t, &e);
    node(&body, "Add", "st_in v", "st_out", NULL);
    tb_attr_int(&at, "to", SN_I32);
    node(&body, "Cast", "v", "so", &at);
    IN(&body, "st_in", 0, NULL);
    IN(&body, "xs", 0, NULL);
    OUT(&body, "st_out", 0, NULL);
    OUT(&body, "so", 0, NULL);
    a_graph(&at, "body", &body);
    tb_attr_int(&at, "num_scan_inputs", 1);
    node(&g, "Scan", "s0 X", "st ys", &at);
    init_f32(&g, "zero", "", &zero);
    IN(&g, "s0", SN_F32, "3");
    IN(&g, "X", SN_F32, "T,3");
    IN(&g, "w", SN_F32, "3");
    OUT(&g, "st", SN_F32, NULL);
    OUT(&g, "ys", SN_I32, NULL);
    static const float s0[3] = {0, 0, 0}, w[3] = {2, 3, 4};
    static const float X[12] = {1, 2, -1, -3, 0.5f, 1, 2.5f, -4, 0.25f, -1, -1, -1};
    static const feed f0[] = {{"s0", SN_F32, "3", s0}, {"X", SN_F32, "4,3", X}, {"w", SN_F32, "3", w}};
    static const double st[] = {6.5, 10.5, 8.25}, ys[] = {2, 6, -4, -1, 3, 5, 4, -1, 4, 1, 2, 3};
    const feed *fk[] = {f0, f0};
    const int nf[] = {3, 3};
    const want wk[] = {{0, SN_F32, "3", st}, {1, SN_I32, "4,3", ys}};
    run_case("scan_if", &g, 17, 2, fk, nf, wk);
}

/* Scan of opset 8 (a batch axis) with an untyped body holding an If that
 * reads the main graph's c; a Cast after the Scan. */
static void case_scan8(void) {
    sn_pbw g = {0}, body = {0}, t = {0}, e = {0}, at = {0};
    gname(&g, "scan8");
    gname(&body, "body");
    branch1(&t, "it", "Add", "st xs", "it_o", 0, NULL);
    branch1(&e, "ie", "Sub", "st xs", "ie_o", 0, NULL);
    if_node(&body, "c", "st_n", &t, &e);
    tb_attr_int(&at, "to", SN_I32);
    node(&body, "Cast", "st_n", "so", &at);
    IN(&body, "st", 0, NULL);
    IN(&body, "xs", 0, NULL);
    OUT(&body, "st_n", 0, NULL);
    OUT(&body, "so", 0, NULL);
    a_graph(&at, "body", &body);
    tb_attr_int(&at, "num_scan_inputs", 1);
    node(&g, "Scan", "_ s0 X", "st_f ys", &at);
    tb_attr_int(&at, "to", SN_F64);
    node(&g, "Cast", "st_f", "z", &at);
    IN(&g, "s0", SN_F32, "1,2");
    IN(&g, "X", SN_F32, "1,T,2");
    IN(&g, "c", SN_BOOL, "");
    OUT(&g, "z", SN_F64, NULL);
    OUT(&g, "ys", SN_I32, NULL);
    static const float s0[2] = {0, 0}, X[6] = {1.5f, -2, 3.25f, 4, -0.5f, 1};
    static const feed f0[] = {{"s0", SN_F32, "1,2", s0}, {"X", SN_F32, "1,3,2", X}, {"c", SN_BOOL, "", &k_false}};
    static const feed f1[] = {{"s0", SN_F32, "1,2", s0}, {"X", SN_F32, "1,3,2", X}, {"c", SN_BOOL, "", &k_true}};
    static const double z0[] = {-4.25, -3}, z1[] = {4.25, 3}, y1[] = {1, -2, 4, 2, 4, 3};
    const feed *fk[] = {f0, f1, f1};
    const int nf[] = {3, 3, 3};
    const want wk[] = {{0, SN_F64, "1,2", z0}, {0, SN_F64, "1,2", z1}, {1, SN_I32, "1,3,2", y1}};
    run_case("scan8", &g, 8, 3, fk, nf, wk);
}

/* If > Loop > If: the innermost branches read the loop-carried acc (which
 * grows every iteration: the body re-plans), the main graph's x and the main
 * initializer w; the body declares no type for acc. */
static void case_if_loop_if(void) {
    static const int64_t two = 2, zero = 0;
    static const float wv = 3;
    sn_pbw g = {0}, body = {0}, t = {0}, e = {0}, lt = {0}, le = {0}, at = {0};
    gname(&g, "if_loop_if");
    branch1(&t, "it", "Concat", "acc x", "it_o", SN_F32, (tb_attr_int(&at, "axis", 0), &at));
    gname(&e, "ie");
    node(&e, "Mul", "x w", "xw", NULL);
    tb_attr_int(&at, "axis", 0);
    node(&e, "Concat", "xw acc", "ie_o", &at);
    OUT(&e, "ie_o", SN_F32, NULL);
    gname(&body, "body");
    node(&body, "Mod", "i two", "r", NULL);
    node(&body, "Equal", "r zero", "even", NULL);
    if_node(&body, "even", "acc_n", &t, &e);
    node(&body, "Identity", "cin", "cout", NULL);
    tb_attr_int(&at, "keepdims", 1);
    node(&body, "ReduceSum", "acc_n", "sc", &at);
    IN(&body, "i", SN_I64, "");
    IN(&body, "cin", SN_BOOL, "");
    IN(&body, "acc", 0, NULL);
    OUT(&body, "cout", SN_BOOL, "");
    OUT(&body, "acc_n", 0, NULL);
    OUT(&body, "sc", 0, NULL);
    gname(&lt, "then");
    a_graph(&at, "body", &body);
    node(&lt, "Loop", "M _ x", "t_acc t_sc", &at);
    tb_attr_int(&at, "keepdims", 0);
    node(&lt, "ReduceSum", "t_sc", "t_o", &at);
    OUT(&lt, "t_o", SN_F32, NULL);
    tb_attr_int(&at, "keepdims", 0);
    branch1(&le, "else", "ReduceSum", "x", "e_o", SN_F32, &at);
    if_node(&g, "c", "y", &lt, &le);
    tb_attr_int(&at, "to", SN_F64);
    node(&g, "Cast", "y", "z", &at);
    init_i64(&g, "two", "", &two);
    init_i64(&g, "zero", "", &zero);
    init_f32(&g, "w", "", &wv);
    IN(&g, "x", SN_F32, "N");
    IN(&g, "M", SN_I64, "");
    IN(&g, "c", SN_BOOL, "");
    OUT(&g, "z", SN_F64, NULL);
    static const float x[2] = {1, 2};
    static const int64_t M = 5;
    static const feed f0[] = {{"x", SN_F32, "2", x}, {"M", SN_I64, "", &M}, {"c", SN_BOOL, "", &k_false}};
    static const feed f1[] = {{"x", SN_F32, "2", x}, {"M", SN_I64, "", &M}, {"c", SN_BOOL, "", &k_true}};
    static const double z0[] = {3}, z1[] = {96};
    const feed *fk[] = {f0, f1, f0};
    const int nf[] = {3, 3, 3};
    const want wk[] = {{0, SN_F64, "", z0}, {0, SN_F64, "", z1}, {0, SN_F64, "", z0}};
    run_case("if_loop_if", &g, 17, 3, fk, nf, wk);
}

/* If nested two deep with untyped branch outputs; the inner branches Cast
 * main-graph values made by nodes listed after the If. */
static void case_nested_cast(void) {
    sn_pbw g = {0}, it = {0}, ie = {0}, mt = {0}, me = {0}, at = {0};
    gname(&g, "nested_cast");
    tb_attr_int(&at, "to", SN_F32);
    branch1(&it, "it", "Cast", "xi", "it_out", 0, &at);
    tb_attr_int(&at, "to", SN_F32);
    branch1(&ie, "ie", "Cast", "xs", "ie_out", 0, &at);
    gname(&mt, "mt");
    if_node(&mt, "c2", "m1", &it, &ie);
    node(&mt, "Add", "m1 x", "mt_out", NULL);
    OUT(&mt, "mt_out", 0, NULL);
    branch1(&me, "me", "Identity", "x", "me_out", 0, NULL);
    if_node(&g, "c1", "y", &mt, &me);
    tb_attr_int(&at, "to", SN_F64);
    node(&g, "Cast", "y", "z", &at);
    tb_attr_int(&at, "to", SN_I64);
    node(&g, "Cast", "x", "xi", &at);
    node(&g, "Mul", "xi xi", "xs", NULL);
    IN(&g, "x", SN_F32, "N");
    IN(&g, "c1", SN_BOOL, "");
    IN(&g, "c2", SN_BOOL, "");
    OUT(&g, "z", SN_F64, NULL);
    static const float x[3] = {1.5f, -2, 3};
    feed f[4][3];
    const feed *fk[4];
    int nf[4];
    for (int k = 0; k < 4; k++) {
        f[k][0] = (feed){"x", SN_F32, "3", x};
        f[k][1] = (feed){"c1", SN_BOOL, "", BOOLP(k >> 1)};
        f[k][2] = (feed){"c2", SN_BOOL, "", BOOLP(k & 1)};
        fk[k] = f[k];
        nf[k] = 3;
    }
    static const double z00[] = {1.5, -2, 3}, z10[] = {2.5, 2, 12}, z11[] = {2.5, -4, 6};
    const want wk[] = {{0, SN_F64, "3", z00}, {0, SN_F64, "3", z00}, {0, SN_F64, "3", z10}, {0, SN_F64, "3", z11}};
    run_case("nested_cast", &g, 17, 4, fk, nf, wk);
}

/* Values read only three levels down (newshape, cnt: no level between
 * reads them), made after the If in file order by a Shape, Gather,
 * Unsqueeze, Concat chain and a Size; every combination of the 3 conditions. */
static void case_deep_only(void) {
    static const int64_t i0 = 0, ax0 = 0, one = 1;
    sn_pbw g = {0}, l3t = {0}, l3e = {0}, l2t = {0}, l2e = {0}, l1t = {0}, l1e = {0}, at = {0};
    gname(&g, "deep_only");
    branch1(&l3t, "l3t", "Reshape", "x newshape", "l3t_o", SN_F32, NULL);
    gname(&l3e, "l3e");
    tb_attr_int(&at, "to", SN_F32);
    node(&l3e, "Cast", "cnt", "l3e_c", &at);
    node(&l3e, "Expand", "l3e_c newshape", "l3e_o", NULL);
    OUT(&l3e, "l3e_o", SN_F32, NULL);
    gname(&l2t, "l2t");
    if_node(&l2t, "c3", "l2t_o", &l3t, &l3e);
    OUT(&l2t, "l2t_o", SN_F32, NULL);
    branch1(&l2e, "l2e", "Unsqueeze", "x ax0", "l2e_o", SN_F32, NULL);
    gname(&l1t, "l1t");
    if_node(&l1t, "c2", "l1t_o", &l2t, &l2e);
    OUT(&l1t, "l1t_o", SN_F32, NULL);
    branch1(&l1e, "l1e", "Unsqueeze", "x ax0", "l1e_o", SN_F32, NULL);
    if_node(&g, "c1", "y", &l1t, &l1e);
    node(&g, "Shape", "x", "shx", NULL);
    tb_attr_int(&at, "axis", 0);
    node(&g, "Gather", "shx i0", "n0", &at);
    node(&g, "Unsqueeze", "n0 ax0", "n0u", NULL);
    tb_attr_int(&at, "axis", 0);
    node(&g, "Concat", "one n0u", "newshape", &at);
    node(&g, "Size", "x", "cnt", NULL);
    node(&g, "Relu", "y", "z", NULL);
    init_i64(&g, "i0", "", &i0);
    init_i64(&g, "ax0", "1", &ax0);
    init_i64(&g, "one", "1", &one);
    IN(&g, "x", SN_F32, "N");
    IN(&g, "c1", SN_BOOL, "");
    IN(&g, "c2", SN_BOOL, "");
    IN(&g, "c3", SN_BOOL, "");
    OUT(&g, "z", SN_F32, NULL);
    static const float x[4] = {1, -2, 3, 0.5f};
    static const double zx[] = {1, 0, 3, 0.5}, zc[] = {4, 4, 4, 4};
    feed f[8][4];
    const feed *fk[8];
    int nf[8];
    want wk[8];
    for (int k = 0; k < 8; k++) {
        int c1 = k >> 2 & 1, c2 = k >> 1 & 1, c3 = k & 1;
        f[k][0] = (feed){"x", SN_F32, "4", x};
        f[k][1] = (feed){"c1", SN_BOOL, "", BOOLP(c1)};
        f[k][2] = (feed){"c2", SN_BOOL, "", BOOLP(c2)};
        f[k][3] = (feed){"c3", SN_BOOL, "", BOOLP(c3)};
        fk[k] = f[k];
        nf[k] = 4;
        wk[k] = (want){0, SN_F32, "1,4", c1 && c2 && !c3 ? zc : zx};
    }
    run_case("deep_only", &g, 17, 8, fk, nf, wk);
}

/* Conv in both branches of an If with W and B initializers of the main
 * graph; the then_branch makes its own X from feat, the else_branch reads
 * the main graph's X. */
static void case_conv_in_if(void) {
    static const float W[6] = {0.5f, -1, 0.25f, 1, 2, -0.5f}, B[2] = {0.5f, -1};
    static const int64_t ax1 = 1;
    static const float half = 0.5f;
    sn_pbw g = {0}, t = {0}, e = {0}, at = {0};
    gname(&g, "conv_in_if");
    gname(&t, "then");
    node(&t, "Unsqueeze", "feat ax1", "Xb", NULL);
    a_ints(&at, "pads", 2, (const int64_t[]){1, 1});
    node(&t, "Conv", "Xb W B", "t_o", &at);
    OUT(&t, "t_o", SN_F32, NULL);
    a_ints(&at, "pads", 2, (const int64_t[]){1, 1});
    branch1(&e, "else", "Conv", "X W B", "e_o", SN_F32, &at);
    node(&g, "Unsqueeze", "feat ax1", "X0", NULL);
    node(&g, "Mul", "X0 half", "X", NULL);
    if_node(&g, "c", "y", &t, &e);
    init_f32(&g, "W", "2,1,3", W);
    init_f32(&g, "B", "2", B);
    init_i64(&g, "ax1", "1", &ax1);
    init_f32(&g, "half", "", &half);
    IN(&g, "feat", SN_F32, "1,T");
    IN(&g, "c", SN_BOOL, "");
    OUT(&g, "y", SN_F32, NULL);
    static const float feat[4] = {1, -2, 3, 4};
    static const feed f0[] = {{"feat", SN_F32, "1,4", feat}, {"c", SN_BOOL, "", &k_false}};
    static const feed f1[] = {{"feat", SN_F32, "1,4", feat}, {"c", SN_BOOL, "", &k_true}};
    static const double y0[] = {-0.25, 2.125, -1, -0.75, 0.5, -3.25, 0, 4.5},
                        y1[] = {-1, 3.75, -2.5, -2, 2, -5.5, 1, 10};
    const feed *fk[] = {f0, f1, f0};
    const int nf[] = {2, 2, 2};
    const want wk[] = {{0, SN_F32, "1,2,4", y0}, {0, SN_F32, "1,2,4", y1}, {0, SN_F32, "1,2,4", y0}};
    run_case("conv_in_if", &g, 17, 3, fk, nf, wk);
}

/* Both branches of the middle If define 't' (siblings may reuse a name, of
 * different shapes); the inner If in the then_branch reads its own 't'. */
static void case_sibling_names(void) {
    static const float k2 = 2;
    static const int64_t ax = 0;
    sn_pbw g = {0}, it = {0}, ie = {0}, mt = {0}, me = {0}, at = {0};
    gname(&g, "sibling_names");
    gname(&it, "it");
    init_f32(&it, "k2", "", &k2);
    node(&it, "Mul", "t k2", "it_o", NULL);
    OUT(&it, "it_o", SN_F32, NULL);
    tb_attr_int(&at, "keepdims", 1);
    branch1(&ie, "ie", "ReduceSum", "t", "ie_o", SN_F32, &at);
    gname(&mt, "mt");
    tb_attr_int(&at, "axis", 0);
    node(&mt, "Concat", "x x", "t", &at);
    if_node(&mt, "c2", "mt_o", &it, &ie);
    OUT(&mt, "mt_o", SN_F32, NULL);
    gname(&me, "me");
    init_i64(&me, "ax", "1", &ax);
    node(&me, "Neg", "x", "t", NULL);
    node(&me, "Unsqueeze", "t ax", "me_o", NULL);
    OUT(&me, "me_o", SN_F32, NULL);
    node(&g, "Identity", "x0", "x", NULL);
    if_node(&g, "c1", "y", &mt, &me);
    IN(&g, "x0", SN_F32, "N");
    IN(&g, "c1", SN_BOOL, "");
    IN(&g, "c2", SN_BOOL, "");
    OUT(&g, "y", SN_F32, NULL);
    static const float x[3] = {1, 2, 3};
    static const double y0[] = {-1, -2, -3}, y2[] = {12}, y3[] = {2, 4, 6, 2, 4, 6};
    feed f[4][3];
    const feed *fk[4];
    int nf[4];
    for (int k = 0; k < 4; k++) {
        f[k][0] = (feed){"x0", SN_F32, "3", x};
        f[k][1] = (feed){"c1", SN_BOOL, "", BOOLP(k >> 1)};
        f[k][2] = (feed){"c2", SN_BOOL, "", BOOLP(k & 1)};
        fk[k] = f[k];
        nf[k] = 3;
    }
    const want wk[] = {{0, SN_F32, "1,3", y0}, {0, SN_F32, "1,3", y0}, {0, SN_F32, "1", y2}, {0, SN_F32, "6", y3}};
    run_case("sibling_names", &g, 17, 4, fk, nf, wk);
}

/* Conditional padding as speech encoders export it: if T is odd, pad one
 * frame (Constant nodes and a Concat of pads in the branch); a strided Conv
 * reads the If's output. T odd and even on one executor. */
static void case_cond_pad(void) {
    float W[24], B[4] = {0.1f, -0.1f, 0.2f, 0};
    for (int i = 0; i < 24; i++)
        W[i] = (float)(i % 5 - 2) * 0.25f;
    static const int64_t i2 = 2, two = 2, one = 1, z1 = 0, o1 = 1;
    sn_pbw g = {0}, t = {0}, e = {0}, at = {0};
    gname(&g, "cond_pad");
    gname(&t, "then");
    a_value_i64(&at, "1", &z1);
    node(&t, "Constant", "", "pz", &at);
    a_value_i64(&at, "1", &o1);
    node(&t, "Constant", "", "p1", &at);
    tb_attr_int(&at, "axis", 0);
    node(&t, "Concat", "pz pz pz pz pz p1", "pads", &at);
    node(&t, "Pad", "x pads", "t_o", NULL);
    OUT(&t, "t_o", SN_F32, NULL);
    branch1(&e, "else", "Identity", "x", "e_o", SN_F32, NULL);
    node(&g, "Shape", "x", "sh", NULL);
    tb_attr_int(&at, "axis", 0);
    node(&g, "Gather", "sh i2", "T", &at);
    node(&g, "Mod", "T two", "r", NULL);
    node(&g, "Equal", "r one", "odd", NULL);
    if_node(&g, "odd", "xp", &t, &e);
    a_ints(&at, "strides", 1, (const int64_t[]){2});
    node(&g, "Conv", "xp W B", "z", &at);
    init_f32(&g, "W", "4,2,3", W);
    init_f32(&g, "B", "4", B);
    init_i64(&g, "i2", "", &i2);
    init_i64(&g, "two", "", &two);
    init_i64(&g, "one", "", &one);
    IN(&g, "x", SN_F32, "1,2,T");
    OUT(&g, "z", SN_F32, NULL);
    float x7[14], x8[16];
    for (int i = 0; i < 16; i++) {
        if (i < 14)
            x7[i] = (float)(i % 7) * 0.5f - 1;
        x8[i] = (float)(i % 4) - 1.5f;
    }
    const feed f0[] = {{"x", SN_F32, "1,2,7", x7}};
    const feed f1[] = {{"x", SN_F32, "1,2,8", x8}};
    static const double z7[] = {0.224999994, -0.275000006, -0.774999976, -0.100000001, -0.349999994, -0.600000024,
                                0.699999988, 0.699999988, 0.699999988, -0.25, 0, 0.25},
                        z8[] = {0.100000001, 1.10000002, 0.100000001, -0.224999994, -0.725000024, -0.224999994,
                                1.20000005, -0.800000012, 1.20000005, -0.375, 1.125, -0.375};
    const feed *fk[] = {f0, f1, f0};
    const int nf[] = {1, 1, 1};
    const want wk[] = {{0, SN_F32, "1,4,3", z7}, {0, SN_F32, "1,4,3", z8}, {0, SN_F32, "1,4,3", z7}};
    run_case("cond_pad", &g, 17, 3, fk, nf, wk);
}

/* Reshape targets that the main graph folds (a Constant through Mul, Add)
 * read in a branch and in a nested branch, one also read by a main node. */
static void case_folded_outer(void) {
    static const int64_t kv[2] = {3, -1}, m1 = 1, d2[2] = {-1, 4};
    sn_pbw g = {0}, it = {0}, ie = {0}, mt = {0}, me = {0}, at = {0};
    gname(&g, "folded_outer");
    branch1(&it, "it", "Reshape", "x shp", "it_o", SN_F32, NULL);
    branch1(&ie, "ie", "Reshape", "x shp2", "ie_o", SN_F32, NULL);
    gname(&mt, "mt");
    if_node(&mt, "c2", "mt_o", &it, &ie);
    OUT(&mt, "mt_o", SN_F32, NULL);
    branch1(&me, "me", "Reshape", "x shp", "me_o", SN_F32, NULL);
    a_value_i64(&at, "2", kv);
    node(&g, "Constant", "", "k", &at);
    node(&g, "Mul", "k m1", "shp", NULL);
    node(&g, "Abs", "shp", "shp_a", NULL);
    node(&g, "Add", "k d2", "shp2", NULL);
    if_node(&g, "c1", "y", &mt, &me);
    node(&g, "Shape", "shp_a", "sz", NULL);
    init_i64(&g, "m1", "", &m1);
    init_i64(&g, "d2", "2", d2);
    IN(&g, "x", SN_F32, "6");
    IN(&g, "c1", SN_BOOL, "");
    IN(&g, "c2", SN_BOOL, "");
    OUT(&g, "y", SN_F32, NULL);
    OUT(&g, "sz", SN_I64, NULL);
    static const float x[6] = {0, 1, 2, 3, 4, 5};
    static const double y[] = {0, 1, 2, 3, 4, 5}, sz[] = {2};
    feed f[5][3];
    const feed *fk[5];
    int nf[5];
    want wk[5];
    for (int k = 0; k < 5; k++) {
        int c1 = k >> 1 & 1, c2 = k & 1;
        f[k][0] = (feed){"x", SN_F32, "6", x};
        f[k][1] = (feed){"c1", SN_BOOL, "", BOOLP(c1)};
        f[k][2] = (feed){"c2", SN_BOOL, "", BOOLP(c2)};
        fk[k] = f[k];
        nf[k] = 3;
        wk[k] = (want){0, SN_F32, c1 && !c2 ? "2,3" : "3,2", y};
    }
    wk[4] = (want){1, SN_I64, "1", sz};
    run_case("folded_outer", &g, 17, 5, fk, nf, wk);
}

/* One If's untyped output (ya) read in a nested branch of an If listed
 * before it; the other branch Casts a value made after both. */
static void case_if_chain(void) {
    sn_pbw g = {0}, a_t = {0}, a_e = {0}, it = {0}, ie = {0}, bt = {0}, be = {0}, at = {0};
    gname(&g, "if_chain");
    branch1(&a_t, "at", "Add", "x x", "at_o", 0, NULL);
    tb_attr_int(&at, "to", SN_F32);
    branch1(&a_e, "ae", "Cast", "xi", "ae_o", 0, &at);
    tb_attr_int(&at, "to", SN_I32);
    branch1(&it, "it", "Cast", "ya", "it_o", 0, &at);
    tb_attr_int(&at, "to", SN_I32);
    branch1(&ie, "ie", "Cast", "x", "ie_o", 0, &at);
    gname(&bt, "bt");
    if_node(&bt, "c2", "bt_o", &it, &ie);
    OUT(&bt, "bt_o", 0, NULL);
    gname(&be, "be");
    tb_attr_int(&at, "to", SN_I32);
    node(&be, "Cast", "ya", "be_c", &at);
    node(&be, "Neg", "be_c", "be_o", NULL);
    OUT(&be, "be_o", 0, NULL);
    if_node(&g, "c2", "yb", &bt, &be);
    if_node(&g, "c1", "ya", &a_t, &a_e);
    tb_attr_int(&at, "to", SN_I64);
    node(&g, "Cast", "x", "xi", &at);
    tb_attr_int(&at, "to", SN_F32);
    node(&g, "Cast", "yb", "z", &at);
    IN(&g, "x", SN_F32, "N");
    IN(&g, "c1", SN_BOOL, "");
    IN(&g, "c2", SN_BOOL, "");
    OUT(&g, "z", SN_F32, NULL);
    static const float x[2] = {1.7f, -2.2f};
    static const double z00[] = {-1, 2}, z01[] = {1, -2}, z10[] = {-3, 4}, z11[] = {3, -4};
    feed f[4][3];
    const feed *fk[4];
    int nf[4];
    for (int k = 0; k < 4; k++) {
        f[k][0] = (feed){"x", SN_F32, "2", x};
        f[k][1] = (feed){"c1", SN_BOOL, "", BOOLP(k >> 1)};
        f[k][2] = (feed){"c2", SN_BOOL, "", BOOLP(k & 1)};
        fk[k] = f[k];
        nf[k] = 3;
    }
    const want wk[] = {{0, SN_F32, "2", z00}, {0, SN_F32, "2", z01}, {0, SN_F32, "2", z10}, {0, SN_F32, "2", z11}};
    run_case("if_chain", &g, 17, 4, fk, nf, wk);
}

/* A Conv in a branch reads an inner If whose then_branch (never taken)
 * cannot fit its Reshape and whose outputs declare no type; the Conv's
 * weights are the main graph's (was: "X, W and B must have the same type"
 * planning the branch). */
static void case_conv_after_inner_if(void) {
    static const float W[3] = {1, -1, 0.5f}, B[1] = {0.25f};
    static const int64_t sh[2] = {3, 3};
    sn_pbw g = {0}, it = {0}, ie = {0}, mt = {0}, me = {0}, at = {0};
    gname(&g, "conv_after_inner_if");
    gname(&it, "it");
    init_i64(&it, "sh", "2", sh);
    node(&it, "Reshape", "x sh", "it_o", NULL);
    OUT(&it, "it_o", 0, NULL);
    branch1(&ie, "ie", "Identity", "x", "ie_o", 0, NULL);
    gname(&mt, "mt");
    if_node(&mt, "c2", "xi", &it, &ie);
    a_ints(&at, "pads", 2, (const int64_t[]){1, 1});
    node(&mt, "Conv", "xi W B", "mt_o", &at);
    OUT(&mt, "mt_o", 0, NULL);
    branch1(&me, "me", "Conv", "x W B", "me_o", 0, NULL);
    if_node(&g, "c1", "y", &mt, &me);
    init_f32(&g, "W", "1,1,3", W);
    init_f32(&g, "B", "1", B);
    IN(&g, "x", SN_F32, "1,1,8");
    IN(&g, "c1", SN_BOOL, "");
    IN(&g, "c2", SN_BOOL, "");
    OUT(&g, "y", SN_F32, NULL);
    static const float x[8] = {1, 2, 3, 4, -1, -2, -3, -4};
    static const feed f0[] = {{"x", SN_F32, "1,1,8", x}, {"c1", SN_BOOL, "", &k_true}, {"c2", SN_BOOL, "", &k_false}};
    static const feed f1[] = {{"x", SN_F32, "1,1,8", x}, {"c1", SN_BOOL, "", &k_false}, {"c2", SN_BOOL, "", &k_false}};
    static const double y0[] = {0.25, 0.75, 1.25, -1.25, 4.25, -0.25, -0.75, 1.25},
                        y1[] = {0.75, 1.25, -1.25, 4.25, -0.25, -0.75};
    const feed *fk[] = {f0, f1};
    const int nf[] = {3, 3};
    const want wk[] = {{0, SN_F32, "1,1,8", y0}, {0, SN_F32, "1,1,6", y1}};
    run_case("conv_after_inner_if", &g, 17, 2, fk, nf, wk);
}

int main(void) {
    g_dump = getenv("SNUG_SCOPE_DUMP");
    case_rank_mismatch();
    case_dead_branch();
    case_loop_if();
    case_scan_if();
    case_scan8();
    case_if_loop_if();
    case_nested_cast();
    case_deep_only();
    case_conv_in_if();
    case_sibling_names();
    case_cond_pad();
    case_folded_outer();
    case_if_chain();
    case_conv_after_inner_if();
    printf("test_subgraph_scope: %d models\n", g_cases);
    return test_done("test_subgraph_scope");
}
