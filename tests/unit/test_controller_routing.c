/* Where the manager routes events: inline on the shared informer's thread by
 * default, on a handler thread of the source's own with own_thread, so a
 * blocked predicate there delays no other controller of the same informer;
 * and what map functions and predicates get there: the controller's caches
 * through their kcr_source_ctx, the very functions the test kit runs. */
#include "tests/unit/manager_fixture.h"
#include "tests/unit/users_map.h"

/* The slow controller's predicate blocks until the gate opens. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static bool gate_open;
static int blocked;
static pthread_t slow_thread, quick_thread;
static bool quick_ran;
static atomic_int slow_reconciles, quick_x, quick_y;

static kcr_err slow_pred(kcr_source_ctx *ctx, const kcr_object_change *change, bool *pass, void *ud)
{
    pthread_mutex_lock(&mu);
    slow_thread = pthread_self();
    blocked++;
    /* bounded: a test that fails before opening the gate must not hang here */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 30;
    while (!gate_open && pthread_cond_timedwait(&cond, &mu, &until) == 0)
        ;
    blocked--;
    pthread_mutex_unlock(&mu);
    *pass = true;
    return KCR_OK;
}

static kcr_err quick_pred(kcr_source_ctx *ctx, const kcr_object_change *change, bool *pass,
                          void *ud)
{
    pthread_mutex_lock(&mu);
    quick_thread = pthread_self();
    quick_ran = true;
    pthread_mutex_unlock(&mu);
    *pass = true;
    return KCR_OK;
}

static kcr_result slow_pred_reconcile(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    atomic_fetch_add(&slow_reconciles, 1);
    return KCR_DONE;
}

static kcr_result quick_reconcile(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    if (strcmp(req->name, "x") == 0)
        atomic_fetch_add(&quick_x, 1);
    if (strcmp(req->name, "y") == 0)
        atomic_fetch_add(&quick_y, 1);
    return KCR_DONE;
}

/* Opens the gate, so no predicate still blocks the manager's stop. */
static void open_gate(void)
{
    pthread_mutex_lock(&mu);
    gate_open = true;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&mu);
}

static void routing_teardown(void)
{
    open_gate();
    teardown();
}

static int blocked_now(void)
{
    pthread_mutex_lock(&mu);
    int n = blocked;
    pthread_mutex_unlock(&mu);
    return n;
}

Test(manager_routing, a_blocked_own_thread_predicate_delays_no_inline_controller,
     .init = setup, .fini = routing_teardown)
{
    new_manager(NULL);
    kcr_controller_options slow = {.name = "slow",
                                   .primary = {.resource = CM,
                                               .own_thread = true,
                                               .predicate = kcr_predicate_custom(slow_pred, NULL)},
                                   .reconcile = slow_pred_reconcile};
    kcr_controller_options quick = {
        .name = "quick",
        .primary = {.resource = CM, .predicate = kcr_predicate_custom(quick_pred, NULL)},
        .reconcile = quick_reconcile};
    cr_assert_eq(kcr_manager_add_controller(mgr, &slow, NULL), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_manager_add_controller(mgr, &quick, NULL), KCR_OK, "%s", kcr_last_error());
    start();
    WAIT_FOR(kcr_manager_readyz_check(NULL, mgr) == KCR_OK);

    create_cm("x");
    WAIT_FOR(blocked_now() == 1);
    WAIT_FOR(atomic_load(&quick_x) == 1);
    create_cm("y"); /* the same informer goes on past the blocked handler */
    WAIT_FOR(atomic_load(&quick_y) == 1);
    cr_assert_eq(blocked_now(), 1);
    cr_assert_eq(atomic_load(&slow_reconciles), 0);

    pthread_mutex_lock(&mu); /* read under the lock, assert outside: the fini takes it */
    bool ran = quick_ran, same_thread = pthread_equal(slow_thread, quick_thread);
    pthread_mutex_unlock(&mu);
    cr_assert(ran);
    cr_assert_not(same_thread, "the inline routing ran on the own_thread source's handler thread");
    open_gate();
    WAIT_FOR(atomic_load(&slow_reconciles) >= 2); /* x and y */

    kcr_err err = stop();
    cr_assert_eq(err, KCR_OK, "%s", kcr_strerror(err));
}

static atomic_int mapped_app1, mapped_app2, mapped_other;

