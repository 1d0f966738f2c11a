/* The de-duplicating queue: add, get, done, remove, wake, shutdown. */
#define _GNU_SOURCE /* PTHREAD_MUTEX_ADAPTIVE_NP */
#include "workqueue/queue.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"

#define FREE_LIST_MAX 1024u

/* Iterations of a getter's spin-wait before it sleeps (0: never spin). */
#ifndef KCR__WQ_SPIN
#define KCR__WQ_SPIN 2000
#endif

/* ---- item nodes -------------------------------------------------------- */

static struct kcr__wq_item *item_alloc(struct kcr_workqueue *q, size_t len)
{
    struct kcr__wq_item *it;
    if (len < KCR__WQ_SMALL_KEY && q->free_items) {
        it = q->free_items;
        q->free_items = it->next;
        q->nfree--;
    } else {
        size_t cap = len < KCR__WQ_SMALL_KEY ? KCR__WQ_SMALL_KEY : len + 1;
        it = malloc(offsetof(struct kcr__wq_item, key) + cap);
        if (!it)
            return NULL;
        it->cap = (uint32_t)cap;
    }
    it->flags = 0;
    it->heap_idx = KCR__WQ_NO_HEAP;
    it->next = it->prev = NULL;
    return it;
}

static void item_free(struct kcr_workqueue *q, struct kcr__wq_item *it)
{
    if (it->cap == KCR__WQ_SMALL_KEY && q->nfree < FREE_LIST_MAX) {
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
    it = item_alloc(q, len);
    if (!it)
        return NULL;
    it->hash = hash;
    it->len = (uint32_t)len;
    memcpy(it->key, key, len + 1);
    if (kcr__keytab_insert(&q->tab, hash, it) != 0) {
        item_free(q, it);
        return NULL;
    }
    return it;
}

void kcr__wq_release_if_idle(struct kcr_workqueue *q, struct kcr__wq_item *it)
{
    if (it->flags == 0 && it->heap_idx == KCR__WQ_NO_HEAP) {
        kcr__keytab_remove(&q->tab, it->hash, it);
        item_free(q, it);
    }
}

/* ---- FIFO -------------------------------------------------------------- */

static void fifo_push(struct kcr_workqueue *q, struct kcr__wq_item *it)
{
    it->next = NULL;
    it->prev = q->tail;
    if (q->tail)
        q->tail->next = it;
    else
        q->head = it;
    q->tail = it;
    it->flags |= KCR__WQ_QUEUED;
    q->queued++;
    atomic_store_explicit(&q->avail, q->queued, memory_order_relaxed);
}

static void fifo_unlink(struct kcr_workqueue *q, struct kcr__wq_item *it)
{
    if (it->prev)
        it->prev->next = it->next;
    else
        q->head = it->next;
    if (it->next)
        it->next->prev = it->prev;
    else
        q->tail = it->prev;
    it->next = it->prev = NULL;
    it->flags &= ~KCR__WQ_QUEUED;
    q->queued--;
    atomic_store_explicit(&q->avail, q->queued, memory_order_relaxed);
}

/* ---- shared helpers ---------------------------------------------------- */

void kcr__wq_notify(struct kcr_workqueue *q, int64_t n, struct kcr__wq_wake *w)
{
    if (n <= 0)
        return;
    /* A spinning getter will see one item without being woken. Getters that
     * leave with an item wake a sleeper for any remaining one (see get), so
     * nothing waits for long on this shortcut. */
    if (!q->spin_claimed && atomic_load_explicit(&q->spinning, memory_order_relaxed)) {
        q->spin_claimed = true;
        if (--n == 0)
            return;
    }
    int64_t sleeping = q->nwaiters - w->cond;
    w->cond += (int)(n < sleeping ? n : sleeping > 0 ? sleeping : 0);
    if (n > sleeping && q->tk_active)
        w->tk = true;
}

void kcr__wq_unlock(struct kcr_workqueue *q, const struct kcr__wq_wake *w)
{
    pthread_mutex_unlock(&q->mu);
    for (int i = 0; i < w->cond; i++)
        pthread_cond_signal(&q->cond);
    if (w->tk)
        pthread_cond_signal(&q->tk_cond);
}

int kcr__wq_make_ready(struct kcr_workqueue *q, struct kcr__wq_item *it, int64_t now)
{
    if (it->flags & KCR__WQ_DIRTY)
        return 0;
    it->flags |= KCR__WQ_DIRTY;
    q->depth++;
    q->adds_total++;
    if (q->timing)
        kcr__wq_m_added(q, it, now);
    if (it->flags & KCR__WQ_PROCESSING)
        return 0;
    fifo_push(q, it);
    return 1;
}

static inline size_t key_len(const char *key)
{
    return strlen(key);
}

/* ---- lifecycle --------------------------------------------------------- */

kcr_err kcr_workqueue_new(const kcr_workqueue_opts *opts, kcr_workqueue **out)
{
    static const kcr_workqueue_opts defaults;
    if (!opts)
        opts = &defaults;
    kcr_rate_limiter *limiter = opts->limiter;
    if (!out) {
        kcr_rate_limiter_free(limiter);
        return kcr__fail(KCR_ERR_INVALID, "kcr_workqueue_new: out is NULL");
    }
    *out = NULL;
    kcr_workqueue *q = calloc(1, sizeof *q);
    if (!q) {
        kcr_rate_limiter_free(limiter);
        return kcr__fail(KCR_ERR_NOMEM, "kcr_workqueue_new: out of memory");
    }
    q->name = strdup(opts->name ? opts->name : "");
    q->limiter = limiter ? limiter : kcr_rate_limiter_default();
    q->heap_cap = 16;
    q->heap = malloc(q->heap_cap * sizeof *q->heap);
    bool table = q->name && q->limiter && q->heap &&
                 kcr__keytab_init(&q->tab, opts->capacity_hint ? opts->capacity_hint : 64,
                                  offsetof(struct kcr__wq_item, key),
                                  offsetof(struct kcr__wq_item, len)) == 0;
    if (!table) {
        if (q->tab.slots)
            kcr__keytab_destroy(&q->tab);
        kcr_rate_limiter_free(q->limiter);
        free(q->heap);
        free(q->name);
        free(q);
        return kcr__fail(KCR_ERR_NOMEM, "kcr_workqueue_new: out of memory");
    }
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&q->mu, &ma);
    pthread_mutexattr_destroy(&ma);
    kcr__cond_init_monotonic(&q->cond);
    kcr__cond_init_monotonic(&q->tk_cond);
    pthread_cond_init(&q->drain_cond, NULL);
    if (opts->metrics) {
        q->m = *opts->metrics;
        q->has_cb = true;
        q->gauges = q->m.unfinished_work || q->m.longest_running;
        if (q->m.update_period_ns <= 0)
            q->m.update_period_ns = 500 * KCR_NS_PER_MS;
    }
    q->timing = q->has_cb || opts->track_time;
    *out = q;
    return KCR_OK;
}

