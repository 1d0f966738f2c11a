/* Bounded waits for tests: a test whose subject is broken (a queue that
 * loses a key, a worker that never returns) fails with a message saying
 * what it waited for, instead of hanging until ctest's limit. Limits are
 * scaled by test_ms (valgrind, sanitizers). Thread-safe: test_wq_get may be
 * called from any thread; test_join only from the test's thread (it
 * asserts). */
#ifndef KCR_TESTS_BOUNDED_H
#define KCR_TESTS_BOUNDED_H

#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include "helpers/timescale.h"
#include "kcr/workqueue.h"

/* glibc's, declared by <pthread.h> only with _GNU_SOURCE, which would have
 * to come before every include of the test. */
extern int pthread_timedjoin_np(pthread_t thread, void **retval, const struct timespec *abstime);

/* How long a test waits for one key before it calls the queue broken. */
#define TEST_GET_MS 10000

/* kcr_workqueue_get that gives up after TEST_GET_MS (scaled) with
 * KCR_ERR_TIMEOUT and says so on stderr, so an assertion on its result
 * fails instead of blocking forever. */
static inline kcr_err test_wq_get(kcr_workqueue *q, const char **key)
{
    int64_t ms = test_ms(TEST_GET_MS);
    kcr_err err = kcr_workqueue_get_timeout(q, ms, key);
    if (err == KCR_ERR_TIMEOUT)
        fprintf(stderr, "test_wq_get: queue \"%s\" handed out no key within %lld ms\n",
                kcr_workqueue_name(q), (long long)ms);
    return err;
}

/* Joins `t`, failing the test if it has not finished within `ms` (scaled):
 * `what` names the thread in the failure. */
static inline void test_join(pthread_t t, int64_t ms, const char *what)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    int64_t scaled = test_ms(ms);
    until.tv_sec += (time_t)(scaled / 1000);
    until.tv_nsec += (long)(scaled % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    int rc = pthread_timedjoin_np(t, NULL, &until);
    cr_assert_eq(rc, 0, "%s did not finish within %lld ms (%s)", what, (long long)scaled,
                 rc == ETIMEDOUT ? "timed out" : "join failed");
}

#endif
