/* Internal: an open-addressing hash table of nodes keyed by a string stored
 * inside each node (linear probing, backward-shift deletion, no tombstones).
 * The table never allocates nodes: callers own them and embed the key (the
 * workqueue's items and limiter state; core/strmap.h's nodes). The hash is
 * seeded per table, so keys from outside cannot be crafted to collide.
 * Not thread-safe: callers hold their own lock. */
#ifndef KCR_CORE_KEYTAB_H
#define KCR_CORE_KEYTAB_H

#include <stddef.h>
#include <stdint.h>

struct kcr__keyslot {
    uint64_t hash; /* full hash, so probes rarely touch the node */
    void *node;    /* NULL: empty slot */
};

struct kcr__keytab {
    struct kcr__keyslot *slots;
    size_t mask;  /* capacity - 1; capacity is a power of two */
    size_t count; /* nodes stored */
    size_t min_cap;
    size_t ops_since_resize; /* inserts + removes since the last resize */
    uint64_t seed;
    size_t key_off; /* offsetof(node type, char key[]) */
    size_t len_off; /* offsetof(node type, uint32_t key length) */
};

/* Sets up an empty table sized for `hint` keys; nodes keep their key at
 * key_off and its length (uint32_t) at len_off. Returns 0 or -1 (no memory). */
int kcr__keytab_init(struct kcr__keytab *t, size_t hint, size_t key_off, size_t len_off);

/* Frees the slot array (not the nodes). */
void kcr__keytab_destroy(struct kcr__keytab *t);

/* Hash of `key` for this table (computable without the caller's lock). */
uint64_t kcr__keytab_hash(const struct kcr__keytab *t, const char *key, size_t len);

/* The same hash from a copy of the table's seed. */
uint64_t kcr__keytab_hash_seeded(uint64_t seed, const char *key, size_t len);

/* Cache hints for a lookup of `hash` coming soon: the first probe slot, and
 * the node stored there (read the slot only after its prefetch landed). */
static inline void kcr__keytab_prefetch_slot(const struct kcr__keytab *t, uint64_t hash)
{
    __builtin_prefetch(&t->slots[hash & t->mask]);
}

static inline void kcr__keytab_prefetch_node(const struct kcr__keytab *t, uint64_t hash)
{
    const void *node = t->slots[hash & t->mask].node;
    if (node)
        __builtin_prefetch(node);
}

/* The node holding `key`, or NULL. */
void *kcr__keytab_find(const struct kcr__keytab *t, const char *key, size_t len, uint64_t hash);

/* Stores `node` (whose key is not in the table). Returns 0, or -1 when growing
 * the table failed (the node is then not stored). */
int kcr__keytab_insert(struct kcr__keytab *t, uint64_t hash, void *node);

/* Removes `node`, which must be in the table under `hash`. */
void kcr__keytab_remove(struct kcr__keytab *t, uint64_t hash, const void *node);

#endif
