/* DeltaFIFO: client-go's semantics, docs/store.md "FIFO and DeltaFIFO". */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kcr/kcr.h"
#include "store/store_internal.h"
#include "unit/store_fixtures.h"

/* What one pop saw, as "Type[:rv][~]" words ("~" marks a tombstone). */
struct seen {
    char key[64];
    char deltas[256];
    bool initial;
    bool requeue;
};

static kcr_err capture(const char *key, const kcr_delta *d, size_t n, bool initial, bool *requeue,
                       void *ud)
{
    struct seen *s = ud;
    snprintf(s->key, sizeof s->key, "%s", key);
    s->deltas[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        size_t at = strlen(s->deltas);
        snprintf(s->deltas + at, sizeof s->deltas - at, "%s%s%s%s%s", i ? " " : "",
                 kcr_delta_type_name(d[i].type), d[i].object ? ":" : "",
                 d[i].object ? kcr_object_resource_version(d[i].object) : "",
                 d[i].tombstone ? "~" : "");
        if (d[i].tombstone)
            cr_assert_str_eq(kcr_tombstone_key(d[i].tombstone), key);
    }
    s->initial = initial;
    if (s->requeue) {
        s->requeue = false;
        *requeue = true;
    }
    return KCR_OK;
}

static struct seen pop1(kcr_delta_fifo *f)
{
    struct seen s = {0};
    cr_assert_eq(kcr_delta_fifo_pop_timeout(f, capture, &s, 1000), KCR_OK, "%s", kcr_last_error());
    return s;
}

static kcr_object *o_(const char *name, const char *rv)
{
    return mk("ns", name, "x", rv);
}

#define DO(op, f, name, rv)                                                                        \
    do {                                                                                           \
        kcr_object *o__ = o_(name, rv);                                                            \
        cr_assert_eq(op(f, o__), KCR_OK);                                                          \
        kcr_object_unref(o__);                                                                     \
    } while (0)

Test(delta_fifo, deltas_accumulate_per_key_in_first_change_order)
{
    kcr_delta_fifo *f = new_delta_fifo(NULL);
    DO(kcr_delta_fifo_add, f, "a", "1");
    DO(kcr_delta_fifo_add, f, "b", "1");
    DO(kcr_delta_fifo_update, f, "a", "2");
    DO(kcr_delta_fifo_delete, f, "a", "3");
    cr_assert_eq(kcr_delta_fifo_len(f), 2);
    kcr_string_list keys;
    kcr_delta_fifo_list_keys(f, &keys);
    cr_assert_str_eq(keys.items[0], "ns/a");
    cr_assert_str_eq(keys.items[1], "ns/b");
    kcr_string_list_free(&keys);
    struct seen s = pop1(f);
    cr_assert_str_eq(s.key, "ns/a");
    cr_assert_str_eq(s.deltas, "Added:1 Updated:2 Deleted:3");
    s = pop1(f);
    cr_assert_str_eq(s.deltas, "Added:1");
    cr_assert_eq(kcr_delta_fifo_len(f), 0);
    kcr_delta_fifo_free(f);
}

Test(delta_fifo, delete_of_unknown_key_is_ignored)
{
    kcr_delta_fifo *f = new_delta_fifo(NULL);
    DO(kcr_delta_fifo_delete, f, "ghost", "1");
    cr_assert_eq(kcr_delta_fifo_len(f), 0);
    kcr_store *known = new_store();
    kcr_delta_fifo_options opts = {kcr_store_known_objects(known)};
    kcr_delta_fifo *g = new_delta_fifo(&opts);
    DO(kcr_delta_fifo_delete, g, "ghost", "1");
    cr_assert_eq(kcr_delta_fifo_len(g), 0);
    /* Known in the cache: the delete is queued. */
    kcr_object *k = o_("cached", "5");
    kcr_store_add(known, k);
    kcr_object_unref(k);
    DO(kcr_delta_fifo_delete, g, "cached", "6");
    cr_assert_str_eq(pop1(g).deltas, "Deleted:6");
    kcr_delta_fifo_free(f);
    kcr_delta_fifo_free(g);
    kcr_store_free(known);
}

