/* What every request goes through before the fake serves it (accounting,
 * the hook, injected errors, 404 for what it does not serve), and the ONE
 * preamble of create, update, patch and delete: dryRun and subresource
 * checks, the body's shape, the name and namespace rules, preconditions and
 * the apiserver's optimistic-concurrency rule. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "fake/fake_internal.h"

/* The apiserver's message for a stale resourceVersion (its optimistic lock). */
#define OPTIMISTIC_LOCK_MSG                                                                        \
    "the object has been modified; please apply your changes to the latest version and try "       \
    "again"

static kcr__fcounter *counter_for(kcr_fake *f, kcr_fake_verb verb, const char *rkey)
{
    for (size_t i = 0; i < f->n_counters; i++)
        if (f->counters[i].verb == verb && strcmp(f->counters[i].rkey, rkey) == 0)
            return &f->counters[i];
    char *key = strdup(rkey);
    kcr__fcounter *nc = key ? realloc(f->counters, (f->n_counters + 1) * sizeof *nc) : NULL;
    if (!nc) {
        free(key);
        return NULL;
    }
    f->counters = nc;
    kcr__fcounter *c = &f->counters[f->n_counters++];
    *c = (kcr__fcounter){.verb = verb, .rkey = key};
    return c;
}

static unsigned verb_bit(kcr_fake_verb verb)
{
    switch (verb) {
    case KCR_FAKE_GET: return KCR__VERB_GET;
    case KCR_FAKE_LIST: return KCR__VERB_LIST;
    case KCR_FAKE_WATCH: return KCR__VERB_WATCH;
    case KCR_FAKE_CREATE: return KCR__VERB_CREATE;
    case KCR_FAKE_UPDATE: return KCR__VERB_UPDATE;
    case KCR_FAKE_PATCH: return KCR__VERB_PATCH;
    case KCR_FAKE_DELETE: return KCR__VERB_DELETE;
    default: return KCR__VERB_ALL;
    }
}

/* 404 for what discovery does not list, 405 for a verb it does not allow; lock held. */
static kcr_err check_served(kcr_fake *f, kcr_fake_verb verb, const kcr_resource *res,
                            const char *subresource, bool *has_status, kcr_status *st)
{
    const kcr__disc_entry *e = kcr__fake_served(f, res);
    if (!e)
        return kcr__fake_not_served(st, res, NULL);
    if (has_status)
        *has_status = kcr__disc_find_sub(e, "status") != NULL;
    unsigned verbs = e->verbs;
    if (subresource) {
        const kcr__disc_sub *sub = kcr__disc_find_sub(e, subresource);
        if (!sub)
            return kcr__fake_not_served(st, res, subresource);
        verbs = sub->verbs;
    }
    return verbs & verb_bit(verb) ? KCR_OK : kcr__fake_not_allowed(st, res, subresource, verb);
}

kcr_err kcr__fake_begin(kcr_fake *f, kcr_fake_verb verb, const kcr_resource *res, const char *ns,
                        const char *name, const char *subresource, bool *has_status,
                        kcr_status *st)
{
    char *rkey = kcr__fake_rkey(res);
    if (!rkey)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    pthread_mutex_lock(&f->lock);
    kcr__fcounter *c = counter_for(f, verb, rkey);
    if (c)
        c->n++;
    kcr_fake_hook_fn hook = f->hook;
    void *hook_ud = f->hook_ud;
    pthread_mutex_unlock(&f->lock);
    if (hook)
        hook(verb, res, ns ? ns : "", name, hook_ud);
    kcr_err err = KCR_OK;
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < f->n_rules; i++) {
        kcr__frule *r = &f->rules[i];
        if (r->times == 0 || (r->verb != KCR_FAKE_ANY && r->verb != verb) ||
            (r->rkey && strcmp(r->rkey, rkey) != 0) ||
            (r->ns && strcmp(r->ns, ns ? ns : "") != 0) ||
            (r->name && (!name || strcmp(r->name, name) != 0)))
            continue;
        if (r->times > 0)
            r->times--;
        kcr__status_make(st, r->code, r->reason, r->message);
        err = kcr__status_fail(st);
        break;
    }
    if (err == KCR_OK)
        err = check_served(f, verb, res, subresource, has_status, st);
    pthread_mutex_unlock(&f->lock);
    free(rkey);
    return err;
}

/* The body of a create or update: a JSON object whose metadata, when
 * present, is an object with string name/namespace/resourceVersion/uid (the
 * apiserver cannot decode anything else into ObjectMeta: 400). */
