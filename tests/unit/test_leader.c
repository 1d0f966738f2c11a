/* Leader election on the fake API: acquiring, exactly one leader of two,
 * clean hand-over, stepping down when renewals fail (before the renew
 * deadline ends, and before anyone else can acquire), lost races (409),
 * a leader whose Lease was taken, validation, a stop that leaves a Lease
 * it does not hold untouched, and a stop that cancels a request hanging in
 * a dead server.
 *
 * Durations: lease 1 s (the Lease stores whole seconds: observers wait
 * 1 s before taking an unrenewed Lease over), renew deadline 600 ms, retry
 * 100 ms: short, yet long enough for a renewal under valgrind. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "helpers/hung_server.h"
#include "kcr/kcr.h"
#include "kcr/fake.h"
#include "helpers/timescale.h"

static const kcr_resource LEASES = {"coordination.k8s.io", "v1", "leases"};

/* Scaled under valgrind and sanitizers (helpers/timescale.h). */
#define LEASE_MS test_ms(1000)
#define RENEW_MS test_ms(600)
#define RETRY_MS test_ms(100)
/* Scheduling slack for upper bounds (valgrind runs threads one at a time). */
#define SLACK_MS test_ms(300)

static kcr_fake *fake;
static kcr_client *admin; /* the test's own view of the Lease */
static atomic_int leaders_now, leaders_max;

static int64_t mono_ms(void)
{
    return kcr__now_ns() / KCR_NS_PER_MS;
}

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* One candidate and what its callbacks saw. */
typedef struct cand {
    kcr_client *client;
    kcr_leader_elector *e;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int started, stopped, new_leader_calls;
    int64_t started_ms, stopped_ms;
    char last_leader[256];
    bool leading_in_stop; /* is_leader() as seen inside on_stopped_leading */
} cand;

