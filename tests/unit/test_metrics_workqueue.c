/* kcr_metrics_workqueue_hooks fed by a real kcr_workqueue: every
 * controller-runtime workqueue family exists at zero before the first add,
 * then follows adds, gets, dones and retries. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcr/metrics.h"
#include "kcr/workqueue.h"

static kcr_metrics *reg;
static kcr_workqueue *q;
static kcr_workqueue_metrics hooks;

#define LABELS "{name=\"q\",controller=\"ctrl\"}"
#define DEPTH "workqueue_depth{name=\"q\",controller=\"ctrl\",priority=\"\"}"

static void setup(void)
{
    cr_assert_eq(kcr_metrics_new(NULL, &reg), KCR_OK);
    cr_assert_eq(kcr_metrics_workqueue_hooks(reg, "q", "ctrl", &hooks), KCR_OK, "%s",
                 kcr_last_error());
    kcr_workqueue_options o = {.name = "q", .metrics = &hooks};
    cr_assert_eq(kcr_workqueue_new(&o, &q), KCR_OK);
}

static void teardown(void)
{
    kcr_workqueue_free(q);
    kcr_metrics_free(reg);
}

static char *scrape(void)
{
    char *out;
    cr_assert_eq(kcr_metrics_write_text(reg, &out, NULL), KCR_OK);
    return out;
}

/* The value of the sample line starting with `series` (name and labels). */
static double value_of(const char *series)
{
    char *out = scrape();
    char want[256];
    snprintf(want, sizeof want, "\n%s ", series);
    const char *at = strstr(out, want);
    cr_assert_not_null(at, "no sample %s in:\n%s", series, out);
    double v = strtod(at + strlen(want), NULL);
    free(out);
    return v;
}

Test(metrics_workqueue, every_family_is_zero_before_the_first_add, .init = setup,
     .fini = teardown)
{
    char *out = scrape();
    const char *lines[] = {
        "# HELP workqueue_adds_total Total number of adds handled by workqueue",
        "# TYPE workqueue_adds_total counter",
        "workqueue_adds_total" LABELS " 0",
        "# TYPE workqueue_depth gauge",
        DEPTH " 0",
        "# TYPE workqueue_longest_running_processor_seconds gauge",
        "workqueue_longest_running_processor_seconds" LABELS " 0",
        "# TYPE workqueue_queue_duration_seconds histogram",
        "workqueue_queue_duration_seconds_bucket{name=\"q\",controller=\"ctrl\",le=\"1e-08\"} 0",
        "workqueue_queue_duration_seconds_bucket{name=\"q\",controller=\"ctrl\",le=\"1000\"} 0",
        "workqueue_queue_duration_seconds_bucket{name=\"q\",controller=\"ctrl\",le=\"+Inf\"} 0",
        "workqueue_queue_duration_seconds_sum" LABELS " 0",
        "workqueue_queue_duration_seconds_count" LABELS " 0",
        "# TYPE workqueue_retries_total counter",
        "workqueue_retries_total" LABELS " 0",
        "# TYPE workqueue_unfinished_work_seconds gauge",
        "workqueue_unfinished_work_seconds" LABELS " 0",
        "# TYPE workqueue_work_duration_seconds histogram",
        "workqueue_work_duration_seconds_count" LABELS " 0",
    };
    for (size_t i = 0; i < sizeof lines / sizeof *lines; i++) {
        char want[256];
        snprintf(want, sizeof want, "%s\n", lines[i]);
        cr_expect_not_null(strstr(out, want), "missing \"%s\" in:\n%s", lines[i], out);
    }
    /* controller-runtime's buckets: 1e-08 .. 1000, ten times apart (12 + "+Inf") */
    int buckets = 0;
    for (const char *p = out; (p = strstr(p, "workqueue_work_duration_seconds_bucket{")); p++)
        buckets++;
    cr_assert_eq(buckets, 13, "%s", out);
    free(out);
}

