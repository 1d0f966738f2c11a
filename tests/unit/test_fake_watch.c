/* The fake's watches: resume from a resourceVersion and its expiry, initial events and
 * bookmarks, live selectors (set-based too) and a clean end, cancel/timeout/idle/error,
 * and concurrent writers seen by one watcher in resourceVersion order. */
#include <stdint.h>
#include <stdio.h>

#include "tests/unit/fake_fixture.h"
#include "kcr/fake.h"

Test(fake, watch_resume_and_expiry, .init = setup, .fini = teardown)
{
    kcr_object_unref(create(&CM, "w", "{\"metadata\":{\"name\":\"a\"}}"));  /* rv 1 */
    kcr_object_unref(create(&CM, "w", "{\"metadata\":{\"name\":\"b\"}}"));  /* rv 2 */
    cr_assert_eq(kcr_client_patch(c,
                                  &(kcr_request){.resource = &CM,
                                                 .ns = "w",
                                                 .name = "a",
                                                 .patch_type = KCR_PATCH_MERGE,
                                                 .body = "{\"data\":{\"x\":\"1\"}}"},
                                  NULL),
                 KCR_OK); /* rv 3 */
    cr_assert_eq(
        kcr_client_delete(c, &(kcr_request){.resource = &CM, .ns = "w", .name = "b"}, NULL),
        KCR_OK); /* rv 4 */
    struct seen s = {.lock = PTHREAD_MUTEX_INITIALIZER, .stop_after = 3};
    kcr_request o = {.resource = &CM, .ns = "w", .resource_version = "1"};
    cr_assert_eq(
        kcr_client_watch(c, &(kcr_request){.resource = &CM, .ns = "w", .resource_version = "1"},
                         on_event, &s),
        KCR_ERR_CANCELED);
    cr_assert_eq(s.n, 3);
    cr_assert_eq(s.type[0], KCR_WATCH_ADDED);
    cr_assert_str_eq(s.name[0], "b");
    cr_assert_str_eq(s.rv[0], "2");
    cr_assert_eq(s.type[1], KCR_WATCH_MODIFIED);
    cr_assert_eq(s.type[2], KCR_WATCH_DELETED);
    cr_assert_str_eq(s.rv[2], "4");

    /* RV "0": the current state as ADDED events. */
    s = (struct seen){.lock = PTHREAD_MUTEX_INITIALIZER, .stop_after = 1};
    o.resource_version = "0";
    cr_assert_eq(kcr_client_watch(c, &o, on_event, &s), KCR_ERR_CANCELED);
    cr_assert_str_eq(s.name[0], "a");
    cr_assert_str_eq(s.rv[0], "3");

    kcr_fake_compact(fake);
    s = (struct seen){.lock = PTHREAD_MUTEX_INITIALIZER};
    o.resource_version = "2";
    kcr_status st = {0};
    o.status = &st;
    cr_assert_eq(kcr_client_watch(c, &o, on_event, &s), KCR_ERR_GONE);
    cr_assert_eq(s.n, 1);
    cr_assert_eq(s.type[0], KCR_WATCH_ERROR);
    cr_assert_eq(st.code, 410);
    cr_assert_str_eq(st.reason, "Expired");
    cr_assert(strstr(st.message, "too old resource version") != NULL);
    kcr_status_clear(&st);
}

Test(fake, small_history_expires_old_versions)
{
    kcr_fake_options fo = {.history_size = 2};
    cr_assert_eq(kcr_fake_new(&fo, &fake), KCR_OK);
    cr_assert_eq(kcr_fake_client(fake, NULL, &c), KCR_OK);
    char json[64];
    for (int i = 0; i < 5; i++) {
        snprintf(json, sizeof json, "{\"metadata\":{\"name\":\"h%d\"}}", i);
        kcr_object_unref(create(&CM, "h", json));
    }
    struct seen s = {.lock = PTHREAD_MUTEX_INITIALIZER, .stop_after = 2};
    kcr_request o = {.resource = &CM, .ns = "h", .resource_version = "3"};
    cr_assert_eq(
        kcr_client_watch(c, &(kcr_request){.resource = &CM, .ns = "h", .resource_version = "3"},
                         on_event, &s),
        KCR_ERR_CANCELED);
    cr_assert_str_eq(s.name[0], "h3");
    o.resource_version = "2";
    s = (struct seen){.lock = PTHREAD_MUTEX_INITIALIZER};
    cr_assert_eq(kcr_client_watch(c, &o, on_event, &s), KCR_ERR_GONE);
    teardown();
}

