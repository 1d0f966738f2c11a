/* Internal to webhook/: the server, its event loops, routes, connections and
 * jobs.
 *
 * Threads: each loop thread owns its libevent base (its evhttp, listening
 * socket, connections, timers) and everything marked "loop"; workers own a
 * job between taking it from the queue and posting it done to its loop. A
 * job is shared by reference count (the loop's reference and the worker's). */
#ifndef KCR_WEBHOOK_INTERNAL_H
#define KCR_WEBHOOK_INTERNAL_H

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <event2/event.h>
#include <event2/http.h>
#include <openssl/ssl.h>

#include "kcr/webhook.h"

enum kcr__wh_route_kind { KCR__WH_ADMISSION = 1, KCR__WH_CONVERSION = 2 };

/* One path. Immutable after start but for on_loop. */
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
    atomic_bool on_loop; /* run_on_loop until a call overran KCR_WEBHOOK_LOOP_BUDGET_MS */
    kcr_metric *latency, *in_flight; /* NULL without a registry */
    struct kcr__wh_route *next;
};

struct kcr__wh_conn;
struct kcr__wh_loop;

/* One worker thread. It sleeps on the server's idle stack until a loop
 * (or the stop) takes it off, marks it coming and posts wake. */
struct kcr__wh_worker {
    kcr_webhook_server *s;
    pthread_t thread;
    sem_t wake;
    bool coming; /* woken and not yet back at the queue (under the server's mu) */
    struct kcr__wh_worker *next_idle;
};

/* One request being handled: one allocation (kcr__wh_job_new) holding the
 * job, its deadline timer's storage and the request body. */
struct kcr__wh_job {
    atomic_int refs;
    kcr_webhook_server *s;
    struct kcr__wh_loop *loop; /* the loop that answers it */
    const struct kcr__wh_route *route;
    char *body;
    size_t len;
    int64_t start_ns;
    /* loop only */
    struct evhttp_request *req; /* NULL once answered */
    struct kcr__wh_conn *conn;  /* NULL once the connection is gone */
    struct event *deadline; /* armed in storage while the job waits for a worker, else NULL */
    struct kcr__wh_job *prev, *next; /* the server's pending list */
    /* written by the worker before it posts the job done */
    int status;
    char *reply;
    size_t reply_len;
    struct kcr__wh_job *qnext; /* worker queue / done list link */
    _Alignas(max_align_t) unsigned char storage[]; /* the deadline's event, then body */
};

/* One client connection (its loop only); lives as long as its SSL object. */
struct kcr__wh_conn {
    struct kcr__wh_loop *loop;
    struct bufferevent *bev;
    struct event *timer; /* read deadline: closes a connection too slow to
                            deliver its next request */
    struct kcr__wh_job *job;
};

/* One event loop: a thread, its libevent base and evhttp, its listener on
 * the server's one listening socket (enabled while it is this loop's turn
 * to take connections: accept.c), and the connections it accepted, whose
 * TLS and HTTP it does. Loop-only but for the done list, open_conns and
 * poke_ev. */
struct kcr__wh_loop {
    kcr_webhook_server *s;
    int index;
    struct event_base *base;
    struct evhttp *http;
    struct evhttp_bound_socket *bound;
    struct event *done_ev, *stop_ev;
    struct event *guard_ev; /* armed while a job waits for a worker woken for another */
    struct kcr__wh_job *pending; /* jobs not yet answered */
    atomic_int open_conns; /* written by the loop, read by the others */
    int max_conns;         /* this loop's share of the limit (immutable) */
    bool listening;        /* its listener is enabled */
    bool backoff;          /* accepting paused after accept failed */
    struct event *poke_ev; /* any thread: another loop's count changed */
    bool stopping; /* the stop request ran: later requests are answered 503 */
    pthread_t thread;
    bool running; /* the thread was started (set before it runs) */
    pthread_mutex_t done_mu; /* guards done_list and done_armed */
    struct kcr__wh_job *done_list;
    bool done_armed; /* done_ev activated and not yet run */
    time_t date_sec; /* the second `date` was written for */
    char date[32];   /* the answers' Date header (RFC 7231 IMF-fixdate) */
};

struct kcr_webhook_server {
    /* options */
    char *host;
    int port_wanted;
    char *cert_path, *key_path;
    int64_t cert_poll_ms, read_timeout_ms, idle_timeout_ms;
    size_t max_body;
    int max_conns, n_workers, n_loops;
    kcr_metrics *metrics;
    kcr_metric_family *requests_total;
    void (*observe)(const char *path, const char *body, size_t len, void *user_data);
    void *observe_user_data;
    struct kcr__wh_route *routes;

    struct kcr__wh_loop *loops; /* n_loops; loop 0 also polls the certificate */
    /* loop 0 */
    struct event *cert_timer;
    /* the files of the loaded pair, to notice a change */
    struct kcr__wh_file_id {
        int64_t mtime_ns, size;
        uint64_t ino, dev;
    } cert_id, key_id;

    pthread_mutex_t ctx_mu; /* guards ctx: loop 0 swaps it, every loop uses it */
    SSL_CTX *ctx;

