/* The test kit's reconciles: one key at a time, or batches that stand for
 * concurrent workers (kcr_testkit_options.simulate_workers); per-reconcile
 * deadlines in virtual time; the history and its worker-rule check. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testkit/testkit_internal.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/grow.h"

static kcr_err record(kcr_testkit *tk, kcr_controller *c, const char *key, const kcr__run *run,
                      int64_t start_ms, int worker, bool timed_out)
{
    kcr_testkit_record *grown =
        kcr__grow(tk->hist, &tk->cap_hist, tk->n_hist, sizeof *tk->hist, 32);
    if (!grown)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory recording history");
    tk->hist = grown;
    char *k = strdup(key);
    if (!k)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory recording history");
    tk->hist[tk->n_hist++] = (kcr_testkit_record){
        .controller = c->name,
        .key = k,
        .reason = run->reason,
        .reasons = run->reasons,
        .result = run->result,
        .at_ms = start_ms,
        .end_ms = tk->now_ms,
        .timed_out = timed_out,
        .worker = worker,
        .batch = tk->batches,
    };
    return KCR_OK;
}

/* Reconciles key of c now with its pending reasons `p` (taken over), as
 * worker `worker` of the current batch (its queue entry, if any, already
 * removed). A delayed reason not due yet is queued again. The deadline runs
 * in virtual time: kcr_testkit_advance past it triggers the token. Does not
 * sync. */
static kcr_err reconcile_one(kcr_testkit *tk, kcr_controller *c, const char *key, kcr__pending *p,
                             int worker, kcr_result *out)
{
    int64_t start = tk->now_ms;
    kcr_cancel_reset(tk->cancel);
    tk->deadline_ms = c->timeout_ms ? start + c->timeout_ms : 0;
    kcr__run run = {
        .client = tk->client,
        .recorder = tk->recorder,
        .cancel = tk->cancel,
        .limiter_now_ns = start * KCR_NS_PER_MS,
        .pending = p,
    };
    tk->running = true;
    kcr__reconcile_key(c, key, &run);
    tk->running = false;
    kcr_err qerr = KCR_OK;
    if (p->delayed != KCR_REASON_NONE)
        qerr = kcr__tk_queue(tk, c->env_ctl, key, KCR_WQ_PRIORITY_NORMAL, p->due_ms, p);
    tk->deadline_ms = 0;
    /* as the manager counts it: the reconcile ran to (or past) its deadline */
    bool timed_out = c->timeout_ms && tk->now_ms - start >= c->timeout_ms;
    if (timed_out)
        KCR__COUNT(c, timeouts, 1);
    if (out)
        *out = run.result;
    kcr_err err = record(tk, c, key, &run, start, worker, timed_out);
    return err != KCR_OK ? err : qerr;
}

/* Removes `it` from the queue; its key and reasons must have been moved out. */
static void remove_item(tk_ctl *t, tk_item *it)
{
    *it = t->items[--t->n];
}

kcr_err kcr_testkit_reconcile(kcr_testkit *tk, kcr_controller *c, const char *key, kcr_result *out)
{
    if (!tk || !c || !key || c->env != tk)
        return kcr__fail(KCR_ERR_INVALID, "kcr_testkit_reconcile: NULL argument or a "
                                          "controller of another kit");
    if (tk->running)
        return kcr__fail(KCR_ERR_STATE, "kcr_testkit_reconcile: called from a reconcile");
    kcr_err err = kcr_testkit_sync(tk);
    if (err != KCR_OK)
        return err;
    const char *slash = strchr(key, '/');
    char *ns = slash ? strndup(key, (size_t)(slash - key)) : NULL;
    char *k = NULL;
    err = kcr__make_key(c, ns, slash ? slash + 1 : key, &k);
    free(ns);
    if (err != KCR_OK)
        return err;
    kcr_trigger t = {.reason = KCR_REASON_ENQUEUED};
    kcr__pending p;
    err = kcr__pending_init(&p, &t, tk->now_ms, 0);
    tk_item *it = kcr__tk_find_item(c->env_ctl, k);
    if (it) {
        kcr__pending_merge(&p, &it->p); /* what is not due goes back after the reconcile */
        if (it->due_ms <= tk->now_ms) {
            free(it->key);
            remove_item(c->env_ctl, it);
        }
    }
    if (err == KCR_OK) {
        tk->batches++;
        err = reconcile_one(tk, c, k, &p, 0, out);
        kcr_err serr = kcr_testkit_sync(tk);
        err = err != KCR_OK ? err : serr;
    }
    kcr__pending_clear(&p);
    free(k);
    return err;
}

/* The most important ready item of t (highest priority, then first added). */
static tk_item *best_ready(kcr_testkit *tk, tk_ctl *t)
{
    tk_item *best = NULL;
    for (size_t j = 0; j < t->n; j++) {
        tk_item *it = &t->items[j];
        if (it->due_ms <= tk->now_ms && (!best || it->priority > best->priority ||
                                         (it->priority == best->priority && it->seq < best->seq)))
            best = it;
    }
    return best;
}

