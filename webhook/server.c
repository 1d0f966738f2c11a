/* The server's life cycle: options, start (certificate, bind, loop thread,
 * workers), the HTTP entry point that hands a request to the pool, stop. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <event2/thread.h>

#include "core/error.h"
#include "core/log.h"
#include "webhook/webhook_internal.h"

#define HEADERS_MAX 16384

static char *dup_or(const char *s, const char *dflt)
{
    return strdup(s ? s : dflt);
}

static kcr_err parse_address(const char *address, char **host, int *port)
{
    const char *colon = strrchr(address, ':');
    if (!colon)
        return kcr__fail(KCR_ERR_INVALID, "webhook bind address \"%s\" is not host:port or :port",
                         address);
    const char *h = address;
    size_t hlen = (size_t)(colon - address);
    if (hlen >= 2 && h[0] == '[' && h[hlen - 1] == ']') {
        h++;
        hlen -= 2;
    }
    char *end = NULL;
    errno = 0;
    long p = strtol(colon + 1, &end, 10);
    if (!colon[1] || *end || errno || p < 0 || p > 65535)
        return kcr__fail(KCR_ERR_INVALID, "webhook bind address \"%s\": bad port", address);
    *host = hlen ? strndup(h, hlen) : strdup("0.0.0.0");
    *port = (int)p;
    return *host ? KCR_OK : kcr__fail(KCR_ERR_NOMEM, "out of memory");
}

/* The connection limit, lowered to leave room under RLIMIT_NOFILE. */
static int connection_limit(int wanted)
{
    int n = wanted > 0 ? wanted : 1024;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur < (rlim_t)n + 64)
        n = rl.rlim_cur > 128 ? (int)rl.rlim_cur - 64 : 64;
    return n;
}

kcr_err kcr_webhook_server_new(const kcr_webhook_server_options *opts, kcr_webhook_server **out)
{
    if (!out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_webhook_server_new: out is NULL");
    *out = NULL;
    if (!opts || !opts->cert_dir || !*opts->cert_dir)
        return kcr__fail(KCR_ERR_INVALID, "kcr_webhook_server_new: cert_dir is required");
    kcr_webhook_server *s = calloc(1, sizeof *s);
    if (!s)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    kcr_err err = parse_address(opts->bind_address ? opts->bind_address : ":9443", &s->host,
                                &s->port_wanted);
    char *cert = dup_or(opts->cert_name, "tls.crt"), *key = dup_or(opts->key_name, "tls.key");
    if (!err && (!cert || !key))
        err = kcr__fail(KCR_ERR_NOMEM, "out of memory");
    if (!err && (asprintf(&s->cert_path, "%s/%s", opts->cert_dir, cert) < 0 ||
                 asprintf(&s->key_path, "%s/%s", opts->cert_dir, key) < 0)) {
        s->cert_path = s->key_path = NULL;
        err = kcr__fail(KCR_ERR_NOMEM, "out of memory");
    }
    free(cert);
    free(key);
    s->cert_poll_ms = opts->cert_poll_ms > 0 ? opts->cert_poll_ms : 1000;
    s->read_timeout_ms = opts->read_timeout_ms > 0 ? opts->read_timeout_ms : 10000;
    s->idle_timeout_ms = opts->idle_timeout_ms > 0 ? opts->idle_timeout_ms : 90000;
    s->max_body = opts->max_body_bytes ? opts->max_body_bytes : KCR_WEBHOOK_DEFAULT_MAX_BODY_BYTES;
    s->max_conns = connection_limit(opts->max_connections);
    s->n_workers = opts->workers > 0 ? opts->workers : 8;
    s->metrics = opts->metrics;
    s->observe = opts->observe;
    s->observe_user_data = opts->observe_user_data;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cond, NULL);
    if (!err)
        err = kcr__wh_metrics_register(s);
    if (err) {
        kcr_webhook_server_free(s);
        return err;
    }
    *out = s;
    return KCR_OK;
}

/* The HTTP entry point (loop): checks what can be checked without parsing,
 * then hands the body to a worker. */
