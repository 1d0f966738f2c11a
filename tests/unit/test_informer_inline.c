/* Inline handlers (KCR_HANDLER_DELIVERY_INLINE) on the fake: the same
 * events, order and has_synced as a threaded handler, delivered by the
 * informer's own threads; the replay to a late handler before add_handler
 * returns; removal rules; stop racing a removal; bad delivery values. */
#include <criterion/criterion.h>
#include <pthread.h>

#include "tests/unit/informer_env.h"

/* Which threads delivered: the initial adds' and the live events'. */
typedef struct probe {
    pthread_mutex_t mu;
    pthread_t initial_thread, live_thread;
    unsigned initial, live;
    bool initial_mixed, live_mixed; /* seen on more than one thread */
} probe;

static void probe_note(probe *p, bool initial)
{
    pthread_t self = pthread_self();
    pthread_mutex_lock(&p->mu);
    pthread_t *th = initial ? &p->initial_thread : &p->live_thread;
    unsigned *n = initial ? &p->initial : &p->live;
    bool *mixed = initial ? &p->initial_mixed : &p->live_mixed;
    if (*n && !pthread_equal(*th, self))
        *mixed = true;
    *th = self;
    (*n)++;
    pthread_mutex_unlock(&p->mu);
}

static void p_add(const char *key, const kcr_object *o, bool initial, void *ud)
{
    probe_note(ud, initial);
}

static void p_update(const char *key, const kcr_object *old, const kcr_object *cur, void *ud)
{
    probe_note(ud, false);
}

static void p_delete(const char *key, const kcr_object *o, const kcr_tombstone *t, void *ud)
{
    probe_note(ud, false);
}

static kcr_event_handler probe_handler(probe *p, kcr_handler_delivery d)
{
    pthread_mutex_init(&p->mu, NULL);
    return (kcr_event_handler){.on_add = p_add,
                               .on_update = p_update,
                               .on_delete = p_delete,
                               .delivery = d,
                               .user_data = p};
}

static unsigned probe_live(probe *p)
{
    pthread_mutex_lock(&p->mu);
    unsigned n = p->live;
    pthread_mutex_unlock(&p->mu);
    return n;
}

Test(informer_inline, same_events_as_a_threaded_handler_on_the_informers_threads)
{
    env e;
    env_up(&e, 20, NULL);
    tracker *t = tracker_new();
    kcr_event_handler th = tracker_handler(t, 0);
    th.delivery = KCR_HANDLER_DELIVERY_INLINE;
    probe pi = {0}, pt = {0};
    kcr_event_handler hi = probe_handler(&pi, KCR_HANDLER_DELIVERY_INLINE);
    kcr_event_handler ht = probe_handler(&pt, KCR_HANDLER_DELIVERY_THREAD);
    kcr_handler_reg *reg, *reg_t;
    cr_assert_eq(kcr_informer_add_handler(e.inf, &th, &reg), KCR_OK);
    cr_assert_eq(kcr_informer_add_handler(e.inf, &hi, NULL), KCR_OK);
    cr_assert_eq(kcr_informer_add_handler(e.inf, &ht, &reg_t), KCR_OK);
    env_start_synced(&e);
    wait_handler_synced(reg);
    /* the threaded handler past its initial adds too: a pending initial add
     * would absorb the updates below (docs/informer.md, "Dispatch") */
    wait_handler_synced(reg_t);
    tracker_counts n = tracker_get_counts(t);
    cr_assert_eq(n.adds, 20);
    cr_assert_eq(n.initial_adds, 20);

    kcr_object *gone = NULL;
    cr_assert_eq(
        kcr_client_get(e.c, &(kcr_request){.resource = &CM, .ns = "default", .name = "cm-00004"},
                       &gone),
        KCR_OK);
    tracker_expect_deleted(t, kcr_object_uid(gone));
    cr_assert_eq(
        kcr_client_delete(e.c, &(kcr_request){.resource = &CM, .ns = "default", .name = "cm-00004"},
                          NULL),
        KCR_OK);
    for (int i = 0; i < 5; i++) {
        char v[8];
        snprintf(v, sizeof v, "v%d", i);
        cr_assert_eq(patch_cm(e.c, "default", "cm-00001", v), KCR_OK);
    }
    kcr_object_unref(seed_cm(e.fake, "default", "fresh", "a", "b"));
    CONVERGE(&e, t);
    n = tracker_get_counts(t);
    cr_assert_eq(n.adds, 21);
    cr_assert_eq(n.initial_adds, 20);
    cr_assert_eq(n.deletes, 1);
    cr_assert_eq(n.wrong_keys, 0);
    cr_assert_geq(n.updates, 1);
    WAIT_FOR(probe_live(&pt) >= 3, 5000);

    /* one informer thread delivered the initial list, one the live events,
     * none of them the caller's or the threaded handler's */
    pthread_mutex_lock(&pi.mu);
    cr_assert_eq(pi.initial, 20);
    cr_assert_geq(pi.live, 3);
    cr_assert_not(pi.initial_mixed);
    cr_assert_not(pi.live_mixed);
    cr_assert_not(pthread_equal(pi.initial_thread, pthread_self()));
    cr_assert_not(pthread_equal(pi.live_thread, pthread_self()));
    pthread_mutex_lock(&pt.mu);
    cr_assert_not(pthread_equal(pi.live_thread, pt.live_thread));
    pthread_mutex_unlock(&pt.mu);
    pthread_mutex_unlock(&pi.mu);
    kcr_object_unref(gone);
    env_down(&e);
    tracker_free(t);
}

