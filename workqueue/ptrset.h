/* Internal: a small set of pointers (open addressing, linear probing,
 * backward-shift deletion). The workqueue keeps the nodes handed out by get
 * in one, so done() recognises the key pointer get returned without hashing
 * the key or touching the key table. Not thread-safe: callers hold their
 * own lock. */
#ifndef KCR_WORKQUEUE_PTRSET_H
#define KCR_WORKQUEUE_PTRSET_H

#include <stdbool.h>
#include <stddef.h>

/* All zero: an empty set (no allocation until the first add). */
struct kcr__ptrset {
    const void **slots; /* NULL until the first add; capacity is a power of two */
    size_t mask;
    size_t count;
};

/* Frees the slots. */
void kcr__ptrset_destroy(struct kcr__ptrset *s);

/* Adds `p` (not NULL, not in the set). False if growing failed: the set
 * is an accelerator, so callers go on without it. */
bool kcr__ptrset_add(struct kcr__ptrset *s, const void *p);

/* True if `p` is in the set. */
bool kcr__ptrset_has(const struct kcr__ptrset *s, const void *p);

/* Removes `p` if present. */
void kcr__ptrset_remove(struct kcr__ptrset *s, const void *p);

#endif
