/* Writing side of the generated accessors (kcr/typed.h): edit views are an
 * edit plus a path; every set builds the full path on the stack and goes
 * through the kcr_object_edit API, so the edit keeps its usual rules. */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "kcr/typed.h"
#include "typed/typed_path.h"

kcr_typed_at kcr_typed_at_root(kcr_object_edit *edit)
{
    kcr_typed_at at;
    at.edit = edit;
    at.err = edit ? KCR_OK : KCR_ERR_INVALID;
    at.len = 0;
    at.path[0] = '\0';
    return at;
}

kcr_typed_at kcr_typed_at_key(const kcr_typed_at *at, const char *key)
{
    kcr_typed_at r = *at;
    size_t len = r.len;
    if (r.err == KCR_OK && !kcr__typed_path_key(r.path, &len, sizeof r.path, key))
        r.err = kcr__fail(KCR_ERR_TOO_LARGE, "typed edit: path %s.%s is over %d bytes", at->path,
                          key, KCR_TYPED_PATH_MAX);
    r.len = (uint16_t)len;
    return r;
}

kcr_typed_at kcr_typed_at_index(const kcr_typed_at *at, size_t i)
{
    kcr_typed_at r = *at;
    if (r.err != KCR_OK)
        return r;
    int n = snprintf(r.path + r.len, sizeof r.path - r.len, "[%zu]", i);
    if (n < 0 || (size_t)n >= sizeof r.path - r.len)
        r.err = kcr__fail(KCR_ERR_TOO_LARGE, "typed edit: path %s[%zu] is over %d bytes",
                          at->path, i, KCR_TYPED_PATH_MAX);
    else
        r.len = (uint16_t)(r.len + n);
    return r;
}

kcr_typed_at kcr_typed_at_entry(const kcr_typed_at *at, const char *key, const char *mkey)
{
    kcr_typed_at map = kcr_typed_at_key(at, key);
    return kcr_typed_at_key(&map, mkey);
}

/* The full path of at.key (key NULL: at) in `path`, or the view's error. */
static kcr_err full_path(const kcr_typed_at *at, const char *key, char *path)
{
    if (at->err != KCR_OK)
        return at->err == KCR_ERR_INVALID && !at->edit
                   ? kcr__fail(KCR_ERR_INVALID, "typed edit: no edit")
                   : at->err;
    memcpy(path, at->path, (size_t)at->len + 1);
    size_t len = at->len;
    if (key && !kcr__typed_path_key(path, &len, KCR_TYPED_PATH_MAX, key))
        return kcr__fail(KCR_ERR_TOO_LARGE, "typed edit: path %s.%s is over %d bytes", at->path,
                         key, KCR_TYPED_PATH_MAX);
    if (len == 0)
        return kcr__fail(KCR_ERR_INVALID, "typed edit: cannot replace the whole object");
    return KCR_OK;
}

kcr_typed_at kcr_typed_append_object(const kcr_typed_at *at, const char *key)
{
    char path[KCR_TYPED_PATH_MAX];
    size_t index = 0;
    kcr_typed_at r = *at;
    r.err = full_path(at, key, path);
    if (r.err == KCR_OK)
        r.err = kcr_object_edit_append_json(at->edit, path, "{}", 2, &index);
    if (r.err == KCR_OK)
        r = kcr_typed_at_key(at, key);
    return r.err == KCR_OK ? kcr_typed_at_index(&r, index) : r;
}

kcr_err kcr_typed_set_string(const kcr_typed_at *at, const char *key, const char *v)
{
    char path[KCR_TYPED_PATH_MAX];
    kcr_err err = full_path(at, key, path);
    return err ? err : kcr_object_edit_set_string(at->edit, path, v);
}

kcr_err kcr_typed_set_int(const kcr_typed_at *at, const char *key, int64_t v)
{
    char path[KCR_TYPED_PATH_MAX];
    kcr_err err = full_path(at, key, path);
    return err ? err : kcr_object_edit_set_int(at->edit, path, v);
}

kcr_err kcr_typed_set_bool(const kcr_typed_at *at, const char *key, bool v)
{
    char path[KCR_TYPED_PATH_MAX];
    kcr_err err = full_path(at, key, path);
    return err ? err : kcr_object_edit_set_bool(at->edit, path, v);
}

kcr_err kcr_typed_set_number(const kcr_typed_at *at, const char *key, double v)
{
    char path[KCR_TYPED_PATH_MAX], text[32];
    kcr_err err = full_path(at, key, path);
    if (err)
        return err;
    if (v != v || v - v != 0)
        return kcr__fail(KCR_ERR_INVALID, "typed edit: %s: JSON has no NaN or infinity", path);
    int n = snprintf(text, sizeof text, "%.17g", v);
    return kcr_object_edit_set_json(at->edit, path, text, (size_t)n);
}

kcr_err kcr_typed_set_int_or_string(const kcr_typed_at *at, const char *key, kcr_int_or_string v)
{
    return v.is_string ? kcr_typed_set_string(at, key, v.string_value)
                       : kcr_typed_set_int(at, key, v.int_value);
}

kcr_err kcr_typed_set_quantity(const kcr_typed_at *at, const char *key, kcr_quantity q)
{
    char text[KCR_QUANTITY_TEXT_MAX];
    kcr_quantity_to_string(&q, text, sizeof text);
    return kcr_typed_set_string(at, key, text);
}

kcr_err kcr_typed_set_quantity_text(const kcr_typed_at *at, const char *key, const char *text)
{
    kcr_quantity q;
    kcr_err err = kcr_quantity_parse_str(text, &q);
    return err ? err : kcr_typed_set_quantity(at, key, q);
}

kcr_err kcr_typed_set_value(const kcr_typed_at *at, const char *key, kcr_value v)
{
    char path[KCR_TYPED_PATH_MAX];
    kcr_err err = full_path(at, key, path);
    return err ? err : kcr_object_edit_set_value(at->edit, path, v);
}

kcr_err kcr_typed_delete(const kcr_typed_at *at, const char *key)
{
    char path[KCR_TYPED_PATH_MAX];
    kcr_err err = full_path(at, key, path);
    return err ? err : kcr_object_edit_delete(at->edit, path);
}

kcr_err kcr_typed_append_string(const kcr_typed_at *at, const char *key, const char *v)
{
    size_t index;
    char path[KCR_TYPED_PATH_MAX];
    kcr_err err = full_path(at, key, path);
    if (err == KCR_OK)
        err = kcr_object_edit_append_json(at->edit, path, "null", 4, &index);
    if (err == KCR_OK) {
        kcr_typed_at arr = kcr_typed_at_key(at, key);
        kcr_typed_at el = kcr_typed_at_index(&arr, index);
        err = kcr_typed_set_string(&el, NULL, v);
        if (err != KCR_OK) /* a bad string must not leave the null behind */
            kcr_typed_delete(&el, NULL);
    }
    return err;
}

kcr_err kcr_typed_append_int(const kcr_typed_at *at, const char *key, int64_t v)
{
    char path[KCR_TYPED_PATH_MAX], text[24];
    kcr_err err = full_path(at, key, path);
    int n = snprintf(text, sizeof text, "%lld", (long long)v);
    return err ? err : kcr_object_edit_append_json(at->edit, path, text, (size_t)n, NULL);
}
