/* kcr-gen's output over tests/unit/kcrgen/widget-crd.yaml (generated at
 * build time by kcr_generate_types): reads with presence, edit views,
 * enums, int-or-string, maps, raw fields, defaults and validation with the
 * apiserver's field paths. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "foo_types.h" /* the sample controller's, committed */
#include "test_types.h"
#include "typed/typed_regex.h"

static kcr_object *parse(const char *json)
{
    kcr_object *o = NULL;
    cr_assert_eq(kcr_object_parse(json, 0, &o), KCR_OK, "%s", kcr_last_error());
    return o;
}

static const char WIDGET[] =
    "{\"apiVersion\":\"test.kcr.dev/v1\",\"kind\":\"Widget\",\"metadata\":{\"name\":\"w\","
    "\"namespace\":\"ns\",\"labels\":{\"app\":\"x\"}},"
    "\"spec\":{\"size\":3,\"mode\":\"in-place\",\"name\":\"abc\",\"ratio\":0.25,\"paused\":true,"
    "\"port\":\"http\",\"cpu\":0.5,\"tags\":[\"a\",\"b\"],"
    "\"template\":{\"labels\":{\"k\":\"v\",\"k2\":\"v2\"}},"
    "\"containers\":[{\"name\":\"c0\",\"image\":\"i0\",\"namespace\":\"n\",\"class\":\"gold\","
    "\"default\":true,\"new\":7},{\"name\":\"c1\"}],"
    "\"limits\":{\"cpu\":{\"max\":4}},\"extra\":{\"anything\":[1,{\"x\":null}]},\"note\":null,"
    "\"matrix\":[[1,2],[3]]},"
    "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"Unknown\"},"
    "{\"type\":\"Odd\",\"status\":\"Maybe\"}]}}";

Test(kcr_gen, reads_scalars_with_presence)
{
    kcr_object *o = parse(WIDGET);
    test_v1_WidgetSpec spec = test_v1_Widget_spec(test_v1_Widget_of(o));
    int32_t size = 0;
    cr_assert_eq(test_v1_WidgetSpec_size(spec, &size), KCR_FIELD_SET);
    cr_assert_eq(size, 3);
    test_v1_WidgetSpec_Mode mode = TEST_V1_WIDGET_SPEC_MODE_UNKNOWN;
    cr_assert_eq(test_v1_WidgetSpec_mode(spec, &mode), KCR_FIELD_SET);
    cr_assert_eq(mode, TEST_V1_WIDGET_SPEC_MODE_IN_PLACE);
    cr_assert_str_eq(test_v1_WidgetSpec_Mode_name(mode), "in-place");
    double ratio = 0;
    cr_assert_eq(test_v1_WidgetSpec_ratio(spec, &ratio), KCR_FIELD_SET);
    cr_assert(ratio == 0.25);
    bool paused = false;
    cr_assert_eq(test_v1_WidgetSpec_paused(spec, &paused), KCR_FIELD_SET);
    cr_assert(paused);
    kcr_int_or_string port = {0};
    cr_assert_eq(test_v1_WidgetSpec_port(spec, &port), KCR_FIELD_SET);
    cr_assert(port.is_string);
    cr_assert_str_eq(port.string_value, "http");
    kcr_quantity cpu, want;
    cr_assert_eq(test_v1_WidgetSpec_cpu(spec, &cpu), KCR_FIELD_SET);
    cr_assert_eq(kcr_quantity_parse_str("0.5", &want), KCR_OK);
    cr_assert_eq(kcr_quantity_cmp(&cpu, &want), 0, "controller-gen's quantity pattern");
    const char *note = "untouched";
    cr_assert_eq(test_v1_WidgetSpec_note(spec, &note), KCR_FIELD_ABSENT, "null reads as absent");
    cr_assert_str_eq(note, "untouched");
    const char *name = NULL;
    cr_assert_eq(test_v1_WidgetSpec_name(spec, &name), KCR_FIELD_SET);
    cr_assert_str_eq(name, "abc");
    /* Zero copies: the string is the object's own bytes. */
    cr_assert_eq(name, kcr_value_string(kcr_object_get(o, "spec.name"), NULL));
    /* metadata through the installed meta/v1 types */
    const char *ns = NULL, *label = NULL;
    kcr_meta_v1_ObjectMeta meta = test_v1_Widget_metadata(test_v1_Widget_of(o));
    cr_assert_eq(kcr_meta_v1_ObjectMeta_namespace(meta, &ns), KCR_FIELD_SET);
    cr_assert_str_eq(ns, "ns");
    cr_assert_eq(kcr_meta_v1_ObjectMeta_labels_get(meta, "app", &label), KCR_FIELD_SET);
    cr_assert_str_eq(label, "x");
    kcr_object_unref(o);
}

