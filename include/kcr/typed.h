/* kcr/typed.h: the run-time support of the typed accessors that kcr-gen
 * writes (docs/types.md). Generated code calls these; users meet three
 * things here: kcr_field (what a getter found), kcr_int_or_string, and
 * kcr_violations (what a generated validate function reports).
 *
 * Reading is zero-copy: a generated view wraps a kcr_value of an immutable
 * object and strings are borrowed for as long as the caller holds a
 * reference to that object. Writing goes through a kcr_object_edit: a
 * generated edit view is a kcr_typed_at (the edit and a path in it) passed
 * by value. Thread-safety: views are plain values; reading is safe from any
 * thread, an edit view is used by the thread that owns its edit. */
#ifndef KCR_TYPED_H
#define KCR_TYPED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" { /* also around kcr's older headers, until each has its own */
#endif

#include "kcr/error.h"
#include "kcr/export.h"
#include "kcr/object.h"
#include "kcr/quantity.h"

/* What a generated getter found. Only KCR_FIELD_SET fills *out; compare
 * with KCR_FIELD_SET (a plain truth test would also accept WRONG_TYPE). A
 * JSON null reads as ABSENT, as a nil pointer does in Go. */
typedef enum kcr_field {
    KCR_FIELD_ABSENT = 0,    /* missing or null; *out untouched */
    KCR_FIELD_SET = 1,       /* present with the schema's type; *out filled */
    KCR_FIELD_WRONG_TYPE = 2 /* present with another type; *out untouched */
} kcr_field;

/* An x-kubernetes-int-or-string value: an integer or a borrowed string. */
typedef struct kcr_int_or_string {
    bool is_string;
    int64_t int_value;       /* when !is_string */
    const char *string_value; /* when is_string; borrowed like every string */
} kcr_int_or_string;

/* ---- Reading (generated getters are one call each) ----------------------- */

/* Member `key` of object value v (ABSENT when v is not an object). */
KCR_API kcr_value kcr_typed_member(kcr_value v, const char *key);
/* Typed reads of a value; ABSENT/null gives KCR_FIELD_ABSENT. Strings are
 * borrowed from v's object. An integer getter accepts only integers that fit
 * its type (int32 fields: [-2^31, 2^31)); a number getter accepts integers
 * and floats. */
KCR_API kcr_field kcr_typed_string(kcr_value v, const char **out);
KCR_API kcr_field kcr_typed_int64(kcr_value v, int64_t *out);
KCR_API kcr_field kcr_typed_int32(kcr_value v, int32_t *out);
KCR_API kcr_field kcr_typed_bool(kcr_value v, bool *out);
KCR_API kcr_field kcr_typed_number(kcr_value v, double *out);
KCR_API kcr_field kcr_typed_int_or_string(kcr_value v, kcr_int_or_string *out);
/* A resource quantity, from a string or a number (kcr_quantity_parse_json);
 * text that is not a quantity is KCR_FIELD_WRONG_TYPE. */
KCR_API kcr_field kcr_typed_quantity(kcr_value v, kcr_quantity *out);
/* Index of string v in names[0..n) (KCR_FIELD_SET), n when it is a string
 * outside the list (still SET: servers add values), else ABSENT/WRONG_TYPE. */
KCR_API kcr_field kcr_typed_enum(kcr_value v, const char *const *names, size_t n, size_t *out);
/* Entries of an array or object value (0 for anything else). */
KCR_API size_t kcr_typed_len(kcr_value v);
/* Element i of an array value; ABSENT when out of range or not an array. */
KCR_API kcr_value kcr_typed_item(kcr_value v, size_t i);
/* Entry i of an object value; *key (key may be NULL) gets its borrowed key,
 * NULL when out of range. */
KCR_API kcr_value kcr_typed_entry(kcr_value v, size_t i, const char **key);

/* ---- Writing -------------------------------------------------------------- */

/* Longest path an edit view can hold, in bytes (quoted keys included). */
#define KCR_TYPED_PATH_MAX 480

/* An edit view: an edit and a path in it (kcr_object_lookup's syntax).
 * Passed by value; `err` is sticky: a view made from a failed step (a path
 * too long, an append that failed) carries the error and every set through
 * it returns that error without touching the edit. */
typedef struct kcr_typed_at {
    kcr_object_edit *edit; /* borrowed */
    kcr_err err;
    uint16_t len; /* bytes of path used */
    char path[KCR_TYPED_PATH_MAX];
} kcr_typed_at;

/* The root of an edit (an empty path). A NULL edit gives a view whose sets
 * fail with KCR_ERR_INVALID. */
