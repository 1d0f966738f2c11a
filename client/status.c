/* meta.k8s.io/v1 Status decoding and the error-code mapping. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client_impl.h"
#include "core/error.h"

enum { MAX_BODY_KEPT = 64 << 10, BODY_PREFIX_IN_MESSAGE = 200 };

static void free_cause(kcr_status_cause *c)
{
    free(c->type);
    free(c->message);
    free(c->field);
}

void kcr_status_clear(kcr_status *st)
{
    if (!st)
        return;
    free(st->status);
    free(st->reason);
    free(st->message);
    free(st->details.name);
    free(st->details.group);
    free(st->details.kind);
    free(st->details.uid);
    for (size_t i = 0; i < st->details.n_causes; i++)
        free_cause(&st->details.causes[i]);
    free(st->details.causes);
    free(st->body);
    memset(st, 0, sizeof *st);
}

static char *dup_or_empty(const char *s)
{
    return strdup(s ? s : "");
}

/* Makes every string field non-NULL. */
static kcr_err fill_empty(kcr_status *st)
{
    char **fields[] = {&st->status,       &st->reason,        &st->message,
                       &st->details.name, &st->details.group, &st->details.kind,
                       &st->details.uid,  &st->body};
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
        if (!*fields[i] && !(*fields[i] = strdup("")))
            return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    return KCR_OK;
}

kcr_err kcr_status_copy(kcr_status *dst, const kcr_status *src)
{
    kcr_status_clear(dst);
    dst->code = src->code;
    dst->details.retry_after_seconds = src->details.retry_after_seconds;
#define C(f) dst->f = src->f ? strdup(src->f) : NULL
    C(status);
    C(reason);
    C(message);
    C(details.name);
    C(details.group);
    C(details.kind);
    C(details.uid);
    C(body);
#undef C
    if (src->details.n_causes) {
        dst->details.causes = calloc(src->details.n_causes, sizeof *dst->details.causes);
        if (!dst->details.causes) {
            kcr_status_clear(dst);
            return kcr__fail(KCR_ERR_NOMEM, "out of memory");
        }
        dst->details.n_causes = src->details.n_causes;
        for (size_t i = 0; i < src->details.n_causes; i++) {
            kcr_status_cause *d = &dst->details.causes[i];
            const kcr_status_cause *s = &src->details.causes[i];
            d->type = dup_or_empty(s->type);
            d->message = dup_or_empty(s->message);
            d->field = dup_or_empty(s->field);
            if (!d->type || !d->message || !d->field) {
                kcr_status_clear(dst);
                return kcr__fail(KCR_ERR_NOMEM, "out of memory");
            }
        }
    }
    if (fill_empty(dst) != KCR_OK) {
        kcr_status_clear(dst);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    }
    return KCR_OK;
}

kcr_err kcr__status_from_json(const kcr__json *doc, kcr_status *st)
{
    kcr_status_clear(st);
    const char *kind = kcr__json_str(kcr__json_get(doc, "kind"));
    const char *status = kcr__json_str(kcr__json_get(doc, "status"));
    kcr__json *code = kcr__json_get(doc, "code");
    bool is_status = (kind && strcmp(kind, "Status") == 0) ||
                     (!kind && status && code && code->type == KCR__JSON_NUMBER);
    if (!doc || doc->type != KCR__JSON_OBJECT || !is_status)
        return kcr__fail(KCR_ERR_PARSE, "not a Status object");
    st->code = (int)kcr__json_int(code, 0);
    st->status = dup_or_empty(status);
    st->reason = dup_or_empty(kcr__json_str(kcr__json_get(doc, "reason")));
    st->message = dup_or_empty(kcr__json_str(kcr__json_get(doc, "message")));
    kcr__json *d = kcr__json_get(doc, "details");
    st->details.name = dup_or_empty(kcr__json_str(kcr__json_get(d, "name")));
    st->details.group = dup_or_empty(kcr__json_str(kcr__json_get(d, "group")));
    st->details.kind = dup_or_empty(kcr__json_str(kcr__json_get(d, "kind")));
    st->details.uid = dup_or_empty(kcr__json_str(kcr__json_get(d, "uid")));
    st->details.retry_after_seconds = (int)kcr__json_int(kcr__json_get(d, "retryAfterSeconds"), 0);
    kcr__json *causes = kcr__json_get(d, "causes");
    if (causes && causes->type == KCR__JSON_ARRAY && causes->n) {
        st->details.causes = calloc(causes->n, sizeof *st->details.causes);
        if (!st->details.causes) {
            kcr_status_clear(st);
            return kcr__fail(KCR_ERR_NOMEM, "out of memory");
        }
        for (size_t i = 0; i < causes->n; i++) {
            kcr_status_cause *c = &st->details.causes[st->details.n_causes++];
            c->type = dup_or_empty(kcr__json_str(kcr__json_get(causes->vals[i], "reason")));
            c->message = dup_or_empty(kcr__json_str(kcr__json_get(causes->vals[i], "message")));
            c->field = dup_or_empty(kcr__json_str(kcr__json_get(causes->vals[i], "field")));
            if (!c->type || !c->message || !c->field) {
                kcr_status_clear(st);
                return kcr__fail(KCR_ERR_NOMEM, "out of memory");
            }
        }
    }
    if (fill_empty(st) != KCR_OK) {
        kcr_status_clear(st);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    }
    return KCR_OK;
}

