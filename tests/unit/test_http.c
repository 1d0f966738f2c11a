/* The HTTP client against a tiny loopback server thread: request formatting
 * and encoding, Status decoding and error mapping, HTML answers, retries on
 * 429, streamed list/watch, truncated streams, a 1 GB line, cancellation,
 * idle timeouts, the rate limiter, concurrency, and no credential in logs. */
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
#include <time.h>
#include <unistd.h>

#include "client/client_impl.h"
#include "core/clock.h"
#include "kcr/kcr.h"

/* ---- the server ---- */

typedef void (*handler_fn)(int fd, const char *request);

static int listen_fd = -1;
static int port;
static pthread_t server_thread;
static atomic_bool stopping;
static handler_fn handler;
static pthread_mutex_t req_lock = PTHREAD_MUTEX_INITIALIZER;
static char last_request[16384];
static int n_requests;

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static bool send_all(int fd, const char *buf, size_t len)
{
    while (len) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
        if (n <= 0)
            return false;
        buf += n;
        len -= (size_t)n;
    }
    return true;
}

static void respond(int fd, int code, const char *type, const char *body, const char *extra)
{
    char head[1024];
    snprintf(head, sizeof head,
             "HTTP/1.1 %d X\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n%s\r\n",
             code, type, strlen(body), extra ? extra : "");
    send_all(fd, head, strlen(head));
    send_all(fd, body, strlen(body));
}

static bool send_chunk(int fd, const char *data, size_t len)
{
    char head[32];
    snprintf(head, sizeof head, "%zx\r\n", len);
    return send_all(fd, head, strlen(head)) && send_all(fd, data, len) && send_all(fd, "\r\n", 2);
}

static void chunked_head(int fd, const char *type)
{
    char head[256];
    snprintf(head, sizeof head,
             "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nTransfer-Encoding: chunked\r\n"
             "Connection: close\r\n\r\n",
             type);
    send_all(fd, head, strlen(head));
}

static void *serve(void *arg)
{
    while (!atomic_load(&stopping)) {
        struct pollfd p = {.fd = listen_fd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0)
            continue;
        int fd = accept(listen_fd, NULL, NULL);
        if (fd < 0)
            continue;
        char req[16384] = "";
        size_t len = 0;
        char *end = NULL;
        while (len < sizeof req - 1 && !(end = strstr(req, "\r\n\r\n"))) {
            ssize_t n = recv(fd, req + len, sizeof req - 1 - len, 0);
            if (n <= 0)
                break;
            len += (size_t)n;
            req[len] = '\0';
        }
        if (end) {
            const char *cl = strstr(req, "Content-Length: ");
            size_t want = cl ? (size_t)atol(cl + 16) : 0;
            size_t have = len - (size_t)(end + 4 - req);
            while (have < want && len < sizeof req - 1) {
                ssize_t n = recv(fd, req + len, sizeof req - 1 - len, 0);
                if (n <= 0)
                    break;
                len += (size_t)n;
                have += (size_t)n;
                req[len] = '\0';
            }
            pthread_mutex_lock(&req_lock);
            snprintf(last_request, sizeof last_request, "%s", req);
            n_requests++;
            pthread_mutex_unlock(&req_lock);
            handler(fd, req);
        }
        close(fd);
    }
    return NULL;
}

static kcr_client *client;
static kcr_config *config;

