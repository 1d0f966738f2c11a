/* meta.k8s.io/v1 Status documents: decoding (kcr_status_parse, the HTTP
 * error path), the JSON the fake answers with, and bad input. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "client/client_impl.h"
#include "core/error.h"
#include "kcr/kcr.h"

static const char conflict[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"Operation cannot be fulfilled on configmaps \\\"a\\\": the object has been "
    "modified\",\"reason\":\"Conflict\",\"details\":{\"name\":\"a\",\"kind\":\"configmaps\","
    "\"retryAfterSeconds\":2,\"causes\":[{\"reason\":\"FieldValueInvalid\",\"message\":\"bad\","
    "\"field\":\"data.x\"},{\"message\":7}]},\"code\":409}";

Test(status, parse_fills_every_field)
{
    kcr_status st = {0};
    cr_assert_eq(kcr_status_parse(conflict, strlen(conflict), &st), KCR_OK, "%s",
                 kcr_last_error());
    cr_assert_eq(st.code, 409);
    cr_assert_str_eq(st.status, "Failure");
    cr_assert_str_eq(st.reason, "Conflict");
    cr_assert(strstr(st.message, "\"a\": the object has been modified") != NULL);
    cr_assert_str_eq(st.details.name, "a");
    cr_assert_str_eq(st.details.kind, "configmaps");
    cr_assert_str_eq(st.details.group, "", "absent strings are empty, not NULL");
    cr_assert_eq(st.details.retry_after_seconds, 2);
    cr_assert_eq(st.details.n_causes, 2);
    cr_assert_str_eq(st.details.causes[0].field, "data.x");
    cr_assert_str_eq(st.details.causes[1].message, "", "a number is not a message");
    cr_assert_eq(kcr_status_to_err(&st), KCR_ERR_CONFLICT);
    kcr_status_clear(&st);
}

Test(status, not_a_status_and_bad_input)
{
    kcr_status st = {0};
    cr_assert_eq(kcr_status_parse("{\"kind\":\"ConfigMap\"}", 0, &st), KCR_ERR_PARSE);
    cr_assert(strstr(kcr_last_error(), "not a Status") != NULL, "%s", kcr_last_error());
    cr_assert_eq(kcr_status_parse("{\"kind\":\"Status\",\"code\":", 0, &st), KCR_ERR_PARSE);
    cr_assert(strstr(kcr_last_error(), "invalid JSON") != NULL, "%s", kcr_last_error());
    cr_assert_eq(kcr_status_parse("{\"kind\":\"Status\",\"message\":\"\xc3\x28\"}", 0, &st),
                 KCR_ERR_PARSE);
    cr_assert(strstr(kcr_last_error(), "Status") != NULL, "%s", kcr_last_error());
    cr_assert(strstr(kcr_last_error(), "not valid UTF-8") != NULL, "%s", kcr_last_error());
    /* a Status without kind: status + integer code */
    cr_assert_eq(kcr_status_parse("{\"status\":\"Failure\",\"code\":404}", 0, &st), KCR_OK);
    cr_assert_eq(kcr_status_to_err(&st), KCR_ERR_NOT_FOUND);
    kcr_status_clear(&st);
}

/* An error body with bad UTF-8 is not a Status: the HTTP code and the start
 * of the body (non-printables blanked) make the error. */
Test(status, http_error_with_bad_utf8_body)
{
    kcr_status st = {0};
    const char body[] = "{\"kind\":\"Status\",\"message\":\"\xff\",\"code\":403}";
    cr_assert_eq(kcr__status_from_http(403, body, sizeof body - 1, &st), KCR_ERR_FORBIDDEN);
    cr_assert_eq(st.code, 403);
    cr_assert(strstr(st.message, "HTTP 403") != NULL, "%s", st.message);
    cr_assert_eq(kcr__status_from_http(409, conflict, strlen(conflict), &st), KCR_ERR_CONFLICT);
    cr_assert_str_eq(st.reason, "Conflict");
    cr_assert_str_eq(st.body, conflict);
    kcr_status_clear(&st);
}

Test(status, to_json_round_trips)
{
    kcr_status st = {0}, back = {0};
    cr_assert_eq(kcr_status_parse(conflict, strlen(conflict), &st), KCR_OK);
    char *json = kcr__status_to_json(&st);
    cr_assert_not_null(json);
    cr_assert_eq(strncmp(json, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{}", 48), 0,
                 "%s", json);
    cr_assert_eq(kcr_status_parse(json, strlen(json), &back), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(back.code, 409);
    cr_assert_str_eq(back.message, st.message);
    cr_assert_str_eq(back.details.name, "a");
    cr_assert_eq(back.details.n_causes, 2);
    cr_assert_str_eq(back.details.causes[0].type, "FieldValueInvalid");
    free(json);
    kcr_status_clear(&st);
    kcr_status_clear(&back);
}

/* A Status holding bad UTF-8 (a message the fake was given) is refused when
 * written, with the member named, instead of producing JSON no parser takes. */
Test(status, to_json_refuses_bad_utf8)
{
    kcr_status st = {0};
    cr_assert_eq(kcr__status_make(&st, 500, "InternalError", "bad \xc3\x28 byte"), KCR_OK);
    kcr__fail(KCR_ERR_IO, "an older failure");
    cr_assert_null(kcr__status_to_json(&st));
    cr_assert(strstr(kcr_last_error(), "message") != NULL, "%s", kcr_last_error());
    cr_assert(strstr(kcr_last_error(), "not valid UTF-8") != NULL, "%s", kcr_last_error());
    kcr_status_clear(&st);
}
