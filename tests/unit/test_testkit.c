/* The reconciler test kit and, through it, the controller internals shared
 * with the manager: routing (primary, owns, watches+map), reasons and their
 * coalescing, priorities, results (done, requeue-after on the virtual
 * clock, retry with backoff, terminal, garbage), predicates, invalid keys,
 * error injection per object, YAML seeding. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcr/kcr.h"
#include "kcr/fake.h"
#include "kcr/testkit.h"
#include "tests/unit/testkit_fixture.h"

static const kcr_resource CM = {"", "v1", "configmaps"};
static const kcr_resource SECRET = {"", "v1", "secrets"};


/* What the reconcile under test does, set per test. */
static struct {
    kcr_result result; /* returned unless `mirror` */
    bool mirror;       /* create/update <name>-copy owned by the primary */
    int calls;
    kcr_err last_write;
    bool saw_primary;
    int retries; /* req->retries of the last reconcile */
} beh;

static void setup(void)
{
    memset(&beh, 0, sizeof beh);
    cr_assert_eq(kcr_testkit_new(NULL, &tk), KCR_OK);
}

static void teardown(void)
{
    kcr_testkit_free(tk);
}

static kcr_result reconcile(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    (void)ud;
    beh.calls++;
    beh.retries = req->retries;
    cr_assert_not_null(kcr_ctx_cancel(ctx));
    cr_assert_not(kcr_ctx_canceled(ctx));
    kcr_object *p = kcr_ctx_get_primary(ctx);
    beh.saw_primary = p != NULL;
    size_t nl = strlen(req->name);
    bool is_copy = nl > 5 && strcmp(req->name + nl - 5, "-copy") == 0;
    if (beh.mirror && p && is_copy) {
        kcr_object_unref(p);
        return KCR_DONE;
    }
    if (beh.mirror && p) {
        const char *v = kcr_value_string(kcr_object_get(p, "data.v"), NULL);
        char body[512];
        snprintf(
            body, sizeof body,
            "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"%s-copy\","
            "\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"name\":\"%s\","
            "\"uid\":\"%s\",\"controller\":true}]},\"data\":{\"v\":\"%s\"}}",
            req->name, req->name, kcr_object_uid(p), v ? v : "");
        char name[300];
        snprintf(name, sizeof name, "%s-copy", req->name);
        kcr_object *have = kcr_lister_get(kcr_ctx_cache(ctx, &CM), req->ns, name);
        bool same =
            have && kcr_value_equal(kcr_object_get(have, "data"), kcr_object_get(p, "data"));
        kcr_object_unref(have);
        kcr_object_unref(p);
        if (same)
            return KCR_DONE;
        beh.last_write = kcr_client_patch(kcr_ctx_client(ctx),
                                          &(kcr_request){.resource = &CM,
                                                         .ns = req->ns,
                                                         .name = name,
                                                         .patch_type = KCR_PATCH_APPLY,
                                                         .body = body,
                                                         .field_manager = "t",
                                                         .force = true},
                                          NULL);
        return beh.last_write == KCR_OK ? KCR_DONE : KCR_RETRY(beh.last_write);
    }
    kcr_object_unref(p);
    return beh.result;
}

static kcr_controller *add(kcr_controller_options *o)
{
    kcr_controller *c = NULL;
    if (!o->name)
        o->name = "test";
    if (!o->primary.resource.resource)
        o->primary = (kcr_source){.resource = CM};
    o->reconcile = reconcile;
    cr_assert_eq(kcr_testkit_add_controller(tk, o, &c), KCR_OK, "%s", kcr_last_error());
    return c;
}

static void patch_cm(const char *name, const char *merge_patch)
{
    kcr_status st = {0};
    cr_assert_eq(kcr_client_patch(kcr_testkit_client(tk),
                                  &(kcr_request){.resource = &CM,
                                                 .ns = "default",
                                                 .name = name,
                                                 .patch_type = KCR_PATCH_MERGE,
                                                 .body = merge_patch,
                                                 .status = &st},
                                  NULL),
                 KCR_OK, "%s", kcr_last_error());
}

static void update_cm(const char *name, const char *v)
{
    char patch[256];
    snprintf(patch, sizeof patch, "{\"data\":{\"v\":\"%s\"}}", v);
    patch_cm(name, patch);
}