static void start_server(handler_fn fn, const kcr_client_options *opts)
{
    handler = fn;
    listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(bind(listen_fd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(listen(listen_fd, 64), 0);
    socklen_t al = sizeof a;
    getsockname(listen_fd, (struct sockaddr *)&a, &al);
    port = ntohs(a.sin_port);
    atomic_store(&stopping, false);
    pthread_create(&server_thread, NULL, serve, NULL);
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:%d'}}]\n"
             "users: [{name: u, user: {token: supersecret-token}}]\n"
             "contexts: [{name: x, context: {cluster: c, user: u, namespace: team}}]\n"
             "current-context: x\n",
             port);
    cr_assert_eq(kcr_config_parse_kubeconfig(yaml, strlen(yaml), NULL, NULL, &config), KCR_OK);
    kcr_client_options o = opts ? *opts : (kcr_client_options){0};
    o.allow_insecure_http = true; /* the test server speaks plain HTTP */
    cr_assert_eq(kcr_client_new(config, &o, &client), KCR_OK, "%s", kcr_last_error());
}

static void stop_server(void)
{
    kcr_client_free(client);
    kcr_config_free(config);
    atomic_store(&stopping, true);
    pthread_join(server_thread, NULL);
    close(listen_fd);
}

static int requests(void)
{
    pthread_mutex_lock(&req_lock);
    int n = n_requests;
    pthread_mutex_unlock(&req_lock);
    return n;
}

static void request(char *buf, size_t size)
{
    pthread_mutex_lock(&req_lock);
    snprintf(buf, size, "%s", last_request);
    pthread_mutex_unlock(&req_lock);
}

static const kcr_resource CM = {"", "v1", "configmaps"};

/* ---- errors ---- */

static const char *status_json(int code, const char *reason, const char *msg)
{
    static char buf[1024];
    snprintf(buf, sizeof buf,
             "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
             "\"message\":\"%s\",\"reason\":\"%s\",\"details\":{\"name\":\"x\",\"kind\":"
             "\"configmaps\"},\"code\":%d}",
             msg, reason, code);
    return buf;
}

/* A JSON reply with no extra headers. */
static void json_reply(int fd, int code, const char *body)
{
    respond(fd, code, "application/json", body, NULL);
}

/* A Status reply, as the apiserver sends for errors. */
static void status_reply(int fd, int code, const char *reason, const char *msg)
{
    json_reply(fd, code, status_json(code, reason, msg));
}

static void errors_handler(int fd, const char *req)
{
    if (strstr(req, "/nf "))
        status_reply(fd, 404, "NotFound", "configmaps \\\"nf\\\" not found");
    else if (strstr(req, "/exists "))
        status_reply(fd, 409, "AlreadyExists", "exists");
    else if (strstr(req, "/conflict "))
        status_reply(fd, 409, "Conflict", "modified");
    else if (strstr(req, "/gone "))
        status_reply(fd, 410, "Gone", "gone");
    else if (strstr(req, "/unauth "))
        status_reply(fd, 401, "Unauthorized", "Unauthorized");
    else if (strstr(req, "/forbidden "))
        status_reply(fd, 403, "Forbidden", "user cannot get");
    else if (strstr(req, "/invalid "))
        json_reply(fd, 422,
                "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"bad\",\"reason\":"
                "\"Invalid\",\"details\":{\"name\":\"invalid\",\"kind\":\"ConfigMap\",\"causes\":"
                "[{\"reason\":\"FieldValueInvalid\",\"message\":\"Invalid value\",\"field\":"
                "\"data.x\"},{\"reason\":\"FieldValueRequired\",\"message\":\"Required\","
                "\"field\":\"data.y\"}]},\"code\":422}");
    else if (strstr(req, "/boom "))
        status_reply(fd, 500, "InternalError", "boom");
    else if (strstr(req, "/html "))
        respond(fd, 502, "text/html",
                "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>",
                NULL);
    else
        json_reply(fd, 200,
                "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"ok\","
                "\"namespace\":\"team\",\"resourceVersion\":\"7\"}}");
}

static kcr_err get(const char *name, kcr_status *st)
{
    kcr_object *o = NULL;
    kcr_err err = kcr_client_get(client, &CM, "team", name, NULL, &o, st);
    kcr_object_unref(o);
    return err;
}

Test(http, status_decoding_and_error_mapping, .fini = stop_server)
{
    start_server(errors_handler, NULL);
    kcr_status st = {0};
    cr_assert_eq(get("ok", &st), KCR_OK);
    cr_assert_eq(st.code, 0);
    cr_assert_eq(get("nf", &st), KCR_ERR_NOT_FOUND);
    cr_assert_eq(st.code, 404);
    cr_assert_str_eq(st.reason, "NotFound");
    cr_assert_str_eq(st.message, "configmaps \"nf\" not found");
    cr_assert_str_eq(st.details.kind, "configmaps");
    cr_assert_str_eq(kcr_last_error(), "404 NotFound: configmaps \"nf\" not found");
    cr_assert_eq(get("exists", &st), KCR_ERR_EXISTS);
    cr_assert_eq(get("conflict", &st), KCR_ERR_CONFLICT);
    cr_assert_eq(get("gone", &st), KCR_ERR_GONE);
    cr_assert_eq(get("unauth", &st), KCR_ERR_UNAUTHORIZED);
    cr_assert_eq(get("forbidden", &st), KCR_ERR_FORBIDDEN);
    cr_assert_str_eq(st.message, "user cannot get");
    cr_assert_eq(get("invalid", &st), KCR_ERR_INVALID_OBJECT);
    cr_assert_eq(st.details.n_causes, 2);
    cr_assert_str_eq(st.details.causes[1].field, "data.y");
    cr_assert_str_eq(st.details.causes[0].type, "FieldValueInvalid");
    cr_assert_eq(get("boom", &st), KCR_ERR_API);
    cr_assert_eq(st.code, 500);
    cr_assert_eq(get("html", &st), KCR_ERR_API);
    cr_assert_eq(st.code, 502);
    cr_assert(strstr(st.message, "HTTP 502: <html><head><title>502 Bad Gateway") == st.message,
              "%s", st.message);
    cr_assert(strstr(st.body, "nginx") != NULL);
    cr_assert(strstr(kcr_last_error(), "502 Bad Gateway") != NULL);
    cr_assert_eq(get("ok", NULL), KCR_OK, "status may be NULL");
    kcr_status_clear(&st);
}

/* ---- request formatting ---- */

static void echo_handler(int fd, const char *req)
{
    if (strstr(req, "DELETE "))
        json_reply(fd, 200, "{\"kind\":\"Status\",\"status\":\"Success\",\"code\":200}");
    else if (strstr(req, "watch=true") || strstr(req, "GET /api/v1/configmaps") ||
             strstr(req, "GET /api/v1/namespaces/team/configmaps?"))
        json_reply(fd, 200, "{\"metadata\":{\"resourceVersion\":\"1\"},\"items\":[]}");
    else
        json_reply(fd, 200, "{\"metadata\":{\"name\":\"ok\",\"resourceVersion\":\"7\"}}");
}

#define HAS(needle)                                                                                \
    do {                                                                                           \
        char r_[16384];                                                                            \
        request(r_, sizeof r_);                                                                    \
        cr_assert(strstr(r_, needle) != NULL, "expected %s in:\n%s", needle, r_);                 \
    } while (0)

Test(http, requests_are_encoded_and_authorized, .fini = stop_server)
{
    start_server(echo_handler, NULL);
    kcr_object *o = NULL;
    const kcr_resource deploy = {"apps", "v1", "deployments"};
    cr_assert_eq(kcr_client_get(client, &deploy, "a b", "x/y", NULL, &o, NULL), KCR_OK);
    kcr_object_unref(o);
    HAS("GET /apis/apps/v1/namespaces/a%20b/deployments/x%2Fy HTTP/1.1");
    HAS("Authorization: Bearer supersecret-token");
    char ua[128]; /* the program's name first: the apiserver's default field manager */
    snprintf(ua, sizeof ua, "User-Agent: %s/%s kcr", kcr__program_name(), KCR_VERSION_STRING);
    cr_assert_str_neq(kcr__program_name(), "kcr");
    HAS(ua);
    HAS("Accept: application/json");
    cr_assert_str_eq(kcr_client_namespace(client), "team");

    kcr_list_options lo = {.label_selector = "app in (a,b)", .field_selector = "metadata.name=x",
                           .limit = 2, .continue_token = "c+/=", .resource_version = "0",
                           .resource_version_match = "NotOlderThan", .timeout_ms = 8001,
                           .metadata_only = true};
    cr_assert_eq(kcr_client_list(client, &CM, NULL, &lo, NULL, NULL, NULL, NULL), KCR_OK);
    HAS("GET /api/v1/configmaps?labelSelector=app%20in%20%28a%2Cb%29&fieldSelector=metadata.name%3Dx"
        "&resourceVersion=0&resourceVersionMatch=NotOlderThan&limit=2&continue=c%2B%2F%3D"
        "&timeoutSeconds=9 "); /* 8001 ms, rounded up to whole seconds */
    HAS("Accept: application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json");

    kcr_list_options wo = {.allow_bookmarks = true, .send_initial_events = true,
                           .resource_version_match = "NotOlderThan", .timeout_ms = 300000};
    cr_assert_eq(kcr_client_watch(client, &CM, "team", &wo, NULL, NULL, NULL), KCR_ERR_PARSE,
                 "a list body is not a watch stream");
    HAS("?watch=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=300&allowWatchBookmarks=true"
        "&sendInitialEvents=true ");

    kcr_delete_options d = {.propagation_policy = "Foreground", .precondition_uid = "u-1",
                            .precondition_resource_version = "42"};
    cr_assert_eq(kcr_client_delete(client, &CM, "team", "gone", &d, &o, NULL), KCR_OK);
    cr_assert_null(o, "a Success Status is no object");
    HAS("DELETE /api/v1/namespaces/team/configmaps/gone ");
    HAS("\"propagationPolicy\":\"Foreground\"");
    HAS("\"preconditions\":{\"uid\":\"u-1\",\"resourceVersion\":\"42\"}");
    d = (kcr_delete_options){.has_grace_period = true, .grace_period_ms = 2500};
    cr_assert_eq(kcr_client_delete(client, &CM, "team", "gone", &d, NULL, NULL), KCR_OK);
    HAS("\"gracePeriodSeconds\":3"); /* rounded up to whole seconds */
    d.grace_period_ms = 0;
    cr_assert_eq(kcr_client_delete(client, &CM, "team", "gone", &d, NULL, NULL), KCR_OK);
    HAS("\"gracePeriodSeconds\":0");
    d.grace_period_ms = -1;
    cr_assert_eq(kcr_client_delete(client, &CM, "team", "gone", &d, NULL, NULL), KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "grace period"), "%s", kcr_last_error());

    static const char *const types[] = {"application/json-patch+json",
                                        "application/merge-patch+json",
                                        "application/strategic-merge-patch+json",
                                        "application/apply-patch+yaml"};
    kcr_write_options w = {.field_manager = "kcr-test", .force = true};
    for (int t = 0; t < 4; t++) {
        cr_assert_eq(kcr_client_patch(client, &CM, "team", "p", (kcr_patch_type)t,
                                      t == 0 ? "[]" : "{}", 0, &w, NULL, NULL),
                     KCR_OK);
        char ct[128];
        snprintf(ct, sizeof ct, "Content-Type: %s", types[t]);
        HAS(ct);
        HAS("PATCH /api/v1/namespaces/team/configmaps/p?fieldManager=kcr-test");
    }
    HAS("fieldManager=kcr-test&force=true ");
    cr_assert_eq(kcr_client_update_status(client, &CM, NULL,
                                          "{\"metadata\":{\"name\":\"s\",\"namespace\":\"team\"}}",
                                          0, NULL, NULL),
                 KCR_OK);
    char fm[128]; /* writes without a field manager get the program's name */
    snprintf(fm, sizeof fm, "PUT /api/v1/namespaces/team/configmaps/s/status?fieldManager=%s ",
             kcr__program_name());
    HAS(fm);
    cr_assert_eq(kcr_client_create(client, &CM, "team", "{\"metadata\":{\"name\":\"n\"}}", 0, NULL,
                                   NULL, NULL),
                 KCR_OK);
    snprintf(fm, sizeof fm, "POST /api/v1/namespaces/team/configmaps?fieldManager=%s ",
             kcr__program_name());
    HAS(fm);
    HAS("{\"metadata\":{\"name\":\"n\"}}");
    cr_assert_eq(kcr_client_create(client, &CM, "team", "{not json", 0, NULL, NULL, NULL),
                 KCR_ERR_INVALID);
}

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

