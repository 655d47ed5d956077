/* The LLM step driver (see kvloop.h).
 *
 * Padded steps. The executor plans for concrete shapes and re-plans when they
 * change; a past that grows by one token per step would re-plan every step.
 * When the model masks keys by attention_mask (Optimum and dynamo exports:
 * attention_mask and position_ids, no contrib attention op), the past is
 * instead fed at a padded length P, a multiple of SN_KVLOOP_BUCKET (32): slots
 * [pos, P) hold stale data and are masked out (mask 0), the new tokens go
 * after them (index P in present) and are copied into slots [pos, pos+S).
 * Shapes then change once per bucket, and a step copies only its new rows.
 * A masked key adds the dtype's lowest value to its score, so its softmax
 * weight is exactly 0: the result equals the unpadded one. Models whose
 * attention reads the mask otherwise (GroupQueryAttention: sequence lengths
 * from the mask's sum, keys assumed contiguous) run exact shapes (P = pos)
 * and copy all of present. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genai/kvloop.h"
#include "ops/llm/llm.h"

struct sn_kvloop {
    bool per_step;        /* no plan at the bounds: each step's shapes are planned for (said once at INFO) */
    sn_session *s;          /* borrowed */
    sn_kvloop_info info;
    int n_in, n_out;
    int i_ids, i_mask, i_pos; /* graph input positions; -1 when absent */
    int o_logits;             /* graph output position */
    int *i_past;            /* owned [2 * n_layers]: input position of layer l's key (2l) and value (2l+1) */
    int *o_present;         /* owned [2 * n_layers]: output positions, same order */
    void **kv;              /* owned array [2 * n_layers] of the executor's state buffers (borrowed):
                             * [kv_heads, cap, head_dim] elements each, the first kv_heads * P * head_dim
                             * of them packed as [1, kv_heads, P, head_dim] (shared: P = cap) */
    bool shared;            /* present is computed into the past buffer: no copy between steps */
    int64_t cap;            /* rows per head of each KV buffer: the largest P */
    sn_dtype kv_dtype;
    size_t kv_esize;        /* bytes per KV element */
    sn_dtype ids_dtype, mask_dtype, pos_dtype;
    void *ids, *mask, *pos; /* owned [max_ctx] elements of their dtype */
    sn_tensor *in;          /* owned [n_in]: the inputs of a step */
    sn_tensor *out;         /* owned [n_out]: views of the executor's outputs */
    int64_t past;           /* tokens in the cache (slot 0's when there are several) */
    int n_slots;            /* sequences the cache holds (batch rows of a decode step) */
    int64_t *slot_past;     /* owned [n_slots]: tokens in each slot's cache; [0] mirrors past */
    size_t slot_bytes;      /* bytes of one slot in each KV buffer: [kv_heads, cap, head_dim] */
    size_t win_off;         /* the byte offset the state buffers are windowed to (0: whole) */
    int64_t max_step;       /* the most tokens one step takes (the plan's bound on input_ids) */
    int64_t pad;            /* P: the past length fed to the model (>= past), the row stride of kv */
    int64_t bucket;         /* P is a multiple of this (1: exact shapes) */
    int64_t mask_cap;       /* elements of mask */
    int64_t heap_planned;   /* snug_alloc_peak_bytes() once planned */
    sn_kvloop_mem est;      /* the estimate made before planning (estimate_at_bounds) */
    bool has_est;
    /* packed steps (sn_kvloop_step_packed) */
    int *pk_slot;           /* owned [n_slots + 1] */
    int64_t *pk_first;      /* owned [n_slots + 2] */
    int64_t *pk_past;       /* owned [n_slots + 1] */
};

/* A plan costs ~10 ms on SmolLM2-135M, a padded slot ~40 us per step: the
 * sum over a bucket is least near 20 tokens. */
#define SN_KVLOOP_BUCKET 32

static const char *packed_why_not(const sn_kvloop *l);

