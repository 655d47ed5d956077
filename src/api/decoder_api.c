/* The public LLM step loop (include/snug.h, snug_decoder_*) over the step
 * driver (genai/kvloop.h); its messages go to the session it runs. */
#include "api/api.h"
#include "genai/kvloop.h"

struct snug_decoder {
    sn_kvloop *loop; /* owned */
    sn_session *s;   /* borrowed: runs the loop, holds its messages */
};

int snug_decoder_new(snug_session *ps, int64_t max_ctx, int64_t max_step, snug_decoder **out) {
    return snug_decoder_new_slots(ps, max_ctx, max_step, 1, out);
}

int snug_decoder_new_slots(snug_session *ps, int64_t max_ctx, int64_t max_step, int slots, snug_decoder **out) {
    sn_session *s = (sn_session *)ps;
    *out = NULL;
    snug_decoder *d = sn_calloc(1, sizeof *d);
    if (!d)
        return sn_errf(&s->err, SNUG_ERR_OOM, "out of memory");
    d->s = s;
    int rc = sn_kvloop_new_slots(s, max_ctx, max_step > 0 ? max_step : max_ctx, slots, &d->loop, &s->err);
    if (rc != SNUG_OK) {
        sn_free(d);
        return rc;
    }
    *out = d;
    return SNUG_OK;
}

void snug_decoder_free(snug_decoder *d) {
    if (!d)
        return;
    sn_kvloop_free(d->loop);
    sn_free(d);
}

void snug_decoder_get_info(const snug_decoder *d, snug_decoder_info *out) {
    const sn_kvloop_info *i = sn_kvloop_get_info(d->loop);
    *out = (snug_decoder_info){
        .n_layers = i->n_layers,
        .kv_heads = i->kv_heads,
        .head_dim = i->head_dim,
        .vocab = i->vocab,
        .max_ctx = i->max_ctx,
        .has_position_ids = i->has_position_ids,
        .kv_bytes = i->kv_bytes,
        .shared_kv = i->shared_kv,
        .last_logits = i->last_logits,
        .slots = i->slots,
    };
}

int snug_decoder_prefill(snug_decoder *d, const int64_t *ids, int64_t n, const float **logits) {
    return sn_kvloop_prefill(d->loop, ids, n, logits, &d->s->err);
}

int snug_decoder_decode(snug_decoder *d, int64_t id, const float **logits) {
    return sn_kvloop_decode(d->loop, id, logits, &d->s->err);
}

void snug_decoder_reset(snug_decoder *d) { sn_kvloop_reset(d->loop); }

int snug_decoder_rewind(snug_decoder *d, int64_t pos) { return sn_kvloop_rewind(d->loop, pos, &d->s->err); }

int64_t snug_decoder_pos(const snug_decoder *d) { return sn_kvloop_pos(d->loop); }

int snug_decoder_slot_prefill(snug_decoder *d, int slot, const int64_t *ids, int64_t n, const float **logits) {
    return sn_kvloop_slot_prefill(d->loop, slot, ids, n, logits, &d->s->err);
}

int snug_decoder_decode_slots(snug_decoder *d, int n, const int *slots, const int64_t *ids, const float **logits) {
    if (n < 0 || (n && (!slots || !ids)))
        return sn_errf(&d->s->err, SNUG_ERR_INVALID_ARG, "snug_decoder_decode_slots: no slots or ids");
    return sn_kvloop_decode_slots(d->loop, n, slots, ids, logits, &d->s->err);
}

void snug_decoder_slot_reset(snug_decoder *d, int slot) { sn_kvloop_slot_reset(d->loop, slot); }

int64_t snug_decoder_slot_pos(const snug_decoder *d, int slot) { return sn_kvloop_slot_pos(d->loop, slot); }

static void memory_of(const sn_kvloop_mem *m, snug_memory *out) {
    *out = (snug_memory){
        .weights_read = m->weights_read,
        .weights_gathered = m->weights_gathered,
        .staging = m->staging,
        .weights_copied = m->weights_copied,
        .packed = m->packed,
        .arena = m->arena,
        .lower_bound = m->lower_bound,
        .kv = m->kv,
        .folded = m->folded,
        .driver = m->driver,
        .other_heap = m->other_heap,
        .total = m->total,
    };
}

void snug_decoder_memory(const snug_decoder *d, snug_memory *out) {
    sn_kvloop_mem m;
    sn_kvloop_memory(d->loop, &m);
    memory_of(&m, out);
}

int snug_decoder_estimate(const snug_decoder *d, snug_memory *out) {
    sn_kvloop_mem m;
    if (!sn_kvloop_estimate(d->loop, &m))
        return SNUG_ERR_UNSUPPORTED;
    memory_of(&m, out);
    return SNUG_OK;
}
