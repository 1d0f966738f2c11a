/* kcr_value views and the path syntax of kcr_object_lookup. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "object/object_internal.h"
#include "object/value.h"

static kcr_value view(const kcr_object *o, uint32_t ref)
{
    kcr_value v = {ref == KCR__REF_ABSENT ? NULL : o, ref == KCR__REF_ABSENT ? 0 : ref};
    return v;
}

static const kcr_value absent = {NULL, 0};

kcr_value kcr_object_root(const kcr_object *obj)
{
    return obj ? view(obj, obj->root) : absent;
}

kcr_value_type kcr_value_get_type(kcr_value v)
{
    if (!v.obj)
        return KCR_VALUE_ABSENT;
    switch (KCR__REF_TAG(v.ref)) {
    case KCR__T_SPECIAL:
        return v.ref == KCR__REF_ABSENT  ? KCR_VALUE_ABSENT
               : v.ref == KCR__REF_NULL ? KCR_VALUE_NULL
                                        : KCR_VALUE_BOOL;
    case KCR__T_SMALLINT:
    case KCR__T_INT64:
        return KCR_VALUE_INT;
    case KCR__T_NUM:
        return KCR_VALUE_FLOAT;
    case KCR__T_STR:
        return KCR_VALUE_STRING;
    case KCR__T_ARR:
        return KCR_VALUE_ARRAY;
    case KCR__T_MAP:
        return KCR_VALUE_OBJECT;
    default:
        return v.ref == KCR__REF_EMPTY_MAP   ? KCR_VALUE_OBJECT
               : v.ref == KCR__REF_EMPTY_ARR ? KCR_VALUE_ARRAY
                                             : KCR_VALUE_STRING;
    }
}

bool kcr_value_bool(kcr_value v)
{
    return v.obj && v.ref == KCR__REF_TRUE;
}

int64_t kcr_value_int(kcr_value v)
{
    int64_t i = 0;
    return v.obj && kcr__ref_int(v.obj, v.ref, &i) ? i : 0;
}

double kcr_value_float(kcr_value v)
{
    int64_t i;
    if (!v.obj)
        return 0;
    if (kcr__ref_int(v.obj, v.ref, &i))
        return (double)i;
    if (KCR__REF_TAG(v.ref) == KCR__T_NUM) {
        size_t len;
        return strtod(kcr__ref_str(v.obj, v.ref, &len), NULL);
    }
    return 0;
}

const char *kcr_value_string(kcr_value v, size_t *len)
{
    size_t l = 0;
    const char *s = NULL;
    if (v.obj && (kcr__ref_is_str(v.ref) || KCR__REF_TAG(v.ref) == KCR__T_NUM))
        s = kcr__ref_str(v.obj, v.ref, &l);
    if (len)
        *len = l;
    return s;
}

size_t kcr_value_len(kcr_value v)
{
    if (!v.obj)
        return 0;
    if (kcr__ref_is_str(v.ref)) {
        size_t l;
        kcr__ref_str(v.obj, v.ref, &l);
        return l;
    }
    return kcr__ref_count(v.obj, v.ref);
}

kcr_value kcr_value_at(kcr_value v, size_t i)
{
    if (!v.obj || KCR__REF_TAG(v.ref) != KCR__T_ARR || i >= kcr__ref_count(v.obj, v.ref))
        return absent;
    return view(v.obj, kcr__rd32(kcr__ref_items(v.obj, v.ref) + 4 * i));
}

kcr_value kcr__value_member_n(kcr_value v, const char *key, size_t len)
{
    if (!v.obj || KCR__REF_TAG(v.ref) != KCR__T_MAP)
        return absent;
    uint32_t id = kcr__intern_find(key, len, kcr__hash_bytes(key, len));
    return view(v.obj, kcr__map_get(v.obj, v.ref, key, len, id));
}

kcr_value kcr_value_member(kcr_value v, const char *key)
{
    return kcr__value_member_n(v, key, strlen(key));
}

kcr_value kcr_value_entry(kcr_value v, size_t i, const char **key, size_t *key_len)
{
    size_t l = 0;
    const char *k = NULL;
    kcr_value r = absent;
    if (v.obj && KCR__REF_TAG(v.ref) == KCR__T_MAP && i < kcr__ref_count(v.obj, v.ref)) {
        const unsigned char *p = kcr__ref_items(v.obj, v.ref) + 8 * i;
        k = kcr__key_str(v.obj, kcr__rd32(p), &l);
        r = view(v.obj, kcr__rd32(p + 4));
    }
    if (key)
        *key = k;
    if (key_len)
        *key_len = l;
    return r;
}

bool kcr_value_equal(kcr_value a, kcr_value b)
{
    kcr_value_type ta = kcr_value_get_type(a), tb = kcr_value_get_type(b);
    if (ta != tb)
        return false;
    switch (ta) {
    case KCR_VALUE_ABSENT:
    case KCR_VALUE_NULL:
        return true;
    case KCR_VALUE_BOOL:
        return a.ref == b.ref;
    case KCR_VALUE_INT:
        return kcr_value_int(a) == kcr_value_int(b);
    case KCR_VALUE_FLOAT:
    case KCR_VALUE_STRING: {
        size_t la, lb;
        const char *sa = kcr_value_string(a, &la), *sb = kcr_value_string(b, &lb);
        return la == lb && memcmp(sa, sb, la) == 0;
    }
    case KCR_VALUE_ARRAY: {
        size_t n = kcr_value_len(a);
        if (n != kcr_value_len(b))
            return false;
        for (size_t i = 0; i < n; i++)
            if (!kcr_value_equal(kcr_value_at(a, i), kcr_value_at(b, i)))
                return false;
        return true;
    }
    case KCR_VALUE_OBJECT: {
        size_t n = kcr_value_len(a);
        if (n != kcr_value_len(b))
            return false;
        for (size_t i = 0; i < n; i++) {
            const char *k;
            size_t kl;
            kcr_value va = kcr_value_entry(a, i, &k, &kl);
            if (!kcr_value_equal(va, kcr__value_member_n(b, k, kl)))
                return false;
        }
        return true;
    }
    }
    return false;
}

/* ---- paths -------------------------------------------------------------- */