Test(http, retry_after_on_429, .fini = stop_server, .timeout = 30)
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

Test(http, retries_are_bounded, .fini = stop_server, .timeout = 30)
{
    kcr_client_options o = {.max_retries = 2};
    start_server(always_busy, &o);
    kcr_status st = {0};
    cr_assert_eq(get("x", &st), KCR_ERR_TOO_MANY);
    cr_assert_eq(st.code, 429);
    cr_assert_eq(requests(), 3);
    kcr_status_clear(&st);
}

Test(http, connection_refused, .timeout = 30)
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
    cr_assert_eq(kcr_client_get(cl, &CM, "a", "b", NULL, NULL, NULL), KCR_ERR_TRANSPORT);
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

Test(http, request_observer_sees_every_attempt, .fini = stop_server, .timeout = 30)
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
    cr_assert_eq(kcr_client_get(cl, &CM, "a", "b", NULL, NULL, NULL), KCR_ERR_TRANSPORT);
    has_sample(m, "rest_client_requests_total{code=\"<error>\",method=\"GET\","
                  "host=\"127.0.0.1:1\"} 1");
    kcr_client_free(cl);
    kcr_config_free(cfg);
    kcr_metrics_free(m);
}

/* ---- streaming ---- */

static void chunked_list(int fd, const char *req)
{
    chunked_head(fd, "application/json");
    const char *parts[] = {"{\"kind\":\"ConfigMapList\",\"metadata\":{\"resourceVersion\":\"9\",\"contin",
                           "ue\":\"next\"},\"items\":[{\"metadata\":{\"name\":\"a\"}},",
                           "{\"metadata\":{\"name\":\"b\"}}", "]}"};
    for (int i = 0; i < 4; i++) {
        send_chunk(fd, parts[i], strlen(parts[i]));
        nap_ms(20);
    }
    send_all(fd, "0\r\n\r\n", 5);
}

