/* The loopback HTTPS test server (see tls_server.h). */
#include "helpers/tls_server.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

struct tls_server {
    int fd;
    int port;
    SSL_CTX *ctx; /* NULL: plain HTTP */
    char *body;
    pthread_t thread;
    atomic_bool stopping;
    atomic_int answered;
    atomic_int connections;
};

static void answer(tls_server *s, SSL *ssl, int fd)
{
    char req[8192];
    size_t len = 0;
    while (len < sizeof req - 1) {
        int n = ssl ? SSL_read(ssl, req + len, (int)(sizeof req - 1 - len))
                    : (int)recv(fd, req + len, sizeof req - 1 - len, 0);
        if (n <= 0)
            return;
        len += (size_t)n;
        req[len] = '\0';
        if (strstr(req, "\r\n\r\n") || (!ssl && (unsigned char)req[0] == 0x16))
            break; /* a request, or (plain) a TLS handshake record: answer at once */
    }
    char head[256];
    if (!ssl) {
        snprintf(head, sizeof head,
                 "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        send(fd, head, strlen(head), MSG_NOSIGNAL);
        return;
    }
    snprintf(head, sizeof head,
             "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
             "Connection: close\r\n\r\n",
             strlen(s->body));
    SSL_write(ssl, head, (int)strlen(head));
    SSL_write(ssl, s->body, (int)strlen(s->body));
    atomic_fetch_add(&s->answered, 1);
}

static void *serve(void *arg)
{
    tls_server *s = arg;
    while (!atomic_load(&s->stopping)) {
        struct pollfd p = {.fd = s->fd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0)
            continue;
        int fd = accept(s->fd, NULL, NULL);
        if (fd < 0)
            continue;
        atomic_fetch_add(&s->connections, 1);
        struct timeval tv = {2, 0}; /* a stuck client cannot hold the thread */
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        if (s->ctx) {
            SSL *ssl = SSL_new(s->ctx);
            SSL_set_fd(ssl, fd);
            if (SSL_accept(ssl) == 1) {
                answer(s, ssl, fd);
                SSL_shutdown(ssl);
            }
            SSL_free(ssl);
            ERR_clear_error();
        } else {
            answer(s, NULL, fd);
        }
        close(fd);
    }
    return NULL;
}

static SSL_CTX *make_ctx(const char *cert_pem, const char *key_pem)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    cr_assert_not_null(ctx);
    BIO *b = BIO_new_mem_buf(cert_pem, -1);
    X509 *cert = PEM_read_bio_X509(b, NULL, NULL, NULL);
    BIO_free(b);
    b = BIO_new_mem_buf(key_pem, -1);
    EVP_PKEY *key = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);
    BIO_free(b);
    cr_assert(cert && key, "test certificate or key unreadable");
    cr_assert_eq(SSL_CTX_use_certificate(ctx, cert), 1);
    cr_assert_eq(SSL_CTX_use_PrivateKey(ctx, key), 1);
    X509_free(cert);
    EVP_PKEY_free(key);
    return ctx;
}

tls_server *tls_server_start(const char *cert_pem, const char *key_pem, const char *body)
{
    /* OpenSSL writes with write(2): a client that hung up mid-answer (as
     * clients rejecting our certificate do) must not kill the test. */
    signal(SIGPIPE, SIG_IGN);
    tls_server *s = calloc(1, sizeof *s);
    cr_assert_not_null(s);
    s->body = strdup(body);
    s->ctx = cert_pem ? make_ctx(cert_pem, key_pem) : NULL;
    s->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(bind(s->fd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(listen(s->fd, 16), 0);
    socklen_t al = sizeof a;
    getsockname(s->fd, (struct sockaddr *)&a, &al);
    s->port = ntohs(a.sin_port);
    atomic_init(&s->stopping, false);
    atomic_init(&s->answered, 0);
    atomic_init(&s->connections, 0);
    cr_assert_eq(pthread_create(&s->thread, NULL, serve, s), 0);
    return s;
}

int tls_server_port(const tls_server *s)
{
    return s->port;
}

int tls_server_answered(tls_server *s)
{
    return atomic_load(&s->answered);
}

int tls_server_connections(tls_server *s)
{
    return atomic_load(&s->connections);
}

void tls_server_stop(tls_server *s)
{
    if (!s)
        return;
    atomic_store(&s->stopping, true);
    pthread_join(s->thread, NULL);
    close(s->fd);
    SSL_CTX_free(s->ctx);
    free(s->body);
    free(s);
}
