/* JSON Patch (RFC 6902) on objects and edits: the RFC's appendix A examples,
 * pointer escapes, atomicity, error codes and messages; and
 * kcr_object_edit_set_value (copying a subtree between objects). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcr/kcr.h"
#include "kcr/fake.h"
#include "object/edit_tree.h"
#include "unit/object_fixtures.h"

static kcr_object *doc(const char *json)
{
    kcr_object *o = NULL;
    cr_assert_eq(kcr_object_parse_any(json, strlen(json), &o), KCR_OK, "%s: %s", json,
                 kcr_last_error());
    return o;
}

/* Applies `patch` to the document `before` through an edit; returns the
 * error, and on success checks the result equals `after`. On failure the
 * editor keeps the error (snapshot returns it) and its tree still holds
 * `before` (all or nothing). */
static kcr_err patch_doc(const char *before, const char *patch, const char *after)
{
    kcr_object *b = doc(before);
    kcr_object_edit *e = NULL;
    cr_assert_eq(kcr_object_edit_new(b, &e), KCR_OK);
    kcr_err err = kcr_object_edit_json_patch(e, patch, strlen(patch));
    char msg[512];
    strncpy(msg, kcr_last_error(), sizeof msg - 1);
    msg[sizeof msg - 1] = '\0';
    kcr_object *r = NULL;
    cr_assert_eq(kcr_object_edit_snapshot(e, &r), err, "%s", kcr_last_error());
    if (err != KCR_OK) {
        cr_assert_null(r);
        cr_assert_eq(kcr__edit_freeze(e, false, &r), KCR_OK, "the tree under the kept error");
    }
    if (err == KCR_OK) {
        kcr_object *want = doc(after);
        char *got = NULL;
        kcr_object_to_json(r, &got, NULL);
        cr_assert(kcr_value_equal(kcr_object_root(r), kcr_object_root(want)),
                  "patch %s on %s gave %s, want %s", patch, before, got, after);
        free(got);
        kcr_object_unref(want);
    } else {
        cr_assert(kcr_value_equal(kcr_object_root(r), kcr_object_root(b)),
                  "a failed patch changed the edit");
        cr_assert_neq(msg[0], '\0', "a failed patch sets kcr_last_error()");
    }
    kcr_object_unref(r);
    kcr_object_edit_free(e);
    kcr_object_unref(b);
    return err;
}

