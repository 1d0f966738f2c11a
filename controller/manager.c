/* kcr_manager: owns the shared informer factory, the controllers, leader
 * election, metrics and events; kcr_manager_run ties their lifecycles
 * together (start caches, lead, run workers; on stop: stop taking keys,
 * drain, release the lease, stop caches). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "controller/manager_internal.h"
#include "core/abi.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static void wake(kcr_manager *m)
{
    /* async-signal-safe; a full pipe already wakes the run loop */
    ssize_t r = write(m->wake[1], "x", 1);
    (void)r;
}

static void on_started_leading(void *ud)
{
    kcr_manager *m = ud;
    atomic_store(&m->leading, true);
    if (m->leader_status)
        kcr_metric_set(m->leader_status, 1);
    if (!atomic_exchange(&m->caches_started, true))
        kcr_informer_factory_start(m->factory);
    for (size_t i = 0; i < m->n_ctls && !atomic_load(&m->stopping); i++)
        if (kcr__mgr_start_workers(m->ctls[i]) != KCR_OK)
            kcr__log(KCR_LOG_ERROR, "manager", "%s", kcr_last_error());
}

/* Runs on the elector's thread, before the lease can lapse: every reconcile
 * is stopped (cancelled) before this returns, so two leaders never act. */
static void on_stopped_leading(void *ud)
{
    kcr_manager *m = ud;
    atomic_store(&m->leading, false);
    if (m->leader_status)
        kcr_metric_set(m->leader_status, 0);
    if (atomic_load(&m->stopping))
        return; /* a clean stop: the run loop drained the workers already */
    atomic_store(&m->lost, true);
    kcr__log(KCR_LOG_ERROR, "manager", "%s: leadership lost: stopping every reconcile", m->name);
    atomic_store(&m->stopping, true);
    for (size_t i = 0; i < m->n_ctls; i++)
        kcr__mgr_cancel_all(m->ctls[i]);
    for (size_t i = 0; i < m->n_ctls; i++)
        kcr__mgr_stop_workers(m->ctls[i], 0);
    wake(m);
}

