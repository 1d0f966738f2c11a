/* kcr_object: an immutable, reference-counted Kubernetes object.
 *
 * Built once from JSON, then never changed, so the cache, event handlers and
 * workers share one copy without locks. Reference counts are atomic: ref and
 * unref are safe from any thread; every accessor is safe from any thread while
 * the caller holds a reference. Strings returned by accessors are borrowed:
 * valid while the caller holds a reference to the object. */
#ifndef KCR_OBJECT_H
#define KCR_OBJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcr/error.h"
#include "kcr/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kcr_object kcr_object;

/* Parses one JSON object (a Kubernetes object with metadata.name) of `len`
 * bytes; len 0 means `json` is NUL-terminated (strlen), as in the client
 * calls. On success *out holds a new reference the caller owns. `json` is
 * copied from, not kept. Errors: KCR_ERR_INVALID (NULL json or out),
 * KCR_ERR_PARSE with kcr_last_error() saying what and where (an empty
 * document too). */
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

/* ---- Typed value views --------------------------------------------------
 * A kcr_value is a borrowed view of one JSON value inside an object: valid
 * while the caller holds a reference to that object. It is a small struct
 * passed by value; a zero kcr_value (or one that names nothing) is ABSENT. */

typedef enum kcr_value_type {
    KCR_VALUE_ABSENT = 0, /* no such value (missing key, bad index or path) */
    KCR_VALUE_NULL = 1,
    KCR_VALUE_BOOL = 2,
    KCR_VALUE_INT = 3,    /* an integer that fits int64 exactly */
    KCR_VALUE_FLOAT = 4,  /* any other number; its original text is kept */
    KCR_VALUE_STRING = 5,
    KCR_VALUE_ARRAY = 6,
    KCR_VALUE_OBJECT = 7
} kcr_value_type;

typedef struct kcr_value {
    const kcr_object *obj; /* borrowed; NULL for ABSENT */
    uint32_t ref;          /* internal */
} kcr_value;

/* The top-level JSON object. */
KCR_API kcr_value kcr_object_root(const kcr_object *obj);

/* Looks a path up. Syntax: keys separated by '.', array indexes in brackets,
 * and keys with any characters (dots, slashes...) as a quoted bracket with
 * \" and \\ escapes:
 *   spec.replicas   status.conditions[0].type
 *   metadata.labels["app.kubernetes.io/name"]
 * An empty path is the root. KCR_OK with *out set; KCR_ERR_NOT_FOUND when the
 * path names nothing (*out ABSENT); KCR_ERR_INVALID for a malformed path. */
KCR_API kcr_err kcr_object_lookup(const kcr_object *obj, const char *path, kcr_value *out);

/* kcr_object_lookup without the error: ABSENT when missing or malformed. */
KCR_API kcr_value kcr_object_get(const kcr_object *obj, const char *path);

/* The same path lookup relative to a value. */
KCR_API kcr_value kcr_value_get(kcr_value v, const char *path);

KCR_API kcr_value_type kcr_value_get_type(kcr_value v);

/* false unless v is a BOOL true. */
KCR_API bool kcr_value_bool(kcr_value v);

/* The integer of an INT value (0 otherwise). */
KCR_API int64_t kcr_value_int(kcr_value v);

/* The number of an INT or FLOAT value as a double (0 otherwise). */
KCR_API double kcr_value_float(kcr_value v);

/* A NUL-terminated borrowed string (a STRING's text, or a FLOAT's original
 * number text), or NULL for other types. *len (may be NULL) gets its length;
 * strings may contain NUL bytes (from \u0000), so prefer the length. */
KCR_API const char *kcr_value_string(kcr_value v, size_t *len);

/* Entries of an ARRAY or OBJECT, bytes of a STRING, else 0. */
KCR_API size_t kcr_value_len(kcr_value v);

/* Element i of an ARRAY (ABSENT when out of range). */
KCR_API kcr_value kcr_value_at(kcr_value v, size_t i);

/* Member `key` of an OBJECT (ABSENT when missing). */
KCR_API kcr_value kcr_value_member(kcr_value v, const char *key);

/* Entry i of an OBJECT, in document order: *key (NUL-terminated, borrowed)
 * and *key_len (may be NULL) get its key; returns its value (ABSENT when out
 * of range, with *key set to NULL). */
KCR_API kcr_value kcr_value_entry(kcr_value v, size_t i, const char **key, size_t *key_len);

/* Deep equality of two values (possibly of different objects). Numbers
 * compare by value when both are INT, else by their text. */
