/* The LLM step driver: prefill a prompt, then decode one token at a time,
 * carrying the model's present.N.key/value outputs into the next step's
 * past_key_values.N.key/value inputs.
 *
 * It drives the two export conventions by input name:
 *   optimum: input_ids, attention_mask, position_ids (optional),
 *            past_key_values.N.key/value [1, kv_heads, past, head_dim]
 *            -> logits [1, S, vocab], present.N.key/value [1, kv_heads, past+S, head_dim]
 *   genai:   the same names without position_ids; the mask width drives GQA.
 * Batch 1; the attention mask is all ones.
 *
 * The KV cache is the executor's persistent state (sn_exec_add_state),
 * sized for max_ctx tokens. When the attention op can write into its past
 * buffer (GroupQueryAttention), past and present are that one buffer and a
 * step copies nothing. Otherwise, where the mask allows it, the past is fed
 * padded to a multiple of 32 tokens (masked) and a step copies only its new
 * rows out of present (kvloop.c says why this is exact); failing both, each
 * step copies all of present. */
#ifndef SN_GENAI_KVLOOP_H
#define SN_GENAI_KVLOOP_H

#include "exec/session.h"

typedef struct sn_kvloop sn_kvloop;

/* What the driver found in the model. */
typedef struct sn_kvloop_info {
    int n_layers;         /* past_key_values.N pairs */
    int64_t kv_heads;     /* dim 1 of the past inputs */
    int64_t head_dim;     /* dim 3 of the past inputs */
    int64_t vocab;        /* last dim of logits (known after the first step if symbolic) */
    int64_t max_ctx;
    bool has_position_ids;
    int64_t bucket;       /* the past is padded to a multiple of this; 1: exact shapes */
    size_t kv_bytes;      /* bytes of the KV cache (the executor's persistent state) */
    bool shared_kv;       /* present is computed into the past buffers: no copy per step */
    bool last_logits;     /* the session computes the last position's logits only (snug.last_logits):
                           * a step's *logits is [1, vocab] */
    int slots;            /* sequences the cache holds (sn_kvloop_new_slots) */
} sn_kvloop_info;

/* The most sequences one cache holds. */
#define SN_KVLOOP_MAX_SLOTS 256

/* s is borrowed and must outlive the loop; the loop runs s->exec. Fails with
 * a message naming the input when the model is not an LLM of a known
 * convention (missing input_ids or logits, an unknown input, a past input
 * without a matching present output, KV dims that are not concrete). */
int sn_kvloop_new(sn_session *s, int64_t max_ctx, sn_kvloop **out, sn_err *err);
/* The same, planned for steps of at most max_step tokens (a prompt goes in
 * chunks of it), so the activation arena is sized for the chunk and not for
 * the whole context. A longer step is an error. */
int sn_kvloop_new_chunked(sn_session *s, int64_t max_ctx, int64_t max_step, sn_kvloop **out, sn_err *err);
/* The same for n_slots sequences in one cache, each with its own max_ctx
 * tokens, so that one decode step advances all of them in one model run
 * (batch rows; every weight read once for all): planned at the bounds of a
 * decode step of n_slots rows and of a prompt chunk of max_step tokens on
 * one slot. The activation arena is sized for n_slots x max_step tokens,
 * so a caller keeps max_step small. Two kinds of cache:
 * - GroupQueryAttention (seqlens_k from each row's attention_mask): one
 *   buffer [n_slots, kv_heads, max_ctx, head_dim] past and present, each row
 *   attends over its own length; rows are batch-invariant bit for bit;
 * - keys masked by attention_mask with position_ids (Optimum's exports):
 *   [n_slots, kv_heads, P, head_dim] with one padded P for all slots (the
 *   longest, to a multiple of 32; every slot's rows move when it changes),
 *   each row masked over its own tokens, its new rows copied out of
 *   present. A row so sums its attention over more (zero) terms than alone:
 *   equal to float rounding, not bit for bit.
 * Other models are an error that says so (n_slots 1 serves them). */
int sn_kvloop_new_slots(sn_session *s, int64_t max_ctx, int64_t max_step, int n_slots, sn_kvloop **out,
                        sn_err *err);
void sn_kvloop_free(sn_kvloop *l); /* accepts NULL */

/* Runs the n prompt tokens ids[0..n) after what is already in the cache.
 * *logits (may be NULL) receives [n, vocab] floats: the logits of every
 * position (of the last one only, [1, vocab], when info.last_logits), valid
 * until the next step, reset or free. */
int sn_kvloop_prefill(sn_kvloop *l, const int64_t *ids, int64_t n, const float **logits, sn_err *err);

/* One decode step: feeds id, *logits (may be NULL) receives [vocab] floats
 * with the same lifetime as above. */
int sn_kvloop_decode(sn_kvloop *l, int64_t id, const float **logits, sn_err *err);

/* Slots (sn_kvloop_new_slots): a prompt chunk of n tokens on one slot, as
 * sn_kvloop_prefill (slot 0 is the slot those functions run), and one decode
 * step of n slots, slots[k] fed ids[k], in one model run. *logits is
 * [B, vocab] with B one past the highest slot given: the row of slot s is s
 * (rows of slots not given are stand-ins, to be ignored); valid until the
 * next step. A slot not given keeps its cache (a full one but its last
 * token). */
