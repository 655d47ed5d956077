/* Encoding, decoding and decode streams (tokenizer.h), step for step as
 * tokenizers 0.23 does them:
 *
 *   encode: added tokens that are not "normalized" are cut out of the raw
 *   text; each remaining piece is normalized and the normalized added tokens
 *   cut out of it; the pre-tokenizers split the rest into words; BPE turns
 *   each word into ids; the post-processor adds special tokens on request.
 *
 *   decode: ids -> token strings -> the decoder chain -> one string.
 *
 * Offsets are not tracked: ids do not depend on them, except for Metaspace's
 * prepend_scheme "first", which needs only whether a piece starts at the
 * beginning of the text (tk_piece.origin). */
#include <string.h>

#include <utf8proc.h>

#include "genai/tokenizer_impl.h"

/* ---- buffers ------------------------------------------------------------ */

static int nbuf_reserve(tk_nbuf *b, size_t extra, sn_err *err) {
    size_t need;
    if (!sn_add_ok(b->len, extra, &need) || !sn_add_ok(need, 1, &need))
        return sn_errf(err, SNUG_ERR_OOM, "text too long");
    if (need <= b->cap)
        return SNUG_OK;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap *= 2;
    char *p = sn_realloc(b->p, cap);
    if (!p)
        return sn_errf(err, SNUG_ERR_OOM, "out of memory for %zu bytes of text", cap);
    b->p = p;
    b->cap = cap;
    return SNUG_OK;
}

static int nbuf_put(tk_nbuf *b, const char *s, size_t n, sn_err *err) {
    SN_TRY(nbuf_reserve(b, n, err));
    if (n)
        memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return SNUG_OK;
}

static int nbuf_putc(tk_nbuf *b, uint32_t cp, sn_err *err) {
    char u[4];
    return nbuf_put(b, u, tk_u8enc(cp, u), err);
}

static int vec_grow(void **v, size_t *cap, size_t need, size_t elem, sn_err *err) {
    if (need <= *cap)
        return SNUG_OK;
    size_t nc = *cap ? *cap : 16, bytes;
    while (nc < need)
        nc *= 2;
    if (!sn_mul_ok(nc, elem, &bytes))
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    void *p = sn_realloc(*v, bytes);
    if (!p)
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    *v = p;
    *cap = nc;
    return SNUG_OK;
}

/* A match list over a string, as tokenizers' Pattern::find_matches: spans
 * that cover it in order, m marking those the pattern matched. */
typedef struct tk_span {
    size_t s, e;
    bool m;
} tk_span;

typedef struct tk_spans {
    tk_span *v;
    size_t n, cap;
} tk_spans;

static int span_push(tk_spans *sp, size_t s, size_t e, bool m, sn_err *err) {
    SN_TRY(vec_grow((void **)&sp->v, &sp->cap, sp->n + 1, sizeof *sp->v, err));
    sp->v[sp->n++] = (tk_span){s, e, m};
    return SNUG_OK;
}

/* Per-call working state; nothing in it outlives the call. */
typedef struct tk_ctx {
    const sn_tokenizer *t;
    sn_err *err;
    pcre2_match_data *md; /* owned, made on first use */
    tk_spans sp, sp2;
} tk_ctx;

static void ctx_free(tk_ctx *c) {
    if (c->md)
        pcre2_match_data_free(c->md);
    sn_free(c->sp.v);
    sn_free(c->sp2.v);
}

/* Every match of re in s[0..n) with the gaps between, as the onig crate's
 * find_iter that tokenizers uses: an empty match right where the previous
 * match ended is skipped by one character. */
static int find_re(tk_ctx *c, const tk_regex *re, const char *s, size_t n, tk_spans *out) {
    out->n = 0;
    if (n == 0)
        return span_push(out, 0, 0, false, c->err);
    if (!c->md && !(c->md = pcre2_match_data_create(1, c->t->gctx)))
        return sn_errf(c->err, SNUG_ERR_OOM, "out of memory");
    size_t at = 0, prev = 0, last_end = SIZE_MAX;
    while (at <= n) {
        int rc = pcre2_match(re->code, (PCRE2_SPTR)s, n, at, PCRE2_NO_UTF_CHECK, c->md, NULL);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT) /* the interpreter keeps its stack on the heap */
            rc = pcre2_match(re->code, (PCRE2_SPTR)s, n, at, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, c->md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc == PCRE2_ERROR_NOMEMORY)
            return sn_errf(c->err, SNUG_ERR_OOM, "out of memory matching a pattern");
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return sn_errf(c->err, SNUG_ERR_RANGE, "regex match failed at byte %zu of a %zu-byte piece: %s", at, n,
                           (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
        size_t ms = ov[0], me = ov[1];
        if (ms == me && last_end == me) {
            at += at < n ? tk_u8len((unsigned char)s[at]) : 1;
            continue;
        }
        if (prev != ms)
            SN_TRY(span_push(out, prev, ms, false, c->err));
        SN_TRY(span_push(out, ms, me, true, c->err));
        prev = at = last_end = me;
    }
    if (prev != n)
        SN_TRY(span_push(out, prev, n, false, c->err));
    return SNUG_OK;
}

/* The same with a predicate on characters: each matching character is one
 * match (tokenizers' Pattern for Fn(char) -> bool and for char). */
typedef bool (*tk_char_pred)(uint32_t cp, uint32_t arg);

static int find_chars(tk_ctx *c, tk_char_pred pred, uint32_t arg, const char *s, size_t n, tk_spans *out) {
    out->n = 0;
    if (n == 0)
        return span_push(out, 0, 0, false, c->err);
    size_t last = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = tk_u8dec(s + i, &cp);
        if (pred(cp, arg)) {
            if (last < i)
                SN_TRY(span_push(out, last, i, false, c->err));
            SN_TRY(span_push(out, i, i + k, true, c->err));
            last = i + k;
        }
        i += k;
    }
    if (last < n)
        SN_TRY(span_push(out, last, n, false, c->err));
    return SNUG_OK;
}

static bool is_char(uint32_t cp, uint32_t arg) { return cp == arg; }

