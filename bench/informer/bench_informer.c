/* bench_informer: initial sync of many ConfigMaps by a kcr informer (run by
 * bench/informer/run, next to its client-go twin).
 *
 *   bench_informer seed KUBECONFIG NAMESPACE N BYTES
 *       makes NAMESPACE hold exactly N ConfigMaps bench-<i> (i < N) with
 *       about BYTES of data each: creates the missing ones, then counts and
 *       fails unless the count is N (so use one namespace per N)
 *   bench_informer onepage KUBECONFIG NAMESPACE LIMIT RV
 *       one LIST request with limit=LIMIT at resourceVersion RV ("0" or
 *       "-" for none); prints "items=<n> continue=yes|no"
 *   bench_informer sync KUBECONFIG NAMESPACE default|list|streaming
 *       times an informer from before the kubeconfig is loaded to synced
 *       (kcr_informer_wait_for_sync wakes on the sync itself), then prints
 *       "seconds=<s> rss_mb=<VmHWM MB> objects=<n> rss_now_mb=<VmRSS MB>
 *       cpu_s=<user + sys of the process>" */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>

#include "kcr/kcr.h"

static const kcr_resource CM = {"", "v1", "configmaps"};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU time (user + sys) of every thread of the process so far. */
static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static double status_mb(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double mb = -1;
    size_t len = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, len) == 0)
            mb = strtod(line + len, NULL) / 1024.0;
    if (f)
        fclose(f);
    return mb;
}

static kcr_client *client_for(const char *kubeconfig)
{
    kcr_config_options co = {.kubeconfig = kubeconfig};
    kcr_config *cfg = NULL;
    kcr_client *c = NULL;
    kcr_client_options o = {.qps = -1};
    if (kcr_config_load_kubeconfig(&co, &cfg) != KCR_OK || kcr_client_new(cfg, &o, &c) != KCR_OK) {
        fprintf(stderr, "bench_informer: %s: %s\n", kubeconfig, kcr_last_error());
        exit(1);
    }
    kcr_config_free(cfg);
    return c;
}

typedef struct seed_job {
    kcr_client *c;
    const char *ns;
    int from, to;
    const char *value;
    int failed;
} seed_job;

static void *seed_worker(void *arg)
{
    seed_job *j = arg;
    size_t len = strlen(j->value) + 256;
    char *json = malloc(len);
    for (int i = j->from; i < j->to; i++) {
        snprintf(json, len,
                 "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
                 "\"bench-%05d\",\"labels\":{\"app\":\"kcr-bench\",\"shard\":\"%d\"}},"
                 "\"data\":{\"payload\":\"%s\"}}",
                 i, i % 16, j->value);
        kcr_err err = kcr_client_create(
            j->c, &(kcr_request){.resource = &CM, .ns = j->ns, .body = json}, NULL);
        if (err != KCR_OK && err != KCR_ERR_EXISTS) {
            fprintf(stderr, "bench_informer: create bench-%05d: %s\n", i, kcr_last_error());
            j->failed = 1;
            break;
        }
    }
    free(json);
    return NULL;
}

static kcr_err count_item(kcr_object *obj, void *ud)
{
    (void)obj;
    (*(long *)ud)++;
    return KCR_OK;
}

/* ConfigMaps in ns, following continue tokens; -1 on failure. */
static long count_all(kcr_client *c, const char *ns)
{
    long have = 0;
    char *cont = NULL;
    kcr_err err;
    do {
        kcr_list_meta meta = {0};
        err = kcr_client_list(
            c, &(kcr_request){.resource = &CM, .ns = ns, .limit = 5000, .continue_token = cont},
            count_item, &have, &meta);
        free(cont);
        cont = err == KCR_OK && meta.continue_token && *meta.continue_token
                   ? strdup(meta.continue_token)
                   : NULL;
        kcr_list_meta_clear(&meta);
    } while (cont);
    if (err != KCR_OK)
        fprintf(stderr, "bench_informer: counting ConfigMaps in %s: %s\n", ns, kcr_last_error());
    return err == KCR_OK ? have : -1;
}

