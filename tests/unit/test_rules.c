/* Placement rules (src/plan/rules.h) against ONNX Runtime's documented
 * grammar and priorities (../shared/ORT-NOTES.md §1), one check per rule of
 * it, and snug's range extension. */
#include <string.h>

#include "plan/rules.h"
#include "onnx_test_util.h"

static sn_rules parse_ok(const char *text, bool by_name) {
    sn_rules r;
    sn_err e = {0};
    int rc = sn_rules_parse(text, by_name, &r, &e);
    if (rc != SNUG_OK) {
        fprintf(stderr, "parse '%s': %s\n", text, e.msg);
        g_fails++;
    }
    return r;
}

static void parse_bad(const char *text, bool by_name, const char *want) {
    sn_rules r;
    sn_err e = {0};
    int rc = sn_rules_parse(text, by_name, &r, &e);
    CHECK(rc == SNUG_ERR_INVALID_ARG);
    if (rc != SNUG_ERR_INVALID_ARG || !strstr(e.msg, want))
        fprintf(stderr, "'%s': wanted an error with '%s', got rc %d '%s'\n", text, want, rc, e.msg);
    CHECK(strstr(e.msg, want) != NULL);
    if (rc == SNUG_OK)
        sn_rules_free(&r);
}

/* The rule matching s, as "device:pattern", or "-". */
static const char *who(const sn_rules *r, const char *s) {
    static char b[256];
    int i = sn_rules_match(r, s);
    if (i < 0)
        return "-";
    snprintf(b, sizeof b, "%s:%s%s", r->r[i].device, r->r[i].exact ? "=" : "", r->r[i].pat);
    return b;
}

#define MATCHES(r, s, want)                                                                   \
    do {                                                                                      \
        const char *got_ = who(&(r), s);                                                      \
        if (strcmp(got_, want))                                                               \
            fprintf(stderr, "%s:%d: '%s' matched %s, wanted %s\n", __FILE__, __LINE__, s, got_, want); \
        CHECK(!strcmp(got_, want));                                                           \
    } while (0)

