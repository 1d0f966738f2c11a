/* Store: keys, tombstones and the thread-safe indexer. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kcr/kcr.h"
#include "object/object_internal.h"
#include "unit/store_fixtures.h"

Test(keys, namespaced_and_cluster_scoped)
{
    kcr_object *a = mk("default", "web", "x", "1"), *b = mk("", "node-1", "x", "1");
    char *k;
    cr_assert_eq(kcr_store_key(a, &k), KCR_OK);
    cr_assert_str_eq(k, "default/web");
    free(k);
    cr_assert_eq(kcr_store_key(b, &k), KCR_OK);
    cr_assert_str_eq(k, "node-1");
    free(k);
    kcr_object_unref(a);
    kcr_object_unref(b);
}

Test(keys, split)
{
    const char *ns, *name;
    size_t nl;
    cr_assert_eq(kcr_store_split_key("default/web", &ns, &nl, &name), KCR_OK);
    cr_assert_eq(nl, 7);
    cr_assert_eq(strncmp(ns, "default", nl), 0);
    cr_assert_str_eq(name, "web");
    cr_assert_eq(kcr_store_split_key("node-1", &ns, &nl, &name), KCR_OK);
    cr_assert_eq(nl, 0);
    cr_assert_str_eq(name, "node-1");
    cr_assert_eq(kcr_store_split_key("a/b/c", &ns, &nl, &name), KCR_ERR_INVALID);
    cr_assert_eq(kcr_store_split_key("a/", &ns, &nl, &name), KCR_ERR_INVALID);
    cr_assert_eq(kcr_store_split_key("", &ns, &nl, &name), KCR_ERR_INVALID);
}

Test(keys, parts_are_terminated_copies)
{
    char ns[KCR_STORE_NAMESPACE_SIZE], name[KCR_STORE_NAME_SIZE];
    cr_assert_eq(kcr_store_key_parts("default/web", ns, sizeof ns, name, sizeof name), KCR_OK);
    cr_assert_str_eq(ns, "default");
    cr_assert_str_eq(name, "web");
    cr_assert_eq(kcr_store_key_parts("node-1", ns, sizeof ns, name, sizeof name), KCR_OK);
    cr_assert_str_eq(ns, "");
    cr_assert_str_eq(name, "node-1");
    cr_assert_eq(kcr_store_key_parts("a/b/c", ns, sizeof ns, name, sizeof name), KCR_ERR_INVALID);
    cr_assert_eq(kcr_store_key_parts(NULL, ns, sizeof ns, name, sizeof name), KCR_ERR_INVALID);
    cr_assert_eq(kcr_store_key_parts("a/b", NULL, 0, name, sizeof name), KCR_ERR_INVALID);
    char small[4];
    cr_assert_eq(kcr_store_key_parts("default/web", small, sizeof small, name, sizeof name),
                 KCR_ERR_TOO_LARGE);
    cr_assert_str_eq(small, "");
    cr_assert(strstr(kcr_last_error(), "namespace") != NULL, "%s", kcr_last_error());
    cr_assert_eq(kcr_store_key_parts("ns/long-name", ns, sizeof ns, small, sizeof small),
                 KCR_ERR_TOO_LARGE);
    cr_assert_eq(kcr_store_key_parts("ns/abc", ns, sizeof ns, small, sizeof small), KCR_OK,
                 "exactly fits with its NUL");
    cr_assert_str_eq(small, "abc");
}

Test(keys, tombstone_carries_key_and_last_object)
{
    kcr_object *o = mk("ns", "gone", "x", "9");
    kcr_tombstone *t = new_tombstone("ns/gone", o);
    kcr_object_unref(o);
    cr_assert_str_eq(kcr_tombstone_key(t), "ns/gone");
    cr_assert_str_eq(kcr_object_resource_version(kcr_tombstone_object(t)), "9");
    cr_assert_eq(kcr_tombstone_ref(t), t);
    kcr_tombstone_unref(t);
    kcr_tombstone_unref(t);
    kcr_tombstone *empty = new_tombstone("k", NULL);
    cr_assert_null(kcr_tombstone_object(empty));
    kcr_tombstone_unref(empty);
}

/* Indexes objects by label "app" and, as a second value, "any". */
static void by_app(const kcr_object *obj, kcr_index_emit *emit, void *ud)
{
    (void)ud;
    const char *app = kcr_object_label(obj, "app");
    if (app) {
        kcr_index_emit_value(emit, app);
        kcr_index_emit_value(emit, "any");
    }
}