Test(kcr_gen, absent_and_wrong_types)
{
    kcr_object *o = parse("{\"metadata\":{\"name\":\"w\"},\"spec\":{\"size\":\"three\","
                          "\"mode\":\"Sideways\",\"port\":true,\"tags\":\"notalist\"}}");
    test_v1_WidgetSpec spec = test_v1_Widget_spec(test_v1_Widget_of(o));
    int32_t size = 42;
    cr_assert_eq(test_v1_WidgetSpec_size(spec, &size), KCR_FIELD_WRONG_TYPE);
    cr_assert_eq(size, 42, "out untouched");
    test_v1_WidgetSpec_Mode mode = TEST_V1_WIDGET_SPEC_MODE_FAST;
    cr_assert_eq(test_v1_WidgetSpec_mode(spec, &mode), KCR_FIELD_SET);
    cr_assert_eq(mode, TEST_V1_WIDGET_SPEC_MODE_UNKNOWN, "a value the schema lacks");
    cr_assert_str_eq(test_v1_WidgetSpec_Mode_name(mode), "");
    kcr_int_or_string port;
    cr_assert_eq(test_v1_WidgetSpec_port(spec, &port), KCR_FIELD_WRONG_TYPE);
    cr_assert_eq(test_v1_WidgetSpec_tags_len(spec), 0);
    double ratio;
    cr_assert_eq(test_v1_WidgetSpec_ratio(spec, &ratio), KCR_FIELD_ABSENT);
    /* an absent parent gives absent children, never a crash */
    test_v1_WidgetStatus st = test_v1_Widget_status(test_v1_Widget_of(o));
    cr_assert_eq(test_v1_WidgetStatus_conditions_len(st), 0);
    const char *phase;
    cr_assert_eq(test_v1_WidgetStatus_phase(st, &phase), KCR_FIELD_ABSENT);
    cr_assert_eq(test_v1_WidgetStatusCondition_type(test_v1_WidgetStatus_conditions_at(st, 5),
                                                    &phase),
                 KCR_FIELD_ABSENT);
    kcr_object_unref(o);
    /* int32 fields refuse integers outside int32 */
    o = parse("{\"metadata\":{\"name\":\"w\"},\"spec\":{\"size\":4294967296}}");
    cr_assert_eq(test_v1_WidgetSpec_size(test_v1_Widget_spec(test_v1_Widget_of(o)), &size),
                 KCR_FIELD_WRONG_TYPE);
    kcr_object_unref(o);
}

