/* Internal: a map from a string (copied) to a non-NULL pointer, open
 * addressing with linear probing and backward-shift deletion. Zero-initialise
 * a struct kcr__strmap to get an empty map. Not thread-safe: its owner locks. */
#ifndef KCR_CORE_STRMAP_H
#define KCR_CORE_STRMAP_H

#include <stddef.h>
#include <stdint.h>

#include "kcr/error.h"

struct kcr__strmap_slot {
    char *key; /* NULL: empty slot */
    uint32_t hash;
    void *value;
};
struct kcr__strmap {
    struct kcr__strmap_slot *slots;
    size_t cap, len;
};

void *kcr__strmap_get(const struct kcr__strmap *m, const char *key);
/* Sets key -> value; *old (may be NULL) gets the replaced value or NULL. */
kcr_err kcr__strmap_put(struct kcr__strmap *m, const char *key, void *value, void **old);
/* Removes key; returns its value or NULL. */
void *kcr__strmap_remove(struct kcr__strmap *m, const char *key);
/* Removes everything, calling free_value (may be NULL) on each value. */
void kcr__strmap_clear(struct kcr__strmap *m, void (*free_value)(void *));

#endif
