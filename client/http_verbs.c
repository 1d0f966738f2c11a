/* The HTTP back end of kcr_client: the REST verbs (request paths and
 * queries, request bodies, responses decoded into kcr_object, lists and
 * watches streamed into the decoders) over the transport
 * (http_transport.c), with discovery from http_discovery.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client_impl.h"
#include "client/decode.h"
#include "client/http.h"
#include "client/http_discovery.h"
#include "client/http_transport.h"
#include "core/abi.h"
#include "core/clock.h"
#include "core/error.h"
#include "object/edit_tree.h"

typedef struct http_client {
    struct kcr_client base;
    kcr__transport *transport;
    kcr__http_discovery disc;
} http_client;

static kcr__transport *transport_of(kcr_client *c)
{
    return ((http_client *)c)->transport;
}

void kcr__http_client_set_idle_close(kcr_client *c, int64_t ms)
{
    kcr__transport_set_idle_close(transport_of(c), ms);
}

/* /api/V or /apis/G/V, [/namespaces/NS], /RESOURCE, [/NAME], [/SUB]. */
static kcr_err resource_path(kcr__buf *b, const kcr_resource *res, const char *ns, const char *name,
                             const char *subresource)
{
    if (!res || !res->version || !*res->version || !res->resource || !*res->resource)
        return kcr__fail(KCR_ERR_INVALID, "a resource needs a version and a resource name");
    if (res->group && *res->group) {
        kcr__buf_str(b, "/apis/");
        kcr__buf_escape(b, res->group);
        kcr__buf_str(b, "/");
    } else {
        kcr__buf_str(b, "/api/");
    }
    kcr__buf_escape(b, res->version);
    if (ns && *ns) {
        kcr__buf_str(b, "/namespaces/");
        kcr__buf_escape(b, ns);
    }
    kcr__buf_str(b, "/");
    kcr__buf_escape(b, res->resource);
    if (name) {
        if (!*name)
            return kcr__fail(KCR_ERR_INVALID, "empty object name");
        kcr__buf_str(b, "/");
        kcr__buf_escape(b, name);
    }
    if (subresource && *subresource) {
        kcr__buf_str(b, "/");
        kcr__buf_escape(b, subresource);
    }
    return b->oom ? kcr__fail(KCR_ERR_NOMEM, "out of memory building a request path") : KCR_OK;
}

static kcr_err decode_object(const char *body, size_t len, kcr_object **out)
{
    kcr_err err = kcr_object_parse(body, len, out);
    if (err != KCR_OK)
        return kcr__refail(err, "response: ");
    return KCR_OK;
}

/* Runs a request whose 2xx answer is one object, stored in *out if wanted. */
static kcr_err object_request(kcr_client *c, kcr__http_req *req, kcr_object **out, kcr_status *st)
{
    if (out)
        *out = NULL;
    char *body = NULL;
    size_t len = 0;
    kcr_err err = kcr__transport_do(transport_of(c), req, &body, &len, st);
    if (err == KCR_OK && out)
        err = decode_object(body, len, out);
    free(body);
    return err;
}

static const char *metadata_accept(bool list)
{
    return list ? "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"
                  "application/json"
                : "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,"
                  "application/json";
}

static kcr_err http_get(kcr_client *c, const kcr_resource *res, const char *ns, const char *name,
                        const kcr__get_options *opts, kcr_object **out, kcr_status *st)
{
    kcr__buf path = {0};
    kcr_err err = resource_path(&path, res, ns, name, opts->subresource);
    kcr__buf_query(&path, "resourceVersion", opts->resource_version);
    if (err == KCR_OK && path.oom)
        err = kcr__fail(KCR_ERR_NOMEM, "out of memory building a get request");
    if (err == KCR_OK) {
        kcr__http_req req = {.method = "GET",
                             .path = path.s,
                             .idempotent = true,
                             .cancel = opts->cancel,
                             .accept = opts->metadata_only ? metadata_accept(false) : NULL};
        err = object_request(c, &req, out, st);
    }
    kcr__buf_free(&path);
    return err;
}

static void write_query(kcr__buf *path, const kcr__write_options *opts, bool apply)
{
    kcr__buf_query(path, "fieldManager", opts->field_manager);
    if (apply && opts->force)
        kcr__buf_query(path, "force", "true");
    if (opts->dry_run)
        kcr__buf_query(path, "dryRun", "All");
}

/* POST (create, name NULL) or PUT (update) of a whole object. PUT is
 * idempotent only with a resourceVersion precondition, so neither is retried
 * on connection errors. */
