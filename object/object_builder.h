/* Internal: builds a kcr_object from a stream of JSON parse events.
 *
 * The streaming decoders (client/) run one yajl parser over a LIST body or a
 * watch stream and forward the events of each item to a builder, so an item is
 * parsed exactly once and no whole body is ever buffered. Feed exactly one JSON
 * object (starting with start_map); when its closing end_map has been fed,
 * kcr__object_builder_done() is true and finish() yields the object.
 * A builder is used by one thread at a time; reuse it for the next item. */
#ifndef KCR_OBJECT_OBJECT_BUILDER_H
#define KCR_OBJECT_OBJECT_BUILDER_H

#include <stdbool.h>
#include <stddef.h>

#include "kcr/object.h"

typedef struct kcr__object_builder kcr__object_builder;

kcr__object_builder *kcr__object_builder_new(void);
void kcr__object_builder_free(kcr__object_builder *b);

/* For one object built start to finish on this thread: the thread's spare
 * builder (reset) or a new one; NULL when out of memory. Give it back with
 * kcr__object_builder_give, on the same thread. A builder's first buffers
 * (arena, word stack, string table, some 11 KiB) cost about as much as
 * parsing a small object: a webhook review or an edit's snapshot. */
kcr__object_builder *kcr__object_builder_take(void);
/* Keeps b as the thread's spare (freed with the thread) when its buffers
 * are small, else frees it. NULL is a no-op. */
void kcr__object_builder_give(kcr__object_builder *b);

/* Event feeders, same meaning as yajl's callbacks. Numbers arrive as their
 * original text so nothing is lost. Return KCR_OK, or an error (nesting too
 * deep, out of memory, event out of place) after which the builder must be
 * reset. Strings are copied. */
kcr_err kcr__object_builder_null(kcr__object_builder *b);
kcr_err kcr__object_builder_bool(kcr__object_builder *b, bool value);
kcr_err kcr__object_builder_number(kcr__object_builder *b, const char *text, size_t len);
kcr_err kcr__object_builder_string(kcr__object_builder *b, const char *text, size_t len);
kcr_err kcr__object_builder_start_map(kcr__object_builder *b);
kcr_err kcr__object_builder_map_key(kcr__object_builder *b, const char *key, size_t len);
kcr_err kcr__object_builder_end_map(kcr__object_builder *b);
kcr_err kcr__object_builder_start_array(kcr__object_builder *b);
kcr_err kcr__object_builder_end_array(kcr__object_builder *b);
/* Like string and map_key, for text the caller found to be ASCII (every
 * byte < 0x80, as object/json_reader.h reports it): the UTF-8 check is
 * skipped. */
kcr_err kcr__object_builder_string_ascii(kcr__object_builder *b, const char *text, size_t len);
kcr_err kcr__object_builder_map_key_ascii(kcr__object_builder *b, const char *key, size_t len);

/* True once the top-level object has been closed. */
bool kcr__object_builder_done(const kcr__object_builder *b);

/* Freezes the fed object into *out (a new reference) and resets the builder.
 * KCR_ERR_PARSE when the object is incomplete or lacks metadata.name. */
kcr_err kcr__object_builder_finish(kcr__object_builder *b, kcr_object **out);

/* Like finish, but also accepts an object without metadata.name (Status
 * objects, List metadata, watch bookmarks). An extension of the contract. */
kcr_err kcr__object_builder_finish_any(kcr__object_builder *b, kcr_object **out);

/* Discards whatever was fed; the builder is ready for a new object. */
void kcr__object_builder_reset(kcr__object_builder *b);

#endif
