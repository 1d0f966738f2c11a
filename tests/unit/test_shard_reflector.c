/* Server-side shard selectors on the fake, the reflector and the informer:
 * the fake applies shardSelector on list and watch and answers with
 * shardInfo (gate on), or ignores it (kcr_fake_options.ignore_shard_selector,
 * gate off); informers with two complementary selectors hold every object
 * exactly once, the server filtering (stats SERVER, nothing dropped) or,
 * when the server ignores the selector, the reflector (stats CLIENT, the
 * other half dropped, one warning); a malformed selector is refused up
 * front; the factory shares an informer only for the same selector; kcr's
 * own field (the controller's uid) is filtered by the reflector alone and
 * follows a change of the controller; the label selector can change with
 * the shard selector. */
#include <criterion/criterion.h>
#include <stdatomic.h>

#include "informer/informer_internal.h"
#include "informer/label_set.h"
#include "tests/unit/informer_fixtures.h"
#include "kcr/fake.h"

#define N_SEED 200
#define WAIT_MS 10000

static const kcr_shard_range LO = {0, UINT64_C(0x8000000000000000)};
static const kcr_shard_range HI = {UINT64_C(0x8000000000000000), 0};

static char *selector_of(kcr_shard_range r)
{
    char *s = NULL;
    cr_assert_eq(kcr_shard_selector_format(KCR_SHARD_BY_UID, &r, 1, &s), KCR_OK);
    return s;
}

static kcr_fake *fake_with(bool ignore, int seed)
{
    kcr_fake *f = NULL;
    cr_assert_eq(kcr_fake_new(&(kcr_fake_options){.ignore_shard_selector = ignore}, &f), KCR_OK);
    seed_many(f, "default", seed);
    return f;
}

typedef struct tally {
    int n, outside;
    kcr_shard_range r;
} tally;

static kcr_err tally_item(kcr_object *o, void *ud)
{
    tally *t = ud;
    t->n++;
    t->outside += !kcr_shard_match(o, KCR_SHARD_BY_UID, &t->r, 1);
    return KCR_OK;
}

static kcr_err tally_event(const kcr_watch_event *ev, void *ud)
{
    if (ev->object && ev->type != KCR_WATCH_BOOKMARK)
        tally_item(ev->object, ud);
    return KCR_OK;
}

Test(shard_fake, list_applies_selector_and_answers_shard_info)
{
    kcr_fake *f = fake_with(false, N_SEED);
    kcr_client *c = NULL;
    cr_assert_eq(kcr_fake_client(f, NULL, &c), KCR_OK);
    /* other spellings come back in normal form, as the apiserver echoes */
    const char *lo_text = "shardRange(object.metadata.uid,\"0x0000000000000000\","
                          "\"0x8000000000000000\")";
    char *lo_normal = selector_of(LO), *hi = selector_of(HI);
    tally a = {.r = LO}, b = {.r = HI};
    kcr_shard_info info = {0};
    cr_assert_eq(
        kcr_client_list(
            c, &(kcr_request){.resource = &CM, .shard_selector = lo_text, .shard_info = &info},
            tally_item, &a, NULL),
        KCR_OK, "%s", kcr_last_error());
    cr_assert(info.present);
    cr_expect_str_eq(info.selector, lo_normal);
    cr_assert_eq(
        kcr_client_list(
            c,
            &(kcr_request){.resource = &CM, .shard_selector = hi, .shard_info = &info, .limit = 7},
            tally_item, &b, NULL),
        KCR_OK);
    cr_expect(info.present, "a page carries shardInfo too");
    cr_expect_eq(a.outside, 0);
    cr_expect_eq(b.outside, 0);
    cr_expect_eq(b.n, 7);
    b.n = 0;
    cr_assert_eq(kcr_client_list(c, &(kcr_request){.resource = &CM, .shard_selector = hi},
                                 tally_item, &b, NULL),
                 KCR_OK);
    cr_expect_eq(a.n + b.n, N_SEED, "the halves partition the list: %d + %d", a.n, b.n);
    cr_expect_gt(a.n, N_SEED / 4);
    cr_expect_gt(b.n, N_SEED / 4);

    /* no selector: no shardInfo */
    cr_assert_eq(
        kcr_client_list(c, &(kcr_request){.resource = &CM, .shard_info = &info}, NULL, NULL, NULL),
        KCR_OK);
    cr_expect_not(info.present);
    kcr_shard_info_clear(&info);
    free(lo_normal);
    free(hi);
    kcr_client_free(c);
    kcr_fake_free(f);
}

Test(shard_fake, watch_applies_selector)
{
    kcr_fake *f = fake_with(false, 0);
    kcr_client *c = NULL;
    cr_assert_eq(kcr_fake_client(f, NULL, &c), KCR_OK);
    seed_many(f, "default", 100); /* history: a watch from rv 0+1 replays it */
    char *lo = selector_of(LO);
    tally a = {.r = LO}, all = {.r = {0, 0}};
    /* a watch from "1" replays the history after it, filtered */
    cr_assert_eq(kcr_client_watch(c,
                                  &(kcr_request){.resource = &CM,
                                                 .resource_version = "1",
                                                 .shard_selector = lo,
                                                 .timeout_ms = 1},
                                  tally_event, &a),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_client_watch(
                     c, &(kcr_request){.resource = &CM, .resource_version = "1", .timeout_ms = 1},
                     tally_event, &all),
                 KCR_OK);
    cr_expect_eq(all.n, 99);
    cr_expect_eq(a.outside, 0);
    cr_expect_gt(a.n, 20);
    cr_expect_lt(a.n, 80);
    free(lo);
    kcr_client_free(c);
    kcr_fake_free(f);
}

Test(shard_fake, gate_off_ignores_selector)
{
    kcr_fake *f = fake_with(true, 50);
    kcr_client *c = NULL;
    cr_assert_eq(kcr_fake_client(f, NULL, &c), KCR_OK);
    char *lo = selector_of(LO);
    tally a = {.r = LO};
    kcr_shard_info info = {0};
    cr_assert_eq(kcr_client_list(
                     c, &(kcr_request){.resource = &CM, .shard_selector = lo, .shard_info = &info},
                     tally_item, &a, NULL),
                 KCR_OK);
    cr_expect_eq(a.n, 50, "every object");
    cr_expect_gt(a.outside, 0);
    cr_expect_not(info.present);
    /* even malformed text is ignored, as with the gate off */
    cr_expect_eq(kcr_client_list(c, &(kcr_request){.resource = &CM, .shard_selector = "x"}, NULL,
                                 NULL, NULL),
                 KCR_OK);
    free(lo);
    kcr_client_free(c);
    kcr_fake_free(f);
}

Test(shard_fake, malformed_selector_is_a_500_with_the_parsers_words)
{
    kcr_fake *f = fake_with(false, 1);
    kcr_client *c = NULL;
    cr_assert_eq(kcr_fake_client(f, NULL, &c), KCR_OK);
    kcr_status st = {0};
    const char *bad = "shardRange(object.metadata.name, '0x0000000000000000', "
                      "'0x8000000000000000')";
    cr_expect_neq(
        kcr_client_list(c, &(kcr_request){.resource = &CM, .shard_selector = bad, .status = &st},
                        NULL, NULL, NULL),
        KCR_OK);
    cr_expect_eq(st.code, 500);
    cr_expect(strstr(st.message, "object.metadata.name") != NULL, "%s", st.message);
    cr_expect_neq(
        kcr_client_watch(
            c,
            &(kcr_request){.resource = &CM, .shard_selector = bad, .status = &st, .timeout_ms = 1},
            tally_event, &(tally){0}),
        KCR_OK);
    cr_expect_eq(st.code, 500);
    kcr_status_clear(&st);
    kcr_client_free(c);
    kcr_fake_free(f);
}

