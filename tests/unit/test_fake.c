/* The in-memory fake API: CRUD semantics, resourceVersion/generation,
 * selectors, status subresource, patches, finalizers, paging, watches
 * (resume, expiry, bookmarks, cancel), error injection and hooks, discovery,
 * 404 for resources it does not serve. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "kcr/kcr.h"

static const kcr_resource CM = {"", "v1", "configmaps"};
static const kcr_resource DEPLOY = {"apps", "v1", "deployments"};
static const kcr_resource NS = {"", "v1", "namespaces"};

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static kcr_fake *fake;
static kcr_client *c;

static void setup(void)
{
    cr_assert_eq(kcr_fake_new(NULL, &fake), KCR_OK);
    cr_assert_eq(kcr_fake_client(fake, "default", &c), KCR_OK);
}

static void teardown(void)
{
    kcr_client_free(c);
    kcr_fake_free(fake);
}

static kcr_object *create(const kcr_resource *res, const char *ns, const char *json)
{
    kcr_object *o = NULL;
    kcr_err err = kcr_client_create(c, res, ns, json, 0, NULL, &o, NULL);
    cr_assert_eq(err, KCR_OK, "create %s: %s", json, kcr_last_error());
    return o;
}

static const char *str(const kcr_object *o, const char *path)
{
    const char *s = kcr_value_string(kcr_object_get(o, path), NULL);
    return s ? s : "";
}

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
    cr_assert_eq(kcr_client_get(c, &CM, "ns1", "a", NULL, &got, NULL), KCR_OK);
    cr_assert_str_eq(kcr_object_uid(got), kcr_object_uid(a));
    kcr_object_unref(got);

    /* Changing data (outside metadata/status) bumps RV and generation. */
    kcr_object *b = NULL;
    cr_assert_eq(kcr_client_update(c, &CM, "ns1",
                                   "{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"1\"},"
                                   "\"data\":{\"k\":\"2\"}}",
                                   0, NULL, &b, NULL),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_str_eq(kcr_object_resource_version(b), "2");
    cr_assert_eq(kcr_object_generation(b), 2);
    cr_assert_str_eq(kcr_object_uid(b), kcr_object_uid(a), "uid survives updates");
    cr_assert_str_eq(str(b, "metadata.creationTimestamp"), str(a, "metadata.creationTimestamp"));

    /* A label change bumps RV but not generation. */
    kcr_object *l = NULL;
    cr_assert_eq(kcr_client_update(c, &CM, "ns1",
                                   "{\"metadata\":{\"name\":\"a\",\"labels\":{\"x\":\"y\"}},"
                                   "\"data\":{\"k\":\"2\"}}",
                                   0, NULL, &l, NULL),
                 KCR_OK);
    cr_assert_str_eq(kcr_object_resource_version(l), "3");
    cr_assert_eq(kcr_object_generation(l), 2);

    /* A no-op update writes nothing. */
    kcr_object *same = NULL;
    cr_assert_eq(kcr_client_update(c, &CM, "ns1",
                                   "{\"metadata\":{\"name\":\"a\",\"labels\":{\"x\":\"y\"}},"
                                   "\"data\":{\"k\":\"2\"}}",
                                   0, NULL, &same, NULL),
                 KCR_OK);
    cr_assert_str_eq(kcr_object_resource_version(same), "3");
    cr_assert_eq(kcr_fake_resource_version(fake), 3);

    kcr_object *gone = NULL;
    cr_assert_eq(kcr_client_delete(c, &CM, "ns1", "a", NULL, &gone, NULL), KCR_OK);
    cr_assert_not_null(gone);
    cr_assert_str_eq(kcr_object_resource_version(gone), "4");
    kcr_status st = {0};
    cr_assert_eq(kcr_client_get(c, &CM, "ns1", "a", NULL, &got, &st), KCR_ERR_NOT_FOUND);
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
    cr_assert_eq(kcr_client_patch(c, &CM, "d", "a", KCR_PATCH_MERGE, "{\"data\":{\"v\":\"1\"}}",
                                  0, NULL, NULL, NULL),
                 KCR_OK);
    kcr_status st = {0};
    cr_assert_eq(kcr_client_update(c, &CM, "d",
                                   "{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"1\"},"
                                   "\"data\":{\"v\":\"2\"}}",
                                   0, NULL, NULL, &st),
                 KCR_ERR_CONFLICT);
    cr_assert_eq(st.code, 409);
    cr_assert_str_eq(st.reason, "Conflict");
    cr_assert(strstr(st.message, "the object has been modified") != NULL);
    cr_assert_eq(kcr_client_create(c, &CM, "d", "{\"metadata\":{\"name\":\"a\"}}", 0, NULL, NULL,
                                   &st),
                 KCR_ERR_EXISTS);
    cr_assert_str_eq(st.reason, "AlreadyExists");
    cr_assert_eq(kcr_client_create(c, &CM, "d", "{\"metadata\":{\"name\":\"Bad_Name\"}}", 0, NULL,
                                   NULL, &st),
                 KCR_ERR_INVALID_OBJECT);
    cr_assert_eq(st.code, 422);
    cr_assert_eq(st.details.n_causes, 1);
    cr_assert_str_eq(st.details.causes[0].field, "metadata.name");
    cr_assert_eq(kcr_client_create(c, &CM, "other", "{\"metadata\":{\"name\":\"x\",\"namespace\":"
                                                   "\"d\"}}",
                                   0, NULL, NULL, &st),
                 KCR_ERR_API);
    cr_assert_eq(st.code, 400);
    kcr_object *g = NULL;
    cr_assert_eq(kcr_client_create(c, &CM, "d", "{\"metadata\":{\"generateName\":\"gen-\"}}", 0,
                                   NULL, &g, NULL),
                 KCR_OK);
    cr_assert_eq(strncmp(kcr_object_name(g), "gen-", 4), 0);
    cr_assert_eq(strlen(kcr_object_name(g)), 9);
    kcr_object_unref(g);
    kcr_status_clear(&st);
}