static bool is_numeric(uint32_t cp, uint32_t arg) {
    (void)arg; /* Rust's char::is_numeric: Nd, Nl, No */
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)cp);
    return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}

/* NormalizedString::split's behaviors: in -> out, spans to keep (m unused). */
static int apply_behavior(tk_ctx *c, const tk_spans *in, tk_behavior b, tk_spans *out) {
    out->n = 0;
    bool prev_m = false;
    switch (b) {
    case TK_ISOLATED:
        for (size_t i = 0; i < in->n; i++)
            SN_TRY(span_push(out, in->v[i].s, in->v[i].e, false, c->err));
        break;
    case TK_REMOVED:
        for (size_t i = 0; i < in->n; i++)
            if (!in->v[i].m)
                SN_TRY(span_push(out, in->v[i].s, in->v[i].e, false, c->err));
        break;
    case TK_CONTIGUOUS:
        for (size_t i = 0; i < in->n; i++) {
            if (in->v[i].m == prev_m && out->n)
                out->v[out->n - 1].e = in->v[i].e;
            else
                SN_TRY(span_push(out, in->v[i].s, in->v[i].e, false, c->err));
            prev_m = in->v[i].m;
        }
        break;
    case TK_MERGED_PREV:
        for (size_t i = 0; i < in->n; i++) {
            if (in->v[i].m && !prev_m && out->n)
                out->v[out->n - 1].e = in->v[i].e;
            else
                SN_TRY(span_push(out, in->v[i].s, in->v[i].e, false, c->err));
            prev_m = in->v[i].m;
        }
        break;
    case TK_MERGED_NEXT:
        /* built from the end, then reversed */
        for (size_t i = in->n; i-- > 0;) {
            if (in->v[i].m && !prev_m && out->n)
                out->v[out->n - 1].s = in->v[i].s;
            else
                SN_TRY(span_push(out, in->v[i].s, in->v[i].e, false, c->err));
            prev_m = in->v[i].m;
        }
        for (size_t i = 0, j = out->n; i + 1 < j; i++, j--) {
            tk_span x = out->v[i];
            out->v[i] = out->v[j - 1];
            out->v[j - 1] = x;
        }
        break;
    }
    return SNUG_OK;
}

/* ---- normalizers -------------------------------------------------------- */

static int replace_all(tk_ctx *c, const tk_regex *re, const char *with, size_t wlen, const char *s, size_t n,
                       tk_nbuf *out) {
    SN_TRY(find_re(c, re, s, n, &c->sp));
    out->len = 0;
    SN_TRY(nbuf_reserve(out, n, c->err));
    out->p[0] = 0;
    for (size_t i = 0; i < c->sp.n; i++) {
        const tk_span *x = &c->sp.v[i];
        if (x->m)
            SN_TRY(nbuf_put(out, with, wlen, c->err));
        else
            SN_TRY(nbuf_put(out, s + x->s, x->e - x->s, c->err));
    }
    return SNUG_OK;
}

static int norm_one(tk_ctx *c, const tk_norm *nm, const char *s, size_t n, tk_nbuf *out) {
    out->len = 0;
    SN_TRY(nbuf_reserve(out, n, c->err));
    out->p[0] = 0;
    switch (nm->kind) {
    case TK_NORM_NFC:
    case TK_NORM_NFD:
    case TK_NORM_NFKC:
    case TK_NORM_NFKD: {
        if (n == 0)
            return SNUG_OK;
        int opt = UTF8PROC_STABLE;
        opt |= nm->kind == TK_NORM_NFC || nm->kind == TK_NORM_NFKC ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE;
        if (nm->kind == TK_NORM_NFKC || nm->kind == TK_NORM_NFKD)
            opt |= UTF8PROC_COMPAT;
        utf8proc_uint8_t *dst = NULL; /* utf8proc's own malloc */
        utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &dst, opt);
        if (r < 0)
            return sn_errf(c->err, r == UTF8PROC_ERROR_NOMEM ? SNUG_ERR_OOM : SNUG_ERR_RANGE,
                           "Unicode normalization failed: %s", utf8proc_errmsg(r));
        int rc = nbuf_put(out, (const char *)dst, (size_t)r, c->err);
        free(dst);
        return rc;
    }
    case TK_NORM_PREPEND:
        if (n)
            SN_TRY(nbuf_put(out, nm->str, nm->len, c->err));
        return nbuf_put(out, s, n, c->err);
    case TK_NORM_REPLACE:
        return replace_all(c, &nm->re, nm->str, nm->len, s, n, out);
    case TK_NORM_STRIP: {
        size_t b = 0, e = n;
        uint32_t cp;
        while (nm->left && b < e && tk_is_space((tk_u8dec(s + b, &cp), cp)))
            b += tk_u8len((unsigned char)s[b]);
        while (nm->right && e > b) {
            size_t k = e - 1;
            while (k > b && ((unsigned char)s[k] & 0xc0) == 0x80)
                k--;
            tk_u8dec(s + k, &cp);
            if (!tk_is_space(cp))
                break;
            e = k;
        }
        return nbuf_put(out, s + b, e - b, c->err);
    }
    }
    return sn_errf(c->err, SNUG_ERR_INTERNAL, "unknown normalizer kind %d", (int)nm->kind);
}

/* The normalizer chain into out (its content replaced). */
static int normalize(tk_ctx *c, const char *s, size_t n, tk_nbuf *out) {
    const sn_tokenizer *t = c->t;
    tk_nbuf other = {0};
    int rc = nbuf_put(out, NULL, 0, c->err);
    out->len = 0;
    if (rc == SNUG_OK)
        rc = nbuf_put(out, s, n, c->err);
    for (size_t i = 0; i < t->n_norms && rc == SNUG_OK; i++) {
        rc = norm_one(c, &t->norms[i], out->p, out->len, &other);
        tk_nbuf x = *out;
        *out = other;
        other = x;
    }
    sn_free(other.p);
    return rc;
}

int tk_normalize(const sn_tokenizer *t, const char *s, size_t n, tk_nbuf *out, sn_err *err) {
    tk_ctx c = {.t = t, .err = err};
    int rc = normalize(&c, s, n, out);
    ctx_free(&c);
    return rc;
}

