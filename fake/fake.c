/* The fake API server's lifetime, its kcr_client back end table, and the
 * test's controls: injected errors, the request hook, request counters and
 * seeding (kcr_fake_add). See fake_internal.h for the map of its files. */
#include "kcr/fake.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/abi.h"
#include "core/clock.h"
#include "core/error.h"
#include "fake/fake_internal.h"

enum { DEFAULT_HISTORY = 1000, DEFAULT_MAX_QUEUE = 100000 };

uint64_t kcr__fake_rand(kcr_fake *f)
{
    uint64_t x = f->rand_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    f->rand_state = x;
    return x * UINT64_C(2685821657736338717);
}

static void rule_free(kcr__frule *r)
{
    free(r->rkey);
    free(r->ns);
    free(r->name);
    free(r->reason);
    free(r->message);
}

static void fake_unref(kcr_fake *f)
{
    if (!f || atomic_fetch_sub(&f->refs, 1) != 1)
        return;
    for (size_t i = 0; i < f->n; i++)
        kcr__fake_fobj_free(f->objs[i]);
    free(f->objs);
    if (f->hist)
        kcr__fake_history_clear(f);
    free(f->hist);
    for (size_t i = 0; i < f->n_rules; i++)
        rule_free(&f->rules[i]);
    free(f->rules);
    for (size_t i = 0; i < f->n_counters; i++)
        free(f->counters[i].rkey);
    free(f->counters);
    kcr__disc_clear(&f->disc);
    pthread_mutex_destroy(&f->lock);
    free(f);
}

/* ---- the client back end -------------------------------------------------------------------- */

static void fake_invalidate(kcr_client *c)
{
    (void)c;
}

static kcr_err fake_raw(kcr_client *c, const char *path, const char *body, size_t body_len,
                        const kcr_raw_options *opts, char **out, size_t *out_len, kcr_status *st)
{
    (void)c, (void)body, (void)body_len, (void)opts, (void)out, (void)out_len, (void)st;
    return kcr__fail(KCR_ERR_UNSUPPORTED, "the fake API serves no raw requests (%s)", path);
}

static void fake_destroy(kcr_client *c)
{
    kcr__fake_client *fc = (kcr__fake_client *)c;
    fake_unref(fc->f);
    free(fc->ns);
    free(fc);
}

static const kcr__client_ops fake_ops = {
    .get = kcr__fake_get,
    .create = kcr__fake_create,
    .update = kcr__fake_update,
    .patch = kcr__fake_patch,
    .del = kcr__fake_delete,
    .list = kcr__fake_list,
    .watch = kcr__fake_watch,
    .resolve = kcr__fake_resolve,
    .invalidate = fake_invalidate,
    .raw = fake_raw,
    .destroy = fake_destroy,
    .dispatch_host = "fake",
};

/* ---- public API ------------------------------------------------------------------------------ */

kcr_err (kcr_fake_new)(size_t opts_size, const kcr_fake_options *opts, kcr_fake **out)
{
    KCR__ABI_OPTS(kcr_fake_options, opts, opts_size);
    if (!out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_fake_new: NULL out");
    *out = NULL;
    if (opts && opts->bookmark_interval_ms > KCR__MAX_DURATION_MS)
        return kcr__fail(KCR_ERR_INVALID, "kcr_fake_new: bookmark_interval_ms %lld is above %lld",
                         (long long)opts->bookmark_interval_ms, (long long)KCR__MAX_DURATION_MS);
    kcr_fake *f = calloc(1, sizeof *f);
    if (!f)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    if (opts)
        f->opts = *opts;
    if (!f->opts.history_size)
        f->opts.history_size = DEFAULT_HISTORY;
    if (!f->opts.max_watch_queue)
        f->opts.max_watch_queue = DEFAULT_MAX_QUEUE;
    atomic_init(&f->refs, 1);
    pthread_mutex_init(&f->lock, NULL);
    f->rand_state = (uint64_t)kcr__wall_ns() ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)f;
    if (!f->rand_state)
        f->rand_state = 88172645463325252ULL;
    f->hist = calloc(f->opts.history_size, sizeof *f->hist);
    kcr_err err =
        f->hist ? kcr__fake_register_builtins(f) : kcr__fail(KCR_ERR_NOMEM, "out of memory");
    if (err != KCR_OK) {
        fake_unref(f);
        return err;
    }
    *out = f;
    return KCR_OK;
}

void kcr_fake_free(kcr_fake *f)
{
    fake_unref(f);
}

