/* One reconcile of one key: reasons -> request -> user function -> result.
 * The manager's workers and the test kit both run keys through here. */
#include <string.h>

#include "controller/controller_internal.h"
#include "core/error.h"

void kcr__reconcile_key(kcr_controller *c, const char *key, kcr__run *run)
{
    kcr__pending p;
    kcr__pending_take(run->pending, c->env_ops->now_ms(c->env), &p);
    char ns[KCR__NS_BUF];
    kcr_reconcile_request req;
    kcr__request_init(&req, c, key, &p, ns);
    kcr_ctx ctx = {
        .ctl = c,
        .req = &req,
        .client = run->client,
        .recorder = run->recorder,
        .cancel = run->cancel,
        .shard = run->shard,
    };
    KCR__COUNT(c, reconciles, 1);
    KCR__COUNT(c, active_workers, 1);
    kcr__clear_error();
    run->result = c->reconcile(&ctx, &req, c->user_data);
    KCR__COUNT(c, active_workers, -1);
    run->reason = p.reason;
    run->reasons = p.reasons;
    run->outcome = kcr__apply_result(c, key, run->result, run->limiter_now_ns);
    kcr__pending_clear(&p);
}
