/* The event recorder on the fake API: the events.k8s.io/v1 fields written,
 * repeats as a series (count 2 on the first repeat), finished series, the
 * 1 KiB note, the per-object spam limit refilled by a virtual clock, a full
 * queue dropping without blocking, free flushing, and a refusing server
 * (403) counted and logged once instead of retried; free cancelling a write
 * hanging in a dead server at its 2 s mark. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "helpers/hung_server.h"
#include "helpers/timescale.h"
#include "kcr/kcr.h"
#include "kcr/fake.h"

static const kcr_resource EVENTS = {"events.k8s.io", "v1", "events"};
static const kcr_resource CM = {"", "v1", "configmaps"};
static const kcr_resource PODS = {"", "v1", "pods"};
static const kcr_resource NODES = {"", "v1", "nodes"};

/* 2026-01-02T03:04:05.678Z */
#define T0 INT64_C(1767323045678)

static kcr_fake *fake;
static kcr_client *client;
static atomic_llong clock_ms;

static int64_t virtual_now(void *ud)
{
    (void)ud;
    return atomic_load(&clock_ms);
}

static const kcr_clock vclock = {.now_ms = virtual_now};

static void setup(void)
{
    cr_assert_eq(kcr_fake_new(NULL, &fake), KCR_OK);
    cr_assert_eq(kcr_fake_client(fake, NULL, &client), KCR_OK);
    atomic_store(&clock_ms, T0);
}

static void teardown(void)
{
    kcr_client_free(client);
    kcr_fake_free(fake);
}

static kcr_object *make(const kcr_resource *res, const char *ns, const char *name)
{
    char json[256];
    snprintf(json, sizeof json, "{\"metadata\":{\"name\":\"%s\"}}", name);
    kcr_object *o = NULL;
    cr_assert_eq(
        kcr_client_create(client, &(kcr_request){.resource = res, .ns = ns, .body = json}, &o),
        KCR_OK, "%s", kcr_last_error());
    return o;
}

static kcr_event_recorder *recorder(bool sync, size_t queue_size)
{
    kcr_event_recorder_options o = {.reporting_controller = "test-controller",
                                    .reporting_instance = "test-controller-1",
                                    .queue_size = queue_size,
                                    .synchronous = sync,
                                    .clock = &vclock};
    kcr_event_recorder *r = NULL;
    cr_assert_eq(kcr_event_recorder_new(client, &o, &r), KCR_OK, "%s", kcr_last_error());
    return r;
}

/* The Events of ns, in name order. */
typedef struct evlist {
    kcr_object *items[64];
    size_t n;
} evlist;

static kcr_err collect(kcr_object *obj, void *ud)
{
    evlist *l = ud;
    cr_assert_lt(l->n, 64);
    l->items[l->n++] = kcr_object_ref(obj);
    return KCR_OK;
}

static evlist list_events(const char *ns)
{
    evlist l = {.n = 0};
    cr_assert_eq(
        kcr_client_list(client, &(kcr_request){.resource = &EVENTS, .ns = ns}, collect, &l, NULL),
        KCR_OK, "%s", kcr_last_error());
    return l;
}

static void evlist_free(evlist *l)
{
    for (size_t i = 0; i < l->n; i++)
        kcr_object_unref(l->items[i]);
    l->n = 0;
}

static const char *str(const kcr_object *o, const char *path)
{
    const char *s = kcr_value_string(kcr_object_get(o, path), NULL);
    return s ? s : "";
}

static bool absent(const kcr_object *o, const char *path)
{
    return kcr_value_get_type(kcr_object_get(o, path)) == KCR_VALUE_ABSENT;
}

static kcr_event_recorder_stats stats_of(kcr_event_recorder *r)
{
    kcr_event_recorder_stats st;
    kcr_event_recorder_get_stats(r, &st);
    return st;
}

