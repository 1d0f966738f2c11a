/* Copy-on-write editing, JSON merge patch (RFC 7386) and transforms.
 *
 * An editor converts the base object into a small mutable tree (struct kcr__node),
 * applies edits to it, and freezes it back through the object builder. Edits
 * are rare next to reads, so simplicity wins over speed here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "object/edit_tree.h"
#include "object/utf8.h"
#include "object/object_builder.h"
#include "object/object_internal.h"
#include "object/stamp.h"

/* ---- editor ------------------------------------------------------------- */

kcr_err kcr_object_edit_new(const kcr_object *base, kcr_object_edit **out)
{
    if (!out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_object_edit_new: NULL out");
    *out = NULL;
    kcr_object_edit *e = calloc(1, sizeof *e);
    if (!e)
        return kcr__fail(KCR_ERR_NOMEM, "kcr_object_edit_new: out of memory");
    e->root = base ? kcr__node_from_value(kcr_object_root(base)) : kcr__node_new(KCR__N_MAP);
    if (!e->root) {
        free(e);
        return kcr__fail(KCR_ERR_NOMEM, "kcr_object_edit_new: out of memory copying the object");
    }
    *out = e;
    return KCR_OK;
}

void kcr_object_edit_free(kcr_object_edit *e)
{
    if (!e)
        return;
    kcr__node_free(e->root);
    free(e->first_error_msg);
    free(e);
}

kcr_err kcr__edit_freeze(kcr_object_edit *e, bool need_name, kcr_object **out)
{
    kcr__object_builder *b = kcr__object_builder_take();
    if (!b)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory freezing an object");
    kcr_err err = kcr__node_feed(b, e->root);
    if (err == KCR_OK)
        err =
            need_name ? kcr__object_builder_finish(b, out) : kcr__object_builder_finish_any(b, out);
    kcr__object_builder_give(b);
    return err;
}

static struct kcr__node *string_node(const char *s, kcr_err *err)
{
    if (!s) {
        *err = kcr__fail(KCR_ERR_INVALID, "string is NULL");
        return NULL;
    }
    size_t len = strlen(s);
    size_t ok = kcr__utf8_valid_prefix(s, len);
    if (ok != len) {
        *err = kcr__fail(KCR_ERR_INVALID, "string is not valid UTF-8 (byte %zu)", ok);
        return NULL;
    }
    struct kcr__node *n = kcr__node_str(KCR__N_STR, s, len);
    if (!n)
        *err = kcr__fail(KCR_ERR_NOMEM, "out of memory editing an object");
    return n;
}

/* Walks `path`; with `create`, makes missing intermediate maps. On success
 * *parent is the container holding the last segment and *seg that segment.
 * `scratch` holds strlen(path) + 1 bytes. */
static kcr_err resolve(struct kcr__node *root, const char *path, bool create,
                       struct kcr__node **parent, struct kcr__path_seg *seg, char *scratch)
{
    const char *p = path;
    struct kcr__node *cur = root;
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
        struct kcr__node *child = NULL;
        if (seg->is_index) {
            if (cur->t != KCR__N_ARR)
                return kcr__fail(KCR_ERR_INVALID, "path \"%s\": index into a non-array", path);
            if (seg->index >= cur->n)
                return kcr__fail(KCR_ERR_NOT_FOUND, "path \"%s\": index %zu out of range", path,
                                 seg->index);
            child = cur->items[seg->index];
        } else {
            if (cur->t != KCR__N_MAP)
                return kcr__fail(KCR_ERR_INVALID, "path \"%s\": key into a non-object", path);
            ptrdiff_t i = kcr__node_find(cur, seg->key, seg->key_len);
            if (i >= 0) {
                child = cur->items[i];
            } else {
                if (!create)
                    return kcr__fail(KCR_ERR_NOT_FOUND, "path \"%s\" not found", path);
                child = kcr__node_new(KCR__N_MAP);
                if (!child || !kcr__node_set(cur, seg->key, seg->key_len, child))
                    return kcr__fail(KCR_ERR_NOMEM, "out of memory editing an object");
            }
        }
        *seg = next;
        cur = child;
    }
    return kcr__fail(KCR_ERR_INVALID, "malformed path \"%s\"", path);
}

