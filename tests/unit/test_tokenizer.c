/* The tokenizer (src/genai/tokenizer*.c) on small tokenizer.json files this
 * test writes itself: a GPT-2-style byte-level BPE and a Llama-2-style
 * SentencePiece BPE with byte_fallback, ids worked out by hand from their
 * merge ranks; decoding whole and streamed (incomplete UTF-8 held back,
 * invalid bytes as U+FFFD); the errors of bad files and bad input; and
 * every allocation failing in turn (no crash, no leak, SNUG_ERR_OOM).
 * tests/models/check_tokenizer.py compares against `tokenizers` at scale.
 * Exit 77 when snug was built without the tokenizer's libraries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "genai/tokenizer.h"

#ifndef SNUG_HAVE_TOKENIZER
int main(void) {
    printf("snug was built without PCRE2, utf8proc or cJSON: no tokenizer to test (skipped)\n");
    return 77;
}
#else

static int failures;
#define CHECK(c, ...)                                                                      \
    do {                                                                                   \
        if (!(c)) {                                                                        \
            fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fputc('\n', stderr);                                                           \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

/* ---- fixtures -------------------------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;

static void put(sbuf *b, const char *s) {
    size_t k = strlen(s);
    if (b->n + k + 1 > b->cap) {
        b->cap = (b->n + k + 1) * 2;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, s, k + 1);
    b->n += k;
}

static void putu8(sbuf *b, unsigned cp) {
    char u[5] = {0};
    if (cp < 0x80) {
        u[0] = (char)cp;
    } else if (cp < 0x800) {
        u[0] = (char)(0xc0 | cp >> 6);
        u[1] = (char)(0x80 | (cp & 0x3f));
    } else {
        u[0] = (char)(0xe0 | cp >> 12);
        u[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        u[2] = (char)(0x80 | (cp & 0x3f));
    }
    put(b, u);
}

/* GPT-2's byte -> character map, written out here independently of the
 * library's. */
static unsigned gpt2_char(int b) {
    if ((b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff))
        return (unsigned)b;
    int n = 0;
    for (int i = 0; i < b; i++)
        if (!((i >= '!' && i <= '~') || (i >= 0xa1 && i <= 0xac) || (i >= 0xae && i <= 0xff)))
            n++;
    return 256u + (unsigned)n;
}

/* Byte-level: ids 0-255 the byte characters (id = byte), then
 *   256 "Ġt"  257 "he"  258 "Ġthe"  259 "ll"  260 "llo"  261 "Ġw"
 * from merges of rank 0-5 (the last one written as a pair); added
 * "<|im_start|>" gets 262 (the next id), "<|pad|>" 263. */
static char *bytelevel_json(void) {
    sbuf b = {0};
    put(&b, "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null,\n"
            "\"added_tokens\": [{\"id\": 262, \"content\": \"<|im_start|>\", \"single_word\": false, \"lstrip\": false,"
            " \"rstrip\": false, \"normalized\": false, \"special\": true},\n"
            " {\"id\": 263, \"content\": \"<|pad|>\", \"special\": true, \"normalized\": false}],\n"
            "\"normalizer\": null,\n"
            "\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true,"
            " \"use_regex\": true},\n"
            "\"post_processor\": {\"type\": \"ByteLevel\", \"trim_offsets\": false},\n"
            "\"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true},\n"
            "\"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, \"fuse_unk\": false,"
            " \"byte_fallback\": false, \"vocab\": {");
    for (int i = 0; i < 256; i++) {
        char num[32];
        unsigned c = gpt2_char(i);
        put(&b, i ? ", \"" : "\"");
        if (c == '"' || c == '\\')
            put(&b, "\\");
        putu8(&b, c);
        snprintf(num, sizeof num, "\": %d", i);
        put(&b, num);
    }
    put(&b, ", \"\xc4\xa0t\": 256, \"he\": 257, \"\xc4\xa0the\": 258, \"ll\": 259, \"llo\": 260, \"\xc4\xa0w\": 261},\n"
            "\"merges\": [\"\xc4\xa0 t\", \"h e\", \"\xc4\xa0t he\", \"l l\", \"ll o\", [\"\xc4\xa0\", \"w\"]]}}\n");
    return b.p;
}

