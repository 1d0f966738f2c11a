/* The delaying part: a min-heap of (deadline, call order) holding the nodes
 * that wait for an add_after deadline. No thread of its own: due items are
 * moved to the FIFO by whoever holds the lock next (get, add, len), and a
 * blocked getter sleeps until the nearest deadline (see queue.c). */
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "workqueue/queue.h"

static inline bool before(const struct kcr__wq_item *a, const struct kcr__wq_item *b)
{
    return a->ready_at < b->ready_at || (a->ready_at == b->ready_at && a->seq < b->seq);
}

static void sift_up(struct kcr__wq_item **h, uint32_t i)
{
    struct kcr__wq_item *it = h[i];
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (!before(it, h[parent]))
            break;
        h[i] = h[parent];
        h[i]->heap_idx = i;
        i = parent;
    }
    h[i] = it;
    it->heap_idx = i;
}

static void sift_down(struct kcr__wq_item **h, uint32_t n, uint32_t i)
{
    struct kcr__wq_item *it = h[i];
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && before(h[c + 1], h[c]))
            c++;
        if (!before(h[c], it))
            break;
        h[i] = h[c];
        h[i]->heap_idx = i;
        i = c;
    }
    h[i] = it;
    it->heap_idx = i;
}

/* Tells spinning getters when the first deadline is. */
static void publish_next_due(struct kcr_workqueue *q)
{
    atomic_store_explicit(&q->next_due, q->heap_len ? q->heap[0]->ready_at : INT64_MAX,
                          memory_order_relaxed);
}

int kcr__wq_heap_schedule(struct kcr_workqueue *q, struct kcr__wq_item *it, int64_t ready_at)
{
    if (it->heap_idx != KCR__WQ_NO_HEAP) {
        /* Already waiting: the earlier deadline wins. */
        if (ready_at < it->ready_at) {
            it->ready_at = ready_at;
            sift_up(q->heap, it->heap_idx);
            publish_next_due(q);
        }
        return 0;
    }
    if (q->heap_len == q->heap_cap) {
        uint32_t cap = q->heap_cap * 2;
        struct kcr__wq_item **h = realloc(q->heap, (size_t)cap * sizeof *h);
        if (!h)
            return -1;
        q->heap = h;
        q->heap_cap = cap;
    }
    it->ready_at = ready_at;
    it->seq = q->seq++;
    q->heap[q->heap_len] = it;
    sift_up(q->heap, q->heap_len++);
    publish_next_due(q);
    return 0;
}

void kcr__wq_heap_remove(struct kcr_workqueue *q, struct kcr__wq_item *it)
{
    uint32_t i = it->heap_idx;
    it->heap_idx = KCR__WQ_NO_HEAP;
    uint32_t last = --q->heap_len;
    if (i != last) {
        q->heap[i] = q->heap[last];
        q->heap[i]->heap_idx = i;
        if (i > 0 && before(q->heap[i], q->heap[(i - 1) / 2]))
            sift_up(q->heap, i);
        else
            sift_down(q->heap, q->heap_len, i);
    }
    publish_next_due(q);
}

int64_t kcr__wq_promote(struct kcr_workqueue *q, int64_t now)
{
    int64_t pushed = 0;
    while (q->heap_len && q->heap[0]->ready_at <= now) {
        struct kcr__wq_item *it = q->heap[0];
        kcr__wq_heap_remove(q, it);
        pushed += kcr__wq_make_ready(q, it, now);
    }
    if (pushed && q->has_cb)
        kcr__wq_m_depth(q);
    return pushed;
}

void kcr__wq_heap_clear(struct kcr_workqueue *q)
{
    while (q->heap_len) {
        struct kcr__wq_item *it = q->heap[q->heap_len - 1];
        q->heap_len--;
        it->heap_idx = KCR__WQ_NO_HEAP;
        kcr__wq_release_if_idle(q, it);
    }
    publish_next_due(q);
}

kcr_err kcr__wq_apply_add_after(struct kcr_workqueue *q, const char *key, size_t len,
                                uint64_t hash, int64_t ready_at, bool *earliest)
{
    q->retries_total++;
    if (q->has_cb)
        kcr__wq_m_retry(q);
    struct kcr__wq_item *it = kcr__wq_lookup_or_create(q, key, len, hash);
    if (!it)
        return KCR_ERR_NOMEM;
    *earliest = q->heap_len == 0 || ready_at < q->heap[0]->ready_at;
    if (kcr__wq_heap_schedule(q, it, ready_at) != 0) {
        kcr__wq_release_if_idle(q, it);
        return KCR_ERR_NOMEM;
    }
    return KCR_OK;
}

/* add_after with a deadline that has passed: a retry, then a plain add. */
static kcr_err add_now(struct kcr_workqueue *q, const char *key, size_t len, uint64_t hash,
                       int64_t now)
{
    struct kcr__wq_wake w = {0};
    kcr__wq_lock(q, &w);
    if (q->shutting_down) {
        kcr__wq_unlock(q, &w);
        return KCR_ERR_SHUTDOWN;
    }
    q->retries_total++;
    if (q->has_cb)
        kcr__wq_m_retry(q);
    int64_t pushed = q->heap_len ? kcr__wq_promote(q, now) : 0;
    struct kcr__wq_item *it = kcr__wq_lookup_or_create(q, key, len, hash);
    kcr_err err = KCR_OK;
    if (!it) {
        err = kcr__fail(KCR_ERR_NOMEM, "kcr_workqueue_add_after: out of memory");
    } else if (!(it->flags & KCR__WQ_DIRTY)) {
        pushed += kcr__wq_make_ready(q, it, now);
        if (q->has_cb)
            kcr__wq_m_depth(q);
    }
    kcr__wq_notify(q, pushed, &w);
    kcr__wq_unlock(q, &w);
    return err;
}

kcr_err kcr_workqueue_add_after(kcr_workqueue *q, const char *key, int64_t delay_ns)
{
    if (!key)
        return kcr__fail(KCR_ERR_INVALID, "kcr_workqueue_add_after: NULL key");
    size_t len = strlen(key);
    uint64_t hash = kcr__keytab_hash_seeded(q->hash_seed, key, len);
    int64_t now = kcr__now_ns();
    if (delay_ns <= 0)
        return add_now(q, key, len, hash, now);
    int64_t ready_at = delay_ns > INT64_MAX - now ? INT64_MAX : now + delay_ns;
    if (atomic_load_explicit(&q->closed, memory_order_acquire))
        return KCR_ERR_SHUTDOWN;
    if (kcr__wq_ring_add(q, key, len, hash, now, ready_at))
        return KCR_OK;
    struct kcr__wq_wake w = {0};
    kcr__wq_lock(q, &w); /* applies earlier adds first, so order is kept */
    if (q->shutting_down) {
        kcr__wq_unlock(q, &w);
        return KCR_ERR_SHUTDOWN;
    }
    int64_t pushed = q->heap_len ? kcr__wq_promote(q, now) : 0;
    bool earliest = false;
    kcr_err err = kcr__wq_apply_add_after(q, key, len, hash, ready_at, &earliest);
    if (err != KCR_OK) {
        err = kcr__fail(err, "kcr_workqueue_add_after: out of memory");
    } else if (earliest) {
        /* The timekeeper sleeps too long now, or nobody keeps time. */
        if (q->tk_active)
            w.tk = true;
        else
            kcr__wq_signal(q, &w, 1);
    }
    kcr__wq_notify(q, pushed, &w);
    kcr__wq_unlock(q, &w);
    return err;
}
