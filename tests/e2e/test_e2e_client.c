/* End-to-end: the HTTP client against the real kube-apiserver of testenv
 * ($KCR_TESTENV_DIR, default /tmp/kcr-testenv): client-certificate and
 * bearer-token auth, ConfigMap CRUD, paging, every patch type, Status
 * decoding (404/409/422), 403 for the limited user, a CRD's custom
 * resources, discovery, watches (incl. streaming initial events),
 * metadata-only lists, and TLS failures explained (no CA, wrong host name). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "kcr/kcr.h"

static const kcr_resource CM = {"", "v1", "configmaps"};
static const kcr_resource NSR = {"", "v1", "namespaces"};
static const kcr_resource CRDS = {"apiextensions.k8s.io", "v1", "customresourcedefinitions"};

static kcr_client *client;
static char ns[64];

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static kcr_client *connect_as(const char *which)
{
    const char *dir = getenv("KCR_TESTENV_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.kubeconfig", dir && *dir ? dir : "/tmp/kcr-testenv", which);
    if (access(path, R_OK) != 0)
        cr_assert_fail("no %s: start the test environment with testenv/start (or run ctest "
                       "with the testenv fixture) and set KCR_TESTENV_DIR",
                       path);
    kcr_config_options o = {.kubeconfig = path};
    kcr_config *cfg;
    cr_assert_eq(kcr_config_load_kubeconfig(&o, &cfg), KCR_OK, "%s", kcr_last_error());
    kcr_client *c;
    cr_assert_eq(kcr_client_new(cfg, NULL, &c), KCR_OK, "%s", kcr_last_error());
    kcr_config_free(cfg);
    return c;
}

static void setup(void)
{
    client = connect_as("admin");
    srand((unsigned)(kcr__now_ns() ^ getpid()));
    snprintf(ns, sizeof ns, "e2e-client-%d-%d", (int)getpid(), rand() % 100000);
    char json[256];
    snprintf(json, sizeof json, "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"%s\"}}", ns);
    cr_assert_eq(kcr_client_create(client, &(kcr_request){.resource = &NSR, .body = json}, NULL),
                 KCR_OK, "%s", kcr_last_error());
}

static void teardown(void)
{
    kcr_client_delete(client, &(kcr_request){.resource = &NSR, .name = ns}, NULL);
    kcr_client_free(client);
}

static kcr_object *create_cm(const char *name, const char *data)
{
    char json[512];
    snprintf(json, sizeof json, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"%s\"},\"data\":%s}",
             name, data ? data : "{}");
    kcr_object *o = NULL;
    cr_assert_eq(
        kcr_client_create(client, &(kcr_request){.resource = &CM, .ns = ns, .body = json}, &o),
        KCR_OK, "%s", kcr_last_error());
    return o;
}

static const char *str(const kcr_object *o, const char *path)
{
    const char *s = kcr_value_string(kcr_object_get(o, path), NULL);
    return s ? s : "";
}

Test(e2e_client, cert_and_token_auth)
{
    const char *users[] = {"admin", "token"};
    for (int i = 0; i < 2; i++) {
        kcr_client *c = connect_as(users[i]);
        kcr_object *o = NULL;
        cr_assert_eq(kcr_client_get(c, &(kcr_request){.resource = &NSR, .name = "default"}, &o),
                     KCR_OK, "%s: %s", users[i], kcr_last_error());
        cr_assert_str_eq(kcr_object_name(o), "default");
        kcr_object_unref(o);
        kcr_client_free(c);
    }
}

Test(e2e_client, configmap_crud_and_status_errors, .init = setup, .fini = teardown)
{
    kcr_object *a = create_cm("alpha", "{\"k\":\"1\"}");
    cr_assert_str_eq(kcr_object_namespace(a), ns);
    cr_assert_str_not_empty(kcr_object_uid(a));
    kcr_object *got = NULL;
    cr_assert_eq(
        kcr_client_get(client, &(kcr_request){.resource = &CM, .ns = ns, .name = "alpha"}, &got),
        KCR_OK);
    cr_assert_str_eq(kcr_object_resource_version(got), kcr_object_resource_version(a));
    kcr_object_unref(got);

    char json[512];
    snprintf(json, sizeof json,
             "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"alpha\","
             "\"resourceVersion\":\"%s\"},\"data\":{\"k\":\"2\"}}",
             kcr_object_resource_version(a));
    kcr_object *b = NULL;
    cr_assert_eq(
        kcr_client_update(client, &(kcr_request){.resource = &CM, .ns = ns, .body = json}, &b),
        KCR_OK, "%s", kcr_last_error());
    cr_assert_str_eq(str(b, "data.k"), "2");
    kcr_status st = {0};
    cr_assert_eq(
        kcr_client_update(
            client, &(kcr_request){.resource = &CM, .ns = ns, .body = json, .status = &st}, NULL),
        KCR_ERR_CONFLICT, "stale resourceVersion");
    cr_assert_eq(st.code, 409);
    cr_assert_str_eq(st.reason, "Conflict");
    cr_assert(strstr(st.message, "the object has been modified") != NULL, "%s", st.message);

    snprintf(json, sizeof json, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"alpha\"}}");
    cr_assert_eq(
        kcr_client_create(
            client, &(kcr_request){.resource = &CM, .ns = ns, .body = json, .status = &st}, NULL),
        KCR_ERR_EXISTS);
    cr_assert_eq(st.code, 409);
    cr_assert_str_eq(st.reason, "AlreadyExists");
    cr_assert_str_eq(st.details.name, "alpha");
    cr_assert_str_eq(st.details.kind, "configmaps");

    cr_assert_eq(
        kcr_client_get(client,
                       &(kcr_request){.resource = &CM, .ns = ns, .name = "missing", .status = &st},
                       NULL),
        KCR_ERR_NOT_FOUND);
    cr_assert_eq(st.code, 404);
    cr_assert_str_eq(st.message, "configmaps \"missing\" not found");
    cr_assert_str_eq(kcr_last_error(), "404 NotFound: configmaps \"missing\" not found");

    cr_assert_eq(
        kcr_client_create(
            client,
            &(kcr_request){.resource = &CM,
                           .ns = ns,
                           .body = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":"
                                   "{\"name\":\"Not_Valid\"}}",
                           .status = &st},
            NULL),
        KCR_ERR_INVALID_OBJECT);
    cr_assert_eq(st.code, 422);
    cr_assert_str_eq(st.reason, "Invalid");
    cr_assert_geq(st.details.n_causes, 1);
    cr_assert_str_eq(st.details.causes[0].field, "metadata.name");
    cr_assert_str_eq(st.details.causes[0].type, "FieldValueInvalid");

    kcr_request d = {.resource = &CM,
                     .ns = ns,
                     .name = "alpha",
                     .precondition_uid = "00000000-0000-0000-0000-000000000000",
                     .status = &st};
    cr_assert_eq(kcr_client_delete(client, &d, NULL), KCR_ERR_CONFLICT, "uid precondition");
    d = (kcr_request){.resource = &CM,
                      .ns = ns,
                      .name = "alpha",
                      .status = &st,
                      .precondition_uid = kcr_object_uid(a),
                      .propagation_policy = "Background"};
    cr_assert_eq(kcr_client_delete(client, &d, NULL), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(
        kcr_client_get(client,
                       &(kcr_request){.resource = &CM, .ns = ns, .name = "alpha", .status = &st},
                       NULL),
        KCR_ERR_NOT_FOUND);
    kcr_object_unref(a);
    kcr_object_unref(b);
    kcr_status_clear(&st);
}

static kcr_err count(kcr_object *o, void *ud)
{
    (*(int *)ud)++;
    return KCR_OK;
}

Test(e2e_client, paging_with_limit_2, .init = setup, .fini = teardown)
{
    char name[32];
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "page-%d", i);
        kcr_object_unref(create_cm(name, NULL));
    }
    /* kube-root-ca.crt is published into every namespace: 6 objects at most */
    int items = 0, pages = 0;
    kcr_request o = {.resource = &CM, .ns = ns, .limit = 2, .label_selector = NULL};
    kcr_list_meta meta = {0};
    char *cont = NULL;
    do {
        o.continue_token = cont;
        cr_assert_eq(kcr_client_list(client, &o, count, &items, &meta), KCR_OK, "%s",
                     kcr_last_error());
        if (pages == 0) {
            cr_assert_str_not_empty(meta.continue_token);
            cr_assert(meta.has_remaining_item_count);
            cr_assert_geq(meta.remaining_item_count, 3);
        }
        cr_assert_str_not_empty(meta.resource_version);
        pages++;
        free(cont);
        cont = *meta.continue_token ? strdup(meta.continue_token) : NULL;
        kcr_list_meta_clear(&meta);
    } while (cont);
    cr_assert_geq(items, 5);
    cr_assert_eq(pages, (items + 1) / 2);
    /* An expired/garbled continue token is rejected. */
    o.continue_token = "bm90LWEtdG9rZW4";
    kcr_status st = {0};
    o.status = &st;
    kcr_err err = kcr_client_list(client, &o, count, &items, &meta);
    cr_assert(err == KCR_ERR_BAD_REQUEST || err == KCR_ERR_GONE, "%s", kcr_last_error());
    cr_assert(st.code == 400 || st.code == 410, "%d", st.code);
    kcr_status_clear(&st);
}

