/* End-to-end against testenv's real kube-apiserver:
 *   - kcr_quantity_server_text (with kcr_quantity_round_up to milli-units,
 *     as the apiserver's defaulting of a ResourceList) predicts the text the
 *     apiserver stores for a ResourceQuota's spec.hard.cpu, input by input
 *     (canonical forms and the inputs Go keeps verbatim);
 *   - create-or-update of a ResourceQuota asking for cpu "0.5" writes once
 *     across several reconciles (the server stores "500m"), and a write the
 *     server does not apply (a status change through the main resource) is
 *     UNCHANGED;
 *   - refused requests: an invalid object is 422 KCR_ERR_INVALID_OBJECT on
 *     create, update and patch, a malformed request 400 KCR_ERR_BAD_REQUEST,
 *     and kcr_err_is_permanent says so for both. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e/e2e_lib.h"

static const kcr_resource RQ = {"", "v1", "resourcequotas"};

static kcr_client *client;
static char ns[96];

static void setup(void)
{
    client = e2e_client("KCR_TESTENV_KUBECONFIG");
    cr_assert(client, "no testenv client (see the message above)");
    cr_assert_eq(e2e_namespace(client, "quantity", ns, sizeof ns), KCR_OK, "%s",
                 kcr_last_error());
}

static void teardown(void)
{
    kcr_client_free(client);
}

Test(quantity_e2e, server_text_matches_the_apiserver, .init = setup, .fini = teardown)
{
    static const char *inputs[] = {
        "0.5",     "1000m",  "1.5",   "100m",     "0",        "00",     "+1",   "01",
        "1.",      "1e3",    "1E3",   "1e+3",     "1e0",      "1.2e3",  "0.5e-1", "2000",
        "1.5k",    "1Gi",    "1.5Gi", "1024Mi",   "1025Ki",   "0.5Ki",  "8Ki",  ".5",
        "0.9n",    "3.001n", "1.1E-9", "100.035k", "10.035M", "1000000000000000000",
        "18446744073709551616", "999999999999999999.1", "0.000000000001Ki", "9Ei", "12E",
        "1.01E",   "5.444T", "1e14",  "1.0E",     "7.123456M", "0.0005", "1.0001",
        "0.5m",    "1500u",
    };
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
        char json[512], want[KCR_QUANTITY_TEXT_MAX];
        cr_assert_eq(kcr_quantity_server_text(inputs[i], want, sizeof want), KCR_OK, "%s: %s",
                     inputs[i], kcr_last_error());
        /* spec.hard is a ResourceList: the apiserver rounds it up to milli-units */
        kcr_quantity asked, milli;
        bool exact = true;
        cr_assert_eq(kcr_quantity_parse_str(inputs[i], &asked), KCR_OK);
        cr_assert_eq(kcr_quantity_round_up(&asked, -3, &milli, &exact), KCR_OK);
        if (!exact)
            kcr_quantity_to_string(&milli, want, sizeof want);
        snprintf(json, sizeof json,
                 "{\"apiVersion\":\"v1\",\"kind\":\"ResourceQuota\",\"metadata\":{\"name\":"
                 "\"q%zu\"},\"spec\":{\"hard\":{\"cpu\":\"%s\"}}}",
                 i, inputs[i]);
        kcr_object *created = NULL, *read = NULL;
        cr_assert_eq(kcr_client_create(client,
                                       &(kcr_request){.resource = &RQ, .ns = ns, .body = json},
                                       &created),
                     KCR_OK, "%s: %s", inputs[i], kcr_last_error());
        char name[16];
        snprintf(name, sizeof name, "q%zu", i);
        cr_assert_eq(kcr_client_get(client,
                                    &(kcr_request){.resource = &RQ, .ns = ns, .name = name},
                                    &read),
                     KCR_OK);
        const char *stored = kcr_value_string(kcr_object_get(read, "spec.hard.cpu"), NULL);
        cr_expect_str_eq(stored, want, "%s: the apiserver stored %s, kcr predicted %s",
                         inputs[i], stored, want);
        cr_expect_str_eq(kcr_value_string(kcr_object_get(created, "spec.hard.cpu"), NULL), want,
                         "%s (create's answer)", inputs[i]);
        /* and the value is the one asked for, rounded up to milli-units */
        kcr_quantity back;
        cr_assert_eq(kcr_quantity_parse_str(stored, &back), KCR_OK);
        cr_expect_eq(kcr_quantity_cmp(&milli, &back), 0, "%s", inputs[i]);
        kcr_object_unref(created);
        kcr_object_unref(read);
    }
}

struct quota_want {
    const char *cpu;
    const char *memory;
    const char *phase; /* NULL: leave the status alone */
};

