/* kcr_manager_run and the manager's lifecycle: signals (self-pipe), the
 * shutdown order, accessors and the health checks. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "controller/manager_internal.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"

/* Signal handling is process-wide: one manager at a time handles signals. */
static volatile sig_atomic_t sig_count;
static volatile sig_atomic_t sig_fd = -1;

static void on_signal(int sig)
{
    (void)sig;
    if (++sig_count > 1)
        _exit(1); /* second signal: exit at once */
    int fd = sig_fd;
    if (fd >= 0) {
        ssize_t r = write(fd, "s", 1);
        (void)r;
    }
}

void kcr_manager_stop(kcr_manager *m)
{
    if (!m)
        return;
    kcr_cancel_trigger(m->stop_cancel); /* async-signal-safe */
    ssize_t r = write(m->wake[1], "x", 1);
    (void)r;
}

/* Blocks until the self-pipe is written to. */
static void wait_wake(kcr_manager *m)
{
    struct pollfd p = {.fd = m->wake[0], .events = POLLIN};
    for (;;) {
        int n = poll(&p, 1, -1);
        if (n > 0)
            break;
        if (n < 0 && errno != EINTR)
            break;
    }
    char buf[64];
    while (read(m->wake[0], buf, sizeof buf) > 0)
        ;
}

static void shutdown_workers(kcr_manager *m)
{
    int64_t grace = m->opts.graceful_shutdown_timeout_ms;
    if (grace == KCR_DURATION_DEFAULT)
        grace = 30000;
    int64_t deadline = grace == KCR_DURATION_ZERO       ? kcr__now_ns()
                       : grace == KCR_DURATION_INFINITE ? 0 /* no deadline */
                                                        : kcr__now_ns() + grace * KCR_NS_PER_MS;
    atomic_store(&m->stopping, true);
    /* first stop every queue, so no controller starts new work while another drains */
    for (size_t i = 0; i < m->n_ctls; i++)
        kcr_workqueue_shutdown(m->ctls[i]->q);
    for (size_t i = 0; i < m->n_ctls; i++)
        if (!kcr__mgr_stop_workers(m->ctls[i], deadline))
            atomic_store(&m->cancelled_at_deadline, true);
}

kcr_err kcr_manager_run(kcr_manager *m)
{
    if (!m)
        return kcr__fail(KCR_ERR_INVALID, "kcr_manager_run: NULL manager");
    /* under the lock add_controller holds: the controller list is final from here on */
    pthread_mutex_lock(&m->lock);
    bool ran = atomic_exchange(&m->ran, true);
    pthread_mutex_unlock(&m->lock);
    if (ran)
        return kcr__fail(KCR_ERR_STATE, "kcr_manager_run: a manager runs once");
    struct sigaction old_int, old_term;
    bool signals = m->opts.handle_signals;
    if (signals) {
        sig_count = 0;
        sig_fd = m->wake[1];
        struct sigaction sa = {.sa_handler = on_signal};
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, &old_int);
        sigaction(SIGTERM, &sa, &old_term);
    }
    atomic_store(&m->running, true);
    kcr_err err = KCR_OK;
    bool warm = !m->opts.no_warm_standby || !m->elector;
    if (warm && !atomic_exchange(&m->caches_started, true))
        err = kcr_informer_factory_start(m->factory);
    if (err == KCR_OK && m->shard)
        err = kcr__mgr_shard_start(m->shard); /* workers ask it before each reconcile */
    if (err == KCR_OK && m->elector) {
        err = kcr_leader_elector_start(m->elector);
    } else if (err == KCR_OK) {
        atomic_store(&m->leading, true);
        for (size_t i = 0; err == KCR_OK && i < m->n_ctls; i++)
            err = kcr__mgr_start_workers(m->ctls[i]);
    }
    if (err == KCR_OK) {
        kcr__log(KCR_LOG_INFO, "manager", "%s: running %zu controller(s)%s", m->name, m->n_ctls,
                 m->elector ? " (leader election on)" : m->shard ? " (sharded)" : "");
        wait_wake(m);
        kcr__log(KCR_LOG_INFO, "manager", "%s: %s", m->name,
                 atomic_load(&m->lost) ? "leadership lost" : "stopping");
    }
    /* the order matters: no new work, drain, THEN release the lease, then
     * caches. A shard member stops admitting first, so its ranges drain
     * with the workers and it releases its Lease once they did. */
    if (m->shard)
        kcr__mgr_shard_leave(m->shard);
    shutdown_workers(m);
    if (m->shard)
        kcr__mgr_shard_stop(m->shard,
                            kcr__now_ns() + 2 * kcr__mgr_shard_retry_ms(m->shard) * KCR_NS_PER_MS);
    kcr_leader_elector_stop(m->elector);
    kcr_informer_factory_stop(m->factory);
    if (m->recorder)
        kcr_event_recorder_flush(m->recorder, 2000);
    atomic_store(&m->running, false);
    if (signals) {
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGTERM, &old_term, NULL);
        sig_fd = -1;
    }
    if (err != KCR_OK)
        return err;
    char *refused = m->shard ? kcr__mgr_shard_refused(m->shard) : NULL;
    if (refused) {
        err = kcr__fail(KCR_ERR_EXISTS, "%s: %s", m->name, refused);
        free(refused);
        return err;
    }
    if (atomic_load(&m->lost))
        return kcr__fail(KCR_ERR_LEADERSHIP_LOST, "%s: lost the lease %s/%s", m->name, m->le_ns,
                         m->le_id);
    return KCR_OK;
}

