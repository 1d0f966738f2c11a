/* Server-side shard selectors (KEP-5866) against testenv's kube-apiserver.
 * gate_on (fixture testenv_gates, ShardedListAndWatch=true): LISTs with two
 * complementary selectors carry metadata.shardInfo (the selector in normal
 * form) and split the namespace's ConfigMaps exactly; two informers with
 * those selectors list and watch, the server filtering (shard_mode SERVER,
 * nothing dropped client-side), and every object created, updated or
 * deleted lands in exactly one cache; a malformed selector is a 500 with the
 * parser's words; a sharded LIST at an earlier resourceVersion (Exact) is
 * that snapshot of the shard; an informer moved to the other half at run
 * time (kcr_reflector_set_shard_selector) ends up holding that half. gate_off (fixture testenv, gate off): the server ignores
 * the selector (no shardInfo, every object), and the informers fall back to
 * filtering client-side (shard_mode CLIENT), with the same partition. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e/e2e_lib.h"

#define N_OBJS 200
#define WAIT_MS 30000

static const kcr_shard_range LO = {0, UINT64_C(0x8000000000000000)};
static const kcr_shard_range HI = {UINT64_C(0x8000000000000000), 0};

static char *selector_of(kcr_shard_range r)
{
    char *s = NULL;
    cr_assert_eq(kcr_shard_selector_format(KCR_SHARD_BY_UID, &r, 1, &s), KCR_OK);
    return s;
}

/* Fails unless this testenv runs with the gate as the test expects: no
 * silent pass against the wrong apiserver. */
