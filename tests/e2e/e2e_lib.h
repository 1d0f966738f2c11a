/* Helpers for the informer end-to-end tests against testenv (a real
 * kube-apiserver + etcd and the fault proxy): reading $KCR_TESTENV_DIR/env,
 * clients for its kubeconfigs, the fault proxy's control and counters,
 * unique namespaces and bulk ConfigMaps. A missing testenv is a failure
 * saying how to start one. */
#ifndef KCR_TEST_E2E_LIB_H
#define KCR_TEST_E2E_LIB_H

#include <stdbool.h>
#include <stddef.h>

#include "helpers/converge.h"
#include "kcr/kcr.h"

static const kcr_resource E2E_CM = {"", "v1", "configmaps"};

/* A value of $KCR_TESTENV_DIR/env (malloc'd), or NULL (with a message on
 * stderr) when the file or key is missing. */
char *e2e_env(const char *key);

/* A client for the kubeconfig named by env key (e.g. "KCR_TESTENV_KUBECONFIG",
 * "KCR_TESTENV_PROXY_KUBECONFIG", "KCR_TESTENV_LIMITED_KUBECONFIG"); no
 * client-side rate limit; NULL on failure (message on stderr). */
kcr_client *e2e_client(const char *kubeconfig_key);

/* Runs testenv/fault with these arguments; true when it succeeded. */
bool e2e_fault(const char *args);

/* A number from the proxy counters: jq expression over `testenv/fault
 * counts` (e.g. ".total"); -1 on failure. */
long e2e_count(const char *jq_expr);

/* Proxy requests of `verb` ("list", "watch") on the configmaps of ns. */
long e2e_cm_requests(const char *verb, const char *ns);

/* Runs testenv/restart-apiserver with these arguments. */
bool e2e_restart_apiserver(const char *args);

/* Creates a fresh namespace "<prefix>-<pid>-<n>" into out. */
kcr_err e2e_namespace(kcr_client *c, const char *prefix, char *out, size_t len);

/* Creates n ConfigMaps <prefix>-<i> in ns with about `bytes` of data. */
kcr_err e2e_create_cms(kcr_client *c, const char *ns, const char *prefix, int n, size_t bytes);

/* Waits up to 10 s until a LIST of ns's ConfigMaps at resourceVersion "0"
 * (what a paged informer's first list asks for) holds `want` items; *have
 * gets the last count. Such a list is served by the apiserver's watch cache,
 * which trails etcd (further under load): without this wait, objects written
 * just before may reach an informer by its watch instead of its list. */
bool e2e_watch_cache_holds(kcr_client *c, const char *ns, long want, long *have);

/* Creates / updates (data.v) / deletes one ConfigMap. */
kcr_err e2e_create_cm(kcr_client *c, const char *ns, const char *name, const char *value);
kcr_err e2e_update_cm(kcr_client *c, const char *ns, const char *name, const char *value);
/* Deletes ns/name; *uid (may be NULL) gets its uid (malloc'd) first. */
kcr_err e2e_delete_cm(kcr_client *c, const char *ns, const char *name, char **uid);

#endif
