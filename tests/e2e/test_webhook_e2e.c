/* End-to-end: kcr_webhook called by testenv's real kube-apiserver over TLS
 * on 127.0.0.1 with the caBundle of kcr_webhook_generate_certs. A CRD of its
 * own (foos.webhooktest.kcr.io, v1alpha1 stored, v1beta1 with
 * spec.deploymentName renamed spec.deploymentRef, converted by the webhook)
 * and webhook configurations named per process. Checks: an invalid Foo
 * refused with the webhook's message (client and kubectl), defaulting by JSON
 * Patch, conversion both ways, dry-run, a certificate rotation during a
 * stream of writes, handler deadlines answered by policy within the
 * apiserver's timeout, and a connection flood plus a slow client not
 * stopping the apiserver's calls.
 *
 * With KCR_WEBHOOK_RECORD=<dir>, the review bodies of objects labelled
 * kcr-fixture=<name> are written to <dir>/<name>.json (the conversion one
 * through the server's observer): that is how tests/fixtures/webhook was
 * recorded. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "e2e/e2e_lib.h"
#include "kcr/webhook.h"

#define GROUP "webhooktest.kcr.io"
static const kcr_resource CRDS = {"apiextensions.k8s.io", "v1", "customresourcedefinitions"};
static const kcr_resource VWC = {"admissionregistration.k8s.io", "v1",
                                 "validatingwebhookconfigurations"};
static const kcr_resource MWC = {"admissionregistration.k8s.io", "v1",
                                 "mutatingwebhookconfigurations"};
static const kcr_resource FOOS = {GROUP, "v1alpha1", "foos"};
static const kcr_resource FOOS_BETA = {GROUP, "v1beta1", "foos"};

static kcr_client *client;
static kcr_webhook_server *srv;
static char ns[96], dir[64], cfg_name[64];
static char *bundle;
static atomic_int dry_runs;

/* ---- the webhook's handlers ---- */

static kcr_err validate(const kcr_admission_request *req, kcr_admission_response *resp, void *ud)
{
    (void)ud;
    if (req->dry_run)
        atomic_fetch_add(&dry_runs, 1);
    if (req->operation == KCR_ADMISSION_DELETE)
        return KCR_OK;
    int64_t r = kcr_value_int(kcr_object_get(req->object, "spec.replicas"));
    if (r < 0 || r > 10)
        return kcr_admission_deny(resp, 0, "spec.replicas must be between 0 and 10");
    return KCR_OK;
}

static kcr_err mutate(const kcr_admission_request *req, kcr_admission_response *resp, void *ud)
{
    (void)ud;
    if (kcr_value_get_type(kcr_object_get(req->object, "spec.replicas")) != KCR_VALUE_ABSENT)
        return KCR_OK;
    kcr_object_edit *e;
    kcr_err err = kcr_admission_edit(resp, &e);
    return err ? err : kcr_object_edit_set_int(e, "spec.replicas", 1);
}

static kcr_err sleepy(const kcr_admission_request *req, kcr_admission_response *resp, void *ud)
{
    (void)req, (void)resp, (void)ud;
    sleep_ms(8000);
    return KCR_OK;
}

static kcr_err rename_field(const kcr_object *in, kcr_object_edit *out, const char *from, const char *to)
{
    kcr_value v = kcr_object_get(in, from);
    if (kcr_value_get_type(v) == KCR_VALUE_ABSENT)
        return KCR_OK;
    kcr_err err = kcr_object_edit_delete(out, from);
    return err ? err : kcr_object_edit_set_value(out, to, v);
}

static kcr_err beta_to_alpha(const kcr_object *in, kcr_object_edit *out, void *ud)
{
    (void)ud;
    return rename_field(in, out, "spec.deploymentRef", "spec.deploymentName");
}

static kcr_err alpha_to_beta(const kcr_object *in, kcr_object_edit *out, void *ud)
{
    (void)ud;
    return rename_field(in, out, "spec.deploymentName", "spec.deploymentRef");
}

/* The server's observer: with KCR_WEBHOOK_RECORD set, writes the body the
 * apiserver sent for an object labelled kcr-fixture=NAME to NAME.json, as
 * it came: the validating review (the mutating one for
 * admission-create-noreplicas), and the ConversionReview to v1alpha1 of
 * the one labelled "conversion" as conversion-to-v1alpha1.json. */
