/* The HTTP client's discovery against a loopback server: the legacy
 * documents when the server ignores the aggregated Accept, and cancellation
 * of discovery on a hung server. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client/client_impl.h"
#include "core/clock.h"
#include "helpers/http_loopback.h"
#include "kcr/kcr.h"

static void legacy_discovery(int fd, const char *req)
{
    if (strstr(req, "GET /api HTTP"))
        json_reply(fd, 200, "{\"kind\":\"APIVersions\",\"versions\":[\"v1\"]}");
    else if (strstr(req, "GET /api/v1 HTTP"))
        json_reply(fd, 200,
                "{\"kind\":\"APIResourceList\",\"groupVersion\":\"v1\",\"resources\":["
                "{\"name\":\"configmaps\",\"singularName\":\"\",\"namespaced\":true,\"kind\":"
                "\"ConfigMap\",\"shortNames\":[\"cm\"]},{\"name\":\"pods/log\",\"namespaced\":true,"
                "\"kind\":\"Pod\"},{\"name\":\"nodes\",\"namespaced\":false,\"kind\":\"Node\"}]}");
    else if (strstr(req, "GET /apis HTTP"))
        json_reply(fd, 200,
                "{\"kind\":\"APIGroupList\",\"groups\":[{\"name\":\"apps\",\"versions\":["
                "{\"groupVersion\":\"apps/v1beta1\",\"version\":\"v1beta1\"},{\"groupVersion\":"
                "\"apps/v1\",\"version\":\"v1\"}],\"preferredVersion\":{\"groupVersion\":\"apps/v1\","
                "\"version\":\"v1\"}}]}");
    else if (strstr(req, "GET /apis/apps/v1 HTTP"))
        json_reply(fd, 200,
                "{\"kind\":\"APIResourceList\",\"groupVersion\":\"apps/v1\",\"resources\":["
                "{\"name\":\"deployments\",\"singularName\":\"deployment\",\"namespaced\":true,"
                "\"kind\":\"Deployment\",\"shortNames\":[\"deploy\"]}]}");
    else if (strstr(req, "GET /apis/apps/v1beta1 HTTP"))
        status_reply(fd, 503, "ServiceUnavailable", "down");
    else
        status_reply(fd, 404, "NotFound", "nope");
}

Test(http_discovery, legacy_discovery_fallback, .fini = stop_server)
{
    start_server(legacy_discovery, NULL);
    kcr_api_resource r;
    cr_assert_eq(kcr_client_resolve(client, "deploy", NULL, &r), KCR_OK, "%s", kcr_last_error());
    cr_assert_str_eq(r.group, "apps");
    cr_assert_str_eq(r.version, "v1");
    cr_assert_str_eq(r.resource, "deployments");
    HAS("Accept: application/json");
    cr_assert_eq(kcr_client_resolve(client, "ConfigMap", NULL, &r), KCR_OK);
    cr_assert_str_eq(r.resource, "configmaps");
    cr_assert_str_eq(r.singular, "configmap", "derived from the kind when the server omits it");
    cr_assert_eq(kcr_client_resolve(client, "no", NULL, &r), KCR_ERR_NOT_FOUND,
                 "short names come only from the server");
    cr_assert_eq(kcr_client_resolve(client, "nodes", NULL, &r), KCR_OK);
    cr_assert_not(r.namespaced);
    cr_assert_eq(kcr_client_resolve_kind(client, &(kcr_gvk){"apps", NULL, "Deployment"}, NULL, &r),
                 KCR_OK);
    cr_assert_eq(kcr_client_resolve(client, "pods", NULL, &r), KCR_ERR_NOT_FOUND,
                 "subresources are not resources");
}

/* ---- aggregated discovery, and documents that are not discovery ---- */

static void aggregated_discovery(int fd, const char *req)
{
    bool aggregated = strstr(req, "as=APIGroupDiscoveryList") != NULL;
    if (strstr(req, "GET /api HTTP") && aggregated)
        json_reply(fd, 200,
                   "{\"kind\":\"APIGroupDiscoveryList\",\"items\":[{\"metadata\":{\"name\":\"\"},"
                   "\"versions\":[{\"version\":\"v1\",\"resources\":[{\"resource\":\"configmaps\","
                   "\"singularResource\":\"configmap\",\"responseKind\":{\"kind\":\"ConfigMap\"},"
                   "\"scope\":\"Namespaced\",\"shortNames\":[\"cm\"]}]}]}]}");
    else if (strstr(req, "GET /apis HTTP") && aggregated)
        json_reply(fd, 200,
                   "{\"kind\":\"APIGroupDiscoveryList\",\"items\":[{\"metadata\":{\"name\":"
                   "\"apps\"},\"versions\":[{\"version\":\"v1\",\"resources\":[{\"resource\":"
                   "\"deployments\",\"responseKind\":{\"kind\":\"Deployment\"},\"scope\":"
                   "\"Namespaced\",\"shortNames\":[\"deploy\"]},{\"resource\":\"deployments/scale\","
                   "\"responseKind\":{\"kind\":\"Scale\"},\"scope\":\"Namespaced\"}]}]}]}");
    else
        status_reply(fd, 404, "NotFound", "nope");
}

