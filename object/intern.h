/* Internal: the process-wide table of interned JSON object keys.
 *
 * Object keys repeat across objects ("metadata", "name", "f:spec", label
 * keys...), so each distinct short key is stored once for the whole process
 * and objects refer to it by a 31-bit id. The table is bounded
 * (KCR__INTERN_MAX_KEYS keys of at most KCR__INTERN_MAX_LEN bytes) and never
 * shrinks: once full, new keys are stored inside each object instead, so a
 * stream of unique keys cannot grow memory without bound. Lookups are
 * lock-free; inserts take a mutex. Thread-safe. */
#ifndef KCR_OBJECT_INTERN_H
#define KCR_OBJECT_INTERN_H

#include <stddef.h>
#include <stdint.h>

#include "core/hash.h" /* the hash the table and its callers use */

#define KCR__INTERN_MAX_KEYS 32768
#define KCR__INTERN_MAX_LEN 64
#define KCR__INTERN_NONE UINT32_MAX

/* Well-known keys, interned first so their ids are these constants. */
enum {
    KCR__K_METADATA,
    KCR__K_NAME,
    KCR__K_NAMESPACE,
    KCR__K_UID,
    KCR__K_RESOURCE_VERSION,
    KCR__K_GENERATION,
    KCR__K_LABELS,
    KCR__K_ANNOTATIONS,
    KCR__K_OWNER_REFERENCES,
    KCR__K_FINALIZERS,
    KCR__K_DELETION_TIMESTAMP,
    KCR__K_MANAGED_FIELDS,
    KCR__K_API_VERSION,
    KCR__K_KIND,
    KCR__K_CONTROLLER,
    KCR__K_BLOCK_OWNER_DELETION,
    KCR__K_COUNT_
};

/* Id of the key, interning it if there is room; KCR__INTERN_NONE when the key
 * is too long or the table is full. */
uint32_t kcr__intern(const char *s, size_t len, uint32_t hash);

/* Id of the key if interned, else KCR__INTERN_NONE. Never inserts. */
uint32_t kcr__intern_find(const char *s, size_t len, uint32_t hash);

/* The key of an id returned above; *len its length. NUL-terminated. */
const char *kcr__intern_str(uint32_t id, size_t *len);

/* Number of interned keys (for statistics and tests). */
size_t kcr__intern_count(void);

#endif
