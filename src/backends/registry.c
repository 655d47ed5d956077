/* Backends compiled into this build: one line each. */
#include <string.h>

#include "backends/backend.h"

extern const sn_backend_ops sn_backend_cpu_ops;

static const sn_backend_ops *const k_backends[] = {
    &sn_backend_cpu_ops,
};
#define SN_N_BACKENDS (int)(sizeof k_backends / sizeof k_backends[0])

int sn_backend_count(void) { return SN_N_BACKENDS; }
const char *sn_backend_name(int i) { return i >= 0 && i < SN_N_BACKENDS ? k_backends[i]->name : NULL; }

int sn_backend_new(const char *name, sn_backend *out, sn_err *err) {
    memset(out, 0, sizeof *out);
    if (!name)
        name = "cpu";
    for (int i = 0; i < SN_N_BACKENDS; i++)
        if (!strcmp(k_backends[i]->name, name)) {
            out->ops = k_backends[i];
            return SNUG_OK;
        }
    return sn_errf(err, SNUG_ERR_UNSUPPORTED, "no backend '%s' in this build (have: cpu)", name);
}

void sn_backend_free(sn_backend *b) {
    if (b)
        memset(b, 0, sizeof *b);
}

int sn_backend_mem_info(const sn_backend *b, sn_mem_info *out, sn_err *err) {
    memset(out, 0, sizeof *out);
    return b->ops->mem_info ? b->ops->mem_info(b->ctx, out, err) : SNUG_OK;
}

const struct sn_op_def *sn_backend_find_kernel(const sn_backend *b, const char *domain, const char *op,
                                               int64_t opset) {
    return b->ops->find_kernel ? b->ops->find_kernel(b->ctx, domain, op, opset) : NULL;
}
