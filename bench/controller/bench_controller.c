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
 *       "p50_ms=<ms> p99_ms=<ms> updates=<n> rss_mb=<MB> cpu_us=<us> events=<n> vcsw=<n>"
 *       once UPDATES updated ConfigMaps were reconciled (or after 300 s:
 *       exit 1). cpu_us is the process's user + system CPU time
 *       (getrusage) from "ready" to the last update's reconcile, events the
 *       reconciles in that window, vcsw its threads' voluntary context
 *       switches in that window (each a thread that slept and was woken).
 *   bench_controller replay KUBECONFIG NAMESPACE EVENTS
 *       against ./replay_server (plain http:// allowed): once every listed
 *       ConfigMap was reconciled once, reads the sentinel "replay-end" (the
 *       server's cue to stream its watch events), then stops once EVENTS
 *       reconciles saw data.replay "event" and one saw the sentinel's "end";
 *       prints "replayed=<n> reconciles=<n>" and exits 0. Run under
 *       callgrind by ./instructions.
 *
 * With KCR_TRACE=FILE in the environment, the library writes its per-stage
 * trace to FILE at exit (core/trace.h) and churn writes FILE.sent: one line
 * "key sent_ns reconciled_ns" (wall clock) per measured update, for
 * ./tracereport to join. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "kcr/kcr.h"
#include "kcr/controller.h"

static const kcr_resource CM = {"", "v1", "configmaps"};

typedef enum bench_mode { MODE_INITIAL, MODE_CHURN, MODE_REPLAY } bench_mode;

/* What the reconciles saw; the worker writes, main reads after `done`. */
typedef struct tally {
    pthread_mutex_t mu;
    kcr_store *seen;   /* keys reconciled at least once. initial: the cache's objects
                          (shared, no memory of its own); churn, replay: stubs
                          (namespace and name only), so no replaced object is kept
                          alive past the cache's update */
    size_t total;      /* ConfigMaps in the namespace (churn, replay) */
    size_t want;       /* distinct keys (initial), updates (churn) or events (replay) */
    bench_mode mode;
    bool churning;     /* churn, replay: every ConfigMap was reconciled once */
    size_t reconciles; /* every reconcile */
    size_t window_reconciles; /* churn: reconciles after "ready" */
    int64_t cpu_start_us, cpu_end_us; /* churn: process CPU at "ready" / the last update */
    long vcsw_start, vcsw_end;        /* churn: voluntary context switches, the same points */
    size_t replayed;   /* replay: reconciles that saw data.replay "event" */
    bool replay_ended; /* replay: the sentinel's "end" was reconciled */
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

/* User + system CPU time of the whole process, in microseconds; *vcsw its
 * threads' voluntary context switches so far. */
static int64_t cpu_us(long *vcsw)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    *vcsw = ru.ru_nvcsw;
    return ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 + ru.ru_utime.tv_usec +
           ru.ru_stime.tv_usec;
}

static int64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A new object holding only obj's namespace and name (NULL: out of memory),
 * an entry of the `seen` set in churn and replay (the twin's set holds
 * names, not objects). */
static kcr_object *seen_stub(const kcr_object *obj)
{
    char json[512];
    snprintf(json, sizeof json, "{\"metadata\":{\"namespace\":\"%s\",\"name\":\"%s\"}}",
             kcr_object_namespace(obj), kcr_object_name(obj));
    kcr_object *stub = NULL;
    return kcr_object_parse(json, 0, &stub) == KCR_OK ? stub : NULL;
}

/* Replay: reads the sentinel, the replay server's cue to stream its events. */
static kcr_result replay_cue(kcr_ctx *ctx, const kcr_reconcile_request *req)
{
    kcr_object *sentinel = NULL;
    kcr_err err = kcr_client_get(kcr_ctx_client(ctx),
                                 &(kcr_request){.resource = &CM, .ns = req->ns, .name = "replay-end"},
                                 &sentinel);
    kcr_object_unref(sentinel);
    if (err != KCR_OK) {
        fprintf(stderr, "bench_controller: reading the replay sentinel: %s\n", kcr_last_error());
        exit(1);
    }
    return KCR_DONE;
}

static kcr_result reconcile(kcr_ctx *ctx, const kcr_reconcile_request *req, void *user_data)
{
    tally *t = user_data;
    kcr_object *cm = kcr_ctx_get_primary(ctx);
    if (!cm)
        return KCR_DONE;
    int64_t now = wall_ns();
    bool cue = false;
    pthread_mutex_lock(&t->mu);
    t->reconciles++;
    if (t->churning)
        t->window_reconciles++;
    kcr_object *prev = kcr_store_get(t->seen, cm);
    if (!prev) {
        kcr_object *entry = t->mode == MODE_INITIAL ? kcr_object_ref(cm) : seen_stub(cm);
        if (!entry) {
            fprintf(stderr, "bench_controller: out of memory\n");
            exit(1);
        }
        kcr_store_add(t->seen, entry);
        kcr_object_unref(entry);
        size_t seen = kcr_store_len(t->seen);
        if (t->mode == MODE_INITIAL && seen == t->want) {
            clock_gettime(CLOCK_MONOTONIC, &t->end);
            kcr_manager_stop(t->mgr);
        }
        if (t->mode != MODE_INITIAL && seen == t->total) {
            t->churning = true;
            if (t->mode == MODE_REPLAY) {
                cue = true;
            } else {
                t->cpu_start_us = cpu_us(&t->vcsw_start);
                printf("ready\n");
                fflush(stdout);
            }
            goto out;
        }
    }
    if (t->mode == MODE_REPLAY) {
        const char *marker = kcr_value_string(kcr_object_get(cm, "data.replay"), NULL);
        if (t->churning && marker && strcmp(marker, "event") == 0)
            t->replayed++;
        if (t->churning && marker && strcmp(marker, "end") == 0)
            t->replay_ended = true;
        if (t->replay_ended && t->replayed == t->want)
            kcr_manager_stop(t->mgr);
        goto out;
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
        if (t->n_latencies == t->want) {
            t->cpu_end_us = cpu_us(&t->vcsw_end);
            kcr_manager_stop(t->mgr);
        }
    }
out:
    pthread_mutex_unlock(&t->mu);
    kcr_object_unref(prev);
    kcr_object_unref(cm);
    if (cue)
        return replay_cue(ctx, req);
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
    const char *modes[] = {[MODE_INITIAL] = "initial", [MODE_CHURN] = "churn",
                           [MODE_REPLAY] = "replay"};
    int mode = argc == 5 ? 0 : 3;
    while (mode < 3 && strcmp(argv[1], modes[mode]) != 0)
        mode++;
    if (mode == 3) {
        fprintf(stderr, "usage: bench_controller initial|churn|replay KUBECONFIG NAMESPACE N\n");
        return 2;
    }
    tally t = {.mu = PTHREAD_MUTEX_INITIALIZER, .mode = (bench_mode)mode,
               .want = strtoul(argv[4], NULL, 10)};
    bool churn = t.mode == MODE_CHURN;
    t.latencies = calloc(t.want ? t.want : 1, sizeof *t.latencies);
    const char *trace = getenv("KCR_TRACE");
    if (churn && trace && *trace)
        t.sent = calloc(t.want ? t.want : 1, sizeof *t.sent);
    if ((!t.want && t.mode != MODE_REPLAY) || kcr_store_new(&t.seen) != KCR_OK || !t.latencies ||
        (trace && *trace && churn && !t.sent))
        return die("bad count or out of memory");
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    kcr_config *cfg = NULL;
    kcr_client *client = NULL;
    kcr_config_options co = {.kubeconfig = argv[2]};
    kcr_client_options cl = {.allow_insecure_http = t.mode == MODE_REPLAY};
    if (kcr_config_load_kubeconfig(&co, &cfg) != KCR_OK || kcr_client_new(cfg, &cl, &client) != KCR_OK)
        return die("client");
    kcr_config_free(cfg);
    if (t.mode != MODE_INITIAL && kcr_client_list(client, &(kcr_request){.resource = &CM, .ns = argv[3]},
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
    } else if (churn && t.n_latencies == t.want) {
        if (t.sent)
            write_sent(&t, trace);
        printf("p50_ms=%.3f p99_ms=%.3f updates=%zu rss_mb=%.1f cpu_us=%lld events=%zu "
               "vcsw=%ld\n",
               percentile(t.latencies, t.n_latencies, 0.50),
               percentile(t.latencies, t.n_latencies, 0.99), t.n_latencies, rss_mb(),
               (long long)(t.cpu_end_us - t.cpu_start_us), t.window_reconciles,
               t.vcsw_end - t.vcsw_start);
    } else if (t.mode == MODE_REPLAY && t.replay_ended && t.replayed == t.want) {
        printf("replayed=%zu reconciles=%zu\n", t.replayed, t.reconciles);
    } else if (t.mode == MODE_INITIAL && kcr_store_len(t.seen) == t.want) {
        printf("seconds=%.3f rss_mb=%.1f reconciles=%zu\n", secs, rss_mb(), kcr_store_len(t.seen));
    } else {
        rc = die("stopped before the work was done");
    }
    kcr_store_free(t.seen);
    free(t.latencies);
    free(t.sent);
    return rc;
}
