/* A sharded manager (kcr_manager_options.sharding) on the fake API: two or
 * three managers in one process, one ring. Every key is reconciled by
 * exactly one of them (and never by two at once), a manager that stops
 * hands its keys to the others, a second replica with a live identity is
 * refused, a replica cut off from the API fences (its in-flight reconcile
 * is cancelled, /readyz says fenced) and comes back, a child's change runs
 * on the replica owning its controller owner, and server mode caches only
 * the shard's objects. Label mode: the coordinator labels every object,
 * each replica caches and reconciles only its own, an object moving to a
 * joiner is drained (its old owner's reconcile ends before the new owner's
 * starts), and a cut-off replica's objects move only after its Lease
 * expired. */
#include <inttypes.h>

#include "controller/manager_internal.h"
#include "helpers/promtool.h"
#include "tests/unit/manager_fixture.h"

#define N_KEYS 48
#define CM_OBJECTS "kcr_cache_objects{resource=\"configmaps\",group=\"\",namespace=\"\"}"
#define SECRET_OBJECTS "kcr_cache_objects{resource=\"secrets\",group=\"\",namespace=\"\"}"
#define SECRET_FILTERED                                                                            \
    "kcr_cache_shard_filtered_total{resource=\"secrets\",group=\"\",namespace=\"\"}"
#define MAX_R 3

static const kcr_resource SECRET = {"", "v1", "secrets"};
static const kcr_resource LEASES = {"coordination.k8s.io", "v1", "leases"};

typedef struct replica {
    kcr_client *client;
    kcr_manager *m;
    pthread_t thread;
    bool running;
    kcr_err result;
    char identity[32];
} replica;

static replica reps[MAX_R];

/* Per key: reconciles running now, and per replica how many ran. */
static atomic_int running_now[N_KEYS];
static atomic_int by[N_KEYS][MAX_R];
static atomic_int overlaps, wrong_info, owned_by_child[N_KEYS][MAX_R];
/* The unsharded controller's reconciles, per key and replica. */
static atomic_int everywhere[N_KEYS][MAX_R], unsharded_with_info;
/* The first reconcile of "block" waits for its cancel (the fence tests). */
static atomic_int blocking, saw_cancel;
/* Label mode: while slow_ms is set every reconcile of a key lasts until its
 * object (in the replica's cache) carries the drain label while still
 * labelled with the replica, or slow_ms pass, or slow_ms is cleared:
 * drained_running counts reconciles that saw the drain label on their own
 * object (the drain came while they ran, and the object had not moved yet).
 * Ending at the drain, not after a fixed time, keeps the moving keys in
 * flight however long the join takes on a busy machine. */
static atomic_int slow_ms, drained_running;
/* Reconciles of a ConfigMap key that found no primary object in the cache:
 * none is ever deleted in these tests, so each would be a moved object
 * taken for a deleted one. */
static atomic_int missing_primary;
/* While check_children is set, reconciles of a key whose Secret exists
 * that did not find it in the controller's Secret cache. */
static atomic_int check_children, missing_child;
static atomic_int children_made; /* create_children ran: s-<i> exists */
/* While write_children is set, each reconcile of cm-<i> writes its Secret
 * s-<i> through kcr_ctrlutil_create_or_update (the controller reference,
 * and so the bucket label); write_errors counts the failures. */
static atomic_int write_children, write_errors;
static bool buckets_opt; /* kcr_sharding_options.child_bucket_selector */
static kcr_shard_label_keys label_keys_opt;
static int workers_opt = 4; /* each replica's max_concurrent_reconciles */
static int64_t retry_opt_ms;  /* 0: shard_opts' short timings; else this retry period */
static int64_t restart_grace_opt_ms; /* kcr_sharding_options.restart_grace_ms */
#define SHARD_LABEL "shard.kcr.dev/ring"
#define DRAIN_LABEL "drain.kcr.dev/ring"

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static int key_index(const kcr_reconcile_request *req)
{
    int i = -1;
    return sscanf(req->name, "cm-%d", &i) == 1 && i >= 0 && i < N_KEYS ? i : -1;
}

static kcr_err own_child(kcr_object_edit *e, const kcr_object *current, void *ud)
{
    (void)current;
    return kcr_ctrlutil_set_controller_reference_edit(ud, e, NULL);
}

/* Makes Secret s-<i> controlled by `cm` (from the owned cache when there). */
static kcr_err write_child(kcr_ctx *ctx, const kcr_object *cm, int i)
{
    char name[16];
    snprintf(name, sizeof name, "s-%02d", i);
    return kcr_ctrlutil_create_or_update(kcr_ctx_client(ctx),
                                         &(kcr_ctrlutil_write_options){
                                             .resource = &SECRET,
                                             .ns = "default",
                                             .name = name,
                                             .mutate = own_child,
                                             .user_data = (void *)cm,
                                             .cache = kcr_ctx_cache(ctx, &SECRET)},
                                         NULL);
}

static kcr_result note(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    int r = (int)(intptr_t)ud;
    const kcr_shard_member_info *sh = kcr_ctx_shard(ctx);
    if (!sh || strcmp(sh->identity, reps[r].identity) != 0 || strcmp(sh->ring, "ring") != 0 ||
        sh->slot < 0)
        atomic_fetch_add(&wrong_info, 1);
    if (strcmp(req->name, "block") == 0 && !atomic_load(&saw_cancel)) { /* blocks once */
        atomic_store(&blocking, 1);
        while (!kcr_ctx_canceled(ctx)) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
        atomic_store(&saw_cancel, 1);
        return KCR_REQUEUE;
    }
    int i = key_index(req);
    if (i < 0)
        return KCR_DONE;
    kcr_object *primary = kcr_ctx_get_primary(ctx);
    if (!primary)
        atomic_fetch_add(&missing_primary, 1);
    if (primary && atomic_load(&write_children) && write_child(ctx, primary, i) != KCR_OK)
        atomic_fetch_add(&write_errors, 1);
    kcr_object_unref(primary);
    if (atomic_load(&check_children) && atomic_load(&children_made)) {
        char child[32];
        snprintf(child, sizeof child, "default/s-%02d", i);
        kcr_object *o = kcr_store_get_by_key(kcr_ctx_cache(ctx, &SECRET), child);
        if (!o)
            atomic_fetch_add(&missing_child, 1);
        kcr_object_unref(o);
    }
    if (atomic_fetch_add(&running_now[i], 1) != 0)
        atomic_fetch_add(&overlaps, 1);
    struct timespec ts = {0, 2000000}; /* long enough for an overlap to show */
    nanosleep(&ts, NULL);
    int slow = atomic_load(&slow_ms);
    if (slow) {
        char key[32];
        snprintf(key, sizeof key, "default/%s", req->name);
        int64_t until = kcr__now_ns() + slow * KCR_NS_PER_MS;
        while (atomic_load(&slow_ms) && kcr__now_ns() < until) {
            kcr_object *now = kcr_store_get_by_key(kcr_ctx_cache(ctx, &CM), key);
            const char *owner = now ? kcr_object_label(now, SHARD_LABEL) : NULL;
            bool drained = now && kcr_object_label(now, DRAIN_LABEL) && owner &&
                           strcmp(owner, reps[r].identity) == 0;
            kcr_object_unref(now);
            if (drained) {
                atomic_fetch_add(&drained_running, 1);
                break;
            }
            sleep_ms(10);
        }
    }
    atomic_fetch_add(&by[i][r], 1);
    if (req->trigger.reason == KCR_REASON_OWNED)
        atomic_fetch_add(&owned_by_child[i][r], 1);
    atomic_fetch_sub(&running_now[i], 1);
    return KCR_DONE;
}

static void *replica_main(void *arg)
{
    replica *rp = arg;
    rp->result = kcr_manager_run(rp->m);
    return NULL;
}

static kcr_sharding_options shard_opts(kcr_shard_mode mode, const char *identity)
{
    if (retry_opt_ms)
        return (kcr_sharding_options){.mode = mode,
                                      .ring = "ring",
                                      .identity = identity,
                                      .lease_duration_ms = 3 * retry_opt_ms,
                                      .renew_deadline_ms = 2 * retry_opt_ms,
                                      .retry_period_ms = retry_opt_ms,
                                      .skew_margin_ms = test_ms(200),
                                      .label_keys = label_keys_opt,
                                      .child_bucket_selector = buckets_opt,
                                      .restart_grace_ms = restart_grace_opt_ms};
    return (kcr_sharding_options){.mode = mode,
                                  .ring = "ring",
                                  .identity = identity,
                                  .lease_duration_ms = test_ms(1500),
                                  .renew_deadline_ms = test_ms(1000),
                                  .retry_period_ms = test_ms(200),
                                  .skew_margin_ms = test_ms(200),
                                  .label_keys = label_keys_opt,
                                  .child_bucket_selector = buckets_opt,
                                  .restart_grace_ms = restart_grace_opt_ms};
}

/* Makes replica r (identity "rep-<r>" unless given) with one controller on
 * ConfigMaps owning Secrets. */
