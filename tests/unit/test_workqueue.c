/* Workqueue: dedup, processing/dirty, shutdown and drain, delays, remove,
 * get timeout, wake, done of an unknown key, rate-limited add. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "kcr/kcr.h"
#include "workqueue/queue.h"
#include "helpers/bounded.h"

static kcr_workqueue *new_queue(void)
{
    kcr_workqueue *q = NULL;
    cr_assert_eq(kcr_workqueue_new(NULL, &q), KCR_OK);
    cr_assert_not_null(q);
    return q;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static double ms_since(int64_t start)
{
    return (double)(kcr__now_ns() - start) / 1e6;
}

/* Takes the next key, which must be `want`, and calls done on it. */
static void expect_next(kcr_workqueue *q, const char *want)
{
    const char *key = NULL;
    cr_assert_eq(kcr_workqueue_get_timeout(q, 0, &key), KCR_OK, "expected %s", want);
    cr_assert_str_eq(key, want);
    cr_assert_eq(kcr_workqueue_done(q, key), KCR_OK);
}

Test(workqueue, fifo_order_and_add_while_queued_is_noop)
{
    kcr_workqueue *q = new_queue();
    cr_assert_eq(kcr_workqueue_add(q, "a", NULL), KCR_OK);
    cr_assert_eq(kcr_workqueue_add(q, "b", NULL), KCR_OK);
    cr_assert_eq(kcr_workqueue_add(q, "a", NULL), KCR_OK);
    cr_assert_eq(kcr_workqueue_add(q, "c", NULL), KCR_OK);
    cr_assert_eq(kcr_workqueue_len(q), 3);
    expect_next(q, "a");
    expect_next(q, "b");
    expect_next(q, "c");
    cr_assert_eq(kcr_workqueue_len(q), 0);
    kcr_workqueue_stats st;
    kcr_workqueue_get_stats(q, &st);
    cr_assert_eq(st.adds_total, 3);
    cr_assert_eq(st.depth, 0);
    kcr_workqueue_free(q);
}

Test(workqueue, add_while_processing_comes_back_after_done)
{
    kcr_workqueue *q = new_queue();
    const char *key;
    kcr_workqueue_add(q, "a", NULL);
    cr_assert_eq(test_wq_get(q, &key), KCR_OK);
    cr_assert_str_eq(key, "a");
    /* Not handed out twice: it is dirty but not queued while processing. */
    cr_assert_eq(kcr_workqueue_add(q, "a", NULL), KCR_OK);
    cr_assert_eq(kcr_workqueue_add(q, "a", NULL), KCR_OK);
    cr_assert_eq(kcr_workqueue_len(q), 0);
    cr_assert_eq(kcr_workqueue_get_timeout(q, 0, &key), KCR_ERR_TIMEOUT);
    kcr_workqueue_stats st;
    kcr_workqueue_get_stats(q, &st);
    cr_assert_eq(st.depth, 1);
    cr_assert_eq(st.processing, 1);
    cr_assert_eq(kcr_workqueue_done(q, "a"), KCR_OK);
    cr_assert_eq(kcr_workqueue_len(q), 1);
    expect_next(q, "a");
    cr_assert_eq(kcr_workqueue_len(q), 0);
    kcr_workqueue_free(q);
}

Test(workqueue, done_of_key_not_handed_out_is_state_error)
{
    kcr_workqueue *q = new_queue();
    cr_assert_eq(kcr_workqueue_done(q, "never"), KCR_ERR_STATE);
    cr_assert_str_not_empty(kcr_last_error());
    kcr_workqueue_add(q, "queued", NULL);
    cr_assert_eq(kcr_workqueue_done(q, "queued"), KCR_ERR_STATE, "queued is not processing");
    cr_assert_eq(kcr_workqueue_len(q), 1, "a bad done leaves the queue as it was");
    const char *key;
    cr_assert_eq(test_wq_get(q, &key), KCR_OK);
    cr_assert_eq(q->handed_out.count, 1);
    char copy[16];
    snprintf(copy, sizeof copy, "%s", key);
    cr_assert_eq(kcr_workqueue_done(q, copy), KCR_OK, "done with a copy of the key");
    cr_assert_eq(q->handed_out.count, 0, "a done by copy leaves the fast path's set too");
    cr_assert_eq(kcr_workqueue_done(q, "queued"), KCR_ERR_STATE, "second done");
    cr_assert_eq(kcr_workqueue_done(q, NULL), KCR_ERR_INVALID);
    kcr_workqueue_add(q, "queued", NULL);
    expect_next(q, "queued"); /* done with the pointer get returned */
    cr_assert_eq(q->handed_out.count, 0);
    kcr_workqueue_free(q);
}

