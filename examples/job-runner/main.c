/* job-runner: a bounded pool of worker threads draining keyed jobs from a
 * rate-limited kcr workqueue.
 *
 *   job-runner [--workers N] [--jobs N] [--fail-rate P] [--duration S]
 *
 * A feeder thread queues every job once, then keeps re-queueing random jobs
 * (as informer events would). A worker "runs" a job for 1-4 ms; it fails
 * with probability P and is then retried with per-key exponential backoff
 * (add_rate_limited), up to MAX_RETRIES times before it counts as failed.
 * The queue guarantees that no job runs on two workers at once; each job
 * carries an in-flight flag and the program aborts if that is ever broken.
 * One progress line per second; Ctrl-C / SIGTERM (or the end of --duration)
 * stops the feeder and shuts the queue down with drain: jobs in flight
 * finish, then the workers exit. Signals are taken by sigtimedwait in the
 * main thread (blocked everywhere else), so no code runs in a handler.
 *
 * KCR_LOG=error|warn|info|debug|trace logs kcr's records to stderr. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kcr/kcr.h>

#define MAX_RETRIES 5

struct job {
    char key[32];
    atomic_int in_flight;
    int attempts_left_to_fail; /* touched only by the worker holding the key */
};

static struct job *jobs;
static int njobs = 1000;
static int nworkers = 4;
static double fail_rate = 0.2;
static double duration = 10;
static kcr_workqueue *queue;
static atomic_bool stopping;
static atomic_long n_done, n_retried, n_failed;

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static double rand01(uint64_t *s)
{
    return (double)(next_rand(s) >> 11) / 9007199254740992.0;
}

