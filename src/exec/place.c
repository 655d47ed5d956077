/* Placement (exec_impl.h): which layers go to the accelerator, from the
 * session's rules, -ngl, or a memory budget, decided before the plan that
 * runs. Auto-fit plans dry for each candidate layer count, so what it
 * compares with the budget is the very figure the plan will hold there
 * (arenas, the weights' copies, the KV cache of the layers placed), not an
 * estimate of it. */
#include <stdio.h>
#include <string.h>

#include "exec/exec_impl.h"

/* Margin kept free when the budget is the device's free memory. */
static uint64_t margin(uint64_t free) {
    uint64_t m = free / 20; /* 5% */
    return m < ((uint64_t)64 << 20) ? (uint64_t)64 << 20 : m;
}

static double mib(uint64_t b) { return (double)b / (1 << 20); }

int sn_exec_set_placement(sn_exec *ex, const int *rule_dev, int ngl, uint64_t budget, sn_overflow overflow,
                          sn_err *err) {
    const sn_graph *g = ex->g;
    sn_free(ex->rule_dev);
    ex->rule_dev = NULL;
    if (rule_dev) {
        if (!(ex->rule_dev = sn_malloc(sizeof *ex->rule_dev * ((size_t)g->n_nodes + 1))))
            return sn_errf(err, SNUG_ERR_OOM, "out of memory");
        memcpy(ex->rule_dev, rule_dev, sizeof *ex->rule_dev * (size_t)g->n_nodes);
    }
    ex->ngl = ngl;
    ex->dev_budget = budget;
    ex->overflow_skip = overflow == SN_OVERFLOW_SKIP;
    ex->overflow_stream = overflow == SN_OVERFLOW_STREAM;
    ex->placed = false;
    ex_plan_release(ex);
    return SNUG_OK;
}

/* The rows for n layers on the accelerator, with their reasons. */
static void rows_for(sn_exec *ex, int n, const char *on, const char *off) {
    sn_plan_layers_ngl(ex->rows, ex->n_layers, n, 1, on, off);
}

int ex_place_prepare(sn_exec *ex, sn_err *err) {
    const sn_graph *g = ex->g;
    if (ex->n_backends < 2)
        return SNUG_OK;
    size_t nr = (size_t)ex->n_layers + 2;
    if (!ex->rows && !(ex->rows = sn_calloc(nr, sizeof *ex->rows)))
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    if (!ex->want && !(ex->want = sn_malloc(sizeof *ex->want * ((size_t)g->n_nodes + 1))))
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    if (!ex->placed) { /* no fit decided (a plan not at bounds, or -ngl given) */
        char why[64];
        int n = ex->ngl >= 0 ? ex->ngl : ex->n_layers + 1;
        if (ex->ngl >= 0)
            snprintf(why, sizeof why, "-ngl %d", ex->ngl);
        else
            snprintf(why, sizeof why, "auto: every layer (a plan not at bounds is not fitted)");
        rows_for(ex, n, why, why);
    }
    sn_plan_wants(g, ex->rows, ex->rule_dev, ex->want);
    /* a layer whose every node a rule places is the rules' */
    for (int r = 0; ex->rule_dev && r < ex->n_layers + 2; r++) {
        int d = -2;
        for (int i = 0; i < g->n_nodes && d != -1; i++)
            if (g->nodes[i].layer + 1 == r)
                d = ex->rule_dev[i] < 0 || (d >= 0 && d != ex->rule_dev[i]) ? -1 : ex->rule_dev[i];
        if (d >= 0) {
            ex->rows[r].device = d;
            snprintf(ex->rows[r].why, sizeof ex->rows[r].why, "placement rules (every node of it matched one)");
        }
    }
    return SNUG_OK;
}

/* snug.placement_overflow=skip: layer by layer in -ngl's order (the last
 * repeating layer first, the output layer after the first one), each kept
 * on the device when the plan with it still fits, else left on the host
 * and the next one tried: one dry plan per layer. */
static int place_skipping(sn_exec *ex, const sn_tensor *bounds, uint64_t budget, sn_err *err) {
    int L = ex->n_layers, placed = 0;
    uint64_t held = 0;
    sn_plan_layers_ngl(ex->rows, L, 0, 1, "", "");
    ex->placed = true;
    for (int k = 0; k <= L; k++) {
        int r = k < L ? L - k : L + 1; /* rows: layer L-1-k, then post */
        ex->rows[r].device = 1;
        sn_exec_estimate e;
        SN_TRY(sn_exec_estimate_bounds(ex, bounds, &e, NULL, err));
        if (e.device <= budget) {
            placed++;
            held = e.device;
            snprintf(ex->rows[r].why, sizeof ex->rows[r].why, "auto (skip): fits, %.1f MiB of the %.1f MiB budget "
                     "with it", mib(e.device), mib(budget));
        } else {
            ex->rows[r].device = 0;
            snprintf(ex->rows[r].why, sizeof ex->rows[r].why, "auto (skip): does not fit (with it %.1f MiB, over "
                     "by %.1f MiB); the next layers were tried", mib(e.device), mib(e.device - budget));
        }
    }
    ex->fit_budget = budget;
    sn_log(ex->log, SNUG_LOG_INFO, "placement: %d of %d layers on %s (%.1f MiB of a %.1f MiB budget, skipping what "
           "does not fit)", placed, L + 1, sn_backend_device_name(&ex->backends[1]), mib(held), mib(budget));
    return SNUG_OK;
}

