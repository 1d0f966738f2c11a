/* Workqueue benchmark, C side. Its twin is clientgo/ (Go module: go.mod here); both run
 * exactly the same scenarios and print "<scenario> <ops/s> <adds> <delivered>" lines, where
 * adds are the adds offered and delivered the keys the workers got (a deduplicating queue
 * delivers fewer than it was offered):
 *
 *   cycle_PpWw  P producers each add keys k0..k9999 twice per round in the
 *               interleaved order k0 k1 k0 k2 k1 k3 k2 ... k9999 k9998 k9999
 *               (so half the adds are duplicates), ROUNDS rounds; W workers
 *               loop get -> done. Ops = completed adds; the clock stops when
 *               the workers have drained the queue after the producers end.
 *   add_after   1 producer add_after()s 100000 distinct keys with delays of
 *               0, 1 or 2 ms (the API counts whole ms) from a fixed LCG; 2
 *               workers get -> done until all 100000 were processed.
 *               Ops = adds.
 *   priority_1p2w 1 producer adds keys as cycle_1p1w does (PRIO_ROUNDS rounds), every
 *               fourth key with NORMAL priority and the others with LOW (live events
 *               among an initial list); 2 workers loop get -> done. Ops = completed adds;
 *               the clock stops once the queue is drained. The twin is controller-runtime's
 *               priority queue (clientgo/priority.go), which has no drain on shutdown: it
 *               polls for an empty queue every 100 us, kcr shuts down with drain semantics.
 *   drain_PpWw, throughput_PpWw
 *               the work delivered rather than the adds offered: see delivered.c
 *               (drain_* print seconds instead of ops/s). P and W are 1 or 4.
 *   loaded_*    (bench/workqueue/run only) the scenario while another process keeps one
 *               core busy.
 *
 * Usage: bench_workqueue [SCENARIO...] (default: all). KCR_WQ_WORK_NS sets the drain
 * scenarios' busy work per key (default DRAIN_WORK_NS; the twin reads the same). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "kcr/workqueue.h"

enum { KEYS = 10000, ROUNDS = 50, PRIO_ROUNDS = 20, PRIO_WORKERS = 2 };
enum { DELAYED_KEYS = BENCH_NAMES, DELAY_WORKERS = 2 };
enum { DRAIN_WORK_NS = 5000 };

char (*bench_names)[16];

double bench_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct run {
    kcr_workqueue *q;
    /* On its own cache line: workers bump it on every key while producers
     * read `q` on every add (the Go twin's counter is a separate object). */
    _Alignas(64) atomic_long processed;
};

static void *worker(void *arg)
{
    struct run *r = arg;
    const char *key;
    while (kcr_workqueue_get(r->q, &key) == KCR_OK) {
        kcr_workqueue_done(r->q, key);
        atomic_fetch_add_explicit(&r->processed, 1, memory_order_relaxed);
    }
    return NULL;
}

static void *producer(void *arg)
{
    struct run *r = arg;
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < KEYS; i++) {
            kcr_workqueue_add(r->q, bench_names[i], NULL);
            if (i > 0)
                kcr_workqueue_add(r->q, bench_names[i - 1], NULL);
        }
        kcr_workqueue_add(r->q, bench_names[KEYS - 1], NULL);
    }
    return NULL;
}

static int key_priority(int i)
{
    return i % 4 == 0 ? KCR_WQ_PRIORITY_NORMAL : KCR_WQ_PRIORITY_LOW;
}

static void *priority_producer(void *arg)
{
    struct run *r = arg;
    for (int round = 0; round < PRIO_ROUNDS; round++) {
        for (int i = 0; i < KEYS; i++) {
            kcr_workqueue_add(r->q, bench_names[i],
                              &(kcr_workqueue_add_options){.priority = key_priority(i)});
            if (i > 0)
                kcr_workqueue_add(r->q, bench_names[i - 1],
                                  &(kcr_workqueue_add_options){.priority = key_priority(i - 1)});
        }
        kcr_workqueue_add(r->q, bench_names[KEYS - 1],
                          &(kcr_workqueue_add_options){.priority = key_priority(KEYS - 1)});
    }
    return NULL;
}

/* P producers running `produce`, W workers; the clock stops when the
 * workers have drained the queue after the producers end. */