static void observe(const char *path, const char *body, size_t len, void *ud)
{
    (void)ud;
    const char *dir_out = getenv("KCR_WEBHOOK_RECORD");
    kcr_object *rev = NULL;
    if (!dir_out || kcr_object_parse_any(body, len, &rev) != KCR_OK)
        return;
    const char *name = NULL;
    kcr_value o = kcr_object_get(rev, "request.object");
    if (kcr_value_get_type(o) != KCR_VALUE_OBJECT)
        o = kcr_object_get(rev, "request.oldObject");
    if (strcmp(path, "/convert") == 0) {
        o = kcr_object_get(rev, "request.objects[0]");
        const char *to = kcr_value_string(kcr_object_get(rev, "request.desiredAPIVersion"), NULL);
        const char *fx = kcr_value_string(kcr_value_get(o, "metadata.labels.kcr-fixture"), NULL);
        if (fx && strcmp(fx, "conversion") == 0 && to && strcmp(to, GROUP "/v1alpha1") == 0)
            name = "conversion-to-v1alpha1";
    } else {
        name = kcr_value_string(kcr_value_get(o, "metadata.labels.kcr-fixture"), NULL);
        bool noreplicas = name && strcmp(name, "admission-create-noreplicas") == 0;
        if (name && (strcmp(name, "conversion") == 0 ||
                     noreplicas != (strcmp(path, "/mutate") == 0) ||
                     (!noreplicas && strcmp(path, "/validate") != 0)))
            name = NULL;
    }
    if (name) {
        char file[512];
        snprintf(file, sizeof file, "%s/%s.json", dir_out, name);
        FILE *f = fopen(file, "w");
        if (f) {
            fwrite(body, 1, len, f);
            fputc('\n', f);
            fclose(f);
        }
    }
    kcr_object_unref(rev);
}

/* ---- setup ---- */

static char *read_template(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/tests/e2e/webhook/%s", KCR_SOURCE_DIR, name);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    char *s = calloc(1, 16384);
    size_t n = fread(s, 1, 16383, f);
    fclose(f);
    s[n] = '\0';
    return s;
}

/* The template with @PORT@, @CABUNDLE@ and @NAME@ filled in (malloc'd). */
static char *manifest(const char *name)
{
    char *t = read_template(name);
    char port[16];
    snprintf(port, sizeof port, "%d", kcr_webhook_server_port(srv));
    const char *keys[] = {"@PORT@", "@CABUNDLE@", "@NAME@"};
    const char *vals[] = {port, bundle, cfg_name};
    size_t cap = strlen(t) + 8 * strlen(bundle) + 1024;
    char *out = calloc(1, cap);
    for (const char *p = t; *p;) {
        bool hit = false;
        for (int k = 0; k < 3 && !hit; k++)
            if (strncmp(p, keys[k], strlen(keys[k])) == 0) {
                strcat(out, vals[k]);
                p += strlen(keys[k]);
                hit = true;
            }
        if (!hit) {
            size_t l = strlen(out);
            out[l] = *p++;
            out[l + 1] = '\0';
        }
    }
    free(t);
    return out;
}

/* Creates, or replaces (keeping the resourceVersion), a cluster object. */
static void put(const kcr_resource *res, const char *name, const char *json)
{
    kcr_object *cur = NULL;
    kcr_err err = kcr_client_get(client, &(kcr_request){.resource = res, .name = name}, &cur);
    if (err == KCR_ERR_NOT_FOUND) {
        err = kcr_client_create(client, &(kcr_request){.resource = res, .body = json}, NULL);
    } else if (!err) {
        kcr_object *want, *next;
        cr_assert_eq(kcr_object_parse(json, 0, &want), KCR_OK);
        kcr_object_edit *e;
        kcr_object_edit_new(want, &e);
        kcr_object_edit_set_string(e, "metadata.resourceVersion",
                                   kcr_object_resource_version(cur));
        kcr_object_edit_freeze(e, &next);
        err = kcr_client_update(client, &(kcr_request){.resource = res, .object = next}, NULL);
        kcr_object_edit_free(e);
        kcr_object_unref(want);
        kcr_object_unref(next);
    }
    kcr_object_unref(cur);
    cr_assert_eq(err, KCR_OK, "%s %s: %s", res->resource, name, kcr_last_error());
}