int main(void) {
    /* grammar: entries split on ';' and trimmed, device before '(', patterns split on ',' and trimmed */
    sn_rules r = parse_ok("  gpu( encoder , decoder ) ;cpu(=final_output);", false);
    CHECK(r.n == 3);
    CHECK(!strcmp(r.r[0].device, "gpu") && !strcmp(r.r[0].pat, "encoder") && !r.r[0].exact);
    CHECK(!strcmp(r.r[1].pat, "decoder"));
    CHECK(!strcmp(r.r[2].device, "cpu") && !strcmp(r.r[2].pat, "final_output") && r.r[2].exact);
    sn_rules_free(&r);
    /* device designators are case-insensitive */
    r = parse_ok("GPU(a);Cpu(b)", false);
    CHECK(!strcmp(r.r[0].device, "gpu") && !strcmp(r.r[1].device, "cpu"));
    sn_rules_free(&r);
    /* empty patterns are skipped */
    r = parse_ok("gpu(a,,  ,b)", false);
    CHECK(r.n == 2);
    sn_rules_free(&r);
    /* missing '(' or ')', ')' before '(', an empty device: errors */
    parse_bad("gpu a", false, "is not DEVICE(PATTERN");
    parse_bad("gpu(a", false, "is not DEVICE(PATTERN");
    parse_bad("gpu)a(", false, "is not DEVICE(PATTERN");
    parse_bad("(a)", false, "has no device");
    parse_bad("gpu(a)x", false, "text after ')'");
    /* the same annotation twice with the same kind is rejected; prefix and exact of one text are not */
    parse_bad("gpu(layers.1); cpu(layers.1)", false, "duplicate prefix match annotation 'layers.1'");
    parse_bad("gpu(=a); cpu(=a)", false, "duplicate exact match annotation 'a'");
    r = parse_ok("gpu(a); cpu(=a)", false);
    CHECK(r.n == 2);
    sn_rules_free(&r);

    /* annotations: no '=' is a prefix match, '=' an exact one */
    r = parse_ok("gpu(enc); cpu(=enc_final)", false);
    MATCHES(r, "enc_layer3", "gpu:enc");
    MATCHES(r, "enc", "gpu:enc");
    MATCHES(r, "xenc", "-");
    sn_rules_free(&r);
    r = parse_ok("cpu(=final)", false);
    MATCHES(r, "final", "cpu:=final");
    MATCHES(r, "final2", "-");
    sn_rules_free(&r);
    /* prefix rules beat exact ones, even written later */
    r = parse_ok("cpu(=layer_5); gpu(layer_)", false);
    MATCHES(r, "layer_5", "gpu:layer_");
    sn_rules_free(&r);
    /* within a kind the earlier rule wins (prefix: the lowest index, not the longest) */
    r = parse_ok("cpu(lay); gpu(layer_1)", false);
    MATCHES(r, "layer_12", "cpu:lay");
    sn_rules_free(&r);
    r = parse_ok("gpu(layer_1); cpu(lay)", false);
    MATCHES(r, "layer_12", "gpu:layer_1");
    MATCHES(r, "layer_2", "cpu:lay");
    sn_rules_free(&r);

    /* names: substrings, the longest wins, ties by order; '=' is rejected */
    parse_bad("gpu(=x)", true, "does not support the '=' (exact-match) qualifier");
    r = parse_ok("cpu(layers.1); gpu(layers.1/)", true);
    MATCHES(r, "/model/layers.1/attn/MatMul", "gpu:layers.1/");
    MATCHES(r, "/model/layers.10/attn/MatMul", "cpu:layers.1");
    MATCHES(r, "/model/layers.2/attn/MatMul", "-");
    sn_rules_free(&r);
    r = parse_ok("gpu(attn); cpu(mlp_)", true);
    MATCHES(r, "layers.0/attn/mlp_x", "gpu:attn"); /* equal length 4: the earlier */
    sn_rules_free(&r);
    /* duplicates are no error in name mode: the first wins */
    r = parse_ok("gpu(x); cpu(x)", true);
    MATCHES(r, "axb", "gpu:x");
    sn_rules_free(&r);

    /* snug's ranges: [a-b] expands in place, in order */
    r = parse_ok("gpu(layers.[0-11]/); cpu(lm_head)", true);
    CHECK(r.n == 13);
    MATCHES(r, "/model/layers.11/mlp/MatMul", "gpu:layers.11/");
    MATCHES(r, "/model/layers.12/mlp/MatMul", "-");
    MATCHES(r, "/lm_head/MatMul", "cpu:lm_head");
    CHECK(r.r[12].entry == 1);
    sn_rules_free(&r);
    r = parse_ok("gpu(b[1-2].l[0-1])", false);
    CHECK(r.n == 4 && !strcmp(r.r[1].pat, "b1.l1") && !strcmp(r.r[2].pat, "b2.l0"));
    sn_rules_free(&r);
    parse_bad("gpu(layers.[3-1])", true, "FIRST <= LAST");
    parse_bad("gpu(layers.[x])", true, "a range is [FIRST-LAST]");

    /* devices: which of a session's devices each designator names */
    CHECK(sn_rule_device("cpu", NULL) == 0);
    CHECK(sn_rule_device("gpu", NULL) == -1);
    CHECK(sn_rule_device("gpu", "opencl") == 1);
    CHECK(sn_rule_device("gpu:0", "opencl") == 1);
    CHECK(sn_rule_device("gpu:1", "opencl") == -1);
    CHECK(sn_rule_device("accelerator", "opencl") == 1);
    CHECK(sn_rule_device("opencl", "opencl") == 1);
    CHECK(sn_rule_device("opencl:0", "opencl") == 1);
    CHECK(sn_rule_device("cuda", "opencl") == -1);
    CHECK(sn_rule_device("npu", "opencl") == -1);
    printf("rules: %s\n", g_fails ? "FAILED" : "ok");
    return g_fails ? 1 : 0;
}