/* ---- informers ---- */

static atomic_int fallback_warnings;

static void count_fallback(kcr_log_level level, const char *module, const char *message,
                           void *user_data)
{
    if (level == KCR_LOG_WARN && strstr(message, "ignored shardSelector"))
        atomic_fetch_add(&fallback_warnings, 1);
}

typedef struct pair {
    kcr_fake *fake;
    kcr_client *c;
    kcr_informer_factory *fac;
    kcr_informer *lo, *hi;
    char *lo_sel, *hi_sel;
} pair;

static void pair_start(pair *p, bool ignore)
{
    p->fake = fake_with(ignore, N_SEED);
    cr_assert_eq(kcr_fake_client(p->fake, NULL, &p->c), KCR_OK);
    cr_assert_eq(kcr_informer_factory_new(p->c, NULL, &p->fac), KCR_OK);
    p->lo_sel = selector_of(LO);
    p->hi_sel = selector_of(HI);
    /* streaming asked for, LIST used: only a List says who filtered */
    kcr_informer_options o = {.reflector = {.list_mode = KCR_LIST_MODE_STREAMING,
                                            .page_size = 16,
                                            .shard_selector = p->lo_sel}};
    cr_assert_eq(kcr_informer_factory_informer(p->fac, &CM, &o, &p->lo), KCR_OK);
    o.reflector.shard_selector = p->hi_sel;
    cr_assert_eq(kcr_informer_factory_informer(p->fac, &CM, &o, &p->hi), KCR_OK);
    cr_assert_neq(p->lo, p->hi, "another selector is another informer");
    kcr_informer *again = NULL;
    o.reflector.shard_selector = p->lo_sel;
    cr_assert_eq(kcr_informer_factory_informer(p->fac, &CM, &o, &again), KCR_OK);
    cr_assert_eq(again, p->lo, "the same selector shares the informer");
    cr_assert_eq(kcr_informer_factory_start(p->fac), KCR_OK);
    cr_assert_eq(kcr_informer_factory_wait_for_sync(p->fac, WAIT_MS, NULL), KCR_OK, "%s",
                 kcr_last_error());
}

static void pair_free(pair *p)
{
    kcr_informer_factory_free(p->fac);
    kcr_client_free(p->c);
    kcr_fake_free(p->fake);
    free(p->lo_sel);
    free(p->hi_sel);
}

static kcr_reflector_stats rstats(kcr_informer *inf)
{
    kcr_reflector_stats st;
    kcr_reflector_get_stats(kcr_informer_reflector(inf), &st);
    return st;
}

/* A list callback keeping each item in the kcr_object_list ud. */
static kcr_err name_of_item(kcr_object *o, void *ud)
{
    kcr_object_list *l = ud;
    kcr_object **grown = realloc(l->items, (l->len + 1) * sizeof *grown);
    if (!grown)
        return KCR_ERR_NOMEM;
    l->items = grown;
    l->items[l->len++] = kcr_object_ref(o);
    return KCR_OK;
}

static bool holds(const kcr_object_list *l, const char *name)
{
    for (size_t i = 0; i < l->len; i++)
        if (strcmp(kcr_object_name(l->items[i]), name) == 0)
            return true;
    return false;
}

/* The fake holds `want` objects and each is in exactly the cache of its
 * shard, which hold nothing else. (A count alone passed mid-churn: with
 * 30 of 40 adds and none of 10 deletes applied the caches also held 230.) */
static bool partitioned(pair *p, size_t want)
{
    kcr_object_list l = {0}, h = {0}, all = {0};
    bool ok = kcr_store_list(kcr_informer_store(p->lo), &l) == KCR_OK &&
              kcr_store_list(kcr_informer_store(p->hi), &h) == KCR_OK &&
              kcr_client_list(p->c, &(kcr_request){.resource = &CM, .ns = "default"},
                              name_of_item, &all, NULL) == KCR_OK;
    ok = ok && all.len == want && l.len + h.len == want;
    for (size_t i = 0; ok && i < all.len; i++) {
        bool lo_owns = kcr_shard_match(all.items[i], KCR_SHARD_BY_UID, &LO, 1);
        ok = holds(lo_owns ? &l : &h, kcr_object_name(all.items[i]));
    }
    kcr_object_list_free(&l);
    kcr_object_list_free(&h);
    kcr_object_list_free(&all);
    return ok;
}

/* Waits for partitioned(p, want); if it never holds, fails the test saying
 * where the caches and the fake differ and what each reflector did, so a
 * rare failure explains itself in a CI log. */
static void wait_partitioned(pair *p, size_t want)
{
    int64_t deadline = now_ms() + WAIT_MS;
    bool ok;
    while (!(ok = partitioned(p, want)) && now_ms() < deadline)
        sleep_ms(5);
    if (ok)
        return;
    kcr_object_list lo = {0}, hi = {0}, all = {0};
    cr_assert_eq(kcr_store_list(kcr_informer_store(p->lo), &lo), KCR_OK);
    cr_assert_eq(kcr_store_list(kcr_informer_store(p->hi), &hi), KCR_OK);
    cr_assert_eq(kcr_client_list(p->c, &(kcr_request){.resource = &CM, .ns = "default"},
                                 name_of_item, &all, NULL),
                 KCR_OK);
    char report[2048];
    size_t n = (size_t)snprintf(report, sizeof report, "fake %zu, lo %zu, hi %zu, want %zu:",
                                all.len, lo.len, hi.len, want);
    for (size_t i = 0; i < all.len && n < sizeof report; i++) {
        const char *name = kcr_object_name(all.items[i]);
        bool in_lo = holds(&lo, name), in_hi = holds(&hi, name);
        bool lo_owns = kcr_shard_match(all.items[i], KCR_SHARD_BY_UID, &LO, 1);
        if (in_lo != lo_owns || in_hi == lo_owns)
            n += (size_t)snprintf(report + n, sizeof report - n, " %s (rv %s) in lo %d hi %d;",
                                  name, kcr_object_resource_version(all.items[i]), in_lo, in_hi);
    }
    for (int c = 0; c < 2 && n < sizeof report; c++) {
        const kcr_object_list *l = c ? &hi : &lo;
        for (size_t i = 0; i < l->len && n < sizeof report; i++)
            if (!holds(&all, kcr_object_name(l->items[i])))
                n += (size_t)snprintf(report + n, sizeof report - n, " %s (rv %s) gone, in %s;",
                                      kcr_object_name(l->items[i]),
                                      kcr_object_resource_version(l->items[i]), c ? "hi" : "lo");
    }
    for (int c = 0; c < 2 && n < sizeof report; c++) {
        kcr_reflector_stats st = rstats(c ? p->hi : p->lo);
        n += (size_t)snprintf(report + n, sizeof report - n,
                              " %s: %llu lists, %llu watches, %llu events, %llu failures;",
                              c ? "hi" : "lo", (unsigned long long)st.lists,
                              (unsigned long long)st.watch_requests,
                              (unsigned long long)st.watch_events,
                              (unsigned long long)st.failures);
    }
    kcr_object_list_free(&lo);
    kcr_object_list_free(&hi);
    kcr_object_list_free(&all);
    cr_assert_fail("after %d ms the caches are not the fake's partition: %s", WAIT_MS, report);
}

