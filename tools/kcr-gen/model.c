/* kcr-gen: schemas to the model of gen.h. CRD versions give inline types
 * named by their path (Foo, FooSpec, FooSpecContainer); OpenAPI components
 * give one type each, in the package of their group and version. */
#include <stdlib.h>
#include <string.h>

#include "gen.h"
#include "typed/typed_regex.h"

#define GROW(arr, n) \
    do { \
        (arr) = realloc((arr), ((n) + 1) * sizeof *(arr)); \
        if (!(arr)) \
            gen_die("out of memory"); \
    } while (0)

static const char QUANTITY[] = "io.k8s.apimachinery.pkg.api.resource.Quantity";
static const char INT_OR_STRING[] = "io.k8s.apimachinery.pkg.util.intstr.IntOrString";
/* The pattern controller-gen writes for resource.Quantity fields. */
static const char QUANTITY_PATTERN[] = "^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))";

static const char *str(kcr_value v, const char *key)
{
    return kcr_value_string(kcr_value_member(v, key), NULL);
}

gen_pkg *gen_pkg_new(gen_ctx *ctx, const char *id, const char *prefix)
{
    for (size_t i = 0; i < ctx->n_pkgs; i++)
        if (strcmp(ctx->pkgs[i]->id, id) == 0)
            return ctx->pkgs[i];
    gen_pkg *p = calloc(1, sizeof *p);
    if (!p)
        gen_die("out of memory");
    p->id = gen_strdup(id);
    p->prefix = gen_strdup(prefix);
    p->upper = gen_strdup(prefix);
    for (char *c = p->upper; *c; c++)
        if (*c >= 'a' && *c <= 'z')
            *c = (char)(*c - 'a' + 'A');
    GROW(ctx->pkgs, ctx->n_pkgs);
    ctx->pkgs[ctx->n_pkgs++] = p;
    return p;
}

static bool name_taken(const gen_pkg *pkg, const char *cname)
{
    for (size_t i = 0; i < pkg->n_types; i++)
        if (strcmp(pkg->types[i]->cname, cname) == 0)
            return true;
    for (size_t i = 0; i < pkg->n_enums; i++)
        if (strcmp(pkg->enums[i]->cname, cname) == 0)
            return true;
    return false;
}

/* A new type named `name` (made unique in the package: Name, Name2...). */
static gen_type *type_new(gen_pkg *pkg, const char *name, const char *origin)
{
    gen_type *t = calloc(1, sizeof *t);
    if (!t)
        gen_die("out of memory");
    t->pkg = pkg;
    t->name = gen_strdup(name);
    t->cname = gen_printf("%s_%s", pkg->prefix, t->name);
    for (int k = 2; name_taken(pkg, t->cname); k++) {
        free(t->name);
        free(t->cname);
        t->name = gen_printf("%s%d", name, k);
        t->cname = gen_printf("%s_%s", pkg->prefix, t->name);
    }
    t->upper = gen_strdup(pkg->upper);
    t->origin = gen_strdup(origin);
    GROW(pkg->types, pkg->n_types);
    pkg->types[pkg->n_types++] = t;
    return t;
}

kcr_value gen_component(const gen_ctx *ctx, const char *name, const kcr_object **doc)
{
    for (size_t i = 0; i < ctx->n_docs; i++) {
        kcr_value schemas = kcr_object_get(ctx->docs[i], "components.schemas");
        kcr_value s = kcr_value_member(schemas, name);
        if (kcr_value_get_type(s) == KCR_VALUE_OBJECT) {
            if (doc)
                *doc = ctx->docs[i];
            return s;
        }
    }
    return (kcr_value){0};
}

/* The component a schema names ($ref, or allOf: [{$ref}]), or NULL. */
static const char *ref_of(kcr_value s)
{
    const char *r = str(s, "$ref");
    kcr_value all = kcr_value_member(s, "allOf");
    if (!r && kcr_value_len(all) == 1)
        r = str(kcr_value_at(all, 0), "$ref");
    static const char prefix[] = "#/components/schemas/";
    if (r && strncmp(r, prefix, sizeof prefix - 1) == 0)
        return r + sizeof prefix - 1;
    return NULL;
}

/* "io.k8s.api.core.v1" -> "core_v1"; meta -> "meta_v1"; else the last two
 * segments. */
