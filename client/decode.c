/* Streaming LIST and watch decoders: two small state machines over the
 * stream framer (client/framer.h), which captures each item (each event's
 * object) straight into an object builder. See decode.h. */
#include "client/decode.h"

#include <stdlib.h>
#include <string.h>

#include "client/client_impl.h"
#include "client/framer.h"
#include "core/error.h"
#include "core/grow.h"
#include "core/str.h"
#include "object/stamp.h"
#include "object/utf8.h"
#include "object/value.h"

static bool key_is(const kcr__jev *ev, const char *key)
{
    size_t n = strlen(key);
    return ev->len == n && memcmp(ev->s, key, n) == 0;
}

static bool is_start(const kcr__jev *ev)
{
    return ev->type == KCR__JEV_START_MAP || ev->type == KCR__JEV_START_ARRAY;
}

/* ================================ LIST ================================ */

/* Where the LIST machine is in the List object. Values it does not read
 * (other members, nested values of metadata) are skipped by the framer. */
typedef enum list_state {
    LIST_BEFORE,      /* nothing parsed yet */
    LIST_TOP,         /* in the List object, before a key or its end */
    LIST_TOP_VALUE,   /* after a List key (`top` says which), before its value */
    LIST_META,        /* in metadata, before a key or its end */
    LIST_META_VALUE,  /* after a metadata key (`meta` says which), before its value */
    LIST_SHARD,       /* in metadata.shardInfo, before a key or its end */
    LIST_SHARD_VALUE, /* after a shardInfo key (`shard_key_selector` says if it is
                         "selector"), before its value */
    LIST_ITEMS,       /* in items, before an item or the array's end */
    LIST_AFTER        /* the List object has ended */
} list_state;

typedef enum list_key { TOP_METADATA, TOP_ITEMS, TOP_KIND, TOP_API_VERSION, TOP_OTHER } list_key;
typedef enum meta_key {
    META_RV,
    META_CONTINUE,
    META_REMAINING,
    META_SHARD_INFO,
    META_OTHER
} meta_key;

struct kcr__list_decoder {
    kcr__framer *f;
    kcr_list_item_fn fn;
    void *ud;
    list_state state;
    list_key top;
    meta_key meta;
    char *rv, *cont;
    int64_t remaining;
    bool has_remaining;
    /* metadata.shardInfo: present, and its selector (NULL until read) */
    bool has_shard_info, shard_key_selector;
    char *shard_selector;
    size_t n_items;
    /* A List's items carry no kind/apiVersion; each is stamped with the
     * List's (kind without "List"), as client-go does for unstructured
     * lists, when it has neither of its own. The apiserver sends kind and
     * apiVersion before items, so items are stamped while they are built;
     * items finished before both are known wait in `pending` (in order)
     * until they are, or until the body ends. */
    char *item_kind, *item_api_version;
    bool item_typed; /* the item being built has a kind or apiVersion key */
    kcr_object **pending;
    size_t n_pending, cap_pending;
};

static bool list_type_known(const kcr__list_decoder *d)
{
    return d->item_kind && d->item_api_version;
}

/* A built object that waited for the List's type: a copy stamped with what
 * is known of it, or a new reference when there is nothing to stamp. */
static kcr_err stamp_built(const kcr__list_decoder *d, kcr_object *obj, kcr_object **out)
{
    const char *kind = d->item_kind ? d->item_kind : "";
    const char *av = d->item_api_version ? d->item_api_version : "";
    if (*kcr_object_kind(obj) || *kcr_object_api_version(obj) || (!*kind && !*av)) {
        *out = kcr_object_ref(obj);
        return KCR_OK;
    }
    return kcr__object_stamp_type(obj, av, kind, out);
}

/* Hands the waiting items to the callback, stamped. */
static kcr_err flush_pending(kcr__list_decoder *d)
{
    kcr_err err = KCR_OK;
    for (size_t i = 0; i < d->n_pending && err == KCR_OK; i++) {
        kcr_object *obj = NULL;
        err = stamp_built(d, d->pending[i], &obj);
        if (err == KCR_OK && d->fn)
            err = d->fn(obj, d->ud);
        kcr_object_unref(obj);
    }
    for (size_t j = 0; j < d->n_pending; j++)
        kcr_object_unref(d->pending[j]);
    d->n_pending = 0;
    return err;
}