static void on_started(void *ud)
{
    cand *c = ud;
    int now = atomic_fetch_add(&leaders_now, 1) + 1;
    int max = atomic_load(&leaders_max);
    while (now > max && !atomic_compare_exchange_weak(&leaders_max, &max, now))
        ;
    pthread_mutex_lock(&c->mu);
    c->started++;
    c->started_ms = mono_ms();
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void on_stopped(void *ud)
{
    cand *c = ud;
    atomic_fetch_sub(&leaders_now, 1);
    bool leading = kcr_leader_elector_is_leader(c->e);
    pthread_mutex_lock(&c->mu);
    c->stopped++;
    c->stopped_ms = mono_ms();
    c->leading_in_stop = leading;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void on_new_leader(const char *id, void *ud)
{
    cand *c = ud;
    pthread_mutex_lock(&c->mu);
    c->new_leader_calls++;
    snprintf(c->last_leader, sizeof c->last_leader, "%s", id);
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static kcr_leader_elector_options opts_for(cand *c, const char *identity)
{
    kcr_leader_elector_options o = {.lease_namespace = "kube-system",
                                    .lease_name = "my-controller",
                                    .identity = identity,
                                    .lease_duration_ms = LEASE_MS,
                                    .renew_deadline_ms = RENEW_MS,
                                    .retry_period_ms = RETRY_MS,
                                    .on_started_leading = on_started,
                                    .on_stopped_leading = on_stopped,
                                    .on_new_leader = on_new_leader,
                                    .user_data = c};
    return o;
}

/* A candidate; lease_ms 0: LEASE_MS. */
static cand *cand_new_with(const char *identity, int64_t lease_ms, bool keep_lease_on_stop)
{
    cand *c = calloc(1, sizeof *c);
    cr_assert_not_null(c);
    pthread_mutex_init(&c->mu, NULL);
    kcr__cond_init_monotonic(&c->cv);
    cr_assert_eq(kcr_fake_client(fake, NULL, &c->client), KCR_OK);
    kcr_leader_elector_options o = opts_for(c, identity);
    if (lease_ms)
        o.lease_duration_ms = test_ms(lease_ms);
    o.keep_lease_on_stop = keep_lease_on_stop;
    cr_assert_eq(kcr_leader_elector_new(c->client, &o, &c->e), KCR_OK, "%s", kcr_last_error());
    return c;
}

static cand *cand_new(const char *identity)
{
    return cand_new_with(identity, 0, false);
}

static void cand_free(cand *c)
{
    kcr_leader_elector_free(c->e);
    kcr_client_free(c->client);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* Waits until *field >= want (field of c, under c->mu); false on timeout. */
static bool wait_count(cand *c, const int *field, int want, int64_t timeout_ms)
{
    int64_t deadline = kcr__now_ns() + test_ms(timeout_ms) * KCR_NS_PER_MS;
    struct timespec ts = kcr__timespec_at(deadline);
    pthread_mutex_lock(&c->mu);
    while (*field < want && kcr__now_ns() < deadline)
        pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    bool ok = *field >= want;
    pthread_mutex_unlock(&c->mu);
    return ok;
}

static int get_int(cand *c, const int *field)
{
    pthread_mutex_lock(&c->mu);
    int v = *field;
    pthread_mutex_unlock(&c->mu);
    return v;
}

/* Waits until the elector's stats satisfy renewals >= n. */
static bool wait_renewals(cand *c, uint64_t n, int64_t timeout_ms)
{
    int64_t end = mono_ms() + test_ms(timeout_ms);
    kcr_leader_elector_stats st;
    do {
        kcr_leader_elector_get_stats(c->e, &st);
        if (st.renewals >= n)
            return true;
        nap_ms(5);
    } while (mono_ms() < end);
    return false;
}

static kcr_object *get_lease(void)
{
    kcr_object *o = NULL;
    cr_assert_eq(
        kcr_client_get(
            admin,
            &(kcr_request){.resource = &LEASES, .ns = "kube-system", .name = "my-controller"}, &o),
        KCR_OK, "%s", kcr_last_error());
    return o;
}

static const char *str(const kcr_object *o, const char *path)
{
    const char *s = kcr_value_string(kcr_object_get(o, path), NULL);
    return s ? s : "";
}

static int64_t num(const kcr_object *o, const char *path)
{
    return kcr_value_int(kcr_object_get(o, path));
}

static void setup(void)
{
    cr_assert_eq(kcr_fake_new(NULL, &fake), KCR_OK);
    cr_assert_eq(kcr_fake_client(fake, NULL, &admin), KCR_OK);
    atomic_store(&leaders_now, 0);
    atomic_store(&leaders_max, 0);
}

static void teardown(void)
{
    kcr_client_free(admin);
    kcr_fake_free(fake);
}

static bool is_micro_time(const char *s)
{
    int64_t secs;
    return strlen(s) == 27 && s[19] == '.' && s[26] == 'Z' && kcr_time_parse(s, &secs) == KCR_OK;
}

Test(leader, single_candidate_acquires_and_renews, .init = setup, .fini = teardown)
{
    cand *a = cand_new("a");
    cr_assert_not(kcr_leader_elector_is_leader(a->e));
    cr_assert_eq(kcr_leader_elector_start(a->e), KCR_OK);
    cr_assert_eq(kcr_leader_elector_start(a->e), KCR_ERR_STATE);
    cr_assert(wait_count(a, &a->started, 1, 5000), "never became leader");
    cr_assert(kcr_leader_elector_is_leader(a->e));
    cr_assert_str_eq(a->last_leader, "a");
    kcr_object *l1 = get_lease();
    cr_assert_str_eq(str(l1, "spec.holderIdentity"), "a");
    cr_assert_eq(num(l1, "spec.leaseDurationSeconds"), LEASE_MS / 1000);
    cr_assert_eq(num(l1, "spec.leaseTransitions"), 0);
    cr_assert(is_micro_time(str(l1, "spec.acquireTime")), "%s", str(l1, "spec.acquireTime"));
    cr_assert(is_micro_time(str(l1, "spec.renewTime")), "%s", str(l1, "spec.renewTime"));

    uint64_t gets = kcr_fake_count(fake, KCR_FAKE_GET, &LEASES);
    cr_assert(wait_renewals(a, 3, 5000), "no renewals");
    /* Renewals update the Lease without reading it first. */
    cr_assert_eq(kcr_fake_count(fake, KCR_FAKE_GET, &LEASES), gets);
    kcr_object *l2 = get_lease();
    cr_assert_str_neq(str(l2, "spec.renewTime"), str(l1, "spec.renewTime"));
    cr_assert_str_eq(str(l2, "spec.acquireTime"), str(l1, "spec.acquireTime"));
    cr_assert_eq(num(l2, "spec.leaseTransitions"), 0);
    kcr_leader_elector_stats st;
    kcr_leader_elector_get_stats(a->e, &st);
    cr_assert_eq(st.acquisitions, 1);
    cr_assert(st.leading);
    char *holder = kcr_leader_elector_holder(a->e);
    cr_assert_str_eq(holder, "a");
    free(holder);
    kcr_object_unref(l1);
    kcr_object_unref(l2);

    kcr_leader_elector_stop(a->e);
    cr_assert_eq(get_int(a, &a->stopped), 1);
    cr_assert_not(a->leading_in_stop, "is_leader() must be false once stopping");
    kcr_leader_elector_stop(a->e); /* idempotent */
    cr_assert_eq(get_int(a, &a->stopped), 1);
    cand_free(a);
}

Test(leader, two_candidates_exactly_one_leader, .init = setup, .fini = teardown)
{
    cand *a = cand_new("a"), *b = cand_new("b");
    cr_assert_eq(kcr_leader_elector_start(a->e), KCR_OK);
    cr_assert_eq(kcr_leader_elector_start(b->e), KCR_OK);
    int64_t end = mono_ms() + test_ms(5000);
    while (get_int(a, &a->started) + get_int(b, &b->started) == 0 && mono_ms() < end)
        nap_ms(5);
    cand *leader = get_int(a, &a->started) ? a : b;
    cand *other = leader == a ? b : a;
    cr_assert_eq(get_int(leader, &leader->started), 1, "nobody became leader");
    /* Let the leader renew for several lease durations of the follower's
     * view: the follower must never take over. */
    cr_assert(wait_renewals(leader, 20, 10000));
    cr_assert_eq(get_int(other, &other->started), 0);
    cr_assert_eq(atomic_load(&leaders_max), 1);
    cr_assert(kcr_leader_elector_is_leader(leader->e));
    cr_assert_not(kcr_leader_elector_is_leader(other->e));
    const char *id = kcr_leader_elector_identity(leader->e);
    cr_assert(wait_count(other, &other->new_leader_calls, 1, 2000));
    pthread_mutex_lock(&other->mu);
    cr_assert_str_eq(other->last_leader, id);
    pthread_mutex_unlock(&other->mu);
    char *seen = kcr_leader_elector_holder(other->e);
    cr_assert_str_eq(seen, id);
    free(seen);
    kcr_object *l = get_lease();
    cr_assert_str_eq(str(l, "spec.holderIdentity"), id);
    kcr_object_unref(l);
    kcr_leader_elector_stats st;
    kcr_leader_elector_get_stats(other->e, &st);
    cr_assert_eq(st.acquisitions, 0);
    cr_assert_not(st.leading);
    cand_free(a);
    cand_free(b);
}

Test(leader, clean_stop_hands_over_quickly, .init = setup, .fini = teardown)
{
    /* A 2 s lease: the release (1 s) makes the hand-over visibly faster. */
    cand *a = cand_new_with("a", 2000, false), *b = cand_new_with("b", 2000, false);
    cr_assert_eq(kcr_leader_elector_start(a->e), KCR_OK);
    cr_assert(wait_count(a, &a->started, 1, 5000));
    kcr_object *held = get_lease();
    cr_assert_eq(num(held, "spec.leaseDurationSeconds"), test_ms(2000) / 1000);
    kcr_object_unref(held);
    cr_assert_eq(kcr_leader_elector_start(b->e), KCR_OK);
    cr_assert(wait_count(b, &b->new_leader_calls, 1, 5000), "b never saw the Lease");

    kcr_leader_elector_stop(a->e);
    int64_t stopped = mono_ms();
    cr_assert_eq(get_int(a, &a->stopped), 1, "on_stopped_leading must run before stop returns");
    /* Released: holder kept, leaseDurationSeconds 1. */
    kcr_object *rel = get_lease();
    cr_assert_str_eq(str(rel, "spec.holderIdentity"), "a");
    cr_assert_eq(num(rel, "spec.leaseDurationSeconds"), 1);
    cr_assert_eq(num(rel, "spec.leaseTransitions"), 0);
    kcr_object_unref(rel);

    /* b takes over once the released Lease lapses: 1 s after it saw the
     * release, which it sees within a retry period; without the release it
     * would wait the full 2 s. */
    cr_assert(wait_count(b, &b->started, 1, 5000), "b never took over");
    int64_t took = b->started_ms - stopped;
    cr_assert_lt(took, 1000 + RETRY_MS + test_ms(800), "hand-over took %lld ms", (long long)took);
    cr_assert_eq(atomic_load(&leaders_max), 1);
    kcr_object *l = get_lease();
    cr_assert_str_eq(str(l, "spec.holderIdentity"), "b");
    cr_assert_eq(num(l, "spec.leaseTransitions"), 1);
    cr_assert_eq(num(l, "spec.leaseDurationSeconds"), test_ms(2000) / 1000);
    kcr_object_unref(l);
    cand_free(a);
    cand_free(b);
}

Test(leader, failed_renewals_step_down_before_anyone_takes_over, .init = setup, .fini = teardown)
{
    cand *a = cand_new("a"), *b = cand_new("b");
    cr_assert_eq(kcr_leader_elector_start(a->e), KCR_OK);
    cr_assert(wait_count(a, &a->started, 1, 5000));
    cr_assert_eq(kcr_leader_elector_start(b->e), KCR_OK);
    cr_assert(wait_renewals(a, 5, 5000));
    cr_assert(wait_count(b, &b->new_leader_calls, 1, 5000));

    /* From now on every update fails: a's last successful renewal was sent
     * before this moment. */
    int64_t cut = mono_ms();
    cr_assert_eq(kcr_fake_inject_error(fake, &(kcr_fake_error){.verb = KCR_FAKE_UPDATE,
                                                               .resource = &LEASES,
                                                               .times = -1,
                                                               .code = 500,
                                                               .reason = "InternalError",
                                                               .message = "etcd is gone"}),
                 KCR_OK);
    cr_assert(wait_count(a, &a->stopped, 1, 5000), "a never stepped down");
    int64_t stepped_down = a->stopped_ms - cut;
    cr_assert_leq(stepped_down, RENEW_MS + SLACK_MS,
                  "a stepped down %lld ms after its last renewal", (long long)stepped_down);
    cr_assert_not(kcr_leader_elector_is_leader(a->e));
    kcr_leader_elector_stats st;
    kcr_leader_elector_get_stats(a->e, &st);
    cr_assert_geq(st.failed_attempts, 1);
    cr_assert_not(st.leading);
    cr_assert_eq(get_int(b, &b->started), 0);

    kcr_fake_clear_errors(fake);
    cr_assert(wait_count(b, &b->started, 1, 5000), "b never took over");
    /* b may only take over once the Lease's duration (1 s) has passed since
     * it last saw it change, which was at a's last renewal (at most one
     * retry period before the cut). */
    int64_t took = b->started_ms - cut;
    cr_assert_geq(took, LEASE_MS - RETRY_MS, "b took over after %lld ms", (long long)took);
    cr_assert_eq(atomic_load(&leaders_max), 1);
    /* a lost the lease and did not campaign again (it had a second to). */
    cr_assert_eq(get_int(a, &a->started), 1);
    kcr_object *l = get_lease();
    cr_assert_str_eq(str(l, "spec.holderIdentity"), "b");
    cr_assert_eq(num(l, "spec.leaseTransitions"), 1);
    kcr_object_unref(l);
    cand_free(a);
    cand_free(b);
}

/* Holds every Lease update inside the fake (a hung server) until opened. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool closed;
    int held;
} gate;

static void gate_hook(kcr_fake_verb verb, const kcr_resource *res, const char *ns,
                      const char *name, void *ud)
{
    (void)ns;
    (void)name;
    gate *g = ud;
    if (verb != KCR_FAKE_UPDATE || strcmp(res->resource, "leases") != 0)
        return;
    pthread_mutex_lock(&g->mu);
    if (g->closed) {
        g->held++;
        pthread_cond_broadcast(&g->cv);
    }
    while (g->closed)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

Test(leader, hung_renewal_steps_down_on_time, .init = setup, .fini = teardown)
{
    gate g = {.closed = false, .held = 0};
    pthread_mutex_init(&g.mu, NULL);
    pthread_cond_init(&g.cv, NULL);
    kcr_fake_set_hook(fake, gate_hook, &g);
    cand *a = cand_new("a");
    cr_assert_eq(kcr_leader_elector_start(a->e), KCR_OK);
    cr_assert(wait_count(a, &a->started, 1, 5000));
    cr_assert(wait_renewals(a, 2, 5000));
    pthread_mutex_lock(&g.mu);
    g.closed = true;
    pthread_mutex_unlock(&g.mu);
    int64_t cut = mono_ms(); /* no renewal sent after this can succeed */
    cr_assert(wait_count(a, &a->stopped, 1, 5000), "a kept leading on a hung request");
    int64_t stepped_down = a->stopped_ms - cut;
    cr_assert_leq(stepped_down, RENEW_MS + SLACK_MS, "stepped down %lld ms after the last renewal",
                  (long long)stepped_down);
    pthread_mutex_lock(&g.mu);
    cr_assert_geq(g.held, 1, "no renewal was held");
    g.closed = false;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    kcr_leader_elector_stop(a->e); /* joins the request thread once the request returns */
    cr_assert_not(kcr_leader_elector_is_leader(a->e));
    kcr_fake_set_hook(fake, NULL, NULL);
    cand_free(a);
    pthread_cond_destroy(&g.cv);
    pthread_mutex_destroy(&g.mu);
}

/* An intruder writes the Lease between a candidate's GET and its UPDATE. */
typedef struct intruder {
    atomic_int armed;
} intruder;

static void intrude(kcr_fake_verb verb, const kcr_resource *res, const char *ns,
                    const char *name, void *ud)
{
    (void)ns;
    (void)name;
    intruder *in = ud;
    int one = 1;
    if (verb != KCR_FAKE_UPDATE || strcmp(res->resource, "leases") != 0 ||
        !atomic_compare_exchange_strong(&in->armed, &one, 0))
        return;
    kcr_object *l = get_lease();
    kcr_object_edit *ed = NULL;
    cr_assert_eq(kcr_object_edit_new(l, &ed), KCR_OK);
    kcr_object_edit_set_string(ed, "spec.holderIdentity", "intruder");
    kcr_object_edit_set_int(ed, "spec.leaseDurationSeconds", 1);
    kcr_object *nl;
    kcr_object_edit_freeze(ed, &nl);
    char *json;
    kcr_object_to_json(nl, &json, NULL);
    kcr_err err = kcr_client_update(
        admin, &(kcr_request){.resource = &LEASES, .ns = "kube-system", .body = json}, NULL);
    cr_assert_eq(err, KCR_OK, "%s", kcr_last_error());
    free(json);
    kcr_object_unref(nl);
    kcr_object_edit_free(ed);
    kcr_object_unref(l);
}

Test(leader, lost_race_is_a_conflict_not_a_win, .init = setup, .fini = teardown)
{
    /* A free Lease exists, so the candidate reads it and then updates it. */
    cr_assert_eq(kcr_fake_add(fake, &LEASES,
                              "{\"metadata\":{\"name\":\"my-controller\",\"namespace\":"
                              "\"kube-system\"},\"spec\":{\"leaseTransitions\":4}}",
                              NULL),
                 KCR_OK);
    intruder in = {1};
    kcr_fake_set_hook(fake, intrude, &in);
    cand *a = cand_new("a");
    cr_assert_eq(kcr_leader_elector_start(a->e), KCR_OK);
    /* a's first update conflicts; it then sees the intruder holding the
     * Lease and waits for it to lapse (1 s), then takes it. */
    cr_assert(wait_count(a, &a->new_leader_calls, 2, 5000));
    pthread_mutex_lock(&a->mu);
    cr_assert_str_eq(a->last_leader, "intruder");
    cr_assert_eq(a->started, 0);
    pthread_mutex_unlock(&a->mu);
    kcr_leader_elector_stats st;
    kcr_leader_elector_get_stats(a->e, &st);
    cr_assert_eq(st.failed_attempts, 1);
    cr_assert(wait_count(a, &a->started, 1, 5000));
    kcr_object *l = get_lease();
    cr_assert_str_eq(str(l, "spec.holderIdentity"), "a");
    cr_assert_eq(num(l, "spec.leaseTransitions"), 5);
    kcr_object_unref(l);
    kcr_fake_set_hook(fake, NULL, NULL);
    cand_free(a);
}

/* Rewrites the Lease through the test's client, with a label or a new holder. */
static void touch_lease(const char *holder)
{
    kcr_object *l = get_lease();
    kcr_object_edit *ed = NULL;
    cr_assert_eq(kcr_object_edit_new(l, &ed), KCR_OK);
    if (holder) {
        kcr_object_edit_set_string(ed, "spec.holderIdentity", holder);
        kcr_object_edit_set_int(ed, "spec.leaseDurationSeconds", 30);
    } else {
        kcr_object_edit_set_label(ed, "touched", "yes");
    }
    kcr_object *nl;
    cr_assert_eq(kcr_object_edit_freeze(ed, &nl), KCR_OK);
    char *json;
    kcr_object_to_json(nl, &json, NULL);
    cr_assert_eq(
        kcr_client_update(
            admin, &(kcr_request){.resource = &LEASES, .ns = "kube-system", .body = json}, NULL),
        KCR_OK, "%s", kcr_last_error());
    free(json);
    kcr_object_unref(nl);
    kcr_object_edit_free(ed);
    kcr_object_unref(l);
}

Test(leader, renewal_conflict_rereads_and_keeps_leading, .init = setup, .fini = teardown)
{
    cand *a = cand_new("a");
    cr_assert_eq(kcr_leader_elector_start(a->e), KCR_OK);
    cr_assert(wait_count(a, &a->started, 1, 5000));
    cr_assert(wait_renewals(a, 2, 5000));
    touch_lease(NULL);
    kcr_leader_elector_stats before;
    kcr_leader_elector_get_stats(a->e, &before);
    cr_assert(wait_renewals(a, before.renewals + 5, 5000));
    cr_assert(kcr_leader_elector_is_leader(a->e));
    cr_assert_eq(get_int(a, &a->stopped), 0);
    kcr_object *l = get_lease();
    cr_assert_str_eq(str(l, "spec.holderIdentity"), "a");
    cr_assert_str_eq(str(l, "metadata.labels.touched"), "yes");
    kcr_object_unref(l);
    cand_free(a);
}

Test(leader, leader_whose_lease_was_taken_steps_down, .init = setup, .fini = teardown)
{
    cand *a = cand_new("a");
    cr_assert_eq(kcr_leader_elector_start(a->e), KCR_OK);
    cr_assert(wait_count(a, &a->started, 1, 5000));
    touch_lease("thief");
    cr_assert(wait_count(a, &a->stopped, 1, 2000), "a kept leading under another holder");
    cr_assert_not(kcr_leader_elector_is_leader(a->e));
    cr_assert(wait_count(a, &a->new_leader_calls, 2, 2000)); /* "a", then "thief" */
    pthread_mutex_lock(&a->mu);
    cr_assert_str_eq(a->last_leader, "thief");
    pthread_mutex_unlock(&a->mu);
    /* It does not release a Lease it no longer holds. */
    kcr_leader_elector_stop(a->e);
    kcr_object *l = get_lease();
    cr_assert_str_eq(str(l, "spec.holderIdentity"), "thief");
    cr_assert_eq(num(l, "spec.leaseDurationSeconds"), 30);
    kcr_object_unref(l);
    cand_free(a);
}

Test(leader, stop_while_not_leading_leaves_the_lease_alone, .init = setup, .fini = teardown)
{
    cr_assert_eq(kcr_fake_add(fake, &LEASES,
                              "{\"metadata\":{\"name\":\"my-controller\",\"namespace\":"
                              "\"kube-system\"},\"spec\":{\"holderIdentity\":\"other\","
                              "\"leaseDurationSeconds\":3600}}",
                              NULL),
                 KCR_OK);
    kcr_object *before = get_lease();
    cand *a = cand_new("a");
    cr_assert_eq(kcr_leader_elector_start(a->e), KCR_OK);
    cr_assert(wait_count(a, &a->new_leader_calls, 1, 5000));
    cr_assert_str_eq(a->last_leader, "other");
    kcr_leader_elector_stop(a->e);
    cr_assert_eq(get_int(a, &a->started), 0);
    cr_assert_eq(get_int(a, &a->stopped), 0, "on_stopped_leading without having led");
    cr_assert_eq(kcr_fake_count(fake, KCR_FAKE_UPDATE, &LEASES), 0);
    cr_assert_eq(kcr_fake_count(fake, KCR_FAKE_CREATE, &LEASES), 0);
    kcr_object *after = get_lease();
    cr_assert_str_eq(kcr_object_resource_version(after), kcr_object_resource_version(before));
    kcr_object_unref(before);
    kcr_object_unref(after);
    cand_free(a);
}

Test(leader, keep_lease_on_stop_does_not_release, .init = setup, .fini = teardown)
{
    cand *a = cand_new_with("a", 2000, true);
    cr_assert_eq(kcr_leader_elector_start(a->e), KCR_OK);
    cr_assert(wait_count(a, &a->started, 1, 5000));
    kcr_leader_elector_stop(a->e);
    cr_assert_eq(get_int(a, &a->stopped), 1);
    kcr_object *l = get_lease();
    cr_assert_str_eq(str(l, "spec.holderIdentity"), "a");
    cr_assert_eq(num(l, "spec.leaseDurationSeconds"), test_ms(2000) / 1000,
                 "the Lease was released");
    kcr_object_unref(l);
    cand_free(a);
}

static kcr_err try_new(int64_t lease, int64_t renew, int64_t retry)
{
    kcr_client *c;
    cr_assert_eq(kcr_fake_client(fake, NULL, &c), KCR_OK);
    kcr_leader_elector_options o = {.lease_namespace = "ns",
                                    .lease_name = "l",
                                    .lease_duration_ms = lease,
                                    .renew_deadline_ms = renew,
                                    .retry_period_ms = retry};
    kcr_leader_elector *e = NULL;
    kcr_err err = kcr_leader_elector_new(c, &o, &e);
    kcr_leader_elector_free(e);
    kcr_client_free(c);
    return err;
}

Test(leader, validation_says_which_rule_failed, .init = setup, .fini = teardown)
{
    cr_assert_eq(try_new(0, 0, 0), KCR_OK); /* 15 s / 10 s / 2 s */
    cr_assert_eq(try_new(10000, 10000, 2000), KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "lease_duration_ms (10000) must be greater than "
                                       "renew_deadline_ms (10000)"),
              "%s", kcr_last_error());
    cr_assert_eq(try_new(0, 2400, 2000), KCR_ERR_INVALID); /* exactly 1.2 x */
    cr_assert(strstr(kcr_last_error(), "renew_deadline_ms (2400) must be greater than 1.2 x "
                                       "retry_period_ms (2000)"),
              "%s", kcr_last_error());
    cr_assert_eq(try_new(0, 2401, 2000), KCR_OK);
    cr_assert_eq(try_new(0, 0, 9000), KCR_ERR_INVALID); /* default renew 10 s < 1.2 x 9 s */
    cr_assert_eq(try_new(-5, 0, 0), KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "positive"), "%s", kcr_last_error());
    cr_assert_eq(try_new(INT64_MAX, 0, 0), KCR_ERR_INVALID);

    kcr_client *c;
    cr_assert_eq(kcr_fake_client(fake, NULL, &c), KCR_OK);
    kcr_leader_elector *e = NULL;
    kcr_leader_elector_options o = {.lease_name = "l"};
    cr_assert_eq(kcr_leader_elector_new(c, &o, &e), KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "lease_namespace"), "%s", kcr_last_error());
    o = (kcr_leader_elector_options){.lease_namespace = "ns"};
    cr_assert_eq(kcr_leader_elector_new(c, &o, &e), KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "lease_name"), "%s", kcr_last_error());
    o.lease_name = "l";
    o.identity = "";
    cr_assert_eq(kcr_leader_elector_new(c, &o, &e), KCR_ERR_INVALID);
    cr_assert_eq(kcr_leader_elector_new(NULL, &o, &e), KCR_ERR_INVALID);
    cr_assert_eq(kcr_leader_elector_new(c, NULL, &e), KCR_ERR_INVALID);
    cr_assert_null(e);
    cr_assert_eq(kcr_leader_elector_start(NULL), KCR_ERR_INVALID);
    kcr_leader_elector_stop(NULL);
    kcr_leader_elector_free(NULL);
    kcr_client_free(c);
}

