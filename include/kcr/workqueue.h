/* Workqueue: a de-duplicating work queue with delays, rate limiting and
 * metrics, for controllers that reconcile keys ("namespace/name").
 *
 * One kcr_workqueue is everything client-go splits into Interface,
 * DelayingInterface and RateLimitingInterface:
 *   - add/get/done with dedup: a key is waiting at most once, and is never
 *     handed to two workers at once (an add while it is processing is
 *     remembered and the key comes back after done);
 *   - one add verb: kcr_workqueue_add(q, key, NULL) or with options for a
 *     delay (on a min-heap, with no thread of its own: blocked getters sleep
 *     until the nearest deadline), a priority and a per-key payload;
 *   - add_rate_limited/forget/num_requeues through a kcr_rate_limiter;
 *   - what client-go lacks: remove, get with a timeout, wake (unblock getters
 *     without shutting down), and done() of a key not handed out reports
 *     KCR_ERR_STATE instead of corrupting the queue.
 *
 * Keys are NUL-terminated strings; the queue copies them.
 *
 * Thread-safety: every kcr_workqueue_* and kcr_rate_limiter_* function may be
 * called from any thread at any time, except the _free functions, which need
 * every other call on that object to have returned.
 *
 * Durations are int64_t milliseconds (`*_ms`), like everywhere in kcr; the
 * queue keeps deadlines in nanoseconds inside, so a delay of 1 ms is 1 ms
 * from the call, not rounded to a tick. Metrics callbacks get double
 * seconds, Prometheus' unit. */
#ifndef KCR_WORKQUEUE_H
#define KCR_WORKQUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcr/error.h"
#include "kcr/export.h"
#include "kcr/time.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Rate limiters                                                              */

/* Decides how long a key waits before its next retry. Built-ins below; write
 * your own with kcr_rate_limiter_new. Thread-safe: built-ins lock internally,
 * and custom ones must be safe to call from several threads at once. */
typedef struct kcr_rate_limiter kcr_rate_limiter;

/* Operations of a custom limiter. `user_data` is the pointer given to
 * kcr_rate_limiter_new; `key` is borrowed for the call. Called on the thread
 * that called the kcr_rate_limiter_* / kcr_workqueue_* function, with no kcr
 * lock held; they must be thread-safe. */
typedef struct kcr_rate_limiter_ops {
    /* Delay in ms before `key` may be retried (<= 0: now), counting this call
     * as one more failure. `now_ms` is CLOCK_MONOTONIC time in ms (or a
     * test's clock, see kcr_rate_limiter_when_at). Required. */
    int64_t (*when)(const char *key, int64_t now_ms, void *user_data);
    /* Stop tracking `key` (it succeeded). NULL: nothing to forget. */
    void (*forget)(const char *key, void *user_data);
    /* Failures recorded for `key` since its last forget. NULL: always 0. */
    int (*num_requeues)(const char *key, void *user_data);
    /* Releases `user_data` when the limiter is freed. NULL: nothing to free. */
    void (*free)(void *user_data);
} kcr_rate_limiter_ops;

/* Every constructor below sets *out (NULL on failure) to a limiter the
 * caller owns: free it with kcr_rate_limiter_free, or hand it to a queue
 * (options.limiter), a controller or to max_of/with_max_wait, which take
 * ownership. On failure they return KCR_ERR_INVALID (bad argument, NULL out)
 * or KCR_ERR_NOMEM, and kcr_last_error() says why. Thread-safe. */

/* A limiter driven by `ops` (copied) and `user_data` (owned by the limiter
 * from now on: ops->free(user_data) runs at kcr_rate_limiter_free, or right
 * away if this call fails). */
KCR_API kcr_err kcr_rate_limiter_new(size_t ops_size, const kcr_rate_limiter_ops *ops,
                                     void *user_data, kcr_rate_limiter **out);
#define kcr_rate_limiter_new(...) (kcr_rate_limiter_new)(sizeof(kcr_rate_limiter_ops), __VA_ARGS__)

/* Options of kcr_rate_limiter_exponential_new; zero (or NULL) means the
 * default. */