Test(indexer, add_get_update_delete)
{
    kcr_store *s = new_store();
    kcr_object *a = mk("ns", "a", "x", "1");
    cr_assert_eq(kcr_store_add(s, a), KCR_OK);
    cr_assert_eq(kcr_store_len(s), 1);
    kcr_object *got = kcr_store_get_by_key(s, "ns/a");
    cr_assert_eq(got, a, "the store shares the object, no copy");
    kcr_object_unref(got);
    cr_assert_null(kcr_store_get_by_key(s, "ns/b"));
    cr_assert_null(kcr_store_get_by_key(s, "other/a"));
    cr_assert_null(kcr_store_get_by_key(s, "a"));
    cr_assert_null(kcr_store_get_by_key(s, "x/y/z"));

    kcr_object *a2 = mk("ns", "a", "x", "2");
    cr_assert_eq(kcr_store_update(s, a2), KCR_OK);
    cr_assert_eq(kcr_store_len(s), 1);
    got = kcr_store_get(s, a);
    cr_assert_str_eq(kcr_object_resource_version(got), "2");
    kcr_object_unref(got);

    cr_assert_eq(kcr_store_delete(s, a), KCR_OK, "delete by key, any version");
    cr_assert_eq(kcr_store_len(s), 0);
    cr_assert_eq(kcr_store_delete(s, a), KCR_OK, "absent is fine");
    cr_assert_eq(kcr_store_add(s, a), KCR_OK);
    cr_assert_eq(kcr_store_delete_key(s, "ns/a"), KCR_OK);
    cr_assert_eq(kcr_store_len(s), 0);
    cr_assert_eq(kcr_store_delete_key(s, "a/b/c"), KCR_ERR_INVALID);
    kcr_store_free(s);
    kcr_object_unref(a);
    kcr_object_unref(a2);
}

Test(indexer, list_and_keys_and_cluster_scope)
{
    kcr_store *s = new_store();
    kcr_object *o[3] = {mk("ns", "a", "x", "1"), mk("ns2", "a", "x", "1"), mk("", "a", "x", "1")};
    for (int i = 0; i < 3; i++)
        kcr_store_add(s, o[i]);
    cr_assert_eq(kcr_store_len(s), 3, "same name in other scopes is another key");
    kcr_string_list keys;
    cr_assert_eq(kcr_store_list_keys(s, &keys), KCR_OK);
    cr_assert_eq(keys.len, 3);
    cr_assert(list_has(&keys, "ns/a") && list_has(&keys, "ns2/a") && list_has(&keys, "a"));
    kcr_string_list_free(&keys);
    kcr_object_list objs;
    cr_assert_eq(kcr_store_list(s, &objs), KCR_OK);
    cr_assert_eq(objs.len, 3);
    kcr_object_list_free(&objs);
    kcr_object *got = kcr_store_get_by_key(s, "a");
    cr_assert_eq(got, o[2]);
    kcr_object_unref(got);
    for (int i = 0; i < 3; i++)
        kcr_object_unref(o[i]);
    kcr_store_free(s);
}

