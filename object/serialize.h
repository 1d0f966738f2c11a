/* Internal to object/: the one JSON writer (serialize.c), shared by the two
 * tree walks, serialize.c's over an immutable object and edit_tree.c's over
 * an edit tree. */
#ifndef KCR_OBJECT_SERIALIZE_H
#define KCR_OBJECT_SERIALIZE_H

#include <stddef.h>
#include <stdint.h>

#include <yajl/yajl_gen.h>

#include "kcr/object.h"

/* A generator configured once (NULL when out of memory). No UTF-8 check:
 * every string in either tree was checked on its way in (object/utf8.h). */
yajl_gen kcr__gen_new(void);

/* Copies g's output to a malloc'd NUL-terminated *out (its length to *len
 * unless len is NULL) when err is KCR_OK; frees g in every case and returns
 * err, or KCR_ERR_NOMEM when the copy fails. */
kcr_err kcr__gen_finish(yajl_gen g, kcr_err err, char **out, size_t *len);

/* Writes the value `ref` of `o` to a generator. */
kcr_err kcr__gen_value(yajl_gen g, const kcr_object *o, uint32_t ref);

#endif
