/* The manager's shard member (docs/sharding.md, "In the manager"): the
 * shard layer's member (shard/member.c) run like leader/'s elector.
 *
 * - The member's thread steps it every retry period, sooner when asked
 *   (a reconcile of a lost range ended, a leave, another member's Lease
 *   changed: manager_shard_watch.c), and at its fence time.
 * - Its Lease requests run on a request thread; the member's thread waits
 *   for each until min(now + renew deadline, the member's fence time) and
 *   then abandons it (cancelling it), so a hung request cannot delay the
 *   fence. While it waits, the member's lock is released (the condition
 *   wait), so workers keep asking for admission (member.h allows it).
 * - The member's clock is the wall clock read once at start, advanced by
 *   the monotonic clock: the renew deadline (a difference of it) is
 *   monotonic, as leader/ measures it, and the times written on the Lease
 *   are wall-clock times; a wall-clock step after start is not followed
 *   (other replicas see it as skew, which the member reports).
 * - After each step, outside the lock: at a fence every in-flight
 *   reconcile of a sharded controller is cancelled; the keys of gained
 *   ranges in the primary caches are enqueued; in server mode the primary
 *   caches' shard selector follows want ∪ admitted ∪ draining, in every
 *   mode the owned caches' (manager_shard_children.c); once every cache
 *   relisted a new selection, the freed heap goes back to the system; in label
 *   mode a copy of the member's ring goes to the label thread
 *   (manager_shard_label.c), under the lock.
 * - Admission reads the key's cached object under the lock: in label mode
 *   an object carrying the drain label is never started, and the label
 *   thread's acknowledgement makes the same check under the same lock.
 *
 * mgr_shard is in manager_shard_internal.h. */
#include <inttypes.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "controller/manager_internal.h"
#include "core/abi.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "informer/informer_internal.h"
#include "shard/lease_store.h"
#include "shard/member.h"
#include "shard/ring.h"

#include "controller/manager_shard_internal.h"

/* kcr_shard_handover_seconds buckets. */
static const double handover_buckets[] = {0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 15, 20, 30, 60, 120};

static const char *const state_names[] = {"joining", "probing", "active",  "fenced",
                                          "leaving", "left",    "refused"};

static int64_t member_now(const mgr_shard *s)
{
    return s->anchor_wall_ms + (kcr__now_ns() - s->anchor_mono_ns) / KCR_NS_PER_MS;
}

/* A time of the member's clock as a monotonic instant. */
static int64_t mono_of(const mgr_shard *s, int64_t member_ms)
{
    return s->anchor_mono_ns + (member_ms - s->anchor_wall_ms) * KCR_NS_PER_MS;
}

/* ---- the request thread and the member's store ---- */

