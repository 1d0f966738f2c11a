/* shard/member.c and shard/client_store.c, step by step with a virtual
 * clock: the Lease store on the fake API (labels, annotations, conditional
 * writes), a second replica with a live identity refused and named, a
 * restart that takes its identity back without running what the previous
 * instance may still run, the hand-over waiting for the old owner to drain,
 * a replica that cannot renew stopping before anyone takes its keys, a
 * leave that keeps its slot for a restart, and a clock skewed past the
 * margin reported. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "helpers/shard_memstore.h"
#include "kcr/fake.h"
#include "shard/member.h"
#include "shard/ring.h"

#define T0 INT64_C(1780000000000) /* a wall clock in 2026, ms */
#define LEASE 15000
#define DEADLINE 10000
#define RETRY 2000
#define MARGIN 2000

static kcr_fake *fake;
static kcr_client *client;
static kcr__lease_store *store;

static void setup(void)
{
    cr_assert_eq(kcr_fake_new(NULL, &fake), KCR_OK);
    cr_assert_eq(kcr_fake_client(fake, "ns", &client), KCR_OK);
    cr_assert_eq(kcr__lease_store_client_new(client, "ns", &store), KCR_OK);
}

static void teardown(void)
{
    kcr__lease_store_client_free(store);
    kcr_client_free(client);
    kcr_fake_free(fake);
}

/* A member whose leave keeps its slot for `restart_grace_ms` (0: releases it). */
static kcr__shard_member *member_keeping(const kcr__lease_store *s, const char *identity,
                                         const char *instance, int64_t restart_grace_ms)
{
    kcr__shard_member_config cfg = {.ring = "web",
                                    .identity = identity,
                                    .instance = instance,
                                    .lease_ms = LEASE,
                                    .renew_deadline_ms = DEADLINE,
                                    .retry_ms = RETRY,
                                    .margin_ms = MARGIN,
                                    .restart_grace_ms = restart_grace_ms};
    kcr__shard_member *m = NULL;
    cr_assert_eq(kcr__shard_member_new(&cfg, s, &m), KCR_OK, "%s", kcr_last_error());
    return m;
}

static kcr__shard_member *member(const kcr__lease_store *s, const char *identity,
                                 const char *instance)
{
    return member_keeping(s, identity, instance, 0);
}

static void sync_ok(kcr__shard_member *m, int64_t now)
{
    cr_assert_eq(kcr__shard_member_sync(m, now), KCR_OK, "%s", kcr_last_error());
}

/* Syncs m every 500 ms from *t until it admits something (the first member
 * of a cold ring waits until its members stayed the same for two retry
 * periods); *t is then the time of that sync. */
static void until_admitting(kcr__shard_member *m, int64_t *t)
{
    for (int64_t end = *t + LEASE; kcr__shard_member_admitted(m)->n == 0 && *t < end; *t += 500)
        sync_ok(m, *t);
    *t -= 500;
    cr_assert_gt(kcr__shard_member_admitted(m)->n, 0, "never admitted anything");
}

/* A hash `m` owns in `ring`-view terms: the first hash of its first admitted range. */
static uint64_t first_admitted(const kcr__shard_member *m)
{
    const kcr__ranges *a = kcr__shard_member_admitted(m);
    cr_assert_gt(a->n, 0, "admits nothing");
    return a->r[0].start;
}

