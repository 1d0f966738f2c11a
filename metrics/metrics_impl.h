/* Internal: the metrics registry's data structures, shared by the registry
 * (metrics_registry.c), the series updates (metrics_value.c), the text
 * exposition (metrics_text.c) and the hooks (metrics_workqueue.c,
 * metrics_client.c).
 *
 * Locking: the registry's mutex guards its family array, collectors and
 * owned blocks; each family's mutex guards its series array. Families and
 * series are never removed before kcr_metrics_free, so a pointer copied out
 * under a lock stays valid without it. Series values are C11 atomics. */
#ifndef KCR_METRICS_IMPL_H
#define KCR_METRICS_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "kcr/metrics.h"

struct kcr_metric {
    kcr_metric_family *family;
    char **label_values;          /* family->n_labels copies */
    _Atomic uint64_t value;       /* counter/gauge value, histogram sum: a double's bits */
    _Atomic uint64_t *bucket_hits; /* histograms: n_buckets + 1 (the last: above every bound);
                                      per bucket, not cumulative */
};

struct kcr_metric_family {
    kcr_metrics *registry;
    char *name;
    char *help;
    kcr_metric_type type;
    char **label_names;
    size_t n_labels;
    double *buckets; /* histograms: ascending upper bounds, +Inf not included */
    size_t n_buckets;

    pthread_mutex_t lock;
    kcr_metric **series; /* sorted by label values (kcr__metric_series_cmp) */
    size_t n_series, cap_series;
};

typedef struct kcr__metrics_collector {
    void (*collect)(kcr_metrics *m, void *user_data);
    void *user_data;
} kcr__metrics_collector;

/* A block the registry frees at kcr_metrics_free (hook state). */
typedef struct kcr__metrics_owned {
    void *p;
    void (*free_fn)(void *p);
} kcr__metrics_owned;

struct kcr_metrics {
    size_t max_series;
    pthread_mutex_t collect_lock; /* held while collectors run: they never overlap */
    pthread_mutex_t lock;
    kcr_metric_family **families; /* sorted by name */
    size_t n_families, cap_families;
    kcr__metrics_collector *collectors;
    size_t n_collectors, cap_collectors;
    kcr__metrics_owned *owned;
    size_t n_owned, cap_owned;
};

/* A double's bit pattern and back (atomics hold doubles as uint64_t). */
uint64_t kcr__metric_bits(double v);
double kcr__metric_double(uint64_t bits);

/* A copy of the family's series pointers, in exposition order (malloc'd,
 * caller frees; NULL with *n 0 when empty). KCR_ERR_NOMEM. */
kcr_err kcr__metric_family_snapshot(kcr_metric_family *f, kcr_metric ***out, size_t *n);

/* A copy of the registry's family pointers, sorted by name (malloc'd,
 * caller frees). KCR_ERR_NOMEM. */
kcr_err kcr__metrics_families(kcr_metrics *m, kcr_metric_family ***out, size_t *n);

/* A copy of the registry's collectors (malloc'd, caller frees). KCR_ERR_NOMEM. */
kcr_err kcr__metrics_collectors(kcr_metrics *m, kcr__metrics_collector **out, size_t *n);

/* Hands `p` to the registry: free_fn(p) runs at kcr_metrics_free. On
 * failure (KCR_ERR_NOMEM) free_fn(p) runs at once. */
kcr_err kcr__metrics_own(kcr_metrics *m, void *p, void (*free_fn)(void *p));

/* A histogram series' sample count: the sum of its bucket hits. */
uint64_t kcr__metric_histogram_count(const kcr_metric *s);

#endif
