/* Weights streamed to an accelerator (exec_impl.h, docs/streaming.md,
 * snug.placement_overflow=stream): the layers whose weights do not fit
 * its budget keep them in host memory, and each run copies them, layer by
 * layer, into a ring of `depth` slots on the device while the layers
 * before compute. No thread: the device's queues order it all.
 *
 * Loads are numbered over the plan's life: load G is streamed layer
 * G % n of sweep G / n (a run is one sweep), into slot G % depth, on the
 * device's transfer queue once `freed[slot]` (the kernels' queue done with
 * load G - depth) has happened; its `loaded[slot]` event orders the
 * layer's kernels after it (queue_wait), so the host never waits for a
 * copy. After a layer's last reader is queued, its slot's next load (G +
 * depth) is queued behind a marker of that point: the copies of the next
 * layers, and of the next run's first ones, overlap the compute in
 * between. A run that stops part-way (an error) waits for what is in
 * flight and starts the ring afresh. */
#include <string.h>
#include <time.h>

#include "exec/exec_impl.h"

struct ex_dstream {
    const sn_backend *dev;  /* borrowed: the accelerator */
    int n, depth;           /* streamed layers (ordinals 0..n-1, in layer order), ring slots */
    size_t slot_bytes;
    uint8_t *ring;          /* borrowed: the plan's ring buffer on the device */
    int *first_copy;        /* owned [n+1]: ordinal o's copies are copy_of[first_copy[o] .. first_copy[o+1]) */
    int *copy_of;           /* owned: plan copy indices */
    uint64_t *layer_bytes;  /* owned [n]: what loading ordinal o copies */
    sn_event **loaded;      /* owned [depth]: the load in slot s done (NULL: none queued) */
    sn_event **freed;       /* owned [depth]: the kernels done with slot s (NULL: free) */
    uint64_t next;          /* the next load to queue */
    uint64_t released;      /* loads [0, released) are done with */
    uint64_t sweep;
    bool started;
};

/* The schedule (sn_plan_stream_schedule): each ordinal's first and last
 * device reader (its group's leader); the slots that takes. */
static int schedule(sn_exec *ex, int *ord, int n, int *need, sn_err *err) {
    const sn_graph *g = ex->g;
    int *first = sn_malloc(sizeof *first * ((size_t)n + 1)), *last = sn_malloc(sizeof *last * ((size_t)n + 1));
    if (!first || !last) {
        sn_free(first), sn_free(last);
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    }
    for (int o = 0; o < n; o++)
        first[o] = g->n_nodes, last[o] = -1;
    for (int c = 0; c < ex->pl.n_copies; c++) {
        const sn_plan_xfer *cp = &ex->pl.copies[c];
        if (cp->stream_layer < 0)
            continue;
        int o = ord[cp->stream_layer];
        const sn_value *val = &g->values[cp->value];
        for (int k = 0; k < val->n_cons; k++) {
            int i = val->cons[k];
            if (ex->pl.nodes[i].device != cp->to || ex->pl.nodes[i].mode == SN_MODE_FOLDED)
                continue;
            int lead = ex->pl.nodes[i].group;
            first[o] = lead < first[o] ? lead : first[o];
            last[o] = lead > last[o] ? lead : last[o];
        }
    }
    *need = sn_plan_stream_schedule(g->n_nodes, n, first, last, ex->dwait, ex->drelease);
    sn_free(first), sn_free(last);
    return SNUG_OK;
}

/* The streamed layers' ordinals (ord[layer], -1 if it does not stream). */
static int ordinals(const sn_exec *ex, int *ord) {
    int n = 0;
    for (int l = 0; l < ex->n_layers; l++)
        ord[l] = -1;
    for (int c = 0; c < ex->pl.n_copies; c++)
        if (ex->pl.copies[c].stream_layer >= 0)
            ord[ex->pl.copies[c].stream_layer] = 0;
    for (int l = 0; l < ex->n_layers; l++)
        if (ord[l] == 0)
            ord[l] = n++;
    return n;
}

