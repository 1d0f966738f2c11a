/* Informer and factory lifecycle: the factory shares informers and starts,
 * waits for and stops them all; handlers are removed (twice, after stop,
 * while stopping) across start/stop cycles; a stopped factory refuses to
 * start or make informers. */
#include <pthread.h>

#include "tests/unit/informer_env.h"
#include "kcr/fake.h"

Test(informer, factory_shares_informers_and_starts_waits_stops_all)
{
    kcr_fake *f;
    cr_assert_eq(kcr_fake_new(NULL, &f), KCR_OK);
    seed_many(f, "default", 5);
    seed_many(f, "b", 3);
    kcr_client *c;
    kcr_fake_client(f, NULL, &c);
    kcr_informer_options d = fast();
    kcr_informer_factory *fac;
    cr_assert_eq(kcr_informer_factory_new(c, &d, &fac), KCR_OK);
    kcr_informer *i1, *i2, *i3, *i4;
    cr_assert_eq(kcr_informer_factory_informer(fac, &CM, NULL, &i1), KCR_OK);
    cr_assert_eq(kcr_informer_factory_informer(fac, &CM, NULL, &i2), KCR_OK);
    cr_assert(i1 == i2, "one informer per resource");
    kcr_informer_options nb = fast();
    nb.reflector.ns = "b";
    cr_assert_eq(kcr_informer_factory_informer(fac, &CM, &nb, &i3), KCR_OK);
    cr_assert(i3 != i1, "another namespace is another informer");
    cr_assert_eq(kcr_informer_factory_start(fac), KCR_OK);
    cr_assert_eq(kcr_informer_factory_wait_for_sync(fac, 5000, NULL), KCR_OK);
    cr_assert_eq(kcr_store_len(kcr_informer_store(i1)), 8);
    cr_assert_eq(kcr_store_len(kcr_informer_store(i3)), 3);
    /* created after start: started at once */
    kcr_informer_options sel = fast();
    sel.reflector.label_selector = "app=odd";
    cr_assert_eq(kcr_informer_factory_informer(fac, &CM, &sel, &i4), KCR_OK);
    cr_assert_eq(kcr_informer_factory_wait_for_sync(fac, 5000, NULL), KCR_OK);
    cr_assert_eq(kcr_store_len(kcr_informer_store(i4)), 3);
    int64_t t0 = now_ms();
    kcr_informer_factory_stop(fac);
    cr_assert_lt(now_ms() - t0, 1000);
    cr_assert_eq(kcr_fake_watch_count(f, NULL), 0, "every watch closed");
    kcr_informer_factory_free(fac);
    kcr_client_free(c);
    kcr_fake_free(f);
}

Test(informer, remove_handler_and_start_stop_cycles)
{
    for (int round = 0; round < 5; round++) {
        env e;
        env_up(&e, 20, NULL);
        tracker *t = tracker_new();
        kcr_event_handler h = tracker_handler(t, 10);
        kcr_handler_reg *reg;
        cr_assert_eq(kcr_informer_add_handler(e.inf, &h, &reg), KCR_OK);
        cr_assert_eq(kcr_informer_start(e.inf), KCR_OK);
        if (round % 2)
            cr_assert_eq(kcr_informer_wait_for_sync(e.inf, 5000, NULL), KCR_OK);
        if (round == 3)
            cr_assert_eq(kcr_informer_remove_handler(e.inf, reg), KCR_OK);
        int64_t t0 = now_ms();
        kcr_informer_stop(e.inf);
        cr_assert_lt(now_ms() - t0, 1000);
        cr_assert_eq(kcr_informer_start(e.inf), KCR_ERR_STATE);
        cr_assert_eq(kcr_informer_add_handler(e.inf, &h, NULL), KCR_ERR_SHUTDOWN);
        env_down(&e);
        tracker_free(t);
    }
}

