/* Public kcr_client entry points: argument checks, defaults, Status
 * plumbing, then the back end's vtable. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client_impl.h"
#include "core/abi.h"
#include "core/clock.h"
#include "core/error.h"
#include "object/value.h"

#define BEGIN_STATUS()                                                                             \
    kcr_status local_status = {0};                                                                 \
    kcr_status *st = status ? status : &local_status;                                              \
    kcr_status_clear(st);                                                                          \
    kcr__clear_error()

#define END_STATUS() kcr_status_clear(&local_status)

#ifdef __GLIBC__
extern char *program_invocation_short_name; /* <errno.h> declares it only with _GNU_SOURCE */
#endif

static char program_name[64];
static pthread_once_t program_once = PTHREAD_ONCE_INIT;

static void find_program_name(void)
{
    const char *name = NULL;
#ifdef __GLIBC__
    name = program_invocation_short_name;
#endif
    char comm[64] = "";
    if (!name || !*name) {
        FILE *f = fopen("/proc/self/comm", "r");
        if (f && fgets(comm, sizeof comm, f))
            comm[strcspn(comm, "\n")] = '\0';
        if (f)
            fclose(f);
        name = comm;
    }
    snprintf(program_name, sizeof program_name, "%s", name && *name ? name : "kcr");
}

const char *kcr__program_name(void)
{
    pthread_once(&program_once, find_program_name);
    return program_name;
}

/* KCR_ERR_CANCELED when the caller's token fired before the request. */
static kcr_err canceled(const kcr_cancel *cancel, const char *verb)
{
    if (kcr_cancel_triggered(cancel))
        return kcr__fail(KCR_ERR_CANCELED, "%s canceled before it started", verb);
    return KCR_OK;
}

/* The write options of a request, with the client's default field manager
 * filled in. */
static kcr__write_options write_opts(const kcr_client *c, const kcr_request *r,
                                     const char *subresource)
{
    kcr__write_options o = {.field_manager = r->field_manager,
                            .subresource = subresource,
                            .force = r->force,
                            .dry_run = r->dry_run,
                            .cancel = r->cancel};
    if (!o.field_manager || !*o.field_manager)
        o.field_manager = c->field_manager ? c->field_manager : kcr__program_name();
    return o;
}

void kcr_client_free(kcr_client *c)
{
    if (c)
        c->ops->destroy(c);
}

void kcr_client_set_request_observer(kcr_client *c, kcr_request_observer_fn fn, void *user_data)
{
    if (!c)
        return;
    c->observer = fn;
    c->observer_data = fn ? user_data : NULL;
}

void kcr__client_observe(const kcr_client *c, const char *method, const char *host, int code,
                         int64_t start_ns)
{
    if (c->observer)
        c->observer(method, host, code, (double)(kcr__now_ns() - start_ns) / KCR_NS_PER_S,
                    c->observer_data);
}

/* A call of a back end without HTTP (ops->dispatch_host set) seen by the
 * observer as one request: ok_code on success, else the Status's code. */
static void observe_call(const kcr_client *c, const char *method, int ok_code, int64_t start_ns,
                         kcr_err err, const kcr_status *st)
{
    if (c->ops->dispatch_host)
        kcr__client_observe(c, method, c->ops->dispatch_host, err == KCR_OK ? ok_code : st->code,
                            start_ns);
}

const char *kcr_client_namespace(const kcr_client *c)
{
    return c && c->ns ? c->ns : "default";
}

kcr_resource kcr_api_resource_gvr(const kcr_api_resource *r)
{
    return (kcr_resource){r->group, r->version, r->resource};
}

/* The checks every verb makes: a client, a request with a resource with
 * version and plural name, a body only where the verb takes one, and *out
 * cleared. */
static kcr_err check(const kcr_client *c, const kcr_request *r, bool takes_body, const char *verb)
{
    if (!c || !r)
        return kcr__fail(KCR_ERR_INVALID, "%s: a client and a request are required", verb);
    const kcr_resource *res = r->resource;
    if (!res || !res->version || !*res->version || !res->resource || !*res->resource)
        return kcr__fail(KCR_ERR_INVALID,
                         "%s: a resource with version and plural name is "
                         "required",
                         verb);
    if (r->object && r->body)
        return kcr__fail(KCR_ERR_INVALID, "%s: both an object and a body", verb);
    if (!takes_body && (r->object || r->body))
        return kcr__fail(KCR_ERR_INVALID, "%s takes no body", verb);
    if (takes_body && !r->object && !r->body)
        return kcr__fail(KCR_ERR_INVALID, "%s: no body", verb);
    return canceled(r->cancel, verb);
}

