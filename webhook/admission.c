/* Admission: runs a handler on a decoded AdmissionReview and writes the
 * AdmissionReview answer, with the JSON Patch of a mutating handler's edits
 * (computed by kcr_object_json_patch_diff, base64, patchType JSONPatch). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "core/error.h"
#include "webhook/review.h"
#include "webhook/webhook_internal.h"

#define MAX_WARNINGS 64

struct kcr_admission_response {
    bool allowed, mutating;
    int32_t code;
    char *message;
    char *warnings[MAX_WARNINGS];
    size_t n_warnings;
    const kcr_object *object;
    kcr_object_edit *edit;
};

kcr_err kcr_admission_deny(kcr_admission_response *resp, int32_t code, const char *message)
{
    if (!resp)
        return kcr__fail(KCR_ERR_INVALID, "kcr_admission_deny: resp is NULL");
    char *m = strdup(message ? message : "");
    if (!m)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    free(resp->message);
    resp->message = m;
    resp->allowed = false;
    resp->code = code ? code : 403;
    return KCR_OK;
}

kcr_err kcr_admission_warn(kcr_admission_response *resp, const char *warning)
{
    if (!resp || !warning)
        return kcr__fail(KCR_ERR_INVALID, "kcr_admission_warn: NULL argument");
    if (resp->n_warnings == MAX_WARNINGS)
        return kcr__fail(KCR_ERR_TOO_LARGE, "more than %d admission warnings", MAX_WARNINGS);
    char *w = strdup(warning);
    if (!w)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    resp->warnings[resp->n_warnings++] = w;
    return KCR_OK;
}

kcr_err kcr_admission_edit(kcr_admission_response *resp, kcr_object_edit **out)
{
    if (!resp || !out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_admission_edit: NULL argument");
    *out = NULL;
    if (!resp->mutating)
        return kcr__fail(KCR_ERR_STATE, "only a mutating webhook can edit the object");
    if (!resp->object)
        return kcr__fail(KCR_ERR_STATE, "the admission request has no object to edit");
    if (!resp->edit) {
        kcr_err err = kcr_object_edit_new(resp->object, &resp->edit);
        if (err)
            return err;
    }
    *out = resp->edit;
    return KCR_OK;
}

static void response_free(kcr_admission_response *r)
{
    free(r->message);
    for (size_t i = 0; i < r->n_warnings; i++)
        free(r->warnings[i]);
    kcr_object_edit_free(r->edit);
}

/* The patch of the edits, base64; NULL *b64 when nothing changed. */
static kcr_err edits_patch(kcr_admission_response *r, char **b64)
{
    *b64 = NULL;
    if (!r->edit)
        return KCR_OK;
    kcr_object *edited = NULL;
    char *patch = NULL;
    size_t len = 0;
    kcr_err err = kcr_object_edit_snapshot(r->edit, &edited);
    if (!err)
        err = kcr_object_json_patch_diff(r->object, edited, &patch, &len);
    kcr_object_unref(edited);
    if (!err && len > 2) {
        *b64 = malloc(4 * ((len + 2) / 3) + 1);
        if (*b64)
            EVP_EncodeBlock((unsigned char *)*b64, (const unsigned char *)patch, (int)len);
        else
            err = kcr__fail(KCR_ERR_NOMEM, "out of memory");
    }
    free(patch);
    return err;
}

