/* Controllers and the manager: what controller-runtime gives Go users.
 *
 * A controller reconciles keys ("namespace/name") of one primary resource.
 * It is declared with kcr_controller_options, like controller-runtime's
 * builder: the primary resource (for), resources it owns (their controlling
 * owner is enqueued), resources it watches through a map function, with
 * selectors and predicates per watched resource. The same options and the
 * same reconcile function run on a kcr_manager (threads, informers, leader
 * election) or in the reconciler test kit (kcr/testkit.h: single-threaded,
 * virtual clock, the fake API).
 *
 * The manager owns one shared informer per resource + namespace + selectors
 * (every controller reading the same resource shares its cache), the
 * controllers, optional Lease leader election, a metrics registry, an event
 * recorder and optional SIGINT/SIGTERM handling. Long-form docs:
 * docs/controller.md.
 *
 * Threads: reconcile runs on a controller's worker threads (at most
 * max_concurrent_reconciles at once; never two for the same key); predicates
 * and map functions run on the informers' threads (manager; a handler thread
 * per source with kcr_source.own_thread) or the test kit's caller thread,
 * with a kcr_source_ctx giving them the controller's caches and client.
 * No kcr lock is held while user code runs. */
#ifndef KCR_CONTROLLER_H
#define KCR_CONTROLLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcr/client.h"
#include "kcr/error.h"
#include "kcr/events.h"
#include "kcr/export.h"
#include "kcr/informer.h"
#include "kcr/metrics.h"
#include "kcr/object.h"
#include "kcr/store.h"
#include "kcr/time.h"
#include "kcr/workqueue.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kcr_manager kcr_manager;
typedef struct kcr_controller kcr_controller;
typedef struct kcr_ctx kcr_ctx; /* one reconcile's context */
typedef struct kcr_source_ctx kcr_source_ctx; /* a predicate's or map function's context */

/* ---- Why a reconcile runs ------------------------------------------------------------------
 * Every enqueue carries a reason. While a key waits, its reasons coalesce:
 * the request has the bit of every reason (`reasons`) and the details of
 * the most important one (`trigger`). Importance is the enum's value: a
 * higher value wins, the first of equals is kept. */
typedef enum kcr_reason {
    KCR_REASON_NONE = 0,            /* a re-run caused by a change that arrived while the key
                                       was being reconciled and that this previous reconcile
                                       already saw (its reason was consumed) */
    KCR_REASON_INITIAL_LIST = 1,    /* the object was in the initial list (or cache replay) */
    KCR_REASON_RESYNC = 2,          /* a periodic resync of the primary */
    KCR_REASON_REQUEUE_AFTER = 3,   /* the previous reconcile asked for it (KCR_REQUEUE_AFTER,
                                       or KCR_REQUEUE after the rate limiter's delay) */
    KCR_REASON_RETRY = 4,           /* the previous reconcile failed (rate-limited retry) */
    KCR_REASON_ENQUEUED = 5,        /* kcr_controller_enqueue / kcr_testkit_reconcile */
    KCR_REASON_MAPPED = 6,          /* a watched object changed; a map function chose this key */
    KCR_REASON_OWNED = 7,           /* an owned object whose controller is this key changed */
    KCR_REASON_PRIMARY_ADDED = 8,   /* the primary object appeared */
    KCR_REASON_PRIMARY_UPDATED = 9, /* the primary object changed */
    KCR_REASON_PRIMARY_DELETED = 10 /* the primary object is gone (the cache no longer has it) */
} kcr_reason;

/* The bit of a reason in kcr_reconcile_request.reasons. */
#define KCR_REASON_BIT(r) (UINT32_C(1) << (r))

/* Static name of a reason ("PrimaryUpdated", "Owned" ...); never NULL. */
KCR_API const char *kcr_reason_name(kcr_reason reason);

/* A change of a watched object as routed to a controller. */
typedef enum kcr_change {
    KCR_CHANGE_ADDED = 1,
    KCR_CHANGE_UPDATED = 2, /* includes resyncs (old and new with the same resourceVersion) */
    KCR_CHANGE_DELETED = 3
} kcr_change;

/* The most important reason and the object whose change caused it. For
 * OWNED and MAPPED: the kind, namespace and name of the watched object and
 * how it changed; for the PRIMARY_* reasons, INITIAL_LIST and RESYNC: the
 * object itself; "" and 0 for the others. Strings borrowed for the
 * reconcile call. */
typedef struct kcr_trigger {
    kcr_reason reason;
    kcr_change change;
    const char *kind;
    const char *ns;
    const char *name;
} kcr_trigger;