Test(indexer, namespace_and_multi_value_indexes)
{
    kcr_store *s = new_store();
    cr_assert_eq(kcr_store_add_index(s, KCR_INDEX_NAMESPACE, kcr_index_namespace, NULL), KCR_OK);
    cr_assert_eq(kcr_store_add_index(s, "app", by_app, NULL), KCR_OK);
    cr_assert_eq(kcr_store_add_index(s, "app", by_app, NULL), KCR_ERR_EXISTS);
    kcr_object *o[4] = {mk("ns1", "a", "web", "1"), mk("ns1", "b", "db", "1"),
                        mk("ns2", "c", "web", "1"), mk("", "node", "web", "1")};
    for (int i = 0; i < 4; i++)
        kcr_store_add(s, o[i]);

    kcr_object_list l;
    cr_assert_eq(kcr_store_by_index(s, KCR_INDEX_NAMESPACE, "ns1", &l), KCR_OK);
    cr_assert_eq(l.len, 2);
    kcr_object_list_free(&l);
    cr_assert_eq(kcr_store_by_index(s, "app", "web", &l), KCR_OK);
    cr_assert_eq(l.len, 3);
    kcr_object_list_free(&l);
    cr_assert_eq(kcr_store_by_index(s, "app", "any", &l), KCR_OK);
    cr_assert_eq(l.len, 4, "an index function may return several values");
    kcr_object_list_free(&l);
    cr_assert_eq(kcr_store_by_index(s, "app", "nope", &l), KCR_OK);
    cr_assert_eq(l.len, 0);
    cr_assert_eq(kcr_store_by_index(s, "missing", "x", &l), KCR_ERR_NOT_FOUND);

    kcr_string_list keys;
    cr_assert_eq(kcr_store_index_keys(s, "app", "db", &keys), KCR_OK);
    cr_assert_eq(keys.len, 1);
    cr_assert_str_eq(keys.items[0], "ns1/b");
    kcr_string_list_free(&keys);

    cr_assert_eq(kcr_store_list_index_values(s, KCR_INDEX_NAMESPACE, &keys), KCR_OK);
    cr_assert_eq(keys.len, 2, "cluster-scoped objects have no namespace value");
    cr_assert(list_has(&keys, "ns1") && list_has(&keys, "ns2"));
    kcr_string_list_free(&keys);

    cr_assert_eq(kcr_store_index_objects(s, "app", o[0], &l), KCR_OK);
    cr_assert_eq(l.len, 4, "objects sharing web or any");
    kcr_object_list_free(&l);

    /* Update moves the object between values; empty sets are pruned. */
    kcr_object *b2 = mk("ns1", "b", "cache", "2");
    kcr_store_update(s, b2);
    cr_assert_eq(kcr_store_list_index_values(s, "app", &keys), KCR_OK);
    cr_assert_eq(keys.len, 3);
    cr_assert(list_has(&keys, "cache") && !list_has(&keys, "db"));
    kcr_string_list_free(&keys);
    cr_assert_eq(kcr_store_by_index(s, "app", "cache", &l), KCR_OK);
    cr_assert_eq(l.len, 1);
    cr_assert_eq(l.items[0], b2, "index points at the new version");
    kcr_object_list_free(&l);

    kcr_store_delete(s, o[2]);
    cr_assert_eq(kcr_store_list_index_values(s, KCR_INDEX_NAMESPACE, &keys), KCR_OK);
    cr_assert_eq(keys.len, 1, "ns2 pruned with its last object");
    kcr_string_list_free(&keys);

    for (int i = 0; i < 4; i++)
        kcr_object_unref(o[i]);
    kcr_object_unref(b2);
    kcr_store_free(s);
}

Test(indexer, index_added_later_reindexes)
{
    kcr_store *s = new_store();
    for (int i = 0; i < 100; i++) {
        char name[16];
        snprintf(name, sizeof name, "o%d", i);
        kcr_object *o = mk(i % 2 ? "odd" : "even", name, "x", "1");
        kcr_store_add(s, o);
        kcr_object_unref(o);
    }
    cr_assert_eq(kcr_store_add_index(s, KCR_INDEX_NAMESPACE, kcr_index_namespace, NULL), KCR_OK);
    kcr_string_list keys;
    cr_assert_eq(kcr_store_index_keys(s, KCR_INDEX_NAMESPACE, "odd", &keys), KCR_OK);
    cr_assert_eq(keys.len, 50);
    cr_assert(list_has(&keys, "odd/o99"));
    kcr_string_list_free(&keys);
    kcr_store_free(s);
}

