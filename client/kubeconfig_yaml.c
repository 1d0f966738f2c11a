/* kubeconfig documents: libyaml's document of one file read into the
 * entries of a kcr__kubeconfig (clusters, users, contexts), merged across
 * files like kubectl does (the first file to name an entry wins). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "client/kubeconfig_impl.h"
#include "core/error.h"

void *kcr__kc_keep(kcr__kc_arena *a, void *p)
{
    if (!p)
        return NULL;
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        void **np = realloc(a->ptrs, cap * sizeof *np);
        if (!np) {
            free(p);
            return NULL;
        }
        a->ptrs = np;
        a->cap = cap;
    }
    a->ptrs[a->n++] = p;
    return p;
}

static void arena_free(kcr__kc_arena *a)
{
    for (size_t i = 0; i < a->n; i++)
        free(a->ptrs[i]);
    free(a->ptrs);
}

void kcr__kubeconfig_free(kcr__kubeconfig *kc)
{
    for (size_t i = 0; i < kc->n_users; i++)
        kcr__exec_free(kc->users[i].exec);
    free(kc->clusters);
    free(kc->users);
    free(kc->contexts);
    for (size_t i = 0; i < kc->mem.n; i++) {
        /* secrets from the arena are wiped before freeing */
        char *s = kc->mem.ptrs[i];
        volatile char *p = s;
        while (*p)
            *p++ = 0;
    }
    arena_free(&kc->mem);
}

/* ---- YAML access -------------------------------------------------------------- */

typedef struct ydoc {
    yaml_document_t doc;
    const char *file;
} ydoc;

static yaml_node_t *ynode(ydoc *d, int index)
{
    return yaml_document_get_node(&d->doc, index);
}

static yaml_node_t *yget(ydoc *d, yaml_node_t *map, const char *key)
{
    if (!map || map->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = ynode(d, p->key);
        if (k && k->type == YAML_SCALAR_NODE && k->data.scalar.length == strlen(key) &&
            memcmp(k->data.scalar.value, key, k->data.scalar.length) == 0)
            return ynode(d, p->value);
    }
    return NULL;
}

static bool yis_null(yaml_node_t *n)
{
    if (!n)
        return true;
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    const char *v = (const char *)n->data.scalar.value;
    return !*v || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 || strcmp(v, "Null") == 0 ||
           strcmp(v, "NULL") == 0;
}

/* String value of a scalar under `key`; NULL when absent or null. Copied into
 * the arena. *err is set (KCR_ERR_CONFIG) when the value is not a scalar. */
static const char *ystr(kcr__kubeconfig *kc, ydoc *d, yaml_node_t *map, const char *key,
                        const char *where, kcr_err *err)
{
    yaml_node_t *n = yget(d, map, key);
    if (yis_null(n))
        return NULL;
    if (n->type != YAML_SCALAR_NODE) {
        *err = kcr__fail(KCR_ERR_CONFIG, "kubeconfig %s: %s: \"%s\" must be a string (line %lu)",
                         d->file, where, key, (unsigned long)n->start_mark.line + 1);
        return NULL;
    }
    char *s = malloc(n->data.scalar.length + 1);
    if (!s) {
        *err = kcr__fail(KCR_ERR_NOMEM, "out of memory reading the kubeconfig");
        return NULL;
    }
    memcpy(s, n->data.scalar.value, n->data.scalar.length);
    s[n->data.scalar.length] = '\0';
    if (strlen(s) != n->data.scalar.length) {
        free(s);
        *err = kcr__fail(KCR_ERR_CONFIG, "kubeconfig %s: %s: \"%s\" contains a NUL byte", d->file,
                         where, key);
        return NULL;
    }
    return kcr__kc_keep(&kc->mem, s);
}

static bool ybool(kcr__kubeconfig *kc, ydoc *d, yaml_node_t *map, const char *key,
                  const char *where, kcr_err *err)
{
    const char *v = ystr(kc, d, map, key, where, err);
    return v && (strcmp(v, "true") == 0 || strcmp(v, "True") == 0 || strcmp(v, "TRUE") == 0 ||
                 strcmp(v, "yes") == 0);
}

