/* kubeconfig loading (libyaml), merging of several files like kubectl, and
 * the in-cluster service-account configuration. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

#include "client/config_impl.h"
#include "client/pem.h"
#include "core/base64.h"
#include "core/error.h"
#include "core/log.h"

enum { MAX_KUBECONFIG = 16 << 20, MAX_CERT = 4 << 20 };

#define DEFAULT_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

/* ---- small helpers ---------------------------------------------------------- */

void kcr__free_secret(char *s)
{
    if (!s)
        return;
    volatile char *p = s;
    while (*p)
        *p++ = 0;
    free(s);
}

void kcr__blob_clear(kcr__blob *b)
{
    if (b->data) {
        volatile char *p = b->data;
        for (size_t i = 0; i < b->len; i++)
            p[i] = 0;
    }
    free(b->data);
    b->data = NULL;
    b->len = 0;
}

kcr_err kcr__read_file(const char *path, size_t max, const char *what, kcr__blob *out)
{
    out->data = NULL;
    out->len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return kcr__fail(errno == ENOENT ? KCR_ERR_NOT_FOUND : KCR_ERR_IO, "%s %s: %s", what,
                         path, strerror(errno));
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap + 1);
    kcr_err err = KCR_OK;
    while (buf) {
        if (len == cap) {
            if (cap >= max) {
                err = kcr__fail(KCR_ERR_TOO_LARGE, "%s %s: larger than %zu bytes", what, path, max);
                break;
            }
            cap *= 2;
            char *nb = realloc(buf, cap + 1);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0) {
            if (ferror(f))
                err = kcr__fail(KCR_ERR_IO, "%s %s: read failed", what, path);
            break;
        }
    }
    fclose(f);
    if (!buf)
        return kcr__fail(KCR_ERR_NOMEM, "%s %s: out of memory", what, path);
    if (err != KCR_OK) {
        free(buf);
        return err;
    }
    buf[len] = '\0';
    out->data = buf;
    out->len = len;
    return KCR_OK;
}

static char *xstrdup(const char *s)
{
    return s ? strdup(s) : NULL;
}

static bool blob_dup(kcr__blob *dst, const kcr__blob *src)
{
    dst->data = NULL;
    dst->len = 0;
    if (!src->data)
        return true;
    dst->data = malloc(src->len + 1);
    if (!dst->data)
        return false;
    memcpy(dst->data, src->data, src->len + 1);
    dst->len = src->len;
    return true;
}

static void exec_free(kcr__exec_config *e)
{
    if (!e)
        return;
    free(e->command);
    for (size_t i = 0; i < e->n_args; i++)
        free(e->args[i]);
    free(e->args);
    for (size_t i = 0; i < e->n_env; i++)
        kcr__free_secret(e->env[i]);
    free(e->env);
    free(e->api_version);
    free(e->install_hint);
    free(e);
}

static kcr__exec_config *exec_dup(const kcr__exec_config *s)
{
    kcr__exec_config *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->command = xstrdup(s->command);
    e->api_version = xstrdup(s->api_version);
    e->install_hint = xstrdup(s->install_hint);
    e->provide_cluster_info = s->provide_cluster_info;
    e->args = calloc(s->n_args + 1, sizeof *e->args);
    e->env = calloc(s->n_env + 1, sizeof *e->env);
    bool ok = e->command && e->args && e->env;
    for (size_t i = 0; ok && i < s->n_args; i++, e->n_args++)
        ok = (e->args[i] = strdup(s->args[i])) != NULL;
    for (size_t i = 0; ok && i < s->n_env; i++, e->n_env++)
        ok = (e->env[i] = strdup(s->env[i])) != NULL;
    if (!ok) {
        exec_free(e);
        return NULL;
    }
    return e;
}

void kcr_config_free(kcr_config *cfg)
{
    if (!cfg)
        return;
    free(cfg->context);
    free(cfg->cluster);
    free(cfg->namespace);
    free(cfg->server);
    free(cfg->tls_server_name);
    free(cfg->proxy_url);
    kcr__blob_clear(&cfg->ca);
    kcr__blob_clear(&cfg->cert);
    kcr__blob_clear(&cfg->key);
    kcr__free_secret(cfg->token);
    free(cfg->token_file);
    free(cfg->username);
    kcr__free_secret(cfg->password);
    exec_free(cfg->exec);
    free(cfg);
}