/* The controller whose most important ready item comes first, or NULL. */
static tk_ctl *next_ctl(kcr_testkit *tk)
{
    tk_ctl *bt = NULL;
    tk_item *best = NULL;
    for (size_t i = 0; i < tk->n_ctls; i++) {
        tk_item *it = best_ready(tk, tk->ctls[i]);
        if (it && (!best || it->priority > best->priority ||
                   (it->priority == best->priority && it->seq < best->seq))) {
            best = it;
            bt = tk->ctls[i];
        }
    }
    return bt;
}

/* One batch of t: up to `width` ready keys (most important first), taken
 * off the queue together so none can be taken twice, each started at the
 * batch's virtual start on the caches as they were then; the clock ends at
 * the latest end, then the changes are routed. */
static kcr_err run_batch(kcr_testkit *tk, tk_ctl *t, int width, size_t budget, size_t *ran)
{
    tk_item *taken = calloc((size_t)width, sizeof *taken);
    if (!taken)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory starting a batch");
    int n = 0;
    tk_item *it;
    while (n < width && (size_t)n < budget && (it = best_ready(tk, t))) {
        taken[n++] = *it;
        remove_item(t, it);
    }
    tk->batches++;
    int64_t start = tk->now_ms, end = start;
    kcr_err err = KCR_OK;
    for (int w = 0; w < n; w++) {
        tk->now_ms = start;
        if (err == KCR_OK) {
            err = reconcile_one(tk, t->c, taken[w].key, &taken[w].p, w, NULL);
            ++*ran;
        }
        if (tk->now_ms > end)
            end = tk->now_ms;
        free(taken[w].key);
        kcr__pending_clear(&taken[w].p);
    }
    tk->now_ms = end;
    free(taken);
    kcr_err serr = kcr_testkit_sync(tk);
    return err != KCR_OK ? err : serr;
}

kcr_err kcr_testkit_run_until_idle(kcr_testkit *tk, size_t max_reconciles, size_t *n)
{
    if (n)
        *n = 0;
    if (!tk)
        return kcr__fail(KCR_ERR_INVALID, "kcr_testkit_run_until_idle: NULL kit");
    if (tk->running)
        return kcr__fail(KCR_ERR_STATE, "kcr_testkit_run_until_idle: called from a reconcile");
    size_t max = max_reconciles ? max_reconciles : 1000;
    kcr_err err = kcr_testkit_sync(tk);
    size_t done = 0;
    tk_ctl *t;
    while (err == KCR_OK && (t = next_ctl(tk))) {
        if (done == max) {
            err = kcr__fail(KCR_ERR_TIMEOUT,
                            "still not idle after %zu reconciles (next: %s of controller \"%s\")",
                            max, best_ready(tk, t)->key, t->c->name);
            break;
        }
        err = run_batch(tk, t, tk->simulate_workers ? t->c->workers : 1, max - done, &done);
    }
    if (n)
        *n = done;
    return err;
}

const kcr_testkit_record *kcr_testkit_history(kcr_testkit *tk, size_t *n)
{
    if (n)
        *n = tk ? tk->n_hist : 0;
    return tk ? tk->hist : NULL;
}

void kcr_testkit_clear_history(kcr_testkit *tk)
{
    if (!tk)
        return;
    for (size_t i = 0; i < tk->n_hist; i++)
        free((char *)tk->hist[i].key);
    tk->n_hist = 0;
}

static int workers_of(kcr_testkit *tk, const char *controller)
{
    for (size_t i = 0; i < tk->n_ctls; i++)
        if (strcmp(tk->ctls[i]->c->name, controller) == 0)
            return tk->ctls[i]->c->workers;
    return 1;
}

kcr_err kcr_testkit_check_workers(kcr_testkit *tk)
{
    if (!tk)
        return kcr__fail(KCR_ERR_INVALID, "kcr_testkit_check_workers: NULL kit");
    /* records of one batch are adjacent; a batch is one controller's */
    for (size_t i = 0; i < tk->n_hist;) {
        size_t j = i;
        while (j < tk->n_hist && tk->hist[j].batch == tk->hist[i].batch)
            j++;
        const kcr_testkit_record *b = &tk->hist[i];
        int width = workers_of(tk, b->controller);
        if (j - i > (size_t)width)
            return kcr__fail(KCR_ERR_STATE,
                             "controller \"%s\": %zu reconciles at once at %lld ms, "
                             "max_concurrent_reconciles is %d",
                             b->controller, j - i, (long long)b->at_ms, width);
        for (size_t x = i; x < j; x++)
            for (size_t y = x + 1; y < j; y++)
                if (strcmp(tk->hist[x].key, tk->hist[y].key) == 0)
                    return kcr__fail(KCR_ERR_STATE,
                                     "controller \"%s\": %s reconciled by two workers at once "
                                     "at %lld ms",
                                     b->controller, tk->hist[x].key, (long long)b->at_ms);
        i = j;
    }
    return KCR_OK;
}
