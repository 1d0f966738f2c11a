/* The informer tests' environment (test_informer.c, _dispatch, _sync,
 * _lister, _lifecycle, _inline): a fake seeded with ConfigMaps, a client and an
 * informer with fast backoff, and CONVERGE, which waits until the
 * informer's cache matches the fake; starting it synced, tracker handlers,
 * and the stop-versus-remove race both delivery modes must survive. */
#ifndef KCR_TEST_INFORMER_ENV_H
#define KCR_TEST_INFORMER_ENV_H

#include <criterion/criterion.h>
#include <pthread.h>

#include "informer/informer_internal.h"
#include "tests/unit/informer_fixtures.h"
#include "kcr/fake.h"

static inline kcr_informer_options fast(void)
{
    kcr_informer_options o = {0};
    o.reflector.backoff_initial_ms = 5;
    o.reflector.backoff_max_ms = 40;
    return o;
}

typedef struct env {
    kcr_fake *fake;
    kcr_client *c;
    kcr_informer *inf;
} env;

static inline void env_up(env *e, int seed, const kcr_informer_options *o)
{
    cr_assert_eq(kcr_fake_new(NULL, &e->fake), KCR_OK);
    seed_many(e->fake, "default", seed);
    cr_assert_eq(kcr_fake_client(e->fake, NULL, &e->c), KCR_OK);
    kcr_informer_options d = fast();
    cr_assert_eq(kcr_informer_new(e->c, &CM, o ? o : &d, &e->inf), KCR_OK);
}

static inline void env_down(env *e)
{
    kcr_informer_free(e->inf);
    kcr_client_free(e->c);
    kcr_fake_free(e->fake);
}

#define CONVERGE(e, t)                                                                           \
    do {                                                                                         \
        char why_[512] = "";                                                                     \
        cr_assert(converge_wait((e)->c, &CM, NULL, NULL, (e)->inf, (t), 5000, why_, sizeof why_), \
                  "not converged: %s", why_);                                                    \
    } while (0)

/* Starts e's informer and waits (5 s at most) until its cache synced. */
static inline void env_start_synced(env *e)
{
    cr_assert_eq(kcr_informer_start(e->inf), KCR_OK);
    cr_assert_eq(kcr_informer_wait_for_sync(e->inf, 5000, NULL), KCR_OK);
}

/* Adds tracker_handler(t, resync_ms) with `delivery` to e's informer;
 * returns its registration (the informer owns it). */
static inline kcr_handler_reg *env_track(env *e, tracker *t, int64_t resync_ms,
                                         kcr_handler_delivery delivery)
{
    kcr_event_handler h = tracker_handler(t, resync_ms);
    h.delivery = delivery;
    kcr_handler_reg *reg = NULL;
    cr_assert_eq(kcr_informer_add_handler(e->inf, &h, &reg), KCR_OK);
    return reg;
}

/* Waits (5 s at most) until the handler has synced; fails if it has not. */
static inline void wait_handler_synced(kcr_handler_reg *reg)
{
    WAIT_FOR(kcr_handler_has_synced(reg), 5000);
    cr_assert(kcr_handler_has_synced(reg));
}

/* Updates cm-00001, waits until e's cache matches the fake and returns the
 * cached cm-00001 (the caller unrefs it). */
static inline kcr_object *env_cached_after_update(env *e)
{
    cr_assert_eq(patch_cm(e->c, "default", "cm-00001", "v2"), KCR_OK);
    CONVERGE(e, NULL);
    return kcr_lister_get(kcr_informer_store(e->inf), "default", "cm-00001");
}

/* After t's handler had the cache replayed, live events come each once: an
 * update of cm-00002 reaches it as one update, not a second add. */
static inline void check_live_update_after_replay(env *e, tracker *t)
{
    cr_assert_eq(patch_cm(e->c, "default", "cm-00002", "v2"), KCR_OK);
    CONVERGE(e, t);
    cr_assert_eq(tracker_adds_of_key(t, "default/cm-00002"), 1);
    cr_assert_eq(tracker_get_counts(t).updates, 1);
}

typedef struct remover {
    kcr_informer *inf;
    kcr_handler_reg *reg;
    kcr_err err;
} remover;

static inline void *remove_main(void *arg)
{
    remover *r = arg;
    r->err = kcr_informer_remove_handler(r->inf, r->reg);
    return NULL;
}

/* The sum of t's callbacks of every kind. */
static inline uint64_t tracker_calls(tracker *t)
{
    tracker_counts n = tracker_get_counts(t);
    return n.adds + n.updates + n.resyncs + n.deletes;
}

/* Stop and remove race for the same handler, delivered as `delivery` and,
 * in odd rounds, kept busy delivering by a 2 ms resync: each call returns
 * (a handler thread is joined once), the removal succeeds, no callback
 * comes once both returned (checked over ten resync periods), nothing
 * leaks. */
static inline void race_stop_and_remove(kcr_handler_delivery delivery)
{
    for (int round = 0; round < 20; round++) {
        env e;
        env_up(&e, 5, NULL);
        tracker *t = tracker_new();
        remover r = {.inf = e.inf, .reg = env_track(&e, t, round % 2 ? 2 : 0, delivery)};
        cr_assert_eq(kcr_informer_start(e.inf), KCR_OK);
        pthread_t th;
        cr_assert_eq(pthread_create(&th, NULL, remove_main, &r), 0);
        kcr_informer_stop(e.inf);
        pthread_join(th, NULL);
        cr_assert_eq(r.err, KCR_OK, "round %d: %s", round, kcr_strerror(r.err));
        uint64_t calls = tracker_calls(t);
        sleep_ms(20);
        cr_assert_eq(tracker_calls(t), calls, "round %d: a callback after stop and removal", round);
        env_down(&e);
        tracker_free(t);
    }
}

#endif
