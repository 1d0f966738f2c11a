/* Workqueue priorities: order, dedup and re-adds with priorities, delayed
 * adds with a priority, aging (with and without a producer keeping the
 * queue full of high-priority keys), remove/shutdown/get_timeout/wake in
 * priority mode, the depth_priority metric, and the error detail of an add
 * refused at shutdown, and gets that meet an add ring slot another adder is
 * still writing. */
#include <criterion/criterion.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/keytab.h"
#include "kcr/kcr.h"
#include "workqueue/queue.h"
#include "helpers/bounded.h"

static kcr_workqueue *new_queue(int64_t max_wait_ms)
{
    kcr_workqueue_options opts = {.name = "prio", .priority_max_wait_ms = max_wait_ms};
    kcr_workqueue *q = NULL;
    cr_assert_eq(kcr_workqueue_new(&opts, &q), KCR_OK);
    return q;
}

static void add(kcr_workqueue *q, const char *key, int prio)
{
    cr_assert_eq(kcr_workqueue_add(q, key,
        &(kcr_workqueue_add_options){.priority = prio}), KCR_OK, "add %s", key);
}

/* Takes the next key, which must be `want`, and calls done on it. */
static void expect_next(kcr_workqueue *q, const char *want)
{
    const char *key = NULL;
    cr_assert_eq(kcr_workqueue_get_timeout(q, 0, &key), KCR_OK, "expected %s", want);
    cr_assert_str_eq(key, want);
    cr_assert_eq(kcr_workqueue_done(q, key), KCR_OK);
}

static void expect_empty(kcr_workqueue *q)
{
    const char *key = NULL;
    cr_assert_eq(kcr_workqueue_get_timeout(q, 0, &key), KCR_ERR_TIMEOUT, "left: %s",
                 key ? key : "");
}

static void sleep_ns(int64_t ns)
{
    struct timespec ts = {(time_t)(ns / KCR_NS_PER_S), (long)(ns % KCR_NS_PER_S)};
    nanosleep(&ts, NULL);
}

/* Lets at least `ns` pass (aging is about time, not about another thread). */
static void let_time_pass(int64_t ns)
{
    int64_t until = kcr__now_ns() + ns;
    while (kcr__now_ns() < until)
        sleep_ns(until - kcr__now_ns() + 1000);
}

/* Waits (bounded) until `n` keys are ready. */
static void wait_len(kcr_workqueue *q, size_t n)
{
    int64_t deadline = kcr__now_ns() + 5 * KCR_NS_PER_S;
    while (kcr_workqueue_len(q) != n && kcr__now_ns() < deadline)
        sleep_ns(KCR_NS_PER_MS);
    cr_assert_eq(kcr_workqueue_len(q), n);
}

Test(priority, higher_first_fifo_within_a_priority_without_aging)
{
    kcr_workqueue *q = new_queue(-1);
    add(q, "low1", KCR_WQ_PRIORITY_LOW);
    add(q, "n1", KCR_WQ_PRIORITY_NORMAL);
    add(q, "hi1", 10);
    cr_assert_eq(kcr_workqueue_add(q, "n2", NULL), KCR_OK);
    add(q, "low2", KCR_WQ_PRIORITY_LOW);
    add(q, "hi2", 10);
    add(q, "neg", -5);
    cr_assert_eq(kcr_workqueue_len(q), 7);
    const char *order[] = {"hi1", "hi2", "n1", "n2", "neg", "low1", "low2"};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        expect_next(q, order[i]);
    expect_empty(q);
    cr_assert_eq(q->nlevels, 0, "every line is gone with its last key");
    kcr_workqueue_free(q);
}

Test(priority, many_priorities_and_extreme_values)
{
    kcr_workqueue *q = new_queue(-1);
    /* 101 priorities in a scrambled order (the lines array grows and
     * shifts), two keys each, plus the extremes of int. */
    char key[32];
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 101; i++) {
            int prio = (i * 37) % 101 - 50;
            snprintf(key, sizeof key, "p%d-%d", prio, round);
            add(q, key, prio);
        }
    }
    add(q, "max", INT_MAX);
    add(q, "min", INT_MIN);
    cr_assert_eq(kcr_workqueue_len(q), 204); /* also applies the adds */
    cr_assert_eq(q->nlevels, 103);
    expect_next(q, "max");
    for (int prio = 50; prio >= -50; prio--) {
        for (int round = 0; round < 2; round++) {
            snprintf(key, sizeof key, "p%d-%d", prio, round);
            expect_next(q, key);
        }
    }
    expect_next(q, "min");
    expect_empty(q);
    cr_assert_eq(q->nlevels, 0);
    kcr_workqueue_free(q);
}

