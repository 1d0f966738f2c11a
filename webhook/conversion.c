/* Conversion: a ConversionReview's objects converted to desiredAPIVersion by
 * the registered converters, directly or through the hub; one failure fails
 * the review (the apiserver needs all or nothing), with the converter's
 * message naming the object. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "webhook/review.h"
#include "webhook/webhook_internal.h"

struct converters {
    kcr_converter *list;
    size_t n;
    char *hub;
    void *user_data;
};

static void converters_free(void *p)
{
    struct converters *c = p;
    if (!c)
        return;
    for (size_t i = 0; i < c->n; i++) {
        free((char *)c->list[i].from_api_version);
        free((char *)c->list[i].to_api_version);
    }
    free(c->list);
    free(c->hub);
    free(c);
}

static const kcr_converter *find(const struct converters *c, const char *from, const char *to)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->list[i].from_api_version, from) == 0 &&
            strcmp(c->list[i].to_api_version, to) == 0)
            return &c->list[i];
    return NULL;
}

/* One step: a copy of in with apiVersion `to`, edited by the converter. */
static kcr_err step(const struct converters *c, const kcr_converter *cv, const kcr_object *in,
                    kcr_object **out)
{
    kcr_object_edit *e;
    kcr_err err = kcr_object_edit_new(in, &e);
    if (!err)
        err = kcr_object_edit_set_string(e, "apiVersion", cv->to_api_version);
    if (!err) {
        kcr_set_error(KCR_OK, NULL); /* no stale message reaches the answer */
        err = cv->fn(in, e, c->user_data);
        if (err && !*kcr_last_error())
            kcr__fail(err, "%s", kcr_strerror(err));
    }
    if (!err)
        err = kcr_object_edit_snapshot(e, out);
    kcr_object_edit_free(e);
    return err;
}

static kcr_err convert(const struct converters *c, const kcr_object *in, const char *to,
                       kcr_object **out)
{
    const char *from = kcr_object_api_version(in);
    *out = NULL;
    if (strcmp(from, to) == 0) {
        *out = kcr_object_ref(in);
        return KCR_OK;
    }
    const kcr_converter *direct = find(c, from, to);
    if (direct)
        return step(c, direct, in, out);
    const kcr_converter *up = c->hub ? find(c, from, c->hub) : NULL;
    const kcr_converter *down = c->hub ? find(c, c->hub, to) : NULL;
    if (c->hub && (up || strcmp(from, c->hub) == 0) && (down || strcmp(to, c->hub) == 0)) {
        kcr_object *mid = NULL;
        kcr_err err = up ? step(c, up, in, &mid) : KCR_OK;
        if (!err && !up)
            mid = kcr_object_ref(in);
        if (!err)
            err = down ? step(c, down, mid, out) : (*out = kcr_object_ref(mid), KCR_OK);
        kcr_object_unref(mid);
        return err;
    }
    return kcr__fail(KCR_ERR_UNSUPPORTED, "no conversion from %s to %s", from, to);
}

static bool write_answer(const struct kcr__wh_conversion *cv, const char *api_version,
                         kcr_object **converted, const char *failure, char **out, size_t *len)
{
    yajl_gen g = yajl_gen_alloc(NULL);
    if (!g)
        return false;
    bool ok = yajl_gen_map_open(g) == yajl_gen_status_ok &&
              kcr__wh_gen_kv(g, "apiVersion", api_version) &&
              kcr__wh_gen_kv(g, "kind", "ConversionReview") && kcr__wh_gen_str(g, "response") &&
              yajl_gen_map_open(g) == yajl_gen_status_ok && kcr__wh_gen_kv(g, "uid", cv->uid) &&
              kcr__wh_gen_str(g, "convertedObjects") &&
              yajl_gen_array_open(g) == yajl_gen_status_ok;
    for (size_t i = 0; ok && !failure && i < cv->n_objects; i++) {
        char *json;
        size_t n;
        ok = kcr_object_to_json(converted[i], &json, &n) == KCR_OK;
        ok = ok && kcr__wh_gen_raw(g, json, n);
        free(json);
    }
    ok = ok && yajl_gen_array_close(g) == yajl_gen_status_ok && kcr__wh_gen_str(g, "result") &&
         yajl_gen_map_open(g) == yajl_gen_status_ok &&
         kcr__wh_gen_kv(g, "status", failure ? "Failure" : "Success");
    if (ok && failure)
        ok = kcr__wh_gen_kv(g, "message", failure);
    ok = ok && yajl_gen_map_close(g) == yajl_gen_status_ok &&
         yajl_gen_map_close(g) == yajl_gen_status_ok &&
         yajl_gen_map_close(g) == yajl_gen_status_ok;
    return kcr__wh_gen_take(g, ok, out, len);
}

