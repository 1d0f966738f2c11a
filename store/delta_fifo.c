/* kcr_delta_fifo: client-go's DeltaFIFO (docs/store.md).
 * Invariant: a key is in `items` exactly when its entry is in `queue`. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/abi.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/grow.h"
#include "core/log.h"
#include "store/queue_core.h"
#include "store/store_internal.h"

struct entry {
    kcr_delta *d; /* owns a reference to each object and tombstone */
    size_t n, cap;
    char key[];
};

struct kcr_delta_fifo {
    kcr__queue_core q; /* items: key -> struct entry*; queue: struct entry* */
    kcr_known_objects known;
};

const char *kcr_delta_type_name(kcr_delta_type type)
{
    switch (type) {
    case KCR_DELTA_ADDED: return "Added";
    case KCR_DELTA_UPDATED: return "Updated";
    case KCR_DELTA_DELETED: return "Deleted";
    case KCR_DELTA_REPLACED: return "Replaced";
    case KCR_DELTA_SYNC: return "Sync";
    }
    return "Unknown";
}

static void delta_release(kcr_delta *d)
{
    if (d->tombstone)
        kcr_tombstone_unref(d->tombstone);
    else
        kcr_object_unref(d->object);
}

static void entry_free(void *p)
{
    struct entry *e = p;
    for (size_t i = 0; i < e->n; i++)
        delta_release(&e->d[i]);
    free(e->d);
    free(e);
}

