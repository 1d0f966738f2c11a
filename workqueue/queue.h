/* Internal: the workqueue's state, shared by queue.c (the locked core:
 * nodes, dirty/processing states, done, remove, shutdown), lifecycle.c
 * (new, free), ring.c (the lock-free add ring, ring.h), getter.c (get and
 * the standby policy), fifo.h (FIFO links), priority.c (priority lines),
 * delaying.c (deadline heap), fence.c (the add ring's fences), yield.c,
 * metrics.c and ratelimited.c.
 *
 * One mutex guards the state. Each distinct key has one item node, found
 * through an open-addressing table (keytab) and alive while the key is dirty
 * (waiting to be handed out), processing, or waiting for a deadline; the same
 * node moves dirty -> processing -> dirty without reallocation, and stays
 * while stale heap entries point to it (`timers`, see delaying.c).
 *
 * kcr_workqueue_add does not take the mutex: it copies the key into a slot
 * of a bounded lock-free ring (multi-producer, single consumer: a Vyukov
 * queue). Whoever takes the mutex next drains the ring in add order, so
 * adders (informer handlers) never wait for workers, no add allocates, and
 * the key table stays in the caches of the threads that own the mutex. Keys
 * longer than a slot, a full ring, or metrics callbacks take the locked path.
 * add_after goes through the same ring with its deadline. An adder only
 * takes the mutex when a getter sleeps, no getter spins and the add is due
 * before the timekeeper wakes by itself, to wake it (Dekker-style: publish,
 * fence, read `sleepers`; a getter bumps `sleepers`, then re-reads the ring
 * before sleeping; fence.c says which fence each side uses). A getter with
 * keys in the FIFO leaves the ring alone until it is half full, and leaves
 * delayed adds in it while the FIFO is long; a full ring makes adders wait
 * for getters before they apply it themselves (at once on a contended CPU:
 * yield.c). While workers hold keys, one
 * more getter stands by (a timed wait) instead of taking fresh keys, and
 * adders wake nobody meanwhile (see getter.c and docs/workqueue.md). */
#ifndef KCR_WORKQUEUE_QUEUE_H
#define KCR_WORKQUEUE_QUEUE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/clock.h"
#include "kcr/workqueue.h"
#include "core/keytab.h"
#include "workqueue/ptrset.h"

enum {
    KCR__WQ_DIRTY = 1u,      /* waiting to be handed out (queued, or re-added while processing) */
    KCR__WQ_QUEUED = 2u,     /* linked in the FIFO (implies DIRTY and not PROCESSING) */
    KCR__WQ_PROCESSING = 4u, /* handed out by get, done not yet called */
    KCR__WQ_WAITING = 8u,    /* waiting for an add_after deadline (ready_at, seq) */
};

/* One priority's line in priority mode: its part of the FIFO (first..last,
 * `queued` items) and its dirty items (`dirty` >= `queued`: the rest were
 * re-added while processing). A level exists while dirty > 0. */
struct kcr__wq_level {
    int prio;
    int64_t dirty, queued;
    struct kcr__wq_item *first, *last;
};

/* A heap entry: the deadline is copied in so sifting never touches nodes.
 * Valid while its item is WAITING with the same seq; a key re-scheduled
 * earlier or removed leaves a stale entry behind, dropped when it reaches
 * the top or when stale entries outnumber valid ones. */
struct kcr__wq_timer {
    int64_t ready_at;
    uint64_t seq; /* add_after call order: ties keep it */
    struct kcr__wq_item *it;
};

struct kcr__wq_item {
    /* FIFO links while QUEUED; processing-list links while PROCESSING and the
     * queue tracks time (an item is never in both). */
    struct kcr__wq_item *next, *prev;
    uint64_t hash;
    int64_t ready_at; /* deadline while WAITING */
    uint64_t seq;     /* while WAITING: the seq of its one valid heap entry */
    int64_t added_ns; /* time tracking: when it became dirty */
    union {
        int64_t start_ns; /* time tracking, while PROCESSING: when it was handed out */
        int64_t ready_ns; /* priority mode, while QUEUED: when it entered its line (aging) */
    };
    uint32_t ready_epoch; /* while QUEUED: the queue's standby epoch when it was pushed */
    uint32_t timers;   /* heap entries pointing here, valid or stale */
    uint32_t flags;
    uint32_t len; /* strlen(key) */
    uint32_t cap; /* bytes available in key[] */
    int prio;      /* while DIRTY: its priority (KCR_WQ_PRIORITY_NORMAL outside priority mode) */
    int wait_prio; /* while WAITING: the priority it is queued with once due */
    void *payload; /* the user's per-key payload (options.payload); keeps the node alive */
    char key[];
};

