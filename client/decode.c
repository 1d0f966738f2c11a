/* Streaming LIST and watch decoders: one yajl parser over the body, item
 * events forwarded to an object builder. See decode.h. */
#include "client/decode.h"

#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

#include "client/client_impl.h"
#include "client/json.h"
#include "core/error.h"
#include "core/str.h"
#include "object/object_builder.h"

/* Bytes handed to yajl per call, so size limits are checked often. */
enum { SLICE = 64 << 10 };

static kcr_err yajl_failure(yajl_handle h, const char *what, const unsigned char *buf, size_t n)
{
    unsigned char *msg = yajl_get_error(h, 0, buf, n);
    kcr_err err = kcr__fail(KCR_ERR_PARSE, "%s: bad JSON: %s", what, msg ? (char *)msg : "?");
    if (msg)
        yajl_free_error(h, msg);
    return err;
}

static kcr_err too_large(const char *what, size_t max)
{
    return kcr__fail(KCR_ERR_TOO_LARGE, "%s larger than the %zu-byte limit", what, max);
}

/* Size accounting. An item's (event's) bytes are counted exactly: from the
 * offset of its opening brace in the slice where it starts (yajl reports
 * the offset inside callbacks) to that of its closing brace, plus the whole
 * slices in between; so any number of items under the limit pass, however
 * the body is chunked. Token bytes (since the last parse event, for the
 * stash and for tokens outside items) count whole slices without an event:
 * the tail of a slice after its last event is not counted, so a token is
 * caught at most one slice late. */
static size_t slice_offset(yajl_handle h)
{
    return yajl_get_bytes_consumed(h);
}


/* yajl re-lexes a token split across yajl_parse() calls from its start each
 * time, so a long token fed in small chunks costs quadratic time. Once no
 * event has been seen for STASH_AFTER bytes, incoming bytes are stashed and
 * handed to yajl in one call when the stash has grown as large as the token
 * so far (amortized linear) or may hold the token's end (a '"'). */
enum { STASH_AFTER = 256 << 10 };

typedef struct stash {
    char *buf;
    size_t len, cap;
} stash;

/* True when buf was stashed and parsing should wait. */
static bool stash_add(stash *st, size_t token_bytes, const char *buf, size_t len, kcr_err *err)
{
    if (token_bytes < STASH_AFTER && st->len == 0)
        return false;
    if (st->len + len > st->cap) {
        size_t cap = st->cap ? st->cap : 1 << 16;
        while (cap < st->len + len)
            cap *= 2;
        char *nb = realloc(st->buf, cap);
        if (!nb) {
            *err = kcr__fail(KCR_ERR_NOMEM, "out of memory");
            return true;
        }
        st->buf = nb;
        st->cap = cap;
    }
    memcpy(st->buf + st->len, buf, len);
    st->len += len;
    return st->len < token_bytes && !memchr(buf, '"', len);
}

static void stash_free(stash *st)
{
    free(st->buf);
    memset(st, 0, sizeof *st);
}

/* ================================ LIST ================================ */

enum top_key { TOP_NONE, TOP_METADATA, TOP_ITEMS, TOP_KIND, TOP_API_VERSION, TOP_OTHER };
enum meta_key { META_NONE, META_RV, META_CONTINUE, META_REMAINING };

struct kcr__list_decoder {
    yajl_handle h;
    kcr__object_builder *b;
    kcr_list_item_fn fn;
    void *ud;
    size_t max;
    int depth;
    enum top_key top;
    enum meta_key meta;
    bool started, in_items, in_item;
    size_t item_bytes, token_bytes;
    size_t item_from; /* offset in the slice being parsed where the item's bytes begin */
    char *rv, *cont;
    int64_t remaining;
    bool has_remaining;
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
    stash st;
    kcr_err err;
};

#define LD ((kcr__list_decoder *)ctx)

static bool list_type_known(const kcr__list_decoder *d)
{
    return d->item_kind && d->item_api_version;
}

/* Feeds the List's kind/apiVersion into the item being built (before its
 * closing brace) unless it has one of its own. */
