/* The built-in types kcr ships (include/kcr/types/, generated from testenv's
 * OpenAPI v3 documents): the sample controller's Deployment built and read
 * back through them, validation of required fields, a Role's rules. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "kcr/types/apps_v1.h"
#include "kcr/types/core_v1.h"
#include "kcr/types/rbac_v1.h"

/* sample-controller's newDeployment, on generated types. */
static kcr_object *new_deployment(const char *name, int32_t replicas, const char *container)
{
    kcr_object_edit *e = NULL;
    cr_assert_eq(kcr_apps_v1_Deployment_new(NULL, &e), KCR_OK);
    kcr_apps_v1_DeploymentEdit d = kcr_apps_v1_Deployment_edit(e);
    kcr_meta_v1_ObjectMetaEdit meta = kcr_apps_v1_DeploymentEdit_metadata(d);
    cr_assert_eq(kcr_meta_v1_ObjectMetaEdit_set_name(meta, name), KCR_OK);
    cr_assert_eq(kcr_meta_v1_ObjectMetaEdit_set_namespace(meta, "default"), KCR_OK);
    kcr_apps_v1_DeploymentSpecEdit spec = kcr_apps_v1_DeploymentEdit_spec(d);
    cr_assert_eq(kcr_apps_v1_DeploymentSpecEdit_set_replicas(spec, replicas), KCR_OK);
    cr_assert_eq(kcr_meta_v1_LabelSelectorEdit_set_match_labels(
                     kcr_apps_v1_DeploymentSpecEdit_selector(spec), "app", "nginx"),
                 KCR_OK);
    kcr_core_v1_PodTemplateSpecEdit tpl = kcr_apps_v1_DeploymentSpecEdit_template(spec);
    cr_assert_eq(kcr_meta_v1_ObjectMetaEdit_set_labels(kcr_core_v1_PodTemplateSpecEdit_metadata(tpl),
                                                       "app", "nginx"),
                 KCR_OK);
    kcr_core_v1_ContainerEdit c =
        kcr_core_v1_PodSpecEdit_append_containers(kcr_core_v1_PodTemplateSpecEdit_spec(tpl));
    if (container)
        cr_assert_eq(kcr_core_v1_ContainerEdit_set_name(c, container), KCR_OK);
    cr_assert_eq(kcr_core_v1_ContainerEdit_set_image(c, "nginx:latest"), KCR_OK);
    kcr_core_v1_ContainerPortEdit port = kcr_core_v1_ContainerEdit_append_ports(c);
    cr_assert_eq(kcr_core_v1_ContainerPortEdit_set_container_port(port, 80), KCR_OK);
    cr_assert_eq(kcr_core_v1_ResourceRequirementsEdit_set_limits_text(
                     kcr_core_v1_ContainerEdit_resources(c), "cpu", "0.5"),
                 KCR_OK, "written canonical, as the apiserver stores it");
    cr_assert_eq(kcr_core_v1_ResourceRequirementsEdit_set_limits_text(
                     kcr_core_v1_ContainerEdit_resources(c), "memory", "lots"),
                 KCR_ERR_PARSE);
    kcr_object *o = NULL;
    cr_assert_eq(kcr_object_edit_freeze(e, &o), KCR_OK, "%s", kcr_last_error());
    kcr_object_edit_free(e);
    return o;
}

