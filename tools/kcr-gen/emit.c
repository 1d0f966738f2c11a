/* kcr-gen: writes a package's header and source (docs/types.md lists every
 * accessor shape). Each function is written once as a prototype for the
 * header and a definition for the source, so the two cannot drift. */
#include <stdlib.h>
#include <string.h>

#include "gen.h"

typedef struct out {
    kcr__buf h, c;
    const char *api;
} out;

/* Declares `proto` in the header and defines it with `body` (taken, freed)
 * in the source. */
static void fn(out *o, char *proto, char *body)
{
    kcr__buf_printf(&o->h, "%s%s%s;\n", o->api, *o->api ? " " : "", proto);
    kcr__buf_printf(&o->c, "%s\n{\n%s}\n\n", proto, body);
    free(proto);
    free(body);
}

/* s as the inside of a C string literal. */
static char *cstr(const char *s)
{
    kcr__buf b = {0};
    for (const char *p = s; *p; p++) {
        if (*p == '"' || *p == '\\')
            kcr__buf_printf(&b, "\\%c", *p);
        else if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
            kcr__buf_printf(&b, "\\%03o", (unsigned char)*p);
        else
            kcr__buf_add(&b, p, 1);
    }
    if (b.oom)
        gen_die("out of memory");
    return b.s ? b.s : gen_strdup("");
}

typedef struct scalar {
    const char *ctype; /* C type of the value */
    const char *read;  /* kcr_typed_ reader */
    const char *set;   /* kcr_typed_ setter */
    const char *append; /* kcr_typed_ appender, NULL when none */
} scalar;

static scalar scalar_of(const gen_tref *t)
{
    switch (t->kind) {
    case GEN_STRING:
        return (scalar){"const char *", "kcr_typed_string", "kcr_typed_set_string",
                        "kcr_typed_append_string"};
    case GEN_QUANTITY:
        return (scalar){"kcr_quantity", "kcr_typed_quantity", "kcr_typed_set_quantity", NULL};
    case GEN_INT32:
        return (scalar){"int32_t", "kcr_typed_int32", "kcr_typed_set_int", "kcr_typed_append_int"};
    case GEN_INT64:
        return (scalar){"int64_t", "kcr_typed_int64", "kcr_typed_set_int", "kcr_typed_append_int"};
    case GEN_BOOL:
        return (scalar){"bool", "kcr_typed_bool", "kcr_typed_set_bool", NULL};
    case GEN_NUMBER:
        return (scalar){"double", "kcr_typed_number", "kcr_typed_set_number", NULL};
    case GEN_INT_OR_STRING:
        return (scalar){"kcr_int_or_string", "kcr_typed_int_or_string",
                        "kcr_typed_set_int_or_string", NULL};
    case GEN_ENUM:
        return (scalar){t->en->cname, NULL, NULL, "kcr_typed_append_string"};
    default:
        gen_die("internal: not a scalar");
    }
}

/* The space between a scalar's C type and a name ("const char *v"). */
static const char *sp(const gen_tref *t)
{
    const char *ct = scalar_of(t).ctype;
    return ct[strlen(ct) - 1] == '*' ? "" : " ";
}

/* A body reading the scalar at value expression `v` into *out. */
static char *read_body(const gen_tref *t, const char *v)
{
    if (t->kind != GEN_ENUM)
        return gen_printf("    return %s(%s, out);\n", scalar_of(t).read, v);
    const gen_enum *e = t->en;
    return gen_printf("    size_t i_ = 0;\n"
                      "    kcr_field f_ = kcr_typed_enum(%s, %s_values_, %zu, &i_);\n"
                      "    if (f_ == KCR_FIELD_SET && out)\n"
                      "        *out = (%s)(i_ < %zu ? i_ + 1 : 0);\n"
                      "    return f_;\n",
                      v, e->cname, e->n, e->cname, e->n);
}

/* A body setting view `at` (+ key expression, or NULL) to `v`. */
static char *set_body(const gen_tref *t, const char *at, const char *key, const char *how)
{
    if (t->kind != GEN_ENUM)
        return gen_printf("    return %s(%s, %s, v);\n", how ? how : scalar_of(t).set, at, key);
    const gen_enum *e = t->en;
    return gen_printf("    if ((int)v < 1 || (int)v > %zu)\n"
                      "        return kcr_set_error(KCR_ERR_INVALID, \"%s: no such value %%d\", (int)v);\n"
                      "    return %s(%s, %s, %s_values_[(int)v - 1]);\n",
                      e->n, e->cname, how ? how : "kcr_typed_set_string", at, key, e->cname);
}

