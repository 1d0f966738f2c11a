/* Fixtures for the reflector and informer unit tests: seeding the fake, and
 * a spy client that forwards to the fake while recording every list/watch
 * request's options and injecting faults the fake cannot produce. */
#ifndef KCR_TEST_INFORMER_FIXTURES_H
#define KCR_TEST_INFORMER_FIXTURES_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client_impl.h"
#include "helpers/converge.h"
#include "kcr/kcr.h"
#include "kcr/fake.h"

static const kcr_resource CM = {"", "v1", "configmaps"};
static const kcr_resource SECRETS = {"", "v1", "secrets"};

static inline kcr_object *seed_cm(kcr_fake *f, const char *ns, const char *name, const char *app,
                                  const char *value)
{
    char json[1024];
    snprintf(json, sizeof json,
             "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"%s\","
             "\"namespace\":\"%s\",\"labels\":{\"app\":\"%s\"},\"managedFields\":[{\"manager\":"
             "\"test\",\"operation\":\"Update\"}]},\"data\":{\"v\":\"%s\"}}",
             name, ns, app, value);
    kcr_object *o = NULL;
    kcr_fake_add(f, &CM, json, &o);
    return o;
}

static inline void seed_many(kcr_fake *f, const char *ns, int n)
{
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "cm-%05d", i);
        kcr_object_unref(seed_cm(f, ns, name, i % 2 ? "odd" : "even", "x"));
    }
}

/* Updates data.v of ns/name through the client (merge patch). */
static inline kcr_err patch_cm(kcr_client *c, const char *ns, const char *name, const char *v)
{
    char patch[256];
    snprintf(patch, sizeof patch, "{\"data\":{\"v\":\"%s\"}}", v);
    return kcr_client_patch(
        c,
        &(kcr_request){
            .resource = &CM, .ns = ns, .name = name, .patch_type = KCR_PATCH_MERGE, .body = patch},
        NULL);
}

/* ---- spy client ------------------------------------------------------------------------- */

typedef struct spy_call {
    bool watch;
    char rv[32];
    char rv_match[32];
    char cont[8]; /* "" or "yes" */
    char label[64], field[64];
    char shard[160]; /* the shard selector, "" for none */
    int64_t limit;
    int64_t timeout_ms, idle_timeout_ms;
    bool bookmarks, initial_events, metadata_only;
} spy_call;

typedef struct spy {
    struct kcr_client base;
    kcr_client *inner;
    pthread_mutex_t mu;
    spy_call calls[256];
    size_t n_calls;
    int fail_continue_410;  /* fail this many continued list pages with HTTP 410 */
    int fail_list_too_large; /* fail this many first pages with 504 ResourceVersionTooLarge */
    int fail_list_410;       /* fail this many first pages (with an RV) with 410 */
    bool ignore_initial_events; /* act like a server that does not know sendInitialEvents */
    /* streaming lists (sendInitialEvents) at a resourceVersion below this get
     * HTTP 410, as from a server whose history before it is compacted */
    uint64_t stream_expired_below;
} spy;

#define SPY(c) ((spy *)(c))

static inline spy_call spy_get(kcr_client *c, size_t i)
{
    pthread_mutex_lock(&SPY(c)->mu);
    spy_call k = SPY(c)->calls[i];
    pthread_mutex_unlock(&SPY(c)->mu);
    return k;
}

static inline size_t spy_count(kcr_client *c, bool watch)
{
    pthread_mutex_lock(&SPY(c)->mu);
    size_t n = 0;
    for (size_t i = 0; i < SPY(c)->n_calls; i++)
        n += SPY(c)->calls[i].watch == watch;
    pthread_mutex_unlock(&SPY(c)->mu);
    return n;
}

static inline size_t spy_n(kcr_client *c)
{
    pthread_mutex_lock(&SPY(c)->mu);
    size_t n = SPY(c)->n_calls;
    pthread_mutex_unlock(&SPY(c)->mu);
    return n;
}