int ex_dstream_plan(sn_exec *ex, sn_err *err) {
    sn_plan_stream *st = &ex->pl.dstream;
    memset(st, 0, sizeof *st);
    if (!ex->overflow_stream || !ex->dstream_budget || ex->n_backends < 2 || ex->n_layers < 1)
        return SNUG_OK;
    const sn_backend *dev = &ex->backends[1];
    if (!dev->ops->stream_in || !dev->ops->event_record || !dev->ops->queue_wait)
        return sn_errf(err, SNUG_ERR_UNSUPPORTED, "%s cannot stream weights (snug.placement_overflow=stream)",
                       sn_backend_device_name(dev));
    uint64_t kv = 0; /* the states the plan puts there (they move when it is bound) */
    for (int k = 0; k < ex->n_states; k++)
        kv += ex->state_dev[ex->states[k].in_v] == 1 ? ex->states[k].cap : 0;
    SN_TRY(sn_plan_device_stream(&ex->pl, ex->g, 1, ex->n_layers, ex->dstream_budget, kv, ex->prefetch_depth,
                                 sn_backend_device_name(dev), err));
    if (st->first_layer >= st->n_layers)
        return SNUG_OK;
    const sn_graph *g = ex->g;
    if ((!ex->dwait && !(ex->dwait = sn_malloc(sizeof *ex->dwait * ((size_t)g->n_nodes + 1)))) ||
        (!ex->drelease && !(ex->drelease = sn_malloc(sizeof *ex->drelease * ((size_t)g->n_nodes + 1)))))
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    int *ord = sn_malloc(sizeof *ord * ((size_t)ex->n_layers + 1)), need = 2;
    if (!ord)
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    int rc = schedule(ex, ord, ordinals(ex, ord), &need, err);
    sn_free(ord);
    SN_TRY(rc);
    if (need > st->depth) { /* layers read out of order: a deeper ring, said */
        sn_log(ex->log, SNUG_LOG_WARN, "streaming to %s: the streamed layers' readers interleave: %d slots instead "
               "of %d", sn_backend_device_name(dev), need, st->depth);
        st->depth = need;
        st->staging_bytes = (size_t)need * st->slot_bytes;
        st->total = st->fixed + st->resident_weights + st->staging_bytes;
        for (int b = 0; b < ex->pl.n_buffers; b++)
            if (ex->pl.buffers[b].ring)
                ex->pl.buffers[b].size = ex->pl.buffers[b].lower_bound = st->staging_bytes;
    }
    return SNUG_OK;
}

int ex_dstream_start(sn_exec *ex, sn_err *err) {
    const sn_plan_stream *st = &ex->pl.dstream;
    if (ex->dry || !st->n_layers || st->first_layer >= st->n_layers)
        return SNUG_OK;
    ex_dstream *ds = sn_calloc(1, sizeof *ds);
    int *ord = sn_malloc(sizeof *ord * ((size_t)ex->n_layers + 1));
    if (!ds || !ord) {
        sn_free(ds), sn_free(ord);
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    }
    ex->ds = ds;
    ds->dev = &ex->backends[st->device];
    ds->depth = st->depth;
    ds->slot_bytes = st->slot_bytes;
    ds->n = ordinals(ex, ord);
    for (int b = 0; b < ex->pl.n_buffers; b++)
        if (ex->pl.buffers[b].ring)
            ds->ring = ex->buf[b];
    ds->first_copy = sn_calloc((size_t)ds->n + 2, sizeof *ds->first_copy);
    ds->copy_of = sn_calloc((size_t)ex->pl.n_copies + 1, sizeof *ds->copy_of);
    ds->layer_bytes = sn_calloc((size_t)ds->n + 1, sizeof *ds->layer_bytes);
    ds->loaded = sn_calloc((size_t)ds->depth, sizeof *ds->loaded);
    ds->freed = sn_calloc((size_t)ds->depth, sizeof *ds->freed);
    if (!ds->first_copy || !ds->copy_of || !ds->layer_bytes || !ds->loaded || !ds->freed || !ds->ring) {
        sn_free(ord);
        ex_dstream_free(ex);
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    }
    int k = 0;
    for (int o = 0; o < ds->n; o++) {
        ds->first_copy[o] = k;
        for (int c = 0; c < ex->pl.n_copies; c++) {
            const sn_plan_xfer *cp = &ex->pl.copies[c];
            if (cp->stream_layer >= 0 && ord[cp->stream_layer] == o) {
                ds->copy_of[k++] = c;
                ds->layer_bytes[o] += cp->size;
            }
        }
    }
    ds->first_copy[ds->n] = k;
    sn_free(ord);
    return SNUG_OK;
}