Test(http_discovery, aggregated, .fini = stop_server)
{
    start_server(aggregated_discovery, NULL);
    int before = requests();
    kcr_api_resource r;
    cr_assert_eq(kcr_client_resolve(client, "deploy", NULL, &r), KCR_OK, "%s", kcr_last_error());
    cr_assert_str_eq(r.group, "apps");
    cr_assert_str_eq(r.version, "v1");
    cr_assert_str_eq(r.resource, "deployments");
    cr_assert(r.namespaced);
    HAS("Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
        "application/json");
    int fetched = requests();
    cr_assert_eq(fetched - before, 2, "aggregated discovery is two requests, not the legacy walk");
    cr_assert_eq(kcr_client_resolve(client, "cm", NULL, &r), KCR_OK);
    cr_assert_str_eq(r.kind, "ConfigMap");
    cr_assert_str_eq(r.singular, "configmap");
    cr_assert_eq(requests(), fetched, "answered from the cached table");
    cr_assert_eq(kcr_client_resolve(client, "deployments/scale", NULL, &r), KCR_ERR_NOT_FOUND,
                 "subresources are not resources");
}

static void not_discovery(int fd, const char *req)
{
    if (strstr(req, "GET /api HTTP"))
        json_reply(fd, 200, "[\"not\", \"an object\"]");
    else
        json_reply(fd, 200, "{\"kind\":\"APIGroupList\"");
}

Test(http_discovery, documents_that_are_not_discovery, .fini = stop_server)
{
    start_server(not_discovery, NULL);
    kcr_api_resource r;
    cr_assert_eq(kcr_client_resolve(client, "cm", NULL, &r), KCR_ERR_PARSE);
    cr_assert(strstr(kcr_last_error(), "/api") != NULL, "names the document: %s",
              kcr_last_error());
}

/* ---- a server that accepts and never answers ---- */

typedef struct resolve_call {
    bool by_kind;
    kcr_cancel *cancel;
    kcr_err err;
} resolve_call;

static void *run_resolve(void *arg)
{
    resolve_call *r = arg;
    kcr_api_resource ar;
    r->err = r->by_kind ? kcr_client_resolve_kind(client, &(kcr_gvk){"apps", NULL, "Deployment"},
                                                  &(kcr_resolve_options){.cancel = r->cancel}, &ar)
                        : kcr_client_resolve(client, "deploy",
                                             &(kcr_resolve_options){.cancel = r->cancel}, &ar);
    return NULL;
}

Test(http_discovery, discovery_cancels_on_a_hung_server, .fini = stop_server, .timeout = 60)
{
    start_server(hang, NULL);
    for (int by_kind = 0; by_kind < 2; by_kind++) {
        resolve_call r = {.by_kind = by_kind};
        cr_assert_eq(kcr_cancel_new(&r.cancel), KCR_OK);
        int before = requests();
        pthread_t t;
        pthread_create(&t, NULL, run_resolve, &r);
        int64_t deadline = kcr__now_ns() + 10 * KCR_NS_PER_S;
        while (requests() == before && kcr__now_ns() < deadline)
            nap_ms(5);
        cr_assert_gt(requests(), before, "discovery never reached the server");
        int64_t t0 = kcr__now_ns();
        kcr_cancel_trigger(r.cancel);
        pthread_join(t, NULL);
        int64_t took = kcr__now_ns() - t0;
        cr_assert_eq(r.err, KCR_ERR_CANCELED, "%s", kcr_strerror(r.err));
        cr_assert_lt(took, KCR_NS_PER_S, "canceled after %lld ms",
                     (long long)(took / KCR_NS_PER_MS));
        /* a triggered token refuses before any request */
        before = requests();
        kcr_api_resource ar;
        cr_assert_eq(
            kcr_client_resolve(client, "cm", &(kcr_resolve_options){.cancel = r.cancel}, &ar),
            KCR_ERR_CANCELED);
        cr_assert_eq(requests(), before);
        kcr_cancel_free(r.cancel);
        stop_server();
        start_server(hang, NULL);
    }
}

