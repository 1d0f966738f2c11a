/* Rate limiters: exponential, token bucket, fast/slow, max-of, with-max-wait,
 * default, custom. Time is simulated with kcr_rate_limiter_when_at. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>

#include "kcr/workqueue.h"

/* Delays and times are in ms. */
#define MS INT64_C(1)
#define S INT64_C(1000)

static kcr_rate_limiter *exponential(int64_t base_ms, int64_t max_ms)
{
    kcr_rate_limiter *rl = NULL;
    kcr_rate_limiter_exponential_options o = {.base_delay_ms = base_ms, .max_delay_ms = max_ms};
    cr_assert_eq(kcr_rate_limiter_exponential_new(&o, &rl), KCR_OK);
    return rl;
}

static kcr_rate_limiter *bucket(double qps, int burst)
{
    kcr_rate_limiter *rl = NULL;
    kcr_rate_limiter_bucket_options o = {.qps = qps, .burst = burst};
    cr_assert_eq(kcr_rate_limiter_bucket_new(&o, &rl), KCR_OK);
    return rl;
}

static kcr_rate_limiter *fast_slow(int64_t fast_ms, int64_t slow_ms, int max_fast)
{
    kcr_rate_limiter *rl = NULL;
    cr_assert_eq(kcr_rate_limiter_fast_slow_new(fast_ms, slow_ms, max_fast, &rl), KCR_OK);
    return rl;
}

Test(ratelimit, exponential_doubles_caps_and_forgets)
{
    kcr_rate_limiter *rl = NULL;
    cr_assert_eq(kcr_rate_limiter_exponential_new(NULL, &rl), KCR_OK); /* 5 ms .. 1000 s */
    cr_assert_not_null(rl);
    int64_t want = 5 * MS;
    for (int i = 0; i < 40; i++) {
        int64_t d = kcr_rate_limiter_when(rl, "a");
        int64_t capped = want > 1000 * S ? 1000 * S : want;
        cr_assert_eq(d, capped, "failure %d: %lld ms", i, (long long)d);
        if (want <= 1000 * S)
            want *= 2;
    }
    cr_assert_eq(kcr_rate_limiter_num_requeues(rl, "a"), 40);
    cr_assert_eq(kcr_rate_limiter_num_requeues(rl, "b"), 0, "per key");
    cr_assert_eq(kcr_rate_limiter_when(rl, "b"), 5 * MS);
    kcr_rate_limiter_forget(rl, "a");
    cr_assert_eq(kcr_rate_limiter_num_requeues(rl, "a"), 0);
    cr_assert_eq(kcr_rate_limiter_when(rl, "a"), 5 * MS);
    cr_assert_eq(kcr_rate_limiter_when(rl, "a"), 10 * MS);
    cr_assert_eq(kcr_rate_limiter_when(rl, "a"), 20 * MS);
    cr_assert_eq(kcr_rate_limiter_num_requeues(rl, "b"), 1);
    kcr_rate_limiter_forget(rl, "never-seen");
    kcr_rate_limiter_free(rl);
}

Test(ratelimit, exponential_never_overflows)
{
    kcr_rate_limiter *rl = exponential(1, INT64_MAX);
    int64_t last = 0;
    for (int i = 0; i < 200; i++) {
        int64_t d = kcr_rate_limiter_when(rl, "k");
        cr_assert_geq(d, last, "step %d went down", i);
        last = d;
    }
    /* The cap saturates at the largest delay the queue can hold (INT64_MAX
     * ns, about 292 years). */
    cr_assert_eq(last, INT64_MAX / 1000000 + 1);
    kcr_rate_limiter_free(rl);
    kcr_rate_limiter *cleared = (kcr_rate_limiter *)&last;
    kcr_rate_limiter_exponential_options bad = {.base_delay_ms = -1};
    cr_assert_eq(kcr_rate_limiter_exponential_new(&bad, &cleared), KCR_ERR_INVALID);
    cr_assert_null(cleared, "*out is set to NULL on failure");
    cr_assert_str_eq(kcr_last_error(), "kcr_rate_limiter_exponential_new: negative delay");
    cr_assert_eq(kcr_rate_limiter_exponential_new(NULL, NULL), KCR_ERR_INVALID);
}

