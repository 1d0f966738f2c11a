/* The fake's write rules, one set for update, patch and delete as on the
 * apiserver: the optimistic-concurrency rule (a stale resourceVersion is a
 * 409 Conflict with the apiserver's words, an empty one an unconditional
 * update except for custom resources), update's uid precondition, the
 * name/namespace checks, generation, and marking for deletion. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "kcr/kcr.h"
#include "kcr/fake.h"

static const kcr_resource CM = {"", "v1", "configmaps"};
static const kcr_resource DEPLOY = {"apps", "v1", "deployments"};
static const kcr_resource CRDS = {"apiextensions.k8s.io", "v1", "customresourcedefinitions"};
static const kcr_resource FOO = {"example.com", "v1", "foos"};

static const char STALE_CM[] = "Operation cannot be fulfilled on configmaps \"a\": the object has "
                               "been modified; please apply your changes to the latest version "
                               "and try again";

static kcr_fake *fake;
static kcr_client *c;
static kcr_status st;

static void setup(void)
{
    cr_assert_eq(kcr_fake_new(NULL, &fake), KCR_OK);
    cr_assert_eq(kcr_fake_client(fake, "default", &c), KCR_OK);
}

static void teardown(void)
{
    kcr_status_clear(&st);
    kcr_client_free(c);
    kcr_fake_free(fake);
}

static kcr_object *create(const kcr_resource *res, const char *ns, const char *json)
{
    kcr_object *o = NULL;
    kcr_err err = kcr_client_create(c, &(kcr_request){.resource = res, .ns = ns, .body = json}, &o);
    cr_assert_eq(err, KCR_OK, "create %s: %s", json, kcr_last_error());
    return o;
}

/* PUT: the client takes the name from the body. */
static kcr_err update(const kcr_resource *res, const char *json, const char *subresource)
{
    return kcr_client_update(
        c,
        &(kcr_request){
            .resource = res, .ns = "d", .body = json, .subresource = subresource, .status = &st},
        NULL);
}

static kcr_err patch(const kcr_resource *res, const char *name, kcr_patch_type type,
                     const char *json, const char *subresource)
{
    return kcr_client_patch(c,
                            &(kcr_request){.resource = res,
                                           .ns = "d",
                                           .name = name,
                                           .patch_type = type,
                                           .body = json,
                                           .subresource = subresource,
                                           .status = &st},
                            NULL);
}

static void expect_stale(kcr_err err, const char *what)
{
    cr_assert_eq(err, KCR_ERR_CONFLICT, "%s: %s", what, kcr_strerror(err));
    cr_assert_eq(st.code, 409, "%s", what);
    cr_assert_str_eq(st.reason, "Conflict", "%s", what);
    cr_assert_str_eq(st.message, STALE_CM, "%s", what);
    cr_assert_str_eq(st.details.name, "a", "%s", what);
    cr_assert_str_eq(st.details.kind, "configmaps", "%s", what);
}

static int64_t rv_now(void)
{
    return (int64_t)kcr_fake_resource_version(fake);
}

/* Before the one rule, update took an empty resourceVersion for an
 * unconditional write and patch took it for a stale one: both now do what
 * the apiserver does. */
