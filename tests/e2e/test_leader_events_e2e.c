/* End-to-end against testenv's kube-apiserver: two leader electors in one
 * process on a real coordination.k8s.io/v1 Lease (one leads, a clean stop
 * releases it, the other takes over; the Lease's content checked at each
 * step), and the event recorder writing events.k8s.io/v1 Events about a
 * ConfigMap, a repeat becoming series.count 2; and a user without RBAC for
 * either: counted failures, never a leader, never a loop. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "e2e/e2e_lib.h"

static const kcr_resource LEASES = {"coordination.k8s.io", "v1", "leases"};
static const kcr_resource EVENTS = {"events.k8s.io", "v1", "events"};
static const kcr_resource NAMESPACES = {"", "v1", "namespaces"};

static kcr_client *admin;
static char ns[64];

static void setup(void)
{
    admin = e2e_client("KCR_TESTENV_KUBECONFIG");
    cr_assert_not_null(admin, "no testenv client (see the message above)");
    cr_assert_eq(e2e_namespace(admin, "e2e-leader-events", ns, sizeof ns), KCR_OK, "%s",
                 kcr_last_error());
}

static void teardown(void)
{
    kcr_client_delete(admin, &(kcr_request){.resource = &NAMESPACES, .name = ns}, NULL);
    kcr_client_free(admin);
}

static int64_t mono_ms(void)
{
    return kcr__now_ns() / KCR_NS_PER_MS;
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

/* ---- leader election ---------------------------------------------------------------------- */

typedef struct cand {
    kcr_client *client;
    kcr_leader_elector *e;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int started, stopped;
    int64_t started_ms;
} cand;

static void bump(cand *c, int *field)
{
    pthread_mutex_lock(&c->mu);
    (*field)++;
    if (field == &c->started)
        c->started_ms = mono_ms();
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void on_started(void *ud)
{
    cand *c = ud;
    bump(c, &c->started);
}

static void on_stopped(void *ud)
{
    cand *c = ud;
    bump(c, &c->stopped);
}

static void cand_init(cand *c, const char *identity)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    kcr__cond_init_monotonic(&c->cv);
    c->client = e2e_client("KCR_TESTENV_KUBECONFIG");
    cr_assert_not_null(c->client);
    kcr_leader_elector_options o = {.lease_namespace = ns,
                                    .lease_name = "e2e-controller",
                                    .identity = identity,
                                    .lease_duration_ms = 3000,
                                    .renew_deadline_ms = 2000,
                                    .retry_period_ms = 250,
                                    .on_started_leading = on_started,
                                    .on_stopped_leading = on_stopped,
                                    .user_data = c};
    cr_assert_eq(kcr_leader_elector_new(c->client, &o, &c->e), KCR_OK, "%s", kcr_last_error());
}

static void cand_destroy(cand *c)
{
    kcr_leader_elector_free(c->e);
    kcr_client_free(c->client);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
}

static int count_of(cand *c, const int *field)
{
    pthread_mutex_lock(&c->mu);
    int v = *field;
    pthread_mutex_unlock(&c->mu);
    return v;
}

static bool wait_started(cand *c, int64_t timeout_ms)
{
    int64_t deadline = kcr__now_ns() + timeout_ms * KCR_NS_PER_MS;
    struct timespec ts = kcr__timespec_at(deadline);
    pthread_mutex_lock(&c->mu);
    while (!c->started && kcr__now_ns() < deadline)
        pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    bool ok = c->started > 0;
    pthread_mutex_unlock(&c->mu);
    return ok;
}

static kcr_object *get_lease(void)
{
    kcr_object *l = NULL;
    cr_assert_eq(
        kcr_client_get(admin,
                       &(kcr_request){.resource = &LEASES, .ns = ns, .name = "e2e-controller"}, &l),
        KCR_OK, "%s", kcr_last_error());
    return l;
}

