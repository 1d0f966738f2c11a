/* Workqueue payloads and clocks: a per-key payload merged under the queue's
 * lock travels with its key (dedup, re-add while processing, put back for
 * the next get, dropped by remove and free), and delays and rate-limited
 * retries run on a kcr_clock: the test kit's virtual clock makes them due
 * with no real sleep. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "core/clock.h"
#include "kcr/kcr.h"
#include "kcr/testkit.h"
#include "helpers/bounded.h"

/* A payload: a sum of the values added for the key. */
typedef struct sum {
    int v;
} sum;

static atomic_int frees;

static void *sum_merge(void *held, void *incoming, void *ud)
{
    (void)ud;
    sum *h = held, *in = incoming;
    if (!h || !in)
        return h ? h : in;
    h->v += in->v;
    free(in);
    atomic_fetch_add(&frees, 1);
    return h;
}

static void sum_free(void *p, void *ud)
{
    (void)ud;
    free(p);
    atomic_fetch_add(&frees, 1);
}

static const kcr_workqueue_payload_ops sum_ops = {.merge = sum_merge, .free = sum_free};

static sum *val(int v)
{
    sum *s = malloc(sizeof *s);
    cr_assert_not_null(s);
    s->v = v;
    return s;
}

static kcr_workqueue *payload_queue(const kcr_clock *clock, kcr_rate_limiter *limiter)
{
    atomic_store(&frees, 0);
    kcr_workqueue *q = NULL;
    kcr_workqueue_options o = {.payload = &sum_ops, .clock = clock, .limiter = limiter};
    cr_assert_eq(kcr_workqueue_new(&o, &q), KCR_OK, "%s", kcr_last_error());
    return q;
}

static kcr_err add_val(kcr_workqueue *q, const char *key, int v)
{
    return kcr_workqueue_add(q, key, &(kcr_workqueue_add_options){.payload = val(v)});
}

/* Gets `want` now (no wait) and returns the sum of its payload (-1: none). */
static int get_sum(kcr_workqueue *q, const char *want)
{
    const char *key = NULL;
    cr_assert_eq(kcr_workqueue_get_timeout(q, 0, &key), KCR_OK, "expected %s ready", want);
    cr_assert_str_eq(key, want);
    void *p = NULL;
    cr_assert_eq(kcr_workqueue_take_payload(q, key, &p), KCR_OK);
    int v = p ? ((sum *)p)->v : -1;
    free(p);
    return v;
}

Test(workqueue_payload, payloads_merge_and_travel_with_their_key)
{
    kcr_workqueue *q = payload_queue(NULL, NULL);
    cr_assert_eq(add_val(q, "a", 1), KCR_OK);
    cr_assert_eq(add_val(q, "b", 10), KCR_OK);
    cr_assert_eq(add_val(q, "a", 2), KCR_OK); /* deduplicated, payload merged */
    cr_assert_eq(kcr_workqueue_len(q), 2);
    cr_assert_eq(get_sum(q, "a"), 3);
    cr_assert_eq(add_val(q, "a", 4), KCR_OK); /* while processing: for the next round */
    cr_assert_eq(kcr_workqueue_done(q, "a"), KCR_OK);
    cr_assert_eq(get_sum(q, "b"), 10);
    cr_assert_eq(kcr_workqueue_done(q, "b"), KCR_OK);
    cr_assert_eq(get_sum(q, "a"), 4);
    cr_assert_eq(kcr_workqueue_done(q, "a"), KCR_OK);
    cr_assert_eq(kcr_workqueue_add(q, "a", NULL), KCR_OK); /* a plain add on a payload queue */
    cr_assert_eq(get_sum(q, "a"), -1);
    cr_assert_eq(kcr_workqueue_done(q, "a"), KCR_OK);
    kcr_workqueue_free(q);
}

Test(workqueue_payload, put_keeps_state_for_the_next_get_without_queuing)
{
    kcr_workqueue *q = payload_queue(NULL, NULL);
    cr_assert_eq(kcr_workqueue_put_payload(q, "a", val(5)), KCR_OK);
    cr_assert_eq(kcr_workqueue_len(q), 0, "put does not make the key ready");
    const char *key = NULL;
    cr_assert_eq(kcr_workqueue_get_timeout(q, 0, &key), KCR_ERR_TIMEOUT);
    cr_assert_eq(add_val(q, "a", 1), KCR_OK);
    cr_assert_eq(get_sum(q, "a"), 6);
    cr_assert_eq(kcr_workqueue_done(q, "a"), KCR_OK);
    kcr_workqueue_free(q);
}

