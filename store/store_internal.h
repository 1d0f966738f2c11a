/* Internal helpers shared by the store files: object keys, a string-keyed
 * hash map and a pointer deque. None of them is thread-safe: their owners
 * lock. */
#ifndef KCR_STORE_STORE_INTERNAL_H
#define KCR_STORE_STORE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "kcr/store.h"

/* The store key of obj, malloc'd; NULL on OOM. */
char *kcr__object_key(const kcr_object *obj);

/* Open-addressing map from a string (copied) to a non-NULL pointer. */
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

/* A growable ring of pointers. */
struct kcr__ptrq {
    void **items;
    size_t head, len, cap;
};
kcr_err kcr__ptrq_push(struct kcr__ptrq *q, void *p);
void *kcr__ptrq_pop(struct kcr__ptrq *q);
void *kcr__ptrq_at(const struct kcr__ptrq *q, size_t i);
void kcr__ptrq_free(struct kcr__ptrq *q);

#endif
