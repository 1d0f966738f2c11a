/* The work a queue delivers, C side (the twin is clientgo/delivered.go; both
 * follow the same steps, so read them side by side):
 *
 *   drain_PpWw       P producers offer DRAIN_ADDS adds in all over
 *                    DRAIN_KEYS keys (producer p walks k0..k9999 round and
 *                    round, starting at key p * KEYS / P), while W workers
 *                    get a key, do fixed busy work (work_ns, the same loop
 *                    on both sides, each calibrated to that duration at
 *                    start) and call done. Value: seconds from the first
 *                    add until every key's last add has been processed and
 *                    the queue is empty; delivered: the reconciles run;
 *                    also the seconds until the last add returned.
 *                    Checked: a reconcile covers a key's last add when it
 *                    reads, after get, that every add of the key has been
 *                    offered (per-producer counters the producers bump
 *                    before each add); every key must be covered.
 *   throughput_PpWw  P producers keep the queue holding distinct keys
 *                    (each adds its own share of the 100,000 names, never
 *                    more than TP_BACKLOG ahead of the workers), W workers
 *                    loop get -> done with no work. Value: gets per second
 *                    over a TP_WINDOW_MS window after TP_WARMUP_MS. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench.h"
#include "kcr/workqueue.h"

enum { DRAIN_KEYS = 10000, DRAIN_ADDS = 1000000, MAX_THREADS = 4 };
enum { TP_BACKLOG = 1024, TP_CHECK = 64, TP_WARMUP_MS = 50, TP_WINDOW_MS = 500 };

/* ---- the busy work ------------------------------------------------------ */

/* A dependent multiply-add chain: each step waits for the last, so the
 * compiler cannot shorten it and the CPU cannot overlap it; clientgo's
 * busy() is the same loop. */
static uint64_t busy(uint64_t x, long iters)
{
    for (long i = 0; i < iters; i++)
        x = x * 6364136223846793005u + 1442695040888963407u;
    return x;
}

static volatile uint64_t busy_seed = 1;

/* Iterations of busy() that take `work_ns`: the fastest of 30 timed runs of
 * 100,000 (the fastest is the one nothing interrupted). */
static long calibrate(long work_ns)
{
    enum { TRIALS = 30, ITERS = 100000 };
    double best = 1e9;
    uint64_t x = busy_seed;
    for (int t = 0; t < TRIALS; t++) {
        double t0 = bench_now_s();
        x = busy(x, ITERS);
        double dt = bench_now_s() - t0;
        if (dt < best)
            best = dt;
    }
    busy_seed = x;
    long iters = (long)((double)work_ns / (best * 1e9 / ITERS) + 0.5);
    fprintf(stderr, "bench_workqueue: busy work %ld ns = %ld iterations (%.3f ns each)\n",
            work_ns, iters, best * 1e9 / ITERS);
    return iters;
}

/* The key index of "k<digits>". */
static int key_index(const char *key)
{
    int i = 0;
    for (const char *c = key + 1; *c; c++)
        i = i * 10 + (*c - '0');
    return i;
}

/* ---- drain ------------------------------------------------------------- */

/* A counter on its own cache line. */
struct padded {
    _Alignas(64) atomic_long n;
};

struct drain {
    kcr_workqueue *q;
    int producers;
    long iters;
    /* offered[p][k]: adds of key k producer p has made or is about to make
     * (written by p only, read by workers after get). */
    atomic_int (*offered)[DRAIN_KEYS];
    bool covered[DRAIN_KEYS]; /* a reconcile saw all of the key's adds */
    atomic_long remaining;    /* keys not covered yet */
    sem_t all_covered;        /* posted when remaining reaches 0 */
    struct padded reconciles[MAX_THREADS];
    struct padded last_ns[MAX_THREADS]; /* when each worker finished its last key */
    struct padded added_ns[MAX_THREADS]; /* when each producer's last add returned */
    struct padded sink[MAX_THREADS];
};

struct drain_thread {
    struct drain *d;
    int id;
};