Test(workqueue_payload, remove_free_and_refused_adds_drop_payloads)
{
    kcr_workqueue *q = payload_queue(NULL, NULL);
    cr_assert_eq(kcr_workqueue_add(q, "a", &(kcr_workqueue_add_options){.delay_ms = 60000,
                                                                         .payload = val(1)}),
                 KCR_OK);
    cr_assert_eq(kcr_workqueue_remove(q, "a"), KCR_OK);
    cr_assert_eq(atomic_load(&frees), 1, "remove drops the delayed key's payload");
    cr_assert_eq(kcr_workqueue_put_payload(q, "kept", val(2)), KCR_OK);
    cr_assert_eq(add_val(q, "b", 3), KCR_OK);
    kcr_workqueue_shutdown(q);
    cr_assert_eq(add_val(q, "c", 4), KCR_ERR_SHUTDOWN);
    cr_assert_eq(atomic_load(&frees), 2, "a refused add frees its payload");
    kcr_workqueue_free(q);
    cr_assert_eq(atomic_load(&frees), 4, "free drops the payloads still held");

    kcr_workqueue *plain = NULL;
    cr_assert_eq(kcr_workqueue_new(NULL, &plain), KCR_OK);
    sum s = {1};
    cr_assert_eq(kcr_workqueue_add(plain, "a", &(kcr_workqueue_add_options){.payload = &s}),
                 KCR_ERR_INVALID, "a payload needs payload ops");
    cr_assert_eq(kcr_workqueue_len(plain), 0);
    kcr_workqueue_free(plain);
    kcr_workqueue *bad = NULL;
    kcr_workqueue_payload_ops no_free = {.merge = sum_merge};
    cr_assert_eq(kcr_workqueue_new(&(kcr_workqueue_options){.payload = &no_free}, &bad),
                 KCR_ERR_INVALID);
}

/* ---- delays on the test kit's virtual clock ---- */

static kcr_testkit *tk;

static void kit_setup(void)
{
    cr_assert_eq(kcr_testkit_new(NULL, &tk), KCR_OK);
}

static void kit_teardown(void)
{
    kcr_testkit_free(tk);
}

static bool ready_now(kcr_workqueue *q, const char *want)
{
    const char *key = NULL;
    if (kcr_workqueue_get_timeout(q, 0, &key) != KCR_OK)
        return false;
    cr_assert_str_eq(key, want);
    cr_assert_eq(kcr_workqueue_done(q, key), KCR_OK);
    return true;
}

Test(workqueue_clock, a_delayed_add_fires_on_virtual_time, .init = kit_setup,
     .fini = kit_teardown)
{
    int64_t real_start = kcr__now_ns();
    kcr_workqueue *q = payload_queue(kcr_testkit_clock(tk), NULL);
    cr_assert_eq(kcr_workqueue_add(q, "a", &(kcr_workqueue_add_options){.delay_ms = 3600000}),
                 KCR_OK);
    cr_assert_not(ready_now(q, "a"));
    kcr_testkit_advance(tk, 3599999);
    cr_assert_not(ready_now(q, "a"), "one virtual ms early");
    kcr_testkit_advance(tk, 1);
    cr_assert(ready_now(q, "a"), "due after one virtual hour");
    kcr_workqueue_free(q);
    cr_assert_lt(kcr__now_ns() - real_start, 60 * KCR_NS_PER_S, "no real hour was slept");
}

Test(workqueue_clock, a_rate_limited_retry_backs_off_on_virtual_time, .init = kit_setup,
     .fini = kit_teardown)
{
    kcr_rate_limiter *rl = NULL;
    kcr_rate_limiter_exponential_options eo = {.base_delay_ms = 1000, .max_delay_ms = 60000};
    cr_assert_eq(kcr_rate_limiter_exponential_new(&eo, &rl), KCR_OK);
    kcr_workqueue *q = payload_queue(kcr_testkit_clock(tk), rl);
    cr_assert_eq(kcr_workqueue_add_rate_limited(q, "a"), KCR_OK); /* 1 s */
    kcr_testkit_advance(tk, 999);
    cr_assert_not(ready_now(q, "a"));
    kcr_testkit_advance(tk, 1);
    cr_assert(ready_now(q, "a"));
    cr_assert_eq(kcr_workqueue_add_rate_limited(q, "a"), KCR_OK); /* 2 s */
    kcr_testkit_advance(tk, 1999);
    cr_assert_not(ready_now(q, "a"));
    kcr_testkit_advance(tk, 1);
    cr_assert(ready_now(q, "a"));
    cr_assert_eq(kcr_workqueue_num_requeues(q, "a"), 2);
    kcr_workqueue_free(q);
}

/* A getter blocked on a virtual deadline sees the clock move (it looks
 * again every 10 ms of real time). */
static atomic_int got;

static void *getter(void *arg)
{
    const char *key = NULL;
    if (kcr_workqueue_get_timeout(arg, 20000, &key) == KCR_OK) {
        atomic_store(&got, 1);
        kcr_workqueue_done(arg, key);
    } else {
        atomic_store(&got, -1);
    }
    return NULL;
}

Test(workqueue_clock, a_blocked_getter_sees_virtual_time_pass, .init = kit_setup,
     .fini = kit_teardown)
{
    atomic_store(&got, 0);
    kcr_workqueue *q = payload_queue(kcr_testkit_clock(tk), NULL);
    cr_assert_eq(kcr_workqueue_add(q, "a", &(kcr_workqueue_add_options){.delay_ms = 60000}),
                 KCR_OK);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, getter, q), 0);
    struct timespec ms = {0, 1000000};
    for (int i = 0; i < 20; i++)
        nanosleep(&ms, NULL);
    cr_assert_eq(atomic_load(&got), 0, "not due on the virtual clock yet");
    kcr_testkit_advance(tk, 60000);
    int64_t until = kcr__now_ns() + 10 * KCR_NS_PER_S;
    while (atomic_load(&got) == 0 && kcr__now_ns() < until)
        nanosleep(&ms, NULL);
    cr_assert_eq(atomic_load(&got), 1, "the getter took the key once virtual time passed");
    test_join(t, 30000, "thread t"); /* bounded: the getter gives up after 20 s */
    kcr_workqueue_free(q);
}
