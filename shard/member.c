/* One replica's membership in a shard ring and the hand-over protocol
 * (member.h, docs/sharding.md "The protocol"). */
#include "shard/member.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "shard/ring.h"

struct kcr__shard_member {
    kcr__shard_member_config cfg; /* strings below */
    char *ring, *identity, *instance;
    const kcr__lease_store *store;
    kcr__shard_state state;
    char error[320];
    int slot;
    kcr__ranges admitted, draining, published;
    kcr__ranges want;     /* what the ring gave it at the last step (empty unless active) */
    kcr__ranges covered;  /* what the live Leases published at the last step, ours included */
    kcr__shard_published_list pub; /* ... per Lease */
    kcr__ranges legacy;   /* what a previous instance of our identity published */
    int64_t legacy_until; /* ... and until when it may still be reconciling there */
    uint64_t *inflight;   /* hashes of reconciles in flight (a multiset) */
    size_t ninflight, capinflight;
    bool written;          /* last_ok_ms / last_write_ms are set */
    int64_t last_ok_ms;    /* when the last successful write was sent */
    int64_t last_write_ms; /* when the last write was sent */
    int64_t probe_renew_ms, probe_until_ms;
    char *probe_holder;
    char skew[320];    /* the last clock-skew report, "" while none */
    char skew_of[64];  /* whose Lease it was about (truncated), for logging once */
    int64_t ahead_ms;  /* the furthest another Lease's renewal lay ahead at the last step */
    char problem[320]; /* the last report of a malformed Lease in the ring, "" while none */
    kcr__ring *cached; /* the last ring built, reused while its members stay */
    bool cached_is_step; /* cached is the ring of the last step of an active member */
    int64_t active_since_ms;  /* when it last joined */
    int64_t ring_changed_ms;  /* when the members of its step's ring last changed */
    bool settle_logged;       /* the cold-start wait was announced */
};

kcr_err kcr__shard_member_new(const kcr__shard_member_config *config, const kcr__lease_store *store,
                              kcr__shard_member **out)
{
    *out = NULL;
    const kcr__shard_member_config *c = config;
    if (!c || !store || !c->ring || !*c->ring || !c->identity || !*c->identity || !c->instance ||
        !*c->instance)
        return kcr__fail(KCR_ERR_INVALID, "shard member: a ring, an identity, an instance and a "
                                          "Lease store are required");
    if (c->lease_ms <= 0 || c->renew_deadline_ms <= 0 || c->retry_ms <= 0 || c->margin_ms < 0 ||
        c->renew_deadline_ms >= c->lease_ms || c->retry_ms >= c->renew_deadline_ms ||
        c->restart_grace_ms < 0)
        return kcr__fail(KCR_ERR_INVALID,
                         "shard member \"%s\": need 0 < retry (%lld ms) < renew deadline (%lld ms) "
                         "< lease duration (%lld ms), a margin >= 0 (%lld ms) and a restart "
                         "grace >= 0 (%lld ms)",
                         c->identity, (long long)c->retry_ms, (long long)c->renew_deadline_ms,
                         (long long)c->lease_ms, (long long)c->margin_ms,
                         (long long)c->restart_grace_ms);
    kcr__shard_member *m = calloc(1, sizeof *m);
    if (!m)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory creating a shard member");
    m->cfg = *c;
    m->ring = strdup(c->ring);
    m->identity = strdup(c->identity);
    m->instance = strdup(c->instance);
    if (!m->ring || !m->identity || !m->instance) {
        kcr__shard_member_free(m);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory creating a shard member");
    }
    m->store = store;
    m->state = KCR__SHARD_JOINING;
    m->slot = -1;
    *out = m;
    return KCR_OK;
}

