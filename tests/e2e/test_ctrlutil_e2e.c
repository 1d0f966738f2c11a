/* End-to-end: controllerutil.h against the real kube-apiserver of testenv:
 * a controller reference the server accepts (and a second controller
 * refused), foreground/orphan deletes and uid preconditions, the finalizer
 * removal guard against a concurrent add (the server's 422 for a failed
 * test op), a status update retried after a real 409 on a CRD with the
 * status subresource, create-or-update, and server-side apply with field
 * managers (conflict, then force). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e/e2e_lib.h"

static const kcr_resource CRDS = {"apiextensions.k8s.io", "v1", "customresourcedefinitions"};
static const kcr_resource GADGETS = {"ctlutil.e2e.kcr.dev", "v1", "gadgets"};

static kcr_client *client, *other; /* `other` is a second writer */
static char ns[96];

static void setup(void)
{
    client = e2e_client("KCR_TESTENV_KUBECONFIG");
    other = e2e_client("KCR_TESTENV_KUBECONFIG");
    cr_assert(client && other, "no testenv client (see the message above)");
    cr_assert_eq(e2e_namespace(client, "ctlutil", ns, sizeof ns), KCR_OK, "%s", kcr_last_error());
}

static void teardown(void)
{
    kcr_client_free(other);
    kcr_client_free(client);
}

static kcr_object *create_cm(const char *name, const char *extra_meta)
{
    char json[1024];
    snprintf(json, sizeof json,
             "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"%s\"%s},"
             "\"data\":{\"k\":\"v\"}}",
             name, extra_meta);
    kcr_object *o = NULL;
    cr_assert_eq(
        kcr_client_create(client, &(kcr_request){.resource = &E2E_CM, .ns = ns, .body = json}, &o),
        KCR_OK, "%s", kcr_last_error());
    return o;
}

static kcr_err put(kcr_client *c, const kcr_object *o, kcr_object **out)
{
    char *json = NULL;
    size_t len = 0;
    cr_assert_eq(kcr_object_to_json(o, &json, &len), KCR_OK);
    kcr_err err = kcr_client_update(
        c, &(kcr_request){.resource = &E2E_CM, .ns = ns, .body = json, .body_len = len}, out);
    free(json);
    return err;
}

/* The owner as an informer's cache may hold it: from a LIST. */
static kcr_object *listed;
static kcr_err keep_owner(kcr_object *o, void *user_data)
{
    if (strcmp(kcr_object_name(o), (const char *)user_data) == 0)
        listed = kcr_object_ref(o);
    return KCR_OK;
}

