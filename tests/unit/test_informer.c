/* Shared index informer on the fake: handlers, initial list flag, late
 * handler replay, resync routing, coalescing dispatch with bounded memory,
 * slow-handler isolation, tombstones after a relist, transform,
 * wait_for_sync reasons, listers, factory, metadata-only, stop. */
#include <criterion/criterion.h>

#include "informer/informer_internal.h"
#include "tests/unit/informer_fixtures.h"

static kcr_informer_options fast(void)
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

static void env_up(env *e, int seed, const kcr_informer_options *o)
{
    cr_assert_eq(kcr_fake_new(NULL, &e->fake), KCR_OK);
    seed_many(e->fake, "default", seed);
    cr_assert_eq(kcr_fake_client(e->fake, NULL, &e->c), KCR_OK);
    kcr_informer_options d = fast();
    cr_assert_eq(kcr_informer_new(e->c, &CM, o ? o : &d, &e->inf), KCR_OK);
}

static void env_down(env *e)
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

Test(informer, initial_list_then_add_update_delete)
{
    env e;
    env_up(&e, 50, NULL);
    tracker *t = tracker_new();
    kcr_event_handler h = tracker_handler(t, 0);
    kcr_handler_reg *reg;
    cr_assert_eq(kcr_informer_add_handler(e.inf, &h, &reg), KCR_OK);
    cr_assert_eq(kcr_informer_start(e.inf), KCR_OK);
    cr_assert_eq(kcr_informer_wait_for_sync(e.inf, 5000, NULL), KCR_OK);
    cr_assert(kcr_informer_has_synced(e.inf));
    WAIT_FOR(kcr_handler_has_synced(reg), 5000);
    cr_assert(kcr_handler_has_synced(reg));
    tracker_counts n = tracker_get_counts(t);
    cr_assert_eq(n.adds, 50);
    cr_assert_eq(n.initial_adds, 50);
    cr_assert_eq(kcr_store_len(kcr_informer_store(e.inf)), 50);
    /* the initial list's items came untyped from the fake, as from a real
     * server: the cache has them typed, so owner references can be built */
    kcr_object *listed = kcr_lister_get(kcr_informer_store(e.inf), "default", "cm-00003");
    cr_assert_not_null(listed);
    cr_assert_str_eq(kcr_object_kind(listed), "ConfigMap");
    cr_assert_str_eq(kcr_object_api_version(listed), "v1");
    kcr_object_unref(listed);

    kcr_object *gone = NULL;
    cr_assert_eq(kcr_client_get(e.c, &CM, "default", "cm-00007", NULL, &gone, NULL), KCR_OK);
    tracker_expect_deleted(t, kcr_object_uid(gone));
    cr_assert_eq(kcr_client_delete(e.c, &CM, "default", "cm-00007", NULL, NULL, NULL), KCR_OK);
    cr_assert_eq(patch_cm(e.c, "default", "cm-00001", "v2"), KCR_OK);
    kcr_object_unref(seed_cm(e.fake, "default", "fresh", "a", "b"));
    CONVERGE(&e, t);
    n = tracker_get_counts(t);
    cr_assert_eq(n.adds, 51);
    cr_assert_eq(n.initial_adds, 50, "a later add is not in the initial list");
    cr_assert_eq(n.updates, 1);
    cr_assert_eq(n.deletes, 1);
    cr_assert_eq(n.tombstones, 0);
    cr_assert_eq(n.resyncs, 0);
    /* The reflector records an event's RV after queueing the event (so a
     * re-watch never skips one it did not queue), so the cache may show the
     * last event a moment before the RV does: wait for it. */
    char want[32];
    snprintf(want, sizeof want, "%llu", (unsigned long long)kcr_fake_resource_version(e.fake));
    char *rv = NULL;
    for (int64_t t0 = now_ms(); now_ms() - t0 < 5000; sleep_ms(2)) {
        free(rv);
        rv = kcr_informer_last_sync_rv(e.inf);
        if (strcmp(rv, want) == 0)
            break;
    }
    cr_assert_str_eq(rv, want);
    free(rv);
    kcr_object_unref(gone);
    env_down(&e);
    tracker_free(t);
}

