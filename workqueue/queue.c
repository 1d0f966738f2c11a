/* The locked core of the queue: item nodes, the dirty/processing state
 * machine (make_ready, done), wake-up planning, the locked add path, and
 * remove, len, wake and shutdown. The add ring (ring.c), the getters'
 * policy (getter.c), priority lines (priority.c) and the delay heap
 * (delaying.c) build on it. */
#include "workqueue/queue.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "workqueue/fifo.h"
#include "workqueue/ring.h"

/* ---- item nodes -------------------------------------------------------- */

/* Nodes are made and freed under the lock only; short ones are recycled. */
static struct kcr__wq_item *item_new(struct kcr_workqueue *q, const char *key, size_t len,
                                     uint64_t hash)
{
    struct kcr__wq_item *it;
    if (len < KCR__WQ_NODE_KEY && q->free_items) {
        it = q->free_items;
        q->free_items = it->next;
        q->nfree--;
    } else {
        size_t cap = len < KCR__WQ_NODE_KEY ? KCR__WQ_NODE_KEY : len + 1;
        it = malloc(offsetof(struct kcr__wq_item, key) + cap);
        if (!it)
            return NULL;
        it->cap = (uint32_t)cap;
    }
    it->next = it->prev = NULL;
    it->hash = hash;
    it->added_ns = 0;
    it->prio = it->wait_prio = KCR_WQ_PRIORITY_NORMAL;
    it->timers = 0;
    it->flags = 0;
    it->payload = NULL;
    it->len = (uint32_t)len;
    memcpy(it->key, key, len + 1);
    return it;
}

static void item_free(struct kcr_workqueue *q, struct kcr__wq_item *it)
{
    if (it->cap == KCR__WQ_NODE_KEY && q->nfree < 4096) {
        it->next = q->free_items;
        q->free_items = it;
        q->nfree++;
    } else {
        free(it);
    }
}

struct kcr__wq_item *kcr__wq_lookup_or_create(struct kcr_workqueue *q, const char *key,
                                              size_t len, uint64_t hash)
{
    struct kcr__wq_item *it = kcr__keytab_find(&q->tab, key, len, hash);
    if (it)
        return it;
    it = item_new(q, key, len, hash);
    if (it && kcr__keytab_insert(&q->tab, hash, it) != 0) {
        item_free(q, it);
        it = NULL;
    }
    return it;
}

void kcr__wq_release_if_idle(struct kcr_workqueue *q, struct kcr__wq_item *it)
{
    if (it->flags == 0 && it->timers == 0 && !it->payload) {
        kcr__keytab_remove(&q->tab, it->hash, it);
        item_free(q, it);
    }
}

/* ---- locking and wake-ups ---------------------------------------------- */

void kcr__wq_notify(struct kcr_workqueue *q, int64_t n, struct kcr__wq_wake *w)
{
    if (n <= 0)
        return;
    /* A spinning getter will see one item without being woken. Getters that
     * leave with an item wake a sleeper for any remaining one (getter.c), so
     * nothing waits for long on this shortcut. */
    while (n > 0 && q->spin_claims < atomic_load_explicit(&q->spinning, memory_order_relaxed)) {
        q->spin_claims++;
        n--;
    }
    if (n == 0)
        return;
    /* One getter at a time: it takes a key and passes the baton (getter.c).
     * While workers hold keys, a standby on duty adds a worker only if
     * they fall behind. */
    if (q->processing > 0 && q->standby)
        return;
    if (kcr__wq_signal(q, w, 1) == 0 && q->tk_active)
        w->tk = true;
}

int64_t kcr__wq_signal(struct kcr_workqueue *q, struct kcr__wq_wake *w, int64_t n)
{
    int64_t unsignaled = q->nwaiters - q->signaled;
    if (n > unsignaled)
        n = unsignaled > 0 ? unsignaled : 0;
    w->cond += (int)n;
    q->signaled += (int)n;
    return n;
}

void kcr__wq_mutex_lock(struct kcr_workqueue *q)
{
    pthread_mutex_lock(&q->mu);
}