Test(shard_member, lease_store_on_the_fake, .init = setup, .fini = teardown)
{
    kcr__shard_lease l = {.identity = "pod-0",
                          .holder = "pod-0_abc",
                          .duration_ms = 14500,
                          .renew_ms = T0 + 123,
                          .slot = 3,
                          .held = "0000000000000000-8000000000000000",
                          .version = ""};
    char *v1 = NULL, *v2 = NULL;
    cr_assert_eq(store->ops->put("web", &l, &v1, store->user_data), KCR_OK, "%s", kcr_last_error());
    cr_expect_eq(store->ops->put("web", &l, &v2, store->user_data), KCR_ERR_EXISTS);
    /* another ring's Lease is not listed */
    kcr__shard_lease other = l;
    other.identity = "pod-9";
    cr_assert_eq(store->ops->put("api", &other, &v2, store->user_data), KCR_OK);
    free(v2);
    v2 = NULL;

    kcr__shard_lease_list list = {0};
    cr_assert_eq(store->ops->list("web", &list, store->user_data), KCR_OK);
    cr_assert_eq(list.n, 1);
    kcr__shard_lease *got = &list.items[0];
    cr_expect_str_eq(got->identity, "pod-0");
    cr_expect_str_eq(got->holder, "pod-0_abc");
    cr_expect_eq(got->duration_ms, 15000, "leaseDurationSeconds rounds up");
    cr_expect_eq(got->renew_ms, T0 + 123);
    cr_expect_eq(got->slot, 3);
    cr_expect_str_eq(got->held, "0000000000000000-8000000000000000");
    cr_expect_str_eq(got->version, v1);

    l.version = v1;
    l.slot = 4;
    cr_assert_eq(store->ops->put("web", &l, &v2, store->user_data), KCR_OK, "%s", kcr_last_error());
    char *v3 = NULL;
    cr_expect_eq(store->ops->put("web", &l, &v3, store->user_data) == KCR_ERR_CONFLICT, true,
                 "a stale resourceVersion is a conflict");
    kcr__shard_lease_list_clear(&list);
    free(v1);
    free(v2);
    cr_expect_null(v3, "a failed write returns no version");
}

Test(shard_member, bad_config)
{
    memstore table = {0};
    memstore_handle h;
    memstore_init(&h, &table);
    kcr__shard_member_config cfg = {.ring = "web",
                                    .identity = "a",
                                    .instance = "a_1",
                                    .lease_ms = 10000,
                                    .renew_deadline_ms = 10000,
                                    .retry_ms = 2000};
    kcr__shard_member *m = NULL;
    cr_expect_eq(kcr__shard_member_new(&cfg, &h.store, &m), KCR_ERR_INVALID);
    cr_expect_not_null(strstr(kcr_last_error(), "renew deadline"), "%s", kcr_last_error());
    cfg.renew_deadline_ms = 8000;
    cfg.identity = "";
    cr_expect_eq(kcr__shard_member_new(&cfg, &h.store, &m), KCR_ERR_INVALID);
    cr_expect_null(m);
}

Test(shard_member, a_live_identity_is_refused_and_named, .init = setup, .fini = teardown)
{
    kcr__shard_member *a = member(store, "pod-0", "pod-0_first");
    sync_ok(a, T0);
    cr_assert_eq(kcr__shard_member_state(a), KCR__SHARD_ACTIVE);
    kcr__shard_member *b = member(store, "pod-0", "pod-0_second");
    int64_t t = T0 + 500;
    sync_ok(b, t);
    cr_expect_eq(kcr__shard_member_state(b), KCR__SHARD_PROBING);
    kcr_err err = KCR_OK;
    for (t = T0 + 1000; t < T0 + 20000 && err == KCR_OK; t += 1000) {
        sync_ok(a, t); /* a keeps renewing */
        err = kcr__shard_member_sync(b, t);
        cr_expect_eq(kcr__shard_member_admitted(b)->n, 0);
    }
    cr_expect_eq(err, KCR_ERR_EXISTS);
    cr_expect_eq(kcr__shard_member_state(b), KCR__SHARD_REFUSED);
    cr_expect_not_null(strstr(kcr__shard_member_error(b), "held by instance \"pod-0_first\""), "%s",
                       kcr__shard_member_error(b));
    cr_expect_eq(kcr__shard_member_state(a), KCR__SHARD_ACTIVE, "the holder is untouched");
    kcr__shard_member_free(a);
    kcr__shard_member_free(b);
}