static char *pkg_id(const char *component)
{
    const char *dot = strrchr(component, '.');
    char *path = gen_strdup(component);
    path[dot - component] = '\0';
    char *id;
    static const char api[] = "io.k8s.api.";
    if (strncmp(path, api, sizeof api - 1) == 0) {
        id = gen_strdup(path + sizeof api - 1);
    } else {
        char *v = strrchr(path, '.');
        *v = '\0';
        char *g = strrchr(path, '.');
        id = gen_printf("%s_%s", g ? g + 1 : path, v + 1);
    }
    for (char *c = id; *c; c++)
        if (*c == '.' || *c == '-')
            *c = '_';
    free(path);
    return id;
}

static bool is_scalar(gen_kind k)
{
    return k != GEN_OBJECT && k != GEN_ARRAY && k != GEN_MAP && k != GEN_RAW;
}

/* "containers" -> "Container", "policies" -> "Policy", "data" -> "DataItem". */
static char *item_name(const char *parent, const char *field_camel)
{
    size_t n = strlen(field_camel);
    if (n > 3 && strcmp(field_camel + n - 3, "ies") == 0)
        return gen_printf("%s%.*sy", parent, (int)(n - 3), field_camel);
    if (n > 1 && field_camel[n - 1] == 's' && field_camel[n - 2] != 's')
        return gen_printf("%s%.*s", parent, (int)(n - 1), field_camel);
    return gen_printf("%s%sItem", parent, field_camel);
}

static gen_enum *enum_new(gen_pkg *pkg, const char *type_name, const char *field, kcr_value en)
{
    gen_enum *e = calloc(1, sizeof *e);
    if (!e)
        gen_die("out of memory");
    /* Type_Field; an array's element: the element's type name alone. */
    char *fc = gen_camel(field);
    char *camel = *field ? gen_printf("_%s", fc) : gen_strdup("");
    free(fc);
    e->cname = gen_printf("%s_%s%s", pkg->prefix, type_name, camel);
    for (int k = 2; name_taken(pkg, e->cname); k++) {
        free(e->cname);
        e->cname = gen_printf("%s_%s%s%d", pkg->prefix, type_name, camel, k);
    }
    char *tu = gen_upper(type_name), *fu = *field ? gen_upper(field) : NULL;
    e->upper = fu ? gen_printf("%s_%s_%s", pkg->upper, tu, fu) : gen_printf("%s_%s", pkg->upper, tu);
    free(tu);
    free(fu);
    free(camel);
    for (size_t i = 0; i < kcr_value_len(en); i++) {
        const char *v = kcr_value_string(kcr_value_at(en, i), NULL);
        GROW(e->values, e->n);
        GROW(e->consts, e->n);
        e->values[e->n] = gen_strdup(v);
        char *c = *v ? gen_upper(v) : gen_strdup("EMPTY");
        if (strcmp(c, "UNKNOWN") == 0) {
            free(c);
            c = gen_strdup("UNKNOWN_");
        }
        for (size_t j = 0; j < e->n; j++)
            if (strcmp(e->consts[j], c) == 0) {
                char *d = gen_printf("%s_%zu", c, e->n);
                free(c);
                c = d;
                j = (size_t)-1;
            }
        e->consts[e->n++] = c;
    }
    GROW(pkg->enums, pkg->n_enums);
    pkg->enums[pkg->n_enums++] = e;
    return e;
}

static bool string_enum(kcr_value en)
{
    if (kcr_value_get_type(en) != KCR_VALUE_ARRAY || kcr_value_len(en) == 0)
        return false;
    for (size_t i = 0; i < kcr_value_len(en); i++)
        if (kcr_value_get_type(kcr_value_at(en, i)) != KCR_VALUE_STRING)
            return false;
    return true;
}

static void fill_fields(gen_ctx *ctx, gen_type *t, kcr_value schema);
static void tref_free(gen_tref *t);

static gen_type *component_type(gen_ctx *ctx, const char *name);

/* The type of schema `s`, met at field `field` of type `owner` (names the
 * inline types and enums it creates). */
/* Warns about a pattern validate cannot check (docs/types.md: the subset). */
static void check_pattern(const gen_type *owner, const char *field, kcr_value s)
{
    const char *pattern = str(s, "pattern");
    if (!pattern)
        return;
    size_t cap = strlen(pattern) * 12 + 1;
    char *ere = malloc(cap);
    if (!ere)
        gen_die("out of memory");
    if (!kcr__typed_regex_translate(pattern, ere, cap))
        fprintf(stderr, "kcr-gen: warning: %s.%s: pattern '%s' is outside the subset kcr "
                        "checks (POSIX ERE, docs/types.md); validate will not check it\n",
                owner->origin, field, pattern);
    free(ere);
}