kcr_err (kcr_manager_new)(size_t opts_size, kcr_client *client, const kcr_manager_options *opts,
                          kcr_manager **out)
{
    KCR__ABI_OPTS(kcr_manager_options, opts, opts_size);
    if (opts->clock && kcr__abi_reserved(opts->clock->reserved, sizeof opts->clock->reserved,
                                         "kcr_manager_options.clock") != KCR_OK)
        return KCR_ERR_INVALID; /* detail: kcr__abi_reserved */
    if (out)
        *out = NULL;
    if (!client || !out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_manager_new: NULL client or out");
    kcr_manager_options o = opts ? *opts : (kcr_manager_options){0};
    if (kcr__duration_check("kcr_manager_new: graceful_shutdown_timeout_ms",
                            o.graceful_shutdown_timeout_ms,
                            KCR__DURATION_INFINITE | KCR__DURATION_ZERO) != KCR_OK)
        return KCR_ERR_INVALID; /* detail: kcr__duration_check */
    if (o.graceful_shutdown_timeout_ms > KCR__MAX_DURATION_MS)
        return kcr__fail(
            KCR_ERR_INVALID, "kcr_manager_new: graceful_shutdown_timeout_ms %lld is above %lld ms",
            (long long)o.graceful_shutdown_timeout_ms, (long long)KCR__MAX_DURATION_MS);
    if (o.leader_election && (!o.leader_election_id || !o.leader_election_id[0]))
        return kcr__fail(
            KCR_ERR_INVALID,
            "kcr_manager_new: leader_election needs leader_election_id (the Lease name)");
    kcr_manager *m = calloc(1, sizeof *m);
    if (!m)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory making a manager");
    m->client = client;
    m->opts = o;
    m->wake[0] = m->wake[1] = -1;
    pthread_mutex_init(&m->lock, NULL);
    m->name = strdup(o.name ? o.name : "kcr-manager");
    m->le_ns = strdup(o.leader_election_namespace ? o.leader_election_namespace
                                                  : kcr_client_namespace(client));
    m->le_id = dup_or_null(o.leader_election_id);
    m->le_identity = dup_or_null(o.leader_election_identity);
    kcr_err err = KCR_OK;
    if (!m->name || !m->le_ns || (o.leader_election_id && !m->le_id) ||
        (o.leader_election_identity && !m->le_identity))
        err = kcr__fail(KCR_ERR_NOMEM, "out of memory making a manager");
    if (err == KCR_OK && o.cache_defaults) {
        m->cache_defaults = malloc(sizeof *m->cache_defaults);
        if (!m->cache_defaults)
            err = kcr__fail(KCR_ERR_NOMEM, "out of memory making a manager");
        else
            *m->cache_defaults = *o.cache_defaults;
    }
    /* the one string of cache_defaults the sources do not override: copied
     * as the other options are */
    if (err == KCR_OK && m->cache_defaults && m->cache_defaults->reflector.shard_selector &&
        !(m->cache_defaults->reflector.shard_selector = m->cache_shard_selector =
              strdup(m->cache_defaults->reflector.shard_selector)))
        err = kcr__fail(KCR_ERR_NOMEM, "out of memory making a manager");
    if (err == KCR_OK)
        err = kcr_cancel_new(&m->stop_cancel);
    if (err == KCR_OK && pipe(m->wake) != 0)
        err = kcr__fail(KCR_ERR_IO, "manager: pipe: %s", strerror(errno));
    for (int i = 0; err == KCR_OK && i < 2; i++) {
        fcntl(m->wake[i], F_SETFL, O_NONBLOCK);
        fcntl(m->wake[i], F_SETFD, FD_CLOEXEC);
    }
    if (err == KCR_OK)
        err = kcr_informer_factory_new(client, m->cache_defaults, &m->factory);
    if (err == KCR_OK) {
        m->metrics = o.metrics;
        if (!m->metrics) {
            m->own_metrics = true;
            err = kcr_metrics_new(NULL, &m->metrics);
        }
    }
    if (err == KCR_OK && !o.no_events) {
        kcr_event_recorder_options ro = {.reporting_controller = m->name, .clock = o.clock};
        err = kcr_event_recorder_new(client, &ro, &m->recorder);
    }
    if (err == KCR_OK && o.leader_election) {
        kcr_leader_elector_options lo = {
            .lease_namespace = m->le_ns,
            .lease_name = m->le_id,
            .identity = m->le_identity,
            .lease_duration_ms = o.lease_duration_ms,
            .renew_deadline_ms = o.renew_deadline_ms,
            .retry_period_ms = o.retry_period_ms,
            .on_started_leading = on_started_leading,
            .on_stopped_leading = on_stopped_leading,
            .user_data = m,
        };
        err = kcr_leader_elector_new(client, &lo, &m->elector);
    }
    if (err == KCR_OK)
        err = kcr__instrument_manager(m);
    if (err == KCR_OK && o.sharding)
        err = kcr__mgr_shard_new(m, o.sharding, &m->shard);
    if (err != KCR_OK) {
        kcr_manager_free(m);
        return err;
    }
    *out = m;
    return KCR_OK;
}

kcr_err (kcr_manager_add_controller)(size_t opts_size, kcr_manager *m,
                                     const kcr_controller_options *opts, kcr_controller **out)
{
    kcr_controller_options local;
    kcr_err abi_err = kcr__abi_in(&local, sizeof local, opts, opts_size, "kcr_controller_options");
    if (abi_err != KCR_OK) {
        kcr__controller_options_release(&local); /* the predicates and limiter are ours to free */
        return abi_err;
    }
    opts = &local;
    if (out)
        *out = NULL;
    if (!m) {
        if (opts) /* the declaration's predicates and limiter are ours to free */
            kcr__controller_options_release(opts);
        return kcr__fail(KCR_ERR_INVALID, "kcr_manager_add_controller: NULL manager");
    }
    if (atomic_load(&m->ran)) { /* say so before any discovery (checked again below) */
        if (opts)
            kcr__controller_options_release(opts);
        return kcr__fail(KCR_ERR_STATE, "controller \"%s\": add controllers before kcr_manager_run",
                         opts && opts->name ? opts->name : "");
    }
    kcr_controller *c = NULL;
    kcr_err err = kcr__controller_new(m->client, m->stop_cancel,
                                      "install its CustomResourceDefinition (or check the "
                                      "group, version and plural), or declare the source's scope "
                                      "(and the primary's kind) to start before it is served",
                                      opts, &c);
    if (err != KCR_OK)
        return err;
    pthread_mutex_lock(&m->lock);
    if (atomic_load(&m->ran))
        err = kcr__fail(KCR_ERR_STATE, "controller \"%s\": add controllers before kcr_manager_run",
                        c->name);
    for (size_t i = 0; err == KCR_OK && i < m->n_ctls; i++)
        if (strcmp(m->ctls[i]->c->name, c->name) == 0)
            err = kcr__fail(KCR_ERR_EXISTS,
                            "a controller named \"%s\" already exists (names must be unique: they "
                            "label metrics and logs)",
                            c->name);
    mgr_ctl *mc = NULL;
    mgr_ctl **nc = NULL;
    if (err == KCR_OK && !(nc = realloc(m->ctls, (m->n_ctls + 1) * sizeof *nc)))
        err = kcr__fail(KCR_ERR_NOMEM, "out of memory adding a controller");
    if (nc)
        m->ctls = nc;
    if (err == KCR_OK) {
        c->env_ops = &kcr__mgr_env_ops;
        c->env = m;
        err = kcr__mgr_ctl_new(m, c, &mc);
    }
    if (err == KCR_OK) {
        mc->sharded = m->shard && !opts->unsharded;
        c->env_ctl = mc;
        err = kcr__mgr_bind_sources(mc);
        if (err == KCR_OK)
            err = kcr__instrument_caches(mc);
        if (err != KCR_OK) {
            for (size_t i = 0; i < c->n_sources; i++) /* before any start: no callback ran */
                if (mc->regs[i])
                    kcr_informer_remove_handler(mc->infs[i], mc->regs[i]);
            kcr__mgr_ctl_free(mc);
            mc = NULL;
        }
    }
    if (err == KCR_OK)
        m->ctls[m->n_ctls++] = mc;
    pthread_mutex_unlock(&m->lock);
    if (err != KCR_OK) {
        kcr__controller_free(c);
        return err;
    }
    if (out)
        *out = c;
    return KCR_OK;
}
