/* Object model: every kind of bad input gives KCR_ERR_PARSE (or TOO_LARGE)
 * with a message saying what and where, never a crash. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcr/kcr.h"

static void expect_error(const char *json, size_t len, kcr_err want, const char *needle)
{
    kcr_object *o = (kcr_object *)0x1;
    kcr_err err = kcr_object_parse(json, len, &o);
    cr_assert_eq(err, want, "input %.40s: got %d (%s)", json, err, kcr_last_error());
    cr_assert_null(o);
    cr_assert(strstr(kcr_last_error(), needle) != NULL, "message \"%s\" lacks \"%s\"",
              kcr_last_error(), needle);
}

static void expect_str_error(const char *json, const char *needle)
{
    expect_error(json, strlen(json), KCR_ERR_PARSE, needle);
}

Test(object_errors, invalid_json_says_where)
{
    expect_str_error("{\"metadata\":{\"name\":\"x\"},}", "at byte");
    expect_str_error("{\"metadata\" {", "invalid JSON");
    expect_str_error("{'a':1}", "invalid JSON");
    expect_str_error("{\"a\":tru}", "invalid JSON");
    expect_str_error("{\"a\":01}", "invalid JSON");
}

Test(object_errors, top_level_not_an_object)
{
    expect_str_error("[1,2]", "top level is not an object");
    expect_str_error("\"str\"", "top level is not an object");
    expect_str_error("42", "top level is not an object");
    expect_str_error("null", "top level is not an object");
}

Test(object_errors, missing_or_bad_name)
{
    expect_str_error("{}", "no metadata");
    expect_str_error("{\"metadata\":{}}", "metadata.name");
    expect_str_error("{\"metadata\":{\"name\":\"\"}}", "metadata.name");
    expect_str_error("{\"metadata\":{\"name\":7}}", "metadata.name");
    expect_str_error("{\"metadata\":[]}", "metadata");
}

Test(object_errors, empty_and_truncated_input)
{
    expect_error("", 0, KCR_ERR_PARSE, "invalid JSON");
    expect_str_error("   ", "invalid JSON");
    const char *full = "{\"metadata\":{\"name\":\"abc\"},\"spec\":{\"x\":[1,2,3]}}";
    for (size_t cut = 1; cut < strlen(full); cut++)
        expect_error(full, cut, KCR_ERR_PARSE, "JSON");
}

Test(object_errors, trailing_garbage)
{
    expect_str_error("{\"metadata\":{\"name\":\"a\"}} x", "invalid JSON");
    expect_str_error("{\"metadata\":{\"name\":\"a\"}}{}", "invalid JSON");
}

Test(object_errors, nesting_too_deep)
{
    size_t depth = 300;
    char *json = malloc(depth * 6 + 64);
    size_t n = (size_t)sprintf(json, "{\"metadata\":{\"name\":\"a\"},\"x\":");
    for (size_t i = 0; i < depth; i++)
        n += (size_t)sprintf(json + n, "[");
    for (size_t i = 0; i < depth; i++)
        n += (size_t)sprintf(json + n, "]");
    sprintf(json + n, "}");
    expect_error(json, strlen(json), KCR_ERR_PARSE, "nesting deeper than 256 levels");
    cr_assert(strstr(kcr_last_error(), "at byte") != NULL, "%s", kcr_last_error());
    free(json);

    /* 256 levels is still fine. */
    json = malloc(256 * 8 + 64);
    n = (size_t)sprintf(json, "{\"metadata\":{\"name\":\"a\"},\"x\":");
    for (size_t i = 0; i < 254; i++)
        n += (size_t)sprintf(json + n, "[");
    for (size_t i = 0; i < 254; i++)
        n += (size_t)sprintf(json + n, "]");
    sprintf(json + n, "}");
    kcr_object *o;
    cr_assert_eq(kcr_object_parse(json, strlen(json), &o), KCR_OK, "%s", kcr_last_error());
    kcr_object_unref(o);
    free(json);
}

