/* Object model: copy-on-write editing, merge patches and transforms. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "kcr/kcr.h"
#include "unit/object_fixtures.h"

static char *json_of(const kcr_object *o)
{
    char *s = NULL;
    cr_assert_eq(kcr_object_to_json(o, &s, NULL), KCR_OK);
    return s;
}

static kcr_object *freeze(kcr_object_edit *e)
{
    kcr_object *o = NULL;
    cr_assert_eq(kcr_object_edit_freeze(e, &o), KCR_OK, "%s", kcr_last_error());
    return o;
}

Test(object_edit, set_and_delete_paths_leave_base_untouched)
{
    kcr_object *base = parse_str(POD_JSON);
    char *before = json_of(base);
    kcr_object_edit *e = NULL;
    cr_assert_eq(kcr_object_edit_new(base, &e), KCR_OK);
    cr_assert_eq(kcr_object_edit_set_int(e, "spec.replicas", 5), KCR_OK);
    cr_assert_eq(kcr_object_edit_set_string(e, "spec.new.deep[\"a.b\"]", "v"), KCR_OK);
    cr_assert_eq(kcr_object_edit_set_bool(e, "spec.on", false), KCR_OK);
    cr_assert_eq(kcr_object_edit_set_null(e, "spec.ratio"), KCR_OK);
    cr_assert_eq(kcr_object_edit_set_string(e, "status.conditions[1].status", "False"), KCR_OK);
    cr_assert_eq(kcr_object_edit_set_json(e, "spec.obj", "{\"k\":[1,2.5,\"s\"]}", 17), KCR_OK);
    cr_assert_eq(kcr_object_edit_delete(e, "spec.containers"), KCR_OK);
    cr_assert_eq(kcr_object_edit_delete(e, "status.conditions[0]"), KCR_OK);
    cr_assert_eq(kcr_object_edit_delete(e, "spec.not.there"), KCR_OK);
    cr_assert_eq(kcr_object_edit_error(e), KCR_OK);

    kcr_object *o = freeze(e);
    cr_assert_eq(kcr_value_int(kcr_object_get(o, "spec.replicas")), 5);
    cr_assert_str_eq(kcr_value_string(kcr_object_get(o, "spec.new.deep[\"a.b\"]"), NULL), "v");
    cr_assert_eq(kcr_value_get_type(kcr_object_get(o, "spec.on")), KCR_VALUE_BOOL);
    cr_assert_eq(kcr_value_get_type(kcr_object_get(o, "spec.ratio")), KCR_VALUE_NULL);
    cr_assert_eq(kcr_value_float(kcr_object_get(o, "spec.obj.k[1]")), 2.5);
    cr_assert_eq(kcr_value_get_type(kcr_object_get(o, "spec.containers")), KCR_VALUE_ABSENT);
    cr_assert_str_eq(kcr_value_string(kcr_object_get(o, "status.conditions[0].type"), NULL),
                     "Scheduled");
    cr_assert_str_eq(kcr_value_string(kcr_object_get(o, "status.conditions[0].status"), NULL),
                     "False");
    cr_assert_eq(kcr_value_get_type(kcr_object_get(o, "spec.bad")), KCR_VALUE_ABSENT);
    cr_assert_str_eq(kcr_object_name(o), "web-0");

    char *after = json_of(base);
    cr_assert_str_eq(before, after, "the base object never changes");
    free(before);
    free(after);
    kcr_object_unref(o);
    kcr_object_edit_free(e);
    kcr_object_unref(base);
}

Test(object_edit, metadata_helpers)
{
    kcr_object *base = parse_str(POD_JSON);
    kcr_object_edit *e = NULL;
    cr_assert_eq(kcr_object_edit_new(base, &e), KCR_OK);
    cr_assert_eq(kcr_object_edit_set_label(e, "tier", "backend"), KCR_OK);
    cr_assert_eq(kcr_object_edit_set_label(e, "app", "api"), KCR_OK);
    cr_assert_eq(kcr_object_edit_delete_label(e, "app.kubernetes.io/name"), KCR_OK);
    cr_assert_eq(kcr_object_edit_delete_label(e, "never"), KCR_OK);
    cr_assert_eq(kcr_object_edit_set_annotation(e, "a.example.com/x", "1"), KCR_OK);
    cr_assert_eq(kcr_object_edit_delete_annotation(e, "note"), KCR_OK);
    cr_assert_eq(kcr_object_edit_add_finalizer(e, "example.com/cleanup"), KCR_OK);
    cr_assert_eq(kcr_object_edit_add_finalizer(e, "example.com/other"), KCR_OK);
    cr_assert_eq(kcr_object_edit_remove_finalizer(e, "example.com/cleanup"), KCR_OK);
    kcr_owner_ref ref = {"apps/v1", "Deployment", "web", "dep-1", true, false};
    cr_assert_eq(kcr_object_edit_set_owner_ref(e, &ref), KCR_OK);
    kcr_owner_ref replace = {"v1", "ConfigMap", "cm2", "cm-1", false, true};
    cr_assert_eq(kcr_object_edit_set_owner_ref(e, &replace), KCR_OK);
    cr_assert_eq(kcr_object_edit_remove_owner_ref(e, "rs-1"), KCR_OK);
    kcr_object *o = freeze(e);
    cr_assert_str_eq(kcr_object_label(o, "tier"), "backend");
    cr_assert_str_eq(kcr_object_label(o, "app"), "api");
    cr_assert_null(kcr_object_label(o, "app.kubernetes.io/name"));
    cr_assert_str_eq(kcr_object_annotation(o, "a.example.com/x"), "1");
    cr_assert_null(kcr_object_annotation(o, "note"));
    cr_assert_eq(kcr_object_finalizer_count(o), 1);
    cr_assert_str_eq(kcr_object_finalizer(o, 0), "example.com/other");
    cr_assert_eq(kcr_object_owner_ref_count(o), 2);
    kcr_owner_ref got;
    cr_assert(kcr_object_owner_ref(o, 0, &got));
    cr_assert_str_eq(got.name, "cm2");
    cr_assert(got.block_owner_deletion);
    cr_assert(kcr_object_controller_ref(o, &got));
    cr_assert_str_eq(got.kind, "Deployment");
    kcr_object_unref(o);
    kcr_object_edit_free(e);
    kcr_object_unref(base);
}

/* One failing edit of a fresh editor over POD_JSON: its code, and the
 * message naming the call and path. */
