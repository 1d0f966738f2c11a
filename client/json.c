/* A small mutable JSON tree on top of yajl's parser and generator. */
#include "client/json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_parse.h>

#include "core/error.h"
#include "core/str.h"

enum { MAX_DEPTH = 512 };

kcr__json *kcr__json_new(kcr__json_type type)
{
    kcr__json *j = calloc(1, sizeof *j);
    if (j)
        j->type = type;
    return j;
}

kcr__json *kcr__json_new_string(const char *s, size_t len)
{
    kcr__json *j = kcr__json_new(KCR__JSON_STRING);
    if (!j)
        return NULL;
    j->s = kcr__memdup_str(s, len);
    if (!j->s) {
        free(j);
        return NULL;
    }
    j->len = len;
    return j;
}

kcr__json *kcr__json_new_str(const char *s)
{
    return kcr__json_new_string(s, strlen(s));
}

static kcr__json *new_number(const char *s, size_t len)
{
    kcr__json *j = kcr__json_new_string(s, len);
    if (j)
        j->type = KCR__JSON_NUMBER;
    return j;
}

kcr__json *kcr__json_new_int(int64_t v)
{
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%lld", (long long)v);
    return new_number(buf, (size_t)n);
}

kcr__json *kcr__json_new_bool(bool v)
{
    kcr__json *j = kcr__json_new(KCR__JSON_BOOL);
    if (j)
        j->b = v;
    return j;
}

void kcr__json_free(kcr__json *j)
{
    if (!j)
        return;
    free(j->s);
    for (size_t i = 0; i < j->n; i++) {
        if (j->keys)
            free(j->keys[i]);
        kcr__json_free(j->vals[i]);
    }
    free(j->keys);
    free(j->vals);
    free(j);
}

static kcr_err grow(kcr__json *j)
{
    if (j->n < j->cap)
        return KCR_OK;
    size_t cap = j->cap ? j->cap * 2 : 4;
    kcr__json **vals = realloc(j->vals, cap * sizeof *vals);
    if (!vals)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    j->vals = vals;
    if (j->type == KCR__JSON_OBJECT) {
        char **keys = realloc(j->keys, cap * sizeof *keys);
        if (!keys)
            return kcr__fail(KCR_ERR_NOMEM, "out of memory");
        j->keys = keys;
    }
    j->cap = cap;
    return KCR_OK;
}

kcr_err kcr__json_append(kcr__json *arr, kcr__json *v)
{
    if (!v)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    if (grow(arr) != KCR_OK) {
        kcr__json_free(v);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    }
    arr->vals[arr->n++] = v;
    return KCR_OK;
}

static ptrdiff_t find_key(const kcr__json *j, const char *key)
{
    if (!j || j->type != KCR__JSON_OBJECT)
        return -1;
    for (size_t i = 0; i < j->n; i++)
        if (strcmp(j->keys[i], key) == 0)
            return (ptrdiff_t)i;
    return -1;
}

kcr__json *kcr__json_get(const kcr__json *j, const char *key)
{
    ptrdiff_t i = find_key(j, key);
    return i < 0 ? NULL : j->vals[i];
}

kcr__json *kcr__json_path(const kcr__json *j, ...)
{
    va_list ap;
    va_start(ap, j);
    const char *key;
    while (j && (key = va_arg(ap, const char *)))
        j = kcr__json_get(j, key);
    va_end(ap);
    return (kcr__json *)j;
}

const char *kcr__json_str(const kcr__json *j)
{
    return j && j->type == KCR__JSON_STRING ? j->s : NULL;
}

int64_t kcr__json_int(const kcr__json *j, int64_t dflt)
{
    if (!j || j->type != KCR__JSON_NUMBER)
        return dflt;
    char *end;
    long long v = strtoll(j->s, &end, 10);
    return *end == '\0' ? (int64_t)v : (int64_t)strtod(j->s, NULL);
}

kcr_err kcr__json_set(kcr__json *obj, const char *key, kcr__json *v)
{
    if (!v)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    if (!obj || obj->type != KCR__JSON_OBJECT) {
        kcr__json_free(v);
        return KCR_ERR_INVALID;
    }
    ptrdiff_t i = find_key(obj, key);
    if (i >= 0) {
        kcr__json_free(obj->vals[i]);
        obj->vals[i] = v;
        return KCR_OK;
    }
    char *k = strdup(key);
    if (!k || grow(obj) != KCR_OK) {
        free(k);
        kcr__json_free(v);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    }
    obj->keys[obj->n] = k;
    obj->vals[obj->n++] = v;
    return KCR_OK;
}

kcr_err kcr__json_set_str(kcr__json *obj, const char *key, const char *s)
{
    return kcr__json_set(obj, key, kcr__json_new_str(s));
}

