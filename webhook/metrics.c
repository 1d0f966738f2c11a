/* controller-runtime's webhook metrics (pkg/webhook/internal/metrics):
 * controller_runtime_webhook_requests_total{webhook,code},
 * controller_runtime_webhook_latency_seconds{webhook} and
 * controller_runtime_webhook_requests_in_flight{webhook}, labelled by path. */
#include <stdio.h>

#include "webhook/webhook_internal.h"


static const char *const webhook_code[] = {"webhook", "code"};
static const char *const webhook_only[] = {"webhook"};

static kcr_err family(kcr_metrics *m, const char *name, const char *help, kcr_metric_type type,
                      const char *const *labels, size_t n, kcr_metric_family **out)
{
    kcr_metric_desc d = {.name = name, .help = help, .type = type, .label_names = labels,
                         .n_labels = n};
    return kcr_metrics_register(m, &d, out);
}

kcr_err kcr__wh_metrics_register(kcr_webhook_server *s)
{
    if (!s->metrics)
        return KCR_OK;
    return family(s->metrics, "controller_runtime_webhook_requests_total",
                  "Total number of admission requests by HTTP status code.", KCR_METRIC_COUNTER,
                  webhook_code, 2, &s->requests_total);
}

kcr_err kcr__wh_metrics_route(kcr_webhook_server *s, struct kcr__wh_route *r)
{
    if (!s->metrics)
        return KCR_OK;
    kcr_metric_family *lat, *inf;
    const char *labels[] = {r->path};
    kcr_err err = family(s->metrics, "controller_runtime_webhook_latency_seconds",
                         "Histogram of the latency of processing admission requests",
                         KCR_METRIC_HISTOGRAM, webhook_only, 1, &lat);
    if (!err)
        err = family(s->metrics, "controller_runtime_webhook_requests_in_flight",
                     "Current number of admission requests being served.", KCR_METRIC_GAUGE,
                     webhook_only, 1, &inf);
    if (!err)
        err = kcr_metric_family_series(lat, labels, &r->latency);
    if (!err)
        err = kcr_metric_family_series(inf, labels, &r->in_flight);
    return err;
}

void kcr__wh_metrics_answered(kcr_webhook_server *s, const struct kcr__wh_route *r, int status,
                              int64_t start_ns)
{
    if (!s->requests_total || !r)
        return;
    char code[12];
    snprintf(code, sizeof code, "%d", status);
    const char *labels[] = {r->path, code};
    kcr_metric *m;
    if (kcr_metric_family_series(s->requests_total, labels, &m) == KCR_OK)
        kcr_metric_inc(m);
    if (r->latency)
        kcr_metric_observe(r->latency, (double)(kcr__wh_now_ns() - start_ns) / 1e9);
}
