/* kcr_http over loopback with libcurl: /metrics (content type, body, and
 * `promtool check metrics` on a real scrape), /healthz and /readyz codes and
 * bodies (verbose, exclude, one check), methods, unknown paths, ports, a slow
 * check that must not block /metrics, bind failures. */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers/promtool.h"
#include "kcr/health.h"
#include "kcr/metrics.h"
#include "kcr/workqueue.h"

typedef struct resp {
    long code;
    char *body;
    size_t len;
    char type[128];
    char allow[64];
} resp;

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    resp *r = ud;
    char *b = realloc(r->body, r->len + size * n + 1);
    if (!b)
        return 0;
    memcpy(b + r->len, p, size * n);
    r->len += size * n;
    b[r->len] = '\0';
    r->body = b;
    return size * n;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    resp *r = ud;
    size_t len = size * n;
    if (len > 7 && strncasecmp(p, "Allow: ", 7) == 0)
        snprintf(r->allow, sizeof r->allow, "%.*s", (int)(len - 9), p + 7); /* no CRLF */
    return len;
}

/* One request to 127.0.0.1:port; the caller frees r.body. */
static resp request(const char *method, int port, const char *path)
{
    resp r = {0};
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    CURL *c = curl_easy_init();
    cr_assert_not_null(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    else if (strcmp(method, "POST") == 0)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, "x=1");
    else if (strcmp(method, "GET") != 0)
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    CURLcode rc = curl_easy_perform(c);
    cr_assert_eq(rc, CURLE_OK, "%s %s: %s", method, url, curl_easy_strerror(rc));
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.code);
    char *type = NULL;
    curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &type);
    snprintf(r.type, sizeof r.type, "%s", type ? type : "");
    curl_easy_cleanup(c);
    if (!r.body)
        r.body = calloc(1, 1);
    return r;
}

static void expect(const char *method, int port, const char *path, long code, const char *body)
{
    resp r = request(method, port, path);
    cr_expect_eq(r.code, code, "%s %s: %ld, wanted %ld (body %s)", method, path, r.code, code,
                 r.body);
    if (body)
        cr_expect_str_eq(r.body, body, "%s %s", method, path);
    free(r.body);
}

/* ---- a registry with every kind of series ------------------------------------------- */

static kcr_metrics *reg;
static kcr_health_server *srv;

static void fill_registry(void)
{
    cr_assert_eq(kcr_metrics_new(NULL, &reg), KCR_OK);
    kcr_workqueue_metrics hooks;
    cr_assert_eq(kcr_metrics_workqueue_hooks(reg, "configmaps", "configmaps", &hooks), KCR_OK);
    hooks.adds("configmaps", hooks.user_data);
    hooks.queue_duration("configmaps", 0.002, hooks.user_data);
    kcr_request_observer_fn fn;
    void *ud;
    cr_assert_eq(kcr_metrics_client_observer(reg, &fn, &ud), KCR_OK);
    fn("GET", "127.0.0.1:6443", 200, 0.012, ud);
    fn("GET", "127.0.0.1:6443", 0, 30, ud);
    static const char *const l[] = {"path"};
    kcr_metric_desc d = {"kcr_test_odd_values", "A \\ backslash\nand a newline in help.",
                         KCR_METRIC_GAUGE, l, 1, NULL, 0};
    kcr_metric_family *f;
    cr_assert_eq(kcr_metrics_register(reg, &d, &f), KCR_OK);
    kcr_metric *s;
    cr_assert_eq(kcr_metric_family_series(f, (const char *const[]){"a\\b \"c\"\nd"}, &s), KCR_OK);
    kcr_metric_set(s, -INFINITY);
    cr_assert_eq(kcr_metric_family_series(f, (const char *const[]){"nan"}, &s), KCR_OK);
    kcr_metric_set(s, NAN);
}

static void start(const char *metrics_address, const char *probe_address)
{
    fill_registry();
    kcr_health_server_options o = {.metrics_bind_address = metrics_address,
                                   .probe_bind_address = probe_address,
                                   .metrics = reg};
    cr_assert_eq(kcr_health_server_new(&o, &srv), KCR_OK, "%s", kcr_last_error());
}

static void start_split(void)
{
    start("127.0.0.1:0", ":0"); /* two addresses (both reach 127.0.0.1) */
}

static void start_shared(void)
{
    start("127.0.0.1:0", "127.0.0.1:0");
}

static void stop(void)
{
    kcr_health_server_free(srv);
    kcr_metrics_free(reg);
    srv = NULL;
    reg = NULL;
}

/* ---- /metrics ------------------------------------------------------------------------- */