static char *arena_printf(kcr__kc_arena *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static char *arena_printf(kcr__kc_arena *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    char *s = malloc((size_t)n + 1);
    if (!s)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return kcr__kc_keep(a, s);
}

char *kcr__kc_resolve_path(const char *dir, const char *path)
{
    if (path[0] == '/' || !dir)
        return strdup(path);
    size_t len = strlen(dir) + strlen(path) + 2;
    char *s = malloc(len);
    if (s)
        snprintf(s, len, "%s/%s", dir, path);
    return s;
}

static kcr_err parse_exec(kcr__kubeconfig *kc, ydoc *d, yaml_node_t *node, const char *where,
                          const char *dir, kcr__exec_config **out)
{
    kcr_err err = KCR_OK;
    *out = NULL;
    if (node->type != YAML_MAPPING_NODE)
        return kcr__fail(KCR_ERR_CONFIG, "kubeconfig %s: %s: exec must be a map", d->file, where);
    const char *command = ystr(kc, d, node, "command", where, &err);
    const char *api_version = ystr(kc, d, node, "apiVersion", where, &err);
    const char *hint = ystr(kc, d, node, "installHint", where, &err);
    bool cluster_info = ybool(kc, d, node, "provideClusterInfo", where, &err);
    if (err != KCR_OK)
        return err;
    if (!command || !*command)
        return kcr__fail(KCR_ERR_CONFIG, "kubeconfig %s: %s: exec.command is missing", d->file,
                         where);
    if (api_version && strcmp(api_version, "client.authentication.k8s.io/v1") != 0 &&
        strcmp(api_version, "client.authentication.k8s.io/v1beta1") != 0)
        return kcr__fail(KCR_ERR_CONFIG,
                         "kubeconfig %s: %s: exec apiVersion \"%s\" is not supported (use "
                         "client.authentication.k8s.io/v1)",
                         d->file, where, api_version);
    kcr__exec_config *e = calloc(1, sizeof *e);
    if (!e)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory reading the kubeconfig");
    /* A command with a '/' but not absolute is relative to the kubeconfig. */
    e->command = strchr(command, '/') ? kcr__kc_resolve_path(dir, command) : strdup(command);
    e->api_version = strdup(api_version ? api_version : "client.authentication.k8s.io/v1");
    e->install_hint = kcr__xstrdup(hint);
    e->provide_cluster_info = cluster_info;
    yaml_node_t *args = yget(d, node, "args");
    yaml_node_t *env = yget(d, node, "env");
    size_t n_args = args && args->type == YAML_SEQUENCE_NODE
                        ? (size_t)(args->data.sequence.items.top - args->data.sequence.items.start)
                        : 0;
    size_t n_env = env && env->type == YAML_SEQUENCE_NODE
                       ? (size_t)(env->data.sequence.items.top - env->data.sequence.items.start)
                       : 0;
    e->args = calloc(n_args + 1, sizeof *e->args);
    e->env = calloc(n_env + 1, sizeof *e->env);
    if (!e->command || !e->api_version || !e->args || !e->env) {
        kcr__exec_free(e);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory reading the kubeconfig");
    }
    if ((args && !yis_null(args) && args->type != YAML_SEQUENCE_NODE) ||
        (env && !yis_null(env) && env->type != YAML_SEQUENCE_NODE)) {
        kcr__exec_free(e);
        return kcr__fail(KCR_ERR_CONFIG, "kubeconfig %s: %s: exec args and env must be lists",
                         d->file, where);
    }
    for (size_t i = 0; i < n_args; i++) {
        yaml_node_t *a = ynode(d, args->data.sequence.items.start[i]);
        if (!a || a->type != YAML_SCALAR_NODE) {
            kcr__exec_free(e);
            return kcr__fail(KCR_ERR_CONFIG, "kubeconfig %s: %s: exec args must be strings",
                             d->file, where);
        }
        if (!(e->args[e->n_args++] =
                  strndup((const char *)a->data.scalar.value, a->data.scalar.length))) {
            kcr__exec_free(e);
            return kcr__fail(KCR_ERR_NOMEM, "out of memory reading the kubeconfig");
        }
    }
    for (size_t i = 0; i < n_env; i++) {
        yaml_node_t *v = ynode(d, env->data.sequence.items.start[i]);
        const char *name = ystr(kc, d, v, "name", where, &err);
        const char *value = ystr(kc, d, v, "value", where, &err);
        if (err != KCR_OK || !name || !*name || strchr(name, '=')) {
            kcr__exec_free(e);
            return err != KCR_OK ? err
                                 : kcr__fail(KCR_ERR_CONFIG,
                                             "kubeconfig %s: %s: exec env entry %zu needs a name",
                                             d->file, where, i);
        }
        size_t len = strlen(name) + (value ? strlen(value) : 0) + 2;
        if (!(e->env[e->n_env] = malloc(len))) {
            kcr__exec_free(e);
            return kcr__fail(KCR_ERR_NOMEM, "out of memory reading the kubeconfig");
        }
        snprintf(e->env[e->n_env++], len, "%s=%s", name, value ? value : "");
    }
    *out = e;
    return KCR_OK;
}

static bool has_name(const char *name, const void *arr, size_t n, size_t stride)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(*(const char *const *)((const char *)arr + i * stride), name) == 0)
            return true;
    return false;
}

