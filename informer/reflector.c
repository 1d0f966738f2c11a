/* The reflector: list (paged or streaming), then watch, forever, feeding a
 * sink (kcr_reflector_sink). State machine and recovery rules: docs/informer.md. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/abi.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/grow.h"
#include "core/log.h"
#include "core/strmap.h"
#include "informer/informer_internal.h"
#include "informer/label_set.h"
#include "object/ranges.h"

#define HEALTHY_WATCH_NS KCR_NS_PER_S /* a clean end after this long is not a hot loop */
#define IDLE_MARGIN_MS 30000

struct kcr_reflector {
    kcr_client *client;
    char *group, *version, *resource;
    kcr_resource res;
    kcr_reflector_sink sink;
    char *ns, *label, *field;
    bool metadata_only, consistent_list, drop_managed_fields;
    kcr_list_mode mode;
    int64_t page_size;
    int64_t min_watch_timeout_ms, idle_limit_ms;
    int64_t bo_initial_ms, bo_max_ms, bo_reset_ms;
    double bo_jitter;
    kcr_object_transform_fn transform;
    void *transform_ud;
    kcr_watch_error_fn on_error;
    void *error_ud;
    /* The shard selector in normal form (NULL: none) and its parsed ranges,
     * kept to filter client-side whenever the server did not. */
    char *shard_sel;
    kcr_shard_field shard_field;
    kcr_shard_range *shard_ranges;
    size_t n_shard_ranges;
    kcr__backoff_hook_fn backoff_hook;
    void *backoff_hook_ud;
    kcr__list_reuse_fn list_reuse;
    void *list_reuse_ud;
    kcr__narrow_fn narrow; /* NULL: a selector change relists the whole selection */
    void *narrow_ud;
    kcr__shard_label_fn shard_label; /* NULL: the label selector stays */
    char *label_base;
    /* The label selection kcr__reflector_set_label_values() made (`label`
     * is its selector; none: key NULL); reflector thread only once started. */
    kcr__label_set labels;

    kcr_cancel *cancel;
    kcr_cancel *watch_cancel; /* the running watch's: stop and a selector change trigger it */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cond;

    /* under mu */
    bool started, stopping, joined, listed;
    char *rv;
    size_t rv_cap;
    kcr_err last_err;
    kcr_status last_st;
    char *last_msg;
    kcr_reflector_stats stats;
    /* kcr_reflector_set_shard_selector's change, taken by the reflector
     * thread before its next list (pending_sel NULL with shard_pending:
     * no selector any more; label_pending: pending_label replaces `label`
     * too, kcr__reflector_set_shard_label) */
    bool shard_pending, label_pending;
    /* kcr__reflector_set_label_values' change: relabel_set replaces
     * `labels`, relabel (its selector) `label` */
    bool relabel_pending;
    char *relabel;
    kcr__label_set relabel_set;
    uint64_t shard_gen;        /* selectors set so far: the newest one's generation */
    uint64_t listing_gen;      /* the generation of the selector in force */
    uint64_t listed_gen;       /* ... of the last list delivered to the sink */
    char *pending_sel, *pending_label;
    kcr_shard_field pending_field;
    kcr_shard_range *pending_ranges;
    size_t pending_n;

    /* reflector thread only */
    bool rv_unavailable;   /* the last RV is gone: next list/stream at "" */
    bool paginated_result; /* the server paged a list: no watch cache, keep paging */
    bool shard_fallback_logged; /* the client-side filtering was announced */
    /* After a list of gained ranges at a version newer than the watch's
     * (list_gained): the resumed watch's events up to replay_rv of those
     * ranges (or label values), or of a key that list held, are in the
     * list already and are skipped. replay_rv 0: no filter. */
    uint64_t replay_rv;
    kcr__ranges replay_ranges;
    kcr__label_set replay_labels;
    struct kcr__strmap replay_keys;
    int64_t bo_cur_ms, bo_last_ns;
    uint64_t rng;
};

/* ---- small helpers ------------------------------------------------------------------------ */

static char *dup_or_null(const char *s)
{
    return s && *s ? strdup(s) : NULL;
}

static uint64_t next_rand(kcr_reflector *r)
{
    /* xorshift64*: jitter only, not security */
    r->rng ^= r->rng >> 12;
    r->rng ^= r->rng << 25;
    r->rng ^= r->rng >> 27;
    return r->rng * UINT64_C(2685821657736338717);
}

static double rand_unit(kcr_reflector *r)
{
    return (double)(next_rand(r) >> 11) / 9007199254740992.0;
}

static bool stopping(kcr_reflector *r)
{
    return kcr_cancel_triggered(r->cancel);
}

static void set_rv(kcr_reflector *r, const char *rv)
{
    if (!rv || !*rv)
        return;
    size_t len = strlen(rv);
    pthread_mutex_lock(&r->mu);
    if (len + 1 > r->rv_cap) {
        char *n = realloc(r->rv, len + 16);
        if (n) {
            r->rv = n;
            r->rv_cap = len + 16;
        }
    }
    if (len + 1 <= r->rv_cap)
        memcpy(r->rv, rv, len + 1);
    pthread_mutex_unlock(&r->mu);
}

char *kcr_reflector_last_sync_rv(kcr_reflector *r)
{
    pthread_mutex_lock(&r->mu);
    char *s = strdup(r->rv ? r->rv : "");
    pthread_mutex_unlock(&r->mu);
    return s;
}

bool kcr__is_too_large_rv(kcr_err err, const kcr_status *st)
{
    if (err == KCR_OK || !st || st->code != 504)
        return false;
    for (size_t i = 0; i < st->details.n_causes; i++)
        if (st->details.causes[i].type &&
            strcmp(st->details.causes[i].type, "ResourceVersionTooLarge") == 0)
            return true;
    return st->message && strstr(st->message, "Too large resource version") != NULL;
}

/* Records a failed request and tells the user. `msg` is kcr_last_error() of
 * the failing call (copied before anything else can overwrite it). */
static void record_failure(kcr_reflector *r, const char *what, kcr_err err, const kcr_status *st)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", kcr_last_error());
    bool has_st = st && st->code != 0;
    pthread_mutex_lock(&r->mu);
    r->last_err = err;
    free(r->last_msg);
    r->last_msg = strdup(msg);
    kcr_status_clear(&r->last_st);
    if (has_st)
        kcr_status_copy(&r->last_st, st);
    r->stats.failures++;
    pthread_mutex_unlock(&r->mu);
    kcr__log(KCR_LOG_WARN, "reflector", "%s of %s failed: %s: %s", what, r->res.resource,
             kcr_strerror(err), msg);
    if (r->on_error)
        r->on_error(err, has_st ? st : NULL, msg, r->error_ud);
}

static void clear_failure(kcr_reflector *r)
{
    pthread_mutex_lock(&r->mu);
    r->last_err = KCR_OK;
    free(r->last_msg);
    r->last_msg = NULL;
    kcr_status_clear(&r->last_st);
    pthread_mutex_unlock(&r->mu);
}

/* Sleeps ms unless stopped; false when stopped. */
static bool sleep_ms(kcr_reflector *r, int64_t ms)
{
    int64_t deadline = kcr__now_ns() + ms * KCR_NS_PER_MS;
    struct timespec ts = kcr__timespec_at(deadline);
    pthread_mutex_lock(&r->mu);
    while (!r->stopping && kcr__now_ns() < deadline)
        if (pthread_cond_timedwait(&r->cond, &r->mu, &ts) == ETIMEDOUT)
            break;
    bool stop = r->stopping;
    pthread_mutex_unlock(&r->mu);
    return !stop;
}