void kcr_workqueue_free(kcr_workqueue *q)
{
    if (!q)
        return;
    for (size_t i = 0; i <= q->tab.mask; i++)
        if (q->tab.slots[i].node)
            free(q->tab.slots[i].node);
    while (q->free_items) {
        struct kcr__wq_item *it = q->free_items;
        q->free_items = it->next;
        free(it);
    }
    kcr__keytab_destroy(&q->tab);
    free(q->heap);
    kcr_rate_limiter_free(q->limiter);
    pthread_cond_destroy(&q->drain_cond);
    pthread_cond_destroy(&q->tk_cond);
    pthread_cond_destroy(&q->cond);
    pthread_mutex_destroy(&q->mu);
    free(q->name);
    free(q);
}

const char *kcr_workqueue_name(const kcr_workqueue *q)
{
    return q->name;
}

/* ---- add --------------------------------------------------------------- */

kcr_err kcr_workqueue_add(kcr_workqueue *q, const char *key)
{
    if (!key)
        return kcr__fail(KCR_ERR_INVALID, "kcr_workqueue_add: NULL key");
    size_t len = key_len(key);
    uint64_t hash = kcr__keytab_hash(&q->tab, key, len);
    pthread_mutex_lock(&q->mu);
    if (q->shutting_down) {
        pthread_mutex_unlock(&q->mu);
        return KCR_ERR_SHUTDOWN;
    }
    int64_t now = 0, pushed = 0;
    if (q->timing || q->heap_len) {
        now = kcr__now_ns();
        /* Deadlines that passed go first, so the FIFO keeps time order. */
        if (q->heap_len)
            pushed = kcr__wq_promote(q, now);
    }
    struct kcr__wq_item *it = kcr__wq_lookup_or_create(q, key, len, hash);
    struct kcr__wq_wake w = {0};
    if (!it) {
        kcr__wq_notify(q, pushed, &w);
        kcr__wq_unlock(q, &w);
        return kcr__fail(KCR_ERR_NOMEM, "kcr_workqueue_add: out of memory");
    }
    if (!(it->flags & KCR__WQ_DIRTY)) {
        pushed += kcr__wq_make_ready(q, it, now);
        if (q->has_cb) {
            kcr__wq_m_depth(q);
            kcr__wq_m_tick(q, now, false);
        }
    }
    kcr__wq_notify(q, pushed, &w);
    kcr__wq_unlock(q, &w);
    return KCR_OK;
}

