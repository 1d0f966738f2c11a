/* Where the manager routes events: inline on the shared informer's thread by
 * default, on a handler thread of the source's own with own_thread, so a
 * blocked predicate there delays no other controller of the same informer. */
#include "tests/unit/manager_fixture.h"

/* The slow controller's predicate blocks until the gate opens. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static bool gate_open;
static int blocked;
static pthread_t slow_thread, quick_thread;
static bool quick_ran;
static atomic_int slow_reconciles, quick_x, quick_y;

static kcr_err slow_pred(kcr_change change, const kcr_object *old_obj, const kcr_object *new_obj,
                         bool *pass, void *ud)
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

static kcr_err quick_pred(kcr_change change, const kcr_object *old_obj, const kcr_object *new_obj,
                          bool *pass, void *ud)
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
