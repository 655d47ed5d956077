/* Private to tokenizer.c (loading) and tokenizer_run.c (encode, decode,
 * streams): the loaded form of a tokenizer.json. */
#ifndef SN_GENAI_TOKENIZER_IMPL_H
#define SN_GENAI_TOKENIZER_IMPL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "genai/tokenizer.h"

/* A compiled pattern (tokenizers' Pattern: a string or a regex; a string is
 * compiled as a PCRE2 literal so both match alike). */
typedef struct tk_regex {
    pcre2_code *code; /* owned */
} tk_regex;

typedef enum tk_norm_kind {
    TK_NORM_NFC,
    TK_NORM_NFD,
    TK_NORM_NFKC,
    TK_NORM_NFKD,
    TK_NORM_PREPEND, /* str prepended to a non-empty string */
    TK_NORM_REPLACE, /* every match of re becomes str */
    TK_NORM_STRIP,   /* whitespace off the left and/or right */
} tk_norm_kind;

typedef struct tk_norm {
    tk_norm_kind kind;
    char *str;  /* owned: Prepend's prefix, Replace's content */
    size_t len;
    tk_regex re;
    bool left, right; /* Strip */
} tk_norm;

typedef enum tk_pre_kind {
    TK_PRE_SPLIT,
    TK_PRE_BYTELEVEL,
    TK_PRE_METASPACE,
    TK_PRE_DIGITS,
} tk_pre_kind;

/* tokenizers' SplitDelimiterBehavior. */
typedef enum tk_behavior {
    TK_REMOVED,
    TK_ISOLATED,
    TK_MERGED_PREV,
    TK_MERGED_NEXT,
    TK_CONTIGUOUS,
} tk_behavior;

/* Metaspace's PrependScheme. */
typedef enum tk_prepend { TK_PREPEND_ALWAYS, TK_PREPEND_FIRST, TK_PREPEND_NEVER } tk_prepend;

typedef struct tk_pre {
    tk_pre_kind kind;
    tk_regex re;            /* Split's pattern; ByteLevel's GPT-2 regex when use_regex */
    tk_behavior behavior;   /* Split */
    bool invert;            /* Split */
    bool add_prefix_space;  /* ByteLevel */
    uint32_t repl;          /* Metaspace's replacement character */
    char repl_utf8[5];
    size_t repl_len;
    tk_prepend scheme;      /* Metaspace */
    bool split;             /* Metaspace: split before each replacement character */
    bool individual;        /* Digits: each digit alone, else runs of digits */
} tk_pre;

typedef enum tk_dec_kind {
    TK_DEC_BYTELEVEL,
    TK_DEC_BYTEFALLBACK,
    TK_DEC_METASPACE,
    TK_DEC_REPLACE,
    TK_DEC_STRIP,
    TK_DEC_FUSE,
} tk_dec_kind;

typedef struct tk_dec {
    tk_dec_kind kind;
    tk_regex re;      /* Replace's pattern */
    char *str;        /* owned: Replace's content */
    size_t len;
    uint32_t ch;      /* Metaspace's replacement, Strip's content */
    tk_prepend scheme; /* Metaspace */
    size_t start, stop; /* Strip: at most this many ch off each end */
} tk_dec;

/* An added token: matched in the text before the pre-tokenizers run. */
typedef struct tk_added {
    int32_t id;
    char *content;  /* owned */
    size_t len;
    char *norm;     /* owned: content through the normalizer (normalized tokens, else NULL) */
    size_t norm_len;
    bool single_word, lstrip, rstrip, normalized, special;
} tk_added;

/* The added tokens of one matching pass (non-normalized ones on the raw
 * text, normalized ones on the normalized text), as tokenizers' two
 * leftmost-longest automata: by first byte, longest first. */
typedef struct tk_matcher {
    int32_t *order;      /* owned [n]: indices into sn_tokenizer.added */
    size_t n;
    uint32_t first[257]; /* order[first[b] .. first[b+1]) start with byte b */
} tk_matcher;

/* One item of TemplateProcessing's "single" template. */
typedef struct tk_tmpl {
    bool seq;            /* the sequence itself; else ids */
    int32_t *ids;        /* owned */
    size_t n;
} tk_tmpl;

