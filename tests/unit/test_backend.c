/* The backend interface (src/backends/backend.h) on the CPU backend: the
 * registry, buffers of the declared type (aligned, host-visible), tensor
 * set/get at offsets, asynchronous copies and their events, and errors. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "backends/backend.h"
#include "ops/op.h"

static int fails;
#define CHECK(c)                                                               \
    do {                                                                       \
        if (!(c)) {                                                            \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
            fails++;                                                           \
        }                                                                      \
    } while (0)

int main(void) {
    sn_err err = {0};
    CHECK(sn_backend_count() >= 1 && !strcmp(sn_backend_name(0), "cpu") && !sn_backend_name(-1));
    sn_backend bad;
    CHECK(sn_backend_new("no-such-device", &bad, &err) == SNUG_ERR_UNSUPPORTED &&
          strstr(err.msg, "no backend 'no-such-device'") && strstr(err.msg, "have: cpu"));
    sn_backend b;
    CHECK(sn_backend_new(NULL, &b, &err) == SNUG_OK && b.ops && !strcmp(b.ops->name, "cpu"));
    if (!b.ops)
        return 1;
    sn_buffer_type bt;
    sn_backend_buffer_type(&b, &bt);
    CHECK(!strcmp(bt.name, "cpu") && bt.alignment == 64 && bt.host_visible);
    sn_mem_info mi;
    CHECK(sn_backend_mem_info(&b, &mi, &err) == SNUG_OK && mi.total > 0 && mi.free <= mi.total);
    /* buffers: aligned as declared, several at once, each its own */
    uint8_t *buf[5];
    for (int k = 0; k < 5; k++) {
        buf[k] = b.ops->buffer_alloc(b.ctx, 1000 + (size_t)k * 77, &err);
        CHECK(buf[k] && (uintptr_t)buf[k] % bt.alignment == 0);
        if (buf[k])
            memset(buf[k], k, 1000);
    }
    for (int k = 0; k < 5; k++)
        CHECK(!buf[k] || (buf[k][0] == k && buf[k][999] == k));
    /* set/get at an offset, and an async copy each way, waited for */
    float src[64], back[64];
    for (int i = 0; i < 64; i++)
        src[i] = (float)i * 0.5f - 3;
    CHECK(sn_backend_tensor_set(&b, buf[0], 100, src, sizeof src, &err) == SNUG_OK);
    memset(back, 0, sizeof back);
    CHECK(sn_backend_tensor_get(&b, buf[0], 100, back, sizeof back, &err) == SNUG_OK && !memcmp(src, back, sizeof src));
    sn_event *ev = (sn_event *)1;
    CHECK(sn_backend_copy_async(&b, buf[1], src, sizeof src, true, &ev, &err) == SNUG_OK);
    CHECK(sn_backend_event_wait(&b, ev, &err) == SNUG_OK && !memcmp(buf[1], src, sizeof src));
    memset(back, 0, sizeof back);
    CHECK(sn_backend_copy_async(&b, back, buf[1], sizeof back, false, &ev, &err) == SNUG_OK);
    CHECK(sn_backend_event_wait(&b, ev, &err) == SNUG_OK && !memcmp(back, src, sizeof src));
    CHECK(sn_backend_event_wait(&b, NULL, &err) == SNUG_OK); /* a copy complete on return */
    /* kernels come through the backend */
    sn_node mm = {.op = sn_op_find("", "MatMul", 13)};
    CHECK(mm.op && sn_backend_kernel(&b, &mm) == &mm.op->cpu && mm.op->cpu.run);
    sn_node none = {.op = NULL};
    CHECK(sn_backend_kernel(&b, &none) == NULL);
    CHECK(b.ops->buffer_alloc(b.ctx, SIZE_MAX - 8, &err) == NULL && err.msg[0]);
    for (int k = 0; k < 5; k++)
        b.ops->buffer_free(b.ctx, buf[k]);
    sn_backend_free(&b);
    if (fails) {
        fprintf(stderr, "test_backend: %d check(s) failed\n", fails);
        return 1;
    }
    printf("test_backend: ok\n");
    return 0;
}
