/* JSON Patch (RFC 6902) with JSON Pointers (RFC 6901) on the edit tree.
 *
 * Operations run one after another on the tree; a patch is all or nothing:
 * kcr_object_edit_json_patch works on a copy and keeps it only when every
 * operation succeeded. Like the Kubernetes apiserver (and unlike the letter
 * of the RFC), `test` with the value null also passes when the member is
 * missing from an existing object, so "test that there is no X" can guard an
 * add (kube-rs's finalizer patches rely on it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "object/edit_tree.h"
#include "object/object_internal.h"

/* Bound on the nodes all `copy` operations of one patch may create: a patch
 * of a few dozen copies of the root would otherwise double the document each
 * time (the apiserver bounds copies the same way). */
#define MAX_COPIED_NODES (UINT64_C(1) << 19)

/* A parsed pointer: n unescaped reference tokens. */
struct pointer {
    const char *text; /* the pointer as written, for messages */
    char **tok;
    size_t *len;
    size_t n;
};

/* Context of one operation, for error messages. */
struct op_ctx {
    size_t index;
    const char *op;
    const char *path;
};

static kcr_err op_fail(const struct op_ctx *c, kcr_err err, const char *what, const char *ptr)
{
    return kcr__fail(err, "JSON patch operation %zu (%s %s): %s \"%s\"", c->index, c->op, c->path,
                     what, ptr);
}

static void pointer_clear(struct pointer *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->tok[i]);
    free(p->tok);
    free(p->len);
    *p = (struct pointer){0};
}

/* Splits and unescapes (~1 is '/', ~0 is '~'; any other '~' is an error). */
static kcr_err pointer_parse(const struct op_ctx *c, const char *s, size_t slen, struct pointer *p)
{
    *p = (struct pointer){.text = s};
    if (slen == 0)
        return KCR_OK;
    if (s[0] != '/')
        return op_fail(c, KCR_ERR_PARSE, "a JSON pointer must be empty or start with '/':", s);
    size_t n = 0;
    for (size_t i = 0; i < slen; i++)
        n += s[i] == '/';
    p->tok = calloc(n, sizeof *p->tok);
    p->len = calloc(n, sizeof *p->len);
    if (!p->tok || !p->len) {
        pointer_clear(p);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory applying a JSON patch");
    }
    size_t i = 1;
    while (p->n < n) {
        size_t end = i;
        while (end < slen && s[end] != '/')
            end++;
        char *t = malloc(end - i + 1);
        if (!t) {
            pointer_clear(p);
            return kcr__fail(KCR_ERR_NOMEM, "out of memory applying a JSON patch");
        }
        size_t o = 0;
        for (size_t k = i; k < end; k++) {
            if (s[k] != '~') {
                t[o++] = s[k];
            } else if (k + 1 < end && (s[k + 1] == '0' || s[k + 1] == '1')) {
                t[o++] = s[++k] == '0' ? '~' : '/';
            } else {
                free(t);
                pointer_clear(p);
                return op_fail(c, KCR_ERR_PARSE, "'~' must be followed by 0 or 1 in pointer", s);
            }
        }
        t[o] = '\0';
        p->tok[p->n] = t;
        p->len[p->n++] = o;
        i = end + 1;
    }
    return KCR_OK;
}

/* An array index token: "0" or digits without a leading zero, below `limit`. */
static bool parse_index(const char *tok, size_t len, size_t limit, size_t *out)
{
    if (len == 0 || len > 19 || (tok[0] == '0' && len > 1))
        return false;
    size_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (tok[i] < '0' || tok[i] > '9')
            return false;
        v = v * 10 + (size_t)(tok[i] - '0');
    }
    *out = v;
    return v < limit;
}

/* The child named by token i of p inside `cur`, or NULL. */
static struct kcr__node *child(struct kcr__node *cur, const struct pointer *p, size_t i)
{
    size_t idx;
    if (cur->t == KCR__N_MAP) {
        ptrdiff_t k = kcr__node_find(cur, p->tok[i], p->len[i]);
        return k >= 0 ? cur->items[k] : NULL;
    }
    if (cur->t == KCR__N_ARR && parse_index(p->tok[i], p->len[i], cur->n, &idx))
        return cur->items[idx];
    return NULL;
}

/* The container holding the last token of p (p->n >= 1). */
static kcr_err parent_of(const struct op_ctx *c, struct kcr__node *root, const struct pointer *p,
                         struct kcr__node **out)
{
    struct kcr__node *cur = root;
    for (size_t i = 0; i + 1 < p->n; i++) {
        cur = child(cur, p, i);
        if (!cur)
            return op_fail(c, KCR_ERR_NOT_FOUND, "no such parent for", p->text);
    }
    if (cur->t != KCR__N_MAP && cur->t != KCR__N_ARR)
        return op_fail(c, KCR_ERR_INVALID, "the parent is neither an object nor an array in",
                       p->text);
    *out = cur;
    return KCR_OK;
}

