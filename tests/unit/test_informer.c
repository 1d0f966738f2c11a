/* Shared index informer on the fake, what handlers see: adds, updates and
 * deletes after the initial list (with its flag), managedFields stripping
 * and the user transform, late handler replay, resync routing, tombstones
 * for deletes missed while disconnected, adds after a relist into an
 * emptied cache. Dispatch, sync, listers and lifecycle have their own
 * files (test_informer_*.c). */
#include "tests/unit/informer_env.h"
#include "kcr/fake.h"

/* Breaks the watch for good (every re-watch fails with 503) and waits until
 * the reflector reports the failure. */
static void break_watch(env *e)
{
    kcr_fake_inject_error(e->fake, &(kcr_fake_error){.verb = KCR_FAKE_WATCH,
                                                     .resource = &CM,
                                                     .times = -1,
                                                     .code = 503,
                                                     .reason = "ServiceUnavailable",
                                                     .message = "down"});
    kcr_fake_end_watches(e->fake, &CM);
    kcr_reflector *r = kcr_informer_reflector(e->inf);
    WAIT_FOR(kcr_reflector_last_error(r, NULL, NULL) != KCR_OK, 5000);
    cr_assert_neq(kcr_reflector_last_error(r, NULL, NULL), KCR_OK, "the re-watch never failed");
}

/* Deletes the seeded cm-00000 .. cm-<n-1>, telling t (unless NULL) to expect
 * each deletion. */
static void delete_seeded(env *e, int n, tracker *t)
{
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "cm-%05d", i);
        if (t) {
            kcr_object *o = NULL;
            kcr_client_get(e->c, &(kcr_request){.resource = &CM, .ns = "default", .name = name},
                           &o);
            tracker_expect_deleted(t, kcr_object_uid(o));
            kcr_object_unref(o);
        }
        cr_assert_eq(
            kcr_client_delete(e->c, &(kcr_request){.resource = &CM, .ns = "default", .name = name},
                              NULL),
            KCR_OK);
    }
}

Test(informer, initial_list_then_add_update_delete)
{
    env e;
    env_up(&e, 50, NULL);
    tracker *t = tracker_new();
    kcr_handler_reg *reg = env_track(&e, t, 0, KCR_HANDLER_DELIVERY_THREAD);
    env_start_synced(&e);
    cr_assert(kcr_informer_has_synced(e.inf));
    wait_handler_synced(reg);
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
    cr_assert_eq(
        kcr_client_get(e.c, &(kcr_request){.resource = &CM, .ns = "default", .name = "cm-00007"},
                       &gone),
        KCR_OK);
    tracker_expect_deleted(t, kcr_object_uid(gone));
    cr_assert_eq(
        kcr_client_delete(e.c, &(kcr_request){.resource = &CM, .ns = "default", .name = "cm-00007"},
                          NULL),
        KCR_OK);
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
    env_start_synced(&e);
    kcr_object *o = kcr_lister_get(kcr_informer_store(e.inf), "default", "cm-00000");
    cr_assert_not_null(o);
    cr_assert_eq(kcr_value_get_type(kcr_object_get(o, "metadata.managedFields")), KCR_VALUE_ABSENT);
    kcr_object_unref(o);
    env_down(&e);

    kcr_informer_options opts = fast();
    opts.keep_managed_fields = true;
    env_up(&e, 3, &opts);
    env_start_synced(&e);
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
    opts.reflector.transform = drop_data;
    env e;
    env_up(&e, 2, &opts);
    env_start_synced(&e);
    kcr_object *o = env_cached_after_update(&e);
    cr_assert_eq(kcr_value_get_type(kcr_object_get(o, "data")), KCR_VALUE_ABSENT);
    cr_assert_eq(kcr_value_get_type(kcr_object_get(o, "metadata.managedFields")), KCR_VALUE_ABSENT);
    kcr_object_unref(o);
    env_down(&e);
}