/* What to reconcile. Everything is borrowed for the reconcile call. */
typedef struct kcr_reconcile_request {
    const char *ns; /* "" for a cluster-scoped primary */
    const char *name;
    const char *key;       /* "namespace/name" or "name" */
    kcr_trigger trigger;   /* the most important reason (see kcr_reason) */
    uint32_t reasons;      /* KCR_REASON_BIT of every coalesced reason */
    int retries;           /* rate-limited requeues (RETRY, REQUEUE) of this key since its
                              backoff was last forgotten (DONE, REQUEUE_AFTER, TERMINAL) */
} kcr_reconcile_request;

/* ---- Results --------------------------------------------------------------------------------- */

typedef enum kcr_result_kind {
    KCR_RESULT_DONE = 0,          /* success: the key's backoff is forgotten */
    KCR_RESULT_REQUEUE_AFTER = 1, /* success, reconcile again after requeue_after_ms (> 0) */
    KCR_RESULT_RETRY = 2,         /* an error: retry after the rate limiter's backoff */
    KCR_RESULT_TERMINAL = 3,      /* an error that retrying cannot fix: no requeue, counted */
    KCR_RESULT_REQUEUE = 4        /* not an error, but not done: reconcile again after the rate
                                     limiter's delay (which keeps growing, as for RETRY);
                                     controller-runtime's Result{Requeue: true} */
} kcr_result_kind;

/* A reconcile's outcome. `err` (optional) says what failed for RETRY and
 * TERMINAL (kcr_err_is_permanent(err) says which fits a failed call:
 * TERMINAL for a refused request, 400 or 422, RETRY otherwise); the worker logs it with kcr_last_error() of the worker thread
 * as the reconcile left it. A kind outside the enum or a REQUEUE_AFTER with
 * requeue_after_ms <= 0 is a garbage result: logged once per controller,
 * counted (stats.garbage_results, reconcile_errors_total) and handled as
 * RETRY, so it can never loop hot. */
typedef struct kcr_result {
    kcr_result_kind kind;
    int64_t requeue_after_ms;
    kcr_err err;
} kcr_result;

/* The results, as C compound literals or (in C++) temporaries. */
#ifdef __cplusplus
#define KCR__RESULT(kind, ms, e) (kcr_result{(kind), (ms), (e)})
#else
#define KCR__RESULT(kind, ms, e) ((kcr_result){(kind), (ms), (e)})
#endif
#define KCR_DONE KCR__RESULT(KCR_RESULT_DONE, 0, KCR_OK)
#define KCR_REQUEUE_AFTER(ms) KCR__RESULT(KCR_RESULT_REQUEUE_AFTER, (ms), KCR_OK)
#define KCR_RETRY(e) KCR__RESULT(KCR_RESULT_RETRY, 0, (e))
#define KCR_TERMINAL(e) KCR__RESULT(KCR_RESULT_TERMINAL, 0, (e))
#define KCR_REQUEUE KCR__RESULT(KCR_RESULT_REQUEUE, 0, KCR_OK)

/* The result a reconcile returns for a failed call: KCR_DONE for KCR_OK,
 * KCR_TERMINAL(err) when kcr_err_is_permanent(err) (a refused request: 400,
 * 422, a bad argument ...), KCR_RETRY(err) otherwise (conflicts, 5xx,
 * timeouts ...). kcr_last_error() is left as the call set it, so the worker
 * logs the call's message. Thread-safe. */
KCR_API kcr_result kcr_result_of(kcr_err err);

/* In a reconcile: evaluates `expr` (a kcr_err) once and, when it is not
 * KCR_OK, returns kcr_result_of() of it from the reconcile. The kcr helpers
 * name what failed in kcr_last_error() (e.g. "create ResourceQuota
 * team-a/team-quota: <server's message>"), which the worker logs:
 *     KCR_TRY(kcr_ctrlutil_create_or_update(kcr_ctx_client(ctx), &opts, NULL));
 *     return KCR_DONE; */
#define KCR_TRY(expr)                                                                              \
    do {                                                                                           \
        kcr_err kcr__try_err = (expr);                                                             \
        if (kcr__try_err != KCR_OK)                                                                \
            return kcr_result_of(kcr__try_err);                                                    \
    } while (0)

/* The reconcile callback. Runs on a worker thread (manager) or the test
 * kit's caller thread, with no kcr lock held; `ctx` and `req` are borrowed
 * for the call. Never called for the same key twice at once. */
typedef kcr_result (*kcr_reconcile_fn)(kcr_ctx *ctx, const kcr_reconcile_request *req,
                                       void *user_data);