static kcr_err hold_pending(kcr__list_decoder *d, kcr_object *obj)
{
    kcr_object **grown =
        kcr__grow(d->pending, &d->cap_pending, d->n_pending, sizeof *d->pending, 64);
    if (!grown) {
        kcr_object_unref(obj);
        return kcr__fail(KCR_ERR_NOMEM, "list item %zu: out of memory", d->n_items);
    }
    d->pending = grown;
    d->pending[d->n_pending++] = obj;
    return KCR_OK;
}

/* The item in the builder is complete. */
static kcr_err list_item_done(kcr__list_decoder *d)
{
    kcr_err err = kcr__framer_unit_end(d->f);
    if (err != KCR_OK)
        return err;
    kcr_object *obj = NULL;
    if (kcr__object_builder_finish(kcr__framer_builder(d->f), &obj) != KCR_OK)
        return kcr__refail(KCR_ERR_PARSE, "list item %zu: ", d->n_items);
    d->n_items++;
    if (d->n_pending || (!d->item_typed && !list_type_known(d)))
        return hold_pending(d, obj);
    err = d->fn ? d->fn(obj, d->ud) : KCR_OK;
    kcr_object_unref(obj);
    return err;
}

/* A string member of the List (kind, apiVersion) or of its metadata. */
static kcr_err list_string(char **dst, const kcr__jev *ev, size_t len)
{
    size_t ok = kcr__utf8_valid_prefix(ev->s, ev->len);
    if (ok != ev->len)
        return kcr__fail(KCR_ERR_PARSE, "list: string is not valid UTF-8 (byte %zu of %zu)", ok,
                         ev->len);
    free(*dst);
    /* not strndup: the reader's strings are not NUL-terminated and may end where
     * curl's buffer ends */
    if (!(*dst = kcr__memdup_str(ev->s, len)))
        return kcr__fail(KCR_ERR_NOMEM, "out of memory reading the list's metadata");
    return KCR_OK;
}

static kcr_err list_top_value(kcr__list_decoder *d, const kcr__jev *ev)
{
    d->state = LIST_TOP;
    if (d->top == TOP_METADATA && ev->type == KCR__JEV_START_MAP) {
        d->state = LIST_META;
    } else if (d->top == TOP_ITEMS && ev->type == KCR__JEV_START_ARRAY) {
        d->state = LIST_ITEMS;
    } else if (is_start(ev)) {
        kcr__framer_skip(d->f);
    } else if ((d->top == TOP_KIND || d->top == TOP_API_VERSION) &&
               ev->type == KCR__JEV_STRING) {
        size_t len = ev->len;
        if (d->top == TOP_KIND && len > 4 && memcmp(ev->s + len - 4, "List", 4) == 0)
            len -= 4;
        kcr_err err =
            list_string(d->top == TOP_KIND ? &d->item_kind : &d->item_api_version, ev, len);
        if (err == KCR_OK && d->n_pending && list_type_known(d))
            err = flush_pending(d);
        return err;
    }
    return KCR_OK;
}

static kcr_err list_meta_value(kcr__list_decoder *d, const kcr__jev *ev)
{
    d->state = LIST_META;
    if (d->meta == META_SHARD_INFO && ev->type == KCR__JEV_START_MAP) {
        d->has_shard_info = true;
        d->state = LIST_SHARD;
    } else if (is_start(ev)) {
        kcr__framer_skip(d->f);
    } else if (d->meta == META_REMAINING && ev->type == KCR__JEV_NUMBER) {
        char num[32]; /* the reader's number text is not NUL-terminated */
        size_t n = ev->len < sizeof num - 1 ? ev->len : sizeof num - 1;
        memcpy(num, ev->s, n);
        num[n] = '\0';
        d->remaining = strtoll(num, NULL, 10);
        d->has_remaining = true;
    } else if ((d->meta == META_RV || d->meta == META_CONTINUE) && ev->type == KCR__JEV_STRING) {
        return list_string(d->meta == META_RV ? &d->rv : &d->cont, ev, ev->len);
    }
    return KCR_OK;
}