Test(leader, default_identity_is_hostname_and_uuid, .init = setup, .fini = teardown)
{
    kcr_client *c;
    cr_assert_eq(kcr_fake_client(fake, NULL, &c), KCR_OK);
    kcr_leader_elector_options o = {.lease_namespace = "ns", .lease_name = "l"};
    kcr_leader_elector *e1, *e2;
    cr_assert_eq(kcr_leader_elector_new(c, &o, &e1), KCR_OK);
    cr_assert_eq(kcr_leader_elector_new(c, &o, &e2), KCR_OK);
    const char *id = kcr_leader_elector_identity(e1);
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    size_t hl = strlen(host);
    cr_assert_eq(strncmp(id, host, hl), 0, "%s", id);
    cr_assert_eq(id[hl], '_', "%s", id);
    const char *u = id + hl + 1;
    cr_assert_eq(strlen(u), 36, "%s", id);
    cr_assert_eq(u[8], '-');
    cr_assert_eq(u[14], '4', "not a version 4 UUID: %s", u);
    cr_assert(strchr("89ab", u[19]) != NULL, "wrong UUID variant: %s", u);
    cr_assert_str_neq(id, kcr_leader_elector_identity(e2));
    kcr_leader_elector_free(e1);
    kcr_leader_elector_free(e2);
    kcr_client_free(c);
}

