/* The mutable JSON tree behind kcr_object_edit (object/edit_tree.h): nodes,
 * copies, RFC 6902 equality, conversion from immutable objects and back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "object/edit_tree.h"
#include "object/object_internal.h"
#include "object/serialize.h"
#include "object/utf8.h"

void kcr__node_free(struct kcr__node *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->n; i++) {
        kcr__node_free(n->items[i]);
        if (n->keys)
            free(n->keys[i]);
    }
    free(n->items);
    free(n->keys);
    free(n->klens);
    free(n->s);
    free(n);
}

struct kcr__node *kcr__node_new(enum kcr__ntype t)
{
    struct kcr__node *n = calloc(1, sizeof *n);
    if (n)
        n->t = t;
    return n;
}

struct kcr__node *kcr__node_str(enum kcr__ntype t, const char *s, size_t len)
{
    struct kcr__node *n = kcr__node_new(t);
    if (!n)
        return NULL;
    n->s = malloc(len + 1);
    if (!n->s) {
        free(n);
        return NULL;
    }
    memcpy(n->s, s, len);
    n->s[len] = '\0';
    n->slen = len;
    return n;
}

static bool node_reserve(struct kcr__node *n)
{
    if (n->n < n->cap)
        return true;
    size_t cap = n->cap ? n->cap * 2 : 4;
    struct kcr__node **items = realloc(n->items, cap * sizeof *items);
    if (!items)
        return false;
    n->items = items;
    if (n->t == KCR__N_MAP) {
        char **keys = realloc(n->keys, cap * sizeof *keys);
        if (!keys)
            return false;
        n->keys = keys;
        size_t *kl = realloc(n->klens, cap * sizeof *kl);
        if (!kl)
            return false;
        n->klens = kl;
    }
    n->cap = cap;
    return true;
}

struct kcr__node *kcr__node_int(int64_t v)
{
    struct kcr__node *n = kcr__node_new(KCR__N_INT);
    if (n)
        n->i = v;
    return n;
}

/* Appends (takes ownership of `v`; frees it on failure). */
bool kcr__node_push(struct kcr__node *arr, struct kcr__node *v)
{
    if (!v || !node_reserve(arr)) {
        kcr__node_free(v);
        return false;
    }
    arr->items[arr->n++] = v;
    return true;
}

ptrdiff_t kcr__node_find(const struct kcr__node *m, const char *k, size_t len)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->klens[i] == len && memcmp(m->keys[i], k, len) == 0)
            return (ptrdiff_t)i;
    return -1;
}

/* Appends the entry k: v to a map without looking for k (takes v). */
static bool map_append(struct kcr__node *m, const char *k, size_t len, struct kcr__node *v)
{
    char *key = v ? malloc(len + 1) : NULL;
    if (!key || !node_reserve(m)) {
        free(key);
        kcr__node_free(v);
        return false;
    }
    memcpy(key, k, len);
    key[len] = '\0';
    m->keys[m->n] = key;
    m->klens[m->n] = len;
    m->items[m->n++] = v;
    return true;
}

bool kcr__node_set(struct kcr__node *m, const char *k, size_t len, struct kcr__node *v)
{
    if (!v)
        return false;
    ptrdiff_t i = kcr__node_find(m, k, len);
    if (i >= 0) {
        kcr__node_free(m->items[i]);
        m->items[i] = v;
        return true;
    }
    return map_append(m, k, len, v);
}

struct kcr__node *kcr__node_take_at(struct kcr__node *c, size_t i)
{
    struct kcr__node *v = c->items[i];
    if (c->keys)
        free(c->keys[i]);
    size_t rest = c->n - i - 1;
    memmove(c->items + i, c->items + i + 1, rest * sizeof *c->items);
    if (c->keys) {
        memmove(c->keys + i, c->keys + i + 1, rest * sizeof *c->keys);
        memmove(c->klens + i, c->klens + i + 1, rest * sizeof *c->klens);
    }
    c->n--;
    return v;
}