kcr_config *kcr__config_dup(const kcr_config *s)
{
    kcr_config *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    bool ok = true;
#define DUP(f)                                                                                     \
    do {                                                                                           \
        c->f = xstrdup(s->f);                                                                      \
        ok = ok && (c->f || !s->f);                                                                \
    } while (0)
    DUP(context);
    DUP(cluster);
    DUP(namespace);
    DUP(server);
    DUP(tls_server_name);
    DUP(proxy_url);
    DUP(token);
    DUP(token_file);
    DUP(username);
    DUP(password);
#undef DUP
    c->insecure = s->insecure;
    ok = ok && blob_dup(&c->ca, &s->ca) && blob_dup(&c->cert, &s->cert) &&
         blob_dup(&c->key, &s->key);
    if (ok && s->exec)
        ok = (c->exec = exec_dup(s->exec)) != NULL;
    if (!ok) {
        kcr_config_free(c);
        return NULL;
    }
    return c;
}

const char *kcr_config_server(const kcr_config *cfg)
{
    return cfg->server;
}

const char *kcr_config_namespace(const kcr_config *cfg)
{
    return cfg->namespace && *cfg->namespace ? cfg->namespace : "default";
}

const char *kcr_config_context(const kcr_config *cfg)
{
    return cfg->context ? cfg->context : "";
}

bool kcr_config_insecure(const kcr_config *cfg)
{
    return cfg->insecure;
}

/* ---- parsed kubeconfig entries (before merging) ------------------------------ */

/* Every string below is owned by the arena of one load. */
typedef struct arena {
    void **ptrs;
    size_t n, cap;
} arena;

static void *arena_keep(arena *a, void *p)
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

static void arena_free(arena *a)
{
    for (size_t i = 0; i < a->n; i++)
        free(a->ptrs[i]);
    free(a->ptrs);
}

typedef struct kc_cluster {
    const char *name, *file, *dir;
    const char *server, *ca_file, *ca_data, *tls_server_name, *proxy_url;
    bool insecure;
} kc_cluster;

typedef struct kc_user {
    const char *name, *file, *dir;
    const char *cert_file, *cert_data, *key_file, *key_data;
    const char *token, *token_file, *username, *password;
    const char *auth_provider;
    kcr__exec_config *exec; /* owned by the user entry list */
} kc_user;

typedef struct kc_context {
    const char *name, *file;
    const char *cluster, *user, *namespace;
} kc_context;

typedef struct kubeconfig {
    arena mem;
    kc_cluster *clusters;
    size_t n_clusters;
    kc_user *users;
    size_t n_users;
    kc_context *contexts;
    size_t n_contexts;
    const char *current_context;
} kubeconfig;

