/* Internal: what the queue and the combinators need from a rate limiter
 * beyond the public API: its delay in nanoseconds, without rounding to ms. */
#ifndef KCR_WORKQUEUE_RATELIMIT_H
#define KCR_WORKQUEUE_RATELIMIT_H

#include <stdint.h>

#include "kcr/workqueue.h"

/* The delay in ns before `key` (borrowed) may be retried at `now_ns`
 * (monotonic), counting one failure. A custom limiter's ms delay is
 * converted. Thread-safe, like every limiter call. */
int64_t kcr__rate_limiter_when_ns(kcr_rate_limiter *rl, const char *key, int64_t now_ns);

#endif
