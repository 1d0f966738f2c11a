/* The ConfigMap-mirror controller: declaration and reconcile (see mirror.h). */
#include <stdio.h>
#include <string.h>

#include "kcr/types/core_v1.h"
#include "mirror.h"

static const kcr_resource CM = {"", "v1", "configmaps"};

/* The copy we want into *out: data of `src` (copied value to value, no JSON
 * text), controlled by `src`. */
static kcr_err desired(const kcr_object *src, const char *name, kcr_object **out)
{
    const kcr_ctrlutil_owner_options owner = {.api_version = "v1", .kind = "ConfigMap"};
    kcr_value data = kcr_object_get(src, "data");
    kcr_object_edit *e;
    kcr_err err = kcr_core_v1_ConfigMap_new(NULL, &e);
    if (err != KCR_OK)
        return err;
    kcr_core_v1_ConfigMapEdit cm = kcr_core_v1_ConfigMap_edit(e);
    kcr_meta_v1_ObjectMetaEdit meta = kcr_core_v1_ConfigMapEdit_metadata(cm);
    kcr_meta_v1_ObjectMetaEdit_set_name(meta, name);
    kcr_meta_v1_ObjectMetaEdit_set_namespace(meta, kcr_object_namespace(src));
    kcr_ctrlutil_set_controller_reference_edit(src, e, &owner);
    if (kcr_value_get_type(data) != KCR_VALUE_ABSENT)
        kcr_core_v1_ConfigMapEdit_set_data_value(cm, data);
    err = kcr_object_edit_freeze(e, out); /* the edit's first error, if any */
    kcr_object_edit_free(e);
    return err;
}

static kcr_result reconcile(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    (void)ud;
    kcr_object *src = kcr_ctx_get_primary(ctx);
    if (!src) /* deleted: the garbage collector removes the copy */
        return KCR_DONE;
    char name[300];
    snprintf(name, sizeof name, "%s-mirror", req->name);
    kcr_object *copy = kcr_lister_get(kcr_ctx_cache(ctx, &CM), req->ns, name);
    kcr_owner_ref ref;
    bool in_sync = copy && kcr_object_controller_ref(copy, &ref) &&
                   strcmp(ref.uid, kcr_object_uid(src)) == 0 &&
                   kcr_value_equal(kcr_object_get(copy, "data"), kcr_object_get(src, "data"));
    kcr_result res = KCR_DONE;
    kcr_object *want = NULL;
    if (!in_sync) {
        kcr_err err = desired(src, name, &want);
        if (err == KCR_OK)
            err = kcr_client_patch(kcr_ctx_client(ctx),
                                   &(kcr_request){.resource = &CM,
                                                  .object = want,
                                                  .patch_type = KCR_PATCH_APPLY,
                                                  .field_manager = "configmap-mirror",
                                                  .force = true},
                                   NULL);
        if (err == KCR_OK)
            kcr_ctx_eventf(ctx, src, KCR_EVENT_NORMAL, "Mirrored", "copied to %s", name);
        else /* the worker logs this message with the error */
            res = KCR_RETRY(kcr_set_error(err, "mirroring to %s: %s", name, kcr_last_error()));
    }
    kcr_object_unref(want);
    kcr_object_unref(copy);
    kcr_object_unref(src);
    return res;
}

void mirror_controller(kcr_controller_options *opts, const char *ns)
{
    static kcr_source owns;
    owns = (kcr_source){.resource = CM, .ns = ns};
    *opts = (kcr_controller_options){
        .name = "configmap-mirror",
        .primary = {.resource = CM,
                    .kind = "ConfigMap",
                    .ns = ns,
                    .predicate = kcr_predicate_label_selector("mirror=true")},
        .owns = &owns,
        .n_owns = 1,
        .reconcile = reconcile,
    };
}
