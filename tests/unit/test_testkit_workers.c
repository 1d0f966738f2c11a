/* The test kit's per-reconcile deadline in virtual time (the token fires
 * when the clock passes it, the reconcile counts as a timeout) and its
 * simulated workers (batches of max_concurrent_reconciles keys at once on
 * one cache snapshot, never one key twice, kcr_testkit_check_workers). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "kcr/kcr.h"
#include "kcr/fake.h"
#include "kcr/testkit.h"

static const kcr_resource CM = {"", "v1", "configmaps"};

static kcr_testkit *tk;

/* What the reconciles saw, per test. */
static struct {
    int64_t work_ms[4];     /* advance the clock by these during each reconcile (0 ends) */
    bool canceled_after[4]; /* kcr_ctx_canceled after each step */
    int calls;
    int touch_shared; /* reconciles update ConfigMap "shared" from their cache */
    int conflicts;
} beh;

static void setup_kit(bool simulate_workers)
{
    memset(&beh, 0, sizeof beh);
    kcr_testkit_options o = {.simulate_workers = simulate_workers};
    cr_assert_eq(kcr_testkit_new(&o, &tk), KCR_OK, "%s", kcr_last_error());
}

static void setup(void)
{
    setup_kit(false);
}

static void setup_workers(void)
{
    setup_kit(true);
}

static void teardown(void)
{
    kcr_testkit_free(tk);
}

static void seed_cm(const char *name)
{
    char json[256];
    snprintf(json, sizeof json,
             "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"%s\"},"
             "\"data\":{\"n\":\"0\"}}",
             name);
    cr_assert_eq(kcr_testkit_seed(tk, json), KCR_OK, "%s", kcr_last_error());
}

/* Bumps data.n of "shared" as read from the cache (a stale cache: 409). */
static kcr_err bump_shared(kcr_ctx *ctx)
{
    kcr_object *shared = kcr_lister_get(kcr_ctx_cache(ctx, &CM), "default", "shared");
    cr_assert_not_null(shared);
    kcr_object_edit *e = NULL;
    cr_assert_eq(kcr_object_edit_new(shared, &e), KCR_OK);
    kcr_object *want = NULL;
    cr_assert_eq(kcr_object_edit_set_string(e, "data.n", "1"), KCR_OK);
    cr_assert_eq(kcr_object_edit_freeze(e, &want), KCR_OK);
    kcr_object_edit_free(e);
    kcr_err err = kcr_client_update(kcr_ctx_client(ctx),
                                    &(kcr_request){.resource = &CM, .object = want}, NULL);
    kcr_object_unref(want);
    kcr_object_unref(shared);
    return err;
}

static kcr_result reconcile(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    (void)ud;
    beh.calls++;
    if (strcmp(req->name, "shared") == 0)
        return KCR_DONE;
    for (int i = 0; i < 4 && beh.work_ms[i]; i++) {
        kcr_testkit_advance(tk, beh.work_ms[i]);
        beh.canceled_after[i] = kcr_ctx_canceled(ctx);
        if (kcr_ctx_canceled(ctx))
            return KCR_RETRY(kcr_set_error(KCR_ERR_CANCELED, "gave up at step %d", i));
    }
    if (beh.touch_shared) {
        kcr_err err = bump_shared(ctx);
        if (err == KCR_ERR_CONFLICT)
            beh.conflicts++;
        if (err != KCR_OK)
            return KCR_RETRY(err);
    }
    return KCR_DONE;
}

static kcr_controller *add(int workers, int64_t timeout_ms)
{
    kcr_controller *c = NULL;
    kcr_controller_options o = {.name = "t",
                                .primary = {.resource = CM},
                                .max_concurrent_reconciles = workers,
                                .reconcile_timeout_ms = timeout_ms,
                                .reconcile = reconcile};
    cr_assert_eq(kcr_testkit_add_controller(tk, &o, &c), KCR_OK, "%s", kcr_last_error());
    return c;
}

static const kcr_testkit_record *last(void)
{
    size_t n;
    const kcr_testkit_record *h = kcr_testkit_history(tk, &n);
    cr_assert_gt(n, 0);
    return &h[n - 1];
}

