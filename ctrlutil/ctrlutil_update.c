/* Read (from a cache when given one), mutate, compare as the server stores
 * (ctrlutil_equal.c), write, and on a conflict read the server again: status
 * updates and create-or-update. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/abi.h"
#include "core/error.h"
#include "ctrlutil/ctrlutil_internal.h"
#include "core/log.h"

struct target {
    kcr_client *c;
    const kcr_resource *res;
    const char *ns; /* never NULL */
    const char *name;
    kcr_ctrlutil_mutate_fn mutate;
    void *user_data;
};

static kcr_err check_args(const struct target *t)
{
    if (!t->c)
        return kcr__fail(KCR_ERR_INVALID, "controller helper: NULL client");
    if (!t->res || !t->res->version || !t->res->resource)
        return kcr__fail(KCR_ERR_INVALID, "controller helper: no resource (or one without "
                                          "version or resource name) in the options");
    if (!t->name)
        return kcr__fail(KCR_ERR_INVALID, "controller helper: no name in the options");
    if (!t->mutate)
        return kcr__fail(KCR_ERR_INVALID, "controller helper: no mutate callback in the options");
    if (!*t->name)
        return kcr__fail(KCR_ERR_INVALID, "controller helper: empty name");
    return KCR_OK;
}

/* A new object's starting point: apiVersion from the resource, name, namespace. */
static kcr_err seed(kcr_object_edit *e, const struct target *t)
{
    char av[512];
    const char *group = t->res->group ? t->res->group : "";
    snprintf(av, sizeof av, "%s%s%s", group, *group ? "/" : "", t->res->version);
    kcr_err err = kcr_object_edit_set_string(e, "apiVersion", av);
    if (err == KCR_OK)
        err = kcr_object_edit_set_string(e, "metadata.name", t->name);
    if (err == KCR_OK && *t->ns)
        err = kcr_object_edit_set_string(e, "metadata.namespace", t->ns);
    return err;
}

/* Runs the callback on a copy of `cur` (or on a new object when NULL);
 * *next is the result. */
static kcr_err mutate_copy(const struct target *t, const kcr_object *cur, kcr_object **next)
{
    *next = NULL;
    kcr_object_edit *e;
    kcr_err err = kcr_object_edit_new(cur, &e);
    if (err != KCR_OK)
        return err;
    err = cur ? KCR_OK : seed(e, t);
    if (err == KCR_OK && (err = t->mutate(e, cur, t->user_data)) != KCR_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", kcr_last_error());
        err = kcr__fail(err, "the mutate callback failed (%s)%s%s", kcr_strerror(err),
                        why[0] ? ": " : "", why);
    }
    if (err == KCR_OK)
        err = kcr_object_edit_freeze(e, next);
    kcr_object_edit_free(e);
    if (err == KCR_OK && (strcmp(kcr_object_name(*next), t->name) != 0 ||
                          strcmp(kcr_object_namespace(*next), t->ns) != 0)) {
        err = kcr__fail(KCR_ERR_INVALID,
                        "the mutate callback must not change metadata.name or metadata.namespace "
                        "(%s%s%s became %s%s%s)",
                        t->ns, *t->ns ? "/" : "", t->name, kcr_object_namespace(*next),
                        *kcr_object_namespace(*next) ? "/" : "", kcr_object_name(*next));
        kcr_object_unref(*next);
        *next = NULL;
    }
    return err;
}

enum write_kind { WRITE_STATUS, WRITE_OBJECT };

/* The current object: from the cache when it has it (with apiVersion and
 * kind, which a write body needs), else from the server. A cache miss reads
 * the server too, so a create never trusts a cache that has not caught up. */
static kcr_err read_current(const struct target *t, kcr_store *cache, kcr_object **cur,
                            kcr_status *st)
{
    if (cache) {
        char key[600];
        int n = snprintf(key, sizeof key, "%s%s%s", t->ns, *t->ns ? "/" : "", t->name);
        kcr_object *hit = n > 0 && (size_t)n < sizeof key ? kcr_store_get_by_key(cache, key) : NULL;
        if (hit && *kcr_object_api_version(hit) && *kcr_object_kind(hit)) {
            *cur = hit;
            return KCR_OK;
        }
        kcr_object_unref(hit);
    }
    return kcr_client_get(
        t->c, &(kcr_request){.resource = t->res, .ns = t->ns, .name = t->name, .status = st}, cur);
}

/* Nothing to write: the server would store what it has. A status write can
 * only change the status, so only that is compared. */
static bool nothing_to_write(enum write_kind kind, const kcr_object *cur, const kcr_object *next)
{
    if (kind == WRITE_STATUS)
        return kcr__ctrlutil_equal(kcr_object_get(cur, "status"), kcr_object_get(next, "status"),
                                   "status");
    return kcr__ctrlutil_equal(kcr_object_root(cur), kcr_object_root(next), NULL);
}

/* kcr__ctrlutil_context for a target. */
static kcr_err fail_on(const struct target *t, kcr_err err, const char *verb, const kcr_object *obj)
{
    return kcr__ctrlutil_context(err, verb, obj, t->res, t->ns, t->name);
}