static kcr_err write_object(kcr_client *c, const char *method, const kcr_resource *res,
                            const char *ns, const char *name, const char *json, size_t len,
                            const kcr__write_options *opts, kcr_object **out, kcr_status *st)
{
    kcr__buf path = {0};
    kcr_err err = resource_path(&path, res, ns, name, opts->subresource);
    write_query(&path, opts, false);
    if (err == KCR_OK && path.oom)
        err = kcr__fail(KCR_ERR_NOMEM, "out of memory building a write request");
    if (err == KCR_OK) {
        kcr__http_req req = {.method = method,
                             .path = path.s,
                             .body = json,
                             .body_len = len,
                             .cancel = opts->cancel};
        err = object_request(c, &req, out, st);
    }
    kcr__buf_free(&path);
    return err;
}

static kcr_err http_create(kcr_client *c, const kcr_resource *res, const char *ns, const char *json,
                           size_t len, const kcr__write_options *opts, kcr_object **out,
                           kcr_status *st)
{
    return write_object(c, "POST", res, ns, NULL, json, len, opts, out, st);
}

static kcr_err http_update(kcr_client *c, const kcr_resource *res, const char *ns, const char *name,
                           const char *json, size_t len, const kcr__write_options *opts,
                           kcr_object **out, kcr_status *st)
{
    return write_object(c, "PUT", res, ns, name, json, len, opts, out, st);
}

static kcr_err http_patch(kcr_client *c, const kcr_resource *res, const char *ns, const char *name,
                          kcr_patch_type type, const char *patch, size_t len,
                          const kcr__write_options *opts, kcr_object **out, kcr_status *st)
{
    static const char *const types[] = {
        "application/json-patch+json", "application/merge-patch+json",
        "application/strategic-merge-patch+json", "application/apply-patch+yaml"};
    if ((unsigned)type > KCR_PATCH_APPLY)
        return kcr__fail(KCR_ERR_INVALID, "unknown patch type %d", (int)type);
    kcr__buf path = {0};
    kcr_err err = resource_path(&path, res, ns, name, opts->subresource);
    write_query(&path, opts, type == KCR_PATCH_APPLY);
    if (err == KCR_OK && path.oom)
        err = kcr__fail(KCR_ERR_NOMEM, "out of memory building a patch request");
    if (err == KCR_OK) {
        kcr__http_req req = {.method = "PATCH",
                             .path = path.s,
                             .body = patch,
                             .body_len = len,
                             .content_type = types[type],
                             .cancel = opts->cancel,
                             .idempotent = type == KCR_PATCH_APPLY};
        err = object_request(c, &req, out, st);
    }
    kcr__buf_free(&path);
    return err;
}

/* The DeleteOptions body, built in an edit tree and serialized from it. */
static kcr_err delete_body(const kcr__delete_options *o, char **out)
{
    *out = NULL;
    kcr_object_edit *d = NULL;
    kcr_err err = kcr_object_edit_new(NULL, &d);
    if (err == KCR_OK)
        err = kcr_object_edit_set_string(d, "kind", "DeleteOptions");
    if (err == KCR_OK)
        err = kcr_object_edit_set_string(d, "apiVersion", "v1");
    if (err == KCR_OK && o->propagation_policy)
        err = kcr_object_edit_set_string(d, "propagationPolicy", o->propagation_policy);
    if (err == KCR_OK && o->has_grace_period)
        err = kcr_object_edit_set_int(d, "gracePeriodSeconds", kcr__ms_to_s_ceil(o->grace_period_ms));
    if (err == KCR_OK && o->dry_run)
        err = kcr_object_edit_set_json(d, "dryRun", "[\"All\"]", 0);
    if (err == KCR_OK && o->precondition_uid)
        err = kcr_object_edit_set_string(d, "preconditions.uid", o->precondition_uid);
    if (err == KCR_OK && o->precondition_resource_version)
        err = kcr_object_edit_set_string(d, "preconditions.resourceVersion",
                                         o->precondition_resource_version);
    if (err == KCR_OK)
        err = kcr__node_to_json(d->root, out, NULL);
    kcr_object_edit_free(d);
    return err == KCR_OK ? KCR_OK : kcr__refail(err, "delete options: ");
}

/* A 2xx DELETE answers with the object (deletion pending: finalizers, or a
 * foreground deletion) or with a Status "Success"; only the former goes to
 * *out. The answer is parsed once and kept when it is the object. */
static kcr_err deleted_object(const char *resp, size_t len, kcr_object **out)
{
    kcr_object *doc = NULL;
    if (kcr_object_parse_any(resp, len, &doc) != KCR_OK)
        return KCR_OK; /* not an object: nothing to return */
    kcr_err err = KCR_OK;
    if (kcr_value_get_type(kcr_object_get(doc, "status")) != KCR_VALUE_STRING &&
        kcr_value_get_type(kcr_object_get(doc, "metadata.name")) == KCR_VALUE_STRING) {
        if (*kcr_object_name(doc))
            *out = kcr_object_ref(doc);
        else
            err = kcr__fail(KCR_ERR_PARSE, "response: object has no metadata.name (or it is "
                                           "not a non-empty string)");
    }
    kcr_object_unref(doc);
    return err;
}