/* Sets `path` to `v` (takes ownership). */
static kcr_err set_path(kcr_object_edit *e, const char *path, struct kcr__node *v)
{
    if (!e || !path) {
        kcr__node_free(v);
        return kcr__fail(KCR_ERR_INVALID, "NULL argument");
    }
    size_t plen = strlen(path);
    char *scratch = malloc(plen + 1);
    if (!scratch) {
        kcr__node_free(v);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory editing an object");
    }
    struct kcr__node *parent;
    struct kcr__path_seg seg;
    kcr_err err = resolve(e->root, path, true, &parent, &seg, scratch);
    if (err == KCR_OK) {
        if (seg.is_index) {
            if (parent->t != KCR__N_ARR) {
                err = kcr__fail(KCR_ERR_INVALID, "path \"%s\": index into a non-array", path);
            } else if (seg.index >= parent->n) {
                err = kcr__fail(KCR_ERR_NOT_FOUND, "path \"%s\": index out of range", path);
            } else {
                kcr__node_free(parent->items[seg.index]);
                parent->items[seg.index] = v;
                v = NULL;
            }
        } else if (parent->t != KCR__N_MAP) {
            err = kcr__fail(KCR_ERR_INVALID, "path \"%s\": key into a non-object", path);
        } else {
            struct kcr__node *tmp = v;
            v = NULL;
            if (!kcr__node_set(parent, seg.key, seg.key_len, tmp))
                err = kcr__fail(KCR_ERR_NOMEM, "out of memory editing an object");
        }
    }
    kcr__node_free(v);
    free(scratch);
    return err;
}

kcr_err kcr__edit_set_string(kcr_object_edit *e, const char *path, const char *value)
{
    kcr_err err = KCR_OK;
    struct kcr__node *n = string_node(value, &err);
    return n ? set_path(e, path, n) : err;
}

kcr_err kcr__edit_set_int(kcr_object_edit *e, const char *path, int64_t value)
{
    struct kcr__node *n = kcr__node_new(KCR__N_INT);
    if (!n)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory editing an object");
    n->i = value;
    return set_path(e, path, n);
}

kcr_err kcr__edit_set_bool(kcr_object_edit *e, const char *path, bool value)
{
    struct kcr__node *n = kcr__node_new(KCR__N_BOOL);
    if (!n)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory editing an object");
    n->b = value;
    return set_path(e, path, n);
}

kcr_err kcr__edit_set_null(kcr_object_edit *e, const char *path)
{
    struct kcr__node *n = kcr__node_new(KCR__N_NULL);
    if (!n)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory editing an object");
    return set_path(e, path, n);
}

kcr_err kcr__edit_set_json(kcr_object_edit *e, const char *path, const char *json, size_t len)
{
    struct kcr__node *n;
    kcr_err err = kcr__node_parse(json, len, &n);
    return err ? err : set_path(e, path, n);
}

kcr_err kcr__edit_set_value(kcr_object_edit *e, const char *path, kcr_value value)
{
    if (kcr_value_get_type(value) == KCR_VALUE_ABSENT)
        return kcr__fail(KCR_ERR_INVALID, "kcr_object_edit_set_value: the value is absent");
    struct kcr__node *n = kcr__node_from_value(value);
    return n ? set_path(e, path, n) : kcr__fail(KCR_ERR_NOMEM, "out of memory editing an object");
}

