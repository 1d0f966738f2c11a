/* The manager's metrics: controller-runtime's controller_runtime_* series
 * per controller (zero from the start), the workqueue_* hooks, leader
 * status, rest_client_* through the client observer, and kcr's own cache,
 * reflector and event-recorder series, refreshed by a collector before
 * each scrape. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "controller/manager_internal.h"
#include "core/error.h"

/* controller-runtime's reconcile_time_seconds buckets. */
static const double reconcile_buckets[] = {
    0.005, 0.01, 0.025, 0.05, 0.1,  0.15, 0.2,  0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6,
    0.7,   0.8,  0.9,   1.0,  1.25, 1.5,  1.75, 2.0,  2.5, 3.0,  3.5, 4.0,  4.5, 5,
    6,     7,    8,     9,    10,   15,   20,   25,   30,  40,   50,  60};

static kcr_err series(kcr_metrics *m, const char *name, const char *help, kcr_metric_type type,
                      const char *const *labels, size_t n, const char *const *values,
                      kcr_metric **out)
{
    kcr_metric_desc d = {
        .name = name, .help = help, .type = type, .label_names = labels, .n_labels = n};
    if (type == KCR_METRIC_HISTOGRAM) {
        d.buckets = reconcile_buckets;
        d.n_buckets = sizeof reconcile_buckets / sizeof *reconcile_buckets;
    }
    kcr_metric_family *f = NULL;
    kcr_err err = kcr_metrics_register(m, &d, &f);
    return err == KCR_OK ? kcr_metric_family_series(f, values, out) : err;
}

kcr_err kcr__instrument_controller(mgr_ctl *mc, kcr_workqueue_metrics *wq_hooks)
{
    kcr_metrics *m = mc->m->metrics;
    const char *name = mc->c->name;
    static const char *const ctl_l[] = {"controller"};
    static const char *const res_l[] = {"controller", "result"};
    const char *ctl_v[] = {name};
    ctl_series *s = &mc->series;
    struct {
        const char *result;
        kcr_metric **out;
    } results[] = {{"success", &s->success},
                   {"error", &s->error},
                   {"requeue", &s->requeue},
                   {"requeue_after", &s->requeue_after}};
    kcr_err err = KCR_OK;
    for (size_t i = 0; err == KCR_OK && i < sizeof results / sizeof *results; i++) {
        const char *v[] = {name, results[i].result};
        err = series(m, "controller_runtime_reconcile_total",
                     "Total number of reconciliations per controller", KCR_METRIC_COUNTER, res_l, 2,
                     v, results[i].out);
    }
    if (err == KCR_OK)
        err = series(m, "controller_runtime_reconcile_errors_total",
                     "Total number of reconciliation errors per controller", KCR_METRIC_COUNTER,
                     ctl_l, 1, ctl_v, &s->errors);
    if (err == KCR_OK)
        err = series(m, "controller_runtime_terminal_reconcile_errors_total",
                     "Total number of terminal reconciliation errors per controller",
                     KCR_METRIC_COUNTER, ctl_l, 1, ctl_v, &s->terminal);
    if (err == KCR_OK)
        err = series(m, "controller_runtime_reconcile_timeouts_total",
                     "Total number of reconciliation timeouts per controller", KCR_METRIC_COUNTER,
                     ctl_l, 1, ctl_v, &s->timeouts);
    if (err == KCR_OK)
        err = series(m, "controller_runtime_reconcile_time_seconds",
                     "Length of time per reconciliation per controller", KCR_METRIC_HISTOGRAM,
                     ctl_l, 1, ctl_v, &s->time);
    if (err == KCR_OK)
        err = series(m, "controller_runtime_max_concurrent_reconciles",
                     "Maximum number of concurrent reconciles per controller", KCR_METRIC_GAUGE,
                     ctl_l, 1, ctl_v, &s->max_concurrent);
    if (err == KCR_OK)
        err = series(m, "controller_runtime_active_workers",
                     "Number of currently used workers per controller", KCR_METRIC_GAUGE, ctl_l, 1,
                     ctl_v, &s->active);
    if (err == KCR_OK) {
        kcr_metric_set(s->max_concurrent, mc->n_w);
        err = kcr_metrics_workqueue_hooks(m, name, name, wq_hooks);
    }
    return err;
}

