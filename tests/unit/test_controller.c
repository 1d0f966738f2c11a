/* The manager on the fake API: workers reconcile what the informers route,
 * results and metrics, duplicate names, one key never runs twice at once,
 * and under churn every change is reconciled. Deadlines, shutdown,
 * readiness, read-your-writes and leader election have their own files
 * (test_controller_*.c). */
#include "helpers/promtool.h"
#include "tests/unit/manager_fixture.h"

Test(manager, reconciles_and_stops_cleanly, .init = setup, .fini = teardown)
{
    atomic_store(&copies, 0);
    create_cm("a");
    create_cm("b");
    new_manager(NULL);
    kcr_controller *c = NULL;
    kcr_controller_options o = {.name = "copier",
                                .primary = {.resource = CM},
                                .max_concurrent_reconciles = 2,
                                .reconcile = copy_reconcile};
    cr_assert_eq(kcr_manager_add_controller(mgr, &o, &c), KCR_OK, "%s", kcr_last_error());
    start();
    WAIT_FOR(exists("a-copy") && exists("b-copy"));
    create_cm("c"); /* a live add */
    WAIT_FOR(exists("c-copy"));
    WAIT_FOR(kcr_manager_readyz_check(NULL, mgr) == KCR_OK);
    kcr_controller_stats st;
    WAIT_FOR((kcr_controller_get_stats(c, &st), st.successes >= 6)); /* a, b, c and copies */
    cr_assert_eq(stop(), KCR_OK);
    kcr_controller_get_stats(c, &st);
    cr_assert_eq(st.errors, 0);
    cr_assert_eq(st.active_workers, 0);
    char *text = NULL;
    cr_assert_eq(kcr_metrics_write_text(kcr_manager_metrics(mgr), &text, NULL), KCR_OK);
    cr_assert(
        strstr(text,
               "controller_runtime_reconcile_total{controller=\"copier\",result=\"success\"}"),
        "%s", text);
    cr_assert(strstr(
        text,
        "controller_runtime_reconcile_total{controller=\"copier\",result=\"requeue_after\"} 0"));
    cr_assert(
        strstr(text, "controller_runtime_max_concurrent_reconciles{controller=\"copier\"} 2"));
    cr_assert(strstr(text, "workqueue_adds_total{name=\"copier\",controller=\"copier\"}"), "%s",
              text);
    cr_assert(
        strstr(text, "kcr_cache_objects{resource=\"configmaps\",group=\"\",namespace=\"\"} 6"),
        "%s", text);
    cr_assert(
        strstr(text, "rest_client_requests_total{code=\"200\",method=\"PATCH\",host=\"fake\"} 3"),
        "%s", text);
    free(text);
    cr_assert_eq(kcr_manager_run(mgr), KCR_ERR_STATE, "a manager runs once");
    kcr_controller_options late = {
        .name = "late",
        .primary = {.resource = CM, .predicate = kcr_predicate_labels_changed()},
        .reconcile = copy_reconcile};
    cr_assert_eq(kcr_manager_add_controller(mgr, &late, NULL), KCR_ERR_STATE);
}

/* KCR_REQUEUE twice, then DONE: counted as result="requeue", not as errors. */
static atomic_int requeue_calls;

static kcr_result requeue_twice(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    (void)ctx, (void)req, (void)ud;
    return atomic_fetch_add(&requeue_calls, 1) < 2 ? KCR_REQUEUE : KCR_DONE;
}

Test(manager, requeue_is_counted_in_reconcile_total, .init = setup, .fini = teardown)
{
    atomic_store(&requeue_calls, 0);
    create_cm("a");
    new_manager(NULL);
    kcr_controller *c = NULL;
    kcr_controller_options o = {
        .name = "requeuer", .primary = {.resource = CM}, .reconcile = requeue_twice};
    cr_assert_eq(kcr_manager_add_controller(mgr, &o, &c), KCR_OK, "%s", kcr_last_error());
    start();
    kcr_controller_stats st;
    WAIT_FOR((kcr_controller_get_stats(c, &st), st.successes == 1));
    cr_assert_eq(stop(), KCR_OK);
    kcr_controller_get_stats(c, &st);
    cr_assert_eq(st.requeues, 2);
    cr_assert_eq(st.errors, 0);
    char *text = NULL;
    cr_assert_eq(kcr_metrics_write_text(kcr_manager_metrics(mgr), &text, NULL), KCR_OK);
    cr_assert(strstr(text, "controller_runtime_reconcile_total{controller=\"requeuer\","
                           "result=\"requeue\"} 2\n"),
              "%s", text);
    cr_assert(strstr(text, "controller_runtime_reconcile_total{controller=\"requeuer\","
                           "result=\"success\"} 1\n"),
              "%s", text);
    cr_assert(
        strstr(text, "controller_runtime_reconcile_errors_total{controller=\"requeuer\"} 0\n"),
        "%s", text);
    promtool_check(text);
    free(text);
}