Test(events, fields_are_written_exactly, .init = setup, .fini = teardown)
{
    kcr_object *cm = make(&CM, "ns1", "web");
    kcr_object *pod = make(&PODS, "ns1", "web-0");
    kcr_event_recorder *r = recorder(true, 0);
    kcr_event ev = {.regarding = cm,
                    .related = pod,
                    .type = KCR_EVENT_WARNING,
                    .reason = "SyncFailed",
                    .action = "Sync",
                    .note = "could not sync: \"quoted\" \\ and \xc3\xa9"};
    cr_assert_eq(kcr_event_recorder_record(r, &ev), KCR_OK, "%s", kcr_last_error());

    evlist l = list_events("ns1");
    cr_assert_eq(l.n, 1);
    kcr_object *e = l.items[0];
    cr_assert_str_eq(kcr_object_api_version(e), "events.k8s.io/v1");
    cr_assert_str_eq(kcr_object_kind(e), "Event");
    cr_assert_str_eq(kcr_object_namespace(e), "ns1");
    const char *name = kcr_object_name(e);
    cr_assert_eq(strncmp(name, "web.", 4), 0, "%s", name);
    cr_assert_gt(strlen(name), 4);
    cr_assert_eq(strspn(name + 4, "0123456789abcdef"), strlen(name + 4), "%s", name);
    cr_assert_str_eq(str(e, "eventTime"), "2026-01-02T03:04:05.678000Z");
    cr_assert_str_eq(str(e, "type"), "Warning");
    cr_assert_str_eq(str(e, "reason"), "SyncFailed");
    cr_assert_str_eq(str(e, "action"), "Sync");
    cr_assert_str_eq(str(e, "note"), ev.note);
    cr_assert_str_eq(str(e, "reportingController"), "test-controller");
    cr_assert_str_eq(str(e, "reportingInstance"), "test-controller-1");
    cr_assert_str_eq(str(e, "regarding.apiVersion"), "v1");
    cr_assert_str_eq(str(e, "regarding.kind"), "ConfigMap");
    cr_assert_str_eq(str(e, "regarding.namespace"), "ns1");
    cr_assert_str_eq(str(e, "regarding.name"), "web");
    cr_assert_str_eq(str(e, "regarding.uid"), kcr_object_uid(cm));
    cr_assert_str_eq(str(e, "regarding.resourceVersion"), kcr_object_resource_version(cm));
    cr_assert_str_eq(str(e, "related.kind"), "Pod");
    cr_assert_str_eq(str(e, "related.name"), "web-0");
    cr_assert_str_eq(str(e, "related.uid"), kcr_object_uid(pod));
    cr_assert(absent(e, "series"));
    kcr_event_recorder_stats st = stats_of(r);
    cr_assert_eq(st.recorded, 1);
    cr_assert_eq(st.created, 1);
    cr_assert_eq(st.failed, 0);
    evlist_free(&l);
    kcr_event_recorder_free(r);
    kcr_object_unref(cm);
    kcr_object_unref(pod);
}

Test(events, defaults_and_cluster_scoped_objects, .init = setup, .fini = teardown)
{
    kcr_object *node = make(&NODES, NULL, "node-1");
    kcr_event_recorder_options o = {.reporting_controller = "ctl", .synchronous = true};
    kcr_event_recorder *r = NULL;
    cr_assert_eq(kcr_event_recorder_new(client, &o, &r), KCR_OK);
    kcr_event ev = {.regarding = node, .reason = "Ready"};
    cr_assert_eq(kcr_event_recorder_record(r, &ev), KCR_OK, "%s", kcr_last_error());
    evlist l = list_events("default");
    cr_assert_eq(l.n, 1);
    kcr_object *e = l.items[0];
    cr_assert_str_eq(str(e, "type"), "Normal");
    cr_assert_str_eq(str(e, "action"), "Ready");
    cr_assert(absent(e, "note"));
    cr_assert(absent(e, "related"));
    cr_assert(absent(e, "regarding.namespace"));
    cr_assert_str_eq(str(e, "regarding.kind"), "Node");
    char host[256] = "", want[300];
    gethostname(host, sizeof host - 1);
    snprintf(want, sizeof want, "ctl-%s", host);
    want[128] = '\0';
    cr_assert_str_eq(str(e, "reportingInstance"), want);
    /* the real clock: an eventTime of this year, not the virtual one */
    cr_assert_neq(strncmp(str(e, "eventTime"), "2026-01-02T03:04:05", 19), 0);
    evlist_free(&l);
    kcr_event_recorder_free(r);
    kcr_object_unref(node);
}