void kcr__instrument_reconcile(mgr_ctl *mc, kcr__outcome out, double seconds, bool timed_out)
{
    ctl_series *s = &mc->series;
    switch (out) {
    case KCR__OUT_SUCCESS:
        kcr_metric_inc(s->success);
        break;
    case KCR__OUT_REQUEUE_AFTER:
        kcr_metric_inc(s->requeue_after);
        break;
    case KCR__OUT_REQUEUE:
        kcr_metric_inc(s->requeue);
        break;
    case KCR__OUT_TERMINAL: /* an error too, as controller-runtime counts it */
        kcr_metric_inc(s->terminal);
        kcr_metric_inc(s->error);
        kcr_metric_inc(s->errors);
        break;
    case KCR__OUT_ERROR:
        kcr_metric_inc(s->error);
        kcr_metric_inc(s->errors);
        break;
    }
    if (timed_out)
        kcr_metric_inc(s->timeouts);
    kcr_metric_observe(s->time, seconds);
}

/* ---- kcr's own series, refreshed before each scrape ---- */

typedef struct own_series {
    kcr_metric_family *objects, *bytes, *lists, *watches, *relists, *dropped;
    kcr_metric_family *shard_mode, *shard_filtered;
    kcr_metric_family *routing, *ryw_waits, *ryw_timeouts;
} own_series;

/* kcr_controller_routing_errors_total{reason}: stats fields by label. */
static const struct {
    const char *reason;
    size_t offset;
} routing_reasons[] = {
    {"garbage_result", offsetof(kcr_controller_stats, garbage_results)},
    {"predicate_error", offsetof(kcr_controller_stats, predicate_errors)},
    {"map_error", offsetof(kcr_controller_stats, map_errors)},
    {"invalid_key", offsetof(kcr_controller_stats, invalid_keys)},
};

/* Sets a counter to an absolute value it only ever grows to. */
static void counter_to(kcr_metric *s, double v)
{
    double cur = kcr_metric_value(s);
    if (v > cur)
        kcr_metric_add(s, v - cur);
}

static kcr_metric *get(kcr_metric_family *f, const char *const *values)
{
    kcr_metric *s = NULL;
    return kcr_metric_family_series(f, values, &s) == KCR_OK ? s : NULL;
}

