/* Internal: the 32-bit hash of the object model's tables (interned keys,
 * object keys, indexer values), computed once where an object is built.
 * String keys from outside (workqueue keys, string maps) use the key
 * table's seeded 64-bit hash (core/keytab.h). Not cryptographic; no shared
 * state, so thread-safe. */
#ifndef KCR_CORE_HASH_H
#define KCR_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>

/* A fast 32-bit hash of `len` bytes (not cryptographic). */
uint32_t kcr__hash_bytes(const void *data, size_t len);

/* Continues a hash over more bytes (hash of a+b == extend(hash(a), b) is NOT
 * implied; use one consistent sequence of calls). */
uint32_t kcr__hash_extend(uint32_t seed, const void *data, size_t len);

#endif