static kcr_result count_mapped(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    (void)ctx, (void)ud;
    if (!(req->reasons & KCR_REASON_BIT(KCR_REASON_MAPPED)))
        return KCR_DONE;
    atomic_fetch_add(strcmp(req->name, "app1") == 0   ? &mapped_app1
                     : strcmp(req->name, "app2") == 0 ? &mapped_app2
                                                      : &mapped_other,
                     1);
    return KCR_DONE;
}

static void create_labelled_cm(const char *name, const char *secret)
{
    char json[256];
    snprintf(json, sizeof json,
             "{\"metadata\":{\"name\":\"%s\",\"labels\":{\"secret\":\"%s\"}}}", name, secret);
    cr_assert_eq(kcr_client_create(
                     client, &(kcr_request){.resource = &CM, .ns = "default", .body = json}, NULL),
                 KCR_OK, "%s", kcr_last_error());
}

Test(manager_routing, map_functions_and_predicates_read_caches_through_their_context,
     .init = setup, .fini = teardown)
{
    new_manager(NULL);
    create_labelled_cm("app1", "db");
    create_labelled_cm("app2", "db");
    create_labelled_cm("app3", "other");
    kcr_source w;
    kcr_controller_options o = users_options(&w, count_mapped);
    kcr_controller *c = NULL;
    cr_assert_eq(kcr_manager_add_controller(mgr, &o, &c), KCR_OK, "%s", kcr_last_error());
    start();
    WAIT_FOR(kcr_manager_readyz_check(NULL, mgr) == KCR_OK);
    cr_assert_eq(kcr_client_create(client,
                                   &(kcr_request){.resource = &USERS_SECRET,
                                                  .ns = "default",
                                                  .body = "{\"metadata\":{\"name\":\"unused\"}}"},
                                   NULL),
                 KCR_OK);
    cr_assert_eq(kcr_client_create(client,
                                   &(kcr_request){.resource = &USERS_SECRET,
                                                  .ns = "default",
                                                  .body = "{\"metadata\":{\"name\":\"db\"}}"},
                                   NULL),
                 KCR_OK);
    WAIT_FOR(atomic_load(&mapped_app1) >= 1 && atomic_load(&mapped_app2) >= 1);
    kcr_controller_stats st;
    WAIT_FOR((kcr_controller_get_stats(c, &st), st.filtered == 1));
    cr_assert_eq(atomic_load(&mapped_app1), 1);
    cr_assert_eq(atomic_load(&mapped_app2), 1);
    cr_assert_eq(atomic_load(&mapped_other), 0);
    cr_assert_eq(atomic_load(&users_map_calls), 1, "the map ran for the used Secret only");
    int64_t now = kcr__wall_ns() / KCR_NS_PER_MS;
    cr_assert(llabs(atomic_load(&users_map_now_ms) - now) < 60000, "the manager's (real) clock");
    cr_assert_eq(stop(), KCR_OK);
}

/* Under the manager too (here on the fake): a resource discovery does not
 * know is named with the controller, the source and how to register it,
 * and a declared scope discovery contradicts is refused. */
Test(manager_routing, sources_are_checked_against_discovery, .init = setup, .fini = teardown)
{
    new_manager(NULL);
    kcr_source owns = {.resource = {"example.com", "v1", "widgets"}};
    kcr_controller_options o = {.name = "cms",
                                .primary = {.resource = CM},
                                .owns = &owns,
                                .n_owns = 1,
                                .reconcile = quick_reconcile};
    cr_assert_eq(kcr_manager_add_controller(mgr, &o, NULL), KCR_ERR_NOT_FOUND);
    const char *e = kcr_last_error();
    cr_assert(strstr(e, "controller \"cms\": owns[0] example.com/v1 widgets") &&
                  strstr(e, "kcr_fake_register()") && strstr(e, "CustomResourceDefinition"),
              "%s", e);
    static const kcr_resource NSS = {"", "v1", "namespaces"};
    o = (kcr_controller_options){.name = "teams",
                                 .primary = {.resource = NSS, .scope = KCR_SCOPE_NAMESPACED},
                                 .reconcile = quick_reconcile};
    cr_assert_eq(kcr_manager_add_controller(mgr, &o, NULL), KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "controller \"teams\": primary v1 namespaces: declared "
                                       "namespaced, but discovery says cluster-scoped"),
              "%s", kcr_last_error());
}
