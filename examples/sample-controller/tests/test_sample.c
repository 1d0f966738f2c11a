/* Unit tests of the sample controller's reconciler (../sample.c) on the
 * reconciler test kit: sample-controller's own four tests (creates the
 * Deployment, does nothing when in sync, updates the Deployment, not
 * controlled by us) and the rest of its behaviour. The CRD is the one in
 * ../manifests, the declaration the one main.c runs on a manager; and the
 * --reconcile-log wrapper (../reconcile_log.c). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <kcr/fake.h>
#include <kcr/testkit.h>

#include "../reconcile_log.h"
#include "../sample.h"

static kcr_testkit *tk;
static kcr_controller *ctl;
static char logged[4096];

static void capture(kcr_log_level level, const char *module, const char *message, void *ud)
{
    (void)ud;
    size_t n = strlen(logged);
    snprintf(logged + n, sizeof logged - n, "%s %s: %s\n", kcr_log_level_name(level), module,
             message);
}

static const sample_config cfg = {.log = capture, .level = KCR_LOG_DEBUG};

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    cr_assert(f, "cannot open %s", path);
    static char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static void setup(void)
{
    logged[0] = '\0';
    cr_assert_eq(kcr_testkit_new(NULL, &tk), KCR_OK);
    cr_assert_eq(kcr_testkit_seed(tk, slurp(SAMPLE_MANIFESTS "/crd.yaml")), KCR_OK, "%s",
                 kcr_last_error());
    kcr_controller_options opts;
    sample_controller(&opts, &cfg);
    cr_assert_eq(kcr_testkit_add_controller(tk, &opts, &ctl), KCR_OK, "%s", kcr_last_error());
}

static void teardown(void)
{
    kcr_testkit_free(tk);
}

/* Seeds Foo default/<name>; replicas < 0 leaves spec.replicas out. */
static void seed_foo(const char *name, const char *deployment, int replicas)
{
    char y[512];
    int n = snprintf(y, sizeof y,
                     "apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\n"
                     "metadata: {name: %s, namespace: default}\nspec:\n  deploymentName: \"%s\"\n",
                     name, deployment);
    if (replicas >= 0)
        snprintf(y + n, sizeof y - (size_t)n, "  replicas: %d\n", replicas);
    cr_assert_eq(kcr_testkit_seed(tk, y), KCR_OK, "%s", kcr_last_error());
}

static kcr_object *get(const kcr_resource *res, const char *name)
{
    return kcr_testkit_get(tk, res, "default", name);
}

static const char *uid_of_foo(const char *name)
{
    static char uid[64];
    kcr_object *foo = get(&SAMPLE_FOOS, name);
    cr_assert(foo, "Foo %s missing", name);
    snprintf(uid, sizeof uid, "%s", kcr_object_uid(foo));
    kcr_object_unref(foo);
    return uid;
}

/* Seeds Deployment default/<name> with `replicas` and status.availableReplicas
 * `available`, controlled by the Foo `owner` (NULL: no owner). */
static void seed_deployment(const char *name, const char *owner, int replicas, int available)
{
    char refs[512] = "";
    if (owner)
        snprintf(refs, sizeof refs,
                 "  ownerReferences: [{apiVersion: samplecontroller.k8s.io/v1alpha1, kind: Foo, "
                 "name: %s, uid: \"%s\", controller: true, blockOwnerDeletion: true}]\n",
                 owner, uid_of_foo(owner));
    char y[2048];
    snprintf(y, sizeof y,
             "apiVersion: apps/v1\nkind: Deployment\n"
             "metadata:\n  name: %s\n  namespace: default\n%s"
             "spec:\n  replicas: %d\n"
             "  selector: {matchLabels: {app: nginx, controller: %s}}\n"
             "  template:\n    metadata: {labels: {app: nginx, controller: %s}}\n"
             "    spec: {containers: [{name: nginx, image: \"nginx:latest\"}]}\n"
             "status: {availableReplicas: %d}\n",
             name, refs, replicas, owner ? owner : "someone", owner ? owner : "someone",
             available);
    cr_assert_eq(kcr_testkit_seed(tk, y), KCR_OK, "%s", kcr_last_error());
}

static int64_t int_at(const kcr_resource *res, const char *name, const char *path)
{
    kcr_object *o = get(res, name);
    cr_assert(o, "%s missing", name);
    kcr_value v = kcr_object_get(o, path);
    int64_t n = kcr_value_get_type(v) == KCR_VALUE_INT ? kcr_value_int(v) : -1;
    kcr_object_unref(o);
    return n;
}

