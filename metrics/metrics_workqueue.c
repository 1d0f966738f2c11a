/* kcr_metrics_workqueue_hooks: a queue's kcr_workqueue_metrics callbacks
 * feeding controller-runtime's workqueue_* families, labelled
 * {name, controller} (workqueue_depth also {priority}). Every series is
 * created at zero when the hooks are made.
 *
 * workqueue_depth{priority=""} is the whole depth of a queue that never used
 * priorities; from the first per-priority report on, the per-priority series
 * carry the depth and the "" series stays 0, so sum(workqueue_depth) is the
 * depth either way (controller-runtime's priority queue reports only
 * per-priority series). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/metrics_impl.h"
#include "core/error.h"

/* controller-runtime's workqueue histograms: 10 ns to 1000 s, x10 apart. */
static const double duration_buckets[] = {1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3,
                                          1e-2, 1e-1, 1,    10,   100,  1000};
static const char *const labels[] = {"name", "controller"};
static const char *const depth_labels[] = {"name", "controller", "priority"};

enum { PRIORITY_CACHE = 16 };

typedef struct priority_series {
    int priority;
    kcr_metric *series;
} priority_series;

typedef struct wq_hooks {
    kcr_metric_family *depth_family;
    char *name, *controller; /* label values */
    kcr_metric *depth, *adds, *queue_duration, *work_duration, *unfinished, *longest, *retries;
    atomic_bool prioritized;
    /* Per-priority depth series seen so far; published with a CAS into the
     * first empty slot, never changed after. */
    _Atomic(priority_series *) cache[PRIORITY_CACHE];
} wq_hooks;

static void hooks_free(void *p)
{
    wq_hooks *h = p;
    for (size_t i = 0; i < PRIORITY_CACHE; i++)
        free(atomic_load(&h->cache[i]));
    free(h->name);
    free(h->controller);
    free(h);
}

static void on_depth(const char *name, int64_t depth, void *user_data)
{
    wq_hooks *h = user_data;
    if (!atomic_load_explicit(&h->prioritized, memory_order_relaxed))
        kcr_metric_set(h->depth, (double)depth);
}

/* The depth series of one priority: from the cache, else looked up and cached. */
static kcr_metric *priority_depth(wq_hooks *h, int priority)
{
    size_t i = 0;
    for (; i < PRIORITY_CACHE; i++) {
        priority_series *e = atomic_load_explicit(&h->cache[i], memory_order_acquire);
        if (!e)
            break;
        if (e->priority == priority)
            return e->series;
    }
    char prio[16];
    snprintf(prio, sizeof prio, "%d", priority);
    const char *values[] = {h->name, h->controller, prio};
    kcr_metric *s;
    if (kcr_metric_family_series(h->depth_family, values, &s) != KCR_OK)
        return NULL; /* out of memory or series: the update is lost, the queue goes on */
    priority_series *e = malloc(sizeof *e);
    if (!e)
        return s;
    *e = (priority_series){priority, s};
    for (; i < PRIORITY_CACHE; i++) {
        priority_series *expected = NULL;
        if (atomic_compare_exchange_strong_explicit(&h->cache[i], &expected, e,
                                                    memory_order_release, memory_order_acquire))
            return s;
    }
    free(e); /* cache full: this priority is looked up each time */
    return s;
}

static void on_depth_priority(const char *name, int priority, int64_t depth, void *user_data)
{
    wq_hooks *h = user_data;
    if (!atomic_exchange_explicit(&h->prioritized, true, memory_order_relaxed))
        kcr_metric_set(h->depth, 0);
    kcr_metric_set(priority_depth(h, priority), (double)depth);
}

static void on_adds(const char *name, void *user_data)
{
    kcr_metric_inc(((wq_hooks *)user_data)->adds);
}

static void on_retries(const char *name, void *user_data)
{
    kcr_metric_inc(((wq_hooks *)user_data)->retries);
}

static void on_queue_duration(const char *name, double seconds, void *user_data)
{
    kcr_metric_observe(((wq_hooks *)user_data)->queue_duration, seconds);
}

static void on_work_duration(const char *name, double seconds, void *user_data)
{
    kcr_metric_observe(((wq_hooks *)user_data)->work_duration, seconds);
}

static void on_unfinished(const char *name, double seconds, void *user_data)
{
    kcr_metric_set(((wq_hooks *)user_data)->unfinished, seconds);
}

static void on_longest(const char *name, double seconds, void *user_data)
{
    kcr_metric_set(((wq_hooks *)user_data)->longest, seconds);
}

