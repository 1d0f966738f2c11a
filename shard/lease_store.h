/* Internal: where the members of a shard ring keep their Leases. The member
 * state machine (member.h) talks to an interface so it can run on the
 * apiserver (or the fake, kcr/fake.h) through a kcr_client
 * (kcr__lease_store_client, client_store.c) and, in tests, on an in-memory
 * table with a virtual clock.
 *
 * A shard Lease is a coordination.k8s.io/v1 Lease labelled
 * kcr.dev/shard-ring=<ring> and kcr.dev/shard-identity=<identity>; its
 * spec.holderIdentity names the process (instance) holding the identity, ""
 * once released; annotations carry the member's slot, the ranges it may
 * be reconciling and, on a released Lease, whether it keeps the slot for a
 * restart (docs/sharding.md). */
#ifndef KCR_SHARD_LEASE_STORE_H
#define KCR_SHARD_LEASE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcr/client.h"
#include "kcr/error.h"

#define KCR__SHARD_RING_LABEL "kcr.dev/shard-ring"
#define KCR__SHARD_IDENTITY_LABEL "kcr.dev/shard-identity"
#define KCR__SHARD_SLOT_ANNOTATION "kcr.dev/shard-slot"
#define KCR__SHARD_HELD_ANNOTATION "kcr.dev/shard-held"
#define KCR__SHARD_RESTARTING_ANNOTATION "kcr.dev/shard-restarting"

/* One member's Lease. Strings are malloc'd (kcr__shard_lease_clear). */
typedef struct kcr__shard_lease {
    char *identity;      /* the shard identity (label) */
    char *holder;        /* spec.holderIdentity: the instance; "" when released */
    int64_t duration_ms; /* spec.leaseDurationSeconds * 1000 */
    int64_t renew_ms;    /* spec.renewTime, on the writer's wall clock */
    int slot;            /* the slot annotation; -1 when absent or bad */
    char *held;          /* the held-ranges annotation, kcr__ranges_format text */
    bool restarting;     /* released by a clean stop that keeps its slot for the identity's
                            next instance (the restarting annotation, "true") */
    char *version;       /* metadata.resourceVersion; "" for a Lease to create */
} kcr__shard_lease;

typedef struct kcr__shard_lease_list {
    kcr__shard_lease *items;
    size_t n;
} kcr__shard_lease_list;

void kcr__shard_lease_clear(kcr__shard_lease *l);
void kcr__shard_lease_list_clear(kcr__shard_lease_list *list);

/* Deep copy; KCR_ERR_NOMEM only. */
kcr_err kcr__shard_lease_copy(const kcr__shard_lease *src, kcr__shard_lease *dst);

typedef struct kcr__lease_store_ops {
    /* Every Lease of `ring` into *out (cleared first). */
    kcr_err (*list)(const char *ring, kcr__shard_lease_list *out, void *user_data);
    /* Creates the Lease when lease->version is "", else replaces it if its
     * resourceVersion is still lease->version (KCR_ERR_CONFLICT if not;
     * KCR_ERR_EXISTS when creating one that exists). On KCR_OK the new
     * resourceVersion goes to *version (malloc'd). */
    kcr_err (*put)(const char *ring, const kcr__shard_lease *lease, char **version,
                   void *user_data);
} kcr__lease_store_ops;

/* A store: the ops and their user_data, both borrowed by whoever uses it. */
typedef struct kcr__lease_store {
    const kcr__lease_store_ops *ops;
    void *user_data;
} kcr__lease_store;

/* The store over a kcr_client (borrowed; the real apiserver or the fake),
 * keeping the Leases in namespace `ns` (copied), named
 * "<ring>-<identity>". Calls block on the client; one caller at a time.
 * Free with kcr__lease_store_client_free. */
kcr_err kcr__lease_store_client_new(kcr_client *client, const char *ns, kcr__lease_store **out);
void kcr__lease_store_client_free(kcr__lease_store *store);

/* Makes every later request of a client store carry `cancel` (borrowed;
 * NULL: none), so whoever waits for a request with a deadline can end a
 * hung one. Set it before the store is used. */
void kcr__lease_store_client_set_cancel(kcr__lease_store *store, kcr_cancel *cancel);

#endif