void kcr_manager_free(kcr_manager *m)
{
    if (!m)
        return;
    atomic_store(&m->stopping, true);
    for (size_t i = 0; i < m->n_ctls; i++)
        kcr__mgr_stop_workers(m->ctls[i], 0);
    kcr_leader_elector_free(m->elector);
    kcr__mgr_shard_free(m->shard); /* before the informers: its collector reads the caches */
    /* the informers (and their handlers, whose user_data are the controllers'
       sources) go first */
    kcr_informer_factory_free(m->factory);
    for (size_t i = 0; i < m->n_ctls; i++) {
        kcr_controller *c = m->ctls[i]->c;
        kcr__mgr_ctl_free(m->ctls[i]);
        kcr__controller_free(c);
    }
    free(m->ctls);
    kcr_event_recorder_free(m->recorder);
    kcr_client_set_request_observer(m->client, NULL, NULL);
    if (m->own_metrics)
        kcr_metrics_free(m->metrics);
    free(m->own);
    for (int i = 0; i < 2; i++)
        if (m->wake[i] >= 0)
            close(m->wake[i]);
    kcr_cancel_free(m->stop_cancel);
    free(m->cache_defaults);
    free(m->cache_shard_selector);
    free(m->name);
    free(m->le_ns);
    free(m->le_id);
    free(m->le_identity);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

kcr_client *kcr_manager_client(kcr_manager *m)
{
    return m->client;
}

kcr_metrics *kcr_manager_metrics(kcr_manager *m)
{
    return m->metrics;
}

kcr_event_recorder *kcr_manager_recorder(kcr_manager *m)
{
    return m->recorder;
}

kcr_informer_factory *kcr_manager_factory(kcr_manager *m)
{
    return m->factory;
}

bool kcr_manager_is_leader(kcr_manager *m)
{
    return m && atomic_load(&m->leading);
}

static kcr_err check_fail(char **message, const char *text)
{
    if (message)
        *message = strdup(text);
    return kcr__fail(KCR_ERR_STATE, "%s", text);
}

kcr_err kcr_manager_readyz_check(char **message, void *manager)
{
    kcr_manager *m = manager;
    if (!m || !atomic_load(&m->running) || atomic_load(&m->stopping))
        return check_fail(message, m && atomic_load(&m->stopping) ? "manager stopping"
                                                                  : "manager not running");
    if (!atomic_load(&m->caches_started))
        return KCR_OK; /* a cold standby (no_warm_standby) has no caches to sync */
    char *why = kcr__mgr_caches_not_ready(m);
    if (why) {
        kcr_err err = kcr__fail(KCR_ERR_STATE, "%s", why);
        if (message)
            *message = why;
        else
            free(why);
        return err;
    }
    return KCR_OK;
}

bool kcr_manager_shard_info(kcr_manager *m, kcr_shard_member_info *out)
{
    if (!m || !m->shard)
        return false;
    if (out)
        kcr__mgr_shard_info(m->shard, out);
    return true;
}

kcr_err kcr_manager_shard_readyz_check(char **message, void *manager)
{
    kcr_manager *m = manager;
    if (message)
        *message = NULL;
    if (!m || !m->shard)
        return KCR_OK;
    char *text = NULL;
    kcr_err err = kcr__mgr_shard_ready(m->shard, &text);
    if (message)
        *message = text;
    else
        free(text);
    return err;
}

kcr_err kcr_manager_healthz_check(char **message, void *manager)
{
    kcr_manager *m = manager;
    if (!m)
        return check_fail(message, "no manager");
    if (atomic_load(&m->lost))
        return check_fail(message, "leadership lost");
    if (atomic_load(&m->cancelled_at_deadline))
        return check_fail(message, "reconciles were cancelled at the shutdown deadline");
    return KCR_OK;
}