int64_t sn_argmax_f32(const float *x, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

/* "past_key_values.12.key" -> layer 12, kind 0 (key) / 1 (value); -1 if not such a name. */
static int parse_kv_name(const char *name, const char *prefix, int *kind) {
    size_t np = strlen(prefix);
    if (strncmp(name, prefix, np) || name[np] < '0' || name[np] > '9')
        return -1;
    char *end;
    long layer = strtol(name + np, &end, 10);
    if (layer < 0 || layer > 100000)
        return -1;
    if (!strcmp(end, ".key"))
        *kind = 0;
    else if (!strcmp(end, ".value"))
        *kind = 1;
    else
        return -1;
    return (int)layer;
}

static bool is_index_dtype(sn_dtype t) { return t == SN_I64 || t == SN_I32; }

static void store_index(sn_dtype t, void *buf, int64_t i, int64_t v) {
    if (t == SN_I64)
        ((int64_t *)buf)[i] = v;
    else
        ((int32_t *)buf)[i] = (int32_t)v;
}

static void set_tensor(sn_tensor *t, sn_dtype dtype, int rank, const int64_t *dims, void *data) {
    memset(t, 0, sizeof *t);
    t->kind = SN_KIND_TENSOR;
    t->dtype = dtype;
    sn_tensor_set_shape(t, rank, dims);
    t->data = data;
}

/* The loop's own buffers: ids, mask (a row per slot) and positions. */
static uint64_t driver_bytes(const sn_kvloop *l) {
    int64_t ids = l->info.max_ctx > l->n_slots ? l->info.max_ctx : l->n_slots;
    return (uint64_t)(2 * ids + l->mask_cap * l->n_slots) * sizeof(int64_t);
}

static uint64_t fault_windows(uintptr_t (*r)[2], int nr, uintptr_t w);
static void weights_figures(const sn_kvloop *l, const uint8_t *gone, uint64_t *mapped, uint64_t *gathered,
                            uint64_t *owned);

/* The estimate of sn_kvloop_memory's figures made before planning: the plan
 * at the bounds run dry (sn_exec_estimate_bounds: nothing read, packed or
 * allocated), the weights from the graph and what that plan would release,
 * and the library's heap as it is now (graph, KV cache, the loop). */
static int estimate_at_bounds(sn_kvloop *l, const sn_tensor *b, sn_err *out_err) {
    const sn_graph *g = l->s->graph;
    sn_kvloop_mem *m = &l->est;
    memset(m, 0, sizeof *m);
    uint8_t *gone = sn_calloc((size_t)g->n_values + 1, 1);
    sn_exec_estimate e;
    sn_err err = {0};
    int64_t heap = snug_alloc_live_bytes();
    int rc = gone ? sn_exec_estimate_bounds(l->s->exec, b, &e, gone, &err)
                  : sn_errf(&err, SNUG_ERR_OOM, "out of memory");
    if (rc != SNUG_OK) {
        sn_free(gone);
        if (rc == SNUG_ERR_OOM || rc == SNUG_ERR_IO) { /* as the plan itself would fail */
            *out_err = err;
            return rc;
        }
        sn_log(&l->s->log, SNUG_LOG_INFO, "kvloop: no memory estimate before planning: %s", err.msg);
        return SNUG_OK;
    }
    /* under a host budget, the residency those bounds get (streamed weights
     * count as the staging slots they pass through) */
    if ((rc = sn_exec_stream_decide(l->s->exec, b, &err)) != SNUG_OK) {
        sn_free(gone);
        *out_err = err;
        return rc;
    }
    weights_figures(l, gone, &m->weights_read, &m->weights_gathered, &m->weights_copied);
    sn_free(gone);
    m->staging = sn_exec_stream_decided(l->s->exec)->staging_bytes;
    m->packed = e.state;
    m->arena = e.arena;
    m->lower_bound = e.lower_bound;
    m->folded = e.folded;
    m->kv = l->info.kv_bytes;
    m->driver = driver_bytes(l);
    /* the heap now holds the KV cache; the rest of it is the graph and the loop */
    m->other_heap = heap > 0 && (uint64_t)heap > m->kv ? (uint64_t)heap - m->kv : 0;
    m->total = m->weights_read + m->weights_gathered + m->weights_copied + m->packed + m->staging + m->arena +
               m->kv + m->folded + m->driver + m->other_heap;
    l->has_est = true;
    return SNUG_OK;
}

/* Plans the session once for the largest step the loop can make (a prompt of
 * max_ctx tokens, a KV cache of cap positions), so steps of any length run
 * in that plan without re-planning or allocating. A model that cannot be
 * planned at its bounds keeps planning per shape: slower, equally correct. */
static int plan_at_bounds(sn_kvloop *l, int64_t cap, sn_err *out_err) {
    const sn_graph *g = l->s->graph;
    sn_tensor *b = sn_calloc((size_t)g->n_inputs + 1, sizeof *b);
    if (!b)
        return sn_errf(out_err, SNUG_ERR_OOM, "out of memory");
    bool ok = true;
    for (int i = 0; i < g->n_inputs && ok; i++) {
        const sn_tensor *d = &g->values[g->inputs[i]].info;
        b[i] = *d;
        b[i].data = NULL;
        if (d->kind != SN_KIND_TENSOR || d->rank < 0) {
            ok = false;
            break;
        }
        for (int k = 0; k < d->rank; k++) {
            if (d->dims[k] >= 0)
                continue;
            if (k == 0)
                b[i].dims[k] = l->n_slots; /* batch: a decode step's rows */
            else if (i == l->i_mask)
                b[i].dims[k] = l->mask_cap;
            else if (i == l->i_ids || i == l->i_pos)
                b[i].dims[k] = l->max_step;
            else if (k == 2)
                b[i].dims[k] = cap; /* past length */
            else
                ok = false;
        }
    }
    sn_err err = {0};
    /* The estimate first, before planning reads or packs any weight. */
    int rc = ok ? estimate_at_bounds(l, b, &err) : SNUG_OK;
    if (rc == SNUG_OK && ok)
        rc = sn_exec_set_bounds(l->s->exec, b, &err);
    sn_free(b);
    /* A model whose shapes cannot be bounded plans per step; memory or a
     * failed read is an error, not a reason to plan (and allocate) in runs. */
    if (rc == SNUG_ERR_OOM || rc == SNUG_ERR_IO) {
        *out_err = err;
        return rc;
    }
    if (rc != SNUG_OK) { /* the loop's decision: a plan per step's shapes, said once */
        sn_log(&l->s->log, SNUG_LOG_INFO, "kvloop: planning per step (cannot plan at the bounds: %s)", err.msg);
        l->per_step = true;
    }
    return SNUG_OK;
}

/* Linux's default fault-around window: a read fault on a file map maps the
 * aligned 64 KiB around it from the page cache. (Large folios in the page
 * cache are mapped whole, up to 2 MiB on 6.x kernels: a file whose cache
 * holds them becomes resident in bigger pieces than this predicts.) */
#define SN_FAULT_AROUND ((uint64_t)64 << 10)

int sn_kvloop_new(sn_session *s, int64_t max_ctx, sn_kvloop **out, sn_err *err) {
    return sn_kvloop_new_slots(s, max_ctx, max_ctx, 1, out, err);
}

int sn_kvloop_new_chunked(sn_session *s, int64_t max_ctx, int64_t max_step, sn_kvloop **out, sn_err *err) {
    return sn_kvloop_new_slots(s, max_ctx, max_step, 1, out, err);
}

int sn_kvloop_new_slots(sn_session *s, int64_t max_ctx, int64_t max_step, int n_slots, sn_kvloop **out,
                        sn_err *err) {
    *out = NULL;
    const sn_graph *g = s->graph;
    int rc = SNUG_OK;
    if (max_ctx < 1)
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "kvloop: max_ctx must be at least 1, got %lld", (long long)max_ctx);
    if (max_step < 1 || max_step > max_ctx)
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "kvloop: a step of at most %lld tokens: not within 1..%lld (the context)",
                       (long long)max_step, (long long)max_ctx);
    if (n_slots < 1 || n_slots > SN_KVLOOP_MAX_SLOTS)
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "kvloop: %d sequences: not within 1..%d", n_slots,
                       SN_KVLOOP_MAX_SLOTS);
    sn_kvloop *l = sn_calloc(1, sizeof *l);
    if (!l)
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    l->s = s;
    l->n_slots = n_slots;
    if (!(l->slot_past = sn_calloc((size_t)n_slots, sizeof *l->slot_past))) {
        sn_free(l);
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    }
    l->n_in = g->n_inputs;
    l->n_out = g->n_outputs;
    l->i_ids = l->i_mask = l->i_pos = l->o_logits = -1;
    l->info.max_ctx = max_ctx;
    l->max_step = max_step;
    l->info.last_logits = sn_exec_last_row(s->exec) >= 0;

    /* Layers: the largest N among past inputs. */
    int n_layers = 0;
    for (int i = 0; i < g->n_inputs; i++) {
        int kind, layer = parse_kv_name(g->values[g->inputs[i]].name, "past_key_values.", &kind);
        if (layer >= n_layers)
            n_layers = layer + 1;
    }
    l->info.n_layers = n_layers;
    size_t n2 = (size_t)n_layers * 2 + 1;
    l->i_past = sn_malloc(n2 * sizeof *l->i_past);
    l->o_present = sn_malloc(n2 * sizeof *l->o_present);
    l->kv = sn_calloc(n2, sizeof *l->kv);
    l->in = sn_calloc((size_t)g->n_inputs + 1, sizeof *l->in);
    l->out = sn_calloc((size_t)g->n_outputs + 1, sizeof *l->out);
    if (!l->i_past || !l->o_present || !l->kv || !l->in || !l->out) {
        rc = sn_errf(err, SNUG_ERR_OOM, "out of memory");
        goto fail;
    }
    for (size_t k = 0; k < n2; k++)
        l->i_past[k] = l->o_present[k] = -1;

    l->info.kv_heads = l->info.head_dim = -1;
    for (int i = 0; i < g->n_inputs; i++) {
        const sn_value *v = &g->values[g->inputs[i]];
        const sn_tensor *t = &v->info;
        int kind, layer = parse_kv_name(v->name, "past_key_values.", &kind);
        if (layer >= 0) {
            if (t->kind != SN_KIND_TENSOR || t->rank != 4 || !sn_dim_known(t->dims[1]) || !sn_dim_known(t->dims[3])) {
                rc = sn_errf(err, SNUG_ERR_UNSUPPORTED,
                             "kvloop: input '%s' must be declared [batch, kv_heads, past, head_dim] with "
                             "concrete kv_heads and head_dim", v->name);
                goto fail;
            }
            if (l->info.kv_heads < 0) {
                l->info.kv_heads = t->dims[1];
                l->info.head_dim = t->dims[3];
                l->kv_dtype = t->dtype;
            } else if (t->dims[1] != l->info.kv_heads || t->dims[3] != l->info.head_dim || t->dtype != l->kv_dtype) {
                rc = sn_errf(err, SNUG_ERR_UNSUPPORTED, "kvloop: input '%s' differs in type or KV dims from the "
                             "other past inputs", v->name);
                goto fail;
            }
            l->i_past[2 * layer + kind] = i;
        } else if (!strcmp(v->name, "input_ids") || !strcmp(v->name, "attention_mask") ||
                   !strcmp(v->name, "position_ids")) {
            if (t->kind != SN_KIND_TENSOR || t->rank != 2 || !is_index_dtype(t->dtype)) {
                rc = sn_errf(err, SNUG_ERR_UNSUPPORTED, "kvloop: input '%s' must be an int64 or int32 [batch, n] tensor",
                             v->name);
                goto fail;
            }
            if (v->name[0] == 'i')
                l->i_ids = i, l->ids_dtype = t->dtype;
            else if (v->name[0] == 'a')
                l->i_mask = i, l->mask_dtype = t->dtype;
            else
                l->i_pos = i, l->pos_dtype = t->dtype;
        } else {
            rc = sn_errf(err, SNUG_ERR_UNSUPPORTED,
                         "kvloop: input '%s' is not one an LLM step driver knows (input_ids, attention_mask, "
                         "position_ids, past_key_values.N.key/value)", v->name);
            goto fail;
        }
    }
    if (l->i_ids < 0) {
        rc = sn_errf(err, SNUG_ERR_UNSUPPORTED, "kvloop: the model has no 'input_ids' input: not an LLM decoder");
        goto fail;
    }
    for (int i = 0; i < g->n_outputs; i++) {
        const sn_value *v = &g->values[g->outputs[i]];
        int kind, layer = parse_kv_name(v->name, "present.", &kind);
        if (!strcmp(v->name, "logits"))
            l->o_logits = i;
        else if (layer >= 0 && layer < n_layers)
            l->o_present[2 * layer + kind] = i;
    }
    if (l->o_logits < 0) {
        rc = sn_errf(err, SNUG_ERR_UNSUPPORTED, "kvloop: the model has no 'logits' output");
        goto fail;
    }
    {
        const sn_tensor *lt = &g->values[g->outputs[l->o_logits]].info;
        l->info.vocab = lt->rank >= 1 && sn_dim_known(lt->dims[lt->rank - 1]) ? lt->dims[lt->rank - 1] : -1;
    }
    for (int k = 0; k < 2 * n_layers; k++) {
        if (l->i_past[k] < 0 || l->o_present[k] < 0) {
            rc = sn_errf(err, SNUG_ERR_UNSUPPORTED, "kvloop: layer %d has no %s.%d.%s %s", k / 2,
                         l->i_past[k] < 0 ? "past_key_values" : "present", k / 2, k % 2 ? "value" : "key",
                         l->i_past[k] < 0 ? "input" : "output");
            goto fail;
        }
    }
    /* A rotary table inside the attention op bounds the positions. */
    for (int i = 0; i < g->n_nodes; i++) {
        const sn_node *n = &g->nodes[i];
        if (strcmp(n->p->op_type, "GroupQueryAttention") || n->n_in <= 7 || n->in[7] < 0 ||
            !(g->values[n->in[7]].flags & SN_VAL_INIT))
            continue;
        const sn_tensor *cs = &g->values[n->in[7]].init->t;
        if (cs->rank == 2 && cs->dims[0] < max_ctx) {
            rc = sn_errf(err, SNUG_ERR_RANGE, "kvloop: a context of %lld tokens is longer than the model's %lld "
                         "positions (cos_cache of '%s')", (long long)max_ctx, (long long)cs->dims[0], n->p->name);
            goto fail;
        }
    }
    l->kv_esize = n_layers ? sn_dtype_size(l->kv_dtype) : 0;
    /* Padded steps need the mask to do the masking (see the top of the file). */
    l->bucket = l->i_mask >= 0 && l->i_pos >= 0 ? SN_KVLOOP_BUCKET : 1;
    for (int i = 0; i < g->n_nodes && l->bucket > 1; i++)
        if (strstr(g->nodes[i].p->op_type, "Attention") && strcmp(g->nodes[i].p->domain, ""))
            l->bucket = 1;
    l->info.bucket = l->bucket;
    int64_t cap = l->cap = (max_ctx + l->bucket - 1) / l->bucket * l->bucket; /* largest P */
    l->mask_cap = l->bucket > 1 ? cap + max_step : max_ctx; /* P + n, or past + n */
    if (n_slots > 1 && (!n_layers || l->i_mask < 0)) {
        rc = sn_errf(err, SNUG_ERR_UNSUPPORTED, "kvloop: %d sequences in one cache need an attention_mask input "
                     "(each row's length) and a KV cache; this model has %s", n_slots,
                     !n_layers ? "no past_key_values inputs" : "no attention_mask");
        goto fail;
    }
    size_t per = 0;
    if (n_layers && (!sn_mul_ok((size_t)l->info.kv_heads * (size_t)l->info.head_dim, (size_t)cap, &per) ||
                     !sn_mul_ok(per, l->kv_esize, &per))) {
        rc = sn_errf(err, SNUG_ERR_RANGE, "kvloop: KV cache for %lld tokens overflows", (long long)max_ctx);
        goto fail;
    }
    /* The KV cache is the executor's persistent state (zeroed: padded slots
     * are masked, but NaN garbage there would still poison the scores). With
     * exact shapes and an attention op that can write into its past buffer,
     * past and present share it and a step copies nothing. */
    l->shared = l->bucket == 1 && n_layers > 0;
    for (int k = 0; k < 2 * n_layers && l->shared; k++)
        l->shared = sn_exec_state_shareable(s->exec, l->i_past[k], l->o_present[k]);
    if (n_slots > 1 && !l->shared && l->bucket == 1) {
        rc = sn_errf(err, SNUG_ERR_UNSUPPORTED, "kvloop: %d sequences in one cache need either an attention op "
                     "that takes each sequence's length (GroupQueryAttention's seqlens_k) or keys masked by "
                     "attention_mask with position_ids (Optimum's exports); this model has neither", n_slots);
        goto fail;
    }
    l->slot_bytes = per;
    {
        char what[160];
        snprintf(what, sizeof what, "a KV cache of %d sequence%s x %lld tokens", n_slots, n_slots == 1 ? "" : "s",
                 (long long)max_ctx);
        size_t all = 0;
        if (!sn_mul_ok(per, 2 * (size_t)n_layers * (size_t)n_slots, &all)) {
            rc = sn_errf(err, SNUG_ERR_RANGE, "kvloop: %s overflows", what);
            goto fail;
        }
        if ((rc = sn_exec_check_resident(s->exec, all, what, err)) != SNUG_OK)
            goto fail;
    }
    for (int k = 0; k < 2 * n_layers; k++) {
        sn_tensor bound;
        set_tensor(&bound, l->kv_dtype, 4, (int64_t[]){n_slots, l->info.kv_heads, cap, l->info.head_dim}, NULL);
        if ((rc = sn_exec_add_state(s->exec, l->i_past[k], l->shared ? l->o_present[k] : -1, &bound, err)) !=
            SNUG_OK)
            goto fail;
        /* a cache not shared with present: the new rows move on the cache's device */
        if (!l->shared && (rc = sn_exec_keep_output(s->exec, l->o_present[k], err)) != SNUG_OK)
            goto fail;
    }
    l->info.kv_bytes = per * 2 * (size_t)n_layers * (size_t)n_slots;
    l->info.slots = n_slots;
    l->info.shared_kv = l->shared;
    l->info.has_position_ids = l->i_pos >= 0;
    if ((rc = plan_at_bounds(l, cap, err)) != SNUG_OK)
        goto fail;
    for (int k = 0; k < 2 * n_layers; k++) /* the plan may have moved a shared cache to an accelerator */
        l->kv[k] = sn_exec_state_data(s->exec, l->i_past[k]);
    l->ids = sn_malloc((size_t)(max_ctx > n_slots ? max_ctx : n_slots) * sizeof(int64_t));
    l->mask = sn_malloc((size_t)l->mask_cap * (size_t)n_slots * sizeof(int64_t));
    l->pos = sn_malloc((size_t)(max_ctx > n_slots ? max_ctx : n_slots) * sizeof(int64_t));
    if (!l->ids || !l->mask || !l->pos) {
        rc = sn_errf(err, SNUG_ERR_OOM, "out of memory");
        goto fail;
    }
    /* The heap's high-water mark so far: the allocator keeps most of what
     * planning freed (small blocks stay in its free lists), so the process
     * holds the peak, not what is live now. */
    l->heap_planned = snug_alloc_peak_bytes();
    const char *why = packed_why_not(l);
    if (!why) {
        l->pk_slot = sn_malloc((size_t)(n_slots + 1) * sizeof *l->pk_slot);
        l->pk_first = sn_malloc((size_t)(n_slots + 2) * sizeof *l->pk_first);
        l->pk_past = sn_malloc((size_t)(n_slots + 1) * sizeof *l->pk_past);
        if (!l->pk_slot || !l->pk_first || !l->pk_past) {
            rc = sn_errf(err, SNUG_ERR_OOM, "out of memory");
            goto fail;
        }
    } else if (n_slots > 1) {
        sn_log(&s->log, SNUG_LOG_INFO, "kvloop: a prompt chunk runs apart from the decode rows (%s)", why);
    }
    *out = l;
    return SNUG_OK;
