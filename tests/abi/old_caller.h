/* The old caller's functions (tests/abi/old_caller.c), callable from a
 * test compiled against the current headers. */
#ifndef KCR_TEST_ABI_OLD_CALLER_H
#define KCR_TEST_ABI_OLD_CALLER_H

#include <stddef.h>
#include <stdint.h>

#include "kcr/error.h"

struct kcr_workqueue;

/* The old caller's sizeof of kcr_workqueue_options and kcr_workqueue_stats. */
size_t old_options_size(void);
size_t old_stats_size(void);

/* Builds the old options at `place` (old_options_size() writable bytes) with
 * a limiter delaying every retry by retry_delay_ms, and makes a queue. */
kcr_err old_new_queue(void *place, int64_t retry_delay_ms, struct kcr_workqueue **out);

/* What the old caller read from its kcr_workqueue_stats, filled at `place`
 * (old_stats_size() writable bytes). */
struct old_stats {
    int64_t depth;
    int64_t waiting;
    uint64_t adds_total;
    uint64_t retries_total;
};
void old_stats(struct kcr_workqueue *q, void *place, struct old_stats *out);

#endif
