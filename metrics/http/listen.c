/* Bind addresses: "host:port", "[v6]:port" or ":port" parsed, then bound
 * and listening, so a failure names the address and the reason. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "metrics/http/server.h"
#include "core/error.h"

enum { BACKLOG = 64 };

kcr_err kcr__http_parse_address(const char *address, char *host, size_t host_size, int *port)
{
    const char *colon = address ? strrchr(address, ':') : NULL;
    if (!colon)
        return kcr__fail(KCR_ERR_INVALID, "bind address \"%s\" is not host:port or :port",
                         address ? address : "(null)");
    const char *h = address;
    size_t hlen = (size_t)(colon - address);
    if (hlen >= 2 && h[0] == '[' && h[hlen - 1] == ']') {
        h++;
        hlen -= 2;
    } else if (memchr(h, ':', hlen)) {
        return kcr__fail(KCR_ERR_INVALID, "bind address \"%s\": an IPv6 host needs [brackets]",
                         address);
    }
    if (hlen >= host_size)
        return kcr__fail(KCR_ERR_INVALID, "bind address \"%s\": host too long", address);
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    const char *p = colon + 1;
    long n = 0;
    if (!*p || strlen(p) > 5)
        return kcr__fail(KCR_ERR_INVALID, "bind address \"%s\": bad port", address);
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            return kcr__fail(KCR_ERR_INVALID, "bind address \"%s\": bad port", address);
        n = n * 10 + (*p - '0');
    }
    if (n > 65535)
        return kcr__fail(KCR_ERR_INVALID, "bind address \"%s\": port out of range", address);
    *port = (int)n;
    return KCR_OK;
}

/* A listening socket on one resolved address; -1 with errno set on failure. */
static int listen_on(const struct addrinfo *ai)
{
    /* non-blocking: a connection reset between poll and accept must not
     * stall libmicrohttpd's listening thread */
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                    ai->ai_protocol);
    if (fd < 0)
        return -1;
    int on = 1, off = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (ai->ai_family == AF_INET6) /* "[::]:port" also takes IPv4, as Go does */
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, BACKLOG) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static int bound_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        return 0;
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

kcr_err kcr__http_listen(const char *address, int *fd_out, int *port_out)
{
    *fd_out = -1;
    *port_out = 0;
    char host[256];
    int port;
    kcr_err err = kcr__http_parse_address(address, host, sizeof host, &port);
    if (err != KCR_OK)
        return err;
    char service[8];
    snprintf(service, sizeof service, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *list;
    /* ":port": every interface, IPv6 (dual stack) first, else IPv4 */
    int rc = *host ? getaddrinfo(host, service, &hints, &list)
                   : getaddrinfo(NULL, service, &hints, &list);
    if (rc != 0)
        return kcr__fail(KCR_ERR_IO, "cannot listen on %s: %s", address, gai_strerror(rc));
    int fd = -1, e = 0;
    for (int pass = 0; pass < 2 && fd < 0; pass++) {
        for (struct addrinfo *ai = list; ai && fd < 0; ai = ai->ai_next) {
            if (!*host && (pass == 0) != (ai->ai_family == AF_INET6))
                continue;
            if (*host && pass == 1)
                break;
            fd = listen_on(ai);
            if (fd < 0)
                e = errno;
        }
    }
    freeaddrinfo(list);
    if (fd < 0)
        return kcr__fail(KCR_ERR_IO, "cannot listen on %s: %s", address,
                         e ? strerror(e) : "no usable address");
    *fd_out = fd;
    *port_out = bound_port(fd);
    return KCR_OK;
}
