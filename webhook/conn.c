/* Connections: each accepted socket gets a TLS bufferevent on the current
 * certificate (so a reload applies to new connections while open ones keep
 * theirs), a read deadline against slow clients, and a place in its loop's
 * count, which decides which loop accepts next (accept.c). The connection
 * record hangs off its SSL object (ex_data), which libevent frees with the
 * connection: that free is the close hook. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>

#include "core/log.h"
#include "webhook/webhook_internal.h"

static int conn_index = -1;
static pthread_once_t conn_index_once = PTHREAD_ONCE_INIT;

static void conn_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl,
                      void *argp)
{
    (void)parent, (void)ad, (void)idx, (void)argl, (void)argp;
    struct kcr__wh_conn *c = ptr;
    if (!c)
        return;
    struct kcr__wh_loop *l = c->loop;
    if (c->job)
        c->job->conn = NULL;
    event_free(c->timer);
    free(c);
    atomic_fetch_sub(&l->open_conns, 1);
    atomic_fetch_sub(&l->s->n_open, 1);
    kcr__wh_accept_changed(l);
}

static void make_index(void)
{
    conn_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, conn_free);
}

int kcr__wh_conn_index(void)
{
    pthread_once(&conn_index_once, make_index);
    return conn_index;
}

/* The read deadline passed: shut the socket down; libevent sees the
 * connection end and frees it the usual way. */
static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    struct kcr__wh_conn *c = arg;
    evutil_socket_t sock = bufferevent_getfd(c->bev);
    atomic_fetch_add(&c->loop->s->n_slow, 1);
    kcr__log(KCR_LOG_DEBUG, "webhook", "closing a connection that sent no complete request in time");
    if (sock >= 0)
        shutdown(sock, SHUT_RDWR);
}

void kcr__wh_conn_arm(struct kcr__wh_conn *c, int64_t ms)
{
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    evtimer_add(c->timer, &tv);
}

void kcr__wh_conn_disarm(struct kcr__wh_conn *c)
{
    evtimer_del(c->timer);
}

struct bufferevent *kcr__wh_conn_new(struct event_base *base, void *arg)
{
    struct kcr__wh_loop *l = arg;
    kcr_webhook_server *s = l->s;
    int idx = kcr__wh_conn_index();
    struct kcr__wh_conn *c = calloc(1, sizeof *c);
    SSL *ssl = c ? kcr__wh_tls_new_ssl(s) : NULL;
    struct bufferevent *bev = NULL;
    if (ssl) {
        c->loop = l;
        c->timer = evtimer_new(base, on_deadline, c);
        if (c->timer && SSL_set_ex_data(ssl, idx, c) == 1) {
            atomic_fetch_add(&l->open_conns, 1);
            atomic_fetch_add(&s->n_open, 1);
            atomic_fetch_add(&s->n_conns, 1);
            c->bev = bev = bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                                          BEV_OPT_CLOSE_ON_FREE);
            if (!bev)
                SSL_free(ssl); /* frees c through conn_free */
            c = NULL;
        }
    }
    if (c) {
        if (c->timer)
            event_free(c->timer);
        free(c);
        SSL_free(ssl);
    }
    if (!bev) {
        kcr__log(KCR_LOG_ERROR, "webhook", "out of memory setting up a TLS connection");
        return NULL; /* evhttp then serves it without TLS: it fails the client's handshake */
    }
    kcr__wh_conn_arm(SSL_get_ex_data(ssl, idx), s->read_timeout_ms);
    int open = atomic_load(&l->open_conns);
    if (open == l->max_conns)
        kcr__log(KCR_LOG_WARN, "webhook",
                 "%d connections open on loop %d (its share of the limit): it accepts no more",
                 open, l->index);
    kcr__wh_accept_changed(l);
    return bev;
}

struct kcr__wh_conn *kcr__wh_conn_of(struct evhttp_request *req)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
    SSL *ssl = bev ? bufferevent_openssl_get_ssl(bev) : NULL;
    return ssl ? SSL_get_ex_data(ssl, kcr__wh_conn_index()) : NULL;
}