Test(testkit_deadline, fires_when_the_reconcile_passes_it, .init = setup, .fini = teardown)
{
    seed_cm("a");
    kcr_controller *c = add(1, 5000);
    beh.work_ms[0] = 3000;
    beh.work_ms[1] = 3000;
    kcr_result res;
    cr_assert_eq(kcr_testkit_reconcile(tk, c, "default/a", &res), KCR_OK, "%s", kcr_last_error());
    cr_assert_not(beh.canceled_after[0], "3 s of a 5 s deadline");
    cr_assert(beh.canceled_after[1], "6 s: past the deadline");
    cr_assert_eq(res.kind, KCR_RESULT_RETRY);
    cr_assert_eq(res.err, KCR_ERR_CANCELED);
    cr_assert(last()->timed_out);
    cr_assert_eq(last()->end_ms - last()->at_ms, 6000);
    kcr_controller_stats st;
    kcr_controller_get_stats(c, &st);
    cr_assert_eq(st.timeouts, 1);
    /* the next reconcile gets a fresh token and deadline */
    beh.work_ms[0] = 4999;
    beh.work_ms[1] = 0;
    cr_assert_eq(kcr_testkit_reconcile(tk, c, "default/a", &res), KCR_OK);
    cr_assert_not(beh.canceled_after[0]);
    cr_assert_eq(res.kind, KCR_RESULT_DONE);
    cr_assert_not(last()->timed_out);
    kcr_controller_get_stats(c, &st);
    cr_assert_eq(st.timeouts, 1);
}

Test(testkit_deadline, exactly_at_the_deadline_counts, .init = setup, .fini = teardown)
{
    seed_cm("a");
    kcr_controller *c = add(1, 5000);
    beh.work_ms[0] = 5000;
    cr_assert_eq(kcr_testkit_reconcile(tk, c, "default/a", NULL), KCR_OK);
    cr_assert(beh.canceled_after[0]);
    cr_assert(last()->timed_out);
}

Test(testkit_deadline, none_without_a_timeout, .init = setup, .fini = teardown)
{
    seed_cm("a");
    kcr_controller *c = add(1, 0);
    beh.work_ms[0] = 3600 * 1000;
    cr_assert_eq(kcr_testkit_reconcile(tk, c, "default/a", NULL), KCR_OK);
    cr_assert_not(beh.canceled_after[0]);
    cr_assert_not(last()->timed_out);
}

/* A fake hook stands for a server taking 2 s per request. */
static void slow_server(kcr_fake_verb verb, const kcr_resource *res, const char *ns,
                        const char *name, void *ud)
{
    (void)verb, (void)res, (void)ns, (void)name, (void)ud;
    kcr_testkit_advance(tk, 2000);
}

static kcr_result three_gets(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    (void)ud;
    for (int i = 0; i < 3; i++) {
        if (kcr_ctx_canceled(ctx))
            return KCR_RETRY(kcr_set_error(KCR_ERR_CANCELED, "stopped before get %d", i));
        kcr_object *o = NULL;
        kcr_client_get(kcr_ctx_client(ctx),
                       &(kcr_request){.resource = &CM, .ns = req->ns, .name = req->name}, &o);
        kcr_object_unref(o);
        beh.calls++;
    }
    return KCR_DONE;
}

Test(testkit_deadline, a_slow_server_runs_into_it, .init = setup, .fini = teardown)
{
    seed_cm("a");
    kcr_controller *c = NULL;
    kcr_controller_options o = {.name = "slow",
                                .primary = {.resource = CM},
                                .reconcile_timeout_ms = 5000,
                                .reconcile = three_gets};
    cr_assert_eq(kcr_testkit_add_controller(tk, &o, &c), KCR_OK, "%s", kcr_last_error());
    kcr_fake_set_hook(kcr_testkit_fake(tk), slow_server, NULL);
    kcr_result res;
    cr_assert_eq(kcr_testkit_reconcile(tk, c, "default/a", &res), KCR_OK, "%s", kcr_last_error());
    kcr_fake_set_hook(kcr_testkit_fake(tk), NULL, NULL);
    cr_assert_eq(beh.calls, 3, "gets at 0, 2 and 4 s; the third ends at 6 s");
    cr_assert(last()->timed_out);
    kcr_controller_stats st;
    kcr_controller_get_stats(c, &st);
    cr_assert_eq(st.timeouts, 1);
}

Test(testkit_workers, batches_of_max_concurrent, .init = setup_workers, .fini = teardown)
{
    const char *names[] = {"a", "b", "c", "d", "e"};
    for (size_t i = 0; i < 5; i++)
        seed_cm(names[i]);
    add(2, 0);
    beh.work_ms[0] = 100;
    size_t n;
    int64_t t0 = kcr_testkit_now_ms(tk);
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, &n), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(n, 5);
    const kcr_testkit_record *h = kcr_testkit_history(tk, &n);
    cr_assert_eq(n, 5);
    /* three batches: 2 + 2 + 1, each 100 ms of virtual time */
    for (size_t i = 0; i < 5; i++) {
        cr_assert_eq(h[i].batch, h[0].batch + i / 2, "record %zu", i);
        cr_assert_eq(h[i].worker, (int)(i % 2));
        cr_assert_eq(h[i].at_ms, t0 + (int64_t)(i / 2) * 100);
        cr_assert_eq(h[i].end_ms, h[i].at_ms + 100);
    }
    cr_assert_eq(kcr_testkit_now_ms(tk), t0 + 300, "the last batch ended at 300 ms");
    cr_assert_eq(kcr_testkit_check_workers(tk), KCR_OK, "%s", kcr_last_error());
}