Test(delta_fifo, two_deletes_collapse_keeping_the_real_object)
{
    kcr_delta_fifo *f = new_delta_fifo(NULL);
    DO(kcr_delta_fifo_add, f, "a", "1");
    DO(kcr_delta_fifo_delete, f, "a", "2");
    DO(kcr_delta_fifo_delete, f, "a", "3");
    cr_assert_str_eq(pop1(f).deltas, "Added:1 Deleted:3", "newer non-tombstone wins");
    kcr_delta_fifo_free(f);
}

Test(delta_fifo, replace_over_a_queued_delete_keeps_one_real_delete)
{
    kcr_delta_fifo *f = new_delta_fifo(NULL);
    DO(kcr_delta_fifo_add, f, "a", "1");
    DO(kcr_delta_fifo_delete, f, "a", "2");
    kcr_object *b = o_("b", "1");
    cr_assert_eq(kcr_delta_fifo_replace(f, &b, 1), KCR_OK);
    kcr_object_unref(b);
    struct seen s = pop1(f);
    cr_assert_str_eq(s.key, "ns/a");
    cr_assert_str_eq(s.deltas, "Added:1 Deleted:2", "the tombstone collapsed into the delete");
    s = pop1(f);
    cr_assert_str_eq(s.deltas, "Replaced:1");
    kcr_delta_fifo_free(f);
}

Test(delta_fifo, object_only_in_queue_gets_exactly_one_delete)
{
    kcr_store *known = new_store();
    kcr_delta_fifo_options opts = {kcr_store_known_objects(known)};
    kcr_delta_fifo *f = new_delta_fifo(&opts);
    DO(kcr_delta_fifo_add, f, "queued", "7");
    cr_assert_eq(kcr_delta_fifo_replace(f, NULL, 0), KCR_OK);
    struct seen s = pop1(f);
    cr_assert_str_eq(s.deltas, "Added:7 Deleted:7~", "tombstone holds the newest queued state");
    cr_assert_eq(kcr_delta_fifo_len(f), 0);
    kcr_delta_fifo_free(f);
    kcr_store_free(known);
}

Test(delta_fifo, tombstone_of_a_queued_key_holds_its_newest_state)
{
    kcr_store *known = new_store();
    kcr_delta_fifo_options opts = {kcr_store_known_objects(known)};
    kcr_delta_fifo *f = new_delta_fifo(&opts);
    DO(kcr_delta_fifo_add, f, "a", "1");
    DO(kcr_delta_fifo_update, f, "a", "2");
    cr_assert_eq(kcr_delta_fifo_replace(f, NULL, 0), KCR_OK);
    struct seen s = pop1(f);
    cr_assert_str_eq(s.deltas, "Added:1 Updated:2 Deleted:2~",
                     "the tombstone holds the Updated object, not the Added one");
    cr_assert_eq(kcr_delta_fifo_len(f), 0);
    kcr_delta_fifo_free(f);
    kcr_store_free(known);
}

Test(delta_fifo, replace_emits_replaced_and_tombstones_for_known_missing)
{
    kcr_store *known = new_store();
    kcr_object *k1 = o_("kept", "1"), *k2 = o_("gone", "4");
    kcr_store_add(known, k1);
    kcr_store_add(known, k2);
    kcr_delta_fifo_options opts = {kcr_store_known_objects(known)};
    kcr_delta_fifo *f = new_delta_fifo(&opts);
    kcr_object *list[2] = {o_("kept", "2"), o_("fresh", "1")};
    cr_assert_eq(kcr_delta_fifo_replace(f, list, 2), KCR_OK);
    cr_assert_eq(kcr_delta_fifo_len(f), 3);
    cr_assert_not(kcr_delta_fifo_has_synced(f));
    struct seen s = pop1(f);
    cr_assert_str_eq(s.key, "ns/kept");
    cr_assert_str_eq(s.deltas, "Replaced:2");
    cr_assert(s.initial);
    s = pop1(f);
    cr_assert_str_eq(s.deltas, "Replaced:1");
    cr_assert_not(kcr_delta_fifo_has_synced(f), "initial population = 2 listed + 1 deleted");
    s = pop1(f);
    cr_assert_str_eq(s.key, "ns/gone");
    cr_assert_str_eq(s.deltas, "Deleted:4~", "last known state from the cache");
    cr_assert(s.initial);
    cr_assert(kcr_delta_fifo_has_synced(f));
    for (int i = 0; i < 2; i++)
        kcr_object_unref(list[i]);
    kcr_object_unref(k1);
    kcr_object_unref(k2);
    kcr_delta_fifo_free(f);
    kcr_store_free(known);
}

