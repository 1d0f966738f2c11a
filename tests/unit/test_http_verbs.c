/* The HTTP client's REST verbs against a loopback server: request paths,
 * queries, headers and bodies of every verb, Status decoding and error
 * mapping (HTML answers too), streamed lists and watches (clean end, ERROR
 * events, truncation, a 1 GB line) and the field manager. */
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

/* ---- errors ---- */

static void errors_handler(int fd, const char *req)
{
    if (strstr(req, "/nf "))
        status_reply(fd, 404, "NotFound", "configmaps \\\"nf\\\" not found");
    else if (strstr(req, "/exists "))
        status_reply(fd, 409, "AlreadyExists", "exists");
    else if (strstr(req, "/conflict "))
        status_reply(fd, 409, "Conflict", "modified");
    else if (strstr(req, "/gone "))
        status_reply(fd, 410, "Gone", "gone");
    else if (strstr(req, "/unauth "))
        status_reply(fd, 401, "Unauthorized", "Unauthorized");
    else if (strstr(req, "/forbidden "))
        status_reply(fd, 403, "Forbidden", "user cannot get");
    else if (strstr(req, "/invalid "))
        json_reply(fd, 422,
                "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"bad\",\"reason\":"
                "\"Invalid\",\"details\":{\"name\":\"invalid\",\"kind\":\"ConfigMap\",\"causes\":"
                "[{\"reason\":\"FieldValueInvalid\",\"message\":\"Invalid value\",\"field\":"
                "\"data.x\"},{\"reason\":\"FieldValueRequired\",\"message\":\"Required\","
                "\"field\":\"data.y\"}]},\"code\":422}");
    else if (strstr(req, "/boom "))
        status_reply(fd, 500, "InternalError", "boom");
    else if (strstr(req, "/html "))
        respond(fd, 502, "text/html",
                "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>",
                NULL);
    else
        json_reply(fd, 200,
                "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"ok\","
                "\"namespace\":\"team\",\"resourceVersion\":\"7\"}}");
}

Test(http_verbs, status_decoding_and_error_mapping, .fini = stop_server)
{
    start_server(errors_handler, NULL);
    kcr_status st = {0};
    cr_assert_eq(get("ok", &st), KCR_OK);
    cr_assert_eq(st.code, 0);
    cr_assert_eq(get("nf", &st), KCR_ERR_NOT_FOUND);
    cr_assert_eq(st.code, 404);
    cr_assert_str_eq(st.reason, "NotFound");
    cr_assert_str_eq(st.message, "configmaps \"nf\" not found");
    cr_assert_str_eq(st.details.kind, "configmaps");
    cr_assert_str_eq(kcr_last_error(), "404 NotFound: configmaps \"nf\" not found");
    cr_assert_eq(get("exists", &st), KCR_ERR_EXISTS);
    cr_assert_eq(get("conflict", &st), KCR_ERR_CONFLICT);
    cr_assert_eq(get("gone", &st), KCR_ERR_GONE);
    cr_assert_eq(get("unauth", &st), KCR_ERR_UNAUTHORIZED);
    cr_assert_eq(get("forbidden", &st), KCR_ERR_FORBIDDEN);
    cr_assert_str_eq(st.message, "user cannot get");
    cr_assert_eq(get("invalid", &st), KCR_ERR_INVALID_OBJECT);
    cr_assert_eq(st.details.n_causes, 2);
    cr_assert_str_eq(st.details.causes[1].field, "data.y");
    cr_assert_str_eq(st.details.causes[0].type, "FieldValueInvalid");
    cr_assert_eq(get("boom", &st), KCR_ERR_API);
    cr_assert_eq(st.code, 500);
    cr_assert_eq(get("html", &st), KCR_ERR_API);
    cr_assert_eq(st.code, 502);
    cr_assert(strstr(st.message, "HTTP 502: <html><head><title>502 Bad Gateway") == st.message,
              "%s", st.message);
    cr_assert(strstr(st.body, "nginx") != NULL);
    cr_assert(strstr(kcr_last_error(), "502 Bad Gateway") != NULL);
    cr_assert_eq(get("ok", NULL), KCR_OK, "status may be NULL");
    kcr_status_clear(&st);
}

