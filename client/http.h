/* Internal: HTTP requests of the libcurl back end and string helpers. */
#ifndef KCR_CLIENT_HTTP_H
#define KCR_CLIENT_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include "kcr/client.h"

/* A growable NUL-terminated string; out-of-memory is sticky (oom). */
typedef struct kcr__buf {
    char *s;
    size_t len, cap;
    bool oom;
} kcr__buf;

kcr_err kcr__buf_add(kcr__buf *b, const char *s, size_t n);
kcr_err kcr__buf_str(kcr__buf *b, const char *s);
kcr_err kcr__buf_printf(kcr__buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s percent-encoded (everything but RFC 3986 unreserved characters). */
kcr_err kcr__buf_escape(kcr__buf *b, const char *s);
void kcr__buf_free(kcr__buf *b);
/* Appends "?key=value" or "&key=value" (value encoded); NULL value: nothing. */
void kcr__buf_query(kcr__buf *b, const char *key, const char *value);
/* /api/V or /apis/G/V, [/namespaces/NS], /RESOURCE, [/NAME], [/SUB]. */
kcr_err kcr__resource_path(kcr__buf *b, const kcr_resource *res, const char *ns,
                           const char *name, const char *subresource);

typedef struct kcr__http_req {
    const char *method;
    const char *path; /* with its query, encoded */
    const char *accept;       /* NULL: application/json */
    const char *content_type; /* NULL: application/json */
    const char *body;         /* NULL: none */
    size_t body_len;
    bool idempotent;          /* retried on connection errors */
    bool streaming;           /* no total timeout (list/watch) */
    bool uncompressed;        /* do not offer gzip (watch streams) */
    int64_t idle_timeout_ms;  /* 0: none */
    kcr_cancel *cancel;
    /* For 2xx bodies: receives bytes as they arrive instead of buffering. */
    kcr_err (*sink)(const char *buf, size_t len, void *ud);
    void *sink_ud;
} kcr__http_req;

/* Runs a request on an HTTP client. Buffered 2xx bodies go to *out (malloc'd,
 * NUL-terminated) when out is non-NULL. Errors as in kcr/client.h. */
kcr_err kcr__http_do(kcr_client *c, const kcr__http_req *req, char **out, size_t *out_len,
                     kcr_status *st);

#endif
