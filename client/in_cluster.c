/* The in-cluster configuration (the service account's token, CA and
 * namespace) and kcr_config_load's choice between it and a kubeconfig. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/config_impl.h"
#include "client/pem.h"
#include "core/abi.h"
#include "core/error.h"

#define DEFAULT_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

kcr_err (kcr_config_load_in_cluster)(size_t opts_size, const kcr_config_options *opts,
                                     kcr_config **out)
{
    KCR__ABI_OPTS(kcr_config_options, opts, opts_size);
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
        err = kcr__read_file(c->token_file, KCR__MAX_CERT_FILE, "service-account token", &tok);
        kcr__blob_clear(&tok);
        if (err == KCR_OK)
            err = kcr__read_file(ca_path, KCR__MAX_CERT_FILE, "service-account CA", &c->ca);
        if (err == KCR_OK)
            err = kcr__pem_check_certs(c->ca.data, c->ca.len, ca_path);
        if (err != KCR_OK)
            err = kcr__refail(KCR_ERR_CONFIG, "in-cluster config: ");
        kcr__blob ns;
        if (err == KCR_OK && kcr__read_file(ns_path, 4096, "namespace", &ns) == KCR_OK) {
            size_t n = ns.len;
            while (n > 0 && strchr(" \t\r\n", ns.data[n - 1]))
                ns.data[--n] = '\0';
            c->ns = strdup(ns.data);
            kcr__blob_clear(&ns);
        }
        kcr__clear_error();
    }
    free(ca_path);
    free(ns_path);
    if (err == KCR_OK && !c->ns)
        c->ns = strdup("default");
    if (err == KCR_OK && !c->ns)
        err = kcr__fail(KCR_ERR_NOMEM, "out of memory reading the in-cluster config");
    if (err != KCR_OK) {
        kcr_config_free(c);
        return err;
    }
    *out = c;
    return KCR_OK;
}

kcr_err (kcr_config_load)(size_t opts_size, const kcr_config_options *opts, kcr_config **out)
{
    KCR__ABI_OPTS(kcr_config_options, opts, opts_size);
    const char *env = getenv("KUBECONFIG");
    if ((opts && opts->kubeconfig && *opts->kubeconfig) || (env && *env))
        return kcr_config_load_kubeconfig(opts, out);
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    if (host && *host)
        return kcr_config_load_in_cluster(opts, out);
    return kcr_config_load_kubeconfig(opts, out);
}
