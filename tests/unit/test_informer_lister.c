/* The informer's cache and its listers: by name, namespace, selector and
 * index, the namespace filter without the namespace index, and the partial
 * objects a metadata-only informer caches. */
#include "tests/unit/informer_env.h"

static void by_app(const kcr_object *o, kcr_index_emit *emit, void *ud)
{
    (void)ud;
    const char *app = kcr_object_label(o, "app");
    if (app)
        kcr_index_emit_value(emit, app);
}

Test(informer, listers_by_name_namespace_selector_and_index)
{
    env e;
    env_up(&e, 10, NULL);
    seed_many(e.fake, "other", 4);
    cr_assert_eq(kcr_informer_add_index(e.inf, "app", by_app, NULL), KCR_OK);
    env_start_synced(&e);
    kcr_store *s = kcr_informer_store(e.inf);
    kcr_object *o = kcr_lister_get(s, "other", "cm-00003");
    cr_assert_not_null(o);
    cr_assert_str_eq(kcr_object_namespace(o), "other");
    kcr_object_unref(o);
    cr_assert_null(kcr_lister_get(s, "other", "cm-00009"));
    kcr_object_list l = {0};
    cr_assert_eq(kcr_lister_list(s, NULL, NULL, &l), KCR_OK);
    cr_assert_eq(l.len, 14);
    kcr_object_list_free(&l);
    cr_assert_eq(kcr_lister_list(s, "other", NULL, &l), KCR_OK);
    cr_assert_eq(l.len, 4);
    kcr_object_list_free(&l);
    cr_assert_eq(kcr_lister_list(s, "default", "app=odd", &l), KCR_OK);
    cr_assert_eq(l.len, 5);
    kcr_object_list_free(&l);
    cr_assert_eq(kcr_lister_list(s, NULL, "app in (odd,even),app!=even", &l), KCR_OK);
    cr_assert_eq(l.len, 7);
    kcr_object_list_free(&l);
    cr_assert_eq(kcr_lister_list(s, NULL, "app in (", &l), KCR_ERR_INVALID);
    cr_assert_eq(kcr_lister_by_index(s, "app", "even", &l), KCR_OK);
    cr_assert_eq(l.len, 7);
    kcr_object_list_free(&l);
    env_down(&e);
}

Test(informer, metadata_only_informer_caches_partial_objects)
{
    kcr_informer_options o = fast();
    o.reflector.metadata_only = true;
    env e;
    env_up(&e, 4, &o);
    env_start_synced(&e);
    kcr_object *obj = env_cached_after_update(&e);
    cr_assert_str_eq(kcr_object_kind(obj), "PartialObjectMetadata");
    cr_assert_eq(kcr_value_get_type(kcr_object_get(obj, "data")), KCR_VALUE_ABSENT);
    cr_assert_str_eq(kcr_object_label(obj, "app"), "odd");
    kcr_object_unref(obj);
    env_down(&e);
}

static kcr_object *obj_in(const char *ns, const char *name, const char *app)
{
    char json[256];
    snprintf(json, sizeof json,
             "{\"metadata\":{\"namespace\":\"%s\",\"name\":\"%s\",\"labels\":{\"app\":\"%s\"}}}",
             ns, name, app);
    kcr_object *o = NULL;
    cr_assert_eq(kcr_object_parse(json, strlen(json), &o), KCR_OK);
    return o;
}

Test(informer, lister_namespace_filter_without_the_namespace_index)
{
    kcr_store *s = NULL; /* no KCR_INDEX_NAMESPACE */
    cr_assert_eq(kcr_store_new(&s), KCR_OK);
    const char *objs[][3] = {
        {"a", "x", "web"}, {"a", "y", "db"}, {"b", "x", "web"}, {"", "z", "web"}};
    for (size_t i = 0; i < 4; i++) {
        kcr_object *o = obj_in(objs[i][0], objs[i][1], objs[i][2]);
        cr_assert_eq(kcr_store_add(s, o), KCR_OK);
        kcr_object_unref(o);
    }
    kcr_object_list l = {0};
    cr_assert_eq(kcr_lister_list(s, "a", NULL, &l), KCR_OK);
    cr_assert_eq(l.len, 2);
    for (size_t i = 0; i < l.len; i++)
        cr_assert_str_eq(kcr_object_namespace(l.items[i]), "a");
    kcr_object_list_free(&l);
    cr_assert_eq(kcr_lister_list(s, "b", "app=web", &l), KCR_OK);
    cr_assert_eq(l.len, 1);
    cr_assert_str_eq(kcr_object_namespace(l.items[0]), "b");
    kcr_object_list_free(&l);
    cr_assert_eq(kcr_lister_list(s, "c", NULL, &l), KCR_OK);
    cr_assert_eq(l.len, 0);
    kcr_object_list_free(&l);
    cr_assert_eq(kcr_lister_list(s, NULL, "app=web", &l), KCR_OK);
    cr_assert_eq(l.len, 3);
    kcr_object_list_free(&l);
    kcr_store_free(s);
}
