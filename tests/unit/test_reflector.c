/* Reflector state machine on the fake (through a spy client): list at "0"
 * in pages, watch from the list's RV, bookmarks, clean ends, 410 relists,
 * expired continue tokens, too-large RVs, backoff, dead watches, streaming
 * lists and their fallback, selectors, metadata-only, stop. */
#include <criterion/criterion.h>
#include <stdatomic.h>

#include "informer/informer_internal.h"
#include "tests/unit/informer_fixtures.h"
#include "kcr/fake.h"

typedef struct rig {
    kcr_fake *fake;
    kcr_client *c; /* the spy */
    kcr_client *w; /* a plain client on the fake, for the test's own writes */
    kcr_delta_fifo *fifo;
    kcr_reflector *r;
} rig;

/* Short timings so nothing in these tests waits long. */
static kcr_reflector_options fast_opts(void)
{
    return (kcr_reflector_options){
        .backoff_initial_ms = 5, .backoff_max_ms = 40, .min_watch_timeout_ms = 300000};
}

/* fast_opts with the initial state from a streaming list (sendInitialEvents). */
static kcr_reflector_options streaming_opts(void)
{
    kcr_reflector_options o = fast_opts();
    o.list_mode = KCR_LIST_MODE_STREAMING;
    return o;
}

static void rig_up(rig *g, const kcr_reflector_options *o, int seed)
{
    cr_assert_eq(kcr_fake_new(NULL, &g->fake), KCR_OK);
    seed_many(g->fake, "default", seed);
    g->c = spy_new(g->fake);
    cr_assert_eq(kcr_fake_client(g->fake, NULL, &g->w), KCR_OK);
    cr_assert_eq(kcr_delta_fifo_new(NULL, &g->fifo), KCR_OK);
    kcr_reflector_options d = fast_opts();
    kcr_reflector_sink sink = kcr_delta_fifo_sink(g->fifo);
    cr_assert_eq(kcr_reflector_new(g->c, &CM, &sink, o ? o : &d, &g->r), KCR_OK);
}

static void rig_down(rig *g)
{
    kcr_reflector_free(g->r);
    kcr_delta_fifo_free(g->fifo);
    kcr_client_free(g->w);
    kcr_client_free(g->c);
    kcr_fake_free(g->fake);
}

typedef struct dcount {
    size_t by_type[6];
    size_t keys;
} dcount;

static kcr_err count_cb(const char *key, const kcr_delta *d, size_t n, bool initial, bool *rq,
                        void *ud)
{
    (void)key, (void)initial, (void)rq;
    dcount *c = ud;
    c->keys++;
    for (size_t i = 0; i < n; i++)
        c->by_type[d[i].type]++;
    return KCR_OK;
}

/* Pops everything queued now. */
static dcount drain(kcr_delta_fifo *f)
{
    dcount c = {0};
    while (kcr_delta_fifo_pop_timeout(f, count_cb, &c, 0) == KCR_OK)
        ;
    return c;
}

static uint64_t list_reqs(kcr_reflector *r)
{
    kcr_reflector_stats s;
    kcr_reflector_get_stats(r, &s);
    return s.list_requests;
}

static kcr_reflector_stats stats(kcr_reflector *r)
{
    kcr_reflector_stats s;
    kcr_reflector_get_stats(r, &s);
    return s;
}

/* Writes a resourceVersion as the API spells it. */
static void rv_text(uint64_t rv, char buf[32])
{
    snprintf(buf, 32, "%llu", (unsigned long long)rv);
}

static bool rv_is(kcr_reflector *r, uint64_t want)
{
    char *rv = kcr_reflector_last_sync_rv(r);
    char buf[32];
    rv_text(want, buf);
    bool ok = rv && strcmp(rv, buf) == 0;
    free(rv);
    return ok;
}

/* Starts the reflector and waits (5 s at most) until its watch is open. */
static void start_watching(rig *g)
{
    cr_assert_eq(kcr_reflector_start(g->r), KCR_OK);
    WAIT_FOR(kcr_fake_watch_count(g->fake, &CM) == 1, 5000);
}

/* rig_up, then start_watching. */
static void rig_watching(rig *g, const kcr_reflector_options *o, int seed)
{
    rig_up(g, o, seed);
    start_watching(g);
}

/* Waits for the second list and the watch after it. */
static void wait_relisted(rig *g)
{
    WAIT_FOR(stats(g->r).lists == 2 && kcr_fake_watch_count(g->fake, &CM) == 1, 5000);
}

/* Ends the watch with an ERROR 410 event, then wait_relisted. */
static void expire_watch(rig *g)
{
    kcr_fake_watch_error(g->fake, &CM, 410, "Expired", "too old resource version: 1 (5)");
    wait_relisted(g);
}

/* expire_watch, checking that it relisted; returns the relist's request, and
 * in *last_rv the last synced RV before it (the caller frees it). */
static spy_call relist_after_expiry(rig *g, char **last_rv)
{
    size_t calls = spy_n(g->c);
    *last_rv = kcr_reflector_last_sync_rv(g->r);
    expire_watch(g);
    cr_assert_eq(stats(g->r).lists, 2, "relisted");
    spy_call l = spy_get(g->c, calls);
    cr_assert_not(l.watch);
    return l;
}