Test(shard_member, a_restart_takes_its_identity_back_safely, .init = setup, .fini = teardown)
{
    kcr__shard_member *a = member(store, "pod-0", "pod-0_old");
    int64_t renewed = T0;
    until_admitting(a, &renewed); /* claims: the whole ring */
    uint64_t h = first_admitted(a);
    cr_assert(kcr__shard_member_begin(a, h, renewed));
    kcr__shard_member_free(a); /* crashed mid-reconcile; its Lease stays */

    kcr__shard_member *b = member(store, "pod-0", "pod-0_new");
    int64_t t = renewed + 2000;
    for (; kcr__shard_member_state(b) != KCR__SHARD_ACTIVE && t < T0 + 20000; t += 500)
        sync_ok(b, t);
    cr_assert_eq(kcr__shard_member_state(b), KCR__SHARD_ACTIVE,
                 "the dead holder was not taken over");
    cr_expect_lt(t, renewed + LEASE, "took over before the old Lease expired");
    /* the old instance may still run what it published until renew + lease + margin */
    for (; t <= renewed + LEASE + MARGIN; t += 500) {
        sync_ok(b, t);
        cr_expect_not(kcr__shard_member_begin(b, h, t), "admitted at %lld", (long long)(t - T0));
    }
    for (int i = 0; i < 3; i++, t += 500)
        sync_ok(b, t);
    cr_expect(kcr__shard_member_begin(b, h, t), "its own keys came back");
    kcr__shard_member_end(b, h);
    kcr__shard_member_free(b);
}

Test(shard_member, the_new_owner_waits_for_the_old_one_to_drain, .init = setup, .fini = teardown)
{
    kcr__shard_member *a = member(store, "a", "a_1");
    int64_t t = T0;
    until_admitting(a, &t);
    cr_assert_eq(kcr__ranges_measure(kcr__shard_member_admitted(a)), UINT64_MAX, "a owns all");
    /* b will own slot 1's half: find a hash there and start it on a */
    kcr__ring_member two[] = {{"a", 0}, {"b", 1}};
    kcr__ring *ring = NULL;
    cr_assert_eq(kcr__ring_build(two, 2, &ring), KCR_OK);
    kcr__ranges bs = {0};
    cr_assert_eq(kcr__ring_ranges(ring, "b", &bs), KCR_OK);
    uint64_t h = bs.r[0].start;
    kcr__ranges_clear(&bs);
    kcr__ring_free(ring);
    cr_assert(kcr__shard_member_begin(a, h, t));

    kcr__shard_member *b = member(store, "b", "b_1");
    sync_ok(b, t += 500); /* joins */
    for (int i = 0; i < 5; i++) {
        sync_ok(a, t += 500);
        sync_ok(b, t);
        cr_expect_not(kcr__shard_member_begin(a, h, t), "a still admits a key it lost");
        cr_expect_not(kcr__shard_member_begin(b, h, t), "b started before a drained");
    }
    cr_expect_gt(kcr__ranges_measure(kcr__shard_member_admitted(b)), 0,
                 "b admits the part nobody was running");
    kcr__shard_member_end(a, h); /* the in-flight reconcile ends */
    sync_ok(a, t += 500);        /* a acknowledges */
    sync_ok(b, t);               /* b claims */
    cr_expect(kcr__shard_member_begin(b, h, t), "b did not take the drained range");
    kcr__shard_member_end(b, h);
    kcr__shard_member_free(a);
    kcr__shard_member_free(b);
}

/* Replicas starting together: the first one wants nothing (so caches
 * nothing) until the members stayed the same for two retry periods, then
 * each takes its share at once; a replica joining a ring where someone
 * publishes does not wait. */