Test(kcr_gen, iterates_lists_and_maps)
{
    kcr_object *o = parse(WIDGET);
    test_v1_WidgetSpec spec = test_v1_Widget_spec(test_v1_Widget_of(o));
    cr_assert_eq(test_v1_WidgetSpec_tags_len(spec), 2);
    const char *tag = NULL;
    cr_assert_eq(test_v1_WidgetSpec_tags_at(spec, 1, &tag), KCR_FIELD_SET);
    cr_assert_str_eq(tag, "b");
    cr_assert_eq(test_v1_WidgetSpec_tags_at(spec, 2, &tag), KCR_FIELD_ABSENT);
    cr_assert_eq(test_v1_WidgetSpec_containers_len(spec), 2);
    test_v1_WidgetSpecContainer c0 = test_v1_WidgetSpec_containers_at(spec, 0);
    const char *s = NULL;
    bool dflt = false;
    int64_t n = 0;
    cr_assert_eq(test_v1_WidgetSpecContainer_class(c0, &s), KCR_FIELD_SET);
    cr_assert_str_eq(s, "gold");
    cr_assert_eq(test_v1_WidgetSpecContainer_namespace(c0, &s), KCR_FIELD_SET);
    cr_assert_str_eq(s, "n");
    cr_assert_eq(test_v1_WidgetSpecContainer_default_(c0, &dflt), KCR_FIELD_SET);
    cr_assert(dflt);
    cr_assert_eq(test_v1_WidgetSpecContainer_new_(c0, &n), KCR_FIELD_SET);
    cr_assert_eq(n, 7);
    cr_assert_eq(test_v1_WidgetSpecContainer_image(test_v1_WidgetSpec_containers_at(spec, 1), &s),
                 KCR_FIELD_ABSENT);
    /* a map of strings, in document order */
    test_v1_WidgetSpecTemplate tpl = test_v1_WidgetSpec_template(spec);
    cr_assert_eq(test_v1_WidgetSpecTemplate_labels_len(tpl), 2);
    const char *key = NULL, *val = NULL;
    cr_assert_eq(test_v1_WidgetSpecTemplate_labels_at(tpl, 1, &key, &val), KCR_FIELD_SET);
    cr_assert_str_eq(key, "k2");
    cr_assert_str_eq(val, "v2");
    cr_assert_eq(test_v1_WidgetSpecTemplate_labels_get(tpl, "nope", &val), KCR_FIELD_ABSENT);
    /* a map of objects */
    int64_t max = 0;
    cr_assert_eq(test_v1_WidgetSpecLimitsValue_max(test_v1_WidgetSpec_limits_get(spec, "cpu"),
                                                   &max),
                 KCR_FIELD_SET);
    cr_assert_eq(max, 4);
    cr_assert_eq(test_v1_WidgetSpec_limits_len(spec), 1);
    test_v1_WidgetSpec_limits_at(spec, 0, &key);
    cr_assert_str_eq(key, "cpu");
    /* preserve-unknown-fields and arrays of arrays stay raw values */
    kcr_value extra = test_v1_WidgetSpec_extra(spec);
    cr_assert_eq(kcr_value_get_type(kcr_value_get(extra, "anything[1]")), KCR_VALUE_OBJECT);
    cr_assert_eq(kcr_value_int(kcr_value_get(test_v1_WidgetSpec_matrix(spec), "[0][1]")), 2);
    /* enums in a list, with a value named Unknown */
    test_v1_WidgetStatus st = test_v1_Widget_status(test_v1_Widget_of(o));
    test_v1_WidgetStatusCondition_Status cs = TEST_V1_WIDGET_STATUS_CONDITION_STATUS_TRUE;
    cr_assert_eq(test_v1_WidgetStatusCondition_status(test_v1_WidgetStatus_conditions_at(st, 0),
                                                      &cs),
                 KCR_FIELD_SET);
    cr_assert_eq(cs, TEST_V1_WIDGET_STATUS_CONDITION_STATUS_UNKNOWN_);
    cr_assert_eq(test_v1_WidgetStatusCondition_status(test_v1_WidgetStatus_conditions_at(st, 1),
                                                      &cs),
                 KCR_FIELD_SET);
    cr_assert_eq(cs, TEST_V1_WIDGET_STATUS_CONDITION_STATUS_UNKNOWN);
    kcr_object_unref(o);
}

static char *json_of(const kcr_object *o)
{
    char *json = NULL;
    cr_assert_eq(kcr_object_to_json(o, &json, NULL), KCR_OK);
    return json;
}

