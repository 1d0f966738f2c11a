/* The in-memory fake API's verbs: CRUD semantics, resourceVersion and
 * generation, conflicts, status subresource, patches, finalizers and
 * preconditions, error injection and hooks, metadata-only gets,
 * cancellation and option limits. Lists, watches and discovery have their
 * own files (test_fake_list.c, test_fake_watch.c, test_fake_discovery.c);
 * the write rules are in test_fake_writes.c. */
#include "tests/unit/fake_fixture.h"
#include "kcr/fake.h"

Test(fake, create_get_update_delete, .init = setup, .fini = teardown)
{
    kcr_object *a = create(&CM, "ns1", "{\"metadata\":{\"name\":\"a\"},\"data\":{\"k\":\"1\"}}");
    cr_assert_str_eq(kcr_object_namespace(a), "ns1");
    cr_assert_str_eq(kcr_object_kind(a), "ConfigMap");
    cr_assert_str_eq(kcr_object_api_version(a), "v1");
    cr_assert_eq(strlen(kcr_object_uid(a)), 36);
    cr_assert_str_eq(kcr_object_resource_version(a), "1");
    cr_assert_eq(kcr_object_generation(a), 1);
    cr_assert_eq(strlen(str(a, "metadata.creationTimestamp")), 20);
    cr_assert_eq(kcr_fake_resource_version(fake), 1);

    kcr_object *got = NULL;
    cr_assert_eq(kcr_client_get(c, &(kcr_request){.resource = &CM, .ns = "ns1", .name = "a"}, &got),
                 KCR_OK);
    cr_assert_str_eq(kcr_object_uid(got), kcr_object_uid(a));
    kcr_object_unref(got);

    /* Changing data (outside metadata/status) bumps RV and generation. */
    kcr_object *b = NULL;
    cr_assert_eq(
        kcr_client_update(
            c,
            &(kcr_request){.resource = &CM,
                           .ns = "ns1",
                           .body = "{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"1\"},"
                                   "\"data\":{\"k\":\"2\"}}"},
            &b),
        KCR_OK, "%s", kcr_last_error());
    cr_assert_str_eq(kcr_object_resource_version(b), "2");
    cr_assert_eq(kcr_object_generation(b), 2);
    cr_assert_str_eq(kcr_object_uid(b), kcr_object_uid(a), "uid survives updates");
    cr_assert_str_eq(str(b, "metadata.creationTimestamp"), str(a, "metadata.creationTimestamp"));

    /* A label change bumps RV but not generation. */
    kcr_object *l = NULL;
    cr_assert_eq(
        kcr_client_update(
            c,
            &(kcr_request){.resource = &CM,
                           .ns = "ns1",
                           .body = "{\"metadata\":{\"name\":\"a\",\"labels\":{\"x\":\"y\"}},"
                                   "\"data\":{\"k\":\"2\"}}"},
            &l),
        KCR_OK);
    cr_assert_str_eq(kcr_object_resource_version(l), "3");
    cr_assert_eq(kcr_object_generation(l), 2);

    /* A no-op update writes nothing. */
    kcr_object *same = NULL;
    cr_assert_eq(
        kcr_client_update(
            c,
            &(kcr_request){.resource = &CM,
                           .ns = "ns1",
                           .body = "{\"metadata\":{\"name\":\"a\",\"labels\":{\"x\":\"y\"}},"
                                   "\"data\":{\"k\":\"2\"}}"},
            &same),
        KCR_OK);
    cr_assert_str_eq(kcr_object_resource_version(same), "3");
    cr_assert_eq(kcr_fake_resource_version(fake), 3);

    kcr_object *gone = NULL;
    cr_assert_eq(
        kcr_client_delete(c, &(kcr_request){.resource = &CM, .ns = "ns1", .name = "a"}, &gone),
        KCR_OK);
    cr_assert_not_null(gone);
    cr_assert_str_eq(kcr_object_resource_version(gone), "4");
    kcr_status st = {0};
    cr_assert_eq(
        kcr_client_get(c, &(kcr_request){.resource = &CM, .ns = "ns1", .name = "a", .status = &st},
                       &got),
        KCR_ERR_NOT_FOUND);
    cr_assert_null(got);
    cr_assert_eq(st.code, 404);
    cr_assert_str_eq(st.reason, "NotFound");
    cr_assert_str_eq(st.message, "configmaps \"a\" not found");
    cr_assert_str_eq(st.details.name, "a");
    cr_assert_str_eq(st.details.kind, "configmaps");
    cr_assert_str_eq(kcr_last_error(), "404 NotFound: configmaps \"a\" not found");
    kcr_status_clear(&st);
    for (kcr_object **p = (kcr_object *[]){a, b, l, same, gone, NULL}; *p; p++)
        kcr_object_unref(*p);
}

