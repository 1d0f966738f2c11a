/* meta.k8s.io/v1 Status decoding and the error-code mapping. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client_impl.h"
#include "core/error.h"
#include "object/edit_tree.h"
#include "object/value.h"

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

kcr_err kcr__status_from_value(kcr_value doc, kcr_status *st)
{
    kcr_status_clear(st);
    const char *kind = kcr__value_str(kcr_value_member(doc, "kind"));
    const char *status = kcr__value_str(kcr_value_member(doc, "status"));
    kcr_value code = kcr_value_member(doc, "code");
    bool is_status = (kind && strcmp(kind, "Status") == 0) ||
                     (!kind && status && kcr_value_get_type(code) == KCR_VALUE_INT);
    if (kcr_value_get_type(doc) != KCR_VALUE_OBJECT || !is_status)
        return kcr__fail(KCR_ERR_PARSE, "not a Status object");
    st->code = (int)kcr__value_int_or(code, 0);
    st->status = dup_or_empty(status);
    st->reason = dup_or_empty(kcr__value_str(kcr_value_member(doc, "reason")));
    st->message = dup_or_empty(kcr__value_str(kcr_value_member(doc, "message")));
    kcr_value d = kcr_value_member(doc, "details");
    st->details.name = dup_or_empty(kcr__value_str(kcr_value_member(d, "name")));
    st->details.group = dup_or_empty(kcr__value_str(kcr_value_member(d, "group")));
    st->details.kind = dup_or_empty(kcr__value_str(kcr_value_member(d, "kind")));
    st->details.uid = dup_or_empty(kcr__value_str(kcr_value_member(d, "uid")));
    st->details.retry_after_seconds =
        (int)kcr__value_int_or(kcr_value_member(d, "retryAfterSeconds"), 0);
    kcr_value causes = kcr_value_member(d, "causes");
    size_t n_causes = kcr_value_get_type(causes) == KCR_VALUE_ARRAY ? kcr_value_len(causes) : 0;
    if (n_causes) {
        st->details.causes = calloc(n_causes, sizeof *st->details.causes);
        if (!st->details.causes) {
            kcr_status_clear(st);
            return kcr__fail(KCR_ERR_NOMEM, "out of memory reading a Status");
        }
        for (size_t i = 0; i < n_causes; i++) {
            kcr_value cv = kcr_value_at(causes, i);
            kcr_status_cause *c = &st->details.causes[st->details.n_causes++];
            c->type = dup_or_empty(kcr__value_str(kcr_value_member(cv, "reason")));
            c->message = dup_or_empty(kcr__value_str(kcr_value_member(cv, "message")));
            c->field = dup_or_empty(kcr__value_str(kcr_value_member(cv, "field")));
            if (!c->type || !c->message || !c->field) {
                kcr_status_clear(st);
                return kcr__fail(KCR_ERR_NOMEM, "out of memory reading a Status");
            }
        }
    }
    if (fill_empty(st) != KCR_OK) {
        kcr_status_clear(st);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory reading a Status");
    }
    return KCR_OK;
}

kcr_err kcr_status_parse(const char *json, size_t len, kcr_status *out)
{
    kcr_object *doc;
    kcr_err err = kcr__document_parse(json, len, "Status", &doc);
    if (err != KCR_OK)
        return err;
    err = kcr__status_from_value(kcr_object_root(doc), out);
    kcr_object_unref(doc);
    return err;
}

kcr_err kcr__err_for_code(int code, const char *reason)
{
    /* A mapping, not a failure: callers set the detail (kcr__status_fail). */
    static const struct {
        int code;
        kcr_err err;
    } map[] = {{400, KCR_ERR_BAD_REQUEST},
               {401, KCR_ERR_UNAUTHORIZED}, {403, KCR_ERR_FORBIDDEN}, {404, KCR_ERR_NOT_FOUND},
               {409, KCR_ERR_CONFLICT},     {410, KCR_ERR_GONE},      {422, KCR_ERR_INVALID_OBJECT},
               {429, KCR_ERR_TOO_MANY}};
    if (code == 409 && reason && strcmp(reason, "AlreadyExists") == 0)
        return KCR_ERR_EXISTS; /* detail: a mapping, see above */
    for (size_t i = 0; i < sizeof map / sizeof *map; i++)
        if (map[i].code == code)
            return map[i].err;
    return KCR_ERR_API; /* detail: a mapping, see above */
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
    kcr_object *doc = NULL;
    if (len && kcr_object_parse_any(body, len, &doc) == KCR_OK &&
        kcr__status_from_value(kcr_object_root(doc), st) == KCR_OK) {
        kcr_object_unref(doc);
        if (st->code == 0) /* a Status without a code: trust the HTTP line */
            st->code = (int)http_code;
        free(st->body);
        st->body = strndup(body, len < MAX_BODY_KEPT ? len : MAX_BODY_KEPT);
        return kcr__status_fail(st);
    }
    kcr_object_unref(doc);
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

