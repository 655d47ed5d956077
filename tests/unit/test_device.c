/* The device path through the public API, without Python, so that it runs
 * under ASan and UBSan too: the tiny fixtures (GroupQueryAttention with a
 * shared cache, an Optimum export whose cache moves rows on the device)
 * decoded greedily on the host and with snug.device=opencl (every layer,
 * -ngl 2, two sequences batched, and every layer under a budget smaller
 * than the model with the weights that do not fit streamed in from host
 * memory), the same ids; the device's memory as planned is what its
 * backend holds, and a streamed plan holds at most its budget. Exit 77 without an OpenCL device or
 * without the fixtures (models.build makes them). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snug.h"

static int g_fails;
#define CHECK(c, ...)                                                        \
    do {                                                                     \
        if (!(c)) {                                                          \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #c); \
            fprintf(stderr, __VA_ARGS__);                                    \
            fputc('\n', stderr);                                             \
            g_fails++;                                                       \
        }                                                                    \
    } while (0)

#define STEPS 8

static int argmax(const float *x, int64_t n) {
    int b = 0;
    for (int64_t i = 1; i < n; i++)
        b = x[i] > x[b] ? (int)i : b;
    return b;
}

/* Greedy ids of one prompt, on the host (device NULL) or the device; 0 when
 * it ran, 77 when the device is not there, 1 on a failure. */
static int greedy(const char *model, const char *device, const char *ngl, uint64_t stream_budget, int64_t *out) {
    snug_options *o = snug_options_new();
    snug_options_set(o, "snug.last_logits", "1"); /* a prefill's logits: its last position's */
    if (device)
        snug_options_set(o, "snug.device", device);
    if (ngl)
        snug_options_set(o, "snug.n_gpu_layers", ngl);
    char budget[32];
    snprintf(budget, sizeof budget, "%llu", (unsigned long long)stream_budget);
    if (stream_budget) {
        snug_options_set(o, "snug.mem.gpu", budget);
        snug_options_set(o, "snug.placement_overflow", "stream");
    }
    snug_session *s = NULL;
    char err[1024];
    int rc = snug_session_create(model, o, &s, err, sizeof err);
    snug_options_free(o);
    if (rc != SNUG_OK) {
        bool absent = strstr(err, "no OpenCL platform") || strstr(err, "no backend 'opencl'");
        if (!absent)
            fprintf(stderr, "%s on %s: %s\n", model, device ? device : "host", err);
        return absent ? 77 : 1;
    }
    snug_decoder *d = NULL;
    int status = 1;
    if (snug_decoder_new(s, 64, 0, &d) != SNUG_OK) {
        fprintf(stderr, "%s: %s\n", model, snug_session_error(s));
        goto done;
    }
    snug_decoder_info info;
    snug_decoder_get_info(d, &info);
    const int64_t prompt[5] = {1, 42, 7, 300, 12};
    const float *lg = NULL;
    if (snug_decoder_prefill(d, prompt, 5, &lg) != SNUG_OK)
        goto fail;
    snug_decoder_get_info(d, &info);
    for (int t = 0; t < STEPS; t++) {
        out[t] = argmax(lg, info.vocab);
        if (t + 1 < STEPS && snug_decoder_decode(d, out[t], &lg) != SNUG_OK)
            goto fail;
    }
    if (device) { /* what the plan holds on the device is what its backend holds */
        snug_session_stats st;
        snug_device_info di;
        snug_session_get_stats(s, &st);
        CHECK(snug_session_device_info(s, 1, &di) == SNUG_OK, "%s", model);
        CHECK(di.held == st.device_bytes, "%s: backend holds %llu, the plan %zu", model, (unsigned long long)di.held,
              st.device_bytes);
        CHECK(di.n_nodes > 0 || (ngl && !strcmp(ngl, "0")), "%s: no node on the device", model);
        if (stream_budget) {
            CHECK(di.streamed_layers > 0 && di.stream_ring > 0 && di.streamed_total >= STEPS * di.streamed_per_run,
                  "%s: %d layers streamed, %llu bytes in", model, di.streamed_layers,
                  (unsigned long long)di.streamed_total);
            CHECK(di.peak <= stream_budget, "%s: a peak of %llu bytes over the %llu budget", model,
                  (unsigned long long)di.peak, (unsigned long long)stream_budget);
        }
    }
    status = 0;
    goto done;
fail:
    fprintf(stderr, "%s: %s\n", model, snug_session_error(s));
done:
    snug_decoder_free(d);
    snug_session_free(s);
    return status;
}

