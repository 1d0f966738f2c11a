/* The leader elector's thread: campaign for the Lease, renew it while
 * leading, step down when renewing fails for renew_deadline_ms, release it
 * on a clean stop. The decisions follow client-go's leaderelection:
 *
 * - A Lease held by someone else is expired when leaseDurationSeconds have
 *   passed ON OUR MONOTONIC CLOCK since we last saw its record change; the
 *   holder's renewTime is never compared with our clock (clocks differ).
 * - Every write carries the resourceVersion we read, so of two candidates
 *   racing for an expired Lease exactly one wins (the other gets a 409).
 * - The leader measures its renew deadline from the moment it SENT its last
 *   successful renewal, which is before the server stamped it: it steps
 *   down before any observer can see the Lease expire. */
#include <stdlib.h>
#include <string.h>

#include "leader/leader_internal.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"

typedef enum attempt {
    ATTEMPT_OURS,   /* acquired or renewed */
    ATTEMPT_HELD,   /* someone else holds a lease that has not expired */
    ATTEMPT_FAILED  /* an error, a timeout or a lost race (409) */
} attempt;

typedef struct loop {
    kcr_leader_elector *e;
    kcr_object *lease;      /* the Lease as last read or written */
    kcr__lease_record seen; /* its record */
    int64_t seen_at_ns;     /* when that record last changed (monotonic) */
    char *reported;         /* holder last given to on_new_leader */
} loop;

static int64_t wall_us(void)
{
    return kcr__wall_ns() / 1000;
}

/* Takes `obj` as the Lease now known; notes when its record changed. */
static void observe(loop *l, kcr_object *obj)
{
    kcr__lease_record rec = {0};
    if (kcr__lease_read(obj, &rec) != KCR_OK) {
        kcr_object_unref(obj);
        return;
    }
    bool changed = !l->seen.spec_json || strcmp(l->seen.spec_json, rec.spec_json) != 0;
    kcr__lease_record_clear(&l->seen);
    l->seen = rec;
    if (changed)
        l->seen_at_ns = kcr__now_ns();
    kcr_object_unref(l->lease);
    l->lease = obj;
    char *holder = strdup(rec.holder);
    if (holder) {
        pthread_mutex_lock(&l->e->lock);
        free(l->e->holder);
        l->e->holder = holder;
        pthread_mutex_unlock(&l->e->lock);
    }
}

static bool expired(const loop *l, int64_t now_ns)
{
    return now_ns >= l->seen_at_ns + l->seen.duration_s * KCR_NS_PER_S;
}

/* Writes our record into the Lease: create when `create`, else update the
 * Lease we know, conditional on its resourceVersion. */
static kcr_err write_lease(loop *l, bool create, const char *acquire, int64_t transitions,
                           int64_t duration_s, int64_t deadline_ns)
{
    kcr_leader_elector *e = l->e;
    kcr__lease_spec spec = {.holder = e->identity,
                            .duration_s = duration_s,
                            .acquire_time = acquire,
                            .renew_us = wall_us(),
                            .transitions = transitions};
    char *json;
    kcr_err err = kcr__lease_json(create ? NULL : l->lease, e->ns, e->name, &spec, &json);
    if (err != KCR_OK)
        return err;
    kcr_object *out;
    err = kcr__leader_call(e, create ? KCR__LEASE_CREATE : KCR__LEASE_UPDATE, json, deadline_ns,
                           &out);
    if (err == KCR_OK)
        observe(l, out);
    return err;
}

static void log_failure(const loop *l, const char *what)
{
    kcr__log(KCR_LOG_INFO, "leader", "%s/%s: %s failed: %s", l->e->ns, l->e->name, what,
             kcr_last_error());
}

