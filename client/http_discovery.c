/* Discovery over HTTP: aggregated discovery (/api and /apis with the
 * APIGroupDiscoveryList Accept) when the server answers it, else the legacy
 * walk (/api, /api/V, /apis, /apis/G/V), parsed into a table by
 * discovery.c and cached per client. */
#include <stdlib.h>
#include <string.h>

#include "client/http.h"
#include "client/http_discovery.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "object/value.h"

#define AGGREGATED_ACCEPT                                                                          \
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"

static kcr_err get_json(kcr__transport *c, const char *path, const char *accept, kcr_cancel *cancel,
                        kcr_object **doc, kcr_status *st)
{
    char *body = NULL;
    size_t len = 0;
    kcr__http_req req = {.method = "GET",
                         .path = path,
                         .accept = accept,
                         .content_type = "application/json",
                         .cancel = cancel,
                         .idempotent = true};
    kcr_err err = kcr__transport_do(c, &req, &body, &len, st);
    if (err == KCR_OK)
        err = kcr__document_parse(body, len, path, doc);
    free(body);
    return err;
}

static bool is_aggregated(const kcr_object *doc)
{
    const char *kind = kcr__value_str(kcr_object_get(doc, "kind"));
    return kind && strcmp(kind, "APIGroupDiscoveryList") == 0;
}

/* Legacy discovery: /api, /api/v1, /apis, /apis/G/V for every version. */
static kcr_err legacy_discovery(kcr__transport *c, const kcr_object *api, kcr_cancel *cancel,
                                kcr__disc_table *t, kcr_status *st)
{
    kcr_value versions = kcr_object_get(api, "versions");
    kcr_err err = KCR_OK;
    for (size_t i = 0; err == KCR_OK && i < kcr_value_len(versions); i++) {
        const char *v = kcr__value_str(kcr_value_at(versions, i));
        if (!v)
            continue;
        kcr__buf path = {0};
        kcr__buf_printf(&path, "/api/%s", v);
        kcr_object *doc = NULL;
        err = path.oom ? kcr__fail(KCR_ERR_NOMEM, "out of memory reading discovery")
                       : get_json(c, path.s, NULL, cancel, &doc, st);
        if (err == KCR_OK)
            err = kcr__disc_parse_resource_list(kcr_object_root(doc), "", v, i == 0, t);
        kcr_object_unref(doc);
        kcr__buf_free(&path);
    }
    kcr_object *apis = NULL;
    if (err == KCR_OK)
        err = get_json(c, "/apis", NULL, cancel, &apis, st);
    kcr_value groups = kcr_object_get(apis, "groups");
    for (size_t i = 0; err == KCR_OK && i < kcr_value_len(groups); i++) {
        kcr_value g = kcr_value_at(groups, i);
        const char *name = kcr__value_str(kcr_value_member(g, "name"));
        const char *pref = kcr__value_str(kcr_value_get(g, "preferredVersion.version"));
        kcr_value gv = kcr_value_member(g, "versions");
        if (!name || kcr_value_get_type(gv) != KCR_VALUE_ARRAY)
            continue;
        /* preferred version first, then the others */
        for (int pass = 0; pass < 2 && err == KCR_OK; pass++)
            for (size_t j = 0; err == KCR_OK && j < kcr_value_len(gv); j++) {
                const char *v = kcr__value_str(kcr_value_member(kcr_value_at(gv, j), "version"));
                bool is_pref = v && pref && strcmp(v, pref) == 0;
                if (!v || (pass == 0) != is_pref)
                    continue;
                kcr__buf path = {0};
                kcr__buf_str(&path, "/apis/");
                kcr__buf_escape(&path, name);
                kcr__buf_str(&path, "/");
                kcr__buf_escape(&path, v);
                kcr_object *doc = NULL;
                err = path.oom ? kcr__fail(KCR_ERR_NOMEM, "out of memory reading discovery")
                               : get_json(c, path.s, NULL, cancel, &doc, st);
                if (err == KCR_ERR_NOT_FOUND || err == KCR_ERR_API) {
                    /* an aggregated API that is down: skip it, like kubectl */
                    kcr__log(KCR_LOG_WARN, "client", "discovery of %s/%s failed: %s", name, v,
                             kcr_last_error());
                    kcr_status_clear(st);
                    err = KCR_OK;
                } else if (err == KCR_OK) {
                    err = kcr__disc_parse_resource_list(kcr_object_root(doc), name, v, is_pref, t);
                }
                kcr_object_unref(doc);
                kcr__buf_free(&path);
            }
    }
    kcr_object_unref(apis);
    return err;
}

static kcr_err fetch_discovery(kcr__transport *c, kcr_cancel *cancel, kcr__disc_table *t,
                               kcr_status *st)
{
    kcr_object *api = NULL, *apis = NULL;
    kcr_err err = get_json(c, "/api", AGGREGATED_ACCEPT, cancel, &api, st);
    if (err == KCR_OK && is_aggregated(api)) {
        err = kcr__disc_parse_aggregated(kcr_object_root(api), t);
        if (err == KCR_OK)
            err = get_json(c, "/apis", AGGREGATED_ACCEPT, cancel, &apis, st);
        if (err == KCR_OK && is_aggregated(apis))
            err = kcr__disc_parse_aggregated(kcr_object_root(apis), t);
        else if (err == KCR_OK)
            err = kcr__fail(KCR_ERR_PARSE, "/apis did not answer aggregated discovery");
        kcr__log(KCR_LOG_DEBUG, "client", "aggregated discovery: %zu resources", t->n);
    } else if (err == KCR_OK) {
        err = legacy_discovery(c, api, cancel, t, st);
        kcr__log(KCR_LOG_DEBUG, "client", "legacy discovery: %zu resources", t->n);
    }
    kcr_object_unref(api);
    kcr_object_unref(apis);
    return err;
}

void kcr__http_discovery_init(kcr__http_discovery *d)
{
    memset(d, 0, sizeof *d);
    pthread_mutex_init(&d->lock, NULL);
}

void kcr__http_discovery_destroy(kcr__http_discovery *d)
{
    kcr__disc_clear(&d->table);
    pthread_mutex_destroy(&d->lock);
}

kcr_err kcr__http_discovery_resolve(kcr__http_discovery *d, kcr__transport *t,
                                    const kcr__disc_query *q, bool refresh, kcr_api_resource *out,
                                    kcr_status *st)
{
    pthread_mutex_lock(&d->lock);
    kcr_err err = KCR_OK;
    /* Refresh at most once a second, however many misses ask for it. */
    if (!d->valid || (refresh && kcr__now_ns() - d->fetched_ns > KCR_NS_PER_S)) {
        kcr__disc_table fresh = {0};
        err = fetch_discovery(t, q->cancel, &fresh, st);
        if (err == KCR_OK) {
            kcr__disc_clear(&d->table);
            d->table = fresh;
            d->valid = true;
            d->fetched_ns = kcr__now_ns();
        } else {
            kcr__disc_clear(&fresh);
        }
    }
    if (err == KCR_OK)
        err = kcr__disc_resolve(&d->table, q, out);
    pthread_mutex_unlock(&d->lock);
    return err;
}
void kcr__http_discovery_invalidate(kcr__http_discovery *d)
{
    pthread_mutex_lock(&d->lock);
    d->valid = false;
    pthread_mutex_unlock(&d->lock);
}