Test(priority, a_normal_only_queue_never_leaves_fifo_mode)
{
    kcr_workqueue *q = new_queue(0);
    cr_assert_eq(kcr_workqueue_add(q, "a", NULL), KCR_OK);
    add(q, "b", KCR_WQ_PRIORITY_NORMAL);
    cr_assert_eq(kcr_workqueue_add(q, "c", &(kcr_workqueue_add_options){.delay_ms = -1}), KCR_OK);
    cr_assert_eq(kcr_workqueue_add(q, "d",
        &(kcr_workqueue_add_options){.delay_ms = 0, .priority = KCR_WQ_PRIORITY_NORMAL}),
                 KCR_OK);
    expect_next(q, "a");
    expect_next(q, "b");
    expect_next(q, "c");
    expect_next(q, "d");
    cr_assert_not(q->prio_on);
    cr_assert_null(q->levels);
    cr_assert_eq(q->max_wait_ns, 10 * KCR_NS_PER_S, "0 means the 10 s default");
    kcr_workqueue_free(q);
}

Test(priority, switching_to_priorities_keeps_the_normal_keys_in_order)
{
    kcr_workqueue *q = new_queue(-1);
    cr_assert_eq(kcr_workqueue_add(q, "n1", NULL), KCR_OK);
    cr_assert_eq(kcr_workqueue_add(q, "n2", NULL), KCR_OK);
    add(q, "low", KCR_WQ_PRIORITY_LOW);
    cr_assert_eq(kcr_workqueue_add(q, "n3", NULL), KCR_OK);
    add(q, "hi", 1);
    expect_next(q, "hi");
    expect_next(q, "n1");
    expect_next(q, "n2");
    expect_next(q, "n3");
    expect_next(q, "low");
    kcr_workqueue_free(q);
}

Test(priority, a_waiting_key_keeps_the_higher_priority)
{
    kcr_workqueue *q = new_queue(-1);
    add(q, "x", KCR_WQ_PRIORITY_LOW);
    add(q, "y", KCR_WQ_PRIORITY_LOW);
    add(q, "z", KCR_WQ_PRIORITY_LOW);
    add(q, "n", KCR_WQ_PRIORITY_NORMAL);
    add(q, "y", KCR_WQ_PRIORITY_NORMAL); /* raised: to the end of NORMAL's line */
    add(q, "n", KCR_WQ_PRIORITY_LOW);    /* lower: no change */
    cr_assert_eq(kcr_workqueue_add(q, "z", NULL), KCR_OK); /* plain add raises LOW to NORMAL */
    cr_assert_eq(kcr_workqueue_len(q), 4);
    kcr_workqueue_stats st;
    kcr_workqueue_get_stats(q, &st);
    cr_assert_eq(st.adds_total, 4, "raising a priority is not another add");
    expect_next(q, "n");
    expect_next(q, "y");
    expect_next(q, "z");
    expect_next(q, "x");
    expect_empty(q);
    kcr_workqueue_free(q);
}

Test(priority, a_key_readded_while_processing_comes_back_with_the_highest_readd_priority)
{
    kcr_workqueue *q = new_queue(-1);
    add(q, "k", 7);
    const char *key;
    cr_assert_eq(kcr_workqueue_get_timeout(q, 0, &key), KCR_OK);
    cr_assert_str_eq(key, "k");
    add(q, "k", KCR_WQ_PRIORITY_LOW);
    add(q, "k", 3);
    add(q, "k", KCR_WQ_PRIORITY_LOW);
    add(q, "n", KCR_WQ_PRIORITY_NORMAL);
    add(q, "m", 5);
    cr_assert_eq(kcr_workqueue_len(q), 2, "k is not ready before done");
    cr_assert_eq(kcr_workqueue_done(q, key), KCR_OK);
    expect_next(q, "m");
    expect_next(q, "k"); /* 3: not the 7 it was handed out with */
    expect_next(q, "n");

    /* Re-added only with LOW: it comes back LOW, behind NORMAL keys. */
    add(q, "k", KCR_WQ_PRIORITY_NORMAL);
    cr_assert_eq(kcr_workqueue_get_timeout(q, 0, &key), KCR_OK);
    add(q, "k", KCR_WQ_PRIORITY_LOW);
    add(q, "n", KCR_WQ_PRIORITY_NORMAL);
    cr_assert_eq(kcr_workqueue_done(q, key), KCR_OK);
    expect_next(q, "n");
    expect_next(q, "k");
    expect_empty(q);
    kcr_workqueue_free(q);
}

