/* bench_controller: the kcr side of bench/controller (twin: ./twin, the
 * controller-runtime v0.25.3 version of the same program). A kcr_manager
 * with one controller on the ConfigMaps of one namespace, defaults
 * otherwise (one worker, managedFields stripped, priority queue on). The
 * reconcile reads the ConfigMap from the cache and, when it carries the
 * annotation kcr-bench/sent-ns (set by ./load just before it sends an
 * update), records the latency from that send to this reconcile.
 *
 *   bench_controller initial KUBECONFIG NAMESPACE N
 *       prints "seconds=<s> rss_mb=<MB> reconciles=<n>" once N distinct
 *       ConfigMaps were reconciled, timed from config load.
 *   bench_controller churn KUBECONFIG NAMESPACE UPDATES
 *       prints "ready" once every ConfigMap was reconciled once, then
 *       "p50_ms=<ms> p99_ms=<ms> updates=<n> rss_mb=<MB>" once UPDATES
 *       updated ConfigMaps were reconciled (or after 300 s: exit 1).
 *
 * With KCR_TRACE=FILE in the environment, the library writes its per-stage
 * trace to FILE at exit (core/trace.h) and churn writes FILE.sent: one line
 * "key sent_ns reconciled_ns" (wall clock) per measured update, for
 * ./tracereport to join. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kcr/kcr.h"
#include "kcr/controller.h"

static const kcr_resource CM = {"", "v1", "configmaps"};

/* What the reconciles saw; the worker writes, main reads after `done`. */
typedef struct tally {
    pthread_mutex_t mu;
    kcr_store *seen;   /* keys reconciled at least once (a set; values unused) */
    size_t total;      /* ConfigMaps in the namespace (churn) */
    size_t want;       /* distinct keys (initial) or updates (churn) */
    bool churn, churning;
    double *latencies; /* ms, `want` slots */
    struct sent {
        char key[80];
        int64_t sent_ns, reconciled_ns;
    } *sent; /* churn with KCR_TRACE: `want` slots */
    struct timespec end; /* when the initial pass reached `want` */
    size_t n_latencies;
    kcr_manager *mgr;
} tally;

static double rss_mb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0)
            kb = strtod(line + 6, NULL);
    if (f)
        fclose(f);
    return kb / 1024;
}

static int64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static kcr_result reconcile(kcr_ctx *ctx, const kcr_reconcile_request *req, void *user_data)
{
    tally *t = user_data;
    kcr_object *cm = kcr_ctx_get_primary(ctx);
    if (!cm)
        return KCR_DONE;
    int64_t now = wall_ns();
    pthread_mutex_lock(&t->mu);
    kcr_object *prev = kcr_store_get(t->seen, cm);
    if (!prev) {
        kcr_store_add(t->seen, cm);
        size_t seen = kcr_store_len(t->seen);
        if (!t->churn && seen == t->want) {
            clock_gettime(CLOCK_MONOTONIC, &t->end);
            kcr_manager_stop(t->mgr);
        }
        if (t->churn && seen == t->total) {
            t->churning = true;
            printf("ready\n");
            fflush(stdout);
            goto out;
        }
    }
    const char *sent = kcr_object_annotation(cm, "kcr-bench/sent-ns");
    if (sent && t->churning && t->n_latencies < t->want) {
        int64_t sent_ns = strtoll(sent, NULL, 10);
        if (t->sent) {
            struct sent *e = &t->sent[t->n_latencies];
            snprintf(e->key, sizeof e->key, "%s", req->key);
            e->sent_ns = sent_ns;
            e->reconciled_ns = now;
        }
        t->latencies[t->n_latencies++] = (double)(now - sent_ns) / 1e6;
        if (t->n_latencies == t->want)
            kcr_manager_stop(t->mgr);
    }
out:
    pthread_mutex_unlock(&t->mu);
    kcr_object_unref(prev);
    kcr_object_unref(cm);
    return KCR_DONE;
}