/* A slot of the add ring: 128 bytes, so keys up to KCR__WQ_SLOT_KEY - 1. */
#define KCR__WQ_SLOT_KEY 88u
struct kcr__wq_slot {
    atomic_size_t seq; /* Vyukov sequence: pos + 1 when published for pos */
    uint64_t hash;
    int64_t added_ns;
    int64_t ready_at; /* 0: add now; else add_after's deadline */
    uint32_t len;
    int prio;
    char key[KCR__WQ_SLOT_KEY];
};
_Static_assert(sizeof(struct kcr__wq_slot) == 128, "a ring slot is two cache lines");
#define KCR__WQ_RING_SLOTS 512u
/* Nodes for keys shorter than this are recycled under the lock. */
#define KCR__WQ_NODE_KEY 48u

struct kcr_workqueue {
    /* Read by adders, written only at creation, shutdown and first priority use. */
    struct kcr__wq_slot *ring; /* adds not applied yet */
    size_t ring_mask;
    uint64_t hash_seed; /* == tab.seed, on a line the table's writers do not touch */
    atomic_bool closed; /* mirror of shutting_down for adders */
    /* When the first add with a priority other than NORMAL was made (0:
     * none yet). From then on adders stamp every add with the time, for
     * aging; keys added before count as ready since prio_since - 1. */
    _Atomic int64_t prio_since;
    bool timing;        /* track times (callbacks set or track_time) */
    bool has_cb;        /* metrics callbacks set */
    bool gauges;        /* a gauge callback is set: refresh periodically */
    bool light_fences;  /* kcr__wq_light_fences() at creation */

    /* Getters' announcements, read by adders (changes rarely in steady state). */
    _Alignas(64) atomic_int sleepers; /* getters blocked or about to block */
    atomic_int spinning;              /* getters spinning before they block */
    /* When the sleeping timekeeper wakes up by itself; INT64_MAX when no
     * getter keeps time. An add due earlier must wake somebody. */
    _Atomic int64_t tk_until;
    /* A standby getter is on duty (see get): it looks at the ring within
     * KCR__WQ_STANDBY_NS, so adders need not wake anybody. */
    atomic_bool standby_on;
    /* Light fences only: adders put a full fence between publishing a slot
     * and reading `sleepers`, so a getter about to sleep needs no heavy
     * fence. Set and cleared under the lock by getters (fence.c). */
    atomic_bool adders_fence;

    /* Claimed by adders. */
    _Alignas(64) atomic_size_t ring_tail;

    /* Keys handed out so far: adders waiting for ring space watch it. */
    _Alignas(64) atomic_ulong takes;

    /* Everything below is guarded by `mu`. */
    _Alignas(64) pthread_mutex_t mu;
    atomic_size_t ring_head; /* next slot to drain (also read by spinners) */
    atomic_long avail;       /* mirror of `queued`, read by spinning getters */
    _Atomic int64_t next_due; /* mirror of the heap's first deadline (INT64_MAX: none) */
    pthread_cond_t cond;       /* getters wait here */
    pthread_cond_t tk_cond;    /* the one getter keeping time for the heap/metrics */
    pthread_cond_t standby_cond; /* the one standby getter (never signaled: it times out) */
    pthread_cond_t drain_cond; /* shutdown_with_drain waits here */

    struct kcr__keytab tab;
    struct kcr__ptrset handed_out; /* PROCESSING nodes, for done()'s fast path */
    struct kcr__wq_item *head, *tail; /* FIFO of ready items */
    int64_t queued;                   /* items in the FIFO */
    int64_t depth;                    /* dirty items */
    int64_t processing;