static void *call_main(void *arg)
{
    mgr_shard *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (s->call != CALL_PENDING && !s->calls_quit)
            pthread_cond_wait(&s->cond, &s->lock);
        if (s->call != CALL_PENDING)
            break;
        s->call = CALL_RUNNING;
        call_op op = s->op;
        kcr__shard_lease lease = s->call_lease;
        memset(&s->call_lease, 0, sizeof s->call_lease);
        pthread_mutex_unlock(&s->lock);

        kcr__shard_lease_list list = {0};
        char *version = NULL;
        kcr_err err = op == OP_LIST
                          ? s->inner->ops->list(s->call_ring, &list, s->inner->user_data)
                          : s->inner->ops->put(s->call_ring, &lease, &version, s->inner->user_data);
        char *msg = err != KCR_OK ? strdup(kcr_last_error()) : NULL;
        kcr__shard_lease_clear(&lease);

        pthread_mutex_lock(&s->lock);
        if (s->call_abandoned) {
            kcr__shard_lease_list_clear(&list);
            free(version);
            free(msg);
            kcr_cancel_reset(s->call_cancel); /* no request uses it now */
            s->call_abandoned = false;
            s->call = CALL_IDLE;
        } else {
            s->call_list = list;
            s->call_version = version;
            s->call_msg = msg;
            s->call_err = err;
            s->call = CALL_DONE;
        }
        pthread_cond_broadcast(&s->cond);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* Waits (lock held; released while waiting) until the slot is `want`, the
 * deadline passes or the requests stop. */
static void wait_call(mgr_shard *s, call_state want, int64_t deadline_ns)
{
    struct timespec ts = kcr__timespec_at(deadline_ns);
    while (s->call != want && !s->calls_quit && kcr__now_ns() < deadline_ns)
        pthread_cond_timedwait(&s->cond, &s->lock, &ts);
}

/* Runs one request on the request thread, from the member's sync (lock
 * held): waits until the renew deadline from now or the member's fence
 * time, whichever is first, then abandons it (KCR_ERR_TIMEOUT). */
static kcr_err call(mgr_shard *s, call_op op, const char *ring, const kcr__shard_lease *lease,
                    kcr__shard_lease_list *list, char **version)
{
    int64_t deadline = kcr__now_ns() + s->renew_ms * KCR_NS_PER_MS;
    int64_t fence = kcr__shard_member_fence_at(s->member);
    if (fence != INT64_MAX && mono_of(s, fence) < deadline)
        deadline = mono_of(s, fence);
    wait_call(s, CALL_IDLE, deadline);
    if (s->calls_quit)
        return kcr__fail(KCR_ERR_CANCELED, "shard ring \"%s\": stopping", s->ring);
    if (s->call != CALL_IDLE)
        return kcr__fail(KCR_ERR_TIMEOUT,
                         "shard ring \"%s\": an earlier Lease request is still running", s->ring);
    free(s->call_ring);
    s->call_ring = strdup(ring);
    kcr_err err = s->call_ring ? KCR_OK : kcr__fail(KCR_ERR_NOMEM, "out of memory");
    if (err == KCR_OK && op == OP_PUT)
        err = kcr__shard_lease_copy(lease, &s->call_lease);
    if (err != KCR_OK)
        return err;
    s->op = op;
    s->call = CALL_PENDING;
    pthread_cond_broadcast(&s->cond);
    wait_call(s, CALL_DONE, deadline);
    if (s->call == CALL_DONE) {
        err = s->call_err;
        if (op == OP_LIST) {
            *list = s->call_list;
        } else {
            kcr__shard_lease_list_clear(&s->call_list);
            *version = s->call_version;
        }
        memset(&s->call_list, 0, sizeof s->call_list);
        s->call_version = NULL;
        if (err != KCR_OK)
            kcr__fail(err, "%s", s->call_msg ? s->call_msg : kcr_strerror(err));
        free(s->call_msg);
        s->call_msg = NULL;
        s->call = CALL_IDLE;
        return err;
    }
    if (s->call == CALL_PENDING) { /* never started: take it back */
        kcr__shard_lease_clear(&s->call_lease);
        s->call = CALL_IDLE;
    } else {
        s->call_abandoned = true;
        kcr_cancel_trigger(s->call_cancel); /* a hung request returns now */
    }
    return s->calls_quit ? kcr__fail(KCR_ERR_CANCELED, "shard ring \"%s\": stopping", s->ring)
                         : kcr__fail(KCR_ERR_TIMEOUT,
                                     "shard ring \"%s\": a Lease request ran past its deadline",
                                     s->ring);
}

static kcr_err outer_list(const char *ring, kcr__shard_lease_list *out, void *user_data)
{
    kcr__shard_lease_list_clear(out);
    return call(user_data, OP_LIST, ring, NULL, out, NULL);
}

static kcr_err outer_put(const char *ring, const kcr__shard_lease *lease, char **version,
                         void *user_data)
{
    *version = NULL;
    return call(user_data, OP_PUT, ring, lease, NULL, version);
}

static const kcr__lease_store_ops outer_ops = {outer_list, outer_put};

/* ---- after a step: cancel, enqueue, selectors, metrics ---- */

/* The shard hash of obj on s's field. */
static uint64_t obj_hash(const mgr_shard *s, const kcr_object *obj)
{
    return kcr_object_shard_hash(obj, s->field);
}

/* Enqueues every object of the sharded primary caches hashing into `gained`. */
static void enqueue_gained(mgr_shard *s, const kcr__ranges *gained)
{
    kcr_manager *m = s->m;
    for (size_t i = 0; i < m->n_ctls; i++) {
        mgr_ctl *mc = m->ctls[i];
        if (!mc->sharded)
            continue;
        kcr_object_list all = {0};
        if (kcr_store_list(mc->c->sources[0].cache, &all) != KCR_OK)
            continue;
        for (size_t j = 0; j < all.len; j++) {
            const kcr_object *o = all.items[j];
            char *key = NULL;
            if (!kcr__ranges_contains(gained, obj_hash(s, o)) || kcr_store_key(o, &key) != KCR_OK)
                continue;
            kcr_trigger t = {.reason = KCR_REASON_ENQUEUED,
                             .kind = mc->c->sources[0].kind,
                             .ns = kcr_object_namespace(o),
                             .name = kcr_object_name(o)};
            kcr__controller_enqueue_uid(mc->c, key, &t, kcr_object_uid(o), KCR_WQ_PRIORITY_LOW);
            free(key);
        }
        kcr_object_list_free(&all);
    }
}

/* Server mode: sets the shard selector of every sharded primary cache to `sel`. */
static void set_selectors(mgr_shard *s, const kcr__ranges *sel)
{
    if (s->mode != KCR_SHARD_SERVER)
        return;
    char *text = NULL;
    if (sel->n ? kcr_shard_selector_format(s->field, sel->r, sel->n, &text) != KCR_OK
               : !(text = strdup(s->initial_selector)))
        return;
    kcr_manager *m = s->m;
    for (size_t i = 0; i < m->n_ctls; i++) {
        mgr_ctl *mc = m->ctls[i];
        bool seen = false; /* informers are shared: set each once */
        for (size_t k = 0; k < i && !seen; k++)
            seen = m->ctls[k]->sharded && m->ctls[k]->infs[0] == mc->infs[0];
        if (mc->sharded && !seen &&
            kcr_reflector_set_shard_selector(kcr_informer_reflector(mc->infs[0]), text) != KCR_OK)
            kcr__log(KCR_LOG_ERROR, "shard", "shard ring \"%s\": setting the selector: %s",
                     s->ring, kcr_last_error());
    }
    free(text);
}

/* Whether every sharded primary cache listed with its newest selector. */
static bool primaries_listed(const mgr_shard *s)
{
    const kcr_manager *m = s->m;
    for (size_t i = 0; i < m->n_ctls; i++) {
        if (!m->ctls[i]->sharded)
            continue;
        kcr_reflector *r = kcr_informer_reflector(m->ctls[i]->infs[0]);
        if (!kcr__reflector_shard_listed(r, kcr__reflector_shard_gen(r)))
            return false;
    }
    return true;
}

/* The objects the sharded primary caches hold. */
static size_t primaries_held(const mgr_shard *s)
{
    const kcr_manager *m = s->m;
    size_t n = 0;
    for (size_t i = 0; i < m->n_ctls; i++)
        if (m->ctls[i]->sharded)
            n += kcr_store_len(m->ctls[i]->c->sources[0].cache);
    return n;
}

/* A relist for a new selection leaves freed memory that malloc keeps: the
 * objects of a smaller selection, and, wherever the client filters (the
 * owned caches, filter mode, a server ignoring the selector), every object
 * of the collection decoded and dropped on the way (at 10^5 objects a
 * replica that only gained ranges kept some 15 MB of it). So do objects
 * that leave a cache one event at a time, as a label ring's are relabelled
 * away from the replica that held them (at 5,000 Foos the first replica of
 * a cold ring kept its peak, twice the others' RSS). Once every cache
 * following the shard listed the new selection, or the primary caches hold
 * a quarter fewer objects than at their peak since the last time, the
 * freed pages go back to the system (glibc's malloc_trim; with another C
 * library, nothing is done). Member's thread only. */
static void give_back_heap(mgr_shard *s, bool reselected)
{
    enum { SHRINK_MIN = 256 }; /* objects: below that, a trim is not worth a heap walk */
    if (reselected) {
        s->trim_due = true;
        return;
    }
    size_t held = primaries_held(s);
    if (held > s->held_peak)
        s->held_peak = held;
    bool shrank = s->held_peak - held >= SHRINK_MIN && held <= s->held_peak / 4 * 3;
    bool relisted = s->trim_due && !atomic_load(&s->children_pending) && primaries_listed(s);
    if (!shrank && !relisted)
        return;
    if (relisted)
        s->trim_due = false;
    s->held_peak = held;
#ifdef __GLIBC__
    /* One trim at a time in the process. Behind another allocator (ASan,
     * TSan) glibc's malloc is first set up by a malloc_trim, and that set-up
     * is not safe from two threads at once: two sharded managers of one
     * process trimming together each took glibc's main arena as their
     * thread's, and glibc aborted at the second thread's exit
     * ("a->attached_threads > 0"). */
    static pthread_mutex_t trim_lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&trim_lock);
    malloc_trim(0);
    pthread_mutex_unlock(&trim_lock);
#endif
}