Test(informer, managed_fields_stripped_unless_kept_and_user_transform_runs)
{
    env e;
    env_up(&e, 3, NULL);
    cr_assert_eq(kcr_informer_start(e.inf), KCR_OK);
    cr_assert_eq(kcr_informer_wait_for_sync(e.inf, 5000, NULL), KCR_OK);
    kcr_object *o = kcr_lister_get(kcr_informer_store(e.inf), "default", "cm-00000");
    cr_assert_not_null(o);
    cr_assert_eq(kcr_value_get_type(kcr_object_get(o, "metadata.managedFields")), KCR_VALUE_ABSENT);
    kcr_object_unref(o);
    env_down(&e);

    kcr_informer_options opts = fast();
    opts.keep_managed_fields = true;
    env_up(&e, 3, &opts);
    cr_assert_eq(kcr_informer_start(e.inf), KCR_OK);
    cr_assert_eq(kcr_informer_wait_for_sync(e.inf, 5000, NULL), KCR_OK);
    o = kcr_lister_get(kcr_informer_store(e.inf), "default", "cm-00000");
    cr_assert_eq(kcr_value_get_type(kcr_object_get(o, "metadata.managedFields")), KCR_VALUE_ARRAY);
    kcr_object_unref(o);
    env_down(&e);
}

static kcr_err drop_data(const kcr_object *in, kcr_object **out, void *ud)
{
    (void)ud;
    kcr_object_edit *ed = NULL;
    kcr_err err = kcr_object_edit_new(in, &ed);
    if (err == KCR_OK)
        err = kcr_object_edit_delete(ed, "data");
    if (err == KCR_OK)
        err = kcr_object_edit_freeze(ed, out);
    kcr_object_edit_free(ed);
    return err;
}

Test(informer, user_transform_before_caching)
{
    kcr_informer_options opts = fast();
    opts.transform = drop_data;
    env e;
    env_up(&e, 2, &opts);
    cr_assert_eq(kcr_informer_start(e.inf), KCR_OK);
    cr_assert_eq(kcr_informer_wait_for_sync(e.inf, 5000, NULL), KCR_OK);
    cr_assert_eq(patch_cm(e.c, "default", "cm-00001", "v2"), KCR_OK);
    CONVERGE(&e, NULL);
    kcr_object *o = kcr_lister_get(kcr_informer_store(e.inf), "default", "cm-00001");
    cr_assert_eq(kcr_value_get_type(kcr_object_get(o, "data")), KCR_VALUE_ABSENT);
    cr_assert_eq(kcr_value_get_type(kcr_object_get(o, "metadata.managedFields")), KCR_VALUE_ABSENT);
    kcr_object_unref(o);
    env_down(&e);
}

Test(informer, late_handler_gets_the_cache_replayed_as_adds)
{
    env e;
    env_up(&e, 30, NULL);
    cr_assert_eq(kcr_informer_start(e.inf), KCR_OK);
    cr_assert_eq(kcr_informer_wait_for_sync(e.inf, 5000, NULL), KCR_OK);
    tracker *t = tracker_new();
    kcr_event_handler h = tracker_handler(t, 0);
    kcr_handler_reg *reg;
    cr_assert_eq(kcr_informer_add_handler(e.inf, &h, &reg), KCR_OK);
    WAIT_FOR(kcr_handler_has_synced(reg), 5000);
    cr_assert(kcr_handler_has_synced(reg));
    tracker_counts n = tracker_get_counts(t);
    cr_assert_eq(n.adds, 30);
    cr_assert_eq(n.initial_adds, 30, "replayed adds count as initial");
    /* and then live events, each object once */
    cr_assert_eq(patch_cm(e.c, "default", "cm-00002", "v2"), KCR_OK);
    CONVERGE(&e, t);
    cr_assert_eq(tracker_adds_of_key(t, "default/cm-00002"), 1);
    cr_assert_eq(tracker_get_counts(t).updates, 1);
    env_down(&e);
    tracker_free(t);
}

