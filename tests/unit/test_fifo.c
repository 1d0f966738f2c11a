/* FIFO: client-go's semantics, docs/store.md "FIFO and DeltaFIFO". */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kcr/kcr.h"
#include "unit/store_fixtures.h"

struct popped {
    char names[16][32];
    char rvs[16][16];
    bool initial[16];
    int n;
    bool requeue_first;
};

static kcr_err record(const kcr_object *obj, bool initial, bool *requeue, void *ud)
{
    struct popped *p = ud;
    snprintf(p->names[p->n], sizeof p->names[0], "%s", kcr_object_name(obj));
    snprintf(p->rvs[p->n], sizeof p->rvs[0], "%s", kcr_object_resource_version(obj));
    p->initial[p->n] = initial;
    p->n++;
    if (p->requeue_first) {
        p->requeue_first = false;
        *requeue = true;
        return KCR_ERR_CONFLICT;
    }
    return KCR_OK;
}

static void add(kcr_fifo *f, const char *name, const char *rv)
{
    kcr_object *o = mk("ns", name, "x", rv);
    cr_assert_eq(kcr_fifo_add(f, o), KCR_OK);
    kcr_object_unref(o);
}

Test(fifo, add_update_keep_position_and_replace_object)
{
    kcr_fifo *f = new_fifo();
    add(f, "a", "1");
    add(f, "b", "1");
    kcr_object *a2 = mk("ns", "a", "x", "2");
    kcr_fifo_update(f, a2);
    kcr_object_unref(a2);
    struct popped p = {0};
    cr_assert_eq(kcr_fifo_pop(f, record, &p), KCR_OK);
    cr_assert_eq(kcr_fifo_pop(f, record, &p), KCR_OK);
    cr_assert_eq(p.n, 2);
    cr_assert_str_eq(p.names[0], "a");
    cr_assert_str_eq(p.rvs[0], "2", "newest object, first position");
    cr_assert_str_eq(p.names[1], "b");
    kcr_fifo_free(f);
}

Test(fifo, add_if_not_present)
{
    kcr_fifo *f = new_fifo();
    add(f, "a", "1");
    kcr_object *a2 = mk("ns", "a", "x", "2");
    cr_assert_eq(kcr_fifo_add_if_not_present(f, a2), KCR_OK);
    kcr_object *got = kcr_fifo_get_by_key(f, "ns/a");
    cr_assert_str_eq(kcr_object_resource_version(got), "1");
    kcr_object_unref(got);
    struct popped p = {0};
    kcr_fifo_pop(f, record, &p);
    cr_assert_eq(kcr_fifo_add_if_not_present(f, a2), KCR_OK);
    kcr_fifo_pop(f, record, &p);
    cr_assert_str_eq(p.rvs[1], "2");
    kcr_object_unref(a2);
    kcr_fifo_free(f);
}

Test(fifo, delete_removes_item_and_pop_skips_it)
{
    kcr_fifo *f = new_fifo();
    add(f, "a", "1");
    add(f, "b", "1");
    kcr_object *a = mk("ns", "a", "x", "1");
    kcr_fifo_delete(f, a);
    kcr_object_unref(a);
    cr_assert_null(kcr_fifo_get_by_key(f, "ns/a"));
    struct popped p = {0};
    cr_assert_eq(kcr_fifo_pop(f, record, &p), KCR_OK);
    cr_assert_eq(p.n, 1);
    cr_assert_str_eq(p.names[0], "b");
    kcr_fifo_close(f);
    cr_assert_eq(kcr_fifo_pop(f, record, &p), KCR_ERR_SHUTDOWN);
    kcr_fifo_free(f);
}

Test(fifo, replace_and_has_synced_after_initial_batch)
{
    kcr_fifo *f = new_fifo();
    cr_assert_not(kcr_fifo_has_synced(f));
    add(f, "stale", "1");
    kcr_fifo_free(f);

    f = new_fifo();
    kcr_object *l[3] = {mk("ns", "x", "a", "1"), mk("ns", "y", "a", "1"), mk("ns", "x", "a", "2")};
    cr_assert_eq(kcr_fifo_replace(f, l, 3), KCR_OK);
    for (int i = 0; i < 3; i++)
        kcr_object_unref(l[i]);
    cr_assert_not(kcr_fifo_has_synced(f));
    struct popped p = {0};
    kcr_fifo_pop(f, record, &p);
    cr_assert_not(kcr_fifo_has_synced(f));
    kcr_fifo_pop(f, record, &p);
    cr_assert(kcr_fifo_has_synced(f), "two distinct keys popped");
    cr_assert_str_eq(p.names[0], "x");
    cr_assert_str_eq(p.rvs[0], "2");
    cr_assert(p.initial[0] && p.initial[1]);
    add(f, "later", "1");
    kcr_fifo_pop(f, record, &p);
    cr_assert_not(p.initial[2]);
    kcr_fifo_free(f);
}

