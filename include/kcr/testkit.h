/* Reconciler test kit: unit-test a controller without a cluster.
 *
 * A kcr_testkit runs controllers declared with the very kcr_controller_options
 * a kcr_manager takes, on the in-memory fake API (kcr/fake.h), on the
 * caller's thread only, with a virtual clock: deterministic, no sleeps.
 *
 *   - seed objects from YAML or JSON text;
 *   - run one reconcile of a key, or run until idle: the kit lists every
 *     watched resource from the fake, routes each difference through the
 *     same handlers and predicates as the manager (so reasons, owner and map
 *     routing are what production sees), then reconciles ready keys, highest
 *     priority first, re-syncing the caches after each reconcile;
 *   - requeue-after and retries wait on the virtual clock: kcr_testkit_advance
 *     makes them due without sleeping;
 *   - assert on objects (kcr_testkit_get), on the history of reconciles
 *     (key, reasons, result), on what is queued and when, on events;
 *   - inject errors and conflicts per verb, resource, namespace and name.
 *
 * Caches are refreshed from the fake before every reconcile, so reads in a
 * test are never stale (read-your-writes is tested on the manager); with
 * simulate_workers, before every batch of concurrent reconciles instead.
 *
 * Deadlines run in virtual time: a controller's reconcile_timeout_ms starts
 * with each reconcile, and kcr_testkit_advance called during the reconcile
 * (by the reconcile, or by a kcr_fake hook standing for a slow server) past
 * it triggers the reconcile's cancel token (kcr_ctx_cancel) at once; the
 * reconcile is then counted as a timeout (stats.timeouts, the record's
 * timed_out), as the manager counts it. The kit's client does not attach the
 * token to requests by itself: pass kcr_ctx_cancel(ctx) or check
 * kcr_ctx_canceled(ctx), which work the same under the manager.
 *
 * Concurrency: with simulate_workers, run_until_idle starts up to
 * max_concurrent_reconciles ready keys of a controller together, as its
 * workers would (see kcr_testkit_options); kcr_testkit_check_workers checks
 * the history against the one-key-one-worker and concurrency rules.
 *
 * Thread-safety: none; one thread uses a kit (and nothing else runs). The
 * one exception is the kit's clock (kcr_testkit_clock), which any thread may
 * read, e.g. a workqueue's getter on the kit's virtual time. */
#ifndef KCR_TESTKIT_H
#define KCR_TESTKIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcr/client.h"
#include "kcr/controller.h"
#include "kcr/error.h"
#include "kcr/export.h"
#include "kcr/fake.h"
#include "kcr/object.h"
#include "kcr/time.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kcr_testkit kcr_testkit;

/* Zero means default for every field. */
typedef struct kcr_testkit_options {
    int64_t start_ms;           /* the virtual clock's start (ms since the epoch);
                                   0: 2030-01-01T00:00:00Z */
    const char *ns;      /* the client's default namespace; NULL: "default" */
    const char *event_reporter; /* reporting controller of the recorder; NULL: "testkit" */
    bool simulate_workers;      /* run_until_idle runs batches: the controller with the most
                                   important ready key takes up to max_concurrent_reconciles
                                   ready keys off its queue at once (never one key twice) and
                                   runs each from the batch's virtual start, on the caches as
                                   they were then (one reconcile's writes are not in the
                                   others' caches, as with concurrent workers); the clock then
                                   stands at the latest end and the changes are routed (a
                                   change to a key of the batch queues it for a later one).
                                   false: one key at a time, caches refreshed after each */
} kcr_testkit_options;

/* One reconcile the kit ran (kcr_testkit_history). Strings owned by the kit. */
typedef struct kcr_testkit_record {
    const char *controller;
    const char *key;
    kcr_reason reason;   /* the most important reason */
    uint32_t reasons;    /* KCR_REASON_BIT of every coalesced reason */
    kcr_result result;   /* as returned */
    int64_t at_ms;       /* virtual time it started */
    int64_t end_ms;      /* virtual time it returned (later if it advanced the clock) */
    bool timed_out;      /* it ran to or past reconcile_timeout_ms (its token fired) */
    size_t batch;        /* reconciles with the same batch ran concurrently (simulate_workers);
                            each kcr_testkit_reconcile is a batch of its own */
    int worker;          /* its worker in the batch: 0 .. max_concurrent_reconciles - 1 */
} kcr_testkit_record;

/* A new kit with an empty fake. *out is freed with kcr_testkit_free. */
KCR_API kcr_err kcr_testkit_new(size_t opts_size, const kcr_testkit_options *opts,
                                kcr_testkit **out);
#define kcr_testkit_new(...) (kcr_testkit_new)(sizeof(kcr_testkit_options), __VA_ARGS__)

/* Frees the kit, its controllers, caches and fake. NULL is ignored. */
KCR_API void kcr_testkit_free(kcr_testkit *tk);

/* The fake (to register CRDs, count requests, set hooks), the client the
 * controllers use, and the virtual clock; borrowed until _free. */
KCR_API kcr_fake *kcr_testkit_fake(kcr_testkit *tk);
KCR_API kcr_client *kcr_testkit_client(kcr_testkit *tk);
KCR_API const kcr_clock *kcr_testkit_clock(kcr_testkit *tk);

