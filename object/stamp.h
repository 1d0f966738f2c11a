/* Internal: an object stamped with its type, as the items of a List are
 * typed after the List (client/decode.c for a real server's body, the fake's
 * list for its stored objects). No shared state: thread-safe. */
#ifndef KCR_OBJECT_STAMP_H
#define KCR_OBJECT_STAMP_H

#include "kcr/object.h"

/* A new object in *out: a copy of obj whose apiVersion and kind are set to
 * api_version and kind (an empty one leaves that field as it is). */
kcr_err kcr__object_stamp_type(const kcr_object *obj, const char *api_version, const char *kind,
                               kcr_object **out);

#endif
