/* controllerutil.h owner references: the controller reference's fields, a
 * second controller refused with the owner's name, owners without GVK (built
 * by hand) or with a metadata-only cache's PartialObjectMetadata, namespaces,
 * recreated owners, plain references, the edit variants, and the bucket
 * label a controller reference stamps. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "kcr/kcr.h"

static kcr_object *obj(const char *json)
{
    kcr_object *o = NULL;
    cr_assert_eq(kcr_object_parse(json, strlen(json), &o), KCR_OK, "%s", kcr_last_error());
    return o;
}

#define FOO(name, uid)                                                                             \
    "{\"apiVersion\":\"kcr.dev/v1\",\"kind\":\"Foo\",\"metadata\":{\"name\":\"" name               \
    "\",\"namespace\":\"ns\",\"uid\":\"" uid "\"}}"
#define CM_JSON                                                                                    \
    "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"cm\",\"namespace\":"   \
    "\"ns\"}}"

Test(ctrlutil_owner, controller_reference_fields_and_idempotence)
{
    kcr_object *owner = obj(FOO("foo", "u-1")), *cm = obj(CM_JSON), *r = NULL, *again = NULL;
    cr_assert_eq(kcr_ctrlutil_set_controller_reference(owner, cm, NULL, &r), KCR_OK, "%s",
                 kcr_last_error());
    cr_assert_eq(kcr_object_owner_ref_count(r), 1);
    kcr_owner_ref ref;
    cr_assert(kcr_object_controller_ref(r, &ref));
    cr_assert_str_eq(ref.api_version, "kcr.dev/v1");
    cr_assert_str_eq(ref.kind, "Foo");
    cr_assert_str_eq(ref.name, "foo");
    cr_assert_str_eq(ref.uid, "u-1");
    cr_assert(ref.controller);
    cr_assert(ref.block_owner_deletion);
    cr_assert_eq(kcr_object_owner_ref_count(cm), 0, "the input object is never changed");
    /* same owner again: nothing changes, the same object comes back */
    cr_assert_eq(kcr_ctrlutil_set_controller_reference(owner, r, NULL, &again), KCR_OK);
    cr_assert_eq(again, r);
    kcr_object_unref(again);
    /* opting out of blockOwnerDeletion updates the entry in place */
    kcr_ctrlutil_owner_options o = {.no_block_owner_deletion = true};
    cr_assert_eq(kcr_ctrlutil_set_controller_reference(owner, r, &o, &again), KCR_OK);
    cr_assert_eq(kcr_object_owner_ref_count(again), 1);
    cr_assert(kcr_object_controller_ref(again, &ref));
    cr_assert_not(ref.block_owner_deletion);
    kcr_object_unref(again);
    kcr_object_unref(r);
    kcr_object_unref(cm);
    kcr_object_unref(owner);
}

Test(ctrlutil_owner, a_second_controller_is_refused_by_name)
{
    kcr_object *a = obj(FOO("first", "u-1")), *b = obj(FOO("second", "u-2")), *cm = obj(CM_JSON);
    kcr_object *owned = NULL, *r = (kcr_object *)1;
    cr_assert_eq(kcr_ctrlutil_set_controller_reference(a, cm, NULL, &owned), KCR_OK);
    cr_assert_eq(kcr_ctrlutil_set_controller_reference(b, owned, NULL, &r), KCR_ERR_EXISTS);
    cr_assert_null(r);
    cr_assert(
        strstr(kcr_last_error(), "ConfigMap ns/cm is already controlled by Foo first (uid u-1)"),
        "%s", kcr_last_error());
    /* a plain owner reference is still fine */
    cr_assert_eq(kcr_ctrlutil_set_owner_reference(b, owned, NULL, &r), KCR_OK, "%s",
                 kcr_last_error());
    cr_assert_eq(kcr_object_owner_ref_count(r), 2);
    kcr_owner_ref ref;
    cr_assert(kcr_object_owner_ref(r, 1, &ref));
    cr_assert_str_eq(ref.name, "second");
    cr_assert_not(ref.controller);
    cr_assert_not(ref.block_owner_deletion);
    cr_assert(kcr_object_controller_ref(r, &ref));
    cr_assert_str_eq(ref.name, "first");
    /* a plain reference to the controller keeps it the controller */
    kcr_object *same = NULL;
    cr_assert_eq(kcr_ctrlutil_set_owner_reference(a, r, NULL, &same), KCR_OK);
    cr_assert_eq(same, r, "nothing to change");
    kcr_object_unref(same);
    kcr_object_unref(r);
    kcr_object_unref(owned);
    kcr_object_unref(cm);
    kcr_object_unref(b);
    kcr_object_unref(a);
}

