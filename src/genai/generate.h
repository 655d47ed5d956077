/* Text generation from a model folder: the tokenizer, the chat template,
 * the step driver (kvloop.h) with its KV cache planned once for the
 * context, and the sampler, as a loop as plain as llama2.c's:
 * prefill the prompt in chunks, then one token at a time until a stop.
 *
 * Folders as onnxruntime-genai writes them (genai_config.json: the decoder's
 * file name, eos/bos ids, context length, search defaults) and as Optimum
 * does (model.onnx beside config.json and generation_config.json), with
 * tokenizer.json and tokenizer_config.json (or chat_template.jinja).
 *
 * A conversation stays in the KV cache: a prompt that starts with the ids
 * already cached (the previous turns, as the template renders them again)
 * prefills only what follows them. */
#ifndef SN_GENAI_GENERATE_H
#define SN_GENAI_GENERATE_H

#include "core/core.h"
#include "genai/sampler.h"
#include "genai/template.h"

typedef struct sn_generator sn_generator;

typedef struct sn_gen_config {
    int64_t ctx;     /* context in tokens (the KV cache); 0: min(the model's, 4096) */
    int64_t batch;   /* prompt tokens per prefill step (the plan's bound); 0: 512 */
    int threads;     /* 0: all cores */
    bool weights_load; /* snug.weights=load instead of the file map */
    const char *chat_template_path; /* a template file to use instead of the model's, or NULL */
    uint64_t mem_host;   /* snug.mem.host (0: none) */
    int prefetch_layers; /* snug.prefetch_layers (0: the default) */
    int slots;           /* sequences answered together, each with its own ctx (0, 1: one); more
                          * than one needs GroupQueryAttention (kvloop.h, sn_kvloop_new_slots) */
    const char *device;  /* snug.device (NULL: the host only) */
    const char *const *config; /* [2 n_config] session config entries, key then value */
    int n_config;
    snug_log_fn log;     /* the session's warnings, or NULL */
    void *log_user;
} sn_gen_config;

int sn_generator_open(const char *dir, const sn_gen_config *cfg, sn_generator **out, sn_err *err);
void sn_generator_free(sn_generator *g); /* accepts NULL */

/* What the folder said: the model file, the context, whether a chat template is there. */
typedef struct sn_gen_info {
    const char *model_path;
    const char *style;     /* "genai" (genai_config.json) or "optimum" (config.json) */
    int64_t ctx;           /* the context planned (of each slot) */
    int slots;             /* sequences answered together */
    int64_t batch;         /* prompt tokens per prefill step */
    int64_t model_ctx;     /* the model's own (genai context_length, max_position_embeddings), 0 unknown */
    int64_t vocab;
    int n_eos;
    const int32_t *eos;    /* [n_eos] */
    bool has_template;
    const char *template_source;
    const char *template_error; /* the model's template cannot be rendered: why (has_template false), or NULL */
} sn_gen_info;
const sn_gen_info *sn_generator_info(const sn_generator *g);
struct snug_session;
/* The ids the last answer sampled (an EOS included), valid until the next. */
int64_t sn_generator_answer_ids(const sn_generator *g, const int32_t **ids);
/* The session it runs (borrowed). */
const struct snug_session *sn_generator_session(const sn_generator *g);

/* The prompt of a conversation: msgs rendered by the chat template with the
 * generation prompt added, and tokenized as apply_chat_template does (no
 * special tokens added: the template writes them). Without a template: an
 * error saying so (the caller may send raw text instead). *ids: sn_free. */
int sn_generator_chat_ids(sn_generator *g, const sn_chat_msg *msgs, int n, int32_t **ids, size_t *n_ids,
                          sn_err *err);
/* Raw text, tokenized with the tokenizer's special tokens (BOS) as
 * tokenizer(text) does. */
int sn_generator_text_ids(sn_generator *g, const char *text, int32_t **ids, size_t *n_ids, sn_err *err);

typedef enum sn_gen_stop {
    SN_GEN_STOP_EOS = 0,   /* the model ended its answer */
    SN_GEN_STOP_LENGTH,    /* max_tokens reached */
    SN_GEN_STOP_STRING,    /* a stop string appeared (it is not part of the text) */
    SN_GEN_STOP_CONTEXT,   /* the context is full */
    SN_GEN_STOP_CANCELLED, /* the callback asked to stop */
} sn_gen_stop;
const char *sn_gen_stop_name(sn_gen_stop s); /* "eos", "length", "stop string", "context full", "cancelled" */

typedef struct sn_gen_params {
    sn_sampler_params sampling;
    int64_t max_tokens;       /* <= 0: until the context is full */
    const char *const *stop;  /* [n_stop] stop strings, or NULL */
    int n_stop;
} sn_gen_params;