Test(informer, resync_goes_only_to_handlers_that_asked)
{
    env e;
    env_up(&e, 10, NULL);
    tracker *a = tracker_new(), *b = tracker_new();
    kcr_event_handler ha = tracker_handler(a, 100), hb = tracker_handler(b, 0);
    cr_assert_eq(kcr_informer_add_handler(e.inf, &ha, NULL), KCR_OK);
    cr_assert_eq(kcr_informer_add_handler(e.inf, &hb, NULL), KCR_OK);
    cr_assert_eq(kcr_informer_start(e.inf), KCR_OK);
    cr_assert_eq(kcr_informer_wait_for_sync(e.inf, 5000, NULL), KCR_OK);
    WAIT_FOR(tracker_get_counts(a).resyncs >= 30, 5000);
    cr_assert_geq(tracker_get_counts(a).resyncs, 30, "three rounds of 10");
    cr_assert_eq(tracker_get_counts(b).resyncs, 0);
    cr_assert_eq(tracker_get_counts(b).updates, 0);
    cr_assert_eq(tracker_get_counts(a).updates, 0, "a resync is not a change");
    /* a relist that finds nothing changed is a resync too: only a sees it */
    uint64_t before = tracker_get_counts(b).updates + tracker_get_counts(b).resyncs;
    kcr_fake_watch_error(e.fake, &CM, 410, "Expired", "too old");
    kcr_reflector_stats rs = {0};
    for (int64_t t0 = now_ms(); rs.lists < 2 && now_ms() - t0 < 5000; sleep_ms(5))
        kcr_reflector_get_stats(kcr_informer_reflector(e.inf), &rs);
    cr_assert_eq(rs.lists, 2, "relisted");
    /* A barrier instead of a sleep: an object created now reaches b after
     * everything the relist queued (one FIFO, one handler queue). */
    kcr_object_unref(seed_cm(e.fake, "default", "marker", "x", "m"));
    WAIT_FOR(tracker_adds_of_key(b, "default/marker") == 1, 5000);
    cr_assert_eq(tracker_adds_of_key(b, "default/marker"), 1);
    cr_assert_eq(tracker_get_counts(b).updates + tracker_get_counts(b).resyncs, before);
    env_down(&e);
    tracker_free(a);
    tracker_free(b);
}

/* A handler that blocks until released, recording what it got. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool open;
    unsigned waiting; /* callbacks blocked at the gate */
    char log[8192];
    size_t len;
    unsigned calls;
} gate;

static void gate_init(gate *g)
{
    memset(g, 0, sizeof *g);
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cond, NULL);
}

static void gate_wait_and_log(gate *g, const char *fmt, const char *a, const char *b)
{
    pthread_mutex_lock(&g->mu);
    g->waiting++;
    while (!g->open)
        pthread_cond_wait(&g->cond, &g->mu);
    g->waiting--;
    g->calls++;
    g->len += (size_t)snprintf(g->log + g->len, sizeof g->log - g->len, fmt, a, b);
    pthread_mutex_unlock(&g->mu);
}

static void gate_set(gate *g, bool open)
{
    pthread_mutex_lock(&g->mu);
    g->open = open;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->mu);
}

static unsigned gate_waiting(gate *g)
{
    pthread_mutex_lock(&g->mu);
    unsigned n = g->waiting;
    pthread_mutex_unlock(&g->mu);
    return n;
}

static bool gate_logged(gate *g, const char *what)
{
    pthread_mutex_lock(&g->mu);
    bool found = strstr(g->log, what) != NULL;
    pthread_mutex_unlock(&g->mu);
    return found;
}

static unsigned gate_calls(gate *g)
{
    pthread_mutex_lock(&g->mu);
    unsigned n = g->calls;
    pthread_mutex_unlock(&g->mu);
    return n;
}

static void g_add(const char *key, const kcr_object *o, bool initial, void *ud)
{
    (void)key, (void)initial;
    gate_wait_and_log(ud, "add %s=%s;", kcr_object_name(o), kcr_object_get(o, "data.v").obj
                                                               ? kcr_value_string(kcr_object_get(o, "data.v"), NULL)
                                                               : "");
}

static void g_update(const char *key, const kcr_object *old, const kcr_object *cur, void *ud)
{
    (void)key;
    char buf[128];
    snprintf(buf, sizeof buf, "%s->%s", kcr_value_string(kcr_object_get(old, "data.v"), NULL),
             kcr_value_string(kcr_object_get(cur, "data.v"), NULL));
    gate_wait_and_log(ud, "update %s %s;", kcr_object_name(cur), buf);
}

static void g_delete(const char *key, const kcr_object *o, const kcr_tombstone *t, void *ud)
{
    gate_wait_and_log(ud, "delete %s%s;", o ? kcr_object_name(o) : key, t ? "(tombstone)" : "");
}