Test(ctrlutil_owner, owner_gvk_from_options_when_the_object_lacks_it)
{
    /* built by hand: no apiVersion/kind (LIST items get the List's) */
    kcr_object *owner =
        obj("{\"metadata\":{\"name\":\"foo\",\"namespace\":\"ns\",\"uid\":\"u-1\"}}");
    kcr_object *cm = obj(CM_JSON), *r = NULL;
    cr_assert_eq(kcr_ctrlutil_set_controller_reference(owner, cm, NULL, &r), KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "no apiVersion") &&
                  strstr(kcr_last_error(), "kcr_ctrlutil_owner_options"),
              "%s", kcr_last_error());
    kcr_ctrlutil_owner_options o = {.api_version = "kcr.dev/v1"};
    cr_assert_eq(kcr_ctrlutil_set_controller_reference(owner, cm, &o, &r), KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "no kind"), "%s", kcr_last_error());
    o.kind = "Foo";
    cr_assert_eq(kcr_ctrlutil_set_controller_reference(owner, cm, &o, &r), KCR_OK, "%s",
                 kcr_last_error());
    kcr_owner_ref ref;
    cr_assert(kcr_object_controller_ref(r, &ref));
    cr_assert_str_eq(ref.kind, "Foo");
    cr_assert_str_eq(ref.api_version, "kcr.dev/v1");
    kcr_object_unref(r);
    /* the option wins over the object's own */
    kcr_object *typed = obj(FOO("foo", "u-1"));
    o = (kcr_ctrlutil_owner_options){.api_version = "kcr.dev/v2"};
    cr_assert_eq(kcr_ctrlutil_set_controller_reference(typed, cm, &o, &r), KCR_OK);
    cr_assert(kcr_object_controller_ref(r, &ref));
    cr_assert_str_eq(ref.api_version, "kcr.dev/v2");
    kcr_object_unref(r);
    /* an owner never stored (no uid) */
    kcr_object *fresh = obj("{\"apiVersion\":\"v1\",\"kind\":\"Foo\",\"metadata\":{\"name\":\"x\","
                            "\"namespace\":\"ns\"}}");
    cr_assert_eq(kcr_ctrlutil_set_controller_reference(fresh, cm, NULL, &r), KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "metadata.uid"), "%s", kcr_last_error());
    kcr_object_unref(fresh);
    /* from a metadata-only cache: the kind is PartialObjectMetadata, not the owner's */
    kcr_object *partial =
        obj("{\"apiVersion\":\"meta.k8s.io/v1\",\"kind\":\"PartialObjectMetadata\",\"metadata\":"
            "{\"name\":\"foo\",\"namespace\":\"ns\",\"uid\":\"u-1\"}}");
    cr_assert_eq(kcr_ctrlutil_set_controller_reference(partial, cm, NULL, &r), KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "PartialObjectMetadata"), "%s", kcr_last_error());
    o = (kcr_ctrlutil_owner_options){.api_version = "kcr.dev/v1", .kind = "Foo"};
    cr_assert_eq(kcr_ctrlutil_set_controller_reference(partial, cm, &o, &r), KCR_OK, "%s",
                 kcr_last_error());
    kcr_object_unref(r);
    kcr_object_unref(partial);
    kcr_object_unref(typed);
    kcr_object_unref(cm);
    kcr_object_unref(owner);
}

