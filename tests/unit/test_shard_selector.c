/* kcr/shard.h selectors: the apiserver's normal form written and read back,
 * the top bound, the apiserver's validation rules on malformed text (clear
 * errors, nothing leaked), every prefix and many byte mutations of a valid
 * selector handled without a crash, and matching by hash range. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcr/shard.h"

#define UID_HALVES                                                                                 \
    "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || "              \
    "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"

Test(shard_selector, format_normal_form)
{
    char *s = NULL;
    kcr_shard_range halves[] = {{0, UINT64_C(0x8000000000000000)},
                                {UINT64_C(0x8000000000000000), 0}};
    cr_assert_eq(kcr_shard_selector_format(KCR_SHARD_BY_UID, halves, 2, &s), KCR_OK);
    cr_expect_str_eq(s, UID_HALVES);
    free(s);

    kcr_shard_range one = {UINT64_C(0x00000000000000ff), UINT64_C(0xabcdef0123456789)};
    cr_assert_eq(kcr_shard_selector_format(KCR_SHARD_BY_NAMESPACE, &one, 1, &s), KCR_OK);
    cr_expect_str_eq(s, "shardRange(object.metadata.namespace, '0x00000000000000ff', "
                        "'0xabcdef0123456789')");
    free(s);

    kcr_shard_range all = {0, 0};
    cr_assert_eq(kcr_shard_selector_format(KCR_SHARD_BY_UID, &all, 1, &s), KCR_OK);
    cr_expect_str_eq(s, "shardRange(object.metadata.uid, '0x0000000000000000', "
                        "'0x10000000000000000')");
    free(s);
}

Test(shard_selector, format_refuses)
{
    char *s = (char *)"untouched";
    kcr_shard_range r = {5, 5};
    cr_expect_eq(kcr_shard_selector_format(KCR_SHARD_BY_UID, &r, 1, &s), KCR_ERR_INVALID);
    cr_expect_null(s);
    cr_expect(strstr(kcr_last_error(), "range 0") != NULL, "%s", kcr_last_error());
    r = (kcr_shard_range){9, 3};
    cr_expect_eq(kcr_shard_selector_format(KCR_SHARD_BY_UID, &r, 1, &s), KCR_ERR_INVALID);
    r = (kcr_shard_range){0, 1};
    cr_expect_eq(kcr_shard_selector_format(KCR_SHARD_BY_UID, &r, 0, &s), KCR_ERR_INVALID);
    cr_expect_eq(kcr_shard_selector_format(KCR_SHARD_BY_UID, NULL, 1, &s), KCR_ERR_INVALID);
    cr_expect_eq(kcr_shard_selector_format((kcr_shard_field)7, &r, 1, &s), KCR_ERR_INVALID);
    cr_expect_eq(kcr_shard_selector_format(KCR_SHARD_BY_UID, &r, 1, NULL), KCR_ERR_INVALID);
    cr_expect_null(kcr_shard_field_path((kcr_shard_field)7));
}

Test(shard_selector, parse_normal_form)
{
    kcr_shard_field f = KCR_SHARD_BY_NAMESPACE;
    kcr_shard_range *r = NULL;
    size_t n = 0;
    cr_assert_eq(kcr_shard_selector_parse(UID_HALVES, &f, &r, &n), KCR_OK, "%s", kcr_last_error());
    cr_expect_eq(f, KCR_SHARD_BY_UID);
    cr_assert_eq(n, 2);
    cr_expect_eq(r[0].start, 0);
    cr_expect_eq(r[0].end, UINT64_C(0x8000000000000000));
    cr_expect_eq(r[1].start, UINT64_C(0x8000000000000000));
    cr_expect_eq(r[1].end, 0, "the top reads as end 0");
    free(r);
}

/* Text the apiserver accepts in other spellings comes back in normal form. */
Test(shard_selector, parse_other_spellings)
{
    static const char *const texts[] = {
        "shardRange(object.metadata.uid,'0x0000000000000000','0x8000000000000000')||"
        "shardRange(object.metadata.uid,\"0x8000000000000000\",\"0x10000000000000000\")",
        "  ( shardRange ( object . metadata . uid , '0x0000000000000000' , "
        "'0x8000000000000000' ) ) \n||\t((shardRange(object.metadata.uid, "
        "'0x8000000000000000', '0x10000000000000000')))  ",
    };
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        kcr_shard_field f;
        kcr_shard_range *r = NULL;
        size_t n = 0;
        cr_assert_eq(kcr_shard_selector_parse(texts[i], &f, &r, &n), KCR_OK, "%zu: %s", i,
                     kcr_last_error());
        char *s = NULL;
        cr_assert_eq(kcr_shard_selector_format(f, r, n, &s), KCR_OK);
        cr_expect_str_eq(s, UID_HALVES, "text %zu", i);
        free(s);
        free(r);
    }
}