/* Queues load G into its slot, after the kernels are done with the slot's
 * previous load. */
static int queue_load(sn_exec *ex, uint64_t G, sn_err *err) {
    ex_dstream *ds = ex->ds;
    const sn_backend *dev = ds->dev;
    int s = (int)(G % (uint64_t)ds->depth), o = (int)(G % (uint64_t)ds->n);
    uint8_t *slot = ds->ring + (size_t)s * ds->slot_bytes;
    sn_event *after = ds->freed[s], *done = NULL;
    int rc = SNUG_OK;
    for (int k = ds->first_copy[o]; k < ds->first_copy[o + 1] && rc == SNUG_OK; k++) {
        const sn_plan_xfer *cp = &ex->pl.copies[ds->copy_of[k]];
        const sn_tensor *src = &ex->vals[cp->value];
        size_t nb = sn_tensor_nbytes(src);
        if (nb > cp->size || !src->data)
            return sn_errf(err, SNUG_ERR_INTERNAL, "streamed weight '%s': %zu bytes, %zu planned",
                           ex->g->values[cp->value].name, nb, cp->size);
        sn_event *e = NULL;
        /* the transfer queue is in order: only its first copy needs to wait */
        rc = dev->ops->stream_in(dev->ctx, slot + cp->offset, src->data, nb, k == ds->first_copy[o] ? after : NULL,
                                 &e, err);
        if (rc == SNUG_OK) {
            dev->ops->event_free(dev->ctx, done);
            done = e;
        }
    }
    dev->ops->event_free(dev->ctx, ds->freed[s]);
    ds->freed[s] = NULL;
    if (rc != SNUG_OK) {
        dev->ops->event_free(dev->ctx, done);
        return sn_err_prefix(err, "streaming layer %d's weights", ex->pl.copies[ds->copy_of[ds->first_copy[o]]].stream_layer);
    }
    /* the slot's previous load: its kernels ran or are queued; one that failed is an error */
    if (ds->loaded[s] && dev->ops->event_check && (rc = dev->ops->event_check(dev->ctx, ds->loaded[s], err)) != SNUG_OK) {
        dev->ops->event_free(dev->ctx, done);
        return rc;
    }
    dev->ops->event_free(dev->ctx, ds->loaded[s]);
    ds->loaded[s] = done;
    ex->dstream_bytes += ds->layer_bytes[o];
    return SNUG_OK;
}

int ex_dstream_begin(sn_exec *ex, sn_err *err) {
    ex_dstream *ds = ex->ds;
    if (!ds || ds->started)
        return SNUG_OK;
    ds->next = ds->released = ds->sweep = 0;
    ds->started = true;
    for (; ds->next < (uint64_t)ds->depth; ds->next++)
        SN_TRY(queue_load(ex, ds->next, err));
    return SNUG_OK;
}

int ex_dstream_wait(sn_exec *ex, int o, sn_err *err) {
    ex_dstream *ds = ex->ds;
    uint64_t G = ds->sweep * (uint64_t)ds->n + (uint64_t)o;
    if (G >= ds->next)
        return sn_errf(err, SNUG_ERR_INTERNAL, "streaming: layer ordinal %d read before its load was queued", o);
    int s = (int)(G % (uint64_t)ds->depth);
    SN_TRY(ds->dev->ops->queue_wait(ds->dev->ctx, ds->loaded[s], err));
    uint8_t *slot = ds->ring + (size_t)s * ds->slot_bytes;
    for (int k = ds->first_copy[o]; k < ds->first_copy[o + 1]; k++) {
        int c = ds->copy_of[k];
        ex->mirror[c].data = slot + ex->pl.copies[c].offset;
    }
    return SNUG_OK;
}