Test(ratelimit, bucket_burst_then_one_per_interval)
{
    kcr_rate_limiter *rl = NULL;
    cr_assert_eq(kcr_rate_limiter_bucket_new(NULL, &rl), KCR_OK); /* 10 qps, burst 100 */
    const int64_t t0 = 1000 * S;
    for (int i = 0; i < 100; i++)
        cr_assert_eq(kcr_rate_limiter_when_at(rl, "any", t0), 0, "burst call %d", i);
    /* Tokens are now exhausted: each next call waits one more 1/qps. */
    for (int i = 1; i <= 5; i++)
        cr_assert_eq(kcr_rate_limiter_when_at(rl, "any", t0), i * 100 * MS, "call %d", 100 + i);
    /* tokens = -5. One second later 10 came back: 5 immediate, then waits. */
    int64_t t1 = t0 + S;
    for (int i = 0; i < 5; i++)
        cr_assert_eq(kcr_rate_limiter_when_at(rl, "any", t1), 0);
    cr_assert_eq(kcr_rate_limiter_when_at(rl, "any", t1), 100 * MS);
    /* That call reserved the token of t1 + 100 ms; from t1 + 200 ms on, calls
     * spaced at the rate never wait. */
    int64_t t = t1 + 200 * MS;
    for (int i = 0; i < 20; i++, t += 100 * MS)
        cr_assert_eq(kcr_rate_limiter_when_at(rl, "any", t), 0, "paced call %d", i);
    /* A long idle refills only up to the burst. */
    t += 3600 * S;
    for (int i = 0; i < 100; i++)
        cr_assert_eq(kcr_rate_limiter_when_at(rl, "any", t), 0);
    cr_assert_eq(kcr_rate_limiter_when_at(rl, "any", t), 100 * MS);
    cr_assert_eq(kcr_rate_limiter_num_requeues(rl, "any"), 0);
    kcr_rate_limiter_forget(rl, "any");
    kcr_rate_limiter_free(rl);
}

Test(ratelimit, bucket_custom_rate)
{
    kcr_rate_limiter *rl = bucket(2, 1);
    cr_assert_eq(kcr_rate_limiter_when_at(rl, "k", 0), 0);
    cr_assert_eq(kcr_rate_limiter_when_at(rl, "k", 0), 500 * MS);
    cr_assert_eq(kcr_rate_limiter_when_at(rl, "k", 250 * MS), 750 * MS);
    kcr_rate_limiter_free(rl);
    /* 3 qps: 333.33 ms per token, rounded up to whole ms. */
    rl = bucket(3, 1);
    cr_assert_eq(kcr_rate_limiter_when_at(rl, "k", 0), 0);
    cr_assert_eq(kcr_rate_limiter_when_at(rl, "k", 0), 334 * MS);
    kcr_rate_limiter_free(rl);
    kcr_rate_limiter_bucket_options bad = {.qps = -1, .burst = 1};
    cr_assert_eq(kcr_rate_limiter_bucket_new(&bad, &rl), KCR_ERR_INVALID);
    cr_assert_str_eq(kcr_last_error(), "kcr_rate_limiter_bucket_new: negative rate or burst");
}

Test(ratelimit, fast_slow)
{
    kcr_rate_limiter *rl = fast_slow(5 * MS, 10 * S, 3);
    cr_assert_eq(kcr_rate_limiter_when(rl, "k"), 5 * MS);
    cr_assert_eq(kcr_rate_limiter_when(rl, "k"), 5 * MS);
    cr_assert_eq(kcr_rate_limiter_when(rl, "k"), 5 * MS);
    cr_assert_eq(kcr_rate_limiter_when(rl, "k"), 10 * S);
    cr_assert_eq(kcr_rate_limiter_when(rl, "k"), 10 * S);
    cr_assert_eq(kcr_rate_limiter_num_requeues(rl, "k"), 5);
    cr_assert_eq(kcr_rate_limiter_when(rl, "other"), 5 * MS);
    kcr_rate_limiter_forget(rl, "k");
    cr_assert_eq(kcr_rate_limiter_num_requeues(rl, "k"), 0);
    cr_assert_eq(kcr_rate_limiter_when(rl, "k"), 5 * MS);
    kcr_rate_limiter_free(rl);
    cr_assert_eq(kcr_rate_limiter_fast_slow_new(1, 1, -1, &rl), KCR_ERR_INVALID);
}

Test(ratelimit, max_of_takes_the_longest_and_forwards)
{
    kcr_rate_limiter *parts[] = {exponential(MS, S), fast_slow(3 * MS, 10 * S, 2)};
    kcr_rate_limiter *rl = NULL;
    cr_assert_eq(kcr_rate_limiter_max_of_new(parts, 2, &rl), KCR_OK);
    cr_assert_not_null(rl);
    cr_assert_eq(kcr_rate_limiter_when(rl, "k"), 3 * MS);  /* max(1, 3) */
    cr_assert_eq(kcr_rate_limiter_when(rl, "k"), 3 * MS);  /* max(2, 3) */
    cr_assert_eq(kcr_rate_limiter_when(rl, "k"), 10 * S);  /* max(4, 10 s) */
    cr_assert_eq(kcr_rate_limiter_num_requeues(rl, "k"), 3);
    kcr_rate_limiter_forget(rl, "k");
    cr_assert_eq(kcr_rate_limiter_num_requeues(rl, "k"), 0);
    cr_assert_eq(kcr_rate_limiter_when(rl, "k"), 3 * MS);
    kcr_rate_limiter_free(rl);

    /* A NULL part fails the call, and the other parts are freed (ASan). */
    kcr_rate_limiter *bad[] = {bucket(1, 1), NULL};
    rl = NULL;
    cr_assert_eq(kcr_rate_limiter_max_of_new(bad, 2, &rl), KCR_ERR_INVALID);
    cr_assert_null(rl);
    cr_assert_str_eq(kcr_last_error(), "kcr_rate_limiter_max_of_new: NULL limiter");
}

