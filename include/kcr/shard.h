/* Shard keys, hashes and ranges: the arithmetic of Kubernetes' sharded list
 * and watch (KEP-5866, feature gate ShardedListAndWatch, alpha since 1.36),
 * shared by the client's shard selectors, the fake API and the sharding
 * layer's ring, so that every replica and the apiserver put a key in the
 * same place.
 *
 * A shard key is the raw bytes of an object's metadata.uid or
 * metadata.namespace; its hash is 64-bit FNV-1a over those bytes, as the
 * apiserver's shardRange() computes it. A range is a half-open interval
 * [start, end) of that 64-bit space.
 *
 * Value types and pure functions: safe from any thread; only the selector
 * functions allocate, and only what they hand back. */
#ifndef KCR_SHARD_H
#define KCR_SHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcr/error.h"
#include "kcr/export.h"
#include "kcr/object.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Which field is an object's shard key. The apiserver's shardRange()
 * accepts the first two; KCR_SHARD_BY_CONTROLLER is kcr's own, for caches of
 * owned objects that follow their owner: a reflector filters on it on the
 * client and never sends it (kcr_reflector_options.shard_selector). */
typedef enum kcr_shard_field {
    KCR_SHARD_BY_UID = 0,       /* object.metadata.uid: spreads every object */
    KCR_SHARD_BY_NAMESPACE = 1, /* object.metadata.namespace: a namespace stays whole */
    KCR_SHARD_BY_CONTROLLER = 2 /* the uid of the object's controller ownerReference: a child
                                   hashes as its owner does BY_UID; an object with no
                                   controller matches every selector */
} kcr_shard_field;

/* A half-open range [start, end) of the hash space. end 0 stands for 2^64
 * (the top, written 0x10000000000000000 by the apiserver), so {0, 0} is the
 * whole space; a range with start >= end (end not 0) is empty. */
typedef struct kcr_shard_range {
    uint64_t start;
    uint64_t end;
} kcr_shard_range;

/* 64-bit FNV-1a of `len` bytes (offset basis 0xcbf29ce484222325, prime
 * 0x100000001b3). `bytes` may be NULL when len is 0. */
KCR_API uint64_t kcr_shard_hash(const char *bytes, size_t len);

/* The hash of obj's shard key: kcr_shard_hash of its metadata.uid,
 * metadata.namespace or controller reference's uid ("" when absent, as for
 * a cluster-scoped object's namespace). obj is borrowed; NULL hashes as an
 * absent key. */
KCR_API uint64_t kcr_object_shard_hash(const kcr_object *obj, kcr_shard_field field);

/* Whether `hash` falls in r. */
KCR_API bool kcr_shard_range_contains(kcr_shard_range r, uint64_t hash);

/* ---- Child buckets: a label the apiserver can select children by ----------------------
 * kcr_ctrlutil_set_controller_reference (kcr/controllerutil.h) stamps a child
 * with KCR_SHARD_BUCKET_LABEL, the decimal bucket of its controller's uid
 * hash, so a sharded manager's owned caches can ask the apiserver for the
 * children of their ranges with a set-based label selector
 * (`kcr.dev/shard-bucket in (3,4,5)`) instead of receiving every child
 * (kcr_sharding_options.child_bucket_selector, docs/sharding.md). */

/* The bucket label's key; its value is kcr_shard_bucket() of the
 * controller's uid hash in decimal ("0" to "255"). */
#define KCR_SHARD_BUCKET_LABEL "kcr.dev/shard-bucket"
/* Buckets: bucket b holds the hashes [b << 56, (b + 1) << 56). */
#define KCR_SHARD_BUCKETS 256

/* The bucket of `hash`: its top 8 bits. Pure, thread-safe. */
KCR_API unsigned kcr_shard_bucket(uint64_t hash);

/* ---- Shard selectors: the shardSelector parameter of list and watch -------------------
 * The text is the apiserver's: one or more
 *     shardRange(object.metadata.uid, '0x<16 hex digits>', '0x<16 hex digits>')
 * terms joined with ||, every term on the same field, start inclusive, end
 * exclusive, lower-case hex, the top written '0x10000000000000000'. The
 * apiserver echoes it in metadata.shardInfo.selector in its normal form:
 * terms in the order given, ", " between arguments, " || " between terms
 * (what kcr_shard_selector_format() writes). */

/* The text `field` takes in a selector ("object.metadata.uid",
 * "object.metadata.namespace", or kcr's "kcr.controllerReference.uid",
 * which no apiserver accepts); NULL for a value outside the enum. Static. */
KCR_API const char *kcr_shard_field_path(kcr_shard_field field);

/* Writes the selector of `n` ranges (n >= 1) on `field` in the apiserver's
 * normal form into *out (malloc'd, caller frees). Each range must be
 * non-empty: start < end, or end 0 (the top); the apiserver refuses an
 * empty one. KCR_ERR_INVALID (with kcr_last_error() naming the range) for
 * n 0, an empty range or an unknown field; KCR_ERR_NOMEM. ranges is
 * borrowed for the call. Thread-safe. */
KCR_API kcr_err kcr_shard_selector_format(kcr_shard_field field, const kcr_shard_range *ranges,
                                          size_t n, char **out);

/* Parses a selector as the apiserver does (and kcr's controller field,
 * which the apiserver refuses): whitespace and parentheses
 * around terms allowed, strings in '...' or "...", the same validation
 * (0x prefix, exactly 16 lower-case hex digits or the top, start < end,
 * one field for every term). On success *field, *ranges (malloc'd, caller
 * frees) and *n (>= 1); on failure KCR_ERR_INVALID with kcr_last_error()
 * saying what and at which byte offset, and *ranges NULL, *n 0. text is
 * borrowed for the call. Thread-safe. */
KCR_API kcr_err kcr_shard_selector_parse(const char *text, kcr_shard_field *field,
                                         kcr_shard_range **ranges, size_t *n);

/* Whether obj's shard key on `field` hashes into any of the n ranges (n 0:
 * false). What the apiserver keeps for a selector of those ranges; on
 * KCR_SHARD_BY_CONTROLLER, an object without a controller reference always
 * matches (n > 0). obj and ranges are borrowed for the call. Thread-safe. */
KCR_API bool kcr_shard_match(const kcr_object *obj, kcr_shard_field field,
                             const kcr_shard_range *ranges, size_t n);

#ifdef __cplusplus
}
#endif

#endif