/* ---- encoding ----------------------------------------------------------- */

/* A piece of the text on its way to ids: bytes [off, off+len) of the
 * encoder's arena, or an added token already (id >= 0). */
typedef struct tk_piece {
    size_t off, len;
    int32_t id;
    bool origin; /* starts at byte 0 of the input */
} tk_piece;

typedef struct tk_pieces {
    tk_piece *v;
    size_t n, cap;
} tk_pieces;

typedef struct tk_sym {
    int32_t id, prev, next;
    bool gone;
} tk_sym;

typedef struct tk_cand {
    uint32_t rank;
    int32_t pos, id;
} tk_cand;

typedef struct tk_enc {
    tk_ctx c;
    tk_nbuf arena, tmp;
    tk_pieces in, out;
    int32_t *ids;
    size_t n_ids, cap_ids;
    tk_sym *syms;
    size_t cap_syms;
    tk_cand *heap;
    size_t n_heap, cap_heap;
} tk_enc;

static int piece_push(tk_enc *E, size_t off, size_t len, int32_t id, bool origin) {
    if (len == 0)
        return SNUG_OK; /* tokenizers drops empty splits */
    SN_TRY(vec_grow((void **)&E->out.v, &E->out.cap, E->out.n + 1, sizeof *E->out.v, E->c.err));
    E->out.v[E->out.n++] = (tk_piece){off, len, id, origin};
    return SNUG_OK;
}

static int id_push(tk_enc *E, int32_t id) {
    SN_TRY(vec_grow((void **)&E->ids, &E->cap_ids, E->n_ids + 1, sizeof *E->ids, E->c.err));
    E->ids[E->n_ids++] = id;
    return SNUG_OK;
}

/* Appends s to the arena, returns its offset there. */
static int arena_put(tk_enc *E, const char *s, size_t n, size_t *off) {
    *off = E->arena.len;
    return nbuf_put(&E->arena, s, n, E->c.err);
}

static void swap_pieces(tk_enc *E) {
    tk_pieces x = E->in;
    E->in = E->out;
    E->out = x;
    E->out.n = 0;
}

/* Unicode's \w as the regex crate has it (regex_syntax::is_word_character),
 * which single_word tokens check their neighbours against. */
static bool is_word_char(uint32_t cp) {
    if (cp == '_' || cp == 0x200c || cp == 0x200d)
        return true;
    if ((cp >= 0x24b6 && cp <= 0x24e9) || (cp >= 0x1f130 && cp <= 0x1f149) || (cp >= 0x1f150 && cp <= 0x1f169) ||
        (cp >= 0x1f170 && cp <= 0x1f189))
        return true; /* letters in circles and squares: Alphabetic though So */
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_PC: return true;
    default: return false;
    }
}

/* The character ending just before s[i] (i > 0). */
static uint32_t char_before(const char *s, size_t i, size_t *start) {
    size_t k = i - 1;
    while (k > 0 && ((unsigned char)s[k] & 0xc0) == 0x80)
        k--;
    uint32_t cp;
    tk_u8dec(s + k, &cp);
    *start = k;
    return cp;
}

/* Cuts the added tokens of matcher m out of piece p (AddedVocabulary's
 * find_matches: leftmost-longest matches, the search resuming after each
 * match, single_word matches dropped, lstrip/rstrip taking the whitespace
 * beside a token into it). */
static int split_added(tk_enc *E, const tk_matcher *m, const tk_piece *p) {
    const sn_tokenizer *t = E->c.t;
    if (m->n == 0)
        return piece_push(E, p->off, p->len, -1, p->origin);
    const char *s = E->arena.p + p->off;
    size_t n = p->len, pos = 0, done = 0;
    while (pos < n) {
        unsigned char b = (unsigned char)s[pos];
        const tk_added *hit = NULL;
        for (uint32_t k = m->first[b]; k < m->first[b + 1]; k++) {
            const tk_added *a = &t->added[m->order[k]];
            const char *c = a->normalized ? a->norm : a->content;
            size_t len = a->normalized ? a->norm_len : a->len;
            if (len <= n - pos && memcmp(s + pos, c, len) == 0) {
                hit = a;
                break;
            }
        }
        if (!hit) {
            pos++;
            continue;
        }
        size_t start = pos, stop = pos + (hit->normalized ? hit->norm_len : hit->len);
        pos = stop;
        if (hit->single_word) {
            size_t k;
            uint32_t cp;
            bool start_space = start == 0 || !is_word_char(char_before(s, start, &k));
            bool stop_space = stop == n || !is_word_char((tk_u8dec(s + stop, &cp), cp));
            if (!start_space || !stop_space)
                continue;
        }
        if (hit->lstrip) {
            size_t ns = start, k;
            while (ns > 0 && tk_is_space(char_before(s, ns, &k)))
                ns = k;
            start = ns > done ? ns : done;
        }
        if (hit->rstrip) {
            uint32_t cp;
            while (stop < n && tk_is_space((tk_u8dec(s + stop, &cp), cp)))
                stop += tk_u8len((unsigned char)s[stop]);
        }
        if (done < start)
            SN_TRY(piece_push(E, p->off + done, start - done, -1, p->origin && done == 0));
        /* a token piece: its bytes no longer matter */
        SN_TRY(vec_grow((void **)&E->out.v, &E->out.cap, E->out.n + 1, sizeof *E->out.v, E->c.err));
        E->out.v[E->out.n++] = (tk_piece){p->off + start, stop > start ? stop - start : 0, hit->id, false};
        done = stop;
    }
    if (done < n)
        SN_TRY(piece_push(E, p->off + done, n - done, -1, p->origin && done == 0));
    return SNUG_OK;
}

/* Pushes the spans kept of piece p (offsets relative to it). */
static int push_spans(tk_enc *E, const tk_piece *p, const tk_spans *keep) {
    for (size_t i = 0; i < keep->n; i++)
        SN_TRY(piece_push(E, p->off + keep->v[i].s, keep->v[i].e - keep->v[i].s, -1,
                          p->origin && keep->v[i].s == 0));
    return SNUG_OK;
}