Test(indexer, replace_swaps_everything_and_rebuilds_indexes)
{
    kcr_store *s = new_store();
    kcr_store_add_index(s, KCR_INDEX_NAMESPACE, kcr_index_namespace, NULL);
    kcr_object *old = mk("old", "a", "x", "1");
    kcr_store_add(s, old);
    kcr_object *n[3] = {mk("new", "a", "x", "1"), mk("new", "b", "x", "1"),
                        mk("new", "a", "x", "2")};
    cr_assert_eq(kcr_store_replace(s, n, 3), KCR_OK);
    cr_assert_eq(kcr_store_len(s), 2, "duplicate key in the list: later wins");
    kcr_object *got = kcr_store_get_by_key(s, "new/a");
    cr_assert_str_eq(kcr_object_resource_version(got), "2");
    kcr_object_unref(got);
    cr_assert_null(kcr_store_get_by_key(s, "old/a"));
    kcr_string_list vals;
    kcr_store_list_index_values(s, KCR_INDEX_NAMESPACE, &vals);
    cr_assert_eq(vals.len, 1);
    cr_assert_str_eq(vals.items[0], "new");
    kcr_string_list_free(&vals);
    cr_assert_eq(kcr_store_resync(s), KCR_OK);
    cr_assert_eq(kcr_store_replace(s, NULL, 0), KCR_OK);
    cr_assert_eq(kcr_store_len(s), 0);
    kcr_object_unref(old);
    for (int i = 0; i < 3; i++)
        kcr_object_unref(n[i]);
    kcr_store_free(s);
}

Test(indexer, grows_and_shrinks_with_many_objects)
{
    kcr_store *s = new_store();
    kcr_store_add_index(s, KCR_INDEX_NAMESPACE, kcr_index_namespace, NULL);
    kcr_object *objs[2000];
    for (int i = 0; i < 2000; i++) {
        char name[16], ns[16];
        snprintf(name, sizeof name, "o%d", i);
        snprintf(ns, sizeof ns, "ns%d", i % 7);
        objs[i] = mk(ns, name, "x", "1");
        kcr_store_add(s, objs[i]);
    }
    cr_assert_eq(kcr_store_len(s), 2000);
    for (int i = 0; i < 2000; i += 2)
        kcr_store_delete(s, objs[i]);
    cr_assert_eq(kcr_store_len(s), 1000);
    for (int i = 0; i < 2000; i++) {
        kcr_object *got = kcr_store_get(s, objs[i]);
        cr_assert_eq(got, i % 2 ? objs[i] : NULL, "object %d", i);
        kcr_object_unref(got);
    }
    kcr_object_list l;
    kcr_store_by_index(s, KCR_INDEX_NAMESPACE, "ns3", &l);
    size_t expect = 0;
    for (int i = 1; i < 2000; i += 2)
        expect += i % 7 == 3;
    cr_assert_eq(l.len, expect);
    kcr_object_list_free(&l);
    for (int i = 0; i < 2000; i++)
        kcr_store_delete(s, objs[i]);
    kcr_string_list vals;
    kcr_store_list_index_values(s, KCR_INDEX_NAMESPACE, &vals);
    cr_assert_eq(vals.len, 0);
    kcr_string_list_free(&vals);
    for (int i = 0; i < 2000; i++)
        kcr_object_unref(objs[i]);
    kcr_store_free(s);
}

/* References the object holds right now (the private counter). */
static uint32_t refs(const kcr_object *o)
{
    return atomic_load(&o->refs);
}