static gen_tref resolve(gen_ctx *ctx, gen_type *owner, const char *field, kcr_value s)
{
    gen_tref r = {.kind = GEN_RAW};
    check_pattern(owner, field, s);
    const char *ref = ref_of(s);
    if (ref) {
        if (strcmp(ref, QUANTITY) == 0)
            return (gen_tref){.kind = GEN_QUANTITY};
        if (strcmp(ref, INT_OR_STRING) == 0)
            return (gen_tref){.kind = GEN_INT_OR_STRING};
        kcr_value c = gen_component(ctx, ref, NULL);
        if (kcr_value_get_type(c) != KCR_VALUE_OBJECT)
            gen_die("%s: $ref to %s, which no document defines", owner->origin, ref);
        if (kcr_value_len(kcr_value_member(c, "properties")) > 0) {
            r.kind = GEN_OBJECT;
            r.obj = component_type(ctx, ref);
            return r;
        }
        if (ref_of(c))
            gen_die("%s: $ref chain through %s", owner->origin, ref);
        return resolve(ctx, owner, field, c); /* an alias: Time, a string type... */
    }
    if (kcr_value_bool(kcr_value_member(s, "x-kubernetes-int-or-string"))) {
        const char *pat = str(s, "pattern");
        bool q = pat && strncmp(pat, QUANTITY_PATTERN, sizeof QUANTITY_PATTERN - 1) == 0;
        return (gen_tref){.kind = q ? GEN_QUANTITY : GEN_INT_OR_STRING};
    }
    const char *type = str(s, "type");
    kcr_value props = kcr_value_member(s, "properties");
    if (!type && kcr_value_len(props) > 0)
        type = "object";
    if (!type)
        return r;
    char *camel = *field ? gen_camel(field) : gen_strdup("");
    if (strcmp(type, "string") == 0) {
        r.kind = GEN_STRING;
        if (string_enum(kcr_value_member(s, "enum"))) {
            r.kind = GEN_ENUM;
            r.en = enum_new(owner->pkg, owner->name, field, kcr_value_member(s, "enum"));
        }
    } else if (strcmp(type, "integer") == 0) {
        const char *fmt = str(s, "format");
        r.kind = fmt && strcmp(fmt, "int32") == 0 ? GEN_INT32 : GEN_INT64;
    } else if (strcmp(type, "boolean") == 0) {
        r.kind = GEN_BOOL;
    } else if (strcmp(type, "number") == 0) {
        r.kind = GEN_NUMBER;
    } else if (strcmp(type, "array") == 0) {
        char *iname = item_name(owner->name, camel);
        char *iorigin = gen_printf("%s.%s[]", owner->origin, field);
        gen_type tmp = {.pkg = owner->pkg, .name = iname, .origin = iorigin};
        gen_tref el = resolve(ctx, &tmp, "", kcr_value_member(s, "items"));
        if (el.kind != GEN_RAW && el.kind != GEN_ARRAY && el.kind != GEN_MAP) {
            r.kind = GEN_ARRAY;
            r.elem = malloc(sizeof *r.elem);
            if (!r.elem)
                gen_die("out of memory");
            *r.elem = el;
        } else {
            tref_free(&el); /* kept as a raw value */
        }
        free(iname);
        free(iorigin);
    } else if (strcmp(type, "object") == 0 && kcr_value_len(props) > 0) {
        char *name = gen_printf("%s%s", owner->name, camel);
        char *origin = *field ? gen_printf("%s.%s", owner->origin, field) : gen_strdup(owner->origin);
        r.kind = GEN_OBJECT;
        r.obj = type_new(owner->pkg, name, origin);
        fill_fields(ctx, r.obj, s);
        free(name);
        free(origin);
    } else if (strcmp(type, "object") == 0) {
        kcr_value ap = kcr_value_member(s, "additionalProperties");
        if (kcr_value_get_type(ap) == KCR_VALUE_OBJECT) {
            char *vname = gen_printf("%s%sValue", owner->name, camel);
            char *vorigin = gen_printf("%s.%s{}", owner->origin, field);
            gen_type tmp = {.pkg = owner->pkg, .name = vname, .origin = vorigin};
            gen_tref el = resolve(ctx, &tmp, "", ap);
            if (el.kind == GEN_OBJECT || is_scalar(el.kind)) {
                r.kind = GEN_MAP;
                r.elem = malloc(sizeof *r.elem);
                if (!r.elem)
                    gen_die("out of memory");
                *r.elem = el;
            } else {
                tref_free(&el);
            }
            free(vname);
            free(vorigin);
        }
    }
    free(camel);
    return r;
}

