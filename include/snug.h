/* snug — run ONNX models on devices with less memory than the model wants.
 *
 * Every fallible function returns a snug_status (SNUG_OK == 0); the message,
 * with context (which node, which file offset, which input), is kept on the
 * handle and read with snug_session_error / the err out-parameter. The
 * library never prints and never exits; it logs through a callback. */
#ifndef SNUG_H
#define SNUG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SNUG_VERSION "0.1.0"

typedef enum snug_status {
    SNUG_OK = 0,
    SNUG_ERR_INVALID_ARG = 1, /* bad argument or option */
    SNUG_ERR_IO = 2,          /* file could not be opened, mapped or read */
    SNUG_ERR_PARSE = 3,       /* malformed model or tensor file */
    SNUG_ERR_UNSUPPORTED = 4, /* op, opset, dtype or feature not implemented */
    SNUG_ERR_OOM = 5,         /* out of memory */
    SNUG_ERR_SHAPE = 6,       /* shapes do not agree */
    SNUG_ERR_TYPE = 7,        /* types do not agree */
    SNUG_ERR_GRAPH = 8,       /* invalid graph: cycle, undefined input, ... */
    SNUG_ERR_RANGE = 9,       /* a value is out of range (index, axis, bound) */
    SNUG_ERR_INTERNAL = 10,   /* a bug in snug */
} snug_status;

const char *snug_status_str(int status);

/* ---- logging and allocation ---------------------------------------------- */

enum { SNUG_LOG_ERROR = 0, SNUG_LOG_WARN = 1, SNUG_LOG_INFO = 2, SNUG_LOG_DEBUG = 3 };
typedef void (*snug_log_fn)(void *user, int level, const char *msg);

/* Process-wide allocator, set before any other call (tests use it to count
 * allocations and inject failures). All three functions or none: a table
 * with every function NULL, or a NULL table, restores the default; a
 * partial one (say malloc_fn without free_fn, which would pair the
 * caller's malloc with libc's free) is refused with SNUG_ERR_INVALID_ARG
 * and the allocator in force stays. */
typedef struct snug_allocator {
    void *(*malloc_fn)(void *user, size_t n);
    void *(*realloc_fn)(void *user, void *p, size_t n);
    void (*free_fn)(void *user, void *p);
    void *user;
} snug_allocator;
int snug_set_allocator(const snug_allocator *a);
/* Number of allocations made through the library allocator so far. */
uint64_t snug_alloc_count(void);
/* Bytes the library holds right now through the default allocator (-1 when
 * an allocator was set with snug_set_allocator: it keeps its own count). */
int64_t snug_alloc_live_bytes(void);
/* The most snug_alloc_live_bytes has been so far (-1 as above). */
int64_t snug_alloc_peak_bytes(void);

/* ---- tensors ------------------------------------------------------------- */

/* Element types: the values of ONNX TensorProto.DataType. */
typedef enum snug_dtype {
    SNUG_FLOAT = 1, SNUG_UINT8 = 2, SNUG_INT8 = 3, SNUG_UINT16 = 4, SNUG_INT16 = 5,
    SNUG_INT32 = 6, SNUG_INT64 = 7, SNUG_STRING = 8, SNUG_BOOL = 9, SNUG_FLOAT16 = 10,
    SNUG_DOUBLE = 11, SNUG_UINT32 = 12, SNUG_UINT64 = 13, SNUG_BFLOAT16 = 16,
} snug_dtype;

#define SNUG_MAX_RANK 12

/* A tensor view exchanged through the API. The memory stays the caller's
 * (for inputs) or the session's (for outputs, valid until the next run). */
typedef struct snug_tensor {
    int dtype;      /* snug_dtype */
    int rank;
    int64_t dims[SNUG_MAX_RANK];
    void *data;
} snug_tensor;

/* ---- sessions ------------------------------------------------------------ */

typedef struct snug_options snug_options; /* string key -> string value */
typedef struct snug_session snug_session;

snug_options *snug_options_new(void);
void snug_options_free(snug_options *o); /* accepts NULL */
/* Sets a config entry (ORT-style keys, e.g. "session.max_shape_override",
 * and snug's own "snug.*" keys; see docs/config.md). Later sets win. */
int snug_options_set(snug_options *o, const char *key, const char *value);
const char *snug_options_get(const snug_options *o, const char *key);
void snug_options_set_logger(snug_options *o, snug_log_fn fn, void *user, int level);

/* Loads and plans a model. On failure *out is NULL and err (if not NULL)
 * receives the message (err_cap bytes). */
