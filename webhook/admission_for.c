/* A defaulter and a validator for one kind in one call, at kubebuilder's
 * paths (controller-runtime's WithDefaulter / WithValidator). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "webhook/webhook_internal.h"

struct for_pair {
    kcr_default_fn default_fn;
    kcr_validate_fn validate[4]; /* by kcr_admission_operation - 1 (CONNECT: none) */
    void *user_data;
};

/* An error from the user's function denies with 403 and its message. */
static kcr_err deny_with(kcr_admission_response *resp, kcr_err err)
{
    return kcr_admission_deny(resp, 403, *kcr_last_error() ? kcr_last_error()
                                                           : kcr_strerror(err));
}

static kcr_err run_default(const kcr_admission_request *req, kcr_admission_response *resp,
                           void *user_data)
{
    const struct for_pair *p = user_data;
    if (!req->object) /* DELETE: nothing to default */
        return KCR_OK;
    kcr_object_edit *e;
    kcr_err err = kcr_admission_edit(resp, &e);
    if (err)
        return err;
    err = p->default_fn(req, e, p->user_data);
    return err ? deny_with(resp, err) : KCR_OK;
}

static kcr_err run_validate(const kcr_admission_request *req, kcr_admission_response *resp,
                            void *user_data)
{
    const struct for_pair *p = user_data;
    kcr_validate_fn fn = p->validate[req->operation - 1];
    if (!fn)
        return KCR_OK;
    kcr_err err = fn(req, resp, p->user_data);
    return err ? deny_with(resp, err) : KCR_OK;
}

/* kubebuilder's path: /<verb>-<group, '.' -> '-'>-<version>-<kind lowercase>. */
static char *default_path(const char *verb, const kcr_webhook_for_options *o)
{
    char *p = NULL;
    if (asprintf(&p, "/%s-%s%s%s-%s", verb, o->group, *o->group ? "-" : "", o->version,
                 o->kind) < 0)
        return NULL;
    for (char *c = p + 1; *c; c++)
        *c = *c == '.' ? '-' : (char)tolower((unsigned char)*c);
    return p;
}

static kcr_err add_one(kcr_webhook_server *s, const kcr_webhook_for_options *o,
                       kcr_admission_type type, const char *path, kcr_admission_fn fn,
                       struct for_pair *pair, bool owns_pair)
{
    struct kcr__wh_route *r = calloc(1, sizeof *r);
    char *p = path ? strdup(path)
                   : default_path(type == KCR_ADMISSION_MUTATING ? "mutate" : "validate", o);
    if (!r || !p) {
        free(r);
        free(p);
        if (owns_pair)
            free(pair);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    }
    r->path = p;
    r->kind = KCR__WH_ADMISSION;
    r->type = type;
    r->fn = fn;
    r->user_data = pair;
    r->timeout_ms = o->timeout_ms;
    r->policy = o->failure_policy;
    atomic_init(&r->on_loop, o->run_on_loop);
    if (owns_pair) {
        r->owned = pair;
        r->free_owned = free;
    }
    return kcr__wh_route_add(s, r);
}

kcr_err kcr_webhook_server_add_for(kcr_webhook_server *s, const kcr_webhook_for_options *opts)
{
    if (!s || !opts || !opts->group || !opts->version || !*opts->version || !opts->kind ||
        !*opts->kind)
        return kcr__fail(KCR_ERR_INVALID,
                         "kcr_webhook_server_add_for: group, version and kind are required");
    struct for_pair *pair = calloc(1, sizeof *pair);
    if (!pair)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    pair->default_fn = opts->default_fn;
    pair->validate[KCR_ADMISSION_CREATE - 1] = opts->validate_create;
    pair->validate[KCR_ADMISSION_UPDATE - 1] = opts->validate_update;
    pair->validate[KCR_ADMISSION_DELETE - 1] = opts->validate_delete;
    pair->user_data = opts->user_data;
    bool validates = opts->validate_create || opts->validate_update || opts->validate_delete;
    /* the validating route owns the pair when there is one, else the mutating */
    kcr_err err = KCR_OK;
    if (validates)
        err = add_one(s, opts, KCR_ADMISSION_VALIDATING, opts->validate_path, run_validate,
                      pair, true);
    if (!err && opts->default_fn)
        err = add_one(s, opts, KCR_ADMISSION_MUTATING, opts->mutate_path, run_default, pair,
                      !validates);
    if (!validates && !opts->default_fn)
        free(pair);
    return err;
}