Test(kcr_gen, builds_through_edit_views)
{
    kcr_object_edit *e = NULL;
    cr_assert_eq(test_v1_Widget_new(NULL, &e), KCR_OK);
    test_v1_WidgetEdit w = test_v1_Widget_edit(e);
    kcr_meta_v1_ObjectMetaEdit meta = test_v1_WidgetEdit_metadata(w);
    cr_assert_eq(kcr_meta_v1_ObjectMetaEdit_set_name(meta, "w"), KCR_OK);
    cr_assert_eq(kcr_meta_v1_ObjectMetaEdit_set_labels(meta, "app.kubernetes.io/name", "w"),
                 KCR_OK);
    test_v1_WidgetSpecEdit spec = test_v1_WidgetEdit_spec(w);
    cr_assert_eq(test_v1_WidgetSpecEdit_set_size(spec, 2), KCR_OK);
    cr_assert_eq(test_v1_WidgetSpecEdit_set_mode(spec, TEST_V1_WIDGET_SPEC_MODE_SLOW), KCR_OK);
    cr_assert_eq(test_v1_WidgetSpecEdit_set_mode(spec, (test_v1_WidgetSpec_Mode)9),
                 KCR_ERR_INVALID);
    cr_assert_eq(test_v1_WidgetSpecEdit_set_ratio(spec, 1.5), KCR_OK);
    cr_assert_eq(test_v1_WidgetSpecEdit_set_port(spec, (kcr_int_or_string){.int_value = 8080}),
                 KCR_OK);
    cr_assert_eq(test_v1_WidgetSpecEdit_set_cpu_text(spec, "1.5Gi"), KCR_OK);
    cr_assert_eq(test_v1_WidgetSpecEdit_set_cpu_text(spec, "1.5 Gi"), KCR_ERR_PARSE);
    cr_assert_eq(test_v1_WidgetSpecEdit_append_tags(spec, "x"), KCR_OK);
    cr_assert_eq(test_v1_WidgetSpecEdit_append_tags(spec, "y"), KCR_OK);
    for (int i = 0; i < 2; i++) {
        test_v1_WidgetSpecContainerEdit c = test_v1_WidgetSpecEdit_append_containers(spec);
        cr_assert_eq(test_v1_WidgetSpecContainerEdit_set_name(c, i ? "c1" : "c0"), KCR_OK);
    }
    cr_assert_eq(test_v1_WidgetSpecContainerEdit_set_image(
                     test_v1_WidgetSpecEdit_containers_at(spec, 0), "nginx"),
                 KCR_OK);
    cr_assert_eq(test_v1_WidgetSpecTemplateEdit_set_labels(test_v1_WidgetSpecEdit_template(spec),
                                                           "a.b/c", "d\"e"),
                 KCR_OK);
    cr_assert_eq(test_v1_WidgetSpecLimitsValueEdit_set_max(
                     test_v1_WidgetSpecEdit_limits_entry(spec, "mem.ory"), 9),
                 KCR_OK);
    cr_assert_eq(test_v1_WidgetStatusConditionEdit_set_status(
                     test_v1_WidgetStatusEdit_append_conditions(test_v1_WidgetEdit_status(w)),
                     TEST_V1_WIDGET_STATUS_CONDITION_STATUS_UNKNOWN_),
                 KCR_OK);
    cr_assert_eq(test_v1_WidgetSpecEdit_set_note(spec, "gone"), KCR_OK);
    cr_assert_eq(test_v1_WidgetSpecEdit_delete_note(spec), KCR_OK);
    kcr_object *o = NULL;
    cr_assert_eq(kcr_object_edit_freeze(e, &o), KCR_OK, "%s", kcr_last_error());
    kcr_object_edit_free(e);
    char *json = json_of(o);
    cr_assert_str_eq(json,
                     "{\"apiVersion\":\"test.kcr.dev/v1\",\"kind\":\"Widget\",\"metadata\":"
                     "{\"name\":\"w\",\"labels\":{\"app.kubernetes.io/name\":\"w\"}},\"spec\":"
                     "{\"size\":2,\"mode\":\"Slow\",\"ratio\":1.5,\"port\":8080,\"cpu\":\"1536Mi\","
                     "\"tags\":[\"x\","
                     "\"y\"],\"containers\":[{\"name\":\"c0\",\"image\":\"nginx\"},{\"name\":"
                     "\"c1\"}],\"template\":{\"labels\":{\"a.b/c\":\"d\\\"e\"}},\"limits\":"
                     "{\"mem.ory\":{\"max\":9}}},\"status\":{\"conditions\":[{\"status\":"
                     "\"Unknown\"}]}}");
    free(json);
    cr_assert_eq(test_v1_Widget_validate(o, NULL), KCR_OK, "%s", kcr_last_error());
    /* a call the edit refuses is kept by it (later calls are no-ops): on an edit of its own */
    cr_assert_eq(kcr_object_edit_new(o, &e), KCR_OK);
    cr_assert_eq(test_v1_WidgetSpecContainerEdit_set_image(
                     test_v1_WidgetSpecEdit_containers_at(
                         test_v1_WidgetEdit_spec(test_v1_Widget_edit(e)), 5),
                     "nginx"),
                 KCR_ERR_NOT_FOUND);
    kcr_object_edit_free(e);
    kcr_object_unref(o);
}

