/* bench_watch: the floor under bench/controller's churn latency. A bare kcr
 * watch of the namespace's ConfigMaps (one kcr_client_watch, no informer, no
 * queue, no worker): for every MODIFIED event carrying the annotation
 * kcr-bench/sent-ns (set by ./load just before it sends the update) it notes
 * the latency from that send to the event's callback, which is everything
 * the apiserver and the transport add before a controller sees the change.
 * (./load watch is the same with client-go.)
 *
 *   bench_watch KUBECONFIG NAMESPACE UPDATES
 *       lists the namespace, prints "ready", watches from the list's
 *       resourceVersion, then prints "p50_ms=<ms> p99_ms=<ms> updates=<n>"
 *       once UPDATES annotated updates were seen (exit 1 if the stream ends
 *       first: it lasts 300 s). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kcr/kcr.h"

static const kcr_resource CM = {"", "v1", "configmaps"};

typedef struct seen {
    double *latencies; /* ms */
    size_t n, want;
    struct timespec deadline;
} seen;

static int64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static kcr_err on_event(const kcr_watch_event *ev, void *user_data)
{
    seen *s = user_data;
    int64_t now = wall_ns();
    if (ev->type != KCR_WATCH_MODIFIED || !ev->object)
        return KCR_OK;
    const char *sent = kcr_object_annotation(ev->object, "kcr-bench/sent-ns");
    if (sent && s->n < s->want)
        s->latencies[s->n++] = (double)(now - strtoll(sent, NULL, 10)) / 1e6;
    return s->n == s->want ? KCR_ERR_CANCELED : KCR_OK; /* enough: stop the watch */
}

static kcr_err ignore_item(kcr_object *obj, void *user_data)
{
    (void)obj, (void)user_data;
    return KCR_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double percentile(double *v, size_t n, double p)
{
    long i = (long)(p * (double)n + 0.5) - 1;
    if (i < 0)
        i = 0;
    if ((size_t)i >= n)
        i = (long)n - 1;
    return n ? v[i] : 0;
}

static int die(const char *what)
{
    fprintf(stderr, "bench_watch: %s: %s\n", what, kcr_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: bench_watch KUBECONFIG NAMESPACE UPDATES\n");
        return 2;
    }
    seen s = {.want = strtoul(argv[3], NULL, 10)};
    s.latencies = calloc(s.want ? s.want : 1, sizeof *s.latencies);
    if (!s.want || !s.latencies)
        return die("bad count or out of memory");
    kcr_config *cfg = NULL;
    kcr_client *client = NULL;
    kcr_config_options co = {.kubeconfig = argv[1]};
    if (kcr_config_load_kubeconfig(&co, &cfg) != KCR_OK ||
        kcr_client_new(cfg, NULL, &client) != KCR_OK)
        return die("client");
    kcr_config_free(cfg);
    kcr_list_meta meta = {0};
    if (kcr_client_list(client, &(kcr_request){.resource = &CM, .ns = argv[2]}, ignore_item, NULL,
                        &meta) != KCR_OK)
        return die("list");
    printf("ready\n");
    fflush(stdout);
    /* from the list's resourceVersion: no update made after "ready" is missed */
    kcr_err err = kcr_client_watch(client,
                                   &(kcr_request){.resource = &CM,
                                                  .ns = argv[2],
                                                  .resource_version = meta.resource_version,
                                                  .timeout_ms = 300000},
                                   on_event, &s);
    kcr_list_meta_clear(&meta);
    if (err != KCR_OK && err != KCR_ERR_CANCELED)
        return die("watch");
    kcr_client_free(client);
    if (s.n < s.want)
        return die("timed out");
    qsort(s.latencies, s.n, sizeof *s.latencies, cmp_double);
    printf("p50_ms=%.3f p99_ms=%.3f updates=%zu\n", percentile(s.latencies, s.n, 0.50),
           percentile(s.latencies, s.n, 0.99), s.n);
    free(s.latencies);
    return 0;
}