static struct outcome run_producers(int producers, int workers, void *(*produce)(void *),
                                    long adds_each)
{
    struct run r = {0};
    kcr_workqueue_new(NULL, &r.q);
    pthread_t p[16], w[16];
    double t0 = bench_now_s();
    for (int i = 0; i < workers; i++)
        pthread_create(&w[i], NULL, worker, &r);
    for (int i = 0; i < producers; i++)
        pthread_create(&p[i], NULL, produce, &r);
    for (int i = 0; i < producers; i++)
        pthread_join(p[i], NULL);
    kcr_workqueue_shutdown(r.q); /* workers drain what is queued, then stop */
    for (int i = 0; i < workers; i++)
        pthread_join(w[i], NULL);
    double secs = bench_now_s() - t0;
    kcr_workqueue_free(r.q);
    long adds = producers * adds_each;
    return (struct outcome){adds / secs, adds, atomic_load(&r.processed), 0};
}

static struct outcome add_after(void)
{
    struct run r = {0};
    kcr_workqueue_new(NULL, &r.q);
    pthread_t w[DELAY_WORKERS];
    uint32_t seed = 12345;
    double t0 = bench_now_s();
    for (int i = 0; i < DELAY_WORKERS; i++)
        pthread_create(&w[i], NULL, worker, &r);
    for (int i = 0; i < DELAYED_KEYS; i++) {
        seed = seed * 1664525u + 1013904223u;
        kcr_workqueue_add(r.q, bench_names[i],
                          &(kcr_workqueue_add_options){.delay_ms = (int64_t)((seed >> 8) % 3)});
    }
    while (atomic_load(&r.processed) < DELAYED_KEYS) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    double secs = bench_now_s() - t0;
    kcr_workqueue_shutdown(r.q);
    for (int i = 0; i < DELAY_WORKERS; i++)
        pthread_join(w[i], NULL);
    long delivered = atomic_load(&r.processed);
    kcr_workqueue_free(r.q);
    return (struct outcome){DELAYED_KEYS / secs, DELAYED_KEYS, delivered, 0};
}

static void print(const char *name, struct outcome o)
{
    if (strncmp(name, "drain_", 6) == 0)
        printf("%s %.6f %ld %ld %.6f\n", name, o.value, o.adds, o.delivered, o.adds_s);
    else
        printf("%s %.0f %ld %ld\n", name, o.value, o.adds, o.delivered);
    fflush(stdout);
}

static bool wanted(int argc, char **argv, const char *name)
{
    if (argc < 2)
        return true;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return true;
    return false;
}

int main(int argc, char **argv)
{
    bench_names = malloc(sizeof *bench_names * DELAYED_KEYS);
    for (int i = 0; i < DELAYED_KEYS; i++)
        snprintf(bench_names[i], sizeof bench_names[i], "k%d", i);
    static const struct {
        const char *name;
        int p, w;
    } cycles[] = {{"cycle_1p1w", 1, 1}, {"cycle_1p4w", 1, 4}, {"cycle_4p4w", 4, 4}};
    for (size_t i = 0; i < sizeof cycles / sizeof cycles[0]; i++)
        if (wanted(argc, argv, cycles[i].name))
            print(cycles[i].name,
                  run_producers(cycles[i].p, cycles[i].w, producer, (long)ROUNDS * 2 * KEYS));
    if (wanted(argc, argv, "add_after"))
        print("add_after", add_after());
    if (wanted(argc, argv, "priority_1p2w"))
        print("priority_1p2w",
              run_producers(1, PRIO_WORKERS, priority_producer, (long)PRIO_ROUNDS * 2 * KEYS));
    static const struct {
        int p, w;
    } shapes[] = {{1, 1}, {1, 4}, {4, 1}, {4, 4}};
    const char *env = getenv("KCR_WQ_WORK_NS");
    long work_ns = env && *env ? atol(env) : DRAIN_WORK_NS;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "drain_%dp%dw", shapes[i].p, shapes[i].w);
        if (wanted(argc, argv, name))
            print(name, bench_drain(shapes[i].p, shapes[i].w, work_ns));
        snprintf(name, sizeof name, "throughput_%dp%dw", shapes[i].p, shapes[i].w);
        if (wanted(argc, argv, name))
            print(name, bench_throughput(shapes[i].p, shapes[i].w));
    }
    free(bench_names);
    return 0;
}