Test(fake, conflicts_exists_and_invalid, .init = setup, .fini = teardown)
{
    kcr_object_unref(create(&CM, "d", "{\"metadata\":{\"name\":\"a\"}}"));
    cr_assert_eq(kcr_client_patch(c,
                                  &(kcr_request){.resource = &CM,
                                                 .ns = "d",
                                                 .name = "a",
                                                 .patch_type = KCR_PATCH_MERGE,
                                                 .body = "{\"data\":{\"v\":\"1\"}}"},
                                  NULL),
                 KCR_OK);
    kcr_status st = {0};
    cr_assert_eq(
        kcr_client_update(
            c,
            &(kcr_request){.resource = &CM,
                           .ns = "d",
                           .body = "{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"1\"},"
                                   "\"data\":{\"v\":\"2\"}}",
                           .status = &st},
            NULL),
        KCR_ERR_CONFLICT);
    cr_assert_eq(st.code, 409);
    cr_assert_str_eq(st.reason, "Conflict");
    cr_assert(strstr(st.message, "the object has been modified") != NULL);
    cr_assert_eq(kcr_client_create(c,
                                   &(kcr_request){.resource = &CM,
                                                  .ns = "d",
                                                  .body = "{\"metadata\":{\"name\":\"a\"}}",
                                                  .status = &st},
                                   NULL),
                 KCR_ERR_EXISTS);
    cr_assert_str_eq(st.reason, "AlreadyExists");
    cr_assert_eq(kcr_client_create(c,
                                   &(kcr_request){.resource = &CM,
                                                  .ns = "d",
                                                  .body = "{\"metadata\":{\"name\":\"Bad_Name\"}}",
                                                  .status = &st},
                                   NULL),
                 KCR_ERR_INVALID_OBJECT);
    cr_assert_eq(st.code, 422);
    cr_assert_eq(st.details.n_causes, 1);
    cr_assert_str_eq(st.details.causes[0].field, "metadata.name");
    cr_assert_eq(
        kcr_client_create(c,
                          &(kcr_request){.resource = &CM,
                                         .ns = "other",
                                         .body = "{\"metadata\":{\"name\":\"x\",\"namespace\":"
                                                 "\"d\"}}",
                                         .status = &st},
                          NULL),
        KCR_ERR_BAD_REQUEST);
    cr_assert_eq(st.code, 400);
    kcr_object *g = NULL;
    cr_assert_eq(
        kcr_client_create(c,
                          &(kcr_request){.resource = &CM,
                                         .ns = "d",
                                         .body = "{\"metadata\":{\"generateName\":\"gen-\"}}"},
                          &g),
        KCR_OK);
    cr_assert_eq(strncmp(kcr_object_name(g), "gen-", 4), 0);
    cr_assert_eq(strlen(kcr_object_name(g)), 9);
    kcr_object_unref(g);
    kcr_status_clear(&st);
}

