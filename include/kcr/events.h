/* Event recorder: events.k8s.io/v1 Events about objects, as client-go's
 * events broadcaster writes them.
 *
 * record() never blocks and never fails because of the server: events go
 * into a bounded queue drained by one sender thread (or, with
 * `synchronous`, are written on the caller's thread: for tests). Repeats of
 * the same (regarding, related, type, reason, action, note, reporting
 * controller) within 6 minutes become one Event with a growing
 * series {count, lastObservedTime}; per regarding object a token bucket
 * (burst 25, one token per 5 minutes) drops spam. A full queue drops the
 * event and counts it.
 *
 * Thread-safety: every function is thread-safe except _free. */
#ifndef KCR_EVENTS_H
#define KCR_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcr/client.h"
#include "kcr/error.h"
#include "kcr/export.h"
#include "kcr/object.h"
#include "kcr/time.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kcr_event_recorder kcr_event_recorder;

typedef enum kcr_event_type {
    KCR_EVENT_NORMAL = 0,
    KCR_EVENT_WARNING = 1
} kcr_event_type;

/* One event to record; everything is borrowed for the call (copied). */
typedef struct kcr_event {
    const kcr_object *regarding;      /* required: the object the event is about */
    const kcr_object *related;        /* NULL: none */
    kcr_event_type type;
    const char *reason;               /* required, UpperCamelCase, <= 128 bytes */
    const char *action;               /* what was done or failed, <= 128 bytes; NULL: reason */
    const char *note;                 /* human-readable, cut to 1 KiB; NULL: "" */
    const char *reporting_controller; /* NULL: the recorder's */
} kcr_event;

/* Zero means default for every field; strings are copied. */
typedef struct kcr_event_recorder_options {
    const char *reporting_controller; /* required, e.g. "sample-controller" */
    const char *reporting_instance;   /* NULL: "<reporting_controller>-<hostname>"; <= 128 bytes */
    size_t queue_size;                /* events waiting to be sent; 0: 1000 */
    int spam_burst;                   /* per regarding object; 0: 25 */
    int64_t spam_refill_ms;           /* one token per; 0: 300000 */
    bool synchronous;                 /* write on the caller's thread (tests) */
    const kcr_clock *clock;           /* eventTime and series times; NULL: real */
} kcr_event_recorder_options;

/* Counters, for metrics and tests. */
typedef struct kcr_event_recorder_stats {
    uint64_t recorded;       /* record() calls accepted */
    uint64_t created;        /* Events created on the server */
    uint64_t series_updates; /* repeats written as a series update */
    uint64_t dropped_full;   /* dropped: queue full */
    uint64_t dropped_spam;   /* dropped: spam limit */
    uint64_t failed;         /* writes the server refused (logged once per reason) */
} kcr_event_recorder_stats;

/* A recorder writing through `client` (borrowed until _free). */
KCR_API kcr_err kcr_event_recorder_new(size_t opts_size, kcr_client *client,
                                       const kcr_event_recorder_options *opts,
                                       kcr_event_recorder **out);
#define kcr_event_recorder_new(...) (kcr_event_recorder_new)(sizeof(kcr_event_recorder_options), __VA_ARGS__)

/* Sends what is queued (waiting at most 2 s, then cancelling the write in
 * flight and dropping the rest), stops the sender, frees. NULL is ignored. */
KCR_API void kcr_event_recorder_free(kcr_event_recorder *r);

/* Queues an event. KCR_ERR_INVALID for a missing regarding/reason, a
 * regarding object without kind or name, a reason or action over 128
 * bytes, an unknown type or text that is not UTF-8; KCR_OK otherwise, also
 * when the event is dropped (counted in stats). */
KCR_API kcr_err kcr_event_recorder_record(kcr_event_recorder *r, const kcr_event *ev);

/* kcr_event_recorder_record with the note formatted printf-style (ev->note
 * is ignored). */
KCR_API kcr_err kcr_event_recorder_recordf(kcr_event_recorder *r, const kcr_event *ev,
                                           const char *note_fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Waits until the queue is empty or timeout_ms passes (KCR_ERR_TIMEOUT; 0:
 * checks once; KCR_DURATION_INFINITE or above KCR_DURATION_MAX: no limit;
 * another negative value: KCR_ERR_INVALID). */
KCR_API kcr_err kcr_event_recorder_flush(kcr_event_recorder *r, int64_t timeout_ms);

KCR_API void kcr_event_recorder_get_stats(size_t out_size, kcr_event_recorder *r,
                                          kcr_event_recorder_stats *out);
#define kcr_event_recorder_get_stats(...) (kcr_event_recorder_get_stats)(sizeof(kcr_event_recorder_stats), __VA_ARGS__)

#ifdef __cplusplus
}
#endif

#endif