Test(shard_member, a_cold_ring_waits_for_the_members_starting_together)
{
    memstore table = {0};
    memstore_handle ha, hb, hc;
    memstore_init(&ha, &table);
    memstore_init(&hb, &table);
    memstore_init(&hc, &table);
    kcr__shard_member *a = member(&ha.store, "a", "a_1");
    kcr__shard_member *b = member(&hb.store, "b", "b_1");
    int64_t t = T0;
    uint64_t largest = 0;
    for (; t < T0 + LEASE; t += 500) {
        sync_ok(a, t);
        if (t >= T0 + 1500)
            sync_ok(b, t); /* b starts 1.5 s after a */
        const kcr__ranges *wa = kcr__shard_member_want(a), *wb = kcr__shard_member_want(b);
        if (t < T0 + 1500 + 2 * RETRY)
            cr_expect_eq(wa->n + wb->n, 0, "wanted before the members stayed the same (%lld ms)",
                         (long long)(t - T0));
        uint64_t sa = kcr__ranges_measure(wa), sb = kcr__ranges_measure(wb);
        largest = sa > largest ? sa : largest;
        largest = sb > largest ? sb : largest;
        if (kcr__shard_member_admitted(a)->n && kcr__shard_member_admitted(b)->n)
            break;
    }
    cr_expect_lt(t, T0 + 1500 + 2 * RETRY + 2 * 500, "the wait ended late (%lld ms)",
                 (long long)(t - T0));
    cr_expect_lt(largest, UINT64_MAX / 5 * 3, "one of them wanted more than its share");
    kcr__ranges both = {0};
    cr_assert_eq(kcr__ranges_union(kcr__shard_member_admitted(a), kcr__shard_member_admitted(b),
                                   &both),
                 KCR_OK);
    cr_expect_eq(kcr__ranges_measure(&both), UINT64_MAX, "the two shares are the whole ring");
    cr_expect_not(
        kcr__ranges_intersects(kcr__shard_member_admitted(a), kcr__shard_member_admitted(b)));
    kcr__ranges_clear(&both);

    /* c joins the ring a and b publish in: its share comes within steps */
    kcr__shard_member *c = member(&hc.store, "c", "c_1");
    int64_t joined = t += 500;
    for (; kcr__shard_member_admitted(c)->n == 0 && t < joined + 2 * RETRY; t += 500) {
        sync_ok(c, t);
        sync_ok(a, t);
        sync_ok(b, t);
    }
    cr_expect_gt(kcr__shard_member_admitted(c)->n, 0, "c waited like a cold start");
    kcr__shard_member_free(a);
    kcr__shard_member_free(b);
    kcr__shard_member_free(c);
    memstore_free(&table);
}

Test(shard_member, a_replica_that_cannot_renew_stops_first)
{
    memstore table = {0};
    memstore_handle ha, hb;
    memstore_init(&ha, &table);
    memstore_init(&hb, &table);
    kcr__shard_member *a = member(&ha.store, "a", "a_1");
    kcr__shard_member *b = member(&hb.store, "b", "b_1");
    int64_t t = T0;
    for (int i = 0; i < 7; i++, t += 1000) { /* a cold ring: 2 retry periods unchanged */
        sync_ok(a, t);
        sync_ok(b, t);
    }
    uint64_t h = first_admitted(a);
    int64_t last_renew = memstore_find(&table, "a")->renew_ms;
    ha.partitioned = true;
    bool stopped = false;
    for (; t < last_renew + LEASE + MARGIN + 3000; t += 250) {
        cr_expect_eq(kcr__shard_member_sync(a, t), KCR_ERR_TRANSPORT);
        bool a_runs = kcr__shard_member_begin(a, h, t);
        if (a_runs)
            kcr__shard_member_end(a, h);
        else
            stopped = true;
        cr_expect(!a_runs || t < last_renew + DEADLINE, "a admitted past its renew deadline");
        cr_expect(!stopped || !a_runs, "a resumed while cut off");
        sync_ok(b, t);
        bool b_runs = kcr__shard_member_begin(b, h, t);
        if (b_runs)
            kcr__shard_member_end(b, h);
        cr_expect(!b_runs || t > last_renew + LEASE + MARGIN, "b took a's keys at %lld",
                  (long long)(t - last_renew));
    }
    cr_expect_eq(kcr__shard_member_state(a), KCR__SHARD_FENCED);
    cr_expect(kcr__shard_member_begin(b, h, t), "b never took a's keys");
    kcr__shard_member_end(b, h);
    /* back: a renews, rejoins the ring and gets its share back through the protocol */
    ha.partitioned = false;
    for (int i = 0; i < 6; i++, t += 1000) {
        sync_ok(a, t);
        sync_ok(b, t);
    }
    cr_expect_eq(kcr__shard_member_state(a), KCR__SHARD_ACTIVE);
    cr_expect_gt(kcr__ranges_measure(kcr__shard_member_admitted(a)), 0);
    cr_expect_not(
        kcr__ranges_intersects(kcr__shard_member_admitted(a), kcr__shard_member_admitted(b)));
    kcr__shard_member_free(a);
    kcr__shard_member_free(b);
    memstore_free(&table);
}

