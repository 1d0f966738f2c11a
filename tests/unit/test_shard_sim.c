/* A seeded simulation of a shard ring (shard/member.c): replicas in one
 * process on an in-memory Lease store with a virtual clock, random joins,
 * graceful leaves (of an even-numbered identity: a rolling restart, its
 * slot kept by restart_grace_ms until it is back), crashes (some
 * restarting with their identity),
 * partitions (a replica that cannot reach the API keeps running what it
 * admitted), API outages (all of them cut off at once), duplicate starts of
 * a live identity, skewed clocks, and keys
 * whose reconciles take time. Every replica sees every key (filter mode)
 * and reconciles the ones its member admits.
 *
 * Checkers:
 * - exclusivity: no key's reconcile starts on one replica while it runs on
 *   another;
 * - liveness: once nothing changed for QUIET_MS (the bound: lease + margin +
 *   the longest reconcile + two steps), no rolling restart is under way
 *   (a kept slot holds its keys until its identity is back) and none came
 *   back for ROLL_QUIET_MS (the grace in place of the lease), the live
 *   members' admitted ranges partition the whole hash space, so every key
 *   has exactly one owner;
 * - balance: the largest admitted share against the mean at those points;
 * - fencing: no reconcile starts on a replica cut off for longer than its
 *   renew deadline;
 * - hand-over latency: how long keys go without an admitting replica; in a
 *   graceful hand-over (a join or leave with no crash, restart or cut-off
 *   near) at most the longest reconcile (the drain) plus three steps.
 * The 1,000-event run must show zero overlaps; the same run with the
 * hand-over broken (acknowledge before draining) must show some. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <valgrind/valgrind.h>

#include "helpers/shard_memstore.h"
#include "kcr/fake.h"
#include "shard/member.h"

#define MAX_REPLICAS 64
#define MAX_LIVE 8
#define NKEYS 48
#define STEP_MS 100
#define SYNC_MS 1000
#define LEASE_MS 15000
#define RENEW_DEADLINE_MS 10000
#define RETRY_MS 2000
#define SKEW_MS 500    /* each clock is off by at most this: pairs by 2x */
#define MARGIN_MS 2000 /* >= the pairwise skew bound */
#define MAX_RECONCILE_MS 4000
#define GRACE_MS 30000         /* restart_grace_ms of the even-numbered identities */
#define MAX_RESTART_MS 15000   /* ... which come back this long at most after they left */
#define QUIET_MS (LEASE_MS + MARGIN_MS + MAX_RECONCILE_MS + 2 * SYNC_MS + 2 * SKEW_MS)
/* ... and after a rolling restart's last step: a kept Lease protects what
 * it published (a reconcile in flight when the process stopped) for the
 * grace, not the lease */
#define ROLL_QUIET_MS (GRACE_MS + MARGIN_MS + MAX_RECONCILE_MS + 2 * SYNC_MS + 2 * SKEW_MS)

/* A replica's way to the Lease store, which a partition cuts. */
typedef struct cut_store {
    kcr__lease_store store; /* what the member uses */
    const kcr__lease_store *inner;
    bool partitioned;
} cut_store;

static kcr_err cut_list(const char *ring, kcr__shard_lease_list *out, void *user_data)
{
    cut_store *c = user_data;
    if (c->partitioned)
        return kcr_set_error(KCR_ERR_TRANSPORT, "partitioned from the API");
    return c->inner->ops->list(ring, out, c->inner->user_data);
}

static kcr_err cut_put(const char *ring, const kcr__shard_lease *l, char **version, void *user_data)
{
    cut_store *c = user_data;
    *version = NULL;
    if (c->partitioned)
        return kcr_set_error(KCR_ERR_TRANSPORT, "partitioned from the API");
    return c->inner->ops->put(ring, l, version, c->inner->user_data);
}

static const kcr__lease_store_ops cut_ops = {cut_list, cut_put};

typedef enum backend { MEMORY, FAKE } backend;