/* The checks of a verb on one named object. */
static kcr_err check_named(const kcr_client *c, const kcr_request *r, const char *name,
                           bool takes_body, const char *verb)
{
    kcr_err err = check(c, r, takes_body, verb);
    if (err == KCR_OK && (!name || !*name))
        err = kcr__fail(KCR_ERR_INVALID, "%s: no object name", verb);
    return err;
}

kcr_err (kcr_client_get)(size_t req_size, kcr_client *c, const kcr_request *req, kcr_object **out)
{
    KCR__ABI_OPTS(kcr_request, req, req_size);
    if (out)
        *out = NULL;
    kcr_err err = check_named(c, req, req ? req->name : NULL, false, "get");
    if (err != KCR_OK)
        return err;
    kcr__get_options o = {.resource_version = req->resource_version,
                          .subresource = req->subresource,
                          .metadata_only = req->metadata_only,
                          .cancel = req->cancel};
    kcr_status *status = req->status;
    BEGIN_STATUS();
    int64_t start = kcr__now_ns();
    err = c->ops->get(c, req->resource, req->ns, req->name, &o, out, st);
    observe_call(c, "GET", 200, start, err, st);
    END_STATUS();
    return err;
}

/* Reads metadata.name and metadata.namespace of a JSON body (validating it:
 * a JSON object, valid UTF-8). *name / *ns are NULL when absent. */
static kcr_err body_meta(const char *json, size_t len, char **name, char **ns)
{
    *name = *ns = NULL;
    kcr_object *doc;
    kcr_err err = kcr_object_parse_any(json, len, &doc);
    if (err != KCR_OK)
        return kcr__refail(KCR_ERR_INVALID, "object body: ");
    const char *n = kcr__value_str(kcr_object_get(doc, "metadata.name"));
    const char *s = kcr__value_str(kcr_object_get(doc, "metadata.namespace"));
    *name = n ? strdup(n) : NULL;
    *ns = s ? strdup(s) : NULL;
    kcr_object_unref(doc);
    if ((n && !*name) || (s && !*ns)) {
        free(*name);
        free(*ns);
        *name = *ns = NULL;
        return kcr__fail(KCR_ERR_NOMEM, "out of memory reading the object body");
    }
    return KCR_OK;
}

/* A request's body as JSON text: req->body (borrowed; *owned NULL) or
 * req->object serialized (*owned, freed by the caller). */
static kcr_err body_text(const kcr_request *req, const char **json, size_t *len, char **owned)
{
    *owned = NULL;
    if (req->object) {
        kcr_err err = kcr_object_to_json(req->object, owned, len);
        *json = *owned;
        return err;
    }
    *json = req->body;
    *len = req->body_len ? req->body_len : strlen(req->body);
    return KCR_OK;
}

/* Create (name optional) and update (name required): the checks, the
 * body's own name and namespace, defaults, then the back end. */
static kcr_err write_body(kcr_client *c, const kcr_request *req, bool update, kcr_object **out)
{
    const char *verb = update ? "update" : "create";
    if (out)
        *out = NULL;
    kcr_err err = check(c, req, true, verb);
    if (err != KCR_OK)
        return err;
    const char *json;
    size_t len;
    char *owned, *name = NULL, *body_ns = NULL;
    if ((err = body_text(req, &json, &len, &owned)) == KCR_OK)
        err = body_meta(json, len, &name, &body_ns);
    if (err == KCR_OK && update && (!name || !*name))
        err = kcr__fail(KCR_ERR_INVALID, "update: the object has no metadata.name");
    if (err == KCR_OK) {
        kcr__write_options o = write_opts(c, req, req->subresource);
        kcr_status *status = req->status;
        BEGIN_STATUS();
        int64_t start = kcr__now_ns();
        const char *ns = req->ns && *req->ns ? req->ns : body_ns;
        err = update ? c->ops->update(c, req->resource, ns, name, json, len, &o, out, st)
                     : c->ops->create(c, req->resource, ns, json, len, &o, out, st);
        observe_call(c, update ? "PUT" : "POST", update ? 200 : 201, start, err, st);
        END_STATUS();
    }
    free(owned);
    free(name);
    free(body_ns);
    return err;
}

kcr_err (kcr_client_create)(size_t req_size, kcr_client *c, const kcr_request *req,
                            kcr_object **out)
{
    KCR__ABI_OPTS(kcr_request, req, req_size);
    return write_body(c, req, false, out);
}

kcr_err (kcr_client_update)(size_t req_size, kcr_client *c, const kcr_request *req,
                            kcr_object **out)
{
    KCR__ABI_OPTS(kcr_request, req, req_size);
    return write_body(c, req, true, out);
}

