/* The store module: object keys and tombstones, the thread-safe indexer
 * (kcr_store), the FIFO and the DeltaFIFO an informer is built on.
 * Objects are kcr_object (kcr/object.h): immutable and reference-counted, so
 * every container here holds references, never copies. */
#ifndef KCR_STORE_H
#define KCR_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcr/error.h"
#include "kcr/export.h"
#include "kcr/time.h"
#include "kcr/object.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- keys ------------------------------------------------------------------ */

/* The store key of an object: "namespace/name", or "name" for cluster-scoped
 * objects. *out is malloc'd (caller frees). Thread-safe. */
KCR_API kcr_err kcr_store_key(const kcr_object *obj, char **out);

/* Splits a key without copying: *ns points into `key` and is NOT
 * NUL-terminated (it runs on into "/name"): use its length *ns_len (0 for
 * cluster-scoped keys), e.g. printf("%.*s", (int)ns_len, ns), or call
 * kcr_store_key_parts() for terminated copies. *name points into `key` and
 * is NUL-terminated. Pointers live as long as `key`.
 * KCR_ERR_INVALID for a key with more than one '/' or an empty name.
 * Thread-safe. */
KCR_API kcr_err kcr_store_split_key(const char *key, const char **ns, size_t *ns_len,
                                    const char **name);

/* Longest namespace (a DNS label) and object name (a DNS subdomain) plus
 * their NUL: buffers of these sizes always fit kcr_store_key_parts(). */
#define KCR_STORE_NAMESPACE_SIZE 64
#define KCR_STORE_NAME_SIZE 254

/* Splits a key into NUL-terminated copies: `ns` gets the namespace ("" for
 * cluster-scoped keys), `name` the name, in caller buffers of ns_size and
 * name_size bytes (KCR_STORE_NAMESPACE_SIZE / KCR_STORE_NAME_SIZE fit every
 * valid key). KCR_ERR_INVALID as kcr_store_split_key, KCR_ERR_TOO_LARGE when
 * a part does not fit its buffer (the buffers then hold ""). Thread-safe. */
KCR_API kcr_err kcr_store_key_parts(const char *key, char *ns, size_t ns_size, char *name,
                                    size_t name_size);

/* A list of malloc'd strings, and a list of object references. Free with
 * the matching _free (which also frees every element / drops every ref). */
typedef struct kcr_string_list {
    char **items;
    size_t len;
} kcr_string_list;
KCR_API void kcr_string_list_free(kcr_string_list *list);

typedef struct kcr_object_list {
    kcr_object **items;
    size_t len;
} kcr_object_list;
KCR_API void kcr_object_list_free(kcr_object_list *list);

/* ---- tombstones ------------------------------------------------------------ */

/* "Deleted, final state unknown" (client-go's DeletedFinalStateUnknown): an
 * object was deleted while nobody was watching, so only its key and its last
 * known state (which may be stale, or NULL) are known. Immutable and
 * reference-counted like kcr_object; safe to share between threads. */
typedef struct kcr_tombstone kcr_tombstone;

/* A tombstone for `key` (copied) whose last known state is `obj` (may be
 * NULL; gets a new reference). *out (NULL on failure) holds the one
 * reference the caller drops with kcr_tombstone_unref. KCR_ERR_INVALID for a
 * NULL key or out, KCR_ERR_NOMEM. No options: a tombstone is plain data.
 * Thread-safe. */
KCR_API kcr_err kcr_tombstone_new(const char *key, const kcr_object *obj, kcr_tombstone **out);
/* A new reference to t (returned; NULL passes through). Thread-safe. */
KCR_API kcr_tombstone *kcr_tombstone_ref(const kcr_tombstone *t);
/* Drops a reference; the last one frees the tombstone and its object
 * reference. NULL is ignored. Thread-safe. */
KCR_API void kcr_tombstone_unref(const kcr_tombstone *t);
/* Borrowed while the caller holds a reference to the tombstone. Thread-safe. */
KCR_API const char *kcr_tombstone_key(const kcr_tombstone *t);
KCR_API const kcr_object *kcr_tombstone_object(const kcr_tombstone *t);

/* ---- indexer ----------------------------------------------------------------
 * kcr_store is a thread-safe map key -> object with secondary indexes
 * (client-go's cache.Indexer). Readers share a rwlock and do not block each
 * other; writers are exclusive. Objects are keyed by kcr_store_key(). */

typedef struct kcr_store kcr_store;

/* Receives the index values of one object. */
typedef struct kcr_index_emit kcr_index_emit;

/* Adds one index value for the object being indexed (copied). */
KCR_API void kcr_index_emit_value(kcr_index_emit *emit, const char *value);

