/* The queue core shared by kcr_fifo and kcr_delta_fifo (store/queue_core.h). */
#include "store/queue_core.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"

void kcr__queue_core_init(kcr__queue_core *q)
{
    memset(q, 0, sizeof *q);
    pthread_mutex_init(&q->mu, NULL);
    kcr__cond_init_monotonic(&q->cond);
}

void kcr__queue_core_destroy(kcr__queue_core *q)
{
    kcr__strmap_clear(&q->items, NULL);
    kcr__ptrq_free(&q->queue);
    pthread_cond_destroy(&q->cond);
    pthread_mutex_destroy(&q->mu);
}

void kcr__queue_core_populate(kcr__queue_core *q, size_t n)
{
    if (!q->populated) {
        q->populated = true;
        q->initial = n;
    }
}

kcr_err kcr__queue_core_begin_change(kcr__queue_core *q, const kcr_object *obj, char **key)
{
    kcr_err err = kcr_store_key(obj, key);
    if (err != KCR_OK)
        return err;
    pthread_mutex_lock(&q->mu);
    q->populated = true;
    return KCR_OK;
}

void kcr__queue_core_end_change(kcr__queue_core *q, char *key)
{
    pthread_mutex_unlock(&q->mu);
    free(key);
}

bool kcr__queue_core_hand_out(kcr__queue_core *q)
{
    bool initial = !(q->populated && q->initial == 0);
    if (q->initial > 0)
        q->initial--;
    return initial;
}

kcr_err kcr__queue_core_pop(kcr__queue_core *q, int64_t timeout_ms, const char *what, void **item,
                            bool *initial)
{
    int64_t deadline = timeout_ms >= 0 ? kcr__now_ns() + timeout_ms * KCR_NS_PER_MS : 0;
    while (!q->queue.len) {
        if (q->closed)
            return kcr__fail(KCR_ERR_SHUTDOWN, "%s closed", what);
        if (timeout_ms < 0) {
            pthread_cond_wait(&q->cond, &q->mu);
            continue;
        }
        struct timespec ts = kcr__timespec_at(deadline);
        if (pthread_cond_timedwait(&q->cond, &q->mu, &ts) == ETIMEDOUT && !q->queue.len &&
            !q->closed)
            return kcr__fail(KCR_ERR_TIMEOUT, "%s pop: nothing queued in %lld ms", what,
                             (long long)timeout_ms);
    }
    *initial = kcr__queue_core_hand_out(q);
    *item = kcr__ptrq_pop(&q->queue);
    return KCR_OK;
}

void kcr__queue_core_close(kcr__queue_core *q)
{
    pthread_mutex_lock(&q->mu);
    q->closed = true;
    pthread_cond_broadcast(&q->cond);
    pthread_mutex_unlock(&q->mu);
}

bool kcr__queue_core_is_closed(kcr__queue_core *q)
{
    pthread_mutex_lock(&q->mu);
    bool c = q->closed;
    pthread_mutex_unlock(&q->mu);
    return c;
}

bool kcr__queue_core_has_synced(kcr__queue_core *q)
{
    pthread_mutex_lock(&q->mu);
    bool s = q->populated && q->initial == 0;
    pthread_mutex_unlock(&q->mu);
    return s;
}

size_t kcr__queue_core_len(kcr__queue_core *q)
{
    pthread_mutex_lock(&q->mu);
    size_t n = q->queue.len;
    pthread_mutex_unlock(&q->mu);
    return n;
}

static kcr_err add_copy(kcr_string_list *out, const char *key)
{
    char *k = strdup(key);
    if (!k)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory listing keys");
    out->items[out->len++] = k;
    return KCR_OK;
}

kcr_err kcr__queue_core_list_keys(kcr__queue_core *q, const char *(*queued_key)(const void *item),
                                  kcr_string_list *out)
{
    pthread_mutex_lock(&q->mu);
    size_t n = queued_key ? q->queue.len : kcr__strmap_len(&q->items);
    kcr_err err = KCR_OK;
    out->len = 0;
    out->items = n ? malloc(n * sizeof *out->items) : NULL;
    if (n && !out->items)
        err = kcr__fail(KCR_ERR_NOMEM, "out of memory listing keys");
    if (out->items && queued_key) {
        for (size_t i = 0; i < n && err == KCR_OK; i++)
            err = add_copy(out, queued_key(kcr__ptrq_at(&q->queue, i)));
    } else if (out->items) {
        const char *key;
        for (size_t pos = 0; err == KCR_OK && kcr__strmap_next(&q->items, &pos, &key, NULL);)
            err = add_copy(out, key);
    }
    pthread_mutex_unlock(&q->mu);
    if (err != KCR_OK)
        kcr_string_list_free(out);
    return err;
}
