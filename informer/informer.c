/* The shared index informer: reflector -> DeltaFIFO -> cache, and a
 * coalescing notification queue + thread per handler (docs/informer.md). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/ptrq.h"
#include "core/strmap.h"
#include "core/trace.h"
#include "informer/informer_internal.h"

/* ---- per-handler pending notifications -----------------------------------------------------
 * At most one entry per key: an optional delete part (delivered first) and
 * an optional live part (add or update). Merging rules in docs/informer.md. */

enum { LIVE_NONE = 0, LIVE_ADD = 1, LIVE_UPDATE = 2 };

typedef struct pend {
    bool has_del;
    bool initial; /* the live part is an add from the initial list / replay */
    int live;
    const kcr_object *del_obj;
    const kcr_tombstone *del_tomb;
    const kcr_object *old, *cur;
    char key[];
} pend;

/* A handler thread is joined exactly once, by kcr_informer_stop or
 * kcr_informer_remove_handler, whichever comes first; the other waits. */
typedef enum join_state { JOIN_NONE, JOIN_RUNNING, JOIN_DONE } join_state;

struct kcr_handler_reg {
    kcr_informer *inf;
    kcr_event_handler h;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    struct kcr__strmap pending; /* key -> pend */
    struct kcr__ptrq order;     /* pend, oldest first */
    size_t initial_pending;     /* initial adds not yet delivered */
    size_t peak;
    bool stop;
    join_state joined;
    /* The informer's list holds one reference, kcr_informer_stop one per
     * handler it is stopping: whoever drops the last frees it, so a remove
     * running while stop joins the thread cannot free it under stop. */
    atomic_int refs;
    /* under inf->mu */
    int64_t next_resync_ns;
    bool syncing; /* due at the last resync: gets Sync and unchanged Replaced deltas */
    kcr_handler_reg *next;
    kcr_handler_reg *stop_next; /* kcr_informer_stop's snapshot of the list */
};

struct kcr_informer {
    kcr_client *client;
    char *group, *version, *resource;
    kcr_resource res;
    kcr_store *store;
    kcr_delta_fifo *fifo;
    kcr_reflector *refl;
    kcr_reflector_sink fifo_sink; /* what the informer's sink forwards to */
    bool keep_managed_fields;
    kcr_object_transform_fn transform;
    void *transform_ud;
    kcr_watch_error_fn on_error;
    void *error_ud;

    pthread_mutex_t mu;
    pthread_cond_t cond;
    kcr_handler_reg *handlers;
    bool started, stopped, synced;
    bool listed;        /* a complete initial state reached the sink */
    bool applied_first; /* the first list went straight to the cache */
    uint64_t resync_timeouts;
    bool resync_started;
    pthread_t proc;
    pthread_t resync; /* sleeps until the nearest handler resync is due */
};

static void pend_free(pend *p)
{
    kcr_object_unref(p->del_obj);
    kcr_tombstone_unref(p->del_tomb);
    kcr_object_unref(p->old);
    kcr_object_unref(p->cur);
    free(p);
}

static void drop_live(kcr_handler_reg *h, pend *p)
{
    if (p->initial)
        h->initial_pending--;
    kcr_object_unref(p->old);
    kcr_object_unref(p->cur);
    p->old = p->cur = NULL;
    p->live = LIVE_NONE;
    p->initial = false;
}

typedef enum notif_kind { N_ADD, N_UPDATE, N_DELETE } notif_kind;

/* Queues (or merges) one notification for handler h. Never blocks on the
 * handler: only on its short queue lock. */
