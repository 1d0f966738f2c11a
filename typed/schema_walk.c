/* kcr_schema_validate and kcr_schema_default (kcr/typed.h): an interpreter
 * of the OpenAPI v3 schema subset that CRDs and the built-in documents use,
 * walked beside the value. Messages follow the apiserver's field errors
 * (k8s.io/apimachinery field.Error over kube-openapi's validators). */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/error.h"
#include "kcr/typed.h"
#include "typed/typed_path.h"
#include "typed/typed_regex.h"

#define MAX_DEPTH 64

/* The parsed document of a schema, built on first use. */
static kcr_err schema_doc(kcr_schema *s, const kcr_object **out)
{
    _Atomic(kcr_object *) *slot = (_Atomic(kcr_object *) *)&s->parsed;
    kcr_object *doc = atomic_load(slot);
    if (!doc) {
        kcr__buf b = {0};
        for (const char *const *c = s->chunks; *c; c++)
            kcr__buf_str(&b, *c);
        if (b.oom) {
            kcr__buf_free(&b);
            return kcr__fail(KCR_ERR_NOMEM, "out of memory reading schema %s", s->name);
        }
        kcr_err err = kcr_object_parse_any(b.s, b.len, &doc);
        kcr__buf_free(&b);
        if (err != KCR_OK)
            return kcr__refail(err, "schema %s: ", s->name);
        kcr_object *none = NULL;
        if (!atomic_compare_exchange_strong(slot, &none, doc)) {
            kcr_object_unref(doc);
            doc = none;
        }
    }
    *out = doc;
    return KCR_OK;
}

typedef struct walk {
    const kcr_object *doc;
    kcr_violations *out;
    kcr__buf msg;   /* every violation, "; "-separated, for kcr_last_error */
    size_t count;
    bool oom;
    kcr_object_edit *edit; /* defaulting: where defaults go */
    char path[KCR_TYPED_PATH_MAX]; /* the apiserver's field path */
    size_t len;
    char epath[KCR_TYPED_PATH_MAX]; /* the same in kcr_object_lookup's syntax */
    size_t elen;
} walk;

/* Follows $ref ("#/components/schemas/X") and a single-element allOf that
 * only wraps a $ref, as the built-in documents write references. */
static kcr_value deref(const walk *w, kcr_value s)
{
    for (int hops = 0; hops < 8; hops++) {
        kcr_value ref = kcr_value_member(s, "$ref");
        const char *r = kcr_value_string(ref, NULL);
        if (r) {
            static const char prefix[] = "#/components/schemas/";
            if (strncmp(r, prefix, sizeof prefix - 1) != 0)
                return (kcr_value){0};
            kcr_value schemas = kcr_object_get(w->doc, "components.schemas");
            s = kcr_value_member(schemas, r + sizeof prefix - 1);
            continue;
        }
        kcr_value all = kcr_value_member(s, "allOf");
        if (kcr_value_len(all) == 1 && kcr_value_get_type(kcr_value_member(s, "properties")) ==
                                           KCR_VALUE_ABSENT) {
            s = kcr_value_at(all, 0);
            continue;
        }
        return s;
    }
    return (kcr_value){0};
}