static bool is_micro_time(const char *s)
{
    int64_t secs;
    return strlen(s) == 27 && s[19] == '.' && kcr_time_parse(s, &secs) == KCR_OK;
}

Test(leader_e2e, two_electors_one_leads_then_hands_over, .init = setup, .fini = teardown,
     .timeout = 120)
{
    cand a, b;
    cand_init(&a, "e2e-a");
    cand_init(&b, "e2e-b");
    cr_assert_eq(kcr_leader_elector_start(a.e), KCR_OK);
    cr_assert(wait_started(&a, 20000), "a never acquired the Lease");
    cr_assert_eq(kcr_leader_elector_start(b.e), KCR_OK);

    kcr_object *l = get_lease();
    cr_assert_str_eq(str(l, "spec.holderIdentity"), "e2e-a");
    cr_assert_eq(num(l, "spec.leaseDurationSeconds"), 3);
    cr_assert_eq(num(l, "spec.leaseTransitions"), 0);
    cr_assert(is_micro_time(str(l, "spec.acquireTime")), "%s", str(l, "spec.acquireTime"));
    cr_assert(is_micro_time(str(l, "spec.renewTime")), "%s", str(l, "spec.renewTime"));
    kcr_object_unref(l);

    /* b keeps trying while a renews; it must not take over. Wait until b has
     * read the Lease several times (its holder view says e2e-a). */
    int64_t end = mono_ms() + 10000;
    char *seen = NULL;
    do {
        free(seen);
        seen = kcr_leader_elector_holder(b.e);
    } while (strcmp(seen, "e2e-a") != 0 && mono_ms() < end);
    cr_assert_str_eq(seen, "e2e-a");
    free(seen);
    /* 16 renewals (4 s) outlast the 3 s lease: b must not take a Lease that
     * keeps being renewed. */
    kcr_leader_elector_stats sa;
    do
        kcr_leader_elector_get_stats(a.e, &sa);
    while (sa.renewals < 16 && mono_ms() < end + 20000);
    cr_assert_geq(sa.renewals, 16);
    cr_assert_eq(count_of(&b, &b.started), 0);

    kcr_leader_elector_stop(a.e);
    int64_t stopped = mono_ms();
    cr_assert_eq(count_of(&a, &a.stopped), 1);
    l = get_lease();
    cr_assert_str_eq(str(l, "spec.holderIdentity"), "e2e-a");
    cr_assert_eq(num(l, "spec.leaseDurationSeconds"), 1, "the Lease was not released");
    kcr_object_unref(l);

    cr_assert(wait_started(&b, 20000), "b never took over");
    int64_t took = b.started_ms - stopped;
    /* released: b waits 1 s after seeing the release (within a retry period),
     * not the 3 s lease */
    cr_assert_lt(took, 1000 + 250 + 1000, "hand-over took %lld ms", (long long)took);
    l = get_lease();
    cr_assert_str_eq(str(l, "spec.holderIdentity"), "e2e-b");
    cr_assert_eq(num(l, "spec.leaseDurationSeconds"), 3);
    cr_assert_eq(num(l, "spec.leaseTransitions"), 1);
    kcr_object_unref(l);
    kcr_leader_elector_stop(b.e);
    cand_destroy(&a);
    cand_destroy(&b);
}

/* ---- events ------------------------------------------------------------------------------ */

typedef struct evlist {
    kcr_object *items[8];
    int n;
} evlist;

static kcr_err collect(kcr_object *obj, void *ud)
{
    evlist *l = ud;
    if (l->n < 8)
        l->items[l->n] = kcr_object_ref(obj);
    l->n++;
    return KCR_OK;
}

static evlist list_events(void)
{
    evlist l = {.n = 0};
    cr_assert_eq(
        kcr_client_list(admin, &(kcr_request){.resource = &EVENTS, .ns = ns}, collect, &l, NULL),
        KCR_OK, "%s", kcr_last_error());
    return l;
}

