/* Priority mode: one line (a FIFO) per priority, served highest first, with
 * aging so a low line is never starved.
 *
 * A queue starts as one FIFO and stays so while every key is NORMAL: none
 * of this runs. The first key with another priority switches it over for
 * good (kcr__wq_prio_enable): the FIFO (q->head..q->tail) is then the
 * concatenation of the lines, highest priority first, and levels[] (sorted
 * the same way) knows where each line starts and ends. So the FIFO's head is
 * still the key to hand out next, and get, shutdown and the standby logic in
 * getter.c work unchanged; a push links the item at the end of its line
 * instead of the end of the FIFO.
 *
 * Aging: a queued item remembers when it entered its line (ready_ns). Within
 * a line, items are in that order, so each line's first item is its oldest;
 * get hands out, among the lines' first items that have been ready for
 * max_wait_ns, the one ready longest (kcr__wq_prio_next). Everything runs
 * with the queue's lock held. */
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "workqueue/fifo.h"
#include "workqueue/queue.h"

/* Index of the level of `prio` in levels[] (sorted by priority, highest
 * first), or where it would be inserted; *found says which. */
static uint32_t level_index(const struct kcr_workqueue *q, int prio, bool *found)
{
    uint32_t lo = 0, hi = q->nlevels;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (q->levels[mid].prio > prio)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < q->nlevels && q->levels[lo].prio == prio;
    return lo;
}

/* The level of a dirty item (it exists while the item is dirty). */
static struct kcr__wq_level *level_of(const struct kcr_workqueue *q,
                                      const struct kcr__wq_item *it)
{
    bool found;
    return &q->levels[level_index(q, it->prio, &found)];
}

static void report(const struct kcr_workqueue *q, const struct kcr__wq_level *lv)
{
    if (q->has_cb && q->m.depth_priority)
        q->m.depth_priority(q->name, lv->prio, lv->dirty, q->m.user_data);
}

int64_t kcr__wq_prio_stamp(struct kcr_workqueue *q, int prio)
{
    int64_t now = kcr__now_ns();
    int64_t none = 0;
    /* Read first: a failing CAS still takes the line (shared with `ring`
     * and `closed`, which every adder and getter reads) exclusively. */
    if (prio != KCR_WQ_PRIORITY_NORMAL &&
        !atomic_load_explicit(&q->prio_since, memory_order_relaxed))
        atomic_compare_exchange_strong_explicit(&q->prio_since, &none, now, memory_order_relaxed,
                                                memory_order_relaxed);
    return now;
}

bool kcr__wq_prio_enable(struct kcr_workqueue *q)
{
    q->levels = malloc(4 * sizeof *q->levels);
    if (!q->levels) {
        kcr__log(KCR_LOG_ERROR, "workqueue",
                 "queue \"%s\": out of memory, priorities are ignored for now", q->name);
        return false;
    }
    q->levels_cap = 4;
    q->nlevels = 0;
    q->prio_on = true;
    int64_t none = 0;
    atomic_compare_exchange_strong_explicit(&q->prio_since, &none, kcr__now_ns(),
                                            memory_order_relaxed, memory_order_relaxed);
    if (q->depth > 0) {
        /* Every dirty item is NORMAL so far: the FIFO is NORMAL's line. */
        q->levels[0] = (struct kcr__wq_level){
            .prio = KCR_WQ_PRIORITY_NORMAL,
            .dirty = q->depth,
            .queued = q->queued,
            .first = q->head,
            .last = q->tail,
        };
        q->nlevels = 1;
        /* Their adds were not stamped: they were made before the first
         * add with a priority. */
        int64_t before = atomic_load_explicit(&q->prio_since, memory_order_relaxed) - 1;
        for (struct kcr__wq_item *it = q->head; it; it = it->next)
            it->ready_ns = before;
        report(q, &q->levels[0]);
    }
    return true;
}

