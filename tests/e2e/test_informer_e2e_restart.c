/* Informer end-to-end tests that restart kube-apiserver (SERIAL: they
 * disturb every other test): a restart mid-watch, and a resourceVersion
 * expired by compaction while disconnected. The informer recovers by itself
 * and converges; every deleted object gives exactly one on_delete. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e/e2e_lib.h"

Test(informer_restart, apiserver_restart_mid_watch_recovers_and_converges, .timeout = 300)
{
    kcr_client *c = e2e_client("KCR_TESTENV_KUBECONFIG");
    if (!c)
        cr_assert_fail("admin client: start the testenv (testenv/start) or run through ctest");
    char ns[64];
    cr_assert_eq(e2e_namespace(c, "inf-restart", ns, sizeof ns), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(e2e_create_cms(c, ns, "cm", 30, 200), KCR_OK);
    kcr_informer_options o = {0};
    o.reflector.ns = ns;
    o.reflector.backoff_max_ms = 2000;
    kcr_informer *inf;
    cr_assert_eq(kcr_informer_new(c, &E2E_CM, &o, &inf), KCR_OK);
    tracker *t = tracker_new();
    kcr_event_handler h = tracker_handler(t, 0);
    cr_assert_eq(kcr_informer_add_handler(inf, &h, NULL), KCR_OK);
    cr_assert_eq(kcr_informer_start(inf), KCR_OK);
    cr_assert_eq(kcr_informer_wait_for_sync(inf, 60000, NULL), KCR_OK, "%s", kcr_last_error());
    for (int round = 0; round < 2; round++) {
        cr_assert(e2e_restart_apiserver(round ? "--kill --down 2" : "--down 3"));
        /* the server is back; the informer may still be backing off */
        char name[64], *uid = NULL;
        snprintf(name, sizeof name, "cm-%05d", 5 + round);
        kcr_err err = KCR_ERR_TRANSPORT;
        for (int i = 0; i < 50 && err != KCR_OK; i++) {
            err = e2e_delete_cm(c, ns, name, &uid);
            if (err != KCR_OK) {
                free(uid);
                uid = NULL;
                sleep_ms(200);
            }
        }
        cr_assert_eq(err, KCR_OK, "%s", kcr_last_error());
        tracker_expect_deleted(t, uid);
        free(uid);
        snprintf(name, sizeof name, "after-%d", round);
        cr_assert_eq(e2e_create_cm(c, ns, name, "x"), KCR_OK);
        cr_assert_eq(e2e_update_cm(c, ns, "cm-00001", name), KCR_OK);
        char why[512] = "";
        cr_assert(converge_wait(c, &E2E_CM, ns, NULL, inf, t, 60000, why, sizeof why),
                  "round %d: %s", round, why);
    }
    tracker_counts n = tracker_get_counts(t);
    cr_assert_eq(n.deletes, 2);
    char key[128];
    for (int i = 0; i < 30; i++) {
        snprintf(key, sizeof key, "%s/cm-%05d", ns, i);
        cr_assert_eq(tracker_adds_of_key(t, key), 1, "%s", key);
    }
    kcr_informer_free(inf);
    tracker_free(t);
    kcr_client_free(c);
}

/* True once an exact LIST at rv gets 410: etcd compacted it away. */
static bool rv_compacted(kcr_client *c, const char *ns, const char *rv)
{
    kcr_status st = {0};
    kcr_err err = kcr_client_list(c,
                                  &(kcr_request){.resource = &E2E_CM,
                                                 .ns = ns,
                                                 .resource_version = rv,
                                                 .resource_version_match = "Exact",
                                                 .status = &st},
                                  NULL, NULL, NULL);
    kcr_status_clear(&st);
    return err == KCR_ERR_GONE;
}

static void count_gone(kcr_err err, const kcr_status *st, const char *msg, void *ud)
{
    (void)st, (void)msg;
    if (err == KCR_ERR_GONE)
        __atomic_add_fetch((int *)ud, 1, __ATOMIC_SEQ_CST);
}

