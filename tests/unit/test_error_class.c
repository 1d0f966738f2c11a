/* Error classes: every HTTP error code maps to one kcr_err on both back ends
 * (the Status decoding of the HTTP client, and the fake's answers), and
 * kcr_err_is_permanent says which of them a retry cannot fix. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "client/client_impl.h"
#include "kcr/kcr.h"
#include "kcr/fake.h"

static const kcr_resource CM = {"", "v1", "configmaps"};

Test(error_class, permanent_or_transient)
{
    static const kcr_err permanent[] = {KCR_ERR_BAD_REQUEST, KCR_ERR_INVALID_OBJECT,
                                        KCR_ERR_INVALID,     KCR_ERR_PARSE,
                                        KCR_ERR_TOO_LARGE,   KCR_ERR_UNSUPPORTED};
    for (int e = KCR_OK; e <= KCR_ERR_BAD_REQUEST; e++) {
        bool want = false;
        for (size_t i = 0; i < sizeof permanent / sizeof *permanent; i++)
            want |= permanent[i] == (kcr_err)e;
        cr_expect_eq(kcr_err_is_permanent((kcr_err)e), want, "%s", kcr_strerror((kcr_err)e));
        cr_expect_str_neq(kcr_strerror((kcr_err)e), "unknown error");
    }
    cr_expect_str_eq(kcr_strerror(KCR_ERR_BAD_REQUEST), "bad request");
    cr_expect_not(kcr_err_is_permanent((kcr_err)999));
}

/* The HTTP path: a Status body with each code. */
Test(error_class, http_status_codes)
{
    static const struct {
        int code;
        const char *reason;
        kcr_err err;
    } map[] = {
        {400, "BadRequest", KCR_ERR_BAD_REQUEST},  {401, "Unauthorized", KCR_ERR_UNAUTHORIZED},
        {403, "Forbidden", KCR_ERR_FORBIDDEN},     {404, "NotFound", KCR_ERR_NOT_FOUND},
        {409, "AlreadyExists", KCR_ERR_EXISTS},    {409, "Conflict", KCR_ERR_CONFLICT},
        {410, "Expired", KCR_ERR_GONE},            {422, "Invalid", KCR_ERR_INVALID_OBJECT},
        {429, "TooManyRequests", KCR_ERR_TOO_MANY}, {500, "InternalError", KCR_ERR_API},
        {503, "ServiceUnavailable", KCR_ERR_API},  {405, "MethodNotAllowed", KCR_ERR_API},
    };
    for (size_t i = 0; i < sizeof map / sizeof *map; i++) {
        char body[256];
        snprintf(body, sizeof body,
                 "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                 "\"message\":\"m\",\"reason\":\"%s\",\"code\":%d}",
                 map[i].reason, map[i].code);
        kcr_status st = {0};
        cr_expect_eq(kcr__status_from_http(map[i].code, body, strlen(body), &st), map[i].err,
                     "%d %s", map[i].code, map[i].reason);
        cr_expect_eq(kcr_status_to_err(&st), map[i].err);
        kcr_status_clear(&st);
        /* a body that is no Status: the HTTP code alone */
        if (map[i].code != 409) {
            cr_expect_eq(kcr__status_from_http(map[i].code, "<html>", 6, &st), map[i].err);
            kcr_status_clear(&st);
        }
    }
}

/* The fake answers refused writes as the apiserver does: a malformed
 * request is 400, an invalid object 422; both are permanent, and a conflict
 * or a missing object is not. */
Test(error_class, fake_refusals_on_create_update_patch)
{
    kcr_fake *f = NULL;
    kcr_client *c = NULL;
    cr_assert_eq(kcr_fake_new(NULL, &f), KCR_OK);
    cr_assert_eq(kcr_fake_client(f, "d", &c), KCR_OK);
    kcr_status st = {0};
    struct {
        kcr_err got;
        int code;
        kcr_err want;
    } seen[8];
    size_t n = 0;
#define SEE(call, code_, want_)                                                                  \
    do {                                                                                         \
        seen[n].got = (call);                                                                    \
        seen[n].code = st.code;                                                                  \
        cr_expect_eq(seen[n].got, want_, "got %d: %s", seen[n].got, kcr_last_error());             \
        cr_expect_eq(st.code, code_, "code %d: %s", st.code, kcr_last_error());                   \
        n++;                                                                                     \
        kcr_status_clear(&st);                                                                   \
    } while (0)

    /* create: an invalid name (422), a field of the wrong type (400) */
    SEE(kcr_client_create(c,
                          &(kcr_request){.resource = &CM, .ns = "d", .status = &st,
                                         .body = "{\"metadata\":{\"name\":\"Bad_Name\"}}"},
                          NULL),
        422, KCR_ERR_INVALID_OBJECT);
    SEE(kcr_client_create(c,
                          &(kcr_request){.resource = &CM, .ns = "d", .status = &st,
                                         .body = "{\"metadata\":{\"name\":\"a\",\"uid\":[]}}"},
                          NULL),
        400, KCR_ERR_BAD_REQUEST);
    cr_assert_eq(kcr_client_create(c,
                                   &(kcr_request){.resource = &CM, .ns = "d",
                                                  .body = "{\"metadata\":{\"name\":\"a\"}}"},
                                   NULL),
                 KCR_OK);
    /* update: a namespace that contradicts the request (400) */
    SEE(kcr_client_update(
            c,
            &(kcr_request){.resource = &CM, .ns = "d", .status = &st,
                           .body = "{\"metadata\":{\"name\":\"a\",\"namespace\":\"e\"}}"},
            NULL),
        400, KCR_ERR_BAD_REQUEST);
    /* patch: not a JSON Patch document (400), a failed test (422) */
    SEE(kcr_client_patch(c,
                         &(kcr_request){.resource = &CM, .ns = "d", .name = "a",
                                        .patch_type = KCR_PATCH_JSON, .body = "{}", .status = &st},
                         NULL),
        400, KCR_ERR_BAD_REQUEST);
    SEE(kcr_client_patch(
            c,
            &(kcr_request){.resource = &CM, .ns = "d", .name = "a", .patch_type = KCR_PATCH_JSON,
                           .body = "[{\"op\":\"test\",\"path\":\"/data\","
                                   "\"value\":{\"x\":\"1\"}}]",
                           .status = &st},
            NULL),
        422, KCR_ERR_INVALID_OBJECT);
    for (size_t i = 0; i < n; i++)
        cr_expect(kcr_err_is_permanent(seen[i].got), "refusal %zu (%d) is permanent", i,
                  seen[i].code);

    /* transient: a stale resourceVersion (409), a missing object (404) */
    n = 0;
    SEE(kcr_client_update(c,
                          &(kcr_request){.resource = &CM, .ns = "d", .status = &st,
                                         .body = "{\"metadata\":{\"name\":\"a\","
                                                 "\"resourceVersion\":\"12345\"},\"data\":{}}"},
                          NULL),
        409, KCR_ERR_CONFLICT);
    SEE(kcr_client_get(
            c, &(kcr_request){.resource = &CM, .ns = "d", .name = "missing", .status = &st}, NULL),
        404, KCR_ERR_NOT_FOUND);
    for (size_t i = 0; i < n; i++)
        cr_expect_not(kcr_err_is_permanent(seen[i].got), "%zu is transient", i);
#undef SEE
    kcr_client_free(c);
    kcr_fake_free(f);
}