int ex_place_decide(sn_exec *ex, const sn_tensor *bounds, sn_err *err) {
    if (ex->n_backends < 2)
        return SNUG_OK;
    ex->placed = false;
    const sn_backend *dev = &ex->backends[1];
    const char *dn = sn_backend_device_name(dev);
    sn_mem_info mi = {0};
    sn_err ignored = {0};
    sn_backend_mem_info(dev, &mi, &ignored);
    /* what the device has now, plus what this executor's buffers there hold already */
    uint64_t mine = 0;
    for (int b = 0; b < SN_MAX_BUFFERS; b++)
        mine += ex->buf[b] && ex->buf_dev[b] == 1 ? ex->buf_cap[b] : 0;
    mine += sn_exec_state_bytes_on(ex, 1);
    uint64_t budget = ex->dev_budget;
    if (!budget && mi.total)
        budget = mi.free + mine > margin(mi.free + mine) ? mi.free + mine - margin(mi.free + mine) : 0;
    ex->dstream_budget = 0;
    if (ex->overflow_stream && budget) { /* every layer placed, what does not fit streams */
        char why[112];
        int n = ex->ngl >= 0 ? ex->ngl : ex->n_layers + 1;
        snprintf(why, sizeof why, "%s; weights past the %.1f MiB budget stream there", ex->ngl >= 0 ? "-ngl" :
                 "stream: every layer", mib(budget));
        rows_for(ex, n, why, ex->ngl >= 0 ? "-ngl" : why);
        ex->placed = true;
        ex->fit_budget = budget;
        ex->dstream_budget = budget;
        return SNUG_OK;
    }
    if (ex->ngl >= 0 || !budget) { /* given, or nothing to fit against */
        if (!budget && ex->ngl < 0)
            sn_log(ex->log, SNUG_LOG_WARN, "%s says nothing of its memory: every layer goes there (give a budget, "
                   "--mem %s=SIZE, or -ngl N)", dn, dev->ops->name);
        char why[64];
        snprintf(why, sizeof why, ex->ngl >= 0 ? "-ngl %d" : "auto: every layer", ex->ngl);
        rows_for(ex, ex->ngl >= 0 ? ex->ngl : ex->n_layers + 1, why, why);
        ex->placed = true;
        return SNUG_OK;
    }
    if (ex->overflow_skip)
        return place_skipping(ex, bounds, budget, err);
    /* The most layers whose plan holds at most the budget on the device:
     * halving over 0..L+1, each candidate planned dry. */
    int lo = 0, hi = ex->n_layers + 1;
    uint64_t at_lo = 0, over = 0;
    int over_n = -1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        rows_for(ex, mid, "auto", "auto");
        ex->placed = true;
        sn_exec_estimate e;
        SN_TRY(sn_exec_estimate_bounds(ex, bounds, &e, NULL, err));
        if (e.device <= budget) {
            lo = mid;
            at_lo = e.device;
        } else {
            hi = mid - 1;
            if (over_n < 0 || mid < over_n) {
                over_n = mid;
                over = e.device;
            }
        }
    }
    char on[112];
    snprintf(on, sizeof on, "auto: %d of %d layers fit, %.1f MiB of the %.1f MiB budget on %s", lo,
             ex->n_layers + 1, mib(at_lo), mib(budget), dev->ops->name);
    rows_for(ex, lo, on, "auto: below a layer that does not fit (the layers placed are contiguous)");
    int L = ex->n_layers, first_off = L - lo - 1; /* the next layer the count would take */
    if (lo <= L) /* the output layer comes after every repeating one, as -ngl counts */
        snprintf(ex->rows[L + 1].why, sizeof ex->rows[L + 1].why, "auto: the output layer counts after all %d "
                 "repeating layers (as -ngl does)", L);
    if (first_off >= 0 && over_n >= 0)
        snprintf(ex->rows[first_off + 1].why, sizeof ex->rows[first_off + 1].why,
                 "auto: does not fit (with it %.1f MiB, over the budget by %.1f MiB)", mib(over),
                 mib(over - budget));
    ex->placed = true;
    ex->fit_budget = budget;
    sn_log(ex->log, SNUG_LOG_INFO, "placement: %d of %d layers on %s (%.1f MiB of a %.1f MiB budget)", lo,
           ex->n_layers + 1, dn, mib(at_lo), mib(budget));
    return SNUG_OK;
}
