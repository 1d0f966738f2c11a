/* The delaying part: a min-heap of (deadline, call order) entries for the
 * nodes that wait for an add_after deadline. Entries carry the deadline, so
 * sifting reads one array and never the scattered nodes; a key re-scheduled
 * earlier or removed leaves its old entry behind as stale (lazy deletion)
 * instead of keeping a heap index in every node up to date, which cost a
 * cache miss per level. No thread of its own: due items are moved to the
 * FIFO by whoever holds the lock next (get, add, len), and a blocked getter
 * sleeps until the nearest deadline (see getter.c). */
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "workqueue/duration.h"
#include "workqueue/queue.h"
#include "workqueue/ring.h"

/* Stale entries are swept once they outnumber valid ones by this many. */
#define STALE_SLACK 64u

static inline bool before(const struct kcr__wq_timer *a, const struct kcr__wq_timer *b)
{
    return a->ready_at < b->ready_at || (a->ready_at == b->ready_at && a->seq < b->seq);
}

static inline bool valid(const struct kcr__wq_timer *e)
{
    return (e->it->flags & KCR__WQ_WAITING) && e->it->seq == e->seq;
}

static void sift_up(struct kcr__wq_timer *h, uint32_t i)
{
    struct kcr__wq_timer e = h[i];
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (!before(&e, &h[parent]))
            break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = e;
}

static void sift_down(struct kcr__wq_timer *h, uint32_t n, uint32_t i)
{
    struct kcr__wq_timer e = h[i];
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && before(&h[c + 1], &h[c]))
            c++;
        if (!before(&h[c], &e))
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = e;
}

/* Tells spinning getters when the first deadline is (it may be stale: a
 * getter then wakes early and finds nothing, which is harmless). */
static void publish_next_due(struct kcr_workqueue *q)
{
    atomic_store_explicit(&q->next_due, q->heap_len ? q->heap[0].ready_at : INT64_MAX,
                          memory_order_relaxed);
}

/* Drops one entry's hold on its node, freeing the node if nothing else
 * holds it. */
static void drop_entry(struct kcr_workqueue *q, const struct kcr__wq_timer *e)
{
    e->it->timers--;
    kcr__wq_release_if_idle(q, e->it);
}

/* Removes the stale entries and rebuilds the heap (O(n)). */
static void sweep(struct kcr_workqueue *q)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < q->heap_len; i++) {
        if (valid(&q->heap[i]))
            q->heap[n++] = q->heap[i];
        else
            drop_entry(q, &q->heap[i]);
    }
    q->heap_len = n;
    for (uint32_t i = n / 2; i-- > 0;)
        sift_down(q->heap, n, i);
}

static void pop_top(struct kcr_workqueue *q)
{
    q->heap[0] = q->heap[--q->heap_len];
    if (q->heap_len)
        sift_down(q->heap, q->heap_len, 0);
}

/* Makes `it` wait for `ready_at`, or for an earlier deadline only if it
 * waits already (keeping the higher priority). Returns 0 or -1 (no memory). */
static int heap_schedule(struct kcr_workqueue *q, struct kcr__wq_item *it, int64_t ready_at,
                         int prio)
{
    bool waiting = it->flags & KCR__WQ_WAITING;
    if (waiting && prio < it->wait_prio)
        prio = it->wait_prio;
    if (waiting && ready_at >= it->ready_at) {
        it->wait_prio = prio; /* already waiting: the earlier deadline wins */
        return 0;
    }
    if (q->heap_len == q->heap_cap) {
        uint32_t cap = q->heap_cap * 2;
        struct kcr__wq_timer *h = realloc(q->heap, (size_t)cap * sizeof *h);
        if (!h)
            return -1;
        q->heap = h;
        q->heap_cap = cap;
    }
    it->ready_at = ready_at;
    it->wait_prio = prio;
    it->seq = q->seq++;
    it->timers++;
    if (!waiting) {
        it->flags |= KCR__WQ_WAITING;
        q->waiting++;
    }
    q->heap[q->heap_len] = (struct kcr__wq_timer){.ready_at = ready_at, .seq = it->seq, .it = it};
    sift_up(q->heap, q->heap_len++);
    publish_next_due(q);
    return 0;
}

void kcr__wq_heap_remove(struct kcr_workqueue *q, struct kcr__wq_item *it)
{
    it->flags &= ~KCR__WQ_WAITING;
    q->waiting--;
}

void kcr__wq_heap_trim(struct kcr_workqueue *q)
{
    if (q->heap_len > 2u * q->waiting + STALE_SLACK) {
        sweep(q);
        publish_next_due(q);
    }
}