static uint64_t writes(const kcr_resource *res)
{
    kcr_fake *f = kcr_testkit_fake(tk);
    return kcr_fake_count(f, KCR_FAKE_CREATE, res) + kcr_fake_count(f, KCR_FAKE_UPDATE, res) +
           kcr_fake_count(f, KCR_FAKE_PATCH, res) + kcr_fake_count(f, KCR_FAKE_DELETE, res);
}

static kcr_result reconcile(const char *key)
{
    kcr_result r;
    cr_assert_eq(kcr_testkit_reconcile(tk, ctl, key, &r), KCR_OK, "%s", kcr_last_error());
    return r;
}

Test(sample, creates_deployment, .init = setup, .fini = teardown)
{
    seed_foo("test", "test", 1);
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    kcr_object *d = get(&SAMPLE_DEPLOYMENTS, "test");
    cr_assert(d, "no Deployment was created");
    kcr_owner_ref ref;
    cr_assert(kcr_object_controller_ref(d, &ref), "no controller reference");
    cr_assert_str_eq(ref.api_version, "samplecontroller.k8s.io/v1alpha1");
    cr_assert_str_eq(ref.kind, "Foo");
    cr_assert_str_eq(ref.name, "test");
    cr_assert_str_eq(ref.uid, uid_of_foo("test"));
    cr_assert(ref.block_owner_deletion);
    cr_assert_eq(kcr_value_int(kcr_object_get(d, "spec.replicas")), 1);
    static const char *const paths[] = {"spec.selector.matchLabels", "spec.template.metadata.labels"};
    for (int i = 0; i < 2; i++) {
        kcr_value labels = kcr_object_get(d, paths[i]);
        cr_assert_eq(kcr_value_len(labels), 2, "%s", paths[i]);
        cr_assert_str_eq(kcr_value_string(kcr_value_member(labels, "app"), NULL), "nginx");
        cr_assert_str_eq(kcr_value_string(kcr_value_member(labels, "controller"), NULL), "test");
    }
    kcr_value containers = kcr_object_get(d, "spec.template.spec.containers");
    cr_assert_eq(kcr_value_len(containers), 1);
    cr_assert_str_eq(kcr_value_string(kcr_object_get(d, "spec.template.spec.containers[0].name"), NULL),
                     "nginx");
    cr_assert_str_eq(kcr_value_string(kcr_object_get(d, "spec.template.spec.containers[0].image"), NULL),
                     "nginx:latest");
    kcr_object_unref(d);
    cr_assert_eq(int_at(&SAMPLE_FOOS, "test", "status.availableReplicas"), 0,
                 "a new Deployment has nothing available yet: 0 is written");
    cr_assert_geq(kcr_testkit_count_events(tk, "test", "Synced"), 1);
    cr_assert_eq(kcr_testkit_queue_len(tk, ctl), 0, "settled");
}

Test(sample, does_nothing_when_in_sync, .init = setup, .fini = teardown)
{
    seed_foo("test", "test", 1);
    seed_deployment("test", "test", 1, 0);
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK); /* writes status 0 */
    uint64_t foo_writes = writes(&SAMPLE_FOOS), d_writes = writes(&SAMPLE_DEPLOYMENTS);
    cr_assert_eq(reconcile("default/test").kind, KCR_RESULT_DONE);
    cr_assert_eq(writes(&SAMPLE_DEPLOYMENTS), d_writes, "the Deployment was written");
    cr_assert_eq(writes(&SAMPLE_FOOS), foo_writes, "the Foo was written");
    cr_assert_eq(kcr_testkit_count_events(tk, "test", "ErrResourceExists"), 0);
}

Test(sample, updates_deployment, .init = setup, .fini = teardown)
{
    seed_foo("test", "test", 2);
    seed_deployment("test", "test", 1, 1);
    cr_assert_eq(reconcile("default/test").kind, KCR_RESULT_DONE);
    cr_assert_eq(int_at(&SAMPLE_DEPLOYMENTS, "test", "spec.replicas"), 2);
    kcr_object *d = get(&SAMPLE_DEPLOYMENTS, "test");
    cr_assert_str_eq(kcr_object_label(d, "app") ? kcr_object_label(d, "app") : "", "",
                     "only spec.replicas changes (the seeded Deployment has no labels)");
    cr_assert_str_eq(kcr_value_string(kcr_object_get(d, "spec.template.spec.containers[0].name"), NULL),
                     "nginx");
    kcr_object_unref(d);
}