kcr_err (kcr_client_patch)(size_t req_size, kcr_client *c, const kcr_request *req, kcr_object **out)
{
    KCR__ABI_OPTS(kcr_request, req, req_size);
    if (out)
        *out = NULL;
    const char *name = req ? req->name : NULL;
    const char *ns = req ? req->ns : NULL;
    if (req && req->object) {
        if (!name || !*name)
            name = kcr_object_name(req->object);
        if (!ns || !*ns)
            ns = kcr_object_namespace(req->object);
    }
    kcr_err err = check_named(c, req, name, true, "patch");
    if (err != KCR_OK)
        return err;
    if ((unsigned)req->patch_type > KCR_PATCH_APPLY)
        return kcr__fail(KCR_ERR_INVALID, "patch: unknown patch type %d", (int)req->patch_type);
    const char *json;
    size_t len;
    char *owned;
    if ((err = body_text(req, &json, &len, &owned)) != KCR_OK)
        return err;
    kcr__write_options o = write_opts(c, req, req->subresource);
    kcr_status *status = req->status;
    BEGIN_STATUS();
    int64_t start = kcr__now_ns();
    err = c->ops->patch(c, req->resource, ns, name, req->patch_type, json, len, &o, out, st);
    observe_call(c, "PATCH", 200, start, err, st);
    END_STATUS();
    free(owned);
    return err;
}

kcr_err (kcr_client_delete)(size_t req_size, kcr_client *c, const kcr_request *req,
                            kcr_object **out)
{
    KCR__ABI_OPTS(kcr_request, req, req_size);
    if (out)
        *out = NULL;
    kcr_err err = check_named(c, req, req ? req->name : NULL, false, "delete");
    if (err != KCR_OK)
        return err;
    if (req->has_grace_period &&
        (req->grace_period_ms < 0 || req->grace_period_ms > KCR__MAX_DURATION_MS))
        return kcr__fail(KCR_ERR_INVALID, "delete: grace period %lld ms is out of range",
                         (long long)req->grace_period_ms);
    kcr__delete_options o = {.propagation_policy = req->propagation_policy,
                             .precondition_uid = req->precondition_uid,
                             .precondition_resource_version = req->precondition_resource_version,
                             .grace_period_ms = req->grace_period_ms,
                             .has_grace_period = req->has_grace_period,
                             .dry_run = req->dry_run,
                             .cancel = req->cancel};
    kcr_status *status = req->status;
    BEGIN_STATUS();
    int64_t start = kcr__now_ns();
    err = c->ops->del(c, req->resource, req->ns, req->name, &o, out, st);
    observe_call(c, "DELETE", 200, start, err, st);
    END_STATUS();
    return err;
}

kcr__list_options kcr__list_options_of(const kcr_request *r)
{
    return (kcr__list_options){.label_selector = r->label_selector,
                               .field_selector = r->field_selector,
                               .resource_version = r->resource_version,
                               .resource_version_match = r->resource_version_match,
                               .limit = r->limit,
                               .continue_token = r->continue_token,
                               .timeout_ms = r->timeout_ms,
                               .metadata_only = r->metadata_only,
                               .drop_managed_fields = r->drop_managed_fields,
                               .allow_bookmarks = r->allow_bookmarks,
                               .send_initial_events = r->send_initial_events,
                               .idle_timeout_ms = r->idle_timeout_ms,
                               .cancel = r->cancel,
                               .shard_selector = r->shard_selector,
                               .shard_info = r->shard_info};
}

/* The checks shared by list and watch: client, resource, no name, durations,
 * and a token that fired already. */
static kcr_err stream_check(const kcr_client *c, const kcr_request *r, const char *verb)
{
    kcr_err err = check(c, r, false, verb);
    if (err != KCR_OK)
        return err;
    if (r->name && *r->name)
        return kcr__fail(KCR_ERR_INVALID,
                         "%s takes no name (use a field selector "
                         "metadata.name=%s)",
                         verb, r->name);
    if (r->timeout_ms > KCR__MAX_DURATION_MS)
        return kcr__fail(KCR_ERR_INVALID, "%s: timeout_ms %lld is above %lld", verb,
                         (long long)r->timeout_ms, (long long)KCR__MAX_DURATION_MS);
    if (r->idle_timeout_ms > KCR__MAX_DURATION_MS)
        return kcr__fail(KCR_ERR_INVALID, "%s: idle_timeout_ms %lld is above %lld", verb,
                         (long long)r->idle_timeout_ms, (long long)KCR__MAX_DURATION_MS);
    return KCR_OK;
}