int ex_dstream_release(sn_exec *ex, int upto, sn_err *err) {
    ex_dstream *ds = ex->ds;
    uint64_t R = ds->sweep * (uint64_t)ds->n + (uint64_t)upto;
    while (ds->released < R) {
        int s = (int)(ds->released % (uint64_t)ds->depth);
        ds->dev->ops->event_free(ds->dev->ctx, ds->freed[s]);
        ds->freed[s] = NULL;
        SN_TRY(ds->dev->ops->event_record(ds->dev->ctx, &ds->freed[s], err));
        ds->released++;
        for (; ds->next < ds->released + (uint64_t)ds->depth; ds->next++)
            SN_TRY(queue_load(ex, ds->next, err));
    }
    return SNUG_OK;
}

/* Waits for every load in flight and forgets the ring's events. */
static int drain(ex_dstream *ds, sn_err *err) {
    int rc = SNUG_OK;
    for (int s = 0; s < ds->depth; s++) {
        if (ds->loaded[s]) {
            sn_err e = {0};
            int r = ds->dev->ops->event_wait(ds->dev->ctx, ds->loaded[s], &e); /* frees it */
            if (r != SNUG_OK && rc == SNUG_OK && err)
                rc = r, *err = e;
            ds->loaded[s] = NULL;
        }
        ds->dev->ops->event_free(ds->dev->ctx, ds->freed[s]);
        ds->freed[s] = NULL;
    }
    ds->started = false;
    return rc;
}

int ex_dstream_end_run(sn_exec *ex, bool complete, sn_err *err) {
    ex_dstream *ds = ex->ds;
    if (!ds || !ds->started)
        return SNUG_OK;
    if (!complete)
        return drain(ds, NULL);
    int rc = ex_dstream_release(ex, ds->n, err); /* every layer of the sweep, whatever the schedule said */
    if (rc != SNUG_OK) {
        drain(ds, NULL);
        return rc;
    }
    ds->sweep++;
    return SNUG_OK;
}

void ex_dstream_free(sn_exec *ex) {
    ex_dstream *ds = ex->ds;
    if (!ds)
        return;
    if (ds->loaded && ds->freed)
        drain(ds, NULL); /* nothing may still write into the ring */
    sn_free(ds->first_copy);
    sn_free(ds->copy_of);
    sn_free(ds->layer_bytes);
    sn_free(ds->loaded);
    sn_free(ds->freed);
    sn_free(ds);
    ex->ds = NULL;
}

int sn_exec_dstream_probe(sn_exec *ex, double *bytes_per_s, sn_err *err) {
    ex_dstream *ds = ex->ds;
    *bytes_per_s = 0;
    if (!ds)
        return SNUG_OK;
    SN_TRY(drain(ds, err)); /* nothing queued writes slot 0 now; the next run queues its loads afresh */
    uint64_t bytes = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int o = 0; o < ds->n; o++)
        for (int k = ds->first_copy[o]; k < ds->first_copy[o + 1]; k++) {
            const sn_plan_xfer *cp = &ex->pl.copies[ds->copy_of[k]];
            const sn_tensor *src = &ex->vals[cp->value];
            size_t nb = sn_tensor_nbytes(src);
            SN_TRY(sn_backend_tensor_set(ds->dev, ds->ring, cp->offset, src->data, nb, err));
            bytes += nb;
        }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double dt = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    *bytes_per_s = dt > 0 ? (double)bytes / dt : 0;
    return SNUG_OK;
}

const sn_plan_stream *sn_exec_dstream_plan(const sn_exec *ex) { return &ex->pl.dstream; }

uint64_t sn_exec_dstream_bytes(const sn_exec *ex) { return ex->dstream_bytes; }