static kcr_err desired_quota(kcr_object_edit *e, const kcr_object *cur, void *ud)
{
    (void)cur;
    const struct quota_want *w = ud;
    kcr_err err = kcr_object_edit_set_string(e, "spec.hard.cpu", w->cpu);
    if (err == KCR_OK)
        err = kcr_object_edit_set_string(e, "spec.hard.memory", w->memory);
    if (err == KCR_OK)
        err = kcr_object_edit_set_string(e, "spec.hard[\"requests.storage\"]", "1024Mi");
    if (err == KCR_OK && w->phase)
        err = kcr_object_edit_set_string(e, "status.hard.cpu", w->phase);
    return err;
}

Test(quantity_e2e, a_normalised_quota_is_written_once, .init = setup, .fini = teardown)
{
    struct quota_want w = {"0.5", "1.5Gi", NULL};
    kcr_ctrlutil_op_result r;
    kcr_object *out = NULL;
    cr_assert_eq(
        kcr_ctrlutil_create_or_update(client,
                                      &(kcr_ctrlutil_write_options){.resource = &RQ,
                                                                    .ns = ns,
                                                                    .name = "team",
                                                                    .mutate = desired_quota,
                                                                    .user_data = &w,
                                                                    .result = &r},
                                      &out),
        KCR_OK, "%s", kcr_last_error());
    cr_expect_eq(r, KCR_CTRLUTIL_CREATED);
    cr_expect_str_eq(kcr_value_string(kcr_object_get(out, "spec.hard.cpu"), NULL), "500m");
    cr_expect_str_eq(kcr_value_string(kcr_object_get(out, "spec.hard.memory"), NULL), "1536Mi");
    cr_expect_str_eq(
        kcr_value_string(kcr_object_get(out, "spec.hard[\"requests.storage\"]"), NULL), "1Gi");
    char rv[64];
    snprintf(rv, sizeof rv, "%s", kcr_object_resource_version(out));
    kcr_object_unref(out);

    /* several reconciles later: nothing written, same resourceVersion */
    for (int i = 0; i < 4; i++) {
        out = NULL;
        cr_assert_eq(
            kcr_ctrlutil_create_or_update(client,
                                          &(kcr_ctrlutil_write_options){.resource = &RQ,
                                                                        .ns = ns,
                                                                        .name = "team",
                                                                        .mutate = desired_quota,
                                                                        .user_data = &w,
                                                                        .result = &r},
                                          &out),
            KCR_OK, "%s", kcr_last_error());
        cr_expect_eq(r, KCR_CTRLUTIL_UNCHANGED, "reconcile %d: %s", i,
                     kcr_ctrlutil_op_result_string(r));
        cr_expect_str_eq(kcr_object_resource_version(out), rv);
        kcr_object_unref(out);
    }

    /* a status change through the main resource: sent, not applied */
    struct quota_want with_status = {"0.5", "1.5Gi", "7"};
    cr_assert_eq(
        kcr_ctrlutil_create_or_update(client,
                                      &(kcr_ctrlutil_write_options){.resource = &RQ,
                                                                    .ns = ns,
                                                                    .name = "team",
                                                                    .mutate = desired_quota,
                                                                    .user_data = &with_status,
                                                                    .result = &r},
                                      &out),
        KCR_OK, "%s", kcr_last_error());
    cr_expect_eq(r, KCR_CTRLUTIL_UNCHANGED, "the apiserver ignored it: %s",
                 kcr_ctrlutil_op_result_string(r));
    cr_expect_str_eq(kcr_object_resource_version(out), rv);
    kcr_object_unref(out);

    /* a real change is written */
    w.cpu = "750m";
    cr_assert_eq(
        kcr_ctrlutil_create_or_update(client,
                                      &(kcr_ctrlutil_write_options){.resource = &RQ,
                                                                    .ns = ns,
                                                                    .name = "team",
                                                                    .mutate = desired_quota,
                                                                    .user_data = &w,
                                                                    .result = &r},
                                      &out),
        KCR_OK);
    cr_expect_eq(r, KCR_CTRLUTIL_UPDATED);
    cr_expect_str_neq(kcr_object_resource_version(out), rv);
    kcr_object_unref(out);
}