static int seed(const char *kubeconfig, const char *ns, int n, int bytes)
{
    kcr_client *c = client_for(kubeconfig);
    char json[256];
    snprintf(json, sizeof json,
             "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"%s\"}}", ns);
    kcr_resource nsr = {"", "v1", "namespaces"};
    kcr_err err = kcr_client_create(c, &(kcr_request){.resource = &nsr, .body = json}, NULL);
    if (err != KCR_OK && err != KCR_ERR_EXISTS) {
        fprintf(stderr, "bench_informer: namespace %s: %s\n", ns, kcr_last_error());
        return 1;
    }
    long have = count_all(c, ns);
    if (have < 0)
        return 1;
    if (have > n) {
        fprintf(stderr,
                "bench_informer: %s holds %ld ConfigMaps, more than %d: use a namespace "
                "of its own per N\n",
                ns, have, n);
        return 1;
    }
    if (have == n) {
        fprintf(stderr, "bench_informer: %s holds exactly %d ConfigMaps, reusing them\n", ns, n);
        kcr_client_free(c);
        return 0;
    }
    fprintf(stderr, "bench_informer: creating %ld ConfigMaps of ~%d bytes in %s\n", n - have, bytes,
            ns);
    char *value = malloc((size_t)bytes + 1);
    for (int i = 0; i < bytes; i++)
        value[i] = (char)('a' + i % 26);
    value[bytes] = '\0';
    enum { WORKERS = 8 };
    seed_job jobs[WORKERS];
    pthread_t th[WORKERS];
    for (int w = 0; w < WORKERS; w++) {
        jobs[w] = (seed_job){c, ns, n * w / WORKERS, n * (w + 1) / WORKERS, value, 0};
        pthread_create(&th[w], NULL, seed_worker, &jobs[w]);
    }
    int failed = 0;
    for (int w = 0; w < WORKERS; w++) {
        pthread_join(th[w], NULL);
        failed |= jobs[w].failed;
    }
    free(value);
    have = failed ? -1 : count_all(c, ns);
    kcr_client_free(c);
    if (have != n) {
        fprintf(stderr, "bench_informer: %s holds %ld ConfigMaps, not %d\n", ns, have, n);
        return 1;
    }
    fprintf(stderr, "bench_informer: %s holds exactly %d ConfigMaps\n", ns, n);
    return 0;
}

static int onepage(const char *kubeconfig, const char *ns, long limit, const char *rv)
{
    kcr_client *c = client_for(kubeconfig);
    long items = 0;
    kcr_list_meta meta = {0};
    kcr_err err = kcr_client_list(c,
                                  &(kcr_request){.resource = &CM,
                                                 .ns = ns,
                                                 .limit = limit,
                                                 .resource_version = strcmp(rv, "-") ? rv : NULL},
                                  count_item, &items, &meta);
    if (err != KCR_OK)
        fprintf(stderr, "bench_informer: LIST: %s\n", kcr_last_error());
    else
        printf("items=%ld continue=%s\n", items,
               meta.continue_token && *meta.continue_token ? "yes" : "no");
    kcr_list_meta_clear(&meta);
    kcr_client_free(c);
    return err != KCR_OK;
}

static int sync_once(const char *kubeconfig, const char *ns, const char *mode)
{
    double t0 = now_s();
    kcr_client *c = client_for(kubeconfig);
    kcr_informer_options o = {0};
    o.reflector.ns = ns;
    o.reflector.list_mode = strcmp(mode, "streaming") == 0 ? KCR_LIST_MODE_STREAMING
                            : strcmp(mode, "list") == 0    ? KCR_LIST_MODE_PAGED
                                                           : KCR_LIST_MODE_DEFAULT;
    kcr_informer *inf = NULL;
    if (kcr_informer_new(c, &CM, &o, &inf) != KCR_OK || kcr_informer_start(inf) != KCR_OK) {
        fprintf(stderr, "bench_informer: %s\n", kcr_last_error());
        return 1;
    }
    kcr_err err = kcr_informer_wait_for_sync(inf, 600000, NULL);
    double secs = now_s() - t0;
    if (err != KCR_OK) {
        fprintf(stderr, "bench_informer: not synced: %s\n", kcr_last_error());
        return 1;
    }
    double cpu = cpu_s();
    printf("seconds=%.3f rss_mb=%.1f objects=%zu rss_now_mb=%.1f cpu_s=%.3f\n", secs,
           status_mb("VmHWM:"), kcr_store_len(kcr_informer_store(inf)), status_mb("VmRSS:"), cpu);
    fflush(stdout);
    kcr_informer_free(inf);
    kcr_client_free(c);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 6 && strcmp(argv[1], "seed") == 0)
        return seed(argv[2], argv[3], atoi(argv[4]), atoi(argv[5]));
    if (argc == 6 && strcmp(argv[1], "onepage") == 0)
        return onepage(argv[2], argv[3], atol(argv[4]), argv[5]);
    if (argc == 5 && strcmp(argv[1], "sync") == 0)
        return sync_once(argv[2], argv[3], argv[4]);
    fprintf(stderr, "usage: bench_informer seed KUBECONFIG NS N BYTES\n"
                    "       bench_informer onepage KUBECONFIG NS LIMIT RV|-\n"
                    "       bench_informer sync KUBECONFIG NS default|list|streaming\n");
    return 2;
}
