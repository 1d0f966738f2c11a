/* The fake's lists: namespaced and cluster scope, label selectors, paging
 * with continue tokens, items typed from the list, a list at an exact
 * resourceVersion. */
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

static kcr_err collect_values(kcr_object *o, void *ud)
{
    struct names *n = ud;
    if (n->n < 32)
        snprintf(n->v[n->n], 32, "%s=%s", kcr_object_name(o), str(o, "data.v"));
    n->n++;
    return KCR_OK;
}

/* resourceVersionMatch=Exact reads the state at that version (creations
 * after it absent, deletions after it present, changes undone), paged
 * too, at that version; a compacted version is 410, a future one 504, 0
 * a 400, as the apiserver answers. */
Test(fake, a_list_at_an_exact_version, .init = setup, .fini = teardown)
{
    kcr_object_unref(create(&CM, "x", "{\"metadata\":{\"name\":\"a\"},\"data\":{\"v\":\"1\"}}"));
    kcr_object_unref(create(&CM, "x", "{\"metadata\":{\"name\":\"b\"},\"data\":{\"v\":\"1\"}}"));
    kcr_object_unref(create(&CM, "x", "{\"metadata\":{\"name\":\"c\"},\"data\":{\"v\":\"1\"}}"));
    kcr_object_unref(create(&CM, "y", "{\"metadata\":{\"name\":\"other\"}}"));
    kcr_list_meta meta = {0};
    cr_assert_eq(kcr_client_list(c, &(kcr_request){.resource = &CM, .ns = "x"}, NULL, NULL, &meta),
                 KCR_OK);
    char at[32];
    snprintf(at, sizeof at, "%s", meta.resource_version);
    kcr_list_meta_clear(&meta);
    cr_assert_eq(kcr_client_patch(c,
                                  &(kcr_request){.resource = &CM,
                                                 .ns = "x",
                                                 .name = "a",
                                                 .patch_type = KCR_PATCH_MERGE,
                                                 .body = "{\"data\":{\"v\":\"2\"}}"},
                                  NULL),
                 KCR_OK);
    cr_assert_eq(
        kcr_client_delete(c, &(kcr_request){.resource = &CM, .ns = "x", .name = "b"}, NULL), KCR_OK);
    kcr_object_unref(create(&CM, "x", "{\"metadata\":{\"name\":\"aa\"},\"data\":{\"v\":\"1\"}}"));

    kcr_request o = {
        .resource = &CM, .ns = "x", .resource_version = at, .resource_version_match = "Exact"};
    struct names then = {0};
    cr_assert_eq(kcr_client_list(c, &o, collect_values, &then, &meta), KCR_OK, "%s",
                 kcr_last_error());
    cr_expect_str_eq(meta.resource_version, at);
    kcr_list_meta_clear(&meta);
    cr_assert_eq(then.n, 3);
    cr_expect_str_eq(then.v[0], "a=1");
    cr_expect_str_eq(then.v[1], "b=1");
    cr_expect_str_eq(then.v[2], "c=1");

    /* paged: every page at the same version */
    o.limit = 2;
    struct names paged = {0};
    cr_assert_eq(kcr_client_list(c, &o, collect_values, &paged, &meta), KCR_OK);
    cr_assert(*meta.continue_token);
    kcr_request next = {.resource = &CM, .ns = "x", .continue_token = meta.continue_token};
    kcr_list_meta meta2 = {0};
    cr_assert_eq(kcr_client_list(c, &next, collect_values, &paged, &meta2), KCR_OK);
    cr_expect_str_eq(meta2.resource_version, at);
    kcr_list_meta_clear(&meta);
    kcr_list_meta_clear(&meta2);
    cr_assert_eq(paged.n, 3);
    cr_expect_str_eq(paged.v[2], "c=1", "the second page is at the version too");

    /* now: the newest state */
    struct names now = {0};
    cr_assert_eq(kcr_client_list(c, &(kcr_request){.resource = &CM, .ns = "x"}, collect_values,
                                 &now, NULL),
                 KCR_OK);
    cr_assert_eq(now.n, 3);
    cr_expect_str_eq(now.v[0], "a=2");
    cr_expect_str_eq(now.v[1], "aa=1");

    kcr_status st = {0};
    o.limit = 0;
    o.status = &st;
    o.resource_version = "999";
    cr_expect_neq(kcr_client_list(c, &o, NULL, NULL, NULL), KCR_OK);
    cr_expect_eq(st.code, 504);
    cr_expect(strstr(st.message, "Too large resource version"), "%s", st.message);
    kcr_status_clear(&st);
    o.resource_version = "0";
    cr_expect_eq(kcr_client_list(c, &o, NULL, NULL, NULL), KCR_ERR_BAD_REQUEST);
    kcr_status_clear(&st);
}

Test(fake, an_exact_list_at_a_compacted_version_is_gone)
{
    kcr_fake *f = NULL;
    kcr_client *k = NULL;
    cr_assert_eq(kcr_fake_new(&(kcr_fake_options){.history_size = 2}, &f), KCR_OK);
    cr_assert_eq(kcr_fake_client(f, "x", &k), KCR_OK);
    for (int i = 0; i < 4; i++) {
        char json[64];
        snprintf(json, sizeof json, "{\"metadata\":{\"name\":\"n%d\"}}", i);
        cr_assert_eq(kcr_client_create(k, &(kcr_request){.resource = &CM, .ns = "x", .body = json},
                                       NULL),
                     KCR_OK, "%s", kcr_last_error());
    }
    kcr_status st = {0};
    cr_expect_eq(kcr_client_list(k,
                                 &(kcr_request){.resource = &CM,
                                                .ns = "x",
                                                .resource_version = "1",
                                                .resource_version_match = "Exact",
                                                .status = &st},
                                 NULL, NULL, NULL),
                 KCR_ERR_GONE);
    cr_expect_eq(st.code, 410);
    cr_expect_str_eq(st.message, "The resourceVersion for the provided list is too old.");
    kcr_status_clear(&st);
    kcr_client_free(k);
    kcr_fake_free(f);
}
