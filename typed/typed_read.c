/* Reading side of the generated accessors (kcr/typed.h): typed reads of a
 * kcr_value with presence. Nothing here allocates or copies. */
#include <string.h>

#include "kcr/typed.h"

kcr_value kcr_typed_member(kcr_value v, const char *key)
{
    if (kcr_value_get_type(v) != KCR_VALUE_OBJECT)
        return (kcr_value){0};
    return kcr_value_member(v, key);
}

/* ABSENT for a missing value or null, SET when `t` matches, else WRONG_TYPE. */
static kcr_field presence(kcr_value v, kcr_value_type t)
{
    kcr_value_type have = kcr_value_get_type(v);
    if (have == KCR_VALUE_ABSENT || have == KCR_VALUE_NULL)
        return KCR_FIELD_ABSENT;
    return have == t ? KCR_FIELD_SET : KCR_FIELD_WRONG_TYPE;
}

kcr_field kcr_typed_string(kcr_value v, const char **out)
{
    kcr_field f = presence(v, KCR_VALUE_STRING);
    if (f == KCR_FIELD_SET && out)
        *out = kcr_value_string(v, NULL);
    return f;
}

kcr_field kcr_typed_int64(kcr_value v, int64_t *out)
{
    kcr_field f = presence(v, KCR_VALUE_INT);
    if (f == KCR_FIELD_SET && out)
        *out = kcr_value_int(v);
    return f;
}

kcr_field kcr_typed_int32(kcr_value v, int32_t *out)
{
    kcr_field f = presence(v, KCR_VALUE_INT);
    if (f != KCR_FIELD_SET)
        return f;
    int64_t i = kcr_value_int(v);
    if (i < INT32_MIN || i > INT32_MAX)
        return KCR_FIELD_WRONG_TYPE;
    if (out)
        *out = (int32_t)i;
    return f;
}

kcr_field kcr_typed_bool(kcr_value v, bool *out)
{
    kcr_field f = presence(v, KCR_VALUE_BOOL);
    if (f == KCR_FIELD_SET && out)
        *out = kcr_value_bool(v);
    return f;
}

kcr_field kcr_typed_number(kcr_value v, double *out)
{
    kcr_field f = presence(v, KCR_VALUE_FLOAT);
    if (f == KCR_FIELD_WRONG_TYPE && kcr_value_get_type(v) == KCR_VALUE_INT)
        f = KCR_FIELD_SET;
    if (f == KCR_FIELD_SET && out)
        *out = kcr_value_float(v);
    return f;
}

kcr_field kcr_typed_int_or_string(kcr_value v, kcr_int_or_string *out)
{
    kcr_value_type t = kcr_value_get_type(v);
    if (t == KCR_VALUE_ABSENT || t == KCR_VALUE_NULL)
        return KCR_FIELD_ABSENT;
    if (t != KCR_VALUE_INT && t != KCR_VALUE_STRING)
        return KCR_FIELD_WRONG_TYPE;
    if (out) {
        out->is_string = t == KCR_VALUE_STRING;
        out->int_value = t == KCR_VALUE_INT ? kcr_value_int(v) : 0;
        out->string_value = t == KCR_VALUE_STRING ? kcr_value_string(v, NULL) : NULL;
    }
    return KCR_FIELD_SET;
}

kcr_field kcr_typed_quantity(kcr_value v, kcr_quantity *out)
{
    kcr_value_type t = kcr_value_get_type(v);
    if (t == KCR_VALUE_ABSENT || t == KCR_VALUE_NULL)
        return KCR_FIELD_ABSENT;
    size_t len = 0;
    const char *text = kcr_value_string(v, &len); /* numbers keep their text */
    if (t == KCR_VALUE_INT) {
        kcr_quantity q;
        if (kcr_quantity_from_int64(kcr_value_int(v), 0, KCR_QUANTITY_DECIMAL_SI, &q) != KCR_OK)
            return KCR_FIELD_WRONG_TYPE;
        if (out)
            *out = q;
        return KCR_FIELD_SET;
    }
    if (!text || (t != KCR_VALUE_STRING && t != KCR_VALUE_FLOAT))
        return KCR_FIELD_WRONG_TYPE;
    kcr_quantity q;
    if (kcr_quantity_parse_json(text, len, &q) != KCR_OK)
        return KCR_FIELD_WRONG_TYPE;
    if (out)
        *out = q;
    return KCR_FIELD_SET;
}

kcr_field kcr_typed_enum(kcr_value v, const char *const *names, size_t n, size_t *out)
{
    size_t len;
    const char *s = NULL;
    kcr_field f = kcr_typed_string(v, &s);
    if (f != KCR_FIELD_SET)
        return f;
    len = kcr_value_len(v);
    size_t i = 0;
    while (i < n && !(strlen(names[i]) == len && memcmp(names[i], s, len) == 0))
        i++;
    if (out)
        *out = i;
    return f;
}

size_t kcr_typed_len(kcr_value v)
{
    kcr_value_type t = kcr_value_get_type(v);
    return t == KCR_VALUE_ARRAY || t == KCR_VALUE_OBJECT ? kcr_value_len(v) : 0;
}

kcr_value kcr_typed_item(kcr_value v, size_t i)
{
    return kcr_value_get_type(v) == KCR_VALUE_ARRAY ? kcr_value_at(v, i) : (kcr_value){0};
}

kcr_value kcr_typed_entry(kcr_value v, size_t i, const char **key)
{
    const char *k = NULL;
    kcr_value r = {0};
    if (kcr_value_get_type(v) == KCR_VALUE_OBJECT)
        r = kcr_value_entry(v, i, &k, NULL);
    if (key)
        *key = k;
    return r;
}
