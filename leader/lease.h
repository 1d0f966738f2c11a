/* Internal: reading and writing the leader-election record of a
 * coordination.k8s.io/v1 Lease (spec.holderIdentity, leaseDurationSeconds,
 * acquireTime, renewTime, leaseTransitions), shared by the leader elector
 * and the shard layer's membership Leases (shard/lease_store.h). Pure
 * functions, thread-safe. */
#ifndef KCR_LEADER_LEASE_H
#define KCR_LEADER_LEASE_H

#include <stdint.h>

#include "kcr/client.h"
#include "kcr/object.h"
#include "kcr/time.h"

static const kcr_resource KCR__LEASES = {"coordination.k8s.io", "v1", "leases"};

/* What a Lease says, as read from the server. Strings are malloc'd. */
typedef struct kcr__lease_record {
    char *holder;         /* spec.holderIdentity; "" when absent */
    int64_t duration_s;   /* spec.leaseDurationSeconds; 0 when absent */
    int64_t transitions;  /* spec.leaseTransitions; 0 when absent */
    char *acquire_time;   /* spec.acquireTime text; "" when absent */
    int64_t renew_us;     /* spec.renewTime, microseconds since the epoch; 0 when absent
                             or unreadable */
    char *spec_json;      /* the whole spec, to notice any change */
} kcr__lease_record;

/* Reads `lease` (borrowed) into *out (cleared first). KCR_ERR_NOMEM only. */
kcr_err kcr__lease_read(const kcr_object *lease, kcr__lease_record *out);
void kcr__lease_record_clear(kcr__lease_record *r);

/* The record to write. */
typedef struct kcr__lease_spec {
    const char *holder;
    int64_t duration_s;
    const char *acquire_time; /* MicroTime text */
    int64_t renew_us;         /* renewTime, microseconds since the epoch */
    int64_t transitions;
} kcr__lease_spec;

/* Sets the record's fields (spec.*) on an edit in progress: for callers
 * that add their own labels and annotations to the Lease. */
kcr_err kcr__lease_edit_spec(kcr_object_edit *e, const kcr__lease_spec *spec);

/* The JSON of the Lease to send (malloc'd into *json): `base` (borrowed, with
 * its resourceVersion, so an update is conditional) with the record set, or
 * with base NULL a new Lease ns/name for a create. Other fields of base are
 * kept. */
kcr_err kcr__lease_json(const kcr_object *base, const char *ns, const char *name,
                        const kcr__lease_spec *spec, char **json);

#endif
