/* kcr_event_recorder_record(f): validation, the spam limit and the series
 * lookup on the caller's thread under a short lock (no I/O), then the write
 * queued for the sender (or made inline when synchronous). */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "events/events_internal.h"
#include "core/error.h"

size_t kcr__utf8_cut(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n <= max)
        return n;
    while (max > 0 && ((unsigned char)s[max] & 0xc0) == 0x80)
        max--;
    return max;
}

/* Appends "<len>:<s>" so that keys of different fields never collide. */
static void key_add(char **p, const char *s)
{
    *p += sprintf(*p, "%zu:%s", strlen(s), s);
}

static size_t key_len(const char *s)
{
    return strlen(s) + 24;
}

/* The spam key (the regarding object, per reporting controller) and the
 * event key (everything that makes two events the same), malloc'd. */
static kcr_err make_keys(const kcr_event *ev, const char *controller, const char *action,
                         const char *note, char **spam_key, char **event_key)
{
    const kcr_object *o = ev->regarding, *rel = ev->related;
    const char *obj[] = {kcr_object_api_version(o), kcr_object_kind(o), kcr_object_namespace(o),
                         kcr_object_name(o), kcr_object_uid(o)};
    const char *rest[] = {kcr_object_resource_version(o),
                          rel ? kcr_object_api_version(rel) : "",
                          rel ? kcr_object_kind(rel) : "",
                          rel ? kcr_object_namespace(rel) : "",
                          rel ? kcr_object_name(rel) : "",
                          rel ? kcr_object_uid(rel) : "",
                          rel ? kcr_object_resource_version(rel) : "",
                          ev->type == KCR_EVENT_WARNING ? "Warning" : "Normal",
                          ev->reason,
                          action,
                          note};
    size_t n_spam = key_len(controller), n_rest = 0;
    for (size_t i = 0; i < sizeof obj / sizeof obj[0]; i++)
        n_spam += key_len(obj[i]);
    for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++)
        n_rest += key_len(rest[i]);
    *spam_key = malloc(n_spam + 1);
    *event_key = malloc(n_spam + n_rest + 1);
    if (!*spam_key || !*event_key) {
        free(*spam_key);
        free(*event_key);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory keying an event");
    }
    char *p = *spam_key;
    key_add(&p, controller);
    for (size_t i = 0; i < sizeof obj / sizeof obj[0]; i++)
        key_add(&p, obj[i]);
    p = *event_key + sprintf(*event_key, "%s", *spam_key);
    for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++)
        key_add(&p, rest[i]);
    return KCR_OK;
}

/* True when s is well-formed UTF-8 (no overlong forms, surrogates or code
 * points past U+10FFFF), as JSON text must be. */
static bool utf8_valid(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p++;
        int more = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2
                                  : (c & 0xf8) == 0xf0 ? 3 : -1;
        if (more < 0 || (more == 1 && c < 0xc2) || (more == 3 && c > 0xf4))
            return false;
        unsigned cp = c & (0x7fu >> more);
        for (int i = 0; i < more; i++, p++) {
            if ((*p & 0xc0) != 0x80)
                return false;
            cp = (cp << 6) | (*p & 0x3fu);
        }
        if ((more == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
            (more == 3 && (cp < 0x10000 || cp > 0x10ffff)))
            return false;
    }
    return true;
}

static kcr_err validate(const kcr_event_recorder *r, const kcr_event *ev, const char *note)
{
    if (!r || !ev)
        return kcr__fail(KCR_ERR_INVALID, "event: NULL recorder or event");
    if (!ev->regarding)
        return kcr__fail(KCR_ERR_INVALID, "event: regarding is required");
    if (!kcr_object_kind(ev->regarding)[0] || !kcr_object_name(ev->regarding)[0])
        return kcr__fail(KCR_ERR_INVALID,
                         "event: the regarding object needs a kind and a name (got kind \"%s\", "
                         "name \"%s\")",
                         kcr_object_kind(ev->regarding), kcr_object_name(ev->regarding));
    if (!ev->reason || !*ev->reason)
        return kcr__fail(KCR_ERR_INVALID, "event: reason is required");
    if (ev->type != KCR_EVENT_NORMAL && ev->type != KCR_EVENT_WARNING)
        return kcr__fail(KCR_ERR_INVALID, "event: type %d is neither Normal nor Warning",
                         (int)ev->type);
    if (strlen(ev->reason) > KCR__EVENT_FIELD_MAX)
        return kcr__fail(KCR_ERR_INVALID, "event: reason is longer than %d bytes",
                         KCR__EVENT_FIELD_MAX);
    if (ev->action && strlen(ev->action) > KCR__EVENT_FIELD_MAX)
        return kcr__fail(KCR_ERR_INVALID, "event: action is longer than %d bytes",
                         KCR__EVENT_FIELD_MAX);
    if (ev->reporting_controller && !*ev->reporting_controller)
        return kcr__fail(KCR_ERR_INVALID, "event: reporting_controller is empty (NULL: the "
                                          "recorder's)");
    const char *text[][2] = {{"reason", ev->reason},
                             {"action", ev->action},
                             {"note", note},
                             {"reporting_controller", ev->reporting_controller}};
    for (size_t i = 0; i < sizeof text / sizeof text[0]; i++)
        if (text[i][1] && !utf8_valid(text[i][1]))
            return kcr__fail(KCR_ERR_INVALID, "event: %s is not valid UTF-8", text[i][0]);
    return KCR_OK;
}