Test(leader, stop_before_start_and_start_after_stop, .init = setup, .fini = teardown)
{
    cand *a = cand_new("a");
    kcr_leader_elector_stop(a->e);
    cr_assert_eq(kcr_leader_elector_start(a->e), KCR_ERR_STATE);
    cr_assert_eq(kcr_fake_count(fake, KCR_FAKE_ANY, &LEASES), 0);
    cand_free(a);
}

Test(leader, unreadable_lease_is_retried_without_leading, .init = setup, .fini = teardown)
{
    cr_assert_eq(kcr_fake_inject_error(
                     fake, &(kcr_fake_error){.verb = KCR_FAKE_GET,
                                             .resource = &LEASES,
                                             .times = -1,
                                             .code = 403,
                                             .reason = "Forbidden",
                                             .message = "leases.coordination.k8s.io is forbidden"}),
                 KCR_OK);
    cand *a = cand_new("a");
    cr_assert_eq(kcr_leader_elector_start(a->e), KCR_OK);
    int64_t end = mono_ms() + test_ms(5000);
    kcr_leader_elector_stats st;
    do {
        kcr_leader_elector_get_stats(a->e, &st);
        nap_ms(5);
    } while (st.failed_attempts < 3 && mono_ms() < end);
    cr_assert_geq(st.failed_attempts, 3, "one failure per retry period");
    cr_assert_eq(get_int(a, &a->started), 0);
    cr_assert_eq(get_int(a, &a->new_leader_calls), 0, "nothing was read, nothing to report");
    cr_assert_eq(kcr_fake_count(fake, KCR_FAKE_CREATE, &LEASES), 0);
    kcr_fake_clear_errors(fake);
    cr_assert(wait_count(a, &a->started, 1, 5000));
    cand_free(a);
}

