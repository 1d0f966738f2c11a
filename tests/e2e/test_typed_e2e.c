/* Generated types against testenv's real kube-apiserver:
 *   - a CRD's validate reports what the apiserver refuses, field by field
 *     and in its words (every violation kcr finds is in the server's 422
 *     message, and objects kcr finds valid are accepted);
 *   - a CRD's defaults are the apiserver's (create, read back, compare with
 *     kcr_schema_default on the same input);
 *   - a Deployment built with kcr/types is accepted as built, and one
 *     without a container name is refused with the path kcr reports. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testkit/yaml_json.h"
#include "e2e/e2e_lib.h"
#include "kcr/types/apps_v1.h"
#include "test_types.h"

static const kcr_resource CRDS = {"apiextensions.k8s.io", "v1", "customresourcedefinitions"};
static const kcr_resource WIDGETS = {TEST_V1_WIDGET_GROUP, TEST_V1_WIDGET_VERSION,
                                     TEST_V1_WIDGET_RESOURCE};
static const kcr_resource DEPLOYMENTS = {"apps", "v1", "deployments"};

static kcr_client *client;
static char ns[96];

static kcr_err create_crd(size_t index, const char *json, size_t len, void *user_data)
{
    (void)index;
    (void)user_data;
    kcr_err err = kcr_client_create(
        client, &(kcr_request){.resource = &CRDS, .body = json, .body_len = len}, NULL);
    return err == KCR_ERR_EXISTS ? KCR_OK : err;
}

static void setup(void)
{
    client = e2e_client("KCR_TESTENV_KUBECONFIG");
    cr_assert(client, "no testenv client (see the message above)");
    cr_assert_eq(e2e_namespace(client, "typed", ns, sizeof ns), KCR_OK, "%s", kcr_last_error());
    FILE *f = fopen(KCR_SOURCE_DIR "/tests/unit/kcrgen/widget-crd.yaml", "rb");
    cr_assert(f);
    static char yaml[16384];
    size_t n = fread(yaml, 1, sizeof yaml - 1, f);
    fclose(f);
    cr_assert_eq(kcr__yaml_each_json(yaml, n, create_crd, NULL), KCR_OK, "%s", kcr_last_error());
}

static void teardown(void)
{
    kcr_client_free(client);
}

/* Creates a widget; retries (bounded) while the new resource is not served. */
static kcr_err create_widget(const kcr_object *o, kcr_object **out)
{
    kcr_err err;
    int64_t deadline = now_ms() + 30000;
    while ((err = kcr_client_create(
                client, &(kcr_request){.resource = &WIDGETS, .ns = ns, .object = o}, out)) ==
               KCR_ERR_NOT_FOUND &&
           now_ms() < deadline)
        sleep_ms(100); /* the CRD's endpoint appears once it is Established */
    return err;
}

static kcr_object *parse(const char *json)
{
    kcr_object *o = NULL;
    cr_assert_eq(kcr_object_parse(json, 0, &o), KCR_OK, "%s", kcr_last_error());
    return o;
}

#define WIDGET_HEAD "{\"apiVersion\":\"test.kcr.dev/v1\",\"kind\":\"Widget\",\"metadata\":{\"name\":"

