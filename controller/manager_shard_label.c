/* Label mode of a sharded manager (docs/sharding.md, "Label mode"): the
 * shard label on every object of the sharded primary resources names the
 * replica owning it, each replica's primary cache watches its own label
 * (and those of the members that left its ring, until they come back),
 * and an object moves through a drain label its old owner acknowledges.
 *
 * One thread per replica, the label thread, runs every retry period and
 * when woken:
 * - acknowledgements: an object of its cache carrying the drain label, whose
 *   reconcile is not in flight here, gets both labels removed (a merge patch
 *   conditional on the resourceVersion it saw);
 * - the coordinator's pass, while this replica holds the ring's coordinator
 *   Lease (leader/'s elector on Lease "<ring>.coordinator"): it lists the
 *   sharded resources and writes, per object, one conditional metadata-only
 *   merge patch: the shard label of the ring's owner on an object without
 *   one, the drain label on one whose owner is live but no longer its
 *   ring owner, and the new owner directly on one whose owner is gone (its
 *   Lease expired past the margin or released) once no live Lease
 *   publishes the object's hash; up to LABEL_WRITERS writes at once, all
 *   through the manager's client and its rate limit.
 * Every write is conditional on the resourceVersion the writer saw, so a
 * late write of a coordinator that lost its Lease, or of an acknowledgement,
 * fails with a conflict instead of undoing a newer decision. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/manager_shard_internal.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/grow.h"
#include "core/log.h"
#include "informer/informer_internal.h"
#include "informer/label_set.h"
#include "kcr/leader.h"
#include "shard/ring.h"

/* The writes one pass decides at most (each decision holds the object's
 * namespace, name and version until the pass wrote it). A cold ring of
 * 10^5 objects decided all of them in one pass, some 15 MB that malloc
 * kept: the coordinator settled at 66 MB where the other replicas held 51.
 * A pass that had more to write runs again as soon as its writes are
 * done, listing once more (at 500 writes/s a pass of 4,096 writes takes
 * 8 s, a list of 10^5 objects' metadata about one). */
enum { PASS_WRITES_MAX = 4096 };

/* An acknowledgement sent for an object at one resourceVersion. */
typedef struct sent_ack {
    char *key, *rv;
} sent_ack;

/* The acknowledgements of the last pass: kept while the cache still shows
 * the object at the version acknowledged (the write's watch event has not
 * come back yet), so the next pass sends no second one, which could only
 * fail with a conflict. */
typedef struct sent_acks {
    sent_ack *a;
    size_t n, cap;
} sent_acks;

struct shard_labels {
    char *shard_key, *drain_key; /* "<prefix>/<ring>" */
    char *identity;              /* this replica's shard label value */
    char *coord_lease;           /* the coordinator's Lease name */
    kcr_leader_elector *elector; /* label thread only (and start/stop) */
    kcr_cancel *cancel;          /* the label thread's requests; triggered at stop */
    sent_acks acked;             /* label thread only */
    /* label thread only: the ring under which the coordinator's last full
     * pass found nothing to write or wait for (NULL: none), and the
     * passes since that full pass (the coordinator's pass, below) */
    kcr__ring *quiet_ring;
    int since_full;
    size_t pass_writes_max; /* decisions one pass keeps (PASS_WRITES_MAX) */
    pthread_t thread;
    bool started;
    /* under s->lock */
    bool coordinating, elector_lost;
    double unowned; /* the coordinator's last pass: objects without a live owner */
    /* The other identities whose shard label the primary caches watch:
     * members that left this replica's ring (kcr__shard_labels_after_step),
     * sorted. Under watch_mu, which the informers' threads take too. */
    pthread_mutex_t watch_mu;
    char **borrowed;
    size_t n_borrowed;
};

/* ---- names ---- */

static bool label_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_' || c == '.';
}

static bool alnum(char c)
{
    return label_char(c) && c != '-' && c != '_' && c != '.';
}

/* A label value, or the name part of a label key: at most 63 characters
 * [A-Za-z0-9._-], starting and ending alphanumeric. */
