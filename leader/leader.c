/* kcr_leader_elector: options and their validation, start/stop, getters.
 * The election itself runs in leader_loop.c, its requests in leader_call.c. */
#include "kcr/leader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/abi.h"
#include "core/identity.h"
#include "leader/leader_internal.h"
#include "core/clock.h"
#include "core/error.h"

#define DEFAULT_LEASE_MS 15000
#define DEFAULT_RENEW_MS 10000
#define DEFAULT_RETRY_MS 2000
#define MAX_MS INT64_C(1000000000) /* 11.5 days: nanosecond arithmetic stays far from overflow */

static kcr_err validate(const kcr_leader_elector_options *o, int64_t lease, int64_t renew,
                        int64_t retry)
{
    if (!o->lease_namespace || !*o->lease_namespace)
        return kcr__fail(KCR_ERR_INVALID, "leader election: lease_namespace is required");
    if (!o->lease_name || !*o->lease_name)
        return kcr__fail(KCR_ERR_INVALID, "leader election: lease_name is required");
    if (o->identity && !*o->identity)
        return kcr__fail(KCR_ERR_INVALID, "leader election: identity is empty (NULL picks one)");
    if (lease < 0 || renew < 0 || retry < 0)
        return kcr__fail(KCR_ERR_INVALID,
                         "leader election: durations must be positive (lease_duration_ms %lld, "
                         "renew_deadline_ms %lld, retry_period_ms %lld)",
                         (long long)lease, (long long)renew, (long long)retry);
    if (lease > MAX_MS || renew > MAX_MS || retry > MAX_MS)
        return kcr__fail(KCR_ERR_INVALID,
                         "leader election: durations must be at most %lld ms (lease_duration_ms "
                         "%lld, renew_deadline_ms %lld, retry_period_ms %lld)",
                         (long long)MAX_MS, (long long)lease, (long long)renew, (long long)retry);
    if (lease <= renew)
        return kcr__fail(KCR_ERR_INVALID,
                         "leader election: lease_duration_ms (%lld) must be greater than "
                         "renew_deadline_ms (%lld)",
                         (long long)lease, (long long)renew);
    /* renew > 1.2 * retry, in integers: 5 * renew > 6 * retry */
    if (5 * renew <= 6 * retry)
        return kcr__fail(KCR_ERR_INVALID,
                         "leader election: renew_deadline_ms (%lld) must be greater than 1.2 x "
                         "retry_period_ms (%lld)",
                         (long long)renew, (long long)retry);
    return KCR_OK;
}

static char *make_identity(const char *given)
{
    if (given)
        return strdup(given);
    char host[256], uuid[37];
    kcr__hostname(host, sizeof host);
    if (kcr__uuid_v4(uuid) != KCR_OK)
        return NULL;
    size_t n = strlen(host) + 1 + sizeof uuid;
    char *id = malloc(n);
    if (id)
        snprintf(id, n, "%s_%s", host, uuid);
    return id;
}

static void destroy(kcr_leader_elector *e)
{
    kcr_cancel_free(e->call_cancel);
    pthread_cond_destroy(&e->cond);
    pthread_mutex_destroy(&e->lock);
    free(e->ns);
    free(e->name);
    free(e->identity);
    free(e->holder);
    free(e);
}