Test(workqueue, after_shutdown_get_drains_then_reports_shutdown)
{
    kcr_workqueue *q = new_queue();
    kcr_workqueue_add(q, "a", NULL);
    kcr_workqueue_add(q, "b", NULL);
    cr_assert_not(kcr_workqueue_shutting_down(q));
    kcr_workqueue_shutdown(q);
    cr_assert(kcr_workqueue_shutting_down(q));
    cr_assert_eq(kcr_workqueue_add(q, "c", NULL), KCR_ERR_SHUTDOWN);
    cr_assert_eq(kcr_workqueue_add(q, "d",
                                   &(kcr_workqueue_add_options){.delay_ms = 0}), KCR_ERR_SHUTDOWN);
    const char *key;
    cr_assert_eq(test_wq_get(q, &key), KCR_OK);
    cr_assert_str_eq(key, "a");
    cr_assert_eq(test_wq_get(q, &key), KCR_OK);
    cr_assert_str_eq(key, "b");
    cr_assert_eq(test_wq_get(q, &key), KCR_ERR_SHUTDOWN);
    cr_assert_null(key);
    cr_assert_eq(kcr_workqueue_done(q, "a"), KCR_OK);
    cr_assert_eq(kcr_workqueue_done(q, "b"), KCR_OK);
    kcr_workqueue_shutdown(q); /* idempotent */
    kcr_workqueue_free(q);
}

/* Waits until `n` getters are blocked (or about to block) in the queue. */
static void wait_for_sleepers(kcr_workqueue *q, int n)
{
    int64_t t0 = kcr__now_ns();
    while (atomic_load(&q->sleepers) < n && ms_since(t0) < 10000)
        sleep_ms(1);
    cr_assert_eq(atomic_load(&q->sleepers), n, "%d of %d getters blocked", atomic_load(&q->sleepers),
                 n);
}

/* Waits until the drainer thread has begun shutdown_with_drain (it sets
 * shutting down and starts waiting under one hold of the lock). */
static void wait_for_shutdown(kcr_workqueue *q)
{
    int64_t t0 = kcr__now_ns();
    while (!kcr_workqueue_shutting_down(q) && ms_since(t0) < 10000)
        sleep_ms(1);
    cr_assert(kcr_workqueue_shutting_down(q), "shutdown_with_drain never started");
}

struct getter {
    kcr_workqueue *q;
    int64_t timeout;
    kcr_err err;
    char key[64];
    atomic_int finished;
};

static void *getter_main(void *arg)
{
    struct getter *g = arg;
    const char *key = NULL;
    g->err = kcr_workqueue_get_timeout(g->q, g->timeout, &key);
    if (key)
        snprintf(g->key, sizeof g->key, "%s", key);
    atomic_store(&g->finished, 1);
    return NULL;
}

static void start_getter(pthread_t *t, struct getter *g, kcr_workqueue *q, int64_t timeout)
{
    memset(g, 0, sizeof *g);
    g->q = q;
    g->timeout = timeout;
    cr_assert_eq(pthread_create(t, NULL, getter_main, g), 0);
}

Test(workqueue, shutdown_unblocks_blocked_getters)
{
    kcr_workqueue *q = new_queue();
    pthread_t t[3];
    struct getter g[3];
    for (int i = 0; i < 3; i++)
        start_getter(&t[i], &g[i], q, -1);
    wait_for_sleepers(q, 3);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(atomic_load(&g[i].finished), 0);
    kcr_workqueue_shutdown(q);
    for (int i = 0; i < 3; i++) {
        test_join(t[i], 30000, "thread t[i]");
        cr_assert_eq(g[i].err, KCR_ERR_SHUTDOWN);
    }
    kcr_workqueue_free(q);
}

/* Shuts q down, joins the n threads that get from it, and frees it. */
static void shutdown_join_free(kcr_workqueue *q, pthread_t *t, int n)
{
    kcr_workqueue_shutdown(q);
    for (int i = 0; i < n; i++)
        test_join(t[i], 30000, "thread t[i]");
    kcr_workqueue_free(q);
}

struct drainer {
    kcr_workqueue *q;
    atomic_int returned;
};

static void *drain_main(void *arg)
{
    struct drainer *d = arg;
    kcr_workqueue_shutdown_with_drain(d->q);
    atomic_store(&d->returned, 1);
    return NULL;
}

Test(workqueue, shutdown_with_drain_waits_for_in_flight_work)
{
    kcr_workqueue *q = new_queue();
    const char *a, *b;
    kcr_workqueue_add(q, "a", NULL);
    kcr_workqueue_add(q, "b", NULL);
    cr_assert_eq(test_wq_get(q, &a), KCR_OK);
    cr_assert_eq(test_wq_get(q, &b), KCR_OK);
    struct drainer d = {.q = q};
    pthread_t t;
    pthread_create(&t, NULL, drain_main, &d);
    wait_for_shutdown(q);
    cr_assert_eq(atomic_load(&d.returned), 0, "returned while two keys were processing");
    cr_assert(kcr_workqueue_shutting_down(q));
    cr_assert_eq(kcr_workqueue_add(q, "c", NULL), KCR_ERR_SHUTDOWN);
    cr_assert_eq(kcr_workqueue_done(q, "a"), KCR_OK);
    /* Wake the drainer (a spurious wake-up, which it must survive) and wait
     * until it has looked at the queue again since done(a): then it has
     * either returned (wrong) or is waiting for b. */
    kcr__wq_mutex_lock(q);
    unsigned checks = q->drain_checks;
    pthread_cond_broadcast(&q->drain_cond);
    pthread_mutex_unlock(&q->mu);
    for (int64_t t0 = kcr__now_ns(); ms_since(t0) < 10000; sleep_ms(1)) {
        kcr__wq_mutex_lock(q);
        bool looked = q->drain_checks != checks;
        pthread_mutex_unlock(&q->mu);
        if (looked || atomic_load(&d.returned))
            break;
    }
    kcr__wq_mutex_lock(q);
    unsigned checks_now = q->drain_checks;
    int inside = q->drain_waiters; /* left in the same lock hold as the look */
    pthread_mutex_unlock(&q->mu);
    cr_assert_neq(checks_now, checks, "the drainer never looked again");
    cr_assert_eq(inside, 1, "returned while one key was processing");
    cr_assert_eq(atomic_load(&d.returned), 0, "returned while one key was processing");
    cr_assert_eq(kcr_workqueue_done(q, "b"), KCR_OK);
    test_join(t, 30000, "thread t");
    cr_assert_eq(atomic_load(&d.returned), 1);
    kcr_workqueue_free(q);
}