/* The value p names, or NULL (with the error set) when there is none. */
static struct kcr__node *value_at(const struct op_ctx *c, struct kcr__node *root,
                                  const struct pointer *p, kcr_err *err)
{
    struct kcr__node *cur = root;
    for (size_t i = 0; cur && i < p->n; i++)
        cur = child(cur, p, i);
    if (!cur)
        *err = op_fail(c, KCR_ERR_NOT_FOUND, "no value at", p->text);
    return cur;
}

/* Levels of containers in n (0 for a scalar). Documents never nest deeper
 * than KCR__MAX_DEPTH (parsing refuses more, and so does every write
 * below), so this recursion is bounded. */
static size_t node_depth(const struct kcr__node *n)
{
    if (n->t != KCR__N_MAP && n->t != KCR__N_ARR)
        return 0;
    size_t d = 0;
    for (size_t i = 0; i < n->n; i++) {
        size_t di = node_depth(n->items[i]);
        if (di > d)
            d = di;
    }
    return d + 1;
}

/* Keeps the document within the depth an object may have: the p->n
 * containers on the way (root included) plus the value's own. */
static kcr_err check_depth(const struct op_ctx *c, const struct pointer *p,
                           const struct kcr__node *v)
{
    if (p->n + node_depth(v) > KCR__MAX_DEPTH)
        return op_fail(c, KCR_ERR_TOO_LARGE, "the document would nest deeper than 256 levels at",
                       p->text);
    return KCR_OK;
}

/* Adds v at p (takes v): inserts into arrays ("-" appends), sets object
 * members, replaces the root for the empty pointer. */
static kcr_err add_at(const struct op_ctx *c, struct kcr__node **root, const struct pointer *p,
                      struct kcr__node *v)
{
    kcr_err err = check_depth(c, p, v);
    if (err != KCR_OK) {
        kcr__node_free(v);
        return err;
    }
    if (p->n == 0) {
        kcr__node_free(*root);
        *root = v;
        return KCR_OK;
    }
    struct kcr__node *parent;
    if ((err = parent_of(c, *root, p, &parent)) != KCR_OK) {
        kcr__node_free(v);
        return err;
    }
    const char *tok = p->tok[p->n - 1];
    size_t len = p->len[p->n - 1], idx;
    bool ok;
    if (parent->t == KCR__N_MAP) {
        ok = kcr__node_set(parent, tok, len, v);
    } else if (len == 1 && tok[0] == '-') {
        ok = kcr__node_push(parent, v);
    } else if (parse_index(tok, len, parent->n + 1, &idx)) {
        ok = kcr__node_insert(parent, idx, v);
    } else {
        kcr__node_free(v);
        return op_fail(c, KCR_ERR_NOT_FOUND, "array index out of range or malformed in", p->text);
    }
    return ok ? KCR_OK : kcr__fail(KCR_ERR_NOMEM, "out of memory applying a JSON patch");
}

/* Detaches the value at p (p->n >= 1) into *out. */
static kcr_err take_at(const struct op_ctx *c, struct kcr__node *root, const struct pointer *p,
                       struct kcr__node **out)
{
    struct kcr__node *parent;
    kcr_err err = parent_of(c, root, p, &parent);
    if (err != KCR_OK)
        return err;
    const char *tok = p->tok[p->n - 1];
    size_t len = p->len[p->n - 1], idx;
    ptrdiff_t at = -1;
    if (parent->t == KCR__N_MAP)
        at = kcr__node_find(parent, tok, len);
    else if (parse_index(tok, len, parent->n, &idx))
        at = (ptrdiff_t)idx;
    if (at < 0)
        return op_fail(c, KCR_ERR_NOT_FOUND, "no value at", p->text);
    *out = kcr__node_take_at(parent, (size_t)at);
    return KCR_OK;
}

/* True when the first n tokens of a and b are equal. */
static bool prefix_equal(const struct pointer *a, const struct pointer *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a->len[i] != b->len[i] || memcmp(a->tok[i], b->tok[i], a->len[i]) != 0)
            return false;
    return true;
}

