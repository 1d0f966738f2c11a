/* The configmap-mirror example (a controller on kcr_manager) as separate
 * processes against testenv: it mirrors through the real API, serves
 * /metrics (promtool-clean) and /readyz, stops cleanly on SIGTERM; two
 * replicas with leader election: exactly one reconciles, SIGTERM hands over
 * within retry + 1 s, SIGKILL within lease + retry + 1 s, and their logged
 * reconcile intervals never overlap. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "e2e/e2e_lib.h"

static kcr_client *client;
static char *kubeconfig;

static void setup(void)
{
    client = e2e_client("KCR_TESTENV_KUBECONFIG");
    kubeconfig = e2e_env("KCR_TESTENV_KUBECONFIG");
    cr_assert(client && kubeconfig, "no testenv: run testenv/start (see testenv/README.md)");
}

static void teardown(void)
{
    kcr_client_free(client);
    free(kubeconfig);
}

typedef struct proc {
    pid_t pid;
    char log[256];
} proc;

/* Starts configmap-mirror with its stderr in a log file. */
static void spawn(proc *p, const char *ns, const char *tag, const char *metrics, const char *probes,
                  bool leader_elect)
{
    snprintf(p->log, sizeof p->log, "%s/controller-e2e-%s-%d.log", "/tmp", tag, (int)getpid());
    p->pid = fork();
    cr_assert_geq(p->pid, 0);
    if (p->pid == 0) {
        FILE *f = freopen(p->log, "w", stderr);
        (void)f;
        const char *argv[] = {KCR_MIRROR_BIN,
                              "--kubeconfig",
                              kubeconfig,
                              "--namespace",
                              ns,
                              "--metrics-bind-address",
                              metrics,
                              "--health-probe-bind-address",
                              probes,
                              "-v",
                              leader_elect ? "--leader-elect" : NULL,
                              NULL};
        execv(KCR_MIRROR_BIN, (char *const *)argv);
        _exit(127);
    }
}

/* Waits for the process to exit (10 s at most); its exit status, or -1. */
static int reap(proc *p)
{
    int64_t until = kcr__now_ns() + 10 * KCR_NS_PER_S;
    int st = 0;
    while (kcr__now_ns() < until) {
        pid_t r = waitpid(p->pid, &st, WNOHANG);
        if (r == p->pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    kill(p->pid, SIGKILL);
    waitpid(p->pid, &st, 0);
    return -1;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static size_t collect(char *data, size_t size, size_t n, void *ud)
{
    FILE *f = ud;
    return fwrite(data, size, n, f);
}

/* GET http://127.0.0.1:port/path into `file`; the HTTP code (0: no answer). */
static long http_get(int port, const char *path, const char *file)
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    FILE *f = fopen(file, "w");
    CURL *c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, f);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
    long code = 0;
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(c);
    fclose(f);
    return code;
}

static char *slurp(const char *file)
{
    FILE *f = fopen(file, "r");
    if (!f)
        return strdup("");
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (len + 1 == cap)
            buf = realloc(buf, cap *= 2);
    }
    buf[len] = '\0';
    fclose(f);
    return buf;
}

static const char *mirror_value(const char *ns, const char *name)
{
    static char v[64];
    kcr_object *o = NULL;
    v[0] = '\0';
    if (kcr_client_get(client, &(kcr_request){.resource = &E2E_CM, .ns = ns, .name = name}, &o) ==
        KCR_OK) {
        const char *s = kcr_value_string(kcr_object_get(o, "data.v"), NULL);
        snprintf(v, sizeof v, "%s", s ? s : "");
    }
    kcr_object_unref(o);
    return v;
}

#define WAIT_UP_TO(ms, cond)                                                                       \
    do {                                                                                           \
        int64_t until_ = kcr__now_ns() + (int64_t)(ms)*KCR_NS_PER_MS;                              \
        while (!(cond) && kcr__now_ns() < until_) {                                                \
            struct timespec ts_ = {0, 20 * 1000 * 1000};                                           \
            nanosleep(&ts_, NULL);                                                                 \
        }                                                                                          \
    } while (0)

static void create_labelled(const char *ns, const char *name, const char *v)
{
    char json[256];
    snprintf(
        json, sizeof json,
        "{\"metadata\":{\"name\":\"%s\",\"labels\":{\"mirror\":\"true\"}},\"data\":{\"v\":\"%s\"}}",
        name, v);
    cr_assert_eq(kcr_client_create(
                     client, &(kcr_request){.resource = &E2E_CM, .ns = ns, .body = json}, NULL),
                 KCR_OK, "%s", kcr_last_error());
}

