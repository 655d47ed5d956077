/* A session's placement config (exec/session.h, docs/placement.md): ORT's
 * rule keys with their match coverage, -ngl, and the accelerator's budget,
 * handed to the executor (sn_exec_set_placement). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backends/backend.h"
#include "exec/exec.h"
#include "exec/session.h"
#include "plan/estimate.h"
#include "plan/rules.h"

/* snug.n_gpu_layers: a count, "all" or "auto" (-1). */
static int parse_ngl(const char *v, int n_layers, int *out, sn_err *err) {
    *out = -1;
    if (!v || !strcasecmp(v, "auto"))
        return SNUG_OK;
    if (!strcasecmp(v, "all")) {
        *out = n_layers + 1;
        return SNUG_OK;
    }
    char *end;
    long n = strtol(v, &end, 10);
    if (!*v || *end || n < 0 || n > 1000000)
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "snug.n_gpu_layers: '%s' is not a layer count, 'all' or 'auto'", v);
    *out = n > n_layers + 1 ? n_layers + 1 : (int)n;
    return SNUG_OK;
}

/* The accelerator's budget: snug.mem.gpu (a size), or the limit of
 * session.resource_partitioning_settings (`<limit_KiB>,<stats_file>`; ORT's
 * session.resource_cuda_partitioning_settings for a CUDA device). */
static int parse_budget(const snug_options *opts, const char *accel, const sn_logger *log, uint64_t *out,
                        sn_err *err) {
    *out = 0;
    const char *mg = snug_options_get(opts, "snug.mem.gpu");
    if (mg) {
        SN_TRY(sn_parse_size(mg, out, err));
        return SNUG_OK;
    }
    const char *key = "session.resource_partitioning_settings";
    const char *rp = snug_options_get(opts, key);
    const char *cu = snug_options_get(opts, "session.resource_cuda_partitioning_settings");
    if (!rp && cu) {
        if (!accel || strcmp(accel, "cuda")) {
            sn_log(log, SNUG_LOG_WARN, "session.resource_cuda_partitioning_settings is for a CUDA device, and this "
                   "session has %s: ignored (session.resource_partitioning_settings serves any device)",
                   accel ? accel : "none");
            return SNUG_OK;
        }
        key = "session.resource_cuda_partitioning_settings";
        rp = cu;
    }
    if (!rp)
        return SNUG_OK;
    const char *comma = strchr(rp, ',');
    if (!comma || strchr(comma + 1, ','))
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "%s: '%s' is not <limit_KiB>,<stats_file> (expecting comma "
                       "separated fields; either may be empty)", key, rp);
    if (comma != rp) {
        char *end;
        unsigned long long kib = strtoull(rp, &end, 10);
        if (end != comma)
            return sn_errf(err, SNUG_ERR_INVALID_ARG, "%s: limit '%.*s' is not a count of KiB", key, (int)(comma - rp),
                           rp);
        *out = (uint64_t)kib * 1024;
    }
    if (comma[1])
        sn_log(log, SNUG_LOG_INFO, "%s: the stats file '%s' is not used for placement: snug fits layers from "
               "planned figures (snug plan --stats folds it into the workspace estimates)", key, comma + 1);
    return SNUG_OK;
}