fail:
    sn_kvloop_free(l);
    return rc;
}

void sn_kvloop_free(sn_kvloop *l) {
    if (!l)
        return;
    sn_free(l->kv);
    sn_free(l->i_past);
    sn_free(l->o_present);
    sn_free(l->in);
    sn_free(l->out);
    sn_free(l->ids);
    sn_free(l->mask);
    sn_free(l->pos);
    sn_free(l->slot_past);
    sn_free(l->pk_slot);
    sn_free(l->pk_first);
    sn_free(l->pk_past);
    sn_free(l);
}

/* Several slots in padded buffers: [slots, kv_heads, P, head_dim], one P for all (slots_step). */
static bool padded_slots(const sn_kvloop *l) { return l->n_slots > 1 && !l->shared; }

void sn_kvloop_reset(sn_kvloop *l) {
    l->past = l->slot_past[0] = 0;
    if (!padded_slots(l)) /* the others' rows stay at their stride */
        l->pad = 0;
}

static int kv_restride(sn_kvloop *l, int k, int64_t n, int64_t from, int64_t to, sn_err *err);

int sn_kvloop_rewind(sn_kvloop *l, int64_t pos, sn_err *err) {
    if (pos < 0 || pos > l->past)
        return sn_errf(err, SNUG_ERR_RANGE, "kvloop: cannot rewind to position %lld of %lld cached", (long long)pos,
                       (long long)l->past);
    if (padded_slots(l)) { /* the stride is every slot's: the rows beyond pos are masked from now on */
        l->past = l->slot_past[0] = pos;
        return SNUG_OK;
    }
    int64_t P2 = (pos + l->bucket - 1) / l->bucket * l->bucket;
    for (int k = 0; k < 2 * l->info.n_layers && !l->shared; k++) /* the kept rows at the new stride */
        if (P2 != l->pad)
            SN_TRY(kv_restride(l, k, pos, l->pad, P2, err));
    l->past = l->slot_past[0] = pos;
    l->pad = P2;
    return SNUG_OK;
}
int64_t sn_kvloop_pos(const sn_kvloop *l) { return l->past; }
const sn_kvloop_info *sn_kvloop_get_info(const sn_kvloop *l) { return &l->info; }

