/* The webhook server's hand-over of jobs from a loop to the workers
 * (webhook/pool.c), driven directly: this thread plays the loop, submitting
 * jobs and running its event base; the workers are real threads. A job has
 * no HTTP request, so nothing is answered: the server's observer hook, which
 * runs on the worker before the handler, shows which jobs a worker took. */
#include <criterion/criterion.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "webhook/webhook_internal.h"

static pthread_mutex_t seen_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t seen_cond = PTHREAD_COND_INITIALIZER;
static int fast_seen, blocked_now;
static bool release_block;

/* Worker: /block holds its worker until released; /fast is counted. */
static void observe(const char *path, const char *body, size_t len, void *ud)
{
    (void)body, (void)len, (void)ud;
    pthread_mutex_lock(&seen_mu);
    if (strcmp(path, "/block") == 0) {
        blocked_now++;
        pthread_cond_broadcast(&seen_cond);
        while (!release_block)
            pthread_cond_wait(&seen_cond, &seen_mu);
        blocked_now--;
    } else {
        fast_seen++;
    }
    pthread_mutex_unlock(&seen_mu);
}

static kcr_err allow(const kcr_admission_request *req, kcr_admission_response *resp, void *ud)
{
    (void)req, (void)resp, (void)ud;
    return KCR_OK;
}

static kcr_webhook_server server;
static struct kcr__wh_loop loop;
static struct kcr__wh_route block_route = {.path = "/block"}, fast_route = {.path = "/fast"};

static void start(void)
{
    evthread_use_pthreads();
    server.observe = observe;
    server.n_workers = 2;
    pthread_mutex_init(&server.mu, NULL);
    loop.s = &server;
    pthread_mutex_init(&loop.done_mu, NULL);
    loop.base = event_base_new();
    loop.done_ev = event_new(loop.base, -1, 0, kcr__wh_pool_done_cb, &loop);
    loop.guard_ev = evtimer_new(loop.base, kcr__wh_pool_guard_cb, &loop);
    cr_assert(loop.base && loop.done_ev && loop.guard_ev);
    struct kcr__wh_route *routes[] = {&block_route, &fast_route};
    for (size_t i = 0; i < 2; i++) {
        routes[i]->kind = KCR__WH_ADMISSION;
        routes[i]->type = KCR_ADMISSION_VALIDATING;
        routes[i]->fn = allow;
        routes[i]->timeout_ms = 10000;
    }
    cr_assert_eq(kcr__wh_pool_start(&server), KCR_OK);
    /* both workers asleep on the idle stack */
    for (int i = 0; i < 1000; i++) {
        pthread_mutex_lock(&server.mu);
        int idle = 0;
        for (struct kcr__wh_worker *w = server.idle; w; w = w->next_idle)
            idle++;
        pthread_mutex_unlock(&server.mu);
        if (idle == 2)
            return;
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    }
    cr_assert_fail("the workers never went to sleep");
}

static void stop(void)
{
    pthread_mutex_lock(&seen_mu);
    release_block = true;
    pthread_cond_broadcast(&seen_cond);
    pthread_mutex_unlock(&seen_mu);
    kcr__wh_pool_stop(&server);
    kcr__wh_pool_done_cb(-1, 0, &loop); /* the workers' references */
    while (loop.pending) {              /* the loop's */
        struct kcr__wh_job *job = loop.pending;
        loop.pending = job->next;
        evtimer_del(job->deadline);
        kcr__wh_job_unref(job);
    }
    event_free(loop.guard_ev);
    event_free(loop.done_ev);
    event_base_free(loop.base);
    pthread_mutex_destroy(&loop.done_mu);
    pthread_mutex_destroy(&server.mu);
}

static void submit(const struct kcr__wh_route *route)
{
    struct kcr__wh_job *job = kcr__wh_job_new(2);
    cr_assert_not_null(job);
    memcpy(job->body, "{}", 2);
    job->s = &server;
    job->loop = &loop;
    job->route = route;
    job->start_ns = kcr__wh_now_ns();
    kcr__wh_pool_submit(job);
}

/* Runs the loop until /fast was seen (true) or a second passed (false). */
static bool loop_until_fast_seen(void)
{
    int64_t until = kcr__wh_now_ns() + 1000000000;
    while (kcr__wh_now_ns() < until) {
        pthread_mutex_lock(&seen_mu);
        bool seen = fast_seen > 0;
        pthread_mutex_unlock(&seen_mu);
        if (seen)
            return true;
        struct timeval tick = {.tv_usec = 1000};
        event_base_loopexit(loop.base, &tick);
        event_base_dispatch(loop.base);
    }
    return false;
}

/* The second job is queued while the worker woken for the first is still on
 * its way, so the loop wakes nobody for it; that worker takes the first job
 * and blocks in it. The loop's guard timer must then wake the other worker
 * for the second job, which is handled while the first still blocks. */
Test(webhook_pool, a_job_queued_behind_a_worker_that_blocks_gets_another_worker,
     .init = start, .fini = stop, .timeout = 30)
{
    submit(&block_route);
    submit(&fast_route);
    cr_assert(loop_until_fast_seen(), "the second job waited for the blocked handler");
    pthread_mutex_lock(&seen_mu);
    cr_assert_eq(blocked_now, 1, "the first job's handler was not blocking meanwhile");
    pthread_mutex_unlock(&seen_mu);
}

/* Several jobs queued at once are all taken, by however many workers were
 * woken, while no handler blocks. */
Test(webhook_pool, jobs_queued_together_are_all_handled, .init = start, .fini = stop,
     .timeout = 30)
{
    for (int i = 0; i < 16; i++)
        submit(&fast_route);
    int64_t until = kcr__wh_now_ns() + 5000000000;
    int seen = 0;
    while (seen < 16 && kcr__wh_now_ns() < until) {
        struct timeval tick = {.tv_usec = 1000};
        event_base_loopexit(loop.base, &tick);
        event_base_dispatch(loop.base);
        pthread_mutex_lock(&seen_mu);
        seen = fast_seen;
        pthread_mutex_unlock(&seen_mu);
    }
    cr_assert_eq(seen, 16);
}
