/* Internal: hooks shared between the informer files and the unit tests. */
#ifndef KCR_INFORMER_INFORMER_INTERNAL_H
#define KCR_INFORMER_INFORMER_INTERNAL_H

#include <stdint.h>

#include "kcr/informer.h"

/* Called with each backoff wait the reflector is about to sleep (ms), on
 * the reflector's thread. For tests of the backoff sequence; set before
 * kcr_reflector_start(). */
typedef void (*kcr__backoff_hook_fn)(int64_t ms, void *user_data);
void kcr__reflector_set_backoff_hook(kcr_reflector *r, kcr__backoff_hook_fn fn, void *user_data);

/* Lists and watches ask the client to build objects without
 * metadata.managedFields (kcr_list_options.drop_managed_fields); set before
 * kcr_reflector_start(). */
void kcr__reflector_drop_managed_fields(kcr_reflector *r);

/* A listed object's reuse: given an object of a list (after the shard
 * filter, before the transform), returns a new reference to the equal
 * object the sink already holds (same key, uid and resourceVersion: the
 * transformed state of the same version), which the list then carries
 * instead, so a relist allocates only what changed; or NULL. Runs on the
 * reflector's thread. */
typedef kcr_object *(*kcr__list_reuse_fn)(const kcr_object *listed, void *user_data);
/* Sets r's reuse hook; before kcr_reflector_start(). */
void kcr__reflector_set_list_reuse(kcr_reflector *r, kcr__list_reuse_fn fn, void *user_data);

/* kcr_reflector_set_shard_selector(r, shard) that also replaces the label
 * selector (copied; NULL or "": none) for the same relist: one generation
 * more. The sharded manager's owned caches select their owners' buckets
 * with it. Thread-safe. */
kcr_err kcr__reflector_set_selectors(kcr_reflector *r, const char *shard, const char *label);

/* The generation of the newest shard selector set on r: 0 for the one it
 * was made with, one more per kcr_reflector_set_shard_selector(). Thread-safe. */
uint64_t kcr__reflector_shard_gen(kcr_reflector *r);

/* Whether r delivered a complete list made with a shard selector of
 * generation `gen` or newer to its sink. Thread-safe. */
bool kcr__reflector_shard_listed(kcr_reflector *r, uint64_t gen);

/* Whether inf's cache holds a complete list made with a shard selector of
 * generation `gen` or newer: listed, and nothing of it still queued (the
 * queue applies an item to the cache before it counts as gone).
 * Thread-safe. */
bool kcr__informer_shard_synced(kcr_informer *inf, uint64_t gen);

/* How often the informer's resync timer expired (a timed wait reached its
 * deadline): with no handler asking for resync it waits with no deadline. */
uint64_t kcr__informer_resync_timeouts(kcr_informer *inf);

/* The highest resourceVersion (an integer; 0: none yet) of a change the
 * informer's cache has applied: every object change up to it is visible in
 * the cache (read-your-writes waits on it for objects the cache does not
 * hold). Thread-safe. */
uint64_t kcr__informer_applied_rv(kcr_informer *inf);

/* True for a Status saying the requested resourceVersion is newer than the
 * server has (504 with cause ResourceVersionTooLarge, or the older message). */
bool kcr__is_too_large_rv(kcr_err err, const kcr_status *st);

#endif
