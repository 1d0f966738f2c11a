/* Time scale for tests whose protocol timings (lease durations, renew
 * deadlines, hand-over bounds) must hold while the test runs slowly:
 * valgrind runs threads one at a time, and sanitizers slow everything.
 * test_ms(ms) is ms times $KCR_TEST_TIME_SCALE (tests/valgrind-check sets
 * it), or times 3 in a sanitizer build, or ms itself. Thread-safe. */
#ifndef KCR_TESTS_TIMESCALE_H
#define KCR_TESTS_TIMESCALE_H

#include <stdint.h>
#include <stdlib.h>

static inline int64_t test_time_scale(void)
{
    const char *env = getenv("KCR_TEST_TIME_SCALE");
    long scale = env ? strtol(env, NULL, 10) : 0;
    if (scale >= 1 && scale <= 100)
        return scale;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    return 3;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
    return 3;
#endif
#endif
    return 1;
}

static inline int64_t test_ms(int64_t ms)
{
    return ms * test_time_scale();
}

#endif
