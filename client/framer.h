/* Internal: the stream framer under the LIST and watch decoders (decode.c).
 *
 * One JSON reader (object/json_reader.h) over a whole body or stream, fed in
 * any chunking. The
 * decoder's state machine sees the JSON events outside the values it hands
 * over: when it meets an object it wants (a list item, a watch event's
 * object) it calls kcr__framer_capture() and the framer forwards that
 * object's events straight to an object builder, then reports
 * KCR__JEV_CAPTURED; a value it does not care about it hands to
 * kcr__framer_skip(). The framer also owns the size limits (one "unit" -
 * an item, an event - and any single token at most `max` bytes).
 * A framer belongs to the thread that feeds it. */
#ifndef KCR_CLIENT_FRAMER_H
#define KCR_CLIENT_FRAMER_H

#include <stdbool.h>
#include <stddef.h>

#include "kcr/error.h"
#include "object/json_reader.h"
#include "object/object_builder.h"

typedef struct kcr__framer kcr__framer;

typedef struct kcr__framer_ops {
    /* One event outside captured and skipped values. Returns KCR_OK to go on,
     * or an error (its detail set) that stops the stream. */
    kcr_err (*event)(kcr__framer *f, const kcr__jev *ev, void *user_data);
    /* Optional: a key at the top level of the object being captured. */
    void (*capture_key)(kcr__framer *f, const char *key, size_t len, void *user_data);
    /* Optional: the captured object is about to close; members fed to the
     * builder now are added to it. */
    kcr_err (*capture_closing)(kcr__framer *f, kcr__object_builder *b, void *user_data);
} kcr__framer_ops;

/* `unit` names what max bounds in messages ("list item", "watch event");
 * `stream` names the body ("list", "watch stream"). multiple_values: the
 * body is a sequence of JSON values (a watch stream), not one. NULL when
 * out of memory. */
kcr__framer *kcr__framer_new(size_t max, const char *unit, const char *stream,
                             bool multiple_values, const kcr__framer_ops *ops, void *user_data);
void kcr__framer_free(kcr__framer *f);

/* Parses the next bytes: KCR_OK, a parse/size error, or the error an ops
 * callback returned. After an error, stop feeding. */
kcr_err kcr__framer_feed(kcr__framer *f, const char *buf, size_t len);
/* The error that stopped the framer (fed again it returns the same), KCR_OK
 * while none. */
kcr_err kcr__framer_error(const kcr__framer *f);
/* For a body holding one value, at its end: tells the reader the body ended;
 * KCR_ERR_PARSE when the value is incomplete. */
kcr_err kcr__framer_complete(kcr__framer *f);

/* From an ops->event for a KCR__JEV_START_MAP: feeds this object to the
 * builder; KCR__JEV_CAPTURED follows its end. */
kcr_err kcr__framer_capture(kcr__framer *f);
/* From now on, captured objects are built without metadata.managedFields:
 * the reader skips the member's value (kcr__jreader_skip_value: parsed and
 * counted against the size limits, never reported), so it never reaches the
 * builder. */
void kcr__framer_drop_managed_fields(kcr__framer *f);
/* From an ops->event for a KCR__JEV_START_MAP/START_ARRAY: drops this value
 * (the machine sees nothing of it, not even its end). */
void kcr__framer_skip(kcr__framer *f);
/* The builder holding the captured object (finish or reset it on CAPTURED). */
kcr__object_builder *kcr__framer_builder(kcr__framer *f);

/* The unit starts at the START_MAP being handled / ends at the END_MAP being
 * handled (or CAPTURED); unit_end fails with KCR_ERR_TOO_LARGE past max. */
void kcr__framer_unit_begin(kcr__framer *f);
kcr_err kcr__framer_unit_end(kcr__framer *f);
/* Units ended so far (the index of the current one, for messages). */
size_t kcr__framer_units(const kcr__framer *f);

#endif