/* Exponential backoff with jitter, reset after a quiet period (client-go's
 * backoff manager: 800 ms doubling to 30 s, reset after 2 min). */
static bool backoff(kcr_reflector *r)
{
    int64_t now = kcr__now_ns();
    if (r->bo_cur_ms == 0 || (r->bo_last_ns && now - r->bo_last_ns > r->bo_reset_ms * KCR_NS_PER_MS))
        r->bo_cur_ms = r->bo_initial_ms;
    r->bo_last_ns = now;
    int64_t d = r->bo_cur_ms;
    if (r->bo_jitter > 0)
        d += (int64_t)((double)d * r->bo_jitter * rand_unit(r));
    r->bo_cur_ms = r->bo_cur_ms * 2 > r->bo_max_ms ? r->bo_max_ms : r->bo_cur_ms * 2;
    pthread_mutex_lock(&r->mu);
    r->stats.backoffs++;
    r->stats.last_backoff_ms = d;
    pthread_mutex_unlock(&r->mu);
    if (r->backoff_hook)
        r->backoff_hook(d, r->backoff_hook_ud);
    kcr__log(KCR_LOG_DEBUG, "reflector", "%s: backing off %lld ms", r->res.resource, (long long)d);
    return sleep_ms(r, d);
}

static kcr_err transform(kcr_reflector *r, kcr_object *in, kcr_object **out)
{
    if (!r->transform) {
        *out = kcr_object_ref(in);
        return KCR_OK;
    }
    *out = NULL;
    kcr_err err = r->transform(in, out, r->transform_ud);
    if (err == KCR_OK && !*out)
        err = kcr__fail(KCR_ERR_INVALID, "transform returned no object");
    return err;
}

/* A list's object: the sink's equal one if it holds it (the list hook),
 * else the transformed `in`. */
static kcr_err list_object(kcr_reflector *r, kcr_object *in, kcr_object **out)
{
    if (r->list_reuse && (*out = r->list_reuse(in, r->list_reuse_ud)))
        return KCR_OK;
    return transform(r, in, out);
}

/* Whether the reflector keeps obj: always without a shard selector, else
 * when its shard key falls in the selector's ranges. Applied to everything
 * received, whoever filtered it first: an object's uid and namespace never
 * change, so an object never moves in or out of the selection, and a server
 * that did filter makes this a no-op. Counts what it drops. */
static bool in_shard(kcr_reflector *r, const kcr_object *obj)
{
    if (!r->shard_sel || kcr_shard_match(obj, r->shard_field, r->shard_ranges, r->n_shard_ranges))
        return true;
    pthread_mutex_lock(&r->mu);
    r->stats.shard_filtered++;
    pthread_mutex_unlock(&r->mu);
    return false;
}

/* The selector sent to the apiserver: none for kcr's own field, which no
 * apiserver evaluates (the reflector filters on it alone). */
static const char *server_selector(const kcr_reflector *r)
{
    return r->shard_field == KCR_SHARD_BY_CONTROLLER ? NULL : r->shard_sel;
}

/* An object whose controller reference moved it out of the selection:
 * deleted from the sink, which ignores a key it does not hold. */
static kcr_err leave_shard(kcr_reflector *r, kcr_object *obj)
{
    kcr_object *t;
    kcr_err err = transform(r, obj, &t);
    if (err != KCR_OK)
        return err;
    err = r->sink.on_delete(t, r->sink.user_data);
    kcr_object_unref(t);
    return err;
}

/* After a complete LIST: who applied the selector. `server` is true when
 * every page carried metadata.shardInfo or no item fell outside it. */
static void note_shard_mode(kcr_reflector *r, bool server)
{
    if (!r->shard_sel)
        return;
    pthread_mutex_lock(&r->mu);
    r->stats.shard_mode = server ? KCR_SHARD_SELECTOR_SERVER : KCR_SHARD_SELECTOR_CLIENT;
    pthread_mutex_unlock(&r->mu);
    if (!server_selector(r))
        return; /* filtered on the client by design: nothing to announce */
    if (!server && !r->shard_fallback_logged) {
        r->shard_fallback_logged = true;
        kcr__log(KCR_LOG_WARN, "reflector",
                 "%s: the apiserver ignored shardSelector (the list held objects outside it and "
                 "no metadata.shardInfo: feature gate ShardedListAndWatch off, or an apiserver "
                 "before 1.36); filtering %s client-side, which lists and watches every object",
                 r->res.resource, r->shard_sel);
    } else if (server && r->shard_fallback_logged) {
        r->shard_fallback_logged = false;
        kcr__log(KCR_LOG_INFO, "reflector", "%s: the apiserver applies shardSelector again",
                 r->res.resource);
    }
}

/* A growable array of object references. */
typedef struct objvec {
    kcr_object **v;
    size_t n, cap;
} objvec;

static kcr_err objvec_push(objvec *o, kcr_object *obj)
{
    kcr_object **grown = kcr__grow(o->v, &o->cap, o->n, sizeof *o->v, 256);
    if (!grown)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory collecting a list");
    o->v = grown;
    o->v[o->n++] = obj;
    return KCR_OK;
}

static void objvec_clear(objvec *o)
{
    for (size_t i = 0; i < o->n; i++)
        kcr_object_unref(o->v[i]);
    free(o->v);
    memset(o, 0, sizeof *o);
}

/* A resourceVersion as a number (etcd's revision), 0 when it is not one. */
static uint64_t rv_number(const char *rv)
{
    char *end;
    uint64_t n = rv && *rv >= '0' && *rv <= '9' ? strtoull(rv, &end, 10) : 0;
    return n && !*end ? n : 0;
}

static void replay_clear(kcr_reflector *r)
{
    r->replay_rv = 0;
    kcr__ranges_clear(&r->replay_ranges);
    kcr__label_set_clear(&r->replay_labels);
    kcr__strmap_clear(&r->replay_keys, NULL);
}

/* Whether a watch event is one a list of gained ranges already applied
 * (replay_rv): at or below its version, of those ranges or label values
 * (carried at that version: the list holds the object's state at its
 * own, or not the object if it left them since) or of a key it
 * held. The first event past it ends the filter (events come in order). */
static bool replayed(kcr_reflector *r, const kcr_watch_event *ev)
{
    uint64_t v = rv_number(ev->resource_version);
    if (!v || v > r->replay_rv) {
        replay_clear(r);
        return false;
    }
    char *key = NULL;
    bool held =
        kcr_shard_match(ev->object, r->shard_field, r->replay_ranges.r, r->replay_ranges.n) ||
        kcr__label_set_matches(&r->replay_labels, ev->object) ||
        (kcr_store_key(ev->object, &key) == KCR_OK && kcr__strmap_get(&r->replay_keys, key));
    free(key);
    return held;
}