/* Names a field's accessors take: a new field's C name must not make any of
 * them twice (e.g. "items" and "itemsLen"). */
static const char *const DERIVED[] = {"%s",        "%s_len",       "%s_at",      "%s_get",
                                      "set_%s",    "append_%s",    "delete_%s",  "%s_entry",
                                      "set_%s_value", "delete_%s_key", "set_%s_text"};
static const char *const RESERVED[] = {"of", "edit", "new", "validate", "default", "names"};

static bool derived_clash(const gen_type *t, const char *c)
{
    for (size_t k = 0; k < sizeof DERIVED / sizeof *DERIVED; k++) {
        char *mine = gen_printf(DERIVED[k], c);
        bool clash = false;
        for (size_t r = 0; r < sizeof RESERVED / sizeof *RESERVED; r++)
            clash |= strcmp(mine, RESERVED[r]) == 0;
        for (size_t f = 0; f < t->n_fields && !clash; f++)
            for (size_t j = 0; j < sizeof DERIVED / sizeof *DERIVED && !clash; j++) {
                char *theirs = gen_printf(DERIVED[j], t->fields[f].cname);
                clash = strcmp(mine, theirs) == 0;
                free(theirs);
            }
        free(mine);
        if (clash)
            return true;
    }
    return false;
}

static void fill_fields(gen_ctx *ctx, gen_type *t, kcr_value schema)
{
    kcr_value props = kcr_value_member(schema, "properties");
    for (size_t i = 0; i < kcr_value_len(props); i++) {
        const char *json;
        kcr_value ps = kcr_value_entry(props, i, &json, NULL);
        gen_field f = {.json = gen_strdup(json), .cname = gen_snake(json)};
        while (derived_clash(t, f.cname)) {
            char *c = gen_printf("%s_", f.cname);
            free(f.cname);
            f.cname = c;
        }
        f.t = resolve(ctx, t, json, ps);
        GROW(t->fields, t->n_fields);
        t->fields[t->n_fields++] = f;
    }
}

static gen_type *component_type(gen_ctx *ctx, const char *name)
{
    char *id = pkg_id(name);
    char *prefix = gen_printf("kcr_%s", id);
    gen_pkg *pkg = gen_pkg_new(ctx, id, prefix);
    free(id);
    free(prefix);
    const char *short_name = strrchr(name, '.') + 1;
    gen_type *t = NULL;
    for (size_t i = 0; i < pkg->n_types && !t; i++)
        if (strcmp(pkg->types[i]->origin, name) == 0)
            t = pkg->types[i];
    if (t)
        return t;
    t = type_new(pkg, short_name, name);
    kcr_value s = gen_component(ctx, name, NULL);
    kcr_value gvk = kcr_value_member(s, "x-kubernetes-group-version-kind");
    if (kcr_value_len(gvk) == 1) {
        kcr_value g = kcr_value_at(gvk, 0);
        t->root = true;
        t->group = gen_strdup(str(g, "group") ? str(g, "group") : "");
        t->version = gen_strdup(str(g, "version") ? str(g, "version") : "");
        t->kind = gen_strdup(str(g, "kind") ? str(g, "kind") : short_name);
        t->schema_type = gen_strdup(name);
    }
    fill_fields(ctx, t, s);
    return t;
}

gen_type *gen_add_component(gen_ctx *ctx, const char *name)
{
    if (kcr_value_get_type(gen_component(ctx, name, NULL)) != KCR_VALUE_OBJECT)
        gen_die("no component %s in the documents given", name);
    return component_type(ctx, name);
}

