/* Read-your-writes: the ctx client of a manager's worker wraps the
 * manager's client and records the resourceVersion of every object written
 * through it (create, update, patch, status) whose resource and namespace a
 * source of the controller caches. After the reconcile those writes become
 * the key's fences, kept in the key's record in the workqueue (workers.c); the next reconcile of the key first waits (bounded)
 * until the caches have seen them: the cached object's resourceVersion >= R,
 * or, when the cache does not have the object (deleted since), the
 * informer's cache has applied a change at resourceVersion >= R. resourceVersions are compared as integers (etcd
 * revisions); a non-integer one is not fenced. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/client_impl.h"
#include "controller/manager_internal.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/grow.h"
#include "core/log.h"
#include "informer/informer_internal.h"
#include "object/selector.h"

typedef struct ryw_client {
    kcr_client base;
    mgr_worker *w;
} ryw_client;

#define INNER(c) (((ryw_client *)(c))->w->mc->m->client)

void kcr__ryw_list_clear(ryw_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->f[i].ns);
        free(l->f[i].name);
    }
    free(l->f);
    memset(l, 0, sizeof *l);
}

static bool parse_rv(const char *s, uint64_t *out)
{
    if (!s || !*s)
        return false;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10)
            return false;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return true;
}

static const char *label_of(const char *key, void *ud)
{
    return kcr_object_label(ud, key);
}

/* Records a written object if a source caches it. */
static void record(mgr_worker *w, const kcr_resource *res, const kcr_object *obj)
{
    kcr_controller *c = w->mc->c;
    uint64_t rv;
    if (!obj || !parse_rv(kcr_object_resource_version(obj), &rv))
        return;
    const char *g = res->group ? res->group : "";
    for (size_t i = 0; i < c->n_sources; i++) {
        const kcr__source *s = &c->sources[i];
        if (strcmp(s->resource, res->resource) != 0 || strcmp(s->group, g) != 0 ||
            (s->ns && strcmp(s->ns, kcr_object_namespace(obj)) != 0))
            continue;
        if (s->label_selector) {
            kcr__selector *sel = NULL;
            bool match = kcr__selector_parse(s->label_selector, &sel) == KCR_OK &&
                         kcr__selector_matches(sel, label_of, (void *)obj);
            kcr__selector_free(sel);
            if (!match)
                continue;
        }
        ryw_list *l = &w->writes;
        ryw_fence *grown = kcr__grow(l->f, &l->cap, l->n, sizeof *l->f, 4);
        if (!grown)
            return; /* no fence: at worst a stale read, as without this feature */
        l->f = grown;
        ryw_fence f = {i, strdup(kcr_object_namespace(obj)), strdup(kcr_object_name(obj)), rv};
        if (!f.ns || !f.name) {
            free(f.ns);
            free(f.name);
            return;
        }
        l->f[l->n++] = f;
        return;
    }
}

/* Every request made without a token of its own gets the reconcile's, so a
 * deadline, shutdown or lost lease stops it, even one hanging in a dead
 * server. */
static kcr_cancel *token(kcr_client *c, kcr_cancel *own)
{
    return own ? own : ((ryw_client *)c)->w->cancel;
}

static kcr_err r_get(kcr_client *c, const kcr_resource *res, const char *ns, const char *name,
                     const kcr__get_options *opts, kcr_object **out, kcr_status *st)
{
    kcr_request r = {.resource = res,
                     .ns = ns,
                     .name = name,
                     .subresource = opts->subresource,
                     .resource_version = opts->resource_version,
                     .metadata_only = opts->metadata_only,
                     .cancel = token(c, opts->cancel),
                     .status = st};
    return kcr_client_get(INNER(c), &r, out);
}

/* The request of a write passed on: the reconcile's token unless the caller
 * gave one. */
static kcr_request write_req(kcr_client *c, const kcr_resource *res, const char *ns,
                             const kcr__write_options *opts, kcr_status *st)
{
    return (kcr_request){.resource = res,
                         .ns = ns,
                         .subresource = opts->subresource,
                         .field_manager = opts->field_manager,
                         .force = opts->force,
                         .dry_run = opts->dry_run,
                         .cancel = token(c, opts->cancel),
                         .status = st};
}