static inline void spy_record(spy *s, bool watch, const kcr__list_options *o)
{
    pthread_mutex_lock(&s->mu);
    if (s->n_calls < sizeof s->calls / sizeof *s->calls) {
        spy_call *k = &s->calls[s->n_calls++];
        memset(k, 0, sizeof *k);
        k->watch = watch;
        snprintf(k->rv, sizeof k->rv, "%s", o->resource_version ? o->resource_version : "(null)");
        snprintf(k->rv_match, sizeof k->rv_match, "%s",
                 o->resource_version_match ? o->resource_version_match : "");
        snprintf(k->cont, sizeof k->cont, "%s",
                 o->continue_token && *o->continue_token ? "yes" : "");
        snprintf(k->label, sizeof k->label, "%s", o->label_selector ? o->label_selector : "");
        snprintf(k->field, sizeof k->field, "%s", o->field_selector ? o->field_selector : "");
        snprintf(k->shard, sizeof k->shard, "%s", o->shard_selector ? o->shard_selector : "");
        k->limit = o->limit;
        k->timeout_ms = o->timeout_ms;
        k->idle_timeout_ms = o->idle_timeout_ms;
        k->bookmarks = o->allow_bookmarks;
        k->initial_events = o->send_initial_events;
        k->metadata_only = o->metadata_only;
    }
    pthread_mutex_unlock(&s->mu);
}

static inline bool spy_take(spy *s, int *counter)
{
    pthread_mutex_lock(&s->mu);
    bool take = *counter > 0;
    if (take)
        (*counter)--;
    pthread_mutex_unlock(&s->mu);
    return take;
}

static kcr_err spy_list(kcr_client *c, const kcr_resource *res, const char *ns,
                        const kcr__list_options *opts, kcr_list_item_fn fn, void *ud,
                        kcr_list_meta *meta, kcr_status *st)
{
    spy *s = SPY(c);
    spy_record(s, false, opts);
    bool cont = opts->continue_token && *opts->continue_token;
    if (cont && spy_take(s, &s->fail_continue_410)) {
        kcr__status_make(st, 410, "Expired",
                         "The provided continue parameter is too old to display a consistent list result.");
        return kcr__status_fail(st);
    }
    if (!cont && spy_take(s, &s->fail_list_too_large)) {
        kcr__status_make(st, 504, "Timeout", "Too large resource version: 99999, current: 5");
        st->details.causes = calloc(1, sizeof *st->details.causes);
        st->details.causes[0].type = strdup("ResourceVersionTooLarge");
        st->details.causes[0].message = strdup("Too large resource version");
        st->details.causes[0].field = strdup("");
        st->details.n_causes = 1;
        return kcr__status_fail(st);
    }
    if (!cont && opts->resource_version && *opts->resource_version &&
        spy_take(s, &s->fail_list_410)) {
        kcr__status_make(st, 410, "Expired", "too old resource version: 1 (2)");
        return kcr__status_fail(st);
    }
    return s->inner->ops->list(s->inner, res, ns, opts, fn, ud, meta, st);
}

static kcr_err spy_watch(kcr_client *c, const kcr_resource *res, const char *ns,
                         const kcr__list_options *opts, kcr_watch_event_fn fn, void *ud,
                         kcr_status *st)
{
    spy *s = SPY(c);
    spy_record(s, true, opts);
    kcr__list_options o = *opts;
    pthread_mutex_lock(&s->mu);
    bool ignore = s->ignore_initial_events;
    uint64_t expired_below = s->stream_expired_below;
    pthread_mutex_unlock(&s->mu);
    if (opts->send_initial_events && opts->resource_version && *opts->resource_version &&
        strtoull(opts->resource_version, NULL, 10) < expired_below) {
        kcr__status_make(st, 410, "Expired", "too old resource version");
        return kcr__status_fail(st);
    }
    if (ignore) {
        o.send_initial_events = false;
        o.resource_version_match = NULL;
    }
    return s->inner->ops->watch(s->inner, res, ns, &o, fn, ud, st);
}

