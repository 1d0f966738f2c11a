/* The informer module: the reflector (list/watch state machine feeding a
 * sink, usually a DeltaFIFO), the shared index informer (cache + event
 * handlers), listers and the informer factory. Long-form docs:
 * docs/informer.md.
 *
 * Threads: a reflector runs one thread; an informer runs its reflector, one
 * processing thread (DeltaFIFO -> cache -> handler queues), one resync timer
 * thread (asleep until a handler's resync is due) and one thread per event
 * handler (none for inline handlers: the informer's threads run them).
 * Every callback documents the thread it runs on; none runs with a kcr lock
 * held. */
#ifndef KCR_INFORMER_H
#define KCR_INFORMER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcr/client.h"
#include "kcr/error.h"
#include "kcr/export.h"
#include "kcr/time.h"
#include "kcr/object.h"
#include "kcr/shard.h"
#include "kcr/store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Reflector --------------------------------------------------------------------------
 * Lists then watches one resource and hands what it sees to a sink (a
 * DeltaFIFO, usually): a list (or the initial events of a streaming list)
 * becomes a replace, watch events become add/update/delete, bookmarks a
 * bookmark. Recovers from every
 * failure by itself (docs/informer.md, Reflector): re-watch from the last
 * resourceVersion, relist on 410, back off on refusals, 429 and 5xx.
 * Thread-safety: every function is thread-safe except _free (no other call
 * may run). */

typedef struct kcr_reflector kcr_reflector;

/* How the reflector gets the initial state. */
typedef enum kcr_list_mode {
    KCR_LIST_MODE_DEFAULT = 0,  /* KCR_LIST_MODE_PAGED (measured: docs/informer.md) */
    KCR_LIST_MODE_PAGED = 1,    /* LIST in pages of page_size, then WATCH */
    KCR_LIST_MODE_STREAMING = 2 /* WATCH with sendInitialEvents=true; falls back to PAGED for
                                   good when the server does not support it */
} kcr_list_mode;

/* Receives each failed list or watch (not clean watch ends): the error, the
 * server's Status when it sent one (else NULL; borrowed for the call) and a
 * message (borrowed). Runs on the reflector's thread with no kcr lock held;
 * it must not stop or free the reflector/informer. */
typedef void (*kcr_watch_error_fn)(kcr_err err, const kcr_status *status, const char *message,
                                   void *user_data);

/* Zero means default for every field. Strings are copied. A duration above
 * 2^40 ms (about 35 years) is refused with KCR_ERR_INVALID. */
typedef struct kcr_reflector_options {
    const char *ns;        /* NULL or "": all namespaces (or a cluster-scoped resource) */
    const char *label_selector;   /* NULL: everything */
    const char *field_selector;   /* NULL: everything */
    bool metadata_only;           /* PartialObjectMetadata objects (Accept header) */
    kcr_list_mode list_mode;      /* KCR_LIST_MODE_DEFAULT */
    bool consistent_list;         /* first LIST at resourceVersion "" (a consistent, paged read)
                                     instead of "0" (the watch cache, possibly stale, unpaged) */
    int64_t page_size;            /* LIST page size; 0: 500; < 0: no paging */
    int64_t min_watch_timeout_ms; /* each watch's timeout (kcr_request.timeout_ms) is
                                     drawn from [min, 2*min]; 0: 300000 */
    int64_t idle_limit_ms;        /* a watch silent this long is dead: reconnect.
                                     0: its timeout + 30000; KCR_DURATION_INFINITE: never */
    int64_t backoff_initial_ms;   /* first backoff; 0: 800 */
    int64_t backoff_max_ms;       /* backoff cap (before jitter); 0: 30000 */
    int64_t backoff_reset_ms;     /* no failure for this long resets the backoff; 0: 120000 */
    double backoff_jitter;        /* each wait is d * (1 + jitter * U[0,1)); 0: 1.0; < 0: none */
    /* Applied to every listed/watched object before it is queued (so the
     * cache only ever holds its result). NULL: none. In an informer's
     * options it runs after managedFields are dropped (keep_managed_fields). */
    kcr_object_transform_fn transform;
    void *transform_user_data;
    kcr_watch_error_fn on_error; /* NULL: none */
    void *error_user_data;
    /* Server-side shard selector (KEP-5866, docs/informer.md): list and
     * watch only the objects whose shard key hashes into its ranges. The
     * text of kcr_shard_selector_format() (copied, parsed at once: malformed
     * text is KCR_ERR_INVALID with the parser's words). NULL or "":
     * everything. With a selector the first state always comes from a paged
     * LIST (list_mode STREAMING is not used: only a List carries
     * metadata.shardInfo), and when a List comes back without shardInfo
     * and with objects outside the selector (an apiserver with the
     * ShardedListAndWatch gate off, or older) the reflector says so once
     * in the log and in kcr_reflector_stats.shard_mode. It filters list
     * items and watch events itself in every case. A selector on
     * KCR_SHARD_BY_CONTROLLER is never sent: the reflector filters on the
     * client (shard_mode CLIENT, no warning) and passes on a change that
     * moved an object out of the ranges as a deletion. */
    union {
        const char *shard_selector;
        uint64_t shard_selector_slot; /* the pointer's slot: 8 bytes on every target */
    };
    /* Zero. Fields added after 1.0 take these bytes: the struct is nested or
     * sits in arrays, so its size never changes (docs/abi.md). Not zero:
     * KCR_ERR_INVALID. */
    uint64_t reserved[7];
} kcr_reflector_options;

