/* Deletes with a typed propagation policy and preconditions, by name or of
 * exactly one incarnation of an object. */
#include <string.h>

#include "core/abi.h"
#include "core/error.h"
#include "ctrlutil/ctrlutil_internal.h"

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

/* NULL or "" for unset. */
static const char *set_or_null(const char *s)
{
    return s && *s ? s : NULL;
}

/* o->ns, name and precondition_uid filled in from o->object, which they
 * must not contradict. */
static kcr_err target_of_object(kcr_ctrlutil_delete_options *o)
{
    const kcr_object *obj = o->object;
    const char *name = kcr_object_name(obj), *ns = kcr_object_namespace(obj),
               *uid = kcr_object_uid(obj);
    if (!*uid)
        return kcr__fail(KCR_ERR_INVALID, "delete of %s: the object has no metadata.uid", name);
    if ((o->name && strcmp(o->name, name) != 0) || (o->ns && strcmp(o->ns, ns) != 0) ||
        (set_or_null(o->precondition_uid) && strcmp(o->precondition_uid, uid) != 0))
        return kcr__fail(KCR_ERR_INVALID,
                         "delete of %s%s%s (uid %s): the options name another object (%s%s%s, "
                         "uid %s)",
                         ns, *ns ? "/" : "", name, uid, o->ns ? o->ns : "",
                         o->ns && *o->ns ? "/" : "", o->name ? o->name : name,
                         o->precondition_uid ? o->precondition_uid : uid);
    o->ns = ns;
    o->name = name;
    o->precondition_uid = uid;
    return KCR_OK;
}

kcr_err (kcr_ctrlutil_delete)(size_t opts_size, kcr_client *c,
                              const kcr_ctrlutil_delete_options *opts, kcr_object **out)
{
    if (out)
        *out = NULL;
    KCR__ABI_OPTS(kcr_ctrlutil_delete_options, opts, opts_size);
    kcr_ctrlutil_delete_options o = *opts;
    if (o.status)
        kcr_status_clear(o.status);
    if (!c || !o.resource)
        return kcr__fail(KCR_ERR_INVALID, "kcr_ctrlutil_delete: NULL client or no resource");
    if (!o.object && !o.name)
        return kcr__fail(KCR_ERR_INVALID, "kcr_ctrlutil_delete: the options name no object "
                                          "(name or object)");
    kcr_err err = o.object ? target_of_object(&o) : KCR_OK;
    if (err != KCR_OK)
        return err;
    if ((unsigned)o.propagation > KCR_CTRLUTIL_PROPAGATION_ORPHAN)
        return kcr__fail(KCR_ERR_INVALID, "delete of %s: unknown propagation policy %d", o.name,
                         (int)o.propagation);
    err = kcr_client_delete(c,
                            &(kcr_request){.resource = o.resource,
                                           .ns = o.ns,
                                           .name = o.name,
                                           .propagation_policy = policy_name(o.propagation),
                                           .precondition_uid = set_or_null(o.precondition_uid),
                                           .precondition_resource_version =
                                               set_or_null(o.precondition_resource_version),
                                           .status = o.status},
                            out);
    if (err == KCR_ERR_NOT_FOUND && o.ignore_not_found) {
        if (o.status)
            kcr_status_clear(o.status);
        kcr__clear_error();
        return KCR_OK;
    }
    if (err != KCR_OK)
        err = kcr__ctrlutil_context(err, "delete", o.object, o.resource, o.ns, o.name);
    return err;
}