static void churn(pair *p)
{
    for (int i = 0; i < 40; i++) {
        char name[32];
        snprintf(name, sizeof name, "new-%02d", i);
        kcr_object_unref(seed_cm(p->fake, "default", name, "x", "y"));
    }
    for (int i = 0; i < 10; i++) {
        char name[32];
        snprintf(name, sizeof name, "cm-%05d", i);
        cr_assert_eq(
            kcr_client_delete(p->c, &(kcr_request){.resource = &CM, .ns = "default", .name = name},
                              NULL),
            KCR_OK);
    }
    cr_assert_eq(patch_cm(p->c, "default", "cm-00100", "changed"), KCR_OK);
}

Test(shard_informer, server_filters)
{
    atomic_store(&fallback_warnings, 0);
    kcr_log_set_handler(count_fallback, NULL);
    pair p = {0};
    pair_start(&p, false);
    cr_assert(partitioned(&p, N_SEED));
    kcr_reflector_stats a = rstats(p.lo), b = rstats(p.hi);
    cr_expect_eq(a.shard_mode, KCR_SHARD_SELECTOR_SERVER);
    cr_expect_eq(b.shard_mode, KCR_SHARD_SELECTOR_SERVER);
    cr_expect_eq(a.shard_filtered + b.shard_filtered, 0, "the server sent only the shard");
    cr_expect_not(a.streaming, "a selector means LIST");
    cr_expect_gt(a.list_requests, 1, "paged");
    churn(&p);
    wait_partitioned(&p, N_SEED + 40 - 10);
    cr_expect_eq(rstats(p.lo).shard_filtered + rstats(p.hi).shard_filtered, 0);
    cr_expect_eq(atomic_load(&fallback_warnings), 0);
    pair_free(&p);
    kcr_log_set_handler(NULL, NULL);
}

Test(shard_informer, client_filters_when_the_server_ignores_the_selector)
{
    atomic_store(&fallback_warnings, 0);
    kcr_log_set_handler(count_fallback, NULL);
    pair p = {0};
    pair_start(&p, true);
    cr_assert(partitioned(&p, N_SEED));
    kcr_reflector_stats a = rstats(p.lo), b = rstats(p.hi);
    cr_expect_eq(a.shard_mode, KCR_SHARD_SELECTOR_CLIENT);
    cr_expect_eq(b.shard_mode, KCR_SHARD_SELECTOR_CLIENT);
    cr_expect_eq(a.shard_filtered + b.shard_filtered, N_SEED,
                 "each dropped the other's half of the list");
    churn(&p);
    wait_partitioned(&p, N_SEED + 40 - 10);
    /* 40 creates, 10 deletes and 1 update, each seen by both, kept by one */
    WAIT_FOR(rstats(p.lo).shard_filtered + rstats(p.hi).shard_filtered == N_SEED + 51, WAIT_MS);
    /* a relist does not warn again */
    kcr_fake_watch_error(p.fake, &CM, 410, "Expired", "too old resource version");
    WAIT_FOR(rstats(p.lo).lists == 2 && rstats(p.hi).lists == 2, WAIT_MS);
    cr_assert(partitioned(&p, N_SEED + 40 - 10));
    cr_expect_eq(atomic_load(&fallback_warnings), 2, "one warning per informer");
    pair_free(&p);
    kcr_log_set_handler(NULL, NULL);
}

Test(shard_informer, malformed_selector_is_refused_up_front)
{
    kcr_fake *f = fake_with(false, 0);
    kcr_client *c = NULL;
    cr_assert_eq(kcr_fake_client(f, NULL, &c), KCR_OK);
    kcr_informer *inf = NULL;
    kcr_informer_options o = {.reflector = {.shard_selector = "shardRange(object.metadata.uid, "
                                                              "'0x8', '0x9')"}};
    cr_expect_eq(kcr_informer_new(c, &CM, &o, &inf), KCR_ERR_INVALID);
    cr_expect_null(inf);
    cr_expect(strstr(kcr_last_error(), "16 hex digits") != NULL, "%s", kcr_last_error());
    /* no selector: "" is none */
    o.reflector.shard_selector = "";
    cr_assert_eq(kcr_informer_new(c, &CM, &o, &inf), KCR_OK);
    kcr_informer_free(inf);
    kcr_client_free(c);
    kcr_fake_free(f);
}

/* ---- changing the selector of a running informer ---- */

typedef struct seen {
    atomic_int adds, tombstones, deletes, updates;
} seen;

static void seen_add(const char *key, const kcr_object *obj, bool initial, void *ud)
{
    atomic_fetch_add(&((seen *)ud)->adds, 1);
}

static void seen_update(const char *key, const kcr_object *o, const kcr_object *n, void *ud)
{
    atomic_fetch_add(&((seen *)ud)->updates, 1);
}

static void seen_delete(const char *key, const kcr_object *obj, const kcr_tombstone *t, void *ud)
{
    seen *s = ud;
    atomic_fetch_add(t ? &s->tombstones : &s->deletes, 1);
}

/* A started informer on ConfigMaps with shard selector `sel`, its handler
 * counting into *s, synced. */
static kcr_informer *synced_informer(kcr_client *c, const char *sel, seen *s)
{
    kcr_informer *inf = NULL;
    kcr_informer_options o = {.reflector = {.shard_selector = sel}};
    cr_assert_eq(kcr_informer_new(c, &CM, &o, &inf), KCR_OK);
    kcr_event_handler h = {
        .on_add = seen_add, .on_update = seen_update, .on_delete = seen_delete, .user_data = s};
    cr_assert_eq(kcr_informer_add_handler(inf, &h, NULL), KCR_OK);
    cr_assert_eq(kcr_informer_start(inf), KCR_OK);
    cr_assert_eq(kcr_informer_wait_for_sync(inf, WAIT_MS, NULL), KCR_OK, "%s", kcr_last_error());
    return inf;
}

/* The store holds exactly the fake's objects in r (n 0: all of them). */
static bool holds_exactly(kcr_informer *inf, const kcr_shard_range *r, size_t n, int want)
{
    kcr_object_list l = {0};
    if (kcr_store_list(kcr_informer_store(inf), &l) != KCR_OK)
        return false;
    bool ok = (int)l.len == want;
    for (size_t i = 0; ok && n && i < l.len; i++)
        ok = kcr_shard_match(l.items[i], KCR_SHARD_BY_UID, r, n);
    kcr_object_list_free(&l);
    return ok;
}

static int count_in(kcr_fake *f, kcr_shard_range r)
{
    kcr_client *c = NULL;
    cr_assert_eq(kcr_fake_client(f, NULL, &c), KCR_OK);
    tally t = {.r = r};
    cr_assert_eq(kcr_client_list(c, &(kcr_request){.resource = &CM}, tally_item, &t, NULL), KCR_OK);
    kcr_client_free(c);
    return t.n - t.outside;
}