void kcr__shard_member_free(kcr__shard_member *m)
{
    if (!m)
        return;
    free(m->ring);
    free(m->identity);
    free(m->instance);
    kcr__ranges_clear(&m->admitted);
    kcr__ranges_clear(&m->draining);
    kcr__ranges_clear(&m->published);
    kcr__ranges_clear(&m->want);
    kcr__ranges_clear(&m->covered);
    kcr__shard_published_list_clear(&m->pub);
    kcr__ranges_clear(&m->legacy);
    free(m->inflight);
    free(m->probe_holder);
    kcr__ring_free(m->cached);
    free(m);
}

static bool expired(const kcr__shard_member *m, const kcr__shard_lease *l, int64_t now)
{
    return now > l->renew_ms + l->duration_ms + m->cfg.margin_ms;
}

/* Whether l takes part in the ring: unexpired, and held or kept for the
 * restart of its identity. */
static bool placed(const kcr__shard_member *m, const kcr__shard_lease *l, int64_t now)
{
    return *l->identity && (*l->holder || l->restarting) && !expired(m, l, now);
}

static kcr__shard_lease *find_own(const kcr__shard_member *m, kcr__shard_lease_list *list)
{
    for (size_t i = 0; i < list->n; i++)
        if (strcmp(list->items[i].identity, m->identity) == 0)
            return &list->items[i];
    return NULL;
}

/* *dst = *dst op src, with a scratch set. */
static kcr_err apply(kcr_err (*op)(const kcr__ranges *, const kcr__ranges *, kcr__ranges *),
                     kcr__ranges *dst, const kcr__ranges *src)
{
    kcr__ranges res = {0};
    kcr_err err = op(dst, src, &res);
    if (err == KCR_OK) {
        kcr__ranges_clear(dst);
        *dst = res;
    }
    return err;
}

/* Stops admitting everything: what was admitted drains. Callers also move
 * the state off ACTIVE, so begin() admits nothing even when this fails (out
 * of memory): the admitted set then drains at the next step. */
static kcr_err stop_admitting(kcr__shard_member *m)
{
    kcr__ranges_clear(&m->want);
    kcr_err err = apply(kcr__ranges_union, &m->draining, &m->admitted);
    if (err == KCR_OK)
        kcr__ranges_clear(&m->admitted);
    return err;
}

static void fence_if_late(kcr__shard_member *m, int64_t now)
{
    if (m->state == KCR__SHARD_ACTIVE && now - m->last_ok_ms >= m->cfg.renew_deadline_ms) {
        stop_admitting(m);
        m->state = KCR__SHARD_FENCED;
    }
}

/* The ranges other members' unexpired Leases publish, plus our legacy. */
static kcr_err others_held(const kcr__shard_member *m, const kcr__shard_lease_list *list,
                           int64_t now, kcr__ranges *out)
{
    kcr_err err = kcr__ranges_copy(&m->legacy, out);
    for (size_t i = 0; i < list->n && err == KCR_OK; i++) {
        const kcr__shard_lease *l = &list->items[i];
        if (strcmp(l->identity, m->identity) == 0 || expired(m, l, now) || !*l->held)
            continue;
        kcr__ranges held = {0};
        err = kcr__ranges_parse(l->held, &held);
        if (err == KCR_ERR_PARSE) /* unreadable: it may hold anything */
            err = kcr__ranges_append(&held, 0, 0);
        if (err == KCR_OK)
            err = apply(kcr__ranges_union, out, &held);
        kcr__ranges_clear(&held);
    }
    return err;
}

/* The ring of the live Leases; ours counts (with m->slot) only when
 * `with_self`. Borrowed from m until the next call. */