/* The end of every write: record what it wrote, hand the object out (or drop it). */
static kcr_err recorded(kcr_client *c, const kcr_resource *res, kcr_err err, kcr_object *obj,
                        kcr_object **out)
{
    if (err == KCR_OK)
        record(((ryw_client *)c)->w, res, obj);
    if (out)
        *out = obj;
    else
        kcr_object_unref(obj);
    return err;
}

static kcr_err r_create(kcr_client *c, const kcr_resource *res, const char *ns, const char *json,
                        size_t len, const kcr__write_options *opts, kcr_object **out,
                        kcr_status *st)
{
    kcr_request r = write_req(c, res, ns, opts, st);
    r.body = json;
    r.body_len = len;
    kcr_object *obj = NULL;
    kcr_err err = kcr_client_create(INNER(c), &r, &obj);
    return recorded(c, res, err, obj, out);
}

static kcr_err r_update(kcr_client *c, const kcr_resource *res, const char *ns, const char *name,
                        const char *json, size_t len, const kcr__write_options *opts,
                        kcr_object **out, kcr_status *st)
{
    (void)name; /* the public update takes it from the body again */
    kcr_request r = write_req(c, res, ns, opts, st);
    r.body = json;
    r.body_len = len;
    kcr_object *obj = NULL;
    kcr_err err = kcr_client_update(INNER(c), &r, &obj);
    return recorded(c, res, err, obj, out);
}

static kcr_err r_patch(kcr_client *c, const kcr_resource *res, const char *ns, const char *name,
                       kcr_patch_type type, const char *patch, size_t len,
                       const kcr__write_options *opts, kcr_object **out, kcr_status *st)
{
    kcr_request r = write_req(c, res, ns, opts, st);
    r.name = name;
    r.patch_type = type;
    r.body = patch;
    r.body_len = len;
    kcr_object *obj = NULL;
    kcr_err err = kcr_client_patch(INNER(c), &r, &obj);
    return recorded(c, res, err, obj, out);
}

static kcr_err r_del(kcr_client *c, const kcr_resource *res, const char *ns, const char *name,
                     const kcr__delete_options *opts, kcr_object **out, kcr_status *st)
{
    kcr_request r = {.resource = res,
                     .ns = ns,
                     .name = name,
                     .propagation_policy = opts->propagation_policy,
                     .precondition_uid = opts->precondition_uid,
                     .precondition_resource_version = opts->precondition_resource_version,
                     .grace_period_ms = opts->grace_period_ms,
                     .has_grace_period = opts->has_grace_period,
                     .dry_run = opts->dry_run,
                     .cancel = token(c, opts->cancel),
                     .status = st};
    return kcr_client_delete(INNER(c), &r, out);
}

/* The request of a list or watch passed on, with the reconcile's token
 * unless the caller gave one. */
static kcr_request stream_req(kcr_client *c, const kcr_resource *res, const char *ns,
                              const kcr__list_options *opts, kcr_status *st)
{
    return (kcr_request){.resource = res,
                         .ns = ns,
                         .label_selector = opts->label_selector,
                         .field_selector = opts->field_selector,
                         .resource_version = opts->resource_version,
                         .resource_version_match = opts->resource_version_match,
                         .limit = opts->limit,
                         .continue_token = opts->continue_token,
                         .timeout_ms = opts->timeout_ms,
                         .metadata_only = opts->metadata_only,
                         .allow_bookmarks = opts->allow_bookmarks,
                         .send_initial_events = opts->send_initial_events,
                         .idle_timeout_ms = opts->idle_timeout_ms,
                         .cancel = token(c, opts->cancel),
                         .status = st};
}

static kcr_err r_list(kcr_client *c, const kcr_resource *res, const char *ns,
                      const kcr__list_options *opts, kcr_list_item_fn fn, void *ud,
                      kcr_list_meta *meta, kcr_status *st)
{
    kcr_request r = stream_req(c, res, ns, opts, st);
    return kcr_client_list(INNER(c), &r, fn, ud, meta);
}

static kcr_err r_watch(kcr_client *c, const kcr_resource *res, const char *ns,
                       const kcr__list_options *opts, kcr_watch_event_fn fn, void *ud,
                       kcr_status *st)
{
    kcr_request r = stream_req(c, res, ns, opts, st);
    return kcr_client_watch(INNER(c), &r, fn, ud);
}