Test(workqueue, shutdown_with_drain_returns_at_once_when_idle_and_plain_shutdown_ends_wait)
{
    kcr_workqueue *q = new_queue();
    kcr_workqueue_shutdown_with_drain(q); /* nothing processing: returns */
    kcr_workqueue_free(q);

    q = new_queue();
    const char *k;
    kcr_workqueue_add(q, "stuck", NULL);
    test_wq_get(q, &k);
    struct drainer d = {.q = q};
    pthread_t t;
    pthread_create(&t, NULL, drain_main, &d);
    wait_for_shutdown(q);
    cr_assert_eq(atomic_load(&d.returned), 0);
    kcr_workqueue_shutdown(q);
    test_join(t, 30000, "thread t");
    cr_assert_eq(atomic_load(&d.returned), 1);
    cr_assert_eq(kcr_workqueue_done(q, "stuck"), KCR_OK);
    kcr_workqueue_free(q);
}

Test(workqueue, get_timeout_reports_timeout)
{
    kcr_workqueue *q = new_queue();
    const char *key = (const char *)1;
    int64_t t0 = kcr__now_ns();
    cr_assert_eq(kcr_workqueue_get_timeout(q, 0, &key), KCR_ERR_TIMEOUT);
    cr_assert_null(key);
    cr_assert_lt(ms_since(t0), 1000.0);
    t0 = kcr__now_ns();
    cr_assert_eq(kcr_workqueue_get_timeout(q, 30, &key), KCR_ERR_TIMEOUT);
    cr_assert_geq(ms_since(t0), 29.0);
    cr_assert_lt(ms_since(t0), 5000.0);
    kcr_workqueue_add(q, "x", NULL);
    cr_assert_eq(kcr_workqueue_get_timeout(q, 30, &key), KCR_OK);
    cr_assert_str_eq(key, "x");
    kcr_workqueue_done(q, key);

    /* A getter with a timeout gets a key that arrives before it. */
    pthread_t t;
    struct getter g;
    start_getter(&t, &g, q, 5000);
    wait_for_sleepers(q, 1);
    kcr_workqueue_add(q, "late", NULL);
    test_join(t, 30000, "thread t");
    cr_assert_eq(g.err, KCR_OK);
    cr_assert_str_eq(g.key, "late");
    kcr_workqueue_done(q, "late");
    kcr_workqueue_free(q);
}

Test(workqueue, wake_unblocks_getters_without_shutdown)
{
    kcr_workqueue *q = new_queue();
    kcr_workqueue_add(q, "far",
        &(kcr_workqueue_add_options){.delay_ms = 3600 * 1000}); /* one of them keeps time */
    pthread_t t[2];
    struct getter g[2];
    start_getter(&t[0], &g[0], q, -1);
    start_getter(&t[1], &g[1], q, 10000);
    /* A wake reaches only getters already blocked, so wait until both are:
     * `sleepers` is raised under the queue lock right before the wait. */
    wait_for_sleepers(q, 2);
    cr_assert_eq(atomic_load(&g[0].finished) + atomic_load(&g[1].finished), 0);
    kcr_workqueue_wake(q);
    for (int i = 0; i < 2; i++) {
        test_join(t[i], 30000, "thread t[i]");
        cr_assert_eq(g[i].err, KCR_ERR_CANCELED);
    }
    cr_assert_not(kcr_workqueue_shutting_down(q));
    /* The queue still works, and a wake with nobody waiting changes nothing. */
    kcr_workqueue_wake(q);
    kcr_workqueue_add(q, "after", NULL);
    expect_next(q, "after");
    kcr_workqueue_free(q);
}

