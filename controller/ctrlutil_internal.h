/* Internal: small pieces shared by the controller helpers (controllerutil.h):
 * JSON values for patch bodies (built in a core/buf.h string), and retry
 * bookkeeping. */
#ifndef KCR_CONTROLLER_CTRLUTIL_INTERNAL_H
#define KCR_CONTROLLER_CTRLUTIL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "core/buf.h"
#include "kcr/controllerutil.h"

/* Appends a value's compact JSON ("null" for ABSENT) to a request body;
 * a failure sets b->oom. */
void kcr__ctrlutil_json_value(kcr__buf *b, kcr_value v);

/* Whether two values (of the current and the desired object) are equal as
 * the apiserver would store them: maps regardless of order, numbers by
 * value, resource quantities by value where kcr__ctrlutil_quantity_path
 * says a built-in type holds one. root_key: the key a and b sit under
 * ("status"), NULL for whole objects. */
bool kcr__ctrlutil_equal(kcr_value a, kcr_value b, const char *root_key);

/* Whether the value at this path (keys from the object's root; "[]" for an
 * array element) holds a resource.Quantity in a built-in type:
 * *.resources.{requests,limits}.*, {spec,status}.{hard,used}.* (ResourceQuota),
 * {spec,status}.{capacity,allocatable,allocatedResources}.* (Node, PV, PVC),
 * *.overhead.*, spec.limits[].{max,min,default,defaultRequest,
 * maxLimitRequestRatio}.* (LimitRange), *.emptyDir.sizeLimit,
 * *.resourceFieldRef.divisor, and a top-level capacity or maximumVolumeSize
 * (CSIStorageCapacity). */
bool kcr__ctrlutil_quantity_path(const char *const *keys, size_t n);

/* max_retries as the public functions take it: 0 is the default, < 0 none. */
int kcr__ctrlutil_retries(int max_retries);

#endif