typedef struct kcr_rate_limiter_exponential_options {
    int64_t base_delay_ms; /* delay after the first failure; 0: 5 ms */
    int64_t max_delay_ms;  /* cap; 0: 1000 s */
} kcr_rate_limiter_exponential_options;

/* Per-key exponential backoff: base_delay_ms * 2^failures, capped at
 * max_delay_ms (client-go's ItemExponentialFailureRateLimiter). `opts` is
 * borrowed for the call; negative delays are KCR_ERR_INVALID. */
KCR_API kcr_err kcr_rate_limiter_exponential_new(size_t opts_size,
                                                 const kcr_rate_limiter_exponential_options *opts,
                                                 kcr_rate_limiter **out);
#define kcr_rate_limiter_exponential_new(...) (kcr_rate_limiter_exponential_new)(sizeof(kcr_rate_limiter_exponential_options), __VA_ARGS__)

/* Options of kcr_rate_limiter_bucket_new; zero (or NULL) means the
 * default. */
typedef struct kcr_rate_limiter_bucket_options {
    double qps; /* tokens added per second; 0: 10 */
    int burst;  /* bucket size (immediate retries); 0: 100 */
} kcr_rate_limiter_bucket_options;

/* Token bucket shared by all keys: `burst` immediate retries, then one every
 * 1/qps seconds (tokens refill at qps up to burst); delays are rounded up to
 * whole ms. num_requeues is always 0 and forget does nothing. `opts` is
 * borrowed for the call; a negative or NaN rate or burst is
 * KCR_ERR_INVALID. */
KCR_API kcr_err kcr_rate_limiter_bucket_new(size_t opts_size,
                                            const kcr_rate_limiter_bucket_options *opts,
                                            kcr_rate_limiter **out);
#define kcr_rate_limiter_bucket_new(...) (kcr_rate_limiter_bucket_new)(sizeof(kcr_rate_limiter_bucket_options), __VA_ARGS__)

/* Per key: the first `max_fast_attempts` retries wait fast_delay_ms, later
 * ones slow_delay_ms (client-go's ItemFastSlowRateLimiter). No defaults, so
 * no options: every argument is used as given; negatives are
 * KCR_ERR_INVALID. */
KCR_API kcr_err kcr_rate_limiter_fast_slow_new(int64_t fast_delay_ms, int64_t slow_delay_ms,
                                               int max_fast_attempts, kcr_rate_limiter **out);

/* The longest delay of `n` limiters (each one counts the failure);
 * num_requeues is the largest of theirs; forget goes to all. Takes ownership
 * of the n limiters in every case: on failure (e.g. a NULL element) they are
 * freed. */
KCR_API kcr_err kcr_rate_limiter_max_of_new(kcr_rate_limiter *const *limiters, size_t n,
                                            kcr_rate_limiter **out);

/* `inner`'s delay capped at max_wait_ms (>= 0). Takes ownership of `inner`
 * in every case (freed on failure). */
KCR_API kcr_err kcr_rate_limiter_with_max_wait_new(kcr_rate_limiter *inner, int64_t max_wait_ms,
                                                   kcr_rate_limiter **out);

/* client-go's default controller limiter: max_of(exponential 5 ms..1000 s,
 * bucket 10 qps / burst 100). */
KCR_API kcr_err kcr_rate_limiter_default_new(kcr_rate_limiter **out);

/* Delay in ms for the next retry of `key` (borrowed), counting one failure;
 * uses the monotonic clock. A built-in's delay is rounded up to whole ms
 * (a positive delay never becomes 0). Thread-safe. */
KCR_API int64_t kcr_rate_limiter_when(kcr_rate_limiter *rl, const char *key);

/* Same as kcr_rate_limiter_when with the caller's notion of now (ms), so
 * time can be simulated in tests. Thread-safe. */
KCR_API int64_t kcr_rate_limiter_when_at(kcr_rate_limiter *rl, const char *key, int64_t now_ms);

/* Resets `key`'s failure count (`key` borrowed). Thread-safe. */
KCR_API void kcr_rate_limiter_forget(kcr_rate_limiter *rl, const char *key);

/* Failures counted for `key` (borrowed) since its last forget.
 * Thread-safe. */
KCR_API int kcr_rate_limiter_num_requeues(kcr_rate_limiter *rl, const char *key);

