/* Workqueue metrics: callbacks receive the right values, snapshot, periodic
 * refresh of the processing gauges without a background thread. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "kcr/workqueue.h"
#include "helpers/bounded.h"

struct rec {
    pthread_mutex_t mu;
    char name[32];
    int bad_name;
    int64_t depth;
    int depth_calls;
    int adds;
    int retries;
    int queue_obs, work_obs;
    double last_queue, last_work;
    int gauge_calls;
    double unfinished, longest;
};

static void check_name(struct rec *r, const char *name)
{
    if (strcmp(name, r->name) != 0)
        r->bad_name++;
}

static void on_depth(const char *name, int64_t depth, void *ud)
{
    struct rec *r = ud;
    pthread_mutex_lock(&r->mu);
    check_name(r, name);
    r->depth = depth;
    r->depth_calls++;
    pthread_mutex_unlock(&r->mu);
}

static void on_adds(const char *name, void *ud)
{
    struct rec *r = ud;
    pthread_mutex_lock(&r->mu);
    check_name(r, name);
    r->adds++;
    pthread_mutex_unlock(&r->mu);
}

static void on_retries(const char *name, void *ud)
{
    struct rec *r = ud;
    pthread_mutex_lock(&r->mu);
    check_name(r, name);
    r->retries++;
    pthread_mutex_unlock(&r->mu);
}

static void on_queue(const char *name, double s, void *ud)
{
    struct rec *r = ud;
    pthread_mutex_lock(&r->mu);
    check_name(r, name);
    r->queue_obs++;
    r->last_queue = s;
    pthread_mutex_unlock(&r->mu);
}

static void on_work(const char *name, double s, void *ud)
{
    struct rec *r = ud;
    pthread_mutex_lock(&r->mu);
    check_name(r, name);
    r->work_obs++;
    r->last_work = s;
    pthread_mutex_unlock(&r->mu);
}

static void on_unfinished(const char *name, double s, void *ud)
{
    struct rec *r = ud;
    pthread_mutex_lock(&r->mu);
    check_name(r, name);
    r->unfinished = s;
    r->gauge_calls++;
    pthread_mutex_unlock(&r->mu);
}

static void on_longest(const char *name, double s, void *ud)
{
    struct rec *r = ud;
    pthread_mutex_lock(&r->mu);
    check_name(r, name);
    r->longest = s;
    pthread_mutex_unlock(&r->mu);
}

static kcr_workqueue *metered_queue(struct rec *r, int64_t period)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    strcpy(r->name, "jobs");
    kcr_workqueue_metrics m = {
        .depth = on_depth,
        .adds = on_adds,
        .queue_duration = on_queue,
        .work_duration = on_work,
        .unfinished_work = on_unfinished,
        .longest_running = on_longest,
        .retries = on_retries,
        .user_data = r,
        .update_period_ms = period,
    };
    kcr_workqueue_options opts = {.name = "jobs", .metrics = &m};
    kcr_workqueue *q;
    cr_assert_eq(kcr_workqueue_new(&opts, &q), KCR_OK);
    return q;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

Test(metrics, names_match_prometheus)
{
    cr_assert_str_eq(KCR_WQ_METRIC_DEPTH, "workqueue_depth");
    cr_assert_str_eq(KCR_WQ_METRIC_ADDS, "workqueue_adds_total");
    cr_assert_str_eq(KCR_WQ_METRIC_QUEUE_DURATION, "workqueue_queue_duration_seconds");
    cr_assert_str_eq(KCR_WQ_METRIC_WORK_DURATION, "workqueue_work_duration_seconds");
    cr_assert_str_eq(KCR_WQ_METRIC_UNFINISHED_WORK, "workqueue_unfinished_work_seconds");
    cr_assert_str_eq(KCR_WQ_METRIC_LONGEST_RUNNING,
                     "workqueue_longest_running_processor_seconds");
    cr_assert_str_eq(KCR_WQ_METRIC_RETRIES, "workqueue_retries_total");
}

Test(metrics, callbacks_receive_correct_values)
{
    struct rec r;
    kcr_workqueue *q = metered_queue(&r, 3600 * 1000);
    kcr_workqueue_add(q, "a", NULL);
    kcr_workqueue_add(q, "b", NULL);
    kcr_workqueue_add(q, "a", NULL); /* duplicate: no add counted */
    cr_assert_eq(r.adds, 2);
    cr_assert_eq(r.depth, 2);

    sleep_ms(20);
    const char *key;
    cr_assert_eq(test_wq_get(q, &key), KCR_OK);
    cr_assert_eq(r.depth, 1);
    cr_assert_eq(r.queue_obs, 1);
    cr_assert_geq(r.last_queue, 0.019);
    cr_assert_lt(r.last_queue, 5.0);

    /* Re-added while processing: counted as an add and in depth. */
    kcr_workqueue_add(q, "a", NULL);
    cr_assert_eq(r.adds, 3);
    cr_assert_eq(r.depth, 2);

    sleep_ms(30);
    kcr_workqueue_metrics_update(q);
    cr_assert_geq(r.unfinished, 0.029);
    cr_assert_geq(r.longest, 0.029);
    cr_assert_eq(kcr_workqueue_done(q, "a"), KCR_OK);
    cr_assert_eq(r.work_obs, 1);
    cr_assert_geq(r.last_work, 0.029);
    cr_assert_lt(r.last_work, 5.0);
    kcr_workqueue_metrics_update(q);
    cr_assert_eq(r.unfinished, 0.0, "nothing processing");
    cr_assert_eq(r.longest, 0.0);

    kcr_workqueue_add(q, "c", &(kcr_workqueue_add_options){.delay_ms = 0}); /* a plain add */
    kcr_workqueue_add(q, "e", &(kcr_workqueue_add_options){.delay_ms = 60000});
    kcr_workqueue_add_rate_limited(q, "d");
    cr_assert_eq(r.retries, 2, "the delayed add and the rate-limited one");

    kcr_workqueue_stats st;
    kcr_workqueue_get_stats(q, &st);
    cr_assert_eq(st.depth, r.depth);
    cr_assert_eq(st.adds_total, (uint64_t)r.adds);
    cr_assert_eq(st.retries_total, 2);
    cr_assert_eq(st.queue_duration_count, 1);
    cr_assert_eq(st.work_duration_count, 1);
    cr_assert_geq(st.work_duration_sum_ms, 29);
    cr_assert_eq(r.bad_name, 0);
    kcr_workqueue_free(q);
}

