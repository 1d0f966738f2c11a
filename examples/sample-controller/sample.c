/* The sample controller: declaration and reconcile (see sample.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sample.h"

const kcr_resource SAMPLE_FOOS = {"samplecontroller.k8s.io", "v1alpha1", "foos"};
const kcr_resource SAMPLE_DEPLOYMENTS = {"apps", "v1", "deployments"};

#define FOO_API_VERSION "samplecontroller.k8s.io/v1alpha1"
#define FOO_KIND "Foo"

static void say(const sample_config *cfg, kcr_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void say(const sample_config *cfg, kcr_log_level level, const char *fmt, ...)
{
    if (!cfg->log || level > cfg->level)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    cfg->log(level, SAMPLE_NAME, line, cfg->log_user_data);
}

/* An edit of a Deployment (base, or a new one when NULL) with its type set:
 * what is written must say what it is, whatever the cache kept. */
static kcr_err deployment_edit(const kcr_object *base, kcr_object_edit **out)
{
    kcr_err err = kcr_object_edit_new(base, out);
    if (err == KCR_OK)
        err = kcr_object_edit_set_string(*out, "apiVersion", "apps/v1");
    if (err == KCR_OK)
        err = kcr_object_edit_set_string(*out, "kind", "Deployment");
    if (err != KCR_OK) {
        kcr_object_edit_free(*out);
        *out = NULL;
    }
    return err;
}

/* The Deployment a Foo wants (sample-controller's newDeployment). */
static kcr_err new_deployment(const kcr_object *foo, const char *name, int64_t replicas,
                              kcr_object **out)
{
    static const char containers[] = "[{\"name\":\"nginx\",\"image\":\"nginx:latest\"}]";
    const kcr_ctrlutil_owner_options owner = {.api_version = FOO_API_VERSION, .kind = FOO_KIND};
    const char *foo_name = kcr_object_name(foo);
    kcr_object_edit *e;
    kcr_err err = deployment_edit(NULL, &e);
    if (err != KCR_OK)
        return err;
    err = kcr_object_edit_set_string(e, "metadata.name", name);
    if (err == KCR_OK)
        err = kcr_object_edit_set_string(e, "metadata.namespace", kcr_object_namespace(foo));
    if (err == KCR_OK)
        err = kcr_ctrlutil_set_controller_reference_edit(foo, e, &owner);
    if (err == KCR_OK)
        err = kcr_object_edit_set_int(e, "spec.replicas", replicas);
    static const char *const label_paths[] = {"spec.selector.matchLabels",
                                              "spec.template.metadata.labels"};
    for (size_t i = 0; i < 2 && err == KCR_OK; i++) {
        char path[64];
        snprintf(path, sizeof path, "%s.app", label_paths[i]);
        err = kcr_object_edit_set_string(e, path, "nginx");
        snprintf(path, sizeof path, "%s.controller", label_paths[i]);
        if (err == KCR_OK)
            err = kcr_object_edit_set_string(e, path, foo_name);
    }
    if (err == KCR_OK)
        err = kcr_object_edit_set_json(e, "spec.template.spec.containers", containers,
                                       sizeof containers - 1);
    if (err == KCR_OK)
        err = kcr_object_edit_freeze(e, out);
    kcr_object_edit_free(e);
    return err;
}

static kcr_err create_deployment(kcr_ctx *ctx, const kcr_object *foo, const char *name,
                                 int64_t replicas, kcr_object **out)
{
    kcr_object *want = NULL;
    kcr_err err = new_deployment(foo, name, replicas, &want);
    if (err == KCR_OK)
        err = kcr_client_create(kcr_ctx_client(ctx),
                                &(kcr_request){.resource = &SAMPLE_DEPLOYMENTS,
                                               .object = want,
                                               .field_manager = SAMPLE_NAME},
                                out);
    kcr_object_unref(want);
    return err;
}

/* Updates the Deployment's spec.replicas, conditional on the resourceVersion
 * read (the cache's): a stale one is a 409 and the reconcile is retried.
 * (sample-controller PUTs a whole new Deployment without a resourceVersion,
 * which would also overwrite other writers' changes.) */
static kcr_err scale_deployment(kcr_ctx *ctx, const kcr_object *d, int64_t replicas,
                                kcr_object **out)
{
    kcr_object *want = NULL;
    kcr_object_edit *e;
    kcr_err err = deployment_edit(d, &e);
    if (err != KCR_OK)
        return err;
    err = kcr_object_edit_set_int(e, "spec.replicas", replicas);
    if (err == KCR_OK)
        err = kcr_object_edit_freeze(e, &want);
    kcr_object_edit_free(e);
    if (err == KCR_OK)
        err = kcr_client_update(kcr_ctx_client(ctx),
                                &(kcr_request){.resource = &SAMPLE_DEPLOYMENTS,
                                               .object = want,
                                               .field_manager = SAMPLE_NAME},
                                out);
    kcr_object_unref(want);
    return err;
}

/* Copies the Deployment's status.availableReplicas (absent: 0) into the Foo's
 * status through the status subresource, conditional on the Foo's cached
 * resourceVersion. Nothing is sent when the Foo already shows it (the server
 * would not change anything either). */