/* Waits until the one open watch is the next after `watches` earlier ones. */
static void wait_rewatch(rig *g, size_t watches)
{
    WAIT_FOR(spy_count(g->c, true) == watches + 1 && kcr_fake_watch_count(g->fake, &CM) == 1,
             5000);
}

Test(reflector, first_list_at_rv0_in_pages_then_watch_from_list_rv)
{
    rig g;
    rig_up(&g, NULL, 1200);
    uint64_t rv = kcr_fake_resource_version(g.fake);
    start_watching(&g);
    cr_assert_eq(kcr_fake_watch_count(g.fake, &CM), 1);
    cr_assert(kcr_reflector_has_listed(g.r));
    cr_assert(rv_is(g.r, rv), "last sync RV is the list's");
    /* three pages: 500 + 500 + 200 */
    cr_assert_eq(spy_count(g.c, false), 3);
    spy_call p1 = spy_get(g.c, 0), p2 = spy_get(g.c, 1), w = spy_get(g.c, 3);
    cr_assert_str_eq(p1.rv, "0");
    cr_assert_eq(p1.limit, 500);
    cr_assert_str_eq(p1.cont, "");
    cr_assert_str_eq(p2.cont, "yes");
    cr_assert_str_eq(p2.rv, "(null)", "continued pages carry no resourceVersion");
    cr_assert(w.watch);
    char want[32];
    rv_text(rv, want);
    cr_assert_str_eq(w.rv, want);
    cr_assert(w.bookmarks);
    cr_assert(w.timeout_ms >= 300000 && w.timeout_ms <= 600000, "timeout %lld ms",
              (long long)w.timeout_ms);
    cr_assert_eq(w.idle_timeout_ms, w.timeout_ms + 30000, "dead-watch limit");
    dcount c = drain(g.fifo);
    cr_assert_eq(c.by_type[KCR_DELTA_REPLACED], 1200);
    cr_assert_eq(c.keys, 1200);
    rig_down(&g);
}

Test(reflector, watch_events_and_bookmarks_move_the_rv)
{
    rig g;
    rig_watching(&g, NULL, 3);
    /* (not drained: the fifo has no known objects, so a delete of a popped
     * key would be ignored) */
    cr_assert_eq(patch_cm(g.w, "default", "cm-00001", "changed"), KCR_OK);
    cr_assert_eq(
        kcr_client_delete(g.w, &(kcr_request){.resource = &CM, .ns = "default", .name = "cm-00002"},
                          NULL),
        KCR_OK);
    kcr_object_unref(seed_cm(g.fake, "default", "new", "a", "b"));
    uint64_t rv = kcr_fake_resource_version(g.fake);
    WAIT_FOR(rv_is(g.r, rv), 5000);
    cr_assert(rv_is(g.r, rv));
    dcount d = drain(g.fifo);
    cr_assert_eq(d.by_type[KCR_DELTA_REPLACED], 3);
    cr_assert_eq(d.by_type[KCR_DELTA_UPDATED], 1);
    cr_assert_eq(d.by_type[KCR_DELTA_DELETED], 1);
    cr_assert_eq(d.by_type[KCR_DELTA_ADDED], 1);
    /* a write elsewhere moves the global RV; a bookmark carries it */
    kcr_object *s = NULL;
    kcr_fake_add(g.fake, &SECRETS,
                 "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"s\","
                 "\"namespace\":\"default\"}}",
                 &s);
    kcr_object_unref(s);
    uint64_t rv2 = kcr_fake_resource_version(g.fake);
    cr_assert_gt(rv2, rv);
    kcr_fake_bookmark(g.fake, &CM);
    WAIT_FOR(rv_is(g.r, rv2), 5000);
    cr_assert(rv_is(g.r, rv2), "bookmark moved the RV");
    cr_assert_eq(drain(g.fifo).keys, 0, "a bookmark queues nothing");
    cr_assert_geq(stats(g.r).bookmarks, 1);
    rig_down(&g);
}

Test(reflector, clean_watch_end_rewatches_from_last_rv_without_relist)
{
    rig g;
    rig_watching(&g, NULL, 10);
    cr_assert_eq(patch_cm(g.w, "default", "cm-00001", "v2"), KCR_OK);
    uint64_t rv = kcr_fake_resource_version(g.fake);
    WAIT_FOR(rv_is(g.r, rv), 5000);
    uint64_t lists = list_reqs(g.r);
    for (int i = 0; i < 3; i++) {
        size_t watches = spy_count(g.c, true);
        kcr_fake_end_watches(g.fake, &CM);
        wait_rewatch(&g, watches);
        cr_assert_eq(spy_count(g.c, true), watches + 1);
    }
    cr_assert_eq(list_reqs(g.r), lists, "no relist");
    char want[32];
    rv_text(rv, want);
    cr_assert_str_eq(spy_get(g.c, spy_n(g.c) - 1).rv, want, "re-watch from the last RV");
    /* the re-watch missed nothing: a change made while no watch ran arrives */
    cr_assert_eq(stats(g.r).failures, 0, "clean ends are not failures");
    rig_down(&g);
}

