/* Metrics: a small Prometheus registry (counters, gauges, histograms with
 * labels) and its text exposition, plus ready-made hooks that feed it from a
 * workqueue and from a client. Part of libkcr (no HTTP here: the optional
 * kcr_http library serves it, see kcr/health.h).
 *
 * A family is one metric name with a fixed set of label names; a series is
 * one label-value combination of it, created at zero on first use and never
 * removed, so every series a program touches at start is exported from the
 * first scrape on. Series handles are stable: look one up once, then update
 * it lock-free from any thread.
 *
 * Thread-safety: every function is thread-safe except kcr_metrics_free. */
#ifndef KCR_METRICS_H
#define KCR_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "kcr/client.h"
#include "kcr/error.h"
#include "kcr/export.h"
#include "kcr/workqueue.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kcr_metrics kcr_metrics;
typedef struct kcr_metric_family kcr_metric_family;
typedef struct kcr_metric kcr_metric; /* one series */

typedef enum kcr_metric_type {
    KCR_METRIC_COUNTER = 1,
    KCR_METRIC_GAUGE = 2,
    KCR_METRIC_HISTOGRAM = 3
} kcr_metric_type;

/* Zero means default for every field. */
typedef struct kcr_metrics_options {
    size_t max_series_per_family; /* 0: 10000; past it new label sets are refused
                                     (KCR_ERR_TOO_LARGE) */
} kcr_metrics_options;

/* A family's description; strings and arrays are copied. */
typedef struct kcr_metric_desc {
    const char *name; /* [a-zA-Z_:][a-zA-Z0-9_:]* */
    const char *help;
    kcr_metric_type type;
    const char *const *label_names; /* n_labels names, [a-zA-Z_][a-zA-Z0-9_]* */
    size_t n_labels;
    const double *buckets; /* histograms: ascending upper bounds (+Inf implied);
                              NULL: .005 .01 .025 .05 .1 .25 .5 1 2.5 5 10 */
    size_t n_buckets;
} kcr_metric_desc;

/* A new empty registry into *out, which the caller frees with
 * kcr_metrics_free. opts may be NULL (defaults); it is copied. Thread-safe. */
KCR_API kcr_err kcr_metrics_new(size_t opts_size, const kcr_metrics_options *opts,
                                kcr_metrics **out);
#define kcr_metrics_new(...) (kcr_metrics_new)(sizeof(kcr_metrics_options), __VA_ARGS__)

/* Frees the registry, its families and series. No other call may run. */
KCR_API void kcr_metrics_free(kcr_metrics *m);

/* Registers a family. Registering the same name again with the same type,
 * labels and buckets returns the existing family; with a different shape
 * KCR_ERR_EXISTS. KCR_ERR_INVALID for bad names. *out is owned by the
 * registry. */
KCR_API kcr_err kcr_metrics_register(kcr_metrics *m, const kcr_metric_desc *desc,
                                     kcr_metric_family **out);

/* The series of `f` with these label values (n_labels strings, copied),
 * created at zero if new. *out is owned by the registry, valid until
 * kcr_metrics_free. */
KCR_API kcr_err kcr_metric_family_series(kcr_metric_family *f, const char *const *label_values,
                                         kcr_metric **out);

/* Counter: +1 / +v (v >= 0). Gauge: +v (any sign) / set. Histogram:
 * observe. A call of the wrong kind for the series is ignored. Lock-free,
 * safe from any thread. */
KCR_API void kcr_metric_inc(kcr_metric *s);
KCR_API void kcr_metric_add(kcr_metric *s, double v);
KCR_API void kcr_metric_set(kcr_metric *s, double v);
KCR_API void kcr_metric_observe(kcr_metric *s, double v);

/* A counter's or gauge's value; a histogram's sample count. */
KCR_API double kcr_metric_value(const kcr_metric *s);

/* Runs `collect` right before each exposition (to refresh gauges such as
 * cache sizes), on the thread writing the exposition. Collectors of
 * concurrent expositions never overlap (they run under the registry's
 * collector lock, and no other kcr lock): a collector may read-then-update a
 * series, and may use the registry, but must not write the exposition. */
KCR_API kcr_err kcr_metrics_add_collector(kcr_metrics *m,
                                          void (*collect)(kcr_metrics *m, void *user_data),
                                          void *user_data);

/* The Prometheus text exposition format 0.0.4 of every family (HELP, TYPE,
 * series sorted by labels; histograms with _bucket{le=...}, _sum, _count).
 * *out is malloc'd (caller frees), *len (may be NULL) its length. */
KCR_API kcr_err kcr_metrics_write_text(kcr_metrics *m, char **out, size_t *len);

/* Fills *out with workqueue callbacks recording controller-runtime's
 * workqueue_* families (kcr/workqueue.h) for the queue `queue_name` with
 * labels name=<queue_name>, controller=<controller> (and priority on
 * workqueue_depth), every series zero from now on. The hooks' state belongs
 * to the registry. Pass *out as kcr_workqueue_options.metrics. */
KCR_API kcr_err kcr_metrics_workqueue_hooks(kcr_metrics *m, const char *queue_name,
                                            const char *controller, kcr_workqueue_metrics *out);

/* An observer recording rest_client_requests_total{code,method,host} and
 * rest_client_request_duration_seconds{verb,host}: install it with
 * kcr_client_set_request_observer(client, *fn, *user_data). */
KCR_API kcr_err kcr_metrics_client_observer(kcr_metrics *m, kcr_request_observer_fn *fn,
                                            void **user_data);

#ifdef __cplusplus
}
#endif

#endif