kcr_err kcr__edit_append_json(kcr_object_edit *e, const char *path, const char *json, size_t len,
                              size_t *index)
{
    if (!e || !path)
        return kcr__fail(KCR_ERR_INVALID, "NULL argument");
    struct kcr__node *v;
    kcr_err err = kcr__node_parse(json, len, &v);
    if (err != KCR_OK)
        return err;
    char *scratch = malloc(strlen(path) + 1);
    struct kcr__node *parent, *arr = NULL;
    struct kcr__path_seg seg;
    err = scratch ? resolve(e->root, path, true, &parent, &seg, scratch)
                  : kcr__fail(KCR_ERR_NOMEM, "out of memory editing an object");
    if (err == KCR_OK && seg.is_index) {
        if (parent->t != KCR__N_ARR || seg.index >= parent->n)
            err = kcr__fail(KCR_ERR_NOT_FOUND, "path \"%s\": no such element", path);
        else
            arr = parent->items[seg.index];
    } else if (err == KCR_OK && parent->t != KCR__N_MAP) {
        err = kcr__fail(KCR_ERR_INVALID, "path \"%s\": key into a non-object", path);
    } else if (err == KCR_OK) {
        ptrdiff_t i = kcr__node_find(parent, seg.key, seg.key_len);
        if (i >= 0 && parent->items[i]->t != KCR__N_NULL) {
            arr = parent->items[i];
        } else {
            arr = kcr__node_new(KCR__N_ARR);
            if (!arr || !kcr__node_set(parent, seg.key, seg.key_len, arr)) {
                arr = NULL;
                err = kcr__fail(KCR_ERR_NOMEM, "out of memory editing an object");
            }
        }
    }
    if (err == KCR_OK && arr->t != KCR__N_ARR)
        err = kcr__fail(KCR_ERR_INVALID, "path \"%s\" is not an array", path);
    if (err == KCR_OK) {
        size_t at = arr->n;
        struct kcr__node *tmp = v;
        v = NULL;
        if (!kcr__node_push(arr, tmp))
            err = kcr__fail(KCR_ERR_NOMEM, "out of memory editing an object");
        else if (index)
            *index = at;
    }
    kcr__node_free(v);
    free(scratch);
    return err;
}

kcr_err kcr__edit_delete(kcr_object_edit *e, const char *path)
{
    if (!e || !path)
        return kcr__fail(KCR_ERR_INVALID, "NULL argument");
    size_t plen = strlen(path);
    char *scratch = malloc(plen + 1);
    if (!scratch)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory editing an object");
    struct kcr__node *parent;
    struct kcr__path_seg seg;
    kcr_err err = resolve(e->root, path, false, &parent, &seg, scratch);
    if (err == KCR_ERR_NOT_FOUND) {
        err = KCR_OK;
    } else if (err == KCR_OK) {
        if (seg.is_index && parent->t == KCR__N_ARR && seg.index < parent->n) {
            kcr__node_remove_at(parent, seg.index);
        } else if (!seg.is_index && parent->t == KCR__N_MAP) {
            ptrdiff_t i = kcr__node_find(parent, seg.key, seg.key_len);
            if (i >= 0)
                kcr__node_remove_at(parent, (size_t)i);
        }
    }
    free(scratch);
    return err;
}

/* metadata.<field>, created as `t` when missing (or when of another type). */
static struct kcr__node *meta_child(kcr_object_edit *e, const char *field, enum kcr__ntype t,
                                    bool create)
{
    if (e->root->t != KCR__N_MAP)
        return NULL;
    ptrdiff_t i = kcr__node_find(e->root, "metadata", 8);
    struct kcr__node *md;
    if (i < 0 || e->root->items[i]->t != KCR__N_MAP) {
        if (!create)
            return NULL;
        md = kcr__node_new(KCR__N_MAP);
        if (!md || !kcr__node_set(e->root, "metadata", 8, md))
            return NULL;
    } else {
        md = e->root->items[i];
    }
    size_t fl = strlen(field);
    i = kcr__node_find(md, field, fl);
    if (i >= 0 && md->items[i]->t == t)
        return md->items[i];
    if (!create)
        return NULL;
    struct kcr__node *c = kcr__node_new(t);
    if (!c || !kcr__node_set(md, field, fl, c))
        return NULL;
    return c;
}

