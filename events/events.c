/* kcr_event_recorder: its life cycle, and the bounded queue drained by one
 * sender thread. record() is in events_record.c, the writes in
 * events_write.c. */
#include "kcr/events.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "events/events_internal.h"
#include "core/abi.h"
#include "core/identity.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"

#define DEFAULT_QUEUE 1000
#define DEFAULT_BURST 25
#define DEFAULT_REFILL_MS (5 * 60 * 1000)
#define FREE_DRAIN_MS 2000

static void *sender_main(void *arg)
{
    kcr_event_recorder *r = arg;
    pthread_mutex_lock(&r->lock);
    for (;;) {
        while (r->len == 0 && !r->quit)
            pthread_cond_wait(&r->cond, &r->lock);
        if (r->quit)
            break;
        kcr__event_item item = r->queue[r->head];
        r->head = (r->head + 1) % r->cap;
        r->len--;
        r->sending = true;
        pthread_mutex_unlock(&r->lock);
        kcr__event_send(r, &item);
        kcr_object_unref(item.event);
        pthread_mutex_lock(&r->lock);
        r->sending = false;
        pthread_cond_broadcast(&r->cond);
    }
    pthread_mutex_unlock(&r->lock);
    return NULL;
}

static void destroy(kcr_event_recorder *r)
{
    for (size_t i = 0; i < r->len; i++)
        kcr_object_unref(r->queue[(r->head + i) % r->cap].event);
    for (size_t i = 0; i < r->n_logged; i++)
        free(r->logged[i]);
    kcr__event_filter_clear(&r->filter);
    kcr_cancel_free(r->cancel);
    pthread_cond_destroy(&r->cond);
    pthread_mutex_destroy(&r->lock);
    free(r->queue);
    free(r->controller);
    free(r->instance);
    free(r);
}

/* "<controller>-<hostname>", cut to the 128 bytes the apiserver allows. */
static char *default_instance(const char *controller)
{
    char host[256];
    kcr__hostname(host, sizeof host);
    size_t n = strlen(controller) + 1 + strlen(host) + 1;
    char *buf = malloc(n);
    if (!buf)
        return NULL;
    snprintf(buf, n, "%s-%s", controller, host);
    buf[kcr__utf8_cut(buf, KCR__EVENT_FIELD_MAX)] = '\0';
    return buf;
}

kcr_err (kcr_event_recorder_new)(size_t opts_size, kcr_client *client,
                                 const kcr_event_recorder_options *opts, kcr_event_recorder **out)
{
    KCR__ABI_OPTS(kcr_event_recorder_options, opts, opts_size);
    if (opts->clock && kcr__abi_reserved(opts->clock->reserved, sizeof opts->clock->reserved,
                                         "kcr_event_recorder_options.clock") != KCR_OK)
        return KCR_ERR_INVALID; /* detail: kcr__abi_reserved */
    if (!out)
        return kcr__fail(KCR_ERR_INVALID, "event recorder: out is NULL");
    *out = NULL;
    if (!client || !opts)
        return kcr__fail(KCR_ERR_INVALID, "event recorder: a client and options are required");
    if (!opts->reporting_controller || !*opts->reporting_controller)
        return kcr__fail(KCR_ERR_INVALID, "event recorder: reporting_controller is required");
    if (opts->reporting_instance && strlen(opts->reporting_instance) > KCR__EVENT_FIELD_MAX)
        return kcr__fail(KCR_ERR_INVALID,
                         "event recorder: reporting_instance is longer than %d bytes",
                         KCR__EVENT_FIELD_MAX);
    if (opts->spam_burst < 0 || opts->spam_refill_ms < 0)
        return kcr__fail(KCR_ERR_INVALID,
                         "event recorder: spam_burst (%d) and spam_refill_ms (%lld) must not be "
                         "negative",
                         opts->spam_burst, (long long)opts->spam_refill_ms);
    kcr_event_recorder *r = calloc(1, sizeof *r);
    if (!r)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory creating an event recorder");
    if (pthread_mutex_init(&r->lock, NULL) != 0) {
        free(r);
        return kcr__fail(KCR_ERR_NOMEM, "event recorder: cannot create a mutex");
    }
    if (kcr__cond_init_monotonic(&r->cond) != 0) {
        pthread_mutex_destroy(&r->lock);
        free(r);
        return kcr__fail(KCR_ERR_NOMEM, "event recorder: cannot create a condition variable");
    }
    kcr_err err = kcr_cancel_new(&r->cancel);
    if (err != KCR_OK) {
        destroy(r);
        return err;
    }
    r->client = client;
    r->synchronous = opts->synchronous;
    r->clock = opts->clock;
    r->cap = opts->queue_size ? opts->queue_size : DEFAULT_QUEUE;
    kcr__event_filter_init(&r->filter, opts->spam_burst ? opts->spam_burst : DEFAULT_BURST,
                           opts->spam_refill_ms ? opts->spam_refill_ms : DEFAULT_REFILL_MS);
    r->controller = strdup(opts->reporting_controller);
    r->instance = opts->reporting_instance && *opts->reporting_instance
                      ? strdup(opts->reporting_instance)
                      : default_instance(opts->reporting_controller);
    r->queue = r->synchronous ? NULL : calloc(r->cap, sizeof *r->queue);
    if (!r->controller || !r->instance || (!r->synchronous && !r->queue)) {
        destroy(r);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory creating an event recorder");
    }
    if (!r->synchronous) {
        if (pthread_create(&r->sender, NULL, sender_main, r) != 0) {
            destroy(r);
            return kcr__fail(KCR_ERR_NOMEM, "event recorder: cannot start the sender thread");
        }
        r->sender_started = true;
    }
    *out = r;
    return KCR_OK;
}