/* Moves every head's rows [0, n) of buffer k from row stride `from` to
 * `to`, on the buffer's device (sn_exec_state_move). */
static int kv_restride(sn_kvloop *l, int k, int64_t n, int64_t from, int64_t to, sn_err *err) {
    size_t row = (size_t)l->info.head_dim * l->kv_esize;
    sn_exec *ex = l->s->exec;
    if (to > from) /* heads move up: last head first */
        for (int64_t h = l->info.kv_heads - 1; h > 0; h--)
            SN_TRY(sn_exec_state_move(ex, l->i_past[k], (size_t)(h * to) * row, (size_t)(h * from) * row,
                                      (size_t)n * row, err));
    else
        for (int64_t h = 1; h < l->info.kv_heads; h++)
            SN_TRY(sn_exec_state_move(ex, l->i_past[k], (size_t)(h * to) * row, (size_t)(h * from) * row,
                                      (size_t)n * row, err));
    return SNUG_OK;
}

/* Windows the KV buffers to slot `slot` (-1: the whole buffers, batch rows
 * from slot 0 on). */
static int set_window_at(sn_kvloop *l, size_t off, sn_err *err) {
    if (off == l->win_off)
        return SNUG_OK;
    for (int k = 0; k < 2 * l->info.n_layers; k++)
        SN_TRY(sn_exec_state_window(l->s->exec, l->i_past[k], off, err));
    l->win_off = off;
    return SNUG_OK;
}

static int set_window(sn_kvloop *l, int slot, sn_err *err) {
    return set_window_at(l, slot > 0 ? (size_t)slot * l->slot_bytes : 0, err);
}

/* Runs the inputs bound in l->in (B rows of n tokens; present expected
 * [B, kv_heads, plen, head_dim]) and checks the outputs: logits of `rows`
 * positions in all. past..past+n-1 name the positions in errors. */
static int run_step(sn_kvloop *l, int64_t B, int64_t rows, int64_t plen, int64_t past, int64_t n, sn_err *err) {
    const sn_graph *g = l->s->graph;
    int rc = l->per_step ? sn_exec_replan_for(l->s->exec, l->in, SN_REPLAN_AUTO, err) : SNUG_OK;
    if (rc == SNUG_OK)
        rc = sn_exec_run(l->s->exec, l->in, l->out, err);
    if (rc == SNUG_ERR_RANGE) { /* most often a position table (rotary cache) shorter than the context */
        char m[sizeof err->msg];
        snprintf(m, sizeof m, "%s", err->msg);
        return sn_errf(err, rc, "%s (step at positions %lld..%lld: is the context longer than the model supports?)",
                       m, (long long)past, (long long)(past + n - 1));
    }
    if (rc != SNUG_OK)
        return rc;
    const sn_tensor *lt = &l->out[l->o_logits];
    int64_t numel = sn_tensor_numel(lt);
    int64_t vocab = lt->rank >= 1 ? lt->dims[lt->rank - 1] : 0;
    if (lt->kind != SN_KIND_TENSOR || lt->dtype != SN_F32 || vocab < 1 || numel != rows * vocab) {
        char b[128];
        return sn_errf(err, SNUG_ERR_UNSUPPORTED, "kvloop: logits are %s %s, expected float32 [%lld, %lld, vocab]",
                       sn_dtype_name(lt->dtype), sn_shape_str(lt, b, sizeof b), (long long)B, (long long)(rows / B));
    }
    for (int k = 0; k < 2 * l->info.n_layers; k++) {
        const sn_tensor *p = &l->out[l->o_present[k]];
        if (p->kind != SN_KIND_TENSOR || p->dtype != l->kv_dtype || p->rank != 4 || p->dims[0] != B ||
            p->dims[1] != l->info.kv_heads || p->dims[2] != plen || p->dims[3] != l->info.head_dim) {
            char b[128];
            return sn_errf(err, SNUG_ERR_SHAPE, "kvloop: output '%s' is %s %s, expected [%lld, %lld, %lld, %lld]",
                           g->values[g->outputs[l->o_present[k]]].name, sn_dtype_name(p->dtype),
                           sn_shape_str(p, b, sizeof b), (long long)B, (long long)l->info.kv_heads,
                           (long long)plen, (long long)l->info.head_dim);
        }
    }
    l->info.vocab = vocab;
    return SNUG_OK;
}

