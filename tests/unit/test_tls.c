/* TLS failures in words a person understands: a loopback HTTPS server with a
 * certificate from another CA, for another host name, expired, or no TLS at
 * all behind an https:// URL. Each is KCR_ERR_TLS with its own message, is
 * not retried, and makes an informer's wait_for_sync return at once. */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/base64.h"
#include "core/clock.h"
#include "helpers/pki.h"
#include "helpers/tls_server.h"
#include "kcr/kcr.h"

static const kcr_resource CM = {"", "v1", "configmaps"};
static const char *const CM_JSON =
    "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"a\","
    "\"namespace\":\"d\",\"resourceVersion\":\"5\"}}";

static test_pki ca, other_ca;
static tls_server *server;
static kcr_config *config;
static kcr_client *client;

static void make_cas(void)
{
    test_pki_ca(&ca, "cluster-ca");
    test_pki_ca(&other_ca, "someone-elses-ca");
}

static void teardown(void)
{
    kcr_client_free(client);
    kcr_config_free(config);
    tls_server_stop(server);
    test_pki_free(&ca);
    test_pki_free(&other_ca);
}

/* Serves `leaf` (NULL: plain HTTP) and makes a client for cluster "prod"
 * trusting `ca`, optionally with a tls-server-name. */
static void serve(const test_pki *leaf, const char *tls_server_name)
{
    kcr_client_free(client);
    kcr_config_free(config);
    tls_server_stop(server);
    client = NULL;
    config = NULL;
    server = tls_server_start(leaf ? leaf->cert_pem : NULL, leaf ? leaf->key_pem : NULL, CM_JSON);
    char *ca64 = kcr__base64_encode(ca.cert_pem, strlen(ca.cert_pem));
    char yaml[8192];
    snprintf(yaml, sizeof yaml,
             "clusters: [{name: prod, cluster: {server: 'https://127.0.0.1:%d', "
             "certificate-authority-data: %s%s%s}}]\n"
             "users: [{name: u, user: {token: tls-test-token}}]\n"
             "contexts: [{name: x, context: {cluster: prod, user: u}}]\n"
             "current-context: x\n",
             tls_server_port(server), ca64, tls_server_name ? ", tls-server-name: " : "",
             tls_server_name ? tls_server_name : "");
    free(ca64);
    cr_assert_eq(kcr_config_parse_kubeconfig(yaml, strlen(yaml), NULL, NULL, &config), KCR_OK, "%s",
                 kcr_last_error());
    kcr_client_options o = {.max_retries = 3};
    cr_assert_eq(kcr_client_new(config, &o, &client), KCR_OK, "%s", kcr_last_error());
}

/* A get fails with KCR_ERR_TLS and `needle` in its message, at once (no retry). */
static void expect_tls_error(const char *needle)
{
    int64_t t0 = kcr__now_ns();
    kcr_object *o = NULL;
    cr_assert_eq(
        kcr_client_get(client, &(kcr_request){.resource = &CM, .ns = "d", .name = "a"}, &o),
        KCR_ERR_TLS, "%s", kcr_last_error());
    int64_t took = kcr__now_ns() - t0;
    cr_assert(strstr(kcr_last_error(), needle) != NULL, "\"%s\" not in \"%s\"", needle,
              kcr_last_error());
    cr_assert_null(o);
    cr_assert_eq(tls_server_answered(server), 0);
    cr_assert_lt(took, 5 * KCR_NS_PER_S, "permanent: not retried (%lld ms)",
                 (long long)(took / KCR_NS_PER_MS));
    cr_assert_str_eq(kcr_strerror(KCR_ERR_TLS), "TLS verification failed");
}

Test(tls, a_trusted_server_works, .init = make_cas, .fini = teardown)
{
    test_pki good;
    test_pki_leaf(&good, &ca, "apiserver", "IP:127.0.0.1", -60, 3600);
    serve(&good, NULL);
    kcr_object *o = NULL;
    cr_assert_eq(
        kcr_client_get(client, &(kcr_request){.resource = &CM, .ns = "d", .name = "a"}, &o), KCR_OK,
        "%s", kcr_last_error());
    cr_assert_str_eq(kcr_object_name(o), "a");
    kcr_object_unref(o);
    cr_assert_eq(tls_server_answered(server), 1);
    test_pki_free(&good);
}

Test(tls, certificate_from_another_ca, .init = make_cas, .fini = teardown)
{
    test_pki foreign;
    test_pki_leaf(&foreign, &other_ca, "apiserver", "IP:127.0.0.1", -60, 3600);
    serve(&foreign, NULL);
    expect_tls_error("the server's certificate is not signed by the certificate-authority of "
                     "cluster \"prod\"");
    test_pki_free(&foreign);
}

