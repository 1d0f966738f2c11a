/* Internal: a controller's compiled declaration, the event router shared by
 * the manager and the test kit, a key's pending reasons, and the environment
 * (manager or test kit) a controller runs in. */
#ifndef KCR_CONTROLLER_CONTROLLER_INTERNAL_H
#define KCR_CONTROLLER_CONTROLLER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "kcr/controller.h"

typedef enum kcr__role {
    KCR__ROLE_PRIMARY = 0,
    KCR__ROLE_OWNS = 1,
    KCR__ROLE_WATCHES = 2
} kcr__role;

/* One watched resource of a controller, compiled from a kcr_source. */
typedef struct kcr__source {
    kcr__role role;
    kcr_controller *ctl;
    char *group, *version, *resource, *kind; /* kind: "" when discovery could not say */
    char *label;         /* "owns[0] apps/v1 deployments": names the source in messages */
    kcr_scope declared;  /* as the kcr_source declared it */
    bool cluster_scoped; /* discovery's scope (or the declared one, when discovery could not say) */
    char *ns, *label_selector, *field_selector; /* NULL: none */
    bool metadata_only;
    bool own_thread; /* route on a handler thread of its own, not the informer's */
    kcr_predicate *predicate; /* owned */
    kcr_map_fn map;
    void *map_user_data;
    /* Bound by the environment before any event: */
    kcr_store *cache;
    /* Log-once flags. */
    atomic_bool warned_predicate, warned_map, warned_key;
} kcr__source;

/* Reasons waiting for a key (controller/reasons.c). */
typedef struct kcr__pending {
    uint32_t reasons;
    kcr_reason reason; /* most important; KCR_REASON_NONE when none */
    kcr_change change;
    const char *kind, *ns, *name; /* the trigger's object, in `strs` (NULL: none) */
    char *strs;                   /* one allocation holding kind, ns and name */
    kcr_reason delayed; /* REQUEUE_AFTER / RETRY waiting for due_ms; NONE: none */
    int64_t due_ms;
    /* The shard hash of the uid of the object the key names, when a change
     * of it (or of a child's controller reference) said so: a sharded
     * manager's admission uses it for a key no longer in the cache.
     * Kept by kcr__pending_take, the latest wins on merge. */
    bool has_uid;
    uint64_t uid_hash;
} kcr__pending;

/* The environment's hooks. Called with no kcr lock held. */
typedef struct kcr__env_ops {
    /* Makes `key` ready after delay_ms (<= 0: now) at `priority` and merges
     * `p` (taken over, also on failure) into the key's pending reasons,
     * which live with the key's queue entry. */
    kcr_err (*enqueue)(kcr_controller *c, const char *key, int priority, int64_t delay_ms,
                       kcr__pending *p, void *env);
    /* Virtual or real time, ms since the epoch. */
    int64_t (*now_ms)(void *env);
} kcr__env_ops;


struct kcr_controller {
    char *name;
    kcr__source *sources; /* [0] is the primary, then owns, then watches */
    size_t n_sources;
    kcr_cache_index *indexes; /* names copied */
    size_t n_indexes;
    int workers;
    kcr_rate_limiter *limiter; /* owned */
    int64_t timeout_ms;
    int64_t resync_ms;
    bool ryw;
    int64_t ryw_timeout_ms;
    kcr_reconcile_fn reconcile;
    void *user_data;
    kcr_client *client; /* the environment's (borrowed): kcr_source_ctx_client */

    const kcr__env_ops *env_ops;
    void *env;
    void *env_ctl; /* the environment's per-controller state */
    atomic_bool warned_result;

    pthread_mutex_t stats_lock;
    kcr_controller_stats stats;
};

/* Compiles and validates opts (ownership of predicates and the limiter is
 * taken in every case). `client` (borrowed until the controller is freed)
 * resolves every source's kind and scope by discovery, its requests
 * cancelled by `cancel` (may be NULL); `register_hint` ends the error for a
 * resource discovery does not know (how to make it known in this
 * environment). */
kcr_err kcr__controller_new(kcr_client *client, kcr_cancel *cancel, const char *register_hint,
                            const kcr_controller_options *opts, kcr_controller **out);
void kcr__controller_free(kcr_controller *c);
/* Frees what opts hands over (predicates, rate limiter), for failures
 * before kcr__controller_new runs. */
void kcr__controller_options_release(const kcr_controller_options *opts);

/* Bumps a counter of c->stats under the stats lock. */
void kcr__controller_count(kcr_controller *c, size_t offset, int64_t delta);
#define KCR__COUNT(c, field, d)                                                                    \
    kcr__controller_count((c), offsetof(kcr_controller_stats, field), (d))