bool kcr__node_put(struct kcr__node *m, const char *key, struct kcr__node *v)
{
    if (!kcr__node_set(m, key, strlen(key), v)) {
        kcr__fail(KCR_ERR_NOMEM, "out of memory building JSON (member %s)", key);
        return false;
    }
    return true;
}

bool kcr__node_put_str(struct kcr__node *m, const char *key, const char *s)
{
    size_t len = strlen(s), ok = kcr__utf8_valid_prefix(s, len);
    if (ok != len) {
        kcr__fail(KCR_ERR_INVALID, "JSON member %s: string is not valid UTF-8 (byte %zu)", key,
                  ok);
        return false;
    }
    return kcr__node_put(m, key, kcr__node_str(KCR__N_STR, s, len));
}

bool kcr__node_put_bool(struct kcr__node *m, const char *key, bool b)
{
    struct kcr__node *v = kcr__node_new(KCR__N_BOOL);
    if (v)
        v->b = b;
    return kcr__node_put(m, key, v);
}

bool kcr__node_put_int(struct kcr__node *m, const char *key, int64_t i)
{
    return kcr__node_put(m, key, kcr__node_int(i));
}

void kcr__node_remove_at(struct kcr__node *c, size_t i)
{
    kcr__node_free(kcr__node_take_at(c, i));
}

bool kcr__node_insert(struct kcr__node *arr, size_t i, struct kcr__node *v)
{
    if (!kcr__node_push(arr, v))
        return false;
    memmove(arr->items + i + 1, arr->items + i, (arr->n - 1 - i) * sizeof *arr->items);
    arr->items[i] = v;
    return true;
}

struct kcr__node *kcr__node_copy(const struct kcr__node *n)
{
    if (!n)
        return NULL;
    struct kcr__node *c = n->t == KCR__N_STR || n->t == KCR__N_NUM
                              ? kcr__node_str(n->t, n->s, n->slen)
                              : kcr__node_new(n->t);
    if (!c)
        return NULL;
    c->b = n->b;
    c->i = n->i;
    for (size_t k = 0; k < n->n; k++) {
        struct kcr__node *item = kcr__node_copy(n->items[k]);
        bool ok = n->t == KCR__N_MAP ? map_append(c, n->keys[k], n->klens[k], item)
                                     : kcr__node_push(c, item);
        if (!ok) {
            kcr__node_free(c);
            return NULL;
        }
    }
    return c;
}

/* A number's value as a double (INT exactly when it fits a double's 53 bits). */
static double num_value(const struct kcr__node *n)
{
    return n->t == KCR__N_INT ? (double)n->i : strtod(n->s, NULL);
}

bool kcr__node_equal(const struct kcr__node *a, const struct kcr__node *b)
{
    bool an = a->t == KCR__N_INT || a->t == KCR__N_NUM,
         bn = b->t == KCR__N_INT || b->t == KCR__N_NUM;
    if (an && bn) {
        if (a->t == KCR__N_INT && b->t == KCR__N_INT)
            return a->i == b->i;
        if (a->t == KCR__N_NUM && b->t == KCR__N_NUM && a->slen == b->slen &&
            memcmp(a->s, b->s, a->slen) == 0)
            return true;
        return num_value(a) == num_value(b);
    }
    if (a->t != b->t)
        return false;
    switch (a->t) {
    case KCR__N_NULL:
        return true;
    case KCR__N_BOOL:
        return a->b == b->b;
    case KCR__N_STR:
        return a->slen == b->slen && memcmp(a->s, b->s, a->slen) == 0;
    case KCR__N_ARR:
        if (a->n != b->n)
            return false;
        for (size_t i = 0; i < a->n; i++)
            if (!kcr__node_equal(a->items[i], b->items[i]))
                return false;
        return true;
    case KCR__N_MAP:
        if (a->n != b->n)
            return false;
        for (size_t i = 0; i < a->n; i++) {
            ptrdiff_t j = kcr__node_find(b, a->keys[i], a->klens[i]);
            if (j < 0 || !kcr__node_equal(a->items[i], b->items[j]))
                return false;
        }
        return true;
    default:
        return false;
    }
}