Test(ctrlutil_owner, namespaces_and_recreated_owners)
{
    kcr_object *owner = obj(FOO("foo", "u-1")), *r = NULL;
    kcr_object *other_ns = obj("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{"
                               "\"name\":\"cm\",\"namespace\":\"elsewhere\"}}");
    kcr_object *cluster =
        obj("{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"n\"}}");
    cr_assert_eq(kcr_ctrlutil_set_controller_reference(owner, other_ns, NULL, &r), KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "cross-namespace"), "%s", kcr_last_error());
    cr_assert_eq(kcr_ctrlutil_set_owner_reference(owner, cluster, NULL, &r), KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "cluster-scoped"), "%s", kcr_last_error());
    /* a cluster-scoped owner may own namespaced objects */
    kcr_object *node = obj(
        "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\",\"uid\":\"n-1\"}}");
    cr_assert_eq(kcr_ctrlutil_set_controller_reference(node, other_ns, NULL, &r), KCR_OK);
    kcr_object_unref(r);

    /* the owner was deleted and recreated (same name, new uid, other version):
     * its reference is replaced, not duplicated, and not refused */
    kcr_object *cm = obj(CM_JSON), *owned = NULL;
    cr_assert_eq(kcr_ctrlutil_set_controller_reference(owner, cm, NULL, &owned), KCR_OK);
    kcr_object *reborn =
        obj("{\"apiVersion\":\"kcr.dev/v2\",\"kind\":\"Foo\",\"metadata\":{\"name\":"
            "\"foo\",\"namespace\":\"ns\",\"uid\":\"u-9\"}}");
    cr_assert_eq(kcr_ctrlutil_set_controller_reference(reborn, owned, NULL, &r), KCR_OK, "%s",
                 kcr_last_error());
    cr_assert_eq(kcr_object_owner_ref_count(r), 1);
    kcr_owner_ref ref;
    cr_assert(kcr_object_controller_ref(r, &ref));
    cr_assert_str_eq(ref.uid, "u-9");
    cr_assert_str_eq(ref.api_version, "kcr.dev/v2");
    kcr_object_unref(r);
    /* the same name in another API group is another owner */
    kcr_object *alien =
        obj("{\"apiVersion\":\"other.dev/v1\",\"kind\":\"Foo\",\"metadata\":{\"name\":"
            "\"foo\",\"namespace\":\"ns\",\"uid\":\"a-1\"}}");
    cr_assert_eq(kcr_ctrlutil_set_controller_reference(alien, owned, NULL, &r), KCR_ERR_EXISTS);
    kcr_object_unref(alien);
    kcr_object_unref(reborn);
    kcr_object_unref(owned);
    kcr_object_unref(cm);
    kcr_object_unref(node);
    kcr_object_unref(cluster);
    kcr_object_unref(other_ns);
    kcr_object_unref(owner);
}

Test(ctrlutil_owner, edit_variants)
{
    kcr_object *a = obj(FOO("first", "u-1")), *b = obj(FOO("second", "u-2"));
    kcr_object_edit *e = NULL;
    cr_assert_eq(kcr_object_edit_new(NULL, &e), KCR_OK);
    cr_assert_eq(kcr_object_edit_set_string(e, "metadata.namespace", "ns"), KCR_OK);
    /* works before the edit has a name */
    cr_assert_eq(kcr_ctrlutil_set_controller_reference_edit(a, e, NULL), KCR_OK, "%s",
                 kcr_last_error());
    cr_assert_eq(kcr_ctrlutil_set_controller_reference_edit(b, e, NULL), KCR_ERR_EXISTS);
    cr_assert_eq(kcr_ctrlutil_set_owner_reference_edit(b, e, NULL), KCR_OK);
    cr_assert_eq(kcr_object_edit_set_string(e, "metadata.name", "cm"), KCR_OK);
    kcr_object *r = NULL;
    cr_assert_eq(kcr_object_edit_freeze(e, &r), KCR_OK);
    cr_assert_eq(kcr_object_owner_ref_count(r), 2);
    kcr_owner_ref ref;
    cr_assert(kcr_object_controller_ref(r, &ref));
    cr_assert_str_eq(ref.name, "first");
    kcr_object_unref(r);
    kcr_object_edit_free(e);
    cr_assert_eq(kcr_ctrlutil_set_controller_reference_edit(NULL, NULL, NULL), KCR_ERR_INVALID);
    kcr_object_unref(b);
    kcr_object_unref(a);
}