static kcr_err count_item(kcr_object *o, void *ud)
{
    (*(int *)ud)++;
    return KCR_OK;
}

Test(http, streamed_list, .fini = stop_server)
{
    start_server(chunked_list, NULL);
    int n = 0;
    kcr_list_meta meta = {0};
    cr_assert_eq(kcr_client_list(client, &CM, "team", NULL, count_item, &n, &meta, NULL), KCR_OK,
                 "%s", kcr_last_error());
    cr_assert_eq(n, 2);
    cr_assert_str_eq(meta.resource_version, "9");
    cr_assert_str_eq(meta.continue_token, "next");
    kcr_list_meta_clear(&meta);
}

static void watch_stream(int fd, const char *req)
{
    chunked_head(fd, "application/json");
    const char *ev1 = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"5\"}}}\n";
    const char *ev2 = "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"6\"}}}\n";
    send_chunk(fd, ev1, 20);
    nap_ms(10);
    send_chunk(fd, ev1 + 20, strlen(ev1) - 20);
    send_chunk(fd, ev2, strlen(ev2));
    if (strstr(req, "truncate")) { /* a chunk cut short, then the connection drops */
        const char *cut = "40\r\n{\"type\":\"ADDED\"";
        send_all(fd, cut, strlen(cut));
        return;
    }
    if (strstr(req, "silent")) { /* stays connected without a byte */
        for (int i = 0; i < 300 && !atomic_load(&stopping); i++) {
            nap_ms(10);
            if (recv(fd, (char[1]){0}, 1, MSG_DONTWAIT) == 0)
                return; /* the client went away */
        }
        return;
    }
    if (strstr(req, "huge")) { /* one endless line */
        const char *head = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"x\"},\"d\":\"";
        send_chunk(fd, head, strlen(head));
        static char buf[1 << 16];
        memset(buf, 'y', sizeof buf);
        for (long sent = 0; sent < (1L << 30); sent += (long)sizeof buf)
            if (!send_chunk(fd, buf, sizeof buf))
                return;
        return;
    }
    if (strstr(req, "error")) {
        const char *e = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"status\":\"Failure\","
                        "\"message\":\"too old resource version: 1 (5)\",\"reason\":\"Expired\",\"code\":410}}\n";
        send_chunk(fd, e, strlen(e));
    }
    send_all(fd, "0\r\n\r\n", 5);
}