static void enqueue(kcr_handler_reg *h, const char *key, notif_kind kind, const kcr_object *old,
                    const kcr_object *cur, const kcr_tombstone *tomb, bool initial)
{
    pthread_mutex_lock(&h->mu);
    if (h->stop) {
        pthread_mutex_unlock(&h->mu);
        return;
    }
    pend *p = kcr__strmap_get(&h->pending, key);
    if (!p) {
        size_t len = strlen(key);
        p = calloc(1, sizeof *p + len + 1);
        if (!p || kcr__strmap_put(&h->pending, key, p, NULL) != KCR_OK) {
            free(p);
            pthread_mutex_unlock(&h->mu);
            kcr__log(KCR_LOG_ERROR, "informer", "out of memory: notification for %s dropped", key);
            return;
        }
        memcpy(p->key, key, len + 1);
        if (kcr__ptrq_push(&h->order, p) != KCR_OK) {
            kcr__strmap_remove(&h->pending, key);
            free(p);
            pthread_mutex_unlock(&h->mu);
            kcr__log(KCR_LOG_ERROR, "informer", "out of memory: notification for %s dropped", key);
            return;
        }
        if (h->order.len > h->peak)
            h->peak = h->order.len;
        pthread_cond_signal(&h->cond);
    }
    switch (kind) {
    case N_ADD:
    case N_UPDATE:
        if (p->live != LIVE_NONE) {
            /* the handler has not seen the pending state yet: keep its
             * old (or its add), move to the newest */
            kcr_object_unref(p->cur);
            p->cur = kcr_object_ref(cur);
        } else if (kind == N_ADD || !old) {
            p->live = LIVE_ADD;
            p->cur = kcr_object_ref(cur);
            p->initial = initial;
            if (initial)
                h->initial_pending++;
        } else {
            p->live = LIVE_UPDATE;
            p->old = kcr_object_ref(old);
            p->cur = kcr_object_ref(cur);
        }
        break;
    case N_DELETE:
        if (p->live != LIVE_NONE)
            drop_live(h, p);
        kcr_object_unref(p->del_obj);
        kcr_tombstone_unref(p->del_tomb);
        p->has_del = true;
        p->del_obj = kcr_object_ref(cur);
        p->del_tomb = tomb ? kcr_tombstone_ref(tomb) : NULL;
        break;
    }
    pthread_mutex_unlock(&h->mu);
}