Test(typed_builtin, deployment_round_trip)
{
    kcr_object *o = new_deployment("web", 3, "nginx");
    char *json = NULL;
    cr_assert_eq(kcr_object_to_json(o, &json, NULL), KCR_OK);
    cr_assert_str_eq(json, "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":"
                           "{\"name\":\"web\",\"namespace\":\"default\"},\"spec\":{\"replicas\":3,"
                           "\"selector\":{\"matchLabels\":{\"app\":\"nginx\"}},\"template\":"
                           "{\"metadata\":{\"labels\":{\"app\":\"nginx\"}},\"spec\":{\"containers\":"
                           "[{\"name\":\"nginx\",\"image\":\"nginx:latest\",\"ports\":[{"
                           "\"containerPort\":80}],\"resources\":{\"limits\":{\"cpu\":\"500m\"}}}]}}}}");
    free(json);
    kcr_apps_v1_DeploymentSpec spec = kcr_apps_v1_Deployment_spec(kcr_apps_v1_Deployment_of(o));
    int32_t replicas = 0;
    cr_assert_eq(kcr_apps_v1_DeploymentSpec_replicas(spec, &replicas), KCR_FIELD_SET);
    cr_assert_eq(replicas, 3);
    kcr_core_v1_PodSpec pod = kcr_core_v1_PodTemplateSpec_spec(kcr_apps_v1_DeploymentSpec_template(spec));
    cr_assert_eq(kcr_core_v1_PodSpec_containers_len(pod), 1);
    for (size_t i = 0; i < kcr_core_v1_PodSpec_containers_len(pod); i++) {
        kcr_core_v1_Container c = kcr_core_v1_PodSpec_containers_at(pod, i);
        const char *image = NULL;
        kcr_quantity cpu, half;
        char text[KCR_QUANTITY_TEXT_MAX];
        cr_assert_eq(kcr_core_v1_Container_image(c, &image), KCR_FIELD_SET);
        cr_assert_str_eq(image, "nginx:latest");
        cr_assert_eq(kcr_core_v1_ResourceRequirements_limits_get(
                         kcr_core_v1_Container_resources(c), "cpu", &cpu),
                     KCR_FIELD_SET);
        kcr_quantity_to_string(&cpu, text, sizeof text);
        cr_assert_str_eq(text, "500m");
        cr_assert_eq(kcr_quantity_parse_str("500m", &half), KCR_OK);
        cr_assert_eq(kcr_quantity_cmp(&cpu, &half), 0);
        int32_t port = 0;
        cr_assert_eq(kcr_core_v1_ContainerPort_container_port(
                         kcr_core_v1_Container_ports_at(c, 0), &port),
                     KCR_FIELD_SET);
        cr_assert_eq(port, 80);
    }
    cr_assert_eq(kcr_apps_v1_Deployment_validate(o, NULL), KCR_OK, "%s", kcr_last_error());
    kcr_object_unref(o);
}

Test(typed_builtin, validate_names_the_missing_field)
{
    kcr_object *o = new_deployment("web", 1, NULL);
    kcr_violations v = {0};
    cr_assert_eq(kcr_apps_v1_Deployment_validate(o, &v), KCR_ERR_INVALID);
    cr_assert_eq(v.n, 1);
    cr_assert_str_eq(v.items[0].field, "spec.template.spec.containers[0].name");
    cr_assert_str_eq(v.items[0].detail, "Required value");
    cr_assert_str_eq(kcr_last_error(), "Deployment.apps \"web\" is invalid: "
                                       "spec.template.spec.containers[0].name: Required value");
    kcr_violations_free(&v);
    kcr_object_unref(o);
}

Test(typed_builtin, role_rules_and_status)
{
    kcr_object *o = NULL;
    cr_assert_eq(kcr_object_parse("{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":"
                                  "\"Role\",\"metadata\":{\"name\":\"r\"},\"rules\":[{\"apiGroups\":"
                                  "[\"\"],\"resources\":[\"pods\",\"secrets\"],\"verbs\":[\"get\"]}]}",
                                  0, &o),
                 KCR_OK);
    kcr_rbac_v1_PolicyRule rule = kcr_rbac_v1_Role_rules_at(kcr_rbac_v1_Role_of(o), 0);
    cr_assert_eq(kcr_rbac_v1_PolicyRule_resources_len(rule), 2);
    const char *res = NULL;
    cr_assert_eq(kcr_rbac_v1_PolicyRule_resources_at(rule, 1, &res), KCR_FIELD_SET);
    cr_assert_str_eq(res, "secrets");
    cr_assert_eq(kcr_rbac_v1_Role_validate(o, NULL), KCR_OK, "%s", kcr_last_error());
    kcr_object_unref(o);
    /* a Deployment's status, as a controller copies it */
    cr_assert_eq(kcr_object_parse("{\"metadata\":{\"name\":\"d\"},\"status\":{\"availableReplicas\":2,"
                                  "\"conditions\":[{\"type\":\"Available\",\"status\":\"True\"}]}}",
                                  0, &o),
                 KCR_OK);
    kcr_apps_v1_DeploymentStatus st = kcr_apps_v1_Deployment_status(kcr_apps_v1_Deployment_of(o));
    int32_t avail = 0;
    cr_assert_eq(kcr_apps_v1_DeploymentStatus_available_replicas(st, &avail), KCR_FIELD_SET);
    cr_assert_eq(avail, 2);
    const char *type = NULL;
    cr_assert_eq(kcr_apps_v1_DeploymentCondition_type(kcr_apps_v1_DeploymentStatus_conditions_at(st, 0),
                                                      &type),
                 KCR_FIELD_SET);
    cr_assert_str_eq(type, "Available");
    kcr_object_unref(o);
}