static kcr_err stamp_building(kcr__list_decoder *d)
{
    if (d->item_typed || (!*d->item_kind && !*d->item_api_version))
        return KCR_OK;
    kcr_err err = KCR_OK;
    if (*d->item_api_version) {
        err = kcr__object_builder_map_key(d->b, "apiVersion", 10);
        if (err == KCR_OK)
            err =
                kcr__object_builder_string(d->b, d->item_api_version, strlen(d->item_api_version));
    }
    if (err == KCR_OK && *d->item_kind) {
        err = kcr__object_builder_map_key(d->b, "kind", 4);
        if (err == KCR_OK)
            err = kcr__object_builder_string(d->b, d->item_kind, strlen(d->item_kind));
    }
    return err;
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
    kcr_object_edit *e = NULL;
    kcr_err err = kcr_object_edit_new(obj, &e);
    if (err == KCR_OK && *av)
        err = kcr_object_edit_set_string(e, "apiVersion", av);
    if (err == KCR_OK && *kind)
        err = kcr_object_edit_set_string(e, "kind", kind);
    if (err == KCR_OK)
        err = kcr_object_edit_freeze(e, out);
    kcr_object_edit_free(e);
    return err;
}

/* Hands the waiting items to the callback, stamped. */
static int flush_pending(kcr__list_decoder *d)
{
    for (size_t i = 0; i < d->n_pending && d->err == KCR_OK; i++) {
        kcr_object *obj = NULL;
        kcr_err err = stamp_built(d, d->pending[i], &obj);
        if (err == KCR_OK && d->fn)
            err = d->fn(obj, d->ud);
        kcr_object_unref(obj);
        if (err != KCR_OK)
            d->err = err == KCR_ERR_NOMEM ? kcr__fail(err, "list item: out of memory") : err;
    }
    for (size_t j = 0; j < d->n_pending; j++)
        kcr_object_unref(d->pending[j]);
    d->n_pending = 0;
    return d->err == KCR_OK;
}

/* Turns a builder error into the decoder's error. */
static int list_item_event(kcr__list_decoder *d, kcr_err err)
{
    if (err != KCR_OK) {
        d->err = kcr__refail(err == KCR_ERR_NOMEM ? err : KCR_ERR_PARSE, "list item %zu: %s: ",
                             d->n_items, kcr_strerror(err));
        return 0;
    }
    return 1;
}

static int list_finish_item(kcr__list_decoder *d)
{
    kcr_object *obj = NULL;
    kcr_err err = kcr__object_builder_finish(d->b, &obj);
    d->in_item = false;
    if (err != KCR_OK) {
        d->err = kcr__refail(KCR_ERR_PARSE, "list item %zu: ", d->n_items);
        return 0;
    }
    d->n_items++;
    if (d->n_pending || (!d->item_typed && !list_type_known(d))) {
        if (d->n_pending == d->cap_pending) {
            size_t cap = d->cap_pending ? d->cap_pending * 2 : 64;
            kcr_object **np = realloc(d->pending, cap * sizeof *np);
            if (!np) {
                kcr_object_unref(obj);
                d->err = kcr__fail(KCR_ERR_NOMEM, "list item %zu: out of memory", d->n_items);
                return 0;
            }
            d->pending = np;
            d->cap_pending = cap;
        }
        d->pending[d->n_pending++] = obj;
        return 1;
    }
    err = d->fn ? d->fn(obj, d->ud) : KCR_OK;
    kcr_object_unref(obj);
    if (err != KCR_OK) {
        d->err = err;
        return 0;
    }
    return 1;
}

