/* A controller's runtime on the manager: its workqueue, worker threads
 * (get -> read-your-writes wait -> reconcile -> done), the per-reconcile
 * deadline monitor, and stop/drain/cancel. */
#include <stdlib.h>
#include <string.h>

#include "controller/manager_internal.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/trace.h"

/* ---- the per-key record: the workqueue item's payload ---- */

static void keyrec_free(void *payload, void *user_data)
{
    (void)user_data;
    mgr_keyrec *rec = payload;
    kcr__pending_clear(&rec->p);
    kcr__ryw_list_clear(&rec->fences);
    free(rec);
}

/* Runs under the queue's lock: reasons coalesce, newer fences replace older. */
static void *keyrec_merge(void *held, void *incoming, void *user_data)
{
    mgr_keyrec *h = held, *in = incoming;
    if (!h || !in)
        return h ? h : in;
    kcr__pending_merge(&h->p, &in->p);
    if (in->fences.n) {
        kcr__ryw_list_clear(&h->fences);
        h->fences = in->fences;
        memset(&in->fences, 0, sizeof in->fences);
    }
    keyrec_free(in, user_data);
    return h;
}

static const kcr_workqueue_payload_ops keyrec_ops = {.merge = keyrec_merge, .free = keyrec_free};

static kcr_err mgr_enqueue(kcr_controller *c, const char *key, int priority, int64_t delay_ms,
                           kcr__pending *p, void *env)
{
    (void)env;
    mgr_ctl *mc = c->env_ctl;
    mgr_keyrec *rec = calloc(1, sizeof *rec);
    if (!rec) {
        kcr__pending_clear(p);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory enqueueing %s", key);
    }
    rec->p = *p;
    memset(p, 0, sizeof *p);
    kcr_workqueue_add_options ao = {.delay_ms = delay_ms, .priority = priority, .payload = rec};
    kcr_err err = kcr_workqueue_add(mc->q, key, &ao);
    if (delay_ms <= 0)
        kcr__trace_stamp(KCR__TR_ENQUEUED, key);
    return err;
}

static int64_t mgr_now(void *env)
{
    return kcr_clock_now_ms(((kcr_manager *)env)->opts.clock);
}

const kcr__env_ops kcr__mgr_env_ops = {.enqueue = mgr_enqueue, .now_ms = mgr_now};

kcr_err kcr__mgr_ctl_new(kcr_manager *m, kcr_controller *c, mgr_ctl **out)
{
    mgr_ctl *mc = calloc(1, sizeof *mc);
    if (!mc)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory adding a controller");
    mc->m = m;
    mc->c = c;
    mc->n_w = c->workers;
    pthread_mutex_init(&mc->lock, NULL);
    kcr__cond_init_monotonic(&mc->cond);
    kcr_err err = KCR_OK;
    mc->w = calloc((size_t)mc->n_w, sizeof *mc->w);
    mc->infs = calloc(c->n_sources, sizeof *mc->infs);
    mc->regs = calloc(c->n_sources, sizeof *mc->regs);
    if (!mc->w || !mc->infs || !mc->regs)
        err = kcr__fail(KCR_ERR_NOMEM, "out of memory adding a controller");
    for (int i = 0; err == KCR_OK && i < mc->n_w; i++) {
        mc->w[i].mc = mc;
        err = kcr_cancel_new(&mc->w[i].cancel);
        if (err == KCR_OK)
            err = kcr__ryw_client_new(&mc->w[i], &mc->w[i].client);
    }
    kcr_workqueue_metrics hooks;
    if (err == KCR_OK)
        err = kcr__instrument_controller(mc, &hooks);
    if (err == KCR_OK) {
        /* the controller keeps the rate limiter (retries go through add_after with
         * its delay, so the test kit's virtual clock can drive the same code) */
        kcr_workqueue_options qo = {.name = c->name, .metrics = &hooks, .payload = &keyrec_ops};
        err = kcr_workqueue_new(&qo, &mc->q);
    }
    if (err != KCR_OK) {
        kcr__mgr_ctl_free(mc);
        return err;
    }
    *out = mc;
    return KCR_OK;
}