/* Hands a complete initial state to the sink. */
static kcr_err deliver_replace(kcr_reflector *r, objvec *objs, const char *rv, bool streaming)
{
    replay_clear(r); /* a whole state supersedes a replay filter */
    kcr_err err = r->sink.on_replace(objs->v, objs->n, rv, r->sink.user_data);
    size_t n = objs->n;
    objvec_clear(objs);
    if (err != KCR_OK)
        return err;
    set_rv(r, rv);
    r->rv_unavailable = false;
    pthread_mutex_lock(&r->mu);
    r->listed = true;
    r->stats.lists++;
    r->stats.streaming = streaming;
    pthread_mutex_unlock(&r->mu);
    clear_failure(r);
    kcr__log(KCR_LOG_DEBUG, "reflector", "%s: %s of %zu objects at resourceVersion %s",
             r->res.resource, streaming ? "streamed list" : "list", n, rv);
    return KCR_OK;
}

/* ---- LIST --------------------------------------------------------------------------------- */

/* One LIST request for the reflector's collection (req gives the rest:
 * selectors, version, paging), counted in its stats. */
static kcr_err list_page(kcr_reflector *r, kcr_request req, kcr_list_item_fn fn, void *ud,
                         kcr_list_meta *meta)
{
    req.resource = &r->res;
    req.ns = r->ns;
    req.field_selector = r->field;
    req.metadata_only = r->metadata_only;
    req.drop_managed_fields = r->drop_managed_fields;
    req.cancel = r->cancel;
    pthread_mutex_lock(&r->mu);
    r->stats.list_requests++;
    pthread_mutex_unlock(&r->mu);
    return kcr_client_list(r->client, &req, fn, ud, meta);
}

typedef struct list_ctx {
    kcr_reflector *r;
    objvec objs;
    size_t outside; /* items the shard filter dropped */
} list_ctx;

static kcr_err list_item(kcr_object *obj, void *ud)
{
    list_ctx *l = ud;
    if (stopping(l->r))
        return kcr__fail(KCR_ERR_CANCELED, "reflector stopped");
    if (!in_shard(l->r, obj)) {
        l->outside++;
        return KCR_OK;
    }
    kcr_object *t;
    kcr_err err = list_object(l->r, obj, &t);
    if (err == KCR_OK && (err = objvec_push(&l->objs, t)) != KCR_OK)
        kcr_object_unref(t);
    return err;
}

/* client-go's relist rule: "0" (watch cache) at first, the last synced RV
 * after, "" (quorum read) once that RV is known to be gone. */
static char *relist_rv(kcr_reflector *r)
{
    if (r->rv_unavailable)
        return strdup("");
    char *rv = kcr_reflector_last_sync_rv(r);
    if (rv && !*rv && !r->consistent_list) {
        free(rv);
        rv = strdup("0");
    }
    return rv;
}

/* The selection a change replaced: a shard selection (changed; ranges n
 * 0: none; malloc'd) or a label selection (relabeled). */
typedef struct prev_selection {
    bool changed;
    kcr_shard_field field;
    kcr_shard_range *ranges;
    size_t n;
    bool relabeled;
    kcr__label_set labels;
} prev_selection;

/* Reflector thread: swaps in a selector kcr_reflector_set_shard_selector()
 * or kcr__reflector_set_label_values() left, before a list; *prev gets
 * the selection it replaced. Both at once: neither is followed (prev says
 * no change), the whole selection is listed again. */
static void take_shard_change(kcr_reflector *r, prev_selection *prev)
{
    pthread_mutex_lock(&r->mu);
    if (r->shard_pending) {
        *prev = (prev_selection){.changed = true,
                                 .field = r->shard_field,
                                 .ranges = r->shard_ranges,
                                 .n = r->shard_sel ? r->n_shard_ranges : 0};
        free(r->shard_sel);
        r->shard_sel = r->pending_sel;
        r->shard_field = r->pending_field;
        r->shard_ranges = r->pending_ranges;
        r->n_shard_ranges = r->pending_n;
        r->pending_sel = NULL;
        r->pending_ranges = NULL;
        r->pending_n = 0;
        if (r->label_pending) { /* `label` is read by this thread only */
            free(r->label);
            r->label = r->pending_label;
            r->pending_label = NULL;
            r->label_pending = false;
        }
        r->shard_pending = false;
        r->listing_gen = r->shard_gen;
        r->shard_fallback_logged = false;
        if (!r->shard_sel)
            r->stats.shard_mode = KCR_SHARD_SELECTOR_NONE;
    }
    if (r->relabel_pending) {
        free(r->label);
        r->label = r->relabel;
        r->relabel = NULL;
        prev->labels = r->labels;
        r->labels = r->relabel_set;
        r->relabel_set = (kcr__label_set){0};
        r->relabel_pending = false;
        r->listing_gen = r->shard_gen;
        prev->relabeled = !prev->changed;
        prev->changed = false;
    }
    pthread_mutex_unlock(&r->mu);
}

static bool selector_change_pending(kcr_reflector *r)
{
    pthread_mutex_lock(&r->mu);
    bool p = r->shard_pending || r->relabel_pending;
    pthread_mutex_unlock(&r->mu);
    return p;
}

/* Lists the whole selection at relist_rv() and hands it to on_replace. */
static kcr_err list_all(kcr_reflector *r)
{
    char *rv = relist_rv(r);
    if (!rv)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    list_ctx l = {.r = r};
    kcr_err err = KCR_OK;
    char *cont = NULL;
    bool full = false;         /* a continue token expired: one unpaged list */
    bool retried_quorum = false;
    bool shard_server = true; /* every page so far carried shardInfo */
    for (;;) {
        int64_t limit = r->page_size > 0 ? r->page_size : 0;
        /* A relist at a specific RV is served from the watch cache only
         * unpaged; keep paging only where the server showed it pages. */
        if (*rv && strcmp(rv, "0") != 0 && !r->paginated_result)
            limit = 0;
        kcr_list_meta meta = {0};
        kcr_status st = {0};
        kcr_shard_info shard = {0};
        err = list_page(r,
                        (kcr_request){.label_selector = r->label,
                                      .resource_version = cont ? NULL : rv,
                                      .limit = full ? 0 : limit,
                                      .continue_token = cont,
                                      .status = &st,
                                      .shard_selector = server_selector(r),
                                      .shard_info = server_selector(r) ? &shard : NULL},
                        list_item, &l, &meta);
        shard_server = shard_server && shard.present;
        kcr_shard_info_clear(&shard);
        if (err == KCR_OK) {
            if (meta.continue_token && *meta.continue_token && !full) {
                r->paginated_result = true;
                free(cont);
                cont = strdup(meta.continue_token);
                kcr_list_meta_clear(&meta);
                if (!cont) {
                    err = kcr__fail(KCR_ERR_NOMEM, "out of memory");
                    break;
                }
                continue;
            }
            /* v1.37's apiserver filters custom resources by shardSelector
             * but writes no shardInfo into their (unstructured) lists: a
             * list whose every item matched was filtered by the server. */
            note_shard_mode(r, shard_server || (server_selector(r) && l.outside == 0));
            err = deliver_replace(r, &l.objs, meta.resource_version ? meta.resource_version : "",
                                  false);
            if (err == KCR_OK) {
                pthread_mutex_lock(&r->mu);
                r->listed_gen = r->listing_gen;
                pthread_mutex_unlock(&r->mu);
            }
            kcr_list_meta_clear(&meta);
            break;
        }
        kcr_list_meta_clear(&meta);
        if (err == KCR_ERR_CANCELED || stopping(r)) {
            kcr_status_clear(&st);
            err = kcr__fail(KCR_ERR_CANCELED, "%s: list canceled: the reflector is stopping",
                            r->res.resource);
            break;
        }
        objvec_clear(&l.objs);
        l.outside = 0;
        if (err == KCR_ERR_GONE && cont && !full) {
            /* the continue token expired mid-list: list everything at once */
            kcr__log(KCR_LOG_INFO, "reflector", "%s: continue token expired, listing unpaged",
                     r->res.resource);
            free(cont);
            cont = NULL;
            full = true;
            shard_server = true;
            kcr_status_clear(&st);
            continue;
        }
        if ((err == KCR_ERR_GONE || kcr__is_too_large_rv(err, &st)) && !retried_quorum) {
            /* the RV is gone (or too new for this server): quorum read now */
            kcr__log(KCR_LOG_INFO, "reflector", "%s: list at resourceVersion %s: %s; relisting at \"\"",
                     r->res.resource, rv, kcr_last_error());
            r->rv_unavailable = true;
            retried_quorum = true;
            free(cont);
            cont = NULL;
            full = false;
            shard_server = true;
            free(rv);
            rv = strdup("");
            kcr_status_clear(&st);
            if (!rv)
                return kcr__fail(KCR_ERR_NOMEM, "out of memory");
            continue;
        }
        record_failure(r, "list", err, &st);
        kcr_status_clear(&st);
        break;
    }
    objvec_clear(&l.objs);
    free(cont);
    free(rv);
    return err;
}