Test(reflector, watch_410_relists_at_last_rv_unpaged_then_watches)
{
    rig g;
    rig_watching(&g, NULL, 300); /* one page: the server showed no paging */
    drain(g.fifo);
    char *rv;
    spy_call l = relist_after_expiry(&g, &rv);
    cr_assert_str_eq(l.rv, rv, "relist at the last synced RV (served from the watch cache)");
    cr_assert_eq(l.limit, 0, "unpaged, as client-go, so the watch cache can serve it");
    cr_assert_eq(stats(g.r).failures, 1);
    dcount d = drain(g.fifo);
    cr_assert_eq(d.by_type[KCR_DELTA_REPLACED], 300);
    free(rv);
    rig_down(&g);
}

Test(reflector, relist_keeps_paging_where_the_server_paged)
{
    rig g;
    rig_watching(&g, NULL, 600);
    size_t calls = spy_n(g.c);
    expire_watch(&g);
    cr_assert_eq(spy_get(g.c, calls).limit, 500, "no watch cache behind this server: page");
    cr_assert_eq(drain(g.fifo).keys, 600);
    rig_down(&g);
}

Test(reflector, compaction_410_event_on_rewatch_relists)
{
    rig g;
    rig_watching(&g, NULL, 5);
    /* writes, then the history is compacted and the watch ends: the
     * re-watch from the old RV gets an ERROR 410 event */
    kcr_fake_inject_error(g.fake, &(kcr_fake_error){.verb = KCR_FAKE_WATCH,
                                                    .resource = &CM,
                                                    .times = -1,
                                                    .code = 503,
                                                    .reason = "ServiceUnavailable",
                                                    .message = "down"});
    kcr_fake_end_watches(g.fake, &CM);
    cr_assert_eq(
        kcr_client_delete(g.w, &(kcr_request){.resource = &CM, .ns = "default", .name = "cm-00001"},
                          NULL),
        KCR_OK);
    kcr_fake_compact(g.fake);
    WAIT_FOR(stats(g.r).failures >= 1, 5000);
    kcr_fake_clear_errors(g.fake);
    wait_relisted(&g);
    cr_assert_eq(stats(g.r).lists, 2);
    cr_assert(rv_is(g.r, kcr_fake_resource_version(g.fake)));
    rig_down(&g);
}

Test(reflector, expired_continue_token_means_one_full_list)
{
    rig g;
    rig_up(&g, NULL, 1100);
    SPY(g.c)->fail_continue_410 = 1;
    start_watching(&g);
    /* page 1 (ok), page 2 (410), then a full list */
    cr_assert_eq(spy_count(g.c, false), 3);
    spy_call full = spy_get(g.c, 2);
    cr_assert_eq(full.limit, 0);
    cr_assert_str_eq(full.cont, "");
    cr_assert_str_eq(full.rv, "0", "the full list keeps the original RV");
    dcount d = drain(g.fifo);
    cr_assert_eq(d.by_type[KCR_DELTA_REPLACED], 1100, "no duplicates from the failed pages");
    cr_assert_eq(stats(g.r).failures, 0, "an expired token is handled, not a failure");
    rig_down(&g);
}

Test(reflector, too_large_rv_relists_at_quorum)
{
    rig g;
    rig_up(&g, NULL, 4);
    SPY(g.c)->fail_list_too_large = 1;
    start_watching(&g);
    cr_assert_eq(spy_count(g.c, false), 2);
    cr_assert_str_eq(spy_get(g.c, 0).rv, "0");
    cr_assert_str_eq(spy_get(g.c, 1).rv, "", "quorum read at once, no backoff");
    cr_assert_eq(stats(g.r).backoffs, 0);
    cr_assert_eq(drain(g.fifo).by_type[KCR_DELTA_REPLACED], 4);
    rig_down(&g);
}

Test(reflector, list_410_retries_at_quorum)
{
    rig g;
    rig_up(&g, NULL, 4);
    SPY(g.c)->fail_list_410 = 1;
    start_watching(&g);
    cr_assert_eq(spy_count(g.c, false), 2);
    cr_assert_str_eq(spy_get(g.c, 1).rv, "");
    cr_assert_eq(spy_get(g.c, 1).limit, 500, "a quorum list pages");
    rig_down(&g);
}

/* A list 410 makes the reflector read at quorum once; a later watch 410 must
 * relist at the last synced RV again (the RV is known to exist), not at "". */
Test(reflector, watch_410_after_a_list_410_relists_at_the_last_rv)
{
    rig g;
    rig_up(&g, NULL, 4);
    SPY(g.c)->fail_list_410 = 1;
    start_watching(&g);
    cr_assert_eq(spy_count(g.c, false), 2);
    cr_assert_str_eq(spy_get(g.c, 1).rv, "", "the list 410 was retried at quorum");
    char *rv;
    spy_call l = relist_after_expiry(&g, &rv);
    cr_assert_str_eq(l.rv, rv, "relist at the last synced RV, not a quorum read");
    free(rv);
    rig_down(&g);
}

