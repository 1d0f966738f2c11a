/* Informer end-to-end against testenv's kube-apiserver (direct
 * connections, no faults): initial list + watch deliver exactly the
 * server's objects, a second client's creates/updates/deletes arrive as
 * add/update/delete, streaming lists, metadata-only informers, the limited
 * user's 403 reported by wait_for_sync, and start/stop cycles. */
#include <criterion/criterion.h>
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

static kcr_informer *ns_informer(kcr_client *c, const char *ns, kcr_list_mode mode, bool meta)
{
    kcr_informer_options o = {0};
    o.reflector.ns = ns;
    o.reflector.list_mode = mode;
    o.reflector.metadata_only = meta;
    kcr_informer *inf = NULL;
    cr_assert_eq(kcr_informer_new(c, &E2E_CM, &o, &inf), KCR_OK);
    return inf;
}

static void crud_round(kcr_list_mode mode)
{
    kcr_client *c = e2e_client("KCR_TESTENV_KUBECONFIG");
    NEED(c, "admin client");
    kcr_client *writer = e2e_client("KCR_TESTENV_KUBECONFIG");
    char ns[64];
    cr_assert_eq(e2e_namespace(c, "inf-crud", ns, sizeof ns), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(e2e_create_cms(writer, ns, "pre", 25, 100), KCR_OK, "%s", kcr_last_error());
    long cached;
    cr_assert(e2e_watch_cache_holds(c, ns, 25, &cached), "the watch cache holds %ld of 25", cached);
    kcr_informer *inf = ns_informer(c, ns, mode, false);
    tracker *t = tracker_new();
    kcr_event_handler h = tracker_handler(t, 0);
    kcr_handler_reg *reg;
    cr_assert_eq(kcr_informer_add_handler(inf, &h, &reg), KCR_OK);
    cr_assert_eq(kcr_informer_start(inf), KCR_OK);
    cr_assert_eq(kcr_informer_wait_for_sync(inf, 30000, NULL), KCR_OK, "%s", kcr_last_error());
    char why[512] = "";
    cr_assert(converge_wait(c, &E2E_CM, ns, NULL, inf, t, 10000, why, sizeof why), "%s", why);
    cr_assert_eq(tracker_get_counts(t).initial_adds, 25, "exactly the server's objects, not %llu",
                 (unsigned long long)tracker_get_counts(t).initial_adds);
    cr_assert(kcr_handler_has_synced(reg));
    /* from the initial list (the server's List items carry no type) */
    kcr_object *listed = kcr_lister_get(kcr_informer_store(inf), ns, "pre-00007");
    cr_assert_not_null(listed);
    cr_assert_str_eq(kcr_object_kind(listed), "ConfigMap");
    cr_assert_str_eq(kcr_object_api_version(listed), "v1");
    kcr_object_unref(listed);
    kcr_reflector_stats s;
    kcr_reflector_get_stats(kcr_informer_reflector(inf), &s);
    cr_assert_eq(s.streaming, mode == KCR_LIST_MODE_STREAMING, "v1.37 serves streaming lists");

    /* a second client writes */
    cr_assert_eq(e2e_create_cm(writer, ns, "new-1", "a"), KCR_OK);
    cr_assert_eq(e2e_create_cm(writer, ns, "new-2", "a"), KCR_OK);
    cr_assert_eq(e2e_update_cm(writer, ns, "pre-00003", "changed"), KCR_OK);
    cr_assert_eq(e2e_update_cm(writer, ns, "new-1", "b"), KCR_OK);
    for (int i = 10; i < 15; i++) {
        char name[32];
        char *uid = NULL;
        snprintf(name, sizeof name, "pre-%05d", i);
        cr_assert_eq(e2e_delete_cm(writer, ns, name, &uid), KCR_OK);
        tracker_expect_deleted(t, uid);
        free(uid);
    }
    cr_assert(converge_wait(c, &E2E_CM, ns, NULL, inf, t, 15000, why, sizeof why), "%s", why);
    tracker_counts n = tracker_get_counts(t);
    cr_assert_eq(n.adds, 27);
    /* new-1's create and update may reach the handler as one add of the
     * newest state when it lags (coalescing); pre-00003's update cannot */
    cr_assert(n.updates == 1 || n.updates == 2, "%llu updates", (unsigned long long)n.updates);
    cr_assert_eq(n.deletes, 5);
    cr_assert_eq(n.tombstones, 0);
    kcr_informer_free(inf);
    tracker_free(t);
    kcr_client_free(writer);
    kcr_client_free(c);
}

Test(informer_e2e, list_watch_and_a_second_clients_writes, .timeout = 120)
{
    crud_round(KCR_LIST_MODE_PAGED);
}

Test(informer_e2e, streaming_list_and_a_second_clients_writes, .timeout = 120)
{
    crud_round(KCR_LIST_MODE_STREAMING);
}

Test(informer_e2e, metadata_only_informer, .timeout = 120)
{
    kcr_client *c = e2e_client("KCR_TESTENV_KUBECONFIG");
    NEED(c, "admin client");
    char ns[64];
    cr_assert_eq(e2e_namespace(c, "inf-meta", ns, sizeof ns), KCR_OK);
    cr_assert_eq(e2e_create_cms(c, ns, "m", 5, 2000), KCR_OK);
    kcr_informer *inf = ns_informer(c, ns, KCR_LIST_MODE_DEFAULT, true);
    cr_assert_eq(kcr_informer_start(inf), KCR_OK);
    cr_assert_eq(kcr_informer_wait_for_sync(inf, 30000, NULL), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(e2e_update_cm(c, ns, "m-00001", "small"), KCR_OK);
    char why[512] = "";
    cr_assert(converge_wait(c, &E2E_CM, ns, NULL, inf, NULL, 10000, why, sizeof why), "%s", why);
    kcr_object *o = kcr_lister_get(kcr_informer_store(inf), ns, "m-00001");
    cr_assert_not_null(o);
    cr_assert_str_eq(kcr_object_kind(o), "PartialObjectMetadata");
    cr_assert_eq(kcr_value_get_type(kcr_object_get(o, "data")), KCR_VALUE_ABSENT);
    cr_assert_str_eq(kcr_object_label(o, "app"), "kcr-e2e");
    kcr_object_unref(o);
    kcr_informer_free(inf);
    kcr_client_free(c);
}

Test(informer_e2e, limited_user_wait_for_sync_returns_the_403, .timeout = 120)
{
    kcr_client *c = e2e_client("KCR_TESTENV_LIMITED_KUBECONFIG");
    NEED(c, "limited client");
    kcr_informer *inf = NULL;
    cr_assert_eq(kcr_informer_new(c, &E2E_CM, NULL, &inf), KCR_OK);
    cr_assert_eq(kcr_informer_start(inf), KCR_OK);
    kcr_status st = {0};
    int64_t t0 = now_ms();
    kcr_err err = kcr_informer_wait_for_sync(inf, 30000, &st);
    cr_assert_eq(err, KCR_ERR_FORBIDDEN, "%s: %s", kcr_strerror(err), kcr_last_error());
    cr_assert_lt(now_ms() - t0, 10000, "reported, not waited out");
    cr_assert_eq(st.code, 403);
    cr_assert_str_eq(st.reason, "Forbidden");
    cr_assert(strstr(st.message, "kcr-limited") != NULL, "%s", st.message);
    cr_assert(strstr(kcr_last_error(), "cannot list resource") != NULL, "%s", kcr_last_error());
    kcr_status_clear(&st);
    kcr_informer_free(inf);
    kcr_client_free(c);
}

Test(informer_e2e, start_stop_cycles_leak_nothing_and_stop_fast, .timeout = 180)
{
    kcr_client *c = e2e_client("KCR_TESTENV_KUBECONFIG");
    NEED(c, "admin client");
    char ns[64];
    cr_assert_eq(e2e_namespace(c, "inf-cycle", ns, sizeof ns), KCR_OK);
    cr_assert_eq(e2e_create_cms(c, ns, "c", 50, 500), KCR_OK);
    for (int i = 0; i < 6; i++) {
        kcr_informer_factory *f;
        kcr_informer_options o = {0};
        o.reflector.ns = ns;
        o.reflector.list_mode = i % 2 ? KCR_LIST_MODE_STREAMING : KCR_LIST_MODE_PAGED;
        cr_assert_eq(kcr_informer_factory_new(c, &o, &f), KCR_OK);
        kcr_informer *inf;
        cr_assert_eq(kcr_informer_factory_informer(f, &E2E_CM, NULL, &inf), KCR_OK);
        tracker *t = tracker_new();
        kcr_event_handler h = tracker_handler(t, 0);
        kcr_handler_reg *reg;
        cr_assert_eq(kcr_informer_add_handler(inf, &h, &reg), KCR_OK);
        cr_assert_eq(kcr_informer_factory_start(f), KCR_OK);
        if (i != 2) { /* once: stop while the list may still be in flight */
            cr_assert_eq(kcr_informer_factory_wait_for_sync(f, 30000, NULL), KCR_OK, "%s",
                         kcr_last_error());
            for (int64_t t0 = now_ms(); !kcr_handler_has_synced(reg) && now_ms() - t0 < 10000;)
                sleep_ms(5);
        }
        int64_t t0 = now_ms();
        kcr_informer_factory_stop(f);
        cr_assert_lt(now_ms() - t0, 1000, "stop took %lld ms", (long long)(now_ms() - t0));
        if (i != 2)
            cr_assert_eq(tracker_get_counts(t).adds, 50);
        kcr_informer_factory_free(f);
        tracker_free(t);
    }
    kcr_client_free(c);
}