/* ---- a selection change: list only what it gains ------------------------------------------ */

/* *gained (cleared first) = the hashes of the selection in force that prev did not
 * have. A selector's terms may come in any order and overlap, so both
 * selections are made sets first. */
static kcr_err gained_ranges(const kcr_reflector *r, const prev_selection *prev,
                             kcr__ranges *gained)
{
    kcr__ranges now = {0}, before = {0};
    kcr_err err = kcr__ranges_from_array(r->shard_ranges, r->n_shard_ranges, &now);
    if (err == KCR_OK)
        err = kcr__ranges_from_array(prev->ranges, prev->n, &before);
    if (err == KCR_OK)
        err = kcr__ranges_subtract(&now, &before, gained);
    kcr__ranges_clear(&now);
    kcr__ranges_clear(&before);
    return err;
}

/* What a selection change gains: its shard ranges (ranges.n) or the values
 * of its label (labels.n), and the selectors of a list of only that. */
typedef struct gain {
    bool by_label;
    kcr__ranges ranges;
    kcr__label_set labels;
    char *shard_sel, *label; /* NULL: none, `label`: the reflector's own */
} gain;

static void gain_clear(gain *g)
{
    kcr__ranges_clear(&g->ranges);
    kcr__label_set_clear(&g->labels);
    free(g->shard_sel);
    free(g->label);
}

/* Fills *g for the change from prev to the selection in force. */
static kcr_err gain_of(const kcr_reflector *r, const prev_selection *prev, gain *g)
{
    g->by_label = prev->relabeled;
    kcr_err err = g->by_label ? kcr__label_set_subtract(&r->labels, &prev->labels, &g->labels)
                              : gained_ranges(r, prev, &g->ranges);
    if (err != KCR_OK || !(g->by_label ? g->labels.n : g->ranges.n))
        return err;
    if (g->by_label) {
        /* a label change keeps the shard selection (none in label mode) */
        const char *sel = server_selector(r);
        g->shard_sel = sel ? strdup(sel) : NULL;
        g->label = kcr__label_set_selector(&g->labels);
        return (sel && !g->shard_sel) || !g->label ? kcr__fail(KCR_ERR_NOMEM, "out of memory")
                                                   : KCR_OK;
    }
    if (r->shard_field != KCR_SHARD_BY_CONTROLLER &&
        (err = kcr_shard_selector_format(r->shard_field, g->ranges.r, g->ranges.n,
                                         &g->shard_sel)) != KCR_OK)
        return err;
    if (r->shard_label && !(g->label = r->shard_label(r->label_base, g->ranges.r, g->ranges.n)))
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    return KCR_OK;
}

/* The items of a list of what a change gains: those in its ranges (a label
 * change: in the shard), transformed. */
typedef struct gained_ctx {
    kcr_reflector *r;
    const gain *gain;
    objvec objs;
    size_t outside;
} gained_ctx;

static bool in_gain(gained_ctx *g, const kcr_object *obj)
{
    kcr_reflector *r = g->r;
    if (g->gain->by_label)
        return in_shard(r, obj);
    if (kcr_shard_match(obj, r->shard_field, g->gain->ranges.r, g->gain->ranges.n))
        return true;
    pthread_mutex_lock(&r->mu);
    r->stats.shard_filtered++;
    pthread_mutex_unlock(&r->mu);
    return false;
}

static kcr_err gained_item(kcr_object *obj, void *ud)
{
    gained_ctx *g = ud;
    if (stopping(g->r))
        return kcr__fail(KCR_ERR_CANCELED, "reflector stopped");
    if (!in_gain(g, obj)) {
        g->outside++;
        return KCR_OK;
    }
    kcr_object *t;
    kcr_err err = transform(g->r, obj, &t);
    if (err == KCR_OK && (err = objvec_push(&g->objs, t)) != KCR_OK)
        kcr_object_unref(t);
    return err;
}

/* Lists what g->gain selects (a consistent read) into g->objs; *rv
 * (malloc'd) is the list's resourceVersion. *server: every page carried
 * shardInfo or nothing fell outside. Unpaged, as the watch cache serves a
 * list at "0" anyway: when four replicas gained a twentieth of 10^5 Foos
 * at once, each page of 500 took 100-400 ms (the apiserver filters the
 * collection to fill it), 3.4 s for 11 pages of each collection, against
 * 0.7-1.6 s for the same lists unpaged (docs/benchmarks.md). A continue
 * token is still followed should a server page it anyway. */
static kcr_err list_gain(kcr_reflector *r, gained_ctx *g, char **rv, bool *server)
{
    const char *sel = g->gain->shard_sel;
    char *cont = NULL;
    bool info = true;
    kcr_err err = KCR_OK;
    while (err == KCR_OK) {
        kcr_list_meta meta = {0};
        kcr_shard_info shard = {0};
        err = list_page(r,
                        (kcr_request){.label_selector = g->gain->label ? g->gain->label : r->label,
                                      .continue_token = cont,
                                      .shard_selector = sel,
                                      .shard_info = sel ? &shard : NULL},
                        gained_item, g, &meta);
        info = info && shard.present;
        kcr_shard_info_clear(&shard);
        free(cont);
        cont = NULL;
        const char *version = meta.resource_version ? meta.resource_version : "";
        if (err == KCR_OK && !*rv && !(*rv = strdup(version)))
            err = kcr__fail(KCR_ERR_NOMEM, "out of memory");
        if (err == KCR_OK && meta.continue_token && *meta.continue_token &&
            !(cont = strdup(meta.continue_token)))
            err = kcr__fail(KCR_ERR_NOMEM, "out of memory");
        kcr_list_meta_clear(&meta);
        if (!cont)
            break;
    }
    *server = info || (sel && g->outside == 0);
    free(cont);
    return err;
}

static bool keep_selected(const kcr_object *obj, void *ud)
{
    kcr_reflector *r = ud;
    return kcr_shard_match(obj, r->shard_field, r->shard_ranges, r->n_shard_ranges);
}

static bool keep_labelled(const kcr_object *obj, void *ud)
{
    kcr_reflector *r = ud;
    return kcr__label_set_matches(&r->labels, obj);
}

