/* Leader election: two managers on one fake API, one reconciles then hands
 * over; losing leadership cancels in-flight reconciles and run returns. */
#include "tests/unit/manager_fixture.h"
#include "kcr/fake.h"
#include "helpers/bounded.h"

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
    test_join(cd[0].thread, 30000, "thread cd[0].thread");
    cr_assert_eq(cd[0].result, KCR_OK);
    WAIT_FOR(kcr_manager_is_leader(cd[1].m));
    /* a released lease has leaseDurationSeconds=1: retry + 1 s, plus scheduling slack */
    cr_assert_lt(kcr__now_ns() - t0, (test_ms(100) + 1000 + test_ms(500)) * KCR_NS_PER_MS,
                 "took over within retry + 1 s");
    WAIT_FOR(atomic_load(&by_manager[1]) >= 2);
    kcr_manager_stop(cd[1].m);
    test_join(cd[1].thread, 30000, "thread cd[1].thread");
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
    cr_assert_eq(kcr_fake_inject_error(fake, &(kcr_fake_error){.resource = &leases,
                                                               .times = -1,
                                                               .code = 500,
                                                               .reason = "InternalError",
                                                               .message = "etcd is gone"}),
                 KCR_OK);
    test_join(cd.thread, 30000, "thread cd.thread");
    cr_assert_eq(cd.result, KCR_ERR_LEADERSHIP_LOST);
    cr_assert_eq(atomic_load(&saw_cancel), 1, "the in-flight reconcile was cancelled");
    cr_assert_neq(kcr_manager_healthz_check(NULL, cd.m), KCR_OK);
    candidate_free(&cd);
}