/* The entries of a named list ("clusters", "users", "contexts"): each item is
 * {name: N, <field>: {...}}. Calls add() for names not seen in earlier files. */
static kcr_err each_named(kcr__kubeconfig *kc, ydoc *d, yaml_node_t *root, const char *list,
                          const char *field,
                          kcr_err (*add)(kcr__kubeconfig *, ydoc *, const char *, yaml_node_t *))
{
    yaml_node_t *seq = yget(d, root, list);
    if (yis_null(seq))
        return KCR_OK;
    if (seq->type != YAML_SEQUENCE_NODE)
        return kcr__fail(KCR_ERR_CONFIG, "kubeconfig %s: \"%s\" must be a list", d->file, list);
    for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top;
         it++) {
        yaml_node_t *item = ynode(d, *it);
        kcr_err err = KCR_OK;
        const char *name = ystr(kc, d, item, "name", list, &err);
        if (err != KCR_OK)
            return err;
        if (!item || item->type != YAML_MAPPING_NODE || !name)
            return kcr__fail(KCR_ERR_CONFIG, "kubeconfig %s: an entry of \"%s\" has no name",
                             d->file, list);
        yaml_node_t *body = yget(d, item, field);
        if (body && !yis_null(body) && body->type != YAML_MAPPING_NODE)
            return kcr__fail(KCR_ERR_CONFIG, "kubeconfig %s: %s \"%s\": \"%s\" must be a map",
                             d->file, list, name, field);
        err = add(kc, d, name, yis_null(body) ? NULL : body);
        if (err != KCR_OK)
            return err;
    }
    return KCR_OK;
}

static const char *dir_of(kcr__kubeconfig *kc, const char *file)
{
    const char *slash = strrchr(file, '/');
    if (!slash)
        return ".";
    if (slash == file)
        return "/";
    return kcr__kc_keep(&kc->mem, strndup(file, (size_t)(slash - file)));
}

static kcr_err add_cluster(kcr__kubeconfig *kc, ydoc *d, const char *name, yaml_node_t *b)
{
    if (has_name(name, kc->clusters, kc->n_clusters, sizeof *kc->clusters))
        return KCR_OK;
    kcr__kc_cluster c = {.name = name, .file = d->file, .dir = dir_of(kc, d->file)};
    const char *where = arena_printf(&kc->mem, "cluster \"%s\"", name);
    kcr_err err = where ? KCR_OK : kcr__fail(KCR_ERR_NOMEM, "out of memory reading the kubeconfig");
    c.server = ystr(kc, d, b, "server", where, &err);
    c.ca_file = ystr(kc, d, b, "certificate-authority", where, &err);
    c.ca_data = ystr(kc, d, b, "certificate-authority-data", where, &err);
    c.tls_server_name = ystr(kc, d, b, "tls-server-name", where, &err);
    c.proxy_url = ystr(kc, d, b, "proxy-url", where, &err);
    c.insecure = ybool(kc, d, b, "insecure-skip-tls-verify", where, &err);
    c.disable_compression = ybool(kc, d, b, "disable-compression", where, &err);
    if (err != KCR_OK)
        return err;
    kcr__kc_cluster *n = realloc(kc->clusters, (kc->n_clusters + 1) * sizeof *n);
    if (!n)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory reading the kubeconfig");
    kc->clusters = n;
    kc->clusters[kc->n_clusters++] = c;
    return KCR_OK;
}