/* Whether a selection change can be followed by listing what it gains:
 * the sink can narrow, a list was delivered and the watch reached a
 * version that is a number, and there is a selection before and after:
 * shard ranges on the same field, or values of the same label with the
 * same base. */
static bool can_list_gained(kcr_reflector *r, const prev_selection *prev, const char *rv)
{
    bool same = prev->relabeled ? kcr__label_set_same_key(&prev->labels, &r->labels)
                                : prev->n && r->shard_sel && prev->field == r->shard_field;
    return same && r->narrow && !r->rv_unavailable && kcr_reflector_has_listed(r) &&
           rv_number(rv);
}

/* After a list of what a change gains (g: its ranges or label values,
 * taken) at version `listed`, whose objects are objs, while the watch
 * resumes from `watched`: the events in between of what g selects, or of
 * a key the list holds, are in the list and are to be skipped
 * (replayed()). */
static kcr_err replay_from(kcr_reflector *r, uint64_t watched, uint64_t listed, gain *g,
                           const objvec *objs)
{
    replay_clear(r);
    if (listed <= watched)
        return KCR_OK; /* nothing in between */
    kcr_err err = KCR_OK;
    for (size_t i = 0; i < objs->n && err == KCR_OK; i++) {
        char *key = NULL;
        if ((err = kcr_store_key(objs->v[i], &key)) == KCR_OK)
            err = kcr__strmap_put(&r->replay_keys, key, (void *)1, NULL);
        free(key);
    }
    if (err != KCR_OK) {
        replay_clear(r);
        return err;
    }
    r->replay_ranges = g->ranges;
    g->ranges = (kcr__ranges){0};
    r->replay_labels = g->labels;
    g->labels = (kcr__label_set){0};
    r->replay_rv = listed;
    return KCR_OK;
}

/* Follows a selection change without relisting what stays: lists what the
 * new selection gains (its ranges or its label's values; a consistent
 * read: served from the watch cache, where a list at the watch's older
 * version would go to etcd), drops what it loses through the narrowing
 * hook, adds what it gained (kcr__reflector_set_narrow), and resumes the
 * watch from where it was, skipping the events up to the list's version
 * that the list already holds (replayed()). False when the change cannot
 * be followed so (can_list_gained) or that list failed: the caller relists
 * the whole selection. Otherwise *err says how it went. */
static bool list_gained(kcr_reflector *r, const prev_selection *prev, kcr_err *err)
{
    char *rv = kcr_reflector_last_sync_rv(r), *listed = NULL;
    if (!rv || !can_list_gained(r, prev, rv)) {
        free(rv);
        return false;
    }
    gain gn = {0};
    *err = gain_of(r, prev, &gn);
    size_t n = gn.by_label ? gn.labels.n : gn.ranges.n;
    const char *what = gn.by_label ? "label selector changed" : "shard selector changed";
    const char *parts = gn.by_label ? "label value(s)" : "range(s)";
    gained_ctx g = {.r = r, .gain = &gn};
    bool server = true, followed = true;
    if (*err == KCR_OK && n && (*err = list_gain(r, &g, &listed, &server)) == KCR_OK &&
        !rv_number(listed))
        *err = kcr__fail(KCR_ERR_INVALID, "the list's resourceVersion \"%s\" is not a number",
                         listed);
    if (*err != KCR_OK && *err != KCR_ERR_NOMEM && !stopping(r)) {
        kcr__log(KCR_LOG_INFO, "reflector",
                 "%s: %s: listing only the gained %s failed (%s: %s); relisting the whole "
                 "selection",
                 r->res.resource, what, parts, kcr_strerror(*err), kcr_last_error());
        followed = false;
    }
    if (followed && *err == KCR_OK)
        *err = r->narrow(gn.by_label ? keep_labelled : keep_selected, r, r->narrow_ud);
    for (size_t i = 0; followed && *err == KCR_OK && i < g.objs.n; i++)
        *err = r->sink.on_add(g.objs.v[i], r->sink.user_data);
    if (followed && *err == KCR_OK && n)
        *err = replay_from(r, rv_number(rv), rv_number(listed), &gn, &g.objs);
    if (followed && *err == KCR_OK) {
        if (n && !gn.by_label)
            note_shard_mode(r, server);
        pthread_mutex_lock(&r->mu);
        r->stats.lists++;
        r->listed_gen = r->listing_gen;
        pthread_mutex_unlock(&r->mu);
        clear_failure(r);
        kcr__log(KCR_LOG_INFO, "reflector",
                 "%s: %s: listed only the %zu gained %s (%zu objects, at resourceVersion %s); "
                 "the watch resumes from %s",
                 r->res.resource, what, n, parts, g.objs.n, listed ? listed : rv, rv);
    } else if (followed && stopping(r)) {
        *err = kcr__fail(KCR_ERR_CANCELED, "%s: list canceled: the reflector is stopping",
                         r->res.resource);
    } else if (followed) {
        record_failure(r, "list (sink)", *err, NULL);
    }
    objvec_clear(&g.objs);
    gain_clear(&gn);
    free(listed);
    free(rv);
    return followed;
}

static kcr_err do_list(kcr_reflector *r)
{
    prev_selection prev = {0};
    take_shard_change(r, &prev);
    kcr_err err = KCR_OK;
    bool followed = (prev.changed || prev.relabeled) && list_gained(r, &prev, &err);
    free(prev.ranges);
    kcr__label_set_clear(&prev.labels);
    return followed ? err : list_all(r);
}

/* ---- WATCH -------------------------------------------------------------------------------- */

typedef enum next_step {
    NEXT_STOP,
    NEXT_REWATCH,         /* re-watch from the last RV at once */
    NEXT_BACKOFF_REWATCH, /* wait, then re-watch from the last RV */
    NEXT_RELIST,          /* list again (at once) */
    NEXT_BACKOFF_RELIST,  /* wait, then list again */
    NEXT_FALLBACK         /* streaming list unsupported: LIST instead */
} next_step;

typedef struct watch_ctx {
    kcr_reflector *r;
    bool initial;     /* streaming list: still receiving the initial events */
    bool unsupported; /* streaming list: the server broke the initial-events contract */
    objvec objs;      /* initial events */
    uint64_t events;
    kcr_err sink_err;
} watch_ctx;

