/* Informer end-to-end under faults, through testenv's fault proxy (run
 * with the testenv_proxy lock): 2,000 ConfigMaps listed in pages, a cut
 * connection resumed from the last RV without relist or duplicate adds
 * (the compaction scenario is in test_informer_e2e_restart.c), a stalled
 * stream detected and reconnected, 429/500 bursts backed off without a hot
 * loop. Every scenario ends with the convergence check. */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e/e2e_lib.h"

#define NEED(x, what)                                                                            \
    do {                                                                                         \
        if (!(x))                                                                                \
            cr_assert_fail("%s: start the testenv (testenv/start) or run through ctest",       \
                           what);                                                                \
    } while (0)

typedef struct errs {
    atomic_int timeouts, transport, gone, api, too_many;
} errs;

static void on_err(kcr_err err, const kcr_status *st, const char *msg, void *ud)
{
    (void)st, (void)msg;
    errs *e = ud;
    switch (err) {
    case KCR_ERR_TIMEOUT: atomic_fetch_add(&e->timeouts, 1); break;
    case KCR_ERR_TRANSPORT: atomic_fetch_add(&e->transport, 1); break;
    case KCR_ERR_GONE: atomic_fetch_add(&e->gone, 1); break;
    case KCR_ERR_TOO_MANY: atomic_fetch_add(&e->too_many, 1); break;
    default: atomic_fetch_add(&e->api, 1); break;
    }
}

typedef struct rig {
    kcr_client *direct, *proxied;
    kcr_informer *inf;
    tracker *t;
    errs e;
    char ns[64];
} rig;

static void rig_up(rig *g, const char *prefix, int n, kcr_informer_options *o)
{
    memset(g, 0, sizeof *g);
    g->direct = e2e_client("KCR_TESTENV_KUBECONFIG");
    g->proxied = e2e_client("KCR_TESTENV_PROXY_KUBECONFIG");
    NEED(g->direct && g->proxied, "admin clients");
    NEED(e2e_fault("clear"), "fault proxy control");
    cr_assert_eq(e2e_namespace(g->direct, prefix, g->ns, sizeof g->ns), KCR_OK, "%s",
                 kcr_last_error());
    cr_assert_eq(e2e_create_cms(g->direct, g->ns, "cm", n, 200), KCR_OK, "%s", kcr_last_error());
    long cached;
    cr_assert(e2e_watch_cache_holds(g->direct, g->ns, n, &cached), "the watch cache holds %ld of %d",
              cached, n);
    o->reflector.ns = g->ns;
    o->reflector.on_error = on_err;
    o->reflector.error_user_data = &g->e;
    if (!o->reflector.backoff_max_ms)
        o->reflector.backoff_max_ms = 2000;
    cr_assert_eq(kcr_informer_new(g->proxied, &E2E_CM, o, &g->inf), KCR_OK);
    g->t = tracker_new();
    kcr_event_handler h = tracker_handler(g->t, 0);
    cr_assert_eq(kcr_informer_add_handler(g->inf, &h, NULL), KCR_OK);
    cr_assert_eq(kcr_informer_start(g->inf), KCR_OK);
    cr_assert_eq(kcr_informer_wait_for_sync(g->inf, 60000, NULL), KCR_OK, "%s", kcr_last_error());
    char why[512] = "";
    cr_assert(converge_wait(g->direct, &E2E_CM, g->ns, NULL, g->inf, g->t, 30000, why, sizeof why),
              "%s", why);
    cr_assert_eq(tracker_get_counts(g->t).initial_adds, (uint64_t)n);
}

static void rig_down(rig *g)
{
    e2e_fault("clear");
    kcr_informer_free(g->inf);
    tracker_free(g->t);
    kcr_client_free(g->direct);
    kcr_client_free(g->proxied);
}

static void converge(rig *g, int64_t ms)
{
    char why[512] = "";
    cr_assert(converge_wait(g->direct, &E2E_CM, g->ns, NULL, g->inf, g->t, ms, why, sizeof why),
              "not converged: %s", why);
}

/* Some writes by the direct client; deleted uids are expected as deletes. */
static void churn(rig *g, int round, int first_delete, int n_delete)
{
    char name[64], v[32];
    snprintf(v, sizeof v, "round-%d", round);
    cr_assert_eq(e2e_update_cm(g->direct, g->ns, "cm-00001", v), KCR_OK, "%s", kcr_last_error());
    snprintf(name, sizeof name, "born-%d", round);
    cr_assert_eq(e2e_create_cm(g->direct, g->ns, name, v), KCR_OK, "%s", kcr_last_error());
    for (int i = first_delete; i < first_delete + n_delete; i++) {
        char *uid = NULL;
        snprintf(name, sizeof name, "cm-%05d", i);
        cr_assert_eq(e2e_delete_cm(g->direct, g->ns, name, &uid), KCR_OK, "%s", kcr_last_error());
        tracker_expect_deleted(g->t, uid);
        free(uid);
    }
}

static void no_duplicate_adds(rig *g, int n)
{
    char key[128];
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "%s/cm-%05d", g->ns, i);
        cr_assert_eq(tracker_adds_of_key(g->t, key), 1, "%s added %u times", key,
                     tracker_adds_of_key(g->t, key));
    }
}

