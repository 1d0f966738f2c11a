/* kcr_fifo: client-go's FIFO (docs/store.md). Keys are queued once;
 * the newest object per key lives in `items`. A deleted key stays in the
 * queue and pop skips it. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "store/queue_core.h"

struct kcr_fifo {
    /* items: key -> kcr_object* (one reference each); queue: malloc'd keys */
    kcr__queue_core q;
};

kcr_err kcr_fifo_new(kcr_fifo **out)
{
    if (!out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_fifo_new: NULL out");
    *out = NULL;
    kcr_fifo *f = calloc(1, sizeof *f);
    if (!f)
        return kcr__fail(KCR_ERR_NOMEM, "kcr_fifo_new: out of memory");
    kcr__queue_core_init(&f->q);
    *out = f;
    return KCR_OK;
}

static void unref_value(void *v)
{
    kcr_object_unref(v);
}

static void clear_queue(struct kcr__ptrq *q)
{
    char *k;
    while ((k = kcr__ptrq_pop(q)))
        free(k);
}

void kcr_fifo_free(kcr_fifo *f)
{
    if (!f)
        return;
    kcr__strmap_clear(&f->q.items, unref_value);
    clear_queue(&f->q.queue);
    kcr__queue_core_destroy(&f->q);
    free(f);
}

static kcr_err enqueue_key(kcr_fifo *f, const char *key)
{
    char *k = strdup(key);
    if (!k)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory queueing a key");
    kcr_err err = kcr__ptrq_push(&f->q.queue, k);
    if (err)
        free(k);
    return err;
}

/* Sets key's object, queueing the key when it had none. */
static kcr_err put_locked(kcr_fifo *f, const char *key, const kcr_object *obj, bool if_absent)
{
    bool present = kcr__strmap_get(&f->q.items, key) != NULL;
    if (present && if_absent)
        return KCR_OK;
    kcr_err err;
    if (!present && (err = enqueue_key(f, key)) != KCR_OK)
        return err;
    void *old;
    if ((err = kcr__strmap_put(&f->q.items, key, kcr_object_ref(obj), &old)) != KCR_OK) {
        kcr_object_unref(obj);
        return err;
    }
    kcr_object_unref(old);
    pthread_cond_broadcast(&f->q.cond);
    return KCR_OK;
}

static kcr_err put(kcr_fifo *f, const kcr_object *obj, bool if_absent)
{
    if (!f || !obj)
        return kcr__fail(KCR_ERR_INVALID, "kcr_fifo: NULL argument");
    char *key;
    kcr_err err = kcr__queue_core_begin_change(&f->q, obj, &key);
    if (err != KCR_OK)
        return err;
    err = put_locked(f, key, obj, if_absent);
    kcr__queue_core_end_change(&f->q, key);
    return err;
}

kcr_err kcr_fifo_add(kcr_fifo *f, const kcr_object *obj)
{
    return put(f, obj, false);
}

kcr_err kcr_fifo_update(kcr_fifo *f, const kcr_object *obj)
{
    return put(f, obj, false);
}

kcr_err kcr_fifo_add_if_not_present(kcr_fifo *f, const kcr_object *obj)
{
    return put(f, obj, true);
}

kcr_err kcr_fifo_delete(kcr_fifo *f, const kcr_object *obj)
{
    if (!f || !obj)
        return kcr__fail(KCR_ERR_INVALID, "kcr_fifo_delete: NULL argument");
    char *key;
    kcr_err err = kcr__queue_core_begin_change(&f->q, obj, &key);
    if (err != KCR_OK)
        return err;
    kcr_object_unref(kcr__strmap_remove(&f->q.items, key));
    kcr__queue_core_end_change(&f->q, key);
    return KCR_OK;
}

kcr_err kcr_fifo_replace(kcr_fifo *f, kcr_object *const *objs, size_t n)
{
    if (!f || (n && !objs))
        return kcr__fail(KCR_ERR_INVALID, "kcr_fifo_replace: NULL argument");
    pthread_mutex_lock(&f->q.mu);
    kcr__strmap_clear(&f->q.items, unref_value);
    clear_queue(&f->q.queue);
    kcr_err err = KCR_OK;
    for (size_t i = 0; i < n && err == KCR_OK; i++) {
        char *key;
        if ((err = kcr_store_key(objs[i], &key)) == KCR_OK) {
            err = put_locked(f, key, objs[i], false);
            free(key);
        }
    }
    kcr__queue_core_populate(&f->q, kcr__strmap_len(&f->q.items));
    pthread_cond_broadcast(&f->q.cond);
    pthread_mutex_unlock(&f->q.mu);
    return err;
}

kcr_err kcr_fifo_resync(kcr_fifo *f)
{
    if (!f)
        return kcr__fail(KCR_ERR_INVALID, "kcr_fifo_resync: NULL argument");
    pthread_mutex_lock(&f->q.mu);
    struct kcr__strmap queued = {0};
    kcr_err err = KCR_OK;
    for (size_t i = 0; i < f->q.queue.len && err == KCR_OK; i++)
        err = kcr__strmap_put(&queued, kcr__ptrq_at(&f->q.queue, i), (void *)1, NULL);
    const char *key;
    for (size_t pos = 0; err == KCR_OK && kcr__strmap_next(&f->q.items, &pos, &key, NULL);)
        if (!kcr__strmap_get(&queued, key))
            err = enqueue_key(f, key);
    kcr__strmap_clear(&queued, NULL);
    if (f->q.queue.len)
        pthread_cond_broadcast(&f->q.cond);
    pthread_mutex_unlock(&f->q.mu);
    return err;
}

kcr_err kcr_fifo_pop(kcr_fifo *f, kcr_fifo_process_fn process, void *user_data)
{
    if (!f || !process)
        return kcr__fail(KCR_ERR_INVALID, "kcr_fifo_pop: NULL argument");
    pthread_mutex_lock(&f->q.mu);
    for (;;) {
        void *item;
        bool initial;
        kcr_err err = kcr__queue_core_pop(&f->q, -1, "FIFO", &item, &initial);
        if (err != KCR_OK) {
            pthread_mutex_unlock(&f->q.mu);
            return err;
        }
        char *key = item;
        kcr_object *obj = kcr__strmap_remove(&f->q.items, key);
        if (!obj) { /* deleted while queued */
            free(key);
            continue;
        }
        bool requeue = false;
        err = process(obj, initial, &requeue, user_data);
        if (requeue) {
            kcr_err e = put_locked(f, key, obj, true);
            if (e != KCR_OK)
                err = e;
        }
        kcr_object_unref(obj);
        free(key);
        pthread_mutex_unlock(&f->q.mu);
        return err;
    }
}

void kcr_fifo_close(kcr_fifo *f)
{
    kcr__queue_core_close(&f->q);
}

bool kcr_fifo_is_closed(kcr_fifo *f)
{
    return kcr__queue_core_is_closed(&f->q);
}

bool kcr_fifo_has_synced(kcr_fifo *f)
{
    return kcr__queue_core_has_synced(&f->q);
}

kcr_object *kcr_fifo_get_by_key(kcr_fifo *f, const char *key)
{
    if (!f || !key)
        return NULL;
    pthread_mutex_lock(&f->q.mu);
    kcr_object *o = kcr_object_ref(kcr__strmap_get(&f->q.items, key));
    pthread_mutex_unlock(&f->q.mu);
    return o;
}

kcr_err kcr_fifo_list_keys(kcr_fifo *f, kcr_string_list *out)
{
    if (!f || !out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_fifo_list_keys: NULL argument");
    return kcr__queue_core_list_keys(&f->q, NULL, out);
}