/* string -> id, open addressing over ids (slot = id + 1, 0 empty). */
typedef struct tk_vmap {
    uint32_t *slot; /* owned [mask + 1] */
    size_t mask;
} tk_vmap;

/* (left id, right id) -> merge rank and merged id. */
typedef struct tk_merge {
    uint64_t key; /* left << 32 | right; UINT64_MAX empty */
    uint32_t rank;
    int32_t id;
} tk_merge;

struct sn_tokenizer {
    char *name;              /* owned: the file, for messages */
    char *text;              /* owned: the vocabulary's bytes, then the added tokens' */
    /* Token text by id, as decoding sees it: the model's vocabulary,
     * overridden by added tokens (an added token may have an id the model
     * gives another string). */
    size_t *tok_off;         /* owned [n_ids]: offset in text; SIZE_MAX: no such id */
    uint32_t *tok_len;       /* owned [n_ids] */
    int32_t n_ids;
    /* The model's vocabulary, as BPE sees it. */
    size_t *voff;            /* owned [n_vocab]: offset in text; SIZE_MAX: a hole */
    uint32_t *vlen;          /* owned [n_vocab] */
    int32_t n_vocab;         /* one more than the largest model id */
    size_t vocab_count;      /* tokens in the model's vocabulary (holes make it < n_vocab) */
    tk_vmap vocab;           /* string -> model id */
    size_t text_used;        /* bytes of text filled */
    /* BPE */
    tk_merge *merges;        /* owned [merge_mask + 1] */
    size_t merge_mask;
    int32_t unk;             /* unk_token's id, -1: none */
    bool fuse_unk, byte_fallback, ignore_merges;
    char *cont_prefix;       /* owned, NULL: continuing_subword_prefix */
    char *eow_suffix;        /* owned, NULL: end_of_word_suffix */
    int32_t byte_tok[256];   /* byte_fallback: id of "<0xXX>", -1 when absent */
    /* The pipeline. */
    tk_norm *norms;          /* owned [n_norms] */
    size_t n_norms;
    tk_pre *pres;            /* owned [n_pres] */
    size_t n_pres;
    tk_dec *decs;            /* owned [n_decs]; none: tokens joined with spaces */
    size_t n_decs;
    tk_added *added;         /* owned [n_added] */
    size_t n_added;
    uint8_t *is_added;       /* owned [n_ids]: 1 added, 2 added and special */
    tk_matcher raw_match, norm_match;
    tk_tmpl *tmpl;           /* owned [n_tmpl]: TemplateProcessing's single template */
    size_t n_tmpl;
    char post_unsupported[64]; /* a post-processor type found but not supported ("" none) */
    pcre2_general_context *gctx; /* owned: PCRE2's allocations through sn_malloc */
    /* GPT-2's byte <-> character mapping (ByteLevel). */
    uint16_t byte_char[256];  /* byte -> code point */
    int16_t char_byte[512];   /* code point -> byte, -1 when not a mapped character */
};

/* A growable byte string (sn_malloc). */
typedef struct tk_nbuf {
    char *p;
    size_t len, cap;
} tk_nbuf;

/* Runs the normalizers on s[0..n) into out (appended; out->p NUL-terminated). */
int tk_normalize(const sn_tokenizer *t, const char *s, size_t n, tk_nbuf *out, sn_err *err);
/* The model id of a token, -1 when absent. */
int32_t tk_vocab_get(const sn_tokenizer *t, const char *s, size_t n);
/* The merge of (a, b), NULL when none. */
const tk_merge *tk_merge_get(const sn_tokenizer *t, int32_t a, int32_t b);

/* Helpers shared by both files. */
/* The offset of the first byte that is not valid UTF-8, n when all is. */
size_t tk_utf8_invalid_at(const char *s, size_t n);
void tk_regex_free(tk_regex *r);
/* Length of the UTF-8 character starting at s[0] (1 for a stray byte). */
size_t tk_u8len(unsigned char c);
/* Decodes one character of valid UTF-8 at s, returns its length. */
size_t tk_u8dec(const char *s, uint32_t *cp);
size_t tk_u8enc(uint32_t cp, char *out);
/* Rust's char::is_whitespace (the White_Space property). */
bool tk_is_space(uint32_t cp);

#endif
