/* The HTTP client's transport against a loopback server: retries (429 with
 * Retry-After, bounded, connection errors), the request observer,
 * cancellation mid-transfer and on a hung server for every verb, idle and
 * request timeouts, the rate limiter, concurrency, no credential in logs,
 * and writes that are never sent twice. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client/client_impl.h"
#include "core/clock.h"
#include "helpers/http_loopback.h"
#include "helpers/timescale.h"
#include "kcr/kcr.h"

/* ---- retries ---- */

static atomic_int calls;

static void busy_then_ok(int fd, const char *req)
{
    if (atomic_fetch_add(&calls, 1) < 2)
        respond(fd, 429, "application/json", status_json(429, "TooManyRequests", "busy"),
                "Retry-After: 1\r\n");
    else
        echo_handler(fd, req);
}

Test(http_transport, retry_after_on_429, .fini = stop_server, .timeout = 30)
{
    start_server(busy_then_ok, NULL);
    int64_t t0 = kcr__now_ns();
    cr_assert_eq(get("ok", NULL), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(atomic_load(&calls), 3);
    cr_assert_geq(kcr__now_ns() - t0, 2 * KCR_NS_PER_S - 50 * KCR_NS_PER_MS,
                  "waited Retry-After twice");
}

static void always_busy(int fd, const char *req)
{
    respond(fd, 429, "application/json", status_json(429, "TooManyRequests", "busy"),
            "Retry-After: 0\r\n");
}

Test(http_transport, retries_are_bounded, .fini = stop_server, .timeout = 30)
{
    kcr_client_options o = {.max_retries = 2};
    start_server(always_busy, &o);
    kcr_status st = {0};
    cr_assert_eq(get("x", &st), KCR_ERR_TOO_MANY);
    cr_assert_eq(st.code, 429);
    cr_assert_eq(requests(), 3);
    kcr_status_clear(&st);
}

Test(http_transport, connection_refused, .timeout = 30)
{
    kcr_config *cfg;
    const char *yaml = "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\n"
                       "contexts: [{name: x, context: {cluster: c}}]\ncurrent-context: x\n";
    cr_assert_eq(kcr_config_parse_kubeconfig(yaml, strlen(yaml), NULL, NULL, &cfg), KCR_OK);
    kcr_client_options o = {.max_retries = 1};
    kcr_client *cl;
    cr_assert_eq(kcr_client_new(cfg, &o, &cl), KCR_ERR_CONFIG, "plain HTTP needs an opt-in");
    cr_assert(strstr(kcr_last_error(), "allow_insecure_http") != NULL, "%s", kcr_last_error());
    cr_assert_null(cl);
    o.allow_insecure_http = true;
    o.request_timeout_ms = INT64_MAX;
    cr_assert_eq(kcr_client_new(cfg, &o, &cl), KCR_ERR_INVALID, "a timeout beyond 2^40 ms");
    cr_assert(strstr(kcr_last_error(), "timeout") != NULL, "%s", kcr_last_error());
    cr_assert_null(cl);
    o.request_timeout_ms = 0;
    cr_assert_eq(kcr_client_new(cfg, &o, &cl), KCR_OK);
    cr_assert_eq(kcr_client_get(cl, &(kcr_request){.resource = &CM, .ns = "a", .name = "b"}, NULL),
                 KCR_ERR_TRANSPORT);
    cr_assert(strstr(kcr_last_error(), "127.0.0.1") != NULL || strstr(kcr_last_error(), "onnect"),
              "%s", kcr_last_error());
    kcr_client_free(cl);
    kcr_config_free(cfg);
}

/* ---- the request observer ---- */

/* Asserts that the exposition of m has the whole line `line`. */
static void has_sample(kcr_metrics *m, const char *line)
{
    char *text;
    cr_assert_eq(kcr_metrics_write_text(m, &text, NULL), KCR_OK);
    char want[256];
    snprintf(want, sizeof want, "\n%s\n", line);
    cr_expect(strstr(text, want) != NULL, "missing \"%s\" in:\n%s", line, text);
    free(text);
}

Test(http_transport, request_observer_sees_every_attempt, .fini = stop_server, .timeout = 30)
{
    kcr_client_options o = {.max_retries = 2};
    start_server(always_busy, &o);
    kcr_metrics *m;
    kcr_request_observer_fn fn;
    void *ud;
    cr_assert_eq(kcr_metrics_new(NULL, &m), KCR_OK);
    cr_assert_eq(kcr_metrics_client_observer(m, &fn, &ud), KCR_OK);
    kcr_client_set_request_observer(client, fn, ud);
    cr_assert_eq(get("x", NULL), KCR_ERR_TOO_MANY);
    char line[256];
    snprintf(line, sizeof line,
             "rest_client_requests_total{code=\"429\",method=\"GET\",host=\"127.0.0.1:%d\"} 3",
             port);
    has_sample(m, line);
    snprintf(line, sizeof line,
             "rest_client_request_duration_seconds_count{verb=\"GET\",host=\"127.0.0.1:%d\"} 3",
             port);
    has_sample(m, line);

    /* no response at all: code "<error>", one attempt without retries */
    kcr_config *cfg;
    const char *yaml = "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\n"
                       "contexts: [{name: x, context: {cluster: c}}]\ncurrent-context: x\n";
    cr_assert_eq(kcr_config_parse_kubeconfig(yaml, strlen(yaml), NULL, NULL, &cfg), KCR_OK);
    kcr_client_options none = {.max_retries = -1, .allow_insecure_http = true};
    kcr_client *cl;
    cr_assert_eq(kcr_client_new(cfg, &none, &cl), KCR_OK);
    kcr_client_set_request_observer(cl, fn, ud);
    cr_assert_eq(kcr_client_get(cl, &(kcr_request){.resource = &CM, .ns = "a", .name = "b"}, NULL),
                 KCR_ERR_TRANSPORT);
    has_sample(m, "rest_client_requests_total{code=\"<error>\",method=\"GET\","
                  "host=\"127.0.0.1:1\"} 1");
    kcr_client_free(cl);
    kcr_config_free(cfg);
    kcr_metrics_free(m);
}

/* ---- streaming ---- */
/* ---- cancellation and timeouts ---- */

struct canceller {
    kcr_cancel *c;
    int after_events; /* trigger once the watch delivered this many events */
    int64_t fired_ns; /* when it triggered; 0: never (no events in 10 s) */
};

static void *cancel_later(void *arg)
{
    struct canceller *c = arg;
    int64_t deadline = kcr__now_ns() + 10 * KCR_NS_PER_S;
    while (atomic_load(&events_seen) < c->after_events && kcr__now_ns() < deadline)
        nap_ms(5);
    if (atomic_load(&events_seen) < c->after_events)
        return NULL;
    c->fired_ns = kcr__now_ns();
    kcr_cancel_trigger(c->c);
    return NULL;
}

Test(http_transport, cancel_mid_transfer_and_idle_timeout, .fini = stop_server, .timeout = 30)
{
    start_server(watch_stream, NULL);
    /* cancel from another thread mid-stream: after both events, while the
     * server holds the connection open without a byte */
    atomic_store(&events_seen, 0);
    struct canceller cc = {.after_events = 2};
    cr_assert_eq(kcr_cancel_new(&cc.c), KCR_OK);
    pthread_t t;
    pthread_create(&t, NULL, cancel_later, &cc);
    struct evs e = {0};
    kcr_request o = {.cancel = cc.c};
    cr_assert_eq(watch_with("x=silent", &o, &e, NULL), KCR_ERR_CANCELED);
    int64_t returned = kcr__now_ns();
    pthread_join(t, NULL);
    cr_assert_eq(e.n, 2);
    cr_assert_neq(cc.fired_ns, 0, "the canceller never saw the events");
    cr_assert_lt(returned - cc.fired_ns, KCR_NS_PER_S, "canceled within a second: %lld ns",
                 (long long)(returned - cc.fired_ns));
    int64_t t0, took;
    cr_assert(kcr_cancel_triggered(cc.c));
    o.cancel = cc.c;
    cr_assert_eq(watch_with("x=ok", &o, &e, NULL), KCR_ERR_CANCELED, "stays triggered");
    kcr_cancel_reset(cc.c);
    cr_assert_not(kcr_cancel_triggered(cc.c));
    kcr_cancel_free(cc.c);

    e = (struct evs){0};
    o = (kcr_request){.idle_timeout_ms = 1000};
    t0 = kcr__now_ns();
    cr_assert_eq(watch_with("x=silent", &o, &e, NULL), KCR_ERR_TIMEOUT);
    took = kcr__now_ns() - t0;
    cr_assert_geq(took, 900 * KCR_NS_PER_MS);
    cr_assert_lt(took, 3 * KCR_NS_PER_S);
}

/* True if the token's pipe holds a byte (what the transport's poll sees). */
static bool pipe_readable(kcr_cancel *c)
{
    struct pollfd p = {.fd = c->fds[0], .events = POLLIN};
    return poll(&p, 1, 0) == 1;
}

Test(http_transport, a_reset_token_wakes_no_poll_and_triggers_again)
{
    kcr_cancel *c;
    cr_assert_eq(kcr_cancel_new(&c), KCR_OK);
    kcr_cancel_reset(c); /* untriggered: nothing to drain */
    cr_assert_not(kcr_cancel_triggered(c));
    cr_assert_not(pipe_readable(c));
    for (int round = 0; round < 3; round++) {
        kcr_cancel_trigger(c);
        kcr_cancel_trigger(c); /* a second trigger writes nothing more */
        cr_assert(kcr_cancel_triggered(c));
        cr_assert(pipe_readable(c), "round %d: a trigger wakes a poll", round);
        kcr_cancel_reset(c);
        cr_assert_not(kcr_cancel_triggered(c));
        cr_assert_not(pipe_readable(c), "round %d: the reset drained the pipe", round);
        kcr_cancel_reset(c);
    }
    kcr_cancel_free(c);
}

Test(http_transport, rate_limiter, .fini = stop_server, .timeout = 30)
{
    kcr_client_options o = {.qps = 10, .burst = 1};
    start_server(echo_handler, &o);
    int64_t t0 = kcr__now_ns();
    for (int i = 0; i < 5; i++)
        cr_assert_eq(get("ok", NULL), KCR_OK);
    cr_assert_geq(kcr__now_ns() - t0, 350 * KCR_NS_PER_MS, "5 requests at 10 qps, burst 1");
}

static void *hammer(void *arg)
{
    for (int i = 0; i < 20; i++)
        if (get("ok", NULL) != KCR_OK)
            return (void *)1;
    return NULL;
}

Test(http_transport, concurrent_requests, .fini = stop_server, .timeout = 60)
{
    kcr_client_options o = {.qps = -1};
    start_server(echo_handler, &o);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, hammer, NULL);
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        cr_assert_null(r);
    }
    cr_assert_eq(requests(), 80);
}

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int leaked, logged, redacted;

