/* Credentials per request: static token / basic auth / client certificate
 * from the config, a token file re-read when it changes (rotating bound
 * service-account tokens), and exec credential plugins
 * (client.authentication.k8s.io/v1) run without a shell and cached until
 * their expirationTimestamp or the next 401. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client/config_impl.h"
#include "client/pem.h"
#include "core/base64.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/error.h"
#include "object/edit_tree.h"
#include "object/value.h"
#include "core/log.h"
#include "kcr/time.h"

extern char **environ;

enum {
    MAX_TOKEN = 1 << 20,
    MAX_PLUGIN_STDOUT = 4 << 20,
    MAX_PLUGIN_STDERR_KEPT = 1024,
    PLUGIN_TIMEOUT_S = 60,
    EXPIRY_SKEW_S = 10, /* refresh this long before the plugin's expiry */
};

struct kcr__auth {
    const kcr_config *cfg;
    pthread_mutex_t lock;
    /* token file cache */
    char *file_token;
    struct stat file_stat;
    bool file_valid;
    /* exec plugin cache */
    kcr__creds exec_creds;
    int64_t exec_expiry; /* Unix seconds; 0: until a 401 */
    bool exec_valid;
};

void kcr__creds_clear(kcr__creds *c)
{
    kcr__free_secret(c->bearer);
    c->bearer = NULL;
    c->username = c->password = NULL;
    kcr__blob_clear(&c->cert);
    kcr__blob_clear(&c->key);
}

kcr__auth *kcr__auth_new(const kcr_config *cfg)
{
    kcr__auth *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->cfg = cfg;
    pthread_mutex_init(&a->lock, NULL);
    return a;
}

void kcr__auth_free(kcr__auth *a)
{
    if (!a)
        return;
    kcr__free_secret(a->file_token);
    kcr__creds_clear(&a->exec_creds);
    pthread_mutex_destroy(&a->lock);
    free(a);
}

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Called with the lock held. */
static kcr_err refresh_token_file(kcr__auth *a)
{
    struct stat st;
    if (stat(a->cfg->token_file, &st) != 0) {
        if (a->file_valid) /* keep the last good token, like client-go */
            return KCR_OK;
        return kcr__fail(KCR_ERR_CONFIG, "token file %s: %s", a->cfg->token_file,
                         strerror(errno));
    }
    if (a->file_valid && same_file(&st, &a->file_stat))
        return KCR_OK;
    kcr__blob data;
    kcr_err err = kcr__read_file(a->cfg->token_file, MAX_TOKEN, "token file", &data);
    if (err != KCR_OK)
        return a->file_valid ? KCR_OK : kcr__refail(KCR_ERR_CONFIG, "%s", "");
    size_t n = data.len;
    while (n > 0 && strchr(" \t\r\n", data.data[n - 1]))
        data.data[--n] = '\0';
    if (n == 0) {
        kcr__blob_clear(&data);
        return a->file_valid ? KCR_OK
                             : kcr__fail(KCR_ERR_CONFIG, "token file %s is empty",
                                         a->cfg->token_file);
    }
    kcr__free_secret(a->file_token);
    a->file_token = data.data; /* takes the buffer */
    a->file_stat = st;
    a->file_valid = true;
    kcr__log(KCR_LOG_DEBUG, "auth", "read token file %s", a->cfg->token_file);
    return KCR_OK;
}

static bool blob_copy(kcr__blob *dst, const kcr__blob *src)
{
    dst->data = NULL;
    dst->len = 0;
    if (!src->data)
        return true;
    if (!(dst->data = malloc(src->len + 1)))
        return false;
    memcpy(dst->data, src->data, src->len + 1);
    dst->len = src->len;
    return true;
}