static void setup(void)
{
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max; /* the flood test opens 1,000 connections */
    setrlimit(RLIMIT_NOFILE, &rl);
    client = e2e_client("KCR_TESTENV_KUBECONFIG");
    cr_assert(client, "no testenv client (see the message above)");
    cr_assert_eq(e2e_namespace(client, "webhook", ns, sizeof ns), KCR_OK, "%s", kcr_last_error());
    snprintf(dir, sizeof dir, "/tmp/kcr-wh-e2e-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    cr_assert_eq(kcr_webhook_generate_certs(dir, NULL, &bundle), KCR_OK, "%s", kcr_last_error());
    kcr_webhook_server_options o = {.bind_address = "127.0.0.1:0", .cert_dir = dir,
                                    .cert_poll_ms = 100, .read_timeout_ms = 3000,
                                    .max_connections = 4096, .observe = observe};
    cr_assert_eq(kcr_webhook_server_new(&o, &srv), KCR_OK, "%s", kcr_last_error());
    kcr_admission_options a[] = {
        {.path = "/validate", .type = KCR_ADMISSION_VALIDATING, .fn = validate},
        {.path = "/mutate", .type = KCR_ADMISSION_MUTATING, .fn = mutate},
        {.path = "/slow-fail", .type = KCR_ADMISSION_VALIDATING, .fn = sleepy,
         .timeout_ms = 2000},
        {.path = "/slow-ignore", .type = KCR_ADMISSION_VALIDATING, .fn = sleepy,
         .timeout_ms = 2000, .failure_policy = KCR_WEBHOOK_IGNORE}};
    for (size_t i = 0; i < 4; i++)
        cr_assert_eq(kcr_webhook_server_add_admission(srv, &a[i]), KCR_OK);
    kcr_converter conv[] = {{GROUP "/v1beta1", GROUP "/v1alpha1", beta_to_alpha},
                            {GROUP "/v1alpha1", GROUP "/v1beta1", alpha_to_beta}};
    kcr_conversion_options c = {.path = "/convert", .converters = conv, .n_converters = 2};
    cr_assert_eq(kcr_webhook_server_add_conversion(srv, &c), KCR_OK);
    cr_assert_eq(kcr_webhook_server_start(srv), KCR_OK, "%s", kcr_last_error());
    snprintf(cfg_name, sizeof cfg_name, "kcr-webhook-e2e-%d", (int)getpid());
    char *crd = manifest("crd.json"), *v = manifest("validating.json"),
         *m = manifest("mutating.json");
    put(&CRDS, "foos." GROUP, crd);
    put(&VWC, cfg_name, v);
    put(&MWC, cfg_name, m);
    free(crd);
    free(v);
    free(m);
}

static void teardown(void)
{
    kcr_client_delete(client, &(kcr_request){.resource = &VWC, .name = cfg_name}, NULL);
    kcr_client_delete(client, &(kcr_request){.resource = &MWC, .name = cfg_name}, NULL);
    kcr_webhook_server_free(srv);
    kcr_client_free(client);
    free(bundle);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

static char *foo_json(const char *api, const char *name, const char *labels, const char *spec)
{
    char *s = NULL;
    cr_assert_geq(asprintf(&s,
                           "{\"apiVersion\":\"%s\",\"kind\":\"Foo\",\"metadata\":{\"name\":\"%s\","
                           "\"labels\":{%s}},\"spec\":{%s}}",
                           api, name, labels, spec),
                  0);
    return s;
}

/* Creates a Foo, retrying while the CRD or the webhook configurations are
 * still being picked up (bounded); returns the final error. */
static kcr_err create_foo(const kcr_resource *res, const char *json, bool dry_run,
                          kcr_object **out, kcr_status *st)
{
    int64_t deadline = now_ms() + 30000;
    kcr_err err;
    while ((err = kcr_client_create(
                client, &(kcr_request){.resource = res, .ns = ns, .body = json, .dry_run = dry_run,
                                       .status = st},
                out)) == KCR_ERR_NOT_FOUND &&
           now_ms() < deadline)
        sleep_ms(200);
    return err;
}

/* Waits (bounded) until the apiserver calls the validating webhook: a Foo
 * with 11 replicas refused. The configuration takes a moment to be seen. */
static void wait_webhooks_active(void)
{
    int64_t deadline = now_ms() + 30000;
    for (int i = 0;; i++) {
        char name[32];
        snprintf(name, sizeof name, "probe-%d", i);
        char *j = foo_json(GROUP "/v1alpha1", name, "", "\"replicas\":11");
        kcr_status st = {0};
        kcr_err err = create_foo(&FOOS, j, false, NULL, &st);
        free(j);
        kcr_status_clear(&st);
        if (err == KCR_ERR_FORBIDDEN || err == KCR_ERR_INVALID_OBJECT || err == KCR_ERR_API)
            return;
        cr_assert(now_ms() < deadline, "the webhooks never became active (last: %s)",
                  kcr_strerror(err));
        sleep_ms(200);
    }
}

#define E2E_TEST(name) Test(webhook_e2e, name, .init = setup, .fini = teardown, .timeout = 240)

E2E_TEST(an_invalid_foo_is_refused_with_the_webhooks_message)
{
    wait_webhooks_active();
    char *j = foo_json(GROUP "/v1alpha1", "too-many", "\"kcr-fixture\":\"admission-create-invalid\"",
                       "\"deploymentName\":\"d\",\"replicas\":11");
    kcr_status st = {0};
    kcr_err err = create_foo(&FOOS, j, false, NULL, &st);
    free(j);
    cr_assert_neq(err, KCR_OK);
    cr_assert(strstr(st.message, "spec.replicas must be between 0 and 10"), "%s", st.message);
    cr_assert(strstr(st.message, "validate.webhooktest.kcr.io"), "%s", st.message);
    kcr_status_clear(&st);
    /* kubectl apply says the same */
    char *kc = e2e_env("KCR_TESTENV_KUBECONFIG");
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "echo '{\"apiVersion\":\"" GROUP "/v1alpha1\",\"kind\":\"Foo\",\"metadata\":"
             "{\"name\":\"kubectl-too-many\",\"namespace\":\"%s\"},\"spec\":{\"replicas\":42}}' "
             "| kubectl --kubeconfig %s apply -f - 2>&1",
             ns, kc);
    free(kc);
    FILE *p = popen(cmd, "r");
    char out[4096] = "";
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    cr_assert_neq(pclose(p), 0, "kubectl accepted it: %s", out);
    cr_assert(strstr(out, "spec.replicas must be between 0 and 10"), "%s", out);
}

E2E_TEST(a_foo_without_replicas_is_stored_with_one_and_valid_ones_pass)
{
    wait_webhooks_active();
    char *j = foo_json(GROUP "/v1alpha1", "defaulted",
                       "\"kcr-fixture\":\"admission-create-noreplicas\"",
                       "\"deploymentName\":\"d\"");
    kcr_object *o = NULL;
    cr_assert_eq(create_foo(&FOOS, j, false, &o, NULL), KCR_OK, "%s", kcr_last_error());
    free(j);
    kcr_object_unref(o);
    o = NULL;
    cr_assert_eq(kcr_client_get(client, &(kcr_request){.resource = &FOOS, .ns = ns, .name = "defaulted"},
                                &o), KCR_OK);
    cr_assert_eq(kcr_value_int(kcr_object_get(o, "spec.replicas")), 1);
    cr_assert_str_eq(kcr_value_string(kcr_object_get(o, "spec.deploymentName"), NULL), "d");
    kcr_object_unref(o);
    /* recorded: a plain valid create, an update and a delete */
    j = foo_json(GROUP "/v1alpha1", "valid", "\"kcr-fixture\":\"admission-create\"",
                 "\"deploymentName\":\"d\",\"replicas\":3");
    cr_assert_eq(create_foo(&FOOS, j, false, NULL, NULL), KCR_OK, "%s", kcr_last_error());
    free(j);
    cr_assert_eq(kcr_client_patch(client,
                                  &(kcr_request){.resource = &FOOS, .ns = ns, .name = "valid",
                                                 .patch_type = KCR_PATCH_MERGE,
                                                 .body = "{\"metadata\":{\"labels\":{"
                                                         "\"kcr-fixture\":\"admission-update\","
                                                         "\"protected\":\"yes\"}},"
                                                         "\"spec\":{\"replicas\":4}}"},
                                  NULL),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_client_patch(client,
                                  &(kcr_request){.resource = &FOOS, .ns = ns, .name = "valid",
                                                 .patch_type = KCR_PATCH_MERGE,
                                                 .body = "{\"metadata\":{\"labels\":{"
                                                         "\"kcr-fixture\":\"admission-delete\"}}}"},
                                  NULL),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_client_delete(client, &(kcr_request){.resource = &FOOS, .ns = ns, .name = "valid"},
                                   NULL), KCR_OK);
}

E2E_TEST(a_v1beta1_foo_is_stored_as_v1alpha1_and_read_back_unchanged)
{
    wait_webhooks_active();
    char *j = foo_json(GROUP "/v1beta1", "beta", "\"kcr-fixture\":\"conversion\"",
                       "\"deploymentRef\":\"my-deploy\",\"replicas\":2");
    kcr_object *created = NULL;
    cr_assert_eq(create_foo(&FOOS_BETA, j, false, &created, NULL), KCR_OK, "%s", kcr_last_error());
    free(j);
    kcr_object *alpha = NULL, *beta = NULL;
    cr_assert_eq(kcr_client_get(client, &(kcr_request){.resource = &FOOS, .ns = ns, .name = "beta"},
                                &alpha), KCR_OK);
    cr_assert_str_eq(kcr_object_api_version(alpha), GROUP "/v1alpha1");
    cr_assert_str_eq(kcr_value_string(kcr_object_get(alpha, "spec.deploymentName"), NULL),
                     "my-deploy");
    cr_assert_eq(kcr_value_get_type(kcr_object_get(alpha, "spec.deploymentRef")),
                 KCR_VALUE_ABSENT);
    cr_assert_eq(kcr_client_get(client, &(kcr_request){.resource = &FOOS_BETA, .ns = ns, .name = "beta"},
                                &beta), KCR_OK);
    cr_assert_str_eq(kcr_object_api_version(beta), GROUP "/v1beta1");
    cr_assert(kcr_value_equal(kcr_object_get(beta, "spec"), kcr_object_get(created, "spec")));
    cr_assert_str_eq(kcr_value_string(kcr_object_get(beta, "spec.deploymentRef"), NULL),
                     "my-deploy");
    kcr_object *crd = NULL;
    cr_assert_eq(kcr_client_get(client, &(kcr_request){.resource = &CRDS, .name = "foos." GROUP}, &crd), KCR_OK);
    kcr_value stored = kcr_object_get(crd, "status.storedVersions");
    cr_assert_eq(kcr_value_len(stored), 1);
    cr_assert_str_eq(kcr_value_string(kcr_value_at(stored, 0), NULL), "v1alpha1");
    kcr_object_unref(crd);
    kcr_object_unref(alpha);
    kcr_object_unref(beta);
    kcr_object_unref(created);
}

E2E_TEST(a_dry_run_calls_the_webhooks_and_changes_nothing)
{
    wait_webhooks_active();
    int before = atomic_load(&dry_runs);
    char *j = foo_json(GROUP "/v1alpha1", "dry", "\"kcr-fixture\":\"admission-create-dryrun\"",
                       "\"deploymentName\":\"d\"");
    kcr_object *o = NULL;
    cr_assert_eq(create_foo(&FOOS, j, true, &o, NULL), KCR_OK, "%s", kcr_last_error());
    free(j);
    cr_assert_eq(kcr_value_int(kcr_object_get(o, "spec.replicas")), 1, "defaulted in the answer");
    kcr_object_unref(o);
    cr_assert_gt(atomic_load(&dry_runs), before, "the handler saw dryRun");
    cr_assert_eq(kcr_client_get(client, &(kcr_request){.resource = &FOOS, .ns = ns, .name = "dry"},
                                NULL), KCR_ERR_NOT_FOUND);
}

struct stream {
    atomic_bool stop;
    int ok, failed;
    char last_error[512];
};

static void *write_stream(void *arg)
{
    struct stream *s = arg;
    for (int i = 0; !atomic_load(&s->stop); i++) {
        char name[32];
        snprintf(name, sizeof name, "stream-%d", i);
        char *j = foo_json(GROUP "/v1alpha1", name, "", "\"deploymentName\":\"d\"");
        kcr_err err = kcr_client_create(client, &(kcr_request){.resource = &FOOS, .ns = ns, .body = j}, NULL);
        free(j);
        if (err) {
            s->failed++;
            snprintf(s->last_error, sizeof s->last_error, "%s", kcr_last_error());
        } else {
            s->ok++;
        }
    }
    return NULL;
}

E2E_TEST(rotating_the_certificate_during_a_stream_of_requests_fails_none)
{
    wait_webhooks_active();
    struct stream s = {0};
    pthread_t t;
    pthread_create(&t, NULL, write_stream, &s);
    for (int i = 0; i < 4; i++) {
        sleep_ms(700);
        cr_assert_eq(kcr_webhook_generate_certs(dir, NULL, NULL), KCR_OK, "%s", kcr_last_error());
    }
    sleep_ms(700);
    atomic_store(&s.stop, true);
    pthread_join(t, NULL);
    kcr_webhook_stats st;
    kcr_webhook_server_stats(srv, &st);
    cr_assert_geq(st.cert_reloads, 1, "no reload seen");
    cr_assert_gt(s.ok, 10, "only %d writes went through", s.ok);
    cr_assert_eq(s.failed, 0, "%d of %d writes failed, last: %s", s.failed, s.ok + s.failed,
                 s.last_error);
}

E2E_TEST(a_handler_past_its_deadline_gets_the_policy_within_the_apiservers_timeout)
{
    wait_webhooks_active();
    char *j = foo_json(GROUP "/v1alpha1", "slow-fail", "\"slow\":\"fail\"", "\"replicas\":1");
    kcr_status st = {0};
    int64_t t0 = now_ms();
    kcr_err err = create_foo(&FOOS, j, false, NULL, &st);
    int64_t took = now_ms() - t0;
    free(j);
    cr_assert_neq(err, KCR_OK);
    cr_assert(strstr(st.message, "did not answer within 2000 ms"), "%s", st.message);
    cr_assert_lt(took, 5000, "answered after %lld ms, the apiserver's timeout is 5 s",
                 (long long)took);
    kcr_status_clear(&st);
    j = foo_json(GROUP "/v1alpha1", "slow-ignore", "\"slow\":\"ignore\"", "\"replicas\":1");
    t0 = now_ms();
    cr_assert_eq(create_foo(&FOOS, j, false, NULL, NULL), KCR_OK, "%s", kcr_last_error());
    took = now_ms() - t0;
    free(j);
    cr_assert_lt(took, 5000, "answered after %lld ms", (long long)took);
}

static int connect_webhook(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)kcr_webhook_server_port(srv))};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