static void *handler_main(void *arg)
{
    kcr_handler_reg *h = arg;
    const kcr_event_handler *e = &h->h;
    pthread_mutex_lock(&h->mu);
    for (;;) {
        while (!h->stop && !h->order.len)
            pthread_cond_wait(&h->cond, &h->mu);
        if (h->stop)
            break;
        pend *p = kcr__ptrq_pop(&h->order);
        kcr__strmap_remove(&h->pending, p->key);
        pthread_mutex_unlock(&h->mu);
        if (p->has_del && e->on_delete)
            e->on_delete(p->key, p->del_obj, p->del_tomb, e->user_data);
        if (p->live == LIVE_ADD && e->on_add)
            e->on_add(p->key, p->cur, p->initial, e->user_data);
        else if (p->live == LIVE_UPDATE && e->on_update)
            e->on_update(p->key, p->old, p->cur, e->user_data);
        bool initial = p->initial;
        pend_free(p);
        pthread_mutex_lock(&h->mu);
        if (initial && --h->initial_pending == 0) {
            /* wake kcr_informer_wait_for_sync-style waiters polling us */
            pthread_mutex_unlock(&h->mu);
            pthread_mutex_lock(&h->inf->mu);
            pthread_cond_broadcast(&h->inf->cond);
            pthread_mutex_unlock(&h->inf->mu);
            pthread_mutex_lock(&h->mu);
        }
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

/* Stops the handler's thread and waits until it has ended. Idempotent and
 * safe from several threads at once: the first caller joins, the others
 * wait for that join. */
static void handler_stop_join(kcr_handler_reg *h)
{
    pthread_mutex_lock(&h->mu);
    h->stop = true;
    pthread_cond_broadcast(&h->cond);
    if (h->joined == JOIN_NONE) {
        h->joined = JOIN_RUNNING;
        pthread_mutex_unlock(&h->mu);
        pthread_join(h->thread, NULL);
        pthread_mutex_lock(&h->mu);
        h->joined = JOIN_DONE;
        pthread_cond_broadcast(&h->cond);
    }
    while (h->joined != JOIN_DONE)
        pthread_cond_wait(&h->cond, &h->mu);
    pthread_mutex_unlock(&h->mu);
}

static void handler_destroy(kcr_handler_reg *h)
{
    pend *p;
    while ((p = kcr__ptrq_pop(&h->order)) != NULL)
        pend_free(p);
    kcr__ptrq_free(&h->order);
    kcr__strmap_clear(&h->pending, NULL);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cond);
    free(h);
}

/* Drops one reference (see refs); the last frees the handler. */
static void handler_free(kcr_handler_reg *h)
{
    if (atomic_fetch_sub(&h->refs, 1) == 1)
        handler_destroy(h);
}

/* ---- processing: DeltaFIFO -> cache -> handlers ---------------------------------------------- */

static void distribute(kcr_informer *inf, const char *key, notif_kind kind, const kcr_object *old,
                       const kcr_object *cur, const kcr_tombstone *tomb, bool initial, bool sync)
{
    for (kcr_handler_reg *h = inf->handlers; h; h = h->next)
        if (!sync || h->syncing)
            enqueue(h, key, kind, old, cur, tomb, initial);
}

/* Runs with the DeltaFIFO lock held (so a relist cannot interleave). */
static kcr_err process(const char *key, const kcr_delta *deltas, size_t n, bool initial,
                       bool *requeue, void *ud)
{
    (void)requeue;
    kcr_informer *inf = ud;
    kcr__trace_stamp(KCR__TR_POP, key);
    kcr_err err = KCR_OK;
    pthread_mutex_lock(&inf->mu);
    for (size_t i = 0; i < n && err == KCR_OK; i++) {
        const kcr_delta *d = &deltas[i];
        if (d->type == KCR_DELTA_DELETED) {
            kcr_object *last = d->object ? NULL : kcr_store_get_by_key(inf->store, key);
            err = kcr_store_delete_key(inf->store, key);
            distribute(inf, key, N_DELETE, NULL, d->object ? d->object : last, d->tombstone,
                       false, false);
            kcr_object_unref(last);
            continue;
        }
        kcr_object *old = kcr_store_get_by_key(inf->store, key);
        err = kcr_store_update(inf->store, d->object);
        if (err != KCR_OK) {
            kcr_object_unref(old);
            break;
        }
        if (old) {
            bool sync = d->type == KCR_DELTA_SYNC ||
                        (d->type == KCR_DELTA_REPLACED &&
                         strcmp(kcr_object_resource_version(old),
                                kcr_object_resource_version(d->object)) == 0);
            distribute(inf, key, N_UPDATE, old, d->object, NULL, false, sync);
            kcr_object_unref(old);
        } else {
            distribute(inf, key, N_ADD, NULL, d->object, NULL, initial, false);
        }
    }
    pthread_mutex_unlock(&inf->mu);
    if (err != KCR_OK)
        kcr__log(KCR_LOG_ERROR, "informer", "%s: applying %s failed: %s", inf->res.resource, key,
                 kcr_last_error());
    return err;
}

static void check_synced(kcr_informer *inf)
{
    bool fifo_synced = kcr_delta_fifo_has_synced(inf->fifo);
    pthread_mutex_lock(&inf->mu);
    if (fifo_synced && inf->listed && !inf->synced) {
        inf->synced = true;
        pthread_cond_broadcast(&inf->cond);
    }
    pthread_mutex_unlock(&inf->mu);
}

/* ---- the informer's sink: watch events go to the DeltaFIFO, lists too
 * except the first --------------------------------------------------------------------------- */

/* A watch event into the DeltaFIFO, stamped when tracing (core/trace.h). */
static kcr_err traced(kcr_err (*push)(const kcr_object *, void *), const kcr_object *obj,
                      void *fifo)
{
    char *key = NULL;
    if (!kcr__trace_on() || kcr_store_key(obj, &key) != KCR_OK)
        return push(obj, fifo);
    kcr__trace_begin(key);
    kcr_err err = push(obj, fifo);
    kcr__trace_stamp(KCR__TR_FIFO, key);
    free(key);
    return err;
}

static kcr_err sink_add(const kcr_object *obj, void *ud)
{
    kcr_informer *inf = ud;
    return traced(inf->fifo_sink.on_add, obj, inf->fifo_sink.user_data);
}

static kcr_err sink_update(const kcr_object *obj, void *ud)
{
    kcr_informer *inf = ud;
    return traced(inf->fifo_sink.on_update, obj, inf->fifo_sink.user_data);
}

static kcr_err sink_delete(const kcr_object *obj, void *ud)
{
    kcr_informer *inf = ud;
    return traced(inf->fifo_sink.on_delete, obj, inf->fifo_sink.user_data);
}

/* The first complete list, with an empty cache and nothing queued, has
 * nothing to reconcile: it goes straight to the cache and the handlers'
 * queues instead of through the DeltaFIFO, which saves the fifo's per-key
 * bookkeeping for the whole list at the memory peak (docs/informer.md).
 * Later lists (relists) go through the fifo, which finds the deletions. */
static kcr_err apply_first_list(kcr_informer *inf, kcr_object *const *objs, size_t n,
                                const char *rv, bool *applied)
{
    *applied = false;
    pthread_mutex_lock(&inf->mu);
    bool first = !inf->applied_first && kcr_store_len(inf->store) == 0;
    pthread_mutex_unlock(&inf->mu);
    if (!first || kcr_delta_fifo_len(inf->fifo) != 0)
        return KCR_OK;
    /* an empty replace marks the fifo populated (nothing known, nothing
     * queued, so it queues nothing) */
    kcr_err err = inf->fifo_sink.on_replace(NULL, 0, rv, inf->fifo_sink.user_data);
    if (err != KCR_OK)
        return err;
    pthread_mutex_lock(&inf->mu);
    err = kcr_store_replace(inf->store, objs, n);
    for (size_t i = 0; err == KCR_OK && i < n; i++) {
        char *key = NULL;
        if ((err = kcr_store_key(objs[i], &key)) == KCR_OK)
            distribute(inf, key, N_ADD, NULL, objs[i], NULL, true, false);
        free(key);
    }
    inf->applied_first = *applied = err == KCR_OK;
    pthread_mutex_unlock(&inf->mu);
    return err;
}

static kcr_err sink_replace(kcr_object *const *objs, size_t n, const char *rv, void *ud)
{
    kcr_informer *inf = ud;
    bool applied;
    kcr_err err = apply_first_list(inf, objs, n, rv, &applied);
    if (err == KCR_OK && !applied)
        err = inf->fifo_sink.on_replace(objs, n, rv, inf->fifo_sink.user_data);
    if (err != KCR_OK)
        return err;
    pthread_mutex_lock(&inf->mu);
    inf->listed = true;
    pthread_mutex_unlock(&inf->mu);
    check_synced(inf);
    return KCR_OK;
}

static void on_refl_error(kcr_err err, const kcr_status *st, const char *msg, void *ud)
{
    kcr_informer *inf = ud;
    pthread_mutex_lock(&inf->mu);
    pthread_cond_broadcast(&inf->cond);
    pthread_mutex_unlock(&inf->mu);
    if (inf->on_error)
        inf->on_error(err, st, msg, inf->error_ud);
}

static bool is_stopped(kcr_informer *inf)
{
    pthread_mutex_lock(&inf->mu);
    bool s = inf->stopped;
    pthread_mutex_unlock(&inf->mu);
    return s;
}

static void *process_main(void *arg)
{
    kcr_informer *inf = arg;
    for (;;) {
        kcr_err err = kcr_delta_fifo_pop(inf->fifo, process, inf);
        if (err == KCR_ERR_SHUTDOWN || is_stopped(inf))
            break;
        if (!kcr_informer_has_synced(inf))
            check_synced(inf);
    }
    return NULL;
}

/* ---- resync timer ------------------------------------------------------------------------------
 * One thread per informer sleeps on inf->cond until the nearest handler
 * resync deadline (with no deadline when no handler asked for resync), so
 * it wakes only when a resync is due or the handlers change. When one is
 * due it marks which handlers are syncing (as client-go's shouldResync:
 * they keep that mark until the next due resync) and asks the DeltaFIFO
 * for Sync deltas. Called with inf->mu held; returns with it held. */

/* Marks due handlers and schedules their next resync; true if any was due.
 * *next gets the nearest deadline (INT64_MAX: none). */
static bool mark_due_handlers(kcr_informer *inf, int64_t now, int64_t *next)
{
    bool any_due = false;
    for (kcr_handler_reg *h = inf->handlers; h; h = h->next)
        if (h->h.resync_period_ms > 0 && now >= h->next_resync_ns)
            any_due = true;
    *next = INT64_MAX;
    for (kcr_handler_reg *h = inf->handlers; h; h = h->next) {
        if (any_due) {
            h->syncing = h->h.resync_period_ms > 0 && now >= h->next_resync_ns;
            if (h->syncing)
                h->next_resync_ns = now + h->h.resync_period_ms * KCR_NS_PER_MS;
        }
        if (h->h.resync_period_ms > 0 && h->next_resync_ns < *next)
            *next = h->next_resync_ns;
    }
    return any_due;
}

static void *resync_main(void *arg)
{
    kcr_informer *inf = arg;
    pthread_mutex_lock(&inf->mu);
    while (!inf->stopped) {
        int64_t next;
        bool due = mark_due_handlers(inf, kcr__now_ns(), &next);
        if (due && inf->synced) {
            /* lock order: DeltaFIFO -> informer (see process) */
            pthread_mutex_unlock(&inf->mu);
            kcr_err err = kcr_delta_fifo_resync(inf->fifo);
            if (err != KCR_OK)
                kcr__log(KCR_LOG_ERROR, "informer", "%s: resync failed: %s", inf->res.resource,
                         kcr_last_error());
            pthread_mutex_lock(&inf->mu);
            continue;
        }
        if (next == INT64_MAX) {
            pthread_cond_wait(&inf->cond, &inf->mu);
        } else {
            struct timespec ts = kcr__timespec_at(next);
            if (pthread_cond_timedwait(&inf->cond, &inf->mu, &ts) == ETIMEDOUT)
                inf->resync_timeouts++;
        }
    }
    pthread_mutex_unlock(&inf->mu);
    return NULL;
}

uint64_t kcr__informer_resync_timeouts(kcr_informer *inf)
{
    pthread_mutex_lock(&inf->mu);
    uint64_t n = inf->resync_timeouts;
    pthread_mutex_unlock(&inf->mu);
    return n;
}

/* ---- transform --------------------------------------------------------------------------------- */

static kcr_err informer_transform(const kcr_object *in, kcr_object **out, void *ud)
{
    kcr_informer *inf = ud;
    kcr_object *cur = kcr_object_ref(in);
    kcr_err err = KCR_OK;
    if (!inf->keep_managed_fields) {
        kcr_object *t = NULL;
        err = kcr_object_strip_managed_fields(cur, &t, NULL);
        kcr_object_unref(cur);
        cur = t;
    }
    if (err == KCR_OK && inf->transform) {
        kcr_object *t = NULL;
        err = inf->transform(cur, &t, inf->transform_ud);
        kcr_object_unref(cur);
        cur = t;
    }
    if (err != KCR_OK) {
        kcr_object_unref(cur);
        cur = NULL;
    }
    *out = cur;
    return err;
}

/* ---- lifecycle ------------------------------------------------------------------------------------ */

kcr_err kcr_informer_new(kcr_client *client, const kcr_resource *res,
                         const kcr_informer_options *opts, kcr_informer **out)
{
    if (out)
        *out = NULL;
    if (!client || !res || !res->version || !res->resource || !out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_informer_new: NULL argument");
    kcr_informer_options d = {0};
    if (!opts)
        opts = &d;
    kcr_informer *inf = calloc(1, sizeof *inf);
    if (!inf)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&inf->mu, NULL);
    kcr__cond_init_monotonic(&inf->cond);
    inf->client = client;
    inf->group = strdup(res->group ? res->group : "");
    inf->version = strdup(res->version);
    inf->resource = strdup(res->resource);
    inf->res = (kcr_resource){inf->group, inf->version, inf->resource};
    inf->keep_managed_fields = opts->keep_managed_fields;
    inf->transform = opts->transform;
    inf->transform_ud = opts->transform_user_data;
    inf->on_error = opts->reflector.on_error;
    inf->error_ud = opts->reflector.error_user_data;
    kcr_err err = KCR_OK;
    if (!inf->group || !inf->version || !inf->resource)
        err = kcr__fail(KCR_ERR_NOMEM, "out of memory");
    if (err == KCR_OK)
        err = kcr_store_new(&inf->store);
    if (err == KCR_OK)
        err = kcr_store_add_index(inf->store, KCR_INDEX_NAMESPACE, kcr_index_namespace, NULL);
    if (err == KCR_OK) {
        kcr_delta_fifo_options fo = {.known = kcr_store_known_objects(inf->store)};
        err = kcr_delta_fifo_new(&fo, &inf->fifo);
    }
    if (err == KCR_OK) {
        kcr_reflector_options ro = opts->reflector;
        ro.transform = informer_transform;
        ro.transform_user_data = inf;
        ro.on_error = on_refl_error;
        ro.error_user_data = inf;
        inf->fifo_sink = kcr_delta_fifo_sink(inf->fifo);
        kcr_reflector_sink sink = {.on_add = sink_add,
                                   .on_update = sink_update,
                                   .on_delete = sink_delete,
                                   .on_replace = sink_replace,
                                   .user_data = inf};
        err = kcr_reflector_new(client, &inf->res, &sink, &ro, &inf->refl);
    }
    if (err != KCR_OK) {
        kcr_informer_free(inf);
        return err;
    }
    *out = inf;
    return KCR_OK;
}

kcr_err kcr_informer_add_handler(kcr_informer *inf, const kcr_event_handler *eh,
                                 kcr_handler_reg **out)
{
    if (out)
        *out = NULL;
    if (!inf || !eh)
        return kcr__fail(KCR_ERR_INVALID, "kcr_informer_add_handler: NULL argument");
    if (eh->resync_period_ms > KCR__MAX_DURATION_MS)
        return kcr__fail(KCR_ERR_INVALID,
                         "kcr_informer_add_handler: resync_period_ms %lld is above %lld",
                         (long long)eh->resync_period_ms, (long long)KCR__MAX_DURATION_MS);
    kcr_handler_reg *h = calloc(1, sizeof *h);
    if (!h)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    h->inf = inf;
    h->h = *eh;
    atomic_init(&h->refs, 1);
    h->joined = JOIN_DONE; /* until its thread starts */
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cond, NULL);
    pthread_mutex_lock(&inf->mu);
    if (inf->stopped) {
        pthread_mutex_unlock(&inf->mu);
        handler_free(h);
        return kcr__fail(KCR_ERR_SHUTDOWN, "informer stopped");
    }
    /* Replay the cache as adds. Holding inf->mu keeps the processing thread
     * out, so the handler sees each object exactly once: replayed, or later. */
    kcr_object_list all = {0};
    kcr_err err = kcr_store_list(inf->store, &all);
    for (size_t i = 0; err == KCR_OK && i < all.len; i++) {
        char *key = NULL;
        if ((err = kcr_store_key(all.items[i], &key)) == KCR_OK)
            enqueue(h, key, N_ADD, NULL, all.items[i], NULL, true);
        free(key);
    }
    kcr_object_list_free(&all);
    if (err == KCR_OK && pthread_create(&h->thread, NULL, handler_main, h) != 0)
        err = kcr__fail(KCR_ERR_NOMEM, "cannot start a handler thread");
    if (err == KCR_OK)
        h->joined = JOIN_NONE;
    if (err != KCR_OK) {
        pthread_mutex_unlock(&inf->mu);
        handler_free(h);
        return err;
    }
    h->next_resync_ns = kcr__now_ns() + h->h.resync_period_ms * KCR_NS_PER_MS;
    kcr_handler_reg **tail = &inf->handlers;
    while (*tail)
        tail = &(*tail)->next;
    *tail = h;
    if (h->h.resync_period_ms > 0)
        pthread_cond_broadcast(&inf->cond); /* the resync timer may sleep past its deadline */
    pthread_mutex_unlock(&inf->mu);
    if (out)
        *out = h;
    return KCR_OK;
}