/* An index function: calls kcr_index_emit_value zero or more times. It must
 * be deterministic (the same object always gives the same values: the store
 * calls it again to find an old object's entries). Runs on the writing
 * thread WITH the store's write lock held: it must not call into the store. */
typedef void (*kcr_index_fn)(const kcr_object *obj, kcr_index_emit *emit, void *user_data);

/* The built-in namespace index: the object's namespace (nothing for
 * cluster-scoped objects). Register it as KCR_INDEX_NAMESPACE. */
#define KCR_INDEX_NAMESPACE "namespace"
KCR_API void kcr_index_namespace(const kcr_object *obj, kcr_index_emit *emit, void *user_data);

/* A new empty store with no index in *out (NULL on failure; the caller
 * frees it with kcr_store_free). No options: the key is always
 * kcr_store_key() and indexes are added with kcr_store_add_index().
 * KCR_ERR_INVALID for a NULL out, KCR_ERR_NOMEM. Thread-safe. */
KCR_API kcr_err kcr_store_new(kcr_store **out);

/* Drops every reference the store holds and frees it. No call may be running. */
KCR_API void kcr_store_free(kcr_store *s);

/* Adds an index (name copied). Existing objects are indexed at once.
 * KCR_ERR_EXISTS when the name is taken. */
KCR_API kcr_err kcr_store_add_index(kcr_store *s, const char *name, kcr_index_fn fn,
                                    void *user_data);

/* Inserts or replaces the object with the same key (add and update are the
 * same operation). The store takes its own reference; the caller keeps its. */
KCR_API kcr_err kcr_store_add(kcr_store *s, const kcr_object *obj);
KCR_API kcr_err kcr_store_update(kcr_store *s, const kcr_object *obj);

/* Removes the object with obj's key / with `key`. KCR_OK when absent. */
KCR_API kcr_err kcr_store_delete(kcr_store *s, const kcr_object *obj);
KCR_API kcr_err kcr_store_delete_key(kcr_store *s, const char *key);

/* The stored object with `key` (a new reference the caller unrefs), or NULL. */
KCR_API kcr_object *kcr_store_get_by_key(kcr_store *s, const char *key);

/* The stored object with the same key as `obj` (new reference), or NULL. */
KCR_API kcr_object *kcr_store_get(kcr_store *s, const kcr_object *obj);

/* Every object (new references) / every key (copies), in no particular order. */
KCR_API kcr_err kcr_store_list(kcr_store *s, kcr_object_list *out);
KCR_API kcr_err kcr_store_list_keys(kcr_store *s, kcr_string_list *out);

/* Number of objects. */
KCR_API size_t kcr_store_len(kcr_store *s);

/* Replaces the whole content with `objs` (refs taken; a later duplicate key
 * wins) and rebuilds every index. */
KCR_API kcr_err kcr_store_replace(kcr_store *s, kcr_object *const *objs, size_t n);

/* Nothing to do for an in-memory store (kept for the Store interface). */
KCR_API kcr_err kcr_store_resync(kcr_store *s);

/* Objects whose index `index` has the value `value` (new references).
 * KCR_ERR_NOT_FOUND when there is no such index (an unknown value just
 * gives an empty list). */
KCR_API kcr_err kcr_store_by_index(kcr_store *s, const char *index, const char *value,
                                   kcr_object_list *out);

/* Keys of those objects (copies). */
KCR_API kcr_err kcr_store_index_keys(kcr_store *s, const char *index, const char *value,
                                     kcr_string_list *out);

/* Every value the index currently has (copies); empty value sets are pruned
 * as soon as their last object goes, so each listed value has objects. */
KCR_API kcr_err kcr_store_list_index_values(kcr_store *s, const char *index,
                                            kcr_string_list *out);

/* Objects sharing any value of `index` with `obj` (client-go's Index()). */
KCR_API kcr_err kcr_store_index_objects(kcr_store *s, const char *index, const kcr_object *obj,
                                        kcr_object_list *out);

/* ---- known objects ------------------------------------------------------------
 * What a DeltaFIFO asks about the objects its consumer already has (its
 * cache), to detect deletions on replace and to resync. Both functions run
 * on the thread calling kcr_delta_fifo_replace/_resync, with the DeltaFIFO's
 * lock held (lock order DeltaFIFO -> store): they must not call into that
 * DeltaFIFO. `user_data` is passed to both, last. */
typedef struct kcr_known_objects {
    /* Fills *out with every known key (copies the caller frees). */
    kcr_err (*list_keys)(kcr_string_list *out, void *user_data);
    /* The known object with `key` (borrowed) as a new reference, or NULL. */
    kcr_object *(*get_by_key)(const char *key, void *user_data);
    void *user_data;
} kcr_known_objects;

