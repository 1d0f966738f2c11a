/* The shared informer's handlers: registration (with the replay of the
 * cache to a late handler), removal, and per handler a coalescing queue of
 * pending notifications keyed by object key, delivered by a thread of its
 * own or, for inline handlers, by the informer's threads (docs/informer.md,
 * "Dispatch"). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/abi.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "informer/informer_impl.h"

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

/* Queues (or merges) one notification for handler h. Never blocks on the
 * handler: only on its short queue lock. */
static void enqueue(kcr_handler_reg *h, const char *key, kcr__notif_kind kind,
                    const kcr_object *old, const kcr_object *cur, const kcr_tombstone *tomb,
                    bool initial)
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
        if (h->h.delivery == KCR_HANDLER_DELIVERY_THREAD)
            pthread_cond_signal(&h->cond);
    }
    switch (kind) {
    case KCR__N_ADD:
    case KCR__N_UPDATE:
        if (p->live != LIVE_NONE) {
            /* the handler has not seen the pending state yet: keep its
             * old (or its add), move to the newest */
            kcr_object_unref(p->cur);
            p->cur = kcr_object_ref(cur);
        } else if (kind == KCR__N_ADD || !old) {
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
    case KCR__N_DELETE:
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

/* Delivers h's oldest pending notification. h->mu held on entry and exit,
 * released while the callbacks run; the queue is not empty. */
static void deliver_one(kcr_handler_reg *h)
{
    const kcr_event_handler *e = &h->h;
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

static void *handler_main(void *arg)
{
    kcr_handler_reg *h = arg;
    pthread_mutex_lock(&h->mu);
    for (;;) {
        while (!h->stop && !h->order.len)
            pthread_cond_wait(&h->cond, &h->mu);
        if (h->stop)
            break;
        deliver_one(h);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

/* Delivers an inline handler's queue until it is empty (or the handler
 * stops), as its drainer: h->mu held, h->draining set by the caller. Adds
 * made meanwhile by other threads are delivered too: they find the handler
 * draining and leave them to us, and we look at the queue under the same
 * lock hold that ends the drain. */
static void drain_claimed(kcr_handler_reg *h)
{
    while (!h->stop && h->order.len)
        deliver_one(h);
    h->draining = false;
    pthread_cond_broadcast(&h->cond); /* kcr__handler_stop_join */
}

/* Claims an inline handler's queue for the calling thread if it has work
 * and no other drainer (h->mu held). */
static bool claim(kcr_handler_reg *h)
{
    if (h->draining || h->stop || !h->order.len)
        return false;
    h->draining = true;
    h->drainer = pthread_self();
    return true;
}

void kcr__informer_deliver_inline(kcr_informer *inf)
{
    if (!atomic_load(&inf->n_inline))
        return;
    for (;;) {
        /* Claimed under inf->mu: a handler being removed is either unlinked
         * already or waits (kcr__handler_stop_join) until we are done. One
         * claim at a time, so a callback may remove any other handler. */
        kcr_handler_reg *h;
        pthread_mutex_lock(&inf->mu);
        for (h = inf->handlers; h; h = h->next) {
            if (h->h.delivery != KCR_HANDLER_DELIVERY_INLINE)
                continue;
            pthread_mutex_lock(&h->mu);
            if (claim(h))
                break; /* keeping h->mu */
            pthread_mutex_unlock(&h->mu);
        }
        pthread_mutex_unlock(&inf->mu);
        if (!h)
            return;
        drain_claimed(h);
        pthread_mutex_unlock(&h->mu);
    }
}

void kcr__handler_stop_join(kcr_handler_reg *h)
{
    pthread_mutex_lock(&h->mu);
    h->stop = true;
    pthread_cond_broadcast(&h->cond);
    while (h->draining) /* an inline handler's running callback */
        pthread_cond_wait(&h->cond, &h->mu);
    if (h->joined == KCR__JOIN_NONE) {
        h->joined = KCR__JOIN_RUNNING;
        pthread_mutex_unlock(&h->mu);
        pthread_join(h->thread, NULL);
        pthread_mutex_lock(&h->mu);
        h->joined = KCR__JOIN_DONE;
        pthread_cond_broadcast(&h->cond);
    }
    while (h->joined != KCR__JOIN_DONE)
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

void kcr__handler_unref(kcr_handler_reg *h)
{
    if (atomic_fetch_sub(&h->refs, 1) == 1)
        handler_destroy(h);
}

void kcr__informer_distribute(kcr_informer *inf, const char *key, kcr__notif_kind kind,
                              const kcr_object *old, const kcr_object *cur,
                              const kcr_tombstone *tomb, bool initial, bool sync)
{
    for (kcr_handler_reg *h = inf->handlers; h; h = h->next)
        if (!sync || h->syncing)
            enqueue(h, key, kind, old, cur, tomb, initial);
}

kcr_err (kcr_informer_add_handler)(size_t eh_size, kcr_informer *inf, const kcr_event_handler *eh,
                                   kcr_handler_reg **out)
{
    if (out)
        *out = NULL;
    if (!inf || !eh)
        return kcr__fail(KCR_ERR_INVALID, "kcr_informer_add_handler: NULL argument");
    KCR__ABI_OPTS(kcr_event_handler, eh, eh_size);
    if (eh->resync_period_ms > KCR__MAX_DURATION_MS)
        return kcr__fail(KCR_ERR_INVALID,
                         "kcr_informer_add_handler: resync_period_ms %lld is above %lld",
                         (long long)eh->resync_period_ms, (long long)KCR__MAX_DURATION_MS);
    if (eh->delivery != KCR_HANDLER_DELIVERY_THREAD && eh->delivery != KCR_HANDLER_DELIVERY_INLINE)
        return kcr__fail(KCR_ERR_INVALID,
                         "kcr_informer_add_handler: delivery %d is not a "
                         "kcr_handler_delivery",
                         (int)eh->delivery);
    bool inline_delivery = eh->delivery == KCR_HANDLER_DELIVERY_INLINE;
    kcr_handler_reg *h = calloc(1, sizeof *h);
    if (!h)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    h->inf = inf;
    h->h = *eh;
    atomic_init(&h->refs, 1);
    h->joined = KCR__JOIN_DONE; /* until its thread starts */
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cond, NULL);
    pthread_mutex_lock(&inf->mu);
    if (inf->stopped) {
        pthread_mutex_unlock(&inf->mu);
        kcr__handler_unref(h);
        return kcr__fail(KCR_ERR_SHUTDOWN, "informer stopped");
    }
    /* Replay the cache as adds. Holding inf->mu keeps the processing thread
     * out, so the handler sees each object exactly once: replayed, or later. */
    kcr_object_list all = {0};
    kcr_err err = kcr_store_list(inf->store, &all);
    for (size_t i = 0; err == KCR_OK && i < all.len; i++) {
        char *key = NULL;
        if ((err = kcr_store_key(all.items[i], &key)) == KCR_OK)
            enqueue(h, key, KCR__N_ADD, NULL, all.items[i], NULL, true);
        free(key);
    }
    kcr_object_list_free(&all);
    if (err == KCR_OK && !inline_delivery) {
        if (pthread_create(&h->thread, NULL, handler_main, h) != 0)
            err = kcr__fail(KCR_ERR_NOMEM, "cannot start a handler thread");
        else
            h->joined = KCR__JOIN_NONE;
    }
    if (err != KCR_OK) {
        pthread_mutex_unlock(&inf->mu);
        kcr__handler_unref(h);
        return err;
    }
    h->next_resync_ns = kcr__now_ns() + h->h.resync_period_ms * KCR_NS_PER_MS;
    kcr_handler_reg **tail = &inf->handlers;
    while (*tail)
        tail = &(*tail)->next;
    *tail = h;
    if (inline_delivery)
        atomic_fetch_add(&inf->n_inline, 1);
    if (h->h.resync_period_ms > 0)
        pthread_cond_broadcast(&inf->cond); /* the resync timer may sleep past its deadline */
    /* An inline handler's replay is delivered here, before we return: the
     * processing thread may be asleep with nothing to pop. Claimed before
     * inf->mu is released, so it comes before any later change. */
    bool mine = false;
    if (inline_delivery) {
        pthread_mutex_lock(&h->mu);
        mine = claim(h);
        pthread_mutex_unlock(&h->mu);
    }
    pthread_mutex_unlock(&inf->mu);
    if (mine) {
        pthread_mutex_lock(&h->mu);
        drain_claimed(h);
        pthread_mutex_unlock(&h->mu);
    }
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
    pthread_mutex_lock(&reg->mu);
    bool own = reg->h.delivery == KCR_HANDLER_DELIVERY_INLINE
                   ? reg->draining && pthread_equal(pthread_self(), reg->drainer)
                   : reg->joined != KCR__JOIN_DONE && pthread_equal(pthread_self(), reg->thread);
    pthread_mutex_unlock(&reg->mu);
    if (own) {
        pthread_mutex_unlock(&inf->mu);
        return kcr__fail(KCR_ERR_STATE, "a handler cannot remove itself from its callback");
    }
    *p = reg->next;
    if (reg->h.delivery == KCR_HANDLER_DELIVERY_INLINE)
        atomic_fetch_sub(&inf->n_inline, 1);
    pthread_mutex_unlock(&inf->mu);
    kcr__handler_stop_join(reg);
    kcr__handler_unref(reg);
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