static void expect_gate(bool on)
{
    char *gates = e2e_env("KCR_TESTENV_FEATURE_GATES");
    bool is_on = gates && strstr(gates, "ShardedListAndWatch=true") != NULL;
    cr_assert_eq(is_on, on,
                 "this test needs a testenv with ShardedListAndWatch %s (KCR_TESTENV_FEATURE_GATES "
                 "\"%s\"): run it through ctest",
                 on ? "on" : "off", gates ? gates : "(none)");
    free(gates);
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

/* The server's count of ConfigMaps in ns. */
static int server_count(kcr_client *c, const char *ns)
{
    tally all = {.r = {0, 0}};
    cr_assert_eq(
        kcr_client_list(c, &(kcr_request){.resource = &E2E_CM, .ns = ns}, tally_item, &all, NULL),
        KCR_OK, "%s", kcr_last_error());
    return all.n;
}

/* Both caches together hold `want` objects, each in its own half only. */
static bool partitioned(kcr_informer *lo, kcr_informer *hi, size_t want, char *why, size_t len)
{
    kcr_object_list l = {0}, h = {0};
    if (kcr_store_list(kcr_informer_store(lo), &l) != KCR_OK ||
        kcr_store_list(kcr_informer_store(hi), &h) != KCR_OK) {
        snprintf(why, len, "store list failed");
        return false;
    }
    size_t wrong = 0;
    for (size_t i = 0; i < l.len; i++)
        wrong += !kcr_shard_match(l.items[i], KCR_SHARD_BY_UID, &LO, 1);
    for (size_t i = 0; i < h.len; i++)
        wrong += !kcr_shard_match(h.items[i], KCR_SHARD_BY_UID, &HI, 1);
    snprintf(why, len, "lo %zu + hi %zu objects (want %zu), %zu in the wrong half", l.len, h.len,
             want, wrong);
    bool ok = l.len + h.len == want && wrong == 0;
    kcr_object_list_free(&l);
    kcr_object_list_free(&h);
    return ok;
}

/* Whether the cache holding ns/name has data.v == value. */
static bool cached_value_is(kcr_informer *lo, kcr_informer *hi, const char *ns, const char *name,
                            const char *value)
{
    kcr_object *o = kcr_lister_get(kcr_informer_store(lo), ns, name);
    if (!o)
        o = kcr_lister_get(kcr_informer_store(hi), ns, name);
    const char *v = o ? kcr_value_string(kcr_object_get(o, "data.v"), NULL) : NULL;
    bool is = v && strcmp(v, value) == 0;
    kcr_object_unref(o);
    return is;
}

/* Both caches hold the same objects, all in HI. */
static bool same_half(kcr_informer *a, kcr_informer *b)
{
    kcr_object_list x = {0}, y = {0};
    bool ok = kcr_store_list(kcr_informer_store(a), &x) == KCR_OK &&
              kcr_store_list(kcr_informer_store(b), &y) == KCR_OK && x.len == y.len;
    for (size_t i = 0; ok && i < x.len; i++)
        ok = kcr_shard_match(x.items[i], KCR_SHARD_BY_UID, &HI, 1);
    kcr_object_list_free(&x);
    kcr_object_list_free(&y);
    return ok;
}

static kcr_informer *shard_informer(kcr_client *c, const char *ns, const char *sel)
{
    kcr_informer_options o = {.reflector = {.ns = ns, .page_size = 50, .shard_selector = sel}};
    kcr_informer *inf = NULL;
    cr_assert_eq(kcr_informer_new(c, &E2E_CM, &o, &inf), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_informer_start(inf), KCR_OK);
    cr_assert_eq(kcr_informer_wait_for_sync(inf, WAIT_MS, NULL), KCR_OK, "%s", kcr_last_error());
    return inf;
}

static kcr_reflector_stats rstats(kcr_informer *inf)
{
    kcr_reflector_stats st;
    kcr_reflector_get_stats(kcr_informer_reflector(inf), &st);
    return st;
}

static void halves(bool gate_on)
{
    expect_gate(gate_on);
    kcr_client *c = e2e_client("KCR_TESTENV_KUBECONFIG");
    cr_assert_not_null(c, "admin client");
    char ns[64];
    cr_assert_eq(e2e_namespace(c, gate_on ? "shard-on" : "shard-off", ns, sizeof ns), KCR_OK, "%s",
                 kcr_last_error());
    cr_assert_eq(e2e_create_cms(c, ns, "cm", N_OBJS, 64), KCR_OK, "%s", kcr_last_error());
    char *lo_sel = selector_of(LO), *hi_sel = selector_of(HI);

    /* ---- the client's LIST with each selector */
    tally a = {.r = LO}, b = {.r = HI};
    kcr_shard_info info = {0};
    kcr_list_meta before = {0};
    cr_assert_eq(kcr_client_list(c,
                                 &(kcr_request){.resource = &E2E_CM,
                                                .ns = ns,
                                                .shard_selector = lo_sel,
                                                .shard_info = &info},
                                 tally_item, &a, &before),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(info.present, gate_on, "shardInfo comes back exactly when the gate is on");
    if (gate_on)
        cr_expect_str_eq(info.selector, lo_sel, "echoed in normal form");
    cr_assert_eq(kcr_client_list(c,
                                 &(kcr_request){.resource = &E2E_CM,
                                                .ns = ns,
                                                .shard_selector = hi_sel,
                                                .shard_info = &info,
                                                .limit = 30},
                                 NULL, NULL, NULL),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(info.present, gate_on, "a page carries shardInfo too");
    cr_assert_eq(
        kcr_client_list(c, &(kcr_request){.resource = &E2E_CM, .ns = ns, .shard_selector = hi_sel},
                        tally_item, &b, NULL),
        KCR_OK, "%s", kcr_last_error());
    if (gate_on) {
        cr_expect_eq(a.outside + b.outside, 0, "the server sent only each half");
        cr_expect_eq(a.n + b.n, N_OBJS, "every object in exactly one half: %d + %d", a.n, b.n);
        cr_expect_gt(a.n, N_OBJS / 4);
        cr_expect_gt(b.n, N_OBJS / 4);
    } else {
        cr_expect_eq(a.n, N_OBJS, "the selector is ignored: every object");
        cr_expect_eq(b.n, N_OBJS);
    }
    kcr_shard_info_clear(&info);

    /* ---- malformed text: a 500 with the parser's words, or ignored */
    kcr_status st = {0};
    kcr_err err = kcr_client_list(
        c,
        &(kcr_request){.resource = &E2E_CM,
                       .ns = ns,
                       .shard_selector = "shardRange(object.metadata.name, '0x0000000000000000', "
                                         "'0x8000000000000000')",
                       .status = &st},
        NULL, NULL, NULL);
    if (gate_on) {
        cr_expect_neq(err, KCR_OK);
        cr_expect_eq(st.code, 500);
        cr_expect(st.message && strstr(st.message, "object.metadata.name"), "%s",
                  st.message ? st.message : "(none)");
    } else {
        cr_expect_eq(err, KCR_OK, "%s", kcr_last_error());
    }
    kcr_status_clear(&st);

    /* ---- informers with the two selectors: list, watch, partition */
    kcr_informer *lo = shard_informer(c, ns, lo_sel), *hi = shard_informer(c, ns, hi_sel);
    char why[256];
    cr_assert(partitioned(lo, hi, N_OBJS, why, sizeof why), "%s", why);
    kcr_shard_selector_mode want = gate_on ? KCR_SHARD_SELECTOR_SERVER : KCR_SHARD_SELECTOR_CLIENT;
    cr_expect_eq(rstats(lo).shard_mode, want);
    cr_expect_eq(rstats(hi).shard_mode, want);
    cr_expect_eq(rstats(lo).shard_filtered + rstats(hi).shard_filtered,
                 gate_on ? 0 : (uint64_t)N_OBJS);

    for (int i = 0; i < 40; i++) {
        char name[32];
        snprintf(name, sizeof name, "new-%02d", i);
        cr_assert_eq(e2e_create_cm(c, ns, name, "a"), KCR_OK, "%s", kcr_last_error());
    }
    for (int i = 0; i < 10; i++) {
        char name[32];
        snprintf(name, sizeof name, "cm-%05d", i);
        cr_assert_eq(e2e_delete_cm(c, ns, name, NULL), KCR_OK, "%s", kcr_last_error());
    }
    cr_assert_eq(e2e_update_cm(c, ns, "cm-00100", "changed"), KCR_OK, "%s", kcr_last_error());
    int want_n = server_count(c, ns);
    cr_assert_eq(want_n, N_OBJS + 40 - 10);

    /* a snapshot of one half at the first list's resourceVersion (what an
     * in-place range change would list for gained ranges): the same
     * objects as then, despite the writes since */
    tally snap = {.r = LO};
    cr_assert_eq(kcr_client_list(c,
                                 &(kcr_request){.resource = &E2E_CM,
                                                .ns = ns,
                                                .shard_selector = lo_sel,
                                                .shard_info = &info,
                                                .resource_version = before.resource_version,
                                                .resource_version_match = "Exact"},
                                 tally_item, &snap, NULL),
                 KCR_OK, "%s", kcr_last_error());
    cr_expect_eq(info.present, gate_on);
    cr_expect_eq(snap.n, a.n, "the snapshot at %s", before.resource_version);
    cr_expect_eq(snap.outside, gate_on ? 0 : a.outside);
    kcr_shard_info_clear(&info);
    kcr_list_meta_clear(&before);
    int64_t deadline = now_ms() + WAIT_MS;
    while (!partitioned(lo, hi, (size_t)want_n, why, sizeof why) && now_ms() < deadline)
        sleep_ms(20);
    cr_assert(partitioned(lo, hi, (size_t)want_n, why, sizeof why), "after writes: %s", why);
    /* the update reached the cache holding it */
    deadline = now_ms() + WAIT_MS;
    while (!cached_value_is(lo, hi, ns, "cm-00100", "changed") && now_ms() < deadline)
        sleep_ms(20);
    cr_expect(cached_value_is(lo, hi, ns, "cm-00100", "changed"));
    if (gate_on)
        cr_expect_eq(rstats(lo).shard_filtered + rstats(hi).shard_filtered, 0,
                     "the server filtered the watches too");
    else
        cr_expect_gt(rstats(lo).shard_filtered + rstats(hi).shard_filtered, (uint64_t)N_OBJS,
                     "each reflector dropped the other half's events");

    /* the first informer moves to the other half at run time */
    cr_assert_eq(kcr_reflector_set_shard_selector(kcr_informer_reflector(lo), hi_sel), KCR_OK);
    deadline = now_ms() + WAIT_MS;
    while (!same_half(lo, hi) && now_ms() < deadline)
        sleep_ms(20);
    cr_assert(same_half(lo, hi), "after moving the LO informer to HI");

    kcr_informer_free(lo);
    kcr_informer_free(hi);
    free(lo_sel);
    free(hi_sel);
    kcr_client_free(c);
}

Test(shard_e2e, gate_on, .timeout = 240)
{
    halves(true);
}

Test(shard_e2e, gate_off, .timeout = 240)
{
    halves(false);
}