Test(ratelimit, with_max_wait_caps)
{
    kcr_rate_limiter *rl = NULL;
    cr_assert_eq(kcr_rate_limiter_with_max_wait_new(exponential(S, 1000 * S), 3 * S, &rl), KCR_OK);
    cr_assert_eq(kcr_rate_limiter_when(rl, "k"), 1 * S);
    cr_assert_eq(kcr_rate_limiter_when(rl, "k"), 2 * S);
    cr_assert_eq(kcr_rate_limiter_when(rl, "k"), 3 * S);
    cr_assert_eq(kcr_rate_limiter_when(rl, "k"), 3 * S);
    cr_assert_eq(kcr_rate_limiter_num_requeues(rl, "k"), 4);
    kcr_rate_limiter_forget(rl, "k");
    cr_assert_eq(kcr_rate_limiter_when(rl, "k"), 1 * S);
    kcr_rate_limiter_free(rl);
    rl = NULL;
    cr_assert_eq(kcr_rate_limiter_with_max_wait_new(NULL, S, &rl), KCR_ERR_INVALID);
    cr_assert_null(rl);
    /* A negative wait frees the inner limiter too (ASan, valgrind). */
    cr_assert_eq(kcr_rate_limiter_with_max_wait_new(bucket(1, 1), -1, &rl), KCR_ERR_INVALID);
    cr_assert_null(rl);
}

Test(ratelimit, default_is_max_of_exponential_and_bucket)
{
    kcr_rate_limiter *rl = NULL;
    cr_assert_eq(kcr_rate_limiter_default_new(&rl), KCR_OK);
    const int64_t t = 50 * S;
    char key[16];
    /* 100 distinct keys at one instant: exponential says 5 ms, bucket 0. */
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof key, "k%d", i);
        cr_assert_eq(kcr_rate_limiter_when_at(rl, key, t), 5 * MS);
    }
    /* The bucket is empty now: the 101st waits 100 ms. */
    cr_assert_eq(kcr_rate_limiter_when_at(rl, "k100", t), 100 * MS);
    /* A key failing often is governed by its own backoff. */
    cr_assert_eq(kcr_rate_limiter_when_at(rl, "k0", t + 3600 * S), 10 * MS);
    cr_assert_eq(kcr_rate_limiter_num_requeues(rl, "k0"), 2);
    kcr_rate_limiter_free(rl);
}

struct custom {
    int64_t last_now_ms;
    int calls;
    int forgets;
    int *freed;
};

static int64_t custom_when(const char *key, int64_t now_ms, void *user_data)
{
    struct custom *c = user_data;
    c->last_now_ms = now_ms;
    return ++c->calls * 7;
}

static void custom_forget(const char *key, void *user_data)
{
    ((struct custom *)user_data)->forgets++;
}

static void custom_free(void *user_data)
{
    struct custom *c = user_data;
    (*c->freed)++;
}

Test(ratelimit, custom_limiter_through_ops)
{
    int freed = 0;
    struct custom c = {.freed = &freed};
    kcr_rate_limiter_ops ops = {.when = custom_when, .forget = custom_forget, .free = custom_free};
    kcr_rate_limiter *rl = NULL;
    cr_assert_eq(kcr_rate_limiter_new(&ops, &c, &rl), KCR_OK);
    cr_assert_not_null(rl);
    cr_assert_eq(kcr_rate_limiter_when(rl, "x"), 7);
    cr_assert_eq(kcr_rate_limiter_when_at(rl, "x", 123456), 14);
    cr_assert_eq(c.last_now_ms, 123456, "when_at passes the caller's ms through");
    cr_assert_eq(kcr_rate_limiter_num_requeues(rl, "x"), 0, "no num_requeues op: 0");
    kcr_rate_limiter_forget(rl, "x");
    cr_assert_eq(c.forgets, 1);
    /* Owned by a combinator, freed with it. */
    kcr_rate_limiter *capped = NULL;
    cr_assert_eq(kcr_rate_limiter_with_max_wait_new(rl, 10, &capped), KCR_OK);
    cr_assert_eq(kcr_rate_limiter_when(capped, "x"), 10);
    cr_assert_eq(kcr_rate_limiter_when_at(capped, "x", 5000), 10);
    cr_assert_eq(c.last_now_ms, 5000, "a combinator passes ms through unchanged");
    kcr_rate_limiter_free(capped);
    cr_assert_eq(freed, 1);

    kcr_rate_limiter_ops no_when = {.free = custom_free};
    kcr_rate_limiter *none = NULL;
    cr_assert_eq(kcr_rate_limiter_new(&no_when, &c, &none), KCR_ERR_INVALID);
    cr_assert_null(none);
    cr_assert_eq(freed, 2, "user_data is freed when creation fails");
    cr_assert_str_eq(kcr_last_error(), "kcr_rate_limiter_new: ops->when is required");
    kcr_rate_limiter_ops ok = {.when = custom_when, .free = custom_free};
    cr_assert_eq(kcr_rate_limiter_new(&ok, &c, NULL), KCR_ERR_INVALID);
    cr_assert_eq(freed, 3, "user_data is freed when out is NULL");
    kcr_rate_limiter_free(NULL);
}