kcr_err kcr__auth_get(kcr__auth *a, kcr__creds *out)
{
    memset(out, 0, sizeof *out);
    const kcr_config *cfg = a->cfg;
    kcr_err err = KCR_OK;
    pthread_mutex_lock(&a->lock);
    if (cfg->exec) {
        int64_t now = kcr__wall_ns() / KCR_NS_PER_S;
        if (!a->exec_valid || (a->exec_expiry && now + EXPIRY_SKEW_S >= a->exec_expiry)) {
            kcr__creds_clear(&a->exec_creds);
            a->exec_valid = false;
            err = kcr__exec_run(cfg->exec, cfg, &a->exec_creds, &a->exec_expiry);
            a->exec_valid = err == KCR_OK;
        }
        if (err == KCR_OK) {
            if (a->exec_creds.bearer && !(out->bearer = strdup(a->exec_creds.bearer)))
                err = kcr__fail(KCR_ERR_NOMEM, "out of memory getting credentials");
            if (!blob_copy(&out->cert, &a->exec_creds.cert) ||
                !blob_copy(&out->key, &a->exec_creds.key))
                err = kcr__fail(KCR_ERR_NOMEM, "out of memory getting credentials");
        }
    }
    if (err == KCR_OK && !out->bearer && cfg->token_file) {
        err = refresh_token_file(a);
        if (err == KCR_OK && !(out->bearer = strdup(a->file_token)))
            err = kcr__fail(KCR_ERR_NOMEM, "out of memory getting credentials");
    }
    pthread_mutex_unlock(&a->lock);
    if (err == KCR_OK && !out->bearer && cfg->token && *cfg->token &&
        !(out->bearer = strdup(cfg->token)))
        err = kcr__fail(KCR_ERR_NOMEM, "out of memory getting credentials");
    if (err == KCR_OK && !out->bearer && cfg->username && *cfg->username) {
        out->username = cfg->username;
        out->password = cfg->password ? cfg->password : "";
    }
    if (err == KCR_OK && !out->cert.data && cfg->cert.data &&
        (!blob_copy(&out->cert, &cfg->cert) || !blob_copy(&out->key, &cfg->key)))
        err = kcr__fail(KCR_ERR_NOMEM, "out of memory getting credentials");
    if (err != KCR_OK)
        kcr__creds_clear(out);
    return err;
}

bool kcr__auth_unauthorized(kcr__auth *a)
{
    bool retry = false;
    pthread_mutex_lock(&a->lock);
    if (a->cfg->exec) {
        kcr__creds_clear(&a->exec_creds);
        a->exec_valid = false;
        retry = true;
    }
    if (a->cfg->token_file) {
        /* Force a re-read even if the file looks unchanged. */
        struct stat st;
        retry = retry || (stat(a->cfg->token_file, &st) == 0 && a->file_valid &&
                          !same_file(&st, &a->file_stat));
        memset(&a->file_stat, 0, sizeof a->file_stat);
    }
    pthread_mutex_unlock(&a->lock);
    return retry;
}

/* ---- exec plugins ---------------------------------------------------------------- */

/* KUBERNETES_EXEC_INFO: the ExecCredential input the plugin may read. */
static char *exec_info(const kcr__exec_config *exec, const kcr_config *cfg)
{
    struct kcr__node *root = kcr__node_new(KCR__N_MAP);
    struct kcr__node *spec = kcr__node_new(KCR__N_MAP);
    struct kcr__node *cluster = exec->provide_cluster_info ? kcr__node_new(KCR__N_MAP) : NULL;
    if (!root || !spec || (!cluster && exec->provide_cluster_info))
        kcr__fail(KCR_ERR_NOMEM, "out of memory preparing the exec credential plugin's input");
    bool ok = root && spec && (cluster || !exec->provide_cluster_info) &&
              kcr__node_put_str(root, "apiVersion", exec->api_version) &&
              kcr__node_put_str(root, "kind", "ExecCredential");
    ok = ok && kcr__node_put_bool(spec, "interactive", false);
    if (ok && cluster) {
        ok = kcr__node_put_str(cluster, "server", cfg->server);
        if (ok && cfg->tls_server_name)
            ok = kcr__node_put_str(cluster, "tls-server-name", cfg->tls_server_name);
        if (ok && cfg->insecure)
            ok = kcr__node_put_bool(cluster, "insecure-skip-tls-verify", true);
        if (ok && cfg->disable_compression)
            ok = kcr__node_put_bool(cluster, "disable-compression", true);
        if (ok && cfg->ca.data) {
            char *b64 = kcr__base64_encode(cfg->ca.data, cfg->ca.len);
            if (!b64)
                kcr__fail(KCR_ERR_NOMEM, "out of memory preparing the exec credential plugin's "
                                         "input");
            ok = b64 && kcr__node_put_str(cluster, "certificate-authority-data", b64);
            free(b64);
        }
        if (ok) {
            ok = kcr__node_put(spec, "cluster", cluster);
            cluster = NULL; /* taken, even on failure */
        }
    }
    if (ok) {
        ok = kcr__node_put(root, "spec", spec);
        spec = NULL;
    }
    char *out = NULL;
    if (ok) /* otherwise the detail is set */
        kcr__node_to_json(root, &out, NULL);
    kcr__node_free(cluster);
    kcr__node_free(spec);
    kcr__node_free(root);
    return out;
}