kcr_err kcr_informer_remove_handler(kcr_informer *inf, kcr_handler_reg *reg)
{
    if (!inf || !reg)
        return kcr__fail(KCR_ERR_INVALID, "kcr_informer_remove_handler: NULL argument");
    /* Look reg up before touching it: after a removal it is freed memory. */
    pthread_mutex_lock(&inf->mu);
    kcr_handler_reg **p = &inf->handlers;
    while (*p && *p != reg)
        p = &(*p)->next;
    if (!*p) {
        pthread_mutex_unlock(&inf->mu);
        return kcr__fail(KCR_ERR_NOT_FOUND,
                         "kcr_informer_remove_handler: no such handler on this informer (removed "
                         "already?)");
    }
    if (pthread_equal(pthread_self(), reg->thread)) {
        pthread_mutex_unlock(&inf->mu);
        return kcr__fail(KCR_ERR_STATE, "a handler cannot remove itself from its callback");
    }
    *p = reg->next;
    pthread_mutex_unlock(&inf->mu);
    handler_stop_join(reg);
    handler_free(reg);
    return KCR_OK;
}

bool kcr_handler_has_synced(kcr_handler_reg *reg)
{
    if (!reg)
        return false;
    pthread_mutex_lock(&reg->inf->mu);
    bool s = reg->inf->synced;
    pthread_mutex_unlock(&reg->inf->mu);
    pthread_mutex_lock(&reg->mu);
    s = s && reg->initial_pending == 0;
    pthread_mutex_unlock(&reg->mu);
    return s;
}