    struct kcr__wq_timer *heap; /* min-heap on (ready_at, seq), stale entries included */
    uint32_t heap_len, heap_cap;
    uint32_t waiting;           /* WAITING items (the heap's valid entries) */
    uint64_t seq;

    bool standby;    /* a getter waits on standby_cond (mirrored in standby_on) */
    uint32_t epoch;  /* standby rounds so far: ages FIFO items (ready_epoch) */
    bool quick_turns; /* in the last standby round, workers took many keys */
    /* Priority mode: a priority other than NORMAL was used (priority.c).
     * Here, in padding, so no hot field moved to another cache line. */
    bool prio_on;
    unsigned long takes_at_round; /* `takes` when that round began */
    int spin_claims; /* items left for spinners instead of waking sleepers */
    int nwaiters;    /* getters blocked on cond */
    int signaled;    /* of those, signaled and not yet back: a wake-up is on its way */
    bool tk_active;  /* a getter is blocked on tk_cond */
    uint64_t wake_gen;
    bool shutting_down;
    bool draining;
    int drain_waiters;
    unsigned drain_checks; /* times a drain waiter tested `processing` (tests wait on it) */

    struct kcr__wq_item *free_items; /* recycled nodes (key capacity KCR__WQ_NODE_KEY) */
    uint32_t nfree;

    /* metrics */
    kcr_workqueue_metrics m;
    struct kcr__wq_item *proc_head; /* processing items while timing */
    int64_t next_update_ns;
    int64_t update_period_ns; /* m.update_period_ms, defaulted */
    uint64_t adds_total, retries_total;
    int64_t qd_sum_ns, wd_sum_ns;
    uint64_t qd_count, wd_count;

    /* Priority mode (priority.c): the FIFO is the concatenation of one line
     * per priority, highest first; levels[] is sorted the same way. */
    struct kcr__wq_level *levels;
    uint32_t nlevels, levels_cap;
    int64_t max_wait_ns; /* aging; < 0: strict priority */

    kcr_rate_limiter *limiter;
    char *name;

    /* Per-key payloads (has_payload: options.payload was set). */
    bool has_payload;
    kcr_workqueue_payload_ops pl;
    /* Deadlines of delayed keys run on this clock when set (virtual time in
     * tests); real monotonic time otherwise. */
    bool has_clock;
    kcr_clock clock;
};

/* queue.c --------------------------------------------------------------- */

/* Marks `it` dirty with `prio` (like add on an existing node) and queues it
 * unless it is processing; an item dirty already only keeps the higher
 * priority. Returns 1 if it was pushed to the FIFO (caller notifies). */
int kcr__wq_make_ready(struct kcr_workqueue *q, struct kcr__wq_item *it, int64_t now, int prio);

/* Wake-ups decided under the lock and sent after unlocking it, so a woken
 * getter does not run into a held lock and the syscall is outside it. */
struct kcr__wq_wake {
    int cond;  /* pthread_cond_signal(&q->cond) this many times */
    bool tk;   /* signal tk_cond */
};

/* Plans wake-ups of up to `n` blocked getters for n newly ready items. */
void kcr__wq_notify(struct kcr_workqueue *q, int64_t n, struct kcr__wq_wake *w);

/* Plans signals of `cond` for up to `n` getters blocked on it that no signal
 * is on its way to yet (a woken getter takes a key and passes the baton, so
 * signaling it twice only wakes a second getter for nothing). Returns how
 * many were planned. */
int64_t kcr__wq_signal(struct kcr_workqueue *q, struct kcr__wq_wake *w, int64_t n);

/* Takes q->mu (glibc's adaptive mutex spins briefly before it blocks). */
void kcr__wq_mutex_lock(struct kcr_workqueue *q);

/* Unlocks q->mu, then sends the planned wake-ups. */
void kcr__wq_unlock(struct kcr_workqueue *q, const struct kcr__wq_wake *w);

/* An add (or, with `retry`, an add_after due already) under the lock:
 * applies earlier adds first so order is kept, moves due keys, then adds
 * `key`. KCR_OK, KCR_ERR_SHUTDOWN or KCR_ERR_NOMEM. */