/* What a step changed, for the work done outside the lock. */
typedef struct effects {
    bool cancel;        /* it stopped being active (fence, refusal): cancel in-flight reconciles */
    bool refused;       /* stop the manager */
    kcr__ranges gained; /* newly admitted */
    bool reselect;      /* set the selectors (primaries in server mode, owned caches) to `selection` */
    kcr__ranges selection;
    double handover_s; /* < 0: none */
    kcr__shard_state state;
} effects;

/* Under the lock, after a step that began at start_ns: what changed since
 * the last one. */
static void observe(mgr_shard *s, kcr__shard_state st, int64_t start_ns, effects *e)
{
    const kcr__shard_member *mb = s->member;
    e->state = st;
    e->handover_s = -1;
    e->cancel = s->state == KCR__SHARD_ACTIVE && st != KCR__SHARD_ACTIVE &&
                st != KCR__SHARD_LEAVING && st != KCR__SHARD_LEFT;
    e->refused = st == KCR__SHARD_REFUSED && !s->refused;
    if (e->refused)
        s->refused = strdup(kcr__shard_member_error(mb));
    s->state = st;
    const kcr__ranges *admitted = kcr__shard_member_admitted(mb);
    if (kcr__ranges_subtract(admitted, &s->admitted, &e->gained) != KCR_OK ||
        kcr__ranges_copy(admitted, &s->admitted) != KCR_OK)
        kcr__ranges_clear(&s->admitted); /* out of memory: the next step sees it all gained */
    /* hand-over: from the first step wanting a range not admitted to its admission */
    kcr__ranges missing = {0};
    kcr__ranges_subtract(kcr__shard_member_want(mb), admitted, &missing);
    int64_t now = kcr__now_ns();
    if (e->gained.n) /* wanted since an earlier step, or since this one began */
        e->handover_s = (double)(now - (s->want_since_ns ? s->want_since_ns : start_ns)) / 1e9;
    if (!missing.n)
        s->want_since_ns = 0;
    else if (!s->want_since_ns || e->gained.n)
        s->want_since_ns = now;
    kcr__ranges_clear(&missing);
    /* only an active member moves the selectors: a fenced one (the API
     * unreachable) keeps its cache for when it is back, a leaving one is
     * about to stop its caches */
    if ((s->mode == KCR_SHARD_SERVER || s->n_children) && st == KCR__SHARD_ACTIVE) {
        kcr__ranges a = {0};
        if (kcr__ranges_union(kcr__shard_member_want(mb), admitted, &a) == KCR_OK &&
            kcr__ranges_union(&a, kcr__shard_member_draining(mb), &e->selection) == KCR_OK &&
            !kcr__ranges_equal(&e->selection, &s->selection)) {
            e->reselect = true;
            kcr__ranges_copy(&e->selection, &s->selection);
        }
        kcr__ranges_clear(&a);
    }
}

/* Outside the lock: acts on what observe() found. */
static void apply(mgr_shard *s, effects *e)
{
    kcr_manager *m = s->m;
    kcr_metric_set(s->state_metric, (double)e->state);
    if (e->cancel) {
        kcr__log(KCR_LOG_WARN, "shard",
                 "shard ring \"%s\": %s is %s: cancelling its in-flight reconciles", s->ring,
                 s->identity, state_names[e->state]);
        for (size_t i = 0; i < m->n_ctls; i++)
            if (m->ctls[i]->sharded)
                kcr__mgr_cancel_all(m->ctls[i]);
    }
    if (e->reselect) {
        set_selectors(s, &e->selection);
        kcr__shard_children_reselect(s, &e->selection);
    }
    kcr__shard_children_refresh(s); /* also when no worker asks */
    give_back_heap(s, e->reselect);
    if (e->gained.n) {
        kcr_metric_add(s->moves, (double)e->gained.n);
        if (e->handover_s >= 0)
            kcr_metric_observe(s->handover, e->handover_s);
        enqueue_gained(s, &e->gained);
    }
    if (e->refused) {
        kcr__log(KCR_LOG_ERROR, "shard", "%s", s->refused ? s->refused : "refused");
        kcr_manager_stop(m);
    }
    kcr__ranges_clear(&e->gained);
    kcr__ranges_clear(&e->selection);
}

