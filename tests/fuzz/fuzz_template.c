/* libFuzzer target: the chat-template parser and renderer
 * (src/genai/template*.c) on a fixed conversation. */
#include <stdint.h>

#include "genai/template.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sn_err err = {0};
    sn_template *t = NULL;
    if (sn_template_parse((const char *)data, size, "fuzz", &t, &err) != SNUG_OK)
        return 0;
    static const sn_chat_msg msgs[] = {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello"},
                                       {"user", "Bye"}};
    /* 64 KiB: a mutant that builds strings up to the 16 MiB default would
     * spend the campaign's time copying them; the cap's code is the same. */
    sn_template_vars vars = {.bos_token = "<s>", .eos_token = "</s>", .add_generation_prompt = true,
                             .max_bytes = (size_t)64 << 10};
    char *out = NULL;
    size_t len = 0;
    if (sn_template_render(t, msgs, 4, &vars, &out, &len, &err) == SNUG_OK)
        sn_free(out);
    sn_template_free(t);
    return 0;
}
