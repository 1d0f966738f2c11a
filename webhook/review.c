/* Decoding the review bodies the apiserver sends, shared helpers for the
 * answers. Every malformed input becomes KCR_ERR_PARSE with the reason, which
 * the server answers with 400. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "webhook/review.h"

kcr_err kcr__wh_value_object(kcr_value v, const char *what, kcr_object **out)
{
    *out = NULL;
    if (kcr_value_get_type(v) != KCR_VALUE_OBJECT)
        return kcr__fail(KCR_ERR_PARSE, "%s is not a JSON object", what);
    char *json;
    size_t len;
    kcr_err err = kcr_value_to_json(v, &json, &len);
    if (!err)
        err = kcr_object_parse_any(json, len, out);
    free(json);
    return err;
}

static const char *str_at(const kcr_object *o, const char *path)
{
    const char *s = kcr_value_string(kcr_object_get(o, path), NULL);
    return s ? s : "";
}

/* v's member `key` as a string, "" when absent or not a string. */
static const char *member_str(kcr_value v, const char *key)
{
    const char *s = kcr_value_string(kcr_value_member(v, key), NULL);
    return s ? s : "";
}

/* Parses the body and checks apiVersion/kind against `group` and `kind`. */
static kcr_err parse_review(const char *body, size_t len, const char *group, const char *kind,
                            kcr_object **out)
{
    kcr_err err = len ? kcr_object_parse_any(body, len, out) : KCR_ERR_PARSE;
    if (err)
        return kcr__fail(KCR_ERR_PARSE, "the body is not a JSON object: %s",
                         len ? kcr_last_error() : "empty");
    const char *av = kcr_object_api_version(*out), *k = kcr_object_kind(*out);
    size_t gl = strlen(group);
    if (strncmp(av, group, gl) != 0 || av[gl] != '/' ||
        (strcmp(av + gl + 1, "v1") != 0 && strcmp(av + gl + 1, "v1beta1") != 0))
        return kcr__fail(KCR_ERR_PARSE, "apiVersion \"%s\" is not %s/v1 or %s/v1beta1", av,
                         group, group);
    if (strcmp(k, kind) != 0)
        return kcr__fail(KCR_ERR_PARSE, "kind \"%s\" is not %s", k, kind);
    kcr_value rq = kcr_value_member(kcr_object_root(*out), "request");
    if (kcr_value_get_type(rq) != KCR_VALUE_OBJECT)
        return kcr__fail(KCR_ERR_PARSE, "the %s has no request", kind);
    if (!*member_str(rq, "uid"))
        return kcr__fail(KCR_ERR_PARSE, "the %s request has no uid", kind);
    return KCR_OK;
}

static const struct {
    const char *name;
    kcr_admission_operation op;
} operations[] = {{"CREATE", KCR_ADMISSION_CREATE},
                  {"UPDATE", KCR_ADMISSION_UPDATE},
                  {"DELETE", KCR_ADMISSION_DELETE},
                  {"CONNECT", KCR_ADMISSION_CONNECT}};

/* request.object / request.oldObject: absent or null is fine, anything but
 * an object is not. An object is taken as it was parsed, without a second
 * parse (kcr_object_from_value). */
static kcr_err optional_object(kcr_value request, const char *key, kcr_object **out)
{
    kcr_value v = kcr_value_member(request, key);
    kcr_value_type t = kcr_value_get_type(v);
    if (t == KCR_VALUE_ABSENT || t == KCR_VALUE_NULL)
        return KCR_OK;
    if (t != KCR_VALUE_OBJECT)
        return kcr__fail(KCR_ERR_PARSE, "request.%s is not a JSON object", key);
    return kcr_object_from_value(v, out);
}

kcr_err kcr__wh_admission_decode(const char *body, size_t len, struct kcr__wh_admission *out)
{
    memset(out, 0, sizeof *out);
    kcr_err err = parse_review(body, len, "admission.k8s.io", "AdmissionReview", &out->review);
    if (err)
        return err;
    const kcr_object *r = out->review;
    kcr_value rq = kcr_value_member(kcr_object_root(r), "request");
    kcr_admission_request *q = &out->req;
    out->api_version = kcr_object_api_version(r);
    q->uid = member_str(rq, "uid");
    const char *op = member_str(rq, "operation");
    for (size_t i = 0; i < sizeof operations / sizeof operations[0]; i++)
        if (strcmp(op, operations[i].name) == 0)
            q->operation = operations[i].op;
    if (!q->operation)
        return kcr__fail(KCR_ERR_PARSE, "request.operation \"%s\" is not CREATE, UPDATE, "
                                        "DELETE or CONNECT", op);
    kcr_value kind = kcr_value_member(rq, "kind");
    q->group = member_str(kind, "group");
    q->version = member_str(kind, "version");
    q->kind = member_str(kind, "kind");
    q->resource = member_str(kcr_value_member(rq, "resource"), "resource");
    q->sub_resource = member_str(rq, "subResource");
    q->name = member_str(rq, "name");
    q->ns = member_str(rq, "namespace");
    q->dry_run = kcr_value_bool(kcr_value_member(rq, "dryRun"));
    q->user_info = kcr_value_member(rq, "userInfo");
    q->username = member_str(q->user_info, "username");
    q->review = r;
    err = optional_object(rq, "object", &out->object);
    if (!err)
        err = optional_object(rq, "oldObject", &out->old_object);
    if (err)
        return err;
    if ((q->operation == KCR_ADMISSION_CREATE || q->operation == KCR_ADMISSION_UPDATE) &&
        !out->object)
        return kcr__fail(KCR_ERR_PARSE, "a %s request has no request.object", op);
    q->object = out->object;
    q->old_object = out->old_object;
    return KCR_OK;
}

