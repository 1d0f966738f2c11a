/* The leader elector's request thread: makes one Lease request at a time
 * for the elector's thread, which waits for it with a deadline and may
 * abandon it (see leader_internal.h). */
#include <stdlib.h>
#include <string.h>

#include "leader/leader_internal.h"
#include "core/clock.h"
#include "core/error.h"

static kcr_err run_request(kcr_leader_elector *e, kcr__lease_op op, const char *body,
                           kcr_object **out)
{
    switch (op) {
    case KCR__LEASE_GET:
        return kcr_client_get(
            e->client,
            &(kcr_request){
                .resource = &KCR__LEASES, .ns = e->ns, .name = e->name, .cancel = e->call_cancel},
            out);
    case KCR__LEASE_CREATE:
        return kcr_client_create(
            e->client,
            &(kcr_request){
                .resource = &KCR__LEASES, .ns = e->ns, .body = body, .cancel = e->call_cancel},
            out);
    case KCR__LEASE_UPDATE:
        return kcr_client_update(
            e->client,
            &(kcr_request){
                .resource = &KCR__LEASES, .ns = e->ns, .body = body, .cancel = e->call_cancel},
            out);
    }
    return kcr__fail(KCR_ERR_INVALID, "unknown lease operation %d", (int)op);
}

void *kcr__leader_call_main(void *arg)
{
    kcr_leader_elector *e = arg;
    pthread_mutex_lock(&e->lock);
    for (;;) {
        while (e->call != KCR__CALL_PENDING && !e->call_quit)
            pthread_cond_wait(&e->cond, &e->lock);
        if (e->call != KCR__CALL_PENDING)
            break;
        e->call = KCR__CALL_RUNNING;
        kcr__lease_op op = e->call_op;
        char *body = e->call_body;
        e->call_body = NULL;
        pthread_mutex_unlock(&e->lock);

        kcr_object *out = NULL;
        kcr_err err = run_request(e, op, body, &out);
        char *msg = err != KCR_OK ? strdup(kcr_last_error()) : NULL;
        free(body);

        pthread_mutex_lock(&e->lock);
        if (e->call_abandoned) {
            kcr_object_unref(out);
            free(msg);
            kcr_cancel_reset(e->call_cancel); /* no request uses it now */
            e->call_abandoned = false;
            e->call = KCR__CALL_IDLE;
        } else {
            e->call_out = out;
            e->call_err = err;
            e->call_msg = msg;
            e->call = KCR__CALL_DONE;
        }
        pthread_cond_broadcast(&e->cond);
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

/* Waits until the slot is in state `want`, the deadline passes or the
 * elector stops (unless it is releasing). Lock held. */
static void wait_for(kcr_leader_elector *e, kcr__call_state want, int64_t deadline_ns)
{
    struct timespec ts = kcr__timespec_at(deadline_ns);
    while (e->call != want && !(e->stopping && !e->releasing) && kcr__now_ns() < deadline_ns)
        pthread_cond_timedwait(&e->cond, &e->lock, &ts);
}

kcr_err kcr__leader_call(kcr_leader_elector *e, kcr__lease_op op, char *body, int64_t deadline_ns,
                         kcr_object **out)
{
    *out = NULL;
    pthread_mutex_lock(&e->lock);
    /* An abandoned request may still be running: wait for the slot. */
    wait_for(e, KCR__CALL_IDLE, deadline_ns);
    if (e->call != KCR__CALL_IDLE || (e->stopping && !e->releasing)) {
        bool canceled = e->stopping && !e->releasing;
        pthread_mutex_unlock(&e->lock);
        free(body);
        return canceled ? kcr__fail(KCR_ERR_CANCELED, "leader election: stopping")
                        : kcr__fail(KCR_ERR_TIMEOUT,
                                    "leader election: an earlier Lease request is still running");
    }
    e->call_op = op;
    e->call_body = body;
    e->call = KCR__CALL_PENDING;
    pthread_cond_broadcast(&e->cond);
    wait_for(e, KCR__CALL_DONE, deadline_ns);
    kcr_err err;
    if (e->call == KCR__CALL_DONE) {
        *out = e->call_out;
        err = e->call_err;
        char *msg = e->call_msg;
        e->call_out = NULL;
        e->call_msg = NULL;
        e->call = KCR__CALL_IDLE;
        pthread_mutex_unlock(&e->lock);
        if (err != KCR_OK)
            kcr__fail(err, "%s", msg ? msg : kcr_strerror(err));
        free(msg);
        return err;
    }
    bool canceled = e->stopping && !e->releasing;
    if (e->call == KCR__CALL_PENDING) { /* never started: take it back */
        free(e->call_body);
        e->call_body = NULL;
        e->call = KCR__CALL_IDLE;
    } else {
        e->call_abandoned = true;
        kcr_cancel_trigger(e->call_cancel); /* a hung request returns now */
    }
    pthread_mutex_unlock(&e->lock);
    return canceled ? kcr__fail(KCR_ERR_CANCELED, "leader election: stopping")
                    : kcr__fail(KCR_ERR_TIMEOUT, "leader election: the Lease request ran past "
                                                 "its deadline");
}
