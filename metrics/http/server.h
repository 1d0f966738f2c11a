/* Internal to kcr_http: the health server's state, shared by the server's
 * lifecycle (server.c), the listeners (listen.c), the request router
 * (routes.c) and the checks (checks.c).
 *
 * Locking: `lock` guards started, the daemons and the check lists; checks are
 * never removed before _free, so pointers copied out under the lock stay
 * valid while requests run them without it. */
#ifndef KCR_METRICS_HTTP_SERVER_H
#define KCR_METRICS_HTTP_SERVER_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "kcr/health.h"

typedef struct kcr__health_check {
    char *name;
    kcr_health_check_fn fn;
    void *user_data;
} kcr__health_check;

typedef struct kcr__health_checks {
    kcr__health_check **v;
    size_t n, cap;
} kcr__health_checks;

/* One bound address and what it serves. */
typedef struct kcr__http_listener {
    struct kcr_health_server *server;
    const char *address; /* the options' string (owned by the server) */
    bool metrics, probes;
    struct MHD_Daemon *daemon;
    atomic_int port;
} kcr__http_listener;

struct kcr_health_server {
    char *metrics_address, *probe_address; /* NULL: that endpoint is off */
    kcr_metrics *metrics;

    pthread_mutex_t lock;
    bool started;
    kcr__http_listener listeners[2];
    size_t n_listeners;
    kcr__health_checks healthz, readyz;
};

/* Parses "host:port", "[v6]:port" or ":port" (host "" then) into host and
 * port. KCR_ERR_INVALID with a message naming the address. */
kcr_err kcr__http_parse_address(const char *address, char *host, size_t host_size, int *port);

/* A listening TCP socket bound to `address` (":port" is every interface, port
 * 0 a free one) and the port it got. KCR_ERR_IO naming the address. */
kcr_err kcr__http_listen(const char *address, int *fd, int *port);

/* The libmicrohttpd request handler; cls is a kcr__http_listener. */
enum MHD_Result kcr__http_route(void *cls, struct MHD_Connection *conn, const char *url,
                                const char *method, const char *version,
                                const char *upload_data, size_t *upload_data_size,
                                void **con_cls);

/* A probe's answer: HTTP status and a malloc'd body. */
typedef struct kcr__probe_reply {
    unsigned status;
    char *body;
} kcr__probe_reply;

/* Runs the probe's checks: every check (path_name NULL) or one (404 if no
 * check has that name), honouring ?verbose and ?exclude=NAME of `conn`.
 * KCR_ERR_NOMEM. */
kcr_err kcr__health_probe(struct kcr_health_server *s, kcr_health_probe probe,
                          const char *path_name, struct MHD_Connection *conn,
                          kcr__probe_reply *reply);

/* Frees a check list. */
void kcr__health_checks_free(kcr__health_checks *c);

#endif
