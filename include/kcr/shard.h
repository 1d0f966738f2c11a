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
 * Value types and pure functions: safe from any thread, nothing allocated. */
#ifndef KCR_SHARD_H
#define KCR_SHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcr/export.h"
#include "kcr/object.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Which metadata field is an object's shard key (the only two fields
 * shardRange() accepts). */
typedef enum kcr_shard_field {
    KCR_SHARD_BY_UID = 0,      /* object.metadata.uid: spreads every object */
    KCR_SHARD_BY_NAMESPACE = 1 /* object.metadata.namespace: a namespace stays whole */
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

/* The hash of obj's shard key: kcr_shard_hash of its metadata.uid or
 * metadata.namespace ("" when absent, as for a cluster-scoped object's
 * namespace). obj is borrowed; NULL hashes as an absent key. */
KCR_API uint64_t kcr_object_shard_hash(const kcr_object *obj, kcr_shard_field field);

/* Whether `hash` falls in r. */
KCR_API bool kcr_shard_range_contains(kcr_shard_range r, uint64_t hash);

#ifdef __cplusplus
}
#endif

#endif