/* Who applies a reflector's shard selector (kcr_reflector_stats.shard_mode). */
typedef enum kcr_shard_selector_mode {
    KCR_SHARD_SELECTOR_NONE = 0,   /* no selector, or no List answered yet */
    KCR_SHARD_SELECTOR_SERVER = 1, /* the last List carried shardInfo, or held nothing outside
                                      the selector: the apiserver filters */
    KCR_SHARD_SELECTOR_CLIENT = 2  /* it held objects outside: the reflector filters */
} kcr_shard_selector_mode;

/* Counters, for metrics and tests. */
typedef struct kcr_reflector_stats {
    uint64_t list_requests;  /* LIST requests (pages count one each) */
    uint64_t lists;          /* completed initial states (LIST or streaming) */
    uint64_t watch_requests; /* WATCH requests */
    uint64_t watch_events;   /* ADDED/MODIFIED/DELETED events applied */
    uint64_t bookmarks;      /* BOOKMARK events */
    uint64_t failures;       /* failed list/watch requests (reported to on_error) */
    uint64_t backoffs;       /* backoff waits */
    int64_t last_backoff_ms; /* length of the last backoff wait */
    bool streaming;          /* the last initial state came from a streaming list */
    bool streaming_unsupported; /* fell back to LIST for good */
    kcr_shard_selector_mode shard_mode; /* who applies kcr_reflector_options.shard_selector */
    uint64_t shard_filtered; /* list items and watch events outside the shard selector that
                                the reflector dropped (0 while the server filters) */
} kcr_reflector_stats;

/* Where a reflector puts what it sees (client-go's ReflectorStore). Every
 * callback runs on the reflector's thread with no reflector lock held;
 * objects are borrowed for the call (kcr_object_ref to keep one) and have
 * been through the reflector's transform. A callback's error makes the
 * reflector record the failure, back off and relist. */
typedef struct kcr_reflector_sink {
    /* A watch event: ADDED, MODIFIED, DELETED (its final state). */
    kcr_err (*on_add)(const kcr_object *obj, void *user_data);
    kcr_err (*on_update)(const kcr_object *obj, void *user_data);
    kcr_err (*on_delete)(const kcr_object *obj, void *user_data);
    /* A complete initial state (a LIST, or a streaming list's initial
     * events), replacing everything before it, at `resource_version`
     * (borrowed). objs (n of them) are borrowed for the call. */
    kcr_err (*on_replace)(kcr_object *const *objs, size_t n, const char *resource_version,
                          void *user_data);
    /* A BOOKMARK after the initial state: nothing changed up to
     * `resource_version` (borrowed). NULL: ignored. */
    kcr_err (*on_bookmark)(const char *resource_version, void *user_data);
    void *user_data;
    /* Zero. Fields added after 1.0 take these bytes: the struct is returned by value (kcr_delta_fifo_sink),
     * so its size never changes (docs/abi.md). Not zero: KCR_ERR_INVALID. */
    uint64_t reserved[4];
} kcr_reflector_sink;

/* A sink feeding `fifo` (borrowed: it must outlive the reflector): add,
 * update, delete and replace become kcr_delta_fifo_add/_update/_delete/
 * _replace; bookmarks are ignored. */
KCR_API kcr_reflector_sink kcr_delta_fifo_sink(kcr_delta_fifo *fifo);

/* A reflector for `res` on `client` feeding `sink` (copied; add, update,
 * delete and replace are required). The client and whatever the sink's
 * user_data points to are borrowed until kcr_reflector_free(). opts may be
 * NULL. Not started. */