static void field_read(out *o, const gen_type *t, const gen_field *f)
{
    char *key = cstr(f->json);
    char *m = gen_printf("kcr_typed_member(x.v, \"%s\")", key);
    const char *T = t->cname, *c = f->cname;
    const gen_tref *el = f->t.elem;
    switch (f->t.kind) {
    case GEN_OBJECT:
        fn(o, gen_printf("%s %s_%s(%s x)", f->t.obj->cname, T, c, T),
           gen_printf("    %s r_;\n    r_.v = %s;\n    return r_;\n", f->t.obj->cname, m));
        break;
    case GEN_RAW:
        fn(o, gen_printf("kcr_value %s_%s(%s x)", T, c, T), gen_printf("    return %s;\n", m));
        break;
    case GEN_ARRAY:
    case GEN_MAP: {
        bool map = f->t.kind == GEN_MAP;
        fn(o, gen_printf("size_t %s_%s_len(%s x)", T, c, T),
           gen_printf("    return kcr_typed_len(%s);\n", m));
        char *at = map ? gen_printf("kcr_typed_entry(%s, i, key)", m)
                       : gen_printf("kcr_typed_item(%s, i)", m);
        char *get = gen_printf("kcr_typed_member(%s, key)", m);
        const char *keyp = map ? ", const char **key" : "";
        if (el->kind == GEN_OBJECT) {
            fn(o, gen_printf("%s %s_%s_at(%s x, size_t i%s)", el->obj->cname, T, c, T, keyp),
               gen_printf("    %s r_;\n    r_.v = %s;\n    return r_;\n", el->obj->cname, at));
            if (map)
                fn(o, gen_printf("%s %s_%s_get(%s x, const char *key)", el->obj->cname, T, c, T),
                   gen_printf("    %s r_;\n    r_.v = %s;\n    return r_;\n", el->obj->cname,
                              get));
        } else {
            const char *ct = scalar_of(el).ctype;
            fn(o, gen_printf("kcr_field %s_%s_at(%s x, size_t i%s, %s%s*out)", T, c, T, keyp, ct,
                             sp(el)),
               read_body(el, at));
            if (map)
                fn(o, gen_printf("kcr_field %s_%s_get(%s x, const char *key, %s%s*out)", T, c, T,
                                 ct, sp(el)),
                   read_body(el, get));
        }
        free(at);
        free(get);
        break;
    }
    default: {
        const char *ct = scalar_of(&f->t).ctype;
        fn(o, gen_printf("kcr_field %s_%s(%s x, %s%s*out)", T, c, T, ct,
                         sp(&f->t)),
           read_body(&f->t, m));
    }
    }
    free(m);
    free(key);
}

