/* Server-side apply of a configuration given as an object or as JSON text. */
#include <stdlib.h>
#include <string.h>

#include "core/abi.h"
#include "core/error.h"
#include "ctrlutil/ctrlutil_internal.h"

/* Applies `obj`, the configuration (already parsed when given as text). */
static kcr_err apply_object(kcr_client *c, const kcr_ctrlutil_apply_options *o,
                            const kcr_object *obj, kcr_object **out)
{
    const char *name = kcr_object_name(obj), *obj_ns = kcr_object_namespace(obj);
    if (!*kcr_object_api_version(obj) || !*kcr_object_kind(obj))
        return kcr__fail(KCR_ERR_INVALID,
                         "the applied configuration of %s needs apiVersion and kind", name);
    if (kcr_value_get_type(kcr_object_get(obj, "metadata.managedFields")) != KCR_VALUE_ABSENT)
        return kcr__fail(KCR_ERR_INVALID,
                         "the applied configuration of %s carries metadata.managedFields (an "
                         "object read from the server?): apply only the fields you own",
                         name);
    if (o->ns && *obj_ns && strcmp(o->ns, obj_ns) != 0)
        return kcr__fail(KCR_ERR_INVALID, "apply of %s: namespace %s given, the object says %s",
                         name, o->ns, obj_ns);
    const char *ns = o->ns ? o->ns : obj_ns;
    char *json = NULL;
    size_t len = 0;
    kcr_err err = kcr_object_to_json(obj, &json, &len);
    if (err != KCR_OK)
        return err;
    err = kcr_client_patch(c,
                           &(kcr_request){.resource = o->resource,
                                          .ns = ns,
                                          .name = name,
                                          .patch_type = KCR_PATCH_APPLY,
                                          .body = json,
                                          .body_len = len,
                                          .field_manager = o->field_manager,
                                          .force = o->force,
                                          .status = o->status},
                           out);
    free(json);
    if (err != KCR_OK)
        err = kcr__ctrlutil_context(err, "apply", obj, o->resource, ns, name);
    return err;
}

kcr_err (kcr_ctrlutil_apply)(size_t opts_size, kcr_client *c,
                             const kcr_ctrlutil_apply_options *opts, kcr_object **out)
{
    if (out)
        *out = NULL;
    KCR__ABI_OPTS(kcr_ctrlutil_apply_options, opts, opts_size);
    if (opts->status)
        kcr_status_clear(opts->status);
    if (!c || !opts->resource)
        return kcr__fail(KCR_ERR_INVALID, "kcr_ctrlutil_apply: NULL client or no resource");
    if (!opts->field_manager || !*opts->field_manager)
        return kcr__fail(KCR_ERR_INVALID, "server-side apply needs a field manager");
    if (!opts->object == !opts->json)
        return kcr__fail(KCR_ERR_INVALID, "kcr_ctrlutil_apply: give the configuration as "
                                          "exactly one of object and json");
    if (opts->object)
        return apply_object(c, opts, opts->object, out);
    kcr_object *obj = NULL;
    kcr_err err =
        kcr_object_parse(opts->json, opts->json_len ? opts->json_len : strlen(opts->json), &obj);
    if (err != KCR_OK)
        return err;
    err = apply_object(c, opts, obj, out);
    kcr_object_unref(obj);
    return err;
}
