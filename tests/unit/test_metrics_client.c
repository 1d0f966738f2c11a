/* The client request observer and kcr_metrics_client_observer on the fake:
 * rest_client_requests_total{code,method,host="fake"} and the latency
 * histogram count every call, errors with the Status's code. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcr/fake.h"
#include "kcr/metrics.h"

static const kcr_resource CM = {"", "v1", "configmaps"};

/* Asserts that `line` (a whole line) is in the exposition of m. */
static void expect_line(kcr_metrics *m, const char *line)
{
    char *out;
    cr_assert_eq(kcr_metrics_write_text(m, &out, NULL), KCR_OK);
    char want[512];
    snprintf(want, sizeof want, "\n%s\n", line);
    cr_expect_not_null(strstr(out, want), "missing \"%s\" in:\n%s", line, out);
    free(out);
}

struct seen {
    int calls;
    char method[16], host[32];
    int code;
    double seconds;
};

static void record(const char *method, const char *host, int code, double seconds, void *ud)
{
    struct seen *s = ud;
    s->calls++;
    snprintf(s->method, sizeof s->method, "%s", method);
    snprintf(s->host, sizeof s->host, "%s", host);
    s->code = code;
    s->seconds = seconds;
}

Test(metrics_client, the_fake_reports_each_call_with_host_fake)
{
    kcr_fake *f;
    kcr_client *c;
    cr_assert_eq(kcr_fake_new(NULL, &f), KCR_OK);
    cr_assert_eq(kcr_fake_client(f, "default", &c), KCR_OK);
    struct seen s = {0};
    kcr_client_set_request_observer(c, record, &s);

    const char *cm = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
                     "\"metadata\":{\"name\":\"a\",\"namespace\":\"default\"}}";
    cr_assert_eq(kcr_client_create(c, &(kcr_request){.resource = &CM, .body = cm}, NULL), KCR_OK);
    cr_assert_eq(s.calls, 1);
    cr_assert_str_eq(s.method, "POST");
    cr_assert_str_eq(s.host, "fake");
    cr_assert_eq(s.code, 201);
    cr_assert_geq(s.seconds, 0.0);
    cr_assert_eq(kcr_client_get(
                     c, &(kcr_request){.resource = &CM, .ns = "default", .name = "missing"}, NULL),
                 KCR_ERR_NOT_FOUND);
    cr_assert_eq(s.calls, 2);
    cr_assert_str_eq(s.method, "GET");
    cr_assert_eq(s.code, 404);
    /* an argument error is not a request */
    cr_assert_eq(
        kcr_client_get(c, &(kcr_request){.resource = &CM, .ns = "default", .name = ""}, NULL),
        KCR_ERR_INVALID);
    cr_assert_eq(s.calls, 2);
    kcr_client_set_request_observer(c, NULL, NULL);
    cr_assert_eq(
        kcr_client_get(c, &(kcr_request){.resource = &CM, .ns = "default", .name = "a"}, NULL),
        KCR_OK);
    cr_assert_eq(s.calls, 2);
    kcr_client_free(c);
    kcr_fake_free(f);
}

Test(metrics_client, the_observer_counts_requests_by_code_method_and_host)
{
    kcr_metrics *m;
    kcr_fake *f;
    kcr_client *c;
    cr_assert_eq(kcr_metrics_new(NULL, &m), KCR_OK);
    cr_assert_eq(kcr_fake_new(NULL, &f), KCR_OK);
    cr_assert_eq(kcr_fake_client(f, "default", &c), KCR_OK);
    kcr_request_observer_fn fn;
    void *ud;
    cr_assert_eq(kcr_metrics_client_observer(m, &fn, &ud), KCR_OK);
    kcr_client_set_request_observer(c, fn, ud);

    const char *cm = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
                     "\"metadata\":{\"name\":\"a\",\"namespace\":\"default\"}}";
    cr_assert_eq(kcr_client_create(c, &(kcr_request){.resource = &CM, .body = cm}, NULL), KCR_OK);
    cr_assert_eq(
        kcr_client_get(c, &(kcr_request){.resource = &CM, .ns = "default", .name = "a"}, NULL),
        KCR_OK);
    cr_assert_eq(
        kcr_client_get(c, &(kcr_request){.resource = &CM, .ns = "default", .name = "a"}, NULL),
        KCR_OK);
    cr_assert_eq(
        kcr_client_get(c, &(kcr_request){.resource = &CM, .ns = "default", .name = "b"}, NULL),
        KCR_ERR_NOT_FOUND);
    cr_assert_eq(kcr_fake_inject_error(f, &(kcr_fake_error){.verb = KCR_FAKE_DELETE,
                                                            .resource = &CM,
                                                            .code = 500,
                                                            .reason = "InternalError",
                                                            .message = "boom"}),
                 KCR_OK);
    cr_assert_eq(
        kcr_client_delete(c, &(kcr_request){.resource = &CM, .ns = "default", .name = "a"}, NULL),
        KCR_ERR_API);
    cr_assert_eq(
        kcr_client_delete(c, &(kcr_request){.resource = &CM, .ns = "default", .name = "a"}, NULL),
        KCR_OK);

    expect_line(m, "rest_client_requests_total{code=\"200\",method=\"DELETE\",host=\"fake\"} 1");
    expect_line(m, "rest_client_requests_total{code=\"200\",method=\"GET\",host=\"fake\"} 2");
    expect_line(m, "rest_client_requests_total{code=\"201\",method=\"POST\",host=\"fake\"} 1");
    expect_line(m, "rest_client_requests_total{code=\"404\",method=\"GET\",host=\"fake\"} 1");
    expect_line(m, "rest_client_requests_total{code=\"500\",method=\"DELETE\",host=\"fake\"} 1");
    expect_line(m, "rest_client_request_duration_seconds_count{verb=\"GET\",host=\"fake\"} 3");
    expect_line(m, "rest_client_request_duration_seconds_count{verb=\"DELETE\",host=\"fake\"} 2");
    expect_line(m, "# TYPE rest_client_request_duration_seconds histogram");
    /* client-go's buckets */
    expect_line(m, "rest_client_request_duration_seconds_bucket{verb=\"POST\",host=\"fake\","
                   "le=\"60\"} 1");

    /* a call without response is "<error>" */
    fn("GET", "10.0.0.1:6443", 0, 0.5, ud);
    expect_line(m,
                "rest_client_requests_total{code=\"<error>\",method=\"GET\",host=\"10.0.0.1:6443\"} 1");
    kcr_client_free(c);
    kcr_fake_free(f);
    kcr_metrics_free(m);
}

Test(metrics_client, null_arguments)
{
    kcr_metrics *m;
    cr_assert_eq(kcr_metrics_new(NULL, &m), KCR_OK);
    kcr_request_observer_fn fn;
    void *ud;
    cr_assert_eq(kcr_metrics_client_observer(NULL, &fn, &ud), KCR_ERR_INVALID);
    cr_assert_eq(kcr_metrics_client_observer(m, NULL, &ud), KCR_ERR_INVALID);
    cr_assert_eq(kcr_metrics_client_observer(m, &fn, NULL), KCR_ERR_INVALID);
    kcr_client_set_request_observer(NULL, NULL, NULL);
    kcr_metrics_free(m);
}
