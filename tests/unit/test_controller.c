/* The manager on the fake API: workers reconcile what the informers route,
 * one key never runs twice at once, results and metrics, per-reconcile
 * deadline, graceful shutdown (drain, then cancel at the deadline),
 * readiness with the server's reason, duplicate names, read-your-writes. */
#include <criterion/criterion.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "helpers/hung_server.h"
#include "helpers/promtool.h"
#include "helpers/timescale.h"
#include "kcr/kcr.h"

static const kcr_resource CM = {"", "v1", "configmaps"};

static kcr_fake *fake;
static kcr_client *client;
static kcr_manager *mgr;
static pthread_t runner;
static kcr_err run_result;
static bool running;

static void setup(void)
{
    cr_assert_eq(kcr_fake_new(NULL, &fake), KCR_OK);
    cr_assert_eq(kcr_fake_client(fake, "default", &client), KCR_OK);
}

static void *run_main(void *arg)
{
    (void)arg;
    run_result = kcr_manager_run(mgr);
    return NULL;
}

static void start(void)
{
    cr_assert_eq(pthread_create(&runner, NULL, run_main, NULL), 0);
    running = true;
}

static kcr_err stop(void)
{
    kcr_manager_stop(mgr);
    pthread_join(runner, NULL);
    running = false;
    return run_result;
}

static void teardown(void)
{
    if (running)
        stop();
    kcr_manager_free(mgr);
    mgr = NULL;
    kcr_client_free(client);
    kcr_fake_free(fake);
}

static void new_manager(const kcr_manager_options *o)
{
    cr_assert_eq(kcr_manager_new(client, o, &mgr), KCR_OK, "%s", kcr_last_error());
}

static void create_cm(const char *name)
{
    char json[256];
    snprintf(json, sizeof json, "{\"metadata\":{\"name\":\"%s\"},\"data\":{\"v\":\"1\"}}", name);
    cr_assert_eq(kcr_client_create(client, &CM, "default", json, 0, NULL, NULL, NULL), KCR_OK, "%s",
                 kcr_last_error());
}

