/* kcr_config: the loaded configuration's lifetime and accessors, and the
 * small file and secret helpers the loaders share (client/config_impl.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "client/config_impl.h"
#include "core/error.h"

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
        return kcr__fail(errno == ENOENT ? KCR_ERR_NOT_FOUND : KCR_ERR_IO, "%s %s: %s", what, path,
                         strerror(errno));
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

char *kcr__xstrdup(const char *s)
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

void kcr__exec_free(kcr__exec_config *e)
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

kcr__exec_config *kcr__exec_dup(const kcr__exec_config *s)
{
    kcr__exec_config *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->command = kcr__xstrdup(s->command);
    e->api_version = kcr__xstrdup(s->api_version);
    e->install_hint = kcr__xstrdup(s->install_hint);
    e->provide_cluster_info = s->provide_cluster_info;
    e->args = calloc(s->n_args + 1, sizeof *e->args);
    e->env = calloc(s->n_env + 1, sizeof *e->env);
    bool ok = e->command && e->args && e->env;
    for (size_t i = 0; ok && i < s->n_args; i++, e->n_args++)
        ok = (e->args[i] = strdup(s->args[i])) != NULL;
    for (size_t i = 0; ok && i < s->n_env; i++, e->n_env++)
        ok = (e->env[i] = strdup(s->env[i])) != NULL;
    if (!ok) {
        kcr__exec_free(e);
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
    free(cfg->ns);
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
    kcr__exec_free(cfg->exec);
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
        c->f = kcr__xstrdup(s->f);                                                                 \
        ok = ok && (c->f || !s->f);                                                                \
    } while (0)
    DUP(context);
    DUP(cluster);
    DUP(ns);
    DUP(server);
    DUP(tls_server_name);
    DUP(proxy_url);
    DUP(token);
    DUP(token_file);
    DUP(username);
    DUP(password);
#undef DUP
    c->insecure = s->insecure;
    c->disable_compression = s->disable_compression;
    ok = ok && blob_dup(&c->ca, &s->ca) && blob_dup(&c->cert, &s->cert) &&
         blob_dup(&c->key, &s->key);
    if (ok && s->exec)
        ok = (c->exec = kcr__exec_dup(s->exec)) != NULL;
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
    return cfg->ns && *cfg->ns ? cfg->ns : "default";
}

const char *kcr_config_context(const kcr_config *cfg)
{
    return cfg->context ? cfg->context : "";
}

bool kcr_config_insecure(const kcr_config *cfg)
{
    return cfg->insecure;
}