Test(json_patch, rfc6902_appendix_a_successes)
{
    /* A.1 adding an object member */
    cr_assert_eq(patch_doc("{\"foo\":\"bar\"}",
                           "[{\"op\":\"add\",\"path\":\"/baz\",\"value\":\"qux\"}]",
                           "{\"baz\":\"qux\",\"foo\":\"bar\"}"),
                 KCR_OK);
    /* A.2 adding an array element */
    cr_assert_eq(patch_doc("{\"foo\":[\"bar\",\"baz\"]}",
                           "[{\"op\":\"add\",\"path\":\"/foo/1\",\"value\":\"qux\"}]",
                           "{\"foo\":[\"bar\",\"qux\",\"baz\"]}"),
                 KCR_OK);
    /* A.3 removing an object member */
    cr_assert_eq(patch_doc("{\"baz\":\"qux\",\"foo\":\"bar\"}",
                           "[{\"op\":\"remove\",\"path\":\"/baz\"}]", "{\"foo\":\"bar\"}"),
                 KCR_OK);
    /* A.4 removing an array element */
    cr_assert_eq(patch_doc("{\"foo\":[\"bar\",\"qux\",\"baz\"]}",
                           "[{\"op\":\"remove\",\"path\":\"/foo/1\"}]",
                           "{\"foo\":[\"bar\",\"baz\"]}"),
                 KCR_OK);
    /* A.5 replacing a value */
    cr_assert_eq(patch_doc("{\"baz\":\"qux\",\"foo\":\"bar\"}",
                           "[{\"op\":\"replace\",\"path\":\"/baz\",\"value\":\"boo\"}]",
                           "{\"baz\":\"boo\",\"foo\":\"bar\"}"),
                 KCR_OK);
    /* A.6 moving a value */
    cr_assert_eq(
        patch_doc("{\"foo\":{\"bar\":\"baz\",\"waldo\":\"fred\"},\"qux\":{\"corge\":\"grault\"}}",
                  "[{\"op\":\"move\",\"from\":\"/foo/waldo\",\"path\":\"/qux/thud\"}]",
                  "{\"foo\":{\"bar\":\"baz\"},\"qux\":{\"corge\":\"grault\",\"thud\":\"fred\"}}"),
        KCR_OK);
    /* A.7 moving an array element */
    cr_assert_eq(patch_doc("{\"foo\":[\"all\",\"grass\",\"cows\",\"eat\"]}",
                           "[{\"op\":\"move\",\"from\":\"/foo/1\",\"path\":\"/foo/3\"}]",
                           "{\"foo\":[\"all\",\"cows\",\"eat\",\"grass\"]}"),
                 KCR_OK);
    /* A.8 testing a value: success */
    cr_assert_eq(patch_doc("{\"baz\":\"qux\",\"foo\":[\"a\",2,\"c\"]}",
                           "[{\"op\":\"test\",\"path\":\"/baz\",\"value\":\"qux\"},"
                           "{\"op\":\"test\",\"path\":\"/foo/1\",\"value\":2}]",
                           "{\"baz\":\"qux\",\"foo\":[\"a\",2,\"c\"]}"),
                 KCR_OK);
    /* A.10 adding a nested member object */
    cr_assert_eq(patch_doc("{\"foo\":\"bar\"}",
                           "[{\"op\":\"add\",\"path\":\"/child\",\"value\":{\"grandchild\":{}}}]",
                           "{\"foo\":\"bar\",\"child\":{\"grandchild\":{}}}"),
                 KCR_OK);
    /* A.11 ignoring unrecognized elements */
    cr_assert_eq(patch_doc("{\"foo\":\"bar\"}",
                           "[{\"op\":\"add\",\"path\":\"/baz\",\"value\":\"qux\",\"xyz\":123}]",
                           "{\"foo\":\"bar\",\"baz\":\"qux\"}"),
                 KCR_OK);
    /* A.14 ~ escape ordering: "~01" is "~1", not "/" */
    cr_assert_eq(patch_doc("{\"/\":9,\"~1\":10}",
                           "[{\"op\":\"test\",\"path\":\"/~01\",\"value\":10}]",
                           "{\"/\":9,\"~1\":10}"),
                 KCR_OK);
    /* A.16 adding an array value */
    cr_assert_eq(patch_doc("{\"foo\":[\"bar\"]}",
                           "[{\"op\":\"add\",\"path\":\"/foo/-\",\"value\":[\"abc\",\"def\"]}]",
                           "{\"foo\":[\"bar\",[\"abc\",\"def\"]]}"),
                 KCR_OK);
}

Test(json_patch, rfc6902_appendix_a_errors)
{
    /* A.9 testing a value: error */
    cr_assert_eq(patch_doc("{\"baz\":\"qux\"}",
                           "[{\"op\":\"test\",\"path\":\"/baz\",\"value\":\"bar\"}]", NULL),
                 KCR_ERR_CONFLICT);
    /* A.12 adding to a nonexistent target */
    cr_assert_eq(patch_doc("{\"foo\":\"bar\"}",
                           "[{\"op\":\"add\",\"path\":\"/baz/bat\",\"value\":\"qux\"}]", NULL),
                 KCR_ERR_NOT_FOUND);
    /* A.13 invalid document: two "op" members. The parser keeps the last
     * ("remove", as Go's decoder does), and /baz does not exist: an error
     * either way, and nothing changes. */
    cr_assert_neq(
        patch_doc("{\"foo\":\"bar\"}",
                  "[{\"op\":\"add\",\"path\":\"/baz\",\"value\":\"qux\",\"op\":\"remove\"}]", NULL),
        KCR_OK);
    /* A.15 comparing strings and numbers */
    cr_assert_eq(patch_doc("{\"/\":9,\"~1\":10}",
                           "[{\"op\":\"test\",\"path\":\"/~01\",\"value\":\"10\"}]", NULL),
                 KCR_ERR_CONFLICT);
}