struct names {
    int n;
    char v[32][32];
};

static kcr_err collect(kcr_object *o, void *ud)
{
    struct names *n = ud;
    if (n->n < 32)
        snprintf(n->v[n->n], 32, "%s/%s", kcr_object_namespace(o), kcr_object_name(o));
    n->n++;
    return KCR_OK;
}

static struct names list(const char *ns, const char *selector)
{
    struct names n = {0};
    kcr_list_options o = {.label_selector = selector};
    kcr_err err = kcr_client_list(c, &CM, ns, &o, collect, &n, NULL, NULL);
    cr_assert_eq(err, KCR_OK, "%s: %s", selector ? selector : "", kcr_last_error());
    return n;
}

Test(fake, namespaces_and_cluster_scope, .init = setup, .fini = teardown)
{
    kcr_object_unref(create(&CM, "a", "{\"metadata\":{\"name\":\"x\"}}"));
    kcr_object_unref(create(&CM, "b", "{\"metadata\":{\"name\":\"x\"}}"));
    kcr_object *n = create(&NS, "ignored", "{\"metadata\":{\"name\":\"team\"}}");
    cr_assert_str_eq(kcr_object_namespace(n), "", "namespaces are cluster-scoped");
    kcr_object_unref(n);
    kcr_object *got = NULL;
    cr_assert_eq(kcr_client_get(c, &NS, NULL, "team", NULL, &got, NULL), KCR_OK);
    kcr_object_unref(got);
    struct names in_a = list("a", NULL);
    cr_assert_eq(in_a.n, 1, "a list in a namespace holds only its objects");
    cr_assert_str_eq(in_a.v[0], "a/x");
    kcr_list_meta meta = {0};
    cr_assert_eq(kcr_client_list(c, &CM, "a", NULL, NULL, NULL, &meta, NULL), KCR_OK);
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
    kcr_list_options bad = {.label_selector = "app in (x"};
    kcr_status st = {0};
    cr_assert_eq(kcr_client_list(c, &CM, NULL, &bad, collect, &n, NULL, &st), KCR_ERR_API);
    cr_assert_eq(st.code, 400);
    kcr_status_clear(&st);
    kcr_list_options f = {.field_selector = "metadata.name=plain"};
    n = (struct names){0};
    cr_assert_eq(kcr_client_list(c, &CM, NULL, &f, collect, &n, NULL, NULL), KCR_OK);
    cr_assert_eq(n.n, 1);
}