/* One round of client-go's tryAcquireOrRenew. */
static attempt try_acquire_or_renew(loop *l, bool leading, int64_t deadline_ns)
{
    kcr_leader_elector *e = l->e;
    char now_text[32];
    kcr_time_format_micro(wall_us(), now_text, sizeof now_text);
    /* Fast path: the leader updates the Lease it last wrote. */
    if (leading && l->lease) {
        kcr_err err = write_lease(l, false, l->seen.acquire_time, l->seen.transitions, e->lease_s,
                                  deadline_ns);
        if (err == KCR_OK)
            return ATTEMPT_OURS;
        if (err == KCR_ERR_TIMEOUT || err == KCR_ERR_CANCELED)
            return ATTEMPT_FAILED;
        kcr__log(KCR_LOG_DEBUG, "leader", "%s/%s: renewal failed (%s), reading the Lease", e->ns,
                 e->name, kcr_last_error());
    }
    kcr_object *got;
    kcr_err err = kcr__leader_call(e, KCR__LEASE_GET, NULL, deadline_ns, &got);
    if (err == KCR_ERR_NOT_FOUND) {
        err = write_lease(l, true, now_text, 0, e->lease_s, deadline_ns);
        if (err == KCR_OK)
            return ATTEMPT_OURS;
        log_failure(l, "creating the Lease"); /* AlreadyExists: another candidate was first */
        return ATTEMPT_FAILED;
    }
    if (err != KCR_OK) {
        log_failure(l, "reading the Lease");
        return ATTEMPT_FAILED;
    }
    observe(l, got);
    bool ours = strcmp(l->seen.holder, e->identity) == 0;
    if (l->seen.holder[0] && !ours && !expired(l, kcr__now_ns()))
        return ATTEMPT_HELD;
    /* Free, expired or ours: take it (a new holder bumps leaseTransitions). */
    err = ours ? write_lease(l, false, l->seen.acquire_time[0] ? l->seen.acquire_time : now_text,
                             l->seen.transitions, e->lease_s, deadline_ns)
               : write_lease(l, false, now_text, l->seen.transitions + 1, e->lease_s, deadline_ns);
    if (err == KCR_OK)
        return ATTEMPT_OURS;
    log_failure(l, ours ? "renewing the Lease" : "taking the Lease"); /* 409: lost the race */
    return ATTEMPT_FAILED;
}

/* Tells on_new_leader when the observed holder changed. */
static void report_holder(loop *l)
{
    kcr_leader_elector *e = l->e;
    const char *holder = l->seen.holder;
    if (!holder || (l->reported && strcmp(l->reported, holder) == 0))
        return; /* nothing read yet, or no change */
    char *copy = strdup(holder);
    if (!copy)
        return;
    free(l->reported);
    l->reported = copy;
    if (e->on_new_leader)
        e->on_new_leader(copy, e->user_data);
}

/* Sleeps until `until_ns` (monotonic) or a stop; true when stopping. */
static bool sleep_until(kcr_leader_elector *e, int64_t until_ns)
{
    struct timespec ts = kcr__timespec_at(until_ns);
    pthread_mutex_lock(&e->lock);
    while (!e->stopping && kcr__now_ns() < until_ns)
        pthread_cond_timedwait(&e->cond, &e->lock, &ts);
    bool stopping = e->stopping;
    pthread_mutex_unlock(&e->lock);
    return stopping;
}

static bool is_stopping(kcr_leader_elector *e)
{
    pthread_mutex_lock(&e->lock);
    bool stopping = e->stopping;
    pthread_mutex_unlock(&e->lock);
    return stopping;
}

static void count(kcr_leader_elector *e, uint64_t *counter)
{
    pthread_mutex_lock(&e->lock);
    (*counter)++;
    pthread_mutex_unlock(&e->lock);
}

static void set_leading(kcr_leader_elector *e, bool leading)
{
    pthread_mutex_lock(&e->lock);
    e->leading = leading;
    e->stats.leading = leading;
    if (leading)
        e->stats.acquisitions++;
    pthread_mutex_unlock(&e->lock);
}

/* Campaigns until this candidate holds the Lease (true; *acquired_ns is
 * when the winning attempt started) or stops (false). */
static bool campaign(loop *l, int64_t *acquired_ns)
{
    kcr_leader_elector *e = l->e;
    for (;;) {
        int64_t start = kcr__now_ns();
        attempt a = try_acquire_or_renew(l, false, start + e->renew_ms * KCR_NS_PER_MS);
        report_holder(l);
        if (a == ATTEMPT_OURS) {
            *acquired_ns = start;
            return true;
        }
        if (a == ATTEMPT_FAILED && !is_stopping(e))
            count(e, &e->stats.failed_attempts);
        /* Retry every retry period, or as soon as the holder's lease would
         * expire (a released Lease lapses after 1 s, sooner than a retry). */
        int64_t next = start + e->retry_ms * KCR_NS_PER_MS;
        if (a == ATTEMPT_HELD) {
            int64_t expiry = l->seen_at_ns + l->seen.duration_s * KCR_NS_PER_S + KCR_NS_PER_MS;
            if (expiry < next)
                next = expiry;
        }
        if (sleep_until(e, next))
            return false;
    }
}

