/* The event loops: each a thread with its own libevent base, evhttp and
 * listener on the server's one listening socket. New connections are dealt
 * evenly among the loops (accept.c), so the TLS and HTTP work of the
 * connections spreads over as many cores as there are loops; a connection
 * stays on the loop that accepted it. */
#include <signal.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "webhook/webhook_internal.h"

#define HEADERS_MAX 16384

_Thread_local struct kcr__wh_loop *kcr__wh_this_loop;

kcr_err kcr__wh_loop_init(struct kcr__wh_loop *l, kcr_webhook_server *s, int index,
                          evutil_socket_t listen_fd)
{
    l->s = s;
    l->index = index;
    pthread_mutex_init(&l->done_mu, NULL);
    /* the limit dealt out: the first loops take the remainder */
    l->max_conns = s->max_conns / s->n_loops + (index < s->max_conns % s->n_loops);
    if (l->max_conns < 1)
        l->max_conns = 1;
    /* the changelist folds the read/write interest evhttp turns off and on
     * again within one pass of the loop into one epoll_ctl, or none (safe:
     * no descriptor of this base is a dup of another) */
    struct event_config *cfg = event_config_new();
    if (cfg)
        event_config_set_flag(cfg, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
    l->base = cfg ? event_base_new_with_config(cfg) : NULL;
    if (cfg)
        event_config_free(cfg);
    l->http = l->base ? evhttp_new(l->base) : NULL;
    l->done_ev = l->base ? event_new(l->base, -1, 0, kcr__wh_pool_done_cb, l) : NULL;
    l->stop_ev = l->base ? event_new(l->base, -1, 0, kcr__wh_loop_on_stop, l) : NULL;
    l->guard_ev = l->base ? evtimer_new(l->base, kcr__wh_pool_guard_cb, l) : NULL;
    if (!l->http || !l->done_ev || !l->stop_ev || !l->guard_ev)
        return kcr__fail(KCR_ERR_NOMEM, "webhook server: cannot create an event loop");
    evhttp_set_bevcb(l->http, kcr__wh_conn_new, l);
    evhttp_set_gencb(l->http, kcr__wh_on_request, l);
    evhttp_set_max_body_size(l->http, (ev_ssize_t)s->max_body);
    /* read (and drop) an oversized body before answering 413, so the client
     * is not reset mid-send and sees the answer; read_timeout_ms bounds it */
    evhttp_set_flags(l->http, EVHTTP_SERVER_LINGERING_CLOSE);
    evhttp_set_max_headers_size(l->http, HEADERS_MAX);
    evhttp_set_allowed_methods(l->http, EVHTTP_REQ_POST | EVHTTP_REQ_GET);
    struct timeval tv = {.tv_sec = s->idle_timeout_ms / 1000,
                         .tv_usec = (s->idle_timeout_ms % 1000) * 1000};
    evhttp_set_timeout_tv(l->http, &tv);
    return kcr__wh_accept_init(l, listen_fd);
}

static void *loop_main(void *arg)
{
    struct kcr__wh_loop *l = arg;
    kcr__wh_this_loop = l;
    /* OpenSSL writes to sockets with write(): a peer gone away would raise
     * SIGPIPE and kill the process. Blocked on this thread (loop threads are
     * the only ones writing to connections) it stays pending and write()
     * fails EPIPE. */
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, NULL);
    event_base_dispatch(l->base);
    return NULL;
}

kcr_err kcr__wh_loop_run(struct kcr__wh_loop *l)
{
    if (pthread_create(&l->thread, NULL, loop_main, l) != 0)
        return kcr__fail(KCR_ERR_NOMEM, "webhook server: cannot start loop thread %d", l->index);
    l->running = true;
    return KCR_OK;
}

/* Loop, last: closes every connection (evhttp_free) while the loop still
 * runs, since libevent finishes freeing a connection's bufferevent from the
 * loop; a moment later the loop ends. */
static void close_all(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    struct kcr__wh_loop *l = arg;
    l->bound = NULL; /* freed first by evhttp_free; the close hooks must not use it */
    evhttp_free(l->http);
    l->http = NULL;
    struct timeval finalize = {.tv_sec = 0, .tv_usec = 50000};
    event_base_loopexit(l->base, &finalize);
}

/* Loop: the stop request. Stops accepting, answers what is pending, gives
 * those answers a moment to be written, then closes everything. A request
 * that arrives on a kept-alive connection in that moment is answered 503
 * at once (kcr__wh_on_request): queued for a worker, it would still be
 * pending when close_all frees its connection, and libevent would free the
 * request with it under the job. */
void kcr__wh_loop_on_stop(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    struct kcr__wh_loop *l = arg;
    l->stopping = true;
    kcr__wh_accept_update(l); /* stops listening */
    bool answered = l->pending != NULL;
    while (l->pending)
        kcr__wh_job_answer(l->pending, 503, "webhook server stopping\n", 24);
    struct timeval flush = {.tv_sec = 0, .tv_usec = answered ? 200000 : 0};
    if (event_base_once(l->base, -1, EV_TIMEOUT, close_all, l, &flush) != 0)
        close_all(-1, 0, l);
}

void kcr__wh_loop_request_stop(struct kcr__wh_loop *l)
{
    if (l->running)
        event_active(l->stop_ev, 0, 0);
}

void kcr__wh_loop_join(struct kcr__wh_loop *l)
{
    if (!l->running)
        return;
    pthread_join(l->thread, NULL);
    l->running = false;
}

void kcr__wh_loop_free(struct kcr__wh_loop *l)
{
    if (!l->s)
        return; /* never initialised */
    l->bound = NULL; /* evhttp_free frees the listener before the connections,
                        whose close hook must not re-enable it */
    if (l->http)
        evhttp_free(l->http); /* never ran: no connection to finish */
    if (l->done_ev)
        event_free(l->done_ev);
    if (l->stop_ev)
        event_free(l->stop_ev);
    if (l->guard_ev)
        event_free(l->guard_ev);
    if (l->poke_ev)
        event_free(l->poke_ev);
    if (l->base)
        event_base_free(l->base);
    pthread_mutex_destroy(&l->done_mu);
}
