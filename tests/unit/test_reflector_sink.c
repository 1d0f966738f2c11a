/* The reflector's sink interface: what a custom sink receives (replace with
 * its resourceVersion, add, update, delete, bookmark, each with its
 * user_data), that a sink missing a required operation is refused, and that
 * a sink error makes the reflector record a failure and relist. */
#include <criterion/criterion.h>
#include <pthread.h>

#include "tests/unit/informer_fixtures.h"
#include "kcr/fake.h"

#define MAX_EVENTS 64

typedef struct sink_log {
    pthread_mutex_t mu;
    char ev[MAX_EVENTS][96]; /* "replace 3 @rv", "add default/x", "bookmark rv" */
    size_t n;
    size_t replaces;
    bool fail_adds; /* on_add returns KCR_ERR_NOMEM */
} sink_log;

static void note(sink_log *l, const char *what, const char *detail)
{
    pthread_mutex_lock(&l->mu);
    if (l->n < MAX_EVENTS)
        snprintf(l->ev[l->n++], sizeof l->ev[0], "%s %s", what, detail);
    pthread_mutex_unlock(&l->mu);
}

static void note_obj(sink_log *l, const char *what, const kcr_object *obj)
{
    char detail[80];
    snprintf(detail, sizeof detail, "%s/%s", kcr_object_namespace(obj), kcr_object_name(obj));
    note(l, what, detail);
}

static kcr_err s_add(const kcr_object *obj, void *ud)
{
    sink_log *l = ud;
    note_obj(l, "add", obj);
    return l->fail_adds ? KCR_ERR_NOMEM : KCR_OK;
}

static kcr_err s_update(const kcr_object *obj, void *ud)
{
    note_obj(ud, "update", obj);
    return KCR_OK;
}

static kcr_err s_delete(const kcr_object *obj, void *ud)
{
    note_obj(ud, "delete", obj);
    return KCR_OK;
}

static kcr_err s_replace(kcr_object *const *objs, size_t n, const char *rv, void *ud)
{
    sink_log *l = ud;
    char detail[80];
    snprintf(detail, sizeof detail, "%zu %s %s", n, n ? kcr_object_name(objs[0]) : "-", rv);
    note(l, "replace", detail);
    pthread_mutex_lock(&l->mu);
    l->replaces++;
    pthread_mutex_unlock(&l->mu);
    return KCR_OK;
}

static kcr_err s_bookmark(const char *rv, void *ud)
{
    note(ud, "bookmark", rv);
    return KCR_OK;
}

static size_t n_events(sink_log *l)
{
    pthread_mutex_lock(&l->mu);
    size_t n = l->n;
    pthread_mutex_unlock(&l->mu);
    return n;
}

static size_t n_replaces(sink_log *l)
{
    pthread_mutex_lock(&l->mu);
    size_t n = l->replaces;
    pthread_mutex_unlock(&l->mu);
    return n;
}

static kcr_reflector_sink log_sink(sink_log *l)
{
    return (kcr_reflector_sink){.on_add = s_add,
                                .on_update = s_update,
                                .on_delete = s_delete,
                                .on_replace = s_replace,
                                .on_bookmark = s_bookmark,
                                .user_data = l};
}