/* Frees the limiter (and what it owns). NULL is a no-op. Not concurrently
 * with other calls on it; never on a limiter owned by a queue or a combinator. */
KCR_API void kcr_rate_limiter_free(kcr_rate_limiter *rl);

/* ------------------------------------------------------------------------ */
/* Metrics                                                                    */

/* Prometheus names of the workqueue metric family; every series carries the
 * label `name` = the queue's name. */
#define KCR_WQ_METRIC_DEPTH "workqueue_depth"
#define KCR_WQ_METRIC_ADDS "workqueue_adds_total"
#define KCR_WQ_METRIC_QUEUE_DURATION "workqueue_queue_duration_seconds"
#define KCR_WQ_METRIC_WORK_DURATION "workqueue_work_duration_seconds"
#define KCR_WQ_METRIC_UNFINISHED_WORK "workqueue_unfinished_work_seconds"
#define KCR_WQ_METRIC_LONGEST_RUNNING "workqueue_longest_running_processor_seconds"
#define KCR_WQ_METRIC_RETRIES "workqueue_retries_total"

/* Where a queue reports its metrics. Every callback may be NULL (skipped).
 * `name` is the queue's name (borrowed for the call). Callbacks run on the
 * thread calling into the queue, WITH the queue's lock held (so values arrive
 * in order): keep them short (an atomic add, a histogram observe), and never
 * call back into the same queue from them. */
typedef struct kcr_workqueue_metrics {
    /* workqueue_depth (gauge): keys waiting to be handed out, including keys
     * re-added while processing. Called with the new value on each change. */
    void (*depth)(const char *name, int64_t depth, void *user_data);
    /* workqueue_adds_total (counter): +1 per add that made a key waiting. */
    void (*adds)(const char *name, void *user_data);
    /* workqueue_queue_duration_seconds (histogram): from add to get. */
    void (*queue_duration)(const char *name, double seconds, void *user_data);
    /* workqueue_work_duration_seconds (histogram): from get to done. */
    void (*work_duration)(const char *name, double seconds, void *user_data);
    /* workqueue_unfinished_work_seconds (gauge): sum of the ages of the keys
     * being processed. Set every update_period_ms, see below. */
    void (*unfinished_work)(const char *name, double seconds, void *user_data);
    /* workqueue_longest_running_processor_seconds (gauge): age of the oldest
     * key being processed. Set together with unfinished_work. */
    void (*longest_running)(const char *name, double seconds, void *user_data);
    /* workqueue_retries_total (counter): +1 per delayed add (delay_ms > 0)/add_rate_limited. */
    void (*retries)(const char *name, void *user_data);
    /* workqueue_depth{priority} (gauge): keys waiting at one priority, called
     * with the new value on each change, only once a priority other than
     * KCR_WQ_PRIORITY_NORMAL has been used (before that, depth tells it all). */
    void (*depth_priority)(const char *name, int priority, int64_t depth, void *user_data);
    /* Passed to every callback (last); owned by the caller, must outlive
     * the queue. */
    void *user_data;
    /* How often the two processing gauges are refreshed (0: 500 ms). There is
     * no background thread: a refresh happens inside queue calls, inside a
     * get blocked on an empty queue, and on kcr_workqueue_metrics_update. */
    int64_t update_period_ms;
    /* Zero. Fields added after 1.0 take these bytes: the struct is reached through options,
     * so its size never changes (docs/abi.md). Not zero: KCR_ERR_INVALID. */
    uint64_t reserved[4];
} kcr_workqueue_metrics;

/* A snapshot of one queue (kcr_workqueue_get_stats). The duration fields
 * are only tracked when the queue has metrics (options.metrics non-NULL or
 * options.track_time); otherwise they are 0. Sums are kept in ns inside and
 * rounded down to ms here. */
typedef struct kcr_workqueue_stats {
    int64_t depth;      /* workqueue_depth */
    int64_t queued;     /* keys ready to be handed out (kcr_workqueue_len) */
    int64_t processing; /* keys handed out and not yet done */
    int64_t waiting;    /* keys waiting for a delayed add's deadline */
    uint64_t adds_total;
    uint64_t retries_total;
    int64_t unfinished_work_ms;           /* sum of the processing keys' ages */
    int64_t longest_running_processor_ms; /* age of the oldest processing key */
    int64_t queue_duration_sum_ms;        /* sum and count of add -> get */
    uint64_t queue_duration_count;
    int64_t work_duration_sum_ms; /* sum and count of get -> done */
    uint64_t work_duration_count;
} kcr_workqueue_stats;

