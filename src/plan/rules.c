/* Placement rules in ONNX Runtime's grammar (rules.h). */
#include "plan/rules.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SN_RULES_MAX 4096 /* patterns after range expansion */

void sn_rules_free(sn_rules *r) {
    for (int i = 0; r && i < r->n; i++)
        sn_free(r->r[i].pat);
    if (r)
        sn_free(r->r);
    if (r)
        memset(r, 0, sizeof *r);
}

/* [b, e) without the spaces around it. */
static void trim(const char **b, const char **e) {
    while (*b < *e && isspace((unsigned char)**b))
        (*b)++;
    while (*e > *b && isspace((unsigned char)(*e)[-1]))
        (*e)--;
}

static int add_rule(sn_rules *r, int *cap, const char *dev, const char *pat, size_t len, bool exact, int entry,
                    sn_err *err) {
    if (r->n == SN_RULES_MAX)
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "more than %d patterns (after ranges are expanded)", SN_RULES_MAX);
    if (r->n == *cap) {
        int nc = *cap ? 2 * *cap : 16;
        sn_rule *n = sn_realloc(r->r, sizeof *n * (size_t)nc);
        if (!n)
            return sn_errf(err, SNUG_ERR_OOM, "out of memory");
        r->r = n;
        *cap = nc;
    }
    char *p = sn_malloc(len + 1);
    if (!p)
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    memcpy(p, pat, len);
    p[len] = 0;
    sn_rule *x = &r->r[r->n++];
    memset(x, 0, sizeof *x);
    snprintf(x->device, sizeof x->device, "%s", dev);
    x->pat = p;
    x->exact = exact;
    x->entry = entry;
    return SNUG_OK;
}

/* Pattern [b, e) with each bracketed range `[a-b]` expanded, in order. */
static int add_expanded(sn_rules *r, int *cap, const char *dev, const char *b, const char *e, bool exact,
                        int entry, sn_err *err) {
    const char *lb = memchr(b, '[', (size_t)(e - b));
    if (!lb)
        return add_rule(r, cap, dev, b, (size_t)(e - b), exact, entry, err);
    char *end;
    long lo = strtol(lb + 1, &end, 10);
    if (end == lb + 1 || *end != '-')
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "entry %d: '%.*s': a range is [FIRST-LAST], e.g. layers.[0-11]/",
                       entry + 1, (int)(e - b), b);
    const char *hi_at = end + 1;
    long hi = strtol(hi_at, &end, 10);
    if (end == hi_at || *end != ']' || end >= e || lo < 0 || hi < lo || hi - lo >= SN_RULES_MAX)
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "entry %d: '%.*s': a range is [FIRST-LAST] with FIRST <= LAST",
                       entry + 1, (int)(e - b), b);
    const char *rest = end + 1;
    for (long k = lo; k <= hi; k++) {
        char buf[512];
        int n = snprintf(buf, sizeof buf, "%.*s%ld%.*s", (int)(lb - b), b, k, (int)(e - rest), rest);
        if (n < 0 || (size_t)n >= sizeof buf)
            return sn_errf(err, SNUG_ERR_INVALID_ARG, "entry %d: pattern too long", entry + 1);
        SN_TRY(add_expanded(r, cap, dev, buf, buf + n, exact, entry, err));
    }
    return SNUG_OK;
}