typedef struct failing_edit {
    const char *what;
    kcr_err want;
    const char *context; /* in kcr_last_error() */
} failing_edit;

static kcr_err run_failing(kcr_object_edit *e, int i)
{
    switch (i) {
    case 0:
        return kcr_object_edit_set_int(e, "status.conditions[7].x", 1);
    case 1:
        return kcr_object_edit_set_int(e, "spec.replicas.x", 1);
    case 2:
        return kcr_object_edit_set_int(e, "spec..x", 1);
    case 3:
        return kcr_object_edit_set_string(e, "spec.bad", "\xff");
    case 4:
        return kcr_object_edit_set_json(e, "spec.bad", "1,2", 3);
    case 5:
        return kcr_object_edit_set_json(e, "spec.bad", "{", 1);
    case 6:
        return kcr_object_edit_set_label(e, "app", NULL);
    case 7:
        return kcr_object_edit_merge_patch(e, "[", 1);
    default:
        return kcr_object_edit_json_patch(e, "[{\"op\":\"remove\",\"path\":\"/nope\"}]", 0);
    }
}

Test(object_edit, each_failure_is_kept_with_its_call_and_path)
{
    static const failing_edit cases[] = {
        {"index out of range", KCR_ERR_NOT_FOUND,
         "kcr_object_edit_set_int \"status.conditions[7].x\": "},
        {"key into a scalar", KCR_ERR_INVALID, "kcr_object_edit_set_int \"spec.replicas.x\": "},
        {"malformed path", KCR_ERR_INVALID, "kcr_object_edit_set_int \"spec..x\": "},
        {"bad UTF-8", KCR_ERR_INVALID, "kcr_object_edit_set_string \"spec.bad\": "},
        {"two JSON values", KCR_ERR_PARSE, "kcr_object_edit_set_json \"spec.bad\": "},
        {"truncated JSON", KCR_ERR_PARSE, "kcr_object_edit_set_json \"spec.bad\": "},
        {"NULL label value", KCR_ERR_INVALID, "kcr_object_edit_set_label \"app\": "},
        {"bad merge patch", KCR_ERR_PARSE, "kcr_object_edit_merge_patch: "},
        {"JSON patch on a missing path", KCR_ERR_NOT_FOUND, "kcr_object_edit_json_patch: "},
    };
    kcr_object *base = parse_str(POD_JSON);
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
        kcr_object_edit *e = NULL;
        cr_assert_eq(kcr_object_edit_new(base, &e), KCR_OK);
        cr_assert_eq(kcr_object_edit_set_int(e, "spec.before", 1), KCR_OK);
        cr_assert_eq(run_failing(e, i), cases[i].want, "%s: %s", cases[i].what, kcr_last_error());
        cr_assert(strncmp(kcr_last_error(), cases[i].context, strlen(cases[i].context)) == 0,
                  "%s: %s", cases[i].what, kcr_last_error());
        cr_assert_eq(kcr_object_edit_error(e), cases[i].want);
        kcr_object *o = (kcr_object *)base;
        cr_assert_eq(kcr_object_edit_freeze(e, &o), cases[i].want, "%s", cases[i].what);
        cr_assert_null(o);
        cr_assert(strncmp(kcr_last_error(), cases[i].context, strlen(cases[i].context)) == 0,
                  "freeze reports the failing call: %s", kcr_last_error());
        kcr_object_edit_free(e);
    }
    kcr_object_unref(base);
}