Test(typed_e2e, crd_validation_matches_the_apiserver, .init = setup, .fini = teardown)
{
    static const char *const bad[] = {
        WIDGET_HEAD "\"b0\"},\"spec\":{\"size\":11,\"mode\":\"Medium\"}}",
        WIDGET_HEAD "\"b1\"},\"spec\":{\"size\":0,\"mode\":\"Fast\",\"name\":\"Bad_Name_Too_Long\"}}",
        WIDGET_HEAD "\"b2\"},\"spec\":{\"mode\":\"Fast\",\"tags\":[\"a\",\"b\",\"c\",\"d\"],"
                    "\"containers\":[{\"image\":\"x\"}]}}",
        WIDGET_HEAD "\"b3\"},\"spec\":{\"size\":\"3\",\"mode\":\"Fast\",\"name\":\"\"}}",
        WIDGET_HEAD "\"b4\"},\"spec\":{\"size\":2,\"mode\":\"Fast\",\"name\":\"9abc\","
                    "\"limits\":{\"cpu\":{\"max\":\"x\"}}}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        kcr_object *o = parse(bad[i]);
        kcr_violations v = {0};
        cr_assert_eq(test_v1_Widget_validate(o, &v), KCR_ERR_INVALID, "case %zu", i);
        cr_assert_gt(v.n, 0);
        kcr_err err = create_widget(o, NULL);
        cr_assert_eq(err, KCR_ERR_INVALID_OBJECT, "case %zu: the server took it (%s)", i,
                     kcr_strerror(err));
        char *server = strdup(kcr_last_error());
        for (size_t j = 0; j < v.n; j++) {
            char want[1024];
            snprintf(want, sizeof want, "%s: %s", v.items[j].field, v.items[j].detail);
            cr_expect(strstr(server, want) != NULL, "case %zu: kcr says \"%s\"; the server: %s", i,
                      want, server);
        }
        free(server);
        kcr_violations_free(&v);
        kcr_object_unref(o);
    }
    /* what kcr finds valid, the server accepts */
    kcr_object *good = parse(WIDGET_HEAD "\"g0\"},\"spec\":{\"size\":10,\"mode\":\"in-place\","
                                         "\"name\":\"a-1\",\"port\":\"http\",\"cpu\":\"500m\","
                                         "\"tags\":[\"a\"],\"note\":null,\"extra\":{\"x\":[1]}}}");
    cr_assert_eq(test_v1_Widget_validate(good, NULL), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(create_widget(good, NULL), KCR_OK, "%s", kcr_last_error());
    kcr_object_unref(good);
}

Test(typed_e2e, crd_defaults_match_the_apiserver, .init = setup, .fini = teardown)
{
    kcr_object *in = parse(WIDGET_HEAD "\"d0\"},\"spec\":{\"size\":1,\"mode\":\"Fast\","
                                       "\"ratio\":null,\"template\":{},\"containers\":[{\"name\":"
                                       "\"a\"},{\"name\":\"b\",\"image\":\"mine\"}]}}");
    kcr_object *stored = NULL, *mine = NULL;
    cr_assert_eq(create_widget(in, &stored), KCR_OK, "%s", kcr_last_error());
    kcr_object_edit *e = NULL;
    cr_assert_eq(kcr_object_edit_new(in, &e), KCR_OK);
    cr_assert_eq(test_v1_Widget_default(e), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_object_edit_freeze(e, &mine), KCR_OK);
    kcr_object_edit_free(e);
    cr_assert(kcr_value_equal(kcr_object_get(stored, "spec"), kcr_object_get(mine, "spec")),
              "server %s vs kcr %s", "spec", "spec");
    double ratio = 0;
    cr_assert_eq(test_v1_WidgetSpec_ratio(test_v1_Widget_spec(test_v1_Widget_of(stored)), &ratio),
                 KCR_FIELD_SET);
    cr_assert(ratio == 0.5);
    kcr_object_unref(stored);
    kcr_object_unref(mine);
    kcr_object_unref(in);
}

/* A Deployment of nginx built with the generated builders. */
static kcr_object *deployment(const char *name, const char *container)
{
    kcr_object_edit *e = NULL;
    cr_assert_eq(kcr_apps_v1_Deployment_new(NULL, &e), KCR_OK);
    kcr_apps_v1_DeploymentEdit d = kcr_apps_v1_Deployment_edit(e);
    kcr_meta_v1_ObjectMetaEdit_set_name(kcr_apps_v1_DeploymentEdit_metadata(d), name);
    kcr_apps_v1_DeploymentSpecEdit s = kcr_apps_v1_DeploymentEdit_spec(d);
    kcr_apps_v1_DeploymentSpecEdit_set_replicas(s, 2);
    kcr_meta_v1_LabelSelectorEdit_set_match_labels(kcr_apps_v1_DeploymentSpecEdit_selector(s),
                                                   "app", name);
    kcr_core_v1_PodTemplateSpecEdit t = kcr_apps_v1_DeploymentSpecEdit_template(s);
    kcr_meta_v1_ObjectMetaEdit_set_labels(kcr_core_v1_PodTemplateSpecEdit_metadata(t), "app",
                                          name);
    kcr_core_v1_ContainerEdit c =
        kcr_core_v1_PodSpecEdit_append_containers(kcr_core_v1_PodTemplateSpecEdit_spec(t));
    if (container)
        kcr_core_v1_ContainerEdit_set_name(c, container);
    kcr_core_v1_ContainerEdit_set_image(c, "nginx:latest");
    cr_assert_eq(kcr_core_v1_ResourceRequirementsEdit_set_requests_text(
                     kcr_core_v1_ContainerEdit_resources(c), "cpu", "0.5"),
                 KCR_OK);
    kcr_object *o = NULL;
    cr_assert_eq(kcr_object_edit_freeze(e, &o), KCR_OK, "%s", kcr_last_error());
    kcr_object_edit_free(e);
    return o;
}

Test(typed_e2e, builtin_deployment_as_built, .init = setup, .fini = teardown)
{
    kcr_object *d = deployment("web", "nginx"), *stored = NULL;
    cr_assert_eq(kcr_apps_v1_Deployment_validate(d, NULL), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_client_create(client,
                                   &(kcr_request){.resource = &DEPLOYMENTS, .ns = ns, .object = d},
                                   &stored),
                 KCR_OK, "%s", kcr_last_error());
    kcr_core_v1_Container c = kcr_core_v1_PodSpec_containers_at(
        kcr_core_v1_PodTemplateSpec_spec(
            kcr_apps_v1_DeploymentSpec_template(kcr_apps_v1_Deployment_spec(kcr_apps_v1_Deployment_of(stored)))),
        0);
    const char *cpu = NULL;
    cr_assert_eq(kcr_typed_string(kcr_value_get(kcr_core_v1_Container_resources(c).v,
                                                "requests.cpu"),
                                  &cpu),
                 KCR_FIELD_SET);
    cr_assert_str_eq(cpu, "500m", "kcr wrote the text the server keeps");
    kcr_core_v1_Container_ImagePullPolicy policy = KCR_CORE_V1_CONTAINER_IMAGE_PULL_POLICY_UNKNOWN;
    cr_assert_eq(kcr_core_v1_Container_image_pull_policy(c, &policy), KCR_FIELD_SET,
                 "the server defaulted it");
    cr_assert_eq(policy, KCR_CORE_V1_CONTAINER_IMAGE_PULL_POLICY_ALWAYS);
    kcr_object_unref(stored);
    kcr_object_unref(d);

    d = deployment("nameless", NULL);
    kcr_violations v = {0};
    cr_assert_eq(kcr_apps_v1_Deployment_validate(d, &v), KCR_ERR_INVALID);
    cr_assert_eq(v.n, 1);
    cr_assert_eq(kcr_client_create(client,
                                   &(kcr_request){.resource = &DEPLOYMENTS, .ns = ns, .object = d},
                                   NULL),
                 KCR_ERR_INVALID_OBJECT);
    char want[256];
    snprintf(want, sizeof want, "%s: %s", v.items[0].field, v.items[0].detail);
    cr_assert(strstr(kcr_last_error(), want), "kcr: %s; server: %s", want, kcr_last_error());
    kcr_violations_free(&v);
    kcr_object_unref(d);
}