static void replica_new(int r, kcr_shard_mode mode, const char *identity)
{
    replica *rp = &reps[r];
    snprintf(rp->identity, sizeof rp->identity, "%s", identity ? identity : "");
    if (!identity)
        snprintf(rp->identity, sizeof rp->identity, "rep-%d", r);
    cr_assert_eq(kcr_fake_client(fake, "default", &rp->client), KCR_OK);
    kcr_sharding_options so = shard_opts(mode, rp->identity);
    kcr_manager_options mo = {.name = "sharded", .no_events = true, .sharding = &so};
    cr_assert_eq(kcr_manager_new(rp->client, &mo, &rp->m), KCR_OK, "%s", kcr_last_error());
    kcr_source owns = {.resource = SECRET};
    kcr_controller_options o = {.name = "c",
                                .primary = {.resource = CM},
                                .owns = &owns,
                                .n_owns = 1,
                                .max_concurrent_reconciles = workers_opt,
                                .reconcile = note,
                                .user_data = (void *)(intptr_t)r};
    cr_assert_eq(kcr_manager_add_controller(rp->m, &o, NULL), KCR_OK, "%s", kcr_last_error());
}

static void replica_start(int r)
{
    cr_assert_eq(pthread_create(&reps[r].thread, NULL, replica_main, &reps[r]), 0);
    reps[r].running = true;
}

static kcr_err replica_stop(int r)
{
    kcr_manager_stop(reps[r].m);
    test_join(reps[r].thread, 30000, "a sharded kcr_manager_run after kcr_manager_stop");
    reps[r].running = false;
    return reps[r].result;
}

static void replicas_teardown(void)
{
    for (int r = 0; r < MAX_R; r++) {
        if (reps[r].running)
            replica_stop(r);
        kcr_manager_free(reps[r].m);
        kcr_client_free(reps[r].client);
        memset(&reps[r], 0, sizeof reps[r]);
    }
    memset(by, 0, sizeof by);
    memset(owned_by_child, 0, sizeof owned_by_child);
    memset(everywhere, 0, sizeof everywhere);
    memset(running_now, 0, sizeof running_now);
    atomic_store(&overlaps, 0);
    atomic_store(&wrong_info, 0);
    atomic_store(&slow_ms, 0);
    atomic_store(&drained_running, 0);
    atomic_store(&missing_primary, 0);
    atomic_store(&check_children, 0);
    atomic_store(&missing_child, 0);
    atomic_store(&children_made, 0);
    atomic_store(&write_children, 0);
    atomic_store(&write_errors, 0);
    buckets_opt = false;
    label_keys_opt = KCR_SHARD_LABELS_KCR;
    workers_opt = 4;
    retry_opt_ms = 0;
    restart_grace_opt_ms = 0;
    teardown();
}

static void seed(void)
{
    for (int i = 0; i < N_KEYS; i++) {
        char name[16];
        snprintf(name, sizeof name, "cm-%02d", i);
        create_cm(name);
    }
}

/* Merge-patches <prefix>-<i> of res with `patch`, for every key. */
static void patch_each(const kcr_resource *res, const char *prefix, const char *patch)
{
    for (int i = 0; i < N_KEYS; i++) {
        char name[16];
        snprintf(name, sizeof name, "%s-%02d", prefix, i);
        cr_assert_eq(kcr_client_patch(client,
                                      &(kcr_request){.resource = res,
                                                     .ns = "default",
                                                     .name = name,
                                                     .patch_type = KCR_PATCH_MERGE,
                                                     .body = patch},
                                      NULL),
                     KCR_OK, "%s", kcr_last_error());
    }
}

/* Patches every ConfigMap, so each key is reconciled once more. */
static void touch_all(int round)
{
    char patch[64];
    snprintf(patch, sizeof patch, "{\"data\":{\"v\":\"r%d\"}}", round);
    patch_each(&CM, "cm", patch);
}

/* A metric's value in m's registry (-1 when absent). */
static double metric(kcr_manager *m, const char *series)
{
    char *text = NULL;
    cr_assert_eq(kcr_metrics_write_text(kcr_manager_metrics(m), &text, NULL), KCR_OK);
    if (getenv("DUMP_METRICS"))
        fprintf(stderr, "%s\n", text);
    const char *at = strstr(text, series);
    double v = -1;
    if (at)
        sscanf(at + strlen(series), " %lf", &v);
    free(text);
    return v;
}

static bool active(int r)
{
    return kcr_manager_shard_readyz_check(NULL, reps[r].m) == KCR_OK;
}

/* Every listed replica active, and their admitted ranges hold every key
 * exactly once between them (no range in two, none in none). */
static bool partitioned(const int *rs, int n)
{
    double sum = 0;
    for (int k = 0; k < n; k++) {
        if (!active(rs[k]))
            return false;
        double owned = metric(reps[rs[k]].m, "kcr_shard_owned_objects{controller=\"c\"}");
        if (owned <= 0)
            return false;
        sum += owned;
    }
    return sum == N_KEYS &&
           metric(reps[rs[0]].m, "kcr_shard_unowned_objects{ring=\"ring\"}") == 0;
}

/* partitioned(), and still so with the same shares a few steps later: a
 * ring change seen by some replicas only can partition the keys for a
 * moment (a joiner took what one replica gave and not yet what another
 * will give). */
static bool settled(const int *rs, int n)
{
    double before[MAX_R];
    if (!partitioned(rs, n))
        return false;
    for (int k = 0; k < n; k++)
        before[k] = metric(reps[rs[k]].m, "kcr_shard_owned_objects{controller=\"c\"}");
    int64_t ms = test_ms(800);
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
    for (int k = 0; k < n; k++)
        if (metric(reps[rs[k]].m, "kcr_shard_owned_objects{controller=\"c\"}") != before[k])
            return false;
    return partitioned(rs, n);
}

/* Starts replicas 0 and 1 in `mode` and waits until their ring settled. */
static void start_two(kcr_shard_mode mode)
{
    for (int r = 0; r < 2; r++) {
        replica_new(r, mode, NULL);
        replica_start(r);
    }
    int two[] = {0, 1};
    WAIT_FOR(settled(two, 2));
}

static void clear_counts(void)
{
    memset(by, 0, sizeof by);
}

/* Every key reconciled at least once since clear_counts, each by one replica only. */
static bool each_once(void)
{
    for (int i = 0; i < N_KEYS; i++) {
        int who = 0;
        for (int r = 0; r < MAX_R; r++)
            who += atomic_load(&by[i][r]) > 0;
        if (who != 1)
            return false;
    }
    return true;
}

static int keys_of(int r)
{
    int n = 0;
    for (int i = 0; i < N_KEYS; i++)
        n += atomic_load(&by[i][r]) > 0;
    return n;
}

Test(shard_controller, every_key_on_exactly_one_replica, .init = setup, .fini = replicas_teardown,
     .timeout = 120)
{
    seed();
    for (int r = 0; r < 3; r++) {
        replica_new(r, KCR_SHARD_FILTER, NULL);
        replica_start(r);
    }
    int all[] = {0, 1, 2};
    WAIT_FOR(settled(all, 3));
    clear_counts();
    touch_all(1);
    WAIT_FOR(each_once());
    struct timespec ts = {0, 200000000}; /* a late duplicate would show by now */
    nanosleep(&ts, NULL);
    cr_assert(each_once(), "a key was reconciled by two replicas");
    for (int r = 0; r < 3; r++) {
        cr_expect_gt(keys_of(r), 0, "replica %d reconciled nothing", r);
        char series[96];
        snprintf(series, sizeof series, "kcr_shard_state{ring=\"ring\",identity=\"rep-%d\"}", r);
        cr_expect_eq(metric(reps[r].m, series), 2, "replica %d is active", r);
        /* one clock for all: no Lease renewed further ahead than the write's own delay */
        double skew = metric(reps[r].m, "kcr_shard_clock_skew_seconds{ring=\"ring\"}");
        cr_expect(skew >= 0 && skew < 0.05, "replica %d: clock skew %g s", r, skew);
        cr_expect_eq(metric(reps[r].m, "kcr_shard_uncovered_ratio{ring=\"ring\"}"), 0,
                     "replica %d: a settled ring covers the whole hash space", r);
    }
    cr_expect_eq(atomic_load(&overlaps), 0, "no key ran on two replicas at once");
    cr_expect_eq(atomic_load(&wrong_info), 0, "kcr_ctx_shard named the replica");
    char *msg = NULL;
    cr_assert_eq(kcr_manager_shard_readyz_check(&msg, reps[0].m), KCR_OK);
    cr_expect(strstr(msg, "rep-0 active") && strstr(msg, "admitted ["), "%s", msg);
    free(msg);
    char *text = NULL; /* the kcr_shard_* series, as Prometheus reads them */
    cr_assert_eq(kcr_metrics_write_text(kcr_manager_metrics(reps[0].m), &text, NULL), KCR_OK);
    cr_expect(strstr(text, "kcr_shard_uncovered_ratio") != NULL);
    promtool_check(text);
    free(text);
}