int sn_kvloop_slot_prefill(sn_kvloop *l, int slot, const int64_t *ids, int64_t n, const float **logits, sn_err *err);
int sn_kvloop_decode_slots(sn_kvloop *l, int n, const int *slots, const int64_t *ids, const float **logits,
                           sn_err *err);
/* Whether steps can be packed: a model of GroupQueryAttention and ops that
 * compute rows each on its own, several slots of one float32 cache on the
 * host shared by past and present, snug.last_logits (else the log says why
 * at INFO). */
bool sn_kvloop_can_pack(const sn_kvloop *l);
/* A packed step: the decode rows of slots[0..n) (ids[k] each) and a prompt
 * chunk of chunk_n tokens of chunk_slot (chunk_n 0: none) in one model run
 * of n + chunk_n <= max_step rows ([1, T]), every weight read once for all.
 * Each row gets the bits its own step gives (a decode step, the chunk
 * alone): GroupQueryAttention places and attends each sequence's rows in
 * its own slot (sn_packed). *logits: [(chunk_n > 0) + n, vocab]: the
 * chunk's last token's first (chunk_n > 0), then the next token's of each
 * slots[k]. */
int sn_kvloop_step_packed(sn_kvloop *l, int n, const int *slots, const int64_t *ids, int chunk_slot,
                          const int64_t *chunk_ids, int64_t chunk_n, const float **logits, sn_err *err);
void sn_kvloop_slot_reset(sn_kvloop *l, int slot);
int sn_kvloop_slot_rewind(sn_kvloop *l, int slot, int64_t pos, sn_err *err);
int64_t sn_kvloop_slot_pos(const sn_kvloop *l, int slot); /* tokens in its cache; -1: no such slot */
/* Copies rows [from, to) of slot src's cache into slot dst, which holds
 * exactly `from` tokens and then holds `to`: a prompt another slot has
 * computed is not computed again. The rows are src's bits; src keeps them. */
int sn_kvloop_slot_copy(sn_kvloop *l, int dst, int src, int64_t from, int64_t to, sn_err *err);


/* Forgets the cached tokens (the buffers stay). */
void sn_kvloop_reset(sn_kvloop *l);
/* Keeps the first pos cached tokens and forgets the rest (a conversation
 * that goes on from a common prefix prefills only what differs). */
int sn_kvloop_rewind(sn_kvloop *l, int64_t pos, sn_err *err);

/* Tokens in the cache. */
int64_t sn_kvloop_pos(const sn_kvloop *l);
const sn_kvloop_info *sn_kvloop_get_info(const sn_kvloop *l);

/* What a loop holds resident at its peak, in bytes, in two figures named
 * for what they are (docs/executor.md):
 *
 * - the estimate (sn_kvloop_estimate), made before planning: the plan at the
 *   bounds run dry (sn_exec_estimate_bounds: workspace and packed state as
 *   the kernels' prepare declares them, nothing read, packed or allocated),
 *   the weights from the graph, and the library's heap as it stands then;
 *   placement and streaming decide from this one;
 * - the accounting (sn_kvloop_memory), after planning: the same figures from
 *   what the plan made, with the allocator's high-water mark for the rest of
 *   the heap. It checks that residency is tracked; it predicts nothing.
 *
 * Weights are mapped from the file, so only the pages a step touches become
 * resident: every initializer a kernel reads whole, and of a table that is
 * only gathered (an embedding) the pages of the rows max_ctx tokens can
 * select. A page fault on a file mapping maps the whole aligned
 * fault-around window (64 KiB by default on Linux) when the file is in the
 * page cache, so each such row is counted as one window (at most the
 * table). */
typedef struct sn_kvloop_mem {
    uint64_t weights_read;   /* mapped initializers read whole by some kernel: the fault-around
                              * windows covering them */
    uint64_t weights_gathered; /* pages of gathered-only tables, bound for max_ctx tokens */
    uint64_t weights_copied; /* aligned copies of misaligned initializers; under snug.weights=load
                              * every weight read whole (read from the file, nothing mapped) */
    uint64_t packed;         /* prepared kernels' state: packed weights, each replacing its source */
    uint64_t staging;        /* weight streaming's staging slots; streamed weights count nowhere else */
    uint64_t arena;          /* the planned activation arena (workspace inside) */
    uint64_t lower_bound;    /* largest total of planned tensors alive at one step */
    uint64_t kv;             /* the KV cache (persistent region) */
    uint64_t folded;         /* constants computed at plan time */
    uint64_t driver;         /* the loop's own buffers (ids, mask, positions) */
    uint64_t other_heap;     /* the rest of the library's heap: in the accounting its high-water
                              * mark once planned (graph, plans, kernel state, planning scratch);
                              * in the estimate what it held before planning (graph, loop), less
                              * the KV cache (0 if unknown: a caller's allocator) */
    uint64_t total;          /* all of the above but lower_bound */
} sn_kvloop_mem;

/* The accounting: valid once the loop planned at its bounds (after
 * sn_kvloop_new; a model that plans per step reports its current plan). */
void sn_kvloop_memory(const sn_kvloop *l, sn_kvloop_mem *m);
/* The estimate made before planning; false when there is none (a model
 * that cannot be planned at its bounds). */
bool sn_kvloop_estimate(const sn_kvloop *l, sn_kvloop_mem *m);

/* Index of the largest of n floats (the first on ties). */
int64_t sn_argmax_f32(const float *x, int64_t n);

#endif