Test(json_patch, pointer_escapes_root_and_append)
{
    /* ~1 is '/', ~0 is '~' */
    cr_assert_eq(patch_doc("{\"a/b\":1,\"m~n\":2}",
                           "[{\"op\":\"replace\",\"path\":\"/a~1b\",\"value\":3},"
                           "{\"op\":\"remove\",\"path\":\"/m~0n\"}]",
                           "{\"a/b\":3}"),
                 KCR_OK);
    /* the empty key is "/", the whole document "" */
    cr_assert_eq(
        patch_doc("{\"\":1}", "[{\"op\":\"replace\",\"path\":\"/\",\"value\":2}]", "{\"\":2}"),
        KCR_OK);
    cr_assert_eq(patch_doc("{\"a\":1}", "[{\"op\":\"replace\",\"path\":\"\",\"value\":{\"b\":2}}]",
                           "{\"b\":2}"),
                 KCR_OK);
    /* "-" appends; an index == length appends too; one past it does not */
    cr_assert_eq(patch_doc("{\"l\":[1]}",
                           "[{\"op\":\"add\",\"path\":\"/l/-\",\"value\":2},"
                           "{\"op\":\"add\",\"path\":\"/l/2\",\"value\":3}]",
                           "{\"l\":[1,2,3]}"),
                 KCR_OK);
    cr_assert_eq(patch_doc("{\"l\":[1]}", "[{\"op\":\"add\",\"path\":\"/l/2\",\"value\":2}]", NULL),
                 KCR_ERR_NOT_FOUND);
    /* "-" names no element for remove/replace; leading zeros are not indexes */
    cr_assert_eq(patch_doc("{\"l\":[1]}", "[{\"op\":\"remove\",\"path\":\"/l/-\"}]", NULL),
                 KCR_ERR_NOT_FOUND);
    cr_assert_eq(patch_doc("{\"l\":[1,2]}", "[{\"op\":\"remove\",\"path\":\"/l/01\"}]", NULL),
                 KCR_ERR_NOT_FOUND);
    /* a bad escape or a pointer without '/' is a malformed patch */
    cr_assert_eq(patch_doc("{\"a\":1}", "[{\"op\":\"remove\",\"path\":\"/a~2\"}]", NULL),
                 KCR_ERR_PARSE);
    cr_assert_eq(patch_doc("{\"a\":1}", "[{\"op\":\"remove\",\"path\":\"a\"}]", NULL),
                 KCR_ERR_PARSE);
    /* replace keeps the member's position */
    kcr_object *o = doc("{\"metadata\":{\"name\":\"x\"},\"a\":1,\"b\":2}"), *r = NULL;
    const char *p = "[{\"op\":\"replace\",\"path\":\"/a\",\"value\":5}]";
    cr_assert_eq(kcr_object_apply_json_patch(o, p, strlen(p), &r), KCR_OK, "%s", kcr_last_error());
    char *s = NULL;
    kcr_object_to_json(r, &s, NULL);
    cr_assert_str_eq(s, "{\"metadata\":{\"name\":\"x\"},\"a\":5,\"b\":2}");
    free(s);
    kcr_object_unref(r);
    kcr_object_unref(o);
}

