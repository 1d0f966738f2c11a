/* Where the manager routes events: inline on the shared informer's thread by
 * default, on a handler thread of the source's own with own_thread, so a
 * blocked predicate there delays no other controller of the same informer. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "helpers/timescale.h"
#include "kcr/kcr.h"

static const kcr_resource CM = {"", "v1", "configmaps"};

static kcr_fake *fake;
static kcr_client *client;
static kcr_manager *mgr;
static pthread_t runner;
static kcr_err run_result;

/* Polls `cond` every millisecond for up to 10 s (scaled). */
#define WAIT_FOR(cond)                                                                             \
    do {                                                                                           \
        int64_t until_ = kcr__now_ns() + test_ms(10000) * KCR_NS_PER_MS;                           \
        while (!(cond) && kcr__now_ns() < until_) {                                                \
            struct timespec ts_ = {0, 1000000};                                                    \
            nanosleep(&ts_, NULL);                                                                 \
        }                                                                                          \
        cr_assert(cond, "timed out waiting for: %s", #cond);                                       \
    } while (0)

static void *run_main(void *arg)
{
    (void)arg;
    run_result = kcr_manager_run(mgr);
    return NULL;
}

static void create_cm(const char *name)
{
    char json[256];
    snprintf(json, sizeof json, "{\"metadata\":{\"name\":\"%s\"}}", name);
    cr_assert_eq(kcr_client_create(client, &CM, "default", json, 0, NULL, NULL, NULL), KCR_OK, "%s",
                 kcr_last_error());
}

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
    while (!gate_open)
        pthread_cond_wait(&cond, &mu);
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

static kcr_result slow_reconcile(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
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

static int blocked_now(void)
{
    pthread_mutex_lock(&mu);
    int n = blocked;
    pthread_mutex_unlock(&mu);
    return n;
}

Test(manager_routing, a_blocked_own_thread_predicate_delays_no_inline_controller)
{
    cr_assert_eq(kcr_fake_new(NULL, &fake), KCR_OK);
    cr_assert_eq(kcr_fake_client(fake, "default", &client), KCR_OK);
    cr_assert_eq(kcr_manager_new(client, NULL, &mgr), KCR_OK, "%s", kcr_last_error());
    kcr_controller_options slow = {.name = "slow",
                                   .primary = {.resource = CM,
                                               .own_thread = true,
                                               .predicate = kcr_predicate_custom(slow_pred, NULL)},
                                   .reconcile = slow_reconcile};
    kcr_controller_options quick = {
        .name = "quick",
        .primary = {.resource = CM, .predicate = kcr_predicate_custom(quick_pred, NULL)},
        .reconcile = quick_reconcile};
    cr_assert_eq(kcr_manager_add_controller(mgr, &slow, NULL), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_manager_add_controller(mgr, &quick, NULL), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(pthread_create(&runner, NULL, run_main, NULL), 0);
    WAIT_FOR(kcr_manager_readyz_check(NULL, mgr) == KCR_OK);

    create_cm("x");
    WAIT_FOR(blocked_now() == 1);
    WAIT_FOR(atomic_load(&quick_x) == 1);
    create_cm("y"); /* the same informer goes on past the blocked handler */
    WAIT_FOR(atomic_load(&quick_y) == 1);
    cr_assert_eq(blocked_now(), 1);
    cr_assert_eq(atomic_load(&slow_reconciles), 0);

    pthread_mutex_lock(&mu);
    cr_assert(quick_ran);
    cr_assert_not(pthread_equal(slow_thread, quick_thread),
                  "the inline routing ran on the own_thread source's handler thread");
    gate_open = true;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&mu);
    WAIT_FOR(atomic_load(&slow_reconciles) >= 2); /* x and y */

    kcr_manager_stop(mgr);
    pthread_join(runner, NULL);
    cr_assert_eq(run_result, KCR_OK, "%s", kcr_strerror(run_result));
    kcr_manager_free(mgr);
    kcr_client_free(client);
    kcr_fake_free(fake);
}