/* A seeded stream of random range sets survives format -> parse -> format. */
Test(shard_selector, round_trips)
{
    uint64_t x = UINT64_C(0x9e3779b97f4a7c15);
    for (int round = 0; round < 2000; round++) {
        kcr_shard_range in[5];
        size_t n = 1 + (size_t)(round % 5);
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            uint64_t a = x;
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            uint64_t b = x;
            if (round % 7 == 0)
                b = 0; /* to the top */
            else if (a == b)
                b = a + 1;
            if (b != 0 && a > b)
                in[i] = (kcr_shard_range){b, a};
            else
                in[i] = (kcr_shard_range){a, b};
            if (in[i].end == 0 && round % 2)
                in[i].start = 0;
        }
        kcr_shard_field field = round % 3 ? KCR_SHARD_BY_UID : KCR_SHARD_BY_NAMESPACE;
        char *s = NULL;
        cr_assert_eq(kcr_shard_selector_format(field, in, n, &s), KCR_OK, "%s", kcr_last_error());
        kcr_shard_field f;
        kcr_shard_range *out = NULL;
        size_t m = 0;
        cr_assert_eq(kcr_shard_selector_parse(s, &f, &out, &m), KCR_OK, "%s: %s", s,
                     kcr_last_error());
        cr_assert_eq(f, field);
        cr_assert_eq(m, n);
        for (size_t i = 0; i < n; i++) {
            cr_assert_eq(out[i].start, in[i].start, "%s", s);
            cr_assert_eq(out[i].end, in[i].end, "%s", s);
        }
        free(out);
        free(s);
    }
}

typedef struct bad_case {
    const char *text;
    const char *says; /* expected in kcr_last_error() */
} bad_case;