Test(manager, duplicate_controller_names, .init = setup, .fini = teardown)
{
    new_manager(NULL);
    kcr_controller_options o = {
        .name = "x", .primary = {.resource = CM}, .reconcile = copy_reconcile};
    cr_assert_eq(kcr_manager_add_controller(mgr, &o, NULL), KCR_OK);
    o.primary.predicate = kcr_predicate_generation_changed(); /* taken even on failure */
    cr_assert_eq(kcr_manager_add_controller(mgr, &o, NULL), KCR_ERR_EXISTS);
    cr_assert(strstr(kcr_last_error(), "\"x\""), "%s", kcr_last_error());
}

/* Durations are range-checked like every other option (2^40 ms at most,
 * never negative); the predicate is taken even when the options fail. */
Test(manager, durations_out_of_range_are_refused, .init = setup, .fini = teardown)
{
    kcr_manager *m = (kcr_manager *)&m; /* a stale pointer the failure must clear */
    kcr_manager_options mo = {.graceful_shutdown_timeout_ms = (INT64_C(1) << 40) + 1};
    cr_assert_eq(kcr_manager_new(client, &mo, &m), KCR_ERR_INVALID);
    cr_assert_null(m);
    cr_assert(strstr(kcr_last_error(), "graceful_shutdown_timeout_ms"), "%s", kcr_last_error());
    mo.graceful_shutdown_timeout_ms = INT64_C(1) << 40;
    cr_assert_eq(kcr_manager_new(client, &mo, &mgr), KCR_OK, "%s", kcr_last_error());
    static const char *const fields[] = {"reconcile_timeout_ms", "resync_period_ms",
                                         "read_your_writes_timeout_ms"};
    for (int i = 0; i < 6; i++) {
        /* -2 (KCR_DURATION_ZERO) is no duration for these fields */
        int64_t bad = i < 3 ? INT64_MAX : KCR_DURATION_ZERO;
        kcr_controller_options o = {.name = "x",
                                    .primary = {.resource = CM},
                                    .reconcile = copy_reconcile,
                                    .reconcile_timeout_ms = i % 3 == 0 ? bad : 0,
                                    .resync_period_ms = i % 3 == 1 ? bad : 0,
                                    .read_your_writes_timeout_ms = i % 3 == 2 ? bad : 0};
        o.primary.predicate = kcr_predicate_generation_changed();
        cr_assert_eq(kcr_manager_add_controller(mgr, &o, NULL), KCR_ERR_INVALID, "%s",
                     fields[i % 3]);
        if (bad > 0)
            cr_assert(strstr(kcr_last_error(), fields[i % 3]), "%s", kcr_last_error());
        else
            cr_assert(strstr(kcr_last_error(), "negative"), "%s", kcr_last_error());
    }
    /* KCR_DURATION_INFINITE: no deadline, no resync (as 0) */
    kcr_controller_options inf = {.name = "infinite",
                                  .primary = {.resource = CM, .kind = "ConfigMap"},
                                  .reconcile = copy_reconcile,
                                  .reconcile_timeout_ms = KCR_DURATION_INFINITE,
                                  .resync_period_ms = KCR_DURATION_INFINITE};
    cr_assert_eq(kcr_manager_add_controller(mgr, &inf, NULL), KCR_OK, "%s", kcr_last_error());
    kcr_controller_options o = {.name = "x",
                                .primary = {.resource = CM},
                                .reconcile = copy_reconcile,
                                .reconcile_timeout_ms = INT64_C(1) << 40,
                                .resync_period_ms = INT64_C(1) << 40,
                                .read_your_writes_timeout_ms = INT64_C(1) << 40};
    cr_assert_eq(kcr_manager_add_controller(mgr, &o, NULL), KCR_OK, "%s", kcr_last_error());
}

/* ---- one key is never reconciled twice at once ---- */

static atomic_int in_flight[4], max_same, max_any, running_any, done_count;

static kcr_result overlap_reconcile(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    (void)ctx, (void)ud;
    int k = req->name[1] - '0';
    int now = atomic_fetch_add(&in_flight[k], 1) + 1;
    int any = atomic_fetch_add(&running_any, 1) + 1;
    if (now > atomic_load(&max_same))
        atomic_store(&max_same, now);
    if (any > atomic_load(&max_any))
        atomic_store(&max_any, any);
    struct timespec ts = {0, 2 * 1000 * 1000};
    nanosleep(&ts, NULL);
    atomic_fetch_sub(&running_any, 1);
    atomic_fetch_sub(&in_flight[k], 1);
    atomic_fetch_add(&done_count, 1);
    return KCR_DONE;
}

