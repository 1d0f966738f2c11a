/* Creating and freeing a queue. */
#define _GNU_SOURCE /* PTHREAD_MUTEX_ADAPTIVE_NP */
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/abi.h"
#include "core/clock.h"
#include "core/error.h"
#include "workqueue/duration.h"
#include "workqueue/queue.h"

kcr_err (kcr_workqueue_new)(size_t opts_size, const kcr_workqueue_options *opts,
                            kcr_workqueue **out)
{
    kcr_workqueue_options local;
    kcr_err err = kcr__abi_in(&local, sizeof local, opts, opts_size, "kcr_workqueue_options");
    opts = &local;
    kcr_rate_limiter *limiter = opts->limiter;
    if (err == KCR_OK)
        err = kcr__duration_check("kcr_workqueue_options.priority_max_wait_ms",
                                  opts->priority_max_wait_ms, KCR__DURATION_INFINITE);
    if (err == KCR_OK && opts->payload)
        err = kcr__abi_reserved(opts->payload->reserved, sizeof opts->payload->reserved,
                                "kcr_workqueue_options.payload");
    if (err == KCR_OK && opts->metrics)
        err = kcr__abi_reserved(opts->metrics->reserved, sizeof opts->metrics->reserved,
                                "kcr_workqueue_options.metrics");
    if (err != KCR_OK) {
        kcr_rate_limiter_free(limiter);
        return err;
    }
    if (!out) {
        kcr_rate_limiter_free(limiter);
        return kcr__fail(KCR_ERR_INVALID, "kcr_workqueue_new: out is NULL");
    }
    *out = NULL;
    if (opts->payload && (!opts->payload->merge || !opts->payload->free)) {
        kcr_rate_limiter_free(limiter);
        return kcr__fail(KCR_ERR_INVALID, "kcr_workqueue_new: payload ops need merge and free");
    }
    /* Aligned for the adders' cache line (ring_tail). */
    size_t size = (sizeof(kcr_workqueue) + 63) / 64 * 64;
    kcr_workqueue *q = aligned_alloc(64, size);
    if (q)
        memset(q, 0, size);
    if (!q) {
        kcr_rate_limiter_free(limiter);
        return kcr__fail(KCR_ERR_NOMEM, "kcr_workqueue_new: out of memory");
    }
    q->name = strdup(opts->name ? opts->name : "");
    q->limiter = limiter;
    if (!limiter) /* q->limiter stays NULL on failure: reported below */
        (void)kcr_rate_limiter_default_new(&q->limiter);
    q->heap_cap = 16;
    q->heap = malloc(q->heap_cap * sizeof *q->heap);
    /* Slots are two cache lines each: keep them on line boundaries. */
    q->ring = aligned_alloc(64, KCR__WQ_RING_SLOTS * sizeof *q->ring);
    q->ring_mask = KCR__WQ_RING_SLOTS - 1;
    for (size_t i = 0; q->ring && i < KCR__WQ_RING_SLOTS; i++)
        atomic_init(&q->ring[i].seq, i);
    bool table = q->name && q->limiter && q->heap && q->ring &&
                 kcr__keytab_init(&q->tab, opts->capacity_hint ? opts->capacity_hint : 64,
                                  offsetof(struct kcr__wq_item, key),
                                  offsetof(struct kcr__wq_item, len)) == 0;
    if (!table) {
        if (q->tab.slots)
            kcr__keytab_destroy(&q->tab);
        kcr_rate_limiter_free(q->limiter);
        free(q->ring);
        free(q->heap);
        free(q->name);
        free(q);
        return kcr__fail(KCR_ERR_NOMEM, "kcr_workqueue_new: out of memory");
    }
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&q->mu, &ma);
    q->hash_seed = q->tab.seed;
    atomic_init(&q->tk_until, INT64_MAX);
    atomic_init(&q->next_due, INT64_MAX);
    pthread_mutexattr_destroy(&ma);
    kcr__cond_init_monotonic(&q->cond);
    kcr__cond_init_monotonic(&q->tk_cond);
    kcr__cond_init_monotonic(&q->standby_cond);
    pthread_cond_init(&q->drain_cond, NULL);
    if (opts->metrics) {
        q->m = *opts->metrics;
        q->has_cb = true;
        q->gauges = q->m.unfinished_work || q->m.longest_running;
        q->update_period_ns = q->m.update_period_ms > 0 ? kcr__wq_ms_to_ns(q->m.update_period_ms)
                                                        : 500 * KCR_NS_PER_MS;
    }
    q->timing = q->has_cb || opts->track_time;
    q->max_wait_ns = opts->priority_max_wait_ms ? kcr__wq_ms_to_ns(opts->priority_max_wait_ms)
                                                : 10 * KCR_NS_PER_S; /* INFINITE: < 0, no aging */
    q->light_fences = kcr__wq_light_fences();
    if (opts->payload) {
        q->pl = *opts->payload;
        q->has_payload = true;
    }
    if (opts->clock && opts->clock->now_ms) {
        q->clock = *opts->clock;
        q->has_clock = true;
    }
    *out = q;
    return KCR_OK;
}

void kcr_workqueue_free(kcr_workqueue *q)
{
    if (!q)
        return;
    for (size_t i = 0; i <= q->tab.mask; i++)
        if (q->tab.slots[i].node) {
            struct kcr__wq_item *it = q->tab.slots[i].node;
            kcr__wq_drop_payload(q, it->payload);
            free(it);
        }
    while (q->free_items) {
        struct kcr__wq_item *it = q->free_items;
        q->free_items = it->next;
        free(it);
    }
    free(q->ring);
    kcr__ptrset_destroy(&q->handed_out);
    kcr__keytab_destroy(&q->tab);
    free(q->heap);
    free(q->levels);
    kcr_rate_limiter_free(q->limiter);
    pthread_cond_destroy(&q->drain_cond);
    pthread_cond_destroy(&q->tk_cond);
    pthread_cond_destroy(&q->standby_cond);
    pthread_cond_destroy(&q->cond);
    pthread_mutex_destroy(&q->mu);
    free(q->name);
    free(q);
}

const char *kcr_workqueue_name(const kcr_workqueue *q)
{
    return q->name;
}