static bool label_name_ok(const char *v)
{
    size_t n = strlen(v);
    if (n == 0 || n > 63 || !alnum(v[0]) || !alnum(v[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!label_char(v[i]))
            return false;
    return true;
}

static char *join(const char *a, const char *sep, const char *b)
{
    size_t n = strlen(a) + strlen(sep) + strlen(b) + 1;
    char *out = malloc(n);
    if (out)
        snprintf(out, n, "%s%s%s", a, sep, b);
    return out;
}

static void borrowed_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static void sent_acks_clear(sent_acks *v)
{
    for (size_t i = 0; i < v->n; i++) {
        free(v->a[i].key);
        free(v->a[i].rv);
    }
    free(v->a);
    *v = (sent_acks){0};
}

static bool sent_acks_has(const sent_acks *v, const char *key, const char *rv)
{
    for (size_t i = 0; i < v->n; i++)
        if (strcmp(v->a[i].key, key) == 0 && strcmp(v->a[i].rv, rv) == 0)
            return true;
    return false;
}

/* Adds (key, rv), taking both strings (freed here when out of memory: the
 * memo is an optimisation, a missing entry costs one conflicting write). */
static void sent_acks_add(sent_acks *v, char *key, char *rv)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 16;
        sent_ack *grown = realloc(v->a, cap * sizeof *grown);
        if (!grown) {
            free(key);
            free(rv);
            return;
        }
        v->a = grown;
        v->cap = cap;
    }
    v->a[v->n++] = (sent_ack){key, rv};
}

kcr_err kcr__shard_labels_new(mgr_shard *s, shard_labels **out)
{
    *out = NULL;
    if (!label_name_ok(s->ring))
        return kcr__fail(KCR_ERR_INVALID,
                         "kcr_manager_new: sharding mode KCR_SHARD_LABEL: ring \"%s\" is not a "
                         "valid label key name (at most 63 characters [A-Za-z0-9._-], "
                         "alphanumeric at both ends)",
                         s->ring);
    if (!label_name_ok(s->identity))
        return kcr__fail(KCR_ERR_INVALID,
                         "kcr_manager_new: sharding mode KCR_SHARD_LABEL: identity \"%s\" is not "
                         "a valid label value (at most 63 characters [A-Za-z0-9._-], "
                         "alphanumeric at both ends)",
                         s->identity);
    shard_labels *l = calloc(1, sizeof *l);
    if (!l)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    bool tb = s->label_keys == KCR_SHARD_LABELS_TIMEBERTT;
    l->shard_key = join(tb ? "shard.alpha.sharding.timebertt.dev" : "shard.kcr.dev", "/", s->ring);
    l->drain_key = join(tb ? "drain.alpha.sharding.timebertt.dev" : "drain.kcr.dev", "/", s->ring);
    l->identity = strdup(s->identity);
    l->coord_lease = join(s->ring, ".", "coordinator");
    l->pass_writes_max = PASS_WRITES_MAX;
    pthread_mutex_init(&l->watch_mu, NULL);
    kcr_err err = l->shard_key && l->drain_key && l->identity && l->coord_lease
                      ? kcr_cancel_new(&l->cancel)
                      : kcr__fail(KCR_ERR_NOMEM, "out of memory");
    if (err != KCR_OK) {
        kcr__shard_labels_free(l);
        return err;
    }
    *out = l;
    return KCR_OK;
}

void kcr__shard_labels_free(shard_labels *l)
{
    if (!l)
        return;
    kcr_leader_elector_free(l->elector);
    kcr_cancel_free(l->cancel);
    sent_acks_clear(&l->acked);
    free(l->shard_key);
    free(l->drain_key);
    free(l->identity);
    free(l->coord_lease);
    borrowed_free(l->borrowed, l->n_borrowed);
    kcr__ring_free(l->quiet_ring);
    pthread_mutex_destroy(&l->watch_mu);
    free(l);
}

/* ---- the labels the primary caches watch ---- */

/* *out = the selection of a sharded primary cache: the source's own
 * selector (`user`, may be NULL) and the shard label's values it watches,
 * this replica's identity first, then the members that left its ring. */
static kcr_err watched_set(shard_labels *l, const char *user, kcr__label_set *out)
{
    pthread_mutex_lock(&l->watch_mu);
    size_t n = l->n_borrowed + 1;
    const char **v = malloc(n * sizeof *v);
    kcr_err err = v ? KCR_OK : kcr__fail(KCR_ERR_NOMEM, "out of memory");
    if (v) {
        v[0] = l->identity;
        for (size_t i = 0; i < l->n_borrowed; i++)
            v[i + 1] = l->borrowed[i];
        err = kcr__label_set_init(out, user, l->shard_key, v, n);
    }
    pthread_mutex_unlock(&l->watch_mu);
    free(v);
    return err;
}

char *kcr__shard_labels_selector(shard_labels *l, const char *user)
{
    kcr__label_set set = {0};
    char *out = watched_set(l, user, &set) == KCR_OK ? kcr__label_set_selector(&set) : NULL;
    kcr__label_set_clear(&set);
    return out;
}

kcr_err kcr__shard_labels_select(shard_labels *l, kcr_reflector *r, const char *user)
{
    kcr__label_set set = {0};
    kcr_err err = watched_set(l, user, &set);
    if (err == KCR_OK)
        err = kcr__reflector_set_label_values(r, set.base, set.key,
                                              (const char *const *)set.values, set.n);
    kcr__label_set_clear(&set);
    return err;
}

