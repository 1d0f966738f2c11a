/* kcr/shard.h: FNV-1a 64 against the published test vectors and against
 * keys taken from objects, the half-open ranges with end 0 as 2^64, and
 * the buckets of the children's bucket label. */
#include <criterion/criterion.h>
#include <string.h>

#include "kcr/shard.h"

static uint64_t hash_str(const char *s)
{
    return kcr_shard_hash(s, strlen(s));
}

Test(shard_hash, fnv1a_64_vectors)
{
    cr_expect_eq(kcr_shard_hash(NULL, 0), UINT64_C(0xcbf29ce484222325));
    cr_expect_eq(hash_str("a"), UINT64_C(0xaf63dc4c8601ec8c));
    cr_expect_eq(hash_str("foobar"), UINT64_C(0x85944171f73967e8));
    /* the bytes count, not a C string: an embedded NUL changes the hash */
    cr_expect_neq(kcr_shard_hash("a\0b", 3), hash_str("a"));
}

Test(shard_hash, object_keys)
{
    const char *json = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c\","
                       "\"namespace\":\"kube-system\","
                       "\"uid\":\"3f8b0a6e-9c1d-4f5e-8a2b-1c3d5e7f9a0b\"}}";
    kcr_object *obj = NULL;
    cr_assert_eq(kcr_object_parse(json, 0, &obj), KCR_OK);
    cr_expect_eq(kcr_object_shard_hash(obj, KCR_SHARD_BY_UID), UINT64_C(0x3c9ea98b36de65e6));
    cr_expect_eq(kcr_object_shard_hash(obj, KCR_SHARD_BY_NAMESPACE),
                 UINT64_C(0xdf65c7bc1d82b35e));
    kcr_object_unref(obj);

    cr_assert_eq(kcr_object_parse("{\"metadata\":{\"name\":\"n\"}}", 0, &obj), KCR_OK);
    cr_expect_eq(kcr_object_shard_hash(obj, KCR_SHARD_BY_NAMESPACE), hash_str(""));
    cr_expect_eq(kcr_object_shard_hash(obj, KCR_SHARD_BY_UID), hash_str(""));
    kcr_object_unref(obj);
    cr_expect_eq(kcr_object_shard_hash(NULL, KCR_SHARD_BY_UID), hash_str(""));
}

Test(shard_hash, half_open_ranges)
{
    kcr_shard_range low = {0, UINT64_C(0x8000000000000000)};
    kcr_shard_range high = {UINT64_C(0x8000000000000000), 0};
    kcr_shard_range all = {0, 0};
    kcr_shard_range empty = {5, 5};

    cr_expect(kcr_shard_range_contains(low, 0));
    cr_expect(kcr_shard_range_contains(low, UINT64_C(0x7fffffffffffffff)));
    cr_expect_not(kcr_shard_range_contains(low, UINT64_C(0x8000000000000000)));
    cr_expect(kcr_shard_range_contains(high, UINT64_C(0x8000000000000000)));
    cr_expect(kcr_shard_range_contains(high, UINT64_MAX));
    cr_expect_not(kcr_shard_range_contains(high, 0));
    cr_expect(kcr_shard_range_contains(all, 0));
    cr_expect(kcr_shard_range_contains(all, UINT64_MAX));
    cr_expect_not(kcr_shard_range_contains(empty, 5));
}

/* A bucket is the top 8 bits of a hash (KCR_SHARD_BUCKETS = 256). */
Test(shard_hash, buckets)
{
    cr_expect_eq(kcr_shard_bucket(0), 0);
    cr_expect_eq(kcr_shard_bucket(UINT64_C(0x00ffffffffffffff)), 0);
    cr_expect_eq(kcr_shard_bucket(UINT64_C(0x0100000000000000)), 1);
    cr_expect_eq(kcr_shard_bucket(UINT64_C(0x8000000000000000)), 128);
    cr_expect_eq(kcr_shard_bucket(UINT64_MAX), KCR_SHARD_BUCKETS - 1);
    cr_expect_eq(kcr_shard_bucket(hash_str("a")), 0xaf);
}