static kcr_err ring_of(kcr__shard_member *m, const kcr__shard_lease_list *list, int64_t now,
                       bool with_self, const kcr__ring **out)
{
    kcr__ring_member *members = calloc(list->n + 1, sizeof *members);
    if (!members)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory building the shard ring");
    size_t n = 0;
    for (size_t i = 0; i < list->n; i++) {
        const kcr__shard_lease *l = &list->items[i];
        if (strcmp(l->identity, m->identity) != 0 && placed(m, l, now))
            members[n++] = (kcr__ring_member){l->identity, l->slot};
    }
    if (with_self)
        members[n++] = (kcr__ring_member){m->identity, m->slot};
    kcr_err err = KCR_OK;
    if (!kcr__ring_same_members(m->cached, members, n)) {
        kcr__ring *fresh = NULL;
        err = kcr__ring_build(members, n, &fresh);
        if (err == KCR_OK) {
            kcr__ring_free(m->cached);
            m->cached = fresh;
            if (with_self)
                m->ring_changed_ms = now;
        }
    }
    free(members);
    *out = err == KCR_OK ? m->cached : NULL;
    return err;
}

/* Writes our Lease: holder (instance, or "" to release, keeping the slot
 * for a restart when configured), renewTime now, our slot, `publish` as
 * the held ranges. */
static kcr_err write_lease(kcr__shard_member *m, const char *version, const kcr__ranges *publish,
                           bool release, int64_t now)
{
    char *held = NULL;
    kcr_err err = kcr__ranges_format(publish, &held);
    if (err != KCR_OK)
        return err;
    bool keep = release && m->cfg.restart_grace_ms > 0;
    kcr__shard_lease l = {.identity = m->identity,
                          .holder = release ? "" : m->instance,
                          .duration_ms = keep && m->cfg.restart_grace_ms > m->cfg.lease_ms
                                             ? m->cfg.restart_grace_ms
                                             : m->cfg.lease_ms,
                          .renew_ms = now,
                          .slot = m->slot,
                          .held = held,
                          .restarting = keep,
                          .version = (char *)(version ? version : "")};
    char *new_version = NULL;
    err = m->store->ops->put(m->ring, &l, &new_version, m->store->user_data);
    free(new_version);
    free(held);
    m->last_write_ms = now;
    if (err != KCR_OK)
        return err;
    if (!release) {
        m->written = true;
        m->last_ok_ms = now;
    }
    return kcr__ranges_copy(publish, &m->published);
}

static kcr_err refuse(kcr__shard_member *m, const char *fmt, const char *holder)
{
    stop_admitting(m);
    snprintf(m->error, sizeof m->error, fmt, m->identity, m->ring, holder);
    m->state = KCR__SHARD_REFUSED;
    return kcr__fail(KCR_ERR_EXISTS, "%s", m->error);
}

/* JOINING / PROBING: take our identity's Lease, unless another instance
 * holds it and keeps renewing it. */
static kcr_err join(kcr__shard_member *m, const kcr__shard_lease_list *list,
                    const kcr__shard_lease *own, int64_t now)
{
    kcr_err err = KCR_OK;
    if (own && !expired(m, own, now) && strcmp(own->holder, m->instance) != 0) {
        if (*own->holder && m->state == KCR__SHARD_JOINING) {
            free(m->probe_holder);
            m->probe_holder = strdup(own->holder);
            if (!m->probe_holder)
                return kcr__fail(KCR_ERR_NOMEM, "out of memory joining a shard ring");
            m->probe_renew_ms = own->renew_ms;
            m->probe_until_ms = now + 2 * m->cfg.retry_ms + m->cfg.margin_ms;
            m->state = KCR__SHARD_PROBING;
            return KCR_OK;
        }
        if (*own->holder &&
            (own->renew_ms != m->probe_renew_ms || strcmp(own->holder, m->probe_holder) != 0))
            return refuse(m,
                          "shard identity \"%s\" of ring \"%s\" is held by instance \"%s\", "
                          "which is still renewing its Lease: refusing to start a second replica "
                          "with that identity",
                          own->holder);
        if (*own->holder && now < m->probe_until_ms)
            return KCR_OK;
        /* A previous instance (gone, or released and draining): keep what it
         * published until its Lease would expire. */
        err = kcr__ranges_parse(own->held, &m->legacy);
        if (err == KCR_ERR_PARSE)
            err = kcr__ranges_append(&m->legacy, 0, 0);
        m->legacy_until = own->renew_ms + own->duration_ms + m->cfg.margin_ms;
    }
    const kcr__ring *others = NULL;
    if (err == KCR_OK)
        err = ring_of(m, list, now, false, &others);
    if (err != KCR_OK)
        return err;
    m->slot = own && own->slot >= 0 && !kcr__ring_slot_held(others, own->slot)
                  ? own->slot
                  : kcr__ring_free_slot(others);
    if (m->slot >= KCR__RING_MAX_SLOTS)
        return kcr__fail(KCR_ERR_STATE, "shard ring \"%s\" is full (%d members)", m->ring,
                         KCR__RING_MAX_SLOTS);
    kcr__ranges publish = {0};
    err = kcr__ranges_union(&m->legacy, &m->draining, &publish);
    if (err == KCR_OK)
        err = write_lease(m, own ? own->version : "", &publish, false, now);
    kcr__ranges_clear(&publish);
    if (err == KCR_OK) {
        m->state = KCR__SHARD_ACTIVE;
        m->active_since_ms = m->ring_changed_ms = now;
    }
    return err;
}