static void check_log(kcr_log_level level, const char *module, const char *message, void *ud)
{
    pthread_mutex_lock(&log_lock);
    logged++;
    if (strstr(message, "supersecret"))
        leaked++;
    if (strcmp(module, "curl") == 0 && strstr(message, "> Authorization <redacted>"))
        redacted++;
    pthread_mutex_unlock(&log_lock);
}

Test(http_transport, credentials_never_logged, .fini = stop_server)
{
    kcr_log_set_handler(check_log, NULL);
    kcr_log_set_level(KCR_LOG_TRACE);
    start_server(busy_then_ok, NULL);
    atomic_store(&calls, 1);
    cr_assert_eq(get("ok", NULL), KCR_OK);
    pthread_mutex_lock(&log_lock);
    int n_logged = logged, n_leaked = leaked, n_redacted = redacted;
    pthread_mutex_unlock(&log_lock);
    cr_assert_gt(n_logged, 1);
    cr_assert_eq(n_leaked, 0);
    /* at TRACE the request headers are logged, the credential replaced */
    cr_assert_geq(n_redacted, 2, "each attempt's Authorization header shows as redacted");
    kcr_log_set_handler(NULL, NULL);
}

/* ---- discovery: legacy documents when the server ignores the aggregated Accept ---- */
/* ---- a server that accepts and never answers ---- */