size_t kcr_handler_pending(kcr_handler_reg *reg, size_t *peak)
{
    pthread_mutex_lock(&reg->mu);
    size_t n = reg->order.len;
    if (peak)
        *peak = reg->peak;
    pthread_mutex_unlock(&reg->mu);
    return n;
}

kcr_err kcr_informer_add_index(kcr_informer *inf, const char *name, kcr_index_fn fn,
                               void *user_data)
{
    if (!inf)
        return kcr__fail(KCR_ERR_INVALID, "kcr_informer_add_index: NULL informer");
    return kcr_store_add_index(inf->store, name, fn, user_data);
}

kcr_err kcr_informer_start(kcr_informer *inf)
{
    if (!inf)
        return kcr__fail(KCR_ERR_INVALID, "kcr_informer_start: NULL informer");
    pthread_mutex_lock(&inf->mu);
    if (inf->started || inf->stopped) {
        pthread_mutex_unlock(&inf->mu);
        return kcr__fail(KCR_ERR_STATE, "informer already started or stopped");
    }
    if (pthread_create(&inf->proc, NULL, process_main, inf) != 0) {
        pthread_mutex_unlock(&inf->mu);
        return kcr__fail(KCR_ERR_NOMEM, "cannot start the informer thread");
    }
    inf->started = true;
    inf->resync_started = pthread_create(&inf->resync, NULL, resync_main, inf) == 0;
    pthread_mutex_unlock(&inf->mu);
    kcr_err err = inf->resync_started
                      ? kcr_reflector_start(inf->refl)
                      : kcr__fail(KCR_ERR_NOMEM, "cannot start the informer's resync thread");
    if (err != KCR_OK)
        kcr_informer_stop(inf);
    return err;
}

