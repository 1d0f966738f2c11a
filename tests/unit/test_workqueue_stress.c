/* Many producers and workers: a key is never processed by two workers at
 * once, and no add is lost (every key added after the start of its last
 * processing is processed again). Runs once with each of the add ring's
 * fence modes (see workqueue/fence.c), and once with half the threads
 * waiting as on a contended CPU (workqueue/yield.c); also runs under TSan
 * (tests/run). */
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include "core/clock.h"
#include "tests/unit/wq_stress.h"
#include "workqueue/queue.h"
#include "helpers/bounded.h"

enum { KEYS = 1031, PRODUCERS = 4, WORKERS = 4 };
#define ADDS_PER_BUILD (SLOW_BUILD ? 60000 : 250000)
static int adds_per_producer; /* fewer under valgrind, which runs one thread at a time */

static struct key_state keys[KEYS];
static kcr_workqueue *queue;
static atomic_int overlaps;
static atomic_int errors;
/* Threads 2 and 3 of each kind wait as after a late yield on a contended
 * CPU: getters yield a few rounds only before they sleep, adders facing a
 * full ring apply it themselves. */
static bool some_block;

static void maybe_block(uintptr_t id)
{
    if (some_block && (id & 2))
        kcr__wq_calm_until(INT64_MAX);
}

static void *producer(void *arg)
{
    maybe_block((uintptr_t)arg);
    uint32_t seed = (uint32_t)(uintptr_t)arg * 7919u + 1;
    for (int i = 0; i < adds_per_producer; i++) {
        struct key_state *k = &keys[next_rand(&seed) % KEYS];
        atomic_fetch_add(&k->adds, 1);
        uint32_t how = next_rand(&seed) % 16;
        kcr_err err;
        if (how == 0)
            err = kcr_workqueue_add(queue, k->name,
                &(kcr_workqueue_add_options){.delay_ms = (int64_t)(next_rand(&seed) % 3)});
        else
            err = kcr_workqueue_add(queue, k->name, NULL);
        if (err != KCR_OK)
            atomic_fetch_add(&errors, 1);
    }
    return NULL;
}

static void *worker(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    maybe_block(id);
    const char *name;
    while (worker_get(queue, id, &name, &errors)) {
        struct key_state *k = key_find(keys, name);
        key_take(k, &overlaps);
        if (atomic_load(&k->processed) % 8 == 0)
            sched_yield(); /* sometimes "work" a little, so re-adds hit processing keys */
        key_done(queue, k, name, &errors);
    }
    return NULL;
}

/* light_fences: adders publish without a hardware fence and sleeping
 * getters use membarrier (when the kernel has it); else seq_cst exchange. */
static void run_stress(bool light_fences, bool block)
{
    some_block = block;
    keys_reset(keys, KEYS);
    adds_per_producer = RUNNING_ON_VALGRIND ? 20000 : ADDS_PER_BUILD;
    kcr_workqueue_options opts = {.name = "stress", .track_time = true};
    cr_assert_eq(kcr_workqueue_new(&opts, &queue), KCR_OK);
    queue->light_fences = light_fences && kcr__wq_light_fences();
    atomic_store(&overlaps, 0);
    atomic_store(&errors, 0);
    int64_t t0 = kcr__now_ns();
    pthread_t p[PRODUCERS], w[WORKERS];
    for (uintptr_t i = 0; i < WORKERS; i++)
        pthread_create(&w[i], NULL, worker, (void *)i);
    for (uintptr_t i = 0; i < PRODUCERS; i++)
        pthread_create(&p[i], NULL, producer, (void *)i);
    for (int i = 0; i < PRODUCERS; i++)
        test_join(p[i], 240000, "thread p[i]");
    /* Let delayed adds come due before shutdown drops the waiting ones. */
    kcr_workqueue_stats st;
    for (int spins = 0; spins < 10000; spins++) {
        kcr_workqueue_get_stats(queue, &st);
        if (st.waiting == 0)
            break;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    cr_assert_eq(st.waiting, 0);
    kcr_workqueue_shutdown(queue);
    for (int i = 0; i < WORKERS; i++)
        test_join(w[i], 240000, "thread w[i]");
    double secs = (double)(kcr__now_ns() - t0) / 1e9;

    long total_adds, total_processed;
    keys_expect_no_add_lost(keys, KEYS, 0, &total_adds, &total_processed);
    cr_log_info("stress (%s fences%s): %ld adds, %ld processed, %.2f s",
                queue->light_fences ? "light" : "exchange", block ? ", half as on a busy CPU" : "",
                total_adds, total_processed, secs);
    cr_assert_gt(total_processed, KEYS - 1);
    cr_assert_leq(total_processed, total_adds);
    cr_assert_eq(atomic_load(&overlaps), 0, "a key was processed by two workers at once");
    cr_assert_eq(atomic_load(&errors), 0);
    kcr_workqueue_get_stats(queue, &st);
    cr_assert_eq(st.processing, 0);
    cr_assert_eq(st.queued, 0);
    cr_assert_eq(st.depth, 0);
    kcr_workqueue_free(queue);
}

Test(stress, no_key_processed_twice_at_once_and_no_add_lost, .timeout = 120)
{
    run_stress(true, false);
}

Test(stress, same_with_exchange_fences, .timeout = 120)
{
    run_stress(false, false);
}

Test(stress, same_with_half_the_threads_waiting_as_on_a_busy_cpu, .timeout = 120)
{
    run_stress(true, true);
}