typedef struct verb_call {
    int verb;
    kcr_cancel *cancel;
    kcr_err err;
} verb_call;

enum { N_VERBS = 7 };
static const char *const verb_names[N_VERBS] = {"get",   "create", "update", "update_status",
                                                "patch", "delete", "raw"};

static kcr_err call_verb(int verb, kcr_cancel *cancel)
{
    const char *cm = "{\"metadata\":{\"name\":\"a\",\"namespace\":\"team\"}}";
    switch (verb) {
    case 0:
        return kcr_client_get(
            client, &(kcr_request){.resource = &CM, .ns = "team", .name = "a", .cancel = cancel},
            NULL);
    case 1:
        return kcr_client_create(
            client, &(kcr_request){.resource = &CM, .ns = "team", .body = cm, .cancel = cancel},
            NULL);
    case 2:
        return kcr_client_update(
            client, &(kcr_request){.resource = &CM, .ns = "team", .body = cm, .cancel = cancel},
            NULL);
    case 3:
        return kcr_client_update(client,
                                 &(kcr_request){.resource = &CM,
                                                .ns = "team",
                                                .subresource = "status",
                                                .body = cm,
                                                .cancel = cancel},
                                 NULL);
    case 4:
        return kcr_client_patch(client,
                                &(kcr_request){.resource = &CM,
                                               .ns = "team",
                                               .name = "a",
                                               .patch_type = KCR_PATCH_MERGE,
                                               .body = "{}",
                                               .cancel = cancel},
                                NULL);
    case 5:
        return kcr_client_delete(
            client, &(kcr_request){.resource = &CM, .ns = "team", .name = "a", .cancel = cancel},
            NULL);
    default:
        return kcr_client_request(client, "/api/v1/namespaces",
                                  &(kcr_raw_options){.cancel = cancel}, NULL, NULL);
    }
}