static long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static void *drain_producer(void *arg)
{
    struct drain_thread *t = arg;
    struct drain *d = t->d;
    atomic_int *mine = d->offered[t->id];
    long each = DRAIN_ADDS / d->producers;
    int k = t->id * (DRAIN_KEYS / d->producers);
    for (long j = 0; j < each; j++) {
        /* Relaxed: a plain store, like the twin's; the add publishes it. */
        atomic_store_explicit(&mine[k], atomic_load_explicit(&mine[k], memory_order_relaxed) + 1,
                              memory_order_relaxed);
        kcr_workqueue_add(d->q, bench_names[k], NULL);
        if (++k == DRAIN_KEYS)
            k = 0;
    }
    atomic_store(&d->added_ns[t->id].n, now_ns());
    return NULL;
}

static void *drain_worker(void *arg)
{
    struct drain_thread *t = arg;
    struct drain *d = t->d;
    const int expected = DRAIN_ADDS / DRAIN_KEYS;
    uint64_t x = busy_seed;
    long n = 0;
    const char *key;
    while (kcr_workqueue_get(d->q, &key) == KCR_OK) {
        int k = key_index(key);
        int seen = 0;
        for (int p = 0; p < d->producers; p++)
            seen += atomic_load_explicit(&d->offered[p][k], memory_order_relaxed);
        if (seen == expected && !d->covered[k]) {
            d->covered[k] = true;
            if (atomic_fetch_sub(&d->remaining, 1) == 1)
                sem_post(&d->all_covered);
        }
        x = busy(x, d->iters);
        kcr_workqueue_done(d->q, key);
        /* seq_cst, as the twin's Store (the same xchg on x86). */
        atomic_store(&d->reconciles[t->id].n, ++n);
        atomic_store(&d->last_ns[t->id].n, now_ns());
    }
    atomic_store_explicit(&d->sink[t->id].n, (long)x, memory_order_relaxed);
    return NULL;
}

struct outcome bench_drain(int producers, int workers, long work_ns)
{
    struct drain *d = calloc(1, sizeof *d);
    d->offered = calloc((size_t)producers, sizeof *d->offered);
    if (!d || !d->offered || kcr_workqueue_new(NULL, &d->q) != KCR_OK) {
        fprintf(stderr, "bench_workqueue: out of memory\n");
        exit(1);
    }
    d->producers = producers;
    d->iters = calibrate(work_ns);
    atomic_store(&d->remaining, DRAIN_KEYS);
    sem_init(&d->all_covered, 0, 0);
    struct drain_thread pt[MAX_THREADS], wt[MAX_THREADS];
    pthread_t p[MAX_THREADS], w[MAX_THREADS];
    for (int i = 0; i < workers; i++) {
        wt[i] = (struct drain_thread){d, i};
        pthread_create(&w[i], NULL, drain_worker, &wt[i]);
    }
    long t0 = now_ns();
    for (int i = 0; i < producers; i++) {
        pt[i] = (struct drain_thread){d, i};
        pthread_create(&p[i], NULL, drain_producer, &pt[i]);
    }
    for (int i = 0; i < producers; i++)
        pthread_join(p[i], NULL);
    /* A queue that lost a key's last add never gets here: give up then. */
    struct timespec limit;
    clock_gettime(CLOCK_REALTIME, &limit);
    limit.tv_sec += 120;
    int rc;
    while ((rc = sem_timedwait(&d->all_covered, &limit)) != 0 && errno == EINTR)
        ;
    if (rc != 0) {
        fprintf(stderr, "bench_workqueue: drain: %ld keys' last add not processed after 120 s\n",
                atomic_load(&d->remaining));
        exit(1);
    }
    /* Every key is covered; a key re-added while its covering reconcile
     * ran comes back once more, and shutdown lets the workers finish it. */
    kcr_workqueue_shutdown(d->q);
    long end = t0, adds_end = t0, reconciles = 0;
    for (int i = 0; i < producers; i++)
        if (atomic_load(&d->added_ns[i].n) > adds_end)
            adds_end = atomic_load(&d->added_ns[i].n);
    for (int i = 0; i < workers; i++) {
        pthread_join(w[i], NULL);
        long last = atomic_load(&d->last_ns[i].n);
        if (last > end)
            end = last;
        reconciles += atomic_load(&d->reconciles[i].n);
    }
    kcr_workqueue_free(d->q);
    sem_destroy(&d->all_covered);
    free(d->offered);
    free(d);
    return (struct outcome){(double)(end - t0) / 1e9, DRAIN_ADDS, reconciles,
                            (double)(adds_end - t0) / 1e9};
}