int snug_session_create(const char *model_path, const snug_options *opts,
                        snug_session **out, char *err, size_t err_cap);
void snug_session_free(snug_session *s); /* accepts NULL */
const char *snug_session_error(const snug_session *s);

int snug_session_input_count(const snug_session *s);
int snug_session_output_count(const snug_session *s);
const char *snug_session_input_name(const snug_session *s, int i);
const char *snug_session_output_name(const snug_session *s, int i);

/* Runs once. inputs[i] feeds graph input i (by position). On success
 * outputs[i] views the session's output i, valid until the next run. */
int snug_session_run(snug_session *s, const snug_tensor *inputs, int n_inputs,
                     snug_tensor *outputs, int n_outputs);

/* ---- text generation ------------------------------------------------------ */

/* An LLM folder as onnxruntime-genai writes it (genai_config.json) or as
 * Optimum does (config.json, generation_config.json), with tokenizer.json and
 * tokenizer_config.json (or chat_template.jinja); see docs/generate.md. A
 * conversation stays in the KV cache between calls: a prompt that starts with
 * what is cached prefills only the rest. A build without the tokenizer's
 * libraries (PCRE2, utf8proc, cJSON) returns SNUG_ERR_UNSUPPORTED. */
typedef struct snug_generator snug_generator;

typedef struct snug_generator_config {
    int64_t ctx;      /* context in tokens (the KV cache); 0: the model's, at most 4096 */
    int64_t batch;    /* prompt tokens per prefill step; 0: 512 */
    int threads;      /* 0: all cores */
    int weights_load; /* nonzero: snug.weights=load (weights read into owned memory) */
    const char *chat_template_path; /* a Jinja template file instead of the model's, or NULL */
} snug_generator_config;

/* cfg may be NULL (defaults). On failure *out is NULL and err (if not NULL)
 * receives the message. */
int snug_generator_create(const char *model_dir, const snug_generator_config *cfg, snug_generator **out,
                          char *err, size_t err_cap);
void snug_generator_free(snug_generator *g); /* accepts NULL */
/* The message of the last failed call on g. */
const char *snug_generator_error(const snug_generator *g);
/* Nonzero when the model (or cfg->chat_template_path) gives a chat template
 * snug can render. */
int snug_generator_has_chat_template(const snug_generator *g);
/* Why the model's chat template cannot be rendered (a construct snug does
 * not render, a syntax error), or NULL: raw text still works. */
const char *snug_generator_chat_template_error(const snug_generator *g);

typedef struct snug_message {
    const char *role;    /* "system", "user", "assistant" */
    const char *content; /* UTF-8 */
} snug_message;

typedef struct snug_sampling {
    float temperature;    /* <= 0: greedy */
    int top_k;            /* <= 0: all */
    float top_p;          /* >= 1: all */
    float min_p;          /* <= 0: none */
    float repeat_penalty; /* 1: off */
    uint64_t seed;
    int64_t max_tokens;   /* <= 0: until EOS or a full context */
    const char *const *stop; /* [n_stop] stop strings (not part of the text), or NULL */
    int n_stop;
} snug_sampling;

/* llama.cpp's defaults: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05. */
void snug_sampling_defaults(snug_sampling *s);

enum { SNUG_STOP_EOS = 0, SNUG_STOP_LENGTH, SNUG_STOP_STRING, SNUG_STOP_CONTEXT, SNUG_STOP_CANCELLED };

typedef struct snug_generation {
    int stop;              /* SNUG_STOP_* */
    int64_t prompt_tokens; /* in the prompt */
    int64_t prefilled;     /* of those, fed to the model (the rest were cached) */
    int64_t generated;     /* tokens generated, the EOS included */
    double prefill_s, decode_s, ttft_s;
} snug_generation;

/* Receives each piece of the answer as it completes; nonzero stops. */
typedef int (*snug_text_fn)(void *user, const char *text, size_t len);

/* Answers a conversation (rendered by the model's chat template with the
 * generation prompt). s NULL: snug_sampling_defaults. out may be NULL. */
int snug_generator_chat(snug_generator *g, const snug_message *msgs, int n, const snug_sampling *s,
                        snug_text_fn fn, void *user, snug_generation *out);
/* Continues raw text (tokenized with the tokenizer's special tokens). */
int snug_generator_complete(snug_generator *g, const char *text, const snug_sampling *s, snug_text_fn fn,
                            void *user, snug_generation *out);
/* Forgets the cached conversation. */
void snug_generator_reset(snug_generator *g);

#ifdef __cplusplus
}
#endif
#endif
