/* Watches: every write is recorded in a bounded history (for resuming from
 * a resourceVersion; older ones get 410 Expired) and fanned out to the
 * active watchers' queues, with label-selector transitions (an object that
 * starts or stops matching is ADDED or DELETED for that watcher); bookmarks
 * (periodic, on demand, and the initial-events-end one); slow watchers
 * closed past max_watch_queue, as the apiserver does. Each watch call runs
 * on its caller's thread, draining its queue without the fake's lock. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "fake/fake_internal.h"

enum { WAIT_SLICE_MS = 50 };

/* ---- events and watchers ------------------------------------------------------------------- */

static bool watcher_selects(const kcr__fwatcher *w, const kcr_object *obj)
{
    /* an object's uid and namespace never change: it never moves in or out
     * of a shard, so MODIFIED needs no ADDED/DELETED for it */
    return kcr__fake_selects(w->labels, w->fields, obj) && kcr__fake_shard_selects(&w->shard, obj);
}

static void free_item(kcr__fqitem *it)
{
    kcr_object_unref(it->obj);
    if (it->st) {
        kcr_status_clear(it->st);
        free(it->st);
    }
    free(it);
}

static void enqueue(kcr_fake *f, kcr__fwatcher *w, kcr__fqitem *it)
{
    if (w->ended) {
        free_item(it);
        return;
    }
    if (w->len >= f->opts.max_watch_queue) {
        /* A consumer this slow is dropped, as the apiserver closes its watch. */
        kcr__log(KCR_LOG_WARN, "fake", "watch on %s fell %zu events behind: closing it", w->rkey,
                 w->len);
        w->ended = true;
        free_item(it);
        pthread_cond_broadcast(&w->cond);
        return;
    }
    if (w->tail)
        w->tail->next = it;
    else
        w->head = it;
    w->tail = it;
    w->len++;
    pthread_cond_broadcast(&w->cond);
}

/* Queues what watcher w should see of event e (selector transitions). */
static void offer(kcr_fake *f, kcr__fwatcher *w, const kcr__fevent *e)
{
    if (strcmp(w->rkey, e->rkey) != 0 || (*w->ns && strcmp(w->ns, e->ns) != 0))
        return;
    bool now = watcher_selects(w, e->obj);
    bool before = e->type == KCR_WATCH_MODIFIED && watcher_selects(w, e->old);
    kcr_watch_event_type t;
    if (e->type == KCR_WATCH_MODIFIED)
        t = now && before ? KCR_WATCH_MODIFIED : now ? KCR_WATCH_ADDED : KCR_WATCH_DELETED;
    else
        t = e->type;
    if (!now && !before)
        return;
    kcr__fqitem *it = calloc(1, sizeof *it);
    if (!it)
        return;
    it->type = t;
    it->obj = w->metadata_only ? kcr__fake_metadata_view(e->obj) : kcr_object_ref(e->obj);
    enqueue(f, w, it);
}

static void free_event(kcr__fevent *e)
{
    free(e->rkey);
    free(e->ns);
    kcr_object_unref(e->obj);
    kcr_object_unref(e->old);
}

void kcr__fake_history_clear(kcr_fake *f)
{
    for (size_t i = 0; i < f->hist_len; i++)
        free_event(&f->hist[(f->hist_start + i) % f->opts.history_size]);
    f->hist_start = f->hist_len = 0;
}

void kcr__fake_emit(kcr_fake *f, kcr_watch_event_type type, const char *rkey, const char *ns,
                    kcr_object *obj, kcr_object *old)
{
    kcr__fevent e = {.rv = f->rv,
                     .type = type,
                     .rkey = strdup(rkey),
                     .ns = strdup(ns),
                     .obj = kcr_object_ref(obj),
                     .old = kcr_object_ref(old)};
    for (kcr__fwatcher *w = f->watchers; w; w = w->next)
        offer(f, w, &e);
    size_t cap = f->opts.history_size;
    if (f->hist_len == cap) {
        kcr__fevent *oldest = &f->hist[f->hist_start];
        f->compacted_rv = oldest->rv;
        free_event(oldest);
        f->hist_start = (f->hist_start + 1) % cap;
        f->hist_len--;
    }
    f->hist[(f->hist_start + f->hist_len) % cap] = e;
    f->hist_len++;
}

/* ---- watch ------------------------------------------------------------------------------- */

static kcr__fqitem *bookmark_item(kcr_fake *f, bool initial_end)
{
    kcr__fqitem *it = calloc(1, sizeof *it);
    if (it) {
        it->type = KCR_WATCH_BOOKMARK;
        snprintf(it->rv, sizeof it->rv, "%" PRIu64, f->rv);
        it->initial_end = initial_end;
    }
    return it;
}

static kcr__fqitem *error_item(int code, const char *reason, const char *message)
{
    kcr__fqitem *it = calloc(1, sizeof *it);
    if (!it)
        return NULL;
    it->type = KCR_WATCH_ERROR;
    it->st = calloc(1, sizeof *it->st);
    if (!it->st || kcr__status_make(it->st, code, reason, message) != KCR_OK) {
        free_item(it);
        return NULL;
    }
    return it;
}