Test(shard_member, a_graceful_leave_hands_over_at_once)
{
    memstore table = {0};
    memstore_handle ha, hb;
    memstore_init(&ha, &table);
    memstore_init(&hb, &table);
    kcr__shard_member *a = member(&ha.store, "a", "a_1");
    kcr__shard_member *b = member(&hb.store, "b", "b_1");
    int64_t t = T0;
    for (int i = 0; i < 7; i++, t += 1000) { /* a cold ring: 2 retry periods unchanged */
        sync_ok(a, t);
        sync_ok(b, t);
    }
    uint64_t h = first_admitted(b);
    kcr__shard_member_leave(b);
    cr_expect_not(kcr__shard_member_begin(b, h, t), "a leaving replica admits nothing");
    sync_ok(b, t);
    cr_expect_eq(kcr__shard_member_state(b), KCR__SHARD_LEFT);
    cr_expect_str_eq(memstore_find(&table, "b")->holder, "", "its Lease is released");
    sync_ok(a, t += 100);
    cr_expect_eq(kcr__ranges_measure(kcr__shard_member_admitted(a)), UINT64_MAX,
                 "a took everything within one step, not after a lease duration");
    kcr__shard_member_free(a);
    kcr__shard_member_free(b);
    memstore_free(&table);
}

/* A leave that keeps its slot for a restart: the others take none of its
 * keys while the slot is kept; the identity's next instance takes them
 * back at once; an identity that does not come back loses them once the
 * grace (and the margin) has passed, not before. */
Test(shard_member, a_leave_that_keeps_its_slot_moves_nothing)
{
    enum { GRACE = 30000 };
    memstore table = {0};
    memstore_handle ha, hb, hc;
    memstore_init(&ha, &table);
    memstore_init(&hb, &table);
    memstore_init(&hc, &table);
    kcr__shard_member *a = member(&ha.store, "a", "a_1");
    kcr__shard_member *b = member_keeping(&hb.store, "b", "b_1", GRACE);
    kcr__shard_member *c = member_keeping(&hc.store, "c", "c_1", GRACE);
    int64_t t = T0;
    for (int i = 0; i < 7; i++, t += 1000) { /* a cold ring: 2 retry periods unchanged */
        sync_ok(a, t);
        sync_ok(b, t);
        sync_ok(c, t);
    }
    uint64_t a_share = kcr__ranges_measure(kcr__shard_member_admitted(a));
    uint64_t hb_key = first_admitted(b), hc_key = first_admitted(c);
    int b_slot = kcr__shard_member_slot(b);
    kcr__shard_member_leave(b);
    kcr__shard_member_leave(c);
    sync_ok(b, t);
    sync_ok(c, t);
    cr_expect_eq(kcr__shard_member_state(b), KCR__SHARD_LEFT);
    cr_expect_str_eq(memstore_find(&table, "b")->holder, "", "its Lease is released");
    cr_expect(memstore_find(&table, "b")->restarting, "its Lease keeps the slot");
    int64_t left = t;
    kcr__shard_member_free(b);
    kcr__shard_member_free(c);

    for (; t < left + 10000; t += 500) { /* b restarts 10 s later; c never */
        sync_ok(a, t);
        cr_expect_eq(kcr__ranges_measure(kcr__shard_member_admitted(a)), a_share,
                     "a took keys of a slot kept for a restart at +%lld ms",
                     (long long)(t - left));
    }
    kcr__shard_member *b2 = member_keeping(&hb.store, "b", "b_2", GRACE);
    sync_ok(b2, t);
    cr_expect_eq(kcr__shard_member_state(b2), KCR__SHARD_ACTIVE, "the next instance did not "
                                                                  "take the released Lease at once");
    cr_expect_eq(kcr__shard_member_slot(b2), b_slot, "the next instance took another slot");
    sync_ok(b2, t += 500);
    cr_expect(kcr__shard_member_begin(b2, hb_key, t), "b's keys did not come back at once");
    kcr__shard_member_end(b2, hb_key);

    for (; t <= left + GRACE + MARGIN; t += 500) {
        sync_ok(a, t);
        sync_ok(b2, t);
        cr_expect_not(kcr__shard_member_begin(a, hc_key, t) ||
                          kcr__shard_member_begin(b2, hc_key, t),
                      "c's keys moved before its grace ended (+%lld ms)", (long long)(t - left));
    }
    for (int i = 0; i < 3; i++, t += 500) {
        sync_ok(a, t);
        sync_ok(b2, t);
    }
    cr_expect(kcr__shard_member_begin(a, hc_key, t) || kcr__shard_member_begin(b2, hc_key, t),
              "c's keys did not move once its grace had passed");
    kcr__shard_member_free(a);
    kcr__shard_member_free(b2);
    memstore_free(&table);
}

