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

/* Whether an object stays in a narrower selection (kcr__narrow_fn). */
typedef bool (*kcr__keep_fn)(const kcr_object *obj, void *keep_user_data);
/* Drops from a sink every object `keep` rejects, behind whatever the sink
 * still has queued for it (the informer: kcr__delta_fifo_delete_unless).
 * Runs on the reflector's thread. */
typedef kcr_err (*kcr__narrow_fn)(kcr__keep_fn keep, void *keep_user_data, void *user_data);
/* Sets r's narrowing hook; before kcr_reflector_start(). With it, a shard
 * selector change on the same field lists only the ranges the new
 * selection adds (a consistent read), drops what the selection loses
 * through the hook, hands the added objects to on_add and resumes the
 * watch from where it was, skipping the events that list holds
 * (docs/informer.md, "Changing the ranges of a running informer").
 * Without it, or when that list fails, the whole new selection is
 * relisted. */
void kcr__reflector_set_narrow(kcr_reflector *r, kcr__narrow_fn fn, void *user_data);

/* The label selector for a selection of n shard ranges (n 0: no shard
 * selector), given the `base` label selector (NULL: none): malloc'd, ""
 * for none, NULL when out of memory. Must be pure. */
typedef char *(*kcr__shard_label_fn)(const char *base, const kcr_shard_range *ranges, size_t n);
/* Makes r's label selector follow its shard selector: each
 * kcr_reflector_set_shard_selector() also sets fn(base, new ranges) for
 * the same relist, and a list of gained ranges asks for fn(base, gained).
 * `base` is copied. The sharded manager's owned caches select their
 * owners' buckets so. Before kcr_reflector_start(); KCR_ERR_NOMEM only. */
kcr_err kcr__reflector_set_shard_label(kcr_reflector *r, kcr__shard_label_fn fn, const char *base);

/* Makes r's label selector `<base>,<key> in (<values>)` (`<key>=<value>`
 * for one; base NULL or "": none; all copied, n > 0). Label-mode sharding
 * selects its primary caches so and widens and narrows them (docs/
 * sharding.md, "Label mode"). Before kcr_reflector_start() it is the
 * selection the first list uses: make r with the same selector
 * (kcr__label_set_selector) so that a factory shares it only with an equal
 * selection. After, the running watch ends; with the narrowing hook and a
 * selection of the same key and base in force, only the objects of the
 * values it adds are listed (a consistent read), those of the values it
 * drops leave through the hook, and the watch resumes from where it was,
 * as at a shard selector change (the same generation counts both);
 * otherwise the whole new selection is listed. KCR_ERR_STATE when the
 * label selector follows the shard selector (kcr__reflector_set_shard_label);
 * KCR_ERR_INVALID without a key or a value; KCR_ERR_NOMEM. Thread-safe. */
kcr_err kcr__reflector_set_label_values(kcr_reflector *r, const char *base, const char *key,
                                        const char *const *values, size_t n);

/* The generation of the newest shard or label selector set on r: 0 for the
 * one it was made with, one more per kcr_reflector_set_shard_selector() or
 * kcr__reflector_set_label_values() after the start. Thread-safe. */
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
