/* Internal: small pieces shared by the controller helpers (controllerutil.h):
 * JSON values for patch bodies (built in a core/buf.h string), and retry
 * bookkeeping. */
#ifndef KCR_CTRLUTIL_INTERNAL_H
#define KCR_CTRLUTIL_INTERNAL_H

#include "core/buf.h"
#include "kcr/controllerutil.h"

/* Appends a value's compact JSON ("null" for ABSENT) to a request body;
 * a failure sets b->oom. */
void kcr__ctrlutil_json_value(kcr__buf *b, kcr_value v);

/* max_retries as the public functions take it: 0 is the default, < 0 none. */
int kcr__ctrlutil_retries(int max_retries);

#endif