Test(shard_controller, a_stopping_replica_hands_its_keys_over, .init = setup,
     .fini = replicas_teardown, .timeout = 120)
{
    seed();
    for (int r = 0; r < 3; r++) {
        replica_new(r, KCR_SHARD_FILTER, NULL);
        replica_start(r);
    }
    int all[] = {0, 1, 2}, two[] = {0, 1};
    WAIT_FOR(settled(all, 3));
    int64_t t0 = kcr__now_ns();
    cr_assert_eq(replica_stop(2), KCR_OK, "%s", kcr_last_error());
    /* it released its Lease: the others take its keys within steps, not
     * after a lease duration */
    WAIT_FOR(partitioned(two, 2));
    cr_log_info("graceful hand-over: %.3f s from kcr_manager_stop to the keys partitioned "
                "again (retry period %.1f s, lease %.1f s)",
                (double)(kcr__now_ns() - t0) / 1e9, (double)test_ms(200) / 1000,
                (double)test_ms(1500) / 1000);
    WAIT_FOR(settled(two, 2));
    clear_counts();
    touch_all(2);
    WAIT_FOR(each_once());
    cr_expect_eq(keys_of(2), 0, "the stopped replica reconciled nothing");
    cr_expect_eq(keys_of(0) + keys_of(1), N_KEYS);
    cr_expect_eq(atomic_load(&overlaps), 0);
    kcr_object *lease = NULL;
    cr_assert_eq(kcr_client_get(client,
                                &(kcr_request){.resource = &LEASES,
                                               .ns = "default",
                                               .name = "ring-rep-2"},
                                &lease),
                 KCR_OK);
    kcr_object_unref(lease);
}

/* The watch of the ring's Leases wakes a member when another releases its
 * Lease, and again when its own claim is published: the keys move within
 * a few requests, not at the retry periods. Without the watch the move
 * takes at least a quarter of a retry period (the pause between a claim
 * and its confirmation) and up to one and a quarter. */
Test(shard_controller, a_released_lease_is_taken_over_before_the_next_retry_period,
     .init = setup, .fini = replicas_teardown, .timeout = 120)
{
    retry_opt_ms = test_ms(4000);
    seed();
    for (int r = 0; r < 2; r++) {
        replica_new(r, KCR_SHARD_FILTER, NULL);
        replica_start(r);
    }
    int two[] = {0, 1}, one[] = {0};
    WAIT_FOR(settled(two, 2));
    int64_t t0 = kcr__now_ns();
    kcr_manager_stop(reps[1].m);
    WAIT_FOR(partitioned(one, 1));
    double took_ms = (double)(kcr__now_ns() - t0) / 1e6;
    cr_log_info("released Lease taken over in %.0f ms (retry period %lld ms)", took_ms,
                (long long)retry_opt_ms);
    cr_assert_lt(took_ms, (double)retry_opt_ms / 4,
                 "the keys moved after %.0f ms: the member waited for its retry period",
                 took_ms);
    cr_assert_eq(replica_stop(1), KCR_OK, "%s", kcr_last_error());
    clear_counts();
    touch_all(1);
    WAIT_FOR(each_once());
    cr_expect_eq(keys_of(0), N_KEYS);
    cr_expect_eq(atomic_load(&overlaps), 0);
}

Test(shard_controller, a_live_duplicate_identity_is_refused, .init = setup,
     .fini = replicas_teardown, .timeout = 120)
{
    replica_new(0, KCR_SHARD_FILTER, "same");
    replica_start(0);
    WAIT_FOR(active(0));
    replica_new(1, KCR_SHARD_FILTER, "same");
    replica_start(1);
    test_join(reps[1].thread, 30000, "the duplicate's kcr_manager_run");
    reps[1].running = false;
    cr_assert_eq(reps[1].result, KCR_ERR_EXISTS);
    char *why = NULL;
    cr_assert_neq(kcr_manager_shard_readyz_check(&why, reps[1].m), KCR_OK);
    cr_expect(strstr(why, "held by instance \"same_") && strstr(why, "refused"), "%s", why);
    free(why);
    cr_expect(active(0), "the first replica keeps running");
}

Test(shard_controller, a_replica_cut_off_fences_and_comes_back, .init = setup,
     .fini = replicas_teardown, .timeout = 120)
{
    create_cm("block");
    replica_new(0, KCR_SHARD_FILTER, NULL);
    replica_start(0);
    WAIT_FOR(atomic_load(&blocking) == 1);
    cr_assert_eq(kcr_fake_inject_error(fake, &(kcr_fake_error){.resource = &LEASES,
                                                               .times = -1,
                                                               .code = 500,
                                                               .reason = "InternalError",
                                                               .message = "etcd is gone"}),
                 KCR_OK);
    int64_t cut = kcr__now_ns();
    WAIT_FOR(atomic_load(&saw_cancel) == 1);
    cr_log_info("Lease requests failing: the reconcile was cancelled %.3f s after the cut "
                "(renew deadline %.1f s, lease %.1f s)",
                (double)(kcr__now_ns() - cut) / 1e9, (double)test_ms(1000) / 1000,
                (double)test_ms(1500) / 1000);
    /* the fence comes at the renew deadline: before anyone could take over */
    cr_expect_lt(kcr__now_ns() - cut, test_ms(1500) * KCR_NS_PER_MS,
                 "cancelled before the lease could expire");
    char *why = NULL;
    cr_assert_neq(kcr_manager_shard_readyz_check(&why, reps[0].m), KCR_OK);
    cr_expect(strstr(why, "fenced") != NULL, "%s", why);
    free(why);
    cr_expect_eq(metric(reps[0].m, "kcr_shard_state{ring=\"ring\",identity=\"rep-0\"}"), 3);
    kcr_fake_clear_errors(fake);
    WAIT_FOR(active(0));
}

/* ConfigMap cm-<i> from the fake API (a new reference). */
static kcr_object *get_cm(int i)
{
    char name[16];
    snprintf(name, sizeof name, "cm-%02d", i);
    kcr_object *cm = NULL;
    cr_assert_eq(kcr_client_get(client,
                                &(kcr_request){.resource = &CM, .ns = "default", .name = name},
                                &cm),
                 KCR_OK);
    return cm;
}

/* Creates Secret s-<i> controlled by ConfigMap cm-<i>, for every key:
 * stamped, through kcr_ctrlutil_set_controller_reference (with the bucket
 * label), or not, with the reference written by hand (as another tool, or
 * a kcr before the label, would). */
static void create_children_as(bool stamped)
{
    for (int i = 0; i < N_KEYS; i++) {
        char json[512];
        kcr_object *cm = get_cm(i);
        kcr_object *child = NULL;
        if (stamped) {
            snprintf(json, sizeof json,
                     "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":"
                     "\"s-%02d\",\"namespace\":\"default\"}}",
                     i);
            kcr_object *bare = NULL;
            cr_assert_eq(kcr_object_parse(json, 0, &bare), KCR_OK);
            cr_assert_eq(kcr_ctrlutil_set_controller_reference(cm, bare, NULL, &child), KCR_OK,
                         "%s", kcr_last_error());
            kcr_object_unref(bare);
        } else {
            snprintf(json, sizeof json,
                     "{\"metadata\":{\"name\":\"s-%02d\",\"ownerReferences\":[{\"apiVersion\":"
                     "\"v1\",\"kind\":\"ConfigMap\",\"name\":\"%s\",\"uid\":\"%s\","
                     "\"controller\":true}]}}",
                     i, kcr_object_name(cm), kcr_object_uid(cm));
        }
        kcr_object_unref(cm);
        cr_assert_eq(kcr_client_create(client,
                                       &(kcr_request){.resource = &SECRET,
                                                      .ns = "default",
                                                      .object = child,
                                                      .body = child ? NULL : json},
                                       NULL),
                     KCR_OK, "%s", kcr_last_error());
        kcr_object_unref(child);
    }
    atomic_store(&children_made, 1);
}

static void create_children(void)
{
    create_children_as(false);
}

/* How many keys had a reconcile triggered by their child. */
static int children_ran(void)
{
    int n = 0;
    for (int i = 0; i < N_KEYS; i++)
        n += atomic_load(&owned_by_child[i][0]) + atomic_load(&owned_by_child[i][1]) > 0;
    return n;
}

/* The fake's hook: while `hang` is set, every Lease request blocks (a
 * server that accepted the connection and never answers). */
static atomic_int hang, hung;

