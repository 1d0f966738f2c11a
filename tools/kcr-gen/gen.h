/* kcr-gen's model: the C types it derives from a schema (docs/types.md).
 * model.c builds it from CRDs and OpenAPI documents, names.c names things,
 * emit_h.c and emit_c.c write the header and the source. */
#ifndef KCR_GEN_H
#define KCR_GEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "core/buf.h"
#include "kcr/object.h"

typedef enum gen_kind {
    GEN_STRING,
    GEN_INT32,
    GEN_INT64,
    GEN_BOOL,
    GEN_NUMBER,
    GEN_INT_OR_STRING,
    GEN_QUANTITY,
    GEN_ENUM,
    GEN_OBJECT,
    GEN_ARRAY,
    GEN_MAP,
    GEN_RAW /* anything else: a kcr_value */
} gen_kind;

struct gen_type;
struct gen_enum;

/* The type of a field, an array element or a map value. */
typedef struct gen_tref {
    gen_kind kind;
    struct gen_type *obj;   /* GEN_OBJECT */
    struct gen_tref *elem;  /* GEN_ARRAY, GEN_MAP: scalar or object only */
    struct gen_enum *en;    /* GEN_ENUM */
} gen_tref;

typedef struct gen_enum {
    char *cname;   /* C type: prefix_Type_Field */
    char *upper;   /* constant prefix: PREFIX_TYPE_FIELD */
    char **values; /* the strings */
    char **consts; /* their constant suffixes */
    size_t n;
} gen_enum;

typedef struct gen_field {
    char *json;  /* the JSON member name */
    char *cname; /* its C name (snake_case, unique within the type) */
    gen_tref t;
} gen_field;

typedef struct gen_pkg gen_pkg;

typedef struct gen_type {
    gen_pkg *pkg;
    char *name;   /* CamelCase, unique within the package */
    char *cname;  /* prefix_Name */
    char *upper;  /* PREFIX: the package's, or PREFIX_V1 in a CRD of several versions */
    char *origin; /* component name or JSON path, for the comment */
    gen_field *fields;
    size_t n_fields;
    /* Root kinds (x-kubernetes-group-version-kind, or a CRD version). */
    bool root;
    char *group, *version, *kind, *plural;
    char *schema_type; /* the component validate names: its name, or the CRD version */
} gen_type;

/* One output pair (.h/.c): a package of types with one C prefix. */
struct gen_pkg {
    char *id;     /* "core_v1", or the CRD prefix */
    char *prefix; /* "kcr_core_v1" */
    char *upper;  /* "KCR_CORE_V1" */
    gen_type **types;
    size_t n_types;
    gen_enum **enums;
    size_t n_enums;
    const kcr_object *crd;        /* CRD mode: the CustomResourceDefinition */
    char *include_as;             /* the header users include */
    bool defaults;                /* emit _default (CRDs) */
    char *crd_name;               /* CRD: Kind.group, for messages */
};

typedef struct gen_ctx {
    gen_pkg **pkgs;
    size_t n_pkgs;
    kcr_object **docs; /* every document read, searched in order */
    size_t n_docs;
} gen_ctx;

/* ---- names.c ---- */
/* "deploymentName" -> "deployment_name", "podIPs" -> "pod_ips". malloc'd. */
char *gen_snake(const char *json);
/* "deploymentName" -> "DeploymentName". malloc'd. */
char *gen_camel(const char *json);
/* Upper-case identifier text of s ("IfNotPresent" -> "IF_NOT_PRESENT"). */
char *gen_upper(const char *s);
char *gen_strdup(const char *s);
char *gen_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Exits with a message: kcr-gen is a build tool, a failure stops the build. */
void gen_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* ---- model.c ---- */
gen_pkg *gen_pkg_new(gen_ctx *ctx, const char *id, const char *prefix);
/* Adds the kind of every served version of a CRD to `pkg`. */
void gen_add_crd(gen_ctx *ctx, gen_pkg *pkg, const kcr_object *crd);
/* Adds the component `name` (e.g. io.k8s.api.core.v1.Pod) and everything it
 * reaches, each in the package of its group and version. */
gen_type *gen_add_component(gen_ctx *ctx, const char *name);
/* Frees the model and the documents. */
void gen_ctx_free(gen_ctx *ctx);
/* The component `name` of the loaded OpenAPI documents (ABSENT: none). */
kcr_value gen_component(const gen_ctx *ctx, const char *name, const kcr_object **doc);

/* ---- emit.c ---- */
/* Writes pkg's header (included as `include_as`) to h and its source to c.
 * `api` is the export macro put before each declaration ("" for none). */
void gen_emit(const gen_ctx *ctx, const gen_pkg *pkg, const char *include_as, const char *api,
              FILE *h, FILE *c);

/* ---- schema_json.c ---- */
/* pkg's schemas as one document, {"components":{"schemas":{...}}}, keeping
 * only what validation and defaults read. */
void gen_schema_json(const gen_ctx *ctx, const gen_pkg *pkg, kcr__buf *out);

#endif
