/* Discovery documents (aggregated and legacy) into the resource table, and
 * kubectl-style resolution over it. */
#include <criterion/criterion.h>
#include <string.h>

#include "client/client_impl.h"
#include "core/error.h"
#include "kcr/kcr.h"
#include "object/value.h"

static const char aggregated[] =
    "{\"kind\":\"APIGroupDiscoveryList\",\"apiVersion\":\"apidiscovery.k8s.io/v2\",\"items\":["
    "{\"metadata\":{\"name\":\"apps\"},\"versions\":[{\"version\":\"v1\",\"resources\":["
    "{\"resource\":\"deployments\",\"singularResource\":\"deployment\",\"responseKind\":"
    "{\"kind\":\"Deployment\"},\"scope\":\"Namespaced\",\"shortNames\":[\"deploy\",7]},"
    "{\"resource\":\"deployments/scale\"}]},{\"version\":\"v1beta1\",\"resources\":["
    "{\"resource\":\"deployments\",\"responseKind\":{\"kind\":\"Deployment\"},"
    "\"scope\":\"Namespaced\"}]}]}]}";

static const char legacy[] =
    "{\"kind\":\"APIResourceList\",\"groupVersion\":\"v1\",\"resources\":["
    "{\"name\":\"configmaps\",\"singularName\":\"configmap\",\"namespaced\":true,\"kind\":"
    "\"ConfigMap\",\"shortNames\":[\"cm\"]},{\"name\":\"nodes\",\"namespaced\":false,"
    "\"kind\":\"Node\"},{\"name\":\"pods/log\",\"kind\":\"Pod\"}]}";

static void parse_into(const char *json, bool agg, kcr__disc_table *t)
{
    kcr_object *doc = NULL;
    cr_assert_eq(kcr__document_parse(json, strlen(json), "discovery document", &doc), KCR_OK,
                 "%s", kcr_last_error());
    kcr_err err = agg ? kcr__disc_parse_aggregated(kcr_object_root(doc), t)
                      : kcr__disc_parse_resource_list(kcr_object_root(doc), "", "v1", true, t);
    cr_assert_eq(err, KCR_OK, "%s", kcr_last_error());
    kcr_object_unref(doc);
}

Test(discovery, documents_fill_the_table_and_resolve)
{
    kcr__disc_table t = {0};
    parse_into(aggregated, true, &t);
    parse_into(legacy, false, &t);
    cr_assert_eq(t.n, 4, "subresources are skipped: %zu", t.n);
    kcr_api_resource r;
    kcr__disc_query q = {.name = "deploy"};
    cr_assert_eq(kcr__disc_resolve(&t, &q, &r), KCR_OK, "%s", kcr_last_error());
    cr_assert_str_eq(r.group, "apps");
    cr_assert_str_eq(r.version, "v1", "the first version is preferred");
    cr_assert_str_eq(r.kind, "Deployment");
    cr_assert(r.namespaced);
    q = (kcr__disc_query){.name = "cm"};
    cr_assert_eq(kcr__disc_resolve(&t, &q, &r), KCR_OK, "%s", kcr_last_error());
    cr_assert_str_eq(r.resource, "configmaps");
    cr_assert_str_eq(r.singular, "configmap");
    q = (kcr__disc_query){.name = "nodes"};
    cr_assert_eq(kcr__disc_resolve(&t, &q, &r), KCR_OK);
    cr_assert_not(r.namespaced);
    kcr__disc_clear(&t);
}

Test(discovery, bad_documents)
{
    kcr__disc_table t = {0};
    kcr_object *doc = NULL;
    cr_assert_eq(kcr__document_parse("{\"kind\":\"APIResourceList\",\"resources\":[{\"name\":"
                                     "\"caf\xe9\"}]}",
                                     0, "discovery document /api/v1", &doc),
                 KCR_ERR_PARSE);
    cr_assert(strstr(kcr_last_error(), "discovery document /api/v1") != NULL, "%s",
              kcr_last_error());
    cr_assert(strstr(kcr_last_error(), "not valid UTF-8") != NULL, "%s", kcr_last_error());
    cr_assert_null(doc);
    cr_assert_eq(kcr__document_parse("{\"items\":7}", 0, "discovery document", &doc), KCR_OK);
    cr_assert_eq(kcr__disc_parse_aggregated(kcr_object_root(doc), &t), KCR_ERR_PARSE);
    cr_assert_eq(kcr__disc_parse_resource_list(kcr_object_root(doc), "g", "v1", true, &t),
                 KCR_ERR_PARSE);
    cr_assert(strstr(kcr_last_error(), "g/v1") != NULL, "%s", kcr_last_error());
    cr_assert_eq(t.n, 0);
    kcr_object_unref(doc);
}