Test(fake, initial_events_and_bookmarks, .init = setup, .fini = teardown)
{
    kcr_object_unref(create(&CM, "i", "{\"metadata\":{\"name\":\"a\"}}"));
    kcr_object_unref(create(&CM, "i", "{\"metadata\":{\"name\":\"b\"}}"));
    struct seen s = {.lock = PTHREAD_MUTEX_INITIALIZER, .stop_after = 3};
    cr_assert_eq(kcr_client_watch(c,
                                  &(kcr_request){.resource = &CM,
                                                 .ns = "i",
                                                 .send_initial_events = true,
                                                 .allow_bookmarks = true,
                                                 .resource_version_match = "NotOlderThan"},
                                  on_event, &s),
                 KCR_ERR_CANCELED);
    cr_assert_eq(s.type[0], KCR_WATCH_ADDED);
    cr_assert_eq(s.type[1], KCR_WATCH_ADDED);
    cr_assert_eq(s.type[2], KCR_WATCH_BOOKMARK);
    cr_assert(s.end_marker[2]);
    cr_assert_str_eq(s.rv[2], "2");
}

struct watch_thread {
    kcr_request opts; /* resource, namespace and status filled in by the thread */
    struct seen seen;
    kcr_err result;
    kcr_status st;
    pthread_t t;
};

static void *run_watch(void *arg)
{
    struct watch_thread *w = arg;
    kcr_request r = w->opts;
    r.resource = &CM;
    r.ns = "t";
    r.status = &w->st;
    w->result = kcr_client_watch(c, &r, on_event, &w->seen);
    return NULL;
}

static void start_watch(struct watch_thread *w)
{
    pthread_mutex_init(&w->seen.lock, NULL);
    size_t before = kcr_fake_watch_count(fake, &CM);
    pthread_create(&w->t, NULL, run_watch, w);
    for (int i = 0; i < 500 && kcr_fake_watch_count(fake, &CM) == before; i++)
        nap_ms(2);
    cr_assert_gt(kcr_fake_watch_count(fake, &CM), before);
}

static int seen_count(struct seen *s)
{
    pthread_mutex_lock(&s->lock);
    int n = s->n;
    pthread_mutex_unlock(&s->lock);
    return n;
}

