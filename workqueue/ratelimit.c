/* Rate limiters: the interface, and the built-ins (exponential per key,
 * token bucket, fast/slow per key, max-of, with-max-wait, default). */
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "kcr/workqueue.h"
#include "workqueue/keytab.h"

struct kcr_rate_limiter {
    kcr_rate_limiter_ops ops;
    void *state;
};

kcr_rate_limiter *kcr_rate_limiter_new(const kcr_rate_limiter_ops *ops, void *state)
{
    if (!ops || !ops->when) {
        if (ops && ops->free)
            ops->free(state);
        kcr__fail(KCR_ERR_INVALID, "kcr_rate_limiter_new: ops->when is required");
        return NULL;
    }
    kcr_rate_limiter *rl = malloc(sizeof *rl);
    if (!rl) {
        if (ops->free)
            ops->free(state);
        kcr__fail(KCR_ERR_NOMEM, "kcr_rate_limiter_new: out of memory");
        return NULL;
    }
    rl->ops = *ops;
    rl->state = state;
    return rl;
}

int64_t kcr_rate_limiter_when_at(kcr_rate_limiter *rl, const char *key, int64_t now_ns)
{
    return rl->ops.when(rl->state, key, now_ns);
}

int64_t kcr_rate_limiter_when(kcr_rate_limiter *rl, const char *key)
{
    return rl->ops.when(rl->state, key, kcr__now_ns());
}

void kcr_rate_limiter_forget(kcr_rate_limiter *rl, const char *key)
{
    if (rl->ops.forget)
        rl->ops.forget(rl->state, key);
}

int kcr_rate_limiter_num_requeues(kcr_rate_limiter *rl, const char *key)
{
    return rl->ops.num_requeues ? rl->ops.num_requeues(rl->state, key) : 0;
}

void kcr_rate_limiter_free(kcr_rate_limiter *rl)
{
    if (!rl)
        return;
    if (rl->ops.free)
        rl->ops.free(rl->state);
    free(rl);
}

/* ---- per-key failure counts (exponential, fast/slow) ------------------- */

struct count_node {
    int count;
    uint32_t len;
    char key[];
};

struct per_key {
    pthread_mutex_t mu;
    struct kcr__keytab tab;
    /* exponential */
    int64_t base, max;
    /* fast/slow */
    int64_t fast, slow;
    int max_fast;
};

static struct per_key *per_key_new(void)
{
    struct per_key *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    if (kcr__keytab_init(&p->tab, 16, offsetof(struct count_node, key),
                         offsetof(struct count_node, len)) != 0) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    return p;
}