Test(fifo, has_synced_when_a_change_comes_first)
{
    kcr_fifo *f = new_fifo();
    kcr_object *o = mk("ns", "a", "x", "1");
    kcr_fifo_delete(f, o);
    cr_assert(kcr_fifo_has_synced(f));
    kcr_fifo_replace(f, &o, 1);
    cr_assert(kcr_fifo_has_synced(f), "a later replace does not reset it");
    kcr_object_unref(o);
    kcr_fifo_free(f);
}

Test(fifo, replace_swaps_queue_and_items)
{
    kcr_fifo *f = new_fifo();
    add(f, "old", "1");
    kcr_object *n = mk("ns", "new", "x", "1");
    kcr_fifo_replace(f, &n, 1);
    kcr_object_unref(n);
    kcr_string_list keys;
    kcr_fifo_list_keys(f, &keys);
    cr_assert_eq(keys.len, 1);
    cr_assert_str_eq(keys.items[0], "ns/new");
    kcr_string_list_free(&keys);
    struct popped p = {0};
    kcr_fifo_pop(f, record, &p);
    cr_assert_str_eq(p.names[0], "new");
    kcr_fifo_free(f);
}

Test(fifo, pop_requeue)
{
    kcr_fifo *f = new_fifo();
    add(f, "a", "1");
    add(f, "b", "1");
    struct popped p = {.requeue_first = true};
    cr_assert_eq(kcr_fifo_pop(f, record, &p), KCR_ERR_CONFLICT, "process's error is returned");
    kcr_fifo_pop(f, record, &p);
    kcr_fifo_pop(f, record, &p);
    cr_assert_eq(p.n, 3);
    cr_assert_str_eq(p.names[1], "b");
    cr_assert_str_eq(p.names[2], "a", "requeued at the end");
    kcr_fifo_free(f);
}

Test(fifo, resync_queues_items_missing_from_queue)
{
    kcr_fifo *f = new_fifo();
    add(f, "a", "1");
    add(f, "b", "1");
    struct popped p = {.requeue_first = true};
    kcr_fifo_pop(f, record, &p); /* a requeued: queue b, a */
    cr_assert_eq(kcr_fifo_resync(f), KCR_OK);
    kcr_string_list keys;
    kcr_fifo_list_keys(f, &keys);
    cr_assert_eq(keys.len, 2);
    kcr_string_list_free(&keys);
    /* Delete b's item but leave its queue slot; re-add b's item directly
     * by add_if_not_present after draining; resync then queues it once. */
    kcr_fifo_pop(f, record, &p);
    kcr_fifo_pop(f, record, &p);
    cr_assert_eq(p.n, 3);
    /* Nothing queued, nothing stored: resync adds nothing. */
    kcr_fifo_resync(f);
    cr_assert_eq(kcr_fifo_is_closed(f), false);
    kcr_fifo_close(f);
    cr_assert_eq(kcr_fifo_pop(f, record, &p), KCR_ERR_SHUTDOWN);
    kcr_fifo_free(f);
}

static void *blocked_pop(void *arg)
{
    struct popped p = {0};
    return (void *)(intptr_t)kcr_fifo_pop(arg, record, &p);
}

Test(fifo, close_unblocks_pop, .timeout = 30)
{
    kcr_fifo *f = new_fifo();
    pthread_t t;
    pthread_create(&t, NULL, blocked_pop, f);
    sleep_us(50 * 1000);
    kcr_fifo_close(f);
    void *r;
    pthread_join(t, &r);
    cr_assert_eq((kcr_err)(intptr_t)r, KCR_ERR_SHUTDOWN);
    cr_assert(kcr_fifo_is_closed(f));
    kcr_fifo_free(f);
}

Test(fifo, pop_wakes_on_add, .timeout = 30)
{
    kcr_fifo *f = new_fifo();
    pthread_t t;
    pthread_create(&t, NULL, blocked_pop, f);
    sleep_us(20 * 1000);
    add(f, "a", "1");
    void *r;
    pthread_join(t, &r);
    cr_assert_eq((kcr_err)(intptr_t)r, KCR_OK);
    kcr_fifo_free(f);
}