Test(events, repeats_become_a_series, .init = setup, .fini = teardown)
{
    kcr_object *cm = make(&CM, "ns1", "web");
    kcr_event_recorder *r = recorder(true, 0);
    kcr_event ev = {.regarding = cm, .reason = "Scaled", .note = "to 3"};
    cr_assert_eq(kcr_event_recorder_record(r, &ev), KCR_OK);
    atomic_fetch_add(&clock_ms, 1000);
    cr_assert_eq(kcr_event_recorder_record(r, &ev), KCR_OK);
    evlist l = list_events("ns1");
    cr_assert_eq(l.n, 1);
    cr_assert_eq(kcr_value_int(kcr_object_get(l.items[0], "series.count")), 2);
    cr_assert_str_eq(str(l.items[0], "series.lastObservedTime"), "2026-01-02T03:04:06.678000Z");
    evlist_free(&l);
    atomic_fetch_add(&clock_ms, 1000);
    cr_assert_eq(kcr_event_recorder_record(r, &ev), KCR_OK);
    l = list_events("ns1");
    cr_assert_eq(l.n, 1);
    kcr_object *e = l.items[0];
    cr_assert_eq(kcr_value_int(kcr_object_get(e, "series.count")), 3);
    cr_assert_str_eq(str(e, "series.lastObservedTime"), "2026-01-02T03:04:07.678000Z");
    cr_assert_str_eq(str(e, "eventTime"), "2026-01-02T03:04:05.678000Z");
    char *first = strdup(kcr_object_name(e));
    evlist_free(&l);

    /* A different note is a different event. */
    kcr_event other = ev;
    other.note = "to 4";
    cr_assert_eq(kcr_event_recorder_record(r, &other), KCR_OK);
    l = list_events("ns1");
    cr_assert_eq(l.n, 2);
    evlist_free(&l);

    /* Six quiet minutes finish the series: the next one is a new Event. */
    atomic_fetch_add(&clock_ms, 6 * 60 * 1000 + 1);
    cr_assert_eq(kcr_event_recorder_record(r, &ev), KCR_OK);
    l = list_events("ns1");
    cr_assert_eq(l.n, 3);
    for (size_t i = 0; i < l.n; i++)
        if (strcmp(kcr_object_name(l.items[i]), first) == 0)
            cr_assert_eq(kcr_value_int(kcr_object_get(l.items[i], "series.count")), 3);
        else
            cr_assert(absent(l.items[i], "series"));
    evlist_free(&l);
    kcr_event_recorder_stats st = stats_of(r);
    cr_assert_eq(st.created, 3);
    cr_assert_eq(st.series_updates, 2);
    cr_assert_eq(st.recorded, 5);
    free(first);
    kcr_event_recorder_free(r);
    kcr_object_unref(cm);
}

Test(events, a_repeat_of_a_deleted_event_recreates_it_with_its_series, .init = setup,
     .fini = teardown)
{
    kcr_object *cm = make(&CM, "ns1", "web");
    kcr_event_recorder *r = recorder(true, 0);
    kcr_event ev = {.regarding = cm, .reason = "Scaled"};
    cr_assert_eq(kcr_event_recorder_record(r, &ev), KCR_OK);
    evlist l = list_events("ns1");
    cr_assert_eq(l.n, 1);
    cr_assert_eq(
        kcr_client_delete(
            client,
            &(kcr_request){.resource = &EVENTS, .ns = "ns1", .name = kcr_object_name(l.items[0])},
            NULL),
        KCR_OK);
    evlist_free(&l);
    cr_assert_eq(kcr_event_recorder_record(r, &ev), KCR_OK);
    l = list_events("ns1");
    cr_assert_eq(l.n, 1);
    cr_assert_eq(kcr_value_int(kcr_object_get(l.items[0], "series.count")), 2);
    cr_assert_str_eq(str(l.items[0], "reason"), "Scaled");
    evlist_free(&l);
    kcr_event_recorder_free(r);
    kcr_object_unref(cm);
}