Test(fake, status_subresource, .init = setup, .fini = teardown)
{
    kcr_object_unref(create(&DEPLOY, "d", "{\"metadata\":{\"name\":\"w\"},\"spec\":{\"replicas\":1}}"));
    kcr_object *o = NULL;
    cr_assert_eq(
        kcr_client_update(
            c,
            &(kcr_request){.resource = &DEPLOY,
                           .ns = "d",
                           .subresource = "status",
                           .body = "{\"metadata\":{\"name\":\"w\"},\"spec\":{\"replicas\":9},"
                                   "\"status\":{\"readyReplicas\":1}}"},
            &o),
        KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_value_int(kcr_object_get(o, "status.readyReplicas")), 1);
    cr_assert_eq(kcr_value_int(kcr_object_get(o, "spec.replicas")), 1, "status update keeps spec");
    cr_assert_eq(kcr_object_generation(o), 1);
    kcr_object_unref(o);
    cr_assert_eq(
        kcr_client_update(
            c,
            &(kcr_request){.resource = &DEPLOY,
                           .ns = "d",
                           .body = "{\"metadata\":{\"name\":\"w\"},\"spec\":{\"replicas\":3},"
                                   "\"status\":{\"readyReplicas\":7}}"},
            &o),
        KCR_OK);
    cr_assert_eq(kcr_value_int(kcr_object_get(o, "status.readyReplicas")), 1, "update keeps status");
    cr_assert_eq(kcr_value_int(kcr_object_get(o, "spec.replicas")), 3);
    cr_assert_eq(kcr_object_generation(o), 2);
    kcr_object_unref(o);
}

Test(fake, patches, .init = setup, .fini = teardown)
{
    kcr_object_unref(create(&CM, "d", "{\"metadata\":{\"name\":\"p\"},\"data\":{\"a\":\"1\",\"b\":\"2\"}}"));
    kcr_object *o = NULL;
    cr_assert_eq(kcr_client_patch(c,
                                  &(kcr_request){.resource = &CM,
                                                 .ns = "d",
                                                 .name = "p",
                                                 .patch_type = KCR_PATCH_MERGE,
                                                 .body = "{\"data\":{\"a\":null,\"c\":\"3\"}}"},
                                  &o),
                 KCR_OK);
    cr_assert_eq(kcr_value_get_type(kcr_object_get(o, "data.a")), KCR_VALUE_ABSENT);
    cr_assert_str_eq(str(o, "data.c"), "3");
    kcr_object_unref(o);
    cr_assert_eq(
        kcr_client_patch(
            c,
            &(kcr_request){
                .resource = &CM,
                .ns = "d",
                .name = "p",
                .body = "[{\"op\":\"replace\",\"path\":\"/data/b\",\"value\":\"x\"},"
                        "{\"op\":\"add\",\"path\":\"/metadata/labels\",\"value\":{\"l\":\"v\"}}]"},
            &o),
        KCR_OK, "%s", kcr_last_error());
    cr_assert_str_eq(str(o, "data.b"), "x");
    cr_assert_str_eq(kcr_object_label(o, "l"), "v");
    kcr_object_unref(o);
    kcr_status st = {0};
    cr_assert_eq(
        kcr_client_patch(
            c,
            &(kcr_request){.resource = &CM,
                           .ns = "d",
                           .name = "p",
                           .body = "[{\"op\":\"test\",\"path\":\"/data/b\",\"value\":\"nope\"}]",
                           .status = &st},
            NULL),
        KCR_ERR_INVALID_OBJECT);
    cr_assert_eq(kcr_client_patch(c,
                                  &(kcr_request){.resource = &CM,
                                                 .ns = "d",
                                                 .name = "p",
                                                 .patch_type = KCR_PATCH_STRATEGIC,
                                                 .body = "{\"data\":{\"s\":\"1\"}}"},
                                  &o),
                 KCR_OK);
    cr_assert_str_eq(str(o, "data.s"), "1");
    kcr_object_unref(o);
    cr_assert_eq(
        kcr_client_patch(
            c,
            &(kcr_request){
                .resource = &CM,
                .ns = "d",
                .name = "new",
                .patch_type = KCR_PATCH_APPLY,
                .body = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"data\":{\"z\":\"1\"}}"},
            &o),
        KCR_OK, "apply defaults its field manager to the program's name: %s", kcr_last_error());
    kcr_object_unref(o);
    cr_assert_eq(
        kcr_client_patch(
            c,
            &(kcr_request){
                .resource = &CM,
                .ns = "d",
                .name = "new",
                .patch_type = KCR_PATCH_APPLY,
                .body = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"data\":{\"z\":\"1\"}}",
                .field_manager = "test"},
            &o),
        KCR_OK, "apply creates: %s", kcr_last_error());
    cr_assert_str_eq(kcr_object_name(o), "new");
    kcr_object_unref(o);
    cr_assert_eq(kcr_client_patch(c,
                                  &(kcr_request){.resource = &CM,
                                                 .ns = "d",
                                                 .name = "missing",
                                                 .patch_type = KCR_PATCH_MERGE,
                                                 .body = "{}",
                                                 .status = &st},
                                  NULL),
                 KCR_ERR_NOT_FOUND);
    cr_assert_eq(
        kcr_client_patch(
            c,
            &(kcr_request){.resource = &CM,
                           .ns = "d",
                           .name = "p",
                           .patch_type = KCR_PATCH_MERGE,
                           .body =
                               "{\"metadata\":{\"resourceVersion\":\"1\"},\"data\":{\"q\":\"1\"}}",
                           .status = &st},
            NULL),
        KCR_ERR_CONFLICT, "a patch with a stale resourceVersion conflicts");
    kcr_status_clear(&st);
}

