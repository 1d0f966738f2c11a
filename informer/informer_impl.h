/* Private to the shared informer's files: its structures and the calls
 * between them.
 *   informer.c          lifecycle, the processing thread (DeltaFIFO -> cache
 *                       -> handler queues), the resync timer, has_synced
 *   informer_handlers.c handler registration and removal, the per-handler
 *                       coalescing queues and their delivery
 *   informer_sink.c     the reflector's sink (watch events -> DeltaFIFO, the
 *                       first list straight to the cache) and the transform
 * Lock order: DeltaFIFO -> inf->mu -> h->mu. No lock is held while a
 * handler callback runs. */
#ifndef KCR_INFORMER_INFORMER_IMPL_H
#define KCR_INFORMER_INFORMER_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/ptrq.h"
#include "core/strmap.h"
#include "informer/informer_internal.h"
#include "kcr/informer.h"

/* A handler thread is joined exactly once, by kcr_informer_stop or
 * kcr_informer_remove_handler, whichever comes first; the other waits. */
typedef enum kcr__join_state { KCR__JOIN_NONE, KCR__JOIN_RUNNING, KCR__JOIN_DONE } kcr__join_state;

struct kcr_handler_reg {
    kcr_informer *inf;
    kcr_event_handler h;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    struct kcr__strmap pending; /* key -> pending notification */
    struct kcr__ptrq order;     /* pending notifications, oldest first */
    size_t initial_pending;     /* initial adds not yet delivered */
    size_t peak;
    bool stop;
    /* KCR_HANDLER_DELIVERY_INLINE: no thread; one thread at a time (the
     * drainer) delivers the queue, and kcr__handler_stop_join waits for it */
    bool draining;
    pthread_t drainer;
    kcr__join_state joined;
    /* The informer's list holds one reference, kcr_informer_stop one per
     * handler it is stopping: whoever drops the last frees it, so a remove
     * running while stop joins the thread cannot free it under stop. */
    atomic_int refs;
    /* under inf->mu */
    int64_t next_resync_ns;
    bool syncing; /* due at the last resync: gets Sync and unchanged Replaced deltas */
    kcr_handler_reg *next;
    kcr_handler_reg *stop_next; /* kcr_informer_stop's snapshot of the list */
};

struct kcr_informer {
    kcr_client *client;
    char *group, *version, *resource;
    kcr_resource res;
    kcr_store *store;
    kcr_delta_fifo *fifo;
    kcr_reflector *refl;
    kcr_reflector_sink fifo_sink; /* where the informer's sink forwards lists */
    bool keep_managed_fields;
    kcr_object_transform_fn transform;
    void *transform_ud;
    kcr_watch_error_fn on_error;
    void *error_ud;

    pthread_mutex_t mu;
    pthread_cond_t cond;
    kcr_handler_reg *handlers;
    atomic_int n_inline; /* handlers with KCR_HANDLER_DELIVERY_INLINE */
    bool started, stopped, synced;
    bool listed;        /* a complete initial state reached the sink */
    bool applied_first; /* the first list went straight to the cache */
    uint64_t resync_timeouts;
    /* The highest integer resourceVersion applied to the cache (0: none),
     * under mu: unlike the reflector's last synced one, the cache has it. */
    uint64_t applied_rv;
    bool resync_started;
    pthread_t proc;
    pthread_t resync; /* sleeps until the nearest handler resync is due */
};

typedef enum kcr__notif_kind { KCR__N_ADD, KCR__N_UPDATE, KCR__N_DELETE } kcr__notif_kind;

/* Raises inf->applied_rv to `rv` if it is a larger integer (mu held). */
void kcr__informer_note_applied(kcr_informer *inf, const char *rv);

/* ---- informer_handlers.c ---- */

/* Queues (or merges) one change for every handler (only the syncing ones
 * when `sync`). inf->mu held; never waits for a handler. */
void kcr__informer_distribute(kcr_informer *inf, const char *key, kcr__notif_kind kind,
                              const kcr_object *old, const kcr_object *cur,
                              const kcr_tombstone *tomb, bool initial, bool sync);

/* Delivers the queues of the inline handlers (KCR_HANDLER_DELIVERY_INLINE)
 * on the calling thread, one handler at a time, skipping those another
 * thread is delivering. No lock held: called by the processing thread after
 * each pop and by the reflector's thread after the first list and after a
 * change it applied itself (kcr__informer_after_apply). */
void kcr__informer_deliver_inline(kcr_informer *inf);

/* Stops h's delivery and waits until its running callback has returned.
 * Idempotent; safe from several threads at once. */
void kcr__handler_stop_join(kcr_handler_reg *h);

/* Drops one reference to h (see refs); the last frees it. */
void kcr__handler_unref(kcr_handler_reg *h);

/* ---- informer.c ---- */

/* Marks the informer synced once the fifo is and a complete list arrived. */
void kcr__informer_check_synced(kcr_informer *inf);

/* The DeltaFIFO's process function (kcr_delta_fifo_process_fn, user_data:
 * inf): applies a key's deltas to the cache and queues them for the
 * handlers. Runs under the fifo's lock, on the processing thread or on the
 * reflector's (informer_sink.c). */
kcr_err kcr__informer_process(const char *key, const kcr_delta *deltas, size_t n, bool initial,
                              bool *requeue, void *user_data);

/* After a change was applied, outside every lock: delivers the inline
 * handlers' queues and marks the informer synced when it now is. */
void kcr__informer_after_apply(kcr_informer *inf);

/* ---- informer_sink.c ---- */

/* The sink the informer's reflector feeds (user_data: inf). */
kcr_reflector_sink kcr__informer_sink(kcr_informer *inf);

/* The reflector's list reuse hook (kcr__list_reuse_fn, user_data: inf): the
 * cached object of the listed one's key when it has the same uid and
 * resourceVersion. A relist then shares every unchanged object with the
 * cache instead of holding a second copy of it until the replace is
 * applied (a relist peaked at twice the cache), and the user's transform
 * is not run again on it. */
kcr_object *kcr__informer_list_reuse(const kcr_object *listed, void *user_data);

/* The reflector's narrowing hook (kcr__narrow_fn, user_data: inf): queues
 * the deletion of every object `keep` rejects in the DeltaFIFO, behind what
 * is queued for it (kcr__delta_fifo_delete_unless). */
kcr_err kcr__informer_narrow(kcr__keep_fn keep, void *keep_user_data, void *user_data);

/* The reflector transform: strips managedFields (unless kept), then the
 * user's transform. user_data: inf. */
kcr_err kcr__informer_transform(const kcr_object *in, kcr_object **out, void *user_data);

#endif