static kcr_err parse_body(const char *json, size_t len, struct kcr__node **out, kcr_status *st)
{
    *out = NULL;
    struct kcr__node *doc;
    if (kcr__node_parse(json, len ? len : strlen(json), &doc) != KCR_OK)
        return kcr__fake_bad_request(st, kcr_last_error());
    if (doc->t != KCR__N_MAP) {
        kcr__node_free(doc);
        return kcr__fake_bad_request(st, "the body is not a JSON object");
    }
    const struct kcr__node *md = kcr__fake_member(doc, "metadata");
    static const char *const strings[] = {"name", "generateName", "namespace", "resourceVersion",
                                          "uid"};
    const char *bad = md && md->t != KCR__N_MAP && md->t != KCR__N_NULL ? "metadata" : NULL;
    for (size_t i = 0; !bad && md && i < sizeof strings / sizeof *strings; i++) {
        const struct kcr__node *v = kcr__fake_member(md, strings[i]);
        if (v && v->t != KCR__N_STR && v->t != KCR__N_NULL)
            bad = strings[i];
    }
    if (bad) {
        kcr__node_free(doc);
        char msg[160];
        snprintf(msg, sizeof msg, "the body's metadata%s%s has the wrong type",
                 strcmp(bad, "metadata") != 0 ? "." : "", strcmp(bad, "metadata") != 0 ? bad : "");
        return kcr__fake_bad_request(st, msg);
    }
    *out = doc;
    return KCR_OK;
}

kcr_err kcr__fake_write_begin(kcr__fake_write *w, kcr_fake *f, kcr_fake_verb verb,
                              const kcr_resource *res, const char *ns, const char *name,
                              const char *subresource, bool dry_run, const char *body, size_t len,
                              kcr_status *st)
{
    *w = (kcr__fake_write){.f = f, .res = res, .ns = ns, .name = name, .st = st};
    kcr_err err = kcr__fake_begin(f, verb, res, ns, name, subresource, &w->has_status, st);
    if (err != KCR_OK)
        return err;
    if (dry_run)
        return kcr__fake_bad_request(st, "the fake does not support dryRun");
    w->status_only = subresource && strcmp(subresource, "status") == 0;
    if (subresource && !w->status_only)
        return kcr__fake_unsupported_sub(st, res, subresource);
    if (body && (err = parse_body(body, len, &w->body, st)) != KCR_OK)
        return err;
    if (!(w->rkey = kcr__fake_rkey(res))) {
        kcr__fake_write_end(w);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    }
    return KCR_OK;
}

void kcr__fake_write_end(kcr__fake_write *w)
{
    kcr__node_free(w->body);
    free(w->rkey);
    *w = (kcr__fake_write){0};
}

kcr_err kcr__fake_write_locate(kcr__fake_write *w)
{
    bool found;
    w->pos =
        kcr__fake_find(w->f, w->rkey, kcr__fake_scope_ns(w->f, w->res, w->ns), w->name, &found);
    w->cur = found ? w->f->objs[w->pos] : NULL;
    return found ? KCR_OK : kcr__fake_not_found(w->st, w->res, w->name);
}

kcr_err kcr__fake_write_check_name(kcr__fake_write *w, const struct kcr__node *next)
{
    char msg[700];
    const char *name = kcr__fake_meta_str(next, "name");
    if (!name || strcmp(name, w->name) != 0) {
        snprintf(msg, sizeof msg,
                 "the name of the object (%s) does not match the name on the URL (%s)",
                 name ? name : "", w->name);
        return kcr__fake_bad_request(w->st, msg);
    }
    const char *ns = kcr__fake_meta_str(next, "namespace");
    const char *want = kcr__fake_scope_ns(w->f, w->res, w->ns);
    if (*want && ns && *ns && strcmp(ns, want) != 0) {
        snprintf(msg, sizeof msg,
                 "the namespace of the object (%s) does not match the namespace on the request "
                 "(%s)",
                 ns, want);
        return kcr__fake_bad_request(w->st, msg);
    }
    return KCR_OK;
}

kcr_err kcr__fake_write_preconditions(kcr__fake_write *w, const char *uid, const char *rv,
                                      kcr__fake_rv_rule rule)
{
    const kcr_object *cur = w->cur->obj;
    char q[300];
    kcr__fake_qualified(w->res, q, sizeof q);
    const char *have_uid = kcr_object_uid(cur), *have_rv = kcr_object_resource_version(cur);
    if (uid && strcmp(uid, have_uid) != 0)
        return kcr__fake_status(w->st, 409, "Conflict", w->res, w->name,
                                "Operation cannot be fulfilled on %s \"%s\": Precondition "
                                "failed: UID in precondition: %s, UID in object meta: %s",
                                q, w->name, uid, have_uid);
    if (rule == KCR__FAKE_RV_PRECONDITION) {
        if (rv && strcmp(rv, have_rv) != 0)
            return kcr__fake_status(w->st, 409, "Conflict", w->res, w->name,
                                    "Operation cannot be fulfilled on %s \"%s\": Precondition "
                                    "failed: ResourceVersion in precondition: %s, "
                                    "ResourceVersion in object meta: %s",
                                    q, w->name, rv, have_rv);
        return KCR_OK;
    }
    if (!rv || !*rv) {
        /* An unconditional update: most resources allow one, custom
         * resources do not (their strategy's AllowUnconditionalUpdate). */
        if (kcr__fake_is_custom(w->f, w->res))
            return kcr__fake_invalid(w->st, w->res, w->name, "FieldValueInvalid",
                                     "metadata.resourceVersion",
                                     "Invalid value: 0x0: must be specified for an update");
        return KCR_OK;
    }
    if (strcmp(rv, have_rv) != 0)
        return kcr__fake_status(w->st, 409, "Conflict", w->res, w->name,
                                "Operation cannot be fulfilled on %s \"%s\": " OPTIMISTIC_LOCK_MSG,
                                q, w->name);
    return KCR_OK;
}