bool kcr__json_remove(kcr__json *obj, const char *key)
{
    ptrdiff_t i = find_key(obj, key);
    if (i < 0)
        return false;
    free(obj->keys[i]);
    kcr__json_free(obj->vals[i]);
    memmove(obj->keys + i, obj->keys + i + 1, (obj->n - (size_t)i - 1) * sizeof *obj->keys);
    memmove(obj->vals + i, obj->vals + i + 1, (obj->n - (size_t)i - 1) * sizeof *obj->vals);
    obj->n--;
    return true;
}

kcr__json *kcr__json_child_object(kcr__json *obj, const char *key)
{
    kcr__json *c = kcr__json_get(obj, key);
    if (c && c->type == KCR__JSON_OBJECT)
        return c;
    if (kcr__json_set(obj, key, kcr__json_new(KCR__JSON_OBJECT)) != KCR_OK)
        return NULL;
    return kcr__json_get(obj, key);
}

kcr__json *kcr__json_copy(const kcr__json *j)
{
    if (!j)
        return NULL;
    kcr__json *c;
    switch (j->type) {
    case KCR__JSON_STRING: return kcr__json_new_string(j->s, j->len);
    case KCR__JSON_NUMBER: return new_number(j->s, j->len);
    case KCR__JSON_BOOL: return kcr__json_new_bool(j->b);
    case KCR__JSON_NULL: return kcr__json_new(KCR__JSON_NULL);
    case KCR__JSON_OBJECT:
        c = kcr__json_new(KCR__JSON_OBJECT);
        for (size_t i = 0; c && i < j->n; i++)
            if (kcr__json_set(c, j->keys[i], kcr__json_copy(j->vals[i])) != KCR_OK) {
                kcr__json_free(c);
                c = NULL;
            }
        return c;
    case KCR__JSON_ARRAY:
        c = kcr__json_new(KCR__JSON_ARRAY);
        for (size_t i = 0; c && i < j->n; i++)
            if (kcr__json_append(c, kcr__json_copy(j->vals[i])) != KCR_OK) {
                kcr__json_free(c);
                c = NULL;
            }
        return c;
    }
    return NULL;
}

bool kcr__json_equal(const kcr__json *a, const kcr__json *b)
{
    if (!a || !b)
        return a == b;
    if (a->type != b->type)
        return false;
    switch (a->type) {
    case KCR__JSON_NULL: return true;
    case KCR__JSON_BOOL: return a->b == b->b;
    case KCR__JSON_NUMBER:
        return strcmp(a->s, b->s) == 0 || strtod(a->s, NULL) == strtod(b->s, NULL);
    case KCR__JSON_STRING: return a->len == b->len && memcmp(a->s, b->s, a->len) == 0;
    case KCR__JSON_ARRAY:
        if (a->n != b->n)
            return false;
        for (size_t i = 0; i < a->n; i++)
            if (!kcr__json_equal(a->vals[i], b->vals[i]))
                return false;
        return true;
    case KCR__JSON_OBJECT:
        if (a->n != b->n)
            return false;
        for (size_t i = 0; i < a->n; i++)
            if (!kcr__json_equal(a->vals[i], kcr__json_get(b, a->keys[i])))
                return false;
        return true;
    }
    return false;
}

/* ---- builder ------------------------------------------------------------ */

struct kcr__json_builder {
    kcr__json *stack[MAX_DEPTH];
    size_t depth;
    char *pending_key; /* key waiting for its value in the innermost object */
    kcr__json *done;
};

kcr__json_builder *kcr__json_builder_new(void)
{
    return calloc(1, sizeof(kcr__json_builder));
}

void kcr__json_builder_reset(kcr__json_builder *b)
{
    if (b->depth)
        kcr__json_free(b->stack[0]);
    b->depth = 0;
    free(b->pending_key);
    b->pending_key = NULL;
    kcr__json_free(b->done);
    b->done = NULL;
}

void kcr__json_builder_free(kcr__json_builder *b)
{
    if (!b)
        return;
    kcr__json_builder_reset(b);
    free(b);
}

/* Attaches v to the innermost container, or makes it the result. */
static kcr_err attach(kcr__json_builder *b, kcr__json *v)
{
    if (!v)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    if (b->depth == 0) {
        if (b->done) {
            kcr__json_free(v);
            return KCR_ERR_PARSE;
        }
        b->done = v;
        return KCR_OK;
    }
    kcr__json *top = b->stack[b->depth - 1];
    if (top->type == KCR__JSON_ARRAY)
        return kcr__json_append(top, v);
    if (!b->pending_key) {
        kcr__json_free(v);
        return KCR_ERR_PARSE;
    }
    /* Duplicate keys: the last one wins, like Go's encoding/json. */
    kcr_err err = kcr__json_set(top, b->pending_key, v);
    free(b->pending_key);
    b->pending_key = NULL;
    return err;
}