static int by_hash(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Shrinks `draining` to the hashes of the reconciles still in flight in it
 * (outside what is admitted again): one-hash ranges, so the next owner can
 * start every other key of a lost range at once. */
static kcr_err drop_drained(kcr__shard_member *m)
{
    kcr__ranges still = {0};
    kcr_err err = apply(kcr__ranges_subtract, &m->draining, &m->admitted);
    if (err == KCR_OK && !m->cfg.ack_before_drain && m->ninflight > 0) {
        qsort(m->inflight, m->ninflight, sizeof *m->inflight, by_hash);
        for (size_t k = 0; k < m->ninflight && err == KCR_OK; k++) {
            uint64_t h = m->inflight[k];
            if (kcr__ranges_contains(&m->draining, h) &&
                !(still.n && kcr_shard_range_contains(still.r[still.n - 1], h)))
                err = kcr__ranges_append(&still, h, h + 1); /* h + 1 wraps to 0: 2^64 */
        }
    }
    if (err == KCR_OK) {
        kcr__ranges_clear(&m->draining);
        m->draining = still;
    } else {
        kcr__ranges_clear(&still);
    }
    return err;
}

/* Claims `claim`: it was just published; admit what a fresh list shows no
 * one else publishing. */
static kcr_err confirm_claim(kcr__shard_member *m, const kcr__ranges *claim, int64_t now)
{
    kcr__shard_lease_list list = {0};
    kcr__ranges others = {0}, ok = {0};
    kcr_err err = m->store->ops->list(m->ring, &list, m->store->user_data);
    if (err == KCR_OK)
        err = others_held(m, &list, now, &others);
    if (err == KCR_OK)
        err = kcr__ranges_subtract(claim, &others, &ok);
    if (err == KCR_OK)
        err = apply(kcr__ranges_union, &m->admitted, &ok);
    kcr__ranges_clear(&others);
    kcr__ranges_clear(&ok);
    kcr__shard_lease_list_clear(&list);
    return err;
}

/* A cold start: nobody publishes anything (no previous instance of ours
 * either) and it holds nothing. Then it wants nothing until the ring's
 * members have stayed the same for two retry periods (at most a lease
 * duration after it joined), so that replicas starting together compute
 * the ring with each other instead of the first one claiming, and caching,
 * the whole ring. A join to a ring where anyone publishes does not wait:
 * there the current owners keep the keys until the newcomer claims them. */
static bool settling(kcr__shard_member *m, const kcr__ranges *others, int64_t now)
{
    bool cold = !others->n && !m->admitted.n && !m->draining.n;
    bool wait = cold && now - m->active_since_ms < m->cfg.lease_ms &&
                now - m->ring_changed_ms < 2 * m->cfg.retry_ms;
    if (wait && !m->settle_logged)
        kcr__log(KCR_LOG_INFO, "shard",
                 "shard ring \"%s\": %s starts a cold ring: claiming once its members stay "
                 "the same for %lld ms",
                 m->ring, m->identity, (long long)(2 * m->cfg.retry_ms));
    m->settle_logged = m->settle_logged || wait;
    return wait;
}

/* ACTIVE / FENCED / LEAVING: follow the ring, drain, acknowledge, claim. */
static kcr_err step(kcr__shard_member *m, const kcr__shard_lease_list *list,
                    const kcr__shard_lease *own, int64_t now)
{
    if (!own) { /* our Lease was deleted */
        kcr_err err = stop_admitting(m);
        m->state = m->state == KCR__SHARD_LEAVING ? KCR__SHARD_LEFT : KCR__SHARD_JOINING;
        return err;
    }
    if (*own->holder && strcmp(own->holder, m->instance) != 0)
        return refuse(m,
                      "shard identity \"%s\" of ring \"%s\" was taken over by instance \"%s\" "
                      "while this one could not renew its Lease",
                      own->holder);
    if (m->legacy.n && now > m->legacy_until)
        kcr__ranges_clear(&m->legacy);
    bool active = m->state == KCR__SHARD_ACTIVE;
    const kcr__ring *ring = NULL;
    kcr_err err = ring_of(m, list, now, active, &ring);
    bool moved_slot = false;
    if (err == KCR_OK && active && !kcr__ring_placed(ring, m->identity)) {
        /* lost a contested slot: take the lowest free one */
        err = ring_of(m, list, now, false, &ring);
        if (err == KCR_OK && kcr__ring_free_slot(ring) < KCR__RING_MAX_SLOTS) {
            m->slot = kcr__ring_free_slot(ring);
            moved_slot = true;
            err = ring_of(m, list, now, true, &ring);
        }
    }
    kcr__ranges want = {0}, lost = {0}, others = {0}, claim = {0}, publish = {0};
    m->cached_is_step = err == KCR_OK && active;
    if (err == KCR_OK && active)
        err = others_held(m, list, now, &others);
    if (err == KCR_OK && active && !settling(m, &others, now))
        err = kcr__ring_ranges(ring, m->identity, &want);
    if (err == KCR_OK)
        err = kcr__ranges_copy(&want, &m->want);
    if (err == KCR_OK)
        err = kcr__ranges_subtract(&m->admitted, &want, &lost);
    if (err == KCR_OK)
        err = apply(kcr__ranges_intersect, &m->admitted, &want);
    if (err == KCR_OK)
        err = apply(kcr__ranges_union, &m->draining, &lost);
    if (err == KCR_OK)
        err = drop_drained(m);
    if (err == KCR_OK && active)
        err = kcr__ranges_subtract(&want, &m->admitted, &claim);
    if (err == KCR_OK && active)
        err = apply(kcr__ranges_subtract, &claim, &others);
    if (err == KCR_OK)
        err = kcr__ranges_union(&m->admitted, &m->draining, &publish);
    if (err == KCR_OK)
        err = apply(kcr__ranges_union, &publish, &claim);
    if (err == KCR_OK)
        err = apply(kcr__ranges_union, &publish, &m->legacy);
    /* Leaves once drained and past what a previous instance published (its
     * Lease would otherwise pass that on with a new renewTime, and a chain
     * of quick restarts would keep those keys from everyone). */
    if (err == KCR_OK && m->state == KCR__SHARD_LEAVING && m->admitted.n == 0 &&
        m->draining.n == 0 && m->legacy.n == 0) {
        err = write_lease(m, own->version, &(kcr__ranges){0}, true, now);
        if (err == KCR_OK)
            m->state = KCR__SHARD_LEFT;
    } else if (err == KCR_OK &&
               (claim.n || moved_slot || !kcr__ranges_equal(&publish, &m->published) ||
                now - m->last_write_ms >= m->cfg.retry_ms)) {
        err = write_lease(m, own->version, &publish, m->state == KCR__SHARD_LEAVING, now);
        if (err == KCR_OK && m->state == KCR__SHARD_FENCED)
            m->state = KCR__SHARD_ACTIVE; /* renewed: claims again from the next step */
        if (err == KCR_OK && claim.n)
            err = confirm_claim(m, &claim, now);
    }
    kcr__ranges_clear(&want);
    kcr__ranges_clear(&lost);
    kcr__ranges_clear(&others);
    kcr__ranges_clear(&claim);
    kcr__ranges_clear(&publish);
    return err;
}

/* A Lease renewed further in our future than the margin means clocks differ
 * by more than the margin allows: the guarantee no longer holds. Reported
 * (logged once per change) and kept for kcr__shard_member_skew. */
static void note_skew(kcr__shard_member *m, const kcr__shard_lease_list *list, int64_t now)
{
    const kcr__shard_lease *worst = NULL;
    m->ahead_ms = 0;
    for (size_t i = 0; i < list->n; i++) {
        const kcr__shard_lease *l = &list->items[i];
        if (!*l->holder || strcmp(l->identity, m->identity) == 0)
            continue;
        if (l->renew_ms - now > m->ahead_ms)
            m->ahead_ms = l->renew_ms - now;
        if (l->renew_ms - now > m->cfg.margin_ms && (!worst || l->renew_ms > worst->renew_ms))
            worst = l;
    }
    char report[sizeof m->skew] = "";
    if (worst)
        snprintf(report, sizeof report,
                 "shard ring \"%s\": the Lease of \"%s\" was renewed %lld ms ahead of this "
                 "replica's clock, more than the fencing margin (%lld ms): clocks are skewed "
                 "past the bound the hand-over relies on",
                 m->ring, worst->identity, (long long)(worst->renew_ms - now),
                 (long long)m->cfg.margin_ms);
    if (worst && (!*m->skew || strncmp(m->skew_of, worst->identity, sizeof m->skew_of - 1) != 0))
        kcr__log(KCR_LOG_WARN, "shard", "%s", report);
    snprintf(m->skew_of, sizeof m->skew_of, "%s", worst ? worst->identity : "");
    memcpy(m->skew, report, sizeof report);
}

/* The first unexpired Lease of the ring that cannot take part as it is: no
 * identity label, no slot, unreadable held ranges. The member copes
 * (ignores it, or treats it as holding everything until it expires); this
 * says so, logged once per change, kept for kcr__shard_member_problem. */
static void note_problems(kcr__shard_member *m, const kcr__shard_lease_list *list, int64_t now)
{
    char report[sizeof m->problem] = "";
    for (size_t i = 0; i < list->n && !*report; i++) {
        const kcr__shard_lease *l = &list->items[i];
        kcr__ranges held = {0};
        if (expired(m, l, now))
            continue; /* takes no part any more */
        if (!*l->identity)
            snprintf(report, sizeof report,
                     "shard ring \"%s\": a Lease (holder \"%s\") has no %s label: it is not a "
                     "member",
                     m->ring, l->holder, KCR__SHARD_IDENTITY_LABEL);
        else if (*l->holder && l->slot < 0)
            snprintf(report, sizeof report,
                     "shard ring \"%s\": the Lease of \"%s\" has no valid %s annotation: it "
                     "owns nothing",
                     m->ring, l->identity, KCR__SHARD_SLOT_ANNOTATION);
        else if (kcr__ranges_parse(l->held, &held) == KCR_ERR_PARSE)
            snprintf(report, sizeof report,
                     "shard ring \"%s\": the %s annotation of \"%s\" does not parse (%s): "
                     "taken as holding every key until its Lease expires",
                     m->ring, KCR__SHARD_HELD_ANNOTATION, l->identity, kcr_last_error());
        kcr__ranges_clear(&held);
    }
    if (*report && strcmp(report, m->problem) != 0)
        kcr__log(KCR_LOG_WARN, "shard", "%s", report);
    memcpy(m->problem, report, sizeof report);
}

void kcr__shard_published_list_clear(kcr__shard_published_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->items[i].identity);
        kcr__ranges_clear(&l->items[i].ranges);
    }
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