static void change_selector(bool ignore)
{
    kcr_fake *f = fake_with(ignore, N_SEED);
    kcr_client *c = NULL;
    cr_assert_eq(kcr_fake_client(f, NULL, &c), KCR_OK);
    char *lo = selector_of(LO), *hi = selector_of(HI);
    int n_lo = count_in(f, LO), n_hi = count_in(f, HI);
    seen s = {0};
    kcr_informer *inf = synced_informer(c, lo, &s);
    WAIT_FOR(atomic_load(&s.adds) == n_lo, WAIT_MS);
    cr_assert(holds_exactly(inf, &LO, 1, n_lo));
    kcr_reflector *r = kcr_informer_reflector(inf);

    cr_expect_eq(kcr_reflector_set_shard_selector(r, "shardRange(bad)"), KCR_ERR_INVALID);
    cr_assert_eq(kcr_reflector_set_shard_selector(r, hi), KCR_OK, "%s", kcr_last_error());
    WAIT_FOR(holds_exactly(inf, &HI, 1, n_hi), WAIT_MS);
    WAIT_FOR(atomic_load(&s.tombstones) == n_lo && atomic_load(&s.adds) == n_lo + n_hi, WAIT_MS);
    cr_expect_eq(atomic_load(&s.deletes), 0, "objects that left the shard come as tombstones");
    cr_expect_eq(rstats(inf).shard_mode,
                 ignore ? KCR_SHARD_SELECTOR_CLIENT : KCR_SHARD_SELECTOR_SERVER);
    /* the watch follows the new selector */
    kcr_object_unref(seed_cm(f, "default", "late", "x", "y"));
    int n_hi2 = count_in(f, HI);
    WAIT_FOR(holds_exactly(inf, &HI, 1, n_hi2), WAIT_MS);

    /* "" is no selector: everything */
    cr_assert_eq(kcr_reflector_set_shard_selector(r, ""), KCR_OK);
    WAIT_FOR(holds_exactly(inf, NULL, 0, N_SEED + 1), WAIT_MS);
    cr_expect_eq(rstats(inf).shard_mode, KCR_SHARD_SELECTOR_NONE);
    kcr_informer_free(inf);
    free(lo);
    free(hi);
    kcr_client_free(c);
    kcr_fake_free(f);
}

Test(shard_informer, selector_changes_at_run_time)
{
    change_selector(false);
}

Test(shard_informer, selector_changes_at_run_time_gate_off)
{
    change_selector(true);
}

/* ---- kcr's own field: the controller reference's uid ---- */

/* A ConfigMap controlled by owner_uid (NULL: no owner). */
static void seed_child(kcr_fake *f, const char *name, const char *owner_uid)
{
    char json[1024], refs[256] = "";
    if (owner_uid)
        snprintf(refs, sizeof refs,
                 ",\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Secret\","
                 "\"name\":\"o\",\"uid\":\"%s\",\"controller\":true}]",
                 owner_uid);
    snprintf(json, sizeof json,
             "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"%s\","
             "\"namespace\":\"default\"%s}}",
             name, refs);
    cr_assert_eq(kcr_fake_add(f, &CM, json, NULL), KCR_OK, "%s", kcr_last_error());
}

/* An owner uid whose hash falls in r. */
static void uid_in(kcr_shard_range r, char *out, size_t size)
{
    for (uint64_t i = 1;; i++) {
        snprintf(out, size, "%016llx", (unsigned long long)(i * UINT64_C(0xbf58476d1ce4e5b9)));
        if (kcr_shard_range_contains(r, kcr_shard_hash(out, strlen(out))))
            return;
    }
}

/* Makes a controller with uid owner_uid the controller of ConfigMap `name`. */
static void adopt(kcr_client *c, const char *name, const char *owner_uid)
{
    char patch[256];
    snprintf(patch, sizeof patch,
             "{\"metadata\":{\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Secret\","
             "\"name\":\"o\",\"uid\":\"%s\",\"controller\":true}]}}",
             owner_uid);
    cr_assert_eq(kcr_client_patch(c,
                                  &(kcr_request){.resource = &CM,
                                                 .ns = "default",
                                                 .name = name,
                                                 .patch_type = KCR_PATCH_MERGE,
                                                 .body = patch},
                                  NULL),
                 KCR_OK, "%s", kcr_last_error());
}

/* The cache holds the children whose controller hashes into r, and every
 * object without a controller. */
static bool holds_children(kcr_informer *inf, kcr_shard_range r, int want)
{
    kcr_object_list l = {0};
    if (kcr_store_list(kcr_informer_store(inf), &l) != KCR_OK)
        return false;
    bool ok = (int)l.len == want;
    for (size_t i = 0; ok && i < l.len; i++)
        ok = kcr_shard_match(l.items[i], KCR_SHARD_BY_CONTROLLER, &r, 1);
    kcr_object_list_free(&l);
    return ok;
}

Test(shard_informer, by_controller_is_filtered_on_the_client_and_follows_the_controller)
{
    atomic_store(&fallback_warnings, 0);
    kcr_log_set_handler(count_fallback, NULL);
    kcr_fake *f = NULL;
    cr_assert_eq(kcr_fake_new(NULL, &f), KCR_OK);
    int n_lo = 0;
    for (int i = 0; i < 60; i++) {
        char name[32], uid[32];
        snprintf(name, sizeof name, "child-%02d", i);
        /* spread, as the apiserver's random uids are: FNV-1a's top bits
         * barely move when only a key's last byte changes */
        snprintf(uid, sizeof uid, "%016llx",
                 (unsigned long long)((uint64_t)(i + 1) * UINT64_C(0x9e3779b97f4a7c15)));
        seed_child(f, name, uid);
        n_lo += kcr_shard_range_contains(LO, kcr_shard_hash(uid, strlen(uid)));
    }
    for (int i = 0; i < 5; i++) {
        char name[32];
        snprintf(name, sizeof name, "orphan-%d", i);
        seed_child(f, name, NULL);
    }
    cr_assert(n_lo > 0 && n_lo < 60);
    kcr_client *c = NULL;
    cr_assert_eq(kcr_fake_client(f, NULL, &c), KCR_OK);
    /* the fake refuses kcr's field as an apiserver refuses an unknown path */
    char *lo = NULL, *hi = NULL;
    cr_assert_eq(kcr_shard_selector_format(KCR_SHARD_BY_CONTROLLER, &LO, 1, &lo), KCR_OK);
    cr_assert_eq(kcr_shard_selector_format(KCR_SHARD_BY_CONTROLLER, &HI, 1, &hi), KCR_OK);
    tally t = {.r = LO};
    cr_expect_neq(
        kcr_client_list(c, &(kcr_request){.resource = &CM, .shard_selector = lo}, tally_item, &t,
                        NULL),
        KCR_OK, "the fake answers kcr's field with an error");
    /* so an informer that syncs never sent it */
    seen s = {0};
    kcr_informer *inf = synced_informer(c, lo, &s);
    cr_expect(holds_children(inf, LO, n_lo + 5), "the low half's children and the orphans");
    /* the handler has seen the initial adds: a change of an object whose
     * add is still pending would be delivered merged with it (coalescing,
     * docs/informer.md), as an add or a lone delete */
    WAIT_FOR(atomic_load(&s.adds) == n_lo + 5, WAIT_MS);
    cr_expect_eq(rstats(inf).shard_mode, KCR_SHARD_SELECTOR_CLIENT);
    cr_expect_eq(rstats(inf).shard_filtered, (uint64_t)(60 - n_lo));
    cr_expect_eq(atomic_load(&fallback_warnings), 0, "filtering on the client is by design here");

    /* an orphan adopted by a controller outside the selection leaves the
     * cache; one adopted inside stays */
    char out_uid[32], in_uid[32];
    uid_in(HI, out_uid, sizeof out_uid);
    uid_in(LO, in_uid, sizeof in_uid);
    adopt(c, "orphan-0", out_uid);
    adopt(c, "orphan-1", in_uid);
    WAIT_FOR(holds_children(inf, LO, n_lo + 4) && atomic_load(&s.updates) == 1, WAIT_MS);
    cr_expect_eq(atomic_load(&s.deletes) + atomic_load(&s.tombstones), 1,
                 "the adopted-away orphan left as a deletion");

    /* a new selection: the generation counts it, and the cache has it
     * once it is synced */
    kcr_reflector *r = kcr_informer_reflector(inf);
    cr_expect_eq(kcr__reflector_shard_gen(r), 0);
    cr_assert_eq(kcr_reflector_set_shard_selector(r, hi), KCR_OK);
    cr_expect_eq(kcr__reflector_shard_gen(r), 1);
    WAIT_FOR(kcr__informer_shard_synced(inf, 1), WAIT_MS);
    cr_expect(holds_children(inf, HI, 60 - n_lo + 1 + 3),
              "the high half's children, the orphan adopted there, the 3 orphans left");
    kcr_informer_free(inf);
    free(lo);
    free(hi);
    kcr_client_free(c);
    kcr_fake_free(f);
    kcr_log_set_handler(NULL, NULL);
}