    struct kcr__wh_worker *workers; /* n_workers */
    pthread_mutex_t mu; /* guards the queue, the idle stack and the flags */
    struct kcr__wh_job *queue_head, *queue_tail; /* jobs not yet taken by a worker */
    size_t n_queued;
    struct kcr__wh_worker *idle; /* workers asleep, the last to sleep first */
    int n_coming; /* workers woken and not yet back at the queue */
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
/* tls.c: loads the first pair (start) and arms the poll timer on loop 0. */
kcr_err kcr__wh_tls_start(kcr_webhook_server *s);
/* tls.c: a new server-side SSL on the current certificate (any loop);
 * NULL when out of memory. */
SSL *kcr__wh_tls_new_ssl(kcr_webhook_server *s);

/* loop.c: a loop's base, evhttp and listener on the server's listening
 * socket listen_fd (start; the loop keeps a duplicate of it). */
kcr_err kcr__wh_loop_init(struct kcr__wh_loop *l, kcr_webhook_server *s, int index,
                          evutil_socket_t listen_fd);
/* Starts the loop's thread. */
kcr_err kcr__wh_loop_run(struct kcr__wh_loop *l);
/* Asks the loop to answer what is pending 503, close its connections and
 * end, without waiting: the server asks every loop before it joins any, so
 * all stop answering at once. Any thread but the loop's; no-op when not
 * running. */
void kcr__wh_loop_request_stop(struct kcr__wh_loop *l);
/* Waits for a loop asked to stop to end. Any thread but the loop's. */
void kcr__wh_loop_join(struct kcr__wh_loop *l);
/* Loop: the stop event's callback. */
void kcr__wh_loop_on_stop(evutil_socket_t fd, short what, void *arg);
/* Frees what init made (the thread ended or never ran). */
void kcr__wh_loop_free(struct kcr__wh_loop *l);

/* server.c: evhttp's request callback (loop; arg: the loop). */
void kcr__wh_on_request(struct evhttp_request *req, void *arg);

/* conn.c: evhttp's bufferevent callback (arg: the loop) and the connection
 * bookkeeping. */
struct bufferevent *kcr__wh_conn_new(struct event_base *base, void *arg);
struct kcr__wh_conn *kcr__wh_conn_of(struct evhttp_request *req);
void kcr__wh_conn_arm(struct kcr__wh_conn *c, int64_t ms);
void kcr__wh_conn_disarm(struct kcr__wh_conn *c);
/* Once: the SSL ex_data slot holding the connection. */
int kcr__wh_conn_index(void);
/* The loop running on this thread (set by the loop thread). */
extern _Thread_local struct kcr__wh_loop *kcr__wh_this_loop;

/* accept.c: the listening socket and which loop takes the next connection. */
/* A listening socket on host:port (TCP_NODELAY, which accepted sockets
 * inherit on Linux: without it an answer written in two TLS records waits
 * for the client's delayed ACK, ~40 ms), non-blocking. -1 with errno. */
evutil_socket_t kcr__wh_listen(const char *host, int port);
/* The port a socket is bound to, 0 on error. */
int kcr__wh_listen_port(evutil_socket_t fd);
/* Start: the loop's poke event and its listener (enabled) on a duplicate
 * of listen_fd. */
kcr_err kcr__wh_accept_init(struct kcr__wh_loop *l, evutil_socket_t listen_fd);
/* Loop: enables or disables its listener by the rule (accept.c). */
void kcr__wh_accept_update(struct kcr__wh_loop *l);
/* Loop: its open_conns changed: decides for itself, pokes the others. */
void kcr__wh_accept_changed(struct kcr__wh_loop *l);
/* Loop: the poke event's callback (arg: the loop). */
void kcr__wh_accept_on_poke(evutil_socket_t fd, short what, void *arg);
/* The listener's error callback: pauses this loop's accepting on EMFILE and
 * friends. */
void kcr__wh_accept_error(struct evconnlistener *l, void *arg);

/* pool.c: workers and the hand-over of jobs between loop and workers. */
kcr_err kcr__wh_pool_start(kcr_webhook_server *s);
void kcr__wh_pool_stop(kcr_webhook_server *s);
/* Loop: queues a job and arms its deadline. */
void kcr__wh_pool_submit(struct kcr__wh_job *job);
/* Loop: the guard timer's callback (arg: the loop). */
void kcr__wh_pool_guard_cb(evutil_socket_t fd, short what, void *arg);
/* Loop: the done event's callback (arg: the loop). */
void kcr__wh_pool_done_cb(evutil_socket_t fd, short what, void *arg);
/* A zeroed job with room for a body of len bytes (body set, NUL-terminated
 * once filled) and one reference; NULL when out of memory. */
struct kcr__wh_job *kcr__wh_job_new(size_t len);
void kcr__wh_job_unref(struct kcr__wh_job *job);
/* Loop: answers req with status and body (copied; Content-Type JSON when it
 * starts with '{', else text), in one TLS record when it fits one. */
void kcr__wh_reply(struct evhttp_request *req, int status, const char *body, size_t len);
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
