/* Pending reasons of one key: why a queued key will be reconciled. The
 * record lives with the key's queue entry (the workqueue item's payload on
 * the manager, the kit's queue item in the test kit), so recording a reason
 * touches the queue's table only. Its reasons coalesce (every bit, plus the
 * details of the most important) until a worker takes them; a delayed
 * reason (requeue-after, retry) only counts once it is due. */
#include <stdlib.h>
#include <string.h>

#include "controller/controller_internal.h"
#include "core/error.h"

void kcr__pending_clear(kcr__pending *p)
{
    free(p->strs);
    memset(p, 0, sizeof *p);
}

/* Drops the trigger's object (the details of a reason no longer the main one). */
static void drop_object(kcr__pending *p)
{
    free(p->strs);
    p->strs = NULL;
    p->kind = p->ns = p->name = NULL;
}

kcr_err kcr__pending_init(kcr__pending *p, const kcr_trigger *t, int64_t now_ms, int64_t delay_ms)
{
    memset(p, 0, sizeof *p);
    if (delay_ms > 0) {
        p->delayed = t->reason;
        p->due_ms = delay_ms > INT64_MAX - now_ms ? INT64_MAX : now_ms + delay_ms;
        return KCR_OK;
    }
    /* one allocation for the three strings: most of them are dropped at
     * the merge, when the key already waits for as important a reason */
    const char *kind = t->kind ? t->kind : "", *ns = t->ns ? t->ns : "",
               *name = t->name ? t->name : "";
    size_t lk = strlen(kind) + 1, ln = strlen(ns) + 1, lm = strlen(name) + 1;
    if (!(p->strs = malloc(lk + ln + lm)))
        return kcr__fail(KCR_ERR_NOMEM, "out of memory recording a reason");
    memcpy(p->strs, kind, lk);
    memcpy(p->strs + lk, ns, ln);
    memcpy(p->strs + lk + ln, name, lm);
    p->kind = p->strs, p->ns = p->strs + lk, p->name = p->strs + lk + ln;
    p->reason = t->reason;
    p->change = t->change;
    p->reasons = KCR_REASON_BIT(t->reason);
    return KCR_OK;
}

void kcr__pending_merge(kcr__pending *into, kcr__pending *from)
{
    if (from->delayed != KCR_REASON_NONE) {
        /* the workqueue keeps the earlier deadline; so does this */
        if (into->delayed == KCR_REASON_NONE || from->due_ms < into->due_ms) {
            into->due_ms = from->due_ms;
            into->delayed = from->delayed;
        } else if (from->due_ms == into->due_ms && from->delayed > into->delayed) {
            into->delayed = from->delayed;
        }
    }
    if (from->has_uid) {
        into->has_uid = true;
        into->uid_hash = from->uid_hash;
    }
    into->reasons |= from->reasons;
    if (from->reason > into->reason) {
        drop_object(into);
        into->kind = from->kind, into->ns = from->ns, into->name = from->name;
        into->strs = from->strs;
        from->strs = NULL;
        into->reason = from->reason;
        into->change = from->change;
    }
    kcr__pending_clear(from);
}

void kcr__pending_take(kcr__pending *p, int64_t now_ms, kcr__pending *out)
{
    if (p->delayed != KCR_REASON_NONE && p->due_ms <= now_ms) {
        p->reasons |= KCR_REASON_BIT(p->delayed);
        if (p->delayed > p->reason) {
            drop_object(p);
            p->reason = p->delayed;
            p->change = 0;
        }
        p->delayed = KCR_REASON_NONE;
        p->due_ms = 0;
    }
    *out = *p;
    out->delayed = KCR_REASON_NONE;
    out->due_ms = 0;
    /* a delayed reason not due yet stays: its delayed add is still queued */
    *p = (kcr__pending){.delayed = p->delayed,
                        .due_ms = p->due_ms,
                        .has_uid = p->has_uid,
                        .uid_hash = p->uid_hash};
}
