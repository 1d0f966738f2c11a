/* Shared by the C side of the workqueue benchmark: bench_workqueue.c (main,
 * the cycle, add_after and priority scenarios) and delivered.c (drain and
 * worker-bound throughput). Single-threaded setup; see each function for
 * what it shares between threads. */
#ifndef KCR_BENCH_WORKQUEUE_H
#define KCR_BENCH_WORKQUEUE_H

/* Key names "k0".."k99999", made once by main before any scenario runs and
 * read-only afterwards (any thread may read them). */
enum { BENCH_NAMES = 100000 };
extern char (*bench_names)[16];

/* CLOCK_MONOTONIC in seconds. Thread-safe. */
double bench_now_s(void);

/* What one scenario measured, printed as "<scenario> <value> <adds>
 * <delivered>": value is ops/s, or seconds for the drain scenarios, which
 * add <adds_s>. */
struct outcome {
    double value;
    long adds;      /* adds offered */
    long delivered; /* keys handed to workers (reconciles) */
    double adds_s;  /* drain: seconds from the first add until the last one returned */
};

/* drain_PpWw (delivered.c): `producers` threads offer DRAIN_ADDS adds over
 * DRAIN_KEYS keys, `workers` threads do the calibrated busy work per key;
 * value = seconds from the first add until every key's last add was
 * processed and the queue was empty. `work_ns` is the busy work per key.
 * Exits the process if a key's last add was not processed. */
struct outcome bench_drain(int producers, int workers, long work_ns);

/* throughput_PpWw (delivered.c): `producers` threads keep the queue holding
 * distinct keys, `workers` threads loop get -> done; value = gets per
 * second over a fixed window. */
struct outcome bench_throughput(int producers, int workers);

#endif