static void per_key_free(void *state)
{
    struct per_key *p = state;
    for (size_t i = 0; i <= p->tab.mask; i++)
        free(p->tab.slots[i].node);
    kcr__keytab_destroy(&p->tab);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

/* Returns the count before this failure and adds one (lock held by caller).
 * -1 if a new key could not be stored. */
static int per_key_bump(struct per_key *p, const char *key)
{
    size_t len = strlen(key);
    uint64_t hash = kcr__keytab_hash(&p->tab, key, len);
    struct count_node *n = kcr__keytab_find(&p->tab, key, len, hash);
    if (!n) {
        n = malloc(offsetof(struct count_node, key) + len + 1);
        if (!n)
            return -1;
        n->count = 0;
        n->len = (uint32_t)len;
        memcpy(n->key, key, len + 1);
        if (kcr__keytab_insert(&p->tab, hash, n) != 0) {
            free(n);
            return -1;
        }
    }
    return n->count < INT32_MAX ? n->count++ : n->count;
}

static void per_key_forget(void *state, const char *key)
{
    struct per_key *p = state;
    size_t len = strlen(key);
    pthread_mutex_lock(&p->mu);
    uint64_t hash = kcr__keytab_hash(&p->tab, key, len);
    struct count_node *n = kcr__keytab_find(&p->tab, key, len, hash);
    if (n) {
        kcr__keytab_remove(&p->tab, hash, n);
        free(n);
    }
    pthread_mutex_unlock(&p->mu);
}

static int per_key_count(void *state, const char *key)
{
    struct per_key *p = state;
    size_t len = strlen(key);
    pthread_mutex_lock(&p->mu);
    struct count_node *n = kcr__keytab_find(&p->tab, key, len, kcr__keytab_hash(&p->tab, key, len));
    int c = n ? n->count : 0;
    pthread_mutex_unlock(&p->mu);
    return c;
}

/* ---- exponential ------------------------------------------------------- */

static int64_t exp_when(void *state, const char *key, int64_t now_ns)
{
    struct per_key *p = state;
    pthread_mutex_lock(&p->mu);
    int failures = per_key_bump(p, key);
    pthread_mutex_unlock(&p->mu);
    if (failures < 0) /* could not record it: behave as on the first failure */
        failures = 0;
    /* base * 2^failures > max  <=>  base > max >> failures (no overflow). */
    if (failures >= 63 || p->base > (p->max >> failures))
        return p->max;
    return p->base << failures;
}

kcr_rate_limiter *kcr_rate_limiter_exponential(int64_t base_ns, int64_t max_ns)
{
    if (base_ns < 0 || max_ns < 0) {
        kcr__fail(KCR_ERR_INVALID, "kcr_rate_limiter_exponential: negative delay");
        return NULL;
    }
    struct per_key *p = per_key_new();
    if (!p) {
        kcr__fail(KCR_ERR_NOMEM, "kcr_rate_limiter_exponential: out of memory");
        return NULL;
    }
    p->base = base_ns ? base_ns : 5 * KCR_WQ_MS;
    p->max = max_ns ? max_ns : 1000 * KCR_WQ_S;
    static const kcr_rate_limiter_ops ops = {
        .when = exp_when, .forget = per_key_forget, .num_requeues = per_key_count,
        .free = per_key_free};
    return kcr_rate_limiter_new(&ops, p);
}

/* ---- fast/slow --------------------------------------------------------- */

static int64_t fast_slow_when(void *state, const char *key, int64_t now_ns)
{
    struct per_key *p = state;
    pthread_mutex_lock(&p->mu);
    int before = per_key_bump(p, key);
    pthread_mutex_unlock(&p->mu);
    return before + 1 <= p->max_fast ? p->fast : p->slow;
}

kcr_rate_limiter *kcr_rate_limiter_fast_slow(int64_t fast_ns, int64_t slow_ns, int max_fast)
{
    if (fast_ns < 0 || slow_ns < 0 || max_fast < 0) {
        kcr__fail(KCR_ERR_INVALID, "kcr_rate_limiter_fast_slow: negative argument");
        return NULL;
    }
    struct per_key *p = per_key_new();
    if (!p) {
        kcr__fail(KCR_ERR_NOMEM, "kcr_rate_limiter_fast_slow: out of memory");
        return NULL;
    }
    p->fast = fast_ns;
    p->slow = slow_ns;
    p->max_fast = max_fast;
    static const kcr_rate_limiter_ops ops = {
        .when = fast_slow_when, .forget = per_key_forget, .num_requeues = per_key_count,
        .free = per_key_free};
    return kcr_rate_limiter_new(&ops, p);
}

/* ---- token bucket ------------------------------------------------------ */

struct bucket {
    pthread_mutex_t mu;
    double qps;
    double burst;
    double tokens; /* may go negative: reservations queue up */
    int64_t last;
    bool started;
};

static int64_t bucket_when(void *state, const char *key, int64_t now_ns)
{
    struct bucket *b = state;
    pthread_mutex_lock(&b->mu);
    if (!b->started || now_ns < b->last) {
        b->started = true;
        b->last = now_ns;
    }
    double tokens = b->tokens + (double)(now_ns - b->last) * b->qps / 1e9;
    if (tokens > b->burst)
        tokens = b->burst;
    tokens -= 1;
    b->tokens = tokens;
    b->last = now_ns;
    pthread_mutex_unlock(&b->mu);
    if (tokens >= 0)
        return 0;
    return (int64_t)(-tokens * 1e9 / b->qps + 0.5); /* nearest ns */
}

static void bucket_free(void *state)
{
    struct bucket *b = state;
    pthread_mutex_destroy(&b->mu);
    free(b);
}

kcr_rate_limiter *kcr_rate_limiter_bucket(double qps, int burst)
{
    if (qps < 0 || burst < 0 || isnan(qps)) {
        kcr__fail(KCR_ERR_INVALID, "kcr_rate_limiter_bucket: negative rate or burst");
        return NULL;
    }
    struct bucket *b = calloc(1, sizeof *b);
    if (!b) {
        kcr__fail(KCR_ERR_NOMEM, "kcr_rate_limiter_bucket: out of memory");
        return NULL;
    }
    pthread_mutex_init(&b->mu, NULL);
    b->qps = qps > 0 ? qps : 10;
    b->burst = burst > 0 ? burst : 100;
    b->tokens = b->burst;
    static const kcr_rate_limiter_ops ops = {.when = bucket_when, .free = bucket_free};
    return kcr_rate_limiter_new(&ops, b);
}

/* ---- max-of ------------------------------------------------------------ */

struct max_of {
    size_t n;
    kcr_rate_limiter *children[];
};

static int64_t max_of_when(void *state, const char *key, int64_t now_ns)
{
    struct max_of *m = state;
    int64_t best = 0;
    for (size_t i = 0; i < m->n; i++) {
        int64_t d = kcr_rate_limiter_when_at(m->children[i], key, now_ns);
        if (d > best)
            best = d;
    }
    return best;
}

static void max_of_forget(void *state, const char *key)
{
    struct max_of *m = state;
    for (size_t i = 0; i < m->n; i++)
        kcr_rate_limiter_forget(m->children[i], key);
}

static int max_of_requeues(void *state, const char *key)
{
    struct max_of *m = state;
    int best = 0;
    for (size_t i = 0; i < m->n; i++) {
        int c = kcr_rate_limiter_num_requeues(m->children[i], key);
        if (c > best)
            best = c;
    }
    return best;
}

static void max_of_free(void *state)
{
    struct max_of *m = state;
    for (size_t i = 0; i < m->n; i++)
        kcr_rate_limiter_free(m->children[i]);
    free(m);
}

kcr_rate_limiter *kcr_rate_limiter_max_of(kcr_rate_limiter *const *limiters, size_t n)
{
    bool ok = n == 0 || limiters;
    for (size_t i = 0; ok && i < n; i++)
        ok = limiters[i] != NULL;
    struct max_of *m = ok ? malloc(sizeof *m + n * sizeof m->children[0]) : NULL;
    if (!m) {
        for (size_t i = 0; limiters && i < n; i++)
            kcr_rate_limiter_free(limiters[i]);
        kcr__fail(ok ? KCR_ERR_NOMEM : KCR_ERR_INVALID,
                  ok ? "kcr_rate_limiter_max_of: out of memory"
                     : "kcr_rate_limiter_max_of: NULL limiter");
        return NULL;
    }
    m->n = n;
    if (n)
        memcpy(m->children, limiters, n * sizeof m->children[0]);
    static const kcr_rate_limiter_ops ops = {.when = max_of_when, .forget = max_of_forget,
                                             .num_requeues = max_of_requeues,
                                             .free = max_of_free};
    return kcr_rate_limiter_new(&ops, m);
}

/* ---- with-max-wait ----------------------------------------------------- */

struct max_wait {
    kcr_rate_limiter *inner;
    int64_t max;
};

static int64_t max_wait_when(void *state, const char *key, int64_t now_ns)
{
    struct max_wait *w = state;
    int64_t d = kcr_rate_limiter_when_at(w->inner, key, now_ns);
    return d > w->max ? w->max : d;
}

static void max_wait_forget(void *state, const char *key)
{
    kcr_rate_limiter_forget(((struct max_wait *)state)->inner, key);
}

static int max_wait_requeues(void *state, const char *key)
{
    return kcr_rate_limiter_num_requeues(((struct max_wait *)state)->inner, key);
}

static void max_wait_free(void *state)
{
    struct max_wait *w = state;
    kcr_rate_limiter_free(w->inner);
    free(w);
}

kcr_rate_limiter *kcr_rate_limiter_with_max_wait(kcr_rate_limiter *inner, int64_t max_wait_ns)
{
    struct max_wait *w = inner && max_wait_ns >= 0 ? malloc(sizeof *w) : NULL;
    if (!w) {
        kcr_rate_limiter_free(inner);
        kcr__fail(inner && max_wait_ns >= 0 ? KCR_ERR_NOMEM : KCR_ERR_INVALID,
                  "kcr_rate_limiter_with_max_wait: %s",
                  inner && max_wait_ns >= 0 ? "out of memory" : "NULL inner or negative wait");
        return NULL;
    }
    w->inner = inner;
    w->max = max_wait_ns;
    static const kcr_rate_limiter_ops ops = {.when = max_wait_when, .forget = max_wait_forget,
                                             .num_requeues = max_wait_requeues,
                                             .free = max_wait_free};
    return kcr_rate_limiter_new(&ops, w);
}

kcr_rate_limiter *kcr_rate_limiter_default(void)
{
    kcr_rate_limiter *parts[2] = {kcr_rate_limiter_exponential(5 * KCR_WQ_MS, 1000 * KCR_WQ_S),
                                  kcr_rate_limiter_bucket(10, 100)};
    return kcr_rate_limiter_max_of(parts, 2);
}
