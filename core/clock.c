#include "core/clock.h"
#include "core/error.h"

int64_t kcr__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * KCR_NS_PER_S + ts.tv_nsec;
}

int64_t kcr__wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * KCR_NS_PER_S + ts.tv_nsec;
}

struct timespec kcr__timespec_at(int64_t monotonic_ns)
{
    struct timespec ts = {.tv_sec = (time_t)(monotonic_ns / KCR_NS_PER_S),
                          .tv_nsec = (long)(monotonic_ns % KCR_NS_PER_S)};
    return ts;
}

int kcr__cond_init_monotonic(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    int rc = pthread_condattr_init(&attr);
    if (rc)
        return rc;
    rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (rc == 0)
        rc = pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
    return rc;
}

kcr_err kcr__duration_check(const char *what, int64_t ms, unsigned accept)
{
    if ((ms == KCR_DURATION_INFINITE && (accept & KCR__DURATION_INFINITE)) ||
        (ms == KCR_DURATION_ZERO && (accept & KCR__DURATION_ZERO)) ||
        (ms >= 0 && ms <= KCR_DURATION_MAX))
        return KCR_OK;
    return kcr__fail(KCR_ERR_INVALID, "%s: %lld ms is not a duration here (0..2^40%s%s)", what,
                     (long long)ms, accept & KCR__DURATION_INFINITE ? ", KCR_DURATION_INFINITE" : "",
                     accept & KCR__DURATION_ZERO ? ", KCR_DURATION_ZERO" : "");
}
