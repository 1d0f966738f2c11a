/* Finalizers added and removed with guarded JSON patches (kube-rs's way):
 * the patch tests exactly what it relies on, so a concurrent writer makes it
 * fail instead of being overwritten; then the object is read again and the
 * patch rebuilt, a bounded number of times. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/abi.h"
#include "core/error.h"
#include "ctrlutil/ctrlutil_internal.h"
#include "core/log.h"

/* The patch turning `cur` into the wanted state; *needed false when `cur`
 * is already there. */
static void build_patch(const kcr_object *cur, const char *finalizer, bool add, kcr__buf *b,
                        bool *needed)
{
    bool present = kcr_object_has_finalizer(cur, finalizer);
    *needed = add != present;
    if (!*needed)
        return;
    kcr__buf_str(b, "[");
    if (add) {
        /* the whole list as we saw it (null when absent: the apiserver's
         * test treats a missing member as null) */
        kcr__buf_str(b, "{\"op\":\"test\",\"path\":\"/metadata/finalizers\",\"value\":");
        kcr__ctrlutil_json_value(b, kcr_object_get(cur, "metadata.finalizers"));
        if (kcr_object_finalizer_count(cur) > 0) {
            kcr__buf_str(b, "},{\"op\":\"add\",\"path\":\"/metadata/finalizers/-\",\"value\":");
            kcr__buf_json_string(b, finalizer, strlen(finalizer));
        } else {
            kcr__buf_str(b, "},{\"op\":\"add\",\"path\":\"/metadata/finalizers\",\"value\":[");
            kcr__buf_json_string(b, finalizer, strlen(finalizer));
            kcr__buf_str(b, "]");
        }
        kcr__buf_str(b, "}");
    } else {
        /* highest index first, so earlier indexes stay valid */
        bool first = true;
        for (size_t i = kcr_object_finalizer_count(cur); i-- > 0;) {
            const char *f = kcr_object_finalizer(cur, i);
            if (!f || strcmp(f, finalizer) != 0)
                continue;
            char ptr[64];
            snprintf(ptr, sizeof ptr, "/metadata/finalizers/%zu", i);
            kcr__buf_str(b,
                         first ? "{\"op\":\"test\",\"path\":\"" : ",{\"op\":\"test\",\"path\":\"");
            kcr__buf_str(b, ptr);
            kcr__buf_str(b, "\",\"value\":");
            kcr__buf_json_string(b, finalizer, strlen(finalizer));
            kcr__buf_str(b, "},{\"op\":\"remove\",\"path\":\"");
            kcr__buf_str(b, ptr);
            kcr__buf_str(b, "\"}");
            first = false;
        }
    }
    kcr__buf_str(b, "]");
}

/* "add finalizer F to" / "remove finalizer F from", as the context of an
 * error about the object. */
static kcr_err fail_on(kcr_err err, bool add, const char *finalizer, const kcr_resource *res,
                       const kcr_object *obj)
{
    char verb[320];
    snprintf(verb, sizeof verb, "%s finalizer %s %s", add ? "add" : "remove", finalizer,
             add ? "to" : "from");
    return kcr__ctrlutil_context(err, verb, obj, res, kcr_object_namespace(obj),
                                 kcr_object_name(obj));
}