/* ---- Source context ----------------------------------------------------------------------------
 * What a custom predicate and a map function get besides the change: the
 * controller's caches and client, the same under the manager and in the
 * test kit, so a map function that lists from a cache is written once.
 * Valid only during the call it was passed to, on that call's thread: an
 * informer's thread (the manager, own_thread false), the source's handler
 * thread (own_thread true) or the test kit's caller thread. */

/* The controller whose source this is. */
KCR_API kcr_controller *kcr_source_ctx_controller(kcr_source_ctx *ctx);

/* The cache of a resource the controller watches (the first of its sources
 * with that group/version/resource, version NULL: any; NULL when none).
 * Borrowed; read it with kcr_lister_* / kcr_store_* (thread-safe), never
 * write to it. It holds what its informer has delivered so far, which may
 * lag the change being routed (another resource's cache may not even be
 * synced yet under the manager: the informers start independently). */
KCR_API kcr_store *kcr_source_ctx_cache(kcr_source_ctx *ctx, const kcr_resource *res);

/* The manager's (or test kit's) client, borrowed. Its requests block: make
 * them only from a source with own_thread (an informer's thread must not
 * wait on the network). */
KCR_API kcr_client *kcr_source_ctx_client(kcr_source_ctx *ctx);

/* The time now, ms since the epoch, on the manager's clock (the test kit's
 * virtual clock). */
KCR_API int64_t kcr_source_ctx_now_ms(kcr_source_ctx *ctx);

/* ---- Predicates -------------------------------------------------------------------------------
 * A predicate decides whether a change of a watched object is routed to the
 * controller. Like controller-runtime's, the "changed" predicates filter
 * updates only (adds and deletes pass); the label selector filters all.
 * A predicate is immutable and owned by whoever holds it: the combinators
 * and kcr_controller_options take ownership of the predicates given to them
 * (also when they fail), so each predicate may be given once.
 * Constructors return NULL on failure (kcr_last_error() says why).
 * Thread-safe: evaluated concurrently from informer threads. */
typedef struct kcr_predicate kcr_predicate;

/* One change of a watched object, as a predicate sees it. Borrowed for the call. */
typedef struct kcr_object_change {
    kcr_change change;
    const kcr_object *old_obj; /* the previous state for updates; NULL otherwise */
    const kcr_object *obj;     /* the object; for deletes its last known state, NULL when a
                                  missed deletion left nothing */
} kcr_object_change;

/* A custom predicate: set *pass and return KCR_OK; any other return is a
 * failing predicate: logged once per predicate, counted
 * (stats.predicate_errors) and the change PASSES (a spurious reconcile is
 * harmless, a missed one is not). `ctx` (see kcr_source_ctx; NULL from
 * kcr_predicate_eval without one) and `change` are borrowed for the call;
 * runs on an informer's thread (see kcr_source.own_thread) with no kcr lock
 * held, so it must return quickly. */
typedef kcr_err (*kcr_predicate_fn)(kcr_source_ctx *ctx, const kcr_object_change *change,
                                    bool *pass, void *user_data);

/* Updates pass when metadata.generation changed (spec changes, not status). */
KCR_API kcr_predicate *kcr_predicate_generation_changed(void);
/* Updates pass when metadata.resourceVersion changed (drops resyncs). */
KCR_API kcr_predicate *kcr_predicate_resource_version_changed(void);
/* Updates pass when metadata.labels changed. */
KCR_API kcr_predicate *kcr_predicate_labels_changed(void);
/* Updates pass when metadata.annotations changed. */
KCR_API kcr_predicate *kcr_predicate_annotations_changed(void);
/* Updates pass when metadata.finalizers changed. */
KCR_API kcr_predicate *kcr_predicate_finalizers_changed(void);
/* Every change of an object matching the label selector (copied; NULL on a
 * bad selector, KCR_ERR_INVALID). For updates the new object decides. */
KCR_API kcr_predicate *kcr_predicate_label_selector(const char *selector);
/* fn(user_data); user_data is borrowed until the predicate is freed. */
KCR_API kcr_predicate *kcr_predicate_custom(kcr_predicate_fn fn, void *user_data);
/* Combinators; take ownership of their operands. */
KCR_API kcr_predicate *kcr_predicate_and(kcr_predicate *a, kcr_predicate *b);
KCR_API kcr_predicate *kcr_predicate_or(kcr_predicate *a, kcr_predicate *b);
KCR_API kcr_predicate *kcr_predicate_not(kcr_predicate *p);
/* Frees a predicate (and its operands). NULL is ignored. */
KCR_API void kcr_predicate_free(kcr_predicate *p);
/* Evaluates p (NULL passes everything) on `change` as the controller does,
 * custom predicates getting `ctx` (may be NULL); *failed (may be NULL) is
 * set when a custom predicate failed. For tests. Thread-safe. */
