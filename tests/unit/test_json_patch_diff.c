/* kcr_object_json_patch_diff: the exact operations for each kind of change
 * (added, removed, replaced members; arrays of equal and of different
 * length; type changes; keys needing ~0/~1 escapes; equal documents), and
 * the round trip: the patch applied to `from` gives `to`. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcr/kcr.h"

static kcr_object *doc(const char *json)
{
    kcr_object *o = NULL;
    cr_assert_eq(kcr_object_parse_any(json, strlen(json), &o), KCR_OK, "%s: %s", json,
                 kcr_last_error());
    return o;
}

/* Diffs from -> to, checks the patch text is `want` and that applying it
 * to `from` yields `to`. */
static void diff_is(const char *from, const char *to, const char *want)
{
    kcr_object *a = doc(from), *b = doc(to), *applied = NULL;
    char *patch = NULL;
    size_t len = 0;
    cr_assert_eq(kcr_object_json_patch_diff(a, b, &patch, &len), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(len, strlen(patch));
    cr_assert_str_eq(patch, want, "diff %s -> %s", from, to);
    kcr_object_edit *e = NULL; /* an edit: these documents need no metadata.name */
    cr_assert_eq(kcr_object_edit_new(a, &e), KCR_OK);
    cr_assert_eq(kcr_object_edit_json_patch(e, patch, len), KCR_OK, "%s: %s", patch,
                 kcr_last_error());
    cr_assert_eq(kcr_object_edit_snapshot(e, &applied), KCR_OK);
    kcr_object_edit_free(e);
    cr_assert(kcr_value_equal(kcr_object_root(applied), kcr_object_root(b)), "%s on %s", patch,
              from);
    free(patch);
    kcr_object_unref(applied);
    kcr_object_unref(a);
    kcr_object_unref(b);
}

Test(json_patch_diff, equal_documents_give_an_empty_patch)
{
    diff_is("{\"metadata\":{\"name\":\"a\"},\"spec\":{\"x\":[1,{\"y\":null}]}}",
            "{\"metadata\":{\"name\":\"a\"},\"spec\":{\"x\":[1,{\"y\":null}]}}", "[]");
}

Test(json_patch_diff, members_added_removed_and_replaced_at_their_own_path)
{
    diff_is("{\"metadata\":{\"name\":\"a\"},\"spec\":{\"keep\":1,\"drop\":true,\"change\":\"x\"}}",
            "{\"metadata\":{\"name\":\"a\",\"labels\":{\"l\":\"v\"}},"
            "\"spec\":{\"keep\":1,\"change\":\"y\",\"replicas\":1}}",
            "[{\"op\":\"add\",\"path\":\"/metadata/labels\",\"value\":{\"l\":\"v\"}},"
            "{\"op\":\"remove\",\"path\":\"/spec/drop\"},"
            "{\"op\":\"replace\",\"path\":\"/spec/change\",\"value\":\"y\"},"
            "{\"op\":\"add\",\"path\":\"/spec/replicas\",\"value\":1}]");
}

Test(json_patch_diff, arrays_of_equal_length_are_compared_element_by_element)
{
    diff_is("{\"a\":[1,{\"b\":2},3]}", "{\"a\":[1,{\"b\":5},3]}",
            "[{\"op\":\"replace\",\"path\":\"/a/1/b\",\"value\":5}]");
}

Test(json_patch_diff, arrays_whose_length_changed_are_replaced_whole)
{
    diff_is("{\"a\":[1,2,3]}", "{\"a\":[1,2]}",
            "[{\"op\":\"replace\",\"path\":\"/a\",\"value\":[1,2]}]");
    diff_is("{\"a\":[]}", "{\"a\":[\"x\"]}",
            "[{\"op\":\"replace\",\"path\":\"/a\",\"value\":[\"x\"]}]");
}

Test(json_patch_diff, type_changes_and_null_are_replacements)
{
    diff_is("{\"a\":1,\"b\":{\"c\":1},\"d\":null,\"e\":1}",
            "{\"a\":\"1\",\"b\":[1],\"d\":false,\"e\":1.5}",
            "[{\"op\":\"replace\",\"path\":\"/a\",\"value\":\"1\"},"
            "{\"op\":\"replace\",\"path\":\"/b\",\"value\":[1]},"
            "{\"op\":\"replace\",\"path\":\"/d\",\"value\":false},"
            "{\"op\":\"replace\",\"path\":\"/e\",\"value\":1.5}]");
}

Test(json_patch_diff, keys_with_slash_and_tilde_are_escaped)
{
    diff_is("{\"metadata\":{\"annotations\":{\"a/b\":\"1\",\"c~d\":\"1\"}}}",
            "{\"metadata\":{\"annotations\":{\"a/b\":\"2\",\"c~d\":\"2\",\"~/\":\"3\"}}}",
            "[{\"op\":\"replace\",\"path\":\"/metadata/annotations/a~1b\",\"value\":\"2\"},"
            "{\"op\":\"replace\",\"path\":\"/metadata/annotations/c~0d\",\"value\":\"2\"},"
            "{\"op\":\"add\",\"path\":\"/metadata/annotations/~0~1\",\"value\":\"3\"}]");
}

Test(json_patch_diff, bad_arguments_are_refused)
{
    kcr_object *a = doc("{}");
    char *out = NULL;
    cr_assert_eq(kcr_object_json_patch_diff(a, NULL, &out, NULL), KCR_ERR_INVALID);
    cr_assert_null(out);
    cr_assert_eq(kcr_object_json_patch_diff(a, a, NULL, NULL), KCR_ERR_INVALID);
    kcr_object_unref(a);
}