void kcr__wh_admission_free(struct kcr__wh_admission *a)
{
    kcr_object_unref(a->object);
    kcr_object_unref(a->old_object);
    kcr_object_unref(a->review);
    memset(a, 0, sizeof *a);
}

kcr_err kcr__wh_conversion_decode(const char *body, size_t len, struct kcr__wh_conversion *out)
{
    memset(out, 0, sizeof *out);
    kcr_err err =
        parse_review(body, len, "apiextensions.k8s.io", "ConversionReview", &out->review);
    if (err)
        return err;
    const kcr_object *r = out->review;
    out->uid = str_at(r, "request.uid");
    out->desired = str_at(r, "request.desiredAPIVersion");
    if (!*out->desired)
        return kcr__fail(KCR_ERR_PARSE, "the ConversionReview request has no desiredAPIVersion");
    kcr_value objs = kcr_object_get(r, "request.objects");
    if (kcr_value_get_type(objs) != KCR_VALUE_ARRAY)
        return kcr__fail(KCR_ERR_PARSE, "request.objects is not an array");
    size_t n = kcr_value_len(objs);
    out->objects = calloc(n ? n : 1, sizeof *out->objects);
    if (!out->objects)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        err = kcr__wh_value_object(kcr_value_at(objs, i), "an item of request.objects",
                                   &out->objects[i]);
        if (err)
            return err;
        out->n_objects++;
        if (!*kcr_object_api_version(out->objects[i]))
            return kcr__fail(KCR_ERR_PARSE, "request.objects[%zu] has no apiVersion", i);
    }
    return KCR_OK;
}

void kcr__wh_conversion_free(struct kcr__wh_conversion *c)
{
    for (size_t i = 0; i < c->n_objects; i++)
        kcr_object_unref(c->objects[i]);
    free(c->objects);
    kcr_object_unref(c->review);
    memset(c, 0, sizeof *c);
}

void kcr__wh_text_raw(struct kcr__wh_text *t, const char *s, size_t n)
{
    if (t->oom)
        return;
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 512;
        while (cap < t->len + n + 1)
            cap *= 2;
        char *p = realloc(t->s, cap);
        if (!p) {
            t->oom = true;
            return;
        }
        t->s = p;
        t->cap = cap;
    }
    memcpy(t->s + t->len, s, n);
    t->len += n;
    t->s[t->len] = '\0';
}

void kcr__wh_text_string(struct kcr__wh_text *t, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    kcr__wh_text_raw(t, "\"", 1);
    const char *run = s; /* the bytes not written yet */
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        kcr__wh_text_raw(t, run, (size_t)(s - run));
        run = s + 1;
        char esc[6] = {'\\', (char)c, 0, 0, 0, 0};
        if (c < 0x20) {
            memcpy(esc + 1, "u00", 3);
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
        }
        kcr__wh_text_raw(t, esc, c < 0x20 ? 6 : 2);
    }
    kcr__wh_text_raw(t, run, (size_t)(s - run));
    kcr__wh_text_raw(t, "\"", 1);
}

bool kcr__wh_gen_str(yajl_gen g, const char *s)
{
    return yajl_gen_string(g, (const unsigned char *)s, strlen(s)) == yajl_gen_status_ok;
}

bool kcr__wh_gen_kv(yajl_gen g, const char *key, const char *value)
{
    return kcr__wh_gen_str(g, key) && kcr__wh_gen_str(g, value);
}

bool kcr__wh_gen_raw(yajl_gen g, const char *json, size_t len)
{
    /* yajl writes a "number" verbatim: the one way to embed serialized JSON */
    return yajl_gen_number(g, json, len) == yajl_gen_status_ok;
}

bool kcr__wh_gen_take(yajl_gen g, bool ok, char **out, size_t *len)
{
    const unsigned char *buf;
    size_t n;
    *out = NULL;
    if (ok && yajl_gen_get_buf(g, &buf, &n) == yajl_gen_status_ok) {
        *out = malloc(n + 1);
        if (*out) {
            memcpy(*out, buf, n);
            (*out)[n] = '\0';
            *len = n;
        }
    }
    yajl_gen_free(g);
    return *out != NULL;
}