KCR_API bool kcr_predicate_eval(const kcr_predicate *p, kcr_source_ctx *ctx,
                                const kcr_object_change *change, bool *failed);

/* ---- Map functions ---------------------------------------------------------------------------- */

/* Where a map function puts keys. */
typedef struct kcr_map_out kcr_map_out;

/* Adds the key ns/name (copied; ns NULL or "" for a cluster-scoped primary).
 * Call it only from the map function it was given to, during that call.
 * An invalid key (empty or over-long name, a '/' in either part, a namespace
 * for a cluster-scoped primary or none for a namespaced one) is dropped,
 * logged once per source and counted (stats.invalid_keys); KCR_ERR_INVALID. */
KCR_API kcr_err kcr_map_emit(kcr_map_out *out, const char *ns, const char *name);

/* Maps a changed watched object to primary keys through kcr_map_emit. `ctx`
 * (the controller's caches and client, see kcr_source_ctx) and `obj` are
 * borrowed for the call (obj: for deletes the last known state, never NULL).
 * A non-KCR_OK return is logged once per source and counted; keys emitted
 * before it are still enqueued. Runs on the informer's thread (a handler
 * thread of its own with kcr_source.own_thread; the test kit's thread in the
 * test kit), no kcr lock held: it must not block unless own_thread. */
typedef kcr_err (*kcr_map_fn)(kcr_source_ctx *ctx, const kcr_object *obj, kcr_map_out *out,
                              void *user_data);

/* ---- Controller declaration ------------------------------------------------------------------ */

/* A resource's scope, as a source declares it. */
typedef enum kcr_scope {
    KCR_SCOPE_DISCOVERED = 0, /* not declared: discovery says */
    KCR_SCOPE_NAMESPACED = 1,
    KCR_SCOPE_CLUSTER = 2
} kcr_scope;

/* One watched resource. Zero means default; strings are copied.
 * Adding the controller asks discovery for every source's kind and scope
 * (the primary's kind matches owner references, its scope validates every
 * key). A declared kind or scope that discovery contradicts is refused
 * (KCR_ERR_INVALID naming the source); a resource discovery does not know
 * is KCR_ERR_NOT_FOUND naming the controller, the source and the resource,
 * unless the source declares its scope (and, for the primary, its kind):
 * then the declaration is trusted and a warning logged, so a controller
 * can start before its CustomResourceDefinition is installed. */
typedef struct kcr_source {
    kcr_resource resource;      /* required */
    const char *kind;           /* the resource's kind ("ConfigMap"); NULL: discovery's */
    kcr_scope scope;            /* the resource's scope; 0: discovery's */
    const char *ns;             /* NULL or "": all namespaces */
    const char *label_selector; /* NULL: everything */
    const char *field_selector; /* NULL: everything */
    bool metadata_only;         /* cache PartialObjectMetadata only (smaller) */
    bool own_thread;            /* false: the predicate and map function run on the shared
                                   informer's own thread (no hand-off: lower latency), so
                                   they must return quickly and never block; true: on a
                                   handler thread of this source's own (a slow one delays
                                   nothing else) */
    kcr_predicate *predicate;   /* NULL: every change; ownership taken */
    kcr_map_fn map;             /* watches[] only (required there) */
    void *map_user_data;        /* borrowed until the manager/test kit is freed */
    /* Zero. Fields added after 1.0 take these bytes: the struct is nested or
     * sits in arrays, so its size never changes (docs/abi.md). Not zero:
     * KCR_ERR_INVALID. */
    uint64_t reserved[8];
} kcr_source;

/* An index to add to a cache the controller reads (see kcr_store_add_index). */
typedef struct kcr_cache_index {
    kcr_resource resource; /* one of the controller's sources (the first with it) */
    const char *name;      /* copied */
    kcr_index_fn fn;
    void *user_data;       /* borrowed until the manager/test kit is freed */
    /* Zero. Fields added after 1.0 take these bytes: the struct is nested or
     * sits in arrays, so its size never changes (docs/abi.md). Not zero:
     * KCR_ERR_INVALID. */
    uint64_t reserved[4];
} kcr_cache_index;

/* A controller's declaration. Zero means default; everything is copied
 * except user_data pointers (borrowed) and the predicates and rate limiter
 * (ownership taken by kcr_manager_add_controller / kcr_testkit_add_controller,
 * also when they fail). Durations follow kcr/time.h: another negative value,
 * or one above KCR_DURATION_MAX, is refused with KCR_ERR_INVALID. */