Test(indexer, references_are_released)
{
    /* The store holds exactly one reference per object and drops it on
     * delete, replace and free; lookups hand out one the caller drops. */
    kcr_store *s = new_store();
    kcr_store_add_index(s, KCR_INDEX_NAMESPACE, kcr_index_namespace, NULL);
    kcr_object *a = mk("ns", "a", "x", "1"), *b = mk("ns", "b", "x", "1");
    cr_assert_eq(refs(a), 1);
    kcr_store_add(s, a);
    cr_assert_eq(refs(a), 2, "the store took one reference");
    kcr_store_add(s, a);
    cr_assert_eq(refs(a), 2, "adding it again replaced, not added, a reference");
    kcr_object *got = kcr_store_get_by_key(s, "ns/a");
    cr_assert(got == a);
    cr_assert_eq(refs(a), 3, "get hands out a reference");
    kcr_object_unref(got);
    cr_assert_eq(refs(a), 2);
    kcr_object_list l = {0};
    cr_assert_eq(kcr_store_by_index(s, KCR_INDEX_NAMESPACE, "ns", &l), KCR_OK);
    cr_assert_eq(l.len, 1);
    cr_assert_eq(refs(a), 3, "a listed object carries one reference");
    kcr_object_list_free(&l);
    cr_assert_eq(refs(a), 2);
    kcr_store_delete(s, a);
    cr_assert_eq(refs(a), 1, "delete dropped the store's reference");
    kcr_store_add(s, a);
    cr_assert_eq(kcr_store_replace(s, &b, 1), KCR_OK);
    cr_assert_eq(refs(a), 1, "replace dropped the reference of what it removed");
    cr_assert_eq(refs(b), 2);
    kcr_object_unref(b); /* the store's reference keeps b alive */
    got = kcr_store_get_by_key(s, "ns/b");
    cr_assert_str_eq(kcr_object_name(got), "b");
    kcr_object_unref(got);
    kcr_object_ref(b);
    cr_assert_eq(refs(b), 2);
    kcr_store_free(s);
    cr_assert_eq(refs(b), 1, "free dropped the store's references");
    cr_assert_eq(refs(a), 1);
    kcr_object_unref(a);
    kcr_object_unref(b);
}

struct conc {
    kcr_store *s;
    int id;
    int bad;
};

static void *writer(void *arg)
{
    struct conc *c = arg;
    char name[32], ns[16], rv[16];
    for (int i = 0; i < 400; i++) {
        snprintf(name, sizeof name, "w%d-%d", c->id, i % 50);
        snprintf(ns, sizeof ns, "ns%d", i % 3);
        snprintf(rv, sizeof rv, "%d", i);
        kcr_object *o = mk(ns, name, i % 2 ? "a" : "b", rv);
        if (i % 5 == 4)
            kcr_store_delete(c->s, o);
        else
            kcr_store_update(c->s, o);
        kcr_object_unref(o);
    }
    return NULL;
}

static void *reader(void *arg)
{
    struct conc *c = arg;
    for (int i = 0; i < 300; i++) {
        kcr_object_list l;
        if (kcr_store_by_index(c->s, KCR_INDEX_NAMESPACE, "ns1", &l) != KCR_OK)
            c->bad++;
        for (size_t j = 0; j < l.len; j++)
            if (strcmp(kcr_object_namespace(l.items[j]), "ns1") != 0)
                c->bad++;
        kcr_object_list_free(&l);
        kcr_string_list keys;
        kcr_store_list_keys(c->s, &keys);
        for (size_t j = 0; j < keys.len; j++) {
            kcr_object *o = kcr_store_get_by_key(c->s, keys.items[j]);
            kcr_object_unref(o); /* may be gone already: fine */
        }
        kcr_string_list_free(&keys);
    }
    return NULL;
}

Test(indexer, concurrent_readers_and_writers, .timeout = 120)
{
    kcr_store *s = new_store();
    kcr_store_add_index(s, KCR_INDEX_NAMESPACE, kcr_index_namespace, NULL);
    kcr_store_add_index(s, "app", by_app, NULL);
    pthread_t t[6];
    struct conc c[6];
    for (int i = 0; i < 6; i++) {
        c[i] = (struct conc){s, i, 0};
        pthread_create(&t[i], NULL, i < 3 ? writer : reader, &c[i]);
    }
    for (int i = 0; i < 6; i++) {
        pthread_join(t[i], NULL);
        cr_assert_eq(c[i].bad, 0);
    }
    /* Every writer's last action per name decides what is left. */
    cr_assert_gt(kcr_store_len(s), 0);
    kcr_object_list all;
    kcr_store_list(s, &all);
    kcr_object_list l;
    kcr_store_by_index(s, "app", "any", &l);
    cr_assert_eq(l.len, all.len, "index and items agree after the storm");
    kcr_object_list_free(&l);
    kcr_object_list_free(&all);
    kcr_store_free(s);
}