static int split_by(tk_enc *E, const tk_piece *p, tk_behavior b) {
    SN_TRY(apply_behavior(&E->c, &E->c.sp, b, &E->c.sp2));
    return push_spans(E, p, &E->c.sp2);
}

/* ByteLevel: each byte of the piece as its GPT-2 character. */
static int byte_chars(tk_enc *E, const tk_piece *p) {
    const sn_tokenizer *t = E->c.t;
    E->tmp.len = 0;
    for (size_t i = 0; i < p->len; i++)
        SN_TRY(nbuf_putc(&E->tmp, t->byte_char[(unsigned char)E->arena.p[p->off + i]], E->c.err));
    size_t off;
    SN_TRY(arena_put(E, E->tmp.p, E->tmp.len, &off));
    return piece_push(E, off, E->tmp.len, -1, p->origin);
}

static int pre_one(tk_enc *E, const tk_pre *pr, const tk_piece *p0) {
    tk_piece p = *p0;
    switch (pr->kind) {
    case TK_PRE_SPLIT:
        SN_TRY(find_re(&E->c, &pr->re, E->arena.p + p.off, p.len, &E->c.sp));
        if (pr->invert)
            for (size_t i = 0; i < E->c.sp.n; i++)
                E->c.sp.v[i].m = !E->c.sp.v[i].m;
        return split_by(E, &p, pr->behavior);
    case TK_PRE_DIGITS:
        SN_TRY(find_chars(&E->c, is_numeric, 0, E->arena.p + p.off, p.len, &E->c.sp));
        return split_by(E, &p, pr->individual ? TK_ISOLATED : TK_CONTIGUOUS);
    case TK_PRE_BYTELEVEL: {
        if (pr->add_prefix_space && E->arena.p[p.off] != ' ') {
            E->tmp.len = 0;
            SN_TRY(nbuf_put(&E->tmp, " ", 1, E->c.err));
            SN_TRY(nbuf_put(&E->tmp, E->arena.p + p.off, p.len, E->c.err));
            SN_TRY(arena_put(E, E->tmp.p, E->tmp.len, &p.off));
            p.len = E->tmp.len;
        }
        if (!pr->re.code)
            return byte_chars(E, &p);
        SN_TRY(find_re(&E->c, &pr->re, E->arena.p + p.off, p.len, &E->c.sp));
        SN_TRY(apply_behavior(&E->c, &E->c.sp, TK_ISOLATED, &E->c.sp2));
        for (size_t i = 0; i < E->c.sp2.n; i++) {
            const tk_span *x = &E->c.sp2.v[i];
            tk_piece q = {p.off + x->s, x->e - x->s, -1, p.origin && x->s == 0};
            if (q.len)
                SN_TRY(byte_chars(E, &q));
        }
        return SNUG_OK;
    }
    case TK_PRE_METASPACE: {
        E->tmp.len = 0;
        SN_TRY(nbuf_put(&E->tmp, NULL, 0, E->c.err));
        for (size_t i = 0; i < p.len; i++) {
            char ch = E->arena.p[p.off + i];
            if (ch == ' ')
                SN_TRY(nbuf_put(&E->tmp, pr->repl_utf8, pr->repl_len, E->c.err));
            else
                SN_TRY(nbuf_put(&E->tmp, &ch, 1, E->c.err));
        }
        bool starts = E->tmp.len >= pr->repl_len && memcmp(E->tmp.p, pr->repl_utf8, pr->repl_len) == 0;
        bool prepend = !starts && (pr->scheme == TK_PREPEND_ALWAYS || (pr->scheme == TK_PREPEND_FIRST && p.origin));
        size_t off = E->arena.len;
        if (prepend)
            SN_TRY(nbuf_put(&E->arena, pr->repl_utf8, pr->repl_len, E->c.err));
        SN_TRY(nbuf_put(&E->arena, E->tmp.p, E->tmp.len, E->c.err));
        p.off = off;
        p.len = E->tmp.len + (prepend ? pr->repl_len : 0);
        if (!pr->split)
            return piece_push(E, p.off, p.len, -1, p.origin);
        SN_TRY(find_chars(&E->c, is_char, pr->repl, E->arena.p + p.off, p.len, &E->c.sp));
        return split_by(E, &p, TK_MERGED_NEXT);
    }
    }
    return sn_errf(E->c.err, SNUG_ERR_INTERNAL, "unknown pre-tokenizer kind %d", (int)pr->kind);
}

/* The merge candidates, a min-heap on (rank, position) as tokenizers' Merge
 * ordering. */
static bool cand_less(const tk_cand *a, const tk_cand *b) {
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static int heap_push(tk_enc *E, tk_cand x) {
    SN_TRY(vec_grow((void **)&E->heap, &E->cap_heap, E->n_heap + 1, sizeof *E->heap, E->c.err));
    size_t i = E->n_heap++;
    while (i > 0 && cand_less(&x, &E->heap[(i - 1) / 2])) {
        E->heap[i] = E->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    E->heap[i] = x;
    return SNUG_OK;
}

static tk_cand heap_pop(tk_enc *E) {
    tk_cand top = E->heap[0], x = E->heap[--E->n_heap];
    size_t i = 0, n = E->n_heap;
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < n && cand_less(&E->heap[l], &x))
            m = l;
        if (l + 1 < n && cand_less(&E->heap[l + 1], m == i ? &x : &E->heap[l]))
            m = l + 1;
        if (m == i)
            break;
        E->heap[i] = E->heap[m];
        i = m;
    }
    if (n)
        E->heap[i] = x;
    return top;
}

static int sym_add(tk_enc *E, size_t *n, int32_t id) {
    SN_TRY(vec_grow((void **)&E->syms, &E->cap_syms, *n + 1, sizeof *E->syms, E->c.err));
    E->syms[*n] = (tk_sym){id, (int32_t)*n - 1, (int32_t)*n + 1, false};
    (*n)++;
    return SNUG_OK;
}

static int cand_at(tk_enc *E, int32_t pos, int32_t a, int32_t b) {
    const tk_merge *m = tk_merge_get(E->c.t, a, b);
    return m ? heap_push(E, (tk_cand){m->rank, pos, m->id}) : SNUG_OK;
}