/* ---- following a selection change: only the gained ranges are listed ---- */

/* A child of owner_uid labelled half=<half>, as a bucket label would be. */
static void seed_half_child(kcr_fake *f, const char *name, const char *owner_uid, const char *half)
{
    char json[1024];
    snprintf(json, sizeof json,
             "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"%s\","
             "\"namespace\":\"default\",\"labels\":{\"half\":\"%s\"},\"ownerReferences\":[{"
             "\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"name\":\"o\",\"uid\":\"%s\","
             "\"controller\":true}]}}",
             name, half, owner_uid);
    cr_assert_eq(kcr_fake_add(f, &CM, json, NULL), KCR_OK, "%s", kcr_last_error());
}

/* The label selector of the halves the ranges touch, as the sharded
 * manager's bucket labels (a kcr__shard_label_fn). */
static char *half_labels(const char *base, const kcr_shard_range *r, size_t n)
{
    bool lo = false, hi = false;
    for (size_t i = 0; i < n; i++) {
        lo = lo || r[i].start < HI.start;
        hi = hi || r[i].end == 0 || r[i].end > HI.start;
    }
    return strdup(!n ? "" : lo && hi ? "half in (hi,lo)" : lo ? "half in (lo)" : "half in (hi)");
}

typedef struct list_spy {
    atomic_int lists;
    kcr_fake *f;
    bool write_on_list; /* the next LIST first changes HI's children */
    char hi_uid[32];
} list_spy;

static void count_lists(kcr_fake_verb verb, const kcr_resource *res, const char *ns,
                        const char *name, void *ud)
{
    list_spy *s = ud;
    if (verb != KCR_FAKE_LIST)
        return;
    atomic_fetch_add(&s->lists, 1);
    if (!s->write_on_list)
        return;
    s->write_on_list = false;
    /* after the reflector's watch stopped, before the list reads: the list
     * must read the version the watch reached, and the watch replays these */
    kcr_client *c = NULL;
    cr_assert_eq(kcr_fake_client(s->f, NULL, &c), KCR_OK);
    cr_assert_eq(patch_cm(c, "default", "hi-0", "changed"), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_client_delete(c, &(kcr_request){.resource = &CM, .ns = "default", .name = "hi-1"},
                                   NULL),
                 KCR_OK);
    seed_half_child(s->f, "hi-new", s->hi_uid, "hi");
    kcr_client_free(c);
}

/* What the reflector received of hi-0: how often, and its data.v the
 * first time ("(none)" for none). */
typedef struct hi0_seen {
    int times;
    char first[32];
} hi0_seen;

/* The informer's transform, which sees every object the reflector keeps:
 * records hi0_seen. */
static kcr_err see_hi0(const kcr_object *in, kcr_object **out, void *ud)
{
    hi0_seen *h = ud;
    if (strcmp(kcr_object_name(in), "hi-0") == 0 && h->times++ == 0) {
        const char *v = kcr_value_string(kcr_object_get(in, "data.v"), NULL);
        snprintf(h->first, sizeof h->first, "%s", v ? v : "(none)");
    }
    *out = kcr_object_ref(in);
    return KCR_OK;
}

static char *controller_selector(kcr_shard_range r)
{
    char *s = NULL;
    cr_assert_eq(kcr_shard_selector_format(KCR_SHARD_BY_CONTROLLER, &r, 1, &s), KCR_OK);
    return s;
}

/* The version r's watch resumes from (malloc'd): set just after the first
 * list is handed over, which can be after the informer synced, so waited
 * for. */
static char *watched_rv(kcr_reflector *r)
{
    char *watched = NULL;
    for (int i = 0; i < WAIT_MS / 5 && (!watched || !*watched); i++) {
        free(watched);
        watched = kcr_reflector_last_sync_rv(r);
        if (!*watched)
            sleep_ms(5);
    }
    return watched;
}

static bool holds_key(kcr_informer *inf, const char *key)
{
    kcr_object *o = kcr_store_get_by_key(kcr_informer_store(inf), key);
    kcr_object_unref(o);
    return o != NULL;
}

/* kcr__reflector_set_shard_label and the informer's narrowing: from LO to
 * everything, only HI is listed (once, with HI's labels, a consistent
 * read) and only its objects are delivered; from everything to HI nothing
 * is listed and LO's objects leave as tombstones; the watch after each
 * follows the new labels. Writes between the watch's end and the list are
 * in the list, and the resumed watch does not replay them over it. */