Test(sample, not_controlled_by_us, .init = setup, .fini = teardown)
{
    seed_foo("test", "test", 2);
    seed_deployment("test", NULL, 1, 1);
    uint64_t d_writes = writes(&SAMPLE_DEPLOYMENTS);
    kcr_result r = reconcile("default/test");
    cr_assert_eq(r.kind, KCR_RESULT_RETRY);
    cr_assert_eq(r.err, KCR_ERR_EXISTS);
    cr_assert_eq(kcr_testkit_count_events(tk, "test", "ErrResourceExists"), 1);
    cr_assert_eq(kcr_testkit_count_events(tk, "test", "Synced"), 0);
    cr_assert(strstr(logged, "Resource \"test\" already exists and is not managed by Foo"),
              "log: %s", logged);
    cr_assert_eq(writes(&SAMPLE_DEPLOYMENTS), d_writes, "the foreign Deployment was touched");
    cr_assert_eq(int_at(&SAMPLE_DEPLOYMENTS, "test", "spec.replicas"), 1);
    cr_assert_eq(int_at(&SAMPLE_FOOS, "test", "status.availableReplicas"), -1,
                 "no status is written");
    int64_t delay;
    uint32_t reasons;
    cr_assert(kcr_testkit_queued(tk, ctl, "default/test", &delay, &reasons), "not retried");
    cr_assert_gt(delay, 0, "retried with backoff");
    cr_assert(reasons & KCR_REASON_BIT(KCR_REASON_RETRY));
}

/* The first event's type and note, into buf ("" when none). */
static kcr_err first_event(kcr_object *ev, void *ud)
{
    char *buf = ud;
    if (!buf[0])
        snprintf(buf, 512, "%s %s: %s", kcr_value_string(kcr_object_get(ev, "type"), NULL),
                 kcr_value_string(kcr_object_get(ev, "reason"), NULL),
                 kcr_value_string(kcr_object_get(ev, "note"), NULL));
    return KCR_OK;
}

Test(sample, the_warning_names_the_deployment, .init = setup, .fini = teardown)
{
    seed_foo("test", "web", 2);
    seed_deployment("web", NULL, 1, 1);
    cr_assert_eq(reconcile("default/test").kind, KCR_RESULT_RETRY);
    const kcr_resource events = {"events.k8s.io", "v1", "events"};
    char seen[512] = "";
    cr_assert_eq(kcr_client_list(kcr_testkit_client(tk),
                                 &(kcr_request){.resource = &events, .ns = "default"}, first_event,
                                 seen, NULL),
                 KCR_OK);
    cr_assert_str_eq(seen, "Warning ErrResourceExists: Resource \"web\" already exists and is "
                           "not managed by Foo");
}

Test(sample, a_deployment_controlled_by_another_foo_is_not_taken, .init = setup, .fini = teardown)
{
    seed_foo("first", "shared", 1);
    seed_foo("second", "shared", 3);
    seed_deployment("shared", "first", 1, 1);
    cr_assert_eq(reconcile("default/second").kind, KCR_RESULT_RETRY);
    cr_assert_eq(kcr_testkit_count_events(tk, "second", "ErrResourceExists"), 1);
    kcr_object *d = get(&SAMPLE_DEPLOYMENTS, "shared");
    kcr_owner_ref ref;
    cr_assert(kcr_object_controller_ref(d, &ref));
    cr_assert_str_eq(ref.name, "first");
    cr_assert_eq(kcr_value_int(kcr_object_get(d, "spec.replicas")), 1);
    kcr_object_unref(d);
}

