/* The metrics and health HTTP endpoint: /metrics (a kcr_metrics registry in
 * Prometheus text format), /healthz and /readyz (named checks; ?verbose
 * lists each as "[+]name ok" or "[-]name failed: reason", as Kubernetes
 * components do; /readyz/<name> checks one).
 *
 * This is the optional library kcr_http (libkcr_http, CMake target
 * kcr::http, pkg-config kcr-http), built on libmicrohttpd, so libkcr itself
 * does not depend on it. Link it only if you serve these endpoints.
 *
 * Thread-safety: every function is thread-safe except _free; checks run on
 * the server's threads, possibly concurrently, with no kcr lock held. */
#ifndef KCR_HEALTH_H
#define KCR_HEALTH_H

#include <stdbool.h>

#include "kcr/error.h"
#include "kcr/export.h"
#include "kcr/metrics.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kcr_health_server kcr_health_server;

/* A check: KCR_OK when healthy/ready; otherwise an error, with *message
 * (malloc'd by the check, freed by the server; may stay NULL) saying why. */
typedef kcr_err (*kcr_health_check_fn)(char **message, void *user_data);

typedef enum kcr_health_probe {
    KCR_PROBE_HEALTHZ = 1, /* liveness: /healthz */
    KCR_PROBE_READYZ = 2   /* readiness: /readyz */
} kcr_health_probe;

/* Zero means default for every field; strings are copied. An address is
 * "host:port" (":port" for every interface, port 0 picks a free one);
 * NULL or "0" disables that endpoint. Both may be the same address: one
 * listener then serves all three paths. */
typedef struct kcr_health_server_options {
    const char *metrics_bind_address; /* serves /metrics */
    const char *probe_bind_address;   /* serves /healthz and /readyz */
    kcr_metrics *metrics;             /* borrowed until _free; NULL: /metrics is 404 */
} kcr_health_server_options;

/* A server into *out (not listening until kcr_health_server_start), freed
 * with kcr_health_server_free. opts is copied; its registry is borrowed.
 * Addresses are checked by kcr_health_server_start. Thread-safe. */
KCR_API kcr_err kcr_health_server_new(size_t opts_size, const kcr_health_server_options *opts,
                                      kcr_health_server **out);
#define kcr_health_server_new(...) (kcr_health_server_new)(sizeof(kcr_health_server_options), __VA_ARGS__)

/* Adds a named check (name copied) to a probe; before or after start. */
KCR_API kcr_err kcr_health_server_add_check(kcr_health_server *s, kcr_health_probe probe,
                                            const char *name, kcr_health_check_fn fn,
                                            void *user_data);

/* Binds and starts serving. KCR_ERR_IO naming the address when it cannot
 * bind; KCR_ERR_STATE when already started. */
KCR_API kcr_err kcr_health_server_start(kcr_health_server *s);

/* The bound ports (useful with port 0), or 0 when that endpoint is off. */
KCR_API int kcr_health_server_metrics_port(const kcr_health_server *s);
KCR_API int kcr_health_server_probe_port(const kcr_health_server *s);

/* Stops serving (in-flight requests finish). Idempotent. */
KCR_API void kcr_health_server_stop(kcr_health_server *s);

/* Stops if needed and frees. NULL is ignored. */
KCR_API void kcr_health_server_free(kcr_health_server *s);

/* ---- Serving a manager (kcr/controller.h) ---- */
typedef struct kcr_manager kcr_manager;

/* A started server for a manager: /metrics from kcr_manager_metrics (unless
 * opts->metrics is set), /readyz with the check "informers"
 * (kcr_manager_readyz_check: caches synced, with the server's reason when a
 * list/watch fails), for a sharded manager "shard"
 * (kcr_manager_shard_readyz_check), and /healthz with "manager" (kcr_manager_healthz_check).
 * More checks can be added to *out. The manager is borrowed: free the
 * server before it. opts is copied. */
KCR_API kcr_err kcr_manager_serve_http(size_t opts_size, kcr_manager *m,
                                       const kcr_health_server_options *opts,
                                       kcr_health_server **out);
#define kcr_manager_serve_http(...) (kcr_manager_serve_http)(sizeof(kcr_health_server_options), __VA_ARGS__)

#ifdef __cplusplus
}
#endif

#endif