void kcr__mgr_ctl_free(mgr_ctl *mc)
{
    if (!mc)
        return;
    kcr__mgr_stop_workers(mc, 0);
    for (int i = 0; mc->w && i < mc->n_w; i++) {
        kcr_cancel_free(mc->w[i].cancel);
        kcr_client_free(mc->w[i].client);
        kcr__ryw_list_clear(&mc->w[i].writes);
    }
    free(mc->regs);
    free(mc->w);
    free(mc->infs);
    kcr_workqueue_free(mc->q);
    pthread_mutex_destroy(&mc->lock);
    pthread_cond_destroy(&mc->cond);
    free(mc);
}

/* Waits until every cache of the controller is synced, or stopping. */
static bool wait_synced(mgr_ctl *mc)
{
    for (size_t i = 0; i < mc->c->n_sources; i++)
        while (!atomic_load(&mc->m->stopping) && !kcr_workqueue_shutting_down(mc->q)) {
            kcr_err err = kcr_informer_wait_for_sync(mc->infs[i], 200, NULL);
            if (err == KCR_OK)
                break;
            if (err == KCR_ERR_SHUTDOWN)
                return false;
        }
    return !atomic_load(&mc->m->stopping) && !kcr_workqueue_shutting_down(mc->q);
}

static kcr__outcome run_key(mgr_worker *w, const char *key, mgr_keyrec *rec)
{
    mgr_ctl *mc = w->mc;
    kcr_controller *c = mc->c;
    if (c->ryw)
        kcr__ryw_wait(mc, key, rec);
    kcr__trace_end(key);
    int64_t start = kcr__now_ns();
    pthread_mutex_lock(&mc->lock);
    kcr_cancel_reset(w->cancel);
    w->busy = true;
    w->deadline_ns = c->timeout_ms ? start + c->timeout_ms * KCR_NS_PER_MS : 0;
    pthread_cond_broadcast(&mc->cond); /* the monitor picks up the deadline */
    pthread_mutex_unlock(&mc->lock);
    kcr__run run = {
        .client = w->client,
        .recorder = mc->m->recorder,
        .cancel = w->cancel,
        .limiter_now_ns = start,
        .pending = &rec->p,
        .shard = mc->sharded ? &w->shard : NULL,
    };
    kcr_metric_add(mc->series.active, 1);
    kcr__reconcile_key(c, key, &run);
    kcr_metric_add(mc->series.active, -1);
    int64_t end = kcr__now_ns();
    pthread_mutex_lock(&mc->lock);
    w->busy = false;
    w->deadline_ns = 0;
    pthread_mutex_unlock(&mc->lock);
    bool timed_out = c->timeout_ms && end - start > c->timeout_ms * KCR_NS_PER_MS;
    if (timed_out)
        KCR__COUNT(c, timeouts, 1);
    if (c->ryw)
        kcr__ryw_commit(w, rec);
    kcr__instrument_reconcile(mc, run.outcome, (double)(end - start) / 1e9, timed_out);
    if (kcr__log_enabled(KCR_LOG_DEBUG)) {
        static const char *const names[] = {"success", "requeue_after", "error", "terminal",
                                            "requeue"};
        int64_t wall_end = kcr__wall_ns() / KCR_NS_PER_MS;
        kcr__log(KCR_LOG_DEBUG, "controller",
                 "controller \"%s\": reconciled %s (%s, reason %s) wall_ms=%lld..%lld", c->name,
                 key, names[run.outcome], kcr_reason_name(run.reason),
                 (long long)(wall_end - (end - start) / KCR_NS_PER_MS), (long long)wall_end);
    }
    return run.outcome;
}

