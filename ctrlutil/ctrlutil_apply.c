/* Server-side apply of an object or of JSON text. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kcr/controllerutil.h"

kcr_err kcr_ctrlutil_apply(kcr_client *c, const kcr_resource *res, const char *ns,
                           const kcr_object *obj, const char *field_manager, bool force,
                           kcr_object **out, kcr_status *status)
{
    if (out)
        *out = NULL;
    if (status)
        kcr_status_clear(status);
    if (!c || !res || !obj)
        return kcr__fail(KCR_ERR_INVALID, "kcr_ctrlutil_apply: NULL argument");
    if (!field_manager || !*field_manager)
        return kcr__fail(KCR_ERR_INVALID, "server-side apply needs a field manager");
    const char *name = kcr_object_name(obj), *obj_ns = kcr_object_namespace(obj);
    if (!*kcr_object_api_version(obj) || !*kcr_object_kind(obj))
        return kcr__fail(KCR_ERR_INVALID,
                         "the applied configuration of %s needs apiVersion and kind", name);
    if (kcr_value_get_type(kcr_object_get(obj, "metadata.managedFields")) != KCR_VALUE_ABSENT)
        return kcr__fail(KCR_ERR_INVALID,
                         "the applied configuration of %s carries metadata.managedFields (an "
                         "object read from the server?): apply only the fields you own",
                         name);
    if (ns && *obj_ns && strcmp(ns, obj_ns) != 0)
        return kcr__fail(KCR_ERR_INVALID, "apply of %s: namespace %s given, the object says %s",
                         name, ns, obj_ns);
    char *json = NULL;
    size_t len = 0;
    kcr_err err = kcr_object_to_json(obj, &json, &len);
    if (err != KCR_OK)
        return err;
    err = kcr_client_patch(c,
                           &(kcr_request){.resource = res,
                                          .ns = ns ? ns : obj_ns,
                                          .name = name,
                                          .patch_type = KCR_PATCH_APPLY,
                                          .body = json,
                                          .body_len = len,
                                          .field_manager = field_manager,
                                          .force = force,
                                          .status = status},
                           out);
    free(json);
    return err;
}

kcr_err kcr_ctrlutil_apply_json(kcr_client *c, const kcr_resource *res, const char *ns,
                                const char *json, size_t len, const char *field_manager, bool force,
                                kcr_object **out, kcr_status *status)
{
    if (out)
        *out = NULL;
    if (status)
        kcr_status_clear(status);
    if (!json)
        return kcr__fail(KCR_ERR_INVALID, "kcr_ctrlutil_apply_json: NULL JSON");
    kcr_object *obj = NULL;
    kcr_err err = kcr_object_parse(json, len ? len : strlen(json), &obj);
    if (err != KCR_OK)
        return err;
    err = kcr_ctrlutil_apply(c, res, ns, obj, field_manager, force, out, status);
    kcr_object_unref(obj);
    return err;
}