Test(e2e_client, every_patch_type, .init = setup, .fini = teardown)
{
    kcr_object_unref(create_cm("p", "{\"a\":\"1\",\"b\":\"2\"}"));
    kcr_object *o = NULL;
    cr_assert_eq(kcr_client_patch(
                     client,
                     &(kcr_request){
                         .resource = &CM,
                         .ns = ns,
                         .name = "p",
                         .body = "[{\"op\":\"replace\",\"path\":\"/data/a\",\"value\":\"json\"}]"},
                     &o),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_str_eq(str(o, "data.a"), "json");
    kcr_object_unref(o);
    cr_assert_eq(kcr_client_patch(client,
                                  &(kcr_request){.resource = &CM,
                                                 .ns = ns,
                                                 .name = "p",
                                                 .patch_type = KCR_PATCH_MERGE,
                                                 .body = "{\"data\":{\"b\":null,\"m\":\"merge\"}}"},
                                  &o),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_str_eq(str(o, "data.m"), "merge");
    cr_assert_eq(kcr_value_get_type(kcr_object_get(o, "data.b")), KCR_VALUE_ABSENT);
    kcr_object_unref(o);
    cr_assert_eq(
        kcr_client_patch(client,
                         &(kcr_request){.resource = &CM,
                                        .ns = ns,
                                        .name = "p",
                                        .patch_type = KCR_PATCH_STRATEGIC,
                                        .body = "{\"metadata\":{\"labels\":{\"s\":\"smp\"}}}"},
                         &o),
        KCR_OK, "%s", kcr_last_error());
    cr_assert_str_eq(kcr_object_label(o, "s"), "smp");
    kcr_object_unref(o);
    cr_assert_eq(
        kcr_client_patch(
            client,
            &(kcr_request){.resource = &CM,
                           .ns = ns,
                           .name = "applied",
                           .patch_type = KCR_PATCH_APPLY,
                           .body = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":"
                                   "{\"name\":\"applied\"},\"data\":{\"x\":\"1\"}}",
                           .field_manager = "kcr-e2e"},
            &o),
        KCR_OK, "%s", kcr_last_error());
    cr_assert_str_eq(str(o, "data.x"), "1");
    cr_assert_str_eq(str(o, "metadata.managedFields[0].manager"), "kcr-e2e");
    kcr_object_unref(o);
    /* Another manager changing the field conflicts unless forced. */
    kcr_status st = {0};
    const char *take = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
                       "\"applied\"},\"data\":{\"x\":\"2\"}}";
    kcr_request other = {.resource = &CM,
                         .ns = ns,
                         .name = "applied",
                         .patch_type = KCR_PATCH_APPLY,
                         .body = take,
                         .field_manager = "someone-else",
                         .status = &st};
    cr_assert_eq(kcr_client_patch(client, &other, NULL), KCR_ERR_CONFLICT);
    cr_assert_eq(st.code, 409);
    other.force = true;
    cr_assert_eq(kcr_client_patch(client, &other, &o), KCR_OK, "%s", kcr_last_error());
    cr_assert_str_eq(str(o, "data.x"), "2");
    kcr_object_unref(o);
    kcr_status_clear(&st);
}

Test(e2e_client, forbidden_for_the_limited_user)
{
    kcr_client *c = connect_as("limited");
    kcr_status st = {0};
    cr_assert_eq(kcr_client_list(c, &(kcr_request){.resource = &CM, .ns = "default", .status = &st},
                                 count, &(int){0}, NULL),
                 KCR_ERR_FORBIDDEN);
    cr_assert_eq(st.code, 403);
    cr_assert_str_eq(st.reason, "Forbidden");
    cr_assert(strstr(st.message, "cannot list resource \"configmaps\"") != NULL, "%s", st.message);
    cr_assert(strstr(kcr_last_error(), "403 Forbidden") == kcr_last_error(), "%s",
              kcr_last_error());
    kcr_status_clear(&st);
    kcr_client_free(c);
}

#define CRD_JSON                                                                                   \
    "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"CustomResourceDefinition\","           \
    "\"metadata\":{\"name\":\"widgets.e2e.kcr.dev\"},\"spec\":{\"group\":\"e2e.kcr.dev\","         \
    "\"scope\":\"Namespaced\",\"names\":{\"plural\":\"widgets\",\"singular\":\"widget\","          \
    "\"kind\":\"Widget\",\"shortNames\":[\"wdg\"]},\"versions\":[{\"name\":\"v1\",\"served\":true,"  \
    "\"storage\":true,\"subresources\":{\"status\":{}},\"schema\":{\"openAPIV3Schema\":{"            \
    "\"type\":\"object\",\"properties\":{\"spec\":{\"type\":\"object\",\"properties\":{\"size\":"   \
    "{\"type\":\"integer\"}}},\"status\":{\"type\":\"object\",\"properties\":{\"ready\":{\"type\":" \
    "\"boolean\"}}}}}}}]}}"

static bool established(void)
{
    kcr_object *o = NULL;
    if (kcr_client_get(client, &(kcr_request){.resource = &CRDS, .name = "widgets.e2e.kcr.dev"},
                       &o) != KCR_OK)
        return false;
    bool ok = false;
    kcr_value conds = kcr_object_get(o, "status.conditions");
    for (size_t i = 0; i < kcr_value_len(conds); i++) {
        kcr_value c = kcr_value_at(conds, i);
        const char *type = kcr_value_string(kcr_value_member(c, "type"), NULL);
        const char *status = kcr_value_string(kcr_value_member(c, "status"), NULL);
        if (type && status && strcmp(type, "Established") == 0 && strcmp(status, "True") == 0)
            ok = true;
    }
    kcr_object_unref(o);
    return ok;
}

Test(e2e_client, custom_resources_of_a_crd, .init = setup, .fini = teardown, .timeout = 120)
{
    kcr_err err =
        kcr_client_create(client, &(kcr_request){.resource = &CRDS, .body = CRD_JSON}, NULL);
    cr_assert(err == KCR_OK || err == KCR_ERR_EXISTS, "%s", kcr_last_error());
    for (int i = 0; i < 300 && !established(); i++)
        nap_ms(100);
    cr_assert(established(), "the CRD never became Established");
    kcr_api_resource r;
    kcr_err rerr = KCR_ERR_NOT_FOUND;
    for (int i = 0; i < 100 && rerr != KCR_OK; i++) { /* discovery catches up a bit later */
        kcr_client_invalidate_discovery(client);
        rerr = kcr_client_resolve(client, "wdg", NULL, &r);
        if (rerr != KCR_OK)
            nap_ms(100);
    }
    cr_assert_eq(rerr, KCR_OK, "%s", kcr_last_error());
    cr_assert_str_eq(r.group, "e2e.kcr.dev");
    cr_assert_str_eq(r.resource, "widgets");
    cr_assert_str_eq(r.kind, "Widget");
    cr_assert(r.namespaced);
    kcr_resource w = kcr_api_resource_gvr(&r);
    kcr_object *o = NULL;
    cr_assert_eq(
        kcr_client_create(
            client,
            &(kcr_request){.resource = &w,
                           .ns = ns,
                           .body = "{\"apiVersion\":\"e2e.kcr.dev/v1\",\"kind\":\"Widget\","
                                   "\"metadata\":{\"name\":\"w1\"},\"spec\":{\"size\":3}}"},
            &o),
        KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_object_generation(o), 1);
    char json[512];
    snprintf(json, sizeof json,
             "{\"apiVersion\":\"e2e.kcr.dev/v1\",\"kind\":\"Widget\",\"metadata\":{\"name\":\"w1\","
             "\"resourceVersion\":\"%s\"},\"spec\":{\"size\":3},\"status\":{\"ready\":true}}",
             kcr_object_resource_version(o));
    kcr_object_unref(o);
    cr_assert_eq(
        kcr_client_update(
            client, &(kcr_request){.resource = &w, .ns = ns, .subresource = "status", .body = json},
            &o),
        KCR_OK, "%s", kcr_last_error());
    cr_assert(kcr_value_bool(kcr_object_get(o, "status.ready")));
    cr_assert_eq(kcr_object_generation(o), 1, "a status update leaves generation alone");
    kcr_object_unref(o);
    cr_assert_eq(kcr_client_patch(client,
                                  &(kcr_request){.resource = &w,
                                                 .ns = ns,
                                                 .name = "w1",
                                                 .patch_type = KCR_PATCH_MERGE,
                                                 .body = "{\"spec\":{\"size\":5}}"},
                                  &o),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_object_generation(o), 2);
    cr_assert_eq(kcr_value_int(kcr_object_get(o, "spec.size")), 5);
    kcr_object_unref(o);
    kcr_status st = {0};
    cr_assert_eq(
        kcr_client_create(
            client,
            &(kcr_request){.resource = &w,
                           .ns = ns,
                           .body = "{\"apiVersion\":\"e2e.kcr.dev/v1\",\"kind\":\"Widget\","
                                   "\"metadata\":{\"name\":\"w2\"},\"spec\":{\"size\":\"big\"}}",
                           .status = &st},
            NULL),
        KCR_ERR_INVALID_OBJECT, "schema validation");
    cr_assert_str_eq(st.details.causes[0].field, "spec.size");
    int n = 0;
    cr_assert_eq(kcr_client_list(client, &(kcr_request){.resource = &w, .ns = ns}, count, &n, NULL),
                 KCR_OK);
    cr_assert_eq(n, 1);
    cr_assert_eq(
        kcr_client_delete(client, &(kcr_request){.resource = &w, .ns = ns, .name = "w1"}, NULL),
        KCR_OK);
    kcr_status_clear(&st);
}

Test(e2e_client, discovery)
{
    kcr_client *c = connect_as("admin");
    kcr_api_resource r;
    cr_assert_eq(kcr_client_resolve(c, "cm", NULL, &r), KCR_OK, "%s", kcr_last_error());
    cr_assert_str_eq(r.resource, "configmaps");
    cr_assert_str_eq(r.group, "");
    cr_assert(r.namespaced);
    cr_assert_eq(kcr_client_resolve(c, "deploy", NULL, &r), KCR_OK);
    cr_assert_str_eq(r.group, "apps");
    cr_assert_str_eq(r.version, "v1");
    cr_assert_eq(kcr_client_resolve(c, "Lease", NULL, &r), KCR_OK);
    cr_assert_str_eq(r.group, "coordination.k8s.io");
    cr_assert_eq(kcr_client_resolve(c, "nodes", NULL, &r), KCR_OK);
    cr_assert_not(r.namespaced);
    cr_assert_eq(kcr_client_resolve(c, "ingresses.networking.k8s.io", NULL, &r), KCR_OK);
    cr_assert_eq(kcr_client_resolve_kind(c, &(kcr_gvk){"apps", "v1", "Deployment"}, NULL, &r),
                 KCR_OK);
    cr_assert_str_eq(r.resource, "deployments");
    cr_assert_eq(kcr_client_resolve(c, "no-such-things", NULL, &r), KCR_ERR_NOT_FOUND);
    char *body = NULL;
    size_t len = 0;
    cr_assert_eq(kcr_client_request(
                     c, "/api/v1/namespaces",
                     &(kcr_raw_options){.method = "GET",
                                        .accept = "application/json;as=Table;v=v1;g=meta.k8s.io"},
                     &body, &len),
                 KCR_OK);
    cr_assert(strstr(body, "\"kind\":\"Table\"") != NULL);
    free(body);
    kcr_client_free(c);
}

struct watch_run {
    kcr_request opts; /* resource and namespace filled in by the thread */
    pthread_mutex_t lock;
    int added, bookmarks, initial_end, other;
    char last_name[64];
    kcr_err result;
    char error[512];
};

static kcr_err on_event(const kcr_watch_event *ev, void *ud)
{
    struct watch_run *w = ud;
    pthread_mutex_lock(&w->lock);
    if (ev->type == KCR_WATCH_ADDED) {
        w->added++;
        snprintf(w->last_name, sizeof w->last_name, "%s", kcr_object_name(ev->object));
    } else if (ev->type == KCR_WATCH_BOOKMARK) {
        w->bookmarks++;
        if (ev->initial_events_end)
            w->initial_end++;
    } else {
        w->other++;
    }
    pthread_mutex_unlock(&w->lock);
    return KCR_OK;
}

static void *run_watch(void *arg)
{
    struct watch_run *w = arg;
    kcr_request r = w->opts;
    r.resource = &CM;
    r.ns = ns;
    w->result = kcr_client_watch(client, &r, on_event, w);
    snprintf(w->error, sizeof w->error, "%s", kcr_last_error());
    return NULL;
}

static int added(struct watch_run *w)
{
    pthread_mutex_lock(&w->lock);
    int n = w->added;
    pthread_mutex_unlock(&w->lock);
    return n;
}

Test(e2e_client, watch_events_initial_events_and_cancel, .init = setup, .fini = teardown,
     .timeout = 60)
{
    kcr_object_unref(create_cm("before", NULL));
    kcr_cancel *cancel;
    cr_assert_eq(kcr_cancel_new(&cancel), KCR_OK);
    struct watch_run w = {.opts = {.send_initial_events = true,
                                   .allow_bookmarks = true,
                                   .resource_version_match = "NotOlderThan",
                                   .label_selector = "!skip",
                                   .cancel = cancel},
                          .lock = PTHREAD_MUTEX_INITIALIZER};
    pthread_t t;
    pthread_create(&t, NULL, run_watch, &w);
    for (int i = 0; i < 100 && added(&w) < 1; i++)
        nap_ms(50);
    kcr_object_unref(create_cm("after", NULL));
    for (int i = 0; i < 100; i++) {
        pthread_mutex_lock(&w.lock);
        bool seen = strcmp(w.last_name, "after") == 0;
        pthread_mutex_unlock(&w.lock);
        if (seen)
            break;
        nap_ms(50);
    }
    int64_t t0 = kcr__now_ns();
    kcr_cancel_trigger(cancel);
    pthread_join(t, NULL);
    cr_assert_lt(kcr__now_ns() - t0, KCR_NS_PER_S, "canceled within a second");
    cr_assert_eq(w.result, KCR_ERR_CANCELED, "%s added=%d bm=%d end=%d other=%d", w.error, w.added, w.bookmarks, w.initial_end, w.other);
    /* "before" (and kube-root-ca.crt if a controller manager published it)
     * initially, then "after" */
    cr_assert_geq(w.added, 2);
    cr_assert_str_eq(w.last_name, "after");
    cr_assert_eq(w.initial_end, 1, "the initial-events-end bookmark arrived");
    cr_assert_eq(w.other, 0);
    kcr_cancel_free(cancel);

    /* A watch from a list's RV ends cleanly at timeoutSeconds. */
    kcr_list_meta meta = {0};
    cr_assert_eq(
        kcr_client_list(client, &(kcr_request){.resource = &CM, .ns = ns}, NULL, NULL, &meta),
        KCR_OK);
    struct watch_run w2 = {.opts = {.resource_version = meta.resource_version, .timeout_ms = 1000},
                           .lock = PTHREAD_MUTEX_INITIALIZER};
    run_watch(&w2);
    cr_assert_eq(w2.result, KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(w2.added, 0);
    kcr_list_meta_clear(&meta);
}

struct meta_seen {
    int n;
    char kind[64];
    bool has_data;
};

/* Records what a metadata-only read returned. */
static kcr_err record_meta(kcr_object *obj, void *ud)
{
    struct meta_seen *seen = ud;
    seen->n++;
    snprintf(seen->kind, sizeof seen->kind, "%s", kcr_object_kind(obj));
    seen->has_data = kcr_value_get_type(kcr_object_get(obj, "data")) != KCR_VALUE_ABSENT;
    return KCR_OK;
}

Test(e2e_client, metadata_only_list, .init = setup, .fini = teardown)
{
    kcr_object_unref(create_cm("meta", "{\"big\":\"xxxxxxxxxxxxxxxxxxxxxxxx\"}"));
    struct meta_seen listed = {0};
    kcr_err err = kcr_client_list(client,
                                  &(kcr_request){.resource = &CM,
                                                 .ns = ns,
                                                 .metadata_only = true,
                                                 .field_selector = "metadata.name=meta"},
                                  record_meta, &listed, NULL);
    cr_assert_eq(err, KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(listed.n, 1);
    cr_assert_str_eq(listed.kind, "PartialObjectMetadata");
    cr_assert_not(listed.has_data);
    kcr_object *obj = NULL;
    cr_assert_eq(
        kcr_client_get(
            client,
            &(kcr_request){.resource = &CM, .ns = ns, .name = "meta", .metadata_only = true}, &obj),
        KCR_OK, "%s", kcr_last_error());
    struct meta_seen got = {0};
    record_meta(obj, &got);
    cr_assert_str_eq(got.kind, "PartialObjectMetadata");
    cr_assert_not(got.has_data);
    kcr_object_unref(obj);
}

/* The token kubeconfig's text with `edit` applied to its cluster entry:
 * "no-ca" drops certificate-authority-data, anything else is inserted as
 * cluster fields (e.g. "tls-server-name: x"). */
static char *edited_kubeconfig(const char *edit)
{
    const char *dir = getenv("KCR_TESTENV_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/token.kubeconfig", dir && *dir ? dir : "/tmp/kcr-testenv");
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "no %s: start the test environment with testenv/start", path);
    static char out[65536];
    out[0] = '\0';
    char line[16384];
    while (fgets(line, sizeof line, f)) {
        bool ca = strstr(line, "certificate-authority-data:") != NULL;
        if (!(ca && strcmp(edit, "no-ca") == 0))
            strncat(out, line, sizeof out - strlen(out) - 1);
        if (strstr(line, "    server: ") && strcmp(edit, "no-ca") != 0) {
            strncat(out, "    ", sizeof out - strlen(out) - 1);
            strncat(out, edit, sizeof out - strlen(out) - 1);
            strncat(out, "\n", sizeof out - strlen(out) - 1);
        }
    }
    fclose(f);
    return out;
}

static kcr_client *client_for(const char *yaml, kcr_config **cfg)
{
    cr_assert_eq(kcr_config_parse_kubeconfig(yaml, strlen(yaml), NULL, NULL, cfg), KCR_OK, "%s",
                 kcr_last_error());
    kcr_client *c = NULL;
    cr_assert_eq(kcr_client_new(*cfg, NULL, &c), KCR_OK, "%s", kcr_last_error());
    return c;
}

/* TLS failures against the real apiserver come back as KCR_ERR_TLS with a
 * message a person understands, and an informer stops waiting on them. */
Test(e2e_client, tls_failures_are_explained, .timeout = 60)
{
    kcr_config *cfg;
    kcr_client *c = client_for(edited_kubeconfig("no-ca"), &cfg);
    cr_assert_eq(kcr_client_get(c, &(kcr_request){.resource = &NSR, .name = "default"}, NULL),
                 KCR_ERR_TLS, "%s", kcr_last_error());
    cr_assert(strstr(kcr_last_error(), "not signed by any CA this system trusts (cluster "
                                       "\"kcr-testenv\" sets no certificate-authority)") != NULL,
              "%s", kcr_last_error());
    kcr_informer *inf;
    cr_assert_eq(kcr_informer_new(c, &CM, NULL, &inf), KCR_OK);
    cr_assert_eq(kcr_informer_start(inf), KCR_OK);
    int64_t t0 = kcr__now_ns();
    cr_assert_eq(kcr_informer_wait_for_sync(inf, 30000, NULL), KCR_ERR_TLS, "%s", kcr_last_error());
    cr_assert_lt(kcr__now_ns() - t0, 10 * KCR_NS_PER_S, "wait_for_sync returns early");
    cr_assert(strstr(kcr_last_error(), "not signed by") != NULL, "%s", kcr_last_error());
    kcr_informer_free(inf);
    kcr_client_free(c);
    kcr_config_free(cfg);

    c = client_for(edited_kubeconfig("tls-server-name: api.wrong.test"), &cfg);
    cr_assert_eq(kcr_client_get(c, &(kcr_request){.resource = &NSR, .name = "default"}, NULL),
                 KCR_ERR_TLS, "%s", kcr_last_error());
    cr_assert(strstr(kcr_last_error(),
                     "not valid for the host name \"api.wrong.test\" (cluster "
                     "\"kcr-testenv\", checked against its tls-server-name") != NULL,
              "%s", kcr_last_error());
    kcr_client_free(c);
    kcr_config_free(cfg);
}