Test(controller_e2e, mirror_process_metrics_readyz_sigterm, .init = setup, .fini = teardown,
     .timeout = 120)
{
    char ns[64];
    cr_assert_eq(e2e_namespace(client, "mirror", ns, sizeof ns), KCR_OK);
    create_labelled(ns, "app", "1");
    int mport = free_port(), pport = free_port();
    char maddr[32], paddr[32];
    snprintf(maddr, sizeof maddr, "127.0.0.1:%d", mport);
    snprintf(paddr, sizeof paddr, "127.0.0.1:%d", pport);
    proc p;
    spawn(&p, ns, "single", maddr, paddr, false);
    WAIT_UP_TO(30000, strcmp(mirror_value(ns, "app-mirror"), "1") == 0);
    cr_assert_str_eq(mirror_value(ns, "app-mirror"), "1", "no mirror; log: %s", p.log);
    cr_assert_eq(e2e_update_cm(client, ns, "app", "2"), KCR_OK);
    WAIT_UP_TO(10000, strcmp(mirror_value(ns, "app-mirror"), "2") == 0);
    cr_assert_str_eq(mirror_value(ns, "app-mirror"), "2");
    char file[256];
    snprintf(file, sizeof file, "%s/controller-e2e-%d.out", "/tmp", (int)getpid());
    cr_assert_eq(http_get(pport, "/readyz", file), 200);
    cr_assert_eq(http_get(mport, "/metrics", file), 200);
    char *text = slurp(file);
    const char *succ =
        "controller_runtime_reconcile_total{controller=\"configmap-mirror\",result=\"success\"} ";
    const char *at = strstr(text, succ);
    cr_assert(at && atof(at + strlen(succ)) >= 2, "%s", text);
    cr_assert(strstr(text, "workqueue_depth{"), "%s", text);
    cr_assert(strstr(text, "rest_client_requests_total{"), "%s", text);
    free(text);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "promtool check metrics < %s > %s.promtool 2>&1", file, file);
    int rc = system(cmd);
    snprintf(cmd, sizeof cmd, "%s.promtool", file);
    char *out = slurp(cmd);
    cr_assert_eq(rc, 0,
                 "promtool check metrics failed (install it: cmake/install-deps, Debian "
                 "package prometheus): %s",
                 out);
    free(out);
    kill(p.pid, SIGTERM);
    cr_assert_eq(reap(&p), 0, "SIGTERM: clean exit 0; log: %s", p.log);
    unlink(file);
    unlink(cmd);
    unlink(p.log);
}

/* The [start, end] wall-clock intervals of the reconciles a log shows. */
typedef struct interval {
    long long a, b;
} interval;

static size_t intervals(const char *log, interval *out, size_t max)
{
    char *text = slurp(log);
    size_t n = 0;
    for (const char *p = text; (p = strstr(p, "wall_ms=")) && n < max; p++) {
        if (sscanf(p, "wall_ms=%lld..%lld", &out[n].a, &out[n].b) == 2)
            n++;
    }
    free(text);
    return n;
}

static bool overlaps(const interval *x, size_t nx, const interval *y, size_t ny)
{
    for (size_t i = 0; i < nx; i++)
        for (size_t j = 0; j < ny; j++)
            if (x[i].a <= y[j].b && y[j].a <= x[i].b)
                return true;
    return false;
}

