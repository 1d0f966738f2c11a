/* Deletes with a typed propagation policy and preconditions. */
#include "core/abi.h"
#include "core/error.h"
#include "kcr/controllerutil.h"

static const char *policy_name(kcr_ctrlutil_propagation p)
{
    switch (p) {
    case KCR_CTRLUTIL_PROPAGATION_BACKGROUND:
        return "Background";
    case KCR_CTRLUTIL_PROPAGATION_FOREGROUND:
        return "Foreground";
    case KCR_CTRLUTIL_PROPAGATION_ORPHAN:
        return "Orphan";
    case KCR_CTRLUTIL_PROPAGATION_DEFAULT:
        break;
    }
    return NULL;
}

kcr_err (kcr_ctrlutil_delete)(size_t opts_size, kcr_client *c, const kcr_resource *res,
                              const char *ns, const char *name,
                              const kcr_ctrlutil_delete_options *opts, kcr_object **out,
                              kcr_status *status)
{
    KCR__ABI_OPTS(kcr_ctrlutil_delete_options, opts, opts_size);
    if (out)
        *out = NULL;
    kcr_ctrlutil_delete_options o = opts ? *opts : (kcr_ctrlutil_delete_options){0};
    if ((unsigned)o.propagation > KCR_CTRLUTIL_PROPAGATION_ORPHAN)
        return kcr__fail(KCR_ERR_INVALID, "delete of %s: unknown propagation policy %d",
                         name ? name : "(null)", (int)o.propagation);
    kcr_err err = kcr_client_delete(
        c,
        &(kcr_request){.resource = res,
                       .ns = ns,
                       .name = name,
                       .propagation_policy = policy_name(o.propagation),
                       .precondition_uid =
                           o.precondition_uid && *o.precondition_uid ? o.precondition_uid : NULL,
                       .precondition_resource_version =
                           o.precondition_resource_version && *o.precondition_resource_version
                               ? o.precondition_resource_version
                               : NULL,
                       .status = status},
        out);
    if (err == KCR_ERR_NOT_FOUND && o.ignore_not_found) {
        if (status)
            kcr_status_clear(status);
        kcr__clear_error();
        return KCR_OK;
    }
    return err;
}

kcr_err kcr_ctrlutil_delete_object(kcr_client *c, const kcr_resource *res, const kcr_object *obj,
                                   kcr_ctrlutil_propagation propagation, kcr_object **out,
                                   kcr_status *status)
{
    if (out)
        *out = NULL;
    if (!obj)
        return kcr__fail(KCR_ERR_INVALID, "kcr_ctrlutil_delete_object: NULL object");
    if (!*kcr_object_uid(obj))
        return kcr__fail(KCR_ERR_INVALID, "delete of %s: the object has no metadata.uid",
                         kcr_object_name(obj));
    kcr_ctrlutil_delete_options o = {
        .propagation = propagation,
        .precondition_uid = kcr_object_uid(obj),
        .ignore_not_found = true,
    };
    return kcr_ctrlutil_delete(c, res, kcr_object_namespace(obj), kcr_object_name(obj), &o, out,
                               status);
}
