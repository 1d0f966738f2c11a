/* A tiny loopback HTTP/1.1 server thread for the HTTP client's tests
 * (test_http_transport, test_http_verbs, test_http_discovery): one
 * connection at a time, each request handed to the test's handler, and a
 * kcr_client of it (plain HTTP, a bearer token, namespace "team"). One
 * server per test process at a time; the server thread only reads the
 * globals below while a test runs. */
#ifndef KCR_TESTS_HELPERS_HTTP_LOOPBACK_H
#define KCR_TESTS_HELPERS_HTTP_LOOPBACK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "kcr/kcr.h"

/* Answers one request on fd (the server closes fd afterwards). Runs on the
 * server's thread; `request` holds the headers and the body. */
typedef void (*handler_fn)(int fd, const char *request);

extern kcr_client *client; /* the client of the running server */
extern int port;           /* the server's port on 127.0.0.1 */
extern atomic_bool stopping; /* set by stop_server: long handlers return */

/* The ConfigMap resource. */
extern const kcr_resource CM;

void nap_ms(long ms);
bool send_all(int fd, const char *buf, size_t len);
/* A complete response with Content-Length and Connection: close; `extra`
 * (NULL: none) holds more header lines, each ending in \r\n. */
void respond(int fd, int code, const char *type, const char *body, const char *extra);
/* Chunked encoding: the head, then one chunk at a time. */
void chunked_head(int fd, const char *type);
bool send_chunk(int fd, const char *data, size_t len);

/* Starts the server with `fn` and makes `client` with opts (NULL: defaults;
 * allow_insecure_http is set). Asserts on failure. */
void start_server(handler_fn fn, const kcr_client_options *opts);
/* Frees the client, stops the server thread (a criterion .fini). */
void stop_server(void);
/* Requests received so far, and a copy of the last one. Thread-safe. */
int requests(void);
void request(char *buf, size_t size);

/* A Status body (static storage: one at a time). */
const char *status_json(int code, const char *reason, const char *msg);
/* A JSON reply with no extra headers. */
void json_reply(int fd, int code, const char *body);
/* A Status reply, as the apiserver sends for errors. */
void status_reply(int fd, int code, const char *reason, const char *msg);
/* Answers DELETE with a Success Status, lists and watches with an empty
 * list, anything else with a ConfigMap "ok". */
void echo_handler(int fd, const char *req);
/* Accepts and never answers, until stop_server. */
void hang(int fd, const char *req);
/* A watch stream of two events (ADDED at resourceVersion 5, BOOKMARK at 6),
 * then, by the label selector in the request: "truncate" a chunk cut short
 * and the connection dropped; "silent" no byte until the client leaves;
 * "huge" one endless 1 GB line; "error" an ERROR event (410 Expired); else a
 * clean end. */
void watch_stream(int fd, const char *req);

/* Events a watch delivered (the first 8 resourceVersions kept). */
struct evs {
    int n;
    char rv[8][16];
};
/* Every watch's events, for other threads. */
extern atomic_int events_seen;
/* kcr_client_watch of ConfigMaps in "team" with the label selector
 * `selector` (o: more options, NULL for none), events counted into e. */
kcr_err watch_with(const char *selector, kcr_request *o, struct evs *e, kcr_status *st);

/* kcr_client_get of the ConfigMap `name` in "team", the object dropped. */
kcr_err get(const char *name, kcr_status *st);

/* Asserts that the last request contains `needle`. */
#define HAS(needle)                                                                                \
    do {                                                                                           \
        char r_[16384];                                                                            \
        request(r_, sizeof r_);                                                                    \
        cr_assert(strstr(r_, needle) != NULL, "expected %s in:\n%s", needle, r_);                 \
    } while (0)

#endif
