/* Internal: monotonic time and deadlines for timed condition waits. */
#ifndef KCR_CORE_CLOCK_H
#define KCR_CORE_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "kcr/error.h"
#include "kcr/time.h"

#define KCR_NS_PER_MS INT64_C(1000000)
#define KCR_NS_PER_S INT64_C(1000000000)

/* Largest duration a public option may hold (KCR_DURATION_MAX, 2^40 ms):
 * twice it plus any margin, in nanoseconds, still fits an int64_t, so
 * callers refuse bigger values (KCR_ERR_INVALID) instead of overflowing. */
#define KCR__MAX_DURATION_MS KCR_DURATION_MAX

/* Which special values a duration accepts besides 0..KCR_DURATION_MAX. */
enum { KCR__DURATION_INFINITE = 1, KCR__DURATION_ZERO = 2 };

/* KCR_OK when `ms` is valid under the convention of kcr/time.h, accepting
 * KCR_DURATION_INFINITE / KCR_DURATION_ZERO only when `accept` has them;
 * else KCR_ERR_INVALID naming `what` (e.g. "kcr_manager_options.graceful_shutdown_timeout_ms"). */
kcr_err kcr__duration_check(const char *what, int64_t ms, unsigned accept);

/* Milliseconds as whole seconds, rounded up (for fields the Kubernetes API
 * counts in seconds, e.g. timeoutSeconds); ms <= 0 gives 0. */
static inline int64_t kcr__ms_to_s_ceil(int64_t ms)
{
    return ms <= 0 ? 0 : ms / 1000 + (ms % 1000 != 0);
}

/* Nanoseconds on CLOCK_MONOTONIC. */
int64_t kcr__now_ns(void);

/* Nanoseconds since the Unix epoch (CLOCK_REALTIME), for timestamps sent to servers. */
int64_t kcr__wall_ns(void);

/* Converts a CLOCK_MONOTONIC instant in ns to a timespec. */
struct timespec kcr__timespec_at(int64_t monotonic_ns);

/* Initializes `cond` to measure timed waits on CLOCK_MONOTONIC, so deadlines
 * survive wall-clock jumps. Returns 0 or an errno value. */
int kcr__cond_init_monotonic(pthread_cond_t *cond);

#endif
