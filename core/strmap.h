/* Internal: a map from a string (copied) to a non-NULL pointer, on the key
 * table (core/keytab.h: one node per entry holding the value and the key).
 * Zero-initialise a struct kcr__strmap to get an empty map (it allocates on
 * the first put). Not thread-safe: its owner locks. */
#ifndef KCR_CORE_STRMAP_H
#define KCR_CORE_STRMAP_H

#include <stdbool.h>
#include <stddef.h>

#include "core/keytab.h"
#include "kcr/error.h"

struct kcr__strmap {
    struct kcr__keytab tab; /* slots NULL until the first put */
};

void *kcr__strmap_get(const struct kcr__strmap *m, const char *key);
/* Sets key -> value; *old (may be NULL) gets the replaced value or NULL. */
kcr_err kcr__strmap_put(struct kcr__strmap *m, const char *key, void *value, void **old);
/* Removes key; returns its value or NULL. */
void *kcr__strmap_remove(struct kcr__strmap *m, const char *key);
/* Removes everything, calling free_value (may be NULL) on each value. */
void kcr__strmap_clear(struct kcr__strmap *m, void (*free_value)(void *));
/* How many keys are stored. */
size_t kcr__strmap_len(const struct kcr__strmap *m);
/* Iterates in no particular order: start with *pos = 0; each call fills
 * *key (borrowed, valid until that entry is removed) and *value (either may
 * be NULL) and returns true, or returns false at the end. The map must not
 * change during an iteration. */
bool kcr__strmap_next(const struct kcr__strmap *m, size_t *pos, const char **key, void **value);

#endif