/* Streaming list while the server compacts: the streaming relist at the
 * expired RV gets 410 once, then the reflector asks at "" (no loop at the
 * expired RV). */
Test(reflector, streaming_list_under_compaction_does_not_loop_at_the_expired_rv)
{
    rig g;
    kcr_reflector_options o = streaming_opts();
    rig_up(&g, &o, 6);
    cr_assert_eq(kcr_reflector_start(g.r), KCR_OK);
    WAIT_FOR(kcr_reflector_has_listed(g.r) && kcr_fake_watch_count(g.fake, &CM) == 1, 5000);
    cr_assert(stats(g.r).streaming);
    char *expired = kcr_reflector_last_sync_rv(g.r);
    pthread_mutex_lock(&SPY(g.c)->mu);
    SPY(g.c)->stream_expired_below = kcr_fake_resource_version(g.fake) + 1;
    pthread_mutex_unlock(&SPY(g.c)->mu);
    size_t calls = spy_n(g.c);
    expire_watch(&g);
    cr_assert_eq(stats(g.r).lists, 2, "the streaming relist at \"\" synced");
    size_t n = spy_n(g.c), at_expired = 0, at_quorum = 0;
    for (size_t i = calls; i < n; i++) {
        spy_call k = spy_get(g.c, i);
        cr_assert(k.watch && k.initial_events, "call %zu is a streaming list", i);
        at_expired += strcmp(k.rv, expired) == 0;
        at_quorum += strcmp(k.rv, "") == 0;
    }
    cr_assert_eq(at_expired, 1, "one streaming list at the expired RV %s, then no more", expired);
    cr_assert_eq(at_quorum, 1);
    cr_assert_eq(kcr_fake_count(g.fake, KCR_FAKE_LIST, &CM), 0, "no LIST fallback");
    free(expired);
    rig_down(&g);
}

typedef struct bo_log {
    pthread_mutex_t mu;
    int64_t ms[64];
    size_t n;
} bo_log;

static void bo_hook(int64_t ms, void *ud)
{
    bo_log *l = ud;
    pthread_mutex_lock(&l->mu);
    if (l->n < 64)
        l->ms[l->n++] = ms;
    pthread_mutex_unlock(&l->mu);
}

/* Records every backoff of g's reflector in l. */
static void bo_attach(rig *g, bo_log *l)
{
    *l = (bo_log){.mu = PTHREAD_MUTEX_INITIALIZER};
    kcr__reflector_set_backoff_hook(g->r, bo_hook, l);
}

static size_t bo_n(bo_log *l)
{
    pthread_mutex_lock(&l->mu);
    size_t n = l->n;
    pthread_mutex_unlock(&l->mu);
    return n;
}

/* Makes every list fail with HTTP `code`, then runs the reflector until it
 * has backed off n times (5 s at most), the waits recorded in l. */
static void run_until_backoffs(rig *g, bo_log *l, int code, const char *reason, size_t n)
{
    bo_attach(g, l);
    kcr_fake_inject_error(g->fake, &(kcr_fake_error){.verb = KCR_FAKE_LIST,
                                                     .resource = &CM,
                                                     .times = -1,
                                                     .code = code,
                                                     .reason = reason,
                                                     .message = "the list fails"});
    cr_assert_eq(kcr_reflector_start(g->r), KCR_OK);
    WAIT_FOR(bo_n(l) >= n, 5000);
    kcr_reflector_stop(g->r);
    cr_assert_geq(bo_n(l), n, "%zu backoffs within 5 s", bo_n(l));
}

Test(reflector, backoff_doubles_to_the_cap_on_5xx)
{
    rig g;
    kcr_reflector_options o = {.backoff_initial_ms = 10, .backoff_max_ms = 80, .backoff_jitter = -1};
    rig_up(&g, &o, 1);
    bo_log l;
    run_until_backoffs(&g, &l, 500, "InternalError", 6);
    int64_t want[] = {10, 20, 40, 80, 80, 80};
    for (size_t i = 0; i < 6; i++)
        cr_assert_eq(l.ms[i], want[i], "backoff %zu: %lld", i, (long long)l.ms[i]);
    kcr_reflector_stats s = stats(g.r);
    cr_assert_geq(s.failures, 6);
    cr_assert_eq(s.lists, 0);
    rig_down(&g);
}

Test(reflector, backoff_jitter_stays_within_one_to_two_times)
{
    rig g;
    kcr_reflector_options o = {.backoff_initial_ms = 4, .backoff_max_ms = 16};
    rig_up(&g, &o, 1);
    bo_log l;
    run_until_backoffs(&g, &l, 429, "TooManyRequests", 8);
    int64_t base[] = {4, 8, 16, 16, 16, 16, 16, 16};
    for (size_t i = 0; i < 8; i++)
        cr_assert(l.ms[i] >= base[i] && l.ms[i] < 2 * base[i], "wait %zu = %lld", i,
                  (long long)l.ms[i]);
    rig_down(&g);
}