Test(testkit, seed_yaml_and_initial_list, .init = setup, .fini = teardown)
{
    seed("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  v: \"1\"\n---\n"
         "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  namespace: other\n");
    kcr_object *a = kcr_testkit_get(tk, &CM, "default", "a");
    cr_assert_not_null(a, "a namespaced object without a namespace lands in the default one");
    cr_assert_str_eq(kcr_value_string(kcr_object_get(a, "data.v"), NULL), "1");
    kcr_object_unref(a);
    kcr_controller *c = add(&(kcr_controller_options){0});
    cr_assert_eq(kcr_testkit_queue_len(tk, c), 2);
    size_t n = 0;
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, &n), KCR_OK);
    cr_assert_eq(n, 2);
    size_t hn;
    const kcr_testkit_record *h = kcr_testkit_history(tk, &hn);
    cr_assert_eq(hn, 2);
    cr_assert_str_eq(h[0].key, "default/a");
    cr_assert_str_eq(h[1].key, "other/b");
    cr_assert_eq(h[0].reason, KCR_REASON_INITIAL_LIST);
    cr_assert_str_eq(h[0].controller, "test");
}

Test(testkit, bad_seed_says_which_document, .init = setup, .fini = teardown)
{
    cr_assert_eq(kcr_testkit_seed(tk, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n"
                                      "apiVersion: v9\nkind: Nope\nmetadata: {name: b}\n"),
                 KCR_ERR_NOT_FOUND);
    cr_assert(strstr(kcr_last_error(), "seed document 2"), "%s", kcr_last_error());
    cr_assert_eq(kcr_testkit_seed(tk, "a: [unclosed"), KCR_ERR_PARSE);
}

Test(testkit, owns_routes_to_the_controlling_owner, .init = setup, .fini = teardown)
{
    seed("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"src\","
         "\"labels\":{\"mirror\":\"true\"}},\"data\":{\"v\":\"1\"}}");
    beh.mirror = true;
    kcr_source owns = {.resource = CM};
    kcr_controller *c = add(&(kcr_controller_options){
        .primary = {.resource = CM, .predicate = kcr_predicate_label_selector("mirror=true")},
        .owns = &owns,
        .n_owns = 1});
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK, "%s", kcr_last_error());
    kcr_object *copy = kcr_testkit_get(tk, &CM, "default", "src-copy");
    cr_assert_not_null(copy);
    kcr_object_unref(copy);
    /* the copy's creation came back to its owner as OWNED */
    cr_assert_eq(last()->reason, KCR_REASON_OWNED);
    cr_assert_str_eq(last()->key, "default/src");
    cr_assert_eq(kcr_testkit_queue_len(tk, c), 0);
    /* a change of the primary: PRIMARY_UPDATED, the copy follows */
    update_cm("src", "2");
    kcr_testkit_clear_history(tk);
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    size_t n;
    const kcr_testkit_record *h = kcr_testkit_history(tk, &n);
    cr_assert_geq(n, 1);
    cr_assert_eq(h[0].reason, KCR_REASON_PRIMARY_UPDATED);
    copy = kcr_testkit_get(tk, &CM, "default", "src-copy");
    cr_assert_str_eq(kcr_value_string(kcr_object_get(copy, "data.v"), NULL), "2");
    kcr_object_unref(copy);
    /* the copy was created once and updated once: no write loop */
    cr_assert_eq(kcr_fake_count(kcr_testkit_fake(tk), KCR_FAKE_PATCH, &CM), 3,
                 "the test's own patch, the copy's creation and one update");
}

Test(testkit, requeue_after_waits_on_the_virtual_clock, .init = setup, .fini = teardown)
{
    seed("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"}}");
    beh.result = KCR_REQUEUE_AFTER(60000);
    kcr_controller *c = add(&(kcr_controller_options){0});
    size_t n;
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, &n), KCR_OK);
    cr_assert_eq(n, 1);
    int64_t delay = -1;
    uint32_t reasons = 0;
    cr_assert(kcr_testkit_queued(tk, c, "default/a", &delay, &reasons));
    cr_assert_eq(delay, 60000);
    cr_assert(reasons & KCR_REASON_BIT(KCR_REASON_REQUEUE_AFTER));
    kcr_testkit_advance(tk, 59999);
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, &n), KCR_OK);
    cr_assert_eq(n, 0, "not due yet");
    kcr_testkit_advance(tk, 1);
    beh.result = KCR_DONE;
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, &n), KCR_OK);
    cr_assert_eq(n, 1);
    const kcr_testkit_record *h = kcr_testkit_history(tk, &n);
    cr_assert_eq(n, 2);
    cr_assert_eq(h[1].reason, KCR_REASON_REQUEUE_AFTER);
    cr_assert_eq(h[1].at_ms - h[0].at_ms, 60000);
    cr_assert_eq(kcr_testkit_queue_len(tk, c), 0);
}

