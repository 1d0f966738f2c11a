/* A controller's sources in the test kit: kind and scope from discovery, a
 * declaration discovery contradicts refused at add time, a resource the
 * fake does not serve named with the controller, the source and how to
 * register it, every routed key checked against the primary's scope, map
 * functions and predicates reading caches through their kcr_source_ctx, and
 * a reconcile's own write to its primary triggering it again. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcr/kcr.h"
#include "tests/unit/testkit_fixture.h"

static const kcr_resource CM = {"", "v1", "configmaps"};
#include "tests/unit/users_map.h"

static const kcr_resource NS = {"", "v1", "namespaces"};
static const kcr_resource WIDGETS = {"example.com", "v1", "widgets"};

static int calls;

static void setup(void)
{
    calls = 0;
    cr_assert_eq(kcr_testkit_new(NULL, &tk), KCR_OK);
}

static void teardown(void)
{
    kcr_testkit_free(tk);
}

static kcr_result done(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    (void)ctx, (void)req, (void)ud;
    calls++;
    return KCR_DONE;
}

Test(testkit_sources, a_scope_discovery_contradicts_is_refused_naming_the_source, .init = setup,
     .fini = teardown)
{
    kcr_controller_options o = {.name = "teams",
                                .primary = {.resource = NS, .scope = KCR_SCOPE_NAMESPACED},
                                .reconcile = done};
    cr_assert_eq(kcr_testkit_add_controller(tk, &o, NULL), KCR_ERR_INVALID);
    const char *e = kcr_last_error();
    cr_assert(strstr(e, "controller \"teams\"") && strstr(e, "primary v1 namespaces") &&
                  strstr(e, "declared namespaced, but discovery says cluster-scoped"),
              "%s", e);

    kcr_source owns = {.resource = CM, .scope = KCR_SCOPE_CLUSTER};
    o = (kcr_controller_options){.name = "teams",
                                 .primary = {.resource = NS},
                                 .owns = &owns,
                                 .n_owns = 1,
                                 .reconcile = done};
    cr_assert_eq(kcr_testkit_add_controller(tk, &o, NULL), KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "owns[0] v1 configmaps: declared cluster-scoped"), "%s",
              kcr_last_error());

    o = (kcr_controller_options){
        .name = "teams", .primary = {.resource = CM, .kind = "Secret"}, .reconcile = done};
    cr_assert_eq(kcr_testkit_add_controller(tk, &o, NULL), KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "declared kind \"Secret\", but discovery says "
                                       "\"ConfigMap\""),
              "%s", kcr_last_error());

    o = (kcr_controller_options){
        .name = "teams", .primary = {.resource = CM, .scope = (kcr_scope)7}, .reconcile = done};
    cr_assert_eq(kcr_testkit_add_controller(tk, &o, NULL), KCR_ERR_INVALID, "not a kcr_scope");
}

/* The footgun of issue 20: a primary declared with its kind but not its
 * scope routed owned objects of a cluster-scoped primary to "ns/name" keys
 * that name nothing. Discovery now gives the scope. */