Test(events, note_is_cut_to_1kib_on_a_character_boundary, .init = setup, .fini = teardown)
{
    kcr_object *cm = make(&CM, "ns1", "web");
    kcr_event_recorder *r = recorder(true, 0);
    char note[2000];
    note[0] = 'x'; /* then 999 two-byte characters: byte 1024 is a continuation byte */
    for (size_t i = 1; i < 1999; i += 2)
        note[i] = '\xc3', note[i + 1] = '\xa9';
    note[1999] = '\0';
    kcr_event ev = {.regarding = cm, .reason = "Long", .note = note};
    cr_assert_eq(kcr_event_recorder_record(r, &ev), KCR_OK, "%s", kcr_last_error());
    kcr_event fmt = {.regarding = cm, .reason = "Formatted"};
    cr_assert_eq(kcr_event_recorder_recordf(r, &fmt, "replicas %d of %s", 3, "web"), KCR_OK);
    /* formatted past 1 KiB: cut on a character boundary too */
    kcr_event fmt_long = {.regarding = cm, .reason = "FormattedLong"};
    cr_assert_eq(kcr_event_recorder_recordf(r, &fmt_long, "%s", note), KCR_OK, "%s",
                 kcr_last_error());
    evlist l = list_events("ns1");
    cr_assert_eq(l.n, 3);
    for (size_t i = 0; i < l.n; i++) {
        const char *n = str(l.items[i], "note");
        if (strncmp(str(l.items[i], "reason"), "Long", 4) == 0 ||
            strcmp(str(l.items[i], "reason"), "FormattedLong") == 0) {
            cr_assert_eq(strlen(n), 1023, "%zu", strlen(n));
            cr_assert_eq(strncmp(n, note, 1023), 0);
        } else {
            cr_assert_str_eq(n, "replicas 3 of web");
        }
    }
    evlist_free(&l);
    kcr_event_recorder_free(r);
    kcr_object_unref(cm);
}

Test(events, spam_limit_per_object_refills_with_the_clock, .init = setup, .fini = teardown)
{
    kcr_object *cm = make(&CM, "ns1", "web");
    kcr_object *other = make(&CM, "ns1", "other");
    kcr_event_recorder *r = recorder(true, 0);
    char reason[32];
    for (int i = 0; i < 26; i++) {
        snprintf(reason, sizeof reason, "Reason%d", i);
        kcr_event ev = {.regarding = cm, .reason = reason};
        cr_assert_eq(kcr_event_recorder_record(r, &ev), KCR_OK);
        atomic_fetch_add(&clock_ms, 1000); /* 26 s in all: no refill yet */
    }
    kcr_event_recorder_stats st = stats_of(r);
    cr_assert_eq(st.created, 25);
    cr_assert_eq(st.dropped_spam, 1);
    /* Another object has its own bucket. */
    kcr_event ev = {.regarding = other, .reason = "Reason0"};
    cr_assert_eq(kcr_event_recorder_record(r, &ev), KCR_OK);
    cr_assert_eq(stats_of(r).created, 26);
    /* One token per 5 minutes (counted from the first event). */
    atomic_fetch_add(&clock_ms, 5 * 60 * 1000 - 26 * 1000);
    kcr_event more = {.regarding = cm, .reason = "AfterRefill"};
    cr_assert_eq(kcr_event_recorder_record(r, &more), KCR_OK);
    more.reason = "AfterRefill2";
    cr_assert_eq(kcr_event_recorder_record(r, &more), KCR_OK);
    st = stats_of(r);
    cr_assert_eq(st.created, 27);
    cr_assert_eq(st.dropped_spam, 2);
    evlist l = list_events("ns1");
    cr_assert_eq(l.n, 27);
    evlist_free(&l);
    kcr_event_recorder_free(r);
    kcr_object_unref(cm);
    kcr_object_unref(other);
}

/* The minute's sweep drops the buckets that refilled to the burst (no
 * longer needed), the bucket of the very object being recorded included
 * when its last event is 5 minutes old. Its event must then count in a
 * new bucket, not in the freed one: the use after free this test caught
 * (under ASan or valgrind) corrupted the heap of a sharded replica that
 * reconciled its objects again after 5 quiet minutes. */
Test(events, the_sweep_may_drop_the_bucket_of_the_object_being_recorded, .init = setup,
     .fini = teardown)
{
    kcr_object *cm = make(&CM, "ns1", "web");
    kcr_event_recorder *r = recorder(true, 0);
    /* others first, as a replica's many objects: the sweep frees all their
     * buckets at once, more than glibc's per-size cache holds */
    for (int i = 0; i < 16; i++) {
        char name[16];
        snprintf(name, sizeof name, "quiet-%d", i);
        kcr_object *o = make(&CM, "ns1", name);
        cr_assert_eq(kcr_event_recorder_record(r, &(kcr_event){.regarding = o, .reason = "Once"}),
                     KCR_OK);
        kcr_object_unref(o);
    }
    kcr_event ev = {.regarding = cm, .reason = "First"};
    cr_assert_eq(kcr_event_recorder_record(r, &ev), KCR_OK);
    /* 6 quiet minutes: every bucket refilled to the burst, a sweep is due */
    atomic_fetch_add(&clock_ms, 6 * 60 * 1000);
    char reason[32];
    for (int i = 0; i < 26; i++) { /* a full burst again, then one too many */
        snprintf(reason, sizeof reason, "Again%d", i);
        ev.reason = reason;
        cr_assert_eq(kcr_event_recorder_record(r, &ev), KCR_OK);
    }
    kcr_event_recorder_stats st = stats_of(r);
    cr_expect_eq(st.created, 16 + 26, "the first events and a burst of 25 after the sweep");
    cr_expect_eq(st.dropped_spam, 1);
    kcr_event_recorder_free(r);
    kcr_object_unref(cm);
}

