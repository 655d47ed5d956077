/* A string -> int map with open addressing. Keys are borrowed (must outlive
 * the map). */
#ifndef SN_CORE_STRMAP_H
#define SN_CORE_STRMAP_H

#include "core/core.h"

typedef struct sn_strmap {
    const char **keys; /* owned array, borrowed strings */
    int *vals;
    size_t cap, len;
} sn_strmap;

int sn_strmap_put(sn_strmap *m, const char *key, int val); /* SNUG_OK or SNUG_ERR_OOM */
/* Returns the value, or -1 when absent. */
int sn_strmap_get(const sn_strmap *m, const char *key);
void sn_strmap_clear(sn_strmap *m);

#endif