/* Registers family `d` and creates the series for `values`. */
static kcr_err series(kcr_metrics *m, const kcr_metric_desc *d, const char *const *values,
                      kcr_metric_family **family, kcr_metric **out)
{
    kcr_metric_family *f;
    kcr_err err = kcr_metrics_register(m, d, &f);
    if (err == KCR_OK)
        err = kcr_metric_family_series(f, values, out);
    if (family)
        *family = f;
    return err;
}

static kcr_err make_series(kcr_metrics *m, wq_hooks *h)
{
    const char *const v[] = {h->name, h->controller, ""}; /* depth: no priority */
    const kcr_metric_desc depth = {KCR_WQ_METRIC_DEPTH,
                                   "Current depth of workqueue by workqueue and priority",
                                   KCR_METRIC_GAUGE, depth_labels, 3, NULL, 0};
    const kcr_metric_desc adds = {KCR_WQ_METRIC_ADDS, "Total number of adds handled by workqueue",
                                  KCR_METRIC_COUNTER, labels, 2, NULL, 0};
    const kcr_metric_desc queue = {
        KCR_WQ_METRIC_QUEUE_DURATION,
        "How long in seconds an item stays in workqueue before being requested",
        KCR_METRIC_HISTOGRAM, labels, 2, duration_buckets,
        sizeof duration_buckets / sizeof *duration_buckets};
    const kcr_metric_desc work = {KCR_WQ_METRIC_WORK_DURATION,
                                  "How long in seconds processing an item from workqueue takes.",
                                  KCR_METRIC_HISTOGRAM, labels, 2, duration_buckets,
                                  sizeof duration_buckets / sizeof *duration_buckets};
    const kcr_metric_desc unfinished = {
        KCR_WQ_METRIC_UNFINISHED_WORK,
        "How many seconds of work has been done that is in progress and hasn't been observed "
        "by work_duration. Large values indicate stuck threads. One can deduce the number of "
        "stuck threads by observing the rate at which this increases.",
        KCR_METRIC_GAUGE, labels, 2, NULL, 0};
    const kcr_metric_desc longest = {
        KCR_WQ_METRIC_LONGEST_RUNNING,
        "How many seconds has the longest running processor for workqueue been running.",
        KCR_METRIC_GAUGE, labels, 2, NULL, 0};
    const kcr_metric_desc retries = {KCR_WQ_METRIC_RETRIES,
                                     "Total number of retries handled by workqueue",
                                     KCR_METRIC_COUNTER, labels, 2, NULL, 0};
    kcr_err err;
    if ((err = series(m, &depth, v, &h->depth_family, &h->depth)) != KCR_OK ||
        (err = series(m, &adds, v, NULL, &h->adds)) != KCR_OK ||
        (err = series(m, &queue, v, NULL, &h->queue_duration)) != KCR_OK ||
        (err = series(m, &work, v, NULL, &h->work_duration)) != KCR_OK ||
        (err = series(m, &unfinished, v, NULL, &h->unfinished)) != KCR_OK ||
        (err = series(m, &longest, v, NULL, &h->longest)) != KCR_OK ||
        (err = series(m, &retries, v, NULL, &h->retries)) != KCR_OK)
        return err;
    return KCR_OK;
}

kcr_err kcr_metrics_workqueue_hooks(kcr_metrics *m, const char *queue_name,
                                    const char *controller, kcr_workqueue_metrics *out)
{
    if (!m || !queue_name || !controller || !out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_metrics_workqueue_hooks: NULL argument");
    wq_hooks *h = calloc(1, sizeof *h);
    if (!h)
        return kcr__fail(KCR_ERR_NOMEM, "kcr_metrics_workqueue_hooks: out of memory");
    h->name = strdup(queue_name);
    h->controller = strdup(controller);
    atomic_init(&h->prioritized, false);
    for (size_t i = 0; i < PRIORITY_CACHE; i++)
        atomic_init(&h->cache[i], NULL);
    if (!h->name || !h->controller) {
        hooks_free(h);
        return kcr__fail(KCR_ERR_NOMEM, "kcr_metrics_workqueue_hooks: out of memory");
    }
    kcr_err err = make_series(m, h);
    if (err != KCR_OK) {
        hooks_free(h);
        return err;
    }
    if ((err = kcr__metrics_own(m, h, hooks_free)) != KCR_OK)
        return err;
    *out = (kcr_workqueue_metrics){
        .depth = on_depth,
        .adds = on_adds,
        .queue_duration = on_queue_duration,
        .work_duration = on_work_duration,
        .unfinished_work = on_unfinished,
        .longest_running = on_longest,
        .retries = on_retries,
        .depth_priority = on_depth_priority,
        .user_data = h,
    };
    return KCR_OK;
}