static void gained_ranges(bool write_between)
{
    kcr_fake *f = fake_with(false, 0);
    list_spy ls = {.f = f};
    char lo_uid[32];
    uid_in(LO, lo_uid, sizeof lo_uid);
    uid_in(HI, ls.hi_uid, sizeof ls.hi_uid);
    for (int i = 0; i < 6; i++) {
        char name[16];
        snprintf(name, sizeof name, "lo-%d", i);
        seed_half_child(f, name, lo_uid, "lo");
        snprintf(name, sizeof name, "hi-%d", i);
        seed_half_child(f, name, ls.hi_uid, "hi");
    }
    kcr_client *c = spy_new(f);
    char *lo = controller_selector(LO), *hi = controller_selector(HI),
         *all = controller_selector((kcr_shard_range){0, 0});
    kcr_informer *inf = NULL;
    hi0_seen hi0 = {0};
    kcr_informer_options o = {.reflector = {.shard_selector = lo,
                                            .label_selector = "half in (lo)",
                                            .transform = see_hi0,
                                            .transform_user_data = &hi0}};
    cr_assert_eq(kcr_informer_new(c, &CM, &o, &inf), KCR_OK);
    kcr_reflector *r = kcr_informer_reflector(inf);
    cr_assert_eq(kcr__reflector_set_shard_label(r, half_labels, NULL), KCR_OK);
    seen s = {0};
    kcr_event_handler h = {
        .on_add = seen_add, .on_update = seen_update, .on_delete = seen_delete, .user_data = &s};
    cr_assert_eq(kcr_informer_add_handler(inf, &h, NULL), KCR_OK);
    kcr_fake_set_hook(f, count_lists, &ls);
    cr_assert_eq(kcr_informer_start(inf), KCR_OK);
    cr_assert_eq(kcr_informer_wait_for_sync(inf, WAIT_MS, NULL), KCR_OK, "%s", kcr_last_error());
    cr_assert(holds_children(inf, LO, 6));
    cr_assert_eq(atomic_load(&ls.lists), 1);

    char *watched = watched_rv(r);
    ls.write_on_list = write_between;
    cr_assert_eq(kcr_reflector_set_shard_selector(r, all), KCR_OK);
    cr_expect_eq(kcr__reflector_shard_gen(r), 1);
    WAIT_FOR(kcr__informer_shard_synced(inf, 1), WAIT_MS);
    WAIT_FOR(holds_children(inf, (kcr_shard_range){0, 0}, 12), WAIT_MS);
    cr_expect_eq(atomic_load(&ls.lists), 2, "one list, of the gained range");
    /* the first list, maybe its watch (the change can come before it
     * starts), the list of the gained range, the watch resumed */
    WAIT_FOR(spy_n(c) >= 3 && spy_get(c, spy_n(c) - 1).watch, WAIT_MS);
    size_t g = 1;
    while (g < spy_n(c) && spy_get(c, g).watch)
        g++;
    cr_assert_lt(g + 1, spy_n(c));
    spy_call gl = spy_get(c, g), resumed = spy_get(c, g + 1);
    cr_expect_str_eq(gl.label, "half in (hi)", "the gained range's labels");
    cr_expect_str_eq(gl.shard, "", "kcr's own field is never sent: the labels select");
    cr_expect_str_eq(gl.rv, "(null)", "a consistent read, not one at the watch's version");
    cr_expect_str_eq(gl.rv_match, "");
    cr_expect(resumed.watch);
    cr_expect_str_eq(resumed.label, "half in (hi,lo)");
    cr_expect_str_eq(resumed.rv, watched, "the watch resumes from where it was");
    cr_expect(strcmp(watched, "0") != 0 && *watched, "a version, not a fresh watch");
    free(watched);
    cr_expect_eq(rstats(inf).shard_filtered, 0, "it asked for HI's labels only");
    if (write_between) {
        /* the list read the newest state; the resumed watch skipped the
         * writes the list held */
        WAIT_FOR(holds_key(inf, "default/hi-new") && !holds_key(inf, "default/hi-1"), WAIT_MS);
        kcr_object *changed = kcr_store_get_by_key(kcr_informer_store(inf), "default/hi-0");
        cr_assert_not_null(changed);
        const char *v = kcr_value_string(kcr_object_get(changed, "data.v"), NULL);
        cr_expect(v && strcmp(v, "changed") == 0, "hi-0 as patched");
        kcr_object_unref(changed);
        cr_expect_str_eq(hi0.first, "changed", "the list read hi-0 as it is now");
        WAIT_FOR(atomic_load(&s.adds) == 12, WAIT_MS);
        cr_expect_eq(hi0.times, 1, "hi-0's change came again through the watch");
        cr_expect_eq(rstats(inf).watch_events, 0, "the watch delivered an event the list held");
        cr_expect_eq(atomic_load(&s.updates) + atomic_load(&s.deletes), 0);
    } else {
        WAIT_FOR(atomic_load(&s.adds) == 12, WAIT_MS);
        cr_expect_eq(atomic_load(&s.updates), 0, "kept objects are not delivered again");
    }
    cr_expect_eq(atomic_load(&s.tombstones), 0);

    cr_assert_eq(kcr_reflector_set_shard_selector(r, hi), KCR_OK);
    WAIT_FOR(kcr__informer_shard_synced(inf, 2), WAIT_MS);
    WAIT_FOR(holds_children(inf, HI, 6), WAIT_MS); /* with writes: hi-1 went, hi-new came */
    cr_expect_eq(atomic_load(&ls.lists), 2, "nothing gained, nothing listed");
    WAIT_FOR(atomic_load(&s.tombstones) == 6, WAIT_MS); /* LO's objects left the shard */
    /* the watch asks for "half in (hi)" now: a mislabelled child of HI's
     * owner is not sent, a labelled one is */
    seed_half_child(f, "hi-mislabelled", ls.hi_uid, "lo");
    seed_half_child(f, "hi-late", ls.hi_uid, "hi");
    WAIT_FOR(holds_key(inf, "default/hi-late"), WAIT_MS);
    cr_expect_not(holds_key(inf, "default/hi-mislabelled"));
    kcr_informer_free(inf);
    kcr_fake_set_hook(f, NULL, NULL);
    free(lo);
    free(hi);
    free(all);
    kcr_client_free(c);
    kcr_fake_free(f);
}

Test(shard_informer, a_change_lists_only_the_gained_ranges_and_follows_the_labels)
{
    gained_ranges(false);
}

Test(shard_informer, writes_during_a_change_are_listed_once_not_replayed)
{
    gained_ranges(true);
}

/* A change to terms out of order, overlapping and repeated (the apiserver
 * takes them): the list of what it gains asks for each gained hash once,
 * in order, and the cache then holds everything. */
Test(shard_informer, a_change_to_overlapping_terms_lists_each_gained_range_once)
{
    kcr_fake *f = fake_with(false, N_SEED);
    kcr_client *c = spy_new(f);
    kcr_shard_range mid = {UINT64_C(0x4000000000000000), UINT64_C(0xc000000000000000)};
    char *from = selector_of(mid), *whole = selector_of((kcr_shard_range){0, 0}),
         *hi = selector_of(HI), *lo = selector_of(LO);
    seen s = {0};
    kcr_informer *inf = synced_informer(c, from, &s);
    WAIT_FOR(atomic_load(&s.adds) == count_in(f, mid), WAIT_MS);
    char to[1024];
    snprintf(to, sizeof to, "%s || %s || %s || %s || %s", hi, whole, lo, whole, whole);
    cr_assert_eq(kcr_reflector_set_shard_selector(kcr_informer_reflector(inf), to), KCR_OK);
    WAIT_FOR(holds_exactly(inf, NULL, 0, N_SEED) && atomic_load(&s.adds) == N_SEED, WAIT_MS);
    cr_expect_eq(atomic_load(&s.updates) + atomic_load(&s.tombstones), 0);
    size_t lists = 0, last = 0;
    for (size_t i = 0; i < spy_n(c); i++)
        if (!spy_get(c, i).watch) {
            lists++;
            last = i;
        }
    cr_expect_eq(lists, 2, "the first list and the list of the gained ranges");
    cr_expect_str_eq(spy_get(c, last).shard,
                     "shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000')"
                     " || shardRange(object.metadata.uid, '0xc000000000000000', "
                     "'0x10000000000000000')");
    kcr_informer_free(inf);
    free(from);
    free(whole);
    free(hi);
    free(lo);
    kcr_client_free(c);
    kcr_fake_free(f);
}

/* When the version the watch resumes from was compacted while the gained
 * ranges were listed, the watch gets 410 and the reflector relists the
 * whole selection: nothing lost. */
typedef struct compactor {
    kcr_fake *f;
    atomic_bool armed;
} compactor;

/* A fake hook: the first LIST after arming compacts the history first. */
static void compact_on_list(kcr_fake_verb verb, const kcr_resource *res, const char *ns,
                            const char *name, void *ud)
{
    compactor *k = ud;
    if (verb != KCR_FAKE_LIST || !atomic_exchange(&k->armed, false))
        return;
    /* writes the ConfigMap watch never saw move the history past its version */
    for (int i = 0; i < 8; i++) {
        char json[256];
        snprintf(json, sizeof json,
                 "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"s%d\","
                 "\"namespace\":\"default\"}}",
                 i);
        cr_assert_eq(kcr_fake_add(k->f, &SECRETS, json, NULL), KCR_OK, "%s", kcr_last_error());
    }
}

