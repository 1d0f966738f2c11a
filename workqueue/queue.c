/* The de-duplicating queue: add, get, done, remove, wake, shutdown. */
#define _GNU_SOURCE /* PTHREAD_MUTEX_ADAPTIVE_NP */
#include "workqueue/queue.h"

#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "workqueue/duration.h"

/* Rounds of a getter's wait for work before it sleeps (0: never wait
 * awake), each a sched_yield (about 0.5 us when the CPU has nothing else to
 * run), and how many getters may wait awake at once. A yield that comes
 * back late (another process holds the CPU) makes the thread's waits
 * shorter for a while (yield.c). */
#ifndef KCR__WQ_SPIN
#define KCR__WQ_SPIN 50
#endif
/* Yields an adder makes while the add ring is full, waiting for a getter
 * to empty it, before it applies the ring itself under the lock: at most
 * FULL_WAIT in a row without a key handed out, FULL_WAIT_MAX in all. */
#ifndef KCR__WQ_FULL_WAIT
#define KCR__WQ_FULL_WAIT 200
#endif
#ifndef KCR__WQ_FULL_WAIT_MAX
#define KCR__WQ_FULL_WAIT_MAX 2000
#endif
/* With this many keys in the FIFO, getters leave delayed adds in the ring
 * (see get). */
#ifndef KCR__WQ_BACKLOG
#define KCR__WQ_BACKLOG 256
#endif
/* How long a standby getter waits between looks at keys the busy workers
 * have not taken (see get). */
#ifndef KCR__WQ_STANDBY_NS
#define KCR__WQ_STANDBY_NS (100 * 1000)
#endif
/* Keys taken in one standby round from which the busy workers count as
 * turning keys over quickly (a few microseconds each): then an extra worker
 * would cost more in lock hand-overs than it adds. */
#ifndef KCR__WQ_QUICK_TAKES
#define KCR__WQ_QUICK_TAKES 32
#endif
/* Rounds a getter waits awake while its thread saw a yield come back late
 * recently (yield.c). Measured on the busy 2-core machine: sleeping at once
 * (0) cost priority_1p2w a third against 4. */
#ifndef KCR__WQ_SPIN_CONTENDED
#define KCR__WQ_SPIN_CONTENDED 4
#endif
#ifndef KCR__WQ_MAX_SPINNERS
#define KCR__WQ_MAX_SPINNERS 2
#endif

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
    if (it->flags == 0 && it->timers == 0) {
        kcr__keytab_remove(&q->tab, it->hash, it);
        item_free(q, it);
    }
}

/* ---- FIFO -------------------------------------------------------------- */

/* Takes `it` out of the FIFO, outside priority mode. */
static inline void fifo_unlink_plain(struct kcr_workqueue *q, struct kcr__wq_item *it)
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

/* Takes `it` out of the FIFO (and out of its line in priority mode). */
static void fifo_unlink(struct kcr_workqueue *q, struct kcr__wq_item *it)
{
    if (q->prio_on)
        kcr__wq_prio_unlink(q, it);
    fifo_unlink_plain(q, it);
}

/* ---- shared helpers ---------------------------------------------------- */