/* ------------------------------------------------------------------------ */
/* The queue                                                                  */

/* A workqueue. Thread-safe: see the top of this file. */
typedef struct kcr_workqueue kcr_workqueue;

/* A per-key payload: whatever the user keeps about a key (a controller keeps
 * its pending reasons and read-your-writes fences there), stored in the
 * key's item, so an add updates one table under one lock. The queue never
 * looks inside. A key's item stays while it holds a payload, even when the
 * key is neither waiting nor processing. Both callbacks run with the queue's
 * lock held: keep them short and never call into the queue from them. */
typedef struct kcr_workqueue_payload_ops {
    /* Combines `incoming` into `held` (either may be NULL, not both) and
     * returns the key's new payload. Takes ownership of both: free what is
     * not returned. Required. */
    void *(*merge)(void *held, void *incoming, void *user_data);
    /* Frees a payload the queue drops (kcr_workqueue_remove, kcr_workqueue_free,
     * a failed add). Required. */
    void (*free)(void *payload, void *user_data);
    /* Passed to both (last); owned by the caller, must outlive the queue. */
    void *user_data;
    /* Zero. Fields added after 1.0 take these bytes: the struct is reached
     * through options, so its size never changes (docs/abi.md). Not zero:
     * KCR_ERR_INVALID. */
    uint64_t reserved[4];
} kcr_workqueue_payload_ops;

/* Options for kcr_workqueue_new; zero (or a NULL opts) means every default. */
typedef struct kcr_workqueue_options {
    /* Queue name for metrics' `name` label and log lines; copied.
     * NULL: "" (still reported if `metrics` is set). */
    const char *name;
    /* Metrics callbacks; the struct is copied. NULL: no metrics, and then the
     * queue never reads the clock for them. */
    const kcr_workqueue_metrics *metrics;
    /* Track times for kcr_workqueue_get_stats even without callbacks.
     * Default false. */
    bool track_time;
    /* Limiter behind add_rate_limited/forget/num_requeues. The queue takes
     * ownership (also when kcr_workqueue_new fails). NULL: a
     * kcr_rate_limiter_default_new() one. */
    kcr_rate_limiter *limiter;
    /* Expected number of distinct keys, to size the table (0: 64). */
    size_t capacity_hint;
    /* Aging of priorities (kcr_workqueue_add_options.priority): a key waiting
     * this long is served before younger keys of any priority. 0: 10 s;
     * KCR_DURATION_INFINITE: no aging (strict priority). */
    int64_t priority_max_wait_ms;
    /* Per-key payloads (copied); NULL: adds carry none. */
    const kcr_workqueue_payload_ops *payload;
    /* The time that add delays, the limiter's delays and get's timeouts for
     * delayed keys run on (borrowed for the queue's life). NULL: the real
     * clock. With a virtual clock, a delayed key is due once that clock
     * reaches its deadline; getters blocked on it look again at least every
     * 10 ms of real time (or at once after kcr_workqueue_wake). */
    const kcr_clock *clock;
} kcr_workqueue_options;

/* Creates a queue the caller owns (kcr_workqueue_free) into *out, set only
 * on KCR_OK. `opts` is borrowed for the call (NULL: every default). Returns
 * KCR_OK, KCR_ERR_NOMEM or KCR_ERR_INVALID (NULL out); kcr_last_error()
 * says why. Thread-safe. */
KCR_API kcr_err kcr_workqueue_new(size_t opts_size, const kcr_workqueue_options *opts,
                                  kcr_workqueue **out);
#define kcr_workqueue_new(...) (kcr_workqueue_new)(sizeof(kcr_workqueue_options), __VA_ARGS__)

/* Frees the queue, its keys and its limiter (no shutdown needed first).
 * NULL is a no-op. Every other call on the queue must have returned (join
 * your workers first); key pointers from get become invalid. */
KCR_API void kcr_workqueue_free(kcr_workqueue *q);

