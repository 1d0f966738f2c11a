/* Internal: one replica's membership in a shard ring and the hand-over of
 * keys between replicas (docs/sharding.md, "The protocol").
 *
 * A member holds a Lease for its identity (lease_store.h), computes the ring
 * (ring.h) from the live Leases of its ring, and keeps three sets of ranges:
 * - admitted: reconciles of keys hashing here may start (kcr__shard_member_begin);
 * - draining: the hashes of reconciles still in flight in ranges it no
 *   longer owns (one-hash ranges);
 * - published (the held annotation on its Lease): admitted ∪ draining ∪ what it
 *   is about to claim. Dropping a drained range from it is the acknowledgement
 *   the next owner waits for.
 * A range is admitted only after it was published AND a fresh list showed no
 * other unexpired Lease publishing any of it. A Lease is expired on a reader's
 * clock once renewTime + leaseDuration + margin has passed; a member stops
 * admitting once renew_deadline_ms have passed since it sent its last
 * successful write. On a cold ring (no other live Lease publishes anything
 * and it holds nothing) it wants nothing until the ring's members stayed
 * the same for two retry periods, at most a lease duration after it
 * joined, so that replicas starting together split the ring at once.
 * A Lease is placed in the ring while it is unexpired and held, or
 * released by a leave that keeps its slot for a restart (restart_grace_ms).
 *
 * Nothing here reads a clock or sleeps: every call takes `now_ms`, the
 * caller's wall clock, so tests drive it with a virtual one. Differences of
 * now_ms measure the renew deadline, so a caller feeds a clock that never
 * jumps (the manager: the wall clock read once, advanced by the monotonic
 * one). Not thread-safe: one caller at a time (the caller's own lock if
 * needed). A store op called by kcr__shard_member_sync may release that lock
 * while its request runs: begin, end, check, state, wants and the ranges
 * getters are safe to call meanwhile (sync keeps nothing they change across
 * a store call); sync and leave are not. */
#ifndef KCR_SHARD_MEMBER_H
#define KCR_SHARD_MEMBER_H

#include <stdbool.h>
#include <stdint.h>

#include "kcr/error.h"
#include "object/ranges.h"
#include "shard/lease_store.h"

typedef struct kcr__shard_member_config {
    const char *ring;          /* the ring's name (label value) */
    const char *identity;      /* this replica's stable identity */
    const char *instance;      /* this process (holderIdentity); unique per start */
    int64_t lease_ms;          /* leaseDuration; whole seconds on a real Lease */
    int64_t renew_deadline_ms; /* < lease_ms: stop admitting after this long unrenewed */
    int64_t retry_ms;          /* renew every retry_ms */
    int64_t margin_ms;         /* fencing margin: >= the clock-skew bound between replicas */
    /* 0: a graceful leave releases the slot, its keys move within a step.
     * > 0: the released Lease keeps the slot placed in the ring for
     * max(lease_ms, this) + margin_ms after the leave, so its keys wait,
     * unowned, for the identity's next instance, which takes them back at
     * once (a rolling restart moves nothing); after that they move. */
    int64_t restart_grace_ms;
    /* TEST ONLY: acknowledge a lost range at once instead of after its
     * in-flight reconciles end, to prove the checkers notice. */
    bool ack_before_drain;
} kcr__shard_member_config;

typedef enum kcr__shard_state {
    KCR__SHARD_JOINING, /* reading the ring, writing its Lease */
    KCR__SHARD_PROBING, /* its identity's Lease is held by another instance: watching
                           whether that one still renews */
    KCR__SHARD_ACTIVE,  /* in the ring */
    KCR__SHARD_FENCED,  /* past its renew deadline: admits nothing until a write succeeds */
    KCR__SHARD_LEAVING, /* out of the ring, draining, then releases its Lease */
    KCR__SHARD_LEFT,    /* released */
    KCR__SHARD_REFUSED  /* another live instance holds its identity (kcr__shard_member_error) */
} kcr__shard_state;

typedef struct kcr__shard_member kcr__shard_member;

/* The config's strings are copied; `store` is borrowed for the member's life. */
kcr_err kcr__shard_member_new(const kcr__shard_member_config *config, const kcr__lease_store *store,
                              kcr__shard_member **out);
void kcr__shard_member_free(kcr__shard_member *m);

/* One step: join, renew, follow the ring, drain and acknowledge, claim.
 * Call it every retry_ms or more often. Returns the store's error when a
 * Lease request failed (the member retries at the next step);
 * KCR_ERR_EXISTS once it has refused to start. */
