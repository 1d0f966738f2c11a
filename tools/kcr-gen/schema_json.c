/* kcr-gen: the schema a package embeds for its validate and default
 * functions, trimmed to the keywords typed/schema_walk.c reads. */
#include <stdlib.h>
#include <string.h>

#include "gen.h"

static const char *const KEEP[] = {
    "type", "properties", "items", "additionalProperties", "required", "enum", "minimum",
    "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "pattern",
    "minItems", "maxItems", "maxProperties", "nullable", "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields", "default", "$ref", "allOf"};

typedef struct refs {
    char **names;
    size_t n;
} refs;

static void add_ref(refs *r, const char *ref)
{
    static const char prefix[] = "#/components/schemas/";
    if (strncmp(ref, prefix, sizeof prefix - 1) != 0)
        return;
    ref += sizeof prefix - 1;
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->names[i], ref) == 0)
            return;
    r->names = realloc(r->names, (r->n + 1) * sizeof *r->names);
    if (!r->names)
        gen_die("out of memory");
    r->names[r->n++] = gen_strdup(ref);
}

static void value_json(kcr_value v, kcr__buf *out)
{
    char *json = NULL;
    if (kcr_value_to_json(v, &json, NULL) != KCR_OK)
        gen_die("cannot serialise a schema value");
    kcr__buf_str(out, json);
    free(json);
}

static bool kept(const char *key, bool defaults)
{
    if (!defaults && strcmp(key, "default") == 0)
        return false;
    for (size_t i = 0; i < sizeof KEEP / sizeof *KEEP; i++)
        if (strcmp(KEEP[i], key) == 0)
            return true;
    return false;
}

static void schema(kcr_value s, bool defaults, refs *r, kcr__buf *out);

/* A map of schemas (properties) or an array of them (allOf). */
static void schemas(kcr_value v, bool defaults, refs *r, kcr__buf *out)
{
    bool arr = kcr_value_get_type(v) == KCR_VALUE_ARRAY;
    kcr__buf_str(out, arr ? "[" : "{");
    for (size_t i = 0; i < kcr_value_len(v); i++) {
        if (i)
            kcr__buf_str(out, ",");
        const char *key = NULL;
        size_t klen = 0;
        kcr_value item = arr ? kcr_value_at(v, i) : kcr_value_entry(v, i, &key, &klen);
        if (!arr) {
            kcr__buf_json_string(out, key, klen);
            kcr__buf_str(out, ":");
        }
        schema(item, defaults, r, out);
    }
    kcr__buf_str(out, arr ? "]" : "}");
}

static void schema(kcr_value s, bool defaults, refs *r, kcr__buf *out)
{
    if (kcr_value_get_type(s) != KCR_VALUE_OBJECT) {
        value_json(s, out); /* additionalProperties: true */
        return;
    }
    kcr__buf_str(out, "{");
    bool first = true;
    for (size_t i = 0; i < kcr_value_len(s); i++) {
        const char *key;
        size_t klen;
        kcr_value v = kcr_value_entry(s, i, &key, &klen);
        if (!kept(key, defaults))
            continue;
        kcr__buf_str(out, first ? "" : ",");
        first = false;
        kcr__buf_json_string(out, key, klen);
        kcr__buf_str(out, ":");
        if (strcmp(key, "properties") == 0 || strcmp(key, "allOf") == 0)
            schemas(v, defaults, r, out);
        else if (strcmp(key, "items") == 0 || strcmp(key, "additionalProperties") == 0)
            schema(v, defaults, r, out);
        else
            value_json(v, out);
        if (strcmp(key, "$ref") == 0 && r)
            add_ref(r, kcr_value_string(v, NULL));
    }
    kcr__buf_str(out, "}");
}

void gen_schema_json(const gen_ctx *ctx, const gen_pkg *pkg, kcr__buf *out)
{
    kcr__buf_str(out, "{\"components\":{\"schemas\":{");
    if (pkg->crd) {
        kcr_value versions = kcr_object_get(pkg->crd, "spec.versions");
        for (size_t i = 0; i < kcr_value_len(versions); i++) {
            kcr_value v = kcr_value_at(versions, i);
            kcr__buf_str(out, i ? "," : "");
            kcr__buf_json_string(out, kcr_value_string(kcr_value_member(v, "name"), NULL),
                                 kcr_value_len(kcr_value_member(v, "name")));
            kcr__buf_str(out, ":");
            schema(kcr_value_get(v, "schema.openAPIV3Schema"), true, NULL, out);
        }
    } else {
        refs r = {0};
        for (size_t i = 0; i < pkg->n_types; i++)
            if (pkg->types[i]->root) {
                char *ref = gen_printf("#/components/schemas/%s", pkg->types[i]->schema_type);
                add_ref(&r, ref);
                free(ref);
            }
        for (size_t i = 0; i < r.n; i++) { /* r grows while walking */
            kcr__buf_str(out, i ? "," : "");
            kcr__buf_json_string(out, r.names[i], strlen(r.names[i]));
            kcr__buf_str(out, ":");
            schema(gen_component(ctx, r.names[i], NULL), false, &r, out);
        }
        for (size_t i = 0; i < r.n; i++)
            free(r.names[i]);
        free(r.names);
    }
    kcr__buf_str(out, "}}}");
    if (out->oom)
        gen_die("out of memory");
}