/* BPE on one word (BPE::merge_word and Word::merge_all). */
static int bpe_word(tk_enc *E, const char *w, size_t n) {
    const sn_tokenizer *t = E->c.t;
    if (t->ignore_merges) {
        int32_t id = tk_vocab_get(t, w, n);
        if (id >= 0)
            return id_push(E, id);
    }
    size_t ns = 0, plen = t->cont_prefix ? strlen(t->cont_prefix) : 0, slen = t->eow_suffix ? strlen(t->eow_suffix) : 0;
    int32_t unk = -1; /* a pending unk, fused with the next unknown characters when fuse_unk */
    for (size_t i = 0; i < n;) {
        size_t k = tk_u8len((unsigned char)w[i]);
        const char *s = w + i;
        size_t sl = k;
        if ((i > 0 && plen) || (i + k == n && slen)) {
            E->tmp.len = 0;
            if (i > 0 && plen)
                SN_TRY(nbuf_put(&E->tmp, t->cont_prefix, plen, E->c.err));
            SN_TRY(nbuf_put(&E->tmp, w + i, k, E->c.err));
            if (i + k == n && slen)
                SN_TRY(nbuf_put(&E->tmp, t->eow_suffix, slen, E->c.err));
            s = E->tmp.p;
            sl = E->tmp.len;
        }
        i += k;
        int32_t id = tk_vocab_get(t, s, sl);
        if (id >= 0) {
            if (unk >= 0)
                SN_TRY(sym_add(E, &ns, unk));
            unk = -1;
            SN_TRY(sym_add(E, &ns, id));
            continue;
        }
        if (t->byte_fallback) {
            size_t j = 0;
            while (j < sl && t->byte_tok[(unsigned char)s[j]] >= 0)
                j++;
            if (j == sl) {
                /* tokenizers adds these without first adding a pending unk */
                for (j = 0; j < sl; j++)
                    SN_TRY(sym_add(E, &ns, t->byte_tok[(unsigned char)s[j]]));
                continue;
            }
        }
        if (t->unk >= 0) {
            if (unk >= 0 && !t->fuse_unk)
                SN_TRY(sym_add(E, &ns, unk));
            unk = t->unk;
        }
    }
    if (unk >= 0)
        SN_TRY(sym_add(E, &ns, unk));
    if (ns == 0)
        return SNUG_OK;
    tk_sym *y = E->syms;
    y[ns - 1].next = -1;
    E->n_heap = 0;
    for (size_t i = 0; i + 1 < ns; i++)
        SN_TRY(cand_at(E, (int32_t)i, y[i].id, y[i + 1].id));
    while (E->n_heap) {
        tk_cand top = heap_pop(E);
        y = E->syms;
        tk_sym *cur = &y[top.pos];
        if (cur->gone || cur->next < 0)
            continue;
        int32_t nx = cur->next;
        const tk_merge *m = tk_merge_get(t, cur->id, y[nx].id);
        if (!m || m->id != top.id)
            continue; /* stale: the pair changed since this candidate was queued */
        cur->id = top.id;
        cur->next = y[nx].next;
        y[nx].gone = true;
        if (cur->next >= 0)
            y[cur->next].prev = top.pos;
        if (cur->prev >= 0)
            SN_TRY(cand_at(E, cur->prev, y[cur->prev].id, cur->id));
        y = E->syms;
        cur = &y[top.pos];
        if (cur->next >= 0)
            SN_TRY(cand_at(E, top.pos, cur->id, y[cur->next].id));
    }
    for (size_t i = 0; i < ns; i++)
        if (!E->syms[i].gone)
            SN_TRY(id_push(E, E->syms[i].id));
    return SNUG_OK;
}

/* The position of the first byte that is not valid UTF-8 (overlong forms,
 * surrogates and code points past U+10FFFF included), n when all is. */
static size_t utf8_invalid_at(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        size_t k;
        unsigned char lo = 0x80, hi = 0xbf;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xc2 && c <= 0xdf) {
            k = 2;
        } else if (c >= 0xe0 && c <= 0xef) {
            k = 3;
            if (c == 0xe0)
                lo = 0xa0;
            if (c == 0xed)
                hi = 0x9f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            k = 4;
            if (c == 0xf0)
                lo = 0x90;
            if (c == 0xf4)
                hi = 0x8f;
        } else {
            return i;
        }
        if (i + k > n || s[i + 1] < lo || s[i + 1] > hi)
            return i;
        for (size_t j = 2; j < k; j++)
            if ((s[i + j] & 0xc0) != 0x80)
                return i;
        i += k;
    }
    return n;
}

size_t tk_utf8_invalid_at(const char *s, size_t n) { return utf8_invalid_at((const unsigned char *)s, n); }