Test(health, metrics_serves_the_exposition, .init = start_split, .fini = stop)
{
    cr_assert_eq(kcr_health_server_metrics_port(srv), 0, "not started yet");
    cr_assert_eq(kcr_health_server_start(srv), KCR_OK, "%s", kcr_last_error());
    int port = kcr_health_server_metrics_port(srv);
    cr_assert_gt(port, 0);
    cr_assert_neq(kcr_health_server_probe_port(srv), port, "two addresses: two listeners");

    resp r = request("GET", port, "/metrics");
    cr_assert_eq(r.code, 200);
    cr_assert_str_eq(r.type, "text/plain; version=0.0.4; charset=utf-8");
    char *want;
    cr_assert_eq(kcr_metrics_write_text(reg, &want, NULL), KCR_OK);
    cr_assert_str_eq(r.body, want);
    cr_assert_not_null(strstr(r.body, "\nworkqueue_adds_total{name=\"configmaps\","
                                      "controller=\"configmaps\"} 1\n"),
                       "%s", r.body);
    free(want);
    free(r.body);

    r = request("HEAD", port, "/metrics");
    cr_assert_eq(r.code, 200);
    cr_assert_eq(r.len, 0);
    free(r.body);

    /* the probes live on the other listener */
    expect("GET", port, "/healthz", 404, NULL);
    expect("GET", kcr_health_server_probe_port(srv), "/metrics", 404, NULL);
}

Test(health, a_real_scrape_passes_promtool, .init = start_split, .fini = stop)
{
    cr_assert_eq(kcr_health_server_start(srv), KCR_OK, "%s", kcr_last_error());
    resp r = request("GET", kcr_health_server_metrics_port(srv), "/metrics");
    cr_assert_eq(r.code, 200);
    cr_assert_not_null(strstr(r.body, "rest_client_requests_total{code=\"<error>\""), "%s",
                       r.body);
    promtool_check(r.body);
    free(r.body);
}

Test(health, metrics_without_a_registry_is_404)
{
    kcr_health_server_options o = {.metrics_bind_address = "127.0.0.1:0"};
    cr_assert_eq(kcr_health_server_new(&o, &srv), KCR_OK);
    cr_assert_eq(kcr_health_server_start(srv), KCR_OK);
    cr_assert_eq(kcr_health_server_probe_port(srv), 0, "no probe address: off");
    expect("GET", kcr_health_server_metrics_port(srv), "/metrics", 404, NULL);
    kcr_health_server_free(srv);
}

/* ---- probes ----------------------------------------------------------------------------- */

static kcr_err healthy(char **message, void *ud)
{
    return KCR_OK;
}

static kcr_err not_synced(char **message, void *ud)
{
    *message = strdup("cache for configmaps not synced:\n403 forbidden");
    return KCR_ERR_STATE;
}

static kcr_err silent_failure(char **message, void *ud)
{
    return KCR_ERR_TIMEOUT;
}

Test(health, probes_without_checks_have_ping, .init = start_shared, .fini = stop)
{
    cr_assert_eq(kcr_health_server_start(srv), KCR_OK);
    int port = kcr_health_server_probe_port(srv);
    cr_assert_eq(port, kcr_health_server_metrics_port(srv), "one address: one listener");
    resp r = request("GET", port, "/healthz");
    cr_assert_eq(r.code, 200);
    cr_assert_str_eq(r.body, "ok");
    cr_assert_str_eq(r.type, "text/plain; charset=utf-8");
    free(r.body);
    expect("GET", port, "/readyz?verbose", 200, "[+]ping ok\nreadyz check passed\n");
    expect("GET", port, "/healthz/ping", 200, "ok");
    expect("GET", port, "/metrics", 200, NULL);
}

Test(health, readyz_lists_checks_and_fails_with_their_names, .init = start_shared, .fini = stop)
{
    cr_assert_eq(kcr_health_server_add_check(srv, KCR_PROBE_READYZ, "informers", healthy, NULL),
                 KCR_OK);
    cr_assert_eq(kcr_health_server_start(srv), KCR_OK);
    int port = kcr_health_server_probe_port(srv);
    expect("GET", port, "/readyz", 200, "ok");
    expect("GET", port, "/readyz?verbose=1", 200, "[+]informers ok\nreadyz check passed\n");
    /* checks can be added while serving */
    cr_assert_eq(kcr_health_server_add_check(srv, KCR_PROBE_READYZ, "cache", not_synced, NULL),
                 KCR_OK);
    cr_assert_eq(kcr_health_server_add_check(srv, KCR_PROBE_READYZ, "leader", silent_failure,
                                             NULL),
                 KCR_OK);
    expect("GET", port, "/readyz", 500,
           "[+]informers ok\n[-]cache failed: reason withheld\n[-]leader failed: reason "
           "withheld\nreadyz check failed\n");
    expect("GET", port, "/readyz?verbose", 500,
           "[+]informers ok\n[-]cache failed: cache for configmaps not synced: 403 "
           "forbidden\n[-]leader failed: timed out\nreadyz check failed\n");
    expect("GET", port, "/readyz/informers", 200, "ok");
    expect("GET", port, "/readyz/cache", 500,
           "internal server error: cache for configmaps not synced: 403 forbidden\n");
    expect("GET", port, "/readyz/nope", 404, NULL);
    expect("GET", port, "/readyz?exclude=cache&exclude=leader", 200, "ok");
    expect("GET", port, "/readyz?verbose&exclude=cache&exclude=leader&exclude=zzz", 200,
           "[+]informers ok\n[+]cache excluded: ok\n[+]leader excluded: ok\nwarn: some health "
           "checks cannot be excluded: no matches for \"zzz\"\nreadyz check passed\n");
    /* liveness is separate: it still has only ping */
    expect("GET", port, "/healthz?verbose", 200, "[+]ping ok\nhealthz check passed\n");
    expect("HEAD", port, "/readyz", 500, "");
}

