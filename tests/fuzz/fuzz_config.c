/* libFuzzer target: the config-key grammars (session.max_shape_override
 * through sn_shape_override_parse, sizes through sn_parse_size). */
#include <stdint.h>
#include <string.h>

#include "plan/estimate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = sn_malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = 0;
    sn_err err = {0};
    sn_shape_override *ov = NULL;
    int n = 0;
    if (sn_shape_override_parse(s, &ov, &n, &err) == SNUG_OK)
        sn_shape_override_free(ov, n);
    uint64_t bytes;
    (void)sn_parse_size(s, &bytes, &err);
    sn_free(s);
    return 0;
}