Test(informer_restart, rv_expired_while_disconnected_relists_with_tombstones, .timeout = 300)
{
    kcr_client *direct = e2e_client("KCR_TESTENV_KUBECONFIG");
    kcr_client *proxied = e2e_client("KCR_TESTENV_PROXY_KUBECONFIG");
    if (!direct || !proxied || !e2e_fault("clear"))
        cr_assert_fail("testenv with its fault proxy: start it (testenv/start) or run through ctest");
    char ns[64];
    cr_assert_eq(e2e_namespace(direct, "inf-compact", ns, sizeof ns), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(e2e_create_cms(direct, ns, "cm", 40, 200), KCR_OK);
    int gone = 0;
    kcr_informer_options o = {0};
    o.reflector.ns = ns;
    o.reflector.backoff_max_ms = 2000;
    o.reflector.on_error = count_gone;
    o.reflector.error_user_data = &gone;
    kcr_informer *inf;
    cr_assert_eq(kcr_informer_new(proxied, &E2E_CM, &o, &inf), KCR_OK);
    tracker *t = tracker_new();
    kcr_event_handler h = tracker_handler(t, 0);
    cr_assert_eq(kcr_informer_add_handler(inf, &h, NULL), KCR_OK);
    cr_assert_eq(kcr_informer_start(inf), KCR_OK);
    cr_assert_eq(kcr_informer_wait_for_sync(inf, 60000, NULL), KCR_OK, "%s", kcr_last_error());
    char why[512] = "";
    cr_assert(converge_wait(direct, &E2E_CM, ns, NULL, inf, t, 30000, why, sizeof why), "%s", why);
    long lists = e2e_cm_requests("list", ns);
    char *rv = kcr_informer_last_sync_rv(inf);

    /* disconnected: refused and cut */
    cr_assert(e2e_fault("refuse 240"));
    cr_assert(e2e_fault("cut"));
    for (int i = 5; i < 11; i++) {
        char name[32], *uid = NULL;
        snprintf(name, sizeof name, "cm-%05d", i);
        cr_assert_eq(e2e_delete_cm(direct, ns, name, &uid), KCR_OK);
        tracker_expect_deleted(t, uid);
        free(uid);
    }
    cr_assert_eq(e2e_create_cm(direct, ns, "born", "x"), KCR_OK);
    /* etcd compacts (testenv: every 10 s) ... */
    bool compacted = false;
    for (int64_t t0 = now_ms(); !compacted && now_ms() - t0 < 90000;) {
        cr_assert_eq(e2e_update_cm(direct, ns, "cm-00002", "tick"), KCR_OK);
        compacted = rv_compacted(direct, ns, rv);
        if (!compacted)
            sleep_ms(1000);
    }
    cr_assert(compacted, "resourceVersion %s not compacted after 90 s: is the testenv started "
                         "with --compaction-interval 10s (the ctest fixture does)?", rv);
    /* ... and the apiserver's watch cache forgets it too (it would serve an
     * old RV from memory for at least 75 s otherwise) */
    cr_assert(e2e_restart_apiserver(""));
    cr_assert_eq(tracker_get_counts(t).deletes, 0, "nothing seen while disconnected");
    cr_assert(e2e_fault("clear"));
    cr_assert(converge_wait(direct, &E2E_CM, ns, NULL, inf, t, 60000, why, sizeof why), "%s", why);
    tracker_counts n = tracker_get_counts(t);
    cr_assert_eq(n.deletes, 6);
    cr_assert_eq(n.tombstones, 6, "deletions known only from the relist");
    cr_assert_gt(e2e_cm_requests("list", ns), lists, "relisted");
    cr_assert_gt(__atomic_load_n(&gone, __ATOMIC_SEQ_CST), 0, "the 410 was reported");
    free(rv);
    kcr_informer_free(inf);
    tracker_free(t);
    kcr_client_free(direct);
    kcr_client_free(proxied);
}