Test(informer, remove_handler_twice_is_not_found)
{
    env e;
    env_up(&e, 3, NULL);
    tracker *t = tracker_new();
    kcr_handler_reg *reg = env_track(&e, t, 0, KCR_HANDLER_DELIVERY_THREAD);
    env_start_synced(&e);
    cr_assert_eq(kcr_informer_remove_handler(e.inf, reg), KCR_OK);
    /* reg is freed: the second call must not read it (valgrind checks) */
    cr_assert_eq(kcr_informer_remove_handler(e.inf, reg), KCR_ERR_NOT_FOUND);
    cr_assert(strstr(kcr_last_error(), "handler") != NULL, "%s", kcr_last_error());
    env_down(&e);
    tracker_free(t);
}

Test(informer, remove_handler_after_stop, .timeout = 30)
{
    /* the manager frees controllers (removing their handlers) after the
     * caches stopped: the handler's thread, already joined by stop, must not
     * be joined again (undefined behaviour; valgrind caught it) */
    env e;
    env_up(&e, 3, NULL);
    tracker *t = tracker_new();
    kcr_event_handler h = tracker_handler(t, 0);
    kcr_handler_reg *first, *second;
    cr_assert_eq(kcr_informer_add_handler(e.inf, &h, &first), KCR_OK);
    cr_assert_eq(kcr_informer_add_handler(e.inf, &h, &second), KCR_OK);
    env_start_synced(&e);
    kcr_informer_stop(e.inf);
    /* new threads reuse the ended threads' descriptors: a second join of
     * those would wait for these live threads (a hang) */
    env other;
    env_up(&other, 1, NULL);
    cr_assert_eq(kcr_informer_add_handler(other.inf, &h, NULL), KCR_OK);
    cr_assert_eq(kcr_informer_add_handler(other.inf, &h, NULL), KCR_OK);
    cr_assert_eq(kcr_informer_remove_handler(e.inf, second), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_informer_remove_handler(e.inf, first), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_informer_remove_handler(e.inf, first), KCR_ERR_NOT_FOUND);
    env_down(&other);
    env_down(&e);
    tracker_free(t);
}

/* A threaded handler in the race: its thread is joined once */
Test(informer, remove_handler_while_stopping)
{
    race_stop_and_remove(KCR_HANDLER_DELIVERY_THREAD);
}

Test(informer, factory_refuses_start_and_new_informers_after_stop)
{
    kcr_fake *f;
    cr_assert_eq(kcr_fake_new(NULL, &f), KCR_OK);
    seed_many(f, "default", 2);
    kcr_client *c;
    kcr_fake_client(f, NULL, &c);
    kcr_informer_options d = fast();
    kcr_informer_factory *fac;
    cr_assert_eq(kcr_informer_factory_new(c, &d, &fac), KCR_OK);
    kcr_informer *i1, *i2 = NULL;
    cr_assert_eq(kcr_informer_factory_informer(fac, &CM, NULL, &i1), KCR_OK);
    cr_assert_eq(kcr_informer_factory_start(fac), KCR_OK);
    cr_assert_eq(kcr_informer_factory_wait_for_sync(fac, 5000, NULL), KCR_OK);
    kcr_informer_factory_stop(fac);
    kcr_err err = kcr_informer_factory_start(fac);
    cr_assert_eq(err, KCR_ERR_STATE, "%s", kcr_strerror(err));
    cr_assert(strstr(kcr_last_error(), "stopped") != NULL, "%s", kcr_last_error());
    kcr_informer_options other = fast();
    other.reflector.ns = "default";
    err = kcr_informer_factory_informer(fac, &CM, &other, &i2);
    cr_assert_eq(err, KCR_ERR_STATE, "%s", kcr_strerror(err));
    cr_assert_null(i2);
    cr_assert(strstr(kcr_last_error(), "stopped") != NULL, "%s", kcr_last_error());
    cr_assert_eq(kcr_fake_watch_count(f, NULL), 0, "nothing started after stop");
    kcr_informer_factory_free(fac);

    /* stopped before it ever started: start refuses too */
    cr_assert_eq(kcr_informer_factory_new(c, &d, &fac), KCR_OK);
    kcr_informer_factory_stop(fac);
    cr_assert_eq(kcr_informer_factory_start(fac), KCR_ERR_STATE);
    kcr_informer_factory_free(fac);
    kcr_client_free(c);
    kcr_fake_free(f);
}
