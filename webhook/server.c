/* The server's life cycle: options, start (the listening socket, the event
 * loops, the certificate, the workers), the HTTP entry point that hands a
 * request to the pool, stop. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/thread.h>

#include "core/error.h"
#include "core/log.h"
#include "webhook/webhook_internal.h"

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

/* The default number of loops: one per CPU this process may run on. */
static int online_cpus(void)
{
    cpu_set_t set;
    long n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                        : sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 64 ? 64 : (int)n;
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
    s->n_loops = opts->loops > 0 ? opts->loops : online_cpus();
    s->metrics = opts->metrics;
    s->observe = opts->observe;
    s->observe_user_data = opts->observe_user_data;
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->ctx_mu, NULL);
    if (!err)
        err = kcr__wh_metrics_register(s);
    if (err) {
        kcr_webhook_server_free(s);
        return err;
    }
    *out = s;
    return KCR_OK;
}

/* Stops the loops, all at once (each answers its pending jobs 503, and any
 * request that comes after, and closes its
 * connections), then the workers, then drops the late results of handlers
 * that overran: nobody waits for them. */
static void stop_all(kcr_webhook_server *s)
{
    for (int i = 0; s->loops && i < s->n_loops; i++)
        kcr__wh_loop_request_stop(&s->loops[i]);
    for (int i = 0; s->loops && i < s->n_loops; i++)
        kcr__wh_loop_join(&s->loops[i]);
    kcr__wh_pool_stop(s);
    for (int i = 0; s->loops && i < s->n_loops; i++)
        kcr__wh_pool_done_cb(-1, 0, &s->loops[i]);
}

/* The HTTP entry point (loop; arg: the loop): checks what can be checked
 * without parsing, then hands the body to a worker. */
void kcr__wh_on_request(struct evhttp_request *req, void *arg)
{
    struct kcr__wh_loop *l = arg;
    kcr_webhook_server *s = l->s;
    struct kcr__wh_conn *conn = kcr__wh_conn_of(req);
    if (conn)
        kcr__wh_conn_disarm(conn);
    const char *uri = evhttp_request_get_uri(req);
    const struct kcr__wh_route *r = NULL;
    if (uri[0] == '/' && uri[1] != '/' && !strpbrk(uri, "?#")) { /* "/path": the path */
        r = kcr__wh_route_find(s, uri);
    } else {
        struct evhttp_uri *parsed = evhttp_uri_parse(uri);
        const char *path = parsed ? evhttp_uri_get_path(parsed) : NULL;
        r = path ? kcr__wh_route_find(s, path) : NULL;
        evhttp_uri_free(parsed);
    }
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    const char *ctype = evhttp_find_header(evhttp_request_get_input_headers(req), "Content-Type");
    int status = 0;
    const char *why = NULL;
    if (l->stopping) {
        status = 503, why = "webhook server stopping\n";
        evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
    } else if (!r) {
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
    struct kcr__wh_job *job = status ? NULL : kcr__wh_job_new(len);
    if (!status && !job)
        status = 503, why = "out of memory\n";
    if (status) {
        atomic_fetch_add(&s->n_rejected, 1);
        atomic_fetch_add(&s->n_requests, 1);
        if (r) /* counted before the answer leaves, as in kcr__wh_job_answer */
            kcr__wh_metrics_answered(s, r, status, kcr__wh_now_ns());
        kcr__wh_reply(req, status, why, strlen(why));
        if (conn)
            kcr__wh_conn_arm(conn, s->idle_timeout_ms + s->read_timeout_ms);
        return;
    }
    evbuffer_remove(in, job->body, len);
    job->s = s;
    job->loop = l;
    job->route = r;
    job->req = req;
    job->conn = conn;
    job->start_ns = kcr__wh_now_ns();
    if (conn)
        conn->job = job;
    kcr__wh_pool_submit(job);
}

static pthread_once_t evthread_once = PTHREAD_ONCE_INIT;
static void evthread_init(void)
{
    evthread_use_pthreads();
}

/* The listening socket and the loops, each with a listener on it (start;
 * KCR_ERR_IO naming the address when it cannot bind). */
static kcr_err start_loops(kcr_webhook_server *s)
{
    pthread_once(&evthread_once, evthread_init);
    s->loops = calloc((size_t)s->n_loops, sizeof *s->loops);
    if (!s->loops)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    evutil_socket_t fd = kcr__wh_listen(s->host, s->port_wanted);
    if (fd < 0)
        return kcr__fail(KCR_ERR_IO, "webhook server: cannot listen on %s:%d: %s", s->host,
                         s->port_wanted, strerror(errno));
    int port = kcr__wh_listen_port(fd);
    kcr_err err = KCR_OK;
    for (int i = 0; !err && i < s->n_loops; i++)
        err = kcr__wh_loop_init(&s->loops[i], s, i, fd);
    close(fd); /* each loop has its own duplicate */
    if (!err)
        err = kcr__wh_tls_start(s);
    if (err)
        return err;
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
    kcr_err err = start_loops(s);
    if (!err)
        err = kcr__wh_pool_start(s);
    for (int i = 0; !err && i < s->n_loops; i++)
        err = kcr__wh_loop_run(&s->loops[i]);
    if (err) {
        pthread_mutex_lock(&s->mu);
        s->stopping = true;
        pthread_mutex_unlock(&s->mu);
        stop_all(s);
        return err;
    }
    kcr__log(KCR_LOG_INFO, "webhook", "serving webhooks on https://%s:%d (certificate %s, %d loops)",
             s->host, s->port, s->cert_path, s->n_loops);
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
    if (run)
        stop_all(s);
}

void kcr_webhook_server_free(kcr_webhook_server *s)
{
    if (!s)
        return;
    kcr_webhook_server_stop(s);
    kcr__wh_pool_stop(s);
    if (s->cert_timer)
        event_free(s->cert_timer); /* before loop 0's base */
    for (int i = 0; s->loops && i < s->n_loops; i++)
        kcr__wh_loop_free(&s->loops[i]);
    free(s->loops);
    SSL_CTX_free(s->ctx);
    kcr__wh_routes_free(s);
    free(s->host);
    free(s->cert_path);
    free(s->key_path);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->ctx_mu);
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