Test(informer, slow_handler_coalesces_by_key_and_stalls_nobody)
{
    env e;
    env_up(&e, 0, NULL);
    kcr_object_unref(seed_cm(e.fake, "default", "held", "x", "h0"));
    kcr_object_unref(seed_cm(e.fake, "default", "upd", "x", "u0"));
    kcr_object_unref(seed_cm(e.fake, "default", "del", "x", "d0"));
    kcr_object_unref(seed_cm(e.fake, "default", "re", "x", "r0"));
    gate g;
    gate_init(&g);
    kcr_event_handler slow = {.on_add = g_add, .on_update = g_update, .on_delete = g_delete,
                              .user_data = &g};
    tracker *fast_t = tracker_new();
    kcr_event_handler fasth = tracker_handler(fast_t, 0);
    kcr_handler_reg *sreg;
    cr_assert_eq(kcr_informer_add_handler(e.inf, &slow, &sreg), KCR_OK);
    cr_assert_eq(kcr_informer_add_handler(e.inf, &fasth, NULL), KCR_OK);
    cr_assert_eq(kcr_informer_start(e.inf), KCR_OK);
    cr_assert_eq(kcr_informer_wait_for_sync(e.inf, 5000, NULL), KCR_OK);
    cr_assert_not(kcr_handler_has_synced(sreg), "the slow handler has not seen the list yet");
    WAIT_FOR(gate_waiting(&g) == 1, 5000); /* blocked in its first on_add */
    /* the slow handler is blocked in its first on_add; meanwhile: */
    for (int i = 1; i <= 200; i++) {
        char v[16];
        snprintf(v, sizeof v, "u%d", i);
        cr_assert_eq(patch_cm(e.c, "default", "upd", v), KCR_OK);
    }
    cr_assert_eq(patch_cm(e.c, "default", "del", "d1"), KCR_OK);
    cr_assert_eq(kcr_client_delete(e.c, &CM, "default", "del", NULL, NULL, NULL), KCR_OK);
    cr_assert_eq(kcr_client_delete(e.c, &CM, "default", "re", NULL, NULL, NULL), KCR_OK);
    kcr_object_unref(seed_cm(e.fake, "default", "re", "x", "r1"));
    kcr_object_unref(seed_cm(e.fake, "default", "new", "x", "n0"));
    cr_assert_eq(patch_cm(e.c, "default", "new", "n1"), KCR_OK);
    /* the cache and the fast handler kept up */
    CONVERGE(&e, fast_t);
    cr_assert_leq(tracker_get_counts(fast_t).updates, 202, "202 changes (coalesced if it lagged)");
    size_t peak = 0;
    size_t pending = kcr_handler_pending(sreg, &peak);
    cr_assert_leq(peak, 5, "bounded by distinct keys (5), not by 200+ events: peak %zu", peak);
    cr_assert_leq(pending, 5);
    cr_assert_eq(gate_calls(&g), 0);
    gate_set(&g, true);
    /* A barrier instead of a sleep: the marker is created after every change
     * above, so its add is the last call the handler gets. */
    kcr_object_unref(seed_cm(e.fake, "default", "marker", "x", "m0"));
    WAIT_FOR(gate_calls(&g) >= 8 && gate_logged(&g, "add marker=m0;"), 5000);
    pthread_mutex_lock(&g.mu);
    const char *log = g.log;
    /* the list is del, held, re, upd: the handler blocked in add del;
     * held: its add; upd: one add of the newest state; del: update+delete
     * become one delete; re: delete then add; new: one add of its newest */
    cr_assert(strncmp(log, "add del=d0;", 11) == 0, "%s", log);
    cr_assert(strstr(log, "add held=h0;") != NULL, "%s", log);
    cr_assert(strstr(log, "add upd=u200;") != NULL, "%s", log);
    cr_assert(strstr(log, "update") == NULL, "%s", log);
    cr_assert(strstr(log, "delete del;") != NULL, "%s", log);
    const char *rd = strstr(log, "delete re;"), *ra = strstr(log, "add re=r1;");
    cr_assert(rd && ra && rd < ra, "%s", log);
    cr_assert(strstr(log, "add new=n1;") != NULL, "%s", log);
    size_t log_len = strlen(log), tail = strlen("add marker=m0;");
    cr_assert(log_len >= tail && strcmp(log + log_len - tail, "add marker=m0;") == 0, "%s", log);
    cr_assert_eq(g.calls, 8, "7 coalesced calls, then the marker: %s", log);
    pthread_mutex_unlock(&g.mu);
    cr_assert(kcr_handler_has_synced(sreg));
    env_down(&e);
    tracker_free(fast_t);
}

