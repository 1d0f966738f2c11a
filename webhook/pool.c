/* The worker pool and the hand-over between the loops and the workers.
 *
 * A loop arms a job's deadline and queues it. A context switch costs more
 * than most handlers, so workers are woken sparingly: the loop wakes the
 * worker that went to sleep last (the one whose caches are warmest) only
 * when no worker is already on its way to the queue, and a woken worker
 * takes job after job until the queue is empty. A job that finds a worker
 * coming but still waits HANDOFF_GUARD_US later (that worker is slow to be
 * scheduled, or now blocks in a handler) gets a worker of its own from the
 * loop's guard timer: while a worker sleeps, a slow handler holds up
 * another request no longer than that.
 *
 * A worker runs the handler and posts the job to its loop's done list,
 * waking that loop (event_active is thread-safe) unless a wake-up is
 * already on its way. The loop answers whichever comes first, the result or
 * the deadline (the failure policy); the other is dropped. A slow handler
 * thus holds one worker, never a loop, and never the answer past its
 * deadline. A run_on_loop path skips all of that: its loop runs the handler
 * and answers at once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>

#include "core/error.h"
#include "core/log.h"
#include "webhook/webhook_internal.h"

struct kcr__wh_job *kcr__wh_job_new(size_t len)
{
    size_t ev = event_get_struct_event_size();
    ev = (ev + _Alignof(max_align_t) - 1) / _Alignof(max_align_t) * _Alignof(max_align_t);
    struct kcr__wh_job *job = malloc(sizeof *job + ev + len + 1);
    if (!job)
        return NULL;
    memset(job, 0, sizeof *job);
    atomic_init(&job->refs, 1);
    job->body = (char *)job->storage + ev;
    job->body[len] = '\0';
    job->len = len;
    return job;
}

void kcr__wh_job_unref(struct kcr__wh_job *job)
{
    if (!job || atomic_fetch_sub(&job->refs, 1) != 1)
        return;
    free(job->reply);
    free(job); /* its deadline was deleted when the job was answered */
}

void kcr__wh_job_text(struct kcr__wh_job *job, int status, const char *why)
{
    job->status = status;
    if (asprintf(&job->reply, "%s\n", why) < 0)
        job->reply = NULL;
    job->reply_len = job->reply ? strlen(job->reply) : 0;
}

/* How long a queued job waits for the worker already coming before the
 * loop wakes another for it. */
#define HANDOFF_GUARD_US 1000

/* A TLS record costs a seal and a write of its own: an answer that fits one
 * is sent as one. */
#define ONE_RECORD 16384

/* Loop: writes the answer evhttp just queued on bev (len bytes at data, one
 * chain) to the socket now. Left to itself, the TLS bufferevent writes only
 * when epoll next reports the socket writable: after every other request the
 * loop read in the same pass has been handled, and at the price of turning
 * write interest on and off (two epoll_ctl a request). Written here, the
 * answer leaves as soon as it is computed. When the socket takes it all,
 * evhttp is told its write is done (deferred, as from libevent's own write:
 * evhttp then frees the request and reads the next). A write that cannot
 * finish is left to the bufferevent, which retries with the same bytes when
 * the socket is writable (its SSL accepts a moved buffer). */
static void write_now(struct bufferevent *bev, struct evbuffer *out, unsigned char *data,
                      size_t len)
{
    SSL *ssl = bufferevent_openssl_get_ssl(bev);
    if (!ssl)
        return;
    ERR_clear_error();
    int n = SSL_write(ssl, data, (int)len);
    if (n <= 0) {
        ERR_clear_error(); /* the bufferevent meets the condition again and handles it */
        return;
    }
    evbuffer_drain(out, (size_t)n);
    if (evbuffer_get_length(out) == 0)
        bufferevent_trigger(bev, EV_WRITE, BEV_TRIG_DEFER_CALLBACKS);
}

/* Loop: the Date header for this second, written once a second (evhttp
 * would format it for every answer). NULL off a loop thread: evhttp then
 * adds its own. */