static void *run_verb(void *arg)
{
    verb_call *v = arg;
    v->err = call_verb(v->verb, v->cancel);
    return NULL;
}

Test(http_transport, every_verb_cancels_on_a_hung_server, .fini = stop_server, .timeout = 60)
{
    start_server(hang, NULL);
    for (int verb = 0; verb < N_VERBS; verb++) {
        verb_call v = {.verb = verb};
        cr_assert_eq(kcr_cancel_new(&v.cancel), KCR_OK);
        int before = requests();
        pthread_t t;
        pthread_create(&t, NULL, run_verb, &v);
        /* once the server holds the request, cancel from this thread */
        int64_t deadline = kcr__now_ns() + 10 * KCR_NS_PER_S;
        while (requests() == before && kcr__now_ns() < deadline)
            nap_ms(5);
        cr_assert_gt(requests(), before, "%s never reached the server", verb_names[verb]);
        int64_t t0 = kcr__now_ns();
        kcr_cancel_trigger(v.cancel);
        pthread_join(t, NULL);
        int64_t took = kcr__now_ns() - t0;
        cr_assert_eq(v.err, KCR_ERR_CANCELED, "%s: %s", verb_names[verb], kcr_strerror(v.err));
        cr_assert_lt(took, KCR_NS_PER_S, "%s canceled after %lld ms", verb_names[verb],
                     (long long)(took / KCR_NS_PER_MS));
        kcr_cancel_free(v.cancel);
        /* the hung handler holds the server's only thread: restart it */
        stop_server();
        start_server(hang, NULL);
    }
}