static void kubeconfig_free(kubeconfig *kc)
{
    for (size_t i = 0; i < kc->n_users; i++)
        exec_free(kc->users[i].exec);
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
static const char *ystr(kubeconfig *kc, ydoc *d, yaml_node_t *map, const char *key,
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
    return arena_keep(&kc->mem, s);
}

static bool ybool(kubeconfig *kc, ydoc *d, yaml_node_t *map, const char *key, const char *where,
                  kcr_err *err)
{
    const char *v = ystr(kc, d, map, key, where, err);
    return v && (strcmp(v, "true") == 0 || strcmp(v, "True") == 0 || strcmp(v, "TRUE") == 0 ||
                 strcmp(v, "yes") == 0);
}

static char *arena_printf(arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *arena_printf(arena *a, const char *fmt, ...)
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
    return arena_keep(a, s);
}

static char *resolve_path(const char *dir, const char *path)
{
    if (path[0] == '/' || !dir)
        return strdup(path);
    size_t len = strlen(dir) + strlen(path) + 2;
    char *s = malloc(len);
    if (s)
        snprintf(s, len, "%s/%s", dir, path);
    return s;
}

static kcr_err parse_exec(kubeconfig *kc, ydoc *d, yaml_node_t *node, const char *where,
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
    e->command = strchr(command, '/') ? resolve_path(dir, command) : strdup(command);
    e->api_version = strdup(api_version ? api_version : "client.authentication.k8s.io/v1");
    e->install_hint = xstrdup(hint);
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
        exec_free(e);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory reading the kubeconfig");
    }
    if ((args && !yis_null(args) && args->type != YAML_SEQUENCE_NODE) ||
        (env && !yis_null(env) && env->type != YAML_SEQUENCE_NODE)) {
        exec_free(e);
        return kcr__fail(KCR_ERR_CONFIG, "kubeconfig %s: %s: exec args and env must be lists",
                         d->file, where);
    }
    for (size_t i = 0; i < n_args; i++) {
        yaml_node_t *a = ynode(d, args->data.sequence.items.start[i]);
        if (!a || a->type != YAML_SCALAR_NODE) {
            exec_free(e);
            return kcr__fail(KCR_ERR_CONFIG, "kubeconfig %s: %s: exec args must be strings",
                             d->file, where);
        }
        if (!(e->args[e->n_args++] = strndup((const char *)a->data.scalar.value,
                                              a->data.scalar.length))) {
            exec_free(e);
            return kcr__fail(KCR_ERR_NOMEM, "out of memory reading the kubeconfig");
        }
    }
    for (size_t i = 0; i < n_env; i++) {
        yaml_node_t *v = ynode(d, env->data.sequence.items.start[i]);
        const char *name = ystr(kc, d, v, "name", where, &err);
        const char *value = ystr(kc, d, v, "value", where, &err);
        if (err != KCR_OK || !name || !*name || strchr(name, '=')) {
            exec_free(e);
            return err != KCR_OK ? err
                                 : kcr__fail(KCR_ERR_CONFIG,
                                             "kubeconfig %s: %s: exec env entry %zu needs a name",
                                             d->file, where, i);
        }
        size_t len = strlen(name) + (value ? strlen(value) : 0) + 2;
        if (!(e->env[e->n_env] = malloc(len))) {
            exec_free(e);
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
static kcr_err each_named(kubeconfig *kc, ydoc *d, yaml_node_t *root, const char *list,
                          const char *field,
                          kcr_err (*add)(kubeconfig *, ydoc *, const char *, yaml_node_t *))
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

static const char *dir_of(kubeconfig *kc, const char *file)
{
    const char *slash = strrchr(file, '/');
    if (!slash)
        return ".";
    if (slash == file)
        return "/";
    return arena_keep(&kc->mem, strndup(file, (size_t)(slash - file)));
}

static kcr_err add_cluster(kubeconfig *kc, ydoc *d, const char *name, yaml_node_t *b)
{
    if (has_name(name, kc->clusters, kc->n_clusters, sizeof *kc->clusters))
        return KCR_OK;
    kc_cluster c = {.name = name, .file = d->file, .dir = dir_of(kc, d->file)};
    const char *where = arena_printf(&kc->mem, "cluster \"%s\"", name);
    kcr_err err = where ? KCR_OK : kcr__fail(KCR_ERR_NOMEM, "out of memory reading the kubeconfig");
    c.server = ystr(kc, d, b, "server", where, &err);
    c.ca_file = ystr(kc, d, b, "certificate-authority", where, &err);
    c.ca_data = ystr(kc, d, b, "certificate-authority-data", where, &err);
    c.tls_server_name = ystr(kc, d, b, "tls-server-name", where, &err);
    c.proxy_url = ystr(kc, d, b, "proxy-url", where, &err);
    c.insecure = ybool(kc, d, b, "insecure-skip-tls-verify", where, &err);
    if (err != KCR_OK)
        return err;
    kc_cluster *n = realloc(kc->clusters, (kc->n_clusters + 1) * sizeof *n);
    if (!n)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory reading the kubeconfig");
    kc->clusters = n;
    kc->clusters[kc->n_clusters++] = c;
    return KCR_OK;
}

static kcr_err add_user(kubeconfig *kc, ydoc *d, const char *name, yaml_node_t *b)
{
    if (has_name(name, kc->users, kc->n_users, sizeof *kc->users))
        return KCR_OK;
    kc_user u = {.name = name, .file = d->file, .dir = dir_of(kc, d->file)};
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
    kc_user *n = realloc(kc->users, (kc->n_users + 1) * sizeof *n);
    if (!n) {
        exec_free(u.exec);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory reading the kubeconfig");
    }
    kc->users = n;
    kc->users[kc->n_users++] = u;
    return KCR_OK;
}

static kcr_err add_context(kubeconfig *kc, ydoc *d, const char *name, yaml_node_t *b)
{
    if (has_name(name, kc->contexts, kc->n_contexts, sizeof *kc->contexts))
        return KCR_OK;
    kc_context c = {.name = name, .file = d->file};
    const char *where = arena_printf(&kc->mem, "context \"%s\"", name);
    kcr_err err = where ? KCR_OK : kcr__fail(KCR_ERR_NOMEM, "out of memory reading the kubeconfig");
    c.cluster = ystr(kc, d, b, "cluster", where, &err);
    c.user = ystr(kc, d, b, "user", where, &err);
    c.namespace = ystr(kc, d, b, "namespace", where, &err);
    if (err != KCR_OK)
        return err;
    kc_context *n = realloc(kc->contexts, (kc->n_contexts + 1) * sizeof *n);
    if (!n)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory reading the kubeconfig");
    kc->contexts = n;
    kc->contexts[kc->n_contexts++] = c;
    return KCR_OK;
}

/* Parses one kubeconfig document and merges it into kc (earlier files win). */
static kcr_err merge_yaml(kubeconfig *kc, const char *yaml, size_t len, const char *file)
{
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return kcr__fail(KCR_ERR_NOMEM, "out of memory reading the kubeconfig");
    yaml_parser_set_input_string(&parser, (const unsigned char *)yaml, len);
    ydoc d = {.file = file};
    if (!yaml_parser_load(&parser, &d.doc)) {
        kcr_err err = kcr__fail(KCR_ERR_CONFIG, "kubeconfig %s: bad YAML at line %lu column %lu: %s",
                                file, (unsigned long)parser.problem_mark.line + 1,
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

/* ---- building the config ------------------------------------------------------ */

/* PEM material from either inline base64 data (preferred) or a file.
 * `owner` is e.g. "cluster \"x\"" and `field` the kubeconfig key without
 * "-data"; *used (may be NULL) receives the key that supplied it. */
static kcr_err load_pem(const char *data, const char *file, const char *dir, const char *field,
                        const char *kc_file, const char *owner, kcr__blob *out, char *used,
                        size_t used_size)
{
    if (used)
        snprintf(used, used_size, "%s", field);
    if (data && *data) {
        if (used)
            snprintf(used, used_size, "%s-data", field);
        kcr_err err = kcr__base64_decode(data, strlen(data), &out->data, &out->len);
        if (err != KCR_OK)
            return kcr__refail(KCR_ERR_CONFIG,
                               "kubeconfig %s: %s-data of %s is not valid base64: ", kc_file, field,
                               owner);
        return KCR_OK;
    }
    if (file && *file) {
        char *path = resolve_path(dir, file);
        if (!path)
            return kcr__fail(KCR_ERR_NOMEM, "out of memory reading the kubeconfig");
        kcr_err err = kcr__read_file(path, MAX_CERT, field, out);
        free(path);
        if (err != KCR_OK)
            return kcr__refail(KCR_ERR_CONFIG, "kubeconfig %s: %s of %s: cannot read ", kc_file,
                               field, owner);
    }
    return KCR_OK;
}

/* Loads and checks the cluster's CA bundle: PEM certificates only. */
static kcr_err load_ca(const kc_cluster *cl, kcr__blob *out)
{
    char owner[300], used[64], what[1400];
    snprintf(owner, sizeof owner, "cluster \"%s\"", cl->name);
    kcr_err err = load_pem(cl->ca_data, cl->ca_file, cl->dir, "certificate-authority", cl->file,
                           owner, out, used, sizeof used);
    if (err != KCR_OK || !out->data)
        return err;
    snprintf(what, sizeof what, "kubeconfig %s: %s of %s", cl->file, used, owner);
    return kcr__pem_check_certs(out->data, out->len, what);
}

/* Loads and checks the user's client certificate and key: both or neither,
 * each valid PEM, and the key the certificate's. */
static kcr_err load_client_cert(const kc_user *us, kcr__blob *cert, kcr__blob *key)
{
    char owner[300], cert_used[64], key_used[64], what[1400];
    snprintf(owner, sizeof owner, "user \"%s\"", us->name);
    kcr_err err = load_pem(us->cert_data, us->cert_file, us->dir, "client-certificate", us->file,
                           owner, cert, cert_used, sizeof cert_used);
    if (err == KCR_OK)
        err = load_pem(us->key_data, us->key_file, us->dir, "client-key", us->file, owner, key,
                       key_used, sizeof key_used);
    if (err != KCR_OK)
        return err;
    if ((cert->len > 0) != (key->len > 0))
        return kcr__fail(KCR_ERR_CONFIG,
                         "kubeconfig %s: %s has %s without %s: client certificate and key must "
                         "be given together",
                         us->file, owner, cert->len ? cert_used : key_used,
                         cert->len ? "client-key(-data)" : "client-certificate(-data)");
    if (!cert->len)
        return KCR_OK;
    snprintf(what, sizeof what, "kubeconfig %s: %s of %s", us->file, cert_used, owner);
    err = kcr__pem_check_certs(cert->data, cert->len, what);
    if (err != KCR_OK)
        return err;
    snprintf(what, sizeof what, "kubeconfig %s: %s of %s", us->file, key_used, owner);
    return kcr__pem_check_pair(cert->data, cert->len, key->data, key->len, what, cert_used);
}

static kcr_err check_server(const char *server, const char *where)
{
    if (!server || !*server)
        return kcr__fail(KCR_ERR_CONFIG, "kubeconfig %s: no server", where);
    if (strncmp(server, "https://", 8) != 0 && strncmp(server, "http://", 7) != 0)
        return kcr__fail(KCR_ERR_CONFIG,
                         "kubeconfig %s: server \"%.200s\" must start with https:// or http://",
                         where, server);
    const char *host = strstr(server, "://") + 3;
    if (!*host || *host == '/')
        return kcr__fail(KCR_ERR_CONFIG, "kubeconfig %s: server \"%.200s\" has no host", where,
                         server);
    if (strpbrk(server, " \t\r\n?#"))
        return kcr__fail(KCR_ERR_CONFIG, "kubeconfig %s: bad server URL \"%.200s\"", where,
                         server);
    return KCR_OK;
}

static char *strip_slash(const char *s)
{
    char *c = strdup(s);
    if (c) {
        size_t n = strlen(c);
        while (n > 0 && c[n - 1] == '/')
            c[--n] = '\0';
    }
    return c;
}

static kcr_err build_config(kubeconfig *kc, const char *context, kcr_config **out)
{
    *out = NULL;
    if (!context || !*context)
        context = kc->current_context;
    if (!context || !*context)
        return kcr__fail(KCR_ERR_CONFIG, "kubeconfig: no current-context and no context chosen");
    const kc_context *ctx = NULL;
    for (size_t i = 0; i < kc->n_contexts; i++)
        if (strcmp(kc->contexts[i].name, context) == 0)
            ctx = &kc->contexts[i];
    if (!ctx)
        return kcr__fail(KCR_ERR_CONFIG, "kubeconfig: context \"%s\" not found", context);
    const kc_cluster *cl = NULL;
    for (size_t i = 0; ctx->cluster && i < kc->n_clusters; i++)
        if (strcmp(kc->clusters[i].name, ctx->cluster) == 0)
            cl = &kc->clusters[i];
    if (!cl)
        return kcr__fail(KCR_ERR_CONFIG, "kubeconfig %s: context \"%s\": cluster \"%s\" not found",
                         ctx->file, context, ctx->cluster ? ctx->cluster : "");
    const kc_user *us = NULL;
    if (ctx->user && *ctx->user) {
        for (size_t i = 0; i < kc->n_users; i++)
            if (strcmp(kc->users[i].name, ctx->user) == 0)
                us = &kc->users[i];
        if (!us)
            return kcr__fail(KCR_ERR_CONFIG, "kubeconfig %s: context \"%s\": user \"%s\" not found",
                             ctx->file, context, ctx->user);
    }
    char where[512];
    snprintf(where, sizeof where, "%s: cluster \"%s\"", cl->file, cl->name);
    kcr_err err = check_server(cl->server, where);
    if (err != KCR_OK)
        return err;
    if (us && us->auth_provider && !us->exec && !us->token && !us->token_file && !us->cert_data &&
        !us->cert_file)
        return kcr__fail(KCR_ERR_UNSUPPORTED,
                         "kubeconfig %s: user \"%s\": auth-provider \"%s\" is not supported; "
                         "use an exec credential plugin",
                         us->file, us->name, us->auth_provider);

    kcr_config *c = calloc(1, sizeof *c);
    if (!c)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory reading the kubeconfig");
    c->context = strdup(context);
    c->cluster = strdup(cl->name);
    c->namespace = strdup(ctx->namespace && *ctx->namespace ? ctx->namespace : "default");
    c->server = strip_slash(cl->server);
    c->tls_server_name = xstrdup(cl->tls_server_name);
    c->proxy_url = xstrdup(cl->proxy_url);
    c->insecure = cl->insecure;
    bool ok = c->context && c->cluster && c->namespace && c->server &&
              (c->tls_server_name || !cl->tls_server_name) && (c->proxy_url || !cl->proxy_url);
    if (!ok) {
        kcr_config_free(c);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory reading the kubeconfig");
    }
    err = load_ca(cl, &c->ca);
    if (err == KCR_OK && us) {
        err = load_client_cert(us, &c->cert, &c->key);
        if (err == KCR_OK) {
            c->token = xstrdup(us->token);
            c->token_file = us->token_file ? resolve_path(us->dir, us->token_file) : NULL;
            c->username = xstrdup(us->username);
            c->password = xstrdup(us->password);
            if (us->exec && !(c->exec = exec_dup(us->exec)))
                err = kcr__fail(KCR_ERR_NOMEM, "out of memory reading the kubeconfig");
        }
    }
    if (err != KCR_OK) {
        kcr_config_free(c);
        return err;
    }
    *out = c;
    return KCR_OK;
}

kcr_err kcr_config_parse_kubeconfig(const char *yaml, size_t len, const char *dir,
                                    const char *context, kcr_config **out)
{
    *out = NULL;
    kubeconfig kc = {0};
    char file[1024];
    snprintf(file, sizeof file, "%s/<memory>", dir ? dir : ".");
    kcr_err err = merge_yaml(&kc, yaml, len, file);
    if (err == KCR_OK)
        err = build_config(&kc, context, out);
    kubeconfig_free(&kc);
    return err;
}

static const char *home_kubeconfig(char *buf, size_t size)
{
    const char *home = getenv("HOME");
    snprintf(buf, size, "%s/.kube/config", home && *home ? home : "");
    return buf;
}

kcr_err kcr_config_load_kubeconfig(const kcr_config_options *opts, kcr_config **out)
{
    *out = NULL;
    char homebuf[4096];
    const char *paths = opts ? opts->kubeconfig : NULL;
    bool explicit = paths && *paths;
    if (!explicit) {
        paths = getenv("KUBECONFIG");
        if (!paths || !*paths)
            paths = home_kubeconfig(homebuf, sizeof homebuf);
    }
    kubeconfig kc = {0};
    char *list = strdup(paths);
    if (!list)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory reading the kubeconfig");
    kcr_err err = KCR_OK;
    size_t loaded = 0;
    for (char *save = NULL, *p = strtok_r(list, ":", &save); p && err == KCR_OK;
         p = strtok_r(NULL, ":", &save)) {
        kcr__blob data;
        err = kcr__read_file(p, MAX_KUBECONFIG, "kubeconfig", &data);
        if (err == KCR_ERR_NOT_FOUND && !explicit) { /* kubectl skips missing files */
            err = KCR_OK;
            continue;
        }
        if (err != KCR_OK) {
            err = kcr__refail(KCR_ERR_CONFIG, "%s", "");
            break;
        }
        const char *file = arena_keep(&kc.mem, strdup(p));
        err = file ? merge_yaml(&kc, data.data, data.len, file)
                   : kcr__fail(KCR_ERR_NOMEM, "out of memory reading the kubeconfig");
        kcr__blob_clear(&data);
        loaded++;
    }
    if (err == KCR_OK && loaded == 0)
        err = kcr__fail(KCR_ERR_CONFIG, "no kubeconfig found (looked in %s)", paths);
    free(list);
    if (err == KCR_OK)
        err = build_config(&kc, opts ? opts->context : NULL, out);
    kubeconfig_free(&kc);
    if (err == KCR_OK)
        kcr__log(KCR_LOG_DEBUG, "config", "kubeconfig context \"%s\", server %s",
                 (*out)->context, (*out)->server);
    return err;
}

kcr_err kcr_config_load_in_cluster(const kcr_config_options *opts, kcr_config **out)
{
    *out = NULL;
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !*host || !port || !*port)
        return kcr__fail(KCR_ERR_CONFIG, "not running in a cluster: KUBERNETES_SERVICE_HOST and "
                                         "KUBERNETES_SERVICE_PORT must be set");
    const char *dir = opts && opts->in_cluster_dir ? opts->in_cluster_dir : DEFAULT_SA_DIR;
    kcr_config *c = calloc(1, sizeof *c);
    if (!c)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory reading the in-cluster config");
    size_t len = strlen(host) + strlen(port) + 16;
    c->server = malloc(len);
    c->context = strdup("");
    if (!c->server || !c->context) {
        kcr_config_free(c);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory reading the in-cluster config");
    }
    bool v6 = strchr(host, ':') != NULL;
    snprintf(c->server, len, "https://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "", port);
    size_t plen = strlen(dir) + 16;
    c->token_file = malloc(plen);
    char *ca_path = malloc(plen), *ns_path = malloc(plen);
    kcr_err err = KCR_OK;
    if (!c->token_file || !ca_path || !ns_path) {
        err = kcr__fail(KCR_ERR_NOMEM, "out of memory reading the in-cluster config");
    } else {
        snprintf(c->token_file, plen, "%s/token", dir);
        snprintf(ca_path, plen, "%s/ca.crt", dir);
        snprintf(ns_path, plen, "%s/namespace", dir);
        kcr__blob tok;
        err = kcr__read_file(c->token_file, MAX_CERT, "service-account token", &tok);
        kcr__blob_clear(&tok);
        if (err == KCR_OK)
            err = kcr__read_file(ca_path, MAX_CERT, "service-account CA", &c->ca);
        if (err == KCR_OK)
            err = kcr__pem_check_certs(c->ca.data, c->ca.len, ca_path);
        if (err != KCR_OK)
            err = kcr__refail(KCR_ERR_CONFIG, "in-cluster config: ");
        kcr__blob ns;
        if (err == KCR_OK && kcr__read_file(ns_path, 4096, "namespace", &ns) == KCR_OK) {
            size_t n = ns.len;
            while (n > 0 && strchr(" \t\r\n", ns.data[n - 1]))
                ns.data[--n] = '\0';
            c->namespace = strdup(ns.data);
            kcr__blob_clear(&ns);
        }
        kcr__clear_error();
    }
    free(ca_path);
    free(ns_path);
    if (err == KCR_OK && !c->namespace)
        c->namespace = strdup("default");
    if (err == KCR_OK && !c->namespace)
        err = kcr__fail(KCR_ERR_NOMEM, "out of memory reading the in-cluster config");
    if (err != KCR_OK) {
        kcr_config_free(c);
        return err;
    }
    *out = c;
    return KCR_OK;
}

kcr_err kcr_config_load(const kcr_config_options *opts, kcr_config **out)
{
    const char *env = getenv("KUBECONFIG");
    if ((opts && opts->kubeconfig && *opts->kubeconfig) || (env && *env))
        return kcr_config_load_kubeconfig(opts, out);
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    if (host && *host)
        return kcr_config_load_in_cluster(opts, out);
    return kcr_config_load_kubeconfig(opts, out);
}