static void collect(kcr_metrics *metrics, void *ud)
{
    (void)metrics;
    kcr_manager *m = ud;
    own_series *o = m->own;
    for (size_t i = 0; i < m->n_ctls; i++) {
        mgr_ctl *mc = m->ctls[i];
        for (size_t j = 0; j < mc->c->n_sources; j++) {
            const kcr__source *s = &mc->c->sources[j];
            const char *v[] = {s->resource, s->group, s->ns ? s->ns : ""};
            kcr_store *st = kcr_informer_store(mc->infs[j]);
            kcr_object_list all = {0};
            double bytes = 0;
            if (kcr_store_list(st, &all) == KCR_OK)
                for (size_t k = 0; k < all.len; k++)
                    bytes += (double)kcr_object_memory_size(all.items[k]);
            kcr_metric *x;
            if ((x = get(o->objects, v)))
                kcr_metric_set(x, (double)all.len);
            if ((x = get(o->bytes, v)))
                kcr_metric_set(x, bytes);
            kcr_object_list_free(&all);
            kcr_reflector_stats rs;
            kcr_reflector_get_stats(kcr_informer_reflector(mc->infs[j]), &rs);
            if ((x = get(o->lists, v)))
                counter_to(x, (double)rs.list_requests);
            if ((x = get(o->watches, v)))
                counter_to(x, (double)rs.watch_requests);
            if ((x = get(o->relists, v)))
                counter_to(x, rs.lists > 1 ? (double)(rs.lists - 1) : 0);
            if ((x = get(o->shard_mode, v)))
                kcr_metric_set(x, (double)rs.shard_mode);
            if ((x = get(o->shard_filtered, v)))
                counter_to(x, (double)rs.shard_filtered);
        }
        kcr_controller_stats cs;
        kcr_controller_get_stats(mc->c, &cs);
        for (size_t k = 0; k < sizeof routing_reasons / sizeof *routing_reasons; k++) {
            const char *v[] = {mc->c->name, routing_reasons[k].reason};
            kcr_metric *x = get(o->routing, v);
            if (x)
                counter_to(x, (double)*(const uint64_t *)((const char *)&cs +
                                                            routing_reasons[k].offset));
        }
        const char *cv[] = {mc->c->name};
        kcr_metric *x;
        if ((x = get(o->ryw_waits, cv)))
            counter_to(x, (double)cs.ryw_waits);
        if ((x = get(o->ryw_timeouts, cv)))
            counter_to(x, (double)cs.ryw_timeouts);
    }
    if (m->recorder) {
        kcr_event_recorder_stats es;
        kcr_event_recorder_get_stats(m->recorder, &es);
        kcr_metric *x;
        const char *full[] = {"queue_full"}, *spam[] = {"spam"};
        if ((x = get(o->dropped, full)))
            counter_to(x, (double)es.dropped_full);
        if ((x = get(o->dropped, spam)))
            counter_to(x, (double)es.dropped_spam);
    }
}

static kcr_err family(kcr_metrics *m, const char *name, const char *help, kcr_metric_type type,
                      const char *const *labels, size_t n, kcr_metric_family **out)
{
    kcr_metric_desc d = {
        .name = name, .help = help, .type = type, .label_names = labels, .n_labels = n};
    return kcr_metrics_register(m, &d, out);
}