/* kcr__delta_fifo_delete_unless keeps objects whose name starts with "k". */
static bool keep_k(const kcr_object *obj, void *ud)
{
    (void)ud;
    return kcr_object_name(obj)[0] == 'k';
}

/* A narrower selection: every key whose newest state is rejected gets one
 * tombstone with that state, behind what is queued for it; a queued
 * deletion stays as it is; kept keys get nothing. */
Test(delta_fifo, delete_unless_drops_by_the_newest_state)
{
    kcr_store *known = new_store();
    kcr_object *c1 = o_("kept", "1"), *c2 = o_("lost", "4"), *c3 = o_("queued-lost", "1"),
               *c4 = o_("deleted", "2");
    kcr_store_add(known, c1);
    kcr_store_add(known, c2);
    kcr_store_add(known, c3);
    kcr_store_add(known, c4);
    kcr_delta_fifo_options opts = {kcr_store_known_objects(known)};
    kcr_delta_fifo *f = new_delta_fifo(&opts);
    DO(kcr_delta_fifo_update, f, "queued-lost", "2");
    DO(kcr_delta_fifo_delete, f, "deleted", "3");
    DO(kcr_delta_fifo_add, f, "kfresh", "1");
    cr_assert_eq(kcr__delta_fifo_delete_unless(f, keep_k, NULL), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_delta_fifo_len(f), 4);
    struct seen s = pop1(f);
    cr_assert_str_eq(s.key, "ns/queued-lost");
    cr_assert_str_eq(s.deltas, "Updated:2 Deleted:2~", "behind the queued update, with its state");
    s = pop1(f);
    cr_assert_str_eq(s.key, "ns/deleted");
    cr_assert_str_eq(s.deltas, "Deleted:3", "a queued deletion is left alone");
    s = pop1(f);
    cr_assert_str_eq(s.key, "ns/kfresh");
    cr_assert_str_eq(s.deltas, "Added:1", "kept: nothing added");
    s = pop1(f);
    cr_assert_str_eq(s.key, "ns/lost");
    cr_assert_str_eq(s.deltas, "Deleted:4~", "the cache's state");
    cr_assert_eq(kcr_delta_fifo_len(f), 0, "the kept key got nothing");
    kcr_object_unref(c1);
    kcr_object_unref(c2);
    kcr_object_unref(c3);
    kcr_object_unref(c4);
    kcr_delta_fifo_free(f);
    kcr_store_free(known);
}

Test(delta_fifo, has_synced_when_a_change_comes_first)
{
    kcr_delta_fifo *f = new_delta_fifo(NULL);
    cr_assert_not(kcr_delta_fifo_has_synced(f));
    DO(kcr_delta_fifo_add, f, "a", "1");
    cr_assert(kcr_delta_fifo_has_synced(f));
    kcr_object *b = o_("b", "1");
    kcr_delta_fifo_replace(f, &b, 1);
    kcr_object_unref(b);
    cr_assert(kcr_delta_fifo_has_synced(f));
    kcr_delta_fifo_free(f);
}

Test(delta_fifo, resync_of_missing_and_existing_objects)
{
    kcr_store *known = new_store();
    kcr_object *a = o_("a", "1"), *b = o_("b", "1");
    kcr_store_add(known, a);
    kcr_store_add(known, b);
    kcr_delta_fifo_options opts = {kcr_store_known_objects(known)};
    kcr_delta_fifo *f = new_delta_fifo(&opts);
    DO(kcr_delta_fifo_update, f, "a", "2");
    cr_assert_eq(kcr_delta_fifo_resync(f), KCR_OK);
    cr_assert_eq(kcr_delta_fifo_len(f), 2);
    struct seen s = pop1(f);
    cr_assert_str_eq(s.deltas, "Updated:2", "queued key: no Sync added");
    s = pop1(f);
    cr_assert_str_eq(s.key, "ns/b");
    cr_assert_str_eq(s.deltas, "Sync:1");
    /* An object gone from the cache is not resynced. */
    kcr_store_delete(known, a);
    kcr_store_delete(known, b);
    cr_assert_eq(kcr_delta_fifo_resync(f), KCR_OK);
    cr_assert_eq(kcr_delta_fifo_len(f), 0);
    /* Without known objects resync does nothing. */
    kcr_delta_fifo *g = new_delta_fifo(NULL);
    cr_assert_eq(kcr_delta_fifo_resync(g), KCR_OK);
    cr_assert_eq(kcr_delta_fifo_len(g), 0);
    kcr_delta_fifo_free(g);
    kcr_object_unref(a);
    kcr_object_unref(b);
    kcr_delta_fifo_free(f);
    kcr_store_free(known);
}