Test(workqueue, remove_drops_queued_delayed_and_readded_keys)
{
    kcr_workqueue *q = new_queue();
    kcr_workqueue_add(q, "a", NULL);
    kcr_workqueue_add(q, "b", NULL);
    kcr_workqueue_add(q, "c", NULL);
    cr_assert_eq(kcr_workqueue_remove(q, "b"), KCR_OK);
    cr_assert_eq(kcr_workqueue_remove(q, "b"), KCR_ERR_NOT_FOUND);
    cr_assert_eq(kcr_workqueue_remove(q, "zzz"), KCR_ERR_NOT_FOUND);
    cr_assert_eq(kcr_workqueue_len(q), 2);
    expect_next(q, "a");
    expect_next(q, "c");

    kcr_workqueue_add(q, "later", &(kcr_workqueue_add_options){.delay_ms = 3600 * 1000});
    kcr_workqueue_stats st;
    kcr_workqueue_get_stats(q, &st);
    cr_assert_eq(st.waiting, 1);
    cr_assert_eq(kcr_workqueue_remove(q, "later"), KCR_OK);
    kcr_workqueue_get_stats(q, &st);
    cr_assert_eq(st.waiting, 0);

    /* Processing: the re-add is dropped, the key stays handed out. */
    const char *key;
    kcr_workqueue_add(q, "p", NULL);
    test_wq_get(q, &key);
    kcr_workqueue_add(q, "p", NULL);
    cr_assert_eq(kcr_workqueue_remove(q, "p"), KCR_OK);
    cr_assert_eq(kcr_workqueue_remove(q, "p"), KCR_ERR_NOT_FOUND);
    cr_assert_eq(kcr_workqueue_done(q, "p"), KCR_OK);
    cr_assert_eq(kcr_workqueue_len(q), 0, "removed re-add must not come back");
    kcr_workqueue_get_stats(q, &st);
    cr_assert_eq(st.depth, 0);
    kcr_workqueue_free(q);
}

Test(workqueue, add_after_non_positive_adds_now)
{
    kcr_workqueue *q = new_queue();
    cr_assert_eq(kcr_workqueue_add(q, "zero", &(kcr_workqueue_add_options){.delay_ms = 0}), KCR_OK);
    cr_assert_eq(kcr_workqueue_add(q, "neg",
                                   &(kcr_workqueue_add_options){.delay_ms = -5000}), KCR_OK);
    cr_assert_eq(kcr_workqueue_len(q), 2);
    expect_next(q, "zero");
    expect_next(q, "neg");
    kcr_workqueue_stats st;
    kcr_workqueue_get_stats(q, &st);
    cr_assert_eq(st.retries_total, 0, "only a delay (> 0) or add_rate_limited is a retry");
    kcr_workqueue_free(q);
}

/* Delays are ms: the extremes saturate instead of overflowing into the
 * past (a key due now) or a negative deadline. */
Test(workqueue, add_after_extreme_delays_saturate)
{
    kcr_workqueue *q = new_queue();
    cr_assert_eq(kcr_workqueue_add(q, "never",
                                   &(kcr_workqueue_add_options){.delay_ms = INT64_MAX}), KCR_OK);
    cr_assert_eq(kcr_workqueue_add(q, "past",
                                   &(kcr_workqueue_add_options){.delay_ms = INT64_MIN}), KCR_OK);
    cr_assert_eq(kcr_workqueue_add(q, "one-ms",
                                   &(kcr_workqueue_add_options){.delay_ms = 1}), KCR_OK);
    kcr_workqueue_stats st;
    kcr_workqueue_get_stats(q, &st);
    cr_assert_eq(st.waiting, 2, "never and one-ms wait, past was added now");
    expect_next(q, "past");
    const char *key;
    cr_assert_eq(kcr_workqueue_get_timeout(q, 5000, &key), KCR_OK);
    cr_assert_str_eq(key, "one-ms");
    kcr_workqueue_done(q, key);
    cr_assert_eq(kcr_workqueue_get_timeout(q, 1, &key), KCR_ERR_TIMEOUT, "never stays waiting");
    kcr_workqueue_get_stats(q, &st);
    cr_assert_eq(st.waiting, 1);
    kcr_workqueue_free(q);
}

Test(workqueue, delayed_keys_become_ready_in_deadline_order)
{
    kcr_workqueue *q = new_queue();
    int64_t t0 = kcr__now_ns();
    kcr_workqueue_add(q, "c", &(kcr_workqueue_add_options){.delay_ms = 60});
    kcr_workqueue_add(q, "a", &(kcr_workqueue_add_options){.delay_ms = 20});
    kcr_workqueue_add(q, "b", &(kcr_workqueue_add_options){.delay_ms = 40});
    kcr_workqueue_stats st;
    kcr_workqueue_get_stats(q, &st); /* does not move due keys: exact on a slow machine too */
    cr_assert_eq(st.waiting, 3);
    cr_assert_eq(st.queued, 0);
    const char *want[] = {"a", "b", "c"};
    double min_ms[] = {19.5, 39.5, 59.5};
    for (int i = 0; i < 3; i++) {
        const char *key;
        cr_assert_eq(kcr_workqueue_get_timeout(q, 5000, &key), KCR_OK);
        cr_assert_str_eq(key, want[i]);
        cr_assert_geq(ms_since(t0), min_ms[i], "%s came early", key);
        kcr_workqueue_done(q, key);
    }
    kcr_workqueue_free(q);
}