/* Blocks the sender inside its create until released. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool entered, open;
} gate;

static void gate_hook(kcr_fake_verb verb, const kcr_resource *res, const char *ns,
                      const char *name, void *ud)
{
    (void)ns;
    (void)name;
    gate *g = ud;
    if (verb != KCR_FAKE_CREATE || strcmp(res->resource, "events") != 0)
        return;
    pthread_mutex_lock(&g->mu);
    g->entered = true;
    pthread_cond_broadcast(&g->cv);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

Test(events, full_queue_drops_without_blocking, .init = setup, .fini = teardown)
{
    gate g = {.entered = false, .open = false};
    pthread_mutex_init(&g.mu, NULL);
    pthread_cond_init(&g.cv, NULL);
    kcr_fake_set_hook(fake, gate_hook, &g);
    kcr_object *objs[5];
    for (int i = 0; i < 5; i++) {
        char name[16];
        snprintf(name, sizeof name, "cm-%d", i);
        objs[i] = make(&CM, "ns1", name);
    }
    kcr_event_recorder *r = recorder(false, 2);
    kcr_event ev = {.regarding = objs[0], .reason = "Hello"};
    cr_assert_eq(kcr_event_recorder_record(r, &ev), KCR_OK);
    pthread_mutex_lock(&g.mu); /* the sender is now stuck in its first create */
    while (!g.entered)
        pthread_cond_wait(&g.cv, &g.mu);
    pthread_mutex_unlock(&g.mu);
    for (int i = 1; i < 5; i++) { /* two fit, two do not; none of these calls blocks */
        ev.regarding = objs[i];
        cr_assert_eq(kcr_event_recorder_record(r, &ev), KCR_OK);
    }
    kcr_event_recorder_stats st = stats_of(r);
    cr_assert_eq(st.recorded, 5);
    cr_assert_eq(st.dropped_full, 2);
    cr_assert_eq(st.created, 0);
    cr_assert_eq(kcr_event_recorder_flush(r, 50), KCR_ERR_TIMEOUT);

    pthread_mutex_lock(&g.mu);
    g.open = true;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    cr_assert_eq(kcr_event_recorder_flush(r, 5000), KCR_OK);
    st = stats_of(r);
    cr_assert_eq(st.created, 3);
    cr_assert_eq(st.dropped_full, 2);
    evlist l = list_events("ns1");
    cr_assert_eq(l.n, 3);
    evlist_free(&l);
    kcr_event_recorder_free(r);
    kcr_fake_set_hook(fake, NULL, NULL);
    for (int i = 0; i < 5; i++)
        kcr_object_unref(objs[i]);
    pthread_cond_destroy(&g.cv);
    pthread_mutex_destroy(&g.mu);
}

Test(events, free_sends_what_is_queued, .init = setup, .fini = teardown)
{
    kcr_object *cm = make(&CM, "ns1", "web");
    kcr_event_recorder *r = recorder(false, 0);
    char reason[32];
    for (int i = 0; i < 20; i++) {
        snprintf(reason, sizeof reason, "Step%d", i);
        kcr_event ev = {.regarding = cm, .reason = reason};
        cr_assert_eq(kcr_event_recorder_record(r, &ev), KCR_OK);
    }
    kcr_event_recorder_free(r);
    evlist l = list_events("ns1");
    cr_assert_eq(l.n, 20);
    evlist_free(&l);
    kcr_object_unref(cm);
}

static atomic_int event_warnings;

static void count_logs(kcr_log_level level, const char *module, const char *message, void *ud)
{
    (void)message;
    (void)ud;
    if (level <= KCR_LOG_WARN && strcmp(module, "events") == 0)
        atomic_fetch_add(&event_warnings, 1);
}

