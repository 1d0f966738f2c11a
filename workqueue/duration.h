/* Internal: the public API counts milliseconds, the queue and the built-in
 * rate limiters count nanoseconds inside (the delay heap, the clock); these
 * convert at the boundary. Pure arithmetic, thread-agnostic. */
#ifndef KCR_WORKQUEUE_DURATION_H
#define KCR_WORKQUEUE_DURATION_H

#include <stdint.h>

#include "core/clock.h"

/* ms -> ns, saturating at INT64_MIN / INT64_MAX. */
static inline int64_t kcr__wq_ms_to_ns(int64_t ms)
{
    if (ms > INT64_MAX / KCR_NS_PER_MS)
        return INT64_MAX;
    if (ms < INT64_MIN / KCR_NS_PER_MS)
        return INT64_MIN;
    return ms * KCR_NS_PER_MS;
}

/* ns -> ms rounded up, so a positive delay never becomes 0 (negative ones
 * round towards 0, which callers read as "now" anyway). */
static inline int64_t kcr__wq_ns_to_ms_up(int64_t ns)
{
    return ns > 0 ? ns / KCR_NS_PER_MS + (ns % KCR_NS_PER_MS != 0) : ns / KCR_NS_PER_MS;
}

#endif
