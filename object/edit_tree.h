/* Internal: the mutable JSON tree behind kcr_object_edit.
 *
 * An editor (object/object_edit.c) converts its base object into this tree,
 * edits and patches (object_edit.c, json_patch.c) change it in place, and
 * freezing feeds it back through the object builder. A tree belongs to one
 * thread at a time. Functions that take a node "take ownership": on failure
 * they free it, so callers never clean up after them. */
#ifndef KCR_OBJECT_EDIT_TREE_H
#define KCR_OBJECT_EDIT_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcr/object.h"
#include "object/object_builder.h"

enum kcr__ntype {
    KCR__N_NULL,
    KCR__N_BOOL,
    KCR__N_INT,
    KCR__N_NUM,
    KCR__N_STR,
    KCR__N_ARR,
    KCR__N_MAP
};

struct kcr__node {
    enum kcr__ntype t;
    bool b;
    int64_t i;
    char *s; /* KCR__N_STR / KCR__N_NUM text, NUL-terminated */
    size_t slen;
    struct kcr__node **items; /* KCR__N_ARR / KCR__N_MAP values */
    char **keys;              /* KCR__N_MAP keys, NUL-terminated */
    size_t *klens;
    size_t n, cap;
};

struct kcr_object_edit {
    struct kcr__node *root;
    kcr_err first_error;   /* KCR_OK until an edit fails; then every edit is a no-op */
    char *first_error_msg; /* "<call> \"<path>\": <detail>" of that edit; NULL when out of
                              memory copying it */
};

/* The edits behind the public kcr_object_edit_* calls (object_edit_api.c
 * keeps an editor's first error around them). e is non-NULL. */
kcr_err kcr__edit_set_string(kcr_object_edit *e, const char *path, const char *value);
kcr_err kcr__edit_set_int(kcr_object_edit *e, const char *path, int64_t value);
kcr_err kcr__edit_set_bool(kcr_object_edit *e, const char *path, bool value);
kcr_err kcr__edit_set_null(kcr_object_edit *e, const char *path);
kcr_err kcr__edit_set_json(kcr_object_edit *e, const char *path, const char *json, size_t len);
kcr_err kcr__edit_set_value(kcr_object_edit *e, const char *path, kcr_value value);
kcr_err kcr__edit_delete(kcr_object_edit *e, const char *path);
kcr_err kcr__edit_append_json(kcr_object_edit *e, const char *path, const char *json, size_t len,
                              size_t *index);
kcr_err kcr__edit_set_label(kcr_object_edit *e, const char *key, const char *value);
kcr_err kcr__edit_delete_label(kcr_object_edit *e, const char *key);
kcr_err kcr__edit_set_annotation(kcr_object_edit *e, const char *key, const char *value);
kcr_err kcr__edit_delete_annotation(kcr_object_edit *e, const char *key);
kcr_err kcr__edit_add_finalizer(kcr_object_edit *e, const char *finalizer);
kcr_err kcr__edit_remove_finalizer(kcr_object_edit *e, const char *finalizer);
kcr_err kcr__edit_set_owner_ref(kcr_object_edit *e, const kcr_owner_ref *ref);
kcr_err kcr__edit_remove_owner_ref(kcr_object_edit *e, const char *uid);
kcr_err kcr__edit_merge_patch(kcr_object_edit *e, const char *patch, size_t len);
kcr_err kcr__edit_json_patch(kcr_object_edit *e, const char *patch, size_t len);
/* Builds the object (need_name: refuse one without metadata.name). */
kcr_err kcr__edit_freeze(kcr_object_edit *e, bool need_name, kcr_object **out);

void kcr__node_free(struct kcr__node *n);
/* An empty node of type t; NULL when out of memory. */
struct kcr__node *kcr__node_new(enum kcr__ntype t);
/* A STR or NUM node holding a copy of s[0..len). */
struct kcr__node *kcr__node_str(enum kcr__ntype t, const char *s, size_t len);
/* Deep copy; NULL when out of memory (or n is NULL). */
struct kcr__node *kcr__node_copy(const struct kcr__node *n);
/* Deep copy of a value of an immutable object (ABSENT gives NULL). */
struct kcr__node *kcr__node_from_value(kcr_value v);
/* RFC 6902 equality: numbers by value, maps regardless of member order,
 * arrays element by element. */
bool kcr__node_equal(const struct kcr__node *a, const struct kcr__node *b);

/* An INT node; NULL when out of memory. */
struct kcr__node *kcr__node_int(int64_t v);
/* Builders for documents the client and the fake write (NUL-terminated
 * keys; the value is taken, the string copied): m[key] = v, m[key] = "s",
 * m[key] = b, m[key] = i. false,
 * with kcr_last_error() set, when out of memory or s is not valid UTF-8. */
bool kcr__node_put(struct kcr__node *m, const char *key, struct kcr__node *v);
bool kcr__node_put_str(struct kcr__node *m, const char *key, const char *s);
bool kcr__node_put_bool(struct kcr__node *m, const char *key, bool b);
bool kcr__node_put_int(struct kcr__node *m, const char *key, int64_t i);

/* Appends v to an array (takes v); false when out of memory. */
bool kcr__node_push(struct kcr__node *arr, struct kcr__node *v);
/* Inserts v before index i (i <= n) of an array (takes v). */
bool kcr__node_insert(struct kcr__node *arr, size_t i, struct kcr__node *v);
/* Index of key k in a map, or -1. */
ptrdiff_t kcr__node_find(const struct kcr__node *m, const char *k, size_t len);
/* Sets m[k] = v, replacing an old value in place (takes v). */
bool kcr__node_set(struct kcr__node *m, const char *k, size_t len, struct kcr__node *v);
/* Frees entry i of a map or array and closes the gap. */
void kcr__node_remove_at(struct kcr__node *c, size_t i);
/* Detaches entry i of a map or array (returned, not freed) and closes the gap. */
struct kcr__node *kcr__node_take_at(struct kcr__node *c, size_t i);

/* Feeds the tree to an object builder. */
kcr_err kcr__node_feed(kcr__object_builder *b, const struct kcr__node *n);
/* Compact JSON text of the tree (malloc'd, NUL-terminated; *len may be NULL). */
kcr_err kcr__node_to_json(const struct kcr__node *n, char **out, size_t *len);
/* Parses any JSON value (text copied; len 0: strlen) into a tree. */
kcr_err kcr__node_parse(const char *json, size_t len, struct kcr__node **out);
/* Parses any JSON value (text copied; len 0: strlen) into an immutable
 * object holding it as the member "v" of its root; *v is that value. */
kcr_err kcr__value_parse(const char *json, size_t len, kcr_object **holder, kcr_value *v);

#endif