struct evs {
    int n;
    char rv[8][16];
};

static atomic_int events_seen; /* all watches' events, for other threads */

static kcr_err on_event(const kcr_watch_event *ev, void *ud)
{
    struct evs *e = ud;
    if (e->n < 8)
        snprintf(e->rv[e->n], 16, "%s", ev->resource_version);
    e->n++;
    atomic_fetch_add(&events_seen, 1);
    return KCR_OK;
}

static kcr_err watch_with(const char *selector, kcr_list_options *o, struct evs *e, kcr_status *st)
{
    kcr_list_options local = {0};
    if (!o)
        o = &local;
    o->label_selector = selector;
    return kcr_client_watch(client, &CM, "team", o, on_event, e, st);
}

Test(http, watch_clean_end_error_and_truncation, .fini = stop_server)
{
    start_server(watch_stream, NULL);
    struct evs e = {0};
    cr_assert_eq(watch_with("x=ok", NULL, &e, NULL), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(e.n, 2);
    cr_assert_str_eq(e.rv[0], "5");
    cr_assert_str_eq(e.rv[1], "6");
    e = (struct evs){0};
    kcr_status st = {0};
    cr_assert_eq(watch_with("x=error", NULL, &e, &st), KCR_ERR_GONE);
    cr_assert_eq(e.n, 3);
    cr_assert_eq(st.code, 410);
    cr_assert_str_eq(st.reason, "Expired");
    e = (struct evs){0};
    kcr_err te = watch_with("x=truncate", NULL, &e, NULL);
    cr_assert_eq(te, KCR_ERR_TRANSPORT, "%d %s", te, kcr_last_error());
    cr_assert_eq(e.n, 2, "events before the cut were delivered");
    cr_assert_str_not_empty(kcr_last_error());
    kcr_status_clear(&st);
}

Test(http, watch_one_gigabyte_line, .fini = stop_server, .timeout = 120)
{
    start_server(watch_stream, NULL);
    struct evs e = {0};
    cr_assert_eq(watch_with("x=huge", NULL, &e, NULL), KCR_ERR_TOO_LARGE, "%s", kcr_last_error());
    cr_assert_eq(e.n, 2);
}

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

Test(http, cancel_mid_transfer_and_idle_timeout, .fini = stop_server, .timeout = 30)
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
    kcr_list_options o = {.cancel = cc.c};
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
    o = (kcr_list_options){.idle_timeout_ms = 1000};
    t0 = kcr__now_ns();
    cr_assert_eq(watch_with("x=silent", &o, &e, NULL), KCR_ERR_TIMEOUT);
    took = kcr__now_ns() - t0;
    cr_assert_geq(took, 900 * KCR_NS_PER_MS);
    cr_assert_lt(took, 3 * KCR_NS_PER_S);
}