static kcr_err on_event(const kcr_watch_event *ev, void *ud)
{
    watch_ctx *w = ud;
    kcr_reflector *r = w->r;
    if (stopping(r))
        return kcr__fail(KCR_ERR_CANCELED, "reflector stopped");
    kcr_err err = KCR_OK;
    switch (ev->type) {
    case KCR_WATCH_ADDED:
    case KCR_WATCH_MODIFIED:
    case KCR_WATCH_DELETED: {
        if (!ev->object)
            return KCR_OK;
        if (!w->initial && r->replay_rv && replayed(r, ev)) {
            set_rv(r, ev->resource_version);
            w->events++;
            return KCR_OK;
        }
        if (w->initial && ev->type != KCR_WATCH_ADDED) {
            /* initial events are all ADDED: this server just watches */
            w->unsupported = true;
            return kcr__fail(KCR_ERR_UNSUPPORTED,
                             "%s: streaming list: initial event not ADDED (no streaming support)",
                             r->res.resource);
        }
        if (!in_shard(r, ev->object)) {
            /* a controller reference can change (adoption): an object that
             * moved out of the selection leaves the cache (a no-op for one
             * it never held) */
            if (ev->type == KCR_WATCH_MODIFIED && r->shard_field == KCR_SHARD_BY_CONTROLLER &&
                (err = leave_shard(r, ev->object)) != KCR_OK) {
                w->sink_err = err;
                return err;
            }
            if (!w->initial)
                set_rv(r, ev->resource_version);
            w->events++;
            return KCR_OK;
        }
        kcr_object *obj;
        if ((err = (w->initial ? list_object : transform)(r, ev->object, &obj)) != KCR_OK) {
            w->sink_err = err;
            return err;
        }
        if (w->initial) {
            if ((err = objvec_push(&w->objs, obj)) != KCR_OK)
                kcr_object_unref(obj);
            w->events++;
            return err;
        }
        if (ev->type == KCR_WATCH_ADDED)
            err = r->sink.on_add(obj, r->sink.user_data);
        else if (ev->type == KCR_WATCH_MODIFIED)
            err = r->sink.on_update(obj, r->sink.user_data);
        else
            err = r->sink.on_delete(obj, r->sink.user_data);
        kcr_object_unref(obj);
        if (err != KCR_OK) {
            w->sink_err = err;
            return err;
        }
        set_rv(r, ev->resource_version);
        w->events++;
        pthread_mutex_lock(&r->mu);
        r->stats.watch_events++;
        pthread_mutex_unlock(&r->mu);
        return KCR_OK;
    }
    case KCR_WATCH_BOOKMARK:
        pthread_mutex_lock(&r->mu);
        r->stats.bookmarks++;
        pthread_mutex_unlock(&r->mu);
        w->events++;
        if (w->initial) {
            if (!ev->initial_events_end) {
                w->unsupported = true;
                return kcr__fail(KCR_ERR_UNSUPPORTED,
                                 "%s: streaming list: a bookmark before initial-events-end",
                                 r->res.resource);
            }
            w->initial = false;
            if ((err = deliver_replace(r, &w->objs, ev->resource_version, true)) != KCR_OK)
                w->sink_err = err;
            return err;
        }
        if (r->replay_rv && rv_number(ev->resource_version) >= r->replay_rv)
            replay_clear(r);
        if (r->sink.on_bookmark &&
            (err = r->sink.on_bookmark(ev->resource_version ? ev->resource_version : "",
                                       r->sink.user_data)) != KCR_OK) {
            w->sink_err = err;
            return err;
        }
        set_rv(r, ev->resource_version);
        return KCR_OK;
    case KCR_WATCH_ERROR:
        return KCR_OK; /* the watch returns the Status's error */
    }
    return KCR_OK;
}

static next_step watch_once(kcr_reflector *r, bool streaming)
{
    int64_t t =
        r->min_watch_timeout_ms + (int64_t)(next_rand(r) % (uint64_t)(r->min_watch_timeout_ms + 1));
    int64_t idle = r->idle_limit_ms < 0   ? 0
                   : r->idle_limit_ms > 0 ? r->idle_limit_ms
                                          : t + IDLE_MARGIN_MS;
    /* A streaming list asks for state not older than the last RV ("" at
     * first, or once that RV is gone: a consistent read). */
    char *rv = streaming && r->rv_unavailable ? strdup("") : kcr_reflector_last_sync_rv(r);
    if (!rv)
        return NEXT_BACKOFF_RELIST;
    kcr_status st = {0};
    kcr_request o = {.resource = &r->res,
                     .ns = r->ns,
                     .label_selector = r->label,
                     .field_selector = r->field,
                     .resource_version = rv,
                     .timeout_ms = t,
                     .metadata_only = r->metadata_only,
                     .drop_managed_fields = r->drop_managed_fields,
                     .allow_bookmarks = true,
                     .idle_timeout_ms = idle,
                     .cancel = r->cancel,
                     .status = &st,
                     .shard_selector = server_selector(r)};
    if (streaming) {
        o.send_initial_events = true;
        o.resource_version_match = "NotOlderThan";
    }
    watch_ctx w = {.r = r, .initial = streaming};
    pthread_mutex_lock(&r->mu);
    r->stats.watch_requests++;
    kcr_cancel_reset(r->watch_cancel);
    /* checked under the lock the setters take */
    bool skip = r->stopping || r->shard_pending || r->relabel_pending;
    pthread_mutex_unlock(&r->mu);
    o.cancel = r->watch_cancel;
    if (skip) {
        kcr_status_clear(&st);
        free(rv);
        return stopping(r) ? NEXT_STOP : NEXT_RELIST;
    }
    int64_t start = kcr__now_ns();
    kcr_err err = kcr_client_watch(r->client, &o, on_event, &w);
    /* Healthy: the watch delivered something, or ran its course for a while.
     * A request that failed without one event failed, however long it took
     * (a slow 503, a connect timeout): it backs off. */
    bool healthy =
        w.events > 0 || (err == KCR_OK && kcr__now_ns() - start >= HEALTHY_WATCH_NS);
    bool was_initial = w.initial;
    objvec_clear(&w.objs);
    next_step next;
    if (stopping(r)) {
        next = NEXT_STOP;
    } else if (err == KCR_ERR_CANCELED && selector_change_pending(r)) {
        kcr__log(KCR_LOG_DEBUG, "reflector", "%s: selector changed: watch ended",
                 r->res.resource);
        next = NEXT_RELIST;
    } else if (err == KCR_ERR_CANCELED) {
        next = NEXT_STOP;
    } else if (w.sink_err != KCR_OK) {
        record_failure(r, "watch (sink)", w.sink_err, NULL);
        next = NEXT_BACKOFF_RELIST;
    } else if (was_initial && (w.unsupported || err == KCR_OK || err == KCR_ERR_INVALID_OBJECT ||
                               err == KCR_ERR_BAD_REQUEST)) {
        kcr__log(KCR_LOG_INFO, "reflector",
                 "%s: the server does not support streaming lists (%s); using LIST",
                 r->res.resource,
                 w.unsupported ? "no initial-events-end bookmark"
                 : err == KCR_OK ? "watch ended before the initial-events-end bookmark"
                                 : kcr_last_error());
        next = NEXT_FALLBACK;
    } else if (err == KCR_OK) {
        next = healthy ? NEXT_REWATCH : NEXT_BACKOFF_REWATCH;
    } else if (err == KCR_ERR_GONE || kcr__is_too_large_rv(err, &st)) {
        record_failure(r, "watch", err, &st);
        if (was_initial || kcr__is_too_large_rv(err, &st))
            r->rv_unavailable = true;
        next = healthy || was_initial ? NEXT_RELIST : NEXT_BACKOFF_RELIST;
    } else if (!was_initial && (err == KCR_ERR_TRANSPORT || err == KCR_ERR_TIMEOUT ||
                                err == KCR_ERR_TOO_MANY || (err == KCR_ERR_API && st.code >= 500))) {
        record_failure(r, "watch", err, &st);
        next = healthy && err != KCR_ERR_TOO_MANY ? NEXT_REWATCH : NEXT_BACKOFF_REWATCH;
    } else {
        record_failure(r, was_initial ? "streaming list" : "watch", err, &st);
        next = NEXT_BACKOFF_RELIST;
    }
    if (next == NEXT_REWATCH || next == NEXT_BACKOFF_REWATCH)
        kcr__log(KCR_LOG_DEBUG, "reflector", "%s: watch ended (%s) after %llu events; re-watching from %s",
                 r->res.resource, kcr_strerror(err), (unsigned long long)w.events, rv);
    kcr_status_clear(&st);
    free(rv);
    return next;
}