static int encode(tk_enc *E, const char *text, size_t len, bool add_special) {
    const sn_tokenizer *t = E->c.t;
    sn_err *err = E->c.err;
    size_t bad = utf8_invalid_at((const unsigned char *)text, len);
    if (bad < len)
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "the text is not valid UTF-8 at byte %zu (0x%02x)", bad,
                       (unsigned char)text[bad]);
    if (add_special && t->post_unsupported[0])
        return sn_errf(err, SNUG_ERR_UNSUPPORTED, "%s: unsupported post_processor type '%s' (add_special needs it)",
                       t->name, t->post_unsupported);
    size_t off;
    SN_TRY(arena_put(E, text, len, &off));
    E->out.n = 0;
    SN_TRY(piece_push(E, off, len, -1, true));
    swap_pieces(E);
    /* 1. added tokens matched on the raw text */
    for (size_t i = 0; i < E->in.n; i++)
        SN_TRY(split_added(E, &t->raw_match, &E->in.v[i]));
    swap_pieces(E);
    /* 2. each other piece normalized, then the normalized added tokens */
    for (size_t i = 0; i < E->in.n; i++) {
        tk_piece p = E->in.v[i];
        if (p.id < 0 && t->n_norms) {
            SN_TRY(normalize(&E->c, E->arena.p + p.off, p.len, &E->tmp));
            SN_TRY(arena_put(E, E->tmp.p, E->tmp.len, &p.off));
            p.len = E->tmp.len;
            if (!p.len)
                continue;
        }
        if (p.id >= 0) {
            SN_TRY(vec_grow((void **)&E->out.v, &E->out.cap, E->out.n + 1, sizeof *E->out.v, err));
            E->out.v[E->out.n++] = p;
        } else {
            SN_TRY(split_added(E, &t->norm_match, &p));
        }
    }
    swap_pieces(E);
    /* 3. the pre-tokenizers, each over all pieces in turn */
    for (size_t k = 0; k < t->n_pres; k++) {
        for (size_t i = 0; i < E->in.n; i++) {
            tk_piece p = E->in.v[i];
            if (p.id >= 0) {
                SN_TRY(vec_grow((void **)&E->out.v, &E->out.cap, E->out.n + 1, sizeof *E->out.v, err));
                E->out.v[E->out.n++] = p;
            } else {
                SN_TRY(pre_one(E, &t->pres[k], &p));
            }
        }
        swap_pieces(E);
    }
    /* 4. the model, inside 5. the template */
    for (size_t k = 0; add_special && k < t->n_tmpl && !t->tmpl[k].seq; k++)
        for (size_t j = 0; j < t->tmpl[k].n; j++)
            SN_TRY(id_push(E, t->tmpl[k].ids[j]));
    for (size_t i = 0; i < E->in.n; i++) {
        const tk_piece *p = &E->in.v[i];
        if (p->id >= 0)
            SN_TRY(id_push(E, p->id));
        else
            SN_TRY(bpe_word(E, E->arena.p + p->off, p->len));
    }
    bool after = false;
    for (size_t k = 0; add_special && k < t->n_tmpl; k++) {
        if (t->tmpl[k].seq) {
            after = true;
            continue;
        }
        if (after)
            for (size_t j = 0; j < t->tmpl[k].n; j++)
                SN_TRY(id_push(E, t->tmpl[k].ids[j]));
    }
    return SNUG_OK;
}

int sn_tokenizer_encode(const sn_tokenizer *t, const char *text, size_t len, bool add_special, int32_t **ids,
                        size_t *n, sn_err *err) {
    tk_enc E = {.c = {.t = t, .err = err}};
    *ids = NULL;
    *n = 0;
    int rc = encode(&E, text, len, add_special);
    if (rc == SNUG_OK) {
        *ids = E.ids;
        *n = E.n_ids;
        E.ids = NULL;
    }
    sn_free(E.ids);
    sn_free(E.arena.p);
    sn_free(E.tmp.p);
    sn_free(E.in.v);
    sn_free(E.out.v);
    sn_free(E.syms);
    sn_free(E.heap);
    ctx_free(&E.c);
    return rc;
}

/* ---- decoding ----------------------------------------------------------- */

/* A list of strings, the decoders' Vec<String>. */
typedef struct tk_strs {
    tk_nbuf b;
    size_t *off, *len;
    size_t n, cap;
} tk_strs;

static int strs_begin(tk_strs *l, sn_err *err) {
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 16;
        size_t *o = sn_realloc(l->off, nc * sizeof *o);
        if (!o)
            return sn_errf(err, SNUG_ERR_OOM, "out of memory");
        l->off = o;
        size_t *n = sn_realloc(l->len, nc * sizeof *n);
        if (!n)
            return sn_errf(err, SNUG_ERR_OOM, "out of memory");
        l->len = n;
        l->cap = nc;
    }
    SN_TRY(nbuf_reserve(&l->b, 0, err));
    l->off[l->n] = l->b.len;
    l->len[l->n] = 0;
    l->n++;
    return SNUG_OK;
}

/* Appends to the string begun last. */
static int strs_add(tk_strs *l, const char *s, size_t n, sn_err *err) {
    SN_TRY(nbuf_put(&l->b, s, n, err));
    l->len[l->n - 1] += n;
    return SNUG_OK;
}

static void strs_clear(tk_strs *l) {
    l->n = 0;
    l->b.len = 0;
}

static void strs_free(tk_strs *l) {
    sn_free(l->b.p);
    sn_free(l->off);
    sn_free(l->len);
}

/* bytes as Rust's String::from_utf8_lossy: each maximal invalid subpart
 * becomes one U+FFFD (Python's errors="replace" does the same). */
static int add_lossy(tk_strs *l, const unsigned char *s, size_t n, sn_err *err) {
    size_t i = 0;
    while (i < n) {
        size_t ok = utf8_invalid_at(s + i, n - i);
        SN_TRY(strs_add(l, (const char *)s + i, ok, err));
        i += ok;
        if (i >= n)
            break;
        /* the invalid subpart: the lead byte and the continuation bytes that
         * still fit a well-formed sequence */
        unsigned char c = s[i];
        size_t k = 1, want = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 1;
        unsigned char lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
        unsigned char hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
        if (want > 1 && i + 1 < n && s[i + 1] >= lo && s[i + 1] <= hi) {
            k = 2;
            while (k < want && i + k < n && (s[i + k] & 0xc0) == 0x80)
                k++;
        }
        SN_TRY(strs_add(l, "\xef\xbf\xbd", 3, err));
        i += k;
    }
    return SNUG_OK;
}

/* "<0xAB>" -> 0xab (u8::from_str_radix over the two characters, which also
 * takes "+A"); -1 when tok is not a byte token. */
static int byte_token(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
        return -1;
    int v = 0, digits = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) {
            if (i == 3 && c == '+')
                continue;
            return -1;
        }
        v = v * 16 + d;
        digits++;
    }
    return digits ? v : -1;
}