static int slots_step(sn_kvloop *l, int n, const int *slots, const int64_t *ids, int64_t S, const float **logits,
                      sn_err *err);

static int kvloop_step(sn_kvloop *l, int slot, const int64_t *ids, int64_t n, const float **logits, sn_err *err) {
    if (n < 1)
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "kvloop: a step needs at least one token");
    if (padded_slots(l)) {
        if (n > l->info.max_ctx - l->slot_past[slot])
            return sn_errf(err, SNUG_ERR_RANGE, "kvloop: %lld + %lld tokens exceed the context of %lld",
                           (long long)l->slot_past[slot], (long long)n, (long long)l->info.max_ctx);
        if (n > l->max_step)
            return sn_errf(err, SNUG_ERR_RANGE, "kvloop: a step of %lld tokens is longer than the %lld planned for",
                           (long long)n, (long long)l->max_step);
        return slots_step(l, 1, &slot, ids, n, logits, err);
    }
    int64_t past = l->slot_past[slot];
    if (n > l->info.max_ctx - past)
        return sn_errf(err, SNUG_ERR_RANGE, "kvloop: %lld + %lld tokens exceed the context of %lld", (long long)past,
                       (long long)n, (long long)l->info.max_ctx);
    if (n > l->max_step)
        return sn_errf(err, SNUG_ERR_RANGE, "kvloop: a step of %lld tokens is longer than the %lld planned for",
                       (long long)n, (long long)l->max_step);
    SN_TRY(set_window(l, slot, err));
    int64_t P = slot ? past : l->pad, total = past + n;
    for (int64_t i = 0; i < n; i++) {
        store_index(l->ids_dtype, l->ids, i, ids[i]);
        if (l->i_pos >= 0)
            store_index(l->pos_dtype, l->pos, i, past + i);
    }
    set_tensor(&l->in[l->i_ids], l->ids_dtype, 2, (int64_t[]){1, n}, l->ids);
    if (l->i_mask >= 0) { /* ones for the cached tokens, zeros for the padding, ones for the new ones */
        for (int64_t i = 0; i < P + n; i++)
            store_index(l->mask_dtype, l->mask, i, i < past || i >= P);
        set_tensor(&l->in[l->i_mask], l->mask_dtype, 2, (int64_t[]){1, P + n}, l->mask);
    }
    if (l->i_pos >= 0)
        set_tensor(&l->in[l->i_pos], l->pos_dtype, 2, (int64_t[]){1, n}, l->pos);
    int64_t cap = l->cap;
    int64_t kvdims[4] = {1, l->info.kv_heads, l->shared ? cap : P, l->info.head_dim};
    for (int k = 0; k < 2 * l->info.n_layers; k++)
        set_tensor(&l->in[l->i_past[k]], l->kv_dtype, 4, kvdims, l->kv[k]);
    SN_TRY(run_step(l, 1, l->info.last_logits ? 1 : n, l->shared ? cap : P + n, past, n, err));
    /* The next step's padded length, and the new rows into their slots. */
    int64_t P2 = (total + l->bucket - 1) / l->bucket * l->bucket;
    size_t row = (size_t)l->info.head_dim * l->kv_esize;
    sn_exec *ex = l->s->exec;
    for (int k = 0; k < 2 * l->info.n_layers && !l->shared; k++) { /* on the cache's device */
        if (l->bucket == 1) { /* exact: present [1, kv_heads, total, head_dim] is the next past */
            SN_TRY(sn_exec_output_to_state(ex, l->o_present[k], 0, l->i_past[k], 0,
                                           row * (size_t)(l->info.kv_heads * total), err));
            continue;
        }
        if (P2 != P)
            SN_TRY(kv_restride(l, k, past, P, P2, err));
        for (int64_t h = 0; h < l->info.kv_heads; h++)
            SN_TRY(sn_exec_output_to_state(ex, l->o_present[k], (size_t)(h * (P + n) + P) * row, l->i_past[k],
                                           (size_t)(h * P2 + past) * row, (size_t)n * row, err));
    }
    l->slot_past[slot] = total;
    if (!slot) {
        l->past = total;
        l->pad = P2;
    }
    if (logits)
        *logits = l->out[l->o_logits].data;
    return SNUG_OK;
}

int sn_kvloop_prefill(sn_kvloop *l, const int64_t *ids, int64_t n, const float **logits, sn_err *err) {
    return kvloop_step(l, 0, ids, n, logits, err);
}

int sn_kvloop_decode(sn_kvloop *l, int64_t id, const float **logits, sn_err *err) {
    return kvloop_step(l, 0, &id, 1, logits, err);
}

static int check_slot(const sn_kvloop *l, int slot, sn_err *err) {
    if (slot < 0 || slot >= l->n_slots)
        return sn_errf(err, SNUG_ERR_RANGE, "kvloop: slot %d: not within 0..%d", slot, l->n_slots - 1);
    return SNUG_OK;
}

int sn_kvloop_slot_prefill(sn_kvloop *l, int slot, const int64_t *ids, int64_t n, const float **logits, sn_err *err) {
    SN_TRY(check_slot(l, slot, err));
    return kvloop_step(l, slot, ids, n, logits, err);
}

/* One decode step of several slots in one run: rows 0..B-1 are slots
 * 0..B-1, B one past the highest slot given. A row whose slot is not given
 * runs a stand-in token at its next position (GroupQueryAttention writes it
 * there, past what the slot holds: its cache is untouched); a full slot
 * that is not given loses its last token to it. */