kcr_err kcr_status_parse(const char *json, size_t len, kcr_status *out)
{
    kcr__json *doc;
    kcr_err err = kcr__json_parse(json, len, &doc);
    if (err != KCR_OK)
        return err;
    err = kcr__status_from_json(doc, out);
    kcr__json_free(doc);
    return err;
}

kcr_err kcr__err_for_code(int code, const char *reason)
{
    switch (code) {
    case 401: return KCR_ERR_UNAUTHORIZED;
    case 403: return KCR_ERR_FORBIDDEN;
    case 404: return KCR_ERR_NOT_FOUND;
    case 409: return reason && strcmp(reason, "AlreadyExists") == 0 ? KCR_ERR_EXISTS
                                                                    : KCR_ERR_CONFLICT;
    case 410: return KCR_ERR_GONE;
    case 422: return KCR_ERR_INVALID_OBJECT;
    case 429: return KCR_ERR_TOO_MANY;
    default: return KCR_ERR_API;
    }
}

kcr_err kcr_status_to_err(const kcr_status *st)
{
    if (!st || (st->code >= 200 && st->code < 300 && st->status &&
                strcmp(st->status, "Failure") != 0))
        return KCR_OK;
    return kcr__err_for_code(st->code, st->reason);
}

kcr_err kcr__status_fail(const kcr_status *st)
{
    kcr_err err = kcr__err_for_code(st->code, st->reason);
    const char *msg = st->message && *st->message ? st->message : "(the server gave no message)";
    if (st->reason && *st->reason)
        return kcr__fail(err, "%d %s: %s", st->code, st->reason, msg);
    if (st->message && *st->message)
        return kcr__fail(err, "%s", st->message);
    return kcr__fail(err, "%d %s: %s", st->code, kcr_strerror(err), msg);
}

kcr_err kcr__status_from_http(long http_code, const char *body, size_t len, kcr_status *st)
{
    kcr_status_clear(st);
    kcr__json *doc = NULL;
    if (len && kcr__json_parse(body, len, &doc) == KCR_OK &&
        kcr__status_from_json(doc, st) == KCR_OK) {
        kcr__json_free(doc);
        if (st->code == 0) /* a Status without a code: trust the HTTP line */
            st->code = (int)http_code;
        free(st->body);
        st->body = strndup(body, len < MAX_BODY_KEPT ? len : MAX_BODY_KEPT);
        return kcr__status_fail(st);
    }
    kcr__json_free(doc);
    kcr_status_clear(st);
    /* Not a Status: keep the code and the start of the body, printable. */
    size_t n = len < BODY_PREFIX_IN_MESSAGE ? len : BODY_PREFIX_IN_MESSAGE;
    char prefix[BODY_PREFIX_IN_MESSAGE + 1];
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)body[i];
        prefix[i] = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
    }
    prefix[n] = '\0';
    char msg[BODY_PREFIX_IN_MESSAGE + 64];
    snprintf(msg, sizeof msg, "HTTP %ld: %s%s", http_code, n ? prefix : "(empty body)",
             len > n ? "..." : "");
    st->code = (int)http_code;
    st->status = strdup("Failure");
    st->message = strdup(msg);
    st->body = strndup(body ? body : "", len < MAX_BODY_KEPT ? len : MAX_BODY_KEPT);
    fill_empty(st);
    return kcr__status_fail(st);
}

kcr_err kcr__status_make(kcr_status *st, int code, const char *reason, const char *message)
{
    kcr_status_clear(st);
    st->code = code;
    st->status = strdup(code >= 200 && code < 300 ? "Success" : "Failure");
    st->reason = dup_or_empty(reason);
    st->message = dup_or_empty(message);
    return fill_empty(st);
}

char *kcr__status_to_json(const kcr_status *st)
{
    kcr__json *doc = kcr__json_new(KCR__JSON_OBJECT);
    if (!doc)
        return NULL;
    kcr__json_set_str(doc, "kind", "Status");
    kcr__json_set_str(doc, "apiVersion", "v1");
    kcr__json_set(doc, "metadata", kcr__json_new(KCR__JSON_OBJECT));
    kcr__json_set_str(doc, "status", st->status ? st->status : "Failure");
    kcr__json_set_str(doc, "message", st->message ? st->message : "");
    kcr__json_set_str(doc, "reason", st->reason ? st->reason : "");
    kcr__json *d = kcr__json_child_object(doc, "details");
    if (d && st->details.name && *st->details.name)
        kcr__json_set_str(d, "name", st->details.name);
    if (d && st->details.kind && *st->details.kind)
        kcr__json_set_str(d, "kind", st->details.kind);
    if (d && st->details.n_causes) {
        kcr__json *arr = kcr__json_new(KCR__JSON_ARRAY);
        for (size_t i = 0; arr && i < st->details.n_causes; i++) {
            kcr__json *c = kcr__json_new(KCR__JSON_OBJECT);
            if (!c)
                break;
            kcr__json_set_str(c, "reason", st->details.causes[i].type);
            kcr__json_set_str(c, "message", st->details.causes[i].message);
            kcr__json_set_str(c, "field", st->details.causes[i].field);
            kcr__json_append(arr, c);
        }
        kcr__json_set(d, "causes", arr);
    }
    kcr__json_set(doc, "code", kcr__json_new_int(st->code));
    char *out = NULL;
    kcr__json_dump(doc, &out, NULL);
    kcr__json_free(doc);
    return out;
}