/* Appends what fits under `keep` bytes; *over when something did not. */
static void append(kcr__buf *b, size_t keep, const char *data, size_t n, bool *over)
{
    if (b->len + n > keep) {
        *over = true;
        n = keep > b->len ? keep - b->len : 0;
    }
    if (n && kcr__buf_add(b, data, n) != KCR_OK)
        *over = true;
}

static void set_cloexec(int fd)
{
    fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) | FD_CLOEXEC);
}

/* Spawns the plugin and collects its stdout and (the start of) its stderr. */
static kcr_err run_plugin(const kcr__exec_config *exec, char *info, char **out, size_t *out_len,
                          char **err_text, int *status)
{
    *out = *err_text = NULL;
    *out_len = 0;
    kcr__buf ob = {0}, eb = {0}; /* stdout, the start of stderr */
    size_t n_environ = 0;
    while (environ[n_environ])
        n_environ++;
    char **envp = calloc(n_environ + exec->n_env + 2, sizeof *envp);
    char **argv = calloc(exec->n_args + 2, sizeof *argv);
    size_t info_len = strlen(info) + sizeof "KUBERNETES_EXEC_INFO=";
    char *info_var = malloc(info_len);
    if (!envp || !argv || !info_var) {
        free(envp);
        free(argv);
        free(info_var);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory running the exec credential plugin");
    }
    snprintf(info_var, info_len, "KUBERNETES_EXEC_INFO=%s", info);
    size_t ne = 0;
    for (size_t i = 0; i < n_environ; i++) {
        const char *eq = strchr(environ[i], '=');
        size_t nlen = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
        bool overridden = strncmp(environ[i], "KUBERNETES_EXEC_INFO=", 21) == 0;
        for (size_t j = 0; !overridden && j < exec->n_env; j++)
            overridden = strncmp(exec->env[j], environ[i], nlen) == 0 && exec->env[j][nlen] == '=';
        if (!overridden)
            envp[ne++] = environ[i];
    }
    for (size_t j = 0; j < exec->n_env; j++)
        envp[ne++] = exec->env[j];
    envp[ne++] = info_var;
    argv[0] = exec->command;
    for (size_t i = 0; i < exec->n_args; i++)
        argv[i + 1] = exec->args[i];

    int po[2] = {-1, -1}, pe[2] = {-1, -1};
    kcr_err err = KCR_OK;
    posix_spawn_file_actions_t fa;
    bool fa_ok = false;
    pid_t pid = -1;
    if (pipe(po) != 0 || pipe(pe) != 0) {
        err = kcr__fail(KCR_ERR_EXEC, "exec plugin %s: pipe: %s", exec->command, strerror(errno));
        goto done;
    }
    set_cloexec(po[0]);
    set_cloexec(pe[0]);
    if (posix_spawn_file_actions_init(&fa) != 0) {
        err = kcr__fail(KCR_ERR_NOMEM, "out of memory running the exec credential plugin");
        goto done;
    }
    fa_ok = true;
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, po[1], 1);
    posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
    posix_spawn_file_actions_addclose(&fa, po[1]);
    posix_spawn_file_actions_addclose(&fa, pe[1]);
    int rc = posix_spawnp(&pid, exec->command, &fa, NULL, argv, envp);
    close(po[1]);
    close(pe[1]);
    po[1] = pe[1] = -1;
    if (rc != 0) {
        pid = -1;
        err = kcr__fail(KCR_ERR_EXEC, "exec plugin %s: cannot run: %s%s%s", exec->command,
                        strerror(rc), exec->install_hint ? "; " : "",
                        exec->install_hint ? exec->install_hint : "");
        goto done;
    }
    bool out_over = false, err_over = false;
    int64_t deadline = kcr__now_ns() + PLUGIN_TIMEOUT_S * KCR_NS_PER_S;
    struct pollfd fds[2] = {{.fd = po[0], .events = POLLIN}, {.fd = pe[0], .events = POLLIN}};
    while (fds[0].fd >= 0 || fds[1].fd >= 0) {
        int64_t left = (deadline - kcr__now_ns()) / KCR_NS_PER_MS;
        if (left <= 0) {
            kill(pid, SIGKILL);
            err = kcr__fail(KCR_ERR_EXEC, "exec plugin %s: no answer within %d s", exec->command,
                            PLUGIN_TIMEOUT_S);
            break;
        }
        int n = poll(fds, 2, (int)(left > 1000 ? 1000 : left));
        if (n < 0 && errno != EINTR)
            break;
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            char buf[8192];
            ssize_t r = read(fds[i].fd, buf, sizeof buf);
            if (r <= 0) {
                if (r < 0 && errno == EINTR)
                    continue;
                fds[i].fd = -1;
            } else if (i == 0) {
                append(&ob, MAX_PLUGIN_STDOUT, buf, (size_t)r, &out_over);
            } else {
                append(&eb, MAX_PLUGIN_STDERR_KEPT, buf, (size_t)r, &err_over);
            }
        }
    }
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
        ;
    *status = ws;
    if (err == KCR_OK && ob.oom)
        err = kcr__fail(KCR_ERR_NOMEM, "exec plugin %s: out of memory reading its output",
                        exec->command);
    else if (err == KCR_OK && out_over)
        err = kcr__fail(KCR_ERR_EXEC, "exec plugin %s: output larger than %d bytes", exec->command,
                        MAX_PLUGIN_STDOUT);