Test(testkit, retry_backs_off_and_success_resets, .init = setup, .fini = teardown)
{
    seed("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"},"
         "\"data\":{\"v\":\"1\"}}");
    beh.mirror = true;
    /* creating the copy fails twice with a 500, only for that name */
    cr_assert_eq(kcr_testkit_inject_error(tk, &(kcr_fake_error){.verb = KCR_FAKE_PATCH,
                                                                .resource = &CM,
                                                                .ns = "default",
                                                                .name = "a-copy",
                                                                .times = 2,
                                                                .code = 500,
                                                                .reason = "InternalError",
                                                                .message = "boom"}),
                 KCR_OK);
    kcr_controller *c = add(&(kcr_controller_options){0});
    size_t n;
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, &n), KCR_OK);
    cr_assert_eq(n, 1);
    cr_assert_eq(last()->result.kind, KCR_RESULT_RETRY);
    int64_t d1 = 0, d2 = 0;
    cr_assert(kcr_testkit_queued(tk, c, "default/a", &d1, NULL));
    cr_assert_eq(d1, 5, "client-go's first backoff is 5 ms");
    kcr_testkit_advance(tk, d1);
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, &n), KCR_OK);
    cr_assert_eq(n, 1, "%zu", n);
    cr_assert_eq(last()->reason, KCR_REASON_RETRY);
    cr_assert(kcr_testkit_queued(tk, c, "default/a", &d2, NULL));
    cr_assert_eq(d2, 10, "doubled");
    kcr_testkit_advance(tk, d2);
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, &n), KCR_OK);
    cr_assert_eq(n, 2, "the primary, then its copy (a primary too here)");
    cr_assert_eq(kcr_testkit_history(tk, NULL)[2].result.kind, KCR_RESULT_DONE);
    kcr_object *copy = kcr_testkit_get(tk, &CM, "default", "a-copy");
    cr_assert_not_null(copy);
    kcr_object_unref(copy);
    kcr_controller_stats st;
    kcr_controller_get_stats(c, &st);
    cr_assert_eq(st.errors, 2);
    cr_assert_geq(st.successes, 1);
    /* success forgot the backoff: the next failure starts at 5 ms again */
    beh.mirror = false;
    beh.result = KCR_RETRY(KCR_ERR_API);
    cr_assert_eq(kcr_testkit_reconcile(tk, c, "default/a", NULL), KCR_OK);
    cr_assert(kcr_testkit_queued(tk, c, "default/a", &d1, NULL));
    cr_assert_eq(d1, 5);
}

Test(testkit, requeue_is_rate_limited_and_not_an_error, .init = setup, .fini = teardown)
{
    seed("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"}}");
    beh.result = KCR_REQUEUE;
    kcr_controller *c = add(&(kcr_controller_options){0});
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    int64_t d1 = 0, d2 = 0;
    uint32_t reasons = 0;
    cr_assert(kcr_testkit_queued(tk, c, "default/a", &d1, &reasons));
    cr_assert_eq(d1, 5, "the rate limiter's first delay");
    cr_assert(reasons & KCR_REASON_BIT(KCR_REASON_REQUEUE_AFTER));
    kcr_testkit_advance(tk, d1);
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    cr_assert_eq(last()->reason, KCR_REASON_REQUEUE_AFTER);
    cr_assert_eq(beh.retries, 1, "a requeue counts in req->retries, like NumRequeues");
    cr_assert(kcr_testkit_queued(tk, c, "default/a", &d2, NULL));
    cr_assert_eq(d2, 10, "the backoff keeps growing");
    kcr_controller_stats st;
    kcr_controller_get_stats(c, &st);
    cr_assert_eq(st.requeues, 2);
    cr_assert_eq(st.errors, 0, "a requeue is not an error");
    cr_assert_eq(st.successes, 0);
    /* DONE forgets the backoff */
    beh.result = KCR_DONE;
    kcr_testkit_advance(tk, d2);
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    cr_assert_eq(kcr_testkit_queue_len(tk, c), 0);
    beh.result = KCR_REQUEUE;
    cr_assert_eq(kcr_testkit_reconcile(tk, c, "default/a", NULL), KCR_OK);
    cr_assert(kcr_testkit_queued(tk, c, "default/a", &d1, NULL));
    cr_assert_eq(d1, 5);
}

/* ---- the worker logs the reconcile's own error detail ---- */

static char logged[2048];

static void capture_log(kcr_log_level level, const char *module, const char *message, void *ud)
{
    (void)module, (void)ud;
    if (level == KCR_LOG_ERROR)
        snprintf(logged, sizeof logged, "%s", message);
}