typedef struct sn_gen_result {
    sn_gen_stop stop;
    int64_t prompt_tokens;    /* in the prompt */
    int64_t prefilled;        /* of those, fed to the model (the rest were cached) */
    int64_t shared;           /* of the cached ones, copied from another slot at the start (sn_generator_set_share) */
    int64_t generated;        /* tokens generated (the EOS included) */
    double prefill_s;         /* time to the first token's logits */
    double decode_s;          /* the decode steps */
    double ttft_s;            /* from the call to the first token's text */
} sn_gen_result;

/* Called with each piece of text as it completes (a token inside a UTF-8
 * character gives nothing until the character is whole; text that may be
 * the start of a stop string is held back until it is not); return nonzero
 * to stop. */
typedef int (*sn_gen_text_fn)(void *user, const char *text, size_t len);

/* Generates after the n prompt ids. On success res says why it stopped;
 * the prompt and the answer stay in the cache for the next turn. A prompt
 * that does not fit the context is an error (SNUG_ERR_RANGE) naming both. */
int sn_generator_run(sn_generator *g, const int32_t *ids, size_t n, const sn_gen_params *p, sn_gen_text_fn cb,
                     void *user, sn_gen_result *res, sn_err *err);
/* Forgets the cached conversation. */
void sn_generator_reset(sn_generator *g);

/* Continuous batching: several answers under way at once, one per slot,
 * advanced together. sn_generator_start puts an answer on a free slot (the
 * prompt is copied; p's stop strings and user must live until it is
 * finished); each sn_generator_step then runs one prompt chunk of one slot
 * that is prefilling (round robin) and one decode step of every slot that
 * is decoding: where the model packs, in one run (sn_kvloop_step_packed),
 * else the chunk in a run of its own (sn_kvloop_slot_prefill) and the
 * decode rows in another (sn_kvloop_decode_slots; packed too where a free
 * slot lies below the highest one decoding, so it runs no stand-in row),
 * calling each answer's cb with its text. A step returns how many answers are still
 * under way and sets *finished (may be NULL) to how many ended in it;
 * sn_generator_finish collects an ended answer (its result; its status, with
 * err set on failure) and frees the slot. The slot keeps the conversation
 * cached, as sn_generator_run does on slot 0, which it runs. */
int sn_generator_slots(const sn_generator *g);
int sn_generator_start(sn_generator *g, int slot, const int32_t *ids, size_t n, const sn_gen_params *p,
                       sn_gen_text_fn cb, void *user, sn_err *err);
int sn_generator_step(sn_generator *g, int *finished);
bool sn_generator_slot_busy(const sn_generator *g, int slot); /* an answer on it, ended or not */
bool sn_generator_slot_done(const sn_generator *g, int slot); /* its answer ended, not yet collected */
int sn_generator_finish(sn_generator *g, int slot, sn_gen_result *res, sn_err *err);
void sn_generator_slot_reset(sn_generator *g, int slot); /* a free slot forgets its conversation */
/* A free slot keeps only the rows prompt chunks computed (sn_gen_seq.n_exact):
 * a prompt that starts with them gets the answer a fresh prefill gives. */
void sn_generator_slot_keep_exact(sn_generator *g, int slot);
/* Of slots[0..n_slots), the free one whose cache a start of ids would reuse
 * most of (exact: its prompt rows only; the first on a tie), and how many ids
 * (reuse, may be NULL); -1 when none is free. */
int sn_generator_pick(const sn_generator *g, const int32_t *ids, size_t n, const int *slots, int n_slots, bool exact,
                      int64_t *reuse);
int64_t sn_generator_slot_answer_ids(const sn_generator *g, int slot, const int32_t **ids);
/* Whether the starts that follow copy prompt rows from other slots (default
 * no): where another slot, free or with an answer under way, holds more of
 * the prompt among its exact rows (its prompt chunks') than the starting
 * slot's cache does, those rows are copied into it (sn_kvloop_slot_copy)
 * and only the rest is prefilled (sn_gen_result.shared). The answer is the
 * one a fresh prefill gives, to the bit, as far as the slot's own kept rows
 * were exact. */
void sn_generator_set_share(sn_generator *g, bool on);


/* The model runs a generator made since it was created: prompt chunks,
 * decode steps and both packed in one run (sn_kvloop_step_packed), their
 * rows (tokens run) and wall time. */
typedef struct sn_gen_runs {
    uint64_t prefill_runs, prefill_rows, decode_runs, decode_rows;
    uint64_t packed_runs; /* runs of decode rows and a prompt chunk (their tokens counted in both rows) */
    double prefill_s, decode_s, packed_s;
} sn_gen_runs;
void sn_generator_runs(const sn_generator *g, sn_gen_runs *out);

#endif
