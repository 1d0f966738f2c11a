/* The event recorder's spam limit and series cache.
 *
 * Spam (as client-go's EventSourceObjectSpamFilter): a token bucket per
 * regarding object, `burst` tokens, one more every `refill_ms`; an event
 * finding the bucket empty is dropped.
 *
 * Series (as client-go's events broadcaster): the first occurrence of an
 * event creates an Event; a repeat within 6 minutes of the previous one
 * counts into that Event's series (count 2 on the first repeat). After 6
 * quiet minutes the series is finished and the next occurrence creates a
 * new Event.
 *
 * Both maps hold at most KCR__EVENT_CACHE_MAX entries: finished series and
 * refilled buckets are swept every minute, and when a map is still full its
 * least recently used entry goes. Times are the recorder clock's ms. */
#include <stdlib.h>
#include <string.h>

#include "events/events_internal.h"
#include "core/error.h"

#define SWEEP_MS (60 * 1000)

struct bucket {
    int64_t tokens;
    int64_t refilled_ms; /* time up to which refills are counted */
    int64_t used_ms;
};

struct series {
    kcr_object *event;
    int64_t count;   /* occurrences so far */
    int64_t last_ms; /* the latest one */
};

void kcr__event_filter_init(kcr__event_filter *f, int burst, int64_t refill_ms)
{
    memset(f, 0, sizeof *f);
    f->burst = burst;
    f->refill_ms = refill_ms;
}

static void free_series(void *v)
{
    struct series *s = v;
    kcr_object_unref(s->event);
    free(s);
}

void kcr__event_filter_clear(kcr__event_filter *f)
{
    kcr__strmap_clear(&f->buckets, free);
    kcr__strmap_clear(&f->series, free_series);
}

static void refill(const kcr__event_filter *f, struct bucket *b, int64_t now_ms)
{
    if (now_ms <= b->refilled_ms)
        return;
    int64_t n = (now_ms - b->refilled_ms) / f->refill_ms;
    if (b->tokens + n >= f->burst) {
        b->tokens = f->burst;
        b->refilled_ms = now_ms;
    } else {
        b->tokens += n;
        b->refilled_ms += n * f->refill_ms;
    }
}

static bool series_done(const struct series *s, int64_t now_ms)
{
    return now_ms - s->last_ms > KCR__EVENT_SERIES_MS;
}

static bool bucket_full(const kcr__event_filter *f, struct bucket *b, int64_t now_ms)
{
    refill(f, b, now_ms);
    return b->tokens >= f->burst;
}

/* Removes the entries no longer needed (finished series, full buckets); with
 * `evict` and none of those, the least recently used entry. */
static void sweep_map(kcr__event_filter *f, struct kcr__strmap *m, bool is_series, int64_t now_ms,
                      bool evict)
{
    size_t n = 0, len = kcr__strmap_len(m);
    const char **keys = len ? malloc(len * sizeof *keys) : NULL;
    const char *oldest = NULL, *key;
    int64_t oldest_ms = INT64_MAX;
    void *v;
    for (size_t pos = 0; keys && kcr__strmap_next(m, &pos, &key, &v);) {
        bool drop = is_series ? series_done(v, now_ms) : bucket_full(f, v, now_ms);
        int64_t used = is_series ? ((struct series *)v)->last_ms : ((struct bucket *)v)->used_ms;
        if (drop)
            keys[n++] = key;
        else if (used < oldest_ms)
            oldest = key, oldest_ms = used;
    }
    if (evict && n == 0 && oldest && keys)
        keys[n++] = oldest;
    /* A key stays valid until its own entry is removed (strmap.h), so the
     * collected keys survive the removal of the others. */
    for (size_t i = 0; i < n; i++) {
        v = kcr__strmap_remove(m, keys[i]);
        if (is_series)
            free_series(v);
        else
            free(v);
    }
    free(keys);
}

/* Sweeps both maps every minute, and a full map before it grows. */
static void maintain(kcr__event_filter *f, struct kcr__strmap *growing, int64_t now_ms)
{
    if (now_ms - f->swept_ms >= SWEEP_MS || now_ms < f->swept_ms) {
        sweep_map(f, &f->buckets, false, now_ms, false);
        sweep_map(f, &f->series, true, now_ms, false);
        f->swept_ms = now_ms;
    }
    if (growing && kcr__strmap_len(growing) >= KCR__EVENT_CACHE_MAX)
        sweep_map(f, growing, growing == &f->series, now_ms, true);
}

bool kcr__event_filter_allow(kcr__event_filter *f, const char *spam_key, int64_t now_ms)
{
    /* Sweep before the lookup: the sweep frees the buckets refilled to the
     * burst, this object's own among them when its last event is a refill
     * period old, and a bucket looked up first would then be written after
     * it was freed (test the_sweep_may_drop_the_bucket_of_the_object_being_recorded). */
    maintain(f, NULL, now_ms);
    struct bucket *b = kcr__strmap_get(&f->buckets, spam_key);
    if (!b) {
        maintain(f, &f->buckets, now_ms); /* room for one more */
        b = malloc(sizeof *b);
        if (!b || kcr__strmap_put(&f->buckets, spam_key, b, NULL) != KCR_OK) {
            free(b);
            return true; /* cannot track it: do not drop events for that */
        }
        b->tokens = f->burst;
        b->refilled_ms = now_ms;
    } else {
        refill(f, b, now_ms);
    }
    b->used_ms = now_ms;
    if (b->tokens <= 0)
        return false;
    b->tokens--;
    return true;
}

bool kcr__event_filter_repeat(kcr__event_filter *f, const char *event_key, int64_t now_ms,
                              kcr__event_item *item)
{
    struct series *s = kcr__strmap_get(&f->series, event_key);
    if (!s || series_done(s, now_ms))
        return false;
    s->count++;
    s->last_ms = now_ms;
    item->event = kcr_object_ref(s->event);
    item->count = s->count;
    item->last_ms = now_ms;
    return true;
}

kcr_err kcr__event_filter_add(kcr__event_filter *f, const char *event_key, kcr_object *event,
                              int64_t now_ms)
{
    struct series *s = kcr__strmap_get(&f->series, event_key);
    if (s) { /* a finished series (or a racing first occurrence): start over */
        kcr_object_unref(s->event);
    } else {
        maintain(f, &f->series, now_ms);
        s = malloc(sizeof *s);
        if (!s)
            return kcr__fail(KCR_ERR_NOMEM, "out of memory aggregating an event");
        kcr_err err = kcr__strmap_put(&f->series, event_key, s, NULL);
        if (err != KCR_OK) {
            free(s);
            return err;
        }
    }
    s->event = kcr_object_ref(event);
    s->count = 1;
    s->last_ms = now_ms;
    return KCR_OK;
}