Test(informer, coalesced_update_keeps_the_old_the_handler_saw)
{
    env e;
    env_up(&e, 0, NULL);
    kcr_object_unref(seed_cm(e.fake, "default", "a", "x", "v0"));
    gate g;
    gate_init(&g);
    gate_set(&g, true);
    kcr_event_handler slow = {.on_add = g_add, .on_update = g_update, .on_delete = g_delete,
                              .user_data = &g};
    kcr_handler_reg *reg;
    cr_assert_eq(kcr_informer_add_handler(e.inf, &slow, &reg), KCR_OK);
    cr_assert_eq(kcr_informer_start(e.inf), KCR_OK);
    WAIT_FOR(kcr_handler_has_synced(reg), 5000);
    gate_set(&g, false);
    cr_assert_eq(patch_cm(e.c, "default", "a", "v1"), KCR_OK);
    WAIT_FOR(gate_waiting(&g) == 1, 5000); /* v1 taken, blocked inside */
    cr_assert_eq(gate_waiting(&g), 1);
    cr_assert_eq(patch_cm(e.c, "default", "a", "v2"), KCR_OK);
    cr_assert_eq(patch_cm(e.c, "default", "a", "v3"), KCR_OK);
    CONVERGE(&e, NULL);
    cr_assert_eq(kcr_handler_pending(reg, NULL), 1);
    gate_set(&g, true);
    WAIT_FOR(gate_calls(&g) == 3, 5000);
    pthread_mutex_lock(&g.mu);
    cr_assert_str_eq(g.log, "add a=v0;update a v0->v1;update a v1->v3;");
    pthread_mutex_unlock(&g.mu);
    env_down(&e);
}

Test(informer, deletes_missed_while_disconnected_arrive_as_tombstones)
{
    env e;
    env_up(&e, 20, NULL);
    tracker *t = tracker_new();
    kcr_event_handler h = tracker_handler(t, 0);
    cr_assert_eq(kcr_informer_add_handler(e.inf, &h, NULL), KCR_OK);
    cr_assert_eq(kcr_informer_start(e.inf), KCR_OK);
    cr_assert_eq(kcr_informer_wait_for_sync(e.inf, 5000, NULL), KCR_OK);
    /* Sync comes from the list; the watch may not be registered yet, and one
     * still being set up would escape both the injection and the end below. */
    WAIT_FOR(kcr_fake_watch_count(e.fake, &CM) == 1, 5000);
    cr_assert_eq(kcr_fake_watch_count(e.fake, &CM), 1);
    /* the watch breaks and cannot come back; meanwhile objects change */
    kcr_fake_inject_error(e.fake, KCR_FAKE_WATCH, &CM, -1, 503, "ServiceUnavailable", "down");
    kcr_fake_end_watches(e.fake, &CM);
    WAIT_FOR(kcr_reflector_last_error(kcr_informer_reflector(e.inf), NULL, NULL) != KCR_OK, 5000);
    cr_assert_neq(kcr_reflector_last_error(kcr_informer_reflector(e.inf), NULL, NULL), KCR_OK,
                  "the re-watch never failed");
    for (int i = 0; i < 5; i++) {
        char name[32];
        snprintf(name, sizeof name, "cm-%05d", i);
        kcr_object *o = NULL;
        kcr_client_get(e.c, &CM, "default", name, NULL, &o, NULL);
        tracker_expect_deleted(t, kcr_object_uid(o));
        kcr_object_unref(o);
        cr_assert_eq(kcr_client_delete(e.c, &CM, "default", name, NULL, NULL, NULL), KCR_OK);
    }
    cr_assert_eq(patch_cm(e.c, "default", "cm-00010", "changed"), KCR_OK);
    kcr_object_unref(seed_cm(e.fake, "default", "born", "x", "y"));
    kcr_fake_compact(e.fake); /* the RV we had is gone: 410 on re-watch */
    kcr_fake_clear_errors(e.fake);
    CONVERGE(&e, t);
    tracker_counts n = tracker_get_counts(t);
    cr_assert_eq(n.deletes, 5);
    cr_assert_eq(n.tombstones, 5, "deletions seen only through the relist (%llu)",
                 (unsigned long long)n.tombstones);
    cr_assert_eq(n.updates, 1);
    cr_assert_eq(n.adds, 21);
    env_down(&e);
    tracker_free(t);
}

Test(informer, wait_for_sync_reports_a_403_with_the_server_message)
{
    env e;
    env_up(&e, 3, NULL);
    kcr_fake_inject_error(e.fake, KCR_FAKE_LIST, &CM, -1, 403, "Forbidden",
                          "configmaps is forbidden: User \"kcr-limited\" cannot list resource "
                          "\"configmaps\" in API group \"\" at the cluster scope");
    cr_assert_eq(kcr_informer_start(e.inf), KCR_OK);
    kcr_status st = {0};
    int64_t t0 = now_ms();
    kcr_err err = kcr_informer_wait_for_sync(e.inf, 10000, &st);
    cr_assert_eq(err, KCR_ERR_FORBIDDEN, "%s", kcr_strerror(err));
    cr_assert_lt(now_ms() - t0, 3000, "reported, not waited out");
    cr_assert_eq(st.code, 403);
    cr_assert(strstr(st.message, "cannot list resource") != NULL);
    cr_assert(strstr(kcr_last_error(), "kcr-limited") != NULL, "%s", kcr_last_error());
    kcr_status_clear(&st);
    /* once allowed, it syncs */
    kcr_fake_clear_errors(e.fake);
    cr_assert_eq(kcr_informer_wait_for_sync(e.inf, 5000, NULL), KCR_OK);
    env_down(&e);
}