static void sleep_ns(long ns)
{
    struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

static struct job *job_of(const char *key)
{
    return &jobs[atoi(key + 4)]; /* "job-NNNNN" */
}

static void *worker(void *arg)
{
    uint64_t seed = 0x9e3779b97f4a7c15ULL * ((uintptr_t)arg + 1);
    for (;;) {
        const char *key;
        kcr_err err = kcr_workqueue_get(queue, &key);
        if (err == KCR_ERR_SHUTDOWN)
            return NULL;
        if (err != KCR_OK) {
            fprintf(stderr, "job-runner: get: %s\n", kcr_strerror(err));
            return NULL;
        }
        struct job *j = job_of(key);
        if (atomic_exchange(&j->in_flight, 1) != 0) {
            fprintf(stderr, "job-runner: BUG: %s runs on two workers at once\n", key);
            abort();
        }
        /* A fresh attempt of a job decides how often it will fail. */
        if (kcr_workqueue_num_requeues(queue, key) == 0)
            j->attempts_left_to_fail = rand01(&seed) < fail_rate ? 1 + (int)(next_rand(&seed) % 7) : 0;
        sleep_ns(1000000L + (long)(next_rand(&seed) % 3000000L)); /* the work: 1-4 ms */
        bool failed = j->attempts_left_to_fail > 0;
        if (failed)
            j->attempts_left_to_fail--;
        atomic_store(&j->in_flight, 0);

        if (!failed) {
            kcr_workqueue_forget(queue, key);
            atomic_fetch_add(&n_done, 1);
        } else if (kcr_workqueue_num_requeues(queue, key) < MAX_RETRIES) {
            kcr_workqueue_add_rate_limited(queue, key); /* dropped after shutdown */
            atomic_fetch_add(&n_retried, 1);
        } else {
            kcr_workqueue_forget(queue, key);
            atomic_fetch_add(&n_failed, 1);
        }
        kcr_workqueue_done(queue, key);
    }
}

static void *feeder(void *arg)
{
    uint64_t seed = 42;
    for (int i = 0; i < njobs && !atomic_load(&stopping); i++)
        kcr_workqueue_add(queue, jobs[i].key, NULL);
    while (!atomic_load(&stopping)) {
        /* A few "events" every 10 ms re-queue random jobs. */
        for (int i = 0; i < 8; i++)
            kcr_workqueue_add(queue, jobs[next_rand(&seed) % (uint64_t)njobs].key, NULL);
        sleep_ns(10000000L);
    }
    return NULL;
}

static void usage(FILE *out)
{
    fprintf(out, "usage: job-runner [--workers N] [--jobs N] [--fail-rate P] [--duration S]\n"
                 "  --workers N     worker threads (default 4)\n"
                 "  --jobs N        distinct job keys (default 1000)\n"
                 "  --fail-rate P   probability that a job fails a few times (default 0.2)\n"
                 "  --duration S    seconds before a clean stop (default 10; 0: until a signal)\n");
}

static void parse(int argc, char **argv)
{
    static const struct option opts[] = {{"workers", required_argument, NULL, 'w'},
                                         {"jobs", required_argument, NULL, 'j'},
                                         {"fail-rate", required_argument, NULL, 'f'},
                                         {"duration", required_argument, NULL, 'd'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "w:j:f:d:h", opts, NULL)) != -1) {
        switch (c) {
        case 'w': nworkers = atoi(optarg); break;
        case 'j': njobs = atoi(optarg); break;
        case 'f': fail_rate = atof(optarg); break;
        case 'd': duration = atof(optarg); break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); exit(2);
        }
    }
    if (nworkers < 1 || nworkers > 1024 || njobs < 1 || njobs > 99999 || fail_rate < 0 ||
        fail_rate > 1 || duration < 0) {
        usage(stderr);
        exit(2);
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    parse(argc, argv);
    kcr_log_from_env(); /* KCR_LOG=trace: kcr's log on stderr */
    /* Block the stop signals in every thread; main takes them synchronously. */
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);

    jobs = calloc((size_t)njobs, sizeof *jobs);
    for (int i = 0; i < njobs; i++)
        snprintf(jobs[i].key, sizeof jobs[i].key, "job-%05d", i);

    /* Per-key backoff 5 ms .. 2 s, and at most 50 retries/s overall. */
    kcr_rate_limiter_exponential_options backoff = {.base_delay_ms = 5, .max_delay_ms = 2000};
    kcr_rate_limiter_bucket_options overall = {.qps = 50, .burst = 100};
    kcr_rate_limiter *parts[2] = {NULL, NULL};
    kcr_workqueue_options opts = {.name = "jobs", .capacity_hint = (size_t)njobs};
    kcr_err err = kcr_rate_limiter_exponential_new(&backoff, &parts[0]);
    if (err == KCR_OK && (err = kcr_rate_limiter_bucket_new(&overall, &parts[1])) != KCR_OK)
        kcr_rate_limiter_free(parts[0]);
    if (err == KCR_OK) /* max_of takes the parts, the queue takes the limiter */
        err = kcr_rate_limiter_max_of_new(parts, 2, &opts.limiter);
    if (err == KCR_OK)
        err = kcr_workqueue_new(&opts, &queue);
    if (err != KCR_OK) {
        fprintf(stderr, "job-runner: %s\n", kcr_last_error());
        return 1;
    }

    pthread_t feed, *workers = calloc((size_t)nworkers, sizeof *workers);
    for (int i = 0; i < nworkers; i++)
        pthread_create(&workers[i], NULL, worker, (void *)(uintptr_t)i);
    pthread_create(&feed, NULL, feeder, NULL);
    printf("job-runner: %d workers, %d jobs, fail rate %.2f, %s\n", nworkers, njobs, fail_rate,
           duration > 0 ? "timed run" : "until Ctrl-C");
    fflush(stdout);

    double start = now_s(), last = start;
    long prev_done = 0, prev_retried = 0, prev_failed = 0;
    const char *why = "duration reached";
    for (;;) {
        struct timespec tick = {1, 0};
        int sig = sigtimedwait(&stop_signals, NULL, &tick);
        if (sig == SIGINT || sig == SIGTERM) {
            why = sig == SIGINT ? "SIGINT" : "SIGTERM";
            break;
        }
        double t = now_s();
        if (t - last >= 0.999) {
            long d = atomic_load(&n_done), r = atomic_load(&n_retried), f = atomic_load(&n_failed);
            kcr_workqueue_stats st;
            kcr_workqueue_get_stats(queue, &st);
            double dt = t - last;
            printf("t=%4.0fs  done %6.0f/s  retried %5.0f/s  failed %4.0f/s  in-flight %3lld  "
                   "queued %4lld  backing off %4lld\n",
                   t - start, (double)(d - prev_done) / dt, (double)(r - prev_retried) / dt,
                   (double)(f - prev_failed) / dt, (long long)st.processing,
                   (long long)st.queued, (long long)st.waiting);
            fflush(stdout);
            prev_done = d, prev_retried = r, prev_failed = f, last = t;
        }
        if (duration > 0 && t - start >= duration)
            break;
    }

    printf("job-runner: stopping (%s): draining jobs in flight\n", why);
    atomic_store(&stopping, true);
    pthread_join(feed, NULL);
    kcr_workqueue_shutdown_with_drain(queue);
    for (int i = 0; i < nworkers; i++)
        pthread_join(workers[i], NULL);
    kcr_workqueue_stats st;
    kcr_workqueue_get_stats(queue, &st);
    printf("job-runner: %ld done, %ld retries, %ld gave up after %d retries; "
           "%llu adds; %lld left queued; no job ever ran twice at once\n",
           atomic_load(&n_done), atomic_load(&n_retried), atomic_load(&n_failed), MAX_RETRIES,
           (unsigned long long)st.adds_total, (long long)st.queued);
    kcr_workqueue_free(queue);
    free(workers);
    free(jobs);
    return 0;
}
