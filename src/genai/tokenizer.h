/* A Hugging Face tokenizer.json, encoded and decoded as the `tokenizers`
 * package does (version 0.23.3 is the oracle the tests compare against).
 *
 * Supported: the BPE model, with
 *   byte-level BPE (GPT-2, SmolLM2, Qwen2, Llama-3): Split regex and Digits
 *     pre-tokenizers, ByteLevel pre-tokenizer and decoder, NFC;
 *   SentencePiece-style BPE (Llama-2, TinyLlama, Mistral): "▁" from the
 *     Metaspace pre-tokenizer or the Prepend + Replace normalizers,
 *     byte_fallback, unk_token/fuse_unk, and the Replace, ByteFallback, Fuse,
 *     Strip and Metaspace decoders.
 * Added and special tokens are matched in the text before it is split, with
 * their single_word, lstrip, rstrip and normalized flags. Anything else the
 * file names (another model type, normalizer, pre-tokenizer or decoder) fails
 * the load with a message naming it. docs/tokenizer.md lists what is and is
 * not supported and why.
 *
 * Split regexes run on PCRE2 (HF uses Oniguruma; the few escapes whose
 * meaning differs, \s \S \w \h \H, are rewritten to Oniguruma's meaning),
 * Unicode normalization on utf8proc, JSON on cJSON.
 *
 * A tokenizer is immutable once loaded: encode and decode may run on it from
 * several threads at once. A stream (sn_tokstream) belongs to one thread. */
#ifndef SN_GENAI_TOKENIZER_H
#define SN_GENAI_TOKENIZER_H

#include "core/core.h"

typedef struct sn_tokenizer sn_tokenizer;

/* Loads a tokenizer.json. Errors name the file and the JSON path of what is
 * wrong ("model.type: unsupported tokenizer model type 'WordPiece'"). */
int sn_tokenizer_load(const char *path, sn_tokenizer **out, sn_err *err);
/* The same from len bytes of JSON in memory; name is used in messages. */
int sn_tokenizer_load_json(const char *json, size_t len, const char *name, sn_tokenizer **out,
                           sn_err *err);
void sn_tokenizer_free(sn_tokenizer *t); /* accepts NULL */

/* Encodes len bytes of UTF-8 text (invalid UTF-8 is an error naming the
 * byte offset). add_special: apply the post-processor (TemplateProcessing:
 * BOS and the like), as encode(text, add_special_tokens=True); with false,
 * add_special_tokens=False. Special tokens written in the text are matched
 * either way, as `tokenizers` does. *ids (owned by the caller, sn_free) gets
 * *n ids; for n == 0 it may be NULL. */
int sn_tokenizer_encode(const sn_tokenizer *t, const char *text, size_t len, bool add_special,
                        int32_t **ids, size_t *n, sn_err *err);

/* Decodes n ids into *text (owned by the caller, sn_free; NUL-terminated,
 * *len bytes without the NUL). skip_special drops special added tokens, as
 * decode(ids, skip_special_tokens=True). An id outside the vocabulary is an
 * error (`tokenizers` drops it silently). */
int sn_tokenizer_decode(const sn_tokenizer *t, const int32_t *ids, size_t n, bool skip_special,
                        char **text, size_t *len, sn_err *err);

/* The id of a token (added tokens first, then the model's vocabulary), -1
 * when there is none. tok is NUL-terminated. */
int32_t sn_tokenizer_token_id(const sn_tokenizer *t, const char *tok);
/* The text of token id (borrowed, *len bytes, not NUL-terminated), NULL when
 * id is not a token. */
const char *sn_tokenizer_token(const sn_tokenizer *t, int32_t id, size_t *len);
/* One more than the largest id (model vocabulary and added tokens). */
int32_t sn_tokenizer_vocab_size(const sn_tokenizer *t);
/* Whether id is an added token marked special ("<|im_end|>", "</s>"). */
bool sn_tokenizer_is_special(const sn_tokenizer *t, int32_t id);

/* Streaming decode: one id at a time into text, as the `tokenizers`
 * DecodeStream does. A step returns the text the new id completes; nothing
 * (len 0) while the text so far ends in an incomplete UTF-8 character (a
 * byte-level or <0xXX> byte token that needs the next ones) or adds no text
 * yet. Bytes that can never form a character become U+FFFD once a later
 * token completes text after them. The stream decodes a window of the last
 * tokens, so a step costs what decoding a few tokens costs. */
typedef struct sn_tokstream sn_tokstream;

/* t is borrowed and must outlive the stream. */
int sn_tokstream_new(const sn_tokenizer *t, bool skip_special, sn_tokstream **out, sn_err *err);
void sn_tokstream_free(sn_tokstream *s); /* accepts NULL */
/* Feeds id. *text (borrowed, valid until the next call on s; NUL-terminated)
 * gets *len new bytes, 0 when nothing is complete yet. */
int sn_tokstream_step(sn_tokstream *s, int32_t id, const char **text, size_t *len, sn_err *err);
/* Ends the stream: returns what is held back, decoded as a whole decode
 * would (an incomplete character at the end becomes U+FFFD; DecodeStream
 * never returns it), and starts over as if new. */
int sn_tokstream_flush(sn_tokstream *s, const char **text, size_t *len, sn_err *err);
/* Forgets the tokens fed so far. */
void sn_tokstream_reset(sn_tokstream *s);

#endif