static void count_err(kcr_err err, const kcr_status *st, const char *msg, void *ud)
{
    (void)st, (void)msg;
    if (err == KCR_ERR_API)
        __atomic_add_fetch((int *)ud, 1, __ATOMIC_SEQ_CST);
}

Test(informer, wait_for_sync_times_out_with_the_last_error_and_calls_the_error_handler)
{
    int errors = 0;
    kcr_informer_options o = fast();
    o.reflector.on_error = count_err;
    o.reflector.error_user_data = &errors;
    env e;
    env_up(&e, 3, &o);
    kcr_fake_inject_error(e.fake, KCR_FAKE_LIST, &CM, -1, 500, "InternalError", "etcd is sad");
    cr_assert_eq(kcr_informer_start(e.inf), KCR_OK);
    kcr_status st = {0};
    int64_t t0 = now_ms();
    cr_assert_eq(kcr_informer_wait_for_sync(e.inf, 300, &st), KCR_ERR_API);
    cr_assert_geq(now_ms() - t0, 290);
    cr_assert_eq(st.code, 500);
    cr_assert(strstr(kcr_last_error(), "etcd is sad") != NULL, "%s", kcr_last_error());
    cr_assert_gt(__atomic_load_n(&errors, __ATOMIC_SEQ_CST), 0);
    kcr_status_clear(&st);
    kcr_informer_stop(e.inf);
    cr_assert_eq(kcr_informer_wait_for_sync(e.inf, 1000, NULL), KCR_ERR_SHUTDOWN);
    env_down(&e);

    env_up(&e, 1, NULL);
    cr_assert_eq(kcr_informer_wait_for_sync(e.inf, 50, NULL), KCR_ERR_TIMEOUT, "never started");
    env_down(&e);
}

static void by_app(const kcr_object *o, kcr_index_emit *emit, void *ud)
{
    (void)ud;
    const char *app = kcr_object_label(o, "app");
    if (app)
        kcr_index_emit_value(emit, app);
}

Test(informer, listers_by_name_namespace_selector_and_index)
{
    env e;
    env_up(&e, 10, NULL);
    seed_many(e.fake, "other", 4);
    cr_assert_eq(kcr_informer_add_index(e.inf, "app", by_app, NULL), KCR_OK);
    cr_assert_eq(kcr_informer_start(e.inf), KCR_OK);
    cr_assert_eq(kcr_informer_wait_for_sync(e.inf, 5000, NULL), KCR_OK);
    kcr_store *s = kcr_informer_store(e.inf);
    kcr_object *o = kcr_lister_get(s, "other", "cm-00003");
    cr_assert_not_null(o);
    cr_assert_str_eq(kcr_object_namespace(o), "other");
    kcr_object_unref(o);
    cr_assert_null(kcr_lister_get(s, "other", "cm-00009"));
    kcr_object_list l = {0};
    cr_assert_eq(kcr_lister_list(s, NULL, NULL, &l), KCR_OK);
    cr_assert_eq(l.len, 14);
    kcr_object_list_free(&l);
    cr_assert_eq(kcr_lister_list(s, "other", NULL, &l), KCR_OK);
    cr_assert_eq(l.len, 4);
    kcr_object_list_free(&l);
    cr_assert_eq(kcr_lister_list(s, "default", "app=odd", &l), KCR_OK);
    cr_assert_eq(l.len, 5);
    kcr_object_list_free(&l);
    cr_assert_eq(kcr_lister_list(s, NULL, "app in (odd,even),app!=even", &l), KCR_OK);
    cr_assert_eq(l.len, 7);
    kcr_object_list_free(&l);
    cr_assert_eq(kcr_lister_list(s, NULL, "app in (", &l), KCR_ERR_INVALID);
    cr_assert_eq(kcr_lister_by_index(s, "app", "even", &l), KCR_OK);
    cr_assert_eq(l.len, 7);
    kcr_object_list_free(&l);
    env_down(&e);
}

