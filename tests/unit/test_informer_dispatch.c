/* The informer's coalescing dispatch: a slow handler gets the latest state
 * per key with bounded memory and stalls no other handler; a coalesced
 * update keeps the old object that handler last saw. */
#include "tests/unit/informer_env.h"

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
    env_start_synced(&e);
    cr_assert_not(kcr_handler_has_synced(sreg), "the slow handler has not seen the list yet");
    WAIT_FOR(gate_waiting(&g) == 1, 5000); /* blocked in its first on_add */
    /* the slow handler is blocked in its first on_add; meanwhile: */
    for (int i = 1; i <= 200; i++) {
        char v[16];
        snprintf(v, sizeof v, "u%d", i);
        cr_assert_eq(patch_cm(e.c, "default", "upd", v), KCR_OK);
    }
    cr_assert_eq(patch_cm(e.c, "default", "del", "d1"), KCR_OK);
    cr_assert_eq(kcr_client_delete(
                     e.c, &(kcr_request){.resource = &CM, .ns = "default", .name = "del"}, NULL),
                 KCR_OK);
    cr_assert_eq(kcr_client_delete(
                     e.c, &(kcr_request){.resource = &CM, .ns = "default", .name = "re"}, NULL),
                 KCR_OK);
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