static void field_edit(out *o, const gen_type *t, const gen_field *f)
{
    char *key = cstr(f->json);
    char *E = gen_printf("%sEdit", t->cname);
    char *k = gen_printf("\"%s\"", key);
    const char *c = f->cname;
    const gen_tref *el = f->t.elem;
    switch (f->t.kind) {
    case GEN_OBJECT:
        fn(o, gen_printf("%sEdit %s_%s(%s b)", f->t.obj->cname, E, c, E),
           gen_printf("    %sEdit r_;\n    r_.at = kcr_typed_at_key(&b.at, %s);\n    return r_;\n",
                      f->t.obj->cname, k));
        break;
    case GEN_RAW:
        fn(o, gen_printf("kcr_err %s_set_%s(%s b, kcr_value v)", E, c, E),
           gen_printf("    return kcr_typed_set_value(&b.at, %s, v);\n", k));
        break;
    case GEN_ARRAY:
        if (el->kind == GEN_OBJECT) {
            fn(o, gen_printf("%sEdit %s_append_%s(%s b)", el->obj->cname, E, c, E),
               gen_printf("    %sEdit r_;\n    r_.at = kcr_typed_append_object(&b.at, %s);\n"
                          "    return r_;\n",
                          el->obj->cname, k));
            fn(o, gen_printf("%sEdit %s_%s_at(%s b, size_t i)", el->obj->cname, E, c, E),
               gen_printf("    kcr_typed_at a_ = kcr_typed_at_key(&b.at, %s);\n"
                          "    %sEdit r_;\n    r_.at = kcr_typed_at_index(&a_, i);\n"
                          "    return r_;\n",
                          k, el->obj->cname));
        } else if (scalar_of(el).append) {
            fn(o, gen_printf("kcr_err %s_append_%s(%s b, %s%sv)", E, c, E, scalar_of(el).ctype, sp(el)),
               set_body(el, "&b.at", k, scalar_of(el).append));
        }
        break;
    case GEN_MAP:
        if (el->kind == GEN_OBJECT) {
            fn(o, gen_printf("%sEdit %s_%s_entry(%s b, const char *key)", el->obj->cname, E, c, E),
               gen_printf("    %sEdit r_;\n    r_.at = kcr_typed_at_entry(&b.at, %s, key);\n"
                          "    return r_;\n",
                          el->obj->cname, k));
        } else {
            char *body = set_body(el, "&e_", "NULL", NULL);
            fn(o, gen_printf("kcr_err %s_set_%s(%s b, const char *key, %s%sv)", E, c, E,
                             scalar_of(el).ctype, sp(el)),
               gen_printf("    kcr_typed_at e_ = kcr_typed_at_entry(&b.at, %s, key);\n%s", k, body));
            free(body);
            if (el->kind == GEN_QUANTITY)
                fn(o, gen_printf("kcr_err %s_set_%s_text(%s b, const char *key, const char *v)", E,
                                 c, E),
                   gen_printf("    kcr_typed_at e_ = kcr_typed_at_entry(&b.at, %s, key);\n"
                              "    return kcr_typed_set_quantity_text(&e_, NULL, v);\n", k));
        }
        fn(o, gen_printf("kcr_err %s_delete_%s_key(%s b, const char *key)", E, c, E),
           gen_printf("    kcr_typed_at e_ = kcr_typed_at_entry(&b.at, %s, key);\n"
                      "    return kcr_typed_delete(&e_, NULL);\n", k));
        break;
    default:
        fn(o, gen_printf("kcr_err %s_set_%s(%s b, %s%sv)", E, c, E, scalar_of(&f->t).ctype,
                         sp(&f->t)),
           set_body(&f->t, "&b.at", k, NULL));
        if (f->t.kind == GEN_QUANTITY)
            fn(o, gen_printf("kcr_err %s_set_%s_text(%s b, const char *v)", E, c, E),
               gen_printf("    return kcr_typed_set_quantity_text(&b.at, %s, v);\n", k));
    }
    if (f->t.kind == GEN_OBJECT || f->t.kind == GEN_ARRAY || f->t.kind == GEN_MAP)
        fn(o, gen_printf("kcr_err %s_set_%s_value(%s b, kcr_value v)", E, c, E),
           gen_printf("    return kcr_typed_set_value(&b.at, %s, v);\n", k));
    fn(o, gen_printf("kcr_err %s_delete_%s(%s b)", E, c, E),
       gen_printf("    return kcr_typed_delete(&b.at, %s);\n", k));
    free(k);
    free(E);
    free(key);
}