Test(workqueue, equal_deadlines_keep_call_order)
{
    kcr_workqueue *q = new_queue();
    char key[16];
    for (int i = 0; i < 50; i++) {
        snprintf(key, sizeof key, "k%02d", i);
        kcr_workqueue_add(q, key, &(kcr_workqueue_add_options){.delay_ms = 10});
    }
    sleep_ms(30);
    cr_assert_eq(kcr_workqueue_len(q), 50);
    for (int i = 0; i < 50; i++) {
        snprintf(key, sizeof key, "k%02d", i);
        expect_next(q, key);
    }
    kcr_workqueue_free(q);
}

Test(workqueue, readding_a_waiting_key_keeps_the_earlier_deadline)
{
    kcr_workqueue *q = new_queue();
    /* Later first, then earlier: the earlier one wins. */
    kcr_workqueue_add(q, "x", &(kcr_workqueue_add_options){.delay_ms = 3600 * 1000});
    kcr_workqueue_add(q, "x", &(kcr_workqueue_add_options){.delay_ms = 20});
    /* Earlier first, then later: still the earlier one. */
    kcr_workqueue_add(q, "y", &(kcr_workqueue_add_options){.delay_ms = 20});
    kcr_workqueue_add(q, "y", &(kcr_workqueue_add_options){.delay_ms = 3600 * 1000});
    kcr_workqueue_stats st;
    kcr_workqueue_get_stats(q, &st);
    cr_assert_eq(st.waiting, 2, "one heap entry per key");
    const char *key;
    int64_t t0 = kcr__now_ns();
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(kcr_workqueue_get_timeout(q, 5000, &key), KCR_OK);
        kcr_workqueue_done(q, key);
    }
    cr_assert_lt(ms_since(t0), 4000.0);
    kcr_workqueue_get_stats(q, &st);
    cr_assert_eq(st.waiting, 0);
    kcr_workqueue_free(q);
}

Test(workqueue, blocked_getter_wakes_for_an_earlier_new_deadline)
{
    kcr_workqueue *q = new_queue();
    kcr_workqueue_add(q, "far", &(kcr_workqueue_add_options){.delay_ms = 3600 * 1000});
    pthread_t t;
    struct getter g;
    start_getter(&t, &g, q, -1);
    wait_for_sleepers(q, 1);
    int64_t t0 = kcr__now_ns();
    kcr_workqueue_add(q, "soon", &(kcr_workqueue_add_options){.delay_ms = 20});
    test_join(t, 30000, "thread t");
    cr_assert_eq(g.err, KCR_OK);
    cr_assert_str_eq(g.key, "soon");
    cr_assert_geq(ms_since(t0), 19.0);
    cr_assert_lt(ms_since(t0), 5000.0);
    kcr_workqueue_done(q, "soon");
    kcr_workqueue_free(q);
}

Test(workqueue, delayed_add_reaches_getters_while_one_keeps_time_for_a_far_deadline)
{
    /* One getter sleeps until "far" (an hour), the other without a timer;
     * "soon" goes through the add ring and must not wait for "far". */
    kcr_workqueue *q = new_queue();
    kcr_workqueue_add(q, "far", &(kcr_workqueue_add_options){.delay_ms = 3600 * 1000});
    pthread_t t[2];
    struct getter g[2];
    for (int i = 0; i < 2; i++)
        start_getter(&t[i], &g[i], q, 10000);
    wait_for_sleepers(q, 2);
    int64_t t0 = kcr__now_ns();
    cr_assert_eq(kcr_workqueue_add(q, "soon",
                                   &(kcr_workqueue_add_options){.delay_ms = 20}), KCR_OK);
    while (!atomic_load(&g[0].finished) && !atomic_load(&g[1].finished) && ms_since(t0) < 10000)
        sleep_ms(1);
    double waited = ms_since(t0);
    int first = atomic_load(&g[0].finished) ? 0 : 1;
    cr_assert(atomic_load(&g[first].finished), "no getter got the delayed key");
    cr_assert_str_eq(g[first].key, "soon");
    cr_assert_geq(waited, 19.0);
    cr_assert_lt(waited, 5000.0);
    kcr_workqueue_done(q, "soon");
    shutdown_join_free(q, t, 2);
}

Test(workqueue, delayed_add_after_the_timekeepers_deadline_comes_after_it)
{
    /* The timekeeper sleeps until "first"; "second" is due later, so the
     * adder wakes nobody and the timekeeper picks it up when it wakes.
     * Deadlines are long enough for the getter to block first under
     * valgrind too. */
    kcr_workqueue *q = new_queue();
    int64_t t0 = kcr__now_ns();
    kcr_workqueue_add(q, "first", &(kcr_workqueue_add_options){.delay_ms = 300});
    pthread_t t;
    struct getter g;
    start_getter(&t, &g, q, 10000);
    wait_for_sleepers(q, 1);
    cr_assert_lt(ms_since(t0), 300.0, "the getter blocked only after the first deadline");
    cr_assert_eq(kcr_workqueue_add(q, "second",
                                   &(kcr_workqueue_add_options){.delay_ms = 600}), KCR_OK);
    test_join(t, 30000, "thread t");
    cr_assert_eq(g.err, KCR_OK);
    cr_assert_str_eq(g.key, "first");
    cr_assert_geq(ms_since(t0), 299.0);
    kcr_workqueue_done(q, "first");
    const char *key = NULL;
    cr_assert_eq(kcr_workqueue_get_timeout(q, 10000, &key), KCR_OK);
    cr_assert_str_eq(key, "second");
    cr_assert_geq(ms_since(t0), 599.0);
    kcr_workqueue_done(q, key);
    kcr_workqueue_free(q);
}