kcr_err kcr__wq_add_locked(struct kcr_workqueue *q, const char *key, size_t len, uint64_t hash,
                           int64_t now, bool retry, int prio, void *payload, const char *fn);

/* The error of an add refused because the queue shuts down, named after the
 * public function `fn` (sets kcr_last_error()). */
kcr_err kcr__wq_fail_shutdown(const struct kcr_workqueue *q, const char *fn, const char *key);

/* A delayed add with a priority and a payload (taken over), reporting
 * errors as `fn`. */
kcr_err kcr__wq_add_after(struct kcr_workqueue *q, const char *key, int64_t delay_ns, int prio,
                          void *payload, const char *fn);

/* The node for key (creating it). NULL on allocation failure. */
struct kcr__wq_item *kcr__wq_lookup_or_create(struct kcr_workqueue *q, const char *key,
                                              size_t len, uint64_t hash);

/* Frees `it` if it is in no state any more. */
void kcr__wq_release_if_idle(struct kcr_workqueue *q, struct kcr__wq_item *it);

/* Merges `payload` (taken over) into `it`'s (lock held). */
void kcr__wq_merge_payload(struct kcr_workqueue *q, struct kcr__wq_item *it, void *payload);

/* Frees a payload the queue drops (NULL: nothing). */
void kcr__wq_drop_payload(struct kcr_workqueue *q, void *payload);

/* delaying.c ------------------------------------------------------------ */

/* The time delayed keys' deadlines are kept in, given the real monotonic
 * `now` (0: not read yet): the queue's clock in ns when it has one. */
int64_t kcr__wq_due_clock(struct kcr_workqueue *q, int64_t now);

/* With a clock, a getter keeping time looks again this often (real time):
 * it cannot sleep until a virtual deadline. */
#define KCR__WQ_CLOCK_POLL_NS (10 * KCR_NS_PER_MS)

/* Moves every item whose deadline is <= now from the heap to the FIFO.
 * Returns the number pushed to the FIFO (the caller notifies). */
int64_t kcr__wq_promote(struct kcr_workqueue *q, int64_t now);

/* Applies an add_after of `key` with a deadline in the future (lock held):
 * counts the retry and schedules the key. Sets *earliest when its deadline
 * is now the heap's first. KCR_OK or KCR_ERR_NOMEM. */
kcr_err kcr__wq_apply_add_after(struct kcr_workqueue *q, const char *key, size_t len,
                                uint64_t hash, int64_t ready_at, int prio, bool *earliest);

/* Stops `it` waiting for its deadline (its heap entry goes stale). */
void kcr__wq_heap_remove(struct kcr_workqueue *q, struct kcr__wq_item *it);

/* Sweeps stale heap entries once they outnumber valid ones; may free idle
 * nodes, so callers hold no node pointer across it. */
void kcr__wq_heap_trim(struct kcr_workqueue *q);

/* Drops every item of the heap (shutdown). */
void kcr__wq_heap_clear(struct kcr_workqueue *q);

/* priority.c ------------------------------------------------------------ */

/* Reads the clock for an add with `prio` (not NORMAL, or once priorities
 * are in use) and records when priorities came into use. */
int64_t kcr__wq_prio_stamp(struct kcr_workqueue *q, int prio);

/* The time to stamp an add with (0: none): for time tracking, and once
 * priorities are in use for aging. Inline: a NORMAL-only queue without
 * metrics reads no clock and calls nothing here. */
static inline int64_t kcr__wq_add_stamp(struct kcr_workqueue *q, int prio)
{
    if (prio == KCR_WQ_PRIORITY_NORMAL &&
        !atomic_load_explicit(&q->prio_since, memory_order_relaxed))
        return q->timing ? kcr__now_ns() : 0;
    return kcr__wq_prio_stamp(q, prio);
}

/* A dirty item added again with a higher priority takes it: a queued one
 * moves to the end of the higher line (lock held). NORMAL-only queues never
 * call it. */
void kcr__wq_raise_prio(struct kcr_workqueue *q, struct kcr__wq_item *it, int prio);

/* kcr__wq_make_ready of a clean item in priority mode, or with a priority
 * other than NORMAL (which switches the queue to priority mode), so the
 * NORMAL path stays short. Returns like kcr__wq_make_ready. */