Test(json_patch, move_copy_and_test_semantics)
{
    /* moving onto itself is a no-op, into its own child an error */
    cr_assert_eq(patch_doc("{\"a\":{\"b\":1}}",
                           "[{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/a\"}]",
                           "{\"a\":{\"b\":1}}"),
                 KCR_OK);
    cr_assert_eq(patch_doc("{\"a\":{\"b\":1}}",
                           "[{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/a/b/c\"}]", NULL),
                 KCR_ERR_INVALID);
    /* "/a" is not a prefix of "/ab" */
    cr_assert_eq(patch_doc("{\"a\":1}", "[{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/ab\"}]",
                           "{\"ab\":1}"),
                 KCR_OK);
    /* copy is deep: changing the copy leaves the source alone */
    cr_assert_eq(patch_doc("{\"a\":{\"l\":[1]}}",
                           "[{\"op\":\"copy\",\"from\":\"/a\",\"path\":\"/b\"},"
                           "{\"op\":\"add\",\"path\":\"/b/l/-\",\"value\":2}]",
                           "{\"a\":{\"l\":[1]},\"b\":{\"l\":[1,2]}}"),
                 KCR_OK);
    cr_assert_eq(
        patch_doc("{\"a\":1}", "[{\"op\":\"copy\",\"from\":\"/x\",\"path\":\"/b\"}]", NULL),
        KCR_ERR_NOT_FOUND);
    /* test: numbers by value, objects regardless of member order */
    cr_assert_eq(
        patch_doc("{\"n\":1,\"o\":{\"x\":1,\"y\":[true,null]}}",
                  "[{\"op\":\"test\",\"path\":\"/n\",\"value\":1.0},"
                  "{\"op\":\"test\",\"path\":\"/o\",\"value\":{\"y\":[true,null],\"x\":1}}]",
                  "{\"n\":1,\"o\":{\"x\":1,\"y\":[true,null]}}"),
        KCR_OK);
    /* arrays in order */
    cr_assert_eq(
        patch_doc("{\"l\":[1,2]}", "[{\"op\":\"test\",\"path\":\"/l\",\"value\":[2,1]}]", NULL),
        KCR_ERR_CONFLICT);
    /* a missing member tests equal to null (as the apiserver), a missing parent does not */
    cr_assert_eq(patch_doc("{\"m\":{}}",
                           "[{\"op\":\"test\",\"path\":\"/m/f\",\"value\":null},"
                           "{\"op\":\"add\",\"path\":\"/m/f\",\"value\":[\"x\"]}]",
                           "{\"m\":{\"f\":[\"x\"]}}"),
                 KCR_OK);
    cr_assert_eq(patch_doc("{}", "[{\"op\":\"test\",\"path\":\"/m/f\",\"value\":null}]", NULL),
                 KCR_ERR_CONFLICT);
    cr_assert_eq(patch_doc("{\"m\":{}}", "[{\"op\":\"test\",\"path\":\"/m/f\",\"value\":1}]", NULL),
                 KCR_ERR_CONFLICT);
}

Test(json_patch, failures_are_atomic_and_say_where)
{
    kcr_object *o = parse_str(POD_JSON), *r = o;
    cr_assert_not_null(o);
    const char *p = "[{\"op\":\"add\",\"path\":\"/metadata/labels/x\",\"value\":\"1\"},"
                    "{\"op\":\"test\",\"path\":\"/metadata/finalizers\",\"value\":[]}]";
    cr_assert_eq(kcr_object_apply_json_patch(o, p, strlen(p), &r), KCR_ERR_CONFLICT);
    cr_assert_null(r);
    cr_assert(strstr(kcr_last_error(), "operation 1 (test /metadata/finalizers)") != NULL, "%s",
              kcr_last_error());
    cr_assert(strstr(kcr_last_error(), "differs") != NULL, "%s", kcr_last_error());
    cr_assert_null(kcr_object_label(o, "x"), "the object is immutable");

    /* the same through an edit: the editor keeps the error, and the first
     * op's change is rolled back in its tree */
    kcr_object_edit *e = NULL;
    cr_assert_eq(kcr_object_edit_new(o, &e), KCR_OK);
    cr_assert_eq(kcr_object_edit_json_patch(e, p, strlen(p)), KCR_ERR_CONFLICT);
    cr_assert_eq(kcr_object_edit_freeze(e, &r), KCR_ERR_CONFLICT);
    cr_assert_null(r);
    cr_assert_eq(kcr__edit_freeze(e, true, &r), KCR_OK);
    cr_assert_null(kcr_object_label(r, "x"));
    kcr_object_unref(r);
    kcr_object_edit_free(e);

    /* removing metadata.name leaves no object */
    p = "[{\"op\":\"remove\",\"path\":\"/metadata/name\"}]";
    cr_assert_eq(kcr_object_apply_json_patch(o, p, strlen(p), &r), KCR_ERR_PARSE);
    /* the document must stay an object */
    p = "[{\"op\":\"replace\",\"path\":\"\",\"value\":[1]}]";
    cr_assert_eq(kcr_object_apply_json_patch(o, p, strlen(p), &r), KCR_ERR_INVALID);
    p = "[{\"op\":\"remove\",\"path\":\"\"}]";
    cr_assert_eq(kcr_object_apply_json_patch(o, p, strlen(p), &r), KCR_ERR_INVALID);

    /* a success: the finalizer guard pattern of the controller helpers */
    p = "[{\"op\":\"test\",\"path\":\"/metadata/finalizers/0\",\"value\":\"example.com/cleanup\"},"
        "{\"op\":\"remove\",\"path\":\"/metadata/finalizers/0\"},"
        "{\"op\":\"replace\",\"path\":\"/spec/replicas\",\"value\":3}]";
    cr_assert_eq(kcr_object_apply_json_patch(o, p, strlen(p), &r), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_object_finalizer_count(r), 0);
    cr_assert_eq(kcr_value_int(kcr_object_get(r, "spec.replicas")), 3);
    cr_assert_str_eq(kcr_object_name(r), "web-0");
    kcr_object_unref(r);
    kcr_object_unref(o);
}

