/* Internal: a small mutable JSON tree.
 *
 * Used where a whole (small) document must be inspected or edited: Status
 * bodies, discovery documents, ExecCredential output, and the objects the
 * in-memory fake stores and patches. Large streams never go through it (see
 * decode.h). Numbers keep their original text. Not thread-safe; a tree
 * belongs to one thread at a time. */
#ifndef KCR_CLIENT_JSON_H
#define KCR_CLIENT_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcr/error.h"

typedef enum kcr__json_type {
    KCR__JSON_NULL,
    KCR__JSON_BOOL,
    KCR__JSON_NUMBER,
    KCR__JSON_STRING,
    KCR__JSON_OBJECT,
    KCR__JSON_ARRAY
} kcr__json_type;

typedef struct kcr__json kcr__json;
struct kcr__json {
    kcr__json_type type;
    bool b;          /* BOOL */
    char *s;         /* STRING or NUMBER text, NUL-terminated */
    size_t len;      /* length of s */
    size_t n, cap;   /* OBJECT members / ARRAY items */
    char **keys;     /* OBJECT keys (NUL-terminated) */
    kcr__json **vals;/* OBJECT values or ARRAY items */
};

/* Parses one JSON document. KCR_ERR_PARSE with a message on bad input. */
kcr_err kcr__json_parse(const char *buf, size_t len, kcr__json **out);
void kcr__json_free(kcr__json *j);

/* Serializes compactly into a malloc'd NUL-terminated string. */
kcr_err kcr__json_dump(const kcr__json *j, char **out, size_t *len);

/* Event-fed builder (same events as yajl), for streaming decoders. */
typedef struct kcr__json_builder kcr__json_builder;
kcr__json_builder *kcr__json_builder_new(void);
void kcr__json_builder_free(kcr__json_builder *b);
void kcr__json_builder_reset(kcr__json_builder *b);
kcr_err kcr__json_builder_scalar(kcr__json_builder *b, kcr__json *v); /* takes v */
kcr_err kcr__json_builder_start_map(kcr__json_builder *b);
kcr_err kcr__json_builder_map_key(kcr__json_builder *b, const char *key, size_t len);
kcr_err kcr__json_builder_end(kcr__json_builder *b); /* end of map or array */
kcr_err kcr__json_builder_start_array(kcr__json_builder *b);
bool kcr__json_builder_done(const kcr__json_builder *b);
/* Takes the finished value (the builder is reset); NULL if none. */
kcr__json *kcr__json_builder_take(kcr__json_builder *b);

/* Constructors; NULL on out of memory. */
kcr__json *kcr__json_new(kcr__json_type type);
kcr__json *kcr__json_new_string(const char *s, size_t len);
kcr__json *kcr__json_new_str(const char *s); /* NUL-terminated */
kcr__json *kcr__json_new_int(int64_t v);
kcr__json *kcr__json_new_bool(bool v);
kcr__json *kcr__json_copy(const kcr__json *j);
bool kcr__json_equal(const kcr__json *a, const kcr__json *b);

/* Object member lookup; NULL when j is not an object or has no such key. */
kcr__json *kcr__json_get(const kcr__json *j, const char *key);
/* Follows a NULL-terminated list of keys. */
kcr__json *kcr__json_path(const kcr__json *j, ...);
/* The string value, or NULL when j is NULL or not a string. */
const char *kcr__json_str(const kcr__json *j);
/* The integer value of a number, or `dflt`. */
int64_t kcr__json_int(const kcr__json *j, int64_t dflt);
/* Sets key to v (takes ownership of v; replaces and frees an old value). */
kcr_err kcr__json_set(kcr__json *obj, const char *key, kcr__json *v);
kcr_err kcr__json_set_str(kcr__json *obj, const char *key, const char *s);
/* Removes key; true if it was there. */
bool kcr__json_remove(kcr__json *obj, const char *key);
/* Returns obj[key], creating an empty object there if missing or not an object. */
kcr__json *kcr__json_child_object(kcr__json *obj, const char *key);
/* Appends v to an array (takes ownership). */
kcr_err kcr__json_append(kcr__json *arr, kcr__json *v);

/* RFC 7386 JSON merge patch applied to *target in place (may replace it). */
kcr_err kcr__json_merge_patch(kcr__json **target, const kcr__json *patch);

#endif