/* The controller reference labels the object with its owner's bucket
 * (kcr/shard.h: the top 8 bits of the FNV-1a hash of the owner's uid):
 * "u-1" hashes to 0x4d84..., bucket 77; "a" to 0xaf63..., bucket 175. */
Test(ctrlutil_owner, the_controller_reference_stamps_its_owners_bucket)
{
    kcr_object *owner = obj(FOO("foo", "u-1")), *cm = obj(CM_JSON), *r = NULL, *again = NULL;
    cr_assert_eq(kcr_ctrlutil_set_controller_reference(owner, cm, NULL, &r), KCR_OK);
    cr_assert_str_eq(kcr_object_label(r, KCR_SHARD_BUCKET_LABEL), "77");
    cr_assert_eq(kcr_ctrlutil_set_controller_reference(owner, r, NULL, &again), KCR_OK);
    cr_expect_eq(again, r, "stamped already: nothing changes");
    kcr_object_unref(again);
    kcr_object_unref(r);

    /* written before the label existed (or by another tool): the same
     * reference, no label; or a wrong one: the helper stamps it */
    const char *refs = "\"ownerReferences\":[{\"apiVersion\":\"kcr.dev/v1\",\"kind\":\"Foo\","
                       "\"name\":\"foo\",\"uid\":\"u-1\",\"controller\":true,"
                       "\"blockOwnerDeletion\":true}]";
    char json[512];
    for (int wrong = 0; wrong < 2; wrong++) {
        snprintf(json, sizeof json,
                 "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"cm\","
                 "\"namespace\":\"ns\",%s%s}}",
                 wrong ? "\"labels\":{\"kcr.dev/shard-bucket\":\"5\",\"app\":\"x\"}," : "", refs);
        kcr_object *old = obj(json);
        cr_assert_eq(kcr_ctrlutil_set_controller_reference(owner, old, NULL, &r), KCR_OK);
        cr_expect_neq(r, old, "the label was written");
        cr_expect_str_eq(kcr_object_label(r, KCR_SHARD_BUCKET_LABEL), "77");
        cr_expect_eq(kcr_object_owner_ref_count(r), 1);
        if (wrong)
            cr_expect_str_eq(kcr_object_label(r, "app"), "x", "other labels are kept");
        /* a plain reference to the controller stamps it too */
        kcr_object_unref(r);
        cr_assert_eq(kcr_ctrlutil_set_owner_reference(owner, old, NULL, &r), KCR_OK);
        cr_expect_str_eq(kcr_object_label(r, KCR_SHARD_BUCKET_LABEL), "77");
        kcr_object_unref(r);
        kcr_object_unref(old);
    }

    /* a recreated owner: its new uid's bucket */
    kcr_object *stamped = NULL, *renewed = obj(FOO("foo", "a"));
    cr_assert_eq(kcr_ctrlutil_set_controller_reference(owner, cm, NULL, &stamped), KCR_OK);
    cr_assert_eq(kcr_ctrlutil_set_controller_reference(renewed, stamped, NULL, &r), KCR_OK);
    cr_expect_str_eq(kcr_object_label(r, KCR_SHARD_BUCKET_LABEL), "175");
    kcr_object_unref(r);

    /* a plain owner is no controller: no label */
    cr_assert_eq(kcr_ctrlutil_set_owner_reference(owner, cm, NULL, &r), KCR_OK);
    cr_expect_null(kcr_object_label(r, KCR_SHARD_BUCKET_LABEL));
    kcr_object_unref(r);

    /* the edit variant stamps as well */
    kcr_object_edit *e = NULL;
    cr_assert_eq(kcr_object_edit_new(cm, &e), KCR_OK);
    cr_assert_eq(kcr_ctrlutil_set_controller_reference_edit(renewed, e, NULL), KCR_OK);
    cr_assert_eq(kcr_object_edit_freeze(e, &r), KCR_OK);
    cr_expect_str_eq(kcr_object_label(r, KCR_SHARD_BUCKET_LABEL), "175");
    kcr_object_unref(r);
    kcr_object_edit_free(e);
    kcr_object_unref(renewed);
    kcr_object_unref(stamped);
    kcr_object_unref(cm);
    kcr_object_unref(owner);
}