/* ---- router.c: one change of a watched object -> keys, reasons, priority ---- */

/* What predicates and map functions get (kcr/controller.h). */
struct kcr_source_ctx {
    kcr__source *src;
};

/* Routes a change seen by `src` (any thread): predicates, keys (own key,
 * controlling owner, or map function), reason and priority, then enqueues
 * through the environment. key: the object's store key as the informer
 * passed it (borrowed), or NULL to compute it from obj; old_obj: updates
 * only; obj: the (new / last known) object, NULL only for a tombstone
 * without state; initial: from the initial list or a cache replay. */
void kcr__route(kcr__source *src, const char *key, kcr_change change, const kcr_object *old_obj,
                const kcr_object *obj, bool initial);

/* Enqueues key with a trigger (copied) at priority after delay_ms. */
kcr_err kcr__controller_enqueue(kcr_controller *c, const char *key, const kcr_trigger *trig,
                                int priority, int64_t delay_ms);
/* Enqueues key now, recording the uid (NULL or "": none) of the object it
 * names for sharded admission (kcr__pending.uid_hash). */
kcr_err kcr__controller_enqueue_uid(kcr_controller *c, const char *key, const kcr_trigger *trig,
                                    const char *uid, int priority);

/* Validates ns/name for the controller's primary scope and makes the key
 * (malloc'd) into *out; KCR_ERR_INVALID with a message. */
kcr_err kcr__make_key(const kcr_controller *c, const char *ns, const char *name, char **out);

/* ---- reasons.c: one key's pending reasons ---- */

/* Sets *p to one trigger (strings copied); delay_ms > 0 records a delayed
 * reason due at now_ms + delay_ms instead. KCR_OK or KCR_ERR_NOMEM (then *p
 * is empty). */
kcr_err kcr__pending_init(kcr__pending *p, const kcr_trigger *t, int64_t now_ms, int64_t delay_ms);
/* Merges `from` into `into` (every bit, the most important reason's details,
 * the earlier delayed reason); `from` is left empty. */
void kcr__pending_merge(kcr__pending *into, kcr__pending *from);
/* Moves what is due at now_ms into *out (the caller frees it with
 * kcr__pending_clear); a delayed reason not due yet stays in *p. */
void kcr__pending_take(kcr__pending *p, int64_t now_ms, kcr__pending *out);
void kcr__pending_clear(kcr__pending *p);

/* ---- result.c: what a worker does with a result ---- */

/* The outcome of one reconcile, as counted and requeued. */
typedef enum kcr__outcome {
    KCR__OUT_SUCCESS = 0,
    KCR__OUT_REQUEUE_AFTER = 1,
    KCR__OUT_ERROR = 2,
    KCR__OUT_TERMINAL = 3,
    KCR__OUT_REQUEUE = 4
} kcr__outcome;

/* Applies a result for key: counts it, logs errors, forgets or re-enqueues
 * (rate-limited retry or requeue / requeue after) through the environment. now_ns is the
 * limiter's notion of now. Returns the outcome for metrics. */
kcr__outcome kcr__apply_result(kcr_controller *c, const char *key, kcr_result res, int64_t now_ns);

/* ---- ctx.c ---- */
struct kcr_ctx {
    kcr_controller *ctl;
    const kcr_reconcile_request *req;
    kcr_client *client;
    kcr_event_recorder *recorder;
    kcr_cancel *cancel;
    const kcr_shard_member_info *shard; /* NULL: not sharded */
};

/* Builds the request for key from its pending reasons (strings point into
 * `p`, `key` and ns_buf). */
#define KCR__NS_BUF 256
void kcr__request_init(kcr_reconcile_request *req, kcr_controller *c, const char *key,
                       const kcr__pending *p, char ns_buf[KCR__NS_BUF]);

/* ---- reconcile.c: one reconcile, as the manager's workers and the test kit run it ---- */
typedef struct kcr__run {
    /* in */
    kcr_client *client;           /* the ctx client */
    kcr_event_recorder *recorder; /* may be NULL */
    kcr_cancel *cancel;           /* may be NULL */
    const kcr_shard_member_info *shard;  /* kcr_ctx_shard; NULL: not sharded */
    int64_t limiter_now_ns;       /* the rate limiter's notion of now */
    kcr__pending *pending;        /* the key's reasons: what is due is taken, the rest stays */
    /* out */
    kcr_result result;
    kcr__outcome outcome;
    kcr_reason reason;
    uint32_t reasons;
} kcr__run;

/* Takes what is due of run->pending, builds the request and context, calls
 * the reconcile function and applies its result (kcr__apply_result). */
void kcr__reconcile_key(kcr_controller *c, const char *key, kcr__run *run);

#endif
