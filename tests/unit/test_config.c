/* kubeconfig loading and merging, in-cluster config, token-file rotation and
 * exec credential plugins. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/config_impl.h"
#include "core/base64.h"
#include "helpers/pki.h"
#include "kcr/kcr.h"

static char dir[256];

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/kcr-test-config-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void remove_dir(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

static const char *write_file(const char *name, const char *text, mode_t mode)
{
    static char path[8][512];
    static int next;
    char *p = path[next++ % 8];
    snprintf(p, 512, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
    chmod(p, mode);
    return p;
}

static char *b64(const char *s)
{
    return kcr__base64_encode(s, strlen(s));
}

/* Certificates generated for this process (each test runs in its own). */
static test_pki ca_pki, client_pki;

static void make_pki(void)
{
    if (!ca_pki.cert_pem) {
        test_pki_ca(&ca_pki, "test-ca");
        test_pki_leaf(&client_pki, &ca_pki, "alice", NULL, -60, 3600);
    }
}

#define FAKE_CA (make_pki(), ca_pki.cert_pem)
#define FAKE_CERT (make_pki(), client_pki.cert_pem)
#define FAKE_KEY (make_pki(), client_pki.key_pem)

Test(kubeconfig, kind_style_embedded_data, .init = make_dir, .fini = remove_dir)
{
    char *ca = b64(FAKE_CA), *cert = b64(FAKE_CERT), *key = b64(FAKE_KEY);
    char yaml[4096];
    snprintf(yaml, sizeof yaml,
             "apiVersion: v1\n"
             "clusters:\n"
             "- cluster:\n"
             "    certificate-authority-data: %s\n"
             "    server: https://127.0.0.1:38817\n"
             "  name: kind-kind\n"
             "contexts:\n"
             "- context:\n"
             "    cluster: kind-kind\n"
             "    user: kind-kind\n"
             "  name: kind-kind\n"
             "current-context: kind-kind\n"
             "kind: Config\n"
             "preferences: {}\n"
             "users:\n"
             "- name: kind-kind\n"
             "  user:\n"
             "    client-certificate-data: %s\n"
             "    client-key-data: %s\n",
             ca, cert, key);
    setenv("KUBECONFIG", write_file("kind.yaml", yaml, 0600), 1);
    kcr_config *cfg;
    cr_assert_eq(kcr_config_load(NULL, &cfg), KCR_OK, "%s", kcr_last_error());
    cr_assert_str_eq(kcr_config_server(cfg), "https://127.0.0.1:38817");
    cr_assert_str_eq(kcr_config_context(cfg), "kind-kind");
    cr_assert_str_eq(kcr_config_namespace(cfg), "default");
    cr_assert_not(kcr_config_insecure(cfg));
    cr_assert_str_eq(cfg->ca.data, FAKE_CA);
    cr_assert_str_eq(cfg->cert.data, FAKE_CERT);
    cr_assert_str_eq(cfg->key.data, FAKE_KEY);
    cr_assert_null(cfg->token);
    kcr_config_free(cfg);
    free(ca);
    free(cert);
    free(key);
}