/* Queues an item (lock held); false when the queue is full. */
static bool enqueue(kcr_event_recorder *r, kcr__event_item *item)
{
    if (r->len == r->cap) {
        r->stats.dropped_full++;
        return false;
    }
    r->queue[(r->head + r->len) % r->cap] = *item;
    r->len++;
    pthread_cond_broadcast(&r->cond);
    return true;
}

/* The repeat path (lock held): true when ev_key named a live series; the
 * item is queued, or returned in *inline_item for a synchronous write. */
static bool record_repeat(kcr_event_recorder *r, const char *ev_key, int64_t now,
                          kcr__event_item *inline_item)
{
    kcr__event_item item;
    if (!kcr__event_filter_repeat(&r->filter, ev_key, now, &item))
        return false;
    if (r->synchronous)
        *inline_item = item;
    else if (!enqueue(r, &item))
        kcr_object_unref(item.event);
    return true;
}

static kcr_err record(kcr_event_recorder *r, const kcr_event *ev, const char *note_in)
{
    char note[KCR__EVENT_NOTE_MAX + 1] = "";
    if (note_in) {
        size_t n = kcr__utf8_cut(note_in, KCR__EVENT_NOTE_MAX);
        memcpy(note, note_in, n);
        note[n] = '\0';
    }
    kcr_err err = validate(r, ev, note);
    if (err != KCR_OK)
        return err;
    const char *controller = ev->reporting_controller ? ev->reporting_controller : r->controller;
    const char *action = ev->action && *ev->action ? ev->action : ev->reason;
    char *spam_key, *ev_key;
    if ((err = make_keys(ev, controller, action, note, &spam_key, &ev_key)) != KCR_OK)
        return err;
    int64_t now = kcr_clock_now_ms(r->clock);
    kcr__event_item item = {0};

    pthread_mutex_lock(&r->lock);
    r->stats.recorded++;
    bool allowed = kcr__event_filter_allow(&r->filter, spam_key, now);
    if (!allowed)
        r->stats.dropped_spam++;
    bool done = !allowed || record_repeat(r, ev_key, now, &item);
    bool full = !r->synchronous && r->len == r->cap;
    if (!done && full) {
        r->stats.dropped_full++;
        done = true;
    }
    pthread_mutex_unlock(&r->lock);

    if (!done) { /* a new event: build it outside the lock */
        kcr_object *event;
        err = kcr__event_build(r, ev, note, now, &event);
        if (err == KCR_OK) {
            pthread_mutex_lock(&r->lock);
            if (!record_repeat(r, ev_key, now, &item)) { /* unless a racing record made it */
                kcr__event_item create = {.event = kcr_object_ref(event)};
                bool taken = true;
                if (r->synchronous)
                    item = create;
                else
                    taken = enqueue(r, &create);
                /* Without memory for the cache entry, repeats are new events. */
                if (taken)
                    kcr__event_filter_add(&r->filter, ev_key, event, now);
                else
                    kcr_object_unref(create.event);
            }
            pthread_mutex_unlock(&r->lock);
            kcr_object_unref(event);
        }
    }
    if (item.event) {
        kcr__event_send(r, &item);
        kcr_object_unref(item.event);
    }
    free(spam_key);
    free(ev_key);
    return err;
}

kcr_err kcr_event_recorder_record(kcr_event_recorder *r, const kcr_event *ev)
{
    return record(r, ev, ev ? ev->note : NULL);
}

kcr_err kcr_event_recorder_recordf(kcr_event_recorder *r, const kcr_event *ev,
                                   const char *note_fmt, ...)
{
    char note[KCR__EVENT_NOTE_MAX + 8] = ""; /* record() cuts it at a character boundary */
    if (note_fmt) {
        va_list ap;
        va_start(ap, note_fmt);
        vsnprintf(note, sizeof note, note_fmt, ap);
        va_end(ap);
    }
    return record(r, ev, note);
}