Test(informer, late_handler_gets_the_cache_replayed_as_adds)
{
    env e;
    env_up(&e, 30, NULL);
    env_start_synced(&e);
    tracker *t = tracker_new();
    kcr_handler_reg *reg = env_track(&e, t, 0, KCR_HANDLER_DELIVERY_THREAD);
    wait_handler_synced(reg);
    tracker_counts n = tracker_get_counts(t);
    cr_assert_eq(n.adds, 30);
    cr_assert_eq(n.initial_adds, 30, "replayed adds count as initial");
    check_live_update_after_replay(&e, t);
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
    env_start_synced(&e);
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

Test(informer, deletes_missed_while_disconnected_arrive_as_tombstones)
{
    env e;
    env_up(&e, 20, NULL);
    tracker *t = tracker_new();
    env_track(&e, t, 0, KCR_HANDLER_DELIVERY_THREAD);
    env_start_synced(&e);
    /* Sync comes from the list; the watch may not be registered yet, and one
     * still being set up would escape both the injection and the end below. */
    WAIT_FOR(kcr_fake_watch_count(e.fake, &CM) == 1, 5000);
    cr_assert_eq(kcr_fake_watch_count(e.fake, &CM), 1);
    /* the watch breaks and cannot come back; meanwhile objects change */
    break_watch(&e);
    delete_seeded(&e, 5, t);
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

/* Every object is deleted (the cache is empty), then a relist brings new
 * ones: they are live adds (is_in_initial_list false), and the informer and
 * the handler stay synced. */
Test(informer, relist_into_an_emptied_cache_adds_are_not_initial)
{
    env e;
    env_up(&e, 5, NULL);
    tracker *t = tracker_new();
    kcr_handler_reg *reg = env_track(&e, t, 0, KCR_HANDLER_DELIVERY_THREAD);
    env_start_synced(&e);
    wait_handler_synced(reg);
    WAIT_FOR(kcr_fake_watch_count(e.fake, &CM) == 1, 5000);
    delete_seeded(&e, 5, NULL);
    WAIT_FOR(tracker_get_counts(t).deletes == 5, 5000);
    cr_assert_eq(kcr_store_len(kcr_informer_store(e.inf)), 0);
    cr_assert(kcr_informer_has_synced(e.inf));
    /* the watch breaks; new objects appear; the old RV is compacted away:
     * they come back through a relist (a Replace into an empty cache) */
    break_watch(&e);
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

/* A relist after the watch was lost keeps the cached object of every key
 * whose uid and resourceVersion did not change (the list carries it instead
 * of a second copy: a relist no longer peaks at twice the cache), and
 * replaces the changed ones. */
Test(informer, a_relist_shares_unchanged_objects_with_the_cache)
{
    env e;
    env_up(&e, 3, NULL);
    env_start_synced(&e);
    WAIT_FOR(kcr_fake_watch_count(e.fake, &CM) == 1, 5000);
    kcr_store *cache = kcr_informer_store(e.inf);
    kcr_object *same = kcr_store_get_by_key(cache, "default/cm-00000");
    kcr_object *changed = kcr_store_get_by_key(cache, "default/cm-00001");
    cr_assert(same && changed);
    break_watch(&e);
    cr_assert_eq(patch_cm(e.c, "default", "cm-00001", "changed"), KCR_OK);
    kcr_fake_compact(e.fake); /* the re-watch gets 410: a relist */
    kcr_fake_clear_errors(e.fake);
    kcr_reflector_stats rs = {0};
    WAIT_FOR((kcr_reflector_get_stats(kcr_informer_reflector(e.inf), &rs), rs.lists == 2), 5000);
    cr_assert_eq(rs.lists, 2, "no relist");
    kcr_object *now = NULL;
    WAIT_FOR((kcr_object_unref(now), now = kcr_store_get_by_key(cache, "default/cm-00001"),
              now != changed),
             5000);
    cr_assert_neq(now, changed, "the changed object was replaced");
    cr_assert_str_neq(kcr_object_resource_version(now), kcr_object_resource_version(changed));
    kcr_object *kept = kcr_store_get_by_key(cache, "default/cm-00000");
    cr_assert_eq(kept, same, "the unchanged object is the one cached before the relist");
    kcr_object_unref(kept);
    kcr_object_unref(now);
    kcr_object_unref(same);
    kcr_object_unref(changed);
    env_down(&e);
}
