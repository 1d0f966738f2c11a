/* A failed helper says what failed, and KCR_TRY turns the error into the
 * reconcile's result: in the test kit, a 422 from the fake on the create of
 * a ResourceQuota is TERMINAL (no requeue) and the worker's log names the
 * verb, the kind and the object; a 500 is a retry that succeeds later. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "kcr/kcr.h"
#include "kcr/fake.h"
#include "kcr/testkit.h"

static const kcr_resource CM = {"", "v1", "configmaps"};
static const kcr_resource RQ = {"", "v1", "resourcequotas"};

static kcr_testkit *tk;
static kcr_controller *ctl;
static char logged[2048];

static void capture_log(kcr_log_level level, const char *module, const char *message, void *ud)
{
    (void)module, (void)ud;
    if (level == KCR_LOG_ERROR)
        snprintf(logged, sizeof logged, "%s", message);
}

static kcr_err desired_quota(kcr_object_edit *e, const kcr_object *cur, void *ud)
{
    (void)cur, (void)ud;
    kcr_err err = kcr_object_edit_set_string(e, "kind", "ResourceQuota");
    if (err == KCR_OK)
        err = kcr_object_edit_set_string(e, "spec.hard.cpu", "2");
    return err;
}

/* A team ConfigMap gets a quota named <team>-quota in its namespace. */
static kcr_result reconcile_team(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    (void)ud;
    char name[300];
    snprintf(name, sizeof name, "%s-quota", req->name);
    KCR_TRY(kcr_ctrlutil_create_or_update(
        kcr_ctx_client(ctx),
        &(kcr_ctrlutil_write_options){
            .resource = &RQ, .ns = req->ns, .name = name, .mutate = desired_quota},
        NULL));
    return KCR_DONE;
}

static void setup(void)
{
    cr_assert_eq(kcr_testkit_new(NULL, &tk), KCR_OK);
    kcr_api_resource rq = {.group = "",
                           .version = "v1",
                           .resource = "resourcequotas",
                           .kind = "ResourceQuota",
                           .namespaced = true};
    cr_assert_eq(kcr_fake_register(kcr_testkit_fake(tk), &rq, "quota"), KCR_OK, "%s",
                 kcr_last_error());
    cr_assert_eq(kcr_testkit_seed(tk, "apiVersion: v1\nkind: ConfigMap\n"
                                      "metadata: {name: team, namespace: team-a}\n"),
                 KCR_OK, "%s", kcr_last_error());
    kcr_controller_options o = {
        .name = "quota", .primary = {.resource = CM}, .reconcile = reconcile_team};
    cr_assert_eq(kcr_testkit_add_controller(tk, &o, &ctl), KCR_OK, "%s", kcr_last_error());
    logged[0] = '\0';
    kcr_log_set_handler(capture_log, NULL);
}

static void teardown(void)
{
    kcr_log_set_handler(NULL, NULL); /* the default: off */
    kcr_testkit_free(tk);
}

static void inject_create_error(int code, const char *reason, const char *message)
{
    cr_assert_eq(kcr_testkit_inject_error(tk, &(kcr_fake_error){.verb = KCR_FAKE_CREATE,
                                                                .resource = &RQ,
                                                                .ns = "team-a",
                                                                .code = code,
                                                                .reason = reason,
                                                                .message = message}),
                 KCR_OK, "%s", kcr_last_error());
}

Test(ctrlutil_try, result_of_maps_permanent_errors_to_terminal)
{
    kcr_result r = kcr_result_of(KCR_OK);
    cr_expect_eq(r.kind, KCR_RESULT_DONE);
    const kcr_err terminal[] = {KCR_ERR_INVALID_OBJECT, KCR_ERR_BAD_REQUEST, KCR_ERR_INVALID};
    for (size_t i = 0; i < sizeof terminal / sizeof *terminal; i++) {
        r = kcr_result_of(terminal[i]);
        cr_expect_eq(r.kind, KCR_RESULT_TERMINAL, "%s", kcr_strerror(terminal[i]));
        cr_expect_eq(r.err, terminal[i]);
    }
    const kcr_err retry[] = {KCR_ERR_API, KCR_ERR_CONFLICT, KCR_ERR_NOT_FOUND, KCR_ERR_TIMEOUT};
    for (size_t i = 0; i < sizeof retry / sizeof *retry; i++) {
        r = kcr_result_of(retry[i]);
        cr_expect_eq(r.kind, KCR_RESULT_RETRY, "%s", kcr_strerror(retry[i]));
        cr_expect_eq(r.err, retry[i]);
        cr_expect_eq(r.requeue_after_ms, 0);
    }
}

Test(ctrlutil_try, a_422_is_terminal_and_the_log_names_the_object, .init = setup, .fini = teardown)
{
    inject_create_error(422, "Invalid", "spec.hard.cpu: Invalid value: \"2\": not allowed here");
    kcr_result res;
    cr_assert_eq(kcr_testkit_reconcile(tk, ctl, "team-a/team", &res), KCR_OK, "%s",
                 kcr_last_error());
    cr_expect_eq(res.kind, KCR_RESULT_TERMINAL);
    cr_expect_eq(res.err, KCR_ERR_INVALID_OBJECT);
    cr_expect(strstr(logged, "reconcile team-a/team: terminal error (not retried): invalid "
                             "object: create ResourceQuota team-a/team-quota: ") &&
                  strstr(logged, "not allowed here"),
              "logged: %s", logged);
    cr_expect_eq(kcr_testkit_queue_len(tk, ctl), 0, "terminal: not requeued");
    kcr_controller_stats st;
    kcr_controller_get_stats(ctl, &st);
    cr_expect_eq(st.terminal_errors, 1);
    cr_expect_null(kcr_testkit_get(tk, &RQ, "team-a", "team-quota"));
}

Test(ctrlutil_try, a_500_is_retried_and_the_retry_creates, .init = setup, .fini = teardown)
{
    inject_create_error(500, "InternalError", "etcdserver: leader changed");
    kcr_result res;
    cr_assert_eq(kcr_testkit_reconcile(tk, ctl, "team-a/team", &res), KCR_OK, "%s",
                 kcr_last_error());
    cr_expect_eq(res.kind, KCR_RESULT_RETRY);
    cr_expect_eq(res.err, KCR_ERR_API);
    cr_expect(strstr(logged, "create ResourceQuota team-a/team-quota: ") &&
                  strstr(logged, "leader changed"),
              "logged: %s", logged);
    int64_t delay = -1;
    cr_assert(kcr_testkit_queued(tk, ctl, "team-a/team", &delay, NULL), "requeued for a retry");
    cr_expect_gt(delay, 0, "after the rate limiter's backoff");
    /* the error was injected once: the retry creates the quota */
    kcr_testkit_advance(tk, delay);
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK, "%s", kcr_last_error());
    kcr_object *q = kcr_testkit_get(tk, &RQ, "team-a", "team-quota");
    cr_assert_not_null(q, "the retry created the quota");
    cr_expect_str_eq(kcr_value_string(kcr_object_get(q, "spec.hard.cpu"), NULL), "2");
    kcr_object_unref(q);
}
