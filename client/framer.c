/* The stream framer under the LIST and watch decoders: one yajl parser,
 * capture of objects into a builder, skipping, size limits. See framer.h. */
#include "client/framer.h"

#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

#include "core/buf.h"
#include "core/error.h"

/* Bytes handed to yajl per call, so size limits are checked often. */
enum { SLICE = 64 << 10 };

/* yajl re-lexes a token split across yajl_parse() calls from its start each
 * time, so a long token fed in small chunks costs quadratic time. Once no
 * event has been seen for STASH_AFTER bytes, incoming bytes are stashed and
 * handed to yajl in one call when the stash has grown as large as the token
 * so far (amortized linear) or may hold the token's end (a '"'). */
enum { STASH_AFTER = 256 << 10 };

/* What the framer does with the events it parses. */
typedef enum framer_mode {
    MODE_MACHINE, /* hand them to the decoder's state machine */
    MODE_CAPTURE, /* feed them to the builder (capture_depth levels open) */
    MODE_SKIP     /* drop them (skip_depth levels open) */
} framer_mode;

struct kcr__framer {
    yajl_handle h;
    kcr__object_builder *b;
    const kcr__framer_ops *ops;
    void *ud;
    const char *unit, *stream;
    size_t max;
    framer_mode mode;
    size_t capture_depth, skip_depth;
    /* Dropping metadata.managedFields inside a captured object (see
     * kcr__framer_drop_managed_fields): in_metadata while the top-level
     * "metadata" map is open, drop_pending between the key and its value,
     * drop_depth levels of that value open. */
    bool drop_managed_fields, last_key_metadata, in_metadata, drop_pending;
    size_t drop_depth;
    /* Size accounting. A unit's bytes are counted exactly: from the offset
     * of its opening brace in the slice where it starts (yajl reports the
     * offset inside callbacks) to that of its closing brace, plus the whole
     * slices in between; so any number of units under the limit pass,
     * however the body is chunked. Token bytes (since the last parse event)
     * count whole slices without an event: the tail of a slice after its
     * last event is not counted, so a token is caught at most one slice
     * late. */
    bool in_unit;
    size_t unit_bytes, unit_from, token_bytes, n_units;
    kcr__buf stash;
    kcr_err err;
};

static kcr_err too_large(const char *what, size_t max)
{
    return kcr__fail(KCR_ERR_TOO_LARGE, "%s larger than the %zu-byte limit", what, max);
}

static kcr_err token_too_large(const kcr__framer *f)
{
    return kcr__fail(KCR_ERR_TOO_LARGE, "JSON token in %s larger than the %zu-byte limit",
                     f->stream, f->max);
}

static size_t slice_offset(const kcr__framer *f)
{
    return yajl_get_bytes_consumed(f->h);
}

/* ---- events ------------------------------------------------------------ */

static int to_machine(kcr__framer *f, const kcr__jev *ev)
{
    kcr_err err = f->ops->event(f, ev, f->ud);
    if (err != KCR_OK) {
        f->err = err;
        return 0;
    }
    return 1;
}

static bool is_key(const kcr__jev *ev, const char *key, size_t len)
{
    return ev->len == len && memcmp(ev->s, key, len) == 0;
}

/* True when the event belongs to metadata.managedFields of the captured
 * object and is dropped; tracks where the capture is in metadata. */
static bool dropped(kcr__framer *f, const kcr__jev *ev)
{
    bool opens = ev->type == KCR__JEV_START_MAP || ev->type == KCR__JEV_START_ARRAY;
    bool closes = ev->type == KCR__JEV_END_MAP || ev->type == KCR__JEV_END_ARRAY;
    if (f->drop_depth > 0) {
        if (opens)
            f->drop_depth++;
        else if (closes)
            f->drop_depth--;
        return true;
    }
    if (f->drop_pending) {
        f->drop_pending = false;
        f->drop_depth = opens ? 1 : 0;
        return true;
    }
    if (ev->type == KCR__JEV_KEY && f->capture_depth == 1)
        f->last_key_metadata = is_key(ev, "metadata", 8);
    else if (ev->type == KCR__JEV_START_MAP && f->capture_depth == 1)
        f->in_metadata = f->last_key_metadata;
    else if (closes && f->capture_depth == 2)
        f->in_metadata = false;
    else if (ev->type == KCR__JEV_KEY && f->capture_depth == 2 && f->in_metadata &&
             is_key(ev, "managedFields", 13)) {
        f->drop_pending = true;
        return true;
    }
    return false;
}