static kcr_err list_event(kcr__framer *f, const kcr__jev *ev, void *user_data)
{
    kcr__list_decoder *d = user_data;
    switch (d->state) {
    case LIST_BEFORE:
        if (ev->type != KCR__JEV_START_MAP)
            return kcr__fail(KCR_ERR_PARSE, "list body is not a JSON object");
        d->state = LIST_TOP;
        return KCR_OK;
    case LIST_TOP:
        if (ev->type == KCR__JEV_END_MAP) {
            d->state = LIST_AFTER;
            return KCR_OK;
        }
        d->top = key_is(ev, "metadata")     ? TOP_METADATA
                 : key_is(ev, "items")      ? TOP_ITEMS
                 : key_is(ev, "kind")       ? TOP_KIND
                 : key_is(ev, "apiVersion") ? TOP_API_VERSION
                                            : TOP_OTHER;
        d->state = LIST_TOP_VALUE;
        return KCR_OK;
    case LIST_TOP_VALUE: return list_top_value(d, ev);
    case LIST_META:
        if (ev->type == KCR__JEV_END_MAP) {
            d->state = LIST_TOP;
            return KCR_OK;
        }
        d->meta = key_is(ev, "resourceVersion")      ? META_RV
                  : key_is(ev, "continue")           ? META_CONTINUE
                  : key_is(ev, "remainingItemCount") ? META_REMAINING
                  : key_is(ev, "shardInfo")          ? META_SHARD_INFO
                                                     : META_OTHER;
        d->state = LIST_META_VALUE;
        return KCR_OK;
    case LIST_META_VALUE: return list_meta_value(d, ev);
    case LIST_SHARD:
        if (ev->type == KCR__JEV_END_MAP) {
            d->state = LIST_META;
            return KCR_OK;
        }
        d->shard_key_selector = key_is(ev, "selector");
        d->state = LIST_SHARD_VALUE;
        return KCR_OK;
    case LIST_SHARD_VALUE:
        d->state = LIST_SHARD;
        if (is_start(ev))
            kcr__framer_skip(f);
        else if (d->shard_key_selector && ev->type == KCR__JEV_STRING)
            return list_string(&d->shard_selector, ev, ev->len);
        return KCR_OK;
    case LIST_ITEMS:
        switch (ev->type) {
        case KCR__JEV_START_MAP:
            d->item_typed = false;
            kcr__framer_unit_begin(f);
            return kcr__framer_capture(f);
        case KCR__JEV_CAPTURED: return list_item_done(d);
        case KCR__JEV_END_ARRAY: d->state = LIST_TOP; return KCR_OK;
        case KCR__JEV_NULL: return KCR_OK; /* "items": [null] never happens; tolerate it */
        default: return kcr__fail(KCR_ERR_PARSE, "list item %zu is not an object", d->n_items);
        }
    case LIST_AFTER: break;
    }
    return kcr__fail(KCR_ERR_PARSE, "list body holds more than one JSON value");
}

static void list_capture_key(kcr__framer *f, const char *key, size_t len, void *user_data)
{
    kcr__list_decoder *d = user_data;
    if ((len == 4 && memcmp(key, "kind", 4) == 0) ||
        (len == 10 && memcmp(key, "apiVersion", 10) == 0))
        d->item_typed = true;
}

/* Feeds the List's kind/apiVersion into the item being built (before its
 * closing brace) unless it has one of its own. */