static void unlink_watcher(kcr_fake *f, kcr__fwatcher *w)
{
    for (kcr__fwatcher **p = &f->watchers; *p; p = &(*p)->next)
        if (*p == w) {
            *p = w->next;
            break;
        }
}

static void watcher_free(kcr__fwatcher *w)
{
    while (w->head) {
        kcr__fqitem *it = w->head;
        w->head = it->next;
        free_item(it);
    }
    free(w->rkey);
    free(w->ns);
    kcr__selector_free(w->labels);
    kcr__selector_free(w->fields);
    kcr__fake_shard_clear(&w->shard);
    pthread_cond_destroy(&w->cond);
    free(w);
}

kcr_err kcr__fake_watch(kcr_client *c, const kcr_resource *res, const char *ns,
                        const kcr__list_options *opts, kcr_watch_event_fn fn, void *ud,
                        kcr_status *st)
{
    kcr_fake *f = KCR__FAKE(c);
    kcr_err err = kcr__fake_begin(f, KCR_FAKE_WATCH, res, ns, NULL, NULL, NULL, st);
    if (err != KCR_OK)
        return err;
    const char *rvs = opts->resource_version;
    bool initial = !rvs || !*rvs || strcmp(rvs, "0") == 0 || opts->send_initial_events;
    uint64_t from_rv = 0;
    if (rvs && *rvs) {
        char *end;
        from_rv = strtoull(rvs, &end, 10);
        if (*end || *rvs == '-')
            return kcr__fake_bad_request(st, "resourceVersion must be a number for the fake");
    }
    kcr__fwatcher *w = calloc(1, sizeof *w);
    if (!w)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    kcr__cond_init_monotonic(&w->cond);
    w->bookmarks = opts->allow_bookmarks;
    w->metadata_only = opts->metadata_only;
    w->rkey = kcr__fake_rkey(res);
    if ((err = kcr__fake_parse_shard(f, opts, &w->shard, st)) != KCR_OK ||
        (err = kcr__fake_parse_selectors(opts, &w->labels, &w->fields, st)) != KCR_OK || !w->rkey) {
        watcher_free(w);
        return err != KCR_OK ? err : kcr__fail(KCR_ERR_NOMEM, "out of memory");
    }
    pthread_mutex_lock(&f->lock);
    w->ns = strdup(kcr__fake_scope_ns(f, res, ns));
    if (initial) {
        bool found;
        for (size_t i = kcr__fake_find(f, w->rkey, "", "", &found);
             i < f->n && strcmp(f->objs[i]->rkey, w->rkey) == 0; i++) {
            kcr__fobj *o = f->objs[i];
            if ((w->ns && *w->ns && strcmp(o->ns, w->ns) != 0) || !watcher_selects(w, o->obj))
                continue;
            kcr__fqitem *it = calloc(1, sizeof *it);
            if (!it)
                continue;
            it->type = KCR_WATCH_ADDED;
            it->obj = w->metadata_only ? kcr__fake_metadata_view(o->obj) : kcr_object_ref(o->obj);
            enqueue(f, w, it);
        }
        if (opts->send_initial_events && w->bookmarks) {
            kcr__fqitem *it = bookmark_item(f, true);
            if (it)
                enqueue(f, w, it);
        }
    } else if (from_rv < f->compacted_rv) {
        char msg[128];
        snprintf(msg, sizeof msg, "too old resource version: %" PRIu64 " (%" PRIu64 ")", from_rv,
                 f->compacted_rv + 1);
        kcr__fqitem *it = error_item(410, "Expired", msg);
        if (it)
            enqueue(f, w, it);
    } else {
        for (size_t i = 0; i < f->hist_len; i++) {
            const kcr__fevent *e = &f->hist[(f->hist_start + i) % f->opts.history_size];
            if (e->rv > from_rv)
                offer(f, w, e);
        }
    }
    w->next = f->watchers;
    f->watchers = w;
    pthread_mutex_unlock(&f->lock);

    int64_t start = kcr__now_ns();
    /* The server sees timeoutSeconds: the timeout rounded up to whole seconds. */
    int64_t deadline =
        opts->timeout_ms > 0 ? start + kcr__ms_to_s_ceil(opts->timeout_ms) * KCR_NS_PER_S : 0;
    int64_t idle_ns = opts->idle_timeout_ms > 0 ? opts->idle_timeout_ms * KCR_NS_PER_MS : 0;
    int64_t bm_ns = f->opts.bookmark_interval_ms > 0 && w->bookmarks
                        ? f->opts.bookmark_interval_ms * KCR_NS_PER_MS
                        : 0;
    int64_t next_bm = bm_ns ? start + bm_ns : 0;
    int64_t last_activity = start;
    err = KCR_OK;
    for (;;) {
        pthread_mutex_lock(&f->lock);
        kcr__fqitem *it = NULL;
        while (err == KCR_OK) {
            if (w->head) {
                it = w->head;
                w->head = it->next;
                if (!w->head)
                    w->tail = NULL;
                w->len--;
                break;
            }
            if (w->ended)
                break;
            int64_t now = kcr__now_ns();
            if (kcr_cancel_triggered(opts->cancel)) {
                err = kcr__fail(KCR_ERR_CANCELED, "watch canceled");
            } else if (deadline && now >= deadline) {
                break; /* timeoutSeconds: a clean end */
            } else if (idle_ns && now - last_activity >= idle_ns) {
                err = kcr__fail(KCR_ERR_TIMEOUT, "watch: no event for %lld ms",
                                (long long)opts->idle_timeout_ms);
            } else if (next_bm && now >= next_bm) {
                kcr__fqitem *b = bookmark_item(f, false);
                if (b)
                    enqueue(f, w, b);
                next_bm = now + bm_ns;
            } else {
                int64_t wake = now + WAIT_SLICE_MS * KCR_NS_PER_MS;
                if (deadline && deadline < wake)
                    wake = deadline;
                if (idle_ns && last_activity + idle_ns < wake)
                    wake = last_activity + idle_ns;
                if (next_bm && next_bm < wake)
                    wake = next_bm;
                struct timespec ts = kcr__timespec_at(wake);
                pthread_cond_timedwait(&w->cond, &f->lock, &ts);
            }
        }
        pthread_mutex_unlock(&f->lock);
        if (!it)
            break;
        last_activity = kcr__now_ns();
        kcr_watch_event ev = {.type = it->type,
                              .object = it->obj,
                              .resource_version =
                                  it->obj ? kcr_object_resource_version(it->obj) : it->rv,
                              .initial_events_end = it->initial_end,
                              .status = it->st};
        if (it->type == KCR_WATCH_ERROR)
            ev.resource_version = "";
        err = fn ? fn(&ev, ud) : KCR_OK;
        if (err == KCR_OK && it->type == KCR_WATCH_ERROR) {
            kcr_status_copy(st, it->st);
            err = kcr__status_fail(it->st);
        }
        free_item(it);
        if (err != KCR_OK)
            break;
    }
    pthread_mutex_lock(&f->lock);
    unlink_watcher(f, w);
    pthread_mutex_unlock(&f->lock);
    watcher_free(w);
    return err;
}