Test(kcr_gen, edit_view_errors_are_sticky)
{
    kcr_object_edit *e = NULL;
    cr_assert_eq(test_v1_Widget_new(NULL, &e), KCR_OK);
    test_v1_WidgetSpecEdit spec = test_v1_WidgetEdit_spec(test_v1_Widget_edit(e));
    char key[600];
    memset(key, 'k', sizeof key - 1);
    key[sizeof key - 1] = '\0';
    test_v1_WidgetSpecLimitsValueEdit big = test_v1_WidgetSpecEdit_limits_entry(spec, key);
    cr_assert_eq(test_v1_WidgetSpecLimitsValueEdit_set_max(big, 1), KCR_ERR_TOO_LARGE);
    /* appending to a field that holds a non-array fails, and so does every
     * set through the view it returned */
    cr_assert_eq(kcr_object_edit_set_string(e, "spec.containers", "oops"), KCR_OK);
    test_v1_WidgetSpecContainerEdit c = test_v1_WidgetSpecEdit_append_containers(spec);
    cr_assert_eq(test_v1_WidgetSpecContainerEdit_set_name(c, "x"), KCR_ERR_INVALID);
    cr_assert_eq(test_v1_WidgetSpecEdit_set_size(test_v1_WidgetEdit_spec(test_v1_Widget_edit(NULL)),
                                                 1),
                 KCR_ERR_INVALID);
    kcr_object_edit_free(e);
}

Test(kcr_gen, defaults_fill_existing_parents)
{
    kcr_object *base = parse("{\"apiVersion\":\"test.kcr.dev/v1\",\"kind\":\"Widget\","
                             "\"metadata\":{\"name\":\"w\"},\"spec\":{\"size\":1,\"mode\":\"Fast\","
                             "\"paused\":true,\"template\":{},\"containers\":[{\"name\":\"a\"},"
                             "{\"name\":\"b\",\"image\":\"mine\"}]}}");
    kcr_object_edit *e = NULL;
    cr_assert_eq(kcr_object_edit_new(base, &e), KCR_OK);
    cr_assert_eq(test_v1_Widget_default(e), KCR_OK, "%s", kcr_last_error());
    kcr_object *o = NULL;
    cr_assert_eq(kcr_object_edit_freeze(e, &o), KCR_OK);
    char *json = json_of(o);
    cr_assert_str_eq(json, "{\"apiVersion\":\"test.kcr.dev/v1\",\"kind\":\"Widget\",\"metadata\":"
                           "{\"name\":\"w\"},\"spec\":{\"size\":1,\"mode\":\"Fast\",\"paused\":true,"
                           "\"template\":{\"replicas\":1},\"containers\":[{\"name\":\"a\","
                           "\"image\":\"busybox\"},{\"name\":\"b\",\"image\":\"mine\"}],"
                           "\"ratio\":0.5}}");
    free(json);
    kcr_object_unref(o);
    kcr_object_edit_free(e);
    kcr_object_unref(base);
    /* no spec: nothing to default (parents are never created) */
    base = parse("{\"metadata\":{\"name\":\"w\"}}");
    cr_assert_eq(kcr_object_edit_new(base, &e), KCR_OK);
    cr_assert_eq(test_v1_Widget_default(e), KCR_OK);
    cr_assert_eq(kcr_object_edit_freeze(e, &o), KCR_OK);
    json = json_of(o);
    cr_assert_str_eq(json, "{\"metadata\":{\"name\":\"w\"}}");
    free(json);
    kcr_object_unref(o);
    kcr_object_edit_free(e);
    kcr_object_unref(base);
}