int sn_rules_parse(const char *text, bool by_name, sn_rules *out, sn_err *err) {
    memset(out, 0, sizeof *out);
    out->by_name = by_name;
    int cap = 0, entry = 0, rc = SNUG_OK;
    const char *key = by_name ? "session.name_based_layer_assignment" : "session.layer_assignment_settings";
    for (const char *s = text; s && *s && rc == SNUG_OK; entry++) {
        const char *semi = strchr(s, ';');
        const char *b = s, *e = semi ? semi : s + strlen(s);
        s = semi ? semi + 1 : e;
        trim(&b, &e);
        if (b == e) { /* an empty entry (a trailing ';') */
            entry--;
            continue;
        }
        const char *open = memchr(b, '(', (size_t)(e - b)), *close = memchr(b, ')', (size_t)(e - b));
        if (!open || !close || close < open) {
            rc = sn_errf(err, SNUG_ERR_INVALID_ARG, "%s: entry %d '%.*s' is not DEVICE(PATTERN, ...)", key, entry + 1,
                         (int)(e - b), b);
            break;
        }
        const char *db = b, *de = open;
        trim(&db, &de);
        if (db == de || (size_t)(de - db) >= sizeof out->r[0].device) {
            rc = sn_errf(err, SNUG_ERR_INVALID_ARG, "%s: entry %d '%.*s' has %s device", key, entry + 1, (int)(e - b),
                         b, db == de ? "no" : "too long a");
            break;
        }
        if (close + 1 != e) {
            rc = sn_errf(err, SNUG_ERR_INVALID_ARG, "%s: entry %d '%.*s': text after ')'", key, entry + 1,
                         (int)(e - b), b);
            break;
        }
        char dev[48];
        int dn = (int)(de - db);
        for (int k = 0; k < dn; k++)
            dev[k] = (char)tolower((unsigned char)db[k]);
        dev[dn] = 0;
        for (const char *p = open + 1; p < close && rc == SNUG_OK;) {
            const char *comma = memchr(p, ',', (size_t)(close - p));
            const char *pb = p, *pe = comma ? comma : close;
            p = comma ? comma + 1 : close;
            trim(&pb, &pe);
            if (pb == pe)
                continue; /* empty patterns are skipped, as ORT does */
            bool exact = *pb == '=';
            if (exact && by_name) {
                rc = sn_errf(err, SNUG_ERR_INVALID_ARG, "%s does not support the '=' (exact-match) qualifier: "
                             "'%.*s' in entry %d", key, (int)(pe - pb), pb, entry + 1);
                break;
            }
            if (exact) {
                pb++;
                trim(&pb, &pe);
                if (pb == pe)
                    continue;
            }
            rc = add_expanded(out, &cap, dev, pb, pe, exact, entry, err);
        }
    }
    for (int i = 0; i < out->n && rc == SNUG_OK && !by_name; i++)
        for (int j = 0; j < i && rc == SNUG_OK; j++)
            if (out->r[i].exact == out->r[j].exact && !strcmp(out->r[i].pat, out->r[j].pat))
                rc = sn_errf(err, SNUG_ERR_INVALID_ARG, "%s: duplicate %s match annotation '%s' (entries %d and %d)",
                             key, out->r[i].exact ? "exact" : "prefix", out->r[i].pat, out->r[j].entry + 1,
                             out->r[i].entry + 1);
    if (rc != SNUG_OK)
        sn_rules_free(out);
    return rc;
}

int sn_rules_match(const sn_rules *r, const char *s) {
    if (!s)
        return -1;
    int best = -1;
    if (r->by_name) { /* the longest pattern found in the name; ties by order */
        size_t blen = 0;
        for (int i = 0; i < r->n; i++) {
            size_t len = strlen(r->r[i].pat);
            if ((best < 0 || len > blen) && strstr(s, r->r[i].pat)) {
                best = i;
                blen = len;
            }
        }
        return best;
    }
    for (int i = 0; i < r->n && best < 0; i++) /* prefix rules first, the earliest */
        if (!r->r[i].exact && !strncmp(s, r->r[i].pat, strlen(r->r[i].pat)))
            best = i;
    for (int i = 0; i < r->n && best < 0; i++)
        if (r->r[i].exact && !strcmp(s, r->r[i].pat))
            best = i;
    return best;
}

int sn_rule_device(const char *device, const char *accel) {
    if (!strcasecmp(device, "cpu"))
        return 0;
    if (!accel)
        return -1;
    bool gpu_kind = !strcmp(accel, "opencl") || !strcmp(accel, "cuda");
    if (!strcasecmp(device, "accelerator"))
        return 1;
    if (!strcasecmp(device, "gpu") || !strcasecmp(device, "gpu:0"))
        return gpu_kind ? 1 : -1;
    size_t n = strlen(accel);
    if (!strncasecmp(device, accel, n) && (device[n] == 0 || device[n] == ':'))
        return 1;
    return -1;
}