static kcr_result fail_with_detail(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    (void)ud;
    /* a kcr call that fails first leaves its own detail behind */
    kcr_object *o = NULL;
    kcr_client_get(kcr_ctx_client(ctx),
                   &(kcr_request){.resource = &CM, .ns = req->ns, .name = "absent"}, &o);
    return KCR_RETRY(kcr_set_error(KCR_ERR_INVALID, "spec.size %d is not a power of two", 3));
}

Test(testkit, retry_logs_the_reconciles_own_detail, .init = setup, .fini = teardown)
{
    seed("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"}}");
    kcr_controller *c = NULL;
    kcr_controller_options o = {
        .name = "detail", .primary = {.resource = CM}, .reconcile = fail_with_detail};
    cr_assert_eq(kcr_testkit_add_controller(tk, &o, &c), KCR_OK, "%s", kcr_last_error());
    logged[0] = '\0';
    kcr_log_set_handler(capture_log, NULL);
    kcr_err err = kcr_testkit_reconcile(tk, c, "default/a", NULL);
    kcr_log_set_handler(NULL, NULL); /* the default: off */
    cr_assert_eq(err, KCR_OK, "%s", kcr_last_error());
    cr_assert(strstr(logged, "reconcile default/a: invalid argument: spec.size 3 is not a power "
                             "of two"),
              "logged: %s", logged);
    cr_assert_null(strstr(logged, "absent"), "a stale detail: %s", logged);
}

Test(testkit, terminal_is_counted_and_not_requeued, .init = setup, .fini = teardown)
{
    seed("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"}}");
    beh.result = KCR_TERMINAL(KCR_ERR_INVALID);
    kcr_controller *c = add(&(kcr_controller_options){0});
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    cr_assert_eq(kcr_testkit_queue_len(tk, c), 0);
    kcr_controller_stats st;
    kcr_controller_get_stats(c, &st);
    cr_assert_eq(st.terminal_errors, 1);
    kcr_testkit_advance(tk, 3600 * 1000);
    size_t n;
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, &n), KCR_OK);
    cr_assert_eq(n, 0);
}

Test(testkit, garbage_results_retry_with_backoff_not_hot, .init = setup, .fini = teardown)
{
    seed("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"}}");
    beh.result = (kcr_result){.kind = (kcr_result_kind)42};
    kcr_controller *c = add(&(kcr_controller_options){0});
    size_t n;
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, &n), KCR_OK);
    cr_assert_eq(n, 1, "a garbage result is not requeued at once");
    beh.result = KCR_REQUEUE_AFTER(0); /* requeue after 0 ms is garbage too */
    kcr_testkit_advance(tk, 5);
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, &n), KCR_OK);
    cr_assert_eq(n, 1);
    kcr_controller_stats st;
    kcr_controller_get_stats(c, &st);
    cr_assert_eq(st.garbage_results, 2);
    cr_assert_eq(st.errors, 2);
    int64_t d;
    cr_assert(kcr_testkit_queued(tk, c, "default/a", &d, NULL));
    cr_assert_eq(d, 10);
}

static kcr_err map_secret(kcr_source_ctx *ctx, const kcr_object *obj, kcr_map_out *out, void *ud)
{
    (void)ctx, (void)ud;
    const char *target = kcr_object_annotation(obj, "target");
    if (!target)
        return KCR_ERR_INVALID;
    kcr_map_emit(out, kcr_object_namespace(obj), target);
    kcr_map_emit(out, NULL, "no-namespace"); /* invalid for a namespaced primary */
    kcr_map_emit(out, kcr_object_namespace(obj), "bad/name");
    return KCR_OK;
}

Test(testkit, watches_map_keys_invalid_keys_and_map_errors, .init = setup, .fini = teardown)
{
    seed("{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"s\","
         "\"annotations\":{\"target\":\"cm1\"}}}\n---\n"
         "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"t\"}}");
    beh.result = KCR_DONE;
    kcr_source w = {.resource = SECRET, .map = map_secret};
    kcr_controller *c = add(&(kcr_controller_options){.watches = &w, .n_watches = 1});
    uint32_t reasons = 0;
    cr_assert(kcr_testkit_queued(tk, c, "default/cm1", NULL, &reasons));
    cr_assert(reasons & KCR_REASON_BIT(KCR_REASON_MAPPED));
    cr_assert_eq(kcr_testkit_queue_len(tk, c), 1, "only the valid key");
    kcr_controller_stats st;
    kcr_controller_get_stats(c, &st);
    cr_assert_eq(st.invalid_keys, 2);
    cr_assert_eq(st.map_errors, 1);
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    cr_assert_eq(last()->reason, KCR_REASON_MAPPED);
    cr_assert_str_eq(last()->key, "default/cm1");
    cr_assert(!beh.saw_primary, "cm1 does not exist: the reconcile sees no primary");
}