KCR_API kcr_err kcr_reflector_new(kcr_client *client, const kcr_resource *res,
                                  const kcr_reflector_sink *sink, const kcr_reflector_options *opts,
                                  kcr_reflector **out);

/* Starts the reflector's thread. KCR_ERR_STATE if already started. */
KCR_API kcr_err kcr_reflector_start(kcr_reflector *r);

/* Stops and joins the thread; returns within a second even mid-transfer.
 * Idempotent; the reflector cannot be restarted. */
KCR_API void kcr_reflector_stop(kcr_reflector *r);

/* Stops if needed and frees. NULL is ignored. */
KCR_API void kcr_reflector_free(kcr_reflector *r);

/* The last resourceVersion synced (list, event or bookmark), malloc'd
 * ("" before the first list); NULL on OOM. */
KCR_API char *kcr_reflector_last_sync_rv(kcr_reflector *r);

/* The most recent failure since the last successful list or watch, or KCR_OK.
 * status (may be NULL) receives the server's Status (cleared when none),
 * message (may be NULL) a malloc'd copy of the detail (caller frees). */
KCR_API kcr_err kcr_reflector_last_error(kcr_reflector *r, kcr_status *status, char **message);

/* True once a first initial state (list or streaming) reached the sink. */
KCR_API bool kcr_reflector_has_listed(kcr_reflector *r);

/* Changes the shard selector of a running (or not yet started) reflector:
 * `selector` as kcr_reflector_options.shard_selector (copied; NULL or "":
 * none). The running watch ends. An informer's reflector, from one
 * selection to another on the same field, then lists only the ranges the
 * new selection gains and resumes the watch from where it was, skipping
 * the events that list already holds: the handlers see the objects of
 * ranges given up as on_delete with a tombstone (they left the shard; it
 * holds their last state) and gained ones as on_add; kept ones are neither
 * listed nor delivered again. Where that cannot be done (a reflector on a
 * sink of your own, no selector before or after, the list failing) it
 * relists the whole new selection: the sink gets one replace (kept
 * objects reach only handlers that asked for resyncs, as a resync). An
 * informer from a factory stays under the key of the selector it was made
 * with. Malformed text: KCR_ERR_INVALID, nothing changes. Thread-safe. */
KCR_API kcr_err kcr_reflector_set_shard_selector(kcr_reflector *r, const char *selector);

KCR_API void kcr_reflector_get_stats(size_t out_size, kcr_reflector *r, kcr_reflector_stats *out);
#define kcr_reflector_get_stats(...) (kcr_reflector_get_stats)(sizeof(kcr_reflector_stats), __VA_ARGS__)

/* ---- Shared index informer ----------------------------------------------------------------
 * One reflector + DeltaFIFO + cache (kcr_store) for one resource, with any
 * number of event handlers. Each handler has its own thread and a pending
 * map keyed by object key: when a handler is slow, changes to the same key
 * coalesce, so its memory is bounded by the number of distinct keys and it
 * never stalls the cache or the other handlers (docs/informer.md, "Dispatch").
 * Thread-safety: every function is thread-safe except _free. */

typedef struct kcr_informer kcr_informer;
typedef struct kcr_handler_reg kcr_handler_reg;

/* Which threads run a handler's callbacks (kcr_event_handler.delivery). */
typedef enum kcr_handler_delivery {
    /* The handler's own thread, fed through its coalescing queue: a slow or
     * blocking handler delays neither the cache nor the other handlers. */
    KCR_HANDLER_DELIVERY_THREAD = 0,
    /* The informer's threads, right after the change reached the cache: the
     * thread that applied it (the processing thread, or the reflector's for a
     * watch event that found nothing queued), the reflector's thread for the
     * first list, and the thread calling kcr_informer_add_handler for the replay
     * to a handler added late (before that call returns). One thread
     * hand-off fewer, so lower latency on a busy machine, for handlers that
     * return quickly: while one runs, the informer applies no further change
     * to its cache and queues none for any handler. Such a handler must not
     * block or wait for the informer (kcr_informer_wait_for_sync, _stop).
     * Same ordering, coalescing and has_synced as the default. */
    KCR_HANDLER_DELIVERY_INLINE = 1,
} kcr_handler_delivery;

/* Event callbacks. Each runs on the handler's own thread (by default; see
 * kcr_handler_delivery), one at a time, with no kcr lock held; `key` is the object's store key ("namespace/name", or
 * "name" when cluster-scoped; kcr_store_key), and it and the objects are
 * borrowed for the call (copy the key, kcr_object_ref an object, to keep
 * one). Any of them may be NULL.
 * Coalescing (only when the handler falls behind): `old` of on_update is the
 * state this handler last saw, `new` the current one; an add followed by
 * updates arrives as one on_add of the latest state; anything followed by a
 * delete arrives as one on_delete; a delete then a re-create arrive as
 * on_delete then on_add. */
