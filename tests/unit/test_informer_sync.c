/* Reaching synced: wait_for_sync reports the server's reason (403) or times
 * out with the last error and calls the error handler; streaming-list mode
 * and an empty list both sync. */
#include "tests/unit/informer_env.h"
#include "kcr/fake.h"

Test(informer, wait_for_sync_reports_a_403_with_the_server_message)
{
    env e;
    env_up(&e, 3, NULL);
    kcr_fake_inject_error(
        e.fake, &(kcr_fake_error){
                    .verb = KCR_FAKE_LIST,
                    .resource = &CM,
                    .times = -1,
                    .code = 403,
                    .reason = "Forbidden",
                    .message = "configmaps is forbidden: User \"kcr-limited\" cannot list resource "
                               "\"configmaps\" in API group \"\" at the cluster scope"});
    cr_assert_eq(kcr_informer_start(e.inf), KCR_OK);
    kcr_status st = {0};
    int64_t t0 = now_ms();
    kcr_err err = kcr_informer_wait_for_sync(e.inf, 10000, &st);
    cr_assert_eq(err, KCR_ERR_FORBIDDEN, "%s", kcr_strerror(err));
    cr_assert_lt(now_ms() - t0, 3000, "reported, not waited out");
    cr_assert_eq(st.code, 403);
    cr_assert(strstr(st.message, "cannot list resource") != NULL);
    cr_assert(strstr(kcr_last_error(), "kcr-limited") != NULL, "%s", kcr_last_error());
    kcr_status_clear(&st);
    /* once allowed, it syncs */
    kcr_fake_clear_errors(e.fake);
    cr_assert_eq(kcr_informer_wait_for_sync(e.inf, 5000, NULL), KCR_OK);
    env_down(&e);
}

static void count_err(kcr_err err, const kcr_status *st, const char *msg, void *ud)
{
    (void)st, (void)msg;
    if (err == KCR_ERR_API)
        __atomic_add_fetch((int *)ud, 1, __ATOMIC_SEQ_CST);
}

Test(informer, wait_for_sync_times_out_with_the_last_error_and_calls_the_error_handler)
{
    int errors = 0;
    kcr_informer_options o = fast();
    o.reflector.on_error = count_err;
    o.reflector.error_user_data = &errors;
    env e;
    env_up(&e, 3, &o);
    kcr_fake_inject_error(e.fake, &(kcr_fake_error){.verb = KCR_FAKE_LIST,
                                                    .resource = &CM,
                                                    .times = -1,
                                                    .code = 500,
                                                    .reason = "InternalError",
                                                    .message = "etcd is sad"});
    cr_assert_eq(kcr_informer_start(e.inf), KCR_OK);
    kcr_status st = {0};
    int64_t t0 = now_ms();
    cr_assert_eq(kcr_informer_wait_for_sync(e.inf, 300, &st), KCR_ERR_API);
    cr_assert_geq(now_ms() - t0, 290);
    cr_assert_eq(st.code, 500);
    cr_assert(strstr(kcr_last_error(), "etcd is sad") != NULL, "%s", kcr_last_error());
    cr_assert_gt(__atomic_load_n(&errors, __ATOMIC_SEQ_CST), 0);
    kcr_status_clear(&st);
    kcr_informer_stop(e.inf);
    cr_assert_eq(kcr_informer_wait_for_sync(e.inf, 1000, NULL), KCR_ERR_SHUTDOWN);
    env_down(&e);

    env_up(&e, 1, NULL);
    cr_assert_eq(kcr_informer_wait_for_sync(e.inf, 50, NULL), KCR_ERR_TIMEOUT, "never started");
    env_down(&e);
}

Test(informer, streaming_list_mode_syncs_and_converges)
{
    kcr_informer_options o = fast();
    o.reflector.list_mode = KCR_LIST_MODE_STREAMING;
    env e;
    env_up(&e, 40, &o);
    tracker *t = tracker_new();
    env_track(&e, t, 0, KCR_HANDLER_DELIVERY_THREAD);
    env_start_synced(&e);
    cr_assert_eq(kcr_fake_count(e.fake, KCR_FAKE_LIST, &CM), 0);
    cr_assert_eq(patch_cm(e.c, "default", "cm-00004", "z"), KCR_OK);
    CONVERGE(&e, t);
    cr_assert_eq(tracker_get_counts(t).initial_adds, 40);
    env_down(&e);
    tracker_free(t);
}

Test(informer, empty_list_syncs)
{
    env e;
    env_up(&e, 0, NULL);
    cr_assert_eq(kcr_informer_start(e.inf), KCR_OK);
    int64_t t0 = now_ms();
    cr_assert_eq(kcr_informer_wait_for_sync(e.inf, 5000, NULL), KCR_OK);
    cr_assert_lt(now_ms() - t0, 500);
    env_down(&e);
}