/* Renews every retry period; returns true when stopped while leading, false
 * when renewing failed until the renew deadline (or another holder took
 * over), in which case on_stopped_leading has run. */
static bool lead(loop *l, int64_t acquired_ns)
{
    kcr_leader_elector *e = l->e;
    int64_t last_ok = acquired_ns, last_try = acquired_ns;
    for (;;) {
        int64_t deadline = last_ok + e->renew_ms * KCR_NS_PER_MS;
        int64_t next = last_try + e->retry_ms * KCR_NS_PER_MS;
        if (sleep_until(e, next < deadline ? next : deadline))
            return true;
        int64_t start = kcr__now_ns();
        attempt a = start < deadline ? try_acquire_or_renew(l, true, deadline) : ATTEMPT_FAILED;
        last_try = start;
        if (a == ATTEMPT_OURS) {
            last_ok = start;
            count(e, &e->stats.renewals);
            continue;
        }
        if (is_stopping(e))
            return true;
        if (a == ATTEMPT_FAILED && start < deadline)
            count(e, &e->stats.failed_attempts);
        if (a == ATTEMPT_FAILED && kcr__now_ns() < deadline)
            continue;
        set_leading(e, false);
        if (e->on_stopped)
            e->on_stopped(e->user_data);
        kcr__log(KCR_LOG_WARN, "leader", "%s/%s: %s lost the lease: %s", e->ns, e->name,
                 e->identity,
                 a == ATTEMPT_HELD ? "another candidate holds it"
                                   : "no renewal succeeded within the renew deadline");
        report_holder(l);
        return false;
    }
}

/* Gives the Lease up: leaseDurationSeconds 1, holder kept (observers see who
 * released it), so a standby takes over about one retry period later. */
static void release(loop *l)
{
    kcr_leader_elector *e = l->e;
    pthread_mutex_lock(&e->lock);
    e->releasing = true;
    pthread_mutex_unlock(&e->lock);
    int64_t budget_ms = e->retry_ms > 1000 ? e->retry_ms : 1000;
    if (budget_ms > e->renew_ms)
        budget_ms = e->renew_ms;
    int64_t deadline = kcr__now_ns() + budget_ms * KCR_NS_PER_MS;
    for (int tries = 0; tries < 3 && l->lease; tries++) {
        kcr_err err =
            write_lease(l, false, l->seen.acquire_time, l->seen.transitions, 1, deadline);
        if (err == KCR_OK) {
            kcr__log(KCR_LOG_INFO, "leader", "%s/%s: %s released the lease", e->ns, e->name,
                     e->identity);
            return;
        }
        if (err != KCR_ERR_CONFLICT)
            break;
        /* A renewal we abandoned may have landed: re-read, release if still ours. */
        kcr_object *got;
        if (kcr__leader_call(e, KCR__LEASE_GET, NULL, deadline, &got) != KCR_OK)
            break;
        observe(l, got);
        if (strcmp(l->seen.holder, e->identity) != 0)
            return;
    }
    log_failure(l, "releasing the Lease");
}

void *kcr__leader_main(void *arg)
{
    loop l = {.e = arg};
    kcr_leader_elector *e = l.e;
    int64_t acquired;
    bool won = campaign(&l, &acquired);
    if (won && is_stopping(e)) {
        /* won just as the stop came: never lead, give the Lease back */
        if (!e->keep_lease_on_stop)
            release(&l);
    } else if (won) {
        set_leading(e, true);
        kcr__log(KCR_LOG_INFO, "leader", "%s/%s: %s acquired the lease", e->ns, e->name,
                 e->identity);
        if (e->on_started)
            e->on_started(e->user_data);
        if (lead(&l, acquired)) {
            set_leading(e, false);
            if (e->on_stopped)
                e->on_stopped(e->user_data);
            if (!e->keep_lease_on_stop)
                release(&l);
        }
    }
    kcr_object_unref(l.lease);
    kcr__lease_record_clear(&l.seen);
    free(l.reported);
    return NULL;
}