Test(health, methods_and_unknown_paths, .init = start_shared, .fini = stop)
{
    cr_assert_eq(kcr_health_server_start(srv), KCR_OK);
    int port = kcr_health_server_probe_port(srv);
    resp r = request("POST", port, "/metrics");
    cr_assert_eq(r.code, 405);
    cr_assert_str_eq(r.allow, "GET, HEAD");
    free(r.body);
    expect("DELETE", port, "/healthz", 405, NULL);
    expect("PUT", port, "/nothing", 405, NULL);
    expect("GET", port, "/", 404, NULL);
    expect("GET", port, "/metricsx", 404, NULL);
    expect("GET", port, "/healthzx", 404, NULL);
    expect("GET", port, "/healthz/", 404, NULL);
    expect("GET", port, "/healthz/ping/more", 404, NULL);
}

Test(health, bad_checks_are_refused, .init = start_shared, .fini = stop)
{
    cr_assert_eq(kcr_health_server_add_check(srv, KCR_PROBE_HEALTHZ, "a", healthy, NULL), KCR_OK);
    cr_assert_eq(kcr_health_server_add_check(srv, KCR_PROBE_HEALTHZ, "a", healthy, NULL),
                 KCR_ERR_EXISTS);
    cr_assert_eq(kcr_health_server_add_check(srv, KCR_PROBE_READYZ, "a", healthy, NULL), KCR_OK,
                 "names are per probe");
    const char *bad[] = {"", "a/b", "a b", "a?b", NULL};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        cr_assert_eq(kcr_health_server_add_check(srv, KCR_PROBE_HEALTHZ, bad[i], healthy, NULL),
                     KCR_ERR_INVALID, "%s", bad[i] ? bad[i] : "NULL");
    cr_assert_eq(kcr_health_server_add_check(srv, KCR_PROBE_HEALTHZ, "b", NULL, NULL),
                 KCR_ERR_INVALID);
    cr_assert_eq(kcr_health_server_add_check(srv, (kcr_health_probe)7, "b", healthy, NULL),
                 KCR_ERR_INVALID);
}

/* ---- a slow check ------------------------------------------------------------------------ */

static pthread_mutex_t slow_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t slow_cv = PTHREAD_COND_INITIALIZER;
static bool slow_entered, slow_released;

static kcr_err slow(char **message, void *ud)
{
    pthread_mutex_lock(&slow_mu);
    slow_entered = true;
    pthread_cond_broadcast(&slow_cv);
    while (!slow_released)
        pthread_cond_wait(&slow_cv, &slow_mu);
    pthread_mutex_unlock(&slow_mu);
    return KCR_OK;
}

static void *get_readyz(void *arg)
{
    resp *r = arg;
    *r = request("GET", kcr_health_server_probe_port(srv), "/readyz");
    return NULL;
}

Test(health, a_slow_check_does_not_block_metrics, .init = start_shared, .fini = stop)
{
    cr_assert_eq(kcr_health_server_add_check(srv, KCR_PROBE_READYZ, "slow", slow, NULL), KCR_OK);
    cr_assert_eq(kcr_health_server_start(srv), KCR_OK);
    resp ready;
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, get_readyz, &ready), 0);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 10;
    pthread_mutex_lock(&slow_mu);
    while (!slow_entered && pthread_cond_timedwait(&slow_cv, &slow_mu, &deadline) != ETIMEDOUT)
        ;
    bool entered = slow_entered;
    pthread_mutex_unlock(&slow_mu);
    cr_assert(entered, "the slow check never ran");

    /* the check is blocked right now: /metrics and /healthz still answer */
    expect("GET", kcr_health_server_metrics_port(srv), "/metrics", 200, NULL);
    expect("GET", kcr_health_server_probe_port(srv), "/healthz", 200, "ok");

    pthread_mutex_lock(&slow_mu);
    slow_released = true;
    pthread_cond_broadcast(&slow_cv);
    pthread_mutex_unlock(&slow_mu);
    pthread_join(t, NULL);
    cr_assert_eq(ready.code, 200);
    cr_assert_str_eq(ready.body, "ok");
    free(ready.body);
}