Test(delta_fifo, has_synced_counts_deletes_of_first_replace)
{
    kcr_store *known = new_store();
    kcr_object *g1 = o_("g1", "1"), *g2 = o_("g2", "1");
    kcr_store_add(known, g1);
    kcr_store_add(known, g2);
    kcr_delta_fifo_options opts = {kcr_store_known_objects(known)};
    kcr_delta_fifo *f = new_delta_fifo(&opts);
    cr_assert_eq(kcr_delta_fifo_replace(f, NULL, 0), KCR_OK);
    cr_assert_not(kcr_delta_fifo_has_synced(f));
    pop1(f);
    cr_assert_not(kcr_delta_fifo_has_synced(f));
    pop1(f);
    cr_assert(kcr_delta_fifo_has_synced(f));
    kcr_object_unref(g1);
    kcr_object_unref(g2);
    kcr_delta_fifo_free(f);
    kcr_store_free(known);
}

Test(delta_fifo, pop_requeue_puts_deltas_back_at_the_end)
{
    kcr_delta_fifo *f = new_delta_fifo(NULL);
    DO(kcr_delta_fifo_add, f, "a", "1");
    DO(kcr_delta_fifo_add, f, "b", "1");
    struct seen s = {.requeue = true};
    cr_assert_eq(kcr_delta_fifo_pop(f, capture, &s), KCR_OK);
    cr_assert_str_eq(s.key, "ns/a");
    cr_assert_str_eq(pop1(f).key, "ns/b");
    s = pop1(f);
    cr_assert_str_eq(s.key, "ns/a");
    cr_assert_str_eq(s.deltas, "Added:1");
    kcr_delta_fifo_free(f);
}

/* The informer's use: pop applies the deltas to the known store. */
static kcr_err apply(const char *key, const kcr_delta *d, size_t n, bool initial, bool *requeue,
                     void *ud)
{
    kcr_store *s = ud;
    for (size_t i = 0; i < n; i++) {
        if (d[i].type == KCR_DELTA_DELETED)
            kcr_store_delete_key(s, key);
        else
            kcr_store_update(s, d[i].object);
    }
    return KCR_OK;
}

Test(delta_fifo, pop_into_the_cache_then_relist)
{
    kcr_store *cache = new_store();
    kcr_delta_fifo_options opts = {kcr_store_known_objects(cache)};
    kcr_delta_fifo *f = new_delta_fifo(&opts);
    kcr_object *l1[3] = {o_("a", "1"), o_("b", "1"), o_("c", "1")};
    kcr_delta_fifo_replace(f, l1, 3);
    while (kcr_delta_fifo_len(f))
        kcr_delta_fifo_pop(f, apply, cache);
    cr_assert_eq(kcr_store_len(cache), 3);
    kcr_object *l2[1] = {o_("b", "2")};
    kcr_delta_fifo_replace(f, l2, 1);
    cr_assert_eq(kcr_delta_fifo_len(f), 3, "b replaced, a and c tombstoned");
    while (kcr_delta_fifo_len(f))
        kcr_delta_fifo_pop(f, apply, cache);
    cr_assert_eq(kcr_store_len(cache), 1);
    kcr_object *b = kcr_store_get_by_key(cache, "ns/b");
    cr_assert_str_eq(kcr_object_resource_version(b), "2");
    kcr_object_unref(b);
    for (int i = 0; i < 3; i++)
        kcr_object_unref(l1[i]);
    kcr_object_unref(l2[0]);
    kcr_delta_fifo_free(f);
    kcr_store_free(cache);
}

