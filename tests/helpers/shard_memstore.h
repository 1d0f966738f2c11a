/* An in-memory shard Lease store (shard/lease_store.h) for tests: one table
 * of Leases with resourceVersions, and per-replica handles that can be cut
 * off (a partition: every call fails with KCR_ERR_TRANSPORT). Not
 * thread-safe; tests drive it from one thread. */
#ifndef KCR_TESTS_SHARD_MEMSTORE_H
#define KCR_TESTS_SHARD_MEMSTORE_H

#include <stdbool.h>

#include "shard/lease_store.h"

typedef struct memstore {
    kcr__shard_lease_list leases;
    char **rings; /* the ring of each Lease */
    long long next_version;
    long long puts, lists; /* calls served */
} memstore;

/* A replica's view of the store. */
typedef struct memstore_handle {
    kcr__lease_store store; /* pass &h->store to the member */
    memstore *table;
    bool partitioned;
} memstore_handle;

void memstore_init(memstore_handle *h, memstore *table);
void memstore_free(memstore *table);

/* The Lease of `identity`, NULL when none. Borrowed. */
kcr__shard_lease *memstore_find(memstore *table, const char *identity);

#endif
