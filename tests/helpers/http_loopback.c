/* The loopback HTTP server of http_loopback.h. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "helpers/http_loopback.h"

kcr_client *client;
int port;
atomic_bool stopping;
const kcr_resource CM = {"", "v1", "configmaps"};

static int listen_fd = -1;
static pthread_t server_thread;
static handler_fn handler;
static pthread_mutex_t req_lock = PTHREAD_MUTEX_INITIALIZER;
static char last_request[16384];
static int n_requests;
static kcr_config *config;

void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

bool send_all(int fd, const char *buf, size_t len)
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

void respond(int fd, int code, const char *type, const char *body, const char *extra)
{
    char head[1024];
    snprintf(head, sizeof head,
             "HTTP/1.1 %d X\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n%s\r\n",
             code, type, strlen(body), extra ? extra : "");
    send_all(fd, head, strlen(head));
    send_all(fd, body, strlen(body));
}

bool send_chunk(int fd, const char *data, size_t len)
{
    char head[32];
    snprintf(head, sizeof head, "%zx\r\n", len);
    return send_all(fd, head, strlen(head)) && send_all(fd, data, len) && send_all(fd, "\r\n", 2);
}

void chunked_head(int fd, const char *type)
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

void start_server(handler_fn fn, const kcr_client_options *opts)
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

void stop_server(void)
{
    kcr_client_free(client);
    kcr_config_free(config);
    atomic_store(&stopping, true);
    pthread_join(server_thread, NULL);
    close(listen_fd);
}

int requests(void)
{
    pthread_mutex_lock(&req_lock);
    int n = n_requests;
    pthread_mutex_unlock(&req_lock);
    return n;
}

void request(char *buf, size_t size)
{
    pthread_mutex_lock(&req_lock);
    snprintf(buf, size, "%s", last_request);
    pthread_mutex_unlock(&req_lock);
}

const char *status_json(int code, const char *reason, const char *msg)
{
    static char buf[1024];
    snprintf(buf, sizeof buf,
             "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
             "\"message\":\"%s\",\"reason\":\"%s\",\"details\":{\"name\":\"x\",\"kind\":"
             "\"configmaps\"},\"code\":%d}",
             msg, reason, code);
    return buf;
}

void json_reply(int fd, int code, const char *body)
{
    respond(fd, code, "application/json", body, NULL);
}

void status_reply(int fd, int code, const char *reason, const char *msg)
{
    json_reply(fd, code, status_json(code, reason, msg));
}

kcr_err get(const char *name, kcr_status *st)
{
    kcr_object *o = NULL;
    kcr_err err = kcr_client_get(
        client, &(kcr_request){.resource = &CM, .ns = "team", .name = name, .status = st}, &o);
    kcr_object_unref(o);
    return err;
}

void echo_handler(int fd, const char *req)
{
    if (strstr(req, "DELETE "))
        json_reply(fd, 200, "{\"kind\":\"Status\",\"status\":\"Success\",\"code\":200}");
    else if (strstr(req, "watch=true") || strstr(req, "GET /api/v1/configmaps") ||
             strstr(req, "GET /api/v1/namespaces/team/configmaps?"))
        json_reply(fd, 200, "{\"metadata\":{\"resourceVersion\":\"1\"},\"items\":[]}");
    else
        json_reply(fd, 200, "{\"metadata\":{\"name\":\"ok\",\"resourceVersion\":\"7\"}}");
}

void hang(int fd, const char *req)
{
    (void)fd;
    (void)req;
    while (!atomic_load(&stopping))
        nap_ms(10);
}

void watch_stream(int fd, const char *req)
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

atomic_int events_seen; /* all watches' events, for other threads */

static kcr_err on_event(const kcr_watch_event *ev, void *ud)
{
    struct evs *e = ud;
    if (e->n < 8)
        snprintf(e->rv[e->n], 16, "%s", ev->resource_version);
    e->n++;
    atomic_fetch_add(&events_seen, 1);
    return KCR_OK;
}

kcr_err watch_with(const char *selector, kcr_request *o, struct evs *e, kcr_status *st)
{
    kcr_request local = {0};
    if (!o)
        o = &local;
    o->resource = &CM;
    o->ns = "team";
    o->label_selector = selector;
    o->status = st;
    return kcr_client_watch(client, o, on_event, e);
}