/* Replaces the existing value at p by v (takes v), keeping its position. */
static kcr_err replace_at(const struct op_ctx *c, struct kcr__node **root, const struct pointer *p,
                          struct kcr__node *v)
{
    kcr_err err = check_depth(c, p, v);
    if (err != KCR_OK) {
        kcr__node_free(v);
        return err;
    }
    struct kcr__node **slot = root;
    for (size_t i = 0; i < p->n; i++) {
        struct kcr__node *cur = *slot;
        size_t idx;
        slot = NULL;
        if (cur->t == KCR__N_MAP) {
            ptrdiff_t k = kcr__node_find(cur, p->tok[i], p->len[i]);
            if (k >= 0)
                slot = &cur->items[k];
        } else if (cur->t == KCR__N_ARR && parse_index(p->tok[i], p->len[i], cur->n, &idx)) {
            slot = &cur->items[idx];
        }
        if (!slot) {
            kcr__node_free(v);
            return op_fail(c, KCR_ERR_NOT_FOUND, "no value at", p->text);
        }
    }
    kcr__node_free(*slot);
    *slot = v;
    return KCR_OK;
}

static uint64_t node_count(const struct kcr__node *n)
{
    uint64_t total = 1;
    for (size_t i = 0; i < n->n; i++)
        total += node_count(n->items[i]);
    return total;
}

/* `test`: the value at p must equal `want`; a missing member of an existing
 * object counts as null (see the file comment). */
static kcr_err test_at(const struct op_ctx *c, struct kcr__node *root, const struct pointer *p,
                       kcr_value want)
{
    struct kcr__node *have = root;
    for (size_t i = 0; have && i < p->n; i++) {
        struct kcr__node *next = child(have, p, i);
        if (!next && i + 1 == p->n && have->t == KCR__N_MAP &&
            kcr_value_get_type(want) == KCR_VALUE_NULL)
            return KCR_OK;
        have = next;
    }
    if (!have)
        return op_fail(c, KCR_ERR_CONFLICT, "test failed: no value at", p->text);
    struct kcr__node *w = kcr__node_from_value(want);
    if (!w)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory applying a JSON patch");
    bool eq = kcr__node_equal(have, w);
    kcr__node_free(w);
    return eq ? KCR_OK : op_fail(c, KCR_ERR_CONFLICT, "test failed: the value differs at", p->text);
}

/* A required string member of an operation. */
static kcr_err op_string(const struct op_ctx *c, kcr_value op, const char *key, const char **out,
                         size_t *len)
{
    *out = kcr_value_get_type(kcr_value_member(op, key)) == KCR_VALUE_STRING
               ? kcr_value_string(kcr_value_member(op, key), len)
               : NULL;
    if (!*out)
        return kcr__fail(KCR_ERR_PARSE, "JSON patch operation %zu (%s): \"%s\" must be a string",
                         c->index, c->op ? c->op : "?", key);
    return KCR_OK;
}

static kcr_err apply_op(struct kcr__node **root, kcr_value op, size_t index, uint64_t *copied)
{
    struct op_ctx c = {.index = index, .path = ""};
    if (kcr_value_get_type(op) != KCR_VALUE_OBJECT)
        return kcr__fail(KCR_ERR_PARSE, "JSON patch operation %zu is not an object", index);
    const char *name, *path, *from = NULL;
    size_t name_len, path_len, from_len = 0;
    kcr_err err = op_string(&c, op, "op", &name, &name_len);
    if (err != KCR_OK)
        return err;
    c.op = name;
    if ((err = op_string(&c, op, "path", &path, &path_len)) != KCR_OK)
        return err;
    c.path = path;
    bool is_move = strcmp(name, "move") == 0, is_copy = strcmp(name, "copy") == 0;
    bool is_add = strcmp(name, "add") == 0, is_replace = strcmp(name, "replace") == 0;
    bool is_test = strcmp(name, "test") == 0, is_remove = strcmp(name, "remove") == 0;
    if (!(is_move || is_copy || is_add || is_replace || is_test || is_remove))
        return kcr__fail(KCR_ERR_PARSE, "JSON patch operation %zu: unknown op \"%s\"", index, name);
    kcr_value value = kcr_value_member(op, "value");
    if ((is_add || is_replace || is_test) && kcr_value_get_type(value) == KCR_VALUE_ABSENT)
        return kcr__fail(KCR_ERR_PARSE, "JSON patch operation %zu (%s %s) lacks \"value\"", index,
                         name, path);
    if ((is_move || is_copy) && (err = op_string(&c, op, "from", &from, &from_len)) != KCR_OK)
        return err;

    struct pointer p, f = {0};
    if ((err = pointer_parse(&c, path, path_len, &p)) != KCR_OK)
        return err;
    if (from && (err = pointer_parse(&c, from, from_len, &f)) != KCR_OK) {
        pointer_clear(&p);
        return err;
    }
    struct kcr__node *v = NULL;
    err = KCR_OK;
    if (is_test) {
        err = test_at(&c, *root, &p, value);
    } else if (is_add) {
        v = kcr__node_from_value(value);
        err = v ? add_at(&c, root, &p, v) : kcr__fail(KCR_ERR_NOMEM, "out of memory");
    } else if (is_remove) {
        err = p.n == 0 ? op_fail(&c, KCR_ERR_INVALID, "cannot remove the whole document", path)
                       : take_at(&c, *root, &p, &v);
        kcr__node_free(v);
    } else if (is_replace) {
        v = kcr__node_from_value(value);
        err = v ? replace_at(&c, root, &p, v) : kcr__fail(KCR_ERR_NOMEM, "out of memory");
    } else if (is_move) {
        if (f.n < p.n && prefix_equal(&f, &p, f.n)) {
            err = op_fail(&c, KCR_ERR_INVALID, "cannot move a value into itself from", from);
        } else if (f.n == p.n && prefix_equal(&f, &p, f.n)) {
            (void)value_at(&c, *root, &f, &err); /* moving onto itself: it must exist */
        } else if ((err = take_at(&c, *root, &f, &v)) == KCR_OK) {
            err = add_at(&c, root, &p, v);
        }
    } else { /* copy */
        struct kcr__node *src = value_at(&c, *root, &f, &err);
        if (src) {
            *copied += node_count(src);
            if (*copied > MAX_COPIED_NODES)
                err = op_fail(&c, KCR_ERR_TOO_LARGE, "copies exceed the size limit at", from);
            else if (!(v = kcr__node_copy(src)))
                err = kcr__fail(KCR_ERR_NOMEM, "out of memory applying a JSON patch");
            else
                err = add_at(&c, root, &p, v);
        }
    }
    pointer_clear(&p);
    pointer_clear(&f);
    return err;
}