static kcr_err add_user(kcr__kubeconfig *kc, ydoc *d, const char *name, yaml_node_t *b)
{
    if (has_name(name, kc->users, kc->n_users, sizeof *kc->users))
        return KCR_OK;
    kcr__kc_user u = {.name = name, .file = d->file, .dir = dir_of(kc, d->file)};
    const char *where = arena_printf(&kc->mem, "user \"%s\"", name);
    kcr_err err = where ? KCR_OK : kcr__fail(KCR_ERR_NOMEM, "out of memory reading the kubeconfig");
    u.cert_file = ystr(kc, d, b, "client-certificate", where, &err);
    u.cert_data = ystr(kc, d, b, "client-certificate-data", where, &err);
    u.key_file = ystr(kc, d, b, "client-key", where, &err);
    u.key_data = ystr(kc, d, b, "client-key-data", where, &err);
    u.token = ystr(kc, d, b, "token", where, &err);
    u.token_file = ystr(kc, d, b, "tokenFile", where, &err);
    u.username = ystr(kc, d, b, "username", where, &err);
    u.password = ystr(kc, d, b, "password", where, &err);
    yaml_node_t *ap = yget(d, b, "auth-provider");
    if (!yis_null(ap)) {
        u.auth_provider = ystr(kc, d, ap, "name", where, &err);
        if (!u.auth_provider)
            u.auth_provider = "?";
    }
    if (err != KCR_OK)
        return err;
    yaml_node_t *ex = yget(d, b, "exec");
    if (!yis_null(ex) && (err = parse_exec(kc, d, ex, where, u.dir, &u.exec)) != KCR_OK)
        return err;
    kcr__kc_user *n = realloc(kc->users, (kc->n_users + 1) * sizeof *n);
    if (!n) {
        kcr__exec_free(u.exec);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory reading the kubeconfig");
    }
    kc->users = n;
    kc->users[kc->n_users++] = u;
    return KCR_OK;
}

static kcr_err add_context(kcr__kubeconfig *kc, ydoc *d, const char *name, yaml_node_t *b)
{
    if (has_name(name, kc->contexts, kc->n_contexts, sizeof *kc->contexts))
        return KCR_OK;
    kcr__kc_context c = {.name = name, .file = d->file};
    const char *where = arena_printf(&kc->mem, "context \"%s\"", name);
    kcr_err err = where ? KCR_OK : kcr__fail(KCR_ERR_NOMEM, "out of memory reading the kubeconfig");
    c.cluster = ystr(kc, d, b, "cluster", where, &err);
    c.user = ystr(kc, d, b, "user", where, &err);
    c.ns = ystr(kc, d, b, "namespace", where, &err);
    if (err != KCR_OK)
        return err;
    kcr__kc_context *n = realloc(kc->contexts, (kc->n_contexts + 1) * sizeof *n);
    if (!n)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory reading the kubeconfig");
    kc->contexts = n;
    kc->contexts[kc->n_contexts++] = c;
    return KCR_OK;
}

/* Parses one kubeconfig document and merges it into kc (earlier files win). */
kcr_err kcr__kubeconfig_merge_yaml(kcr__kubeconfig *kc, const char *yaml, size_t len,
                                   const char *file)
{
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return kcr__fail(KCR_ERR_NOMEM, "out of memory reading the kubeconfig");
    yaml_parser_set_input_string(&parser, (const unsigned char *)yaml, len);
    ydoc d = {.file = file};
    if (!yaml_parser_load(&parser, &d.doc)) {
        kcr_err err =
            kcr__fail(KCR_ERR_CONFIG, "kubeconfig %s: bad YAML at line %lu column %lu: %s", file,
                      (unsigned long)parser.problem_mark.line + 1,
                      (unsigned long)parser.problem_mark.column + 1,
                      parser.problem ? parser.problem : "parse error");
        yaml_parser_delete(&parser);
        return err;
    }
    yaml_parser_delete(&parser);
    yaml_node_t *root = yaml_document_get_root_node(&d.doc);
    kcr_err err = KCR_OK;
    if (root && !yis_null(root)) {
        if (root->type != YAML_MAPPING_NODE) {
            err = kcr__fail(KCR_ERR_CONFIG, "kubeconfig %s: the document is not a map", file);
        } else {
            const char *cur = ystr(kc, &d, root, "current-context", "top level", &err);
            if (err == KCR_OK && cur && *cur && !kc->current_context)
                kc->current_context = cur;
            if (err == KCR_OK)
                err = each_named(kc, &d, root, "clusters", "cluster", add_cluster);
            if (err == KCR_OK)
                err = each_named(kc, &d, root, "users", "user", add_user);
            if (err == KCR_OK)
                err = each_named(kc, &d, root, "contexts", "context", add_context);
        }
    }
    yaml_document_delete(&d.doc);
    return err;
}