/* Polls `cond` every millisecond for up to 10 s. */
#define WAIT_FOR(cond)                                                                             \
    do {                                                                                           \
        int64_t until_ = kcr__now_ns() + test_ms(10000) * KCR_NS_PER_MS;                          \
        while (!(cond) && kcr__now_ns() < until_) {                                                \
            struct timespec ts_ = {0, 1000000};                                                    \
            nanosleep(&ts_, NULL);                                                                 \
        }                                                                                          \
        cr_assert(cond, "timed out waiting for: %s", #cond);                                       \
    } while (0)

/* ---- a reconcile that copies a ConfigMap to <name>-copy ---- */

static atomic_int copies;

static kcr_result copy_reconcile(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    (void)ud;
    if (strstr(req->name, "-copy"))
        return KCR_DONE;
    kcr_object *p = kcr_ctx_get_primary(ctx);
    if (!p)
        return KCR_DONE;
    kcr_object_unref(p);
    char name[300], body[512];
    snprintf(name, sizeof name, "%s-copy", req->name);
    snprintf(body, sizeof body, "{\"metadata\":{\"name\":\"%s\"},\"data\":{\"v\":\"1\"}}", name);
    kcr_write_options wo = {.field_manager = "t"};
    kcr_err err = kcr_client_patch(kcr_ctx_client(ctx), &CM, req->namespace, name, KCR_PATCH_APPLY,
                                   body, 0, &wo, NULL, NULL);
    if (err != KCR_OK)
        return KCR_RETRY(err);
    atomic_fetch_add(&copies, 1);
    return KCR_DONE;
}

static bool exists(const char *name)
{
    kcr_object *o = NULL;
    kcr_err err = kcr_client_get(client, &CM, "default", name, NULL, &o, NULL);
    kcr_object_unref(o);
    return err == KCR_OK;
}

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
        int64_t bad = i < 3 ? INT64_MAX : -1;
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

/* ---- deadlines and shutdown ---- */

static atomic_int started, saw_cancel;
static atomic_bool release_gate;

/* Waits for cancellation or the gate (10 s at most), noting which came. */
static kcr_result slow_reconcile(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    (void)req, (void)ud;
    atomic_fetch_add(&started, 1);
    int64_t until = kcr__now_ns() + 10 * KCR_NS_PER_S;
    while (!kcr_ctx_canceled(ctx) && !atomic_load(&release_gate) && kcr__now_ns() < until) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    if (kcr_ctx_canceled(ctx)) {
        atomic_fetch_add(&saw_cancel, 1);
        return KCR_RETRY(KCR_ERR_CANCELED);
    }
    return KCR_DONE;
}

static kcr_controller *slow_controller(int64_t timeout_ms)
{
    atomic_store(&started, 0);
    atomic_store(&saw_cancel, 0);
    atomic_store(&release_gate, false);
    kcr_controller *c = NULL;
    kcr_controller_options o = {.name = "slow",
                                .primary = {.resource = CM},
                                .reconcile_timeout_ms = timeout_ms,
                                .reconcile = slow_reconcile};
    cr_assert_eq(kcr_manager_add_controller(mgr, &o, &c), KCR_OK);
    return c;
}

Test(manager, reconcile_deadline_cancels, .init = setup, .fini = teardown)
{
    create_cm("a");
    new_manager(NULL);
    kcr_controller *c = slow_controller(50);
    start();
    WAIT_FOR(atomic_load(&saw_cancel) >= 1);
    kcr_controller_stats st;
    WAIT_FOR((kcr_controller_get_stats(c, &st), st.timeouts >= 1));
    cr_assert_eq(stop(), KCR_OK);
    char *text = NULL;
    cr_assert_eq(kcr_metrics_write_text(kcr_manager_metrics(mgr), &text, NULL), KCR_OK);
    cr_assert(strstr(text, "controller_runtime_reconcile_timeouts_total{controller=\"slow\"} "),
              "%s", text);
    cr_assert_not(
        strstr(text, "controller_runtime_reconcile_timeouts_total{controller=\"slow\"} 0"));
    free(text);
}

Test(manager, shutdown_drains_in_flight_reconciles, .init = setup, .fini = teardown)
{
    create_cm("a");
    new_manager(&(kcr_manager_options){.graceful_shutdown_timeout_ms = 10000});
    kcr_controller *c = slow_controller(0);
    start();
    WAIT_FOR(atomic_load(&started) == 1);
    kcr_manager_stop(mgr);
    /* the reconcile is still running: run has not returned; let it finish */
    create_cm("b"); /* new work after the stop is not started */
    atomic_store(&release_gate, true);
    pthread_join(runner, NULL);
    running = false;
    cr_assert_eq(run_result, KCR_OK);
    cr_assert_eq(atomic_load(&saw_cancel), 0, "drained, not cancelled");
    kcr_controller_stats st;
    kcr_controller_get_stats(c, &st);
    cr_assert_eq(st.successes, 1);
    cr_assert_eq(atomic_load(&started), 1);
    cr_assert_eq(kcr_manager_healthz_check(NULL, mgr), KCR_OK);
}

Test(manager, shutdown_cancels_at_the_deadline, .init = setup, .fini = teardown)
{
    create_cm("a");
    new_manager(&(kcr_manager_options){.graceful_shutdown_timeout_ms = 30});
    slow_controller(0);
    start();
    WAIT_FOR(atomic_load(&started) == 1);
    cr_assert_eq(stop(), KCR_OK);
    cr_assert_eq(atomic_load(&saw_cancel), 1);
    char *msg = NULL;
    cr_assert_neq(kcr_manager_healthz_check(&msg, mgr), KCR_OK);
    cr_assert(msg && strstr(msg, "cancelled"), "%s", msg ? msg : "(null)");
    free(msg);
}

Test(manager, readiness_reports_the_servers_reason, .init = setup, .fini = teardown)
{
    cr_assert_eq(kcr_fake_inject_error(fake, KCR_FAKE_LIST, &CM, -1, 403, "Forbidden",
                                       "configmaps is forbidden: User \"x\" cannot list"),
                 KCR_OK);
    kcr_informer_options fast = {.reflector = {.backoff_initial_ms = 5, .backoff_max_ms = 20}};
    new_manager(&(kcr_manager_options){.cache_defaults = &fast});
    slow_controller(0);
    char *msg = NULL;
    cr_assert_neq(kcr_manager_readyz_check(&msg, mgr), KCR_OK, "not running yet");
    free(msg);
    msg = NULL;
    start();
    WAIT_FOR((free(msg), msg = NULL,
              kcr_manager_readyz_check(&msg, mgr) != KCR_OK && msg && strstr(msg, "cannot list")));
    cr_assert(strstr(msg, "configmaps"), "%s", msg);
    cr_assert(strstr(msg, "forbidden") || strstr(msg, "Forbidden"), "%s", msg);
    free(msg);
    kcr_fake_clear_errors(fake);
    WAIT_FOR(kcr_manager_readyz_check(NULL, mgr) == KCR_OK);
}

/* ---- read-your-writes: a deterministic informer lag ---- */

static atomic_bool gate_open;
static atomic_int gate_blocked;

/* Holds back the informer's copy of ConfigMap "a" at data.v == "2" until the
 * gate opens: the cache lags the write deterministically. */
static kcr_err gate_transform(const kcr_object *in, kcr_object **out, void *ud)
{
    (void)ud;
    const char *v = kcr_value_string(kcr_object_get(in, "data.v"), NULL);
    if (strcmp(kcr_object_name(in), "a") == 0 && v && strcmp(v, "2") == 0) {
        atomic_fetch_add(&gate_blocked, 1);
        int64_t until = kcr__now_ns() + 20 * KCR_NS_PER_S;
        while (!atomic_load(&gate_open) && kcr__now_ns() < until) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    *out = kcr_object_ref(in);
    return KCR_OK;
}

static atomic_int ryw_calls;
static char ryw_seen[8];
static atomic_bool ryw_seen_set; /* ryw_seen written (release) */

/* First reconcile writes v=2 and asks to come back; the second notes what
 * the cache shows. */
static kcr_result ryw_reconcile(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    (void)ud;
    if (strcmp(req->name, "a") != 0)
        return KCR_DONE;
    int call = atomic_fetch_add(&ryw_calls, 1);
    kcr_object *p = kcr_ctx_get_primary(ctx);
    const char *v = p ? kcr_value_string(kcr_object_get(p, "data.v"), NULL) : NULL;
    if (call == 0) {
        kcr_object_unref(p);
        kcr_err err = kcr_client_patch(kcr_ctx_client(ctx), &CM, "default", "a", KCR_PATCH_MERGE,
                                       "{\"data\":{\"v\":\"2\"}}", 0, NULL, NULL, NULL);
        return err == KCR_OK ? KCR_REQUEUE_AFTER(1) : KCR_RETRY(err);
    }
    if (call == 1) {
        snprintf(ryw_seen, sizeof ryw_seen, "%s", v ? v : "");
        atomic_store(&ryw_seen_set, true);
    }
    kcr_object_unref(p);
    return KCR_DONE;
}

static kcr_controller *ryw_setup(bool disable)
{
    atomic_store(&gate_open, false);
    atomic_store(&gate_blocked, 0);
    atomic_store(&ryw_calls, 0);
    atomic_store(&ryw_seen_set, false);
    ryw_seen[0] = '\0';
    create_cm("a");
    kcr_informer_options io = {.transform = gate_transform};
    new_manager(&(kcr_manager_options){.cache_defaults = &io});
    kcr_controller *c = NULL;
    kcr_controller_options o = {.name = "ryw",
                                .primary = {.resource = CM},
                                .no_read_your_writes = disable,
                                .reconcile = ryw_reconcile};
    cr_assert_eq(kcr_manager_add_controller(mgr, &o, &c), KCR_OK);
    start();
    return c;
}

Test(manager, stale_read_without_read_your_writes, .init = setup, .fini = teardown)
{
    ryw_setup(true);
    WAIT_FOR(atomic_load(&ryw_seen_set));
    cr_assert_str_eq(ryw_seen, "1", "the cache lagged: the second reconcile read the old object");
    /* the write's event reaches the gate (maybe only now, on a slow run) and waits there */
    WAIT_FOR(atomic_load(&gate_blocked) >= 1);
    atomic_store(&gate_open, true);
    cr_assert_eq(stop(), KCR_OK);
}

Test(manager, read_your_writes_waits_for_the_cache, .init = setup, .fini = teardown)
{
    kcr_controller *c = ryw_setup(false);
    kcr_controller_stats st;
    WAIT_FOR((kcr_controller_get_stats(c, &st), st.ryw_waits == 1));
    cr_assert_eq(atomic_load(&ryw_calls), 1, "the second reconcile waits for the cache");
    atomic_store(&gate_open, true);
    WAIT_FOR(atomic_load(&ryw_seen_set));
    cr_assert_str_eq(ryw_seen, "2", "the second reconcile sees its own write");
    cr_assert_eq(stop(), KCR_OK);
    kcr_controller_get_stats(c, &st);
    cr_assert_eq(st.ryw_timeouts, 0);
    char *text = NULL;
    cr_assert_eq(kcr_metrics_write_text(kcr_manager_metrics(mgr), &text, NULL), KCR_OK);
    cr_assert(strstr(text, "kcr_controller_read_your_writes_waits_total{controller=\"ryw\"} 1"),
              "%s", text);
    free(text);
}

/* ---- leader election: two managers, one fake API ---- */

static atomic_int by_manager[2];

static kcr_result count_reconcile(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    (void)ctx, (void)req;
    atomic_fetch_add(&by_manager[(intptr_t)ud], 1);
    return KCR_DONE;
}

typedef struct candidate {
    kcr_client *client;
    kcr_manager *m;
    pthread_t thread;
    kcr_err result;
} candidate;

static void *candidate_main(void *arg)
{
    candidate *cd = arg;
    cd->result = kcr_manager_run(cd->m);
    return NULL;
}

static void candidate_start(candidate *cd, intptr_t id, const char *identity)
{
    cr_assert_eq(kcr_fake_client(fake, "default", &cd->client), KCR_OK);
    kcr_manager_options mo = {.leader_election = true,
                              .leader_election_id = "test-lock",
                              .leader_election_identity = identity,
                              .lease_duration_ms = test_ms(600),
                              .renew_deadline_ms = test_ms(400),
                              .retry_period_ms = test_ms(100)};
    cr_assert_eq(kcr_manager_new(cd->client, &mo, &cd->m), KCR_OK, "%s", kcr_last_error());
    kcr_controller_options o = {.name = "counter",
                                .primary = {.resource = CM},
                                .reconcile = count_reconcile,
                                .user_data = (void *)id};
    cr_assert_eq(kcr_manager_add_controller(cd->m, &o, NULL), KCR_OK);
    cr_assert_eq(pthread_create(&cd->thread, NULL, candidate_main, cd), 0);
}

static void candidate_free(candidate *cd)
{
    kcr_manager_free(cd->m);
    kcr_client_free(cd->client);
}

Test(manager, leader_election_one_reconciles_then_hands_over, .init = setup, .fini = teardown)
{
    atomic_store(&by_manager[0], 0);
    atomic_store(&by_manager[1], 0);
    create_cm("a");
    candidate cd[2] = {0};
    candidate_start(&cd[0], 0, "one");
    WAIT_FOR(kcr_manager_is_leader(cd[0].m));
    candidate_start(&cd[1], 1, "two");
    WAIT_FOR(atomic_load(&by_manager[0]) >= 1);
    /* the standby syncs its caches (ready) but does not reconcile */
    WAIT_FOR(kcr_manager_readyz_check(NULL, cd[1].m) == KCR_OK);
    create_cm("b");
    WAIT_FOR(atomic_load(&by_manager[0]) >= 2);
    cr_assert_eq(atomic_load(&by_manager[1]), 0);
    cr_assert_not(kcr_manager_is_leader(cd[1].m));
    char *text = NULL;
    cr_assert_eq(kcr_metrics_write_text(kcr_manager_metrics(cd[0].m), &text, NULL), KCR_OK);
    cr_assert(strstr(text, "leader_election_master_status{name=\"test-lock\"} 1"), "%s", text);
    free(text);
    /* a clean stop releases the lease: the standby leads within about a retry period and
       reconciles what its warm cache already queued */
    int64_t t0 = kcr__now_ns();
    kcr_manager_stop(cd[0].m);
    pthread_join(cd[0].thread, NULL);
    cr_assert_eq(cd[0].result, KCR_OK);
    WAIT_FOR(kcr_manager_is_leader(cd[1].m));
    /* a released lease has leaseDurationSeconds=1: retry + 1 s, plus scheduling slack */
    cr_assert_lt(kcr__now_ns() - t0, (test_ms(100) + 1000 + test_ms(500)) * KCR_NS_PER_MS,
                 "took over within retry + 1 s");
    WAIT_FOR(atomic_load(&by_manager[1]) >= 2);
    kcr_manager_stop(cd[1].m);
    pthread_join(cd[1].thread, NULL);
    cr_assert_eq(cd[1].result, KCR_OK);
    candidate_free(&cd[0]);
    candidate_free(&cd[1]);
}

Test(manager, leadership_loss_stops_reconciles_and_returns, .init = setup, .fini = teardown)
{
    create_cm("a");
    candidate cd = {0};
    cr_assert_eq(kcr_fake_client(fake, "default", &cd.client), KCR_OK);
    kcr_manager_options mo = {.leader_election = true,
                              .leader_election_id = "lost-lock",
                              .lease_duration_ms = test_ms(600),
                              .renew_deadline_ms = test_ms(400),
                              .retry_period_ms = test_ms(100)};
    cr_assert_eq(kcr_manager_new(cd.client, &mo, &cd.m), KCR_OK);
    mgr = cd.m; /* slow_controller adds to mgr */
    slow_controller(0);
    mgr = NULL;
    cr_assert_eq(pthread_create(&cd.thread, NULL, candidate_main, &cd), 0);
    WAIT_FOR(atomic_load(&started) == 1);
    kcr_resource leases = {"coordination.k8s.io", "v1", "leases"};
    cr_assert_eq(kcr_fake_inject_error(fake, KCR_FAKE_ANY, &leases, -1, 500, "InternalError",
                                       "etcd is gone"),
                 KCR_OK);
    pthread_join(cd.thread, NULL);
    cr_assert_eq(cd.result, KCR_ERR_LEADERSHIP_LOST);
    cr_assert_eq(atomic_load(&saw_cancel), 1, "the in-flight reconcile was cancelled");
    cr_assert_neq(kcr_manager_healthz_check(NULL, cd.m), KCR_OK);
    candidate_free(&cd);
}

Test(manager, readiness_names_a_resource_the_server_does_not_have, .init = setup, .fini = teardown)
{
    /* the fake answers 404 for a resource it does not serve, as the apiserver does */
    kcr_informer_options fast = {.reflector = {.backoff_initial_ms = 5, .backoff_max_ms = 20}};
    new_manager(&(kcr_manager_options){.cache_defaults = &fast});
    kcr_controller_options o = {
        .name = "things",
        .primary = {.resource = {"nope.example.com", "v1", "things"}, .kind = "Thing"},
        .reconcile = copy_reconcile};
    cr_assert_eq(kcr_manager_add_controller(mgr, &o, NULL), KCR_OK, "%s", kcr_last_error());
    start();
    char *msg = NULL;
    WAIT_FOR((free(msg), msg = NULL,
              kcr_manager_readyz_check(&msg, mgr) != KCR_OK && msg && strstr(msg, "404")));
    cr_assert(strstr(msg, "things.nope.example.com"), "%s", msg);
    free(msg);
    cr_assert_eq(stop(), KCR_OK, "a failing watch does not keep the manager from stopping");
}

/* ---- signals: the first stops gracefully, a second exits at once ---- */

static int sig_pipe[2];

static void to_pipe(kcr_log_level level, const char *module, const char *message, void *ud)
{
    (void)level, (void)ud;
    if (strcmp(module, "manager") == 0 && strstr(message, ": stopping")) {
        ssize_t r = write(sig_pipe[1], "S", 1);
        (void)r;
    }
}

static kcr_result stubborn_reconcile(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    (void)ctx, (void)req, (void)ud;
    ssize_t r = write(sig_pipe[1], "R", 1); /* started; now ignore cancellation for 20 s */
    (void)r;
    int64_t until = kcr__now_ns() + 20 * KCR_NS_PER_S;
    while (kcr__now_ns() < until) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return KCR_DONE;
}

static char read_byte(int fd)
{
    char c = 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 10000) == 1 && read(fd, &c, 1) != 1)
        c = 0;
    return c;
}