Test(object_edit, calls_after_a_failure_are_no_ops_returning_it)
{
    kcr_object *base = parse_str(POD_JSON);
    kcr_object_edit *e = NULL;
    cr_assert_eq(kcr_object_edit_new(base, &e), KCR_OK);
    /* The straight-line style: no check between calls. */
    kcr_object_edit_set_string(e, "spec.image", "nginx");
    kcr_object_edit_set_int(e, "status.conditions[9].x", 1); /* fails: NOT_FOUND */
    cr_assert_eq(kcr_object_edit_set_int(e, "spec.replicas", 7), KCR_ERR_NOT_FOUND);
    cr_assert(strstr(kcr_last_error(), "status.conditions[9].x"),
              "the first error, not a new one: %s", kcr_last_error());
    cr_assert_eq(kcr_object_edit_set_string(e, "spec.bad", "\xff"), KCR_ERR_NOT_FOUND,
                 "a second failure does not replace the first");
    cr_assert_eq(kcr_object_edit_set_label(e, "a", "b"), KCR_ERR_NOT_FOUND);
    cr_assert_eq(kcr_object_edit_add_finalizer(e, "x/y"), KCR_ERR_NOT_FOUND);
    cr_assert_eq(kcr_object_edit_delete(e, "spec"), KCR_ERR_NOT_FOUND);
    cr_assert_eq(kcr_object_edit_merge_patch(e, "{\"spec\":null}", 0), KCR_ERR_NOT_FOUND);
    cr_assert_eq(kcr_object_edit_json_patch(e, "[]", 0), KCR_ERR_NOT_FOUND);
    kcr_object *o = NULL;
    cr_assert_eq(kcr_object_edit_snapshot(e, &o), KCR_ERR_NOT_FOUND);
    cr_assert_null(o);
    cr_assert_eq(kcr_object_edit_freeze(e, &o), KCR_ERR_NOT_FOUND);
    cr_assert_null(o);
    cr_assert(strstr(kcr_last_error(), "kcr_object_edit_set_int \"status.conditions[9].x\""), "%s",
              kcr_last_error());
    kcr_object_edit_free(e);

    /* The edits after the failure really were skipped: a fresh editor with
     * the same calls minus the failing one shows what they would have done. */
    cr_assert_eq(kcr_object_edit_new(base, &e), KCR_OK);
    kcr_object_edit_set_string(e, "spec.image", "nginx");
    cr_assert_eq(kcr_object_edit_set_int(e, "spec.replicas", 7), KCR_OK);
    o = freeze(e);
    cr_assert_eq(kcr_value_int(kcr_object_get(o, "spec.replicas")), 7);
    kcr_object_unref(o);
    kcr_object_edit_free(e);
    cr_assert_eq(kcr_object_edit_error(NULL), KCR_ERR_INVALID);
    cr_assert_eq(kcr_object_edit_set_int(NULL, "a", 1), KCR_ERR_INVALID);
    kcr_object_unref(base);
}