static void hang_leases(kcr_fake_verb verb, const kcr_resource *res, const char *ns,
                        const char *name, void *ud)
{
    (void)verb, (void)ns, (void)name, (void)ud;
    if (strcmp(res->resource, "leases") != 0)
        return;
    while (atomic_load(&hang)) {
        atomic_store(&hung, 1);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

Test(shard_controller, a_hung_lease_request_does_not_delay_the_fence, .init = setup,
     .fini = replicas_teardown, .timeout = 120)
{
    create_cm("block");
    kcr_fake_set_hook(fake, hang_leases, NULL);
    replica_new(0, KCR_SHARD_FILTER, NULL);
    replica_start(0);
    WAIT_FOR(atomic_load(&blocking) == 1);
    atomic_store(&hang, 1);
    int64_t cut = kcr__now_ns();
    WAIT_FOR(atomic_load(&saw_cancel) == 1);
    cr_expect_eq(atomic_load(&hung), 1, "a Lease request hung");
    cr_log_info("hung Lease requests: the reconcile was cancelled %.3f s after the hang "
                "(renew deadline %.1f s, lease %.1f s)",
                (double)(kcr__now_ns() - cut) / 1e9, (double)test_ms(1000) / 1000,
                (double)test_ms(1500) / 1000);
    /* the member's thread gave up on the request at the fence time: the
     * reconcile was cancelled before the Lease could expire elsewhere */
    cr_expect_lt(kcr__now_ns() - cut, test_ms(1500) * KCR_NS_PER_MS,
                 "cancelled before the lease could expire");
    char *why = NULL;
    cr_assert_neq(kcr_manager_shard_readyz_check(&why, reps[0].m), KCR_OK);
    cr_expect(strstr(why, "fenced") != NULL, "%s", why);
    free(why);
    atomic_store(&hang, 0); /* the server answers again */
    WAIT_FOR(active(0));
}

Test(shard_controller, a_child_runs_on_its_owners_replica, .init = setup,
     .fini = replicas_teardown, .timeout = 120)
{
    seed();
    start_two(KCR_SHARD_FILTER);
    clear_counts();
    touch_all(3);
    WAIT_FOR(each_once());
    /* a Secret controlled by each ConfigMap: its change runs on the replica
     * that owns the ConfigMap's hash (the owner's key, the owner's uid) */
    create_children();
    WAIT_FOR(children_ran() == N_KEYS);
    for (int i = 0; i < N_KEYS; i++)
        for (int r = 0; r < 2; r++)
            if (atomic_load(&owned_by_child[i][r]))
                cr_expect(atomic_load(&by[i][r]) > 0 && atomic_load(&by[i][1 - r]) == 0,
                          "cm-%02d: its child ran on replica %d, not its owner's", i, r);
    cr_expect_eq(atomic_load(&overlaps), 0);
}

/* The keys and two Secrets without a controller (free-0, free-1). */
static void seed_with_free_secrets(void)
{
    seed();
    for (int i = 0; i < 2; i++) {
        char json[128];
        snprintf(json, sizeof json, "{\"metadata\":{\"name\":\"free-%d\"}}", i);
        cr_assert_eq(kcr_client_create(client,
                                       &(kcr_request){.resource = &SECRET,
                                                      .ns = "default",
                                                      .body = json},
                                       NULL),
                     KCR_OK);
    }
}

/* Starts two filter-mode replicas and reconciles every key once; returns
 * how many keys replica 1 owns (both own some). */
static int start_two_owning_keys(void)
{
    start_two(KCR_SHARD_FILTER);
    clear_counts();
    touch_all(5);
    WAIT_FOR(each_once());
    int of1 = keys_of(1);
    cr_assert(of1 > 0 && keys_of(0) > 0, "both replicas own keys");
    return of1;
}

/* Owned caches follow their owners' shard, in filter mode too: the two
 * replicas' Secret caches split the children (Secrets without a controller
 * are on both), and when one replica leaves, the other's Secret cache grows
 * to every child before a reconcile of a gained key starts: none of them
 * misses its Secret (it would without admission waiting for the relist). */
Test(shard_controller, owned_caches_hold_only_their_owners_children, .init = setup,
     .fini = replicas_teardown, .timeout = 120)
{
    seed_with_free_secrets();
    int of1 = start_two_owning_keys();
    create_children();
    WAIT_FOR(children_ran() == N_KEYS);
    WAIT_FOR(metric(reps[0].m, SECRET_OBJECTS) + metric(reps[1].m, SECRET_OBJECTS) == N_KEYS + 4);
    cr_expect_eq(metric(reps[0].m, SECRET_OBJECTS), N_KEYS - of1 + 2,
                 "replica 0: its owners' children and the two without a controller");
    cr_expect_eq(metric(reps[1].m, SECRET_OBJECTS), of1 + 2);

    clear_counts();
    atomic_store(&check_children, 1);
    cr_assert_eq(replica_stop(1), KCR_OK);
    WAIT_FOR(keys_of(0) >= of1); /* replica 1's keys, reconciled once gained */
    cr_expect_eq(metric(reps[0].m, SECRET_OBJECTS), N_KEYS + 2);
    cr_expect_eq(atomic_load(&missing_child), 0,
                 "a gained key's reconcile read the Secret cache before it held the key's child");
    cr_expect_eq(atomic_load(&overlaps), 0);
}

/* The bucket of cm-<i>'s uid (its children's bucket label). */
static unsigned cm_bucket(int i)
{
    kcr_object *cm = get_cm(i);
    unsigned b = kcr_shard_bucket(kcr_shard_hash(kcr_object_uid(cm), strlen(kcr_object_uid(cm))));
    kcr_object_unref(cm);
    return b;
}

/* With child_bucket_selector the owned caches ask the apiserver for their
 * owners' buckets: each replica's Secret cache RECEIVES only its owners'
 * children and the other replica's in the one bucket both ranges touch
 * (two slots meet at 2^63 + 1, the ring's rounding, inside bucket 128),
 * which the reflector's controller filter drops (without the bucket
 * selector each would receive all 48 children and drop the other's), the
 * Secrets without a controller reach neither, and when one replica leaves
 * the other's label selector grows with its ranges, so the children of
 * the keys it gained arrive before their reconciles start. */
Test(shard_controller, owned_caches_receive_only_their_buckets, .init = setup,
     .fini = replicas_teardown, .timeout = 120)
{
    seed_with_free_secrets();
    buckets_opt = true;
    int of1 = start_two_owning_keys();
    double before[2] = {metric(reps[0].m, SECRET_FILTERED), metric(reps[1].m, SECRET_FILTERED)};
    const uint64_t boundary = UINT64_C(0x8000000000000001); /* slot 1's first hash */
    create_children_as(true);
    WAIT_FOR(children_ran() == N_KEYS);
    WAIT_FOR(metric(reps[0].m, SECRET_OBJECTS) + metric(reps[1].m, SECRET_OBJECTS) >= N_KEYS);
    cr_expect_eq(metric(reps[0].m, SECRET_OBJECTS), N_KEYS - of1, "replica 0: its owners' children");
    cr_expect_eq(metric(reps[1].m, SECRET_OBJECTS), of1);
    for (int r = 0; r < 2; r++) {
        double dropped = metric(reps[r].m, SECRET_FILTERED) - before[r];
        int shared = 0; /* the other replica's children in the bucket both touch */
        for (int i = 0; i < N_KEYS; i++)
            shared += atomic_load(&by[i][r]) == 0 && cm_bucket(i) == kcr_shard_bucket(boundary);
        cr_log_info("replica %d: received and dropped %.0f children of the other replica's "
                    "(%d in the shared bucket)",
                    r, dropped, shared);
        cr_expect_eq(dropped, shared,
                     "replica %d received children of the other replica's buckets", r);
    }

    clear_counts();
    atomic_store(&check_children, 1);
    cr_assert_eq(replica_stop(1), KCR_OK);
    WAIT_FOR(keys_of(0) >= of1); /* replica 1's keys, reconciled once gained */
    cr_expect_eq(metric(reps[0].m, SECRET_OBJECTS), N_KEYS, "every child, still no free Secret");
    cr_expect_eq(atomic_load(&missing_child), 0,
                 "a gained key's reconcile read the Secret cache before it held the key's child");
    cr_expect_eq(atomic_load(&overlaps), 0);
}

/* Children without the bucket label (written before kcr stamped it, or by
 * another tool) reach no owned cache under child_bucket_selector; a
 * controller that writes them through kcr_ctrlutil_create_or_update with
 * kcr_ctrlutil_set_controller_reference heals them at its keys' first
 * reconcile: the cache misses, the helper reads the server, stamps the
 * label (one update per child, none after) and the child arrives. */
Test(shard_controller, an_unlabelled_child_is_stamped_by_its_owners_reconcile, .init = setup,
     .fini = replicas_teardown, .timeout = 120)
{
    seed();
    create_children_as(false);
    buckets_opt = true;
    atomic_store(&write_children, 1);
    start_two(KCR_SHARD_FILTER);
    WAIT_FOR(metric(reps[0].m, SECRET_OBJECTS) + metric(reps[1].m, SECRET_OBJECTS) == N_KEYS);
    clear_counts();
    touch_all(7);
    WAIT_FOR(each_once());
    int of1 = keys_of(1);
    cr_expect_eq(metric(reps[0].m, SECRET_OBJECTS), N_KEYS - of1);
    cr_expect_eq(metric(reps[1].m, SECRET_OBJECTS), of1);
    cr_expect_eq(atomic_load(&write_errors), 0);
    cr_expect_eq(kcr_fake_count(fake, KCR_FAKE_UPDATE, &SECRET), N_KEYS,
                 "one write per unlabelled child, none once it is labelled");
    for (int i = 0; i < N_KEYS; i++) {
        char sname[16], cname[16];
        snprintf(sname, sizeof sname, "s-%02d", i);
        snprintf(cname, sizeof cname, "cm-%02d", i);
        kcr_object *s = NULL, *cm = NULL;
        cr_assert_eq(kcr_client_get(client,
                                    &(kcr_request){.resource = &SECRET, .ns = "default", .name = sname},
                                    &s),
                     KCR_OK);
        cr_assert_eq(kcr_client_get(client,
                                    &(kcr_request){.resource = &CM, .ns = "default", .name = cname},
                                    &cm),
                     KCR_OK);
        char want[8];
        snprintf(want, sizeof want, "%u",
                 kcr_shard_bucket(kcr_shard_hash(kcr_object_uid(cm), strlen(kcr_object_uid(cm)))));
        const char *got = kcr_object_label(s, KCR_SHARD_BUCKET_LABEL);
        cr_expect(got && strcmp(got, want) == 0, "%s: bucket label %s, want %s", sname,
                  got ? got : "(none)", want);
        kcr_object_unref(cm);
        kcr_object_unref(s);
    }
}

Test(shard_controller, server_mode_caches_only_the_shard, .init = setup, .fini = replicas_teardown,
     .timeout = 120)
{
    seed();
    start_two(KCR_SHARD_SERVER);
    /* each primary cache follows its replica's ranges: together they hold
     * every ConfigMap once, and the fake answered with shardInfo */
    WAIT_FOR(metric(reps[0].m, CM_OBJECTS) + metric(reps[1].m, CM_OBJECTS) == N_KEYS);
    for (int r = 0; r < 2; r++)
        cr_expect_lt(metric(reps[r].m, CM_OBJECTS), N_KEYS, "replica %d caches only its shard", r);
    cr_expect_eq(metric(reps[0].m, "kcr_cache_shard_selector_mode{resource=\"configmaps\","
                                   "group=\"\",namespace=\"\"}"),
                 1, "the server applied the selector");
    clear_counts();
    touch_all(4);
    WAIT_FOR(each_once());
    cr_expect(keys_of(0) > 0 && keys_of(1) > 0);
    cr_expect_eq(atomic_load(&overlaps), 0);
    /* one replica leaves: the other's selector grows to the whole space */
    cr_assert_eq(replica_stop(1), KCR_OK);
    WAIT_FOR(metric(reps[0].m, CM_OBJECTS) == N_KEYS);
}

static kcr_result note_everywhere(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    if (kcr_ctx_shard(ctx))
        atomic_fetch_add(&unsharded_with_info, 1);
    int i = key_index(req);
    if (i >= 0)
        atomic_fetch_add(&everywhere[i][(intptr_t)ud], 1);
    return KCR_DONE;
}

static bool everywhere_done(int n)
{
    for (int i = 0; i < N_KEYS; i++)
        for (int r = 0; r < n; r++)
            if (!atomic_load(&everywhere[i][r]))
                return false;
    return true;
}

Test(shard_controller, an_unsharded_controller_runs_every_key_everywhere, .init = setup,
     .fini = replicas_teardown, .timeout = 120)
{
    seed();
    for (int r = 0; r < 2; r++) {
        replica_new(r, KCR_SHARD_SERVER, NULL);
        kcr_controller_options o = {.name = "all",
                                    .primary = {.resource = CM},
                                    .unsharded = true,
                                    .reconcile = note_everywhere,
                                    .user_data = (void *)(intptr_t)r};
        cr_assert_eq(kcr_manager_add_controller(reps[r].m, &o, NULL), KCR_OK, "%s",
                     kcr_last_error());
        replica_start(r);
    }
    int two[] = {0, 1};
    WAIT_FOR(settled(two, 2));
    /* its cache is not the sharded one (server mode): it sees every key */
    WAIT_FOR(everywhere_done(2));
    cr_expect_eq(atomic_load(&unsharded_with_info), 0, "kcr_ctx_shard is NULL when unsharded");
    clear_counts();
    touch_all(6);
    WAIT_FOR(each_once());
}

/* A fake that ignores shard selectors, as an apiserver with the
 * ShardedListAndWatch gate off. */
static void setup_ignoring(void)
{
    kcr_fake_options fo = {.ignore_shard_selector = true};
    cr_assert_eq(kcr_fake_new(&fo, &fake), KCR_OK);
    cr_assert_eq(kcr_fake_client(fake, "default", &client), KCR_OK);
}

Test(shard_controller, server_mode_falls_back_when_the_server_ignores_it, .init = setup_ignoring,
     .fini = replicas_teardown, .timeout = 120)
{
    seed();
    start_two(KCR_SHARD_SERVER);
    /* no shardInfo: each reflector filters on the client, says so in the
     * metric and in the shard readiness text; admission is unchanged */
    for (int r = 0; r < 2; r++) {
        cr_expect_eq(metric(reps[r].m, "kcr_cache_shard_selector_mode{resource=\"configmaps\","
                                       "group=\"\",namespace=\"\"}"),
                     2, "replica %d filters on the client", r);
        char *msg = NULL;
        cr_assert_eq(kcr_manager_shard_readyz_check(&msg, reps[r].m), KCR_OK);
        cr_expect(strstr(msg, "ignored the shard selector") != NULL, "%s", msg);
        free(msg);
    }
    cr_expect_lt(metric(reps[0].m, CM_OBJECTS), N_KEYS,
                 "the client-side filter keeps only the shard");
    clear_counts();
    touch_all(5);
    WAIT_FOR(each_once());
    cr_expect(keys_of(0) > 0 && keys_of(1) > 0);
    cr_expect_eq(atomic_load(&overlaps), 0);
}

Test(shard_controller, bad_options, .init = setup, .fini = teardown)
{
    kcr_sharding_options so = {.mode = KCR_SHARD_LABEL, .identity = "not a label value"};
    kcr_manager_options mo = {.sharding = &so};
    cr_expect_eq(kcr_manager_new(client, &mo, &mgr), KCR_ERR_INVALID);
    cr_expect(strstr(kcr_last_error(), "\"not a label value\" is not a valid label value") !=
                  NULL,
              "%s", kcr_last_error());
    so.identity = "rep-0";
    so.label_keys = (kcr_shard_label_keys)7;
    cr_expect_eq(kcr_manager_new(client, &mo, &mgr), KCR_ERR_INVALID);
    cr_expect(strstr(kcr_last_error(), "label_keys 7") != NULL, "%s", kcr_last_error());
    so.label_keys = KCR_SHARD_LABELS_KCR;
    so.reserved_u8[2] = 1;
    cr_expect_eq(kcr_manager_new(client, &mo, &mgr), KCR_ERR_INVALID);
    so.reserved_u8[2] = 0;
    so.mode = KCR_SHARD_FILTER;
    mo.leader_election = true;
    mo.leader_election_id = "x";
    cr_expect_eq(kcr_manager_new(client, &mo, &mgr), KCR_ERR_INVALID);
    cr_expect(strstr(kcr_last_error(), "leader_election") && strstr(kcr_last_error(), "sharding"),
              "%s", kcr_last_error());
    mo.leader_election = false;
    so.retry_period_ms = 20000; /* above the renew deadline */
    cr_expect_eq(kcr_manager_new(client, &mo, &mgr), KCR_ERR_INVALID);
    cr_expect(strstr(kcr_last_error(), "retry") != NULL, "%s", kcr_last_error());
    so.retry_period_ms = 0;
    so.reserved[0] = 1;
    cr_expect_eq(kcr_manager_new(client, &mo, &mgr), KCR_ERR_INVALID);
    cr_expect_null(mgr);
}

/* ---- label mode ---- */

/* The label `key` of ConfigMap `name` as the API has it ("" when none), into out. */
static void label_of_name(const char *name, const char *key, char *out, size_t size)
{
    kcr_object *cm = NULL;
    cr_assert_eq(kcr_client_get(client, &(kcr_request){.resource = &CM, .ns = "default", .name = name},
                                &cm),
                 KCR_OK);
    const char *v = kcr_object_label(cm, key);
    snprintf(out, size, "%s", v ? v : "");
    kcr_object_unref(cm);
}

/* The same of cm-<i>. */
static void label_of(int i, const char *key, char *out, size_t size)
{
    char name[16];
    snprintf(name, sizeof name, "cm-%02d", i);
    label_of_name(name, key, out, size);
}

/* Every ConfigMap labelled with one of the first n replicas, none drained. */
static bool all_labelled(int n, const char *key)
{
    for (int i = 0; i < N_KEYS; i++) {
        char owner[64], drain[64];
        label_of(i, key, owner, sizeof owner);
        label_of(i, DRAIN_LABEL, drain, sizeof drain);
        bool known = false;
        for (int r = 0; r < n; r++)
            known |= strcmp(owner, reps[r].identity) == 0;
        if (!known || *drain)
            return false;
    }
    return true;
}

/* How many replicas' readiness says they are the ring's coordinator. */
static int coordinators(int n)
{
    int c = 0;
    for (int r = 0; r < n; r++) {
        char *msg = NULL;
        kcr_manager_shard_readyz_check(&msg, reps[r].m);
        c += msg && strstr(msg, "the ring's coordinator") != NULL;
        free(msg);
    }
    return c;
}

Test(shard_controller, label_mode_each_replica_caches_and_runs_its_labelled_objects,
     .init = setup, .fini = replicas_teardown, .timeout = 120)
{
    seed();
    for (int r = 0; r < 3; r++) {
        replica_new(r, KCR_SHARD_LABEL, NULL);
        replica_start(r);
    }
    int all[] = {0, 1, 2};
    WAIT_FOR(settled(all, 3) && all_labelled(3, SHARD_LABEL));
    cr_assert(all_labelled(3, SHARD_LABEL), "the coordinator labelled every ConfigMap");
    WAIT_FOR(coordinators(3) == 1);
    cr_expect_eq(coordinators(3), 1, "one replica is the ring's coordinator");
    /* each primary cache holds its label's objects only: together every one once */
    WAIT_FOR(metric(reps[0].m, CM_OBJECTS) + metric(reps[1].m, CM_OBJECTS) +
                 metric(reps[2].m, CM_OBJECTS) ==
             N_KEYS);
    for (int r = 0; r < 3; r++)
        cr_expect_lt(metric(reps[r].m, CM_OBJECTS), N_KEYS, "replica %d caches only its shard", r);
    clear_counts();
    touch_all(7);
    WAIT_FOR(each_once());
    sleep_ms(200); /* a late duplicate would show by now */
    cr_assert(each_once(), "a key was reconciled by two replicas");
    for (int i = 0; i < N_KEYS; i++) {
        char owner[64];
        label_of(i, SHARD_LABEL, owner, sizeof owner);
        for (int r = 0; r < 3; r++)
            if (atomic_load(&by[i][r]))
                cr_expect_str_eq(owner, reps[r].identity, "cm-%02d ran on its label's replica", i);
    }
    cr_expect_eq(atomic_load(&overlaps), 0);
    cr_expect_eq(atomic_load(&wrong_info), 0);
    char *msg = NULL;
    cr_assert_eq(kcr_manager_shard_readyz_check(&msg, reps[0].m), KCR_OK);
    cr_expect(strstr(msg, "mode label") != NULL, "%s", msg);
    free(msg);
}

/* A replica restarted within its restart grace (label mode): while it is
 * away its keys stay unowned (reported) and run nowhere, no label changes,
 * and the next process with its identity takes them back; without the
 * grace the other replica takes them within a step of the stop. */
Test(shard_controller, label_mode_a_restart_within_the_grace_moves_nothing, .init = setup,
     .fini = replicas_teardown, .timeout = 120)
{
    restart_grace_opt_ms = test_ms(30000);
    seed();
    for (int r = 0; r < 2; r++) {
        replica_new(r, KCR_SHARD_LABEL, NULL);
        replica_start(r);
    }
    int two[] = {0, 1};
    WAIT_FOR(settled(two, 2) && all_labelled(2, SHARD_LABEL));
    char before[N_KEYS][64];
    for (int i = 0; i < N_KEYS; i++)
        label_of(i, SHARD_LABEL, before[i], sizeof before[i]);
    double away = metric(reps[1].m, "kcr_shard_owned_objects{controller=\"c\"}");
    cr_assert_gt(away, 0);

    cr_assert_eq(replica_stop(1), KCR_OK, "%s", kcr_last_error());
    kcr_manager_free(reps[1].m);
    kcr_client_free(reps[1].client);
    reps[1].m = NULL;
    reps[1].client = NULL;
    clear_counts();
    touch_all(3);
    sleep_ms(test_ms(3000)); /* two lease durations and the margin */
    cr_expect_eq(keys_of(1), 0);
    cr_expect_eq(keys_of(0), N_KEYS - (int)away, "replica 0 ran keys of the replica restarting");
    cr_expect_eq(metric(reps[0].m, "kcr_shard_unowned_objects{ring=\"ring\"}"), away,
                 "the restarting replica's keys are not reported unowned");
    double uncovered = metric(reps[0].m, "kcr_shard_uncovered_ratio{ring=\"ring\"}");
    cr_expect(uncovered > 0.2 && uncovered < 0.8,
              "the kept slot's share of the hash space is not reported uncovered: %g", uncovered);

    replica_new(1, KCR_SHARD_LABEL, NULL);
    replica_start(1);
    WAIT_FOR(each_once());
    cr_expect_eq(keys_of(1), (int)away, "the restarted replica took back its own keys");
    WAIT_FOR(settled(two, 2));
    cr_expect_eq(metric(reps[0].m, "kcr_shard_uncovered_ratio{ring=\"ring\"}"), 0);
    for (int i = 0; i < N_KEYS; i++) {
        char now[64];
        label_of(i, SHARD_LABEL, now, sizeof now);
        cr_expect_str_eq(now, before[i], "cm-%02d moved", i);
    }
    cr_expect_eq(atomic_load(&overlaps), 0);
    cr_expect_eq(atomic_load(&missing_primary), 0);
}

/* kcr_shard_coordinator_listed_objects_total of replica r's pass kind. */
static double coordinator_listed(int r, const char *pass)
{
    char series[128];
    snprintf(series, sizeof series,
             "kcr_shard_coordinator_listed_objects_total{ring=\"ring\",pass=\"%s\"}", pass);
    return metric(reps[r].m, series);
}

/* Once every object carries its ring owner's label, the coordinator's
 * passes list only the objects no member owns (new ones here), not every
 * object each retry period: over ten periods its full passes list at most
 * one pass's worth (the periodic full pass may fall in the window), and
 * the new objects are still labelled. */
Test(shard_controller, label_mode_a_settled_coordinator_lists_only_unowned_objects,
     .init = setup, .fini = replicas_teardown, .timeout = 120)
{
    seed();
    for (int r = 0; r < 2; r++) {
        replica_new(r, KCR_SHARD_LABEL, NULL);
        replica_start(r);
    }
    int both[] = {0, 1};
    WAIT_FOR(settled(both, 2) && all_labelled(2, SHARD_LABEL) && coordinators(2) == 1);
    cr_assert(all_labelled(2, SHARD_LABEL));
    char *msg = NULL;
    kcr_manager_shard_readyz_check(&msg, reps[0].m);
    int c = msg && strstr(msg, "the ring's coordinator") ? 0 : 1;
    free(msg);
    sleep_ms(test_ms(600)); /* a full pass that finds nothing to do */
    double full = coordinator_listed(c, "full"), unowned = coordinator_listed(c, "unowned");
    cr_assert_geq(full, N_KEYS, "the coordinator's full passes listed every object");
    create_cm("new-0");
    create_cm("new-1");
    char a[64] = "", b[64] = "";
    int64_t until = kcr__now_ns() + test_ms(10000) * KCR_NS_PER_MS;
    while (kcr__now_ns() < until && !(*a && *b)) {
        label_of_name("new-0", SHARD_LABEL, a, sizeof a);
        label_of_name("new-1", SHARD_LABEL, b, sizeof b);
        sleep_ms(10);
    }
    cr_assert(*a && *b, "the new objects were labelled");
    sleep_ms(test_ms(2000)); /* ten retry periods */
    double full_more = coordinator_listed(c, "full") - full,
           unowned_more = coordinator_listed(c, "unowned") - unowned;
    cr_expect_leq(full_more, N_KEYS + 2,
                  "the settled coordinator's full passes listed %.0f objects in ten retry periods "
                  "(at most one pass of %d)",
                  full_more, N_KEYS + 2);
    cr_expect_geq(full_more + unowned_more, 2, "the new objects were listed");
}

/* Replicas starting a cold label ring together: the coordinator labels
 * nothing while its member settles the cold start, so every object is
 * labelled once, for its owner in the ring of all of them (before, the
 * first replica labelled every object for itself, cached them all, and
 * each moved again once the others joined). */
Test(shard_controller, label_mode_a_cold_ring_labels_each_object_once, .init = setup,
     .fini = replicas_teardown, .timeout = 120)
{
    seed();
    uint64_t patches = kcr_fake_count(fake, KCR_FAKE_PATCH, &CM);
    replica_new(0, KCR_SHARD_LABEL, NULL);
    replica_start(0);
    WAIT_FOR(coordinators(1) == 1);
    for (int r = 1; r < 3; r++) {
        replica_new(r, KCR_SHARD_LABEL, NULL);
        replica_start(r);
    }
    int three[] = {0, 1, 2};
    WAIT_FOR(settled(three, 3) && all_labelled(3, SHARD_LABEL));
    cr_assert(all_labelled(3, SHARD_LABEL));
    sleep_ms(test_ms(600)); /* three retry periods: a late write would show */
    cr_expect_eq(kcr_fake_count(fake, KCR_FAKE_PATCH, &CM) - patches, N_KEYS,
                 "each of the %d objects labelled once (%" PRIu64 " label writes)", N_KEYS,
                 kcr_fake_count(fake, KCR_FAKE_PATCH, &CM) - patches);
    cr_expect_eq(atomic_load(&overlaps), 0);
}

/* A coordinator pass keeps at most a bounded number of label writes (10
 * here): the next pass, at once, writes the rest. One replica on a cold
 * ring labels its 48 objects in five passes or more, and every one is
 * labelled. */
Test(shard_controller, label_mode_a_pass_writes_a_bounded_batch, .init = setup,
     .fini = replicas_teardown, .timeout = 120)
{
    seed();
    replica_new(0, KCR_SHARD_LABEL, NULL);
    kcr__manager_shard_set_pass_writes(reps[0].m, 10);
    replica_start(0);
    int one[] = {0};
    WAIT_FOR(settled(one, 1) && all_labelled(1, SHARD_LABEL));
    cr_assert(all_labelled(1, SHARD_LABEL), "every object labelled, ten per pass");
    double full = coordinator_listed(0, "full");
    cr_expect_geq(full, 5 * N_KEYS, "five full passes or more (%.0f objects listed)", full);
}

Test(shard_controller, label_mode_a_move_waits_for_the_old_owners_drain, .init = setup,
     .fini = replicas_teardown, .timeout = 120)
{
    seed();
    workers_opt = N_KEYS; /* every key of a replica in flight at once */
    for (int r = 0; r < 2; r++) {
        replica_new(r, KCR_SHARD_LABEL, NULL);
        replica_start(r);
    }
    int two[] = {0, 1}, three[] = {0, 1, 2};
    WAIT_FOR(settled(two, 2) && all_labelled(2, SHARD_LABEL));
    cr_assert(all_labelled(2, SHARD_LABEL));
    /* every reconcile now lasts until its drain label comes (at most 5 s),
     * all of them at once, and a third replica joins meanwhile: the keys
     * moving to it are in flight when their drain label comes */
    atomic_store(&slow_ms, (int)test_ms(5000));
    clear_counts();
    touch_all(8);
    sleep_ms(test_ms(150));
    replica_new(2, KCR_SHARD_LABEL, NULL);
    replica_start(2);
    WAIT_FOR(settled(three, 3) && all_labelled(3, SHARD_LABEL));
    cr_assert(all_labelled(3, SHARD_LABEL), "the joiner got its objects");
    int moved = 0;
    for (int i = 0; i < N_KEYS; i++) {
        char owner[64];
        label_of(i, SHARD_LABEL, owner, sizeof owner);
        moved += strcmp(owner, reps[2].identity) == 0;
    }
    cr_expect_gt(moved, 0, "keys moved to the joiner");
    /* reconciles on the old owners saw the drain label arrive on their own,
     * still-labelled object: the acknowledgement waited for it to end */
    cr_expect_gt(atomic_load(&drained_running), 0,
                 "an in-flight reconcile of a moving key ended before its acknowledgement");
    cr_expect_leq(atomic_load(&drained_running), moved);
    cr_expect_eq(atomic_load(&overlaps), 0, "no key ran on two replicas at once");
    atomic_store(&slow_ms, 0);
    clear_counts();
    touch_all(9);
    WAIT_FOR(each_once());
    cr_expect_eq(keys_of(2), moved, "the joiner runs exactly the keys labelled with it");
    cr_expect_eq(atomic_load(&overlaps), 0);
    cr_expect_eq(atomic_load(&missing_primary), 0,
                 "a moved object's DELETED event (its label no longer matches) is no deletion");
    cr_log_info("label mode: %d of %d keys moved to the joiner, %d drained while running", moved,
                N_KEYS, atomic_load(&drained_running));
}

/* The fake's hook: while `cut` is set, the requests naming replica 1's
 * shard Lease block (its renewals: the replica is cut off from its Lease). */
static atomic_int cut;

static void cut_rep1(kcr_fake_verb verb, const kcr_resource *res, const char *ns,
                     const char *name, void *ud)
{
    (void)verb, (void)ns, (void)ud;
    if (strcmp(res->resource, "leases") != 0 || !name || strcmp(name, "ring-rep-1") != 0)
        return;
    while (atomic_load(&cut))
        sleep_ms(1);
}

/* How many ConfigMaps carry `identity`'s shard label. */
static int labelled_with(const char *identity)
{
    int n = 0;
    for (int i = 0; i < N_KEYS; i++) {
        char owner[64];
        label_of(i, SHARD_LABEL, owner, sizeof owner);
        n += strcmp(owner, identity) == 0;
    }
    return n;
}

/* Issue 22's cost target: a move between two live replicas costs at most
 * two writes of the object (the coordinator's drain label, then the old
 * owner's acknowledgement naming the new owner), not three (a separate
 * assignment after a plain acknowledgement). Every ConfigMap PATCH from the
 * join to the settling is counted: the test writes none meanwhile. */
Test(shard_controller, label_mode_a_move_between_live_replicas_costs_two_writes, .init = setup,
     .fini = replicas_teardown, .timeout = 120)
{
    seed();
    for (int r = 0; r < 2; r++) {
        replica_new(r, KCR_SHARD_LABEL, NULL);
        replica_start(r);
    }
    int two[] = {0, 1}, three[] = {0, 1, 2};
    WAIT_FOR(settled(two, 2) && all_labelled(2, SHARD_LABEL));
    cr_assert(all_labelled(2, SHARD_LABEL));
    uint64_t before = kcr_fake_count(fake, KCR_FAKE_PATCH, &CM);
    replica_new(2, KCR_SHARD_LABEL, NULL);
    replica_start(2);
    WAIT_FOR(settled(three, 3) && all_labelled(3, SHARD_LABEL) &&
             labelled_with(reps[2].identity) > 0);
    cr_assert(all_labelled(3, SHARD_LABEL));
    uint64_t writes = kcr_fake_count(fake, KCR_FAKE_PATCH, &CM) - before;
    int moved = labelled_with(reps[2].identity);
    cr_assert_gt(moved, 0, "keys moved to the joiner");
    cr_log_info("label mode: %d keys moved to the joiner with %" PRIu64 " writes", moved, writes);
    cr_expect_leq(writes, 2 * (uint64_t)moved,
                  "%" PRIu64 " ConfigMap writes for %d moved objects: more than two each", writes,
                  moved);
    cr_expect_geq(writes, 2 * (uint64_t)moved, "each move drained before it was handed off");
}

Test(shard_controller, label_mode_a_cut_off_replicas_objects_move_after_its_lease_expired,
     .init = setup, .fini = replicas_teardown, .timeout = 120)
{
    seed();
    kcr_fake_set_hook(fake, cut_rep1, NULL);
    replica_new(0, KCR_SHARD_LABEL, NULL);
    replica_start(0);
    WAIT_FOR(coordinators(1) == 1); /* replica 0 coordinates: replica 1 is the one cut off */
    cr_assert_eq(coordinators(1), 1);
    replica_new(1, KCR_SHARD_LABEL, NULL);
    replica_start(1);
    int two[] = {0, 1};
    WAIT_FOR(settled(two, 2) && all_labelled(2, SHARD_LABEL));
    cr_assert(all_labelled(2, SHARD_LABEL));
    int had = labelled_with("rep-1");
    cr_assert_gt(had, 0);
    atomic_store(&cut, 1);
    int64_t t0 = kcr__now_ns();
    /* its objects keep its label until its Lease expired (its last renewal,
     * at most a retry period before the cut, + lease + margin) */
    int64_t first_move = 0;
    int64_t until = t0 + test_ms(10000) * KCR_NS_PER_MS;
    while (kcr__now_ns() < until && labelled_with("rep-1") > 0) {
        if (!first_move && labelled_with("rep-1") < had)
            first_move = kcr__now_ns();
        sleep_ms(5);
    }
    if (!first_move)
        first_move = kcr__now_ns();
    cr_assert_eq(labelled_with("rep-1"), 0, "the cut-off replica's objects moved");
    double after_s = (double)(first_move - t0) / 1e9;
    cr_log_info("label mode: a cut-off replica's objects started moving %.3f s after the cut "
                "(lease %.1f s, margin %.1f s, retry %.1f s)",
                after_s, (double)test_ms(1500) / 1000, (double)test_ms(200) / 1000,
                (double)test_ms(200) / 1000);
    cr_expect_geq(first_move - t0, (test_ms(1500) + test_ms(200) - test_ms(200)) * KCR_NS_PER_MS,
                  "no object moved before the Lease could have expired (%.3f s)", after_s);
    /* they run on replica 0 now, never on the fenced one */
    clear_counts();
    touch_all(10);
    WAIT_FOR(keys_of(0) == N_KEYS);
    cr_expect_eq(keys_of(0), N_KEYS);
    cr_expect_eq(keys_of(1), 0, "the cut-off replica reconciled nothing");
    cr_expect_eq(atomic_load(&overlaps), 0);
    atomic_store(&cut, 0);
}

Test(shard_controller, label_mode_writes_timebertts_keys_when_asked, .init = setup,
     .fini = replicas_teardown, .timeout = 120)
{
    seed();
    label_keys_opt = KCR_SHARD_LABELS_TIMEBERTT;
    replica_new(0, KCR_SHARD_LABEL, NULL);
    replica_start(0);
    WAIT_FOR(all_labelled(1, "shard.alpha.sharding.timebertt.dev/ring"));
    cr_assert(all_labelled(1, "shard.alpha.sharding.timebertt.dev/ring"));
    char kcr_key[64];
    label_of(0, SHARD_LABEL, kcr_key, sizeof kcr_key);
    cr_expect_str_empty(kcr_key, "kcr's own key is not written");
    clear_counts();
    touch_all(11);
    WAIT_FOR(keys_of(0) == N_KEYS);
    cr_expect_eq(keys_of(0), N_KEYS);
}

Test(shard_controller, label_mode_a_relabelled_object_is_not_taken_for_deleted, .init = setup,
     .fini = replicas_teardown, .timeout = 120)
{
    seed();
    replica_new(0, KCR_SHARD_LABEL, NULL);
    replica_start(0);
    int one[] = {0};
    WAIT_FOR(settled(one, 1) && all_labelled(1, SHARD_LABEL));
    cr_assert(all_labelled(1, SHARD_LABEL));
    WAIT_FOR(keys_of(0) == N_KEYS);
    /* cm-00 relabelled for an identity that is no member: it leaves the
     * replica's cache as a DELETED event (its label no longer matches),
     * which is no deletion; the coordinator then gives it back (its owner
     * holds no Lease) and the replica reconciles it with its object */
    atomic_store(&missing_primary, 0);
    clear_counts();
    cr_assert_eq(kcr_client_patch(client,
                                  &(kcr_request){.resource = &CM,
                                                 .ns = "default",
                                                 .name = "cm-00",
                                                 .patch_type = KCR_PATCH_MERGE,
                                                 .body = "{\"metadata\":{\"labels\":{\"" SHARD_LABEL
                                                         "\":\"elsewhere\"}}}"},
                                  NULL),
                 KCR_OK, "%s", kcr_last_error());
    WAIT_FOR(atomic_load(&by[0][0]) > 0);
    cr_assert_gt(atomic_load(&by[0][0]), 0, "cm-00 came back and was reconciled");
    char owner[64];
    label_of(0, SHARD_LABEL, owner, sizeof owner);
    cr_expect_str_eq(owner, "rep-0");
    cr_expect_eq(atomic_load(&missing_primary), 0,
                 "the DELETED event of the relabelling started no reconcile without its object");
}

Test(shard_controller, label_mode_a_childs_change_waits_for_its_owners_label, .init = setup,
     .fini = replicas_teardown, .timeout = 120)
{
    seed();
    create_children();
    retry_opt_ms = test_ms(2000); /* the coordinator's passes, 2 s apart: the window below */
    replica_new(0, KCR_SHARD_LABEL, NULL);
    replica_start(0);
    int one[] = {0};
    WAIT_FOR(settled(one, 1) && all_labelled(1, SHARD_LABEL));
    cr_assert(all_labelled(1, SHARD_LABEL));
    WAIT_FOR(keys_of(0) == N_KEYS);
    const char *owned = "kcr_shard_owned_objects{controller=\"c\"}";
    cr_assert_eq(metric(reps[0].m, owned), N_KEYS);
    /* cm-00 labelled for a non-member leaves the replica's cache until the
     * coordinator's next pass gives it back, while its hash stays admitted
     * here; a change of its Secret meanwhile names cm-00 (with its uid) */
    atomic_store(&missing_primary, 0);
    clear_counts();
    cr_assert_eq(kcr_client_patch(client,
                                  &(kcr_request){.resource = &CM,
                                                 .ns = "default",
                                                 .name = "cm-00",
                                                 .patch_type = KCR_PATCH_MERGE,
                                                 .body = "{\"metadata\":{\"labels\":{\"" SHARD_LABEL
                                                         "\":\"elsewhere\"}}}"},
                                  NULL),
                 KCR_OK, "%s", kcr_last_error());
    WAIT_FOR(metric(reps[0].m, owned) == N_KEYS - 1);
    cr_assert_eq(metric(reps[0].m, owned), N_KEYS - 1, "cm-00 left the cache");
    cr_assert_eq(kcr_client_patch(client,
                                  &(kcr_request){.resource = &SECRET,
                                                 .ns = "default",
                                                 .name = "s-00",
                                                 .patch_type = KCR_PATCH_MERGE,
                                                 .body = "{\"metadata\":{\"annotations\":{"
                                                         "\"touched\":\"1\"}}}"},
                                  NULL),
                 KCR_OK, "%s", kcr_last_error());
    WAIT_FOR(atomic_load(&by[0][0]) > 0);
    cr_assert_gt(atomic_load(&by[0][0]), 0, "cm-00 came back and was reconciled");
    char owner[64];
    label_of(0, SHARD_LABEL, owner, sizeof owner);
    cr_expect_str_eq(owner, "rep-0");
    cr_expect_eq(atomic_load(&missing_primary), 0,
                 "the Secret's change started no reconcile of cm-00 before its label came back");
}

/* The fake's hook: while `hold_cm_lists` is set, LISTs of ConfigMaps wait. */
static atomic_int hold_cm_lists, held_cm_lists;

static void hold_cm_list(kcr_fake_verb verb, const kcr_resource *res, const char *ns,
                         const char *name, void *ud)
{
    (void)ns, (void)name, (void)ud;
    if (verb != KCR_FAKE_LIST || strcmp(res->resource, "configmaps") != 0)
        return;
    while (atomic_load(&hold_cm_lists)) {
        atomic_store(&held_cm_lists, 1);
        sleep_ms(1);
    }
}

/* Replica r is active and admits every hash. */
static bool admits_all(int r)
{
    char *why = NULL;
    bool all = kcr_manager_shard_readyz_check(&why, reps[r].m) == KCR_OK && why &&
               strstr(why, "admitted [0000000000000000-10000000000000000]");
    free(why);
    return all;
}

static void touch_children(int round)
{
    char patch[80];
    snprintf(patch, sizeof patch, "{\"metadata\":{\"annotations\":{\"round\":\"%d\"}}}", round);
    patch_each(&SECRET, "s", patch);
}

Test(shard_controller, server_mode_a_gained_key_waits_for_its_object, .init = setup,
     .fini = replicas_teardown, .timeout = 120)
{
    seed();
    create_children();
    kcr_fake_set_hook(fake, hold_cm_list, NULL);
    start_two(KCR_SHARD_SERVER);
    /* replica 0's list of the ConfigMaps it gains waits; its children's
     * list does not, so their changes reach it while its primary cache
     * lacks their owners */
    atomic_store(&hold_cm_lists, 1);
    kcr_manager_stop(reps[1].m); /* it releases its Lease first; joined below */
    WAIT_FOR(admits_all(0) && atomic_load(&held_cm_lists));
    cr_assert(admits_all(0), "replica 0 admits every key");
    atomic_store(&missing_primary, 0);
    clear_counts();
    touch_children(1);
    sleep_ms(test_ms(300)); /* long enough for a reconcile without its object to start */
    cr_expect_eq(atomic_load(&missing_primary), 0,
                 "no key ran before its object was listed (%d did)",
                 atomic_load(&missing_primary));
    atomic_store(&hold_cm_lists, 0);
    cr_assert_eq(replica_stop(1), KCR_OK, "%s", kcr_last_error());
    WAIT_FOR(keys_of(0) == N_KEYS);
    cr_expect_eq(keys_of(0), N_KEYS, "every key ran once its object was listed");
    cr_expect_eq(atomic_load(&missing_primary), 0);
}

/* The fake's hook: while `hold_cm_patches` is set, PATCHes of ConfigMaps
 * (the coordinator's label writes) wait. */
static atomic_int hold_cm_patches;

static void hold_cm_patch(kcr_fake_verb verb, const kcr_resource *res, const char *ns,
                          const char *name, void *ud)
{
    (void)ns, (void)name, (void)ud;
    if (verb != KCR_FAKE_PATCH || strcmp(res->resource, "configmaps") != 0)
        return;
    while (atomic_load(&hold_cm_patches))
        sleep_ms(1);
}

/* Every key in `keys` reconciled since clear_counts by replica 0 or 1. */
static bool ran_on_the_others(const bool *keys)
{
    for (int i = 0; i < N_KEYS; i++)
        if (keys[i] && !atomic_load(&by[i][0]) && !atomic_load(&by[i][1]))
            return false;
    return true;
}

/* A replica that leaves hands its objects over without waiting for the
 * coordinator's label writes: the others watch its label too once it left
 * their ring, so its objects reach their caches at once. The writes are
 * held back here until every one of them ran elsewhere, with its object. */
Test(shard_controller, label_mode_a_leavers_objects_run_before_they_are_relabelled, .init = setup,
     .fini = replicas_teardown, .timeout = 120)
{
    seed();
    kcr_fake_set_hook(fake, hold_cm_patch, NULL);
    replica_new(0, KCR_SHARD_LABEL, NULL);
    replica_start(0);
    WAIT_FOR(coordinators(1) == 1); /* replica 0 coordinates: replica 2 leaves */
    for (int r = 1; r < 3; r++) {
        replica_new(r, KCR_SHARD_LABEL, NULL);
        replica_start(r);
    }
    int three[] = {0, 1, 2};
    WAIT_FOR(settled(three, 3) && all_labelled(3, SHARD_LABEL));
    bool leavers[N_KEYS];
    for (int i = 0; i < N_KEYS; i++) {
        char owner[64];
        label_of(i, SHARD_LABEL, owner, sizeof owner);
        leavers[i] = strcmp(owner, "rep-2") == 0;
    }
    int had = labelled_with("rep-2");
    cr_assert_gt(had, 0);
    atomic_store(&missing_primary, 0);
    clear_counts();
    atomic_store(&hold_cm_patches, 1);
    kcr_manager_stop(reps[2].m);
    int64_t until = kcr__now_ns() + test_ms(10000) * KCR_NS_PER_MS;
    while (!ran_on_the_others(leavers) && kcr__now_ns() < until)
        sleep_ms(5);
    bool ran = ran_on_the_others(leavers);
    int still = labelled_with("rep-2");
    atomic_store(&hold_cm_patches, 0); /* before any assertion: the coordinator waits on it */
    cr_expect(ran, "every one of the %d objects of the replica that left ran on another replica "
                   "while the label writes were held back", had);
    cr_expect_eq(still, had, "no object was relabelled meanwhile");
    cr_expect_eq(atomic_load(&missing_primary), 0, "every reconcile found its object");
    cr_assert_eq(replica_stop(2), KCR_OK, "%s", kcr_last_error());
    WAIT_FOR(labelled_with("rep-2") == 0);
    cr_expect_eq(atomic_load(&overlaps), 0);
}