static kcr_err list_capture_closing(kcr__framer *f, kcr__object_builder *b, void *user_data)
{
    kcr__list_decoder *d = user_data;
    if (d->item_typed || !list_type_known(d) || d->n_pending ||
        (!*d->item_kind && !*d->item_api_version))
        return KCR_OK;
    kcr_err err = KCR_OK;
    if (*d->item_api_version) {
        err = kcr__object_builder_map_key(b, "apiVersion", 10);
        if (err == KCR_OK)
            err = kcr__object_builder_string(b, d->item_api_version, strlen(d->item_api_version));
    }
    if (err == KCR_OK && *d->item_kind) {
        err = kcr__object_builder_map_key(b, "kind", 4);
        if (err == KCR_OK)
            err = kcr__object_builder_string(b, d->item_kind, strlen(d->item_kind));
    }
    return err == KCR_OK ? KCR_OK : kcr__refail(err, "list item %zu: ", d->n_items);
}

static const kcr__framer_ops list_ops = {
    .event = list_event,
    .capture_key = list_capture_key,
    .capture_closing = list_capture_closing,
};

kcr__list_decoder *kcr__list_decoder_new(size_t max_item_bytes, kcr_list_item_fn fn, void *ud)
{
    kcr__list_decoder *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->fn = fn;
    d->ud = ud;
    d->f = kcr__framer_new(max_item_bytes ? max_item_bytes : KCR__DEFAULT_MAX_ITEM_BYTES,
                           "list item", "list", false, &list_ops, d);
    if (!d->f) {
        free(d);
        return NULL;
    }
    return d;
}

void kcr__list_decoder_drop_managed_fields(kcr__list_decoder *d)
{
    kcr__framer_drop_managed_fields(d->f);
}

void kcr__list_decoder_free(kcr__list_decoder *d)
{
    if (!d)
        return;
    kcr__framer_free(d->f);
    free(d->rv);
    free(d->cont);
    free(d->shard_selector);
    free(d->item_kind);
    free(d->item_api_version);
    for (size_t i = 0; i < d->n_pending; i++)
        kcr_object_unref(d->pending[i]);
    free(d->pending);
    free(d);
}

kcr_err kcr__list_decoder_feed(kcr__list_decoder *d, const char *buf, size_t len)
{
    return kcr__framer_feed(d->f, buf, len);
}

kcr_err kcr__list_decoder_finish(kcr__list_decoder *d, kcr_list_meta *meta)
{
    kcr_err err = kcr__framer_error(d->f);
    if (err != KCR_OK)
        return err;
    if (kcr__framer_complete(d->f) != KCR_OK)
        return kcr__fail(KCR_ERR_PARSE, "list body ended early (%zu items decoded)", d->n_items);
    if (d->state == LIST_BEFORE)
        return kcr__fail(KCR_ERR_PARSE, "empty list body");
    if (d->n_pending && (err = flush_pending(d)) != KCR_OK)
        return err;
    if (meta) {
        kcr_list_meta_clear(meta);
        meta->resource_version = strdup(d->rv ? d->rv : "");
        meta->continue_token = strdup(d->cont ? d->cont : "");
        meta->remaining_item_count = d->remaining;
        meta->has_remaining_item_count = d->has_remaining;
        if (!meta->resource_version || !meta->continue_token) {
            kcr_list_meta_clear(meta);
            return kcr__fail(KCR_ERR_NOMEM, "out of memory returning the list's metadata");
        }
    }
    return KCR_OK;
}

kcr_err kcr__list_decoder_shard_info(const kcr__list_decoder *d, kcr_shard_info *out)
{
    kcr_shard_info_clear(out);
    if (!d->has_shard_info)
        return KCR_OK;
    if (!(out->selector = strdup(d->shard_selector ? d->shard_selector : "")))
        return kcr__fail(KCR_ERR_NOMEM, "out of memory returning the list's shardInfo");
    out->present = true;
    return KCR_OK;
}

void kcr_shard_info_clear(kcr_shard_info *info)
{
    if (!info)
        return;
    free(info->selector);
    memset(info, 0, sizeof *info);
}

size_t kcr__list_decoder_items(const kcr__list_decoder *d)
{
    return d->n_items;
}

void kcr_list_meta_clear(kcr_list_meta *meta)
{
    if (!meta)
        return;
    free(meta->resource_version);
    free(meta->continue_token);
    memset(meta, 0, sizeof *meta);
}

/* ================================ WATCH ================================ */