/* A sharded controller's key: reconciled only when this replica's shard
 * member admits it (manager_shard.c); a key of a range it wants but has
 * not got yet waits a retry period, one whose children the owned caches
 * are still listing a few milliseconds, any other is dropped (another
 * replica owns it, or it names nothing). Returns whether the key's record must
 * stay with it: it waits, or ran and is queued again. */
static bool run_sharded(mgr_worker *w, const char *key, mgr_keyrec *rec)
{
    mgr_ctl *mc = w->mc;
    mgr_shard *s = mc->m->shard;
    uint64_t hash = 0;
    kcr__admission a = kcr__mgr_shard_begin(s, w, key, rec, &hash);
    if (a == KCR__ADMIT_LATER || a == KCR__ADMIT_SOON) {
        kcr_workqueue_add_options ao = {
            .delay_ms = a == KCR__ADMIT_SOON ? KCR__SHARD_CACHE_POLL_MS : kcr__mgr_shard_retry_ms(s)};
        if (kcr_workqueue_add(mc->q, key, &ao) != KCR_OK && !kcr_workqueue_shutting_down(mc->q))
            kcr__log(KCR_LOG_WARN, "controller", "controller \"%s\": requeue %s: %s",
                     mc->c->name, key, kcr_last_error());
        return true;
    }
    if (a != KCR__ADMIT_RUN)
        return false;
    kcr__outcome out = run_key(w, key, rec);
    kcr__mgr_shard_end(s, hash); /* before the key is done */
    /* a key queued again keeps the uid it hashes by (its object may be gone) */
    return out == KCR__OUT_ERROR || out == KCR__OUT_REQUEUE || out == KCR__OUT_REQUEUE_AFTER;
}

static void *worker_main(void *arg)
{
    mgr_worker *w = arg;
    mgr_ctl *mc = w->mc;
    if (wait_synced(mc))
        for (;;) {
            const char *key = NULL;
            kcr_err err = kcr_workqueue_get(mc->q, &key);
            if (err == KCR_ERR_CANCELED)
                continue;
            if (err != KCR_OK)
                break;
            kcr__trace_stamp(KCR__TR_GOT, key);
            /* once kcr_manager_stop has been called (even before the run
             * loop wakes to shut the queues down), keys still handed out
             * are not started */
            void *payload = NULL;
            kcr_workqueue_take_payload(mc->q, key, &payload);
            mgr_keyrec *rec = payload;
            if (!rec && !(rec = calloc(1, sizeof *rec))) { /* no reasons: a bare re-add */
                kcr__log(KCR_LOG_ERROR, "controller", "controller \"%s\": out of memory for %s",
                         mc->c->name, key);
                kcr_workqueue_done(mc->q, key);
                continue;
            }
            bool keep = false;
            if (!kcr_cancel_triggered(mc->m->stop_cancel) && !atomic_load(&mc->m->stopping) &&
                !kcr_workqueue_shutting_down(mc->q)) {
                if (mc->sharded)
                    keep = run_sharded(w, key, rec);
                else
                    run_key(w, key, rec);
            }
            /* what outlives the reconcile (a delayed reason not due yet, the
             * fences of its writes, a sharded key's record while it is
             * queued again) goes back before done: the key's next get finds
             * it */
            if (rec->p.delayed != KCR_REASON_NONE || rec->fences.n || keep)
                kcr_workqueue_put_payload(mc->q, key, rec);
            else
                keyrec_free(rec, NULL);
            kcr_workqueue_done(mc->q, key);
        }
    pthread_mutex_lock(&mc->lock);
    mc->live--;
    pthread_cond_broadcast(&mc->cond);
    pthread_mutex_unlock(&mc->lock);
    return NULL;
}

