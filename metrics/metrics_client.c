/* kcr_metrics_client_observer: a kcr_request_observer_fn recording client-go's
 * rest_client_requests_total{code,method,host} (code "<error>" when no
 * response came) and rest_client_request_duration_seconds{verb,host}, one
 * count and one observation per HTTP attempt, as client-go does. */
#include <stdio.h>
#include <stdlib.h>

#include "metrics/metrics_impl.h"
#include "core/error.h"

/* client-go's (component-base) request latency buckets, in seconds. */
static const double latency_buckets[] = {0.005, 0.025, 0.1, 0.25, 0.5, 1.0,
                                         2.0,   4.0,   8.0, 15.0, 30.0, 60.0};

typedef struct client_hooks {
    kcr_metric_family *requests, *duration;
} client_hooks;

static void observe(const char *method, const char *host, int code, double seconds,
                    void *user_data)
{
    client_hooks *h = user_data;
    char code_s[16] = "<error>";
    if (code > 0)
        snprintf(code_s, sizeof code_s, "%d", code);
    method = method ? method : "";
    host = host ? host : "none";
    kcr_metric *s;
    const char *result[] = {code_s, method, host};
    if (kcr_metric_family_series(h->requests, result, &s) == KCR_OK)
        kcr_metric_inc(s);
    const char *latency[] = {method, host};
    if (kcr_metric_family_series(h->duration, latency, &s) == KCR_OK)
        kcr_metric_observe(s, seconds);
}

kcr_err kcr_metrics_client_observer(kcr_metrics *m, kcr_request_observer_fn *fn,
                                    void **user_data)
{
    if (!m || !fn || !user_data)
        return kcr__fail(KCR_ERR_INVALID, "kcr_metrics_client_observer: NULL argument");
    static const char *const result_labels[] = {"code", "method", "host"};
    static const char *const latency_labels[] = {"verb", "host"};
    const kcr_metric_desc requests = {
        "rest_client_requests_total",
        "Number of HTTP requests, partitioned by status code, method, and host.",
        KCR_METRIC_COUNTER, result_labels, 3, NULL, 0};
    const kcr_metric_desc duration = {"rest_client_request_duration_seconds",
                                      "Request latency in seconds. Broken down by verb, and host.",
                                      KCR_METRIC_HISTOGRAM, latency_labels, 2, latency_buckets,
                                      sizeof latency_buckets / sizeof *latency_buckets};
    client_hooks *h = calloc(1, sizeof *h);
    if (!h)
        return kcr__fail(KCR_ERR_NOMEM, "kcr_metrics_client_observer: out of memory");
    kcr_err err;
    if ((err = kcr_metrics_register(m, &requests, &h->requests)) != KCR_OK ||
        (err = kcr_metrics_register(m, &duration, &h->duration)) != KCR_OK) {
        free(h);
        return err;
    }
    if ((err = kcr__metrics_own(m, h, free)) != KCR_OK)
        return err;
    *fn = observe;
    *user_data = h;
    return KCR_OK;
}