void kcr__wq_notify(struct kcr_workqueue *q, int64_t n, struct kcr__wq_wake *w)
{
    if (n <= 0)
        return;
    /* A spinning getter will see one item without being woken. Getters that
     * leave with an item wake a sleeper for any remaining one (see get), so
     * nothing waits for long on this shortcut. */
    while (n > 0 && q->spin_claims < atomic_load_explicit(&q->spinning, memory_order_relaxed)) {
        q->spin_claims++;
        n--;
    }
    if (n == 0)
        return;
    /* One getter at a time: it takes a key and passes the baton (see get).
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

void kcr__wq_unlock(struct kcr_workqueue *q, const struct kcr__wq_wake *w)
{
    pthread_mutex_unlock(&q->mu);
    for (int i = 0; i < w->cond; i++)
        pthread_cond_signal(&q->cond);
    if (w->tk)
        pthread_cond_signal(&q->tk_cond);
}

/* Links `it` at the FIFO's tail, as fifo_push outside priority mode. */
static inline void fifo_push_tail(struct kcr_workqueue *q, struct kcr__wq_item *it)
{
    it->next = NULL;
    it->prev = q->tail;
    if (q->tail)
        q->tail->next = it;
    else
        q->head = it;
    q->tail = it;
    it->ready_epoch = q->epoch;
    it->flags |= KCR__WQ_QUEUED;
    q->queued++;
    atomic_store_explicit(&q->avail, q->queued, memory_order_relaxed);
}

/* Queues `it` (ready since `now`, 0: unknown, for aging in priority mode). */
static void fifo_push(struct kcr_workqueue *q, struct kcr__wq_item *it, int64_t now)
{
    if (!q->prio_on) {
        fifo_push_tail(q, it);
        return;
    }
    kcr__wq_prio_push(q, it, now); /* at the end of its priority's line */
    it->ready_epoch = q->epoch;
    it->flags |= KCR__WQ_QUEUED;
    q->queued++;
    atomic_store_explicit(&q->avail, q->queued, memory_order_relaxed);
}

/* A dirty item added again with a higher priority takes it: a queued one
 * moves to the end of the higher line. Out of line: NORMAL-only queues
 * never get here. */
static __attribute__((noinline, cold)) void raise_prio(struct kcr_workqueue *q,
                                                       struct kcr__wq_item *it, int prio)
{
    if (!q->prio_on && !kcr__wq_prio_enable(q))
        return;
    bool queued = it->flags & KCR__WQ_QUEUED;
    if (queued)
        fifo_unlink(q, it);
    kcr__wq_prio_clean(q, it);
    it->prio = prio;
    kcr__wq_prio_dirty(q, it);
    if (queued)
        fifo_push(q, it, 0);
}

/* make_ready of a clean item in priority mode, or with a priority other
 * than NORMAL (which switches the queue to priority mode). Out of line, so
 * the NORMAL path below stays as short as it was before priorities. */
static __attribute__((noinline)) int make_ready_prio(struct kcr_workqueue *q,
                                                     struct kcr__wq_item *it, int64_t now,
                                                     int prio)
{
    if (!q->prio_on && !kcr__wq_prio_enable(q))
        prio = KCR_WQ_PRIORITY_NORMAL; /* out of memory: the queue stays FIFO */
    if (!now) /* an add made before the first add with a priority: not stamped */
        now = atomic_load_explicit(&q->prio_since, memory_order_relaxed) - 1;
    it->prio = prio;
    it->flags |= KCR__WQ_DIRTY;
    q->depth++;
    if (q->prio_on)
        kcr__wq_prio_dirty(q, it);
    q->adds_total++;
    if (q->timing)
        kcr__wq_m_added(q, it, now);
    if (it->flags & KCR__WQ_PROCESSING)
        return 0;
    fifo_push(q, it, now);
    return 1;
}

int kcr__wq_make_ready(struct kcr_workqueue *q, struct kcr__wq_item *it, int64_t now, int prio)
{
    if (it->flags & KCR__WQ_DIRTY) {
        if (prio > it->prio)
            raise_prio(q, it, prio);
        return 0;
    }
    if (prio != KCR_WQ_PRIORITY_NORMAL || q->prio_on)
        return make_ready_prio(q, it, now, prio);
    /* it->prio is NORMAL already: outside priority mode no item has another. */
    it->flags |= KCR__WQ_DIRTY;
    q->depth++;
    q->adds_total++;
    if (q->timing)
        kcr__wq_m_added(q, it, now);
    if (it->flags & KCR__WQ_PROCESSING)
        return 0;
    fifo_push_tail(q, it);
    return 1;
}

/* Applies one add of `key` (lock held). Returns 1 if an item was pushed to
 * the FIFO; sets *changed if the key became dirty. */
static int apply_add(struct kcr_workqueue *q, const char *key, size_t len, uint64_t hash,
                     int64_t added_ns, int prio, bool *changed)
{
    if (q->shutting_down) /* raced with shutdown: dropped */
        return 0;
    struct kcr__wq_item *it = kcr__wq_lookup_or_create(q, key, len, hash);
    if (!it) {
        kcr__log(KCR_LOG_ERROR, "workqueue", "queue \"%s\": out of memory, add of \"%s\" lost",
                 q->name, key);
        return 0;
    }
    if (it->flags & KCR__WQ_DIRTY) {
        if (prio > it->prio)
            raise_prio(q, it, prio);
        return 0;
    }
    *changed = true;
    return kcr__wq_make_ready(q, it, added_ns, prio);
}

/* The getter's half of the Dekker handshake: a seq_cst read of the slot. */
/* True if the add `ahead` slots past the ring's head is published (any
 * thread; only the lock holder moves the head). */
static bool slot_published(struct kcr_workqueue *q, size_t ahead, memory_order order)
{
    size_t pos = atomic_load_explicit(&q->ring_head, memory_order_relaxed) + ahead;
    return atomic_load_explicit(&q->ring[pos & q->ring_mask].seq, order) == pos + 1;
}

static bool ring_ready_sc(struct kcr_workqueue *q)
{
    return slot_published(q, 0, memory_order_seq_cst);
}

/* True if the ring has a published add at its head (a hint, any thread). */
static bool ring_ready(struct kcr_workqueue *q)
{
    return slot_published(q, 0, memory_order_relaxed);
}

/* Applies one add_after from the ring (lock held); plans a timekeeper wake-up
 * when its deadline comes before the one the timekeeper sleeps until. */
static void apply_add_after(struct kcr_workqueue *q, const struct kcr__wq_slot *s,
                            struct kcr__wq_wake *w)
{
    if (q->shutting_down) /* raced with shutdown: dropped */
        return;
    bool earliest = false;
    if (kcr__wq_apply_add_after(q, s->key, s->len, s->hash, s->ready_at, s->prio, &earliest) !=
        KCR_OK)
        kcr__log(KCR_LOG_ERROR, "workqueue",
                 "queue \"%s\": out of memory, add_after of \"%s\" lost", q->name, s->key);
    else if (earliest && q->tk_active)
        w->tk = true;
}

/* Lookahead of the drain's prefetches: table slots this many adds ahead,
 * nodes half as far (by then their table slot is in the cache). */
#define PREFETCH_AHEAD 8u

/* The hash of the add published at `pos`, if it is published. */
static bool published_hash(struct kcr_workqueue *q, size_t pos, uint64_t *hash)
{
    struct kcr__wq_slot *s = &q->ring[pos & q->ring_mask];
    if (atomic_load_explicit(&s->seq, memory_order_acquire) != pos + 1)
        return false;
    *hash = s->hash;
    return true;
}

/* Applies the adds waiting in the ring (lock held), up to the first slot
 * not yet published. Returns the number of items pushed to the FIFO (the
 * caller notifies); plans a wake-up of the timekeeper in `w` when a deadline
 * earlier than its own arrived. */
static int64_t drain_ring(struct kcr_workqueue *q, struct kcr__wq_wake *w, bool hold_delayed)
{
    size_t pos = atomic_load_explicit(&q->ring_head, memory_order_relaxed);
    int64_t pushed = 0;
    bool changed = false;
    /* A large key table does not fit the cache: each lookup would wait for
     * memory twice (table slot, then node). The ring tells which keys come
     * next, so their lookups are prefetched while this one is applied. */
    uint64_t hash;
    for (size_t i = 0; i < PREFETCH_AHEAD && published_hash(q, pos + i, &hash); i++)
        kcr__keytab_prefetch_slot(&q->tab, hash);
    /* Stop at the adds claimed when the drain began: chasing an adder that
     * keeps publishing would hold the lock for as long as it adds and pull
     * every slot over while it is being written. */
    size_t end = atomic_load_explicit(&q->ring_tail, memory_order_relaxed);
    while (pos != end) {
        struct kcr__wq_slot *s = &q->ring[pos & q->ring_mask];
        /* A slot claimed but not yet published stops the drain; its adder
         * publishes it soon and wakes a sleeper if needed. */
        if (atomic_load(&s->seq) != pos + 1) /* seq_cst: see spin_for_work */
            break;
        if (hold_delayed && s->ready_at)
            break;
        if (published_hash(q, pos + PREFETCH_AHEAD, &hash))
            kcr__keytab_prefetch_slot(&q->tab, hash);
        if (published_hash(q, pos + PREFETCH_AHEAD / 2, &hash))
            kcr__keytab_prefetch_node(&q->tab, hash);
        if (s->ready_at)
            apply_add_after(q, s, w);
        else
            pushed += apply_add(q, s->key, s->len, s->hash, s->added_ns, s->prio, &changed);
        atomic_store_explicit(&s->seq, pos + q->ring_mask + 1, memory_order_release);
        pos++;
    }
    atomic_store_explicit(&q->ring_head, pos, memory_order_relaxed);
    if (changed && q->has_cb)
        kcr__wq_m_depth(q);
    return pushed;
}

/* Claims, fills and publishes a ring slot. False if the ring is full. */
static bool ring_push(struct kcr_workqueue *q, const char *key, size_t len, uint64_t hash,
                      int64_t added_ns, int64_t ready_at, int prio)
{
    size_t pos = atomic_load_explicit(&q->ring_tail, memory_order_relaxed);
    struct kcr__wq_slot *s;
    for (;;) {
        s = &q->ring[pos & q->ring_mask];
        size_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
        intptr_t diff = (intptr_t)seq - (intptr_t)pos;
        if (diff == 0) {
            if (atomic_compare_exchange_weak_explicit(&q->ring_tail, &pos, pos + 1,
                                                      memory_order_relaxed,
                                                      memory_order_relaxed))
                break;
        } else if (diff < 0) {
            return false; /* full: the drain has not caught up */
        } else {
            pos = atomic_load_explicit(&q->ring_tail, memory_order_relaxed);
        }
    }
    s->hash = hash;
    s->added_ns = added_ns;
    s->ready_at = ready_at;
    s->len = (uint32_t)len;
    s->prio = prio;
    memcpy(s->key, key, len + 1);
    /* The adder's half of the Dekker handshake (see queue.h): publish, a
     * store-load fence, then the caller reads `sleepers`. With light fences
     * the getter's membarrier supplies the hardware fence. */
    if (q->light_fences) {
        atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
        atomic_signal_fence(memory_order_seq_cst);
    } else {
        atomic_exchange(&s->seq, pos + 1);
    }
    return true;
}

void kcr__wq_mutex_lock(struct kcr_workqueue *q)
{
    pthread_mutex_lock(&q->mu);
}

/* Applies every add claimed before the call (lock held). drain_ring
 * stops at a slot claimed but not yet published; here such a slot is waited
 * for (its adder is between claim and publish, without the lock), so a
 * thread's own earlier adds are applied even when another adder's slot sits
 * before them. Returns the number of items pushed to the FIFO. */
static int64_t drain_claimed(struct kcr_workqueue *q, struct kcr__wq_wake *w)
{
    size_t end = atomic_load_explicit(&q->ring_tail, memory_order_acquire);
    int64_t pushed = 0;
    for (;;) {
        pushed += drain_ring(q, w, false);
        size_t head = atomic_load_explicit(&q->ring_head, memory_order_relaxed);
        if ((intptr_t)(end - head) <= 0)
            return pushed;
        sched_yield();
    }
}

void kcr__wq_lock(struct kcr_workqueue *q, struct kcr__wq_wake *w)
{
    kcr__wq_mutex_lock(q);
    kcr__wq_notify(q, drain_claimed(q, w), w);
}

static inline size_t key_len(const char *key)
{
    return strlen(key);
}

/* ---- lifecycle --------------------------------------------------------- */

kcr_err kcr_workqueue_new(const kcr_workqueue_options *opts, kcr_workqueue **out)
{
    static const kcr_workqueue_options defaults;
    if (!opts)
        opts = &defaults;
    kcr_rate_limiter *limiter = opts->limiter;
    if (!out) {
        kcr_rate_limiter_free(limiter);
        return kcr__fail(KCR_ERR_INVALID, "kcr_workqueue_new: out is NULL");
    }
    /* Aligned for the adders' cache line (ring_tail). */
    size_t size = (sizeof(kcr_workqueue) + 63) / 64 * 64;
    kcr_workqueue *q = aligned_alloc(64, size);
    if (q)
        memset(q, 0, size);
    if (!q) {
        kcr_rate_limiter_free(limiter);
        return kcr__fail(KCR_ERR_NOMEM, "kcr_workqueue_new: out of memory");
    }
    q->name = strdup(opts->name ? opts->name : "");
    q->limiter = limiter;
    if (!limiter) /* q->limiter stays NULL on failure: reported below */
        (void)kcr_rate_limiter_default_new(&q->limiter);
    q->heap_cap = 16;
    q->heap = malloc(q->heap_cap * sizeof *q->heap);
    /* Slots are two cache lines each: keep them on line boundaries. */
    q->ring = aligned_alloc(64, KCR__WQ_RING_SLOTS * sizeof *q->ring);
    q->ring_mask = KCR__WQ_RING_SLOTS - 1;
    for (size_t i = 0; q->ring && i < KCR__WQ_RING_SLOTS; i++)
        atomic_init(&q->ring[i].seq, i);
    bool table = q->name && q->limiter && q->heap && q->ring &&
                 kcr__keytab_init(&q->tab, opts->capacity_hint ? opts->capacity_hint : 64,
                                  offsetof(struct kcr__wq_item, key),
                                  offsetof(struct kcr__wq_item, len)) == 0;
    if (!table) {
        if (q->tab.slots)
            kcr__keytab_destroy(&q->tab);
        kcr_rate_limiter_free(q->limiter);
        free(q->ring);
        free(q->heap);
        free(q->name);
        free(q);
        return kcr__fail(KCR_ERR_NOMEM, "kcr_workqueue_new: out of memory");
    }
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&q->mu, &ma);
    q->hash_seed = q->tab.seed;
    atomic_init(&q->tk_until, INT64_MAX);
    atomic_init(&q->next_due, INT64_MAX);
    pthread_mutexattr_destroy(&ma);
    kcr__cond_init_monotonic(&q->cond);
    kcr__cond_init_monotonic(&q->tk_cond);
    kcr__cond_init_monotonic(&q->standby_cond);
    pthread_cond_init(&q->drain_cond, NULL);
    if (opts->metrics) {
        q->m = *opts->metrics;
        q->has_cb = true;
        q->gauges = q->m.unfinished_work || q->m.longest_running;
        q->update_period_ns = q->m.update_period_ms > 0 ? kcr__wq_ms_to_ns(q->m.update_period_ms)
                                                        : 500 * KCR_NS_PER_MS;
    }
    q->timing = q->has_cb || opts->track_time;
    q->max_wait_ns = opts->priority_max_wait_ms ? kcr__wq_ms_to_ns(opts->priority_max_wait_ms)
                                                : 10 * KCR_NS_PER_S;
    q->light_fences = kcr__wq_light_fences();
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
    free(q->ring);
    kcr__ptrset_destroy(&q->handed_out);
    kcr__keytab_destroy(&q->tab);
    free(q->heap);
    free(q->levels);
    kcr_rate_limiter_free(q->limiter);
    pthread_cond_destroy(&q->drain_cond);
    pthread_cond_destroy(&q->tk_cond);
    pthread_cond_destroy(&q->standby_cond);
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

/* Wakes a sleeping getter for the adds in the ring without applying them:
 * the woken getter does, so the key table stays in the caches of the threads
 * that take keys instead of bouncing to the adder's core and back. A delayed
 * add wakes the timekeeper, which has to look at its deadline anyway. */
static void wake_sleeper(struct kcr_workqueue *q, bool delayed)
{
    struct kcr__wq_wake w = {0};
    kcr__wq_mutex_lock(q);
    if (ring_ready(q)) {
        if (delayed && q->tk_active)
            w.tk = true;
        else if (kcr__wq_signal(q, &w, 1) == 0 && q->tk_active)
            w.tk = true;
    }
    kcr__wq_unlock(q, &w);
}

/* True if an add due at `ready_at` needs a getter woken: one sleeps, none
 * spins, and no timekeeper wakes up by itself before then (seq_cst loads:
 * the adder's half of the handshake in queue.h). */
static bool sleeper_needs_wake(struct kcr_workqueue *q, int64_t ready_at)
{
    return atomic_load(&q->sleepers) > 0 && atomic_load(&q->spinning) == 0 &&
           !atomic_load(&q->standby_on) &&
           ready_at < atomic_load_explicit(&q->tk_until, memory_order_relaxed);
}

bool kcr__wq_ring_add(struct kcr_workqueue *q, const char *key, size_t len, uint64_t hash,
                      int64_t added_ns, int64_t ready_at, int prio)
{
    /* Metrics callbacks see every add at once (depth must not lag while all
     * workers are busy), so with callbacks adds take the locked path. */
    if (q->has_cb || len >= KCR__WQ_SLOT_KEY)
        return false;
    unsigned long takes = 0;
    int64_t t = 0; /* the clock after the last yield (0: none yet) */
    for (int round = 0, idle = 0;; round++, idle++) {
        if (ring_push(q, key, len, hash, added_ns, ready_at, prio)) {
            if (sleeper_needs_wake(q, ready_at))
                wake_sleeper(q, ready_at != 0);
            if (t)
                kcr__wq_yields_on_time();
            return true;
        }
        /* Full: getters are behind. Give them the CPU (and wake one if all
         * sleep) rather than apply 512 adds on this core: the adder slows
         * down to the pace of the workers, so the keys waiting stay few
         * enough for the caches. Once workers stop taking keys for a
         * while (long reconciles), or after a bounded wait, the caller
         * applies the ring itself. */
        unsigned long now_takes = atomic_load_explicit(&q->takes, memory_order_relaxed);
        if (now_takes != takes) {
            takes = now_takes;
            idle = 0;
        }
        if (idle >= KCR__WQ_FULL_WAIT || round >= KCR__WQ_FULL_WAIT_MAX)
            return false;
        bool woke = sleeper_needs_wake(q, 0);
        if (woke)
            wake_sleeper(q, false);
        /* On a contended CPU a yield gives away a whole time slice: apply
         * the ring under the lock instead (yield.c). */
        if (!t || woke)
            t = kcr__now_ns();
        if (!kcr__wq_may_yield(t))
            return false;
        t = kcr__wq_yield(t);
        if (!t)
            return false;
    }
}

kcr_err kcr__wq_fail_shutdown(const struct kcr_workqueue *q, const char *fn, const char *key)
{
    return kcr__fail(KCR_ERR_SHUTDOWN, "%s: workqueue \"%s\" is shutting down, \"%s\" dropped",
                     fn, q->name, key);
}

kcr_err kcr__wq_add_locked(struct kcr_workqueue *q, const char *key, size_t len, uint64_t hash,
                           int64_t now, bool retry, int prio, const char *fn)
{
    struct kcr__wq_wake w = {0};
    kcr__wq_lock(q, &w); /* applies earlier adds first, so order is kept */
    if (q->shutting_down) {
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
        err = kcr__fail(KCR_ERR_NOMEM, "workqueue \"%s\": out of memory adding \"%s\"", q->name,
                        key);
    } else if (!(it->flags & KCR__WQ_DIRTY)) {
        kcr__wq_notify(q, kcr__wq_make_ready(q, it, now, prio), &w);
        if (q->has_cb)
            kcr__wq_m_depth(q);
    } else if (prio > it->prio) {
        kcr__wq_make_ready(q, it, now, prio); /* only raises its priority */
    }
    if (q->has_cb)
        kcr__wq_m_tick(q, now, false);
    kcr__wq_unlock(q, &w);
    return err;
}

/* add and add_with_priority; `fn` names the caller in errors. */
static inline kcr_err add(kcr_workqueue *q, const char *key, int prio, const char *fn)
{
    if (!key)
        return kcr__fail(KCR_ERR_INVALID, "%s: NULL key", fn);
    if (atomic_load_explicit(&q->closed, memory_order_acquire))
        return kcr__wq_fail_shutdown(q, fn, key);
    size_t len = key_len(key);
    uint64_t hash = kcr__keytab_hash_seeded(q->hash_seed, key, len);
    int64_t now = kcr__wq_add_stamp(q, prio);
    if (kcr__wq_ring_add(q, key, len, hash, now, 0, prio))
        return KCR_OK;
    return kcr__wq_add_locked(q, key, len, hash, now, false, prio, fn);
}

kcr_err kcr_workqueue_add(kcr_workqueue *q, const char *key)
{
    return add(q, key, KCR_WQ_PRIORITY_NORMAL, "kcr_workqueue_add");
}

kcr_err kcr_workqueue_add_with_priority(kcr_workqueue *q, const char *key, int priority)
{
    return add(q, key, priority, "kcr_workqueue_add_with_priority");
}

/* ---- get --------------------------------------------------------------- */

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* Called with the lock held and nothing ready: lets one getter at a time
 * wait briefly for a key without sleeping (and without the lock, so adders
 * are not slowed down). Returns true if it spun (the lock is held again). */
static bool spin_for_work(struct kcr_workqueue *q, int *budget)
{
    if (*budget <= 0 || atomic_load_explicit(&q->spinning, memory_order_relaxed) >=
                            KCR__WQ_MAX_SPINNERS)
        return false;
    /* On a contended CPU each yield may hand another process a time slice:
     * wait awake for a few rounds only (yield.c). */
    int64_t t = kcr__now_ns();
    if (!kcr__wq_may_yield(t) && *budget > KCR__WQ_SPIN_CONTENDED)
        *budget = KCR__WQ_SPIN_CONTENDED;
    atomic_fetch_add(&q->spinning, 1); /* under the lock: the count stays bounded */
    pthread_mutex_unlock(&q->mu);
    /* Yield rather than pause: with more runnable threads than cores (four
     * workers and a producer on two, or a busy machine) a pause loop burns
     * the time slice the adder needs to make the key we wait for; a yield
     * hands it over and returns at once when nothing else wants the CPU.
     * Measured on 2 cores: pause x1000 (the same ~28 us budget) gave half
     * the throughput with 1 producer and 4 workers. A deadline falling due
     * ends the wait too, so near deadlines cost no timed sleep. A yield
     * that comes back late gave a time slice to another process: this get
     * then sleeps, and the thread's next waits are short for a while
     * (yield.c). */
    bool yielded = false;
    while (*budget > 0) {
        if (atomic_load_explicit(&q->avail, memory_order_relaxed) || ring_ready(q))
            break;
        if (t >= atomic_load_explicit(&q->next_due, memory_order_relaxed))
            break;
        t = kcr__wq_yield(t);
        if (!t) { /* late: this get sleeps from now on */
            *budget = 0;
            yielded = false;
            break;
        }
        yielded = true;
        --*budget;
    }
    if (yielded)
        kcr__wq_yields_on_time();
    kcr__wq_mutex_lock(q);
    /* seq_cst: an adder that saw us spinning did not wake anybody; the
     * caller drains the ring after this, so its add is not missed. */
    int left = atomic_fetch_sub(&q->spinning, 1) - 1;
    if (q->spin_claims > left)
        q->spin_claims = left;
    return true;
}

/* True if the ring holds at least half its capacity of published adds. */
static bool ring_half_full(struct kcr_workqueue *q)
{
    return slot_published(q, (q->ring_mask + 1) / 2, memory_order_relaxed);
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

/* True if this getter may take the FIFO's head (lock held, head set).
 * While other workers hold keys, a key goes to an extra worker only once
 * it has waited a standby round: two workers taking turns at one lock move
 * every node, table slot and heap entry between their cores, which costs
 * more than it saves when the workers keep up (a measured 2x on 2 cores).
 * Shutdown, and a getter whose own deadline has passed, take it at once. */
static bool may_take(const struct kcr_workqueue *q, const struct kcr__wq_item *next, int64_t now,
                     int64_t deadline)
{
    bool waited = q->epoch - next->ready_epoch >= 2 && !q->quick_turns;
    return q->processing == 0 || q->shutting_down || waited ||
           (deadline != INT64_MAX && now >= deadline);
}

/* Ends this getter's standby duty (lock held). Adders skipped waking
 * anybody while it was on duty, so it looks at the ring once more
 * (Dekker-style, like a getter going to sleep) and passes on what it finds. */
static void leave_standby(struct kcr_workqueue *q, bool *on_duty, struct kcr__wq_wake *w)
{
    if (!*on_duty)
        return;
    *on_duty = false;
    q->standby = false;
    atomic_store(&q->standby_on, false);
    if (q->light_fences)
        kcr__wq_heavy_fence();
    if (ring_ready_sc(q))
        kcr__wq_signal(q, w, 1);
}

kcr_err kcr_workqueue_get_timeout(kcr_workqueue *q, int64_t timeout_ms, const char **key)
{
    int64_t timeout_ns = kcr__wq_ms_to_ns(timeout_ms);
    if (!key)
        return kcr__fail(KCR_ERR_INVALID, "kcr_workqueue_get: NULL key pointer");
    *key = NULL;
    int64_t deadline = INT64_MAX;
    if (timeout_ns == 0)
        deadline = 0;
    else if (timeout_ns > 0) {
        int64_t now = kcr__now_ns();
        deadline = timeout_ns < INT64_MAX - now ? now + timeout_ns : INT64_MAX;
    }

    struct kcr__wq_wake w = {0};
    kcr__wq_mutex_lock(q);
    uint64_t gen = q->wake_gen;
    int64_t extra = 0; /* items made ready here beyond the one taken */
    kcr_err err = KCR_OK;
    struct kcr__wq_item *it = NULL;
    int64_t now = 0;
    int spin_budget = KCR__WQ_SPIN; /* yields left before this getter sleeps */
    bool on_duty = false;           /* this getter is the standby */
    for (;;) {
        /* With keys in the FIFO, leave the ring alone until it is half full:
         * every key in it was added after every key in the FIFO, so order is
         * the same, and the drain then reads slots adders finished with long
         * ago instead of chasing the one an adder is writing now (that cache
         * line ping-pong cost more than the rest of the add and get). */
        if (!q->head || q->prio_on || ring_half_full(q))
            extra += drain_ring(q, &w, q->queued >= KCR__WQ_BACKLOG && !q->prio_on);
        now = 0;
        if (q->heap_len || q->timing || deadline != INT64_MAX) {
            now = kcr__now_ns();
            if (q->heap_len)
                extra += kcr__wq_promote(q, now);
        }
        struct kcr__wq_item *next = q->head;
        if (next && q->prio_on) {
            /* `now` by value: passing &now kept it in memory for the whole
             * loop, +2 ns per add on the NORMAL path. */
            if (!now)
                now = kcr__now_ns();
            next = kcr__wq_prio_next(q, now);
        }
        if (next && may_take(q, next, now, deadline)) {
            it = next;
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
        if (q->head) {
            /* Keys the busy workers will get to. One getter stands by and
             * looks again each round (advancing the epoch that ages keys);
             * any others sleep until it takes a key and passes the baton. */
            if (on_duty || !q->standby) {
                if (!on_duty) {
                    on_duty = q->standby = true;
                    atomic_store(&q->standby_on, true);
                    q->takes_at_round = atomic_load_explicit(&q->takes, memory_order_relaxed);
                }
                if (!now)
                    now = kcr__now_ns();
                wait_until(q, &q->standby_cond, min64(now + KCR__WQ_STANDBY_NS, deadline));
                q->epoch++;
                unsigned long takes = atomic_load_explicit(&q->takes, memory_order_relaxed);
                q->quick_turns = takes - q->takes_at_round >= KCR__WQ_QUICK_TAKES;
                q->takes_at_round = takes;
            } else {
                q->nwaiters++;
                atomic_fetch_add(&q->sleepers, 1); /* the standby covers adds meanwhile */
                wait_until(q, &q->cond, deadline);
                atomic_fetch_sub(&q->sleepers, 1);
                q->nwaiters--;
                if (q->signaled > 0)
                    q->signaled--;
            }
            continue;
        }
        leave_standby(q, &on_duty, &w);
        /* Sleeping and being woken costs two context switches; a key or
         * a deadline often comes within microseconds. */
        if (spin_for_work(q, &spin_budget))
            continue;
        if (q->gauges)
            kcr__wq_m_tick(q, now, false);
        if (w.tk) { /* the drain brought a deadline the timekeeper must see */
            pthread_cond_signal(&q->tk_cond);
            w.tk = false;
        }
        /* Keep time for everyone if nobody does: sleep until the nearest
         * deadline, and tell adders when that is (tk_until). */
        bool keeps_time = !q->tk_active && (q->heap_len || (q->gauges && q->processing));
        int64_t until = deadline;
        if (keeps_time) {
            if (q->heap_len)
                until = min64(until, q->heap[0].ready_at);
            if (q->gauges && q->processing)
                until = min64(until, q->next_update_ns);
            atomic_store_explicit(&q->tk_until, until, memory_order_relaxed);
        }
        /* About to sleep: announce it, then look at the ring once more. */
        atomic_fetch_add(&q->sleepers, 1);
        if (q->light_fences)
            kcr__wq_heavy_fence();
        if (ring_ready_sc(q)) {
            atomic_fetch_sub(&q->sleepers, 1);
            if (keeps_time)
                atomic_store_explicit(&q->tk_until, INT64_MAX, memory_order_relaxed);
            continue;
        }
        if (keeps_time) {
            q->tk_active = true;
            wait_until(q, &q->tk_cond, until);
            q->tk_active = false;
            atomic_store_explicit(&q->tk_until, INT64_MAX, memory_order_relaxed);
        } else {
            q->nwaiters++;
            wait_until(q, &q->cond, deadline);
            q->nwaiters--;
            /* Woken (or timed out, or spurious): either way one planned
             * signal fewer is outstanding, and this getter looks again. */
            if (q->signaled > 0)
                q->signaled--;
        }
        atomic_fetch_sub(&q->sleepers, 1);
    }
    leave_standby(q, &on_duty, &w);
    if (it) {
        /* Pop it: dirty -> processing. */
        bool prio = q->prio_on;
        if (prio)
            kcr__wq_prio_unlink(q, it);
        fifo_unlink_plain(q, it);
        it->flags = (it->flags & ~KCR__WQ_DIRTY) | KCR__WQ_PROCESSING;
        q->depth--;
        if (prio)
            kcr__wq_prio_clean(q, it);
        q->processing++;
        if (q->timing) {
            kcr__wq_m_got(q, it, now);
            if (q->has_cb) {
                kcr__wq_m_depth(q);
                kcr__wq_m_tick(q, now, false);
            }
        }
        *key = it->key;
        atomic_store_explicit(&q->takes, atomic_load_explicit(&q->takes, memory_order_relaxed) + 1,
                              memory_order_relaxed);
        (void)kcr__ptrset_add(&q->handed_out, it); /* on failure done() hashes */
        extra--;
        /* done() usually releases the node from the table: start loading
         * its table slot. */
        kcr__keytab_prefetch_slot(&q->tab, it->hash);
    }
    /* This getter took one of the items it made ready; others need getters. */
    kcr__wq_notify(q, extra, &w);
    /* Keys left, no spinning getter to take them, and sleepers nobody
     * wakes: wake one (it passes the baton on the same way; a spinner does
     * too once it takes a key). Same if timekeeping is needed and nobody
     * keeps time. */
    bool spinner = atomic_load_explicit(&q->spinning, memory_order_relaxed) > 0;
    if ((q->head && !spinner && !q->standby) ||
        (!q->tk_active && (q->heap_len || (q->gauges && q->processing))))
        kcr__wq_signal(q, &w, 1);
    kcr__wq_unlock(q, &w);
    if (err != KCR_OK)
        return kcr__fail(err, "workqueue \"%s\": %s", q->name,
                         err == KCR_ERR_SHUTDOWN  ? "shut down and drained"
                         : err == KCR_ERR_TIMEOUT ? "no key ready before the timeout"
                                                  : "get woken by kcr_workqueue_wake");
    return err;
}

kcr_err kcr_workqueue_get(kcr_workqueue *q, const char **key)
{
    return kcr_workqueue_get_timeout(q, -1, key);
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
    size_t len = key_len(key);
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
        fifo_push(q, it, now);
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
                fifo_unlink(q, it);
            it->flags &= ~KCR__WQ_DIRTY;
            q->depth--;
            if (q->prio_on)
                kcr__wq_prio_clean(q, it);
            if (q->has_cb)
                kcr__wq_m_depth(q);
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
        drain_claimed(q, &ignored);
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