Test(informer, metadata_only_informer_caches_partial_objects)
{
    kcr_informer_options o = fast();
    o.reflector.metadata_only = true;
    env e;
    env_up(&e, 4, &o);
    cr_assert_eq(kcr_informer_start(e.inf), KCR_OK);
    cr_assert_eq(kcr_informer_wait_for_sync(e.inf, 5000, NULL), KCR_OK);
    cr_assert_eq(patch_cm(e.c, "default", "cm-00001", "v2"), KCR_OK);
    CONVERGE(&e, NULL);
    kcr_object *obj = kcr_lister_get(kcr_informer_store(e.inf), "default", "cm-00001");
    cr_assert_str_eq(kcr_object_kind(obj), "PartialObjectMetadata");
    cr_assert_eq(kcr_value_get_type(kcr_object_get(obj, "data")), KCR_VALUE_ABSENT);
    cr_assert_str_eq(kcr_object_label(obj, "app"), "odd");
    kcr_object_unref(obj);
    env_down(&e);
}

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
    nb.reflector.namespace = "b";
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

Test(informer, streaming_list_mode_syncs_and_converges)
{
    kcr_informer_options o = fast();
    o.reflector.list_mode = KCR_LIST_MODE_STREAMING;
    env e;
    env_up(&e, 40, &o);
    tracker *t = tracker_new();
    kcr_event_handler h = tracker_handler(t, 0);
    cr_assert_eq(kcr_informer_add_handler(e.inf, &h, NULL), KCR_OK);
    cr_assert_eq(kcr_informer_start(e.inf), KCR_OK);
    cr_assert_eq(kcr_informer_wait_for_sync(e.inf, 5000, NULL), KCR_OK);
    cr_assert_eq(kcr_fake_count(e.fake, KCR_FAKE_LIST, &CM), 0);
    cr_assert_eq(patch_cm(e.c, "default", "cm-00004", "z"), KCR_OK);
    CONVERGE(&e, t);
    cr_assert_eq(tracker_get_counts(t).initial_adds, 40);
    env_down(&e);
    tracker_free(t);
}

Test(informer, empty_list_syncs)
{
    env e;
    env_up(&e, 0, NULL);
    cr_assert_eq(kcr_informer_start(e.inf), KCR_OK);
    int64_t t0 = now_ms();
    cr_assert_eq(kcr_informer_wait_for_sync(e.inf, 5000, NULL), KCR_OK);
    cr_assert_lt(now_ms() - t0, 500);
    env_down(&e);
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
    kcr_event_handler h = tracker_handler(t, 0);
    kcr_handler_reg *reg;
    cr_assert_eq(kcr_informer_add_handler(e.inf, &h, &reg), KCR_OK);
    cr_assert_eq(kcr_informer_start(e.inf), KCR_OK);
    cr_assert_eq(kcr_informer_wait_for_sync(e.inf, 5000, NULL), KCR_OK);
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
    cr_assert_eq(kcr_informer_start(e.inf), KCR_OK);
    cr_assert_eq(kcr_informer_wait_for_sync(e.inf, 5000, NULL), KCR_OK);
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

typedef struct remover {
    kcr_informer *inf;
    kcr_handler_reg *reg;
    kcr_err err;
} remover;

static void *remove_main(void *arg)
{
    remover *r = arg;
    r->err = kcr_informer_remove_handler(r->inf, r->reg);
    return NULL;
}

Test(informer, remove_handler_while_stopping)
{
    /* stop and remove race for the same handler (delivering a slow
     * callback): each returns, the thread is joined once, nothing leaks */
    for (int round = 0; round < 20; round++) {
        env e;
        env_up(&e, 5, NULL);
        tracker *t = tracker_new();
        kcr_event_handler h = tracker_handler(t, round % 2 ? 2 : 0);
        remover r = {.inf = e.inf};
        cr_assert_eq(kcr_informer_add_handler(e.inf, &h, &r.reg), KCR_OK);
        cr_assert_eq(kcr_informer_start(e.inf), KCR_OK);
        pthread_t th;
        cr_assert_eq(pthread_create(&th, NULL, remove_main, &r), 0);
        kcr_informer_stop(e.inf);
        pthread_join(th, NULL);
        cr_assert_eq(r.err, KCR_OK, "round %d: %s", round, kcr_strerror(r.err));
        env_down(&e);
        tracker_free(t);
    }
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
    other.reflector.namespace = "default";
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

/* Every object is deleted (the cache is empty), then a relist brings new
 * ones: they are live adds (is_in_initial_list false), and the informer and
 * the handler stay synced. */
Test(informer, relist_into_an_emptied_cache_adds_are_not_initial)
{
    env e;
    env_up(&e, 5, NULL);
    tracker *t = tracker_new();
    kcr_event_handler h = tracker_handler(t, 0);
    kcr_handler_reg *reg;
    cr_assert_eq(kcr_informer_add_handler(e.inf, &h, &reg), KCR_OK);
    cr_assert_eq(kcr_informer_start(e.inf), KCR_OK);
    cr_assert_eq(kcr_informer_wait_for_sync(e.inf, 5000, NULL), KCR_OK);
    WAIT_FOR(kcr_handler_has_synced(reg), 5000);
    cr_assert(kcr_handler_has_synced(reg));
    WAIT_FOR(kcr_fake_watch_count(e.fake, &CM) == 1, 5000);
    for (int i = 0; i < 5; i++) {
        char name[32];
        snprintf(name, sizeof name, "cm-%05d", i);
        cr_assert_eq(kcr_client_delete(e.c, &CM, "default", name, NULL, NULL, NULL), KCR_OK);
    }
    WAIT_FOR(tracker_get_counts(t).deletes == 5, 5000);
    cr_assert_eq(kcr_store_len(kcr_informer_store(e.inf)), 0);
    cr_assert(kcr_informer_has_synced(e.inf));
    /* the watch breaks; new objects appear; the old RV is compacted away:
     * they come back through a relist (a Replace into an empty cache) */
    kcr_fake_inject_error(e.fake, KCR_FAKE_WATCH, &CM, -1, 503, "ServiceUnavailable", "down");
    kcr_fake_end_watches(e.fake, &CM);
    WAIT_FOR(kcr_reflector_last_error(kcr_informer_reflector(e.inf), NULL, NULL) != KCR_OK, 5000);
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "new-%d", i);
        kcr_object_unref(seed_cm(e.fake, "default", name, "x", "n"));
    }
    kcr_fake_compact(e.fake);
    kcr_fake_clear_errors(e.fake);
    CONVERGE(&e, t);
    kcr_reflector_stats rs;
    kcr_reflector_get_stats(kcr_informer_reflector(e.inf), &rs);
    cr_assert_eq(rs.lists, 2, "the new objects came through a relist");
    tracker_counts n = tracker_get_counts(t);
    cr_assert_eq(n.adds, 8);
    cr_assert_eq(n.initial_adds, 5, "adds after a relist are not in the initial list");
    cr_assert(kcr_informer_has_synced(e.inf));
    cr_assert(kcr_handler_has_synced(reg));
    env_down(&e);
    tracker_free(t);
}

