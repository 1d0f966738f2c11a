/* kcr_fifo: client-go's FIFO (see BEHAVIOUR.md § Store). Keys are queued once;
 * the newest object per key lives in `items`. A deleted key stays in the
 * queue and pop skips it. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/ptrq.h"
#include "core/strmap.h"
#include "kcr/store.h"

struct kcr_fifo {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    struct kcr__strmap items; /* key -> kcr_object* (one reference each) */
    struct kcr__ptrq queue;   /* malloc'd keys, oldest first */
    size_t initial;           /* initial population still to pop */
    bool populated;
    bool closed;
};

kcr_fifo *kcr_fifo_new(void)
{
    kcr_fifo *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    pthread_mutex_init(&f->mu, NULL);
    kcr__cond_init_monotonic(&f->cond);
    return f;
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
    kcr__strmap_clear(&f->items, unref_value);
    clear_queue(&f->queue);
    kcr__ptrq_free(&f->queue);
    pthread_cond_destroy(&f->cond);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

static kcr_err enqueue_key(kcr_fifo *f, const char *key)
{
    char *k = strdup(key);
    if (!k)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory queueing a key");
    kcr_err err = kcr__ptrq_push(&f->queue, k);
    if (err)
        free(k);
    return err;
}

/* Sets key's object, queueing the key when it had none. */
static kcr_err put_locked(kcr_fifo *f, const char *key, const kcr_object *obj, bool if_absent)
{
    bool present = kcr__strmap_get(&f->items, key) != NULL;
    if (present && if_absent)
        return KCR_OK;
    kcr_err err;
    if (!present && (err = enqueue_key(f, key)) != KCR_OK)
        return err;
    void *old;
    if ((err = kcr__strmap_put(&f->items, key, kcr_object_ref(obj), &old)) != KCR_OK) {
        kcr_object_unref(obj);
        return err;
    }
    kcr_object_unref(old);
    pthread_cond_broadcast(&f->cond);
    return KCR_OK;
}

static kcr_err put(kcr_fifo *f, const kcr_object *obj, bool if_absent)
{
    if (!f || !obj)
        return kcr__fail(KCR_ERR_INVALID, "kcr_fifo: NULL argument");
    char *key;
    kcr_err err = kcr_store_key(obj, &key);
    if (err)
        return err;
    pthread_mutex_lock(&f->mu);
    f->populated = true;
    err = put_locked(f, key, obj, if_absent);
    pthread_mutex_unlock(&f->mu);
    free(key);
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
    kcr_err err = kcr_store_key(obj, &key);
    if (err)
        return err;
    pthread_mutex_lock(&f->mu);
    f->populated = true;
    kcr_object_unref(kcr__strmap_remove(&f->items, key));
    pthread_mutex_unlock(&f->mu);
    free(key);
    return KCR_OK;
}

kcr_err kcr_fifo_replace(kcr_fifo *f, kcr_object *const *objs, size_t n)
{
    if (!f || (n && !objs))
        return kcr__fail(KCR_ERR_INVALID, "kcr_fifo_replace: NULL argument");
    pthread_mutex_lock(&f->mu);
    kcr__strmap_clear(&f->items, unref_value);
    clear_queue(&f->queue);
    kcr_err err = KCR_OK;
    for (size_t i = 0; i < n && err == KCR_OK; i++) {
        char *key;
        if ((err = kcr_store_key(objs[i], &key)) == KCR_OK) {
            err = put_locked(f, key, objs[i], false);
            free(key);
        }
    }
    if (!f->populated) {
        f->populated = true;
        f->initial = f->items.len;
    }
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->mu);
    return err;
}

kcr_err kcr_fifo_resync(kcr_fifo *f)
{
    if (!f)
        return kcr__fail(KCR_ERR_INVALID, "kcr_fifo_resync: NULL argument");
    pthread_mutex_lock(&f->mu);
    struct kcr__strmap queued = {0};
    kcr_err err = KCR_OK;
    for (size_t i = 0; i < f->queue.len && err == KCR_OK; i++)
        err = kcr__strmap_put(&queued, kcr__ptrq_at(&f->queue, i), (void *)1, NULL);
    for (size_t i = 0; i < f->items.cap && err == KCR_OK; i++) {
        const char *key = f->items.slots[i].key;
        if (key && !kcr__strmap_get(&queued, key))
            err = enqueue_key(f, key);
    }
    kcr__strmap_clear(&queued, NULL);
    if (f->queue.len)
        pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->mu);
    return err;
}

kcr_err kcr_fifo_pop(kcr_fifo *f, kcr_fifo_process_fn process, void *user_data)
{
    if (!f || !process)
        return kcr__fail(KCR_ERR_INVALID, "kcr_fifo_pop: NULL argument");
    pthread_mutex_lock(&f->mu);
    for (;;) {
        while (!f->queue.len) {
            if (f->closed) {
                pthread_mutex_unlock(&f->mu);
                return kcr__fail(KCR_ERR_SHUTDOWN, "FIFO closed");
            }
            pthread_cond_wait(&f->cond, &f->mu);
        }
        bool initial = !(f->populated && f->initial == 0);
        char *key = kcr__ptrq_pop(&f->queue);
        if (f->initial > 0)
            f->initial--;
        kcr_object *obj = kcr__strmap_remove(&f->items, key);
        if (!obj) { /* deleted while queued */
            free(key);
            continue;
        }
        bool requeue = false;
        kcr_err err = process(obj, initial, &requeue, user_data);
        if (requeue) {
            kcr_err e = put_locked(f, key, obj, true);
            if (e != KCR_OK)
                err = e;
        }
        kcr_object_unref(obj);
        free(key);
        pthread_mutex_unlock(&f->mu);
        return err;
    }
}

void kcr_fifo_close(kcr_fifo *f)
{
    pthread_mutex_lock(&f->mu);
    f->closed = true;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->mu);
}

bool kcr_fifo_is_closed(kcr_fifo *f)
{
    pthread_mutex_lock(&f->mu);
    bool c = f->closed;
    pthread_mutex_unlock(&f->mu);
    return c;
}

bool kcr_fifo_has_synced(kcr_fifo *f)
{
    pthread_mutex_lock(&f->mu);
    bool s = f->populated && f->initial == 0;
    pthread_mutex_unlock(&f->mu);
    return s;
}

kcr_object *kcr_fifo_get_by_key(kcr_fifo *f, const char *key)
{
    if (!f || !key)
        return NULL;
    pthread_mutex_lock(&f->mu);
    kcr_object *o = kcr_object_ref(kcr__strmap_get(&f->items, key));
    pthread_mutex_unlock(&f->mu);
    return o;
}

kcr_err kcr_fifo_list_keys(kcr_fifo *f, kcr_string_list *out)
{
    if (!f || !out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_fifo_list_keys: NULL argument");
    pthread_mutex_lock(&f->mu);
    out->len = 0;
    out->items = f->items.len ? malloc(f->items.len * sizeof *out->items) : NULL;
    kcr_err err = KCR_OK;
    if (f->items.len && !out->items)
        err = kcr__fail(KCR_ERR_NOMEM, "out of memory listing keys");
    for (size_t i = 0; out->items && i < f->items.cap; i++)
        if (f->items.slots[i].key) {
            char *k = strdup(f->items.slots[i].key);
            if (!k) {
                kcr_string_list_free(out);
                err = kcr__fail(KCR_ERR_NOMEM, "out of memory listing keys");
                break;
            }
            out->items[out->len++] = k;
        }
    pthread_mutex_unlock(&f->mu);
    return err;
}