Test(workqueue, removed_and_rescheduled_delayed_keys_do_not_pile_up)
{
    /* Removing a waiting key or moving its deadline earlier leaves a stale
     * heap entry; stale entries and the nodes they hold must be swept. */
    kcr_workqueue *q = new_queue();
    char key[16];
    for (int round = 0; round < 50; round++)
        for (int i = 0; i < 100; i++) {
            snprintf(key, sizeof key, "r%d", i);
            cr_assert_eq(kcr_workqueue_add(q, key,
                &(kcr_workqueue_add_options){.delay_ms = (3600 - round) * 1000}), KCR_OK);
        }
    kcr_workqueue_len(q); /* applies the add ring */
    cr_assert_leq(q->heap_len, 2u * 100 + 64, "heap holds %u entries for 100 keys", q->heap_len);
    cr_assert_eq(q->waiting, 100);
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof key, "r%d", i);
        cr_assert_eq(kcr_workqueue_remove(q, key), KCR_OK);
    }
    cr_assert_eq(q->waiting, 0);
    cr_assert_leq(q->heap_len, 64u);
    cr_assert_leq(q->tab.count, 64u, "%zu nodes still held", q->tab.count);
    /* The survivors of the sweep are still stale: nothing comes out. */
    kcr_workqueue_add(q, "live", NULL);
    expect_next(q, "live");
    const char *k = NULL;
    cr_assert_eq(kcr_workqueue_get_timeout(q, 0, &k), KCR_ERR_TIMEOUT);
    kcr_workqueue_free(q);
}

struct collector {
    kcr_workqueue *q;
    atomic_int got;
};

static void *collect_main(void *arg)
{
    struct collector *c = arg;
    const char *key;
    while (test_wq_get(c->q, &key) == KCR_OK) {
        atomic_fetch_add(&c->got, 1);
        kcr_workqueue_done(c->q, key);
    }
    return NULL;
}

Test(workqueue, many_getters_share_delayed_keys)
{
    kcr_workqueue *q = new_queue();
    struct collector c = {.q = q};
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, collect_main, &c);
    char key[16];
    for (int i = 0; i < 200; i++) {
        snprintf(key, sizeof key, "d%d", i);
        kcr_workqueue_add(q, key, &(kcr_workqueue_add_options){.delay_ms = i % 17});
    }
    int64_t t0 = kcr__now_ns();
    while (atomic_load(&c.got) < 200 && ms_since(t0) < 10000)
        sleep_ms(2);
    cr_assert_eq(atomic_load(&c.got), 200);
    shutdown_join_free(q, t, 4);
}

/* While one worker holds a key, a second getter stands by instead of taking
 * a fresh key at once; a worker that is stuck must not hold keys back for
 * longer than a couple of standby rounds. */
Test(workqueue, a_stuck_worker_does_not_hold_back_the_next_key)
{
    kcr_workqueue *q = new_queue();
    const char *held = NULL;
    kcr_workqueue_add(q, "held", NULL);
    cr_assert_eq(kcr_workqueue_get_timeout(q, 0, &held), KCR_OK);
    pthread_t t;
    struct getter g;
    start_getter(&t, &g, q, 10000);
    kcr_workqueue_add(q, "next", NULL);
    test_join(t, 30000, "thread t"); /* the getter gives up after 10 s */
    cr_assert_eq(g.err, KCR_OK);
    cr_assert_str_eq(g.key, "next");
    cr_assert_eq(kcr_workqueue_done(q, held), KCR_OK);
    kcr_workqueue_shutdown(q);
    kcr_workqueue_free(q);
}

/* The standby rule never turns a key into a timeout: a getter with a
 * deadline that passes takes a key that is there. */
Test(workqueue, non_blocking_get_takes_a_key_while_another_is_processed)
{
    kcr_workqueue *q = new_queue();
    const char *a = NULL, *b = NULL;
    kcr_workqueue_add(q, "a", NULL);
    kcr_workqueue_add(q, "b", NULL);
    cr_assert_eq(kcr_workqueue_get_timeout(q, 0, &a), KCR_OK);
    cr_assert_eq(kcr_workqueue_get_timeout(q, 0, &b), KCR_OK);
    cr_assert_str_eq(b, "b");
    cr_assert_eq(kcr_workqueue_done(q, a), KCR_OK);
    cr_assert_eq(kcr_workqueue_done(q, b), KCR_OK);
    kcr_workqueue_free(q);
}

/* With a long FIFO, a getter leaves delayed adds in the add ring (they
 * would queue behind the FIFO anyway); they still arrive, in order with the
 * plain adds around them. */