void kcr_informer_stop(kcr_informer *inf)
{
    if (!inf)
        return;
    pthread_mutex_lock(&inf->mu);
    bool was_stopped = inf->stopped, started = inf->started, resync = inf->resync_started;
    inf->stopped = true;
    pthread_cond_broadcast(&inf->cond);
    pthread_mutex_unlock(&inf->mu);
    if (was_stopped)
        return;
    if (inf->refl)
        kcr_reflector_stop(inf->refl);
    if (inf->fifo)
        kcr_delta_fifo_close(inf->fifo);
    if (started)
        pthread_join(inf->proc, NULL);
    if (resync)
        pthread_join(inf->resync, NULL);
    /* No one adds handlers once stopped, but one may be removed meanwhile:
     * hold a reference to each while joining it. */
    pthread_mutex_lock(&inf->mu);
    kcr_handler_reg *snapshot = NULL, **tail = &snapshot;
    for (kcr_handler_reg *h = inf->handlers; h; h = h->next) {
        atomic_fetch_add(&h->refs, 1);
        h->stop_next = NULL;
        *tail = h;
        tail = &h->stop_next;
    }
    pthread_mutex_unlock(&inf->mu);
    for (kcr_handler_reg *h = snapshot, *nx; h; h = nx) {
        nx = h->stop_next;
        handler_stop_join(h);
        handler_free(h);
    }
}

