/* The fake serves every built-in resource of testenv's Kubernetes version as
 * the captured discovery (fake/builtins.inc) lists it: each resolves with
 * its kind and scope; each with the verbs goes through create, get, list,
 * watch, update, status and delete in its scope; a verb discovery does not
 * list is 405, a subresource it does not list 404, and a resource the fake
 * does not serve is a 404 whose message says how to register it. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "fake/builtins.h"
#include "tests/unit/fake_fixture.h"

/* The same table the fake compiles in. */
static const kcr__fake_builtin rows[] = {
#define ROW KCR__FAKE_BUILTIN_ROW
#include "fake/builtins.inc"
#undef ROW
};
#define N_ROWS (sizeof rows / sizeof *rows)

static kcr_status st;

static void builtins_teardown(void)
{
    kcr_status_clear(&st);
    teardown();
}

/* Whether the comma- (or ;-) separated list has `word` (up to a ':' for subresources). */
static bool has(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",;:");
        if (len == n && strncmp(p, word, n) == 0)
            return true;
        p += len;
        if (*p == ':') /* skip a subresource's verbs */
            p += strcspn(p, ";");
        if (*p)
            p++;
    }
    return false;
}

/* The verbs of subresource `sub` in a row's "name:verbs;..." list, or NULL. */
static const char *sub_verbs(const kcr__fake_builtin *r, const char *sub, char *buf, size_t size)
{
    char key[64];
    snprintf(key, sizeof key, "%s:", sub);
    const char *p = strstr(r->subresources, key);
    if (!p || (p != r->subresources && p[-1] != ';'))
        return NULL;
    p += strlen(key);
    snprintf(buf, size, "%.*s", (int)strcspn(p, ";"), p);
    return buf;
}

Test(fake_builtins, every_resource_resolves_with_its_kind_and_scope, .init = setup,
     .fini = builtins_teardown)
{
    cr_assert_gt(N_ROWS, 40, "the captured table lists the built-ins");
    for (size_t i = 0; i < N_ROWS; i++) {
        const kcr__fake_builtin *r = &rows[i];
        char name[600];
        snprintf(name, sizeof name, "%s.%s.%s", r->resource, r->version, r->group);
        kcr_api_resource ar;
        cr_assert_eq(kcr_client_resolve(c, name, NULL, &ar), KCR_OK, "%s: %s", name,
                     kcr_last_error());
        cr_assert_str_eq(ar.kind, r->kind, "%s", name);
        cr_assert_eq(ar.namespaced, r->namespaced, "%s", name);
        if (r->preferred && *r->kind) {
            cr_assert_eq(kcr_client_resolve_kind(c, &(kcr_gvk){.group = r->group, .kind = r->kind},
                                                 NULL, &ar),
                         KCR_OK, "%s by kind: %s", name, kcr_last_error());
            cr_assert_str_eq(ar.version, r->version, "%s is its group's preferred version", name);
        }
    }
    /* the resources the issue named, by kubectl's short names and plurals */
    static const char *const wanted[] = {
        "resourcequotas", "limitranges",  "roles.rbac.authorization.k8s.io",
        "rolebindings",   "clusterroles", "clusterrolebindings",
        "networkpolicies", "ingresses",   "poddisruptionbudgets",
        "quota",          "pdb",          "netpol",
        "ing",            "cm",           "deploy"};
    for (size_t i = 0; i < sizeof wanted / sizeof *wanted; i++) {
        kcr_api_resource ar;
        cr_assert_eq(kcr_client_resolve(c, wanted[i], NULL, &ar), KCR_OK, "%s: %s", wanted[i],
                     kcr_last_error());
    }
}

static kcr_err first_event(const kcr_watch_event *ev, void *ud)
{
    kcr_watch_event *out = ud;
    out->type = ev->type;
    out->object = ev->object ? kcr_object_ref(ev->object) : NULL;
    return KCR_ERR_CANCELED; /* one is enough: end the watch */
}

static kcr_err count_item(kcr_object *obj, void *ud)
{
    (void)obj;
    ++*(size_t *)ud;
    return KCR_OK;
}