int sn_kvloop_decode_slots(sn_kvloop *l, int n, const int *slots, const int64_t *ids, const float **logits,
                           sn_err *err) {
    if (n < 1)
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "kvloop: a decode step needs at least one slot");
    if (l->n_slots == 1) {
        SN_TRY(check_slot(l, slots[0], err));
        return kvloop_step(l, 0, ids, 1, logits, err);
    }
    int B = 0;
    for (int k = 0; k < n; k++) {
        SN_TRY(check_slot(l, slots[k], err));
        if (l->slot_past[slots[k]] >= l->info.max_ctx)
            return sn_errf(err, SNUG_ERR_RANGE, "kvloop: slot %d holds %lld tokens, the whole context", slots[k],
                           (long long)l->info.max_ctx);
        for (int j = 0; j < k; j++)
            if (slots[j] == slots[k])
                return sn_errf(err, SNUG_ERR_INVALID_ARG, "kvloop: slot %d given twice in one step", slots[k]);
        if (slots[k] + 1 > B)
            B = slots[k] + 1;
    }
    if (padded_slots(l))
        return slots_step(l, n, slots, ids, 1, logits, err);
    int64_t W = 0; /* the mask's width: the longest row */
    for (int r = 0; r < B; r++) {
        store_index(l->ids_dtype, l->ids, r, 0);
        if (l->slot_past[r] >= l->info.max_ctx)
            l->slot_past[r] = l->info.max_ctx - 1; /* an idle full slot: its last row takes the stand-in */
        if (l->slot_past[r] + 1 > W)
            W = l->slot_past[r] + 1;
    }
    for (int k = 0; k < n; k++)
        store_index(l->ids_dtype, l->ids, slots[k], ids[k]);
    for (int r = 0; r < B; r++) {
        for (int64_t i = 0; i < W; i++)
            store_index(l->mask_dtype, l->mask, (int64_t)r * W + i, i <= l->slot_past[r]);
        if (l->i_pos >= 0)
            store_index(l->pos_dtype, l->pos, r, l->slot_past[r]);
    }
    SN_TRY(set_window(l, -1, err));
    if (l->i_pos >= 0)
        set_tensor(&l->in[l->i_pos], l->pos_dtype, 2, (int64_t[]){B, 1}, l->pos);
    set_tensor(&l->in[l->i_ids], l->ids_dtype, 2, (int64_t[]){B, 1}, l->ids);
    set_tensor(&l->in[l->i_mask], l->mask_dtype, 2, (int64_t[]){B, W}, l->mask);
    int64_t kvdims[4] = {B, l->info.kv_heads, l->cap, l->info.head_dim};
    for (int k = 0; k < 2 * l->info.n_layers; k++)
        set_tensor(&l->in[l->i_past[k]], l->kv_dtype, 4, kvdims, l->kv[k]);
    SN_TRY(run_step(l, B, B, l->cap, 0, W, err));
    for (int k = 0; k < n; k++)
        l->slot_past[slots[k]]++;
    l->past = l->slot_past[0];
    l->pad = l->past;
    if (logits)
        *logits = l->out[l->o_logits].data;
    return SNUG_OK;
}

/* Padded slots (Optimum's exports: keys masked by attention_mask, present
 * = past ++ new). The buffers hold [slots, kv_heads, P, head_dim] with one
 * P, a multiple of the bucket, for all slots: slot s's rows at stride P from
 * s x kv_heads x P rows on. A step feeds rows 0..B-1 at that P: each row's
 * mask is ones over its slot's tokens, zeros over the padding, ones over
 * its new tokens; position_ids go on from its length. The new rows come out
 * of present (after the P padded ones) into their slots. Moves every slot's
 * rows to a new P when the longest sequence crosses a bucket (both ways). */
static int slots_restride(sn_kvloop *l, int64_t P2, sn_err *err) {
    int64_t P = l->pad, H = l->info.kv_heads;
    if (P2 == P)
        return SNUG_OK;
    size_t row = (size_t)l->info.head_dim * l->kv_esize;
    sn_exec *ex = l->s->exec;
    for (int k = 0; k < 2 * l->info.n_layers; k++) {
        int in = l->i_past[k];
        if (P2 > P) /* up: from the last slot's last head down */
            for (int64_t sh = (int64_t)l->n_slots * H - 1; sh >= 0; sh--)
                SN_TRY(sn_exec_state_move(ex, in, (size_t)(sh * P2) * row, (size_t)(sh * P) * row,
                                          (size_t)sn_imin(l->slot_past[sh / H], P) * row, err));
        else
            for (int64_t sh = 1; sh < (int64_t)l->n_slots * H; sh++)
                SN_TRY(sn_exec_state_move(ex, in, (size_t)(sh * P2) * row, (size_t)(sh * P) * row,
                                          (size_t)sn_imin(l->slot_past[sh / H], P2) * row, err));
    }
    l->pad = P2;
    return SNUG_OK;
}

/* One step of n slots (slots[k] fed S ids from ids + k S): a prompt chunk of
 * one slot (S tokens, batch 1, the buffers windowed to it), or a decode
 * step (S = 1) of rows 0..B-1. */
static int slots_step(sn_kvloop *l, int n, const int *slots, const int64_t *ids, int64_t S, const float **logits,
                      sn_err *err) {
    int B = n == 1 && S > 1 ? 1 : 0;
    int64_t need = 0;
    for (int s = 0; s < l->n_slots; s++)
        need = sn_imax(need, l->slot_past[s]);
    for (int k = 0; k < n; k++) {
        need = sn_imax(need, l->slot_past[slots[k]] + S);
        if (S == 1)
            B = sn_imax(B, slots[k] + 1);
    }
    int64_t P = (need + l->bucket - 1) / l->bucket * l->bucket;
    if (P > l->cap)
        return sn_errf(err, SNUG_ERR_RANGE, "kvloop: %lld tokens do not fit the cache of %lld", (long long)need,
                       (long long)l->cap);
    SN_TRY(slots_restride(l, P, err));
    bool chunk = S > 1; /* one slot's prompt alone, windowed (a one-token chunk runs as a decode step) */
    int first = chunk ? slots[0] : 0;
    int rows = chunk ? 1 : B;
    for (int r = 0; r < rows; r++) { /* stand-ins: token 0 at the slot's next position, nothing kept */
        int s = first + r;
        for (int64_t i = 0; i < S; i++) {
            store_index(l->ids_dtype, l->ids, r * S + i, 0);
            store_index(l->pos_dtype, l->pos, r * S + i, l->slot_past[s] + i);
        }
        for (int64_t i = 0; i < P + S; i++)
            store_index(l->mask_dtype, l->mask, r * (P + S) + i, i < l->slot_past[s] || i >= P);
    }
    for (int k = 0; k < n; k++)
        for (int64_t i = 0; i < S; i++)
            store_index(l->ids_dtype, l->ids, (slots[k] - first) * S + i, ids[k * S + i]);
    /* a chunk's slot from its rows on, at the stride P */
    SN_TRY(set_window_at(l, (size_t)first * (size_t)(l->info.kv_heads * P * l->info.head_dim) * l->kv_esize, err));
    set_tensor(&l->in[l->i_ids], l->ids_dtype, 2, (int64_t[]){rows, S}, l->ids);
    set_tensor(&l->in[l->i_mask], l->mask_dtype, 2, (int64_t[]){rows, P + S}, l->mask);
    set_tensor(&l->in[l->i_pos], l->pos_dtype, 2, (int64_t[]){rows, S}, l->pos);
    int64_t kvdims[4] = {rows, l->info.kv_heads, P, l->info.head_dim};
    for (int k = 0; k < 2 * l->info.n_layers; k++)
        set_tensor(&l->in[l->i_past[k]], l->kv_dtype, 4, kvdims, l->kv[k]);
    int64_t at = l->slot_past[slots[0]];
    SN_TRY(run_step(l, rows, l->info.last_logits ? rows : rows * S, P + S, at, S, err));
    size_t row = (size_t)l->info.head_dim * l->kv_esize;
    int64_t H = l->info.kv_heads;
    for (int k = 0; k < 2 * l->info.n_layers; k++) {
        for (int j = 0; j < n; j++) {
            int s = slots[j], r = s - first;
            for (int64_t h = 0; h < H; h++)
                SN_TRY(sn_exec_output_to_state(l->s->exec, l->o_present[k], (size_t)((r * H + h) * (P + S) + P) * row,
                                               l->i_past[k], (size_t)((s * H + h) * P + l->slot_past[s]) * row,
                                               (size_t)S * row, err));
        }
    }
    for (int j = 0; j < n; j++)
        l->slot_past[slots[j]] += S;
    l->past = l->slot_past[0];
    if (logits)
        *logits = l->out[l->o_logits].data;
    return SNUG_OK;
}