Test(tls, certificate_for_another_host, .init = make_cas, .fini = teardown)
{
    test_pki elsewhere;
    test_pki_leaf(&elsewhere, &ca, "apiserver", "DNS:api.elsewhere.test", -60, 3600);
    serve(&elsewhere, NULL);
    expect_tls_error("the server's certificate is not valid for the host name \"127.0.0.1\" "
                     "(cluster \"prod\"; set tls-server-name");
    /* tls-server-name is honoured: the name the certificate carries works */
    serve(&elsewhere, "api.elsewhere.test");
    kcr_object *o = NULL;
    cr_assert_eq(
        kcr_client_get(client, &(kcr_request){.resource = &CM, .ns = "d", .name = "a"}, &o), KCR_OK,
        "%s", kcr_last_error());
    kcr_object_unref(o);
    /* ... and checked: another one fails, naming it */
    serve(&elsewhere, "api.other.test");
    expect_tls_error("not valid for the host name \"api.other.test\" (cluster \"prod\", checked "
                     "against its tls-server-name");
    test_pki_free(&elsewhere);
}

Test(tls, expired_certificate, .init = make_cas, .fini = teardown)
{
    test_pki expired;
    test_pki_leaf(&expired, &ca, "apiserver", "IP:127.0.0.1", -7200, -3600);
    serve(&expired, NULL);
    expect_tls_error("the server's certificate has expired (cluster \"prod\"");
    test_pki_free(&expired);
}

Test(tls, plain_http_behind_an_https_url, .init = make_cas, .fini = teardown)
{
    serve(NULL, NULL);
    expect_tls_error("does not speak TLS: it answered in plain HTTP on an https:// URL");
}

static atomic_int errors_reported;

static void count_error(kcr_err err, const kcr_status *st, const char *message, void *ud)
{
    (void)st;
    (void)ud;
    if (err == KCR_ERR_TLS && strstr(message, "not signed by"))
        atomic_fetch_add(&errors_reported, 1);
}

Test(tls, informer_wait_for_sync_returns_early, .init = make_cas, .fini = teardown, .timeout = 60)
{
    test_pki foreign;
    test_pki_leaf(&foreign, &other_ca, "apiserver", "IP:127.0.0.1", -60, 3600);
    serve(&foreign, NULL);
    kcr_informer *inf = NULL;
    kcr_informer_options o = {
        .reflector = {.backoff_initial_ms = 20, .backoff_max_ms = 40, .on_error = count_error}};
    cr_assert_eq(kcr_informer_new(client, &CM, &o, &inf), KCR_OK);
    cr_assert_eq(kcr_informer_start(inf), KCR_OK);
    int64_t t0 = kcr__now_ns();
    kcr_err err = kcr_informer_wait_for_sync(inf, 30000, NULL);
    int64_t took = kcr__now_ns() - t0;
    cr_assert_eq(err, KCR_ERR_TLS, "%s", kcr_last_error());
    cr_assert(strstr(kcr_last_error(), "not signed by the certificate-authority of cluster "
                                       "\"prod\"") != NULL,
              "%s", kcr_last_error());
    cr_assert_lt(took, 10 * KCR_NS_PER_S, "early, not at the 30 s timeout (%lld ms)",
                 (long long)(took / KCR_NS_PER_MS));

    /* The reflector keeps trying, one request per backoff step (the client
     * does not retry a TLS failure), and reports each failure once. */
    kcr_reflector *r = kcr_informer_reflector(inf);
    kcr_reflector_stats st = {0};
    int64_t deadline = kcr__now_ns() + 20 * KCR_NS_PER_S;
    while (kcr__now_ns() < deadline) {
        kcr_reflector_get_stats(r, &st);
        if (st.failures >= 4)
            break;
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    kcr_informer_stop(inf);
    kcr_reflector_get_stats(r, &st);
    cr_assert_geq(st.failures, 4);
    /* (stop may cut one last attempt short: connected, but no failure recorded) */
    uint64_t conns = (uint64_t)tls_server_connections(server);
    cr_assert(conns >= st.failures && conns <= st.failures + 1,
              "one connection per failed attempt: %llu connections, %llu failures",
              (unsigned long long)conns, (unsigned long long)st.failures);
    cr_assert_eq((uint64_t)atomic_load(&errors_reported), st.failures);
    cr_assert(st.backoffs + 1 >= st.failures && st.backoffs <= st.failures,
              "a backoff step per failure: %llu backoffs, %llu failures",
              (unsigned long long)st.backoffs, (unsigned long long)st.failures);
    cr_assert_eq(tls_server_answered(server), 0);
    kcr_informer_free(inf);
    test_pki_free(&foreign);
}