bool kcr__shard_labels_watched(shard_labels *l, const kcr_object *obj)
{
    const char *owner = kcr_object_label(obj, l->shard_key);
    if (!owner)
        return false;
    if (strcmp(owner, l->identity) == 0)
        return true;
    pthread_mutex_lock(&l->watch_mu);
    bool found = false;
    for (size_t i = 0; i < l->n_borrowed && !found; i++)
        found = strcmp(owner, l->borrowed[i]) == 0;
    pthread_mutex_unlock(&l->watch_mu);
    return found;
}

bool kcr__shard_labels_draining(const shard_labels *l, const kcr_object *obj)
{
    return kcr_object_label(obj, l->drain_key) != NULL;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Whether `id` is in the sorted array v of n. */
static bool has_id(char *const *v, size_t n, const char *id)
{
    return n && bsearch(&id, v, n, sizeof *v, cmp_str) != NULL;
}

/* Adds a copy of id to *v (n, capacity cap); false when out of memory. */
static bool push_id(char ***v, size_t *n, size_t *cap, const char *id)
{
    char **grown = kcr__grow(*v, cap, *n, sizeof **v, 4);
    char *copy = grown ? strdup(id) : NULL;
    if (grown)
        *v = grown;
    if (!copy)
        return false;
    (*v)[(*n)++] = copy;
    return true;
}

/* Lock held: the borrowed identities after a step whose ring is `now`,
 * the one before being `before`: those kept (not placed again) and the
 * members placed before and not now. True when they changed. Out of
 * memory: unchanged (the cache widens at a later step, or never: the
 * hand-over then waits for the coordinator's writes, as without it). */
static bool follow_ring(shard_labels *l, const kcr__ring *before, const kcr__ring *now)
{
    char **next = NULL;
    size_t n = 0, cap = 0;
    bool ok = true, changed = false;
    for (size_t i = 0; ok && i < l->n_borrowed; i++) {
        bool back = kcr__ring_placed(now, l->borrowed[i]);
        changed = changed || back;
        ok = back || push_id(&next, &n, &cap, l->borrowed[i]);
    }
    for (size_t i = 0; ok && i < kcr__ring_size(before); i++) {
        const char *id = kcr__ring_placed_at(before, i);
        if (!id || kcr__ring_placed(now, id) || strcmp(id, l->identity) == 0 ||
            has_id(l->borrowed, l->n_borrowed, id))
            continue;
        changed = true;
        ok = push_id(&next, &n, &cap, id);
    }
    if (!ok || !changed) {
        borrowed_free(next, n);
        return false;
    }
    qsort(next, n, sizeof *next, cmp_str);
    pthread_mutex_lock(&l->watch_mu);
    char **old = l->borrowed;
    size_t n_old = l->n_borrowed;
    l->borrowed = next;
    l->n_borrowed = n;
    pthread_mutex_unlock(&l->watch_mu);
    borrowed_free(old, n_old);
    return true;
}

/* ---- the coordinator's Lease ---- */

static void coord_started(void *user_data)
{
    mgr_shard *s = user_data;
    pthread_mutex_lock(&s->lock);
    s->labels->coordinating = true;
    s->label_poke = true;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    kcr__log(KCR_LOG_INFO, "shard", "shard ring \"%s\": %s is the ring's coordinator (label writer)",
             s->ring, s->identity);
}

/* The pass checks `coordinating` before each write: none starts after
 * this returns (one already sent is conditional on what it saw). */
static void coord_stopped(void *user_data)
{
    mgr_shard *s = user_data;
    pthread_mutex_lock(&s->lock);
    s->labels->coordinating = false;
    s->labels->unowned = 0;
    if (!s->quit) { /* lost, not stopped: campaign again with a new elector */
        s->labels->elector_lost = true;
        s->label_poke = true;
        pthread_cond_broadcast(&s->cond);
    }
    pthread_mutex_unlock(&s->lock);
    kcr__log(KCR_LOG_INFO, "shard", "shard ring \"%s\": %s is no longer the ring's coordinator",
             s->ring, s->identity);
}

static kcr_err elector_start(mgr_shard *s)
{
    shard_labels *l = s->labels;
    kcr_leader_elector_options o = {.lease_namespace = s->ns,
                                    .lease_name = l->coord_lease,
                                    .identity = s->instance,
                                    .lease_duration_ms = s->lease_ms,
                                    .renew_deadline_ms = s->renew_ms,
                                    .retry_period_ms = s->retry_ms,
                                    .on_started_leading = coord_started,
                                    .on_stopped_leading = coord_stopped,
                                    .user_data = s};
    kcr_err err = kcr_leader_elector_new(s->m->client, &o, &l->elector);
    if (err == KCR_OK)
        err = kcr_leader_elector_start(l->elector);
    if (err != KCR_OK) {
        kcr__refail(err, "shard ring \"%s\": the coordinator's elector: ", s->ring);
        kcr_leader_elector_free(l->elector);
        l->elector = NULL;
    }
    return err;
}

/* ---- writes ---- */

/* W_HANDOFF: the old owner's acknowledgement naming the new owner (the ring
 * owner in its own view) in the same write, so a move between two live
 * replicas costs two writes (drain, hand-off), not three (drain,
 * acknowledgement, assignment). */
typedef enum write_kind { W_ASSIGN, W_DRAIN, W_UNDRAIN, W_ACK, W_HANDOFF } write_kind;

/* One conditional merge patch of metadata.labels. */
static kcr_err write_labels(mgr_shard *s, const kcr__source *src, const char *ns, const char *name,
                            const char *rv, write_kind kind, const char *owner)
{
    shard_labels *l = s->labels;
    char body[1024];
    int n = 0;
    switch (kind) {
    case W_ASSIGN:
    case W_HANDOFF:
        n = snprintf(body, sizeof body,
                     "{\"metadata\":{\"resourceVersion\":\"%s\",\"labels\":{\"%s\":\"%s\","
                     "\"%s\":null}}}",
                     rv, l->shard_key, owner, l->drain_key);
        break;
    case W_DRAIN:
        n = snprintf(body, sizeof body,
                     "{\"metadata\":{\"resourceVersion\":\"%s\",\"labels\":{\"%s\":\"true\"}}}",
                     rv, l->drain_key);
        break;
    case W_UNDRAIN:
        n = snprintf(body, sizeof body,
                     "{\"metadata\":{\"resourceVersion\":\"%s\",\"labels\":{\"%s\":null}}}", rv,
                     l->drain_key);
        break;
    case W_ACK:
        n = snprintf(body, sizeof body,
                     "{\"metadata\":{\"resourceVersion\":\"%s\",\"labels\":{\"%s\":null,"
                     "\"%s\":null}}}",
                     rv, l->shard_key, l->drain_key);
        break;
    }
    if (n < 0 || (size_t)n >= sizeof body)
        return kcr__fail(KCR_ERR_INVALID, "shard labels: resourceVersion \"%s\" too long", rv);
    kcr_resource res = {src->group, src->version, src->resource};
    kcr_err err = kcr_client_patch(s->m->client,
                                   &(kcr_request){.resource = &res,
                                                  .ns = ns,
                                                  .name = name,
                                                  .patch_type = KCR_PATCH_MERGE,
                                                  .body = body,
                                                  .cancel = l->cancel},
                                   NULL);
    static const char *const what[] = {"assigned", "set the drain label on",
                                       "took the drain label off", "acknowledged the drain of",
                                       "acknowledged the drain of and handed off"};
    bool to = kind == W_ASSIGN || kind == W_HANDOFF;
    if (err == KCR_OK)
        kcr__log(KCR_LOG_DEBUG, "shard", "shard ring \"%s\": %s %s %s%s%s%s%s", s->ring,
                 kind >= W_ACK ? s->identity : "the coordinator", what[kind], ns && *ns ? ns : "",
                 ns && *ns ? "/" : "", name, to ? " to " : "", to ? owner : "");
    return err;
}

/* A failed write: a conflict or a vanished object is the normal race (the
 * next pass looks again); anything else is logged. */
static void note_write(mgr_shard *s, kcr_err err, const char *name)
{
    if (err != KCR_OK && err != KCR_ERR_CONFLICT && err != KCR_ERR_NOT_FOUND &&
        err != KCR_ERR_CANCELED)
        kcr__log(KCR_LOG_WARN, "shard", "shard ring \"%s\": writing the shard labels of %s: %s",
                 s->ring, name, kcr_last_error());
}

/* Whether controller i's primary cache is the first of the sharded ones
 * using its informer (informers are shared: visit each once). */
static bool first_sharded(kcr_manager *m, size_t i)
{
    if (!m->ctls[i]->sharded)
        return false;
    for (size_t k = 0; k < i; k++)
        if (m->ctls[k]->sharded && m->ctls[k]->infs[0] == m->ctls[i]->infs[0])
            return false;
    return true;
}

/* ---- acknowledgements ---- */

/* Acknowledges every drain of this replica's objects whose reconcile is not
 * in flight. The check and the admission in the worker both run under
 * s->lock on the cache's latest state: once the drain label is in the cache
 * no reconcile of the object starts, and one already started is seen
 * running here, so the acknowledgement waits for its end. The
 * acknowledgement names the object's ring owner in this replica's view of
 * the ring (W_HANDOFF: the coordinator then has nothing left to write);
 * while that view still names this replica, the two rings disagree and the
 * acknowledgement waits for them to agree (a step or a pass); with no view
 * of the ring (not active) it takes both labels off and leaves the
 * assignment to the coordinator. The label only decides which cache holds
 * the object; admission stays with the Lease protocol, so a hand-off to a
 * replica the coordinator's newer ring disagrees with is drained again.
 * An acknowledgement sent is not sent again while the cache still shows
 * the object at the version it was sent for (l->acked). Label thread only. */
static void ack_drains(mgr_shard *s)
{
    shard_labels *l = s->labels;
    kcr_manager *m = s->m;
    sent_acks kept = {0};
    for (size_t i = 0; i < m->n_ctls; i++) {
        if (!first_sharded(m, i))
            continue;
        const kcr__source *src = &m->ctls[i]->c->sources[0];
        kcr_object_list all = {0};
        if (kcr_store_list(src->cache, &all) != KCR_OK)
            continue;
        for (size_t j = 0; j < all.len; j++) {
            const kcr_object *o = all.items[j];
            const char *owner = kcr_object_label(o, l->shard_key);
            char *key = NULL;
            if (!owner || strcmp(owner, s->identity) != 0 || !kcr__shard_labels_draining(l, o) ||
                kcr_store_key(o, &key) != KCR_OK)
                continue;
            pthread_mutex_lock(&s->lock);
            kcr_object *cur = kcr_store_get_by_key(src->cache, key);
            const char *cur_owner = cur ? kcr_object_label(cur, l->shard_key) : NULL;
            bool ack = cur && cur_owner && strcmp(cur_owner, s->identity) == 0 &&
                       kcr__shard_labels_draining(l, cur) &&
                       !kcr__shard_member_running(s->member,
                                                  kcr_object_shard_hash(cur, s->field));
            if (cur && !ack)
                s->drain_waits = true; /* kcr__mgr_shard_end wakes us */
            const char *target =
                ack && s->coord_ring
                    ? kcr__ring_owner(s->coord_ring, kcr_object_shard_hash(cur, s->field))
                    : NULL;
            if (target && strcmp(target, s->identity) == 0)
                ack = false; /* this replica's ring is behind the coordinator's or ahead of
                                it: the next step or pass agrees (and wakes us) */
            char *rv = ack ? strdup(kcr_object_resource_version(cur)) : NULL;
            char *to = ack && target ? strdup(target) : NULL;
            pthread_mutex_unlock(&s->lock);
            if (rv && sent_acks_has(&l->acked, key, rv)) {
                sent_acks_add(&kept, key, rv); /* sent; its event has not come back yet */
                key = rv = NULL;
            } else if (rv) {
                kcr_err err = write_labels(s, src, kcr_object_namespace(cur), kcr_object_name(cur),
                                           rv, to ? W_HANDOFF : W_ACK, to);
                note_write(s, err, key);
                if (err == KCR_OK) {
                    sent_acks_add(&kept, key, rv);
                    key = rv = NULL;
                }
            }
            free(to);
            free(rv);
            kcr_object_unref(cur);
            free(key);
        }
        kcr_object_list_free(&all);
    }
    sent_acks_clear(&l->acked);
    l->acked = kept;
}

/* ---- the coordinator's pass ---- */

typedef struct decision {
    char *ns, *name, *rv;
    write_kind kind;
    const char *owner; /* borrowed from the pass's ring */
} decision;

typedef struct pass {
    mgr_shard *s;
    const kcr__ring *ring;
    const kcr__shard_published_list *pub; /* what each unexpired Lease publishes */
    decision *d;
    size_t n, cap;
    size_t seen;  /* objects listed */
    size_t waits; /* objects left as they are for now (an acknowledgement, a drain) */
    bool capped;  /* more writes were due than the pass keeps: another pass at once */
    double unowned;
} pass;

static kcr_err decide(kcr_object *o, void *user_data)
{
    pass *p = user_data;
    shard_labels *l = p->s->labels;
    p->seen++;
    uint64_t h = kcr_object_shard_hash(o, p->s->field);
    const char *target = kcr__ring_owner(p->ring, h);
    const char *owner = kcr_object_label(o, l->shard_key);
    bool draining = kcr__shard_labels_draining(l, o);
    bool owner_live = owner && *owner && kcr__ring_placed(p->ring, owner);
    /* no replica may run it: its owner left, or does not publish it (a
     * hand-over under way, a slot kept for a restart) */
    p->unowned += !owner_live || !kcr__shard_published_has(p->pub, owner, h);
    write_kind kind;
    if (!target) {
        p->waits++;
        return KCR_OK;
    }
    if (owner && strcmp(owner, target) == 0) {
        if (!draining)
            return KCR_OK;
        kind = W_UNDRAIN; /* the ring moved it back before the owner acknowledged */
    } else if (!owner || !*owner) {
        kind = W_ASSIGN; /* new, or acknowledged */
    } else if (owner_live) {
        if (draining) {
            p->waits++; /* waiting for the owner's acknowledgement */
            return KCR_OK;
        }
        kind = W_DRAIN;
    } else if (!kcr__shard_published_has(p->pub, owner, h)) {
        kind = W_ASSIGN; /* the owner's Lease expired (past the margin), or was released
                            and drained */
    } else {
        p->waits++; /* its released Lease still drains it */
        return KCR_OK;
    }
    if (p->n >= p->s->labels->pass_writes_max) {
        p->capped = true; /* the next pass, right after this one's writes */
        return KCR_OK;
    }
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 64;
        decision *grown = realloc(p->d, cap * sizeof *grown);
        if (!grown)
            return kcr__fail(KCR_ERR_NOMEM, "out of memory");
        p->d = grown;
        p->cap = cap;
    }
    const char *ns = kcr_object_namespace(o);
    decision *d = &p->d[p->n];
    *d = (decision){.ns = ns ? strdup(ns) : NULL,
                    .name = strdup(kcr_object_name(o)),
                    .rv = strdup(kcr_object_resource_version(o)),
                    .kind = kind,
                    .owner = target};
    if (!d->name || !d->rv || (ns && !d->ns)) {
        free(d->ns);
        free(d->name);
        free(d->rv);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    }
    p->n++;
    return KCR_OK;
}

