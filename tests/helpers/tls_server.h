/* A loopback HTTPS server for tests (OpenSSL): every request gets one fixed
 * 200 JSON answer. With no certificate it is a plain HTTP server answering
 * 400 to anything, as a real one does to a TLS ClientHello. One thread,
 * one connection at a time. Starting one ignores SIGPIPE in the process. */
#ifndef KCR_TESTS_HELPERS_TLS_SERVER_H
#define KCR_TESTS_HELPERS_TLS_SERVER_H

typedef struct tls_server tls_server;

/* Starts listening on 127.0.0.1 (a free port). cert_pem/key_pem NULL: plain
 * HTTP. `body` is the JSON answered to every request (copied). Aborts the
 * test on failure. */
tls_server *tls_server_start(const char *cert_pem, const char *key_pem, const char *body);

int tls_server_port(const tls_server *s);

/* Requests answered with 200 so far (handshakes that failed do not count). */
int tls_server_answered(tls_server *s);

/* Connections accepted so far (each attempt of a client, whatever came of it). */
int tls_server_connections(tls_server *s);

/* Stops the thread and frees everything; NULL is ignored. */
void tls_server_stop(tls_server *s);

#endif