/* Runs fn on each active watcher of res (NULL: all), lock held. */
static size_t each_watcher(kcr_fake *f, const kcr_resource *res,
                           void (*fn)(kcr_fake *, kcr__fwatcher *, void *), void *ud)
{
    char *rkey = res ? kcr__fake_rkey(res) : NULL;
    size_t n = 0;
    for (kcr__fwatcher *w = f->watchers; w; w = w->next)
        if (!w->ended && (!rkey || strcmp(rkey, w->rkey) == 0)) {
            n++;
            if (fn)
                fn(f, w, ud);
        }
    free(rkey);
    return n;
}

size_t kcr_fake_watch_count(kcr_fake *f, const kcr_resource *res)
{
    pthread_mutex_lock(&f->lock);
    size_t n = each_watcher(f, res, NULL, NULL);
    pthread_mutex_unlock(&f->lock);
    return n;
}

static void end_one(kcr_fake *f, kcr__fwatcher *w, void *ud)
{
    w->ended = true;
    pthread_cond_broadcast(&w->cond);
}

void kcr_fake_end_watches(kcr_fake *f, const kcr_resource *res)
{
    pthread_mutex_lock(&f->lock);
    each_watcher(f, res, end_one, NULL);
    pthread_mutex_unlock(&f->lock);
}

struct error_args {
    int code;
    const char *reason, *message;
};

static void error_one(kcr_fake *f, kcr__fwatcher *w, void *ud)
{
    struct error_args *a = ud;
    kcr__fqitem *it = error_item(a->code, a->reason, a->message);
    if (it)
        enqueue(f, w, it);
    w->ended = true;
}

void kcr_fake_watch_error(kcr_fake *f, const kcr_resource *res, int code, const char *reason,
                          const char *message)
{
    struct error_args a = {code, reason, message};
    pthread_mutex_lock(&f->lock);
    each_watcher(f, res, error_one, &a);
    pthread_mutex_unlock(&f->lock);
}

static void bookmark_one(kcr_fake *f, kcr__fwatcher *w, void *ud)
{
    if (!w->bookmarks)
        return;
    kcr__fqitem *it = bookmark_item(f, false);
    if (it)
        enqueue(f, w, it);
}

void kcr_fake_bookmark(kcr_fake *f, const kcr_resource *res)
{
    pthread_mutex_lock(&f->lock);
    each_watcher(f, res, bookmark_one, NULL);
    pthread_mutex_unlock(&f->lock);
}

void kcr_fake_compact(kcr_fake *f)
{
    pthread_mutex_lock(&f->lock);
    kcr__fake_history_clear(f);
    f->compacted_rv = f->rv;
    pthread_mutex_unlock(&f->lock);
}