void gen_add_crd(gen_ctx *ctx, gen_pkg *pkg, const kcr_object *crd)
{
    const char *group = kcr_value_string(kcr_object_get(crd, "spec.group"), NULL);
    const char *kind = kcr_value_string(kcr_object_get(crd, "spec.names.kind"), NULL);
    const char *plural = kcr_value_string(kcr_object_get(crd, "spec.names.plural"), NULL);
    kcr_value versions = kcr_object_get(crd, "spec.versions");
    if (!group || !kind || !plural || kcr_value_len(versions) == 0)
        gen_die("%s: not a CustomResourceDefinition with spec.group, spec.names and "
                "spec.versions", kcr_object_name(crd));
    size_t n = kcr_value_len(versions);
    pkg->crd_name = gen_printf("%s.%s", kind, group);
    pkg->defaults = true;
    pkg->crd = crd;
    /* ObjectMeta comes from the installed kcr/types/meta_v1.h. */
    gen_pkg *meta = gen_pkg_new(ctx, "meta_v1", "kcr_meta_v1");
    gen_type *object_meta = NULL;
    for (size_t i = 0; i < meta->n_types && !object_meta; i++)
        if (strcmp(meta->types[i]->name, "ObjectMeta") == 0)
            object_meta = meta->types[i];
    if (!object_meta) {
        object_meta = type_new(meta, "ObjectMeta", "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta");
    }
    for (size_t i = 0; i < n; i++) {
        kcr_value v = kcr_value_at(versions, i);
        const char *version = str(v, "name");
        kcr_value schema = kcr_value_get(v, "schema.openAPIV3Schema");
        if (!version || kcr_value_get_type(schema) != KCR_VALUE_OBJECT)
            gen_die("%s: version %zu has no name or no schema.openAPIV3Schema",
                    kcr_object_name(crd), i);
        /* One version: prefix_Foo; several: prefix_v1alpha1_Foo, prefix_v1_Foo
         * (each version its own types). */
        char *base = pkg->prefix, *base_upper = pkg->upper;
        if (n > 1) {
            pkg->prefix = gen_printf("%s_%s", base, version);
            char *vu = gen_upper(version);
            pkg->upper = gen_printf("%s_%s", base_upper, vu);
            free(vu);
        }
        gen_type *t = type_new(pkg, kind, kind);
        t->root = true;
        t->group = gen_strdup(group);
        t->version = gen_strdup(version);
        t->kind = gen_strdup(kind);
        t->plural = gen_strdup(plural);
        t->schema_type = gen_strdup(version);
        fill_fields(ctx, t, schema);
        /* Every object has metadata, whether the schema spells it or not. */
        size_t f = 0;
        while (f < t->n_fields && strcmp(t->fields[f].json, "metadata") != 0)
            f++;
        if (f == t->n_fields) {
            GROW(t->fields, t->n_fields);
            t->fields[t->n_fields++] = (gen_field){.json = gen_strdup("metadata"), .cname = gen_strdup("metadata")};
        }
        t->fields[f].t = (gen_tref){.kind = GEN_OBJECT, .obj = object_meta};
        if (n > 1) {
            free(pkg->prefix);
            free(pkg->upper);
            pkg->prefix = base;
            pkg->upper = base_upper;
        }
    }
}

static void tref_free(gen_tref *t)
{
    if (t->elem)
        tref_free(t->elem);
    free(t->elem);
}

void gen_ctx_free(gen_ctx *ctx)
{
    for (size_t p = 0; p < ctx->n_pkgs; p++) {
        gen_pkg *pkg = ctx->pkgs[p];
        for (size_t i = 0; i < pkg->n_types; i++) {
            gen_type *t = pkg->types[i];
            for (size_t f = 0; f < t->n_fields; f++) {
                free(t->fields[f].json);
                free(t->fields[f].cname);
                tref_free(&t->fields[f].t);
            }
            free(t->fields);
            free(t->name);
            free(t->cname);
            free(t->upper);
            free(t->origin);
            free(t->group);
            free(t->version);
            free(t->kind);
            free(t->plural);
            free(t->schema_type);
            free(t);
        }
        for (size_t i = 0; i < pkg->n_enums; i++) {
            gen_enum *e = pkg->enums[i];
            for (size_t v = 0; v < e->n; v++) {
                free(e->values[v]);
                free(e->consts[v]);
            }
            free(e->values);
            free(e->consts);
            free(e->cname);
            free(e->upper);
            free(e);
        }
        free(pkg->types);
        free(pkg->enums);
        free(pkg->id);
        free(pkg->prefix);
        free(pkg->upper);
        free(pkg->include_as);
        free(pkg->crd_name);
        free(pkg);
    }
    free(ctx->pkgs);
    for (size_t d = 0; d < ctx->n_docs; d++)
        kcr_object_unref(ctx->docs[d]);
    free(ctx->docs);
    *ctx = (gen_ctx){0};
}