static kcr_err http_delete(kcr_client *c, const kcr_resource *res, const char *ns, const char *name,
                           const kcr__delete_options *opts, kcr_object **out, kcr_status *st)
{
    if (out)
        *out = NULL;
    kcr__buf path = {0};
    char *body = NULL;
    kcr_err err = resource_path(&path, res, ns, name, NULL);
    if (err == KCR_OK && path.oom)
        err = kcr__fail(KCR_ERR_NOMEM, "out of memory building a delete request");
    if (err == KCR_OK)
        err = delete_body(opts, &body);
    char *resp = NULL;
    size_t len = 0;
    if (err == KCR_OK) {
        kcr__http_req req = {.method = "DELETE",
                             .path = path.s,
                             .body = body,
                             .body_len = strlen(body),
                             .cancel = opts->cancel,
                             .idempotent = true};
        err = kcr__transport_do(transport_of(c), &req, &resp, &len, st);
    }
    if (err == KCR_OK && out && resp)
        err = deleted_object(resp, len, out);
    free(resp);
    free(body);
    kcr__buf_free(&path);
    return err;
}

static kcr_err list_query(kcr__buf *path, const kcr__list_options *o, bool watch)
{
    if (watch)
        kcr__buf_query(path, "watch", "true");
    kcr__buf_query(path, "labelSelector", o->label_selector);
    kcr__buf_query(path, "fieldSelector", o->field_selector);
    kcr__buf_query(path, "shardSelector",
                   o->shard_selector && *o->shard_selector ? o->shard_selector : NULL);
    kcr__buf_query(path, "resourceVersion", o->resource_version);
    kcr__buf_query(path, "resourceVersionMatch", o->resource_version_match);
    char num[32];
    if (!watch && o->limit > 0) {
        snprintf(num, sizeof num, "%lld", (long long)o->limit);
        kcr__buf_query(path, "limit", num);
    }
    if (!watch)
        kcr__buf_query(path, "continue",
                       o->continue_token && *o->continue_token ? o->continue_token : NULL);
    if (o->timeout_ms > 0) {
        snprintf(num, sizeof num, "%lld", (long long)kcr__ms_to_s_ceil(o->timeout_ms));
        kcr__buf_query(path, "timeoutSeconds", num);
    }
    if (watch && o->allow_bookmarks)
        kcr__buf_query(path, "allowWatchBookmarks", "true");
    if (watch && o->send_initial_events)
        kcr__buf_query(path, "sendInitialEvents", "true");
    return path->oom ? kcr__fail(KCR_ERR_NOMEM, "out of memory building a list or watch query")
                     : KCR_OK;
}

static kcr_err list_sink(const char *buf, size_t len, void *ud)
{
    return kcr__list_decoder_feed(ud, buf, len);
}

static kcr_err http_list(kcr_client *c, const kcr_resource *res, const char *ns,
                         const kcr__list_options *opts, kcr_list_item_fn fn, void *ud,
                         kcr_list_meta *meta, kcr_status *st)
{
    const kcr_client_options *co = kcr__transport_options(transport_of(c));
    kcr__buf path = {0};
    kcr_err err = resource_path(&path, res, ns, NULL, NULL);
    if (err == KCR_OK)
        err = list_query(&path, opts, false);
    kcr__list_decoder *d = NULL;
    if (err == KCR_OK && !(d = kcr__list_decoder_new(co->max_item_bytes, fn, ud)))
        err = kcr__fail(KCR_ERR_NOMEM, "out of memory building a list request");
    if (err == KCR_OK && opts->drop_managed_fields)
        kcr__list_decoder_drop_managed_fields(d);
    if (err == KCR_OK) {
        kcr__http_req req = {.method = "GET",
                             .path = path.s,
                             .idempotent = true,
                             .streaming = true,
                             .idle_timeout_ms = co->request_timeout_ms,
                             .cancel = opts->cancel,
                             .accept = opts->metadata_only ? metadata_accept(true) : NULL,
                             .sink = list_sink,
                             .sink_ud = d};
        err = kcr__transport_do(transport_of(c), &req, NULL, NULL, st);
        if (err == KCR_OK)
            err = kcr__list_decoder_finish(d, meta);
        if (err == KCR_OK && opts->shard_info)
            err = kcr__list_decoder_shard_info(d, opts->shard_info);
    }
    kcr__list_decoder_free(d);
    kcr__buf_free(&path);
    return err;
}