Test(reflector, backoff_resets_after_a_quiet_period)
{
    rig g;
    kcr_reflector_options o = {.backoff_initial_ms = 10,
                               .backoff_max_ms = 1000,
                               .backoff_reset_ms = 150,
                               .backoff_jitter = -1};
    rig_up(&g, &o, 1);
    bo_log l;
    bo_attach(&g, &l);
    kcr_fake_inject_error(g.fake, &(kcr_fake_error){.verb = KCR_FAKE_LIST,
                                                    .resource = &CM,
                                                    .times = 3,
                                                    .code = 500,
                                                    .reason = "InternalError",
                                                    .message = "boom"});
    start_watching(&g);
    cr_assert_eq(bo_n(&l), 3);
    cr_assert_eq(l.ms[2], 40);
    sleep_ms(300); /* healthy for longer than the reset period */
    kcr_fake_inject_error(g.fake, &(kcr_fake_error){.verb = KCR_FAKE_WATCH,
                                                    .resource = &CM,
                                                    .code = 429,
                                                    .reason = "TooManyRequests",
                                                    .message = "later"});
    kcr_fake_end_watches(g.fake, &CM);
    WAIT_FOR(bo_n(&l) >= 4, 5000);
    cr_assert_eq(l.ms[3], 10, "reset to the initial backoff, got %lld", (long long)l.ms[3]);
    rig_down(&g);
}

Test(reflector, watch_429_backs_off_and_rewatches_without_relist)
{
    rig g;
    rig_watching(&g, NULL, 2);
    uint64_t lists = list_reqs(g.r);
    kcr_fake_inject_error(g.fake, &(kcr_fake_error){.verb = KCR_FAKE_WATCH,
                                                    .resource = &CM,
                                                    .times = 3,
                                                    .code = 429,
                                                    .reason = "TooManyRequests",
                                                    .message = "later"});
    kcr_fake_end_watches(g.fake, &CM);
    WAIT_FOR(stats(g.r).failures >= 3 && kcr_fake_watch_count(g.fake, &CM) == 1, 5000);
    kcr_reflector_stats s = stats(g.r);
    cr_assert_eq(s.failures, 3);
    cr_assert_geq(s.backoffs, 3);
    cr_assert_eq(list_reqs(g.r), lists, "no relist for 429");
    rig_down(&g);
}

/* A watch that ran longer than the healthy limit (1 s) and then got a 429
 * still backs off before re-watching (429 means "slow down"). */
Test(reflector, watch_429_after_a_long_healthy_watch_still_backs_off)
{
    rig g;
    kcr_reflector_options o = {
        .backoff_initial_ms = 10, .backoff_max_ms = 80, .backoff_jitter = -1};
    rig_up(&g, &o, 2);
    bo_log l;
    bo_attach(&g, &l);
    start_watching(&g);
    int64_t t0 = now_ms();
    size_t watches = spy_count(g.c, true);
    cr_assert_eq(bo_n(&l), 0);
    while (now_ms() - t0 < 1200) /* the watch must outlive the healthy limit */
        sleep_ms(50);
    kcr_fake_watch_error(g.fake, &CM, 429, "TooManyRequests", "slow down");
    wait_rewatch(&g, watches);
    cr_assert_eq(spy_count(g.c, true), watches + 1, "re-watched");
    cr_assert_eq(bo_n(&l), 1, "backed off once before re-watching");
    cr_assert_eq(l.ms[0], 10);
    cr_assert_eq(spy_count(g.c, false), 1, "no relist for 429");
    rig_down(&g);
}

/* Delays every watch request by 1.1 s, past the healthy limit. */
static void slow_watch_hook(kcr_fake_verb verb, const kcr_resource *res, const char *ns,
                            const char *name, void *ud)
{
    (void)res, (void)ns, (void)name, (void)ud;
    if (verb == KCR_FAKE_WATCH)
        sleep_ms(1100);
}

/* A watch request that fails slowly (a 503 after 1.1 s) never delivered an
 * event: it is a failure to back off from, however long it took, or an
 * overloaded apiserver is asked again at once for as long as it stays slow. */
Test(reflector, a_watch_that_fails_slowly_without_events_backs_off)
{
    rig g;
    kcr_reflector_options o = {
        .backoff_initial_ms = 10, .backoff_max_ms = 80, .backoff_jitter = -1};
    rig_up(&g, &o, 2);
    bo_log l;
    bo_attach(&g, &l);
    kcr_fake_set_hook(g.fake, slow_watch_hook, NULL);
    kcr_fake_inject_error(g.fake, &(kcr_fake_error){.verb = KCR_FAKE_WATCH,
                                                    .resource = &CM,
                                                    .times = 2,
                                                    .code = 503,
                                                    .reason = "ServiceUnavailable",
                                                    .message = "overloaded"});
    cr_assert_eq(kcr_reflector_start(g.r), KCR_OK);
    WAIT_FOR(kcr_fake_watch_count(g.fake, &CM) == 1, 10000);
    kcr_fake_set_hook(g.fake, NULL, NULL);
    kcr_reflector_stats s = stats(g.r);
    cr_assert_eq(s.failures, 2);
    cr_assert_eq(bo_n(&l), 2, "each slow failure backed off, got %zu backoffs", bo_n(&l));
    cr_assert_eq(l.ms[0], 10);
    cr_assert_eq(l.ms[1], 20);
    cr_assert_eq(s.lists, 1, "a 503 re-watches, it does not relist");
    rig_down(&g);
}