void kcr__wq_unlock(struct kcr_workqueue *q, const struct kcr__wq_wake *w)
{
    pthread_mutex_unlock(&q->mu);
    for (int i = 0; i < w->cond; i++)
        pthread_cond_signal(&q->cond);
    if (w->tk)
        pthread_cond_signal(&q->tk_cond);
}

/* ---- the dirty/processing state and the locked add --------------------- */

int kcr__wq_make_ready(struct kcr_workqueue *q, struct kcr__wq_item *it, int64_t now, int prio)
{
    if (it->flags & KCR__WQ_DIRTY) {
        if (prio > it->prio)
            kcr__wq_raise_prio(q, it, prio);
        return 0;
    }
    if (prio != KCR_WQ_PRIORITY_NORMAL || q->prio_on)
        return kcr__wq_make_ready_prio(q, it, now, prio);
    /* it->prio is NORMAL already: outside priority mode no item has another. */
    it->flags |= KCR__WQ_DIRTY;
    q->depth++;
    q->adds_total++;
    if (q->timing)
        kcr__wq_m_added(q, it, now);
    if (it->flags & KCR__WQ_PROCESSING)
        return 0;
    kcr__wq_fifo_push_tail(q, it);
    return 1;
}

kcr_err kcr__wq_fail_shutdown(const struct kcr_workqueue *q, const char *fn, const char *key)
{
    return kcr__fail(KCR_ERR_SHUTDOWN, "%s: workqueue \"%s\" is shutting down, \"%s\" dropped",
                     fn, q->name, key);
}

void kcr__wq_merge_payload(struct kcr_workqueue *q, struct kcr__wq_item *it, void *payload)
{
    if (payload)
        it->payload = q->pl.merge(it->payload, payload, q->pl.user_data);
}

void kcr__wq_drop_payload(struct kcr_workqueue *q, void *payload)
{
    if (payload)
        q->pl.free(payload, q->pl.user_data);
}

kcr_err kcr__wq_add_locked(struct kcr_workqueue *q, const char *key, size_t len, uint64_t hash,
                           int64_t now, bool retry, int prio, void *payload, const char *fn)
{
    struct kcr__wq_wake w = {0};
    kcr__wq_lock(q, &w); /* applies earlier adds first, so order is kept */
    if (q->shutting_down) {
        kcr__wq_drop_payload(q, payload);
        kcr__wq_unlock(q, &w);
        return kcr__wq_fail_shutdown(q, fn, key);
    }
    if (retry)
        kcr__wq_m_retry(q);
    if (q->heap_len) {
        if (!now)
            now = kcr__now_ns();
        kcr__wq_notify(q, kcr__wq_promote(q, now), &w);
    }
    kcr_err err = KCR_OK;
    struct kcr__wq_item *it = kcr__wq_lookup_or_create(q, key, len, hash);
    if (!it) {
        kcr__wq_drop_payload(q, payload);
        err = kcr__fail(KCR_ERR_NOMEM, "workqueue \"%s\": out of memory adding \"%s\"", q->name,
                        key);
    } else {
        kcr__wq_merge_payload(q, it, payload);
        if (!(it->flags & KCR__WQ_DIRTY)) {
            kcr__wq_notify(q, kcr__wq_make_ready(q, it, now, prio), &w);
            if (q->has_cb)
                kcr__wq_m_depth(q);
        } else if (prio > it->prio) {
            kcr__wq_make_ready(q, it, now, prio); /* only raises its priority */
        }
    }
    if (q->has_cb)
        kcr__wq_m_tick(q, now, false);
    kcr__wq_unlock(q, &w);
    return err;
}

/* ---- done -------------------------------------------------------------- */