KCR_API bool kcr_value_equal(kcr_value a, kcr_value b);

/* Serializes a value to compact JSON: *out is a malloc'd NUL-terminated
 * string the caller frees, *len (may be NULL) its length. */
KCR_API kcr_err kcr_value_to_json(kcr_value v, char **out, size_t *len);

/* ---- Metadata accessors (all borrowed, thread-safe) ---------------------- */

/* Value of label `key`, or NULL when the object has no such label. */
KCR_API const char *kcr_object_label(const kcr_object *obj, const char *key);

/* metadata.labels as an OBJECT value (ABSENT when none): iterate it with
 * kcr_value_len / kcr_value_entry. */
KCR_API kcr_value kcr_object_labels(const kcr_object *obj);

/* Value of annotation `key`, or NULL when absent. */
KCR_API const char *kcr_object_annotation(const kcr_object *obj, const char *key);

/* metadata.annotations as an OBJECT value (ABSENT when none). */
KCR_API kcr_value kcr_object_annotations(const kcr_object *obj);

/* One metadata.ownerReferences entry; strings borrowed ("" when absent). */
typedef struct kcr_owner_ref {
    const char *api_version;
    const char *kind;
    const char *name;
    const char *uid;
    bool controller;
    bool block_owner_deletion;
} kcr_owner_ref;

/* Number of metadata.ownerReferences entries. Thread-safe. */
KCR_API size_t kcr_object_owner_ref_count(const kcr_object *obj);

/* Fills *out with owner reference i; false when out of range. */
KCR_API bool kcr_object_owner_ref(const kcr_object *obj, size_t i, kcr_owner_ref *out);

/* Fills *out with the owner reference that has controller=true; false when
 * there is none. */
KCR_API bool kcr_object_controller_ref(const kcr_object *obj, kcr_owner_ref *out);

KCR_API size_t kcr_object_finalizer_count(const kcr_object *obj);

/* Finalizer i, or NULL when out of range. */
KCR_API const char *kcr_object_finalizer(const kcr_object *obj, size_t i);

KCR_API bool kcr_object_has_finalizer(const kcr_object *obj, const char *finalizer);

/* True when metadata.deletionTimestamp is set (the object is being deleted). */
KCR_API bool kcr_object_is_deleting(const kcr_object *obj);

/* metadata.deletionTimestamp's text, "" when absent. */
KCR_API const char *kcr_object_deletion_timestamp(const kcr_object *obj);

/* Bytes the object occupies in memory (its one allocation), for statistics. */
KCR_API size_t kcr_object_memory_size(const kcr_object *obj);

/* Parses like kcr_object_parse (len 0: strlen) but also accepts objects
 * without metadata.name (Status, List metadata, watch bookmarks, patches). */
KCR_API kcr_err kcr_object_parse_any(const char *json, size_t len, kcr_object **out);

/* A JSON object value (an item of a list, request.object of a review) as an
 * object of its own, into *out (reference 1): v's document is copied whole,
 * with no parsing, so the copy's kcr_object_memory_size is the document's.
 * v is borrowed. KCR_ERR_INVALID when v is not a JSON object. Thread-safe. */
KCR_API kcr_err kcr_object_from_value(kcr_value v, kcr_object **out);

/* ---- Copy-on-write editing ------------------------------------------------
 * An editor holds a private mutable copy of an object; the base object is
 * never changed. kcr_object_edit_freeze builds a new immutable object from
 * the current state (the editor stays usable). One editor is used by one
 * thread at a time; different editors are independent.
 * Setting a path creates missing intermediate objects; array indexes must
 * exist. Paths use the syntax of kcr_object_lookup. Strings are copied and
 * must be valid UTF-8 (KCR_ERR_INVALID otherwise).
 *
 * An editor keeps its first error: once an edit fails, every later edit on
 * it is a no-op returning that error, and kcr_object_edit_freeze (and
 * _snapshot) return it instead of an object, with kcr_last_error() naming
 * the failing call and its path or key ("kcr_object_edit_set_int
 * \"spec.items[3].x\": path ... index 3 out of range"). So an object is
 * built as a plain sequence of calls with one check at the end:
 *
 *     kcr_object_edit_set_string(e, "spec.image", image);
 *     kcr_object_edit_set_int(e, "spec.replicas", n);
 *     kcr_object_edit_set_label(e, "app", name);
 *     if ((err = kcr_object_edit_freeze(e, &obj)) != KCR_OK) ...
 *
 * The editor is then good only for kcr_object_edit_free. */