Test(fake, paging, .init = setup, .fini = teardown)
{
    char json[128];
    for (int i = 0; i < 5; i++) {
        snprintf(json, sizeof json, "{\"metadata\":{\"name\":\"cm-%d\"}}", i);
        kcr_object_unref(create(&CM, "p", json));
    }
    kcr_list_options o = {.limit = 2};
    kcr_list_meta meta = {0};
    struct names all = {0};
    int pages = 0;
    char *cont = NULL;
    do {
        o.continue_token = cont;
        cr_assert_eq(kcr_client_list(c, &CM, "p", &o, collect, &all, &meta, NULL), KCR_OK);
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
    cr_assert_eq(kcr_client_list(c, &CM, "p", &o, collect, &all, &meta, NULL), KCR_ERR_API);
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
    kcr_list_options page = {.limit = 1};
    cr_assert_eq(kcr_client_list(c, &CM, "t", &page, collect_types, &n, NULL, NULL), KCR_OK);
    cr_assert_eq(kcr_client_list(c, &DEPLOY, NULL, NULL, collect_types, &n, NULL, NULL), KCR_OK);
    kcr_list_options meta = {.metadata_only = true};
    cr_assert_eq(kcr_client_list(c, &CM, "t", &meta, collect_types, &n, NULL, NULL), KCR_OK);
    cr_assert_eq(n.n, 4);
    cr_assert_str_eq(n.v[0], "v1 ConfigMap");
    cr_assert_str_eq(n.v[1], "apps/v1 Deployment");
    cr_assert_str_eq(n.v[2], "meta.k8s.io/v1 PartialObjectMetadata");
    cr_assert_str_eq(n.v[3], "meta.k8s.io/v1 PartialObjectMetadata");
}

Test(fake, status_subresource, .init = setup, .fini = teardown)
{
    kcr_object_unref(create(&DEPLOY, "d", "{\"metadata\":{\"name\":\"w\"},\"spec\":{\"replicas\":1}}"));
    kcr_object *o = NULL;
    cr_assert_eq(kcr_client_update_status(c, &DEPLOY, "d",
                                          "{\"metadata\":{\"name\":\"w\"},\"spec\":{\"replicas\":9},"
                                          "\"status\":{\"readyReplicas\":1}}",
                                          0, &o, NULL),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_value_int(kcr_object_get(o, "status.readyReplicas")), 1);
    cr_assert_eq(kcr_value_int(kcr_object_get(o, "spec.replicas")), 1, "status update keeps spec");
    cr_assert_eq(kcr_object_generation(o), 1);
    kcr_object_unref(o);
    cr_assert_eq(kcr_client_update(c, &DEPLOY, "d",
                                   "{\"metadata\":{\"name\":\"w\"},\"spec\":{\"replicas\":3},"
                                   "\"status\":{\"readyReplicas\":7}}",
                                   0, NULL, &o, NULL),
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
    cr_assert_eq(kcr_client_patch(c, &CM, "d", "p", KCR_PATCH_MERGE,
                                  "{\"data\":{\"a\":null,\"c\":\"3\"}}", 0, NULL, &o, NULL),
                 KCR_OK);
    cr_assert_eq(kcr_value_get_type(kcr_object_get(o, "data.a")), KCR_VALUE_ABSENT);
    cr_assert_str_eq(str(o, "data.c"), "3");
    kcr_object_unref(o);
    cr_assert_eq(kcr_client_patch(c, &CM, "d", "p", KCR_PATCH_JSON,
                                  "[{\"op\":\"replace\",\"path\":\"/data/b\",\"value\":\"x\"},"
                                  "{\"op\":\"add\",\"path\":\"/metadata/labels\",\"value\":{\"l\":\"v\"}}]",
                                  0, NULL, &o, NULL),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_str_eq(str(o, "data.b"), "x");
    cr_assert_str_eq(kcr_object_label(o, "l"), "v");
    kcr_object_unref(o);
    kcr_status st = {0};
    cr_assert_eq(kcr_client_patch(c, &CM, "d", "p", KCR_PATCH_JSON,
                                  "[{\"op\":\"test\",\"path\":\"/data/b\",\"value\":\"nope\"}]", 0,
                                  NULL, NULL, &st),
                 KCR_ERR_INVALID_OBJECT);
    cr_assert_eq(kcr_client_patch(c, &CM, "d", "p", KCR_PATCH_STRATEGIC,
                                  "{\"data\":{\"s\":\"1\"}}", 0, NULL, &o, NULL),
                 KCR_OK);
    cr_assert_str_eq(str(o, "data.s"), "1");
    kcr_object_unref(o);
    cr_assert_eq(
        kcr_client_patch(c, &CM, "d", "new", KCR_PATCH_APPLY,
                         "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"data\":{\"z\":\"1\"}}", 0,
                         NULL, &o, NULL),
        KCR_OK, "apply defaults its field manager to the program's name: %s", kcr_last_error());
    kcr_object_unref(o);
    kcr_write_options w = {.field_manager = "test"};
    cr_assert_eq(kcr_client_patch(c, &CM, "d", "new", KCR_PATCH_APPLY,
                                  "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"data\":{\"z\":\"1\"}}",
                                  0, &w, &o, NULL),
                 KCR_OK, "apply creates: %s", kcr_last_error());
    cr_assert_str_eq(kcr_object_name(o), "new");
    kcr_object_unref(o);
    cr_assert_eq(kcr_client_patch(c, &CM, "d", "missing", KCR_PATCH_MERGE, "{}", 0, NULL, NULL, &st),
                 KCR_ERR_NOT_FOUND);
    cr_assert_eq(kcr_client_patch(c, &CM, "d", "p", KCR_PATCH_MERGE,
                                  "{\"metadata\":{\"resourceVersion\":\"1\"},\"data\":{\"q\":\"1\"}}",
                                  0, NULL, NULL, &st),
                 KCR_ERR_CONFLICT, "a patch with a stale resourceVersion conflicts");
    kcr_status_clear(&st);
}

Test(fake, finalizers_and_preconditions, .init = setup, .fini = teardown)
{
    kcr_object *o = create(&CM, "d", "{\"metadata\":{\"name\":\"f\",\"finalizers\":[\"x/y\"]}}");
    kcr_delete_options pre = {.precondition_uid = "not-the-uid"};
    kcr_status st = {0};
    cr_assert_eq(kcr_client_delete(c, &CM, "d", "f", &pre, NULL, &st), KCR_ERR_CONFLICT);
    cr_assert(strstr(st.message, "Precondition failed") != NULL);
    pre = (kcr_delete_options){.precondition_uid = kcr_object_uid(o),
                               .precondition_resource_version = "1"};
    kcr_object *d = NULL;
    cr_assert_eq(kcr_client_delete(c, &CM, "d", "f", &pre, &d, &st), KCR_OK, "%s",
                 kcr_last_error());
    cr_assert(kcr_object_is_deleting(d));
    cr_assert_str_eq(kcr_object_resource_version(d), "2");
    kcr_object_unref(d);
    kcr_object *still = NULL;
    cr_assert_eq(kcr_client_get(c, &CM, "d", "f", NULL, &still, NULL), KCR_OK);
    cr_assert(kcr_object_is_deleting(still));
    kcr_object_unref(still);
    /* Removing the last finalizer deletes it. */
    cr_assert_eq(kcr_client_patch(c, &CM, "d", "f", KCR_PATCH_MERGE,
                                  "{\"metadata\":{\"finalizers\":null}}", 0, NULL, NULL, NULL),
                 KCR_OK);
    cr_assert_eq(kcr_client_get(c, &CM, "d", "f", NULL, &still, NULL), KCR_ERR_NOT_FOUND);
    kcr_object_unref(o);
    kcr_status_clear(&st);
}

/* ---------------------------------- watch ---------------------------------- */

struct seen {
    pthread_mutex_t lock;
    int n;
    kcr_watch_event_type type[64];
    char name[64][32];
    char rv[64][16];
    bool end_marker[64];
    int stop_after;
};

static kcr_err on_event(const kcr_watch_event *ev, void *ud)
{
    struct seen *s = ud;
    pthread_mutex_lock(&s->lock);
    if (s->n < 64) {
        s->type[s->n] = ev->type;
        snprintf(s->name[s->n], 32, "%s", ev->object ? kcr_object_name(ev->object) : "");
        snprintf(s->rv[s->n], 16, "%s", ev->resource_version);
        s->end_marker[s->n] = ev->initial_events_end;
    }
    s->n++;
    int n = s->n;
    pthread_mutex_unlock(&s->lock);
    return s->stop_after && n >= s->stop_after ? KCR_ERR_CANCELED : KCR_OK;
}

Test(fake, watch_resume_and_expiry, .init = setup, .fini = teardown)
{
    kcr_object_unref(create(&CM, "w", "{\"metadata\":{\"name\":\"a\"}}"));  /* rv 1 */
    kcr_object_unref(create(&CM, "w", "{\"metadata\":{\"name\":\"b\"}}"));  /* rv 2 */
    cr_assert_eq(kcr_client_patch(c, &CM, "w", "a", KCR_PATCH_MERGE, "{\"data\":{\"x\":\"1\"}}", 0,
                                  NULL, NULL, NULL),
                 KCR_OK); /* rv 3 */
    cr_assert_eq(kcr_client_delete(c, &CM, "w", "b", NULL, NULL, NULL), KCR_OK); /* rv 4 */
    struct seen s = {.lock = PTHREAD_MUTEX_INITIALIZER, .stop_after = 3};
    kcr_list_options o = {.resource_version = "1"};
    cr_assert_eq(kcr_client_watch(c, &CM, "w", &o, on_event, &s, NULL), KCR_ERR_CANCELED);
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
    cr_assert_eq(kcr_client_watch(c, &CM, "w", &o, on_event, &s, NULL), KCR_ERR_CANCELED);
    cr_assert_str_eq(s.name[0], "a");
    cr_assert_str_eq(s.rv[0], "3");

    kcr_fake_compact(fake);
    s = (struct seen){.lock = PTHREAD_MUTEX_INITIALIZER};
    o.resource_version = "2";
    kcr_status st = {0};
    cr_assert_eq(kcr_client_watch(c, &CM, "w", &o, on_event, &s, &st), KCR_ERR_GONE);
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
    kcr_list_options o = {.resource_version = "3"};
    cr_assert_eq(kcr_client_watch(c, &CM, "h", &o, on_event, &s, NULL), KCR_ERR_CANCELED);
    cr_assert_str_eq(s.name[0], "h3");
    o.resource_version = "2";
    s = (struct seen){.lock = PTHREAD_MUTEX_INITIALIZER};
    cr_assert_eq(kcr_client_watch(c, &CM, "h", &o, on_event, &s, NULL), KCR_ERR_GONE);
    teardown();
}

Test(fake, initial_events_and_bookmarks, .init = setup, .fini = teardown)
{
    kcr_object_unref(create(&CM, "i", "{\"metadata\":{\"name\":\"a\"}}"));
    kcr_object_unref(create(&CM, "i", "{\"metadata\":{\"name\":\"b\"}}"));
    struct seen s = {.lock = PTHREAD_MUTEX_INITIALIZER, .stop_after = 3};
    kcr_list_options o = {.send_initial_events = true,
                          .allow_bookmarks = true,
                          .resource_version_match = "NotOlderThan"};
    cr_assert_eq(kcr_client_watch(c, &CM, "i", &o, on_event, &s, NULL), KCR_ERR_CANCELED);
    cr_assert_eq(s.type[0], KCR_WATCH_ADDED);
    cr_assert_eq(s.type[1], KCR_WATCH_ADDED);
    cr_assert_eq(s.type[2], KCR_WATCH_BOOKMARK);
    cr_assert(s.end_marker[2]);
    cr_assert_str_eq(s.rv[2], "2");
}

struct watch_thread {
    kcr_list_options opts;
    struct seen seen;
    kcr_err result;
    kcr_status st;
    pthread_t t;
};

static void *run_watch(void *arg)
{
    struct watch_thread *w = arg;
    w->result = kcr_client_watch(c, &CM, "t", &w->opts, on_event, &w->seen, &w->st);
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
    cr_assert_eq(kcr_client_patch(c, &CM, "t", "m", KCR_PATCH_MERGE,
                                  "{\"metadata\":{\"labels\":{\"app\":\"y\"}}}", 0, NULL, NULL, NULL),
                 KCR_OK);
    cr_assert_eq(kcr_client_patch(c, &CM, "t", "other", KCR_PATCH_MERGE,
                                  "{\"metadata\":{\"labels\":{\"app\":\"x\"}}}", 0, NULL, NULL, NULL),
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
    kcr_list_options o = {.timeout_ms = 1};
    t0 = kcr__now_ns();
    cr_assert_eq(kcr_client_watch(c, &CM, "t", &o, on_event, &s, NULL), KCR_OK);
    cr_assert_geq(kcr__now_ns() - t0, KCR_NS_PER_S - 10 * KCR_NS_PER_MS);
    o = (kcr_list_options){.idle_timeout_ms = 300};
    cr_assert_eq(kcr_client_watch(c, &CM, "t", &o, on_event, &s, NULL), KCR_ERR_TIMEOUT);

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

/* ---------------------------------- injection, hooks, discovery ---------------------------------- */

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
    cr_assert_eq(kcr_fake_inject_error(fake, KCR_FAKE_CREATE, &CM, 2, 429, "TooManyRequests",
                                       "slow down"),
                 KCR_OK);
    kcr_status st = {0};
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(kcr_client_create(c, &CM, "e", "{\"metadata\":{\"name\":\"a\"}}", 0, NULL,
                                       NULL, &st),
                     KCR_ERR_TOO_MANY);
        cr_assert_eq(st.code, 429);
        cr_assert_str_eq(st.message, "slow down");
    }
    kcr_object_unref(create(&CM, "e", "{\"metadata\":{\"name\":\"a\"}}"));
    cr_assert_eq(kcr_fake_inject_error(fake, KCR_FAKE_ANY, NULL, -1, 403, "Forbidden", "no"),
                 KCR_OK);
    cr_assert_eq(kcr_client_get(c, &DEPLOY, "e", "x", NULL, NULL, &st), KCR_ERR_FORBIDDEN);
    cr_assert_eq(kcr_client_list(c, &CM, "e", NULL, NULL, NULL, NULL, &st), KCR_ERR_FORBIDDEN);
    cr_assert_eq(kcr_client_watch(c, &CM, "e", NULL, on_event, NULL, &st), KCR_ERR_FORBIDDEN);
    kcr_fake_clear_errors(fake);
    cr_assert_eq(kcr_client_get(c, &CM, "e", "a", NULL, NULL, &st), KCR_OK);
    cr_assert_eq(h.calls, 7);
    cr_assert_eq(h.last, KCR_FAKE_GET);
    cr_assert_eq(kcr_fake_count(fake, KCR_FAKE_CREATE, &CM), 3);
    cr_assert_eq(kcr_fake_count(fake, KCR_FAKE_GET, NULL), 2);
    cr_assert_eq(kcr_fake_count(fake, KCR_FAKE_ANY, NULL), 7);
    kcr_status_clear(&st);
}

Test(fake, discovery_and_crds, .init = setup, .fini = teardown)
{
    kcr_api_resource r;
    cr_assert_eq(kcr_client_resolve(c, "cm", &r, NULL), KCR_OK);
    cr_assert_str_eq(r.resource, "configmaps");
    cr_assert(r.namespaced);
    cr_assert_eq(kcr_client_resolve(c, "deploy", &r, NULL), KCR_OK);
    cr_assert_str_eq(r.group, "apps");
    cr_assert_eq(kcr_client_resolve(c, "Deployment", &r, NULL), KCR_OK);
    cr_assert_str_eq(r.resource, "deployments");
    cr_assert_eq(kcr_client_resolve(c, "deployments.apps", &r, NULL), KCR_OK);
    cr_assert_eq(kcr_client_resolve(c, "deployments.v1.apps", &r, NULL), KCR_OK);
    cr_assert_eq(kcr_client_resolve(c, "ns", &r, NULL), KCR_OK);
    cr_assert_not(r.namespaced);
    cr_assert_eq(kcr_client_resolve(c, "foos", &r, NULL), KCR_ERR_NOT_FOUND);
    const kcr_resource crds = {"apiextensions.k8s.io", "v1", "customresourcedefinitions"};
    kcr_object_unref(create(&crds, NULL,
                            "{\"metadata\":{\"name\":\"foos.example.com\"},\"spec\":{\"group\":"
                            "\"example.com\",\"scope\":\"Namespaced\",\"names\":{\"plural\":\"foos\","
                            "\"singular\":\"foo\",\"kind\":\"Foo\",\"shortNames\":[\"fo\"]},"
                            "\"versions\":[{\"name\":\"v1\",\"served\":true,\"storage\":true}]}}"));
    cr_assert_eq(kcr_client_resolve(c, "fo", &r, NULL), KCR_OK);
    cr_assert_str_eq(r.group, "example.com");
    cr_assert_str_eq(r.kind, "Foo");
    cr_assert_eq(kcr_client_resolve_kind(c, "example.com", NULL, "Foo", &r, NULL), KCR_OK);
    cr_assert_str_eq(r.resource, "foos");
    kcr_resource foo = kcr_api_resource_gvr(&r);
    kcr_object *o = create(&foo, "x", "{\"metadata\":{\"name\":\"f1\"},\"spec\":{\"a\":1}}");
    cr_assert_str_eq(kcr_object_api_version(o), "example.com/v1");
    cr_assert_str_eq(kcr_object_kind(o), "Foo");
    kcr_object_unref(o);
    cr_assert_eq(kcr_client_raw(c, "GET", "/api", NULL, NULL, NULL, 0, NULL, NULL, NULL),
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
        kcr_list_options lo = {0};
        int n = 0;
        expect_not_served(kcr_client_list(c, res, "default", &lo, count_item, &n, NULL, &st), &st,
                          "list");
        cr_assert_eq(n, 0);
        expect_not_served(kcr_client_list(c, res, NULL, &lo, count_item, &n, NULL, &st), &st,
                          "list across namespaces");
        lo.timeout_ms = 1000;
        expect_not_served(kcr_client_watch(c, res, "default", &lo, ignore_event, NULL, &st), &st,
                          "watch");
        expect_not_served(kcr_client_get(c, res, "default", "t", NULL, NULL, &st), &st, "get");
        expect_not_served(kcr_client_create(c, res, "default", body, 0, NULL, NULL, &st), &st,
                          "create");
        expect_not_served(kcr_client_delete(c, res, "default", "t", NULL, NULL, &st), &st,
                          "delete");
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
    cr_assert_eq(kcr_client_list(c, &things, "default", NULL, count_item, &n, NULL, NULL), KCR_OK,
                 "%s", kcr_last_error());
    cr_assert_eq(n, 0);
    kcr_object_unref(create(&things, "default", body));
    cr_assert_eq(kcr_client_list(c, &things, "default", NULL, count_item, &n, NULL, NULL), KCR_OK);
    cr_assert_eq(n, 1);
}

Test(fake, metadata_only, .init = setup, .fini = teardown)
{
    kcr_object_unref(create(&CM, "m", "{\"metadata\":{\"name\":\"a\"},\"data\":{\"big\":\"x\"}}"));
    kcr_get_options g = {.metadata_only = true};
    kcr_object *o = NULL;
    cr_assert_eq(kcr_client_get(c, &CM, "m", "a", &g, &o, NULL), KCR_OK);
    cr_assert_str_eq(kcr_object_kind(o), "PartialObjectMetadata");
    cr_assert_eq(kcr_value_get_type(kcr_object_get(o, "data")), KCR_VALUE_ABSENT);
    cr_assert_str_eq(kcr_object_name(o), "a");
    kcr_object_unref(o);
}

/* Many writers, one watcher: every write is seen, in resourceVersion order. */
static void *writer(void *arg)
{
    int id = (int)(intptr_t)arg;
    char json[64];
    for (int i = 0; i < 25; i++) {
        snprintf(json, sizeof json, "{\"metadata\":{\"name\":\"w%d-%d\"}}", id, i);
        kcr_object *o = NULL;
        if (kcr_client_create(c, &CM, "t", json, 0, NULL, &o, NULL) != KCR_OK)
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
    kcr_list_options opts = {.resource_version = "0"};
    o->result = kcr_client_watch(c, &CM, "t", &opts, check_order, o->state, NULL);
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

/* Every verb takes a cancellation token; one that already fired stops the
 * call before it touches the (fake) server. */
Test(fake, triggered_cancel_stops_every_verb, .init = setup, .fini = teardown)
{
    kcr_object_unref(create(&CM, "d", "{\"metadata\":{\"name\":\"a\"}}"));
    kcr_cancel *cancel;
    cr_assert_eq(kcr_cancel_new(&cancel), KCR_OK);
    kcr_cancel_trigger(cancel);
    kcr_get_options g = {.cancel = cancel};
    kcr_write_options w = {.cancel = cancel};
    kcr_delete_options d = {.cancel = cancel};
    kcr_raw_options r = {.cancel = cancel};
    const char *cm = "{\"metadata\":{\"name\":\"b\"}}";
    kcr_object *o = NULL;
    cr_assert_eq(kcr_client_get(c, &CM, "d", "a", &g, &o, NULL), KCR_ERR_CANCELED);
    cr_assert_eq(kcr_client_create(c, &CM, "d", cm, 0, &w, &o, NULL), KCR_ERR_CANCELED);
    cr_assert_eq(kcr_client_update(c, &CM, "d", cm, 0, &w, &o, NULL), KCR_ERR_CANCELED);
    cr_assert_eq(kcr_client_update_status_opts(c, &CM, "d", cm, 0, &w, &o, NULL), KCR_ERR_CANCELED);
    cr_assert_eq(kcr_client_patch(c, &CM, "d", "a", KCR_PATCH_MERGE, "{}", 0, &w, &o, NULL),
                 KCR_ERR_CANCELED);
    cr_assert_eq(kcr_client_delete(c, &CM, "d", "a", &d, &o, NULL), KCR_ERR_CANCELED);
    cr_assert_eq(kcr_client_request(c, "/api", NULL, 0, &r, NULL, NULL, NULL), KCR_ERR_CANCELED);
    kcr_resolve_options ro = {.cancel = cancel};
    kcr_api_resource ar;
    cr_assert_eq(kcr_client_resolve_opts(c, "cm", &ro, &ar, NULL), KCR_ERR_CANCELED);
    cr_assert_eq(kcr_client_resolve_kind_opts(c, "", "v1", "ConfigMap", &ro, &ar, NULL),
                 KCR_ERR_CANCELED);
    cr_assert(strstr(kcr_last_error(), "canceled") != NULL, "%s", kcr_last_error());
    cr_assert_null(o);
    /* nothing was written or deleted */
    cr_assert_eq(kcr_client_get(c, &CM, "d", "a", NULL, &o, NULL), KCR_OK);
    kcr_object_unref(o);
    cr_assert_eq(kcr_client_get(c, &CM, "d", "b", NULL, &o, NULL), KCR_ERR_NOT_FOUND);
    kcr_cancel_reset(cancel);
    cr_assert_eq(kcr_client_get(c, &CM, "d", "a", &g, &o, NULL), KCR_OK, "a reset token");
    kcr_object_unref(o);
    cr_assert_eq(kcr_client_resolve_opts(c, "cm", &ro, &ar, NULL), KCR_OK);
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
    kcr_list_options lo = {.timeout_ms = too_long};
    cr_assert_eq(kcr_client_list(c, &CM, "d", &lo, NULL, NULL, NULL, NULL), KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "timeout_ms"), "%s", kcr_last_error());
    lo = (kcr_list_options){.idle_timeout_ms = INT64_MAX};
    cr_assert_eq(kcr_client_watch(c, &CM, "d", &lo, NULL, NULL, NULL), KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "idle_timeout_ms"), "%s", kcr_last_error());
    kcr_object_unref(create(&CM, "d", "{\"metadata\":{\"name\":\"a\"}}"));
    kcr_delete_options d = {.has_grace_period = true, .grace_period_ms = too_long};
    cr_assert_eq(kcr_client_delete(c, &CM, "d", "a", &d, NULL, NULL), KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "grace period"), "%s", kcr_last_error());
    d.grace_period_ms = 0;
    cr_assert_eq(kcr_client_delete(c, &CM, "d", "a", &d, NULL, NULL), KCR_OK, "%s",
                 kcr_last_error());
}
