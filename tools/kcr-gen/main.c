/* kcr-gen: typed C accessors from Kubernetes schemas (docs/types.md).
 *
 *   kcr-gen --prefix foo --header foo_types.h --source foo_types.c crd.yaml
 *   kcr-gen --openapi --header-dir include --source-dir src [--kinds Pod,...] doc.json...
 *
 * The first form reads a CustomResourceDefinition (YAML or JSON; every
 * version); the second reads OpenAPI v3 documents of built-in groups
 * (/openapi/v3/apis/<group>/<version>) and writes one pair per group and
 * version reached, as kcr/types/<group>_<version>.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testkit/yaml_json.h"
#include "gen.h"

/* What controllers use most, and every type they reach. */
static const char DEFAULT_KINDS[] =
    "Pod,Service,ConfigMap,Secret,Namespace,ResourceQuota,LimitRange,ServiceAccount,"
    "Deployment,StatefulSet,DaemonSet,ReplicaSet,Role,RoleBinding,ClusterRole,"
    "ClusterRoleBinding,Lease,Ingress,NetworkPolicy,PodDisruptionBudget";

static void usage(FILE *f)
{
    fputs("usage: kcr-gen --prefix P --header FILE.h --source FILE.c [--include-as NAME]\n"
          "               [--api MACRO] CRD.yaml\n"
          "       kcr-gen --openapi --header-dir DIR --source-dir DIR [--kinds K,K...|all]\n"
          "               [--include-prefix kcr/types/] [--api MACRO] DOC.json...\n"
          "Writes C11 accessors over kcr_object for a CRD's kinds (every version) or for\n"
          "the kinds of OpenAPI v3 documents and every type they reach (docs/types.md).\n",
          f);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        gen_die("%s: %s", path, strerror(errno));
    kcr__buf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        kcr__buf_add(&b, chunk, n);
    if (ferror(f) || b.oom)
        gen_die("%s: read failed", path);
    fclose(f);
    *len = b.len;
    return b.s ? b.s : gen_strdup("");
}

typedef struct loaded {
    gen_ctx *ctx;
    const char *path;
} loaded;

static kcr_err add_doc(size_t index, const char *json, size_t len, void *user_data)
{
    loaded *l = user_data;
    kcr_object *doc;
    if (kcr_object_parse_any(json, len, &doc) != KCR_OK)
        gen_die("%s: document %zu: %s", l->path, index, kcr_last_error());
    gen_ctx *ctx = l->ctx;
    ctx->docs = realloc(ctx->docs, (ctx->n_docs + 1) * sizeof *ctx->docs);
    if (!ctx->docs)
        gen_die("out of memory");
    ctx->docs[ctx->n_docs++] = doc;
    return KCR_OK;
}

static void load(gen_ctx *ctx, const char *path)
{
    size_t len;
    char *text = slurp(path, &len);
    loaded l = {ctx, path};
    /* JSON is read as JSON (large documents, exact numbers); YAML through
     * libyaml. */
    size_t i = 0;
    while (i < len && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r'))
        i++;
    if (i < len && text[i] == '{')
        add_doc(0, text, len, &l);
    else if (kcr__yaml_each_json(text, len, add_doc, &l) != KCR_OK)
        gen_die("%s: %s", path, kcr_last_error());
    free(text);
}

static FILE *create(const char *path)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        gen_die("%s: %s", path, strerror(errno));
    return f;
}

static void finish(FILE *f, const char *path)
{
    if (fclose(f) != 0)
        gen_die("%s: write failed", path);
}

static bool wanted(const char *kinds, const char *kind)
{
    if (strcmp(kinds, "all") == 0)
        return true;
    size_t n = strlen(kind);
    for (const char *p = kinds; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, kind, n) == 0)
            return true;
        p += len + (end ? 1 : 0);
    }
    return false;
}

