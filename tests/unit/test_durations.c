/* One duration convention (kcr/time.h, docs/abi.md): KCR_DURATION_INFINITE
 * is no limit where a field or parameter takes it, KCR_DURATION_ZERO only
 * where it is documented, and any other negative value is refused. */
#include <criterion/criterion.h>
#include <string.h>

#include "kcr/kcr.h"

static kcr_err process(const char *key, const kcr_delta *deltas, size_t n,
                       bool is_in_initial_list, bool *requeue, void *user_data)
{
    (void)key, (void)deltas, (void)n, (void)is_in_initial_list, (void)requeue, (void)user_data;
    return KCR_OK;
}

Test(durations, timeout_parameters)
{
    kcr_workqueue *q = NULL;
    cr_assert_eq(kcr_workqueue_new(NULL, &q), KCR_OK);
    const char *key = NULL;
    cr_assert_eq(kcr_workqueue_get_timeout(q, 0, &key), KCR_ERR_TIMEOUT); /* no wait */
    cr_assert_eq(kcr_workqueue_get_timeout(q, KCR_DURATION_ZERO, &key), KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "timeout_ms"), "%s", kcr_last_error());
    cr_assert_eq(kcr_workqueue_add(q, "k", NULL), KCR_OK);
    cr_assert_eq(kcr_workqueue_get_timeout(q, KCR_DURATION_INFINITE, &key), KCR_OK);
    cr_assert_eq(kcr_workqueue_done(q, key), KCR_OK);
    kcr_workqueue_free(q);

    kcr_delta_fifo *f = NULL;
    cr_assert_eq(kcr_delta_fifo_new(NULL, &f), KCR_OK);
    /* a negative timeout used to mean "at once": now only 0 does */
    cr_assert_eq(kcr_delta_fifo_pop_timeout(f, process, NULL, -5), KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "timeout_ms"), "%s", kcr_last_error());
    cr_assert_eq(kcr_delta_fifo_pop_timeout(f, process, NULL, 0), KCR_ERR_TIMEOUT);
    kcr_delta_fifo_free(f);
}

Test(durations, option_fields)
{
    kcr_workqueue *q = NULL;
    kcr_workqueue_options o = {.priority_max_wait_ms = KCR_DURATION_INFINITE};
    cr_assert_eq(kcr_workqueue_new(&o, &q), KCR_OK, "%s", kcr_last_error());
    kcr_workqueue_free(q);
    q = NULL;
    o.priority_max_wait_ms = KCR_DURATION_ZERO;
    cr_assert_eq(kcr_workqueue_new(&o, &q), KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "priority_max_wait_ms"), "%s", kcr_last_error());
    cr_assert_null(q);
}