static bool still_coordinating(mgr_shard *s)
{
    pthread_mutex_lock(&s->lock);
    bool c = s->labels->coordinating && !s->quit;
    pthread_mutex_unlock(&s->lock);
    return c;
}

/* The writes of a pass for one resource, taken in order by up to
 * LABEL_WRITERS threads (the label thread and helpers of this pass): one
 * write at a time took a round trip each, so relabelling the objects of a
 * gone replica ran at a fraction of the client's rate limit. Each write is
 * conditional on its object's version, so their order does not matter. */
enum { LABEL_WRITERS = 8 };

typedef struct write_batch {
    mgr_shard *s;
    const kcr__source *src;
    const decision *d;
    size_t n;
    atomic_size_t next; /* the next decision to write */
} write_batch;

static void *write_some(void *arg)
{
    write_batch *b = arg;
    for (size_t k; (k = atomic_fetch_add(&b->next, 1)) < b->n && still_coordinating(b->s);) {
        const decision *d = &b->d[k];
        note_write(b->s, write_labels(b->s, b->src, d->ns, d->name, d->rv, d->kind, d->owner),
                   d->name);
    }
    return NULL;
}

static void write_all(mgr_shard *s, const kcr__source *src, const decision *d, size_t n)
{
    write_batch b = {.s = s, .src = src, .d = d, .n = n};
    atomic_init(&b.next, 0);
    pthread_t helpers[LABEL_WRITERS - 1];
    size_t started = 0;
    while (started < LABEL_WRITERS - 1 && started + 1 < n &&
           pthread_create(&helpers[started], NULL, write_some, &b) == 0)
        started++; /* a helper that cannot start leaves its share to the others */
    write_some(&b);
    for (size_t i = 0; i < started; i++)
        pthread_join(helpers[i], NULL);
}