/* The node being processed under `key` (lock held), or NULL. */
static struct kcr__wq_item *processing_node(struct kcr_workqueue *q, const char *key)
{
    /* Usually `key` is the pointer get returned: if the node it would sit
     * in is in the handed-out set (an address computed as a number, never
     * read before it is found), that is the node, without hashing the key or a table
     * lookup, which misses the cache once the table outgrows it. */
    const void *candidate = (const void *)((uintptr_t)key - offsetof(struct kcr__wq_item, key));
    if (kcr__ptrset_has(&q->handed_out, candidate))
        return (struct kcr__wq_item *)candidate;
    size_t len = strlen(key);
    struct kcr__wq_item *it =
        kcr__keytab_find(&q->tab, key, len, kcr__keytab_hash_seeded(q->hash_seed, key, len));
    return it && (it->flags & KCR__WQ_PROCESSING) ? it : NULL;
}

kcr_err kcr_workqueue_done(kcr_workqueue *q, const char *key)
{
    if (!key)
        return kcr__fail(KCR_ERR_INVALID, "kcr_workqueue_done: NULL key");
    kcr__wq_mutex_lock(q);
    struct kcr__wq_item *it = processing_node(q, key);
    if (!it) {
        pthread_mutex_unlock(&q->mu);
        return kcr__fail(KCR_ERR_STATE, "kcr_workqueue_done: key \"%s\" is not being processed",
                         key);
    }
    kcr__ptrset_remove(&q->handed_out, it);
    /* `key` may point into the node: do not read it after this point. */
    int64_t now = 0;
    if (q->timing) {
        now = kcr__now_ns();
        kcr__wq_m_done(q, it, now);
    }
    it->flags &= ~KCR__WQ_PROCESSING;
    q->processing--;
    struct kcr__wq_wake w = {0};
    if (it->flags & KCR__WQ_DIRTY) {
        kcr__wq_fifo_push(q, it, now);
        kcr__wq_notify(q, 1, &w);
    } else {
        kcr__wq_release_if_idle(q, it);
    }
    if (q->processing == 0 && q->drain_waiters)
        pthread_cond_broadcast(&q->drain_cond);
    if (q->has_cb)
        kcr__wq_m_tick(q, now, false);
    kcr__wq_unlock(q, &w);
    return KCR_OK;
}

/* ---- remove, len, wake ------------------------------------------------- */

kcr_err kcr_workqueue_remove(kcr_workqueue *q, const char *key)
{
    if (!key)
        return kcr__fail(KCR_ERR_INVALID, "kcr_workqueue_remove: NULL key");
    size_t len = strlen(key);
    uint64_t hash = kcr__keytab_hash_seeded(q->hash_seed, key, len);
    struct kcr__wq_wake w = {0};
    kcr__wq_lock(q, &w); /* earlier adds of this thread are applied first */
    struct kcr__wq_item *it = kcr__keytab_find(&q->tab, key, len, hash);
    bool removed = false;
    if (it) {
        if (it->flags & KCR__WQ_WAITING) {
            kcr__wq_heap_remove(q, it);
            removed = true;
        }
        if (it->flags & KCR__WQ_DIRTY) {
            if (it->flags & KCR__WQ_QUEUED)
                kcr__wq_fifo_unlink(q, it);
            it->flags &= ~KCR__WQ_DIRTY;
            q->depth--;
            if (q->prio_on)
                kcr__wq_prio_clean(q, it);
            if (q->has_cb)
                kcr__wq_m_depth(q);
            removed = true;
        }
        if (it->payload && !(it->flags & KCR__WQ_PROCESSING)) {
            kcr__wq_drop_payload(q, it->payload);
            it->payload = NULL;
            removed = true;
        }
        kcr__wq_release_if_idle(q, it);
    }
    kcr__wq_heap_trim(q);
    kcr__wq_unlock(q, &w);
    return removed ? KCR_OK
                   : kcr__fail(KCR_ERR_NOT_FOUND, "workqueue \"%s\": \"%s\" is not pending",
                               q->name, key);
}

size_t kcr_workqueue_len(kcr_workqueue *q)
{
    struct kcr__wq_wake w = {0};
    kcr__wq_lock(q, &w);
    if (q->heap_len)
        kcr__wq_notify(q, kcr__wq_promote(q, kcr__now_ns()), &w);
    size_t n = (size_t)q->queued;
    kcr__wq_unlock(q, &w);
    return n;
}

