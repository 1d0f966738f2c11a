/* Paths and their handlers: registration (before start) and lookup. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "webhook/webhook_internal.h"

const struct kcr__wh_route *kcr__wh_route_find(const kcr_webhook_server *s, const char *path)
{
    for (const struct kcr__wh_route *r = s->routes; r; r = r->next)
        if (strcmp(r->path, path) == 0)
            return r;
    return NULL;
}

static void route_free(struct kcr__wh_route *r)
{
    if (r->free_owned)
        r->free_owned(r->owned);
    free(r->path);
    free(r);
}

/* Takes r (freed on failure too). */
kcr_err kcr__wh_route_add(kcr_webhook_server *s, struct kcr__wh_route *r)
{
    kcr_err err = KCR_OK;
    pthread_mutex_lock(&s->mu);
    bool started = s->started;
    pthread_mutex_unlock(&s->mu);
    if (started)
        err = kcr__fail(KCR_ERR_STATE, "webhook %s: handlers are added before start", r->path);
    else if (r->path[0] != '/')
        err = kcr__fail(KCR_ERR_INVALID, "webhook path \"%s\" does not start with '/'", r->path);
    else if (kcr__wh_route_find(s, r->path))
        err = kcr__fail(KCR_ERR_EXISTS, "webhook path %s is already registered", r->path);
    if (!err) {
        if (r->timeout_ms <= 0)
            r->timeout_ms = KCR_WEBHOOK_DEFAULT_HANDLER_TIMEOUT_MS;
        err = kcr__wh_metrics_route(s, r);
    }
    if (err) {
        route_free(r);
        return err;
    }
    r->next = s->routes;
    s->routes = r;
    return KCR_OK;
}

void kcr__wh_routes_free(kcr_webhook_server *s)
{
    while (s->routes) {
        struct kcr__wh_route *r = s->routes;
        s->routes = r->next;
        route_free(r);
    }
}