/* A store seen as known objects: user_data is `s`, borrowed, so it must
 * outlive the DeltaFIFO using it. Thread-safe (the store's read lock). */
KCR_API kcr_known_objects kcr_store_known_objects(kcr_store *s);

/* ---- FIFO ---------------------------------------------------------------------
 * client-go's FIFO: a queue of keys with the latest object per key. Adding
 * an object whose key is queued replaces it in place (keeps the position).
 * Thread-safe; pop blocks. */

typedef struct kcr_fifo kcr_fifo;

/* Handles one popped object. `obj` is borrowed for the call (ref it to keep
 * it). is_in_initial_list: the object came from the first replace and
 * has_synced was not yet true. Set *requeue to put the object back (at the
 * end, unless its key was queued meanwhile). Runs on the popping thread WITH
 * the FIFO's lock held: it must not call into this FIFO. Its return value is
 * pop's return value. */
typedef kcr_err (*kcr_fifo_process_fn)(const kcr_object *obj, bool is_in_initial_list,
                                       bool *requeue, void *user_data);

/* A new empty FIFO in *out (NULL on failure; the caller frees it with
 * kcr_fifo_free). No options: keys are always kcr_store_key().
 * KCR_ERR_INVALID for a NULL out, KCR_ERR_NOMEM. Thread-safe. */
KCR_API kcr_err kcr_fifo_new(kcr_fifo **out);
/* Frees the FIFO and drops its references. No call may be running. */
KCR_API void kcr_fifo_free(kcr_fifo *f);

/* Queues obj's key (if not queued) and makes obj its object (a new ref). */
KCR_API kcr_err kcr_fifo_add(kcr_fifo *f, const kcr_object *obj);
KCR_API kcr_err kcr_fifo_update(kcr_fifo *f, const kcr_object *obj);
/* Like add, but does nothing when the key already has an object. */
KCR_API kcr_err kcr_fifo_add_if_not_present(kcr_fifo *f, const kcr_object *obj);
/* Forgets obj's key's object; its queue slot stays and pop skips it. */
KCR_API kcr_err kcr_fifo_delete(kcr_fifo *f, const kcr_object *obj);
/* Replaces all content with `objs` (refs taken), queued in list order. The
 * first replace (before any add/update/delete) sets the initial population. */
KCR_API kcr_err kcr_fifo_replace(kcr_fifo *f, kcr_object *const *objs, size_t n);
/* Queues every key that has an object but is not queued. */
KCR_API kcr_err kcr_fifo_resync(kcr_fifo *f);
/* Blocks until a key is queued, removes it and calls `process` with its
 * object. KCR_ERR_SHUTDOWN once closed and empty; else process's result. */
KCR_API kcr_err kcr_fifo_pop(kcr_fifo *f, kcr_fifo_process_fn process, void *user_data);
/* Wakes every pop; later pops return KCR_ERR_SHUTDOWN when nothing is queued. */
KCR_API void kcr_fifo_close(kcr_fifo *f);
KCR_API bool kcr_fifo_is_closed(kcr_fifo *f);
/* True once the first replace's objects are all popped, or an
 * add/update/delete came before any replace. */
KCR_API bool kcr_fifo_has_synced(kcr_fifo *f);
/* The object with `key` (new reference) or NULL. */
KCR_API kcr_object *kcr_fifo_get_by_key(kcr_fifo *f, const char *key);
/* Keys that have an object (copies). */
KCR_API kcr_err kcr_fifo_list_keys(kcr_fifo *f, kcr_string_list *out);

/* ---- DeltaFIFO ----------------------------------------------------------------
 * client-go's DeltaFIFO: per key, the list of changes (deltas) since its last
 * pop, queued in first-change order. Fed by a reflector; drained by one
 * informer thread that applies each key's deltas to its cache and handlers.
 * Thread-safe; pop blocks. */

typedef enum kcr_delta_type {
    KCR_DELTA_ADDED = 1,
    KCR_DELTA_UPDATED = 2,
    KCR_DELTA_DELETED = 3,
    KCR_DELTA_REPLACED = 4, /* listed again by a relist (replace) */
    KCR_DELTA_SYNC = 5      /* periodic resync of a known object */
} kcr_delta_type;

/* Short name: "Added", "Updated", "Deleted", "Replaced", "Sync". */
KCR_API const char *kcr_delta_type_name(kcr_delta_type type);

typedef struct kcr_delta {
    kcr_delta_type type;
    /* The object; for a tombstone its last known state (may be NULL). */
    const kcr_object *object;
    /* Non-NULL for a DELETED delta whose final state is unknown. */
    const kcr_tombstone *tombstone;
} kcr_delta;

typedef struct kcr_delta_fifo kcr_delta_fifo;

