/* The informer's resync timer: resyncs arrive about on time (never early,
 * not late by more than scheduling noise), and with no handler asking for
 * resync the timer waits with no deadline (no once-a-second expiries) until a
 * handler with a resync period is added. */
#include <criterion/criterion.h>
#include <pthread.h>

#include "informer/informer_internal.h"
#include "tests/unit/informer_fixtures.h"
#include "kcr/fake.h"

#define ROUNDS 5

/* Records when each resync (old == new) arrived. */
typedef struct stamps {
    pthread_mutex_t mu;
    int64_t at_ms[ROUNDS];
    size_t n;
} stamps;

static void st_update(const char *key, const kcr_object *old, const kcr_object *cur, void *ud)
{
    (void)key;
    stamps *s = ud;
    if (strcmp(kcr_object_resource_version(old), kcr_object_resource_version(cur)) != 0)
        return;
    pthread_mutex_lock(&s->mu);
    if (s->n < ROUNDS)
        s->at_ms[s->n++] = now_ms();
    pthread_mutex_unlock(&s->mu);
}

static size_t st_count(stamps *s)
{
    pthread_mutex_lock(&s->mu);
    size_t n = s->n;
    pthread_mutex_unlock(&s->mu);
    return n;
}

typedef struct env {
    kcr_fake *fake;
    kcr_client *c;
    kcr_informer *inf;
} env;

static void env_up(env *e)
{
    cr_assert_eq(kcr_fake_new(NULL, &e->fake), KCR_OK);
    seed_many(e->fake, "default", 1);
    cr_assert_eq(kcr_fake_client(e->fake, NULL, &e->c), KCR_OK);
    cr_assert_eq(kcr_informer_new(e->c, &CM, NULL, &e->inf), KCR_OK);
}

static void env_down(env *e)
{
    kcr_informer_free(e->inf);
    kcr_client_free(e->c);
    kcr_fake_free(e->fake);
}

Test(informer_resync, resyncs_arrive_about_every_period)
{
    env e;
    env_up(&e);
    stamps s = {.mu = PTHREAD_MUTEX_INITIALIZER};
    const int64_t period = 150;
    kcr_event_handler h = {.on_update = st_update, .resync_period_ms = period, .user_data = &s};
    int64_t t0 = now_ms();
    cr_assert_eq(kcr_informer_add_handler(e.inf, &h, NULL), KCR_OK);
    cr_assert_eq(kcr_informer_start(e.inf), KCR_OK);
    cr_assert_eq(kcr_informer_wait_for_sync(e.inf, 5000, NULL), KCR_OK);
    WAIT_FOR(st_count(&s) == ROUNDS, 10000);
    size_t n = st_count(&s);
    env_down(&e); /* before asserting: the handler thread writes to s */
    cr_assert_eq(n, ROUNDS);
    /* The i-th is due i periods after the handler was added, not before. The
     * times are of delivery, which a busy machine delays (one late delivery
     * brings the next closer), so only the total is bounded above. */
    for (size_t i = 0; i < ROUNDS; i++)
        cr_assert_geq(s.at_ms[i] - t0, (int64_t)(i + 1) * period,
                      "resync %zu early: %lld ms after the handler was added", i + 1,
                      (long long)(s.at_ms[i] - t0));
    int64_t total = s.at_ms[ROUNDS - 1] - t0;
    cr_assert_leq(total, ROUNDS * period * 3, "%d resyncs of a %lld ms period took %lld ms",
                  ROUNDS, (long long)period, (long long)total);
}

Test(informer_resync, no_wakeups_without_a_resync_handler_until_one_is_added)
{
    env e;
    env_up(&e);
    stamps quiet = {.mu = PTHREAD_MUTEX_INITIALIZER};
    kcr_event_handler h = {.on_update = st_update, .user_data = &quiet};
    kcr_handler_reg *reg;
    cr_assert_eq(kcr_informer_add_handler(e.inf, &h, &reg), KCR_OK);
    cr_assert_eq(kcr_informer_start(e.inf), KCR_OK);
    cr_assert_eq(kcr_informer_wait_for_sync(e.inf, 5000, NULL), KCR_OK);
    WAIT_FOR(kcr_handler_has_synced(reg), 5000);
    cr_assert(kcr_handler_has_synced(reg));
    /* Nothing happens from now on; a 1 s poll would wake at least once. */
    uint64_t w0 = kcr__informer_resync_timeouts(e.inf);
    sleep_ms(1300);
    cr_assert_eq(kcr__informer_resync_timeouts(e.inf), w0,
                 "the resync timer expired with nothing due");
    cr_assert_eq(st_count(&quiet), 0);
    /* a handler asking for resync wakes the timer, which then keeps time */
    stamps s = {.mu = PTHREAD_MUTEX_INITIALIZER};
    kcr_event_handler hr = {.on_update = st_update, .resync_period_ms = 100, .user_data = &s};
    cr_assert_eq(kcr_informer_add_handler(e.inf, &hr, NULL), KCR_OK);
    WAIT_FOR(st_count(&s) >= 2, 5000);
    cr_assert_geq(st_count(&s), 2);
    cr_assert_geq(kcr__informer_resync_timeouts(e.inf), w0 + 2, "resyncs come from the timer");
    cr_assert_eq(st_count(&quiet), 0, "only the handler that asked gets resyncs");
    env_down(&e);
}

Test(informer_resync, a_resync_period_beyond_35_years_is_refused)
{
    env e;
    env_up(&e);
    stamps s = {.mu = PTHREAD_MUTEX_INITIALIZER};
    kcr_event_handler h = {
        .on_update = st_update, .resync_period_ms = (INT64_C(1) << 40) + 1, .user_data = &s};
    kcr_handler_reg *reg = (kcr_handler_reg *)&s;
    cr_assert_eq(kcr_informer_add_handler(e.inf, &h, &reg), KCR_ERR_INVALID);
    cr_assert_null(reg);
    cr_assert(strstr(kcr_last_error(), "resync_period_ms"), "%s", kcr_last_error());
    h.resync_period_ms = INT64_C(1) << 40;
    cr_assert_eq(kcr_informer_add_handler(e.inf, &h, &reg), KCR_OK, "%s", kcr_last_error());
    cr_assert_not_null(reg);
    env_down(&e);
}
