/* The stream framer under the LIST and watch decoders: one JSON reader,
 * capture of objects into a builder, skipping, size limits. See framer.h. */
#include "client/framer.h"

#include <stdlib.h>
#include <string.h>
#include "core/error.h"

/* Bytes handed to the reader per call, so size limits are checked often. */
enum { SLICE = 64 << 10 };

/* What the framer does with the events it parses. */
typedef enum framer_mode {
    MODE_MACHINE, /* hand them to the decoder's state machine */
    MODE_CAPTURE, /* feed them to the builder (capture_depth levels open) */
    MODE_SKIP     /* drop them (skip_depth levels open) */
} framer_mode;

struct kcr__framer {
    kcr__jreader *rd;
    kcr__object_builder *b;
    const kcr__framer_ops *ops;
    void *ud;
    const char *unit, *stream;
    size_t max;
    framer_mode mode;
    size_t capture_depth, skip_depth;
    /* Dropping metadata.managedFields inside a captured object (see
     * kcr__framer_drop_managed_fields): in_metadata while the top-level
     * "metadata" map is open; the member's value is skipped by the reader. */
    bool drop_managed_fields, last_key_metadata, in_metadata;
    /* Size accounting. A unit's bytes are counted exactly: from the offset
     * of its opening brace in the slice where it starts (the reader reports the
     * offset inside callbacks) to that of its closing brace, plus the whole
     * slices in between; so any number of units under the limit pass,
     * however the body is chunked. Token bytes (since the last parse event)
     * count whole slices without an event: the tail of a slice after its
     * last event is not counted, so a token is caught at most one slice
     * late. */
    bool in_unit;
    size_t unit_bytes, unit_from, token_bytes, n_units;
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
    return kcr__jreader_consumed(f->rd);
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

/* True when the event is the key of metadata.managedFields of the captured
 * object: the key is dropped and the reader skips its value, so no event of
 * it reaches the builder. Tracks where the capture is in metadata. */
static bool dropped(kcr__framer *f, const kcr__jev *ev)
{
    if (ev->type == KCR__JEV_KEY && f->capture_depth == 1)
        f->last_key_metadata = is_key(ev, "metadata", 8);
    else if (ev->type == KCR__JEV_START_MAP && f->capture_depth == 1)
        f->in_metadata = f->last_key_metadata;
    else if ((ev->type == KCR__JEV_END_MAP || ev->type == KCR__JEV_END_ARRAY) &&
             f->capture_depth == 2)
        f->in_metadata = false;
    else if (ev->type == KCR__JEV_KEY && f->capture_depth == 2 && f->in_metadata &&
             is_key(ev, "managedFields", 13)) {
        kcr__jreader_skip_value(f->rd);
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
    case KCR__JEV_STRING:
        err = ev->ascii ? kcr__object_builder_string_ascii(b, ev->s, ev->len)
                        : kcr__object_builder_string(b, ev->s, ev->len);
        break;
    case KCR__JEV_KEY:
        if (f->capture_depth == 1 && f->ops->capture_key)
            f->ops->capture_key(f, ev->s, ev->len, f->ud);
        err = ev->ascii ? kcr__object_builder_map_key_ascii(b, ev->s, ev->len)
                        : kcr__object_builder_map_key(b, ev->s, ev->len);
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

static int deliver(kcr__framer *f, const kcr__jev *ev)
{
    f->token_bytes = 0;
    switch (f->mode) {
    case MODE_CAPTURE: return to_builder(f, ev);
    case MODE_SKIP:
        if (ev->type == KCR__JEV_START_MAP || ev->type == KCR__JEV_START_ARRAY)
            f->skip_depth++;
        else if ((ev->type == KCR__JEV_END_MAP || ev->type == KCR__JEV_END_ARRAY) &&
                 --f->skip_depth == 0)
            f->mode = MODE_MACHINE;
        return 1;
    case MODE_MACHINE: break;
    }
    return to_machine(f, ev);
}

kcr_err kcr__framer_capture(kcr__framer *f)
{
    f->mode = MODE_CAPTURE;
    f->capture_depth = 1;
    f->last_key_metadata = f->in_metadata = false;
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

static bool on_event(void *ctx, const kcr__jev *ev)
{
    return deliver(ctx, ev) != 0;
}

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
    f->rd = kcr__jreader_new(multiple_values, on_event, f);
    if (!f->b || !f->rd) {
        kcr__framer_free(f);
        return NULL;
    }
    return f;
}

void kcr__framer_free(kcr__framer *f)
{
    if (!f)
        return;
    kcr__jreader_free(f->rd);
    kcr__object_builder_free(f->b);
    free(f);
}

static kcr_err reader_failure(kcr__framer *f)
{
    size_t at;
    bool oom;
    const char *msg = kcr__jreader_error(f->rd, &at, &oom);
    if (oom)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory reading %s", f->stream);
    return kcr__fail(KCR_ERR_PARSE, "%s: invalid JSON: %s at byte %zu", f->stream, msg, at);
}

kcr_err kcr__framer_feed(kcr__framer *f, const char *buf, size_t len)
{
    while (f->err == KCR_OK && len > 0) {
        size_t n = len < SLICE ? len : SLICE;
        size_t token_before = f->token_bytes;
        f->token_bytes = 1; /* parse events reset it to 0 */
        f->unit_from = 0;
        if (kcr__jreader_feed(f->rd, buf, n) == KCR__JR_ERROR && f->err == KCR_OK)
            f->err = reader_failure(f);
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

kcr_err kcr__framer_error(const kcr__framer *f)
{
    return f->err;
}

kcr_err kcr__framer_complete(kcr__framer *f)
{
    if (f->err == KCR_OK && kcr__jreader_complete(f->rd) == KCR__JR_ERROR && f->err == KCR_OK)
        f->err = kcr__fail(KCR_ERR_PARSE, "%s ended early", f->stream);
    return f->err;
}