kcr_err kcr__json_builder_scalar(kcr__json_builder *b, kcr__json *v)
{
    return attach(b, v);
}

static kcr_err start(kcr__json_builder *b, kcr__json_type type)
{
    if (b->depth >= MAX_DEPTH)
        return KCR_ERR_TOO_LARGE;
    kcr__json *v = kcr__json_new(type);
    if (!v)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    if (b->depth == 0) {
        if (b->done) {
            kcr__json_free(v);
            return KCR_ERR_PARSE;
        }
        b->stack[b->depth++] = v;
        return KCR_OK;
    }
    kcr_err err = attach(b, v);
    if (err != KCR_OK)
        return err;
    b->stack[b->depth++] = v;
    return KCR_OK;
}

kcr_err kcr__json_builder_start_map(kcr__json_builder *b)
{
    return start(b, KCR__JSON_OBJECT);
}

kcr_err kcr__json_builder_start_array(kcr__json_builder *b)
{
    return start(b, KCR__JSON_ARRAY);
}

kcr_err kcr__json_builder_map_key(kcr__json_builder *b, const char *key, size_t len)
{
    if (!b->depth || b->stack[b->depth - 1]->type != KCR__JSON_OBJECT || b->pending_key)
        return KCR_ERR_PARSE;
    b->pending_key = kcr__memdup_str(key, len);
    return b->pending_key ? KCR_OK : kcr__fail(KCR_ERR_NOMEM, "out of memory");
}

kcr_err kcr__json_builder_end(kcr__json_builder *b)
{
    if (!b->depth)
        return KCR_ERR_PARSE;
    b->depth--;
    if (b->depth == 0)
        b->done = b->stack[0];
    return KCR_OK;
}

bool kcr__json_builder_done(const kcr__json_builder *b)
{
    return b->depth == 0 && b->done != NULL;
}

kcr__json *kcr__json_builder_take(kcr__json_builder *b)
{
    if (b->depth)
        return NULL;
    kcr__json *v = b->done;
    b->done = NULL;
    return v;
}

/* ---- parse -------------------------------------------------------------- */

struct parse_ctx {
    kcr__json_builder *b;
    kcr_err err;
};

#define CB_RETURN(expr)                                                                            \
    do {                                                                                           \
        struct parse_ctx *p = ctx;                                                                 \
        p->err = (expr);                                                                           \
        return p->err == KCR_OK;                                                                   \
    } while (0)

static int on_null(void *ctx)
{
    CB_RETURN(attach(((struct parse_ctx *)ctx)->b, kcr__json_new(KCR__JSON_NULL)));
}
static int on_bool(void *ctx, int v)
{
    CB_RETURN(attach(((struct parse_ctx *)ctx)->b, kcr__json_new_bool(v != 0)));
}
static int on_number(void *ctx, const char *s, size_t len)
{
    CB_RETURN(attach(((struct parse_ctx *)ctx)->b, new_number(s, len)));
}
static int on_string(void *ctx, const unsigned char *s, size_t len)
{
    CB_RETURN(attach(((struct parse_ctx *)ctx)->b, kcr__json_new_string((const char *)s, len)));
}
static int on_start_map(void *ctx)
{
    CB_RETURN(kcr__json_builder_start_map(((struct parse_ctx *)ctx)->b));
}
static int on_key(void *ctx, const unsigned char *s, size_t len)
{
    CB_RETURN(kcr__json_builder_map_key(((struct parse_ctx *)ctx)->b, (const char *)s, len));
}
static int on_end(void *ctx)
{
    CB_RETURN(kcr__json_builder_end(((struct parse_ctx *)ctx)->b));
}
static int on_start_array(void *ctx)
{
    CB_RETURN(kcr__json_builder_start_array(((struct parse_ctx *)ctx)->b));
}

static const yajl_callbacks parse_callbacks = {
    .yajl_null = on_null,
    .yajl_boolean = on_bool,
    .yajl_number = on_number,
    .yajl_string = on_string,
    .yajl_start_map = on_start_map,
    .yajl_map_key = on_key,
    .yajl_end_map = on_end,
    .yajl_start_array = on_start_array,
    .yajl_end_array = on_end,
};