typedef struct kcr_controller_options {
    const char *name;               /* required, unique per manager: metrics label, logs, events */
    kcr_source primary;             /* for(): the reconciled resource (required) */
    const kcr_source *owns;         /* owns(): their controlling owner of the primary's group
                                       and kind is enqueued */
    size_t n_owns;
    const kcr_source *watches;      /* watches(): `map` picks the keys */
    size_t n_watches;
    const kcr_cache_index *indexes; /* extra cache indexes */
    size_t n_indexes;
    int max_concurrent_reconciles;  /* 0: 1 */
    kcr_rate_limiter *rate_limiter; /* NULL: kcr_rate_limiter_default_new() (client-go's) */
    int64_t reconcile_timeout_ms;   /* per-reconcile deadline (ctx cancel triggers); 0 or
                                       KCR_DURATION_INFINITE: none */
    int64_t resync_period_ms;       /* primary resync (reason RESYNC, low priority); 0 or
                                       KCR_DURATION_INFINITE: none */
    bool no_read_your_writes;       /* true: skip the wait for the cache to see the writes of
                                       the previous reconcile of the key (see kcr_ctx_client) */
    int64_t read_your_writes_timeout_ms; /* bound of that wait; 0: 5000 */
    kcr_reconcile_fn reconcile;     /* required */
    void *user_data;                /* passed to reconcile; borrowed */
    bool unsharded;                 /* on a sharded manager (kcr_manager_options.sharding):
                                       this controller reconciles every key on every replica
                                       (no admission, full caches); ignored when unsharded */
} kcr_controller_options;

/* Counters of one controller (kcr_controller_get_stats). */
typedef struct kcr_controller_stats {
    uint64_t reconciles;         /* reconcile calls */
    uint64_t successes;          /* DONE */
    uint64_t requeue_afters;     /* REQUEUE_AFTER */
    uint64_t requeues;           /* REQUEUE */
    uint64_t errors;             /* RETRY (and garbage results) */
    uint64_t terminal_errors;    /* TERMINAL */
    uint64_t timeouts;           /* reconciles that ran past reconcile_timeout_ms */
    uint64_t garbage_results;    /* results outside the contract */
    uint64_t predicate_errors;   /* custom predicates that failed */
    uint64_t map_errors;         /* map functions that failed */
    uint64_t invalid_keys;       /* keys refused (map functions, owner references) */
    uint64_t enqueues;           /* keys enqueued by changes (before dedup), counted once added */
    uint64_t filtered;           /* changes dropped by predicates */
    uint64_t ryw_waits;          /* reconciles that waited for the cache to see a write */
    uint64_t ryw_timeouts;       /* of those, waits that gave up at the bound */
    int64_t active_workers;      /* reconciles running now */
} kcr_controller_stats;

/* Counters so far. Thread-safe. */
KCR_API void kcr_controller_get_stats(size_t out_size, kcr_controller *c, kcr_controller_stats *out);
#define kcr_controller_get_stats(...) (kcr_controller_get_stats)(sizeof(kcr_controller_stats), __VA_ARGS__)

/* The controller's name, owned by it. Thread-safe. */
KCR_API const char *kcr_controller_name(const kcr_controller *c);

/* Enqueues ns/name (copied) with reason ENQUEUED at normal priority.
 * KCR_ERR_INVALID for a bad key, KCR_ERR_SHUTDOWN when stopping. Thread-safe. */
KCR_API kcr_err kcr_controller_enqueue(kcr_controller *c, const char *ns, const char *name);

/* ---- Reconcile context --------------------------------------------------------------------------
 * Valid only during the reconcile call it was passed to; accessors are
 * meant for that call's thread. */

/* A client for the reconcile's writes (borrowed for the call): the
 * manager's (or test kit's) client, wrapped so that the resourceVersion R
 * of every object written through it (create, update, patch, status) in a
 * cached resource is remembered for this key; the next reconcile of the key
 * first waits until those caches have seen R (bounded by
 * read_your_writes_timeout_ms, then it proceeds and counts it), so it never
 * acts on its own stale read. Compares resourceVersions as integers, which
 * holds for etcd-backed servers (the RV is etcd's revision): document your
 * aggregated API server's behaviour if it differs. Every request made
 * through it (get, create, update, status, patch, delete, list, watch, raw)
 * without a cancel token of its own uses the reconcile's (kcr_ctx_cancel),
 * so a reconcile past its deadline or a lost lease stops its writes. */