/* Keeps what each unexpired Lease published (ours: as of this sync). */
static kcr_err note_published(kcr__shard_member *m, const kcr__shard_lease_list *list,
                              int64_t now)
{
    kcr__shard_published_list_clear(&m->pub);
    if (!list->n)
        return KCR_OK;
    m->pub.items = calloc(list->n, sizeof *m->pub.items);
    if (!m->pub.items)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    kcr_err err = KCR_OK;
    for (size_t i = 0; i < list->n && err == KCR_OK; i++) {
        const kcr__shard_lease *l = &list->items[i];
        bool own = strcmp(l->identity, m->identity) == 0;
        if (!*l->identity || (!own && expired(m, l, now)))
            continue;
        kcr__shard_published *p = &m->pub.items[m->pub.n];
        if (!(p->identity = strdup(l->identity)))
            return kcr__fail(KCR_ERR_NOMEM, "out of memory");
        m->pub.n++;
        if (own) {
            err = kcr__ranges_copy(&m->published, &p->ranges);
        } else if (*l->held) {
            err = kcr__ranges_parse(l->held, &p->ranges);
            if (err == KCR_ERR_PARSE) /* unreadable: it may hold anything */
                err = kcr__ranges_append(&p->ranges, 0, 0);
        }
    }
    return err;
}