/* Every component with a group-version-kind the list names. */
static void add_kinds(gen_ctx *ctx, const char *kinds)
{
    size_t found = 0;
    for (size_t d = 0; d < ctx->n_docs; d++) {
        kcr_value schemas = kcr_object_get(ctx->docs[d], "components.schemas");
        for (size_t i = 0; i < kcr_value_len(schemas); i++) {
            const char *name;
            kcr_value s = kcr_value_entry(schemas, i, &name, NULL);
            kcr_value gvk = kcr_value_member(s, "x-kubernetes-group-version-kind");
            const char *kind = kcr_value_string(kcr_value_get(gvk, "[0].kind"), NULL);
            if (kcr_value_len(gvk) != 1 || !kind || strncmp(name, "io.k8s.api.", 11) != 0 ||
                !wanted(kinds, kind))
                continue;
            gen_add_component(ctx, name);
            found++;
        }
    }
    if (found == 0)
        gen_die("no kind of \"%s\" in the documents given", kinds);
}

int main(int argc, char **argv)
{
    const char *prefix = NULL, *header = NULL, *source = NULL, *include_as = NULL, *api = "";
    const char *header_dir = NULL, *source_dir = NULL, *kinds = DEFAULT_KINDS;
    const char *include_prefix = "kcr/types/";
    bool openapi = false;
    int i = 1;
    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(a, "--openapi") == 0) {
            openapi = true;
            continue;
        }
        if (i + 1 >= argc)
            gen_die("%s needs a value", a);
        const char *v = argv[++i];
        if (strcmp(a, "--prefix") == 0) prefix = v;
        else if (strcmp(a, "--header") == 0) header = v;
        else if (strcmp(a, "--source") == 0) source = v;
        else if (strcmp(a, "--include-as") == 0) include_as = v;
        else if (strcmp(a, "--api") == 0) api = v;
        else if (strcmp(a, "--header-dir") == 0) header_dir = v;
        else if (strcmp(a, "--source-dir") == 0) source_dir = v;
        else if (strcmp(a, "--kinds") == 0) kinds = v;
        else if (strcmp(a, "--include-prefix") == 0) include_prefix = v;
        else {
            usage(stderr);
            gen_die("unknown option %s", a);
        }
    }
    if (i >= argc) {
        usage(stderr);
        return 2;
    }
    gen_ctx ctx = {0};
    for (; i < argc; i++)
        load(&ctx, argv[i]);
    if (openapi) {
        if (!header_dir || !source_dir)
            gen_die("--openapi needs --header-dir and --source-dir");
        add_kinds(&ctx, kinds);
        for (size_t p = 0; p < ctx.n_pkgs; p++)
            ctx.pkgs[p]->include_as = gen_printf("%s%s.h", include_prefix, ctx.pkgs[p]->id);
        for (size_t p = 0; p < ctx.n_pkgs; p++) {
            gen_pkg *pkg = ctx.pkgs[p];
            char *h = gen_printf("%s/%s", header_dir, pkg->include_as);
            char *c = gen_printf("%s/%s.c", source_dir, pkg->id);
            FILE *hf = create(h), *cf = create(c);
            gen_emit(&ctx, pkg, pkg->include_as, api, hf, cf);
            finish(hf, h);
            finish(cf, c);
            free(h);
            free(c);
        }
        gen_ctx_free(&ctx);
        return 0;
    }
    if (!prefix || !header || !source)
        gen_die("a CRD needs --prefix, --header and --source (or --openapi for documents)");
    gen_pkg *pkg = gen_pkg_new(&ctx, prefix, prefix);
    size_t crds = 0;
    for (size_t d = 0; d < ctx.n_docs; d++)
        if (strcmp(kcr_object_kind(ctx.docs[d]), "CustomResourceDefinition") == 0) {
            gen_add_crd(&ctx, pkg, ctx.docs[d]);
            crds++;
        }
    if (crds != 1)
        gen_die("expected one CustomResourceDefinition, found %zu (one pair of files per CRD)",
                crds);
    if (!include_as) {
        const char *slash = strrchr(header, '/');
        include_as = slash ? slash + 1 : header;
    }
    pkg->include_as = gen_strdup(include_as);
    for (size_t p = 0; p < ctx.n_pkgs; p++)
        if (ctx.pkgs[p] != pkg) {
            ctx.pkgs[p]->include_as = gen_printf("%s%s.h", include_prefix, ctx.pkgs[p]->id);
        }
    FILE *hf = create(header), *cf = create(source);
    gen_emit(&ctx, pkg, include_as, api, hf, cf);
    finish(hf, header);
    finish(cf, source);
    gen_ctx_free(&ctx);
    return 0;
}