Test(informer_inline, late_handler_gets_the_replay_before_add_handler_returns)
{
    env e;
    env_up(&e, 30, NULL);
    env_start_synced(&e);
    tracker *t = tracker_new();
    kcr_handler_reg *reg = env_track(&e, t, 0, KCR_HANDLER_DELIVERY_INLINE);
    /* no wait: delivered on this thread before the call returned */
    cr_assert(kcr_handler_has_synced(reg));
    tracker_counts n = tracker_get_counts(t);
    cr_assert_eq(n.adds, 30);
    cr_assert_eq(n.initial_adds, 30);
    cr_assert_eq(kcr_handler_pending(reg, NULL), 0);
    check_live_update_after_replay(&e, t);
    env_down(&e);
    tracker_free(t);
}

typedef struct remover_cb {
    kcr_informer *inf;
    kcr_handler_reg *self, *other;
    pthread_mutex_t mu;
    bool done, reported;
    kcr_err self_err, other_err;
} remover_cb;

static void rm_update(const char *key, const kcr_object *old, const kcr_object *cur, void *ud)
{
    remover_cb *r = ud;
    pthread_mutex_lock(&r->mu);
    bool first = !r->done;
    r->done = true;
    pthread_mutex_unlock(&r->mu);
    if (!first)
        return;
    kcr_err self_err = kcr_informer_remove_handler(r->inf, r->self);
    kcr_err other_err = kcr_informer_remove_handler(r->inf, r->other);
    pthread_mutex_lock(&r->mu);
    r->self_err = self_err;
    r->other_err = other_err;
    r->reported = true;
    pthread_mutex_unlock(&r->mu);
}

static bool rm_done(remover_cb *r)
{
    pthread_mutex_lock(&r->mu);
    bool d = r->reported;
    pthread_mutex_unlock(&r->mu);
    return d;
}

Test(informer_inline, cannot_remove_itself_from_its_callback_but_can_remove_another)
{
    env e;
    env_up(&e, 3, NULL);
    remover_cb r = {.inf = e.inf};
    pthread_mutex_init(&r.mu, NULL);
    kcr_event_handler h = {
        .on_update = rm_update, .delivery = KCR_HANDLER_DELIVERY_INLINE, .user_data = &r};
    tracker *t = tracker_new();
    kcr_event_handler other = tracker_handler(t, 0);
    cr_assert_eq(kcr_informer_add_handler(e.inf, &h, &r.self), KCR_OK);
    cr_assert_eq(kcr_informer_add_handler(e.inf, &other, &r.other), KCR_OK);
    env_start_synced(&e);
    cr_assert_eq(patch_cm(e.c, "default", "cm-00001", "v2"), KCR_OK);
    WAIT_FOR(rm_done(&r), 5000);
    pthread_mutex_lock(&r.mu);
    cr_assert(r.reported);
    cr_assert_eq(r.self_err, KCR_ERR_STATE, "%s", kcr_strerror(r.self_err));
    cr_assert_eq(r.other_err, KCR_OK, "%s", kcr_strerror(r.other_err));
    pthread_mutex_unlock(&r.mu);
    cr_assert_eq(kcr_informer_remove_handler(e.inf, r.other), KCR_ERR_NOT_FOUND);
    cr_assert_eq(kcr_informer_remove_handler(e.inf, r.self), KCR_OK, "%s", kcr_last_error());
    env_down(&e);
    tracker_free(t);
    pthread_mutex_destroy(&r.mu);
}

/* An inline handler in the race (no delivery after stop returned: checked,
 * and valgrind would see the tracker freed right after touched) */
Test(informer_inline, remove_while_stopping)
{
    race_stop_and_remove(KCR_HANDLER_DELIVERY_INLINE);
}

Test(informer_inline, a_delivery_that_is_not_one_is_refused)
{
    env e;
    env_up(&e, 1, NULL);
    kcr_event_handler h = {.delivery = (kcr_handler_delivery)7};
    kcr_handler_reg *reg = (kcr_handler_reg *)&h;
    cr_assert_eq(kcr_informer_add_handler(e.inf, &h, &reg), KCR_ERR_INVALID);
    cr_assert_null(reg);
    cr_assert(strstr(kcr_last_error(), "delivery") != NULL, "%s", kcr_last_error());
    env_down(&e);
}
