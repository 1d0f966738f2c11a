/* Internal: streaming decoders for LIST bodies and watch streams.
 *
 * Pure: bytes in (any chunking, one byte at a time works), callbacks out, on
 * the thread that feeds. One JSON reader runs over the whole body; the events
 * of each item go to a kcr__object_builder, so memory is bounded by the
 * largest item and no body is ever buffered whole. Any single item, event or
 * token larger than `max_item_bytes` gives KCR_ERR_TOO_LARGE.
 *
 * LIST items without kind and apiVersion get the List's (kind minus "List").
 * A body that sends items before the List's kind/apiVersion (the apiserver
 * never does) has its items held until both are known or the body ends. */
#ifndef KCR_CLIENT_DECODE_H
#define KCR_CLIENT_DECODE_H

#include "kcr/client.h"

#define KCR__DEFAULT_MAX_ITEM_BYTES ((size_t)64 << 20)

typedef struct kcr__list_decoder kcr__list_decoder;

/* fn receives each item (borrowed). max_item_bytes 0: the default. */
kcr__list_decoder *kcr__list_decoder_new(size_t max_item_bytes, kcr_list_item_fn fn, void *ud);
void kcr__list_decoder_free(kcr__list_decoder *d);
/* Items are built without metadata.managedFields (call before feeding). */
void kcr__list_decoder_drop_managed_fields(kcr__list_decoder *d);

/* Feeds the next bytes. Returns KCR_OK, a parse/size error (with a message),
 * or the error the callback returned. After an error, stop feeding. */
kcr_err kcr__list_decoder_feed(kcr__list_decoder *d, const char *buf, size_t len);

/* Ends the body: KCR_ERR_PARSE when it was incomplete. Fills meta (may be NULL). */
kcr_err kcr__list_decoder_finish(kcr__list_decoder *d, kcr_list_meta *meta);

/* After a successful finish: the List's metadata.shardInfo into *out
 * (cleared first; present false when the body had none). KCR_ERR_NOMEM. */
kcr_err kcr__list_decoder_shard_info(const kcr__list_decoder *d, kcr_shard_info *out);

/* Number of items decoded so far (delivered, or held until the List's
 * kind/apiVersion are known). */
size_t kcr__list_decoder_items(const kcr__list_decoder *d);

typedef struct kcr__watch_decoder kcr__watch_decoder;

kcr__watch_decoder *kcr__watch_decoder_new(size_t max_item_bytes, kcr_watch_event_fn fn,
                                           void *ud);
void kcr__watch_decoder_free(kcr__watch_decoder *d);
/* Event objects are built without metadata.managedFields (call before
 * feeding). */
void kcr__watch_decoder_drop_managed_fields(kcr__watch_decoder *d);

/* Feeds the next bytes. An ERROR event is delivered, then feeding stops with
 * the Status's mapped error (the Status is kept: kcr__watch_decoder_status). */
kcr_err kcr__watch_decoder_feed(kcr__watch_decoder *d, const char *buf, size_t len);

/* Ends the stream: KCR_OK when it ended between events, KCR_ERR_TRANSPORT
 * when it stopped inside one (truncated). */
kcr_err kcr__watch_decoder_finish(kcr__watch_decoder *d);

/* The Status of the ERROR event that stopped the stream, or NULL. */
const kcr_status *kcr__watch_decoder_status(const kcr__watch_decoder *d);

/* Events delivered so far. */
size_t kcr__watch_decoder_events(const kcr__watch_decoder *d);

#endif