#define EXPECT_REFUSED(call, want_err, want_code)                                                \
    do {                                                                                         \
        kcr_status st_ = {0};                                                                    \
        kcr_status *st = &st_;                                                                   \
        kcr_err e_ = (call);                                                                     \
        cr_expect_eq(e_, want_err, "%s: got %s: %s", #call, kcr_strerror(e_), kcr_last_error()); \
        cr_expect_eq(st_.code, want_code, "%s", kcr_last_error());                               \
        cr_expect(kcr_err_is_permanent(e_), "%s", kcr_strerror(e_));                             \
        kcr_status_clear(&st_);                                                                  \
    } while (0)

Test(quantity_e2e, refused_requests_are_permanent, .init = setup, .fini = teardown)
{
    /* create: an invalid name, a quantity that does not parse, a field of the wrong type */
    EXPECT_REFUSED(kcr_client_create(client,
                                     &(kcr_request){.resource = &E2E_CM, .ns = ns, .status = st,
                                                    .body = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{"
                                                            "\"name\":\"Bad_Name\"}}"},
                                     NULL),
                   KCR_ERR_INVALID_OBJECT, 422);
    EXPECT_REFUSED(kcr_client_create(client,
                                     &(kcr_request){.resource = &RQ, .ns = ns, .status = st,
                                                    .body = "{\"apiVersion\":\"v1\",\"kind\":\"ResourceQuota\",\"metadata\":"
                                                            "{\"name\":\"bad\"},\"spec\":{\"hard\":{\"cpu\":\"abc\"}}}"},
                                     NULL),
                   KCR_ERR_BAD_REQUEST, 400);
    EXPECT_REFUSED(kcr_client_create(client,
                                     &(kcr_request){.resource = &E2E_CM, .ns = ns, .status = st,
                                                    .body = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{"
                                                            "\"name\":\"typed\"},\"data\":5}"},
                                     NULL),
                   KCR_ERR_BAD_REQUEST, 400);
    /* a negative quota is valid JSON but an invalid object */
    EXPECT_REFUSED(kcr_client_create(client,
                                     &(kcr_request){.resource = &RQ, .ns = ns, .status = st,
                                                    .body = "{\"apiVersion\":\"v1\",\"kind\":\"ResourceQuota\",\"metadata\":"
                                                            "{\"name\":\"neg\"},\"spec\":{\"hard\":{\"cpu\":\"-1\"}}}"},
                                     NULL),
                   KCR_ERR_INVALID_OBJECT, 422);

    /* update and patch of an existing object into an invalid one */
    cr_assert_eq(e2e_create_cm(client, ns, "ok", "v"), KCR_OK, "%s", kcr_last_error());
    EXPECT_REFUSED(kcr_client_update(client,
                                     &(kcr_request){.resource = &E2E_CM, .ns = ns, .status = st,
                                                    .body = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{"
                                                            "\"name\":\"ok\",\"labels\":{\"bad label\":\"x\"}}}"},
                                     NULL),
                   KCR_ERR_INVALID_OBJECT, 422);
    EXPECT_REFUSED(kcr_client_patch(client,
                                    &(kcr_request){.resource = &E2E_CM, .ns = ns, .name = "ok",
                                                   .patch_type = KCR_PATCH_MERGE,
                                                   .body = "{\"metadata\":{\"labels\":{\"x\":"
                                                           "\"-not valid-\"}}}",
                                                   .status = st},
                                    NULL),
                   KCR_ERR_INVALID_OBJECT, 422);
    /* malformed patches */
    EXPECT_REFUSED(
        kcr_client_patch(client,
                         &(kcr_request){.resource = &E2E_CM, .ns = ns, .name = "ok",
                                        .patch_type = KCR_PATCH_JSON, .body = "{}", .status = st},
                         NULL),
        KCR_ERR_BAD_REQUEST, 400);
    /* a patch whose result does not decode is the apiserver's 422, not a 400 */
    EXPECT_REFUSED(kcr_client_patch(client,
                                    &(kcr_request){.resource = &E2E_CM, .ns = ns, .name = "ok",
                                                   .patch_type = KCR_PATCH_MERGE,
                                                   .body = "{\"data\":{\"v\":[1]}}",
                                                   .status = st},
                                    NULL),
                   KCR_ERR_INVALID_OBJECT, 422);

    /* and the transient ones are not permanent */
    kcr_status st = {0};
    kcr_err err = kcr_client_update(
        client,
        &(kcr_request){.resource = &E2E_CM, .ns = ns, .status = &st,
                       .body = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{"
                               "\"name\":\"ok\",\"resourceVersion\":\"1\"}}"},
        NULL);
    cr_expect_eq(err, KCR_ERR_CONFLICT, "%s", kcr_last_error());
    cr_expect_not(kcr_err_is_permanent(err));
    kcr_status_clear(&st);
    err = kcr_client_get(
        client, &(kcr_request){.resource = &E2E_CM, .ns = ns, .name = "missing", .status = &st},
        NULL);
    cr_expect_eq(err, KCR_ERR_NOT_FOUND);
    cr_expect_not(kcr_err_is_permanent(err));
    kcr_status_clear(&st);
}