Test(testkit, reasons_coalesce_most_important_wins, .init = setup, .fini = teardown)
{
    seed("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"}}");
    kcr_controller *c = add(&(kcr_controller_options){0});
    update_cm("a", "x"); /* while still queued from the initial list */
    cr_assert_eq(kcr_controller_enqueue(c, "default", "a"), KCR_OK);
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    size_t n;
    const kcr_testkit_record *h = kcr_testkit_history(tk, &n);
    cr_assert_eq(n, 1);
    cr_assert_eq(h[0].reason, KCR_REASON_PRIMARY_UPDATED);
    cr_assert_eq(h[0].reasons, KCR_REASON_BIT(KCR_REASON_INITIAL_LIST) |
                                   KCR_REASON_BIT(KCR_REASON_PRIMARY_UPDATED) |
                                   KCR_REASON_BIT(KCR_REASON_ENQUEUED));
}

Test(testkit, live_changes_before_initial_list, .init = setup, .fini = teardown)
{
    seed("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"}}\n---\n"
         "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"b\"}}");
    add(&(kcr_controller_options){0});
    kcr_status st = {0};
    cr_assert_eq(kcr_client_create(kcr_testkit_client(tk),
                                   &(kcr_request){.resource = &CM,
                                                  .ns = "default",
                                                  .body = "{\"metadata\":{\"name\":\"z\"}}",
                                                  .status = &st},
                                   NULL),
                 KCR_OK);
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    size_t n;
    const kcr_testkit_record *h = kcr_testkit_history(tk, &n);
    cr_assert_eq(n, 3);
    cr_assert_str_eq(h[0].key, "default/z", "the live add goes first");
    cr_assert_eq(h[0].reason, KCR_REASON_PRIMARY_ADDED);
    cr_assert_str_eq(h[1].key, "default/a");
    cr_assert_str_eq(h[2].key, "default/b");
}

Test(testkit, predicates_filter_updates, .init = setup, .fini = teardown)
{
    seed("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\","
         "\"labels\":{\"x\":\"1\"}}}");
    kcr_controller *c = add(&(kcr_controller_options){
        .primary = {.resource = CM, .predicate = kcr_predicate_labels_changed()}});
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    patch_cm("a", "{\"metadata\":{\"labels\":{\"x\":\"2\"}}}");
    cr_assert_eq(kcr_testkit_sync(tk), KCR_OK);
    cr_assert_eq(kcr_testkit_queue_len(tk, c), 1);
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    update_cm("a", "data only"); /* labels unchanged: filtered */
    cr_assert_eq(kcr_testkit_sync(tk), KCR_OK);
    cr_assert_eq(kcr_testkit_queue_len(tk, c), 0);
    kcr_controller_stats st;
    kcr_controller_get_stats(c, &st);
    cr_assert_eq(st.filtered, 1);
}

Test(testkit, resync_is_low_priority_with_its_reason, .init = setup, .fini = teardown)
{
    seed("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"}}");
    add(&(kcr_controller_options){.resync_period_ms = 60000});
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    cr_assert_eq(kcr_testkit_resync(tk), KCR_OK);
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    cr_assert_eq(last()->reason, KCR_REASON_RESYNC);
}

Test(testkit, duplicate_names_and_bad_declarations, .init = setup, .fini = teardown)
{
    add(&(kcr_controller_options){.name = "x"});
    kcr_controller_options o = {.name = "x", .primary = {.resource = CM}, .reconcile = reconcile};
    cr_assert_eq(kcr_testkit_add_controller(tk, &o, NULL), KCR_ERR_EXISTS);
    cr_assert(strstr(kcr_last_error(), "\"x\""), "%s", kcr_last_error());
    o = (kcr_controller_options){.name = "y", .primary = {.resource = CM}};
    cr_assert_eq(kcr_testkit_add_controller(tk, &o, NULL), KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "reconcile"), "%s", kcr_last_error());
    kcr_source w = {.resource = SECRET};
    o = (kcr_controller_options){.name = "z",
                                 .primary = {.resource = CM},
                                 .watches = &w,
                                 .n_watches = 1,
                                 .reconcile = reconcile};
    cr_assert_eq(kcr_testkit_add_controller(tk, &o, NULL), KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "map function"), "%s", kcr_last_error());
    o = (kcr_controller_options){
        .name = "w", .primary = {.resource = {"nope.io", "v1", "things"}}, .reconcile = reconcile};
    cr_assert_eq(kcr_testkit_add_controller(tk, &o, NULL), KCR_ERR_NOT_FOUND);
}