static kcr_err spy_get_op(kcr_client *c, const kcr_resource *res, const char *ns, const char *name,
                          const kcr__get_options *opts, kcr_object **out, kcr_status *st)
{
    return SPY(c)->inner->ops->get(SPY(c)->inner, res, ns, name, opts, out, st);
}

static kcr_err spy_create(kcr_client *c, const kcr_resource *res, const char *ns, const char *json,
                          size_t len, const kcr__write_options *opts, kcr_object **out,
                          kcr_status *st)
{
    return SPY(c)->inner->ops->create(SPY(c)->inner, res, ns, json, len, opts, out, st);
}

static kcr_err spy_update(kcr_client *c, const kcr_resource *res, const char *ns, const char *name,
                          const char *json, size_t len, const kcr__write_options *opts,
                          kcr_object **out, kcr_status *st)
{
    return SPY(c)->inner->ops->update(SPY(c)->inner, res, ns, name, json, len, opts, out, st);
}

static kcr_err spy_patch(kcr_client *c, const kcr_resource *res, const char *ns, const char *name,
                         kcr_patch_type type, const char *patch, size_t len,
                         const kcr__write_options *opts, kcr_object **out, kcr_status *st)
{
    return SPY(c)->inner->ops->patch(SPY(c)->inner, res, ns, name, type, patch, len, opts, out,
                                     st);
}

static kcr_err spy_del(kcr_client *c, const kcr_resource *res, const char *ns, const char *name,
                       const kcr__delete_options *opts, kcr_object **out, kcr_status *st)
{
    return SPY(c)->inner->ops->del(SPY(c)->inner, res, ns, name, opts, out, st);
}

static kcr_err spy_resolve(kcr_client *c, const kcr__disc_query *q, bool refresh,
                           kcr_api_resource *out, kcr_status *st)
{
    return SPY(c)->inner->ops->resolve(SPY(c)->inner, q, refresh, out, st);
}

static void spy_invalidate(kcr_client *c)
{
    SPY(c)->inner->ops->invalidate(SPY(c)->inner);
}

static kcr_err spy_raw(kcr_client *c, const char *path, const char *body, size_t body_len,
                       const kcr_raw_options *opts, char **out, size_t *out_len, kcr_status *st)
{
    return SPY(c)->inner->ops->raw(SPY(c)->inner, path, body, body_len, opts, out, out_len, st);
}

static void spy_destroy(kcr_client *c)
{
    spy *s = SPY(c);
    kcr_client_free(s->inner);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static const kcr__client_ops spy_ops = {
    .get = spy_get_op,
    .create = spy_create,
    .update = spy_update,
    .patch = spy_patch,
    .del = spy_del,
    .list = spy_list,
    .watch = spy_watch,
    .resolve = spy_resolve,
    .invalidate = spy_invalidate,
    .raw = spy_raw,
    .destroy = spy_destroy,
};

/* A spy over a new client of fake f. Free with kcr_client_free. */
static inline kcr_client *spy_new(kcr_fake *f)
{
    spy *s = calloc(1, sizeof *s);
    s->base.ops = &spy_ops;
    pthread_mutex_init(&s->mu, NULL);
    kcr_fake_client(f, NULL, &s->inner);
    return &s->base;
}

/* Polls `cond` every 5 ms for up to `ms`; fails the test if it never held. */
#define WAIT_FOR(cond, ms)                                                                       \
    do {                                                                                         \
        int64_t wait_deadline_ = now_ms() + (ms);                                                \
        while (!(cond) && now_ms() < wait_deadline_)                                             \
            sleep_ms(5);                                                                         \
        cr_assert(cond, "timed out after %d ms waiting for: %s", (int)(ms), #cond);              \
    } while (0)

#endif