kcr_err kcr__shard_member_published(const kcr__shard_member *m, kcr__shard_published_list *out)
{
    kcr__shard_published_list_clear(out);
    if (!m->pub.n)
        return KCR_OK;
    out->items = calloc(m->pub.n, sizeof *out->items);
    if (!out->items)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < m->pub.n; i++) {
        kcr__shard_published *p = &out->items[out->n++];
        if (!(p->identity = strdup(m->pub.items[i].identity)) ||
            kcr__ranges_copy(&m->pub.items[i].ranges, &p->ranges) != KCR_OK) {
            kcr__shard_published_list_clear(out);
            return kcr__fail(KCR_ERR_NOMEM, "out of memory");
        }
    }
    return KCR_OK;
}

bool kcr__shard_published_has(const kcr__shard_published_list *l, const char *identity,
                              uint64_t hash)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->items[i].identity, identity) == 0 &&
            kcr__ranges_contains(&l->items[i].ranges, hash))
            return true;
    return false;
}

kcr_err kcr__shard_member_sync(kcr__shard_member *m, int64_t now_ms)
{
    m->cached_is_step = false;
    if (m->state == KCR__SHARD_REFUSED)
        return kcr__fail(KCR_ERR_EXISTS, "%s", m->error);
    if (m->state == KCR__SHARD_LEFT)
        return KCR_OK;
    fence_if_late(m, now_ms);
    kcr__shard_lease_list list = {0};
    kcr_err err = m->store->ops->list(m->ring, &list, m->store->user_data);
    if (err != KCR_OK)
        return err;
    note_skew(m, &list, now_ms);
    note_problems(m, &list, now_ms);
    kcr__shard_lease *own = find_own(m, &list);
    if (m->state == KCR__SHARD_JOINING || m->state == KCR__SHARD_PROBING)
        err = join(m, &list, own, now_ms);
    else
        err = step(m, &list, own, now_ms);
    if (note_published(m, &list, now_ms) != KCR_OK)
        kcr__shard_published_list_clear(&m->pub);
    kcr__ranges others = {0};
    if (others_held(m, &list, now_ms, &others) == KCR_OK &&
        kcr__ranges_union(&others, &m->published, &m->covered) != KCR_OK)
        kcr__ranges_clear(&m->covered);
    kcr__ranges_clear(&others);
    kcr__shard_lease_list_clear(&list);
    return err;
}

