/* The per-reconcile deadline: it cancels the reconcile's context, counts a
 * timeout, and its token stops the reconcile's own requests and writes. */
#include "tests/unit/manager_fixture.h"

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
    kcr_request lo = {.resource = &CM,
                      .ns =
                          "default"}; /* no token of its own: the ctx client adds the reconcile's */
    kcr_err err = kcr_client_watch(kcr_ctx_client(ctx), &lo, ignore_event, NULL);
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
    atomic_store(
        &verb_result[V_GET],
        (int)kcr_client_get(c, &(kcr_request){.resource = &CM, .ns = "default", .name = "a"}, &o));
    kcr_object_unref(o);
    atomic_store(&verb_result[V_CREATE],
                 (int)kcr_client_create(
                     c, &(kcr_request){.resource = &CM, .ns = "default", .body = body}, NULL));
    atomic_store(&verb_result[V_UPDATE],
                 (int)kcr_client_update(
                     c, &(kcr_request){.resource = &CM, .ns = "default", .body = body}, NULL));
    atomic_store(
        &verb_result[V_STATUS],
        (int)kcr_client_update(
            c,
            &(kcr_request){.resource = &CM, .ns = "default", .subresource = "status", .body = body},
            NULL));
    atomic_store(&verb_result[V_PATCH],
                 (int)kcr_client_patch(c,
                                       &(kcr_request){.resource = &CM,
                                                      .ns = "default",
                                                      .name = "a",
                                                      .patch_type = KCR_PATCH_MERGE,
                                                      .body = "{\"data\":{\"v\":\"9\"}}"},
                                       NULL));
    atomic_store(&verb_result[V_DELETE],
                 (int)kcr_client_delete(
                     c, &(kcr_request){.resource = &CM, .ns = "default", .name = "a"}, NULL));
    char *raw = NULL;
    atomic_store(
        &verb_result[V_RAW],
        (int)kcr_client_request(c, "/api/v1/namespaces/default/configmaps/a", NULL, &raw, NULL));
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
