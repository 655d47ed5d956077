/* snug's tokenizer for tests/models/check_tokenizer.py: reads requests from
 * stdin, one a line, and answers each with one line on stdout.
 *   tok_ids TOKENIZER_JSON
 *   E <hex of UTF-8 text>   -> ids of encode(text, add_special_tokens=False), space-separated
 *   S <hex>                 -> the same with add_special_tokens=True
 *   D <ids>                 -> x<hex of decode(ids)> then, for each id, the stream's text
 *                              after it (x<hex>, or - when it returned none), then
 *                              the stream's flush (x<hex> or -)
 *   K <ids>                 -> x<hex of decode(ids, skip_special_tokens=True)>
 * A request that fails answers "ERR <message>". Exit 1 if the tokenizer
 * does not load. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genai/tokenizer.h"

static void put_hex(const char *s, size_t n) {
    putchar('x');
    for (size_t i = 0; i < n; i++)
        printf("%02x", (unsigned char)s[i]);
}

static size_t parse_ids(char *s, int32_t **ids) {
    size_t n = 0, cap = 16;
    *ids = malloc(cap * sizeof **ids);
    for (char *tok = strtok(s, " \n"); tok; tok = strtok(NULL, " \n")) {
        if (n == cap)
            *ids = realloc(*ids, (cap *= 2) * sizeof **ids);
        (*ids)[n++] = (int32_t)strtol(tok, NULL, 10);
    }
    return n;
}

static int unhex(char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; }

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: tok_ids TOKENIZER_JSON < requests\n");
        return 2;
    }
    sn_err err = {0};
    sn_tokenizer *t = NULL;
    if (sn_tokenizer_load(argv[1], &t, &err) != SNUG_OK) {
        fprintf(stderr, "tok_ids: %s\n", err.msg);
        return 1;
    }
    sn_tokstream *st = NULL;
    if (sn_tokstream_new(t, false, &st, &err) != SNUG_OK) {
        fprintf(stderr, "tok_ids: %s\n", err.msg);
        sn_tokenizer_free(t);
        return 1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    while ((got = getline(&line, &cap, stdin)) > 0) {
        char kind = line[0], *arg = got > 2 ? line + 2 : line + got;
        if (kind == 'E' || kind == 'S') {
            size_t hn = strcspn(arg, "\n"), n = hn / 2;
            char *text = malloc(n + 1);
            for (size_t i = 0; i < n; i++)
                text[i] = (char)(unhex(arg[2 * i]) << 4 | unhex(arg[2 * i + 1]));
            int32_t *ids = NULL;
            size_t nid = 0;
            if (sn_tokenizer_encode(t, text, n, kind == 'S', &ids, &nid, &err) != SNUG_OK) {
                printf("ERR %s", err.msg);
            } else {
                for (size_t i = 0; i < nid; i++)
                    printf(i ? " %d" : "%d", ids[i]);
            }
            sn_free(ids);
            free(text);
        } else if (kind == 'D' || kind == 'K') {
            int32_t *ids;
            size_t n = parse_ids(arg, &ids);
            char *text = NULL;
            size_t len = 0;
            if (sn_tokenizer_decode(t, ids, n, kind == 'K', &text, &len, &err) != SNUG_OK) {
                printf("ERR %s", err.msg);
                free(ids);
                putchar('\n');
                continue;
            }
            put_hex(text, len);
            sn_free(text);
            for (size_t i = 0; kind == 'D' && i <= n; i++) {
                const char *s;
                size_t sl;
                int rc = i < n ? sn_tokstream_step(st, ids[i], &s, &sl, &err) : sn_tokstream_flush(st, &s, &sl, &err);
                if (rc != SNUG_OK) {
                    printf(" ERR %s", err.msg);
                    sn_tokstream_reset(st);
                    break;
                }
                putchar(' ');
                if (sl)
                    put_hex(s, sl);
                else
                    putchar('-');
            }
            free(ids);
        } else {
            printf("ERR unknown request '%c'", kind);
        }
        putchar('\n');
    }
    free(line);
    sn_tokstream_free(st);
    sn_tokenizer_free(t);
    return 0;
}
