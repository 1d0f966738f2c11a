/* Where and how to reach a Kubernetes API server: kubeconfig files and the
 * in-cluster service-account configuration.
 *
 * A kcr_config is immutable once loaded: any number of threads may read it
 * and create clients from it concurrently. It holds credentials in memory
 * only (certificates and keys are handed to libcurl as memory blobs, never
 * written to disk) and never logs them. */
#ifndef KCR_CONFIG_H
#define KCR_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "kcr/error.h"
#include "kcr/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kcr_config kcr_config;

/* How to find the configuration. Zero means default for every field. */
typedef struct kcr_config_options {
    /* Kubeconfig path(s), ':'-separated and merged like kubectl (the first file
     * that sets a cluster/user/context name or current-context wins).
     * NULL: $KUBECONFIG, else ~/.kube/config. */
    const char *kubeconfig;
    /* Context to use. NULL: the kubeconfig's current-context. */
    const char *context;
    /* Service-account directory for in-cluster config.
     * NULL: /var/run/secrets/kubernetes.io/serviceaccount. */
    const char *in_cluster_dir;
} kcr_config_options;

/* Loads a kubeconfig (see kcr_config_options.kubeconfig). Files named by
 * certificate-authority, client-certificate, client-key are read now;
 * relative paths resolve against the directory of the kubeconfig file that
 * names them; tokenFile is read at each request and re-read when it changes.
 * On success *out is a new config the caller frees with kcr_config_free().
 * Every PEM of the chosen cluster and user is parsed now (OpenSSL): the CA
 * bundle must hold certificates only, the client certificate and key must
 * be valid and belong together.
 * Errors: KCR_ERR_CONFIG (missing/garbled file, unknown context, bad base64,
 * unreadable file, a PEM that is not what its field says, a key that does
 * not match its certificate ...), KCR_ERR_UNSUPPORTED (auth-provider
 * plugins), with kcr_last_error() naming the file, the entry and the field,
 * e.g. "certificate-authority-data of cluster \"x\" is not a PEM
 * certificate". Thread-safe. */
KCR_API kcr_err kcr_config_load_kubeconfig(size_t opts_size, const kcr_config_options *opts,
                                           kcr_config **out);
#define kcr_config_load_kubeconfig(...) (kcr_config_load_kubeconfig)(sizeof(kcr_config_options), __VA_ARGS__)

/* Parses kubeconfig YAML from memory (copied). `dir` resolves relative paths
 * (NULL: the current directory); `context` as in the options. Thread-safe. */
KCR_API kcr_err kcr_config_parse_kubeconfig(const char *yaml, size_t len, const char *dir,
                                            const char *context, kcr_config **out);

/* In-cluster configuration: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT,
 * the service account's ca.crt, its token (re-read when it changes, since
 * bound tokens rotate) and namespace. KCR_ERR_CONFIG when not in a cluster.
 * Thread-safe. */
KCR_API kcr_err kcr_config_load_in_cluster(size_t opts_size, const kcr_config_options *opts,
                                           kcr_config **out);
#define kcr_config_load_in_cluster(...) (kcr_config_load_in_cluster)(sizeof(kcr_config_options), __VA_ARGS__)

/* The usual search order: an explicit opts->kubeconfig, then $KUBECONFIG,
 * then in-cluster when $KUBERNETES_SERVICE_HOST is set, then ~/.kube/config.
 * Thread-safe. */
KCR_API kcr_err kcr_config_load(size_t opts_size, const kcr_config_options *opts, kcr_config **out);
#define kcr_config_load(...) (kcr_config_load)(sizeof(kcr_config_options), __VA_ARGS__)

/* Frees a config; NULL is ignored. Clients made from it stay valid. */
KCR_API void kcr_config_free(kcr_config *cfg);

/* Server URL without a trailing '/', e.g. "https://127.0.0.1:6443". Borrowed. */
KCR_API const char *kcr_config_server(const kcr_config *cfg);

/* Default namespace: the context's, the service account's, or "default". Borrowed. */
KCR_API const char *kcr_config_namespace(const kcr_config *cfg);

/* Name of the context used ("" for in-cluster). Borrowed. */
KCR_API const char *kcr_config_context(const kcr_config *cfg);

/* True when TLS verification of the server is switched off
 * (insecure-skip-tls-verify). Plain http:// servers are a separate opt-in:
 * kcr_client_options.allow_insecure_http. */
KCR_API bool kcr_config_insecure(const kcr_config *cfg);

#ifdef __cplusplus
}
#endif

#endif