/* kcr__delta_fifo_apply_or_queue (the informer's sink): applied on the
 * calling thread when nothing is queued, queued behind the others if not. */
static bool apply_or_queue(kcr_delta_fifo *f, kcr_delta_type type, const char *name,
                           const char *rv, struct seen *s)
{
    kcr_object *o = o_(name, rv);
    bool applied = true;
    cr_assert_eq(kcr__delta_fifo_apply_or_queue(f, o, type, capture, s, &applied), KCR_OK, "%s",
                 kcr_last_error());
    kcr_object_unref(o);
    return applied;
}

Test(delta_fifo, a_change_with_nothing_queued_is_applied_at_once)
{
    kcr_delta_fifo *f = new_delta_fifo(NULL);
    cr_assert_eq(kcr_delta_fifo_replace(f, NULL, 0), KCR_OK);
    struct seen s = {0};
    cr_assert(apply_or_queue(f, KCR_DELTA_UPDATED, "a", "2", &s));
    cr_assert_str_eq(s.key, "ns/a");
    cr_assert_str_eq(s.deltas, "Updated:2");
    cr_assert_not(s.initial, "an empty queue has no initial population left");
    cr_assert_eq(kcr_delta_fifo_len(f), 0);
    cr_assert(kcr_delta_fifo_has_synced(f));
    kcr_delta_fifo_free(f);
}

Test(delta_fifo, a_change_behind_queued_ones_is_queued_in_order)
{
    kcr_delta_fifo *f = new_delta_fifo(NULL);
    DO(kcr_delta_fifo_add, f, "a", "1");
    struct seen s = {0};
    cr_assert_not(apply_or_queue(f, KCR_DELTA_UPDATED, "b", "1", &s));
    cr_assert_not(apply_or_queue(f, KCR_DELTA_UPDATED, "a", "2", &s));
    cr_assert_str_eq(s.key, "", "nothing applied");
    s = pop1(f);
    cr_assert_str_eq(s.key, "ns/a");
    cr_assert_str_eq(s.deltas, "Added:1 Updated:2");
    s = pop1(f);
    cr_assert_str_eq(s.key, "ns/b");
    cr_assert_str_eq(s.deltas, "Updated:1");
    /* empty again: the next change is applied */
    cr_assert(apply_or_queue(f, KCR_DELTA_UPDATED, "b", "2", &s));
    cr_assert_str_eq(s.deltas, "Updated:2");
    kcr_delta_fifo_free(f);
}

Test(delta_fifo, apply_or_queue_ignores_a_delete_of_an_unknown_key_and_queues_once_closed)
{
    kcr_delta_fifo *f = new_delta_fifo(NULL);
    struct seen s = {0};
    cr_assert_not(apply_or_queue(f, KCR_DELTA_DELETED, "ghost", "1", &s));
    cr_assert_str_eq(s.key, "");
    cr_assert_eq(kcr_delta_fifo_len(f), 0);
    kcr_delta_fifo_close(f);
    cr_assert_not(apply_or_queue(f, KCR_DELTA_ADDED, "late", "1", &s));
    cr_assert_str_eq(s.key, "", "a closed fifo applies nothing");
    cr_assert_eq(kcr_delta_fifo_len(f), 1);
    kcr_object *o = o_("x", "1");
    bool applied;
    cr_assert_eq(kcr__delta_fifo_apply_or_queue(f, o, KCR_DELTA_SYNC, capture, &s, &applied),
                 KCR_ERR_INVALID);
    kcr_object_unref(o);
    kcr_delta_fifo_free(f);
}

static void *blocked_pop(void *arg)
{
    struct seen s = {0};
    return (void *)(intptr_t)kcr_delta_fifo_pop(arg, capture, &s);
}

Test(delta_fifo, close_unblocks_pop, .timeout = 30)
{
    kcr_delta_fifo *f = new_delta_fifo(NULL);
    pthread_t t;
    pthread_create(&t, NULL, blocked_pop, f);
    sleep_us(50 * 1000);
    kcr_delta_fifo_close(f);
    void *r;
    pthread_join(t, &r);
    cr_assert_eq((kcr_err)(intptr_t)r, KCR_ERR_SHUTDOWN);
    cr_assert(kcr_delta_fifo_is_closed(f));
    struct seen s;
    cr_assert_eq(kcr_delta_fifo_pop_timeout(f, capture, &s, 10), KCR_ERR_SHUTDOWN);
    kcr_delta_fifo_free(f);
}

