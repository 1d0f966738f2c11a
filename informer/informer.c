/* The shared index informer's lifecycle and processing: reflector ->
 * DeltaFIFO -> cache -> the handlers' queues (informer_handlers.c), the
 * resync timer, has_synced and wait_for_sync (docs/informer.md). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/abi.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/trace.h"
#include "informer/informer_impl.h"
#include "informer/informer_internal.h"

void kcr__informer_note_applied(kcr_informer *inf, const char *rv)
{
    uint64_t v = 0;
    for (const char *p = rv; p && *p; p++) {
        if (*p < '0' || *p > '9' || v > (UINT64_MAX - 9) / 10)
            return;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (v > inf->applied_rv)
        inf->applied_rv = v;
}

bool kcr__informer_shard_synced(kcr_informer *inf, uint64_t gen)
{
    return kcr__reflector_shard_listed(inf->refl, gen) && kcr_delta_fifo_len(inf->fifo) == 0;
}

uint64_t kcr__informer_applied_rv(kcr_informer *inf)
{
    pthread_mutex_lock(&inf->mu);
    uint64_t v = inf->applied_rv;
    pthread_mutex_unlock(&inf->mu);
    return v;
}

kcr_err kcr__informer_process(const char *key, const kcr_delta *deltas, size_t n, bool initial,
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
            if (d->object)
                kcr__informer_note_applied(inf, kcr_object_resource_version(d->object));
            kcr__informer_distribute(inf, key, KCR__N_DELETE, NULL, d->object ? d->object : last,
                                     d->tombstone, false, false);
            kcr_object_unref(last);
            continue;
        }
        kcr_object *old = kcr_store_get_by_key(inf->store, key);
        err = kcr_store_update(inf->store, d->object);
        if (err != KCR_OK) {
            kcr_object_unref(old);
            break;
        }
        kcr__informer_note_applied(inf, kcr_object_resource_version(d->object));
        if (old) {
            bool sync =
                d->type == KCR_DELTA_SYNC || (d->type == KCR_DELTA_REPLACED &&
                                              strcmp(kcr_object_resource_version(old),
                                                     kcr_object_resource_version(d->object)) == 0);
            kcr__informer_distribute(inf, key, KCR__N_UPDATE, old, d->object, NULL, false, sync);
            kcr_object_unref(old);
        } else {
            kcr__informer_distribute(inf, key, KCR__N_ADD, NULL, d->object, NULL, initial, false);
        }
    }
    pthread_mutex_unlock(&inf->mu);
    if (err != KCR_OK)
        kcr__log(KCR_LOG_ERROR, "informer", "%s: applying %s failed: %s", inf->res.resource, key,
                 kcr_last_error());
    return err;
}

void kcr__informer_check_synced(kcr_informer *inf)
{
    bool fifo_synced = kcr_delta_fifo_has_synced(inf->fifo);
    pthread_mutex_lock(&inf->mu);
    if (fifo_synced && inf->listed && !inf->synced) {
        inf->synced = true;
        pthread_cond_broadcast(&inf->cond);
    }
    pthread_mutex_unlock(&inf->mu);
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

void kcr__informer_after_apply(kcr_informer *inf)
{
    kcr__informer_deliver_inline(inf);
    if (!kcr_informer_has_synced(inf))
        kcr__informer_check_synced(inf);
}

static void *process_main(void *arg)
{
    kcr_informer *inf = arg;
    for (;;) {
        kcr_err err = kcr_delta_fifo_pop(inf->fifo, kcr__informer_process, inf);
        if (err == KCR_ERR_SHUTDOWN || is_stopped(inf))
            break;
        kcr__informer_after_apply(inf);
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

/* ---- lifecycle
 * ------------------------------------------------------------------------------------ */

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
    kcr_err err = kcr__abi_reserved(opts->reserved, sizeof opts->reserved, "kcr_informer_options");
    if (err != KCR_OK)
        return err;
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
    inf->transform = opts->reflector.transform;
    inf->transform_ud = opts->reflector.transform_user_data;
    inf->on_error = opts->reflector.on_error;
    inf->error_ud = opts->reflector.error_user_data;
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
        ro.transform = kcr__informer_transform;
        ro.transform_user_data = inf;
        ro.on_error = on_refl_error;
        ro.error_user_data = inf;
        inf->fifo_sink = kcr_delta_fifo_sink(inf->fifo);
        kcr_reflector_sink sink = kcr__informer_sink(inf);
        err = kcr_reflector_new(client, &inf->res, &sink, &ro, &inf->refl);
    }
    if (err == KCR_OK && !inf->keep_managed_fields)
        kcr__reflector_drop_managed_fields(inf->refl); /* never built, not stripped after */
    if (err == KCR_OK) {
        kcr__reflector_set_list_reuse(inf->refl, kcr__informer_list_reuse, inf);
        kcr__reflector_set_narrow(inf->refl, kcr__informer_narrow, inf);
    }
    if (err != KCR_OK) {
        kcr_informer_free(inf);
        return err;
    }
    *out = inf;
    return KCR_OK;
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
        kcr__handler_stop_join(h);
        kcr__handler_unref(h);
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
        kcr__handler_unref(h);
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
    if (timeout_ms < 0 && kcr__duration_check("kcr_informer_wait_for_sync: timeout_ms", timeout_ms,
                                               KCR__DURATION_INFINITE) != KCR_OK)
        return KCR_ERR_INVALID; /* detail: kcr__duration_check */
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