Test(object_edit, from_scratch_and_name_required)
{
    kcr_object_edit *e = NULL;
    cr_assert_eq(kcr_object_edit_new(NULL, &e), KCR_OK);
    kcr_object *o = NULL;
    cr_assert_eq(kcr_object_edit_freeze(e, &o), KCR_ERR_PARSE);
    cr_assert_null(o);
    cr_assert_eq(kcr_object_edit_set_label(e, "a", "b"), KCR_OK);
    cr_assert_eq(kcr_object_edit_set_string(e, "metadata.name", "fresh"), KCR_OK);
    cr_assert_eq(kcr_object_edit_set_string(e, "metadata.namespace", "ns"), KCR_OK);
    o = freeze(e);
    char *s = json_of(o);
    cr_assert_str_eq(s, "{\"metadata\":{\"labels\":{\"a\":\"b\"},\"name\":\"fresh\","
                        "\"namespace\":\"ns\"}}");
    free(s);
    kcr_object_unref(o);
    kcr_object_edit_free(e);
}

Test(object_patch, compute_and_apply)
{
    kcr_object *from = parse_str(
        "{\"metadata\":{\"name\":\"a\",\"labels\":{\"x\":\"1\",\"y\":\"2\"}},\"spec\":{\"r\":1,"
        "\"list\":[1,2],\"same\":{\"k\":true}}}");
    kcr_object *to = parse_str(
        "{\"metadata\":{\"name\":\"a\",\"labels\":{\"x\":\"1\",\"z\":\"3\"}},\"spec\":{\"r\":2,"
        "\"list\":[1,2,3],\"same\":{\"k\":true},\"add\":{\"n\":null}}}");
    char *patch;
    size_t len;
    cr_assert_eq(kcr_object_merge_patch(from, to, &patch, &len), KCR_OK);
    cr_assert_str_eq(patch, "{\"metadata\":{\"labels\":{\"y\":null,\"z\":\"3\"}},\"spec\":{"
                            "\"r\":2,\"list\":[1,2,3],\"add\":{\"n\":null}}}");
    kcr_object *applied;
    cr_assert_eq(kcr_object_apply_merge_patch(from, patch, len, &applied), KCR_OK);
    /* RFC 7386 cannot add a null member: "add" arrives as {}. */
    cr_assert_eq(kcr_value_len(kcr_object_get(applied, "spec.add")), 0);
    cr_assert_str_eq(kcr_object_label(applied, "z"), "3");
    cr_assert_null(kcr_object_label(applied, "y"));
    cr_assert_eq(kcr_value_len(kcr_object_get(applied, "spec.list")), 3);
    cr_assert_eq(kcr_value_int(kcr_object_get(applied, "spec.r")), 2);
    free(patch);

    cr_assert_eq(kcr_object_merge_patch(from, from, &patch, NULL), KCR_OK);
    cr_assert_str_eq(patch, "{}");
    free(patch);
    kcr_object_unref(applied);
    kcr_object_unref(from);
    kcr_object_unref(to);
}

Test(object_patch, rfc7386_examples)
{
    kcr_object *t = parse_str("{\"metadata\":{\"name\":\"n\"},\"a\":\"b\",\"c\":{\"d\":\"e\","
                              "\"f\":\"g\"},\"s\":\"x\"}");
    const char *p = "{\"a\":\"z\",\"c\":{\"f\":null},\"s\":{\"o\":1},\"l\":[{\"q\":null}]}";
    kcr_object *r;
    cr_assert_eq(kcr_object_apply_merge_patch(t, p, strlen(p), &r), KCR_OK);
    char *s = json_of(r);
    cr_assert_str_eq(s, "{\"metadata\":{\"name\":\"n\"},\"a\":\"z\",\"c\":{\"d\":\"e\"},"
                        "\"s\":{\"o\":1},\"l\":[{\"q\":null}]}");
    free(s);
    kcr_object_unref(r);
    cr_assert_eq(kcr_object_apply_merge_patch(t, "{\"metadata\":null}", 17, &r), KCR_ERR_PARSE,
                 "result without a name");
    cr_assert_eq(kcr_object_apply_merge_patch(t, "{", 1, &r), KCR_ERR_PARSE);
    cr_assert_eq(kcr_object_apply_merge_patch(t, "[]", 2, &r), KCR_ERR_PARSE);
    kcr_object_unref(t);
}