static kcr_err set_meta_entry(kcr_object_edit *e, const char *field, const char *key,
                              const char *value)
{
    if (!e || !key)
        return kcr__fail(KCR_ERR_INVALID, "NULL argument");
    kcr_err err = KCR_OK;
    struct kcr__node *v = string_node(value, &err);
    if (!v)
        return err;
    struct kcr__node *m = meta_child(e, field, KCR__N_MAP, true);
    if (!m || !kcr__node_set(m, key, strlen(key), v)) {
        if (!m)
            kcr__node_free(v);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory editing an object");
    }
    return KCR_OK;
}

static kcr_err delete_meta_entry(kcr_object_edit *e, const char *field, const char *key)
{
    if (!e || !key)
        return kcr__fail(KCR_ERR_INVALID, "NULL argument");
    struct kcr__node *m = meta_child(e, field, KCR__N_MAP, false);
    ptrdiff_t i = m ? kcr__node_find(m, key, strlen(key)) : -1;
    if (i >= 0)
        kcr__node_remove_at(m, (size_t)i);
    return KCR_OK;
}

kcr_err kcr__edit_set_label(kcr_object_edit *e, const char *key, const char *value)
{
    return set_meta_entry(e, "labels", key, value);
}

kcr_err kcr__edit_delete_label(kcr_object_edit *e, const char *key)
{
    return delete_meta_entry(e, "labels", key);
}

kcr_err kcr__edit_set_annotation(kcr_object_edit *e, const char *key, const char *value)
{
    return set_meta_entry(e, "annotations", key, value);
}

kcr_err kcr__edit_delete_annotation(kcr_object_edit *e, const char *key)
{
    return delete_meta_entry(e, "annotations", key);
}

/* Whether node n is the string s[0..len). */
static bool is_string(const struct kcr__node *n, const char *s, size_t len)
{
    return n->t == KCR__N_STR && n->slen == len && memcmp(n->s, s, len) == 0;
}

kcr_err kcr__edit_add_finalizer(kcr_object_edit *e, const char *finalizer)
{
    if (!e || !finalizer)
        return kcr__fail(KCR_ERR_INVALID, "NULL argument");
    struct kcr__node *a = meta_child(e, "finalizers", KCR__N_ARR, false);
    size_t len = strlen(finalizer);
    for (size_t i = 0; a && i < a->n; i++)
        if (is_string(a->items[i], finalizer, len))
            return KCR_OK;
    kcr_err err = KCR_OK;
    struct kcr__node *v = string_node(finalizer, &err);
    if (!v)
        return err;
    a = meta_child(e, "finalizers", KCR__N_ARR, true);
    if (!a) {
        kcr__node_free(v);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory editing an object");
    }
    return kcr__node_push(a, v) ? KCR_OK
                                : kcr__fail(KCR_ERR_NOMEM, "out of memory editing an object");
}

kcr_err kcr__edit_remove_finalizer(kcr_object_edit *e, const char *finalizer)
{
    if (!e || !finalizer)
        return kcr__fail(KCR_ERR_INVALID, "NULL argument");
    struct kcr__node *a = meta_child(e, "finalizers", KCR__N_ARR, false);
    size_t len = strlen(finalizer);
    for (size_t i = a ? a->n : 0; i-- > 0;)
        if (is_string(a->items[i], finalizer, len))
            kcr__node_remove_at(a, i);
    return KCR_OK;
}

static bool owner_uid_is(const struct kcr__node *m, const char *uid)
{
    if (m->t != KCR__N_MAP)
        return false;
    ptrdiff_t i = kcr__node_find(m, "uid", 3);
    return i >= 0 && m->items[i]->t == KCR__N_STR && strcmp(m->items[i]->s, uid) == 0;
}