static void on_request(struct evhttp_request *req, void *arg)
{
    kcr_webhook_server *s = arg;
    struct kcr__wh_conn *conn = kcr__wh_conn_of(req);
    if (conn)
        kcr__wh_conn_disarm(conn);
    const char *uri = evhttp_request_get_uri(req);
    struct evhttp_uri *parsed = evhttp_uri_parse(uri);
    const char *path = parsed ? evhttp_uri_get_path(parsed) : NULL;
    const struct kcr__wh_route *r = path ? kcr__wh_route_find(s, path) : NULL;
    evhttp_uri_free(parsed);
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    const char *ctype = evhttp_find_header(evhttp_request_get_input_headers(req), "Content-Type");
    int status = 0;
    const char *why = NULL;
    if (!r) {
        status = 404, why = "no webhook at this path\n";
    } else if (evhttp_request_get_command(req) != EVHTTP_REQ_POST) {
        status = 405, why = "webhooks take POST\n";
    } else if (!ctype || strncmp(ctype, "application/json", 16) != 0) {
        status = 400, why = "Content-Type must be application/json\n";
    } else if (len == 0) {
        status = 400, why = "empty request body\n";
    } else if (len > s->max_body) {
        status = 413, why = "request body too large\n";
    }
    struct kcr__wh_job *job = calloc(1, sizeof *job);
    char *body = (!status && job) ? malloc(len + 1) : NULL;
    if (!status && !body)
        status = 503, why = "out of memory\n";
    if (status) {
        free(job);
        atomic_fetch_add(&s->n_rejected, 1);
        atomic_fetch_add(&s->n_requests, 1);
        struct evbuffer *b = evbuffer_new();
        if (b)
            evbuffer_add(b, why, strlen(why));
        evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "text/plain");
        evhttp_send_reply(req, status, NULL, b);
        if (b)
            evbuffer_free(b);
        if (r)
            kcr__wh_metrics_answered(s, r, status, kcr__wh_now_ns());
        if (conn)
            kcr__wh_conn_arm(conn, s->idle_timeout_ms + s->read_timeout_ms);
        return;
    }
    evbuffer_remove(in, body, len);
    body[len] = '\0';
    atomic_init(&job->refs, 1);
    job->s = s;
    job->route = r;
    job->body = body;
    job->len = len;
    job->req = req;
    job->conn = conn;
    job->start_ns = kcr__wh_now_ns();
    if (conn)
        conn->job = job;
    kcr__wh_pool_submit(s, job);
}

_Thread_local kcr_webhook_server *kcr__wh_loop_server;

static void *loop_main(void *arg)
{
    kcr_webhook_server *s = arg;
    kcr__wh_loop_server = s;
    /* OpenSSL writes to sockets with write(): a peer gone away would raise
     * SIGPIPE and kill the process. Blocked on this thread (the only one
     * writing to connections) it stays pending and write() fails EPIPE. */
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, NULL);
    event_base_dispatch(s->base);
    return NULL;
}

/* Loop, last: closes every connection (evhttp_free) while the loop still
 * runs, since libevent finishes freeing a connection's bufferevent from the
 * loop; a moment later the loop ends. */
static void close_all(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    kcr_webhook_server *s = arg;
    s->bound = NULL; /* freed first by evhttp_free; the close hooks must not use it */
    evhttp_free(s->http);
    s->http = NULL;
    struct timeval finalize = {.tv_sec = 0, .tv_usec = 50000};
    event_base_loopexit(s->base, &finalize);
}

/* Loop: the stop request. Stops accepting, answers what is pending, gives
 * those answers a moment to be written, then closes everything. */
static void on_stop(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    kcr_webhook_server *s = arg;
    if (s->bound)
        evconnlistener_disable(evhttp_bound_socket_get_listener(s->bound));
    bool answered = s->pending != NULL;
    while (s->pending) {
        struct kcr__wh_job *job = s->pending;
        kcr__wh_job_answer(job, 503, "webhook server stopping\n", 24);
    }
    struct timeval flush = {.tv_sec = 0, .tv_usec = answered ? 200000 : 0};
    if (event_base_once(s->base, -1, EV_TIMEOUT, close_all, s, &flush) != 0)
        close_all(-1, 0, s);
}

static pthread_once_t evthread_once = PTHREAD_ONCE_INIT;
static void evthread_init(void)
{
    evthread_use_pthreads();
}

static kcr_err start_loop(kcr_webhook_server *s)
{
    pthread_once(&evthread_once, evthread_init);
    s->base = event_base_new();
    s->http = s->base ? evhttp_new(s->base) : NULL;
    s->done_ev = s->base ? event_new(s->base, -1, 0, kcr__wh_pool_done_cb, s) : NULL;
    s->stop_ev = s->base ? event_new(s->base, -1, 0, on_stop, s) : NULL;
    if (!s->http || !s->done_ev || !s->stop_ev)
        return kcr__fail(KCR_ERR_NOMEM, "webhook server: cannot create the event loop");
    kcr_err err = kcr__wh_tls_start(s);
    if (err)
        return err;
    evhttp_set_bevcb(s->http, kcr__wh_conn_new, s);
    evhttp_set_gencb(s->http, on_request, s);
    evhttp_set_max_body_size(s->http, (ev_ssize_t)s->max_body);
    /* read (and drop) an oversized body before answering 413, so the client
     * is not reset mid-send and sees the answer; read_timeout_ms bounds it */
    evhttp_set_flags(s->http, EVHTTP_SERVER_LINGERING_CLOSE);
    evhttp_set_max_headers_size(s->http, HEADERS_MAX);
    evhttp_set_allowed_methods(s->http, EVHTTP_REQ_POST | EVHTTP_REQ_GET);
    struct timeval tv = {.tv_sec = s->idle_timeout_ms / 1000,
                         .tv_usec = (s->idle_timeout_ms % 1000) * 1000};
    evhttp_set_timeout_tv(s->http, &tv);
    s->bound = evhttp_bind_socket_with_handle(s->http, s->host, (ev_uint16_t)s->port_wanted);
    if (!s->bound)
        return kcr__fail(KCR_ERR_IO, "webhook server: cannot listen on %s:%d: %s", s->host,
                         s->port_wanted, strerror(errno));
    struct evconnlistener *l = evhttp_bound_socket_get_listener(s->bound);
    evconnlistener_set_error_cb(l, kcr__wh_accept_error);
    /* accepted sockets inherit it (Linux): without it, an answer written in
     * two TLS records waits for the client's delayed ACK (~40 ms) */
    int one = 1;
    setsockopt(evhttp_bound_socket_get_fd(s->bound), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    evutil_socket_t fd = evhttp_bound_socket_get_fd(s->bound);
    int port = 0;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
        port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                              : ((struct sockaddr_in *)&ss)->sin_port);
    pthread_mutex_lock(&s->mu);
    s->port = port;
    pthread_mutex_unlock(&s->mu);
    return KCR_OK;
}