Test(metrics, snapshot_reports_processing_ages)
{
    kcr_workqueue_options opts = {.track_time = true};
    kcr_workqueue *q;
    cr_assert_eq(kcr_workqueue_new(&opts, &q), KCR_OK);
    const char *k1, *k2;
    kcr_workqueue_add(q, "one", NULL);
    test_wq_get(q, &k1);
    sleep_ms(30);
    kcr_workqueue_add(q, "two", NULL);
    test_wq_get(q, &k2);
    kcr_workqueue_add(q, "three", &(kcr_workqueue_add_options){.delay_ms = 3600 * 1000});
    kcr_workqueue_stats st;
    kcr_workqueue_get_stats(q, &st);
    cr_assert_eq(st.processing, 2);
    cr_assert_eq(st.waiting, 1);
    cr_assert_eq(st.queued, 0);
    cr_assert_geq(st.longest_running_processor_ms, 29);
    cr_assert_geq(st.unfinished_work_ms, st.longest_running_processor_ms);
    /* Two keys, the sum and the maximum each rounded down to ms. */
    cr_assert_leq(st.unfinished_work_ms, 2 * st.longest_running_processor_ms + 1);
    kcr_workqueue_done(q, k1);
    kcr_workqueue_done(q, k2);
    kcr_workqueue_free(q);
}

Test(metrics, without_metrics_times_stay_zero)
{
    kcr_workqueue *q;
    cr_assert_eq(kcr_workqueue_new(NULL, &q), KCR_OK);
    const char *k;
    kcr_workqueue_add(q, "x", NULL);
    test_wq_get(q, &k);
    sleep_ms(5);
    kcr_workqueue_stats st;
    kcr_workqueue_get_stats(q, &st);
    cr_assert_eq(st.processing, 1);
    cr_assert_eq(st.adds_total, 1);
    cr_assert_eq(st.longest_running_processor_ms, 0);
    cr_assert_eq(st.queue_duration_count, 0);
    kcr_workqueue_metrics_update(q); /* no callbacks: harmless */
    kcr_workqueue_done(q, k);
    kcr_workqueue_free(q);
}

struct waiter {
    kcr_workqueue *q;
    kcr_err err;
};

static void *wait_main(void *arg)
{
    struct waiter *w = arg;
    const char *key;
    w->err = test_wq_get(w->q, &key);
    return NULL;
}

Test(metrics, idle_getter_refreshes_gauges_periodically)
{
    struct rec r;
    kcr_workqueue *q = metered_queue(&r, 10);
    const char *key;
    kcr_workqueue_add(q, "slow", NULL);
    test_wq_get(q, &key); /* held by this thread */
    struct waiter w = {.q = q};
    pthread_t t;
    pthread_create(&t, NULL, wait_main, &w); /* blocks: queue empty */
    sleep_ms(150);
    pthread_mutex_lock(&r.mu);
    int calls = r.gauge_calls;
    double longest = r.longest;
    pthread_mutex_unlock(&r.mu);
    cr_assert_geq(calls, 3, "gauges refreshed %d times in 150 ms at a 10 ms period", calls);
    cr_assert_gt(longest, 0.05);
    kcr_workqueue_shutdown(q);
    test_join(t, 30000, "thread t");
    cr_assert_eq(w.err, KCR_ERR_SHUTDOWN);
    kcr_workqueue_done(q, "slow");
    kcr_workqueue_free(q);
}