/* Create, get, list, watch, update, status update and delete of one object
 * of r, in its scope. */
static void crud(const kcr__fake_builtin *r)
{
    kcr_resource res = {r->group, r->version, r->resource};
    const char *ns = r->namespaced ? "default" : NULL;
    char what[300], body[600];
    snprintf(what, sizeof what, "%s%s%s %s", r->group, *r->group ? "/" : "", r->version,
             r->resource);
    snprintf(body, sizeof body,
             "{\"apiVersion\":\"%s%s%s\",\"kind\":\"%s\",\"metadata\":{\"name\":\"kcr-t\","
             "\"labels\":{\"t\":\"1\"}}}",
             r->group, *r->group ? "/" : "", r->version, r->kind);
    char rv[32];
    snprintf(rv, sizeof rv, "%llu", (unsigned long long)kcr_fake_resource_version(fake));
    kcr_object *o = NULL;
    cr_assert_eq(kcr_client_create(c,
                                   &(kcr_request){.resource = &res, .ns = ns, .body = body,
                                                  .status = &st},
                                   &o),
                 KCR_OK, "create %s: %s", what, kcr_last_error());
    cr_assert_str_eq(kcr_object_namespace(o), r->namespaced ? "default" : "",
                     "%s: the object's namespace follows the scope", what);
    cr_assert_str_eq(kcr_object_kind(o), r->kind, "%s", what);
    kcr_object_unref(o);
    o = NULL;
    cr_assert_eq(kcr_client_get(c,
                                &(kcr_request){.resource = &res, .ns = ns, .name = "kcr-t",
                                               .status = &st},
                                &o),
                 KCR_OK, "get %s: %s", what, kcr_last_error());
    kcr_object_unref(o);
    size_t n = 0;
    cr_assert_eq(kcr_client_list(c,
                                 &(kcr_request){.resource = &res, .ns = ns,
                                                .label_selector = "t=1", .status = &st},
                                 count_item, &n, NULL),
                 KCR_OK, "list %s: %s", what, kcr_last_error());
    cr_assert_eq(n, 1, "%s: list", what);
    if (has(r->verbs, "watch")) {
        kcr_watch_event ev = {0};
        kcr_client_watch(c,
                         &(kcr_request){.resource = &res, .ns = ns, .resource_version = rv,
                                        .status = &st},
                         first_event, &ev);
        cr_assert_eq(ev.type, KCR_WATCH_ADDED, "%s: watch from before the create", what);
        cr_assert_str_eq(kcr_object_name(ev.object), "kcr-t", "%s", what);
        kcr_object_unref(ev.object);
    }
    if (has(r->verbs, "patch")) {
        cr_assert_eq(kcr_client_patch(
                         c,
                         &(kcr_request){.resource = &res, .ns = ns, .name = "kcr-t",
                                        .patch_type = KCR_PATCH_MERGE,
                                        .body = "{\"metadata\":{\"annotations\":{\"a\":\"1\"}}}",
                                        .status = &st},
                         NULL),
                     KCR_OK, "patch %s: %s", what, kcr_last_error());
    }
    char buf[200];
    const char *sv = sub_verbs(r, "status", buf, sizeof buf);
    kcr_err err = kcr_client_patch(c,
                                   &(kcr_request){.resource = &res, .ns = ns, .name = "kcr-t",
                                                  .subresource = "status",
                                                  .patch_type = KCR_PATCH_MERGE,
                                                  .body = "{\"status\":{\"kcrTest\":1}}",
                                                  .status = &st},
                                   NULL);
    if (sv && has(sv, "patch"))
        cr_assert_eq(err, KCR_OK, "%s/status: %s", what, kcr_last_error());
    else if (!sv)
        cr_assert_eq(st.code, 404, "%s has no status subresource: %s", what, kcr_last_error());
    cr_assert_eq(kcr_client_delete(c,
                                   &(kcr_request){.resource = &res, .ns = ns, .name = "kcr-t",
                                                  .status = &st},
                                   NULL),
                 KCR_OK, "delete %s: %s", what, kcr_last_error());
}

