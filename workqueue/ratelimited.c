/* The rate-limited face of the queue: add_rate_limited, forget, num_requeues. */
#include "workqueue/queue.h"

#include "core/error.h"
#include "workqueue/ratelimit.h"

kcr_err kcr_workqueue_add_rate_limited(kcr_workqueue *q, const char *key)
{
    if (!key)
        return kcr__fail(KCR_ERR_INVALID, "kcr_workqueue_add_rate_limited: NULL key");
    /* The limiter locks on its own; the queue's lock is not held here. It
     * runs on the queue's clock, so a virtual clock drives its delays too. */
    return kcr__wq_add_after(q, key,
                             kcr__rate_limiter_when_ns(q->limiter, key, kcr__wq_due_clock(q, 0)),
                             KCR_WQ_PRIORITY_NORMAL, NULL, "kcr_workqueue_add_rate_limited");
}

void kcr_workqueue_forget(kcr_workqueue *q, const char *key)
{
    if (key)
        kcr_rate_limiter_forget(q->limiter, key);
}

int kcr_workqueue_num_requeues(kcr_workqueue *q, const char *key)
{
    return key ? kcr_rate_limiter_num_requeues(q->limiter, key) : 0;
}