Test(delta_fifo, pop_timeout)
{
    kcr_delta_fifo *f = new_delta_fifo(NULL);
    struct seen s;
    cr_assert_eq(kcr_delta_fifo_pop_timeout(f, capture, &s, 20), KCR_ERR_TIMEOUT);
    kcr_delta_fifo_free(f);
}

static void *endless_pop(void *arg)
{
    struct seen s = {0};
    /* 2^57 ms is 2^63 * 15625 ns: computed in int64_t it wraps to INT64_MIN */
    return (void *)(intptr_t)kcr_delta_fifo_pop_timeout(arg, capture, &s, INT64_C(1) << 57);
}

Test(delta_fifo, pop_timeout_beyond_35_years_waits_without_limit, .timeout = 30)
{
    /* Such a timeout in nanoseconds would overflow into a deadline in the
     * past (an immediate KCR_ERR_TIMEOUT); it must wait for the add. */
    kcr_delta_fifo *f = new_delta_fifo(NULL);
    pthread_t t;
    pthread_create(&t, NULL, endless_pop, f);
    DO(kcr_delta_fifo_add, f, "late", "1");
    void *r;
    pthread_join(t, &r);
    cr_assert_eq((kcr_err)(intptr_t)r, KCR_OK, "%s", kcr_strerror((kcr_err)(intptr_t)r));
    kcr_delta_fifo_free(f);
}

struct prod {
    kcr_delta_fifo *f;
    int id;
    kcr_store *cache; /* set: changes through kcr__delta_fifo_apply_or_queue */
};

static void *producer(void *arg)
{
    struct prod *p = arg;
    char name[32], rv[16];
    for (int i = 0; i < 300; i++) {
        snprintf(name, sizeof name, "p%d-%d", p->id, i % 40);
        snprintf(rv, sizeof rv, "%d", i);
        kcr_object *o = o_(name, rv);
        bool applied;
        if (p->cache) /* the informer's way: applied here when nothing is queued */
            kcr__delta_fifo_apply_or_queue(p->f, o,
                                           i % 3 == 0   ? KCR_DELTA_ADDED
                                           : i % 3 == 1 ? KCR_DELTA_UPDATED
                                                        : KCR_DELTA_DELETED,
                                           apply, p->cache, &applied);
        else if (i % 3 == 0)
            kcr_delta_fifo_add(p->f, o);
        else if (i % 3 == 1)
            kcr_delta_fifo_update(p->f, o);
        else
            kcr_delta_fifo_delete(p->f, o);
        kcr_object_unref(o);
        if (i % 50 == 0)
            kcr_delta_fifo_resync(p->f);
    }
    return NULL;
}

static void *consumer(void *arg)
{
    void **a = arg;
    while (kcr_delta_fifo_pop(a[0], apply, a[1]) == KCR_OK)
        ;
    return NULL;
}

Test(delta_fifo, concurrent_producers_and_consumer, .timeout = 120)
{
    kcr_store *cache = new_store();
    kcr_delta_fifo_options opts = {kcr_store_known_objects(cache)};
    kcr_delta_fifo *f = new_delta_fifo(&opts);
    void *ca[2] = {f, cache};
    pthread_t c, p[3];
    struct prod pp[3];
    pthread_create(&c, NULL, consumer, ca);
    for (int i = 0; i < 3; i++) {
        pp[i] = (struct prod){f, i, i == 2 ? cache : NULL};
        pthread_create(&p[i], NULL, producer, &pp[i]);
    }
    for (int i = 0; i < 3; i++)
        pthread_join(p[i], NULL);
    while (kcr_delta_fifo_len(f))
        sleep_us(1000);
    kcr_delta_fifo_close(f);
    pthread_join(c, NULL);
    cr_assert(kcr_delta_fifo_has_synced(f));
    cr_assert_leq(kcr_store_len(cache), 120);
    kcr_delta_fifo_free(f);
    kcr_store_free(cache);
}