/* ---- request formatting ---- */

Test(http_verbs, requests_are_encoded_and_authorized, .fini = stop_server)
{
    start_server(echo_handler, NULL);
    kcr_object *o = NULL;
    const kcr_resource deploy = {"apps", "v1", "deployments"};
    cr_assert_eq(
        kcr_client_get(client, &(kcr_request){.resource = &deploy, .ns = "a b", .name = "x/y"}, &o),
        KCR_OK);
    kcr_object_unref(o);
    HAS("GET /apis/apps/v1/namespaces/a%20b/deployments/x%2Fy HTTP/1.1");
    HAS("Authorization: Bearer supersecret-token");
    char ua[128]; /* the program's name first: the apiserver's default field manager */
    snprintf(ua, sizeof ua, "User-Agent: %s/%s kcr", kcr__program_name(), KCR_VERSION_STRING);
    cr_assert_str_neq(kcr__program_name(), "kcr");
    HAS(ua);
    HAS("Accept: application/json");
    cr_assert_str_eq(kcr_client_namespace(client), "team");

    cr_assert_eq(kcr_client_list(client,
                                 &(kcr_request){.resource = &CM,
                                                .label_selector = "app in (a,b)",
                                                .field_selector = "metadata.name=x",
                                                .limit = 2,
                                                .continue_token = "c+/=",
                                                .resource_version = "0",
                                                .resource_version_match = "NotOlderThan",
                                                .timeout_ms = 8001,
                                                .metadata_only = true},
                                 NULL, NULL, NULL),
                 KCR_OK);
    HAS("GET /api/v1/configmaps?labelSelector=app%20in%20%28a%2Cb%29&fieldSelector=metadata.name%3Dx"
        "&resourceVersion=0&resourceVersionMatch=NotOlderThan&limit=2&continue=c%2B%2F%3D"
        "&timeoutSeconds=9 "); /* 8001 ms, rounded up to whole seconds */
    HAS("Accept: application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json");

    cr_assert_eq(kcr_client_watch(client,
                                  &(kcr_request){.resource = &CM,
                                                 .ns = "team",
                                                 .allow_bookmarks = true,
                                                 .send_initial_events = true,
                                                 .resource_version_match = "NotOlderThan",
                                                 .timeout_ms = 300000},
                                  NULL, NULL),
                 KCR_ERR_PARSE, "a list body is not a watch stream");
    HAS("?watch=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=300&allowWatchBookmarks=true"
        "&sendInitialEvents=true ");

    kcr_request d = {.resource = &CM,
                     .ns = "team",
                     .name = "gone",
                     .propagation_policy = "Foreground",
                     .precondition_uid = "u-1",
                     .precondition_resource_version = "42"};
    cr_assert_eq(kcr_client_delete(client, &d, &o), KCR_OK);
    cr_assert_null(o, "a Success Status is no object");
    HAS("DELETE /api/v1/namespaces/team/configmaps/gone ");
    HAS("\"propagationPolicy\":\"Foreground\"");
    HAS("\"preconditions\":{\"uid\":\"u-1\",\"resourceVersion\":\"42\"}");
    d = (kcr_request){.resource = &CM,
                      .ns = "team",
                      .name = "gone",
                      .has_grace_period = true,
                      .grace_period_ms = 2500};
    cr_assert_eq(kcr_client_delete(client, &d, NULL), KCR_OK);
    HAS("\"gracePeriodSeconds\":3"); /* rounded up to whole seconds */
    d.grace_period_ms = 0;
    cr_assert_eq(kcr_client_delete(client, &d, NULL), KCR_OK);
    HAS("\"gracePeriodSeconds\":0");
    d.grace_period_ms = -1;
    cr_assert_eq(kcr_client_delete(client, &d, NULL), KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "grace period"), "%s", kcr_last_error());

    static const char *const types[] = {
        "application/json-patch+json", "application/merge-patch+json",
        "application/strategic-merge-patch+json", "application/apply-patch+yaml"};
    for (int t = 0; t < 4; t++) {
        cr_assert_eq(kcr_client_patch(client,
                                      &(kcr_request){.resource = &CM,
                                                     .ns = "team",
                                                     .name = "p",
                                                     .patch_type = (kcr_patch_type)t,
                                                     .body = t == 0 ? "[]" : "{}",
                                                     .field_manager = "kcr-test",
                                                     .force = true},
                                      NULL),
                     KCR_OK);
        char ct[128];
        snprintf(ct, sizeof ct, "Content-Type: %s", types[t]);
        HAS(ct);
        HAS("PATCH /api/v1/namespaces/team/configmaps/p?fieldManager=kcr-test");
    }
    HAS("fieldManager=kcr-test&force=true ");
    cr_assert_eq(
        kcr_client_update(
            client,
            &(kcr_request){.resource = &CM,
                           .subresource = "status",
                           .body = "{\"metadata\":{\"name\":\"s\",\"namespace\":\"team\"}}"},
            NULL),
        KCR_OK);
    char fm[128]; /* writes without a field manager get the program's name */
    snprintf(fm, sizeof fm, "PUT /api/v1/namespaces/team/configmaps/s/status?fieldManager=%s ",
             kcr__program_name());
    HAS(fm);
    cr_assert_eq(kcr_client_create(client,
                                   &(kcr_request){.resource = &CM,
                                                  .ns = "team",
                                                  .body = "{\"metadata\":{\"name\":\"n\"}}"},
                                   NULL),
                 KCR_OK);
    snprintf(fm, sizeof fm, "POST /api/v1/namespaces/team/configmaps?fieldManager=%s ",
             kcr__program_name());
    HAS(fm);
    HAS("{\"metadata\":{\"name\":\"n\"}}");
    cr_assert_eq(
        kcr_client_create(client,
                          &(kcr_request){.resource = &CM, .ns = "team", .body = "{not json"}, NULL),
        KCR_ERR_INVALID);
}