/* ---- get --------------------------------------------------------------- */

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Called with the lock held and nothing ready: lets one getter at a time
 * wait briefly for a key without sleeping (and without the lock, so adders
 * are not slowed down). Returns true if it spun (the lock is held again). */
static bool spin_for_work(struct kcr_workqueue *q)
{
    if (KCR__WQ_SPIN <= 0 || atomic_exchange_explicit(&q->spinning, 1, memory_order_acquire))
        return false;
    pthread_mutex_unlock(&q->mu);
    for (int i = 0; i < KCR__WQ_SPIN; i++) {
        if (atomic_load_explicit(&q->avail, memory_order_relaxed))
            break;
        cpu_relax();
    }
    pthread_mutex_lock(&q->mu);
    atomic_store_explicit(&q->spinning, 0, memory_order_relaxed);
    q->spin_claimed = false;
    return true;
}

/* Blocks on `cond` until `until` (INT64_MAX: no limit). True if timed out. */
static bool wait_until(struct kcr_workqueue *q, pthread_cond_t *cond, int64_t until)
{
    if (until == INT64_MAX) {
        pthread_cond_wait(cond, &q->mu);
        return false;
    }
    struct timespec ts = kcr__timespec_at(until);
    return pthread_cond_timedwait(cond, &q->mu, &ts) == ETIMEDOUT;
}

kcr_err kcr_workqueue_get_timeout(kcr_workqueue *q, int64_t timeout_ns, const char **key)
{
    if (!key)
        return kcr__fail(KCR_ERR_INVALID, "kcr_workqueue_get: NULL key pointer");
    *key = NULL;
    int64_t deadline = INT64_MAX;
    if (timeout_ns == 0)
        deadline = 0;
    else if (timeout_ns > 0)
        deadline = kcr__now_ns() + timeout_ns;

    struct kcr__wq_wake w = {0};
    pthread_mutex_lock(&q->mu);
    uint64_t gen = q->wake_gen;
    kcr_err err = KCR_OK;
    struct kcr__wq_item *it = NULL;
    int64_t now = 0;
    bool spun = false;
    for (;;) {
        now = 0;
        if (q->heap_len || q->timing || deadline != INT64_MAX) {
            now = kcr__now_ns();
            if (q->heap_len) {
                int64_t pushed = kcr__wq_promote(q, now);
                /* This getter takes one of them itself. */
                if (pushed > 1)
                    kcr__wq_notify(q, pushed - 1, &w);
            }
        }
        if (q->head) {
            it = q->head;
            break;
        }
        if (q->shutting_down) {
            err = KCR_ERR_SHUTDOWN;
            break;
        }
        if (q->wake_gen != gen) {
            err = KCR_ERR_CANCELED;
            break;
        }
        if (now >= deadline) {
            err = KCR_ERR_TIMEOUT;
            break;
        }
        if (!spun) {
            /* Sleeping and being woken costs two context switches; a key
             * often arrives within microseconds. */
            spun = true;
            if (spin_for_work(q))
                continue;
        }
        if (q->gauges)
            kcr__wq_m_tick(q, now, false);
        bool need_time = q->heap_len || (q->gauges && q->processing);
        if (need_time && !q->tk_active) {
            /* Keep time for everyone: sleep until the nearest deadline. */
            int64_t until = deadline;
            if (q->heap_len)
                until = min64(until, q->heap[0]->ready_at);
            if (q->gauges && q->processing)
                until = min64(until, q->next_update_ns);
            q->tk_active = true;
            wait_until(q, &q->tk_cond, until);
            q->tk_active = false;
        } else {
            q->nwaiters++;
            wait_until(q, &q->cond, deadline);
            q->nwaiters--;
        }
    }
    if (it) {
        /* Pop the head: dirty -> processing. */
        q->head = it->next;
        if (q->head)
            q->head->prev = NULL;
        else
            q->tail = NULL;
        it->next = NULL;
        it->flags = (it->flags & ~(KCR__WQ_QUEUED | KCR__WQ_DIRTY)) | KCR__WQ_PROCESSING;
        q->queued--;
        atomic_store_explicit(&q->avail, q->queued, memory_order_relaxed);
        q->depth--;
        q->processing++;
        if (q->timing) {
            kcr__wq_m_got(q, it, now);
            if (q->has_cb) {
                kcr__wq_m_depth(q);
                kcr__wq_m_tick(q, now, false);
            }
        }
        *key = it->key;
    }
    /* Keys left and sleepers that nobody wakes: wake one (it will pass the
     * baton on the same way). Same if timekeeping is needed and nobody keeps
     * time. */
    if (q->nwaiters > w.cond &&
        (q->head || (!q->tk_active && (q->heap_len || (q->gauges && q->processing)))))
        w.cond++;
    kcr__wq_unlock(q, &w);
    return err;
}