Test(manager, same_key_never_concurrent, .init = setup, .fini = teardown)
{
    for (int i = 0; i < 4; i++) {
        char n[8];
        snprintf(n, sizeof n, "k%d", i);
        create_cm(n);
    }
    new_manager(NULL);
    kcr_controller *c = NULL;
    kcr_controller_options o = {.name = "overlap",
                                .primary = {.resource = CM},
                                .max_concurrent_reconciles = 4,
                                .reconcile = overlap_reconcile};
    cr_assert_eq(kcr_manager_add_controller(mgr, &o, &c), KCR_OK);
    start();
    WAIT_FOR(atomic_load(&done_count) >= 4);
    for (int round = 0; round < 50; round++)
        for (int i = 0; i < 4; i++) {
            char n[8];
            snprintf(n, sizeof n, "k%d", i);
            cr_assert_eq(kcr_controller_enqueue(c, "default", n), KCR_OK);
        }
    kcr_controller_stats st;
    WAIT_FOR((kcr_controller_get_stats(c, &st), st.reconciles >= 8));
    cr_assert_eq(stop(), KCR_OK);
    cr_assert_eq(atomic_load(&max_same), 1, "a key ran twice at once");
    cr_assert_gt(atomic_load(&max_any), 1, "different keys ran in parallel");
}

/* ---- churn: every change is eventually reconciled, never two at once per key ---- */

#define CHURN_KEYS 200
static atomic_llong churn_seen_rv[CHURN_KEYS];
static atomic_int churn_busy[CHURN_KEYS], churn_overlap;

static kcr_result churn_reconcile(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    (void)ud;
    int k = atoi(req->name + 1);
    if (k < 0 || k >= CHURN_KEYS)
        return KCR_TERMINAL(KCR_ERR_INVALID);
    if (atomic_fetch_add(&churn_busy[k], 1) != 0)
        atomic_fetch_add(&churn_overlap, 1);
    kcr_object *o = kcr_ctx_get_primary(ctx);
    if (o) {
        long long rv = atoll(kcr_object_resource_version(o));
        if (rv > atomic_load(&churn_seen_rv[k]))
            atomic_store(&churn_seen_rv[k], rv);
    }
    kcr_object_unref(o);
    atomic_fetch_sub(&churn_busy[k], 1);
    return KCR_DONE;
}

static bool churn_caught_up(long long *final_rv)
{
    for (int k = 0; k < CHURN_KEYS; k++)
        if (atomic_load(&churn_seen_rv[k]) < final_rv[k])
            return false;
    return true;
}

Test(manager, churn_every_change_reconciled, .init = setup, .fini = teardown, .timeout = 120)
{
    static long long final_rv[CHURN_KEYS];
    for (int k = 0; k < CHURN_KEYS; k++) {
        atomic_store(&churn_seen_rv[k], 0);
        atomic_store(&churn_busy[k], 0);
        char n[16];
        snprintf(n, sizeof n, "k%d", k);
        create_cm(n);
    }
    atomic_store(&churn_overlap, 0);
    new_manager(NULL);
    kcr_controller *c = NULL;
    kcr_controller_options o = {.name = "churn", .primary = {.resource = CM},
                                .max_concurrent_reconciles = 4, .reconcile = churn_reconcile};
    cr_assert_eq(kcr_manager_add_controller(mgr, &o, &c), KCR_OK);
    start();
    for (int round = 0; round < 5; round++)
        for (int k = 0; k < CHURN_KEYS; k++) {
            char n[16], patch[64];
            snprintf(n, sizeof n, "k%d", k);
            snprintf(patch, sizeof patch, "{\"data\":{\"v\":\"%d\"}}", round);
            kcr_object *out = NULL;
            cr_assert_eq(kcr_client_patch(client,
                                          &(kcr_request){.resource = &CM,
                                                         .ns = "default",
                                                         .name = n,
                                                         .patch_type = KCR_PATCH_MERGE,
                                                         .body = patch},
                                          &out),
                         KCR_OK);
            final_rv[k] = atoll(kcr_object_resource_version(out));
            kcr_object_unref(out);
        }
    WAIT_FOR(churn_caught_up(final_rv));
    cr_assert_eq(stop(), KCR_OK);
    cr_assert_eq(atomic_load(&churn_overlap), 0, "a key was reconciled twice at once");
    kcr_controller_stats st;
    kcr_controller_get_stats(c, &st);
    cr_assert_eq(st.errors + st.terminal_errors, 0);
    cr_assert_geq(st.reconciles, CHURN_KEYS, "each key at least once");
}
