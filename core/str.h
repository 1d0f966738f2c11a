/* Internal: small string helpers shared by the layers. Thread-safe (no
 * shared state). */
#ifndef KCR_CORE_STR_H
#define KCR_CORE_STR_H

#include <stddef.h>

/* A NUL-terminated, malloc'd copy of the `len` bytes at `s`, which need
 * not be NUL-terminated (unlike strndup, it never reads past `len`: parser
 * tokens end where the buffer may end). The caller frees it. NULL when out
 * of memory. */
char *kcr__memdup_str(const void *s, size_t len);

#endif