Test(kcr_gen, validate_reports_every_violation_with_its_path)
{
    kcr_object *o = parse(
        "{\"metadata\":{\"name\":\"bad\"},\"spec\":{\"size\":11,\"mode\":\"Medium\","
        "\"name\":\"Bad_Name_Too_Long\",\"port\":true,\"tags\":[\"a\",\"b\",\"c\",\"d\"],"
        "\"containers\":[{\"name\":\"ok\"},{\"image\":\"x\"}],\"cpu\":\"1Gi\",\"note\":null,"
        "\"ratio\":null}}");
    kcr_violations v = {0};
    cr_assert_eq(test_v1_Widget_validate(o, &v), KCR_ERR_INVALID);
    const char *want[][2] = {
        {"spec.size", "Invalid value: 11: spec.size in body should be less than or equal to 10"},
        {"spec.mode", "Unsupported value: \"Medium\": supported values: \"Fast\", \"Slow\", "
                      "\"in-place\""},
        {"spec.name", "Too long: may not be more than 8 bytes"}, /* and only that */
        {"spec.port", "Invalid value: \"boolean\": spec.port in body must be of type "
                      "int-or-string: \"boolean\""},
        {"spec.tags", "Too many: 4: must have at most 3 items"},
        {"spec.containers[1].name", "Required value"},
    };
    size_t n = sizeof want / sizeof *want;
    for (size_t i = 0; i < v.n && i < n; i++) {
        cr_expect_str_eq(v.items[i].field, want[i][0], "violation %zu", i);
        cr_expect_str_eq(v.items[i].detail, want[i][1], "violation %zu", i);
    }
    cr_assert_eq(v.n, n);
    cr_assert(strstr(kcr_last_error(), "Widget.test.kcr.dev \"bad\" is invalid: [spec.size: "
                                       "Invalid value: 11: ") != NULL,
              "%s", kcr_last_error());
    kcr_violations_free(&v);
    cr_assert_eq(v.n, 0);
    kcr_object_unref(o);
    /* required at the top of spec, and a valid object of the other version */
    o = parse("{\"metadata\":{\"name\":\"x\"},\"spec\":{}}");
    cr_assert_eq(test_v1_Widget_validate(o, &v), KCR_ERR_INVALID);
    cr_assert_eq(v.n, 2);
    kcr_violations_free(&v);
    kcr_object_unref(o);
    /* the pattern, once the length is right */
    o = parse("{\"metadata\":{\"name\":\"x\"},\"spec\":{\"size\":1,\"mode\":\"Fast\","
              "\"name\":\"9abc\"}}");
    cr_assert_eq(test_v1_Widget_validate(o, &v), KCR_ERR_INVALID);
    cr_assert_eq(v.n, 1);
    cr_assert_str_eq(v.items[0].detail, "Invalid value: \"9abc\": spec.name in body should match "
                                        "'^[a-z][-a-z0-9]*$'");
    kcr_violations_free(&v);
    kcr_object_unref(o);
    o = parse("{\"metadata\":{\"name\":\"x\"},\"spec\":{}}");
    cr_assert_eq(test_v1_Widget_validate(o, &v), KCR_ERR_INVALID);
    cr_assert_str_eq(v.items[0].field, "spec.size");
    cr_assert_str_eq(v.items[1].field, "spec.mode");
    kcr_violations_free(&v);
    cr_assert_eq(test_v2_Widget_validate(o, NULL), KCR_OK);
    kcr_object_unref(o);
}

