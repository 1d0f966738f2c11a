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

static char *dup0(const char *s)
{
    return strdup(s ? s : "");
}

void kcr__pending_clear(kcr__pending *p)
{
    free(p->kind);
    free(p->ns);
    free(p->name);
    memset(p, 0, sizeof *p);
}

kcr_err kcr__pending_init(kcr__pending *p, const kcr_trigger *t, int64_t now_ms, int64_t delay_ms)
{
    memset(p, 0, sizeof *p);
    if (delay_ms > 0) {
        p->delayed = t->reason;
        p->due_ms = delay_ms > INT64_MAX - now_ms ? INT64_MAX : now_ms + delay_ms;
        return KCR_OK;
    }
    p->kind = dup0(t->kind), p->ns = dup0(t->ns), p->name = dup0(t->name);
    if (!p->kind || !p->ns || !p->name) {
        kcr__pending_clear(p);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory recording a reason");
    }
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
    into->reasons |= from->reasons;
    if (from->reason > into->reason) {
        free(into->kind), free(into->ns), free(into->name);
        into->kind = from->kind, into->ns = from->ns, into->name = from->name;
        from->kind = from->ns = from->name = NULL;
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
            free(p->kind), free(p->ns), free(p->name);
            p->kind = p->ns = p->name = NULL;
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
    *p = (kcr__pending){.delayed = p->delayed, .due_ms = p->due_ms};
}
