/* The add ring: adders claim, fill and publish slots without the queue's
 * mutex and wake a getter only when one must look now; the mutex holder
 * drains the ring into the locked core in add order. Also the public add
 * entry points, whose fast path is the ring. */
#include "workqueue/ring.h"

#include <sched.h>
#include <string.h>

#include "core/abi.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "workqueue/duration.h"
#include "workqueue/queue.h"

/* Yields an adder makes while the add ring is full, waiting for a getter
 * to empty it, before it applies the ring itself under the lock: at most
 * FULL_WAIT in a row without a key handed out, FULL_WAIT_MAX in all. */
#ifndef KCR__WQ_FULL_WAIT
#define KCR__WQ_FULL_WAIT 200
#endif
#ifndef KCR__WQ_FULL_WAIT_MAX
#define KCR__WQ_FULL_WAIT_MAX 2000
#endif

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
            kcr__wq_raise_prio(q, it, prio);
        return 0;
    }
    *changed = true;
    return kcr__wq_make_ready(q, it, added_ns, prio);
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

/* The drain (ring.h says what it returns). */
int64_t kcr__wq_drain_ring(struct kcr_workqueue *q, struct kcr__wq_wake *w, bool hold_delayed)
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
                                                      memory_order_relaxed, memory_order_relaxed))
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
     * the getter's membarrier supplies the hardware fence, unless getters
     * asked the adders to fence (fence.c). */
    if (q->light_fences) {
        atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
        atomic_signal_fence(memory_order_seq_cst);
        if (atomic_load_explicit(&q->adders_fence, memory_order_acquire))
            atomic_fetch_add(&q->sleepers, 0); /* the fence (fence.c) */
    } else {
        atomic_exchange(&s->seq, pos + 1);
    }
    return true;
}

/* Applies every add claimed before the call (lock held). The drain
 * stops at a slot claimed but not yet published; here such a slot is waited
 * for (its adder is between claim and publish, without the lock), so a
 * thread's own earlier adds are applied even when another adder's slot sits
 * before them. Returns the number of items pushed to the FIFO. */
int64_t kcr__wq_drain_claimed(struct kcr_workqueue *q, struct kcr__wq_wake *w)
{
    size_t end = atomic_load_explicit(&q->ring_tail, memory_order_acquire);
    int64_t pushed = 0;
    for (;;) {
        pushed += kcr__wq_drain_ring(q, w, false);
        size_t head = atomic_load_explicit(&q->ring_head, memory_order_relaxed);
        if ((intptr_t)(end - head) <= 0)
            return pushed;
        sched_yield();
    }
}

void kcr__wq_lock(struct kcr_workqueue *q, struct kcr__wq_wake *w)
{
    kcr__wq_mutex_lock(q);
    kcr__wq_notify(q, kcr__wq_drain_claimed(q, w), w);
}

/* Wakes a sleeping getter for the adds in the ring without applying them:
 * the woken getter does, so the key table stays in the caches of the threads
 * that take keys instead of bouncing to the adder's core and back. A delayed
 * add wakes the timekeeper, which has to look at its deadline anyway. */
static void wake_sleeper(struct kcr_workqueue *q, bool delayed)
{
    struct kcr__wq_wake w = {0};
    kcr__wq_mutex_lock(q);
    if (kcr__wq_ring_ready(q)) {
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

kcr_err (kcr_workqueue_add)(size_t opts_size, kcr_workqueue *q, const char *key,
                            const kcr_workqueue_add_options *opts)
{
    static const char fn[] = "kcr_workqueue_add";
    kcr_workqueue_add_options o;
    kcr_err err = kcr__abi_in(&o, sizeof o, opts, opts_size, "kcr_workqueue_add_options");
    opts = &o;
    void *payload = o.payload;
    if (err != KCR_OK) {
        if (payload && q->has_payload) /* the queue owns it, also on failure */
            kcr__wq_drop_payload(q, payload);
        return err;
    }
    if (!key || (payload && !q->has_payload)) {
        if (payload && q->has_payload)
            kcr__wq_drop_payload(q, payload);
        return kcr__fail(KCR_ERR_INVALID, "%s: %s", fn,
                         key ? "a payload, but the queue has no payload ops" : "NULL key");
    }
    int prio = opts->priority;
    if (opts->delay_ms > 0)
        return kcr__wq_add_after(q, key, kcr__wq_ms_to_ns(opts->delay_ms), prio, payload, fn);
    if (atomic_load_explicit(&q->closed, memory_order_acquire)) {
        kcr__wq_drop_payload(q, payload);
        return kcr__wq_fail_shutdown(q, fn, key);
    }
    size_t len = strlen(key);
    uint64_t hash = kcr__keytab_hash_seeded(q->hash_seed, key, len);
    int64_t now = kcr__wq_add_stamp(q, prio);
    /* A payload is merged under the lock: no ring slot carries one. */
    if (!payload && kcr__wq_ring_add(q, key, len, hash, now, 0, prio))
        return KCR_OK;
    return kcr__wq_add_locked(q, key, len, hash, now, false, prio, payload, fn);
}
