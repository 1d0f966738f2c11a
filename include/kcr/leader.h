/* Leader election on a coordination.k8s.io/v1 Lease, as client-go's
 * leaderelection package does it: candidates race to write their identity
 * into one Lease, updating it with its resourceVersion so that two
 * candidates can never both win; the holder renews it every retry period;
 * the others take over once it has not been renewed for a lease duration.
 *
 * Guarantees: a leader that cannot renew within renew_deadline_ms stops
 * leading (on_stopped_leading runs) before its lease can lapse, so two
 * leaders never act at once as long as on_stopped_leading stops the work
 * before it returns. A clean stop releases the lease (leaseDurationSeconds
 * = 1, holder kept) so a standby takes over within about one retry period
 * after the lease's 1 s. An elector that lost the lease does not campaign
 * again (as client-go's Run returns): stop and free it, or exit.
 *
 * Thread-safety: every function is thread-safe except _free. Long-form
 * docs: docs/controller.md. */
#ifndef KCR_LEADER_H
#define KCR_LEADER_H

#include <stdbool.h>
#include <stdint.h>

#include "kcr/client.h"
#include "kcr/error.h"
#include "kcr/export.h"
#include "kcr/time.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kcr_leader_elector kcr_leader_elector;

/* Zero means default for every field; strings are copied. Validated by
 * kcr_leader_elector_new: lease_duration_ms > renew_deadline_ms >
 * 1.2 * retry_period_ms, else KCR_ERR_INVALID saying which. The Lease
 * stores leaseDurationSeconds: lease_duration_ms rounded up to seconds. */
typedef struct kcr_leader_elector_options {
    const char *lease_namespace; /* required */
    const char *lease_name;      /* required */
    const char *identity;        /* NULL: "<hostname>_<random uuid>" */
    int64_t lease_duration_ms;   /* 0: 15000 */
    int64_t renew_deadline_ms;   /* 0: 10000 */
    int64_t retry_period_ms;     /* 0: 2000 */
    bool keep_lease_on_stop;     /* false: a stop while leading releases the lease */
    /* Callbacks run on the elector's thread with no kcr lock held; each may
     * be NULL. on_started_leading: this process now holds the lease.
     * on_stopped_leading: it no longer does (lost, or stopped): stop every
     * leader-only activity BEFORE returning. on_new_leader: the observed
     * holder changed (identity borrowed for the call; "" when none). */
    void (*on_started_leading)(void *user_data);
    void (*on_stopped_leading)(void *user_data);
    void (*on_new_leader)(const char *identity, void *user_data);
    void *user_data;
} kcr_leader_elector_options;

/* Counters, for metrics and tests. */
typedef struct kcr_leader_elector_stats {
    uint64_t acquisitions;    /* times this candidate became leader */
    uint64_t renewals;        /* successful renewals */
    uint64_t failed_attempts; /* acquire/renew attempts that failed (conflict, error) */
    bool leading;             /* leader_election_master_status */
} kcr_leader_elector_stats;

/* A candidate for the Lease; `client` is borrowed until _free. Does not
 * start campaigning. */
KCR_API kcr_err kcr_leader_elector_new(size_t opts_size, kcr_client *client,
                                       const kcr_leader_elector_options *opts,
                                       kcr_leader_elector **out);
#define kcr_leader_elector_new(...) (kcr_leader_elector_new)(sizeof(kcr_leader_elector_options), __VA_ARGS__)

/* Starts the elector's thread: acquire, then renew while leading.
 * KCR_ERR_STATE when already started or stopped. */
KCR_API kcr_err kcr_leader_elector_start(kcr_leader_elector *e);

/* Stops campaigning and joins the thread. If leading: on_stopped_leading
 * runs first, then the lease is released (unless keep_lease_on_stop).
 * Idempotent. Must not be called from the elector's callbacks. */
KCR_API void kcr_leader_elector_stop(kcr_leader_elector *e);

/* Stops if needed and frees. NULL is ignored. */
KCR_API void kcr_leader_elector_free(kcr_leader_elector *e);

/* True while this candidate holds the lease. */
KCR_API bool kcr_leader_elector_is_leader(kcr_leader_elector *e);

/* This candidate's identity, owned by the elector. */
KCR_API const char *kcr_leader_elector_identity(const kcr_leader_elector *e);

/* The current holder as last observed, malloc'd ("" when none known). */
KCR_API char *kcr_leader_elector_holder(kcr_leader_elector *e);

KCR_API void kcr_leader_elector_get_stats(size_t out_size, kcr_leader_elector *e,
                                          kcr_leader_elector_stats *out);
#define kcr_leader_elector_get_stats(...) (kcr_leader_elector_get_stats)(sizeof(kcr_leader_elector_stats), __VA_ARGS__)

#ifdef __cplusplus
}
#endif

#endif