Test(shard_member, a_clock_skewed_past_the_margin_is_reported)
{
    memstore table = {0};
    memstore_handle ha, hb;
    memstore_init(&ha, &table);
    memstore_init(&hb, &table);
    kcr__shard_member *a = member(&ha.store, "a", "a_1");
    kcr__shard_member *b = member(&hb.store, "b", "b_1");
    int64_t t = T0;
    for (int i = 0; i < 3; i++, t += 1000) { /* b's clock runs 1.5 s ahead: within the margin */
        sync_ok(a, t);
        sync_ok(b, t + 1500);
    }
    cr_expect_str_eq(kcr__shard_member_skew(a), "");
    /* b renews every RETRY: its last renewal lay at most 1500 - 1000 ms in a's future */
    cr_expect_leq(kcr__shard_member_ahead_ms(a), 500);
    for (int i = 0; i < 3; i++, t += 1000) { /* now 5 s ahead */
        sync_ok(b, t + 5000);
        sync_ok(a, t);
    }
    const char *report = kcr__shard_member_skew(a);
    cr_expect_not_null(strstr(report, "Lease of \"b\" was renewed"), "%s", report);
    cr_expect_not_null(strstr(report, "fencing margin (2000 ms)"), "%s", report);
    cr_expect_str_eq(kcr__shard_member_skew(b), "",
                     "b, ahead, sees a's renewals in its past: only the member behind notices");
    /* b renewed within the last RETRY of a's syncs, 5 s ahead */
    int64_t ahead = kcr__shard_member_ahead_ms(a);
    cr_expect(ahead > MARGIN && ahead <= 5000, "a saw b %lld ms ahead", (long long)ahead);
    cr_expect_eq(kcr__shard_member_ahead_ms(b), 0);
    kcr__shard_member_free(a);
    kcr__shard_member_free(b);
    memstore_free(&table);
}

Test(shard_member, malformed_leases_are_reported_and_kept_safe)
{
    memstore table = {0};
    memstore_handle ha, hx;
    memstore_init(&ha, &table);
    memstore_init(&hx, &table);
    kcr__shard_member *a = member(&ha.store, "a", "a_1");
    int64_t t = T0;
    until_admitting(a, &t);
    int64_t settled = t;
    cr_expect_str_eq(kcr__shard_member_problem(a), "");
    cr_assert_eq(kcr__ranges_measure(kcr__shard_member_admitted(a)), UINT64_MAX);

    /* someone else's Lease in the ring with unreadable held ranges */
    kcr__shard_lease bad = {.identity = "x",
                            .holder = "x_1",
                            .duration_ms = LEASE,
                            .renew_ms = t,
                            .slot = 1,
                            .held = "everything",
                            .version = ""};
    char *v = NULL;
    cr_assert_eq(hx.store.ops->put("web", &bad, &v, hx.store.user_data), KCR_OK);
    free(v);
    sync_ok(a, t += 1000);
    const char *problem = kcr__shard_member_problem(a);
    cr_expect_not_null(strstr(problem, "annotation of \"x\" does not parse"), "%s", problem);
    cr_expect_not_null(strstr(problem, "until its Lease expires"), "%s", problem);
    /* x is in the ring (slot 1): a gives up x's half and claims nothing of it */
    for (int i = 0; i < 3; i++)
        sync_ok(a, t += 1000);
    uint64_t half = kcr__ranges_measure(kcr__shard_member_admitted(a));
    cr_expect_lt(half, UINT64_MAX / 3 * 2, "a kept x's half");
    /* once x's Lease expires, a takes everything back */
    for (; t < settled + 1000 + LEASE + MARGIN + 3000; t += 1000)
        sync_ok(a, t);
    cr_expect_eq(kcr__ranges_measure(kcr__shard_member_admitted(a)), UINT64_MAX);

    /* a Lease with no identity label is not a member */
    kcr__shard_lease anon = {.identity = "",
                             .holder = "y_1",
                             .duration_ms = LEASE,
                             .renew_ms = t,
                             .slot = 2,
                             .held = "",
                             .version = ""};
    cr_assert_eq(hx.store.ops->put("web", &anon, &v, hx.store.user_data), KCR_OK);
    free(v);
    sync_ok(a, t += 1000);
    problem = kcr__shard_member_problem(a);
    cr_expect_not_null(strstr(problem, "has no kcr.dev/shard-identity label"), "%s", problem);
    cr_expect_eq(kcr__ranges_measure(kcr__shard_member_admitted(a)), UINT64_MAX);
    kcr__shard_member_free(a);
    memstore_free(&table);
}