Test(priority, delayed_adds_are_queued_with_their_priority)
{
    kcr_workqueue *q = new_queue(-1);
    add(q, "n", KCR_WQ_PRIORITY_NORMAL);
    add(q, "low", KCR_WQ_PRIORITY_LOW);
    cr_assert_eq(kcr_workqueue_add(q, "d",
        &(kcr_workqueue_add_options){.delay_ms = 20, .priority = 10}), KCR_OK);
    /* Waiting twice: the earlier deadline and the higher priority stay. */
    cr_assert_eq(
        kcr_workqueue_add(q, "e",
            &(kcr_workqueue_add_options){.delay_ms = 10, .priority = KCR_WQ_PRIORITY_LOW}),
        KCR_OK);
    cr_assert_eq(kcr_workqueue_add(q, "e",
        &(kcr_workqueue_add_options){.delay_ms = 60 * 1000, .priority = 20}), KCR_OK);
    cr_assert_eq(kcr_workqueue_add(q, "f", &(kcr_workqueue_add_options){.delay_ms = 10}), KCR_OK);
    /* Due at once: a plain add with that priority. */
    cr_assert_eq(kcr_workqueue_add(q, "now",
        &(kcr_workqueue_add_options){.delay_ms = 0, .priority = 15}), KCR_OK);
    wait_len(q, 6);
    kcr_workqueue_stats st;
    kcr_workqueue_get_stats(q, &st);
    cr_assert_eq(st.waiting, 0, "e keeps the earlier deadline");
    expect_next(q, "e");
    expect_next(q, "now");
    expect_next(q, "d");
    expect_next(q, "n");
    expect_next(q, "f");
    expect_next(q, "low");
    kcr_workqueue_free(q);
}

Test(priority, a_key_waiting_max_wait_goes_before_younger_keys_oldest_first)
{
    /* The young keys must not age between their adds and the last get: a
     * second leaves room for a descheduled thread under TSan on a busy
     * machine (100 ms did not, once). */
    const int64_t max_wait = KCR_NS_PER_S;
    kcr_workqueue *q = new_queue(max_wait / KCR_NS_PER_MS);
    add(q, "low-old", KCR_WQ_PRIORITY_LOW);
    add(q, "mid-old", -50);
    let_time_pass(max_wait);
    add(q, "low-young", KCR_WQ_PRIORITY_LOW);
    add(q, "hi1", KCR_WQ_PRIORITY_NORMAL);
    add(q, "hi2", 10);
    /* Aged keys first, the one ready longest first (low-old, although
     * mid-old has the higher priority), then the others by priority. */
    expect_next(q, "low-old");
    expect_next(q, "mid-old");
    expect_next(q, "hi2");
    expect_next(q, "hi1");
    expect_next(q, "low-young");
    kcr_workqueue_free(q);
}

Test(priority, a_young_low_key_waits_for_higher_ones)
{
    kcr_workqueue *q = new_queue(0); /* default aging: 10 s */
    add(q, "low", KCR_WQ_PRIORITY_LOW);
    add(q, "hi", KCR_WQ_PRIORITY_NORMAL);
    expect_next(q, "hi");
    expect_next(q, "low");
    kcr_workqueue_free(q);
}

/* Starvation: HIGH keys never run out (each worker re-adds the key it got
 * and a producer thread keeps adding more) while one LOW key waits. */
enum { CHURN_KEYS = 64 };

struct churn {
    kcr_workqueue *q;
    atomic_bool stop;
    atomic_long produced;
};

static void *high_producer(void *arg)
{
    struct churn *c = arg;
    char key[32];
    for (long i = 0; !atomic_load(&c->stop); i++) {
        snprintf(key, sizeof key, "p%ld", i % 10000);
        if (kcr_workqueue_add(c->q, key, NULL) == KCR_OK)
            atomic_fetch_add(&c->produced, 1);
    }
    return NULL;
}

/* Serves keys until "low" comes or `limit` high keys were served; returns
 * how many high keys went first (-1: low never came). */