void sn_kvloop_slot_reset(sn_kvloop *l, int slot) {
    if (slot == 0)
        sn_kvloop_reset(l);
    else if (slot > 0 && slot < l->n_slots)
        l->slot_past[slot] = 0;
}

int sn_kvloop_slot_rewind(sn_kvloop *l, int slot, int64_t pos, sn_err *err) {
    SN_TRY(check_slot(l, slot, err));
    if (slot == 0)
        return sn_kvloop_rewind(l, pos, err);
    if (pos < 0 || pos > l->slot_past[slot])
        return sn_errf(err, SNUG_ERR_RANGE, "kvloop: cannot rewind slot %d to position %lld of %lld cached", slot,
                       (long long)pos, (long long)l->slot_past[slot]);
    l->slot_past[slot] = pos; /* nothing moves: rows beyond pos are overwritten or masked */
    return SNUG_OK;
}

/* Rows [from, to) of every layer's keys and values, each head's, from slot
 * src into slot dst (whose cache holds exactly `from`): shared buffers keep
 * a slot's heads at stride cap, padded ones at the one stride P of all
 * slots, which already covers src's rows. */
int sn_kvloop_slot_copy(sn_kvloop *l, int dst, int src, int64_t from, int64_t to, sn_err *err) {
    SN_TRY(check_slot(l, dst, err));
    SN_TRY(check_slot(l, src, err));
    if (dst == src || from < 0 || from > to || l->slot_past[dst] != from || to > l->slot_past[src])
        return sn_errf(err, SNUG_ERR_RANGE, "kvloop: cannot copy rows %lld..%lld of slot %d (%lld cached) after "
                       "the %lld of slot %d", (long long)from, (long long)to, src, (long long)l->slot_past[src],
                       (long long)l->slot_past[dst], dst);
    if (to == from)
        return SNUG_OK;
    int64_t H = l->info.kv_heads, stride = l->shared ? l->cap : l->pad;
    size_t row = (size_t)l->info.head_dim * l->kv_esize;
    for (int k = 0; k < 2 * l->info.n_layers; k++)
        for (int64_t h = 0; h < H; h++)
            SN_TRY(sn_exec_state_move(l->s->exec, l->i_past[k], (size_t)((dst * H + h) * stride + from) * row,
                                      (size_t)((src * H + h) * stride + from) * row, (size_t)(to - from) * row,
                                      err));
    l->slot_past[dst] = to;
    l->past = l->slot_past[0];
    if (dst == 0 && !padded_slots(l)) /* slot 0's steps take their past length from pad */
        l->pad = to;
    return SNUG_OK;
}

int64_t sn_kvloop_slot_pos(const sn_kvloop *l, int slot) {
    return slot >= 0 && slot < l->n_slots ? l->slot_past[slot] : -1;
}

static int cmp_range(const void *a, const void *b) {
    const uintptr_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* The union of the aligned w-byte windows covering ranges r[0..nr) (sorted here). */
static uint64_t fault_windows(uintptr_t (*r)[2], int nr, uintptr_t w) {
    for (int k = 0; k < nr; k++) {
        r[k][0] = r[k][0] / w * w;
        r[k][1] = (r[k][1] + w - 1) / w * w;
    }
    qsort(r, (size_t)nr, sizeof *r, cmp_range);
    uint64_t total = 0;
    uintptr_t end = 0;
    for (int k = 0; k < nr; k++) {
        uintptr_t b = r[k][0] > end ? r[k][0] : end;
        if (r[k][1] > b)
            total += r[k][1] - b;
        end = r[k][1] > end ? r[k][1] : end;
    }
    return total;
}

/* The weights a plan holds resident, given gone[v] (1: no run reads constant
 * v, its pages released). Mapped weights a kernel reads whole: a read fault
 * maps the aligned fault-around window around it, so the resident set is the
 * union of the windows covering those tensors (the neighbours' bytes in them
 * included). Gathered-only tables: a row per token, one window each, at most
 * the table. owned: weights in memory of the library's own, which an
 * estimate counts here (copies of misaligned weights; under
 * snug.weights=load every weight read whole, nothing of the files mapped,
 * gathered rows read into the arena). */
static void weights_figures(const sn_kvloop *l, const uint8_t *gone, uint64_t *mapped, uint64_t *gathered,
                            uint64_t *owned) {
    const sn_graph *g = l->s->graph;
    const uintptr_t W = SN_FAULT_AROUND;
    bool load = sn_exec_weights_load(l->s->exec);
    *mapped = *gathered = *owned = 0;
    uintptr_t(*r)[2] = load ? NULL : sn_malloc(sizeof *r * ((size_t)g->n_values + 1));
    int nr = 0;
    for (int v = 0; v < g->n_values; v++) {
        const sn_value *val = &g->values[v];
        if (!(val->flags & SN_VAL_INIT) || !val->n_cons || sn_exec_value_streamed(l->s->exec, v))
            continue;
        const sn_tensor *t = &val->init->t;
        uint64_t bytes = sn_tensor_nbytes(t);
        if (!t->data || !bytes || !sn_model_maps(g->model, t->data, bytes))
            continue;
        if (sn_value_gathered_only(g, v)) {
            if (load)
                continue;
            uint64_t rows = t->rank >= 1 && t->dims[0] > 0 ? (uint64_t)t->dims[0] : 1;
            uint64_t per = (bytes / rows + W - 1) / W * W;
            uint64_t touched = (uint64_t)l->info.max_ctx * per;
            *gathered += touched < bytes ? touched : bytes;
        } else if (gone[v]) {
            continue;
        } else if (load || sn_init_misaligned(val->init)) {
            *owned += bytes >= ((uint64_t)4 << 10) ? sn_pages_size(bytes) : bytes;
        } else if (r) {
            r[nr][0] = (uintptr_t)t->data;
            r[nr][1] = (uintptr_t)t->data + bytes;
            nr++;
        }
    }
    if (r) {
        *mapped = fault_windows(r, nr, W);
        sn_free(r);
    }
}

void sn_kvloop_memory(const sn_kvloop *l, sn_kvloop_mem *m) {
    const sn_graph *g = l->s->graph;
    const sn_exec_stats *xs = sn_exec_get_stats(l->s->exec);
    memset(m, 0, sizeof *m);
    uint8_t *gone = sn_calloc((size_t)g->n_values + 1, 1);
    if (gone) {
        uint64_t owned;
        for (int v = 0; v < g->n_values; v++)
            gone[v] = sn_exec_value_released(l->s->exec, v) ||
                      ((g->values[v].flags & SN_VAL_INIT) && g->values[v].init && sn_init_misaligned(g->values[v].init));
        weights_figures(l, gone, &m->weights_read, &m->weights_gathered, &owned);
        sn_free(gone);
    }
    m->weights_copied = xs->copied_init_bytes;
    m->arena = xs->arena_bytes;
    m->lower_bound = xs->lower_bound;
    m->kv = xs->persistent_bytes;
    m->folded = xs->folded_bytes;
    m->driver = driver_bytes(l);
    m->packed = xs->kernel_state_bytes;
    m->staging = sn_exec_stream_plan(l->s->exec)->staging_bytes;
    uint64_t listed = m->weights_copied + m->packed + m->staging + m->arena + m->kv + m->folded + m->driver;
    m->other_heap = l->heap_planned > 0 && (uint64_t)l->heap_planned > listed ? (uint64_t)l->heap_planned - listed : 0;
    m->total = m->weights_read + m->weights_gathered + listed + m->other_heap;
}

bool sn_kvloop_estimate(const sn_kvloop *l, sn_kvloop_mem *m) {
    *m = l->est;
    return l->has_est;
}

/* Ops whose rows are computed each on its own (or that read only shapes
 * and the mask, as onnxruntime-genai's seqlens_k subgraph does): with
 * GroupQueryAttention, the only op of a packed step that mixes rows, and
 * only as its packed form does, a graph of these (and of nodes that read
 * only weights, such as the builder's Reshape of a tied embedding) may pack
 * the new tokens of several sequences into one run's rows. */
static const char *const k_row_ops[] = {
    "GroupQueryAttention", "MatMulNBits", "MatMul", "SkipSimplifiedLayerNormalization",
    "SimplifiedLayerNormalization", "SkipLayerNormalization", "LayerNormalization", "Mul", "Add",
    "Sigmoid", "Gather", "GatherBlockQuantized", "ReduceSum", "Sub", "Cast", "Shape", "Constant", NULL};

/* Why the loop cannot pack steps (sn_kvloop_step_packed), or NULL. */
static const char *packed_why_not(const sn_kvloop *l) {
    const sn_graph *g = l->s->graph;
    if (l->n_slots < 2 || !l->shared || l->per_step || !l->info.last_logits || l->kv_dtype != SN_F32)
        return "needs several slots of one float32 cache shared by past and present, a plan at the bounds and "
               "snug.last_logits";
    if (sn_exec_device_count(l->s->exec) > 1)
        return "an accelerator takes part";
    for (int k = 0; k < 2 * l->info.n_layers; k++)
        if (sn_exec_state_device(l->s->exec, l->i_past[k]) != 0)
            return "the cache is not on the host";
    int gqa = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const sn_node *n = &g->nodes[i];
        bool row = true; /* weights only */
        for (int k = 0; k < n->n_in && row; k++)
            row = n->in[k] < 0 || (g->values[n->in[k]].flags & SN_VAL_INIT);
        for (int k = 0; k_row_ops[k] && !row; k++)
            row = !strcmp(n->p->op_type, k_row_ops[k]);
        if (!row)
            return "an op that may mix the rows";
        if (!strcmp(n->p->op_type, "MatMulNBits") && !llm_mnb_rows_invariant(g, n))
            return "a MatMulNBits whose rows' bits depend on how many rows a run has (not 4 bits at "
                   "accuracy_level 4 on AVX-512 VNNI)";
        if (strcmp(n->p->op_type, "GroupQueryAttention"))
            continue;
        gqa++;
        for (int k = 9; k < n->n_in; k++) /* position_ids, attention_bias, head_sink, ... */
            if (n->in[k] >= 0)
                return "GroupQueryAttention with position_ids, an attention bias or more";
        if (n->n_in < 5 || n->in[3] < 0 || n->n_out < 3 || n->out[1] < 0 || n->out[2] < 0)
            return "GroupQueryAttention without past and present";
    }
    return gqa == l->info.n_layers ? NULL : "not one GroupQueryAttention a layer";
}