kcr_err (kcr_delta_fifo_new)(size_t opts_size, const kcr_delta_fifo_options *opts,
                             kcr_delta_fifo **out)
{
    KCR__ABI_OPTS(kcr_delta_fifo_options, opts, opts_size);
    if (!out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_delta_fifo_new: NULL out");
    *out = NULL;
    if (opts && !opts->known.list_keys != !opts->known.get_by_key)
        return kcr__fail(KCR_ERR_INVALID,
                         "kcr_delta_fifo_new: known objects need both list_keys and get_by_key");
    kcr_delta_fifo *f = calloc(1, sizeof *f);
    if (!f)
        return kcr__fail(KCR_ERR_NOMEM, "kcr_delta_fifo_new: out of memory");
    kcr__queue_core_init(&f->q);
    if (opts)
        f->known = opts->known;
    *out = f;
    return KCR_OK;
}

void kcr_delta_fifo_free(kcr_delta_fifo *f)
{
    if (!f)
        return;
    kcr__strmap_clear(&f->q.items, entry_free);
    kcr__queue_core_destroy(&f->q);
    free(f);
}

/* Appends a delta for `key` (taking a new reference to obj, or to tomb). */
static kcr_err queue_action(kcr_delta_fifo *f, const char *key, kcr_delta_type type,
                            const kcr_object *obj, const kcr_tombstone *tomb)
{
    struct entry *e = kcr__strmap_get(&f->q.items, key);
    bool fresh = !e;
    if (fresh) {
        size_t len = strlen(key);
        e = calloc(1, sizeof *e + len + 1);
        if (!e)
            return kcr__fail(KCR_ERR_NOMEM, "out of memory queueing a delta");
        memcpy(e->key, key, len + 1);
    }
    kcr_delta *grown = kcr__grow(e->d, &e->cap, e->n, sizeof *e->d, 2);
    if (!grown) {
        if (fresh)
            free(e);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory queueing a delta");
    }
    e->d = grown;
    kcr_delta nd = {type, tomb ? kcr_tombstone_object(tomb) : obj, tomb};
    if (tomb)
        kcr_tombstone_ref(tomb);
    else
        kcr_object_ref(obj);
    e->d[e->n++] = nd;
    /* Two Deleted in a row collapse: keep the newer unless it is a tombstone. */
    if (e->n >= 2 && e->d[e->n - 1].type == KCR_DELTA_DELETED &&
        e->d[e->n - 2].type == KCR_DELTA_DELETED) {
        if (e->d[e->n - 1].tombstone) {
            delta_release(&e->d[e->n - 1]);
        } else {
            delta_release(&e->d[e->n - 2]);
            e->d[e->n - 2] = e->d[e->n - 1];
        }
        e->n--;
    }
    if (fresh) {
        kcr_err err = kcr__strmap_put(&f->q.items, key, e, NULL);
        if (err == KCR_OK && (err = kcr__ptrq_push(&f->q.queue, e)) != KCR_OK)
            kcr__strmap_remove(&f->q.items, key);
        if (err != KCR_OK) {
            entry_free(e);
            return err;
        }
    }
    pthread_cond_broadcast(&f->q.cond);
    return KCR_OK;
}

/* Queues a change of obj; with `process` (kcr__delta_fifo_apply_or_queue),
 * applies it at once instead when nothing is queued. */
static kcr_err change(kcr_delta_fifo *f, const kcr_object *obj, kcr_delta_type type,
                      kcr_delta_fifo_process_fn process, void *user_data, bool *applied)
{
    if (!f || !obj)
        return kcr__fail(KCR_ERR_INVALID, "kcr_delta_fifo: NULL argument");
    char *key;
    kcr_err err = kcr__queue_core_begin_change(&f->q, obj, &key);
    if (err != KCR_OK)
        return err;
    bool skip = false;
    if (type == KCR_DELTA_DELETED && !kcr__strmap_get(&f->q.items, key)) {
        /* Deleting what nobody knows and nothing queues is a no-op. */
        kcr_object *known =
            f->known.get_by_key ? f->known.get_by_key(key, f->known.user_data) : NULL;
        skip = known == NULL;
        kcr_object_unref(known);
    }
    /* Nothing queued: the popping thread would be handed this delta next
     * and alone, so applying it here under the lock is what a pop would
     * do (the same initial-population count), minus waking that thread. */
    bool now = !skip && process && !f->q.queue.len && !f->q.closed;
    if (now) {
        kcr_delta d = {type, obj, NULL};
        bool requeue = false;
        err = process(key, &d, 1, kcr__queue_core_hand_out(&f->q), &requeue, user_data);
        *applied = true;
        if (requeue)
            queue_action(f, key, type, obj, NULL); /* as pop does: best effort */
    } else if (!skip) {
        err = queue_action(f, key, type, obj, NULL);
    }
    kcr__queue_core_end_change(&f->q, key);
    return err;
}

kcr_err kcr_delta_fifo_add(kcr_delta_fifo *f, const kcr_object *obj)
{
    return change(f, obj, KCR_DELTA_ADDED, NULL, NULL, NULL);
}

kcr_err kcr_delta_fifo_update(kcr_delta_fifo *f, const kcr_object *obj)
{
    return change(f, obj, KCR_DELTA_UPDATED, NULL, NULL, NULL);
}

kcr_err kcr_delta_fifo_delete(kcr_delta_fifo *f, const kcr_object *obj)
{
    return change(f, obj, KCR_DELTA_DELETED, NULL, NULL, NULL);
}

kcr_err kcr__delta_fifo_apply_or_queue(kcr_delta_fifo *f, const kcr_object *obj,
                                       kcr_delta_type type, kcr_delta_fifo_process_fn process,
                                       void *user_data, bool *applied)
{
    *applied = false;
    if (type != KCR_DELTA_ADDED && type != KCR_DELTA_UPDATED && type != KCR_DELTA_DELETED)
        return kcr__fail(KCR_ERR_INVALID, "kcr__delta_fifo_apply_or_queue: %s is not a change",
                         kcr_delta_type_name(type));
    return change(f, obj, type, process, user_data, applied);
}

static kcr_err queue_tombstone(kcr_delta_fifo *f, const char *key, const kcr_object *last)
{
    kcr_tombstone *t;
    kcr_err err = kcr_tombstone_new(key, last, &t);
    if (err != KCR_OK)
        return err;
    err = queue_action(f, key, KCR_DELTA_DELETED, NULL, t);
    kcr_tombstone_unref(t);
    return err;
}

kcr_err kcr_delta_fifo_replace(kcr_delta_fifo *f, kcr_object *const *objs, size_t n)
{
    if (!f || (n && !objs))
        return kcr__fail(KCR_ERR_INVALID, "kcr_delta_fifo_replace: NULL argument");
    struct kcr__strmap listed = {0};
    kcr_err err = KCR_OK;
    pthread_mutex_lock(&f->q.mu);
    for (size_t i = 0; i < n && err == KCR_OK; i++) {
        char *key;
        if ((err = kcr_store_key(objs[i], &key)) != KCR_OK)
            break;
        if ((err = kcr__strmap_put(&listed, key, (void *)1, NULL)) == KCR_OK)
            err = queue_action(f, key, KCR_DELTA_REPLACED, objs[i], NULL);
        free(key);
    }
    size_t deletions = 0;
    /* Queued keys not listed: deleted while we were not watching. The
     * tombstone carries the newest state the queue has. */
    size_t queued = f->q.queue.len;
    for (size_t i = 0; i < queued && err == KCR_OK; i++) {
        struct entry *e = kcr__ptrq_at(&f->q.queue, i);
        if (kcr__strmap_get(&listed, e->key))
            continue;
        const kcr_object *last = e->n ? e->d[e->n - 1].object : NULL;
        deletions++;
        err = queue_tombstone(f, e->key, last);
    }
    /* Known keys neither listed nor queued: the same, with the cache's state. */
    if (err == KCR_OK && f->known.list_keys) {
        kcr_string_list keys = {0};
        err = f->known.list_keys(&keys, f->known.user_data);
        for (size_t i = 0; i < keys.len && err == KCR_OK; i++) {
            const char *k = keys.items[i];
            struct entry *e = kcr__strmap_get(&listed, k) ? NULL : kcr__strmap_get(&f->q.items, k);
            if (kcr__strmap_get(&listed, k) || (e && e->n))
                continue;
            kcr_object *last =
                f->known.get_by_key ? f->known.get_by_key(k, f->known.user_data) : NULL;
            if (!last)
                kcr__log(KCR_LOG_DEBUG, "store",
                         "replace: known key %s vanished; tombstone without an object", k);
            deletions++;
            err = queue_tombstone(f, k, last);
            kcr_object_unref(last);
        }
        kcr_string_list_free(&keys);
    }
    kcr__queue_core_populate(&f->q, kcr__strmap_len(&listed) + deletions);
    pthread_mutex_unlock(&f->q.mu);
    kcr__strmap_clear(&listed, NULL);
    return err;
}

kcr_err kcr__delta_fifo_delete_unless(kcr_delta_fifo *f, kcr__delta_keep_fn keep, void *user_data)
{
    if (!f || !keep)
        return kcr__fail(KCR_ERR_INVALID, "kcr__delta_fifo_delete_unless: NULL argument");
    kcr_err err = KCR_OK;
    pthread_mutex_lock(&f->q.mu);
    /* queued keys: their newest state decides (a deletion is already one) */
    size_t queued = f->q.queue.len;
    for (size_t i = 0; i < queued && err == KCR_OK; i++) {
        struct entry *e = kcr__ptrq_at(&f->q.queue, i);
        const kcr_delta *last = e->n ? &e->d[e->n - 1] : NULL;
        if (last && last->type != KCR_DELTA_DELETED && !keep(last->object, user_data))
            err = queue_tombstone(f, e->key, last->object);
    }
    /* known keys with nothing queued: the cache's state decides */
    if (err == KCR_OK && f->known.list_keys) {
        kcr_string_list keys = {0};
        err = f->known.list_keys(&keys, f->known.user_data);
        for (size_t i = 0; i < keys.len && err == KCR_OK; i++) {
            struct entry *e = kcr__strmap_get(&f->q.items, keys.items[i]);
            if (e && e->n)
                continue;
            kcr_object *obj = f->known.get_by_key(keys.items[i], f->known.user_data);
            if (obj && !keep(obj, user_data))
                err = queue_tombstone(f, keys.items[i], obj);
            kcr_object_unref(obj);
        }
        kcr_string_list_free(&keys);
    }
    pthread_mutex_unlock(&f->q.mu);
    return err;
}

kcr_err kcr_delta_fifo_resync(kcr_delta_fifo *f)
{
    if (!f)
        return kcr__fail(KCR_ERR_INVALID, "kcr_delta_fifo_resync: NULL argument");
    if (!f->known.list_keys || !f->known.get_by_key)
        return KCR_OK;
    pthread_mutex_lock(&f->q.mu);
    kcr_string_list keys = {0};
    kcr_err err = f->known.list_keys(&keys, f->known.user_data);
    for (size_t i = 0; i < keys.len && err == KCR_OK; i++) {
        struct entry *e = kcr__strmap_get(&f->q.items, keys.items[i]);
        if (e && e->n)
            continue; /* something is queued already: no Sync */
        kcr_object *obj = f->known.get_by_key(keys.items[i], f->known.user_data);
        if (obj)
            err = queue_action(f, keys.items[i], KCR_DELTA_SYNC, obj, NULL);
        kcr_object_unref(obj);
    }
    kcr_string_list_free(&keys);
    pthread_mutex_unlock(&f->q.mu);
    return err;
}

static kcr_err pop(kcr_delta_fifo *f, kcr_delta_fifo_process_fn process, void *user_data,
                   int64_t timeout_ms)
{
    if (!f || !process)
        return kcr__fail(KCR_ERR_INVALID, "kcr_delta_fifo_pop: NULL argument");
    pthread_mutex_lock(&f->q.mu);
    void *item;
    bool initial;
    kcr_err err = kcr__queue_core_pop(&f->q, timeout_ms, "DeltaFIFO", &item, &initial);
    if (err != KCR_OK) {
        pthread_mutex_unlock(&f->q.mu);
        return err;
    }
    struct entry *e = item;
    kcr__strmap_remove(&f->q.items, e->key);
    bool requeue = false;
    err = process(e->key, e->d, e->n, initial, &requeue, user_data);
    /* The lock was held throughout, so nothing new arrived for this key: a
     * requeue puts the same deltas back at the end. */
    if (requeue && kcr__strmap_put(&f->q.items, e->key, e, NULL) == KCR_OK) {
        if (kcr__ptrq_push(&f->q.queue, e) == KCR_OK)
            e = NULL;
        else
            kcr__strmap_remove(&f->q.items, e->key);
    }
    if (e)
        entry_free(e);
    pthread_mutex_unlock(&f->q.mu);
    return err;
}

kcr_err kcr_delta_fifo_pop(kcr_delta_fifo *f, kcr_delta_fifo_process_fn process, void *user_data)
{
    return pop(f, process, user_data, -1);
}

kcr_err kcr_delta_fifo_pop_timeout(kcr_delta_fifo *f, kcr_delta_fifo_process_fn process,
                                   void *user_data, int64_t timeout_ms)
{
    kcr_err err = kcr__duration_check("kcr_delta_fifo_pop_timeout: timeout_ms", timeout_ms,
                                      KCR__DURATION_INFINITE);
    if (err != KCR_OK && timeout_ms < 0)
        return err;
    /* Above the longest duration: as good as no limit (-1), and its
     * nanoseconds would overflow. */
    return pop(f, process, user_data, timeout_ms > KCR__MAX_DURATION_MS ? -1 : timeout_ms);
}

void kcr_delta_fifo_close(kcr_delta_fifo *f)
{
    kcr__queue_core_close(&f->q);
}

bool kcr_delta_fifo_is_closed(kcr_delta_fifo *f)
{
    return kcr__queue_core_is_closed(&f->q);
}

bool kcr_delta_fifo_has_synced(kcr_delta_fifo *f)
{
    return kcr__queue_core_has_synced(&f->q);
}

size_t kcr_delta_fifo_len(kcr_delta_fifo *f)
{
    return kcr__queue_core_len(&f->q);
}

static const char *entry_key(const void *item)
{
    return ((const struct entry *)item)->key;
}

kcr_err kcr_delta_fifo_list_keys(kcr_delta_fifo *f, kcr_string_list *out)
{
    if (!f || !out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_delta_fifo_list_keys: NULL argument");
    return kcr__queue_core_list_keys(&f->q, entry_key, out);
}