kcr_err (kcr_client_list)(size_t req_size, kcr_client *c, const kcr_request *req,
                          kcr_list_item_fn fn, void *user_data, kcr_list_meta *meta)
{
    KCR__ABI_OPTS(kcr_request, req, req_size);
    kcr_list_meta_clear(meta);
    if (req)
        kcr_shard_info_clear(req->shard_info);
    kcr_err err = stream_check(c, req, "list");
    if (err != KCR_OK)
        return err;
    kcr__list_options o = kcr__list_options_of(req);
    kcr_status *status = req->status;
    BEGIN_STATUS();
    int64_t start = kcr__now_ns();
    err = c->ops->list(c, req->resource, req->ns, &o, fn, user_data, meta, st);
    observe_call(c, "GET", 200, start, err, st);
    END_STATUS();
    return err;
}

kcr_err (kcr_client_watch)(size_t req_size, kcr_client *c, const kcr_request *req,
                           kcr_watch_event_fn fn, void *user_data)
{
    KCR__ABI_OPTS(kcr_request, req, req_size);
    kcr_err err = stream_check(c, req, "watch");
    if (err != KCR_OK)
        return err;
    kcr__list_options o = kcr__list_options_of(req);
    kcr_status *status = req->status;
    BEGIN_STATUS();
    int64_t start = kcr__now_ns();
    err = c->ops->watch(c, req->resource, req->ns, &o, fn, user_data, st);
    observe_call(c, "GET", 200, start, err, st);
    END_STATUS();
    return err;
}

static kcr_err resolve(kcr_client *c, const kcr__disc_query *q, kcr_api_resource *out,
                       kcr_status *status)
{
    memset(out, 0, sizeof *out);
    kcr_err cerr = canceled(q->cancel, "resolve");
    if (cerr != KCR_OK)
        return cerr;
    BEGIN_STATUS();
    kcr_err err = c->ops->resolve(c, q, false, out, st);
    if (err == KCR_ERR_NOT_FOUND && st->code == 0) /* a miss, not a 404 */
        err = c->ops->resolve(c, q, true, out, st);
    END_STATUS();
    return err;
}

kcr_err (kcr_client_resolve)(size_t opts_size, kcr_client *c, const char *name,
                             const kcr_resolve_options *opts, kcr_api_resource *out)
{
    KCR__ABI_OPTS(kcr_resolve_options, opts, opts_size);
    if (!c || !name || !*name || !out)
        return kcr__fail(KCR_ERR_INVALID, "resolve: a client and a name are required");
    kcr__disc_query q = {.name = name, .cancel = opts ? opts->cancel : NULL};
    return resolve(c, &q, out, opts ? opts->status : NULL);
}

kcr_err (kcr_client_resolve_kind)(size_t opts_size, kcr_client *c, const kcr_gvk *gvk,
                                  const kcr_resolve_options *opts, kcr_api_resource *out)
{
    KCR__ABI_OPTS(kcr_resolve_options, opts, opts_size);
    if (!c || !gvk || !gvk->kind || !*gvk->kind || !out)
        return kcr__fail(KCR_ERR_INVALID, "resolve_kind: a client and a kind are required");
    kcr__disc_query q = {.group = gvk->group ? gvk->group : "",
                         .version = gvk->version,
                         .kind = gvk->kind,
                         .cancel = opts ? opts->cancel : NULL};
    return resolve(c, &q, out, opts ? opts->status : NULL);
}

void kcr_client_invalidate_discovery(kcr_client *c)
{
    if (c)
        c->ops->invalidate(c);
}

kcr_err (kcr_client_request)(size_t opts_size, kcr_client *c, const char *path,
                             const kcr_raw_options *opts, char **out, size_t *out_len)
{
    KCR__ABI_OPTS(kcr_raw_options, opts, opts_size);
    if (out)
        *out = NULL;
    if (!c || !path)
        return kcr__fail(KCR_ERR_INVALID, "raw: a client and a path are required");
    kcr_raw_options o = opts ? *opts : (kcr_raw_options){0};
    if (!o.method)
        o.method = "GET";
    kcr_err err = canceled(o.cancel, "raw request");
    if (err != KCR_OK)
        return err;
    size_t body_len = o.body && !o.body_len ? strlen(o.body) : o.body_len;
    kcr_status *status = o.status;
    BEGIN_STATUS();
    int64_t start = kcr__now_ns();
    err = c->ops->raw(c, path, o.body, body_len, &o, out, out_len, st);
    observe_call(c, o.method, 200, start, err, st);
    END_STATUS();
    return err;
}