Test(shard_informer, a_compacted_watch_version_after_a_change_relists_the_whole_selection)
{
    kcr_fake *f = NULL;
    cr_assert_eq(kcr_fake_new(&(kcr_fake_options){.history_size = 4}, &f), KCR_OK);
    seed_many(f, "default", 40);
    kcr_client *c = NULL;
    cr_assert_eq(kcr_fake_client(f, NULL, &c), KCR_OK);
    char *lo = selector_of(LO), *all = selector_of((kcr_shard_range){0, 0});
    seen s = {0};
    kcr_informer *inf = synced_informer(c, lo, &s);
    int n_lo = count_in(f, LO);
    cr_assert(holds_exactly(inf, &LO, 1, n_lo));
    uint64_t lists = kcr_fake_count(f, KCR_FAKE_LIST, &CM), failures = rstats(inf).failures;
    compactor k = {.f = f, .armed = true};
    kcr_fake_set_hook(f, compact_on_list, &k);
    kcr_reflector *r = kcr_informer_reflector(inf);
    cr_assert_eq(kcr_reflector_set_shard_selector(r, all), KCR_OK);
    WAIT_FOR(kcr_fake_count(f, KCR_FAKE_LIST, &CM) - lists == 2, WAIT_MS);
    WAIT_FOR(kcr__informer_shard_synced(inf, 1), WAIT_MS);
    WAIT_FOR(holds_exactly(inf, NULL, 0, 40), WAIT_MS);
    cr_expect_gt(rstats(inf).failures, failures, "the watch's 410 is recorded");
    kcr_fake_set_hook(f, NULL, NULL);
    kcr_informer_free(inf);
    free(lo);
    free(all);
    kcr_client_free(c);
    kcr_fake_free(f);
}

/* A list of the gained ranges that fails is logged with the server's words
 * and replaced by a relist of the whole selection: nothing lost. */
static atomic_int whole_relists;

static void count_whole_relists(kcr_log_level level, const char *module, const char *message,
                                void *user_data)
{
    if (strstr(message, "relisting the whole selection") && strstr(message, "etcd is away"))
        atomic_fetch_add(&whole_relists, 1);
}

Test(shard_informer, a_failed_list_of_the_gained_ranges_falls_back_to_a_whole_relist)
{
    atomic_store(&whole_relists, 0);
    kcr_log_set_handler(count_whole_relists, NULL);
    kcr_fake *f = fake_with(false, 40);
    kcr_client *c = NULL;
    cr_assert_eq(kcr_fake_client(f, NULL, &c), KCR_OK);
    char *lo = selector_of(LO), *all = selector_of((kcr_shard_range){0, 0});
    seen s = {0};
    kcr_informer *inf = synced_informer(c, lo, &s);
    uint64_t lists = kcr_fake_count(f, KCR_FAKE_LIST, &CM);
    cr_assert_eq(kcr_fake_inject_error(f, &(kcr_fake_error){.verb = KCR_FAKE_LIST,
                                                            .resource = &CM,
                                                            .times = 1,
                                                            .code = 500,
                                                            .reason = "InternalError",
                                                            .message = "etcd is away"}),
                 KCR_OK);
    cr_assert_eq(kcr_reflector_set_shard_selector(kcr_informer_reflector(inf), all), KCR_OK);
    WAIT_FOR(kcr__informer_shard_synced(inf, 1), WAIT_MS);
    WAIT_FOR(holds_exactly(inf, NULL, 0, 40), WAIT_MS);
    cr_expect_eq(kcr_fake_count(f, KCR_FAKE_LIST, &CM) - lists, 2,
                 "the failed list of the gained range, then the whole relist");
    cr_expect_eq(atomic_load(&whole_relists), 1, "the fallback is logged with the server's words");
    kcr_log_set_handler(NULL, NULL);
    kcr_informer_free(inf);
    free(lo);
    free(all);
    kcr_client_free(c);
    kcr_fake_free(f);
}

/* ---- a new label selector ---- */

/* The informer's store holds exactly `want` objects, each labelled half=<one of halves>. */
static bool holds_halves(kcr_informer *inf, int want, const char *halves)
{
    kcr_object_list l = {0};
    if (kcr_store_list(kcr_informer_store(inf), &l) != KCR_OK)
        return false;
    bool ok = (int)l.len == want;
    for (size_t i = 0; ok && i < l.len; i++) {
        const char *h = kcr_object_label(l.items[i], "half");
        ok = h && strstr(halves, h);
    }
    kcr_object_list_free(&l);
    return ok;
}

static const char *const LO_HALF[] = {"lo"}, *const HI_HALF[] = {"hi"},
                        *const BOTH_HALVES[] = {"lo", "hi"};

/* kcr__reflector_set_label_values with the informer's narrowing (label-mode
 * sharding widens and narrows its primary caches so): widening lists only
 * the value gained (once, a consistent read) and delivers only its
 * objects; narrowing lists nothing and what left goes as tombstones; the
 * watch after each resumes from where it was with the new selector.
 * Writes between the watch's end and the list are in the list, and the
 * resumed watch does not replay them over it. */
static void gained_labels(bool write_between)
{
    kcr_fake *f = fake_with(false, 0);
    list_spy ls = {.f = f};
    char uid[32];
    uid_in(LO, uid, sizeof uid);
    snprintf(ls.hi_uid, sizeof ls.hi_uid, "%s", uid);
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof name, "lo-%d", i);
        seed_half_child(f, name, uid, "lo");
        snprintf(name, sizeof name, "hi-%d", i);
        seed_half_child(f, name, uid, "hi");
    }
    kcr_client *c = spy_new(f);
    kcr_informer *inf = NULL;
    hi0_seen hi0 = {0};
    kcr_informer_options o = {
        .reflector = {.label_selector = "half=lo", .transform = see_hi0, .transform_user_data = &hi0}};
    cr_assert_eq(kcr_informer_new(c, &CM, &o, &inf), KCR_OK);
    kcr_reflector *r = kcr_informer_reflector(inf);
    cr_assert_eq(kcr__reflector_set_label_values(r, NULL, "half", LO_HALF, 1), KCR_OK);
    cr_expect_eq(kcr__reflector_shard_gen(r), 0, "before the start: the first list's selection");
    seen s = {0};
    kcr_event_handler h = {
        .on_add = seen_add, .on_update = seen_update, .on_delete = seen_delete, .user_data = &s};
    cr_assert_eq(kcr_informer_add_handler(inf, &h, NULL), KCR_OK);
    kcr_fake_set_hook(f, count_lists, &ls);
    cr_assert_eq(kcr_informer_start(inf), KCR_OK);
    cr_assert_eq(kcr_informer_wait_for_sync(inf, WAIT_MS, NULL), KCR_OK, "%s", kcr_last_error());
    cr_assert(holds_halves(inf, 3, "lo"));
    cr_assert_eq(atomic_load(&ls.lists), 1);
    char *watched = watched_rv(r);

    ls.write_on_list = write_between;
    cr_assert_eq(kcr__reflector_set_label_values(r, NULL, "half", BOTH_HALVES, 2), KCR_OK);
    cr_expect_eq(kcr__reflector_shard_gen(r), 1);
    WAIT_FOR(kcr__informer_shard_synced(inf, 1), WAIT_MS);
    /* with writes: hi-1 went, hi-new came */
    WAIT_FOR(holds_halves(inf, 6, "lo hi") && atomic_load(&s.adds) == 6, WAIT_MS);
    cr_expect_eq(atomic_load(&ls.lists), 2, "one list, of the value gained");
    WAIT_FOR(spy_n(c) >= 3 && spy_get(c, spy_n(c) - 1).watch, WAIT_MS);
    size_t g = 1;
    while (g < spy_n(c) && spy_get(c, g).watch)
        g++;
    cr_assert_lt(g + 1, spy_n(c));
    spy_call gl = spy_get(c, g), resumed = spy_get(c, g + 1);
    cr_expect_str_eq(gl.label, "half=hi", "the value gained");
    cr_expect_str_eq(gl.rv, "(null)", "a consistent read, not one at the watch's version");
    cr_expect(resumed.watch);
    cr_expect_str_eq(resumed.label, "half in (lo,hi)");
    cr_expect_str_eq(resumed.rv, watched, "the watch resumes from where it was");
    cr_expect(strcmp(watched, "0") != 0 && *watched, "a version, not a fresh watch");
    free(watched);
    if (write_between) {
        WAIT_FOR(holds_key(inf, "default/hi-new") && !holds_key(inf, "default/hi-1"), WAIT_MS);
        cr_expect_str_eq(hi0.first, "changed", "the list read hi-0 as it is now");
        cr_expect_eq(hi0.times, 1, "hi-0's change came again through the watch");
        cr_expect_eq(rstats(inf).watch_events, 0, "the watch delivered an event the list held");
    }
    cr_expect_eq(atomic_load(&s.updates) + atomic_load(&s.deletes) + atomic_load(&s.tombstones),
                 0, "kept objects are not delivered again");

    cr_assert_eq(kcr__reflector_set_label_values(r, NULL, "half", HI_HALF, 1), KCR_OK);
    WAIT_FOR(kcr__informer_shard_synced(inf, 2), WAIT_MS);
    WAIT_FOR(holds_halves(inf, 3, "hi") && atomic_load(&s.tombstones) == 3, WAIT_MS);
    cr_expect_eq(atomic_load(&ls.lists), 2, "nothing gained, nothing listed");
    cr_expect_eq(atomic_load(&s.deletes), 0, "the objects that left went as tombstones");
    /* the watch asks for "half=hi" now */
    seed_half_child(f, "lo-late", uid, "lo");
    seed_half_child(f, "hi-late", uid, "hi");
    WAIT_FOR(holds_key(inf, "default/hi-late"), WAIT_MS);
    cr_expect_not(holds_key(inf, "default/lo-late"));
    WAIT_FOR(spy_get(c, spy_n(c) - 1).watch, WAIT_MS);
    cr_expect_str_eq(spy_get(c, spy_n(c) - 1).label, "half=hi");
    kcr_informer_free(inf);
    kcr_fake_set_hook(f, NULL, NULL);
    kcr_client_free(c);
    kcr_fake_free(f);
}