void kcr_event_recorder_free(kcr_event_recorder *r)
{
    if (!r)
        return;
    if (r->sender_started) {
        bool drained = kcr_event_recorder_flush(r, FREE_DRAIN_MS) == KCR_OK;
        pthread_mutex_lock(&r->lock);
        size_t left = r->len;
        r->quit = true;
        pthread_cond_broadcast(&r->cond);
        pthread_mutex_unlock(&r->lock);
        if (!drained) {
            kcr__log(KCR_LOG_WARN, "events",
                     "dropping %zu queued events: the server did not take them within %d ms",
                     left, FREE_DRAIN_MS);
            kcr_cancel_trigger(r->cancel); /* a write hanging in a dead server returns now */
        }
        pthread_join(r->sender, NULL);
    }
    destroy(r);
}

kcr_err kcr_event_recorder_flush(kcr_event_recorder *r, int64_t timeout_ms)
{
    if (!r)
        return kcr__fail(KCR_ERR_INVALID, "event recorder: NULL recorder");
    if (timeout_ms < 0 && kcr__duration_check("kcr_event_recorder_flush: timeout_ms", timeout_ms,
                                               KCR__DURATION_INFINITE) != KCR_OK)
        return KCR_ERR_INVALID; /* detail: kcr__duration_check */
    int64_t deadline = timeout_ms < 0 || timeout_ms > KCR__MAX_DURATION_MS
                           ? INT64_MAX
                           : kcr__now_ns() + timeout_ms * KCR_NS_PER_MS;
    struct timespec ts = kcr__timespec_at(deadline);
    pthread_mutex_lock(&r->lock);
    while ((r->len || r->sending) && kcr__now_ns() < deadline)
        pthread_cond_timedwait(&r->cond, &r->lock, &ts);
    bool empty = !r->len && !r->sending;
    pthread_mutex_unlock(&r->lock);
    return empty ? KCR_OK
                 : kcr__fail(KCR_ERR_TIMEOUT, "event recorder: events still queued after %lld ms",
                             (long long)timeout_ms);
}

void (kcr_event_recorder_get_stats)(size_t out_size, kcr_event_recorder *r,
                                    kcr_event_recorder_stats *out)
{
    if (!out || !r) {
        kcr__abi_out(out, out_size, &(kcr_event_recorder_stats){0}, sizeof(kcr_event_recorder_stats));
        return;
    }
    pthread_mutex_lock(&r->lock);
    kcr_event_recorder_stats st = r->stats;
    pthread_mutex_unlock(&r->lock);
    kcr__abi_out(out, out_size, &st, sizeof st);
}