/* Where the watch machine is in the stream. The event's object is captured
 * into the builder whatever the type (which may come after it), so each
 * event builds exactly one object. */
typedef enum watch_state {
    WATCH_BETWEEN, /* between events */
    WATCH_EVENT,   /* in an event, before a key or its end */
    WATCH_VALUE    /* after an event key (`key` says which), before its value */
} watch_state;

typedef enum event_key { EV_TYPE, EV_OBJECT, EV_OTHER } event_key;

/* What the event's "type" said, so far. */
typedef enum type_seen { TYPE_MISSING, TYPE_KNOWN, TYPE_UNRECOGNIZED } type_seen;

struct kcr__watch_decoder {
    kcr__framer *f;
    kcr_watch_event_fn fn;
    void *ud;
    watch_state state;
    event_key key;
    type_seen type_seen;
    kcr_watch_event_type type;
    kcr_object *obj; /* the event's object, once captured */
    kcr_status status;
    bool stopped;
    size_t n_events;
};

static type_seen parse_type(const kcr__jev *ev, kcr_watch_event_type *type)
{
    static const struct {
        const char *name;
        kcr_watch_event_type type;
    } names[] = {{"ADDED", KCR_WATCH_ADDED},
                 {"MODIFIED", KCR_WATCH_MODIFIED},
                 {"DELETED", KCR_WATCH_DELETED},
                 {"BOOKMARK", KCR_WATCH_BOOKMARK},
                 {"ERROR", KCR_WATCH_ERROR}};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (key_is(ev, names[i].name)) {
            *type = names[i].type;
            return TYPE_KNOWN;
        }
    return TYPE_UNRECOGNIZED;
}

/* The event is complete: checks it and hands it to the callback. */
static kcr_err watch_dispatch(kcr__watch_decoder *d)
{
    kcr_watch_event ev = {.type = d->type, .resource_version = ""};
    kcr_object *obj = d->obj;
    kcr_err err = KCR_OK;
    if (d->type_seen == TYPE_MISSING)
        return kcr__fail(KCR_ERR_PARSE, "watch event %zu has no type", d->n_events);
    if (d->type_seen == TYPE_UNRECOGNIZED)
        return kcr__fail(KCR_ERR_PARSE, "watch event %zu has an unknown type", d->n_events);
    if (!obj)
        return kcr__fail(KCR_ERR_PARSE, "watch event %zu has no object", d->n_events);
    switch (d->type) {
    case KCR_WATCH_ADDED:
    case KCR_WATCH_MODIFIED:
    case KCR_WATCH_DELETED:
        if (!*kcr_object_name(obj))
            return kcr__fail(KCR_ERR_PARSE, "watch event %zu: object without metadata.name",
                             d->n_events);
        ev.object = obj;
        ev.resource_version = kcr_object_resource_version(obj);
        break;
    case KCR_WATCH_BOOKMARK: {
        const char *end = kcr__value_str(
            kcr_object_get(obj, "metadata.annotations[\"k8s.io/initial-events-end\"]"));
        ev.resource_version = kcr_object_resource_version(obj);
        ev.initial_events_end = end && strcmp(end, "true") == 0;
        break;
    }
    case KCR_WATCH_ERROR:
        if (kcr__status_from_value(kcr_object_root(obj), &d->status) != KCR_OK &&
            (err = kcr__status_make(&d->status, 500, "InternalError",
                                    "watch ERROR event without a Status object")) != KCR_OK)
            return err;
        ev.status = &d->status;
        break;
    }
    d->n_events++;
    err = d->fn ? d->fn(&ev, d->ud) : KCR_OK;
    if (err == KCR_OK && d->type == KCR_WATCH_ERROR) {
        d->stopped = true;
        err = kcr__status_fail(&d->status);
    }
    return err;
}

static kcr_err watch_event_end(kcr__watch_decoder *d)
{
    kcr_err err = kcr__framer_unit_end(d->f);
    if (err == KCR_OK)
        err = watch_dispatch(d);
    kcr_object_unref(d->obj);
    d->obj = NULL;
    d->type_seen = TYPE_MISSING;
    d->state = WATCH_BETWEEN;
    return err;
}