static void evlist_free(evlist *l)
{
    for (int i = 0; i < l->n && i < 8; i++)
        kcr_object_unref(l->items[i]);
}

Test(events_e2e, event_about_a_configmap_and_its_series, .init = setup, .fini = teardown,
     .timeout = 60)
{
    cr_assert_eq(e2e_create_cm(admin, ns, "web", "1"), KCR_OK, "%s", kcr_last_error());
    kcr_object *cm = NULL;
    cr_assert_eq(
        kcr_client_get(admin, &(kcr_request){.resource = &E2E_CM, .ns = ns, .name = "web"}, &cm),
        KCR_OK);
    kcr_event_recorder_options o = {.reporting_controller = "kcr.dev/e2e-controller",
                                    .reporting_instance = "e2e-1"};
    kcr_event_recorder *r = NULL;
    cr_assert_eq(kcr_event_recorder_new(admin, &o, &r), KCR_OK, "%s", kcr_last_error());
    kcr_event ev = {.regarding = cm,
                    .type = KCR_EVENT_WARNING,
                    .reason = "SyncFailed",
                    .action = "Sync",
                    .note = "could not sync web"};
    cr_assert_eq(kcr_event_recorder_record(r, &ev), KCR_OK);
    cr_assert_eq(kcr_event_recorder_flush(r, 10000), KCR_OK);
    kcr_event_recorder_stats st;
    kcr_event_recorder_get_stats(r, &st);
    cr_assert_eq(st.created, 1, "failed %llu (see the log)", (unsigned long long)st.failed);

    evlist l = list_events();
    cr_assert_eq(l.n, 1);
    kcr_object *e = l.items[0];
    cr_assert_str_eq(str(e, "regarding.kind"), "ConfigMap");
    cr_assert_str_eq(str(e, "regarding.apiVersion"), "v1");
    cr_assert_str_eq(str(e, "regarding.namespace"), ns);
    cr_assert_str_eq(str(e, "regarding.name"), "web");
    cr_assert_str_eq(str(e, "regarding.uid"), kcr_object_uid(cm));
    cr_assert_str_eq(str(e, "reason"), "SyncFailed");
    cr_assert_str_eq(str(e, "type"), "Warning");
    cr_assert_str_eq(str(e, "action"), "Sync");
    cr_assert_str_eq(str(e, "note"), "could not sync web");
    cr_assert_str_eq(str(e, "reportingController"), "kcr.dev/e2e-controller");
    cr_assert_str_eq(str(e, "reportingInstance"), "e2e-1");
    cr_assert(is_micro_time(str(e, "eventTime")), "%s", str(e, "eventTime"));
    cr_assert_eq(kcr_value_get_type(kcr_object_get(e, "series")), KCR_VALUE_ABSENT);
    char *name = strdup(kcr_object_name(e));
    evlist_free(&l);

    cr_assert_eq(kcr_event_recorder_record(r, &ev), KCR_OK);
    cr_assert_eq(kcr_event_recorder_flush(r, 10000), KCR_OK);
    kcr_event_recorder_get_stats(r, &st);
    cr_assert_eq(st.series_updates, 1, "failed %llu", (unsigned long long)st.failed);
    l = list_events();
    cr_assert_eq(l.n, 1);
    e = l.items[0];
    cr_assert_str_eq(kcr_object_name(e), name);
    cr_assert_eq(num(e, "series.count"), 2);
    cr_assert(is_micro_time(str(e, "series.lastObservedTime")), "%s",
              str(e, "series.lastObservedTime"));
    evlist_free(&l);
    free(name);
    kcr_event_recorder_free(r);
    kcr_object_unref(cm);
}

/* ---- RBAC: a user who may not touch Leases or Events ---------------------------------------- */

static atomic_int event_warnings;

static void count_event_warnings(kcr_log_level level, const char *module, const char *message,
                                 void *ud)
{
    (void)ud;
    if (level <= KCR_LOG_WARN && strcmp(module, "events") == 0 && strstr(message, "Forbidden"))
        atomic_fetch_add(&event_warnings, 1);
}