Test(testkit_sources, a_kind_without_a_scope_takes_discoverys_scope, .init = setup,
     .fini = teardown)
{
    seed("apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a}\n");
    kcr_object *team = kcr_testkit_get(tk, &NS, NULL, "team-a");
    char quota[600];
    snprintf(quota, sizeof quota,
             "apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: team-quota\n"
             "  namespace: team-a\n  ownerReferences: [{apiVersion: v1, kind: Namespace, "
             "name: team-a, uid: %s, controller: true}]\nspec: {hard: {pods: \"10\"}}\n",
             kcr_object_uid(team));
    kcr_object_unref(team);
    kcr_source owns = {.resource = {"", "v1", "resourcequotas"}};
    kcr_controller *c = NULL;
    kcr_controller_options o = {.name = "teams",
                                .primary = {.resource = NS, .kind = "Namespace"},
                                .owns = &owns,
                                .n_owns = 1,
                                .reconcile = done};
    cr_assert_eq(kcr_testkit_add_controller(tk, &o, &c), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    seed(quota);
    cr_assert_eq(kcr_testkit_sync(tk), KCR_OK, "%s", kcr_last_error());
    uint32_t reasons = 0;
    cr_assert(kcr_testkit_queued(tk, c, "team-a", NULL, &reasons),
              "the owner's key is the cluster-scoped name");
    cr_assert(reasons & KCR_REASON_BIT(KCR_REASON_OWNED));
    kcr_controller_stats st;
    kcr_controller_get_stats(c, &st);
    cr_assert_eq(st.invalid_keys, 0);
}

Test(testkit_sources, a_resource_the_fake_lacks_is_named_with_how_to_register_it, .init = setup,
     .fini = teardown)
{
    kcr_controller_options o = {
        .name = "widgets", .primary = {.resource = WIDGETS}, .reconcile = done};
    cr_assert_eq(kcr_testkit_add_controller(tk, &o, NULL), KCR_ERR_NOT_FOUND);
    const char *e = kcr_last_error();
    cr_assert(strstr(e, "controller \"widgets\"") && strstr(e, "primary example.com/v1 widgets") &&
                  strstr(e, "kcr_fake_register") && strstr(e, "kcr_testkit_seed"),
              "%s", e);

    kcr_source w = {.resource = WIDGETS, .map = NULL};
    o = (kcr_controller_options){
        .name = "cms", .primary = {.resource = CM}, .owns = &w, .n_owns = 1, .reconcile = done};
    cr_assert_eq(kcr_testkit_add_controller(tk, &o, NULL), KCR_ERR_NOT_FOUND);
    cr_assert(strstr(kcr_last_error(), "controller \"cms\": owns[0] example.com/v1 widgets"), "%s",
              kcr_last_error());

    /* registered, the same declaration works */
    kcr_api_resource r = {.group = "example.com", .version = "v1", .resource = "widgets",
                          .singular = "widget", .kind = "Widget", .namespaced = true};
    cr_assert_eq(kcr_fake_register(kcr_testkit_fake(tk), &r, NULL), KCR_OK);
    o = (kcr_controller_options){
        .name = "widgets", .primary = {.resource = WIDGETS}, .reconcile = done};
    cr_assert_eq(kcr_testkit_add_controller(tk, &o, NULL), KCR_OK, "%s", kcr_last_error());
}

/* A source that declares kind and scope may start before its resource is
 * served (a CRD installed later); until then the kit's sync names it. A
 * key that does not fit the primary's declared scope is refused, logged
 * once and counted. */
Test(testkit_sources, declared_sources_start_unserved_and_keys_are_checked, .init = setup,
     .fini = teardown)
{
    kcr_controller *c = NULL;
    kcr_controller_options o = {
        .name = "widgets",
        .primary = {.resource = WIDGETS, .kind = "Widget", .scope = KCR_SCOPE_NAMESPACED},
        .reconcile = done};
    cr_assert_neq(kcr_testkit_add_controller(tk, &o, &c), KCR_OK,
                  "trusted at add time, but the first sync finds nothing served");
    const char *e = kcr_last_error();
    cr_assert(strstr(e, "controller \"widgets\" primary example.com/v1 widgets") &&
                  strstr(e, "404 NotFound") && strstr(e, "kcr_fake_register()"),
              "%s", e);

    /* the server turns out to serve it cluster-scoped: every key is refused */
    kcr_api_resource r = {.group = "example.com", .version = "v1", .resource = "widgets",
                          .singular = "widget", .kind = "Widget", .namespaced = false};
    cr_assert_eq(kcr_fake_register(kcr_testkit_fake(tk), &r, NULL), KCR_OK);
    cr_assert_eq(kcr_fake_add(kcr_testkit_fake(tk), &WIDGETS, "{\"metadata\":{\"name\":\"w1\"}}",
                              NULL),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_fake_add(kcr_testkit_fake(tk), &WIDGETS, "{\"metadata\":{\"name\":\"w2\"}}",
                              NULL),
                 KCR_OK);
    cr_assert_eq(kcr_testkit_sync(tk), KCR_OK, "%s", kcr_last_error());
    size_t n = 0;
    kcr_testkit_history(tk, &n);
    cr_assert_eq(kcr_testkit_queue_len(tk, c), 0, "no key without a namespace is queued");
    kcr_controller_stats st;
    kcr_controller_get_stats(c, &st);
    cr_assert_eq(st.invalid_keys, 2);
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    cr_assert_eq(calls, 0);
}

Test(testkit_sources, map_functions_and_predicates_read_caches_through_their_context,
     .init = setup, .fini = teardown)
{
    seed("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app1, labels: {secret: db}}\n---\n"
         "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app2, labels: {secret: db}}\n---\n"
         "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app3, labels: {secret: other}}\n");
    kcr_source w;
    kcr_controller_options o = users_options(&w, done);
    kcr_controller *c = NULL;
    cr_assert_eq(kcr_testkit_add_controller(tk, &o, &c), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    cr_assert_eq(atomic_load(&users_map_calls), 0, "no Secret yet");
    seed("apiVersion: v1\nkind: Secret\nmetadata: {name: db}\n---\n"
         "apiVersion: v1\nkind: Secret\nmetadata: {name: unused}\n");
    cr_assert_eq(kcr_testkit_sync(tk), KCR_OK);
    cr_assert_eq(kcr_testkit_queue_len(tk, c), 2);
    cr_assert(kcr_testkit_queued(tk, c, "default/app1", NULL, NULL));
    cr_assert(kcr_testkit_queued(tk, c, "default/app2", NULL, NULL));
    kcr_controller_stats st;
    kcr_controller_get_stats(c, &st);
    cr_assert_eq(st.filtered, 1, "the unused Secret is filtered by the predicate");
    cr_assert_eq(atomic_load(&users_map_calls), 1, "the map ran for the used Secret only");
    cr_assert_eq(users_map_now_ms, kcr_testkit_now_ms(tk), "the kit's virtual clock");
}

/* A reconcile that writes its own primary is triggered again by that write
 * (PRIMARY_UPDATED), as under the manager: it must converge. */
static kcr_result stamp_once(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    (void)ud;
    calls++;
    kcr_object *p = kcr_ctx_get_primary(ctx);
    bool stamped = p && kcr_object_annotation(p, "stamped");
    kcr_object_unref(p);
    if (!p || stamped)
        return KCR_DONE;
    kcr_err err = kcr_client_patch(
        kcr_ctx_client(ctx),
        &(kcr_request){.resource = &CM,
                       .ns = req->ns,
                       .name = req->name,
                       .patch_type = KCR_PATCH_MERGE,
                       .body = "{\"metadata\":{\"annotations\":{\"stamped\":\"yes\"}}}"},
        NULL);
    return err == KCR_OK ? KCR_DONE : KCR_RETRY(err);
}

Test(testkit_sources, a_reconciles_own_write_to_its_primary_triggers_it_again, .init = setup,
     .fini = teardown)
{
    seed("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n");
    kcr_controller_options o = {
        .name = "stamp", .primary = {.resource = CM}, .reconcile = stamp_once};
    cr_assert_eq(kcr_testkit_add_controller(tk, &o, NULL), KCR_OK, "%s", kcr_last_error());
    size_t n = 0;
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, &n), KCR_OK);
    cr_assert_eq(n, 2, "the write, then the reconcile it triggered");
    cr_assert_eq(calls, 2);
    const kcr_testkit_record *h = kcr_testkit_history(tk, NULL);
    cr_assert_eq(h[0].reason, KCR_REASON_INITIAL_LIST);
    cr_assert_eq(last()->reason, KCR_REASON_PRIMARY_UPDATED);
}