static int dec_one(tk_ctx *c, const tk_dec *d, const tk_strs *in, tk_strs *out) {
    const sn_tokenizer *t = c->t;
    sn_err *err = c->err;
    strs_clear(out);
    switch (d->kind) {
    case TK_DEC_BYTELEVEL: {
        /* one string: each token's characters as GPT-2 bytes, or its own
         * bytes when a character is not one of them; then lossy UTF-8 */
        tk_nbuf raw = {0};
        int rc = nbuf_put(&raw, NULL, 0, err);
        for (size_t i = 0; i < in->n && rc == SNUG_OK; i++) {
            const char *s = in->b.p + in->off[i];
            size_t n = in->len[i], start = raw.len;
            for (size_t j = 0; j < n && rc == SNUG_OK;) {
                uint32_t cp;
                j += tk_u8dec(s + j, &cp);
                if (cp >= 512 || t->char_byte[cp] < 0) {
                    raw.len = start;
                    rc = nbuf_put(&raw, s, n, err);
                    break;
                }
                char b = (char)t->char_byte[cp];
                rc = nbuf_put(&raw, &b, 1, err);
            }
        }
        if (rc == SNUG_OK)
            rc = strs_begin(out, err);
        if (rc == SNUG_OK)
            rc = add_lossy(out, (const unsigned char *)raw.p, raw.len, err);
        sn_free(raw.p);
        return rc;
    }
    case TK_DEC_BYTEFALLBACK: {
        /* runs of byte tokens become their text, or one U+FFFD per byte
         * when the run is not valid UTF-8 */
        size_t run = 0;
        for (size_t i = 0; i <= in->n; i++) {
            int v = i < in->n ? byte_token(in->b.p + in->off[i], in->len[i]) : -1;
            if (v >= 0) {
                run++;
                continue;
            }
            if (run) {
                tk_nbuf bytes = {0};
                int rc = nbuf_put(&bytes, NULL, 0, err);
                for (size_t j = i - run; j < i && rc == SNUG_OK; j++) {
                    char b = (char)byte_token(in->b.p + in->off[j], in->len[j]);
                    rc = nbuf_put(&bytes, &b, 1, err);
                }
                bool valid = rc == SNUG_OK && utf8_invalid_at((const unsigned char *)bytes.p, bytes.len) == bytes.len;
                if (rc == SNUG_OK && valid) {
                    rc = strs_begin(out, err);
                    if (rc == SNUG_OK)
                        rc = strs_add(out, bytes.p, bytes.len, err);
                }
                for (size_t j = 0; rc == SNUG_OK && !valid && j < run; j++) {
                    rc = strs_begin(out, err);
                    if (rc == SNUG_OK)
                        rc = strs_add(out, "\xef\xbf\xbd", 3, err);
                }
                sn_free(bytes.p);
                SN_TRY(rc);
                run = 0;
            }
            if (i < in->n) {
                SN_TRY(strs_begin(out, err));
                SN_TRY(strs_add(out, in->b.p + in->off[i], in->len[i], err));
            }
        }
        return SNUG_OK;
    }
    case TK_DEC_FUSE:
        SN_TRY(strs_begin(out, err));
        for (size_t i = 0; i < in->n; i++)
            SN_TRY(strs_add(out, in->b.p + in->off[i], in->len[i], err));
        return SNUG_OK;
    case TK_DEC_METASPACE:
        /* every replacement character becomes a space, except that in the
         * first token they are dropped unless the scheme is "never" */
        for (size_t i = 0; i < in->n; i++) {
            SN_TRY(strs_begin(out, err));
            const char *s = in->b.p + in->off[i];
            for (size_t j = 0; j < in->len[i];) {
                uint32_t cp;
                size_t k = tk_u8dec(s + j, &cp);
                if (cp != d->ch)
                    SN_TRY(strs_add(out, s + j, k, err));
                else if (i != 0 || d->scheme == TK_PREPEND_NEVER)
                    SN_TRY(strs_add(out, " ", 1, err));
                j += k;
            }
        }
        return SNUG_OK;
    case TK_DEC_REPLACE:
        for (size_t i = 0; i < in->n; i++) {
            const char *s = in->b.p + in->off[i];
            SN_TRY(find_re(c, &d->re, s, in->len[i], &c->sp));
            SN_TRY(strs_begin(out, err));
            for (size_t j = 0; j < c->sp.n; j++) {
                const tk_span *x = &c->sp.v[j];
                if (x->m)
                    SN_TRY(strs_add(out, d->str, d->len, err));
                else
                    SN_TRY(strs_add(out, s + x->s, x->e - x->s, err));
            }
        }
        return SNUG_OK;
    case TK_DEC_STRIP:
        /* up to start leading and stop trailing d->ch characters off each token */
        for (size_t i = 0; i < in->n; i++) {
            const char *s = in->b.p + in->off[i];
            size_t n = in->len[i], b = 0, e = n;
            uint32_t cp;
            for (size_t k = 0; k < d->start && b < n && (tk_u8dec(s + b, &cp), cp == d->ch); k++)
                b += tk_u8len((unsigned char)s[b]);
            for (size_t k = 0; k < d->stop && e > b; k++) {
                size_t q = e - 1;
                while (q > b && ((unsigned char)s[q] & 0xc0) == 0x80)
                    q--;
                tk_u8dec(s + q, &cp);
                if (cp != d->ch)
                    break;
                e = q;
            }
            SN_TRY(strs_begin(out, err));
            SN_TRY(strs_add(out, s + b, e - b, err));
        }
        return SNUG_OK;
    }
    return sn_errf(err, SNUG_ERR_INTERNAL, "unknown decoder kind %d", (int)d->kind);
}

/* ids -> text into out (replaced; NUL-terminated). */
static int decode(tk_ctx *c, const int32_t *ids, size_t n, bool skip_special, tk_nbuf *out) {
    const sn_tokenizer *t = c->t;
    sn_err *err = c->err;
    tk_strs a = {0}, b = {0};
    int rc = SNUG_OK;
    out->len = 0;
    if ((rc = nbuf_put(out, NULL, 0, err)) != SNUG_OK)
        goto done;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= t->n_ids || t->tok_off[id] == SIZE_MAX) {
            rc = sn_errf(err, SNUG_ERR_RANGE, "decode: id %d (position %zu) is not a token of %s (ids below %d)", id,
                         i, t->name, t->n_ids);
            goto done;
        }
        if (skip_special && t->is_added[id] == 2)
            continue;
        if ((rc = strs_begin(&a, err)) != SNUG_OK ||
            (rc = strs_add(&a, t->text + t->tok_off[id], t->tok_len[id], err)) != SNUG_OK)
            goto done;
    }
    if (t->n_decs == 0) {
        /* no decoder: tokens joined with spaces */
        for (size_t i = 0; i < a.n && rc == SNUG_OK; i++) {
            if (i)
                rc = nbuf_put(out, " ", 1, err);
            if (rc == SNUG_OK)
                rc = nbuf_put(out, a.b.p + a.off[i], a.len[i], err);
        }
        goto done;
    }
    for (size_t k = 0; k < t->n_decs; k++) {
        if ((rc = dec_one(c, &t->decs[k], &a, &b)) != SNUG_OK)
            goto done;
        tk_strs x = a;
        a = b;
        b = x;
    }
    for (size_t i = 0; i < a.n && rc == SNUG_OK; i++)
        rc = nbuf_put(out, a.b.p + a.off[i], a.len[i], err);