/* Whether a and b place the same identities in the same slots. */
static bool same_ring(const kcr__ring *a, const kcr__ring *b)
{
    size_t n = kcr__ring_size(a);
    if (n != kcr__ring_size(b))
        return false;
    for (size_t i = 0; i < n; i++) {
        const char *x = kcr__ring_placed_at(a, i), *y = kcr__ring_placed_at(b, i);
        if (x != y && !(x && y && strcmp(x, y) == 0))
            return false;
    }
    return true;
}

/* Whether `identity` publishes any range in `pub`. */
static bool publishes(const kcr__shard_published_list *pub, const char *identity)
{
    for (size_t i = 0; i < pub->n; i++)
        if (strcmp(pub->items[i].identity, identity) == 0)
            return pub->items[i].ranges.n > 0;
    return false;
}

/* The label selector of the objects no running member of `ring` owns, on
 * top of the source's (`user`, may be NULL): `<shard key> notin
 * (<members>)` naming the members that publish ranges (not a slot kept
 * for a restart: its objects are listed, to be counted unowned), which
 * also matches objects without the label; the source's alone when none
 * publishes. Malloc'd; NULL when out of memory. */
static char *unowned_selector(const shard_labels *l, const kcr__ring *ring,
                              const kcr__shard_published_list *pub, const char *user)
{
    size_t len = (user ? strlen(user) : 0) + strlen(l->shard_key) + 16;
    for (size_t i = 0; i < kcr__ring_size(ring); i++) {
        const char *id = kcr__ring_placed_at(ring, i);
        len += id ? strlen(id) + 1 : 0;
    }
    char *out = malloc(len);
    if (!out)
        return NULL;
    size_t at = (size_t)snprintf(out, len, "%s%s%s notin (", user && *user ? user : "",
                                 user && *user ? "," : "", l->shard_key);
    bool first = true;
    for (size_t i = 0; i < kcr__ring_size(ring); i++) {
        const char *id = kcr__ring_placed_at(ring, i);
        if (!id || !publishes(pub, id))
            continue;
        at += (size_t)snprintf(out + at, len - at, "%s%s", first ? "" : ",", id);
        first = false;
    }
    if (first) /* no member publishes: every object is unowned */
        snprintf(out, len, "%s", user ? user : "");
    else
        snprintf(out + at, len - at, ")");
    return out;
}

