/* libFuzzer target: snug serve's request bodies (tools/serve_request.c),
 * as a chat and as a completion request. Every input must give a job or a
 * refusal with a status and a message, never a crash or a leak. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "serve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (int kind = JOB_CHAT; kind <= JOB_COMPLETE; kind++) {
        bad b = {0};
        job *j = serve_parse_job((const char *)data, size, kind, &b);
        if (j) {
            serve_job_free(j);
        } else if ((b.code != 400 && b.code != 500) || !b.msg[0]) {
            fprintf(stderr, "fuzz_request: refused with status %d and message '%s'\n", b.code, b.msg);
            abort();
        }
    }
    return 0;
}