Test(events, refused_writes_are_counted_and_logged_once, .init = setup, .fini = teardown)
{
    kcr_object *cm = make(&CM, "ns1", "web");
    atomic_store(&event_warnings, 0);
    kcr_log_set_handler(count_logs, NULL);
    cr_assert_eq(kcr_fake_inject_error(
                     fake, &(kcr_fake_error){.verb = KCR_FAKE_CREATE,
                                             .resource = &EVENTS,
                                             .times = -1,
                                             .code = 403,
                                             .reason = "Forbidden",
                                             .message = "events.events.k8s.io is forbidden"}),
                 KCR_OK);
    kcr_event_recorder *r = recorder(false, 0);
    kcr_event a = {.regarding = cm, .reason = "One"}, b = {.regarding = cm, .reason = "Two"};
    cr_assert_eq(kcr_event_recorder_record(r, &a), KCR_OK);
    cr_assert_eq(kcr_event_recorder_record(r, &b), KCR_OK);
    cr_assert_eq(kcr_event_recorder_flush(r, 5000), KCR_OK);
    kcr_event_recorder_stats st = stats_of(r);
    cr_assert_eq(st.failed, 2);
    cr_assert_eq(st.created, 0);
    cr_assert_eq(kcr_fake_count(fake, KCR_FAKE_CREATE, &EVENTS), 2, "one attempt per event");
    cr_assert_eq(atomic_load(&event_warnings), 1);
    kcr_event_recorder_free(r);
    kcr_log_set_handler(NULL, NULL);
    kcr_fake_clear_errors(fake);
    kcr_object_unref(cm);
}

Test(events, bad_input_is_refused, .init = setup, .fini = teardown)
{
    kcr_object *cm = make(&CM, "ns1", "web");
    kcr_object *bare = NULL;
    const char *bare_json = "{\"metadata\":{\"name\":\"x\"}}";
    cr_assert_eq(kcr_object_parse(bare_json, strlen(bare_json), &bare), KCR_OK);
    kcr_event_recorder *r = recorder(true, 0);
    kcr_event ev = {.reason = "Why"};
    cr_assert_eq(kcr_event_recorder_record(r, &ev), KCR_ERR_INVALID);
    ev.regarding = bare;
    cr_assert_eq(kcr_event_recorder_record(r, &ev), KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "kind"), "%s", kcr_last_error());
    ev.regarding = cm;
    ev.reason = "";
    cr_assert_eq(kcr_event_recorder_record(r, &ev), KCR_ERR_INVALID);
    char long_reason[200];
    memset(long_reason, 'A', sizeof long_reason - 1);
    long_reason[sizeof long_reason - 1] = '\0';
    ev.reason = long_reason;
    cr_assert_eq(kcr_event_recorder_record(r, &ev), KCR_ERR_INVALID);
    ev.reason = "Ok";
    ev.type = (kcr_event_type)7;
    cr_assert_eq(kcr_event_recorder_record(r, &ev), KCR_ERR_INVALID);
    ev.type = KCR_EVENT_NORMAL;
    const char *bad_notes[] = {"bad \xff utf-8", "cut \xc3", "overlong \xc0\xaf",
                               "surrogate \xed\xa0\x80", "too big \xf4\x90\x80\x80"};
    for (size_t i = 0; i < sizeof bad_notes / sizeof bad_notes[0]; i++) {
        ev.note = bad_notes[i];
        cr_assert_eq(kcr_event_recorder_record(r, &ev), KCR_ERR_INVALID, "%zu", i);
        cr_assert(strstr(kcr_last_error(), "note is not valid UTF-8"), "%s", kcr_last_error());
    }
    ev.note = "fine \xf0\x9f\x98\x80 \xe2\x82\xac";
    cr_assert_eq(kcr_event_recorder_record(r, &ev), KCR_OK, "%s", kcr_last_error());
    ev.note = NULL;
    cr_assert_eq(kcr_event_recorder_record(NULL, &ev), KCR_ERR_INVALID);
    cr_assert_eq(kcr_event_recorder_record(r, NULL), KCR_ERR_INVALID);
    cr_assert_eq(stats_of(r).recorded, 1); /* only the valid one */
    cr_assert_eq(stats_of(r).created, 1);
    cr_assert_eq(kcr_event_recorder_flush(r, 0), KCR_OK);

    kcr_event_recorder *bad = NULL;
    kcr_event_recorder_options o = {.reporting_controller = ""};
    cr_assert_eq(kcr_event_recorder_new(client, &o, &bad), KCR_ERR_INVALID);
    o.reporting_controller = "c";
    o.spam_burst = -1;
    cr_assert_eq(kcr_event_recorder_new(client, &o, &bad), KCR_ERR_INVALID);
    cr_assert_eq(kcr_event_recorder_new(NULL, &o, &bad), KCR_ERR_INVALID);
    cr_assert_null(bad);
    kcr_event_recorder_free(NULL);
    kcr_event_recorder_free(r);
    kcr_object_unref(bare);
    kcr_object_unref(cm);
}

