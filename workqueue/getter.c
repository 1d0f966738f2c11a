/* The getters' policy: get and get_timeout. A getter drains the add ring,
 * promotes due keys and takes the FIFO's head, unless other workers hold
 * keys and keep up: then one getter stands by (a timed wait) and the others
 * sleep, so one busy worker is not slowed down by a second sharing the lock.
 * With nothing ready a getter waits awake briefly (yields), then sleeps;
 * one sleeping getter keeps time for the delay heap and the metrics gauges
 * (docs/workqueue.md). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/clock.h"
#include "core/error.h"
#include "workqueue/duration.h"
#include "workqueue/fifo.h"
#include "workqueue/queue.h"
#include "workqueue/ring.h"

/* Rounds of a getter's wait for work before it sleeps (0: never wait
 * awake), each a sched_yield (about 0.5 us when the CPU has nothing else to
 * run), and how many getters may wait awake at once. A yield that comes
 * back late (another process holds the CPU) makes the thread's waits
 * shorter for a while, and a thread whose recent sleeps were all long does
 * not wait awake at all (yield.c). */
#ifndef KCR__WQ_SPIN
#define KCR__WQ_SPIN 50
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

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* Called with the lock held and nothing ready: lets one getter at a time
 * wait briefly for a key without sleeping (and without the lock, so adders
 * are not slowed down). Returns true if it spun (the lock is held again). */
static bool spin_for_work(struct kcr_workqueue *q, int *budget)
{
    if (*budget <= 0 || !kcr__wq_spin_pays() ||
        atomic_load_explicit(&q->spinning, memory_order_relaxed) >= KCR__WQ_MAX_SPINNERS)
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
        if (atomic_load_explicit(&q->avail, memory_order_relaxed) || kcr__wq_ring_ready(q))
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
    kcr__wq_sleep_fence(q);
    if (kcr__wq_ring_ready_sc(q))
        kcr__wq_signal(q, w, 1);
}

/* get with a deadline on the monotonic clock (0: only a key ready now;
 * INT64_MAX: no limit). */
static kcr_err get_until(kcr_workqueue *q, int64_t deadline, const char **key)
{
    if (!key)
        return kcr__fail(KCR_ERR_INVALID, "kcr_workqueue_get: NULL key pointer");
    *key = NULL;
    struct kcr__wq_wake w = {0};
    kcr__wq_mutex_lock(q);
    uint64_t gen = q->wake_gen;
    int64_t extra = 0; /* items made ready here beyond the one taken */
    kcr_err err = KCR_OK;
    struct kcr__wq_item *it = NULL;
    int64_t now = 0;
    int spin_budget = KCR__WQ_SPIN; /* yields left before this getter sleeps */
    bool on_duty = false;           /* this getter is the standby */
    bool claimed_applied = false;   /* every add claimed before the timeout applied */
    for (;;) {
        /* With keys in the FIFO, leave the ring alone until it is half full:
         * every key in it was added after every key in the FIFO, so order is
         * the same, and the drain then reads slots adders finished with long
         * ago instead of chasing the one an adder is writing now (that cache
         * line ping-pong cost more than the rest of the add and get).
         * In priority mode every get applies the adds claimed before it,
         * waiting for a slot still being written: a higher-priority key
         * behind that slot (perhaps this thread's own add) must not be
         * passed over for a lower one already in the FIFO. */
        if (q->prio_on)
            extra += kcr__wq_drain_claimed(q, &w);
        else if (!q->head || kcr__wq_ring_half_full(q))
            extra += kcr__wq_drain_ring(q, &w, q->queued >= KCR__WQ_BACKLOG);
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
            err = KCR_ERR_SHUTDOWN; /* detail: set on the way out */
            break;
        }
        if (q->wake_gen != gen) {
            err = KCR_ERR_CANCELED; /* detail: set on the way out */
            break;
        }
        if (now >= deadline) {
            /* Before giving up, the adds claimed before now, as a locked
             * queue would have them: the drain stops at a slot another
             * adder is still writing, and this thread's own add may sit
             * behind it. */
            if (!claimed_applied && !q->prio_on) {
                claimed_applied = true;
                extra += kcr__wq_drain_claimed(q, &w);
                continue;
            }
            err = KCR_ERR_TIMEOUT; /* detail: set on the way out */
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
                until = min64(until, q->has_clock ? now + KCR__WQ_CLOCK_POLL_NS
                                                  : q->heap[0].ready_at);
            if (q->gauges && q->processing)
                until = min64(until, q->next_update_ns);
            atomic_store_explicit(&q->tk_until, until, memory_order_relaxed);
        }
        /* About to sleep: announce it, then look at the ring once more. */
        atomic_fetch_add(&q->sleepers, 1);
        kcr__wq_sleep_fence(q);
        if (kcr__wq_ring_ready_sc(q)) {
            atomic_fetch_sub(&q->sleepers, 1);
            if (keeps_time)
                atomic_store_explicit(&q->tk_until, INT64_MAX, memory_order_relaxed);
            continue;
        }
        int64_t slept_from = kcr__now_ns();
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
        kcr__wq_slept(kcr__now_ns() - slept_from);
        atomic_fetch_sub(&q->sleepers, 1);
    }
    leave_standby(q, &on_duty, &w);
    if (it) {
        /* Pop it: dirty -> processing. */
        bool prio = q->prio_on;
        if (prio)
            kcr__wq_prio_unlink(q, it);
        kcr__wq_fifo_unlink_plain(q, it);
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

kcr_err kcr_workqueue_get_timeout(kcr_workqueue *q, int64_t timeout_ms, const char **key)
{
    if (timeout_ms == KCR_DURATION_INFINITE)
        return get_until(q, INT64_MAX, key);
    if (timeout_ms < 0)
        return kcr__duration_check("kcr_workqueue_get_timeout: timeout_ms", timeout_ms,
                                   KCR__DURATION_INFINITE);
    if (timeout_ms == 0)
        return get_until(q, 0, key);
    int64_t now = kcr__now_ns(), timeout_ns = kcr__wq_ms_to_ns(timeout_ms);
    return get_until(q, timeout_ns < INT64_MAX - now ? now + timeout_ns : INT64_MAX, key);
}

kcr_err kcr_workqueue_get(kcr_workqueue *q, const char **key)
{
    return get_until(q, INT64_MAX, key);
}
