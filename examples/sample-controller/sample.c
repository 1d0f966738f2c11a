/* The sample controller: declaration and reconcile (see sample.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "foo_types.h"
#include "kcr/types/apps_v1.h"
#include "sample.h"

const kcr_resource SAMPLE_FOOS = {SAMPLE_FOO_GROUP, SAMPLE_FOO_VERSION, SAMPLE_FOO_RESOURCE};
const kcr_resource SAMPLE_DEPLOYMENTS = {"apps", "v1", "deployments"};

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

/* The Deployment a Foo wants (sample-controller's newDeployment). The CRD
 * bounds spec.replicas to 1..10, so it fits the Deployment's int32. */
static kcr_err new_deployment(const kcr_object *foo, const char *name, int64_t replicas,
                              kcr_object **out)
{
    const kcr_ctrlutil_owner_options owner = {.api_version = SAMPLE_FOO_API_VERSION,
                                              .kind = SAMPLE_FOO_KIND};
    const char *foo_name = kcr_object_name(foo);
    kcr_object_edit *e;
    kcr_err err = kcr_apps_v1_Deployment_new(NULL, &e);
    if (err != KCR_OK)
        return err;
    kcr_apps_v1_DeploymentEdit d = kcr_apps_v1_Deployment_edit(e);
    kcr_meta_v1_ObjectMetaEdit meta = kcr_apps_v1_DeploymentEdit_metadata(d);
    kcr_meta_v1_ObjectMetaEdit_set_name(meta, name);
    kcr_meta_v1_ObjectMetaEdit_set_namespace(meta, kcr_object_namespace(foo));
    kcr_ctrlutil_set_controller_reference_edit(foo, e, &owner);
    kcr_apps_v1_DeploymentSpecEdit spec = kcr_apps_v1_DeploymentEdit_spec(d);
    kcr_apps_v1_DeploymentSpecEdit_set_replicas(spec, (int32_t)replicas);
    kcr_meta_v1_LabelSelectorEdit selector = kcr_apps_v1_DeploymentSpecEdit_selector(spec);
    kcr_meta_v1_LabelSelectorEdit_set_match_labels(selector, "app", "nginx");
    kcr_meta_v1_LabelSelectorEdit_set_match_labels(selector, "controller", foo_name);
    kcr_core_v1_PodTemplateSpecEdit tmpl = kcr_apps_v1_DeploymentSpecEdit_template(spec);
    kcr_meta_v1_ObjectMetaEdit labels = kcr_core_v1_PodTemplateSpecEdit_metadata(tmpl);
    kcr_meta_v1_ObjectMetaEdit_set_labels(labels, "app", "nginx");
    kcr_meta_v1_ObjectMetaEdit_set_labels(labels, "controller", foo_name);
    kcr_core_v1_ContainerEdit c =
        kcr_core_v1_PodSpecEdit_append_containers(kcr_core_v1_PodTemplateSpecEdit_spec(tmpl));
    kcr_core_v1_ContainerEdit_set_name(c, "nginx");
    kcr_core_v1_ContainerEdit_set_image(c, "nginx:latest");
    err = kcr_object_edit_freeze(e, out); /* the edit's first error, if any */
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
    kcr_err err = kcr_apps_v1_Deployment_new(d, &e);
    if (err != KCR_OK)
        return err;
    kcr_apps_v1_DeploymentSpecEdit_set_replicas(
        kcr_apps_v1_DeploymentEdit_spec(kcr_apps_v1_Deployment_edit(e)), (int32_t)replicas);
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

/* The Deployment's status.availableReplicas (absent: 0). */
static int32_t available_replicas(const kcr_object *d)
{
    int32_t n = 0;
    kcr_apps_v1_DeploymentStatus_available_replicas(
        kcr_apps_v1_Deployment_status(kcr_apps_v1_Deployment_of(d)), &n);
    return n;
}

/* Copies the Deployment's status.availableReplicas (absent: 0) into the Foo's
 * status through the status subresource, conditional on the Foo's cached
 * resourceVersion. Nothing is sent when the Foo already shows it (the server
 * would not change anything either). */
static kcr_err update_foo_status(kcr_ctx *ctx, const kcr_object *foo, const kcr_object *d)
{
    int32_t available = available_replicas(d);
    int64_t cur;
    if (sample_FooStatus_available_replicas(sample_Foo_status(sample_Foo_of(foo)), &cur) ==
            KCR_FIELD_SET &&
        cur == available)
        return KCR_OK;
    kcr_object *want = NULL;
    kcr_object_edit *e;
    kcr_err err = sample_Foo_new(foo, &e);
    if (err != KCR_OK)
        return err;
    sample_FooStatusEdit_set_available_replicas(sample_FooEdit_status(sample_Foo_edit(e)),
                                                available);
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
    int64_t replicas = 1;
    bool has_replicas =
        sample_FooSpec_replicas(sample_Foo_spec(sample_Foo_of(foo)), &replicas) == KCR_FIELD_SET;
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
    int32_t have = 0;
    kcr_apps_v1_DeploymentSpec_replicas(kcr_apps_v1_Deployment_spec(kcr_apps_v1_Deployment_of(*d)),
                                        &have);
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
    const char *name = NULL;
    sample_FooSpec_deployment_name(sample_Foo_spec(sample_Foo_of(foo)), &name);
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
            (long long)available_replicas(d));
    }
    kcr_object_unref(d);
    kcr_object_unref(foo);
    return kcr_result_of(err); /* a write the server refused is not retried */
}

void sample_controller(kcr_controller_options *opts, const sample_config *cfg)
{
    static kcr_source owns;
    owns = (kcr_source){.resource = SAMPLE_DEPLOYMENTS, .kind = "Deployment", .ns = cfg->ns};
    *opts = (kcr_controller_options){
        .name = SAMPLE_NAME,
        .primary = {.resource = SAMPLE_FOOS, .kind = SAMPLE_FOO_KIND, .ns = cfg->ns},
        .owns = &owns,
        .n_owns = 1,
        .reconcile = reconcile,
        .user_data = (void *)cfg,
    };
}
