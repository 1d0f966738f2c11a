/* The fake's lists: namespaced and cluster scope, label selectors, paging
 * with continue tokens, items typed from the list. */
#include "tests/unit/fake_fixture.h"

Test(fake, namespaces_and_cluster_scope, .init = setup, .fini = teardown)
{
    kcr_object_unref(create(&CM, "a", "{\"metadata\":{\"name\":\"x\"}}"));
    kcr_object_unref(create(&CM, "b", "{\"metadata\":{\"name\":\"x\"}}"));
    kcr_object *n = create(&NS, "ignored", "{\"metadata\":{\"name\":\"team\"}}");
    cr_assert_str_eq(kcr_object_namespace(n), "", "namespaces are cluster-scoped");
    kcr_object_unref(n);
    kcr_object *got = NULL;
    cr_assert_eq(kcr_client_get(c, &(kcr_request){.resource = &NS, .name = "team"}, &got), KCR_OK);
    kcr_object_unref(got);
    struct names in_a = list("a", NULL);
    cr_assert_eq(in_a.n, 1, "a list in a namespace holds only its objects");
    cr_assert_str_eq(in_a.v[0], "a/x");
    kcr_list_meta meta = {0};
    cr_assert_eq(kcr_client_list(c, &(kcr_request){.resource = &CM, .ns = "a"}, NULL, NULL, &meta),
                 KCR_OK);
    cr_assert_str_eq(meta.resource_version, "3");
    kcr_list_meta_clear(&meta);
}

Test(fake, label_selectors, .init = setup, .fini = teardown)
{
    kcr_object_unref(create(&CM, "a", "{\"metadata\":{\"name\":\"web\",\"labels\":{\"app\":\"web\",\"tier\":\"front\"}}}"));
    kcr_object_unref(create(&CM, "a", "{\"metadata\":{\"name\":\"db\",\"labels\":{\"app\":\"db\",\"tier\":\"back\"}}}"));
    kcr_object_unref(create(&CM, "b", "{\"metadata\":{\"name\":\"plain\"}}"));
    cr_assert_eq(list(NULL, NULL).n, 3);
    cr_assert_eq(list("a", NULL).n, 2);
    cr_assert_eq(list(NULL, "app=web").n, 1);
    cr_assert_eq(list(NULL, "app==web").n, 1);
    cr_assert_eq(list(NULL, "app!=web").n, 2, "absent labels match !=");
    cr_assert_eq(list(NULL, "tier in (front, back)").n, 2);
    cr_assert_eq(list(NULL, "tier notin (front)").n, 2);
    cr_assert_eq(list(NULL, "app").n, 2);
    cr_assert_eq(list(NULL, "!app").n, 1);
    cr_assert_eq(list(NULL, "app,tier=back").n, 1);
    struct names n = list(NULL, "app");
    cr_assert_str_eq(n.v[0], "a/db", "lists are ordered by namespace/name");
    cr_assert_str_eq(n.v[1], "a/web");
    kcr_status st = {0};
    cr_assert_eq(kcr_client_list(
                     c,
                     &(kcr_request){.resource = &CM, .label_selector = "app in (x", .status = &st},
                     collect, &n, NULL),
                 KCR_ERR_BAD_REQUEST);
    cr_assert_eq(st.code, 400);
    kcr_status_clear(&st);
    n = (struct names){0};
    cr_assert_eq(
        kcr_client_list(c, &(kcr_request){.resource = &CM, .field_selector = "metadata.name=plain"},
                        collect, &n, NULL),
        KCR_OK);
    cr_assert_eq(n.n, 1);
}

Test(fake, paging, .init = setup, .fini = teardown)
{
    char json[128];
    for (int i = 0; i < 5; i++) {
        snprintf(json, sizeof json, "{\"metadata\":{\"name\":\"cm-%d\"}}", i);
        kcr_object_unref(create(&CM, "p", json));
    }
    kcr_request o = {.resource = &CM, .ns = "p", .limit = 2};
    kcr_list_meta meta = {0};
    struct names all = {0};
    int pages = 0;
    char *cont = NULL;
    do {
        o.continue_token = cont;
        cr_assert_eq(kcr_client_list(c, &o, collect, &all, &meta), KCR_OK);
        pages++;
        if (pages == 1) {
            cr_assert(meta.has_remaining_item_count);
            cr_assert_eq(meta.remaining_item_count, 3);
        }
        free(cont);
        cont = *meta.continue_token ? strdup(meta.continue_token) : NULL;
        kcr_list_meta_clear(&meta);
    } while (cont);
    cr_assert_eq(pages, 3);
    cr_assert_eq(all.n, 5);
    cr_assert_str_eq(all.v[4], "p/cm-4");
    o.continue_token = "!!not-a-token";
    cr_assert_eq(kcr_client_list(c, &o, collect, &all, &meta), KCR_ERR_BAD_REQUEST);
}

struct types {
    int n;
    char v[8][64];
};

static kcr_err collect_types(kcr_object *o, void *ud)
{
    struct types *t = ud;
    if (t->n < 8)
        snprintf(t->v[t->n], sizeof t->v[0], "%s %s", kcr_object_api_version(o),
                 kcr_object_kind(o));
    t->n++;
    return KCR_OK;
}

/* List items carry the List's type, as a client reads an apiserver's List,
 * paged or not, metadata-only too. */
Test(fake, list_items_are_typed_from_the_list, .init = setup, .fini = teardown)
{
    kcr_object_unref(create(&CM, "t", "{\"metadata\":{\"name\":\"a\"}}"));
    kcr_object_unref(create(&CM, "t", "{\"metadata\":{\"name\":\"b\"}}"));
    kcr_object_unref(create(&DEPLOY, "t", "{\"metadata\":{\"name\":\"d\"},\"spec\":{}}"));
    struct types n = {0};
    cr_assert_eq(kcr_client_list(c, &(kcr_request){.resource = &CM, .ns = "t", .limit = 1},
                                 collect_types, &n, NULL),
                 KCR_OK);
    cr_assert_eq(kcr_client_list(c, &(kcr_request){.resource = &DEPLOY}, collect_types, &n, NULL),
                 KCR_OK);
    cr_assert_eq(kcr_client_list(c,
                                 &(kcr_request){.resource = &CM, .ns = "t", .metadata_only = true},
                                 collect_types, &n, NULL),
                 KCR_OK);
    cr_assert_eq(n.n, 4);
    cr_assert_str_eq(n.v[0], "v1 ConfigMap");
    cr_assert_str_eq(n.v[1], "apps/v1 Deployment");
    cr_assert_str_eq(n.v[2], "meta.k8s.io/v1 PartialObjectMetadata");
    cr_assert_str_eq(n.v[3], "meta.k8s.io/v1 PartialObjectMetadata");
}
