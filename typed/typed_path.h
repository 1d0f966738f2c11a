/* Internal: path text shared by typed/'s edit views and schema walker. */
#ifndef KCR_TYPED_PATH_H
#define KCR_TYPED_PATH_H

#include <stdbool.h>
#include <stddef.h>

/* Appends `key` to path[0..*len) as `.key` (plain keys: letters, digits and
 * _-$@) or `["key"]` with \" and \\ escapes, kcr_object_lookup's syntax;
 * false, leaving path and *len as they were, when it would not fit in `cap`
 * bytes with the NUL. */
bool kcr__typed_path_key(char *path, size_t *len, size_t cap, const char *key);

#endif