kcr_err kcr_webhook_server_start(kcr_webhook_server *s)
{
    if (!s)
        return kcr__fail(KCR_ERR_INVALID, "kcr_webhook_server_start: server is NULL");
    pthread_mutex_lock(&s->mu);
    bool again = s->started;
    s->started = true;
    pthread_mutex_unlock(&s->mu);
    if (again)
        return kcr__fail(KCR_ERR_STATE, "webhook server already started");
    kcr_err err = start_loop(s);
    if (!err)
        err = kcr__wh_pool_start(s);
    if (!err && pthread_create(&s->loop_thread, NULL, loop_main, s) != 0)
        err = kcr__fail(KCR_ERR_NOMEM, "webhook server: cannot start the loop thread");
    if (err) {
        kcr__wh_pool_stop(s);
        pthread_mutex_lock(&s->mu);
        s->stopping = true; /* nothing to join */
        pthread_mutex_unlock(&s->mu);
        return err;
    }
    kcr__log(KCR_LOG_INFO, "webhook", "serving webhooks on https://%s:%d (certificate %s)",
             s->host, s->port, s->cert_path);
    return KCR_OK;
}

int kcr_webhook_server_port(const kcr_webhook_server *s)
{
    if (!s)
        return 0;
    kcr_webhook_server *m = (kcr_webhook_server *)s;
    pthread_mutex_lock(&m->mu);
    int port = m->port;
    pthread_mutex_unlock(&m->mu);
    return port;
}

void kcr_webhook_server_stop(kcr_webhook_server *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    bool run = s->started && !s->stopping;
    s->stopping = true;
    pthread_mutex_unlock(&s->mu);
    if (!run)
        return;
    event_active(s->stop_ev, 0, 0);
    pthread_join(s->loop_thread, NULL);
    kcr__wh_pool_stop(s);
    /* late results of handlers that overran: nobody waits for them */
    kcr__wh_pool_done_cb(-1, 0, s);
}

void kcr_webhook_server_free(kcr_webhook_server *s)
{
    if (!s)
        return;
    kcr_webhook_server_stop(s);
    kcr__wh_pool_stop(s);
    s->bound = NULL;      /* evhttp_free frees the listener before the connections,
                             whose close hook must not re-enable it */
    if (s->http)
        evhttp_free(s->http); /* never started: no connection to finish */
    if (s->cert_timer)
        event_free(s->cert_timer);
    if (s->done_ev)
        event_free(s->done_ev);
    if (s->stop_ev)
        event_free(s->stop_ev);
    if (s->base)
        event_base_free(s->base);
    SSL_CTX_free(s->ctx);
    kcr__wh_routes_free(s);
    free(s->workers);
    free(s->host);
    free(s->cert_path);
    free(s->key_path);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cond);
    free(s);
}

kcr_err kcr_webhook_server_ready_check(char **message, void *user_data)
{
    kcr_webhook_server *s = user_data;
    pthread_mutex_lock(&s->mu);
    bool serving = s->started && !s->stopping && s->port > 0;
    pthread_mutex_unlock(&s->mu);
    long long not_after = atomic_load(&s->cert_not_after);
    const char *why = NULL;
    if (!serving)
        why = "webhook server is not serving";
    else if (not_after <= 0)
        why = "webhook server has no certificate";
    else if (not_after < (long long)time(NULL))
        why = "webhook serving certificate has expired";
    if (!why)
        return KCR_OK;
    if (message)
        *message = strdup(why);
    return KCR_ERR_STATE;
}

void kcr_webhook_server_stats(const kcr_webhook_server *s, kcr_webhook_stats *out)
{
    if (!s || !out)
        return;
    kcr_webhook_server *m = (kcr_webhook_server *)s;
    out->requests = atomic_load(&m->n_requests);
    out->rejected_requests = atomic_load(&m->n_rejected);
    out->handler_timeouts = atomic_load(&m->n_timeouts);
    out->connections = atomic_load(&m->n_conns);
    out->open_connections = atomic_load(&m->n_open);
    out->closed_slow = atomic_load(&m->n_slow);
    out->cert_reloads = atomic_load(&m->n_reloads);
    out->cert_reload_failures = atomic_load(&m->n_reload_failures);
}
