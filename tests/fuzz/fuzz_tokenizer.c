/* libFuzzer target: tokenizer.json (src/genai/tokenizer*.c), then encode
 * and decode of a fixed text through what it built. */
#include <stdint.h>

#include "genai/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sn_err err = {0};
    sn_tokenizer *t = NULL;
    if (sn_tokenizer_load_json((const char *)data, size, "fuzz", &t, &err) != SNUG_OK)
        return 0;
    static const char text[] = "Hello, world! 123 \xc3\xa9t\xc3\xa9 <s>";
    int32_t *ids = NULL;
    size_t n = 0;
    if (sn_tokenizer_encode(t, text, sizeof text - 1, true, &ids, &n, &err) == SNUG_OK) {
        char *back = NULL;
        size_t len = 0;
        if (sn_tokenizer_decode(t, ids, n, false, &back, &len, &err) == SNUG_OK)
            sn_free(back);
        sn_free(ids);
    }
    sn_tokenizer_free(t);
    return 0;
}