done:
    strs_free(&a);
    strs_free(&b);
    return rc;
}

int sn_tokenizer_decode(const sn_tokenizer *t, const int32_t *ids, size_t n, bool skip_special, char **text,
                        size_t *len, sn_err *err) {
    tk_ctx c = {.t = t, .err = err};
    tk_nbuf out = {0};
    *text = NULL;
    *len = 0;
    int rc = decode(&c, ids, n, skip_special, &out);
    ctx_free(&c);
    if (rc != SNUG_OK) {
        sn_free(out.p);
        return rc;
    }
    *text = out.p;
    *len = out.len;
    return SNUG_OK;
}

/* ---- streams ------------------------------------------------------------ */

/* DecodeStream's window: ids from the token before the last emitted text
 * on, so decoders that treat the first token apart (Metaspace, Strip) see
 * the same context as in a whole decode; prefix is what that window
 * decoded to when the text was emitted. */
struct sn_tokstream {
    const sn_tokenizer *t; /* borrowed */
    bool skip_special;
    int32_t *ids;          /* owned [cap]: the window */
    size_t n, cap;
    size_t prefix_index;   /* ids before this index were decoded into prefix */
    tk_nbuf prefix;
    tk_nbuf cur;           /* the window decoded now */
    tk_nbuf out;           /* the text returned last */
};

int sn_tokstream_new(const sn_tokenizer *t, bool skip_special, sn_tokstream **out, sn_err *err) {
    *out = sn_calloc(1, sizeof **out);
    if (!*out)
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    (*out)->t = t;
    (*out)->skip_special = skip_special;
    return SNUG_OK;
}

void sn_tokstream_free(sn_tokstream *s) {
    if (!s)
        return;
    sn_free(s->ids);
    sn_free(s->prefix.p);
    sn_free(s->cur.p);
    sn_free(s->out.p);
    sn_free(s);
}

void sn_tokstream_reset(sn_tokstream *s) {
    s->n = 0;
    s->prefix_index = 0;
    s->prefix.len = 0;
}

static int emit(sn_tokstream *s, const char *p, size_t n, const char **text, size_t *len, sn_err *err) {
    s->out.len = 0;
    SN_TRY(nbuf_put(&s->out, p, n, err));
    *text = s->out.p;
    *len = n;
    return SNUG_OK;
}

int sn_tokstream_step(sn_tokstream *s, int32_t id, const char **text, size_t *len, sn_err *err) {
    tk_ctx c = {.t = s->t, .err = err};
    int rc;
    *text = "";
    *len = 0;
    if ((rc = vec_grow((void **)&s->ids, &s->cap, s->n + 1, sizeof *s->ids, err)) != SNUG_OK)
        goto done;
    s->ids[s->n++] = id;
    if ((rc = decode(&c, s->ids, s->n, s->skip_special, &s->cur)) != SNUG_OK) {
        s->n--;
        goto done;
    }
    const tk_nbuf *cur = &s->cur;
    bool incomplete = cur->len >= 3 && memcmp(cur->p + cur->len - 3, "\xef\xbf\xbd", 3) == 0;
    if (cur->len <= s->prefix.len || incomplete)
        goto done; /* nothing new, or it ends in what may become a character */
    if (s->prefix.len && memcmp(cur->p, s->prefix.p, s->prefix.len) != 0) {
        /* tokenizers' DecodeStreamError::InvalidPrefix: the decoder chain
         * rewrote text it had already given for this window */
        rc = sn_errf(err, SNUG_ERR_UNSUPPORTED, "decode stream: with token %d the window decodes to text that no "
                     "longer starts with the text already returned (tokenizers: invalid prefix)", id);
        goto done;
    }
    if ((rc = emit(s, cur->p + s->prefix.len, cur->len - s->prefix.len, text, len, err)) != SNUG_OK)
        goto done;
    size_t next_index = s->n - s->prefix_index;
    memmove(s->ids, s->ids + s->prefix_index, next_index * sizeof *s->ids);
    s->n = next_index;
    if ((rc = decode(&c, s->ids, s->n, s->skip_special, &s->prefix)) != SNUG_OK)
        goto done;
    s->prefix_index = next_index;
done:
    ctx_free(&c);
    return rc;
}

int sn_tokstream_flush(sn_tokstream *s, const char **text, size_t *len, sn_err *err) {
    tk_ctx c = {.t = s->t, .err = err};
    *text = "";
    *len = 0;
    int rc = decode(&c, s->ids, s->n, s->skip_special, &s->cur);
    if (rc == SNUG_OK && s->cur.len > s->prefix.len &&
        (!s->prefix.len || memcmp(s->cur.p, s->prefix.p, s->prefix.len) == 0)) {
        rc = emit(s, s->cur.p + s->prefix.len, s->cur.len - s->prefix.len, text, len, err);
    } else if (rc == SNUG_OK && s->n > s->prefix_index) {
        /* the held-back tokens changed how the window decodes (a run of
         * <0xXX> tokens that is not UTF-8 becomes one U+FFFD per byte, also
         * for bytes already returned): they are decoded alone */
        rc = decode(&c, s->ids + s->prefix_index, s->n - s->prefix_index, s->skip_special, &s->cur);
        if (rc == SNUG_OK)
            rc = emit(s, s->cur.p, s->cur.len, text, len, err);
    }
    ctx_free(&c);
    sn_tokstream_reset(s);
    return rc;
}