Test(kubeconfig, merged_files_first_wins, .init = make_dir, .fini = remove_dir)
{
    write_file("ca.pem", FAKE_CA, 0600);
    const char *a = write_file("a.yaml",
                               "current-context: dev\n"
                               "clusters:\n"
                               "- name: shared\n"
                               "  cluster: {server: 'https://first:6443/', certificate-authority: ca.pem}\n"
                               "contexts:\n"
                               "- name: dev\n"
                               "  context: {cluster: shared, user: alice, namespace: team-a}\n",
                               0600);
    const char *b = write_file("b.yaml",
                               "current-context: prod\n"
                               "clusters:\n"
                               "- name: shared\n"
                               "  cluster: {server: 'https://second:6443'}\n"
                               "- name: other\n"
                               "  cluster: {server: 'https://other:6443', insecure-skip-tls-verify: true,"
                               " tls-server-name: api.internal}\n"
                               "users:\n"
                               "- name: alice\n"
                               "  user: {token: s3cret}\n"
                               "- name: bob\n"
                               "  user: {username: bob, password: pw}\n"
                               "contexts:\n"
                               "- name: dev\n"
                               "  context: {cluster: other, user: bob}\n"
                               "- name: prod\n"
                               "  context: {cluster: other, user: bob}\n",
                               0600);
    char list[1200];
    snprintf(list, sizeof list, "%s/missing.yaml:%s:%s", dir, a, b);
    setenv("KUBECONFIG", list, 1);
    kcr_config *cfg;
    cr_assert_eq(kcr_config_load_kubeconfig(NULL, &cfg), KCR_OK, "%s", kcr_last_error());
    /* current-context and the cluster "shared" come from the first file; the
     * user from the second, the only one defining it. */
    cr_assert_str_eq(kcr_config_context(cfg), "dev");
    cr_assert_str_eq(kcr_config_server(cfg), "https://first:6443");
    cr_assert_str_eq(kcr_config_namespace(cfg), "team-a");
    cr_assert_str_eq(cfg->ca.data, FAKE_CA, "relative path resolved against the file's dir");
    cr_assert_str_eq(cfg->token, "s3cret");
    kcr_config_free(cfg);

    kcr_config_options o = {.context = "prod"};
    cr_assert_eq(kcr_config_load_kubeconfig(&o, &cfg), KCR_OK, "%s", kcr_last_error());
    cr_assert_str_eq(kcr_config_server(cfg), "https://other:6443");
    cr_assert(kcr_config_insecure(cfg));
    cr_assert_str_eq(cfg->tls_server_name, "api.internal");
    cr_assert_str_eq(cfg->username, "bob");
    cr_assert_str_eq(cfg->password, "pw");
    kcr_config_free(cfg);
}

static kcr_err parse(const char *yaml, const char *context, kcr_config **cfg)
{
    return kcr_config_parse_kubeconfig(yaml, strlen(yaml), dir, context, cfg);
}

#define MINIMAL                                                                                    \
    "clusters: [{name: c, cluster: {server: 'https://h:1'}}]\n"                                   \
    "contexts: [{name: x, context: {cluster: c, user: u}}]\n"                                     \
    "current-context: x\n"

Test(kubeconfig, bad_input_gives_clear_errors, .init = make_dir, .fini = remove_dir)
{
    kcr_config *cfg = NULL;
    kcr_config_options o = {.kubeconfig = "/nonexistent/kubeconfig"};
    cr_assert_eq(kcr_config_load_kubeconfig(&o, &cfg), KCR_ERR_CONFIG);
    cr_assert(strstr(kcr_last_error(), "/nonexistent/kubeconfig") != NULL, "%s", kcr_last_error());
    cr_assert_null(cfg);

    cr_assert_eq(parse("clusters: [\n  - {name: a\n", NULL, &cfg), KCR_ERR_CONFIG);
    cr_assert(strstr(kcr_last_error(), "line") != NULL, "%s", kcr_last_error());
    cr_assert_eq(parse("- just\n- a list\n", NULL, &cfg), KCR_ERR_CONFIG);
    cr_assert_eq(parse(MINIMAL "users: [{name: u, user: {}}]\n", "nope", &cfg), KCR_ERR_CONFIG);
    cr_assert(strstr(kcr_last_error(), "context \"nope\" not found") != NULL, "%s",
              kcr_last_error());
    cr_assert_eq(parse(MINIMAL, NULL, &cfg), KCR_ERR_CONFIG, "user u is not defined");
    cr_assert(strstr(kcr_last_error(), "user \"u\" not found") != NULL, "%s", kcr_last_error());
    cr_assert_eq(parse(MINIMAL "users: [{name: u, user: {client-certificate-data: 'no*base64!',"
                               " client-key-data: QQ==}}]\n",
                       NULL, &cfg),
                 KCR_ERR_CONFIG);
    cr_assert(strstr(kcr_last_error(), "base64") != NULL, "%s", kcr_last_error());
    cr_assert_eq(parse(MINIMAL "users: [{name: u, user: {client-certificate: missing.crt,"
                               " client-key: missing.key}}]\n",
                       NULL, &cfg),
                 KCR_ERR_CONFIG);
    cr_assert(strstr(kcr_last_error(), "missing.crt") != NULL, "%s", kcr_last_error());
    write_file("unreadable.crt", FAKE_CERT, 0000);
    if (geteuid() != 0) { /* root reads anything */
        cr_assert_eq(parse(MINIMAL "users: [{name: u, user: {client-certificate: unreadable.crt,"
                                   " client-key-data: QQ==}}]\n",
                           NULL, &cfg),
                     KCR_ERR_CONFIG);
    }
    cr_assert_eq(parse(MINIMAL "users: [{name: u, user: {auth-provider: {name: gcp}}}]\n", NULL,
                       &cfg),
                 KCR_ERR_UNSUPPORTED);
    cr_assert(strstr(kcr_last_error(), "gcp") != NULL);
    cr_assert_eq(parse("clusters: [{name: c, cluster: {server: 'ftp://h'}}]\n"
                       "contexts: [{name: x, context: {cluster: c}}]\ncurrent-context: x\n",
                       NULL, &cfg),
                 KCR_ERR_CONFIG);
    cr_assert_eq(parse("clusters: [{name: c, cluster: {server: 'https://'}}]\n"
                       "contexts: [{name: x, context: {cluster: c}}]\ncurrent-context: x\n",
                       NULL, &cfg),
                 KCR_ERR_CONFIG, "a server without a host");
    cr_assert(strstr(kcr_last_error(), "no host") != NULL, "%s", kcr_last_error());
    cr_assert_eq(parse("contexts: [{name: x, context: {cluster: c}}]\n", NULL, &cfg),
                 KCR_ERR_CONFIG, "no current context");
    cr_assert_eq(parse("", "x", &cfg), KCR_ERR_CONFIG);
    cr_assert_eq(parse(MINIMAL "users: [{name: u, user: {exec: {args: [a]}}}]\n", NULL, &cfg),
                 KCR_ERR_CONFIG, "exec without a command");
    cr_assert_null(cfg);
}

