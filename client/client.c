/* Public kcr_client entry points: argument checks, defaults, Status
 * plumbing, then the back end's vtable. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client_impl.h"
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

/* The write options with the client's default field manager filled in. */
static kcr_write_options write_defaults(const kcr_client *c, const kcr_write_options *opts)
{
    kcr_write_options o = opts ? *opts : (kcr_write_options){0};
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

static kcr_err check(const kcr_client *c, const kcr_resource *res)
{
    if (!c || !res || !res->version || !*res->version || !res->resource || !*res->resource)
        return kcr__fail(KCR_ERR_INVALID, "a client and a resource with version and plural "
                                          "name are required");
    return KCR_OK;
}

/* The checks of a verb on one named object (and *out cleared). */
static kcr_err check_named(const kcr_client *c, const kcr_resource *res, const char *name,
                           kcr_object **out, const char *verb)
{
    if (out)
        *out = NULL;
    kcr_err err = check(c, res);
    if (err == KCR_OK && (!name || !*name))
        err = kcr__fail(KCR_ERR_INVALID, "%s: no object name", verb);
    return err;
}

kcr_err kcr_client_get(kcr_client *c, const kcr_resource *res, const char *ns, const char *name,
                       const kcr_get_options *opts, kcr_object **out, kcr_status *status)
{
    kcr_err err = check_named(c, res, name, out, "get");
    if (err != KCR_OK)
        return err;
    static const kcr_get_options dflt;
    if (opts && (err = canceled(opts->cancel, "get")) != KCR_OK)
        return err;
    BEGIN_STATUS();
    int64_t start = kcr__now_ns();
    err = c->ops->get(c, res, ns, name, opts ? opts : &dflt, out, st);
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

/* Create (name optional) and update (name required) of a JSON body: the
 * checks, the body's own name and namespace, defaults, then the back end. */
static kcr_err write_body(kcr_client *c, const kcr_resource *res, const char *ns, const char *json,
                          size_t len, const kcr_write_options *opts, bool update, kcr_object **out,
                          kcr_status *status)
{
    const char *verb = update ? "update" : "create";
    if (out)
        *out = NULL;
    kcr_err err = check(c, res);
    if (err != KCR_OK)
        return err;
    if (!json)
        return kcr__fail(KCR_ERR_INVALID, "%s: no body", verb);
    if (!len)
        len = strlen(json);
    char *name, *body_ns;
    if ((err = body_meta(json, len, &name, &body_ns)) != KCR_OK)
        return err;
    kcr_write_options o = write_defaults(c, opts);
    if (update && (!name || !*name))
        err = kcr__fail(KCR_ERR_INVALID, "update: the object has no metadata.name");
    else
        err = canceled(o.cancel, verb);
    if (err == KCR_OK) {
        BEGIN_STATUS();
        int64_t start = kcr__now_ns();
        if (!ns)
            ns = body_ns;
        err = update ? c->ops->update(c, res, ns, name, json, len, &o, out, st)
                     : c->ops->create(c, res, ns, json, len, &o, out, st);
        observe_call(c, update ? "PUT" : "POST", update ? 200 : 201, start, err, st);
        END_STATUS();
    }
    free(name);
    free(body_ns);
    return err;
}

kcr_err kcr_client_create(kcr_client *c, const kcr_resource *res, const char *ns, const char *json,
                          size_t len, const kcr_write_options *opts, kcr_object **out,
                          kcr_status *status)
{
    return write_body(c, res, ns, json, len, opts, false, out, status);
}

kcr_err kcr_client_update(kcr_client *c, const kcr_resource *res, const char *ns,
                          const char *json, size_t len, const kcr_write_options *opts,
                          kcr_object **out, kcr_status *status)
{
    return write_body(c, res, ns, json, len, opts, true, out, status);
}

kcr_err kcr_client_update_status(kcr_client *c, const kcr_resource *res, const char *ns,
                                 const char *json, size_t len, kcr_object **out,
                                 kcr_status *status)
{
    return kcr_client_update_status_opts(c, res, ns, json, len, NULL, out, status);
}

kcr_err kcr_client_update_status_opts(kcr_client *c, const kcr_resource *res, const char *ns,
                                      const char *json, size_t len, const kcr_write_options *opts,
                                      kcr_object **out, kcr_status *status)
{
    kcr_write_options o = opts ? *opts : (kcr_write_options){0};
    o.subresource = "status";
    return kcr_client_update(c, res, ns, json, len, &o, out, status);
}

/* ---- writes of kcr_object values: serialized once, then as the JSON verbs ---- */

typedef enum obj_verb { OBJ_CREATE, OBJ_UPDATE, OBJ_UPDATE_STATUS, OBJ_APPLY } obj_verb;

static kcr_err write_object(kcr_client *c, const kcr_resource *res, const char *ns,
                            const kcr_object *obj, obj_verb verb, const kcr_write_options *opts,
                            kcr_object **out, kcr_status *status)
{
    if (out)
        *out = NULL;
    if (!obj)
        return kcr__fail(KCR_ERR_INVALID, "write: NULL object");
    char *json = NULL;
    size_t len = 0;
    kcr_err err = kcr_object_to_json(obj, &json, &len);
    if (err != KCR_OK)
        return err;
    if (ns == NULL || !*ns)
        ns = kcr_object_namespace(obj);
    switch (verb) {
    case OBJ_CREATE:
        err = kcr_client_create(c, res, ns, json, len, opts, out, status);
        break;
    case OBJ_UPDATE:
        err = kcr_client_update(c, res, ns, json, len, opts, out, status);
        break;
    case OBJ_UPDATE_STATUS:
        err = kcr_client_update_status(c, res, ns, json, len, out, status);
        break;
    case OBJ_APPLY:
        err = kcr_client_patch(c, res, ns, kcr_object_name(obj), KCR_PATCH_APPLY, json, len, opts,
                               out, status);
        break;
    }
    free(json);
    return err;
}

kcr_err kcr_client_create_object(kcr_client *c, const kcr_resource *res, const char *ns,
                                 const kcr_object *obj, const kcr_write_options *opts,
                                 kcr_object **out, kcr_status *status)
{
    return write_object(c, res, ns, obj, OBJ_CREATE, opts, out, status);
}

kcr_err kcr_client_update_object(kcr_client *c, const kcr_resource *res, const kcr_object *obj,
                                 const kcr_write_options *opts, kcr_object **out,
                                 kcr_status *status)
{
    return write_object(c, res, NULL, obj, OBJ_UPDATE, opts, out, status);
}

kcr_err kcr_client_update_status_object(kcr_client *c, const kcr_resource *res,
                                        const kcr_object *obj, kcr_object **out,
                                        kcr_status *status)
{
    return write_object(c, res, NULL, obj, OBJ_UPDATE_STATUS, NULL, out, status);
}

kcr_err kcr_client_apply_object(kcr_client *c, const kcr_resource *res, const kcr_object *obj,
                                const kcr_write_options *opts, kcr_object **out,
                                kcr_status *status)
{
    return write_object(c, res, NULL, obj, OBJ_APPLY, opts, out, status);
}

kcr_err kcr_client_patch(kcr_client *c, const kcr_resource *res, const char *ns,
                         const char *name, kcr_patch_type type, const char *patch, size_t len,
                         const kcr_write_options *opts, kcr_object **out, kcr_status *status)
{
    kcr_err err = check_named(c, res, name, out, "patch");
    if (err != KCR_OK)
        return err;
    if (!patch)
        return kcr__fail(KCR_ERR_INVALID, "patch: no patch");
    if ((unsigned)type > KCR_PATCH_APPLY)
        return kcr__fail(KCR_ERR_INVALID, "patch: unknown patch type %d", (int)type);
    if (!len)
        len = strlen(patch);
    kcr_write_options o = write_defaults(c, opts);
    if ((err = canceled(o.cancel, "patch")) != KCR_OK)
        return err;
    BEGIN_STATUS();
    int64_t start = kcr__now_ns();
    err = c->ops->patch(c, res, ns, name, type, patch, len, &o, out, st);
    observe_call(c, "PATCH", 200, start, err, st);
    END_STATUS();
    return err;
}

kcr_err kcr_client_delete(kcr_client *c, const kcr_resource *res, const char *ns,
                          const char *name, const kcr_delete_options *opts, kcr_object **out,
                          kcr_status *status)
{
    kcr_err err = check_named(c, res, name, out, "delete");
    if (err != KCR_OK)
        return err;
    static const kcr_delete_options dflt;
    if (opts && opts->has_grace_period &&
        (opts->grace_period_ms < 0 || opts->grace_period_ms > KCR__MAX_DURATION_MS))
        return kcr__fail(KCR_ERR_INVALID, "delete: grace period %lld ms is out of range",
                         (long long)opts->grace_period_ms);
    if (opts && (err = canceled(opts->cancel, "delete")) != KCR_OK)
        return err;
    BEGIN_STATUS();
    int64_t start = kcr__now_ns();
    err = c->ops->del(c, res, ns, name, opts ? opts : &dflt, out, st);
    observe_call(c, "DELETE", 200, start, err, st);
    END_STATUS();
    return err;
}

/* The checks shared by list and watch: client, resource, durations, and a
 * token that fired already. */
static kcr_err stream_check(const kcr_client *c, const kcr_resource *res, const kcr_list_options *o,
                            const char *verb)
{
    kcr_err err = check(c, res);
    if (err != KCR_OK)
        return err;
    if (o && o->timeout_ms > KCR__MAX_DURATION_MS)
        return kcr__fail(KCR_ERR_INVALID, "%s: timeout_ms %lld is above %lld", verb,
                         (long long)o->timeout_ms, (long long)KCR__MAX_DURATION_MS);
    if (o && o->idle_timeout_ms > KCR__MAX_DURATION_MS)
        return kcr__fail(KCR_ERR_INVALID, "%s: idle_timeout_ms %lld is above %lld", verb,
                         (long long)o->idle_timeout_ms, (long long)KCR__MAX_DURATION_MS);
    return o ? canceled(o->cancel, verb) : KCR_OK;
}

static const kcr_list_options list_defaults;

kcr_err kcr_client_list(kcr_client *c, const kcr_resource *res, const char *ns,
                        const kcr_list_options *opts, kcr_list_item_fn fn, void *user_data,
                        kcr_list_meta *meta, kcr_status *status)
{
    kcr_list_meta_clear(meta);
    kcr_err err = stream_check(c, res, opts, "list");
    if (err != KCR_OK)
        return err;
    BEGIN_STATUS();
    int64_t start = kcr__now_ns();
    err = c->ops->list(c, res, ns, opts ? opts : &list_defaults, fn, user_data, meta, st);
    observe_call(c, "GET", 200, start, err, st);
    END_STATUS();
    return err;
}

kcr_err kcr_client_watch(kcr_client *c, const kcr_resource *res, const char *ns,
                         const kcr_list_options *opts, kcr_watch_event_fn fn, void *user_data,
                         kcr_status *status)
{
    kcr_err err = stream_check(c, res, opts, "watch");
    if (err != KCR_OK)
        return err;
    BEGIN_STATUS();
    int64_t start = kcr__now_ns();
    err = c->ops->watch(c, res, ns, opts ? opts : &list_defaults, fn, user_data, st);
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

kcr_err kcr_client_resolve(kcr_client *c, const char *name, kcr_api_resource *out,
                           kcr_status *status)
{
    return kcr_client_resolve_opts(c, name, NULL, out, status);
}

kcr_err kcr_client_resolve_opts(kcr_client *c, const char *name, const kcr_resolve_options *opts,
                                kcr_api_resource *out, kcr_status *status)
{
    if (!c || !name || !*name || !out)
        return kcr__fail(KCR_ERR_INVALID, "resolve: a client and a name are required");
    kcr__disc_query q = {.name = name, .cancel = opts ? opts->cancel : NULL};
    return resolve(c, &q, out, status);
}

kcr_err kcr_client_resolve_kind(kcr_client *c, const char *group, const char *version,
                                const char *kind, kcr_api_resource *out, kcr_status *status)
{
    return kcr_client_resolve_kind_opts(c, group, version, kind, NULL, out, status);
}

kcr_err kcr_client_resolve_kind_opts(kcr_client *c, const char *group, const char *version,
                                     const char *kind, const kcr_resolve_options *opts,
                                     kcr_api_resource *out, kcr_status *status)
{
    if (!c || !kind || !*kind || !out)
        return kcr__fail(KCR_ERR_INVALID, "resolve_kind: a client and a kind are required");
    kcr__disc_query q = {.group = group ? group : "",
                         .version = version,
                         .kind = kind,
                         .cancel = opts ? opts->cancel : NULL};
    return resolve(c, &q, out, status);
}

void kcr_client_invalidate_discovery(kcr_client *c)
{
    if (c)
        c->ops->invalidate(c);
}

kcr_err kcr_client_raw(kcr_client *c, const char *method, const char *path, const char *accept,
                       const char *content_type, const char *body, size_t body_len, char **out,
                       size_t *out_len, kcr_status *status)
{
    kcr_raw_options o = {.method = method, .accept = accept, .content_type = content_type};
    return kcr_client_request(c, path, body, body_len, &o, out, out_len, status);
}

kcr_err kcr_client_request(kcr_client *c, const char *path, const char *body, size_t body_len,
                           const kcr_raw_options *opts, char **out, size_t *out_len,
                           kcr_status *status)
{
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
    BEGIN_STATUS();
    int64_t start = kcr__now_ns();
    err = c->ops->raw(c, path, body, body_len, &o, out, out_len, st);
    observe_call(c, o.method, 200, start, err, st);
    END_STATUS();
    return err;
}
