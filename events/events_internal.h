/* Internal: the event recorder's state, shared by events.c (public API, the
 * queue and its sender thread), events_filter.c (spam limit and series
 * cache) and events_write.c (building and writing Events). */
#ifndef KCR_EVENTS_INTERNAL_H
#define KCR_EVENTS_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/strmap.h"
#include "kcr/events.h"

static const kcr_resource KCR__EVENTS = {"events.k8s.io", "v1", "events"};

#define KCR__EVENT_SERIES_MS (6 * 60 * 1000) /* a repeat within this joins the series */
#define KCR__EVENT_CACHE_MAX 4096            /* objects / events tracked, each map */
#define KCR__EVENT_LOGGED_MAX 32             /* failure reasons logged once each */
#define KCR__EVENT_FIELD_MAX 128             /* reason, action, reportingInstance */
#define KCR__EVENT_NOTE_MAX 1024

/* One write for the sender: create `event`, or (count >= 2) set its series. */
typedef struct kcr__event_item {
    kcr_object *event; /* the Event as first recorded: name, eventTime, ... */
    int64_t count;     /* 0: create; else series.count */
    int64_t last_ms;   /* series.lastObservedTime, clock ms */
} kcr__event_item;

/* The spam limit (a token bucket per regarding object) and the series cache
 * (the Event of each distinct event seen in the last 6 minutes). Not
 * thread-safe: the recorder's lock guards it. */
typedef struct kcr__event_filter {
    struct kcr__strmap buckets; /* spam key -> struct bucket */
    struct kcr__strmap series;  /* event key -> struct series */
    int burst;
    int64_t refill_ms;
    int64_t swept_ms;
} kcr__event_filter;

void kcr__event_filter_init(kcr__event_filter *f, int burst, int64_t refill_ms);
void kcr__event_filter_clear(kcr__event_filter *f);

/* Takes a token from the bucket of spam_key; false when it is empty. */
bool kcr__event_filter_allow(kcr__event_filter *f, const char *spam_key, int64_t now_ms);

/* A repeat of an event seen in the last 6 minutes: counts it and fills
 * *item (a new reference to its Event) for a series update; false when the
 * event is new (or its series finished). */
bool kcr__event_filter_repeat(kcr__event_filter *f, const char *event_key, int64_t now_ms,
                              kcr__event_item *item);

/* Remembers the Event (a reference is taken) created for event_key. */
kcr_err kcr__event_filter_add(kcr__event_filter *f, const char *event_key, kcr_object *event,
                              int64_t now_ms);

struct kcr_event_recorder {
    kcr_client *client; /* borrowed */
    kcr_cancel *cancel; /* every write's; free triggers it at its drain deadline */
    char *controller, *instance;
    bool synchronous;
    const kcr_clock *clock;

    pthread_mutex_t lock;
    pthread_cond_t cond; /* queue changes, sender idle, quit */
    pthread_t sender;
    bool sender_started, sending, quit;
    kcr__event_item *queue; /* ring */
    size_t cap, head, len;
    kcr__event_filter filter;
    kcr_event_recorder_stats stats;
    uint64_t last_name_ns; /* makes Event names unique */
    char *logged[KCR__EVENT_LOGGED_MAX];
    size_t n_logged;
};

/* The length of s cut to at most max bytes without splitting a UTF-8
 * character. */
size_t kcr__utf8_cut(const char *s, size_t max);

/* Builds the Event for `ev` (validated by the caller) with note `note`,
 * recorded at now_ms: *out is a new object. KCR_ERR_INVALID for strings that
 * are not UTF-8. Takes the lock briefly (for the unique name). */
kcr_err kcr__event_build(kcr_event_recorder *r, const kcr_event *ev, const char *note,
                         int64_t now_ms, kcr_object **out);

/* Writes one item to the server and counts the outcome (created,
 * series_updates or failed, logging the first failure of each reason).
 * Called without the lock; never retries. */
void kcr__event_send(kcr_event_recorder *r, const kcr__event_item *item);

#endif