typedef struct kcr_object_edit kcr_object_edit;

/* Starts editing a copy of `base` (borrowed for the call; NULL: an empty
 * object): *out (NULL on failure) is the caller's, freed with
 * kcr_object_edit_free. KCR_ERR_INVALID for a NULL out, KCR_ERR_NOMEM. No
 * options: what to edit is all there is. Thread-safe (base is immutable). */
KCR_API kcr_err kcr_object_edit_new(const kcr_object *base, kcr_object_edit **out);
/* Frees the editor (never the objects it was made from or froze). NULL is
 * ignored. Not concurrently with another call on the same editor. */
KCR_API void kcr_object_edit_free(kcr_object_edit *e);

KCR_API kcr_err kcr_object_edit_set_string(kcr_object_edit *e, const char *path, const char *value);
KCR_API kcr_err kcr_object_edit_set_int(kcr_object_edit *e, const char *path, int64_t value);
KCR_API kcr_err kcr_object_edit_set_bool(kcr_object_edit *e, const char *path, bool value);
KCR_API kcr_err kcr_object_edit_set_null(kcr_object_edit *e, const char *path);

/* Sets `path` to any JSON value given as text (copied; len 0: strlen). */
KCR_API kcr_err kcr_object_edit_set_json(kcr_object_edit *e, const char *path, const char *json,
                                         size_t len);

/* Sets `path` to a copy of `value`, a value of another (immutable) object:
 * the subtree is copied node by node, never through JSON text. `value` is
 * borrowed for the call. KCR_ERR_INVALID for an ABSENT value. */
KCR_API kcr_err kcr_object_edit_set_value(kcr_object_edit *e, const char *path, kcr_value value);

/* Appends a JSON value given as text (copied; len 0: strlen) to the array at
 * `path`, which is created when absent or null; *index (may be NULL) gets the
 * new element's position. KCR_ERR_INVALID when `path` holds a non-array. */
KCR_API kcr_err kcr_object_edit_append_json(kcr_object_edit *e, const char *path, const char *json,
                                            size_t len, size_t *index);

/* Removes `path`; KCR_OK when it was already absent. */
KCR_API kcr_err kcr_object_edit_delete(kcr_object_edit *e, const char *path);

KCR_API kcr_err kcr_object_edit_set_label(kcr_object_edit *e, const char *key, const char *value);
KCR_API kcr_err kcr_object_edit_delete_label(kcr_object_edit *e, const char *key);
KCR_API kcr_err kcr_object_edit_set_annotation(kcr_object_edit *e, const char *key,
                                               const char *value);
KCR_API kcr_err kcr_object_edit_delete_annotation(kcr_object_edit *e, const char *key);

/* Adds a finalizer unless present. */
KCR_API kcr_err kcr_object_edit_add_finalizer(kcr_object_edit *e, const char *finalizer);
/* Removes every occurrence of a finalizer; KCR_OK when it was absent. */
KCR_API kcr_err kcr_object_edit_remove_finalizer(kcr_object_edit *e, const char *finalizer);

/* Adds an owner reference, replacing one with the same uid. NULL strings are
 * left out; controller/block_owner_deletion are written only when true. */
KCR_API kcr_err kcr_object_edit_set_owner_ref(kcr_object_edit *e, const kcr_owner_ref *ref);
/* Removes the owner reference with this uid; KCR_OK when absent. */
KCR_API kcr_err kcr_object_edit_remove_owner_ref(kcr_object_edit *e, const char *uid);

/* Applies an RFC 7386 JSON merge patch (text, copied; len 0: strlen) to the
 * edited state. */
KCR_API kcr_err kcr_object_edit_merge_patch(kcr_object_edit *e, const char *patch, size_t len);

/* Applies an RFC 6902 JSON Patch (text, copied; len 0: strlen) to the
 * edited state, all or nothing: when an operation fails the tree is left as
 * it was (and the failure is the editor's first error). Errors as
 * kcr_object_apply_json_patch's. */
KCR_API kcr_err kcr_object_edit_json_patch(kcr_object_edit *e, const char *patch, size_t len);

/* Like kcr_object_edit_freeze, but also accepts a state without
 * metadata.name: a snapshot to read (kcr_object_get ...) while editing.
 * *out is a new reference; the editor is unchanged. The editor's first
 * error, if an edit failed. */
KCR_API kcr_err kcr_object_edit_snapshot(kcr_object_edit *e, kcr_object **out);