void kcr__wh_conversion_run(struct kcr__wh_job *job)
{
    const struct converters *c = job->route->owned;
    struct kcr__wh_conversion cv;
    if (kcr__wh_conversion_decode(job->body, job->len, &cv) != KCR_OK) {
        kcr__wh_job_text(job, 400, kcr_last_error());
        kcr__wh_conversion_free(&cv);
        return;
    }
    kcr_object **converted = calloc(cv.n_objects ? cv.n_objects : 1, sizeof *converted);
    char failure[1024] = "";
    if (!converted)
        snprintf(failure, sizeof failure, "out of memory");
    for (size_t i = 0; converted && i < cv.n_objects && !*failure; i++) {
        if (convert(c, cv.objects[i], cv.desired, &converted[i]) != KCR_OK)
            snprintf(failure, sizeof failure, "converting %s %s/%s to %s: %s",
                     kcr_object_kind(cv.objects[i]), kcr_object_namespace(cv.objects[i]),
                     kcr_object_name(cv.objects[i]), cv.desired, kcr_last_error());
    }
    job->status = 200;
    if (!write_answer(&cv, kcr_object_api_version(cv.review), converted,
                      *failure ? failure : NULL, &job->reply, &job->reply_len))
        kcr__wh_job_text(job, 500, "out of memory writing the answer");
    for (size_t i = 0; converted && i < cv.n_objects; i++)
        kcr_object_unref(converted[i]);
    free(converted);
    kcr__wh_conversion_free(&cv);
}

void kcr__wh_conversion_timeout(struct kcr__wh_job *job, int *status, char **reply, size_t *len)
{
    struct kcr__wh_conversion cv;
    *reply = NULL;
    *status = 400;
    if (kcr__wh_conversion_decode(job->body, job->len, &cv) == KCR_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "conversion webhook %s did not answer within %lld ms",
                 job->route->path, (long long)job->route->timeout_ms);
        *status = 200;
        if (!write_answer(&cv, kcr_object_api_version(cv.review), NULL, msg, reply, len))
            *reply = NULL;
    }
    kcr__wh_conversion_free(&cv);
}

kcr_err kcr_webhook_server_add_conversion(kcr_webhook_server *s,
                                          const kcr_conversion_options *opts)
{
    if (!s || !opts || !opts->path || (opts->n_converters && !opts->converters))
        return kcr__fail(KCR_ERR_INVALID, "kcr_webhook_server_add_conversion: path is required");
    struct converters *c = calloc(1, sizeof *c);
    struct kcr__wh_route *r = calloc(1, sizeof *r);
    bool ok = c && r && (r->path = strdup(opts->path)) != NULL;
    if (ok && opts->n_converters)
        ok = (c->list = calloc(opts->n_converters, sizeof *c->list)) != NULL;
    for (size_t i = 0; ok && i < opts->n_converters; i++) {
        const kcr_converter *in = &opts->converters[i];
        if (!in->from_api_version || !in->to_api_version || !in->fn) {
            converters_free(c);
            free(r->path);
            free(r);
            return kcr__fail(KCR_ERR_INVALID, "converter %zu lacks from, to or fn", i);
        }
        c->list[i].fn = in->fn;
        c->list[i].from_api_version = strdup(in->from_api_version);
        c->list[i].to_api_version = strdup(in->to_api_version);
        c->n++;
        ok = c->list[i].from_api_version && c->list[i].to_api_version;
    }
    if (ok && opts->hub)
        ok = (c->hub = strdup(opts->hub)) != NULL;
    if (!ok) {
        converters_free(c);
        if (r)
            free(r->path);
        free(r);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    }
    c->user_data = opts->user_data;
    r->kind = KCR__WH_CONVERSION;
    r->owned = c;
    r->free_owned = converters_free;
    r->timeout_ms = opts->timeout_ms;
    r->policy = KCR_WEBHOOK_FAIL;
    atomic_init(&r->on_loop, opts->run_on_loop);
    return kcr__wh_route_add(s, r);
}