static void root_kind(out *o, const gen_pkg *pkg, const gen_type *t)
{
    char *U = gen_upper(t->name);
    const char *P = t->upper, *T = t->cname;
    char *api_version = *t->group ? gen_printf("%s/%s", t->group, t->version)
                                  : gen_strdup(t->version);
    kcr__buf_printf(&o->h,
                    "#define %s_%s_GROUP \"%s\"\n#define %s_%s_VERSION \"%s\"\n"
                    "#define %s_%s_KIND \"%s\"\n#define %s_%s_API_VERSION \"%s\"\n",
                    P, U, t->group, P, U, t->version, P, U, t->kind, P, U, api_version);
    if (t->plural)
        kcr__buf_printf(&o->h, "#define %s_%s_RESOURCE \"%s\"\n", P, U, t->plural);
    kcr__buf_str(&o->h, "/* The view of a whole object (borrowed, like the object's strings). */\n");
    fn(o, gen_printf("%s %s_of(const kcr_object *o)", T, T),
       gen_printf("    %s r_;\n    r_.v = kcr_object_root(o);\n    return r_;\n", T));
    kcr__buf_str(&o->h, "/* The edit view of a whole edit (e borrowed). */\n");
    fn(o, gen_printf("%sEdit %s_edit(kcr_object_edit *e)", T, T),
       gen_printf("    %sEdit r_;\n    r_.at = kcr_typed_at_root(e);\n    return r_;\n", T));
    kcr__buf_printf(&o->h, "/* Starts an edit of base (NULL: an empty object) with apiVersion %s\n"
                           " * and kind %s set; *out is the caller's (kcr_object_edit_free). */\n",
                    api_version, t->kind);
    fn(o, gen_printf("kcr_err %s_new(const kcr_object *base, kcr_object_edit **out)", T),
       gen_printf("    if (!out)\n        return kcr_set_error(KCR_ERR_INVALID, \"%s_new: NULL out\");\n"
                  "    kcr_err err = kcr_object_edit_new(base, out);\n"
                  "    if (err == KCR_OK)\n"
                  "        err = kcr_object_edit_set_string(*out, \"apiVersion\", %s_%s_API_VERSION);\n"
                  "    if (err == KCR_OK)\n"
                  "        err = kcr_object_edit_set_string(*out, \"kind\", %s_%s_KIND);\n"
                  "    if (err != KCR_OK) {\n        kcr_object_edit_free(*out);\n        *out = NULL;\n    }\n"
                  "    return err;\n",
                  T, P, U, P, U));
    char *sname = gen_printf("%s_schema_", T);
    kcr__buf_str(&o->h, "/* Checks o against the schema (kcr_schema_validate): KCR_ERR_INVALID with\n"
                        " * every violation; out (may be NULL) gets them, the caller frees. */\n");
    fn(o, gen_printf("kcr_err %s_validate(const kcr_object *o, kcr_violations *out)", T),
       gen_printf("    if (!o)\n        return kcr_set_error(KCR_ERR_INVALID, \"%s_validate: NULL object\");\n"
                  "    return kcr_schema_validate(&%s, \"%s\", kcr_object_root(o), out);\n",
                  T, sname, t->schema_type));
    if (pkg->defaults) {
        kcr__buf_str(&o->h, "/* Applies the schema's defaults to e (kcr_schema_default). */\n");
        fn(o, gen_printf("kcr_err %s_default(kcr_object_edit *e)", T),
           gen_printf("    return kcr_schema_default(&%s, \"%s\", e);\n", sname, t->schema_type));
    }
    free(sname);
    free(api_version);
    free(U);
}

static void enum_decls(out *o, const gen_enum *e)
{
    kcr__buf_printf(&o->h, "typedef enum %s {\n    %s_UNKNOWN = 0, /* absent from the schema */\n",
                    e->cname, e->upper);
    for (size_t i = 0; i < e->n; i++) {
        char *v = cstr(e->values[i]);
        kcr__buf_printf(&o->h, "    %s_%s = %zu%s /* \"%s\" */\n", e->upper, e->consts[i], i + 1,
                        i + 1 < e->n ? "," : "", v);
        free(v);
    }
    kcr__buf_printf(&o->h, "} %s;\n", e->cname);
    kcr__buf_printf(&o->c, "static const char *const %s_values_[] = {", e->cname);
    for (size_t i = 0; i < e->n; i++) {
        char *v = cstr(e->values[i]);
        kcr__buf_printf(&o->c, "%s\"%s\"", i ? ", " : "", v);
        free(v);
    }
    kcr__buf_str(&o->c, "};\n\n");
    kcr__buf_str(&o->h, "/* The value's string (static), \"\" for UNKNOWN. */\n");
    fn(o, gen_printf("const char *%s_name(%s v)", e->cname, e->cname),
       gen_printf("    return (int)v >= 1 && (int)v <= %zu ? %s_values_[(int)v - 1] : \"\";\n", e->n,
                  e->cname));
}

/* The packages pkg's types refer to. */
static bool uses(const gen_pkg *pkg, const gen_pkg *other)
{
    for (size_t i = 0; i < pkg->n_types; i++)
        for (size_t f = 0; f < pkg->types[i]->n_fields; f++) {
            const gen_tref *r = &pkg->types[i]->fields[f].t;
            const gen_tref *el = r->elem;
            if ((r->kind == GEN_OBJECT && r->obj->pkg == other) ||
                (el && el->kind == GEN_OBJECT && el->obj->pkg == other))
                return true;
        }
    return false;
}

