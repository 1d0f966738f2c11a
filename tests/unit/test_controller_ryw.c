/* Read-your-writes on the manager: with the informer held back
 * deterministically, a reconcile reads its own write only when
 * read-your-writes is on. */
#include "tests/unit/manager_fixture.h"

/* ---- read-your-writes: a deterministic informer lag ---- */

static atomic_bool gate_open;
static atomic_int gate_blocked;

/* Blocks the informer's thread until the gate opens (20 s at most). */
static void hold_at_gate(void)
{
    atomic_fetch_add(&gate_blocked, 1);
    int64_t until = kcr__now_ns() + 20 * KCR_NS_PER_S;
    while (!atomic_load(&gate_open) && kcr__now_ns() < until) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

/* Holds back the informer's copy of ConfigMap "a" at data.v == "2" until the
 * gate opens: the cache lags the write deterministically. */
static kcr_err gate_transform(const kcr_object *in, kcr_object **out, void *ud)
{
    (void)ud;
    const char *v = kcr_value_string(kcr_object_get(in, "data.v"), NULL);
    if (strcmp(kcr_object_name(in), "a") == 0 && v && strcmp(v, "2") == 0)
        hold_at_gate();
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
        kcr_err err = kcr_client_patch(kcr_ctx_client(ctx),
                                       &(kcr_request){.resource = &CM,
                                                      .ns = "default",
                                                      .name = "a",
                                                      .patch_type = KCR_PATCH_MERGE,
                                                      .body = "{\"data\":{\"v\":\"2\"}}"},
                                       NULL);
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
    kcr_informer_options io = {.reflector.transform = gate_transform};
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

/* ---- read-your-writes after a CREATE ---- */

static atomic_int created_calls;
/* whether the second reconcile found "a-made" in the cache; -1 until it looked */
static atomic_int created_seen;

/* Holds back the informer's copy of "a-made" until the gate opens. */
static kcr_err gate_made(const kcr_object *in, kcr_object **out, void *ud)
{
    (void)ud;
    if (strcmp(kcr_object_name(in), "a-made") == 0)
        hold_at_gate();
    *out = kcr_object_ref(in);
    return KCR_OK;
}

/* The first reconcile of "a" creates "a-made" and asks to come back; the
 * second notes whether its cache has the object it created. */
static kcr_result create_reconcile(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    (void)ud;
    if (strcmp(req->name, "a") != 0)
        return KCR_DONE;
    int call = atomic_fetch_add(&created_calls, 1);
    if (call == 0) {
        kcr_err err = kcr_client_create(
            kcr_ctx_client(ctx),
            &(kcr_request){.resource = &CM,
                           .ns = "default",
                           .body = "{\"metadata\":{\"name\":\"a-made\"},\"data\":{\"v\":\"1\"}}"},
            NULL);
        return err == KCR_OK ? KCR_REQUEUE_AFTER(1) : KCR_RETRY(err);
    }
    kcr_object *made = kcr_lister_get(kcr_ctx_cache(ctx, &CM), "default", "a-made");
    if (call == 1)
        atomic_store(&created_seen, made != NULL ? 1 : 0);
    kcr_object_unref(made);
    return KCR_DONE;
}

Test(manager, read_your_writes_waits_for_a_created_object, .init = setup, .fini = teardown)
{
    atomic_store(&gate_open, false);
    atomic_store(&gate_blocked, 0);
    atomic_store(&created_calls, 0);
    atomic_store(&created_seen, -1);
    create_cm("a");
    kcr_informer_options io = {.reflector.transform = gate_made};
    new_manager(&(kcr_manager_options){.cache_defaults = &io});
    kcr_controller *c = NULL;
    kcr_controller_options o = {
        .name = "ryw-create", .primary = {.resource = CM}, .reconcile = create_reconcile};
    cr_assert_eq(kcr_manager_add_controller(mgr, &o, &c), KCR_OK);
    start();
    kcr_controller_stats st;
    WAIT_FOR((kcr_controller_get_stats(c, &st), st.ryw_waits == 1));
    WAIT_FOR(atomic_load(&gate_blocked) >= 1);
    cr_assert_eq(atomic_load(&created_calls), 1,
                 "the next reconcile waits until the cache has the object the last one created");
    atomic_store(&gate_open, true);
    /* the second reconcile counts itself before it looks: wait for its look */
    WAIT_FOR(atomic_load(&created_seen) >= 0);
    cr_assert_eq(atomic_load(&created_seen), 1, "the second reconcile sees the object it created");
    cr_assert_eq(stop(), KCR_OK);
    kcr_controller_get_stats(c, &st);
    cr_assert_eq(st.ryw_timeouts, 0);
}