Test(leader, crashed_leader_is_replaced_after_the_lease_lapses, .init = setup, .fini = teardown)
{
    /* keep_lease_on_stop: a stop that writes nothing, like a killed process */
    cand *a = cand_new_with("a", 0, true), *b = cand_new("b");
    cr_assert_eq(kcr_leader_elector_start(a->e), KCR_OK);
    cr_assert(wait_count(a, &a->started, 1, 5000));
    cr_assert_eq(kcr_leader_elector_start(b->e), KCR_OK);
    cr_assert(wait_count(b, &b->new_leader_calls, 1, 5000));
    kcr_leader_elector_stop(a->e);
    int64_t gone = mono_ms(); /* a's last renewal was before this */
    kcr_object *l = get_lease();
    cr_assert_str_eq(str(l, "spec.holderIdentity"), "a");
    kcr_object_unref(l);
    cr_assert(wait_count(b, &b->started, 1, 5000), "b never took over");
    int64_t took = b->started_ms - gone;
    /* the full lease (1 s) since b last saw it change, which was at a's last
     * renewal: no earlier than 1 s - one retry period, no later than 1 s +
     * a retry period and some scheduling slack */
    cr_assert_geq(took, LEASE_MS - RETRY_MS, "b took over after %lld ms", (long long)took);
    cr_assert_lt(took, LEASE_MS + RETRY_MS + test_ms(800), "b took over after %lld ms", (long long)took);
    l = get_lease();
    cr_assert_str_eq(str(l, "spec.holderIdentity"), "b");
    cr_assert_eq(num(l, "spec.leaseTransitions"), 1);
    kcr_object_unref(l);
    cand_free(a);
    cand_free(b);
}

