/* Internal: linking items into and out of the queue's FIFO (the ready
 * keys, in hand-out order). Outside priority mode a push goes to the tail;
 * in priority mode the FIFO is the concatenation of the priority lines
 * (priority.c) and a push goes to the end of its line. Lock held for all;
 * inline, since add, get and done run them on every key. */
#ifndef KCR_WORKQUEUE_FIFO_H
#define KCR_WORKQUEUE_FIFO_H

#include "workqueue/queue.h"

/* Takes `it` out of the FIFO, outside priority mode. */
static inline void kcr__wq_fifo_unlink_plain(struct kcr_workqueue *q, struct kcr__wq_item *it)
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
static inline void kcr__wq_fifo_unlink(struct kcr_workqueue *q, struct kcr__wq_item *it)
{
    if (q->prio_on)
        kcr__wq_prio_unlink(q, it);
    kcr__wq_fifo_unlink_plain(q, it);
}

/* Links `it` at the FIFO's tail, as kcr__wq_fifo_push outside priority mode. */
static inline void kcr__wq_fifo_push_tail(struct kcr_workqueue *q, struct kcr__wq_item *it)
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
static inline void kcr__wq_fifo_push(struct kcr_workqueue *q, struct kcr__wq_item *it, int64_t now)
{
    if (!q->prio_on) {
        kcr__wq_fifo_push_tail(q, it);
        return;
    }
    kcr__wq_prio_push(q, it, now); /* at the end of its priority's line */
    it->ready_epoch = q->epoch;
    it->flags |= KCR__WQ_QUEUED;
    q->queued++;
    atomic_store_explicit(&q->avail, q->queued, memory_order_relaxed);
}

#endif