Test(object_errors, huge_numbers)
{
    expect_str_error("{\"metadata\":{\"name\":\"a\"},\"x\":1e999}", "out of range");
    expect_str_error("{\"metadata\":{\"name\":\"a\"},\"x\":-1e400}", "out of range");
    char json[256];
    char digits[101];
    memset(digits, '9', 100);
    digits[100] = '\0';
    snprintf(json, sizeof json, "{\"metadata\":{\"name\":\"a\"},\"x\":%s.5}", digits);
    expect_str_error(json, "number too long");
}

Test(object_errors, invalid_utf8)
{
    expect_str_error("{\"metadata\":{\"name\":\"a\xff\"}}", "string is not valid UTF-8");
    expect_str_error("{\"metadata\":{\"name\":\"a\"},\"\xc3\x28\":1}", "key is not valid UTF-8");
    /* overlong, surrogate, above U+10FFFF: the same validator as the edit API */
    expect_str_error("{\"metadata\":{\"name\":\"\xc0\xaf\"}}", "not valid UTF-8");
    expect_str_error("{\"metadata\":{\"name\":\"\xed\xa0\x80\"}}", "not valid UTF-8");
    expect_str_error("{\"metadata\":{\"name\":\"\xf4\x90\x80\x80\"}}", "not valid UTF-8");
}

Test(object_errors, embedded_nul_bytes_in_input)
{
    const char json[] = "{\"metadata\":{\"name\":\"a\0b\"}}";
    expect_error(json, sizeof json - 1, KCR_ERR_PARSE, "invalid JSON");
}

Test(object_errors, null_arguments)
{
    kcr_object *o;
    cr_assert_eq(kcr_object_parse(NULL, 3, &o), KCR_ERR_INVALID);
    cr_assert_eq(kcr_object_parse("{}", 2, NULL), KCR_ERR_INVALID);
    cr_assert_eq(kcr_object_parse(NULL, 0, &o), KCR_ERR_INVALID);
    cr_assert_null(o);
    char *s;
    cr_assert_eq(kcr_object_to_json(NULL, &s, NULL), KCR_ERR_INVALID);
}

Test(object_errors, length_zero_means_strlen)
{
    kcr_object *o = NULL;
    cr_assert_eq(kcr_object_parse("{\"metadata\":{\"name\":\"a\"}}", 0, &o), KCR_OK, "%s",
                 kcr_last_error());
    cr_assert_str_eq(kcr_object_name(o), "a");
    kcr_object_unref(o);
    cr_assert_eq(kcr_object_parse_any("{\"kind\":\"Status\"}", 0, &o), KCR_OK, "%s",
                 kcr_last_error());
    cr_assert_str_eq(kcr_object_kind(o), "Status");
    kcr_object_unref(o);
    cr_assert_eq(kcr_object_parse("", 0, &o), KCR_ERR_PARSE, "an empty string is no object");
    cr_assert_null(o);
    /* a length still bounds the input: the rest of the buffer is not read */
    cr_assert_eq(kcr_object_parse("{\"metadata\":{\"name\":\"b\"}}trailing", 25, &o), KCR_OK, "%s",
                 kcr_last_error());
    cr_assert_str_eq(kcr_object_name(o), "b");
    /* the editing calls that take JSON text agree */
    kcr_object_edit *e = NULL;
    cr_assert_eq(kcr_object_edit_new(o, &e), KCR_OK);
    cr_assert_eq(kcr_object_edit_set_json(e, "data", "{\"k\":\"v\"}", 0), KCR_OK, "%s",
                 kcr_last_error());
    cr_assert_eq(kcr_object_edit_merge_patch(e, "{\"data\":{\"x\":\"y\"}}", 0), KCR_OK, "%s",
                 kcr_last_error());
    kcr_object *edited = NULL;
    cr_assert_eq(kcr_object_edit_freeze(e, &edited), KCR_OK);
    kcr_object_edit_free(e);
    cr_assert_str_eq(kcr_value_string(kcr_object_get(edited, "data.k"), NULL), "v");
    cr_assert_str_eq(kcr_value_string(kcr_object_get(edited, "data.x"), NULL), "y");
    kcr_object_unref(edited);
    kcr_object_unref(o);
}