void kcr__wq_prio_dirty(struct kcr_workqueue *q, struct kcr__wq_item *it)
{
    bool found;
    uint32_t i = level_index(q, it->prio, &found);
    if (!found && q->nlevels == q->levels_cap) {
        struct kcr__wq_level *grown =
            realloc(q->levels, (size_t)q->levels_cap * 2 * sizeof *q->levels);
        if (grown) {
            q->levels = grown;
            q->levels_cap *= 2;
        } else {
            /* Never loses the key: it joins the next lower line (or the
             * lowest), which exists since the array is full. */
            if (i == q->nlevels)
                i--;
            kcr__log(KCR_LOG_ERROR, "workqueue",
                     "queue \"%s\": out of memory, \"%s\" queued with priority %d instead of %d",
                     q->name, it->key, q->levels[i].prio, it->prio);
            it->prio = q->levels[i].prio;
            found = true;
        }
    }
    if (!found) {
        memmove(&q->levels[i + 1], &q->levels[i], (q->nlevels - i) * sizeof *q->levels);
        q->levels[i] = (struct kcr__wq_level){.prio = it->prio};
        q->nlevels++;
    }
    q->levels[i].dirty++;
    report(q, &q->levels[i]);
}

void kcr__wq_prio_clean(struct kcr_workqueue *q, struct kcr__wq_item *it)
{
    bool found;
    uint32_t i = level_index(q, it->prio, &found);
    struct kcr__wq_level *lv = &q->levels[i];
    lv->dirty--;
    report(q, lv);
    if (lv->dirty == 0) {
        q->nlevels--;
        memmove(&q->levels[i], &q->levels[i + 1], (q->nlevels - i) * sizeof *q->levels);
    }
}

void kcr__wq_prio_push(struct kcr_workqueue *q, struct kcr__wq_item *it, int64_t now)
{
    bool found;
    uint32_t i = level_index(q, it->prio, &found);
    struct kcr__wq_level *lv = &q->levels[i];
    /* After the end of this line, or of the nearest higher line that has
     * items; at the FIFO's head if there is none. */
    struct kcr__wq_item *after = lv->last;
    for (uint32_t j = i; !after && j-- > 0;)
        after = q->levels[j].last;
    it->prev = after;
    it->next = after ? after->next : q->head;
    if (it->next)
        it->next->prev = it;
    else
        q->tail = it;
    if (after)
        after->next = it;
    else
        q->head = it;
    if (q->max_wait_ns >= 0) {
        if (!now)
            now = kcr__now_ns();
        /* Adds stamped by racing adders may arrive a little out of order:
         * keep each line in ready_ns order, so its first item is its oldest. */
        if (lv->queued && now < lv->last->ready_ns)
            now = lv->last->ready_ns;
        it->ready_ns = now;
    }
    if (!lv->queued)
        lv->first = it;
    lv->last = it;
    lv->queued++;
}

void kcr__wq_prio_unlink(struct kcr_workqueue *q, struct kcr__wq_item *it)
{
    struct kcr__wq_level *lv = level_of(q, it);
    bool alone = lv->queued == 1;
    if (lv->first == it)
        lv->first = alone ? NULL : it->next;
    if (lv->last == it)
        lv->last = alone ? NULL : it->prev;
    lv->queued--;
}

struct kcr__wq_item *kcr__wq_prio_next(struct kcr_workqueue *q, int64_t now)
{
    if (q->max_wait_ns < 0 || q->nlevels < 2)
        return q->head;
    struct kcr__wq_item *best = NULL;
    for (uint32_t i = 0; i < q->nlevels; i++) {
        struct kcr__wq_item *first = q->levels[i].first;
        /* Strictly older only: on a tie the higher line (seen first) wins. */
        if (first && now - first->ready_ns >= q->max_wait_ns &&
            (!best || first->ready_ns < best->ready_ns))
            best = first;
    }
    return best ? best : q->head;
}

/* A dirty item added again with a higher priority takes it: a queued one
 * moves to the end of the higher line. Out of line: NORMAL-only queues
 * never get here. */
void kcr__wq_raise_prio(struct kcr_workqueue *q, struct kcr__wq_item *it, int prio)
{
    if (!q->prio_on && !kcr__wq_prio_enable(q))
        return;
    bool queued = it->flags & KCR__WQ_QUEUED;
    if (queued)
        kcr__wq_fifo_unlink(q, it);
    kcr__wq_prio_clean(q, it);
    it->prio = prio;
    kcr__wq_prio_dirty(q, it);
    if (queued)
        kcr__wq_fifo_push(q, it, 0);
}

/* make_ready of a clean item in priority mode, or with a priority other
 * than NORMAL (which switches the queue to priority mode). Out of line, so
 * the NORMAL path of kcr__wq_make_ready (queue.c) stays as short as it was
 * before priorities. */
int kcr__wq_make_ready_prio(struct kcr_workqueue *q, struct kcr__wq_item *it, int64_t now, int prio)
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
    kcr__wq_fifo_push(q, it, now);
    return 1;
}
