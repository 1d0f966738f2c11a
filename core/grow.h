/* Internal: growing an array by doubling, the one place the library does
 * it. No shared state: thread-safe. */
#ifndef KCR_CORE_GROW_H
#define KCR_CORE_GROW_H

#include <stddef.h>

/* `arr` (room for *cap elements of `size` bytes) grown, if needed, to hold
 * at least n + 1: the same or a new pointer with *cap updated, or NULL when
 * out of memory (or the size overflows), with arr and *cap untouched and
 * still valid. The first growth makes room for `first` (the caller's
 * typical size: small for per-key arrays, large for whole lists). */
void *kcr__grow(void *arr, size_t *cap, size_t n, size_t size, size_t first);

#endif
