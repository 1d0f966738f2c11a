/* The one string/byte hash of the library (see hash.h). */
#include "core/hash.h"

#include <string.h>

static inline uint64_t rd64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

uint32_t kcr__hash_extend(uint32_t seed, const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ seed ^ (len * 0xff51afd7ed558ccdull);
    while (len >= 8) {
        h = (h ^ rd64(p)) * 0x100000001b3ull * 0x9E3779B1ull;
        h ^= h >> 29;
        p += 8;
        len -= 8;
    }
    uint64_t tail = 0;
    for (size_t i = 0; i < len; i++)
        tail |= (uint64_t)p[i] << (8 * i);
    h = (h ^ tail) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 32;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 29;
    return (uint32_t)h;
}

uint32_t kcr__hash_bytes(const void *data, size_t len)
{
    return kcr__hash_extend(0, data, len);
}