Test(http, rate_limiter, .fini = stop_server, .timeout = 30)
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

Test(http, concurrent_requests, .fini = stop_server, .timeout = 60)
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

Test(http, credentials_never_logged, .fini = stop_server)
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

static void legacy_discovery(int fd, const char *req)
{
    if (strstr(req, "GET /api HTTP"))
        json_reply(fd, 200, "{\"kind\":\"APIVersions\",\"versions\":[\"v1\"]}");
    else if (strstr(req, "GET /api/v1 HTTP"))
        json_reply(fd, 200,
                "{\"kind\":\"APIResourceList\",\"groupVersion\":\"v1\",\"resources\":["
                "{\"name\":\"configmaps\",\"singularName\":\"\",\"namespaced\":true,\"kind\":"
                "\"ConfigMap\",\"shortNames\":[\"cm\"]},{\"name\":\"pods/log\",\"namespaced\":true,"
                "\"kind\":\"Pod\"},{\"name\":\"nodes\",\"namespaced\":false,\"kind\":\"Node\"}]}");
    else if (strstr(req, "GET /apis HTTP"))
        json_reply(fd, 200,
                "{\"kind\":\"APIGroupList\",\"groups\":[{\"name\":\"apps\",\"versions\":["
                "{\"groupVersion\":\"apps/v1beta1\",\"version\":\"v1beta1\"},{\"groupVersion\":"
                "\"apps/v1\",\"version\":\"v1\"}],\"preferredVersion\":{\"groupVersion\":\"apps/v1\","
                "\"version\":\"v1\"}}]}");
    else if (strstr(req, "GET /apis/apps/v1 HTTP"))
        json_reply(fd, 200,
                "{\"kind\":\"APIResourceList\",\"groupVersion\":\"apps/v1\",\"resources\":["
                "{\"name\":\"deployments\",\"singularName\":\"deployment\",\"namespaced\":true,"
                "\"kind\":\"Deployment\",\"shortNames\":[\"deploy\"]}]}");
    else if (strstr(req, "GET /apis/apps/v1beta1 HTTP"))
        status_reply(fd, 503, "ServiceUnavailable", "down");
    else
        status_reply(fd, 404, "NotFound", "nope");
}

Test(http, legacy_discovery_fallback, .fini = stop_server)
{
    start_server(legacy_discovery, NULL);
    kcr_api_resource r;
    cr_assert_eq(kcr_client_resolve(client, "deploy", &r, NULL), KCR_OK, "%s", kcr_last_error());
    cr_assert_str_eq(r.group, "apps");
    cr_assert_str_eq(r.version, "v1");
    cr_assert_str_eq(r.resource, "deployments");
    HAS("Accept: application/json");
    cr_assert_eq(kcr_client_resolve(client, "ConfigMap", &r, NULL), KCR_OK);
    cr_assert_str_eq(r.resource, "configmaps");
    cr_assert_str_eq(r.singular, "configmap", "derived from the kind when the server omits it");
    cr_assert_eq(kcr_client_resolve(client, "no", &r, NULL), KCR_ERR_NOT_FOUND,
                 "short names come only from the server");
    cr_assert_eq(kcr_client_resolve(client, "nodes", &r, NULL), KCR_OK);
    cr_assert_not(r.namespaced);
    cr_assert_eq(kcr_client_resolve_kind(client, "apps", NULL, "Deployment", &r, NULL), KCR_OK);
    cr_assert_eq(kcr_client_resolve(client, "pods", &r, NULL), KCR_ERR_NOT_FOUND,
                 "subresources are not resources");
}