typedef struct kcr_event_handler {
    /* A new object; is_in_initial_list: from the initial list, or a replay
     * of the cache to a handler added late. */
    void (*on_add)(const char *key, const kcr_object *obj, bool is_in_initial_list,
                   void *user_data);
    /* A changed object, or a resync (old and new with the same resourceVersion). */
    void (*on_update)(const char *key, const kcr_object *old_obj, const kcr_object *new_obj,
                      void *user_data);
    /* A deleted object: `obj` is its final state, or for a deletion missed
     * while not watching, `tombstone` is set and `obj` is its last known
     * state (may be NULL). */
    void (*on_delete)(const char *key, const kcr_object *obj, const kcr_tombstone *tombstone,
                      void *user_data);
    int64_t resync_period_ms; /* 0: no resync; else every cached object is re-sent as an
                                 update (old == new) about this often; above 2^40
                                 (about 35 years): KCR_ERR_INVALID */
    kcr_handler_delivery delivery; /* 0: KCR_HANDLER_DELIVERY_THREAD; not a
                                      kcr_handler_delivery: KCR_ERR_INVALID */
    void *user_data;
} kcr_event_handler;

/* Zero means default for every field. */
typedef struct kcr_informer_options {
    kcr_reflector_options reflector; /* namespace, selectors, list mode, timings, transform
                                        (run after managedFields are dropped), on_error */
    bool keep_managed_fields;        /* false: metadata.managedFields is dropped while decoding
                                        (and stripped before caching) */
    /* Zero. Fields added after 1.0 take these bytes: the struct is nested or
     * sits in arrays, so its size never changes (docs/abi.md). Not zero:
     * KCR_ERR_INVALID. */
    uint64_t reserved[8];
} kcr_informer_options;

/* A new informer for `res`; `client` is borrowed until kcr_informer_free.
 * The cache has the namespace index (KCR_INDEX_NAMESPACE). opts may be NULL. */
KCR_API kcr_err kcr_informer_new(kcr_client *client, const kcr_resource *res,
                                 const kcr_informer_options *opts, kcr_informer **out);

/* Adds a handler (copied) and starts its thread (none for
 * KCR_HANDLER_DELIVERY_INLINE). If the informer already has objects, they
 * are first replayed to it as on_add(key, obj, true). *out (may be
 * NULL) is a handle valid until the informer is freed or the handler removed.
 * On failure no callback ever runs. */
KCR_API kcr_err kcr_informer_add_handler(size_t h_size, kcr_informer *inf,
                                         const kcr_event_handler *h, kcr_handler_reg **out);
#define kcr_informer_add_handler(...) (kcr_informer_add_handler)(sizeof(kcr_event_handler), __VA_ARGS__)

/* Removes a handler: waits for its running callback, drops what is pending,
 * joins its thread, frees reg. Must not be called from that handler's
 * callbacks (KCR_ERR_STATE); an inline handler's callback may remove
 * another handler. A reg not registered on inf (e.g. removed
 * already): KCR_ERR_NOT_FOUND, reg is not read. Fine before start, after
 * kcr_informer_stop and while another thread stops the informer.
 * Thread-safe. */
KCR_API kcr_err kcr_informer_remove_handler(kcr_informer *inf, kcr_handler_reg *reg);

/* True once the informer is synced and this handler has received every
 * notification of the initial list (or of its replay). */
KCR_API bool kcr_handler_has_synced(kcr_handler_reg *reg);

/* Notifications waiting for this handler (distinct keys), and the most ever. */
KCR_API size_t kcr_handler_pending(kcr_handler_reg *reg, size_t *peak);

/* Adds an index to the cache (see kcr_store_add_index); before or after start. */
KCR_API kcr_err kcr_informer_add_index(kcr_informer *inf, const char *name, kcr_index_fn fn,
                                       void *user_data);

/* Starts the reflector, processing and handler threads. KCR_ERR_STATE when
 * already started or stopped. */
KCR_API kcr_err kcr_informer_start(kcr_informer *inf);

/* Stops everything and joins every thread (waiting for running handler
 * callbacks). Idempotent; an informer cannot be restarted. Must not be
 * called from a handler callback. */
KCR_API void kcr_informer_stop(kcr_informer *inf);

