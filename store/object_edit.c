/* Copy-on-write editing, JSON merge patch (RFC 7386) and transforms.
 *
 * An editor converts the base object into a small mutable tree (struct node),
 * applies edits to it, and freezes it back through the object builder. Edits
 * are rare next to reads, so simplicity wins over speed here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "store/object_builder.h"
#include "store/object_internal.h"

enum ntype { N_NULL, N_BOOL, N_INT, N_NUM, N_STR, N_ARR, N_MAP };

struct node {
    enum ntype t;
    bool b;
    int64_t i;
    char *s; /* N_STR / N_NUM text */
    size_t slen;
    struct node **items; /* N_ARR / N_MAP values */
    char **keys;         /* N_MAP keys */
    size_t *klens;
    size_t n, cap;
};

struct kcr_object_edit {
    struct node *root;
};

static void node_free(struct node *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->n; i++) {
        node_free(n->items[i]);
        if (n->keys)
            free(n->keys[i]);
    }
    free(n->items);
    free(n->keys);
    free(n->klens);
    free(n->s);
    free(n);
}

static struct node *node_new(enum ntype t)
{
    struct node *n = calloc(1, sizeof *n);
    if (n)
        n->t = t;
    return n;
}

static struct node *node_str(enum ntype t, const char *s, size_t len)
{
    struct node *n = node_new(t);
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

static bool node_reserve(struct node *n)
{
    if (n->n < n->cap)
        return true;
    size_t cap = n->cap ? n->cap * 2 : 4;
    struct node **items = realloc(n->items, cap * sizeof *items);
    if (!items)
        return false;
    n->items = items;
    if (n->t == N_MAP) {
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

/* Appends (takes ownership of `v`; frees it on failure). */
static bool node_push(struct node *arr, struct node *v)
{
    if (!v || !node_reserve(arr)) {
        node_free(v);
        return false;
    }
    arr->items[arr->n++] = v;
    return true;
}

static ptrdiff_t map_find(const struct node *m, const char *k, size_t len)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->klens[i] == len && memcmp(m->keys[i], k, len) == 0)
            return (ptrdiff_t)i;
    return -1;
}

/* Sets m[k] = v (takes ownership of v; frees it on failure). */
static bool map_set(struct node *m, const char *k, size_t len, struct node *v)
{
    if (!v)
        return false;
    ptrdiff_t i = map_find(m, k, len);
    if (i >= 0) {
        node_free(m->items[i]);
        m->items[i] = v;
        return true;
    }
    char *key = malloc(len + 1);
    if (!key || !node_reserve(m)) {
        free(key);
        node_free(v);
        return false;
    }
    memcpy(key, k, len);
    key[len] = '\0';
    m->keys[m->n] = key;
    m->klens[m->n] = len;
    m->items[m->n++] = v;
    return true;
}

static void remove_at(struct node *c, size_t i)
{
    node_free(c->items[i]);
    if (c->keys)
        free(c->keys[i]);
    size_t rest = c->n - i - 1;
    memmove(c->items + i, c->items + i + 1, rest * sizeof *c->items);
    if (c->keys) {
        memmove(c->keys + i, c->keys + i + 1, rest * sizeof *c->keys);
        memmove(c->klens + i, c->klens + i + 1, rest * sizeof *c->klens);
    }
    c->n--;
}

static struct node *from_value(kcr_value v)
{
    switch (kcr_value_get_type(v)) {
    case KCR_VALUE_ABSENT:
        return NULL;
    case KCR_VALUE_NULL:
        return node_new(N_NULL);
    case KCR_VALUE_BOOL: {
        struct node *n = node_new(N_BOOL);
        if (n)
            n->b = kcr_value_bool(v);
        return n;
    }
    case KCR_VALUE_INT: {
        struct node *n = node_new(N_INT);
        if (n)
            n->i = kcr_value_int(v);
        return n;
    }
    case KCR_VALUE_FLOAT:
    case KCR_VALUE_STRING: {
        size_t len;
        const char *s = kcr_value_string(v, &len);
        return node_str(kcr_value_get_type(v) == KCR_VALUE_FLOAT ? N_NUM : N_STR, s, len);
    }
    case KCR_VALUE_ARRAY: {
        struct node *n = node_new(N_ARR);
        size_t len = kcr_value_len(v);
        for (size_t i = 0; n && i < len; i++)
            if (!node_push(n, from_value(kcr_value_at(v, i)))) {
                node_free(n);
                return NULL;
            }
        return n;
    }
    case KCR_VALUE_OBJECT: {
        struct node *n = node_new(N_MAP);
        size_t len = kcr_value_len(v);
        for (size_t i = 0; n && i < len; i++) {
            const char *k;
            size_t kl;
            kcr_value e = kcr_value_entry(v, i, &k, &kl);
            /* Appends without the duplicate check: keys of a parsed object
             * are kept as they came. */
            struct node *c = from_value(e);
            char *key = malloc(kl + 1);
            if (!c || !key || !node_reserve(n)) {
                node_free(c);
                free(key);
                node_free(n);
                return NULL;
            }
            memcpy(key, k, kl);
            key[kl] = '\0';
            n->keys[n->n] = key;
            n->klens[n->n] = kl;
            n->items[n->n++] = c;
        }
        return n;
    }
    }
    return NULL;
}

static kcr_err feed(kcr__object_builder *b, const struct node *n)
{
    kcr_err err = KCR_OK;
    switch (n->t) {
    case N_NULL:
        return kcr__object_builder_null(b);
    case N_BOOL:
        return kcr__object_builder_bool(b, n->b);
    case N_INT: {
        char buf[24];
        int len = snprintf(buf, sizeof buf, "%lld", (long long)n->i);
        return kcr__object_builder_number(b, buf, (size_t)len);
    }
    case N_NUM:
        return kcr__object_builder_number(b, n->s, n->slen);
    case N_STR:
        return kcr__object_builder_string(b, n->s, n->slen);
    case N_ARR:
        if ((err = kcr__object_builder_start_array(b)) != KCR_OK)
            return err;
        for (size_t i = 0; i < n->n; i++)
            if ((err = feed(b, n->items[i])) != KCR_OK)
                return err;
        return kcr__object_builder_end_array(b);
    case N_MAP:
        if ((err = kcr__object_builder_start_map(b)) != KCR_OK)
            return err;
        for (size_t i = 0; i < n->n; i++)
            if ((err = kcr__object_builder_map_key(b, n->keys[i], n->klens[i])) != KCR_OK ||
                (err = feed(b, n->items[i])) != KCR_OK)
                return err;
        return kcr__object_builder_end_map(b);
    }
    return KCR_ERR_STATE;
}

static kcr_err gen_node(yajl_gen g, const struct node *n)
{
    yajl_gen_status s = yajl_gen_status_ok;
    switch (n->t) {
    case N_NULL:
        s = yajl_gen_null(g);
        break;
    case N_BOOL:
        s = yajl_gen_bool(g, n->b);
        break;
    case N_INT:
        s = yajl_gen_integer(g, (long long)n->i);
        break;
    case N_NUM:
        s = yajl_gen_number(g, n->s, n->slen);
        break;
    case N_STR:
        s = yajl_gen_string(g, (const unsigned char *)n->s, n->slen);
        break;
    case N_ARR:
        s = yajl_gen_array_open(g);
        for (size_t i = 0; s == yajl_gen_status_ok && i < n->n; i++)
            if (gen_node(g, n->items[i]) != KCR_OK)
                return KCR_ERR_INVALID;
        if (s == yajl_gen_status_ok)
            s = yajl_gen_array_close(g);
        break;
    case N_MAP:
        s = yajl_gen_map_open(g);
        for (size_t i = 0; s == yajl_gen_status_ok && i < n->n; i++) {
            s = yajl_gen_string(g, (const unsigned char *)n->keys[i], n->klens[i]);
            if (s == yajl_gen_status_ok && gen_node(g, n->items[i]) != KCR_OK)
                return KCR_ERR_INVALID;
        }
        if (s == yajl_gen_status_ok)
            s = yajl_gen_map_close(g);
        break;
    }
    return s == yajl_gen_status_ok ? KCR_OK : KCR_ERR_INVALID;
}

static kcr_err node_to_json(const struct node *n, char **out, size_t *len)
{
    yajl_gen g = yajl_gen_alloc(NULL);
    if (!g)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory serializing JSON");
    kcr_err err = gen_node(g, n);
    if (err != KCR_OK) {
        err = kcr__fail(err, "serializing JSON failed");
    } else {
        const unsigned char *buf;
        size_t n_;
        yajl_gen_get_buf(g, &buf, &n_);
        *out = malloc(n_ + 1);
        if (!*out) {
            err = kcr__fail(KCR_ERR_NOMEM, "out of memory serializing JSON");
        } else {
            memcpy(*out, buf, n_);
            (*out)[n_] = '\0';
            if (len)
                *len = n_;
        }
    }
    yajl_gen_free(g);
    return err;
}

/* ---- editor ------------------------------------------------------------- */

kcr_object_edit *kcr_object_edit_new(const kcr_object *base)
{
    kcr_object_edit *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->root = base ? from_value(kcr_object_root(base)) : node_new(N_MAP);
    if (!e->root) {
        free(e);
        return NULL;
    }
    return e;
}

void kcr_object_edit_free(kcr_object_edit *e)
{
    if (!e)
        return;
    node_free(e->root);
    free(e);
}

kcr_err kcr_object_edit_freeze(kcr_object_edit *e, kcr_object **out)
{
    if (!e || !out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_object_edit_freeze: NULL argument");
    *out = NULL;
    kcr__object_builder *b = kcr__object_builder_new();
    if (!b)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory freezing an object");
    kcr_err err = feed(b, e->root);
    if (err == KCR_OK)
        err = kcr__object_builder_finish(b, out);
    kcr__object_builder_free(b);
    return err;
}

static bool valid_utf8(const unsigned char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        unsigned char c = s[i];
        size_t n;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            n = 1;
            cp = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            n = 2;
            cp = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            n = 3;
            cp = c & 0x07;
        } else {
            return false;
        }
        if (n >= len - i)
            return false;
        for (size_t k = 1; k <= n; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return false;
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
            cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += n + 1;
    }
    return true;
}

static struct node *string_node(const char *s, kcr_err *err)
{
    if (!s) {
        *err = kcr__fail(KCR_ERR_INVALID, "string is NULL");
        return NULL;
    }
    size_t len = strlen(s);
    if (!valid_utf8((const unsigned char *)s, len)) {
        *err = kcr__fail(KCR_ERR_INVALID, "string is not valid UTF-8");
        return NULL;
    }
    struct node *n = node_str(N_STR, s, len);
    if (!n)
        *err = kcr__fail(KCR_ERR_NOMEM, "out of memory editing an object");
    return n;
}

/* Walks `path`; with `create`, makes missing intermediate maps. On success
 * *parent is the container holding the last segment and *seg that segment.
 * `scratch` holds strlen(path) + 1 bytes. */
static kcr_err resolve(struct node *root, const char *path, bool create, struct node **parent,
                       struct kcr__path_seg *seg, char *scratch)
{
    const char *p = path;
    struct node *cur = root;
    char *w = scratch; /* where the next quoted key may be unescaped */
    int r = kcr__path_next(&p, true, seg, w);
    if (r == 0)
        return kcr__fail(KCR_ERR_INVALID, "empty path");
    if (r == 1 && !seg->is_index && seg->key == w)
        w += seg->key_len;
    while (r == 1) {
        struct kcr__path_seg next;
        r = kcr__path_next(&p, false, &next, w);
        if (r == 1 && !next.is_index && next.key == w)
            w += next.key_len;
        if (r < 0)
            break;
        if (r == 0) {
            *parent = cur;
            return KCR_OK;
        }
        struct node *child = NULL;
        if (seg->is_index) {
            if (cur->t != N_ARR)
                return kcr__fail(KCR_ERR_INVALID, "path \"%s\": index into a non-array", path);
            if (seg->index >= cur->n)
                return kcr__fail(KCR_ERR_NOT_FOUND, "path \"%s\": index %zu out of range", path,
                                 seg->index);
            child = cur->items[seg->index];
        } else {
            if (cur->t != N_MAP)
                return kcr__fail(KCR_ERR_INVALID, "path \"%s\": key into a non-object", path);
            ptrdiff_t i = map_find(cur, seg->key, seg->key_len);
            if (i >= 0) {
                child = cur->items[i];
            } else {
                if (!create)
                    return kcr__fail(KCR_ERR_NOT_FOUND, "path \"%s\" not found", path);
                child = node_new(N_MAP);
                if (!child || !map_set(cur, seg->key, seg->key_len, child))
                    return kcr__fail(KCR_ERR_NOMEM, "out of memory editing an object");
            }
        }
        *seg = next;
        cur = child;
    }
    return kcr__fail(KCR_ERR_INVALID, "malformed path \"%s\"", path);
}

/* Sets `path` to `v` (takes ownership). */
static kcr_err set_path(kcr_object_edit *e, const char *path, struct node *v)
{
    if (!e || !path) {
        node_free(v);
        return kcr__fail(KCR_ERR_INVALID, "NULL argument");
    }
    size_t plen = strlen(path);
    char *scratch = malloc(plen + 1);
    if (!scratch) {
        node_free(v);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory editing an object");
    }
    struct node *parent;
    struct kcr__path_seg seg;
    kcr_err err = resolve(e->root, path, true, &parent, &seg, scratch);
    if (err == KCR_OK) {
        if (seg.is_index) {
            if (parent->t != N_ARR) {
                err = kcr__fail(KCR_ERR_INVALID, "path \"%s\": index into a non-array", path);
            } else if (seg.index >= parent->n) {
                err = kcr__fail(KCR_ERR_NOT_FOUND, "path \"%s\": index out of range", path);
            } else {
                node_free(parent->items[seg.index]);
                parent->items[seg.index] = v;
                v = NULL;
            }
        } else if (parent->t != N_MAP) {
            err = kcr__fail(KCR_ERR_INVALID, "path \"%s\": key into a non-object", path);
        } else {
            struct node *tmp = v;
            v = NULL;
            if (!map_set(parent, seg.key, seg.key_len, tmp))
                err = kcr__fail(KCR_ERR_NOMEM, "out of memory editing an object");
        }
    }
    node_free(v);
    free(scratch);
    return err;
}

kcr_err kcr_object_edit_set_string(kcr_object_edit *e, const char *path, const char *value)
{
    kcr_err err = KCR_OK;
    struct node *n = string_node(value, &err);
    return n ? set_path(e, path, n) : err;
}

kcr_err kcr_object_edit_set_int(kcr_object_edit *e, const char *path, int64_t value)
{
    struct node *n = node_new(N_INT);
    if (!n)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory editing an object");
    n->i = value;
    return set_path(e, path, n);
}

kcr_err kcr_object_edit_set_bool(kcr_object_edit *e, const char *path, bool value)
{
    struct node *n = node_new(N_BOOL);
    if (!n)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory editing an object");
    n->b = value;
    return set_path(e, path, n);
}

kcr_err kcr_object_edit_set_null(kcr_object_edit *e, const char *path)
{
    struct node *n = node_new(N_NULL);
    if (!n)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory editing an object");
    return set_path(e, path, n);
}

/* Parses any JSON value: wraps it as {"v": <json>} and checks that exactly
 * that one member came out. */
static kcr_err parse_value(const char *json, size_t len, struct node **out)
{
    *out = NULL;
    if (!json)
        return kcr__fail(KCR_ERR_INVALID, "JSON text is NULL");
    if (len == 0)
        len = strlen(json);
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
    *out = from_value(kcr_value_member(root, "v"));
    kcr_object_unref(o);
    return *out ? KCR_OK : kcr__fail(KCR_ERR_NOMEM, "out of memory parsing JSON");
}

kcr_err kcr_object_edit_set_json(kcr_object_edit *e, const char *path, const char *json, size_t len)
{
    struct node *n;
    kcr_err err = parse_value(json, len, &n);
    return err ? err : set_path(e, path, n);
}

kcr_err kcr_object_edit_delete(kcr_object_edit *e, const char *path)
{
    if (!e || !path)
        return kcr__fail(KCR_ERR_INVALID, "NULL argument");
    size_t plen = strlen(path);
    char *scratch = malloc(plen + 1);
    if (!scratch)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory editing an object");
    struct node *parent;
    struct kcr__path_seg seg;
    kcr_err err = resolve(e->root, path, false, &parent, &seg, scratch);
    if (err == KCR_ERR_NOT_FOUND) {
        err = KCR_OK;
    } else if (err == KCR_OK) {
        if (seg.is_index && parent->t == N_ARR && seg.index < parent->n) {
            remove_at(parent, seg.index);
        } else if (!seg.is_index && parent->t == N_MAP) {
            ptrdiff_t i = map_find(parent, seg.key, seg.key_len);
            if (i >= 0)
                remove_at(parent, (size_t)i);
        }
    }
    free(scratch);
    return err;
}

/* metadata.<field>, created as `t` when missing (or when of another type). */
static struct node *meta_child(kcr_object_edit *e, const char *field, enum ntype t, bool create)
{
    if (e->root->t != N_MAP)
        return NULL;
    ptrdiff_t i = map_find(e->root, "metadata", 8);
    struct node *md;
    if (i < 0 || e->root->items[i]->t != N_MAP) {
        if (!create)
            return NULL;
        md = node_new(N_MAP);
        if (!md || !map_set(e->root, "metadata", 8, md))
            return NULL;
    } else {
        md = e->root->items[i];
    }
    size_t fl = strlen(field);
    i = map_find(md, field, fl);
    if (i >= 0 && md->items[i]->t == t)
        return md->items[i];
    if (!create)
        return NULL;
    struct node *c = node_new(t);
    if (!c || !map_set(md, field, fl, c))
        return NULL;
    return c;
}

static kcr_err set_meta_entry(kcr_object_edit *e, const char *field, const char *key,
                              const char *value)
{
    if (!e || !key)
        return kcr__fail(KCR_ERR_INVALID, "NULL argument");
    kcr_err err = KCR_OK;
    struct node *v = string_node(value, &err);
    if (!v)
        return err;
    struct node *m = meta_child(e, field, N_MAP, true);
    if (!m || !map_set(m, key, strlen(key), v)) {
        if (!m)
            node_free(v);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory editing an object");
    }
    return KCR_OK;
}

static kcr_err delete_meta_entry(kcr_object_edit *e, const char *field, const char *key)
{
    if (!e || !key)
        return kcr__fail(KCR_ERR_INVALID, "NULL argument");
    struct node *m = meta_child(e, field, N_MAP, false);
    ptrdiff_t i = m ? map_find(m, key, strlen(key)) : -1;
    if (i >= 0)
        remove_at(m, (size_t)i);
    return KCR_OK;
}

kcr_err kcr_object_edit_set_label(kcr_object_edit *e, const char *key, const char *value)
{
    return set_meta_entry(e, "labels", key, value);
}

kcr_err kcr_object_edit_delete_label(kcr_object_edit *e, const char *key)
{
    return delete_meta_entry(e, "labels", key);
}

kcr_err kcr_object_edit_set_annotation(kcr_object_edit *e, const char *key, const char *value)
{
    return set_meta_entry(e, "annotations", key, value);
}

kcr_err kcr_object_edit_delete_annotation(kcr_object_edit *e, const char *key)
{
    return delete_meta_entry(e, "annotations", key);
}

kcr_err kcr_object_edit_add_finalizer(kcr_object_edit *e, const char *finalizer)
{
    if (!e || !finalizer)
        return kcr__fail(KCR_ERR_INVALID, "NULL argument");
    struct node *a = meta_child(e, "finalizers", N_ARR, false);
    size_t len = strlen(finalizer);
    for (size_t i = 0; a && i < a->n; i++)
        if (a->items[i]->t == N_STR && a->items[i]->slen == len &&
            memcmp(a->items[i]->s, finalizer, len) == 0)
            return KCR_OK;
    kcr_err err = KCR_OK;
    struct node *v = string_node(finalizer, &err);
    if (!v)
        return err;
    a = meta_child(e, "finalizers", N_ARR, true);
    if (!a) {
        node_free(v);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory editing an object");
    }
    return node_push(a, v) ? KCR_OK : kcr__fail(KCR_ERR_NOMEM, "out of memory editing an object");
}

kcr_err kcr_object_edit_remove_finalizer(kcr_object_edit *e, const char *finalizer)
{
    if (!e || !finalizer)
        return kcr__fail(KCR_ERR_INVALID, "NULL argument");
    struct node *a = meta_child(e, "finalizers", N_ARR, false);
    size_t len = strlen(finalizer);
    for (size_t i = a ? a->n : 0; i-- > 0;)
        if (a->items[i]->t == N_STR && a->items[i]->slen == len &&
            memcmp(a->items[i]->s, finalizer, len) == 0)
            remove_at(a, i);
    return KCR_OK;
}

static bool owner_uid_is(const struct node *m, const char *uid)
{
    if (m->t != N_MAP)
        return false;
    ptrdiff_t i = map_find(m, "uid", 3);
    return i >= 0 && m->items[i]->t == N_STR && strcmp(m->items[i]->s, uid) == 0;
}

kcr_err kcr_object_edit_set_owner_ref(kcr_object_edit *e, const kcr_owner_ref *ref)
{
    if (!e || !ref || !ref->uid)
        return kcr__fail(KCR_ERR_INVALID, "owner reference without a uid");
    struct node *m = node_new(N_MAP);
    kcr_err err = KCR_OK;
    const char *names[] = {"apiVersion", "kind", "name", "uid"};
    const char *values[] = {ref->api_version, ref->kind, ref->name, ref->uid};
    for (int i = 0; m && i < 4; i++) {
        if (!values[i])
            continue;
        struct node *s = string_node(values[i], &err);
        if (!s || !map_set(m, names[i], strlen(names[i]), s)) {
            node_free(m);
            return err ? err : kcr__fail(KCR_ERR_NOMEM, "out of memory editing an object");
        }
    }
    const char *flags[] = {"controller", "blockOwnerDeletion"};
    bool set[] = {ref->controller, ref->block_owner_deletion};
    for (int i = 0; m && i < 2; i++) {
        if (!set[i])
            continue;
        struct node *b = node_new(N_BOOL);
        if (b)
            b->b = true;
        if (!map_set(m, flags[i], strlen(flags[i]), b)) {
            node_free(m);
            m = NULL;
        }
    }
    struct node *a = m ? meta_child(e, "ownerReferences", N_ARR, true) : NULL;
    if (!a) {
        node_free(m);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory editing an object");
    }
    for (size_t i = 0; i < a->n; i++)
        if (owner_uid_is(a->items[i], ref->uid)) {
            node_free(a->items[i]);
            a->items[i] = m;
            return KCR_OK;
        }
    return node_push(a, m) ? KCR_OK : kcr__fail(KCR_ERR_NOMEM, "out of memory editing an object");
}

kcr_err kcr_object_edit_remove_owner_ref(kcr_object_edit *e, const char *uid)
{
    if (!e || !uid)
        return kcr__fail(KCR_ERR_INVALID, "NULL argument");
    struct node *a = meta_child(e, "ownerReferences", N_ARR, false);
    for (size_t i = a ? a->n : 0; i-- > 0;)
        if (owner_uid_is(a->items[i], uid))
            remove_at(a, i);
    return KCR_OK;
}

/* ---- merge patch -------------------------------------------------------- */

/* RFC 7386 MergePatch(target, patch): returns the new target (consuming
 * `target`), NULL only when out of memory. */
static struct node *merge(struct node *target, kcr_value patch)
{
    if (kcr_value_get_type(patch) != KCR_VALUE_OBJECT) {
        node_free(target);
        return from_value(patch);
    }
    if (!target || target->t != N_MAP) {
        node_free(target);
        target = node_new(N_MAP);
        if (!target)
            return NULL;
    }
    size_t n = kcr_value_len(patch);
    for (size_t i = 0; i < n; i++) {
        const char *k;
        size_t kl;
        kcr_value v = kcr_value_entry(patch, i, &k, &kl);
        ptrdiff_t at = map_find(target, k, kl);
        if (kcr_value_get_type(v) == KCR_VALUE_NULL) {
            if (at >= 0)
                remove_at(target, (size_t)at);
            continue;
        }
        if (at >= 0) {
            struct node *r = merge(target->items[at], v);
            target->items[at] = r;
            if (!r) {
                node_free(target);
                return NULL;
            }
        } else if (!map_set(target, k, kl, merge(NULL, v))) {
            node_free(target);
            return NULL;
        }
    }
    return target;
}

kcr_err kcr_object_edit_merge_patch(kcr_object_edit *e, const char *patch, size_t len)
{
    if (!e || !patch)
        return kcr__fail(KCR_ERR_INVALID, "NULL argument");
    kcr_object *p;
    kcr_err err = kcr_object_parse_any(patch, len, &p);
    if (err != KCR_OK)
        return err;
    struct node *r = merge(e->root, kcr_object_root(p));
    kcr_object_unref(p);
    if (!r) {
        e->root = node_new(N_MAP);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory applying a merge patch");
    }
    e->root = r;
    return KCR_OK;
}

kcr_err kcr_object_apply_merge_patch(const kcr_object *obj, const char *patch, size_t len,
                                     kcr_object **out)
{
    if (!obj || !patch || !out)
        return kcr__fail(KCR_ERR_INVALID, "NULL argument");
    *out = NULL;
    kcr_object_edit *e = kcr_object_edit_new(obj);
    if (!e)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory applying a merge patch");
    kcr_err err = kcr_object_edit_merge_patch(e, patch, len);
    if (err == KCR_OK)
        err = kcr_object_edit_freeze(e, out);
    kcr_object_edit_free(e);
    return err;
}

/* Patch turning map `a` into map `b`; an empty map when they are equal. */
static struct node *diff(kcr_value a, kcr_value b)
{
    struct node *p = node_new(N_MAP);
    if (!p)
        return NULL;
    size_t na = kcr_value_len(a), nb = kcr_value_len(b);
    for (size_t i = 0; i < na; i++) {
        const char *k;
        size_t kl;
        kcr_value_entry(a, i, &k, &kl);
        bool found = kcr_value_get_type(kcr__value_member_n(b, k, kl)) != KCR_VALUE_ABSENT;
        if (!found && map_find(p, k, kl) < 0 && !map_set(p, k, kl, node_new(N_NULL))) {
            node_free(p);
            return NULL;
        }
    }
    for (size_t j = 0; j < nb; j++) {
        const char *k;
        size_t kl;
        kcr_value vb = kcr_value_entry(b, j, &k, &kl);
        kcr_value va = kcr__value_member_n(a, k, kl);
        struct node *c = NULL;
        if (kcr_value_get_type(va) == KCR_VALUE_OBJECT &&
            kcr_value_get_type(vb) == KCR_VALUE_OBJECT) {
            c = diff(va, vb);
            if (!c) {
                node_free(p);
                return NULL;
            }
            if (c->n == 0) {
                node_free(c);
                continue;
            }
        } else if (kcr_value_get_type(va) == KCR_VALUE_ABSENT || !kcr_value_equal(va, vb)) {
            c = from_value(vb);
            if (!c) {
                node_free(p);
                return NULL;
            }
        } else {
            continue;
        }
        if (!map_set(p, k, kl, c)) {
            node_free(p);
            return NULL;
        }
    }
    return p;
}

kcr_err kcr_object_merge_patch(const kcr_object *from, const kcr_object *to, char **out,
                               size_t *len)
{
    if (!from || !to || !out)
        return kcr__fail(KCR_ERR_INVALID, "NULL argument");
    *out = NULL;
    struct node *p = diff(kcr_object_root(from), kcr_object_root(to));
    if (!p)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory computing a merge patch");
    kcr_err err = node_to_json(p, out, len);
    node_free(p);
    return err;
}

/* ---- transforms --------------------------------------------------------- */

/* Feeds value `ref` of `o` to a builder, leaving out the entry with interned
 * key `skip_key` of the map `skip_map`. */
static kcr_err feed_ref(kcr__object_builder *b, const kcr_object *o, uint32_t ref,
                        uint32_t skip_map, uint32_t skip_key)
{
    kcr_value v = {o, ref};
    kcr_err err;
    switch (kcr_value_get_type(v)) {
    case KCR_VALUE_ABSENT:
        return KCR_ERR_STATE;
    case KCR_VALUE_NULL:
        return kcr__object_builder_null(b);
    case KCR_VALUE_BOOL:
        return kcr__object_builder_bool(b, kcr_value_bool(v));
    case KCR_VALUE_INT: {
        char buf[24];
        int n = snprintf(buf, sizeof buf, "%lld", (long long)kcr_value_int(v));
        return kcr__object_builder_number(b, buf, (size_t)n);
    }
    case KCR_VALUE_FLOAT:
    case KCR_VALUE_STRING: {
        size_t len;
        const char *s = kcr_value_string(v, &len);
        return kcr_value_get_type(v) == KCR_VALUE_FLOAT ? kcr__object_builder_number(b, s, len)
                                                        : kcr__object_builder_string(b, s, len);
    }
    case KCR_VALUE_ARRAY: {
        if ((err = kcr__object_builder_start_array(b)) != KCR_OK)
            return err;
        uint32_t n = kcr__ref_count(o, ref);
        const unsigned char *p = kcr__ref_items(o, ref);
        for (uint32_t i = 0; i < n; i++)
            if ((err = feed_ref(b, o, kcr__rd32(p + 4 * i), skip_map, skip_key)) != KCR_OK)
                return err;
        return kcr__object_builder_end_array(b);
    }
    case KCR_VALUE_OBJECT: {
        if ((err = kcr__object_builder_start_map(b)) != KCR_OK)
            return err;
        uint32_t n = kcr__ref_count(o, ref);
        const unsigned char *p = kcr__ref_items(o, ref);
        for (uint32_t i = 0; i < n; i++, p += 8) {
            uint32_t k = kcr__rd32(p);
            if (ref == skip_map && k == (skip_key | KCR__KEY_INTERNED))
                continue;
            size_t kl;
            const char *ks = kcr__key_str(o, k, &kl);
            if ((err = kcr__object_builder_map_key(b, ks, kl)) != KCR_OK ||
                (err = feed_ref(b, o, kcr__rd32(p + 4), skip_map, skip_key)) != KCR_OK)
                return err;
        }
        return kcr__object_builder_end_map(b);
    }
    }
    return KCR_ERR_STATE;
}

kcr_err kcr_object_strip_managed_fields(const kcr_object *in, kcr_object **out, void *user_data)
{
    (void)user_data;
    if (!in || !out)
        return kcr__fail(KCR_ERR_INVALID, "NULL argument");
    uint32_t md = in->field[KCR__F_METADATA];
    if (kcr__map_get_id(in, md, KCR__K_MANAGED_FIELDS) == KCR__REF_ABSENT) {
        *out = kcr_object_ref(in);
        return KCR_OK;
    }
    *out = NULL;
    kcr__object_builder *b = kcr__object_builder_new();
    if (!b)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory transforming an object");
    kcr_err err = feed_ref(b, in, in->root, md, KCR__K_MANAGED_FIELDS);
    if (err == KCR_OK)
        err = kcr__object_builder_finish_any(b, out);
    kcr__object_builder_free(b);
    return err;
}