static long serve_under_churn(struct churn *c, long limit, int64_t *low_at)
{
    long served = 0;
    while (served < limit) {
        const char *key;
        cr_assert_eq(kcr_workqueue_get_timeout(c->q, 5 * 1000, &key), KCR_OK,
                     "high keys never run out");
        if (strcmp(key, "low") == 0) {
            *low_at = kcr__now_ns();
            cr_assert_eq(kcr_workqueue_done(c->q, key), KCR_OK);
            return served;
        }
        served++;
        add(c->q, key, KCR_WQ_PRIORITY_NORMAL); /* comes back after done */
        cr_assert_eq(kcr_workqueue_done(c->q, key), KCR_OK);
    }
    return -1;
}

static long run_churn(int64_t max_wait, long limit, int64_t *waited)
{
    struct churn c = {0};
    c.q = new_queue(max_wait > 0 ? max_wait / KCR_NS_PER_MS : max_wait);
    char key[16];
    for (int i = 0; i < CHURN_KEYS; i++) {
        snprintf(key, sizeof key, "h%d", i);
        add(c.q, key, KCR_WQ_PRIORITY_NORMAL);
    }
    int64_t t0 = kcr__now_ns();
    add(c.q, "low", KCR_WQ_PRIORITY_LOW);
    pthread_t producer;
    pthread_create(&producer, NULL, high_producer, &c);
    int64_t deadline = kcr__now_ns() + 5 * KCR_NS_PER_S;
    while (atomic_load(&c.produced) == 0 && kcr__now_ns() < deadline)
        sleep_ns(100 * 1000);
    cr_assert_gt(atomic_load(&c.produced), 0, "the producer runs");
    int64_t low_at = 0;
    long served = serve_under_churn(&c, limit, &low_at);
    atomic_store(&c.stop, true);
    test_join(producer, 30000, "thread producer");
    *waited = low_at ? low_at - t0 : -1;
    kcr_workqueue_free(c.q);
    return served;
}

Test(priority, strict_priority_starves_a_low_key_under_churn, .timeout = 60)
{
    int64_t waited;
    /* With CHURN_KEYS high keys always queued, LOW never gets a turn. */
    cr_assert_eq(run_churn(-1, 20000, &waited), -1);
}

Test(priority, aging_serves_a_low_key_under_churn_after_max_wait, .timeout = 60)
{
    const int64_t max_wait = 20 * KCR_NS_PER_MS;
    int64_t waited;
    long served = run_churn(max_wait, 50000000, &waited);
    cr_log_info("low key after %ld high keys, %.1f ms", served, (double)waited / 1e6);
    cr_assert_geq(served, CHURN_KEYS, "the high keys added before it went first");
    cr_assert_geq(waited, max_wait, "it went because it aged, not because HIGH ran out");
    cr_assert_lt(waited, max_wait + 5 * KCR_NS_PER_S, "served within max wait (+ slack)");
}

/* An adder preempted between claiming its ring slot and publishing it:
 * the slot is claimed here, as ring_push does, and a thread fills and
 * publishes it (an add of "stalled" with priority `prio`) 50 ms later.
 * `prio` other than NORMAL only on a queue already in priority mode (the
 * switch is the adder's, and this one skips it). */
struct stalled_slot {
    kcr_workqueue *q;
    size_t pos;
    int prio;
    pthread_t thread;
};

static void *publish_later(void *arg)
{
    struct stalled_slot *st = arg;
    sleep_ns(50 * KCR_NS_PER_MS);
    struct kcr__wq_slot *s = &st->q->ring[st->pos & st->q->ring_mask];
    static const char key[] = "stalled";
    s->len = (uint32_t)strlen(key);
    memcpy(s->key, key, sizeof key);
    s->hash = kcr__keytab_hash_seeded(st->q->hash_seed, key, s->len);
    s->added_ns = kcr__now_ns();
    s->ready_at = 0;
    s->prio = st->prio;
    atomic_store(&s->seq, st->pos + 1);
    return NULL;
}

static void stall_a_slot(struct stalled_slot *st, kcr_workqueue *q, int prio)
{
    st->q = q;
    st->prio = prio;
    st->pos = atomic_fetch_add(&q->ring_tail, 1);
    cr_assert_eq(atomic_load(&q->ring[st->pos & q->ring_mask].seq), st->pos, "slot free");
    cr_assert_eq(pthread_create(&st->thread, NULL, publish_later, st), 0);
}

/* What the strict-priority churn test once hit under ASan on a busy
 * machine: the worker's own re-add sat behind the producer's slot and a
 * get handed out the LOW key instead. */