/* ---- a server that accepts and never answers ---- */

static void hang(int fd, const char *req)
{
    (void)fd;
    (void)req;
    while (!atomic_load(&stopping))
        nap_ms(10);
}

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
    kcr_get_options g = {.cancel = cancel};
    kcr_write_options w = {.cancel = cancel};
    kcr_delete_options d = {.cancel = cancel};
    kcr_raw_options r = {.cancel = cancel};
    const char *cm = "{\"metadata\":{\"name\":\"a\",\"namespace\":\"team\"}}";
    switch (verb) {
    case 0:
        return kcr_client_get(client, &CM, "team", "a", &g, NULL, NULL);
    case 1:
        return kcr_client_create(client, &CM, "team", cm, 0, &w, NULL, NULL);
    case 2:
        return kcr_client_update(client, &CM, "team", cm, 0, &w, NULL, NULL);
    case 3:
        return kcr_client_update_status_opts(client, &CM, "team", cm, 0, &w, NULL, NULL);
    case 4:
        return kcr_client_patch(client, &CM, "team", "a", KCR_PATCH_MERGE, "{}", 0, &w, NULL, NULL);
    case 5:
        return kcr_client_delete(client, &CM, "team", "a", &d, NULL, NULL);
    default:
        return kcr_client_request(client, "/api/v1/namespaces", NULL, 0, &r, NULL, NULL, NULL);
    }
}

static void *run_verb(void *arg)
{
    verb_call *v = arg;
    v->err = call_verb(v->verb, v->cancel);
    return NULL;
}

Test(http, every_verb_cancels_on_a_hung_server, .fini = stop_server, .timeout = 60)
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

typedef struct resolve_call {
    bool by_kind;
    kcr_cancel *cancel;
    kcr_err err;
} resolve_call;

static void *run_resolve(void *arg)
{
    resolve_call *r = arg;
    kcr_resolve_options o = {.cancel = r->cancel};
    kcr_api_resource ar;
    r->err = r->by_kind
                 ? kcr_client_resolve_kind_opts(client, "apps", NULL, "Deployment", &o, &ar, NULL)
                 : kcr_client_resolve_opts(client, "deploy", &o, &ar, NULL);
    return NULL;
}

Test(http, discovery_cancels_on_a_hung_server, .fini = stop_server, .timeout = 60)
{
    start_server(hang, NULL);
    for (int by_kind = 0; by_kind < 2; by_kind++) {
        resolve_call r = {.by_kind = by_kind};
        cr_assert_eq(kcr_cancel_new(&r.cancel), KCR_OK);
        int before = requests();
        pthread_t t;
        pthread_create(&t, NULL, run_resolve, &r);
        int64_t deadline = kcr__now_ns() + 10 * KCR_NS_PER_S;
        while (requests() == before && kcr__now_ns() < deadline)
            nap_ms(5);
        cr_assert_gt(requests(), before, "discovery never reached the server");
        int64_t t0 = kcr__now_ns();
        kcr_cancel_trigger(r.cancel);
        pthread_join(t, NULL);
        int64_t took = kcr__now_ns() - t0;
        cr_assert_eq(r.err, KCR_ERR_CANCELED, "%s", kcr_strerror(r.err));
        cr_assert_lt(took, KCR_NS_PER_S, "canceled after %lld ms",
                     (long long)(took / KCR_NS_PER_MS));
        /* a triggered token refuses before any request */
        before = requests();
        kcr_api_resource ar;
        kcr_resolve_options o = {.cancel = r.cancel};
        cr_assert_eq(kcr_client_resolve_opts(client, "cm", &o, &ar, NULL), KCR_ERR_CANCELED);
        cr_assert_eq(requests(), before);
        kcr_cancel_free(r.cancel);
        stop_server();
        start_server(hang, NULL);
    }
}

