/* The worker pool and the hand-over between the loop and the workers.
 *
 * The loop queues a job and arms its deadline; a worker runs the handler and
 * posts the job to the done list, waking the loop (event_active is
 * thread-safe). The loop answers whichever comes first, the result or the
 * deadline (the failure policy); the other is dropped. A slow handler thus
 * holds one worker, never the loop, and never the answer past its deadline. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "core/error.h"
#include "core/log.h"
#include "webhook/webhook_internal.h"

void kcr__wh_job_unref(struct kcr__wh_job *job)
{
    if (!job || atomic_fetch_sub(&job->refs, 1) != 1)
        return;
    if (job->deadline)
        event_free(job->deadline);
    free(job->body);
    free(job->reply);
    free(job);
}

void kcr__wh_job_text(struct kcr__wh_job *job, int status, const char *why)
{
    job->status = status;
    if (asprintf(&job->reply, "%s\n", why) < 0)
        job->reply = NULL;
    job->reply_len = job->reply ? strlen(job->reply) : 0;
}

void kcr__wh_job_answer(struct kcr__wh_job *job, int status, const char *body, size_t len)
{
    kcr_webhook_server *s = job->s;
    if (!job->req)
        return;
    struct evbuffer *b = evbuffer_new();
    if (b)
        evbuffer_add(b, body, len);
    bool json = len && body[0] == '{';
    evhttp_add_header(evhttp_request_get_output_headers(job->req), "Content-Type",
                      json ? "application/json" : "text/plain");
    evhttp_send_reply(job->req, status, NULL, b);
    if (b)
        evbuffer_free(b);
    job->req = NULL;
    atomic_fetch_add(&s->n_requests, 1);
    kcr__wh_metrics_answered(s, job->route, status, job->start_ns);
    if (job->conn) {
        job->conn->job = NULL;
        kcr__wh_conn_arm(job->conn, s->idle_timeout_ms + s->read_timeout_ms);
        job->conn = NULL;
    }
    if (job->deadline)
        evtimer_del(job->deadline);
    /* off the pending list; the loop's reference goes */
    if (job->prev)
        job->prev->next = job->next;
    else
        s->pending = job->next;
    if (job->next)
        job->next->prev = job->prev;
    kcr__wh_job_unref(job);
}

/* Loop: the deadline passed before the handler answered. */
static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    struct kcr__wh_job *job = arg;
    int status = 500;
    char *reply = NULL;
    size_t len = 0;
    atomic_fetch_add(&job->s->n_timeouts, 1);
    kcr__log(KCR_LOG_WARN, "webhook", "handler %s overran its %lld ms deadline: answering by %s",
             job->route->path, (long long)job->route->timeout_ms,
             job->route->policy == KCR_WEBHOOK_IGNORE ? "failurePolicy Ignore (allowed)"
                                                      : "failurePolicy Fail (denied)");
    if (job->route->kind == KCR__WH_ADMISSION)
        kcr__wh_admission_timeout(job, &status, &reply, &len);
    else
        kcr__wh_conversion_timeout(job, &status, &reply, &len);
    if (reply)
        kcr__wh_job_answer(job, status, reply, len);
    else
        kcr__wh_job_answer(job, 503, "webhook handler timed out\n", 26);
    free(reply);
}

void kcr__wh_pool_submit(kcr_webhook_server *s, struct kcr__wh_job *job)
{
    job->next = s->pending;
    if (s->pending)
        s->pending->prev = job;
    s->pending = job;
    if (job->route->in_flight)
        kcr_metric_add(job->route->in_flight, 1);
    job->deadline = evtimer_new(s->base, on_deadline, job);
    if (job->deadline) {
        struct timeval tv = {.tv_sec = job->route->timeout_ms / 1000,
                             .tv_usec = (job->route->timeout_ms % 1000) * 1000};
        evtimer_add(job->deadline, &tv);
    }
    atomic_fetch_add(&job->refs, 1); /* the worker's */
    pthread_mutex_lock(&s->mu);
    job->qnext = NULL;
    if (s->queue_tail)
        s->queue_tail->qnext = job;
    else
        s->queue_head = job;
    s->queue_tail = job;
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->mu);
}

void kcr__wh_pool_done_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    kcr_webhook_server *s = arg;
    pthread_mutex_lock(&s->mu);
    struct kcr__wh_job *list = s->done_list;
    s->done_list = NULL;
    pthread_mutex_unlock(&s->mu);
    while (list) {
        struct kcr__wh_job *job = list;
        list = job->qnext;
        if (job->req)
            kcr__wh_job_answer(job, job->status, job->reply ? job->reply : "", job->reply_len);
        kcr__wh_job_unref(job); /* the worker's */
    }
}

static void *worker_main(void *arg)
{
    kcr_webhook_server *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->queue_head && !s->workers_quit)
            pthread_cond_wait(&s->cond, &s->mu);
        struct kcr__wh_job *job = s->queue_head;
        if (!job) {
            pthread_mutex_unlock(&s->mu);
            return NULL;
        }
        s->queue_head = job->qnext;
        if (!s->queue_head)
            s->queue_tail = NULL;
        pthread_mutex_unlock(&s->mu);
        if (s->observe)
            s->observe(job->route->path, job->body, job->len, s->observe_user_data);
        if (job->route->kind == KCR__WH_ADMISSION)
            kcr__wh_admission_run(job);
        else
            kcr__wh_conversion_run(job);
        if (job->route->in_flight)
            kcr_metric_add(job->route->in_flight, -1);
        pthread_mutex_lock(&s->mu);
        job->qnext = s->done_list;
        s->done_list = job;
        pthread_mutex_unlock(&s->mu);
        event_active(s->done_ev, 0, 0); /* after stop: never run, drained by stop */
    }
}

kcr_err kcr__wh_pool_start(kcr_webhook_server *s)
{
    s->workers = calloc((size_t)s->n_workers, sizeof *s->workers);
    if (!s->workers)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    for (int i = 0; i < s->n_workers; i++) {
        if (pthread_create(&s->workers[i], NULL, worker_main, s) != 0) {
            s->n_workers = i;
            return kcr__fail(KCR_ERR_NOMEM, "webhook server: cannot start worker %d", i);
        }
    }
    return KCR_OK;
}

/* Joins the workers: they finish the queue first (its jobs were answered
 * 503 by the stop, so their results are dropped). Idempotent. */
void kcr__wh_pool_stop(kcr_webhook_server *s)
{
    if (!s->workers)
        return;
    pthread_mutex_lock(&s->mu);
    s->workers_quit = true;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->n_workers; i++)
        pthread_join(s->workers[i], NULL);
    free(s->workers);
    s->workers = NULL;
}