Test(json_patch, malformed_documents)
{
    kcr_object *o = parse_str(POD_JSON), *r = NULL;
    const char *bad[] = {
        "",
        "{}",
        "[1]",
        "[{\"path\":\"/a\"}]",
        "[{\"op\":\"add\",\"value\":1}]",
        "[{\"op\":\"add\",\"path\":\"/a\"}]",
        "[{\"op\":\"replace\",\"path\":\"/a\"}]",
        "[{\"op\":\"test\",\"path\":\"/a\"}]",
        "[{\"op\":\"move\",\"path\":\"/a\"}]",
        "[{\"op\":\"copy\",\"path\":\"/a\",\"from\":1}]",
        "[{\"op\":\"frob\",\"path\":\"/a\"}]",
        "[{\"op\":7,\"path\":\"/a\"}]",
        "[] , \"x\": 1",
        "[{\"op\":\"add\",\"path\":\"/a\",\"value\":1}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cr_assert_eq(kcr_object_apply_json_patch(o, bad[i], strlen(bad[i]), &r), KCR_ERR_PARSE,
                     "patch %s", bad[i]);
        cr_assert_null(r);
        cr_assert_neq(kcr_last_error()[0], '\0');
    }
    cr_assert_eq(kcr_object_apply_json_patch(NULL, "[]", 2, &r), KCR_ERR_INVALID);
    cr_assert_eq(kcr_object_apply_json_patch(o, NULL, 0, &r), KCR_ERR_INVALID);
    /* an empty patch is a copy */
    cr_assert_eq(kcr_object_apply_json_patch(o, "[]", 2, &r), KCR_OK);
    cr_assert(kcr_value_equal(kcr_object_root(o), kcr_object_root(r)));
    kcr_object_unref(r);
    /* doubling the document with copies stops at the size limit */
    char big[4096] = "[";
    for (int i = 0; i < 40; i++) /* each copy adds the whole spec under a new key */
        snprintf(big + strlen(big), sizeof big - strlen(big),
                 "%s{\"op\":\"copy\",\"from\":\"/spec\",\"path\":\"/spec/x%d\"}", i ? "," : "", i);
    strcat(big, "]");
    cr_assert_eq(kcr_object_apply_json_patch(o, big, strlen(big), &r), KCR_ERR_TOO_LARGE);
    kcr_object_unref(o);
}

/* {"metadata":{"name":"d"},"a":<n nested arrays>} */
static kcr_object *nested(int n)
{
    char buf[1024] = "{\"metadata\":{\"name\":\"d\"},\"a\":";
    for (int i = 0; i < n; i++)
        strcat(buf, "[");
    for (int i = 0; i < n; i++)
        strcat(buf, "]");
    strcat(buf, "}");
    kcr_object *o = NULL;
    kcr_err err = kcr_object_parse(buf, strlen(buf), &o);
    return err == KCR_OK ? o : NULL;
}