Test(testkit, conflict_injected_per_name, .init = setup, .fini = teardown)
{
    seed("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"}}\n---\n"
         "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"b\"}}");
    cr_assert_eq(kcr_testkit_inject_error(tk, &(kcr_fake_error){.verb = KCR_FAKE_UPDATE,
                                                                .resource = &CM,
                                                                .ns = "default",
                                                                .name = "b",
                                                                .code = 409,
                                                                .reason = "Conflict",
                                                                .message = "stale"}),
                 KCR_OK);
    kcr_status st = {0};
    kcr_client *cl = kcr_testkit_client(tk);
    cr_assert_eq(kcr_client_update(cl,
                                   &(kcr_request){.resource = &CM,
                                                  .ns = "default",
                                                  .body = "{\"metadata\":{\"name\":\"a\"}}",
                                                  .status = &st},
                                   NULL),
                 KCR_OK);
    cr_assert_eq(kcr_client_update(cl,
                                   &(kcr_request){.resource = &CM,
                                                  .ns = "default",
                                                  .body = "{\"metadata\":{\"name\":\"b\"}}",
                                                  .status = &st},
                                   NULL),
                 KCR_ERR_CONFLICT);
    cr_assert_eq(st.code, 409);
    kcr_status_clear(&st);
    cr_assert_eq(kcr_client_update(cl,
                                   &(kcr_request){.resource = &CM,
                                                  .ns = "default",
                                                  .body = "{\"metadata\":{\"name\":\"b\"}}",
                                                  .status = &st},
                                   NULL),
                 KCR_OK, "only once");
}

Test(testkit, never_settling_controller_is_reported, .init = setup, .fini = teardown)
{
    seed("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"}}");
    kcr_controller *c = add(&(kcr_controller_options){0});
    beh.result = KCR_DONE;
    for (int i = 0; i < 3; i++) /* each reconcile's own write would requeue: simulate */
        cr_assert_eq(kcr_controller_enqueue(c, "default", "a"), KCR_OK);
    size_t n;
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 1, &n), KCR_OK, "one key, coalesced");
    cr_assert_eq(n, 1);
}

static kcr_result event_reconcile(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    (void)req, (void)ud;
    kcr_object *p = kcr_ctx_get_primary(ctx);
    if (p)
        kcr_ctx_eventf(ctx, p, KCR_EVENT_NORMAL, "Seen", "reconciled at %lld",
                       (long long)kcr_ctx_now_ms(ctx));
    kcr_object_unref(p);
    return KCR_DONE;
}

Test(testkit, events_are_recorded_synchronously, .init = setup, .fini = teardown)
{
    seed("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"}}");
    kcr_controller_options o = {
        .name = "ev", .primary = {.resource = CM}, .reconcile = event_reconcile};
    cr_assert_eq(kcr_testkit_add_controller(tk, &o, NULL), KCR_OK);
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    cr_assert_eq(kcr_testkit_count_events(tk, "a", "Seen"), 1);
    cr_assert_eq(kcr_testkit_count_events(tk, "a", "Other"), 0);
    cr_assert_eq(kcr_testkit_count_events(tk, "b", NULL), 0);
}

