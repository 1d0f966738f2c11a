/* kubeconfig loading: the files to read (opts, $KUBECONFIG, ~/.kube/config;
 * kubectl's colon-separated list, missing files skipped unless named
 * explicitly), the context chosen among the merged entries, and the
 * kcr_config built from its cluster and user. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/kubeconfig_impl.h"
#include "core/abi.h"
#include "core/error.h"
#include "core/log.h"

enum { MAX_KUBECONFIG = 16 << 20 };

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
        return kcr__fail(KCR_ERR_CONFIG, "kubeconfig %s: bad server URL \"%.200s\"", where, server);
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

static kcr_err build_config(kcr__kubeconfig *kc, const char *context, kcr_config **out)
{
    *out = NULL;
    if (!context || !*context)
        context = kc->current_context;
    if (!context || !*context)
        return kcr__fail(KCR_ERR_CONFIG, "kubeconfig: no current-context and no context chosen");
    const kcr__kc_context *ctx = NULL;
    for (size_t i = 0; i < kc->n_contexts; i++)
        if (strcmp(kc->contexts[i].name, context) == 0)
            ctx = &kc->contexts[i];
    if (!ctx)
        return kcr__fail(KCR_ERR_CONFIG, "kubeconfig: context \"%s\" not found", context);
    const kcr__kc_cluster *cl = NULL;
    for (size_t i = 0; ctx->cluster && i < kc->n_clusters; i++)
        if (strcmp(kc->clusters[i].name, ctx->cluster) == 0)
            cl = &kc->clusters[i];
    if (!cl)
        return kcr__fail(KCR_ERR_CONFIG, "kubeconfig %s: context \"%s\": cluster \"%s\" not found",
                         ctx->file, context, ctx->cluster ? ctx->cluster : "");
    const kcr__kc_user *us = NULL;
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
    c->ns = strdup(ctx->ns && *ctx->ns ? ctx->ns : "default");
    c->server = strip_slash(cl->server);
    c->tls_server_name = kcr__xstrdup(cl->tls_server_name);
    c->proxy_url = kcr__xstrdup(cl->proxy_url);
    c->insecure = cl->insecure;
    c->disable_compression = cl->disable_compression;
    bool ok = c->context && c->cluster && c->ns && c->server &&
              (c->tls_server_name || !cl->tls_server_name) && (c->proxy_url || !cl->proxy_url);
    if (!ok) {
        kcr_config_free(c);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory reading the kubeconfig");
    }
    err = kcr__kc_load_ca(cl, &c->ca);
    if (err == KCR_OK && us) {
        err = kcr__kc_load_client_cert(us, &c->cert, &c->key);
        if (err == KCR_OK) {
            c->token = kcr__xstrdup(us->token);
            c->token_file = us->token_file ? kcr__kc_resolve_path(us->dir, us->token_file) : NULL;
            c->username = kcr__xstrdup(us->username);
            c->password = kcr__xstrdup(us->password);
            if (us->exec && !(c->exec = kcr__exec_dup(us->exec)))
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
    kcr__kubeconfig kc = {0};
    char file[1024];
    snprintf(file, sizeof file, "%s/<memory>", dir ? dir : ".");
    kcr_err err = kcr__kubeconfig_merge_yaml(&kc, yaml, len, file);
    if (err == KCR_OK)
        err = build_config(&kc, context, out);
    kcr__kubeconfig_free(&kc);
    return err;
}

static const char *home_kubeconfig(char *buf, size_t size)
{
    const char *home = getenv("HOME");
    snprintf(buf, size, "%s/.kube/config", home && *home ? home : "");
    return buf;
}

kcr_err (kcr_config_load_kubeconfig)(size_t opts_size, const kcr_config_options *opts,
                                     kcr_config **out)
{
    KCR__ABI_OPTS(kcr_config_options, opts, opts_size);
    *out = NULL;
    char homebuf[4096];
    const char *paths = opts ? opts->kubeconfig : NULL;
    bool explicit = paths && *paths;
    if (!explicit) {
        paths = getenv("KUBECONFIG");
        if (!paths || !*paths)
            paths = home_kubeconfig(homebuf, sizeof homebuf);
    }
    kcr__kubeconfig kc = {0};
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
        const char *file = kcr__kc_keep(&kc.mem, strdup(p));
        err = file ? kcr__kubeconfig_merge_yaml(&kc, data.data, data.len, file)
                   : kcr__fail(KCR_ERR_NOMEM, "out of memory reading the kubeconfig");
        kcr__blob_clear(&data);
        loaded++;
    }
    if (err == KCR_OK && loaded == 0)
        err = kcr__fail(KCR_ERR_CONFIG, "no kubeconfig found (looked in %s)", paths);
    free(list);
    if (err == KCR_OK)
        err = build_config(&kc, opts ? opts->context : NULL, out);
    kcr__kubeconfig_free(&kc);
    if (err == KCR_OK)
        kcr__log(KCR_LOG_DEBUG, "config", "kubeconfig context \"%s\", server %s", (*out)->context,
                 (*out)->server);
    return err;
}
