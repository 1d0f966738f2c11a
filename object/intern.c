/* The process-wide interned key table (see intern.h). */
#include "object/intern.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS (KCR__INTERN_MAX_KEYS * 2) /* power of two, load factor <= 0.5 */

struct ikey {
    uint32_t hash;
    uint32_t len;
    char s[];
};

static _Atomic(struct ikey *) keys[KCR__INTERN_MAX_KEYS];
static _Atomic uint32_t slots[SLOTS]; /* 0 empty, else id + 1 */
static _Atomic uint32_t nkeys;
static pthread_mutex_t insert_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t seeded = PTHREAD_ONCE_INIT;
/* set once seed() ran: lookups then skip pthread_once (a call per key) */
static atomic_bool seed_done;

static const char *const well_known[KCR__K_COUNT_] = {
    [KCR__K_METADATA] = "metadata",
    [KCR__K_NAME] = "name",
    [KCR__K_NAMESPACE] = "namespace",
    [KCR__K_UID] = "uid",
    [KCR__K_RESOURCE_VERSION] = "resourceVersion",
    [KCR__K_GENERATION] = "generation",
    [KCR__K_LABELS] = "labels",
    [KCR__K_ANNOTATIONS] = "annotations",
    [KCR__K_OWNER_REFERENCES] = "ownerReferences",
    [KCR__K_FINALIZERS] = "finalizers",
    [KCR__K_DELETION_TIMESTAMP] = "deletionTimestamp",
    [KCR__K_MANAGED_FIELDS] = "managedFields",
    [KCR__K_API_VERSION] = "apiVersion",
    [KCR__K_KIND] = "kind",
    [KCR__K_CONTROLLER] = "controller",
    [KCR__K_BLOCK_OWNER_DELETION] = "blockOwnerDeletion",
};

static uint32_t find_locked_or_not(const char *s, size_t len, uint32_t hash, uint32_t *free_slot)
{
    uint32_t i = hash & (SLOTS - 1);
    for (;;) {
        uint32_t v = atomic_load_explicit(&slots[i], memory_order_acquire);
        if (v == 0) {
            if (free_slot)
                *free_slot = i;
            return KCR__INTERN_NONE;
        }
        const struct ikey *k = atomic_load_explicit(&keys[v - 1], memory_order_acquire);
        if (k->hash == hash && k->len == len && memcmp(k->s, s, len) == 0)
            return v - 1;
        i = (i + 1) & (SLOTS - 1);
    }
}

static uint32_t insert(const char *s, size_t len, uint32_t hash)
{
    pthread_mutex_lock(&insert_lock);
    uint32_t slot = 0;
    uint32_t id = find_locked_or_not(s, len, hash, &slot);
    if (id == KCR__INTERN_NONE) {
        uint32_t n = atomic_load_explicit(&nkeys, memory_order_relaxed);
        struct ikey *k = n < KCR__INTERN_MAX_KEYS ? malloc(sizeof *k + len + 1) : NULL;
        if (k) {
            k->hash = hash;
            k->len = (uint32_t)len;
            memcpy(k->s, s, len);
            k->s[len] = '\0';
            id = n;
            atomic_store_explicit(&keys[id], k, memory_order_release);
            atomic_store_explicit(&slots[slot], id + 1, memory_order_release);
            atomic_store_explicit(&nkeys, n + 1, memory_order_release);
        }
    }
    pthread_mutex_unlock(&insert_lock);
    return id;
}

static void seed(void)
{
    for (int i = 0; i < KCR__K_COUNT_; i++) {
        size_t len = strlen(well_known[i]);
        insert(well_known[i], len, kcr__hash_bytes(well_known[i], len));
    }
    atomic_store_explicit(&seed_done, true, memory_order_release);
}

static void ensure_seeded(void)
{
    if (!atomic_load_explicit(&seed_done, memory_order_acquire))
        pthread_once(&seeded, seed);
}

uint32_t kcr__intern_find(const char *s, size_t len, uint32_t hash)
{
    ensure_seeded();
    if (len > KCR__INTERN_MAX_LEN)
        return KCR__INTERN_NONE;
    return find_locked_or_not(s, len, hash, NULL);
}

uint32_t kcr__intern(const char *s, size_t len, uint32_t hash)
{
    ensure_seeded();
    if (len > KCR__INTERN_MAX_LEN)
        return KCR__INTERN_NONE;
    uint32_t id = find_locked_or_not(s, len, hash, NULL);
    if (id != KCR__INTERN_NONE ||
        atomic_load_explicit(&nkeys, memory_order_relaxed) >= KCR__INTERN_MAX_KEYS)
        return id;
    return insert(s, len, hash);
}

const char *kcr__intern_str(uint32_t id, size_t *len)
{
    const struct ikey *k = atomic_load_explicit(&keys[id], memory_order_acquire);
    if (len)
        *len = k->len;
    return k->s;
}

size_t kcr__intern_count(void)
{
    return atomic_load_explicit(&nkeys, memory_order_acquire);
}