typedef struct replica {
    bool alive;
    kcr__shard_member *m;
    cut_store h;
    char identity[16], instance[32];
    int64_t skew_ms, next_sync, partition_from, partition_until;
    int64_t run_end[NKEYS]; /* 0: not running that key */
    bool returns;           /* leaving for a rolling restart */
} replica;

typedef struct restart {
    int64_t at;
    char identity[16];
    bool roll; /* the end of a rolling restart */
} restart;

typedef struct sim {
    uint64_t rng;
    bool broken;
    memstore table; /* MEMORY */
    memstore_handle mem;
    kcr_fake *fake; /* FAKE */
    kcr_client *client;
    kcr__lease_store *client_store;
    const kcr__lease_store *store; /* the one every replica reaches */
    replica r[MAX_REPLICAS];
    int nr;
    uint64_t hash[NKEYS];
    int64_t next_work[NKEYS];
    restart restarts[MAX_REPLICAS];
    int nrestarts;
    int rolling; /* rolling restarts under way: left or leaving, not started again yet */
    int64_t last_roll; /* when a rolling restart last left, crashed or started again */
    int next_id, instances;
    int64_t t, last_change;
    bool checked; /* coverage checked since last_change */
    /* results */
    long overlaps, reconciles, coverage_checks, coverage_failures, refusals;
    long joins, leaves, rolls, crashes, partitions, outages, duplicates, restarts_done;
    long late_admissions; /* admitted while cut off past the renew deadline */
    size_t most_ranges;   /* the most ranges one member admitted at a quiet point */
    double worst_balance;
    long long lease_puts, lease_lists;
    int64_t member_ms; /* replica-milliseconds alive, for per-member costs */
    /* how long keys went without an admitting replica (sampled every
     * GAP_SAMPLE_MS), for the hand-over latency */
    int64_t gap_from[NKEYS];  /* -1: owned */
    bool gap_graceful[NKEYS]; /* that gap began with no crash, restart or cut-off near */
    int64_t *gaps, *graceful;
    size_t ngaps, capgaps, ngraceful, capgraceful;
    int64_t disrupted_until; /* a crash, restart or cut-off is near until then */
} sim;

#define GAP_SAMPLE_MS 200

static void record(int64_t **v, size_t *n, size_t *cap, int64_t x)
{
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 1024;
        *v = realloc(*v, *cap * sizeof **v);
        cr_assert_not_null(*v);
    }
    (*v)[(*n)++] = x;
}

/* A crash, restart or cut-off moves keys only after a Lease expires: the
 * gaps open at one or beginning near one are not graceful hand-overs. */
static void disrupted(sim *s, int64_t until)
{
    until += QUIET_MS;
    s->disrupted_until = until > s->disrupted_until ? until : s->disrupted_until;
    for (int k = 0; k < NKEYS; k++)
        s->gap_graceful[k] = false;
}

static void sample_gaps(sim *s)
{
    for (int k = 0; k < NKEYS; k++) {
        bool owned = false;
        for (int i = 0; i < s->nr && !owned; i++)
            owned = s->r[i].alive &&
                    kcr__ranges_contains(kcr__shard_member_admitted(s->r[i].m), s->hash[k]);
        if (!owned && s->gap_from[k] < 0) {
            s->gap_from[k] = s->t;
            s->gap_graceful[k] = s->t >= s->disrupted_until;
        } else if (owned && s->gap_from[k] >= 0) {
            record(&s->gaps, &s->ngaps, &s->capgaps, s->t - s->gap_from[k]);
            if (s->gap_graceful[k])
                record(&s->graceful, &s->ngraceful, &s->capgraceful, s->t - s->gap_from[k]);
            s->gap_from[k] = -1;
        }
    }
}

