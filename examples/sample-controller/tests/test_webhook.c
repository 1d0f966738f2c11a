/* The sample controller's webhooks (webhook.c) served by kcr_webhook over
 * TLS on loopback: defaulting, each validation rule with its message,
 * conversion both ways, the DNS-1123 check and the webhook flags. */
#include <criterion/criterion.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../webhook.h"
#include "helpers/webhook_client.h"

static char dir[64];
static kcr_webhook_server *srv;
static wh_client *cli;

static void start(void)
{
    snprintf(dir, sizeof dir, "/tmp/kcr-sample-wh-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    cr_assert_eq(kcr_webhook_generate_certs(dir, NULL, NULL), KCR_OK, "%s", kcr_last_error());
    kcr_webhook_server_options o = {.bind_address = "127.0.0.1:0", .cert_dir = dir};
    cr_assert_eq(kcr_webhook_server_new(&o, &srv), KCR_OK);
    cr_assert_eq(sample_webhooks_register(srv), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_webhook_server_start(srv), KCR_OK, "%s", kcr_last_error());
    cli = wh_client_new(dir, kcr_webhook_server_port(srv));
}

static void stop(void)
{
    wh_client_free(cli);
    kcr_webhook_server_free(srv);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(sample_webhook, .init = start, .fini = stop, .timeout = 60);

/* POSTs an AdmissionReview creating a Foo with this spec; the answer. */
static kcr_object *admit(const char *path, const char *spec)
{
    char body[1024];
    snprintf(body, sizeof body,
             "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{"
             "\"uid\":\"u-1\",\"operation\":\"CREATE\",\"kind\":{\"group\":"
             "\"samplecontroller.k8s.io\",\"version\":\"v1alpha1\",\"kind\":\"Foo\"},"
             "\"namespace\":\"default\",\"object\":{\"apiVersion\":"
             "\"samplecontroller.k8s.io/v1alpha1\",\"kind\":\"Foo\",\"metadata\":{\"name\":"
             "\"f\",\"namespace\":\"default\"},\"spec\":{%s}}}}",
             spec);
    wh_resp r = wh_post(cli, path, body, 0, NULL);
    cr_assert_eq(r.code, 200, "%ld %s", r.code, r.body);
    kcr_object *a;
    cr_assert_eq(kcr_object_parse_any(r.body, r.len, &a), KCR_OK);
    free(r.body);
    return a;
}

#define MUTATE "/mutate-samplecontroller-k8s-io-v1alpha1-foo"
#define VALIDATE "/validate-samplecontroller-k8s-io-v1alpha1-foo"

Test(sample_webhook, replicas_default_to_one)
{
    kcr_object *a = admit(MUTATE, "\"deploymentName\":\"web\"");
    const char *b64 = kcr_value_string(kcr_object_get(a, "response.patch"), NULL);
    cr_assert_not_null(b64);
    unsigned char patch[512];
    int n = EVP_DecodeBlock(patch, (const unsigned char *)b64, (int)strlen(b64));
    cr_assert_gt(n, 0);
    while (n > 0 && patch[n - 1] == '\0')
        n--;
    cr_assert_eq(strncmp((const char *)patch,
                         "[{\"op\":\"add\",\"path\":\"/spec/replicas\",\"value\":1}]", (size_t)n),
                 0, "%.*s", n, patch);
    kcr_object_unref(a);
    a = admit(MUTATE, "\"deploymentName\":\"web\",\"replicas\":0");
    cr_assert_eq(kcr_value_get_type(kcr_object_get(a, "response.patch")), KCR_VALUE_ABSENT,
                 "0 is a value, not a missing field");
    kcr_object_unref(a);
}

static void denied(const char *spec, const char *why)
{
    kcr_object *a = admit(VALIDATE, spec);
    cr_assert_not(kcr_value_bool(kcr_object_get(a, "response.allowed")), "%s allowed", spec);
    cr_assert_eq(kcr_value_int(kcr_object_get(a, "response.status.code")), 403);
    const char *m = kcr_value_string(kcr_object_get(a, "response.status.message"), NULL);
    cr_assert(m && strstr(m, why), "%s: %s", spec, m);
    kcr_object_unref(a);
}

Test(sample_webhook, validation_rules_and_their_messages)
{
    kcr_object *a = admit(VALIDATE, "\"deploymentName\":\"web-1.example\",\"replicas\":10");
    cr_assert(kcr_value_bool(kcr_object_get(a, "response.allowed")));
    kcr_object_unref(a);
    a = admit(VALIDATE, "\"deploymentName\":\"web\",\"replicas\":0");
    cr_assert(kcr_value_bool(kcr_object_get(a, "response.allowed")));
    kcr_object_unref(a);
    denied("\"deploymentName\":\"web\",\"replicas\":11", "from 0 to 10");
    denied("\"deploymentName\":\"web\",\"replicas\":-1", "from 0 to 10");
    denied("\"deploymentName\":\"web\",\"replicas\":\"3\"", "from 0 to 10");
    denied("\"deploymentName\":\"Web_1\"", "\"Web_1\" is not a DNS-1123 subdomain");
    denied("\"replicas\":1", "\"\" is not a DNS-1123 subdomain");
}

Test(sample_webhook, conversion_renames_the_field_both_ways)
{
    const char *body =
        "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\",\"request\":"
        "{\"uid\":\"c-1\",\"desiredAPIVersion\":\"samplecontroller.k8s.io/v1beta1\",\"objects\":"
        "[{\"apiVersion\":\"samplecontroller.k8s.io/v1alpha1\",\"kind\":\"Foo\",\"metadata\":"
        "{\"name\":\"f\"},\"spec\":{\"deploymentName\":\"web\",\"replicas\":2}}]}}";
    wh_resp r = wh_post(cli, "/convert", body, 0, NULL);
    cr_assert_eq(r.code, 200);
    kcr_object *a;
    cr_assert_eq(kcr_object_parse_any(r.body, r.len, &a), KCR_OK);
    free(r.body);
    kcr_value o = kcr_object_get(a, "response.convertedObjects[0]");
    cr_assert_str_eq(kcr_value_string(kcr_value_get(o, "apiVersion"), NULL),
                     "samplecontroller.k8s.io/v1beta1");
    cr_assert_str_eq(kcr_value_string(kcr_value_get(o, "spec.deploymentRef"), NULL), "web");
    cr_assert_eq(kcr_value_get_type(kcr_value_get(o, "spec.deploymentName")), KCR_VALUE_ABSENT);
    cr_assert_eq(kcr_value_int(kcr_value_get(o, "spec.replicas")), 2);
    kcr_object_unref(a);
}

Test(sample_webhook_pure, dns1123_subdomains)
{
    cr_assert(sample_dns1123_subdomain("a"));
    cr_assert(sample_dns1123_subdomain("web-1.example.com"));
    cr_assert_not(sample_dns1123_subdomain(""));
    cr_assert_not(sample_dns1123_subdomain("-web"));
    cr_assert_not(sample_dns1123_subdomain("web-"));
    cr_assert_not(sample_dns1123_subdomain("Web"));
    cr_assert_not(sample_dns1123_subdomain("we_b"));
    char long_name[300];
    memset(long_name, 'a', 254);
    long_name[254] = '\0';
    cr_assert_not(sample_dns1123_subdomain(long_name));
    long_name[253] = '\0';
    cr_assert(sample_dns1123_subdomain(long_name));
}

Test(sample_webhook_pure, webhook_flags_leave_the_others_in_argv)
{
    char *argv[] = {"sample-controller", "--webhook-cert-dir", "/certs", "-v",
                    "--webhook-bind-address=:9444", "--workers", "3", NULL};
    int argc = 7;
    sample_webhook_cli flags = {.bind_address = ":9443"};
    cr_assert_eq(sample_webhook_flags(&argc, argv, &flags), 0);
    cr_assert_str_eq(flags.cert_dir, "/certs");
    cr_assert_str_eq(flags.bind_address, ":9444");
    cr_assert_eq(argc, 4);
    cr_assert_str_eq(argv[1], "-v");
    cr_assert_str_eq(argv[2], "--workers");
    cr_assert_str_eq(argv[3], "3");
    cr_assert_null(argv[4]);
    char *bad[] = {"sample-controller", "--webhook-cert-dir", NULL};
    argc = 2;
    cr_assert_eq(sample_webhook_flags(&argc, bad, &flags), 2);
}