bool kcr__shard_member_begin(kcr__shard_member *m, uint64_t hash, int64_t now_ms)
{
    fence_if_late(m, now_ms);
    if (m->state != KCR__SHARD_ACTIVE || !kcr__ranges_contains(&m->admitted, hash))
        return false;
    if (m->ninflight == m->capinflight) {
        size_t cap = m->capinflight ? m->capinflight * 2 : 16;
        uint64_t *grown = realloc(m->inflight, cap * sizeof *grown);
        if (!grown)
            return false; /* not admitted: the caller retries later */
        m->inflight = grown;
        m->capinflight = cap;
    }
    m->inflight[m->ninflight++] = hash;
    return true;
}

void kcr__shard_member_end(kcr__shard_member *m, uint64_t hash)
{
    for (size_t i = 0; i < m->ninflight; i++) {
        if (m->inflight[i] == hash) {
            m->inflight[i] = m->inflight[--m->ninflight];
            return;
        }
    }
}

void kcr__shard_member_leave(kcr__shard_member *m)
{
    if (m->state == KCR__SHARD_JOINING || m->state == KCR__SHARD_PROBING) {
        m->state = KCR__SHARD_LEFT;
    } else if (m->state == KCR__SHARD_ACTIVE || m->state == KCR__SHARD_FENCED) {
        stop_admitting(m);
        m->state = KCR__SHARD_LEAVING;
    }
}