/* ---- a hung apiserver: stop cancels the request in flight ---- */

Test(leader, stop_cancels_a_request_hanging_in_a_dead_server, .timeout = 60)
{
    hung_server *srv = hung_server_start();
    /* a long request timeout: only cancellation can make stop return soon */
    kcr_client *c = hung_server_client(srv, &(kcr_client_options){.request_timeout_ms = 30000});
    kcr_leader_elector_options o = {.lease_namespace = "kube-system", .lease_name = "hung"};
    kcr_leader_elector *e = NULL;
    cr_assert_eq(kcr_leader_elector_new(c, &o, &e), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_leader_elector_start(e), KCR_OK);
    cr_assert(hung_server_wait_requests(srv, 1), "the elector never asked for the Lease");
    int64_t t0 = mono_ms();
    kcr_leader_elector_stop(e);
    int64_t took = mono_ms() - t0;
    cr_assert_lt(took, 1000 + SLACK_MS, "stop took %lld ms", (long long)took);
    cr_assert_not(kcr_leader_elector_is_leader(e));
    t0 = mono_ms();
    kcr_leader_elector_free(e);
    cr_assert_lt(mono_ms() - t0, 1000 + SLACK_MS, "free waited");
    kcr_client_free(c);
    hung_server_stop(srv);
}