struct kcr__node *kcr__node_from_value(kcr_value v)
{
    switch (kcr_value_get_type(v)) {
    case KCR_VALUE_ABSENT:
        return NULL;
    case KCR_VALUE_NULL:
        return kcr__node_new(KCR__N_NULL);
    case KCR_VALUE_BOOL: {
        struct kcr__node *n = kcr__node_new(KCR__N_BOOL);
        if (n)
            n->b = kcr_value_bool(v);
        return n;
    }
    case KCR_VALUE_INT: {
        struct kcr__node *n = kcr__node_new(KCR__N_INT);
        if (n)
            n->i = kcr_value_int(v);
        return n;
    }
    case KCR_VALUE_FLOAT:
    case KCR_VALUE_STRING: {
        size_t len;
        const char *s = kcr_value_string(v, &len);
        return kcr__node_str(kcr_value_get_type(v) == KCR_VALUE_FLOAT ? KCR__N_NUM : KCR__N_STR, s,
                             len);
    }
    case KCR_VALUE_ARRAY: {
        struct kcr__node *n = kcr__node_new(KCR__N_ARR);
        size_t len = kcr_value_len(v);
        for (size_t i = 0; n && i < len; i++)
            if (!kcr__node_push(n, kcr__node_from_value(kcr_value_at(v, i)))) {
                kcr__node_free(n);
                return NULL;
            }
        return n;
    }
    case KCR_VALUE_OBJECT: {
        struct kcr__node *n = kcr__node_new(KCR__N_MAP);
        size_t len = kcr_value_len(v);
        for (size_t i = 0; n && i < len; i++) {
            const char *k;
            size_t kl;
            kcr_value e = kcr_value_entry(v, i, &k, &kl);
            /* Keys of a parsed object are unique (the parser keeps the
             * last value of a duplicate): no need to look them up. */
            if (!map_append(n, k, kl, kcr__node_from_value(e))) {
                kcr__node_free(n);
                return NULL;
            }
        }
        return n;
    }
    }
    return NULL;
}

kcr_err kcr__node_feed(kcr__object_builder *b, const struct kcr__node *n)
{
    kcr_err err = KCR_OK;
    switch (n->t) {
    case KCR__N_NULL:
        return kcr__object_builder_null(b);
    case KCR__N_BOOL:
        return kcr__object_builder_bool(b, n->b);
    case KCR__N_INT: {
        char buf[24];
        int len = snprintf(buf, sizeof buf, "%lld", (long long)n->i);
        return kcr__object_builder_number(b, buf, (size_t)len);
    }
    case KCR__N_NUM:
        return kcr__object_builder_number(b, n->s, n->slen);
    case KCR__N_STR:
        return kcr__object_builder_string(b, n->s, n->slen);
    case KCR__N_ARR:
        if ((err = kcr__object_builder_start_array(b)) != KCR_OK)
            return err;
        for (size_t i = 0; i < n->n; i++)
            if ((err = kcr__node_feed(b, n->items[i])) != KCR_OK)
                return err;
        return kcr__object_builder_end_array(b);
    case KCR__N_MAP:
        if ((err = kcr__object_builder_start_map(b)) != KCR_OK)
            return err;
        for (size_t i = 0; i < n->n; i++)
            if ((err = kcr__object_builder_map_key(b, n->keys[i], n->klens[i])) != KCR_OK ||
                (err = kcr__node_feed(b, n->items[i])) != KCR_OK)
                return err;
        return kcr__object_builder_end_map(b);
    }
    return kcr__fail(KCR_ERR_STATE, "edit tree: node of unknown type %d", (int)n->t);
}

