/* libFuzzer target: the node-stats file reader (src/plan/stats.c). */
#include <stdint.h>

#include "plan/stats.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sn_err err = {0};
    sn_stats *st = NULL;
    if (sn_stats_parse((const char *)data, size, "fuzz", &st, &err) == SNUG_OK)
        sn_stats_free(st);
    return 0;
}