Test(informer_faults, two_thousand_configmaps_listed_in_pages, .timeout = 300)
{
    kcr_informer_options o = {0};
    o.reflector.consistent_list = true; /* RV "0" is served whole by the watch cache */
    rig g;
    rig_up(&g, "inf-pages", 2000, &o);
    long lists = e2e_cm_requests("list", g.ns);
    cr_assert_eq(lists, 4, "2000 objects in pages of 500: %ld LIST requests", lists);
    cr_assert_eq(kcr_store_len(kcr_informer_store(g.inf)), 2000);
    rig_down(&g);

    /* the default first list at RV "0": the watch cache answers in one piece */
    kcr_client *c = e2e_client("KCR_TESTENV_PROXY_KUBECONFIG");
    kcr_informer_options d = {0};
    d.reflector.ns = g.ns;
    kcr_informer *inf;
    cr_assert_eq(kcr_informer_new(c, &E2E_CM, &d, &inf), KCR_OK);
    cr_assert_eq(kcr_informer_start(inf), KCR_OK);
    cr_assert_eq(kcr_informer_wait_for_sync(inf, 60000, NULL), KCR_OK);
    cr_assert_eq(e2e_cm_requests("list", g.ns), 5);
    cr_assert_eq(kcr_store_len(kcr_informer_store(inf)), 2000);
    kcr_informer_free(inf);
    kcr_client_free(c);
}

Test(informer_faults, cut_connection_resumes_without_relist_or_duplicates, .timeout = 300)
{
    kcr_informer_options o = {0};
    rig g;
    rig_up(&g, "inf-cut", 50, &o);
    long lists = e2e_cm_requests("list", g.ns), watches = e2e_cm_requests("watch", g.ns);
    for (int round = 0; round < 3; round++) {
        cr_assert(e2e_fault(round == 1 ? "cut reset" : "cut"));
        churn(&g, round, 10 + round * 3, 3);
        converge(&g, 30000);
    }
    cr_assert_eq(e2e_cm_requests("list", g.ns), lists, "no relist");
    cr_assert_geq(e2e_cm_requests("watch", g.ns), watches + 3, "re-watched after each cut");
    no_duplicate_adds(&g, 50);
    tracker_counts n = tracker_get_counts(g.t);
    cr_assert_eq(n.deletes, 9);
    cr_assert_eq(n.tombstones, 0, "every delete seen live");
    cr_assert_eq(n.adds, 53);
    rig_down(&g);
}

Test(informer_faults, stalled_stream_is_detected_and_reconnected, .timeout = 300)
{
    kcr_informer_options o = {0};
    o.reflector.idle_limit_ms = 3000;
    rig g;
    rig_up(&g, "inf-stall", 20, &o);
    long lists = e2e_cm_requests("list", g.ns);
    cr_assert(e2e_fault("stall 8"));
    churn(&g, 0, 3, 2); /* written meanwhile, directly */
    sleep_ms(9000);
    cr_assert_gt(atomic_load(&g.e.timeouts), 0, "the silent watch was declared dead");
    churn(&g, 1, 6, 2);
    converge(&g, 30000);
    cr_assert_eq(e2e_cm_requests("list", g.ns), lists, "no relist");
    no_duplicate_adds(&g, 20);
    rig_down(&g);
}

Test(informer_faults, bursts_of_500_and_429_back_off_without_a_hot_loop, .timeout = 300)
{
    kcr_informer_options o = {0};
    o.reflector.backoff_initial_ms = 200;
    o.reflector.backoff_max_ms = 2000;
    rig g;
    rig_up(&g, "inf-burst", 10, &o);
    long w0 = e2e_cm_requests("watch", g.ns), l0 = e2e_cm_requests("list", g.ns);
    char args[256];
    snprintf(args, sizeof args, "500 6 %s/configmaps", g.ns);
    cr_assert(e2e_fault(args));
    int64_t t0 = now_ms();
    cr_assert(e2e_fault("cut"));
    churn(&g, 0, 2, 1);
    converge(&g, 60000);
    int64_t elapsed = now_ms() - t0;
    long w1 = e2e_cm_requests("watch", g.ns);
    /* 6 failures: waits of at least 200+400+800+1600+2000 ms before the 6th retry */
    cr_assert_geq(elapsed, 5000, "backed off: %lld ms", (long long)elapsed);
    cr_assert_leq(w1 - w0, 8, "%ld watch requests for 6 failures", w1 - w0);
    cr_assert_leq((double)(w1 - w0) / ((double)elapsed / 1000.0), 2.0, "requests per second");
    cr_assert_eq(e2e_cm_requests("list", g.ns), l0, "5xx on watch: no relist");
    cr_assert_geq(atomic_load(&g.e.api), 6);

    /* 429 with Retry-After: 1 */
    snprintf(args, sizeof args, "429 4 1 %s/configmaps", g.ns);
    cr_assert(e2e_fault(args));
    t0 = now_ms();
    cr_assert(e2e_fault("cut"));
    churn(&g, 1, 4, 1);
    converge(&g, 60000);
    elapsed = now_ms() - t0;
    long w2 = e2e_cm_requests("watch", g.ns);
    cr_assert_geq(elapsed, 3500, "Retry-After honoured: %lld ms", (long long)elapsed);
    cr_assert_leq(w2 - w1, 7, "%ld watch requests for 4 429s", w2 - w1);
    no_duplicate_adds(&g, 10);
    rig_down(&g);
}