/* ---- the loop ------------------------------------------------------------------------------ */

static void *run(void *arg)
{
    kcr_reflector *r = arg;
    bool need_list = true;
    bool streaming_unsupported = r->mode != KCR_LIST_MODE_STREAMING;
    while (!stopping(r)) {
        next_step next;
        if (need_list && !streaming_unsupported && !r->shard_sel && !selector_change_pending(r)) {
            next = watch_once(r, true);
            if (next == NEXT_FALLBACK) {
                streaming_unsupported = true;
                pthread_mutex_lock(&r->mu);
                r->stats.streaming_unsupported = true;
                pthread_mutex_unlock(&r->mu);
                continue;
            }
            /* a streaming watch that got past its initial events is a watch */
            if (kcr_reflector_has_listed(r) && next != NEXT_RELIST && next != NEXT_BACKOFF_RELIST)
                need_list = false;
        } else if (need_list) {
            kcr_err err = do_list(r);
            if (err == KCR_ERR_CANCELED || stopping(r))
                break;
            if (err != KCR_OK) {
                if (!backoff(r))
                    break;
                continue;
            }
            need_list = false;
            continue;
        } else {
            next = watch_once(r, false);
        }
        switch (next) {
        case NEXT_STOP:
            return NULL;
        case NEXT_REWATCH:
        case NEXT_FALLBACK:
            break;
        case NEXT_BACKOFF_REWATCH:
            if (!backoff(r))
                return NULL;
            break;
        case NEXT_RELIST:
            need_list = true;
            break;
        case NEXT_BACKOFF_RELIST:
            need_list = true;
            if (!backoff(r))
                return NULL;
            break;
        }
    }
    return NULL;
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

kcr_err kcr_reflector_new(kcr_client *client, const kcr_resource *res,
                          const kcr_reflector_sink *sink, const kcr_reflector_options *opts,
                          kcr_reflector **out)
{
    if (out)
        *out = NULL;
    if (!client || !res || !res->version || !res->resource || !sink || !out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_reflector_new: NULL argument");
    if (!sink->on_add || !sink->on_update || !sink->on_delete || !sink->on_replace)
        return kcr__fail(KCR_ERR_INVALID,
                         "kcr_reflector_new: the sink needs on_add, on_update, on_delete and "
                         "on_replace");
    kcr_reflector_options d = {0};
    if (!opts)
        opts = &d;
    if (kcr__abi_reserved(opts->reserved, sizeof opts->reserved, "kcr_reflector_options") != KCR_OK ||
        kcr__abi_reserved(sink->reserved, sizeof sink->reserved, "kcr_reflector_sink") != KCR_OK)
        return KCR_ERR_INVALID; /* detail: kcr__abi_reserved */
    const struct {
        const char *name;
        int64_t ms;
    } durations[] = {{"min_watch_timeout_ms", opts->min_watch_timeout_ms},
                     {"idle_limit_ms", opts->idle_limit_ms},
                     {"backoff_initial_ms", opts->backoff_initial_ms},
                     {"backoff_max_ms", opts->backoff_max_ms},
                     {"backoff_reset_ms", opts->backoff_reset_ms}};
    if (opts->idle_limit_ms < 0 &&
        kcr__duration_check("kcr_reflector_new: idle_limit_ms", opts->idle_limit_ms,
                            KCR__DURATION_INFINITE) != KCR_OK)
        return KCR_ERR_INVALID; /* detail: kcr__duration_check */
    for (size_t i = 0; i < sizeof durations / sizeof durations[0]; i++)
        if (durations[i].ms > KCR__MAX_DURATION_MS)
            return kcr__fail(KCR_ERR_INVALID, "kcr_reflector_new: %s %lld is above %lld ms",
                             durations[i].name, (long long)durations[i].ms,
                             (long long)KCR__MAX_DURATION_MS);
    kcr_reflector *r = calloc(1, sizeof *r);
    if (!r)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    if (opts->shard_selector && *opts->shard_selector) {
        kcr_err err = kcr_shard_selector_parse(opts->shard_selector, &r->shard_field,
                                               &r->shard_ranges, &r->n_shard_ranges);
        if (err == KCR_OK)
            err = kcr_shard_selector_format(r->shard_field, r->shard_ranges, r->n_shard_ranges,
                                            &r->shard_sel);
        if (err != KCR_OK) {
            free(r->shard_ranges);
            free(r);
            return kcr__refail(err, "kcr_reflector_new: ");
        }
    }
    r->client = client;
    r->sink = *sink;
    r->group = strdup(res->group ? res->group : "");
    r->version = strdup(res->version);
    r->resource = strdup(res->resource);
    r->ns = dup_or_null(opts->ns);
    r->label = dup_or_null(opts->label_selector);
    r->field = dup_or_null(opts->field_selector);
    r->rv = strdup("");
    r->rv_cap = 1;
    bool oom = !r->group || !r->version || !r->resource || !r->rv ||
               (opts->ns && *opts->ns && !r->ns) ||
               (opts->label_selector && *opts->label_selector && !r->label) ||
               (opts->field_selector && *opts->field_selector && !r->field);
    if (oom || kcr_cancel_new(&r->cancel) != KCR_OK || kcr_cancel_new(&r->watch_cancel) != KCR_OK) {
        kcr_reflector_free(r);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    }
    r->res = (kcr_resource){r->group, r->version, r->resource};
    r->metadata_only = opts->metadata_only;
    r->consistent_list = opts->consistent_list;
    r->mode = opts->list_mode == KCR_LIST_MODE_DEFAULT ? KCR_LIST_MODE_PAGED : opts->list_mode;
    /* A streaming list (sendInitialEvents) ends with a bookmark that carries
     * no shardInfo, so it cannot tell whether the server applied the
     * selector: with one, the state always comes from LIST (the run loop
     * checks, as a selector can be set later). */
    r->page_size = opts->page_size == 0 ? 500 : opts->page_size;
    r->min_watch_timeout_ms = opts->min_watch_timeout_ms > 0 ? opts->min_watch_timeout_ms : 300000;
    r->idle_limit_ms = opts->idle_limit_ms;
    r->bo_initial_ms = opts->backoff_initial_ms > 0 ? opts->backoff_initial_ms : 800;
    r->bo_max_ms = opts->backoff_max_ms > 0 ? opts->backoff_max_ms : 30000;
    r->bo_reset_ms = opts->backoff_reset_ms > 0 ? opts->backoff_reset_ms : 120000;
    r->bo_jitter = opts->backoff_jitter == 0 ? 1.0 : opts->backoff_jitter;
    r->transform = opts->transform;
    r->transform_ud = opts->transform_user_data;
    r->on_error = opts->on_error;
    r->error_ud = opts->error_user_data;
    r->rng = (uint64_t)kcr__now_ns() ^ ((uint64_t)(uintptr_t)r << 17) ^ UINT64_C(0x9e3779b97f4a7c15);
    if (!r->rng)
        r->rng = 1;
    pthread_mutex_init(&r->mu, NULL);
    kcr__cond_init_monotonic(&r->cond);
    *out = r;
    return KCR_OK;
}

void kcr__reflector_drop_managed_fields(kcr_reflector *r)
{
    r->drop_managed_fields = true;
}

void kcr__reflector_set_list_reuse(kcr_reflector *r, kcr__list_reuse_fn fn, void *user_data)
{
    r->list_reuse = fn;
    r->list_reuse_ud = user_data;
}

void kcr__reflector_set_narrow(kcr_reflector *r, kcr__narrow_fn fn, void *user_data)
{
    r->narrow = fn;
    r->narrow_ud = user_data;
}

kcr_err kcr__reflector_set_shard_label(kcr_reflector *r, kcr__shard_label_fn fn, const char *base)
{
    char *b = dup_or_null(base);
    if (base && *base && !b)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    free(r->label_base);
    r->label_base = b;
    r->shard_label = fn;
    return KCR_OK;
}

void kcr__reflector_set_backoff_hook(kcr_reflector *r, kcr__backoff_hook_fn fn, void *user_data)
{
    r->backoff_hook = fn;
    r->backoff_hook_ud = user_data;
}

kcr_err kcr_reflector_start(kcr_reflector *r)
{
    if (!r)
        return kcr__fail(KCR_ERR_INVALID, "kcr_reflector_start: NULL reflector");
    pthread_mutex_lock(&r->mu);
    if (r->started || r->stopping) {
        pthread_mutex_unlock(&r->mu);
        return kcr__fail(KCR_ERR_STATE, "reflector already started or stopped");
    }
    int rc = pthread_create(&r->thread, NULL, run, r);
    if (rc == 0)
        r->started = true;
    pthread_mutex_unlock(&r->mu);
    return rc == 0 ? KCR_OK : kcr__fail(KCR_ERR_NOMEM, "cannot start the reflector thread");
}

void kcr_reflector_stop(kcr_reflector *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    r->stopping = true;
    bool join = r->started && !r->joined;
    r->joined = r->joined || join;
    pthread_cond_broadcast(&r->cond);
    kcr_cancel_trigger(r->watch_cancel);
    pthread_mutex_unlock(&r->mu);
    kcr_cancel_trigger(r->cancel);
    if (join)
        pthread_join(r->thread, NULL);
}

void kcr_reflector_free(kcr_reflector *r)
{
    if (!r)
        return;
    if (r->cancel) {
        kcr_reflector_stop(r);
        pthread_mutex_destroy(&r->mu);
        pthread_cond_destroy(&r->cond);
    }
    kcr_cancel_free(r->cancel);
    kcr_cancel_free(r->watch_cancel);
    kcr_status_clear(&r->last_st);
    free(r->last_msg);
    free(r->rv);
    free(r->group);
    free(r->version);
    free(r->resource);
    free(r->ns);
    free(r->label);
    free(r->field);
    free(r->shard_sel);
    free(r->shard_ranges);
    free(r->pending_sel);
    free(r->pending_label);
    free(r->pending_ranges);
    free(r->relabel);
    kcr__label_set_clear(&r->relabel_set);
    kcr__label_set_clear(&r->labels);
    free(r->label_base);
    replay_clear(r);
    free(r);
}

kcr_err kcr_reflector_set_shard_selector(kcr_reflector *r, const char *selector)
{
    if (!r)
        return kcr__fail(KCR_ERR_INVALID, "kcr_reflector_set_shard_selector: NULL reflector");
    char *sel = NULL;
    kcr_shard_field field = KCR_SHARD_BY_UID;
    kcr_shard_range *ranges = NULL;
    size_t n = 0;
    if (selector && *selector) {
        kcr_err err = kcr_shard_selector_parse(selector, &field, &ranges, &n);
        if (err == KCR_OK)
            err = kcr_shard_selector_format(field, ranges, n, &sel);
        if (err != KCR_OK) {
            free(ranges);
            return kcr__refail(err, "kcr_reflector_set_shard_selector: ");
        }
    }
    /* the label selector that goes with it (set before start, read only) */
    char *lab = r->shard_label ? r->shard_label(r->label_base, ranges, n) : NULL;
    if (r->shard_label && !lab) {
        free(ranges);
        free(sel);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    }
    pthread_mutex_lock(&r->mu);
    free(r->pending_sel);
    free(r->pending_ranges);
    if (r->shard_label) {
        free(r->pending_label);
        r->pending_label = *lab ? lab : NULL;
        r->label_pending = true;
        if (!*lab)
            free(lab);
    }
    r->pending_sel = sel;
    r->pending_field = field;
    r->pending_ranges = ranges;
    r->pending_n = n;
    r->shard_pending = true;
    r->shard_gen++;
    kcr_cancel_trigger(r->watch_cancel); /* the watch ends; the thread relists */
    pthread_mutex_unlock(&r->mu);
    return KCR_OK;
}

kcr_err kcr__reflector_set_label_values(kcr_reflector *r, const char *base, const char *key,
                                        const char *const *values, size_t n)
{
    if (r->shard_label)
        return kcr__fail(KCR_ERR_STATE, "%s: the label selector follows the shard selector",
                         r->res.resource);
    if (!key || !*key || !n)
        return kcr__fail(KCR_ERR_INVALID, "%s: a label selection needs a key and a value",
                         r->res.resource);
    kcr__label_set set = {0};
    kcr_err err = kcr__label_set_init(&set, base, key, values, n);
    char *sel = err == KCR_OK ? kcr__label_set_selector(&set) : NULL;
    if (!sel) {
        kcr__label_set_clear(&set);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    }
    pthread_mutex_lock(&r->mu);
    if (!r->started) { /* the first list's selection */
        free(r->label);
        r->label = sel;
        kcr__label_set_clear(&r->labels);
        r->labels = set;
    } else {
        free(r->relabel);
        r->relabel = sel;
        kcr__label_set_clear(&r->relabel_set);
        r->relabel_set = set;
        r->relabel_pending = true;
        r->shard_gen++;
        kcr_cancel_trigger(r->watch_cancel); /* the watch ends; the thread follows */
    }
    pthread_mutex_unlock(&r->mu);
    return KCR_OK;
}

uint64_t kcr__reflector_shard_gen(kcr_reflector *r)
{
    pthread_mutex_lock(&r->mu);
    uint64_t g = r->shard_gen;
    pthread_mutex_unlock(&r->mu);
    return g;
}

bool kcr__reflector_shard_listed(kcr_reflector *r, uint64_t gen)
{
    pthread_mutex_lock(&r->mu);
    bool listed = r->listed && r->listed_gen >= gen;
    pthread_mutex_unlock(&r->mu);
    return listed;
}

kcr_err kcr_reflector_last_error(kcr_reflector *r, kcr_status *status, char **message)
{
    if (status)
        kcr_status_clear(status);
    if (message)
        *message = NULL;
    pthread_mutex_lock(&r->mu);
    kcr_err err = r->last_err;
    if (err != KCR_OK) {
        if (status && r->last_st.code)
            kcr_status_copy(status, &r->last_st);
        if (message)
            *message = strdup(r->last_msg ? r->last_msg : "");
    }
    pthread_mutex_unlock(&r->mu);
    return err;
}

bool kcr_reflector_has_listed(kcr_reflector *r)
{
    pthread_mutex_lock(&r->mu);
    bool l = r->listed;
    pthread_mutex_unlock(&r->mu);
    return l;
}

void (kcr_reflector_get_stats)(size_t out_size, kcr_reflector *r, kcr_reflector_stats *out)
{
    pthread_mutex_lock(&r->mu);
    kcr_reflector_stats st = r->stats;
    pthread_mutex_unlock(&r->mu);
    kcr__abi_out(out, out_size, &st, sizeof st);
}