static kcr_object *obj_in(const char *ns, const char *name, const char *app)
{
    char json[256];
    snprintf(json, sizeof json,
             "{\"metadata\":{\"namespace\":\"%s\",\"name\":\"%s\",\"labels\":{\"app\":\"%s\"}}}",
             ns, name, app);
    kcr_object *o = NULL;
    cr_assert_eq(kcr_object_parse(json, strlen(json), &o), KCR_OK);
    return o;
}

Test(informer, lister_namespace_filter_without_the_namespace_index)
{
    kcr_store *s = NULL; /* no KCR_INDEX_NAMESPACE */
    cr_assert_eq(kcr_store_new(&s), KCR_OK);
    const char *objs[][3] = {
        {"a", "x", "web"}, {"a", "y", "db"}, {"b", "x", "web"}, {"", "z", "web"}};
    for (size_t i = 0; i < 4; i++) {
        kcr_object *o = obj_in(objs[i][0], objs[i][1], objs[i][2]);
        cr_assert_eq(kcr_store_add(s, o), KCR_OK);
        kcr_object_unref(o);
    }
    kcr_object_list l = {0};
    cr_assert_eq(kcr_lister_list(s, "a", NULL, &l), KCR_OK);
    cr_assert_eq(l.len, 2);
    for (size_t i = 0; i < l.len; i++)
        cr_assert_str_eq(kcr_object_namespace(l.items[i]), "a");
    kcr_object_list_free(&l);
    cr_assert_eq(kcr_lister_list(s, "b", "app=web", &l), KCR_OK);
    cr_assert_eq(l.len, 1);
    cr_assert_str_eq(kcr_object_namespace(l.items[0]), "b");
    kcr_object_list_free(&l);
    cr_assert_eq(kcr_lister_list(s, "c", NULL, &l), KCR_OK);
    cr_assert_eq(l.len, 0);
    kcr_object_list_free(&l);
    cr_assert_eq(kcr_lister_list(s, NULL, "app=web", &l), KCR_OK);
    cr_assert_eq(l.len, 3);
    kcr_object_list_free(&l);
    kcr_store_free(s);
}
