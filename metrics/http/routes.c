/* The request router: GET or HEAD only (405 otherwise), /metrics on a
 * metrics listener, /healthz[/name] and /readyz[/name] on a probe listener,
 * 404 for everything else. Runs on libmicrohttpd's connection threads. */
#include <stdlib.h>
#include <string.h>

#include "metrics/http/server.h"
#include "core/log.h"

#define METRICS_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define TEXT_TYPE "text/plain; charset=utf-8"

/* Queues a reply; `body` (malloc'd) is handed to libmicrohttpd, which frees it. */
static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, const char *type,
                             char *body, size_t len)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, body, body ? MHD_RESPMEM_MUST_FREE
                                                        : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    enum MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result text(struct MHD_Connection *conn, unsigned status, const char *body)
{
    char *copy = strdup(body);
    return reply(conn, status, TEXT_TYPE, copy, copy ? strlen(copy) : 0);
}

static enum MHD_Result metrics(struct MHD_Connection *conn, kcr_metrics *m)
{
    if (!m)
        return text(conn, MHD_HTTP_NOT_FOUND, "404 page not found\n");
    char *body;
    size_t len;
    kcr_err err = kcr_metrics_write_text(m, &body, &len);
    if (err != KCR_OK) {
        kcr__log(KCR_LOG_ERROR, "health", "/metrics: %s", kcr_last_error());
        return text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot write the metrics\n");
    }
    return reply(conn, MHD_HTTP_OK, METRICS_TYPE, body, len);
}

/* "/healthz", "/healthz/NAME" (*name set) or neither. */
static bool probe_path(const char *url, const char *root, const char **name)
{
    size_t n = strlen(root);
    if (strncmp(url, root, n) != 0)
        return false;
    if (url[n] == '\0') {
        *name = NULL;
        return true;
    }
    if (url[n] == '/' && url[n + 1] && !strchr(url + n + 1, '/')) {
        *name = url + n + 1;
        return true;
    }
    return false;
}

enum MHD_Result kcr__http_route(void *cls, struct MHD_Connection *conn, const char *url,
                                const char *method, const char *version,
                                const char *upload_data, size_t *upload_data_size,
                                void **con_cls)
{
    kcr__http_listener *l = cls;
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
    if (l->metrics && strcmp(url, "/metrics") == 0)
        return metrics(conn, l->server->metrics);
    const char *name;
    kcr_health_probe probe = 0;
    if (l->probes && probe_path(url, "/healthz", &name))
        probe = KCR_PROBE_HEALTHZ;
    else if (l->probes && probe_path(url, "/readyz", &name))
        probe = KCR_PROBE_READYZ;
    if (!probe)
        return text(conn, MHD_HTTP_NOT_FOUND, "404 page not found\n");
    kcr__probe_reply r;
    if (kcr__health_probe(l->server, probe, name, conn, &r) != KCR_OK)
        return text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    return reply(conn, r.status, TEXT_TYPE, r.body, strlen(r.body));
}
