/* Serialization: an immutable object (or a value in it) to JSON text, and
 * the one JSON writer's setup and output that edit_tree.c's walk shares
 * (object/serialize.h). */
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_gen.h>

#include "core/error.h"
#include "object/object_internal.h"
#include "object/serialize.h"

/* ---- serialization ------------------------------------------------------ */

static yajl_gen_status gen_ref(yajl_gen g, const kcr_object *o, uint32_t ref)
{
    yajl_gen_status s = yajl_gen_status_ok;
    size_t len;
    const char *str;
    switch (KCR__REF_TAG(ref)) {
    case KCR__T_SPECIAL:
        if (ref == KCR__REF_NULL)
            return yajl_gen_null(g);
        return yajl_gen_bool(g, ref == KCR__REF_TRUE);
    case KCR__T_SMALLINT:
    case KCR__T_INT64: {
        int64_t v = 0;
        kcr__ref_int(o, ref, &v);
        return yajl_gen_integer(g, (long long)v);
    }
    case KCR__T_STR:
        str = kcr__ref_str(o, ref, &len);
        return yajl_gen_string(g, (const unsigned char *)str, len);
    case KCR__T_NUM:
        str = kcr__ref_str(o, ref, &len);
        return yajl_gen_number(g, str, len);
    case KCR__T_EMPTY:
        if (ref == KCR__REF_EMPTY_MAP) {
            if ((s = yajl_gen_map_open(g)) != yajl_gen_status_ok)
                return s;
            return yajl_gen_map_close(g);
        }
        if (ref == KCR__REF_EMPTY_ARR) {
            if ((s = yajl_gen_array_open(g)) != yajl_gen_status_ok)
                return s;
            return yajl_gen_array_close(g);
        }
        return yajl_gen_string(g, (const unsigned char *)"", 0);
    case KCR__T_ARR: {
        uint32_t n = kcr__ref_count(o, ref);
        const unsigned char *p = kcr__ref_items(o, ref);
        if ((s = yajl_gen_array_open(g)) != yajl_gen_status_ok)
            return s;
        for (uint32_t i = 0; i < n; i++)
            if ((s = gen_ref(g, o, kcr__rd32(p + 4 * i))) != yajl_gen_status_ok)
                return s;
        return yajl_gen_array_close(g);
    }
    case KCR__T_MAP: {
        uint32_t n = kcr__ref_count(o, ref);
        const unsigned char *p = kcr__ref_items(o, ref);
        if ((s = yajl_gen_map_open(g)) != yajl_gen_status_ok)
            return s;
        for (uint32_t i = 0; i < n; i++, p += 8) {
            str = kcr__key_str(o, kcr__rd32(p), &len);
            if ((s = yajl_gen_string(g, (const unsigned char *)str, len)) != yajl_gen_status_ok ||
                (s = gen_ref(g, o, kcr__rd32(p + 4))) != yajl_gen_status_ok)
                return s;
        }
        return yajl_gen_map_close(g);
    }
    }
    return yajl_gen_invalid_string;
}

kcr_err kcr__gen_value(yajl_gen g, const kcr_object *o, uint32_t ref)
{
    yajl_gen_status s = gen_ref(g, o, ref);
    if (s != yajl_gen_status_ok)
        return kcr__fail(s == yajl_gen_invalid_string ? KCR_ERR_INVALID : KCR_ERR_NOMEM,
                         "serializing JSON failed (yajl_gen status %d)", (int)s);
    return KCR_OK;
}

/* The one JSON writer's setup and output (object/serialize.h). Strings were
 * checked on their way in, by the builder, the edit API or kcr__node_put_str. */
yajl_gen kcr__gen_new(void)
{
    yajl_gen g = yajl_gen_alloc(NULL);
    if (g)
        yajl_gen_config(g, yajl_gen_validate_utf8, 0);
    return g;
}

kcr_err kcr__gen_finish(yajl_gen g, kcr_err err, char **out, size_t *len)
{
    if (err == KCR_OK) {
        const unsigned char *buf;
        size_t n;
        yajl_gen_get_buf(g, &buf, &n);
        *out = malloc(n + 1);
        if (!*out) {
            err = kcr__fail(KCR_ERR_NOMEM, "out of memory serializing JSON");
        } else {
            memcpy(*out, buf, n);
            (*out)[n] = '\0';
            if (len)
                *len = n;
        }
    }
    yajl_gen_free(g);
    return err;
}

kcr_err kcr_value_to_json(kcr_value v, char **out, size_t *len)
{
    if (!out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_value_to_json: out is NULL");
    *out = NULL;
    if (!v.obj || v.ref == KCR__REF_ABSENT)
        return kcr__fail(KCR_ERR_NOT_FOUND, "kcr_value_to_json: value is absent");
    yajl_gen g = kcr__gen_new();
    if (!g)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory serializing JSON");
    return kcr__gen_finish(g, kcr__gen_value(g, v.obj, v.ref), out, len);
}

kcr_err kcr_object_to_json(const kcr_object *obj, char **out, size_t *len)
{
    if (!obj)
        return kcr__fail(KCR_ERR_INVALID, "kcr_object_to_json: obj is NULL");
    return kcr_value_to_json(kcr_object_root(obj), out, len);
}