void kcr_informer_free(kcr_informer *inf)
{
    if (!inf)
        return;
    kcr_informer_stop(inf);
    while (inf->handlers) {
        kcr_handler_reg *h = inf->handlers;
        inf->handlers = h->next;
        handler_free(h);
    }
    kcr_reflector_free(inf->refl);
    if (inf->fifo)
        kcr_delta_fifo_free(inf->fifo);
    if (inf->store)
        kcr_store_free(inf->store);
    pthread_mutex_destroy(&inf->mu);
    pthread_cond_destroy(&inf->cond);
    free(inf->group);
    free(inf->version);
    free(inf->resource);
    free(inf);
}

bool kcr_informer_has_synced(kcr_informer *inf)
{
    pthread_mutex_lock(&inf->mu);
    bool s = inf->synced;
    pthread_mutex_unlock(&inf->mu);
    return s;
}

/* Errors that waiting will not cure: credentials, RBAC, a missing resource,
 * and TLS verification failures (unknown CA, wrong host name, expired
 * certificate, no TLS at all). */
static bool fail_fast(kcr_err err)
{
    return err == KCR_ERR_UNAUTHORIZED || err == KCR_ERR_FORBIDDEN || err == KCR_ERR_NOT_FOUND ||
           err == KCR_ERR_TLS;
}