static int list_scalar(kcr__list_decoder *d, int kind, const char *s, size_t len, int bval)
{
    d->token_bytes = 0;
    if (d->in_item) {
        kcr_err err;
        switch (kind) {
        case 0: err = kcr__object_builder_null(d->b); break;
        case 1: err = kcr__object_builder_bool(d->b, bval != 0); break;
        case 2: err = kcr__object_builder_number(d->b, s, len); break;
        default: err = kcr__object_builder_string(d->b, s, len); break;
        }
        return list_item_event(d, err);
    }
    if (d->depth == 0) {
        d->err = kcr__fail(KCR_ERR_PARSE, "list body is not a JSON object");
        return 0;
    }
    if (d->in_items && d->depth == 2) {
        if (kind == 0) /* "items": [null] never happens; tolerate it */
            return 1;
        d->err = kcr__fail(KCR_ERR_PARSE, "list item %zu is not an object", d->n_items);
        return 0;
    }
    if (d->depth == 1 && (d->top == TOP_KIND || d->top == TOP_API_VERSION)) {
        if (kind != 3)
            return 1;
        char **dst = d->top == TOP_KIND ? &d->item_kind : &d->item_api_version;
        if (d->top == TOP_KIND && len > 4 && memcmp(s + len - 4, "List", 4) == 0)
            len -= 4;
        free(*dst);
        if (!(*dst = kcr__memdup_str(s, len))) {
            d->err = kcr__fail(KCR_ERR_NOMEM, "out of memory");
            return 0;
        }
        return !d->n_pending || !list_type_known(d) || flush_pending(d);
    }
    if (d->top == TOP_METADATA && d->depth == 2 && d->meta != META_NONE) {
        if (d->meta == META_REMAINING && kind == 2) {
            char num[32]; /* yajl's number text is not NUL-terminated */
            size_t n = len < sizeof num - 1 ? len : sizeof num - 1;
            memcpy(num, s, n);
            num[n] = '\0';
            d->remaining = strtoll(num, NULL, 10);
            d->has_remaining = true;
        } else if (kind == 3 && d->meta != META_REMAINING) {
            char **dst = d->meta == META_RV ? &d->rv : &d->cont;
            free(*dst);
            /* not strndup: yajl's strings are not NUL-terminated and may end
             * where curl's buffer ends */
            if (!(*dst = kcr__memdup_str(s, len))) {
                d->err = kcr__fail(KCR_ERR_NOMEM, "out of memory");
                return 0;
            }
        }
        d->meta = META_NONE;
    }
    return 1;
}

static int ld_null(void *ctx)
{
    return list_scalar(LD, 0, NULL, 0, 0);
}
static int ld_bool(void *ctx, int v)
{
    return list_scalar(LD, 1, NULL, 0, v);
}
static int ld_number(void *ctx, const char *s, size_t len)
{
    return list_scalar(LD, 2, s, len, 0);
}
static int ld_string(void *ctx, const unsigned char *s, size_t len)
{
    return list_scalar(LD, 3, (const char *)s, len, 0);
}

static int ld_start_map(void *ctx)
{
    kcr__list_decoder *d = LD;
    d->token_bytes = 0;
    if (d->in_item) {
        d->depth++;
        return list_item_event(d, kcr__object_builder_start_map(d->b));
    }
    if (d->depth == 0) {
        if (d->started) {
            d->err = kcr__fail(KCR_ERR_PARSE, "list body holds more than one JSON value");
            return 0;
        }
        d->started = true;
    } else if (d->in_items && d->depth == 2) {
        d->in_item = true;
        d->item_typed = false;
        d->item_bytes = 0;
        d->item_from = slice_offset(d->h) - 1; /* the '{' */
        d->depth++;
        return list_item_event(d, kcr__object_builder_start_map(d->b));
    }
    d->depth++;
    return 1;
}

static int ld_key(void *ctx, const unsigned char *s, size_t len)
{
    kcr__list_decoder *d = LD;
    d->token_bytes = 0;
    if (d->in_item) {
        if (d->depth == 3 && ((len == 4 && memcmp(s, "kind", 4) == 0) ||
                              (len == 10 && memcmp(s, "apiVersion", 10) == 0)))
            d->item_typed = true;
        return list_item_event(d, kcr__object_builder_map_key(d->b, (const char *)s, len));
    }
    if (d->depth == 1) {
        d->top = len == 8 && memcmp(s, "metadata", 8) == 0       ? TOP_METADATA
                 : len == 5 && memcmp(s, "items", 5) == 0        ? TOP_ITEMS
                 : len == 4 && memcmp(s, "kind", 4) == 0         ? TOP_KIND
                 : len == 10 && memcmp(s, "apiVersion", 10) == 0 ? TOP_API_VERSION
                                                                 : TOP_OTHER;
    } else if (d->depth == 2 && d->top == TOP_METADATA) {
        d->meta = len == 15 && memcmp(s, "resourceVersion", 15) == 0      ? META_RV
                  : len == 8 && memcmp(s, "continue", 8) == 0             ? META_CONTINUE
                  : len == 18 && memcmp(s, "remainingItemCount", 18) == 0 ? META_REMAINING
                                                                          : META_NONE;
    }
    return 1;
}