static kcr_err watch_sink(const char *buf, size_t len, void *ud)
{
    return kcr__watch_decoder_feed(ud, buf, len);
}

static kcr_err http_watch(kcr_client *c, const kcr_resource *res, const char *ns,
                          const kcr__list_options *opts, kcr_watch_event_fn fn, void *ud,
                          kcr_status *st)
{
    const kcr_client_options *co = kcr__transport_options(transport_of(c));
    kcr__buf path = {0};
    kcr_err err = resource_path(&path, res, ns, NULL, NULL);
    if (err == KCR_OK)
        err = list_query(&path, opts, true);
    kcr__watch_decoder *d = NULL;
    if (err == KCR_OK && !(d = kcr__watch_decoder_new(co->max_item_bytes, fn, ud)))
        err = kcr__fail(KCR_ERR_NOMEM, "out of memory building a watch request");
    if (err == KCR_OK && opts->drop_managed_fields)
        kcr__watch_decoder_drop_managed_fields(d);
    if (err == KCR_OK) {
        kcr__http_req req = {.method = "GET",
                             .path = path.s,
                             .idempotent = true,
                             .streaming = true,
                             .idle_timeout_ms = opts->idle_timeout_ms,
                             .uncompressed = true,
                             .cancel = opts->cancel,
                             .accept = opts->metadata_only ? metadata_accept(false) : NULL,
                             .sink = watch_sink,
                             .sink_ud = d};
        err = kcr__transport_do(transport_of(c), &req, NULL, NULL, st);
        if (err == KCR_OK)
            err = kcr__watch_decoder_finish(d);
        const kcr_status *es = kcr__watch_decoder_status(d);
        if (es) {
            kcr_status_copy(st, es);
            err = kcr__status_fail(es);
        }
    }
    kcr__watch_decoder_free(d);
    kcr__buf_free(&path);
    return err;
}

static kcr_err http_raw(kcr_client *c, const char *path, const char *body, size_t body_len,
                        const kcr_raw_options *opts, char **out, size_t *out_len, kcr_status *st)
{
    if (!path || path[0] != '/')
        return kcr__fail(KCR_ERR_INVALID, "raw request path must start with '/'");
    kcr__http_req req = {.method = opts->method,
                         .path = path,
                         .accept = opts->accept,
                         .content_type = opts->content_type,
                         .body = body,
                         .body_len = body_len,
                         .cancel = opts->cancel,
                         .idempotent = strcmp(opts->method, "GET") == 0};
    return kcr__transport_do(transport_of(c), &req, out, out_len, st);
}

static kcr_err http_resolve(kcr_client *c, const kcr__disc_query *q, bool refresh,
                            kcr_api_resource *out, kcr_status *st)
{
    http_client *hc = (http_client *)c;
    return kcr__http_discovery_resolve(&hc->disc, hc->transport, q, refresh, out, st);
}

static void http_invalidate(kcr_client *c)
{
    kcr__http_discovery_invalidate(&((http_client *)c)->disc);
}

static void http_destroy(kcr_client *c)
{
    http_client *hc = (http_client *)c;
    kcr__http_discovery_destroy(&hc->disc);
    kcr__transport_free(hc->transport);
    free(hc->base.field_manager);
    free(hc);
}

static const kcr__client_ops http_ops = {
    .get = http_get,
    .create = http_create,
    .update = http_update,
    .patch = http_patch,
    .del = http_delete,
    .list = http_list,
    .watch = http_watch,
    .resolve = http_resolve,
    .invalidate = http_invalidate,
    .raw = http_raw,
    .destroy = http_destroy,
};

kcr_err (kcr_client_new)(size_t opts_size, const kcr_config *cfg, const kcr_client_options *opts,
                         kcr_client **out)
{
    KCR__ABI_OPTS(kcr_client_options, opts, opts_size);
    if (!out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_client_new: NULL out");
    *out = NULL;
    if (!cfg)
        return kcr__fail(KCR_ERR_INVALID, "kcr_client_new: no config");
    http_client *hc = calloc(1, sizeof *hc);
    if (!hc)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory making a client");
    kcr_err err = kcr__transport_new(cfg, opts, &hc->base, &hc->transport);
    if (err != KCR_OK) {
        free(hc);
        return err;
    }
    hc->base.ops = &http_ops;
    kcr__http_discovery_init(&hc->disc);
    /* the namespace is borrowed from the transport's copy of the config */
    hc->base.ns = (char *)kcr_config_namespace(kcr__transport_config(hc->transport));
    if (opts && opts->field_manager && !(hc->base.field_manager = strdup(opts->field_manager))) {
        http_destroy(&hc->base);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory making a client");
    }
    *out = &hc->base;
    return KCR_OK;
}