Test(shard_selector, parse_refuses_malformed)
{
    static const bad_case cases[] = {
        {"", "empty"},
        {"   ", "empty"},
        {"shardRange(object.metadata.name, '0x0000000000000000', '0x8000000000000000')",
         "unsupported field path \"object.metadata.name\""},
        {"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || "
         "shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')",
         "same field"},
        {"shardRange(object.metadata.uid, '0x0', '0x8000000000000000')", "16 hex digits"},
        {"shardRange(object.metadata.uid, '0x0000000000000000', '0x80000000000000000')",
         "16 hex digits"},
        {"shardRange(object.metadata.uid, '0000000000000000', '0x8000000000000000')",
         "'0x' prefix"},
        {"shardRange(object.metadata.uid, '0x000000000000000A', '0x8000000000000000')",
         "invalid hex character 'A'"},
        {"shardRange(object.metadata.uid, '0x8000000000000000', '0x8000000000000000')",
         "less than"},
        {"shardRange(object.metadata.uid, '0x9000000000000000', '0x8000000000000000')",
         "less than"},
        {"shardRange(object.metadata.uid, '0x10000000000000000', '0x10000000000000000')",
         "less than"},
        {"shardRange(object.metadata.uid, 0, '0x8000000000000000')", "string literal"},
        {"shardRange(object.metadata.uid, '0x0000000000000000')", "expected ','"},
        {"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000', "
         "'0x0000000000000001')",
         "exactly 3 arguments"},
        {"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000'",
         "exactly 3 arguments"},
        {"shardRange(object.metadata.uid, '0x0000000000000000, '0x8000000000000000')",
         "got 18 digits"},
        {"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000",
         "unterminated"},
        {"shardRange(object.metadata.uid, '0x000000000000000\\0', '0x8000000000000000')",
         "escapes"},
        {"hashRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
         "unsupported function \"hashRange\""},
        {"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') &&"
         " shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
         "unexpected text"},
        {"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') |"
         " shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
         "unexpected text"},
        {"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') ||",
         "expected shardRange"},
        {"(shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
         "expected ')'"},
        {"!shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
         "expected shardRange"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        kcr_shard_field f;
        kcr_shard_range *r = (kcr_shard_range *)1;
        size_t n = 9;
        cr_expect_eq(kcr_shard_selector_parse(cases[i].text, &f, &r, &n), KCR_ERR_INVALID,
                     "accepted: %s", cases[i].text);
        cr_expect_null(r);
        cr_expect_eq(n, 0);
        cr_expect(strstr(kcr_last_error(), cases[i].says) != NULL, "%s\n  said: %s\n  want: %s",
                  cases[i].text, kcr_last_error(), cases[i].says);
        cr_expect(strstr(kcr_last_error(), "shard selector") != NULL, "%s", kcr_last_error());
    }
    kcr_shard_field f;
    kcr_shard_range *r;
    size_t n;
    cr_expect_eq(kcr_shard_selector_parse(NULL, &f, &r, &n), KCR_ERR_INVALID);
}

/* Every proper prefix of a valid selector is refused, and so is nesting
 * deeper than the bound; nothing crashes or leaks (ASan/valgrind runs). */
Test(shard_selector, prefixes_and_depth)
{
    const char *full = UID_HALVES;
    size_t len = strlen(full);
    char buf[512];
    for (size_t i = 0; i < len; i++) {
        memcpy(buf, full, i);
        buf[i] = '\0';
        kcr_shard_field f;
        kcr_shard_range *r = NULL;
        size_t n = 0;
        kcr_err err = kcr_shard_selector_parse(buf, &f, &r, &n);
        /* only the first term whole (a space after it is whitespace) parses */
        size_t first = strlen(UID_HALVES) - strlen(" || shardRange(object.metadata.uid, "
                                                   "'0x8000000000000000', '0x10000000000000000')");
        if (i == first || i == first + 1) {
            cr_expect_eq(err, KCR_OK, "prefix %zu: %s", i, buf);
            cr_expect_eq(n, 1);
        } else {
            cr_expect_eq(err, KCR_ERR_INVALID, "prefix %zu accepted: %s", i, buf);
        }
        free(r);
    }

    char deep[1024] = "";
    const char *term =
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x0000000000000001')";
    for (int depth = 30; depth <= 34; depth++) {
        size_t k = 0;
        for (int i = 0; i < depth; i++)
            deep[k++] = '(';
        memcpy(deep + k, term, strlen(term));
        k += strlen(term);
        for (int i = 0; i < depth; i++)
            deep[k++] = ')';
        deep[k] = '\0';
        kcr_shard_field f;
        kcr_shard_range *r = NULL;
        size_t n = 0;
        kcr_err err = kcr_shard_selector_parse(deep, &f, &r, &n);
        cr_expect_eq(err, depth <= 32 ? KCR_OK : KCR_ERR_INVALID, "depth %d", depth);
        free(r);
    }
}

/* Byte mutations of a valid selector: each is either refused with an error
 * or parsed into ranges that format back into text that parses the same. */
Test(shard_selector, mutations)
{
    const char *full = UID_HALVES;
    size_t len = strlen(full);
    static const char bytes[] = {'\0', ' ', '(', ')', '\'', '"', ',',
                                 '|',  'x', 'f', '0', '9',  '\\'};
    char buf[512];
    size_t accepted = 0, refused = 0;
    for (size_t pos = 0; pos < len; pos++) {
        for (size_t b = 0; b < sizeof bytes; b++) {
            memcpy(buf, full, len + 1);
            buf[pos] = bytes[b];
            kcr_shard_field f;
            kcr_shard_range *r = NULL;
            size_t n = 0;
            if (kcr_shard_selector_parse(buf, &f, &r, &n) != KCR_OK) {
                cr_assert_null(r);
                refused++;
                continue;
            }
            accepted++;
            char *s = NULL;
            cr_assert_eq(kcr_shard_selector_format(f, r, n, &s), KCR_OK, "%s", buf);
            kcr_shard_field f2;
            kcr_shard_range *r2 = NULL;
            size_t n2 = 0;
            cr_assert_eq(kcr_shard_selector_parse(s, &f2, &r2, &n2), KCR_OK, "%s", s);
            cr_assert_eq(n2, n);
            cr_assert_eq(memcmp(r, r2, n * sizeof *r), 0);
            free(r2);
            free(s);
            free(r);
        }
    }
    cr_expect_gt(accepted, 0); /* digit swaps, a space for a space, ... */
    cr_expect_gt(refused, accepted);
}

static kcr_object *with_uid(const char *uid)
{
    char json[256];
    snprintf(json, sizeof json,
             "{\"metadata\":{\"name\":\"n\",\"namespace\":\"ns\",\"uid\":\"%s\"}}", uid);
    kcr_object *obj = NULL;
    cr_assert_eq(kcr_object_parse(json, 0, &obj), KCR_OK);
    return obj;
}

Test(shard_selector, match)
{
    kcr_object *obj = with_uid("3f8b0a6e-9c1d-4f5e-8a2b-1c3d5e7f9a0b");
    uint64_t h = kcr_object_shard_hash(obj, KCR_SHARD_BY_UID);
    kcr_shard_range exact = {h, h + 1};
    cr_expect(kcr_shard_match(obj, KCR_SHARD_BY_UID, &exact, 1));
    kcr_shard_range below = {0, h};
    cr_expect_not(kcr_shard_match(obj, KCR_SHARD_BY_UID, &below, 1), "end is exclusive");
    kcr_shard_range above = {h + 1, 0};
    cr_expect_not(kcr_shard_match(obj, KCR_SHARD_BY_UID, &above, 1));
    kcr_shard_range two[] = {below, above};
    cr_expect_not(kcr_shard_match(obj, KCR_SHARD_BY_UID, two, 2));
    kcr_shard_range three[] = {below, above, exact};
    cr_expect(kcr_shard_match(obj, KCR_SHARD_BY_UID, three, 3));
    kcr_shard_range all = {0, 0};
    cr_expect(kcr_shard_match(obj, KCR_SHARD_BY_UID, &all, 1));
    cr_expect_not(kcr_shard_match(obj, KCR_SHARD_BY_UID, &all, 0), "no ranges: nothing");
    uint64_t hn = kcr_object_shard_hash(obj, KCR_SHARD_BY_NAMESPACE);
    kcr_shard_range ns = {hn, hn + 1};
    cr_expect(kcr_shard_match(obj, KCR_SHARD_BY_NAMESPACE, &ns, 1));
    cr_expect_eq(kcr_shard_match(obj, KCR_SHARD_BY_UID, &ns, 1), hn == h);
    kcr_object_unref(obj);

    /* the top hash itself: 2^64-1 is inside [x, top) */
    kcr_shard_range top = {UINT64_MAX, 0};
    cr_expect(kcr_shard_range_contains(top, UINT64_MAX));
}

/* kcr's own field: a child hashes as its controller's uid does BY_UID; an
 * object without a controller matches any selector; the field round-trips
 * through the selector text. */
Test(shard_selector, by_controller)
{
    const char *owner_uid = "3f8b0a6e-9c1d-4f5e-8a2b-1c3d5e7f9a0b";
    kcr_object *owner = with_uid(owner_uid);
    char json[512];
    snprintf(json, sizeof json,
             "{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\",\"uid\":\"u-child\","
             "\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Other\",\"name\":\"o\","
             "\"uid\":\"u-other\"},{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"name\":\"n\","
             "\"uid\":\"%s\",\"controller\":true}]}}",
             owner_uid);
    kcr_object *child = NULL, *orphan = with_uid("u-orphan");
    cr_assert_eq(kcr_object_parse(json, 0, &child), KCR_OK);
    uint64_t h = kcr_object_shard_hash(owner, KCR_SHARD_BY_UID);
    cr_expect_eq(kcr_object_shard_hash(child, KCR_SHARD_BY_CONTROLLER), h,
                 "the controller's uid, not the first owner's");
    kcr_shard_range exact = {h, h + 1}, rest = {h + 1, 0};
    cr_expect(kcr_shard_match(child, KCR_SHARD_BY_CONTROLLER, &exact, 1));
    cr_expect_not(kcr_shard_match(child, KCR_SHARD_BY_CONTROLLER, &rest, 1));
    cr_expect(kcr_shard_match(orphan, KCR_SHARD_BY_CONTROLLER, &exact, 1), "no controller: kept");
    cr_expect(kcr_shard_match(orphan, KCR_SHARD_BY_CONTROLLER, &rest, 1));
    cr_expect_not(kcr_shard_match(orphan, KCR_SHARD_BY_CONTROLLER, &rest, 0));

    char *text = NULL;
    cr_assert_eq(kcr_shard_selector_format(KCR_SHARD_BY_CONTROLLER, &exact, 1, &text), KCR_OK);
    cr_expect(strstr(text, "shardRange(kcr.controllerReference.uid, ") == text, "%s", text);
    kcr_shard_field field = KCR_SHARD_BY_UID;
    kcr_shard_range *ranges = NULL;
    size_t n = 0;
    cr_assert_eq(kcr_shard_selector_parse(text, &field, &ranges, &n), KCR_OK, "%s",
                 kcr_last_error());
    cr_expect_eq(field, KCR_SHARD_BY_CONTROLLER);
    cr_expect(n == 1 && ranges[0].start == exact.start && ranges[0].end == exact.end);
    free(ranges);
    free(text);
    kcr_object_unref(owner);
    kcr_object_unref(child);
    kcr_object_unref(orphan);
}

/* Two complementary selectors split a population exactly. The uids are
 * random, as the apiserver's (v4) are: FNV-1a's top bits barely move when
 * only the last bytes of a key change, so sequential keys would cluster. */
Test(shard_selector, complementary_halves_partition)
{
    kcr_shard_range lo = {0, UINT64_C(0x8000000000000000)}, hi = {UINT64_C(0x8000000000000000), 0};
    int in_lo = 0, in_hi = 0;
    uint64_t x = UINT64_C(88172645463325252);
    for (int i = 0; i < 1000; i++) {
        char uid[64];
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        uint64_t y = x * UINT64_C(0x9e3779b97f4a7c15);
        snprintf(uid, sizeof uid, "%08x-%04x-4%03x-8%03x-%012llx", (unsigned)(x >> 32),
                 (unsigned)(x >> 16) & 0xffffu, (unsigned)x & 0xfffu, (unsigned)(y >> 52),
                 (unsigned long long)(y & UINT64_C(0xffffffffffff)));
        kcr_object *obj = with_uid(uid);
        bool a = kcr_shard_match(obj, KCR_SHARD_BY_UID, &lo, 1);
        bool b = kcr_shard_match(obj, KCR_SHARD_BY_UID, &hi, 1);
        cr_assert_neq(a, b, "uid %s in both or neither", uid);
        in_lo += a, in_hi += b;
        kcr_object_unref(obj);
    }
    cr_expect_gt(in_lo, 400);
    cr_expect_gt(in_hi, 400);
}