kcr_err (kcr_leader_elector_new)(size_t opts_size, kcr_client *client,
                                 const kcr_leader_elector_options *opts, kcr_leader_elector **out)
{
    KCR__ABI_OPTS(kcr_leader_elector_options, opts, opts_size);
    if (!out)
        return kcr__fail(KCR_ERR_INVALID, "leader election: out is NULL");
    *out = NULL;
    if (!client || !opts)
        return kcr__fail(KCR_ERR_INVALID, "leader election: a client and options are required");
    int64_t lease = opts->lease_duration_ms ? opts->lease_duration_ms : DEFAULT_LEASE_MS;
    int64_t renew = opts->renew_deadline_ms ? opts->renew_deadline_ms : DEFAULT_RENEW_MS;
    int64_t retry = opts->retry_period_ms ? opts->retry_period_ms : DEFAULT_RETRY_MS;
    kcr_err err = validate(opts, lease, renew, retry);
    if (err != KCR_OK)
        return err;
    kcr_leader_elector *e = calloc(1, sizeof *e);
    if (!e)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory creating a leader elector");
    if (pthread_mutex_init(&e->lock, NULL) != 0) {
        free(e);
        return kcr__fail(KCR_ERR_NOMEM, "leader election: cannot create a mutex");
    }
    if (kcr__cond_init_monotonic(&e->cond) != 0) {
        pthread_mutex_destroy(&e->lock);
        free(e);
        return kcr__fail(KCR_ERR_NOMEM, "leader election: cannot create a condition variable");
    }
    if ((err = kcr_cancel_new(&e->call_cancel)) != KCR_OK) {
        destroy(e);
        return err;
    }
    e->client = client;
    e->lease_ms = lease;
    e->renew_ms = renew;
    e->retry_ms = retry;
    e->lease_s = (lease + 999) / 1000;
    e->keep_lease_on_stop = opts->keep_lease_on_stop;
    e->on_started = opts->on_started_leading;
    e->on_stopped = opts->on_stopped_leading;
    e->on_new_leader = opts->on_new_leader;
    e->user_data = opts->user_data;
    e->ns = strdup(opts->lease_namespace);
    e->name = strdup(opts->lease_name);
    e->holder = strdup("");
    e->identity = make_identity(opts->identity);
    if (!e->ns || !e->name || !e->holder || !e->identity) {
        err = e->identity || opts->identity
                  ? kcr__fail(KCR_ERR_NOMEM, "out of memory creating a leader elector")
                  : kcr__fail(KCR_ERR_IO, "leader election: cannot make an identity (no "
                                          "hostname?): set opts->identity");
        destroy(e);
        return err;
    }
    *out = e;
    return KCR_OK;
}

kcr_err kcr_leader_elector_start(kcr_leader_elector *e)
{
    if (!e)
        return kcr__fail(KCR_ERR_INVALID, "leader election: NULL elector");
    pthread_mutex_lock(&e->lock);
    if (e->started || e->stopping) {
        pthread_mutex_unlock(&e->lock);
        return kcr__fail(KCR_ERR_STATE, e->started ? "leader election: already started"
                                                   : "leader election: stopped");
    }
    kcr_err err = KCR_OK;
    if (pthread_create(&e->call_thread, NULL, kcr__leader_call_main, e) != 0) {
        err = kcr__fail(KCR_ERR_NOMEM, "leader election: cannot start the request thread");
    } else if (pthread_create(&e->thread, NULL, kcr__leader_main, e) != 0) {
        e->call_quit = true;
        pthread_cond_broadcast(&e->cond);
        pthread_mutex_unlock(&e->lock);
        pthread_join(e->call_thread, NULL);
        pthread_mutex_lock(&e->lock);
        e->call_quit = false;
        err = kcr__fail(KCR_ERR_NOMEM, "leader election: cannot start the elector thread");
    } else {
        e->started = true;
    }
    pthread_mutex_unlock(&e->lock);
    return err;
}

void kcr_leader_elector_stop(kcr_leader_elector *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&e->lock);
    bool join = e->started && !e->joined;
    e->joined = true;
    e->stopping = true;
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
    if (!join)
        return;
    pthread_join(e->thread, NULL);
    pthread_mutex_lock(&e->lock);
    e->call_quit = true;
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
    pthread_join(e->call_thread, NULL);
}

void kcr_leader_elector_free(kcr_leader_elector *e)
{
    if (!e)
        return;
    kcr_leader_elector_stop(e);
    kcr_object_unref(e->call_out);
    free(e->call_body);
    free(e->call_msg);
    destroy(e);
}

bool kcr_leader_elector_is_leader(kcr_leader_elector *e)
{
    if (!e)
        return false;
    pthread_mutex_lock(&e->lock);
    bool leading = e->leading;
    pthread_mutex_unlock(&e->lock);
    return leading;
}

const char *kcr_leader_elector_identity(const kcr_leader_elector *e)
{
    return e ? e->identity : "";
}

char *kcr_leader_elector_holder(kcr_leader_elector *e)
{
    if (!e)
        return strdup("");
    pthread_mutex_lock(&e->lock);
    char *holder = strdup(e->holder);
    pthread_mutex_unlock(&e->lock);
    return holder;
}

void (kcr_leader_elector_get_stats)(size_t out_size, kcr_leader_elector *e,
                                    kcr_leader_elector_stats *out)
{
    if (!out || !e) {
        kcr__abi_out(out, out_size, &(kcr_leader_elector_stats){0}, sizeof(kcr_leader_elector_stats));
        return;
    }
    pthread_mutex_lock(&e->lock);
    kcr_leader_elector_stats st = e->stats;
    pthread_mutex_unlock(&e->lock);
    kcr__abi_out(out, out_size, &st, sizeof st);
}