Test(events_e2e, forbidden_writes_are_counted_and_logged_once, .init = setup, .fini = teardown,
     .timeout = 60)
{
    cr_assert_eq(e2e_create_cm(admin, ns, "web", "1"), KCR_OK, "%s", kcr_last_error());
    kcr_object *cm = NULL;
    cr_assert_eq(
        kcr_client_get(admin, &(kcr_request){.resource = &E2E_CM, .ns = ns, .name = "web"}, &cm),
        KCR_OK);
    kcr_client *limited = e2e_client("KCR_TESTENV_LIMITED_KUBECONFIG");
    cr_assert_not_null(limited);
    atomic_store(&event_warnings, 0);
    kcr_log_set_handler(count_event_warnings, NULL);
    kcr_event_recorder_options o = {.reporting_controller = "kcr.dev/e2e-controller"};
    kcr_event_recorder *r = NULL;
    cr_assert_eq(kcr_event_recorder_new(limited, &o, &r), KCR_OK);
    kcr_event a = {.regarding = cm, .reason = "One"}, b = {.regarding = cm, .reason = "Two"};
    cr_assert_eq(kcr_event_recorder_record(r, &a), KCR_OK);
    cr_assert_eq(kcr_event_recorder_record(r, &b), KCR_OK);
    cr_assert_eq(kcr_event_recorder_flush(r, 10000), KCR_OK);
    kcr_event_recorder_stats st;
    kcr_event_recorder_get_stats(r, &st);
    cr_assert_eq(st.failed, 2);
    cr_assert_eq(st.created, 0);
    cr_assert_eq(atomic_load(&event_warnings), 1);
    kcr_event_recorder_free(r);
    kcr_log_set_handler(NULL, NULL);
    evlist l = list_events();
    cr_assert_eq(l.n, 0);
    evlist_free(&l);
    kcr_client_free(limited);
    kcr_object_unref(cm);
}

Test(leader_e2e, forbidden_lease_is_never_led, .init = setup, .fini = teardown, .timeout = 60)
{
    cand c;
    memset(&c, 0, sizeof c);
    pthread_mutex_init(&c.mu, NULL);
    kcr__cond_init_monotonic(&c.cv);
    c.client = e2e_client("KCR_TESTENV_LIMITED_KUBECONFIG");
    cr_assert_not_null(c.client);
    kcr_leader_elector_options o = {.lease_namespace = ns,
                                    .lease_name = "e2e-controller",
                                    .lease_duration_ms = 3000,
                                    .renew_deadline_ms = 2000,
                                    .retry_period_ms = 250,
                                    .on_started_leading = on_started,
                                    .on_stopped_leading = on_stopped,
                                    .user_data = &c};
    cr_assert_eq(kcr_leader_elector_new(c.client, &o, &c.e), KCR_OK);
    cr_assert_eq(kcr_leader_elector_start(c.e), KCR_OK);
    kcr_leader_elector_stats st;
    int64_t end = mono_ms() + 20000;
    do
        kcr_leader_elector_get_stats(c.e, &st);
    while (st.failed_attempts < 3 && mono_ms() < end);
    cr_assert_geq(st.failed_attempts, 3);
    cr_assert_eq(st.acquisitions, 0);
    int64_t t0 = mono_ms();
    kcr_leader_elector_stop(c.e);
    cr_assert_lt(mono_ms() - t0, 2000, "stop took %lld ms", (long long)(mono_ms() - t0));
    cr_assert_eq(count_of(&c, &c.started), 0);
    cr_assert_eq(count_of(&c, &c.stopped), 0);
    kcr_object *l = NULL;
    cr_assert_eq(
        kcr_client_get(admin,
                       &(kcr_request){.resource = &LEASES, .ns = ns, .name = "e2e-controller"}, &l),
        KCR_ERR_NOT_FOUND);
    cand_destroy(&c);
}
