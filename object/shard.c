/* Shard hashing (kcr/shard.h): 64-bit FNV-1a over a shard key's bytes, as the
 * apiserver's shardRange() hashes object.metadata.uid and .namespace. */
#include <string.h>

#include "kcr/shard.h"

#define FNV64_OFFSET_BASIS UINT64_C(0xcbf29ce484222325)
#define FNV64_PRIME UINT64_C(0x100000001b3)

uint64_t kcr_shard_hash(const char *bytes, size_t len)
{
    uint64_t h = FNV64_OFFSET_BASIS;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)bytes[i];
        h *= FNV64_PRIME;
    }
    return h;
}

uint64_t kcr_object_shard_hash(const kcr_object *obj, kcr_shard_field field)
{
    const char *key = "";
    if (obj)
        key = field == KCR_SHARD_BY_NAMESPACE ? kcr_object_namespace(obj) : kcr_object_uid(obj);
    return kcr_shard_hash(key, strlen(key));
}

bool kcr_shard_range_contains(kcr_shard_range r, uint64_t hash)
{
    return hash >= r.start && (r.end == 0 || hash < r.end);
}