Test(http_transport, default_request_timeout_bounds_every_verb, .fini = stop_server, .timeout = 60)
{
    kcr_client_options o = {.request_timeout_ms = 300};
    start_server(hang, &o);
    for (int verb = 0; verb < N_VERBS; verb++) {
        int64_t t0 = kcr__now_ns();
        kcr_err err = call_verb(verb, NULL);
        int64_t took = kcr__now_ns() - t0;
        cr_assert_eq(err, KCR_ERR_TIMEOUT, "%s: %s", verb_names[verb], kcr_last_error());
        cr_assert(strstr(kcr_last_error(), "no complete answer within 300 ms") != NULL, "%s",
                  kcr_last_error());
        cr_assert_geq(took, 250 * KCR_NS_PER_MS, "%s", verb_names[verb]);
        cr_assert_lt(took, 3 * KCR_NS_PER_S, "%s took %lld ms", verb_names[verb],
                     (long long)(took / KCR_NS_PER_MS));
    }
}

static atomic_int method_count[2]; /* [0] GET, [1] everything else */

/* Reads the request (the helper did), then resets the connection without
 * answering: the request may or may not have been applied. */
static void reset_after_reading(int fd, const char *req)
{
    atomic_fetch_add(&method_count[strncmp(req, "GET ", 4) == 0 ? 0 : 1], 1);
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg); /* close() sends RST */
}

/* A POST or a non-apply PATCH whose connection is reset after the server read
 * it may have been applied: it is sent once, never retried (a retried POST
 * could create twice). Idempotent verbs (GET, apply) are retried. */
Test(http_transport, reset_writes_are_sent_once, .fini = stop_server, .timeout = 60)
{
    kcr_client_options o = {.max_retries = 2};
    start_server(reset_after_reading, &o);
    atomic_store(&method_count[0], 0);
    atomic_store(&method_count[1], 0);
    kcr_err err = kcr_client_create(
        client,
        &(kcr_request){.resource = &CM, .ns = "team", .body = "{\"metadata\":{\"name\":\"n\"}}"},
        NULL);
    cr_assert_eq(err, KCR_ERR_TRANSPORT, "%s", kcr_strerror(err));
    cr_assert_eq(atomic_load(&method_count[1]), 1, "POST sent %d times",
                 atomic_load(&method_count[1]));
    const kcr_patch_type once[] = {KCR_PATCH_MERGE, KCR_PATCH_JSON, KCR_PATCH_STRATEGIC};
    const char *bodies[] = {"{\"data\":{\"a\":\"b\"}}",
                            "[{\"op\":\"add\",\"path\":\"/data\",\"value\":{}}]",
                            "{\"data\":{\"a\":\"b\"}}"};
    for (int i = 0; i < 3; i++) {
        err = kcr_client_patch(client,
                               &(kcr_request){.resource = &CM,
                                              .ns = "team",
                                              .name = "n",
                                              .patch_type = once[i],
                                              .body = bodies[i]},
                               NULL);
        cr_assert_eq(err, KCR_ERR_TRANSPORT, "patch %d: %s", i, kcr_strerror(err));
        cr_assert_eq(atomic_load(&method_count[1]), 2 + i, "patch %d sent %d times in all", i,
                     atomic_load(&method_count[1]) - 1);
    }
    /* the contrast: idempotent requests are retried (1 + max_retries) */
    cr_assert_eq(get("n", NULL), KCR_ERR_TRANSPORT);
    cr_assert_eq(atomic_load(&method_count[0]), 3, "GET sent %d times",
                 atomic_load(&method_count[0]));
    err = kcr_client_patch(client,
                           &(kcr_request){.resource = &CM,
                                          .ns = "team",
                                          .name = "n",
                                          .patch_type = KCR_PATCH_APPLY,
                                          .body = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\"}",
                                          .field_manager = "test"},
                           NULL);
    cr_assert_eq(err, KCR_ERR_TRANSPORT);
    cr_assert_eq(atomic_load(&method_count[1]), 4 + 3, "apply is idempotent: retried");
}

/* libcurl resends a request on its own when a reused connection dies before
 * any answer byte ("Connection died, retrying a fresh connect"), a POST with
 * its body too. A server that keeps the connection alive after a GET, then
 * reads the POST and resets: the POST must still arrive once. */