void kcr_workqueue_wake(kcr_workqueue *q)
{
    kcr__wq_mutex_lock(q);
    q->wake_gen++;
    pthread_cond_broadcast(&q->cond);
    pthread_cond_broadcast(&q->tk_cond);
    pthread_cond_broadcast(&q->standby_cond);
    pthread_mutex_unlock(&q->mu);
}

/* ---- shutdown ---------------------------------------------------------- */

static void begin_shutdown(kcr_workqueue *q)
{
    if (!q->shutting_down) {
        /* Adds that returned before shutdown are kept; later ones are not. */
        struct kcr__wq_wake ignored = {0}; /* waiters are woken below */
        kcr__wq_drain_claimed(q, &ignored);
        q->shutting_down = true;
        atomic_store(&q->closed, true);
        if (q->waiting)
            kcr__log(KCR_LOG_DEBUG, "workqueue", "queue \"%s\": shutdown drops %u delayed keys",
                     q->name, (unsigned)q->waiting);
        kcr__wq_heap_clear(q);
    }
    pthread_cond_broadcast(&q->cond);
    pthread_cond_broadcast(&q->tk_cond);
    pthread_cond_broadcast(&q->standby_cond);
}

void kcr_workqueue_shutdown(kcr_workqueue *q)
{
    kcr__wq_mutex_lock(q);
    begin_shutdown(q);
    /* A plain shutdown ends any drain wait (as in client-go). */
    if (q->draining) {
        q->draining = false;
        pthread_cond_broadcast(&q->drain_cond);
    }
    pthread_mutex_unlock(&q->mu);
}

void kcr_workqueue_shutdown_with_drain(kcr_workqueue *q)
{
    kcr__wq_mutex_lock(q);
    begin_shutdown(q);
    q->draining = true;
    q->drain_waiters++;
    while (++q->drain_checks, q->processing && q->draining)
        pthread_cond_wait(&q->drain_cond, &q->mu);
    q->drain_waiters--;
    pthread_mutex_unlock(&q->mu);
}

bool kcr_workqueue_shutting_down(kcr_workqueue *q)
{
    kcr__wq_mutex_lock(q);
    bool s = q->shutting_down;
    pthread_mutex_unlock(&q->mu);
    return s;
}

/* ---- payloads ---------------------------------------------------------- */

kcr_err kcr_workqueue_take_payload(kcr_workqueue *q, const char *key, void **payload)
{
    if (!key || !payload)
        return kcr__fail(KCR_ERR_INVALID, "kcr_workqueue_take_payload: NULL %s",
                         key ? "payload" : "key");
    *payload = NULL;
    size_t len = strlen(key);
    uint64_t hash = kcr__keytab_hash_seeded(q->hash_seed, key, len);
    kcr__wq_mutex_lock(q);
    struct kcr__wq_item *it = kcr__keytab_find(&q->tab, key, len, hash);
    if (it) {
        *payload = it->payload;
        it->payload = NULL;
        kcr__wq_release_if_idle(q, it);
    }
    pthread_mutex_unlock(&q->mu);
    return KCR_OK;
}

kcr_err kcr_workqueue_put_payload(kcr_workqueue *q, const char *key, void *payload)
{
    if (!key || !q->has_payload) {
        if (q->has_payload)
            kcr__wq_drop_payload(q, payload);
        return kcr__fail(KCR_ERR_INVALID, "kcr_workqueue_put_payload: %s",
                         key ? "the queue has no payload ops" : "NULL key");
    }
    if (!payload)
        return KCR_OK;
    size_t len = strlen(key);
    uint64_t hash = kcr__keytab_hash_seeded(q->hash_seed, key, len);
    kcr__wq_mutex_lock(q);
    struct kcr__wq_item *it = kcr__wq_lookup_or_create(q, key, len, hash);
    if (it)
        kcr__wq_merge_payload(q, it, payload);
    else
        kcr__wq_drop_payload(q, payload);
    pthread_mutex_unlock(&q->mu);
    return it ? KCR_OK
              : kcr__fail(KCR_ERR_NOMEM, "workqueue \"%s\": out of memory keeping \"%s\"'s payload",
                          q->name, key);
}