/* Lists the sharded resources and writes what the ring says. A full pass
 * lists every object. Once one found nothing to write and nothing to wait
 * for, the passes under the same ring list only the objects no member
 * owns (unowned_selector: new objects, those of members that left): every
 * other object has its ring owner's label and no drain label, and only a
 * ring change, which this pass alone acts on, or a label written by
 * someone else changes that. A full pass runs again on a ring change, when
 * an unowned pass failed, and every FULL_PASS_EVERY passes (such a label).
 * At 10^5 objects this takes the coordinator's list of every object's
 * metadata per retry period down to the few objects that need a label. */
enum { FULL_PASS_EVERY = 30 };


static void coordinate(mgr_shard *s)
{
    shard_labels *l = s->labels;
    kcr_manager *m = s->m;
    pass p = {.s = s};
    kcr__ring *ring = NULL;
    kcr__shard_published_list pub = {0};
    pthread_mutex_lock(&s->lock);
    bool go = l->coordinating && s->coord_ring &&
              kcr__ring_copy(s->coord_ring, &ring) == KCR_OK &&
              kcr__shard_member_published(s->member, &pub) == KCR_OK;
    pthread_mutex_unlock(&s->lock);
    if (!go) { /* another coordinator may act meanwhile: start again from a full pass */
        kcr__ring_free(l->quiet_ring);
        l->quiet_ring = NULL;
    }
    bool full = !l->quiet_ring || !ring || !same_ring(l->quiet_ring, ring) ||
                l->since_full >= FULL_PASS_EVERY;
    p.ring = ring;
    p.pub = &pub;
    bool listed = go;
    for (size_t i = 0; go && i < m->n_ctls; i++) {
        if (!first_sharded(m, i))
            continue;
        const kcr__source *src = &m->ctls[i]->c->sources[0];
        kcr_resource res = {src->group, src->version, src->resource};
        char *unowned = full ? NULL : unowned_selector(l, ring, &pub, src->label_selector);
        size_t first = p.n;
        size_t seen = p.seen;
        kcr_err err = !full && !unowned
                          ? kcr__fail(KCR_ERR_NOMEM, "out of memory")
                          : kcr_client_list(m->client,
                                            &(kcr_request){.resource = &res,
                                                           .ns = src->ns,
                                                           .label_selector =
                                                               full ? src->label_selector : unowned,
                                                           .metadata_only = true,
                                                           .cancel = l->cancel},
                                            decide, &p, NULL);
        free(unowned);
        kcr_metric_add(full ? s->coord_full : s->coord_unowned, (double)(p.seen - seen));
        if (err != KCR_OK) {
            listed = false;
            if (err != KCR_ERR_CANCELED)
                kcr__log(KCR_LOG_WARN, "shard", "shard ring \"%s\": the coordinator's list of %s: %s",
                         s->ring, src->resource, kcr_last_error());
            continue;
        }
        write_all(s, src, p.d + first, p.n - first);
    }
    for (size_t k = 0; k < p.n; k++) {
        free(p.d[k].ns);
        free(p.d[k].name);
        free(p.d[k].rv);
    }
    free(p.d);
    if (go && full) {
        kcr__ring_free(l->quiet_ring);
        /* quiet: nothing written or waited for, under a ring with a member
         * (an unowned pass's selector names them) */
        l->quiet_ring = listed && !p.n && !p.waits && kcr__ring_owner(ring, 0) ? ring : NULL;
        if (l->quiet_ring)
            ring = NULL; /* kept */
        l->since_full = 0;
    } else if (go && listed) {
        l->since_full++;
    } else if (go) {
        kcr__ring_free(l->quiet_ring); /* an unowned pass failed: a full one next */
        l->quiet_ring = NULL;
    }
    kcr__ring_free(ring);
    kcr__shard_published_list_clear(&pub);
    pthread_mutex_lock(&s->lock);
    if (listed && l->coordinating)
        l->unowned = p.unowned;
    if (p.capped)
        s->label_poke = true;
    pthread_mutex_unlock(&s->lock);
}