/* The log line free() writes when it gives up on the queue opens the gate. */
static gate *drop_gate;

static void open_on_drop(kcr_log_level level, const char *module, const char *message, void *ud)
{
    (void)level;
    (void)ud;
    if (strcmp(module, "events") != 0 || !strstr(message, "dropping 2 queued events"))
        return;
    pthread_mutex_lock(&drop_gate->mu);
    drop_gate->open = true;
    pthread_cond_broadcast(&drop_gate->cv);
    pthread_mutex_unlock(&drop_gate->mu);
}

Test(events, free_gives_up_on_a_hung_server_after_2s, .init = setup, .fini = teardown)
{
    gate g = {.entered = false, .open = false};
    pthread_mutex_init(&g.mu, NULL);
    pthread_cond_init(&g.cv, NULL);
    drop_gate = &g;
    kcr_fake_set_hook(fake, gate_hook, &g);
    kcr_log_set_handler(open_on_drop, NULL);
    kcr_object *cm = make(&CM, "ns1", "web");
    kcr_event_recorder *r = recorder(false, 0);
    const char *reasons[] = {"One", "Two", "Three"};
    for (int i = 0; i < 3; i++) {
        kcr_event ev = {.regarding = cm, .reason = reasons[i]};
        cr_assert_eq(kcr_event_recorder_record(r, &ev), KCR_OK);
    }
    int64_t start = kcr__now_ns();
    kcr_event_recorder_free(r); /* returns once the log line opened the gate */
    int64_t took_ms = (kcr__now_ns() - start) / KCR_NS_PER_MS;
    cr_assert_geq(took_ms, 1900, "free waited only %lld ms", (long long)took_ms);
    cr_assert(g.open, "free did not report the dropped events");
    evlist l = list_events("ns1");
    cr_assert_eq(l.n, 1, "only the write in flight reached the server");
    evlist_free(&l);
    kcr_log_set_handler(NULL, NULL);
    kcr_fake_set_hook(fake, NULL, NULL);
    kcr_object_unref(cm);
    pthread_cond_destroy(&g.cv);
    pthread_mutex_destroy(&g.mu);
}

Test(events, free_cancels_a_write_hanging_in_a_dead_server, .timeout = 60)
{
    hung_server *srv = hung_server_start();
    /* a long request timeout: only cancellation can make free return at its 2 s mark */
    kcr_client *c = hung_server_client(srv, &(kcr_client_options){.request_timeout_ms = 30000});
    kcr_object *cm = NULL;
    const char *json = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
                       "\"metadata\":{\"name\":\"web\",\"namespace\":\"ns1\",\"uid\":\"u1\"}}";
    cr_assert_eq(kcr_object_parse(json, 0, &cm), KCR_OK, "%s", kcr_last_error());
    kcr_event_recorder_options o = {.reporting_controller = "test-controller"};
    kcr_event_recorder *r = NULL;
    cr_assert_eq(kcr_event_recorder_new(c, &o, &r), KCR_OK, "%s", kcr_last_error());
    kcr_event ev = {.regarding = cm, .reason = "Hung"};
    cr_assert_eq(kcr_event_recorder_record(r, &ev), KCR_OK);
    cr_assert(hung_server_wait_requests(srv, 1), "the write never reached the server");
    int64_t start = kcr__now_ns();
    kcr_event_recorder_free(r);
    int64_t took_ms = (kcr__now_ns() - start) / KCR_NS_PER_MS;
    cr_assert_geq(took_ms, 1900, "free waited only %lld ms", (long long)took_ms);
    cr_assert_lt(took_ms, 2000 + test_ms(1000), "free took %lld ms", (long long)took_ms);
    kcr_object_unref(cm);
    kcr_client_free(c);
    hung_server_stop(srv);
}