/* Writes the AdmissionReview answer (false when out of memory). */
static bool write_answer(const char *api_version, const char *uid,
                         const kcr_admission_response *r, const char *patch_b64, char **out,
                         size_t *len)
{
    struct kcr__wh_text t = {0};
#define RAW(lit) kcr__wh_text_raw(&t, lit, sizeof lit - 1)
    RAW("{\"apiVersion\":");
    kcr__wh_text_string(&t, api_version);
    RAW(",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":");
    kcr__wh_text_string(&t, uid);
    if (r->allowed) {
        RAW(",\"allowed\":true");
    } else {
        char code[48];
        snprintf(code, sizeof code, ",\"allowed\":false,\"status\":{\"code\":%d", (int)r->code);
        kcr__wh_text_raw(&t, code, strlen(code));
        RAW(",\"message\":");
        kcr__wh_text_string(&t, r->message ? r->message : "");
        RAW("}");
    }
    for (size_t i = 0; i < r->n_warnings; i++) {
        kcr__wh_text_raw(&t, i ? "," : ",\"warnings\":[", i ? 1 : 13);
        kcr__wh_text_string(&t, r->warnings[i]);
    }
    if (r->n_warnings)
        RAW("]");
    if (patch_b64) { /* base64: nothing to escape */
        RAW(",\"patchType\":\"JSONPatch\",\"patch\":\"");
        kcr__wh_text_raw(&t, patch_b64, strlen(patch_b64));
        RAW("\"");
    }
    RAW("}}");
#undef RAW
    if (t.oom) {
        free(t.s);
        return false;
    }
    *out = t.s;
    *len = t.len;
    return true;
}

/* Decodes, calls the handler, writes the answer into the job (worker). */
void kcr__wh_admission_run(struct kcr__wh_job *job)
{
    const struct kcr__wh_route *route = job->route;
    struct kcr__wh_admission a;
    if (kcr__wh_admission_decode(job->body, job->len, &a) != KCR_OK) {
        kcr__wh_job_text(job, 400, kcr_last_error());
        kcr__wh_admission_free(&a);
        return;
    }
    kcr_admission_response r = {.allowed = true,
                                .mutating = route->type == KCR_ADMISSION_MUTATING,
                                .object = a.object};
    kcr_set_error(KCR_OK, NULL); /* no stale message reaches the answer */
    kcr_err err = route->fn(&a.req, &r, route->user_data);
    if (err) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", *kcr_last_error() ? kcr_last_error() : kcr_strerror(err));
        kcr_admission_deny(&r, 500, msg);
    }
    char *patch = NULL;
    if (r.allowed && edits_patch(&r, &patch) != KCR_OK)
        kcr_admission_deny(&r, 500, kcr_last_error());
    job->status = 200;
    if (!write_answer(a.api_version, a.req.uid, &r, r.allowed ? patch : NULL, &job->reply,
                      &job->reply_len))
        kcr__wh_job_text(job, 500, "out of memory writing the answer");
    free(patch);
    response_free(&r);
    kcr__wh_admission_free(&a);
}

void kcr__wh_admission_timeout(struct kcr__wh_job *job, int *status, char **reply, size_t *len)
{
    struct kcr__wh_admission a;
    *reply = NULL;
    if (kcr__wh_admission_decode(job->body, job->len, &a) != KCR_OK) {
        kcr__wh_admission_free(&a);
        *status = 400;
        return;
    }
    kcr_admission_response r = {.allowed = job->route->policy == KCR_WEBHOOK_IGNORE};
    char msg[256];
    snprintf(msg, sizeof msg, "webhook %s did not answer within %lld ms", job->route->path,
             (long long)job->route->timeout_ms);
    if (r.allowed)
        kcr_admission_warn(&r, msg);
    else
        kcr_admission_deny(&r, 504, msg);
    *status = 200;
    if (!write_answer(a.api_version, a.req.uid, &r, NULL, reply, len))
        *reply = NULL;
    response_free(&r);
    kcr__wh_admission_free(&a);
}

kcr_err kcr_webhook_server_add_admission(kcr_webhook_server *s, const kcr_admission_options *opts)
{
    if (!s || !opts || !opts->path || !opts->fn ||
        (opts->type != KCR_ADMISSION_VALIDATING && opts->type != KCR_ADMISSION_MUTATING))
        return kcr__fail(KCR_ERR_INVALID,
                         "kcr_webhook_server_add_admission: path, type and fn are required");
    struct kcr__wh_route *r = calloc(1, sizeof *r);
    char *path = strdup(opts->path);
    if (!r || !path) {
        free(r);
        free(path);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    }
    r->path = path;
    r->kind = KCR__WH_ADMISSION;
    r->type = opts->type;
    r->fn = opts->fn;
    r->user_data = opts->user_data;
    r->timeout_ms = opts->timeout_ms;
    r->policy = opts->failure_policy;
    atomic_init(&r->on_loop, opts->run_on_loop);
    return kcr__wh_route_add(s, r);
}