Test(metrics_workqueue, values_follow_adds_gets_dones_and_retries, .init = setup,
     .fini = teardown)
{
    cr_assert_eq(kcr_workqueue_add(q, "a", NULL), KCR_OK);
    cr_assert_eq(kcr_workqueue_add(q, "b", NULL), KCR_OK);
    cr_assert_eq(kcr_workqueue_add(q, "a", NULL), KCR_OK); /* deduplicated: not an add */
    cr_assert_eq(value_of("workqueue_adds_total" LABELS), 2.0);
    cr_assert_eq(value_of(DEPTH), 2.0);

    const char *key;
    cr_assert_eq(kcr_workqueue_get_timeout(q, 0, &key), KCR_OK);
    cr_assert_str_eq(key, "a");
    cr_assert_eq(value_of(DEPTH), 1.0);
    cr_assert_eq(value_of("workqueue_queue_duration_seconds_count" LABELS), 1.0);
    cr_assert_eq(value_of("workqueue_work_duration_seconds_count" LABELS), 0.0);

    /* while "a" is processed, the refresh reports its age */
    kcr_workqueue_metrics_update(q);
    cr_assert_gt(value_of("workqueue_unfinished_work_seconds" LABELS), 0.0);
    cr_assert_gt(value_of("workqueue_longest_running_processor_seconds" LABELS), 0.0);

    cr_assert_eq(kcr_workqueue_done(q, "a"), KCR_OK);
    cr_assert_eq(value_of("workqueue_work_duration_seconds_count" LABELS), 1.0);
    cr_assert_geq(value_of("workqueue_work_duration_seconds_sum" LABELS), 0.0);
    kcr_workqueue_metrics_update(q);
    cr_assert_eq(value_of("workqueue_unfinished_work_seconds" LABELS), 0.0);
    cr_assert_eq(value_of("workqueue_longest_running_processor_seconds" LABELS), 0.0);

    cr_assert_eq(kcr_workqueue_add(q, "c",
                                   &(kcr_workqueue_add_options){.delay_ms = 3600 * 1000}), KCR_OK);
    cr_assert_eq(kcr_workqueue_add_rate_limited(q, "d"), KCR_OK);
    cr_assert_eq(value_of("workqueue_retries_total" LABELS), 2.0);

    cr_assert_eq(kcr_workqueue_get_timeout(q, 0, &key), KCR_OK);
    cr_assert_str_eq(key, "b");
    cr_assert_eq(kcr_workqueue_done(q, "b"), KCR_OK);
    cr_assert_eq(value_of("workqueue_queue_duration_seconds_count" LABELS), 2.0);
    cr_assert_eq(value_of("workqueue_work_duration_seconds_count" LABELS), 2.0);
}

Test(metrics_workqueue, per_priority_depth_takes_over_from_the_total, .init = setup,
     .fini = teardown)
{
    hooks.depth("q", 5, hooks.user_data);
    cr_assert_eq(value_of(DEPTH), 5.0);
    hooks.depth_priority("q", KCR_WQ_PRIORITY_LOW, 3, hooks.user_data);
    hooks.depth_priority("q", KCR_WQ_PRIORITY_NORMAL, 2, hooks.user_data);
    hooks.depth("q", 5, hooks.user_data);
    cr_assert_eq(value_of(DEPTH), 0.0);
    cr_assert_eq(value_of("workqueue_depth{name=\"q\",controller=\"ctrl\",priority=\"-100\"}"),
                 3.0);
    cr_assert_eq(value_of("workqueue_depth{name=\"q\",controller=\"ctrl\",priority=\"0\"}"),
                 2.0);
    hooks.depth_priority("q", KCR_WQ_PRIORITY_LOW, 1, hooks.user_data);
    cr_assert_eq(value_of("workqueue_depth{name=\"q\",controller=\"ctrl\",priority=\"-100\"}"),
                 1.0);
    /* more priorities than the hooks cache still get their series */
    for (int p = 1; p <= 40; p++)
        hooks.depth_priority("q", p, p, hooks.user_data);
    cr_assert_eq(value_of("workqueue_depth{name=\"q\",controller=\"ctrl\",priority=\"40\"}"),
                 40.0);
}

Test(metrics_workqueue, two_queues_share_the_families, .init = setup, .fini = teardown)
{
    kcr_workqueue_metrics other;
    cr_assert_eq(kcr_metrics_workqueue_hooks(reg, "q2", "ctrl2", &other), KCR_OK);
    other.adds("q2", other.user_data);
    cr_assert_eq(value_of("workqueue_adds_total{name=\"q2\",controller=\"ctrl2\"}"), 1.0);
    cr_assert_eq(value_of("workqueue_adds_total" LABELS), 0.0);
    kcr_workqueue_metrics bad;
    cr_assert_eq(kcr_metrics_workqueue_hooks(reg, NULL, "c", &bad), KCR_ERR_INVALID);
    cr_assert_eq(kcr_metrics_workqueue_hooks(reg, "q\xff", "c", &bad), KCR_ERR_INVALID);
}