Test(controller_e2e, two_replicas_one_leader_handover, .init = setup, .fini = teardown,
     .timeout = 180)
{
    char ns[64];
    cr_assert_eq(e2e_namespace(client, "mirror-le", ns, sizeof ns), KCR_OK);
    create_labelled(ns, "a", "1");
    proc p[3];
    spawn(&p[0], ns, "le0", "0", "0", true);
    spawn(&p[1], ns, "le1", "0", "0", true);
    WAIT_UP_TO(30000, strcmp(mirror_value(ns, "a-mirror"), "1") == 0);
    cr_assert_str_eq(mirror_value(ns, "a-mirror"), "1");
    create_labelled(ns, "b", "1");
    WAIT_UP_TO(10000, strcmp(mirror_value(ns, "b-mirror"), "1") == 0);
    static interval iv[3][4096];
    size_t n0 = intervals(p[0].log, iv[0], 4096), n1 = intervals(p[1].log, iv[1], 4096);
    cr_assert((n0 > 0) != (n1 > 0), "exactly one replica reconciles (%zu, %zu)", n0, n1);
    int leader = n0 > 0 ? 0 : 1, standby = 1 - leader;

    /* SIGTERM: the leader drains, releases the lease; the standby leads within retry + 1 s */
    int64_t t0 = kcr__now_ns();
    kill(p[leader].pid, SIGTERM);
    cr_assert_eq(reap(&p[leader]), 0, "log: %s", p[leader].log);
    create_labelled(ns, "c", "1");
    WAIT_UP_TO(15000, strcmp(mirror_value(ns, "c-mirror"), "1") == 0);
    int64_t took_ms = (kcr__now_ns() - t0) / KCR_NS_PER_MS;
    cr_assert_str_eq(mirror_value(ns, "c-mirror"), "1");
    cr_assert_leq(took_ms, 2000 + 1000 + 1000,
                  "hand-over took %lld ms (retry 2 s + 1 s, +1 s to "
                  "reconcile)",
                  (long long)took_ms);
    n0 = intervals(p[leader].log, iv[0], 4096);
    n1 = intervals(p[standby].log, iv[1], 4096);
    cr_assert_gt(n1, 0);
    cr_assert_not(overlaps(iv[0], n0, iv[1], n1), "reconciles of the two leaders overlapped");

    /* SIGKILL: no release; a new standby leads within lease 15 s + retry 2 s + 1 s */
    int pport = free_port();
    char paddr[32], file[256];
    snprintf(paddr, sizeof paddr, "127.0.0.1:%d", pport);
    snprintf(file, sizeof file, "/tmp/controller-e2e-le-%d.out", (int)getpid());
    spawn(&p[2], ns, "le2", "0", paddr, true);
    /* a warm standby: ready once its caches are synced, without leading */
    WAIT_UP_TO(20000, http_get(pport, "/readyz", file) == 200);
    cr_assert_eq(http_get(pport, "/readyz", file), 200, "log: %s", p[2].log);
    unlink(file);
    t0 = kcr__now_ns();
    kill(p[standby].pid, SIGKILL);
    reap(&p[standby]);
    create_labelled(ns, "d", "1");
    WAIT_UP_TO(25000, strcmp(mirror_value(ns, "d-mirror"), "1") == 0);
    took_ms = (kcr__now_ns() - t0) / KCR_NS_PER_MS;
    cr_assert_str_eq(mirror_value(ns, "d-mirror"), "1", "log: %s", p[2].log);
    cr_assert_leq(took_ms, 15000 + 2000 + 1000 + 1000, "took %lld ms", (long long)took_ms);
    size_t n2 = intervals(p[2].log, iv[2], 4096);
    n1 = intervals(p[standby].log, iv[1], 4096);
    cr_assert_not(overlaps(iv[1], n1, iv[2], n2), "reconciles of the two leaders overlapped");
    kill(p[2].pid, SIGTERM);
    cr_assert_eq(reap(&p[2]), 0);
    for (int i = 0; i < 3; i++)
        unlink(p[i].log);
}

static void *run_manager(void *m)
{
    kcr_manager_run(m);
    return NULL;
}

static kcr_result noop(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    (void)ctx, (void)req, (void)ud;
    return KCR_DONE;
}

Test(controller_e2e, readyz_names_an_unknown_resource, .init = setup, .fini = teardown,
     .timeout = 60)
{
    kcr_manager *m = NULL;
    kcr_informer_options fast = {.reflector = {.backoff_initial_ms = 50, .backoff_max_ms = 200}};
    cr_assert_eq(kcr_manager_new(client,
                                 &(kcr_manager_options){.cache_defaults = &fast, .no_events = true},
                                 &m),
                 KCR_OK);
    kcr_controller_options o = {
        .name = "things",
        /* kind and scope declared: it may start before the resource is served */
        .primary = {.resource = {"nope.example.com", "v1", "things"},
                    .kind = "Thing",
                    .scope = KCR_SCOPE_NAMESPACED},
        .reconcile = noop};
    cr_assert_eq(kcr_manager_add_controller(m, &o, NULL), KCR_OK, "%s", kcr_last_error());
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, run_manager, m), 0);
    char *msg = NULL;
    WAIT_UP_TO(20000, (free(msg), msg = NULL,
                       kcr_manager_readyz_check(&msg, m) != KCR_OK && msg && strstr(msg, "404")));
    cr_assert(msg && strstr(msg, "404") && strstr(msg, "things.nope.example.com"), "%s",
              msg ? msg : "(null)");
    free(msg);
    kcr_manager_stop(m);
    pthread_join(t, NULL);
    kcr_manager_free(m);
}