/* Applies every operation of `ops` (an array value) to *root in place; on an
 * error *root is left partly patched (callers work on a copy). */
static kcr_err apply_ops(struct kcr__node **root, kcr_value ops)
{
    if (kcr_value_get_type(ops) != KCR_VALUE_ARRAY)
        return kcr__fail(KCR_ERR_PARSE, "a JSON patch must be an array of operations");
    uint64_t copied = 0;
    size_t n = kcr_value_len(ops);
    for (size_t i = 0; i < n; i++) {
        kcr_err err = apply_op(root, kcr_value_at(ops, i), i, &copied);
        if (err != KCR_OK)
            return err;
    }
    return KCR_OK;
}

kcr_err kcr__edit_json_patch(kcr_object_edit *e, const char *patch, size_t len)
{
    if (!e || !patch)
        return kcr__fail(KCR_ERR_INVALID, "kcr_object_edit_json_patch: NULL argument");
    kcr_object *holder;
    kcr_value ops;
    kcr_err err = kcr__value_parse(patch, len, &holder, &ops);
    if (err != KCR_OK)
        return err;
    struct kcr__node *work = kcr__node_copy(e->root);
    if (!work) {
        kcr_object_unref(holder);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory applying a JSON patch");
    }
    err = apply_ops(&work, ops);
    kcr_object_unref(holder);
    if (err == KCR_OK && work->t != KCR__N_MAP)
        err = kcr__fail(KCR_ERR_INVALID, "the JSON patch turned the object into a non-object");
    if (err != KCR_OK) {
        kcr__node_free(work);
        return err;
    }
    kcr__node_free(e->root);
    e->root = work;
    return KCR_OK;
}

kcr_err kcr_object_apply_json_patch(const kcr_object *obj, const char *patch, size_t len,
                                    kcr_object **out)
{
    if (!obj || !patch || !out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_object_apply_json_patch: NULL argument");
    *out = NULL;
    kcr_object *holder;
    kcr_value ops;
    kcr_err err = kcr__value_parse(patch, len, &holder, &ops);
    if (err != KCR_OK)
        return err;
    /* The editor's tree is a private copy already: patch it directly. */
    kcr_object_edit *e;
    if ((err = kcr_object_edit_new(obj, &e)) != KCR_OK) {
        kcr_object_unref(holder);
        return err;
    }
    err = apply_ops(&e->root, ops);
    kcr_object_unref(holder);
    if (err == KCR_OK && e->root->t != KCR__N_MAP)
        err = kcr__fail(KCR_ERR_INVALID, "the JSON patch turned the object into a non-object");
    if (err == KCR_OK)
        err = kcr_object_edit_freeze(e, out);
    kcr_object_edit_free(e);
    return err;
}