kcr_err kcr_fake_client(kcr_fake *f, const char *ns, kcr_client **out)
{
    *out = NULL;
    if (!f)
        return kcr__fail(KCR_ERR_INVALID, "kcr_fake_client: no fake");
    kcr__fake_client *fc = calloc(1, sizeof *fc);
    if (!fc || !(fc->ns = strdup(ns ? ns : "default"))) {
        free(fc);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    }
    fc->base.ops = &fake_ops;
    fc->base.ns = fc->ns;
    fc->f = f;
    atomic_fetch_add(&f->refs, 1);
    *out = &fc->base;
    return KCR_OK;
}

kcr_err kcr_fake_add(kcr_fake *f, const kcr_resource *res, const char *json, kcr_object **out)
{
    if (out)
        *out = NULL;
    if (!f || !res || !res->resource || !res->version || !json)
        return kcr__fail(KCR_ERR_INVALID, "kcr_fake_add: a fake, a resource and JSON required");
    pthread_mutex_lock(&f->lock);
    bool known = kcr__fake_served(f, res);
    pthread_mutex_unlock(&f->lock);
    if (!known)
        return kcr__fail(KCR_ERR_NOT_FOUND,
                         "kcr_fake_add: the fake does not serve %s/%s %s: register it "
                         "(kcr_fake_register) or create its CustomResourceDefinition first",
                         res->group && *res->group ? res->group : "core", res->version,
                         res->resource);
    kcr_status st = {0};
    struct kcr__node *doc;
    kcr_err err = kcr__node_parse(json, strlen(json), &doc);
    if (err != KCR_OK) {
        err = kcr__fake_bad_request(&st, kcr_last_error());
    } else if (doc->t != KCR__N_MAP) {
        kcr__node_free(doc);
        err = kcr__fake_bad_request(&st, "the body is not a JSON object");
    }
    if (err == KCR_OK) {
        /* The object's own namespace: the create's request namespace. */
        const char *body_ns = kcr__fake_meta_str(doc, "namespace");
        char *ns = body_ns ? strdup(body_ns) : NULL;
        err = kcr__fake_create_doc(f, res, ns, doc, out, &st);
        free(ns);
    }
    kcr_status_clear(&st);
    return err;
}

kcr_err (kcr_fake_inject_error)(size_t e_size, kcr_fake *f, const kcr_fake_error *e)
{
    KCR__ABI_OPTS(kcr_fake_error, e, e_size);
    if (!f || !e || e->code < 100 || e->code > 599)
        return kcr__fail(KCR_ERR_INVALID, "inject_error: a fake and an error with an HTTP "
                                          "code (100-599) are required");
    const kcr_resource *res = e->resource;
    const char *ns = e->ns, *name = e->name, *reason = e->reason, *message = e->message;
    kcr__frule r = {.verb = e->verb, .times = e->times ? e->times : 1, .code = e->code};
    r.rkey = res ? kcr__fake_rkey(res) : NULL;
    r.ns = ns ? strdup(ns) : NULL;
    r.name = name ? strdup(name) : NULL;
    r.reason = strdup(reason ? reason : "");
    r.message = strdup(message ? message : "");
    pthread_mutex_lock(&f->lock);
    kcr__frule *nr = realloc(f->rules, (f->n_rules + 1) * sizeof *nr);
    kcr_err err = KCR_OK;
    if (nr)
        f->rules = nr;
    if (!nr || (res && !r.rkey) || (ns && !r.ns) || (name && !r.name) || !r.reason || !r.message) {
        err = kcr__fail(KCR_ERR_NOMEM, "out of memory");
        rule_free(&r);
    } else {
        f->rules[f->n_rules++] = r;
    }
    pthread_mutex_unlock(&f->lock);
    return err;
}

void kcr_fake_clear_errors(kcr_fake *f)
{
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < f->n_rules; i++)
        rule_free(&f->rules[i]);
    f->n_rules = 0;
    pthread_mutex_unlock(&f->lock);
}

void kcr_fake_set_hook(kcr_fake *f, kcr_fake_hook_fn fn, void *user_data)
{
    pthread_mutex_lock(&f->lock);
    f->hook = fn;
    f->hook_ud = user_data;
    pthread_mutex_unlock(&f->lock);
}

uint64_t kcr_fake_count(kcr_fake *f, kcr_fake_verb verb, const kcr_resource *res)
{
    char *rkey = res ? kcr__fake_rkey(res) : NULL;
    uint64_t n = 0;
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < f->n_counters; i++)
        if ((verb == KCR_FAKE_ANY || f->counters[i].verb == verb) &&
            (!rkey || strcmp(rkey, f->counters[i].rkey) == 0))
            n += f->counters[i].n;
    pthread_mutex_unlock(&f->lock);
    free(rkey);
    return n;
}

uint64_t kcr_fake_resource_version(kcr_fake *f)
{
    pthread_mutex_lock(&f->lock);
    uint64_t rv = f->rv;
    pthread_mutex_unlock(&f->lock);
    return rv;
}
