/* Internal: the manager and its per-controller runtime (queue, workers,
 * caches, metrics, read-your-writes), shared by controller/manager*.c,
 * workers.c, ryw.c and instrument.c. */
#ifndef KCR_CONTROLLER_MANAGER_INTERNAL_H
#define KCR_CONTROLLER_MANAGER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "controller/controller_internal.h"
#include "kcr/leader.h"

typedef struct mgr_ctl mgr_ctl;
typedef struct mgr_shard mgr_shard;

/* Metric series of one controller (instrument.c). */
typedef struct ctl_series {
    kcr_metric *success, *error, *requeue, *requeue_after; /* reconcile_total{result} */
    kcr_metric *errors, *terminal, *timeouts, *time, *max_concurrent, *active;
} ctl_series;

/* A fence: the reconcile of a key wrote `rv` of ns/name in source `src`. */
typedef struct ryw_fence {
    size_t src;
    char *ns, *name;
    uint64_t rv;
} ryw_fence;

typedef struct ryw_list {
    ryw_fence *f;
    size_t n, cap;
} ryw_list;

/* A key's record, kept as its workqueue item's payload (workers.c): its
 * pending reasons and the read-your-writes fences of its last reconcile.
 * One table, the queue's, under one lock, holds everything per key. */
typedef struct mgr_keyrec {
    kcr__pending p;
    ryw_list fences;
} mgr_keyrec;

typedef struct mgr_worker {
    mgr_ctl *mc;
    pthread_t thread;
    bool started;
    kcr_cancel *cancel;
    kcr_client *client;  /* the read-your-writes wrapper (ryw.c) */
    ryw_list writes;     /* fences recorded by the running reconcile */
    bool busy;           /* under mc->lock */
    int64_t deadline_ns; /* 0: none; under mc->lock */
    kcr_shard_member_info shard; /* what kcr_ctx_shard gives its reconcile (sharded controllers) */
} mgr_worker;

struct mgr_ctl {
    kcr_manager *m;
    kcr_controller *c;
    kcr_workqueue *q;
    kcr_informer **infs;    /* per source */
    kcr_handler_reg **regs; /* per source */
    mgr_worker *w;
    int n_w;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool sharded; /* the manager is sharded and this controller is not opted out */
    int live; /* worker threads running */
    bool workers_started;
    bool closed; /* stop_workers ran: no (re)start */
    bool monitor_started, monitor_stop;
    pthread_t monitor;
    ctl_series series;
};

struct kcr_manager {
    kcr_client *client;
    char *name;
    kcr_manager_options opts; /* strings below */
    char *le_ns, *le_id, *le_identity;
    kcr_informer_options *cache_defaults;
    char *cache_shard_selector; /* the copy behind cache_defaults->reflector.shard_selector */
    kcr_informer_factory *factory;
    kcr_metrics *metrics;
    bool own_metrics;
    kcr_event_recorder *recorder;
    kcr_leader_elector *elector;
    mgr_shard *shard; /* NULL: not sharded (manager_shard.c) */
    kcr_metric *leader_status;
    void *own; /* kcr's own metric families (instrument.c) */
    mgr_ctl **ctls;
    size_t n_ctls;
    pthread_mutex_t lock;
    int wake[2]; /* self-pipe: stop, signals, leadership loss */
    kcr_cancel *stop_cancel; /* triggered by kcr_manager_stop: ends discovery in add_controller */
    atomic_bool ran, running, stopping, leading, lost, cancelled_at_deadline, caches_started;
};

/* workers.c */
kcr_err kcr__mgr_ctl_new(kcr_manager *m, kcr_controller *c, mgr_ctl **out);
void kcr__mgr_ctl_free(mgr_ctl *mc);
kcr_err kcr__mgr_start_workers(mgr_ctl *mc);
/* Stops taking keys; waits for running reconciles until deadline_ns
 * (monotonic; 0: no limit), then cancels them; joins every worker. Returns
 * false when it had to cancel. */
bool kcr__mgr_stop_workers(mgr_ctl *mc, int64_t deadline_ns);
/* Triggers every running reconcile's cancel token. */
void kcr__mgr_cancel_all(mgr_ctl *mc);
extern const kcr__env_ops kcr__mgr_env_ops;

/* manager_caches.c: informers + handlers for every source of c. */
kcr_err kcr__mgr_bind_sources(mgr_ctl *mc);
/* A readiness message for the first cache that is not synced, or NULL. */
char *kcr__mgr_caches_not_ready(kcr_manager *m);

/* manager_shard.c: the manager's shard member (docs/sharding.md). */
typedef enum kcr__admission {
    KCR__ADMIT_RUN,   /* reconcile it now; kcr__mgr_shard_end(hash) after */
    KCR__ADMIT_LATER, /* this replica wants its range but has not got it yet: requeue */
    KCR__ADMIT_SOON,  /* admitted, but the owned caches (or, server mode, for a key not
                         cached, the primary one) are still listing its range: requeue after
                         KCR__SHARD_CACHE_POLL_MS */
    KCR__ADMIT_DROP   /* another replica's (or nothing to hash): drop */
} kcr__admission;
#define KCR__SHARD_CACHE_POLL_MS 20
/* Copies o (validated: KCR_ERR_INVALID / KCR_ERR_UNSUPPORTED naming the
 * field) and makes the member; starts nothing. */