/* Two sequences decoded together on the device, each as it would alone. */
static void batched(const char *model, const char *device, const int64_t *alone) {
    snug_options *o = snug_options_new();
    if (device)
        snug_options_set(o, "snug.device", device);
    snug_options_set(o, "snug.last_logits", "1");
    snug_session *s = NULL;
    char err[1024];
    if (snug_session_create(model, o, &s, err, sizeof err) != SNUG_OK) {
        snug_options_free(o);
        CHECK(0, "%s", err);
        return;
    }
    snug_options_free(o);
    snug_decoder *d = NULL;
    CHECK(snug_decoder_new_slots(s, 64, 8, 2, &d) == SNUG_OK, "%s", snug_session_error(s));
    if (d) {
        snug_decoder_info info;
        const int64_t prompt[5] = {1, 42, 7, 300, 12};
        const float *lg = NULL;
        int64_t ids[2];
        int slots[2] = {0, 1};
        for (int k = 0; k < 2; k++) {
            CHECK(snug_decoder_slot_prefill(d, k, prompt, 5, &lg) == SNUG_OK, "%s", snug_session_error(s));
            snug_decoder_get_info(d, &info);
            ids[k] = lg ? argmax(lg, info.vocab) : -1;
        }
        for (int t = 0; t < STEPS; t++) {
            CHECK(ids[0] == alone[t] && ids[1] == alone[t], "%s on %s: step %d: batched %lld %lld, alone %lld", model,
                  device ? device : "the host", t, (long long)ids[0], (long long)ids[1], (long long)alone[t]);
            if (t + 1 == STEPS || snug_decoder_decode_slots(d, 2, slots, ids, &lg) != SNUG_OK || !lg)
                break;
            ids[0] = argmax(lg, info.vocab);
            ids[1] = argmax(lg + info.vocab, info.vocab);
        }
    }
    snug_decoder_free(d);
    snug_session_free(s);
}

int main(void) {
    const char *home = getenv("SNUG_MODELS");
    char base[1024];
    snprintf(base, sizeof base, "%s", home ? home : "");
    if (!home)
        snprintf(base, sizeof base, "%s/.cache/snug/models", getenv("HOME") ? getenv("HOME") : ".");
    const char *const fixtures[] = {"tiny/genai-fp32", "tiny/optimum"};
    int ran = 0;
    for (int f = 0; f < 2; f++) {
        char model[1200];
        snprintf(model, sizeof model, "%s/%s/model.onnx", base, fixtures[f]);
        FILE *probe = fopen(model, "rb");
        if (!probe) {
            fprintf(stderr, "skipped %s: no fixture (models.build makes it)\n", model);
            continue;
        }
        fclose(probe);
        int64_t host[STEPS], dev[STEPS];
        if (greedy(model, NULL, NULL, 0, host) != 0) {
            g_fails++;
            continue;
        }
        const char *ngls[] = {NULL, "2", NULL};
        for (int k = 0; k < 3; k++) {
            /* k 2: the tiny models need 3.5 MiB there; 2.7 MiB streams most layers' weights */
            int rc = greedy(model, "opencl", ngls[k], k == 2 ? 2700000 : 0, dev);
            if (rc == 77) {
                fprintf(stderr, "skipped: no OpenCL device\n");
                return 77;
            }
            CHECK(rc == 0, "%s on opencl failed", model);
            for (int t = 0; rc == 0 && t < STEPS; t++)
                CHECK(dev[t] == host[t], "%s -ngl %s%s: step %d: %lld on opencl, %lld on the host", fixtures[f],
                      ngls[k] ? ngls[k] : "auto", k == 2 ? " streamed" : "", t, (long long)dev[t], (long long)host[t]);
        }
        if (f == 0) /* shared cache: batched rows are bit for bit the sequence alone (a padded Optimum
                     * cache only to rounding: test_kvloop) */
            for (int k = 0; k < 2; k++)
                batched(model, k ? "opencl" : NULL, host);
        ran++;
    }
    if (!ran)
        return 77;
    printf("device: %s (%d fixtures)\n", g_fails ? "FAILED" : "ok", ran);
    return g_fails ? 1 : 0;
}
