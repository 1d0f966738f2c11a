/* The fake's discovery: built-in resources and CRDs, and 404 for a resource
 * it does not serve, answered like the apiserver. */
#include "tests/unit/fake_fixture.h"
#include "kcr/fake.h"

Test(fake, discovery_and_crds, .init = setup, .fini = teardown)
{
    kcr_api_resource r;
    cr_assert_eq(kcr_client_resolve(c, "cm", NULL, &r), KCR_OK);
    cr_assert_str_eq(r.resource, "configmaps");
    cr_assert(r.namespaced);
    cr_assert_eq(kcr_client_resolve(c, "deploy", NULL, &r), KCR_OK);
    cr_assert_str_eq(r.group, "apps");
    cr_assert_eq(kcr_client_resolve(c, "Deployment", NULL, &r), KCR_OK);
    cr_assert_str_eq(r.resource, "deployments");
    cr_assert_eq(kcr_client_resolve(c, "deployments.apps", NULL, &r), KCR_OK);
    cr_assert_eq(kcr_client_resolve(c, "deployments.v1.apps", NULL, &r), KCR_OK);
    cr_assert_eq(kcr_client_resolve(c, "ns", NULL, &r), KCR_OK);
    cr_assert_not(r.namespaced);
    cr_assert_eq(kcr_client_resolve(c, "foos", NULL, &r), KCR_ERR_NOT_FOUND);
    const kcr_resource crds = {"apiextensions.k8s.io", "v1", "customresourcedefinitions"};
    kcr_object_unref(create(&crds, NULL,
                            "{\"metadata\":{\"name\":\"foos.example.com\"},\"spec\":{\"group\":"
                            "\"example.com\",\"scope\":\"Namespaced\",\"names\":{\"plural\":\"foos\","
                            "\"singular\":\"foo\",\"kind\":\"Foo\",\"shortNames\":[\"fo\"]},"
                            "\"versions\":[{\"name\":\"v1\",\"served\":true,\"storage\":true}]}}"));
    cr_assert_eq(kcr_client_resolve(c, "fo", NULL, &r), KCR_OK);
    cr_assert_str_eq(r.group, "example.com");
    cr_assert_str_eq(r.kind, "Foo");
    cr_assert_eq(kcr_client_resolve_kind(c, &(kcr_gvk){"example.com", NULL, "Foo"}, NULL, &r),
                 KCR_OK);
    cr_assert_str_eq(r.resource, "foos");
    kcr_resource foo = kcr_api_resource_gvr(&r);
    kcr_object *o = create(&foo, "x", "{\"metadata\":{\"name\":\"f1\"},\"spec\":{\"a\":1}}");
    cr_assert_str_eq(kcr_object_api_version(o), "example.com/v1");
    cr_assert_str_eq(kcr_object_kind(o), "Foo");
    kcr_object_unref(o);
    cr_assert_eq(kcr_client_request(c, "/api", &(kcr_raw_options){.method = "GET"}, NULL, NULL),
                 KCR_ERR_UNSUPPORTED);
}

static kcr_err ignore_event(const kcr_watch_event *ev, void *ud)
{
    (void)ev, (void)ud;
    return KCR_OK;
}

static kcr_err count_item(kcr_object *obj, void *ud)
{
    (void)obj;
    (*(int *)ud)++;
    return KCR_OK;
}

/* The apiserver's answer for a resource it does not serve: 404 NotFound,
 * "the server could not find the requested resource", no details. */
static void expect_not_served(kcr_err err, const kcr_status *st, const char *what)
{
    cr_assert_eq(err, KCR_ERR_NOT_FOUND, "%s: %s", what, kcr_strerror(err));
    cr_assert_eq(st->code, 404, "%s", what);
    cr_assert_str_eq(st->reason, "NotFound", "%s", what);
    cr_assert_str_eq(st->message, "the server could not find the requested resource", "%s", what);
    cr_assert_str_eq(st->details.kind, "", "%s", what);
    cr_assert_str_eq(st->details.name, "", "%s", what);
}

Test(fake, unknown_resources_are_404_like_the_apiserver, .init = setup, .fini = teardown)
{
    const kcr_resource things = {"nope.example.com", "v1", "things"};
    const kcr_resource cm_v2 = {"", "v2", "configmaps"}; /* a version nobody serves */
    const char *body = "{\"metadata\":{\"name\":\"t\"}}";
    for (int i = 0; i < 2; i++) {
        const kcr_resource *res = i ? &cm_v2 : &things;
        kcr_status st = {0};
        kcr_request lo = {.resource = res, .ns = "default", .status = &st};
        int n = 0;
        expect_not_served(kcr_client_list(c, &lo, count_item, &n, NULL), &st, "list");
        cr_assert_eq(n, 0);
        lo.ns = NULL;
        expect_not_served(kcr_client_list(c, &lo, count_item, &n, NULL), &st,
                          "list across namespaces");
        lo.ns = "default";
        lo.timeout_ms = 1000;
        expect_not_served(kcr_client_watch(c, &lo, ignore_event, NULL), &st, "watch");
        expect_not_served(
            kcr_client_get(
                c, &(kcr_request){.resource = res, .ns = "default", .name = "t", .status = &st},
                NULL),
            &st, "get");
        expect_not_served(
            kcr_client_create(
                c, &(kcr_request){.resource = res, .ns = "default", .body = body, .status = &st},
                NULL),
            &st, "create");
        expect_not_served(
            kcr_client_delete(
                c, &(kcr_request){.resource = res, .ns = "default", .name = "t", .status = &st},
                NULL),
            &st, "delete");
        kcr_status_clear(&st);
        cr_assert_eq(kcr_fake_add(fake, res, body, NULL), KCR_ERR_NOT_FOUND);
        cr_assert(strstr(kcr_last_error(), "kcr_fake_register"), "%s", kcr_last_error());
    }
    /* registered: served (empty, then with what is created) */
    kcr_api_resource r = {.group = "nope.example.com",
                          .version = "v1",
                          .resource = "things",
                          .kind = "Thing",
                          .namespaced = true};
    cr_assert_eq(kcr_fake_register(fake, &r, NULL), KCR_OK);
    int n = 0;
    cr_assert_eq(kcr_client_list(c, &(kcr_request){.resource = &things, .ns = "default"},
                                 count_item, &n, NULL),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(n, 0);
    kcr_object_unref(create(&things, "default", body));
    cr_assert_eq(kcr_client_list(c, &(kcr_request){.resource = &things, .ns = "default"},
                                 count_item, &n, NULL),
                 KCR_OK);
    cr_assert_eq(n, 1);
}
