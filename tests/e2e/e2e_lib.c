/* Informer e2e helpers (e2e_lib.h). */
#include "e2e/e2e_lib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* KCR_LOG=trace (etc.) logs kcr's records to stderr in every e2e binary, in
 * each of Criterion's worker processes (a constructor runs in each). */
__attribute__((constructor)) static void log_from_env(void)
{
    kcr_log_from_env();
}

static const char *env_dir(void)
{
    const char *d = getenv("KCR_TESTENV_DIR");
    return d && *d ? d : "/tmp/kcr-testenv";
}

char *e2e_env(const char *key)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/env", env_dir());
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr,
                "no testenv: %s is missing. Run testenv/start (KCR_TESTENV_DIR=%s), or run "
                "these tests through ctest, whose testenv fixture starts one.\n",
                path, env_dir());
        return NULL;
    }
    char line[8192];
    size_t klen = strlen(key);
    char *val = NULL;
    while (!val && fgets(line, sizeof line, f)) {
        /* "export KEY=VALUE" (testenv/start, testenv/adopt) or "KEY=VALUE" */
        char *kv = strncmp(line, "export ", 7) == 0 ? line + 7 : line;
        if (strncmp(kv, key, klen) != 0 || kv[klen] != '=')
            continue;
        char *v = kv + klen + 1;
        v[strcspn(v, "\n")] = '\0';
        size_t n = strlen(v);
        if (n >= 2 && (v[0] == '\'' || v[0] == '"') && v[n - 1] == v[0]) {
            v[n - 1] = '\0';
            v++;
        }
        val = strdup(v);
    }
    fclose(f);
    if (!val)
        fprintf(stderr, "%s has no %s: restart the testenv (testenv/stop; testenv/start)\n",
                path, key);
    return val;
}

kcr_client *e2e_client(const char *kubeconfig_key)
{
    char *kc = e2e_env(kubeconfig_key);
    if (!kc)
        return NULL;
    kcr_config_options co = {.kubeconfig = kc};
    kcr_config *cfg = NULL;
    kcr_client *c = NULL;
    kcr_err err = kcr_config_load_kubeconfig(&co, &cfg);
    if (err == KCR_OK) {
        kcr_client_options o = {.qps = -1};
        err = kcr_client_new(cfg, &o, &c);
    }
    if (err != KCR_OK)
        fprintf(stderr, "client for %s: %s: %s\n", kc, kcr_strerror(err), kcr_last_error());
    kcr_config_free(cfg);
    free(kc);
    return c;
}

static bool run(const char *cmd)
{
    int rc = system(cmd);
    if (rc != 0)
        fprintf(stderr, "command failed (%d): %s\n", rc, cmd);
    return rc == 0;
}

bool e2e_fault(const char *args)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "KCR_TESTENV_DIR='%s' '%s/testenv/fault' %s >/dev/null", env_dir(),
             KCR_SOURCE_DIR, args);
    return run(cmd);
}

bool e2e_restart_apiserver(const char *args)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "KCR_TESTENV_DIR='%s' '%s/testenv/restart-apiserver' %s >/dev/null",
             env_dir(), KCR_SOURCE_DIR, args);
    return run(cmd);
}

long e2e_count(const char *jq_expr)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "KCR_TESTENV_DIR='%s' '%s/testenv/fault' counts | jq -r '%s // 0'",
             env_dir(), KCR_SOURCE_DIR, jq_expr);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    long v = -1;
    if (fscanf(p, "%ld", &v) != 1)
        v = -1;
    pclose(p);
    return v;
}

long e2e_cm_requests(const char *verb, const char *ns)
{
    char expr[512];
    snprintf(expr, sizeof expr, ".requests[\"%s /api/v1/namespaces/%s/configmaps\"]", verb, ns);
    return e2e_count(expr);
}

kcr_err e2e_namespace(kcr_client *c, const char *prefix, char *out, size_t len)
{
    static int n;
    snprintf(out, len, "%s-%d-%d", prefix, (int)getpid(), n++);
    char json[512];
    snprintf(json, sizeof json,
             "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"%s\"}}", out);
    kcr_resource ns = {"", "v1", "namespaces"};
    return kcr_client_create(c, &(kcr_request){.resource = &ns, .body = json}, NULL);
}

kcr_err e2e_create_cm(kcr_client *c, const char *ns, const char *name, const char *value)
{
    size_t len = strlen(value) + strlen(name) + 256;
    char *json = malloc(len);
    snprintf(json, len,
             "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"%s\","
             "\"labels\":{\"app\":\"kcr-e2e\"}},\"data\":{\"v\":\"%s\"}}",
             name, value);
    kcr_err err =
        kcr_client_create(c, &(kcr_request){.resource = &E2E_CM, .ns = ns, .body = json}, NULL);
    free(json);
    return err;
}

kcr_err e2e_create_cms(kcr_client *c, const char *ns, const char *prefix, int n, size_t bytes)
{
    char *value = malloc(bytes + 1);
    memset(value, 'x', bytes);
    value[bytes] = '\0';
    kcr_err err = KCR_OK;
    for (int i = 0; i < n && err == KCR_OK; i++) {
        char name[128];
        snprintf(name, sizeof name, "%s-%05d", prefix, i);
        err = e2e_create_cm(c, ns, name, value);
        if (err == KCR_ERR_EXISTS)
            err = KCR_OK;
    }
    free(value);
    return err;
}

static kcr_err count_listed(kcr_object *obj, void *ud)
{
    (void)obj;
    ++*(long *)ud;
    return KCR_OK;
}

bool e2e_watch_cache_holds(kcr_client *c, const char *ns, long want, long *have)
{
    *have = -1;
    for (int i = 0; i < 200 && *have != want; i++) {
        if (i > 0)
            nanosleep(&(struct timespec){.tv_nsec = 50 * 1000 * 1000}, NULL);
        long n = 0;
        kcr_request r = {.resource = &E2E_CM, .ns = ns, .resource_version = "0"};
        if (kcr_client_list(c, &r, count_listed, &n, NULL) == KCR_OK)
            *have = n;
    }
    return *have == want;
}

kcr_err e2e_update_cm(kcr_client *c, const char *ns, const char *name, const char *value)
{
    char patch[512];
    snprintf(patch, sizeof patch, "{\"data\":{\"v\":\"%s\"}}", value);
    return kcr_client_patch(c,
                            &(kcr_request){.resource = &E2E_CM,
                                           .ns = ns,
                                           .name = name,
                                           .patch_type = KCR_PATCH_MERGE,
                                           .body = patch},
                            NULL);
}

kcr_err e2e_delete_cm(kcr_client *c, const char *ns, const char *name, char **uid)
{
    if (uid) {
        *uid = NULL;
        kcr_object *o = NULL;
        if (kcr_client_get(c, &(kcr_request){.resource = &E2E_CM, .ns = ns, .name = name}, &o) ==
            KCR_OK)
            *uid = strdup(kcr_object_uid(o));
        kcr_object_unref(o);
    }
    return kcr_client_delete(c, &(kcr_request){.resource = &E2E_CM, .ns = ns, .name = name}, NULL);
}