Test(fake, finalizers_and_preconditions, .init = setup, .fini = teardown)
{
    kcr_object *o = create(&CM, "d", "{\"metadata\":{\"name\":\"f\",\"finalizers\":[\"x/y\"]}}");
    kcr_status st = {0};
    kcr_request pre = {
        .resource = &CM, .ns = "d", .name = "f", .precondition_uid = "not-the-uid", .status = &st};
    cr_assert_eq(kcr_client_delete(c, &pre, NULL), KCR_ERR_CONFLICT);
    cr_assert(strstr(st.message, "Precondition failed") != NULL);
    pre = (kcr_request){.resource = &CM,
                        .ns = "d",
                        .name = "f",
                        .status = &st,
                        .precondition_uid = kcr_object_uid(o),
                        .precondition_resource_version = "1"};
    kcr_object *d = NULL;
    cr_assert_eq(kcr_client_delete(c, &pre, &d), KCR_OK, "%s", kcr_last_error());
    cr_assert(kcr_object_is_deleting(d));
    cr_assert_str_eq(kcr_object_resource_version(d), "2");
    kcr_object_unref(d);
    kcr_object *still = NULL;
    cr_assert_eq(kcr_client_get(c, &(kcr_request){.resource = &CM, .ns = "d", .name = "f"}, &still),
                 KCR_OK);
    cr_assert(kcr_object_is_deleting(still));
    kcr_object_unref(still);
    /* Removing the last finalizer deletes it. */
    cr_assert_eq(kcr_client_patch(c,
                                  &(kcr_request){.resource = &CM,
                                                 .ns = "d",
                                                 .name = "f",
                                                 .patch_type = KCR_PATCH_MERGE,
                                                 .body = "{\"metadata\":{\"finalizers\":null}}"},
                                  NULL),
                 KCR_OK);
    cr_assert_eq(kcr_client_get(c, &(kcr_request){.resource = &CM, .ns = "d", .name = "f"}, &still),
                 KCR_ERR_NOT_FOUND);
    kcr_object_unref(o);
    kcr_status_clear(&st);
}

/* ---------------------------------- injection and hooks ---------------------------------- */

struct hook_log {
    int calls;
    kcr_fake_verb last;
};

static void hook(kcr_fake_verb verb, const kcr_resource *res, const char *ns, const char *name,
                 void *ud)
{
    struct hook_log *h = ud;
    h->calls++;
    h->last = verb;
}