Test(object_patch, patch_round_trip_reaches_target)
{
    kcr_object *from = parse_str(POD_JSON);
    kcr_object_edit *e = NULL;
    cr_assert_eq(kcr_object_edit_new(from, &e), KCR_OK);
    kcr_object_edit_set_label(e, "new", "yes");
    kcr_object_edit_delete(e, "spec.ratio");
    kcr_object_edit_set_int(e, "spec.containers[0].ports[0].containerPort", 8080);
    kcr_object *to = freeze(e);
    char *patch;
    size_t len;
    cr_assert_eq(kcr_object_merge_patch(from, to, &patch, &len), KCR_OK);
    kcr_object *got;
    cr_assert_eq(kcr_object_apply_merge_patch(from, patch, len, &got), KCR_OK);
    cr_assert(kcr_value_equal(kcr_object_root(got), kcr_object_root(to)), "patch: %s", patch);
    free(patch);
    kcr_object_unref(got);
    kcr_object_unref(to);
    kcr_object_edit_free(e);
    kcr_object_unref(from);
}

Test(object_transform, strip_managed_fields)
{
    kcr_object *o = parse_str(POD_JSON);
    kcr_object_transform_fn fn = kcr_object_strip_managed_fields;
    kcr_object *s = NULL;
    cr_assert_eq(fn(o, &s, NULL), KCR_OK);
    cr_assert_neq(s, o);
    cr_assert_eq(kcr_value_get_type(kcr_object_get(s, "metadata.managedFields")), KCR_VALUE_ABSENT);
    cr_assert_str_eq(kcr_object_name(s), "web-0");
    cr_assert_str_eq(kcr_object_label(s, "app"), "web");
    cr_assert_lt(kcr_object_memory_size(s), kcr_object_memory_size(o));
    kcr_object *again = NULL;
    cr_assert_eq(fn(s, &again, NULL), KCR_OK);
    cr_assert_eq(again, s, "nothing to strip: same object, new reference");
    kcr_object_unref(again);
    kcr_object_unref(s);
    kcr_object_unref(o);
}

Test(object_edit, append_json_creates_and_says_where)
{
    kcr_object *base = NULL;
    cr_assert_eq(kcr_object_parse("{\"metadata\":{\"name\":\"a\"},\"spec\":{\"xs\":[1],\"s\":\"x\","
                                  "\"n\":null}}",
                                  0, &base),
                 KCR_OK);
    kcr_object_edit *e = NULL;
    cr_assert_eq(kcr_object_edit_new(base, &e), KCR_OK);
    size_t at = 99;
    cr_assert_eq(kcr_object_edit_append_json(e, "spec.xs", "{\"k\":2}", 0, &at), KCR_OK);
    cr_assert_eq(at, 1);
    cr_assert_eq(kcr_object_edit_append_json(e, "spec.new.list", "\"v\"", 0, &at), KCR_OK);
    cr_assert_eq(at, 0, "created");
    cr_assert_eq(kcr_object_edit_append_json(e, "spec.n", "3", 0, NULL), KCR_OK, "null replaced");
    kcr_object *o = NULL;
    cr_assert_eq(kcr_object_edit_freeze(e, &o), KCR_OK);
    char *json = NULL;
    cr_assert_eq(kcr_object_to_json(o, &json, NULL), KCR_OK);
    cr_assert_str_eq(json, "{\"metadata\":{\"name\":\"a\"},\"spec\":{\"xs\":[1,{\"k\":2}],\"s\":\"x\","
                           "\"n\":[3],\"new\":{\"list\":[\"v\"]}}}");
    free(json);
    kcr_object_unref(o);
    kcr_object_edit_free(e);
    /* each refusal on an edit of its own: an edit keeps its first error */
    struct {
        const char *path, *json;
        kcr_err want;
    } refused[] = {{"spec.s", "3", KCR_ERR_INVALID},
                   {"spec.xs[5]", "3", KCR_ERR_NOT_FOUND},
                   {"spec.xs", "{bad", KCR_ERR_PARSE}};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        cr_assert_eq(kcr_object_edit_new(base, &e), KCR_OK);
        cr_assert_eq(kcr_object_edit_append_json(e, refused[i].path, refused[i].json, 0, NULL),
                     refused[i].want, "%s", refused[i].path);
        kcr_object_edit_free(e);
    }
    kcr_object_unref(base);
}