Test(fake, live_watch_selectors_bookmarks_and_clean_end, .init = setup, .fini = teardown)
{
    struct watch_thread w = {.opts = {.resource_version = "0",
                                      .label_selector = "app=x",
                                      .allow_bookmarks = true}};
    start_watch(&w);
    kcr_object_unref(create(&CM, "t", "{\"metadata\":{\"name\":\"m\",\"labels\":{\"app\":\"x\"}}}"));
    kcr_object_unref(create(&CM, "t", "{\"metadata\":{\"name\":\"other\"}}"));
    kcr_object_unref(create(&CM, "elsewhere", "{\"metadata\":{\"name\":\"m\",\"labels\":{\"app\":\"x\"}}}"));
    /* Stops matching: DELETED; matches again: ADDED. */
    cr_assert_eq(
        kcr_client_patch(c,
                         &(kcr_request){.resource = &CM,
                                        .ns = "t",
                                        .name = "m",
                                        .patch_type = KCR_PATCH_MERGE,
                                        .body = "{\"metadata\":{\"labels\":{\"app\":\"y\"}}}"},
                         NULL),
        KCR_OK);
    cr_assert_eq(
        kcr_client_patch(c,
                         &(kcr_request){.resource = &CM,
                                        .ns = "t",
                                        .name = "other",
                                        .patch_type = KCR_PATCH_MERGE,
                                        .body = "{\"metadata\":{\"labels\":{\"app\":\"x\"}}}"},
                         NULL),
        KCR_OK);
    kcr_fake_bookmark(fake, &CM);
    for (int i = 0; i < 500 && seen_count(&w.seen) < 4; i++)
        nap_ms(2);
    kcr_fake_end_watches(fake, NULL);
    pthread_join(w.t, NULL);
    cr_assert_eq(w.result, KCR_OK, "a clean end: %s", kcr_strerror(w.result));
    cr_assert_eq(w.seen.n, 4);
    cr_assert_eq(w.seen.type[0], KCR_WATCH_ADDED);
    cr_assert_str_eq(w.seen.name[0], "m");
    cr_assert_eq(w.seen.type[1], KCR_WATCH_DELETED);
    cr_assert_str_eq(w.seen.name[1], "m");
    cr_assert_eq(w.seen.type[2], KCR_WATCH_ADDED);
    cr_assert_str_eq(w.seen.name[2], "other");
    cr_assert_eq(w.seen.type[3], KCR_WATCH_BOOKMARK);
    cr_assert_str_eq(w.seen.rv[3], "5");
    cr_assert_eq(kcr_fake_watch_count(fake, NULL), 0);
}

static void relabel(const char *name, const char *bucket)
{
    char body[128];
    snprintf(body, sizeof body, "{\"metadata\":{\"labels\":{\"kcr.dev/shard-bucket\":\"%s\"}}}",
             bucket);
    cr_assert_eq(kcr_client_patch(c,
                                  &(kcr_request){.resource = &CM,
                                                 .ns = "t",
                                                 .name = name,
                                                 .patch_type = KCR_PATCH_MERGE,
                                                 .body = body},
                                  NULL),
                 KCR_OK);
}

/* A set-based selector (the sharded owned caches' `kcr.dev/shard-bucket in
 * (...)`) on a live watch: objects in the set are ADDED, one relabelled out
 * of it DELETED, one relabelled into it ADDED, one without the label never
 * seen. */
Test(fake, live_watch_set_based_selector, .init = setup, .fini = teardown)
{
    struct watch_thread w = {
        .opts = {.resource_version = "0", .label_selector = "kcr.dev/shard-bucket in (3,4)"}};
    start_watch(&w);
    kcr_object_unref(
        create(&CM, "t", "{\"metadata\":{\"name\":\"in\",\"labels\":{\"kcr.dev/shard-bucket\":\"4\"}}}"));
    kcr_object_unref(
        create(&CM, "t", "{\"metadata\":{\"name\":\"out\",\"labels\":{\"kcr.dev/shard-bucket\":\"5\"}}}"));
    kcr_object_unref(create(&CM, "t", "{\"metadata\":{\"name\":\"none\"}}"));
    relabel("in", "7");
    relabel("out", "3");
    for (int i = 0; i < 500 && seen_count(&w.seen) < 3; i++)
        nap_ms(2);
    kcr_fake_end_watches(fake, NULL);
    pthread_join(w.t, NULL);
    cr_assert_eq(w.result, KCR_OK, "%s", kcr_strerror(w.result));
    cr_assert_eq(w.seen.n, 3);
    cr_expect_eq(w.seen.type[0], KCR_WATCH_ADDED);
    cr_expect_str_eq(w.seen.name[0], "in");
    cr_expect_eq(w.seen.type[1], KCR_WATCH_DELETED);
    cr_expect_str_eq(w.seen.name[1], "in");
    cr_expect_eq(w.seen.type[2], KCR_WATCH_ADDED);
    cr_expect_str_eq(w.seen.name[2], "out");
}