kcr_err kcr__edit_set_owner_ref(kcr_object_edit *e, const kcr_owner_ref *ref)
{
    if (!e || !ref || !ref->uid)
        return kcr__fail(KCR_ERR_INVALID, "owner reference without a uid");
    struct kcr__node *m = kcr__node_new(KCR__N_MAP);
    kcr_err err = KCR_OK;
    const char *names[] = {"apiVersion", "kind", "name", "uid"};
    const char *values[] = {ref->api_version, ref->kind, ref->name, ref->uid};
    for (int i = 0; m && i < 4; i++) {
        if (!values[i])
            continue;
        struct kcr__node *s = string_node(values[i], &err);
        if (!s || !kcr__node_set(m, names[i], strlen(names[i]), s)) {
            kcr__node_free(m);
            return err ? err : kcr__fail(KCR_ERR_NOMEM, "out of memory editing an object");
        }
    }
    const char *flags[] = {"controller", "blockOwnerDeletion"};
    bool set[] = {ref->controller, ref->block_owner_deletion};
    for (int i = 0; m && i < 2; i++) {
        if (!set[i])
            continue;
        struct kcr__node *b = kcr__node_new(KCR__N_BOOL);
        if (b)
            b->b = true;
        if (!kcr__node_set(m, flags[i], strlen(flags[i]), b)) {
            kcr__node_free(m);
            m = NULL;
        }
    }
    struct kcr__node *a = m ? meta_child(e, "ownerReferences", KCR__N_ARR, true) : NULL;
    if (!a) {
        kcr__node_free(m);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory editing an object");
    }
    for (size_t i = 0; i < a->n; i++)
        if (owner_uid_is(a->items[i], ref->uid)) {
            kcr__node_free(a->items[i]);
            a->items[i] = m;
            return KCR_OK;
        }
    return kcr__node_push(a, m) ? KCR_OK
                                : kcr__fail(KCR_ERR_NOMEM, "out of memory editing an object");
}

kcr_err kcr__edit_remove_owner_ref(kcr_object_edit *e, const char *uid)
{
    if (!e || !uid)
        return kcr__fail(KCR_ERR_INVALID, "NULL argument");
    struct kcr__node *a = meta_child(e, "ownerReferences", KCR__N_ARR, false);
    for (size_t i = a ? a->n : 0; i-- > 0;)
        if (owner_uid_is(a->items[i], uid))
            kcr__node_remove_at(a, i);
    return KCR_OK;
}

/* ---- merge patch -------------------------------------------------------- */

/* RFC 7386 MergePatch(target, patch): returns the new target (consuming
 * `target`), NULL only when out of memory. */
static struct kcr__node *merge(struct kcr__node *target, kcr_value patch)
{
    if (kcr_value_get_type(patch) != KCR_VALUE_OBJECT) {
        kcr__node_free(target);
        return kcr__node_from_value(patch);
    }
    if (!target || target->t != KCR__N_MAP) {
        kcr__node_free(target);
        target = kcr__node_new(KCR__N_MAP);
        if (!target)
            return NULL;
    }
    size_t n = kcr_value_len(patch);
    for (size_t i = 0; i < n; i++) {
        const char *k;
        size_t kl;
        kcr_value v = kcr_value_entry(patch, i, &k, &kl);
        ptrdiff_t at = kcr__node_find(target, k, kl);
        if (kcr_value_get_type(v) == KCR_VALUE_NULL) {
            if (at >= 0)
                kcr__node_remove_at(target, (size_t)at);
            continue;
        }
        if (at >= 0) {
            struct kcr__node *r = merge(target->items[at], v);
            target->items[at] = r;
            if (!r) {
                kcr__node_free(target);
                return NULL;
            }
        } else if (!kcr__node_set(target, k, kl, merge(NULL, v))) {
            kcr__node_free(target);
            return NULL;
        }
    }
    return target;
}

