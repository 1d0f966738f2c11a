/* A caller compiled against an older kcr/workqueue.h: its structs are the
 * current ones with the last fields removed (as a release before those
 * fields were appended declared them), and it calls the sized entry points
 * the way that header's macros did, with its own sizeof (docs/abi.md).
 * It must not include kcr/workqueue.h: these are its declarations. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "abi/old_caller.h"

typedef struct kcr_workqueue kcr_workqueue;
typedef struct kcr_rate_limiter kcr_rate_limiter;

/* kcr_workqueue_options before capacity_hint and priority_max_wait_ms. */
typedef struct kcr_workqueue_options {
    const char *name;
    const void *metrics;
    bool track_time;
    kcr_rate_limiter *limiter;
} kcr_workqueue_options;

/* kcr_workqueue_stats before the duration fields. */
typedef struct kcr_workqueue_stats {
    int64_t depth;
    int64_t queued;
    int64_t processing;
    int64_t waiting;
    uint64_t adds_total;
    uint64_t retries_total;
} kcr_workqueue_stats;

kcr_err kcr_workqueue_new(size_t opts_size, const kcr_workqueue_options *opts, kcr_workqueue **out);
void kcr_workqueue_get_stats(size_t out_size, kcr_workqueue *q, kcr_workqueue_stats *out);
kcr_err kcr_rate_limiter_fast_slow_new(int64_t fast_delay_ms, int64_t slow_delay_ms,
                                       int max_fast_attempts, kcr_rate_limiter **out);

size_t old_options_size(void)
{
    return sizeof(kcr_workqueue_options);
}

size_t old_stats_size(void)
{
    return sizeof(kcr_workqueue_stats);
}

kcr_err old_new_queue(void *place, int64_t retry_delay_ms, kcr_workqueue **out)
{
    kcr_workqueue_options *o = place;
    *o = (kcr_workqueue_options){.name = "old"};
    kcr_err err = kcr_rate_limiter_fast_slow_new(retry_delay_ms, retry_delay_ms, 1, &o->limiter);
    if (err != KCR_OK)
        return err;
    return kcr_workqueue_new(sizeof *o, o, out);
}

void old_stats(kcr_workqueue *q, void *place, struct old_stats *out)
{
    kcr_workqueue_stats *st = place;
    kcr_workqueue_get_stats(sizeof *st, q, st);
    *out = (struct old_stats){st->depth, st->waiting, st->adds_total, st->retries_total};
}