/* SentencePiece style, as Llama-2's file: <unk> <s> </s>, the byte tokens
 * <0x00>-<0xFF> at 3-258, then
 *   259 "▁"  260 "h"  261 "i"  262 "▁h"  263 "▁hi"  264 "e"  265 "l"
 *   266 "o"  267 "ll"  268 "▁he"  269 "▁hell"  270 "▁hello"
 * from merges "▁ h" "▁h i" "l l" "▁h e" "▁he ll" "▁hell o" (ranks 0-5). */
static char *sp_json(bool byte_fallback, const char *post) {
    sbuf b = {0};
    put(&b, "{\"added_tokens\": [");
    const char *sp[] = {"<unk>", "<s>", "</s>"};
    for (int i = 0; i < 3; i++) {
        char t[200];
        snprintf(t, sizeof t, "%s{\"id\": %d, \"content\": \"%s\", \"single_word\": false, \"lstrip\": false,"
                 " \"rstrip\": false, \"normalized\": false, \"special\": true}", i ? ", " : "", i, sp[i]);
        put(&b, t);
    }
    put(&b, "],\n\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", \"prepend\": "
            "\"\xe2\x96\x81\"}, {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"\xe2\x96\x81\"}]},\n"
            "\"pre_tokenizer\": null,\n\"post_processor\": ");
    put(&b, post);
    put(&b, ",\n\"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\": {\"String\": "
            "\"\xe2\x96\x81\"}, \"content\": \" \"}, {\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"}, {\"type\": \"Strip\","
            " \"content\": \" \", \"start\": 1, \"stop\": 0}]},\n\"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\","
            " \"fuse_unk\": true, \"byte_fallback\": ");
    put(&b, byte_fallback ? "true" : "false");
    put(&b, ", \"vocab\": {\"<unk>\": 0, \"<s>\": 1, \"</s>\": 2");
    for (int i = 0; i < 256; i++) {
        char t[32];
        snprintf(t, sizeof t, ", \"<0x%02X>\": %d", i, 3 + i);
        put(&b, t);
    }
    put(&b, ", \"\xe2\x96\x81\": 259, \"h\": 260, \"i\": 261, \"\xe2\x96\x81h\": 262, \"\xe2\x96\x81hi\": 263, \"e\": 264,"
            " \"l\": 265, \"o\": 266, \"ll\": 267, \"\xe2\x96\x81he\": 268, \"\xe2\x96\x81hell\": 269, \"\xe2\x96\x81hello\": 270},\n"
            "\"merges\": [\"\xe2\x96\x81 h\", \"\xe2\x96\x81h i\", \"l l\", \"\xe2\x96\x81h e\", \"\xe2\x96\x81he ll\","
            " \"\xe2\x96\x81hell o\"]}}\n");
    return b.p;
}

static const char BOS_TEMPLATE[] =
    "{\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 0}},"
    " {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], \"pair\": [], \"special_tokens\": {\"<s>\": {\"id\": \"<s>\","
    " \"ids\": [1], \"tokens\": [\"<s>\"]}}}";

/* Replaces the first `from` in json by `to` (a new string). */
static char *edit(const char *json, const char *from, const char *to) {
    const char *at = strstr(json, from);
    if (!at)
        return NULL;
    size_t n = strlen(json), a = (size_t)(at - json), f = strlen(from), t = strlen(to);
    char *o = malloc(n - f + t + 1);
    memcpy(o, json, a);
    memcpy(o + a, to, t);
    memcpy(o + a + t, at + f, n - a - f + 1);
    return o;
}

static char dir[64];

static char *write_file(const char *name, const char *data, size_t n) {
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    fclose(f);
    return path;
}

/* ---- checks ---------------------------------------------------------------- */