kcr_err kcr__instrument_manager(kcr_manager *m)
{
    own_series *o = calloc(1, sizeof *o);
    if (!o)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory registering metrics");
    m->own = o;
    static const char *const cache_l[] = {"resource", "group", "namespace"};
    static const char *const drop_l[] = {"reason"};
    static const char *const le_l[] = {"name"};
    kcr_err err = family(m->metrics, "kcr_cache_objects", "Objects held per cache",
                         KCR_METRIC_GAUGE, cache_l, 3, &o->objects);
    if (err == KCR_OK)
        err = family(m->metrics, "kcr_cache_bytes", "Bytes of the objects held per cache",
                     KCR_METRIC_GAUGE, cache_l, 3, &o->bytes);
    if (err == KCR_OK)
        err = family(m->metrics, "kcr_reflector_list_requests_total",
                     "LIST requests per cache (pages count one each)", KCR_METRIC_COUNTER, cache_l,
                     3, &o->lists);
    if (err == KCR_OK)
        err = family(m->metrics, "kcr_reflector_watch_requests_total", "WATCH requests per cache",
                     KCR_METRIC_COUNTER, cache_l, 3, &o->watches);
    if (err == KCR_OK)
        err = family(m->metrics, "kcr_reflector_relists_total",
                     "Initial states listed again after the first (410 Gone, errors)",
                     KCR_METRIC_COUNTER, cache_l, 3, &o->relists);
    if (err == KCR_OK)
        err = family(m->metrics, "kcr_cache_shard_selector_mode",
                     "Who applies the cache's shard selector: 0 none (no selector, or not listed "
                     "yet), 1 the apiserver, 2 the client (the apiserver ignored it)",
                     KCR_METRIC_GAUGE, cache_l, 3, &o->shard_mode);
    if (err == KCR_OK)
        err = family(m->metrics, "kcr_cache_shard_filtered_total",
                     "List items and watch events outside the cache's shard selector dropped "
                     "client-side",
                     KCR_METRIC_COUNTER, cache_l, 3, &o->shard_filtered);
    if (err == KCR_OK)
        err = family(m->metrics, "kcr_events_dropped_total",
                     "Events the recorder dropped (queue full, spam limit)", KCR_METRIC_COUNTER,
                     drop_l, 1, &o->dropped);
    static const char *const routing_l[] = {"controller", "reason"};
    static const char *const ctl_l[] = {"controller"};
    if (err == KCR_OK)
        err = family(m->metrics, "kcr_controller_routing_errors_total",
                     "Results and routing outside the contract (garbage results, failing "
                     "predicates and map functions, invalid keys), each logged once",
                     KCR_METRIC_COUNTER, routing_l, 2, &o->routing);
    if (err == KCR_OK)
        err = family(m->metrics, "kcr_controller_read_your_writes_waits_total",
                     "Reconciles that first waited for the cache to see their key's writes",
                     KCR_METRIC_COUNTER, ctl_l, 1, &o->ryw_waits);
    if (err == KCR_OK)
        err = family(m->metrics, "kcr_controller_read_your_writes_timeouts_total",
                     "Of those, waits that gave up at read_your_writes_timeout_ms",
                     KCR_METRIC_COUNTER, ctl_l, 1, &o->ryw_timeouts);
    if (err == KCR_OK) {
        const char *full[] = {"queue_full"}, *spam[] = {"spam"};
        err = get(o->dropped, full) && get(o->dropped, spam)
                  ? KCR_OK
                  : kcr__fail(KCR_ERR_NOMEM, "out of memory for the dropped-events series");
    }
    if (err == KCR_OK && m->opts.leader_election) {
        const char *v[] = {m->le_id};
        err = series(m->metrics, "leader_election_master_status",
                     "Gauge of if the reporting system is master of the relevant lease, 0 "
                     "indicates backup, 1 indicates master. 'name' is the string used to identify "
                     "the lease.",
                     KCR_METRIC_GAUGE, le_l, 1, v, &m->leader_status);
    }
    if (err == KCR_OK)
        err = kcr_metrics_add_collector(m->metrics, collect, m);
    if (err == KCR_OK) {
        kcr_request_observer_fn fn;
        void *ud;
        err = kcr_metrics_client_observer(m->metrics, &fn, &ud);
        if (err == KCR_OK)
            kcr_client_set_request_observer(m->client, fn, ud);
    }
    return err;
}

/* Creates the cache series of a controller's sources at zero. */
kcr_err kcr__instrument_caches(mgr_ctl *mc)
{
    own_series *o = mc->m->own;
    const char *cv[] = {mc->c->name};
    if (!get(o->ryw_waits, cv) || !get(o->ryw_timeouts, cv))
        return kcr__fail(KCR_ERR_NOMEM, "out of memory registering controller metrics");
    for (size_t k = 0; k < sizeof routing_reasons / sizeof *routing_reasons; k++) {
        const char *v[] = {mc->c->name, routing_reasons[k].reason};
        if (!get(o->routing, v))
            return kcr__fail(KCR_ERR_NOMEM, "out of memory registering controller metrics");
    }
    for (size_t j = 0; j < mc->c->n_sources; j++) {
        const kcr__source *s = &mc->c->sources[j];
        const char *v[] = {s->resource, s->group, s->ns ? s->ns : ""};
        if (!get(o->objects, v) || !get(o->bytes, v) || !get(o->lists, v) || !get(o->watches, v) ||
            !get(o->relists, v) || !get(o->shard_mode, v) || !get(o->shard_filtered, v))
            return kcr__fail(KCR_ERR_NOMEM, "out of memory registering cache metrics");
    }
    return KCR_OK;
}
