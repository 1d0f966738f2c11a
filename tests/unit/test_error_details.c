/* Every error return sets its own detail: for a representative set of
 * failures per module, an older, unrelated detail is set first, then the
 * failure is triggered, and kcr_last_error() must name the new failure (and
 * no longer show the old one). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "kcr/kcr.h"
#include "kcr/fake.h"

#define OLD_DETAIL "an older failure nobody should see now"

static kcr_err taint(void)
{
    return kcr__fail(KCR_ERR_IO, OLD_DETAIL);
}

/* Runs `call` after tainting the detail; checks the code and the detail. */
#define EXPECT_DETAIL(call, want, needle)                                                          \
    do {                                                                                           \
        taint();                                                                                   \
        kcr_err got_ = (call);                                                                     \
        cr_assert_eq(got_, (want), "%s returned %s", #call, kcr_strerror(got_));                   \
        cr_assert(strstr(kcr_last_error(), OLD_DETAIL) == NULL, "%s left the old detail", #call);  \
        cr_assert(strstr(kcr_last_error(), (needle)) != NULL, "%s: detail \"%s\" lacks \"%s\"",    \
                  #call, kcr_last_error(), (needle));                                              \
    } while (0)

static const kcr_resource CM = {"", "v1", "configmaps"};

Test(error_details, workqueue)
{
    kcr_workqueue_options o = {.name = "jobs"};
    kcr_workqueue *q;
    EXPECT_DETAIL(kcr_workqueue_new(&o, NULL), KCR_ERR_INVALID, "NULL");
    cr_assert_eq(kcr_workqueue_new(&o, &q), KCR_OK);
    const char *key = NULL;
    EXPECT_DETAIL(kcr_workqueue_get_timeout(q, 0, &key), KCR_ERR_TIMEOUT, "jobs");
    EXPECT_DETAIL(kcr_workqueue_remove(q, "ghost"), KCR_ERR_NOT_FOUND, "ghost");
    EXPECT_DETAIL(kcr_workqueue_done(q, "ghost"), KCR_ERR_STATE, "ghost");
    kcr_workqueue_shutdown(q);
    EXPECT_DETAIL(kcr_workqueue_add(q, "late-1", NULL), KCR_ERR_SHUTDOWN, "late-1");
    EXPECT_DETAIL(kcr_workqueue_add_rate_limited(q, "late-2"), KCR_ERR_SHUTDOWN, "late-2");
    EXPECT_DETAIL(kcr_workqueue_add(q, "late-3",
        &(kcr_workqueue_add_options){.delay_ms = 1000}), KCR_ERR_SHUTDOWN, "late-3");
    EXPECT_DETAIL(kcr_workqueue_add(q, "late-4",
        &(kcr_workqueue_add_options){.delay_ms = 0}), KCR_ERR_SHUTDOWN, "late-4");
    EXPECT_DETAIL(kcr_workqueue_get(q, &key), KCR_ERR_SHUTDOWN, "jobs");
    kcr_workqueue_free(q);
}

static kcr_err no_process(const char *key, const kcr_delta *d, size_t n, bool initial,
                          bool *requeue, void *ud)
{
    (void)key, (void)d, (void)n, (void)initial, (void)requeue, (void)ud;
    return KCR_OK;
}

static kcr_err fifo_no_process(const kcr_object *obj, bool initial, bool *requeue, void *ud)
{
    (void)obj, (void)initial, (void)requeue, (void)ud;
    return KCR_OK;
}

Test(error_details, store_fifo_and_delta_fifo)
{
    const char *ns, *name;
    size_t ns_len;
    EXPECT_DETAIL(kcr_store_split_key("a/b/c", &ns, &ns_len, &name), KCR_ERR_INVALID, "a/b/c");
    EXPECT_DETAIL(kcr_store_new(NULL), KCR_ERR_INVALID, "kcr_store_new");
    kcr_store *s = NULL;
    cr_assert_eq(kcr_store_new(&s), KCR_OK);
    kcr_object_list l = {0};
    EXPECT_DETAIL(kcr_store_by_index(s, "no-such-index", "x", &l), KCR_ERR_NOT_FOUND,
                  "no-such-index");
    EXPECT_DETAIL(kcr_store_add(s, NULL), KCR_ERR_INVALID, "NULL");

    EXPECT_DETAIL(kcr_fifo_new(NULL), KCR_ERR_INVALID, "kcr_fifo_new");
    kcr_fifo *f = NULL;
    cr_assert_eq(kcr_fifo_new(&f), KCR_OK);
    kcr_fifo_close(f);
    EXPECT_DETAIL(kcr_fifo_pop(f, fifo_no_process, NULL), KCR_ERR_SHUTDOWN, "closed");
    kcr_fifo_free(f);

    kcr_delta_fifo *df = NULL;
    EXPECT_DETAIL(kcr_delta_fifo_new(NULL, NULL), KCR_ERR_INVALID, "kcr_delta_fifo_new");
    kcr_delta_fifo_options half = {.known = kcr_store_known_objects(s)};
    half.known.get_by_key = NULL;
    EXPECT_DETAIL(kcr_delta_fifo_new(&half, &df), KCR_ERR_INVALID, "get_by_key");
    cr_assert_null(df, "*out is NULL on failure");
    cr_assert_eq(kcr_delta_fifo_new(NULL, &df), KCR_OK);
    EXPECT_DETAIL(kcr_delta_fifo_pop_timeout(df, no_process, NULL, 0), KCR_ERR_TIMEOUT,
                  "DeltaFIFO");
    kcr_delta_fifo_close(df);
    EXPECT_DETAIL(kcr_delta_fifo_pop(df, no_process, NULL), KCR_ERR_SHUTDOWN, "closed");
    kcr_delta_fifo_free(df);
    kcr_store_free(s);

    kcr_tombstone *t = NULL;
    EXPECT_DETAIL(kcr_tombstone_new(NULL, NULL, &t), KCR_ERR_INVALID, "kcr_tombstone_new");
    EXPECT_DETAIL(kcr_tombstone_new("ns/a", NULL, NULL), KCR_ERR_INVALID, "kcr_tombstone_new");
    cr_assert_null(t, "*out is NULL on failure");
}

Test(error_details, objects_time_and_status)
{
    kcr_object *o = NULL;
    const char *cut = "{\"metadata\":", *anon = "{\"metadata\":{}}",
               *good = "{\"metadata\":{\"name\":\"a\"},\"list\":[1]}";
    EXPECT_DETAIL(kcr_object_parse(cut, strlen(cut), &o), KCR_ERR_PARSE, "JSON");
    EXPECT_DETAIL(kcr_object_parse(anon, strlen(anon), &o), KCR_ERR_PARSE, "name");
    cr_assert_eq(kcr_object_parse(good, strlen(good), &o), KCR_OK);
    EXPECT_DETAIL(kcr_object_edit_new(o, NULL), KCR_ERR_INVALID, "kcr_object_edit_new");
    kcr_object_edit *e = NULL;
    cr_assert_eq(kcr_object_edit_new(o, &e), KCR_OK);
    EXPECT_DETAIL(kcr_object_edit_set_string(e, "list[5]", "x"), KCR_ERR_NOT_FOUND, "list[5]");
    EXPECT_DETAIL(kcr_object_edit_set_json(e, "spec", "{}", 0), KCR_ERR_NOT_FOUND, "list[5]");
    kcr_object_edit_free(e);
    cr_assert_eq(kcr_object_edit_new(o, &e), KCR_OK);
    EXPECT_DETAIL(kcr_object_edit_set_json(e, "spec", "{nope", 0), KCR_ERR_PARSE, "JSON");
    kcr_object_edit_free(e);
    cr_assert_eq(kcr_object_edit_new(o, &e), KCR_OK);
    EXPECT_DETAIL(kcr_object_edit_merge_patch(e, "[1]", 3), KCR_ERR_PARSE, "not an object");
    kcr_object_edit_free(e);
    kcr_object_unref(o);
    int64_t t;
    EXPECT_DETAIL(kcr_time_parse("yesterday", &t), KCR_ERR_PARSE, "yesterday");
    kcr_status st = {0};
    EXPECT_DETAIL(kcr_status_parse("[1]", 3, &st), KCR_ERR_PARSE, "Status");
}

Test(error_details, client_and_config)
{
    kcr_fake *f;
    kcr_client *c;
    cr_assert_eq(kcr_fake_new(NULL, &f), KCR_OK);
    cr_assert_eq(kcr_fake_client(f, NULL, &c), KCR_OK);
    kcr_object *o = NULL;
    EXPECT_DETAIL(
        kcr_client_get(c, &(kcr_request){.resource = &CM, .ns = "default", .name = "missing-cm"},
                       &o),
        KCR_ERR_NOT_FOUND, "missing-cm");
    EXPECT_DETAIL(kcr_client_get(c, &(kcr_request){.ns = "default", .name = "x"}, &o),
                  KCR_ERR_INVALID, "required");
    EXPECT_DETAIL(kcr_client_list(c, &(kcr_request){.resource = &CM, .label_selector = "app in (x"},
                                  NULL, NULL, NULL),
                  KCR_ERR_BAD_REQUEST, "app in (x");
    EXPECT_DETAIL(
        kcr_client_create(
            c, &(kcr_request){.resource = &CM, .ns = "default", .body = "{not json", .body_len = 9},
            &o),
        KCR_ERR_INVALID, "invalid JSON");
    kcr_client_free(c);
    kcr_fake_free(f);
    kcr_config *cfg = NULL;
    const char *yaml = "apiVersion: v1\nkind: Config\ncurrent-context: nowhere\n";
    EXPECT_DETAIL(kcr_config_parse_kubeconfig(yaml, strlen(yaml), NULL, NULL, &cfg), KCR_ERR_CONFIG,
                  "nowhere");
}

Test(error_details, informer_and_listers)
{
    kcr_fake *f;
    kcr_client *c;
    cr_assert_eq(kcr_fake_new(NULL, &f), KCR_OK);
    cr_assert_eq(kcr_fake_client(f, NULL, &c), KCR_OK);
    kcr_informer *inf;
    cr_assert_eq(kcr_informer_new(c, &CM, NULL, &inf), KCR_OK);
    EXPECT_DETAIL(kcr_informer_wait_for_sync(inf, 0, NULL), KCR_ERR_TIMEOUT, "configmaps");
    kcr_object_list l = {0};
    EXPECT_DETAIL(kcr_lister_list(kcr_informer_store(inf), NULL, "app in (", &l), KCR_ERR_INVALID,
                  "app in (");
    /* it never syncs, so after stop wait_for_sync reports the stop */
    kcr_fake_inject_error(f, &(kcr_fake_error){.verb = KCR_FAKE_LIST,
                                               .resource = &CM,
                                               .times = -1,
                                               .code = 500,
                                               .reason = "InternalError",
                                               .message = "down"});
    cr_assert_eq(kcr_informer_start(inf), KCR_OK);
    EXPECT_DETAIL(kcr_informer_start(inf), KCR_ERR_STATE, "start");
    kcr_informer_stop(inf);
    EXPECT_DETAIL(kcr_informer_wait_for_sync(inf, 0, NULL), KCR_ERR_SHUTDOWN, "stopped");
    kcr_informer_free(inf);

    kcr_informer_factory *fac;
    cr_assert_eq(kcr_informer_factory_new(c, NULL, &fac), KCR_OK);
    kcr_informer_factory_stop(fac);
    EXPECT_DETAIL(kcr_informer_factory_start(fac), KCR_ERR_STATE, "stopped");
    EXPECT_DETAIL(kcr_informer_factory_informer(fac, &CM, NULL, &inf), KCR_ERR_STATE, "stopped");
    kcr_informer_factory_free(fac);
    kcr_client_free(c);
    kcr_fake_free(f);
}

/* kcr_set_error: code returned, message set (also from kcr_last_error()
 * itself), NULL clears. */
Test(error_details, set_error_is_public)
{
    taint();
    cr_assert_eq(kcr_set_error(KCR_ERR_INVALID, "spec.replicas is %d", -1), KCR_ERR_INVALID);
    cr_assert_str_eq(kcr_last_error(), "spec.replicas is -1");
    cr_assert_eq(kcr_set_error(KCR_ERR_API, "applying %s: %s", "x", kcr_last_error()), KCR_ERR_API);
    cr_assert_str_eq(kcr_last_error(), "applying x: spec.replicas is -1");
    cr_assert_eq(kcr_set_error(KCR_OK, NULL), KCR_OK);
    cr_assert_str_eq(kcr_last_error(), "");
}

/* Every constructor clears *out when it fails (docs/architecture.md), so a
 * caller's cleanup may free it; a stale value must not survive. */
#define EXPECT_CLEARED(type, call_with_out)                                                        \
    do {                                                                                           \
        type *out_ = (type *)&out_;                                                                \
        kcr_err got_ = call_with_out;                                                              \
        cr_assert_neq(got_, KCR_OK, "%s succeeded", #call_with_out);                               \
        cr_assert_null(out_, "%s left *out set", #call_with_out);                                  \
    } while (0)

static kcr_object *no_object(const char *key, void *user_data)
{
    (void)key, (void)user_data;
    return NULL;
}

Test(error_details, constructors_clear_out_on_failure)
{
    kcr_delta_fifo_options known_half = {.known.get_by_key = no_object}; /* one of the pair */
    EXPECT_CLEARED(kcr_delta_fifo, kcr_delta_fifo_new(&known_half, &out_));
    EXPECT_CLEARED(kcr_tombstone, kcr_tombstone_new(NULL, NULL, &out_));
    kcr_rate_limiter_exponential_options neg = {.base_delay_ms = -1};
    EXPECT_CLEARED(kcr_rate_limiter, kcr_rate_limiter_exponential_new(&neg, &out_));
    EXPECT_CLEARED(kcr_rate_limiter, kcr_rate_limiter_fast_slow_new(-1, 0, 0, &out_));
    EXPECT_CLEARED(kcr_rate_limiter, kcr_rate_limiter_with_max_wait_new(NULL, 0, &out_));
    EXPECT_CLEARED(kcr_rate_limiter, kcr_rate_limiter_new(NULL, NULL, &out_));
    EXPECT_CLEARED(kcr_client, kcr_client_new(NULL, NULL, &out_));
    kcr_fake_options long_bookmarks = {.bookmark_interval_ms = INT64_MAX};
    EXPECT_CLEARED(kcr_fake, kcr_fake_new(&long_bookmarks, &out_));
    kcr_fake *f;
    kcr_client *c;
    cr_assert_eq(kcr_fake_new(NULL, &f), KCR_OK);
    cr_assert_eq(kcr_fake_client(f, NULL, &c), KCR_OK);
    kcr_delta_fifo *q;
    cr_assert_eq(kcr_delta_fifo_new(NULL, &q), KCR_OK);
    kcr_reflector_sink sink = kcr_delta_fifo_sink(q);
    kcr_reflector_options slow = {.backoff_max_ms = INT64_MAX};
    EXPECT_CLEARED(kcr_reflector, kcr_reflector_new(c, &CM, &sink, &slow, &out_));
    EXPECT_CLEARED(kcr_informer_factory, kcr_informer_factory_new(NULL, NULL, &out_));
    EXPECT_CLEARED(kcr_informer, kcr_informer_new(NULL, &CM, NULL, &out_));
    EXPECT_CLEARED(kcr_manager, kcr_manager_new(NULL, NULL, &out_));
    kcr_delta_fifo_free(q);
    kcr_client_free(c);
    kcr_fake_free(f);
    /* and a NULL out is a clear error, not a crash */
    cr_assert_eq(kcr_client_new(NULL, NULL, NULL), KCR_ERR_INVALID);
    cr_assert_eq(kcr_fake_new(NULL, NULL), KCR_ERR_INVALID);
    cr_assert_eq(kcr_cancel_new(NULL), KCR_ERR_INVALID);
}
