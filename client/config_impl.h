/* Internal: the contents of a kcr_config and credential handling. */
#ifndef KCR_CLIENT_CONFIG_IMPL_H
#define KCR_CLIENT_CONFIG_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcr/config.h"

typedef struct kcr__blob {
    char *data; /* malloc'd, NUL-terminated (not counted in len) */
    size_t len;
} kcr__blob;

typedef struct kcr__exec_config {
    char *command;
    char **args; /* n_args entries */
    size_t n_args;
    char **env; /* "NAME=value", n_env entries */
    size_t n_env;
    char *api_version;
    char *install_hint;
    bool provide_cluster_info;
} kcr__exec_config;

struct kcr_config {
    char *context;
    char *cluster; /* the kubeconfig cluster's name, for messages; NULL in-cluster */
    char *ns;
    char *server; /* no trailing '/' */
    char *tls_server_name;
    char *proxy_url;
    bool insecure;
    bool disable_compression; /* the kubeconfig cluster's disable-compression */
    kcr__blob ca;   /* PEM; empty: system trust store */
    kcr__blob cert; /* PEM client certificate; empty: none */
    kcr__blob key;  /* PEM client key */
    char *token;
    char *token_file;
    char *username;
    char *password;
    kcr__exec_config *exec;
};

/* Deep copy; NULL on out of memory. */
kcr_config *kcr__config_dup(const kcr_config *cfg);

/* Largest certificate, key or token file read (KCR_ERR_TOO_LARGE above). */
enum { KCR__MAX_CERT_FILE = 4 << 20 };

/* strdup that passes NULL through (NULL also on out of memory). */
char *kcr__xstrdup(const char *s);

/* Deep copy of an exec plugin's settings (NULL on out of memory) and its
 * free (wipes the env entries, which may hold secrets); NULL is ignored. */
kcr__exec_config *kcr__exec_dup(const kcr__exec_config *e);
void kcr__exec_free(kcr__exec_config *e);

/* Reads a whole file (at most `max` bytes, else KCR_ERR_TOO_LARGE) into a
 * malloc'd NUL-terminated buffer. `what` names the file in messages. */
kcr_err kcr__read_file(const char *path, size_t max, const char *what, kcr__blob *out);
void kcr__blob_clear(kcr__blob *b);

/* Wipes and frees a string holding a secret; NULL is ignored. */
void kcr__free_secret(char *s);

/* Credentials for one request. bearer/cert/key are owned copies; user and
 * password point into the config. */
typedef struct kcr__creds {
    char *bearer;
    const char *username;
    const char *password;
    kcr__blob cert;
    kcr__blob key;
} kcr__creds;

void kcr__creds_clear(kcr__creds *c);

/* Per-client credential source: static data from the config, a token file
 * re-read when it changes, or an exec plugin's cached output. Thread-safe. */
typedef struct kcr__auth kcr__auth;

/* `cfg` is borrowed and must outlive the auth. */
kcr__auth *kcr__auth_new(const kcr_config *cfg);
void kcr__auth_free(kcr__auth *a);

/* Current credentials (may run the exec plugin, re-read the token file). */
kcr_err kcr__auth_get(kcr__auth *a, kcr__creds *out);

/* Called after a 401: forgets refreshable credentials. True when asking
 * again may produce different credentials (exec plugin or token file). */
bool kcr__auth_unauthorized(kcr__auth *a);

/* Runs an exec credential plugin once (exposed for tests). On success the
 * token or certificate/key land in *out and *expiry (Unix seconds, 0: none). */
kcr_err kcr__exec_run(const kcr__exec_config *exec, const kcr_config *cfg, kcr__creds *out,
                      int64_t *expiry);

#endif