Test(reflector, watch_error_event_500_rewatches_without_relist)
{
    rig g;
    rig_watching(&g, NULL, 2);
    size_t watches = spy_count(g.c, true);
    kcr_fake_watch_error(g.fake, &CM, 500, "InternalError", "etcd hiccup");
    wait_rewatch(&g, watches);
    cr_assert_eq(spy_count(g.c, false), 1, "no relist");
    cr_assert_eq(stats(g.r).failures, 1);
    rig_down(&g);
}

Test(reflector, dead_watch_is_detected_and_reconnected)
{
    rig g;
    kcr_reflector_options o = fast_opts();
    o.idle_limit_ms = 1000;
    rig_watching(&g, &o, 2);
    cr_assert_eq(spy_get(g.c, 1).idle_timeout_ms, 1000);
    int64_t t0 = now_ms();
    WAIT_FOR(spy_count(g.c, true) >= 2, 5000);
    cr_assert_geq(spy_count(g.c, true), 2, "the silent watch was replaced");
    cr_assert_geq(now_ms() - t0, 500);
    cr_assert_eq(spy_count(g.c, false), 1, "no relist");
    cr_assert_geq(stats(g.r).failures, 1);
    rig_down(&g);
}

Test(reflector, forbidden_list_is_reported_with_the_status)
{
    rig g;
    rig_up(&g, NULL, 2);
    kcr_fake_inject_error(
        g.fake,
        &(kcr_fake_error){.verb = KCR_FAKE_LIST,
                          .resource = &CM,
                          .times = -1,
                          .code = 403,
                          .reason = "Forbidden",
                          .message = "configmaps is forbidden: User \"bob\" cannot list resource"});
    cr_assert_eq(kcr_reflector_start(g.r), KCR_OK);
    WAIT_FOR(stats(g.r).failures >= 1, 5000);
    kcr_status st = {0};
    char *msg = NULL;
    cr_assert_eq(kcr_reflector_last_error(g.r, &st, &msg), KCR_ERR_FORBIDDEN);
    cr_assert_eq(st.code, 403);
    cr_assert_str_eq(st.reason, "Forbidden");
    cr_assert(strstr(msg, "cannot list resource") != NULL, "%s", msg);
    kcr_status_clear(&st);
    free(msg);
    kcr_fake_clear_errors(g.fake);
    WAIT_FOR(kcr_reflector_has_listed(g.r), 5000);
    cr_assert_eq(kcr_reflector_last_error(g.r, NULL, NULL), KCR_OK, "cleared by a good list");
    rig_down(&g);
}

Test(reflector, streaming_list_uses_initial_events_and_no_list)
{
    rig g;
    kcr_reflector_options o = streaming_opts();
    rig_up(&g, &o, 700);
    uint64_t rv = kcr_fake_resource_version(g.fake);
    cr_assert_eq(kcr_reflector_start(g.r), KCR_OK);
    WAIT_FOR(kcr_reflector_has_listed(g.r), 5000);
    cr_assert(kcr_reflector_has_listed(g.r));
    cr_assert_eq(spy_count(g.c, false), 0, "no LIST");
    spy_call w = spy_get(g.c, 0);
    cr_assert(w.watch && w.initial_events && w.bookmarks);
    cr_assert_str_eq(w.rv_match, "NotOlderThan");
    cr_assert_str_eq(w.rv, "");
    cr_assert(rv_is(g.r, rv));
    kcr_reflector_stats s = stats(g.r);
    cr_assert(s.streaming);
    cr_assert_not(s.streaming_unsupported);
    dcount d = drain(g.fifo);
    cr_assert_eq(d.by_type[KCR_DELTA_REPLACED], 700);
    /* the same stream carries later events */
    cr_assert_eq(patch_cm(g.w, "default", "cm-00003", "v9"), KCR_OK);
    WAIT_FOR(rv_is(g.r, kcr_fake_resource_version(g.fake)), 5000);
    cr_assert_eq(drain(g.fifo).by_type[KCR_DELTA_UPDATED], 1);
    cr_assert_eq(spy_count(g.c, true), 1);
    /* a clean end re-watches plainly from the last RV */
    kcr_fake_end_watches(g.fake, &CM);
    WAIT_FOR(spy_count(g.c, true) == 2 && kcr_fake_watch_count(g.fake, &CM) == 1, 5000);
    cr_assert_not(spy_get(g.c, 1).initial_events);
    cr_assert_eq(stats(g.r).lists, 1);
    rig_down(&g);
}