/* FILE.sent for ./tracereport (see the top comment). */
static void write_sent(const tally *t, const char *trace)
{
    char path[4096];
    snprintf(path, sizeof path, "%s.sent", trace);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return;
    }
    for (size_t i = 0; i < t->n_latencies; i++)
        fprintf(f, "%s %lld %lld\n", t->sent[i].key, (long long)t->sent[i].sent_ns,
                (long long)t->sent[i].reconciled_ns);
    fclose(f);
}

static kcr_err count_item(kcr_object *obj, void *user_data)
{
    (void)obj;
    ++*(size_t *)user_data;
    return KCR_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double percentile(double *v, size_t n, double p)
{
    qsort(v, n, sizeof *v, cmp_double);
    long i = (long)(p * (double)n + 0.5) - 1;
    if (i < 0)
        i = 0;
    if ((size_t)i >= n)
        i = (long)n - 1;
    return n ? v[i] : 0;
}

/* Stops the manager if the run takes longer than 300 s. */
static void *watchdog(void *arg)
{
    struct timespec ts = {300, 0};
    nanosleep(&ts, NULL);
    fprintf(stderr, "bench_controller: timed out after 300 s\n");
    kcr_manager_stop(arg);
    return NULL;
}

static int die(const char *what)
{
    fprintf(stderr, "bench_controller: %s: %s\n", what, kcr_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 5 || (strcmp(argv[1], "initial") != 0 && strcmp(argv[1], "churn") != 0)) {
        fprintf(stderr, "usage: bench_controller initial|churn KUBECONFIG NAMESPACE N\n");
        return 2;
    }
    tally t = {.mu = PTHREAD_MUTEX_INITIALIZER, .churn = strcmp(argv[1], "churn") == 0,
               .want = strtoul(argv[4], NULL, 10)};
    t.latencies = calloc(t.want ? t.want : 1, sizeof *t.latencies);
    const char *trace = getenv("KCR_TRACE");
    if (t.churn && trace && *trace)
        t.sent = calloc(t.want ? t.want : 1, sizeof *t.sent);
    if (!t.want || kcr_store_new(&t.seen) != KCR_OK || !t.latencies ||
        (trace && *trace && t.churn && !t.sent))
        return die("bad count or out of memory");
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    kcr_config *cfg = NULL;
    kcr_client *client = NULL;
    kcr_config_options co = {.kubeconfig = argv[2]};
    if (kcr_config_load_kubeconfig(&co, &cfg) != KCR_OK || kcr_client_new(cfg, NULL, &client) != KCR_OK)
        return die("client");
    kcr_config_free(cfg);
    if (t.churn && kcr_client_list(client, &(kcr_request){.resource = &CM, .ns = argv[3]},
                                   count_item, &t.total, NULL) != KCR_OK)
        return die("counting ConfigMaps");
    kcr_manager_options mo = {.name = "bench", .no_events = true};
    kcr_controller_options c = {
        .name = "bench",
        .primary = {.resource = CM, .kind = "ConfigMap", .ns = argv[3]},
        .reconcile = reconcile,
        .user_data = &t,
    };
    if (kcr_manager_new(client, &mo, &t.mgr) != KCR_OK ||
        kcr_manager_add_controller(t.mgr, &c, NULL) != KCR_OK)
        return die("manager");
    pthread_t dog;
    pthread_create(&dog, NULL, watchdog, t.mgr);
    pthread_detach(dog);
    kcr_err err = kcr_manager_run(t.mgr);
    double secs = (double)(t.end.tv_sec - start.tv_sec) + (double)(t.end.tv_nsec - start.tv_nsec) / 1e9;
    int rc = 0;
    if (err != KCR_OK) {
        rc = die("run");
    } else if (t.churn && t.n_latencies == t.want) {
        if (t.sent)
            write_sent(&t, trace);
        printf("p50_ms=%.3f p99_ms=%.3f updates=%zu rss_mb=%.1f\n",
               percentile(t.latencies, t.n_latencies, 0.50),
               percentile(t.latencies, t.n_latencies, 0.99), t.n_latencies, rss_mb());
    } else if (!t.churn && kcr_store_len(t.seen) == t.want) {
        printf("seconds=%.3f rss_mb=%.1f reconciles=%zu\n", secs, rss_mb(), kcr_store_len(t.seen));
    } else {
        rc = die("stopped before the work was done");
    }
    return rc;
}
