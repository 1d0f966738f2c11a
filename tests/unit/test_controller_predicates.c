/* Predicates (each kind, composition, failing custom ones) and reason names. */
#include <criterion/criterion.h>
#include <string.h>

#include "kcr/kcr.h"

static kcr_object *obj(const char *json)
{
    kcr_object *o = NULL;
    cr_assert_eq(kcr_object_parse(json, strlen(json), &o), KCR_OK, "%s", kcr_last_error());
    return o;
}

static kcr_object *a1, *a2_gen, *a3_labels, *a4_ann, *a5_fin, *a6_same_rv;

static void setup(void)
{
    a1 = obj("{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"1\",\"generation\":1,"
             "\"labels\":{\"app\":\"web\"}}}");
    a2_gen = obj("{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"2\",\"generation\":2,"
                 "\"labels\":{\"app\":\"web\"}}}");
    a3_labels = obj("{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"3\",\"generation\":1,"
                    "\"labels\":{\"app\":\"db\"}}}");
    a4_ann = obj("{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"4\",\"generation\":1,"
                 "\"labels\":{\"app\":\"web\"},\"annotations\":{\"x\":\"y\"}}}");
    a5_fin = obj("{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"5\",\"generation\":1,"
                 "\"labels\":{\"app\":\"web\"},\"finalizers\":[\"f\"]}}");
    a6_same_rv = obj("{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"1\",\"generation\":1,"
                     "\"labels\":{\"app\":\"web\"}}}");
}

static void teardown(void)
{
    kcr_object_unref(a1), kcr_object_unref(a2_gen), kcr_object_unref(a3_labels);
    kcr_object_unref(a4_ann), kcr_object_unref(a5_fin), kcr_object_unref(a6_same_rv);
}

/* A change as the router hands it to predicates. */
#define CHANGE(kind, old_obj, obj) (&(kcr_object_change){(kind), (old_obj), (obj)})

static bool upd(kcr_predicate *p, const kcr_object *o, const kcr_object *n)
{
    return kcr_predicate_eval(p, NULL, CHANGE(KCR_CHANGE_UPDATED, o, n), NULL);
}

Test(predicates, changed_predicates_filter_updates_only, .init = setup, .fini = teardown)
{
    kcr_predicate *gen = kcr_predicate_generation_changed();
    cr_assert(upd(gen, a1, a2_gen));
    cr_assert_not(upd(gen, a1, a3_labels));
    cr_assert(kcr_predicate_eval(gen, NULL, CHANGE(KCR_CHANGE_ADDED, NULL, a1), NULL), "adds pass");
    cr_assert(kcr_predicate_eval(gen, NULL, CHANGE(KCR_CHANGE_DELETED, NULL, a1), NULL),
              "deletes pass");
    kcr_predicate_free(gen);

    kcr_predicate *rv = kcr_predicate_resource_version_changed();
    cr_assert(upd(rv, a1, a3_labels));
    cr_assert_not(upd(rv, a1, a6_same_rv), "a resync");
    kcr_predicate_free(rv);

    kcr_predicate *labels = kcr_predicate_labels_changed();
    cr_assert(upd(labels, a1, a3_labels));
    cr_assert_not(upd(labels, a1, a2_gen));
    kcr_predicate_free(labels);

    kcr_predicate *ann = kcr_predicate_annotations_changed();
    cr_assert(upd(ann, a1, a4_ann));
    cr_assert_not(upd(ann, a1, a2_gen), "no annotations on either side");
    kcr_predicate_free(ann);

    kcr_predicate *fin = kcr_predicate_finalizers_changed();
    cr_assert(upd(fin, a1, a5_fin));
    cr_assert(upd(fin, a5_fin, a1));
    cr_assert_not(upd(fin, a1, a4_ann));
    kcr_predicate_free(fin);
}