Test(in_cluster, service_account_files, .init = make_dir, .fini = remove_dir)
{
    write_file("token", "tok-1\n", 0600);
    write_file("ca.crt", FAKE_CA, 0600);
    write_file("namespace", "kube-system\n", 0600);
    kcr_config_options o = {.in_cluster_dir = dir};
    kcr_config *cfg = NULL;
    unsetenv("KUBERNETES_SERVICE_HOST");
    cr_assert_eq(kcr_config_load_in_cluster(&o, &cfg), KCR_ERR_CONFIG);
    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    unsetenv("KUBECONFIG");
    cr_assert_eq(kcr_config_load(&o, &cfg), KCR_OK, "%s", kcr_last_error());
    cr_assert_str_eq(kcr_config_server(cfg), "https://10.96.0.1:443");
    cr_assert_str_eq(kcr_config_namespace(cfg), "kube-system");
    cr_assert_str_eq(cfg->ca.data, FAKE_CA);
    kcr__auth *auth = kcr__auth_new(cfg);
    kcr__creds c;
    cr_assert_eq(kcr__auth_get(auth, &c), KCR_OK);
    cr_assert_str_eq(c.bearer, "tok-1");
    kcr__creds_clear(&c);
    kcr__auth_free(auth);
    kcr_config_free(cfg);
    setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
    cr_assert_eq(kcr_config_load_in_cluster(&o, &cfg), KCR_OK);
    cr_assert_str_eq(kcr_config_server(cfg), "https://[fd00::1]:443");
    kcr_config_free(cfg);
}

Test(auth, token_file_rotation, .init = make_dir, .fini = remove_dir)
{
    write_file("token", "first-token\n", 0600);
    char yaml[1024];
    snprintf(yaml, sizeof yaml, MINIMAL "users: [{name: u, user: {tokenFile: token, token: static}}]\n");
    kcr_config *cfg;
    cr_assert_eq(parse(yaml, NULL, &cfg), KCR_OK, "%s", kcr_last_error());
    kcr__auth *auth = kcr__auth_new(cfg);
    kcr__creds c;
    cr_assert_eq(kcr__auth_get(auth, &c), KCR_OK);
    cr_assert_str_eq(c.bearer, "first-token", "the token file wins over the static token");
    kcr__creds_clear(&c);
    /* Rotate the way kubelet does: write a new file, rename it over the old. */
    write_file("token.new", "second-token", 0600);
    char from[600], to[600];
    snprintf(from, sizeof from, "%s/token.new", dir);
    snprintf(to, sizeof to, "%s/token", dir);
    cr_assert_eq(rename(from, to), 0);
    cr_assert_eq(kcr__auth_get(auth, &c), KCR_OK);
    cr_assert_str_eq(c.bearer, "second-token");
    kcr__creds_clear(&c);
    /* A vanished file keeps the last good token. */
    unlink(to);
    cr_assert_eq(kcr__auth_get(auth, &c), KCR_OK);
    cr_assert_str_eq(c.bearer, "second-token");
    kcr__creds_clear(&c);
    kcr__auth_free(auth);
    kcr_config_free(cfg);
}