int kcr__path_next(const char **path, bool first, struct kcr__path_seg *seg, char *scratch)
{
    const char *p = *path;
    if (*p == '\0')
        return 0;
    if (!first && *p != '[') {
        if (*p != '.')
            return -1;
        p++;
        if (*p == '[' || *p == '\0' || *p == '.')
            return -1;
    }
    seg->is_index = false;
    if (*p == '[') {
        p++;
        if (*p == '"') {
            p++;
            size_t n = 0;
            while (*p && *p != '"') {
                if (*p == '\\') {
                    p++;
                    if (*p != '"' && *p != '\\')
                        return -1;
                }
                scratch[n++] = *p++;
            }
            if (*p != '"' || p[1] != ']')
                return -1;
            p += 2;
            seg->key = scratch;
            seg->key_len = n;
        } else {
            if (*p < '0' || *p > '9')
                return -1;
            size_t idx = 0;
            while (*p >= '0' && *p <= '9') {
                if (idx > (SIZE_MAX - 9) / 10)
                    return -1;
                idx = idx * 10 + (size_t)(*p++ - '0');
            }
            if (*p != ']')
                return -1;
            p++;
            seg->is_index = true;
            seg->index = idx;
        }
    } else {
        const char *start = p;
        while (*p && *p != '.' && *p != '[' && *p != ']')
            p++;
        if (p == start)
            return -1;
        seg->key = start;
        seg->key_len = (size_t)(p - start);
    }
    *path = p;
    return 1;
}

static kcr_err walk(kcr_value v, const char *path, kcr_value *out)
{
    *out = absent;
    if (!path)
        return kcr__fail(KCR_ERR_INVALID, "path is NULL");
    size_t plen = strlen(path);
    char small[256];
    char *scratch = plen < sizeof small ? small : malloc(plen + 1);
    if (!scratch)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory reading a path");
    kcr_err err = KCR_OK;
    const char *p = path;
    struct kcr__path_seg seg;
    int r;
    bool first = true;
    while ((r = kcr__path_next(&p, first, &seg, scratch)) == 1) {
        first = false;
        if (v.obj)
            v = seg.is_index ? kcr_value_at(v, seg.index) : kcr__value_member_n(v, seg.key, seg.key_len);
    }
    if (r < 0)
        err = kcr__fail(KCR_ERR_INVALID, "malformed path \"%s\" at offset %zu", path,
                        (size_t)(p - path));
    else if (!v.obj)
        err = kcr__fail(KCR_ERR_NOT_FOUND, "path \"%s\" not found", path);
    else
        *out = v;
    if (scratch != small)
        free(scratch);
    return err;
}

kcr_err kcr_object_lookup(const kcr_object *obj, const char *path, kcr_value *out)
{
    kcr_value dummy;
    if (!out)
        out = &dummy;
    if (!obj) {
        *out = absent;
        return kcr__fail(KCR_ERR_INVALID, "kcr_object_lookup: obj is NULL");
    }
    return walk(kcr_object_root(obj), path, out);
}

kcr_value kcr_object_get(const kcr_object *obj, const char *path)
{
    kcr_value v = absent;
    if (obj)
        walk(kcr_object_root(obj), path, &v);
    return v;
}

kcr_value kcr_value_get(kcr_value v, const char *path)
{
    kcr_value r = absent;
    walk(v, path, &r);
    return r;
}

const char *kcr__value_str(kcr_value v)
{
    return kcr_value_get_type(v) == KCR_VALUE_STRING ? kcr_value_string(v, NULL) : NULL;
}

int64_t kcr__value_int_or(kcr_value v, int64_t dflt)
{
    return kcr_value_get_type(v) == KCR_VALUE_INT ? kcr_value_int(v) : dflt;
}