static kcr_err watch_value(kcr__watch_decoder *d, const kcr__jev *ev)
{
    d->state = WATCH_EVENT;
    if (d->key == EV_TYPE) {
        if (ev->type != KCR__JEV_STRING)
            return kcr__fail(KCR_ERR_PARSE, "watch event %zu: type is not a string",
                             d->n_events);
        d->type_seen = parse_type(ev, &d->type);
    } else if (d->key == EV_OBJECT && ev->type == KCR__JEV_START_MAP) {
        d->state = WATCH_VALUE; /* until CAPTURED */
        return kcr__framer_capture(d->f);
    } else if (d->key == EV_OBJECT && ev->type == KCR__JEV_CAPTURED) {
        kcr_object_unref(d->obj); /* a repeated "object": the last one counts */
        d->obj = NULL;
        if (kcr__object_builder_finish_any(kcr__framer_builder(d->f), &d->obj) != KCR_OK)
            return kcr__refail(KCR_ERR_PARSE, "watch event %zu: ", d->n_events);
    } else if (is_start(ev)) {
        kcr__framer_skip(d->f);
    }
    return KCR_OK;
}

static kcr_err watch_event(kcr__framer *f, const kcr__jev *ev, void *user_data)
{
    kcr__watch_decoder *d = user_data;
    switch (d->state) {
    case WATCH_BETWEEN:
        if (ev->type != KCR__JEV_START_MAP)
            return kcr__fail(KCR_ERR_PARSE, "watch event %zu is not a JSON object", d->n_events);
        kcr__framer_unit_begin(f);
        d->state = WATCH_EVENT;
        return KCR_OK;
    case WATCH_EVENT:
        if (ev->type == KCR__JEV_END_MAP)
            return watch_event_end(d);
        d->key = key_is(ev, "type") ? EV_TYPE : key_is(ev, "object") ? EV_OBJECT : EV_OTHER;
        d->state = WATCH_VALUE;
        return KCR_OK;
    case WATCH_VALUE: break;
    }
    return watch_value(d, ev);
}

static const kcr__framer_ops watch_ops = {.event = watch_event};

kcr__watch_decoder *kcr__watch_decoder_new(size_t max_item_bytes, kcr_watch_event_fn fn,
                                           void *ud)
{
    kcr__watch_decoder *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->fn = fn;
    d->ud = ud;
    d->f = kcr__framer_new(max_item_bytes ? max_item_bytes : KCR__DEFAULT_MAX_ITEM_BYTES,
                           "watch event", "watch stream", true, &watch_ops, d);
    if (!d->f) {
        free(d);
        return NULL;
    }
    return d;
}

void kcr__watch_decoder_drop_managed_fields(kcr__watch_decoder *d)
{
    kcr__framer_drop_managed_fields(d->f);
}

void kcr__watch_decoder_free(kcr__watch_decoder *d)
{
    if (!d)
        return;
    kcr__framer_free(d->f);
    kcr_object_unref(d->obj);
    kcr_status_clear(&d->status);
    free(d);
}

kcr_err kcr__watch_decoder_feed(kcr__watch_decoder *d, const char *buf, size_t len)
{
    return kcr__framer_feed(d->f, buf, len);
}

kcr_err kcr__watch_decoder_finish(kcr__watch_decoder *d)
{
    kcr_err err = kcr__framer_error(d->f);
    if (err != KCR_OK)
        return err;
    if (d->state != WATCH_BETWEEN)
        return kcr__fail(KCR_ERR_TRANSPORT, "watch stream ended inside event %zu (truncated)",
                         d->n_events);
    /* Between events the reader holds at most whitespace or part of a
     * top-level word, which the machine would reject once complete: nothing
     * of an event is lost, so the stream ended cleanly. */
    return KCR_OK;
}

const kcr_status *kcr__watch_decoder_status(const kcr__watch_decoder *d)
{
    return d->stopped ? &d->status : NULL;
}

size_t kcr__watch_decoder_events(const kcr__watch_decoder *d)
{
    return d->n_events;
}