static kcr_err run(const struct target *t, enum write_kind kind,
                   const kcr_ctrlutil_write_options *o, kcr_object **out)
{
    kcr_ctrlutil_op_result *result = o->result;
    kcr_status *st = o->status;
    if (result)
        *result = KCR_CTRLUTIL_UNCHANGED;
    if (out)
        *out = NULL;
    if (st)
        kcr_status_clear(st);
    kcr_err err = check_args(t);
    if (err != KCR_OK)
        return err;
    int retries = kcr__ctrlutil_retries(o->max_retries);
    for (int attempt = 0;; attempt++) {
        kcr_object *cur = NULL, *next = NULL, *written = NULL;
        /* after a lost race the cache is known stale: read the server */
        err = read_current(t, attempt == 0 ? o->cache : NULL, &cur, st);
        bool create = err == KCR_ERR_NOT_FOUND && kind == WRITE_OBJECT;
        if (err != KCR_OK && !create)
            return fail_on(t, err, "get", NULL);
        if (create) { /* an expected 404: not the caller's error */
            if (st)
                kcr_status_clear(st);
            kcr__clear_error();
        }
        if ((err = mutate_copy(t, create ? NULL : cur, &next)) != KCR_OK) {
            err = fail_on(t, err, kind == WRITE_STATUS ? "update status of" : "create-or-update",
                          cur);
            kcr_object_unref(cur);
            return err;
        }
        if (!create && nothing_to_write(kind, cur, next)) {
            kcr_object_unref(next);
            if (out)
                *out = cur;
            else
                kcr_object_unref(cur);
            return KCR_OK;
        }
        char *json = NULL;
        size_t len = 0;
        err = kcr_object_to_json(next, &json, &len);
        if (err != KCR_OK) {
            kcr_object_unref(next);
            kcr_object_unref(cur);
            return err;
        }
        if (create)
            err = kcr_client_create(
                t->c,
                &(kcr_request){
                    .resource = t->res, .ns = t->ns, .body = json, .body_len = len, .status = st},
                &written);
        else if (kind == WRITE_STATUS)
            err = kcr_client_update(t->c,
                                    &(kcr_request){.resource = t->res,
                                                   .ns = t->ns,
                                                   .subresource = "status",
                                                   .body = json,
                                                   .body_len = len,
                                                   .status = st},
                                    &written);
        else
            err = kcr_client_update(
                t->c,
                &(kcr_request){
                    .resource = t->res, .ns = t->ns, .body = json, .body_len = len, .status = st},
                &written);
        free(json);
        if (err == KCR_OK) {
            kcr_object_unref(next);
            /* the server keeps the resourceVersion of a write it did not
             * apply (it stored what it had): that is no update */
            bool applied = create || strcmp(kcr_object_resource_version(written),
                                            kcr_object_resource_version(cur)) != 0;
            kcr_object_unref(cur);
            if (result)
                *result = create ? KCR_CTRLUTIL_CREATED
                                 : applied ? KCR_CTRLUTIL_UPDATED : KCR_CTRLUTIL_UNCHANGED;
            if (out)
                *out = written;
            else
                kcr_object_unref(written);
            return KCR_OK;
        }
        /* a stale resourceVersion, or a create that lost a race */
        bool lost = err == KCR_ERR_CONFLICT || (create && err == KCR_ERR_EXISTS);
        if (!lost || attempt >= retries) {
            err = fail_on(t, err,
                          create                 ? "create"
                          : kind == WRITE_STATUS ? "update status of"
                                                 : "update",
                          cur ? cur : next);
            kcr_object_unref(next);
            kcr_object_unref(cur);
            return err;
        }
        kcr_object_unref(next);
        kcr_object_unref(cur);
        kcr__log(KCR_LOG_DEBUG, "ctrlutil", "%s %s%s%s: %s, retrying",
                 kind == WRITE_STATUS ? "status update of" : "create-or-update of", t->ns,
                 *t->ns ? "/" : "", t->name, kcr_strerror(err));
    }
}

/* The target named by opts (never NULL: KCR__ABI_OPTS gave the defaults). */
static kcr_err run_opts(kcr_client *c, const kcr_ctrlutil_write_options *opts, kcr_object **out,
                        enum write_kind kind)
{
    struct target t = {c, opts->resource, opts->ns ? opts->ns : "", opts->name, opts->mutate,
                       opts->user_data};
    return run(&t, kind, opts, out);
}

kcr_err (kcr_ctrlutil_update_status)(size_t opts_size, kcr_client *c,
                                     const kcr_ctrlutil_write_options *opts, kcr_object **out)
{
    if (out)
        *out = NULL;
    KCR__ABI_OPTS(kcr_ctrlutil_write_options, opts, opts_size);
    return run_opts(c, opts, out, WRITE_STATUS);
}

kcr_err (kcr_ctrlutil_create_or_update)(size_t opts_size, kcr_client *c,
                                        const kcr_ctrlutil_write_options *opts, kcr_object **out)
{
    if (out)
        *out = NULL;
    KCR__ABI_OPTS(kcr_ctrlutil_write_options, opts, opts_size);
    return run_opts(c, opts, out, WRITE_OBJECT);
}