KCR_API kcr_client *kcr_ctx_client(kcr_ctx *ctx);

/* The cache of a resource the controller watches (the first source with
 * that group/version/resource; NULL when none). Borrowed; read it with
 * kcr_lister_* / kcr_store_*, never write to it. */
KCR_API kcr_store *kcr_ctx_cache(kcr_ctx *ctx, const kcr_resource *res);

/* The primary object of this request from the cache (a new reference the
 * caller unrefs), or NULL when the cache does not have it (deleted). */
KCR_API kcr_object *kcr_ctx_get_primary(kcr_ctx *ctx);

/* The event recorder (borrowed), or NULL when the manager has none. */
KCR_API kcr_event_recorder *kcr_ctx_recorder(kcr_ctx *ctx);

/* Records an event about `regarding` (borrowed), note printf-style, through
 * the recorder (no-op without one). Never blocks on the server. */
KCR_API void kcr_ctx_eventf(kcr_ctx *ctx, const kcr_object *regarding, kcr_event_type type,
                            const char *reason, const char *note_fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

/* The cancellation token of this reconcile (borrowed): triggered at the
 * reconcile deadline, on shutdown past the graceful timeout, and on
 * leadership loss. Pass it to long requests; check it in loops. */
KCR_API kcr_cancel *kcr_ctx_cancel(kcr_ctx *ctx);

/* True once the token is triggered: return promptly (RETRY is fine). */
KCR_API bool kcr_ctx_canceled(kcr_ctx *ctx);

/* The time now, in ms since the Unix epoch, on the manager's clock (the
 * test kit's virtual clock in tests): use it instead of time(). */
KCR_API int64_t kcr_ctx_now_ms(kcr_ctx *ctx);

/* The controller running this reconcile. */
KCR_API kcr_controller *kcr_ctx_controller(kcr_ctx *ctx);

/* The shard a reconcile runs on (docs/sharding.md): the ring, this
 * replica's identity and its slot in the ring. */
typedef struct kcr_shard_member_info {
    const char *ring;
    const char *identity;
    int slot; /* -1 while it holds none */
} kcr_shard_member_info;

/* The shard this reconcile runs on, borrowed for the call; NULL when the
 * controller is not sharded (no kcr_manager_options.sharding, an
 * unsharded controller, or the test kit). */
KCR_API const kcr_shard_member_info *kcr_ctx_shard(kcr_ctx *ctx);

/* ---- Manager ---------------------------------------------------------------------------------- */

/* How a sharded controller's cache follows its shard (docs/sharding.md). */
typedef enum kcr_shard_mode {
    KCR_SHARD_FILTER = 0, /* full list+watch; a replica reconciles only keys it admits */
    KCR_SHARD_SERVER = 1, /* the primary's list+watch carries a shardSelector of the ranges the
                             replica admits, claims or drains; falls back to filtering on the
                             client when the server ignores it (no shardInfo) */
    KCR_SHARD_LABEL = 2   /* objects carry a shard label naming their replica, written by the
                             ring's coordinator (one replica, under a Lease of its own); each
                             replica's primary cache watches only its label; an object moves
                             through a drain label its old owner acknowledges */
} kcr_shard_mode;

/* Which label keys KCR_SHARD_LABEL writes and watches (docs/sharding.md). */
typedef enum kcr_shard_label_keys {
    KCR_SHARD_LABELS_KCR = 0,      /* shard.kcr.dev/<ring>, drain.kcr.dev/<ring> */
    KCR_SHARD_LABELS_TIMEBERTT = 1 /* shard.alpha.sharding.timebertt.dev/<ring>,
                                      drain.alpha.sharding.timebertt.dev/<ring>: the keys of
                                      timebertt's kubernetes-controller-sharding */
} kcr_shard_label_keys;

/* Sharding a manager's controllers over its replicas: one ring per manager,
 * one coordination.k8s.io/v1 Lease per replica (docs/sharding.md). Reached
 * through kcr_manager_options.sharding, which the manager copies (strings
 * included). */
typedef struct kcr_sharding_options {
    kcr_shard_mode mode;
    kcr_shard_field field;        /* KCR_SHARD_BY_UID (default) or BY_NAMESPACE */
    const char *ring;             /* NULL: the manager's name */
    const char *identity;         /* NULL: $POD_NAME, else the hostname */
    const char *lease_namespace;  /* NULL: the client's namespace */
    int64_t lease_duration_ms;    /* 0: 15000 */
    int64_t renew_deadline_ms;    /* 0: 10000 */
    int64_t retry_period_ms;      /* 0: 2000 */
    int64_t skew_margin_ms;       /* 0: 2000; the clock-skew bound the guarantee assumes */
    kcr_shard_label_keys label_keys; /* KCR_SHARD_LABEL only; 0: kcr's own keys */
    /* true: the owned caches of sharded controllers (a ring by uid) list
     * and watch with the label selector `kcr.dev/shard-bucket in (...)` of
     * the buckets their ranges touch (KCR_SHARD_BUCKET_LABEL, kcr/shard.h),
     * so the apiserver sends each replica only its owners' children. Set
     * it once every child carries that label (the controller-reference
     * helpers of kcr/controllerutil.h stamp it): an unlabelled child
     * reaches no replica until a write through them labels it
     * (docs/sharding.md, "Bucket labels"). false: every replica receives
     * every child and keeps those of its own keys. Ignored on a ring by
     * namespace (the apiserver filters namespaces already). */
    bool child_bucket_selector;
    uint8_t reserved_u8[3]; /* zero (the rest of the reserved slot label_keys took) */
    /* 0: a replica that stops cleanly releases its place in the ring and
     * the others take its keys within a retry period. > 0: it keeps its
     * place for max(lease duration, this) + skew_margin_ms, its keys
     * waiting, unowned, for the next process with its identity, which
     * takes them back at once: a rolling restart of a StatefulSet moves no
     * key. A replica that does not come back loses them after that
     * (docs/sharding.md, "Leaving"). */
    int64_t restart_grace_ms;
    /* Zero. Fields added later take these bytes: the struct is reached
     * through options, so its size never changes (docs/abi.md). Not zero:
     * KCR_ERR_INVALID. */
    uint64_t reserved[2];
} kcr_sharding_options;

/* Zero means default for every field; strings are copied. A graceful
 * shutdown timeout above 2^40 ms (about 35 years) is refused with
 * KCR_ERR_INVALID. */
typedef struct kcr_manager_options {
    const char *name;                   /* reporting controller of events, lease identity
                                           prefix in logs; NULL: "kcr-manager" */
    bool leader_election;               /* run workers only while holding a Lease */
    const char *leader_election_namespace; /* NULL: the client's namespace */
    const char *leader_election_id;     /* the Lease's name; required with leader_election */
    const char *leader_election_identity; /* NULL: "<hostname>_<uuid>" */
    int64_t lease_duration_ms;          /* 0: 15000 */
    int64_t renew_deadline_ms;          /* 0: 10000 */
    int64_t retry_period_ms;            /* 0: 2000 */
    bool no_warm_standby;               /* true: non-leaders do not start caches (default: every
                                           replica syncs its caches, only the leader reconciles) */
    int64_t graceful_shutdown_timeout_ms; /* drain in-flight reconciles this long on stop, then
                                           cancel them; 0: 30000; KCR_DURATION_ZERO: cancel at
                                           once; KCR_DURATION_INFINITE: wait for them all */
    bool handle_signals;                /* kcr_manager_run installs SIGINT/SIGTERM handlers: the
                                           first stops gracefully, a second exits at once
                                           (_exit(1)); the previous handlers are restored */
    const kcr_informer_options *cache_defaults; /* informer options for every cache (copied;
                                           transform, timings, shard_selector); sources
                                           override namespace,
                                           selectors and metadata_only */
    kcr_metrics *metrics;               /* borrowed; NULL: the manager makes its own. The
                                           manager adds a collector to it: do not scrape it
                                           after kcr_manager_free */
    bool no_events;                     /* true: no event recorder (kcr_ctx_recorder NULL) */
    const kcr_clock *clock;             /* events and kcr_ctx_now_ms; NULL: real */
    const kcr_sharding_options *sharding; /* NULL: unsharded. Copied. Every replica with the
                                           same ring reconciles its share of the keys of each
                                           controller (except kcr_controller_options.unsharded
                                           ones); exclusive with leader_election */
} kcr_manager_options;

/* A manager using `client` (borrowed until kcr_manager_free: the manager
 * installs its request observer for rest_client_requests_total). Creates the
 * informer factory, the metrics registry (unless given) and the event
 * recorder; starts nothing. Thread-safety of the manager: every function is
 * thread-safe except _free. */
KCR_API kcr_err kcr_manager_new(size_t opts_size, kcr_client *client,
                                const kcr_manager_options *opts, kcr_manager **out);
#define kcr_manager_new(...) (kcr_manager_new)(sizeof(kcr_manager_options), __VA_ARGS__)

/* Adds a controller declared by `opts` (see kcr_controller_options for
 * what is copied and taken). Before kcr_manager_run only (KCR_ERR_STATE
 * after). KCR_ERR_EXISTS for a duplicate name; KCR_ERR_INVALID naming the
 * missing or bad field, or a source whose declared kind or scope discovery
 * contradicts; KCR_ERR_NOT_FOUND when discovery does not know a source's
 * resource (see kcr_source); KCR_ERR_CANCELED when kcr_manager_stop
 * was called before or during that discovery (stop cancels its requests,
 * so a hung server cannot hold this call). *out (may be NULL) is borrowed until
 * kcr_manager_free. */
KCR_API kcr_err kcr_manager_add_controller(size_t opts_size, kcr_manager *m,
                                           const kcr_controller_options *opts, kcr_controller **out);
#define kcr_manager_add_controller(...) (kcr_manager_add_controller)(sizeof(kcr_controller_options), __VA_ARGS__)

/* Runs until kcr_manager_stop, a signal (handle_signals) or leadership loss:
 * starts the caches (every replica unless no_warm_standby), leader election
 * (if enabled) and, once leading (or at once) and each controller's caches
 * are synced, its workers. Then shuts down in this order: stop taking keys,
 * drain in-flight reconciles (graceful_shutdown_timeout_ms, then cancel
 * them), release the lease, stop the caches. Returns KCR_OK after a stop or
 * signal, KCR_ERR_LEADERSHIP_LOST when the lease was lost (every reconcile
 * was stopped first), KCR_ERR_EXISTS when sharded and another live
 * instance holds this replica's shard identity (the message names it), or
 * the error that kept it from starting. Sharded, a stop first stops
 * admitting keys, drains, releases the shard Lease, then stops the caches.
 * Once only (KCR_ERR_STATE again). */
KCR_API kcr_err kcr_manager_run(kcr_manager *m);

/* Asks a running (or about to run) manager to stop gracefully: from its
 * return on, no reconcile starts; those running drain as kcr_manager_run
 * says. Thread-safe and async-signal-safe. */
KCR_API void kcr_manager_stop(kcr_manager *m);

/* Stops if needed and frees everything, controllers included. NULL is
 * ignored. Must not run while kcr_manager_run does. */
KCR_API void kcr_manager_free(kcr_manager *m);

/* The client, metrics registry, event recorder (NULL with no_events) and
 * informer factory, borrowed until kcr_manager_free. */
KCR_API kcr_client *kcr_manager_client(kcr_manager *m);
KCR_API kcr_metrics *kcr_manager_metrics(kcr_manager *m);
KCR_API kcr_event_recorder *kcr_manager_recorder(kcr_manager *m);
KCR_API kcr_informer_factory *kcr_manager_factory(kcr_manager *m);

/* True while this replica runs workers (the leader, or always without
 * leader election). */
KCR_API bool kcr_manager_is_leader(kcr_manager *m);

/* Readiness, shaped as a kcr_health_check_fn (user_data = the manager):
 * KCR_OK once every cache is synced and the manager is running (leader or
 * warm standby); otherwise an error and *message (malloc'd) naming the
 * cache that is not synced and why, with the server's message for a failing
 * list/watch (e.g. "configmaps: 403 Forbidden: ..." or a 404 for a resource
 * the server does not have). Thread-safe. */
KCR_API kcr_err kcr_manager_readyz_check(char **message, void *manager);

/* Whether the manager is sharded (kcr_manager_options.sharding); if so and
 * out is not NULL, *out gets its ring and identity (borrowed until
 * kcr_manager_free) and its slot now (-1 before it joined). Thread-safe. */
KCR_API bool kcr_manager_shard_info(kcr_manager *m, kcr_shard_member_info *out);

/* The shard's readiness (kcr_health_check_fn, user_data = the manager):
 * KCR_OK once the replica is an active member of its ring (and for an
 * unsharded manager); *message (malloc'd; set either way for a sharded
 * manager) names the ring, identity, state, slot and admitted ranges, and
 * says when the apiserver ignored the shard selector (server mode fell back
 * to filtering), a clock skewed past the margin, a malformed Lease of the
 * ring or a refusal. kcr_manager_serve_http adds it as the check "shard".
 * Thread-safe. */
KCR_API kcr_err kcr_manager_shard_readyz_check(char **message, void *manager);

/* Liveness (kcr_health_check_fn): KCR_OK unless the manager is stopping
 * after leadership loss or its workers were cancelled at a shutdown
 * deadline. Thread-safe. */
KCR_API kcr_err kcr_manager_healthz_check(char **message, void *manager);

#ifdef __cplusplus
}
#endif

#endif