Test(controller_e2e, readyz_says_rbac_forbids_the_watch, .init = setup, .fini = teardown,
     .timeout = 60)
{
    kcr_client *limited = e2e_client("KCR_TESTENV_LIMITED_KUBECONFIG");
    cr_assert_not_null(limited);
    kcr_manager *m = NULL;
    kcr_informer_options fast = {.reflector = {.backoff_initial_ms = 50, .backoff_max_ms = 200}};
    cr_assert_eq(kcr_manager_new(limited, &(kcr_manager_options){.cache_defaults = &fast,
                                                                .no_events = true}, &m), KCR_OK);
    kcr_controller_options o = {.name = "forbidden",
                                .primary = {.resource = E2E_CM, .kind = "ConfigMap"},
                                .reconcile = noop};
    cr_assert_eq(kcr_manager_add_controller(m, &o, NULL), KCR_OK, "%s", kcr_last_error());
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, run_manager, m), 0);
    char *msg = NULL;
    WAIT_UP_TO(20000, (free(msg), msg = NULL, kcr_manager_readyz_check(&msg, m) != KCR_OK &&
                                                  msg && strstr(msg, "403")));
    /* the server's own words: 'configmaps is forbidden: User "kcr-limited" cannot list ...' */
    cr_assert(msg && strstr(msg, "403") && strstr(msg, "forbidden") && strstr(msg, "kcr-limited"),
              "%s", msg ? msg : "(null)");
    free(msg);
    kcr_manager_stop(m);
    pthread_join(t, NULL);
    kcr_manager_free(m);
    kcr_client_free(limited);
}

/* Bumps annotation n of the ConfigMap from the CACHED copy, with its
 * resourceVersion as a precondition: a stale cache read would be a 409.
 * KCR_TEST_NO_RYW=1 turns read-your-writes off to see the stale reads it
 * prevents (about half of the 20 updates conflict then). */
static atomic_int conflicts;

static kcr_result bump(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    (void)ud;
    kcr_object *cm = kcr_ctx_get_primary(ctx);
    if (!cm)
        return KCR_DONE;
    const char *n = kcr_object_annotation(cm, "n");
    int v = n ? atoi(n) : 0;
    kcr_result res = KCR_DONE;
    if (v < 20) {
        char next[16];
        snprintf(next, sizeof next, "%d", v + 1);
        kcr_object_edit *e = NULL;
        kcr_object *upd = NULL;
        kcr_err err = kcr_object_edit_new(cm, &e);
        if (err == KCR_OK)
            err = kcr_object_edit_set_annotation(e, "n", next);
        if (err == KCR_OK)
            err = kcr_object_edit_freeze(e, &upd);
        kcr_object_edit_free(e);
        if (err == KCR_OK)
            err = kcr_client_update(kcr_ctx_client(ctx),
                                    &(kcr_request){.resource = &E2E_CM, .object = upd}, NULL);
        kcr_object_unref(upd);
        if (err == KCR_ERR_CONFLICT)
            atomic_fetch_add(&conflicts, 1);
        res = err == KCR_OK ? KCR_REQUEUE_AFTER(1) : KCR_RETRY(err);
    }
    (void)req;
    kcr_object_unref(cm);
    return res;
}

Test(controller_e2e, read_your_writes_on_the_real_apiserver, .init = setup, .fini = teardown,
     .timeout = 120)
{
    char ns[64];
    cr_assert_eq(e2e_namespace(client, "ryw", ns, sizeof ns), KCR_OK);
    cr_assert_eq(e2e_create_cm(client, ns, "counter", "0"), KCR_OK);
    atomic_store(&conflicts, 0);
    kcr_manager *m = NULL;
    cr_assert_eq(kcr_manager_new(client, &(kcr_manager_options){.no_events = true}, &m), KCR_OK);
    kcr_controller *c = NULL;
    kcr_controller_options o = {.name = "bump", .primary = {.resource = E2E_CM, .ns = ns},
                                .no_read_your_writes = getenv("KCR_TEST_NO_RYW") != NULL,
                                .reconcile = bump};
    cr_assert_eq(kcr_manager_add_controller(m, &o, &c), KCR_OK, "%s", kcr_last_error());
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, run_manager, m), 0);
    kcr_object *cm = NULL;
    WAIT_UP_TO(
        60000,
        (kcr_object_unref(cm), cm = NULL,
         kcr_client_get(client, &(kcr_request){.resource = &E2E_CM, .ns = ns, .name = "counter"},
                        &cm) == KCR_OK &&
             kcr_object_annotation(cm, "n") && strcmp(kcr_object_annotation(cm, "n"), "20") == 0));
    cr_assert(cm && kcr_object_annotation(cm, "n"), "no annotation");
    cr_assert_str_eq(kcr_object_annotation(cm, "n"), "20");
    kcr_object_unref(cm);
    kcr_manager_stop(m);
    pthread_join(t, NULL);
    kcr_controller_stats st;
    kcr_controller_get_stats(c, &st);
    cr_assert_eq(atomic_load(&conflicts), 0,
                 "a reconcile acted on a stale cache read (%d conflicts)", atomic_load(&conflicts));
    cr_assert_eq(st.ryw_timeouts, 0);
    cr_assert_gt(st.ryw_waits + st.reconciles, 20);
    kcr_manager_free(m);
}