/* Priorities for kcr_workqueue_add_options.priority: a higher one is handed
 * out first. KCR_WQ_PRIORITY_LOW is what controllers use for the initial list
 * and resyncs (controller-runtime's priority queue uses -100 too). */
#define KCR_WQ_PRIORITY_NORMAL 0
#define KCR_WQ_PRIORITY_LOW (-100)

/* How kcr_workqueue_add adds a key. A NULL opts, or all zero, means: now, at
 * KCR_WQ_PRIORITY_NORMAL, no payload. */
typedef struct kcr_workqueue_add_options {
    /* > 0: the key becomes ready this many ms from the call (client-go's
     * AddAfter): if it already waits for a deadline, the EARLIER one is kept;
     * keys become ready in deadline order (ties in call order); counts a
     * retry in metrics. <= 0: ready now. */
    int64_t delay_ms;
    /* Keys are handed out highest priority first, in add order within a
     * priority. A key already waiting keeps the higher of its two priorities
     * (raised, it goes to the end of the higher priority's keys); one being
     * processed comes back after done with the highest priority it was
     * re-added with; a delayed key is queued with it once due. Aging: a key
     * that has waited options.priority_max_wait_ms is handed out before any
     * key that has not, so a steady stream of high-priority keys never
     * starves a low one; of those that have, the one waiting longest goes
     * first (a tie: the higher priority). A key waits from its add (re-added
     * while processing: from done; delayed: from when it fell due; raised:
     * from the raise). 0 is KCR_WQ_PRIORITY_NORMAL. */
    int priority;
    /* Merged into the key's payload at once (see kcr_workqueue_payload_ops),
     * also for a delayed add; the queue owns it from the call on, also when
     * the add fails (then it is freed), except on a queue without payload
     * ops (KCR_ERR_INVALID: it stays the caller's). NULL: none. */
    void *payload;
} kcr_workqueue_add_options;

/* Marks `key` (copied) as needing processing, as `opts` (borrowed; NULL: now,
 * default priority) says. No-op if it is already waiting; if it is being
 * processed it comes back after done. Returns KCR_OK, KCR_ERR_SHUTDOWN
 * (dropped: the queue is shutting down), KCR_ERR_NOMEM or KCR_ERR_INVALID
 * (NULL key, or a payload on a queue without payload ops). Thread-safe.
 *
 *   kcr_workqueue_add(q, key, NULL);
 *   kcr_workqueue_add(q, key, &(kcr_workqueue_add_options){.delay_ms = 500});
 */
KCR_API kcr_err kcr_workqueue_add(size_t opts_size, kcr_workqueue *q, const char *key,
                                  const kcr_workqueue_add_options *opts);
#define kcr_workqueue_add(...) (kcr_workqueue_add)(sizeof(kcr_workqueue_add_options), __VA_ARGS__)

/* kcr_workqueue_add with delay_ms = the limiter's when(key) at the queue's
 * clock's time. Returns like kcr_workqueue_add. Thread-safe; the limiter
 * runs without the queue's lock. */
KCR_API kcr_err kcr_workqueue_add_rate_limited(kcr_workqueue *q, const char *key);

/* The limiter's forget(key): call when `key` succeeded. Does not touch the
 * queue contents. Thread-safe. */
KCR_API void kcr_workqueue_forget(kcr_workqueue *q, const char *key);

/* The limiter's num_requeues(key). Thread-safe. */
KCR_API int kcr_workqueue_num_requeues(kcr_workqueue *q, const char *key);

/* Drops every pending occurrence of `key`: ready in the queue, waiting for a
 * delayed add's deadline, or re-added while processing, and its payload
 * unless it is being processed. A key being processed
 * stays handed out (its done is still expected). Returns KCR_OK if something
 * was dropped, KCR_ERR_NOT_FOUND otherwise, KCR_ERR_INVALID for NULL.
 * Thread-safe. */
KCR_API kcr_err kcr_workqueue_remove(kcr_workqueue *q, const char *key);

/* Number of keys ready to be handed out now (informational only).
 * Thread-safe. */
KCR_API size_t kcr_workqueue_len(kcr_workqueue *q);