kcr_err kcr__shard_member_sync(kcr__shard_member *m, int64_t now_ms);

/* Whether a reconcile of a key with this shard hash may start now; if so it
 * is in flight until kcr__shard_member_end(m, hash). */
bool kcr__shard_member_begin(kcr__shard_member *m, uint64_t hash, int64_t now_ms);
void kcr__shard_member_end(kcr__shard_member *m, uint64_t hash);

/* Starts a graceful leave: stop admitting, drain, wait out what a previous
 * instance published, release the Lease (over the following steps;
 * keeping the slot for a restart when the config's restart_grace_ms is
 * set). */
void kcr__shard_member_leave(kcr__shard_member *m);

kcr__shard_state kcr__shard_member_state(const kcr__shard_member *m);
/* Why the member refused to start ("" otherwise); borrowed until the next call. */
const char *kcr__shard_member_error(const kcr__shard_member *m);
/* The ranges it admits now (borrowed until the next call). */
const kcr__ranges *kcr__shard_member_admitted(const kcr__shard_member *m);

/* "" while the Lease times are consistent with the margin; else which
 * member's Lease showed a clock skewed past it (also logged, as a warning,
 * when it first shows). Borrowed until the next call. */
const char *kcr__shard_member_skew(const kcr__shard_member *m);

/* How far in this member's future (ms, 0 if none) another held Lease of the
 * ring was last renewed, at the last sync: a lower bound of how far that
 * replica's clock runs ahead (a renewal is never in its writer's future).
 * Past the fencing margin, kcr__shard_member_skew reports it. */
int64_t kcr__shard_member_ahead_ms(const kcr__shard_member *m);

/* "" while every Lease of the ring is well formed; else what is wrong with
 * one (no identity label, no slot, unreadable held ranges) and how the
 * member treats it (also logged, as a warning, when it first shows).
 * Borrowed until the next call. */
const char *kcr__shard_member_problem(const kcr__shard_member *m);

/* How many reconciles it has in flight (for reports and tests). */
size_t kcr__shard_member_inflight(const kcr__shard_member *m);

/* Whether the ring gives this member `hash` (at its last step) while it is
 * active: a key it does not admit yet but will once its claim succeeds. */
bool kcr__shard_member_wants(const kcr__shard_member *m, uint64_t hash);

/* What the ring gives it (empty unless active) and what it drains (the
 * hashes of reconciles in flight in ranges it lost). Borrowed until the
 * next sync, check or leave. */
const kcr__ranges *kcr__shard_member_want(const kcr__shard_member *m);
const kcr__ranges *kcr__shard_member_draining(const kcr__shard_member *m);

/* What the live Leases of the ring published at the last sync, its own
 * included: a hash outside it has no replica that may be reconciling it.
 * Borrowed until the next sync. */
const kcr__ranges *kcr__shard_member_covered(const kcr__shard_member *m);

/* The ring of the live Leases at the last step of an active member (its
 * own Lease included), NULL otherwise. Borrowed until the next sync. */
const struct kcr__ring *kcr__shard_member_ring(const kcr__shard_member *m);

/* What one unexpired Lease of the ring published (its held ranges; the
 * whole space when they do not parse). */
typedef struct kcr__shard_published {
    char *identity;
    kcr__ranges ranges;
} kcr__shard_published;

typedef struct kcr__shard_published_list {
    kcr__shard_published *items;
    size_t n;
} kcr__shard_published_list;

/* A copy of what every unexpired Lease (this member's own included, and
 * released ones still draining) published at the last sync, into *out
 * (cleared first). */
kcr_err kcr__shard_member_published(const kcr__shard_member *m, kcr__shard_published_list *out);
void kcr__shard_published_list_clear(kcr__shard_published_list *l);
/* Whether `identity` published `hash` in l. */
bool kcr__shard_published_has(const kcr__shard_published_list *l, const char *identity,
                              uint64_t hash);

/* Whether a reconcile of a key with this shard hash is in flight (begun,
 * not ended). */
bool kcr__shard_member_running(const kcr__shard_member *m, uint64_t hash);

/* Fences it if its renew deadline has passed at now_ms (as sync and begin
 * do); returns its state. */
kcr__shard_state kcr__shard_member_check(kcr__shard_member *m, int64_t now_ms);

/* When (now_ms clock) an active member fences unless a write succeeds
 * first: its last successful write's send time + renew_deadline_ms;
 * INT64_MAX when not active. */
int64_t kcr__shard_member_fence_at(const kcr__shard_member *m);

/* Its slot in the ring; -1 before it joined. */
int kcr__shard_member_slot(const kcr__shard_member *m);

#endif
