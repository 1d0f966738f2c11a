/* Internal: the leader elector's state, shared by leader.c (public API),
 * leader_loop.c (the elector's thread) and leader_call.c (the thread that
 * makes its requests).
 *
 * Two threads per started elector: the elector's thread keeps time, decides
 * and runs the callbacks; it hands every request to the request thread and
 * waits for it with a deadline. So a hung request can never delay
 * on_stopped_leading past the renew deadline: the elector stops waiting,
 * abandons and cancels the request (the request thread drops its result
 * when it returns) and steps down. Everything below is guarded by `lock`. */
#ifndef KCR_LEADER_INTERNAL_H
#define KCR_LEADER_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "leader/lease.h"
#include "kcr/leader.h"

typedef enum kcr__lease_op { KCR__LEASE_GET, KCR__LEASE_CREATE, KCR__LEASE_UPDATE } kcr__lease_op;

typedef enum kcr__call_state {
    KCR__CALL_IDLE,    /* the request thread waits for work */
    KCR__CALL_PENDING, /* a request is handed over */
    KCR__CALL_RUNNING,
    KCR__CALL_DONE     /* its result waits for the elector */
} kcr__call_state;

struct kcr_leader_elector {
    kcr_client *client; /* borrowed */
    char *ns, *name, *identity;
    int64_t lease_ms, renew_ms, retry_ms;
    int64_t lease_s; /* leaseDurationSeconds written: lease_ms rounded up */
    bool keep_lease_on_stop;
    void (*on_started)(void *);
    void (*on_stopped)(void *);
    void (*on_new_leader)(const char *, void *);
    void *user_data;

    pthread_mutex_t lock;
    pthread_cond_t cond; /* monotonic; every change of state below */
    pthread_t thread, call_thread;
    bool started, stopping, releasing, joined;

    /* The request slot: one request at a time. */
    kcr__call_state call;
    bool call_abandoned; /* the elector gave up waiting: drop the result */
    bool call_quit;      /* the request thread exits when idle */
    kcr__lease_op call_op;
    char *call_body;     /* owned by the slot */
    kcr_object *call_out;
    kcr_err call_err;
    char *call_msg;      /* kcr_last_error() of a failed request, malloc'd */
    /* Passed to every request; triggered when the elector abandons the
     * running one (its deadline, or a stop), so a request hanging in a dead
     * server returns at once; reset by the request thread once that request
     * has returned, before the slot is idle again. */
    kcr_cancel *call_cancel;

    /* What the elector's thread knows (written by it, read by getters). */
    bool leading;
    char *holder;               /* last observed holder, "" when none */
    kcr_leader_elector_stats stats;
};

/* The elector's thread (leader_loop.c). */
void *kcr__leader_main(void *arg);

/* The request thread (leader_call.c). */
void *kcr__leader_call_main(void *arg);

/* Runs one request on the request thread and waits for it until
 * deadline_ns (monotonic) or, unless the elector is releasing, a stop.
 * `body` (JSON for create/update, may be NULL for get) is taken. On KCR_OK
 * or an API error the request ran: *out gets its object (a new reference,
 * NULL on error) and kcr_last_error() its message. KCR_ERR_TIMEOUT /
 * KCR_ERR_CANCELED: the elector stopped waiting and cancelled the request;
 * it may still have completed on the server. Called on the elector's thread without the lock. */
kcr_err kcr__leader_call(kcr_leader_elector *e, kcr__lease_op op, char *body, int64_t deadline_ns,
                         kcr_object **out);

#endif