Test(priority, a_get_does_not_pass_over_an_add_behind_a_slot_being_written)
{
    kcr_workqueue *q = new_queue(-1);
    add(q, "low", KCR_WQ_PRIORITY_LOW);
    cr_assert_eq(kcr_workqueue_len(q), 1);
    struct stalled_slot st;
    stall_a_slot(&st, q, KCR_WQ_PRIORITY_LOW);
    add(q, "hi", KCR_WQ_PRIORITY_NORMAL);
    expect_next(q, "hi");
    test_join(st.thread, 30000, "thread publish_later");
    expect_next(q, "low");
    expect_next(q, "stalled");
    expect_empty(q);
    kcr_workqueue_free(q);
}

/* Without priorities: a get that would time out first applies the adds
 * claimed before it, so a thread's own add is never missed. */
Test(priority, a_get_that_would_time_out_waits_for_a_slot_being_written)
{
    kcr_workqueue *q = new_queue(0);
    struct stalled_slot st;
    stall_a_slot(&st, q, KCR_WQ_PRIORITY_NORMAL);
    cr_assert_eq(kcr_workqueue_add(q, "mine", NULL), KCR_OK);
    expect_next(q, "stalled");
    expect_next(q, "mine");
    test_join(st.thread, 30000, "thread publish_later");
    expect_empty(q);
    kcr_workqueue_free(q);
}

Test(priority, remove_and_shutdown_drain_in_priority_order)
{
    kcr_workqueue *q = new_queue(-1);
    add(q, "low", KCR_WQ_PRIORITY_LOW);
    add(q, "gone", KCR_WQ_PRIORITY_LOW);
    add(q, "n", KCR_WQ_PRIORITY_NORMAL);
    add(q, "hi", 3);
    cr_assert_eq(kcr_workqueue_add(q, "later",
        &(kcr_workqueue_add_options){.delay_ms = 60 * 1000, .priority = 9}), KCR_OK);
    cr_assert_eq(kcr_workqueue_remove(q, "gone"), KCR_OK);
    cr_assert_eq(kcr_workqueue_remove(q, "hi"), KCR_OK);
    cr_assert_eq(kcr_workqueue_remove(q, "hi"), KCR_ERR_NOT_FOUND);
    add(q, "hi", 3);
    kcr_workqueue_shutdown(q);
    cr_assert_eq(kcr_workqueue_add(q, "late",
        &(kcr_workqueue_add_options){.priority = 100}), KCR_ERR_SHUTDOWN);
    const char *order[] = {"hi", "n", "low"};
    for (size_t i = 0; i < 3; i++) {
        const char *key;
        cr_assert_eq(test_wq_get(q, &key), KCR_OK);
        cr_assert_str_eq(key, order[i]);
        cr_assert_eq(kcr_workqueue_done(q, key), KCR_OK);
    }
    const char *key;
    cr_assert_eq(test_wq_get(q, &key), KCR_ERR_SHUTDOWN, "delayed key dropped");
    cr_assert_eq(q->nlevels, 0);
    kcr_workqueue_free(q);
}

struct getter {
    kcr_workqueue *q;
    atomic_int result;
};

static void *blocked_get(void *arg)
{
    struct getter *g = arg;
    const char *key;
    atomic_store(&g->result, (int)test_wq_get(g->q, &key));
    return NULL;
}

Test(priority, get_timeout_and_wake_in_priority_mode)
{
    kcr_workqueue *q = new_queue(-1);
    add(q, "low", KCR_WQ_PRIORITY_LOW);
    expect_next(q, "low");
    cr_assert(q->prio_on);
    const char *key;
    int64_t t0 = kcr__now_ns();
    cr_assert_eq(kcr_workqueue_get_timeout(q, 20, &key), KCR_ERR_TIMEOUT);
    cr_assert_geq(kcr__now_ns() - t0, 20 * KCR_NS_PER_MS);

    struct getter g = {.q = q, .result = -1};
    pthread_t t;
    pthread_create(&t, NULL, blocked_get, &g);
    int64_t deadline = kcr__now_ns() + 5 * KCR_NS_PER_S;
    for (;;) { /* until the getter is blocked (wake only affects those) */
        kcr__wq_mutex_lock(q);
        bool blocked = q->nwaiters > 0 || q->tk_active;
        pthread_mutex_unlock(&q->mu);
        if (blocked || kcr__now_ns() > deadline)
            break;
        sleep_ns(KCR_NS_PER_MS);
    }
    kcr_workqueue_wake(q);
    test_join(t, 30000, "thread t");
    cr_assert_eq(atomic_load(&g.result), KCR_ERR_CANCELED);
    kcr_workqueue_free(q);
}