static int ka_fd = -1;
static atomic_int ka_posts, ka_gets;

/* Reads one request (headers + Content-Length body) from fd into req. */
static bool ka_read(int fd, char *req, size_t cap)
{
    size_t len = 0;
    char *end = NULL;
    req[0] = '\0';
    while (len < cap - 1 && !(end = strstr(req, "\r\n\r\n"))) {
        ssize_t n = recv(fd, req + len, cap - 1 - len, 0);
        if (n <= 0)
            return false;
        len += (size_t)n;
        req[len] = '\0';
    }
    if (!end)
        return false;
    const char *cl = strstr(req, "Content-Length: ");
    size_t want = cl ? (size_t)atol(cl + 16) : 0, have = len - (size_t)(end + 4 - req);
    while (have < want && len < cap - 1) {
        ssize_t n = recv(fd, req + len, cap - 1 - len, 0);
        if (n <= 0)
            return false;
        len += (size_t)n;
        have += (size_t)n;
        req[len] = '\0';
    }
    return true;
}

static void *ka_serve(void *arg)
{
    (void)arg;
    while (!atomic_load(&stopping)) {
        struct pollfd p = {.fd = ka_fd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0)
            continue;
        int fd = accept(ka_fd, NULL, NULL);
        if (fd < 0)
            continue;
        char req[16384];
        while (ka_read(fd, req, sizeof req)) {
            if (strncmp(req, "GET ", 4) == 0) {
                atomic_fetch_add(&ka_gets, 1);
                const char *body = "{\"metadata\":{\"name\":\"x\"}}";
                char head[256];
                snprintf(head, sizeof head,
                         "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         "Content-Length: %zu\r\n\r\n%s",
                         strlen(body), body);
                send_all(fd, head, strlen(head)); /* and keep the connection */
                continue;
            }
            atomic_fetch_add(&ka_posts, 1);
            struct linger lg = {.l_onoff = 1, .l_linger = 0};
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
            break;
        }
        close(fd);
    }
    return NULL;
}

/* A listening loopback socket on a free port; clears `stopping` for the
 * server thread the caller starts on it. */
static int loopback_listener(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(listen(fd, 16), 0);
    atomic_store(&stopping, false);
    return fd;
}

/* A client of plain HTTP to the listener fd; *cfg is its config (the
 * caller frees both). */
static kcr_client *plain_client(int fd, kcr_config **cfg)
{
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &al);
    char yaml[512];
    snprintf(yaml, sizeof yaml,
             "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:%d'}}]\n"
             "contexts: [{name: x, context: {cluster: c}}]\ncurrent-context: x\n",
             ntohs(a.sin_port));
    cr_assert_eq(kcr_config_parse_kubeconfig(yaml, strlen(yaml), NULL, NULL, cfg), KCR_OK);
    kcr_client *c = NULL;
    kcr_client_options plain = {.allow_insecure_http = true};
    cr_assert_eq(kcr_client_new(*cfg, &plain, &c), KCR_OK, "%s", kcr_last_error());
    return c;
}

Test(http_transport, reset_write_on_a_reused_connection_is_sent_once, .timeout = 60)
{
    ka_fd = loopback_listener();
    pthread_t t;
    pthread_create(&t, NULL, ka_serve, NULL);
    kcr_config *cfg;
    kcr_client *cl = plain_client(ka_fd, &cfg);
    cr_assert_eq(kcr_client_get(cl, &(kcr_request){.resource = &CM, .ns = "a", .name = "x"}, NULL),
                 KCR_OK, "%s", kcr_last_error());
    kcr_err err = kcr_client_create(
        cl, &(kcr_request){.resource = &CM, .ns = "a", .body = "{\"metadata\":{\"name\":\"n\"}}"},
        NULL);
    cr_assert_eq(err, KCR_ERR_TRANSPORT, "%s", kcr_strerror(err));
    cr_assert_eq(atomic_load(&ka_gets), 1);
    cr_assert_eq(atomic_load(&ka_posts), 1, "POST sent %d times", atomic_load(&ka_posts));
    cr_assert(strstr(kcr_last_error(), "POST /api/v1/namespaces/a/configmaps") != NULL, "%s",
              kcr_last_error());
    kcr_client_free(cl);
    kcr_config_free(cfg);
    atomic_store(&stopping, true);
    pthread_join(t, NULL);
    close(ka_fd);
}