Test(shard_informer, a_new_label_value_lists_only_that_value)
{
    gained_labels(false);
}

Test(shard_informer, writes_during_a_label_change_are_listed_once_not_replayed)
{
    gained_labels(true);
}

/* A label selection where none of the same key was in force (the
 * reflector was made with a plain selector) lists the whole new
 * selection; the next change of the same key is followed. */
Test(shard_informer, a_first_label_selection_after_the_start_lists_it_whole)
{
    kcr_fake *f = fake_with(false, 0);
    char uid[32];
    uid_in(LO, uid, sizeof uid);
    for (int i = 0; i < 6; i++) {
        char name[16];
        snprintf(name, sizeof name, "%s-%d", i % 2 ? "hi" : "lo", i);
        seed_half_child(f, name, uid, i % 2 ? "hi" : "lo");
    }
    list_spy ls = {.f = f};
    kcr_fake_set_hook(f, count_lists, &ls);
    kcr_client *c = NULL;
    cr_assert_eq(kcr_fake_client(f, NULL, &c), KCR_OK);
    kcr_informer *inf = NULL;
    kcr_informer_options o = {.reflector = {.label_selector = "half=lo"}};
    cr_assert_eq(kcr_informer_new(c, &CM, &o, &inf), KCR_OK);
    seen s = {0};
    kcr_event_handler h = {
        .on_add = seen_add, .on_update = seen_update, .on_delete = seen_delete, .user_data = &s};
    cr_assert_eq(kcr_informer_add_handler(inf, &h, NULL), KCR_OK);
    cr_assert_eq(kcr_informer_start(inf), KCR_OK);
    cr_assert_eq(kcr_informer_wait_for_sync(inf, WAIT_MS, NULL), KCR_OK, "%s", kcr_last_error());
    cr_assert(holds_halves(inf, 3, "lo"));
    kcr_reflector *r = kcr_informer_reflector(inf);
    int lists = atomic_load(&ls.lists);

    cr_assert_eq(kcr__reflector_set_label_values(r, "", "half", BOTH_HALVES, 2), KCR_OK);
    WAIT_FOR(holds_halves(inf, 6, "lo hi") && kcr__informer_shard_synced(inf, 1) &&
                 atomic_load(&s.adds) == 6,
             WAIT_MS);
    cr_expect_eq(atomic_load(&ls.lists) - lists, 1, "one list, of both halves");

    cr_assert_eq(kcr__reflector_set_label_values(r, NULL, "half", HI_HALF, 1), KCR_OK);
    WAIT_FOR(holds_halves(inf, 3, "hi") && kcr__informer_shard_synced(inf, 2) &&
                 atomic_load(&s.tombstones) == 3,
             WAIT_MS);
    cr_expect_eq(atomic_load(&ls.lists) - lists, 1, "the narrowing was followed");
    cr_expect_eq(atomic_load(&s.adds), 6, "nothing was added again");
    cr_expect_eq(kcr__reflector_set_label_values(r, NULL, "", HI_HALF, 1), KCR_ERR_INVALID);
    cr_expect_eq(kcr__reflector_set_label_values(r, NULL, "half", HI_HALF, 0), KCR_ERR_INVALID);
    kcr_informer_free(inf);
    kcr_fake_set_hook(f, NULL, NULL);
    kcr_client_free(c);
    kcr_fake_free(f);
}

/* The selection's selector, with and without the rest of the source's
 * selector; what a wider one gains; which objects it matches. */
Test(label_set, formats_subtracts_and_matches)
{
    kcr__label_set both = {0}, lo = {0}, gained = {0};
    cr_assert_eq(kcr__label_set_init(&both, "app=x", "half", BOTH_HALVES, 2), KCR_OK);
    cr_assert_eq(kcr__label_set_init(&lo, NULL, "half", LO_HALF, 1), KCR_OK);
    char *sel = kcr__label_set_selector(&both);
    cr_expect_str_eq(sel, "app=x,half in (lo,hi)");
    free(sel);
    sel = kcr__label_set_selector(&lo);
    cr_expect_str_eq(sel, "half=lo");
    free(sel);
    cr_expect_not(kcr__label_set_same_key(&both, &lo), "another base");
    cr_assert_eq(kcr__label_set_subtract(&both, &lo, &gained), KCR_OK);
    cr_expect(kcr__label_set_same_key(&gained, &both));
    cr_assert_eq(gained.n, 1);
    cr_expect_str_eq(gained.values[0], "hi");
    cr_assert_eq(kcr__label_set_subtract(&lo, &both, &gained), KCR_OK);
    cr_expect_eq(gained.n, 0, "a narrower selection gains nothing");
    kcr_object *o = NULL;
    const char *json = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{"
                       "\"name\":\"a\",\"labels\":{\"half\":\"hi\"}}}";
    cr_assert_eq(kcr_object_parse(json, 0, &o), KCR_OK, "%s", kcr_last_error());
    cr_expect(kcr__label_set_matches(&both, o));
    cr_expect_not(kcr__label_set_matches(&lo, o));
    cr_expect_not(kcr__label_set_matches(&(kcr__label_set){0}, o), "an empty set matches nothing");
    kcr_object_unref(o);
    kcr__label_set_clear(&both);
    kcr__label_set_clear(&lo);
    kcr__label_set_clear(&gained);
}