Test(workqueue, a_delayed_add_behind_a_long_fifo_still_arrives)
{
    kcr_workqueue *q = new_queue();
    char key[16];
    for (int i = 0; i < 600; i++) {
        snprintf(key, sizeof key, "a%d", i);
        kcr_workqueue_add(q, key, NULL);
    }
    expect_next(q, "a0"); /* moves the ring into the FIFO */
    kcr_workqueue_add(q, "late", &(kcr_workqueue_add_options){.delay_ms = 1});
    for (int i = 0; i < 400; i++) {
        snprintf(key, sizeof key, "b%d", i);
        kcr_workqueue_add(q, key, NULL);
    }
    int a = 1, b = 0;
    bool late = false;
    int64_t t0 = kcr__now_ns();
    while ((a < 600 || b < 400 || !late) && ms_since(t0) < 10000) {
        const char *got = NULL;
        if (kcr_workqueue_get_timeout(q, 100, &got) != KCR_OK)
            continue;
        if (strcmp(got, "late") == 0) {
            late = true;
        } else if (got[0] == 'a') {
            snprintf(key, sizeof key, "a%d", a++);
            cr_assert_str_eq(got, key);
        } else {
            cr_assert_eq(a, 600, "b key before all a keys");
            snprintf(key, sizeof key, "b%d", b++);
            cr_assert_str_eq(got, key);
        }
        cr_assert_eq(kcr_workqueue_done(q, got), KCR_OK);
    }
    cr_assert(late, "the delayed key never arrived");
    cr_assert_eq(a, 600);
    cr_assert_eq(b, 400);
    kcr_workqueue_free(q);
}

Test(workqueue, len_moves_due_keys_without_a_getter_and_shutdown_drops_waiting_keys)
{
    kcr_workqueue *q = new_queue();
    kcr_workqueue_add(q, "due", &(kcr_workqueue_add_options){.delay_ms = 5});
    kcr_workqueue_add(q, "never", &(kcr_workqueue_add_options){.delay_ms = 3600 * 1000});
    sleep_ms(20);
    cr_assert_eq(kcr_workqueue_len(q), 1);
    kcr_workqueue_shutdown(q);
    kcr_workqueue_stats st;
    kcr_workqueue_get_stats(q, &st);
    cr_assert_eq(st.waiting, 0);
    expect_next(q, "due");
    const char *key;
    cr_assert_eq(test_wq_get(q, &key), KCR_ERR_SHUTDOWN);
    kcr_workqueue_free(q);
}

Test(workqueue, rate_limited_add_forget_num_requeues)
{
    kcr_rate_limiter_exponential_options lo = {.base_delay_ms = 1, .max_delay_ms = 1000};
    kcr_workqueue_options opts = {0};
    cr_assert_eq(kcr_rate_limiter_exponential_new(&lo, &opts.limiter), KCR_OK);
    kcr_workqueue *q;
    cr_assert_eq(kcr_workqueue_new(&opts, &q), KCR_OK);
    cr_assert_eq(kcr_workqueue_num_requeues(q, "r"), 0);
    cr_assert_eq(kcr_workqueue_add_rate_limited(q, "r"), KCR_OK);
    cr_assert_eq(kcr_workqueue_num_requeues(q, "r"), 1);
    const char *key;
    cr_assert_eq(kcr_workqueue_get_timeout(q, 5000, &key), KCR_OK);
    cr_assert_str_eq(key, "r");
    cr_assert_eq(kcr_workqueue_add_rate_limited(q, "r"), KCR_OK); /* while processing */
    cr_assert_eq(kcr_workqueue_num_requeues(q, "r"), 2);
    kcr_workqueue_done(q, "r");
    cr_assert_eq(kcr_workqueue_get_timeout(q, 5000, &key), KCR_OK);
    kcr_workqueue_done(q, key);
    kcr_workqueue_forget(q, "r");
    cr_assert_eq(kcr_workqueue_num_requeues(q, "r"), 0);
    kcr_workqueue_stats st;
    kcr_workqueue_get_stats(q, &st);
    cr_assert_eq(st.retries_total, 2);
    kcr_workqueue_free(q);
}

Test(workqueue, default_limiter_and_name)
{
    kcr_workqueue_options opts = {.name = "jobs"};
    kcr_workqueue *q;
    cr_assert_eq(kcr_workqueue_new(&opts, &q), KCR_OK);
    cr_assert_str_eq(kcr_workqueue_name(q), "jobs");
    int64_t t0 = kcr__now_ns();
    kcr_workqueue_add_rate_limited(q, "k"); /* first failure: 5 ms */
    const char *key;
    cr_assert_eq(kcr_workqueue_get_timeout(q, 5000, &key), KCR_OK);
    cr_assert_geq(ms_since(t0), 4.9, "the default limiter delays the first retry by 5 ms");
    kcr_workqueue_done(q, key);
    cr_assert_eq(kcr_workqueue_num_requeues(q, "k"), 1);
    kcr_workqueue_free(q);
    cr_assert_eq(kcr_workqueue_new(NULL, NULL), KCR_ERR_INVALID);
}

/* Key i of many_and_long_keys_grow_and_shrink_the_table: every third long. */
static void table_key(char *key, size_t size, int i)
{
    if (i % 3 == 0)
        snprintf(key, size, "namespace-with-a-rather-long-name-%d/object-with-a-long-name-%d", i, i);
    else
        snprintf(key, size, "ns/%d", i);
}