typedef struct kcr_delta_fifo_options {
    /* The consumer's cache, for deletion detection on replace and for
     * resync. Default (all NULL): none, so replace only tombstones keys
     * still queued and resync does nothing. */
    kcr_known_objects known;
} kcr_delta_fifo_options;

/* Handles one popped key.
 * OWNERSHIP: `deltas` (oldest first, n >= 1) and everything they point to are
 * borrowed for the duration of the call only; the FIFO drops them afterwards
 * (ref an object or tombstone to keep it). `key` likewise.
 * is_in_initial_list: true while the initial population (first replace's
 * listed + deleted keys) is being popped.
 * REQUEUE: set *requeue = true (e.g. on a transient error) to put the deltas
 * back at the end of the queue, unless new deltas for the key arrived during
 * the call (then those win and the requeued ones are dropped, as client-go
 * does). The return value is pop's return value.
 * THREAD/LOCKS: runs on the popping thread with the DeltaFIFO's lock held, so
 * replace/resync cannot interleave with applying a key (which keeps the
 * cache and the queue consistent); it may use the known-objects store (lock
 * order: DeltaFIFO -> store) but must not call into this DeltaFIFO. Keep it
 * short: producers block meanwhile. */
typedef kcr_err (*kcr_delta_fifo_process_fn)(const char *key, const kcr_delta *deltas, size_t n,
                                             bool is_in_initial_list, bool *requeue,
                                             void *user_data);

/* A new empty DeltaFIFO in *out (NULL on failure; the caller frees it
 * with kcr_delta_fifo_free). opts may be NULL (defaults); it is copied, and
 * what opts->known.user_data points to is borrowed until _free.
 * KCR_ERR_INVALID for a NULL out or known objects with only one of their
 * two functions, KCR_ERR_NOMEM. Thread-safe. */
KCR_API kcr_err kcr_delta_fifo_new(size_t opts_size, const kcr_delta_fifo_options *opts,
                                   kcr_delta_fifo **out);
#define kcr_delta_fifo_new(...) (kcr_delta_fifo_new)(sizeof(kcr_delta_fifo_options), __VA_ARGS__)
/* Frees the FIFO and drops its references. No call may be running. */
KCR_API void kcr_delta_fifo_free(kcr_delta_fifo *f);

/* Queue an Added / Updated delta (obj gets a new reference). */
KCR_API kcr_err kcr_delta_fifo_add(kcr_delta_fifo *f, const kcr_object *obj);
KCR_API kcr_err kcr_delta_fifo_update(kcr_delta_fifo *f, const kcr_object *obj);
/* Queue a Deleted delta, unless the key is neither known nor queued (then
 * nothing happens). Two consecutive Deleted deltas collapse into one (the
 * non-tombstone one is kept). */
KCR_API kcr_err kcr_delta_fifo_delete(kcr_delta_fifo *f, const kcr_object *obj);
/* A relist: a Replaced delta per listed object (refs taken), then a Deleted
 * tombstone for each queued or known key not listed. The first replace (with
 * nothing added before) sets the initial population to listed + deleted. */
KCR_API kcr_err kcr_delta_fifo_replace(kcr_delta_fifo *f, kcr_object *const *objs, size_t n);
/* A Sync delta for each known object whose key has nothing queued. */
KCR_API kcr_err kcr_delta_fifo_resync(kcr_delta_fifo *f);
/* Blocks for the oldest queued key and hands its deltas to `process`
 * (contract above). KCR_ERR_SHUTDOWN once closed and empty. */
KCR_API kcr_err kcr_delta_fifo_pop(kcr_delta_fifo *f, kcr_delta_fifo_process_fn process,
                                   void *user_data);
/* Like pop, but gives up after timeout_ms with KCR_ERR_TIMEOUT (0: at once
 * when nothing is queued; KCR_DURATION_INFINITE or above KCR_DURATION_MAX:
 * no limit; another negative value: KCR_ERR_INVALID). */
KCR_API kcr_err kcr_delta_fifo_pop_timeout(kcr_delta_fifo *f, kcr_delta_fifo_process_fn process,
                                           void *user_data, int64_t timeout_ms);
KCR_API void kcr_delta_fifo_close(kcr_delta_fifo *f);
KCR_API bool kcr_delta_fifo_is_closed(kcr_delta_fifo *f);
/* True once the initial population is popped, or a change came before any
 * replace. */
KCR_API bool kcr_delta_fifo_has_synced(kcr_delta_fifo *f);
/* Number of queued keys. */
KCR_API size_t kcr_delta_fifo_len(kcr_delta_fifo *f);
/* Queued keys in queue order (copies). */
KCR_API kcr_err kcr_delta_fifo_list_keys(kcr_delta_fifo *f, kcr_string_list *out);

#ifdef __cplusplus
}
#endif

#endif
