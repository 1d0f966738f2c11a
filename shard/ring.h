/* Internal: the shard ring, the assignment of the 64-bit shard-hash space
 * (kcr/shard.h) to the members of a ring, computed from the member list
 * alone, so every replica that sees the same Leases computes the same owner
 * for every hash. docs/sharding.md explains the layout:
 *
 * - Each member holds a slot, a small number (0 .. KCR__RING_MAX_SLOTS - 1)
 *   it claims on its Lease. M = the highest held slot + 1.
 * - The layout of M slots is built by adding slots one at a time: slot k
 *   takes 1/(k(k+1)) of the space from the tail of each slot below it, so
 *   every slot holds 1/M, slot k in at most max(1, k) contiguous ranges,
 *   and adding slot M moves exactly 1/(M+1) of the space.
 * - A vacant slot below M (a member left or crashed and no one took its
 *   slot yet) is redistributed per cell of a fixed 64-cell grid by
 *   rendezvous hashing over the members' slots, so a leave moves only the
 *   leaver's hashes.
 *
 * Two members claiming one slot: the one with the smaller identity (bytewise)
 * gets it, the other is unplaced and owns nothing until it claims a free one.
 *
 * A kcr__ring is immutable once built: safe to read from any thread. */
#ifndef KCR_SHARD_RING_H
#define KCR_SHARD_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcr/error.h"
#include "kcr/shard.h"
#include "object/ranges.h"

#define KCR__RING_MAX_SLOTS 64

typedef struct kcr__ring_member {
    const char *identity; /* unique in the list, non-empty */
    int slot;             /* 0 .. KCR__RING_MAX_SLOTS - 1; anything else: unplaced */
} kcr__ring_member;

typedef struct kcr__ring kcr__ring;

/* Builds the ring of `n` members (the array and its strings are copied; any
 * order). KCR_ERR_INVALID, naming it, for an empty or repeated identity. */
kcr_err kcr__ring_build(const kcr__ring_member *members, size_t n, kcr__ring **out);
void kcr__ring_free(kcr__ring *r);

/* A ring of r's members (the same layout), for a reader on another thread
 * that must outlive r. */
kcr_err kcr__ring_copy(const kcr__ring *r, kcr__ring **out);

/* Whether r was built from exactly these members (any order): callers keep
 * a ring while the Leases they list say the same. */
bool kcr__ring_same_members(const kcr__ring *r, const kcr__ring_member *members, size_t n);

/* The identity owning `hash` (borrowed from r), NULL when the ring has no
 * placed member. */
const char *kcr__ring_owner(const kcr__ring *r, uint64_t hash);

/* The ranges `identity` owns, into *out (cleared first); empty for an
 * unknown or unplaced identity. */
kcr_err kcr__ring_ranges(const kcr__ring *r, const char *identity, kcr__ranges *out);

/* Whether `identity` is a member that holds its slot. */
bool kcr__ring_placed(const kcr__ring *r, const char *identity);

/* The number of members r was built from, placed or not. */
size_t kcr__ring_size(const kcr__ring *r);

/* The identity of member i (0 .. kcr__ring_size() - 1, in identity
 * order) when it is placed, NULL otherwise (borrowed from r). */
const char *kcr__ring_placed_at(const kcr__ring *r, size_t i);

/* Whether a placed member holds `slot`. */
bool kcr__ring_slot_held(const kcr__ring *r, int slot);

/* The lowest slot no placed member holds (KCR__RING_MAX_SLOTS when full). */
int kcr__ring_free_slot(const kcr__ring *r);

#endif
