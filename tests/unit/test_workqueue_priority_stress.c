/* Priorities under concurrency: producers add keys with random priorities
 * (plain and delayed) and remove some, workers get/done and re-add, while a
 * checker thread verifies the lines under the queue's lock (priorities never
 * rise along the FIFO, each line's first/last/count match, dirty counts add
 * up to the depth). At the end no add was lost, no key was processed by two
 * workers at once and every line is gone. Runs under TSan (tests/run) and
 * valgrind too. */
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include "core/clock.h"
#include "tests/unit/wq_stress.h"
#include "workqueue/queue.h"
#include "helpers/bounded.h"

enum { KEYS = 509, PRODUCERS = 3, WORKERS = 3, REMOVABLE_EVERY = 16 };
static const int priorities[] = {KCR_WQ_PRIORITY_LOW, -7, KCR_WQ_PRIORITY_NORMAL, 5, 40};
#define NPRIO ((int)(sizeof priorities / sizeof priorities[0]))

static struct key_state keys[KEYS];
static kcr_workqueue *queue;
static atomic_int overlaps, errors, bad_lines;
static atomic_bool producing;
static int adds_per_producer;

static void *producer(void *arg)
{
    uint32_t seed = (uint32_t)(uintptr_t)arg * 7919u + 3;
    for (int i = 0; i < adds_per_producer; i++) {
        uint32_t idx = next_rand(&seed) % KEYS;
        struct key_state *k = &keys[idx];
        int prio = priorities[next_rand(&seed) % NPRIO];
        uint32_t how = next_rand(&seed) % 32;
        kcr_err err;
        if (how == 0 && idx % REMOVABLE_EVERY == 0) {
            /* Only some keys are removed: a remove drops adds, so the
             * lost-add check below skips them. */
            err = kcr_workqueue_remove(queue, k->name);
            if (err != KCR_OK && err != KCR_ERR_NOT_FOUND)
                atomic_fetch_add(&errors, 1);
            continue;
        }
        atomic_fetch_add(&k->adds, 1);
        if (how < 4)
            err = kcr_workqueue_add(
                queue, k->name, &(kcr_workqueue_add_options){.delay_ms = (int64_t)(next_rand(&seed) % 3),
                                              .priority = prio});
        else if (how < 8)
            err = kcr_workqueue_add(queue, k->name, NULL);
        else
            err = kcr_workqueue_add(queue, k->name, &(kcr_workqueue_add_options){.priority = prio});
        if (err != KCR_OK)
            atomic_fetch_add(&errors, 1);
    }
    return NULL;
}

static void *worker(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    uint32_t seed = (uint32_t)id + 11;
    const char *name;
    while (worker_get(queue, id, &name, &errors)) {
        struct key_state *k = key_find(keys, name);
        key_take(k, &overlaps);
        /* Sometimes re-add while processing, with a random priority. */
        if (atomic_load(&producing) && next_rand(&seed) % 8 == 0) {
            atomic_fetch_add(&k->adds, 1);
            if (kcr_workqueue_add(queue, name,
                &(kcr_workqueue_add_options){.priority = priorities[next_rand(&seed) % NPRIO]}) !=
                KCR_OK)
                atomic_fetch_add(&errors, 1);
        }
        key_done(queue, k, name, &errors);
    }
    return NULL;
}

/* Checks the lines against the FIFO (lock held). */
static bool lines_consistent(const struct kcr_workqueue *q)
{
    if (!q->prio_on)
        return q->nlevels == 0;
    int64_t dirty = 0, queued = 0;
    const struct kcr__wq_item *it = q->head;
    for (uint32_t i = 0; i < q->nlevels; i++) {
        const struct kcr__wq_level *lv = &q->levels[i];
        if (i > 0 && lv->prio >= q->levels[i - 1].prio)
            return false;
        if (lv->dirty < lv->queued || lv->dirty == 0)
            return false;
        dirty += lv->dirty;
        queued += lv->queued;
        if (!lv->queued) {
            if (lv->first || lv->last)
                return false;
            continue;
        }
        if (it != lv->first)
            return false;
        for (int64_t n = 1; n < lv->queued; n++) {
            if (it->prio != lv->prio || !it->next || it->next->ready_ns < it->ready_ns)
                return false;
            it = it->next;
        }
        if (it != lv->last || it->prio != lv->prio)
            return false;
        it = it->next;
    }
    return it == NULL && dirty == q->depth && queued == q->queued;
}

static void *checker(void *arg)
{
    (void)arg;
    while (atomic_load(&producing)) {
        kcr__wq_mutex_lock(queue);
        if (!lines_consistent(queue))
            atomic_fetch_add(&bad_lines, 1);
        pthread_mutex_unlock(&queue->mu);
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

Test(priority_stress, lines_stay_consistent_and_no_add_is_lost, .timeout = 120)
{
    keys_reset(keys, KEYS);
    adds_per_producer = RUNNING_ON_VALGRIND ? 10000 : SLOW_BUILD ? 40000 : 200000;
    /* Aging on, short enough to reorder often: 200 us, below the option's
     * 1 ms resolution, so set inside before any thread starts. */
    kcr_workqueue_options opts = {.name = "prio-stress", .priority_max_wait_ms = 1};
    cr_assert_eq(kcr_workqueue_new(&opts, &queue), KCR_OK);
    queue->max_wait_ns = 200 * 1000;
    atomic_store(&producing, true);
    pthread_t p[PRODUCERS], w[WORKERS], c;
    for (uintptr_t i = 0; i < WORKERS; i++)
        pthread_create(&w[i], NULL, worker, (void *)i);
    pthread_create(&c, NULL, checker, NULL);
    for (uintptr_t i = 0; i < PRODUCERS; i++)
        pthread_create(&p[i], NULL, producer, (void *)i);
    for (int i = 0; i < PRODUCERS; i++)
        test_join(p[i], 240000, "thread p[i]");
    atomic_store(&producing, false);
    test_join(c, 240000, "thread c");
    /* Let delayed adds come due before shutdown drops the waiting ones. */
    kcr_workqueue_stats st;
    int64_t deadline = kcr__now_ns() + 30 * KCR_NS_PER_S;
    do {
        kcr_workqueue_get_stats(queue, &st);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    } while ((st.waiting || st.depth || st.processing) && kcr__now_ns() < deadline);
    cr_assert_eq(st.waiting, 0);
    kcr_workqueue_shutdown(queue);
    for (int i = 0; i < WORKERS; i++)
        test_join(w[i], 240000, "thread w[i]");

    long total_adds, total_processed;
    keys_expect_no_add_lost(keys, KEYS, REMOVABLE_EVERY, &total_adds, &total_processed);
    cr_log_info("priority stress: %ld adds, %ld processed", total_adds, total_processed);
    cr_assert_gt(total_processed, KEYS / 2);
    cr_assert_eq(atomic_load(&overlaps), 0, "a key was processed by two workers at once");
    cr_assert_eq(atomic_load(&errors), 0);
    cr_assert_eq(atomic_load(&bad_lines), 0, "the lines disagreed with the FIFO");
    kcr__wq_mutex_lock(queue);
    bool consistent = lines_consistent(queue);
    uint32_t nlevels = queue->nlevels;
    pthread_mutex_unlock(&queue->mu);
    cr_assert(consistent);
    cr_assert_eq(nlevels, 0, "every line is gone with its last key");
    kcr_workqueue_get_stats(queue, &st);
    cr_assert_eq(st.depth, 0);
    cr_assert_eq(st.queued, 0);
    kcr_workqueue_free(queue);
}