static const char *plugin_script =
    "#!/bin/sh\n"
    "# counts its runs, checks its input, answers an ExecCredential\n"
    "echo run >> \"$(dirname \"$0\")/runs\"\n"
    "case \"$KUBERNETES_EXEC_INFO\" in *ExecCredential*) ;; *) echo 'no exec info' >&2; exit 9;; esac\n"
    "case \"$KUBERNETES_EXEC_INFO\" in *https://h:1*) ;; *) echo 'no cluster info' >&2; exit 8;; esac\n"
    "printf '%s' \"$KUBERNETES_EXEC_INFO\" > \"$(dirname \"$0\")/info\"\n"
    "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
    "\"status\":{\"token\":\"%s-%s\",\"expirationTimestamp\":\"%s\"}}' \"$1\" \"$PLUGIN_SUFFIX\" "
    "\"$EXPIRY\"\n";

static int runs(void)
{
    char path[600];
    snprintf(path, sizeof path, "%s/runs", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int n = 0;
    char line[32];
    while (fgets(line, sizeof line, f))
        n++;
    fclose(f);
    return n;
}

/* A kubeconfig whose user runs plugin.sh; `clusters` NULL: MINIMAL's. */
static kcr_config *plugin_config_with(const char *expiry, const char *clusters)
{
    write_file("plugin.sh", plugin_script, 0700);
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "%s"
             "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
             "current-context: x\n"
             "users:\n"
             "- name: u\n"
             "  user:\n"
             "    exec:\n"
             "      apiVersion: client.authentication.k8s.io/v1\n"
             "      command: ./plugin.sh\n"
             "      args: [tok]\n"
             "      provideClusterInfo: true\n"
             "      env:\n"
             "      - {name: PLUGIN_SUFFIX, value: abc}\n"
             "      - {name: EXPIRY, value: '%s'}\n",
             clusters ? clusters : "clusters: [{name: c, cluster: {server: 'https://h:1'}}]\n",
             expiry);
    kcr_config *cfg;
    cr_assert_eq(parse(yaml, NULL, &cfg), KCR_OK, "%s", kcr_last_error());
    return cfg;
}

static kcr_config *plugin_config(const char *expiry)
{
    return plugin_config_with(expiry, NULL);
}

/* The KUBERNETES_EXEC_INFO the plugin was last run with (static storage). */
static const char *exec_info_seen(void)
{
    static char info[4096];
    char path[600];
    snprintf(path, sizeof path, "%s/info", dir);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "the plugin did not run");
    size_t n = fread(info, 1, sizeof info - 1, f);
    info[n] = '\0';
    fclose(f);
    return info;
}

Test(exec_plugin, cluster_info_carries_disable_compression, .init = make_dir, .fini = remove_dir)
{
    const char *clusters[2] = {
        NULL, "clusters: [{name: c, cluster: {server: 'https://h:1', disable-compression: true}}]\n"};
    for (int i = 0; i < 2; i++) {
        kcr_config *cfg = plugin_config_with("2999-01-01T00:00:00Z", clusters[i]);
        kcr__auth *auth = kcr__auth_new(cfg);
        kcr__creds c;
        cr_assert_eq(kcr__auth_get(auth, &c), KCR_OK, "%s", kcr_last_error());
        kcr__creds_clear(&c);
        const char *info = exec_info_seen();
        bool said = strstr(info, "\"disable-compression\":true") != NULL;
        cr_assert_eq(said, i == 1, "cluster %d: %s", i, info);
        kcr__auth_free(auth);
        kcr_config_free(cfg);
    }
}

