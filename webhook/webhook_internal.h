/* Internal to webhook/: the server, its routes, connections and jobs.
 *
 * Threads: the loop thread owns libevent (evhttp, connections, timers) and
 * everything marked "loop"; workers own a job between taking it from the
 * queue and posting it done. A job is shared by reference count (the loop's
 * reference and the worker's). */
#ifndef KCR_WEBHOOK_INTERNAL_H
#define KCR_WEBHOOK_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <event2/event.h>
#include <event2/http.h>
#include <openssl/ssl.h>

#include "kcr/webhook.h"

enum kcr__wh_route_kind { KCR__WH_ADMISSION = 1, KCR__WH_CONVERSION = 2 };

/* One path. Immutable after start. */
struct kcr__wh_route {
    char *path;
    enum kcr__wh_route_kind kind;
    kcr_admission_type type;
    kcr_admission_fn fn;
    void *user_data;
    void *owned;               /* freed with the route (validator pair, converters) */
    void (*free_owned)(void *);
    int64_t timeout_ms;
    kcr_webhook_failure_policy policy;
    kcr_metric *latency, *in_flight; /* NULL without a registry */
    struct kcr__wh_route *next;
};

struct kcr__wh_conn;

/* One request being handled. */
struct kcr__wh_job {
    atomic_int refs;
    kcr_webhook_server *s;
    const struct kcr__wh_route *route;
    char *body;
    size_t len;
    int64_t start_ns;
    /* loop only */
    struct evhttp_request *req; /* NULL once answered */
    struct kcr__wh_conn *conn;  /* NULL once the connection is gone */
    struct event *deadline;
    struct kcr__wh_job *prev, *next; /* the server's pending list */
    /* written by the worker before it posts the job done */
    int status;
    char *reply;
    size_t reply_len;
    struct kcr__wh_job *qnext; /* worker queue / done list link */
};

/* One client connection (loop only); lives as long as its SSL object. */
struct kcr__wh_conn {
    kcr_webhook_server *s;
    struct bufferevent *bev;
    struct event *timer; /* read deadline: closes a connection too slow to
                            deliver its next request */
    struct kcr__wh_job *job;
};

struct kcr_webhook_server {
    /* options */
    char *host;
    int port_wanted;
    char *cert_path, *key_path;
    int64_t cert_poll_ms, read_timeout_ms, idle_timeout_ms;
    size_t max_body;
    int max_conns, n_workers;
    kcr_metrics *metrics;
    kcr_metric_family *requests_total;
    void (*observe)(const char *path, const char *body, size_t len, void *user_data);
    void *observe_user_data;
    struct kcr__wh_route *routes;

    /* loop */
    struct event_base *base;
    struct evhttp *http;
    struct evhttp_bound_socket *bound;
    struct event *cert_timer, *done_ev, *stop_ev;
    SSL_CTX *ctx;
    struct kcr__wh_job *pending; /* jobs not yet answered */
    int open_conns;
    bool accept_paused;
    /* the files of the loaded pair, to notice a change */
    struct kcr__wh_file_id {
        int64_t mtime_ns, size;
        uint64_t ino, dev;
    } cert_id, key_id;

    pthread_t loop_thread;
    pthread_t *workers;
    pthread_mutex_t mu; /* guards the queue, the done list and the flags */
    pthread_cond_t cond;
    struct kcr__wh_job *queue_head, *queue_tail, *done_list;
    bool started, stopping, workers_quit;
    int port;
    atomic_llong cert_not_after; /* unix seconds of the loaded leaf, 0: none */

    /* stats */
    atomic_ullong n_requests, n_rejected, n_timeouts, n_conns, n_open, n_slow, n_reloads,
        n_reload_failures;
};

static inline int64_t kcr__wh_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* tls.c: loads the pair into a new context (TLS 1.2+, no renegotiation).
 * KCR_ERR_TLS with the file and OpenSSL's reason. *not_after: leaf expiry. */
kcr_err kcr__wh_tls_load(const char *cert_path, const char *key_path, SSL_CTX **out,
                         int64_t *not_after);
/* tls.c: loads the first pair (start) and arms the poll timer (loop). */
kcr_err kcr__wh_tls_start(kcr_webhook_server *s);

/* conn.c: evhttp's bufferevent callback and the connection bookkeeping. */
struct bufferevent *kcr__wh_conn_new(struct event_base *base, void *arg);
struct kcr__wh_conn *kcr__wh_conn_of(struct evhttp_request *req);
void kcr__wh_conn_arm(struct kcr__wh_conn *c, int64_t ms);
void kcr__wh_conn_disarm(struct kcr__wh_conn *c);
/* Once: the SSL ex_data slot holding the connection. */
int kcr__wh_conn_index(void);
/* The server whose loop runs on this thread (set by the loop thread). */
extern _Thread_local kcr_webhook_server *kcr__wh_loop_server;
/* The listener's error callback: pauses accepting on EMFILE and friends. */
void kcr__wh_accept_error(struct evconnlistener *l, void *arg);

/* pool.c: workers and the hand-over of jobs between loop and workers. */
kcr_err kcr__wh_pool_start(kcr_webhook_server *s);
void kcr__wh_pool_stop(kcr_webhook_server *s);
/* Loop: queues a job and arms its deadline. */
void kcr__wh_pool_submit(kcr_webhook_server *s, struct kcr__wh_job *job);
/* Loop: the done event's callback. */
void kcr__wh_pool_done_cb(evutil_socket_t fd, short what, void *arg);
void kcr__wh_job_unref(struct kcr__wh_job *job);
/* Loop: sends a reply for the job (once) and releases the loop's reference
 * to the request. body is copied. */
void kcr__wh_job_answer(struct kcr__wh_job *job, int status, const char *body, size_t len);

/* Worker: sets the job's result to a text/plain answer (why + newline). */
void kcr__wh_job_text(struct kcr__wh_job *job, int status, const char *why);

/* Runs a job's handler: fills job->status/reply (worker thread). */
void kcr__wh_admission_run(struct kcr__wh_job *job);
void kcr__wh_conversion_run(struct kcr__wh_job *job);
/* The answer when the handler overran (loop thread). */
void kcr__wh_admission_timeout(struct kcr__wh_job *job, int *status, char **reply, size_t *len);
void kcr__wh_conversion_timeout(struct kcr__wh_job *job, int *status, char **reply, size_t *len);

/* metrics.c */
kcr_err kcr__wh_metrics_register(kcr_webhook_server *s);
kcr_err kcr__wh_metrics_route(kcr_webhook_server *s, struct kcr__wh_route *r);
void kcr__wh_metrics_answered(kcr_webhook_server *s, const struct kcr__wh_route *r, int status,
                              int64_t start_ns);

/* routes.c */
kcr_err kcr__wh_route_add(kcr_webhook_server *s, struct kcr__wh_route *r);
const struct kcr__wh_route *kcr__wh_route_find(const kcr_webhook_server *s, const char *path);
void kcr__wh_routes_free(kcr_webhook_server *s);

#endif