int kcr__wq_make_ready_prio(struct kcr_workqueue *q, struct kcr__wq_item *it, int64_t now,
                            int prio);

/* Switches the queue to priority mode (lock held): the FIFO becomes the one
 * line of NORMAL. False on allocation failure (the queue stays FIFO). */
bool kcr__wq_prio_enable(struct kcr_workqueue *q);

/* Counts `it` dirty at it->prio (priority mode): creates its level. */
void kcr__wq_prio_dirty(struct kcr_workqueue *q, struct kcr__wq_item *it);

/* Uncounts `it` (no longer dirty, already out of the FIFO). */
void kcr__wq_prio_clean(struct kcr_workqueue *q, struct kcr__wq_item *it);

/* Links `it` at the end of its priority's line (priority mode), ready since
 * `now` (0: read the clock). */
void kcr__wq_prio_push(struct kcr_workqueue *q, struct kcr__wq_item *it, int64_t now);

/* Updates its line before `it` is unlinked from the FIFO (priority mode). */
void kcr__wq_prio_unlink(struct kcr_workqueue *q, struct kcr__wq_item *it);

/* The item get hands out next at `now` (priority mode, FIFO not empty): the
 * one ready longest among those ready for max_wait_ns, else the FIFO's head. */
struct kcr__wq_item *kcr__wq_prio_next(struct kcr_workqueue *q, int64_t now);

/* fence.c --------------------------------------------------------------- */

/* True if the process can use membarrier(2) (probed once, thread-safe):
 * then adders publish with a release store and a compiler barrier (plus a
 * full fence while `adders_fence` is set), and a getter calls
 * kcr__wq_sleep_fence() between announcing that it sleeps and reading the
 * ring. False: adders publish with a seq_cst exchange. */
bool kcr__wq_light_fences(void);

/* The getter's half of the handshake (lock held, after raising `sleepers`
 * or clearing `standby_on`, before reading the ring). With light fences:
 * a membarrier(2), unless this thread's recent sleeps were all long (sparse
 * work, yield.c); then adders fence instead (`adders_fence`), which costs
 * an add a few nanoseconds and saves a sleep an inter-processor interrupt. */
void kcr__wq_sleep_fence(struct kcr_workqueue *q);

/* yield.c --------------------------------------------------------------- */

/* True if the calling thread's waits may yield freely at `now`: none of its
 * yields came back late recently (the CPU is not contended). Else getters
 * wait awake only a few rounds and adders do not wait for ring space. */
bool kcr__wq_may_yield(int64_t now);

/* sched_yield(), `before` being the time just before it. Returns the time
 * after it, or 0 if it came back late (another process ran: the CPU is
 * contended); then this thread's waits stay short for a while
 * (kcr__wq_may_yield). */
int64_t kcr__wq_yield(int64_t before);

/* A wait's yields all came back in time: the next late one starts the
 * shortest calm period again. */
void kcr__wq_yields_on_time(void);

/* The calling thread's waits stay short until `until` (tests run those
 * paths with INT64_MAX). */
void kcr__wq_calm_until(int64_t until);

/* False while the calling thread's recent sleeps were all long (work comes
 * milliseconds apart): its getters then sleep without waiting awake first. */
bool kcr__wq_spin_pays(void);

/* The calling thread slept ns waiting for work (woken or timed out). */
void kcr__wq_slept(int64_t ns);

/* metrics.c ------------------------------------------------------------- */

void kcr__wq_m_added(struct kcr_workqueue *q, struct kcr__wq_item *it, int64_t now);
void kcr__wq_m_got(struct kcr_workqueue *q, struct kcr__wq_item *it, int64_t now);
void kcr__wq_m_done(struct kcr_workqueue *q, struct kcr__wq_item *it, int64_t now);
void kcr__wq_m_depth(struct kcr_workqueue *q);
/* Counts an add_after (retries_total and the callback). */
void kcr__wq_m_retry(struct kcr_workqueue *q);
/* Refreshes the processing gauges if due (or always when force). */
void kcr__wq_m_tick(struct kcr_workqueue *q, int64_t now, bool force);

#endif