struct slowloris {
    atomic_bool stop;
    int fd;
};

/* Half a request header, a byte every 200 ms. */
static void *slowloris(void *arg)
{
    struct slowloris *s = arg;
    while (!atomic_load(&s->stop)) {
        send(s->fd, "X", 1, MSG_NOSIGNAL);
        sleep_ms(200);
    }
    return NULL;
}

E2E_TEST(a_connection_flood_and_a_slow_client_do_not_stop_the_apiservers_calls)
{
    wait_webhooks_active();
    enum { FLOOD = 1000 };
    int *fds = calloc(FLOOD, sizeof *fds);
    int opened = 0;
    for (int i = 0; i < FLOOD; i++)
        if ((fds[i] = connect_webhook()) >= 0)
            opened++;
    cr_assert_eq(opened, FLOOD, "only %d connections opened", opened);
    struct slowloris sl = {.fd = connect_webhook()};
    pthread_t t;
    pthread_create(&t, NULL, slowloris, &sl);
    int64_t t0 = now_ms();
    for (int i = 0; i < 20; i++) {
        char name[32];
        snprintf(name, sizeof name, "flood-%d", i);
        char *j = foo_json(GROUP "/v1alpha1", name, "", "\"deploymentName\":\"d\"");
        kcr_object *o = NULL;
        cr_assert_eq(kcr_client_create(client, &(kcr_request){.resource = &FOOS, .ns = ns, .body = j}, &o), KCR_OK,
                     "write %d during the flood: %s", i, kcr_last_error());
        cr_assert_eq(kcr_value_int(kcr_object_get(o, "spec.replicas")), 1);
        kcr_object_unref(o);
        free(j);
    }
    int64_t took = now_ms() - t0;
    /* the slow client is cut off by read_timeout_ms (3 s) */
    sleep_ms(3500);
    char b;
    ssize_t n = recv(sl.fd, &b, 1, MSG_DONTWAIT);
    atomic_store(&sl.stop, true);
    pthread_join(t, NULL);
    cr_assert_eq(n, 0, "the slow client is still connected");
    /* the idle flood is closed by the same deadline, counted from each
     * connection's accept: on a busy machine (valgrind) some were accepted
     * seconds after they connected, so their deadline ends later */
    kcr_webhook_stats st;
    kcr_webhook_server_stats(srv, &st);
    for (int i = 0; i < 150 && st.closed_slow < FLOOD; i++) {
        sleep_ms(100);
        kcr_webhook_server_stats(srv, &st);
    }
    cr_assert_geq(st.closed_slow, FLOOD, "the idle flood is closed by the read deadline too "
                  "(%llu of %d within 15 s more)", (unsigned long long)st.closed_slow, FLOOD);
    for (int i = 0; i < FLOOD; i++)
        close(fds[i]);
    close(sl.fd);
    free(fds);
    fprintf(stderr, "20 writes through the webhooks during the flood took %lld ms\n",
            (long long)took);
}