/* Triggers the tokens of reconciles past their deadline; sleeps until the next one. */
static void *monitor_main(void *arg)
{
    mgr_ctl *mc = arg;
    pthread_mutex_lock(&mc->lock);
    while (!mc->monitor_stop) {
        int64_t now = kcr__now_ns(), next = 0;
        for (int i = 0; i < mc->n_w; i++) {
            mgr_worker *w = &mc->w[i];
            if (!w->busy || !w->deadline_ns || kcr_cancel_triggered(w->cancel))
                continue;
            if (w->deadline_ns <= now)
                kcr_cancel_trigger(w->cancel);
            else if (!next || w->deadline_ns < next)
                next = w->deadline_ns;
        }
        if (next) {
            struct timespec ts = kcr__timespec_at(next);
            pthread_cond_timedwait(&mc->cond, &mc->lock, &ts);
        } else {
            pthread_cond_wait(&mc->cond, &mc->lock);
        }
    }
    pthread_mutex_unlock(&mc->lock);
    return NULL;
}

kcr_err kcr__mgr_start_workers(mgr_ctl *mc)
{
    pthread_mutex_lock(&mc->lock);
    if (mc->workers_started || mc->closed) { /* a lease won while stopping starts nothing */
        pthread_mutex_unlock(&mc->lock);
        return KCR_OK;
    }
    mc->workers_started = true;
    kcr_err err = KCR_OK;
    if (mc->c->timeout_ms) {
        if (pthread_create(&mc->monitor, NULL, monitor_main, mc) == 0)
            mc->monitor_started = true;
        else
            err = kcr__fail(KCR_ERR_NOMEM, "cannot start the deadline monitor");
    }
    for (int i = 0; err == KCR_OK && i < mc->n_w; i++) {
        if (pthread_create(&mc->w[i].thread, NULL, worker_main, &mc->w[i]) != 0) {
            err = kcr__fail(KCR_ERR_NOMEM, "cannot start worker %d of controller \"%s\"", i,
                            mc->c->name);
            break;
        }
        mc->w[i].started = true;
        mc->live++;
    }
    pthread_mutex_unlock(&mc->lock);
    kcr__log(KCR_LOG_INFO, "controller", "controller \"%s\": %d worker(s) started", mc->c->name,
             mc->n_w);
    return err;
}

void kcr__mgr_cancel_all(mgr_ctl *mc)
{
    pthread_mutex_lock(&mc->lock);
    for (int i = 0; i < mc->n_w; i++)
        if (mc->w[i].busy)
            kcr_cancel_trigger(mc->w[i].cancel);
    pthread_mutex_unlock(&mc->lock);
}

bool kcr__mgr_stop_workers(mgr_ctl *mc, int64_t deadline_ns)
{
    kcr_workqueue_shutdown(mc->q);
    bool clean = true;
    pthread_mutex_lock(&mc->lock);
    mc->closed = true;
    while (mc->live > 0) {
        if (!deadline_ns) {
            pthread_cond_wait(&mc->cond, &mc->lock);
            continue;
        }
        struct timespec ts = kcr__timespec_at(deadline_ns);
        if (pthread_cond_timedwait(&mc->cond, &mc->lock, &ts) != 0 && mc->live > 0) {
            clean = false;
            kcr__log(KCR_LOG_WARN, "controller",
                     "controller \"%s\": %d reconcile(s) still running at the shutdown deadline: "
                     "cancelling them",
                     mc->c->name, mc->live);
            for (int i = 0; i < mc->n_w; i++)
                if (mc->w[i].busy)
                    kcr_cancel_trigger(mc->w[i].cancel);
            deadline_ns = 0;
        }
    }
    mc->monitor_stop = true;
    pthread_cond_broadcast(&mc->cond);
    pthread_mutex_unlock(&mc->lock);
    for (int i = 0; i < mc->n_w; i++)
        if (mc->w[i].started) {
            pthread_join(mc->w[i].thread, NULL);
            mc->w[i].started = false;
        }
    if (mc->monitor_started) {
        pthread_join(mc->monitor, NULL);
        mc->monitor_started = false;
    }
    return clean;
}