static bool ids_eq(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    return na == nb && (na == 0 || memcmp(a, b, na * sizeof *a) == 0);
}

static void show(char *buf, size_t cap, const int32_t *ids, size_t n) {
    size_t o = 0;
    buf[0] = 0;
    for (size_t i = 0; i < n && o + 16 < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%d", i ? " " : "", ids[i]);
}

static void check_encode(const sn_tokenizer *t, const char *text, bool special, const int32_t *want, size_t nw) {
    sn_err err = {0};
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = sn_tokenizer_encode(t, text, strlen(text), special, &ids, &n, &err);
    char got[256], exp[256];
    show(got, sizeof got, ids, n);
    show(exp, sizeof exp, want, nw);
    CHECK(rc == SNUG_OK && ids_eq(ids, n, want, nw), "encode \"%s\"%s: got [%s] (%s), want [%s]", text,
          special ? " with special tokens" : "", got, rc ? err.msg : "ok", exp);
    sn_free(ids);
}

static void check_decode(const sn_tokenizer *t, const int32_t *ids, size_t n, bool skip, const char *want) {
    sn_err err = {0};
    char *text = NULL;
    size_t len = 0;
    int rc = sn_tokenizer_decode(t, ids, n, skip, &text, &len, &err);
    CHECK(rc == SNUG_OK && len == strlen(want) && memcmp(text, want, len) == 0, "decode: got \"%s\" (%s), want \"%s\"",
          text ? text : "", rc ? err.msg : "ok", want);
    sn_free(text);
}

/* Streams ids; want[i] is the text step i must return ("" for none), then
 * the flush's. */
static void check_stream(const sn_tokenizer *t, const int32_t *ids, size_t n, const char *const *want) {
    sn_err err = {0};
    sn_tokstream *s = NULL;
    CHECK(sn_tokstream_new(t, false, &s, &err) == SNUG_OK, "stream: %s", err.msg);
    if (!s)
        return;
    for (size_t i = 0; i <= n; i++) {
        const char *text;
        size_t len;
        int rc = i < n ? sn_tokstream_step(s, ids[i], &text, &len, &err) : sn_tokstream_flush(s, &text, &len, &err);
        CHECK(rc == SNUG_OK && len == strlen(want[i]) && memcmp(text, want[i], len) == 0,
              "stream %s %zu: got \"%.*s\" (%s), want \"%s\"", i < n ? "step" : "flush", i, (int)(rc ? 0 : len),
              rc ? "" : text, rc ? err.msg : "ok", want[i]);
    }
    sn_tokstream_free(s);
}

static void test_bytelevel(const char *json) {
    sn_err err = {0};
    sn_tokenizer *t = NULL;
    const char *path = write_file("bytelevel.json", json, strlen(json));
    if (sn_tokenizer_load(path, &t, &err) != SNUG_OK) {
        CHECK(0, "load %s: %s", path, err.msg);
        return;
    }
    /* "hello" -> h e l l o: he (rank 1), ll (3), llo (4); " the" -> Ġt (0),
     * he (1), Ġthe (2); " world" -> Ġw (5) o r l d */
    check_encode(t, "hello the world", false, (const int32_t[]){257, 260, 258, 261, 'o', 'r', 'l', 'd'}, 8);
    check_encode(t, "", false, NULL, 0);
    /* the special token is cut out before the regex splits; the ByteLevel
     * post-processor adds nothing */
    check_encode(t, "<|im_start|>hi<|pad|><|im_start|>", true, (const int32_t[]){262, 'h', 'i', 263, 262}, 5);
    /* "é" is the bytes c3 a9; in "a  b", \s+(?!\S) takes the first space
     * alone and " ?\p{L}+" the second with the b */
    check_encode(t, "\xc3\xa9", false, (const int32_t[]){0xc3, 0xa9}, 2);
    check_encode(t, "a  b", false, (const int32_t[]){'a', ' ', ' ', 'b'}, 4);
    CHECK(sn_tokenizer_token_id(t, "<|im_start|>") == 262, "token_id <|im_start|>");
    CHECK(sn_tokenizer_token_id(t, "he") == 257, "token_id he");
    CHECK(sn_tokenizer_token_id(t, "nope") == -1, "token_id nope");
    CHECK(sn_tokenizer_vocab_size(t) == 264, "vocab size %d", sn_tokenizer_vocab_size(t));
    CHECK(sn_tokenizer_is_special(t, 262) && !sn_tokenizer_is_special(t, 257), "is_special");
    size_t len = 0;
    const char *s = sn_tokenizer_token(t, 258, &len);
    CHECK(s && len == 5 && memcmp(s, "\xc4\xa0the", 5) == 0, "token 258");
    CHECK(!sn_tokenizer_token(t, 264, &len) && !sn_tokenizer_token(t, -1, &len), "token out of range");

    check_decode(t, (const int32_t[]){257, 260, 258, 261, 'o', 'r', 'l', 'd'}, 8, false, "hello the world");
    check_decode(t, (const int32_t[]){262, 'h', 'i', 263}, 4, false, "<|im_start|>hi<|pad|>");
    check_decode(t, (const int32_t[]){262, 'h', 'i', 263}, 4, true, "hi");
    /* invalid UTF-8: one U+FFFD per maximal invalid subpart (0xff; then e2 82
     * cut short by 'a'); an incomplete character at the end likewise */
    check_decode(t, (const int32_t[]){0xff, 'a', 0xe2, 0x82, 'a', 0xe2}, 6, false,
                 "\xef\xbf\xbd" "a\xef\xbf\xbd" "a\xef\xbf\xbd");
    /* streaming: "é" waits for its second byte; an invalid byte comes out as
     * U+FFFD with the text after it; the flush gives what is held back */
    const char *const st1[] = {"", "\xc3\xa9", " the", "", "\xef\xbf\xbd\x61" /* U+FFFD a */, "", "\xef\xbf\xbd"};
    check_stream(t, (const int32_t[]){0xc3, 0xa9, 258, 0xff, 'a', 0xe2}, 6, st1);
    /* a 4-byte emoji over four tokens */
    const char *const st2[] = {"h", "", "", "", "\xf0\x9f\x98\x80", ""};
    check_stream(t, (const int32_t[]){'h', 0xf0, 0x9f, 0x98, 0x80}, 5, st2);

    /* errors: invalid UTF-8 input, an id outside the vocabulary */
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = sn_tokenizer_encode(t, "ab\xff", 3, false, &ids, &n, &err);
    CHECK(rc == SNUG_ERR_INVALID_ARG && strstr(err.msg, "byte 2"), "invalid UTF-8: %d %s", rc, err.msg);
    rc = sn_tokenizer_encode(t, "a\xed\xa0\x80", 4, false, &ids, &n, &err); /* a surrogate */
    CHECK(rc == SNUG_ERR_INVALID_ARG && strstr(err.msg, "byte 1"), "surrogate: %d %s", rc, err.msg);
    char *text = NULL;
    rc = sn_tokenizer_decode(t, (const int32_t[]){5, 264}, 2, false, &text, &n, &err);
    CHECK(rc == SNUG_ERR_RANGE && strstr(err.msg, "264") && !text, "decode 264: %d %s", rc, err.msg);
    sn_tokenizer_free(t);
}

static void test_sentencepiece(const char *json) {
    sn_err err = {0};
    sn_tokenizer *t = NULL;
    if (sn_tokenizer_load_json(json, strlen(json), "sp.json", &t, &err) != SNUG_OK) {
        CHECK(0, "load sp.json: %s", err.msg);
        return;
    }
    /* "▁hi▁hello": ▁h at 0 then at 3 (rank 0, leftmost first), ▁hi (1),
     * ll (2), ▁he (3), ▁hell (4), ▁hello (5) */
    check_encode(t, "hi hello", false, (const int32_t[]){263, 270}, 2);
    check_encode(t, "hi hello", true, (const int32_t[]){1, 263, 270}, 3);
    /* é is not in the vocabulary: its bytes c3 a9 as <0xC3> <0xA9> */
    check_encode(t, "h\xc3\xa9", false, (const int32_t[]){262, 3 + 0xc3, 3 + 0xa9}, 3);
    /* special tokens are cut out of the raw text; Prepend applies to each
     * remaining piece (tokenizers' behaviour) */
    check_encode(t, "<s>hi</s>", false, (const int32_t[]){1, 263, 2}, 3);
    check_encode(t, "", true, (const int32_t[]){1}, 1);
    check_decode(t, (const int32_t[]){1, 263, 270}, 3, false, "<s> hi hello");
    check_decode(t, (const int32_t[]){1, 263, 270}, 3, true, "hi hello");
    check_decode(t, (const int32_t[]){262, 3 + 0xc3, 3 + 0xa9}, 3, false, "h\xc3\xa9");
    /* a run of byte tokens that is not UTF-8: one U+FFFD per byte */
    check_decode(t, (const int32_t[]){263, 3 + 0xc3, 3 + 'a'}, 3, false, "hi\xef\xbf\xbd\xef\xbf\xbd");
    /* streamed: the leading space of "▁hi" is stripped as in a whole
     * decode, the next word keeps its own; é waits for its second byte */
    const char *const st[] = {"hi", " hello", " h", "", "\xc3\xa9", ""};
    check_stream(t, (const int32_t[]){263, 270, 262, 3 + 0xc3, 3 + 0xa9}, 5, st);
    sn_tokenizer_free(t);

    /* without byte_fallback, unknown characters become <unk>, fused */
    char *nofb = edit(json, "\"byte_fallback\": true", "\"byte_fallback\": false");
    if (sn_tokenizer_load_json(nofb, strlen(nofb), "sp-nofb.json", &t, &err) != SNUG_OK) {
        CHECK(0, "load sp-nofb.json: %s", err.msg);
    } else {
        check_encode(t, "h\xc3\xa9\xc3\xa9 hi", false, (const int32_t[]){262, 0, 263}, 3);
        sn_tokenizer_free(t);
    }
    free(nofb);

    /* a post-processor snug does not know: fine without special tokens,
     * refused with them */
    char *bert = edit(json, BOS_TEMPLATE, "{\"type\": \"BertProcessing\", \"sep\": [\"</s>\", 2], \"cls\": [\"<s>\", 1]}");
    if (sn_tokenizer_load_json(bert, strlen(bert), "sp-bert.json", &t, &err) != SNUG_OK) {
        CHECK(0, "load sp-bert.json: %s", err.msg);
    } else {
        check_encode(t, "hi", false, (const int32_t[]){263}, 1);
        int32_t *ids = NULL;
        size_t n;
        int rc = sn_tokenizer_encode(t, "hi", 2, true, &ids, &n, &err);
        CHECK(rc == SNUG_ERR_UNSUPPORTED && strstr(err.msg, "'BertProcessing'"), "BertProcessing: %d %s", rc,
              err.msg);
        sn_tokenizer_free(t);
    }
    free(bert);
}

/* A file that must not load: rc and a piece of the message. */
static void check_bad(const char *name, const char *json, size_t n, int want_rc, const char *want_msg) {
    sn_err err = {0};
    sn_tokenizer *t = NULL;
    const char *path = write_file(name, json, n);
    int rc = sn_tokenizer_load(path, &t, &err);
    CHECK(rc == want_rc && !t && strstr(err.msg, want_msg) && strstr(err.msg, name),
          "%s: got %d \"%s\", want %d with \"%s\"", name, rc, err.msg, want_rc, want_msg);
    sn_tokenizer_free(t);
}

static void test_errors(const char *bl, const char *sp) {
    size_t n = strlen(bl);
    check_bad("truncated.json", bl, n / 2, SNUG_ERR_PARSE, "truncated");
    check_bad("truncated-end.json", bl, n - 3, SNUG_ERR_PARSE, "malformed JSON");
    check_bad("array.json", "[1, 2]", 6, SNUG_ERR_PARSE, "not a JSON object");
    check_bad("empty.json", "", 0, SNUG_ERR_PARSE, "malformed JSON");
    struct {
        const char *name, *from, *to, *msg;
        int rc;
    } cases[] = {
        {"wordpiece.json", "\"type\": \"BPE\"", "\"type\": \"WordPiece\"", "unsupported tokenizer model type 'WordPiece'",
         SNUG_ERR_UNSUPPORTED},
        {"unigram.json", "\"type\": \"BPE\"", "\"type\": \"Unigram\"", "model.type: unsupported tokenizer model type 'Unigram'",
         SNUG_ERR_UNSUPPORTED},
        {"pre.json", "\"type\": \"ByteLevel\", \"add_prefix_space\": false", "\"type\": \"Whitespace\", \"x\": false",
         "pre_tokenizer: unsupported pre-tokenizer type 'Whitespace'", SNUG_ERR_UNSUPPORTED},
        {"dec.json", "\"type\": \"ByteLevel\", \"add_prefix_space\": true}", "\"type\": \"WordPiece\"}",
         "decoder: unsupported decoder type 'WordPiece'", SNUG_ERR_UNSUPPORTED},
        {"norm.json", "\"normalizer\": null", "\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFC\"},"
         " {\"type\": \"Lowercase\"}]}", "normalizer.normalizers[1]: unsupported normalizer type 'Lowercase'",
         SNUG_ERR_UNSUPPORTED},
        {"regex.json", "\"type\": \"ByteLevel\", \"add_prefix_space\": false", "\"type\": \"Split\", \"pattern\":"
         " {\"Regex\": \"(?<\"}, \"behavior\": \"Isolated\", \"add_prefix_space\": false", "PCRE2 cannot compile",
         SNUG_ERR_UNSUPPORTED},
        {"behavior.json", "\"type\": \"ByteLevel\", \"add_prefix_space\": false", "\"type\": \"Split\", \"pattern\":"
         " {\"String\": \" \"}, \"behavior\": \"Sideways\", \"add_prefix_space\": false", "unknown split behavior 'Sideways'",
         SNUG_ERR_PARSE},
        {"merge.json", "\"ll o\"", "\"ll q\"", "model.merges[4]: the merged token \"llq\" is not in the vocabulary",
         SNUG_ERR_PARSE},
        {"merge2.json", "\"ll o\"", "\"lo o\"", "model.merges[4]: token \"lo\" is not in the vocabulary", SNUG_ERR_PARSE},
        {"mergeform.json", "\"ll o\"", "3", "model.merges[4]: expected \"a b\" or [\"a\", \"b\"]", SNUG_ERR_PARSE},
        {"id.json", "\"he\": 257", "\"he\": -4", "expected an integer", SNUG_ERR_PARSE},
        {"dupid.json", "\"he\": 257", "\"he\": 256", "id 256 is given to", SNUG_ERR_PARSE},
        /* the fuzz stage's finding: one id near 2^31 asked for 3.4 GB of id tables */
        {"sparse.json", "\"he\": 257", "\"he\": 2147483000", "model.vocab: ids run up to 2147483000",
         SNUG_ERR_PARSE},
        {"nomodel.json", "\"model\":", "\"modell\":", "model: missing or not an object", SNUG_ERR_PARSE},
        {"dropout.json", "\"dropout\": null", "\"dropout\": 0.1", "model.dropout", SNUG_ERR_UNSUPPORTED},
        {"content.json", "\"content\": \"<|pad|>\"", "\"content\": 7", "added_tokens[1]: 'content' is not a string",
         SNUG_ERR_PARSE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *j = edit(bl, cases[i].from, cases[i].to);
        CHECK(j, "%s: \"%s\" not in the fixture", cases[i].name, cases[i].from);
        if (j)
            check_bad(cases[i].name, j, strlen(j), cases[i].rc, cases[i].msg);
        free(j);
    }
    char *unk = edit(sp, "\"unk_token\": \"<unk>\"", "\"unk_token\": \"<nope>\"");
    check_bad("unk.json", unk, strlen(unk), SNUG_ERR_PARSE, "model.unk_token: \"<nope>\" is not in the vocabulary");
    free(unk);
    sn_err err = {0};
    sn_tokenizer *t = NULL;
    int rc = sn_tokenizer_load("/nonexistent/tokenizer.json", &t, &err);
    CHECK(rc == SNUG_ERR_IO && strstr(err.msg, "/nonexistent/tokenizer.json"), "missing file: %d %s", rc, err.msg);
}

/* ---- allocation failures ---------------------------------------------------- */

static long budget = -1; /* allocations left before one fails; -1: no limit */
static long live;        /* blocks held */

static void *f_malloc(void *u, size_t n) {
    (void)u;
    if (budget == 0)
        return NULL;
    if (budget > 0)
        budget--;
    size_t *p = malloc(n + 16);
    if (!p)
        return NULL;
    live++;
    return (char *)p + 16;
}

static void *f_realloc(void *u, void *q, size_t n) {
    if (!q)
        return f_malloc(u, n);
    if (budget == 0)
        return NULL;
    if (budget > 0)
        budget--;
    char *p = realloc((char *)q - 16, n + 16);
    return p ? p + 16 : NULL;
}

static void f_free(void *u, void *q) {
    (void)u;
    if (q) {
        live--;
        free((char *)q - 16);
    }
}

/* Load, encode, decode and stream with the k-th allocation failing, for
 * every k until none fails: each step returns SNUG_OK or SNUG_ERR_OOM, and
 * nothing is left allocated. */
static void test_oom(const char *json) {
    snug_allocator a = {f_malloc, f_realloc, f_free, NULL};
    snug_set_allocator(&a);
    long k;
    for (k = 0; k < 100000; k++) {
        budget = k;
        live = 0;
        sn_err err = {0};
        sn_tokenizer *t = NULL;
        int32_t *ids = NULL;
        char *text = NULL;
        size_t n = 0, len = 0;
        sn_tokstream *s = NULL;
        int rc = sn_tokenizer_load_json(json, strlen(json), "oom.json", &t, &err);
        if (rc == SNUG_OK)
            rc = sn_tokenizer_encode(t, "hi hello h\xc3\xa9", 12, true, &ids, &n, &err);
        if (rc == SNUG_OK)
            rc = sn_tokenizer_decode(t, ids, n, false, &text, &len, &err);
        if (rc == SNUG_OK)
            rc = sn_tokstream_new(t, false, &s, &err);
        for (size_t i = 0; rc == SNUG_OK && i < n; i++) {
            const char *x;
            size_t xl;
            rc = sn_tokstream_step(s, ids[i], &x, &xl, &err);
        }
        bool done = rc == SNUG_OK && budget > 0;
        CHECK(rc == SNUG_OK || rc == SNUG_ERR_OOM, "allocation %ld failing: status %d (%s)", k, rc, err.msg);
        CHECK(rc != SNUG_OK || (n == 6 && len == 16), "allocation %ld failing: %zu ids, %zu bytes", k, n, len);
        sn_tokstream_free(s);
        sn_free(text);
        sn_free(ids);
        sn_tokenizer_free(t);
        CHECK(live == 0, "allocation %ld failing: %ld blocks leaked", k, live);
        if (done || failures)
            break;
    }
    snug_set_allocator(NULL);
    printf("allocation failures: %ld failure points checked\n", k);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/snug-test-tok-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char *bl = bytelevel_json(), *sp = sp_json(true, BOS_TEMPLATE);
    test_bytelevel(bl);
    test_sentencepiece(sp);
    test_errors(bl, sp);
    test_oom(sp);
    free(bl);
    free(sp);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    if (failures) {
        fprintf(stderr, "test_tokenizer: %d failures\n", failures);
        return 1;
    }
    printf("test_tokenizer: all passed\n");
    return 0;
}
#endif