kcr_err kcr__json_parse(const char *buf, size_t len, kcr__json **out)
{
    *out = NULL;
    struct parse_ctx ctx = {.b = kcr__json_builder_new(), .err = KCR_OK};
    if (!ctx.b)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory parsing JSON");
    yajl_handle h = yajl_alloc(&parse_callbacks, NULL, &ctx);
    if (!h) {
        kcr__json_builder_free(ctx.b);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory parsing JSON");
    }
    yajl_status st = yajl_parse(h, (const unsigned char *)buf, len);
    if (st == yajl_status_ok)
        st = yajl_complete_parse(h);
    kcr_err err = KCR_OK;
    if (st != yajl_status_ok) {
        if (ctx.err != KCR_OK && ctx.err != KCR_ERR_PARSE) {
            err = kcr__fail(ctx.err, "JSON document: %s", kcr_strerror(ctx.err));
        } else {
            unsigned char *msg = yajl_get_error(h, 0, NULL, 0);
            err = kcr__fail(KCR_ERR_PARSE, "bad JSON at byte %zu: %s",
                            yajl_get_bytes_consumed(h), msg ? (char *)msg : "?");
            yajl_free_error(h, msg);
        }
    } else {
        *out = kcr__json_builder_take(ctx.b);
        if (!*out)
            err = kcr__fail(KCR_ERR_PARSE, "empty JSON document");
    }
    yajl_free(h);
    kcr__json_builder_free(ctx.b);
    return err;
}

/* ---- dump --------------------------------------------------------------- */

static yajl_gen_status gen(yajl_gen g, const kcr__json *j)
{
    yajl_gen_status st = yajl_gen_status_ok;
    switch (j->type) {
    case KCR__JSON_NULL: return yajl_gen_null(g);
    case KCR__JSON_BOOL: return yajl_gen_bool(g, j->b);
    case KCR__JSON_NUMBER: return yajl_gen_number(g, j->s, j->len);
    case KCR__JSON_STRING: return yajl_gen_string(g, (const unsigned char *)j->s, j->len);
    case KCR__JSON_OBJECT:
        st = yajl_gen_map_open(g);
        for (size_t i = 0; st == yajl_gen_status_ok && i < j->n; i++) {
            st = yajl_gen_string(g, (const unsigned char *)j->keys[i], strlen(j->keys[i]));
            if (st == yajl_gen_status_ok)
                st = gen(g, j->vals[i]);
        }
        return st == yajl_gen_status_ok ? yajl_gen_map_close(g) : st;
    case KCR__JSON_ARRAY:
        st = yajl_gen_array_open(g);
        for (size_t i = 0; st == yajl_gen_status_ok && i < j->n; i++)
            st = gen(g, j->vals[i]);
        return st == yajl_gen_status_ok ? yajl_gen_array_close(g) : st;
    }
    return yajl_gen_invalid_string;
}

kcr_err kcr__json_dump(const kcr__json *j, char **out, size_t *len)
{
    *out = NULL;
    yajl_gen g = yajl_gen_alloc(NULL);
    if (!g)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    yajl_gen_config(g, yajl_gen_validate_utf8, 0);
    kcr_err err = KCR_OK;
    if (gen(g, j) != yajl_gen_status_ok) {
        err = kcr__fail(KCR_ERR_INVALID, "cannot serialize JSON (depth or bad number)");
    } else {
        const unsigned char *buf;
        size_t n;
        yajl_gen_get_buf(g, &buf, &n);
        *out = kcr__memdup_str(buf, n);
        if (!*out)
            err = kcr__fail(KCR_ERR_NOMEM, "out of memory");
        else if (len)
            *len = n;
    }
    yajl_gen_free(g);
    return err;
}

/* ---- patches -------------------------------------------------------------- */

kcr_err kcr__json_merge_patch(kcr__json **target, const kcr__json *patch)
{
    if (patch->type != KCR__JSON_OBJECT) {
        kcr__json *c = kcr__json_copy(patch);
        if (!c)
            return kcr__fail(KCR_ERR_NOMEM, "out of memory");
        kcr__json_free(*target);
        *target = c;
        return KCR_OK;
    }
    if (!*target || (*target)->type != KCR__JSON_OBJECT) {
        kcr__json_free(*target);
        *target = kcr__json_new(KCR__JSON_OBJECT);
        if (!*target)
            return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < patch->n; i++) {
        const char *key = patch->keys[i];
        const kcr__json *pv = patch->vals[i];
        if (pv->type == KCR__JSON_NULL) {
            kcr__json_remove(*target, key);
            continue;
        }
        ptrdiff_t at = find_key(*target, key);
        if (at >= 0) {
            kcr_err err = kcr__json_merge_patch(&(*target)->vals[at], pv);
            if (err != KCR_OK)
                return err;
        } else {
            kcr__json *nv = NULL;
            kcr_err err = kcr__json_merge_patch(&nv, pv);
            if (err == KCR_OK)
                err = kcr__json_set(*target, key, nv);
            else
                kcr__json_free(nv);
            if (err != KCR_OK)
                return err;
        }
    }
    return KCR_OK;
}
