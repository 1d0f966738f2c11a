/* Which loop accepts the next connection.
 *
 * The server has one listening socket and every loop watches it (a loop's
 * listener on its own duplicate of the descriptor). A loop listens only
 * while no other loop with room under its share of max_connections has
 * fewer connections open, so the connections spread evenly over the loops
 * in whatever order the clients open them. (Each loop on its own socket
 * with SO_REUSEPORT let the kernel deal them by a hash of the addresses: 32
 * connections over two loops came out 14/18 or 20/12, and the requests of
 * the busier loop waited longer.) A loop decides for its own listener, on
 * its own thread, whenever its count changes and whenever another loop's
 * count changed (that loop pokes it). */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <event2/listener.h>

#include "core/error.h"
#include "core/log.h"
#include "webhook/webhook_internal.h"

#define BACKLOG 1024

evutil_socket_t kcr__wh_listen(const char *host, int port)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_ADDRCONFIG | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    char service[8];
    snprintf(service, sizeof service, "%d", port);
    int rc = getaddrinfo(host, service, &hints, &ai);
    if (rc != 0) {
        errno = rc == EAI_SYSTEM ? errno : EADDRNOTAVAIL;
        return -1;
    }
    evutil_socket_t fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0 && (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0 ||
                    bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, BACKLOG) != 0)) {
        int e = errno;
        close(fd);
        fd = -1;
        errno = e;
    }
    freeaddrinfo(ai);
    return fd;
}

int kcr__wh_listen_port(evutil_socket_t fd)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
        return 0;
    return ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                          : ((struct sockaddr_in *)&ss)->sin_port);
}

kcr_err kcr__wh_accept_init(struct kcr__wh_loop *l, evutil_socket_t listen_fd)
{
    kcr_webhook_server *s = l->s;
    l->poke_ev = event_new(l->base, -1, 0, kcr__wh_accept_on_poke, l);
    if (!l->poke_ev)
        return kcr__fail(KCR_ERR_NOMEM, "webhook server: cannot create an event loop");
    evutil_socket_t fd = fcntl(listen_fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0)
        return kcr__fail(KCR_ERR_IO, "webhook server: cannot share the listening socket: %s",
                         strerror(errno));
    l->bound = evhttp_accept_socket_with_handle(l->http, fd); /* listening from here */
    if (!l->bound) {
        close(fd);
        return kcr__fail(KCR_ERR_NOMEM, "webhook server: cannot listen on %s:%d", s->host,
                         s->port_wanted);
    }
    l->listening = true;
    evconnlistener_set_error_cb(evhttp_bound_socket_get_listener(l->bound), kcr__wh_accept_error);
    return KCR_OK;
}

/* Whether l should accept now: it can (not stopping, not backing off, under
 * its share) and no loop that can has fewer connections open. Counts read
 * here may be a moment old; the loop whose count changes pokes the others,
 * so each decides again on the new counts. */
static bool should_listen(const struct kcr__wh_loop *l)
{
    const kcr_webhook_server *s = l->s;
    int mine = atomic_load(&l->open_conns);
    if (l->stopping || l->backoff || !l->bound || mine >= l->max_conns)
        return false;
    for (int i = 0; i < s->n_loops; i++) {
        const struct kcr__wh_loop *o = &s->loops[i];
        int theirs = atomic_load(&o->open_conns);
        if (o != l && theirs < mine && theirs < o->max_conns)
            return false;
    }
    return true;
}

void kcr__wh_accept_update(struct kcr__wh_loop *l)
{
    bool want = should_listen(l);
    if (!l->bound || want == l->listening) {
        l->listening = want;
        return;
    }
    l->listening = want;
    struct evconnlistener *lev = evhttp_bound_socket_get_listener(l->bound);
    if (want)
        evconnlistener_enable(lev);
    else
        evconnlistener_disable(lev);
}

void kcr__wh_accept_changed(struct kcr__wh_loop *l)
{
    kcr__wh_accept_update(l);
    kcr_webhook_server *s = l->s;
    for (int i = 0; i < s->n_loops; i++)
        if (&s->loops[i] != l && s->loops[i].poke_ev)
            event_active(s->loops[i].poke_ev, 0, 0);
}

void kcr__wh_accept_on_poke(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    kcr__wh_accept_update(arg);
}

/* Loop: the 100 ms pause after a failed accept is over. */
static void end_backoff(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    struct kcr__wh_loop *l = arg;
    l->backoff = false;
    kcr__wh_accept_update(l);
}

/* accept() failed: out of descriptors (or memory) leaves the listening
 * socket readable and the loop would spin on it, so this loop stops
 * accepting for 100 ms (the others, out of descriptors too, do the same when
 * their accept fails). The callback's argument is evhttp's: the loop is the
 * thread's. */
void kcr__wh_accept_error(struct evconnlistener *listener, void *arg)
{
    (void)listener, (void)arg;
    struct kcr__wh_loop *l = kcr__wh_this_loop;
    int e = EVUTIL_SOCKET_ERROR();
    kcr__log(KCR_LOG_WARN, "webhook", "accept failed: %s; pausing accepts for 100 ms",
             evutil_socket_error_to_string(e));
    l->backoff = true;
    kcr__wh_accept_update(l);
    struct timeval tv = {.tv_sec = 0, .tv_usec = 100000};
    event_base_once(l->base, -1, EV_TIMEOUT, end_backoff, l, &tv);
}