/* The Status document, in the order the apiserver writes it. */
static struct kcr__node *status_doc(const kcr_status *st)
{
    struct kcr__node *doc = kcr__node_new(KCR__N_MAP);
    struct kcr__node *d = kcr__node_new(KCR__N_MAP);
    if (!doc || !d)
        kcr__fail(KCR_ERR_NOMEM, "out of memory writing a Status");
    bool ok = doc && d && kcr__node_put_str(doc, "kind", "Status") &&
              kcr__node_put_str(doc, "apiVersion", "v1") &&
              kcr__node_put(doc, "metadata", kcr__node_new(KCR__N_MAP)) &&
              kcr__node_put_str(doc, "status", st->status ? st->status : "Failure") &&
              kcr__node_put_str(doc, "message", st->message ? st->message : "") &&
              kcr__node_put_str(doc, "reason", st->reason ? st->reason : "");
    if (ok && st->details.name && *st->details.name)
        ok = kcr__node_put_str(d, "name", st->details.name);
    if (ok && st->details.kind && *st->details.kind)
        ok = kcr__node_put_str(d, "kind", st->details.kind);
    if (ok && st->details.n_causes) {
        struct kcr__node *arr = kcr__node_new(KCR__N_ARR);
        if (!(ok = arr != NULL))
            kcr__fail(KCR_ERR_NOMEM, "out of memory writing a Status");
        for (size_t i = 0; ok && i < st->details.n_causes; i++) {
            const kcr_status_cause *sc = &st->details.causes[i];
            struct kcr__node *c = kcr__node_new(KCR__N_MAP);
            if (!c)
                kcr__fail(KCR_ERR_NOMEM, "out of memory writing a Status");
            ok = c && kcr__node_put_str(c, "reason", sc->type ? sc->type : "") &&
                 kcr__node_put_str(c, "message", sc->message ? sc->message : "") &&
                 kcr__node_put_str(c, "field", sc->field ? sc->field : "");
            if (ok && !(ok = kcr__node_push(arr, c)))
                kcr__fail(KCR_ERR_NOMEM, "out of memory writing a Status");
            else if (!ok)
                kcr__node_free(c);
        }
        ok = ok ? kcr__node_put(d, "causes", arr) : (kcr__node_free(arr), false);
    }
    if (ok) {
        ok = kcr__node_put(doc, "details", d);
        d = NULL; /* taken by kcr__node_put, even when it fails */
    }
    ok = ok && kcr__node_put(doc, "code", kcr__node_int(st->code));
    if (!ok) {
        kcr__node_free(doc);
        kcr__node_free(d);
        return NULL;
    }
    return doc;
}

char *kcr__status_to_json(const kcr_status *st)
{
    struct kcr__node *doc = status_doc(st); /* NULL: the detail is set */
    char *out = NULL;
    if (doc)
        kcr__node_to_json(doc, &out, NULL);
    kcr__node_free(doc);
    return out;
}
