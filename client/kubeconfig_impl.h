/* Internal to client/: a kubeconfig's entries as read from its files
 * (kubeconfig_yaml.c), before a context is chosen and a kcr_config built
 * (kubeconfig.c, with the credentials of kubeconfig_creds.c). One load owns
 * one kcr__kubeconfig; nothing here is shared between threads. */
#ifndef KCR_CLIENT_KUBECONFIG_IMPL_H
#define KCR_CLIENT_KUBECONFIG_IMPL_H

#include <stdbool.h>
#include <stddef.h>

#include "client/config_impl.h"

/* Every string below is owned by the arena of one load. */
typedef struct kcr__kc_arena {
    void **ptrs;
    size_t n, cap;
} kcr__kc_arena;

typedef struct kcr__kc_cluster {
    const char *name, *file, *dir;
    const char *server, *ca_file, *ca_data, *tls_server_name, *proxy_url;
    bool insecure, disable_compression;
} kcr__kc_cluster;

typedef struct kcr__kc_user {
    const char *name, *file, *dir;
    const char *cert_file, *cert_data, *key_file, *key_data;
    const char *token, *token_file, *username, *password;
    const char *auth_provider;
    kcr__exec_config *exec; /* owned by the user entry list */
} kcr__kc_user;

typedef struct kcr__kc_context {
    const char *name, *file;
    const char *cluster, *user, *ns;
} kcr__kc_context;

typedef struct kcr__kubeconfig {
    kcr__kc_arena mem;
    kcr__kc_cluster *clusters;
    size_t n_clusters;
    kcr__kc_user *users;
    size_t n_users;
    kcr__kc_context *contexts;
    size_t n_contexts;
    const char *current_context;
} kcr__kubeconfig;

/* Takes ownership of p (malloc'd) until the load ends, returning it; NULL
 * (p freed) when p is NULL or out of memory. */
void *kcr__kc_keep(kcr__kc_arena *a, void *p);

/* Frees the entries and the arena, wiping every string first (secrets). */
void kcr__kubeconfig_free(kcr__kubeconfig *kc);

/* Parses one kubeconfig document (`file` names it in messages and its
 * directory resolves relative paths) and merges it into kc: the first file
 * to set current-context or to name a cluster, user or context wins. */
kcr_err kcr__kubeconfig_merge_yaml(kcr__kubeconfig *kc, const char *yaml, size_t len,
                                   const char *file);

/* `path` relative to `dir` (absolute paths and a NULL dir: a copy);
 * malloc'd, NULL on out of memory. */
char *kcr__kc_resolve_path(const char *dir, const char *path);

/* The cluster's CA bundle into *out (empty: none given), checked to hold
 * PEM certificates only. */
kcr_err kcr__kc_load_ca(const kcr__kc_cluster *cl, kcr__blob *out);

/* The user's client certificate and key: both or neither, each valid PEM,
 * and the key the certificate's. */
kcr_err kcr__kc_load_client_cert(const kcr__kc_user *us, kcr__blob *cert, kcr__blob *key);

#endif
