/* Shorthands for the test kit tests (test_testkit*.c): the kit under test,
 * seeding that must succeed, and the last reconcile of the history. */
#ifndef KCR_TEST_TESTKIT_FIXTURE_H
#define KCR_TEST_TESTKIT_FIXTURE_H

#include <criterion/criterion.h>

#include "kcr/fake.h"
#include "kcr/kcr.h"
#include "kcr/testkit.h"

static kcr_testkit *tk;

static inline void seed(const char *text)
{
    cr_assert_eq(kcr_testkit_seed(tk, text), KCR_OK, "%s", kcr_last_error());
}

static inline const kcr_testkit_record *last(void)
{
    size_t n;
    const kcr_testkit_record *h = kcr_testkit_history(tk, &n);
    cr_assert_gt(n, 0);
    return &h[n - 1];
}

#endif