static kcr_err gen_node(yajl_gen g, const struct kcr__node *n)
{
    yajl_gen_status s = yajl_gen_status_ok;
    switch (n->t) {
    case KCR__N_NULL:
        s = yajl_gen_null(g);
        break;
    case KCR__N_BOOL:
        s = yajl_gen_bool(g, n->b);
        break;
    case KCR__N_INT:
        s = yajl_gen_integer(g, (long long)n->i);
        break;
    case KCR__N_NUM:
        s = yajl_gen_number(g, n->s, n->slen);
        break;
    case KCR__N_STR:
        s = yajl_gen_string(g, (const unsigned char *)n->s, n->slen);
        break;
    case KCR__N_ARR:
        s = yajl_gen_array_open(g);
        for (size_t i = 0; s == yajl_gen_status_ok && i < n->n; i++)
            if (gen_node(g, n->items[i]) != KCR_OK)
                return KCR_ERR_INVALID; /* detail: set by the inner call */
        if (s == yajl_gen_status_ok)
            s = yajl_gen_array_close(g);
        break;
    case KCR__N_MAP:
        s = yajl_gen_map_open(g);
        for (size_t i = 0; s == yajl_gen_status_ok && i < n->n; i++) {
            s = yajl_gen_string(g, (const unsigned char *)n->keys[i], n->klens[i]);
            if (s == yajl_gen_status_ok && gen_node(g, n->items[i]) != KCR_OK)
                return KCR_ERR_INVALID; /* detail: set by the inner call */
        }
        if (s == yajl_gen_status_ok)
            s = yajl_gen_map_close(g);
        break;
    }
    return s == yajl_gen_status_ok
               ? KCR_OK
               : kcr__fail(KCR_ERR_INVALID, "serializing JSON: yajl_gen status %d", (int)s);
}

kcr_err kcr__node_to_json(const struct kcr__node *n, char **out, size_t *len)
{
    *out = NULL;
    yajl_gen g = kcr__gen_new();
    if (!g)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory serializing JSON");
    kcr_err err = gen_node(g, n);
    if (err != KCR_OK)
        err = kcr__refail(err, "serializing an edit tree: ");
    return kcr__gen_finish(g, err, out, len);
}

kcr_err kcr__value_parse(const char *json, size_t len, kcr_object **holder, kcr_value *v)
{
    *holder = NULL;
    *v = (kcr_value){0};
    if (!json)
        return kcr__fail(KCR_ERR_INVALID, "JSON text is NULL");
    if (len == 0)
        len = strlen(json);
    /* Wrapped as {"v": <json>}; exactly that one member must come out, so
     * text such as `1, "w": 2` cannot pass for one value. */
    char *buf = malloc(len + 7);
    if (!buf)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory parsing JSON");
    memcpy(buf, "{\"v\":", 5);
    memcpy(buf + 5, json, len);
    buf[5 + len] = '}';
    kcr_object *o;
    kcr_err err = kcr_object_parse_any(buf, len + 6, &o);
    free(buf);
    if (err != KCR_OK)
        return err;
    kcr_value root = kcr_object_root(o);
    if (kcr_value_len(root) != 1) {
        kcr_object_unref(o);
        return kcr__fail(KCR_ERR_PARSE, "invalid JSON value: more than one value");
    }
    *holder = o;
    *v = kcr_value_member(root, "v");
    return KCR_OK;
}

kcr_err kcr__node_parse(const char *json, size_t len, struct kcr__node **out)
{
    *out = NULL;
    kcr_object *o;
    kcr_value v;
    kcr_err err = kcr__value_parse(json, len, &o, &v);
    if (err != KCR_OK)
        return err;
    *out = kcr__node_from_value(v);
    kcr_object_unref(o);
    return *out ? KCR_OK : kcr__fail(KCR_ERR_NOMEM, "out of memory parsing JSON");
}
