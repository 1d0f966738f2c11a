/* What a worker does with a reconcile's result: count it, log errors,
 * forget the key's backoff or requeue it. Shared by the manager's workers
 * and the test kit. */
#include <string.h>

#include "controller/controller_internal.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"

static void requeue(kcr_controller *c, const char *key, kcr_reason reason, int64_t delay_ms)
{
    kcr_trigger t = {.reason = reason};
    kcr_err err = kcr__controller_enqueue(c, key, &t, KCR_WQ_PRIORITY_NORMAL, delay_ms);
    if (err != KCR_OK && err != KCR_ERR_SHUTDOWN)
        kcr__log(KCR_LOG_ERROR, "controller", "controller \"%s\": requeue %s: %s", c->name, key,
                 kcr_last_error());
}

/* A requeue after the limiter's backoff (at least 1 ms, so it is delayed and
 * keeps its reason). */
static void rate_limited(kcr_controller *c, const char *key, kcr_reason reason, int64_t now_ns)
{
    int64_t ms = kcr_rate_limiter_when_at(c->limiter, key, now_ns / KCR_NS_PER_MS);
    requeue(c, key, reason, ms > 0 ? ms : 1);
}

kcr__outcome kcr__apply_result(kcr_controller *c, const char *key, kcr_result res, int64_t now_ns)
{
    bool garbage = (unsigned)res.kind > KCR_RESULT_REQUEUE ||
                   (res.kind == KCR_RESULT_REQUEUE_AFTER && res.requeue_after_ms <= 0);
    if (garbage) {
        KCR__COUNT(c, garbage_results, 1);
        KCR__COUNT(c, errors, 1);
        if (!atomic_exchange(&c->warned_result, true))
            kcr__log(KCR_LOG_ERROR, "controller",
                     "controller \"%s\": reconcile of %s returned a garbage result (kind %d, "
                     "requeue_after_ms %lld): retrying with backoff (logged once; counted)",
                     c->name, key, (int)res.kind, (long long)res.requeue_after_ms);
        rate_limited(c, key, KCR_REASON_RETRY, now_ns);
        return KCR__OUT_ERROR;
    }
    switch (res.kind) {
    case KCR_RESULT_DONE:
        KCR__COUNT(c, successes, 1);
        kcr_rate_limiter_forget(c->limiter, key);
        return KCR__OUT_SUCCESS;
    case KCR_RESULT_REQUEUE_AFTER:
        KCR__COUNT(c, requeue_afters, 1);
        kcr_rate_limiter_forget(c->limiter, key);
        requeue(c, key, KCR_REASON_REQUEUE_AFTER, res.requeue_after_ms);
        return KCR__OUT_REQUEUE_AFTER;
    case KCR_RESULT_REQUEUE: /* the backoff is kept: repeated requeues slow down */
        KCR__COUNT(c, requeues, 1);
        rate_limited(c, key, KCR_REASON_REQUEUE_AFTER, now_ns);
        return KCR__OUT_REQUEUE;
    case KCR_RESULT_RETRY:
        KCR__COUNT(c, errors, 1);
        kcr__log(KCR_LOG_ERROR, "controller", "controller \"%s\": reconcile %s: %s%s%s", c->name,
                 key, kcr_strerror(res.err), kcr_last_error()[0] ? ": " : "", kcr_last_error());
        rate_limited(c, key, KCR_REASON_RETRY, now_ns);
        return KCR__OUT_ERROR;
    case KCR_RESULT_TERMINAL:
        KCR__COUNT(c, terminal_errors, 1);
        kcr_rate_limiter_forget(c->limiter, key);
        kcr__log(KCR_LOG_ERROR, "controller",
                 "controller \"%s\": reconcile %s: terminal error (not retried): %s%s%s", c->name,
                 key, kcr_strerror(res.err), kcr_last_error()[0] ? ": " : "", kcr_last_error());
        return KCR__OUT_TERMINAL;
    }
    return KCR__OUT_ERROR;
}