Test(testkit, client_writes_kcr_objects, .init = setup, .fini = teardown)
{
    kcr_client *cl = kcr_testkit_client(tk);
    kcr_object *obj = NULL, *got = NULL;
    const char *json = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":"
                       "{\"name\":\"o\",\"namespace\":\"ns1\"},\"data\":{\"v\":\"1\"}}";
    cr_assert_eq(kcr_object_parse(json, strlen(json), &obj), KCR_OK);
    cr_assert_eq(kcr_client_create(cl, &(kcr_request){.resource = &CM, .object = obj}, &got),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_str_eq(kcr_object_namespace(got), "ns1", "the object's namespace");
    kcr_object_edit *e = NULL;
    cr_assert_eq(kcr_object_edit_new(got, &e), KCR_OK);
    kcr_object *changed = NULL;
    cr_assert_eq(kcr_object_edit_set_string(e, "data.v", "2"), KCR_OK);
    cr_assert_eq(kcr_object_edit_freeze(e, &changed), KCR_OK);
    kcr_object_edit_free(e);
    kcr_object_unref(got);
    cr_assert_eq(kcr_client_update(cl, &(kcr_request){.resource = &CM, .object = changed}, &got),
                 KCR_OK);
    cr_assert_str_eq(kcr_value_string(kcr_object_get(got, "data.v"), NULL), "2");
    kcr_object_unref(got);
    kcr_status st = {0};
    cr_assert_eq(kcr_client_update(
                     cl, &(kcr_request){.resource = &CM, .object = changed, .status = &st}, NULL),
                 KCR_ERR_CONFLICT, "its resourceVersion is stale now");
    kcr_status_clear(&st);
    cr_assert_eq(kcr_client_patch(cl,
                                  &(kcr_request){.resource = &CM,
                                                 .object = obj,
                                                 .patch_type = KCR_PATCH_APPLY,
                                                 .field_manager = "t"},
                                  &got),
                 KCR_OK);
    cr_assert_str_eq(kcr_value_string(kcr_object_get(got, "data.v"), NULL), "1");
    kcr_object_unref(got);
    cr_assert_eq(kcr_client_patch(
                     cl,
                     &(kcr_request){.resource = &CM, .object = obj, .patch_type = KCR_PATCH_APPLY},
                     NULL),
                 KCR_OK, "apply without options uses the client's default field manager: %s",
                 kcr_last_error());
    cr_assert_eq(kcr_client_create(cl, &(kcr_request){.resource = &CM, .object = NULL}, NULL),
                 KCR_ERR_INVALID);
    kcr_object_unref(changed);
    kcr_object_unref(obj);
}

static void by_app(const kcr_object *o, kcr_index_emit *emit, void *ud)
{
    (void)ud;
    const char *app = kcr_object_label(o, "app");
    if (app)
        kcr_index_emit_value(emit, app);
}

static int indexed_hits;

static kcr_result index_reconcile(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    (void)req, (void)ud;
    kcr_object_list l = {0};
    cr_assert_eq(kcr_lister_by_index(kcr_ctx_cache(ctx, &CM), "by-app", "web", &l), KCR_OK);
    indexed_hits = (int)l.len;
    kcr_object_list_free(&l);
    kcr_object *p = kcr_ctx_get_primary(ctx);
    cr_assert_not_null(p);
    cr_assert_eq(kcr_value_get_type(kcr_object_get(p, "data")), KCR_VALUE_ABSENT,
                 "a metadata-only cache holds no data");
    kcr_object_unref(p);
    return KCR_DONE;
}

Test(testkit, metadata_only_cache_with_an_index, .init = setup, .fini = teardown)
{
    seed("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\","
         "\"labels\":{\"app\":\"web\"}},\"data\":{\"big\":\"xxxxxxxx\"}}\n---\n"
         "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"b\","
         "\"labels\":{\"app\":\"web\"}}}");
    kcr_cache_index ix = {.resource = CM, .name = "by-app", .fn = by_app};
    kcr_controller_options o = {.name = "meta",
                                .primary = {.resource = CM, .metadata_only = true},
                                .indexes = &ix,
                                .n_indexes = 1,
                                .reconcile = index_reconcile};
    cr_assert_eq(kcr_testkit_add_controller(tk, &o, NULL), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    cr_assert_eq(indexed_hits, 2);
}

static kcr_err secret_to_cm(kcr_source_ctx *ctx, const kcr_object *obj, kcr_map_out *out,
                           void *ud)
{
    (void)ctx, (void)ud;
    return kcr_map_emit(out, kcr_object_namespace(obj), kcr_object_name(obj));
}

Test(testkit, selectors_and_namespace_per_source, .init = setup, .fini = teardown)
{
    seed("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"web\","
         "\"labels\":{\"app\":\"web\"}}}\n---\n"
         "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"db\","
         "\"labels\":{\"app\":\"db\"}}}\n---\n"
         "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"web\","
         "\"namespace\":\"other\",\"labels\":{\"app\":\"web\"}}}\n---\n"
         "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"s1\"}}\n---\n"
         "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"s2\"}}");
    kcr_source w = {.resource = SECRET, .field_selector = "metadata.name=s2", .map = secret_to_cm};
    kcr_controller *c = add(&(kcr_controller_options){
        .primary = {.resource = CM, .ns = "default", .label_selector = "app=web"},
        .watches = &w,
        .n_watches = 1});
    cr_assert_eq(kcr_testkit_queue_len(tk, c), 2);
    cr_assert(kcr_testkit_queued(tk, c, "default/web", NULL, NULL));
    cr_assert(kcr_testkit_queued(tk, c, "default/s2", NULL, NULL), "only s2 is watched");
    cr_assert_not(kcr_testkit_queued(tk, c, "default/db", NULL, NULL));
    cr_assert_not(kcr_testkit_queued(tk, c, "other/web", NULL, NULL));
}

static const kcr_resource DEPLOY = {"apps", "v1", "deployments"};

static kcr_err observe_generation(kcr_object_edit *edit, const kcr_object *current, void *ud)
{
    (void)ud;
    return kcr_object_edit_set_int(edit, "status.observedGeneration",
                                   kcr_object_generation(current));
}

static kcr_result status_reconcile(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    (void)ud;
    kcr_ctrlutil_op_result r;
    kcr_err err =
        kcr_ctrlutil_update_status(kcr_ctx_client(ctx),
                                   &(kcr_ctrlutil_write_options){.resource = &DEPLOY,
                                                                 .ns = req->ns,
                                                                 .name = req->name,
                                                                 .mutate = observe_generation,
                                                                 .result = &r},
                                   NULL);
    return err == KCR_OK ? KCR_DONE : KCR_RETRY(err);
}

Test(testkit, status_update_retries_an_injected_conflict, .init = setup, .fini = teardown)
{
    seed("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"
         "spec: {replicas: 1}\n");
    cr_assert_eq(
        kcr_testkit_inject_error(tk, &(kcr_fake_error){.verb = KCR_FAKE_UPDATE,
                                                       .resource = &DEPLOY,
                                                       .ns = "default",
                                                       .name = "web",
                                                       .code = 409,
                                                       .reason = "Conflict",
                                                       .message = "the object has been modified"}),
        KCR_OK);
    kcr_controller_options o = {.name = "status", .primary = {.resource = DEPLOY},
                                .reconcile = status_reconcile};
    cr_assert_eq(kcr_testkit_add_controller(tk, &o, NULL), KCR_OK, "%s", kcr_last_error());
    size_t n;
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, &n), KCR_OK);
    const kcr_testkit_record *h = kcr_testkit_history(tk, NULL);
    cr_assert_eq(h[0].result.kind, KCR_RESULT_DONE, "the helper re-read and retried the 409");
    kcr_object *d = kcr_testkit_get(tk, &DEPLOY, "default", "web");
    cr_assert_eq(kcr_value_int(kcr_object_get(d, "status.observedGeneration")), 1);
    kcr_object_unref(d);
    cr_assert_eq(kcr_fake_count(kcr_testkit_fake(tk), KCR_FAKE_UPDATE, &DEPLOY), 2,
                 "one conflict, one write");
}

