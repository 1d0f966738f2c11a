/* The write helpers compare as the apiserver stores: a quantity the server
 * normalised ("0.5" stored as "500m") is not written again, a write the
 * server did not apply (same resourceVersion) is UNCHANGED, a cache spares
 * the read; and, in the test kit, a reconcile that keeps asking for "0.5"
 * writes the ResourceQuota once. The fake stores text as given, so the
 * server's normalised form is seeded the way the apiserver would store it. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "ctrlutil/ctrlutil_internal.h"
#include "kcr/kcr.h"
#include "kcr/testkit.h"

static const kcr_resource CM = {"", "v1", "configmaps"};
static const kcr_resource RQ = {"", "v1", "resourcequotas"};
static const kcr_resource WIDGETS = {"kcr.dev", "v1", "widgets"};

static kcr_fake *fake;
static kcr_client *c;

static void register_resources(kcr_fake *f)
{
    /* the fake does not serve ResourceQuota yet: register it as discovery would */
    kcr_api_resource rq = {.group = "",
                           .version = "v1",
                           .resource = "resourcequotas",
                           .kind = "ResourceQuota",
                           .namespaced = true};
    kcr_api_resource widgets = {.group = "kcr.dev",
                                .version = "v1",
                                .resource = "widgets",
                                .kind = "Widget",
                                .namespaced = true};
    cr_assert_eq(kcr_fake_register(f, &rq, "quota"), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_fake_register(f, &widgets, NULL), KCR_OK, "%s", kcr_last_error());
}

static void setup(void)
{
    cr_assert_eq(kcr_fake_new(NULL, &fake), KCR_OK);
    register_resources(fake);
    cr_assert_eq(kcr_fake_client(fake, "ns", &c), KCR_OK);
}

static void teardown(void)
{
    kcr_client_free(c);
    kcr_fake_free(fake);
}

/* As the apiserver stores a quota asked for with cpu "0.5", memory "1.5Gi",
 * requests.storage "1024Mi" and pods 10 (a JSON number). */
static const char STORED_QUOTA[] =
    "{\"apiVersion\":\"v1\",\"kind\":\"ResourceQuota\",\"metadata\":{\"name\":\"q\","
    "\"namespace\":\"ns\"},\"spec\":{\"hard\":{\"cpu\":\"500m\",\"memory\":\"1536Mi\","
    "\"requests.storage\":\"1Gi\",\"pods\":\"10\"}}}";

struct hard {
    const char *cpu, *memory, *storage;
    int pods;
};

static kcr_err set_hard(kcr_object_edit *e, const kcr_object *cur, void *ud)
{
    (void)cur;
    const struct hard *h = ud;
    kcr_err err = kcr_object_edit_set_string(e, "spec.hard.cpu", h->cpu);
    if (err == KCR_OK)
        err = kcr_object_edit_set_string(e, "spec.hard.memory", h->memory);
    if (err == KCR_OK)
        err = kcr_object_edit_set_string(e, "spec.hard[\"requests.storage\"]", h->storage);
    if (err == KCR_OK)
        err = kcr_object_edit_set_int(e, "spec.hard.pods", h->pods);
    return err;
}

Test(ctrlutil_compare, normalised_quantities_compare_by_value, .init = setup, .fini = teardown)
{
    cr_assert_eq(kcr_fake_add(fake, &RQ, STORED_QUOTA, NULL), KCR_OK, "%s", kcr_last_error());
    struct hard h = {"0.5", "1.5Gi", "1024Mi", 10};
    kcr_ctrlutil_op_result r = KCR_CTRLUTIL_CREATED;
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(kcr_ctrlutil_create_or_update(c,
                                                   &(kcr_ctrlutil_write_options){.resource = &RQ,
                                                                                 .ns = "ns",
                                                                                 .name = "q",
                                                                                 .mutate = set_hard,
                                                                                 .user_data = &h,
                                                                                 .result = &r},
                                                   NULL),
                     KCR_OK, "%s", kcr_last_error());
        cr_expect_eq(r, KCR_CTRLUTIL_UNCHANGED, "reconcile %d: %s", i,
                     kcr_ctrlutil_op_result_string(r));
    }
    cr_expect_eq(kcr_fake_count(fake, KCR_FAKE_UPDATE, &RQ), 0, "nothing was written");

    /* a real change is written */
    h.cpu = "0.6";
    cr_assert_eq(kcr_ctrlutil_create_or_update(c,
                                               &(kcr_ctrlutil_write_options){.resource = &RQ,
                                                                             .ns = "ns",
                                                                             .name = "q",
                                                                             .mutate = set_hard,
                                                                             .user_data = &h,
                                                                             .result = &r},
                                               NULL),
                 KCR_OK);
    cr_expect_eq(r, KCR_CTRLUTIL_UPDATED);
    cr_expect_eq(kcr_fake_count(fake, KCR_FAKE_UPDATE, &RQ), 1);
    h.cpu = "500m";
    h.pods = 11;
    cr_assert_eq(kcr_ctrlutil_create_or_update(c,
                                               &(kcr_ctrlutil_write_options){.resource = &RQ,
                                                                             .ns = "ns",
                                                                             .name = "q",
                                                                             .mutate = set_hard,
                                                                             .user_data = &h,
                                                                             .result = &r},
                                               NULL),
                 KCR_OK);
    cr_expect_eq(r, KCR_CTRLUTIL_UPDATED, "pods 10 -> 11 is a change");
}