void kcr__shard_labels_set_pass_writes(shard_labels *l, size_t n)
{
    l->pass_writes_max = n;
}

void kcr__shard_labels_rewatch(mgr_shard *s)
{
    shard_labels *l = s->labels;
    kcr_manager *m = s->m;
    char *who = kcr__shard_labels_selector(l, NULL);
    kcr__log(KCR_LOG_INFO, "shard", "shard ring \"%s\": %s: the primary caches select %s",
             s->ring, s->identity, who ? who : "(out of memory)");
    free(who);
    for (size_t i = 0; i < m->n_ctls; i++) {
        if (!first_sharded(m, i))
            continue;
        kcr_err err = kcr__shard_labels_select(l, kcr_informer_reflector(m->ctls[i]->infs[0]),
                                               m->ctls[i]->c->sources[0].label_selector);
        if (err != KCR_OK)
            kcr__log(KCR_LOG_ERROR, "shard", "shard ring \"%s\": a primary cache's label selector: %s",
                     s->ring, kcr_last_error());
    }
}

/* ---- the label thread ---- */

static void *label_main(void *arg)
{
    mgr_shard *s = arg;
    shard_labels *l = s->labels;
    pthread_mutex_lock(&s->lock);
    while (!s->quit) {
        s->label_poke = false;
        s->drain_waits = false;
        bool lost = l->elector_lost;
        l->elector_lost = false;
        int64_t start = kcr__now_ns();
        pthread_mutex_unlock(&s->lock);
        if (lost) {
            kcr_leader_elector_stop(l->elector);
            kcr_leader_elector_free(l->elector);
            l->elector = NULL;
        }
        if (lost || !l->elector) {
            kcr_err err = elector_start(s);
            if (err != KCR_OK)
                kcr__log(KCR_LOG_WARN, "shard", "%s", kcr_last_error());
        }
        ack_drains(s);
        coordinate(s);
        pthread_mutex_lock(&s->lock);
        int64_t next = start + s->retry_ms * KCR_NS_PER_MS;
        struct timespec ts = kcr__timespec_at(next);
        while (!s->quit && !s->label_poke && kcr__now_ns() < next)
            pthread_cond_timedwait(&s->cond, &s->lock, &ts);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

kcr_err kcr__shard_labels_start(mgr_shard *s)
{
    shard_labels *l = s->labels;
    kcr_err err = elector_start(s);
    if (err != KCR_OK)
        return err;
    if (pthread_create(&l->thread, NULL, label_main, s) != 0) {
        kcr_leader_elector_stop(l->elector);
        return kcr__fail(KCR_ERR_NOMEM, "cannot start the shard label thread");
    }
    l->started = true;
    return KCR_OK;
}

void kcr__shard_labels_stop(mgr_shard *s)
{
    shard_labels *l = s->labels;
    if (!l->started)
        return;
    kcr_cancel_trigger(l->cancel); /* s->quit is set: the thread ends after its pass */
    pthread_mutex_lock(&s->lock);
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    pthread_join(l->thread, NULL);
    l->started = false;
    if (l->elector)
        kcr_leader_elector_stop(l->elector); /* releases the coordinator Lease if held */
}

bool kcr__shard_labels_after_step(mgr_shard *s)
{
    const kcr__ring *r = kcr__shard_member_ring(s->member);
    if (r != s->ring_seen)
        s->label_poke = true; /* the ring changed (or stopped being known) */
    s->ring_seen = r;
    bool rewatch = r && s->coord_ring && follow_ring(s->labels, s->coord_ring, r);
    /* An active member that wants nothing settles a cold start (member.c):
     * its ring is not yet the one the replicas starting with it agree on,
     * so the coordinator labels nothing by it (the first replica labelled,
     * and cached, every object for itself until the others' Leases
     * appeared). */
    bool settling = kcr__shard_member_state(s->member) == KCR__SHARD_ACTIVE &&
                    !kcr__shard_member_want(s->member)->n;
    if (!s->coord_ring && r && !settling)
        s->label_poke = true; /* a ring to label by again */
    kcr__ring_free(s->coord_ring);
    s->coord_ring = NULL;
    if (r && !settling && kcr__ring_copy(r, &s->coord_ring) != KCR_OK)
        s->coord_ring = NULL; /* out of memory: no pass until the next step */
    return rewatch;
}

bool kcr__shard_labels_coordinating(mgr_shard *s, double *unowned)
{
    pthread_mutex_lock(&s->lock);
    bool c = s->labels->coordinating;
    if (unowned)
        *unowned = s->labels->unowned;
    pthread_mutex_unlock(&s->lock);
    return c;
}
