/* Internal: sets of hash ranges, the currency of the shard layer, kept in
 * object/ beside kcr_shard_match so that informer/'s reflector can use them
 * too (the ranges a selection change gains). A set is a sorted array of
 * disjoint, non-adjacent, non-empty kcr_shard_range (end 0 = 2^64), so two
 * equal sets have equal arrays. Value type: the caller owns a set's array;
 * no locks, safe from any thread on distinct sets. */
#ifndef KCR_OBJECT_RANGES_H
#define KCR_OBJECT_RANGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcr/error.h"
#include "kcr/shard.h"

typedef struct kcr__ranges {
    kcr_shard_range *r; /* malloc'd, sorted by start */
    size_t n;
} kcr__ranges;

void kcr__ranges_clear(kcr__ranges *s);

/* Whether `hash` is in s (binary search). */
bool kcr__ranges_contains(const kcr__ranges *s, uint64_t hash);

/* Whether a and b share a hash. */
bool kcr__ranges_intersects(const kcr__ranges *a, const kcr__ranges *b);

bool kcr__ranges_equal(const kcr__ranges *a, const kcr__ranges *b);

/* *out = a ∪ b, a ∩ b, a − b (out is cleared first and may not alias a or b).
 * KCR_ERR_NOMEM only. */
kcr_err kcr__ranges_union(const kcr__ranges *a, const kcr__ranges *b, kcr__ranges *out);
kcr_err kcr__ranges_intersect(const kcr__ranges *a, const kcr__ranges *b, kcr__ranges *out);
kcr_err kcr__ranges_subtract(const kcr__ranges *a, const kcr__ranges *b, kcr__ranges *out);

/* *dst = a copy of src (dst cleared first). */
kcr_err kcr__ranges_copy(const kcr__ranges *src, kcr__ranges *dst);

/* *out (cleared first) = the hashes in any of the n ranges of `ranges`,
 * which may come in any order, overlap, touch or be empty (a selector's
 * terms): sorted and merged into a set. ranges is borrowed for the call.
 * KCR_ERR_NOMEM only. */
kcr_err kcr__ranges_from_array(const kcr_shard_range *ranges, size_t n, kcr__ranges *out);

/* Appends [start, end) to s, which must lie at or after s's last range
 * (merged with it when adjacent); empty ranges are ignored. */
kcr_err kcr__ranges_append(kcr__ranges *s, uint64_t start, uint64_t end);

/* The number of hashes in s, saturated at UINT64_MAX (the whole space). */
uint64_t kcr__ranges_measure(const kcr__ranges *s);

/* Text form, as published on a Lease: "" for the empty set, else
 * "<start>-<end>" pairs of 16 hex digits joined with ",", end
 * "10000000000000000" for 2^64. kcr__ranges_format mallocs *out;
 * kcr__ranges_parse fills *out (cleared first) and says what is wrong with
 * bad text (KCR_ERR_PARSE). */
kcr_err kcr__ranges_format(const kcr__ranges *s, char **out);
kcr_err kcr__ranges_parse(const char *text, kcr__ranges *out);

#endif
