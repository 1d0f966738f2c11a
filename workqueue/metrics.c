/* Metrics: time tracking, the user's callbacks and the stats snapshot.
 * Everything here runs with the queue's lock held, and only when the queue
 * tracks time (q->timing) unless noted: without metrics no clock is read. */
#include "core/abi.h"
#include "core/clock.h"
#include "workqueue/queue.h"
#include "workqueue/ring.h"

static inline double seconds(int64_t ns)
{
    return (double)ns / 1e9;
}

void kcr__wq_m_added(struct kcr_workqueue *q, struct kcr__wq_item *it, int64_t now)
{
    it->added_ns = now;
    if (q->has_cb && q->m.adds)
        q->m.adds(q->name, q->m.user_data);
}

void kcr__wq_m_depth(struct kcr_workqueue *q)
{
    if (q->m.depth)
        q->m.depth(q->name, q->depth, q->m.user_data);
}

void kcr__wq_m_retry(struct kcr_workqueue *q)
{
    q->retries_total++;
    if (q->m.retries)
        q->m.retries(q->name, q->m.user_data);
}

void kcr__wq_m_got(struct kcr_workqueue *q, struct kcr__wq_item *it, int64_t now)
{
    int64_t waited = now - it->added_ns;
    q->qd_sum_ns += waited;
    q->qd_count++;
    if (q->has_cb && q->m.queue_duration)
        q->m.queue_duration(q->name, seconds(waited), q->m.user_data);
    it->start_ns = now;
    /* Link into the processing list (the FIFO links are free now). */
    it->prev = NULL;
    it->next = q->proc_head;
    if (q->proc_head)
        q->proc_head->prev = it;
    q->proc_head = it;
}

void kcr__wq_m_done(struct kcr_workqueue *q, struct kcr__wq_item *it, int64_t now)
{
    int64_t worked = now - it->start_ns;
    q->wd_sum_ns += worked;
    q->wd_count++;
    if (q->has_cb && q->m.work_duration)
        q->m.work_duration(q->name, seconds(worked), q->m.user_data);
    if (it->prev)
        it->prev->next = it->next;
    else
        q->proc_head = it->next;
    if (it->next)
        it->next->prev = it->prev;
    it->next = it->prev = NULL;
}

/* Sum and maximum of the processing items' ages at `now`, in ns. */
static void processing_ages(struct kcr_workqueue *q, int64_t now, int64_t *total, int64_t *oldest)
{
    *total = 0;
    *oldest = 0;
    for (struct kcr__wq_item *it = q->proc_head; it; it = it->next) {
        int64_t age = now - it->start_ns;
        *total += age;
        if (age > *oldest)
            *oldest = age;
    }
}

void kcr__wq_m_tick(struct kcr_workqueue *q, int64_t now, bool force)
{
    if (!q->gauges || (!force && now < q->next_update_ns))
        return;
    int64_t total, oldest;
    processing_ages(q, now, &total, &oldest);
    if (q->m.unfinished_work)
        q->m.unfinished_work(q->name, seconds(total), q->m.user_data);
    if (q->m.longest_running)
        q->m.longest_running(q->name, seconds(oldest), q->m.user_data);
    q->next_update_ns = now + q->update_period_ns;
}

void kcr_workqueue_metrics_update(kcr_workqueue *q)
{
    kcr__wq_mutex_lock(q);
    if (q->gauges)
        kcr__wq_m_tick(q, kcr__now_ns(), true);
    pthread_mutex_unlock(&q->mu);
}

void (kcr_workqueue_get_stats)(size_t out_size, kcr_workqueue *q, kcr_workqueue_stats *out)
{
    struct kcr__wq_wake w = {0};
    kcr_workqueue_stats st;
    kcr__wq_lock(q, &w);
    st = (kcr_workqueue_stats){
        .depth = q->depth,
        .queued = q->queued,
        .processing = q->processing,
        .waiting = q->waiting,
        .adds_total = q->adds_total,
        .retries_total = q->retries_total,
        .queue_duration_sum_ms = q->qd_sum_ns / KCR_NS_PER_MS,
        .queue_duration_count = q->qd_count,
        .work_duration_sum_ms = q->wd_sum_ns / KCR_NS_PER_MS,
        .work_duration_count = q->wd_count,
    };
    if (q->timing) {
        int64_t total, oldest;
        processing_ages(q, kcr__now_ns(), &total, &oldest);
        st.unfinished_work_ms = total / KCR_NS_PER_MS;
        st.longest_running_processor_ms = oldest / KCR_NS_PER_MS;
    }
    kcr__wq_unlock(q, &w);
    kcr__abi_out(out, out_size, &st, sizeof st);
}