/* Adds a controller (same contract as kcr_manager_add_controller: every
 * source's kind and scope come from the fake's discovery, a resource the
 * fake does not serve is KCR_ERR_NOT_FOUND naming the controller, the
 * source and how to register it). The caches it needs are listed from the
 * fake at once (an INITIAL_LIST reason for every primary already there); a
 * failing list (e.g. an injected error, or a source declared with kind and
 * scope whose resource is not served yet) returns that error, naming the
 * controller and the source, with the controller added and *out set, as a
 * later kcr_testkit_sync would. *out (may be NULL) is borrowed until _free. */
KCR_API kcr_err kcr_testkit_add_controller(size_t opts_size, kcr_testkit *tk,
                                           const kcr_controller_options *opts, kcr_controller **out);
#define kcr_testkit_add_controller(...) (kcr_testkit_add_controller)(sizeof(kcr_controller_options), __VA_ARGS__)

/* Stores the objects of `text` (copied): one JSON object, or YAML with one
 * or more documents separated by "---". Each needs apiVersion and kind (the
 * resource is found by discovery: register CRDs first) and metadata.name;
 * status is kept. KCR_ERR_PARSE / KCR_ERR_NOT_FOUND saying which document. */
KCR_API kcr_err kcr_testkit_seed(kcr_testkit *tk, const char *text);

/* The object from the fake (not the cache): a new reference, or NULL when
 * absent. */
KCR_API kcr_object *kcr_testkit_get(kcr_testkit *tk, const kcr_resource *res, const char *ns,
                                    const char *name);

/* Refreshes the caches from the fake and routes the differences to the
 * controllers' queues (what an informer would deliver). */
KCR_API kcr_err kcr_testkit_sync(kcr_testkit *tk);

/* Delivers a resync of every cached primary to controllers that declared a
 * resync_period_ms (reason RESYNC, low priority). */
KCR_API kcr_err kcr_testkit_resync(kcr_testkit *tk);

/* Syncs, then reconciles `key` of controller `c` now (reason ENQUEUED plus
 * whatever was queued for it, which this consumes) and applies its result
 * as a worker would. *out (may be NULL) receives the result. This and
 * run_until_idle are KCR_ERR_STATE when called from a reconcile. */
KCR_API kcr_err kcr_testkit_reconcile(kcr_testkit *tk, kcr_controller *c, const char *key,
                                      kcr_result *out);

/* Syncs and reconciles every ready key (highest priority first, then in
 * add order), re-syncing after each (after each batch with
 * simulate_workers), until nothing is ready at the current virtual time.
 * *n (may be NULL) gets how many reconciles ran.
 * KCR_ERR_TIMEOUT after max_reconciles (0: 1000): a controller that never
 * settles. Delayed keys (requeue-after, retries) stay queued. */
KCR_API kcr_err kcr_testkit_run_until_idle(kcr_testkit *tk, size_t max_reconciles, size_t *n);

/* Moves the virtual clock forward by ms (>= 0); keys whose delay expires
 * become ready (run them with kcr_testkit_run_until_idle). May be called
 * from a reconcile (or a fake hook during one) to make it take virtual
 * time: past the reconcile's deadline its cancel token fires. */
KCR_API void kcr_testkit_advance(kcr_testkit *tk, int64_t ms);

/* The virtual time, ms since the epoch. */
KCR_API int64_t kcr_testkit_now_ms(kcr_testkit *tk);

/* Whether `key` is queued for controller c; *delay_ms (may be NULL) gets how
 * long until it is ready (0: ready now), *reasons (may be NULL) its
 * coalesced reason bits. */
KCR_API bool kcr_testkit_queued(kcr_testkit *tk, kcr_controller *c, const char *key,
                                int64_t *delay_ms, uint32_t *reasons);

/* Keys queued for c (ready or delayed). */
KCR_API size_t kcr_testkit_queue_len(kcr_testkit *tk, kcr_controller *c);

/* Reconciles run so far, oldest first; borrowed until the next kit call
 * that reconciles, or _free. */
KCR_API const kcr_testkit_record *kcr_testkit_history(kcr_testkit *tk, size_t *n);

/* Forgets the history. */
KCR_API void kcr_testkit_clear_history(kcr_testkit *tk);

/* Checks the history against the workers' rules: no batch has more
 * reconciles than its controller's max_concurrent_reconciles, and no key is
 * reconciled twice in one batch (one key, one worker). KCR_OK, or
 * KCR_ERR_STATE with kcr_last_error() naming the controller, the key or the
 * count, and the virtual time. */
KCR_API kcr_err kcr_testkit_check_workers(kcr_testkit *tk);

/* Events recorded (events.k8s.io/v1 in the fake) about objects named
 * `regarding_name` (NULL: any) with `reason` (NULL: any). */
KCR_API size_t kcr_testkit_count_events(kcr_testkit *tk, const char *regarding_name,
                                        const char *reason);

/* kcr_fake_inject_error() on the kit's fake: matching requests fail with
 * {code, reason, message}, e.g. 409 "Conflict". */
KCR_API kcr_err kcr_testkit_inject_error(size_t e_size, kcr_testkit *tk, const kcr_fake_error *e);
#define kcr_testkit_inject_error(...) (kcr_testkit_inject_error)(sizeof(kcr_fake_error), __VA_ARGS__)

#ifdef __cplusplus
}
#endif

#endif