/* Blocks until a key is ready and hands it out: *key points to the queue's
 * copy, valid until kcr_workqueue_done for it returns (do not free it).
 * After shutdown it still hands out the keys that were ready, then returns
 * KCR_ERR_SHUTDOWN. Returns KCR_ERR_CANCELED if kcr_workqueue_wake was called
 * while it was blocked. While other getters hold keys, a getter takes a key
 * only once it has waited 200-300 us and they are not turning keys over
 * every few microseconds (one busy worker beats two sharing the lock; see
 * docs/workqueue.md). Thread-safe; any number of getters. */
KCR_API kcr_err kcr_workqueue_get(kcr_workqueue *q, const char **key);

/* kcr_workqueue_get that gives up after timeout_ms with KCR_ERR_TIMEOUT
 * (0: only takes a key that is ready now; KCR_DURATION_INFINITE: no limit;
 * another negative value: KCR_ERR_INVALID). The key is owned
 * by the queue, valid until done. Thread-safe. */
KCR_API kcr_err kcr_workqueue_get_timeout(kcr_workqueue *q, int64_t timeout_ms, const char **key);

/* Finishes processing of `key` (borrowed; it may be the pointer get returned).
 * If the key was added while processing, it is queued again. Returns KCR_OK,
 * or KCR_ERR_STATE (queue unchanged) if the key is not being processed.
 * Thread-safe. */
KCR_API kcr_err kcr_workqueue_done(kcr_workqueue *q, const char *key);

/* Moves the payload of `key` (borrowed) into *payload (the caller owns it
 * from now on; NULL when it has none) and leaves the key without one.
 * Usually called by the worker right after get. KCR_OK, or KCR_ERR_INVALID
 * (NULL argument). Thread-safe. */
KCR_API kcr_err kcr_workqueue_take_payload(kcr_workqueue *q, const char *key, void **payload);

/* Merges `payload` (owned by the queue from the call on, also on failure)
 * into `key`'s payload WITHOUT making the key ready: state to keep until the
 * key's next get (a worker puts back what outlives one reconcile). The key's
 * item is kept while it holds a payload. KCR_OK, KCR_ERR_NOMEM or
 * KCR_ERR_INVALID (NULL key, or a queue without payload ops). Thread-safe. */
KCR_API kcr_err kcr_workqueue_put_payload(kcr_workqueue *q, const char *key, void *payload);

/* Makes every get blocked at this moment return KCR_ERR_CANCELED (getters
 * arriving later are not affected). The queue keeps working. Thread-safe. */
KCR_API void kcr_workqueue_wake(kcr_workqueue *q);

/* Stops accepting keys: adds are dropped from now on, keys waiting
 * for a deadline are dropped, getters hand out what is ready, then get
 * KCR_ERR_SHUTDOWN. Returns at once; idempotent. Thread-safe. */
KCR_API void kcr_workqueue_shutdown(kcr_workqueue *q);

/* kcr_workqueue_shutdown, then waits until no key is being processed (every
 * handed-out key got its done). A concurrent kcr_workqueue_shutdown stops the
 * wait. Do not call it from a worker that holds a key. Thread-safe. */
KCR_API void kcr_workqueue_shutdown_with_drain(kcr_workqueue *q);

/* True once shutdown has started. Thread-safe. */
KCR_API bool kcr_workqueue_shutting_down(kcr_workqueue *q);

/* Fills *out (owned by the caller) with a snapshot of the queue (see
 * kcr_workqueue_stats). Thread-safe. */
KCR_API void kcr_workqueue_get_stats(size_t out_size, kcr_workqueue *q, kcr_workqueue_stats *out);
#define kcr_workqueue_get_stats(...) (kcr_workqueue_get_stats)(sizeof(kcr_workqueue_stats), __VA_ARGS__)

/* Refreshes the unfinished-work and longest-running gauges through the
 * metrics callbacks now (e.g. right before a scrape). Thread-safe. */
KCR_API void kcr_workqueue_metrics_update(kcr_workqueue *q);

/* The queue's name (never NULL, owned by the queue), valid until
 * kcr_workqueue_free. Thread-safe. */
KCR_API const char *kcr_workqueue_name(const kcr_workqueue *q);

#ifdef __cplusplus
}
#endif

#endif