int64_t kcr__wq_due_clock(struct kcr_workqueue *q, int64_t now)
{
    if (q->has_clock) {
        int64_t ms = kcr_clock_now_ms(&q->clock);
        return ms > INT64_MAX / KCR_NS_PER_MS ? INT64_MAX : ms * KCR_NS_PER_MS;
    }
    return now ? now : kcr__now_ns();
}

int64_t kcr__wq_promote(struct kcr_workqueue *q, int64_t now)
{
    int64_t pushed = 0, due = kcr__wq_due_clock(q, now);
    while (q->heap_len && q->heap[0].ready_at <= due) {
        struct kcr__wq_timer e = q->heap[0];
        pop_top(q);
        if (valid(&e)) {
            e.it->flags &= ~KCR__WQ_WAITING;
            q->waiting--;
            e.it->timers--;
            pushed += kcr__wq_make_ready(q, e.it, now, e.it->wait_prio);
        } else {
            drop_entry(q, &e);
        }
    }
    publish_next_due(q);
    if (pushed && q->has_cb)
        kcr__wq_m_depth(q);
    return pushed;
}

void kcr__wq_heap_clear(struct kcr_workqueue *q)
{
    while (q->heap_len) {
        struct kcr__wq_timer e = q->heap[--q->heap_len];
        if (valid(&e)) {
            e.it->flags &= ~KCR__WQ_WAITING;
            q->waiting--;
        }
        drop_entry(q, &e);
    }
    publish_next_due(q);
}

kcr_err kcr__wq_apply_add_after(struct kcr_workqueue *q, const char *key, size_t len,
                                uint64_t hash, int64_t ready_at, int prio, bool *earliest)
{
    kcr__wq_m_retry(q);
    struct kcr__wq_item *it = kcr__wq_lookup_or_create(q, key, len, hash);
    if (!it)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    *earliest = q->heap_len == 0 || ready_at < q->heap[0].ready_at;
    if (heap_schedule(q, it, ready_at, prio) != 0) {
        kcr__wq_release_if_idle(q, it);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    }
    kcr__wq_heap_trim(q);
    return KCR_OK;
}

kcr_err kcr__wq_add_after(struct kcr_workqueue *q, const char *key, int64_t delay_ns, int prio,
                          void *payload, const char *fn)
{
    size_t len = strlen(key);
    uint64_t hash = kcr__keytab_hash_seeded(q->hash_seed, key, len);
    int64_t now = prio != KCR_WQ_PRIORITY_NORMAL ? kcr__wq_prio_stamp(q, prio) : kcr__now_ns();
    if (delay_ns <= 0) /* a retry, then a plain add */
        return kcr__wq_add_locked(q, key, len, hash, now, true, prio, payload, fn);
    int64_t due = kcr__wq_due_clock(q, now);
    int64_t ready_at = delay_ns > INT64_MAX - due ? INT64_MAX : due + delay_ns;
    if (atomic_load_explicit(&q->closed, memory_order_acquire)) {
        kcr__wq_drop_payload(q, payload);
        return kcr__wq_fail_shutdown(q, fn, key);
    }
    /* A payload, or a deadline on the queue's own clock, takes the lock. */
    if (!payload && !q->has_clock && kcr__wq_ring_add(q, key, len, hash, now, ready_at, prio))
        return KCR_OK;
    struct kcr__wq_wake w = {0};
    kcr__wq_lock(q, &w); /* applies earlier adds first, so order is kept */
    if (q->shutting_down) {
        kcr__wq_drop_payload(q, payload);
        kcr__wq_unlock(q, &w);
        return kcr__wq_fail_shutdown(q, fn, key);
    }
    int64_t pushed = q->heap_len ? kcr__wq_promote(q, now) : 0;
    bool earliest = false;
    kcr_err err = kcr__wq_apply_add_after(q, key, len, hash, ready_at, prio, &earliest);
    if (err != KCR_OK) {
        kcr__wq_drop_payload(q, payload);
        err = kcr__fail(err, "%s: out of memory", fn);
    } else {
        kcr__wq_merge_payload(q, kcr__keytab_find(&q->tab, key, len, hash), payload);
        if (earliest) {
            /* The timekeeper sleeps too long now, or nobody keeps time. */
            if (q->tk_active)
                w.tk = true;
            else
                kcr__wq_signal(q, &w, 1);
        }
    }
    kcr__wq_notify(q, pushed, &w);
    kcr__wq_unlock(q, &w);
    return err;
}