Test(fake, watch_cancel_timeout_idle_and_error, .init = setup, .fini = teardown)
{
    kcr_cancel *cancel;
    cr_assert_eq(kcr_cancel_new(&cancel), KCR_OK);
    struct watch_thread w = {.opts = {.cancel = cancel}};
    start_watch(&w);
    int64_t t0 = kcr__now_ns();
    kcr_cancel_trigger(cancel);
    pthread_join(w.t, NULL);
    cr_assert_eq(w.result, KCR_ERR_CANCELED);
    cr_assert_lt(kcr__now_ns() - t0, KCR_NS_PER_S, "canceled within a second");
    kcr_cancel_free(cancel);

    struct seen s = {.lock = PTHREAD_MUTEX_INITIALIZER};
    /* The server sees timeoutSeconds: 1 ms rounds up to a clean end after 1 s. */
    kcr_request o = {.resource = &CM, .ns = "t", .timeout_ms = 1};
    t0 = kcr__now_ns();
    cr_assert_eq(kcr_client_watch(c, &o, on_event, &s), KCR_OK);
    cr_assert_geq(kcr__now_ns() - t0, KCR_NS_PER_S - 10 * KCR_NS_PER_MS);
    o = (kcr_request){.resource = &CM, .ns = "t", .idle_timeout_ms = 300};
    cr_assert_eq(kcr_client_watch(c, &o, on_event, &s), KCR_ERR_TIMEOUT);

    struct watch_thread e = {.opts = {0}};
    start_watch(&e);
    kcr_fake_watch_error(fake, &CM, 500, "InternalError", "etcd went away");
    pthread_join(e.t, NULL);
    cr_assert_eq(e.result, KCR_ERR_API);
    cr_assert_eq(e.st.code, 500);
    cr_assert_str_eq(e.st.message, "etcd went away");
    cr_assert_eq(e.seen.n, 1);
    cr_assert_eq(e.seen.type[0], KCR_WATCH_ERROR);
    kcr_status_clear(&e.st);
}

/* Many writers, one watcher: every write is seen, in resourceVersion order. */
static void *writer(void *arg)
{
    int id = (int)(intptr_t)arg;
    char json[64];
    for (int i = 0; i < 25; i++) {
        snprintf(json, sizeof json, "{\"metadata\":{\"name\":\"w%d-%d\"}}", id, i);
        kcr_object *o = NULL;
        if (kcr_client_create(c, &(kcr_request){.resource = &CM, .ns = "t", .body = json}, &o) !=
            KCR_OK)
            return (void *)1;
        kcr_object_unref(o);
    }
    return NULL;
}

static kcr_err check_order(const kcr_watch_event *ev, void *ud)
{
    long *last = ud;
    long rv = atol(ev->resource_version);
    if (rv <= last[0])
        return KCR_ERR_STATE;
    last[0] = rv;
    return ++last[1] == 100 ? KCR_ERR_CANCELED : KCR_OK;
}

struct order_watch {
    long state[2];
    kcr_err result;
};

static void *order_watch(void *arg)
{
    struct order_watch *o = arg;
    o->result =
        kcr_client_watch(c, &(kcr_request){.resource = &CM, .ns = "t", .resource_version = "0"},
                         check_order, o->state);
    return NULL;
}

Test(fake, concurrent_writers_one_watcher, .init = setup, .fini = teardown)
{
    struct order_watch ow = {{0, 0}, KCR_OK};
    pthread_t wt, t[4];
    pthread_create(&wt, NULL, order_watch, &ow);
    for (int i = 0; i < 500 && kcr_fake_watch_count(fake, &CM) == 0; i++)
        nap_ms(2);
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, writer, (void *)(intptr_t)i);
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        cr_assert_null(r);
    }
    pthread_join(wt, NULL);
    cr_assert_eq(ow.result, KCR_ERR_CANCELED, "%s", kcr_strerror(ow.result));
    cr_assert_eq(ow.state[1], 100);
}