Test(reflector, streaming_list_falls_back_to_list_on_422)
{
    rig g;
    kcr_reflector_options o = streaming_opts();
    rig_up(&g, &o, 20);
    kcr_fake_inject_error(
        g.fake,
        &(kcr_fake_error){
            .verb = KCR_FAKE_WATCH,
            .resource = &CM,
            .code = 422,
            .reason = "Invalid",
            .message = "sendInitialEvents is forbidden for watch unless the WatchList feature "
                       "gate is enabled"});
    start_watching(&g);
    cr_assert(kcr_reflector_has_listed(g.r));
    cr_assert_eq(spy_count(g.c, false), 1, "fell back to LIST");
    kcr_reflector_stats s = stats(g.r);
    cr_assert(s.streaming_unsupported);
    cr_assert_not(s.streaming);
    cr_assert_eq(drain(g.fifo).by_type[KCR_DELTA_REPLACED], 20);
    /* for good: a relist is a LIST */
    kcr_fake_watch_error(g.fake, &CM, 410, "Expired", "too old");
    WAIT_FOR(stats(g.r).lists == 2, 5000);
    cr_assert_eq(spy_count(g.c, false), 2);
    rig_down(&g);
}

Test(reflector, streaming_list_falls_back_when_the_server_ignores_it)
{
    rig g;
    kcr_reflector_options o = streaming_opts();
    rig_up(&g, &o, 20);
    SPY(g.c)->ignore_initial_events = true; /* an old server: a plain watch from "" */
    start_watching(&g);
    cr_assert_not(kcr_reflector_has_listed(g.r), "ADDED events alone are no initial state");
    /* its periodic bookmark lacks the initial-events-end annotation */
    kcr_fake_bookmark(g.fake, &CM);
    WAIT_FOR(kcr_reflector_has_listed(g.r), 5000);
    cr_assert(kcr_reflector_has_listed(g.r));
    cr_assert(stats(g.r).streaming_unsupported);
    cr_assert_eq(spy_count(g.c, false), 1);
    cr_assert_eq(drain(g.fifo).by_type[KCR_DELTA_REPLACED], 20, "nothing from the plain watch");
    rig_down(&g);
}

Test(reflector, selectors_and_namespace_are_passed_and_honoured)
{
    rig g;
    kcr_reflector_options o = fast_opts();
    o.ns = "team-a";
    o.label_selector = "app=odd";
    o.field_selector = "metadata.name!=cm-00001";
    rig_up(&g, &o, 10);
    seed_many(g.fake, "team-a", 10);
    start_watching(&g);
    spy_call l = spy_get(g.c, 0), w = spy_get(g.c, 1);
    cr_assert_str_eq(l.label, "app=odd");
    cr_assert_str_eq(w.field, "metadata.name!=cm-00001");
    cr_assert_eq(drain(g.fifo).by_type[KCR_DELTA_REPLACED], 4, "odd in team-a minus cm-00001");
    cr_assert_eq(patch_cm(g.w, "default", "cm-00003", "x2"), KCR_OK); /* other namespace */
    cr_assert_eq(patch_cm(g.w, "team-a", "cm-00002", "x2"), KCR_OK);  /* even */
    cr_assert_eq(patch_cm(g.w, "team-a", "cm-00003", "x2"), KCR_OK);  /* selected */
    /* The last write is the selected one; the reflector records an event's
     * RV after queueing it, and events arrive in order, so once its RV is
     * recorded every event the watch delivered is in the FIFO: a wrongly
     * delivered one would be counted below, no sleep needed. */
    WAIT_FOR(rv_is(g.r, kcr_fake_resource_version(g.fake)), 5000);
    cr_assert(rv_is(g.r, kcr_fake_resource_version(g.fake)), "the selected update never came");
    cr_assert_eq(drain(g.fifo).by_type[KCR_DELTA_UPDATED], 1);
    rig_down(&g);
}

static kcr_err kind_check(kcr_object *o, void *ud)
{
    (void)ud;
    return strcmp(kcr_object_kind(o), "PartialObjectMetadata") == 0 ? KCR_OK : KCR_ERR_INVALID;
}

typedef struct meta_count {
    size_t partial, full;
} meta_count;

static kcr_err meta_cb(const char *key, const kcr_delta *d, size_t n, bool initial, bool *rq,
                       void *ud)
{
    (void)key, (void)initial, (void)rq;
    meta_count *m = ud;
    for (size_t i = 0; i < n; i++) {
        if (kind_check((kcr_object *)d[i].object, NULL) == KCR_OK &&
            kcr_value_get_type(kcr_object_get(d[i].object, "data")) == KCR_VALUE_ABSENT)
            m->partial++;
        else
            m->full++;
    }
    return KCR_OK;
}

Test(reflector, metadata_only_objects)
{
    rig g;
    kcr_reflector_options o = fast_opts();
    o.metadata_only = true;
    rig_watching(&g, &o, 5);
    cr_assert(spy_get(g.c, 0).metadata_only && spy_get(g.c, 1).metadata_only);
    meta_count m = {0};
    while (kcr_delta_fifo_pop_timeout(g.fifo, meta_cb, &m, 0) == KCR_OK)
        ;
    cr_assert_eq(m.partial, 5);
    cr_assert_eq(m.full, 0);
    rig_down(&g);
}