/* Stops if needed and frees everything. NULL is ignored. */
KCR_API void kcr_informer_free(kcr_informer *inf);

/* True once the initial list has been applied to the cache and handed to
 * the handlers' queues. */
KCR_API bool kcr_informer_has_synced(kcr_informer *inf);

/* Waits until synced (KCR_OK), stopped (KCR_ERR_SHUTDOWN) or timeout_ms
 * passes (0: check once; KCR_DURATION_INFINITE or above KCR_DURATION_MAX: no
 * limit; another negative value: KCR_ERR_INVALID). Instead of
 * hanging it says why it is not synced: it returns as soon as a list fails
 * with 401, 403, 404 or a TLS verification failure (KCR_ERR_TLS) during the
 * wait
 * (the reflector keeps retrying with backoff: call again to keep waiting),
 * and at the timeout the last list/watch failure if any, else
 * KCR_ERR_TIMEOUT.
 * status (may be NULL) receives the server's Status of that failure;
 * kcr_last_error() has its message. */
KCR_API kcr_err kcr_informer_wait_for_sync(kcr_informer *inf, int64_t timeout_ms,
                                           kcr_status *status);

/* The cache, borrowed for the informer's lifetime: read it with kcr_store_*
 * or kcr_lister_*; never write to it. */
KCR_API kcr_store *kcr_informer_store(kcr_informer *inf);

/* The reflector, borrowed for the informer's lifetime (stats, last error). */
KCR_API kcr_reflector *kcr_informer_reflector(kcr_informer *inf);

/* The last synced resourceVersion, malloc'd ("" before the first list). */
KCR_API char *kcr_informer_last_sync_rv(kcr_informer *inf);

/* ---- Listers ---------------------------------------------------------------------------
 * Reads of a cache (an informer's store or any kcr_store). Thread-safe. */

/* The object ns/name (ns NULL or "" for cluster-scoped), a new reference, or
 * NULL when absent. */
KCR_API kcr_object *kcr_lister_get(kcr_store *s, const char *ns, const char *name);

/* Objects in namespace ns (NULL or "": all) matching the label selector
 * (NULL or "": all), as new references in *out (free with
 * kcr_object_list_free). KCR_ERR_INVALID for a bad selector. */
KCR_API kcr_err kcr_lister_list(kcr_store *s, const char *ns, const char *label_selector,
                                kcr_object_list *out);

/* Objects whose index `index` has `value` (kcr_store_by_index). */
KCR_API kcr_err kcr_lister_by_index(kcr_store *s, const char *index, const char *value,
                                    kcr_object_list *out);

/* ---- Factory -----------------------------------------------------------------------------
 * Shares one informer per resource + namespace + selectors + metadata_only
 * among all its users. Thread-safety: every function is thread-safe except
 * _free. */

typedef struct kcr_informer_factory kcr_informer_factory;

/* A factory over `client` (borrowed until _free). `defaults` (may be NULL;
 * copied, strings too) are the options of informers requested with NULL
 * options. */
KCR_API kcr_err kcr_informer_factory_new(kcr_client *client,
                                         const kcr_informer_options *defaults,
                                         kcr_informer_factory **out);

/* The shared informer for res + opts' namespace, selectors and
 * metadata_only, created on first request (with opts; NULL: the defaults).
 * *out is borrowed until the factory is freed. An informer created after
 * kcr_informer_factory_start() is started at once. After
 * kcr_informer_factory_stop(): KCR_ERR_STATE (a stopped factory is done). */
KCR_API kcr_err kcr_informer_factory_informer(kcr_informer_factory *f, const kcr_resource *res,
                                              const kcr_informer_options *opts,
                                              kcr_informer **out);

/* Starts every informer not yet started. KCR_ERR_STATE after
 * kcr_informer_factory_stop(), as kcr_informer_start after kcr_informer_stop. */
KCR_API kcr_err kcr_informer_factory_start(kcr_informer_factory *f);

/* Waits for every informer to sync, as kcr_informer_wait_for_sync (the
 * timeout is for all of them together); returns the first failure. */
KCR_API kcr_err kcr_informer_factory_wait_for_sync(kcr_informer_factory *f, int64_t timeout_ms,
                                                   kcr_status *status);

/* Stops every informer (joins all threads); the factory then refuses start
 * and new informers. */
KCR_API void kcr_informer_factory_stop(kcr_informer_factory *f);

/* Stops and frees every informer and the factory. NULL is ignored. */
KCR_API void kcr_informer_factory_free(kcr_informer_factory *f);

#ifdef __cplusplus
}
#endif

#endif