Test(sample, copies_available_replicas_into_the_status, .init = setup, .fini = teardown)
{
    seed_foo("test", "test", 3);
    seed_deployment("test", "test", 3, 3);
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    cr_assert_eq(int_at(&SAMPLE_FOOS, "test", "status.availableReplicas"), 3);
    cr_assert_geq(kcr_testkit_count_events(tk, "test", "Synced"), 1);
    /* the Deployment's status moves: its Foo follows */
    kcr_testkit_clear_history(tk);
    cr_assert_eq(kcr_client_patch(kcr_testkit_client(tk),
                                  &(kcr_request){.resource = &SAMPLE_DEPLOYMENTS,
                                                 .ns = "default",
                                                 .name = "test",
                                                 .patch_type = KCR_PATCH_MERGE,
                                                 .body = "{\"status\":{\"availableReplicas\":2}}",
                                                 .subresource = "status"},
                                  NULL),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    cr_assert_eq(int_at(&SAMPLE_FOOS, "test", "status.availableReplicas"), 2);
    size_t n;
    const kcr_testkit_record *h = kcr_testkit_history(tk, &n);
    cr_assert_geq(n, 1);
    cr_assert_eq(h[0].reason, KCR_REASON_OWNED, "the Deployment's change enqueued its Foo");
    cr_assert_str_eq(h[0].key, "default/test");
}

Test(sample, absent_available_replicas_is_zero, .init = setup, .fini = teardown)
{
    seed_foo("test", "test", 1);
    cr_assert_eq(kcr_testkit_seed(tk, "apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\n"
                                      "metadata: {name: stale, namespace: default}\n"
                                      "spec: {deploymentName: stale, replicas: 1}\n"
                                      "status: {availableReplicas: 4}\n"),
                 KCR_OK);
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    cr_assert_eq(int_at(&SAMPLE_FOOS, "stale", "status.availableReplicas"), 0,
                 "a Deployment without status.availableReplicas has 0 available");
}

Test(sample, empty_deployment_name_is_logged_and_dropped, .init = setup, .fini = teardown)
{
    seed_foo("nameless", "", 1);
    cr_assert_eq(kcr_testkit_seed(tk, "apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\n"
                                      "metadata: {name: specless, namespace: default}\n"),
                 KCR_OK);
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    size_t n;
    const kcr_testkit_record *h = kcr_testkit_history(tk, &n);
    cr_assert_eq(n, 2);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(h[i].result.kind, KCR_RESULT_DONE, "%s is not retried", h[i].key);
    cr_assert_eq(writes(&SAMPLE_DEPLOYMENTS), 0);
    cr_assert_eq(writes(&SAMPLE_FOOS), 0);
    cr_assert(strstr(logged, "ERROR sample-controller: default/nameless: deployment name must be "
                             "specified"),
              "log: %s", logged);
    cr_assert(strstr(logged, "default/specless: deployment name must be specified"), "log: %s",
              logged);
    cr_assert_eq(kcr_testkit_queue_len(tk, ctl), 0);
}

Test(sample, missing_replicas_creates_one_and_never_scales, .init = setup, .fini = teardown)
{
    seed_foo("test", "test", -1);
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    cr_assert_eq(int_at(&SAMPLE_DEPLOYMENTS, "test", "spec.replicas"), 1);
    /* someone scales the Deployment: a Foo without spec.replicas leaves it */
    cr_assert_eq(kcr_client_patch(kcr_testkit_client(tk),
                                  &(kcr_request){.resource = &SAMPLE_DEPLOYMENTS,
                                                 .ns = "default",
                                                 .name = "test",
                                                 .patch_type = KCR_PATCH_MERGE,
                                                 .body = "{\"spec\":{\"replicas\":5}}"},
                                  NULL),
                 KCR_OK);
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    cr_assert_eq(int_at(&SAMPLE_DEPLOYMENTS, "test", "spec.replicas"), 5);
}

Test(sample, owner_mapping_enqueues_the_controlling_foo_only, .init = setup, .fini = teardown)
{
    seed_foo("test", "test", 1);
    seed_deployment("test", "test", 1, 1);
    seed_deployment("unrelated", NULL, 1, 1);
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    cr_assert_eq(kcr_testkit_queue_len(tk, ctl), 0);
    kcr_client *c = kcr_testkit_client(tk);
    cr_assert_eq(
        kcr_client_patch(c,
                         &(kcr_request){.resource = &SAMPLE_DEPLOYMENTS,
                                        .ns = "default",
                                        .name = "unrelated",
                                        .patch_type = KCR_PATCH_MERGE,
                                        .body = "{\"metadata\":{\"labels\":{\"touched\":\"1\"}}}"},
                         NULL),
        KCR_OK);
    cr_assert_eq(kcr_testkit_sync(tk), KCR_OK);
    cr_assert_eq(kcr_testkit_queue_len(tk, ctl), 0, "a Deployment without a Foo enqueued something");
    cr_assert_eq(
        kcr_client_patch(c,
                         &(kcr_request){.resource = &SAMPLE_DEPLOYMENTS,
                                        .ns = "default",
                                        .name = "test",
                                        .patch_type = KCR_PATCH_MERGE,
                                        .body = "{\"metadata\":{\"labels\":{\"touched\":\"1\"}}}"},
                         NULL),
        KCR_OK);
    cr_assert_eq(kcr_testkit_sync(tk), KCR_OK);
    uint32_t reasons;
    cr_assert(kcr_testkit_queued(tk, ctl, "default/test", NULL, &reasons));
    cr_assert(reasons & KCR_REASON_BIT(KCR_REASON_OWNED));
    cr_assert_eq(kcr_testkit_queue_len(tk, ctl), 1);
    /* deleting the Deployment enqueues its Foo too, which creates it again */
    cr_assert_eq(
        kcr_client_delete(
            c, &(kcr_request){.resource = &SAMPLE_DEPLOYMENTS, .ns = "default", .name = "test"},
            NULL),
        KCR_OK);
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    cr_assert_eq(int_at(&SAMPLE_DEPLOYMENTS, "test", "spec.replicas"), 1, "not re-created");
}

Test(sample, status_update_conflict_is_retried, .init = setup, .fini = teardown)
{
    seed_foo("test", "test", 2);
    seed_deployment("test", "test", 2, 2);
    cr_assert_eq(
        kcr_testkit_inject_error(
            tk, &(kcr_fake_error){.verb = KCR_FAKE_UPDATE,
                                  .resource = &SAMPLE_FOOS,
                                  .ns = "default",
                                  .name = "test",
                                  .code = 409,
                                  .reason = "Conflict",
                                  .message = "the object has been modified; please apply your "
                                             "changes to the latest version and try again"}),
        KCR_OK);
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    cr_assert_eq(int_at(&SAMPLE_FOOS, "test", "status.availableReplicas"), -1);
    cr_assert_eq(kcr_testkit_count_events(tk, "test", "Synced"), 0);
    int64_t delay;
    cr_assert(kcr_testkit_queued(tk, ctl, "default/test", &delay, NULL), "not retried");
    cr_assert_gt(delay, 0);
    kcr_testkit_advance(tk, delay);
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    cr_assert_eq(int_at(&SAMPLE_FOOS, "test", "status.availableReplicas"), 2);
    cr_assert_geq(kcr_testkit_count_events(tk, "test", "Synced"), 1);
    cr_assert_eq(kcr_testkit_queue_len(tk, ctl), 0);
}

Test(sample, deployment_update_conflict_is_retried, .init = setup, .fini = teardown)
{
    seed_foo("test", "test", 4);
    seed_deployment("test", "test", 1, 1);
    cr_assert_eq(kcr_testkit_inject_error(tk, &(kcr_fake_error){.verb = KCR_FAKE_UPDATE,
                                                                .resource = &SAMPLE_DEPLOYMENTS,
                                                                .ns = "default",
                                                                .name = "test",
                                                                .code = 409,
                                                                .reason = "Conflict",
                                                                .message = "stale"}),
                 KCR_OK);
    kcr_result r = reconcile("default/test");
    cr_assert_eq(r.kind, KCR_RESULT_RETRY);
    cr_assert_eq(r.err, KCR_ERR_CONFLICT);
    cr_assert_eq(int_at(&SAMPLE_DEPLOYMENTS, "test", "spec.replicas"), 1);
    int64_t delay;
    cr_assert(kcr_testkit_queued(tk, ctl, "default/test", &delay, NULL));
    kcr_testkit_advance(tk, delay);
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    cr_assert_eq(int_at(&SAMPLE_DEPLOYMENTS, "test", "spec.replicas"), 4);
}

Test(sample, create_failure_is_retried, .init = setup, .fini = teardown)
{
    seed_foo("test", "test", 1);
    cr_assert_eq(kcr_testkit_inject_error(tk, &(kcr_fake_error){.verb = KCR_FAKE_CREATE,
                                                                .resource = &SAMPLE_DEPLOYMENTS,
                                                                .ns = "default",
                                                                .code = 500,
                                                                .reason = "InternalError",
                                                                .message = "etcd is sad"}),
                 KCR_OK);
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    cr_assert_null(get(&SAMPLE_DEPLOYMENTS, "test"));
    int64_t delay;
    cr_assert(kcr_testkit_queued(tk, ctl, "default/test", &delay, NULL));
    kcr_testkit_advance(tk, delay);
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    cr_assert_eq(int_at(&SAMPLE_DEPLOYMENTS, "test", "spec.replicas"), 1);
}

Test(sample, missing_foo_ends_the_reconcile, .init = setup, .fini = teardown)
{
    kcr_result r = reconcile("default/ghost");
    cr_assert_eq(r.kind, KCR_RESULT_DONE);
    cr_assert_eq(writes(&SAMPLE_DEPLOYMENTS), 0);
    cr_assert_eq(writes(&SAMPLE_FOOS), 0);
    cr_assert_eq(kcr_testkit_count_events(tk, NULL, NULL), 0);
    cr_assert_eq(kcr_testkit_queue_len(tk, ctl), 0);
}

Test(sample, namespace_limits_what_is_watched, .fini = teardown)
{
    cr_assert_eq(kcr_testkit_new(NULL, &tk), KCR_OK);
    cr_assert_eq(kcr_testkit_seed(tk, slurp(SAMPLE_MANIFESTS "/crd.yaml")), KCR_OK);
    cr_assert_eq(kcr_testkit_seed(tk, "apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\n"
                                      "metadata: {name: a, namespace: team-a}\n"
                                      "spec: {deploymentName: a, replicas: 1}\n---\n"
                                      "apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\n"
                                      "metadata: {name: b, namespace: team-b}\n"
                                      "spec: {deploymentName: b, replicas: 1}\n"),
                 KCR_OK);
    static const sample_config only_a = {.ns = "team-a"};
    kcr_controller_options opts;
    sample_controller(&opts, &only_a);
    cr_assert_eq(kcr_testkit_add_controller(tk, &opts, &ctl), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    kcr_object *a = kcr_testkit_get(tk, &SAMPLE_DEPLOYMENTS, "team-a", "a");
    kcr_object *b = kcr_testkit_get(tk, &SAMPLE_DEPLOYMENTS, "team-b", "b");
    cr_assert(a, "the watched namespace's Foo has no Deployment");
    cr_assert_null(b, "a Foo of another namespace was reconciled");
    kcr_object_unref(a);
}

/* --reconcile-log: every reconcile on the kit is one line "<identity>
 * <ns>/<name> <start> <end>" with start <= end, appended to what the file
 * held. */
Test(sample, reconcile_log_appends_one_line_per_reconcile, .fini = teardown)
{
    char path[] = "/tmp/sample-reconcile-log-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, "earlier line\n", 13), 13);
    close(fd);
    static sample_reconcile_log log;
    cr_assert_eq(sample_reconcile_log_open(&log, path, "replica-0"), 0);
    cr_assert_eq(kcr_testkit_new(NULL, &tk), KCR_OK);
    cr_assert_eq(kcr_testkit_seed(tk, slurp(SAMPLE_MANIFESTS "/crd.yaml")), KCR_OK);
    kcr_controller_options opts;
    sample_controller(&opts, &cfg);
    sample_reconcile_log_wrap(&log, &opts);
    cr_assert_eq(kcr_testkit_add_controller(tk, &opts, &ctl), KCR_OK, "%s", kcr_last_error());
    seed_foo("logged", "logged", 1);
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    kcr_controller_stats stats;
    kcr_controller_get_stats(ctl, &stats);
    uint64_t reconciles = stats.reconciles;
    cr_assert_gt(reconciles, 0);
    sample_reconcile_log_close(&log);
    char *text = slurp(path);
    unlink(path);
    cr_assert(!strncmp(text, "earlier line\n", 13), "the file was not appended to: %s", text);
    uint64_t lines = 0;
    for (char *line = strtok(text + 13, "\n"); line; line = strtok(NULL, "\n"), lines++) {
        char who[64], key[128];
        long long start, end;
        cr_assert_eq(sscanf(line, "%63s %127s %lld %lld", who, key, &start, &end), 4, "%s", line);
        cr_assert_str_eq(who, "replica-0");
        cr_assert_str_eq(key, "default/logged");
        cr_assert_leq(start, end, "%s", line);
    }
    cr_assert_eq(lines, reconciles, "%llu lines for %llu reconciles", (unsigned long long)lines,
                 (unsigned long long)reconciles);
}

/* An identity with a space would make the lines unreadable: refused. */
Test(sample, reconcile_log_refuses_an_identity_with_a_space)
{
    sample_reconcile_log log;
    cr_assert_eq(sample_reconcile_log_open(&log, "/dev/null", "two words"), 1);
    cr_assert_eq(log.fd, -1);
    sample_reconcile_log_close(&log);
}
