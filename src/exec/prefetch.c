/* The prefetcher (exec_impl.h, docs/streaming.md): a ring of staging slots
 * and one I/O thread that reads the streamed layers' weights from the
 * model's files into them, in sweep order, as far ahead as the ring
 * allows, while the run computes on the slots already loaded.
 *
 * Loads are numbered over the session's life: load G is streamed layer
 * G % n of sweep G / n (a run is one sweep over the layers), into slot
 * G % depth. The thread may start load G once the run released load
 * G - depth (its slot); the run waits for load G before the first node
 * reading that layer and releases it after the last. A sweep's last
 * layers thus free slots for the next run's first ones, which load during
 * the tail of this run (the final norm, the output projection, sampling).
 * A run that stops part-way (an error) resets the ring: the next starts a
 * fresh sweep. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "exec/exec_impl.h"

typedef struct pf_item {
    int v;             /* the value */
    const void *src;   /* its bytes in the model's file map (never touched: read with pread) */
    size_t bytes, off; /* and its place in the slot */
} pf_item;

struct ex_prefetch {
    const sn_graph *g;       /* borrowed */
    int n;                   /* streamed layers (ordinals 0..n-1: those with a streamed value, in order) */
    int n_layers;
    int *ord;                /* owned [n_layers]: a layer's ordinal, or -1 */
    int depth;
    size_t slot_bytes;
    uint8_t *ring;           /* owned: depth x slot_bytes, whole pages */
    size_t ring_bytes;
    pf_item *items;          /* owned: the streamed values, by layer */
    int *first_item;         /* owned [n+1]: layer o's items are [first_item[o], first_item[o+1]) */
    size_t *layer_bytes;     /* owned [n]: what loading layer o reads */
    pthread_t thread;
    bool started, quit;
    pthread_mutex_t mu;
    pthread_cond_t cv;       /* any change of the counters below */
    uint64_t next;           /* the load the thread does next */
    uint64_t loaded;         /* loads [0, loaded) are complete */
    uint64_t released;       /* loads [0, released) are done with */
    uint64_t sweep;          /* the run's sweep: it consumes loads sweep * n + o */
    int fail_errno;          /* a load failed: its errno, the value and the load */
    int fail_v;
    uint64_t fail_load;
    bool failed;
    /* counters (under mu) */
    uint64_t bytes_read, loads_done;
    double read_s;           /* the thread's time in pread */
    double stall_s;          /* the run's time waiting for loads */
};

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *pf_main(void *arg) {
    ex_prefetch *pf = arg;
    pthread_mutex_lock(&pf->mu);
    for (;;) {
        while (!pf->quit && !pf->failed && pf->next >= pf->released + (uint64_t)pf->depth)
            pthread_cond_wait(&pf->cv, &pf->mu);
        if (pf->quit || pf->failed)
            break;
        uint64_t G = pf->next;
        pthread_mutex_unlock(&pf->mu);
        int o = (int)(G % (uint64_t)pf->n);
        uint8_t *slot = pf->ring + (size_t)(G % (uint64_t)pf->depth) * pf->slot_bytes;
        int e = 0, bad = -1;
        double t0 = now_s();
        for (int k = pf->first_item[o]; k < pf->first_item[o + 1] && !e; k++) {
            const pf_item *it = &pf->items[k];
            if ((e = sn_model_read_uncached(pf->g->model, slot + it->off, it->src, it->bytes)) != 0)
                bad = it->v;
        }
        double dt = now_s() - t0;
        pthread_mutex_lock(&pf->mu);
        pf->read_s += dt;
        if (e) {
            pf->failed = true;
            pf->fail_errno = e;
            pf->fail_v = bad;
            pf->fail_load = G;
        } else {
            pf->bytes_read += pf->layer_bytes[o];
            pf->loads_done++;
            pf->loaded = G + 1;
            pf->next = G + 1;
        }
        pthread_cond_broadcast(&pf->cv);
    }
    pthread_mutex_unlock(&pf->mu);
    return NULL;
}

static void pf_stop(ex_prefetch *pf) {
    if (!pf->started)
        return;
    pthread_mutex_lock(&pf->mu);
    pf->quit = true;
    pthread_cond_broadcast(&pf->cv);
    pthread_mutex_unlock(&pf->mu);
    pthread_join(pf->thread, NULL);
    pf->started = false;
    pf->quit = false;
}