Test(json_patch, nesting_stays_within_the_object_limit)
{
    /* the parser takes 256 levels of containers (root included), not 257 */
    kcr_object *deepest = nested(255), *r = NULL;
    cr_assert_not_null(deepest, "%s", kcr_last_error());
    cr_assert_null(nested(256));
    /* moving the deepest array one level down, or copying the whole
     * document into itself, would exceed it */
    const char *p = "[{\"op\":\"add\",\"path\":\"/b\",\"value\":{}},"
                    "{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/b/a\"}]";
    cr_assert_eq(kcr_object_apply_json_patch(deepest, p, strlen(p), &r), KCR_ERR_TOO_LARGE);
    cr_assert(strstr(kcr_last_error(), "deeper than 256"), "%s", kcr_last_error());
    p = "[{\"op\":\"copy\",\"from\":\"\",\"path\":\"/a/0\"}]";
    cr_assert_eq(kcr_object_apply_json_patch(deepest, p, strlen(p), &r), KCR_ERR_TOO_LARGE);
    p = "[{\"op\":\"replace\",\"path\":\"/metadata/x\",\"value\":0}]";
    cr_assert_eq(kcr_object_apply_json_patch(deepest, p, strlen(p), &r), KCR_ERR_NOT_FOUND);
    /* up to the limit is fine, and freezes */
    p = "[{\"op\":\"move\",\"from\":\"/a/0\",\"path\":\"/b\"},"
        "{\"op\":\"add\",\"path\":\"/c\",\"value\":{}},"
        "{\"op\":\"move\",\"from\":\"/b\",\"path\":\"/c/b\"}]";
    cr_assert_eq(kcr_object_apply_json_patch(deepest, p, strlen(p), &r), KCR_OK, "%s",
                 kcr_last_error());
    kcr_object_unref(r);
    kcr_object_unref(deepest);
}

Test(object_edit_value, copies_a_subtree_between_objects)
{
    kcr_object *src = parse_str(POD_JSON);
    kcr_object *dst = parse_str("{\"metadata\":{\"name\":\"copy\"},\"spec\":{\"keep\":1}}");
    kcr_object_edit *e = NULL;
    cr_assert_eq(kcr_object_edit_new(dst, &e), KCR_OK);
    cr_assert_eq(kcr_object_edit_set_value(e, "spec.template", kcr_object_get(src, "spec")), KCR_OK,
                 "%s", kcr_last_error());
    cr_assert_eq(kcr_object_edit_set_value(e, "metadata.labels", kcr_object_labels(src)), KCR_OK);
    cr_assert_eq(
        kcr_object_edit_set_value(e, "first", kcr_object_get(src, "spec.containers[0].image")),
        KCR_OK);
    kcr_object *r = NULL;
    cr_assert_eq(kcr_object_edit_freeze(e, &r), KCR_OK);
    cr_assert_eq(kcr_object_edit_set_value(e, "missing", kcr_object_get(src, "spec.nope")),
                 KCR_ERR_INVALID);
    kcr_object_edit_free(e);
    kcr_object_unref(dst);
    /* the copy is independent of the source object */
    kcr_object_unref(src);
    src = parse_str(POD_JSON);
    cr_assert(kcr_value_equal(kcr_object_get(r, "spec.template"), kcr_object_get(src, "spec")));
    /* numbers keep their kind and text (big ints, floats, huge) */
    cr_assert_eq(kcr_value_get_type(kcr_object_get(r, "spec.template.ratio")), KCR_VALUE_FLOAT);
    cr_assert_str_eq(kcr_value_string(kcr_object_get(r, "spec.template.huge"), NULL),
                     "123456789012345678901234567890");
    cr_assert_eq(kcr_value_int(kcr_object_get(r, "spec.template.big")), 12345678901234);
    cr_assert_str_eq(kcr_object_label(r, "app.kubernetes.io/name"), "frontend");
    cr_assert_str_eq(kcr_value_string(kcr_object_get(r, "first"), NULL), "nginx");
    cr_assert_eq(kcr_value_int(kcr_object_get(r, "spec.keep")), 1);
    kcr_object_unref(r);
    kcr_object_unref(src);
}

Test(object_edit_value, snapshot_reads_a_nameless_edit)
{
    kcr_object_edit *e = NULL;
    cr_assert_eq(kcr_object_edit_new(NULL, &e), KCR_OK);
    cr_assert_eq(kcr_object_edit_set_int(e, "spec.n", 2), KCR_OK);
    kcr_object *s = NULL;
    cr_assert_eq(kcr_object_edit_freeze(e, &s), KCR_ERR_PARSE);
    cr_assert_eq(kcr_object_edit_snapshot(e, &s), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_value_int(kcr_object_get(s, "spec.n")), 2);
    kcr_object_unref(s);
    kcr_object_edit_free(e);
}