kcr_err kcr_workqueue_get(kcr_workqueue *q, const char **key)
{
    return kcr_workqueue_get_timeout(q, -1, key);
}

/* ---- done -------------------------------------------------------------- */

kcr_err kcr_workqueue_done(kcr_workqueue *q, const char *key)
{
    if (!key)
        return kcr__fail(KCR_ERR_INVALID, "kcr_workqueue_done: NULL key");
    size_t len = key_len(key);
    uint64_t hash = kcr__keytab_hash(&q->tab, key, len);
    pthread_mutex_lock(&q->mu);
    struct kcr__wq_item *it = kcr__keytab_find(&q->tab, key, len, hash);
    if (!it || !(it->flags & KCR__WQ_PROCESSING)) {
        pthread_mutex_unlock(&q->mu);
        return kcr__fail(KCR_ERR_STATE, "kcr_workqueue_done: key \"%s\" is not being processed",
                         key);
    }
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
        fifo_push(q, it);
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
    size_t len = key_len(key);
    uint64_t hash = kcr__keytab_hash(&q->tab, key, len);
    pthread_mutex_lock(&q->mu);
    struct kcr__wq_item *it = kcr__keytab_find(&q->tab, key, len, hash);
    bool removed = false;
    if (it) {
        if (it->heap_idx != KCR__WQ_NO_HEAP) {
            kcr__wq_heap_remove(q, it);
            removed = true;
        }
        if (it->flags & KCR__WQ_DIRTY) {
            if (it->flags & KCR__WQ_QUEUED)
                fifo_unlink(q, it);
            it->flags &= ~KCR__WQ_DIRTY;
            q->depth--;
            if (q->has_cb)
                kcr__wq_m_depth(q);
            removed = true;
        }
        kcr__wq_release_if_idle(q, it);
    }
    pthread_mutex_unlock(&q->mu);
    return removed ? KCR_OK : KCR_ERR_NOT_FOUND;
}

size_t kcr_workqueue_len(kcr_workqueue *q)
{
    struct kcr__wq_wake w = {0};
    pthread_mutex_lock(&q->mu);
    if (q->heap_len)
        kcr__wq_notify(q, kcr__wq_promote(q, kcr__now_ns()), &w);
    size_t n = (size_t)q->queued;
    kcr__wq_unlock(q, &w);
    return n;
}

void kcr_workqueue_wake(kcr_workqueue *q)
{
    pthread_mutex_lock(&q->mu);
    q->wake_gen++;
    pthread_cond_broadcast(&q->cond);
    pthread_cond_broadcast(&q->tk_cond);
    pthread_mutex_unlock(&q->mu);
}

/* ---- shutdown ---------------------------------------------------------- */

static void begin_shutdown(kcr_workqueue *q)
{
    if (!q->shutting_down) {
        q->shutting_down = true;
        if (q->heap_len)
            kcr__log(KCR_LOG_DEBUG, "workqueue", "queue \"%s\": shutdown drops %u delayed keys",
                     q->name, (unsigned)q->heap_len);
        kcr__wq_heap_clear(q);
    }
    pthread_cond_broadcast(&q->cond);
    pthread_cond_broadcast(&q->tk_cond);
}

void kcr_workqueue_shutdown(kcr_workqueue *q)
{
    pthread_mutex_lock(&q->mu);
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
    pthread_mutex_lock(&q->mu);
    begin_shutdown(q);
    q->draining = true;
    q->drain_waiters++;
    while (q->processing && q->draining)
        pthread_cond_wait(&q->drain_cond, &q->mu);
    q->drain_waiters--;
    pthread_mutex_unlock(&q->mu);
}

bool kcr_workqueue_shutting_down(kcr_workqueue *q)
{
    pthread_mutex_lock(&q->mu);
    bool s = q->shutting_down;
    pthread_mutex_unlock(&q->mu);
    return s;
}