/* ---- worker-bound throughput -------------------------------------------- */

struct tp {
    kcr_workqueue *q;
    int producers, workers;
    struct padded added[MAX_THREADS], taken[MAX_THREADS];
    atomic_bool stop;
};

struct tp_thread {
    struct tp *r;
    int id;
};

/* Adds offered minus keys taken, summed over every thread's counter. */
static long backlog(struct tp *r)
{
    long n = 0;
    for (int i = 0; i < r->producers; i++)
        n += atomic_load_explicit(&r->added[i].n, memory_order_relaxed);
    for (int i = 0; i < r->workers; i++)
        n -= atomic_load_explicit(&r->taken[i].n, memory_order_relaxed);
    return n;
}

static void *tp_producer(void *arg)
{
    struct tp_thread *t = arg;
    struct tp *r = t->r;
    int share = BENCH_NAMES / r->producers, first = t->id * share;
    long n = 0;
    while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
        while (backlog(r) >= TP_BACKLOG && !atomic_load_explicit(&r->stop, memory_order_relaxed))
            sched_yield();
        for (int i = 0; i < TP_CHECK; i++) {
            kcr_workqueue_add(r->q, bench_names[first + n % share], NULL);
            atomic_store(&r->added[t->id].n, ++n); /* seq_cst, as the twin's Store */
        }
    }
    return NULL;
}

static void *tp_worker(void *arg)
{
    struct tp_thread *t = arg;
    struct tp *r = t->r;
    long n = 0;
    const char *key;
    while (kcr_workqueue_get(r->q, &key) == KCR_OK) {
        kcr_workqueue_done(r->q, key);
        atomic_store(&r->taken[t->id].n, ++n); /* seq_cst, as the twin's Store */
    }
    return NULL;
}

static long sum(struct padded *c, int n)
{
    long s = 0;
    for (int i = 0; i < n; i++)
        s += atomic_load_explicit(&c[i].n, memory_order_relaxed);
    return s;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

struct outcome bench_throughput(int producers, int workers)
{
    struct tp *r = calloc(1, sizeof *r);
    if (!r || kcr_workqueue_new(NULL, &r->q) != KCR_OK) {
        fprintf(stderr, "bench_workqueue: out of memory\n");
        exit(1);
    }
    r->producers = producers;
    r->workers = workers;
    struct tp_thread pt[MAX_THREADS], wt[MAX_THREADS];
    pthread_t p[MAX_THREADS], w[MAX_THREADS];
    for (int i = 0; i < producers; i++) {
        pt[i] = (struct tp_thread){r, i};
        pthread_create(&p[i], NULL, tp_producer, &pt[i]);
    }
    for (int i = 0; i < workers; i++) {
        wt[i] = (struct tp_thread){r, i};
        pthread_create(&w[i], NULL, tp_worker, &wt[i]);
    }
    sleep_ms(TP_WARMUP_MS);
    double t0 = bench_now_s();
    long added0 = sum(r->added, producers), taken0 = sum(r->taken, workers);
    sleep_ms(TP_WINDOW_MS);
    double t1 = bench_now_s();
    long added = sum(r->added, producers) - added0, taken = sum(r->taken, workers) - taken0;
    atomic_store(&r->stop, true);
    for (int i = 0; i < producers; i++)
        pthread_join(p[i], NULL);
    kcr_workqueue_shutdown(r->q);
    for (int i = 0; i < workers; i++)
        pthread_join(w[i], NULL);
    kcr_workqueue_free(r->q);
    free(r);
    return (struct outcome){(double)taken / (t1 - t0), added, taken, 0};
}
