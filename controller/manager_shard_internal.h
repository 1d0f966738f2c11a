/* Internal: the manager's shard member, shared by manager_shard.c (the
 * member's threads, admission, metrics, readiness) and manager_shard_label.c
 * (label mode: the label thread, drain acknowledgements, the coordinator).
 * Everything in mgr_shard below `lock` is guarded by it. */
#ifndef KCR_CONTROLLER_MANAGER_SHARD_INTERNAL_H
#define KCR_CONTROLLER_MANAGER_SHARD_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "controller/manager_internal.h"
#include "object/ranges.h"
#include "shard/lease_store.h"
#include "shard/member.h"

typedef struct shard_labels shard_labels;

typedef enum call_state { CALL_IDLE, CALL_PENDING, CALL_RUNNING, CALL_DONE } call_state;
typedef enum call_op { OP_LIST, OP_PUT } call_op;

struct mgr_shard {
    kcr_manager *m;
    kcr_shard_mode mode;
    kcr_shard_field field;
    char *ring, *identity, *ns, *instance;
    int64_t lease_ms, renew_ms, retry_ms, margin_ms;
    int64_t anchor_wall_ms, anchor_mono_ns; /* the member's clock */
    char *initial_selector;                  /* server mode */
    kcr__lease_store *inner;                 /* the client store (request thread only) */
    kcr__lease_store outer;                  /* the member's: hands requests over */
    kcr_cancel *call_cancel;
    kcr_metric *state_metric, *moves, *handover, *unowned, *uncovered, *skew;
    /* label mode: objects the coordinator's full and unowned passes listed */
    kcr_metric *coord_full, *coord_unowned;
    kcr_metric_family *owned_family;
    kcr_shard_label_keys label_keys;
    kcr_informer *lease_watch; /* the ring's Leases (manager_shard_watch.c); NULL when stopped */
    /* the owned caches that follow the shard (manager_shard_children.c):
     * bound before start; the generations and flags are atomic */
    kcr_shard_field child_field; /* BY_CONTROLLER (a ring by uid) or BY_NAMESPACE */
    bool child_buckets; /* BY_CONTROLLER, and their label selectors select the buckets too */
    char *child_initial_selector;
    kcr_informer **children; /* each shared informer once */
    _Atomic uint64_t *child_gen; /* the selector generation each must have listed */
    size_t n_children;
    atomic_bool children_pending; /* a reselect the caches have not all applied yet */
    _Atomic uint64_t children_epoch; /* reselects so far */
    bool trim_due; /* member's thread: give the heap back once the caches relisted */
    size_t held_peak; /* member's thread: the most objects the sharded primary caches held
                         since the heap was last given back */

    pthread_mutex_t lock;
    pthread_cond_t cond; /* monotonic; every change below */
    kcr__shard_member *member;
    pthread_t step_thread, call_thread;
    bool started, quit, calls_quit, poke;
    kcr__shard_state state; /* as of the last step or check */
    char *refused;          /* the member's refusal, once */
    kcr__ranges admitted;   /* as of the last step: what gains are measured against */
    kcr__ranges selection;  /* the ranges the primary (server mode) and owned caches' selectors
                               were last set to */
    kcr__ranges children_want;   /* the owned caches' selection, applied or not */
    kcr__ranges children_synced; /* the part every owned cache holds: admission waits for it */
    int64_t want_since_ns;  /* the first step that wanted a range not admitted; 0: none */
    char *last_err;         /* the last step's error, logged when it changes */
    /* the request slot */
    call_state call;
    bool call_abandoned;
    call_op op;
    char *call_ring;
    kcr__shard_lease call_lease;
    kcr__shard_lease_list call_list;
    char *call_version, *call_msg;
    kcr_err call_err;
    /* label mode (manager_shard_label.c) */
    shard_labels *labels;
    bool label_poke;             /* wake the label thread */
    bool drain_waits;            /* an acknowledgement waits for a reconcile to end */
    const void *ring_seen;       /* the member's ring at the last step (identity only) */
    struct kcr__ring *coord_ring; /* a copy of the member's ring at its last active step */
};


/* manager_shard_label.c. Every function takes s->lock itself unless it
 * says "lock held". */

/* Label mode: the label keys, this replica's selector and the coordinator's
 * elector (s->ring, identity, instance, ns and timings are set). Starts
 * nothing. */
kcr_err kcr__shard_labels_new(mgr_shard *s, shard_labels **out);
void kcr__shard_labels_free(shard_labels *l);
/* Starts the label thread and the coordinator's elector. */
kcr_err kcr__shard_labels_start(mgr_shard *s);
/* Stops them (the elector releases the coordinator Lease if held). */
void kcr__shard_labels_stop(mgr_shard *s);
/* The label selector of a sharded primary cache: the source's own
 * (`user`, may be NULL) and the shard labels it watches, this replica's
 * and those of members that left its ring. Malloc'd; NULL when out of
 * memory. Any thread. */
char *kcr__shard_labels_selector(shard_labels *l, const char *user);
/* Makes r, a sharded primary cache's reflector, select what
 * kcr__shard_labels_selector(l, user) says: before its start, the
 * selection of its first list; after, it follows the change, listing only
 * the labels it gains (kcr__reflector_set_label_values). Any thread. */
kcr_err kcr__shard_labels_select(shard_labels *l, kcr_reflector *r, const char *user);
/* The label writes one coordinator pass decides at most; before the
 * label thread starts. */
void kcr__shard_labels_set_pass_writes(shard_labels *l, size_t n);
/* Whether obj carries a shard label the primary caches watch. Any thread. */
bool kcr__shard_labels_watched(shard_labels *l, const kcr_object *obj);
/* Whether obj carries the drain label. */
bool kcr__shard_labels_draining(const shard_labels *l, const kcr_object *obj);
/* Lock held: after a member step, keeps a copy of the member's ring for the
 * coordinator, wakes the label thread when the ring changed, and follows
 * the members that left it. True when the labels to watch changed: call
 * kcr__shard_labels_rewatch() once the lock is released. */
bool kcr__shard_labels_after_step(mgr_shard *s);
/* Without s->lock (the member's thread): every sharded primary cache
 * follows kcr__shard_labels_selector() (kcr__shard_labels_select). */
void kcr__shard_labels_rewatch(mgr_shard *s);
/* Whether this replica is the ring's coordinator now; the objects the
 * coordinator's last pass found without a live owner (0 elsewhere). */
bool kcr__shard_labels_coordinating(mgr_shard *s, double *unowned);

/* manager_shard_children.c: the owned caches that follow the shard. */
/* Sets `sel` on them (without s->lock): they relist, and admission waits. */
void kcr__shard_children_reselect(mgr_shard *s, const kcr__ranges *sel);
/* Without s->lock (workers before admission, the member's thread after a
 * step): once every owned cache applied the newest selection, admission
 * may use it. Cheap when nothing is pending. */
void kcr__shard_children_refresh(mgr_shard *s);
/* Lock held: whether the owned caches hold the children of keys at `hash`
 * (always, with no owned caches). */
bool kcr__shard_children_hold(const mgr_shard *s, uint64_t hash);
void kcr__shard_children_free(mgr_shard *s);

/* manager_shard_watch.c: the watch of the ring's Leases that wakes the
 * member's thread when another member changes what the protocol waits for.
 * Start after the member's threads; stop without s->lock held (the watch's
 * handler takes it). */
kcr_err kcr__shard_watch_start(mgr_shard *s);
void kcr__shard_watch_stop(mgr_shard *s);

#endif