Test(fake_writes, update_and_patch_share_one_conflict_rule, .init = setup, .fini = teardown)
{
    kcr_object_unref(create(&CM, "d", "{\"metadata\":{\"name\":\"a\"},\"data\":{\"k\":\"0\"}}"));
    cr_assert_eq(patch(&CM, "a", KCR_PATCH_MERGE, "{\"data\":{\"k\":\"1\"}}", NULL), KCR_OK);
    cr_assert_eq(rv_now(), 2);

    expect_stale(update(&CM, "{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"1\"}}", NULL),
                 "update");
    /* ConfigMaps have no status subresource: 404 as on the apiserver */
    cr_assert_eq(update(&CM, "{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"1\"}}",
                        "status"),
                 KCR_ERR_NOT_FOUND);
    cr_assert_eq(st.code, 404);
    expect_stale(patch(&CM, "a", KCR_PATCH_MERGE,
                       "{\"metadata\":{\"resourceVersion\":\"1\"},\"data\":{\"k\":\"x\"}}", NULL),
                 "merge patch");
    expect_stale(patch(&CM, "a", KCR_PATCH_JSON,
                       "[{\"op\":\"replace\",\"path\":\"/metadata/resourceVersion\","
                       "\"value\":\"1\"}]",
                       NULL),
                 "JSON patch");
    cr_assert_eq(rv_now(), 2, "a conflict writes nothing");

    /* The current resourceVersion: a conditional write that succeeds. */
    cr_assert_eq(update(&CM,
                        "{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"2\"},"
                        "\"data\":{\"k\":\"2\"}}",
                        NULL),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(patch(&CM, "a", KCR_PATCH_MERGE,
                       "{\"metadata\":{\"resourceVersion\":\"3\"},\"data\":{\"k\":\"3\"}}", NULL),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(rv_now(), 4);

    /* An empty (or removed) resourceVersion: unconditional, for update and
     * patch alike. */
    cr_assert_eq(update(&CM,
                        "{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"\"},"
                        "\"data\":{\"k\":\"4\"}}",
                        NULL),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(patch(&CM, "a", KCR_PATCH_MERGE,
                       "{\"metadata\":{\"resourceVersion\":\"\"},\"data\":{\"k\":\"5\"}}", NULL),
                 KCR_OK, "an empty resourceVersion in a patch is no precondition: %s",
                 kcr_last_error());
    cr_assert_eq(patch(&CM, "a", KCR_PATCH_MERGE,
                       "{\"metadata\":{\"resourceVersion\":null},\"data\":{\"k\":\"6\"}}", NULL),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(patch(&CM, "a", KCR_PATCH_JSON,
                       "[{\"op\":\"remove\",\"path\":\"/metadata/resourceVersion\"},"
                       "{\"op\":\"replace\",\"path\":\"/data/k\",\"value\":\"7\"}]",
                       NULL),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(rv_now(), 8);
    kcr_object *now = NULL;
    cr_assert_eq(kcr_client_get(c, &(kcr_request){.resource = &CM, .ns = "d", .name = "a"}, &now),
                 KCR_OK);
    cr_assert_str_eq(kcr_object_resource_version(now), "8", "the server sets the new version");
    cr_assert_str_eq(kcr_value_string(kcr_object_get(now, "data.k"), NULL), "7");
    kcr_object_unref(now);

    /* Other resources are named as the apiserver names them. */
    kcr_object_unref(create(&DEPLOY, "d", "{\"metadata\":{\"name\":\"w\"},\"spec\":{}}"));
    cr_assert_eq(update(&DEPLOY, "{\"metadata\":{\"name\":\"w\",\"resourceVersion\":\"1\"}}", NULL),
                 KCR_ERR_CONFLICT);
    cr_assert_str_eq(st.message, "Operation cannot be fulfilled on deployments.apps \"w\": the "
                                 "object has been modified; please apply your changes to the "
                                 "latest version and try again");
    /* the status subresource follows the same rule */
    cr_assert_eq(update(&DEPLOY, "{\"metadata\":{\"name\":\"w\",\"resourceVersion\":\"1\"}}",
                        "status"),
                 KCR_ERR_CONFLICT, "status update");
    cr_assert_eq(patch(&DEPLOY, "w", KCR_PATCH_STRATEGIC,
                       "{\"metadata\":{\"resourceVersion\":\"1\"}}", "status"),
                 KCR_ERR_CONFLICT, "status patch");
}

/* A custom resource's strategy refuses unconditional updates: 422 Invalid
 * "must be specified for an update"; a patch that leaves the version alone
 * is still conditional on the current one. */
Test(fake_writes, custom_resources_refuse_unconditional_updates, .init = setup, .fini = teardown)
{
    kcr_object_unref(create(&CRDS, NULL,
                            "{\"metadata\":{\"name\":\"foos.example.com\"},\"spec\":{\"group\":"
                            "\"example.com\",\"scope\":\"Namespaced\",\"names\":{\"plural\":"
                            "\"foos\",\"singular\":\"foo\",\"kind\":\"Foo\"},\"versions\":"
                            "[{\"name\":\"v1\",\"served\":true,\"storage\":true}]}}"));
    kcr_object *f = create(&FOO, "d", "{\"metadata\":{\"name\":\"x\"},\"spec\":{\"n\":1}}");
    cr_assert_eq(update(&FOO, "{\"metadata\":{\"name\":\"x\"},\"spec\":{\"n\":2}}", NULL),
                 KCR_ERR_INVALID_OBJECT);
    cr_assert_eq(st.code, 422);
    cr_assert_str_eq(st.reason, "Invalid");
    cr_assert_str_eq(st.message, "foos.example.com \"x\" is invalid: metadata.resourceVersion: "
                                 "Invalid value: 0x0: must be specified for an update");
    cr_assert_eq(st.details.n_causes, 1);
    cr_assert_str_eq(st.details.causes[0].field, "metadata.resourceVersion");
    cr_assert_eq(patch(&FOO, "x", KCR_PATCH_MERGE,
                       "{\"metadata\":{\"resourceVersion\":null},\"spec\":{\"n\":2}}", NULL),
                 KCR_ERR_INVALID_OBJECT);
    cr_assert_eq(patch(&FOO, "x", KCR_PATCH_MERGE, "{\"spec\":{\"n\":2}}", NULL), KCR_OK, "%s",
                 kcr_last_error());
    char body[160];
    snprintf(body, sizeof body,
             "{\"metadata\":{\"name\":\"x\",\"resourceVersion\":\"%" PRIu64 "\"},"
             "\"spec\":{\"n\":3}}",
             kcr_fake_resource_version(fake));
    cr_assert_eq(update(&FOO, body, NULL), KCR_OK, "%s", kcr_last_error());
    /* A built-in resource allows it. */
    kcr_object_unref(create(&CM, "d", "{\"metadata\":{\"name\":\"x\"}}"));
    cr_assert_eq(update(&CM, "{\"metadata\":{\"name\":\"x\"},\"data\":{}}", NULL), KCR_OK, "%s",
                 kcr_last_error());
    kcr_object_unref(f);
}

Test(fake_writes, update_uid_precondition_and_name_checks, .init = setup, .fini = teardown)
{
    kcr_object *a = create(&CM, "d", "{\"metadata\":{\"name\":\"a\"}}");
    char body[200];
    snprintf(body, sizeof body, "{\"metadata\":{\"name\":\"a\",\"uid\":\"%s\"},\"data\":{}}",
             kcr_object_uid(a));
    cr_assert_eq(update(&CM, body, NULL), KCR_OK, "the stored uid: %s", kcr_last_error());
    cr_assert_eq(update(&CM, "{\"metadata\":{\"name\":\"a\",\"uid\":\"other\"}}", NULL),
                 KCR_ERR_CONFLICT);
    char want[300];
    snprintf(want, sizeof want,
             "Operation cannot be fulfilled on configmaps \"a\": Precondition failed: UID in "
             "precondition: other, UID in object meta: %s",
             kcr_object_uid(a));
    cr_assert_str_eq(st.message, want);

    cr_assert_eq(patch(&CM, "a", KCR_PATCH_MERGE, "{\"metadata\":{\"name\":\"b\"}}", NULL),
                 KCR_ERR_BAD_REQUEST, "a patch may not rename");
    cr_assert_eq(st.code, 400);
    cr_assert_str_eq(st.message,
                     "the name of the object (b) does not match the name on the URL (a)");
    cr_assert_eq(
        patch(&CM, "a", KCR_PATCH_JSON, "[{\"op\":\"remove\",\"path\":\"/metadata/name\"}]", NULL),
        KCR_ERR_BAD_REQUEST, "nor take the name away");
    cr_assert_str_eq(st.message,
                     "the name of the object () does not match the name on the URL (a)");
    cr_assert_eq(update(&CM, "{\"metadata\":{\"name\":\"a\",\"namespace\":\"e\"}}", NULL),
                 KCR_ERR_BAD_REQUEST);
    cr_assert_str_eq(st.message, "the namespace of the object (e) does not match the namespace "
                                 "on the request (d)");
    cr_assert_eq(update(&CM, "{\"metadata\":{\"name\":\"a\",\"resourceVersion\":2}}", NULL),
                 KCR_ERR_BAD_REQUEST, "a resourceVersion must be a string");
    cr_assert_eq(st.code, 400);
    cr_assert_eq(update(&CM, "{\"metadata\":{\"name\":\"a\",\"uid\":5}}", NULL),
                 KCR_ERR_BAD_REQUEST);
    cr_assert_eq(kcr_fake_resource_version(fake), 2, "only the first update wrote");
    kcr_object_unref(a);
}

static int64_t generation_after_patch(const char *json, const char *subresource)
{
    kcr_object *o = NULL;
    cr_assert_eq(kcr_client_patch(c,
                                  &(kcr_request){.resource = &DEPLOY,
                                                 .ns = "d",
                                                 .name = "g",
                                                 .patch_type = KCR_PATCH_MERGE,
                                                 .body = json,
                                                 .subresource = subresource},
                                  &o),
                 KCR_OK, "%s: %s", json, kcr_last_error());
    int64_t g = kcr_object_generation(o);
    kcr_object_unref(o);
    return g;
}

/* generation counts spec changes: not metadata or status ones, and marking
 * for deletion counts (the apiserver's markAsDeleting). */
Test(fake_writes, generation_and_marking_for_deletion, .init = setup, .fini = teardown)
{
    kcr_object_unref(create(&DEPLOY, "d",
                            "{\"metadata\":{\"name\":\"g\",\"finalizers\":[\"x/y\"]},"
                            "\"spec\":{\"replicas\":1}}"));
    cr_assert_eq(generation_after_patch("{\"metadata\":{\"labels\":{\"l\":\"v\"}}}", NULL), 1);
    cr_assert_eq(generation_after_patch("{\"status\":{\"readyReplicas\":1}}", "status"), 1);
    cr_assert_eq(generation_after_patch("{\"spec\":{\"replicas\":2}}", NULL), 2);
    cr_assert_eq(generation_after_patch("{\"spec\":{\"paused\":true}}", NULL), 3);
    cr_assert_eq(generation_after_patch("{\"spec\":{\"paused\":true}}", NULL), 3, "a no-op");
    uint64_t rv = kcr_fake_resource_version(fake);
    cr_assert_eq(generation_after_patch("{\"spec\":{\"paused\":true}}", NULL), 3);
    cr_assert_eq(kcr_fake_resource_version(fake), rv, "a no-op patch writes nothing");

    /* An update body without a type: the object stays typed, and its type
     * is no spec. */
    kcr_object *d = NULL;
    cr_assert_eq(
        kcr_client_update(
            c,
            &(kcr_request){.resource = &DEPLOY,
                           .ns = "d",
                           .body = "{\"metadata\":{\"name\":\"g\",\"finalizers\":[\"x/y\"],"
                                   "\"labels\":{\"l\":\"w\"}},\"spec\":{\"replicas\":2,"
                                   "\"paused\":true}}"},
            &d),
        KCR_OK, "%s", kcr_last_error());
    cr_assert_str_eq(kcr_object_kind(d), "Deployment");
    cr_assert_str_eq(kcr_object_api_version(d), "apps/v1");
    cr_assert_eq(kcr_object_generation(d), 3, "a label change");
    kcr_object_unref(d);
    cr_assert_eq(
        kcr_client_delete(c, &(kcr_request){.resource = &DEPLOY, .ns = "d", .name = "g"}, &d),
        KCR_OK);
    cr_assert(kcr_object_is_deleting(d));
    cr_assert_eq(kcr_object_generation(d), 4);
    cr_assert_eq(kcr_value_int(kcr_object_get(d, "metadata.deletionGracePeriodSeconds")), 0);
    cr_assert_eq(kcr_value_get_type(kcr_object_get(d, "metadata.deletionGracePeriodSeconds")),
                 KCR_VALUE_INT);
    kcr_object_unref(d);
    rv = kcr_fake_resource_version(fake);
    cr_assert_eq(
        kcr_client_delete(c, &(kcr_request){.resource = &DEPLOY, .ns = "d", .name = "g"}, &d),
        KCR_OK);
    cr_assert_eq(kcr_object_generation(d), 4, "deleting again changes nothing");
    cr_assert_eq(kcr_fake_resource_version(fake), rv);
    kcr_object_unref(d);
    /* An update cannot take the mark away; removing the finalizer deletes. */
    cr_assert_eq(generation_after_patch("{\"metadata\":{\"deletionTimestamp\":null}}", NULL), 4);
    cr_assert_eq(kcr_client_get(c, &(kcr_request){.resource = &DEPLOY, .ns = "d", .name = "g"}, &d),
                 KCR_OK);
    cr_assert(kcr_object_is_deleting(d));
    kcr_object_unref(d);
    cr_assert_eq(kcr_client_patch(c,
                                  &(kcr_request){.resource = &DEPLOY,
                                                 .ns = "d",
                                                 .name = "g",
                                                 .patch_type = KCR_PATCH_MERGE,
                                                 .body = "{\"metadata\":{\"finalizers\":[]}}"},
                                  &d),
                 KCR_OK);
    cr_assert_eq(kcr_object_finalizer_count(d), 0, "the final state is the one without it");
    kcr_object_unref(d);
    cr_assert_eq(kcr_client_get(c, &(kcr_request){.resource = &DEPLOY, .ns = "d", .name = "g"}, &d),
                 KCR_ERR_NOT_FOUND);
}

Test(fake_writes, create_validation_is_worded_as_the_apiserver, .init = setup, .fini = teardown)
{
    cr_assert_eq(kcr_client_create(c,
                                   &(kcr_request){.resource = &CM,
                                                  .ns = "d",
                                                  .body = "{\"metadata\":{\"name\":\"Bad_Name\"}}",
                                                  .status = &st},
                                   NULL),
                 KCR_ERR_INVALID_OBJECT);
    cr_assert_str_eq(st.message,
                     "configmaps \"Bad_Name\" is invalid: metadata.name: Invalid value: "
                     "\"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case "
                     "alphanumeric characters, '-' or '.', and must start and end with an "
                     "alphanumeric character");
    cr_assert_eq(st.details.n_causes, 1);
    cr_assert_str_eq(st.details.causes[0].type, "FieldValueInvalid");
    cr_assert_eq(
        kcr_client_create(c,
                          &(kcr_request){.resource = &CM,
                                         .ns = "d",
                                         .body = "{\"metadata\":{\"name\":\"a\",\"uid\":[]}}",
                                         .status = &st},
                          NULL),
        KCR_ERR_BAD_REQUEST);
    cr_assert_eq(st.code, 400);
    cr_assert_eq(kcr_fake_resource_version(fake), 0, "nothing was written");
}