kcr_err kcr__mgr_shard_new(kcr_manager *m, const kcr_sharding_options *o, mgr_shard **out);
void kcr__mgr_shard_free(mgr_shard *s);
/* The selector a sharded primary cache starts with in server mode (a
 * one-hash range: the member owns nothing yet); NULL in filter mode. */
const char *kcr__mgr_shard_initial_selector(const mgr_shard *s);
/* The first selector of an owned source of the sharded controller c
 * (manager_shard_children.c; static), or NULL when its cache stays whole. */
const char *kcr__mgr_shard_child_selector(const mgr_shard *s, const kcr_controller *c);
/* The label selector an owned source with a child selector starts with:
 * its own (`user`, may be NULL) and, with
 * kcr_sharding_options.child_bucket_selector, the bucket label `in` the
 * buckets of that first selector. *out malloc'd; NULL when it is `user`
 * unchanged. */
kcr_err kcr__mgr_shard_child_labels(const mgr_shard *s, const char *user, char **out);
/* Binds an owned cache to the shard: its selector (and with buckets its
 * label selector, on top of `user`: copied) follows the member's ranges.
 * Before kcr__mgr_shard_start. */
kcr_err kcr__mgr_shard_add_child(mgr_shard *s, kcr_informer *inf, const char *user);
/* Label mode: the label selector of a sharded primary cache, the source's
 * own (`user`, may be NULL) and the shard labels it watches, malloc'd into
 * *out; NULL in the other modes. */
kcr_err kcr__mgr_shard_label_selector(const mgr_shard *s, const char *user, char **out);
/* Label mode: makes inf, a sharded primary cache made with that selector
 * and not started, follow the shard labels this replica watches (widened
 * and narrowed by listing only what a change gains); KCR_OK in the other
 * modes. */
kcr_err kcr__mgr_shard_label_cache(const mgr_shard *s, kcr_informer *inf, const char *user);
/* Label mode: the label writes one coordinator pass decides at most
 * (default 4,096), before kcr_manager_start. For tests. */
void kcr__manager_shard_set_pass_writes(kcr_manager *m, size_t n);
/* Label mode: whether obj, as a DELETED event of a sharded primary cache
 * delivers it, carries none of the shard labels the cache watches (it
 * moved: the label selector stopped matching). false in the other modes. */
bool kcr__mgr_shard_moved_away(const mgr_shard *s, const kcr_object *obj);
/* Starts the member's threads (after the controllers are final). */
kcr_err kcr__mgr_shard_start(mgr_shard *s);
/* Stops admitting: the member drains and releases its Lease (graceful leave). */
void kcr__mgr_shard_leave(mgr_shard *s);
/* Waits (until deadline_ns, monotonic) for the leave to finish, then stops
 * the member's threads. */
void kcr__mgr_shard_stop(mgr_shard *s, int64_t deadline_ns);
/* Admission of `key` of mc taken by worker w (its rec borrowed): on RUN,
 * *hash is what to end and w->shard is filled. */
kcr__admission kcr__mgr_shard_begin(mgr_shard *s, mgr_worker *w, const char *key,
                                    const mgr_keyrec *rec, uint64_t *hash);
void kcr__mgr_shard_end(mgr_shard *s, uint64_t hash);
/* The retry period (how long a LATER key waits). */
int64_t kcr__mgr_shard_retry_ms(const mgr_shard *s);
/* Why the member refused to run (malloc'd), or NULL. */
char *kcr__mgr_shard_refused(mgr_shard *s);
/* The shard readiness: KCR_OK once active; *text (malloc'd) names the
 * state and ranges either way. */
kcr_err kcr__mgr_shard_ready(mgr_shard *s, char **text);
/* ring, identity (borrowed from s) and slot now. */
void kcr__mgr_shard_info(mgr_shard *s, kcr_shard_member_info *out);

/* ryw.c */
kcr_err kcr__ryw_client_new(mgr_worker *w, kcr_client **out);
/* Moves the worker's recorded writes into the key's record: they replace
 * its older fences. */
void kcr__ryw_commit(mgr_worker *w, mgr_keyrec *rec);
/* Waits (bounded) until the caches have seen the fences of `rec` (the
 * record of `key`), then drops them. */
void kcr__ryw_wait(mgr_ctl *mc, const char *key, mgr_keyrec *rec);
void kcr__ryw_list_clear(ryw_list *l);

/* instrument.c */
kcr_err kcr__instrument_manager(kcr_manager *m);
kcr_err kcr__instrument_controller(mgr_ctl *mc, kcr_workqueue_metrics *wq_hooks);
kcr_err kcr__instrument_caches(mgr_ctl *mc);
void kcr__instrument_reconcile(mgr_ctl *mc, kcr__outcome out, double seconds, bool timed_out);

#endif