Test(predicates, label_selector_filters_every_change, .init = setup, .fini = teardown)
{
    kcr_predicate *sel = kcr_predicate_label_selector("app in (web,api)");
    cr_assert_not_null(sel);
    cr_assert(kcr_predicate_eval(sel, NULL, CHANGE(KCR_CHANGE_ADDED, NULL, a1), NULL));
    cr_assert_not(kcr_predicate_eval(sel, NULL, CHANGE(KCR_CHANGE_ADDED, NULL, a3_labels), NULL));
    cr_assert_not(upd(sel, a1, a3_labels), "the new object decides");
    cr_assert(kcr_predicate_eval(sel, NULL, CHANGE(KCR_CHANGE_DELETED, NULL, a1), NULL));
    kcr_predicate_free(sel);
    cr_assert_null(kcr_predicate_label_selector("app in (web"));
    cr_assert_neq(strlen(kcr_last_error()), 0);
}

static kcr_err only_name_a(kcr_source_ctx *ctx, const kcr_object_change *c, bool *pass, void *ud)
{
    cr_assert_null(ctx, "kcr_predicate_eval without a context passes none");
    cr_assert_null(c->old_obj, "an add has no old object");
    *(int *)ud += 1;
    *pass = c->obj && strcmp(kcr_object_name(c->obj), "a") == 0;
    return KCR_OK;
}

static kcr_err failing(kcr_source_ctx *ctx, const kcr_object_change *c, bool *pass, void *ud)
{
    (void)ctx, (void)c, (void)ud;
    *pass = false;
    return KCR_ERR_INVALID;
}

Test(predicates, composition_and_failures, .init = setup, .fini = teardown)
{
    int calls = 0;
    /* (generation changed OR labels changed) AND NOT finalizers changed */
    kcr_predicate *p = kcr_predicate_and(
        kcr_predicate_or(kcr_predicate_generation_changed(), kcr_predicate_labels_changed()),
        kcr_predicate_not(kcr_predicate_finalizers_changed()));
    cr_assert_not_null(p);
    cr_assert(upd(p, a1, a2_gen));
    cr_assert(upd(p, a1, a3_labels));
    cr_assert_not(upd(p, a1, a4_ann));
    cr_assert_not(upd(p, a1, a5_fin));
    kcr_predicate_free(p);

    kcr_predicate *c = kcr_predicate_custom(only_name_a, &calls);
    cr_assert(kcr_predicate_eval(c, NULL, CHANGE(KCR_CHANGE_ADDED, a2_gen, a1), NULL),
              "an old object given with an add is not passed on");
    cr_assert_eq(calls, 1);
    kcr_predicate_free(c);

    bool failed = false;
    kcr_predicate *f = kcr_predicate_not(kcr_predicate_custom(failing, NULL));
    cr_assert(kcr_predicate_eval(f, NULL, CHANGE(KCR_CHANGE_ADDED, NULL, a1), &failed),
              "a failing predicate lets the change pass, even under not()");
    cr_assert(failed);
    kcr_predicate_free(f);

    cr_assert(kcr_predicate_eval(NULL, NULL, CHANGE(KCR_CHANGE_UPDATED, a1, a6_same_rv), NULL),
              "NULL passes all");
    cr_assert_null(kcr_predicate_and(kcr_predicate_generation_changed(), NULL),
                   "a NULL operand (a failed constructor) fails the combinator");
    cr_assert_null(kcr_predicate_custom(NULL, NULL));
}

Test(predicates, reason_names)
{
    cr_assert_str_eq(kcr_reason_name(KCR_REASON_PRIMARY_UPDATED), "PrimaryUpdated");
    cr_assert_str_eq(kcr_reason_name(KCR_REASON_OWNED), "Owned");
    cr_assert_str_eq(kcr_reason_name(KCR_REASON_INITIAL_LIST), "InitialList");
    cr_assert_str_eq(kcr_reason_name((kcr_reason)99), "Unknown");
    cr_assert_gt(KCR_REASON_PRIMARY_DELETED, KCR_REASON_OWNED, "importance order");
    cr_assert_gt(KCR_REASON_RETRY, KCR_REASON_REQUEUE_AFTER);
}
