/* The one op table: every family's defs, looked up by (domain, name, opset).
 * A family is a folder of src/ops (README.md lists what each holds) with one
 * table, sn_ops_<family>. */
#include <string.h>

#include "ops/op.h"

#define SN_FAMILIES(X) \
    X(elementwise) X(reduce) X(nn) X(linalg) X(quant) X(shape) X(index) X(signal) \
    X(control) X(sequence) X(llm) X(text) X(random) X(training) X(ml)

#define SN_DECL(f) extern const sn_op_def sn_ops_##f[];
SN_FAMILIES(SN_DECL)
#define SN_REF(f) sn_ops_##f,
static const sn_op_def *const k_families[] = {SN_FAMILIES(SN_REF)};
#define SN_NFAM (int)(sizeof k_families / sizeof k_families[0])

static bool domain_eq(const char *a, const char *b) {
    if (!a || !strcmp(a, "ai.onnx"))
        a = "";
    if (!b || !strcmp(b, "ai.onnx"))
        b = "";
    return !strcmp(a, b);
}

const sn_op_def *sn_op_find(const char *domain, const char *name, int64_t opset) {
    const sn_op_def *best = NULL;
    for (int f = 0; f < SN_NFAM; f++)
        for (const sn_op_def *d = k_families[f]; d->name; d++)
            if (!strcmp(d->name, name) && domain_eq(d->domain, domain) &&
                d->since_version <= opset && (!best || d->since_version > best->since_version))
                best = d;
    return best;
}

int sn_op_count(void) {
    int n = 0;
    for (int f = 0; f < SN_NFAM; f++)
        for (const sn_op_def *d = k_families[f]; d->name; d++)
            n++;
    return n;
}

const sn_op_def *sn_op_at(int i) {
    for (int f = 0; f < SN_NFAM; f++)
        for (const sn_op_def *d = k_families[f]; d->name; d++)
            if (i-- == 0)
                return d;
    return NULL;
}
