/* Lock-free series updates: a value is a double kept as its bit pattern in
 * an atomic uint64_t, changed by compare-and-swap; a histogram counts hits
 * per bucket (its count is their sum, so buckets and count always agree). */
#include <math.h>
#include <string.h>

#include "metrics/metrics_impl.h"

uint64_t kcr__metric_bits(double v)
{
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    return b;
}

double kcr__metric_double(uint64_t bits)
{
    double v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

static void add_double(_Atomic uint64_t *a, double v)
{
    uint64_t old = atomic_load_explicit(a, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(a, &old,
                                                  kcr__metric_bits(kcr__metric_double(old) + v),
                                                  memory_order_relaxed, memory_order_relaxed))
        ;
}

void kcr_metric_add(kcr_metric *s, double v)
{
    if (!s)
        return;
    kcr_metric_type t = s->family->type;
    if (t == KCR_METRIC_GAUGE || (t == KCR_METRIC_COUNTER && v >= 0))
        add_double(&s->value, v);
}

void kcr_metric_inc(kcr_metric *s)
{
    kcr_metric_add(s, 1);
}

void kcr_metric_set(kcr_metric *s, double v)
{
    if (s && s->family->type == KCR_METRIC_GAUGE)
        atomic_store_explicit(&s->value, kcr__metric_bits(v), memory_order_relaxed);
}

void kcr_metric_observe(kcr_metric *s, double v)
{
    if (!s || s->family->type != KCR_METRIC_HISTOGRAM)
        return;
    const double *b = s->family->buckets;
    size_t lo = 0, hi = s->family->n_buckets; /* first bound >= v; NaN lands above all */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (b[mid] < v || isnan(v))
            lo = mid + 1;
        else
            hi = mid;
    }
    atomic_fetch_add_explicit(&s->bucket_hits[lo], 1, memory_order_relaxed);
    add_double(&s->value, v);
}

uint64_t kcr__metric_histogram_count(const kcr_metric *s)
{
    uint64_t n = 0;
    for (size_t i = 0; i <= s->family->n_buckets; i++)
        n += atomic_load_explicit(&s->bucket_hits[i], memory_order_relaxed);
    return n;
}

double kcr_metric_value(const kcr_metric *s)
{
    if (!s)
        return 0;
    if (s->family->type == KCR_METRIC_HISTOGRAM)
        return (double)kcr__metric_histogram_count(s);
    return kcr__metric_double(atomic_load_explicit(&s->value, memory_order_relaxed));
}