Test(fake, error_injection_and_hooks, .init = setup, .fini = teardown)
{
    struct hook_log h = {0};
    kcr_fake_set_hook(fake, hook, &h);
    cr_assert_eq(kcr_fake_inject_error(fake, &(kcr_fake_error){.verb = KCR_FAKE_CREATE,
                                                               .resource = &CM,
                                                               .times = 2,
                                                               .code = 429,
                                                               .reason = "TooManyRequests",
                                                               .message = "slow down"}),
                 KCR_OK);
    kcr_status st = {0};
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(kcr_client_create(c,
                                       &(kcr_request){.resource = &CM,
                                                      .ns = "e",
                                                      .body = "{\"metadata\":{\"name\":\"a\"}}",
                                                      .status = &st},
                                       NULL),
                     KCR_ERR_TOO_MANY);
        cr_assert_eq(st.code, 429);
        cr_assert_str_eq(st.message, "slow down");
    }
    kcr_object_unref(create(&CM, "e", "{\"metadata\":{\"name\":\"a\"}}"));
    cr_assert_eq(
        kcr_fake_inject_error(
            fake,
            &(kcr_fake_error){.times = -1, .code = 403, .reason = "Forbidden", .message = "no"}),
        KCR_OK);
    cr_assert_eq(
        kcr_client_get(
            c, &(kcr_request){.resource = &DEPLOY, .ns = "e", .name = "x", .status = &st}, NULL),
        KCR_ERR_FORBIDDEN);
    cr_assert_eq(kcr_client_list(c, &(kcr_request){.resource = &CM, .ns = "e", .status = &st}, NULL,
                                 NULL, NULL),
                 KCR_ERR_FORBIDDEN);
    cr_assert_eq(kcr_client_watch(c, &(kcr_request){.resource = &CM, .ns = "e", .status = &st},
                                  on_event, NULL),
                 KCR_ERR_FORBIDDEN);
    kcr_fake_clear_errors(fake);
    cr_assert_eq(
        kcr_client_get(c, &(kcr_request){.resource = &CM, .ns = "e", .name = "a", .status = &st},
                       NULL),
        KCR_OK);
    cr_assert_eq(h.calls, 7);
    cr_assert_eq(h.last, KCR_FAKE_GET);
    cr_assert_eq(kcr_fake_count(fake, KCR_FAKE_CREATE, &CM), 3);
    cr_assert_eq(kcr_fake_count(fake, KCR_FAKE_GET, NULL), 2);
    cr_assert_eq(kcr_fake_count(fake, KCR_FAKE_ANY, NULL), 7);
    kcr_status_clear(&st);
}

Test(fake, metadata_only, .init = setup, .fini = teardown)
{
    kcr_object_unref(create(&CM, "m", "{\"metadata\":{\"name\":\"a\"},\"data\":{\"big\":\"x\"}}"));
    kcr_object *o = NULL;
    cr_assert_eq(
        kcr_client_get(
            c, &(kcr_request){.resource = &CM, .ns = "m", .name = "a", .metadata_only = true}, &o),
        KCR_OK);
    cr_assert_str_eq(kcr_object_kind(o), "PartialObjectMetadata");
    cr_assert_eq(kcr_value_get_type(kcr_object_get(o, "data")), KCR_VALUE_ABSENT);
    cr_assert_str_eq(kcr_object_name(o), "a");
    kcr_object_unref(o);
}

/* Every verb takes a cancellation token; one that already fired stops the
 * call before it touches the (fake) server. */
Test(fake, triggered_cancel_stops_every_verb, .init = setup, .fini = teardown)
{
    kcr_object_unref(create(&CM, "d", "{\"metadata\":{\"name\":\"a\"}}"));
    kcr_cancel *cancel;
    cr_assert_eq(kcr_cancel_new(&cancel), KCR_OK);
    kcr_cancel_trigger(cancel);
    const char *cm = "{\"metadata\":{\"name\":\"b\"}}";
    kcr_object *o = NULL;
    cr_assert_eq(
        kcr_client_get(c, &(kcr_request){.resource = &CM, .ns = "d", .name = "a", .cancel = cancel},
                       &o),
        KCR_ERR_CANCELED);
    cr_assert_eq(
        kcr_client_create(
            c, &(kcr_request){.resource = &CM, .ns = "d", .body = cm, .cancel = cancel}, &o),
        KCR_ERR_CANCELED);
    cr_assert_eq(
        kcr_client_update(
            c, &(kcr_request){.resource = &CM, .ns = "d", .body = cm, .cancel = cancel}, &o),
        KCR_ERR_CANCELED);
    cr_assert_eq(
        kcr_client_update(
            c,
            &(kcr_request){
                .resource = &CM, .ns = "d", .subresource = "status", .body = cm, .cancel = cancel},
            &o),
        KCR_ERR_CANCELED);
    cr_assert_eq(kcr_client_patch(c,
                                  &(kcr_request){.resource = &CM,
                                                 .ns = "d",
                                                 .name = "a",
                                                 .patch_type = KCR_PATCH_MERGE,
                                                 .body = "{}",
                                                 .cancel = cancel},
                                  &o),
                 KCR_ERR_CANCELED);
    cr_assert_eq(
        kcr_client_delete(
            c, &(kcr_request){.resource = &CM, .ns = "d", .name = "a", .cancel = cancel}, &o),
        KCR_ERR_CANCELED);
    cr_assert_eq(kcr_client_request(c, "/api", &(kcr_raw_options){.cancel = cancel}, NULL, NULL),
                 KCR_ERR_CANCELED);
    kcr_api_resource ar;
    cr_assert_eq(kcr_client_resolve(c, "cm", &(kcr_resolve_options){.cancel = cancel}, &ar),
                 KCR_ERR_CANCELED);
    cr_assert_eq(kcr_client_resolve_kind(c, &(kcr_gvk){"", "v1", "ConfigMap"},
                                         &(kcr_resolve_options){.cancel = cancel}, &ar),
                 KCR_ERR_CANCELED);
    cr_assert(strstr(kcr_last_error(), "canceled") != NULL, "%s", kcr_last_error());
    cr_assert_null(o);
    /* nothing was written or deleted */
    cr_assert_eq(kcr_client_get(c, &(kcr_request){.resource = &CM, .ns = "d", .name = "a"}, &o),
                 KCR_OK);
    kcr_object_unref(o);
    cr_assert_eq(kcr_client_get(c, &(kcr_request){.resource = &CM, .ns = "d", .name = "b"}, &o),
                 KCR_ERR_NOT_FOUND);
    kcr_cancel_reset(cancel);
    cr_assert_eq(
        kcr_client_get(c, &(kcr_request){.resource = &CM, .ns = "d", .name = "a", .cancel = cancel},
                       &o),
        KCR_OK, "a reset token");
    kcr_object_unref(o);
    cr_assert_eq(kcr_client_resolve(c, "cm", &(kcr_resolve_options){.cancel = cancel}, &ar),
                 KCR_OK);
    cr_assert_str_eq(ar.kind, "ConfigMap");
    kcr_cancel_free(cancel);
}