static int by_value(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* The q-quantile of sorted values, in ms (0 when none). */
static int64_t quantile(const int64_t *v, size_t n, double q)
{
    return n ? v[(size_t)(q * (double)(n - 1))] : 0;
}

static uint64_t rnd(sim *s)
{
    s->rng ^= s->rng << 13;
    s->rng ^= s->rng >> 7;
    s->rng ^= s->rng << 17;
    return s->rng;
}

static int64_t between(sim *s, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(rnd(s) % (uint64_t)(hi - lo + 1));
}

/* The even-numbered identities ("r0", "r2", ...) are a StatefulSet's:
 * they keep their slot when they leave, and come back. */
static bool keeps_slot(const char *identity)
{
    return atoi(identity + 1) % 2 == 0;
}

static void start_replica(sim *s, const char *identity)
{
    int slot = 0; /* reuse an exited process's entry */
    while (slot < s->nr && s->r[slot].alive)
        slot++;
    cr_assert_lt(slot, MAX_REPLICAS, "too many replica processes");
    if (slot == s->nr)
        s->nr++;
    replica *p = &s->r[slot];
    memset(p, 0, sizeof *p);
    p->alive = true;
    snprintf(p->identity, sizeof p->identity, "%s", identity);
    snprintf(p->instance, sizeof p->instance, "%s_%d", identity, ++s->instances);
    p->skew_ms = between(s, -SKEW_MS, SKEW_MS);
    p->next_sync = s->t;
    p->h = (cut_store){.store = {&cut_ops, &p->h}, .inner = s->store};
    kcr__shard_member_config cfg = {.ring = "sim",
                                    .identity = p->identity,
                                    .instance = p->instance,
                                    .lease_ms = LEASE_MS,
                                    .renew_deadline_ms = RENEW_DEADLINE_MS,
                                    .retry_ms = RETRY_MS,
                                    .margin_ms = MARGIN_MS,
                                    .restart_grace_ms = keeps_slot(identity) ? GRACE_MS : 0,
                                    .ack_before_drain = s->broken};
    cr_assert_eq(kcr__shard_member_new(&cfg, &p->h.store, &p->m), KCR_OK, "%s", kcr_last_error());
}

/* The process exits (crash or end): its reconciles stop with it. */
static void stop_process(replica *p)
{
    p->alive = false;
    memset(p->run_end, 0, sizeof p->run_end);
    kcr__shard_member_free(p->m);
    p->m = NULL;
}

static int live(sim *s, int *idx, bool active_only)
{
    int n = 0;
    for (int i = 0; i < s->nr; i++) {
        if (!s->r[i].alive)
            continue;
        if (active_only && kcr__shard_member_state(s->r[i].m) != KCR__SHARD_ACTIVE)
            continue;
        idx[n++] = i;
    }
    return n;
}

static bool identity_in_use(sim *s, const char *id)
{
    for (int i = 0; i < s->nr; i++)
        if (s->r[i].alive && strcmp(s->r[i].identity, id) == 0)
            return true;
    for (int i = 0; i < s->nrestarts; i++)
        if (strcmp(s->restarts[i].identity, id) == 0)
            return true;
    return false;
}

/* Starts `p`'s identity again within `max_ms`; a rolling restart ends then. */
static void schedule_restart(sim *s, const replica *p, int64_t max_ms)
{
    if (s->nrestarts == MAX_REPLICAS) {
        s->rolling -= p->returns;
        return;
    }
    restart *re = &s->restarts[s->nrestarts++];
    re->at = s->t + between(s, 0, max_ms);
    re->roll = p->returns;
    memcpy(re->identity, p->identity, sizeof re->identity);
}

static void cut_off(sim *s, replica *p, int64_t until)
{
    disrupted(s, until);
    if (!p->h.partitioned)
        p->partition_from = s->t;
    p->h.partitioned = true;
    p->partition_until = until > p->partition_until ? until : p->partition_until;
}

static void random_event(sim *s)
{
    int idx[MAX_REPLICAS];
    int nlive = live(s, idx, false);
    int nactive = live(s, idx, true); /* idx: the active ones */
    int kind = (int)(rnd(s) % 20);
    if (nlive < 2 || (kind < 6 && nlive < MAX_LIVE)) { /* join */
        char id[16];
        do
            snprintf(id, sizeof id, "r%d", s->next_id++ % 12); /* identities come back */
        while (identity_in_use(s, id));
        start_replica(s, id);
        s->joins++;
    } else if (kind < 10 && nactive > 1) { /* graceful leave, or a rolling restart */
        replica *p = &s->r[idx[rnd(s) % (uint64_t)nactive]];
        kcr__shard_member_leave(p->m);
        p->returns = keeps_slot(p->identity);
        if (p->returns) { /* its keys wait for it: not a hand-over */
            s->rolls++;
            s->rolling++;
            s->last_roll = s->t;
            disrupted(s, s->t);
        } else {
            s->leaves++;
        }
    } else if (kind < 14) { /* crash, maybe restart with the same identity */
        nlive = live(s, idx, false);
        replica *p = &s->r[idx[rnd(s) % (uint64_t)nlive]];
        if (p->returns || rnd(s) % 2) /* a rolling restart's process always comes back */
            schedule_restart(s, p, 20000);
        if (p->returns)
            s->last_roll = s->t;
        stop_process(p);
        s->crashes++;
        disrupted(s, s->t);
    } else if (kind < 18) { /* partition */
        nlive = live(s, idx, false);
        cut_off(s, &s->r[idx[rnd(s) % (uint64_t)nlive]], s->t + between(s, 2000, 30000));
        s->partitions++;
    } else if (kind == 19) { /* the API is down for everyone */
        nlive = live(s, idx, false);
        int64_t until = s->t + between(s, 5000, 40000);
        for (int i = 0; i < nlive; i++)
            cut_off(s, &s->r[idx[i]], until);
        s->outages++;
    } else if (nactive > 0) { /* a second process with a live identity */
        start_replica(s, s->r[idx[rnd(s) % (uint64_t)nactive]].identity);
        s->duplicates++;
    }
    s->last_change = s->t;
}

/* Liveness and balance once quiet: the admitted ranges of the live members
 * partition the space. */
static void check_coverage(sim *s)
{
    kcr__ranges all = {0}, tmp = {0};
    uint64_t max = 0, total_members = 0;
    bool ok = true;
    int reachable = 0;
    for (int i = 0; i < s->nr; i++)
        reachable += s->r[i].alive && !s->r[i].h.partitioned;
    if (reachable == 0)
        return; /* nobody can own anything: not a liveness point */
    for (int i = 0; i < s->nr; i++) {
        if (!s->r[i].alive)
            continue;
        const kcr__ranges *a = kcr__shard_member_admitted(s->r[i].m);
        if (kcr__ranges_intersects(&all, a))
            ok = false;
        cr_assert_eq(kcr__ranges_union(&all, a, &tmp), KCR_OK);
        cr_assert_eq(kcr__ranges_copy(&tmp, &all), KCR_OK);
        s->most_ranges = a->n > s->most_ranges ? a->n : s->most_ranges;
        if (kcr__shard_member_state(s->r[i].m) == KCR__SHARD_ACTIVE) {
            uint64_t share = kcr__ranges_measure(a);
            max = share > max ? share : max;
            total_members++;
        }
    }
    ok = ok && all.n == 1 && all.r[0].start == 0 && all.r[0].end == 0;
    if (!ok) {
        s->coverage_failures++;
        kcr__ranges whole = {0}, gap = {0};
        kcr__ranges_append(&whole, 0, 0);
        kcr__ranges_subtract(&whole, &all, &gap);
        char *gaps = NULL;
        kcr__ranges_format(&gap, &gaps);
        cr_log_warn("coverage failed at t=%lldms (last change %lldms): unowned %s", (long long)s->t,
                    (long long)s->last_change, gaps);
        free(gaps);
        kcr__ranges_clear(&whole);
        kcr__ranges_clear(&gap);
        for (int i = 0; i < s->nr; i++) {
            if (!s->r[i].alive)
                continue;
            char *text = NULL;
            kcr__ranges_format(kcr__shard_member_admitted(s->r[i].m), &text);
            int running = 0;
            for (int k = 0; k < NKEYS; k++)
                running += s->r[i].run_end[k] != 0;
            cr_log_warn("  %s state %d partitioned %d inflight %zu running %d admitted %s",
                        s->r[i].instance, (int)kcr__shard_member_state(s->r[i].m),
                        (int)s->r[i].h.partitioned, kcr__shard_member_inflight(s->r[i].m), running,
                        text);
            free(text);
        }
        kcr__shard_lease_list leases = {0};
        s->store->ops->list("sim", &leases, s->store->user_data);
        for (size_t i = 0; i < leases.n; i++) {
            const kcr__shard_lease *l = &leases.items[i];
            cr_log_warn("  lease %s holder %s slot %d renew %lld held %s", l->identity, l->holder,
                        l->slot, (long long)l->renew_ms, l->held);
        }
        kcr__shard_lease_list_clear(&leases);
    }
    if (total_members > 0) {
        double mean = 18446744073709551616.0 / (double)total_members;
        double balance = (double)max / mean;
        s->worst_balance = balance > s->worst_balance ? balance : s->worst_balance;
    }
    s->coverage_checks++;
    kcr__ranges_clear(&all);
    kcr__ranges_clear(&tmp);
}

static void step(sim *s)
{
    for (int i = 0; i < s->nrestarts; i++) {
        if (s->t >= s->restarts[i].at) {
            char id[16];
            memcpy(id, s->restarts[i].identity, sizeof id);
            s->rolling -= s->restarts[i].roll;
            if (s->restarts[i].roll)
                s->last_roll = s->t;
            s->restarts[i] = s->restarts[--s->nrestarts];
            i--;
            start_replica(s, id);
            s->restarts_done++;
            disrupted(s, s->t);
            s->last_change = s->t;
        }
    }
    for (int i = 0; i < s->nr; i++) {
        replica *p = &s->r[i];
        if (!p->alive)
            continue;
        s->member_ms += STEP_MS;
        if (p->partition_until && s->t >= p->partition_until) {
            p->h.partitioned = false;
            p->partition_until = 0;
            s->last_change = s->t;
        }
        for (int k = 0; k < NKEYS; k++) {
            if (p->run_end[k] && s->t >= p->run_end[k]) {
                p->run_end[k] = 0;
                kcr__shard_member_end(p->m, s->hash[k]);
            }
        }
        if (s->t >= p->next_sync) {
            p->next_sync = s->t + SYNC_MS;
            kcr_err err = kcr__shard_member_sync(p->m, s->t + p->skew_ms);
            cr_assert(err == KCR_OK || err == KCR_ERR_TRANSPORT || err == KCR_ERR_EXISTS ||
                          err == KCR_ERR_CONFLICT,
                      "sync of %s: %s", p->instance, kcr_last_error());
            kcr__shard_state st = kcr__shard_member_state(p->m);
            if (st == KCR__SHARD_REFUSED) {
                cr_assert_not_null(strstr(kcr__shard_member_error(p->m), "instance"));
                s->refusals++;
            }
            if (st == KCR__SHARD_LEFT && p->returns)
                schedule_restart(s, p, MAX_RESTART_MS);
            else if (st == KCR__SHARD_REFUSED && p->returns)
                s->rolling--; /* a duplicate started meanwhile took the released Lease */
            if (st == KCR__SHARD_REFUSED || st == KCR__SHARD_LEFT) {
                stop_process(p); /* the reconciles it ran had ended: it drained first */
                s->last_change = s->t;
            }
        }
    }
    for (int k = 0; k < NKEYS; k++) {
        if (s->t < s->next_work[k])
            continue;
        bool started = false;
        for (int i = 0; i < s->nr; i++) {
            replica *p = &s->r[i];
            if (!p->alive || p->run_end[k] ||
                !kcr__shard_member_begin(p->m, s->hash[k], s->t + p->skew_ms))
                continue;
            for (int j = 0; j < s->nr; j++)
                if (j != i && s->r[j].alive && s->r[j].run_end[k])
                    s->overlaps++;
            /* its last write was sent before the cut: skew only shifts its own clock */
            if (p->h.partitioned && s->t - p->partition_from >= RENEW_DEADLINE_MS)
                s->late_admissions++;
            p->run_end[k] = s->t + between(s, 100, MAX_RECONCILE_MS);
            s->reconciles++;
            started = true;
        }
        if (started) /* else it stays due: retried at the next step */
            s->next_work[k] = s->t + between(s, 0, 3000);
    }
    if (s->t % GAP_SAMPLE_MS == 0)
        sample_gaps(s);
    /* a slot kept for a restart holds its keys until the identity is back */
    if (!s->checked && s->t - s->last_change >= QUIET_MS && !s->rolling &&
        s->t - s->last_roll >= ROLL_QUIET_MS) {
        check_coverage(s);
        s->checked = true;
    }
    s->t += STEP_MS;
}

static void run(sim *s, uint64_t seed, int events, bool broken, backend b)
{
    memset(s, 0, sizeof *s);
    s->rng = seed;
    s->broken = broken;
    if (b == MEMORY) {
        memstore_init(&s->mem, &s->table);
        s->store = &s->mem.store;
    } else {
        cr_assert_eq(kcr_fake_new(NULL, &s->fake), KCR_OK);
        cr_assert_eq(kcr_fake_client(s->fake, "sim", &s->client), KCR_OK);
        cr_assert_eq(kcr__lease_store_client_new(s->client, "sim", &s->client_store), KCR_OK);
        s->store = s->client_store;
    }
    for (int k = 0; k < NKEYS; k++) {
        s->hash[k] = rnd(s);
        s->gap_from[k] = -1;
    }
    for (int i = 0; i < 3; i++) {
        char id[16];
        snprintf(id, sizeof id, "r%d", s->next_id++);
        start_replica(s, id);
    }
    int64_t next_event = 5000;
    for (int done = 0; done < events;) {
        if (s->t >= next_event) {
            random_event(s);
            s->checked = false;
            done++;
            /* mostly busy, sometimes quiet long enough for the liveness check */
            next_event = s->t + (rnd(s) % 10 == 0 ? QUIET_MS + between(s, 20000, 40000)
                                                  : between(s, 500, 6000));
        }
        step(s);
        if (s->t - s->last_change < STEP_MS)
            s->checked = false;
    }
    /* the end: heal every partition, run the pending restarts, settle */
    for (int i = 0; i < s->nr; i++)
        s->r[i].partition_until = s->r[i].partition_until ? s->t : 0;
    while (s->nrestarts > 0 || s->rolling > 0 || s->t - s->last_change < QUIET_MS + STEP_MS ||
           s->t - s->last_roll < ROLL_QUIET_MS + STEP_MS) {
        step(s);
        if (s->t - s->last_change < STEP_MS)
            s->checked = false;
    }
    qsort(s->gaps, s->ngaps, sizeof *s->gaps, by_value);
    qsort(s->graceful, s->ngraceful, sizeof *s->graceful, by_value);
    for (int i = 0; i < s->nr; i++)
        if (s->r[i].alive)
            stop_process(&s->r[i]);
    if (b == MEMORY) {
        s->lease_puts = s->table.puts;
        s->lease_lists = s->table.lists;
        memstore_free(&s->table);
    } else {
        s->lease_puts = (long long)(kcr_fake_count(s->fake, KCR_FAKE_CREATE, NULL) +
                                    kcr_fake_count(s->fake, KCR_FAKE_UPDATE, NULL));
        s->lease_lists = (long long)kcr_fake_count(s->fake, KCR_FAKE_LIST, NULL);
        kcr__lease_store_client_free(s->client_store);
        kcr_client_free(s->client);
        kcr_fake_free(s->fake);
    }
}

/* KCR_SHARD_SIM_SEED=<n> runs another seed (to explore; CI runs the fixed one). */
static uint64_t sim_seed(void)
{
    const char *env = getenv("KCR_SHARD_SIM_SEED");
    return env && *env ? strtoull(env, NULL, 0) : 0x5eed0022;
}

static int sim_events(void)
{
    /* valgrind runs this about 50x slower: fewer events keep it under a minute */
    return RUNNING_ON_VALGRIND ? 200 : 1000;
}

static void report(const char *what, const sim *s, int events)
{
    cr_log_info(
        "%s: events=%d t=%llds reconciles=%ld joins=%ld leaves=%ld rolls=%ld crashes=%ld "
        "restarts=%ld partitions=%ld outages=%ld duplicates=%ld refusals=%ld "
        "coverage_checks=%ld worst_balance=%.3f most_ranges=%zu lease_writes=%lld "
        "lease_lists=%lld overlaps=%ld late_admissions=%ld "
        "per_member_minute: writes=%.1f lists=%.1f "
        "unowned_gaps: n=%zu p50=%lldms p99=%lldms max=%lldms; graceful (joins, leaves): "
        "n=%zu p50=%lldms p99=%lldms max=%lldms",
        what, events, (long long)(s->t / 1000), s->reconciles, s->joins, s->leaves, s->rolls,
        s->crashes,
        s->restarts_done, s->partitions, s->outages, s->duplicates, s->refusals, s->coverage_checks,
        s->worst_balance, s->most_ranges, s->lease_puts, s->lease_lists, s->overlaps,
        s->late_admissions, (double)s->lease_puts * 60000.0 / (double)s->member_ms,
        (double)s->lease_lists * 60000.0 / (double)s->member_ms, s->ngaps,
        (long long)quantile(s->gaps, s->ngaps, 0.5), (long long)quantile(s->gaps, s->ngaps, 0.99),
        (long long)quantile(s->gaps, s->ngaps, 1.0), s->ngraceful,
        (long long)quantile(s->graceful, s->ngraceful, 0.5),
        (long long)quantile(s->graceful, s->ngraceful, 0.99),
        (long long)quantile(s->graceful, s->ngraceful, 1.0));
}

/* The checks of a correct hand-over. */
static void expect_correct(const sim *s, int events)
{
    cr_expect_eq(s->overlaps, 0, "%ld reconciles of a key overlapped across replicas", s->overlaps);
    cr_expect_eq(s->coverage_failures, 0,
                 "%ld of %ld quiet points left keys unowned or doubly owned", s->coverage_failures,
                 s->coverage_checks);
    cr_expect_geq(s->coverage_checks, events / 20, "only %ld liveness checks ran",
                  s->coverage_checks);
    cr_expect_gt(s->refusals, 0, "no duplicate identity was refused");
    cr_expect(events < 100 || s->rolls > 0, "no rolling restart in %d events", events);
    cr_expect_eq(s->late_admissions, 0,
                 "%ld reconciles started past a cut-off replica's "
                 "renew deadline",
                 s->late_admissions);
    cr_expect_geq(s->crashes + s->partitions, events / 4,
                  "fewer than a quarter of the events cut a replica off");
    cr_expect(events < 100 || s->outages > 0, "no API outage in %d events", events);
    cr_expect_leq(s->worst_balance, 2.0, "a member held %.2f x the mean share", s->worst_balance);
    /* graceful hand-over: the old owner's drain plus a step or two */
    int64_t graceful_max = quantile(s->graceful, s->ngraceful, 1.0);
    cr_expect_gt(s->ngraceful, 0);
    cr_expect_leq(graceful_max, MAX_RECONCILE_MS + 3 * SYNC_MS,
                  "a key waited %lld ms for its next owner in a graceful hand-over",
                  (long long)graceful_max);
    cr_expect_gt(s->reconciles, 10 * events);
}

Test(shard_sim, a_thousand_random_events_and_no_key_runs_twice, .timeout = 600)
{
    static sim s;
    int events = sim_events();
    run(&s, sim_seed(), events, false, MEMORY);
    report("memory store", &s, events);
    expect_correct(&s, events);
    free(s.gaps);
    free(s.graceful);
}

Test(shard_sim, on_the_fake_api, .timeout = 600)
{
    static sim s;
    int events = sim_events() / 5; /* every Lease call goes through JSON and the fake */
    run(&s, sim_seed() + 1, events, false, FAKE);
    report("fake API", &s, events);
    expect_correct(&s, events);
    free(s.gaps);
    free(s.graceful);
}

Test(shard_sim, acknowledging_before_draining_is_caught, .timeout = 600)
{
    static sim s;
    int events = sim_events();
    run(&s, sim_seed(), events, true, MEMORY);
    report("ack before drain", &s, events);
    cr_expect_gt(s.overlaps, 0, "the exclusivity checker missed a broken hand-over");
    free(s.gaps);
    free(s.graceful);
}