kcr_err kcr__edit_merge_patch(kcr_object_edit *e, const char *patch, size_t len)
{
    if (!e || !patch)
        return kcr__fail(KCR_ERR_INVALID, "NULL argument");
    kcr_object *p;
    kcr_err err = kcr_object_parse_any(patch, len, &p);
    if (err != KCR_OK)
        return err;
    struct kcr__node *r = merge(e->root, kcr_object_root(p));
    kcr_object_unref(p);
    if (!r) {
        e->root = kcr__node_new(KCR__N_MAP);
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
    kcr_object_edit *e;
    kcr_err err = kcr_object_edit_new(obj, &e);
    if (err != KCR_OK)
        return err;
    err = kcr_object_edit_merge_patch(e, patch, len);
    if (err == KCR_OK)
        err = kcr_object_edit_freeze(e, out);
    kcr_object_edit_free(e);
    return err;
}

/* Patch turning map `a` into map `b`; an empty map when they are equal. */
static struct kcr__node *diff(kcr_value a, kcr_value b)
{
    struct kcr__node *p = kcr__node_new(KCR__N_MAP);
    if (!p)
        return NULL;
    size_t na = kcr_value_len(a), nb = kcr_value_len(b);
    for (size_t i = 0; i < na; i++) {
        const char *k;
        size_t kl;
        kcr_value_entry(a, i, &k, &kl);
        bool found = kcr_value_get_type(kcr__value_member_n(b, k, kl)) != KCR_VALUE_ABSENT;
        if (!found && kcr__node_find(p, k, kl) < 0 &&
            !kcr__node_set(p, k, kl, kcr__node_new(KCR__N_NULL))) {
            kcr__node_free(p);
            return NULL;
        }
    }
    for (size_t j = 0; j < nb; j++) {
        const char *k;
        size_t kl;
        kcr_value vb = kcr_value_entry(b, j, &k, &kl);
        kcr_value va = kcr__value_member_n(a, k, kl);
        struct kcr__node *c = NULL;
        if (kcr_value_get_type(va) == KCR_VALUE_OBJECT &&
            kcr_value_get_type(vb) == KCR_VALUE_OBJECT) {
            c = diff(va, vb);
            if (!c) {
                kcr__node_free(p);
                return NULL;
            }
            if (c->n == 0) {
                kcr__node_free(c);
                continue;
            }
        } else if (kcr_value_get_type(va) == KCR_VALUE_ABSENT || !kcr_value_equal(va, vb)) {
            c = kcr__node_from_value(vb);
            if (!c) {
                kcr__node_free(p);
                return NULL;
            }
        } else {
            continue;
        }
        if (!kcr__node_set(p, k, kl, c)) {
            kcr__node_free(p);
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
    struct kcr__node *p = diff(kcr_object_root(from), kcr_object_root(to));
    if (!p)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory computing a merge patch");
    kcr_err err = kcr__node_to_json(p, out, len);
    kcr__node_free(p);
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
        return kcr__fail(KCR_ERR_STATE, "feeding an object: absent value");
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
    return kcr__fail(KCR_ERR_STATE, "feeding an object: value of unknown type");
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

kcr_err kcr__object_stamp_type(const kcr_object *obj, const char *api_version, const char *kind,
                               kcr_object **out)
{
    kcr_object_edit *e = NULL;
    kcr_err err = kcr_object_edit_new(obj, &e);
    if (err == KCR_OK && *api_version)
        err = kcr_object_edit_set_string(e, "apiVersion", api_version);
    if (err == KCR_OK && *kind)
        err = kcr_object_edit_set_string(e, "kind", kind);
    if (err == KCR_OK)
        err = kcr_object_edit_freeze(e, out);
    kcr_object_edit_free(e);
    return err;
}