static kcr_err change_finalizer(kcr_client *c, const kcr_ctrlutil_finalizer_options *o, bool add,
                                kcr_object **out)
{
    bool *changed = o->changed;
    kcr_status *st = o->status;
    const kcr_resource *res = o->resource;
    const kcr_object *obj = o->object;
    const char *finalizer = o->finalizer;
    if (changed)
        *changed = false;
    if (st)
        kcr_status_clear(st);
    if (!c)
        return kcr__fail(KCR_ERR_INVALID, "finalizer helper: NULL client");
    if (!res || !obj || !finalizer)
        return kcr__fail(KCR_ERR_INVALID, "finalizer helper: the options need a resource, an "
                                          "object and a finalizer");
    if (!*finalizer)
        return kcr__fail(KCR_ERR_INVALID, "finalizer helper: empty finalizer name");
    const char *ns = kcr_object_namespace(obj), *name = kcr_object_name(obj);
    int retries = kcr__ctrlutil_retries(o->max_retries);
    kcr_object *cur = kcr_object_ref(obj);
    kcr_err err;
    for (int attempt = 0;; attempt++) {
        kcr__buf b = {0};
        bool needed;
        build_patch(cur, finalizer, add, &b, &needed);
        if (!needed) {
            kcr__buf_free(&b);
            if (out)
                *out = kcr_object_ref(cur);
            err = KCR_OK;
            break;
        }
        if (b.oom) {
            kcr__buf_free(&b);
            err = kcr__fail(KCR_ERR_NOMEM, "out of memory building a finalizer patch");
            break;
        }
        kcr_object *patched = NULL;
        err = kcr_client_patch(c,
                               &(kcr_request){.resource = res,
                                              .ns = ns,
                                              .name = name,
                                              .body = b.s,
                                              .body_len = b.len,
                                              .status = st},
                               &patched);
        kcr__buf_free(&b);
        if (err == KCR_OK) {
            if (changed)
                *changed = true;
            if (out)
                *out = patched;
            else
                kcr_object_unref(patched);
            break;
        }
        if (!add && err == KCR_ERR_NOT_FOUND)
            goto gone;
        /* 422: a failed test (or a real rejection); 409: a conflict */
        if ((err != KCR_ERR_INVALID_OBJECT && err != KCR_ERR_CONFLICT) || attempt >= retries)
            break;
        char why[512];
        snprintf(why, sizeof why, "%s", kcr_last_error());
        kcr_status gst = {0};
        kcr_object *fresh = NULL;
        kcr_err gerr = kcr_client_get(
            c, &(kcr_request){.resource = res, .ns = ns, .name = name, .status = &gst}, &fresh);
        if (gerr != KCR_OK) {
            if (st)
                kcr_status_copy(st, &gst);
            kcr_status_clear(&gst);
            if (!add && gerr == KCR_ERR_NOT_FOUND)
                goto gone;
            err = gerr;
            break;
        }
        bool raced =
            strcmp(kcr_object_resource_version(fresh), kcr_object_resource_version(cur)) != 0;
        kcr_object_unref(cur);
        cur = fresh;
        if (err == KCR_ERR_INVALID_OBJECT && !raced) {
            /* nothing changed under us: the server rejects the patch itself */
            err = kcr__fail(err, "%s", why);
            break;
        }
        kcr__log(KCR_LOG_DEBUG, "ctrlutil", "%s finalizer %s on %s%s%s: object changed, retrying",
                 add ? "adding" : "removing", finalizer, ns, *ns ? "/" : "", name);
    }
    if (err != KCR_OK)
        err = fail_on(err, add, finalizer, res, cur);
    kcr_object_unref(cur);
    return err;
gone:
    kcr_object_unref(cur);
    if (st)
        kcr_status_clear(st);
    kcr__clear_error();
    return KCR_OK;
}

kcr_err (kcr_ctrlutil_add_finalizer)(size_t opts_size, kcr_client *c,
                                     const kcr_ctrlutil_finalizer_options *opts, kcr_object **out)
{
    if (out)
        *out = NULL;
    KCR__ABI_OPTS(kcr_ctrlutil_finalizer_options, opts, opts_size);
    return change_finalizer(c, opts, true, out);
}

kcr_err (kcr_ctrlutil_remove_finalizer)(size_t opts_size, kcr_client *c,
                                        const kcr_ctrlutil_finalizer_options *opts,
                                        kcr_object **out)
{
    if (out)
        *out = NULL;
    KCR__ABI_OPTS(kcr_ctrlutil_finalizer_options, opts, opts_size);
    return change_finalizer(c, opts, false, out);
}
