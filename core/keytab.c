/* Open-addressing string-keyed table (see keytab.h): the workqueue's items
 * and rate limiter state, and under every core/strmap. */
#include "core/keytab.h"

#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/probe.h"

#define KEYTAB_MIN_CAP 16

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= UINT64_C(0xbf58476d1ce4e5b9);
    x ^= x >> 27;
    x *= UINT64_C(0x94d049bb133111eb);
    x ^= x >> 31;
    return x;
}

static inline uint64_t rd64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline uint64_t rd32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline uint64_t rotl(uint64_t x, int r)
{
    return (x << r) | (x >> (64 - r));
}

/* Fast for short keys (one or two overlapping loads, no loop below 17
 * bytes), finished with a full-avalanche mixer so low bits are usable. */
uint64_t kcr__keytab_hash(const struct kcr__keytab *t, const char *key, size_t len)
{
    return kcr__keytab_hash_seeded(t->seed, key, len);
}

uint64_t kcr__keytab_hash_seeded(uint64_t seed, const char *key, size_t len)
{
    const uint64_t k1 = UINT64_C(0x9e3779b97f4a7c15), k2 = UINT64_C(0xc2b2ae3d27d4eb4f);
    const unsigned char *p = (const unsigned char *)key;
    uint64_t a, b, h = seed ^ (len * k1);
    if (len <= 16) {
        if (len >= 8) {
            a = rd64(p);
            b = rd64(p + len - 8);
        } else if (len >= 4) {
            a = rd32(p);
            b = rd32(p + len - 4);
        } else if (len > 0) {
            a = ((uint64_t)p[0] << 16) | ((uint64_t)p[len >> 1] << 8) | p[len - 1];
            b = 0;
        } else {
            a = b = 0;
        }
    } else {
        size_t n = len;
        while (n > 16) {
            h = rotl((h ^ rd64(p)) * k1, 29) ^ rotl(rd64(p + 8) * k2, 31);
            h *= k1;
            p += 16;
            n -= 16;
        }
        a = rd64(p + n - 16);
        b = rd64(p + n - 8);
    }
    h ^= rotl(a * k2, 31) ^ (b * k1);
    return mix64(h);
}

static size_t cap_for(size_t n)
{
    size_t cap = KEYTAB_MIN_CAP;
    while (cap < n * 2)
        cap <<= 1;
    return cap;
}

int kcr__keytab_init(struct kcr__keytab *t, size_t hint, size_t key_off, size_t len_off)
{
    memset(t, 0, sizeof *t);
    t->min_cap = cap_for(hint);
    t->slots = calloc(t->min_cap, sizeof *t->slots);
    if (!t->slots)
        return -1;
    t->mask = t->min_cap - 1;
    t->key_off = key_off;
    t->len_off = len_off;
    /* Per-table seed: keys from outside cannot be crafted to collide. */
    t->seed = mix64((uint64_t)kcr__now_ns() ^ (uint64_t)(uintptr_t)t);
    return 0;
}

void kcr__keytab_destroy(struct kcr__keytab *t)
{
    free(t->slots);
    t->slots = NULL;
    t->count = 0;
}

static inline int node_has(const struct kcr__keytab *t, const void *node, const char *key,
                           size_t len)
{
    const char *n = node;
    uint32_t nlen;
    memcpy(&nlen, n + t->len_off, sizeof nlen);
    return nlen == len && memcmp(n + t->key_off, key, len) == 0;
}

void *kcr__keytab_find(const struct kcr__keytab *t, const char *key, size_t len, uint64_t hash)
{
    size_t i = hash & t->mask;
    for (;;) {
        const struct kcr__keyslot *s = &t->slots[i];
        if (!s->node)
            return NULL;
        if (s->hash == hash && node_has(t, s->node, key, len))
            return s->node;
        i = (i + 1) & t->mask;
    }
}

static void place(struct kcr__keyslot *slots, size_t mask, uint64_t hash, void *node)
{
    size_t i = hash & mask;
    while (slots[i].node)
        i = (i + 1) & mask;
    slots[i].hash = hash;
    slots[i].node = node;
}

static int resize(struct kcr__keytab *t, size_t cap)
{
    struct kcr__keyslot *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return -1;
    for (size_t i = 0; i <= t->mask; i++)
        if (t->slots[i].node)
            place(slots, cap - 1, t->slots[i].hash, t->slots[i].node);
    free(t->slots);
    t->slots = slots;
    t->mask = cap - 1;
    t->ops_since_resize = 0;
    return 0;
}

int kcr__keytab_insert(struct kcr__keytab *t, uint64_t hash, void *node)
{
    if ((t->count + 1) * 2 > t->mask + 1 && resize(t, (t->mask + 1) * 2) != 0)
        return -1;
    place(t->slots, t->mask, hash, node);
    t->count++;
    t->ops_since_resize++;
    return 0;
}

void kcr__keytab_remove(struct kcr__keytab *t, uint64_t hash, const void *node)
{
    size_t mask = t->mask;
    size_t i = hash & mask;
    while (t->slots[i].node != node)
        i = (i + 1) & mask;
    /* Backward shift (see probe.h). */
    for (size_t j = (i + 1) & mask; t->slots[j].node; j = (j + 1) & mask) {
        if (!kcr__probe_stays(i, t->slots[j].hash & mask, j)) {
            t->slots[i] = t->slots[j];
            i = j;
        }
    }
    t->slots[i].node = NULL;
    t->count--;
    t->ops_since_resize++;
    /* Shrink after a burst (grow at 1/2, shrink at 1/16), but at most once
     * per 8 * capacity operations so fill/drain cycles do not rehash
     * again and again (keeps resizing O(1) amortized per operation). */
    size_t cap = mask + 1;
    if (cap > t->min_cap && t->count * 16 < cap && t->ops_since_resize >= 8 * cap)
        (void)resize(t, cap / 2);
}