Test(reflector_sink, a_custom_sink_gets_replace_add_update_delete_and_bookmark)
{
    kcr_fake *fake;
    cr_assert_eq(kcr_fake_new(NULL, &fake), KCR_OK);
    seed_many(fake, "default", 2);
    kcr_client *c;
    cr_assert_eq(kcr_fake_client(fake, NULL, &c), KCR_OK);
    sink_log l = {.mu = PTHREAD_MUTEX_INITIALIZER};
    kcr_reflector_sink sink = log_sink(&l);
    kcr_reflector *r;
    cr_assert_eq(kcr_reflector_new(c, &CM, &sink, NULL, &r), KCR_OK);
    uint64_t list_rv = kcr_fake_resource_version(fake);
    cr_assert_eq(kcr_reflector_start(r), KCR_OK);
    WAIT_FOR(kcr_fake_watch_count(fake, &CM) == 1, 5000);
    cr_assert_eq(kcr_fake_watch_count(fake, &CM), 1);

    kcr_object_unref(seed_cm(fake, "default", "new", "a", "b"));
    cr_assert_eq(patch_cm(c, "default", "cm-00001", "changed"), KCR_OK);
    cr_assert_eq(kcr_client_delete(
                     c, &(kcr_request){.resource = &CM, .ns = "default", .name = "cm-00000"}, NULL),
                 KCR_OK);
    WAIT_FOR(n_events(&l) == 4, 5000);
    cr_assert_eq(n_events(&l), 4);
    kcr_fake_bookmark(fake, &CM);
    WAIT_FOR(n_events(&l) == 5, 5000);
    kcr_reflector_stop(r);

    char want[80];
    snprintf(want, sizeof want, "replace 2 cm-00000 %llu", (unsigned long long)list_rv);
    cr_assert_str_eq(l.ev[0], want);
    cr_assert_str_eq(l.ev[1], "add default/new");
    cr_assert_str_eq(l.ev[2], "update default/cm-00001");
    cr_assert_str_eq(l.ev[3], "delete default/cm-00000");
    snprintf(want, sizeof want, "bookmark %llu",
             (unsigned long long)kcr_fake_resource_version(fake));
    cr_assert_str_eq(l.ev[4], want);
    char *rv = kcr_reflector_last_sync_rv(r);
    cr_assert_str_eq(rv, want + strlen("bookmark "));
    free(rv);
    kcr_reflector_free(r);
    kcr_client_free(c);
    kcr_fake_free(fake);
}

Test(reflector_sink, a_sink_without_a_required_operation_is_refused)
{
    kcr_fake *fake;
    cr_assert_eq(kcr_fake_new(NULL, &fake), KCR_OK);
    kcr_client *c;
    cr_assert_eq(kcr_fake_client(fake, NULL, &c), KCR_OK);
    sink_log l = {.mu = PTHREAD_MUTEX_INITIALIZER};
    kcr_reflector_sink sink = log_sink(&l);
    sink.on_replace = NULL;
    kcr_reflector *r = (kcr_reflector *)&l;
    cr_assert_eq(kcr_reflector_new(c, &CM, &sink, NULL, &r), KCR_ERR_INVALID);
    cr_assert_null(r);
    cr_assert(strstr(kcr_last_error(), "on_replace"), "%s", kcr_last_error());
    cr_assert_eq(kcr_reflector_new(c, &CM, NULL, NULL, &r), KCR_ERR_INVALID);
    sink = log_sink(&l);
    sink.on_bookmark = NULL; /* optional */
    cr_assert_eq(kcr_reflector_new(c, &CM, &sink, NULL, &r), KCR_OK);
    kcr_reflector_free(r);
    kcr_client_free(c);
    kcr_fake_free(fake);
}

Test(reflector_sink, a_sink_error_is_a_failure_and_the_reflector_relists)
{
    kcr_fake *fake;
    cr_assert_eq(kcr_fake_new(NULL, &fake), KCR_OK);
    seed_many(fake, "default", 1);
    kcr_client *c;
    cr_assert_eq(kcr_fake_client(fake, NULL, &c), KCR_OK);
    sink_log l = {.mu = PTHREAD_MUTEX_INITIALIZER, .fail_adds = true};
    kcr_reflector_sink sink = log_sink(&l);
    kcr_reflector_options o = {.backoff_initial_ms = 5, .backoff_max_ms = 20};
    kcr_reflector *r;
    cr_assert_eq(kcr_reflector_new(c, &CM, &sink, &o, &r), KCR_OK);
    cr_assert_eq(kcr_reflector_start(r), KCR_OK);
    WAIT_FOR(kcr_fake_watch_count(fake, &CM) == 1, 5000);
    kcr_object_unref(seed_cm(fake, "default", "new", "a", "b"));
    WAIT_FOR(n_replaces(&l) >= 2, 5000);
    cr_assert_geq(n_replaces(&l), 2, "a failed add leads to a relist");
    kcr_reflector_stats st;
    kcr_reflector_get_stats(r, &st);
    cr_assert_geq(st.failures, 1);
    kcr_reflector_free(r);
    kcr_client_free(c);
    kcr_fake_free(fake);
}