/* depth_priority records. */
struct depths {
    int calls;
    int64_t normal, low, hi;
    int other;
};

static void on_depth_priority(const char *name, int priority, int64_t depth, void *ud)
{
    struct depths *d = ud;
    cr_assert_str_eq(name, "prio");
    d->calls++;
    if (priority == KCR_WQ_PRIORITY_NORMAL)
        d->normal = depth;
    else if (priority == KCR_WQ_PRIORITY_LOW)
        d->low = depth;
    else if (priority == 5)
        d->hi = depth;
    else
        d->other++;
}

Test(priority, depth_priority_metric)
{
    struct depths d = {0};
    kcr_workqueue_metrics m = {.depth_priority = on_depth_priority, .user_data = &d};
    kcr_workqueue_options opts = {.name = "prio", .metrics = &m, .priority_max_wait_ms = -1};
    kcr_workqueue *q;
    cr_assert_eq(kcr_workqueue_new(&opts, &q), KCR_OK);
    cr_assert_eq(kcr_workqueue_add(q, "a", NULL), KCR_OK);
    cr_assert_eq(kcr_workqueue_add(q, "b", NULL), KCR_OK);
    cr_assert_eq(d.calls, 0, "NORMAL only: depth tells it all");
    add(q, "c", KCR_WQ_PRIORITY_LOW);
    cr_assert_eq(d.normal, 2, "switching over reports NORMAL's depth");
    cr_assert_eq(d.low, 1);
    add(q, "d", 5);
    add(q, "c", 5); /* raised: LOW 0, 5 -> 2 */
    cr_assert_eq(d.low, 0);
    cr_assert_eq(d.hi, 2);
    const char *key;
    cr_assert_eq(kcr_workqueue_get_timeout(q, 0, &key), KCR_OK);
    cr_assert_str_eq(key, "d");
    cr_assert_eq(d.hi, 1);
    add(q, "d", KCR_WQ_PRIORITY_LOW); /* re-added while processing counts */
    cr_assert_eq(d.low, 1);
    cr_assert_eq(kcr_workqueue_done(q, key), KCR_OK);
    cr_assert_eq(d.low, 1, "done only moves it into its line");
    cr_assert_eq(kcr_workqueue_remove(q, "a"), KCR_OK);
    cr_assert_eq(d.normal, 1);
    cr_assert_eq(d.other, 0);
    kcr_workqueue_free(q);
}

/* Issue 14: an add refused at shutdown says so in kcr_last_error(). */
static void expect_shutdown_detail(kcr_err err, const char *fn)
{
    cr_assert_eq(err, KCR_ERR_SHUTDOWN, "%s", fn);
    const char *msg = kcr_last_error();
    cr_assert_not_null(strstr(msg, fn), "%s", msg);
    cr_assert_not_null(strstr(msg, "\"prio\""), "names the queue: %s", msg);
    cr_assert_not_null(strstr(msg, "shutting down"), "%s", msg);
}

Test(priority, adds_after_shutdown_set_the_error_detail)
{
    kcr_workqueue *q = new_queue(0);
    kcr_workqueue_shutdown(q);
    expect_shutdown_detail(kcr_workqueue_add(q, "a", NULL), "kcr_workqueue_add");
    expect_shutdown_detail(kcr_workqueue_add(q, "a", &(kcr_workqueue_add_options){.priority = 1}),
                           "kcr_workqueue_add");
    expect_shutdown_detail(kcr_workqueue_add(q, "a",
        &(kcr_workqueue_add_options){.delay_ms = 1000}), "kcr_workqueue_add");
    expect_shutdown_detail(kcr_workqueue_add(q, "a",
        &(kcr_workqueue_add_options){.delay_ms = 0}), "kcr_workqueue_add");
    expect_shutdown_detail(kcr_workqueue_add(q, "a",
        &(kcr_workqueue_add_options){.delay_ms = 1000, .priority = 1}),
                           "kcr_workqueue_add");
    expect_shutdown_detail(kcr_workqueue_add_rate_limited(q, "a"),
                           "kcr_workqueue_add_rate_limited");
    kcr_workqueue_free(q);
}