KCR_API kcr_typed_at kcr_typed_at_root(kcr_object_edit *edit);
/* `at` with `.key` (or `["key"]` when the key needs quoting) appended. */
KCR_API kcr_typed_at kcr_typed_at_key(const kcr_typed_at *at, const char *key);
/* `at` with `[i]` appended (the element must exist when it is set). */
KCR_API kcr_typed_at kcr_typed_at_index(const kcr_typed_at *at, size_t i);
/* Appends an empty object to the array at.key (created when absent) and
 * returns the view of the new element (carrying the error on failure). */
KCR_API kcr_typed_at kcr_typed_append_object(const kcr_typed_at *at, const char *key);

/* Sets at.key (key NULL: at itself). Strings are copied. */
KCR_API kcr_err kcr_typed_set_string(const kcr_typed_at *at, const char *key, const char *v);
KCR_API kcr_err kcr_typed_set_int(const kcr_typed_at *at, const char *key, int64_t v);
KCR_API kcr_err kcr_typed_set_bool(const kcr_typed_at *at, const char *key, bool v);
KCR_API kcr_err kcr_typed_set_number(const kcr_typed_at *at, const char *key, double v);
KCR_API kcr_err kcr_typed_set_int_or_string(const kcr_typed_at *at, const char *key,
                                            kcr_int_or_string v);
/* Writes q's canonical text (kcr_quantity_to_string: "500m", "1536Mi"). */
KCR_API kcr_err kcr_typed_set_quantity(const kcr_typed_at *at, const char *key, kcr_quantity q);
/* Parses text as a quantity (KCR_ERR_PARSE when it is not one, nothing
 * written) and writes its canonical text. */
KCR_API kcr_err kcr_typed_set_quantity_text(const kcr_typed_at *at, const char *key,
                                            const char *text);
/* Copies value v (of any object, borrowed for the call) to at.key. */
KCR_API kcr_err kcr_typed_set_value(const kcr_typed_at *at, const char *key, kcr_value v);
/* Removes at.key; KCR_OK when it was absent. */
KCR_API kcr_err kcr_typed_delete(const kcr_typed_at *at, const char *key);
/* Appends a string / integer / boolean to the array at.key (created when
 * absent). */
KCR_API kcr_err kcr_typed_append_string(const kcr_typed_at *at, const char *key, const char *v);
KCR_API kcr_err kcr_typed_append_int(const kcr_typed_at *at, const char *key, int64_t v);
/* The view of entry `mkey` of the map at.key. */
KCR_API kcr_typed_at kcr_typed_at_entry(const kcr_typed_at *at, const char *key,
                                        const char *mkey);

/* ---- Schemas: validation and defaults ------------------------------------ */

/* A schema embedded in generated code: JSON text in chunks (compilers need
 * not accept long string literals), parsed once on first use (thread-safe).
 * Generated code defines these; treat the members as private. */
typedef struct kcr_schema {
    const char *const *chunks; /* NULL-terminated */
    const char *name;          /* for messages: "Foo.samplecontroller.k8s.io" */
    void *parsed;              /* private, atomically set once */
} kcr_schema;

/* One violation: the field path as the apiserver prints it
 * ("spec.containers[0].name") and what is wrong ("Required value"). */
typedef struct kcr_violation {
    char *field;
    char *detail;
} kcr_violation;

/* Every violation found, in document order; free with kcr_violations_free. */
typedef struct kcr_violations {
    kcr_violation *items;
    size_t n;
} kcr_violations;

/* Frees the entries (not the struct itself) and zeroes it. NULL is ignored. */
KCR_API void kcr_violations_free(kcr_violations *v);

/* Validates v against the schema component `type` of `schema` (NULL: the
 * document itself is the schema, as for a CRD version). KCR_OK when valid;
 * KCR_ERR_INVALID with kcr_last_error() holding every violation in the
 * apiserver's words ("Foo.samplecontroller.k8s.io \"x\" is invalid:
 * spec.replicas: Invalid value: 11: spec.replicas in body should be less
 * than or equal to 10"). out (may be NULL) receives the violations; the
 * caller frees them. KCR_ERR_NOMEM/KCR_ERR_PARSE for a broken schema. */
KCR_API kcr_err kcr_schema_validate(kcr_schema *schema, const char *type, kcr_value v,
                                    kcr_violations *out);

/* Applies the schema's defaults to the edit, as the apiserver does: a field
 * with a default is set when its parent object exists and the field is
 * absent (or null and not nullable); arrays and maps are walked. */
KCR_API kcr_err kcr_schema_default(kcr_schema *schema, const char *type, kcr_object_edit *edit);

#ifdef __cplusplus
}
#endif

#endif