/* Feeds one event of a captured object to the builder. */
static int to_builder(kcr__framer *f, const kcr__jev *ev)
{
    kcr__object_builder *b = f->b;
    kcr_err err = KCR_OK;
    if (f->drop_managed_fields && dropped(f, ev))
        return 1;
    switch (ev->type) {
    case KCR__JEV_NULL: err = kcr__object_builder_null(b); break;
    case KCR__JEV_BOOL: err = kcr__object_builder_bool(b, ev->b); break;
    case KCR__JEV_NUMBER: err = kcr__object_builder_number(b, ev->s, ev->len); break;
    case KCR__JEV_STRING: err = kcr__object_builder_string(b, ev->s, ev->len); break;
    case KCR__JEV_KEY:
        if (f->capture_depth == 1 && f->ops->capture_key)
            f->ops->capture_key(f, ev->s, ev->len, f->ud);
        err = kcr__object_builder_map_key(b, ev->s, ev->len);
        break;
    case KCR__JEV_START_MAP:
        f->capture_depth++;
        err = kcr__object_builder_start_map(b);
        break;
    case KCR__JEV_START_ARRAY:
        f->capture_depth++;
        err = kcr__object_builder_start_array(b);
        break;
    case KCR__JEV_END_ARRAY:
        f->capture_depth--;
        err = kcr__object_builder_end_array(b);
        break;
    case KCR__JEV_END_MAP:
        if (--f->capture_depth == 0 && f->ops->capture_closing) {
            err = f->ops->capture_closing(f, b, f->ud);
            if (err != KCR_OK) {
                f->err = err;
                return 0;
            }
        }
        err = kcr__object_builder_end_map(b);
        break;
    case KCR__JEV_CAPTURED: break;
    }
    if (err != KCR_OK) {
        f->err = kcr__refail(err == KCR_ERR_NOMEM ? err : KCR_ERR_PARSE, "%s %zu: %s: ", f->unit,
                             f->n_units, kcr_strerror(err));
        return 0;
    }
    if (f->capture_depth > 0)
        return 1;
    f->mode = MODE_MACHINE;
    kcr__jev done = {.type = KCR__JEV_CAPTURED};
    return to_machine(f, &done);
}

static int deliver(void *ctx, kcr__jev ev)
{
    kcr__framer *f = ctx;
    f->token_bytes = 0;
    switch (f->mode) {
    case MODE_CAPTURE: return to_builder(f, &ev);
    case MODE_SKIP:
        if (ev.type == KCR__JEV_START_MAP || ev.type == KCR__JEV_START_ARRAY)
            f->skip_depth++;
        else if ((ev.type == KCR__JEV_END_MAP || ev.type == KCR__JEV_END_ARRAY) &&
                 --f->skip_depth == 0)
            f->mode = MODE_MACHINE;
        return 1;
    case MODE_MACHINE: break;
    }
    return to_machine(f, &ev);
}

static int on_null(void *ctx)
{
    return deliver(ctx, (kcr__jev){.type = KCR__JEV_NULL});
}
static int on_bool(void *ctx, int v)
{
    return deliver(ctx, (kcr__jev){.type = KCR__JEV_BOOL, .b = v != 0});
}
static int on_number(void *ctx, const char *s, size_t len)
{
    return deliver(ctx, (kcr__jev){.type = KCR__JEV_NUMBER, .s = s, .len = len});
}
static int on_string(void *ctx, const unsigned char *s, size_t len)
{
    return deliver(ctx, (kcr__jev){.type = KCR__JEV_STRING, .s = (const char *)s, .len = len});
}
static int on_key(void *ctx, const unsigned char *s, size_t len)
{
    return deliver(ctx, (kcr__jev){.type = KCR__JEV_KEY, .s = (const char *)s, .len = len});
}
static int on_start_map(void *ctx)
{
    return deliver(ctx, (kcr__jev){.type = KCR__JEV_START_MAP});
}
static int on_end_map(void *ctx)
{
    return deliver(ctx, (kcr__jev){.type = KCR__JEV_END_MAP});
}
static int on_start_array(void *ctx)
{
    return deliver(ctx, (kcr__jev){.type = KCR__JEV_START_ARRAY});
}
static int on_end_array(void *ctx)
{
    return deliver(ctx, (kcr__jev){.type = KCR__JEV_END_ARRAY});
}

static const yajl_callbacks callbacks = {
    .yajl_null = on_null,
    .yajl_boolean = on_bool,
    .yajl_number = on_number,
    .yajl_string = on_string,
    .yajl_start_map = on_start_map,
    .yajl_map_key = on_key,
    .yajl_end_map = on_end_map,
    .yajl_start_array = on_start_array,
    .yajl_end_array = on_end_array,
};

kcr_err kcr__framer_capture(kcr__framer *f)
{
    f->mode = MODE_CAPTURE;
    f->capture_depth = 1;
    f->last_key_metadata = f->in_metadata = f->drop_pending = false;
    f->drop_depth = 0;
    kcr_err err = kcr__object_builder_start_map(f->b);
    if (err != KCR_OK)
        return kcr__refail(err, "%s %zu: ", f->unit, f->n_units);
    return KCR_OK;
}

void kcr__framer_drop_managed_fields(kcr__framer *f)
{
    f->drop_managed_fields = true;
}

void kcr__framer_skip(kcr__framer *f)
{
    f->mode = MODE_SKIP;
    f->skip_depth = 1;
}

kcr__object_builder *kcr__framer_builder(kcr__framer *f)
{
    return f->b;
}