Test(kcr_gen, pattern_subset)
{
    char out[256];
    cr_assert(kcr__typed_regex_translate("^\\d+\\.\\w[\\d.]$", out, sizeof out));
    cr_assert_str_eq(out, "^[0-9]+\\.[A-Za-z0-9_][0-9.]$");
    cr_assert(kcr__typed_regex_translate("^(?:a|b)+$", out, sizeof out));
    cr_assert_str_eq(out, "^(a|b)+$");
    cr_assert_not(kcr__typed_regex_translate("^(?=a)", out, sizeof out), "lookahead");
    cr_assert_not(kcr__typed_regex_translate("a+?", out, sizeof out), "lazy");
    cr_assert_not(kcr__typed_regex_translate("\\bword", out, sizeof out), "word boundary");
    cr_assert_not(kcr__typed_regex_translate("[a\\]]", out, sizeof out));
    cr_assert_eq(kcr__typed_regex_match("^[a-z]+$", "abc"), 1);
    cr_assert_eq(kcr__typed_regex_match("^[a-z]+$", "aBc"), 0);
    cr_assert_eq(kcr__typed_regex_match("b", "abc"), 1, "searched, not anchored");
    cr_assert_eq(kcr__typed_regex_match("(?<=a)b", "ab"), -1);
}

/* The sample controller's Foo (examples/sample-controller/foo_types.h, a
 * golden file): its reconcile's reads and its status write. */
Test(kcr_gen, sample_foo)
{
    kcr_object *foo = parse("{\"apiVersion\":\"samplecontroller.k8s.io/v1alpha1\",\"kind\":"
                            "\"Foo\",\"metadata\":{\"name\":\"f\",\"namespace\":\"ns\"},"
                            "\"spec\":{\"deploymentName\":\"web\",\"replicas\":2}}");
    sample_FooSpec spec = sample_Foo_spec(sample_Foo_of(foo));
    const char *name = NULL;
    int64_t replicas = 1;
    cr_assert_eq(sample_FooSpec_deployment_name(spec, &name), KCR_FIELD_SET);
    cr_assert_str_eq(name, "web");
    cr_assert_eq(sample_FooSpec_replicas(spec, &replicas), KCR_FIELD_SET);
    cr_assert_eq(replicas, 2);
    int64_t available = -1;
    cr_assert_eq(sample_FooStatus_available_replicas(sample_Foo_status(sample_Foo_of(foo)),
                                                     &available),
                 KCR_FIELD_ABSENT);
    cr_assert_eq(available, -1);
    kcr_object_edit *e = NULL;
    cr_assert_eq(sample_Foo_new(foo, &e), KCR_OK);
    cr_assert_eq(sample_FooStatusEdit_set_available_replicas(
                     sample_FooEdit_status(sample_Foo_edit(e)), 2),
                 KCR_OK);
    cr_assert_eq(sample_FooSpecEdit_set_replicas(sample_FooEdit_spec(sample_Foo_edit(e)), 11),
                 KCR_OK);
    kcr_object *want = NULL;
    cr_assert_eq(kcr_object_edit_freeze(e, &want), KCR_OK);
    kcr_object_edit_free(e);
    cr_assert_eq(kcr_value_int(kcr_object_get(want, "status.availableReplicas")), 2);
    cr_assert_eq(sample_Foo_validate(want, NULL), KCR_ERR_INVALID);
    cr_assert_str_eq(kcr_last_error(), "Foo.samplecontroller.k8s.io \"f\" is invalid: "
                                       "spec.replicas: Invalid value: 11: spec.replicas in body "
                                       "should be less than or equal to 10");
    kcr_object_unref(want);
    kcr_object_unref(foo);
}

static void *validate_bad(void *arg)
{
    kcr_violations v = {0};
    kcr_err err = test_v1_Widget_validate(arg, &v);
    size_t n = v.n;
    kcr_violations_free(&v);
    return (void *)(uintptr_t)(err == KCR_ERR_INVALID && n == 2);
}

/* The embedded schema is parsed once, by whichever thread validates first. */
Test(kcr_gen, validate_from_threads_at_first_use)
{
    kcr_object *o = parse("{\"metadata\":{\"name\":\"x\"},\"spec\":{}}");
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, validate_bad, o), 0);
    for (int i = 0; i < 4; i++) {
        void *ok = NULL;
        pthread_join(t[i], &ok);
        cr_expect(ok != NULL, "thread %d", i);
    }
    kcr_object_unref(o);
}
