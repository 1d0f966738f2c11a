/* shard/ring.c and object/ranges.c: the ring's targets from issue 22 (same
 * owner whatever the member order, balance within 1.10 of the mean, a join
 * moves at most 1/(N+1) + 1 % of keys, a leave only the leaver's), the
 * ranges every member gets, slot conflicts and bad input; range-set algebra,
 * its Lease text and the set of a selector's terms. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <valgrind/valgrind.h>

#include "object/ranges.h"
#include "shard/ring.h"

/* Random UUID-shaped keys from a seeded generator, hashed as the apiserver
 * hashes metadata.uid. */
static uint64_t rng_state = 42;
static uint64_t rng_next(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static uint64_t *uid_hashes(size_t n)
{
    uint64_t *h = malloc(n * sizeof *h);
    cr_assert_not_null(h);
    rng_state = 42;
    for (size_t i = 0; i < n; i++) {
        uint64_t a = rng_next(), b = rng_next();
        char uid[40];
        snprintf(uid, sizeof uid, "%08x-%04x-4%03x-a%03x-%012llx", (unsigned)(a >> 32),
                 (unsigned)(a >> 16) & 0xffff, (unsigned)a & 0xfff, (unsigned)(b >> 52),
                 (unsigned long long)(b & 0xffffffffffffULL));
        h[i] = kcr_shard_hash(uid, strlen(uid));
    }
    return h;
}

static char names[KCR__RING_MAX_SLOTS][16];

/* A ring of the members with the given slots (identity "m<slot>"). */
static kcr__ring *ring_of(const int *slots, size_t n)
{
    kcr__ring_member m[KCR__RING_MAX_SLOTS];
    for (size_t i = 0; i < n; i++) {
        snprintf(names[slots[i]], sizeof names[0], "m%d", slots[i]);
        m[i] = (kcr__ring_member){names[slots[i]], slots[i]};
    }
    kcr__ring *r = NULL;
    cr_assert_eq(kcr__ring_build(m, n, &r), KCR_OK, "%s", kcr_last_error());
    return r;
}

static kcr__ring *dense(int n)
{
    int slots[KCR__RING_MAX_SLOTS];
    for (int i = 0; i < n; i++)
        slots[i] = i;
    return ring_of(slots, (size_t)n);
}

/* How many of the keys change owner between a and b, and how many of those
 * were not owned by `only_from` in a (NULL: none expected). */
static size_t moved(const kcr__ring *a, const kcr__ring *b, const uint64_t *h, size_t n,
                    const char *only_from, size_t *others)
{
    size_t count = 0;
    *others = 0;
    for (size_t i = 0; i < n; i++) {
        const char *oa = kcr__ring_owner(a, h[i]), *ob = kcr__ring_owner(b, h[i]);
        if (strcmp(oa, ob) == 0)
            continue;
        count++;
        if (!only_from || strcmp(oa, only_from) != 0)
            ++*others;
    }
    return count;
}

Test(shard_ring, same_owner_whatever_the_member_order)
{
    size_t nkeys = 1000000;
    uint64_t *h = uid_hashes(nkeys);
    const char *ids[] = {"replica-a", "replica-b", "replica-c", "replica-d",
                         "replica-e", "replica-f", "replica-g"};
    int slots[] = {0, 1, 2, 4, 5, 6, 8}; /* vacant 3 and 7 spread by rendezvous */
    kcr__ring_member m[7];
    for (int i = 0; i < 7; i++)
        m[i] = (kcr__ring_member){ids[i], slots[i]};
    kcr__ring *first = NULL;
    cr_assert_eq(kcr__ring_build(m, 7, &first), KCR_OK);
    int rounds = RUNNING_ON_VALGRIND ? 2 : 4; /* valgrind: each round is ~15 s */
    for (int round = 0; round < rounds; round++) {
        for (int i = 6; i > 0; i--) { /* shuffle */
            int j = (int)(rng_next() % (uint64_t)(i + 1));
            kcr__ring_member t = m[i];
            m[i] = m[j];
            m[j] = t;
        }
        kcr__ring *r = NULL;
        cr_assert_eq(kcr__ring_build(m, 7, &r), KCR_OK);
        size_t differ = 0;
        for (size_t i = 0; i < nkeys; i++)
            differ += strcmp(kcr__ring_owner(first, h[i]), kcr__ring_owner(r, h[i])) != 0;
        cr_expect_eq(differ, 0, "round %d: %zu of %zu keys changed owner", round, differ, nkeys);
        kcr__ring_free(r);
    }
    kcr__ring_free(first);
    free(h);
}

Test(shard_ring, balance_and_few_ranges)
{
    size_t nkeys = 100000;
    uint64_t *h = uid_hashes(nkeys);
    double worst = 0;
    size_t most_ranges = 0;
    for (int n = 2; n <= 16; n++) {
        kcr__ring *r = dense(n);
        size_t count[KCR__RING_MAX_SLOTS] = {0};
        for (size_t i = 0; i < nkeys; i++)
            count[atoi(kcr__ring_owner(r, h[i]) + 1)]++;
        size_t max = 0;
        for (int s = 0; s < n; s++) {
            max = count[s] > max ? count[s] : max;
            kcr__ranges own = {0};
            cr_assert_eq(kcr__ring_ranges(r, names[s], &own), KCR_OK);
            /* slot s got one piece from each slot below it */
            cr_expect_leq(own.n, (size_t)(s > 1 ? s : 1), "N=%d slot %d: %zu ranges", n, s, own.n);
            cr_expect_leq(own.n, 32, "N=%d slot %d: %zu ranges", n, s, own.n);
            most_ranges = own.n > most_ranges ? own.n : most_ranges;
            kcr__ranges_clear(&own);
        }
        double ratio = (double)max / ((double)nkeys / n);
        cr_expect_leq(ratio, 1.10, "N=%d: the largest shard holds %.3f x the mean", n, ratio);
        worst = ratio > worst ? ratio : worst;
        kcr__ring_free(r);
    }
    cr_log_info("N=2..16: largest shard %.3f x the mean at worst, at most %zu ranges a member",
                worst, most_ranges);
    free(h);
}

Test(shard_ring, a_join_moves_at_most_its_share)
{
    size_t nkeys = 100000, others;
    uint64_t *h = uid_hashes(nkeys);
    for (int n = 1; n <= 16; n++) { /* a new slot at the top */
        kcr__ring *a = dense(n), *b = dense(n + 1);
        double frac = (double)moved(a, b, h, nkeys, NULL, &others) / (double)nkeys;
        cr_expect_leq(frac, 1.0 / (n + 1) + 0.01, "N=%d -> %d moved %.4f", n, n + 1, frac);
        for (size_t i = 0; i < nkeys; i++) /* and only to the joiner */
            if (strcmp(kcr__ring_owner(a, h[i]), kcr__ring_owner(b, h[i])) != 0)
                cr_assert_str_eq(kcr__ring_owner(b, h[i]), names[n]);
        kcr__ring_free(a);
        kcr__ring_free(b);
    }
    /* filling a vacant slot: 5 members on slots 0-5 but 2, then 2 joins */
    int before[] = {0, 1, 3, 4, 5}, after[] = {0, 1, 2, 3, 4, 5};
    kcr__ring *a = ring_of(before, 5), *b = ring_of(after, 6);
    double frac = (double)moved(a, b, h, nkeys, NULL, &others) / (double)nkeys;
    cr_expect_leq(frac, 1.0 / 6 + 0.01, "filling slot 2 moved %.4f", frac);
    kcr__ring_free(a);
    kcr__ring_free(b);
    free(h);
}

Test(shard_ring, a_leave_moves_only_the_leavers_keys)
{
    size_t nkeys = 100000, others;
    uint64_t *h = uid_hashes(nkeys);
    struct {
        int before[8], nb, after[8], na, leaver;
    } cases[] = {
        {{0, 1, 2, 3, 4}, 5, {0, 1, 2, 3}, 4, 4}, /* the top slot */
        {{0, 1, 2, 3, 4}, 5, {0, 1, 3, 4}, 4, 2}, /* a middle slot: vacant */
        {{0, 1, 3, 4}, 4, {0, 3, 4}, 3, 1},       /* a second vacancy */
        {{0, 1, 3, 4}, 4, {0, 1, 3}, 3, 4},       /* the top, with slot 2 vacant */
        {{0, 1, 3, 6, 7}, 5, {0, 1, 3, 6}, 4, 7}, /* the top, 3 vacant below */
        {{0, 1, 3}, 3, {1, 3}, 2, 0},             /* slot 0 */
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        kcr__ring *a = ring_of(cases[c].before, (size_t)cases[c].nb);
        kcr__ring *b = ring_of(cases[c].after, (size_t)cases[c].na);
        size_t n = moved(a, b, h, nkeys, names[cases[c].leaver], &others);
        cr_expect_gt(n, 0, "case %zu: the leaver owned nothing", c);
        cr_expect_eq(others, 0, "case %zu: %zu keys of other members moved", c, others);
        kcr__ring_free(a);
        kcr__ring_free(b);
    }
    free(h);
}

Test(shard_ring, ranges_partition_the_space)
{
    int slots[] = {0, 2, 3, 5, 9};
    kcr__ring *r = ring_of(slots, 5);
    kcr__ranges all = {0}, tmp = {0};
    uint64_t total = 0;
    for (int i = 0; i < 5; i++) {
        kcr__ranges own = {0};
        cr_assert_eq(kcr__ring_ranges(r, names[slots[i]], &own), KCR_OK);
        cr_expect_not(kcr__ranges_intersects(&all, &own), "member %d overlaps another", i);
        cr_expect_leq(own.n, 32, "member %d has %zu ranges", i, own.n);
        for (size_t j = 0; j < own.n; j++) /* its ranges are its */
            cr_expect_str_eq(kcr__ring_owner(r, own.r[j].start), names[slots[i]]);
        total += kcr__ranges_measure(&own);
        cr_assert_eq(kcr__ranges_union(&all, &own, &tmp), KCR_OK);
        cr_assert_eq(kcr__ranges_copy(&tmp, &all), KCR_OK);
        kcr__ranges_clear(&own);
    }
    cr_expect_eq(all.n, 1);
    cr_expect_eq(all.r[0].start, 0);
    cr_expect_eq(all.r[0].end, 0, "the union is the whole space");
    cr_expect_eq(total, 0, "the measures add up to 2^64 (wrapping to 0)");
    cr_expect_eq(kcr__ring_free_slot(r), 1);
    kcr__ranges_clear(&all);
    kcr__ranges_clear(&tmp);
    kcr__ring_free(r);
}

Test(shard_ring, slot_conflicts_and_bad_members)
{
    kcr__ring_member m[] = {{"zeta", 0}, {"alpha", 0}, {"mid", 1}, {"lost", 99}};
    kcr__ring *r = NULL;
    cr_assert_eq(kcr__ring_build(m, 4, &r), KCR_OK);
    cr_expect(kcr__ring_placed(r, "alpha"), "the smaller identity keeps a contested slot");
    cr_expect_not(kcr__ring_placed(r, "zeta"));
    cr_expect_not(kcr__ring_placed(r, "lost"), "a slot out of range is unplaced");
    cr_expect_not(kcr__ring_placed(r, "nobody"));
    kcr__ranges own = {0};
    cr_assert_eq(kcr__ring_ranges(r, "zeta", &own), KCR_OK);
    cr_expect_eq(own.n, 0, "an unplaced member owns nothing");
    cr_expect_eq(kcr__ring_free_slot(r), 2);
    kcr__ring_free(r);

    kcr__ring_member dup[] = {{"a", 0}, {"b", 1}, {"a", 2}};
    cr_expect_eq(kcr__ring_build(dup, 3, &r), KCR_ERR_INVALID);
    cr_expect_not_null(strstr(kcr_last_error(), "\"a\" appears twice"), "%s", kcr_last_error());
    kcr__ring_member empty[] = {{"", 0}};
    cr_expect_eq(kcr__ring_build(empty, 1, &r), KCR_ERR_INVALID);

    cr_assert_eq(kcr__ring_build(NULL, 0, &r), KCR_OK);
    cr_expect_null(kcr__ring_owner(r, 12345), "an empty ring owns nothing");
    cr_expect_eq(kcr__ring_free_slot(r), 0);
    kcr__ring_free(r);
}

Test(shard_ranges, algebra_and_text)
{
    kcr__ranges a = {0}, b = {0}, out = {0};
    cr_assert_eq(kcr__ranges_append(&a, 10, 20), KCR_OK);
    cr_assert_eq(kcr__ranges_append(&a, 20, 30), KCR_OK); /* merged */
    cr_assert_eq(kcr__ranges_append(&a, UINT64_C(0xf000000000000000), 0), KCR_OK);
    cr_expect_eq(a.n, 2);
    cr_assert_eq(kcr__ranges_append(&b, 25, 40), KCR_OK);
    cr_assert_eq(kcr__ranges_union(&a, &b, &out), KCR_OK);
    cr_expect_eq(out.n, 2);
    cr_expect_eq(out.r[0].end, 40);
    cr_assert_eq(kcr__ranges_intersect(&a, &b, &out), KCR_OK);
    cr_expect(out.n == 1 && out.r[0].start == 25 && out.r[0].end == 30);
    cr_assert_eq(kcr__ranges_subtract(&a, &b, &out), KCR_OK);
    cr_expect(out.n == 2 && out.r[0].start == 10 && out.r[0].end == 25 && out.r[1].end == 0);
    cr_expect(kcr__ranges_contains(&a, UINT64_MAX));
    cr_expect_not(kcr__ranges_contains(&a, 30));
    cr_expect(kcr__ranges_intersects(&a, &b));

    char *text = NULL;
    cr_assert_eq(kcr__ranges_format(&a, &text), KCR_OK);
    cr_expect_str_eq(text, "000000000000000a-000000000000001e,f000000000000000-10000000000000000");
    cr_assert_eq(kcr__ranges_parse(text, &out), KCR_OK);
    cr_expect(kcr__ranges_equal(&a, &out));
    free(text);
    cr_assert_eq(kcr__ranges_parse("", &out), KCR_OK);
    cr_expect_eq(out.n, 0);
    const char *bad[] = {"1-2",
                         "000000000000000a-0000000000000005",
                         "000000000000000a-000000000000001e,",
                         "0000000000000010-0000000000000020,0000000000000000-0000000000000005",
                         "000000000000000a-000000000000001e;",
                         "zz"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cr_expect_eq(kcr__ranges_parse(bad[i], &out), KCR_ERR_PARSE, "accepted \"%s\"", bad[i]);
        cr_expect_not_null(strstr(kcr_last_error(), "shard ranges"));
    }
    kcr__ranges_clear(&a);
    kcr__ranges_clear(&b);
    kcr__ranges_clear(&out);
}

Test(shard_ranges, from_an_array_of_terms)
{
    /* out of order, overlapping, touching, repeated and empty: a selector's
     * terms may be all of these */
    kcr_shard_range terms[] = {{50, 60}, {10, 20}, {15, 30}, {30, 35}, {7, 7},
                               {UINT64_C(0xf000000000000000), 0}, {50, 60},
                               {UINT64_C(0xf800000000000000), UINT64_C(0xf900000000000000)}};
    kcr__ranges s = {0};
    cr_assert_eq(kcr__ranges_from_array(terms, sizeof terms / sizeof *terms, &s), KCR_OK);
    kcr_shard_range want[] = {{10, 35}, {50, 60}, {UINT64_C(0xf000000000000000), 0}};
    cr_assert_eq(s.n, 3);
    cr_expect(memcmp(s.r, want, sizeof want) == 0);
    cr_assert_eq(kcr__ranges_from_array(terms + 4, 1, &s), KCR_OK);
    cr_expect(s.n == 0 && s.r == NULL, "only an empty range: the empty set");
    kcr_shard_range whole[] = {{0, 0}, {0, 5}, {UINT64_MAX, 0}};
    cr_assert_eq(kcr__ranges_from_array(whole, 3, &s), KCR_OK);
    cr_expect(s.n == 1 && s.r[0].start == 0 && s.r[0].end == 0, "the whole space");
    cr_assert_eq(kcr__ranges_from_array(NULL, 0, &s), KCR_OK);
    cr_expect_eq(s.n, 0);
}