Test(fake, durations_beyond_35_years_are_refused, .init = setup, .fini = teardown)
{
    const int64_t too_long = (INT64_C(1) << 40) + 1;
    kcr_fake *other = (kcr_fake *)&too_long;
    kcr_fake_options fo = {.bookmark_interval_ms = too_long};
    cr_assert_eq(kcr_fake_new(&fo, &other), KCR_ERR_INVALID);
    cr_assert_null(other);
    cr_assert(strstr(kcr_last_error(), "bookmark_interval_ms"), "%s", kcr_last_error());
    kcr_request lo = {.resource = &CM, .ns = "d", .timeout_ms = too_long};
    cr_assert_eq(kcr_client_list(c, &lo, NULL, NULL, NULL), KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "timeout_ms"), "%s", kcr_last_error());
    lo = (kcr_request){.resource = &CM, .ns = "d", .idle_timeout_ms = INT64_MAX};
    cr_assert_eq(kcr_client_watch(c, &lo, NULL, NULL), KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "idle_timeout_ms"), "%s", kcr_last_error());
    kcr_object_unref(create(&CM, "d", "{\"metadata\":{\"name\":\"a\"}}"));
    kcr_request d = {.resource = &CM,
                     .ns = "d",
                     .name = "a",
                     .has_grace_period = true,
                     .grace_period_ms = too_long};
    cr_assert_eq(kcr_client_delete(c, &d, NULL), KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "grace period"), "%s", kcr_last_error());
    d.grace_period_ms = 0;
    cr_assert_eq(kcr_client_delete(c, &d, NULL), KCR_OK, "%s", kcr_last_error());
}

