/* The context a failed helper adds to kcr_last_error(): the verb, the kind
 * and the object, "create ResourceQuota team-a/team-quota: <message>". */
#include <string.h>

#include "core/error.h"
#include "ctrlutil/ctrlutil_internal.h"

kcr_err kcr__ctrlutil_context(kcr_err err, const char *verb, const kcr_object *obj,
                              const kcr_resource *res, const char *ns, const char *name)
{
    const char *kind = obj ? kcr_object_kind(obj) : "";
    if (!*kind || strcmp(kind, "PartialObjectMetadata") == 0)
        kind = res && res->resource ? res->resource : "object";
    ns = ns ? ns : "";
    name = name ? name : "";
    if (!*kcr_last_error())
        return kcr__fail(err, "%s %s %s%s%s: %s", verb, kind, ns, *ns ? "/" : "", name,
                         kcr_strerror(err));
    return kcr__refail(err, "%s %s %s%s%s: ", verb, kind, ns, *ns ? "/" : "", name);
}