void kcr__framer_unit_begin(kcr__framer *f)
{
    f->in_unit = true;
    f->unit_bytes = 0;
    f->unit_from = slice_offset(f) - 1; /* the '{' */
}

kcr_err kcr__framer_unit_end(kcr__framer *f)
{
    f->in_unit = false;
    f->n_units++;
    if (f->unit_bytes + slice_offset(f) - f->unit_from > f->max)
        return too_large(f->unit, f->max);
    return KCR_OK;
}

size_t kcr__framer_units(const kcr__framer *f)
{
    return f->n_units;
}

/* ---- parsing ----------------------------------------------------------- */

kcr__framer *kcr__framer_new(size_t max, const char *unit, const char *stream,
                             bool multiple_values, const kcr__framer_ops *ops, void *user_data)
{
    kcr__framer *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->ops = ops;
    f->ud = user_data;
    f->unit = unit;
    f->stream = stream;
    f->max = max;
    f->b = kcr__object_builder_new();
    f->h = yajl_alloc(&callbacks, NULL, f);
    if (!f->b || !f->h) {
        kcr__framer_free(f);
        return NULL;
    }
    yajl_config(f->h, yajl_dont_validate_strings, 1); /* the builder validates (object/utf8.h) */
    if (multiple_values)
        yajl_config(f->h, yajl_allow_multiple_values, 1);
    return f;
}

void kcr__framer_free(kcr__framer *f)
{
    if (!f)
        return;
    if (f->h)
        yajl_free(f->h);
    kcr__object_builder_free(f->b);
    kcr__buf_free(&f->stash);
    free(f);
}

static kcr_err yajl_failure(kcr__framer *f, const unsigned char *buf, size_t n)
{
    unsigned char *msg = yajl_get_error(f->h, 0, buf, n);
    size_t len = msg ? strlen((char *)msg) : 0;
    while (len && (msg[len - 1] == '\n' || msg[len - 1] == ' '))
        msg[--len] = '\0';
    kcr_err err =
        kcr__fail(KCR_ERR_PARSE, "%s: invalid JSON: %s", f->stream, msg ? (char *)msg : "?");
    if (msg)
        yajl_free_error(f->h, msg);
    return err;
}

static kcr_err parse(kcr__framer *f, const char *buf, size_t len, size_t slice)
{
    while (f->err == KCR_OK && len > 0) {
        size_t n = len < slice ? len : slice;
        size_t token_before = f->token_bytes;
        f->token_bytes = 1; /* parse events reset it to 0 */
        f->unit_from = 0;
        yajl_status st = yajl_parse(f->h, (const unsigned char *)buf, n);
        if (st == yajl_status_error && f->err == KCR_OK)
            f->err = yajl_failure(f, (const unsigned char *)buf, n);
        if (f->err != KCR_OK)
            break;
        f->token_bytes = f->token_bytes ? token_before + n : 0;
        if (f->in_unit)
            f->unit_bytes += n - f->unit_from;
        if (f->in_unit && f->unit_bytes > f->max)
            f->err = too_large(f->unit, f->max);
        else if (f->token_bytes > f->max)
            f->err = token_too_large(f);
        buf += n;
        len -= n;
    }
    return f->err;
}

/* True when buf was stashed and parsing should wait. */
static bool stash_add(kcr__framer *f, const char *buf, size_t len)
{
    if (f->token_bytes < STASH_AFTER && f->stash.len == 0)
        return false;
    if (kcr__buf_add(&f->stash, buf, len) != KCR_OK) {
        f->err =
            kcr__fail(KCR_ERR_NOMEM, "out of memory holding a long JSON token of %s", f->stream);
        return true;
    }
    return f->stash.len < f->token_bytes && !memchr(buf, '"', len);
}

kcr_err kcr__framer_flush(kcr__framer *f)
{
    if (f->err != KCR_OK || f->stash.len == 0)
        return f->err;
    char *s = f->stash.s;
    size_t n = f->stash.len;
    f->stash = (kcr__buf){0};
    parse(f, s, n, n);
    free(s);
    return f->err;
}

kcr_err kcr__framer_feed(kcr__framer *f, const char *buf, size_t len)
{
    if (f->err != KCR_OK)
        return f->err;
    size_t unit_bytes = f->in_unit ? f->unit_bytes : 0;
    if ((f->token_bytes + f->stash.len + len > f->max ||
         unit_bytes + f->stash.len + len > f->max) &&
        (f->stash.len || f->token_bytes >= STASH_AFTER))
        return f->err = f->in_unit ? too_large(f->unit, f->max) : token_too_large(f);
    if (stash_add(f, buf, len))
        return f->err;
    if (f->stash.len)
        return kcr__framer_flush(f);
    return parse(f, buf, len, SLICE);
}

kcr_err kcr__framer_complete(kcr__framer *f)
{
    if (kcr__framer_flush(f) != KCR_OK)
        return f->err;
    if (yajl_complete_parse(f->h) == yajl_status_error && f->err == KCR_OK)
        f->err = kcr__fail(KCR_ERR_PARSE, "%s ended early", f->stream);
    return f->err;
}
