/* Internal: discovery over HTTP for the HTTP client. The client keeps the
 * resource table read from the server (aggregated discovery when the server
 * offers it, else the legacy per-group-version documents) and resolves
 * against it with discovery.c; a miss may refresh it, at most once a
 * second. Thread-safe: one lock per cache, held while fetching, so
 * concurrent misses fetch once. */
#ifndef KCR_CLIENT_HTTP_DISCOVERY_H
#define KCR_CLIENT_HTTP_DISCOVERY_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "client/client_impl.h"
#include "client/http_transport.h"

typedef struct kcr__http_discovery {
    pthread_mutex_t lock;
    kcr__disc_table table;
    bool valid;
    int64_t fetched_ns;
} kcr__http_discovery;

void kcr__http_discovery_init(kcr__http_discovery *d);
/* Frees the table; no call may be running. */
void kcr__http_discovery_destroy(kcr__http_discovery *d);
/* The kcr__client_ops.resolve of the HTTP client: fetches the table through
 * t when there is none (or when refresh asks and the last fetch is over a
 * second old), then kcr__disc_resolve(). */
kcr_err kcr__http_discovery_resolve(kcr__http_discovery *d, kcr__transport *t,
                                    const kcr__disc_query *q, bool refresh, kcr_api_resource *out,
                                    kcr_status *st);
/* Forgets the table: the next resolve fetches it again. */
void kcr__http_discovery_invalidate(kcr__http_discovery *d);

#endif