Test(testkit_workers, one_batch_reads_one_snapshot, .init = setup_workers, .fini = teardown)
{
    seed_cm("a");
    seed_cm("b");
    seed_cm("shared");
    add(2, 0);
    beh.touch_shared = 1;
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK, "%s", kcr_last_error());
    /* a and b ran together on the same cached "shared": the second write is stale */
    cr_assert_eq(beh.conflicts, 1);
    const kcr_testkit_record *h = kcr_testkit_history(tk, NULL);
    cr_assert_eq(h[0].batch, h[1].batch);
    cr_assert_eq(h[1].result.kind, KCR_RESULT_RETRY);
    cr_assert_eq(h[1].result.err, KCR_ERR_CONFLICT);
    cr_assert_eq(kcr_testkit_check_workers(tk), KCR_OK, "%s", kcr_last_error());
}

Test(testkit_workers, one_at_a_time_sees_every_write, .init = setup, .fini = teardown)
{
    seed_cm("a");
    seed_cm("b");
    seed_cm("shared");
    add(2, 0); /* max_concurrent_reconciles is ignored without simulate_workers */
    beh.touch_shared = 1;
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(beh.conflicts, 0);
    size_t n;
    const kcr_testkit_record *h = kcr_testkit_history(tk, &n);
    for (size_t i = 1; i < n; i++)
        cr_assert_neq(h[i].batch, h[i - 1].batch);
}

/* A reconcile that changes its own key: the change must not start the key
 * again while it runs, only in a later batch. */
static kcr_result touch_self(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    (void)ud;
    beh.calls++;
    char patch[128];
    snprintf(patch, sizeof patch, "{\"data\":{\"n\":\"%d\"}}", beh.calls);
    kcr_object *o = kcr_ctx_get_primary(ctx);
    const char *n = o ? kcr_value_string(kcr_object_get(o, "data.n"), NULL) : NULL;
    bool first = n && strcmp(n, "0") == 0;
    kcr_object_unref(o);
    if (first)
        cr_assert_eq(kcr_client_patch(kcr_ctx_client(ctx),
                                      &(kcr_request){.resource = &CM,
                                                     .ns = req->ns,
                                                     .name = req->name,
                                                     .patch_type = KCR_PATCH_MERGE,
                                                     .body = patch},
                                      NULL),
                     KCR_OK, "%s", kcr_last_error());
    return KCR_DONE;
}

Test(testkit_workers, one_key_one_worker, .init = setup_workers, .fini = teardown)
{
    seed_cm("a");
    seed_cm("b");
    kcr_controller_options o = {.name = "self",
                                .primary = {.resource = CM},
                                .max_concurrent_reconciles = 4,
                                .reconcile = touch_self};
    cr_assert_eq(kcr_testkit_add_controller(tk, &o, NULL), KCR_OK, "%s", kcr_last_error());
    size_t n;
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, &n), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(n, 4, "a and b, then each again for its own change");
    const kcr_testkit_record *h = kcr_testkit_history(tk, NULL);
    cr_assert_eq(h[0].batch, h[1].batch);
    cr_assert_eq(h[2].batch, h[3].batch);
    cr_assert_neq(h[0].batch, h[2].batch, "the re-runs wait for the first batch");
    cr_assert_eq(h[2].reason, KCR_REASON_PRIMARY_UPDATED);
    cr_assert_eq(kcr_testkit_check_workers(tk), KCR_OK, "%s", kcr_last_error());
}

/* A reconcile that tries to run the kit from inside. */
static kcr_err nested_run, nested_reconcile;

static kcr_result nest(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    (void)ud;
    nested_run = kcr_testkit_run_until_idle(tk, 0, NULL);
    nested_reconcile = kcr_testkit_reconcile(tk, kcr_ctx_controller(ctx), req->key, NULL);
    return KCR_DONE;
}

Test(testkit_workers, kit_runs_refused_inside_a_reconcile, .init = setup, .fini = teardown)
{
    seed_cm("a");
    kcr_controller *c = NULL;
    kcr_controller_options o = {.name = "nest", .primary = {.resource = CM}, .reconcile = nest};
    cr_assert_eq(kcr_testkit_add_controller(tk, &o, &c), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_testkit_reconcile(tk, c, "default/a", NULL), KCR_OK);
    cr_assert_eq(nested_run, KCR_ERR_STATE);
    cr_assert_eq(nested_reconcile, KCR_ERR_STATE);
    cr_assert_eq(kcr_testkit_check_workers(NULL), KCR_ERR_INVALID);
}