static kcr_err set_data(kcr_object_edit *e, const kcr_object *cur, void *ud)
{
    (void)cur;
    return kcr_object_edit_set_string(e, "data.cpu", ud);
}

Test(ctrlutil_compare, strings_elsewhere_compare_as_text, .init = setup, .fini = teardown)
{
    /* a ConfigMap's data is text: "0.5" and "500m" differ there */
    cr_assert_eq(kcr_fake_add(fake, &CM,
                              "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
                              "\"m\",\"namespace\":\"ns\"},\"data\":{\"cpu\":\"500m\"}}",
                              NULL),
                 KCR_OK);
    kcr_ctrlutil_op_result r;
    cr_assert_eq(kcr_ctrlutil_create_or_update(c,
                                               &(kcr_ctrlutil_write_options){.resource = &CM,
                                                                             .ns = "ns",
                                                                             .name = "m",
                                                                             .mutate = set_data,
                                                                             .user_data = "0.5",
                                                                             .result = &r},
                                               NULL),
                 KCR_OK);
    cr_expect_eq(r, KCR_CTRLUTIL_UPDATED);
}

#define RL KCR__QPATH_RESOURCE_LIST
#define QU KCR__QPATH_QUANTITY
#define NO KCR__QPATH_NONE

Test(ctrlutil_compare, quantity_paths)
{
    static const struct {
        const char *keys[12];
        size_t n;
        kcr__quantity_path kind;
    } cases[] = {
        {{"spec", "hard", "cpu"}, 3, RL},
        {{"status", "used", "requests.memory"}, 3, RL},
        {{"spec", "containers", "[]", "resources", "limits", "cpu"}, 6, RL},
        {{"spec", "jobTemplate", "spec", "template", "spec", "containers", "[]", "resources",
          "requests", "memory"},
         10,
         RL},
        {{"spec", "resources", "requests", "storage"}, 4, RL},
        {{"status", "allocatable", "pods"}, 3, RL},
        {{"spec", "limits", "[]", "defaultRequest", "cpu"}, 5, RL},
        {{"spec", "overhead", "cpu"}, 3, RL},
        {{"spec", "volumes", "[]", "emptyDir", "sizeLimit"}, 5, QU},
        {{"capacity"}, 1, QU},
        {{"data", "cpu"}, 2, NO},
        {{"spec", "hard"}, 2, NO},
        {{"spec", "x", "hard", "cpu"}, 4, NO},
        {{"spec", "limits", "cpu"}, 3, NO},
        {{"metadata", "labels", "limits"}, 3, NO},
        {{"spec", "sizeLimit"}, 2, NO},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_expect_eq(kcr__ctrlutil_quantity_path(cases[i].keys, cases[i].n), cases[i].kind,
                     "case %zu", i);
}

Test(ctrlutil_compare, resource_lists_round_up_to_milli, .init = setup, .fini = teardown)
{
    /* the apiserver stored "0.0001" of a ResourceList as "1m" */
    cr_assert_eq(kcr_fake_add(fake, &RQ,
                              "{\"apiVersion\":\"v1\",\"kind\":\"ResourceQuota\",\"metadata\":"
                              "{\"name\":\"q\",\"namespace\":\"ns\"},\"spec\":{\"hard\":{"
                              "\"cpu\":\"1m\",\"memory\":\"1536Mi\",\"requests.storage\":"
                              "\"1Gi\",\"pods\":\"10\"}}}",
                              NULL),
                 KCR_OK);
    struct hard h = {"0.0001", "1.5Gi", "1Gi", 10};
    kcr_ctrlutil_op_result r;
    cr_assert_eq(kcr_ctrlutil_create_or_update(c,
                                               &(kcr_ctrlutil_write_options){.resource = &RQ,
                                                                             .ns = "ns",
                                                                             .name = "q",
                                                                             .mutate = set_hard,
                                                                             .user_data = &h,
                                                                             .result = &r},
                                               NULL),
                 KCR_OK);
    cr_expect_eq(r, KCR_CTRLUTIL_UNCHANGED);
    h.cpu = "0.0011";
    cr_assert_eq(kcr_ctrlutil_create_or_update(c,
                                               &(kcr_ctrlutil_write_options){.resource = &RQ,
                                                                             .ns = "ns",
                                                                             .name = "q",
                                                                             .mutate = set_hard,
                                                                             .user_data = &h,
                                                                             .result = &r},
                                               NULL),
                 KCR_OK);
    cr_expect_eq(r, KCR_CTRLUTIL_UPDATED, "2m differs from 1m");
}

static kcr_err set_phase(kcr_object_edit *e, const kcr_object *cur, void *ud)
{
    (void)cur;
    kcr_err err = kcr_object_edit_set_string(e, "spec.size", "1");
    if (err == KCR_OK)
        err = kcr_object_edit_set_string(e, "status.phase", ud);
    return err;
}

Test(ctrlutil_compare, an_unapplied_write_is_unchanged, .init = setup, .fini = teardown)
{
    /* a main-resource update cannot change the status: the server stores
     * what it had and keeps the resourceVersion */
    kcr_object *w = NULL;
    cr_assert_eq(kcr_fake_add(fake, &WIDGETS,
                              "{\"apiVersion\":\"kcr.dev/v1\",\"kind\":\"Widget\",\"metadata\":{"
                              "\"name\":\"w\",\"namespace\":\"ns\"},\"spec\":{\"size\":\"1\"},"
                              "\"status\":{\"phase\":\"Old\"}}",
                              &w),
                 KCR_OK);
    kcr_ctrlutil_op_result r = KCR_CTRLUTIL_CREATED;
    kcr_object *out = NULL;
    cr_assert_eq(kcr_ctrlutil_create_or_update(c,
                                               &(kcr_ctrlutil_write_options){.resource = &WIDGETS,
                                                                             .ns = "ns",
                                                                             .name = "w",
                                                                             .mutate = set_phase,
                                                                             .user_data = "New",
                                                                             .result = &r},
                                               &out),
                 KCR_OK, "%s", kcr_last_error());
    cr_expect_eq(kcr_fake_count(fake, KCR_FAKE_UPDATE, &WIDGETS), 1, "the update was sent");
    cr_expect_eq(r, KCR_CTRLUTIL_UNCHANGED, "but not applied: %s",
                 kcr_ctrlutil_op_result_string(r));
    cr_expect_str_eq(kcr_object_resource_version(out), kcr_object_resource_version(w));
    cr_expect_str_eq(kcr_value_string(kcr_object_get(out, "status.phase"), NULL), "Old");
    kcr_object_unref(out);
    kcr_object_unref(w);

    /* the status subresource does apply it */
    kcr_ctrlutil_write_options o = {.resource = &WIDGETS,
                                    .ns = "ns",
                                    .name = "w",
                                    .mutate = set_phase,
                                    .user_data = "New",
                                    .result = &r};
    cr_assert_eq(kcr_ctrlutil_update_status(c, &o, NULL), KCR_OK);
    cr_expect_eq(r, KCR_CTRLUTIL_UPDATED);
}

Test(ctrlutil_compare, a_cache_spares_the_read, .init = setup, .fini = teardown)
{
    kcr_object *stored = NULL;
    cr_assert_eq(kcr_fake_add(fake, &RQ, STORED_QUOTA, &stored), KCR_OK);
    kcr_store *cache = NULL;
    cr_assert_eq(kcr_store_new(&cache), KCR_OK);
    cr_assert_eq(kcr_store_add(cache, stored), KCR_OK);
    struct hard h = {"0.5", "1.5Gi", "1024Mi", 10};
    kcr_ctrlutil_op_result r = KCR_CTRLUTIL_CREATED;
    kcr_ctrlutil_write_options o = {.resource = &RQ,
                                    .ns = "ns",
                                    .name = "q",
                                    .mutate = set_hard,
                                    .user_data = &h,
                                    .cache = cache,
                                    .result = &r};
    cr_assert_eq(kcr_ctrlutil_create_or_update(c, &o, NULL), KCR_OK, "%s", kcr_last_error());
    cr_expect_eq(r, KCR_CTRLUTIL_UNCHANGED);
    cr_expect_eq(kcr_fake_count(fake, KCR_FAKE_GET, &RQ), 0, "read from the cache");

    /* a stale cache: the update conflicts, the retry reads the server */
    h.cpu = "2";
    cr_assert_eq(kcr_ctrlutil_create_or_update(c, &o, NULL), KCR_OK);
    cr_expect_eq(r, KCR_CTRLUTIL_UPDATED);
    h.cpu = "3";
    cr_assert_eq(kcr_ctrlutil_create_or_update(c, &o, NULL), KCR_OK, "%s", kcr_last_error());
    cr_expect_eq(r, KCR_CTRLUTIL_UPDATED);
    cr_expect_eq(kcr_fake_count(fake, KCR_FAKE_UPDATE, &RQ), 3, "one conflict, two writes");
    cr_expect_eq(kcr_fake_count(fake, KCR_FAKE_GET, &RQ), 1, "one read after the conflict");
    kcr_object *now = NULL;
    cr_assert_eq(
        kcr_client_get(c, &(kcr_request){.resource = &RQ, .ns = "ns", .name = "q"}, &now), KCR_OK);
    cr_expect_str_eq(kcr_value_string(kcr_object_get(now, "spec.hard.cpu"), NULL), "3");
    kcr_object_unref(now);

    /* not in the cache: read the server, then create */
    h.cpu = "1";
    o.name = "q2";
    cr_assert_eq(kcr_ctrlutil_create_or_update(c, &o, NULL), KCR_OK);
    cr_expect_eq(r, KCR_CTRLUTIL_CREATED);
    cr_expect_eq(kcr_fake_count(fake, KCR_FAKE_GET, &RQ), 3, "the test's own get, then the miss");

    cr_expect_eq(kcr_ctrlutil_create_or_update(c, NULL, NULL), KCR_ERR_INVALID);
    o = (kcr_ctrlutil_write_options){.resource = &RQ, .ns = "ns", .name = "q"};
    cr_expect_eq(kcr_ctrlutil_create_or_update(c, &o, NULL), KCR_ERR_INVALID, "no mutate");
    cr_expect(strstr(kcr_last_error(), "mutate"), "%s", kcr_last_error());
    kcr_store_free(cache);
    kcr_object_unref(stored);
}

/* ---- the same through the test kit: a team ConfigMap owns its quota ---- */

static int quota_writes;

static kcr_result reconcile_team(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    (void)ud;
    kcr_object *team = kcr_ctx_get_primary(ctx);
    if (!team)
        return KCR_DONE;
    char ns[256];
    snprintf(ns, sizeof ns, "%s", kcr_object_namespace(team));
    kcr_object_unref(team);
    struct hard h = {"0.5", "1.5Gi", "1024Mi", 10};
    kcr_ctrlutil_op_result r;
    kcr_ctrlutil_write_options o = {.resource = &RQ,
                                    .ns = ns,
                                    .name = req->name,
                                    .mutate = set_hard,
                                    .user_data = &h,
                                    .cache = kcr_ctx_cache(ctx, &RQ),
                                    .result = &r};
    KCR_TRY(kcr_ctrlutil_create_or_update(kcr_ctx_client(ctx), &o, NULL));
    if (r != KCR_CTRLUTIL_UNCHANGED)
        quota_writes++;
    return KCR_DONE;
}

Test(ctrlutil_compare, testkit_a_normalised_value_writes_once)
{
    kcr_testkit *tk = NULL;
    cr_assert_eq(kcr_testkit_new(NULL, &tk), KCR_OK);
    register_resources(kcr_testkit_fake(tk));
    kcr_source owns = {.resource = RQ};
    kcr_controller_options co = {.name = "teams",
                                 .primary = {.resource = CM},
                                 .owns = &owns,
                                 .n_owns = 1,
                                 .reconcile = reconcile_team};
    kcr_controller *ctl = NULL;
    cr_assert_eq(kcr_testkit_add_controller(tk, &co, &ctl), KCR_OK, "%s", kcr_last_error());
    /* the quota as the apiserver stored it after a first write of "0.5" */
    cr_assert_eq(kcr_testkit_seed(tk, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: q\n"
                                      "  namespace: ns\n---\n"),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_fake_add(kcr_testkit_fake(tk), &RQ, STORED_QUOTA, NULL), KCR_OK);
    quota_writes = 0;
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    for (int i = 0; i < 3; i++) {
        kcr_result res;
        cr_assert_eq(kcr_testkit_reconcile(tk, ctl, "ns/q", &res), KCR_OK, "%s",
                     kcr_last_error());
        cr_expect_eq(res.kind, KCR_RESULT_DONE);
    }
    cr_expect_eq(quota_writes, 0, "the server's 500m is what was asked for");
    cr_expect_eq(kcr_fake_count(kcr_testkit_fake(tk), KCR_FAKE_UPDATE, &RQ), 0);
    cr_expect_eq(kcr_fake_count(kcr_testkit_fake(tk), KCR_FAKE_GET, &RQ), 0,
                 "every read came from the cache");
    kcr_object *q = kcr_testkit_get(tk, &RQ, "ns", "q");
    cr_assert_not_null(q);
    cr_expect_str_eq(kcr_value_string(kcr_object_get(q, "spec.hard.cpu"), NULL), "500m");
    kcr_object_unref(q);
    kcr_testkit_free(tk);
}
