/* Fixture for the manager tests (test_controller*.c): a fake API and a
 * client, one manager run on a thread, ConfigMap helpers, WAIT_FOR, and two
 * reconcilers several files use (copy_reconcile, slow_reconcile). */
#ifndef KCR_TEST_MANAGER_FIXTURE_H
#define KCR_TEST_MANAGER_FIXTURE_H

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "helpers/timescale.h"
#include "kcr/kcr.h"
#include "kcr/fake.h"
#include "helpers/bounded.h"

static const kcr_resource CM = {"", "v1", "configmaps"};

static kcr_fake *fake;
static kcr_client *client;
static kcr_manager *mgr;
static pthread_t runner;
static kcr_err run_result;
static bool running;

static inline void setup(void)
{
    cr_assert_eq(kcr_fake_new(NULL, &fake), KCR_OK);
    cr_assert_eq(kcr_fake_client(fake, "default", &client), KCR_OK);
}

static inline void *run_main(void *arg)
{
    (void)arg;
    run_result = kcr_manager_run(mgr);
    return NULL;
}

static inline void start(void)
{
    cr_assert_eq(pthread_create(&runner, NULL, run_main, NULL), 0);
    running = true;
}

static inline kcr_err stop(void)
{
    kcr_manager_stop(mgr);
    test_join(runner, 30000, "kcr_manager_run after kcr_manager_stop");
    running = false;
    return run_result;
}

static inline void teardown(void)
{
    if (running)
        stop();
    kcr_manager_free(mgr);
    mgr = NULL;
    kcr_client_free(client);
    kcr_fake_free(fake);
}

static inline void new_manager(const kcr_manager_options *o)
{
    cr_assert_eq(kcr_manager_new(client, o, &mgr), KCR_OK, "%s", kcr_last_error());
}

static inline void create_cm(const char *name)
{
    char json[256];
    snprintf(json, sizeof json, "{\"metadata\":{\"name\":\"%s\"},\"data\":{\"v\":\"1\"}}", name);
    cr_assert_eq(kcr_client_create(
                     client, &(kcr_request){.resource = &CM, .ns = "default", .body = json}, NULL),
                 KCR_OK, "%s", kcr_last_error());
}

/* Polls `cond` every millisecond for up to 10 s. */
#define WAIT_FOR(cond)                                                                             \
    do {                                                                                           \
        int64_t until_ = kcr__now_ns() + test_ms(10000) * KCR_NS_PER_MS;                          \
        while (!(cond) && kcr__now_ns() < until_) {                                                \
            struct timespec ts_ = {0, 1000000};                                                    \
            nanosleep(&ts_, NULL);                                                                 \
        }                                                                                          \
        cr_assert(cond, "timed out waiting for: %s", #cond);                                       \
    } while (0)

/* ---- a reconcile that copies a ConfigMap to <name>-copy ---- */

static atomic_int copies;

static inline kcr_result copy_reconcile(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    (void)ud;
    if (strstr(req->name, "-copy"))
        return KCR_DONE;
    kcr_object *p = kcr_ctx_get_primary(ctx);
    if (!p)
        return KCR_DONE;
    kcr_object_unref(p);
    char name[300], body[512];
    snprintf(name, sizeof name, "%s-copy", req->name);
    snprintf(body, sizeof body, "{\"metadata\":{\"name\":\"%s\"},\"data\":{\"v\":\"1\"}}", name);
    kcr_err err = kcr_client_patch(kcr_ctx_client(ctx),
                                   &(kcr_request){.resource = &CM,
                                                  .ns = req->ns,
                                                  .name = name,
                                                  .patch_type = KCR_PATCH_APPLY,
                                                  .body = body,
                                                  .field_manager = "t"},
                                   NULL);
    if (err != KCR_OK)
        return KCR_RETRY(err);
    atomic_fetch_add(&copies, 1);
    return KCR_DONE;
}

static inline bool exists(const char *name)
{
    kcr_object *o = NULL;
    kcr_err err =
        kcr_client_get(client, &(kcr_request){.resource = &CM, .ns = "default", .name = name}, &o);
    kcr_object_unref(o);
    return err == KCR_OK;
}

static atomic_int started, saw_cancel;
static atomic_bool release_gate;

/* Waits for cancellation or the gate (10 s at most), noting which came. */
static inline kcr_result slow_reconcile(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    (void)req, (void)ud;
    atomic_fetch_add(&started, 1);
    int64_t until = kcr__now_ns() + 10 * KCR_NS_PER_S;
    while (!kcr_ctx_canceled(ctx) && !atomic_load(&release_gate) && kcr__now_ns() < until) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    if (kcr_ctx_canceled(ctx)) {
        atomic_fetch_add(&saw_cancel, 1);
        return KCR_RETRY(KCR_ERR_CANCELED);
    }
    return KCR_DONE;
}

static inline kcr_controller *slow_controller(int64_t timeout_ms)
{
    atomic_store(&started, 0);
    atomic_store(&saw_cancel, 0);
    atomic_store(&release_gate, false);
    kcr_controller *c = NULL;
    kcr_controller_options o = {.name = "slow",
                                .primary = {.resource = CM},
                                .reconcile_timeout_ms = timeout_ms,
                                .reconcile = slow_reconcile};
    cr_assert_eq(kcr_manager_add_controller(mgr, &o, &c), KCR_OK);
    return c;
}

#endif