static const char *date_header(void)
{
    static const char days[][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char months[][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    struct kcr__wh_loop *l = kcr__wh_this_loop;
    if (!l)
        return NULL;
    time_t now = time(NULL);
    if (l->date_sec != now) {
        struct tm tm;
        if (!gmtime_r(&now, &tm))
            return NULL;
        snprintf(l->date, sizeof l->date, "%s, %02d %s %d %02d:%02d:%02d GMT", days[tm.tm_wday],
                 tm.tm_mday, months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min,
                 tm.tm_sec);
        l->date_sec = now;
    }
    return l->date;
}

void kcr__wh_reply(struct evhttp_request *req, int status, const char *body, size_t len)
{
    /* the body straight into the request's output buffer, and the headers
     * evhttp would otherwise look for and format itself */
    evbuffer_add(evhttp_request_get_output_buffer(req), body, len);
    bool json = len && body[0] == '{';
    struct evkeyvalq *headers = evhttp_request_get_output_headers(req);
    evhttp_add_header(headers, "Content-Type", json ? "application/json" : "text/plain");
    char digits[24], *p = digits + sizeof digits - 1;
    *p = '\0';
    size_t n = len;
    do
        *--p = (char)('0' + n % 10);
    while ((n /= 10) != 0);
    evhttp_add_header(headers, "Content-Length", p);
    const char *date = date_header();
    if (date)
        evhttp_add_header(headers, "Date", date);
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
    struct evbuffer *out = bev ? bufferevent_get_output(bev) : NULL;
    bool alone = out && evbuffer_get_length(out) == 0; /* no earlier write pending */
    evhttp_send_reply(req, status, NULL, NULL); /* may free req */
    /* evhttp queued the head and the body as two chains, which would be
     * sealed as two records; one chain, one record */
    size_t queued = out ? evbuffer_get_length(out) : 0;
    unsigned char *data = queued && queued <= ONE_RECORD ? evbuffer_pullup(out, -1) : NULL;
    if (data && alone)
        write_now(bev, out, data, queued);
}

void kcr__wh_job_answer(struct kcr__wh_job *job, int status, const char *body, size_t len)
{
    kcr_webhook_server *s = job->s;
    struct kcr__wh_loop *l = job->loop;
    if (!job->req)
        return;
    /* counted before the answer leaves, so a client holding its answer
     * finds it in the metrics and the stats (as controller-runtime's
     * handler middleware counts before net/http flushes) */
    atomic_fetch_add(&s->n_requests, 1);
    kcr__wh_metrics_answered(s, job->route, status, job->start_ns);
    kcr__wh_reply(job->req, status, body, len);
    job->req = NULL;
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
        l->pending = job->next;
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

/* Worker or loop: the route's handler, after the observer. */
static void run_handler(struct kcr__wh_job *job)
{
    kcr_webhook_server *s = job->s;
    if (s->observe)
        s->observe(job->route->path, job->body, job->len, s->observe_user_data);
    if (job->route->kind == KCR__WH_ADMISSION)
        kcr__wh_admission_run(job);
    else
        kcr__wh_conversion_run(job);
}

/* The route's one field that changes after start (loops and workers see
 * routes as const). */
static atomic_bool *on_loop_flag(const struct kcr__wh_route *r)
{
    return &((struct kcr__wh_route *)r)->on_loop;
}

static int64_t cpu_ms(const struct rusage *ru)
{
    return (int64_t)(ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1000 +
           (ru->ru_utime.tv_usec + ru->ru_stime.tv_usec) / 1000;
}

/* Loop: a run_on_loop path's job (already on the pending list) handled and
 * answered here. A call past the budget sends the path to the workers if the
 * handler computed that long or blocked (the thread gave up the CPU: a
 * voluntary context switch); a loop merely preempted on a busy machine
 * keeps it. */
static void run_on_loop(struct kcr__wh_job *job)
{
    const struct kcr__wh_route *route = job->route;
    struct rusage before = {0}, after; /* zeros if getrusage fails: then the call reads as CPU-bound */
    getrusage(RUSAGE_THREAD, &before);
    int64_t start = kcr__wh_now_ns();
    run_handler(job);
    int64_t took_ms = (kcr__wh_now_ns() - start) / 1000000;
    if (took_ms > KCR_WEBHOOK_LOOP_BUDGET_MS && getrusage(RUSAGE_THREAD, &after) == 0) {
        int64_t cpu = cpu_ms(&after) - cpu_ms(&before);
        bool blocked = after.ru_nvcsw > before.ru_nvcsw;
        if ((blocked || cpu > KCR_WEBHOOK_LOOP_BUDGET_MS) &&
            atomic_exchange(on_loop_flag(route), false))
            kcr__log(KCR_LOG_WARN, "webhook",
                     "handler %s %s %lld ms on an event loop (run_on_loop allows %d ms): it "
                     "runs on the worker threads from now on",
                     route->path, blocked ? "blocked, taking" : "computed for",
                     (long long)(blocked ? took_ms : cpu), KCR_WEBHOOK_LOOP_BUDGET_MS);
    }
    kcr__wh_job_answer(job, job->status, job->reply ? job->reply : "", job->reply_len);
}

/* Under s->mu: takes up to n workers off the idle stack, counted as
 * coming, as a list linked by next_idle for wake(). */
static struct kcr__wh_worker *take_idle(kcr_webhook_server *s, size_t n)
{
    struct kcr__wh_worker *taken = NULL;
    for (; n && s->idle; n--) {
        struct kcr__wh_worker *w = s->idle;
        s->idle = w->next_idle;
        w->next_idle = taken;
        w->coming = true;
        s->n_coming++;
        taken = w;
    }
    return taken;
}

/* Wakes the workers take_idle took, outside s->mu. */
static void wake(struct kcr__wh_worker *w)
{
    while (w) {
        struct kcr__wh_worker *next = w->next_idle; /* the worker may sleep again at once */
        sem_post(&w->wake);
        w = next;
    }
}

void kcr__wh_pool_submit(struct kcr__wh_job *job)
{
    kcr_webhook_server *s = job->s;
    struct kcr__wh_loop *l = job->loop;
    job->next = l->pending;
    if (l->pending)
        l->pending->prev = job;
    l->pending = job;
    if (atomic_load_explicit(on_loop_flag(job->route), memory_order_relaxed)) {
        run_on_loop(job);
        return;
    }
    if (job->route->in_flight)
        kcr_metric_add(job->route->in_flight, 1);
    struct event *deadline = (struct event *)job->storage;
    if (evtimer_assign(deadline, l->base, on_deadline, job) == 0) {
        job->deadline = deadline;
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
    s->n_queued++;
    struct kcr__wh_worker *woken = s->n_coming ? NULL : take_idle(s, 1);
    bool guard = !woken && s->idle; /* one asleep could take it if the coming one is late */
    pthread_mutex_unlock(&s->mu);
    wake(woken);
    if (guard && !evtimer_pending(l->guard_ev, NULL)) {
        struct timeval tv = {.tv_sec = 0, .tv_usec = HANDOFF_GUARD_US};
        evtimer_add(l->guard_ev, &tv);
    }
}

void kcr__wh_pool_guard_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    struct kcr__wh_loop *l = arg;
    kcr_webhook_server *s = l->s;
    int64_t now = kcr__wh_now_ns(), wait_ns = 0;
    struct kcr__wh_worker *woken = NULL;
    pthread_mutex_lock(&s->mu);
    if (s->queue_head && s->idle) {
        wait_ns = s->queue_head->start_ns + (int64_t)HANDOFF_GUARD_US * 1000 - now;
        if (wait_ns <= 0)
            woken = take_idle(s, s->n_queued); /* one for every job waiting */
    }
    pthread_mutex_unlock(&s->mu);
    wake(woken);
    if (wait_ns > 0) {
        struct timeval tv = {.tv_sec = 0, .tv_usec = (suseconds_t)(wait_ns / 1000) + 1};
        evtimer_add(l->guard_ev, &tv);
    }
}

void kcr__wh_pool_done_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    struct kcr__wh_loop *l = arg;
    if (!l->s)
        return; /* a loop never initialised */
    pthread_mutex_lock(&l->done_mu);
    struct kcr__wh_job *list = l->done_list;
    l->done_list = NULL;
    l->done_armed = false;
    pthread_mutex_unlock(&l->done_mu);
    while (list) {
        struct kcr__wh_job *job = list;
        list = job->qnext;
        if (job->req)
            kcr__wh_job_answer(job, job->status, job->reply ? job->reply : "", job->reply_len);
        kcr__wh_job_unref(job); /* the worker's */
    }
}

/* Worker: the next job from the queue, sleeping on the idle stack while
 * there is none; NULL: quit (after the queue is empty). */
static struct kcr__wh_job *next_job(struct kcr__wh_worker *w)
{
    kcr_webhook_server *s = w->s;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        struct kcr__wh_job *job = s->queue_head;
        if (w->coming) {
            w->coming = false;
            s->n_coming--;
        }
        if (job) {
            s->queue_head = job->qnext;
            if (!s->queue_head)
                s->queue_tail = NULL;
            s->n_queued--;
        }
        if (job || s->workers_quit) {
            pthread_mutex_unlock(&s->mu);
            return job;
        }
        w->next_idle = s->idle;
        s->idle = w;
        pthread_mutex_unlock(&s->mu);
        while (sem_wait(&w->wake) != 0)
            ; /* EINTR */
        pthread_mutex_lock(&s->mu);
    }
}

static void *worker_main(void *arg)
{
    struct kcr__wh_worker *w = arg;
    struct kcr__wh_job *job;
    while ((job = next_job(w)) != NULL) {
        run_handler(job);
        if (job->route->in_flight)
            kcr_metric_add(job->route->in_flight, -1);
        struct kcr__wh_loop *l = job->loop;
        pthread_mutex_lock(&l->done_mu);
        job->qnext = l->done_list;
        l->done_list = job;
        bool wake = !l->done_armed;
        l->done_armed = true;
        pthread_mutex_unlock(&l->done_mu);
        if (wake)
            event_active(l->done_ev, 0, 0); /* after stop: never run, drained by stop */
    }
    return NULL;
}

kcr_err kcr__wh_pool_start(kcr_webhook_server *s)
{
    s->workers = calloc((size_t)s->n_workers, sizeof *s->workers);
    if (!s->workers)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    for (int i = 0; i < s->n_workers; i++) {
        struct kcr__wh_worker *w = &s->workers[i];
        w->s = s;
        bool made = sem_init(&w->wake, 0, 0) == 0;
        if (!made || pthread_create(&w->thread, NULL, worker_main, w) != 0) {
            if (made)
                sem_destroy(&w->wake);
            s->n_workers = i;
            return kcr__fail(KCR_ERR_NOMEM, "webhook server: cannot start worker %d", i);
        }
    }
    return KCR_OK;
}

/* Joins the workers: they finish the queue first (its jobs were answered
 * 503 by the stop, so their results are dropped); those asleep are woken
 * to quit. Idempotent. */
void kcr__wh_pool_stop(kcr_webhook_server *s)
{
    if (!s->workers)
        return;
    pthread_mutex_lock(&s->mu);
    s->workers_quit = true;
    struct kcr__wh_worker *asleep = take_idle(s, (size_t)s->n_workers);
    pthread_mutex_unlock(&s->mu);
    wake(asleep);
    for (int i = 0; i < s->n_workers; i++) {
        pthread_join(s->workers[i].thread, NULL);
        sem_destroy(&s->workers[i].wake);
    }
    free(s->workers);
    s->workers = NULL;
}