Test(json_patch, the_fake_applies_it_like_the_apiserver)
{
    static const kcr_resource CM = {"", "v1", "configmaps"};
    kcr_fake *f;
    kcr_client *c;
    cr_assert_eq(kcr_fake_new(NULL, &f), KCR_OK);
    cr_assert_eq(kcr_fake_client(f, NULL, &c), KCR_OK);
    kcr_object *o = NULL;
    cr_assert_eq(
        kcr_fake_add(f, &CM,
                     "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
                     "\"p\",\"namespace\":\"d\",\"finalizers\":[\"a/x\",\"b/y\"]},"
                     "\"data\":{\"k\":\"1\"}}",
                     &o),
        KCR_OK, "%s", kcr_last_error());
    char rv[32];
    snprintf(rv, sizeof rv, "%s", kcr_object_resource_version(o));
    kcr_object_unref(o);

    /* a guarded removal and a move, in one request */
    const char *p = "[{\"op\":\"test\",\"path\":\"/metadata/finalizers/1\",\"value\":\"b/y\"},"
                    "{\"op\":\"remove\",\"path\":\"/metadata/finalizers/1\"},"
                    "{\"op\":\"move\",\"from\":\"/data/k\",\"path\":\"/data/m\"}]";
    cr_assert_eq(
        kcr_client_patch(c, &(kcr_request){.resource = &CM, .ns = "d", .name = "p", .body = p}, &o),
        KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_object_finalizer_count(o), 1);
    cr_assert_str_eq(kcr_value_string(kcr_object_get(o, "data.m"), NULL), "1");
    snprintf(rv, sizeof rv, "%s", kcr_object_resource_version(o));
    kcr_object_unref(o);

    /* a failed test: 422 Invalid with the apiserver's words, nothing written */
    kcr_status st = {0};
    p = "[{\"op\":\"remove\",\"path\":\"/data/m\"},"
        "{\"op\":\"test\",\"path\":\"/metadata/finalizers/0\",\"value\":\"b/y\"}]";
    cr_assert_eq(
        kcr_client_patch(
            c, &(kcr_request){.resource = &CM, .ns = "d", .name = "p", .body = p, .status = &st},
            &o),
        KCR_ERR_INVALID_OBJECT);
    cr_assert_eq(st.code, 422);
    cr_assert_str_eq(st.reason, "Invalid");
    cr_assert_str_eq(st.message, "the server rejected our request due to an error in our request");
    kcr_status_clear(&st);
    cr_assert_eq(kcr_client_get(c, &(kcr_request){.resource = &CM, .ns = "d", .name = "p"}, &o),
                 KCR_OK);
    cr_assert_str_eq(kcr_object_resource_version(o), rv, "a failed patch writes nothing");
    cr_assert_str_eq(kcr_value_string(kcr_object_get(o, "data.m"), NULL), "1");
    kcr_object_unref(o);

    /* not an array: 400 BadRequest, as the apiserver's patch decoder */
    cr_assert_eq(
        kcr_client_patch(
            c, &(kcr_request){.resource = &CM, .ns = "d", .name = "p", .body = "{}", .status = &st},
            NULL),
        KCR_ERR_BAD_REQUEST);
    cr_assert_eq(st.code, 400);
    kcr_status_clear(&st);
    kcr_client_free(c);
    kcr_fake_free(f);
}

Test(json_patch, length_zero_means_nul_terminated)
{
    kcr_object *o = parse_str(POD_JSON), *r = NULL;
    cr_assert_eq(kcr_object_apply_json_patch(
                     o, "[{\"op\":\"replace\",\"path\":\"/spec/replicas\",\"value\":9}]", 0, &r),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_value_int(kcr_object_get(r, "spec.replicas")), 9);
    kcr_object_unref(r);
    kcr_object_edit *e = NULL;
    cr_assert_eq(kcr_object_edit_new(o, &e), KCR_OK);
    cr_assert_eq(kcr_object_edit_json_patch(e, "[{\"op\":\"remove\",\"path\":\"/spec\"}]", 0),
                 KCR_OK);
    cr_assert_eq(kcr_object_edit_json_patch(e, "", 0), KCR_ERR_PARSE);
    kcr_object_edit_free(e);
    kcr_object_unref(o);
}
