/* Placement rules in ONNX Runtime's grammar (../shared/ORT-NOTES.md §1):
 * session.layer_assignment_settings, matched against a node's `layer_ann`
 * metadata, and session.name_based_layer_assignment, matched against its
 * name. Both read `device(pat, pat, ...); device2(...)`.
 *
 *   annotations  `=pat` matches exactly, `pat` as a prefix; a prefix rule
 *                beats an exact one, and within a kind the earlier rule
 *                wins; the same pattern twice with the same kind is an
 *                error; a node in a subgraph without a match of its own
 *                takes its parent node's rule.
 *   names        `pat` matches as a substring; the longest pattern that
 *                matches wins, ties by order; `=` is an error.
 *
 * snug's extension, in both modes: a bracketed range `[a-b]` in a pattern
 * stands for each number a..b (`layers.[0-11]/` is 12 patterns), expanded
 * where it is written so the rules keep their order.
 *
 * Devices are ORT's designators, case ignored: cpu, gpu, gpu:N,
 * accelerator, opencl, cuda (and what follows the ':' of opencl:N). Which
 * device of a session each names is the caller's (sn_rule_device). */
#ifndef SN_PLAN_RULES_H
#define SN_PLAN_RULES_H

#include "core/core.h"

typedef struct sn_rule {
    char device[48];  /* as written, lower-cased */
    char *pat;        /* owned */
    bool exact;       /* annotations: `=pat` */
    int entry;        /* the `device(...)` entry it came from (0-based), for messages */
} sn_rule;

typedef struct sn_rules {
    sn_rule *r;       /* owned [n], in priority order within a kind as written */
    int n;
    bool by_name;     /* session.name_based_layer_assignment */
} sn_rules;

/* Parses text (the config value); errors name the entry and what is wrong. */
int sn_rules_parse(const char *text, bool by_name, sn_rules *out, sn_err *err);
void sn_rules_free(sn_rules *r);

/* The rule that places a node with this annotation (annotation mode) or
 * name (name mode), or -1. */
int sn_rules_match(const sn_rules *r, const char *s);

/* Which of a session's devices rule device text names: 0 the host, 1 its
 * accelerator (of backend name accel, NULL when there is none), or -1
 * when the session has no such device. */
int sn_rule_device(const char *device, const char *accel);

#endif