/* A store whose next list hides one identity: two joiners that listed
 * before either wrote. */
typedef struct hiding_store {
    kcr__lease_store store;
    const kcr__lease_store *inner;
    const char *hide; /* hidden from the next list, then NULL */
} hiding_store;

static kcr_err hiding_list(const char *ring, kcr__shard_lease_list *out, void *user_data)
{
    hiding_store *h = user_data;
    kcr_err err = h->inner->ops->list(ring, out, h->inner->user_data);
    for (size_t i = 0; err == KCR_OK && h->hide && i < out->n; i++) {
        if (strcmp(out->items[i].identity, h->hide) == 0) {
            kcr__shard_lease_clear(&out->items[i]);
            out->items[i] = out->items[--out->n];
            h->hide = NULL;
        }
    }
    return err;
}

static kcr_err hiding_put(const char *ring, const kcr__shard_lease *l, char **version,
                          void *user_data)
{
    hiding_store *h = user_data;
    return h->inner->ops->put(ring, l, version, h->inner->user_data);
}

static const kcr__lease_store_ops hiding_ops = {hiding_list, hiding_put};

Test(shard_member, two_joiners_on_one_slot)
{
    memstore table = {0};
    memstore_handle ha, hb;
    memstore_init(&ha, &table);
    memstore_init(&hb, &table);
    hiding_store hide = {{&hiding_ops, &hide}, &hb.store, NULL};
    kcr__shard_member *a = member(&ha.store, "a", "a_1");
    kcr__shard_member *b = member(&hide.store, "b", "b_1");
    int64_t t = T0;
    sync_ok(a, t);
    hide.hide = "a"; /* b joins as if a had not written yet */
    sync_ok(b, t);
    cr_assert_eq(memstore_find(&table, "a")->slot, 0);
    cr_assert_eq(memstore_find(&table, "b")->slot, 0, "the race did not happen");
    for (int i = 0; i < 4; i++) {
        t += 1000;
        sync_ok(a, t);
        sync_ok(b, t);
        cr_expect_not(
            kcr__ranges_intersects(kcr__shard_member_admitted(a), kcr__shard_member_admitted(b)),
            "both admit the same keys at step %d", i);
    }
    cr_expect_eq(memstore_find(&table, "a")->slot, 0, "the smaller identity keeps the slot");
    cr_expect_eq(memstore_find(&table, "b")->slot, 1, "the other moved to the free slot");
    for (int i = 0; i < 3; i++, t += 1000) {
        sync_ok(a, t);
        sync_ok(b, t);
    }
    uint64_t sa = kcr__ranges_measure(kcr__shard_member_admitted(a));
    uint64_t sb = kcr__ranges_measure(kcr__shard_member_admitted(b));
    cr_expect(sa > UINT64_MAX / 5 * 2 && sb > UINT64_MAX / 5 * 2, "not split in two: %llx %llx",
              (unsigned long long)sa, (unsigned long long)sb);
    kcr__shard_member_free(a);
    kcr__shard_member_free(b);
    memstore_free(&table);
}
