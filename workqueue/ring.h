/* Internal: the add ring. kcr_workqueue_add does not take the queue's
 * mutex: it copies the key into a slot of a bounded lock-free ring
 * (multi-producer, single consumer: a Vyukov queue), and whoever holds the
 * mutex next drains the ring in add order (see queue.h for the handshake
 * with sleeping getters). ring.c holds the adders' side (claim, fill,
 * publish, wake a sleeper) and the drain; these inline peeks are for the
 * getters' loop (getter.c). */
#ifndef KCR_WORKQUEUE_RING_H
#define KCR_WORKQUEUE_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "workqueue/queue.h"

/* True if the add `ahead` slots past the ring's head is published (any
 * thread; only the lock holder moves the head). */
static inline bool kcr__wq_slot_published(struct kcr_workqueue *q, size_t ahead, memory_order order)
{
    size_t pos = atomic_load_explicit(&q->ring_head, memory_order_relaxed) + ahead;
    return atomic_load_explicit(&q->ring[pos & q->ring_mask].seq, order) == pos + 1;
}

/* The getter's half of the Dekker handshake: a seq_cst read of the slot. */
static inline bool kcr__wq_ring_ready_sc(struct kcr_workqueue *q)
{
    return kcr__wq_slot_published(q, 0, memory_order_seq_cst);
}

/* True if the ring has a published add at its head (a hint, any thread). */
static inline bool kcr__wq_ring_ready(struct kcr_workqueue *q)
{
    return kcr__wq_slot_published(q, 0, memory_order_relaxed);
}

/* True if the ring holds at least half its capacity of published adds. */
static inline bool kcr__wq_ring_half_full(struct kcr_workqueue *q)
{
    return kcr__wq_slot_published(q, (q->ring_mask + 1) / 2, memory_order_relaxed);
}

/* Puts an add (ready_at 0) or add_after (ready_at: deadline) in the ring and
 * wakes a getter if one must see it now; waits a little while the ring is
 * full. False: it did not fit (long key, metrics, full): take the lock. */
bool kcr__wq_ring_add(struct kcr_workqueue *q, const char *key, size_t len, uint64_t hash,
                      int64_t added_ns, int64_t ready_at, int prio);

/* Applies the adds waiting in the ring (lock held), up to the first slot
 * not yet published (with `hold_delayed`, also up to the first add_after).
 * Returns the number of items pushed to the FIFO (the caller notifies);
 * plans a wake-up of the timekeeper in `w` when a deadline earlier than its
 * own arrived. */
int64_t kcr__wq_drain_ring(struct kcr_workqueue *q, struct kcr__wq_wake *w, bool hold_delayed);

/* Applies every add claimed before the call (lock held), waiting for slots
 * claimed but not yet published. Returns the number of items pushed to the
 * FIFO. */
int64_t kcr__wq_drain_claimed(struct kcr_workqueue *q, struct kcr__wq_wake *w);

/* Takes the mutex and applies every add claimed so far (in order, waiting
 * for a slot still being filled); the planned wake-ups go to `w`. */
void kcr__wq_lock(struct kcr_workqueue *q, struct kcr__wq_wake *w);

#endif
