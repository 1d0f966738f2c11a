/* Pending reasons per key: why a queued key will be reconciled. The
 * workqueue de-duplicates keys; this map coalesces their reasons (every bit,
 * plus the details of the most important) until a worker takes them. A
 * delayed reason (requeue-after, retry) only counts once it is due. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "controller/controller_internal.h"
#include "core/error.h"

typedef struct entry {
    char *key;
    kcr__pending p;
    struct entry *next;
} entry;

struct kcr__reasons {
    pthread_mutex_t lock;
    entry **buckets;
    size_t n_buckets, n;
};

static uint64_t hash(const char *s)
{
    uint64_t h = UINT64_C(1469598103934665603);
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * UINT64_C(1099511628211);
    return h;
}

kcr__reasons *kcr__reasons_new(void)
{
    kcr__reasons *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->n_buckets = 64;
    r->buckets = calloc(r->n_buckets, sizeof *r->buckets);
    if (!r->buckets) {
        free(r);
        return NULL;
    }
    pthread_mutex_init(&r->lock, NULL);
    return r;
}

void kcr__pending_clear(kcr__pending *p)
{
    free(p->kind);
    free(p->ns);
    free(p->name);
    memset(p, 0, sizeof *p);
}

static void entry_free(entry *e)
{
    kcr__pending_clear(&e->p);
    free(e->key);
    free(e);
}

void kcr__reasons_free(kcr__reasons *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_buckets; i++)
        for (entry *e = r->buckets[i], *nx; e; e = nx) {
            nx = e->next;
            entry_free(e);
        }
    free(r->buckets);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

static entry **slot(kcr__reasons *r, const char *key)
{
    entry **pp = &r->buckets[hash(key) & (r->n_buckets - 1)];
    while (*pp && strcmp((*pp)->key, key) != 0)
        pp = &(*pp)->next;
    return pp;
}

static void grow(kcr__reasons *r)
{
    size_t nb = r->n_buckets * 2;
    entry **b = calloc(nb, sizeof *b);
    if (!b)
        return; /* longer chains, still correct */
    for (size_t i = 0; i < r->n_buckets; i++)
        for (entry *e = r->buckets[i], *nx; e; e = nx) {
            nx = e->next;
            entry **head = &b[hash(e->key) & (nb - 1)];
            e->next = *head;
            *head = e;
        }
    free(r->buckets);
    r->buckets = b;
    r->n_buckets = nb;
}

static char *dup0(const char *s)
{
    return strdup(s ? s : "");
}

kcr_err kcr__reasons_add(kcr__reasons *r, const char *key, const kcr_trigger *t, int64_t now_ms,
                         int64_t delay_ms)
{
    pthread_mutex_lock(&r->lock);
    entry **pp = slot(r, key);
    entry *e = *pp;
    if (!e) {
        e = calloc(1, sizeof *e);
        if (!e || !(e->key = strdup(key))) {
            free(e);
            pthread_mutex_unlock(&r->lock);
            return kcr__fail(KCR_ERR_NOMEM, "out of memory recording a reason");
        }
        *pp = e;
        if (++r->n > r->n_buckets)
            grow(r);
    }
    kcr__pending *p = &e->p;
    kcr_err err = KCR_OK;
    if (delay_ms > 0) {
        int64_t due = now_ms + delay_ms;
        /* the workqueue keeps the earlier deadline; so does this */
        if (p->delayed == KCR_REASON_NONE || due < p->due_ms) {
            p->due_ms = due;
            p->delayed = t->reason;
        } else if (due == p->due_ms && t->reason > p->delayed) {
            p->delayed = t->reason;
        }
    } else if (t->reason > p->reason) {
        char *kind = dup0(t->kind), *ns = dup0(t->ns), *name = dup0(t->name);
        if (!kind || !ns || !name) {
            free(kind), free(ns), free(name);
            err = kcr__fail(KCR_ERR_NOMEM, "out of memory recording a reason");
        } else {
            free(p->kind), free(p->ns), free(p->name);
            p->kind = kind, p->ns = ns, p->name = name;
            p->reason = t->reason;
            p->change = t->change;
        }
        p->reasons |= KCR_REASON_BIT(t->reason);
    } else {
        p->reasons |= KCR_REASON_BIT(t->reason);
    }
    pthread_mutex_unlock(&r->lock);
    return err;
}

static void take_due(kcr__pending *p, int64_t now_ms)
{
    if (p->delayed == KCR_REASON_NONE || p->due_ms > now_ms)
        return;
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

void kcr__reasons_take(kcr__reasons *r, const char *key, int64_t now_ms, kcr__pending *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&r->lock);
    entry **pp = slot(r, key);
    entry *e = *pp;
    if (e) {
        take_due(&e->p, now_ms);
        kcr__pending keep = {.delayed = e->p.delayed, .due_ms = e->p.due_ms};
        *out = e->p;
        out->delayed = KCR_REASON_NONE;
        out->due_ms = 0;
        if (keep.delayed != KCR_REASON_NONE) {
            e->p = keep; /* the delayed add is still in the queue */
        } else {
            *pp = e->next;
            r->n--;
            free(e->key);
            free(e);
        }
    }
    pthread_mutex_unlock(&r->lock);
}

bool kcr__reasons_peek(kcr__reasons *r, const char *key, kcr__pending *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&r->lock);
    entry *e = *slot(r, key);
    bool found = e != NULL;
    if (e) {
        *out = e->p;
        out->kind = e->p.kind ? strdup(e->p.kind) : NULL;
        out->ns = e->p.ns ? strdup(e->p.ns) : NULL;
        out->name = e->p.name ? strdup(e->p.name) : NULL;
    }
    pthread_mutex_unlock(&r->lock);
    return found;
}