Test(exec_plugin, token_cached_until_401, .init = make_dir, .fini = remove_dir)
{
    kcr_config *cfg = plugin_config("2999-01-01T00:00:00Z");
    kcr__auth *auth = kcr__auth_new(cfg);
    kcr__creds c;
    cr_assert_eq(kcr__auth_get(auth, &c), KCR_OK, "%s", kcr_last_error());
    cr_assert_str_eq(c.bearer, "tok-abc");
    kcr__creds_clear(&c);
    cr_assert_eq(kcr__auth_get(auth, &c), KCR_OK);
    kcr__creds_clear(&c);
    cr_assert_eq(runs(), 1, "cached until expiry");
    cr_assert(kcr__auth_unauthorized(auth));
    cr_assert_eq(kcr__auth_get(auth, &c), KCR_OK);
    kcr__creds_clear(&c);
    cr_assert_eq(runs(), 2, "a 401 runs the plugin again");
    kcr__auth_free(auth);
    kcr_config_free(cfg);
}

Test(exec_plugin, expired_credentials_run_again, .init = make_dir, .fini = remove_dir)
{
    kcr_config *cfg = plugin_config("2001-01-01T00:00:00+01:00");
    kcr__auth *auth = kcr__auth_new(cfg);
    kcr__creds c;
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(kcr__auth_get(auth, &c), KCR_OK);
        kcr__creds_clear(&c);
    }
    cr_assert_eq(runs(), 3);
    kcr__auth_free(auth);
    kcr_config_free(cfg);
}

static kcr_err run_script(const char *script)
{
    write_file("bad.sh", script, 0700);
    char yaml[1024];
    snprintf(yaml, sizeof yaml, MINIMAL "users: [{name: u, user: {exec: {command: ./bad.sh}}}]\n");
    kcr_config *cfg;
    cr_assert_eq(parse(yaml, NULL, &cfg), KCR_OK);
    kcr__auth *auth = kcr__auth_new(cfg);
    kcr__creds c;
    kcr_err err = kcr__auth_get(auth, &c);
    kcr__creds_clear(&c);
    kcr__auth_free(auth);
    kcr_config_free(cfg);
    return err;
}

Test(exec_plugin, failures_carry_exit_code_and_stderr, .init = make_dir, .fini = remove_dir)
{
    cr_assert_eq(run_script("#!/bin/sh\necho 'boom: no credentials for you' >&2\nexit 3\n"),
                 KCR_ERR_EXEC);
    cr_assert(strstr(kcr_last_error(), "status 3") != NULL, "%s", kcr_last_error());
    cr_assert(strstr(kcr_last_error(), "boom: no credentials for you") != NULL, "%s",
              kcr_last_error());
    cr_assert_eq(run_script("#!/bin/sh\necho not json\n"), KCR_ERR_EXEC);
    cr_assert(strstr(kcr_last_error(), "not a JSON object") != NULL, "%s", kcr_last_error());
    cr_assert_eq(run_script("#!/bin/sh\nprintf '{\"kind\":\"ExecCredential\",\"status\":"
                            "{\"token\":\"t\\377\"}}'\n"),
                 KCR_ERR_EXEC);
    cr_assert(strstr(kcr_last_error(), "not valid UTF-8") != NULL, "%s", kcr_last_error());
    cr_assert_eq(run_script("#!/bin/sh\necho '{\"kind\":\"ExecCredential\",\"status\":{}}'\n"),
                 KCR_ERR_EXEC);
    cr_assert(strstr(kcr_last_error(), "neither token") != NULL, "%s", kcr_last_error());
    cr_assert_eq(run_script("#!/bin/sh\nkill -9 $$\n"), KCR_ERR_EXEC);
    cr_assert(strstr(kcr_last_error(), "signal 9") != NULL, "%s", kcr_last_error());

    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             MINIMAL "users: [{name: u, user: {exec: {command: kcr-no-such-plugin,"
                     " installHint: 'install it from the docs'}}}]\n");
    kcr_config *cfg;
    cr_assert_eq(parse(yaml, NULL, &cfg), KCR_OK);
    kcr__auth *auth = kcr__auth_new(cfg);
    kcr__creds c;
    cr_assert_eq(kcr__auth_get(auth, &c), KCR_ERR_EXEC);
    cr_assert(strstr(kcr_last_error(), "install it from the docs") != NULL, "%s",
              kcr_last_error());
    kcr__auth_free(auth);
    kcr_config_free(cfg);
}