Test(ctrlutil_e2e, controller_reference_on_a_real_configmap, .init = setup, .fini = teardown,
     .timeout = 120)
{
    kcr_object *owner = create_cm("owner", ""), *rival = create_cm("rival", "");
    kcr_object *dep = create_cm("dep", ""), *with = NULL, *stored = NULL;
    listed = NULL;
    cr_assert_eq(kcr_client_list(client, &(kcr_request){.resource = &E2E_CM, .ns = ns}, keep_owner,
                                 "owner", NULL),
                 KCR_OK);
    cr_assert_not_null(listed);
    /* whether or not the decoder stamps listed items, the explicit GVK works */
    kcr_ctrlutil_owner_options oo = {.api_version = "v1", .kind = "ConfigMap"};
    cr_assert_eq(kcr_ctrlutil_set_controller_reference(listed, dep, &oo, &with), KCR_OK, "%s",
                 kcr_last_error());
    cr_assert_eq(put(client, with, &stored), KCR_OK, "%s", kcr_last_error());
    kcr_owner_ref ref;
    cr_assert(kcr_object_controller_ref(stored, &ref), "the server kept the reference");
    cr_assert_str_eq(ref.api_version, "v1");
    cr_assert_str_eq(ref.kind, "ConfigMap");
    cr_assert_str_eq(ref.name, "owner");
    cr_assert_str_eq(ref.uid, kcr_object_uid(owner));
    cr_assert(ref.block_owner_deletion);
    /* the stored object, read back: same owner is no change, a rival is refused */
    kcr_object *same = NULL, *refused = NULL;
    cr_assert_eq(kcr_ctrlutil_set_controller_reference(owner, stored, NULL, &same), KCR_OK);
    cr_assert_eq(same, stored);
    kcr_object_unref(same);
    cr_assert_eq(kcr_ctrlutil_set_controller_reference(rival, stored, NULL, &refused),
                 KCR_ERR_EXISTS);
    cr_assert(strstr(kcr_last_error(), "already controlled by ConfigMap owner"), "%s",
              kcr_last_error());

    /* Foreground: the owner stays, marked, while a blocking dependent exists
     * (testenv runs no garbage collector, so it stays for good) */
    kcr_object *gone = NULL;
    kcr_ctrlutil_delete_options d = {.resource = &E2E_CM,
                                     .ns = ns,
                                     .name = "owner",
                                     .propagation = KCR_CTRLUTIL_PROPAGATION_FOREGROUND};
    cr_assert_eq(kcr_ctrlutil_delete(client, &d, &gone), KCR_OK, "%s", kcr_last_error());
    cr_assert_not_null(gone, "a pending deletion returns the object");
    cr_assert(kcr_object_is_deleting(gone));
    cr_assert(kcr_object_has_finalizer(gone, "foregroundDeletion"));
    kcr_object_unref(gone);
    /* Orphan marks with the orphan finalizer */
    cr_assert_eq(kcr_ctrlutil_delete(
                     client,
                     &(kcr_ctrlutil_delete_options){.resource = &E2E_CM,
                                                    .object = rival,
                                                    .propagation = KCR_CTRLUTIL_PROPAGATION_ORPHAN,
                                                    .ignore_not_found = true},
                     &gone),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert(gone && kcr_object_has_finalizer(gone, "orphan"));
    kcr_object_unref(gone);
    /* a uid precondition of another incarnation: the server's 409 */
    kcr_status st = {0};
    d = (kcr_ctrlutil_delete_options){.resource = &E2E_CM,
                                      .ns = ns,
                                      .name = "dep",
                                      .precondition_uid = "00000000-0000-0000-0000-000000000000",
                                      .status = &st};
    cr_assert_eq(kcr_ctrlutil_delete(client, &d, NULL), KCR_ERR_CONFLICT);
    cr_assert_eq(st.code, 409);
    cr_assert(strstr(st.message, "does not match the UID in record"), "%s", st.message);
    char want[300];
    snprintf(want, sizeof want, "delete configmaps %s/dep: ", ns);
    cr_assert(strstr(kcr_last_error(), want), "%s", kcr_last_error());
    kcr_status_clear(&st);
    cr_assert_eq(kcr_ctrlutil_delete(client,
                                     &(kcr_ctrlutil_delete_options){
                                         .resource = &E2E_CM,
                                         .object = dep,
                                         .propagation = KCR_CTRLUTIL_PROPAGATION_BACKGROUND,
                                         .ignore_not_found = true},
                                     NULL),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(
        kcr_client_get(client, &(kcr_request){.resource = &E2E_CM, .ns = ns, .name = "dep"}, NULL),
        KCR_ERR_NOT_FOUND);
    kcr_object_unref(stored);
    kcr_object_unref(with);
    kcr_object_unref(listed);
    kcr_object_unref(dep);
    kcr_object_unref(rival);
    kcr_object_unref(owner);
}

Test(ctrlutil_e2e, finalizer_removal_guard_against_a_concurrent_add, .init = setup,
     .fini = teardown, .timeout = 120)
{
    kcr_object *seen = create_cm("fin", ",\"finalizers\":[\"kcr.dev/mine\"]");
    /* after our read, another writer puts its finalizer in front of ours */
    kcr_object *o = NULL;
    cr_assert_eq(
        kcr_client_patch(
            other,
            &(kcr_request){
                .resource = &E2E_CM,
                .ns = ns,
                .name = "fin",
                .patch_type = KCR_PATCH_MERGE,
                .body = "{\"metadata\":{\"finalizers\":[\"other.dev/theirs\",\"kcr.dev/mine\"]}}"},
            NULL),
        KCR_OK, "%s", kcr_last_error());
    /* the real server's answer to the guard we would have sent blindly */
    kcr_status st = {0};
    cr_assert_eq(
        kcr_client_patch(
            client,
            &(kcr_request){
                .resource = &E2E_CM,
                .ns = ns,
                .name = "fin",
                .body =
                    "[{\"op\":\"test\",\"path\":\"/metadata/finalizers/0\",\"value\":"
                    "\"kcr.dev/mine\"},{\"op\":\"remove\",\"path\":\"/metadata/finalizers/0\"}]",
                .status = &st},
            NULL),
        KCR_ERR_INVALID_OBJECT);
    cr_assert_eq(st.code, 422);
    cr_assert_str_eq(st.reason, "Invalid");
    kcr_status_clear(&st);
    /* the helper, from the stale view: re-reads, removes only ours */
    bool changed = false;
    cr_assert_eq(
        kcr_ctrlutil_remove_finalizer(client,
                                      &(kcr_ctrlutil_finalizer_options){.resource = &E2E_CM,
                                                                        .object = seen,
                                                                        .finalizer = "kcr.dev/mine",
                                                                        .changed = &changed,
                                                                        .status = &st},
                                      &o),
        KCR_OK, "%s", kcr_last_error());
    cr_assert(changed);
    cr_assert_eq(kcr_object_finalizer_count(o), 1);
    cr_assert_str_eq(kcr_object_finalizer(o, 0), "other.dev/theirs");
    kcr_object_unref(o);
    /* adding from a stale view appends instead of overwriting */
    cr_assert_eq(
        kcr_ctrlutil_add_finalizer(client,
                                   &(kcr_ctrlutil_finalizer_options){.resource = &E2E_CM,
                                                                     .object = seen,
                                                                     .finalizer = "kcr.dev/again",
                                                                     .changed = &changed,
                                                                     .status = &st},
                                   &o),
        KCR_OK, "%s", kcr_last_error());
    cr_assert(changed);
    cr_assert_eq(kcr_object_finalizer_count(o), 2);
    cr_assert_str_eq(kcr_object_finalizer(o, 0), "other.dev/theirs");
    cr_assert_str_eq(kcr_object_finalizer(o, 1), "kcr.dev/again");
    /* while deleting, the server forbids new finalizers: a 422 the helper
     * returns without looping */
    cr_assert_eq(kcr_client_delete(
                     client, &(kcr_request){.resource = &E2E_CM, .ns = ns, .name = "fin"}, NULL),
                 KCR_OK);
    kcr_object *deleting = NULL;
    cr_assert_eq(kcr_client_get(client,
                                &(kcr_request){.resource = &E2E_CM, .ns = ns, .name = "fin"},
                                &deleting),
                 KCR_OK);
    cr_assert_eq(
        kcr_ctrlutil_add_finalizer(client,
                                   &(kcr_ctrlutil_finalizer_options){.resource = &E2E_CM,
                                                                     .object = deleting,
                                                                     .finalizer = "kcr.dev/late",
                                                                     .status = &st},
                                   NULL),
        KCR_ERR_INVALID_OBJECT);
    cr_assert_eq(st.code, 422);
    kcr_status_clear(&st);
    /* cleanup: removing both finalizers lets the deletion finish */
    cr_assert_eq(kcr_ctrlutil_remove_finalizer(
                     client,
                     &(kcr_ctrlutil_finalizer_options){
                         .resource = &E2E_CM, .object = deleting, .finalizer = "kcr.dev/again"},
                     NULL),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_ctrlutil_remove_finalizer(
                     client,
                     &(kcr_ctrlutil_finalizer_options){.resource = &E2E_CM,
                                                       .object = deleting,
                                                       .finalizer = "other.dev/theirs",
                                                       .changed = &changed},
                     NULL),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert(changed);
    cr_assert_eq(
        kcr_client_get(client, &(kcr_request){.resource = &E2E_CM, .ns = ns, .name = "fin"}, NULL),
        KCR_ERR_NOT_FOUND);
    kcr_object_unref(deleting);
    kcr_object_unref(o);
    kcr_object_unref(seen);
}

#define CRD_JSON                                                                                   \
    "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"CustomResourceDefinition\","           \
    "\"metadata\":{\"name\":\"gadgets.ctlutil.e2e.kcr.dev\"},\"spec\":{\"group\":"                 \
    "\"ctlutil.e2e.kcr.dev\",\"scope\":\"Namespaced\",\"names\":{\"plural\":\"gadgets\","          \
    "\"singular\":\"gadget\",\"kind\":\"Gadget\"},\"versions\":[{\"name\":\"v1\",\"served\":true," \
    "\"storage\":true,\"subresources\":{\"status\":{}},\"schema\":{\"openAPIV3Schema\":{"          \
    "\"type\":\"object\",\"properties\":{\"spec\":{\"type\":\"object\",\"properties\":{\"size\":"  \
    "{\"type\":\"integer\"}}},\"status\":{\"type\":\"object\",\"properties\":{\"seen\":{\"type\":" \
    "\"integer\"}}}}}}}]}}"

/* Creates the CRD (once per testenv) and a gadget; waits (bounded) until
 * the new resource serves. */
static void create_gadget(const char *name)
{
    kcr_err err =
        kcr_client_create(client, &(kcr_request){.resource = &CRDS, .body = CRD_JSON}, NULL);
    cr_assert(err == KCR_OK || err == KCR_ERR_EXISTS, "%s", kcr_last_error());
    char json[256];
    snprintf(
        json, sizeof json,
        "{\"apiVersion\":\"ctlutil.e2e.kcr.dev/v1\",\"kind\":\"Gadget\",\"metadata\":{\"name\":"
        "\"%s\"},\"spec\":{\"size\":1}}",
        name);
    int64_t deadline = now_ms() + 30000;
    while ((err = kcr_client_create(client,
                                    &(kcr_request){.resource = &GADGETS, .ns = ns, .body = json},
                                    NULL)) == KCR_ERR_NOT_FOUND &&
           now_ms() < deadline)
        sleep_ms(100); /* the CRD's endpoint appears once it is Established */
    cr_assert_eq(err, KCR_OK, "creating a gadget: %s", kcr_last_error());
}

struct mirror {
    int calls;
};

/* status.seen = spec.size; on its first call, another writer changes the
 * spec first, so our write carries a stale resourceVersion. */
static kcr_err mirror_size(kcr_object_edit *e, const kcr_object *cur, void *user_data)
{
    struct mirror *m = user_data;
    if (m->calls++ == 0)
        cr_assert_eq(kcr_client_patch(other,
                                      &(kcr_request){.resource = &GADGETS,
                                                     .ns = ns,
                                                     .name = kcr_object_name(cur),
                                                     .patch_type = KCR_PATCH_MERGE,
                                                     .body = "{\"spec\":{\"size\":7}}"},
                                      NULL),
                     KCR_OK, "%s", kcr_last_error());
    return kcr_object_edit_set_int(e, "status.seen",
                                   kcr_value_int(kcr_object_get(cur, "spec.size")));
}

Test(ctrlutil_e2e, status_update_retries_a_real_conflict, .init = setup, .fini = teardown,
     .timeout = 120)
{
    create_gadget("g1");
    struct mirror m = {0};
    kcr_ctrlutil_op_result r;
    kcr_object *o = NULL;
    cr_assert_eq(kcr_ctrlutil_update_status(client,
                                            &(kcr_ctrlutil_write_options){.resource = &GADGETS,
                                                                          .ns = ns,
                                                                          .name = "g1",
                                                                          .mutate = mirror_size,
                                                                          .user_data = &m,
                                                                          .result = &r},
                                            &o),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(m.calls, 2, "the first write hit a 409, the second went through");
    cr_assert_eq(r, KCR_CTRLUTIL_UPDATED);
    cr_assert_eq(kcr_value_int(kcr_object_get(o, "status.seen")), 7);
    cr_assert_eq(kcr_value_int(kcr_object_get(o, "spec.size")), 7);
    cr_assert_eq(kcr_object_generation(o), 2, "only the other writer's spec change bumped it");
    kcr_object_unref(o);
    /* without retries the same race is the server's 409 */
    m.calls = 0;
    kcr_status st = {0};
    cr_assert_eq(kcr_client_patch(other,
                                  &(kcr_request){.resource = &GADGETS,
                                                 .ns = ns,
                                                 .name = "g1",
                                                 .patch_type = KCR_PATCH_MERGE,
                                                 .body = "{\"spec\":{\"size\":1}}"},
                                  NULL),
                 KCR_OK);
    cr_assert_eq(kcr_ctrlutil_update_status(client,
                                            &(kcr_ctrlutil_write_options){.resource = &GADGETS,
                                                                          .ns = ns,
                                                                          .name = "g1",
                                                                          .mutate = mirror_size,
                                                                          .user_data = &m,
                                                                          .max_retries = -1,
                                                                          .result = &r,
                                                                          .status = &st},
                                            NULL),
                 KCR_ERR_CONFLICT);
    cr_assert_eq(st.code, 409);
    cr_assert_str_eq(st.reason, "Conflict");
    kcr_status_clear(&st);
}

/* Only the desired data: apiVersion, name and namespace come seeded, the
 * server fills in the kind. */
static kcr_err desired_cm(kcr_object_edit *e, const kcr_object *cur, void *user_data)
{
    (void)cur;
    return kcr_object_edit_set_string(e, "data.v", (const char *)user_data);
}

Test(ctrlutil_e2e, create_or_update_and_apply_with_field_managers, .init = setup, .fini = teardown,
     .timeout = 120)
{
    kcr_ctrlutil_op_result r;
    kcr_object *o = NULL;
    cr_assert_eq(kcr_ctrlutil_create_or_update(client,
                                               &(kcr_ctrlutil_write_options){.resource = &E2E_CM,
                                                                             .ns = ns,
                                                                             .name = "cou",
                                                                             .mutate = desired_cm,
                                                                             .user_data = "1",
                                                                             .result = &r},
                                               &o),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(r, KCR_CTRLUTIL_CREATED);
    cr_assert_str_eq(kcr_object_kind(o), "ConfigMap");
    kcr_object_unref(o);
    cr_assert_eq(kcr_ctrlutil_create_or_update(client,
                                               &(kcr_ctrlutil_write_options){.resource = &E2E_CM,
                                                                             .ns = ns,
                                                                             .name = "cou",
                                                                             .mutate = desired_cm,
                                                                             .user_data = "1",
                                                                             .result = &r},
                                               NULL),
                 KCR_OK);
    cr_assert_eq(r, KCR_CTRLUTIL_UNCHANGED);
    cr_assert_eq(kcr_ctrlutil_create_or_update(client,
                                               &(kcr_ctrlutil_write_options){.resource = &E2E_CM,
                                                                             .ns = ns,
                                                                             .name = "cou",
                                                                             .mutate = desired_cm,
                                                                             .user_data = "2",
                                                                             .result = &r},
                                               &o),
                 KCR_OK);
    cr_assert_eq(r, KCR_CTRLUTIL_UPDATED);
    cr_assert_str_eq(kcr_value_string(kcr_object_get(o, "data.v"), NULL), "2");
    kcr_object_unref(o);

    const char *a = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"ssa\"},"
                    "\"data\":{\"shared\":\"a\",\"only-a\":\"1\"}}";
    const char *b = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"ssa\"},"
                    "\"data\":{\"shared\":\"b\"}}";
    cr_assert_eq(
        kcr_ctrlutil_apply(client,
                           &(kcr_ctrlutil_apply_options){
                               .resource = &E2E_CM, .ns = ns, .json = a, .field_manager = "kcr-a"},
                           &o),
        KCR_OK, "%s", kcr_last_error());
    cr_assert_str_eq(kcr_value_string(kcr_object_get(o, "metadata.managedFields[0].manager"), NULL),
                     "kcr-a");
    kcr_object_unref(o);
    /* another manager changing an owned field: the server's apply conflict */
    kcr_status st = {0};
    cr_assert_eq(
        kcr_ctrlutil_apply(
            client,
            &(kcr_ctrlutil_apply_options){
                .resource = &E2E_CM, .ns = ns, .json = b, .field_manager = "kcr-b", .status = &st},
            NULL),
        KCR_ERR_CONFLICT);
    cr_assert_eq(st.code, 409);
    cr_assert(strstr(st.message, "kcr-a"), "the conflict names the owner: %s", st.message);
    char want[300];
    snprintf(want, sizeof want, "apply ConfigMap %s/ssa: ", ns);
    cr_assert(strstr(kcr_last_error(), want) && strstr(kcr_last_error(), "kcr-a"),
              "the message names the verb, the object and the owner: %s", kcr_last_error());
    kcr_status_clear(&st);
    /* forced, it takes the field over; the other field stays kcr-a's */
    cr_assert_eq(kcr_ctrlutil_apply(client,
                                    &(kcr_ctrlutil_apply_options){.resource = &E2E_CM,
                                                                  .ns = ns,
                                                                  .json = b,
                                                                  .field_manager = "kcr-b",
                                                                  .force = true,
                                                                  .status = &st},
                                    &o),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_str_eq(kcr_value_string(kcr_object_get(o, "data.shared"), NULL), "b");
    cr_assert_str_eq(kcr_value_string(kcr_object_get(o, "data[\"only-a\"]"), NULL), "1");
    kcr_value mf = kcr_object_get(o, "metadata.managedFields");
    bool a_seen = false, b_seen = false;
    for (size_t i = 0; i < kcr_value_len(mf); i++) {
        const char *m = kcr_value_string(kcr_value_get(kcr_value_at(mf, i), "manager"), NULL);
        a_seen |= m && strcmp(m, "kcr-a") == 0;
        b_seen |= m && strcmp(m, "kcr-b") == 0;
    }
    cr_assert(a_seen && b_seen, "both managers own fields");
    kcr_object_unref(o);
}