/* ---- idle connections ---- */

/* A keep-alive server that answers each GET after 100 ms (so concurrent
 * requests each take a connection of their own) and counts the
 * connections open now. */
static int idle_fd = -1;
static atomic_int idle_open, idle_accepted;

static void *idle_conn(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char req[16384];
    while (ka_read(fd, req, sizeof req)) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        const char *body = "{\"metadata\":{\"name\":\"x\"}}";
        char head[256];
        snprintf(head, sizeof head,
                 "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                 strlen(body), body);
        send_all(fd, head, strlen(head));
    }
    close(fd);
    atomic_fetch_sub(&idle_open, 1);
    return NULL;
}

static void *idle_serve(void *arg)
{
    (void)arg;
    while (!atomic_load(&stopping)) {
        struct pollfd p = {.fd = idle_fd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0)
            continue;
        int fd = accept(idle_fd, NULL, NULL);
        if (fd < 0)
            continue;
        atomic_fetch_add(&idle_open, 1);
        atomic_fetch_add(&idle_accepted, 1);
        pthread_t t;
        pthread_create(&t, NULL, idle_conn, (void *)(intptr_t)fd);
        pthread_detach(t);
    }
    return NULL;
}

static kcr_client *idle_client;

static void *idle_get(void *arg)
{
    (void)arg;
    kcr_err err = kcr_client_get(idle_client,
                                 &(kcr_request){.resource = &CM, .ns = "a", .name = "x"}, NULL);
    return (void *)(intptr_t)err;
}

static bool idle_open_is(int want)
{
    for (int i = 0; i < 200 && atomic_load(&idle_open) != want; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return atomic_load(&idle_open) == want;
}

/* A burst of four concurrent requests leaves four connections; the next
 * request within the idle limit reuses one of them, and one after it
 * closes every connection idle that long and opens its own. */
Test(http_transport, idle_connections_are_closed, .timeout = 60)
{
    idle_fd = loopback_listener();
    pthread_t server;
    pthread_create(&server, NULL, idle_serve, NULL);
    kcr_config *cfg;
    idle_client = plain_client(idle_fd, &cfg);
    kcr__http_client_set_idle_close(idle_client, test_ms(1000));

    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, idle_get, NULL);
    for (int i = 0; i < 4; i++) {
        void *err;
        pthread_join(t[i], &err);
        cr_assert_eq((kcr_err)(intptr_t)err, KCR_OK);
    }
    cr_assert(idle_open_is(4), "four concurrent requests, four connections (%d)",
              atomic_load(&idle_open));
    cr_assert_eq(idle_get(NULL), (void *)(intptr_t)KCR_OK);
    cr_expect_eq(atomic_load(&idle_accepted), 4, "a request within the idle limit reused one");
    cr_expect_eq(atomic_load(&idle_open), 4);

    int64_t past = test_ms(1200); /* past the idle limit */
    struct timespec ts = {past / 1000, past % 1000 * 1000 * 1000};
    nanosleep(&ts, NULL);
    cr_assert_eq(idle_get(NULL), (void *)(intptr_t)KCR_OK);
    cr_expect(idle_open_is(1), "the connections idle past the limit were closed (%d open)",
              atomic_load(&idle_open));
    cr_expect_eq(atomic_load(&idle_accepted), 5, "the request after them opened its own");

    kcr_client_free(idle_client);
    kcr_config_free(cfg);
    cr_expect(idle_open_is(0));
    atomic_store(&stopping, true);
    pthread_join(server, NULL);
    close(idle_fd);
}