static kcr_err update_foo_status(kcr_ctx *ctx, const kcr_object *foo, const kcr_object *d)
{
    int64_t available = kcr_value_int(kcr_object_get(d, "status.availableReplicas"));
    kcr_value cur = kcr_object_get(foo, "status.availableReplicas");
    if (kcr_value_get_type(cur) == KCR_VALUE_INT && kcr_value_int(cur) == available)
        return KCR_OK;
    kcr_object *want = NULL;
    kcr_object_edit *e;
    kcr_err err = kcr_object_edit_new(foo, &e);
    if (err != KCR_OK)
        return err;
    err = kcr_object_edit_set_string(e, "apiVersion", FOO_API_VERSION);
    if (err == KCR_OK)
        err = kcr_object_edit_set_string(e, "kind", FOO_KIND);
    if (err == KCR_OK)
        err = kcr_object_edit_set_int(e, "status.availableReplicas", available);
    if (err == KCR_OK)
        err = kcr_object_edit_freeze(e, &want);
    kcr_object_edit_free(e);
    if (err == KCR_OK)
        err = kcr_client_update(
            kcr_ctx_client(ctx),
            &(kcr_request){.resource = &SAMPLE_FOOS, .subresource = "status", .object = want},
            NULL);
    kcr_object_unref(want);
    return err;
}

static bool controlled_by(const kcr_object *obj, const kcr_object *owner)
{
    kcr_owner_ref ref;
    return kcr_object_controller_ref(obj, &ref) && strcmp(ref.uid, kcr_object_uid(owner)) == 0;
}

/* Brings the Deployment of `foo` to what it asks for; *d is the cached
 * Deployment (or NULL) and ends as the latest one known. */
static kcr_err sync_deployment(kcr_ctx *ctx, const sample_config *cfg,
                               const kcr_reconcile_request *req, const kcr_object *foo,
                               const char *name, kcr_object **d)
{
    kcr_value spec_replicas = kcr_object_get(foo, "spec.replicas");
    bool has_replicas = kcr_value_get_type(spec_replicas) == KCR_VALUE_INT;
    int64_t replicas = has_replicas ? kcr_value_int(spec_replicas) : 1;
    if (!*d) {
        kcr_err err = create_deployment(ctx, foo, name, replicas, d);
        if (err != KCR_OK)
            return err;
        say(cfg, KCR_LOG_INFO, "%s: created Deployment %s", req->key, name);
    }
    if (!controlled_by(*d, foo)) {
        kcr_ctx_eventf(ctx, foo, KCR_EVENT_WARNING, "ErrResourceExists",
                       "Resource \"%s\" already exists and is not managed by Foo", name);
        say(cfg, KCR_LOG_WARN, "%s: Resource \"%s\" already exists and is not managed by Foo",
            req->key, name);
        return KCR_ERR_EXISTS;
    }
    int64_t have = kcr_value_int(kcr_object_get(*d, "spec.replicas"));
    if (has_replicas && have != replicas) {
        kcr_object *scaled = NULL;
        kcr_err err = scale_deployment(ctx, *d, replicas, &scaled);
        if (err != KCR_OK)
            return err;
        say(cfg, KCR_LOG_INFO, "%s: Deployment %s replicas %lld -> %lld", req->key, name,
            (long long)have, (long long)replicas);
        kcr_object_unref(*d);
        *d = scaled;
    }
    return KCR_OK;
}

static kcr_result reconcile(kcr_ctx *ctx, const kcr_reconcile_request *req, void *user_data)
{
    const sample_config *cfg = user_data;
    kcr_object *foo = kcr_ctx_get_primary(ctx);
    if (!foo) {
        say(cfg, KCR_LOG_DEBUG, "%s: Foo no longer exists", req->key);
        return KCR_DONE;
    }
    const char *name = kcr_value_string(kcr_object_get(foo, "spec.deploymentName"), NULL);
    if (!name || !*name) {
        say(cfg, KCR_LOG_ERROR, "%s: deployment name must be specified", req->key);
        kcr_object_unref(foo);
        return KCR_DONE;
    }
    kcr_object *d = kcr_lister_get(kcr_ctx_cache(ctx, &SAMPLE_DEPLOYMENTS), req->ns, name);
    kcr_err err = sync_deployment(ctx, cfg, req, foo, name, &d);
    if (err == KCR_OK)
        err = update_foo_status(ctx, foo, d);
    if (err == KCR_OK) {
        kcr_ctx_eventf(ctx, foo, KCR_EVENT_NORMAL, "Synced", "Foo synced successfully");
        say(cfg, KCR_LOG_INFO, "%s: synced (Deployment %s, %lld available)", req->key, name,
            (long long)kcr_value_int(kcr_object_get(d, "status.availableReplicas")));
    }
    kcr_object_unref(d);
    kcr_object_unref(foo);
    return kcr_result_of(err); /* a write the server refused is not retried */
}

void sample_controller(kcr_controller_options *opts, const sample_config *cfg)
{
    static kcr_source owns;
    owns = (kcr_source){.resource = SAMPLE_DEPLOYMENTS, .kind = "Deployment",
                        .ns = cfg->ns};
    *opts = (kcr_controller_options){
        .name = SAMPLE_NAME,
        .primary = {.resource = SAMPLE_FOOS, .kind = FOO_KIND, .ns = cfg->ns},
        .owns = &owns,
        .n_owns = 1,
        .reconcile = reconcile,
        .user_data = (void *)cfg,
    };
}