static void *step_main(void *arg)
{
    mgr_shard *s = arg;
    pthread_mutex_lock(&s->lock);
    while (!s->quit) {
        s->poke = false;
        int64_t start = kcr__now_ns();
        kcr_err err = kcr__shard_member_sync(s->member, member_now(s));
        if (err != KCR_OK && err != KCR_ERR_EXISTS &&
            (!s->last_err || strcmp(s->last_err, kcr_last_error()) != 0)) {
            kcr__log(KCR_LOG_INFO, "shard", "shard ring \"%s\": %s: step failed: %s", s->ring,
                     s->identity, kcr_last_error());
            free(s->last_err);
            s->last_err = strdup(kcr_last_error());
        } else if (err == KCR_OK && s->last_err) {
            free(s->last_err);
            s->last_err = NULL;
        }
        kcr__shard_state before = s->state;
        effects e = {0};
        observe(s, kcr__shard_member_check(s->member, member_now(s)), start, &e);
        bool rewatch = s->labels && kcr__shard_labels_after_step(s);
        pthread_cond_broadcast(&s->cond); /* kcr__mgr_shard_stop waits for LEFT */
        bool soon = e.state != before || e.gained.n || s->want_since_ns;
        pthread_mutex_unlock(&s->lock);
        if (rewatch)
            kcr__shard_labels_rewatch(s);
        apply(s, &e);
        pthread_mutex_lock(&s->lock);
        /* the next step: a retry period on, a quarter of it while something
         * moves, at the fence time at the latest, or when poked */
        int64_t next = start + (soon ? s->retry_ms / 4 : s->retry_ms) * KCR_NS_PER_MS;
        int64_t fence = kcr__shard_member_fence_at(s->member);
        if (fence != INT64_MAX && mono_of(s, fence) + KCR_NS_PER_MS < next)
            next = mono_of(s, fence) + KCR_NS_PER_MS;
        struct timespec ts = kcr__timespec_at(next);
        while (!s->quit && !s->poke && kcr__now_ns() < next)
            pthread_cond_timedwait(&s->cond, &s->lock, &ts);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* ---- metrics ---- */

static void collect(kcr_metrics *reg, void *user_data)
{
    (void)reg;
    mgr_shard *s = user_data;
    kcr__ranges admitted = {0}, covered = {0};
    pthread_mutex_lock(&s->lock);
    kcr_err err = kcr__ranges_copy(kcr__shard_member_admitted(s->member), &admitted);
    if (err == KCR_OK)
        err = kcr__ranges_copy(kcr__shard_member_covered(s->member), &covered);
    int64_t ahead_ms = kcr__shard_member_ahead_ms(s->member);
    bool synced = s->state != KCR__SHARD_JOINING; /* covered is empty before the first list */
    pthread_mutex_unlock(&s->lock);
    kcr_metric_set(s->skew, (double)ahead_ms / 1e3);
    uint64_t measure = kcr__ranges_measure(&covered); /* UINT64_MAX: the whole space */
    if (err == KCR_OK && synced)
        kcr_metric_set(s->uncovered, measure == UINT64_MAX
                                         ? 0
                                         : 1 - (double)measure / 18446744073709551616.0);
    kcr_manager *m = s->m;
    double unowned = 0;
    /* the controller list is final once the manager ran */
    for (size_t i = 0; err == KCR_OK && atomic_load(&m->ran) && i < m->n_ctls; i++) {
        mgr_ctl *mc = m->ctls[i];
        if (!mc->sharded)
            continue;
        kcr_object_list all = {0};
        if (kcr_store_list(mc->c->sources[0].cache, &all) != KCR_OK)
            continue;
        double owned = 0;
        for (size_t j = 0; j < all.len; j++) {
            uint64_t h = obj_hash(s, all.items[j]);
            owned += kcr__ranges_contains(&admitted, h);
            unowned += !kcr__ranges_contains(&covered, h);
        }
        kcr_object_list_free(&all);
        const char *v[] = {mc->c->name};
        kcr_metric *series = NULL;
        if (kcr_metric_family_series(s->owned_family, v, &series) == KCR_OK)
            kcr_metric_set(series, owned);
    }
    double coord_unowned = 0; /* label mode: the coordinator counts every object */
    if (s->labels && kcr__shard_labels_coordinating(s, &coord_unowned))
        unowned += coord_unowned;
    if (err == KCR_OK)
        kcr_metric_set(s->unowned, unowned);
    kcr__ranges_clear(&admitted);
    kcr__ranges_clear(&covered);
}

static kcr_err family(kcr_metrics *reg, const kcr_metric_desc *d, kcr_metric_family **out)
{
    return kcr_metrics_register(reg, d, out);
}

static kcr_err instrument(mgr_shard *s)
{
    kcr_metrics *reg = s->m->metrics;
    static const char *const ri_l[] = {"ring", "identity"}, *const r_l[] = {"ring"},
                             *const c_l[] = {"controller"};
    const char *ri_v[] = {s->ring, s->identity}, *r_v[] = {s->ring};
    kcr_metric_family *f = NULL;
    kcr_err err = family(
        reg,
        &(kcr_metric_desc){.name = "kcr_shard_state",
                           .help = "The shard member's state: 0 joining, 1 probing, 2 active, 3 "
                                   "fenced, 4 leaving, 5 left, 6 refused",
                           .type = KCR_METRIC_GAUGE,
                           .label_names = ri_l,
                           .n_labels = 2},
        &f);
    if (err == KCR_OK)
        err = kcr_metric_family_series(f, ri_v, &s->state_metric);
    if (err == KCR_OK)
        err = family(reg,
                     &(kcr_metric_desc){.name = "kcr_shard_owned_objects",
                                        .help = "Objects of the controller's primary cache this "
                                                "replica admits",
                                        .type = KCR_METRIC_GAUGE,
                                        .label_names = c_l,
                                        .n_labels = 1},
                     &s->owned_family);
    if (err == KCR_OK)
        err = family(reg,
                     &(kcr_metric_desc){.name = "kcr_shard_unowned_objects",
                                        .help = "Objects of the sharded primary caches that no "
                                                "live Lease of the ring publishes",
                                        .type = KCR_METRIC_GAUGE,
                                        .label_names = r_l,
                                        .n_labels = 1},
                     &f);
    if (err == KCR_OK)
        err = kcr_metric_family_series(f, r_v, &s->unowned);
    if (err == KCR_OK)
        err = family(reg,
                     &(kcr_metric_desc){.name = "kcr_shard_uncovered_ratio",
                                        .help = "Share of the hash space (0 to 1) that no live "
                                                "Lease of the ring publishes: its keys run on no "
                                                "replica (a hand-over, a slot kept for a "
                                                "restart, a crashed replica's ranges)",
                                        .type = KCR_METRIC_GAUGE,
                                        .label_names = r_l,
                                        .n_labels = 1},
                     &f);
    if (err == KCR_OK)
        err = kcr_metric_family_series(f, r_v, &s->uncovered);
    if (err == KCR_OK)
        err = family(reg,
                     &(kcr_metric_desc){.name = "kcr_shard_moves_total",
                                        .help = "Hash ranges this replica gained",
                                        .type = KCR_METRIC_COUNTER,
                                        .label_names = r_l,
                                        .n_labels = 1},
                     &f);
    if (err == KCR_OK)
        err = kcr_metric_family_series(f, r_v, &s->moves);
    if (err == KCR_OK)
        err = family(reg,
                     &(kcr_metric_desc){.name = "kcr_shard_handover_seconds",
                                        .help = "From the step that first wanted a range this "
                                                "replica did not admit to its admission",
                                        .type = KCR_METRIC_HISTOGRAM,
                                        .label_names = r_l,
                                        .n_labels = 1,
                                        .buckets = handover_buckets,
                                        .n_buckets = sizeof handover_buckets /
                                                     sizeof *handover_buckets},
                     &f);
    if (err == KCR_OK)
        err = kcr_metric_family_series(f, r_v, &s->handover);
    if (err == KCR_OK)
        err = family(reg,
                     &(kcr_metric_desc){.name = "kcr_shard_clock_skew_seconds",
                                        .help = "How far ahead of this replica's clock another "
                                                "replica's Lease was last renewed (0: none); "
                                                "past the skew margin the hand-over guarantee "
                                                "no longer holds",
                                        .type = KCR_METRIC_GAUGE,
                                        .label_names = r_l,
                                        .n_labels = 1},
                     &f);
    if (err == KCR_OK)
        err = kcr_metric_family_series(f, r_v, &s->skew);
    static const char *const rp_l[] = {"ring", "pass"};
    const char *full_v[] = {s->ring, "full"}, *unowned_v[] = {s->ring, "unowned"};
    if (err == KCR_OK && s->labels)
        err = family(reg,
                     &(kcr_metric_desc){.name = "kcr_shard_coordinator_listed_objects_total",
                                        .help = "Objects the ring's coordinator listed while this "
                                                "replica was it: in full passes (every object) "
                                                "and unowned passes (objects no member owns)",
                                        .type = KCR_METRIC_COUNTER,
                                        .label_names = rp_l,
                                        .n_labels = 2},
                     &f);
    if (err == KCR_OK && s->labels)
        err = kcr_metric_family_series(f, full_v, &s->coord_full);
    if (err == KCR_OK && s->labels)
        err = kcr_metric_family_series(f, unowned_v, &s->coord_unowned);
    if (err == KCR_OK)
        err = kcr_metrics_add_collector(reg, collect, s);
    return err;
}

/* ---- lifecycle ---- */

static int64_t or_default(int64_t v, int64_t def)
{
    return v ? v : def;
}

static kcr_err check(const kcr_manager *m, const kcr_sharding_options *o)
{
    if (kcr__abi_reserved(o->reserved, sizeof o->reserved, "kcr_sharding_options") != KCR_OK)
        return KCR_ERR_INVALID; /* detail: kcr__abi_reserved */
    if (o->reserved_u8[0] || o->reserved_u8[1] || o->reserved_u8[2])
        return kcr__fail(KCR_ERR_INVALID,
                         "kcr_sharding_options: reserved_u8 is not zero (a field this library "
                         "does not have?)");
    if (o->mode != KCR_SHARD_FILTER && o->mode != KCR_SHARD_SERVER && o->mode != KCR_SHARD_LABEL)
        return kcr__fail(KCR_ERR_INVALID, "kcr_manager_new: sharding.mode %d is unknown",
                         (int)o->mode);
    if (o->label_keys != KCR_SHARD_LABELS_KCR && o->label_keys != KCR_SHARD_LABELS_TIMEBERTT)
        return kcr__fail(KCR_ERR_INVALID, "kcr_manager_new: sharding.label_keys %d is unknown",
                         (int)o->label_keys);
    if (o->field != KCR_SHARD_BY_UID && o->field != KCR_SHARD_BY_NAMESPACE)
        return kcr__fail(KCR_ERR_INVALID, "kcr_manager_new: sharding.field %d is unknown",
                         (int)o->field);
    if (m->opts.leader_election)
        return kcr__fail(KCR_ERR_INVALID, "kcr_manager_new: sharding and leader_election are "
                                          "exclusive (a sharded manager runs on every replica)");
    if (m->cache_defaults && m->cache_defaults->reflector.shard_selector)
        return kcr__fail(KCR_ERR_INVALID,
                         "kcr_manager_new: sharding and cache_defaults.reflector.shard_selector "
                         "are exclusive (the shard decides the selector)");
    const int64_t *d[] = {&o->lease_duration_ms, &o->renew_deadline_ms, &o->retry_period_ms,
                          &o->skew_margin_ms, &o->restart_grace_ms};
    static const char *const names[] = {"lease_duration_ms", "renew_deadline_ms",
                                        "retry_period_ms", "skew_margin_ms", "restart_grace_ms"};
    for (size_t i = 0; i < sizeof d / sizeof *d; i++)
        if (*d[i] < 0 || *d[i] > KCR__MAX_DURATION_MS)
            return kcr__fail(KCR_ERR_INVALID, "kcr_manager_new: sharding.%s %lld is out of range",
                             names[i], (long long)*d[i]);
    return KCR_OK;
}

/* This replica's default identity: $POD_NAME, else the hostname. */
static char *default_identity(void)
{
    const char *pod = getenv("POD_NAME");
    if (pod && *pod)
        return strdup(pod);
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0 || !*host)
        snprintf(host, sizeof host, "replica");
    return strdup(host);
}

kcr_err kcr__mgr_shard_new(kcr_manager *m, const kcr_sharding_options *o, mgr_shard **out)
{
    *out = NULL;
    kcr_err err = check(m, o);
    if (err != KCR_OK)
        return err;
    mgr_shard *s = calloc(1, sizeof *s);
    if (!s)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory making a shard member");
    pthread_mutex_init(&s->lock, NULL);
    kcr__cond_init_monotonic(&s->cond);
    s->m = m;
    s->mode = o->mode;
    s->field = o->field;
    s->label_keys = o->label_keys;
    s->lease_ms = or_default(o->lease_duration_ms, 15000);
    s->renew_ms = or_default(o->renew_deadline_ms, 10000);
    s->retry_ms = or_default(o->retry_period_ms, 2000);
    s->margin_ms = or_default(o->skew_margin_ms, 2000);
    s->ring = strdup(o->ring && *o->ring ? o->ring : m->name);
    s->identity = o->identity && *o->identity ? strdup(o->identity) : default_identity();
    s->ns = strdup(o->lease_namespace && *o->lease_namespace ? o->lease_namespace
                                                              : kcr_client_namespace(m->client));
    s->anchor_wall_ms = kcr__wall_ns() / KCR_NS_PER_MS;
    s->anchor_mono_ns = kcr__now_ns();
    char inst[64];
    snprintf(inst, sizeof inst, "_%ld_%" PRIx64, (long)getpid(), (uint64_t)kcr__wall_ns());
    if (s->identity && (s->instance = malloc(strlen(s->identity) + strlen(inst) + 1)))
        strcat(strcpy(s->instance, s->identity), inst);
    s->state = KCR__SHARD_JOINING;
    if (!s->ring || !s->identity || !s->ns || !s->instance)
        err = kcr__fail(KCR_ERR_NOMEM, "out of memory making a shard member");
    if (err == KCR_OK && s->mode == KCR_SHARD_SERVER)
        err = kcr_shard_selector_format(s->field, &(kcr_shard_range){0, 1}, 1,
                                        &s->initial_selector);
    s->child_field =
        s->field == KCR_SHARD_BY_NAMESPACE ? KCR_SHARD_BY_NAMESPACE : KCR_SHARD_BY_CONTROLLER;
    s->child_buckets = o->child_bucket_selector && s->child_field == KCR_SHARD_BY_CONTROLLER;
    if (err == KCR_OK)
        err = kcr_shard_selector_format(s->child_field, &(kcr_shard_range){0, 1}, 1,
                                        &s->child_initial_selector);
    if (err == KCR_OK)
        err = kcr_cancel_new(&s->call_cancel);
    if (err == KCR_OK)
        err = kcr__lease_store_client_new(m->client, s->ns, &s->inner);
    if (err == KCR_OK) {
        kcr__lease_store_client_set_cancel(s->inner, s->call_cancel);
        s->outer = (kcr__lease_store){&outer_ops, s};
        kcr__shard_member_config c = {.ring = s->ring,
                                      .identity = s->identity,
                                      .instance = s->instance,
                                      .lease_ms = s->lease_ms,
                                      .renew_deadline_ms = s->renew_ms,
                                      .retry_ms = s->retry_ms,
                                      .margin_ms = s->margin_ms,
                                      .restart_grace_ms = o->restart_grace_ms};
        err = kcr__shard_member_new(&c, &s->outer, &s->member);
        if (err != KCR_OK)
            kcr__refail(err, "kcr_manager_new: sharding: ");
    }
    if (err == KCR_OK && s->mode == KCR_SHARD_LABEL)
        err = kcr__shard_labels_new(s, &s->labels);
    if (err == KCR_OK)
        err = instrument(s);
    if (err != KCR_OK) {
        kcr__mgr_shard_free(s);
        return err;
    }
    *out = s;
    return KCR_OK;
}

const char *kcr__mgr_shard_initial_selector(const mgr_shard *s)
{
    return s->initial_selector;
}

bool kcr__mgr_shard_moved_away(const mgr_shard *s, const kcr_object *obj)
{
    return s->labels && !kcr__shard_labels_watched(s->labels, obj);
}

kcr_err kcr__mgr_shard_label_selector(const mgr_shard *s, const char *user, char **out)
{
    *out = NULL;
    if (!s->labels)
        return KCR_OK;
    *out = kcr__shard_labels_selector(s->labels, user);
    return *out ? KCR_OK : kcr__fail(KCR_ERR_NOMEM, "out of memory");
}

kcr_err kcr__mgr_shard_label_cache(const mgr_shard *s, kcr_informer *inf, const char *user)
{
    return s->labels ? kcr__shard_labels_select(s->labels, kcr_informer_reflector(inf), user)
                     : KCR_OK;
}

void kcr__manager_shard_set_pass_writes(kcr_manager *m, size_t n)
{
    if (m->shard && m->shard->labels)
        kcr__shard_labels_set_pass_writes(m->shard->labels, n);
}

kcr_err kcr__mgr_shard_start(mgr_shard *s)
{
    if (pthread_create(&s->call_thread, NULL, call_main, s) != 0)
        return kcr__fail(KCR_ERR_NOMEM, "cannot start the shard member's request thread");
    if (pthread_create(&s->step_thread, NULL, step_main, s) != 0) {
        pthread_mutex_lock(&s->lock);
        s->calls_quit = true;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
        pthread_join(s->call_thread, NULL);
        return kcr__fail(KCR_ERR_NOMEM, "cannot start the shard member's thread");
    }
    s->started = true;
    kcr_err werr = kcr__shard_watch_start(s);
    if (werr != KCR_OK) {
        kcr__mgr_shard_stop(s, 0);
        return werr;
    }
    if (s->labels) {
        kcr_err err = kcr__shard_labels_start(s);
        if (err != KCR_OK) {
            kcr__mgr_shard_stop(s, 0);
            return err;
        }
    }
    kcr__log(KCR_LOG_INFO, "shard", "shard ring \"%s\": %s (instance %s) joining, Leases in %s",
             s->ring, s->identity, s->instance, s->ns);
    return KCR_OK;
}

void kcr__mgr_shard_leave(mgr_shard *s)
{
    pthread_mutex_lock(&s->lock);
    kcr__shard_member_leave(s->member);
    s->poke = true;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

void kcr__mgr_shard_stop(mgr_shard *s, int64_t deadline_ns)
{
    if (!s->started)
        return;
    pthread_mutex_lock(&s->lock);
    struct timespec ts = kcr__timespec_at(deadline_ns);
    while (s->state != KCR__SHARD_LEFT && s->state != KCR__SHARD_REFUSED &&
           kcr__now_ns() < deadline_ns)
        pthread_cond_timedwait(&s->cond, &s->lock, &ts);
    if (s->state != KCR__SHARD_LEFT && s->state != KCR__SHARD_REFUSED)
        kcr__log(KCR_LOG_WARN, "shard",
                 "shard ring \"%s\": %s did not release its Lease in time (%s): its ranges move "
                 "when it expires",
                 s->ring, s->identity, state_names[s->state]);
    pthread_mutex_unlock(&s->lock);
    kcr__shard_watch_stop(s); /* its handler takes the lock */
    pthread_mutex_lock(&s->lock);
    s->quit = s->calls_quit = true;
    if (s->call == CALL_RUNNING)
        kcr_cancel_trigger(s->call_cancel);
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->step_thread, NULL);
    pthread_join(s->call_thread, NULL);
    if (s->labels)
        kcr__shard_labels_stop(s);
    s->started = false;
}

void kcr__mgr_shard_free(mgr_shard *s)
{
    if (!s)
        return;
    kcr__mgr_shard_stop(s, 0);
    kcr__shard_labels_free(s->labels);
    kcr__ring_free(s->coord_ring);
    kcr__shard_member_free(s->member);
    kcr__lease_store_client_free(s->inner);
    kcr_cancel_free(s->call_cancel);
    kcr__shard_lease_clear(&s->call_lease);
    kcr__shard_lease_list_clear(&s->call_list);
    free(s->call_version);
    free(s->call_msg);
    free(s->call_ring);
    kcr__ranges_clear(&s->admitted);
    kcr__ranges_clear(&s->selection);
    kcr__shard_children_free(s);
    free(s->last_err);
    free(s->refused);
    free(s->initial_selector);
    free(s->ring);
    free(s->identity);
    free(s->ns);
    free(s->instance);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
    free(s);
}

/* ---- admission ---- */

/* The shard hash of the key: its namespace (BY_NAMESPACE), else the uid of
 * the cached object, else the last uid a change of it recorded. false:
 * not to be reconciled here: no object and no uid seen, or, in label mode,
 * no object and neither a deletion of it seen in this replica's cache nor
 * a retry or requeue a reconcile here asked for. A label
 * ring's object reaches a replica's cache only once labelled for it, after
 * its hash was admitted there: a child's change in between must not run a
 * reconcile that finds no object and could take it for deleted; the
 * object's arrival enqueues the key. *draining: label mode, the cached
 * object carries the drain label; *cached: the primary cache holds it. */
static bool key_hash(const mgr_shard *s, mgr_ctl *mc, const char *key, const mgr_keyrec *rec,
                     uint64_t *hash, bool *draining, bool *cached)
{
    kcr_object *o = kcr_store_get_by_key(mc->c->sources[0].cache, key);
    *cached = o != NULL;
    *draining = o && s->labels && kcr__shard_labels_draining(s->labels, o);
    bool known = true;
    if (s->field == KCR_SHARD_BY_NAMESPACE) {
        const char *slash = strchr(key, '/');
        *hash = kcr_shard_hash(key, slash ? (size_t)(slash - key) : 0);
    } else if (o) {
        *hash = kcr_object_shard_hash(o, KCR_SHARD_BY_UID);
    } else {
        *hash = rec->p.uid_hash;
        known = rec->p.has_uid;
    }
    /* label mode, no object: only a deletion seen here, or a retry or
     * requeue a reconcile here asked for */
    const uint32_t ran_here = KCR_REASON_BIT(KCR_REASON_PRIMARY_DELETED) |
                              KCR_REASON_BIT(KCR_REASON_RETRY) |
                              KCR_REASON_BIT(KCR_REASON_REQUEUE_AFTER);
    if (!o && s->labels && !(rec->p.reasons & ran_here))
        known = false;
    kcr_object_unref(o);
    return known;
}

kcr__admission kcr__mgr_shard_begin(mgr_shard *s, mgr_worker *w, const char *key,
                                    const mgr_keyrec *rec, uint64_t *hash)
{
    kcr__shard_children_refresh(s);
    /* the cache is read under the lock: label mode's acknowledgement
     * (manager_shard_label.c) reads it under the lock too, so a reconcile
     * either starts before the drain label is seen or not at all */
    pthread_mutex_lock(&s->lock);
    bool draining = false, cached = false;
    if (!key_hash(s, w->mc, key, rec, hash, &draining, &cached)) {
        pthread_mutex_unlock(&s->lock);
        kcr__log(KCR_LOG_DEBUG, "shard",
                 "controller \"%s\": %s: no cached object (%s): not reconciled here",
                 w->mc->c->name, key,
                 s->labels ? "not labelled for this replica" : "and no uid seen");
        return KCR__ADMIT_DROP;
    }
    if (draining) { /* moving to another replica: acknowledge, never start */
        s->label_poke = true;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
        return KCR__ADMIT_DROP;
    }
    /* server mode: a key not cached while its primary cache lists a new
     * selection may be in it (a range gained in the step that admitted it) */
    kcr_reflector *primary = kcr_informer_reflector(w->mc->infs[0]);
    bool primary_listing = !cached && s->mode == KCR_SHARD_SERVER &&
                           !kcr__reflector_shard_listed(primary, kcr__reflector_shard_gen(primary));
    kcr__admission a =
        (primary_listing || !kcr__shard_children_hold(s, *hash)) &&
                kcr__ranges_contains(kcr__shard_member_admitted(s->member), *hash)
            ? KCR__ADMIT_SOON /* its object or its children are still being listed */
        : kcr__shard_member_begin(s->member, *hash, member_now(s)) ? KCR__ADMIT_RUN
        : kcr__shard_member_wants(s->member, *hash)                ? KCR__ADMIT_LATER
                                                                   : KCR__ADMIT_DROP;
    w->shard = (kcr_shard_member_info){s->ring, s->identity, kcr__shard_member_slot(s->member)};
    pthread_mutex_unlock(&s->lock);
    return a;
}

void kcr__mgr_shard_end(mgr_shard *s, uint64_t hash)
{
    pthread_mutex_lock(&s->lock);
    kcr__shard_member_end(s->member, hash);
    /* the end of a reconcile in a lost range: acknowledge it at once */
    if (!kcr__ranges_contains(kcr__shard_member_admitted(s->member), hash)) {
        s->poke = true;
        pthread_cond_broadcast(&s->cond);
    }
    if (s->drain_waits) { /* label mode: a drain label waits for a reconcile's end */
        s->label_poke = true;
        pthread_cond_broadcast(&s->cond);
    }
    pthread_mutex_unlock(&s->lock);
}

int64_t kcr__mgr_shard_retry_ms(const mgr_shard *s)
{
    return s->retry_ms;
}

char *kcr__mgr_shard_refused(mgr_shard *s)
{
    pthread_mutex_lock(&s->lock);
    char *r = s->refused ? strdup(s->refused) : NULL;
    pthread_mutex_unlock(&s->lock);
    return r;
}

void kcr__mgr_shard_info(mgr_shard *s, kcr_shard_member_info *out)
{
    pthread_mutex_lock(&s->lock);
    *out = (kcr_shard_member_info){s->ring, s->identity, kcr__shard_member_slot(s->member)};
    pthread_mutex_unlock(&s->lock);
}

/* Whether a sharded primary cache filters on the client (the server
 * ignored its selector). */
static bool server_ignored(mgr_shard *s)
{
    kcr_manager *m = s->m;
    for (size_t i = 0; s->mode == KCR_SHARD_SERVER && atomic_load(&m->ran) && i < m->n_ctls;
         i++) {
        if (!m->ctls[i]->sharded)
            continue;
        kcr_reflector_stats st = {0};
        kcr_reflector_get_stats(kcr_informer_reflector(m->ctls[i]->infs[0]), &st);
        if (st.shard_mode == KCR_SHARD_SELECTOR_CLIENT)
            return true;
    }
    return false;
}

kcr_err kcr__mgr_shard_ready(mgr_shard *s, char **text)
{
    *text = NULL;
    pthread_mutex_lock(&s->lock);
    kcr__shard_state st = kcr__shard_member_check(s->member, member_now(s));
    char *ranges = NULL;
    kcr_err err = kcr__ranges_format(kcr__shard_member_admitted(s->member), &ranges);
    char *skew = strdup(kcr__shard_member_skew(s->member));
    char *problem = strdup(kcr__shard_member_problem(s->member));
    int slot = kcr__shard_member_slot(s->member);
    char *refused = s->refused ? strdup(s->refused) : NULL;
    pthread_mutex_unlock(&s->lock);
    bool ignored = server_ignored(s);
    bool coordinating = s->labels && kcr__shard_labels_coordinating(s, NULL);
    size_t cap = 512 + (ranges ? strlen(ranges) : 0) + (skew ? strlen(skew) : 0) +
                 (problem ? strlen(problem) : 0) + (refused ? strlen(refused) : 0);
    char *out = malloc(cap);
    if (err == KCR_OK && out && skew && problem)
        snprintf(out, cap, "shard ring \"%s\": %s %s (slot %d), admitted [%s]%s%s%s%s%s%s%s%s",
                 s->ring, s->identity, state_names[st], slot, ranges,
                 s->mode == KCR_SHARD_SERVER  ? "; mode server"
                 : s->mode == KCR_SHARD_LABEL ? (coordinating ? "; mode label, the ring's coordinator"
                                                              : "; mode label")
                                              : "; mode filter",
                 ignored ? " (the apiserver ignored the shard selector: filtering on the client)"
                         : "",
                 *skew ? "; " : "", skew, *problem ? "; " : "", problem, refused ? "; " : "",
                 refused ? refused : "");
    else if (out)
        snprintf(out, cap, "shard ring \"%s\": %s %s", s->ring, s->identity, state_names[st]);
    free(ranges);
    free(skew);
    free(problem);
    free(refused);
    *text = out;
    if (!out)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    return st == KCR__SHARD_ACTIVE ? KCR_OK : kcr__fail(KCR_ERR_STATE, "%s", out);
}