Test(workqueue, many_and_long_keys_grow_and_shrink_the_table)
{
    kcr_workqueue *q = new_queue();
    enum { N = 20000 };
    char key[200];
    for (int i = 0; i < N; i++) {
        table_key(key, sizeof key, i);
        cr_assert_eq(kcr_workqueue_add(q, key, NULL), KCR_OK);
    }
    cr_assert_eq(kcr_workqueue_len(q), N);
    for (int i = 0; i < N; i++) {
        table_key(key, sizeof key, i);
        expect_next(q, key);
    }
    cr_assert_eq(kcr_workqueue_len(q), 0);
    /* Everything idle again: a key can come back. */
    kcr_workqueue_add(q, "ns/1", NULL);
    expect_next(q, "ns/1");
    kcr_workqueue_add(q, "left/in/queue", NULL); /* freed by kcr_workqueue_free */
    kcr_workqueue_add(q, "left/waiting", &(kcr_workqueue_add_options){.delay_ms = 1000});
    kcr_workqueue_free(q);
}

Test(workqueue, null_arguments_are_rejected)
{
    kcr_workqueue *q = new_queue();
    cr_assert_eq(kcr_workqueue_add(q, NULL, NULL), KCR_ERR_INVALID);
    cr_assert_eq(kcr_workqueue_add(q, NULL,
                                   &(kcr_workqueue_add_options){.delay_ms = 1}), KCR_ERR_INVALID);
    cr_assert_eq(kcr_workqueue_add_rate_limited(q, NULL), KCR_ERR_INVALID);
    cr_assert_eq(kcr_workqueue_remove(q, NULL), KCR_ERR_INVALID);
    cr_assert_eq(kcr_workqueue_get(q, NULL), KCR_ERR_INVALID);
    kcr_workqueue_free(q);
    kcr_workqueue_free(NULL);
}

/* Waiting awake stops paying after four long sleeps in a row, and pays
 * again after one short sleep (workqueue/yield.c); per thread. */
Test(workqueue, waiting_awake_stops_after_long_sleeps_and_resumes_after_a_short_one)
{
    cr_assert(kcr__wq_spin_pays(), "a fresh thread waits awake");
    for (int i = 0; i < 3; i++)
        kcr__wq_slept(5 * 1000 * 1000);
    cr_assert(kcr__wq_spin_pays(), "three long sleeps are not enough");
    kcr__wq_slept(5 * 1000 * 1000);
    cr_assert_not(kcr__wq_spin_pays(), "four long sleeps in a row: sleep at once");
    kcr__wq_slept(5 * 1000 * 1000);
    cr_assert_not(kcr__wq_spin_pays());
    kcr__wq_slept(20 * 1000);
    cr_assert(kcr__wq_spin_pays(), "a short sleep: work comes quickly again");
    for (int i = 0; i < 3; i++)
        kcr__wq_slept(5 * 1000 * 1000);
    kcr__wq_slept(20 * 1000);
    cr_assert(kcr__wq_spin_pays(), "long sleeps must come in a row");
}

static void *add_after_50ms(void *arg)
{
    sleep_ms(50);
    cr_assert_eq(kcr_workqueue_add(arg, "late", NULL), KCR_OK);
    return NULL;
}

/* With light fences, a getter whose sleeps were all long asks the adders to
 * fence instead of taking a membarrier before each sleep, an add still wakes
 * it, and a getter whose sleep was short takes the membarrier back
 * (workqueue/fence.c). */
Test(workqueue, sparse_getters_let_adders_fence_and_dense_ones_take_it_back, .timeout = 30)
{
    kcr_workqueue *q = new_queue();
    bool light = q->light_fences;
    const char *key = NULL;
    for (int i = 0; i < 4; i++)
        kcr__wq_slept(5 * 1000 * 1000);
    cr_assert_eq(kcr_workqueue_get_timeout(q, 5, &key), KCR_ERR_TIMEOUT);
    cr_assert_eq(atomic_load(&q->adders_fence), light, "sparse: adders fence (light fences: %d)",
                 light);

    pthread_t t;
    pthread_create(&t, NULL, add_after_50ms, q);
    int64_t t0 = kcr__now_ns();
    cr_assert_eq(kcr_workqueue_get_timeout(q, 10000, &key), KCR_OK, "the add woke the sleeper");
    cr_assert_lt(ms_since(t0), 5000);
    cr_assert_str_eq(key, "late");
    kcr_workqueue_done(q, key);
    pthread_join(t, NULL);
    cr_assert_eq(atomic_load(&q->adders_fence), light, "still sparse after a 50 ms sleep");

    kcr__wq_slept(20 * 1000); /* a short sleep: work comes quickly again */
    /* This get waits awake first (up to 50 yields): long enough that it
     * sleeps afterwards even under a sanitizer on a busy machine. */
    cr_assert_eq(kcr_workqueue_get_timeout(q, 300, &key), KCR_ERR_TIMEOUT);
    cr_assert_not(atomic_load(&q->adders_fence), "dense: the getters fence again");
    kcr_workqueue_free(q);
}