static void schema_chunks(out *o, const gen_ctx *ctx, const gen_pkg *pkg)
{
    kcr__buf json = {0};
    gen_schema_json(ctx, pkg, &json);
    kcr__buf_printf(&o->c, "static const char *const %s_schema_chunks_[] = {\n", pkg->prefix);
    for (size_t at = 0; at < json.len; at += 2000) {
        size_t n = json.len - at < 2000 ? json.len - at : 2000;
        char *part = gen_printf("%.*s", (int)n, json.s + at);
        char *lit = cstr(part);
        kcr__buf_printf(&o->c, "    \"%s\",\n", lit);
        free(lit);
        free(part);
    }
    kcr__buf_str(&o->c, "    NULL};\n\n");
    kcr__buf_free(&json);
    for (size_t i = 0; i < pkg->n_types; i++) {
        const gen_type *t = pkg->types[i];
        if (!t->root)
            continue;
        char *name = pkg->crd ? gen_strdup(pkg->crd_name)
                     : *t->group ? gen_printf("%s.%s", t->kind, t->group)
                                 : gen_strdup(t->kind);
        kcr__buf_printf(&o->c, "static kcr_schema %s_schema_ = {%s_schema_chunks_, \"%s\", NULL};\n",
                        t->cname, pkg->prefix, name);
        free(name);
    }
    kcr__buf_str(&o->c, "\n");
}

void gen_emit(const gen_ctx *ctx, const gen_pkg *pkg, const char *include_as, const char *api,
              FILE *h, FILE *c)
{
    out o = {.api = api};
    char *guard = gen_upper(include_as);
    kcr__buf_printf(&o.h, "/* Generated by kcr-gen: do not edit (docs/types.md). */\n"
                          "#ifndef %s\n#define %s\n\n#include <stdbool.h>\n#include <stddef.h>\n"
                          "#include <stdint.h>\n\n#include \"kcr/typed.h\"\n",
                    guard, guard);
    for (size_t i = 0; i < ctx->n_pkgs; i++)
        if (ctx->pkgs[i] != pkg && uses(pkg, ctx->pkgs[i]))
            kcr__buf_printf(&o.h, "#include \"%s\"\n", ctx->pkgs[i]->include_as);
    if (*api)
        kcr__buf_str(&o.h, "#include \"kcr/export.h\"\n");
    kcr__buf_str(&o.h,
                 "\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n"
                 "/* Read views (T: a kcr_value borrowed from an object, valid while the caller\n"
                 " * holds it; thread-safe) and edit views (TEdit: an edit and a path, used by\n"
                 " * the edit's thread). Getters return KCR_FIELD_SET (then *out is filled),\n"
                 " * KCR_FIELD_ABSENT (missing or null) or KCR_FIELD_WRONG_TYPE; strings are\n"
                 " * borrowed from the object. Setters copy and return a kcr_err. _len/_at\n"
                 " * iterate lists and maps, _get looks a map key up, append_ adds to a list,\n"
                 " * set_X_value copies a value of another object. See docs/types.md. */\n");
    kcr__buf_printf(&o.c, "/* Generated by kcr-gen: do not edit (docs/types.md). */\n"
                          "#include \"%s\"\n\n", include_as);
    for (size_t i = 0; i < pkg->n_types; i++) {
        const gen_type *t = pkg->types[i];
        kcr__buf_printf(&o.h, "typedef struct %s { kcr_value v; } %s; /* %s */\n", t->cname,
                        t->cname, t->origin);
        kcr__buf_printf(&o.h, "typedef struct %sEdit { kcr_typed_at at; } %sEdit;\n", t->cname,
                        t->cname);
    }
    kcr__buf_str(&o.h, "\n");
    for (size_t i = 0; i < pkg->n_enums; i++)
        enum_decls(&o, pkg->enums[i]);
    bool roots = false;
    for (size_t i = 0; i < pkg->n_types; i++)
        roots |= pkg->types[i]->root;
    if (roots)
        schema_chunks(&o, ctx, pkg);
    for (size_t i = 0; i < pkg->n_types; i++) {
        const gen_type *t = pkg->types[i];
        kcr__buf_printf(&o.h, "\n/* ---- %s (%s) ---- */\n", t->name, t->origin);
        if (t->root)
            root_kind(&o, pkg, t);
        for (size_t f = 0; f < t->n_fields; f++)
            field_read(&o, t, &t->fields[f]);
        for (size_t f = 0; f < t->n_fields; f++)
            field_edit(&o, t, &t->fields[f]);
    }
    kcr__buf_printf(&o.h, "\n#ifdef __cplusplus\n}\n#endif\n\n#endif\n");
    if (o.h.oom || o.c.oom)
        gen_die("out of memory");
    if (fwrite(o.h.s, 1, o.h.len, h) != o.h.len || fwrite(o.c.s, 1, o.c.len, c) != o.c.len)
        gen_die("write failed");
    kcr__buf_free(&o.h);
    kcr__buf_free(&o.c);
    free(guard);
}
