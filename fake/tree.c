/* Small kcr__node helpers the fake's writes share: members of metadata,
 * setters that take care of allocation, and comparing a tree with a stored
 * (immutable) value in place, without building a second tree. */
#include <string.h>

#include "fake/fake_internal.h"
#include "object/object_internal.h"

struct kcr__node *kcr__fake_member(const struct kcr__node *m, const char *key)
{
    ptrdiff_t i = m && m->t == KCR__N_MAP ? kcr__node_find(m, key, strlen(key)) : -1;
    return i >= 0 ? m->items[i] : NULL;
}

const char *kcr__fake_meta_str(const struct kcr__node *doc, const char *key)
{
    const struct kcr__node *v = kcr__fake_member(kcr__fake_member(doc, "metadata"), key);
    return v && v->t == KCR__N_STR ? v->s : NULL;
}

bool kcr__fake_remove(struct kcr__node *m, const char *key)
{
    ptrdiff_t i = kcr__node_find(m, key, strlen(key));
    if (i < 0)
        return false;
    kcr__node_remove_at(m, (size_t)i);
    return true;
}

/* Whether tree n holds the same JSON as value v (numbers by their text or
 * integer value, maps regardless of member order). */
bool kcr__fake_same(const struct kcr__node *n, kcr_value v)
{
    kcr_value_type t = kcr_value_get_type(v);
    switch (n->t) {
    case KCR__N_NULL:
        return t == KCR_VALUE_NULL;
    case KCR__N_BOOL:
        return t == KCR_VALUE_BOOL && kcr_value_bool(v) == n->b;
    case KCR__N_INT:
        return t == KCR_VALUE_INT && kcr_value_int(v) == n->i;
    case KCR__N_NUM:
    case KCR__N_STR: {
        if (t != (n->t == KCR__N_NUM ? KCR_VALUE_FLOAT : KCR_VALUE_STRING))
            return false;
        size_t len;
        const char *s = kcr_value_string(v, &len);
        return len == n->slen && memcmp(s, n->s, len) == 0;
    }
    case KCR__N_ARR:
        if (t != KCR_VALUE_ARRAY || kcr_value_len(v) != n->n)
            return false;
        for (size_t i = 0; i < n->n; i++)
            if (!kcr__fake_same(n->items[i], kcr_value_at(v, i)))
                return false;
        return true;
    case KCR__N_MAP:
        if (t != KCR_VALUE_OBJECT || kcr_value_len(v) != n->n)
            return false;
        for (size_t i = 0; i < n->n; i++)
            if (!kcr__fake_same(n->items[i], kcr__value_member_n(v, n->keys[i], n->klens[i])))
                return false;
        return true;
    }
    return false;
}

/* The members that are not the object's "spec" for generation: its type
 * and the parts the server or other writers own. */
static bool outside_spec(const char *key, size_t len)
{
    static const char *const keys[] = {"apiVersion", "kind", "metadata", "status"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        if (len == strlen(keys[i]) && memcmp(key, keys[i], len) == 0)
            return true;
    return false;
}

bool kcr__fake_spec_changed(const struct kcr__node *next, kcr_value cur)
{
    size_t in_next = 0, in_cur = 0;
    for (size_t i = 0; i < next->n; i++) {
        if (outside_spec(next->keys[i], next->klens[i]))
            continue;
        in_next++;
        if (!kcr__fake_same(next->items[i],
                            kcr__value_member_n(cur, next->keys[i], next->klens[i])))
            return true;
    }
    size_t n = kcr_value_len(cur);
    for (size_t i = 0; i < n; i++) {
        const char *k;
        size_t kl;
        kcr_value_entry(cur, i, &k, &kl);
        in_cur += !outside_spec(k, kl);
    }
    return in_next != in_cur;
}

/* doc's metadata, made an object when absent or not one; NULL when out of memory. */
struct kcr__node *kcr__fake_metadata_of(struct kcr__node *doc)
{
    struct kcr__node *md = kcr__fake_member(doc, "metadata");
    if (md && md->t == KCR__N_MAP)
        return md;
    md = kcr__node_new(KCR__N_MAP);
    return md && kcr__node_set(doc, "metadata", 8, md) ? md : NULL;
}

/* m[key] = a copy of v, or no key when v is absent. */
bool kcr__fake_set_value(struct kcr__node *m, const char *key, kcr_value v)
{
    if (kcr_value_get_type(v) != KCR_VALUE_ABSENT)
        return kcr__node_set(m, key, strlen(key), kcr__node_from_value(v));
    kcr__fake_remove(m, key);
    return true;
}
