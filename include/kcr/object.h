/* kcr_object: an immutable, reference-counted Kubernetes object.
 *
 * Built once from JSON, then never changed, so the cache, event handlers and
 * workers share one copy without locks. Reference counts are atomic: ref and
 * unref are safe from any thread; every accessor is safe from any thread while
 * the caller holds a reference. Strings returned by accessors are borrowed:
 * valid while the caller holds a reference to the object. */
#ifndef KCR_OBJECT_H
#define KCR_OBJECT_H

#include <stddef.h>
#include <stdint.h>

#include "kcr/error.h"
#include "kcr/export.h"

typedef struct kcr_object kcr_object;

/* Parses one JSON object (a Kubernetes object with metadata.name). On success
 * *out holds a new reference the caller owns. `json` is copied from, not kept.
 * Errors: KCR_ERR_PARSE with kcr_last_error() saying what and where. */
KCR_API kcr_err kcr_object_parse(const char *json, size_t len, kcr_object **out);

/* Takes another reference; returns `obj` for chaining (NULL stays NULL). */
KCR_API kcr_object *kcr_object_ref(const kcr_object *obj);

/* Drops a reference; the last one frees the object. NULL is ignored. */
KCR_API void kcr_object_unref(const kcr_object *obj);

/* metadata fields; "" when absent (never NULL). Borrowed. */
KCR_API const char *kcr_object_api_version(const kcr_object *obj);
KCR_API const char *kcr_object_kind(const kcr_object *obj);
KCR_API const char *kcr_object_namespace(const kcr_object *obj);
KCR_API const char *kcr_object_name(const kcr_object *obj);
KCR_API const char *kcr_object_uid(const kcr_object *obj);
KCR_API const char *kcr_object_resource_version(const kcr_object *obj);

/* metadata.generation, or 0 when absent. */
KCR_API int64_t kcr_object_generation(const kcr_object *obj);

/* Serializes to compact JSON. On success *out is a NUL-terminated malloc'd
 * string the caller frees, *len its length (len may be NULL). */
KCR_API kcr_err kcr_object_to_json(const kcr_object *obj, char **out, size_t *len);

#endif
