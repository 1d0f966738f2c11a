/* Reasons on the manager, pinned before they moved into the workqueue's
 * per-key record: an owned object moved from owner A to owner B enqueues
 * both as OWNED (controller-runtime's owner handler does the same for the
 * old and the new object), and a less important reason arriving after a
 * more important one joins the request's reasons set while the main reason
 * stays the most important. */
#include "tests/unit/manager_fixture.h"

static const kcr_resource SECRET = {"", "v1", "secrets"};

/* What the reconciles saw, in order. */
#define MAX_SEEN 64
static pthread_mutex_t seen_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char name[64];
    kcr_reason reason;
    uint32_t reasons;
} seen[MAX_SEEN];
static int n_seen;

static void note(const kcr_reconcile_request *req)
{
    pthread_mutex_lock(&seen_mu);
    if (n_seen < MAX_SEEN) {
        snprintf(seen[n_seen].name, sizeof seen[n_seen].name, "%s", req->name);
        seen[n_seen].reason = req->trigger.reason;
        seen[n_seen].reasons = req->reasons;
        n_seen++;
    }
    pthread_mutex_unlock(&seen_mu);
}

static void forget_seen(void)
{
    pthread_mutex_lock(&seen_mu);
    n_seen = 0;
    pthread_mutex_unlock(&seen_mu);
}

/* True once `name` was reconciled with `bit` among its reasons; copies the
 * first such record into *out. */
static bool saw(const char *name, uint32_t bit, kcr_reason *main_reason, uint32_t *reasons)
{
    bool found = false;
    pthread_mutex_lock(&seen_mu);
    for (int i = 0; i < n_seen && !found; i++)
        if (strcmp(seen[i].name, name) == 0 && (seen[i].reasons & bit)) {
            found = true;
            if (main_reason)
                *main_reason = seen[i].reason;
            if (reasons)
                *reasons = seen[i].reasons;
        }
    pthread_mutex_unlock(&seen_mu);
    return found;
}

static kcr_result noting_reconcile(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    (void)ctx, (void)ud;
    note(req);
    return KCR_DONE;
}

static char *uid_of(const char *name)
{
    kcr_object *o = NULL;
    cr_assert_eq(kcr_client_get(client, &(kcr_request){.resource = &CM, .ns = "default", .name = name}, &o), KCR_OK);
    char *uid = strdup(kcr_object_uid(o));
    kcr_object_unref(o);
    return uid;
}

static void secret_owned_by(const char *owner, const char *uid, bool create)
{
    char json[512];
    snprintf(json, sizeof json,
             "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"x\","
             "\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"name\":\"%s\","
             "\"uid\":\"%s\",\"controller\":true}]}}",
             owner, uid);
    kcr_request rq = {.resource = &SECRET, .ns = "default", .body = json};
    kcr_err err = create ? kcr_client_create(client, &rq, NULL) : kcr_client_update(client, &rq, NULL);
    cr_assert_eq(err, KCR_OK, "%s", kcr_last_error());
}

Test(manager_reasons, an_owner_change_enqueues_the_old_and_the_new_owner, .init = setup,
     .fini = teardown)
{
    create_cm("a");
    create_cm("b");
    char *uid_a = uid_of("a"), *uid_b = uid_of("b");
    new_manager(NULL);
    kcr_source owns = {.resource = SECRET};
    kcr_controller_options o = {.name = "owners",
                                .primary = {.resource = CM},
                                .owns = &owns,
                                .n_owns = 1,
                                .reconcile = noting_reconcile};
    cr_assert_eq(kcr_manager_add_controller(mgr, &o, NULL), KCR_OK, "%s", kcr_last_error());
    start();
    WAIT_FOR(saw("a", KCR_REASON_BIT(KCR_REASON_INITIAL_LIST), NULL, NULL) &&
             saw("b", KCR_REASON_BIT(KCR_REASON_INITIAL_LIST), NULL, NULL));
    secret_owned_by("a", uid_a, true);
    WAIT_FOR(saw("a", KCR_REASON_BIT(KCR_REASON_OWNED), NULL, NULL));
    forget_seen();

    secret_owned_by("b", uid_b, false); /* the controller reference moves from a to b */
    kcr_reason ra = KCR_REASON_NONE, rb = KCR_REASON_NONE;
    WAIT_FOR(saw("b", KCR_REASON_BIT(KCR_REASON_OWNED), &rb, NULL));
    WAIT_FOR(saw("a", KCR_REASON_BIT(KCR_REASON_OWNED), &ra, NULL));
    cr_assert_eq(rb, KCR_REASON_OWNED, "the new owner hears of its new object");
    cr_assert_eq(ra, KCR_REASON_OWNED, "the old owner hears that it lost the object");
    free(uid_a);
    free(uid_b);
    cr_assert_eq(stop(), KCR_OK);
}

/* ---- a less important reason after a more important one ---- */

static atomic_bool hold_open;
static atomic_int holds;

/* The first reconcile of "a" holds the key until hold_open, so reasons
 * arriving meanwhile coalesce for its next reconcile. */
static kcr_result holding_reconcile(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    (void)ctx, (void)ud;
    if (strcmp(req->name, "a") == 0 && atomic_fetch_add(&holds, 1) == 0) {
        int64_t until = kcr__now_ns() + test_ms(20000) * KCR_NS_PER_MS;
        while (!atomic_load(&hold_open) && kcr__now_ns() < until) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
        return KCR_DONE;
    }
    note(req);
    return KCR_DONE;
}

static void release_hold(void)
{
    atomic_store(&hold_open, true);
    teardown();
}

Test(manager_reasons, a_less_important_reason_joins_the_set_the_main_one_stays, .init = setup,
     .fini = release_hold)
{
    atomic_store(&hold_open, false);
    atomic_store(&holds, 0);
    create_cm("a");
    new_manager(NULL);
    kcr_controller *c = NULL;
    kcr_controller_options o = {
        .name = "coalesce", .primary = {.resource = CM}, .reconcile = holding_reconcile};
    cr_assert_eq(kcr_manager_add_controller(mgr, &o, &c), KCR_OK, "%s", kcr_last_error());
    start();
    WAIT_FOR(atomic_load(&holds) == 1); /* "a" is being processed */
    kcr_controller_stats st;
    kcr_controller_get_stats(c, &st);
    uint64_t before = st.enqueues;
    /* PRIMARY_UPDATED first (more important), then ENQUEUED (less) */
    cr_assert_eq(kcr_client_patch(client,
                                  &(kcr_request){.resource = &CM,
                                                 .ns = "default",
                                                 .name = "a",
                                                 .patch_type = KCR_PATCH_MERGE,
                                                 .body = "{\"data\":{\"v\":\"2\"}}"},
                                  NULL),
                 KCR_OK);
    WAIT_FOR((kcr_controller_get_stats(c, &st), st.enqueues > before));
    cr_assert_eq(kcr_controller_enqueue(c, "default", "a"), KCR_OK, "%s", kcr_last_error());
    atomic_store(&hold_open, true);

    kcr_reason main_reason = KCR_REASON_NONE;
    uint32_t reasons = 0;
    WAIT_FOR(saw("a", KCR_REASON_BIT(KCR_REASON_PRIMARY_UPDATED), &main_reason, &reasons));
    cr_assert_eq(main_reason, KCR_REASON_PRIMARY_UPDATED, "the most important reason leads");
    cr_assert(reasons & KCR_REASON_BIT(KCR_REASON_ENQUEUED),
              "the later, less important ENQUEUED is in the set (reasons 0x%x)", reasons);
    cr_assert_eq(stop(), KCR_OK);
}