kcr_err kcr_informer_wait_for_sync(kcr_informer *inf, int64_t timeout_ms, kcr_status *status)
{
    if (status)
        kcr_status_clear(status);
    if (!inf)
        return kcr__fail(KCR_ERR_INVALID, "kcr_informer_wait_for_sync: NULL informer");
    if (timeout_ms > KCR__MAX_DURATION_MS)
        timeout_ms = -1; /* as good as no limit, and its nanoseconds would overflow */
    int64_t deadline = timeout_ms >= 0 ? kcr__now_ns() + timeout_ms * KCR_NS_PER_MS : INT64_MAX;
    kcr_reflector_stats s0, s;
    kcr_reflector_get_stats(inf->refl, &s0);
    kcr_err err;
    pthread_mutex_lock(&inf->mu);
    for (;;) {
        if (inf->synced) {
            err = KCR_OK;
            break;
        }
        if (inf->stopped) {
            err = KCR_ERR_SHUTDOWN; /* detail: set after the loop */
            break;
        }
        err = kcr_reflector_last_error(inf->refl, NULL, NULL);
        kcr_reflector_get_stats(inf->refl, &s);
        int64_t now = kcr__now_ns();
        /* a 401/403/404 or TLS failure seen during this wait is reported at once */
        if ((fail_fast(err) && s.failures > s0.failures) || now >= deadline) {
            if (err == KCR_OK)
                err = KCR_ERR_TIMEOUT; /* detail: set after the loop */
            break;
        }
        int64_t wake = now + 200 * KCR_NS_PER_MS;
        struct timespec ts = kcr__timespec_at(wake < deadline ? wake : deadline);
        pthread_cond_timedwait(&inf->cond, &inf->mu, &ts);
    }
    pthread_mutex_unlock(&inf->mu);
    if (err == KCR_OK)
        return KCR_OK;
    if (err == KCR_ERR_SHUTDOWN)
        return kcr__fail(err, "informer for %s stopped before it synced", inf->res.resource);
    if (err == KCR_ERR_TIMEOUT)
        return kcr__fail(err, "informer for %s: not synced after %lld ms (no error reported)",
                         inf->res.resource, (long long)timeout_ms);
    char *msg = NULL;
    kcr_err last = kcr_reflector_last_error(inf->refl, status, &msg);
    if (last != KCR_OK)
        err = last;
    kcr__fail(err, "informer for %s not synced: %s", inf->res.resource, msg ? msg : "");
    free(msg);
    return err;
}

kcr_store *kcr_informer_store(kcr_informer *inf)
{
    return inf ? inf->store : NULL;
}

kcr_reflector *kcr_informer_reflector(kcr_informer *inf)
{
    return inf ? inf->refl : NULL;
}

char *kcr_informer_last_sync_rv(kcr_informer *inf)
{
    return kcr_reflector_last_sync_rv(inf->refl);
}