Test(fake, one_request_per_verb_refuses_what_the_verb_cannot_take, .init = setup, .fini = teardown)
{
    kcr_object *a = create(&CM, "r", "{\"metadata\":{\"name\":\"a\"},\"data\":{\"k\":\"1\"}}");
    kcr_object *out = a; /* every failing verb clears *out */
    const char *body = "{\"metadata\":{\"name\":\"b\"}}";
    struct {
        kcr_err got;
        const char *says;
    } refused[] = {
        {kcr_client_get(c, &(kcr_request){.resource = &CM, .ns = "r", .name = "a", .body = body},
                        &out),
         "get takes no body"},
        {kcr_client_delete(c, &(kcr_request){.resource = &CM, .ns = "r", .name = "a", .object = a},
                           &out),
         "delete takes no body"},
        {kcr_client_create(c, &(kcr_request){.resource = &CM, .ns = "r"}, &out), "create: no body"},
        {kcr_client_update(c, &(kcr_request){.resource = &CM, .object = a, .body = body}, &out),
         "both an object and a body"},
        {kcr_client_list(c, &(kcr_request){.resource = &CM, .ns = "r", .name = "a"}, NULL, NULL,
                         NULL),
         "list takes no name"},
        {kcr_client_get(c, NULL, &out), "a client and a request are required"},
        {kcr_client_get(c, &(kcr_request){.ns = "r", .name = "a"}, &out), "a resource"},
        {kcr_client_patch(
             c,
             &(kcr_request){
                 .resource = &CM, .ns = "r", .body = "{}", .patch_type = KCR_PATCH_MERGE},
             &out),
         "patch: no object name"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        cr_assert_eq(refused[i].got, KCR_ERR_INVALID, "%s", refused[i].says);
    cr_assert_null(out);
    cr_assert(strstr(kcr_last_error(), "patch: no object name"), "%s", kcr_last_error());

    /* A kcr_object body names the object: namespace and name come from it. */
    kcr_object_edit *e = NULL;
    cr_assert_eq(kcr_object_edit_new(a, &e), KCR_OK);
    kcr_object_edit_set_string(e, "data.k", "2");
    kcr_object_edit_set_string(e, "status.phase", "Ready");
    kcr_object *want = NULL;
    cr_assert_eq(kcr_object_edit_freeze(e, &want), KCR_OK, "%s", kcr_last_error());
    kcr_object_edit_free(e);
    cr_assert_eq(kcr_client_update(c, &(kcr_request){.resource = &CM, .object = want}, &out),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_str_eq(str(out, "data.k"), "2");
    kcr_object_unref(want);
    want = out; /* the current resourceVersion: a merge patch of it applies */
    cr_assert_eq(kcr_client_patch(
                     c,
                     &(kcr_request){.resource = &CM, .object = want, .patch_type = KCR_PATCH_MERGE},
                     &out),
                 KCR_OK, "patch takes the name and namespace of its object: %s", kcr_last_error());
    cr_assert_str_eq(kcr_object_namespace(out), "r");
    cr_assert_str_eq(kcr_object_name(out), "a");
    kcr_object_unref(out);
    kcr_object_unref(want);

    /* The server's Status reaches the caller through the request. */
    kcr_status st = {0};
    cr_assert_eq(
        kcr_client_get(c, &(kcr_request){.resource = &CM, .ns = "r", .name = "nope", .status = &st},
                       &out),
        KCR_ERR_NOT_FOUND);
    cr_assert_eq(st.code, 404);
    cr_assert_str_eq(st.reason, "NotFound");
    cr_assert(strstr(st.message, "nope"), "%s", st.message);
    kcr_status_clear(&st);
    kcr_object_unref(a);
}

Test(fake, injected_errors_match_by_one_struct, .init = setup, .fini = teardown)
{
    kcr_object_unref(create(&CM, "r", "{\"metadata\":{\"name\":\"a\"}}"));
    cr_assert_eq(kcr_fake_inject_error(fake, &(kcr_fake_error){.verb = KCR_FAKE_GET,
                                                               .resource = &CM,
                                                               .name = "a",
                                                               .code = 409,
                                                               .reason = "Conflict",
                                                               .message = "try again"}),
                 KCR_OK);
    kcr_status st = {0};
    kcr_object *o = NULL;
    kcr_request get = {.resource = &CM, .ns = "r", .name = "a", .status = &st};
    cr_assert_eq(kcr_client_get(c, &get, &o), KCR_ERR_CONFLICT);
    cr_assert_str_eq(st.message, "try again");
    cr_assert_eq(kcr_client_get(c, &get, &o), KCR_OK, "times 0 means once");
    kcr_object_unref(o);
    kcr_status_clear(&st);
    cr_assert_eq(kcr_fake_inject_error(fake, &(kcr_fake_error){.verb = KCR_FAKE_GET}),
                 KCR_ERR_INVALID, "an error needs an HTTP code");
    cr_assert_eq(kcr_fake_inject_error(fake, NULL), KCR_ERR_INVALID);
}