static void add(walk *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void add(walk *w, const char *fmt, ...)
{
    char detail[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    const char *field = w->len ? w->path : "<root>";
    kcr__buf_printf(&w->msg, "%s%s: %s", w->count ? ", " : "", field, detail);
    w->count++;
    if (!w->out)
        return;
    kcr_violation *items = realloc(w->out->items, (w->out->n + 1) * sizeof *items);
    char *f = strdup(field), *d = strdup(detail);
    if (!items || !f || !d) {
        free(f);
        free(d);
        if (items)
            w->out->items = items;
        w->oom = true;
        return;
    }
    w->out->items = items;
    items[w->out->n++] = (kcr_violation){f, d};
}

/* The value as the apiserver quotes it in "Invalid value: ...". */
static void quoted(kcr_value v, char *buf, size_t cap)
{
    char *json = NULL;
    if (kcr_value_to_json(v, &json, NULL) != KCR_OK || !json) {
        snprintf(buf, cap, "?");
    } else {
        snprintf(buf, cap, "%s", json);
        if (strlen(json) >= cap && cap > 4)
            memcpy(buf + cap - 4, "...", 4);
    }
    free(json);
}

static const char *type_name(kcr_value_type t)
{
    switch (t) {
    case KCR_VALUE_NULL: return "null";
    case KCR_VALUE_BOOL: return "boolean";
    case KCR_VALUE_INT: return "integer";
    case KCR_VALUE_FLOAT: return "number";
    case KCR_VALUE_STRING: return "string";
    case KCR_VALUE_ARRAY: return "array";
    case KCR_VALUE_OBJECT: return "object";
    default: return "absent";
    }
}

static bool type_ok(const char *want, kcr_value_type t, bool int_or_string)
{
    if (int_or_string)
        return t == KCR_VALUE_INT || t == KCR_VALUE_STRING;
    if (!want)
        return true;
    if (strcmp(want, "number") == 0)
        return t == KCR_VALUE_INT || t == KCR_VALUE_FLOAT;
    return strcmp(want, type_name(t)) == 0;
}

static const char *str_member(kcr_value s, const char *key)
{
    return kcr_value_string(kcr_value_member(s, key), NULL);
}

static bool has(kcr_value s, const char *key)
{
    return kcr_value_get_type(kcr_value_member(s, key)) != KCR_VALUE_ABSENT;
}

/* Descends into child `key` (an object member) or `[index]`. */
typedef struct mark {
    size_t len, elen;
} mark;

static bool push_key(walk *w, const char *key, mark *m)
{
    m->len = w->len;
    m->elen = w->elen;
    if (w->len + (w->len ? 1 : 0) + strlen(key) + 1 > sizeof w->path)
        return false;
    w->len += (size_t)snprintf(w->path + w->len, sizeof w->path - w->len, "%s%s",
                               w->len ? "." : "", key);
    return kcr__typed_path_key(w->epath, &w->elen, sizeof w->epath, key);
}

static bool push_index(walk *w, size_t i, mark *m)
{
    m->len = w->len;
    m->elen = w->elen;
    int n = snprintf(w->path + w->len, sizeof w->path - w->len, "[%zu]", i);
    int e = snprintf(w->epath + w->elen, sizeof w->epath - w->elen, "[%zu]", i);
    if (n < 0 || e < 0 || (size_t)n >= sizeof w->path - w->len ||
        (size_t)e >= sizeof w->epath - w->elen)
        return false;
    w->len += (size_t)n;
    w->elen += (size_t)e;
    return true;
}

static void pop(walk *w, const mark *m)
{
    w->len = m->len;
    w->elen = m->elen;
    w->path[w->len] = '\0';
    w->epath[w->elen] = '\0';
}

static void check_scalar(walk *w, kcr_value s, kcr_value v)
{
    char q[160];
    const char *field = w->len ? w->path : "<root>";
    kcr_value en = kcr_value_member(s, "enum");
    if (kcr_value_get_type(en) == KCR_VALUE_ARRAY) {
        bool found = false;
        for (size_t i = 0; i < kcr_value_len(en) && !found; i++)
            found = kcr_value_equal(kcr_value_at(en, i), v);
        if (!found) {
            kcr__buf list = {0};
            for (size_t i = 0; i < kcr_value_len(en); i++) {
                quoted(kcr_value_at(en, i), q, sizeof q);
                kcr__buf_printf(&list, "%s%s", i ? ", " : "", q);
            }
            quoted(v, q, sizeof q);
            add(w, "Unsupported value: %s: supported values: %s", q, list.s ? list.s : "");
            kcr__buf_free(&list);
        }
    }
    kcr_value_type t = kcr_value_get_type(v);
    if (t == KCR_VALUE_INT || t == KCR_VALUE_FLOAT) {
        double x = kcr_value_float(v);
        quoted(v, q, sizeof q);
        kcr_value min = kcr_value_member(s, "minimum"), max = kcr_value_member(s, "maximum");
        bool xmin = kcr_value_bool(kcr_value_member(s, "exclusiveMinimum"));
        bool xmax = kcr_value_bool(kcr_value_member(s, "exclusiveMaximum"));
        char lim[64];
        if (kcr_value_get_type(min) != KCR_VALUE_ABSENT &&
            (xmin ? x <= kcr_value_float(min) : x < kcr_value_float(min))) {
            quoted(min, lim, sizeof lim);
            add(w, "Invalid value: %s: %s in body should be greater than %s%s", q, field,
                xmin ? "" : "or equal to ", lim);
        }
        if (kcr_value_get_type(max) != KCR_VALUE_ABSENT &&
            (xmax ? x >= kcr_value_float(max) : x > kcr_value_float(max))) {
            quoted(max, lim, sizeof lim);
            add(w, "Invalid value: %s: %s in body should be less than %s%s", q, field,
                xmax ? "" : "or equal to ", lim);
        }
    }
    if (t == KCR_VALUE_STRING) {
        size_t n = kcr_value_len(v);
        quoted(v, q, sizeof q);
        kcr_value minl = kcr_value_member(s, "minLength"), maxl = kcr_value_member(s, "maxLength");
        const char *pattern = str_member(s, "pattern");
        /* As kube-openapi's string validator: the first failing check of
         * maxLength, minLength, pattern is the only one reported. A pattern
         * outside the subset (-1) is not checked; kcr-gen warned about it. */
        if (kcr_value_get_type(maxl) == KCR_VALUE_INT && (int64_t)n > kcr_value_int(maxl))
            add(w, "Too long: may not be more than %lld byte%s", (long long)kcr_value_int(maxl),
                kcr_value_int(maxl) == 1 ? "" : "s");
        else if (kcr_value_get_type(minl) == KCR_VALUE_INT && (int64_t)n < kcr_value_int(minl))
            add(w, "Invalid value: %s: %s in body should be at least %lld chars long", q, field,
                (long long)kcr_value_int(minl));
        else if (pattern && kcr__typed_regex_match(pattern, kcr_value_string(v, NULL)) == 0)
            add(w, "Invalid value: %s: %s in body should match '%s'", q, field, pattern);
    }
}

static void walk_value(walk *w, kcr_value s, kcr_value v, int depth);

static void walk_object(walk *w, kcr_value s, kcr_value v, int depth)
{
    kcr_value req = kcr_value_member(s, "required");
    for (size_t i = 0; i < kcr_value_len(req) && !w->edit; i++) {
        const char *key = kcr_value_string(kcr_value_at(req, i), NULL);
        kcr_value_type t = kcr_value_get_type(kcr_value_member(v, key));
        mark m;
        if (key && (t == KCR_VALUE_ABSENT || t == KCR_VALUE_NULL) && push_key(w, key, &m)) {
            add(w, "Required value");
            pop(w, &m);
        }
    }
    kcr_value props = kcr_value_member(s, "properties");
    for (size_t i = 0; i < kcr_value_len(props); i++) {
        const char *key;
        kcr_value ps = deref(w, kcr_value_entry(props, i, &key, NULL));
        kcr_value child = kcr_value_member(v, key);
        mark m;
        if (!push_key(w, key, &m))
            continue;
        kcr_value_type t = kcr_value_get_type(child);
        kcr_value dflt = kcr_value_member(ps, "default");
        bool nullable = kcr_value_bool(kcr_value_member(ps, "nullable"));
        if (w->edit && kcr_value_get_type(dflt) != KCR_VALUE_ABSENT &&
            (t == KCR_VALUE_ABSENT || (t == KCR_VALUE_NULL && !nullable))) {
            if (kcr_object_edit_set_value(w->edit, w->epath, dflt) != KCR_OK)
                w->oom = true;
        } else if (t != KCR_VALUE_ABSENT) {
            walk_value(w, ps, child, depth + 1);
        }
        pop(w, &m);
    }
    kcr_value extra = deref(w, kcr_value_member(s, "additionalProperties"));
    if (kcr_value_get_type(extra) == KCR_VALUE_OBJECT) {
        for (size_t i = 0; i < kcr_value_len(v); i++) {
            const char *key;
            kcr_value child = kcr_value_entry(v, i, &key, NULL);
            mark m;
            if (has(props, key) || !push_key(w, key, &m))
                continue;
            walk_value(w, extra, child, depth + 1);
            pop(w, &m);
        }
    }
    kcr_value maxp = kcr_value_member(s, "maxProperties");
    if (!w->edit && kcr_value_get_type(maxp) == KCR_VALUE_INT &&
        (int64_t)kcr_value_len(v) > kcr_value_int(maxp))
        add(w, "Too many: %zu: must have at most %lld item%s", kcr_value_len(v),
            (long long)kcr_value_int(maxp), kcr_value_int(maxp) == 1 ? "" : "s");
}

static void walk_array(walk *w, kcr_value s, kcr_value v, int depth)
{
    size_t n = kcr_value_len(v);
    kcr_value maxi = kcr_value_member(s, "maxItems"), mini = kcr_value_member(s, "minItems");
    if (!w->edit && kcr_value_get_type(maxi) == KCR_VALUE_INT && (int64_t)n > kcr_value_int(maxi))
        add(w, "Too many: %zu: must have at most %lld item%s", n, (long long)kcr_value_int(maxi),
            kcr_value_int(maxi) == 1 ? "" : "s");
    if (!w->edit && kcr_value_get_type(mini) == KCR_VALUE_INT && (int64_t)n < kcr_value_int(mini))
        add(w, "Invalid value: %zu: %s in body should have at least %lld items", n, w->path,
            (long long)kcr_value_int(mini));
    kcr_value items = deref(w, kcr_value_member(s, "items"));
    if (kcr_value_get_type(items) != KCR_VALUE_OBJECT)
        return;
    for (size_t i = 0; i < n; i++) {
        mark m;
        if (!push_index(w, i, &m))
            return;
        walk_value(w, items, kcr_value_at(v, i), depth + 1);
        pop(w, &m);
    }
}

static void walk_value(walk *w, kcr_value s, kcr_value v, int depth)
{
    s = deref(w, s);
    if (depth > MAX_DEPTH || kcr_value_get_type(s) != KCR_VALUE_OBJECT)
        return;
    kcr_value all = kcr_value_member(s, "allOf");
    for (size_t i = 0; i < kcr_value_len(all); i++)
        walk_value(w, kcr_value_at(all, i), v, depth + 1);
    kcr_value_type t = kcr_value_get_type(v);
    const char *want = str_member(s, "type");
    bool ios = kcr_value_bool(kcr_value_member(s, "x-kubernetes-int-or-string"));
    if (t == KCR_VALUE_NULL)
        return; /* allowed when nullable; else pruned by the apiserver (then
                   defaulted, or Required when the parent requires it) */
    if (!type_ok(want, t, ios)) {
        if (!w->edit)
            add(w, "Invalid value: \"%s\": %s in body must be of type %s: \"%s\"", type_name(t),
                w->len ? w->path : "<root>", ios ? "int-or-string" : want, type_name(t));
        return;
    }
    if (t == KCR_VALUE_OBJECT)
        walk_object(w, s, v, depth);
    else if (t == KCR_VALUE_ARRAY)
        walk_array(w, s, v, depth);
    else if (!w->edit)
        check_scalar(w, s, v);
}

/* The schema to start from: component `type`, or the document itself. */
static kcr_err start(walk *w, kcr_schema *schema, const char *type, kcr_value *root)
{
    kcr_err err = schema_doc(schema, &w->doc);
    if (err != KCR_OK)
        return err;
    *root = kcr_object_root(w->doc);
    if (type)
        *root = kcr_value_member(kcr_object_get(w->doc, "components.schemas"), type);
    if (kcr_value_get_type(*root) != KCR_VALUE_OBJECT)
        return kcr__fail(KCR_ERR_INVALID, "schema %s has no type %s", schema->name,
                         type ? type : "(root)");
    return KCR_OK;
}

kcr_err kcr_schema_validate(kcr_schema *schema, const char *type, kcr_value v,
                            kcr_violations *out)
{
    if (!schema)
        return kcr__fail(KCR_ERR_INVALID, "kcr_schema_validate: NULL schema");
    if (out)
        *out = (kcr_violations){0};
    walk w = {.out = out};
    kcr_value root;
    kcr_err err = start(&w, schema, type, &root);
    if (err != KCR_OK)
        return err;
    walk_value(&w, root, v, 0);
    const char *name = kcr_value_string(kcr_value_get(v, "metadata.name"), NULL);
    if (w.oom || w.msg.oom)
        err = kcr__fail(KCR_ERR_NOMEM, "out of memory validating against %s", schema->name);
    else if (w.count == 1)
        err = kcr__fail(KCR_ERR_INVALID, "%s \"%s\" is invalid: %s", schema->name,
                        name ? name : "", w.msg.s);
    else if (w.count > 1)
        err = kcr__fail(KCR_ERR_INVALID, "%s \"%s\" is invalid: [%s]", schema->name,
                        name ? name : "", w.msg.s);
    kcr__buf_free(&w.msg);
    return err;
}

kcr_err kcr_schema_default(kcr_schema *schema, const char *type, kcr_object_edit *edit)
{
    if (!schema || !edit)
        return kcr__fail(KCR_ERR_INVALID, "kcr_schema_default: NULL argument");
    walk w = {.edit = edit};
    kcr_value root;
    kcr_err err = start(&w, schema, type, &root);
    kcr_object *now = NULL;
    if (err == KCR_OK)
        err = kcr_object_edit_snapshot(edit, &now);
    if (err == KCR_OK)
        walk_value(&w, root, kcr_object_root(now), 0);
    kcr_object_unref(now);
    if (err == KCR_OK && w.oom)
        err = kcr__refail(KCR_ERR_NOMEM, "applying the defaults of %s: ", schema->name);
    kcr__buf_free(&w.msg);
    return err;
}

void kcr_violations_free(kcr_violations *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->n; i++) {
        free(v->items[i].field);
        free(v->items[i].detail);
    }
    free(v->items);
    *v = (kcr_violations){0};
}