/* Builds a new object from the edited state: *out is a new reference.
 * The editor's first error, if an edit failed (*out NULL); KCR_ERR_PARSE
 * when the result has no metadata.name. */
KCR_API kcr_err kcr_object_edit_freeze(kcr_object_edit *e, kcr_object **out);

/* The editor's first error: KCR_OK while every edit succeeded. Does not
 * change kcr_last_error() (KCR_ERR_INVALID, with a detail, for NULL). */
KCR_API kcr_err kcr_object_edit_error(const kcr_object_edit *e);

/* ---- JSON merge patch (RFC 7386) ----------------------------------------- */

/* Computes the merge patch that turns `from` into `to` (both borrowed): a
 * compact JSON object text in *out (malloc'd, caller frees; *len may be
 * NULL), "{}" when they are equal. Removed keys appear as null; arrays are
 * replaced whole. (RFC 7386 cannot set a value TO null: such a change is
 * emitted as a removal.) */
KCR_API kcr_err kcr_object_merge_patch(const kcr_object *from, const kcr_object *to, char **out,
                                       size_t *len);

/* Applies a merge patch (len 0: strlen) to `obj` (borrowed): *out is a new object.
 * KCR_ERR_PARSE for a malformed patch or a result without metadata.name. */
KCR_API kcr_err kcr_object_apply_merge_patch(const kcr_object *obj, const char *patch, size_t len,
                                             kcr_object **out);

/* ---- JSON Patch (RFC 6902) ---------------------------------------------- */

/* Applies a JSON Patch (text, copied; len 0: strlen: an array of add /
 * remove / replace / move / copy / test operations; JSON Pointer paths with
 * ~0 and ~1 escapes, "-" appends to an array) to `obj` (borrowed; never
 * changed): on success *out is a new object. All or nothing: on any error
 * *out is NULL. Like the Kubernetes apiserver, `test` with value null also
 * passes for a member missing from an existing object. Thread-safe. Errors, with kcr_last_error() naming the
 * operation's index, op and path:
 *   KCR_ERR_PARSE      not a JSON Patch document (bad JSON, not an array, an
 *                      op without "op"/"path"/"value"/"from", unknown op, a
 *                      pointer not starting with '/', a bad '~' escape), or a
 *                      result without metadata.name
 *   KCR_ERR_CONFLICT   a `test` failed (the message says at which path)
 *   KCR_ERR_NOT_FOUND  a path or `from` names nothing (missing member,
 *                      missing parent, array index out of range or malformed)
 *   KCR_ERR_INVALID    an impossible operation (move into its own child,
 *                      remove the whole document, a path through a scalar,
 *                      a result that is not an object)
 *   KCR_ERR_TOO_LARGE  `copy` operations of one patch copy over 2^19 values,
 *                      or the document would nest deeper than 256 levels */
KCR_API kcr_err kcr_object_apply_json_patch(const kcr_object *obj, const char *patch, size_t len,
                                            kcr_object **out);

/* Computes the RFC 6902 JSON Patch that turns `from` into `to` (both
 * borrowed): a compact JSON array in *out (malloc'd, caller frees; *len may
 * be NULL), "[]" when they are equal. Changed members give add / remove /
 * replace at their own path (JSON Pointer, ~0 ~1 escaped); arrays of equal
 * length are compared element by element, others are replaced whole.
 * Applying the result to `from` (kcr_object_apply_json_patch) yields `to`.
 * This is what a mutating admission webhook returns. Thread-safe. Errors:
 * KCR_ERR_INVALID (NULL argument), KCR_ERR_NOMEM, KCR_ERR_TOO_LARGE
 * (nesting deeper than 256 levels). */
KCR_API kcr_err kcr_object_json_patch_diff(const kcr_object *from, const kcr_object *to,
                                           char **out, size_t *len);

/* ---- Transforms ---------------------------------------------------------- */

/* A transform applied to each object before it is stored (e.g. by an
 * informer). `in` is borrowed; on KCR_OK *out holds a new reference (which
 * may be kcr_object_ref(in) when nothing changes). Called on the thread that
 * stores the object, with no kcr lock held; must be thread-safe. */
typedef kcr_err (*kcr_object_transform_fn)(const kcr_object *in, kcr_object **out,
                                           void *user_data);

/* Built-in transform: drops metadata.managedFields (often half an object's
 * bytes). user_data unused. */
KCR_API kcr_err kcr_object_strip_managed_fields(const kcr_object *in, kcr_object **out,
                                                void *user_data);

#ifdef __cplusplus
}
#endif

#endif