static int pf_start(ex_prefetch *pf, sn_err *err) {
    if (pf->started)
        return SNUG_OK;
    pf->next = pf->loaded = pf->released = 0;
    pf->sweep = 0;
    pf->failed = false;
    int e = pthread_create(&pf->thread, NULL, pf_main, pf);
    if (e)
        return sn_errf(err, SNUG_ERR_INTERNAL, "cannot start the prefetch thread: %s", strerror(e));
    pf->started = true;
    return SNUG_OK;
}

int ex_prefetch_new(const sn_graph *g, const sn_plan *p, ex_prefetch **out, sn_err *err) {
    *out = NULL;
    const sn_plan_stream *st = &p->stream;
    int n = st->n_layers - st->first_layer;
    ex_prefetch *pf = sn_calloc(1, sizeof *pf);
    if (!pf)
        return sn_errf(err, SNUG_ERR_OOM, "out of memory");
    pf->g = g;
    pf->n_layers = st->n_layers;
    pf->depth = st->depth;
    pf->slot_bytes = sn_stream_align(st->slot_bytes ? st->slot_bytes : 64);
    pf->ring_bytes = pf->slot_bytes * (size_t)pf->depth;
    pf->items = sn_calloc((size_t)st->n_values + 1, sizeof *pf->items);
    pf->first_item = sn_calloc((size_t)n + 2, sizeof *pf->first_item);
    pf->layer_bytes = sn_calloc((size_t)n + 1, sizeof *pf->layer_bytes);
    pf->ring = sn_pages_alloc(pf->ring_bytes);
    pf->ord = sn_malloc(sizeof *pf->ord * ((size_t)st->n_layers + 1));
    pthread_mutex_init(&pf->mu, NULL);
    pthread_cond_init(&pf->cv, NULL);
    if (!pf->items || !pf->first_item || !pf->layer_bytes || !pf->ring || !pf->ord) {
        size_t slot = pf->slot_bytes;
        ex_prefetch_free(pf);
        return sn_errf(err, SNUG_ERR_OOM, "out of memory for %d weight staging slots of %zu bytes", st->depth, slot);
    }
    /* items grouped by layer, in file order within one (reads run forward) */
    int k = 0, o = 0;
    for (int l = 0; l < st->n_layers; l++)
        pf->ord[l] = -1;
    for (int l = st->first_layer; l < st->n_layers; l++) {
        pf->first_item[o] = k;
        for (int v = 0; v < g->n_values; v++) {
            const sn_plan_value *pv = &p->values[v];
            if (pv->storage != SN_STORE_STREAMED || g->nodes[pv->first].layer != l)
                continue;
            pf->items[k++] = (pf_item){v, g->values[v].init->t.data, pv->size, pv->offset};
            pf->layer_bytes[o] += pv->size;
        }
        for (int a = pf->first_item[o] + 1; a < k; a++) /* insertion sort by address */
            for (int b = a; b > pf->first_item[o] && pf->items[b].src < pf->items[b - 1].src; b--) {
                pf_item t = pf->items[b];
                pf->items[b] = pf->items[b - 1];
                pf->items[b - 1] = t;
            }
        if (k > pf->first_item[o]) /* a layer with nothing streamed takes no ordinal */
            pf->ord[l] = o++;
    }
    pf->n = o;
    pf->first_item[o] = k;
    if (!o) {
        ex_prefetch_free(pf);
        return sn_errf(err, SNUG_ERR_INTERNAL, "weight streaming planned without a streamed value");
    }
    int rc = pf_start(pf, err); /* the first layers load while the resident ones compute */
    if (rc != SNUG_OK) {
        ex_prefetch_free(pf);
        return rc;
    }
    *out = pf;
    return SNUG_OK;
}

void ex_prefetch_free(ex_prefetch *pf) {
    if (!pf)
        return;
    pf_stop(pf);
    pthread_mutex_destroy(&pf->mu);
    pthread_cond_destroy(&pf->cv);
    if (pf->ring)
        sn_pages_free(pf->ring, pf->ring_bytes, 0);
    sn_free(pf->items);
    sn_free(pf->first_item);
    sn_free(pf->layer_bytes);
    sn_free(pf->ord);
    sn_free(pf);
}