static int ld_end(void *ctx, bool is_map)
{
    kcr__list_decoder *d = LD;
    d->token_bytes = 0;
    d->depth--;
    if (d->in_item) {
        kcr_err err = KCR_OK;
        if (d->depth == 2 && list_type_known(d) && !d->n_pending)
            err = stamp_building(d);
        if (err == KCR_OK)
            err = is_map ? kcr__object_builder_end_map(d->b) : kcr__object_builder_end_array(d->b);
        if (!list_item_event(d, err))
            return 0;
        if (d->depth != 2)
            return 1;
        if (d->item_bytes + slice_offset(d->h) - d->item_from > d->max) {
            d->in_item = false;
            d->err = too_large("list item", d->max);
            return 0;
        }
        return list_finish_item(d);
    }
    if (d->depth == 1 && d->in_items)
        d->in_items = false;
    return 1;
}

static int ld_end_map(void *ctx)
{
    return ld_end(ctx, true);
}
static int ld_end_array(void *ctx)
{
    return ld_end(ctx, false);
}

static int ld_start_array(void *ctx)
{
    kcr__list_decoder *d = LD;
    d->token_bytes = 0;
    if (d->in_item) {
        d->depth++;
        return list_item_event(d, kcr__object_builder_start_array(d->b));
    }
    if (d->depth == 0) {
        d->err = kcr__fail(KCR_ERR_PARSE, "list body is not a JSON object");
        return 0;
    }
    if (d->in_items && d->depth == 2) {
        d->err = kcr__fail(KCR_ERR_PARSE, "list item %zu is not an object", d->n_items);
        return 0;
    }
    if (d->depth == 1 && d->top == TOP_ITEMS)
        d->in_items = true;
    d->depth++;
    return 1;
}

#undef LD

static const yajl_callbacks list_callbacks = {
    .yajl_null = ld_null,
    .yajl_boolean = ld_bool,
    .yajl_number = ld_number,
    .yajl_string = ld_string,
    .yajl_start_map = ld_start_map,
    .yajl_map_key = ld_key,
    .yajl_end_map = ld_end_map,
    .yajl_start_array = ld_start_array,
    .yajl_end_array = ld_end_array,
};

kcr__list_decoder *kcr__list_decoder_new(size_t max_item_bytes, kcr_list_item_fn fn, void *ud)
{
    kcr__list_decoder *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->fn = fn;
    d->ud = ud;
    d->max = max_item_bytes ? max_item_bytes : KCR__DEFAULT_MAX_ITEM_BYTES;
    d->b = kcr__object_builder_new();
    d->h = yajl_alloc(&list_callbacks, NULL, d);
    if (!d->b || !d->h) {
        kcr__list_decoder_free(d);
        return NULL;
    }
    return d;
}

void kcr__list_decoder_free(kcr__list_decoder *d)
{
    if (!d)
        return;
    if (d->h)
        yajl_free(d->h);
    if (d->b)
        kcr__object_builder_free(d->b);
    free(d->rv);
    free(d->cont);
    free(d->item_kind);
    free(d->item_api_version);
    for (size_t i = 0; i < d->n_pending; i++)
        kcr_object_unref(d->pending[i]);
    free(d->pending);
    stash_free(&d->st);
    free(d);
}

static kcr_err list_parse(kcr__list_decoder *d, const char *buf, size_t len, size_t slice);

kcr_err kcr__list_decoder_feed(kcr__list_decoder *d, const char *buf, size_t len)
{
    if (d->err != KCR_OK)
        return d->err;
    if (d->token_bytes + d->st.len + len > d->max || d->item_bytes + d->st.len + len > d->max) {
        if (d->st.len || d->token_bytes >= STASH_AFTER)
            return d->err = too_large(d->in_item ? "list item" : "JSON token in list", d->max);
    }
    if (stash_add(&d->st, d->token_bytes, buf, len, &d->err))
        return d->err;
    if (d->st.len) {
        stash s = d->st;
        d->st = (stash){0};
        list_parse(d, s.buf, s.len, s.len);
        stash_free(&s);
        return d->err;
    }
    return list_parse(d, buf, len, SLICE);
}