/* ---- lifecycle and addresses ------------------------------------------------------------ */

Test(health, binding_a_taken_port_fails_naming_the_address)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(listen(fd, 1), 0);
    socklen_t len = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &len);
    char address[64];
    snprintf(address, sizeof address, "127.0.0.1:%d", ntohs(a.sin_port));

    kcr_health_server_options o = {.probe_bind_address = address};
    cr_assert_eq(kcr_health_server_new(&o, &srv), KCR_OK);
    cr_assert_eq(kcr_health_server_start(srv), KCR_ERR_IO);
    cr_assert_not_null(strstr(kcr_last_error(), address), "%s", kcr_last_error());
    cr_assert_not_null(strstr(kcr_last_error(), "in use"), "%s", kcr_last_error());
    cr_assert_eq(kcr_health_server_probe_port(srv), 0);
    kcr_health_server_free(srv);
    close(fd);

    o.probe_bind_address = "192.0.2.1:0"; /* TEST-NET-1: not an address of this machine */
    cr_assert_eq(kcr_health_server_new(&o, &srv), KCR_OK);
    cr_assert_eq(kcr_health_server_start(srv), KCR_ERR_IO);
    cr_assert_not_null(strstr(kcr_last_error(), "192.0.2.1:0"), "%s", kcr_last_error());
    kcr_health_server_free(srv);
}

Test(health, bad_addresses_are_invalid)
{
    const char *bad[] = {"8080", "127.0.0.1:", "127.0.0.1:http", "127.0.0.1:65536",
                         "::1:80", "127.0.0.1:123456", "[::1]"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        kcr_health_server_options o = {.metrics_bind_address = bad[i]};
        cr_assert_eq(kcr_health_server_new(&o, &srv), KCR_ERR_INVALID, "%s", bad[i]);
        cr_assert_null(srv);
        cr_assert_not_null(strstr(kcr_last_error(), bad[i]), "%s", kcr_last_error());
    }
    cr_assert_eq(kcr_health_server_new(NULL, NULL), KCR_ERR_INVALID);
}

Test(health, every_interface_ipv6_and_disabled_endpoints)
{
    kcr_health_server_options o = {.metrics_bind_address = "0", .probe_bind_address = ":0"};
    cr_assert_eq(kcr_health_server_new(&o, &srv), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_health_server_start(srv), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_health_server_metrics_port(srv), 0);
    int port = kcr_health_server_probe_port(srv);
    cr_assert_gt(port, 0);
    expect("GET", port, "/healthz", 200, "ok"); /* ":port" takes 127.0.0.1 too */
    kcr_health_server_free(srv);

    o = (kcr_health_server_options){.probe_bind_address = "[::1]:0"};
    cr_assert_eq(kcr_health_server_new(&o, &srv), KCR_OK);
    kcr_err err = kcr_health_server_start(srv);
    if (err == KCR_OK) { /* loopback IPv6 exists on this machine */
        cr_assert_gt(kcr_health_server_probe_port(srv), 0);
    } else {
        cr_assert_eq(err, KCR_ERR_IO);
        cr_assert_not_null(strstr(kcr_last_error(), "[::1]:0"), "%s", kcr_last_error());
    }
    kcr_health_server_free(srv);

    cr_assert_eq(kcr_health_server_new(NULL, &srv), KCR_OK);
    cr_assert_eq(kcr_health_server_start(srv), KCR_OK, "nothing to serve is fine");
    kcr_health_server_free(srv);
}

Test(health, start_stop_and_restart, .init = start_shared, .fini = stop)
{
    cr_assert_eq(kcr_health_server_start(srv), KCR_OK);
    cr_assert_eq(kcr_health_server_start(srv), KCR_ERR_STATE);
    int port = kcr_health_server_probe_port(srv);
    expect("GET", port, "/healthz", 200, "ok");
    kcr_health_server_stop(srv);
    kcr_health_server_stop(srv);
    cr_assert_eq(kcr_health_server_probe_port(srv), 0);
    cr_assert_eq(kcr_health_server_start(srv), KCR_OK);
    expect("GET", kcr_health_server_probe_port(srv), "/healthz", 200, "ok");
    kcr_health_server_free(NULL);
    kcr_health_server_stop(NULL);
    cr_assert_eq(kcr_health_server_start(NULL), KCR_ERR_INVALID);
}