bool sn_kvloop_can_pack(const sn_kvloop *l) { return l->pk_slot != NULL; }

/* Rows [0, chunk_n) are the chunk of chunk_slot (its prompt rows), then
 * slots[k]'s next token ids[k], a decode row each: the rows whose logits
 * are read (the chunk's last, the decode rows) are the run's last n + 1. */
int sn_kvloop_step_packed(sn_kvloop *l, int n, const int *slots, const int64_t *ids, int chunk_slot,
                          const int64_t *chunk_ids, int64_t chunk_n, const float **logits, sn_err *err) {
    if (!l->pk_slot)
        return sn_errf(err, SNUG_ERR_UNSUPPORTED, "kvloop: this model's steps cannot be packed");
    int64_t T = n + chunk_n;
    if (n < 0 || chunk_n < 0 || T < 1 || T > l->max_step || (chunk_n > 0 && chunk_slot < 0))
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "kvloop: a packed step of %d decode rows and a chunk of %lld "
                       "tokens: 1..%lld rows in all", n, (long long)chunk_n, (long long)l->max_step);
    int ns = 0;
    int64_t row = 0;
    for (int k = chunk_n ? -1 : 0; k < n; k++) { /* k = -1: the chunk */
        int s = k < 0 ? chunk_slot : slots[k];
        int64_t len = k < 0 ? chunk_n : 1;
        SN_TRY(check_slot(l, s, err));
        for (int j = 0; j < ns; j++)
            if (l->pk_slot[j] == s)
                return sn_errf(err, SNUG_ERR_INVALID_ARG, "kvloop: slot %d given twice in one step", s);
        if (l->slot_past[s] + len > l->info.max_ctx)
            return sn_errf(err, SNUG_ERR_RANGE, "kvloop: slot %d: %lld + %lld tokens exceed the context of %lld", s,
                           (long long)l->slot_past[s], (long long)len, (long long)l->info.max_ctx);
        l->pk_slot[ns] = s;
        l->pk_past[ns] = l->slot_past[s];
        l->pk_first[ns++] = row;
        row += len;
    }
    l->pk_first[ns] = T;
    for (int64_t i = 0; i < chunk_n; i++)
        store_index(l->ids_dtype, l->ids, i, chunk_ids[i]);
    for (int k = 0; k < n; k++)
        store_index(l->ids_dtype, l->ids, chunk_n + k, ids[k]);
    /* the mask only feeds seqlens_k, which the packed attention does not read: the whole cache's width */
    int64_t W = l->cap;
    for (int64_t i = 0; i < W; i++)
        store_index(l->mask_dtype, l->mask, i, 1);
    SN_TRY(set_window(l, -1, err));
    set_tensor(&l->in[l->i_ids], l->ids_dtype, 2, (int64_t[]){1, T}, l->ids);
    set_tensor(&l->in[l->i_mask], l->mask_dtype, 2, (int64_t[]){1, W}, l->mask);
    int64_t kvdims[4] = {1, l->info.kv_heads, l->cap, l->info.head_dim};
    for (int k = 0; k < 2 * l->info.n_layers; k++)
        set_tensor(&l->in[l->i_past[k]], l->kv_dtype, 4, kvdims, l->kv[k]);
    sn_packed p = {.n_seq = ns, .slot = l->pk_slot, .first = l->pk_first, .past = l->pk_past, .n_slots = l->n_slots,
                   .cap = l->cap};
    int64_t rows = n + (chunk_n > 0); /* the decode rows' logits and the chunk's last */
    sn_exec_set_packed(l->s->exec, &p);
    sn_exec_set_last_rows(l->s->exec, rows);
    int rc = run_step(l, 1, rows, l->cap, l->slot_past[ns ? l->pk_slot[0] : 0], T, err);
    sn_exec_set_packed(l->s->exec, NULL);
    sn_exec_set_last_rows(l->s->exec, 1);
    SN_TRY(rc);
    for (int k = 0; k < n; k++)
        l->slot_past[slots[k]]++;
    if (chunk_n)
        l->slot_past[chunk_slot] += chunk_n;
    l->past = l->slot_past[0];
    l->pad = l->past;
    if (logits)
        *logits = l->out[l->o_logits].data;
    return SNUG_OK;
}