done:
    *out = ob.s; /* the caller wipes it (kcr__free_secret) */
    *out_len = ob.len;
    *err_text = eb.s;
    if (fa_ok)
        posix_spawn_file_actions_destroy(&fa);
    for (int i = 0; i < 2; i++) {
        if (po[i] >= 0)
            close(po[i]);
        if (pe[i] >= 0)
            close(pe[i]);
    }
    free(envp);
    free(argv);
    kcr__free_secret(info_var);
    return err;
}

kcr_err kcr__exec_run(const kcr__exec_config *exec, const kcr_config *cfg, kcr__creds *out,
                      int64_t *expiry)
{
    memset(out, 0, sizeof *out);
    *expiry = 0;
    char *info = exec_info(exec, cfg);
    if (!info)
        return kcr__refail(KCR_ERR_NOMEM, "exec plugin %s: cannot write its input: ",
                           exec->command); /* out of memory: kubeconfig strings are UTF-8 */
    char *stdout_buf = NULL, *stderr_buf = NULL;
    size_t stdout_len = 0;
    int status = 0;
    kcr_err err = run_plugin(exec, info, &stdout_buf, &stdout_len, &stderr_buf, &status);
    kcr__free_secret(info);
    const char *errs = stderr_buf ? stderr_buf : "";
    if (err == KCR_OK && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        /* Trim the trailing newline of stderr for a one-line message. */
        size_t n = strlen(errs);
        while (n > 0 && (errs[n - 1] == '\n' || errs[n - 1] == '\r'))
            stderr_buf[--n] = '\0';
        if (WIFEXITED(status) && (WEXITSTATUS(status) == 126 || WEXITSTATUS(status) == 127))
            /* posix_spawnp reports a missing command through its return
             * value, except where vfork is emulated (valgrind): then the
             * child exits 127, as a shell would. */
            err = kcr__fail(KCR_ERR_EXEC, "exec plugin %s: cannot run (exit status %d) %s%s%s",
                            exec->command, WEXITSTATUS(status), errs,
                            exec->install_hint ? "; " : "",
                            exec->install_hint ? exec->install_hint : "");
        else if (WIFEXITED(status))
            err = kcr__fail(KCR_ERR_EXEC, "exec plugin %s exited with status %d: %s",
                            exec->command, WEXITSTATUS(status), errs);
        else
            err = kcr__fail(KCR_ERR_EXEC, "exec plugin %s killed by signal %d: %s",
                            exec->command, WIFSIGNALED(status) ? WTERMSIG(status) : 0, errs);
    }
    kcr_object *doc = NULL;
    if (err == KCR_OK && kcr_object_parse_any(stdout_buf ? stdout_buf : "", stdout_len, &doc) !=
                             KCR_OK)
        err = kcr__refail(KCR_ERR_EXEC, "exec plugin %s: output is not a JSON object: ",
                          exec->command);
    if (err == KCR_OK) {
        const char *kind = kcr__value_str(kcr_object_get(doc, "kind"));
        const char *api = kcr__value_str(kcr_object_get(doc, "apiVersion"));
        kcr_value st = kcr_object_get(doc, "status");
        const char *token = kcr__value_str(kcr_value_member(st, "token"));
        const char *cert = kcr__value_str(kcr_value_member(st, "clientCertificateData"));
        const char *key = kcr__value_str(kcr_value_member(st, "clientKeyData"));
        const char *exp = kcr__value_str(kcr_value_member(st, "expirationTimestamp"));
        if (!kind || strcmp(kind, "ExecCredential") != 0)
            err = kcr__fail(KCR_ERR_EXEC, "exec plugin %s: output is not an ExecCredential",
                            exec->command);
        else if (api && strcmp(api, exec->api_version) != 0)
            err = kcr__fail(KCR_ERR_EXEC, "exec plugin %s: answered apiVersion %s, asked for %s",
                            exec->command, api, exec->api_version);
        else if (!(token && *token) && !(cert && *cert && key && *key))
            err = kcr__fail(KCR_ERR_EXEC,
                            "exec plugin %s: status has neither token nor clientCertificateData "
                            "and clientKeyData",
                            exec->command);
        else if ((cert && *cert) != (key && *key))
            err = kcr__fail(KCR_ERR_EXEC,
                            "exec plugin %s: clientCertificateData and clientKeyData must come "
                            "together",
                            exec->command);
        else if (exp && kcr_time_parse(exp, expiry) != KCR_OK)
            err = kcr__fail(KCR_ERR_EXEC, "exec plugin %s: bad expirationTimestamp",
                            exec->command);
        if (err == KCR_OK && token && *token && !(out->bearer = strdup(token)))
            err = kcr__fail(KCR_ERR_NOMEM, "out of memory running the exec credential plugin");
        if (err == KCR_OK && cert && *cert) {
            out->cert.data = strdup(cert);
            out->key.data = strdup(key);
            if (!out->cert.data || !out->key.data)
                err = kcr__fail(KCR_ERR_NOMEM, "out of memory running the exec credential plugin");
            else
                out->cert.len = strlen(cert), out->key.len = strlen(key);
            char what[300];
            snprintf(what, sizeof what, "exec plugin %s: clientCertificateData", exec->command);
            if (err == KCR_OK)
                err = kcr__pem_check_certs(out->cert.data, out->cert.len, what);
            snprintf(what, sizeof what, "exec plugin %s: clientKeyData", exec->command);
            if (err == KCR_OK)
                err = kcr__pem_check_pair(out->cert.data, out->cert.len, out->key.data,
                                          out->key.len, what, "clientCertificateData");
            if (err == KCR_ERR_CONFIG)
                err = kcr__refail(KCR_ERR_EXEC, "%s", "");
        }
        if (err == KCR_OK)
            kcr__log(KCR_LOG_DEBUG, "auth", "exec plugin %s gave %s credentials", exec->command,
                     token && *token ? "token" : "certificate");
    }
    kcr__object_unref_wipe(doc); /* the document holds the credentials */
    if (stdout_buf)
        kcr__free_secret(stdout_buf);
    free(stderr_buf);
    if (err != KCR_OK)
        kcr__creds_clear(out);
    return err;
}