/* `s` as the body of a JSON string (newlines escaped), appended to out. */
static void json_escape_to(char *out, size_t size, const char *s)
{
    size_t n = strlen(out);
    for (; *s && n + 3 < size; s++) {
        if (*s == '\n') {
            out[n++] = '\\';
            out[n++] = 'n';
        } else {
            out[n++] = *s;
        }
    }
    out[n] = '\0';
}

/* Runs a plugin printing an ExecCredential with this certificate and key. */
static kcr_err run_cert_plugin(const char *cert, const char *key)
{
    char json[16384] = "{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":"
                       "\"ExecCredential\",\"status\":{\"clientCertificateData\":\"";
    json_escape_to(json, sizeof json, cert);
    strcat(json, "\",\"clientKeyData\":\"");
    json_escape_to(json, sizeof json, key);
    strcat(json, "\"}}\n");
    write_file("cred.json", json, 0600);
    return run_script("#!/bin/sh\ncat \"$(dirname \"$0\")/cred.json\"\n");
}

Test(exec_plugin, client_certificate_output, .init = make_dir, .fini = remove_dir)
{
    cr_assert_eq(run_cert_plugin(FAKE_CERT, FAKE_KEY), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(run_cert_plugin("CERT", "KEY"), KCR_ERR_EXEC);
    cr_assert(strstr(kcr_last_error(), "clientCertificateData is not a PEM certificate") != NULL,
              "%s", kcr_last_error());
    test_pki other;
    test_pki_leaf(&other, &ca_pki, "bob", NULL, -60, 3600);
    cr_assert_eq(run_cert_plugin(FAKE_CERT, other.key_pem), KCR_ERR_EXEC);
    cr_assert(strstr(kcr_last_error(), "clientKeyData does not match its clientCertificateData") !=
                  NULL,
              "%s", kcr_last_error());
    test_pki_free(&other);
}

static int64_t fixed_clock(void *user_data)
{
    return *(int64_t *)user_data;
}

Test(time, rfc3339_round_trip)
{
    int64_t t;
    cr_assert_eq(kcr_time_parse("2024-02-29T12:34:56Z", &t), KCR_OK);
    char buf[32];
    kcr_time_format(t, buf, sizeof buf);
    cr_assert_str_eq(buf, "2024-02-29T12:34:56Z");
    cr_assert_eq(kcr_time_parse("1970-01-01T01:00:00.123456+01:00", &t), KCR_OK);
    cr_assert_eq(t, 0);
    cr_assert_eq(kcr_time_parse("yesterday", &t), KCR_ERR_PARSE);
    cr_assert_eq(kcr_time_parse("2024-01-01T00:00:00", &t), KCR_ERR_PARSE);
    cr_assert_eq(kcr_time_parse(NULL, &t), KCR_ERR_PARSE);
    cr_assert_eq(kcr_time_parse("2024-02-29T12:34:56Z", NULL), KCR_ERR_INVALID);
    kcr_time_format(0, buf, 11); /* truncated, still terminated */
    cr_assert_str_eq(buf, "1970-01-01");
    kcr_time_format(0, NULL, 0);
}

/* A kubeconfig whose cluster "prod" has CA `ca` and user "robot" `cert`/`key`
 * (each PEM text, base64'd here; NULL: absent). */
static kcr_err parse_pem(const char *ca, const char *cert, const char *key, kcr_config **cfg)
{
    char *ca64 = ca ? b64(ca) : NULL, *cert64 = cert ? b64(cert) : NULL,
         *key64 = key ? b64(key) : NULL;
    char yaml[16384];
    snprintf(yaml, sizeof yaml,
             "clusters: [{name: prod, cluster: {server: 'https://h:1'%s%s}}]\n"
             "users: [{name: robot, user: {token: t%s%s%s%s}}]\n"
             "contexts: [{name: x, context: {cluster: prod, user: robot}}]\n"
             "current-context: x\n",
             ca ? ", certificate-authority-data: " : "", ca ? ca64 : "",
             cert ? ", client-certificate-data: " : "", cert ? cert64 : "",
             key ? ", client-key-data: " : "", key ? key64 : "");
    free(ca64);
    free(cert64);
    free(key64);
    return kcr_config_parse_kubeconfig(yaml, strlen(yaml), dir, NULL, cfg);
}

static void expect_config_error(kcr_err err, const char *needle)
{
    cr_assert_eq(err, KCR_ERR_CONFIG, "%s", kcr_last_error());
    cr_assert(strstr(kcr_last_error(), needle) != NULL, "\"%s\" not in \"%s\"", needle,
              kcr_last_error());
}

Test(kubeconfig, pem_material_is_checked_at_load, .init = make_dir, .fini = remove_dir)
{
    kcr_config *cfg = NULL;
    test_pki other_ca, stranger;
    test_pki_ca(&other_ca, "other-ca");
    test_pki_leaf(&stranger, &other_ca, "mallory", NULL, -60, 3600);

    cr_assert_eq(parse_pem(FAKE_CA, FAKE_CERT, FAKE_KEY, &cfg), KCR_OK, "%s", kcr_last_error());
    kcr_config_free(cfg);
    /* a bundle of several CAs is fine */
    char bundle[8192];
    snprintf(bundle, sizeof bundle, "%s\n%s", FAKE_CA, other_ca.cert_pem);
    cr_assert_eq(parse_pem(bundle, NULL, NULL, &cfg), KCR_OK, "%s", kcr_last_error());
    kcr_config_free(cfg);

    expect_config_error(parse_pem("just some text\n", NULL, NULL, &cfg),
                        "certificate-authority-data of cluster \"prod\" is not a PEM certificate");
    cr_assert_null(cfg);
    expect_config_error(parse_pem("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n"
                                  "-----END CERTIFICATE-----\n",
                                  NULL, NULL, &cfg),
                        "certificate-authority-data of cluster \"prod\" is not a PEM certificate");
    expect_config_error(parse_pem(FAKE_KEY, NULL, NULL, &cfg),
                        "certificate-authority-data of cluster \"prod\" is not a PEM certificate");
    snprintf(bundle, sizeof bundle, "%s%s", FAKE_CA, FAKE_KEY);
    expect_config_error(parse_pem(bundle, NULL, NULL, &cfg),
                        "certificate-authority-data of cluster \"prod\" holds a PEM block that "
                        "is not a certificate");
    write_file("junk-ca.crt", "junk", 0600);
    expect_config_error(parse("clusters: [{name: c2, cluster: {server: 'https://h:1', "
                              "certificate-authority: junk-ca.crt}}]\n"
                              "contexts: [{name: x, context: {cluster: c2}}]\n"
                              "current-context: x\n",
                              NULL, &cfg),
                        "certificate-authority of cluster \"c2\" is not a PEM certificate");

    expect_config_error(parse_pem(NULL, "garbage", FAKE_KEY, &cfg),
                        "client-certificate-data of user \"robot\" is not a PEM certificate");
    expect_config_error(parse_pem(NULL, FAKE_CERT, "garbage", &cfg),
                        "client-key-data of user \"robot\" is not a PEM private key");
    expect_config_error(parse_pem(NULL, FAKE_CERT, stranger.key_pem, &cfg),
                        "client-key-data of user \"robot\" does not match its "
                        "client-certificate-data");
    expect_config_error(parse_pem(NULL, FAKE_CERT, NULL, &cfg), "must be given together");
    expect_config_error(parse_pem(NULL, NULL, FAKE_KEY, &cfg), "must be given together");
    cr_assert_null(cfg);
    /* the messages name entries, never key material */
    cr_assert(strstr(kcr_last_error(), "PRIVATE") == NULL, "%s", kcr_last_error());
    test_pki_free(&stranger);
    test_pki_free(&other_ca);
}

Test(time, micro_time_and_clock)
{
    char buf[32];
    kcr_time_format_micro(INT64_C(1709210096000042), buf, sizeof buf);
    cr_assert_str_eq(buf, "2024-02-29T12:34:56.000042Z");
    kcr_time_format_micro(-1, buf, sizeof buf);
    cr_assert_str_eq(buf, "1969-12-31T23:59:59.999999Z");
    int64_t fixed = 1234;
    kcr_clock c = {.now_ms = fixed_clock, .user_data = &fixed};
    cr_assert_eq(kcr_clock_now_ms(&c), 1234);
    int64_t real = kcr_clock_now_ms(NULL);
    cr_assert_gt(real, INT64_C(1700000000000), "real clock %lld", (long long)real);
}