kcr__shard_state kcr__shard_member_state(const kcr__shard_member *m)
{
    return m->state;
}

const char *kcr__shard_member_error(const kcr__shard_member *m)
{
    return m->error;
}

const kcr__ranges *kcr__shard_member_admitted(const kcr__shard_member *m)
{
    return &m->admitted;
}

size_t kcr__shard_member_inflight(const kcr__shard_member *m)
{
    return m->ninflight;
}

const char *kcr__shard_member_skew(const kcr__shard_member *m)
{
    return m->skew;
}

int64_t kcr__shard_member_ahead_ms(const kcr__shard_member *m)
{
    return m->ahead_ms;
}

const char *kcr__shard_member_problem(const kcr__shard_member *m)
{
    return m->problem;
}

bool kcr__shard_member_wants(const kcr__shard_member *m, uint64_t hash)
{
    return m->state == KCR__SHARD_ACTIVE && kcr__ranges_contains(&m->want, hash);
}

const kcr__ranges *kcr__shard_member_want(const kcr__shard_member *m)
{
    return &m->want;
}

const kcr__ranges *kcr__shard_member_draining(const kcr__shard_member *m)
{
    return &m->draining;
}

kcr__shard_state kcr__shard_member_check(kcr__shard_member *m, int64_t now_ms)
{
    fence_if_late(m, now_ms);
    return m->state;
}

int64_t kcr__shard_member_fence_at(const kcr__shard_member *m)
{
    return m->state == KCR__SHARD_ACTIVE ? m->last_ok_ms + m->cfg.renew_deadline_ms : INT64_MAX;
}

int kcr__shard_member_slot(const kcr__shard_member *m)
{
    return m->slot;
}

const kcr__ranges *kcr__shard_member_covered(const kcr__shard_member *m)
{
    return &m->covered;
}

const kcr__ring *kcr__shard_member_ring(const kcr__shard_member *m)
{
    return m->state == KCR__SHARD_ACTIVE && m->cached_is_step ? m->cached : NULL;
}

bool kcr__shard_member_running(const kcr__shard_member *m, uint64_t hash)
{
    for (size_t i = 0; i < m->ninflight; i++)
        if (m->inflight[i] == hash)
            return true;
    return false;
}