Test(manager, second_signal_exits_at_once, .init = setup, .fini = teardown)
{
    create_cm("a");
    cr_assert_eq(pipe(sig_pipe), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        kcr_log_set_handler(to_pipe, NULL);
        kcr_manager *m = NULL;
        kcr_controller_options o = {
            .name = "stubborn", .primary = {.resource = CM}, .reconcile = stubborn_reconcile};
        if (kcr_manager_new(client, &(kcr_manager_options){.handle_signals = true}, &m) ||
            kcr_manager_add_controller(m, &o, NULL))
            _exit(3);
        _exit(kcr_manager_run(m) == KCR_OK ? 0 : 4);
    }
    cr_assert_eq(read_byte(sig_pipe[0]), 'R', "the reconcile started");
    kill(pid, SIGTERM);
    cr_assert_eq(read_byte(sig_pipe[0]), 'S', "the first signal started a graceful stop");
    kill(pid, SIGTERM);
    int st = 0;
    int64_t until = kcr__now_ns() + 5 * KCR_NS_PER_S;
    pid_t r = 0;
    while ((r = waitpid(pid, &st, WNOHANG)) == 0 && kcr__now_ns() < until) {
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (r != pid) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
    cr_assert_eq(r, pid, "the second signal did not end the process at once");
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d", st);
    close(sig_pipe[0]);
    close(sig_pipe[1]);
}

/* ---- the reconcile's token reaches its requests ---- */

static atomic_int watch_result = -1;

static kcr_err ignore_event(const kcr_watch_event *ev, void *ud)
{
    (void)ev, (void)ud;
    return KCR_OK;
}

static kcr_result watching_reconcile(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    (void)req, (void)ud;
    kcr_list_options lo = {0}; /* no token of its own: the ctx client adds the reconcile's */
    kcr_err err = kcr_client_watch(kcr_ctx_client(ctx), &CM, "default", &lo, ignore_event, NULL,
                                   NULL);
    atomic_store(&watch_result, (int)err);
    return KCR_DONE;
}

Test(manager, reconcile_deadline_stops_its_requests, .init = setup, .fini = teardown)
{
    create_cm("a");
    atomic_store(&watch_result, -1);
    new_manager(NULL);
    kcr_controller_options o = {.name = "watcher", .primary = {.resource = CM},
                                .reconcile_timeout_ms = 50, .reconcile = watching_reconcile};
    cr_assert_eq(kcr_manager_add_controller(mgr, &o, NULL), KCR_OK);
    start();
    WAIT_FOR(atomic_load(&watch_result) != -1);
    cr_assert_eq(atomic_load(&watch_result), KCR_ERR_CANCELED);
    cr_assert_eq(stop(), KCR_OK);
}

/* Once the deadline has cancelled the reconcile, every verb through the ctx
 * client without a token of its own is refused as cancelled (the fake runs
 * no request whose token is triggered), so none writes past the deadline. */
enum { V_GET, V_CREATE, V_UPDATE, V_STATUS, V_PATCH, V_DELETE, V_RAW, N_VERBS };
static atomic_int verb_result[N_VERBS];
static atomic_bool verbs_done;

static kcr_result late_writer_reconcile(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    (void)req, (void)ud;
    if (atomic_load(&verbs_done))
        return KCR_DONE;
    int64_t until = kcr__now_ns() + 10 * KCR_NS_PER_S;
    while (!kcr_ctx_canceled(ctx) && kcr__now_ns() < until) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    kcr_client *c = kcr_ctx_client(ctx);
    const char *body = "{\"metadata\":{\"name\":\"late\"},\"data\":{\"v\":\"9\"}}";
    kcr_object *o = NULL;
    atomic_store(&verb_result[V_GET], (int)kcr_client_get(c, &CM, "default", "a", NULL, &o, NULL));
    kcr_object_unref(o);
    atomic_store(&verb_result[V_CREATE],
                 (int)kcr_client_create(c, &CM, "default", body, 0, NULL, NULL, NULL));
    atomic_store(&verb_result[V_UPDATE],
                 (int)kcr_client_update(c, &CM, "default", body, 0, NULL, NULL, NULL));
    atomic_store(&verb_result[V_STATUS],
                 (int)kcr_client_update_status(c, &CM, "default", body, 0, NULL, NULL));
    atomic_store(&verb_result[V_PATCH],
                 (int)kcr_client_patch(c, &CM, "default", "a", KCR_PATCH_MERGE,
                                       "{\"data\":{\"v\":\"9\"}}", 0, NULL, NULL, NULL));
    atomic_store(&verb_result[V_DELETE],
                 (int)kcr_client_delete(c, &CM, "default", "a", NULL, NULL, NULL));
    char *raw = NULL;
    atomic_store(&verb_result[V_RAW],
                 (int)kcr_client_request(c, "/api/v1/namespaces/default/configmaps/a", NULL, 0,
                                         NULL, &raw, NULL, NULL));
    free(raw);
    atomic_store(&verbs_done, true);
    return KCR_DONE;
}

Test(manager, reconcile_deadline_stops_its_writes, .init = setup, .fini = teardown)
{
    create_cm("a");
    atomic_store(&verbs_done, false);
    new_manager(NULL);
    kcr_controller_options o = {.name = "late",
                                .primary = {.resource = CM},
                                .reconcile_timeout_ms = 50,
                                .reconcile = late_writer_reconcile};
    cr_assert_eq(kcr_manager_add_controller(mgr, &o, NULL), KCR_OK);
    start();
    WAIT_FOR(atomic_load(&verbs_done));
    cr_assert_eq(stop(), KCR_OK);
    static const char *const names[N_VERBS] = {"get",   "create", "update", "update_status",
                                               "patch", "delete", "request"};
    for (int v = 0; v < N_VERBS; v++)
        cr_expect_eq(atomic_load(&verb_result[v]), KCR_ERR_CANCELED, "%s: %s", names[v],
                     kcr_strerror((kcr_err)atomic_load(&verb_result[v])));
    cr_assert(exists("a"), "the delete past the deadline was not made");
    cr_assert_not(exists("late"), "the create past the deadline was not made");
}

/* ---- stop cancels discovery in add_controller ---- */

typedef struct adder {
    kcr_manager *m;
    kcr_err err;
    char msg[512];
} adder;

static void *add_thing_controller(void *arg)
{
    adder *a = arg;
    /* no kind given: add_controller asks discovery */
    kcr_controller_options o = {.name = "things",
                                .primary = {.resource = {"nope.example.com", "v1", "things"}},
                                .reconcile = copy_reconcile};
    a->err = kcr_manager_add_controller(a->m, &o, NULL);
    snprintf(a->msg, sizeof a->msg, "%s", kcr_last_error());
    return NULL;
}

Test(manager, stop_cancels_discovery_on_a_hung_server, .timeout = 60)
{
    hung_server *srv = hung_server_start();
    kcr_client *hc = hung_server_client(srv, &(kcr_client_options){.request_timeout_ms = 30000});
    adder a = {.err = KCR_OK};
    cr_assert_eq(kcr_manager_new(hc, &(kcr_manager_options){.no_events = true}, &a.m), KCR_OK, "%s",
                 kcr_last_error());
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, add_thing_controller, &a), 0);
    cr_assert(hung_server_wait_requests(srv, 1), "discovery never reached the server");
    int64_t t0 = kcr__now_ns();
    kcr_manager_stop(a.m);
    pthread_join(t, NULL);
    int64_t took_ms = (kcr__now_ns() - t0) / KCR_NS_PER_MS;
    cr_assert_eq(a.err, KCR_ERR_CANCELED, "%s: %s", kcr_strerror(a.err), a.msg);
    cr_assert(strstr(a.msg, "things"), "%s", a.msg);
    cr_assert_lt(took_ms, test_ms(1000), "add_controller returned %lld ms after stop",
                 (long long)took_ms);
    kcr_manager_free(a.m);
    kcr_client_free(hc);
    hung_server_stop(srv);
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
            cr_assert_eq(kcr_client_patch(client, &CM, "default", n, KCR_PATCH_MERGE, patch, 0,
                                          NULL, &out, NULL), KCR_OK);
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
