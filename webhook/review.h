/* Internal to webhook/: decoding AdmissionReview and ConversionReview bodies
 * into kcr objects, and writing the answers. Pure functions of their input:
 * the unit tests and the fuzz target call them directly. */
#ifndef KCR_WEBHOOK_REVIEW_H
#define KCR_WEBHOOK_REVIEW_H

#include <stdbool.h>
#include <stddef.h>

#include <yajl/yajl_gen.h>

#include "kcr/webhook.h"

/* A decoded AdmissionReview: req's strings and values point into review and
 * the two objects, which the struct owns. */
struct kcr__wh_admission {
    kcr_object *review, *object, *old_object;
    const char *api_version; /* admission.k8s.io/v1 or v1beta1, echoed back */
    kcr_admission_request req;
};

/* Decodes body[0..len). KCR_ERR_PARSE with kcr_last_error() saying why (not
 * JSON, wrong apiVersion/kind, no request, no uid, unknown operation, an
 * object that is not a JSON object). out is zeroed first; free it with
 * kcr__wh_admission_free on success and failure alike. */
kcr_err kcr__wh_admission_decode(const char *body, size_t len, struct kcr__wh_admission *out);
void kcr__wh_admission_free(struct kcr__wh_admission *a);

/* A decoded ConversionReview: objects[i] owned. */
struct kcr__wh_conversion {
    kcr_object *review;
    const char *uid, *desired;
    kcr_object **objects;
    size_t n_objects;
};

kcr_err kcr__wh_conversion_decode(const char *body, size_t len, struct kcr__wh_conversion *out);
void kcr__wh_conversion_free(struct kcr__wh_conversion *c);

/* A copy of a value as an object of its own (a JSON object; no name needed). */
kcr_err kcr__wh_value_object(kcr_value v, const char *what, kcr_object **out);

/* A JSON text written by hand, for the admission answer: a few fixed
 * members around strings that need escaping, where a yajl generator costs
 * more than the rest of the answer. (core/buf.h's kcr__buf does the same
 * inside libkcr, but this library may call only libkcr's KCR_API symbols.) s is malloc'd, NUL-terminated; after an
 * allocation failed every append is a no-op and oom stays set. Owned by its
 * writer's thread. */
struct kcr__wh_text {
    char *s;
    size_t len, cap;
    bool oom;
};
/* Appends n bytes as they are. */
void kcr__wh_text_raw(struct kcr__wh_text *t, const char *s, size_t n);
/* Appends s as a quoted JSON string: '"', '\\' and control characters
 * escaped, other bytes (UTF-8) as they are. */
void kcr__wh_text_string(struct kcr__wh_text *t, const char *s);

/* yajl helpers: each returns false once the generator failed. */
bool kcr__wh_gen_str(yajl_gen g, const char *s);
bool kcr__wh_gen_kv(yajl_gen g, const char *key, const char *value);
/* Writes JSON text as it is (an object serialized elsewhere). */
bool kcr__wh_gen_raw(yajl_gen g, const char *json, size_t len);
/* Takes g's output into a malloc'd *out (freeing g). */
bool kcr__wh_gen_take(yajl_gen g, bool ok, char **out, size_t *len);

#endif
