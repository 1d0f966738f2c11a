/* Internal: the HTTP client's transport. One kcr__transport per kcr_client:
 * it owns the client's copy of the config, its credentials (auth.c), a pool
 * of libcurl handle pairs, the QPS/burst rate limiter and the server
 * address. kcr__transport_do runs one request to completion: rate limiting,
 * credentials and headers, TLS, timeouts, cancellation, retries (429,
 * connection errors of idempotent requests, one credential refresh on 401)
 * and error bodies decoded into a kcr_status. Thread-safe: any number of
 * threads may run requests on one transport at the same time. */
#ifndef KCR_CLIENT_HTTP_TRANSPORT_H
#define KCR_CLIENT_HTTP_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>

#include "kcr/client.h"

typedef struct kcr__transport kcr__transport;

typedef struct kcr__http_req {
    const char *method;
    const char *path;         /* with its query, encoded */
    const char *accept;       /* NULL: application/json */
    const char *content_type; /* NULL: application/json */
    const char *body;         /* NULL: none */
    size_t body_len;
    /* Retried on connection errors. A non-idempotent body is sent so that
     * libcurl cannot resend it on its own either (a POST is sent once). */
    bool idempotent;
    bool streaming;      /* no total timeout (list/watch) */
    bool uncompressed;   /* do not offer gzip (watch streams) */
    int64_t idle_timeout_ms; /* 0: none */
    kcr_cancel *cancel;
    /* For 2xx bodies: receives bytes as they arrive instead of buffering. */
    kcr_err (*sink)(const char *buf, size_t len, void *ud);
    void *sink_ud;
} kcr__http_req;

/* Makes the transport of `owner` (borrowed for the transport's life: each
 * attempt is reported to its request observer). Copies cfg; opts may be
 * NULL; zero options get their defaults. KCR_ERR_CONFIG for a plain
 * http:// server without opts->allow_insecure_http. */
kcr_err kcr__transport_new(const kcr_config *cfg, const kcr_client_options *opts,
                           const kcr_client *owner, kcr__transport **out);
/* Frees the transport and its pooled handles; NULL is ignored. No request
 * may be running. */
void kcr__transport_free(kcr__transport *t);

/* How long a pooled connection may stay idle before it is closed (at the
 * next request's start or end; default 90 s). For tests. Thread-safe. */
void kcr__transport_set_idle_close(kcr__transport *t, int64_t ms);

/* The options in effect (defaults filled in; user_agent and field_manager
 * NULL). Borrowed for the transport's life. */
const kcr_client_options *kcr__transport_options(const kcr__transport *t);
/* The transport's copy of the config. Borrowed for the transport's life. */
const kcr_config *kcr__transport_config(const kcr__transport *t);

/* Runs a request. Buffered 2xx bodies go to *out (malloc'd, NUL-terminated)
 * when out is non-NULL. Errors as in kcr/client.h; non-2xx answers fill st
 * (non-NULL) from the Status in the body. */
kcr_err kcr__transport_do(kcr__transport *t, const kcr__http_req *req, char **out, size_t *out_len,
                          kcr_status *st);

#endif