Test(http, default_request_timeout_bounds_every_verb, .fini = stop_server, .timeout = 60)
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

Test(http, field_manager_option, .fini = stop_server)
{
    kcr_client_options o = {.field_manager = "my-controller"};
    start_server(echo_handler, &o);
    cr_assert_eq(
        kcr_client_patch(client, &CM, "team", "p", KCR_PATCH_APPLY, "{}", 0, NULL, NULL, NULL),
        KCR_OK, "%s", kcr_last_error());
    HAS("PATCH /api/v1/namespaces/team/configmaps/p?fieldManager=my-controller ");
    kcr_write_options w = {.field_manager = "per-call"};
    cr_assert_eq(
        kcr_client_patch(client, &CM, "team", "p", KCR_PATCH_MERGE, "{}", 0, &w, NULL, NULL),
        KCR_OK);
    HAS("?fieldManager=per-call ");
}

/* ---- writes are sent once ---- */

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
Test(http, reset_writes_are_sent_once, .fini = stop_server, .timeout = 60)
{
    kcr_client_options o = {.max_retries = 2};
    start_server(reset_after_reading, &o);
    atomic_store(&method_count[0], 0);
    atomic_store(&method_count[1], 0);
    kcr_err err = kcr_client_create(client, &CM, "team", "{\"metadata\":{\"name\":\"n\"}}", 0, NULL,
                                    NULL, NULL);
    cr_assert_eq(err, KCR_ERR_TRANSPORT, "%s", kcr_strerror(err));
    cr_assert_eq(atomic_load(&method_count[1]), 1, "POST sent %d times",
                 atomic_load(&method_count[1]));
    const kcr_patch_type once[] = {KCR_PATCH_MERGE, KCR_PATCH_JSON, KCR_PATCH_STRATEGIC};
    const char *bodies[] = {"{\"data\":{\"a\":\"b\"}}",
                            "[{\"op\":\"add\",\"path\":\"/data\",\"value\":{}}]",
                            "{\"data\":{\"a\":\"b\"}}"};
    for (int i = 0; i < 3; i++) {
        err = kcr_client_patch(client, &CM, "team", "n", once[i], bodies[i], 0, NULL, NULL, NULL);
        cr_assert_eq(err, KCR_ERR_TRANSPORT, "patch %d: %s", i, kcr_strerror(err));
        cr_assert_eq(atomic_load(&method_count[1]), 2 + i, "patch %d sent %d times in all", i,
                     atomic_load(&method_count[1]) - 1);
    }
    /* the contrast: idempotent requests are retried (1 + max_retries) */
    cr_assert_eq(get("n", NULL), KCR_ERR_TRANSPORT);
    cr_assert_eq(atomic_load(&method_count[0]), 3, "GET sent %d times",
                 atomic_load(&method_count[0]));
    kcr_write_options w = {.field_manager = "test"};
    err = kcr_client_patch(client, &CM, "team", "n", KCR_PATCH_APPLY,
                           "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\"}", 0, &w, NULL, NULL);
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

Test(http, reset_write_on_a_reused_connection_is_sent_once, .timeout = 60)
{
    ka_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(bind(ka_fd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(listen(ka_fd, 16), 0);
    socklen_t al = sizeof a;
    getsockname(ka_fd, (struct sockaddr *)&a, &al);
    atomic_store(&stopping, false);
    pthread_t t;
    pthread_create(&t, NULL, ka_serve, NULL);
    char yaml[512];
    snprintf(yaml, sizeof yaml,
             "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:%d'}}]\n"
             "contexts: [{name: x, context: {cluster: c}}]\ncurrent-context: x\n",
             ntohs(a.sin_port));
    kcr_config *cfg;
    cr_assert_eq(kcr_config_parse_kubeconfig(yaml, strlen(yaml), NULL, NULL, &cfg), KCR_OK);
    kcr_client *cl;
    kcr_client_options plain = {.allow_insecure_http = true};
    cr_assert_eq(kcr_client_new(cfg, &plain, &cl), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_client_get(cl, &CM, "a", "x", NULL, NULL, NULL), KCR_OK, "%s",
                 kcr_last_error());
    kcr_err err =
        kcr_client_create(cl, &CM, "a", "{\"metadata\":{\"name\":\"n\"}}", 0, NULL, NULL, NULL);
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