Test(testkit, custom_rate_limiter, .init = setup, .fini = teardown)
{
    seed("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"}}");
    beh.result = KCR_RETRY(KCR_ERR_API);
    kcr_rate_limiter *rl = NULL;
    cr_assert_eq(kcr_rate_limiter_fast_slow_new(10, 1000, 2, &rl), KCR_OK);
    kcr_controller *c = add(&(kcr_controller_options){.rate_limiter = rl});
    int64_t want[] = {10, 10, 1000};
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
        int64_t d = -1;
        cr_assert(kcr_testkit_queued(tk, c, "default/a", &d, NULL));
        cr_assert_eq(d, want[i], "retry %d: %lld ms", i, (long long)d);
        cr_assert_eq(beh.retries, i, "failures before this reconcile");
        kcr_testkit_advance(tk, d);
    }
    cr_assert_eq(last()->reason, KCR_REASON_RETRY);
    size_t n;
    kcr_testkit_history(tk, &n);
    cr_assert_eq(n, 3);
    cr_assert_eq(kcr_testkit_history(tk, NULL)[2].result.kind, KCR_RESULT_RETRY);
}

Test(testkit, cluster_scoped_primary_and_namespaced_owned, .init = setup, .fini = teardown)
{
    static const kcr_resource NS = {"", "v1", "namespaces"};
    seed("apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a, uid: u-team-a}\n");
    kcr_object *team = kcr_testkit_get(tk, &NS, NULL, "team-a");
    cr_assert_not_null(team);
    char cm[512];
    snprintf(cm, sizeof cm,
             "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"quota\","
             "\"namespace\":\"team-a\",\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":"
             "\"Namespace\",\"name\":\"team-a\",\"uid\":\"%s\",\"controller\":true}]}}",
             kcr_object_uid(team));
    kcr_object_unref(team);
    kcr_source owns = {.resource = CM};
    kcr_controller *c = add(&(kcr_controller_options){.primary = {.resource = NS},
                                                      .owns = &owns, .n_owns = 1});
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    cr_assert_str_eq(last()->key, "team-a", "a cluster-scoped key has no namespace");
    seed(cm);
    cr_assert_eq(kcr_testkit_sync(tk), KCR_OK);
    uint32_t reasons = 0;
    cr_assert(kcr_testkit_queued(tk, c, "team-a", NULL, &reasons));
    cr_assert(reasons & KCR_REASON_BIT(KCR_REASON_OWNED));
    cr_assert_eq(kcr_controller_enqueue(c, "x", "y"), KCR_ERR_INVALID,
                 "a namespace for a cluster-scoped primary");
    cr_assert(strstr(kcr_last_error(), "cluster-scoped"), "%s", kcr_last_error());
}
