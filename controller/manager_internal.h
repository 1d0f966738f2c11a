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
