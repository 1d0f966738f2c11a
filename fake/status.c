/* The fake's error answers: Status objects worded as the apiserver words
 * them, so code that matches on reason, code or message behaves alike. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "fake/fake_internal.h"

void kcr__fake_qualified(const kcr_resource *res, char *buf, size_t size)
{
    if (res->group && *res->group)
        snprintf(buf, size, "%s.%s", res->resource, res->group);
    else
        snprintf(buf, size, "%s", res->resource);
}

kcr_err kcr__fake_status(kcr_status *st, int code, const char *reason, const kcr_resource *res,
                         const char *name, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    kcr__status_make(st, code, reason, msg);
    if (res) {
        free(st->details.group);
        st->details.group = strdup(res->group ? res->group : "");
        free(st->details.kind);
        st->details.kind = strdup(res->resource);
    }
    if (name) {
        free(st->details.name);
        st->details.name = strdup(name);
    }
    return kcr__status_fail(st);
}

kcr_err kcr__fake_bad_request(kcr_status *st, const char *msg)
{
    return kcr__fake_status(st, 400, "BadRequest", NULL, NULL, "%s", msg);
}

kcr_err kcr__fake_not_found(kcr_status *st, const kcr_resource *res, const char *name)
{
    char q[300];
    kcr__fake_qualified(res, q, sizeof q);
    return kcr__fake_status(st, 404, "NotFound", res, name, "%s \"%s\" not found", q, name);
}

kcr_err kcr__fake_invalid(kcr_status *st, const kcr_resource *res, const char *name,
                          const char *cause_type, const char *field, const char *detail)
{
    char q[300];
    kcr__fake_qualified(res, q, sizeof q);
    kcr_err err = kcr__fake_status(st, 422, "Invalid", res, name, "%s \"%s\" is invalid: %s: %s", q,
                                   name, field, detail);
    st->details.causes = calloc(1, sizeof *st->details.causes);
    if (st->details.causes) {
        st->details.n_causes = 1;
        st->details.causes[0].type = strdup(cause_type);
        st->details.causes[0].message = strdup(detail);
        st->details.causes[0].field = strdup(field);
    }
    return err;
}

/* "widgets.example.com/v1" or "v1" */
static void group_version(const kcr_resource *res, char *buf, size_t size)
{
    snprintf(buf, size, "%s%s%s", res->group && *res->group ? res->group : "",
             res->group && *res->group ? "/" : "", res->version);
}

kcr_err kcr__fake_not_served(kcr_status *st, const kcr_resource *res, const char *subresource)
{
    kcr__status_make(st, 404, "NotFound", "the server could not find the requested resource");
    kcr_err err = kcr__status_fail(st);
    char gv[400];
    group_version(res, gv, sizeof gv);
    if (subresource)
        return kcr__fail(err,
                         "%s (the fake serves %s %s, without a \"%s\" subresource, as "
                         "discovery lists it)",
                         kcr_last_error(), gv, res->resource, subresource);
    return kcr__fail(err,
                     "%s (the fake does not serve %s %s: register it with kcr_fake_register() "
                     "or create its CustomResourceDefinition in the fake, e.g. with "
                     "kcr_testkit_seed())",
                     kcr_last_error(), gv, res->resource);
}

kcr_err kcr__fake_not_allowed(kcr_status *st, const kcr_resource *res, const char *subresource,
                              kcr_fake_verb verb)
{
    static const char *const verbs[] = {"any",    "get",   "list",  "watch",
                                        "create", "update", "patch", "delete"};
    char gv[400];
    group_version(res, gv, sizeof gv);
    kcr_err err = kcr__fake_status(st, 405, "MethodNotAllowed", res, NULL,
                                   "the server does not allow this method on the requested "
                                   "resource");
    return kcr__fail(err, "%s (discovery lists no \"%s\" for %s %s%s%s)", kcr_last_error(),
                     (unsigned)verb < 8 ? verbs[verb] : "?", gv, res->resource,
                     subresource ? "/" : "", subresource ? subresource : "");
}

kcr_err kcr__fake_unsupported_sub(kcr_status *st, const kcr_resource *res, const char *subresource)
{
    char q[300];
    kcr__fake_qualified(res, q, sizeof q);
    return kcr__fake_status(st, 400, "BadRequest", res, NULL,
                            "the fake does not implement the \"%s\" subresource of %s (the "
                            "apiserver serves it; the fake serves only \"status\")",
                            subresource, q);
}
