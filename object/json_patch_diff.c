/* JSON Patch (RFC 6902) generation: the operations that turn one object into
 * another, for mutating admission webhooks (the apiserver applies the patch a
 * webhook returns) and anyone who wants a precise, guarded update.
 *
 * Walks both trees together with one yajl generator writing the patch array:
 * members only in `from` are removed, members only in `to` are added, values
 * that differ are replaced; objects are compared member by member and arrays
 * of equal length element by element, so a changed field deep inside yields
 * one small operation. Arrays whose length changed are replaced whole (an
 * element-wise edit script would have to guess at moves; the whole array is
 * always right and the apiserver applies it the same way). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "object/object_internal.h"
#include "object/serialize.h"

/* The JSON Pointer of the value being compared, grown and shrunk as the walk
 * descends and returns. */
struct pointer_buf {
    char *s;
    size_t len, cap;
};

static kcr_err ptr_push(struct pointer_buf *p, const char *tok, size_t n)
{
    size_t need = p->len + 1 + 2 * n + 1; /* '/', each byte escaped at worst, NUL */
    if (need > p->cap) {
        size_t cap = p->cap ? p->cap : 64;
        while (cap < need)
            cap *= 2;
        char *s = realloc(p->s, cap);
        if (!s)
            return kcr__fail(KCR_ERR_NOMEM, "out of memory building a JSON patch");
        p->s = s;
        p->cap = cap;
    }
    p->s[p->len++] = '/';
    for (size_t i = 0; i < n; i++) {
        if (tok[i] == '~' || tok[i] == '/') {
            p->s[p->len++] = '~';
            p->s[p->len++] = tok[i] == '~' ? '0' : '1';
        } else {
            p->s[p->len++] = tok[i];
        }
    }
    p->s[p->len] = '\0';
    return KCR_OK;
}

static kcr_err ptr_push_index(struct pointer_buf *p, size_t i)
{
    char tok[24];
    int n = snprintf(tok, sizeof tok, "%zu", i);
    return ptr_push(p, tok, (size_t)n);
}

static kcr_err gen_status(yajl_gen_status st)
{
    return st == yajl_gen_status_ok ? KCR_OK
                                    : kcr__fail(KCR_ERR_NOMEM, "writing a JSON patch failed");
}

/* Writes {"op":op,"path":path[,"value":v]}; v ABSENT leaves "value" out. */
static kcr_err emit(yajl_gen g, const char *op, const struct pointer_buf *p, kcr_value v)
{
    yajl_gen_status st = yajl_gen_map_open(g);
    if (st == yajl_gen_status_ok)
        st = yajl_gen_string(g, (const unsigned char *)"op", 2);
    if (st == yajl_gen_status_ok)
        st = yajl_gen_string(g, (const unsigned char *)op, strlen(op));
    if (st == yajl_gen_status_ok)
        st = yajl_gen_string(g, (const unsigned char *)"path", 4);
    if (st == yajl_gen_status_ok)
        st = yajl_gen_string(g, (const unsigned char *)(p->len ? p->s : ""), p->len);
    if (st != yajl_gen_status_ok)
        return gen_status(st);
    if (v.obj && v.ref != KCR__REF_ABSENT) {
        st = yajl_gen_string(g, (const unsigned char *)"value", 5);
        if (st != yajl_gen_status_ok)
            return gen_status(st);
        kcr_err err = kcr__gen_value(g, v.obj, v.ref);
        if (err)
            return err;
    }
    return gen_status(yajl_gen_map_close(g));
}

static kcr_err diff_value(yajl_gen g, struct pointer_buf *p, kcr_value a, kcr_value b, int depth);

static kcr_err diff_object(yajl_gen g, struct pointer_buf *p, kcr_value a, kcr_value b, int depth)
{
    size_t base = p->len;
    kcr_err err = KCR_OK;
    size_t na = kcr_value_len(a), nb = kcr_value_len(b);
    for (size_t i = 0; i < na && !err; i++) {
        const char *key;
        size_t klen;
        kcr_value av = kcr_value_entry(a, i, &key, &klen);
        kcr_value bv = kcr__value_member_n(b, key, klen);
        err = ptr_push(p, key, klen);
        if (!err)
            err = kcr_value_get_type(bv) == KCR_VALUE_ABSENT
                      ? emit(g, "remove", p, (kcr_value){0})
                      : diff_value(g, p, av, bv, depth + 1);
        p->len = base;
    }
    for (size_t i = 0; i < nb && !err; i++) {
        const char *key;
        size_t klen;
        kcr_value bv = kcr_value_entry(b, i, &key, &klen);
        if (kcr_value_get_type(kcr__value_member_n(a, key, klen)) != KCR_VALUE_ABSENT)
            continue;
        err = ptr_push(p, key, klen);
        if (!err)
            err = emit(g, "add", p, bv);
        p->len = base;
    }
    if (p->s)
        p->s[base] = '\0';
    return err;
}

static kcr_err diff_value(yajl_gen g, struct pointer_buf *p, kcr_value a, kcr_value b, int depth)
{
    if (depth > 256)
        return kcr__fail(KCR_ERR_TOO_LARGE, "JSON patch: documents nest deeper than 256 levels");
    kcr_value_type ta = kcr_value_get_type(a), tb = kcr_value_get_type(b);
    if (ta == KCR_VALUE_OBJECT && tb == KCR_VALUE_OBJECT)
        return diff_object(g, p, a, b, depth);
    if (ta == KCR_VALUE_ARRAY && tb == KCR_VALUE_ARRAY && kcr_value_len(a) == kcr_value_len(b)) {
        size_t base = p->len;
        kcr_err err = KCR_OK;
        for (size_t i = 0, n = kcr_value_len(a); i < n && !err; i++) {
            err = ptr_push_index(p, i);
            if (!err)
                err = diff_value(g, p, kcr_value_at(a, i), kcr_value_at(b, i), depth + 1);
            p->len = base;
        }
        if (p->s)
            p->s[base] = '\0';
        return err;
    }
    if (kcr_value_equal(a, b) && ta == tb)
        return KCR_OK;
    return emit(g, "replace", p, b);
}

kcr_err kcr_object_json_patch_diff(const kcr_object *from, const kcr_object *to, char **out,
                                   size_t *len)
{
    if (!out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_object_json_patch_diff: out is NULL");
    *out = NULL;
    if (!from || !to)
        return kcr__fail(KCR_ERR_INVALID, "kcr_object_json_patch_diff: from or to is NULL");
    yajl_gen g = kcr__gen_new();
    if (!g)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory building a JSON patch");
    struct pointer_buf p = {0};
    kcr_err err = gen_status(yajl_gen_array_open(g));
    if (!err)
        err = diff_value(g, &p, kcr_object_root(from), kcr_object_root(to), 0);
    if (!err)
        err = gen_status(yajl_gen_array_close(g));
    free(p.s);
    return kcr__gen_finish(g, err, out, len);
}