/* ---- streaming ---- */

static void chunked_list(int fd, const char *req)
{
    chunked_head(fd, "application/json");
    const char *parts[] = {"{\"kind\":\"ConfigMapList\",\"metadata\":{\"resourceVersion\":\"9\",\"contin",
                           "ue\":\"next\"},\"items\":[{\"metadata\":{\"name\":\"a\"}},",
                           "{\"metadata\":{\"name\":\"b\"}}", "]}"};
    for (int i = 0; i < 4; i++) {
        send_chunk(fd, parts[i], strlen(parts[i]));
        nap_ms(20);
    }
    send_all(fd, "0\r\n\r\n", 5);
}

static kcr_err count_item(kcr_object *o, void *ud)
{
    (*(int *)ud)++;
    return KCR_OK;
}

Test(http_verbs, streamed_list, .fini = stop_server)
{
    start_server(chunked_list, NULL);
    int n = 0;
    kcr_list_meta meta = {0};
    cr_assert_eq(kcr_client_list(client, &(kcr_request){.resource = &CM, .ns = "team"}, count_item,
                                 &n, &meta),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(n, 2);
    cr_assert_str_eq(meta.resource_version, "9");
    cr_assert_str_eq(meta.continue_token, "next");
    kcr_list_meta_clear(&meta);
}

Test(http_verbs, watch_clean_end_error_and_truncation, .fini = stop_server)
{
    start_server(watch_stream, NULL);
    struct evs e = {0};
    cr_assert_eq(watch_with("x=ok", NULL, &e, NULL), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(e.n, 2);
    cr_assert_str_eq(e.rv[0], "5");
    cr_assert_str_eq(e.rv[1], "6");
    e = (struct evs){0};
    kcr_status st = {0};
    cr_assert_eq(watch_with("x=error", NULL, &e, &st), KCR_ERR_GONE);
    cr_assert_eq(e.n, 3);
    cr_assert_eq(st.code, 410);
    cr_assert_str_eq(st.reason, "Expired");
    e = (struct evs){0};
    kcr_err te = watch_with("x=truncate", NULL, &e, NULL);
    cr_assert_eq(te, KCR_ERR_TRANSPORT, "%d %s", te, kcr_last_error());
    cr_assert_eq(e.n, 2, "events before the cut were delivered");
    cr_assert_str_not_empty(kcr_last_error());
    kcr_status_clear(&st);
}

Test(http_verbs, watch_one_gigabyte_line, .fini = stop_server, .timeout = 120)
{
    start_server(watch_stream, NULL);
    struct evs e = {0};
    cr_assert_eq(watch_with("x=huge", NULL, &e, NULL), KCR_ERR_TOO_LARGE, "%s", kcr_last_error());
    cr_assert_eq(e.n, 2);
}

Test(http_verbs, field_manager_option, .fini = stop_server)
{
    kcr_client_options o = {.field_manager = "my-controller"};
    start_server(echo_handler, &o);
    cr_assert_eq(kcr_client_patch(client,
                                  &(kcr_request){.resource = &CM,
                                                 .ns = "team",
                                                 .name = "p",
                                                 .patch_type = KCR_PATCH_APPLY,
                                                 .body = "{}"},
                                  NULL),
                 KCR_OK, "%s", kcr_last_error());
    HAS("PATCH /api/v1/namespaces/team/configmaps/p?fieldManager=my-controller ");
    cr_assert_eq(kcr_client_patch(client,
                                  &(kcr_request){.resource = &CM,
                                                 .ns = "team",
                                                 .name = "p",
                                                 .patch_type = KCR_PATCH_MERGE,
                                                 .body = "{}",
                                                 .field_manager = "per-call"},
                                  NULL),
                 KCR_OK);
    HAS("?fieldManager=per-call ");
}

/* ---- gzip: offered on reads and lists, never on watches, not when disabled ---- */

/* Whether the last request offered compressed answers. */
static bool offered_gzip(void)
{
    char r[16384];
    request(r, sizeof r);
    return strstr(r, "\r\nAccept-Encoding:") != NULL;
}

/* A GET, a LIST and a WATCH on `c`; asserts which offered gzip. */
static void expect_gzip_offered(kcr_client *c, bool on_reads)
{
    kcr_object *o = NULL;
    cr_assert_eq(kcr_client_get(c, &(kcr_request){.resource = &CM, .ns = "team", .name = "x"}, &o),
                 KCR_OK, "%s", kcr_last_error());
    kcr_object_unref(o);
    cr_assert_eq(offered_gzip(), on_reads, "GET");
    cr_assert_eq(kcr_client_list(c, &(kcr_request){.resource = &CM}, NULL, NULL, NULL), KCR_OK);
    cr_assert_eq(offered_gzip(), on_reads, "LIST");
    cr_assert_eq(kcr_client_watch(c, &(kcr_request){.resource = &CM}, NULL, NULL), KCR_OK, "%s",
                 kcr_last_error());
    cr_assert_not(offered_gzip(), "WATCH: a gzipped watch is one member per flush");
}

/* Watches get a two-event stream, everything else echo_handler's answer. */
static void echo_or_stream(int fd, const char *req)
{
    if (strstr(req, "watch=true"))
        watch_stream(fd, req);
    else
        echo_handler(fd, req);
}

Test(http_verbs, compression_offered_unless_disabled, .fini = stop_server)
{
    start_server(echo_or_stream, NULL);
    expect_gzip_offered(client, true);
    kcr_client_free(client);

    kcr_client_options o = {.disable_compression = true, .allow_insecure_http = true};
    kcr_config *cfg = NULL;
    char yaml[512];
    snprintf(yaml, sizeof yaml,
             "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:%d'}}]\n"
             "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
             "users: [{name: u, user: {}}]\n"
             "current-context: x\n",
             port);
    cr_assert_eq(kcr_config_parse_kubeconfig(yaml, strlen(yaml), NULL, NULL, &cfg), KCR_OK);
    cr_assert_eq(kcr_client_new(cfg, &o, &client), KCR_OK, "%s", kcr_last_error());
    expect_gzip_offered(client, false); /* the option */
    kcr_client_free(client);
    kcr_config_free(cfg);

    snprintf(yaml, sizeof yaml,
             "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:%d', "
             "disable-compression: true}}]\n"
             "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
             "users: [{name: u, user: {}}]\n"
             "current-context: x\n",
             port);
    cr_assert_eq(kcr_config_parse_kubeconfig(yaml, strlen(yaml), NULL, NULL, &cfg), KCR_OK);
    o.disable_compression = false;
    cr_assert_eq(kcr_client_new(cfg, &o, &client), KCR_OK, "%s", kcr_last_error());
    expect_gzip_offered(client, false); /* the kubeconfig's cluster */
    kcr_config_free(cfg); /* the client keeps a copy; stop_server frees the client */
}

/* ---- writes are sent once ---- */

/* ---- delete: the DeleteOptions body and the two kinds of answer ---- */

static void delete_handler(int fd, const char *req)
{
    if (strstr(req, "/pending "))
        json_reply(fd, 200,
                   "{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"pending\",\"namespace\":"
                   "\"team\",\"finalizers\":[\"f\"],\"deletionTimestamp\":\"2026-01-01T00:00:00Z\"}}");
    else if (strstr(req, "/noname "))
        json_reply(fd, 200, "{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"\"}}");
    else if (strstr(req, "/garbage "))
        json_reply(fd, 200, "not json");
    else
        json_reply(fd, 200, "{\"kind\":\"Status\",\"status\":\"Success\",\"code\":200}");
}

Test(http_verbs, delete_body_and_answers, .fini = stop_server)
{
    start_server(delete_handler, NULL);
    kcr_object *o = NULL;
    cr_assert_eq(kcr_client_delete(client,
                                   &(kcr_request){.resource = &CM,
                                                  .ns = "team",
                                                  .name = "pending",
                                                  .has_grace_period = true,
                                                  .grace_period_ms = 0,
                                                  .dry_run = true},
                                   &o),
                 KCR_OK, "%s", kcr_last_error());
    HAS("{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\",\"gracePeriodSeconds\":0,"
        "\"dryRun\":[\"All\"]}");
    cr_assert_not_null(o, "a deletion pending on a finalizer answers with the object");
    cr_assert_str_eq(kcr_object_name(o), "pending");
    cr_assert(kcr_object_is_deleting(o));
    kcr_object_unref(o);

    o = NULL;
    cr_assert_eq(kcr_client_delete(
                     client, &(kcr_request){.resource = &CM, .ns = "team", .name = "gone"}, &o),
                 KCR_OK);
    HAS("{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\"}");
    cr_assert_null(o, "a Success Status is no object");
    cr_assert_eq(kcr_client_delete(
                     client, &(kcr_request){.resource = &CM, .ns = "team", .name = "garbage"}, &o),
                 KCR_OK);
    cr_assert_null(o, "an answer that is no object is ignored");
    cr_assert_eq(kcr_client_delete(
                     client, &(kcr_request){.resource = &CM, .ns = "team", .name = "noname"}, &o),
                 KCR_ERR_PARSE);
    cr_assert_null(o);
    cr_assert(strstr(kcr_last_error(), "response: ") == kcr_last_error(), "%s", kcr_last_error());

    /* options that cannot be sent: a clear error, no request */
    int before = requests();
    cr_assert_eq(kcr_client_delete(client,
                                   &(kcr_request){.resource = &CM,
                                                  .ns = "team",
                                                  .name = "x",
                                                  .propagation_policy = "Fore\xff"},
                                   NULL),
                 KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "delete options: ") == kcr_last_error(), "%s",
              kcr_last_error());
    cr_assert_eq(requests(), before);
}