/* 20 ms per object, counting the objects it has started on in *ud. */
static kcr_err slow_transform(const kcr_object *in, kcr_object **out, void *ud)
{
    atomic_fetch_add((atomic_int *)ud, 1);
    sleep_ms(20);
    *out = kcr_object_ref(in);
    return KCR_OK;
}

Test(reflector, stop_during_a_list_returns_within_a_second)
{
    rig g;
    kcr_reflector_options o = fast_opts();
    atomic_int transformed = 0;
    o.transform = slow_transform; /* a list that takes 4 s */
    o.transform_user_data = &transformed;
    rig_up(&g, &o, 200);
    cr_assert_eq(kcr_reflector_start(g.r), KCR_OK);
    WAIT_FOR(atomic_load(&transformed) >= 2, 5000); /* inside the list */
    int64_t t0 = now_ms();
    kcr_reflector_stop(g.r);
    cr_assert_lt(now_ms() - t0, 1000);
    cr_assert_not(kcr_reflector_has_listed(g.r));
    cr_assert_eq(kcr_delta_fifo_len(g.fifo), 0, "an incomplete list is discarded");
    rig_down(&g);
}

Test(reflector, stop_during_backoff_and_watch_returns_within_a_second)
{
    rig g;
    kcr_reflector_options o = {.backoff_initial_ms = 20000};
    rig_up(&g, &o, 2);
    kcr_fake_inject_error(g.fake, &(kcr_fake_error){.verb = KCR_FAKE_LIST,
                                                    .resource = &CM,
                                                    .code = 500,
                                                    .reason = "InternalError",
                                                    .message = "boom"});
    cr_assert_eq(kcr_reflector_start(g.r), KCR_OK);
    WAIT_FOR(stats(g.r).backoffs == 1, 5000);
    int64_t t0 = now_ms();
    kcr_reflector_stop(g.r);
    cr_assert_lt(now_ms() - t0, 1000);
    rig_down(&g);

    rig_watching(&g, NULL, 2);
    t0 = now_ms();
    kcr_reflector_stop(g.r);
    cr_assert_lt(now_ms() - t0, 1000);
    cr_assert_eq(kcr_fake_watch_count(g.fake, &CM), 0);
    cr_assert_eq(kcr_reflector_start(g.r), KCR_ERR_STATE, "no restart");
    rig_down(&g);
}

Test(reflector, too_large_rv_on_watch_relists_at_quorum)
{
    rig g;
    rig_watching(&g, NULL, 3);
    size_t calls = spy_n(g.c);
    kcr_fake_watch_error(g.fake, &CM, 504, "Timeout", "Too large resource version: 900, current: 12");
    WAIT_FOR(stats(g.r).lists == 2, 5000);
    cr_assert_eq(stats(g.r).lists, 2);
    cr_assert_str_eq(spy_get(g.c, calls).rv, "", "quorum relist");
    rig_down(&g);
}

Test(reflector, consistent_list_starts_at_quorum_and_pages)
{
    rig g;
    kcr_reflector_options o = fast_opts();
    o.consistent_list = true;
    rig_watching(&g, &o, 700);
    cr_assert_eq(spy_count(g.c, false), 2);
    cr_assert_str_eq(spy_get(g.c, 0).rv, "");
    cr_assert_eq(spy_get(g.c, 0).limit, 500);
    rig_down(&g);
}

Test(reflector, durations_beyond_35_years_are_refused)
{
    kcr_fake *fake;
    cr_assert_eq(kcr_fake_new(NULL, &fake), KCR_OK);
    kcr_client *c;
    cr_assert_eq(kcr_fake_client(fake, NULL, &c), KCR_OK);
    kcr_delta_fifo *f;
    cr_assert_eq(kcr_delta_fifo_new(NULL, &f), KCR_OK);
    kcr_reflector_sink sink = kcr_delta_fifo_sink(f);
    kcr_reflector_options o = {.idle_limit_ms = INT64_MAX};
    kcr_reflector *r = NULL;
    cr_assert_eq(kcr_reflector_new(c, &CM, &sink, &o, &r), KCR_ERR_INVALID);
    cr_assert_null(r);
    cr_assert(strstr(kcr_last_error(), "idle_limit_ms"), "%s", kcr_last_error());
    o = (kcr_reflector_options){.backoff_max_ms = (INT64_C(1) << 40) + 1};
    cr_assert_eq(kcr_reflector_new(c, &CM, &sink, &o, &r), KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "backoff_max_ms"), "%s", kcr_last_error());
    o = (kcr_reflector_options){.min_watch_timeout_ms = INT64_C(1) << 40, .idle_limit_ms = -1};
    cr_assert_eq(kcr_reflector_new(c, &CM, &sink, &o, &r), KCR_OK, "the largest is allowed: %s",
                 kcr_last_error());
    kcr_reflector_free(r);
    kcr_delta_fifo_free(f);
    kcr_client_free(c);
    kcr_fake_free(fake);
}
