/* A manager's cache_defaults.reflector.shard_selector is copied (the
 * caller's string is gone before the manager runs) and reaches the
 * controller's cache: only the objects of the shard are reconciled, and
 * /metrics says who filtered (kcr_cache_shard_selector_mode, and
 * kcr_cache_shard_filtered_total when the apiserver ignored the selector). */
#include "tests/unit/manager_fixture.h"

#define N_CMS 60

static const kcr_shard_range HALF = {0, UINT64_C(0x8000000000000000)};
static atomic_int reconciled, outside;

static kcr_result note(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    (void)req, (void)ud;
    kcr_object *p = kcr_ctx_get_primary(ctx);
    if (p) {
        atomic_fetch_add(&reconciled, 1);
        if (!kcr_shard_match(p, KCR_SHARD_BY_UID, &HALF, 1))
            atomic_fetch_add(&outside, 1);
    }
    kcr_object_unref(p);
    return KCR_DONE;
}

/* How many of the fake's ConfigMaps fall in HALF. */
static int in_half(void)
{
    int n = 0;
    for (int i = 0; i < N_CMS; i++) {
        char name[32];
        snprintf(name, sizeof name, "cm-%02d", i);
        kcr_object *o = NULL;
        cr_assert_eq(kcr_client_get(client,
                                    &(kcr_request){.resource = &CM, .ns = "default", .name = name},
                                    &o),
                     KCR_OK);
        n += kcr_shard_match(o, KCR_SHARD_BY_UID, &HALF, 1);
        kcr_object_unref(o);
    }
    return n;
}

static void expect_metric(const char *line)
{
    char *text = NULL;
    cr_assert_eq(kcr_metrics_write_text(kcr_manager_metrics(mgr), &text, NULL), KCR_OK);
    cr_expect(strstr(text, line) != NULL, "want %s in:\n%s", line, text);
    free(text);
}

/* Seeds N_CMS ConfigMaps, runs a manager whose caches take HALF's
 * selector, and waits until every object of HALF was reconciled; *want_out
 * gets how many that is. */
static void sharded_run(int *want_out)
{
    for (int i = 0; i < N_CMS; i++) {
        char name[32];
        snprintf(name, sizeof name, "cm-%02d", i);
        create_cm(name);
    }
    char *sel = NULL;
    cr_assert_eq(kcr_shard_selector_format(KCR_SHARD_BY_UID, &HALF, 1, &sel), KCR_OK);
    kcr_informer_options defaults = {.reflector = {.shard_selector = sel}};
    new_manager(&(kcr_manager_options){.name = "sharded", .cache_defaults = &defaults});
    memset(sel, 'x', strlen(sel)); /* the manager must hold its own copy */
    free(sel);
    kcr_controller_options o = {.name = "note", .primary = {.resource = CM}, .reconcile = note};
    cr_assert_eq(kcr_manager_add_controller(mgr, &o, NULL), KCR_OK, "%s", kcr_last_error());
    int want = in_half();
    cr_assert_gt(want, 0);
    cr_assert_lt(want, N_CMS);
    start();
    WAIT_FOR(atomic_load(&reconciled) == want);
    cr_expect_eq(atomic_load(&outside), 0, "only the shard's objects are reconciled");
    *want_out = want;
}

Test(shard_manager, cache_defaults_selector_is_copied_and_applied, .init = setup, .fini = teardown)
{
    int want;
    sharded_run(&want);
    expect_metric(
        "kcr_cache_shard_selector_mode{resource=\"configmaps\",group=\"\",namespace=\"\"} 1");
    expect_metric(
        "kcr_cache_shard_filtered_total{resource=\"configmaps\",group=\"\",namespace=\"\"} 0");
}

/* The fake plays an apiserver with the gate off: same reconciles, the
 * client filtered the other half. */
Test(shard_manager, gate_off_falls_back_and_says_so_in_metrics, .fini = teardown)
{
    cr_assert_eq(kcr_fake_new(&(kcr_fake_options){.ignore_shard_selector = true}, &fake), KCR_OK);
    cr_assert_eq(kcr_fake_client(fake, "default", &client), KCR_OK);
    int want;
    sharded_run(&want);
    expect_metric(
        "kcr_cache_shard_selector_mode{resource=\"configmaps\",group=\"\",namespace=\"\"} 2");
    char line[256];
    snprintf(line, sizeof line,
             "kcr_cache_shard_filtered_total{resource=\"configmaps\",group=\"\",namespace=\"\"} %d",
             N_CMS - want);
    expect_metric(line);
}