static kcr_err r_resolve(kcr_client *c, const kcr__disc_query *q, bool refresh,
                         kcr_api_resource *out, kcr_status *st)
{
    kcr_client *in = INNER(c);
    kcr__disc_query own = *q;
    own.cancel = token(c, q->cancel);
    if (refresh)
        in->ops->invalidate(in);
    return in->ops->resolve(in, &own, false, out, st);
}

static void r_invalidate(kcr_client *c)
{
    kcr_client_invalidate_discovery(INNER(c));
}

static kcr_err r_raw(kcr_client *c, const char *path, const char *body, size_t body_len,
                     const kcr_raw_options *opts, char **out, size_t *out_len, kcr_status *st)
{
    kcr_raw_options o = *opts;
    o.cancel = token(c, o.cancel);
    o.body = body;
    o.body_len = body_len;
    o.status = st;
    return kcr_client_request(INNER(c), path, &o, out, out_len);
}

static void r_destroy(kcr_client *c)
{
    free(c->ns);
    free(c);
}

static const kcr__client_ops ryw_ops = {
    .get = r_get,
    .create = r_create,
    .update = r_update,
    .patch = r_patch,
    .del = r_del,
    .list = r_list,
    .watch = r_watch,
    .resolve = r_resolve,
    .invalidate = r_invalidate,
    .raw = r_raw,
    .destroy = r_destroy,
};

kcr_err kcr__ryw_client_new(mgr_worker *w, kcr_client **out)
{
    ryw_client *c = calloc(1, sizeof *c);
    if (!c || !(c->base.ns = strdup(kcr_client_namespace(w->mc->m->client)))) {
        free(c);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory making a reconcile client");
    }
    c->base.ops = &ryw_ops;
    c->w = w;
    *out = &c->base;
    return KCR_OK;
}

void kcr__ryw_commit(mgr_worker *w, mgr_keyrec *rec)
{
    if (!w->writes.n)
        return;
    /* the newest writes replace older fences of this key */
    kcr__ryw_list_clear(&rec->fences);
    rec->fences = w->writes;
    memset(&w->writes, 0, sizeof w->writes);
}

static bool seen(mgr_ctl *mc, const ryw_fence *f)
{
    kcr_object *obj = kcr_lister_get(mc->c->sources[f->src].cache, f->ns, f->name);
    uint64_t rv = 0;
    bool ok;
    if (obj) {
        ok = parse_rv(kcr_object_resource_version(obj), &rv) && rv >= f->rv;
        kcr_object_unref(obj);
    } else {
        /* not the reflector's last synced resourceVersion: the reflector
         * sets it when it queues a change, before the cache applies it, so
         * a created object would pass the fence before the cache has it */
        ok = kcr__informer_applied_rv(mc->infs[f->src]) >= f->rv;
    }
    return ok;
}

void kcr__ryw_wait(mgr_ctl *mc, const char *key, mgr_keyrec *rec)
{
    ryw_list l = rec->fences;
    memset(&rec->fences, 0, sizeof rec->fences);
    if (!l.n)
        return;
    kcr_controller *c = mc->c;
    int64_t deadline = kcr__now_ns() + c->ryw_timeout_ms * KCR_NS_PER_MS;
    bool waited = false, gave_up = false;
    for (size_t i = 0; i < l.n && !gave_up; i++)
        while (!seen(mc, &l.f[i])) {
            if (!waited) {
                waited = true;
                KCR__COUNT(c, ryw_waits, 1);
            }
            if (kcr__now_ns() >= deadline || atomic_load(&mc->m->stopping)) {
                gave_up = true;
                KCR__COUNT(c, ryw_timeouts, 1);
                kcr__log(KCR_LOG_WARN, "controller",
                         "controller \"%s\": %s: the cache has not seen resourceVersion %llu of "
                         "%s/%s after %lld ms; reconciling anyway",
                         c->name, key, (unsigned long long)l.f[i].rv, l.f[i].ns, l.f[i].name,
                         (long long)c->ryw_timeout_ms);
                break;
            }
            struct timespec ts = {0, 2 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    kcr__ryw_list_clear(&l);
}