int ex_prefetch_probe(ex_prefetch *pf, double *bytes_per_s, sn_err *err) {
    *bytes_per_s = 0;
    uint8_t *buf = sn_pages_alloc(pf->slot_bytes);
    if (!buf)
        return sn_errf(err, SNUG_ERR_OOM, "out of memory for a %zu-byte slot", pf->slot_bytes);
    uint64_t bytes = 0;
    int e = 0;
    double t0 = now_s();
    for (int o = 0; o < pf->n && !e; o++)
        for (int k = pf->first_item[o]; k < pf->first_item[o + 1] && !e; k++) {
            const pf_item *it = &pf->items[k];
            e = sn_model_read_uncached(pf->g->model, buf + it->off, it->src, it->bytes);
            bytes += it->bytes;
        }
    double dt = now_s() - t0;
    sn_pages_free(buf, pf->slot_bytes, 0);
    if (e)
        return sn_errf(err, SNUG_ERR_IO, "weight streaming: reading the streamed layers failed: %s", strerror(e));
    *bytes_per_s = dt > 0 ? (double)bytes / dt : 0;
    return SNUG_OK;
}

int ex_prefetch_ordinal(const ex_prefetch *pf, int layer) {
    return layer >= 0 && layer < pf->n_layers ? pf->ord[layer] : -1;
}

int ex_prefetch_count(const ex_prefetch *pf) { return pf->n; }

int ex_prefetch_wait(ex_prefetch *pf, int o, sn_tensor *vals, sn_err *err) {
    SN_TRY(pf_start(pf, err)); /* after a reset */
    uint64_t G = pf->sweep * (uint64_t)pf->n + (uint64_t)o;
    pthread_mutex_lock(&pf->mu);
    if (pf->loaded <= G && !pf->failed) {
        double t0 = now_s();
        while (pf->loaded <= G && !pf->failed)
            pthread_cond_wait(&pf->cv, &pf->mu);
        pf->stall_s += now_s() - t0;
    }
    bool failed = pf->failed && pf->loaded <= G;
    int e = pf->fail_errno, fv = pf->fail_v;
    pthread_mutex_unlock(&pf->mu);
    if (failed) {
        const sn_value *val = &pf->g->values[fv];
        const char *file = sn_model_file_of(pf->g->model, val->init->t.data, sn_tensor_nbytes(&val->init->t));
        return sn_errf(err, SNUG_ERR_IO, "weight streaming: cannot read weight '%s' (%zu bytes) from '%s': %s",
                       val->name, sn_tensor_nbytes(&val->init->t), file ? file : pf->g->model->path,
                       e == EIO ? "the file ended early (did it change under the session?)" : strerror(e));
    }
    uint8_t *slot = pf->ring + (size_t)(G % (uint64_t)pf->depth) * pf->slot_bytes;
    for (int k = pf->first_item[o]; k < pf->first_item[o + 1]; k++)
        vals[pf->items[k].v].data = slot + pf->items[k].off;
    return SNUG_OK;
}

void ex_prefetch_release(ex_prefetch *pf, int upto) {
    uint64_t R = pf->sweep * (uint64_t)pf->n + (uint64_t)upto;
    pthread_mutex_lock(&pf->mu);
    if (R > pf->released) {
        pf->released = R;
        pthread_cond_broadcast(&pf->cv);
    }
    pthread_mutex_unlock(&pf->mu);
}

void ex_prefetch_end_run(ex_prefetch *pf, sn_tensor *vals, bool complete) {
    if (complete) {
        ex_prefetch_release(pf, pf->n); /* every layer of the sweep, whatever the schedule said */
        pf->sweep++;
    } else { /* part of a sweep: start afresh */
        pf_stop(pf);
    }
    /* no value keeps pointing into a slot that will hold another layer: the
     * file map's bytes are the same weights (a stray read is slow, not wrong) */
    for (int k = 0; k < pf->first_item[pf->n]; k++)
        vals[pf->items[k].v].data = (void *)pf->items[k].src;
}

void ex_prefetch_stats(ex_prefetch *pf, sn_exec_stream_stats *c) {
    pthread_mutex_lock(&pf->mu);
    c->bytes_read = pf->bytes_read;
    c->loads = pf->loads_done;
    c->read_s = pf->read_s;
    c->stall_s = pf->stall_s;
    pthread_mutex_unlock(&pf->mu);
    c->staging_bytes = pf->ring_bytes;
    c->layers = pf->n;
}
