/* Internal: small pieces shared by the controller helpers (controllerutil.h):
 * JSON values for patch bodies (built in a core/buf.h string), retry
 * bookkeeping, and the context of an error. */
#ifndef KCR_CTRLUTIL_INTERNAL_H
#define KCR_CTRLUTIL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "core/buf.h"
#include "kcr/controllerutil.h"

/* Appends a value's compact JSON ("null" for ABSENT) to a request body;
 * a failure sets b->oom. */
void kcr__ctrlutil_json_value(kcr__buf *b, kcr_value v);

/* Whether two values (of the current and the desired object) are equal as
 * the apiserver would store them: maps regardless of order, arrays in
 * order, other values as JSON, resource quantities by value where kcr__ctrlutil_quantity_path
 * says a built-in type holds one. root_key: the key a and b sit under
 * ("status"), NULL for whole objects. */
bool kcr__ctrlutil_equal(kcr_value a, kcr_value b, const char *root_key);

/* What a built-in type holds at a path. */
typedef enum kcr__quantity_path {
    KCR__QPATH_NONE = 0,          /* not a quantity (as far as kcr knows) */
    KCR__QPATH_QUANTITY = 1,      /* a resource.Quantity, stored as parsed */
    KCR__QPATH_RESOURCE_LIST = 2  /* a value of a v1.ResourceList, which the apiserver's
                                     defaulting rounds up to milli-units */
} kcr__quantity_path;

/* What the value at this path (keys from the object's root; "[]" for an
 * array element) is in a built-in type. ResourceLists:
 * *.resources.{requests,limits}.*, {spec,status}.{hard,used}.* (ResourceQuota),
 * {spec,status}.{capacity,allocatable,allocatedResources}.* (Node, PV, PVC),
 * *.overhead.*, spec.limits[].{max,min,default,defaultRequest,
 * maxLimitRequestRatio}.* (LimitRange); single quantities:
 * *.emptyDir.sizeLimit, *.resourceFieldRef.divisor, and a top-level
 * capacity or maximumVolumeSize (CSIStorageCapacity). */
kcr__quantity_path kcr__ctrlutil_quantity_path(const char *const *keys, size_t n);

/* Prefixes kcr_last_error() (kcr_strerror(err) when it is empty) with what
 * failed: "<verb> <Kind> <ns>/<name>: ", the kind taken from `obj` (may be
 * NULL), else res->resource (a metadata-only object's kind,
 * PartialObjectMetadata, says nothing). Returns err. */
kcr_err kcr__ctrlutil_context(kcr_err err, const char *verb, const kcr_object *obj,
                              const kcr_resource *res, const char *ns, const char *name);

/* max_retries as the public functions take it: 0 is the default, < 0 none. */
int kcr__ctrlutil_retries(int max_retries);

#endif