static kcr_err list_parse(kcr__list_decoder *d, const char *buf, size_t len, size_t slice)
{
    while (d->err == KCR_OK && len > 0) {
        size_t n = len < slice ? len : slice;
        size_t token_before = d->token_bytes;
        d->token_bytes = 1; /* parse events reset it to 0 */
        d->item_from = 0;
        yajl_status st = yajl_parse(d->h, (const unsigned char *)buf, n);
        if (st == yajl_status_error && d->err == KCR_OK)
            d->err = yajl_failure(d->h, "list", (const unsigned char *)buf, n);
        if (d->err != KCR_OK)
            break;
        d->token_bytes = d->token_bytes ? token_before + n : 0;
        if (d->in_item)
            d->item_bytes += n - d->item_from;
        if (d->item_bytes > d->max)
            d->err = too_large("list item", d->max);
        else if (d->token_bytes > d->max)
            d->err = too_large("JSON token in list", d->max);
        buf += n;
        len -= n;
    }
    return d->err;
}

kcr_err kcr__list_decoder_finish(kcr__list_decoder *d, kcr_list_meta *meta)
{
    if (d->err == KCR_OK && d->st.len) {
        stash s = d->st;
        d->st = (stash){0};
        list_parse(d, s.buf, s.len, s.len);
        stash_free(&s);
    }
    if (d->err != KCR_OK)
        return d->err;
    yajl_status st = yajl_complete_parse(d->h);
    if (st == yajl_status_error && d->err == KCR_OK)
        d->err = kcr__fail(KCR_ERR_PARSE, "list body ended early (%zu items decoded)", d->n_items);
    if (d->err == KCR_OK && !d->started)
        d->err = kcr__fail(KCR_ERR_PARSE, "empty list body");
    if (d->err == KCR_OK && d->n_pending)
        flush_pending(d);
    if (d->err != KCR_OK)
        return d->err;
    if (meta) {
        kcr_list_meta_clear(meta);
        meta->resource_version = strdup(d->rv ? d->rv : "");
        meta->continue_token = strdup(d->cont ? d->cont : "");
        meta->remaining_item_count = d->remaining;
        meta->has_remaining_item_count = d->has_remaining;
        if (!meta->resource_version || !meta->continue_token) {
            kcr_list_meta_clear(meta);
            return kcr__fail(KCR_ERR_NOMEM, "out of memory");
        }
    }
    return KCR_OK;
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

enum { TYPE_UNKNOWN = -1 };
enum event_key { EV_NONE, EV_TYPE, EV_OBJECT, EV_OTHER };

struct kcr__watch_decoder {
    yajl_handle h;
    kcr__object_builder *b;
    kcr__json_builder *jb;
    kcr_watch_event_fn fn;
    void *ud;
    size_t max;
    int depth;
    enum event_key key;
    int type;
    bool in_object;   /* inside the "object" value (depth >= 2) */
    bool to_builder;  /* forward object events to the object builder */
    bool to_json;     /* ... and/or to the JSON builder */
    bool builder_failed;
    bool obj_seen;
    size_t event_bytes, token_bytes;
    size_t event_from; /* offset in the slice being parsed where the event's bytes begin */
    kcr_status status;
    bool stopped;
    size_t n_events;
    stash st;
    kcr_err err;
};

#define WD ((kcr__watch_decoder *)ctx)

static int parse_type(const char *s, size_t len)
{
    static const char *const names[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"};
    for (int i = 0; i < 5; i++)
        if (strlen(names[i]) == len && memcmp(names[i], s, len) == 0)
            return i;
    return -2;
}

/* Forwards one object event to whichever builders are active. */
static int forward(kcr__watch_decoder *d, kcr_err berr, kcr_err jerr)
{
    if (d->to_builder && berr != KCR_OK) {
        if (!d->to_json) {
            d->err = kcr__refail(berr == KCR_ERR_NOMEM ? berr : KCR_ERR_PARSE,
                                 "watch event %zu: %s: ", d->n_events, kcr_strerror(berr));
            return 0;
        }
        d->builder_failed = true;
        d->to_builder = false;
    }
    if (d->to_json && jerr != KCR_OK) {
        d->err = kcr__fail(jerr, "watch event %zu: %s", d->n_events, kcr_strerror(jerr));
        return 0;
    }
    return 1;
}

static int wd_dispatch(kcr__watch_decoder *d)
{
    kcr_err err = KCR_OK;
    kcr_watch_event ev = {.type = (kcr_watch_event_type)d->type, .resource_version = ""};
    kcr__json *doc = kcr__json_builder_take(d->jb);
    kcr_object *obj = NULL;
    if (d->type == TYPE_UNKNOWN) {
        err = kcr__fail(KCR_ERR_PARSE, "watch event %zu has no type", d->n_events);
    } else if (d->type < 0) {
        err = kcr__fail(KCR_ERR_PARSE, "watch event %zu has an unknown type", d->n_events);
    } else if (!d->obj_seen) {
        err = kcr__fail(KCR_ERR_PARSE, "watch event %zu has no object", d->n_events);
    } else if (d->type <= KCR_WATCH_DELETED) {
        if (d->builder_failed)
            err = kcr__fail(KCR_ERR_PARSE, "watch event %zu: bad object", d->n_events);
        else if ((err = kcr__object_builder_finish(d->b, &obj)) != KCR_OK)
            err = kcr__refail(KCR_ERR_PARSE, "watch event %zu: ", d->n_events);
        else {
            ev.object = obj;
            ev.resource_version = kcr_object_resource_version(obj);
        }
    } else if (d->type == KCR_WATCH_BOOKMARK) {
        kcr__json *md = kcr__json_get(doc, "metadata");
        const char *rv = kcr__json_str(kcr__json_get(md, "resourceVersion"));
        const char *end = kcr__json_str(
            kcr__json_get(kcr__json_get(md, "annotations"), "k8s.io/initial-events-end"));
        ev.resource_version = rv ? rv : "";
        ev.initial_events_end = end && strcmp(end, "true") == 0;
    } else {
        if (kcr__status_from_json(doc, &d->status) != KCR_OK)
            err = kcr__status_make(&d->status, 500, "InternalError",
                                   "watch ERROR event without a Status object");
        ev.status = &d->status;
    }
    if (err == KCR_OK) {
        d->n_events++;
        err = d->fn ? d->fn(&ev, d->ud) : KCR_OK;
        if (err == KCR_OK && d->type == KCR_WATCH_ERROR) {
            d->stopped = true;
            err = kcr__status_fail(&d->status);
        }
    }
    kcr_object_unref(obj);
    kcr__json_free(doc);
    kcr__object_builder_reset(d->b);
    kcr__json_builder_reset(d->jb);
    d->type = TYPE_UNKNOWN;
    d->obj_seen = d->builder_failed = d->in_object = false;
    d->key = EV_NONE;
    if (err != KCR_OK) {
        d->err = err;
        return 0;
    }
    return 1;
}

static int wd_scalar(kcr__watch_decoder *d, int kind, const char *s, size_t len, int bval)
{
    d->token_bytes = 0;
    if (d->in_object) {
        kcr_err berr = KCR_OK, jerr = KCR_OK;
        kcr__json *v = NULL;
        switch (kind) {
        case 0:
            if (d->to_builder)
                berr = kcr__object_builder_null(d->b);
            if (d->to_json)
                v = kcr__json_new(KCR__JSON_NULL);
            break;
        case 1:
            if (d->to_builder)
                berr = kcr__object_builder_bool(d->b, bval != 0);
            if (d->to_json)
                v = kcr__json_new_bool(bval != 0);
            break;
        case 2:
            if (d->to_builder)
                berr = kcr__object_builder_number(d->b, s, len);
            if (d->to_json && (v = kcr__json_new_string(s, len)))
                v->type = KCR__JSON_NUMBER;
            break;
        default:
            if (d->to_builder)
                berr = kcr__object_builder_string(d->b, s, len);
            if (d->to_json)
                v = kcr__json_new_string(s, len);
            break;
        }
        if (d->to_json)
            jerr = kcr__json_builder_scalar(d->jb, v);
        return forward(d, berr, jerr);
    }
    if (d->depth == 0) {
        d->err = kcr__fail(KCR_ERR_PARSE, "watch event %zu is not a JSON object", d->n_events);
        return 0;
    }
    if (d->depth == 1 && d->key == EV_TYPE) {
        if (kind != 3) {
            d->err = kcr__fail(KCR_ERR_PARSE, "watch event %zu: type is not a string",
                               d->n_events);
            return 0;
        }
        d->type = parse_type(s, len);
    }
    return 1;
}

static int wd_null(void *ctx)
{
    return wd_scalar(WD, 0, NULL, 0, 0);
}
static int wd_bool(void *ctx, int v)
{
    return wd_scalar(WD, 1, NULL, 0, v);
}
static int wd_number(void *ctx, const char *s, size_t len)
{
    return wd_scalar(WD, 2, s, len, 0);
}
static int wd_string(void *ctx, const unsigned char *s, size_t len)
{
    return wd_scalar(WD, 3, (const char *)s, len, 0);
}

static int wd_start(void *ctx, bool is_map)
{
    kcr__watch_decoder *d = WD;
    d->token_bytes = 0;
    if (d->depth == 0) {
        if (!is_map) {
            d->err = kcr__fail(KCR_ERR_PARSE, "watch event %zu is not a JSON object", d->n_events);
            return 0;
        }
        d->event_bytes = 0;
        d->event_from = slice_offset(d->h) - 1; /* the '{' */
        d->depth = 1;
        return 1;
    }
    if (d->depth == 1 && d->key == EV_OBJECT && is_map) {
        d->in_object = true;
        d->obj_seen = true;
        if (d->type == TYPE_UNKNOWN) {
            d->to_builder = d->to_json = true;
        } else {
            d->to_builder = d->type >= 0 && d->type <= KCR_WATCH_DELETED;
            d->to_json = !d->to_builder;
        }
    }
    d->depth++;
    if (!d->in_object)
        return 1;
    return forward(d, d->to_builder ? (is_map ? kcr__object_builder_start_map(d->b)
                                              : kcr__object_builder_start_array(d->b))
                                    : KCR_OK,
                   d->to_json ? (is_map ? kcr__json_builder_start_map(d->jb)
                                        : kcr__json_builder_start_array(d->jb))
                              : KCR_OK);
}

static int wd_start_map(void *ctx)
{
    return wd_start(ctx, true);
}
static int wd_start_array(void *ctx)
{
    return wd_start(ctx, false);
}

static int wd_key(void *ctx, const unsigned char *s, size_t len)
{
    kcr__watch_decoder *d = WD;
    d->token_bytes = 0;
    if (d->in_object)
        return forward(d,
                       d->to_builder ? kcr__object_builder_map_key(d->b, (const char *)s, len)
                                     : KCR_OK,
                       d->to_json ? kcr__json_builder_map_key(d->jb, (const char *)s, len)
                                  : KCR_OK);
    if (d->depth == 1)
        d->key = len == 4 && memcmp(s, "type", 4) == 0     ? EV_TYPE
                 : len == 6 && memcmp(s, "object", 6) == 0 ? EV_OBJECT
                                                           : EV_OTHER;
    return 1;
}

static int wd_end(void *ctx, bool is_map)
{
    kcr__watch_decoder *d = WD;
    d->token_bytes = 0;
    d->depth--;
    if (d->in_object) {
        int ok = forward(d,
                         d->to_builder ? (is_map ? kcr__object_builder_end_map(d->b)
                                                 : kcr__object_builder_end_array(d->b))
                                       : KCR_OK,
                         d->to_json ? kcr__json_builder_end(d->jb) : KCR_OK);
        if (!ok)
            return 0;
        if (d->depth == 1)
            d->in_object = false;
        return 1;
    }
    if (d->depth != 0)
        return 1;
    if (d->event_bytes + slice_offset(d->h) - d->event_from > d->max) {
        d->err = too_large("watch event", d->max);
        return 0;
    }
    return wd_dispatch(d);
}

static int wd_end_map(void *ctx)
{
    return wd_end(ctx, true);
}
static int wd_end_array(void *ctx)
{
    return wd_end(ctx, false);
}

#undef WD

static const yajl_callbacks watch_callbacks = {
    .yajl_null = wd_null,
    .yajl_boolean = wd_bool,
    .yajl_number = wd_number,
    .yajl_string = wd_string,
    .yajl_start_map = wd_start_map,
    .yajl_map_key = wd_key,
    .yajl_end_map = wd_end_map,
    .yajl_start_array = wd_start_array,
    .yajl_end_array = wd_end_array,
};

kcr__watch_decoder *kcr__watch_decoder_new(size_t max_item_bytes, kcr_watch_event_fn fn,
                                           void *ud)
{
    kcr__watch_decoder *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->fn = fn;
    d->ud = ud;
    d->type = TYPE_UNKNOWN;
    d->max = max_item_bytes ? max_item_bytes : KCR__DEFAULT_MAX_ITEM_BYTES;
    d->b = kcr__object_builder_new();
    d->jb = kcr__json_builder_new();
    d->h = yajl_alloc(&watch_callbacks, NULL, d);
    if (!d->b || !d->jb || !d->h) {
        kcr__watch_decoder_free(d);
        return NULL;
    }
    yajl_config(d->h, yajl_allow_multiple_values, 1);
    return d;
}

void kcr__watch_decoder_free(kcr__watch_decoder *d)
{
    if (!d)
        return;
    if (d->h)
        yajl_free(d->h);
    if (d->b)
        kcr__object_builder_free(d->b);
    kcr__json_builder_free(d->jb);
    kcr_status_clear(&d->status);
    stash_free(&d->st);
    free(d);
}

static kcr_err watch_parse(kcr__watch_decoder *d, const char *buf, size_t len, size_t slice);

kcr_err kcr__watch_decoder_feed(kcr__watch_decoder *d, const char *buf, size_t len)
{
    if (d->err != KCR_OK)
        return d->err;
    if ((d->token_bytes + d->st.len + len > d->max || d->event_bytes + d->st.len + len > d->max) &&
        (d->st.len || d->token_bytes >= STASH_AFTER))
        return d->err = too_large(d->depth ? "watch event" : "JSON token in watch stream", d->max);
    if (stash_add(&d->st, d->token_bytes, buf, len, &d->err))
        return d->err;
    if (d->st.len) {
        stash s = d->st;
        d->st = (stash){0};
        watch_parse(d, s.buf, s.len, s.len);
        stash_free(&s);
        return d->err;
    }
    return watch_parse(d, buf, len, SLICE);
}

static kcr_err watch_parse(kcr__watch_decoder *d, const char *buf, size_t len, size_t slice)
{
    while (d->err == KCR_OK && len > 0) {
        size_t n = len < slice ? len : slice;
        size_t token_before = d->token_bytes;
        d->token_bytes = 1; /* parse events reset it to 0 */
        d->event_from = 0;
        yajl_status st = yajl_parse(d->h, (const unsigned char *)buf, n);
        if (st == yajl_status_error && d->err == KCR_OK)
            d->err = yajl_failure(d->h, "watch stream", (const unsigned char *)buf, n);
        if (d->err != KCR_OK)
            break;
        d->token_bytes = d->token_bytes ? token_before + n : 0;
        if (d->depth > 0)
            d->event_bytes += n - d->event_from;
        if (d->event_bytes > d->max)
            d->err = too_large("watch event", d->max);
        else if (d->token_bytes > d->max)
            d->err = too_large("JSON token in watch stream", d->max);
        buf += n;
        len -= n;
    }
    return d->err;
}

kcr_err kcr__watch_decoder_finish(kcr__watch_decoder *d)
{
    if (d->err == KCR_OK && d->st.len) {
        stash s = d->st;
        d->st = (stash){0};
        watch_parse(d, s.buf, s.len, s.len);
        stash_free(&s);
    }
    if (d->err != KCR_OK)
        return d->err;
    if (d->depth > 0)
        return d->err = kcr__fail(KCR_ERR_TRANSPORT,
                                  "watch stream ended inside event %zu (truncated)",
                                  d->n_events);
    /* Between events yajl holds at most whitespace (anything else at the top
     * level is rejected when it completes), so the stream ended cleanly. */
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