Test(fake_builtins, every_resource_with_the_verbs_serves_crud_in_its_scope, .init = setup,
     .fini = builtins_teardown)
{
    size_t done = 0;
    for (size_t i = 0; i < N_ROWS; i++) {
        const kcr__fake_builtin *r = &rows[i];
        if (has(r->verbs, "create") && has(r->verbs, "get") && has(r->verbs, "list") &&
            has(r->verbs, "delete") && *r->kind) {
            crud(r);
            done++;
        }
    }
    cr_assert_gt(done, 40, "most built-ins are full CRUD resources (%zu)", done);
}

Test(fake_builtins, verbs_and_subresources_discovery_does_not_list, .init = setup,
     .fini = builtins_teardown)
{
    size_t refused = 0;
    for (size_t i = 0; i < N_ROWS; i++) {
        const kcr__fake_builtin *r = &rows[i];
        kcr_resource res = {r->group, r->version, r->resource};
        if (!has(r->verbs, "list")) {
            cr_assert_neq(kcr_client_list(c, &(kcr_request){.resource = &res, .status = &st},
                                          count_item, &(size_t){0}, NULL),
                          KCR_OK, "%s: list is not a verb of it", r->resource);
            cr_assert_eq(st.code, 405, "%s: %s", r->resource, kcr_last_error());
            cr_assert_str_eq(st.reason, "MethodNotAllowed");
            refused++;
        }
    }
    cr_assert_gt(refused, 0, "some built-ins (the reviews) cannot be listed");

    /* configmaps have no status subresource; deployments have a scale one the
     * fake does not implement */
    cr_assert_eq(kcr_client_create(c,
                                   &(kcr_request){.resource = &CM, .ns = "default",
                                                  .body = "{\"metadata\":{\"name\":\"a\"}}",
                                                  .status = &st},
                                   NULL),
                 KCR_OK, "%s", kcr_last_error());
    kcr_request go = {.resource = &CM, .ns = "default", .name = "a", .subresource = "status",
                      .status = &st};
    cr_assert_eq(kcr_client_get(c, &go, NULL), KCR_ERR_NOT_FOUND);
    cr_assert_str_eq(st.message, "the server could not find the requested resource");
    cr_assert(strstr(kcr_last_error(), "without a \"status\" subresource"), "%s",
              kcr_last_error());
    cr_assert_eq(kcr_client_create(c,
                                   &(kcr_request){.resource = &DEPLOY, .ns = "default",
                                                  .body = "{\"metadata\":{\"name\":\"d\"}}",
                                                  .status = &st},
                                   NULL),
                 KCR_OK);
    go.resource = &DEPLOY;
    go.name = "d";
    go.subresource = "status";
    kcr_object *d = NULL;
    cr_assert_eq(kcr_client_get(c, &go, &d), KCR_OK, "%s", kcr_last_error());
    cr_assert_str_eq(kcr_object_name(d), "d", "GET .../status answers the object");
    kcr_object_unref(d);
    go.subresource = "scale";
    cr_assert_neq(kcr_client_get(c, &go, NULL), KCR_OK);
    cr_assert_eq(st.code, 400);
    cr_assert(strstr(st.message, "does not implement the \"scale\" subresource"), "%s",
              st.message);
}

Test(fake_builtins, an_unserved_resource_says_how_to_register_it, .init = setup,
     .fini = builtins_teardown)
{
    static const kcr_resource WIDGETS = {"example.com", "v1", "widgets"};
    cr_assert_eq(kcr_client_get(c,
                                &(kcr_request){.resource = &WIDGETS, .ns = "default", .name = "w",
                                               .status = &st},
                                NULL),
                 KCR_ERR_NOT_FOUND);
    cr_assert_str_eq(st.message, "the server could not find the requested resource",
                     "the Status is the apiserver's");
    cr_assert(strstr(kcr_last_error(), "example.com/v1 widgets"), "%s", kcr_last_error());
    cr_assert(strstr(kcr_last_error(), "kcr_fake_register()"), "%s", kcr_last_error());
}