int sn_session_placement(sn_session *s, const snug_options *opts, sn_err *err) {
    const sn_graph *g = s->graph;
    const char *ann = snug_options_get(opts, "session.layer_assignment_settings");
    const char *byname = snug_options_get(opts, "session.name_based_layer_assignment");
    const char *strict_v = snug_options_get(opts, "snug.strict_layer_assignment");
    if (strict_v && strcmp(strict_v, "0") && strcmp(strict_v, "1"))
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "snug.strict_layer_assignment: '%s' is not 0 or 1", strict_v);
    bool strict = strict_v && !strcmp(strict_v, "1");
    if (ann && byname)
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "session.layer_assignment_settings and "
                       "session.name_based_layer_assignment exclude each other: give one");
    const sn_backend *acc = sn_exec_backend(s->exec, 1);
    const char *accel = acc ? acc->ops->name : NULL;
    int ngl;
    uint64_t budget;
    SN_TRY(parse_ngl(snug_options_get(opts, "snug.n_gpu_layers"), s->layers.n_layers, &ngl, err));
    SN_TRY(parse_budget(opts, accel, &s->log, &budget, err));
    if (!acc && budget)
        return sn_errf(err, SNUG_ERR_INVALID_ARG, "snug.mem.gpu: this session has no accelerator to budget (give one "
                       "with snug.device, --device opencl)");
    if (!acc && ngl > 0)
        sn_log(&s->log, SNUG_LOG_WARN, "snug.n_gpu_layers without an accelerator (snug.device): every layer runs on "
               "the host");
    int *node_dev = NULL, rc = SNUG_OK;
    if (ann || byname) {
        sn_rules *r = &s->rules;
        SN_TRY(sn_rules_parse(ann ? ann : byname, byname != NULL, r, err));
        s->rule_dev = sn_calloc((size_t)r->n + 1, sizeof *s->rule_dev);
        s->rule_nodes = sn_calloc((size_t)r->n + 1, sizeof *s->rule_nodes);
        s->rule_first = sn_malloc(((size_t)r->n + 1) * sizeof *s->rule_first);
        s->rule_last = sn_malloc(((size_t)r->n + 1) * sizeof *s->rule_last);
        s->node_rule = sn_malloc(((size_t)g->n_nodes + 1) * sizeof *s->node_rule);
        node_dev = sn_malloc(((size_t)g->n_nodes + 1) * sizeof *node_dev);
        if (!s->rule_dev || !s->rule_nodes || !s->rule_first || !s->rule_last || !s->node_rule || !node_dev) {
            sn_free(node_dev);
            return sn_errf(err, SNUG_ERR_OOM, "out of memory");
        }
        for (int k = 0; k < r->n; k++) {
            s->rule_first[k] = s->rule_last[k] = -2;
            s->rule_dev[k] = sn_rule_device(r->r[k].device, accel);
            if (s->rule_dev[k] < 0 && (k == 0 || r->r[k - 1].entry != r->r[k].entry)) {
                char m[256];
                snprintf(m, sizeof m, "placement rule %d '%s(...)': this session has no device '%s' (devices: cpu%s%s); "
                         "the rule is skipped", r->r[k].entry + 1, r->r[k].device, r->r[k].device,
                         accel ? ", " : "", accel ? accel : "");
                if (strict) {
                    rc = sn_errf(err, SNUG_ERR_INVALID_ARG, "%s (snug.strict_layer_assignment=1)", m);
                    goto done;
                }
                sn_log(&s->log, SNUG_LOG_WARN, "%s", m);
            }
        }
        for (int i = 0; i < g->n_nodes; i++) {
            const sn_pnode *pn = g->nodes[i].p;
            const char *key = pn->name;
            if (!byname) { /* the node's layer_ann annotation */
                key = NULL;
                for (int m = 0; m < pn->n_meta; m++)
                    if (!strcmp(pn->meta[m].key, "layer_ann"))
                        key = pn->meta[m].value;
            }
            int k = key ? sn_rules_match(r, key) : -1;
            s->node_rule[i] = k;
            node_dev[i] = k >= 0 ? s->rule_dev[k] : -1;
            if (k < 0)
                continue;
            s->rule_nodes[k]++;
            int l = g->nodes[i].layer;
            if (s->rule_first[k] == -2 || l < s->rule_first[k])
                s->rule_first[k] = l;
            if (s->rule_last[k] == -2 || l > s->rule_last[k])
                s->rule_last[k] = l;
        }
        int unmatched = 0;
        for (int k = 0; k < r->n; k++)
            unmatched += s->rule_nodes[k] == 0;
        if (unmatched) {
            char m[768];
            int at = snprintf(m, sizeof m, "%d of %d placement pattern%s matched no node:", unmatched, r->n,
                              r->n == 1 ? "" : "s");
            for (int k = 0, shown = 0; k < r->n && shown < 6 && at < (int)sizeof m; k++)
                if (!s->rule_nodes[k])
                    at += snprintf(m + at, sizeof m - (size_t)at, "%s %s(%s%s)", shown++ ? "," : "", r->r[k].device,
                                   r->r[k].exact ? "=" : "", r->r[k].pat);
            if (at < (int)sizeof m)
                snprintf(m + at, sizeof m - (size_t)at, " (%s; snug plan lists what each rule matched)",
                         byname ? "matched against node names" : "matched against the nodes' layer_ann metadata");
            if (strict) {
                rc = sn_errf(err, SNUG_ERR_INVALID_ARG, "%s (snug.strict_layer_assignment=1)", m);
                goto done;
            }
            sn_log(&s->log, SNUG_LOG_WARN, "%s", m);
        }
    }
    const char *ov = snug_options_get(opts, "snug.placement_overflow");
    if (ov && strcmp(ov, "stop") && strcmp(ov, "skip") && strcmp(ov, "stream")) {
        rc = sn_errf(err, SNUG_ERR_INVALID_ARG, "snug.placement_overflow: '%s' is not stop, skip or stream", ov);
        goto done;
    }
    sn_overflow of = !ov || !strcmp(ov, "stop") ? SN_OVERFLOW_STOP
                     : !strcmp(ov, "skip")      ? SN_OVERFLOW_SKIP
                                                : SN_OVERFLOW_STREAM;
    if (acc || node_dev)
        rc = sn_exec_set_placement(s->exec, node_dev, ngl, budget, of, err);
done:
    sn_free(node_dev);
    return rc;
}
